// A case: one text line that fully determines a test problem (dtype, shape, mask, layout, value
// distributions, injected special values, seed), e.g.
//   bf16 b=2 hq=8 hkv=2 sq=129 sk=257 d=128 mask=causal-br q=normal(0,3) k=normal(0,3) v=uniform(-1,1) seed=42
// format_case(parse_case(s)) == s for every canonical line; parse errors name the offending token.
// Optional keys (omitted when default): layout=bshd, pad=N (extra elements per row stride),
// scale=X (softmax scale; default 1/sqrt(d) rounded to fp32), inject=q[b,h,s,d]:nan;k[...]:-inf;...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashcheck/attention.h"

namespace flashcheck {

// Value families, named in RC_CLASSIFY and the case line.
enum class DistKind : int32_t {
  kNormal = 0,     // normal(mu,sigma)
  kUniform = 1,    // uniform(lo,hi)
  kConst = 2,      // const(c): every element c (all logits equal)
  kNearMax = 3,    // nearmax(frac): uniform sign * frac * dtype max * (1 - u/8)
  kSubnormal = 4,  // subnormal(): random subnormals of the dtype, random signs
  kRamp = 5,       // ramp(lo,hi): element [.., s, d] = lo + (hi-lo)*s/(S-1) + tiny noise; on K: logits increase along keys
  kDominant = 6,   // dominant(sigma,big): normal(0,sigma) except one row per (b,h) (chosen by the seed) scaled to big
  kNegZero = 7,    // negzero(): every element -0.0
};

struct ValueSpec {
  DistKind kind = DistKind::kNormal;
  double a = 0.0;  // first parameter (mu, lo, c, frac, sigma)
  double b = 1.0;  // second parameter (sigma, hi, big)
};

struct Injection {
  char tensor = 'q';  // 'q', 'k' or 'v'
  int64_t b = 0, h = 0, s = 0, d = 0;
  double value = 0.0;  // nan, inf, -inf, -0 or any number; rounded to the dtype
};

struct Case {
  DType dtype = DType::kF32;
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1, head_dim = 1;
  Mask mask = Mask::kNone;
  Layout layout = Layout::kBHSD;
  int64_t pad = 0;                    // extra elements appended to each row stride of Q, K, V and O
  std::optional<float> scale;         // default 1/sqrt(head_dim) rounded to fp32
  ValueSpec q, k, v;
  std::vector<Injection> inject;
  uint64_t seed = 0;

  float softmax_scale() const;
  friend bool operator==(const Case&, const Case&) = default;
};

std::string format_case(const Case& c);
// Parses a case line; on failure returns a Status whose message names the bad token and why.
Status parse_case(std::string_view line, Case* out);

}  // namespace flashcheck
