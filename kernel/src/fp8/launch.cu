// fp8_launch(): the fp8 (e4m3) forward on sm_90a (kernel.cuh), one kernel per head-dim family of 128 or 256 columns
// (Q's and K's head_dim and V's head_dim_v padded alike; columns past them load as zeros and are never stored).
// Where TMA can address Q, K and V (16-byte aligned bases, rows of whole 16-byte chunks: head_dim and head_dim_v
// multiples of 16, and 16-byte multiples for every stride that steps) the tiles arrive by TMA; other layouts run the
// same kernel with the tiles copied by its threads.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/tma_map.h"
#include "families.h"
#include "fp8/kernel.cuh"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace {

using fp8_kernel::Args;
using fp8_kernel::Maps;

template <int D, bool kTma>
Status launch_family(const Args& args, const Maps& maps, cudaStream_t stream) {
  constexpr bool kInstrument = FLASHCHECK_INSTRUMENT != 0;
  constexpr auto kernel = fp8_kernel::fp8_forward_kernel<D, kTma, kInstrument>;
  constexpr int kSmem = fp8_kernel::Tiles<D>::kSmemBytes;
  // Set on every launch: the attribute is the current device's, and a launch may run on any device.
  const cudaError_t attribute = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (attribute != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("fp8: setting the kernel's shared memory failed: ") +
                                        cudaGetErrorString(attribute)};
  }
  const int64_t grid = capped_grid(std::min<int64_t>(args.work_items, int64_t{1} << 30));
  if (grid < 1) return Status::ok_status();
  kernel<<<dim3(static_cast<unsigned>(grid)), fp8_kernel::kThreads, kSmem, stream>>>(args, maps);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return {StatusCode::kCudaError, std::string("fp8: launch failed: ") + cudaGetErrorString(err)};
  return Status::ok_status();
}

}  // namespace

Status fp8_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst) {
  (void)config;
  Args args;
  static_cast<ProblemArgs&>(args) = make_problem_args(params, fp8_kernel::kBlockM);
  args.descale_q = params.descale_q;
  args.descale_k = params.descale_k;
  args.descale_v = params.descale_v;
  args.heads_kv = params.heads_kv;
  args.softcap = params.softcap;
  if (inst != nullptr) args.inst = *inst;
  if (args.work_items < 1) return Status::ok_status();

  // Packed tensors are one batch of total rows; a sequence's rows start at its cu_seqlens entry.
  const bool packed_q = args.cu_q != nullptr, packed_k = args.cu_k != nullptr;
  const int64_t q_rows = packed_q ? args.total_q : args.seqlen_q, q_batch = packed_q ? 1 : args.batch;
  const int64_t k_rows = packed_k ? params.total_k : args.seqlen_k, k_batch = packed_k ? 1 : args.batch;
  // TMA where it can address Q, K and V (without a key anywhere only Q's map: one of no rows cannot be encoded, and
  // no item visits a K/V tile); the copying kernel elsewhere.
  Maps maps{};
  const bool tma =
      q_rows <= tma::kTmaMaxCoord && k_rows <= tma::kTmaMaxCoord &&
      tma::encode_operand<uint8_t>(&maps.q, args.q, args.head_dim, q_rows, args.heads_q, q_batch, fp8_kernel::kWgRows) &&
      (k_rows < 1 ||
       (tma::encode_operand<uint8_t>(&maps.k, args.k, args.head_dim, k_rows, args.heads_kv, k_batch, fp8_kernel::kBlockN) &&
        tma::encode_operand<uint8_t>(&maps.v, args.v, args.head_dim_v, k_rows, args.heads_kv, k_batch,
                                     fp8_kernel::kBlockN)));
  const auto s = static_cast<cudaStream_t>(stream);
  FC_UPLOAD_MUTANT(s);
  const bool narrow = std::max(args.head_dim, args.head_dim_v) <= 128;
  if (tma) return narrow ? launch_family<128, true>(args, maps, s) : launch_family<256, true>(args, maps, s);
  return narrow ? launch_family<128, false>(args, maps, s) : launch_family<256, false>(args, maps, s);
}

}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
