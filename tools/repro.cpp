// flashcheck-repro: replays case lines (from the command line or a file, e.g. a fuzzer's finding) on the GPU
// kernel and/or the host model, judges them against the oracle and prints the verdict report plus the worst
// row's values beside the oracle's. Every case ends in one outcome (pass, fail, rejected, unsupported, outside
// the domain); the exit status is the most severe one (flashcheck/outcome.h, README "Exit codes").
#include <algorithm>
#include <new>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "flashcheck/admission.h"
#include "flashcheck/backward_check.h"
#include "flashcheck/budget.h"
#include "flashcheck/cli.h"
#include "flashcheck/device.h"
#include "flashcheck/device_inputs.h"
#include "flashcheck/host_model.h"
#include "flashcheck/loaded_subject.h"
#include "flashcheck/oracle_bridge.h"
#include "flashcheck/progress.h"
#include "flashcheck/outcome.h"
#include "flashcheck/verdict.h"
#if FLASHCHECK_REPRO_PROPERTIES
#include "properties.h"
#include "replay.h"
#include "tier.h"
#endif

namespace {

using namespace flashcheck;

constexpr int64_t kColumnsAroundWorst = 3;  // columns printed either side of the worst O element
constexpr int64_t kRmsRowColumns = 32;      // columns of the RMS check's heaviest row printed (the first ones)

struct Options {
  std::vector<Backend> backends;
  oracle::Tier tier = oracle::Tier::kFast;
  ModelDefect defect = ModelDefect::kNone;
  bool deterministic = false;  // grad=1 lines: the backward pass's deterministic mode
  JudgeOptions judge;
  std::string file;
  std::string line;  // the case line given on the command line (arguments joined by blanks)
  int64_t memory_cap = 0;  // host bytes a case may need (budget.h), else it is rejected
  // Generate the inputs on the device (device_inputs.h) for every dense case, not only those whose host inputs
  // exceed memory_cap.
  bool device_inputs = false;
  std::string subject_path;
  std::unique_ptr<LoadedSubject> subject;  // --subject: every case runs on it instead of the backends
  std::string property;                    // --property NAME: the relation every line reruns
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "flashcheck-repro: %s\nRun with --help for more information.\n", message.c_str());
  return kExitUsage;
}

// Parses argv into *options; returns -1 to go on, or an exit status.
int parse_args(int argc, char** argv, Options* options) {
  CLI::App app{"Replays case lines on the GPU kernel and/or the host model and judges them against the oracle.",
               "flashcheck-repro"};
  std::string backend, tier = "fast", defect = "none", rows;
  std::vector<std::string> words;
  std::vector<std::string> defect_names;
  for (const ModelDefectInfo& d : kModelDefects) defect_names.emplace_back(d.name);
  app.add_option("--backend", backend, "where to run: gpu, model or both (default: gpu if a CUDA device is present, else model)")
      ->check(CLI::IsMember({"gpu", "model", "both"}));
  app.add_option("--tier", tier, "oracle precision: gold (113-bit) or fast (double with error-free transformations)")
      ->check(CLI::IsMember({"gold", "fast"}))
      ->capture_default_str();
  app.add_option("--defect", defect, "host model only: run with this planted defect")
      ->check(CLI::IsMember(defect_names))
      ->capture_default_str();
  app.add_flag("--deterministic", options->deterministic,
               "grad=1 lines: run the backward pass in its deterministic mode (dQ without atomics)");
  app.add_option("--rows", rows, "all rows, or N: every row when there are at most N, else boundary rows plus N seeded "
                                 "random rows (default 4096 / 64)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "all") return {};
            if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 18) {
              return "'" + v + "' is not all or a count";
            }
            return {};
          },
          "all|N"));
  std::string memory_cap;
  app.add_option("--memory-cap", memory_cap, "reject a case whose estimated host memory is over SIZE (bytes, or with K, "
                                             "M, G, T; default: FLASHCHECK_MEMORY_CAP, else 16G or the available "
                                             "memory, the lower)")
      ->check(cli::kMemorySize);
  app.add_flag("--device-inputs", options->device_inputs,
               "generate Q, K, V on the device and judge sampled rows (dense cases, GPU backend; default: only for a "
               "dense case whose host inputs exceed the memory cap)");
  app.add_option("--subject", options->subject_path,
                 "run on the subject library at PATH (flashcheck/subject.h) instead of flashcheck's kernel or model");
  app.add_option("--file", options->file, "one case line per line; blank lines and lines starting with '#' are skipped");
  app.add_option("--property", options->property,
                 "rerun this property's relation on every case line (as a line's property=NAME does), instead of the "
                 "oracle check alone");
  app.add_option("case", words, "the case line (quoted, or its words as separate arguments), e.g. \"bf16 b=2 hq=8 "
                                "hkv=2 sq=129 sk=257 d=128 mask=causal-br q=normal(0,3) k=normal(0,3) v=uniform(-1,1) "
                                "seed=42\"");
  app.footer(cli::kExitCodesHelp);
  if (const int early = cli::parse(app, argc, argv); early >= 0) return early;

  for (const std::string& w : words) options->line += (options->line.empty() ? "" : " ") + w;
  if (options->file.empty() == options->line.empty()) return usage_error("give exactly one of a case line or --file F");
  options->tier = tier == "gold" ? oracle::Tier::kGold : oracle::Tier::kFast;
  parse_model_defect(defect, &options->defect);  // a name CLI11 has checked against kModelDefects
  if (rows == "all") {
    options->judge.full_check_limit = std::numeric_limits<int64_t>::max();
  } else if (!rows.empty()) {
    options->judge.full_check_limit = std::stoll(rows);
    options->judge.random_rows = options->judge.full_check_limit;
  }
  if (backend == "gpu") {
    options->backends = {Backend::kGpu};
  } else if (backend == "model") {
    options->backends = {Backend::kHostModel};
  } else if (backend == "both") {
    options->backends = {Backend::kGpu, Backend::kHostModel};
  }
  if (const Status s = memory_cap.empty() ? memory_cap_from_environment(&options->memory_cap)
                                          : parse_memory_size(memory_cap, &options->memory_cap);
      !s.ok()) {
    return usage_error(s.message());
  }
  // FLASHCHECK_SUBJECT names the subject as it does for the property binaries; --subject, when given, wins.
  if (const char* env = std::getenv("FLASHCHECK_SUBJECT"); options->subject_path.empty() && env != nullptr && *env) {
    options->subject_path = env;
    std::fprintf(stderr, "flashcheck-repro: subject from FLASHCHECK_SUBJECT=%s\n", excerpt(env).c_str());
  }
  if (!options->subject_path.empty() && (!backend.empty() || options->defect != ModelDefect::kNone ||
                                          options->device_inputs)) {
    return usage_error("--subject runs the subject: it takes no --backend, --defect or --device-inputs");
  }
  if (!options->subject_path.empty()) {
    if (Status s = LoadedSubject::load(options->subject_path, &options->subject); !s.ok()) {
      std::fprintf(stderr, "flashcheck-repro: %s\n", s.message().c_str());
      return kExitBadSubject;
    }
    std::printf("%s\n", options->subject->describe().c_str());
    options->judge.tier = options->tier;
    return -1;
  }
  if (options->defect != ModelDefect::kNone && !backend.empty() && backend != "model") {
    return usage_error("--defect applies to the host model only (--backend model)");
  }
  if (backend.empty()) {
    const bool gpu = device_available() && options->defect == ModelDefect::kNone;
    options->backends = {gpu ? Backend::kGpu : Backend::kHostModel};
    std::printf("backend: %s (default: %s)\n", to_string(options->backends[0]),
                gpu ? "a CUDA device is present" : device_available() ? "--defect runs on the model" : "no CUDA device");
  }
  if (options->device_inputs &&
      std::find(options->backends.begin(), options->backends.end(), Backend::kGpu) == options->backends.end()) {
    return usage_error("--device-inputs draws the inputs on the GPU: it takes the GPU backend (--backend gpu, the "
                       "default where a CUDA device is present)");
  }
  options->judge.tier = options->tier;
  return -1;
}

// The worst O element's row beside the oracle's: a few columns around the worst one, and LSE.
void print_worst_row(const Verdict& v, const HostInputs& inputs, const RunOutputs& out, oracle::Tier tier) {
  if (v.o.checked == 0 || out.o.empty()) return;
  const oracle::Problem problem = inputs.problem();
  const oracle::RowRef row = v.o.where;
  const oracle::RowResult exact = oracle::compute_row(problem, row, tier);
  const oracle::RowBound bound = judged_bound(problem, row, exact, inputs.params, out);
  const int64_t flat = (row.b * problem.heads_q + row.h) * problem.seqlen_q + row.i;
  std::printf("worst O row b=%lld h=%lld i=%lld (%lld visible keys%s):\n", static_cast<long long>(row.b),
              static_cast<long long>(row.h), static_cast<long long>(row.i), static_cast<long long>(exact.visible),
              bound.unconstrained ? ", outside the error model's domain" : "");
  std::printf("  %6s %18s %18s %12s %10s\n", "col", "kernel", "oracle", "bound", "ratio");
  const int64_t first = std::max<int64_t>(0, v.o.col - kColumnsAroundWorst);
  const int64_t columns = oracle::value_dim(problem);  // O's
  const int64_t last = std::min<int64_t>(columns - 1, v.o.col + kColumnsAroundWorst);
  for (int64_t k = first; k <= last; ++k) {
    const double got = out.o[static_cast<size_t>(flat * columns + k)];
    const double want = exact.o[static_cast<size_t>(k)];
    const double b = bound.o.empty() ? 0.0 : bound.o[static_cast<size_t>(k)];
    std::printf("  %6lld %18.9g %18.9g %12.3g %10.3g%s\n", static_cast<long long>(k), got, want, b,
                b > 0 ? std::fabs(got - want) / b : 0.0, k == v.o.col ? "  <- worst" : "");
  }
  if (out.lse_written) {
    std::printf("  %6s %18.9g %18.9g %12.3g\n", "LSE", static_cast<double>(out.lse[static_cast<size_t>(flat)]),
                exact.lse, bound.lse);
  }
}

// On an RMS failure, the row with the largest share of the kernel's squared error beside the oracle and the
// same-precision reference: per column both errors in units of A_k = sum_j p_j |v_jk| (the check's scale).
void print_rms_row(const Verdict& v, const HostInputs& inputs, const RunOutputs& out, oracle::Tier tier) {
  if (v.rms_ratio <= 1 || v.rms_rows.empty() || out.o.empty() || out.generic_bound) return;
  const oracle::Problem problem = inputs.problem();
  const oracle::RowRef row = v.rms_rows.front().row;
  const oracle::RowResult exact = oracle::compute_row(problem, row, tier);
  const std::vector<double> reference = oracle_reference(problem, row, inputs.params, out.config, &exact);
  const int64_t flat = (row.b * problem.heads_q + row.h) * problem.seqlen_q + row.i;
  std::printf("heaviest RMS row b=%lld h=%lld i=%lld (%lld visible keys; errors in units of A_k):\n",
              static_cast<long long>(row.b), static_cast<long long>(row.h), static_cast<long long>(row.i),
              static_cast<long long>(exact.visible));
  std::printf("  %6s %18s %18s %18s %12s %12s\n", "col", "kernel", "oracle", "reference", "kernel err", "ref err");
  const int64_t columns = oracle::value_dim(problem);  // O's
  for (int64_t k = 0; k < std::min(columns, kRmsRowColumns); ++k) {
    const size_t kk = static_cast<size_t>(k);
    const double got = out.o[static_cast<size_t>(flat * columns + k)];
    const double a = exact.abs_pv[kk] > 0 ? exact.abs_pv[kk] : 1.0;
    std::printf("  %6lld %18.9g %18.9g %18.9g %12.3g %12.3g\n", static_cast<long long>(k), got, exact.o[kk],
                reference[kk], (got - exact.o[kk]) / a, (reference[kk] - exact.o[kk]) / a);
  }
}

// Runs one case line on every chosen backend: its most severe outcome, or unavailable when the GPU backend
// was asked for on a machine without a device.
struct Replayed {
  Outcome outcome = Outcome::kPass;
  bool unavailable = false;
  bool wrong_subject = false;  // the line names a subject other than the one loaded (or one when none is)
};

#if FLASHCHECK_REPRO_PROPERTIES
// A case line with property=NAME: that property's relation rerun on the case (properties/replay.h), on each backend
// (or the subject), instead of the oracle check alone. The relation builds its own runs, so its verdict is the
// property's: PASS, FAIL with what differed, REJECTED when the case is not one the property draws.
Replayed replay_relation(const Case& c, const std::string& line, const Options& options) {
  namespace fp = flashcheck::properties;
  const fp::PropertyInfo* property = fp::find_property(c.property);
  if (property == nullptr) {
    std::string names;
    for (const fp::PropertyInfo& p : fp::property_table()) names += std::string(names.empty() ? "" : ", ") + p.name;
    const Status s{StatusCode::kInvalidArgument, "property: no property named " + c.property + " (" + names + ")"};
    std::printf("%s\n", refused(line, s).report().c_str());
    return {outcome_of(s.code())};
  }
  Replayed result;
  const std::vector<Backend> backends = options.subject ? std::vector<Backend>{Backend::kGpu} : options.backends;
  for (Backend backend : backends) {
    const std::string where = options.subject ? "subject " + options.subject->name() : std::string("backend ") + to_string(backend);
    std::printf("== %s, property %s%s\n", where.c_str(), property->name,
                options.defect != ModelDefect::kNone ? (std::string(" with defect ") + to_string(options.defect)).c_str() : "");
    if (!options.subject && backend == Backend::kGpu && !device_available()) {
      std::fprintf(stderr, "flashcheck-repro: --backend gpu: no CUDA device available\n");
      return {Outcome::kPass, true};
    }
    if (!options.subject && backend == Backend::kGpu && property->binary == fp::PropertyBinary::kInstrumented) {
      const Status s{StatusCode::kUnsupported,
                     std::string("property: ") + property->name + " runs on the instrumented kernel: replay it with "
                     "--backend model, or in properties_gpu_instrumented with its reproduce string"};
      std::printf("%s\n", refused(line, s).report().c_str());
      result.outcome = most_severe(result.outcome, outcome_of(s.code()));
      continue;
    }
    fp::configure_replay(options.subject ? (options.subject->on_device() ? Backend::kGpu : Backend::kHostModel) : backend,
                         options.defect, options.subject.get());
    const fp::CurrentProperty current(property->name);
    const fp::ReplayResult r = fp::replay_property(*property, c);
    std::printf("case line: %s\nverdict: %s", line.c_str(), to_string(r.outcome));
    if (r.outcome == Outcome::kPass) std::printf(" (the relation held)\n\n");
    if (r.outcome == Outcome::kFail) std::printf(" (the relation failed)\n%s\n\n", r.message.c_str());
    if (r.outcome == Outcome::kRejected || r.outcome == Outcome::kUnsupported) std::printf(" (%s)\n\n", r.message.c_str());
    result.outcome = most_severe(result.outcome, r.outcome);
  }
  return result;
}
#endif

// Host inputs past this many bytes are generated on the device.
int64_t host_inputs_limit(const Options& options) { return std::max(options.memory_cap, kHostInputsLimit); }

// A case on device inputs (device_inputs.h): the GPU backend generates Q, K, V on the device and judges sampled
// rows; the host model cannot hold the inputs and answers UNSUPPORTED with the reason.
Replayed replay_on_device(const Case& c, const std::string& line, const Options& options) {
  Replayed result;
  for (Backend backend : options.backends) {
    if (backend == Backend::kHostModel) {
      const Status refusal = host_model_refusal(c, host_inputs_limit(options));
      std::printf("== backend model\n%s\n", refused(line, refusal).report().c_str());
      result.outcome = most_severe(result.outcome, outcome_of(refusal.code()));
      continue;
    }
    std::fprintf(stderr, "flashcheck-repro: inputs generated on the device (%.1f GB of device memory)\n",
                 double(device_case_bytes(c)) / 1e9);
    const DeviceCheck check = check_on_device(c, options.judge);
    if (check.status.code() == StatusCode::kNoDevice) {
      std::fprintf(stderr, "flashcheck-repro: --backend gpu: %s\n", check.status.message().c_str());
      return {Outcome::kPass, true};
    }
    if (!check.status.ok()) {
      std::printf("%s\n", refused(line, check.status).report().c_str());
      result.outcome = most_severe(result.outcome, outcome_of(check.status.code()));
      continue;
    }
    std::printf("== backend gpu (inputs generated on the device, sampled rows)\n%s\n", check.verdict.report().c_str());
    result.outcome = most_severe(result.outcome, check.verdict.outcome);
  }
  return result;
}

Replayed replay(const std::string& given, const Options& options) {
  Case c;
  if (Status s = parse_case(given, &c); !s.ok()) {
    std::printf("%s\n", refused(given, s).report().c_str());
    return {outcome_of(s.code())};
  }
  if (!options.property.empty()) c.property = options.property;
  const std::string line = options.property.empty() ? given : format_case(c);
  // A finding replays against the subject it was found on; a line without subject= runs on whatever is chosen.
  if (const std::string why = wrong_subject(c, options.subject.get()); !why.empty()) {
    std::fprintf(stderr, "flashcheck-repro: %s\n", why.c_str());
    Replayed r;
    r.wrong_subject = true;
    return r;
  }
  // Parse, validate every field, route, estimate, admit: before anything is allocated (admission.h).
  AdmitOptions admit;
  admit.memory_cap = options.memory_cap;
  admit.host_inputs_limit = host_inputs_limit(options);
  admit.device_inputs = options.device_inputs;
  admit.host_model =
      std::find(options.backends.begin(), options.backends.end(), Backend::kHostModel) != options.backends.end();
  admit.budget.full_check_limit = options.judge.full_check_limit;
  admit.budget.random_rows = options.judge.random_rows;
  admit.subject = options.subject.get();
  Admission admission;
  if (Status s = admit_case(c, admit, &admission); !s.ok()) {
    std::printf("%s\n", refused(line, s).report().c_str());
    return {outcome_of(s.code())};
  }
  if (!c.property.empty()) {
#if FLASHCHECK_REPRO_PROPERTIES
    if (admission.route == InputRoute::kDevice) {
      const Status s{StatusCode::kUnsupported, "property: a relation's runs take host inputs; this case needs device inputs"};
      std::printf("%s\n", refused(line, s).report().c_str());
      return {outcome_of(s.code())};
    }
    return replay_relation(c, line, options);
#else
    const Status s{StatusCode::kUnsupported, "property: this flashcheck-repro is built without the property tests "
                                             "(FLASHCHECK_TESTS=OFF): it cannot rerun a relation"};
    std::printf("%s\n", refused(line, s).report().c_str());
    return {outcome_of(s.code())};
#endif
  }
  if (admission.route == InputRoute::kDevice) return replay_on_device(c, line, options);
  // Minutes or gigabytes: say so first.
  if (admission.budget.is_large()) {
    std::fprintf(stderr, "flashcheck-repro: warning: this case needs %s\n", admission.budget.summary().c_str());
  }
  HostInputs inputs;
  if (Status s = make_inputs(c, &inputs, options.memory_cap); !s.ok()) {
    std::printf("%s\n", refused(line, s).report().c_str());
    return {outcome_of(s.code())};
  }
  Replayed result;
  if (options.subject && c.grad) {
    BackwardRunOptions run;
    run.deterministic = options.deterministic;
    const BackwardOutputs out = run_backward_case(inputs, *options.subject, run);
    if (out.status.code() == StatusCode::kNoDevice) {
      std::fprintf(stderr, "flashcheck-repro: subject %s: %s\n", options.subject->name().c_str(), out.status.message().c_str());
      return {Outcome::kPass, true};
    }
    const BackwardVerdict v = judge_backward(c, inputs, out);
    std::printf("== subject %s, backward\n%s\n", options.subject->name().c_str(), v.report().c_str());
    return {v.outcome};
  }
  if (options.subject) {
    const RunOutputs out = run_case(inputs, *options.subject);
    if (out.status.code() == StatusCode::kNoDevice) {
      std::fprintf(stderr, "flashcheck-repro: subject %s: %s\n", options.subject->name().c_str(), out.status.message().c_str());
      return {Outcome::kPass, true};
    }
    ProgressLine progress("flashcheck-repro: oracle");
    JudgeOptions judge_options = options.judge;
    judge_options.progress = progress.callback();
    const Verdict v = judge(c, inputs, out, judge_options);
    std::printf("== subject %s\n%s", options.subject->name().c_str(), v.report().c_str());
    if (out.status.ok()) print_worst_row(v, inputs, out, options.tier);
    std::printf("\n");
    return {v.outcome};
  }
  if (c.grad) {
    for (Backend backend : options.backends) {
      BackwardRunOptions run;
      run.defect = options.defect;
      run.deterministic = options.deterministic;
      const BackwardOutputs out = run_backward_case(inputs, backend, run);
      if (out.status.code() == StatusCode::kNoDevice) {
        std::fprintf(stderr, "flashcheck-repro: --backend gpu: %s\n", out.status.message().c_str());
        return {Outcome::kPass, true};
      }
      const BackwardVerdict v = judge_backward(c, inputs, out);
      std::printf("== backend %s, backward%s\n%s\n", to_string(backend),
                  options.defect != ModelDefect::kNone ? (std::string(" with defect ") + to_string(options.defect)).c_str() : "",
                  v.report().c_str());
      result.outcome = most_severe(result.outcome, v.outcome);
    }
    return result;
  }
  for (Backend backend : options.backends) {
    RunOptions run;
    run.model.defect = options.defect;
    run.instrument = backend == Backend::kHostModel;  // the GPU path runs the production kernel
    const RunOutputs out = run_case(inputs, backend, run);
    if (out.status.code() == StatusCode::kNoDevice) {
      std::fprintf(stderr, "flashcheck-repro: --backend gpu: %s\n", out.status.message().c_str());
      return {Outcome::kPass, true};
    }
    ProgressLine progress("flashcheck-repro: oracle");  // large cases: progress and an estimate on stderr
    JudgeOptions judge_options = options.judge;
    judge_options.progress = progress.callback();
    const Verdict v = judge(c, inputs, out, judge_options);
    std::printf("== backend %s%s\n%s", to_string(backend),
                options.defect != ModelDefect::kNone ? (std::string(" with defect ") + to_string(options.defect)).c_str() : "",
                v.report().c_str());
    if (out.status.ok()) {
      print_worst_row(v, inputs, out, options.tier);
      print_rms_row(v, inputs, out, options.tier);
    }
    std::printf("\n");
    result.outcome = most_severe(result.outcome, v.outcome);
  }
  return result;
}

}  // namespace

// replay() with an allocation that fails (a --memory-cap above what the host holds) answered as a refusal.
Replayed replay_within_memory(const std::string& given, const Options& options) {
  try {
    return replay(given, options);
  } catch (const std::bad_alloc&) {
    const Status s = allocation_refusal("the case's buffers");
    std::printf("%s\n", refused(given, s).report().c_str());
    return {outcome_of(s.code())};
  }
}

int main(int argc, char** argv) {
  Options options;
  if (const int early = parse_args(argc, argv, &options); early >= 0) return early;
  // Under CTest with a resource spec, the GPU the test holds; run by hand, the current device.
  if (Status s = select_device_from_environment(); !s.ok()) {
    std::fprintf(stderr, "flashcheck-repro: %s\n", s.message().c_str());
    return kExitUnavailable;
  }
  if (options.file.empty()) {
    const Replayed r = replay_within_memory(options.line, options);
    if (r.wrong_subject) return kExitUsage;
    return r.unavailable ? kExitUnavailable : exit_code(r.outcome);
  }

  std::ifstream file;
  if (!cli::open_input_file(options.file, &file)) {
    std::fprintf(stderr, "flashcheck-repro: cannot open '%s'\n", excerpt(options.file).c_str());
    return kExitNoInput;
  }
  Outcome result = Outcome::kPass;
  int cases = 0;
  std::array<int, kOutcomeCount> counts{};
  std::string text;
  while (std::getline(file, text)) {
    if (!holds_case_line(text)) continue;
    ++cases;
    const Replayed r = replay_within_memory(text, options);
    if (r.unavailable) return kExitUnavailable;
    if (r.wrong_subject) return kExitUsage;
    ++counts[static_cast<size_t>(r.outcome)];
    result = most_severe(result, r.outcome);
  }
  if (cases == 0) return usage_error("'" + excerpt(options.file) + "' holds no case line");
  std::printf("%d case%s: %d passed, %d failed, %d rejected, %d unsupported, %d outside the domain\n", cases,
              cases == 1 ? "" : "s", counts[0], counts[1], counts[2], counts[3], counts[4]);
  return exit_code(result);
}
