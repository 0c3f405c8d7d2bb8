// fuzz_case (CPU, ASan + UBSan): the front half of every tool on arbitrary text, as flashcheck-repro and
// flashcheck-report take a case line: admit_case (parse, validate every field, route, estimate, memory cap;
// admission.h), then for an admitted case make_inputs, and for a tiny one the host model and the verdict. Every
// input must end in an outcome, never crash, and stay inside the limits libFuzzer is given (-timeout=1,
// -rss_limit_mb: a spin or an allocation the validation should have refused is a finding). Besides:
//   - a line that parses formats to its canonical line, which parses back to the same case;
//   - a refusal names something (a non-empty message) and is an outcome, never a failure;
//   - an admitted case validates, and its Params pass validate_shape (nothing REJECTED after admission);
//   - the estimate of the inputs bounds what make_inputs builds (every buffer of HostInputs counted);
//   - a tiny admitted case on the host model is judged PASS or OUTSIDE-DOMAIN: the host model computes the kernels'
//     arithmetic, so a FAIL there is a bug of the model, the oracle or the bound (a false FAIL on a valid line).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "flashcheck/admission.h"
#include "flashcheck/case.h"
#include "flashcheck/inputs.h"
#include "flashcheck/outcome.h"
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"
#include "finding.h"

namespace flashcheck::fuzz {
namespace {

// What an admitted case may build: far below -rss_limit_mb, so that a case the estimate lets through and that then
// needs more is caught by the bound check below rather than by the sanitizer's allocator.
constexpr int64_t kMemoryCap = int64_t{32} << 20;
// Cases of at most this many input elements are built (make_inputs draws an element in about a microsecond under
// the sanitizers), and of at most this many host-model terms (a visible key times a head_dim element, every row)
// run the model and the verdict: a millisecond or so each, far inside the second every input is held to.
constexpr double kInputElements = 1 << 17;
constexpr double kModelTerms = 1 << 14;

[[noreturn]] void violation(std::string_view line, const std::string& what) {
  std::fprintf(stderr, "\n==flashcheck== fuzz_case: %s\ninput: %s\n", what.c_str(), excerpt(line).c_str());
  std::fflush(stderr);
  std::abort();
}

// A violation on a line that parsed: its case line on disk first (finding.h), then abort.
[[noreturn]] void finding(const Case& c, const std::string& what) {
  report_finding("fuzz_case", "model", c, "fuzz_case: " + what);
}

int check_line(std::string_view line) {
  Case c;
  const Status parsed = parse_case(line, &c);
  if (!parsed.ok()) {
    if (parsed.message().empty()) violation(line, "a refusal without a message");
    return 0;
  }
  Case again;
  const std::string canonical = format_case(c);
  if (Status s = parse_case(canonical, &again); !s.ok() || !(again == c) || format_case(again) != canonical) {
    violation(line, "the canonical line '" + excerpt(canonical) + "' does not read back to the same case");
  }
  AdmitOptions options;
  options.memory_cap = kMemoryCap;
  options.host_inputs_limit = kMemoryCap;
  options.host_model = true;
  options.budget.threads = 1;
  Admission admission;
  const Status admitted = admit_case(c, options, &admission);
  if (!admitted.ok()) {
    if (admitted.message().empty()) finding(c, "a refusal without a message");
    const Outcome outcome = outcome_of(admitted.code());
    if (outcome != Outcome::kRejected && outcome != Outcome::kUnsupported) {
      finding(c, "admission ended in " + std::string(to_string(outcome)) + ": " + admitted.message());
    }
    return 0;
  }
  if (Status s = validate_shape(case_params(c)); !s.ok()) {
    finding(c, "admitted, but the kernel's contract refuses it: " + s.message());
  }
  if (admission.route != InputRoute::kHost) return 0;  // past the host's memory: the device route sizes its own work
  if (admission.budget.elements > kInputElements) return 0;
  HostInputs inputs;
  if (Status s = make_inputs(c, &inputs, kMemoryCap); !s.ok()) finding(c, "admitted, but make_inputs refused it: " + s.message());
  const double built = double(inputs.q.size() + inputs.k.size() + inputs.v.size()) +
                       double(inputs.q_exact.size() + inputs.k_exact.size() + inputs.v_exact.size()) * sizeof(double);
  if (built > admission.budget.input_bytes) {
    finding(c, "make_inputs built " + std::to_string(built) + " bytes of Q, K and V, over the estimate of " +
                        std::to_string(admission.budget.input_bytes));
  }
  if (admission.budget.model_terms > kModelTerms || !c.subject.empty()) return 0;
  RunOptions run;
  run.instrument = true;
  const RunOutputs out = run_case(inputs, Backend::kHostModel, run);
  if (!out.status.ok()) finding(c, "the host model refused an admitted case: " + out.status.message());
  const Verdict verdict = judge(c, inputs, out);
  if (verdict.outcome != Outcome::kPass && verdict.outcome != Outcome::kOutsideDomain) {
    finding(c, "the host model was judged " + std::string(to_string(verdict.outcome)) + ":\n" + verdict.report());
  }
  return 0;
}

}  // namespace
}  // namespace flashcheck::fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  flashcheck::fuzz::init_artifact_prefix(*argc, *argv);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return flashcheck::fuzz::check_line(std::string_view(reinterpret_cast<const char*>(data), size));
}
