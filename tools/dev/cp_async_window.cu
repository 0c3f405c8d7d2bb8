// How often a read that a cp.async wait lets through too early finds the chunk's earlier contents: the hardware
// fact behind the cp.async race mutants (docs/mutation-testing.md). Each thread writes a marker to its 16-byte
// shared chunks, issues cp.async into them and commits one group, then waits with cp.async.wait_group 1 (which
// lets that group pass, as the mutants' short waits do) or 0 (the correct wait), synchronizes in one of three ways
// and reads a chunk: its own (no synchronization), a neighbour lane's (__syncwarp) or another warp's
// (__syncthreads). The source is either a few MB that stay in L2 or a stream through 2 GB (each copy from DRAM).
// Prints, per case, the fraction of reads that found the marker.
//
//   nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a tools/dev/cp_async_window.cu -o /tmp/cp_async_window
//   /tmp/cp_async_window
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace {

constexpr int kThreads = 128;
constexpr int kChunksPerThread = 4;
constexpr uint32_t kMarker = 0xffffffffu;

enum class Sync { kNone, kWarp, kBlock };

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

template <int kPending, Sync kSync>
__global__ void probe(const uint4* src, uint64_t src_chunks, int iters, unsigned long long* counts) {
  __shared__ uint4 buf[kThreads * kChunksPerThread];
  const int tid = static_cast<int>(threadIdx.x);
  unsigned long long stale = 0;
  for (int it = 0; it < iters; ++it) {
    const uint64_t base = (static_cast<uint64_t>(blockIdx.x) * iters + it) * kThreads * kChunksPerThread;
#pragma unroll
    for (int j = 0; j < kChunksPerThread; ++j) {
      const uint32_t dst = smem_address(&buf[tid * kChunksPerThread + j]);
      const uint4* from = src + (base + tid * kChunksPerThread + j) % src_chunks;
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(kMarker) : "memory");
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(from) : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
    int reader_chunk = tid;
    if constexpr (kSync == Sync::kWarp) {
      __syncwarp();
      reader_chunk = tid ^ 1;
    } else if constexpr (kSync == Sync::kBlock) {
      __syncthreads();
      reader_chunk = (tid + 32) % kThreads;
    }
    uint4 v;
    const uint32_t addr = smem_address(&buf[reader_chunk * kChunksPerThread]);
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    stale += (v.x == kMarker) ? 1 : 0;
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
  }
  atomicAdd(&counts[0], stale);
  atomicAdd(&counts[1], static_cast<unsigned long long>(iters));
}

template <int kPending, Sync kSync>
double run(const uint4* src, uint64_t src_chunks, unsigned long long* counts, int blocks, int iters) {
  cudaMemset(counts, 0, 2 * sizeof(unsigned long long));
  probe<kPending, kSync><<<blocks, kThreads>>>(src, src_chunks, iters, counts);
  unsigned long long host[2] = {0, 0};
  cudaMemcpy(host, counts, sizeof(host), cudaMemcpyDeviceToHost);
  return host[1] != 0 ? static_cast<double>(host[0]) / static_cast<double>(host[1]) : -1.0;
}

}  // namespace

int main() {
  // Sources: the 2 GB buffer's chunks are all distinct per (block, iteration) within a run, so every copy misses
  // L2; the 4 MB source is read over and over and stays in L2.
  constexpr uint64_t kLargeBytes = uint64_t{2} << 30;
  constexpr uint64_t kSmallBytes = uint64_t{4} << 20;
  uint4* src = nullptr;
  unsigned long long* counts = nullptr;
  if (cudaMalloc(&src, kLargeBytes) != cudaSuccess || cudaMalloc(&counts, 16) != cudaSuccess) {
    std::fprintf(stderr, "cp_async_window: cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(src, 0x11, kLargeBytes);
  const int blocks = 132 * 8;
  const int large_iters = static_cast<int>(kLargeBytes / (uint64_t{blocks} * kThreads * kChunksPerThread * 16));
  std::printf("| source | wait_group | sync, reader | reads that found the marker |\n|---|---|---|---|\n");
  struct Src {
    const char* name;
    uint64_t chunks;
    int iters;
  };
  for (const Src s : {Src{"L2 (4 MB)", kSmallBytes / 16, 64}, Src{"DRAM (2 GB stream)", kLargeBytes / 16, large_iters}}) {
    if (s.chunks == kSmallBytes / 16) run<0, Sync::kNone>(src, s.chunks, counts, blocks, s.iters);  // warm L2
    std::printf("| %s | 1 | none, own chunk | %.4f |\n", s.name, run<1, Sync::kNone>(src, s.chunks, counts, blocks, s.iters));
    std::printf("| %s | 1 | __syncwarp, lane ^ 1 | %.4f |\n", s.name, run<1, Sync::kWarp>(src, s.chunks, counts, blocks, s.iters));
    std::printf("| %s | 1 | __syncthreads, warp + 1 | %.4f |\n", s.name, run<1, Sync::kBlock>(src, s.chunks, counts, blocks, s.iters));
    std::printf("| %s | 0 | __syncthreads, warp + 1 | %.4f |\n", s.name, run<0, Sync::kBlock>(src, s.chunks, counts, blocks, s.iters));
  }
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "cp_async_window: %s\n", cudaGetErrorString(err));
    return 1;
  }
  cudaFree(src);
  cudaFree(counts);
  return 0;
}
