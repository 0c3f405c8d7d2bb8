// The tests of a property binary, registered with GoogleTest from property_table() (the one list of properties):
//   <Suite>.<Property>   every property the binary runs: a RapidCheck run of FLASHCHECK_CASES cases (at most the
//                        property's cap, property_case_cap), under the id <Suite>/<Property> that RC_PARAMS'
//                        reproduce strings name;
//   <Suite>.<KnownCase>  a case line that once falsified a property, replayed through it (replay.h) on every run,
//                        since RapidCheck draws fresh seeds each time and a fixed bug stays fixed only if its case
//                        comes back;
//   <Suite>.Budgeted     every property above within FLASHCHECK_BUDGET (budget.h); skipped when it is unset.
// Each test fails with the tier's configuration error (tier_error), and skips, so that gtest and CTest report it
// skipped, never passed, with the tier's reason (skip_reason: no device) or the property's (property_skip_reason).
// A failing case is printed the moment it fails, its case line with property=NAME first (it replays as it is), and
// shrinking then runs for at most FLASHCHECK_SHRINK_SECONDS (default 60): past that the smallest case so far is the
// counterexample, with its reproduce string.
#pragma once

#include <string>

#include "properties.h"
#include "budget.h"

namespace flashcheck::properties {

// Registers the binary's tests: the properties of `production` and/or `instrumented` kind, their known cases and
// the budgeted test. Called once, from the binary's static initialisation after install_tier (suite_*.cpp).
bool register_suite(const char* suite, bool production, bool instrumented);

// One RapidCheck run of `property` under test id `<suite>/<name>`: the cases that passed, or -1 with RapidCheck's
// report (the counterexample, the log with the case line, the reproduce string) in *failure.
// With `print_success` a passing run prints RapidCheck's summary (the cases, the RC_CLASSIFY distribution).
int64_t check_property(const std::string& suite, const PropertyInfo& property, const ChunkParams& params,
                       std::string* failure, bool print_success = false);

}  // namespace flashcheck::properties
