// check_one (check_one.h): one fuzzer input from bytes to verdict. The backend is reached only through the
// harness's runner, so a fuzz run has the same guards (poison, canaries, input hashes) as every other run.
// FLASHCHECK_SUBJECT=PATH runs a subject (loaded_subject.h) instead of the target's backend: its findings name it
// (subject= in the case line), cases outside its capabilities stay out of the corpus, and coverage comes from
// the numeric signals alone (a subject records no tile counters).
#include "check_one.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "finding.h"
#include "flashcheck/loaded_subject.h"

namespace flashcheck::fuzz {
namespace {

// Refused inputs of a case line stay out of the corpus; a binary-decoded case is valid by construction.
constexpr int64_t kMaxInputBytes = int64_t{1} << 30;

}  // namespace

int check_one(const TargetSpec& spec, const uint8_t* data, size_t size) {
  std::string subject_error;
  const LoadedSubject* subject = subject_from_environment(&subject_error);
  if (!subject_error.empty()) {  // nothing could be fuzzed: stop at once rather than report every input
    std::fprintf(stderr, "%s: %s\n", spec.name, subject_error.c_str());
    std::_Exit(kExitBadSubject);
  }
  DecodeMode mode;
  Case c = decode_case({data, size}, &mode);
  if (subject != nullptr) {
    if (!subject->supports(c).ok()) return -1;
    c.subject = subject->name();
  }
  const std::string backend_name = subject != nullptr ? "subject " + subject->name() : to_string(spec.backend);
  if (!within_limits(c, spec.limits)) return -1;
  HostInputs inputs;
  if (Status s = make_inputs(c, &inputs, kMaxInputBytes); !s.ok()) {
    if (mode == DecodeMode::kText) return -1;
    report_finding(
        spec.name, backend_name, c,
        "case: " + format_case(c) + "\nmake_inputs refused a case the binary decoder produced: " + s.message());
  }
  record_specials(c, inputs);

  RunOptions options = spec.run;
  options.instrument = subject == nullptr;
  options.count_tiles = subject == nullptr;
  const RunOutputs out = subject != nullptr ? run_case(inputs, *subject, options) : run_case(inputs, spec.backend, options);
  // A case line parses whatever the kernel supports (hq % hkv != 0, d = 0, ...): the API's refusal of it is
  // correct behaviour, covered by fuzz_api, not a finding. Binary-decoded cases are valid by construction.
  // (The refusal is the run's own: the inputs carry no output buffers yet, so asking can_implement() here
  // refused every case line.)
  if (mode == DecodeMode::kText && (out.status.code() == StatusCode::kInvalidArgument ||
                                    out.status.code() == StatusCode::kUnsupported)) {
    return -1;
  }
  record_run(c, out);
  if (!out.status.ok()) {
    report_finding(spec.name, backend_name, c,
                   "case: " + format_case(c) + "\nthe " + backend_name +
                       " backend failed on a valid case: " + out.status.message());
  }
  // The verdict also fails on the guards (unwritten outputs, damaged canaries, changed inputs).
  const Verdict verdict = judge(c, inputs, out, spec.judge);
  record_verdict(verdict);
  if (!verdict.pass) {
    char hash[32];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(inputs.hash()));
    report_finding(spec.name, backend_name, c,
                   verdict.report() + "\ninputs hash (FNV-1a of q, k, v bytes): " + hash);
  }
  return 0;
}

}  // namespace flashcheck::fuzz
