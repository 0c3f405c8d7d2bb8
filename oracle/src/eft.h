// Error-free transformations in double (Knuth's TwoSum, Veltkamp's split) and the compensated accumulator
// built on them (Ogita, Rump, Oishi, "Accurate sum and dot product", SISC 2005: Sum2/Dot2). Correct only
// without contraction or reassociation: the oracle library is compiled with -ffp-contract=off and no
// -ffast-math (oracle/CMakeLists.txt), and nothing here calls std::fma.
#pragma once

namespace flashcheck::oracle::detail {

inline constexpr double kDoubleUnit = 0x1p-53;  // unit roundoff of double

// s + e == a + b exactly, s = fl(a + b). Six flops, no branch (Knuth).
inline void two_sum(double a, double b, double* s, double* e) {
  const double sum = a + b;
  const double b_virtual = sum - a;
  const double a_virtual = sum - b_virtual;
  *s = sum;
  *e = (a - a_virtual) + (b - b_virtual);
}

// hi + lo == x exactly with hi carrying at most 26 significant bits and lo at most 27 (Veltkamp's split
// with factor 2^27 + 1; valid for |x| < 2^995). A product hi * y or lo * y with y of at most 24 significant
// bits (an fp32/fp16/bf16 value) is then exact in double: the P*V products of the fast tier need no FMA.
inline void split_26(double x, double* hi, double* lo) {
  constexpr double kSplitter = 0x1p27 + 1.0;
  const double t = kSplitter * x;
  *hi = t - (t - x);
  *lo = x - *hi;
}

// Compensated sum (Sum2): the running sum plus the exact sum of its rounding errors, summed in turn.
// |value() - exact| <= u |exact| + gamma_{n-1}^2 sum |x_i| (ORO 2005, Prop. 4.5); the unrounded pair
// (sum, comp) is within gamma_{n-1}^2 sum |x_i| of the exact sum.
struct CompensatedSum {
  double sum = 0.0;
  double comp = 0.0;
  void add(double x) {
    double s = 0.0, e = 0.0;
    two_sum(sum, x, &s, &e);
    sum = s;
    comp += e;
  }
  // Adds a term that is already tiny compared with the sum's rounding (e.g. the low part of an exact product):
  // it joins the compensation directly.
  void add_small(double x) { comp += x; }
  double value() const { return sum + comp; }
};

// gamma_n(u) = n u / (1 - n u) (Higham, ASNA 2nd ed., Lemma 3.1); +inf when n u >= 1.
inline double gamma_n(double n, double unit) {
  const double nu = n * unit;
  return nu < 1.0 ? nu / (1.0 - nu) : __builtin_inf();
}

}  // namespace flashcheck::oracle::detail
