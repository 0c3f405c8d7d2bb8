// Test problems for the oracle and error-model tests: inputs held as doubles rounded to their format (exactly what the
// kernel would read), a deterministic generator (splitmix64, Box-Muller on our own uniform draws), and the
// shapes and value types the tests need. No harness dependency: the oracle's tests stand alone.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "flashcheck/oracle.h"

namespace flashcheck::oracle::testing {

// Round-to-nearest-even of x to `format` (subnormals kept, overflow to +-inf), returned as double.
double round_to(Format format, double x);
double format_max(Format format);

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();                      // [0, 1)
  double uniform(double lo, double hi);  // [lo, hi)
  double normal(double mu, double sigma);
  int64_t below(int64_t bound);  // [0, bound)

 private:
  uint64_t state_;
};

struct TestProblem {
  Format format = Format::kF32;
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1, head_dim = 1;
  int64_t head_dim_v = 0;       // V's and O's columns; 0: head_dim (Problem::head_dim_v)
  Visibility visibility = kAllKeys;
  double scale = 1.0;           // an fp32 value
  double softcap = 0.0;         // an fp32 value; 0: none
  std::vector<double> sink;     // [heads_q] fp32 values, or empty: none
  std::vector<int64_t> seqlens_q, seqlens_k;  // [batch] per-sequence lengths, or empty: seqlen_q / seqlen_k each
  std::vector<double> q, k, v;  // contiguous [B, H, S, D] (v: D = value_dim()), rounded to the format
  std::vector<double> descale_q, descale_k, descale_v;  // [batch, heads_kv] fp32 values, or empty (Problem's)
  int64_t value_dim() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  Problem view() const;
};

// Shape with zero inputs and scale = fp32(1/sqrt(head_dim)); V has head_dim_v columns (0: head_dim).
TestProblem make_shape(Format format, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim,
                       Visibility visibility = kAllKeys, int64_t batch = 1, int64_t heads_q = 1, int64_t heads_kv = 1,
                       int64_t head_dim_v = 0);

// Fills a tensor element by element: value(index in the tensor's canonical order) rounded to the format.
void fill(TestProblem* p, char tensor, const std::function<double(int64_t)>& value);
// Normal(mu, sigma) values for q, k and v from `seed`.
void fill_normal(TestProblem* p, uint64_t seed, double q_sigma, double k_sigma, double v_sigma);

// (head_dim, head_dim_v) pairs of unequal widths: DeepSeek's (192, 128), the common pairs in both orders, and small
// odd ones whose row strides cannot line up.
inline constexpr std::pair<int64_t, int64_t> kUnequalHeadDims[] = {{192, 128}, {128, 192}, {64, 128}, {128, 64},
                                                                    {256, 128}, {3, 5},     {5, 3},    {1, 7}};

// A problem of unequal widths where a mixed-up dimension shows: two sequences of their own lengths (5 x 37 and
// 3 x 20 inside 5 x 37 arrays, the unused rows and keys NaN), four query heads on two K/V heads, bottom-right causal,
// and V's column c spread 1 + c / 8, so that a column read from another place or with another stride differs.
TestProblem unequal_dims_problem(Format format, int64_t head_dim, int64_t head_dim_v, uint64_t seed);

// The same problem with V made of the given columns of p's V (column c is p's column columns[c]): a permutation, or
// the first few columns.
TestProblem with_v_columns(const TestProblem& p, const std::vector<int64_t>& columns);

}  // namespace flashcheck::oracle::testing
