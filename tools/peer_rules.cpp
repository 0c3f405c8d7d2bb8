// flashcheck-peer-rules: how many of the backward defects of the host model (flashcheck/host_model.h, bwd-*) the
// peers' acceptance rules for gradients catch, beside flashcheck's per-element bound, on one set of grad=1 cases.
// Each case runs on the host model with the defect (the kernel under test) and without it (the same-precision
// reference the peers' rules compare against); the exact gradient is gradient_check's. The rules, per gradient tensor
// (dQ, dK, dV), with err = the kernel's error against the exact gradient and ref = the reference's:
//   flashcheck     judge_backward: every element within its bound, every element written, guards intact;
//   FlashAttention max |err| <= 2 max |ref| (its tests' rule for gradients);
//   PyTorch        max |err| <= fudge max |ref|, fudge 180 for dQ, 16 for dK, 4 for dV (its SDPA tests' factors);
//   cuDNN          |err| <= t + t |exact| for every element, t = 2e-2 (fp16) or 7e-2 (bf16) (fixed tolerances).
// A case is caught by a rule when any tensor fails it. Prints a markdown table: per defect, the cases each rule
// catches. Usage: flashcheck-peer-rules [--cases-per-dtype N].
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "flashcheck/backward_check.h"
#include "flashcheck/case.h"
#include "flashcheck/cli.h"
#include "flashcheck/host_model.h"
#include "flashcheck/inputs.h"

namespace {

using namespace flashcheck;

const char* const kShapes[] = {
    "b=1 hq=2 hkv=1 sq=40 sk=70 d=64 mask=causal-br",
    "b=1 hq=4 hkv=2 sq=70 sk=90 d=64 dv=32 mask=window-tl window=20,5 softcap=5",
    "b=2 hq=2 hkv=1 sq=30 sk=53 d=40 mask=causal-br seqs=30:40+7,20:50+3",
    "b=1 hq=4 hkv=2 sq=129 sk=257 d=128 mask=causal-tl",
    "b=1 hq=2 hkv=2 sq=96 sk=96 d=96 mask=none softcap=30",
    "b=1 hq=8 hkv=1 sq=64 sk=200 d=64 mask=window-br window=100,0",
};

struct Tally {
  int flashcheck = 0, flash_attention = 0, pytorch = 0, cudnn = 0;
};

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The peers' gradient acceptance rules against flashcheck's bound on the host model's backward defects.",
               "flashcheck-peer-rules"};
  int64_t cases_per_dtype = 12;
  app.add_option("--cases-per-dtype", cases_per_dtype, "grad=1 cases per dtype (fp16, bf16), cycling over the shapes")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, cli::kMaxCasesPerDtype));
  app.footer("exit codes: 0 the table printed, 1 a case could not be built or run, 64 usage error");
  if (const int early = cli::parse(app, argc, argv); early >= 0) return early;
  std::vector<Case> cases;
  for (const char* dtype : {"f16", "bf16"}) {
    for (int64_t n = 0; n < cases_per_dtype; ++n) {
      const std::string line = std::string(dtype) + " " + kShapes[n % std::size(kShapes)] +
                               " q=normal(0,1) k=normal(0,1) v=normal(0,1) grad=1 dout=normal(0,1) seed=" +
                               std::to_string(100 + n);
      Case c;
      if (Status st = parse_case(line, &c); !st.ok()) {
        std::fprintf(stderr, "flashcheck-peer-rules: %s\n", st.message().c_str());
        return 1;
      }
      cases.push_back(c);
    }
  }
  std::printf("| defect | cases | flashcheck's bound | FlashAttention (2x reference) | PyTorch (fudge 180/16/4) | "
              "cuDNN (fixed 2e-2 / 7e-2) |\n|---|---|---|---|---|---|\n");
  for (const ModelDefectInfo& info : kModelDefects) {
    if (std::string(info.name).rfind("bwd-", 0) != 0) continue;
    Tally t;
    for (const Case& c : cases) {
      HostInputs in;
      if (const Status st = make_inputs(c, &in); !st.ok()) {
        std::fprintf(stderr, "flashcheck-peer-rules: %s: %s\n", format_case(c).c_str(), st.message().c_str());
        return 1;
      }
      BackwardRunOptions with, without;
      with.defect = info.id;
      const BackwardOutputs got = run_backward_case(in, Backend::kHostModel, with);
      const BackwardOutputs ref = run_backward_case(in, Backend::kHostModel, without);
      if (!got.status.ok() || !ref.status.ok()) {
        std::fprintf(stderr, "flashcheck-peer-rules: %s: the host model's backward: %s\n", format_case(c).c_str(),
                     (got.status.ok() ? ref.status : got.status).message().c_str());
        return 1;
      }
      const oracle::GradientCheck exact = backward_bounds(in, ref);
      if (!judge_backward(c, in, got).pass) ++t.flashcheck;
      bool fa = false, pt = false, cudnn = false;
      const double tol = c.dtype == DType::kF16 ? 2e-2 : 7e-2;
      const struct {
        const std::vector<double>& got;
        const std::vector<double>& ref;
        const std::vector<double>& exact;
        double fudge;
      } tensors[] = {{got.dq, ref.dq, exact.exact.dq, 180.0},
                     {got.dk, ref.dk, exact.exact.dk, 16.0},
                     {got.dv, ref.dv, exact.exact.dv, 4.0}};
      for (const auto& x : tensors) {
        const double err = max_abs_diff(x.got, x.exact), ref_err = max_abs_diff(x.ref, x.exact);
        fa = fa || !(err <= 2 * ref_err);
        pt = pt || !(err <= x.fudge * ref_err);
        for (size_t i = 0; i < x.got.size(); ++i) {
          cudnn = cudnn || !(std::fabs(x.got[i] - x.exact[i]) <= tol + tol * std::fabs(x.exact[i]));
        }
      }
      t.flash_attention += fa ? 1 : 0;
      t.pytorch += pt ? 1 : 0;
      t.cudnn += cudnn ? 1 : 0;
    }
    std::printf("| `%s` | %zu | %d | %d | %d | %d |\n", info.name, cases.size(), t.flashcheck, t.flash_attention,
                t.pytorch, t.cudnn);
  }
  return 0;
}
