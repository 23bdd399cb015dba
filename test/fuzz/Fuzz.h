//===- Fuzz.h - Loom's structured fuzzer: readers and mutators --*- C++ -*-===//
//
// The in-tree fuzzing harness (docs/reliability.md, "Fuzzing"): each reader
// of user files (the ONNX importer, the plan validator, the strategy,
// profile and checkpoint readers, the .npy and TensorProto readers) is a
// Target. The driver (FuzzMain.cpp) draws inputs from the target's seeds
// with a fixed seed, mutates them (byte-level, JSON-aware and
// protobuf-aware mutations, below) and runs the reader on each. An input
// passes when the reader accepts it or rejects it with a message; a crash,
// hang or sanitizer report fails the run, and so does a broken promise
// (a message that does not name the file) or a run whose inputs never got
// past the reader's first check.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_FUZZ_FUZZ_H
#define LOOM_TEST_FUZZ_FUZZ_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace google::protobuf {
class Message;
} // namespace google::protobuf

namespace loom::fuzz {

/// A deterministic random source (splitmix64): the same seed gives the same
/// inputs on every machine, so that a failure reproduces.
class Rng {
public:
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n); 0 when n is 0.
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  /// True with probability percent / 100.
  bool chance(unsigned percent) { return below(100) < percent; }
  template <typename T> const T &pick(const std::vector<T> &v) {
    return v[below(v.size())];
  }

private:
  uint64_t state;
};

/// One named seed input.
struct Seed {
  std::string name;
  std::string bytes;
};

/// What a reader made of one input.
struct Outcome {
  bool accepted = false;
  /// For a rejection: which check refused it, one of the target's stages().
  std::string stage;
  /// The reader's message for a rejection.
  std::string message;
  /// A promise the reader broke on this input ("the message does not name
  /// the file"); "" when none. Fails the run.
  std::string violation;
};

/// Where the driver runs: the tree's sources, a scratch directory, and the
/// directory of plans `loom compile` made for seeds.
struct Config {
  std::string sourceDir, workDir, planSeedDir;
};

/// One reader under fuzzing.
class Target {
public:
  virtual ~Target() = default;
  /// The seeds to mutate; loaded once, before the first input.
  virtual std::vector<Seed> seeds(const Config &config) = 0;
  /// The checks that can refuse an input, shallowest first (e.g. "parse",
  /// "validate"). The driver fails a run in which no input got past the
  /// first.
  virtual std::vector<std::string> stages() const = 0;
  /// Makes one input from `corpus` (the seeds and regression files).
  virtual std::string mutate(const std::vector<Seed> &corpus, Rng &rng) = 0;
  /// Runs the reader on `input`.
  virtual Outcome run(const std::string &input) = 0;
};

std::unique_ptr<Target> makeOnnxTarget(const Config &config);
std::unique_ptr<Target> makeTensorProtoTarget(const Config &config);
std::unique_ptr<Target> makePlanTarget(const Config &config);
std::unique_ptr<Target> makeStrategyTarget(const Config &config);
std::unique_ptr<Target> makeProfileTarget(const Config &config);
std::unique_ptr<Target> makeCheckpointTarget(const Config &config);
std::unique_ptr<Target> makeNpyTarget(const Config &config);

//===----------------------------------------------------------------------===//
// Mutators (Mutators.cpp, ProtoMutator.cpp)
//===----------------------------------------------------------------------===//

/// Applies one byte-level mutation to `data`: a bit flip, a byte set to a
/// boundary value, an insertion, deletion or duplication of a run of bytes,
/// a truncation, an integer (1, 2, 4 or 8 bytes, either endianness)
/// replaced by a boundary value, or a splice with `other`.
void mutateBytes(std::string &data, Rng &rng, const std::string &other);

/// Applies 1 to `max` stacked byte-level mutations.
void mutateBytesStacked(std::string &data, Rng &rng, const std::string &other,
                        unsigned max = 4);

/// A mutation of JSON text that knows its structure: a value replaced by
/// another of its type (a string of the document, a nearby number) or one
/// of another type, a boundary or out-of-range number (1e999, 2^64, -0,
/// ...), a long string, a nesting near or beyond any depth limit,
/// a key removed, duplicated or unknown, an array's elements duplicated or
/// dropped, a subtree copied from `other`. Text that is not JSON gets a
/// byte-level mutation.
std::string mutateJson(const std::string &text, Rng &rng,
                       const std::string &other);

/// Applies one mutation to a protobuf message through reflection: a field
/// set to a boundary value, a string or bytes field mutated (or replaced by
/// another string of the message, e.g. one value name for another), a
/// repeated field's element dropped, duplicated or swapped, a submessage
/// cleared or replaced by another of its type, an unset field set.
void mutateMessage(google::protobuf::Message &message, Rng &rng);

/// The common recipe: parse `seed` as `prototype`'s type, apply 1 to 4
/// mutateMessage mutations and serialize; with some chance a byte-level
/// mutation follows, and sometimes only byte-level mutations are made
/// (also when the seed does not parse).
std::string mutateProtoBytes(const std::string &seed,
                             const google::protobuf::Message &prototype,
                             Rng &rng, const std::string &other);

/// Reads the file at `path` whole; "" when it cannot be read.
std::string readFileOrEmpty(const std::string &path);

/// Seeds from every regular file in `dir` (sorted by name; none when the
/// directory is missing).
std::vector<Seed> seedsFromDirectory(const std::string &dir);

} // namespace loom::fuzz

#endif // LOOM_TEST_FUZZ_FUZZ_H
