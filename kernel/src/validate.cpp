// can_implement(): the API contract, checked on the host before any launch.
// Every rejection names the field and the offending value. The pointed-to memory is never touched:
// the checks use only the sizes, strides and addresses. Order matters: enums and sizes first (a no-op
// problem with bad sizes is still an error), then the no-op exit, then pointers and memory layout.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/backward.h"
#include "flashcheck/dtype.h"
#include "flashcheck/mask_names.h"
#include "backward/arith.h"
#include "families.h"

namespace flashcheck {
namespace {

inline constexpr int64_t kMaxHeadDim = 256;
inline constexpr int32_t kMaxSplits = 256;

Status invalid(const std::string& message) { return {StatusCode::kInvalidArgument, message}; }

// "a, b or c": the names of a table's rows that pass `keep` (dtype.h, mask_names.h), for messages.
template <typename Table, typename Keep>
std::string known_names(const Table& table, Keep keep) {
  std::vector<const char*> names;
  for (const auto& row : table) {
    if (keep(row)) names.push_back(row.name);
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return out;
}
template <typename Table>
std::string known_names(const Table& table) {
  return known_names(table, [](const auto&) { return true; });
}
std::string window_mask_names() {
  return known_names(kMaskNames, [](const MaskName& m) { return m.takes_window; });
}

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// a * b, or nullopt-like false on int64 overflow (operands are non-negative here).
bool mul_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

// One tensor's extents and strides (elements), with the head_dim axis of unit stride.
struct TensorView {
  const char* name;
  const void* ptr;
  int64_t element_bytes;
  std::array<int64_t, 4> extent;  // batch, heads, seqlen, columns (head_dim, or value_head_dim for V and O)
  std::array<int64_t, 4> stride;
};

// Largest element offset + 1 (the number of elements the view spans), checked for overflow in elements
// and in bytes. All extents are > 0 here.
Status span_elements(const TensorView& t, int64_t* span) {
  int64_t last = 0;
  for (int axis = 0; axis < 4; ++axis) {
    int64_t term = 0;
    if (!mul_ok(t.extent[axis] - 1, t.stride[axis], &term) || !add_ok(last, term, &last)) {
      return invalid(cat(t.name, ": the largest element offset overflows int64 (extents ", t.extent[0], "x",
                         t.extent[1], "x", t.extent[2], "x", t.extent[3], ")"));
    }
  }
  int64_t bytes = 0;
  if (!add_ok(last, 1, span) || !mul_ok(*span, t.element_bytes, &bytes)) {
    return invalid(cat(t.name, ": the tensor's byte extent overflows int64"));
  }
  return Status::ok_status();
}

Status check_strides(const char* name, const Strides& s) {
  if (s.batch < 0 || s.head < 0 || s.row < 0) {
    return invalid(cat(name, "_stride: strides must be non-negative (got batch=", s.batch, " head=", s.head,
                       " row=", s.row, ")"));
  }
  return Status::ok_status();
}

// An output view must map distinct indices to distinct elements, or two threads would write one
// address. Sufficient test: with the axes sorted by stride, each stride exceeds the span of the
// smaller ones. Axes of extent 1 never step, so their stride is irrelevant.
Status check_no_self_overlap(const TensorView& t) {
  std::array<int, 4> order{0, 1, 2, 3};
  std::sort(order.begin(), order.end(), [&](int a, int b) { return t.stride[a] < t.stride[b]; });
  int64_t span = 1;  // elements covered by the axes already placed
  for (int axis : order) {
    if (t.extent[axis] == 1) continue;
    if (t.stride[axis] < span) {
      static constexpr const char* kAxisNames[4] = {"batch", "head", "row", "head_dim"};
      return invalid(cat(t.name, "_stride: output elements overlap (", kAxisNames[axis], " stride ",
                         t.stride[axis], " < ", span, " elements spanned by the smaller axes)"));
    }
    span = t.stride[axis] * (t.extent[axis] - 1) + span;  // no overflow: bounded by span_elements
  }
  return Status::ok_status();
}

// End address of [ptr, ptr + bytes), saturating: a range that would wrap the address space ends at its top.
uintptr_t range_end(const void* ptr, int64_t bytes) {
  uintptr_t end = 0;
  if (__builtin_add_overflow(reinterpret_cast<uintptr_t>(ptr), static_cast<uintptr_t>(bytes), &end)) {
    return std::numeric_limits<uintptr_t>::max();
  }
  return end;
}

bool ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  return reinterpret_cast<uintptr_t>(a) < range_end(b, b_bytes) &&
         reinterpret_cast<uintptr_t>(b) < range_end(a, a_bytes);
}

// Which layouts the params describe. The sizes tell it as well as the index pointers, so that params whose arrays
// are not bound yet (validate_shape's callers) describe the same tensors.
bool q_packed(const Params& p) { return p.cu_seqlens_q != nullptr || p.total_q != 0; }
bool kv_paged(const Params& p) { return p.page_table != nullptr || p.page_size != 0; }
bool kv_packed(const Params& p) { return !kv_paged(p) && (p.cu_seqlens_k != nullptr || p.total_k != 0); }

// The sequence fields that need no pointer: split count, totals, page geometry.
Status validate_sequence_sizes(const Params& p) {
  if (p.num_splits < 0 || p.num_splits > kMaxSplits) {
    return invalid(cat("num_splits: must be in 0..", kMaxSplits, ", 0 meaning the heuristic (got ", p.num_splits, ")"));
  }
  if (p.total_q < 0 || p.total_k < 0) {
    return invalid(cat(p.total_q < 0 ? "total_q" : "total_k", ": must be >= 0 (got ", std::min(p.total_q, p.total_k), ")"));
  }
  if (!kv_paged(p)) {
    for (const auto& [name, value] : {std::pair{"num_pages", p.num_pages}, std::pair{"max_pages_per_seq", p.max_pages_per_seq}}) {
      if (value != 0) return invalid(cat(name, ": only with page_table (got ", value, " without it)"));
    }
    return Status::ok_status();
  }
  if (p.total_k != 0) return invalid(cat("total_k: not with a paged cache (got ", p.total_k, ")"));
  for (const auto& [name, value] : {std::pair{"page_size", p.page_size}, std::pair{"num_pages", p.num_pages},
                                    std::pair{"max_pages_per_seq", p.max_pages_per_seq}}) {
    if (value < 1) return invalid(cat(name, ": must be >= 1 with page_table (got ", value, ")"));
  }
  int64_t capacity = 0, table = 0;
  if (!mul_ok(p.max_pages_per_seq, p.page_size, &capacity) || !mul_ok(p.batch, p.max_pages_per_seq, &table) ||
      capacity > std::numeric_limits<int32_t>::max() || p.num_pages > std::numeric_limits<int32_t>::max()) {
    return invalid(cat("max_pages_per_seq: capacity max_pages_per_seq * page_size (", p.max_pages_per_seq, " * ",
                       p.page_size, ") and num_pages (", p.num_pages, ") must fit int32 indices"));
  }
  return Status::ok_status();
}

// Dropout's fields (attention.h): p in [0, 1); with p > 0 neither a paged cache nor split-KV, whose kernels draw no
// mask (num_splits = 0 is allowed: the heuristic picks 1 under dropout, pick_splits); the mask dump only with p > 0.
Status validate_dropout(const Params& p) {
  if (!(p.dropout_p >= 0.0f && p.dropout_p < 1.0f)) {
    return invalid(cat("dropout_p: must be in [0, 1), 0 meaning off (got ", p.dropout_p, ")"));
  }
  if (p.dropout_p == 0.0f) {
    if (p.dropout_mask_out != nullptr) return invalid("dropout_mask_out: only with dropout_p > 0 (got dropout_p = 0)");
    return Status::ok_status();
  }
  if (kv_paged(p)) {
    return {StatusCode::kUnsupported, cat("dropout_p: dropout is not implemented with paged K/V (page_table; got "
                                          "dropout_p = ", p.dropout_p, ")")};
  }
  if (p.num_splits > 1) {
    return {StatusCode::kUnsupported, cat("num_splits: dropout is not implemented with split-KV (num_splits 1, or 0 "
                                          "for the heuristic, which then picks 1; got ", p.num_splits, ")")};
  }
  return Status::ok_status();
}

// The fp8 fields: descales only with f8e4m3 inputs; the fp8 path reads dense or packed K/V, unsplit, undropped.
Status validate_fp8(const Params& p) {
  const bool fp8 = p.dtype == DType::kF8E4M3;
  for (const auto& [name, ptr] : {std::pair{"descale_q", p.descale_q}, std::pair{"descale_k", p.descale_k},
                                  std::pair{"descale_v", p.descale_v}}) {
    if (ptr != nullptr && !fp8) {
      return invalid(cat(name, ": only with dtype ", to_string(DType::kF8E4M3), " (got dtype ", to_string(p.dtype), ")"));
    }
  }
  if (!fp8) return Status::ok_status();
  if (p.dropout_p != 0.0f) {
    return {StatusCode::kUnsupported, cat("dropout_p: the fp8 path has no dropout (dtype ", to_string(p.dtype),
                                          "; got dropout_p = ", p.dropout_p, ")")};
  }
  if (kv_paged(p)) {
    return {StatusCode::kUnsupported, cat("page_table: the fp8 path reads dense or packed K/V (dtype ",
                                          to_string(p.dtype), ")")};
  }
  if (p.num_splits > 1) {
    return {StatusCode::kUnsupported, cat("num_splits: the fp8 path has no split-KV (1, or 0 for the heuristic, which "
                                          "then picks 1; got ", p.num_splits, ")")};
  }
  return Status::ok_status();
}

// The index pointers the sizes call for, and no others.
Status validate_sequence_pointers(const Params& p) {
  if (p.cu_seqlens_q == nullptr && p.total_q != 0) {
    return invalid(cat("total_q: only with cu_seqlens_q (got ", p.total_q, " without it)"));
  }
  if (p.cu_seqlens_k == nullptr && p.total_k != 0) {
    return invalid(cat("total_k: only with cu_seqlens_k (got ", p.total_k, " without it)"));
  }
  if (p.page_table == nullptr) {
    if (p.page_size != 0) return invalid(cat("page_size: only with page_table (got ", p.page_size, " without it)"));
    return Status::ok_status();
  }
  if (p.cu_seqlens_k != nullptr) {
    return invalid("cu_seqlens_k: not with page_table (a paged cache's sequences are its page-table rows)");
  }
  if (p.seqused_k == nullptr) return invalid("seqused_k: required with page_table (the keys of each sequence)");
  return Status::ok_status();
}

// The four tensors as (extent, stride) views: dense [batch, heads, seqlen, columns]; packed sequences
// [1, heads, total, columns]; a paged cache [num_pages, heads_kv, page_size, columns] (attention.h), where Q and K
// have head_dim columns and V and O value_head_dim.
struct TensorViews {
  TensorView o, q, k, v;
};
TensorViews tensor_views(const Params& p) {
  const int64_t elem = dtype_size(p.dtype);
  const int64_t dim_v = value_head_dim(p);
  const auto view = [&](const char* name, const void* ptr, const Strides& s, int64_t batch, int64_t heads, int64_t rows,
                        int64_t columns, bool packed, int64_t bytes = 0) {
    return TensorView{name, ptr, bytes != 0 ? bytes : elem, {packed ? 1 : batch, heads, rows, columns},
                      {packed ? 0 : s.batch, s.head, s.row, 1}};
  };
  const bool packed = q_packed(p);
  const int64_t q_rows = packed ? p.total_q : p.seqlen_q;
  // O in the output dtype (bf16 for fp8 inputs).
  TensorViews v{view("o", p.o, p.o_stride, p.batch, p.heads_q, q_rows, dim_v, packed, dtype_size(output_dtype(p.dtype))),
                view("q", p.q, p.q_stride, p.batch, p.heads_q, q_rows, p.head_dim, packed),
                {}, {}};
  if (kv_paged(p)) {
    v.k = view("k", p.k, p.k_stride, p.num_pages, p.heads_kv, p.page_size, p.head_dim, false);
    v.v = view("v", p.v, p.v_stride, p.num_pages, p.heads_kv, p.page_size, dim_v, false);
  } else {
    const bool packed_kv = kv_packed(p);
    const int64_t kv_rows = packed_kv ? p.total_k : p.seqlen_k;
    v.k = view("k", p.k, p.k_stride, p.batch, p.heads_kv, kv_rows, p.head_dim, packed_kv);
    v.v = view("v", p.v, p.v_stride, p.batch, p.heads_kv, kv_rows, dim_v, packed_kv);
  }
  return v;
}

// Rows of LSE: batch * heads_q * seqlen_q, or heads_q * total_q with packed Q (validate_shape bounds both).
int64_t lse_rows(const Params& p) {
  return q_packed(p) ? p.heads_q * p.total_q : p.batch * p.heads_q * p.seqlen_q;
}

bool has_sequences(const Params& p) {
  return p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr || p.page_table != nullptr;
}

// Index arrays as read back for check_indices.
struct IndexArrays {
  std::vector<int32_t> cu_q, cu_k, used_k, pages;
};

// A prefix-sum array: starts at 0, never decreases, ends at `total`, each length within `max_len`.
Status check_prefix_sums(const char* name, const std::vector<int32_t>& cu, int64_t total, const char* total_name,
                         int64_t max_len, const char* max_name) {
  if (cu.front() != 0) return invalid(cat(name, "[0]: must be 0 (got ", cu.front(), ")"));
  for (size_t b = 1; b < cu.size(); ++b) {
    if (cu[b] < cu[b - 1]) {
      return invalid(cat(name, "[", b, "]: ", cu[b], " < ", name, "[", b - 1, "] = ", cu[b - 1], " (must not decrease)"));
    }
    if (cu[b] - cu[b - 1] > max_len) {
      return invalid(cat(name, "[", b, "]: sequence ", b - 1, " has ", cu[b] - cu[b - 1], " rows, more than ", max_name,
                         " = ", max_len));
    }
  }
  if (cu.back() != total) {
    return invalid(cat(name, "[", cu.size() - 1, "]: must equal ", total_name, " = ", total, " (got ", cu.back(), ")"));
  }
  return Status::ok_status();
}

Status check_index_contents(const Params& p, const IndexArrays& a) {
  if (p.cu_seqlens_q != nullptr) {
    if (Status st = check_prefix_sums("cu_seqlens_q", a.cu_q, p.total_q, "total_q", p.seqlen_q, "seqlen_q"); !st.ok()) return st;
  }
  if (p.cu_seqlens_k != nullptr) {
    const int64_t max_len = p.seqused_k != nullptr ? std::numeric_limits<int32_t>::max() : p.seqlen_k;
    if (Status st = check_prefix_sums("cu_seqlens_k", a.cu_k, p.total_k, "total_k", max_len, "seqlen_k"); !st.ok()) return st;
  }
  if (p.seqused_k == nullptr) return Status::ok_status();
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t used = a.used_k[b];
    const int64_t capacity = p.page_table != nullptr    ? p.max_pages_per_seq * p.page_size
                             : p.cu_seqlens_k != nullptr ? int64_t{a.cu_k[b + 1]} - a.cu_k[b]
                                                          : p.seqlen_k;
    if (used < 0 || used > capacity || used > p.seqlen_k) {
      return invalid(cat("seqused_k[", b, "]: ", used, " keys outside 0..", std::min(capacity, p.seqlen_k),
                         " (the sequence's capacity ", capacity, ", seqlen_k ", p.seqlen_k, ")"));
    }
    if (p.page_table == nullptr) continue;
    for (int64_t page = 0; page * p.page_size < used; ++page) {
      const int32_t index = a.pages[b * p.max_pages_per_seq + page];
      if (index < 0 || index >= p.num_pages) {
        return invalid(cat("page_table[", b, ", ", page, "]: page ", index, " outside 0..", p.num_pages - 1,
                           " (sequence ", b, " reads it: seqused_k = ", used, ")"));
      }
    }
  }
  return Status::ok_status();
}

}  // namespace

namespace detail {
bool rows_aligned(const Params& p, int64_t bytes) {
  const TensorViews views = tensor_views(p);
  for (const TensorView* t : {&views.o, &views.q, &views.k, &views.v}) {
    // Strides in elements (the params may not be validated yet: a stride in bytes could overflow).
    if (bytes % t->element_bytes != 0 || reinterpret_cast<uintptr_t>(t->ptr) % bytes != 0) return false;
    const int64_t elements = bytes / t->element_bytes;
    for (int axis = 0; axis < 3; ++axis) {
      if (t->extent[axis] > 1 && t->stride[axis] % elements != 0) return false;
    }
  }
  return true;
}

// Reads `count` int32 from host memory; the CUDA library's launch.cu defines the strong version, which also reads
// device memory.
__attribute__((weak)) Status read_index_array(const int32_t* src, int64_t count, std::vector<int32_t>* out) {
  out->assign(src, src + count);
  return Status::ok_status();
}
}  // namespace detail

Status check_indices(const Params& p) {
  if (Status st = validate_shape(p); !st.ok()) return st;
  if (p.batch == 0) return Status::ok_status();
  IndexArrays a;
  struct Array {
    const char* name;
    const int32_t* ptr;
    int64_t count;
    std::vector<int32_t>* out;
  };
  const std::array<Array, 4> arrays{{{"cu_seqlens_q", p.cu_seqlens_q, p.batch + 1, &a.cu_q},
                                     {"cu_seqlens_k", p.cu_seqlens_k, p.batch + 1, &a.cu_k},
                                     {"seqused_k", p.seqused_k, p.batch, &a.used_k},
                                     {"page_table", p.page_table, p.batch * p.max_pages_per_seq, &a.pages}}};
  for (const Array& array : arrays) {
    if (array.ptr == nullptr) continue;
    if (Status st = detail::read_index_array(array.ptr, array.count, array.out); !st.ok()) {
      return {st.code(), cat(array.name, ": ", st.message())};
    }
  }
  return check_index_contents(p, a);
}

Status validate_shape(const Params& p) {
  if (find_dtype(p.dtype) == nullptr) {
    return {StatusCode::kUnsupported, cat("dtype: unsupported value ", static_cast<int32_t>(p.dtype), " (expected ",
                                          known_names(kDTypes), ")")};
  }
  if (find_mask(p.mask) == nullptr) {
    return {StatusCode::kUnsupported,
            cat("mask: unsupported value ", static_cast<int32_t>(p.mask), " (expected ", known_names(kMaskNames), ")")};
  }
  const bool windowed = takes_window(p.mask);
  for (const auto& [name, value] : {std::pair{"window_left", p.window_left}, std::pair{"window_right", p.window_right}}) {
    if (value < -1) return invalid(cat(name, ": must be -1 (unbounded) or >= 0 (got ", value, ")"));
    if (!windowed && value != -1) {
      return invalid(cat(name, ": only the window masks take a window (got ", value, " with mask ", to_string(p.mask),
                         "; use ", window_mask_names(), ")"));
    }
  }
  if (!(p.softcap >= 0.0f) || !std::isfinite(p.softcap)) {
    return invalid(cat("softcap: must be finite and >= 0, 0 meaning off (got ", p.softcap, ")"));
  }
  if (Status st = validate_sequence_sizes(p); !st.ok()) return st;
  if (Status st = validate_dropout(p); !st.ok()) return st;
  if (Status st = validate_fp8(p); !st.ok()) return st;
  const std::array<std::pair<const char*, int64_t>, 5> sizes{
      {{"batch", p.batch}, {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv}, {"seqlen_q", p.seqlen_q},
       {"seqlen_k", p.seqlen_k}}};
  for (const auto& [name, value] : sizes) {
    if (value < 0) return invalid(cat(name, ": must be >= 0 (got ", value, ")"));
  }
  if (p.head_dim < 1 || p.head_dim > kMaxHeadDim) {
    return invalid(cat("head_dim: must be in 1..", kMaxHeadDim, " (got ", p.head_dim, ")"));
  }
  if (p.head_dim_v < 0 || p.head_dim_v > kMaxHeadDim) {
    return invalid(cat("head_dim_v: must be 0 (= head_dim) or in 1..", kMaxHeadDim, " (got ", p.head_dim_v, ")"));
  }
  if (p.heads_q > 0 && p.heads_kv < 1) {
    return invalid(cat("heads_kv: must be >= 1 when heads_q > 0 (got ", p.heads_kv, ")"));
  }
  if (p.heads_kv > 0 && p.heads_q % p.heads_kv != 0) {
    return invalid(cat("heads_q: must be a multiple of heads_kv for GQA/MQA (got heads_q=", p.heads_q,
                       ", heads_kv=", p.heads_kv, ")"));
  }
  if (!std::isfinite(p.softmax_scale)) {
    return invalid(cat("softmax_scale: must be finite (got ", p.softmax_scale, ")"));
  }
  // Q and K over head_dim columns, O and V over head_dim_v (equal to head_dim unless set).
  int64_t rows = 0;
  for (const auto& [dim_name, dim] : {std::pair{"head_dim", p.head_dim}, std::pair{"head_dim_v", value_head_dim(p)}}) {
    int64_t elements = 0;
    if (!mul_ok(p.batch, p.heads_q, &rows) || !mul_ok(rows, p.seqlen_q, &rows) || !mul_ok(rows, dim, &elements)) {
      return invalid(cat("sizes: batch*heads_q*seqlen_q*", dim_name, " overflows int64 (batch=", p.batch, ", heads_q=",
                         p.heads_q, ", seqlen_q=", p.seqlen_q, ", ", dim_name, "=", dim, ")"));
    }
    int64_t kv_elements = 0;
    if (!mul_ok(p.batch, p.heads_kv, &kv_elements) || !mul_ok(kv_elements, p.seqlen_k, &kv_elements) ||
        !mul_ok(kv_elements, dim, &kv_elements)) {
      return invalid(cat("sizes: batch*heads_kv*seqlen_k*", dim_name, " overflows int64 (batch=", p.batch,
                         ", heads_kv=", p.heads_kv, ", seqlen_k=", p.seqlen_k, ", ", dim_name, "=", dim, ")"));
    }
    if (q_packed(p)) {
      int64_t packed = 0;
      if (!mul_ok(p.heads_q, p.total_q, &packed) || !mul_ok(packed, dim, &packed)) {
        return invalid(cat("total_q: heads_q*total_q*", dim_name, " overflows int64 (total_q=", p.total_q, ")"));
      }
    }
  }
  if (rows == 0 || lse_rows(p) == 0) return Status::ok_status();  // documented no-op: nothing is read or written

  for (const auto& [name, s] : {std::pair{"q", p.q_stride}, std::pair{"k", p.k_stride},
                                std::pair{"v", p.v_stride}, std::pair{"o", p.o_stride}}) {
    if (Status st = check_strides(name, s); !st.ok()) return st;
  }
  // Every tensor's extent must fit in int64 elements and bytes (K and V only where keys are read).
  const TensorViews views = tensor_views(p);
  for (const TensorView& view : {views.o, views.q, views.k, views.v}) {
    if (view.extent[0] == 0 || view.extent[2] == 0) continue;  // no keys (or pages): K and V are never read
    int64_t span = 0;
    if (Status st = span_elements(view, &span); !st.ok()) return st;
  }
  return Status::ok_status();
}

Status can_implement(const Params& p) {
  if (Status st = detail::check_layout(p); !st.ok()) return st;
  // A batch of sequences is checked even when it writes nothing: its arrays say so, and run() reads them.
  return has_sequences(p) && p.batch > 0 ? check_indices(p) : Status::ok_status();
}

Status detail::check_layout(const Params& p) {
  // The index pointers first: sizes that call for an absent array are named by that array's size field.
  if (Status st = validate_sequence_pointers(p); !st.ok()) return st;
  if (Status st = validate_shape(p); !st.ok()) return st;
  const int64_t rows = lse_rows(p);  // validate_shape checked it for overflow
  if (p.batch * p.heads_q * p.seqlen_q == 0 || rows == 0) return Status::ok_status();  // documented no-op

  const int64_t elem = dtype_size(p.dtype);
  const TensorViews views = tensor_views(p);  // O's elements are the output dtype's
  const TensorView& o_view = views.o;
  // With no keys (seqlen_k = 0, or packed K/V of no rows) every row is O = 0, LSE = -inf: K, V, Q unread.
  const bool reads_kv = p.seqlen_k > 0 && !(kv_packed(p) && p.total_k == 0);
  struct Pointer {
    const char* name;
    const void* ptr;
    int64_t align;
    bool required;
  };
  // The sink, the index arrays and the descales are optional: checked only where given.
  constexpr int64_t kWord = sizeof(float);
  const std::array<Pointer, 13> pointers{{{"q", p.q, elem, reads_kv},
                                          {"k", p.k, elem, reads_kv},
                                          {"v", p.v, elem, reads_kv},
                                          {"o", p.o, o_view.element_bytes, true},
                                          {"descale_q", p.descale_q, kWord, p.descale_q != nullptr},
                                          {"descale_k", p.descale_k, kWord, p.descale_k != nullptr},
                                          {"descale_v", p.descale_v, kWord, p.descale_v != nullptr},
                                          {"lse", p.lse, kWord, true},
                                          {"sink", p.sink, kWord, p.sink != nullptr},
                                          {"cu_seqlens_q", p.cu_seqlens_q, kWord, p.cu_seqlens_q != nullptr},
                                          {"cu_seqlens_k", p.cu_seqlens_k, kWord, p.cu_seqlens_k != nullptr},
                                          {"seqused_k", p.seqused_k, kWord, p.seqused_k != nullptr},
                                          {"page_table", p.page_table, kWord, p.page_table != nullptr}}};
  for (const Pointer& ptr : pointers) {
    if (!ptr.required) continue;
    if (ptr.ptr == nullptr) return invalid(cat(ptr.name, ": null pointer"));
    if (reinterpret_cast<uintptr_t>(ptr.ptr) % static_cast<uintptr_t>(ptr.align) != 0) {
      return invalid(cat(ptr.name, ": pointer ", ptr.ptr, " is not aligned to its element size (", ptr.align,
                         " bytes)"));
    }
  }

  int64_t o_span = 0;
  if (Status st = span_elements(o_view, &o_span); !st.ok()) return st;
  if (Status st = check_no_self_overlap(o_view); !st.ok()) return st;
  const int64_t o_bytes = o_span * o_view.element_bytes;
  int64_t lse_bytes = 0;
  if (!mul_ok(rows, static_cast<int64_t>(sizeof(float)), &lse_bytes)) {
    return invalid("lse: byte size overflows int64");
  }
  if (ranges_overlap(p.o, o_bytes, p.lse, lse_bytes)) return invalid("lse: overlaps o");
  const int64_t sink_bytes = p.heads_q * static_cast<int64_t>(sizeof(float));
  if (p.sink != nullptr && (ranges_overlap(p.o, o_bytes, p.sink, sink_bytes) ||
                            ranges_overlap(p.lse, lse_bytes, p.sink, sink_bytes))) {
    return invalid("sink: overlaps an output (o or lse)");
  }
  const std::array<std::pair<const char*, std::pair<const void*, int64_t>>, 7> index_arrays{
      {{"cu_seqlens_q", {p.cu_seqlens_q, p.batch + 1}},
       {"cu_seqlens_k", {p.cu_seqlens_k, p.batch + 1}},
       {"seqused_k", {p.seqused_k, p.batch}},
       {"page_table", {p.page_table, p.batch * p.max_pages_per_seq}},
       {"descale_q", {p.descale_q, p.batch * p.heads_kv}},
       {"descale_k", {p.descale_k, p.batch * p.heads_kv}},
       {"descale_v", {p.descale_v, p.batch * p.heads_kv}}}};
  for (const auto& [name, array] : index_arrays) {
    const int64_t bytes = array.second * kWord;
    if (array.first != nullptr &&
        (ranges_overlap(p.o, o_bytes, array.first, bytes) || ranges_overlap(p.lse, lse_bytes, array.first, bytes))) {
      return invalid(cat(name, ": overlaps an output (o or lse)"));
    }
  }

  if (p.dropout_mask_out != nullptr) {
    // The dump is [batch, heads_q, seqlen_q, seqlen_k] bytes, every one written.
    int64_t mask_bytes = 0;
    if (!mul_ok(p.batch, p.heads_q, &mask_bytes) || !mul_ok(mask_bytes, p.seqlen_q, &mask_bytes) ||
        !mul_ok(mask_bytes, p.seqlen_k, &mask_bytes)) {
      return invalid("dropout_mask_out: batch*heads_q*seqlen_q*seqlen_k bytes overflow int64");
    }
    if (ranges_overlap(p.dropout_mask_out, mask_bytes, p.o, o_bytes) ||
        ranges_overlap(p.dropout_mask_out, mask_bytes, p.lse, lse_bytes)) {
      return invalid("dropout_mask_out: overlaps an output (o or lse)");
    }
  }

  if (reads_kv) {
    for (const TensorView& in : {views.q, views.k, views.v}) {
      if (in.extent[0] == 0 || in.extent[2] == 0) continue;
      int64_t span = 0;
      if (Status st = span_elements(in, &span); !st.ok()) return st;
      // Outputs may not alias inputs: the kernel reads K/V tiles after other blocks have written O.
      if (ranges_overlap(p.o, o_bytes, in.ptr, span * elem)) return invalid(cat("o: overlaps input ", in.name));
      if (ranges_overlap(p.lse, lse_bytes, in.ptr, span * elem)) return invalid(cat("lse: overlaps input ", in.name));
    }
  }
  return Status::ok_status();
}

BackwardParams make_backward_params(const Params& forward) {
  BackwardParams b;
  b.forward = forward;
  b.d_o_stride = forward.o_stride;
  b.dq_stride = forward.q_stride;
  b.dk_stride = forward.k_stride;
  b.dv_stride = forward.v_stride;
  return b;
}

ComputePath backward_path(const BackwardParams& b) {
#if defined(FLASHCHECK_HAS_TENSOR_CORE)
  const Params& p = b.forward;
  // Dropout runs on the CUDA-core kernels only: the tensor-core backward draws no mask.
  if (p.dropout_p > 0.0f) return ComputePath::kGeneralFp32;
  if (p.dtype != DType::kF16 && p.dtype != DType::kBF16) return ComputePath::kGeneralFp32;
  if (std::max(p.head_dim, value_head_dim(p)) > detail::backward::kTcMaxDim) {
    return ComputePath::kGeneralFp32;
  }
  // The kernel copies 16-byte chunks of Q, K, V and dO rows (cp.async): every row start 16-byte aligned. dO is
  // laid out like O (its stride along an axis of extent 1 never steps).
  constexpr int64_t kChunk = 16;
  const int64_t per_chunk = kChunk / dtype_size(p.dtype);
  const TensorView o = tensor_views(p).o;
  const int64_t d_o_strides[3] = {b.d_o_stride.batch, b.d_o_stride.head, b.d_o_stride.row};
  bool d_o_aligned = reinterpret_cast<uintptr_t>(b.d_o) % kChunk == 0;
  for (int axis = 0; axis < 3; ++axis) d_o_aligned = d_o_aligned && (o.extent[axis] <= 1 || d_o_strides[axis] % per_chunk == 0);
  if (!detail::rows_aligned(p, kChunk) || !d_o_aligned) return ComputePath::kGeneralFp32;
  return ComputePath::kTensorCore;
#else
  (void)b;
  return ComputePath::kGeneralFp32;
#endif
}

Status can_implement_backward(const BackwardParams& b) {
  const Params& p = b.forward;
  if (kv_paged(p)) {
    return {StatusCode::kUnsupported, "page_table: paged K/V is forward-only (the backward pass reads dense or packed K/V)"};
  }
  if (p.dtype == DType::kF8E4M3) {
    return {StatusCode::kUnsupported, cat("dtype: ", to_string(p.dtype), " is forward-only (the backward pass takes f32, "
                                          "f16 or bf16)")};
  }
  if (p.num_splits != 1) {
    return {StatusCode::kUnsupported, cat("num_splits: split-KV is forward-only (the backward pass takes 1, got ",
                                          p.num_splits, ")")};
  }
  if (Status st = can_implement(p); !st.ok()) return st;
  if (b.dsink != nullptr && p.sink == nullptr) return invalid("dsink: given without a sink (forward.sink is null)");
  if (reinterpret_cast<uintptr_t>(b.dsink) % sizeof(float) != 0) {
    return invalid(cat("dsink: pointer ", static_cast<const void*>(b.dsink), " is not aligned to 4 bytes"));
  }
  if (p.batch * p.heads_q == 0) return Status::ok_status();  // documented no-op
  // Without query rows dQ and dO hold nothing, and without keys dK and dV: those pointers may then be null.
  const int64_t rows = lse_rows(p);
  const bool has_rows = p.seqlen_q > 0 && rows > 0;
  const bool has_keys = p.seqlen_k > 0 && !(kv_packed(p) && p.total_k == 0);
  const int64_t elem = dtype_size(p.dtype);
  const TensorViews views = tensor_views(p);
  const auto like = [](TensorView t, const char* name, const void* ptr, const Strides& s) {
    t.name = name;
    t.ptr = ptr;
    t.stride = {s.batch, s.head, s.row, 1};  // a packed view's batch extent is 1: its stride never steps
    return t;
  };
  const std::array<std::pair<TensorView, const Strides*>, 4> grads{{{like(views.o, "d_o", b.d_o, b.d_o_stride), &b.d_o_stride},
                                                                    {like(views.q, "dq", b.dq, b.dq_stride), &b.dq_stride},
                                                                    {like(views.k, "dk", b.dk, b.dk_stride), &b.dk_stride},
                                                                    {like(views.v, "dv", b.dv, b.dv_stride), &b.dv_stride}}};
  struct Range {
    const char* name;
    const void* ptr;
    int64_t bytes;
  };
  std::vector<Range> inputs, outputs;
  for (const TensorView& in : {views.q, views.k, views.v, views.o}) {
    int64_t span = 0;
    const bool empty = std::any_of(in.extent.begin(), in.extent.end(), [](int64_t e) { return e <= 0; });
    if (in.ptr != nullptr && !empty && span_elements(in, &span).ok()) inputs.push_back({in.name, in.ptr, span * elem});
  }
  if (has_rows) inputs.push_back({"lse", p.lse, rows * static_cast<int64_t>(sizeof(float))});
  if (p.sink != nullptr) inputs.push_back({"sink", p.sink, p.heads_q * static_cast<int64_t>(sizeof(float))});
  for (size_t g = 0; g < grads.size(); ++g) {
    const auto& [view, strides] = grads[g];
    if (!(g < 2 ? has_rows : has_keys)) continue;  // d_o, dq: rows; dk, dv: keys
    if (view.ptr == nullptr) return invalid(cat(view.name, ": null pointer"));
    if (reinterpret_cast<uintptr_t>(view.ptr) % static_cast<uintptr_t>(elem) != 0) {
      return invalid(cat(view.name, ": pointer ", view.ptr, " is not aligned to its element size (", elem, " bytes)"));
    }
    if (Status st = check_strides(view.name, *strides); !st.ok()) return st;
    int64_t span = 0;
    if (Status st = span_elements(view, &span); !st.ok()) return st;
    if (g > 0) {  // dq, dk, dv: outputs
      if (Status st = check_no_self_overlap(view); !st.ok()) return st;
      outputs.push_back({view.name, view.ptr, span * elem});
    } else {
      inputs.push_back({view.name, view.ptr, span * elem});
    }
  }
  if (b.dsink != nullptr) outputs.push_back({"dsink", b.dsink, p.heads_q * static_cast<int64_t>(sizeof(float))});
  for (size_t o = 0; o < outputs.size(); ++o) {
    for (const Range& in : inputs) {
      if (ranges_overlap(outputs[o].ptr, outputs[o].bytes, in.ptr, in.bytes)) {
        return invalid(cat(outputs[o].name, ": overlaps input ", in.name));
      }
    }
    for (size_t other = 0; other < o; ++other) {
      if (ranges_overlap(outputs[o].ptr, outputs[o].bytes, outputs[other].ptr, outputs[other].bytes)) {
        return invalid(cat(outputs[o].name, ": overlaps output ", outputs[other].name));
      }
    }
  }
  return Status::ok_status();
}

}  // namespace flashcheck
