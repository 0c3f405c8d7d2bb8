// run_backward(): validates, allocates the workspace on the stream (D per row; dQ's fp32 accumulator in atomic
// mode), and launches the kernels of backward/kernel.cuh for the dtype and the head dims' tier (64, 128, 256), or,
// where backward_path() says so, backward/tensor_core.cuh's key-tile kernel (tier 64, 128 or 256) between the same
// preprocessing, dQ store and dsink kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "backward/kernel.cuh"
#include "flashcheck/backward.h"
#if defined(FLASHCHECK_HAS_TENSOR_CORE)
#include "backward/tensor_core.cuh"
#endif

namespace flashcheck {
namespace detail::backward {
namespace {

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok_status();
  return {StatusCode::kCudaError, std::string("run_backward: ") + what + ": " + cudaGetErrorString(err)};
}

unsigned blocks_for(int64_t threads_needed) { return static_cast<unsigned>(ceil_div(threads_needed, kThreads)); }

Status opt_in(const void* kernel, size_t smem) {
  return cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                     "shared memory opt-in");
}

// The grid of a key-tile kernel: (K/V tiles of `block` keys, K/V heads, sequences).
dim3 key_tile_grid(const Args& a, int block) {
  const int64_t tiles = a.seqlen_k > 0 ? ceil_div(a.seqlen_k, int64_t{block}) : 1;  // dQ's pass still writes 0
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(a.heads_q / a.group_size), static_cast<unsigned>(a.batch));
}

// The kernels around the key tiles: D before them; after them, dQ from its accumulator (atomic mode) and dsink.
template <typename T>
void launch_preprocess(const Args& a, cudaStream_t stream) {
  if (a.lse_rows > 0) preprocess_kernel<T><<<blocks_for(a.lse_rows), kThreads, 0, stream>>>(a);
}
template <typename T>
void launch_finish(const Args& a, cudaStream_t stream) {
  if (!a.deterministic && a.lse_rows > 0) store_dq_kernel<T><<<blocks_for(a.lse_rows * a.head_dim), kThreads, 0, stream>>>(a);
  if (a.dsink != nullptr) dsink_kernel<<<static_cast<unsigned>(ceil_div(a.heads_q, 32)), 32, 0, stream>>>(a);
}

template <typename T, int kDimMax>
Status launch(const Args& a, cudaStream_t stream) {
  const size_t smem = Smem::bytes(a.head_dim, a.head_dim_v);
  for (const void* kernel : {reinterpret_cast<const void*>(&key_tile_kernel<T, kDimMax>),
                             reinterpret_cast<const void*>(&query_tile_kernel<T, kDimMax>)}) {
    if (Status st = opt_in(kernel, smem); !st.ok()) return st;
  }
  FC_UPLOAD_MUTANT(stream);
  launch_preprocess<T>(a, stream);
  key_tile_kernel<T, kDimMax><<<key_tile_grid(a, kBlockKeys), kThreads, smem, stream>>>(a);
  if (a.deterministic && a.q_tiles > 0) {
    query_tile_kernel<T, kDimMax><<<dim3(static_cast<unsigned>(a.q_tiles), static_cast<unsigned>(a.heads_q),
                                         static_cast<unsigned>(a.batch)),
                                    kThreads, smem, stream>>>(a);
  }
  launch_finish<T>(a, stream);
  return cuda_status(cudaGetLastError(), "launch");
}

#if defined(FLASHCHECK_HAS_TENSOR_CORE)
template <typename T, int kDim>
Status launch_tensor_core(const Args& a, cudaStream_t stream) {
  constexpr int kSmem = TcTiles<kDim>::kBytes, kQuerySmem = TcQueryTiles<kDim>::kBytes;
  if (Status st = opt_in(reinterpret_cast<const void*>(&tc_key_tile_kernel<T, kDim>), kSmem); !st.ok()) return st;
  if (Status st = opt_in(reinterpret_cast<const void*>(&tc_query_tile_kernel<T, kDim>), kQuerySmem); !st.ok()) return st;
  FC_UPLOAD_MUTANT(stream);
  launch_preprocess<T>(a, stream);
  tc_key_tile_kernel<T, kDim><<<key_tile_grid(a, kTcKeys), TcTiles<kDim>::kThreads, kSmem, stream>>>(a);
  if (a.deterministic && a.seqlen_q > 0) {
    tc_query_tile_kernel<T, kDim><<<dim3(static_cast<unsigned>(ceil_div(a.seqlen_q, int64_t{kTcQRows})),
                                         static_cast<unsigned>(a.heads_q), static_cast<unsigned>(a.batch)),
                                    TcTiles<kDim>::kThreads, kQuerySmem, stream>>>(a);
  }
  launch_finish<T>(a, stream);
  return cuda_status(cudaGetLastError(), "launch");
}
#endif

template <typename T>
Status launch_dtype(const Args& a, ComputePath path, cudaStream_t stream) {
  const int64_t widest = a.head_dim > a.head_dim_v ? a.head_dim : a.head_dim_v;
#if defined(FLASHCHECK_HAS_TENSOR_CORE)
  if constexpr (!std::is_same_v<T, float>) {
    if (path == ComputePath::kTensorCore) {
      if (widest <= 64) return launch_tensor_core<T, 64>(a, stream);
      if (widest <= 128) return launch_tensor_core<T, 128>(a, stream);
      return launch_tensor_core<T, 256>(a, stream);
    }
  }
#endif
  (void)path;
  if (widest <= 64) return launch<T, 64>(a, stream);
  if (widest <= 128) return launch<T, 128>(a, stream);
  return launch<T, 256>(a, stream);
}

}  // namespace
}  // namespace detail::backward

Status run_backward(const BackwardParams& bp, void* stream) {
  namespace bw = detail::backward;
  if (Status st = can_implement_backward(bp); !st.ok()) return st;
  const Params& p = bp.forward;
  if (p.batch == 0 || p.heads_q == 0) {  // no rows: dsink (a sum over them) is 0, nothing else exists
    if (bp.dsink == nullptr || p.heads_q == 0) return Status::ok_status();
    return detail::backward::cuda_status(
        cudaMemsetAsync(bp.dsink, 0, sizeof(float) * static_cast<size_t>(p.heads_q), static_cast<cudaStream_t>(stream)),
        "zeroing dsink");
  }
  if (!device_available()) return {StatusCode::kNoDevice, "no CUDA device is available to this process"};
  if (p.batch > 65535 || p.heads_q > 65535) {
    return {StatusCode::kUnsupported, "batch: the backward kernels take at most 65535 sequences and query heads"};
  }
  bw::Args a;
  static_cast<detail::ProblemArgs&>(a) = detail::make_problem_args(p, bw::kBlockRows);
  a.d_o = {bp.d_o, bp.d_o_stride};
  a.dq = {bp.dq, bp.dq_stride};
  a.dk = {bp.dk, bp.dk_stride};
  a.dv = {bp.dv, bp.dv_stride};
  a.dsink = bp.dsink;
  a.deterministic = bp.deterministic;
  const auto s = static_cast<cudaStream_t>(stream);
  const ComputePath path = backward_path(bp);
  float* workspace = nullptr;
  const int64_t dq_floats = a.deterministic ? 0 : a.lse_rows * p.head_dim;
  const size_t bytes = sizeof(float) * static_cast<size_t>(a.lse_rows + dq_floats + 1);
  if (Status st = bw::cuda_status(cudaMallocAsync(reinterpret_cast<void**>(&workspace), bytes, s), "workspace"); !st.ok()) {
    return st;
  }
  a.d = workspace;
  a.dq_acc = a.deterministic ? nullptr : workspace + a.lse_rows;
  Status st = dq_floats > 0 ? bw::cuda_status(cudaMemsetAsync(a.dq_acc, 0, sizeof(float) * static_cast<size_t>(dq_floats), s),
                                              "zeroing dQ's accumulator")
                            : Status::ok_status();
  if (st.ok()) {
    switch (p.dtype) {
      case DType::kF32: st = bw::launch_dtype<float>(a, path, s); break;
      case DType::kF16: st = bw::launch_dtype<__half>(a, path, s); break;
      case DType::kBF16: st = bw::launch_dtype<__nv_bfloat16>(a, path, s); break;
      case DType::kF8E4M3: st = {StatusCode::kUnsupported, "backward: f8e4m3 is forward-only"}; break;
    }
  }
  const Status freed = bw::cuda_status(cudaFreeAsync(workspace, s), "freeing the workspace");
  return st.ok() ? freed : st;
}

}  // namespace flashcheck
