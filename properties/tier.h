// The tier a property binary runs in: the backend (host model in the CPU tier, GPU kernel in the GPU
// tier), its case limits, case count and shard (FLASHCHECK_SHARD: a run spread over GPUs), the planted-defect
// switch for the README demo, the per-test coverage table, and the reason the GPU tier skips when no device
// is present. Each test binary calls
// install_tier() once, from a static initialiser, before RapidCheck reads its configuration.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flashcheck/case.h"
#include "flashcheck/host_model.h"
#include "flashcheck/loaded_subject.h"
#include "flashcheck/runner.h"
#include "flashcheck/verdict.h"

namespace flashcheck::properties {

struct TierSetup {
  Backend backend = Backend::kHostModel;
  int default_cases = 100;  // RapidCheck max_success per property unless RC_PARAMS or FLASHCHECK_CASES says otherwise
};

// Sets the backend and limits (FLASHCHECK_CASE_LIMITS=cpu: the CPU tier's small shapes on any backend),
// sets RC_PARAMS' max_success unless given, and registers the coverage listener.
bool install_tier(const TierSetup& setup);
Backend active_backend();
// The subject FLASHCHECK_SUBJECT names (loaded_subject.h), or null: flashcheck's own kernel or host model. With a
// subject every property runs on it, generators draw only cases inside its capabilities, and a host-memory subject
// runs in the CPU tier's binary, a device-memory one in the GPU tier's (the other binary skips with the reason).
const LoadedSubject* active_subject();
// Why property `name` does not apply to the active subject (the per-tile traces of OnlineSoftmaxInvariants come
// from flashcheck's instrumented builds only; a subject without LSE output is held to the properties about O
// alone), or null.
const char* property_skip_reason(const char* name);
// At most this many cases for property `name` in its own test, whatever FLASHCHECK_CASES says (properties whose
// cases take seconds: LargeInputsAgreeAndRepeat, 16); 0: no cap. The budgeted tier's time shares bound them there.
int property_case_cap(const char* name);
// Why the tier cannot run here (the GPU tier without a usable device), or null. Tests skip with it.
const char* skip_reason();
// Why the tier's configuration is wrong (a malformed FLASHCHECK_SHARD or FLASHCHECK_SEED), or null. Tests fail
// with it.
const char* tier_error();

// Test-only switch for the README's planted-bug example: FLASHCHECK_PLANT=<defect> (to_string(ModelDefect)
// names, e.g. missing-rescale) makes the host-model backend run with that defect. Ignored on the GPU.
ModelDefect planted_defect();

// Every property calls this first: logs the case line with property=NAME of the running property (printed with
// any failure, above RapidCheck's reproduce string; flashcheck-repro reruns the relation from it), names the value
// family and the features (window, softcap, sink) in RC_CLASSIFY and records the shape and the features' kinds for
// the coverage table. While shrinking is past its time (below) it discards the case at once.
void note_case(const Case& c);

// The property running now, for the case lines note_case() logs (suite.h and replay.h set it).
class CurrentProperty {
 public:
  explicit CurrentProperty(const char* name);
  ~CurrentProperty();
  CurrentProperty(const CurrentProperty&) = delete;
  CurrentProperty& operator=(const CurrentProperty&) = delete;

 private:
  const char* previous_;
};

// Shrinking's time limit: FLASHCHECK_SHRINK_SECONDS (default 60). A property's listener starts the clock when a case
// first fails and stops it when the run ends; past the limit every shrink candidate is discarded (note_case), so
// RapidCheck ends with the smallest failing case found so far. That case itself still runs (RapidCheck runs it once
// more to print it): the listener reports each finished run (case_run_finished), and the case lines of the smallest
// failing run so far are never discarded, so the failure prints its own verdict.
double shrink_seconds();
void begin_shrinking();
void end_shrinking();
// A case or shrink candidate of the running property finished; `smallest_failing`: it failed and is now the smallest
// failing case (the first failure, or a shrink RapidCheck accepted).
void case_run_finished(bool smallest_failing);

// Discards the running case with a reason that a replay (replay.h) reports; reasons that start with
// kOutsidePropertyCases mean the case is not one the property draws (REJECTED), others that the property skips it.
inline constexpr const char* kOutsidePropertyCases = "property: ";
[[noreturn]] void discard(const std::string& reason);
const std::string& discard_reason();
void clear_discard_reason();

// flashcheck-repro's tier: the backend a replayed property runs on, the host model's planted defect (kNone: none)
// and the subject (or null). Replaces install_tier for a process that runs no gtest.
void configure_replay(Backend backend, ModelDefect defect, const LoadedSubject* subject);
// Whether `c` falls in the known-peer-deviation class `name` (FLASHCHECK_KNOWN_DEVIATIONS: masked-nonfinite-v,
// nonpositive-scale, subnormal-v, nonfinite-qk, masked-overflow-qk, huge-qk, spare-key-slots,
// keyless-row-lse; note_case() discards such cases on
// a subject that lists them); false for a name that is no class.
bool in_deviation_class(std::string_view name, const Case& c);
// The case line note_case() recorded last ("" before the first case).
const std::string& last_case_line();
// Extra words for the coverage table of the running test (e.g. "rescales=every-tile").
void note_coverage(const std::string& word);
// Counts the verdict's informative O checks per dtype (printed with the coverage) and tags a case with any
// uninformative one in RC_CLASSIFY.
void note_informative(const Verdict& verdict);
// Counts one binomial test of a kept count and its distance from the mean in units of the test's slack (printed with
// the coverage as the number of tests and the largest distance: the measured side of a false-alarm rate).
void note_binomial(double deviation_over_slack);

}  // namespace flashcheck::properties
