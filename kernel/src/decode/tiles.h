// Tile configuration of the decode family (decode/kernel.cuh), host- and device-visible (no CUDA headers) so
// decode_select() and the kernel read the same numbers. One warp is one work item: the 16 rows of an m16 mma tile
// hold every query row of the query heads that share one K/V head (GQA packing: heads_q / heads_kv heads of at most
// 16 / (heads_q / heads_kv) rows each), and the warp streams its run of K/V tiles through its own cp.async ring.
#pragma once

#include <cstdint>

namespace flashcheck::decode {

inline constexpr int kRows = 16;           // the mma's m: query rows of a work item
inline constexpr int kChunkBytes = 16;     // one cp.async / ldmatrix row
inline constexpr int kChunkElems = 8;      // fp16/bf16 elements per chunk
inline constexpr int kWarps = 2;           // work items (warps) per CTA
inline constexpr int kFamilies[] = {64, 128, 256};
constexpr int family_head_dim(int64_t head_dim) {
  for (int family : kFamilies) {
    if (head_dim <= family) return family;
  }
  return 0;
}

// Small tiles in a deep ring: a warp keeps kStages - 1 tiles in flight while it computes one, about 26 KB of K and
// V at d 64 and 128, which is what keeps HBM busy with six warps an SM.
template <int HeadDim>
struct DecodeTile {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockN = HeadDim == 64 ? 32 : 16;
  static constexpr int kStages = HeadDim == 256 ? 3 : 4;
  static constexpr int kChunksPerRow = HeadDim / kChunkElems;
  // Odd pitch in chunks: the 8 rows of one ldmatrix phase fall in distinct bank groups.
  static constexpr int kPitchBytes = (kChunksPerRow | 1) * kChunkBytes;
  static constexpr int kQBytes = kRows * kPitchBytes;  // staged in the second stage before the first K/V tile there
  static constexpr int kTileBytes = kBlockN * kPitchBytes;
  static constexpr int kStageBytes = 2 * kTileBytes;  // K then V
  static constexpr int kWarpBytes = kStages * kStageBytes;
  static constexpr int kRowsPerLane = (kBlockN + 31) / 32;             // row addresses a lane resolves per tile
  static constexpr int kChunkIters = kBlockN * kChunksPerRow / 32;     // 16-byte copies a lane issues per tile
  static_assert(kQBytes <= kStageBytes, "Q fits a stage");
  // Every lane issues the same number of copies, and a lane's rows are whole multiples of 32 / kChunksPerRow apart.
  static_assert((kBlockN * kChunksPerRow) % 32 == 0 && (32 % kChunksPerRow == 0 || kChunksPerRow % 32 == 0),
                "whole copy rounds");
  static constexpr int kSmemBytes = kWarps * kWarpBytes;
  static constexpr int kNS = kBlockN / 8;      // n8 tiles of S
  static constexpr int kNO = HeadDim / 8;      // n8 tiles of O
  static constexpr int kKSteps = HeadDim / 16;  // k16 steps of S
  static constexpr int kPvSteps = kBlockN / 16;  // k16 steps of P V
  static_assert(kBlockN % 16 == 0 && kNO % 2 == 0 && kNS % 2 == 0, "whole x4 ldmatrix loads");
  static_assert(kSmemBytes <= 227 * 1024, "decode tiles exceed the per-block shared memory");
};

// Warps resident per SM: shared memory decides (228 KB an SM, 1 KB of it reserved a CTA). The split heuristic
// fills whole waves of them.
template <int HeadDim>
constexpr int resident_warps() {
  constexpr int kCtaBytes = kWarps * DecodeTile<HeadDim>::kWarpBytes + 1024;
  return (228 * 1024 / kCtaBytes) * kWarps;
}
constexpr int resident_warps(int head_dim_padded) {
  return head_dim_padded == 64 ? resident_warps<64>() : head_dim_padded == 128 ? resident_warps<128>() : resident_warps<256>();
}

}  // namespace flashcheck::decode
