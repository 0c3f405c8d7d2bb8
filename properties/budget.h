// The budgeted tier: every property of a binary within a wall-clock budget (FLASHCHECK_BUDGET, e.g. 60s), in
// one test, <Suite>.Budgeted. Properties take turns in chunks of cases, the one with the least time so far going
// next, so each gets an equal share of the budget and a budget that ends early has still reached all of them.
// Each chunk is an ordinary RapidCheck run of that property (its own seed, derived from the run's base seed, the
// property and the chunk number) under the property's own test id, so a failure prints the case line and a
// RC_PARAMS="reproduce=..." string that replays in the property's own test (<Suite>.<Name>). The full tier (one
// test per property, FLASHCHECK_CASES each) is unchanged; the budgeted test skips unless FLASHCHECK_BUDGET is set.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace flashcheck::properties {

// A property's RapidCheck run with given parameters: returns the number of cases that passed, or -1 with the
// failure report (RapidCheck's message: the counterexample, the log with the case line) in *failure.
struct ChunkParams {
  uint64_t seed = 0;
  int cases = 1;
};
using PropertyChunk = std::function<int64_t(const ChunkParams&, std::string* failure)>;

// Called once per property by the suite's registration macro (static initialisation). Returns true.
bool register_property(std::string_view suite, std::string_view name, PropertyChunk chunk);

// "60", "60s", "1.5m", "2h" -> seconds (> 0). False for anything else.
bool parse_budget(std::string_view text, double* seconds);

// One property's account in a budgeted run.
struct BudgetEntry {
  std::string name;
  PropertyChunk chunk;
  std::string skipped;  // why it does not run here (property_skip_reason), or empty
  double seconds = 0.0;
  int64_t cases = 0;
  int64_t chunks = 0;
};

// The schedule, apart from RapidCheck and the clock (tested on its own): the entry that runs next (least time
// so far among those not skipped; the first on ties), or -1 when none can run.
int next_entry(const std::vector<BudgetEntry>& entries);
// Cases in the next chunk of `e`: four at first, then as many as take about `chunk_seconds` at its mean time per
// case so far, at most twice the cases so far, between 4 and 256.
int chunk_cases(const BudgetEntry& e, double chunk_seconds);
// The seed of chunk `index` of property `name` in a run with base seed `base` (a SplitMix64 mix).
uint64_t chunk_seed(uint64_t base, std::string_view name, int64_t index);

struct BudgetResult {
  bool ran = false;          // false: skipped, `message` says why
  bool failed = false;       // a property failed: `message` holds its report
  std::string message;
  std::vector<BudgetEntry> entries;  // per property: cases, seconds (skipped ones with their reason)
  double seconds = 0.0;
};

// Runs the registered properties of `suite` for FLASHCHECK_BUDGET seconds; `skip_reason(name)` (or null)
// leaves a property out, as its own test would skip. Prints one line per property (cases, seconds).
BudgetResult run_budgeted(std::string_view suite, const std::function<const char*(const char*)>& skip_reason);

}  // namespace flashcheck::properties
