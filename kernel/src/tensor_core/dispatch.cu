// tensor_core_launch(): Params -> KernelArgs (64-bit strides, causal offset, folded scale), then the launch
// function of the (dtype, head-dim family) that tensor_core_select() chose. Compiles no kernel itself: each
// family's kernel lives in its own fwd_<dtype>_hdim<d>.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>

#include "../families.h"
#include "forward.h"
#include "tile_config.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace {

using tc_kernel::KernelArgs;
using tc_kernel::TensorRef;

inline constexpr float kLog2e = 1.4426950408889634f;

TensorRef tensor_ref(const void* ptr, const Strides& s) { return {ptr, s.batch, s.head, s.row}; }

template <typename T>
Status launch_dtype(int family, const KernelArgs& args, cudaStream_t stream) {
  switch (family) {
    case 32: return tc_kernel::launch_forward<T, 32>(args, stream);
    case 64: return tc_kernel::launch_forward<T, 64>(args, stream);
    case 96: return tc_kernel::launch_forward<T, 96>(args, stream);
    case 128: return tc_kernel::launch_forward<T, 128>(args, stream);
    case 192: return tc_kernel::launch_forward<T, 192>(args, stream);
    case 256: return tc_kernel::launch_forward<T, 256>(args, stream);
    default: return {StatusCode::kUnsupported, "tensor_core: no kernel for head_dim family"};
  }
}

}  // namespace

KernelArgs tc_kernel::make_kernel_args(const Params& p, int block_m, const Instrumentation* inst) {
  KernelArgs args;
  args.q = tensor_ref(p.q, p.q_stride);
  args.k = tensor_ref(p.k, p.k_stride);
  args.v = tensor_ref(p.v, p.v_stride);
  args.o = tensor_ref(p.o, p.o_stride);
  args.lse = p.lse;
  args.heads_q = p.heads_q;
  args.group_size = p.heads_q / p.heads_kv;
  args.seqlen_q = p.seqlen_q;
  args.seqlen_k = p.seqlen_k;
  args.causal = p.mask != Mask::kNone;
  args.causal_offset = p.mask == Mask::kCausalBottomRight ? p.seqlen_k - p.seqlen_q : 0;
  args.q_tiles = (p.seqlen_q + block_m - 1) / block_m;
  args.work_items = args.q_tiles * p.batch * p.heads_q;
  args.head_dim = static_cast<int32_t>(p.head_dim);
  args.negate_q = p.softmax_scale < 0.0f;
  args.scale_abs = std::fabs(p.softmax_scale);
  args.scale_log2 = args.scale_abs * kLog2e;
  if (FLASHCHECK_INSTRUMENT && inst != nullptr) args.inst = *inst;
  return args;
}

namespace {
std::atomic<bool> force_cp_async{false};
}  // namespace

void tensor_core_force_cp_async(bool on) { force_cp_async.store(on, std::memory_order_relaxed); }
bool tensor_core_cp_async_forced() { return force_cp_async.load(std::memory_order_relaxed); }

Status tensor_core_launch(const Params& p, const KernelConfig& config, void* stream, const Instrumentation* inst) {
  const KernelArgs args = tc_kernel::make_kernel_args(p, config.block_m, inst);
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (p.dtype == DType::kBF16) return launch_dtype<__nv_bfloat16>(config.head_dim_padded, args, cuda_stream);
  return launch_dtype<__half>(config.head_dim_padded, args, cuda_stream);
}

}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
