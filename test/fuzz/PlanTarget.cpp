//===- PlanTarget.cpp - Fuzzing the plan reader and validator -------------===//
//
// Plans `loom compile` made (the fuzz-plan-seeds fixture: one device,
// data, tensor and pipeline parallel, ZeRO), mutated field by field and
// read as `loom explain` reads them: parsePlan without the checksum (which
// would shield the validator from every mutated plan), validatePlan against
// the CPU backend, and for a plan the validator accepts, the explanation
// printed, since explain trusts its indices once the plan is valid.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include "common/plan/plan.pb.h"
#include "compiler/explain/Explain.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"

#include "llvm/Support/raw_ostream.h"

namespace loom::fuzz {

namespace {

class PlanTarget : public Target {
public:
  explicit PlanTarget(const Config &config)
      : name(config.workDir + "/fuzz.plan"), backend(rt::createCpuBackend()) {
    backend->setNumThreads(1);
  }

  std::vector<Seed> seeds(const Config &config) override {
    std::vector<Seed> out;
    for (Seed &s : seedsFromDirectory(config.planSeedDir))
      if (s.name.size() > 5 && s.name.substr(s.name.size() - 5) == ".plan")
        out.push_back(std::move(s));
    return out;
  }

  std::vector<std::string> stages() const override {
    return {"parse", "validate"};
  }

  std::string mutate(const std::vector<Seed> &corpus, Rng &rng) override {
    return mutateProtoBytes(rng.pick(corpus).bytes, plan::Plan(), rng,
                            rng.pick(corpus).bytes);
  }

  Outcome run(const std::string &input) override {
    Outcome o;
    std::string error;
    std::optional<plan::Plan> plan =
        rt::parsePlan(input, name, error, /*requireChecksum=*/false);
    if (!plan) {
      o.message = error;
      o.stage = "parse";
      if (error.rfind(name + ": ", 0) != 0)
        o.violation = "the message does not start with the file's name";
      return o;
    }
    std::string invalid = rt::validatePlan(*plan, *backend);
    if (!invalid.empty()) {
      o.message = invalid;
      o.stage = "validate";
      return o;
    }
    o.accepted = true;
    explain::PrintOptions options;
    options.top = 3;
    explain::printExplanation(*plan, "plan", options, llvm::nulls());
    (void)explain::describeArenaPeak(*plan, 3);
    return o;
  }

private:
  std::string name;
  std::unique_ptr<rt::Backend> backend;
};

} // namespace

std::unique_ptr<Target> makePlanTarget(const Config &config) {
  return std::make_unique<PlanTarget>(config);
}

} // namespace loom::fuzz
