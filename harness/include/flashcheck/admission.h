// The front half of every tool, in one order: parse the case line, validate every field (the codec's own checks,
// then the kernel's shape contract on case_params without any buffer, then a subject's capabilities), route it
// (host inputs, or inputs generated on the device for a dense case past the host limit), estimate its cost, and
// admit it under the memory cap. Nothing is allocated before a case is admitted, and no step costs time in the
// sizes a line names (only in its length and its sequences), so a hostile line ends in its outcome at once:
// REJECTED naming the field, UNSUPPORTED naming the capability or the host limit.
// flashcheck-repro, flashcheck-report, flashcheck-fuzz-decode and the fuzz_case target all go through admit_case.
#pragma once

#include <cstdint>
#include <string_view>

#include "flashcheck/budget.h"
#include "flashcheck/case.h"
#include "flashcheck/inputs.h"

namespace flashcheck {

class LoadedSubject;

// Every check a case must pass before anything is built for it: validate_case (the codec's fields), then
// validate_shape(case_params(c)) (the kernel's contract: head_dim, heads, overflowing sizes, ...), then, with a
// subject, its capabilities (kUnsupported). Ok, or the first failure.
Status validate_for_run(const Case& c, const LoadedSubject* subject = nullptr);

// Where a case's inputs live.
enum class InputRoute {
  kHost,    // make_inputs on the host
  kDevice,  // generated on the device (device_inputs.h): a dense case past the host limit, or --device-inputs
};

struct AdmitOptions {
  int64_t memory_cap = kDefaultMemoryCap;       // host bytes a case may need (budget.h)
  int64_t host_inputs_limit = kHostInputsLimit;  // dense host inputs past this go to the device route
  bool device_inputs = false;                   // every dense case on the device route
  bool host_model = false;                      // the case runs on the host model (counted in the estimate)
  BudgetOptions budget;                         // rows checked, RMS, threads (memory_cap and host_model set here)
  const LoadedSubject* subject = nullptr;       // capabilities to check; a subject never takes the device route
};

struct Admission {
  Case c;
  InputRoute route = InputRoute::kHost;
  Budget budget;  // estimated for the host route (empty for the device route, which sizes its own work)
  bool over_memory_cap = false;  // refused by check_memory (the budget), not by a field or a capability
};

// parse_case, then admit_case below. kInvalidArgument names the token of a line that does not parse.
Status admit_case(std::string_view line, const AdmitOptions& options, Admission* out);
// validate_for_run; the route; for the host route the estimate and check_memory. *out is filled on success (and
// out->c always holds the case, for the report of a refusal).
Status admit_case(const Case& c, const AdmitOptions& options, Admission* out);

}  // namespace flashcheck
