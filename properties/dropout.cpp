// Property 9: dropout (Params::dropout_p; docs/design/dropout-rng.md). The kernel draws its mask, the oracle redraws
// it from the contract (oracle/dropout.h) and computes the exact dropped forward and gradient, judged by the same
// bounds; the mask dump is held to the contract element by element and to a binomial bound; p = 0 is no dropout bit
// for bit; another offset changes the mask and nothing else; a drop probability whose threshold equals an element's
// draw keeps that element. Cases: the tier's dense shapes (every mask, softcap, sink, GQA, unequal head dims), a
// quarter of them packed varlen sequences; forward only or forward and backward.
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backward_cases.h"
#include "checks.h"
#include "flashcheck/dropout.h"
#include "properties.h"
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

namespace gen = rc::gen;

// A binomial check's false alarm per test: Hoeffding's two-sided bound P(|K - n q| >= a) <= 2 exp(-2 a^2 / n) at
// a = sqrt(n ln(2 / alpha) / 2). A case runs at most rows + heads such tests.
constexpr double kBinomialFalseAlarm = 1e-9;

// An element's probability of being kept: 1 - t / 2^32 with the contract's threshold t.
double keep_probability(float p) { return 1.0 - static_cast<double>(oracle::drop_threshold(p)) * 0x1p-32; }

// Why a replayed line is not a dropout case, or "".
std::string outside_dropout(const Case& c) {
  if (!(c.dropout > 0.0f)) return "dropout: the property's cases have a dropout (dropout=P, P > 0)";
  if (c.page > 0 || c.splits != 1) return "page: dropout takes neither paged K/V nor split-KV";
  return "";
}

// The drop probability, seed and offset of a dropout case: p from tiny (threshold 0: nothing dropped) through the
// common 0.1 to nearly 1; offsets at 0, just below 2^32 (the stream sum carries into the high word within the call)
// and just below 2^64 (it wraps), or anywhere.
void draw_dropout(Case* c) {
  c->dropout = *gen::weightedOneOf<float>({
                    {1, gen::just(0x1p-33f)},
                    {4, gen::element(0.1f, 0.25f, 0.5f)},
                    {1, gen::element(0.9f, 0.99f)},
                    {2, gen::map(gen::inRange(1, 1 << 24), [](int k) { return static_cast<float>(k) * 0x1p-24f; })},
                }).as("dropout");
  c->drop_seed = *gen::arbitrary<uint64_t>().as("drop_seed");
  c->drop_offset = *gen::weightedOneOf<uint64_t>({
                        {2, gen::just(uint64_t{0})},
                        {2, gen::map(gen::inRange(1, 64), [](int k) { return (uint64_t{1} << 32) - uint64_t(k); })},
                        {1, gen::map(gen::inRange(1, 64), [](int k) { return ~uint64_t{0} - uint64_t(k); })},
                        {2, gen::arbitrary<uint64_t>()},
                    }).as("drop_offset");
}

// A dropout case: a grad=1 case (backward.cpp's, packed sequences in one in four) with its backward kept or dropped
// as `grad` says, and a dropout drawn on it.
Case dropout_case(bool grad) {
  if (const Case* r = replay_case()) {
    std::string why = outside_dropout(*r);
    if (why.empty() && grad && !r->grad) why = "grad: the property checks the backward pass (grad=1)";
    return *replayed_case(*r, why);
  }
  GradNeeds needs;
  needs.dropout = true;
  needs.forward_only = !grad;
  Case c = grad_case(needs);
  if (!grad) {
    c.grad = false;
    c.dout = ValueSpec{};
  }
  draw_dropout(&c);
  note_coverage(c.dropout == 0x1p-33f ? "dropout=nothing-dropped" : c.dropout < 0.5f ? "dropout=below-half"
                                                                                     : "dropout=half-or-more");
  return c;
}

// The forward on the tier's backend (or subject) with the mask dump.
RunOutputs run_with_mask(const HostInputs& in) {
  RunOptions options;
  options.dropout_mask = true;
  // A dump too large for the runner is unsupported on flashcheck's kernels too: a discard.
  const RunOutputs out = run_on_tier(in, options, /*discard_unsupported=*/true);
  RC_ASSERT(out.canaries_intact);
  if (out.unwritten_mask != 0) {
    RC_LOG() << out.unwritten_mask << " bytes of the mask dump left unwritten\n";
    RC_FAIL("the mask dump has bytes the kernel did not write");
  }
  return out;
}

// The dump's byte of element (b, h, i, j): [B, Hq, Sq, Sk].
size_t mask_at(const Params& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  return static_cast<size_t>(((b * p.heads_q + h) * p.seqlen_q + i) * p.seqlen_k + j);
}

// The dump against the contract: 1 exactly where an element is visible (the oracle's predicate) and kept (the
// oracle's generator), 0 elsewhere.
void assert_dump_is_the_contract(const HostInputs& in, const RunOutputs& out) {
  const Params& p = in.params;
  const oracle::Problem problem = in.problem();
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t rows = oracle::sequence_seqlen_q(problem, b), keys = oracle::sequence_seqlen_k(problem, b);
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seqlen_q; ++i)
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          const bool exists = i < rows && j < keys;
          const bool want = exists && oracle::visible(problem, b, i, j) &&
                            oracle::dropout_kept(problem, problem.dropout, b, h, i, j);
          const uint8_t got = out.dropout_mask[mask_at(p, b, h, i, j)];
          if (got != (want ? 1 : 0)) {
            RC_LOG() << "mask dump at (b " << b << ", h " << h << ", i " << i << ", j " << j << "): " << int(got)
                     << ", the contract says " << (want ? 1 : 0)
                     << (exists ? oracle::visible(problem, b, i, j) ? " (visible)" : " (hidden by the mask)"
                                : " (past the sequence)")
                     << "\n";
            RC_FAIL("the mask dump is not the documented mask");
          }
        }
  }
}

// Kept counts within Hoeffding's bound of n (1 - t / 2^32), per row and per head, over the visible elements.
void assert_kept_fractions(const HostInputs& in, const RunOutputs& out) {
  const Params& p = in.params;
  const oracle::Problem problem = in.problem();
  const double keep = keep_probability(p.dropout_p);
  const double log_term = std::log(2.0 / kBinomialFalseAlarm) / 2.0;
  const auto check = [&](const char* what, int64_t kept, int64_t n, const std::string& where) {
    if (n == 0) return;
    const double slack = std::sqrt(static_cast<double>(n) * log_term);
    const double deviation = std::fabs(static_cast<double>(kept) - static_cast<double>(n) * keep);
    note_binomial(deviation / slack);
    if (deviation > slack) {
      RC_LOG() << what << " " << where << ": " << kept << " of " << n << " visible elements kept, expected "
               << static_cast<double>(n) * keep << " +- " << slack << " (false alarm " << kBinomialFalseAlarm << ")\n";
      RC_FAIL("the kept fraction is outside its binomial bound");
    }
  };
  for (int64_t h = 0; h < p.heads_q; ++h) {
    int64_t head_kept = 0, head_n = 0;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < oracle::sequence_seqlen_q(problem, b); ++i) {
        const oracle::KeySpan keys = oracle::visible_keys(problem, b, i);
        int64_t kept = 0;
        for (int64_t j = keys.begin; j < keys.end; ++j) kept += out.dropout_mask[mask_at(p, b, h, i, j)];
        check("row", kept, keys.size(), "(b " + std::to_string(b) + ", h " + std::to_string(h) + ", i " +
                                            std::to_string(i) + ")");
        head_kept += kept;
        head_n += keys.size();
      }
    check("head", head_kept, head_n, std::to_string(h));
  }
}

// The forward judged, and with grad=1 the backward.
void judge_dropout_case(const Case& c, const HostInputs& in) {
  const RunOutputs out = run_backend(in);
  assert_verdict(judge(c, in, out, judge_options()));
  if (c.grad) RC_ASSERT(judged(c, in, run_grad(in)).pass);
}

// Forward only or forward and backward: drawn, or the replayed line's own (a replay draws nothing of its case); forward
// only on a subject whose dropout has no backward.
bool draw_grad() {
  if (const Case* r = replay_case()) return r->grad;
  if (const LoadedSubject* subject = active_subject(); subject != nullptr && subject->dropout() &&
                                                       subject->dropout()->backward_dropout == nullptr) {
    return false;
  }
  return *gen::arbitrary<bool>().as("backward too");
}

}  // namespace

void dropout_agrees_with_oracle() {
  const bool grad = draw_grad();
  const Case c = dropout_case(grad);
  note_case(c);
  note_coverage(c.grad ? "dropout-pass=forward-and-backward" : "dropout-pass=forward");
  judge_dropout_case(c, inputs_for(c));
}

void dropout_mask_dump_is_the_contract() {
  const Case c = dropout_case(false);
  note_case(c);
  const HostInputs in = inputs_for(c);
  const RunOutputs out = run_with_mask(in);
  assert_dump_is_the_contract(in, out);
  assert_kept_fractions(in, out);
  assert_verdict(judge(c, in, out, judge_options()));
}

void dropout_zero_is_no_dropout() {
  const Case c = dropout_case(draw_grad());
  note_case(c);
  Case none = c;
  none.dropout = 0.0f;
  none.drop_seed = none.drop_offset = 0;
  const HostInputs plain = inputs_for(none);
  // p = 0 with the case's seed and offset set: the same bits as no dropout, forward and backward.
  HostInputs zero = copy_of(plain);
  zero.params.dropout_seed = c.drop_seed;
  zero.params.dropout_offset = c.drop_offset;
  const RunOutputs a = run_backend(plain), b = run_backend(zero);
  assert_bit_identical("dropout_p = 0 against no dropout", a, b, plain.params);
  if (c.grad) {
    const BackwardOutputs ga = run_grad(plain, true), gb = run_grad(zero, true);
    if (same_bits_on_rerun(true, true)) {
      assert_same_gradients(ga, gb, "without dropout", "at p = 0", "dropout_p = 0 changed a gradient");
    } else {  // a subject whose backward does not repeat bit for bit: both held to the oracle
      RC_ASSERT(judged(none, plain, ga).pass);
      RC_ASSERT(judged(none, zero, gb).pass);
    }
  }
  // p = 2^-33: threshold 0 (nothing dropped) and 1 / (1 - p) rounds to 1 in fp32, on the dropout path. Where no
  // dropout runs the same path (the general one) of flashcheck's kernels the bits are the same; elsewhere, and on a
  // subject (whose forward and forward_dropout are calls of their own), both are held to the oracle.
  Case tiny = none;
  tiny.dropout = 0x1p-33f;
  tiny.drop_seed = c.drop_seed;
  tiny.drop_offset = c.drop_offset;
  const HostInputs tiny_in = inputs_for(tiny);
  const RunOutputs t = run_backend(tiny_in);
  if (active_subject() == nullptr && a.config.path == t.config.path) {
    note_coverage("dropout-tiny=same-path-bits");
    assert_bit_identical("dropout_p = 2^-33 against no dropout on one path", a, t, plain.params);
  } else {
    note_coverage("dropout-tiny=other-path-bounds");
    assert_verdict(judge(tiny, tiny_in, t, judge_options()));
  }
}

void dropout_offset_changes_only_the_mask() {
  const Case c = dropout_case(false);
  note_case(c);
  const HostInputs in = inputs_for(c);
  const Params& p = in.params;
  // The next call's streams: offset + batch * heads_q, modulo 2^64.
  Case next = c;
  next.drop_offset = c.drop_offset + static_cast<uint64_t>(p.batch) * static_cast<uint64_t>(p.heads_q);
  const HostInputs next_in = inputs_for(next);
  const RunOutputs a = run_with_mask(in), b = run_with_mask(next_in);
  assert_verdict(judge(c, in, a, judge_options()));
  assert_verdict(judge(next, next_in, b, judge_options()));
  // LSE is the undropped softmax's: the same bits. A row whose mask is the same under both offsets computes the same
  // sums: the same bits of O.
  const oracle::Problem problem = in.problem();
  int64_t visible = 0, same_rows = 0;
  bool masks_differ = false;
  for (int64_t bb = 0; bb < p.batch; ++bb)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < oracle::sequence_seqlen_q(problem, bb); ++i) {
        const int64_t row = row_index(p, bb, h, i);
        if (!same_bits(a.lse[static_cast<size_t>(row)], b.lse[static_cast<size_t>(row)])) {
          RC_LOG() << "LSE of row (b " << bb << ", h " << h << ", i " << i << "): " << a.lse[static_cast<size_t>(row)]
                   << " at offset " << c.drop_offset << ", " << b.lse[static_cast<size_t>(row)] << " at offset "
                   << next.drop_offset << "\n";
          RC_FAIL("another offset changed LSE");
        }
        bool same_mask = true;
        const oracle::KeySpan keys = oracle::visible_keys(problem, bb, i);
        visible += keys.size();
        for (int64_t j = keys.begin; j < keys.end; ++j) {
          same_mask = same_mask && a.dropout_mask[mask_at(p, bb, h, i, j)] == b.dropout_mask[mask_at(p, bb, h, i, j)];
        }
        masks_differ = masks_differ || !same_mask;
        if (!same_mask) continue;
        ++same_rows;
        for (int64_t d = 0; d < value_head_dim(p); ++d) {
          const double x = a.o[static_cast<size_t>(o_index(p, bb, h, i, d))];
          const double y = b.o[static_cast<size_t>(o_index(p, bb, h, i, d))];
          if (!same_bits(x, y)) {
            RC_LOG() << "O at (b " << bb << ", h " << h << ", i " << i << ", col " << d << "): " << x << " and " << y
                     << " under the same row mask\n";
            RC_FAIL("another offset changed O where the mask is the same");
          }
        }
      }
  note_coverage(same_rows > 0 ? "offset=some-rows-same-mask" : "offset=every-row-redrawn");
  // Masks of n visible elements that every element keeps its decision under fresh draws: probability
  // (q^2 + (1 - q)^2)^n with q the keep probability; below the false alarm, the masks must differ.
  const double keep = keep_probability(p.dropout_p);
  const double agree = keep * keep + (1.0 - keep) * (1.0 - keep);
  if (static_cast<double>(visible) * std::log(agree) < std::log(kBinomialFalseAlarm) && !masks_differ) {
    RC_LOG() << visible << " visible elements kept every decision under the offsets " << c.drop_offset << " and "
             << next.drop_offset << "\n";
    RC_FAIL("another offset left the mask as it was");
  }
}

void dropout_threshold_is_exact() {
  const Case drawn = dropout_case(false);
  const HostInputs probe = inputs_for(drawn);
  const Params& p = probe.params;
  const oracle::Problem problem = probe.problem();
  // An element some row sees, picked by the relation's draws; then the seed, counted up from the case's, whose draw r
  // for it has at most 24 significant bits, so that p = r / 2^32 is an fp32 value and the threshold is r itself: the
  // element lies on the boundary, and is kept (dropped iff r < t).
  RelationDraws draws(drawn, "DropoutThresholdIsExact");
  std::vector<oracle::RowRef> rows;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < oracle::sequence_seqlen_q(problem, b); ++i) {
        if (oracle::visible_keys(problem, b, i).size() > 0) rows.push_back({b, h, i});
      }
  if (rows.empty()) RC_DISCARD("no row sees a key");
  const oracle::RowRef r = rows[static_cast<size_t>(draws.below("row", static_cast<int64_t>(rows.size())))];
  const oracle::KeySpan keys = oracle::visible_keys(problem, r.b, r.i);
  const int64_t j = keys.begin + draws.below("key", keys.size());
  Case c = drawn;
  uint32_t draw = 0;
  for (int tries = 0;; ++tries) {
    if (tries == 1 << 16) RC_DISCARD("no seed near the case's puts a draw on an fp32 threshold");
    draw = oracle::dropout_draw({0.5f, c.drop_seed, c.drop_offset}, p.heads_q, r.b, r.h, r.i, j);
    const double x = static_cast<double>(draw) * 0x1p-32;
    if (draw != 0 && static_cast<double>(static_cast<float>(x)) == x) break;
    ++c.drop_seed;
  }
  c.dropout = static_cast<float>(static_cast<double>(draw) * 0x1p-32);
  RC_LOG() << "element (b " << r.b << ", h " << r.h << ", i " << r.i << ", j " << j << ") draws " << draw
           << " under drop_seed " << c.drop_seed << ": dropout " << c.dropout << " puts the threshold on it\n";
  note_case(c);
  const HostInputs in = inputs_for(c);
  RC_ASSERT(oracle::drop_threshold(c.dropout) == draw);
  const RunOutputs out = run_with_mask(in);
  if (out.dropout_mask[mask_at(p, r.b, r.h, r.i, j)] != 1) {
    RC_LOG() << "the element whose draw equals the threshold is dropped in the dump\n";
    RC_FAIL("the keep decision at the threshold is not 'kept'");
  }
  assert_dump_is_the_contract(in, out);
  assert_verdict(judge(c, in, out, judge_options()));
}

}  // namespace flashcheck::properties
