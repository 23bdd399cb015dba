//===- Philox.h - Counter-based random numbers, host and device --*- C++ -*-===/
//-*-===//
//
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011) and the dropout mask drawn from it. A
// counter-based generator has no state: the draw for a counter is a pure
// function of (key, counter), so any element of a tensor can be drawn
// alone, by any rank, in any order. Dropout keys it by the op's seed and
// uses the element's row-major index in the GLOBAL tensor (and the training
// step) as the counter, so a partitioned run draws exactly the
// single-device mask. Written once for the CPU and the CUDA kernels: under
// nvcc the functions are __host__ __device__.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_COMMON_OPS_PHILOX_H
#define LOOM_COMMON_OPS_PHILOX_H

#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

namespace loom::ops::philox {

/// Four 32-bit words: a counter, or the generator's output for one.
struct Words {
  uint32_t v[4];
};

/// Philox4x32-10: the 128-bit output for `counter` under the 64-bit key
/// (`k0`, `k1`).
LOOM_HOST_DEVICE inline Words philox4x32(Words c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c.v[0];
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c.v[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32),
             lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32),
             lo1 = static_cast<uint32_t>(p1);
    c = Words{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

/// A uniform float in [0, 1), a multiple of 2^-24 (exact in f32), for
/// element `index` of a tensor at training step `step` under `seed`: the
/// key is the seed, the counter (index low, index high, step, 0).
LOOM_HOST_DEVICE inline float uniform(uint64_t seed, uint32_t step,
                                      uint64_t index) {
  Words c{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
           step, 0u}};
  Words r = philox4x32(c, static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(r.v[0] >> 8) * (1.0f / 16777216.0f);
}

/// Whether dropout keeps element `index`: its uniform draw is at least
/// `ratio` (so it is kept with probability 1 - ratio).
LOOM_HOST_DEVICE inline bool dropoutKeeps(uint64_t seed, uint32_t step,
                                          uint64_t index, float ratio) {
  return uniform(seed, step, index) >= ratio;
}

/// What a kept element is multiplied by: 1 / (1 - ratio), rounded once.
LOOM_HOST_DEVICE inline float dropoutScale(float ratio) {
  return 1.0f / (1.0f - ratio);
}

/// The training step as the counter's word: the runtime's step scalar
/// (1 for the first step) as a float, rounded toward zero.
LOOM_HOST_DEVICE inline uint32_t stepWord(float step) {
  return step > 0 ? static_cast<uint32_t>(static_cast<int64_t>(step)) : 0u;
}

/// The most dimensions a GlobalIndexer handles.
inline constexpr int kMaxIndexRank = 8;

/// Maps the row-major index of an element of a block (a rank's shard) to
/// its row-major index in the global tensor the block lies in.
struct GlobalIndexer {
  int rank = 0;
  int64_t local[kMaxIndexRank] = {};
  /// Per dimension, the global stride in elements and the block's offset.
  int64_t stride[kMaxIndexRank] = {};
  int64_t offset[kMaxIndexRank] = {};
  /// The block is the whole tensor: the indices agree.
  bool whole = true;
  /// Added to every global index (dropout's index_offset).
  uint64_t base = 0;

  LOOM_HOST_DEVICE uint64_t operator()(int64_t localIndex) const {
    if (whole)
      return base + static_cast<uint64_t>(localIndex);
    int64_t global = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t i = localIndex % local[d];
      localIndex /= local[d];
      global += (i + offset[d]) * stride[d];
    }
    return base + static_cast<uint64_t>(global);
  }
};

/// The indexer of a block of shape `localShape` (rank `rank`) at `offsets`
/// in a tensor of `globalShape`; false if the rank exceeds kMaxIndexRank.
inline bool makeGlobalIndexer(int rank, const int64_t *localShape,
                              const int64_t *globalShape,
                              const int64_t *offsets, GlobalIndexer &out) {
  if (rank > kMaxIndexRank)
    return false;
  out = GlobalIndexer{};
  out.rank = rank;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    out.local[d] = localShape[d] > 0 ? localShape[d] : 1;
    out.stride[d] = stride;
    out.offset[d] = offsets[d];
    stride *= globalShape[d];
    if (localShape[d] != globalShape[d] || offsets[d] != 0)
      out.whole = false;
  }
  return true;
}

} // namespace loom::ops::philox

#endif // LOOM_COMMON_OPS_PHILOX_H
