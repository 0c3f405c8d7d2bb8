// The one place where the kernel's vocabulary meets the oracle's: DType -> oracle::Format, Mask and window ->
// oracle::Visibility, ComputePath -> oracle::Arithmetic, Params + decoded inputs -> oracle::Problem, the keys a row
// sees by the oracle's predicate, and the error model's and the emulated reference's calls for a kernel
// configuration. The oracle knows nothing of the kernel; everything that judges kernel output against it (verdict,
// properties, tools, tests) translates here, so a translation mistake has one place to hide and one test
// (oracle_bridge_test) to meet.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/error_model.h"
#include "flashcheck/oracle.h"

namespace flashcheck {

oracle::Format to_oracle(DType dtype);
// The window sides count only for the window masks (the kernel's causal masks are the window (-1, 0) of their
// alignment whatever the fields hold; can_implement rejects a window with them).
oracle::Visibility to_oracle(Mask mask, int64_t window_left = -1, int64_t window_right = -1);
oracle::Arithmetic to_oracle(ComputePath path);

// The problem `params` describes (shape, mask and window, softmax_scale, softcap and dropout exactly) over its inputs
// decoded to doubles, contiguous [B, H, S, D] with S = params.seqlen_q / seqlen_k, its sink logits ([heads_q],
// empty: no sink) and, for sequences, each sequence's query rows and keys ([batch] each, empty: every sequence
// has seqlen_q rows and seqlen_k keys). params.sink and the index arrays may be device pointers, so the values come
// as spans; the spans must outlive the result.
oracle::Problem oracle_problem(const Params& params, std::span<const double> q, std::span<const double> k,
                               std::span<const double> v, std::span<const double> sink = {},
                               std::span<const int64_t> seqlens_q = {}, std::span<const int64_t> seqlens_k = {});

// The keys query row `row` sees, for judging: the oracle's closed form (oracle::visible_keys) of the visibility
// `params` describes, never the kernel's rule (visible_key_range), so a property that decides from visibility what
// to expect cannot share a mistake with the kernel. Every sequence as dense: seqlen_q rows, seqlen_k keys.
KeyRange judged_visible_keys(const Params& params, int64_t row);
// Row `row` of sequence `batch_index` of `problem` (oracle_problem, HostInputs::problem), aligned with that
// sequence's own lengths where the problem carries them.
KeyRange judged_visible_keys(const oracle::Problem& problem, int64_t batch_index, int64_t row);

// The error model's bound for row `row` of `problem` that `config` computed on `params`' inputs in `splits`
// split-KV runs (RunOutputs::splits, effective_splits): unsplit, with the running sums of the row in the kernel's key
// order (oracle::ordered_sums, its K/V tiles); split, with the split runs' boundaries and without running sums
// (docs/error-model.md §4.10).
oracle::RowBound oracle_bound(const oracle::Problem& problem, oracle::RowRef row, const oracle::RowResult& exact,
                              const Params& params, const KernelConfig& config, int32_t splits = 1);

// The same-precision emulated reference of the row, at `config`'s rounding points and K/V tiles.
std::vector<double> oracle_reference(const oracle::Problem& problem, oracle::RowRef row, const Params& params,
                                     const KernelConfig& config, const oracle::RowResult* exact);

}  // namespace flashcheck
