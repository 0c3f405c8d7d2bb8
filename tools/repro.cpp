// flashcheck-repro: replays case lines (from the command line or a file, e.g. a fuzzer's finding) on the GPU
// kernel and/or the host model, judges them against the oracle and prints the verdict report plus the worst
// row's values beside the oracle's. Exit status: 0 every case passed, 1 some case failed, 2 usage, parse or
// environment error (the message says which).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "flashcheck/host_model.h"
#include "flashcheck/oracle_bridge.h"
#include "flashcheck/progress.h"
#include "flashcheck/verdict.h"

namespace {

using namespace flashcheck;

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;
constexpr int64_t kColumnsAroundWorst = 3;  // columns printed either side of the worst O element

constexpr const char* kUsage =
    "usage: flashcheck-repro [--backend gpu|model|both] [--tier gold|fast] [--defect NAME] [--rows all|N]\n"
    "                        \"<case line>\" | --file F\n"
    "  --backend  where to run (default: gpu if a CUDA device is present, else model)\n"
    "  --tier     oracle precision: gold (113-bit) or fast (double with error-free transformations; default)\n"
    "  --defect   host model only: none, p-one-format-coarser, o-accum-in-dtype, missing-rescale, lse-base2\n"
    "  --rows     all rows, or N: every row when there are at most N, else boundary rows plus N seeded random rows\n"
    "  --file     one case line per line; blank lines and lines starting with '#' are skipped\n"
    "example: flashcheck-repro \"bf16 b=2 hq=8 hkv=2 sq=129 sk=257 d=128 mask=causal-br q=normal(0,3) "
    "k=normal(0,3) v=uniform(-1,1) seed=42\"\n";

struct Options {
  std::vector<Backend> backends;
  bool backend_chosen = false;
  oracle::Tier tier = oracle::Tier::kFast;
  ModelDefect defect = ModelDefect::kNone;
  JudgeOptions judge;
  std::string file;
  std::string line;  // the case line given on the command line (arguments joined by blanks)
};

int usage_error(const std::string& message) {
  std::fprintf(stderr, "flashcheck-repro: %s\n\n%s", message.c_str(), kUsage);
  return kExitUsage;
}

// Parses argv into *options; returns -1 to go on, or an exit status.
int parse_args(int argc, char** argv, Options* options) {
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return kExitPass;
    } else if (arg == "--backend") {
      if (!value(&v)) return usage_error("--backend needs gpu, model or both");
      options->backend_chosen = true;
      if (v == "gpu") {
        options->backends = {Backend::kGpu};
      } else if (v == "model") {
        options->backends = {Backend::kHostModel};
      } else if (v == "both") {
        options->backends = {Backend::kGpu, Backend::kHostModel};
      } else {
        return usage_error("unknown backend '" + v + "' (gpu, model or both)");
      }
    } else if (arg == "--tier") {
      if (!value(&v)) return usage_error("--tier needs gold or fast");
      if (v == "gold") {
        options->tier = oracle::Tier::kGold;
      } else if (v == "fast") {
        options->tier = oracle::Tier::kFast;
      } else {
        return usage_error("unknown tier '" + v + "' (gold or fast)");
      }
    } else if (arg == "--defect") {
      if (!value(&v)) return usage_error("--defect needs a name");
      bool found = false;
      for (ModelDefect d : {ModelDefect::kNone, ModelDefect::kPOneFormatCoarser, ModelDefect::kOAccumInDtype,
                            ModelDefect::kMissingRescale, ModelDefect::kLseBase2}) {
        if (v == to_string(d)) {
          options->defect = d;
          found = true;
        }
      }
      if (!found) return usage_error("unknown defect '" + v + "'");
    } else if (arg == "--rows") {
      if (!value(&v)) return usage_error("--rows needs all or a number");
      if (v == "all") {
        options->judge.full_check_limit = std::numeric_limits<int64_t>::max();
      } else {
        char* end = nullptr;
        const long long n = std::strtoll(v.c_str(), &end, 10);
        if (end == v.c_str() || *end != '\0' || n < 0) return usage_error("--rows: '" + v + "' is not all or a count");
        options->judge.full_check_limit = n;
        options->judge.random_rows = n;
      }
    } else if (arg == "--file") {
      if (!value(&options->file)) return usage_error("--file needs a path");
    } else if (arg.starts_with("--")) {
      return usage_error("unknown option '" + std::string(arg) + "'");
    } else {
      words.emplace_back(arg);
    }
  }
  for (const std::string& w : words) options->line += (options->line.empty() ? "" : " ") + w;
  if (options->file.empty() == options->line.empty()) return usage_error("give exactly one of a case line or --file F");
  if (options->defect != ModelDefect::kNone && options->backend_chosen &&
      (options->backends.size() != 1 || options->backends[0] != Backend::kHostModel)) {
    return usage_error("--defect applies to the host model only (--backend model)");
  }
  if (!options->backend_chosen) {
    const bool gpu = device_available() && options->defect == ModelDefect::kNone;
    options->backends = {gpu ? Backend::kGpu : Backend::kHostModel};
    std::printf("backend: %s (default: %s)\n", to_string(options->backends[0]),
                gpu ? "a CUDA device is present" : device_available() ? "--defect runs on the model" : "no CUDA device");
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
  const oracle::RowBound bound = oracle_bound(problem, row, exact, inputs.params, out.config);
  const int64_t flat = (row.b * problem.heads_q + row.h) * problem.seqlen_q + row.i;
  std::printf("worst O row b=%lld h=%lld i=%lld (%lld visible keys%s):\n", static_cast<long long>(row.b),
              static_cast<long long>(row.h), static_cast<long long>(row.i), static_cast<long long>(exact.visible),
              bound.unconstrained ? ", outside the error model's domain" : "");
  std::printf("  %6s %18s %18s %12s %10s\n", "col", "kernel", "oracle", "bound", "ratio");
  const int64_t first = std::max<int64_t>(0, v.o.col - kColumnsAroundWorst);
  const int64_t last = std::min<int64_t>(problem.head_dim - 1, v.o.col + kColumnsAroundWorst);
  for (int64_t k = first; k <= last; ++k) {
    const double got = out.o[static_cast<size_t>(flat * problem.head_dim + k)];
    const double want = exact.o[static_cast<size_t>(k)];
    const double b = bound.o.empty() ? 0.0 : bound.o[static_cast<size_t>(k)];
    std::printf("  %6lld %18.9g %18.9g %12.3g %10.3g%s\n", static_cast<long long>(k), got, want, b,
                b > 0 ? std::fabs(got - want) / b : 0.0, k == v.o.col ? "  <- worst" : "");
  }
  std::printf("  %6s %18.9g %18.9g %12.3g\n", "LSE", static_cast<double>(out.lse[static_cast<size_t>(flat)]), exact.lse,
              bound.lse);
}

// Runs one case line on every chosen backend; returns an exit status.
int replay(const std::string& line, const Options& options) {
  Case c;
  if (Status s = parse_case(line, &c); !s.ok()) {
    std::fprintf(stderr, "flashcheck-repro: cannot parse case line: %s\n  line: %s\n", s.message().c_str(), line.c_str());
    return kExitUsage;
  }
  HostInputs inputs;
  if (Status s = make_inputs(c, &inputs); !s.ok()) {
    std::fprintf(stderr, "flashcheck-repro: cannot build inputs: %s\n  line: %s\n", s.message().c_str(), line.c_str());
    return kExitUsage;
  }
  int result = kExitPass;
  for (Backend backend : options.backends) {
    RunOptions run;
    run.model.defect = options.defect;
    run.instrument = backend == Backend::kHostModel;  // the GPU path runs the production kernel
    const RunOutputs out = run_case(inputs, backend, run);
    if (out.status.code() == StatusCode::kNoDevice) {
      std::fprintf(stderr, "flashcheck-repro: --backend gpu: %s\n", out.status.message().c_str());
      return kExitUsage;
    }
    ProgressLine progress("flashcheck-repro: oracle");  // large cases: progress and an estimate on stderr
    JudgeOptions judge_options = options.judge;
    judge_options.progress = progress.callback();
    const Verdict v = judge(c, inputs, out, judge_options);
    std::printf("== backend %s%s\n%s", to_string(backend),
                options.defect != ModelDefect::kNone ? (std::string(" with defect ") + to_string(options.defect)).c_str() : "",
                v.report().c_str());
    print_worst_row(v, inputs, out, options.tier);
    std::printf("\n");
    if (!v.pass && result == kExitPass) result = kExitFail;
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const int early = parse_args(argc, argv, &options); early >= 0) return early;
  if (options.file.empty()) return replay(options.line, options);

  std::ifstream file(options.file);
  if (!file) return usage_error("cannot open '" + options.file + "'");
  int result = kExitPass, cases = 0, failed = 0;
  std::string text;
  while (std::getline(file, text)) {
    const size_t start = text.find_first_not_of(" \t\r");
    if (start == std::string::npos || text[start] == '#') continue;
    ++cases;
    const int status = replay(text, options);
    if (status == kExitUsage) return kExitUsage;
    if (status == kExitFail) {
      ++failed;
      result = kExitFail;
    }
  }
  if (cases == 0) return usage_error("'" + options.file + "' holds no case line");
  std::printf("%d case%s, %d failed\n", cases, cases == 1 ? "" : "s", failed);
  return result;
}
