// What checking one case costs on the host, estimated before anything is allocated: the memory of the inputs,
// the outputs, the oracle's per-thread working set (which grows with the visible keys of a row) times the
// threads, the verdict's chunk of prepared rows; and the time of the oracle terms (one visible key times one
// head_dim element of a checked row), the emulated reference of the statistical check included. The tools warn
// before a case that takes minutes or gigabytes and reject one over the memory cap. An estimate, not a bound:
// the constants are measured (docs/design/oracle-speed.md) and the memory side rounds up.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flashcheck/attention.h"
#include "flashcheck/case.h"

namespace flashcheck {

// Rates per core, fitted to whole verdicts on the development machine (2 shared cores): an fp32 row of 16M keys
// at d = 1 on the host model in 8.4 s (estimated 9 s), 128 rows of 2e5 keys at d = 64 in 175 s (estimated 3 min).
// The fast tier alone is faster (docs/design/oracle-speed.md: 2e8 to 4e8 terms/s at d = 64, bench/oracle_bench.cpp);
// long rows at large head_dim are memory-bound, and at small head_dim a term is a whole key (an exp and more).
inline constexpr double kTermsPerSecond = 1e8;  // rate(d) = kTermsPerSecond * d / (d + kHalfRateDim): 3.3e7 at d = 1
inline constexpr double kHalfRateDim = 2.0;
// The verdict's cost of one term in units of 1 / rate(d): the exact row (1) plus the emulated reference of the RMS
// check, an ensemble of fp32-emulated members (about 12: 70% of the verdict against the fast tier's 6%).
inline constexpr double kEmulatedCostFactor = 12.0;
// The host model's cost of one term of every row (it computes them all, the verdict only the checked ones).
inline constexpr double kModelCostFactor = 4.0;
// Drawing one input element (a Philox call, a log and a cos, the dtype rounding; inputs.cpp): 32M fp32 elements in
// 5 s on the development machine. And touching the buffers (page faults, poison and copies): about 1 GB/s.
inline constexpr double kElementsPerSecond = 6e6;
inline constexpr double kBytesPerSecond = 1e9;

// Warn above these (the tools' "minutes or gigabytes").
inline constexpr double kWarnSeconds = 60.0;
inline constexpr double kWarnBytes = double(int64_t{1} << 30);
// The memory cap without FLASHCHECK_MEMORY_CAP or --memory-cap: this or the available memory, the lower.
inline constexpr int64_t kDefaultMemoryCap = int64_t{16} << 30;

struct BudgetOptions {
  int64_t full_check_limit = 4096;  // as JudgeOptions: every row up to this many, else sampled rows
  int64_t random_rows = 64;
  bool check_rms = true;            // the emulated reference runs (JudgeOptions::check_rms)
  bool host_model = false;          // the case runs on the host model (its run costs host time and memory)
  int threads = 0;                  // oracle threads; 0: oracle::max_threads()
  // > 0: a case whose buffers alone exceed this many bytes is estimated no further (rows_estimated false): the
  // tools reject it without the row loops, which a hostile line can make as long as it likes.
  int64_t memory_cap = 0;
};

struct Budget {
  // Bytes (doubles: a legal case may need more than 2^63).
  double input_bytes = 0;    // Q, K, V encoded in the dtype (padded layout) and decoded as doubles, the sink
  double output_bytes = 0;   // the output images (O padded like Q, LSE, m, l with their guards) and O decoded
  // The per-thread working set at the longest checked row, times the threads in use, plus the fast tier's scratch
  // of the calling thread (the worst row's printout recomputes a row there, beside the OpenMP workers' scratch).
  double oracle_bytes = 0;
  double verdict_bytes = 0;  // the chunk of prepared rows (exact row, bound, emulated reference) and running sums
  double total_bytes = 0;
  double elements = 0;       // canonical elements of Q, K and V drawn by make_inputs
  bool rows_estimated = false;  // false: over BudgetOptions::memory_cap on the buffers alone; rows and time not estimated
  int threads = 1;               // oracle threads in use (no more than checked rows)
  int64_t rows_checked = 0;
  int64_t longest_row = 0;       // visible keys of the longest checked row
  double oracle_terms = 0;       // terms of the checked rows
  double model_terms = 0;        // terms of every row (host model only; else 0)
  double seconds = 0;            // estimated wall time of the model's run and the verdict
  bool is_large() const { return seconds >= kWarnSeconds || total_bytes >= kWarnBytes; }
  // "about 7.60 GiB (inputs 1.90 GiB, outputs 2.00 MiB, oracle 5.60 GiB over 2 threads, verdict 102 MiB)", each size
  // in the binary unit that shows three significant digits; "at least ..." when the rows were not estimated
  std::string memory_summary() const;
  // memory_summary() and "and about 3 min (1,048,576 input elements, 2.1e+11 oracle terms)"
  std::string summary() const;
};

// The estimate for a case that validates (validate_case, and validate_shape of its Params); any other case gives an
// empty Budget. Its cost is linear in the sequences and in the rows of one head of each, and it stops after the
// buffers when they alone exceed options.memory_cap.
Budget estimate_budget(const Case& c, const BudgetOptions& options = {});

// "17179869184", "16G", "16GiB", "512M", "1.5G" (binary units K, M, G, T, with an optional "iB" or "B").
Status parse_memory_size(std::string_view text, int64_t* bytes);
// min(kDefaultMemoryCap, MemAvailable of /proc/meminfo where it can be read).
int64_t default_memory_cap();
// FLASHCHECK_MEMORY_CAP when set (an error naming it when malformed), else default_memory_cap().
Status memory_cap_from_environment(int64_t* cap);

// kInvalidArgument over the cap: the estimate, the cap and how to raise it (--memory-cap or
// FLASHCHECK_MEMORY_CAP); ok otherwise.
Status check_memory(const Budget& budget, int64_t cap);

// A count as people read one: "1,100" below a billion, "2.1e+11" from there on.
std::string count_text(double n);

}  // namespace flashcheck
