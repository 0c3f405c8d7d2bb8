// Dropout in the host model (docs/design/dropout-rng.md; the general kernel's arithmetic): p = 0 is no dropout bit for
// bit, forward and backward; the mask dump is the contract's decision (common/dropout_rng.h's dropout_keep) on every
// visible element and 0 everywhere else, packed sequences counted within themselves; the kept fraction of a large
// dump lies near 1 - p; O, LSE, dQ, dK and dV agree with a double-precision reference that applies the same mask;
// the routing sends every dropout problem to the general family; each dropout defect changes what it should.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/dropout_rng.h"
#include "flashcheck/attention.h"
#include "flashcheck/backward.h"
#include "flashcheck/host_model.h"
#include "flashcheck/mutants.h"
#include "sequence_problem.h"
#include "test_problem.h"

namespace flashcheck {
namespace {

using test::Problem;
using test::ProblemSpec;

constexpr uint64_t kSeed = 0x0123456789abcdefull;
constexpr uint64_t kOffsetPast32Bits = (uint64_t{1} << 32) + 5;  // a stream sum that needs the offset's high word

// dO (uniform in [-1, 1), laid out like O) and dQ, dK, dV buffers (NaN, so unwritten elements show) for pr's
// forward, whose O and LSE the host model has written.
struct Grads {
  std::vector<unsigned char> d_o, dq, dk, dv;
  BackwardParams bp;
};
void make_grads(const Problem& pr, Grads* g) {
  const Params& p = pr.params;
  g->bp = make_backward_params(p);
  g->d_o.assign(pr.o.size(), 0);
  uint64_t index = 0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t s = 0; s < p.seqlen_q; ++s)
        for (int64_t d = 0; d < value_head_dim(p); ++d)
          Problem::set(p, g->d_o, p.o_stride, b, h, s, d, static_cast<float>(test::hash_uniform(77, index++)));
  g->dq.assign(pr.q.size(), 0xff);
  g->dk.assign(pr.k.size(), 0xff);
  g->dv.assign(pr.v.size(), 0xff);
  g->bp.d_o = g->d_o.data();
  g->bp.dq = g->dq.data();
  g->bp.dk = g->dk.data();
  g->bp.dv = g->dv.data();
}

// The forward (and its dump, where `dump`) and the backward of `spec` with the dropout fields set; `config`, where
// given, overrides the forward's tiles and path.
struct DropoutRun {
  Problem pr;
  Grads g;
  std::vector<uint8_t> mask;
};
void run_both(const ProblemSpec& spec, float p, uint64_t seed, uint64_t offset, bool dump, DropoutRun* run,
              ModelDefect defect = ModelDefect::kNone, const KernelConfig* config = nullptr) {
  test::make_problem(spec, &run->pr);
  Params& params = run->pr.params;
  params.dropout_p = p;
  params.dropout_seed = seed;
  params.dropout_offset = offset;
  if (dump) {
    run->mask.assign(static_cast<size_t>(params.batch * params.heads_q * params.seqlen_q * params.seqlen_k), 0xab);
    params.dropout_mask_out = run->mask.data();
  }
  HostModelOptions options;
  options.defect = defect;
  if (config != nullptr) {
    options.override_config = true;
    options.config = *config;
  }
  const Status fwd = run_host_model(params, options);
  ASSERT_TRUE(fwd.ok()) << fwd.message();
  make_grads(run->pr, &run->g);
  const Status bwd = run_backward_host_model(run->g.bp, options);
  ASSERT_TRUE(bwd.ok()) << bwd.message();
}

// The contract's decision of element (b, h, i, j) at probability p, from the kernel's generator.
bool contract_keeps(const Params& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  return detail::dropout_keep(p.dropout_seed, p.dropout_offset, p.heads_q, b, h, i, j,
                              detail::dropout_threshold(p.dropout_p));
}

// The dump of `p` (host model) against the contract and the kernel's visibility rule on every byte; "" if equal.
std::string dump_difference(const Params& p, const std::vector<uint8_t>& mask) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t seqlen_q = sequence_q_len(p, b);
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const KeyRange keys = i < seqlen_q ? visible_key_range(p, b, i) : KeyRange{};
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          const bool visible = j >= keys.begin && j < keys.end;
          const uint8_t expected = visible && contract_keeps(p, b, h, i, j) ? 1 : 0;
          const uint8_t got = mask[static_cast<size_t>(((b * p.heads_q + h) * p.seqlen_q + i) * p.seqlen_k + j)];
          if (got != expected) {
            std::ostringstream out;
            out << "(" << b << ", " << h << ", " << i << ", " << j << "): " << int{got} << ", expected " << int{expected};
            return out.str();
          }
        }
      }
    }
  }
  return "";
}

// ---- p = 0 is no dropout, bit for bit

TEST(Dropout_Model, ZeroProbabilityIsBitIdenticalForwardAndBackward) {
  const ProblemSpec specs[] = {
      {DType::kF32, 1, 2, 1, 37, 53, 40, Mask::kCausalBottomRight, Layout::kBHSD, 0, 3},
      {DType::kF16, 2, 2, 2, 17, 130, 64, Mask::kNone, Layout::kBSHD, 0, 4},
      {DType::kBF16, 1, 4, 2, 65, 33, 8, Mask::kCausalTopLeft, Layout::kBHSD, 1, 5},
  };
  for (const ProblemSpec& spec : specs) {
    DropoutRun off, zero;
    run_both(spec, 0.0f, 0, 0, false, &off);
    run_both(spec, 0.0f, kSeed, kOffsetPast32Bits, false, &zero);
    EXPECT_EQ(select_config(zero.pr.params).name, select_config(off.pr.params).name) << spec.name();
    EXPECT_TRUE(zero.pr.o == off.pr.o) << spec.name();
    EXPECT_EQ(std::memcmp(zero.pr.lse.data(), off.pr.lse.data(), off.pr.lse.size() * sizeof(float)), 0) << spec.name();
    EXPECT_TRUE(zero.g.dq == off.g.dq) << spec.name();
    EXPECT_TRUE(zero.g.dk == off.g.dk) << spec.name();
    EXPECT_TRUE(zero.g.dv == off.g.dv) << spec.name();
  }
}

// ---- the mask dump

TEST(Dropout_Model, DumpIsTheContractOnVisibleElementsAndZeroElsewhere) {
  const ProblemSpec specs[] = {
      {DType::kF32, 2, 4, 2, 23, 41, 16, Mask::kCausalBottomRight, Layout::kBHSD, 0, 6},
      {DType::kF16, 1, 2, 1, 50, 9, 8, Mask::kCausalTopLeft, Layout::kBSHD, 0, 7},  // rows that see no key
      {DType::kBF16, 1, 1, 1, 7, 130, 8, Mask::kNone, Layout::kBHSD, 0, 8},
  };
  for (const ProblemSpec& spec : specs) {
    for (const uint64_t offset : {uint64_t{0}, kOffsetPast32Bits, ~uint64_t{0} - 2}) {
      DropoutRun run;
      run_both(spec, 0.25f, kSeed, offset, true, &run);
      EXPECT_EQ(dump_difference(run.pr.params, run.mask), "") << spec.name() << " offset " << offset;
    }
  }
  // A window: keys outside it are 0 whatever their draw.
  ProblemSpec window{DType::kF32, 1, 2, 2, 30, 30, 8, Mask::kWindowTopLeft, Layout::kBHSD, 0, 9};
  DropoutRun run;
  test::make_problem(window, &run.pr);
  Params& p = run.pr.params;
  p.window_left = 3;
  p.window_right = 2;
  p.dropout_p = 0.5f;
  p.dropout_seed = kSeed;
  run.mask.assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k), 0xab);
  p.dropout_mask_out = run.mask.data();
  ASSERT_TRUE(run_host_model(p).ok());
  EXPECT_EQ(dump_difference(p, run.mask), "");
}

// Packed sequences (varlen Q, packed K/V with slots past seqused_k): rows and keys count within each sequence, the
// bytes past a sequence's lengths are 0, and every byte of the [batch, heads_q, seqlen_q, seqlen_k] buffer is written.
TEST(Dropout_Model, DumpOfPackedSequencesCountsWithinEachSequence) {
  const std::vector<test::SeqLens> seqs{{5, 9}, {0, 4}, {13, 0}, {21, 33}};
  test::Buffers buf;
  test::build_packed(DType::kF16, 16, Mask::kCausalBottomRight, seqs, 3, 0, 1, &buf);
  Params& p = buf.params;
  p.dropout_p = 0.5f;
  p.dropout_seed = kSeed;
  p.dropout_offset = kOffsetPast32Bits;
  std::vector<uint8_t> mask(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k), 0xab);
  p.dropout_mask_out = mask.data();
  const Status st = run_host_model(p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(dump_difference(p, mask), "");
  int64_t ones = 0;
  for (uint8_t byte : mask) ones += byte;
  EXPECT_GT(ones, 0);  // not vacuous: sequence 3's visible elements are about half kept
}

// The kept fraction of 131,072 visible elements (dense, no mask). The count is Binomial(n, 1 - t / 2^32) for
// independent uniform draws; the bound allows 6 standard deviations, which such a count exceeds with probability
// below 2e-9 (normal tail; n p (1 - p) >= 10^4 here, where the normal approximation is close), and the inputs are
// fixed, so the test is deterministic. A missing factor or a threshold read as the keep probability (kept iff
// r < t) lands about n |1 - 2p| away, hundreds of deviations at p = 0.1 and 0.9.
TEST(Dropout_Model, KeptFractionIsNearOneMinusP) {
  const ProblemSpec spec{DType::kF32, 1, 2, 1, 64, 1024, 8, Mask::kNone, Layout::kBHSD, 0, 10};
  for (const float p_drop : {0.1f, 0.5f, 0.9f}) {
    DropoutRun run;
    test::make_problem(spec, &run.pr);
    Params& p = run.pr.params;
    p.dropout_p = p_drop;
    p.dropout_seed = kSeed;
    p.dropout_offset = 12345;
    run.mask.assign(static_cast<size_t>(p.heads_q * p.seqlen_q * p.seqlen_k), 0xab);
    p.dropout_mask_out = run.mask.data();
    ASSERT_TRUE(run_host_model(p).ok());
    double kept = 0;
    for (uint8_t byte : run.mask) kept += byte;
    const double n = static_cast<double>(run.mask.size());
    const double q = 1.0 - std::ldexp(static_cast<double>(detail::dropout_threshold(p_drop)), -32);
    EXPECT_LE(std::fabs(kept - n * q), 6.0 * std::sqrt(n * q * (1.0 - q))) << "p " << p_drop << " kept " << kept;
  }
}

// ---- the arithmetic against a double-precision reference with the same mask

// O_i = sum_j P_ij z_ij / (1 - p) v_j with P the undropped softmax; LSE undropped; dV_j = sum_i P_ij z_ij / (1 - p)
// dO_i, dS_ij = P_ij (z_ij dO_i.v_j / (1 - p) - D_i) with D_i = dO_i.O_i, dQ_i = scale sum_j dS_ij k_j, dK_j = scale
// sum_i dS_ij q_i (GQA: dK and dV summed over the group). Dense fp32 problems.
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;  // [b, h, s, d] contiguous (lse [b, h, s])
};
Reference dropped_reference(const Problem& pr, const Grads& g) {
  const Params& p = pr.params;
  const int64_t dim = p.head_dim, group = p.heads_q / p.heads_kv;
  const double keep_scale = 1.0 / (1.0 - static_cast<double>(p.dropout_p));
  Reference r;
  r.o.assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * dim), 0.0);
  r.lse.assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q), -INFINITY);
  r.dq.assign(r.o.size(), 0.0);
  r.dk.assign(static_cast<size_t>(p.batch * p.heads_kv * p.seqlen_k * dim), 0.0);
  r.dv.assign(r.dk.size(), 0.0);
  const auto q = [&](int64_t b, int64_t h, int64_t i, int64_t d) { return Problem::get(p, pr.q, p.q_stride, b, h, i, d); };
  const auto k = [&](int64_t b, int64_t h, int64_t j, int64_t d) { return Problem::get(p, pr.k, p.k_stride, b, h / group, j, d); };
  const auto v = [&](int64_t b, int64_t h, int64_t j, int64_t d) { return Problem::get(p, pr.v, p.v_stride, b, h / group, j, d); };
  const auto d_o = [&](int64_t b, int64_t h, int64_t i, int64_t d) { return Problem::get(p, g.d_o, p.o_stride, b, h, i, d); };
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const KeyRange keys = visible_key_range(p, i);
        if (keys.size() == 0) continue;
        std::vector<double> s(static_cast<size_t>(keys.size()));
        double m = -INFINITY;
        for (int64_t j = keys.begin; j < keys.end; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < dim; ++d) dot += static_cast<double>(q(b, h, i, d)) * k(b, h, j, d);
          s[static_cast<size_t>(j - keys.begin)] = dot * p.softmax_scale;
          m = std::max(m, s[static_cast<size_t>(j - keys.begin)]);
        }
        double l = 0.0;
        for (double& x : s) l += (x = std::exp(x - m));
        const int64_t row = (b * p.heads_q + h) * p.seqlen_q + i;
        r.lse[static_cast<size_t>(row)] = m + std::log(l);
        double* o = r.o.data() + row * dim;
        std::vector<double> w(s.size());  // P z / (1 - p)
        for (int64_t j = keys.begin; j < keys.end; ++j) {
          const size_t at = static_cast<size_t>(j - keys.begin);
          s[at] /= l;  // P
          w[at] = contract_keeps(p, b, h, i, j) ? s[at] * keep_scale : 0.0;
          for (int64_t d = 0; d < dim; ++d) o[d] += w[at] * v(b, h, j, d);
        }
        double d_i = 0.0;
        for (int64_t d = 0; d < dim; ++d) d_i += d_o(b, h, i, d) * o[d];
        for (int64_t j = keys.begin; j < keys.end; ++j) {
          const size_t at = static_cast<size_t>(j - keys.begin);
          double dp = 0.0;
          for (int64_t d = 0; d < dim; ++d) dp += static_cast<double>(d_o(b, h, i, d)) * v(b, h, j, d);
          const double kept_dp = w[at] == 0.0 ? 0.0 : dp * keep_scale;
          const double ds = s[at] * (kept_dp - d_i);
          const int64_t key_row = (b * p.heads_kv + h / group) * p.seqlen_k + j;
          for (int64_t d = 0; d < dim; ++d) {
            r.dq[static_cast<size_t>(row * dim + d)] += p.softmax_scale * ds * k(b, h, j, d);
            r.dk[static_cast<size_t>(key_row * dim + d)] += p.softmax_scale * ds * q(b, h, i, d);
            r.dv[static_cast<size_t>(key_row * dim + d)] += w[at] * d_o(b, h, i, d);
          }
        }
      }
    }
  }
  return r;
}

// The worst |got - ref| / (1 + |ref|) over a [b, heads, s, d] tensor laid out with `st`.
double worst(const Params& p, const std::vector<unsigned char>& t, const Strides& st, int64_t heads, int64_t rows,
             const std::vector<double>& ref) {
  double e = 0.0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < rows; ++s)
        for (int64_t d = 0; d < p.head_dim; ++d) {
          const double want = ref[static_cast<size_t>(((b * heads + h) * rows + s) * p.head_dim + d)];
          const double got = Problem::get(p, t, st, b, h, s, d);
          e = std::max(e, std::isnan(got) ? INFINITY : std::fabs(got - want) / (1.0 + std::fabs(want)));
        }
  return e;
}

// fp32 sums of at most 70 terms of magnitude about 1: the model's error is near 1e-6; a wrong mask, a missing factor or
// an unscaled dP is off by about 0.1 or more.
constexpr double kF32Tolerance = 1e-4;

TEST(Dropout_Model, ForwardAndBackwardMatchTheDroppedReference) {
  const ProblemSpec specs[] = {
      {DType::kF32, 1, 2, 1, 19, 45, 16, Mask::kCausalBottomRight, Layout::kBHSD, 0, 11},
      {DType::kF32, 2, 2, 2, 33, 70, 8, Mask::kNone, Layout::kBSHD, 0, 12},
  };
  for (const ProblemSpec& spec : specs) {
    for (const float p_drop : {0.3f, 0.875f}) {
      DropoutRun run, off;
      run_both(spec, p_drop, kSeed, kOffsetPast32Bits, false, &run);
      const Params& p = run.pr.params;
      const KernelConfig general = select_config(p);
      ASSERT_EQ(general.path, ComputePath::kGeneralFp32);
      // Without dropout fp32 problems go to the split-TF32 family: the undropped twin runs the general path's tiles.
      run_both(spec, 0.0f, 0, 0, false, &off, ModelDefect::kNone, &general);
      const Reference ref = dropped_reference(run.pr, run.g);
      const std::string what = spec.name() + " p " + std::to_string(p_drop);
      EXPECT_LE(worst(p, run.pr.o, p.o_stride, p.heads_q, p.seqlen_q, ref.o), kF32Tolerance) << what;
      EXPECT_LE(worst(p, run.g.dq, run.g.bp.dq_stride, p.heads_q, p.seqlen_q, ref.dq), kF32Tolerance) << what;
      EXPECT_LE(worst(p, run.g.dk, run.g.bp.dk_stride, p.heads_kv, p.seqlen_k, ref.dk), kF32Tolerance) << what;
      EXPECT_LE(worst(p, run.g.dv, run.g.bp.dv_stride, p.heads_kv, p.seqlen_k, ref.dv), kF32Tolerance) << what;
      // LSE is the undropped softmax's: the same bits as without dropout on the same path.
      EXPECT_EQ(std::memcmp(run.pr.lse.data(), off.pr.lse.data(), off.pr.lse.size() * sizeof(float)), 0) << what;
      for (size_t row = 0; row < ref.lse.size(); ++row) {
        EXPECT_NEAR(run.pr.lse[row], ref.lse[row], 1e-5 * (1.0 + std::fabs(ref.lse[row]))) << what << " row " << row;
      }
      EXPECT_FALSE(run.pr.o == off.pr.o) << what;  // not vacuous: the mask changes O
    }
  }
}

// ---- routing

TEST(Dropout_Routing, EveryDropoutProblemRunsInTheGeneralFamily) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const int64_t head_dim : {int64_t{8}, int64_t{64}, int64_t{128}, int64_t{256}}) {
      // Dense prefill, and a decoding shape (one query row per head of a GQA group) the decode family would take.
      for (const auto& [seqlen_q, heads_q] : {std::pair{int64_t{256}, int64_t{4}}, std::pair{int64_t{1}, int64_t{8}}}) {
        Params p = make_params(dtype, 2, heads_q, 2, seqlen_q, 4096, head_dim, Mask::kCausalBottomRight);
        p.num_splits = 0;
        p.dropout_p = 0.1f;
        const KernelConfig config = select_config(p);
        EXPECT_EQ(config.path, ComputePath::kGeneralFp32) << to_string(dtype) << " d" << head_dim;
        EXPECT_EQ(std::string(config.name).rfind("general_", 0), 0u) << config.name;
        EXPECT_EQ(effective_splits(p), 1) << "the heuristic picks one run under dropout";
      }
    }
  }
}

// ---- the dropout defects, each visible where it should be and only there

TEST(Dropout_Defects, EachChangesWhatItShould) {
  const ProblemSpec spec{DType::kF32, 2, 2, 1, 21, 40, 8, Mask::kNone, Layout::kBHSD, 0, 14};
  DropoutRun base;
  run_both(spec, 0.5f, kSeed, kOffsetPast32Bits, true, &base);
  struct Expect {
    ModelDefect defect;
    bool dump, o, grads;
  };
  for (const Expect& e : {Expect{ModelDefect::kDropoutOffset32Bit, true, true, true},
                          Expect{ModelDefect::kDropoutBackwardOffsetPlusOne, false, false, true},
                          Expect{ModelDefect::kDropoutScaleMissing, false, true, false},
                          Expect{ModelDefect::kDropoutKvHeadIndex, true, true, true}}) {
    DropoutRun run;
    run_both(spec, 0.5f, kSeed, kOffsetPast32Bits, true, &run, e.defect);
    const char* name = to_string(e.defect);
    EXPECT_EQ(run.mask != base.mask, e.dump) << name;
    EXPECT_EQ(run.pr.o != base.pr.o, e.o) << name;
    // The backward takes the O its own forward wrote; with the healthy O its gradients differ only by the defect's
    // own steps (dropout-scale-missing: none).
    Grads healthy_o;
    make_grads(base.pr, &healthy_o);
    HostModelOptions options;
    options.defect = e.defect;
    ASSERT_TRUE(run_backward_host_model(healthy_o.bp, options).ok()) << name;
    EXPECT_EQ(healthy_o.dv != base.g.dv || healthy_o.dq != base.g.dq, e.grads) << name;
  }
  // The K/V-head defect gives a group's query heads one mask: head 0's is the contract's (b = 0: the same stream).
  DropoutRun kv;
  run_both(spec, 0.5f, kSeed, kOffsetPast32Bits, true, &kv, ModelDefect::kDropoutKvHeadIndex);
  const size_t head_bytes = static_cast<size_t>(spec.seqlen_q * spec.seqlen_k);
  EXPECT_TRUE(std::equal(kv.mask.begin(), kv.mask.begin() + head_bytes, base.mask.begin()));
  EXPECT_TRUE(std::equal(kv.mask.begin(), kv.mask.begin() + head_bytes, kv.mask.begin() + head_bytes));
}

// r <= t in place of r < t changes the decision of exactly the elements whose draw equals t: p is chosen so that t is
// the draw of one element (a draw whose significant bits fit a float's 24).
TEST(Dropout_Defects, ThresholdOffByOneFlipsExactlyTheDrawsEqualToT) {
  const ProblemSpec spec{DType::kF32, 1, 1, 1, 16, 64, 8, Mask::kNone, Layout::kBHSD, 0, 15};
  uint32_t t = 0;
  for (int64_t i = 0; i < spec.seqlen_q && t == 0; ++i) {
    for (int64_t j = 0; j < spec.seqlen_k && t == 0; ++j) {
      const uint32_t r = detail::dropout_draws(kSeed, 0, 1, 0, 0, i, j / 4).w[j % 4];
      if (r != 0 && static_cast<double>(static_cast<float>(r)) == r && r < 0xffffff00u) t = r;
    }
  }
  ASSERT_NE(t, 0u) << "no draw with a 24-bit significand among 1,024 (about 4 expected)";
  const float p_drop = std::ldexp(static_cast<float>(t), -32);
  ASSERT_EQ(detail::dropout_threshold(p_drop), t);
  DropoutRun base, defect;
  run_both(spec, p_drop, kSeed, 0, true, &base);
  run_both(spec, p_drop, kSeed, 0, true, &defect, ModelDefect::kDropoutThresholdOffByOne);
  int64_t flipped = 0;
  for (int64_t i = 0; i < spec.seqlen_q; ++i) {
    for (int64_t j = 0; j < spec.seqlen_k; ++j) {
      const size_t at = static_cast<size_t>(i * spec.seqlen_k + j);
      const bool at_t = detail::dropout_draws(kSeed, 0, 1, 0, 0, i, j / 4).w[j % 4] == t;
      EXPECT_EQ(base.mask[at], at_t ? 1 : base.mask[at]);
      EXPECT_EQ(defect.mask[at], at_t ? 0 : base.mask[at]) << i << ", " << j;
      flipped += at_t ? 1 : 0;
    }
  }
  EXPECT_GE(flipped, 1);
  EXPECT_NE(defect.pr.o, base.pr.o);
}

// Each dropout defect of the host model has the GPU mutant of the same name (flashcheck/mutants.h): the CPU tier's
// kill table and the GPU's name the same bugs.
TEST(Dropout_Defects, EachHasTheGpuMutantOfItsName) {
  int defects = 0;
  for (const ModelDefectInfo& d : kModelDefects) {
    if (std::string(d.name).rfind("dropout-", 0) != 0) continue;
    ++defects;
    const int32_t id = find_mutant(d.name);
    ASSERT_GE(id, 0) << d.name;
    EXPECT_STREQ(kMutants[id].family, "dropout") << d.name;
  }
  EXPECT_EQ(defects, 5);
}

}  // namespace
}  // namespace flashcheck
