// Shared pieces of the properties: building and running a case on the tier's backend, editing inputs for
// metamorphic relations (element by element, in the dtype, keeping the encoded bytes and the exact values
// in step), exact rows with their error bounds, and bit-for-bit comparison of outputs. Everything here
// reports through RC_ASSERT / RC_LOG, so a failure names the case line and what differed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashcheck/case.h"
#include "flashcheck/error_model.h"
#include "flashcheck/inputs.h"
#include "flashcheck/oracle.h"
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"

namespace flashcheck::properties {

// make_inputs, asserted to succeed.
HostInputs inputs_for(const Case& c);

// run_case on the active backend (planted defect applied on the host model), asserted to return ok.
RunOutputs run_backend(const HostInputs& inputs, bool instrument = false);

// Judge options for the active tier: every row of small problems, sampled rows of large ones.
JudgeOptions judge_options();

// Logs the verdict report and asserts the verdict passed.
void assert_verdict(const Verdict& verdict);

// Canonical indices: O [B, Hq, Sq, D], row statistics [B, Hq, Sq].
inline int64_t row_index(const Params& p, int64_t b, int64_t h, int64_t i) { return (b * p.heads_q + h) * p.seqlen_q + i; }
inline int64_t o_index(const Params& p, int64_t b, int64_t h, int64_t i, int64_t d) {
  return row_index(p, b, h, i) * p.head_dim + d;
}

// One input element (tensor 'q', 'k' or 'v'), by logical index.
double input_value(const HostInputs& in, char tensor, int64_t b, int64_t h, int64_t s, int64_t d);
// Sets one element: `value` must be representable in the dtype (or NaN / +-inf / -0.0).
void set_input_value(HostInputs& in, char tensor, int64_t b, int64_t h, int64_t s, int64_t d, double value);
// Applies fn(value) -> value to every element of one tensor (the result is rounded to the dtype).
template <typename Fn>
void transform_tensor(HostInputs& in, char tensor, Fn&& fn);

// The exact row and its bound under the configuration that ran.
struct ExactRow {
  oracle::RowResult exact;
  oracle::RowBound bound;
};
ExactRow exact_row(const HostInputs& in, const KernelConfig& config, const oracle::RowRef& row);
// Rows a property checks: all of a small problem, a deterministic sample (tile boundaries, masked rows,
// random rows) of a large one.
std::vector<oracle::RowRef> rows_to_check(const HostInputs& in, const KernelConfig& config, uint64_t seed);

// True when a and b are the same bits (as decoded doubles / floats).
bool same_bits(double a, double b);
bool same_bits(float a, float b);
// First index where two outputs differ bit for bit, or -1; asserts with a message naming what differed.
void assert_bit_identical(const std::string& what, const RunOutputs& a, const RunOutputs& b, const Params& params,
                          const std::vector<bool>* rows_to_compare = nullptr);

std::string describe_row(const oracle::RowRef& r);

// ---- template definitions
template <typename Fn>
void transform_tensor(HostInputs& in, char tensor, Fn&& fn) {
  const Params& p = in.params;
  const int64_t heads = tensor == 'q' ? p.heads_q : p.heads_kv;
  const int64_t seqlen = tensor == 'q' ? p.seqlen_q : p.seqlen_k;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seqlen; ++s)
        for (int64_t d = 0; d < p.head_dim; ++d) {
          const double x = input_value(in, tensor, b, h, s, d);
          set_input_value(in, tensor, b, h, s, d, round_to_dtype(p.dtype, fn(x)));
        }
}

}  // namespace flashcheck::properties
