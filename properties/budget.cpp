// The budgeted tier (budget.h): the registry of properties, the schedule and the run.
#include "budget.h"

#include <rapidcheck.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace flashcheck::properties {
namespace {

// suite -> properties in registration order (the order of property_table()).
std::map<std::string, std::vector<std::pair<std::string, PropertyChunk>>, std::less<>>& registry() {
  static std::map<std::string, std::vector<std::pair<std::string, PropertyChunk>>, std::less<>> r;
  return r;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// RapidCheck spreads a run's case sizes over 0..max_size, so a chunk of a few cases still reaches large ones; a
// chunk at most doubles the cases so far, so a cheap first chunk cannot commit a property to a long second one.
constexpr int kMinChunkCases = 4;
constexpr int kMaxChunkCases = 256;

}  // namespace

bool register_property(std::string_view suite, std::string_view name, PropertyChunk chunk) {
  auto it = registry().find(suite);
  if (it == registry().end()) it = registry().emplace(std::string(suite), decltype(it->second){}).first;
  it->second.emplace_back(std::string(name), std::move(chunk));
  return true;
}

bool parse_budget(std::string_view text, double* seconds) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value) || value <= 0.0) return false;
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  double factor = 0.0;
  if (unit.empty() || unit == "s") {
    factor = 1.0;
  } else if (unit == "m") {
    factor = 60.0;
  } else if (unit == "h") {
    factor = 3600.0;
  } else {
    return false;
  }
  *seconds = value * factor;
  return true;
}

int next_entry(const std::vector<BudgetEntry>& entries) {
  int best = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].skipped.empty()) continue;
    if (best < 0 || entries[i].seconds < entries[static_cast<size_t>(best)].seconds) best = static_cast<int>(i);
  }
  return best;
}

int chunk_cases(const BudgetEntry& e, double chunk_seconds) {
  if (e.cases == 0 || e.seconds <= 0.0) return kMinChunkCases;
  const double per_case = e.seconds / static_cast<double>(e.cases);
  const double grown = std::max(static_cast<double>(kMinChunkCases), 2.0 * static_cast<double>(e.cases));
  const double n = std::min(std::floor(chunk_seconds / per_case), grown);
  return static_cast<int>(std::clamp(n, static_cast<double>(kMinChunkCases), static_cast<double>(kMaxChunkCases)));
}

uint64_t chunk_seed(uint64_t base, std::string_view name, int64_t index) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (const char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  return splitmix64(splitmix64(base ^ h) + static_cast<uint64_t>(index));
}

BudgetResult run_budgeted(std::string_view suite, const std::function<const char*(const char*)>& skip_reason) {
  BudgetResult result;
  const char* text = std::getenv("FLASHCHECK_BUDGET");
  if (text == nullptr || *text == '\0') {
    result.message = "flashcheck-skip: FLASHCHECK_BUDGET is not set (the budgeted tier runs with e.g. FLASHCHECK_BUDGET=60s)";
    return result;
  }
  double budget = 0.0;
  if (!parse_budget(text, &budget)) {
    result.ran = true;
    result.failed = true;
    result.message = std::string("FLASHCHECK_BUDGET='") + text + "': expected a duration such as 60, 60s, 1.5m or 2h";
    return result;
  }
  if (!rc::detail::configuration().reproduce.empty()) {
    result.message = "flashcheck-skip: RC_PARAMS=reproduce replays one property: run that property's own test";
    return result;
  }
  const auto it = registry().find(suite);
  if (it == registry().end()) {
    result.message = "flashcheck-skip: no properties registered for " + std::string(suite);
    return result;
  }
  for (const auto& [name, chunk] : it->second) {
    BudgetEntry e;
    e.name = name;
    e.chunk = chunk;
    if (const char* reason = skip_reason(name.c_str())) e.skipped = reason;
    result.entries.push_back(std::move(e));
  }
  result.ran = true;
  // A chunk takes about 1/200 of the budget (at least 50 ms): turns are frequent, the RapidCheck overhead small.
  const double chunk_seconds = std::max(0.05, budget / 200.0);
  const uint64_t base = rc::detail::configuration().testParams.seed;
  std::printf("[ BUDGET   ] %s: %.0f s over %zu properties, base seed %llu\n", std::string(suite).c_str(), budget,
              result.entries.size(), static_cast<unsigned long long>(base));
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  while (elapsed() < budget) {
    const int index = next_entry(result.entries);
    if (index < 0) break;
    BudgetEntry& e = result.entries[static_cast<size_t>(index)];
    ChunkParams params;
    params.cases = chunk_cases(e, chunk_seconds);
    params.seed = chunk_seed(base, e.name, e.chunks);
    const auto t0 = Clock::now();
    std::string failure;
    const int64_t passed = e.chunk(params, &failure);
    e.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    ++e.chunks;
    if (passed < 0) {
      result.failed = true;
      char at[32];
      std::snprintf(at, sizeof(at), "%.2f", elapsed());
      result.message = e.name + " failed (chunk " + std::to_string(e.chunks - 1) + " of " +
                       std::to_string(params.cases) + " cases, seed " +
                       std::to_string(params.seed) + ", after " + std::to_string(e.cases) + " passing cases, at " + at +
                       " s of the budget):\n" + failure;
      break;
    }
    e.cases += passed;
  }
  result.seconds = elapsed();
  int64_t total = 0;
  for (const BudgetEntry& e : result.entries) {
    if (!e.skipped.empty()) {
      std::printf("[ BUDGET   ] %-40s skipped: %s\n", e.name.c_str(), e.skipped.c_str());
      continue;
    }
    std::printf("[ BUDGET   ] %-40s %6lld cases in %6.1f s\n", e.name.c_str(), static_cast<long long>(e.cases),
                e.seconds);
    total += e.cases;
  }
  std::printf("[ BUDGET   ] %lld cases in %.1f s (budget %.0f s)\n", static_cast<long long>(total), result.seconds,
              budget);
  std::fflush(stdout);
  return result;
}

}  // namespace flashcheck::properties
