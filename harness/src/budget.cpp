// estimate_budget (budget.h): the host memory and time of checking one case, from its shape alone. Memory is
// counted where it lives: harness/src/inputs.cpp (encoded and decoded inputs), runner.cpp (output images and O
// decoded; on the host model, copies of the encoded Q, K and V to compare after the call),
// oracle/src/fast_tier.cpp (FastScratch: six doubles and a flag per visible key, per thread),
// oracle/src/emulated.cpp (K and V as fp32 operands, four copies on the split-tf32 path, three fp32 arrays per key:
// the scores and x for both realizations; P*V's block sums, three per column), oracle/src/ordered_sums.cpp (a few head_dim vectors) and verdict.cpp (kChunkRows prepared rows).
#include "flashcheck/budget.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "flashcheck/oracle.h"
#include "flashcheck/oracle_bridge.h"
#include "flashcheck/runner.h"

namespace flashcheck {
namespace {

constexpr double kDouble = sizeof(double);
constexpr double kFastScratchPerKey = 6 * kDouble + 1;  // score hi/lo, |q.k|, flush, gap, weight; the usable flag
constexpr double kScoresPerKey = 3 * sizeof(float);     // the emulated reference's scores and x for both realizations
// Per column of a checked row: RowResult's nine vectors (o, abs_pv, dev_pv, dev_pv_score, dev_pv_gap, dev_pv_score_sq,
// abs_v_sum, abs_pv_light, o_err), RowBound's three (o, o_flush, o_trivial) and the emulated reference.
constexpr double kVerdictDoublesPerElement = 13;
constexpr double kOrderedSumVectors = 10;               // ordered_sums: pv_* and its running vectors, [head_dim] each
constexpr int64_t kVerdictChunkRows = 1024;             // verdict.cpp kChunkRows
constexpr int64_t kFullCheckStrideRows = int64_t{1} << 16;  // rows of one head visited to sum a full check's terms

// A size in the binary unit that shows it with three significant digits (bytes below 1 KiB): "512 bytes",
// "3.25 MiB", "16.0 GiB", so that no message reads "needs 0.0 GiB, over the cap of 0.0 GiB".
std::string size_text(double bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  char text[48];
  if (!(bytes >= 1024.0)) {
    std::snprintf(text, sizeof(text), "%.0f bytes", bytes);
    return text;
  }
  int unit = 0;
  double value = bytes / 1024.0;
  // A value that would print as 1024 (1023.5 and up, rounded) moves to the next unit.
  while (value >= 1023.5 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    value /= 1024.0;
    ++unit;
  }
  // Three significant digits as printed: the precision follows the rounded value (9.996 is "10.0", 99.96 "100").
  std::snprintf(text, sizeof(text), value >= 99.95 ? "%.0f %s" : value >= 9.995 ? "%.1f %s" : "%.2f %s", value,
                kUnits[unit]);
  return text;
}

}  // namespace

std::string Budget::memory_summary() const {
  if (!rows_estimated) {
    return "at least " + size_text(total_bytes) + " (inputs " + size_text(input_bytes) + ", outputs " +
           size_text(output_bytes) + "; the oracle's share not estimated)";
  }
  return "about " + size_text(total_bytes) + " (inputs " + size_text(input_bytes) + ", outputs " +
         size_text(output_bytes) + ", oracle " + size_text(oracle_bytes) + " over " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads") + ", verdict " + size_text(verdict_bytes) + ")";
}

// A count as people read one: 1,100 up to a billion, 2.1e+11 beyond.
std::string count_text(double n) {
  if (!(n < 1e9)) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2g", n);
    return text;
  }
  std::string digits = std::to_string(static_cast<int64_t>(n));
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

std::string Budget::summary() const {
  if (!rows_estimated) return memory_summary();
  char time[48];
  if (seconds < 90) {
    std::snprintf(time, sizeof(time), "%.0f s", seconds);
  } else if (seconds < 90 * 60) {
    std::snprintf(time, sizeof(time), "%.0f min", seconds / 60);
  } else {
    std::snprintf(time, sizeof(time), "%.1f h", seconds / 3600);
  }
  const std::string model = model_terms > 0 ? ", " + count_text(model_terms) + " host model terms" : "";
  return memory_summary() + " and about " + time + " (" + count_text(elements) + " input elements, " +
         count_text(oracle_terms) + " oracle terms" + model + ")";
}

Budget estimate_budget(const Case& c, const BudgetOptions& options) {
  Budget b;
  // A case whose shape the kernel's contract refuses has sizes that may not even fit int64: nothing to estimate.
  if (!validate_case(c).ok()) return b;
  const Params params = case_params(c);
  if (!validate_shape(params).ok()) return b;
  const KernelConfig config = select_config(params);
  const bool has_seqs = !c.seqs.empty();
  // The oracle's view of the shape, with each sequence's own lengths: rows past a sequence's q are never checked.
  std::vector<int64_t> seqlens_q, seqlens_k;
  for (const Sequence& s : c.seqs) {
    seqlens_q.push_back(s.q);
    seqlens_k.push_back(s.k);
  }
  const oracle::Problem problem = oracle_problem(params, {}, {}, {}, {}, seqlens_q, seqlens_k);
  const double batch = double(c.batch), heads_q = double(c.heads_q), heads_kv = double(c.heads_kv);
  const double sq = double(c.seqlen_q), sk = double(c.seqlen_k), d = double(c.head_dim), dv = double(c.value_dim());
  const double row_elems = d + double(c.pad), v_row_elems = dv + double(c.pad);
  const double term_dim = (d + dv) / 2;  // a visible key's elements per term (oracle::row_terms)
  const double esize = double(dtype_size(c.dtype));
  const double rows_total = batch * heads_q * sq;

  // Inputs (inputs.cpp make_inputs): encoded padded tensors and the decoded copies, and the sink. With sequences
  // the encoded rows are the packed ones (Q, O, LSE) and the packed or paged ones (K, V), plus the index arrays;
  // the decoded copies and the canonical outputs stay [B, H, S, D] with S the maxima.
  const double q_rows = has_seqs ? heads_q * double(params.total_q) : rows_total;
  const double kv_rows = heads_kv * (!has_seqs      ? batch * sk
                                     : c.page > 0 ? double(params.num_pages) * double(params.page_size)
                                                  : double(params.total_k));
  const double index_bytes = has_seqs ? (3 * batch + 2 + batch * double(params.max_pages_per_seq) +
                                         double(params.num_pages)) * sizeof(int32_t) + 2 * batch * sizeof(int64_t)
                                      : 0.0;
  const double q_elems = rows_total * d, k_elems = batch * heads_kv * sk * d, v_elems = batch * heads_kv * sk * dv;
  const double o_elems = rows_total * dv;
  const double qkv_encoded = ((q_rows + kv_rows) * row_elems + kv_rows * v_row_elems) * esize;
  b.input_bytes = qkv_encoded + (q_elems + k_elems + v_elems) * kDouble +
                  (c.sink ? heads_q * (sizeof(float) + 2 * kDouble) : 0.0) + 2 * index_bytes;
  // Outputs (runner.cpp): O's image padded like Q (V's row width), O decoded, and LSE, m, l as fp32 images and vectors.
  b.output_bytes = q_rows * v_row_elems * esize + o_elems * kDouble + (q_rows + rows_total) * 3 * sizeof(float) +
                   8 * double(kGuardBytes);
  // The host model reads Q, K and V in place; the runner keeps copies of their bytes to compare after the call.
  if (options.host_model) b.output_bytes += qkv_encoded;
  // Drawn elements: every canonical element of Q, K and V (rows past a sequence's length included).
  b.elements = q_elems + k_elems + v_elems;
  b.total_bytes = b.input_bytes + b.output_bytes;
  // Over the cap on the buffers alone: rejected without looking at rows, whose count a hostile line can make
  // astronomical (the row loops below are linear in the rows of a head).
  if (options.memory_cap > 0 && b.total_bytes > double(options.memory_cap)) return b;
  b.rows_estimated = true;

  // The checked rows (oracle::sample_rows) and their terms. A full check sums one head's rows of each sequence
  // (every head sees the same keys), visiting at most kFullCheckStrideRows of them evenly for a very long one.
  const int64_t sequences = has_seqs ? c.batch : (c.batch > 0 && c.heads_q > 0 ? 1 : 0);  // an empty batch: no rows
  const auto sequence_rows = [&](int64_t s) { return has_seqs ? c.seqs[static_cast<size_t>(s)].q : c.seqlen_q; };
  // sum over the sequences' rows of visible keys (one head each), and the longest row
  const auto head_terms = [&](int64_t* longest_out) {
    double terms = 0;
    for (int64_t s = 0; s < sequences; ++s) {
      const int64_t rows = sequence_rows(s);
      const int64_t stride = std::max<int64_t>(1, rows / kFullCheckStrideRows);
      for (int64_t i = 0; i < rows; i += stride) {
        const int64_t n = oracle::visible_keys(problem, s, i).size();
        terms += double(n) * double(std::min(stride, rows - i));
        if (longest_out) *longest_out = std::max(*longest_out, n);
      }
    }
    return terms * term_dim * (has_seqs ? 1.0 : batch);
  };
  const double checkable_rows = has_seqs ? heads_q * double(params.total_q) : rows_total;
  double terms_all_heads = 0;
  int64_t longest = 0;
  if (checkable_rows <= double(options.full_check_limit)) {
    terms_all_heads = head_terms(&longest) * heads_q;
    b.rows_checked = static_cast<int64_t>(checkable_rows);
    b.oracle_terms = terms_all_heads;
  } else {
    const std::vector<oracle::RowRef> rows = oracle::sample_rows(problem, config.block_m, config.block_n, c.seed,
                                                                 options.full_check_limit, options.random_rows);
    for (const oracle::RowRef& row : rows) {
      const int64_t n = oracle::visible_keys(problem, row.b, row.i).size();
      b.oracle_terms += double(n) * term_dim;
      longest = std::max(longest, n);
    }
    b.rows_checked = static_cast<int64_t>(rows.size());
    if (options.host_model) terms_all_heads = head_terms(nullptr) * heads_q;
  }
  b.longest_row = longest;
  // The host model also walks every row once per split-KV run, whether it sees keys or not (its state and O's
  // columns): a row of no keys under hundreds of splits costs as much as hundreds of visible keys.
  if (options.host_model) {
    b.model_terms = terms_all_heads + checkable_rows * double(std::max(params.num_splits, 1)) * double(dv + 1);
  }

  // The oracle's working set per thread at the longest row: the fast tier's per-key scratch, and with the RMS
  // check the emulated reference's fp32 K and V (value, hi, lo and lo toward zero on the split-tf32 path), its scores
  // and P*V's block sums.
  const double n = double(longest);
  const double operand_copies = config.path == ComputePath::kSplitTf32 ? 4 : 1;
  double per_thread = n * kFastScratchPerKey + kOrderedSumVectors * dv * kDouble;
  if (options.check_rms) {
    per_thread += n * (kScoresPerKey + operand_copies * (d + dv) * sizeof(float)) + 3 * dv * kDouble;
  }
  // One double per K/V tile at most for the running sums.
  per_thread += std::ceil(n / std::max<double>(1, config.block_n)) * kDouble;
  const int threads = options.threads > 0 ? options.threads : oracle::max_threads();
  b.threads = static_cast<int>(std::clamp<int64_t>(b.rows_checked, 1, std::max(threads, 1)));
  b.oracle_bytes = per_thread * b.threads + n * kFastScratchPerKey;
  b.verdict_bytes =
      double(std::min<int64_t>(b.rows_checked, kVerdictChunkRows)) * dv * kVerdictDoublesPerElement * kDouble;
  b.total_bytes = b.input_bytes + b.output_bytes + b.oracle_bytes + b.verdict_bytes;

  // Time: drawing the inputs and touching the buffers, the verdict's terms spread over the threads, the host
  // model's on one.
  const double rate = kTermsPerSecond * term_dim / (term_dim + kHalfRateDim);
  const double verdict_cost = 1 + (options.check_rms ? kEmulatedCostFactor : 0);
  b.seconds = b.elements / kElementsPerSecond + (b.input_bytes + b.output_bytes) / kBytesPerSecond +
              b.oracle_terms * verdict_cost / (rate * b.threads) + b.model_terms * kModelCostFactor / rate;
  return b;
}

Status parse_memory_size(std::string_view text, int64_t* bytes) {
  const std::string s(text);
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(begin, &end);
  if (s.empty() || end == begin || errno != 0 || !(value >= 0) || std::isspace(static_cast<unsigned char>(s[0]))) {
    return {StatusCode::kInvalidArgument, "'" + s + "' is not a memory size (bytes, or a number with K, M, G or T)"};
  }
  std::string unit(end);
  double scale = 1;
  if (!unit.empty()) {
    const char prefix = static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0])));
    const std::string rest = unit.substr(1);
    const int power = prefix == 'K' ? 1 : prefix == 'M' ? 2 : prefix == 'G' ? 3 : prefix == 'T' ? 4 : 0;
    if (power == 0 || !(rest.empty() || rest == "B" || rest == "iB")) {
      return {StatusCode::kInvalidArgument, "'" + s + "' is not a memory size (bytes, or a number with K, M, G or T)"};
    }
    scale = std::ldexp(1.0, 10 * power);
  }
  const double total = value * scale;
  if (!(total < 0x1p63)) return {StatusCode::kInvalidArgument, "'" + s + "' is over 2^63 bytes"};
  *bytes = static_cast<int64_t>(total);
  return {};
}

int64_t default_memory_cap() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return std::min(kDefaultMemoryCap, kib * 1024);
  }
  return kDefaultMemoryCap;
}

Status memory_cap_from_environment(int64_t* cap) {
  const char* text = std::getenv("FLASHCHECK_MEMORY_CAP");
  if (text == nullptr || *text == '\0') {
    *cap = default_memory_cap();
    return {};
  }
  if (Status s = parse_memory_size(text, cap); !s.ok()) {
    return {StatusCode::kInvalidArgument, "FLASHCHECK_MEMORY_CAP: " + s.message()};
  }
  return {};
}

Status check_memory(const Budget& budget, int64_t cap) {
  if (budget.total_bytes <= double(cap)) return {};
  return {StatusCode::kInvalidArgument, "memory: the case needs " + budget.memory_summary() + ", over the cap of " +
                                            size_text(double(cap)) +
                                            "; raise it with --memory-cap SIZE or FLASHCHECK_MEMORY_CAP=SIZE (e.g. 64G)"};
}

}  // namespace flashcheck
