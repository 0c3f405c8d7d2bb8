// Property 7: the inference path (attention.h, "Sequences"): variable-length batches, paged K/V caches and split-KV
// runs, against the oracle and against themselves. Generated batches mix empty sequences, one-row decoding steps
// (so that fp16/bf16 problems reach the decode family), sequences at tile edges and one long one among short ones;
// K/V slots past each sequence's keys (seqused_k < capacity), the unused tail of every last page and a spare page
// hold NaN, +inf or zeros; page sizes 1, 3, 16, the tile, twice the tile and 256 in a shuffled page order; split
// counts 1, 2, 3, 17 and the heuristic's. The relations: the oracle agrees; no poison reaches O (the three poisons
// give the same bits); a paged cache gives the bits of the same keys packed (on the same kernel); a sequence's rows
// do not change when every other sequence of the batch is emptied (bit for bit on the same kernel, within both runs'
// bounds across two); a split run repeats bit for bit and agrees with the unsplit run within the sum of the two
// runs' bounds.
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "checks.h"
#include "generators.h"
#include "properties.h"
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

namespace gen = rc::gen;

// What a property needs of its sequence cases.
struct SequenceNeeds {
  bool paged = false;        // page > 0
  bool poisoned = false;     // some slot is poison (extra > 0 or paged)
  bool several = false;      // at least two sequences, one with rows
  bool split = false;        // splits != 1
  bool unsplit = false;      // splits == 1 (per-tile traces)
};

int64_t draw_length(int64_t tile, int64_t cap) {
  if (cap <= 0) return 0;
  return *gen::weightedOneOf<int64_t>({
      {2, gen::just<int64_t>(0)},
      {2, gen::just(std::min<int64_t>(1, cap))},
      {4, gen_seqlen(tile, cap, 0)},
      {2, gen::inRange<int64_t>(0, cap + 1)},
  });
}

// The dense cases the sequence cases start from: injections address dense positions, and the poisons are the
// sequence properties' special values.
CaseOptions dense_options() {
  CaseOptions o = default_options();
  o.special_values = false;
  return o;
}

// Why a replayed case is not one gen_sequence_case(needs) draws, or "".
std::string outside_needs(const SequenceNeeds& needs, const Case& c) {
  Case dense = c;
  dense.seqs.clear();
  if (std::string why = outside_options(dense_options(), dense); !why.empty()) return why;
  if (c.seqs.empty()) return "seqs: the property's cases are sequences (varlen, paged, split)";
  if (needs.paged && c.page == 0) return "page: the property's cases are paged";
  const bool slots = c.page > 0 || std::any_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.extra > 0; });
  if (needs.poisoned && !slots) return "seqs: the property's cases have poisoned slots (+E, or a paged cache)";
  if (needs.several && (c.seqs.size() < 2 || std::all_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.q == 0; }))) {
    return "seqs: the property's cases have two sequences or more, one with query rows";
  }
  if (needs.split && c.splits == 1) return "splits: the property's cases are split (splits != 1)";
  if (needs.unsplit && c.splits != 1) return "splits: the property's cases are unsplit (splits = 1)";
  return "";
}

// A case of the inference path: the dtype, heads, head_dim, mask, window, softcap, sink and values of a generated
// dense case, its batch replaced by sequences of their own lengths.
Case gen_sequence_case(const SequenceNeeds& needs) {
  if (const Case* r = replay_case()) return *replayed_case(*r, outside_needs(needs, *r));
  const CaseOptions o = dense_options();
  Case c = *gen_case(o);
  const CaseLimits& limits = o.limits;
  const int64_t group = std::max<int64_t>(c.heads_q / std::max<int64_t>(c.heads_kv, 1), 1);
  // Tiles of the family that will run: a decoding step (every sequence within one 16-row tile) or a prefill.
  const bool decoding = group <= 16 && *gen::weightedElement<bool>({{1, true}, {1, false}}).as("decoding step");
  const int64_t max_q = decoding ? std::max<int64_t>(1, 16 / group) : std::max<int64_t>(1, std::min<int64_t>(limits.max_seqlen, 300));
  const int64_t sequences = *gen::inRange<int64_t>(needs.several ? 2 : 1, 6).as("sequences");
  Case probe = c;
  probe.batch = 1;
  probe.seqlen_q = max_q;
  probe.seqlen_k = std::max<int64_t>(limits.max_seqlen, 1);
  probe.seqs = {{max_q, probe.seqlen_k, 0}};
  const KernelConfig cfg = kernel_config(case_params(probe));
  const int64_t block_m = std::max<int32_t>(cfg.block_m, 1), block_n = std::max<int32_t>(cfg.block_n, 1);
  const int64_t long_one = *gen::inRange<int64_t>(-1, sequences).as("the long sequence (-1: none)");
  c.seqs.clear();
  for (int64_t b = 0; b < sequences; ++b) {
    Sequence s;
    s.q = draw_length(block_m, max_q);
    const int64_t k_cap = b == long_one ? limits.max_seqlen : std::max<int64_t>(limits.max_seqlen / 4, 1);
    s.k = draw_length(block_n, k_cap);
    s.extra = *gen::weightedOneOf<int64_t>({{4, gen::just<int64_t>(0)},
                                            {1, gen::just<int64_t>(1)},
                                            {1, gen::just(int64_t{block_n - 1})},
                                            {1, gen::inRange<int64_t>(0, 40)}});
    c.seqs.push_back(s);
  }
  if (needs.several && std::all_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.q == 0; })) {
    c.seqs.front().q = 1;
  }
  // Keep the oracle's and the model's work inside the tier's limits.
  const auto work = [&] {
    int64_t total = 0, elements = 0;
    for (const Sequence& s : c.seqs) {
      total += s.q * s.capacity();
      elements += s.q * c.heads_q * 2 + s.capacity() * c.heads_kv * 2;
    }
    const int64_t dim = (c.head_dim + c.value_dim() + 1) / 2;  // Q and O, K and V: head_dim and head_dim_v
    return std::pair{total * c.heads_q * dim, elements * dim};
  };
  // Shorten the key runs (then the query rows) until it fits.
  while (work().first > limits.max_work || work().second > limits.max_elements) {
    const bool keys_left = std::any_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.capacity() > 0; });
    for (Sequence& s : c.seqs) {
      if (keys_left) {
        s.k /= 2;
        s.extra /= 2;
      } else {
        s.q /= 2;
      }
    }
  }
  // Powers of two and the tile sizes, and as many sizes that are neither (a slot computed as key & (page - 1) is
  // right only for powers of two; 24 and 100 end pages inside a decode tile of 16 or 32 keys).
  const std::vector<int64_t> page_sizes{1, 3, 16, 24, block_n, 2 * block_n, 100, 256, 5};
  c.page = needs.paged ? *gen::elementOf(page_sizes).as("page")
                       : *gen::weightedOneOf<int64_t>({{3, gen::just<int64_t>(0)}, {3, gen::elementOf(page_sizes)}}).as("page");
  if (needs.poisoned && c.page == 0 &&
      std::none_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.extra > 0; })) {
    c.seqs.back().extra = 1 + block_n / 2;
  }
  c.poison = *gen::element(Poison::kNaN, Poison::kInf, Poison::kZero).as("poison");
  const std::vector<int32_t> splits{2, 3, 17, 0};
  if (needs.unsplit) {
    c.splits = 1;
  } else if (needs.split) {
    c.splits = *gen::elementOf(splits).as("splits");
  } else {
    c.splits = *gen::weightedOneOf<int32_t>({{2, gen::just<int32_t>(1)}, {3, gen::elementOf(splits)}}).as("splits");
  }
  fit_to_sequences(&c);
  if (const LoadedSubject* subject = active_subject()) c = onto_sequence_features(*subject, c);
  note_coverage(std::string("seq=") + (c.page > 0 ? "paged" : "packed") + (decoding ? "-decode" : "-prefill"));
  note_coverage(std::string("seq-splits=") + (c.splits == 1 ? "1" : c.splits == 0 ? "auto" : "n"));
  return c;
}

// The canonical rows (b, h, i) of sequence b.
std::vector<bool> rows_of_sequence(const Params& p, const Case& c, int64_t b) {
  std::vector<bool> rows(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q), false);
  for (int64_t h = 0; h < p.heads_q; ++h)
    for (int64_t i = 0; i < c.seqs[static_cast<size_t>(b)].q; ++i) rows[static_cast<size_t>(row_index(p, b, h, i))] = true;
  return rows;
}

RunOutputs run_variant(const Case& c, const char* what) {
  RC_LOG() << what << ": " << format_case(c) << "\n";
  return run_backend(inputs_for(c));
}

}  // namespace

void sequences_agree_with_oracle() { oracle_agreement(gen_sequence_case({})); }

void sequences_are_memory_safe() { memory_safety(gen_sequence_case({})); }

void sequence_online_softmax_invariants() { online_softmax_invariants(gen_sequence_case({.unsplit = true})); }

void poison_never_reaches_output() {
  const Case c = gen_sequence_case({.poisoned = true});
  note_case(c);
  const RunOutputs base = run_backend(inputs_for(c));
  for (const Poison other : {Poison::kNaN, Poison::kInf, Poison::kZero}) {
    if (other == c.poison) continue;
    Case d = c;
    d.poison = other;
    assert_bit_identical(std::string("poison=") + to_string(other) + " against poison=" + to_string(c.poison), base,
                         run_variant(d, "poisoned otherwise"), inputs_for(c).params);
  }
}

void paged_equals_packed_bit_for_bit() {
  const Case c = gen_sequence_case({.paged = true});
  note_case(c);
  Case packed = c;
  packed.page = 0;
  // The page stride can move a problem between families (the decode family needs 16-byte-aligned rows): bit for
  // bit within one family, within both runs' bounds across two.
  const HostInputs in = inputs_for(c), in_packed = inputs_for(packed);
  RC_LOG() << "packed: " << format_case(packed) << "\n";
  assert_same_kernel_bits_or_within_bounds("page=" + std::to_string(c.page) + " against packed K/V", in,
                                           run_backend(in), in_packed, run_backend(in_packed), c.seed, nullptr,
                                           /*subject_may_differ=*/true);
}

void other_sequences_leave_a_row_unchanged() {
  const Case c = gen_sequence_case({.several = true});
  note_case(c);
  std::vector<int64_t> with_rows;
  for (int64_t b = 0; b < c.batch; ++b) {
    if (c.seqs[static_cast<size_t>(b)].q > 0) with_rows.push_back(b);
  }
  RC_PRE(!with_rows.empty());
  RelationDraws draws(c, "OtherSequencesLeaveARowUnchanged");
  const int64_t b = draws.pick("the sequence kept", with_rows);
  Case alone = c;
  for (int64_t other = 0; other < c.batch; ++other) {
    if (other != b) alone.seqs[static_cast<size_t>(other)] = Sequence{};
  }
  const HostInputs in = inputs_for(c), in_alone = inputs_for(alone);
  const std::vector<bool> rows = rows_of_sequence(in.params, c, b);
  // Alone, a sequence can select another family (a single packed row needs no aligned row stride).
  RC_LOG() << "alone: " << format_case(alone) << "\n";
  assert_same_kernel_bits_or_within_bounds("sequence " + std::to_string(b) + " with every other sequence emptied", in,
                                           run_backend(in), in_alone, run_backend(in_alone), c.seed, &rows, /*subject_may_differ=*/true);
}

void splits_repeat_and_agree_with_unsplit() {
  const Case c = gen_sequence_case({.split = true});
  note_case(c);
  const HostInputs in = inputs_for(c);
  const RunOutputs split = run_backend(in);
  assert_bit_identical("a rerun of splits=" + std::to_string(c.splits), split, run_backend(in), in.params);
  Case whole = c;
  whole.splits = 1;
  const HostInputs in_whole = inputs_for(whole);
  const RunOutputs unsplit = run_variant(whole, "unsplit");
  RelationWorst worst;
  for (const oracle::RowRef& r : rows_to_check(in, split.config, c.seed)) {
    const ExactRow a = exact_row(in, split.config, r);
    const ExactRow u = exact_row(in_whole, unsplit.config, r);
    if (a.bound.unconstrained || u.bound.unconstrained) continue;
    worst.add(lse_at(split, in.params, r), lse_at(unsplit, in.params, r), a.bound.lse + u.bound.lse, r, -1);
    for (int64_t d = 0; d < value_head_dim(in.params); ++d) {
      worst.add(o_at(split, in.params, r, d), o_at(unsplit, in.params, r, d),
                a.bound.o[static_cast<size_t>(d)] + u.bound.o[static_cast<size_t>(d)], r, d);
    }
  }
  assert_worst(worst, "split against unsplit");
}

}  // namespace flashcheck::properties
