//===- CollectiveScratch.h - A collective's packing scratch -----*- C++ -*-===//
//
// A communicator exchanges contiguous chunks, so a collective along a
// dimension other than the leading one (one with a dimension of more than
// one element before it) packs or unpacks its chunks through scratch. The
// rule below is the one the runner follows (runtime/comm/Collectives.cpp)
// and the one the plan emitter sizes each instruction's scratch by, so that
// the static memory plan covers it (Instruction.scratch_bytes). Shapes are
// one rank's, in elements; bytes are unaligned. Plain C++, header only.
//
//   reduce_scatter  along a non-leading dim: the input, packed chunk by
//                   chunk, before the exchange (the input's bytes);
//   all_gather      along a non-leading dim: the gathered chunks, before
//                   they are interleaved into the output (the output's);
//   all_to_all      the chunks to send when to_dim is not leading, then
//                   the chunks received when dim is not leading in one
//                   chunk (the input's bytes for each, send first);
//   others          none.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_PLAN_COLLECTIVESCRATCH_H
#define LOOM_COMMON_PLAN_COLLECTIVESCRATCH_H

#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::rt {

/// Where a collective's scratch holds what: bytes for the chunks it sends
/// (packed before the exchange) and for those it receives (unpacked after
/// it), the send part first. Zero where the buffer itself serves.
struct CollectiveScratch {
  int64_t sendBytes = 0;
  int64_t recvBytes = 0;
  int64_t total() const { return sendBytes + recvBytes; }
};

/// The scratch of collective `op` from `in` to `out` (one rank's shapes,
/// already checked against the op's shape rule) along `dim`, and for
/// all_to_all from `dim` to `toDim`, with elements of `elementBytes`.
inline CollectiveScratch collectiveScratch(std::string_view op,
                                           const std::vector<int64_t> &in,
                                           const std::vector<int64_t> &out,
                                           int64_t elementBytes, int dim,
                                           int toDim = -1) {
  auto count = [](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t e : shape)
      n *= e;
    return n;
  };
  // Whether a dimension before `d` of `shape` has more than one element.
  auto strided = [](const std::vector<int64_t> &shape, int d) {
    for (int k = 0; k < d && k < static_cast<int>(shape.size()); ++k)
      if (shape[k] > 1)
        return true;
    return false;
  };
  const int64_t inBytes = count(in) * elementBytes;
  CollectiveScratch s;
  if (op == "reduce_scatter") {
    if (strided(in, dim))
      s.sendBytes = inBytes;
  } else if (op == "all_gather") {
    if (strided(in, dim))
      s.recvBytes = count(out) * elementBytes;
  } else if (op == "all_to_all") {
    if (strided(in, toDim))
      s.sendBytes = inBytes;
    // One received chunk is the input cut along toDim: the output's
    // extent there.
    std::vector<int64_t> chunk = in;
    if (toDim >= 0 && toDim < static_cast<int>(chunk.size()) &&
        toDim < static_cast<int>(out.size()))
      chunk[toDim] = out[toDim];
    if (strided(chunk, dim))
      s.recvBytes = inBytes;
  }
  return s;
}

} // namespace loom::rt

#endif // LOOM_COMMON_PLAN_COLLECTIVESCRATCH_H
