// Launch interface of the tensor-core family: the kernel's argument block (built once from Params by
// dispatch.cu) and one launch function per (dtype, head-dim family), each defined in its own translation
// unit (fwd_<dtype>_hdim<d>.cu) so the families compile in parallel. All offsets are 64-bit element counts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../families.h"

// Production and instrumented builds each get their own copy (families.h: FLASHCHECK_KERNEL_VARIANT).
namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace tc_kernel {

// One [batch, heads, seqlen, head_dim] tensor: base pointer and element strides (head_dim stride is 1).
struct TensorRef {
  const void* ptr = nullptr;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t row_stride = 0;
};

struct KernelArgs {
  TensorRef q, k, v, o;  // o.ptr is written (const only to share the struct)
  float* lse = nullptr;  // [batch, heads_q, seqlen_q] contiguous
  int64_t heads_q = 0;
  int64_t group_size = 0;  // heads_q / heads_kv: query head h reads K/V head h / group_size
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t causal_offset = 0;  // causal: key j visible to row i iff j <= i + causal_offset
  int64_t q_tiles = 0;        // ceil(seqlen_q / kBlockM)
  int64_t work_items = 0;     // q_tiles * batch * heads_q: one CTA iteration each
  int32_t head_dim = 0;       // unpadded: columns at or beyond it load as zeros and are never stored
  bool causal = false;
  // softmax_scale < 0: Q is negated in shared memory (exact) and |scale| used, so the running max of the
  // raw score is the max of scale*score and exp2's argument stays <= 0.
  bool negate_q = false;
  float scale_log2 = 0.0f;  // |softmax_scale| * log2(e), rounded once in fp32: exp2 takes the scale folded in
  float scale_abs = 0.0f;   // |softmax_scale|: m in natural-log units for LSE and instrumentation
  Instrumentation inst;  // device pointers; read only by kernels instantiated with instrumentation on
};

// The argument block for params (dispatch.cu); q_tiles and work_items follow block_m.
KernelArgs make_kernel_args(const Params& params, int block_m, const Instrumentation* inst);

// Defined per family in fwd_<dtype>_hdim<d>.cu; T is __half or __nv_bfloat16.
template <typename T, int HeadDimPadded>
Status launch_forward(const KernelArgs& args, cudaStream_t stream);

}  // namespace tc_kernel
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
