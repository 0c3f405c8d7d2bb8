// Test problems for the oracle and error-model tests: inputs held as doubles rounded to their format (exactly what the
// kernel would read), a deterministic generator (splitmix64, Box-Muller on our own uniform draws), and the
// shapes and value types the tests need. No harness dependency: the oracle's tests stand alone.
#pragma once

#include <cstdint>
#include <functional>
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
  Visibility visibility = kAllKeys;
  double scale = 1.0;           // an fp32 value
  double softcap = 0.0;         // an fp32 value; 0: none
  std::vector<double> sink;     // [heads_q] fp32 values, or empty: none
  std::vector<int64_t> seqlens_q, seqlens_k;  // [batch] per-sequence lengths, or empty: seqlen_q / seqlen_k each
  std::vector<double> q, k, v;  // contiguous [B, H, S, D], rounded to the format
  Problem view() const;
};

// Shape with zero inputs and scale = fp32(1/sqrt(head_dim)).
TestProblem make_shape(Format format, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim,
                       Visibility visibility = kAllKeys, int64_t batch = 1, int64_t heads_q = 1, int64_t heads_kv = 1);

// Fills a tensor element by element: value(index in the tensor's canonical order) rounded to the format.
void fill(TestProblem* p, char tensor, const std::function<double(int64_t)>& value);
// Normal(mu, sigma) values for q, k and v from `seed`.
void fill_normal(TestProblem* p, uint64_t seed, double q_sigma, double k_sigma, double v_sigma);

}  // namespace flashcheck::oracle::testing
