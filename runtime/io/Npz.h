//===- Npz.h - Writing NumPy .npz archives ----------------------*- C++ -*-===//
//
// An .npz archive is a zip of .npy files, one per array, stored without
// compression; numpy.load reads it as a mapping from names to arrays. Loom
// writes trained parameters this way (`loom export --state-dict`), so that
// PyTorch takes them with `load_state_dict` without Loom installed.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_NPZ_H
#define LOOM_RUNTIME_IO_NPZ_H

#include "runtime/Tensor.h"

#include <string>
#include <utility>
#include <vector>

namespace loom::rt {

/// Writes `arrays` (name, tensor) to `path` as an .npz archive, each array
/// as NAME.npy in writeNpy's format, in the order given. The archive is
/// written to a temporary file and renamed into place. Returns false and
/// sets `error` (naming the file or the array) when an array is malformed,
/// the archive would pass zip's 4 GiB limits, or the file cannot be
/// written.
bool writeNpz(const std::string &path,
              const std::vector<std::pair<std::string, TensorView>> &arrays,
              std::string &error);

} // namespace loom::rt

#endif // LOOM_RUNTIME_IO_NPZ_H
