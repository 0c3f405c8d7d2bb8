// Qualifiers and scalar operations shared by the kernels (nvcc) and the host model (the host compiler), so
// one definition serves both. mul_rn / div_rn are the kernels' rounding points: a product or quotient rounded
// on its own, never contracted with a neighbouring add (the host code that uses them builds with
// -ffp-contract=off; on the device the _rn intrinsics guarantee it).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FLASHCHECK_HOST_DEVICE __host__ __device__
#else
#define FLASHCHECK_HOST_DEVICE
#endif

namespace flashcheck::detail {

FLASHCHECK_HOST_DEVICE constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

FLASHCHECK_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

FLASHCHECK_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// fmaxf: a NaN operand gives the other one, so a NaN score does not become the row max (it reaches O through p).
FLASHCHECK_HOST_DEVICE inline float fmax_f32(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}

// The sign bit, of zeros and NaN too.
FLASHCHECK_HOST_DEVICE inline bool signbit_f32(float x) {
#if defined(__CUDA_ARCH__)
  return signbit(x);
#else
  return std::signbit(x);
#endif
}

// tanh in fp32: tanhf on the device (at most 2 ulp), std::tanh on the host.
FLASHCHECK_HOST_DEVICE inline float tanh_f32(float x) {
#if defined(__CUDA_ARCH__)
  return tanhf(x);
#else
  return std::tanh(x);
#endif
}

}  // namespace flashcheck::detail
