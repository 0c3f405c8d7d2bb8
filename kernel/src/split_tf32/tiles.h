// Tile configuration of the split-TF32 family (fp32 inputs on tf32 tensor cores, three products per fp32
// product), host- and device-visible without CUDA headers so split_tf32_select() and the kernel read the
// same numbers. One config derives threads, shared-memory layout and per-lane fragment counts; the
// static_asserts hold the kernel's indexing assumptions (one m16 row tile per warp, float4 fragment loads,
// whole 16-byte chunk loops per thread, two blocks per SM where the config asks for them).
#pragma once

#include <cstdint>

#include "tile_config.h"

namespace flashcheck::detail::split_tf32_tiles {

inline constexpr int kMmaM = 16;  // mma.sync m16n8k8 tf32: rows of A and C
inline constexpr int kMmaN = 8;   //                        columns of B and C
inline constexpr int kMmaK = 8;   //                        reduction depth
// Q K^T: a lane's float4 holds 4 consecutive head dims = its two k-slots of two m16n8k8 steps, so a quad
// of lanes covers this many dims per pair of steps (the dims are permuted inside it; a dot product only
// needs Q and K permuted alike).
inline constexpr int kQkDimsPerLoad = 4 * kFloat4Lanes;
// P V: a lane's float4 of one V row feeds column g of 4 output n8 tiles, so the 8 lane groups of a warp
// cover this many head dims per load (the output column order is permuted to match, undone on store).
inline constexpr int kPvDimsPerLoad = kMmaN * kFloat4Lanes;
// k8 steps the tensor core sums from zero before an fp32 RN add takes over (kernel.cuh: mma_split_2steps).
inline constexpr int kStepsPerChain = 2;
// A lane holds two k-slots (t, t + 4) of each k8 step, so one Q or K float4 is exactly one chain.
static_assert(kFloat4Lanes / 2 == kStepsPerChain, "split_tf32: a Q/K float4 must feed one chain of k8 steps");
inline constexpr int64_t kSmemBytesPerSm = 228 * 1024;  // sm_90 shared memory per SM
inline constexpr int64_t kSmemBytesReservedPerBlock = 1024;

template <int HeadDim, int BlockM, int BlockN, int Warps, int MinBlocksPerSm>
struct SplitTf32TileConfig {
  static constexpr int kHeadDim = HeadDim;  // padded head_dim: dims >= params.head_dim are zero in smem
  static constexpr int kBlockM = BlockM;    // query rows per block
  static constexpr int kBlockN = BlockN;    // keys per K/V tile
  static constexpr int kWarps = Warps;
  static constexpr int kMinBlocksPerSm = MinBlocksPerSm;  // __launch_bounds__: caps registers at 64K / threads
  static constexpr int kThreads = Warps * kWarpSize;
  static constexpr int kRowsPerWarp = BlockM / Warps;
  static constexpr int kSTiles = BlockN / kMmaN;               // n8 tiles of S per warp = k8 steps of P V
  static constexpr int kQkLoads = HeadDim / kQkDimsPerLoad;    // float4 fragment loads along a Q or K row
  static constexpr int kPvLoads = HeadDim / kPvDimsPerLoad;    // float4 fragment loads along a V row
  static constexpr int kChunksPerRow = HeadDim / kFloat4Lanes;  // 16-byte cp.async chunks per smem row
  // Row pitches in floats. Q/K fragment loads: the 8 lanes of a 128-bit phase read rows g, g+1 at dims
  // 4t..4t+3 (t = 0..3); a pitch = 16 (mod 32) puts the two rows on the two halves of the 32 banks.
  // V fragment loads: the 8 lanes read rows 2t (or 2t+1) at dims 4g..4g+3 (g = 0, 1); a pitch = 4 (mod 32)
  // moves each row one 4-bank group, so rows 0, 2, 4, 6 x dims 0..7 hit 8 distinct groups.
  static constexpr int kQkRowStride = HeadDim + kQkDimsPerLoad;
  static constexpr int kVRowStride = HeadDim + kFloat4Lanes;

  static constexpr int64_t kQSmemFloats = int64_t{BlockM} * kQkRowStride;  // (kBlockM, kQkRowStride)
  static constexpr int64_t kKSmemFloats = int64_t{BlockN} * kQkRowStride;  // (kBlockN, kQkRowStride)
  static constexpr int64_t kVSmemFloats = int64_t{BlockN} * kVRowStride;   // (kBlockN, kVRowStride)
  static constexpr int64_t kSmemBytes = (kQSmemFloats + kKSmemFloats + kVSmemFloats) * int64_t{sizeof(float)};

  // One block per (Q tile, head, batch) work item, capped by the grid limit (blocks then loop over work).
  static constexpr int64_t grid_blocks(int64_t work_items) {
    return work_items < kGridXMax ? work_items : kGridXMax;
  }

  static_assert(kRowsPerWarp == kMmaM, "split_tf32: each warp owns exactly one m16 row tile of the Q tile");
  static_assert(BlockM % Warps == 0, "split_tf32: warps split the Q tile by rows");
  static_assert(HeadDim % kQkDimsPerLoad == 0 && HeadDim % kPvDimsPerLoad == 0,
                "split_tf32: head_dim family must be whole float4 fragment loads for Q K^T and P V");
  static_assert(BlockN % (kMmaN * kStepsPerChain) == 0, "split_tf32: P V takes the S tiles in pairs");
  static_assert(kQkRowStride % kWarpSize == kQkDimsPerLoad, "split_tf32: Q/K pitch must be 16 mod 32 floats");
  static_assert(kVRowStride % kWarpSize == kFloat4Lanes, "split_tf32: V pitch must be 4 mod 32 floats");
  static_assert((BlockM * kChunksPerRow) % kThreads == 0, "split_tf32: Q tile loads evenly over the threads");
  static_assert((BlockN * kChunksPerRow) % kThreads == 0, "split_tf32: K/V tile loads evenly over the threads");
  static_assert(kThreads <= 1024, "split_tf32: at most 1024 threads per block");
  static_assert(kSmemBytes <= kSmemBytesPerBlockMax, "split_tf32: tiles exceed the shared memory of one block");
  static_assert(MinBlocksPerSm * (kSmemBytes + kSmemBytesReservedPerBlock) <= kSmemBytesPerSm,
                "split_tf32: the blocks per SM promised to __launch_bounds__ do not fit in shared memory");
};

// sm_90a (kernel_wgmma.cuh): tf32 warpgroup MMAs. One producer warpgroup stages K/V split into hi/lo tiles;
// two consumer warpgroups of kWgmmaRowsTf32 query rows each. Shared memory holds Q, one K and one V tile, each
// as hi and lo parts, and raw staging copies of K and V: 4 * (2 kBlockM + 6 kBlockN) * kHeadDim bytes
// (+ 1 KB alignment; 225 KB at d = 128, kBlockN = 32).
inline constexpr int kWgmmaRowsTf32 = 64;
template <int HeadDim, int BlockN>
struct SplitTf32WgmmaConfig {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = 2 * kWgmmaRowsTf32;
  static constexpr int kBlockN = BlockN;
  static constexpr int kWarps = 12;  // producer warpgroup + two consumer warpgroups
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int64_t kSmemBytes = 4 * int64_t{2 * kBlockM + 6 * BlockN} * HeadDim + 1024;
  static constexpr int64_t grid_blocks(int64_t work_items) { return work_items < kGridXMax ? work_items : kGridXMax; }
  static_assert(kSmemBytes <= kSmemBytesPerBlockMax, "split_tf32 wgmma: tiles exceed the shared memory of one block");
};

// Tile sizes per padded head_dim on sm_90 (measurements in docs/design/split-tf32-kernel.md). Four warps of 16 rows each;
// the accumulator is kHeadDim / 2 floats per lane and S is kBlockN / 2, and with the three products per
// fp32 product the registers, not smem, bound the tiles: every config runs at the 255-register cap.
struct SplitTf32TileChoice {
  int head_dim_padded;
  int block_m;
  int block_n;
  int warps;
  int min_blocks_per_sm;
  bool wgmma = false;  // kernel_wgmma.cuh (sm_90a builds): block_m = 128, 12 warps, one block per SM
};
constexpr SplitTf32TileChoice split_tf32_tile_choice(int64_t head_dim) {
  // 32: small tiles (< 40 KB of smem); two blocks per SM hide each other's loads.
  if (head_dim <= 32) return {32, 64, 64, 4, 2};
  // 64, 128: 32 keys per tile beat 64 by 9-10% (fewer live score registers, fewer spills); two blocks per SM.
#if defined(FLASHCHECK_TC_WGMMA)
  // 64 on sm_90a: tf32 wgmma, 128 x 64 tiles (161 KB of smem).
  if (head_dim <= 64) return {64, 128, 64, 12, 1, true};
#endif
  if (head_dim <= 64) return {64, 64, 32, 4, 2};
#if defined(FLASHCHECK_TC_WGMMA)
  // 128 on sm_90a: tf32 wgmma, 128 x 32 tiles (docs/design/split-tf32-kernel.md, "The wgmma kernel"); registers: O 64 + half-width P V chain 32
  // + P split 2 x 16 within the 168 a thread of a 384-thread block.
  if (head_dim <= 128) return {128, 128, 32, 12, 1, true};
#endif
  if (head_dim <= 128) return {128, 64, 32, 4, 2};
  // 256: 128 accumulator registers a lane leave room for 32 keys only; 138 KB of smem: one block per SM.
  return {256, 64, 32, 4, 1};
}

template <int HeadDimPadded>
using SplitTf32ConfigFor =
    SplitTf32TileConfig<HeadDimPadded, split_tf32_tile_choice(HeadDimPadded).block_m,
                        split_tf32_tile_choice(HeadDimPadded).block_n, split_tf32_tile_choice(HeadDimPadded).warps,
                        split_tf32_tile_choice(HeadDimPadded).min_blocks_per_sm>;

}  // namespace flashcheck::detail::split_tf32_tiles
