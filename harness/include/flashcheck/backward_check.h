// The backward pass through the harness: run a grad=1 case (case.h) on a backend, then judge its gradients.
//
// run_backward_case() runs the forward (run_case, with its guards) and hands what it wrote, O and LSE, to the
// backward pass with the case's dO: the way training runs them. dQ, dK, dV (and dsink with a sink) are poisoned
// (kPoisonBits*) inside kGuardBytes canary regions before the call and scanned after: every element of a valid row
// or key slot must be written, the canaries intact, the inputs (Q, K, V, dO, O, LSE, the sink) unchanged. Key slots
// of a packed sequence past its keys must come back 0.
//
// judge_backward() compares the gradients with the oracle's (gradient_check, oracle/gradient.h: the exact gradient
// in double and a per-element bound from the kernel's arithmetic with the forward's measured O and LSE errors) as
// ratios error / bound, threshold 1; holds each of dQ, dK and dV to a statistical check, the kernel's RMS error
// against that of a same-precision reference (oracle::same_precision_gradient), threshold kBackwardRmsThreshold; and
// reports the forward's verdict beside them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flashcheck/case.h"
#include "flashcheck/gradient.h"
#include "flashcheck/host_model.h"
#include "flashcheck/inputs.h"
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"

namespace flashcheck {

struct BackwardRunOptions {
  ModelDefect defect = ModelDefect::kNone;  // host model only: a forward or a backward defect
  bool deterministic = false;               // BackwardParams::deterministic
  void* stream = nullptr;                   // GPU: cudaStream_t
  // Another kernel than flashcheck's (a subject: loaded_subject.h): its forward run in place of run_case on the
  // backend, and its backward call in place of run_backward (Backend::kGpu: on the device copies) or
  // run_backward_host_model (Backend::kHostModel: on the host images), judged as `path` rounds.
  std::function<RunOutputs(const HostInputs&)> forward_run;
  std::function<Status(const BackwardParams&, void* stream)> backward_call;
  ComputePath path = ComputePath::kGeneralFp32;
};

struct BackwardOutputs {
  Status status;       // of the forward, the backward and the copies
  RunOutputs forward;  // the forward's run (O and LSE decoded, its guards)
  // Where the backward rounded: backward_path() of the call on the GPU, the general class on the host model.
  ComputePath path = ComputePath::kGeneralFp32;
  // Canonical whatever the layout: dq [B, Hq, Sq, D], dk [B, Hkv, Sk, D], dv [B, Hkv, Sk, Dv], dsink [Hq] (empty
  // without a sink); rows past a sequence's own q or k are 0.
  std::vector<double> dq, dk, dv, dsink;
  int64_t unwritten = 0;      // gradient elements of valid rows and key slots still holding the poison
  int64_t tail_nonzero = 0;   // dK and dV elements of key slots past a sequence's keys that are not 0
  bool canaries_intact = true;
  bool inputs_unchanged = true;
  const char* damaged_buffer = "";  // "dq", "dk", "dv", "dsink", or "dq padding" ...; "" while intact
  const char* modified_input = "";  // "q", "k", "v", "d_o", "o", "lse", "sink"; "" while unchanged
};

// Runs `inputs` (a grad=1 case: inputs.d_o present) forward and backward on `backend`. Never throws; failures are
// in BackwardOutputs::status (kInvalidArgument for inputs without dO).
BackwardOutputs run_backward_case(const HostInputs& inputs, Backend backend, const BackwardRunOptions& options = {});

// The backward pass's statistical check (docs/error-model.md §10.7), per gradient tensor, against the same-precision
// reference R (oracle::same_precision_gradient), pooled over the elements with a claim (finite bound, finite exact,
// reference and kernel values; a non-finite kernel value fails the per-element check instead):
//   ratio = rms(e_kernel) / (rms(e_reference) + floor),
//   e_kernel = kernel - exact - shift,   e_reference = max(|R - exact|, kBackwardRmsScoreRoundings noise, rounding(shift)),
//   floor = kBackwardRmsFloorRoundings u_32 rms(magnitude) + u_dtype rms(|exact|) / sqrt(draws),
// `shift` the given O's first-order effect on dQ and dK (R's *_from_o: the forward's error, its verdict's to judge),
// `noise` what recomputing P from the stored LSE and taking D from O add (R's *_noise), rounding(shift) the dtype's
// rounding of the shift (u |shift|, at least half the subnormal spacing), `magnitude` R's per-element size before
// cancellation, `draws` the pooled elements less those whose exact value repeats the one before it in their row;
// elements whose noise reaches their magnitude are left out of the pool (they carry no statistic). The
// floor keeps a reference that happens to be exact (one key, constant inputs) from turning a kernel's fp32 rounding, or
// one rounding of its output, into a failure. The verdict fails where the ratio passes kBackwardRmsThreshold: 2.3 times
// the worst ratio of the healthy host model over 32,400 pooled tensors, below every planted defect's.
inline constexpr double kBackwardRmsThreshold = 4.0;
inline constexpr double kBackwardRmsFloorRoundings = 1.0;  // fp32 roundings of the magnitude in the floor
inline constexpr double kBackwardRmsScoreRoundings = 1.0;  // multiples of the noise the reference errs at least by
struct BackwardRms {
  int64_t elements = 0, draws = 0;
  int64_t noisy_left_out = 0;  // elements whose noise reaches their magnitude, or whose magnitude is within what
                               // flushing subnormal products takes (n 2^-126): no statistic, not pooled
  double kernel = 0.0, reference = 0.0;  // rms(e_kernel), rms(e_reference)
  double floor = 0.0;
  double ratio = 0.0;                    // kernel / (reference + floor); 0 for no elements
};

struct BackwardVerdict {
  bool pass = true;
  Outcome outcome = Outcome::kPass;
  std::string reason;     // the refusing status message (REJECTED, UNSUPPORTED)
  std::string case_line;
  Verdict forward;        // the forward's verdict on the O and LSE the backward read
  std::vector<std::string> failures;
  // Worst error / bound per gradient: `where` is the row (b, h, i) for dQ, the key (b, h_kv, j) for dK and dV, and
  // (0, h, 0) for dsink; col the column.
  Worst dq, dk, dv, dsink;
  // Informative claims per gradient (dQ, dK, dV, dsink): of the elements with a finite bound and a finite exact value,
  // those whose bound is below |exact| (a kernel that writes zeros fails them); and the elements without a claim
  // (bound +inf: outside the error model's domain, docs/error-model.md section 10.5).
  // How the report names elements without a claim.
  static constexpr const char* kNoClaim = "outside the error model's domain, docs/error-model.md section 10.5";
  struct Informative {
    int64_t claims = 0, informative = 0, unclaimed = 0;
    double fraction() const { return claims > 0 ? double(informative) / double(claims) : 1.0; }
  };
  Informative dq_info, dk_info, dv_info, dsink_info;
  BackwardRms dq_rms, dk_rms, dv_rms;  // the statistical check (dsink, one fp32 value per head, has none)
  double worst_rms() const { return std::max({dq_rms.ratio, dk_rms.ratio, dv_rms.ratio}); }
  int64_t unwritten = 0, tail_nonzero = 0;
  bool canaries_intact = true, inputs_unchanged = true;
  int64_t max_keys = 0, max_rows = 0;  // the longest sums met (gradient_check)
  ComputePath path = ComputePath::kGeneralFp32;  // the backward's (BackwardOutputs::path)
  std::string report() const;          // the case line first
};

// The oracle's gradient and bounds for `outputs` of run_backward_case on `inputs`: gradient_check with the O and LSE
// the backward read and the arithmetic class of the path it ran (outputs.path).
oracle::GradientCheck backward_bounds(const HostInputs& inputs, const BackwardOutputs& outputs);

// Judges `outputs` of run_backward_case on `inputs` (built from `c`) under the class of outputs.path.
// `check`: backward_bounds(inputs, outputs) where the caller has it already (null: computed here).
BackwardVerdict judge_backward(const Case& c, const HostInputs& inputs, const BackwardOutputs& outputs,
                               const oracle::GradientCheck* check = nullptr);

}  // namespace flashcheck
