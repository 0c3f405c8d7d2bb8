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
// Work items (warps) per CTA. Four warps' rings fill most of an SM's shared memory, so one CTA runs per SM and
// every SM of a launch that splits to one wave (pick_splits) holds the same number of warps.
inline constexpr int kWarps = 4;
inline constexpr int kFamilies[] = {64, 128, 256};
constexpr int family_head_dim(int64_t head_dim) {
  for (int family : kFamilies) {
    if (head_dim <= family) return family;
  }
  return 0;
}

// Small tiles in a deep ring: a warp keeps kStages - 1 tiles in flight while it computes one, 24 KB of K and V at
// d 64 and 128, which keeps HBM busy with four warps an SM.
template <int HeadDim>
struct DecodeTile {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockN = HeadDim == 64 ? 32 : 16;
  static constexpr int kStages = HeadDim == 256 ? 3 : 4;
  static constexpr int kChunksPerRow = HeadDim / kChunkElems;
  // Rows of whole chunks, unpadded, with chunk ch of row r stored at slot ch ^ (r % 8) (chunk()): the 8 rows of one
  // ldmatrix phase fall in distinct bank groups, and every row a cp.async instruction fills is one aligned 128-byte
  // span of shared memory, so the copy takes each 32-byte sector of the row once. Rows padded to an odd number of
  // chunks would split a copy's sectors at the shared-memory lines: 1.5 L2 sector requests per sector of K and V
  // (docs/design/inference-path.md).
  static constexpr int kPitchBytes = kChunksPerRow * kChunkBytes;
  static_assert(kChunksPerRow >= 8, "the swizzle permutes 8 chunks of a row");
  // Byte offset of chunk ch of row r within its row, and within a tile.
  static constexpr uint32_t slot(int r, int ch) { return static_cast<uint32_t>((ch ^ (r % 8)) * kChunkBytes); }
  static constexpr uint32_t chunk(int r, int ch) { return static_cast<uint32_t>(r * kPitchBytes) + slot(r, ch); }
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
// (pick_splits) splits until one wave of them runs.
template <int HeadDim>
constexpr int resident_warps() {
  constexpr int kCtaBytes = kWarps * DecodeTile<HeadDim>::kWarpBytes + 1024;
  return (228 * 1024 / kCtaBytes) * kWarps;
}
constexpr int resident_warps(int head_dim_padded) {
  return head_dim_padded == 64 ? resident_warps<64>() : head_dim_padded == 128 ? resident_warps<128>() : resident_warps<256>();
}
static_assert(resident_warps<64>() == kWarps && resident_warps<128>() == kWarps && resident_warps<256>() == kWarps,
              "one decode CTA an SM");

}  // namespace flashcheck::decode
