// Device side of row_quotient_check.h.
#include "row_quotient_check.h"

#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "common/row_quotient.cuh"

namespace flashcheck::test {
namespace {

using detail::fast_quotient;
using detail::QuotientDomain;
using detail::row_quotient;

constexpr uint32_t kSignificands = 1u << 23;
constexpr uint32_t kOneBits = 0x3f800000u;  // 1.0f
constexpr int kDomainExponentMin = -detail::kQuotientDomainExponent;  // log2 of kQuotientDomainMin
constexpr int kDomainExponentEnd = detail::kQuotientDomainExponent;   // log2 of kQuotientDomainMax

struct Result {
  unsigned long long mismatches;
  unsigned long long first;  // (x bits << 32) | l bits of one mismatch, ~0 if none
};

// `count` mismatches, (x, l) one of them.
__device__ void record(Result* r, float x, float l, uint32_t count = 1) {
  atomicAdd(&r->mismatches, static_cast<unsigned long long>(count));
  const unsigned long long key =
      (static_cast<unsigned long long>(__float_as_uint(x)) << 32) | __float_as_uint(l);
  atomicMin(&r->first, key);
}

__device__ bool same(float a, float b) { return __float_as_uint(a) == __float_as_uint(b); }

// One thread per significand of l; it walks x's significands [x_begin, x_end).
__global__ void significand_pairs(uint32_t x_begin, uint32_t x_end, Result* r) {
  const uint32_t ml = blockIdx.x * blockDim.x + threadIdx.x;
  if (ml >= kSignificands) return;
  const float l = __uint_as_float(kOneBits | ml);
  const auto quot = row_quotient(l);
  uint32_t bad = 0;
  float bad_x = 0.0f;
  for (uint32_t mx = x_begin; mx < x_end; ++mx) {
    const float x = __uint_as_float(kOneBits | mx);
    if (!same(fast_quotient(x, quot), __fdiv_rn(x, l))) {
      ++bad;
      bad_x = x;
    }
  }
  if (bad != 0) {
    record(r, bad_x, l, bad);
  }
}

__global__ void reciprocal_scaling(Result* r) {
  const uint32_t ml = blockIdx.x * blockDim.x + threadIdx.x;
  if (ml >= kSignificands) return;
  const float l = __uint_as_float(kOneBits | ml);
  const float y = row_quotient(l).y;
  for (int j = kDomainExponentMin; j < kDomainExponentEnd; ++j) {
    const float lj = ldexpf(l, j);
    if (!same(row_quotient(lj).y, ldexpf(y, -j))) record(r, y, lj);
  }
}

// splitmix64: the sample's bits from (seed, index).
__device__ uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__device__ float domain_value(uint64_t bits, bool signed_value) {
  const uint32_t significand = static_cast<uint32_t>(bits) & (kSignificands - 1);
  // Every eighth sample sits on an edge of its significand range: all zeros or all ones.
  const uint32_t edge = (bits >> 61) == 0 ? ((bits >> 60) & 1 ? kSignificands - 1 : 0) : significand;
  const int span = kDomainExponentEnd - kDomainExponentMin;
  const int exponent = kDomainExponentMin + static_cast<int>((bits >> 32) % span);
  const float v = ldexpf(__uint_as_float(kOneBits | edge), exponent);
  return signed_value && ((bits >> 59) & 1) ? -v : v;
}

__global__ void domain_samples(uint64_t seed, uint64_t count, Result* r) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count; i += stride) {
    const float x = domain_value(mix(seed ^ mix(2 * i)), true);
    const float l = domain_value(mix(seed ^ mix(2 * i + 1)), false);
    if (!same(fast_quotient(x, row_quotient(l)), __fdiv_rn(x, l))) record(r, x, l);
  }
}

__global__ void domain_holds(const float* xs, int n, float l, bool keys_empty, bool* holds) {
  QuotientDomain d;
  d.divisor(l, keys_empty);
  for (int i = 0; i < n; ++i) d.numerator(xs[i]);
  *holds = d.holds();
}

Status cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok_status();
  return {StatusCode::kCudaError, std::string(what) + ": " + cudaGetErrorString(err)};
}

template <class Launch>
Status run_check(uint64_t cases, QuotientCheck* out, Launch&& launch) {
  Result* r = nullptr;
  if (Status st = cuda(cudaMalloc(&r, sizeof(Result)), "cudaMalloc"); !st.ok()) return st;
  const Result init{0, ~0ull};
  Result host{};
  Status st = cuda(cudaMemcpy(r, &init, sizeof init, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (st.ok()) {
    launch(r);
    st = cuda(cudaGetLastError(), "launch");
  }
  if (st.ok()) st = cuda(cudaMemcpy(&host, r, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(r);
  if (!st.ok()) return st;
  out->cases = cases;
  out->mismatches = host.mismatches;
  if (host.mismatches != 0) {
    const uint32_t x_bits = static_cast<uint32_t>(host.first >> 32), l_bits = static_cast<uint32_t>(host.first);
    std::memcpy(&out->x, &x_bits, sizeof x_bits);
    std::memcpy(&out->l, &l_bits, sizeof l_bits);
  }
  return Status::ok_status();
}

constexpr int kThreads = 256;
constexpr unsigned kBlocksPerSignificandSweep = kSignificands / kThreads;

}  // namespace

Status quotient_significand_pairs(uint32_t x_begin, uint32_t x_end, QuotientCheck* out) {
  if (x_end > kSignificands || x_begin > x_end) return {StatusCode::kInvalidArgument, "x significand range"};
  return run_check(uint64_t{x_end - x_begin} * kSignificands, out, [&](Result* r) {
    significand_pairs<<<kBlocksPerSignificandSweep, kThreads>>>(x_begin, x_end, r);
  });
}

Status quotient_reciprocal_scaling(QuotientCheck* out) {
  return run_check(uint64_t{kSignificands} * (kDomainExponentEnd - kDomainExponentMin), out,
                   [&](Result* r) { reciprocal_scaling<<<kBlocksPerSignificandSweep, kThreads>>>(r); });
}

Status quotient_domain_samples(uint64_t seed, uint64_t count, QuotientCheck* out) {
  return run_check(count, out, [&](Result* r) { domain_samples<<<4096, kThreads>>>(seed, count, r); });
}

Status quotient_domain_holds(const float* xs, int n, float l, bool keys_empty, bool* holds) {
  float* d_xs = nullptr;
  bool* d_holds = nullptr;
  Status st = cuda(cudaMalloc(&d_xs, sizeof(float) * (n > 0 ? n : 1)), "cudaMalloc");
  if (st.ok()) st = cuda(cudaMalloc(&d_holds, sizeof(bool)), "cudaMalloc");
  if (st.ok() && n > 0) st = cuda(cudaMemcpy(d_xs, xs, sizeof(float) * n, cudaMemcpyHostToDevice), "cudaMemcpy");
  if (st.ok()) {
    domain_holds<<<1, 1>>>(d_xs, n, l, keys_empty, d_holds);
    st = cuda(cudaGetLastError(), "launch");
  }
  if (st.ok()) st = cuda(cudaMemcpy(holds, d_holds, sizeof(bool), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(d_xs);
  cudaFree(d_holds);
  return st;
}

}  // namespace flashcheck::test
