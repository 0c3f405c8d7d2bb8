// register_suite and check_property (suite.h): the tests of a property binary, from property_table().
#include "suite.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "flashcheck/case.h"
#include "replay.h"
#include "tier.h"

namespace flashcheck::properties {
namespace {

// Case lines that once falsified a property, replayed through it in every tier that has the property.
struct KnownCase {
  const char* test;      // <Suite>.<test>
  const char* property;  // a row of property_table()
  const char* line;
};
constexpr KnownCase kKnownCases[] = {
    // q k overflows fp32 and the zero scale makes the score 0 * inf = NaN: outside the domain, in the traces too.
    {"OnlineSoftmaxInvariantsOnANanScore", "OnlineSoftmaxInvariants",
     "bf16 b=1 hq=1 hkv=1 sq=12 sk=1 d=1 mask=causal-tl scale=0 q=normal(0,1) k=normal(0,1) v=normal(0,1) "
     "inject=k[0,0,0,0]:3.3895313892515355e+38 seed=0"},
    // The same NaN beside a finite score: m is finite (the max skips the NaN), l is NaN; the oracle excuses the row.
    {"OnlineSoftmaxInvariantsOnANanBesideAFiniteScore", "OnlineSoftmaxInvariants",
     "f32 b=1 hq=1 hkv=1 sq=1 sk=2 d=1 mask=causal-br scale=0 q=normal(0,1) k=normal(0,1) v=normal(1,1) "
     "inject=q[0,0,0,0]:3.4028234663852886e+38 seed=0"},
    // A shuffled order puts the dominant key in another tile: the bound of the shuffled run is 32 times the original
    // order's at [b=0, h=1, i=39] col 55 (2.0e-6 against 6.2e-8), so each run is held to its own (falsified at 1.68
    // of twice the original's, each run within its own bound).
    {"PermutingKeysUnderADominantKey", "PermutingKeysLeavesOutputUnchanged",
     "f32 b=1 hq=2 hkv=2 sq=41 sk=65 d=73 mask=none q=normal(0,1) k=dominant(0.5,100) v=normal(0,1) "
     "seed=2266302440"},
    // Subnormal V against dO of normal size: dP and D of 10^-37 whose every product is subnormal; the GPU's fp32
    // backward flushes them and returns dQ and dK of that size as 0, within the bounds' underflow terms (its dQ stood
    // at 6.6 times the same-precision reference before the reference's noise carried the flushed products).
    {"KeyGradientsSumToZeroUnderSubnormalValues", "KeyGradientsSumToZero",
     "bf16 b=2 hq=20 hkv=4 sq=31 sk=181 d=131 mask=none layout=bshd pad=4 scale=2 q=normal(0,1) k=normal(0,1) "
     "v=subnormal() grad=1 dout=normal(0,1) seed=3381724814"},
    // A sink of +inf takes all the weight: l is the sink's own weight, which carries the fp8 path's offset like every
    // other weight, so the reported l (the offset taken back) is 1.
    {"Fp8SinkOfInfinityTakesAllTheWeight", "Fp8AgreesWithOracle",
     "f8e4m3 b=1 hq=1 hkv=1 sq=2 sk=0 d=1 mask=causal-br q=normal(0,1) k=dominant(0.5,30) v=uniform(-1,1) "
     "sink=const(inf) descale=const(0.015625) seed=0"},
    // O without descales underflows to -0 in bf16 where 4 O is a bf16 subnormal: exact scaling holds between normals.
    {"Fp8DescaledOutputBelowBf16Normals", "Fp8PowerOfTwoDescalesScaleExactly",
     "f8e4m3 b=1 hq=2 hkv=1 sq=127 sk=387 d=1 mask=window-br window=257,0 q=normal(0,5) k=normal(0,1) "
     "v=normal(0,0.02) descale=const(4) seed=0"},
    // A normal O without descales (-1.87e-37) whose exact product by 1/16 is a subnormal (-1.1709e-38) that the
    // kernel's bf16 conversion rounds up to the least normal, -2^-126: no exact scaling below the normals.
    {"Fp8DescaledOutputRoundsToTheLeastNormal", "Fp8PowerOfTwoDescalesScaleExactly",
     "f8e4m3 b=1 hq=1 hkv=1 sq=254 sk=106 d=56 mask=causal-tl scale=2 q=const(0.5) k=const(-0.5) v=normal(0,1) "
     "sink=dominant(1,200) descale=const(0.0625) seed=240698121"},
    // Scores near -10^7 (descales up to 100 each) carry errors of thousands through the fp8 path's 14-bit sums: the
    // weights are arbitrary in the kernel and the reference alike, and the RMS check leaves such rows out (their LSE
    // bound is not below its trivial one); O stays within its bound.
    {"Fp8ScoresBeyondTheWeightsScale", "Fp8AgreesWithOracle",
     "f8e4m3 b=1 hq=1 hkv=1 sq=30 sk=578 d=168 mask=window-br window=327,0 q=uniform(1,2) k=uniform(-96,-60) "
     "v=normal(0,1) descale=uniform(10,100) seed=0"},
};

// Prints a failing case the moment it fails, before shrinking, and bounds the shrinking's time (tier.h).
class FailureListener : public rc::detail::TestListener {
 public:
  explicit FailureListener(std::string id) : id_(std::move(id)) {}
  void onTestCaseFinished(const rc::detail::CaseDescription& description) override {
    if (reported_ || description.result.type != rc::detail::CaseResult::Type::Failure) {
      case_run_finished(false);
      return;
    }
    reported_ = true;
    std::printf("[ FALSIFIED] %s: case line: %s\n[ FALSIFIED] it replays as it is: flashcheck-repro \"%s\"; "
                "shrinking for at most %.0f s (FLASHCHECK_SHRINK_SECONDS)\n",
                id_.c_str(), last_case_line().c_str(), last_case_line().c_str(), shrink_seconds());
    std::fflush(stdout);
    begin_shrinking();
    case_run_finished(true);
  }
  void onShrinkTried(const rc::detail::CaseDescription&, bool accepted) override { case_run_finished(accepted); }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override { end_shrinking(); }

 private:
  std::string id_;
  bool reported_ = false;
};

class PropertyTest : public ::testing::Test {
 public:
  PropertyTest(std::string suite, const PropertyInfo& property) : suite_(std::move(suite)), property_(property) {}
  void TestBody() override {
    if (const char* error = tier_error()) FAIL() << error;
    if (const char* reason = skip_reason()) GTEST_SKIP() << reason;
    if (const char* reason = property_skip_reason(property_.name)) GTEST_SKIP() << reason;
    const auto& configured = rc::detail::configuration().testParams;
    ChunkParams params;
    params.cases = configured.maxSuccess;
    if (const int cap = property_case_cap(property_.name); cap > 0) params.cases = std::min(cap, params.cases);
    params.seed = configured.seed;
    std::string failure;
    if (check_property(suite_, property_, params, &failure, /*print_success=*/true) < 0) FAIL() << failure;
  }

 private:
  std::string suite_;
  const PropertyInfo& property_;
};

class KnownCaseTest : public ::testing::Test {
 public:
  explicit KnownCaseTest(const KnownCase& known) : known_(known) {}
  void TestBody() override {
    if (const char* error = tier_error()) FAIL() << error;
    if (const char* reason = skip_reason()) GTEST_SKIP() << reason;
    if (const char* reason = property_skip_reason(known_.property)) GTEST_SKIP() << reason;
    Case c;
    const Status parsed = parse_case(known_.line, &c);
    ASSERT_TRUE(parsed.ok()) << parsed.message() << ": " << known_.line;
    const PropertyInfo* property = find_property(known_.property);
    ASSERT_NE(property, nullptr) << known_.property;
    const ReplayResult result = replay_property(*property, c);
    // A known case is flashcheck's own finding: on a subject whose capabilities leave it out it does not apply.
    if (active_subject() != nullptr &&
        (result.outcome == Outcome::kRejected || result.outcome == Outcome::kUnsupported)) {
      GTEST_SKIP() << "flashcheck-skip: the case lies outside the subject's capabilities (" << result.message << ")";
    }
    if (result.outcome != Outcome::kPass) FAIL() << to_string(result.outcome) << ": " << result.message;
  }

 private:
  const KnownCase& known_;
};

class BudgetedTest : public ::testing::Test {
 public:
  explicit BudgetedTest(std::string suite) : suite_(std::move(suite)) {}
  void TestBody() override {
    if (const char* error = tier_error()) FAIL() << error;
    if (const char* reason = skip_reason()) GTEST_SKIP() << reason;
    const BudgetResult result = run_budgeted(suite_, [](const char* name) { return property_skip_reason(name); });
    if (!result.ran) GTEST_SKIP() << result.message;
    if (result.failed) FAIL() << result.message;
  }

 private:
  std::string suite_;
};

}  // namespace

int64_t check_property(const std::string& suite, const PropertyInfo& property, const ChunkParams& chunk,
                       std::string* failure, bool print_success) {
  rc::detail::TestMetadata metadata;
  metadata.id = suite + "/" + property.name;
  metadata.description = property.name;
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = chunk.cases;
  params.seed = chunk.seed;
  FailureListener listener(metadata.id);
  const CurrentProperty current(property.name);
  const auto result = rc::detail::checkTestable([&property] { property.body(); }, metadata, params, listener);
  if (result.template is<rc::detail::SuccessResult>()) {
    const auto& success = result.template get<rc::detail::SuccessResult>();
    if (print_success && !success.distribution.empty()) {
      rc::detail::printResultMessage(result, std::cout);
      std::cout << std::endl;
    }
    return success.numSuccess;
  }
  std::ostringstream message;
  rc::detail::printResultMessage(result, message);
  if (result.template is<rc::detail::FailureResult>()) {
    // The reproduce string now, with the failure, rather than from RapidCheck's own listener at process exit.
    rc::detail::Configuration reproduce;
    reproduce.reproduce[metadata.id] = result.template get<rc::detail::FailureResult>().reproduce;
    std::string params_text = rc::detail::configToMinimalString(reproduce);
    params_text = params_text.substr(params_text.find("reproduce="));
    params_text = params_text.substr(0, params_text.find(' '));
    message << "\nTo reproduce the shrunk case in " << suite << "." << property.name << ", run it with:\nRC_PARAMS=\""
            << params_text << "\"\n";
    std::printf("[ FALSIFIED] %s: shrunk; RC_PARAMS=\"%s\" reproduces it in %s.%s\n", metadata.id.c_str(),
                params_text.c_str(), suite.c_str(), property.name);
    std::fflush(stdout);
  }
  *failure = message.str();
  return -1;
}

bool register_suite(const char* suite, bool production, bool instrumented) {
  const std::string suite_name = suite;
  const auto runs_here = [&](const PropertyInfo& p) {
    return p.binary == PropertyBinary::kProduction ? production : instrumented;
  };
  for (const PropertyInfo& property : property_table()) {
    if (!runs_here(property)) continue;
    register_property(suite_name, property.name,
                      [suite_name, &property](const ChunkParams& params, std::string* failure) {
                        return check_property(suite_name, property, params, failure);
                      });
    ::testing::RegisterTest(suite, property.name, nullptr, nullptr, __FILE__, __LINE__,
                            [suite_name, &property]() -> ::testing::Test* { return new PropertyTest(suite_name, property); });
  }
  for (const KnownCase& known : kKnownCases) {
    const PropertyInfo* property = find_property(known.property);
    if (property == nullptr || !runs_here(*property)) continue;
    ::testing::RegisterTest(suite, known.test, nullptr, nullptr, __FILE__, __LINE__,
                            [&known]() -> ::testing::Test* { return new KnownCaseTest(known); });
  }
  ::testing::RegisterTest(suite, "Budgeted", nullptr, nullptr, __FILE__, __LINE__,
                          [suite_name]() -> ::testing::Test* { return new BudgetedTest(suite_name); });
  return true;
}

}  // namespace flashcheck::properties
