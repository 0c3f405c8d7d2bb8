// view_row(): locates one query row's Q, K and V inside a Problem, with the shape checks that keep every
// later loop in bounds; a row of a sequence with lengths of its own reads only that sequence's keys.
#include "row_view.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace flashcheck::oracle::detail {

RowView view_row(const Problem& p, RowRef row) {
  // A row past its own sequence's length is outside the problem like any other: its Q row is unused and may hold
  // anything. The sequence's lengths are checked (invalid_argument naming the field) before they are used.
  const bool in_batch = row.b >= 0 && row.b < p.batch;
  if (!in_batch || row.h < 0 || row.h >= p.heads_q || row.i < 0 || row.i >= sequence_seqlen_q(p, row.b)) {
    throw std::out_of_range("oracle: row (" + std::to_string(row.b) + ", " + std::to_string(row.h) + ", " +
                            std::to_string(row.i) + ") is outside the problem");
  }
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.head_dim <= 0 || p.seqlen_k < 0) {
    throw std::out_of_range("oracle: the problem's heads_kv, head_dim or seqlen_k is invalid");
  }
  const int64_t q_size = p.batch * p.heads_q * p.seqlen_q * p.head_dim;
  const int64_t kv_size = p.batch * p.heads_kv * p.seqlen_k * p.head_dim;
  if (static_cast<int64_t>(p.q.size()) < q_size || static_cast<int64_t>(p.k.size()) < kv_size ||
      static_cast<int64_t>(p.v.size()) < kv_size) {
    throw std::out_of_range("oracle: the problem's q, k or v span is shorter than its shape");
  }
  if (!p.sink.empty() && static_cast<int64_t>(p.sink.size()) < p.heads_q) {
    throw std::out_of_range("oracle: the problem's sink span is shorter than heads_q");
  }
  if (!(p.softcap >= 0.0) || !std::isfinite(p.softcap)) {
    throw std::invalid_argument("oracle: the softcap must be finite and >= 0 (0: none)");
  }
  RowView view;
  view.row = row;
  view.head_dim = p.head_dim;
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
  const int64_t kv_offset = ((row.b * p.heads_kv + h_kv) * p.seqlen_k + keys.begin) * p.head_dim;
  view.k = p.k.data() + kv_offset;
  view.v = p.v.data() + kv_offset;
  return view;
}

}  // namespace flashcheck::oracle::detail
