// tensor_core_launch(): Params -> KernelArgs (common/args.h, with |scale| and negate_q), then the launch
// function of the (dtype, head-dim family) that tensor_core_select() chose. Compiles no kernel itself: each
// family's kernel lives in its own fwd_<dtype>_hdim<d>.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>

#include "families.h"
#include "forward.h"
#include "tile_config.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace {

using tc_kernel::KernelArgs;

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
  Params positive = p;
  positive.softmax_scale = std::fabs(p.softmax_scale);
  KernelArgs args{make_problem_args(positive, block_m)};
  args.negate_q = p.softmax_scale < 0.0f;
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
