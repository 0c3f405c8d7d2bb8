// tensor_core_launch(): Params -> KernelArgs (common/args.h, with |scale| and negate_q), then the launch
// function of the (dtype, head-dim family) that tensor_core_select() chose. Compiles no kernel itself: each
// family's kernel lives in its own fwd_<dtype>_hdim<d>.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>
#include <iterator>
#include <string>
#include <utility>

#include "common/combine.cuh"
#include "families.h"
#include "forward.h"
#include "schedule.h"
#include "tile_config.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace {

using tc_kernel::KernelArgs;

// The launch function of `family`, one of tile_config.h's kFamilies (each instantiated in its own generated
// translation unit, kernel/CMakeLists.txt).
template <typename T, size_t... kI>
Status launch_family(int family, const KernelArgs& args, cudaStream_t stream, std::index_sequence<kI...>) {
  Status st{StatusCode::kUnsupported, "tensor_core: no kernel for head_dim family " + std::to_string(family)};
  ((family == tensor_core::kFamilies[kI] ? (st = tc_kernel::launch_forward<T, tensor_core::kFamilies[kI]>(args, stream),
                                            true)
                                         : false) ||
   ...);
  return st;
}

// The launch function of the value pair (family, family_v), one of tile_config.h's kValuePairs.
template <typename T, size_t... kI>
Status launch_pair(int family, int family_v, const KernelArgs& args, cudaStream_t stream, std::index_sequence<kI...>) {
  Status st{StatusCode::kUnsupported, "tensor_core: no kernel for head_dim family " + std::to_string(family) +
                                          " with head_dim_v family " + std::to_string(family_v)};
  constexpr auto& kPairs = tensor_core::kValuePairs;
  ((family == kPairs[kI].head_dim && family_v == kPairs[kI].head_dim_v
        ? (st = tc_kernel::launch_forward_pair<T, kPairs[kI].head_dim, kPairs[kI].head_dim_v>(args, stream), true)
        : false) ||
   ...);
  return st;
}

template <typename T>
Status launch_dtype(int family, int family_v, const KernelArgs& args, cudaStream_t stream) {
  if (family_v != family) {
    return launch_pair<T>(family, family_v, args, stream,
                          std::make_index_sequence<std::size(tensor_core::kValuePairs)>{});
  }
  return launch_family<T>(family, args, stream, std::make_index_sequence<std::size(tensor_core::kFamilies)>{});
}

}  // namespace

KernelArgs tc_kernel::make_kernel_args(const Params& p, int block_m, int32_t splits, const Instrumentation* inst) {
  Params positive = p;
  positive.softmax_scale = std::fabs(p.softmax_scale);
  KernelArgs args{make_problem_args(positive, block_m, splits)};
  args.negate_q = p.softmax_scale < 0.0f;
  args.ref_to_natural = args.has_softcap ? detail::kLn2 : positive.softmax_scale;
  if (args.has_softcap) args.scale_log2 = 1.0f;
  if (FLASHCHECK_INSTRUMENT && inst != nullptr) args.inst = *inst;
  args.total_k = args.cu_k != nullptr ? p.total_k : 0;
  args.block_m = block_m;
  if (args.cu_q != nullptr) {
    args.q_tiles = tensor_core::packed_slots(p.total_q, p.batch, block_m);
    args.work_items = args.q_tiles * p.heads_q * splits;
  }
  return args;
}

namespace {
std::atomic<bool> force_cp_async{false};
}  // namespace

void tensor_core_force_cp_async(bool on) { force_cp_async.store(on, std::memory_order_relaxed); }
bool tensor_core_cp_async_forced() { return force_cp_async.load(std::memory_order_relaxed); }

namespace {
// Split-KV launches (effective_splits() > 1) run the family's kernel over every run, then the combine.
template <typename T>
Status launch_runs(const Params& p, const KernelConfig& config, cudaStream_t stream, const Instrumentation* inst) {
  KernelArgs args = tc_kernel::make_kernel_args(p, config.block_m, effective_splits(p), inst);
  // V's family: the config's where the dims are equal (tensor_core_select serves unequal dims in value pairs only).
  const int family_v = value_head_dim(p) == p.head_dim ? config.head_dim_padded
                                                       : tensor_core::family_head_dim(value_head_dim(p));
  return combine::launch_split<T, FLASHCHECK_INSTRUMENT != 0>(args, stream, inst, [&](const KernelArgs& run_args) {
    return launch_dtype<T>(config.head_dim_padded, family_v, run_args, stream);
  });
}
}  // namespace

Status tensor_core_launch(const Params& p, const KernelConfig& config, void* stream, const Instrumentation* inst) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (p.dtype == DType::kBF16) return launch_runs<__nv_bfloat16>(p, config, cuda_stream, inst);
  return launch_runs<__half>(p, config, cuda_stream, inst);
}

}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
