// How many significant bits the tensor core keeps when it adds a block of products to its accumulator: the
// hardware fact behind the emulated reference's kMmaAlignBits (oracle/src/fp_emulation.h, docs/error-model.md §3).
// The probe runs flashcheck's own kernels on one key and query rows of which the first carries the test vector
// (the others are zero), with scale 1, so that row's LSE is the score q.k. Four shapes reach four kernels (each
// line names the one select_config picks): f32 with head_dim 128 (split TF32 on wgmma) and 32 (split TF32 on
// mma.sync), fp16/bf16 with 64 query rows and head_dim 128 (wgmma) and with one query row (the decode family's
// mma.sync). Every value is exact in the input format and in tf32 (the split's low parts are 0), and the products
// are
//   in one block:           1, -1 and 2^-k                (the block's largest addend is a product, 1)
//   across two blocks:      1 in the first; -1 and 2^-k in the second (the largest is the accumulator, 1)
// An exact sum is 2^-k. A tensor core that aligns the addends to the largest and keeps B bits of it returns 2^-k
// for k <= B - 1 and 0 beyond. Prints, per kernel and placement, the k where 2^-k is lost and the bits B = k that
// this means, then how the cut and the block's sum round.
//
//   cmake --preset gpu && cmake --build --preset gpu --target flashcheck_kernel
//   g++ -std=c++20 -O2 -Ikernel/include -I/usr/local/cuda/include -o /tmp/mma_alignment
//       tools/dev/mma_alignment.cpp build/gpu/kernel/libflashcheck_kernel.a build/gpu/kernel/libflashcheck_api.a
//       -L/usr/local/cuda/lib64 -lcudart -lcuda
//   /tmp/mma_alignment
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "flashcheck/attention.h"

namespace {

// A probe shape: the dtype, head_dim and query rows (the first carries the test vector), and the products of one
// mma block (k8 for tf32, k16 for fp16/bf16).
struct Kind {
  flashcheck::DType dtype;
  int64_t dim;
  int64_t rows;
  int block;
};

// Host bytes of `x` in `dtype` (every value used here is exact in each dtype).
void store(flashcheck::DType dtype, std::vector<unsigned char>& bytes, int i, float x) {
  switch (dtype) {
    case flashcheck::DType::kF32: std::memcpy(bytes.data() + 4 * i, &x, 4); break;
    case flashcheck::DType::kF16: {
      const __half h = __float2half_rn(x);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      break;
    }
    case flashcheck::DType::kBF16: {
      const __nv_bfloat16 h = __float2bfloat16_rn(x);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      break;
    }
    case flashcheck::DType::kF8E4M3: break;  // not probed here (fp8_wgmma_alignment.cu issues its own wgmma)
  }
}

// The score of q against k through the kernel: LSE of the first query row, one key, scale 1.
float score(const Kind& kind, const std::vector<float>& q, const std::vector<float>& k) {
  const flashcheck::Params shape = flashcheck::make_params(kind.dtype, 1, 1, 1, kind.rows, 1, kind.dim);
  flashcheck::Params p = shape;
  p.softmax_scale = 1.0f;
  const size_t element = static_cast<size_t>(flashcheck::dtype_size(kind.dtype));
  const size_t row_bytes = static_cast<size_t>(kind.dim) * element;
  const size_t q_bytes = row_bytes * static_cast<size_t>(kind.rows);
  std::vector<unsigned char> hq(q_bytes, 0), hk(row_bytes), hv(row_bytes, 0);
  for (int64_t i = 0; i < kind.dim; ++i) {
    store(kind.dtype, hq, static_cast<int>(i), q[static_cast<size_t>(i)]);
    store(kind.dtype, hk, static_cast<int>(i), k[static_cast<size_t>(i)]);
  }
  void *dq, *dk, *dv, *dout;
  float* dlse;
  cudaMalloc(&dq, q_bytes);
  cudaMalloc(&dk, row_bytes);
  cudaMalloc(&dv, row_bytes);
  cudaMalloc(&dout, q_bytes);
  cudaMalloc(&dlse, sizeof(float) * static_cast<size_t>(kind.rows));
  cudaMemcpy(dq, hq.data(), q_bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(dk, hk.data(), row_bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(dv, hv.data(), row_bytes, cudaMemcpyHostToDevice);
  p.q = dq;
  p.k = dk;
  p.v = dv;
  p.o = dout;
  p.lse = dlse;
  const flashcheck::Status s = flashcheck::run(p);
  float lse = NAN;
  if (s.ok()) cudaMemcpy(&lse, dlse, sizeof(float), cudaMemcpyDeviceToHost);
  else std::fprintf(stderr, "run: %s\n", s.message().c_str());
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
  cudaFree(dlse);
  return lse;
}

// The probe's kernel, as select_config names it.
std::string kernel_name(const Kind& kind) {
  flashcheck::Params p = flashcheck::make_params(kind.dtype, 1, 1, 1, kind.rows, 1, kind.dim);
  p.softmax_scale = 1.0f;
  return flashcheck::select_config(p).name;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::puts("usage: mma_alignment   (on a Hopper GPU; prints the bits the tensor core keeps when aligning addends)");
    return 0;
  }
  const Kind kinds[] = {{flashcheck::DType::kF32, 128, 1, 8},
                        {flashcheck::DType::kF32, 32, 1, 8},
                        {flashcheck::DType::kF16, 128, 64, 16},
                        {flashcheck::DType::kBF16, 128, 64, 16},
                        {flashcheck::DType::kF16, 128, 1, 16},
                        {flashcheck::DType::kBF16, 128, 1, 16}};
  for (const Kind& kind : kinds) {
    for (const bool across : {false, true}) {
      int lost = -1;
      std::string trace;
      for (int e = 16; e <= 40; ++e) {
        std::vector<float> q(static_cast<size_t>(kind.dim), 0.0f), k(static_cast<size_t>(kind.dim), 0.0f);
        // 2^-e as a product of two values that each stay normal in fp16 (2^-14 and above) where e allows.
        const int qe = e / 2, ke = e - e / 2;
        const int second = across ? kind.block : 1;  // where -1 and 2^-e go
        q[0] = 1.0f;
        k[0] = 1.0f;
        q[second] = 1.0f;
        k[second] = -1.0f;
        q[second + 1] = std::ldexp(1.0f, -qe);
        k[second + 1] = std::ldexp(1.0f, -ke);
        const float s = score(kind, q, k);
        const double want = std::ldexp(1.0, -e);
        const bool kept = std::fabs(s - want) < 0.01 * want;
        trace += kept ? '1' : (s == 0.0f ? '0' : '?');
        if (!kept && lost < 0) lost = e;
      }
      std::printf("%-28s %-14s e = 16..40: %s  -> 2^-e lost from e = %d: %s\n", kernel_name(kind).c_str(),
                  across ? "across blocks" : "in one block", trace.c_str(), lost,
                  lost > 0 ? (std::to_string(lost) + " bits kept").c_str() : "none lost");
    }
  }
  // How the cut rounds, with B = 26 bits (LSB 2^-25 when the largest addend is 1): products 1, -1 and +-3 2^-27
  // (0.75 of that LSB) give 0 when the addends are cut toward zero, +-2^-25 when they are rounded to nearest, and
  // -2^-25 for the negative one alone when they are rounded down (two's complement truncation). How the block's sum
  // becomes fp32: products 1 and 3 2^-25 (1 + 0.75 ulp) give the score 1 toward zero and 1 + 2^-23 to nearest,
  // told apart by the kernel's own LSE of the two exact sums.
  for (const Kind& kind : kinds) {
    const auto run2 = [&](float a, float b) {  // score of the products 1 * 1 and a * b (b exact in the format)
      std::vector<float> q(static_cast<size_t>(kind.dim), 0.0f), k(static_cast<size_t>(kind.dim), 0.0f);
      q[0] = k[0] = 1.0f;
      q[1] = a;
      k[1] = b;
      return score(kind, q, k);
    };
    const auto run3 = [&](float a, float b) {  // products 1, -1 and a * b
      std::vector<float> q(static_cast<size_t>(kind.dim), 0.0f), k(static_cast<size_t>(kind.dim), 0.0f);
      q[0] = k[0] = 1.0f;
      q[1] = 1.0f;
      k[1] = -1.0f;
      q[2] = a;
      k[2] = b;
      return score(kind, q, k);
    };
    const float lsb = std::ldexp(1.0f, -25);
    const float plus = run3(3.0f * std::ldexp(1.0f, -14), std::ldexp(1.0f, -13));
    const float minus = run3(-3.0f * std::ldexp(1.0f, -14), std::ldexp(1.0f, -13));
    const char* cut = plus == 0.0f && minus == 0.0f           ? "toward zero"
                      : plus == lsb && minus == -lsb           ? "to nearest"
                      : plus == 0.0f && minus == -lsb          ? "down (two's complement)"
                                                               : "unclassified";
    const float one = run2(0.0f, 0.0f), one_ulp = run2(std::ldexp(1.0f, -12), std::ldexp(1.0f, -11));
    const float sum = run2(3.0f * std::ldexp(1.0f, -13), std::ldexp(1.0f, -12));
    const char* final_rounding = sum == one && one != one_ulp ? "toward zero"
                                 : sum == one_ulp && one != one_ulp ? "to nearest"
                                                                     : "unclassified";
    std::printf("%-28s addends cut %s (+-0.75 LSB: %.3g, %.3g); block sum to fp32 %s\n", kernel_name(kind).c_str(),
                cut, plus, minus, final_rounding);
    std::printf("%-28s   (LSE %.9g; of 1: %.9g, of 1 + ulp: %.9g)\n", "", sum, one, one_ulp);
  }
  return 0;
}
