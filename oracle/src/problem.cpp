// The oracle's visibility rule: visible() states it key by key, straight from the window definition of
// oracle_problem.h; visible_keys() is the same set as a range (a window around one diagonal key is
// contiguous), which the tiers use per row. Names of the oracle's enums for reports.
#include "flashcheck/oracle_problem.h"

#include <algorithm>

namespace flashcheck::oracle {
namespace {

// The diagonal key of query row i: the key the causal boundary passes through.
int64_t diagonal(const Problem& p, int64_t i) {
  return p.visibility.alignment == Alignment::kBottomRight ? i + (p.seqlen_k - p.seqlen_q) : i;
}

}  // namespace

const char* to_string(Format format) {
  switch (format) {
    case Format::kF32: return "f32";
    case Format::kF16: return "f16";
    case Format::kBF16: return "bf16";
  }
  return "unknown";
}

const char* to_string(Arithmetic arithmetic) {
  switch (arithmetic) {
    case Arithmetic::kGeneralFp32: return "general-fp32";
    case Arithmetic::kTensorCore: return "tensor-core";
    case Arithmetic::kSplitTf32: return "split-tf32";
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

bool visible(const Problem& p, int64_t i, int64_t j) {
  const Visibility& w = p.visibility;
  const int64_t d = diagonal(p, i);
  const bool in_keys = 0 <= j && j < p.seqlen_k;
  const bool after_left_edge = w.window_left < 0 || d - w.window_left <= j;
  const bool before_right_edge = w.window_right < 0 || j <= d + w.window_right;
  return in_keys && after_left_edge && before_right_edge;
}

KeySpan visible_keys(const Problem& p, int64_t i) {
  const Visibility& w = p.visibility;
  const int64_t d = diagonal(p, i);
  int64_t begin = 0, end = p.seqlen_k;
  if (w.window_left >= 0) begin = std::max(begin, d - w.window_left);
  if (w.window_right >= 0) end = std::min(end, d + w.window_right + 1);
  // No key: an empty span inside [0, seqlen_k], so that offsetting a K/V pointer by begin stays in bounds.
  begin = std::min(begin, p.seqlen_k);
  return KeySpan{begin, std::max(begin, end)};
}

}  // namespace flashcheck::oracle
