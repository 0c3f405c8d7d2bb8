// flashcheck_bench: throughput of flashcheck::run() (or, with --pass backward, of run_backward() on the forward's
// O and LSE) over a sweep of (dtype, head_dim, seq_len, heads, mask), next to a dense bf16 GEMM ceiling (cuBLAS,
// 8192^3) measured in the same process. Each point: random normal inputs (never zeros), warm-up, then the median of
// event-timed runs with L2 flushed before each run; FLOPs = 4 B H N^2 d, halved for causal masks, and 2.5 times that
// for the backward pass (its five GEMMs against the forward's two). Peak device memory is the growth of used device
// memory over the baseline. Writes JSON (--out) and a one-line-per-point table to stdout. Usage: --help.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/backward.h"

namespace {

using flashcheck::DType;
using flashcheck::Mask;
using flashcheck::Params;
using flashcheck::Status;

constexpr int64_t kTokensPerBatch = 16384;  // B * N, the FlashAttention paper's grid
constexpr int64_t kModelDim = 2048;         // H * d
constexpr int kGemmSize = 8192;
constexpr int kFillBlocks = 4096;
constexpr int kFillThreads = 256;

// Errors are values; the harness reports and stops at the first failed CUDA or cuBLAS call.
struct Check {
  bool ok = true;
  std::string what;
  bool cuda(cudaError_t err, const char* call) {
    if (err != cudaSuccess && ok) {
      ok = false;
      what = std::string(call) + ": " + cudaGetErrorString(err);
    }
    return ok;
  }
  bool cublas(cublasStatus_t st, const char* call) {
    if (st != CUBLAS_STATUS_SUCCESS && ok) {
      ok = false;
      what = std::string(call) + ": cuBLAS status " + std::to_string(static_cast<int>(st));
    }
    return ok;
  }
};
#define FC_CUDA(chk, call) (chk).cuda((call), #call)

// Standard normal values from a counter-based hash (splitmix64 + Box-Muller), one pass, any dtype.
__device__ __forceinline__ float hashed_normal(uint64_t i, uint64_t seed) {
  uint64_t z = (i + seed * 0x632BE59BD9B4E019ull) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float u1 = static_cast<float>((z >> 40) + 1) * (1.0f / 16777217.0f);
  const float u2 = static_cast<float>((z >> 16) & 0xffffff) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <typename T>
__global__ void fill_normal(T* x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = from_float<T>(hashed_normal(static_cast<uint64_t>(i), seed));
  }
}

void fill(void* x, DType dtype, int64_t n, uint64_t seed) {
  switch (dtype) {
    case DType::kF32: fill_normal<<<kFillBlocks, kFillThreads>>>(static_cast<float*>(x), n, seed); break;
    case DType::kF16: fill_normal<<<kFillBlocks, kFillThreads>>>(static_cast<__half*>(x), n, seed); break;
    case DType::kBF16: fill_normal<<<kFillBlocks, kFillThreads>>>(static_cast<__nv_bfloat16*>(x), n, seed); break;
    case DType::kF8E4M3: break;  // not on the grid: the fp8 path has no kernel in this library
  }
}

size_t used_device_bytes(Check& chk) {
  size_t free_bytes = 0, total_bytes = 0;
  FC_CUDA(chk, cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

// Event-timed median of `iters` runs of `fn` after `warmup` runs; `flush` runs before each timed run,
// outside the events, so every run starts with a cold L2.
template <typename Fn, typename Flush>
float median_ms(Check& chk, int warmup, int iters, Fn&& fn, Flush&& flush) {
  cudaEvent_t start, stop;
  FC_CUDA(chk, cudaEventCreate(&start));
  FC_CUDA(chk, cudaEventCreate(&stop));
  for (int i = 0; i < warmup && chk.ok; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < iters && chk.ok; ++i) {
    flush();
    FC_CUDA(chk, cudaEventRecord(start));
    fn();
    FC_CUDA(chk, cudaEventRecord(stop));
    FC_CUDA(chk, cudaEventSynchronize(stop));
    float t = 0;
    FC_CUDA(chk, cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (ms.empty()) return NAN;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The ceiling: cuBLAS bf16 GEMM C = A B, 8192^3, fp32 accumulation, random inputs.
double gemm_bf16_tflops(Check& chk, int warmup, int iters) {
  const int64_t n = int64_t{kGemmSize} * kGemmSize;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  FC_CUDA(chk, cudaMalloc(&a, n * 2));
  FC_CUDA(chk, cudaMalloc(&b, n * 2));
  FC_CUDA(chk, cudaMalloc(&c, n * 2));
  cublasHandle_t handle = nullptr;
  chk.cublas(cublasCreate(&handle), "cublasCreate");
  double tflops = NAN;
  if (chk.ok) {
    fill(a, DType::kBF16, n, 101);
    fill(b, DType::kBF16, n, 102);
    const float alpha = 1.0f, beta = 0.0f;
    auto gemm = [&] {
      chk.cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, kGemmSize, kGemmSize, kGemmSize, &alpha, a,
                              CUDA_R_16BF, kGemmSize, b, CUDA_R_16BF, kGemmSize, &beta, c, CUDA_R_16BF, kGemmSize,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    };
    const float ms = median_ms(chk, warmup, iters, gemm, [] {});
    tflops = 2.0 * kGemmSize * double(kGemmSize) * kGemmSize / (ms * 1e9);
  }
  if (handle != nullptr) cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return tflops;
}

struct Point {
  DType dtype;
  int64_t head_dim, seqlen, batch, heads;
  Mask mask;
};

struct Options {
  std::string out = "bench_cpp.json";
  std::string grid = "paper";  // paper | quick
  int warmup = 3;
  int iters = 10;
  bool backward = false;       // --pass backward
  bool deterministic = false;  // --deterministic: the backward pass's deterministic mode
};

// The FA-paper grid (B*N = 16384, H*d = 2048) for fp16/bf16 and the fp32 points of the peer measurements,
// then a heads sweep (bf16, d = 128, N = 4096, B = 1) so heads vary on their own.
std::vector<Point> make_grid(const Options& opt) {
  std::vector<Point> grid;
  const bool quick = opt.grid == "quick";
  const std::vector<int64_t> seqlens =
      quick ? std::vector<int64_t>{1024, 4096} : std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384};
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (int64_t d : {64, 128, 256}) {
      for (Mask mask : {Mask::kNone, Mask::kCausalTopLeft}) {
        for (int64_t n : seqlens) grid.push_back({dtype, d, n, kTokensPerBatch / n, kModelDim / d, mask});
      }
    }
  }
  for (int64_t d : {64, 128}) {
    for (int64_t n : {1024, 4096}) {
      grid.push_back({DType::kF32, d, n, kTokensPerBatch / n, kModelDim / d, Mask::kNone});
    }
  }
  for (int64_t heads : {1, 4, 16, 32}) grid.push_back({DType::kBF16, 128, 4096, 1, heads, Mask::kNone});
  return grid;
}

bool parse(int argc, char** argv, Options* opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--out" && has_value) opt->out = argv[++i];
    else if (a == "--grid" && has_value) opt->grid = argv[++i];
    else if (a == "--warmup" && has_value) opt->warmup = std::atoi(argv[++i]);
    else if (a == "--iters" && has_value) opt->iters = std::atoi(argv[++i]);
    else if (a == "--pass" && has_value && (std::string(argv[i + 1]) == "forward" || std::string(argv[i + 1]) == "backward"))
      opt->backward = std::string(argv[++i]) == "backward";
    else if (a == "--deterministic") opt->deterministic = true;
    else {
      std::fprintf(stderr,
                   "usage: flashcheck_bench [--out FILE.json] [--grid paper|quick] [--warmup N] [--iters N]\n"
                   "                        [--pass forward|backward] [--deterministic]\n");
      return false;
    }
  }
  return opt->iters > 0 && opt->warmup >= 0 && (opt->grid == "paper" || opt->grid == "quick");
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) return 2;
  Check chk;
  if (!flashcheck::device_available()) {
    std::fprintf(stderr, "flashcheck_bench: no CUDA device\n");
    return 1;
  }
  // The current device (CUDA_VISIBLE_DEVICES picks it), not ordinal 0: every number below is about it.
  int device = 0;
  FC_CUDA(chk, cudaGetDevice(&device));
  cudaDeviceProp prop{};
  FC_CUDA(chk, cudaGetDeviceProperties(&prop, device));
  const double ceiling = gemm_bf16_tflops(chk, opt.warmup, opt.iters);
  std::printf("device %s, %d SMs, L2 %d MB; cuBLAS bf16 GEMM %dx%dx%d: %.1f TFLOP/s\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, kGemmSize, kGemmSize, kGemmSize, ceiling);

  // Flushing twice the L2 with a memset evicts every input line before each timed run.
  const size_t flush_bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  void* flush_buf = nullptr;
  FC_CUDA(chk, cudaMalloc(&flush_buf, flush_bytes));
  const size_t baseline = used_device_bytes(chk);

  FILE* json = std::fopen(opt.out.c_str(), "w");
  if (json == nullptr) {
    std::fprintf(stderr, "flashcheck_bench: cannot write %s\n", opt.out.c_str());
    return 1;
  }
  std::fprintf(json, "{\n  \"device\": \"%s\",\n  \"sms\": %d,\n  \"gemm_bf16_tflops\": %.2f,\n  \"results\": [",
               prop.name, prop.multiProcessorCount, ceiling);
  bool first = true;
  int failures = 0;
  for (const Point& pt : make_grid(opt)) {
    if (!chk.ok) break;
    Params p = flashcheck::make_params(pt.dtype, pt.batch, pt.heads, pt.heads, pt.seqlen, pt.seqlen, pt.head_dim,
                                       pt.mask);
    const int64_t elems = pt.batch * pt.heads * pt.seqlen * pt.head_dim;
    const int64_t bytes = elems * flashcheck::dtype_size(pt.dtype);
    void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *d_o = nullptr, *dq = nullptr, *dk = nullptr,
         *dv = nullptr;
    float* lse = nullptr;
    FC_CUDA(chk, cudaMalloc(&q, bytes));
    FC_CUDA(chk, cudaMalloc(&k, bytes));
    FC_CUDA(chk, cudaMalloc(&v, bytes));
    FC_CUDA(chk, cudaMalloc(&o, bytes));
    FC_CUDA(chk, cudaMalloc(&lse, pt.batch * pt.heads * pt.seqlen * sizeof(float)));
    if (opt.backward) {
      for (void** grad : {&d_o, &dq, &dk, &dv}) FC_CUDA(chk, cudaMalloc(grad, bytes));
    }
    if (!chk.ok) break;
    fill(q, pt.dtype, elems, 1);
    fill(k, pt.dtype, elems, 2);
    fill(v, pt.dtype, elems, 3);
    p.q = q;
    p.k = k;
    p.v = v;
    p.o = o;
    p.lse = lse;
    const flashcheck::KernelConfig config = flashcheck::select_config(p);
    Status status;
    flashcheck::BackwardParams bp = flashcheck::make_backward_params(p);
    if (opt.backward) {
      fill(d_o, pt.dtype, elems, 4);
      status = flashcheck::run(p, nullptr);  // O and LSE, what the backward pass reads
      bp.forward = p;
      bp.d_o = d_o;
      bp.dq = dq;
      bp.dk = dk;
      bp.dv = dv;
      bp.deterministic = opt.deterministic;
    }
    // The backward pass's own path (backward_path); its tiles are internal, reported as 0.
    const flashcheck::ComputePath path = opt.backward ? flashcheck::backward_path(bp) : config.path;
    const std::string kernel = opt.backward ? std::string(opt.deterministic ? "backward-deterministic/" : "backward/") +
                                                  flashcheck::to_string(path)
                                            : std::string(config.name);
    const int block_m = opt.backward ? 0 : config.block_m, block_n = opt.backward ? 0 : config.block_n;
    auto pass = [&] {
      if (status.ok()) status = opt.backward ? flashcheck::run_backward(bp, nullptr) : flashcheck::run(p, nullptr);
    };
    auto flush = [&] { FC_CUDA(chk, cudaMemsetAsync(flush_buf, 0, flush_bytes)); };
    const float ms = median_ms(chk, opt.warmup, opt.iters, pass, flush);
    const size_t peak = used_device_bytes(chk) - baseline;
    const bool causal = pt.mask != Mask::kNone;
    const double flops = (opt.backward ? 2.5 : 1.0) * 4.0 * pt.batch * pt.heads * double(pt.seqlen) * pt.seqlen *
                         pt.head_dim * (causal ? 0.5 : 1.0);
    const double tflops = status.ok() && chk.ok ? flops / (ms * 1e9) : NAN;
    if (!status.ok()) ++failures;
    std::printf("%-4s d=%3lld N=%5lld B=%3lld H=%2lld %-9s %-22s %8.3f ms %7.1f TFLOP/s %5.1f%% of GEMM  peak %6.0f MiB%s%s\n",
                flashcheck::to_string(pt.dtype), static_cast<long long>(pt.head_dim),
                static_cast<long long>(pt.seqlen), static_cast<long long>(pt.batch), static_cast<long long>(pt.heads),
                flashcheck::to_string(pt.mask), kernel.c_str(), ms, tflops, 100.0 * tflops / ceiling,
                peak / 1048576.0, status.ok() ? "" : "  FAILED: ", status.ok() ? "" : status.message().c_str());
    std::fprintf(json,
                 "%s\n    {\"dtype\": \"%s\", \"head_dim\": %lld, \"seqlen\": %lld, \"batch\": %lld, \"heads\": %lld, "
                 "\"mask\": \"%s\", \"kernel\": \"%s\", \"path\": \"%s\", \"block_m\": %d, \"block_n\": %d, "
                 "\"ms\": %.4f, \"tflops\": %.2f, \"fraction_of_gemm\": %.4f, \"peak_bytes\": %zu, \"ok\": %s}",
                 first ? "" : ",", flashcheck::to_string(pt.dtype), static_cast<long long>(pt.head_dim),
                 static_cast<long long>(pt.seqlen), static_cast<long long>(pt.batch),
                 static_cast<long long>(pt.heads), flashcheck::to_string(pt.mask),
                 kernel.c_str(), flashcheck::to_string(path), block_m, block_n, ms,
                 std::isfinite(tflops) ? tflops : 0.0, std::isfinite(tflops) ? tflops / ceiling : 0.0, peak,
                 status.ok() ? "true" : "false");
    first = false;
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(o);
    cudaFree(lse);
    for (void* grad : {d_o, dq, dk, dv}) cudaFree(grad);
  }
  std::fprintf(json, "\n  ]\n}\n");
  std::fclose(json);
  cudaFree(flush_buf);
  if (!chk.ok) {
    std::fprintf(stderr, "flashcheck_bench: %s\n", chk.what.c_str());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
