// Properties 1 and 4: agreement with the exact oracle within the error model's bound, and memory safety
// (every output element written, canaries intact around the outputs and the sink, inputs and sink untouched).
// Both take any case, special values, windows, softcaps and sinks included: rows the oracle marks unconstrained
// make no numeric claim, and memory safety holds regardless. LargeInputsAgreeAndRepeat holds problems larger than
// the GPU's L2 cache to bit-identical reruns and to the oracle on sampled rows (GPU tier).
#include <rapidcheck.h>

#include <algorithm>
#include <string>

#include "checks.h"
#include "properties.h"
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {

void oracle_agreement(const Case& c) {
  note_case(c);
  const HostInputs in = inputs_for(c);
  // m and l come with the host model and with the instrumented GPU harness; the production GPU binary
  // checks O and LSE (the invariants property checks m and l on the GPU).
  const bool with_stats = active_backend() == Backend::kHostModel || gpu_instrumentation_linked();
  const RunOutputs out = run_backend(in, with_stats);
  JudgeOptions options = judge_options();
  options.check_stats = with_stats;
  const Verdict verdict = judge(c, in, out, options);
  if (verdict.unconstrained_rows > 0) note_coverage("rows=some-unconstrained");
  assert_verdict(verdict);
}

void memory_safety(const Case& c) {
  note_case(c);
  const HostInputs in = inputs_for(c);
  const uint64_t hash_before = in.hash();  // Q, K, V and the sink
  note_coverage(in.sink.empty() ? "sink-buffer=none" : "sink-buffer=guarded");
  const RunOutputs out = run_backend(in);
  const Params& p = in.params;
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  RC_LOG() << "unwritten O elements " << out.unwritten_o << ", unwritten LSE elements " << out.unwritten_lse
           << ", canaries " << (out.canaries_intact ? "intact" : "damaged") << (out.canaries_intact ? "" : " in ")
           << out.damaged_buffer << (out.canaries_intact ? "" : " at byte offset " + std::to_string(out.first_damaged_canary))
           << ", inputs " << (out.inputs_unchanged ? "unchanged" : "modified") << "\n";
  // Not vacuous: the runner decoded every element it poisoned.
  RC_ASSERT(static_cast<int64_t>(out.o.size()) == rows * value_head_dim(p));
  RC_ASSERT(static_cast<int64_t>(out.lse.size()) == rows);
  RC_ASSERT(out.unwritten_o == 0);
  RC_ASSERT(out.unwritten_lse == 0);
  RC_ASSERT(out.canaries_intact);
  RC_ASSERT(out.inputs_unchanged);
  RC_ASSERT(in.hash() == hash_before);
}

namespace {
void large_inputs_check(const Case& c);
}  // namespace

void large_inputs_agree_and_repeat() {
  // Inputs past the L2 cache (50 MB on an H100), so that every copy waits on HBM under the load of the whole
  // GPU: the regime in which a wait for one copy group too few reads a stage before its tile has landed. Either a
  // decoding shape (every query row of a K/V head's query heads in one 16-row tile; the decode family) over 24-64 M
  // elements of K and as many of V, the split count the heuristic's; or a prefill over 12-24 M elements of Q with
  // head dims of every family (cp.async and warp-specialized tensor-core kernels, split TF32, general). K and V are
  // uniform, so a stale tile holds other values.
  if (const Case* replayed = replay_case()) return large_inputs_check(*replayed);
  Case c;
  const bool decoding = *rc::gen::arbitrary<bool>();
  c.head_dim = *rc::gen::element<int64_t>(32, 64, 80, 96, 128, 192, 256);
  c.heads_kv = *rc::gen::element<int64_t>(1, 2, 4, 8);
  c.mask = *rc::gen::element(Mask::kNone, Mask::kCausalBottomRight);
  if (decoding) {
    c.dtype = *rc::gen::element(DType::kF16, DType::kBF16);
    const int64_t group = *rc::gen::element<int64_t>(1, 2, 4, 8);
    c.heads_q = c.heads_kv * group;
    c.seqlen_q = *rc::gen::inRange<int64_t>(1, 16 / group + 1);
    c.seqlen_k = *rc::gen::inRange<int64_t>(2048, 16385);
    const int64_t k_elements = *rc::gen::inRange<int64_t>(24, 65) << 20;
    c.batch = std::max<int64_t>(1, k_elements / (c.heads_kv * c.seqlen_k * c.head_dim));
    c.splits = 0;
    // A subject is given its split count, never the heuristic's (onto_sequence_features: 2 with SPLITS, else 1).
    if (const LoadedSubject* subject = active_subject()) c = onto_sequence_features(*subject, c);
  } else {
    c.dtype = *rc::gen::element(DType::kF16, DType::kBF16, DType::kF32);
    c.heads_q = c.heads_kv * *rc::gen::element<int64_t>(1, 2, 4);
    c.seqlen_q = *rc::gen::inRange<int64_t>(1024, 4097);
    c.seqlen_k = *rc::gen::element(c.seqlen_q, *rc::gen::inRange<int64_t>(1024, 4097));
    const int64_t q_elements = *rc::gen::inRange<int64_t>(12, 25) << 20;
    c.batch = std::max<int64_t>(1, q_elements / (c.heads_q * c.seqlen_q * c.head_dim));
  }
  c.q = ValueSpec{DistKind::kUniform, -2.0, 2.0};
  c.k = ValueSpec{DistKind::kUniform, -1.0, 1.0};
  c.v = ValueSpec{DistKind::kUniform, -1.0, 1.0};
  c.seed = *rc::gen::inRange<uint64_t>(0, uint64_t{1} << 32);
  large_inputs_check(c);
}

namespace {
// The relation on one case: three runs bit for bit, and the oracle on sampled rows.
void large_inputs_check(const Case& c) {
  note_case(c);
  const HostInputs in = inputs_for(c);
  const RunOutputs first = run_backend(in);
  RC_LOG() << "kernel: " << first.config.name << "\n";
  note_coverage(std::string("config=") + first.config.name);
  // Every row of every run: a race that strikes anywhere changes some bits.
  for (int run = 1; run < 3; ++run) {
    assert_bit_identical("run " + std::to_string(run + 1) + " vs run 1", first, run_backend(in), in.params);
  }
  // The oracle on sampled rows: the structural ones and 64 random ones.
  JudgeOptions options = judge_options();
  options.check_stats = false;
  options.full_check_limit = 0;
  options.random_rows = 64;
  assert_verdict(judge(c, in, first, options));
}

}  // namespace

}  // namespace flashcheck::properties
