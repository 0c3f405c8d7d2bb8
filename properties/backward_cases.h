// The cases and runs of the backward properties (backward.cpp) and of dropout's (dropout.cpp): grad=1 cases drawn
// for what a property needs, run forward then backward on the tier's backend, judged by judge_backward.
#pragma once

#include <cstdint>
#include <string>

#include "flashcheck/backward_check.h"
#include "flashcheck/case.h"
#include "flashcheck/inputs.h"
#include "generators.h"

namespace flashcheck::properties {

// What a backward property needs of its cases.
struct GradNeeds {
  bool dense = false;     // no sequences (the relation edits dense positions)
  int64_t min_group = 1;  // heads_q / heads_kv at least this
  bool plain = false;     // no softcap, no sink (identities of the plain softmax)
  bool unmasked = false;  // mask none
  bool dropout = false;   // a dropout case: on a subject, the dtypes and sequences its dropout declares
  bool forward_only = false;  // the backward is not run: on a subject, its backward's dtypes, dsink and sequences do not bind
};

// The options of a grad=1 case: finite values, a non-empty shape, a quarter of the forward's work.
CaseOptions grad_options(const GradNeeds& needs);
// Why a replayed line is not one grad_case(needs) draws, or "".
std::string outside_grad(const GradNeeds& needs, const Case& c);
// A grad=1 case (the replayed one while a line replays): dense, or in one case in four packed sequences with key
// slots past their keys.
Case grad_case(const GradNeeds& needs = {});
// Forward then backward on the tier's backend with the planted defect; a kUnsupported run is a discard, any other
// failure a failed assertion.
BackwardOutputs run_grad(const HostInputs& in, bool deterministic = false);
// Whether two runs of one grad=1 case give the same bits of dQ (`dq`) or of dK, dV and dsink: on flashcheck's kernels
// in deterministic mode, and for dK, dV and dsink always (only dQ's partial sums arrive by atomics); on a subject
// where its backward declares itself deterministic.
bool same_bits_on_rerun(bool deterministic, bool dq);
// dQ, dK, dV and dsink of two runs the same bits, else a logged element (`first` and `second` name the runs) and
// RC_FAIL(failure).
void assert_same_gradients(const BackwardOutputs& a, const BackwardOutputs& b, const char* first, const char* second,
                           const char* failure);
// judge_backward, its report logged.
BackwardVerdict judged(const Case& c, const HostInputs& in, const BackwardOutputs& out,
                       const oracle::GradientCheck* check = nullptr);

}  // namespace flashcheck::properties
