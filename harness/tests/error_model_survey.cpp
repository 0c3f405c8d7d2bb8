// error_model_survey: generated cases per dtype through the host model (or the GPU kernel when built with
// FLASHCHECK_SURVEY_GPU=1), judged against the oracle: distributions of the worst ratio and the RMS ratio
// per dtype on standard and adversarial inputs; on the host model also every ModelDefect, which must be
// caught, with the check that caught it. FLASHCHECK_SURVEY_CASES (build, or environment) sets the count;
// FLASHCHECK_SURVEY_CSV=<file> writes one line per case. It judges through oracle_bridge.h like the verdict.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "flashcheck/case.h"
#include "flashcheck/error_model.h"
#include "flashcheck/host_model.h"
#include "flashcheck/inputs.h"
#include "flashcheck/oracle.h"
#include "flashcheck/oracle_bridge.h"
#include "flashcheck/runner.h"

#ifndef FLASHCHECK_SURVEY_CASES
#error "FLASHCHECK_SURVEY_CASES must be defined by the build (cases per dtype)"
#endif
#ifndef FLASHCHECK_SURVEY_GPU
#define FLASHCHECK_SURVEY_GPU 0
#endif
#ifndef FLASHCHECK_SURVEY_VARIANT
#error "FLASHCHECK_SURVEY_VARIANT must be defined by the build (Quick, Nightly or Gpu)"
#endif

namespace flashcheck {
namespace {

using oracle::RmsCheck;
using oracle::RowBound;
using oracle::RowRef;
using oracle::RowResult;

// The survey's cases come from this generator (splitmix64; below() scales a 53-bit uniform): the same
// sequence on every machine, so a case is named by its seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t bound) {
    const double uniform = static_cast<double>(next() >> 11) * 0x1p-53;  // [0, 1)
    return static_cast<int64_t>(uniform * static_cast<double>(bound));
  }

 private:
  uint64_t state_;
};

constexpr bool kOnGpu = FLASHCHECK_SURVEY_GPU != 0;

int64_t cases_per_dtype() {
  const char* env = std::getenv("FLASHCHECK_SURVEY_CASES");
  const int64_t n = env != nullptr ? std::strtoll(env, nullptr, 10) : 0;
  return n > 0 ? n : FLASHCHECK_SURVEY_CASES;
}
const int64_t kCasesPerDtype = cases_per_dtype();
// Rows judged per case: all when the case has at most this many, otherwise sample_rows' structural rows
// plus kRandomRows: the verdict's policy with a smaller budget, so 10,000 cases take minutes.
constexpr int64_t kFullCheckRows = 256;
constexpr int64_t kRandomRows = 24;
// Cases per (dtype, defect) in the degraded-model demonstration, on the inputs that exercise the defect.
const int64_t kDefectCases = std::max<int64_t>(10, kCasesPerDtype / 50);

// ---- case generation (deterministic in the survey seed)

template <typename T>
T pick(Rng* rng, std::initializer_list<T> choices) {
  return *(choices.begin() + rng->below(static_cast<int64_t>(choices.size())));
}

ValueSpec spec(DistKind kind, double a = 0.0, double b = 1.0) { return ValueSpec{kind, a, b}; }

void random_shape(Rng* rng, Case* c) {
  c->batch = rng->below(8) == 0 ? 2 : 1;
  const int heads = static_cast<int>(rng->below(5));  // (hq, hkv): (1,1) twice as often as (2,1), (2,2), (4,2)
  c->heads_q = heads <= 1 ? 1 : heads == 4 ? 4 : 2;
  c->heads_kv = heads == 2 ? 1 : heads == 4 ? 2 : c->heads_q;
  c->seqlen_q = rng->below(2) == 0 ? pick<int64_t>(rng, {1, 2, 3, 7, 16, 33, 63, 64, 65}) : 1 + rng->below(64);
  c->seqlen_k = rng->below(2) == 0 ? pick<int64_t>(rng, {1, 2, 5, 31, 63, 64, 65, 127, 128, 129, 200, 256, 300})
                                   : 1 + rng->below(300);
  if (rng->below(50) == 0) c->seqlen_k = 0;
  c->head_dim = pick<int64_t>(rng, {1, 2, 3, 5, 8, 16, 31, 32, 40, 64, 64, 80, 96, 128, 128, 192, 256});
  c->mask = pick(rng, {Mask::kNone, Mask::kCausalBottomRight, Mask::kCausalTopLeft});
  c->layout = rng->below(3) == 0 ? Layout::kBSHD : Layout::kBHSD;
  c->pad = rng->below(5) == 0 ? 1 + rng->below(8) : 0;
  if (rng->below(7) == 0) c->scale = pick<float>(rng, {0.02f, 0.5f, 1.0f, 2.0f, -0.3f});
}

void standard_values(Rng* rng, Case* c) {
  const auto draw = [&]() {
    return rng->below(2) == 0 ? spec(DistKind::kNormal, 0, 1) : spec(DistKind::kUniform, -1, 1);
  };
  c->q = draw();
  c->k = draw();
  c->v = draw();
}

// The adversarial families of docs/error-model.md ("Survey").
enum class Family {
  kLargeLogits,
  kCommonLogits,
  kRamp,
  kDominantKey,
  kDominantValue,
  kEqualLogits,
  kNearMax,
  kSubnormal,
  kNegZero,
  kInjected,
  kCount
};

const char* family_name(Family f) {
  switch (f) {
    case Family::kLargeLogits: return "large-logits";
    case Family::kCommonLogits: return "common-logits";
    case Family::kRamp: return "ramp";
    case Family::kDominantKey: return "dominant-key";
    case Family::kDominantValue: return "dominant-value";
    case Family::kEqualLogits: return "equal-logits";
    case Family::kNearMax: return "near-max";
    case Family::kSubnormal: return "subnormal";
    case Family::kNegZero: return "negzero";
    case Family::kInjected: return "injected";
    case Family::kCount: break;
  }
  return "?";
}

void adversarial_values(Rng* rng, Family family, Case* c) {
  standard_values(rng, c);
  switch (family) {
    case Family::kLargeLogits: {
      const double sigma = pick<double>(rng, {3, 8, 20});
      c->q = spec(DistKind::kNormal, 0, sigma);
      c->k = spec(DistKind::kNormal, 0, sigma);
      break;
    }
    case Family::kCommonLogits: {  // every score near one large value (|m| up to ~2000), V trending along keys
      const double level = pick<double>(rng, {3, 6, 12});
      c->q = spec(DistKind::kNormal, level, 0.05);
      c->k = spec(DistKind::kNormal, level, 0.05);
      c->v = spec(DistKind::kRamp, -1, 1);
      break;
    }
    case Family::kRamp: {
      const double span = pick<double>(rng, {1, 8, 30});
      c->q = spec(DistKind::kUniform, 0.5, 1.0);
      c->k = spec(DistKind::kRamp, -span, span);
      break;
    }
    case Family::kDominantKey: c->k = spec(DistKind::kDominant, 1, pick<double>(rng, {5, 20, 100})); break;
    case Family::kDominantValue: c->v = spec(DistKind::kDominant, 1, 1000); break;
    case Family::kEqualLogits:
      if (rng->below(2) == 0) {
        c->k = spec(DistKind::kConst, pick<double>(rng, {0.5, -2, 3}));
      } else {
        c->q = spec(DistKind::kConst, 0);
      }
      break;
    case Family::kNearMax:
      if (rng->below(2) == 0) {
        c->v = spec(DistKind::kNearMax, pick<double>(rng, {0.01, 0.5, 1.0}));
      } else {
        c->q = spec(DistKind::kNearMax, pick<double>(rng, {1e-3, 0.5}));
      }
      break;
    case Family::kSubnormal: {
      const int which = static_cast<int>(rng->below(3));
      (which == 0 ? c->q : which == 1 ? c->k : c->v) = spec(DistKind::kSubnormal);
      break;
    }
    case Family::kNegZero: (rng->below(2) == 0 ? c->v : c->q) = spec(DistKind::kNegZero); break;
    case Family::kInjected: {
      const int64_t count = 1 + rng->below(3);
      for (int64_t t = 0; t < count && c->seqlen_k > 0; ++t) {
        Injection inj;
        inj.tensor = pick(rng, {'q', 'k', 'v'});
        inj.b = rng->below(c->batch);
        inj.h = rng->below(inj.tensor == 'q' ? c->heads_q : c->heads_kv);
        inj.s = rng->below(inj.tensor == 'q' ? c->seqlen_q : c->seqlen_k);
        inj.d = rng->below(c->head_dim);
        inj.value = pick<double>(rng, {std::nan(""), HUGE_VAL, -HUGE_VAL, -0.0, 1e4, -1e4});
        c->inject.push_back(inj);
      }
      break;
    }
    case Family::kCount: break;
  }
}

Case make_case(DType dtype, uint64_t seed, bool adversarial, Family* family) {
  Rng rng(seed);
  Case c;
  c.dtype = dtype;
  c.seed = seed;
  random_shape(&rng, &c);
  *family = static_cast<Family>(rng.below(static_cast<int64_t>(Family::kCount)));
  if (adversarial) {
    adversarial_values(&rng, *family, &c);
  } else {
    standard_values(&rng, &c);
  }
  return c;
}

// ---- judging one run

struct CaseResult {
  explicit CaseResult(DType dtype) : rms(to_oracle(dtype)) {}
  double o = 0, lse = 0, m = 0, l = 0;
  RmsCheck rms;
  int64_t rows = 0, unconstrained_rows = 0;
  ComputePath path = ComputePath::kGeneralFp32;
  double worst() const { return std::max({o, lse, m, l}); }
  const char* failed_check() const {
    if (!(o <= 1)) return "O bound";
    if (!(lse <= 1)) return "LSE bound";
    if (!(m <= 1)) return "m bound";
    if (!(l <= 1)) return "l bound";
    if (!(rms.ratio() <= 1)) return "RMS check";
    return nullptr;
  }
};

double worse(double current, double ratio) { return std::isnan(ratio) ? HUGE_VAL : std::max(current, ratio); }

CaseResult judge_run(const Case& c, const HostInputs& in, const RunOutputs& out) {
  CaseResult r(c.dtype);
  r.path = out.config.path;
  const oracle::Problem problem = in.problem();
  const int64_t dim = problem.head_dim;
  const bool stats = !out.row_m.empty();
  for (const RowRef& row :
       oracle::sample_rows(problem, out.config.block_m, out.config.block_n, c.seed, kFullCheckRows, kRandomRows)) {
    const int64_t flat = (row.b * problem.heads_q + row.h) * problem.seqlen_q + row.i;
    const RowResult exact = oracle::compute_row(problem, row, oracle::Tier::kFast);
    const RowBound bound = oracle_bound(problem, row, exact, in.params, out.config);
    ++r.rows;
    r.unconstrained_rows += bound.unconstrained ? 1 : 0;
    const double* got = out.o.data() + flat * dim;
    for (int64_t k = 0; k < dim; ++k) {
      const size_t kk = static_cast<size_t>(k);
      r.o = worse(r.o, oracle::error_ratio(got[k], exact.o[kk], bound.o[kk], bound.unconstrained));
    }
    const double got_lse = out.lse[static_cast<size_t>(flat)];
    r.lse = worse(r.lse, oracle::error_ratio(got_lse, exact.lse, bound.lse, bound.unconstrained));
    if (stats) {
      const double m = out.row_m[static_cast<size_t>(flat)], l = out.row_l[static_cast<size_t>(flat)];
      r.m = worse(r.m, oracle::m_error_ratio(exact, bound, m));
      r.l = worse(r.l, oracle::l_error_ratio(exact, bound, m, l));
    }
    if (!bound.unconstrained && exact.l > 0) {
      const std::vector<double> reference = oracle_reference(problem, row, in.params, out.config, &exact);
      for (int64_t k = 0; k < dim; ++k) {
        const size_t kk = static_cast<size_t>(k);
        r.rms.add(got[k], reference[kk], exact.o[kk], exact.abs_pv[kk], exact.dev_pv_score_sq[kk]);
      }
    }
  }
  return r;
}

// ---- distributions

struct Distribution {
  std::vector<double> values;
  double max = 0;
  std::string max_case;
  void add(double v, const std::string& line) {
    values.push_back(v);
    if (v > max || values.size() == 1) {
      max = v;
      max_case = line;
    }
  }
  double quantile(double q) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const size_t at = std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())));
    return values[at];
  }
  std::string summary() {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "n=%-6zu p50 %-9.3g p90 %-9.3g p99 %-9.3g p99.9 %-9.3g max %-9.3g", values.size(),
                  quantile(0.5), quantile(0.9), quantile(0.99), quantile(0.999), max);
    return buf;
  }
};

FILE* csv_file() {
  static FILE* file = [] {
    const char* path = std::getenv("FLASHCHECK_SURVEY_CSV");
    FILE* f = path != nullptr ? std::fopen(path, "a") : nullptr;
    if (f != nullptr) {
      std::fprintf(f,
                   "dtype,set,path,worst,o,lse,m,l,rms_ratio,rms_kernel,rms_reference,rms_exact,elements,rows,case\n");
    }
    return f;
  }();
  return file;
}

void write_csv(const char* set, const Case& c, const CaseResult& r) {
  FILE* f = csv_file();
  if (f == nullptr) return;
  std::fprintf(f, "%s,%s,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%lld,%lld,\"%s\"\n", to_string(c.dtype), set,
               to_string(r.path), r.worst(), r.o, r.lse, r.m, r.l, r.rms.ratio(), r.rms.rms_kernel(),
               r.rms.rms_reference(), r.rms.rms_exact(), static_cast<long long>(r.rms.count()),
               static_cast<long long>(r.rows), format_case(c).c_str());
}

// The host model (with `defect`), or the GPU kernel (instrumented for m and l) in the GPU build.
RunOutputs run_model(const HostInputs& in, ModelDefect defect) {
  RunOptions options;
  options.instrument = true;
  options.model.defect = defect;
  return run_case(in, kOnGpu ? Backend::kGpu : Backend::kHostModel, options);
}

void survey_healthy(DType dtype) {
  if (kOnGpu && !device_available()) GTEST_SKIP() << "no CUDA device";
  std::map<std::string, Distribution> worst, rms;
  int64_t over = 0, rms_over = 0, unconstrained_rows = 0, rows = 0;
  const uint64_t base_seed = 0x5eed0000ull + static_cast<uint64_t>(dtype) * 0x1000000ull;
  for (int64_t n = 0; n < kCasesPerDtype; ++n) {
    const bool adversarial = n % 2 == 1;
    Family family;
    const Case c = make_case(dtype, base_seed + static_cast<uint64_t>(n), adversarial, &family);
    HostInputs in;
    const Status made = make_inputs(c, &in);
    ASSERT_TRUE(made.ok()) << made.message() << "\n" << format_case(c);
    const RunOutputs out = run_model(in, ModelDefect::kNone);
    ASSERT_TRUE(out.status.ok()) << out.status.message() << "\n" << format_case(c);
    EXPECT_TRUE(out.unwritten_o == 0 && out.unwritten_lse == 0 && out.canaries_intact && out.inputs_unchanged)
        << "runner guards: " << format_case(c);
    const CaseResult r = judge_run(c, in, out);
    const std::string set = adversarial ? std::string("adversarial") : std::string("standard");
    const std::string line = format_case(c);
    for (const std::string& key : {set, set + "/" + to_string(r.path)}) {
      worst[key].add(r.worst(), line);
      if (r.rms.count() > 0) rms[key].add(r.rms.ratio(), line);
    }
    if (adversarial) worst[std::string("family/") + family_name(family)].add(r.worst(), line);
    write_csv(set.c_str(), c, r);
    rows += r.rows;
    unconstrained_rows += r.unconstrained_rows;
    if (!(r.worst() <= 1)) {
      ++over;
      ADD_FAILURE() << to_string(kOnGpu ? Backend::kGpu : Backend::kHostModel) << " exceeds the bound ("
                    << r.failed_check() << ", ratio " << r.worst() << "): " << line;
    } else if (!(r.rms.ratio() <= 1)) {
      ++rms_over;
      ADD_FAILURE() << to_string(kOnGpu ? Backend::kGpu : Backend::kHostModel) << " fails the RMS check (ratio "
                    << r.rms.ratio() << "): " << line;
    }
  }
  std::printf(
      "\n[%s, %s] %lld cases, %lld rows judged (%lld outside the domain), %lld over the bound, %lld over the RMS "
      "check\n",
      to_string(dtype), to_string(kOnGpu ? Backend::kGpu : Backend::kHostModel), static_cast<long long>(kCasesPerDtype),
      static_cast<long long>(rows), static_cast<long long>(unconstrained_rows), static_cast<long long>(over),
      static_cast<long long>(rms_over));
  std::printf("  worst ratio per case (max over O, LSE, m, l):\n");
  for (auto& [key, dist] : worst) std::printf("    %-28s %s\n", key.c_str(), dist.summary().c_str());
  std::printf("  RMS ratio per case (kernel RMS error / (%.0f x reference's + floor/sqrt(N))):\n", oracle::kRmsFactor);
  for (auto& [key, dist] : rms) std::printf("    %-28s %s\n", key.c_str(), dist.summary().c_str());
  for (auto& [key, dist] : worst) {
    if (key == "standard" || key == "adversarial") std::printf("  max %s: %s\n", key.c_str(), dist.max_case.c_str());
  }
}

#if !FLASHCHECK_SURVEY_GPU
// The inputs on which a defect must show (docs/error-model.md, "Degraded models").
Case defect_case(DType dtype, ModelDefect defect, uint64_t seed) {
  Rng rng(seed);
  Case c;
  c.dtype = dtype;
  c.seed = seed;
  c.seqlen_q = 1 + rng.below(64);
  c.head_dim = pick<int64_t>(&rng, {32, 64, 128});
  c.mask = Mask::kNone;
  standard_values(&rng, &c);
  switch (defect) {
    case ModelDefect::kMissingRescale:  // several K tiles and logits rising to the last one
      c.seqlen_k = 129 + rng.below(300);
      c.q = spec(DistKind::kUniform, 0.5, 1.0);
      c.k = spec(DistKind::kRamp, -8, 8);
      break;
    case ModelDefect::kOAccumInDtype:
      // Rounding the accumulator after each of T tiles adds about sqrt(T/3) roundings of |O| (later tiles
      // weigh more) to the one rounding of the output: twice the reference's RMS error from T ~ 40 on.
      c.seqlen_q = 8 + rng.below(8);
      c.seqlen_k = 6144 + rng.below(2048);
      c.head_dim = pick<int64_t>(&rng, {32, 64});
      break;
    default: c.seqlen_k = 16 + rng.below(500); break;
  }
  return c;
}

void survey_defects(DType dtype) {
  for (const ModelDefect defect : {ModelDefect::kPOneFormatCoarser, ModelDefect::kOAccumInDtype,
                                   ModelDefect::kMissingRescale, ModelDefect::kLseBase2}) {
    if (defect == ModelDefect::kOAccumInDtype && dtype == DType::kF32) {
      // The accumulator is fp32 already: rounding it "to the input dtype" changes nothing, so nothing can
      // catch it. Verified here: the defective model is bit-identical to the healthy one.
      Family family;
      const Case c = make_case(dtype, 99, false, &family);
      HostInputs in;
      ASSERT_TRUE(make_inputs(c, &in).ok());
      EXPECT_EQ(run_model(in, defect).o, run_model(in, ModelDefect::kNone).o);
      std::printf("[%s] %-22s not applicable: an fp32 accumulator rounded to fp32 is unchanged\n", to_string(dtype),
                  to_string(defect));
      continue;
    }
    std::map<std::string, int64_t> by_check;
    int64_t caught = 0, random_caught = 0;
    for (int64_t n = 0; n < kDefectCases; ++n) {
      const Case c = defect_case(dtype, defect,
                                 0xdefec7ull * 131 + static_cast<uint64_t>(n) * 7919 + static_cast<uint64_t>(defect));
      HostInputs in;
      ASSERT_TRUE(make_inputs(c, &in).ok()) << format_case(c);
      const RunOutputs out = run_model(in, defect);
      ASSERT_TRUE(out.status.ok()) << out.status.message();
      const CaseResult r = judge_run(c, in, out);
      const char* check = r.failed_check();
      write_csv(to_string(defect), c, r);
      if (check != nullptr) {
        ++caught;
        ++by_check[check];
      } else {
        ADD_FAILURE() << "defect " << to_string(defect) << " not caught (worst ratio " << r.worst() << ", RMS ratio "
                      << r.rms.ratio() << "): " << format_case(c);
      }
      // The same defect on the survey's own random (standard) cases: how often it shows there.
      Family family;
      const Case rc = make_case(dtype, 0xabcd00ull + static_cast<uint64_t>(n), false, &family);
      HostInputs rin;
      ASSERT_TRUE(make_inputs(rc, &rin).ok());
      random_caught += judge_run(rc, rin, run_model(rin, defect)).failed_check() != nullptr ? 1 : 0;
    }
    std::string checks;
    for (const auto& [name, count] : by_check) checks += " " + name + ": " + std::to_string(count);
    std::printf(
        "[%s] %-22s caught in %lld of %lld targeted cases (first failing check:%s); in %lld of %lld random cases\n",
        to_string(dtype), to_string(defect), static_cast<long long>(caught), static_cast<long long>(kDefectCases),
        checks.c_str(), static_cast<long long>(random_caught), static_cast<long long>(kDefectCases));
  }
}

#endif  // !FLASHCHECK_SURVEY_GPU

// Suite names carry the variant (ErrorModelSurveyQuick_F16, ErrorModelSurveyNightly_F16, ...) so the three
// executables' tests stay distinct in CTest.
#define FLASHCHECK_CAT3_(a, b, c) a##b##c
#define FLASHCHECK_CAT3(a, b, c) FLASHCHECK_CAT3_(a, b, c)
#define SURVEY_SUITE(dtype) FLASHCHECK_CAT3(ErrorModelSurvey, FLASHCHECK_SURVEY_VARIANT, dtype)

TEST(SURVEY_SUITE(_F32), HealthyWithinBound) { survey_healthy(DType::kF32); }
TEST(SURVEY_SUITE(_F16), HealthyWithinBound) { survey_healthy(DType::kF16); }
TEST(SURVEY_SUITE(_BF16), HealthyWithinBound) { survey_healthy(DType::kBF16); }
#if !FLASHCHECK_SURVEY_GPU
TEST(SURVEY_SUITE(_F32), DegradedModelsCaught) { survey_defects(DType::kF32); }
TEST(SURVEY_SUITE(_F16), DegradedModelsCaught) { survey_defects(DType::kF16); }
TEST(SURVEY_SUITE(_BF16), DegradedModelsCaught) { survey_defects(DType::kBF16); }
#endif

}  // namespace
}  // namespace flashcheck
