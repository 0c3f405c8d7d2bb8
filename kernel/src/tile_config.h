// Tile configurations of the kernel families: one template per family that derives threads, shared-memory
// bytes and the grid from its tile sizes, with static_asserts guarding the kernel's assumptions, and one
// constexpr choice function per architecture. Host code (select functions, host model) reads the sizes
// from here too, so the CPU tier aims at the same tile boundaries the GPU uses.
#pragma once

#include <cstdint>

namespace flashcheck::detail {

inline constexpr int kWarpSize = 32;
inline constexpr int64_t kSmemBytesPerBlockMax = 227 * 1024;    // sm_90 opt-in limit per block
inline constexpr int64_t kSmemBytesDefault = 48 * 1024;         // above this a kernel must opt in
inline constexpr int64_t kGridXMax = (int64_t{1} << 31) - 1;    // gridDim.x limit; work beyond loops
inline constexpr int kFloat4Lanes = 4;                          // floats per 128-bit shared-memory access

// General (CUDA-core) family. A block of kWarps warps owns kBlockM = kWarps * kRowsPerWarp query rows.
// Scores: lane l of a warp computes keys l, l + 32, ... of the K tile for all of its warp's rows.
// P*V: lane l owns head dims l, l + 32, ... of the accumulator of all of its warp's rows, so the
// (kRowsPerWarp, kHeadDim) accumulator lives in registers, kDimsPerLane per row and lane.
template <int HeadDim, int BlockN, int Warps, int RowsPerWarp>
struct GeneralTileConfig {
  static constexpr int kHeadDim = HeadDim;  // padded head_dim; dims >= params.head_dim are zero in smem
  static constexpr int kBlockN = BlockN;
  static constexpr int kWarps = Warps;
  static constexpr int kRowsPerWarp = RowsPerWarp;
  static constexpr int kBlockM = Warps * RowsPerWarp;
  static constexpr int kThreads = Warps * kWarpSize;
  // Stated explicitly: without it ptxas caps small-head variants at 128 registers and spills the
  // accumulator; shared memory limits residency to 2-4 blocks per SM anyway.
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr int kKeysPerLane = BlockN / kWarpSize;
  static constexpr int kDimsPerLane = HeadDim / kWarpSize;
  // K rows are read by 32 lanes at once (one key each) as float4: a pad of one float4 per row puts the
  // 8 lanes of each 128-bit phase on distinct bank groups.
  static constexpr int kKRowStride = HeadDim + kFloat4Lanes;

  static constexpr int64_t kQSmemFloats = int64_t{kBlockM} * HeadDim;      // (kBlockM, kHeadDim)
  static constexpr int64_t kKSmemFloats = int64_t{BlockN} * kKRowStride;   // (kBlockN, kKRowStride)
  static constexpr int64_t kVSmemFloats = int64_t{BlockN} * HeadDim;       // (kBlockN, kHeadDim)
  static constexpr int64_t kPSmemFloats = int64_t{kBlockM} * BlockN;       // (kBlockM, kBlockN)
  static constexpr int64_t kSmemBytes =
      (kQSmemFloats + kKSmemFloats + kVSmemFloats + kPSmemFloats) * int64_t{sizeof(float)};

  // One block per (Q tile, head, batch) work item, capped by the grid limit (blocks then loop over work).
  static constexpr int64_t grid_blocks(int64_t work_items) {
    return work_items < kGridXMax ? work_items : kGridXMax;
  }

  static_assert(HeadDim % kWarpSize == 0, "general: each lane must own the same number of head dims");
  static_assert(HeadDim % kFloat4Lanes == 0, "general: Q and K rows are read as float4");
  static_assert(BlockN % kWarpSize == 0, "general: each lane must own the same number of keys of a K tile");
  static_assert(BlockN % kFloat4Lanes == 0, "general: P rows are read as float4 in P*V");
  static_assert(RowsPerWarp >= 1 && Warps >= 1, "general: a block needs at least one warp and one row per warp");
  static_assert(kThreads <= 1024, "general: at most 1024 threads per block");
  static_assert(kSmemBytes <= kSmemBytesPerBlockMax, "general: tiles exceed the shared memory of one block");
};

// Tile sizes of the general family per padded head_dim (sm_90; CUDA cores). Registers per thread are
// dominated by the accumulator (kRowsPerWarp * kDimsPerLane) and the scores (kRowsPerWarp * kKeysPerLane).
struct GeneralTileChoice {
  int head_dim_padded;
  int block_n;
  int warps;
  int rows_per_warp;
};
constexpr GeneralTileChoice general_tile_choice(int64_t head_dim) {
  // Small heads: 64 keys per tile halves the K/V tile loop overhead; 8 rows per warp reuse each K/V read.
  if (head_dim <= 32) return {32, 64, 4, 8};
  if (head_dim <= 64) return {64, 64, 4, 8};
  // 128: same shape; 32 accumulator floats per lane, ~90 KB smem leaves room for two blocks per SM.
  if (head_dim <= 128) return {128, 64, 4, 8};
  // 256: 32 keys per tile keeps K+V at 64 KB; 64 accumulator floats per lane still fit without spills.
  return {256, 32, 4, 8};
}

template <int HeadDimPadded>
using GeneralConfigFor =
    GeneralTileConfig<HeadDimPadded, general_tile_choice(HeadDimPadded).block_n,
                      general_tile_choice(HeadDimPadded).warps, general_tile_choice(HeadDimPadded).rows_per_warp>;

}  // namespace flashcheck::detail
