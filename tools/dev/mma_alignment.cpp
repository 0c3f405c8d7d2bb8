// How many significant bits the tensor core keeps when it adds a block of products to its accumulator: the
// hardware fact behind the emulated reference's kMmaAlignBits (oracle/src/fp_emulation.h, docs/error-model.md §6).
// The probe runs flashcheck's own kernels (the split-TF32 wgmma kernel for f32, the warp-specialized tensor-core
// kernel for f16/bf16) on one query row and one key with head_dim 128 and scale 1, so LSE is the score q.k. Every
// value is exact in the input format and in tf32 (the split's low parts are 0), and the products are
//   in one block:           1, -1 and 2^-k                (the block's largest addend is a product, 1)
//   across two blocks:      1 in the first; -1 and 2^-k in the second (the largest is the accumulator, 1)
// An exact sum is 2^-k. A tensor core that aligns the addends to the largest and keeps B bits of it returns 2^-k
// for k <= B - 1 and 0 beyond. Prints, per dtype and placement, the k where 2^-k is lost and the bits B = k that
// this means.
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

constexpr int kDim = 128;

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
  }
}

// The score of q against k through the kernel: LSE of one row with one key and scale 1.
float score(flashcheck::DType dtype, const std::vector<float>& q, const std::vector<float>& k) {
  flashcheck::Params p = flashcheck::make_params(dtype, 1, 1, 1, 1, 1, kDim);
  p.softmax_scale = 1.0f;
  const size_t bytes = static_cast<size_t>(kDim) * flashcheck::dtype_size(dtype);
  std::vector<unsigned char> hq(bytes), hk(bytes), hv(bytes, 0);
  for (int i = 0; i < kDim; ++i) {
    store(dtype, hq, i, q[i]);
    store(dtype, hk, i, k[i]);
  }
  void *dq, *dk, *dv, *dout;
  float* dlse;
  cudaMalloc(&dq, bytes);
  cudaMalloc(&dk, bytes);
  cudaMalloc(&dv, bytes);
  cudaMalloc(&dout, bytes);
  cudaMalloc(&dlse, sizeof(float));
  cudaMemcpy(dq, hq.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(dk, hk.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(dv, hv.data(), bytes, cudaMemcpyHostToDevice);
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

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::puts("usage: mma_alignment   (on a Hopper GPU; prints the bits the tensor core keeps when aligning addends)");
    return 0;
  }
  struct Kind {
    flashcheck::DType dtype;
    const char* name;
    int block;  // products per mma block: k8 (tf32) or k16 (fp16/bf16)
  };
  const Kind kinds[] = {{flashcheck::DType::kF32, "f32 (split tf32, wgmma k8)", 8},
                        {flashcheck::DType::kF16, "f16 (wgmma k16)", 16},
                        {flashcheck::DType::kBF16, "bf16 (wgmma k16)", 16}};
  for (const Kind& kind : kinds) {
    for (const bool across : {false, true}) {
      int lost = -1;
      std::string trace;
      for (int e = 16; e <= 40; ++e) {
        std::vector<float> q(kDim, 0.0f), k(kDim, 0.0f);
        // 2^-e as a product of two values that each stay normal in fp16 (2^-14 and above) where e allows.
        const int qe = e / 2, ke = e - e / 2;
        const int second = across ? kind.block : 1;  // where -1 and 2^-e go
        q[0] = 1.0f;
        k[0] = 1.0f;
        q[second] = 1.0f;
        k[second] = -1.0f;
        q[second + 1] = std::ldexp(1.0f, -qe);
        k[second + 1] = std::ldexp(1.0f, -ke);
        const float s = score(kind.dtype, q, k);
        const double want = std::ldexp(1.0, -e);
        const bool kept = std::fabs(s - want) < 0.01 * want;
        trace += kept ? '1' : (s == 0.0f ? '0' : '?');
        if (!kept && lost < 0) lost = e;
      }
      std::printf("%-28s %-14s e = 16..40: %s  -> 2^-e lost from e = %d: %s\n", kind.name,
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
      std::vector<float> q(kDim, 0.0f), k(kDim, 0.0f);
      q[0] = k[0] = 1.0f;
      q[1] = a;
      k[1] = b;
      return score(kind.dtype, q, k);
    };
    const auto run3 = [&](float a, float b) {  // products 1, -1 and a * b
      std::vector<float> q(kDim, 0.0f), k(kDim, 0.0f);
      q[0] = k[0] = 1.0f;
      q[1] = 1.0f;
      k[1] = -1.0f;
      q[2] = a;
      k[2] = b;
      return score(kind.dtype, q, k);
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
    std::printf("%-28s addends cut %s (+-0.75 LSB: %.3g, %.3g); block sum to fp32 %s (LSE %.9g; 1: %.9g, 1+ulp: %.9g)\n",
                kind.name, cut, plus, minus, final_rounding, sum, one, one_ulp);
  }
  return 0;
}
