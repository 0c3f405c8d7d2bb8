// Tier set-up for the property binaries: backend, limits, case counts, planted defect, coverage table,
// and the GPU skip. RC_PARAMS is completed before RapidCheck loads it (lazily, at the first property),
// so a user's RC_PARAMS="reproduce=..." or max_success=... always wins.
#include "tier.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string_view>

#include "flashcheck/attention.h"
#include "flashcheck/mask_names.h"
#include "generators.h"

namespace flashcheck::properties {
namespace {

Backend g_backend = Backend::kHostModel;

// Coverage of the running test: word -> count, grouped by the part before '=' when printed.
struct Coverage {
  int64_t cases = 0;
  std::map<std::string, int64_t> words;
  std::map<std::string, std::pair<int64_t, int64_t>> informative;  // dtype -> (informative O checks, O checks)
};
Coverage& coverage() {
  static Coverage c;
  return c;
}
int64_t& total_cases() {
  static int64_t n = 0;
  return n;
}

void print_coverage(std::ostream& os, const std::string& test) {
  const Coverage& cov = coverage();
  if (cov.cases == 0) return;
  os << "[ COVERAGE ] " << test << ": " << cov.cases << " case runs\n";
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> groups;
  for (const auto& [word, n] : cov.words) {
    const size_t eq = word.find('=');
    const std::string key = eq == std::string::npos ? word : word.substr(0, eq);
    groups[key].emplace_back(eq == std::string::npos ? word : word.substr(eq + 1), n);
  }
  for (const auto& [key, entries] : groups) {
    os << "  " << std::left << std::setw(10) << key << std::right;
    for (const auto& [value, n] : entries) {
      os << ' ' << value << ':' << std::fixed << std::setprecision(0) << 100.0 * double(n) / double(cov.cases) << '%';
    }
    os << '\n';
  }
  if (!cov.informative.empty()) {
    os << "  informative O checks (bound below max|v| of the column, docs/error-model.md section 4.9):";
    for (const auto& [dtype, counts] : cov.informative) {
      os << ' ' << dtype << ' ' << std::fixed << std::setprecision(1)
         << 100.0 * double(counts.first) / double(std::max<int64_t>(counts.second, 1)) << "% of " << counts.second;
    }
    os << '\n';
  }
}

class CoverageListener : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { coverage() = Coverage{}; }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    total_cases() += coverage().cases;
    print_coverage(std::cout, std::string(info.test_suite_name()) + "." + info.name());
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (total_cases() > 0) std::cout << "[ COVERAGE ] " << total_cases() << " case runs in all properties\n";
  }
};

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return (end != value && parsed > 0) ? static_cast<int>(parsed) : fallback;
}

// RC_PARAMS with max_success filled in from FLASHCHECK_CASES or the tier default, unless already there.
void complete_rc_params(int default_cases) {
  const int cases = env_int("FLASHCHECK_CASES", default_cases);
  const char* current = std::getenv("RC_PARAMS");
  std::string params = current ? current : "";
  if (params.find("max_success") != std::string::npos) return;
  if (!params.empty()) params += ' ';
  params += "max_success=" + std::to_string(cases);
  setenv("RC_PARAMS", params.c_str(), 1);
}

}  // namespace

bool install_tier(const TierSetup& setup) {
  g_backend = setup.backend;
  // FLASHCHECK_CASE_LIMITS=cpu gives the GPU tier the CPU tier's small shapes (the sanitizer tier).
  const char* limits = std::getenv("FLASHCHECK_CASE_LIMITS");
  const bool small = limits != nullptr && std::string_view(limits) == "cpu";
  set_active_limits(setup.backend == Backend::kGpu && !small ? gpu_limits() : cpu_limits());
  complete_rc_params(setup.default_cases);
  ::testing::UnitTest::GetInstance()->listeners().Append(new CoverageListener);
  return true;
}

Backend active_backend() { return g_backend; }

const char* skip_reason() {
  if (g_backend == Backend::kGpu && !device_available()) return "flashcheck-skip: no CUDA device available (GPU tier)";
  return nullptr;
}

ModelDefect planted_defect() {
  static const ModelDefect defect = [] {
    const char* value = std::getenv("FLASHCHECK_PLANT");
    if (value == nullptr || *value == '\0') return ModelDefect::kNone;
    const std::string_view name(value);
    struct Alias {
      const char* name;
      ModelDefect defect;
    };
    static constexpr Alias kAliases[] = {
        {"p-one-format-coarser", ModelDefect::kPOneFormatCoarser},
        {"o-accum-in-dtype", ModelDefect::kOAccumInDtype},
        {"missing-rescale", ModelDefect::kMissingRescale},
        {"lse-base2", ModelDefect::kLseBase2},
    };
    for (const Alias& alias : kAliases) {
      if (name == alias.name || name == to_string(alias.defect)) return alias.defect;
    }
    std::cerr << "flashcheck: FLASHCHECK_PLANT=" << name << " names no defect; running without one\n";
    return ModelDefect::kNone;
  }();
  return defect;
}

void note_case(const Case& c) {
  RC_LOG() << "case line: " << format_case(c) << "\n";
  const ValueFamily family = value_family(c);
  RC_CLASSIFY(true, to_string(family));
  RC_CLASSIFY(takes_window(c.mask), "window");
  RC_CLASSIFY(c.softcap > 0, "softcap");
  RC_CLASSIFY(c.sink.has_value(), "sink");
  Coverage& cov = coverage();
  ++cov.cases;
  ++cov.words[std::string("values=") + to_string(family)];
  for (const std::string& tag : shape_tags(c)) ++cov.words[tag];
  for (const std::string& tag : feature_tags(c)) ++cov.words[tag];
}

void note_coverage(const std::string& word) { ++coverage().words[word]; }

void note_informative(const Verdict& verdict) {
  const std::string dtype = verdict.case_line.substr(0, verdict.case_line.find(' '));
  auto& [informative, claims] = coverage().informative[dtype];
  informative += verdict.o_informative;
  claims += verdict.o_claims;
  RC_CLASSIFY(verdict.o_informative < verdict.o_claims, "uninformative-O");
}

}  // namespace flashcheck::properties
