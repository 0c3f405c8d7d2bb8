// The oracle's visibility rule: visible() states it key by key, straight from the window definition of
// oracle_problem.h; visible_keys() is the same set as a range (a window around one diagonal key is
// contiguous), which the tiers use per row. Both take a sequence's own lengths, checked here. Names of the
// oracle's enums for reports.
#include "flashcheck/oracle_problem.h"

#include <algorithm>
#include <stdexcept>

namespace flashcheck::oracle {
namespace {

// Entry b of a per-sequence length span (`field` names it), or `full` where the span is empty.
int64_t sequence_length(std::span<const int64_t> lengths, const char* field, int64_t batch, int64_t full,
                        const char* full_name, int64_t b) {
  if (b < 0 || b >= batch) {
    throw std::out_of_range("oracle: sequence " + std::to_string(b) + " is outside the batch of " +
                            std::to_string(batch));
  }
  if (lengths.empty()) return full;
  if (static_cast<int64_t>(lengths.size()) != batch) {
    throw std::invalid_argument(std::string("oracle: ") + field + " has " + std::to_string(lengths.size()) +
                                " entries; it must be empty or have one per sequence (batch " +
                                std::to_string(batch) + ")");
  }
  const int64_t length = lengths[static_cast<size_t>(b)];
  if (length < 0 || length > full) {
    throw std::invalid_argument(std::string("oracle: ") + field + "[" + std::to_string(b) + "] = " +
                                std::to_string(length) + " is outside [0, " + full_name + " = " +
                                std::to_string(full) + "]");
  }
  return length;
}

// The lengths row visibility reads: sequence b's own (seqlen_q, seqlen_k).
struct SequenceLengths {
  int64_t seqlen_q = 0, seqlen_k = 0;
};
SequenceLengths lengths_of(const Problem& p, int64_t b) {
  return {sequence_seqlen_q(p, b), sequence_seqlen_k(p, b)};
}

// Key indices and window edges in 128 bits: a diagonal plus or minus a window of up to INT64_MAX cannot overflow.
using Wide = __int128;

// The diagonal key of query row i in a sequence of these lengths: the key the causal boundary passes through.
int64_t diagonal(const Problem& p, const SequenceLengths& len, int64_t i) {
  return p.visibility.alignment == Alignment::kBottomRight ? i + (len.seqlen_k - len.seqlen_q) : i;
}

bool visible_in(const Problem& p, const SequenceLengths& len, int64_t i, int64_t j) {
  const Visibility& w = p.visibility;
  const Wide d = diagonal(p, len, i);  // the edges in 128 bits: a window may reach INT64_MAX
  const bool in_keys = 0 <= j && j < len.seqlen_k;
  const bool after_left_edge = w.window_left < 0 || d - w.window_left <= j;
  const bool before_right_edge = w.window_right < 0 || j <= d + w.window_right;
  return in_keys && after_left_edge && before_right_edge;
}

KeySpan visible_keys_in(const Problem& p, const SequenceLengths& len, int64_t i) {
  const Visibility& w = p.visibility;
  const Wide d = diagonal(p, len, i);
  Wide begin = 0, end = len.seqlen_k;
  if (w.window_left >= 0) begin = std::max(begin, d - w.window_left);
  if (w.window_right >= 0) end = std::min(end, d + w.window_right + 1);
  // No key: an empty span inside [0, seqlen_k], so that offsetting a K/V pointer by begin stays in bounds.
  begin = std::min(begin, Wide{len.seqlen_k});
  return KeySpan{static_cast<int64_t>(begin), static_cast<int64_t>(std::max(begin, end))};
}

// The problem-wide lengths, for a problem without per-sequence ones.
SequenceLengths uniform_lengths(const Problem& p, const char* function) {
  if (has_sequence_lengths(p)) {
    throw std::invalid_argument(std::string("oracle: ") + function +
                                " without a sequence on a problem with per-sequence lengths (seqlens_q, "
                                "seqlens_k): pass the sequence b");
  }
  return {p.seqlen_q, p.seqlen_k};
}

}  // namespace

int64_t sequence_seqlen_q(const Problem& p, int64_t b) {
  return sequence_length(p.seqlens_q, "seqlens_q", p.batch, p.seqlen_q, "seqlen_q", b);
}

int64_t sequence_seqlen_k(const Problem& p, int64_t b) {
  return sequence_length(p.seqlens_k, "seqlens_k", p.batch, p.seqlen_k, "seqlen_k", b);
}

void check_values(const char* field, size_t size, int64_t want) {
  if (static_cast<int64_t>(size) != want) {
    throw std::invalid_argument(std::string("oracle: ") + field + " has " + std::to_string(size) +
                                " values; the problem needs " + std::to_string(want));
  }
}

void check_sequence_lengths(const Problem& p) {
  // Entry by entry through the accessors (one message for every fault); a span with entries and no sequence to
  // hold them (batch 0) is one of the wrong length too.
  // Without lengths of their own every sequence has the problem's: nothing to check (and no loop over a batch that
  // may be astronomically large when the problem has no rows).
  if (has_sequence_lengths(p)) {
    for (int64_t b = 0; b < p.batch; ++b) lengths_of(p, b);
  }
  if (p.batch <= 0 && has_sequence_lengths(p)) {
    const bool q_wrong = !p.seqlens_q.empty();
    throw std::invalid_argument(std::string("oracle: ") + (q_wrong ? "seqlens_q" : "seqlens_k") + " has " +
                                std::to_string(q_wrong ? p.seqlens_q.size() : p.seqlens_k.size()) +
                                " entries; it must be empty or have one per sequence (batch " +
                                std::to_string(p.batch) + ")");
  }
}

const char* to_string(Format format) {
  switch (format) {
    case Format::kF32: return "f32";
    case Format::kF16: return "f16";
    case Format::kBF16: return "bf16";
    case Format::kE4M3: return "f8e4m3";
  }
  return "unknown";
}

std::optional<Format> format_from_name(std::string_view name) {
  for (Format format : {Format::kF32, Format::kF16, Format::kBF16, Format::kE4M3}) {
    if (name == to_string(format)) return format;
  }
  return std::nullopt;
}

const char* to_string(Arithmetic arithmetic) {
  switch (arithmetic) {
    case Arithmetic::kGeneralFp32: return "general-fp32";
    case Arithmetic::kTensorCore: return "tensor-core";
    case Arithmetic::kSplitTf32: return "split-tf32";
    case Arithmetic::kTensorCoreFp8: return "tensor-core-fp8";
  }
  return "unknown";
}

std::string to_string(const Visibility& w) {
  if (w == kAllKeys) return "all";
  if (w == kCausalTopLeft) return "causal-tl";
  if (w == kCausalBottomRight) return "causal-br";
  return "window(" + std::to_string(w.window_left) + "," + std::to_string(w.window_right) + "," +
         (w.alignment == Alignment::kBottomRight ? "br" : "tl") + ")";
}

bool visible(const Problem& p, int64_t b, int64_t i, int64_t j) { return visible_in(p, lengths_of(p, b), i, j); }

KeySpan visible_keys(const Problem& p, int64_t b, int64_t i) { return visible_keys_in(p, lengths_of(p, b), i); }

bool visible(const Problem& p, int64_t i, int64_t j) { return visible_in(p, uniform_lengths(p, "visible()"), i, j); }

KeySpan visible_keys(const Problem& p, int64_t i) {
  return visible_keys_in(p, uniform_lengths(p, "visible_keys()"), i);
}

}  // namespace flashcheck::oracle
