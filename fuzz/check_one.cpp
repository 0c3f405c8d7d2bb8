// check_one (check_one.h): one fuzzer input from bytes to verdict. The backend is reached only through the
// harness's runner, so a fuzz run has the same guards (poison, canaries, input hashes) as every other run.
// FLASHCHECK_SUBJECT=PATH runs a subject (loaded_subject.h) instead of the target's backend: its findings name it
// (subject= in the case line), cases outside its capabilities stay out of the corpus, and coverage comes from
// the numeric signals alone (a subject records no tile counters).
#include "check_one.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "finding.h"
#include "flashcheck/loaded_subject.h"

namespace flashcheck::fuzz {
namespace {

// Refused inputs of a case line stay out of the corpus; a binary-decoded case is valid by construction.
// The exit status when the device cannot draw a case's inputs (DrawOn::kDevice): no case is to blame, so it is no
// finding; the process stops with the reason on stderr.
constexpr int kExitDrawFailed = 79;

StageTimes g_times;
const char* g_timing_target = "";

// Seconds since `start`, restarting it.
double lap(std::chrono::steady_clock::time_point* start) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - *start).count();
  *start = now;
  return seconds;
}

int check_one_timed(const TargetSpec& spec, const uint8_t* data, size_t size);

}  // namespace

const StageTimes& stage_times() { return g_times; }

std::string format_stage_times(const StageTimes& t) {
  const double total = t.decode_s + t.inputs_s + t.run_s + t.judge_s;
  const double per = t.executions > 0 ? 1e3 / static_cast<double>(t.executions) : 0.0;
  const auto share = [&](double s) { return total > 0 ? 100.0 * s / total : 0.0; };
  char line[512];
  std::snprintf(line, sizeof line,
                "%lld executions (%lld rejected), %.3f ms each: decode %.3f (%.0f%%), inputs %.3f (%.0f%%), run %.3f "
                "(%.0f%%), judge %.3f (%.0f%%); %.1f oracle rows each; %.0f executions/s of these stages",
                static_cast<long long>(t.executions), static_cast<long long>(t.rejected), total * per, t.decode_s * per,
                share(t.decode_s), t.inputs_s * per, share(t.inputs_s), t.run_s * per, share(t.run_s), t.judge_s * per,
                share(t.judge_s),
                t.executions > 0 ? static_cast<double>(t.rows_checked) / static_cast<double>(t.executions) : 0.0,
                total > 0 ? static_cast<double>(t.executions) / total : 0.0);
  return line;
}

void print_stage_times_at_exit_if_asked(const char* target) {
  const char* asked = std::getenv("FLASHCHECK_FUZZ_TIMING");
  if (asked == nullptr || std::string_view(asked) != "1") return;
  g_timing_target = target;
  std::atexit([] { std::fprintf(stderr, "%s stage times: %s\n", g_timing_target, format_stage_times(g_times).c_str()); });
}

int check_one(const TargetSpec& spec, const uint8_t* data, size_t size) {
  const int result = check_one_timed(spec, data, size);
  ++(result == 0 ? g_times.executions : g_times.rejected);
  return result;
}

namespace {

int check_one_timed(const TargetSpec& spec, const uint8_t* data, size_t size) {
  auto clock = std::chrono::steady_clock::now();
  std::string subject_error;
  const LoadedSubject* subject = subject_from_environment(&subject_error);
  if (!subject_error.empty()) {  // nothing could be fuzzed: stop at once rather than report every input
    std::fprintf(stderr, "%s: %s\n", spec.name, subject_error.c_str());
    std::_Exit(kExitBadSubject);
  }
  DecodeMode mode;
  Case c;
  if (!decode_case({data, size}, &c, &mode, spec.profile).ok()) return -1;  // a case line that does not parse
  if (!within_profile(c, spec.profile)) return -1;  // a case line outside the profile (binary cases lie inside)
  if (subject != nullptr) {
    if (!subject->supports(c).ok()) return -1;
    c.subject = subject->name();
  }
  const std::string backend_name = subject != nullptr ? "subject " + subject->name() : to_string(spec.backend);
  if (!within_limits(c, spec.limits)) return -1;
  g_times.decode_s += lap(&clock);
  HostInputs inputs;
  if (Status s = make_inputs(c, &inputs, kMaxInputBytes, spec.draw_on); !s.ok()) {
    if (s.code() == StatusCode::kNoDevice || s.code() == StatusCode::kCudaError) {
      std::fprintf(stderr, "%s: drawing the inputs on the device failed: %s\n", spec.name, s.message().c_str());
      std::_Exit(kExitDrawFailed);
    }
    if (mode == DecodeMode::kText) return -1;
    report_finding(
        spec.name, backend_name, c,
        "case: " + format_case(c) + "\nmake_inputs refused a case the binary decoder produced: " + s.message());
  }
  record_specials(c, inputs);
  g_times.inputs_s += lap(&clock);

  RunOptions options = spec.run;
  options.instrument = subject == nullptr;
  options.count_tiles = subject == nullptr;
  const RunOutputs out = subject != nullptr ? run_case(inputs, *subject, options) : run_case(inputs, spec.backend, options);
  g_times.run_s += lap(&clock);
  // A case line parses whatever the kernel supports (hq % hkv != 0, d = 0, ...): the API's refusal of it is
  // correct behaviour, covered by fuzz_api, not a finding. Binary-decoded cases are valid by construction.
  // (The refusal is the run's own: the inputs carry no output buffers yet, so asking can_implement() here
  // refused every case line.)
  if (mode == DecodeMode::kText && (out.status.code() == StatusCode::kInvalidArgument ||
                                    out.status.code() == StatusCode::kUnsupported)) {
    return -1;
  }
  record_run(c, out);
  if (!out.status.ok()) {
    report_finding(spec.name, backend_name, c,
                   "case: " + format_case(c) + "\nthe " + backend_name +
                       " backend failed on a valid case: " + out.status.message());
  }
  // The verdict also fails on the guards (unwritten outputs, damaged canaries, changed inputs).
  const Verdict verdict = judge(c, inputs, out, spec.judge);
  g_times.judge_s += lap(&clock);
  g_times.rows_checked += verdict.rows_checked;
  record_verdict(verdict);
  if (!verdict.pass) {
    char hash[32];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(inputs.hash()));
    report_finding(spec.name, backend_name, c,
                   verdict.report() + "\ninputs hash (FNV-1a of q, k, v bytes): " + hash);
  }
  return 0;
}

}  // namespace

TargetSpec kernel_target_spec(SizeProfile profile) {
  TargetSpec spec;
  spec.name = "fuzz_kernel";
  spec.backend = Backend::kGpu;
  spec.limits = kKernelLimits;
  spec.profile = profile;
  // The elements come from the device (the same bits): on the host they cost more than the kernel's run.
  spec.draw_on = DrawOn::kDevice;
  // The rows the oracle checks: cases of up to full_check_limit rows in full; larger ones on the structural rows
  // of the first and the last (batch, head) pair (sample_rows: first and last rows, Q-tile boundaries, the first
  // and last fully masked rows, rows whose visible keys begin or end at a K-tile boundary, the diagonal's
  // crossings of the K tiles; with sequences, those of every sequence) plus random_rows seeded random rows.
  // The oracle costs O(keys * head_dim) per row, the kernel far less: these limits set the executions per second.
  // In the size profiles, cases of up to 64 rows in full and 8 random rows: about 19 rows per small case and 49 per
  // medium one, a fifth of the oracle's time at 256 and 16 (fuzz/README.md, "Executions per second").
  const bool profiled = profile != SizeProfile::kAll;
  spec.judge.full_check_limit = profiled ? 64 : 256;
  spec.judge.random_rows = profiled ? 8 : 16;
  return spec;
}

}  // namespace flashcheck::fuzz
