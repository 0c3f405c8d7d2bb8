// view_row(): locates one query row's Q, K and V inside a Problem, with the shape checks that keep every
// later loop in bounds; a row of a sequence with lengths of its own reads only that sequence's keys.
#include "row_view.h"

#include "flashcheck/dropout.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace flashcheck::oracle::detail {

RowView view_row(const Problem& p, RowRef row) {
  // A row past its own sequence's length is outside the problem like any other: its Q row is unused and may hold
  // anything. The sequence's lengths are checked (invalid_argument naming the field) before they are used.
  const bool in_batch = row.b >= 0 && row.b < p.batch;
  if (!in_batch || row.h < 0 || row.h >= p.heads_q || row.i < 0 || row.i >= sequence_seqlen_q(p, row.b)) {
    throw std::out_of_range("oracle: row (" + std::to_string(row.b) + ", " + std::to_string(row.h) + ", " +
                            std::to_string(row.i) + ") is outside the problem");
  }
  if (p.head_dim_v < 0) {
    throw std::invalid_argument("oracle: head_dim_v = " + std::to_string(p.head_dim_v) +
                                " is negative; it must be >= 0 (0: equal to head_dim)");
  }
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.head_dim <= 0 || p.seqlen_k < 0) {
    throw std::out_of_range("oracle: the problem's heads_kv, head_dim or seqlen_k is invalid");
  }
  // Q and K rows hold head_dim values, V rows value_dim(): a V sized for the other width is a short span here.
  const int64_t dim_v = value_dim(p);
  const auto check_span = [](std::span<const double> span, const char* name, int64_t size, const char* shape) {
    if (static_cast<int64_t>(span.size()) < size) {
      throw std::out_of_range(std::string("oracle: the problem's ") + name + " span has " +
                              std::to_string(span.size()) + " values, shorter than its shape " + shape + " (" +
                              std::to_string(size) + ")");
    }
  };
  check_span(p.q, "q", p.batch * p.heads_q * p.seqlen_q * p.head_dim, "[batch, heads_q, seqlen_q, head_dim]");
  check_span(p.k, "k", p.batch * p.heads_kv * p.seqlen_k * p.head_dim, "[batch, heads_kv, seqlen_k, head_dim]");
  check_span(p.v, "v", p.batch * p.heads_kv * p.seqlen_k * dim_v, "[batch, heads_kv, seqlen_k, head_dim_v]");
  if (!p.sink.empty() && static_cast<int64_t>(p.sink.size()) < p.heads_q) {
    throw std::out_of_range("oracle: the problem's sink span is shorter than heads_q");
  }
  if (!(p.softcap >= 0.0) || !std::isfinite(p.softcap)) {
    throw std::invalid_argument("oracle: the softcap must be finite and >= 0 (0: none)");
  }
  RowView view;
  view.row = row;
  view.head_dim = p.head_dim;
  view.head_dim_v = dim_v;
  view.seqlen_k = sequence_seqlen_k(p, row.b);
  view.scale = p.scale;
  view.softcap = p.softcap;
  if (!p.sink.empty()) view.sink = p.sink[static_cast<size_t>(row.h)];
  const KeySpan keys = visible_keys(p, row.b, row.i);
  view.key_begin = keys.begin;
  view.visible = keys.size();
  const int64_t h_kv = row.h / (p.heads_q / p.heads_kv);
  view.q = p.q.data() + ((row.b * p.heads_q + row.h) * p.seqlen_q + row.i) * p.head_dim;
  // The arrays are sized by the longest sequence: seqlen_q and seqlen_k, not the row's own lengths.
  const int64_t key_offset = (row.b * p.heads_kv + h_kv) * p.seqlen_k + keys.begin;
  view.k = p.k.data() + key_offset * p.head_dim;
  view.v = p.v.data() + key_offset * dim_v;
  const int64_t descales = p.batch * p.heads_kv;
  const size_t descale_at = static_cast<size_t>(row.b * p.heads_kv + h_kv);  // the row's (batch, kv head) entry
  for (const auto& [span, name] : {std::pair{p.descale_q, "descale_q"}, std::pair{p.descale_k, "descale_k"},
                                   std::pair{p.descale_v, "descale_v"}}) {
    if (span.empty()) continue;
    if (static_cast<int64_t>(span.size()) != descales) {
      throw std::invalid_argument(std::string("oracle: ") + name + " has " + std::to_string(span.size()) +
                                  " values; it must be empty or [batch, heads_kv] (" + std::to_string(descales) + ")");
    }
    const double d = span[descale_at];
    if (!(d > 0.0) || !std::isfinite(d) || static_cast<double>(static_cast<float>(d)) != d) {
      throw std::invalid_argument(std::string("oracle: ") + name + " holds " + std::to_string(d) +
                                  "; a descale must be a finite fp32 value > 0");
    }
    if (p.dropout.p != 0.0f) {
      throw std::invalid_argument(std::string("oracle: ") + name + " with a dropout: descales and a dropout do not go "
                                  "together (the fp8 path has no dropout)");
    }
  }
  const auto descale_of = [&](std::span<const double> span) {
    return span.empty() ? 1.0 : span[descale_at];
  };
  if (!p.descale_q.empty() || !p.descale_k.empty()) {
    // scale d_q is exact in double (two 24-bit significands); times d_k it needs up to 72 bits: hi + lo exactly.
    const double dq = descale_of(p.descale_q), dk = descale_of(p.descale_k);
    const double a = p.scale * dq;
    view.scale = a * dk;
    view.scale_lo = std::fma(a, dk, -view.scale);
    view.folded_scale32 = static_cast<float>(static_cast<float>(static_cast<float>(p.scale) * static_cast<float>(dq)) *
                                         static_cast<float>(dk));
  } else {
    view.folded_scale32 = static_cast<float>(p.scale);
  }
  view.value_scale = descale_of(p.descale_v);
  if (p.dropout.p != 0.0f) {  // keep_scale throws for a p outside [0, 1), NaN included
    view.value_scale = keep_scale(p.dropout.p);
    view.dropout_p = p.dropout.p;
    view.keep.resize(static_cast<size_t>(view.visible));
    for (int64_t j = 0; j < view.visible; ++j) {
      view.keep[static_cast<size_t>(j)] = dropout_kept(p, p.dropout, row.b, row.h, row.i, keys.begin + j) ? 1 : 0;
    }
  }
  return view;
}

}  // namespace flashcheck::oracle::detail
