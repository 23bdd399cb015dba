//===- Job.cpp - loom._loom.Job: a plan's ranks in this process -----------===//
//
// A Job loads a plan on every rank it runs: all of the plan's devices as
// threads of this process over the threads communicator, or, under mpirun,
// this process's one rank over MPI (comm "auto" tells which, as `loom run`
// does). Its interface speaks of
// GLOBAL tensors, as the executor's does: inputs are the whole step's
// batch (each rank keeps its shard), and state is gathered whole.
//
// Every call that runs ranks releases the GIL and runs them on threads of
// their own, one per rank, which end before the call returns. A rank that
// fails before its first collective of the call (a bad input, a plan it
// cannot load) fails the call on every rank; one that fails inside a step,
// after others have entered a collective, cannot stop them (the
// communicators have no way to abort a collective), as with `loom run`.
//
//===----------------------------------------------------------------------===//

#include "python/src/Bindings.h"

#include "runtime/Backend.h"
#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/PlanLayout.h"
#include "runtime/comm/Communicator.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <functional>
#include <map>
#include <thread>

namespace py = pybind11;

namespace loom::python {
namespace {

using rt::DType;

DType dtypeOf(const py::array &a, const std::string &name) {
  py::dtype d = a.dtype();
  if (d.is(py::dtype::of<float>()))
    return DType::F32;
  if (d.is(py::dtype("float16")))
    return DType::F16;
  if (d.is(py::dtype::of<int32_t>()))
    return DType::I32;
  if (d.is(py::dtype::of<int64_t>()))
    return DType::I64;
  if (d.is(py::dtype::of<bool>()))
    return DType::Bool;
  throw py::value_error("'" + name + "' has element type " +
                        std::string(py::str(d)) +
                        "; Loom takes float32, float16, int32, int64 or bool");
}

/// A copy of `v` as a numpy array (bf16, which numpy lacks, widened to
/// float32).
py::array toNumpy(const rt::TensorView &v) {
  std::vector<py::ssize_t> shape(v.shape.begin(), v.shape.end());
  if (v.dtype == DType::BF16) {
    py::array_t<float> a(shape);
    const uint16_t *in = v.as<uint16_t>();
    float *out = a.mutable_data();
    for (int64_t i = 0, n = v.numElements(); i < n; ++i)
      out[i] = rt::bf16ToFloat(in[i]);
    return std::move(a);
  }
  py::dtype dtype = v.dtype == DType::F32   ? py::dtype::of<float>()
                    : v.dtype == DType::F16 ? py::dtype("float16")
                    : v.dtype == DType::I32 ? py::dtype::of<int32_t>()
                    : v.dtype == DType::I64 ? py::dtype::of<int64_t>()
                                            : py::dtype::of<bool>();
  py::array a(dtype, shape);
  std::memcpy(a.mutable_data(), v.data, v.bytes());
  return a;
}

/// A C-contiguous numpy array's data as a TensorView (no copy).
rt::TensorView viewOf(const py::array &a, const std::string &name) {
  rt::TensorView v;
  v.dtype = dtypeOf(a, name);
  for (py::ssize_t d = 0; d < a.ndim(); ++d)
    v.shape.push_back(a.shape(d));
  v.data = const_cast<void *>(a.data());
  return v;
}

py::list describe(const std::vector<rt::IOInfo> &infos) {
  py::list out;
  for (const rt::IOInfo &i : infos)
    out.append(py::make_tuple(i.name, rt::dtypeName(i.dtype), i.shape));
  return out;
}

class Job {
public:
  Job(const py::bytes &planBytes, const std::string &backend,
      const std::string &comm, int threads) {
    std::string error;
    std::optional<plan::Plan> plan =
        rt::parsePlan(std::string(planBytes), "plan", error);
    if (!plan)
      throw py::value_error(error);
    if (backend != "cpu" && backend != "cuda")
      throw py::value_error("backend must be 'cpu' or 'cuda', not '" + backend +
                            "'");
    if (backend == "cuda" && rt::cudaDeviceCount(error) == 0)
      throw RunFailure("backend 'cuda': " + error);
    std::optional<layout::Mesh> mesh;
    int64_t devices = 1;
    if (rt::meshFromProto(plan->mesh(), mesh, error) && mesh)
      devices = mesh->numDevices();
    std::string kind = comm;
    // Under mpirun a plan of several devices takes one rank per process; a
    // one-device plan runs whole in every process.
    if (kind == "auto")
      kind = rt::launchedByMpirun() && devices > 1 ? "mpi" : "threads";
    if (kind == "mpi") {
      mpi = rt::createMpiCommunicator(error);
      if (!mpi)
        throw RunFailure("comm 'mpi': " + error);
      if (mpi->worldSize() != devices)
        throw py::value_error(
            "the plan has " + std::to_string(devices) +
            " devices but mpirun started " + std::to_string(mpi->worldSize()) +
            " processes: start one per device, or pass comm='threads' to "
            "run every rank in each process");
      ranks.resize(1);
      ranks[0].index = mpi->rank();
      ranks[0].comm = devices > 1 ? mpi.get() : nullptr;
    } else if (kind == "threads") {
      ranks.resize(devices);
      if (devices > 1)
        comms = rt::createThreadsCommunicators(devices);
      for (int64_t r = 0; r < devices; ++r) {
        ranks[r].index = r;
        ranks[r].comm = devices > 1 ? comms[r].get() : nullptr;
      }
    } else {
      throw py::value_error("comm must be 'auto', 'threads' or 'mpi', not '" +
                            comm + "'");
    }
    int total = threads > 0
                    ? threads
                    : static_cast<int>(std::thread::hardware_concurrency());
    int perRank = std::max(1, total / static_cast<int>(ranks.size()));
    std::vector<std::string> errors(ranks.size());
    {
      py::gil_scoped_release release;
      onEveryRank(errors, [&](size_t i, Rank &rank) {
        std::string e;
        rank.backend =
            rt::createBackend(backend, static_cast<int>(rank.index), e);
        if (rank.backend) {
          rank.backend->setNumThreads(perRank);
          rank.exec = rt::Executor::create(*plan, *rank.backend, e,
                                           {rank.index, rank.comm});
        }
        errors[i] = e;
      });
    }
    raiseFirst(errors);
  }

  int64_t numRanks() const { return lead().numRanks(); }
  /// The first rank this process runs (0 but under mpirun).
  int64_t rank() const { return ranks.front().index; }
  bool isTraining() const { return lead().isTraining(); }
  int64_t stepsTaken() const { return lead().stepsTaken(); }
  py::list inputs() const { return describe(lead().inputs()); }
  py::list outputs() const { return describe(lead().outputs()); }
  py::list state() const {
    py::list out;
    for (const rt::StateInfo &s : lead().state())
      out.append(py::make_tuple(s.name, rt::stateKindName(s.kind),
                                rt::dtypeName(s.dtype), s.shape));
    return out;
  }

  /// Sets named inputs from global arrays on every rank of this process.
  void setInputs(const py::dict &values) {
    std::vector<std::pair<std::string, py::array>> arrays;
    for (auto item : values) {
      std::string name = py::str(item.first);
      arrays.emplace_back(name,
                          py::array::ensure(item.second, py::array::c_style));
      if (!arrays.back().second)
        throw py::value_error("input '" + name + "' is not an array");
    }
    for (auto &[name, array] : arrays) {
      rt::TensorView view = viewOf(array, name);
      for (Rank &rank : ranks) {
        std::string error;
        if (!rank.exec->setInput(name, view, error))
          throw py::value_error(error);
      }
    }
  }

  /// One training step on every rank; the step's loss.
  double trainStep() {
    if (!isTraining())
      throw py::value_error("step() needs a training plan; this one "
                            "computes a forward pass only (run it)");
    std::vector<std::string> errors(ranks.size());
    std::vector<double> losses(ranks.size());
    {
      py::gil_scoped_release release;
      onEveryRank(errors, [&](size_t i, Rank &rank) {
        double lr = 0;
        if (!rank.exec->trainStep(errors[i], nullptr, losses[i], lr) &&
            errors[i].empty())
          errors[i] = "the step failed";
      });
    }
    raiseFirst(errors);
    return losses[0];
  }

  /// A forward step on every rank; this process's first rank's outputs.
  py::dict run() {
    std::vector<std::string> errors(ranks.size());
    {
      py::gil_scoped_release release;
      onEveryRank(errors,
                  [&](size_t i, Rank &rank) { rank.exec->run(errors[i]); });
    }
    raiseFirst(errors);
    py::dict out;
    for (const rt::IOInfo &o : lead().outputs())
      out[py::str(o.name)] = toNumpy(lead().output(o.name));
    return out;
  }

  /// Every parameter, buffer and optimizer state, gathered whole.
  py::dict stateDict() {
    const std::vector<rt::StateInfo> &infos = lead().state();
    std::vector<std::vector<rt::HostBuffer>> gathered(ranks.size());
    std::vector<std::string> errors(ranks.size());
    {
      py::gil_scoped_release release;
      onEveryRank(errors, [&](size_t i, Rank &rank) {
        for (const rt::StateInfo &s : rank.exec->state()) {
          rt::HostBuffer global;
          if (!rank.exec->gatherState(s, global, errors[i]))
            return;
          if (i == 0)
            gathered[0].push_back(std::move(global));
        }
      });
    }
    raiseFirst(errors);
    py::dict out;
    for (size_t k = 0; k < infos.size(); ++k)
      if (!out.contains(infos[k].name))
        out[py::str(infos[k].name)] = toNumpy(gathered[0][k].view());
    return out;
  }

  /// Sets state from global arrays by name (no rank communicates).
  void loadState(const py::dict &values) {
    std::map<std::string, const rt::StateInfo *> byName;
    for (const rt::StateInfo &s : lead().state())
      byName.emplace(s.name, &s);
    for (auto item : values) {
      std::string name = py::str(item.first);
      if (!byName.count(name))
        throw py::value_error("the plan has no parameter, buffer or "
                              "optimizer state named '" +
                              name + "'");
      py::array array = py::array::ensure(item.second, py::array::c_style);
      if (!array)
        throw py::value_error("'" + name + "' is not an array");
      rt::TensorView view = viewOf(array, name);
      for (Rank &rank : ranks)
        for (const rt::StateInfo &s : rank.exec->state())
          if (s.name == name) {
            std::string error;
            if (!rank.exec->setStateFromGlobal(s, view, error))
              throw py::value_error(error);
          }
    }
  }

  void save(const std::string &dir) {
    checkpoint([&](rt::Executor &exec, std::string &error) {
      return rt::saveCheckpoint(exec, dir, error);
    });
  }
  void load(const std::string &dir) {
    checkpoint([&](rt::Executor &exec, std::string &error) {
      return rt::loadCheckpoint(exec, dir, error);
    });
  }

  /// The mean wall time of the steps so far on the first rank (seconds).
  double stepSeconds() const {
    const rt::StepTiming &t = lead().totalStepTiming();
    return t.steps > 0 ? t.seconds / static_cast<double>(t.steps) : 0.0;
  }

private:
  struct Rank {
    int64_t index = 0;
    rt::Communicator *comm = nullptr;
    std::unique_ptr<rt::Backend> backend;
    std::unique_ptr<rt::Executor> exec;
  };

  const rt::Executor &lead() const { return *ranks.front().exec; }

  /// `fn(i, rank)` on every rank of this process at once (one thread per
  /// rank; the calling thread alone for one rank). A rank that fails
  /// (errors[i] set) aborts its communicator's world, so that no other rank
  /// waits for it in a collective; the job cannot go on after that.
  void onEveryRank(std::vector<std::string> &errors,
                   const std::function<void(size_t, Rank &)> &fn) {
    if (ranks.size() == 1) {
      fn(0, ranks[0]);
      return;
    }
    std::vector<std::thread> workers;
    for (size_t i = 0; i < ranks.size(); ++i)
      workers.emplace_back([&, i] {
        fn(i, ranks[i]);
        if (!errors[i].empty() && ranks[i].comm)
          ranks[i].comm->abort(errors[i]);
      });
    for (std::thread &t : workers)
      t.join();
  }

  void raiseFirst(const std::vector<std::string> &errors) const {
    for (size_t i = 0; i < errors.size(); ++i)
      if (!errors[i].empty())
        throw RunFailure(ranks.size() > 1 || mpi
                             ? "rank " + std::to_string(ranks[i].index) + ": " +
                                   errors[i]
                             : errors[i]);
  }

  template <typename F> void checkpoint(F fn) {
    std::vector<std::string> errors(ranks.size());
    {
      py::gil_scoped_release release;
      onEveryRank(errors, [&](size_t i, Rank &rank) {
        if (!fn(*rank.exec, errors[i]) && errors[i].empty())
          errors[i] = "the checkpoint failed";
      });
    }
    raiseFirst(errors);
  }

  std::unique_ptr<rt::Communicator> mpi;
  std::vector<std::unique_ptr<rt::Communicator>> comms;
  std::vector<Rank> ranks;
};

} // namespace

void bindJob(py::module_ &m) {
  py::class_<Job>(m, "Job",
                  "A compiled plan loaded on its ranks in this process")
      .def(py::init<const py::bytes &, const std::string &, const std::string &,
                    int>(),
           py::arg("plan"), py::arg("backend") = "cpu",
           py::arg("comm") = "auto", py::arg("threads") = 0)
      .def_property_readonly("num_ranks", &Job::numRanks)
      .def_property_readonly("rank", &Job::rank)
      .def_property_readonly("is_training", &Job::isTraining)
      .def_property_readonly("steps_taken", &Job::stepsTaken)
      .def_property_readonly("step_seconds", &Job::stepSeconds)
      .def("inputs", &Job::inputs, "[(name, dtype, global shape)]")
      .def("outputs", &Job::outputs, "[(name, dtype, shape)]")
      .def("state", &Job::state, "[(name, kind, dtype, global shape)]")
      .def("set_inputs", &Job::setInputs, py::arg("values"))
      .def("train_step", &Job::trainStep)
      .def("run", &Job::run)
      .def("state_dict", &Job::stateDict)
      .def("load_state", &Job::loadState, py::arg("values"))
      .def("save", &Job::save, py::arg("dir"))
      .def("load", &Job::load, py::arg("dir"));
}

} // namespace loom::python
