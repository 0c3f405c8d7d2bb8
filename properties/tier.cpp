// Tier set-up for the property binaries: backend, limits, case counts, planted defect, coverage table,
// and the GPU skip. RC_PARAMS is completed before RapidCheck loads it (lazily, at the first property),
// so a user's RC_PARAMS="reproduce=..." or max_success=... always wins.
#include "tier.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/mask_names.h"
#include "flashcheck/shard.h"
#include "budget.h"
#include "generators.h"
#include "properties.h"

namespace flashcheck::properties {
namespace {

Backend g_backend = Backend::kHostModel;
const LoadedSubject* g_subject = nullptr;

// Why the tier's configuration cannot run (a malformed FLASHCHECK_SHARD or FLASHCHECK_SEED): every property
// fails with it rather than run something other than what was asked.
std::string& tier_error_storage() {
  static std::string error;
  return error;
}
// Why FLASHCHECK_SUBJECT could not be loaded ("" when it was, or is unset).
std::string& subject_load_error() {
  static std::string error;
  return error;
}
// FLASHCHECK_STOP_AFTER: the seconds after the tier's installation past which a test that has not started skips
// (0: no limit), and when it was installed.
double g_stop_after = 0.0;
std::chrono::steady_clock::time_point g_installed;
// The shard plan, printed once before the tests: "[ SHARD ] 1/4: ...".
std::string& shard_note() {
  static std::string note;
  return note;
}

// Coverage of the running test: word -> count, grouped by the part before '=' when printed.
struct Coverage {
  int64_t cases = 0;
  std::map<std::string, int64_t> words;
  std::map<std::string, std::pair<int64_t, int64_t>> informative;  // dtype -> (informative O checks, O checks)
  std::map<std::string, WindowReachTally> reach;  // window_reach per tile shape
  int64_t binomial_tests = 0;                     // note_binomial: tests run, the largest |K - n q| / slack
  double binomial_worst = 0.0;
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
  if (!cov.reach.empty()) {
    os << "  window reach, per compute path and tile shape (of its windowed cases: a row's window over 3+ K tiles with "
          "its left edge inside a later tile; a row whose Q tile visits a K tile hidden from it first, every score "
          "below -90):\n";
    for (const auto& [tiles, n] : cov.reach) {
      os << "    " << std::left << std::setw(24) << tiles << std::right << ' ' << n.windowed
         << " windowed: left edge inside a later tile " << std::fixed << std::setprecision(0)
         << 100.0 * double(n.left_edge_inside_later_tile) / double(n.windowed) << "%, hidden first tile then low scores "
         << 100.0 * double(n.hidden_tile_then_low_scores) / double(n.windowed) << "%\n";
    }
  }
  if (cov.binomial_tests > 0) {
    os << "  binomial tests of kept counts: " << cov.binomial_tests << ", the largest |K - n q| at " << std::fixed
       << std::setprecision(3) << cov.binomial_worst << " of its slack (1 is an alarm)\n";
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
  void OnTestProgramStart(const ::testing::UnitTest&) override {
    // A subject that cannot be loaded: no test could run on it, and a run that names one must not pass (the tools'
    // exit status for it, README "Exit codes").
    if (!subject_load_error().empty()) {
      std::cerr << "flashcheck: " << subject_load_error() << "\n";
      std::exit(kExitBadSubject);
    }
    if (g_subject != nullptr) std::cout << "[ SUBJECT  ] " << g_subject->describe() << "\n";
    if (!shard_note().empty()) std::cout << "[ SHARD    ] " << shard_note() << "\n";
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (total_cases() > 0) std::cout << "[ COVERAGE ] " << total_cases() << " case runs in all properties\n";
  }
};

// Cases per property a run takes (FLASHCHECK_CASES, RC_PARAMS' max_success): RapidCheck counts them in an int.
constexpr int kMaxCases = 10'000'000;

// A case count: decimal digits only, 1 .. kMaxCases.
bool parse_cases(std::string_view text, int* out) {
  int n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || text.front() == '-' || text.front() == '+' || ec != std::errc() ||
      ptr != text.data() + text.size() || n < 1 || n > kMaxCases) {
    return false;
  }
  *out = n;
  return true;
}

// FLASHCHECK_SHRINK_SECONDS into *seconds (60 when unset); false when it is set to no time above 0.
bool shrink_seconds_setting(double* seconds) {
  *seconds = 60.0;
  const char* text = std::getenv("FLASHCHECK_SHRINK_SECONDS");
  return text == nullptr || *text == '\0' || parse_budget(text, seconds);
}

bool parse_seed(const char* text, uint64_t* out) {
  const std::string_view view(text);
  if (view.empty() || view.front() == '-' || view.front() == '+') return false;
  auto [ptr, ec] = std::from_chars(view.data(), view.data() + view.size(), *out);
  return ec == std::errc() && ptr == view.data() + view.size();
}

void append_param(std::string* params, const std::string& param) {
  if (!params->empty()) *params += ' ';
  *params += param;
}

// RC_PARAMS with max_success filled in from FLASHCHECK_CASES or the tier default, unless already there.
// FLASHCHECK_SHARD=i/n (flashcheck/shard.h) makes this run shard i of a run of that many cases per property
// with base seed FLASHCHECK_SEED (default 0): its share of the cases, from its own seed. FLASHCHECK_SEED alone
// fixes the seed of an unsharded run (the same run as shard 0/1). RC_PARAMS=reproduce=... replays one case
// and wins over both.
void complete_rc_params(int default_cases) {
  int cases = default_cases;
  const char* cases_text = std::getenv("FLASHCHECK_CASES");
  const bool cases_given = cases_text != nullptr && *cases_text != '\0';
  if (cases_given && !parse_cases(cases_text, &cases)) {
    tier_error_storage() = std::string("FLASHCHECK_CASES='") + cases_text + "' is not a whole number of cases in [1, " +
                           std::to_string(kMaxCases) + "]";
    return;
  }
  const char* current = std::getenv("RC_PARAMS");
  std::string params = current ? current : "";
  // RC_PARAMS' max_success=N is the case count, as FLASHCHECK_CASES is: taken out here, so that it combines with
  // FLASHCHECK_SEED and FLASHCHECK_SHARD (which plan the seed and each shard's share of the cases).
  {
    std::istringstream words(params);
    std::string kept;
    for (std::string word; words >> word;) {
      if (word.rfind("max_success=", 0) == 0) {
        if (!parse_cases(std::string_view(word).substr(12), &cases)) {
          tier_error_storage() = "RC_PARAMS: '" + word + "' is not a whole number of cases in [1, " +
                                 std::to_string(kMaxCases) + "]";
          return;
        }
        continue;  // RC_PARAMS' count wins over FLASHCHECK_CASES (a replay or a tool's own run sets it)
      }
      append_param(&kept, word);
    }
    params = kept;
  }
  const char* shard_text = std::getenv("FLASHCHECK_SHARD");
  const char* seed_text = std::getenv("FLASHCHECK_SEED");
  const bool sharded = (shard_text != nullptr && *shard_text != '\0') || (seed_text != nullptr && *seed_text != '\0');
  if (sharded && params.find("reproduce") == std::string::npos) {
    Shard shard;
    uint64_t base = 0;
    if (shard_text != nullptr && *shard_text != '\0') {
      if (Status s = parse_shard(shard_text, &shard); !s.ok()) {
        tier_error_storage() = "FLASHCHECK_SHARD: " + s.message();
        return;
      }
    }
    if (seed_text != nullptr && *seed_text != '\0' && !parse_seed(seed_text, &base)) {
      tier_error_storage() = std::string("FLASHCHECK_SEED='") + seed_text + "' is not a decimal uint64";
      return;
    }
    if (params.find("seed=") != std::string::npos) {
      tier_error_storage() =
          "FLASHCHECK_SHARD/FLASHCHECK_SEED plan the seed: give the base seed in FLASHCHECK_SEED, not in RC_PARAMS";
      return;
    }
    const int64_t share = shard_cases(cases, shard);
    const uint64_t seed = shard_seed(base, shard);
    append_param(&params, "max_success=" + std::to_string(share));
    append_param(&params, "seed=" + std::to_string(seed));
    shard_note() = std::to_string(shard.index) + "/" + std::to_string(shard.count) + ": cases [" +
                   std::to_string(shard_first_case(cases, shard)) + ", " +
                   std::to_string(shard_first_case(cases, shard) + share) + ") of " + std::to_string(cases) +
                   " per property, RapidCheck seed " + std::to_string(seed) + " (FLASHCHECK_SEED=" +
                   std::to_string(base) + ")";
    setenv("RC_PARAMS", params.c_str(), 1);
    return;
  }
  append_param(&params, "max_success=" + std::to_string(cases));
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
  g_installed = std::chrono::steady_clock::now();
  if (const char* stop = std::getenv("FLASHCHECK_STOP_AFTER"); stop != nullptr && *stop != '\0') {
    char* end = nullptr;
    g_stop_after = std::strtod(stop, &end);
    if (end == stop || *end != '\0' || !(g_stop_after > 0) || !std::isfinite(g_stop_after)) {
      tier_error_storage() = std::string("FLASHCHECK_STOP_AFTER='") + stop + "' is not a number of seconds above 0";
    }
  }
  if (double seconds = 0.0; !shrink_seconds_setting(&seconds)) {
    tier_error_storage() = std::string("FLASHCHECK_SHRINK_SECONDS='") + std::getenv("FLASHCHECK_SHRINK_SECONDS") +
                           "' is not a time above 0 (seconds, or with s, m, h)";
  }
  g_subject = subject_from_environment(&subject_load_error());
  if (!subject_load_error().empty()) tier_error_storage() = subject_load_error();
  // A device subject with no device to run it on: every test fails rather than skips, so that a CI gate that
  // names a subject never passes having run nothing.
  if (g_subject != nullptr && g_subject->on_device() && !device_available()) {
    tier_error_storage() = "FLASHCHECK_SUBJECT " + g_subject->name() +
                           " takes device memory and no CUDA device is available: no property can run on it here";
  }
  ::testing::UnitTest::GetInstance()->listeners().Append(new CoverageListener);
  return true;
}

Backend active_backend() { return g_backend; }

const LoadedSubject* active_subject() { return g_subject; }

int property_case_cap(const char* name) {
  return std::string_view(name) == "LargeInputsAgreeAndRepeat" ? 16 : 0;
}

namespace {
bool lists_deviation(std::string_view name);  // FLASHCHECK_KNOWN_DEVIATIONS lists the class `name`
}  // namespace

const char* property_skip_reason(const char* name) {
  const std::string_view property(name);
  if (property == "SmallGridsGiveTheSameBits" && (g_subject != nullptr || g_backend != Backend::kGpu)) {
    return "flashcheck-skip: needs flashcheck's CUDA kernels (the grid cap is their test control; the host model "
           "and subjects have no grid to cap)";
  }
  if (property == "LargeInputsAgreeAndRepeat" && g_backend != Backend::kGpu) {
    return "flashcheck-skip: GPU tier only (inputs past the GPU's L2 cache, 25-130 M elements a case: minutes per "
           "case on the host model)";
  }
  if (const PropertyInfo* info = find_property(property); info != nullptr && info->pass == PropertyPass::kFp8) {
    if (g_subject != nullptr && !g_subject->fp8()) {
      return "flashcheck-skip: needs f8e4m3 inputs: the subject declares no fp8 path (fc_subject_fp8_v1)";
    }
    if (g_subject != nullptr && !g_subject->fp8()->descales &&
        (property == "Fp8QueryHeadsReadTheirKvHeadsDescales" || property == "Fp8PowerOfTwoDescalesScaleExactly")) {
      return "flashcheck-skip: needs descales, which the subject's fp8 path does not take (fc_subject_fp8_v1: descales)";
    }
#if !defined(FLASHCHECK_HAS_FP8)
    if (g_subject == nullptr && g_backend == Backend::kGpu) {
      return "flashcheck-skip: this library has no fp8 kernel (sm_90a builds have it; the host model computes the "
             "path: Model_Properties)";
    }
#endif
  }
  if (g_subject == nullptr) return nullptr;
  if (const PropertyInfo* info = find_property(property); info != nullptr && info->pass == PropertyPass::kBackward) {
    if (!g_subject->backward()) {
      return "flashcheck-skip: needs a backward pass, which this subject does not declare (fc_subject_backward_v1)";
    }
    if (property == "DeterministicGradientsRepeat" && !g_subject->backward()->deterministic) {
      return "flashcheck-skip: needs a deterministic backward (fc_subject_backward_v1: deterministic = 1)";
    }
  }
  // The relation of these is the masked-nonfinite-v class itself (non-finite K/V values of hidden keys): a subject
  // that lists the class as its known deviation (a finding replays it) skips them rather than failing each run.
  if ((property == "NanInMaskedKeysNeverReachesOutput" || property == "NanOutsideWindowNeverReachesOutput" ||
       property == "NanInHiddenKeysNeverReachesGradients") &&
      lists_deviation("masked-nonfinite-v")) {
    return "flashcheck-skip: the subject's known deviation masked-nonfinite-v (FLASHCHECK_KNOWN_DEVIATIONS): non-finite "
           "values of hidden keys reach its output";
  }
  if (const PropertyInfo* info = find_property(property); info != nullptr && info->pass == PropertyPass::kDropout) {
    if (!g_subject->dropout()) return "flashcheck-skip: needs a dropout, which this subject does not declare (fc_subject_dropout_v1)";
    if (property != "DropoutAgreesWithOracle" && property != "DropoutZeroIsNoDropout" && !g_subject->dropout()->mask_dump) {
      return "flashcheck-skip: reads the dropout mask, which this subject does not dump (fc_subject_dropout_v1: mask_dump)";
    }
  }
  if (property == "OnlineSoftmaxInvariants" || property == "SequenceOnlineSoftmaxInvariants") {
    return "flashcheck-skip: applies to instrumented subjects only (per-tile m/l traces come from flashcheck's "
           "instrumented builds; FLASHCHECK_SUBJECT is set)";
  }
  // Properties whose relation needs a capability the subject lacks.
  const fc_subject_capabilities& caps = g_subject->descriptor().capabilities;
  const bool window = (caps.masks & ((1u << FC_SUBJECT_MASK_WINDOW_BOTTOM_RIGHT) | (1u << FC_SUBJECT_MASK_WINDOW_TOP_LEFT))) != 0;
  const bool causal = (caps.masks & ((1u << FC_SUBJECT_MASK_CAUSAL_BOTTOM_RIGHT) | (1u << FC_SUBJECT_MASK_CAUSAL_TOP_LEFT))) != 0;
  const bool unmasked = (caps.masks & (1u << FC_SUBJECT_MASK_NONE)) != 0;
  struct Need {
    std::string_view property;
    bool met;
    const char* reason;
  };
  // The sequence properties: what each needs of fc_subject_sequences_v1.
  const bool varlen = g_subject->takes(FC_SUBJECT_SEQ_VARLEN), paged = g_subject->takes(FC_SUBJECT_SEQ_PAGED);
  const bool sequences = varlen || paged;
  const bool every_layout = caps.layouts == (FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD) | FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BSHD) |
                                             FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED));
  const auto two_fp8_tiles = [&](std::initializer_list<int64_t> dims) {  // fp8.cpp's rows: two tiles at one of dims
    return std::any_of(dims.begin(), dims.end(), [&](int64_t d) { return g_subject->takes_fp8_tiles(d, 2); });
  };
  const auto takes_mask = [&](int mask) { return (caps.masks & (1u << mask)) != 0; };
  const auto takes_any_fp8_head_dim = [&](std::initializer_list<int64_t> dims) {
    return std::any_of(dims.begin(), dims.end(), [&](int64_t d) { return g_subject->takes_head_dim(DType::kF8E4M3, d); });
  };
  const bool two_head_dims =
      caps.head_dims != nullptr ? caps.head_dim_count >= 2 : caps.head_dim_max > caps.head_dim_min;
  const bool dense_bhsd = (caps.layouts & (FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD) | FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED))) != 0;
  const Need needs[] = {
      {"SequencesAgreeWithOracle", sequences, "flashcheck-skip: needs sequences (fc_subject_sequences_v1: VARLEN or PAGED)"},
      {"SequencesAreMemorySafe", sequences, "flashcheck-skip: needs sequences (fc_subject_sequences_v1: VARLEN or PAGED)"},
      {"OtherSequencesLeaveARowUnchanged", sequences,
       "flashcheck-skip: needs sequences (fc_subject_sequences_v1: VARLEN or PAGED)"},
      {"PoisonNeverReachesOutput", g_subject->takes(FC_SUBJECT_SEQ_SEQUSED_K),
       "flashcheck-skip: needs spare K/V slots (fc_subject_sequences_v1: SEQUSED_K)"},
      {"PagedEqualsPackedBitForBit", varlen && paged,
       "flashcheck-skip: needs paged and packed K/V (fc_subject_sequences_v1: PAGED and VARLEN)"},
      {"SplitsRepeatAndAgreeWithUnsplit", g_subject->takes(FC_SUBJECT_SEQ_SPLITS),
       "flashcheck-skip: needs split-KV (fc_subject_sequences_v1: SPLITS)"},
      {"RowsWithoutKeysGetZeroGradients",
       (caps.masks & ((1u << FC_SUBJECT_MASK_CAUSAL_BOTTOM_RIGHT) | (1u << FC_SUBJECT_MASK_WINDOW_BOTTOM_RIGHT) |
                      (1u << FC_SUBJECT_MASK_WINDOW_TOP_LEFT))) != 0 ||
           (g_subject->backward() && g_subject->backward()->sequences),
       "flashcheck-skip: needs a mask that can leave a row without keys (causal-br or a window) or a backward that "
       "takes sequences"},
      {"GqaEqualsRepeatedHeads", caps.gqa != 0, "flashcheck-skip: needs GQA, which this subject does not declare"},
      {"LayoutsAgreeBitForBit", every_layout, "flashcheck-skip: needs the bhsd, bshd and strided layouts"},
      {"Fp8LayoutsAgreeBitForBit", every_layout, "flashcheck-skip: needs the bhsd, bshd and strided layouts"},
      {"Fp8AgreesWithBf16OnExactInputs", (caps.dtypes & FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_BF16)) != 0,
       "flashcheck-skip: needs bf16 besides f8e4m3"},
      // Rows over two or more of the fp8 path's K/V tiles, in shapes of the properties' own (fp8.cpp).
      {"Fp8PNeverSaturates", two_fp8_tiles({16, 32, 64, 128}),
       "flashcheck-skip: needs two fp8 key tiles within the subject's seqlen_k limit at head_dim 16, 32, 64 or 128"},
      {"Fp8PNeverSaturates", dense_bhsd && (takes_mask(FC_SUBJECT_MASK_NONE) || takes_mask(FC_SUBJECT_MASK_CAUSAL_BOTTOM_RIGHT)) &&
                                 takes_any_fp8_head_dim({16, 32, 64, 128}),
       "flashcheck-skip: its rows need head_dim 16, 32, 64 or 128, mask none or causal-br, and the bhsd layout"},
      {"Fp8LightKeysKeepTheirWeight", two_fp8_tiles({4, 8, 16}),
       "flashcheck-skip: needs two fp8 key tiles within the subject's seqlen_k limit at head_dim 4, 8 or 16"},
      {"Fp8LightKeysKeepTheirWeight", dense_bhsd && takes_mask(FC_SUBJECT_MASK_NONE) && takes_any_fp8_head_dim({4, 8, 16}),
       "flashcheck-skip: its rows need head_dim 4, 8 or 16, mask none and the bhsd layout"},
      {"Fp8QueryHeadsReadTheirKvHeadsDescales", caps.gqa != 0, "flashcheck-skip: needs GQA, which this subject does not declare"},
      // Relations whose second run has other key counts: the halves of the keys, or one more key.
      {"MergeOfKeyHalvesEqualsWhole", g_subject->limits().seqlen_k_multiple <= 1 && g_subject->limits().seqlen_k_min <= 1,
       "flashcheck-skip: its halves' key counts lie outside the subject's shape limits (fc_subject_limits_v1)"},
      {"SinkEqualsExtraZeroValueKey", g_subject->limits().seqlen_k_multiple <= 1 && g_subject->limits().seqlen_k_max == 0,
       "flashcheck-skip: its one more key lies outside the subject's shape limits (fc_subject_limits_v1)"},
      {"PermutingKeysLeavesOutputUnchanged", unmasked, "flashcheck-skip: needs mask none"},
      {"MergeOfKeyHalvesEqualsWhole", unmasked, "flashcheck-skip: needs mask none"},
      {"CausalRowsIgnoreInvisibleKeys", causal, "flashcheck-skip: needs a causal mask"},
      {"NanInMaskedKeysNeverReachesOutput", causal, "flashcheck-skip: needs a causal mask"},
      {"WindowCoveringAllKeysEqualsNoMask", window && unmasked, "flashcheck-skip: needs a window mask and mask none"},
      {"WindowMinusOneZeroEqualsCausal", window && causal, "flashcheck-skip: needs a window mask and a causal mask"},
      {"NanOutsideWindowNeverReachesOutput", window, "flashcheck-skip: needs a window mask"},
      {"MinusInfSinkEqualsNoSink", caps.sink != 0, "flashcheck-skip: needs sink logits"},
      {"SinkEqualsExtraZeroValueKey", caps.sink != 0, "flashcheck-skip: needs sink logits"},
      {"SinkEqualsExtraZeroValueKey", two_head_dims,
       "flashcheck-skip: its extra key is one more Q/K column: needs two head dims (the second for the keyed run)"},
      {"LargeSoftcapEqualsNoSoftcap", caps.softcap != 0, "flashcheck-skip: needs a softcap"},
  };
  for (const Need& need : needs) {
    if (need.property == property && !need.met) return need.reason;
  }
  // Properties judged on O alone (the verdict leaves LSE out for such a subject).
  static constexpr std::string_view kAboutO[] = {"OracleAgreement", "MemorySafety", "OutputWithinValueRange",
                                                 "SpecialValuesFollowSemantics", "Fp8AgreesWithOracle",
                                                 "Fp8MemorySafety"};
  if (g_subject->descriptor().capabilities.lse == 0 &&
      std::find(std::begin(kAboutO), std::end(kAboutO), property) == std::end(kAboutO)) {
    return "flashcheck-skip: compares LSE, which this subject does not output (capabilities.lse = 0)";
  }
  return nullptr;
}

const char* tier_error() { return tier_error_storage().empty() ? nullptr : tier_error_storage().c_str(); }

const char* skip_reason() {
  // A time-limited run (FLASHCHECK_STOP_AFTER) ends with what ran, its XML written, rather than killed mid-test.
  if (g_stop_after > 0 &&
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g_installed).count() > g_stop_after) {
    return "flashcheck-skip: not started within FLASHCHECK_STOP_AFTER";
  }
  if (g_subject != nullptr && g_subject->on_device() != (g_backend == Backend::kGpu)) {
    return g_subject->on_device()
               ? "flashcheck-skip: FLASHCHECK_SUBJECT takes device memory: it runs in the GPU tier (properties_gpu)"
               : "flashcheck-skip: FLASHCHECK_SUBJECT takes host memory: it runs in the CPU tier (properties_model)";
  }
  if (g_backend == Backend::kGpu && !device_available()) return "flashcheck-skip: no CUDA device available (GPU tier)";
  return nullptr;
}

namespace {
std::optional<ModelDefect> g_replay_defect;  // configure_replay's defect, in place of FLASHCHECK_PLANT
}  // namespace

ModelDefect planted_defect() {
  if (g_replay_defect) return *g_replay_defect;
  static const ModelDefect defect = [] {
    const char* value = std::getenv("FLASHCHECK_PLANT");
    if (value == nullptr || *value == '\0' || g_subject != nullptr) return ModelDefect::kNone;
    ModelDefect parsed = ModelDefect::kNone;
    if (parse_model_defect(value, &parsed)) return parsed;
    std::cerr << "flashcheck: FLASHCHECK_PLANT=" << value << " names no defect; running without one\n";
    return ModelDefect::kNone;
  }();
  return defect;
}

void configure_replay(Backend backend, ModelDefect defect, const LoadedSubject* subject) {
  g_backend = backend;
  g_subject = subject;
  g_replay_defect = defect;
  set_active_limits(backend == Backend::kGpu ? gpu_limits() : cpu_limits());
}

namespace {
const char* g_current_property = nullptr;
std::string g_discard_reason;
using ShrinkClock = std::chrono::steady_clock;
std::optional<ShrinkClock::time_point> g_shrink_start;
}  // namespace

CurrentProperty::CurrentProperty(const char* name) : previous_(g_current_property) { g_current_property = name; }
CurrentProperty::~CurrentProperty() { g_current_property = previous_; }

double shrink_seconds() {
  static const double seconds = [] {
    double value = 0.0;
    shrink_seconds_setting(&value);  // a malformed setting fails every test (install_tier); 60 s meanwhile
    return value;
  }();
  return seconds;
}
namespace {
std::vector<std::string> g_run_lines;       // the case lines noted since the last case or candidate finished
std::vector<std::string> g_smallest_lines;  // those of the smallest failing case so far (while shrinking)
}  // namespace

void begin_shrinking() { g_shrink_start = ShrinkClock::now(); }
void end_shrinking() {
  g_shrink_start.reset();
  g_run_lines.clear();
  g_smallest_lines.clear();
}
void case_run_finished(bool smallest_failing) {
  if (smallest_failing) g_smallest_lines = g_run_lines;
  g_run_lines.clear();
}

void discard(const std::string& reason) {
  g_discard_reason = reason;
  RC_DISCARD(reason);
}
const std::string& discard_reason() { return g_discard_reason; }
void clear_discard_reason() { g_discard_reason.clear(); }

namespace {
std::string g_last_case_line;  // the case note_case() saw last (a crash report names it)

// FLASHCHECK_KNOWN_DEVIATIONS: comma-separated classes of cases on which the subject under test is known to
// differ from flashcheck's semantics (a peer's documented deviation, replayed by its own known_peer_deviation.*
// test); such cases are discarded, never passed, and the discards are counted in the coverage table.
//   masked-nonfinite-v   a mask other than none and a non-finite value injected into V (a kernel that
//                        multiplies masked weights of 0 by V turns the row's O into NaN)
//   nonpositive-scale    softmax_scale <= 0 (0: every score 0, O the mean of the visible V rows; < 0: the
//                        order of the scores reversed)
//   subnormal-v          V drawn from the subnormal family (a kernel that flushes them gives O = 0)
//   nonfinite-qk         a non-finite value injected into Q or K (a row whose scores are all -inf has O = 0 in
//                        flashcheck's semantics; a plain softmax gives NaN; a kernel whose row max skips a NaN
//                        score drops it from LSE)
//   masked-overflow-qk   a mask other than none and a finite value of magnitude 2^64 or more injected into Q or K
//                        (a score of a hidden key can overflow to inf; a kernel that adds the mask's -inf to it
//                        gets NaN)
//   huge-qk              Q or K drawn near the dtype's max, or a finite value of magnitude 2^64 or more injected
//                        into Q or K (scaled scores can reach 2^24 and beyond, where one fp32 ulp exceeds 1: a
//                        kernel that computes exp2(s c - fl(m c)) as one FMA gets exp2 of fl(m c)'s rounding error
//                        for the row's largest key, up to exp2(ulp / 2), and +inf once |m c| reaches 2^31)
//   spare-key-slots      a packed sequence with K/V slots past its keys (seqs=Q:K+E, E > 0), which the harness fills
//                        with the case's poison, NaN by default (a kernel that loads them into its last K/V tile and
//                        multiplies P's 0 by V gets NaN)
//   keyless-row-lse      a packed sequence with rows and no keys (seqs=Q:0, Q > 0): its rows' O is 0, and a kernel
//                        whose merge of empty partial results divides 0 by 0 gives LSE = +inf for them, not -inf

// Whether the case injects into one of `tensors` a value that `test` accepts.
bool injects(const Case& c, std::string_view tensors, bool (*test)(double)) {
  return std::any_of(c.inject.begin(), c.inject.end(), [&](const Injection& x) {
    return tensors.find(x.tensor) != std::string_view::npos && test(x.value);
  });
}
bool nonfinite(double x) { return !std::isfinite(x); }
bool huge_finite(double x) { return std::isfinite(x) && std::fabs(x) >= 0x1p64; }

struct DeviationClass {
  std::string_view name;
  bool (*applies)(const Case&);
};
constexpr DeviationClass kDeviationClasses[] = {
    {"masked-nonfinite-v", [](const Case& c) { return c.mask != Mask::kNone && injects(c, "v", nonfinite); }},
    {"nonpositive-scale", [](const Case& c) { return c.scale.has_value() && *c.scale <= 0.0f; }},
    {"subnormal-v", [](const Case& c) { return c.v.kind == DistKind::kSubnormal; }},
    {"nonfinite-qk", [](const Case& c) { return injects(c, "qk", nonfinite); }},
    {"masked-overflow-qk", [](const Case& c) { return c.mask != Mask::kNone && injects(c, "qk", huge_finite); }},
    {"huge-qk", [](const Case& c) {
       return c.q.kind == DistKind::kNearMax || c.k.kind == DistKind::kNearMax || injects(c, "qk", huge_finite);
     }},
    {"spare-key-slots",
     [](const Case& c) { return std::any_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.extra > 0; }); }},
    {"keyless-row-lse", [](const Case& c) {
       return std::any_of(c.seqs.begin(), c.seqs.end(), [](const Sequence& s) { return s.q > 0 && s.k == 0; });
     }},
};

}  // namespace

bool in_deviation_class(std::string_view name, const Case& c) {
  const auto* found = std::find_if(std::begin(kDeviationClasses), std::end(kDeviationClasses),
                                   [&](const DeviationClass& d) { return d.name == name; });
  return found != std::end(kDeviationClasses) && found->applies(c);
}

namespace {

// The classes FLASHCHECK_KNOWN_DEVIATIONS lists, read once.
const std::vector<const DeviationClass*>& active_deviations() {
  static const std::vector<const DeviationClass*> active = [] {
    std::vector<const DeviationClass*> out;
    const char* value = std::getenv("FLASHCHECK_KNOWN_DEVIATIONS");
    std::stringstream list(value != nullptr ? value : "");
    for (std::string item; std::getline(list, item, ',');) {
      const auto* found = std::find_if(std::begin(kDeviationClasses), std::end(kDeviationClasses),
                                       [&](const DeviationClass& d) { return d.name == item; });
      if (found != std::end(kDeviationClasses)) {
        out.push_back(found);
      } else if (!item.empty()) {
        std::cerr << "flashcheck: FLASHCHECK_KNOWN_DEVIATIONS: unknown class '" << item << "' ignored\n";
      }
    }
    return out;
  }();
  return active;
}

bool known_deviation(const Case& c) {
  const auto& active = active_deviations();
  return std::any_of(active.begin(), active.end(), [&](const DeviationClass* d) { return d->applies(c); });
}

bool lists_deviation(std::string_view name) {
  const auto& active = active_deviations();
  return std::any_of(active.begin(), active.end(), [&](const DeviationClass* d) { return d->name == name; });
}

}  // namespace

const std::string& last_case_line() { return g_last_case_line; }

void note_case(const Case& c) {
  // The line names the property that ran and the subject under test, so that it replays the relation against it.
  Case shown = c;
  if (g_current_property != nullptr) shown.property = g_current_property;
  if (g_subject != nullptr && shown.subject.empty()) shown.subject = g_subject->name();
  std::string line = format_case(shown);
  if (g_shrink_start && std::chrono::duration<double>(ShrinkClock::now() - *g_shrink_start).count() > shrink_seconds() &&
      std::find(g_smallest_lines.begin(), g_smallest_lines.end(), line) == g_smallest_lines.end()) {
    RC_DISCARD("shrinking is past FLASHCHECK_SHRINK_SECONDS");
  }
  g_run_lines.push_back(line);
  g_last_case_line = std::move(line);
  RC_LOG() << "case line: " << g_last_case_line << "\n";
  if (known_deviation(c)) {
    ++coverage().words["known-peer-deviation=discarded"];
    discard("a known peer deviation (FLASHCHECK_KNOWN_DEVIATIONS)");
  }
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
  if (const WindowReach reach = window_reach(c); !reach.tiles.empty()) cov.reach[reach.tiles].add(reach);
}

void note_coverage(const std::string& word) { ++coverage().words[word]; }

void note_informative(const Verdict& verdict) {
  const std::string dtype = verdict.case_line.substr(0, verdict.case_line.find(' '));
  auto& [informative, claims] = coverage().informative[dtype];
  informative += verdict.o_informative;
  claims += verdict.o_claims;
  RC_CLASSIFY(verdict.o_informative < verdict.o_claims, "uninformative-O");
}

void note_binomial(double deviation_over_slack) {
  ++coverage().binomial_tests;
  coverage().binomial_worst = std::max(coverage().binomial_worst, deviation_over_slack);
}

}  // namespace flashcheck::properties
