// exp2 on the FMA pipe: the relative error of a polynomial exp2 against exp2 in double, for every fp32 x in
// [-126, 0] (the tensor-core family's exponents fl(s c) - fl(r c) are never above 0), and its special values.
// The candidate for taking part of a tile's exp2 off the MUFU at d = 64 (docs/design/tensor-core-kernel.md, "Open"):
// to keep docs/error-model.md unchanged it must stay within kExp2RelErr = 2^-22, give exactly 1 at 0 (the reference
// key's p) and exactly 0 at -inf (masked keys) and below -126 (as ex2.approx.ftz flushes), and keep NaN.
//
// The evaluation is what a kernel would run, in fp32 with round-to-nearest and fused multiply-adds (the host's
// std::fmaf and the GPU's fma.rn round alike): j = rint(x) through the 1.5 * 2^23 shift, f = x - j in
// [-0.5, 0.5] (exact), p = 1 + f g(f) by Horner, 2^j built in the exponent field, r = p * 2^j (exact, r >= 2^-126).
// Per value: 3 FADD, N FFMA, one integer multiply-add for 2^j, one FMUL, a compare and a select; MUFU.EX2 is one.
// The coefficients of g are near-minimax for the relative error on [-0.5, 0.5] (reweighted least squares on
// Chebyshev nodes), rounded to fp32.
//
//   g++ -std=c++20 -O2 -pthread tools/dev/exp2_fma.cpp -o /tmp/exp2_fma && /tmp/exp2_fma   # about 15 s on 2 cores
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr float kDegree5[] = {0x1.62e42ap-1f, 0x1.ebf9bcp-3f, 0x1.c6b754p-5f, 0x1.3cea88p-7f, 0x1.5bba04p-10f};
constexpr float kDegree6[] = {0x1.62e430p-1f, 0x1.ebfbdcp-3f, 0x1.c6aee8p-5f,
                              0x1.3b2d4cp-7f, 0x1.5f3e56p-10f, 0x1.41fbb8p-13f};

template <int N>
float exp2_fma(float x, const float (&g)[N]) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: x + kShift holds rint(x) in its low mantissa bits
  const float t = x + kShift;
  const float j = t - kShift;
  const float f = x - j;
  float acc = g[N - 1];
  for (int i = N - 2; i >= 0; --i) acc = std::fmaf(acc, f, g[i]);
  const float p = std::fmaf(f, acc, 1.0f);
  // t's bits end in j (two's complement): shifted into the exponent field and biased, they are 2^j.
  const float scale = std::bit_cast<float>((std::bit_cast<uint32_t>(t) << 23) + 0x3f800000u);
  const float r = p * scale;
  return x < -126.0f ? 0.0f : r;  // NaN fails the compare and stays NaN through p
}

template <int N>
bool check(const char* name, const float (&g)[N]) {
  const uint32_t first = std::bit_cast<uint32_t>(-0.0f);
  const uint32_t last = std::bit_cast<uint32_t>(-126.0f);  // negative floats: larger bits, larger magnitude
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<double> worst(workers, 0.0);
  std::vector<float> worst_x(workers, 0.0f);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      for (uint64_t bits = first + w; bits <= last; bits += workers) {
        const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
        const double exact = std::exp2(static_cast<double>(x));
        const double rel = std::fabs(exp2_fma(x, g) - exact) / exact;
        if (rel > worst[w]) {
          worst[w] = rel;
          worst_x[w] = x;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  unsigned at = 0;
  for (unsigned w = 1; w < workers; ++w) at = worst[w] > worst[at] ? w : at;
  const float inf = std::numeric_limits<float>::infinity();
  const bool specials = exp2_fma(0.0f, g) == 1.0f && exp2_fma(-0.0f, g) == 1.0f && exp2_fma(-inf, g) == 0.0f &&
                        exp2_fma(-126.5f, g) == 0.0f && exp2_fma(-1e30f, g) == 0.0f &&
                        std::isnan(exp2_fma(std::numeric_limits<float>::quiet_NaN(), g));
  const bool within = worst[at] <= std::ldexp(1.0, -22);
  std::printf("%s (%d FFMA): max relative error %.3e = 2^%.2f at x = %a, %s 2^-22; exp2(+-0) = 1, exp2(-inf) = 0, "
              "0 below -126, NaN kept: %s\n",
              name, N, worst[at], std::log2(worst[at]), worst_x[at], within ? "within" : "ABOVE",
              specials ? "yes" : "NO");
  return within && specials;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    std::puts("usage: exp2_fma   (exhaustive over fp32 x in [-126, 0]; exit 1 if a candidate misses the bound)");
    return std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h" ? 0 : 2;
  }
  const bool ok5 = check("degree 5", kDegree5);
  const bool ok6 = check("degree 6", kDegree6);
  return ok5 && ok6 ? 0 : 1;
}
