// Tile configurations of the fp16/bf16 tensor-core family, host- and device-visible (no CUDA headers), so
// tensor_core_select() and the kernels read the same numbers. One TileConfig per head-dim family derives the
// thread count, the shared-memory layout and the per-warp fragment counts; static_asserts keep the kernel's
// indexing assumptions (16-row mma tiles per warp, 16-byte chunks, whole chunk loops per thread) true.
#pragma once

#include <cstdint>

namespace flashcheck::tensor_core {

inline constexpr int kWarpSize = 32;
inline constexpr int kMmaM = 16;         // mma.sync m16n8k16: rows of A and C
inline constexpr int kMmaN = 8;          //                    columns of B and C
inline constexpr int kMmaK = 16;         //                    reduction depth
inline constexpr int kChunkBytes = 16;   // one cp.async / ldmatrix row: 8 fp16/bf16 elements
inline constexpr int kElementBytes = 2;  // fp16 and bf16 share every layout
inline constexpr int kChunkElems = kChunkBytes / kElementBytes;
inline constexpr int kMaxSmemPerBlock = 227 * 1024;  // sm_90 opt-in limit per block
inline constexpr int kSmemPerSm = 228 * 1024;        // sm_90 shared memory per SM
inline constexpr int kSmemReservedPerBlock = 1024;   // the runtime's share of each CTA
inline constexpr int kRegistersPerSm = 64 * 1024;

inline constexpr int kWgmmaRows = 64;         // wgmma m64nNk16: rows per warpgroup
inline constexpr int kWarpsPerWarpgroup = 4;
inline constexpr int kSwizzleRowBytes = 128;  // 128-byte swizzle: 64 fp16/bf16 elements per row of a column block
inline constexpr int kSwizzleAtomRows = 8;    // 8 rows x 128 bytes = one 1024-byte swizzle atom

// When the launch may use persistent CTAs that carry loads across work items (schedule.h).
enum class Persist { kNever, kCausal, kAlways };

// HeadDimV: V's and O's padded head dim, where it differs from Q's and K's (a value pair of kValuePairs below).
template <int HeadDim, int BlockM, int BlockN, int Warps, int Stages, bool Wgmma = false,
          Persist PersistMode = Persist::kNever, bool WarpSpecialized = false, int HeadDimV = HeadDim>
struct TileConfig {
  static constexpr int kHeadDim = HeadDim;    // padded head_dim of Q and K: the family
  static constexpr int kHeadDimV = HeadDimV;  // padded head dim of V and O
  static constexpr int kBlockM = BlockM;    // query rows per CTA
  static constexpr int kBlockN = BlockN;    // keys per K/V tile
  static constexpr int kWarps = Warps;
  static constexpr int kStages = Stages;    // K/V tiles in flight (cp.async ring)
  // sm_90a: S and P*V on warpgroup MMAs reading Q, K, V from 128-byte-swizzled shared memory (column blocks of
  // 64 elements, each row 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r % 8)); otherwise
  // mma.sync with ldmatrix from padded rows. The register fragments are the same.
  static constexpr bool kWgmma = Wgmma;
  static constexpr Persist kPersist = PersistMode;
  // sm_90a: a TMA producer warpgroup feeds the kWarps consumer warps through mbarriers (kernel_ws.cuh) where
  // TMA can address the tensors; kernel.cuh's cp.async kernel otherwise.
  static constexpr bool kWarpSpecialized = WarpSpecialized;
  static constexpr int kThreads = Warps * kWarpSize;
  static constexpr int kRowsPerWarp = BlockM / Warps;     // warps split the Q tile by rows
  static constexpr int kMTiles = kRowsPerWarp / kMmaM;    // m16 tiles per warp: B fragments reused kMTiles times
  static constexpr int kNTilesS = BlockN / kMmaN;         // n8 tiles of S per m16 tile
  static constexpr int kNTilesO = HeadDimV / kMmaN;       // n8 tiles of O per m16 tile
  static constexpr int kChunksPerRow = HeadDim / kChunkElems;    // of a Q or K row
  static constexpr int kChunksPerRowV = HeadDimV / kChunkElems;  // of a V or O row
  // Odd row pitch in 16-byte chunks: the 8 rows one ldmatrix phase reads fall in 8 distinct 4-bank groups,
  // and a cp.async phase writes 128 contiguous bytes, so neither conflicts. Padding works for every family
  // (an XOR swizzle needs a power-of-two chunk count; 96 and 160 have none).
  static constexpr int kSmemRowChunks = Wgmma ? kChunksPerRow : (kChunksPerRow | 1);
  // Rows apart that one thread's cp.async chunks of a tile of `chunks` chunks a row lie (loads.cuh): all threads
  // over the row's chunks, in whole swizzle atoms on wgmma tiles so that every pass has the same swizzle (d = 192:
  // 256 threads over 24 chunks step 8 rows, and 64 threads idle).
  static constexpr int load_row_step(int chunks) {
    return Wgmma ? Warps * kWarpSize / chunks / kSwizzleAtomRows * kSwizzleAtomRows : Warps * kWarpSize / chunks;
  }
  static constexpr int kSmemRowBytes = kSmemRowChunks * kChunkBytes;
  static constexpr int kSmemRowBytesV = (Wgmma ? kChunksPerRowV : (kChunksPerRowV | 1)) * kChunkBytes;
  static constexpr int kQSmemBytes = BlockM * kSmemRowBytes;       // (kBlockM, kHeadDim)
  static constexpr int kOSmemBytes = BlockM * kSmemRowBytesV;      // (kBlockM, kHeadDimV): O staged, laid out like Q
  static constexpr int kKTileSmemBytes = BlockN * kSmemRowBytes;   // (kBlockN, kHeadDim)
  static constexpr int kVTileSmemBytes = BlockN * kSmemRowBytesV;  // (kBlockN, kHeadDimV)
  static constexpr int kStageSmemBytes = kKTileSmemBytes + kVTileSmemBytes;  // K then V
  // Swizzle atoms must start on 1024-byte boundaries: the kernel aligns the dynamic shared memory itself.
  static constexpr int kSmemAlignSlack = Wgmma ? 1024 : 0;
  static constexpr int kSmemBytes = kQSmemBytes + Stages * kStageSmemBytes + kSmemAlignSlack;
  // CTAs per SM the register cap aims at: the O and S accumulators (kMTiles * 4 * (kNTilesO + kNTilesS)
  // fp32 registers) plus about 32 for addresses and row statistics, bounded by shared memory.
  static constexpr int kRegsEstimate = kMTiles * 4 * (kNTilesO + kNTilesS) + 32;
  static constexpr int kBlocksByRegs = kRegistersPerSm / (kThreads * kRegsEstimate);
  static constexpr int kBlocksBySmem = kSmemPerSm / (kSmemBytes + kSmemReservedPerBlock);
  // wgmma tiles hold S and O of 16 rows per warp at full width: one CTA of 8 warps per SM, all registers.
  // One-warpgroup wgmma tiles (d64): three CTAs per SM (168 registers, 73 KB smem each) beat two by 2-26% on
  // the H100; two-warpgroup tiles hold S and O in 255 registers.
  static constexpr int kWg1Ctas = 3;
  static constexpr int kMinBlocksPerSm =
      Wgmma ? (Warps == kWarpsPerWarpgroup ? (kBlocksBySmem < kWg1Ctas ? kBlocksBySmem : kWg1Ctas) : 1)
            : (kBlocksByRegs < 1 ? 1 : (kBlocksByRegs < kBlocksBySmem ? kBlocksByRegs : kBlocksBySmem));

  static_assert(HeadDim % kMmaK == 0, "head_dim family must be a multiple of the mma K depth (16)");
  static_assert(BlockM % Warps == 0 && kRowsPerWarp % kMmaM == 0, "each warp owns whole m16 row tiles");
  static_assert(kMTiles >= 1 && kMTiles <= 2, "one or two m16 tiles per warp (registers)");
  static_assert(BlockN % kMmaK == 0, "K/V tile must be whole k16 steps of P*V");
  static_assert((BlockM * kChunksPerRow) % kThreads == 0, "Q tile loads evenly over the threads");
  static_assert((BlockN * kChunksPerRow) % kThreads == 0 || (Wgmma && load_row_step(kChunksPerRow) > 0),
                "K/V tile loads evenly over the threads, or (wgmma) in passes of whole swizzle atoms with a partial last");
  static_assert((BlockN * kChunksPerRowV) % kThreads == 0 || (Wgmma && load_row_step(kChunksPerRowV) > 0),
                "V tile loads as K's do");
  static_assert((kRowsPerWarp * kChunksPerRowV) % kWarpSize == 0, "O rows of a warp store evenly over its lanes");
  static_assert(HeadDimV == HeadDim || (Wgmma && HeadDimV % 64 == 0),
                "unequal head dims: wgmma tiles only (the padded mma.sync rows have one pitch for K and V)");
  static_assert(Stages >= 2, "the ring needs one tile computing and one arriving");
  static_assert(kSmemBytes <= kMaxSmemPerBlock, "shared memory exceeds the sm_90 per-block limit");
  static_assert(!Wgmma || (HeadDim % 64 == 0 && BlockN % 64 == 0 && BlockM == Warps / kWarpsPerWarpgroup * kWgmmaRows &&
                           load_row_step(kChunksPerRow) > 0),
                "wgmma tiles: whole 64-element column blocks, 64 rows per warpgroup, load passes in whole atoms");
};

// A tile shape chosen per head-dim family.
struct TileShape {
  int block_m;
  int block_n;
  int warps;
  int stages;
  bool wgmma = false;
  Persist persist = Persist::kNever;
  bool warp_specialized = false;
};

// Hopper (sm_90, mma.sync path): one choice per family, measured on H100 (docs/design/tensor-core-kernel.md).
constexpr TileShape tile_shape_sm90(int head_dim_padded) {
#if defined(FLASHCHECK_TC_WGMMA)
  // sm_90a builds: two warpgroups of 64 query rows each, S = Q K^T and O += P V on wgmma, measured on H100
  // against the two-CTA variant (64 rows, one warpgroup a CTA).
  switch (head_dim_padded) {
    // Persist: for kernel.cuh's cp.async tiles, measured against one CTA per item: d=128 +0-9% everywhere,
    // d=256 +3-7% causal at N = 1024-4096 but -1-4% non-causal. The warp-specialized kernel is always allowed
    // persistent CTAs.
    // Warp-specialized (kernel_ws.cuh): two consumer warpgroups of 64 rows; one CTA per SM. The cp.async
    // kernel.cuh tiles, for operands TMA cannot address, keep the same shape (the one-warpgroup 64x128 tiles at
    // three CTAs per SM were faster there).
    case 64: return {128, 128, 8, 2, true, Persist::kNever, true};
    // d = 128: S 64 + O 64 fp32 registers a thread; 193 KB smem warp-specialized (own O tile), 161 KB cp.async.
    // d = 256: S 32 + O 128; 225 KB (own O tile, one K slot) or 193 KB (O from registers): ws_o_staging().
    case 128: return {128, 128, 8, 2, true, Persist::kAlways, true};
    case 256: return {128, 64, 8, 2, true, Persist::kCausal, true};
    default: break;
  }
#endif
  switch (head_dim_padded) {
    case 32: return {128, 64, 4, 2};    // as 64
    case 64: return {128, 64, 4, 2};    // small O and S: 168 regs, three CTAs per SM; beat 128x128
    case 96: return {128, 64, 4, 2};    // O (96 regs) + S (64) leave room; two CTAs per SM
    case 128: return {128, 64, 4, 2};   // FA2's shape: O 128 + S 64 regs, 104 KB smem, two CTAs per SM
    case 192: return {128, 64, 8, 2};   // 16 rows a warp keeps O at 96 regs; 1 CTA of 8 warps per SM
    default: return {128, 64, 8, 2};    // 256: O alone is 128 regs at 16 rows a warp; 203 KB smem
  }
}

// K and V slots of the warp-specialized kernel (kernel_ws.cuh), where they differ from the shape's cp.async ring.
// d = 64 takes four of each (K/V tiles of 16 KB: 160 KB with Q and the O tile at 128x128, 176 KB at 192x128): the
// producer runs further ahead of the consumers' short tiles. Interleaved A/B on the H100 against two (bf16,
// tools/dev/ab_interleaved.py, bit-identical): the 192x128 tiles +3-7% (non-causal N = 512-8192, causal N = 4096),
// the 128x128 tiles (causal N <= 2048, windows of 256 and 1024 keys) 0.98-1.00x. d = 128 and 256 have no room for more than two.
constexpr int ws_kv_stages(int head_dim_padded, int head_dim_v_padded, int stages) {
  return head_dim_padded == 64 && head_dim_v_padded == 64 ? 4 : stages;
}

// A second shape for a family's launches whose Q tiles read many K/V tiles (tensor_core_select() chooses per launch),
// or block_m 0 where the family has one shape. d = 64: three consumer warpgroups of 64 rows (192x128, 512 threads,
// 160 registers a consumer thread) with free issue. Measured on the H100 against 128x128 with ping-pong (bf16,
// docs/design/tensor-core-kernel.md): non-causal +5-9% at N = 512-8192, causal N = 16384 +9%, causal windows of
// 4096 keys +7%; but causal N <= 2048 0.80-0.94x and windows of 256-1024 keys 0.82-0.98x (a 192-row diagonal
// spans more masked keys). With ping-pong among the three warpgroups it ran 0.75-1.11x (168 bytes of spills).
constexpr TileShape tall_tile_shape_sm90(int head_dim_padded) {
#if defined(FLASHCHECK_TC_WGMMA)
  if (head_dim_padded == 64) return {192, 128, 12, 2, true, Persist::kNever, true};
#endif
  (void)head_dim_padded;
  return {0, 0, 0, 0};
}
// The K/V tiles the middle Q tile (of the family's first shape) must read before the tall shape pays on a launch
// whose mask bounds the rows' keys (causal N = 4096: 17 tiles, +1%; N = 2048: 9, 0.94x); unmasked launches take
// it at any length.
inline constexpr int64_t kTallMinTiles = 16;

// Families with compiled kernels; a head_dim runs in the smallest family that holds it (padded columns of
// Q, K, V load as zeros and padded columns of O are never stored).
inline constexpr int kFamilies[] = {32, 64, 96, 128, 192, 256};

// Pairs of families (Q and K's, V and O's) with compiled kernels where head_dim_v's family differs from head_dim's:
// the pairs models ship (DeepSeek's 192/128 and the halved and doubled value widths). Written on one line: the
// build generates one instantiation unit per pair and dtype from it (kernel/CMakeLists.txt). sm_90a only.
struct ValuePair {
  int head_dim;
  int head_dim_v;
};
inline constexpr ValuePair kValuePairs[] = {{192, 128}, {128, 64}, {64, 128}, {256, 128}};

constexpr bool is_value_pair(int family, int family_v) {
  for (ValuePair pair : kValuePairs) {
    if (pair.head_dim == family && pair.head_dim_v == family_v) return true;
  }
  return false;
}

// The tiles of a value pair (sm_90a, warp-specialized where TMA can address the tensors). S is (128, kBlockN) and O
// (128, head_dim_v) in registers, as for the equal families: 128x128 tiles where O holds at most 128 columns, K/V
// tiles of 64 keys for Q and K of 256 columns (d = 256's). (192, 128): two K slots of 48 KB beside Q (48 KB) and two
// V slots fit with O staged from the registers; the own O tile costs a K slot (kernel_ws.cuh, ws_o_staging).
constexpr TileShape value_pair_shape_sm90(int family) {
  return family == 256 ? TileShape{128, 64, 8, 2, true, Persist::kCausal, true}
                       : TileShape{128, 128, 8, 2, true, Persist::kAlways, true};
}

constexpr int family_head_dim(int64_t head_dim) {
  for (int family : kFamilies) {
    if (head_dim <= family) return family;
  }
  return 0;
}

// The TileConfig of a head-dim family's tile shape.
template <int HeadDimPadded, TileShape kShape, int HeadDimVPadded = HeadDimPadded>
using TileOf = TileConfig<HeadDimPadded, kShape.block_m, kShape.block_n, kShape.warps, kShape.stages, kShape.wgmma,
                          kShape.persist, kShape.warp_specialized, HeadDimVPadded>;
template <int HeadDimPadded>
using Sm90Tile = TileOf<HeadDimPadded, tile_shape_sm90(HeadDimPadded)>;
template <int HeadDimPadded>
using Sm90TallTile = TileOf<HeadDimPadded, tall_tile_shape_sm90(HeadDimPadded)>;
template <int HeadDimPadded, int HeadDimVPadded>
using Sm90PairTile = TileOf<HeadDimPadded, value_pair_shape_sm90(HeadDimPadded), HeadDimVPadded>;

}  // namespace flashcheck::tensor_core
