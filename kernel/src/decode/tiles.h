// Tile configuration of the decode family (decode/kernel.cuh), host- and device-visible (no CUDA headers) so
// decode_select() and the kernel read the same numbers. One warp is one work item: the 16 rows of an m16 mma tile
// hold every query row of the query heads that share one K/V head (GQA packing: heads_q / heads_kv heads of at most
// 16 / (heads_q / heads_kv) rows each), and the warp streams its run of K/V tiles through its own two-stage cp.async
// ring. 64 keys of d 64, 32 of d 128 or 16 of d 256 a tile: 16 KB of K and V a stage whatever the head_dim.
#pragma once

#include <cstdint>

namespace flashcheck::decode {

inline constexpr int kRows = 16;           // the mma's m: query rows of a work item
inline constexpr int kChunkBytes = 16;     // one cp.async / ldmatrix row
inline constexpr int kChunkElems = 8;      // fp16/bf16 elements per chunk
inline constexpr int kWarps = 4;           // work items (warps) per CTA
inline constexpr int kStages = 2;
inline constexpr int kFamilies[] = {64, 128, 256};
// Work items per SM the split heuristic aims at (the CTA's warps, about two CTAs' worth in flight).
inline constexpr int kItemsPerSm = 8;

constexpr int family_head_dim(int64_t head_dim) {
  for (int family : kFamilies) {
    if (head_dim <= family) return family;
  }
  return 0;
}

template <int HeadDim>
struct DecodeTile {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockN = 4096 / HeadDim;
  static constexpr int kChunksPerRow = HeadDim / kChunkElems;
  // Odd pitch in chunks: the 8 rows of one ldmatrix phase fall in distinct bank groups.
  static constexpr int kPitchBytes = (kChunksPerRow | 1) * kChunkBytes;
  static constexpr int kQBytes = kRows * kPitchBytes;
  static constexpr int kTileBytes = kBlockN * kPitchBytes;
  static constexpr int kStageBytes = 2 * kTileBytes;  // K then V
  static constexpr int kWarpBytes = kQBytes + kStages * kStageBytes;
  static constexpr int kSmemBytes = kWarps * kWarpBytes;
  static constexpr int kNS = kBlockN / 8;      // n8 tiles of S
  static constexpr int kNO = HeadDim / 8;      // n8 tiles of O
  static constexpr int kKSteps = HeadDim / 16;  // k16 steps of S
  static constexpr int kPvSteps = kBlockN / 16;  // k16 steps of P V
  static_assert(kBlockN % 16 == 0 && kNO % 2 == 0 && kNS % 2 == 0, "whole x4 ldmatrix loads");
  static_assert(kSmemBytes <= 227 * 1024, "decode tiles exceed the per-block shared memory");
};

}  // namespace flashcheck::decode
