// Properties 1 and 4: agreement with the exact oracle within the error model's bound, and memory safety
// (every output element written, canaries intact around the outputs and the sink, inputs and sink untouched).
// Both take any case, special values, windows, softcaps and sinks included: rows the oracle marks unconstrained
// make no numeric claim, and memory safety holds regardless.
#include <rapidcheck.h>

#include "checks.h"
#include "properties.h"
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
  RC_ASSERT(static_cast<int64_t>(out.o.size()) == rows * p.head_dim);
  RC_ASSERT(static_cast<int64_t>(out.lse.size()) == rows);
  RC_ASSERT(out.unwritten_o == 0);
  RC_ASSERT(out.unwritten_lse == 0);
  RC_ASSERT(out.canaries_intact);
  RC_ASSERT(out.inputs_unchanged);
  RC_ASSERT(in.hash() == hash_before);
}

}  // namespace flashcheck::properties
