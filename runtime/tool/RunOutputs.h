//===- RunOutputs.h - What `loom run` writes, and checks first --*- C++ -*-===//
//
// The files `loom run` writes besides its messages: the checks of every
// output path, made before any step runs (a run of hours must not end in
// "cannot write"), and the --comm-report file; and how its reports spell
// outputs, bytes and schedules.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_TOOL_RUNOUTPUTS_H
#define LOOM_RUNTIME_TOOL_RUNOUTPUTS_H

#include "runtime/Executor.h"
#include "runtime/tool/RunOptions.h"

#include <cstdio>
#include <string>

namespace loom::rt {

/// printf-style formatting of one number, for the run's reports.
template <typename T> std::string format(const char *spec, T value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

/// "" when every path `options` writes can be written, else what is wrong,
/// naming the flag and the path: a file (--trace, --metrics, --comm-report)
/// that is a directory, lies in a directory that does not exist or cannot
/// be written, or is one of the run's inputs (the plan, a --data file, the
/// --tokens file); a directory (--save, --outputs) that is a file, cannot be
/// created or written, or (--save) holds a checkpoint of the first format.
std::string checkRunOutputs(const RunOptions &options);

/// "" unless some but not all of a training plan's inputs (`planInputs`)
/// were given data (`given`, their names): training on data for some and
/// random values for others (the labels, typically) is never what was
/// meant, so that is an error naming the inputs left out.
std::string checkTrainingData(const std::vector<IOInfo> &planInputs,
                              const std::vector<std::string> &given);

/// min / max / mean of a float output, for the summary line.
std::string summarize(const TensorView &v);

/// Bytes for people: "512 bytes", "27.5 KiB", "1.2 MiB", "3.0 GiB".
std::string formatBytes(int64_t bytes);

/// The schedule's name, as the compiler's --schedule spells it.
const char *scheduleName(plan::Schedule::Kind kind);

/// --comm-report: rank 0's per-collective statistics, one JSON object per
/// line; "" or why it could not be written.
std::string writeCommReport(const Executor &exec, const std::string &path);

} // namespace loom::rt

#endif // LOOM_RUNTIME_TOOL_RUNOUTPUTS_H
