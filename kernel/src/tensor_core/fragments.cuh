// The register fragments and shared-memory tiles every part of the fp16/bf16 tensor-core forward kernels works on
// (kernel.cuh, kernel_ws.cuh): the C-fragment shape of S and O (mma.m16n8 and wgmma accumulators alike: each quad of
// lanes holds two rows, rows quad_row and quad_row + 8 of an m16 tile, two columns per n8 tile), the per-thread state
// of one work item, the byte layout of Q, K, V and O tiles in shared memory, and a head's address in a tensor. The
// parts (loads.cuh, mainloop.cuh, mask.cuh, softmax_step.cuh, hidden_v.cuh, epilogue.cuh) are its nested classes.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/mutants.cuh"
#include "forward.h"
#include "ptx.cuh"
#include "scheduler.cuh"
#include "tile_config.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

using namespace ::flashcheck::tensor_core;  // tile constants (host-visible, no linkage)

inline constexpr uint32_t kFullWarp = 0xFFFFFFFFu;
inline constexpr int kQuad = 4;  // lanes sharing one C-fragment row
inline constexpr int kWarpgroupThreads = kWarpsPerWarpgroup * kWarpSize;

template <typename T, class Cfg>
struct Fragments {
  using Ops = DtypeOps<T>;
  static constexpr int kM = Cfg::kMTiles;
  static constexpr int kNS = Cfg::kNTilesS;
  static constexpr int kNO = Cfg::kNTilesO;
  static constexpr int kPitch = Cfg::kSmemRowBytes;
  static constexpr bool kWg = Cfg::kWgmma;
  // Bytes between consecutive rows of one column: the padded pitch, or a 128-byte row of a swizzled column block.
  static constexpr int kRowBytes = kWg ? kSwizzleRowBytes : kPitch;
  static constexpr int kColumnBlockChunks = kSwizzleRowBytes / kChunkBytes;  // 8 chunks = 64 elements

  // Byte offset of 16-byte chunk `chunk` of row `row` in a tile of kRows rows (layouts in tile_config.h).
  template <int kRows>
  __device__ static uint32_t chunk_offset(int row, int chunk) {
    if constexpr (kWg) {
      return (chunk / kColumnBlockChunks) * (kRows * kSwizzleRowBytes) + row * kSwizzleRowBytes +
             ((chunk % kColumnBlockChunks) ^ (row % kSwizzleAtomRows)) * kChunkBytes;
    } else {
      return row * kPitch + chunk * kChunkBytes;
    }
  }

  // V's and O's columns of the launch, unpadded: head_dim_v for a value pair's kernel (tile_config.h, kValuePairs),
  // head_dim otherwise (the equal families serve head_dim_v == head_dim only: tensor_core_select).
  __device__ static int64_t value_cols(const KernelArgs& a) {
    if constexpr (Cfg::kHeadDimV != Cfg::kHeadDim) {
      return FC_MUTANT(kTcValueColumnsFromHeadDim) ? a.head_dim : a.head_dim_v;
    } else {
      return a.head_dim;
    }
  }

  // Per-thread registers of one CTA work item.
  struct State {
    float acc_o[kM][kNO][4];  // (kRowsPerWarp, kHeadDim) of this warp, C-fragment layout, fp32
    float row_max[kM][2];     // running max of the raw score (of Q-negated scores when scale < 0), rows
                              // quad_row and quad_row + 8 of each m16 tile
    float row_ref[kM][2];     // the raw score P and l are relative to (softmax_stats): at most
                              // kRefSlackLog2 / c below row_max
    float row_sum[kM][2];     // this thread's share of l: summed over the quad at the end
    // Instrumentation only (dead, and removed, in production):
    int moves[kM][2];       // tiles after which the running max changed (the first finite max counts)
    int trace_slot[kM][2];  // index into inst.trace_rows, or -1
  };

  __device__ static float quad_sum(float x) {
    x += __shfl_xor_sync(kFullWarp, x, 1);
    x += __shfl_xor_sync(kFullWarp, x, 2);
    return x;
  }

  // The parts of the kernels, each defined in its own file as Fragments<T, Cfg>::Part so that it names these
  // members without qualification.
  using Item = WorkItem;
  struct TileLoads;                                           // loads.cuh
  struct Mainloop;                                            // mainloop.cuh
  struct MaskStep;                                            // mask.cuh
  template <bool kInstrument> struct SoftmaxStep;             // softmax_step.cuh
  struct HiddenV;                                             // hidden_v.cuh
  template <bool kInstrument, bool kExtras> struct Epilogue;  // epilogue.cuh

  // Element (b, h, row 0, dim 0) of t (64-bit offsets; the mutant tc-offset-32bit wraps them at 2^32).
  template <typename P>
  __device__ static P* head_of(const TensorArg& t, int64_t b, int64_t h) {
    if (FC_MUTANT(kTcOffset32Bit)) {
      const uint32_t offset = static_cast<uint32_t>(b) * static_cast<uint32_t>(t.stride.batch) +
                              static_cast<uint32_t>(h) * static_cast<uint32_t>(t.stride.head);
      return static_cast<P*>(const_cast<void*>(t.ptr)) + offset;
    }
    return t.template head<P>(b, h);
  }

};

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
