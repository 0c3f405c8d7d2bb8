// Launch interface of the tensor-core family: the kernel's argument block (common/args.h's, built once from
// Params by dispatch.cu) and one launch function per (dtype, head-dim family), each defined in its own
// translation unit (fwd_<dtype>_hdim<d>.cu) so the families compile in parallel. Offsets are 64-bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/args.h"
#include "families.h"

// Production and instrumented builds each get their own copy (families.h: FLASHCHECK_KERNEL_VARIANT).
namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

// The common block of the problem as the kernel runs it: softmax_scale is |softmax_scale| (and scale_log2 its
// fold), because with a negative scale Q is negated in shared memory (exact, negate_q), so that the running max
// of the raw score is the max of scale * score and exp2's argument stays <= 0.
struct KernelArgs : ProblemArgs {
  bool negate_q = false;
  // A row's reference (raw score units) times this is its m in natural-log units: |softmax_scale|, or ln 2 with
  // a softcap, whose capped scores are in log2 units already (and scale_log2 is then 1).
  float ref_to_natural = 0.0f;
  int64_t total_k = 0;  // packed K/V rows (with cu_k): the TMA maps' extent
  int32_t block_m = 0;  // query rows per tile: which of the family's tile shapes runs (launch_forward)
  // The warp-specialized kernel's redo list (kernel_ws.cuh, launch_ws_variant): how many items are listed, and the
  // items. Null where the launch lists none.
  unsigned long long* redo_count = nullptr;
  int64_t* redo_items = nullptr;
  Instrumentation inst;  // device pointers; read only by kernels instantiated with instrumentation on
};

// The argument block for params (dispatch.cu); q_tiles and work_items follow block_m (packed Q: the slots of
// schedule.h's packed_slots per head) and the split count (schedule.h, split_item).
KernelArgs make_kernel_args(const Params& params, int block_m, int32_t splits, const Instrumentation* inst);

// Defined per family in fwd_<dtype>_hdim<d>.cu; T is __half or __nv_bfloat16.
template <typename T, int HeadDimPadded>
Status launch_forward(const KernelArgs& args, cudaStream_t stream);
// Defined per value pair (tile_config.h, kValuePairs) in fwd_<dtype>_hdim<d>_dv<dv>.cu.
template <typename T, int HeadDimPadded, int HeadDimVPadded>
Status launch_forward_pair(const KernelArgs& args, cudaStream_t stream);

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
