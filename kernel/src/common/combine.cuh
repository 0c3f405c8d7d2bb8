// Split-KV's second launch: merges each row's runs (the partials the split runs wrote) in split order with the
// online softmax's own rescale (common/epilogue.h, merged_base / run_factor) and writes O and LSE through the shared
// epilogue, so a split row ends exactly as an unsplit row whose tiles changed their max at the run boundaries.
// One block per row, threads over O's columns (head_dim_v); deterministic (a fixed order of every sum). The workspace
// it reads is allocated and freed on the launch's stream around the two launches (launch_split), from flashcheck's own
// pool.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/args.h"
#include "common/dtype.cuh"
#include "common/epilogue.h"
#include "common/mutants.cuh"
#include "families.h"

namespace flashcheck::detail {
inline namespace FLASHCHECK_KERNEL_VARIANT {
namespace combine {

inline constexpr int kThreads = 128;
inline constexpr int kMaxRuns = 256;  // can_implement caps num_splits; the heuristics stay below
inline constexpr int kUnroll = 16;    // partial loads in flight a thread

// One block per row: the runs' m and l pass through shared memory (loaded in parallel), every thread derives the
// same merged base and l from them in split order, and thread d sums column d of the accumulators in split order
// with kUnroll loads in flight (the partials are read once, coalesced along the row).
template <typename T, bool kInst>
__global__ void __launch_bounds__(kThreads) combine_kernel(const ProblemArgs args, const Instrumentation inst) {
  __shared__ float run_m[kMaxRuns];
  __shared__ float run_l[kMaxRuns];
  __shared__ float factor[kMaxRuns];
  const auto exp2 = [](float e) { return exp2f(e); };
  const int32_t splits = args.splits;
  for (int64_t flat = blockIdx.x; flat < args.lse_rows; flat += gridDim.x) {
    __syncthreads();  // the previous row's shared values are read
    for (int32_t s = threadIdx.x; s < splits; s += kThreads) {
      run_m[s] = args.partial_m[s * args.lse_rows + flat];
      run_l[s] = args.partial_l[s * args.lse_rows + flat];
    }
    __syncthreads();
    const float merged = merged_base(run_m, splits, 1);
    for (int32_t s = threadIdx.x; s < splits; s += kThreads) {
      factor[s] = FC_MUTANT(kCombineUnscaled)         ? 1.0f
                  : FC_MUTANT(kCombineEmptySplitsNan) ? exp2(run_m[s] - merged)
                                                      : run_factor(run_m[s], merged, exp2);
    }
    __syncthreads();
    float l_sum = 0.0f;
    for (int32_t s = 0; s < splits; ++s) l_sum = fmaf(run_l[s], factor[s], l_sum);
    const RowIndex at = lse_row_index(args, flat);
    const RowFinal fin = finish_row(merged, mul_rn(merged, kLn2), l_sum, args.sink, at.h, exp2);
    T* o_row = args.template q_rows<T>(args.o, at.b, at.h) + at.i * args.o.stride.row;
    for (int64_t d = threadIdx.x; d < args.head_dim_v; d += kThreads) {
      const int64_t row_floats = FC_MUTANT(kCombineValueStrideFromHeadDim) ? args.head_dim : args.head_dim_v;
      const float* column = args.partial_acc + flat * row_floats + d;
      const int64_t run_stride = args.lse_rows * row_floats;
      float acc = 0.0f;
      int32_t s = 0;
      for (; s + kUnroll <= splits; s += kUnroll) {
        float part[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) part[u] = column[(s + u) * run_stride];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc = fmaf(part[u], factor[s + u], acc);
      }
      for (; s < splits; ++s) acc = fmaf(column[s * run_stride], factor[s], acc);
      o_row[d] = DeviceDtype<T>::store(final_output(acc, fin));
    }
    if (threadIdx.x == 0) {
      args.lse[flat] = row_lse(fin.m_natural, fin.l);
      if constexpr (kInst) record_row(inst, flat, fin.m_natural, fin.l, 0);
    }
  }
}

// Bytes of the partials for `args` (splits * lse_rows rows of head_dim_v + 2 floats).
inline int64_t workspace_bytes(const ProblemArgs& args) {
  return static_cast<int64_t>(args.splits) * args.lse_rows * (args.head_dim_v + 2) *
         static_cast<int64_t>(sizeof(float));
}

// The partials' memory pool of the current device, owned by flashcheck and created on first use: its release
// threshold keeps the memory mapped between launches. The device's default pool (threshold 0) unmaps it at every
// synchronization and maps it again at the next allocation, which cost a decoding step over 1 GB of K/V about 20%
// of its time (docs/design/inference-path.md). The pool keeps up to kKeptWorkspaceBytes mapped at a
// synchronization: the partials of every decoding step of up to 128 query heads x 64 sequences x 32 splits at d 128.
inline constexpr uint64_t kKeptWorkspaceBytes = uint64_t{256} << 20;
inline cudaError_t workspace_pool(cudaMemPool_t* pool) {
  int device = 0;
  if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  static std::mutex mutex;
  // Never destroyed: the driver frees them with the context. A cudaDeviceReset() ends that context and with it the
  // pool, as it does PyTorch's caching allocator: split launches after it fail with a CUDA error naming the partials.
  static std::map<int, cudaMemPool_t> pools;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = pools.find(device); it != pools.end()) {
    *pool = it->second;
    return cudaSuccess;
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  if (const cudaError_t err = cudaMemPoolCreate(pool, &props); err != cudaSuccess) return err;
  uint64_t keep = kKeptWorkspaceBytes;
  if (const cudaError_t err = cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &keep);
      err != cudaSuccess) {
    cudaMemPoolDestroy(*pool);
    return err;
  }
  pools.emplace(device, *pool);
  return cudaSuccess;
}

inline cudaError_t workspace_alloc(void** workspace, size_t bytes, cudaStream_t stream) {
  cudaMemPool_t pool;
  if (const cudaError_t err = workspace_pool(&pool); err != cudaSuccess) return err;
  return cudaMallocFromPoolAsync(workspace, bytes, pool, stream);
}

// Runs a split launch: allocates the partials on `stream`, points `args` at them, calls launch_runs(args) (the
// family's kernel over every run), then the combine, and frees the partials on the stream. Unsplit args go
// straight to launch_runs.
template <typename T, bool kInst, class Args, class LaunchRuns>
Status launch_split(Args& args, cudaStream_t stream, const Instrumentation* inst, LaunchRuns&& launch_runs) {
  if (args.splits <= 1) return launch_runs(args);
  if (args.lse_rows == 0) return Status::ok_status();  // no row to write: nothing to run or merge
  void* workspace = nullptr;
  cudaError_t err = workspace_alloc(&workspace, static_cast<size_t>(workspace_bytes(args)), stream);
  if (err != cudaSuccess) {
    return {StatusCode::kCudaError, std::string("split-KV: allocating the partials from flashcheck's pool failed: ") +
                                        cudaGetErrorString(err)};
  }
  args.partial_acc = static_cast<float*>(workspace);
  args.partial_m = args.partial_acc + static_cast<int64_t>(args.splits) * args.lse_rows * args.head_dim_v;
  args.partial_l = args.partial_m + static_cast<int64_t>(args.splits) * args.lse_rows;
  Status st = launch_runs(args);
  if (st.ok()) {
    Instrumentation rows;
    if (inst != nullptr) rows = *inst;
    const unsigned grid =
        static_cast<unsigned>(capped_grid(args.lse_rows < (int64_t{1} << 20) ? args.lse_rows : (int64_t{1} << 20)));
    combine_kernel<T, kInst><<<grid, kThreads, 0, stream>>>(static_cast<const ProblemArgs&>(args), rows);
    err = cudaGetLastError();
    if (err != cudaSuccess) {
      st = {StatusCode::kCudaError, std::string("split-KV: combine launch failed: ") + cudaGetErrorString(err)};
    }
  }
  const cudaError_t freed = cudaFreeAsync(workspace, stream);
  if (st.ok() && freed != cudaSuccess) {
    st = {StatusCode::kCudaError, std::string("split-KV: cudaFreeAsync of the partials failed: ") + cudaGetErrorString(freed)};
  }
  return st;
}

}  // namespace combine
}  // namespace FLASHCHECK_KERNEL_VARIANT
}  // namespace flashcheck::detail
