// fuzz_backward (CPU, ASan + UBSan): the backward pass of the host model against the oracle's gradient. Bytes decode
// to a case as for fuzz_model (kModelLimits), made a grad=1 case (dO from the case's own seed, normal(0,1); a paged or
// split case falls back to packed, unsplit), run forward and backward (run_backward_case) and judged by
// judge_backward on every element. Numeric feedback: a log2 bucket of the worst ratio per gradient
// (record_backward_verdict). A violation is written to disk as a replayable case line before the process aborts.
// FLASHCHECK_FUZZ_MODEL_DEFECT=<defect> plants a host-model defect, backward ones (bwd-*) included.
// FLASHCHECK_SUBJECT=PATH fuzzes a subject's backward pass instead (fc_subject_backward_v1): cases outside what it
// declares stay out of the corpus, and its findings name it (subject= in the case line) and replay on its library.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "case_decoder.h"
#include "finding.h"
#include "flashcheck/backward_check.h"
#include "flashcheck/host_model.h"
#include "flashcheck/loaded_subject.h"
#include "fuzz_signals.h"

namespace {

flashcheck::ModelDefect g_defect = flashcheck::ModelDefect::kNone;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  flashcheck::fuzz::init_artifact_prefix(*argc, *argv);
  if (const char* name = std::getenv("FLASHCHECK_FUZZ_MODEL_DEFECT"); name != nullptr && *name != '\0') {
    if (!flashcheck::parse_model_defect(name, &g_defect)) {
      std::fprintf(stderr, "fuzz_backward: unknown FLASHCHECK_FUZZ_MODEL_DEFECT '%s'\n", name);
      std::abort();
    }
    std::fprintf(stderr, "fuzz_backward: fuzzing the host model with the planted defect '%s'\n", name);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flashcheck;
  fuzz::DecodeMode mode;
  Case c;
  if (!fuzz::decode_case({data, size}, &c, &mode, fuzz::SizeProfile::kAll).ok()) return -1;
  if (!fuzz::within_limits(c, fuzz::kModelLimits)) return -1;
  c.grad = true;
  c.page = 0;
  c.splits = 1;
  c.subject.clear();
  c.property.clear();
  std::string subject_error;
  const LoadedSubject* subject = subject_from_environment(&subject_error);
  if (!subject_error.empty()) {  // nothing could be fuzzed: stop at once rather than report every input
    std::fprintf(stderr, "fuzz_backward: %s\n", subject_error.c_str());
    std::_Exit(kExitBadSubject);
  }
  if (subject != nullptr) {
    if (!subject->supports_backward(c).ok()) return -1;
    c.subject = subject->name();
  }
  if (!validate_case(c).ok()) return -1;
  HostInputs inputs;
  if (!make_inputs(c, &inputs, fuzz::kMaxInputBytes).ok()) return -1;
  BackwardRunOptions options;
  options.defect = g_defect;
  const BackwardOutputs out = subject != nullptr ? run_backward_case(inputs, *subject, options)
                                                 : run_backward_case(inputs, Backend::kHostModel, options);
  // A case the API refuses (a case line's hq % hkv != 0, d = 0, ...) is fuzz_api's business, not a finding.
  if (out.status.code() == StatusCode::kInvalidArgument || out.status.code() == StatusCode::kUnsupported) return -1;
  const BackwardVerdict verdict = judge_backward(c, inputs, out);
  fuzz::record_backward_verdict(verdict);
  if (!verdict.pass) {
    fuzz::report_finding("fuzz_backward", subject != nullptr ? "subject " + subject->name() : std::string("model"), c,
                         verdict.report());
  }
  return 0;
}
