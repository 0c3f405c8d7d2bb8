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

#include "flashcheck/attention.h"

namespace flashcheck {
namespace {

inline constexpr int64_t kMaxHeadDim = 256;

Status invalid(const std::string& message) { return {StatusCode::kInvalidArgument, message}; }

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
  std::array<int64_t, 4> extent;  // batch, heads, seqlen, head_dim
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

}  // namespace

Status validate_shape(const Params& p) {
  if (p.dtype != DType::kF32 && p.dtype != DType::kF16 && p.dtype != DType::kBF16) {
    return {StatusCode::kUnsupported,
            cat("dtype: unsupported value ", static_cast<int32_t>(p.dtype), " (expected f32, f16 or bf16)")};
  }
  if (p.mask != Mask::kNone && p.mask != Mask::kCausalBottomRight && p.mask != Mask::kCausalTopLeft &&
      p.mask != Mask::kWindowBottomRight && p.mask != Mask::kWindowTopLeft) {
    return {StatusCode::kUnsupported, cat("mask: unsupported value ", static_cast<int32_t>(p.mask),
                                          " (expected none, causal-br, causal-tl, window-br or window-tl)")};
  }
  const bool windowed = p.mask == Mask::kWindowBottomRight || p.mask == Mask::kWindowTopLeft;
  for (const auto& [name, value] : {std::pair{"window_left", p.window_left}, std::pair{"window_right", p.window_right}}) {
    if (value < -1) return invalid(cat(name, ": must be -1 (unbounded) or >= 0 (got ", value, ")"));
    if (!windowed && value != -1) {
      return invalid(cat(name, ": only the window masks take a window (got ", value, " with mask ", to_string(p.mask),
                         "; use window-br or window-tl)"));
    }
  }
  if (!(p.softcap >= 0.0f) || !std::isfinite(p.softcap)) {
    return invalid(cat("softcap: must be finite and >= 0, 0 meaning off (got ", p.softcap, ")"));
  }
  const std::array<std::pair<const char*, int64_t>, 5> sizes{
      {{"batch", p.batch}, {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv}, {"seqlen_q", p.seqlen_q},
       {"seqlen_k", p.seqlen_k}}};
  for (const auto& [name, value] : sizes) {
    if (value < 0) return invalid(cat(name, ": must be >= 0 (got ", value, ")"));
  }
  if (p.head_dim < 1 || p.head_dim > kMaxHeadDim) {
    return invalid(cat("head_dim: must be in 1..", kMaxHeadDim, " (got ", p.head_dim, ")"));
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
  int64_t rows = 0;
  int64_t elements = 0;
  if (!mul_ok(p.batch, p.heads_q, &rows) || !mul_ok(rows, p.seqlen_q, &rows) ||
      !mul_ok(rows, p.head_dim, &elements)) {
    return invalid(cat("sizes: batch*heads_q*seqlen_q*head_dim overflows int64 (batch=", p.batch,
                       ", heads_q=", p.heads_q, ", seqlen_q=", p.seqlen_q, ", head_dim=", p.head_dim, ")"));
  }
  int64_t kv_elements = 0;
  if (!mul_ok(p.batch, p.heads_kv, &kv_elements) || !mul_ok(kv_elements, p.seqlen_k, &kv_elements) ||
      !mul_ok(kv_elements, p.head_dim, &kv_elements)) {
    return invalid(cat("sizes: batch*heads_kv*seqlen_k*head_dim overflows int64 (batch=", p.batch,
                       ", heads_kv=", p.heads_kv, ", seqlen_k=", p.seqlen_k, ", head_dim=", p.head_dim, ")"));
  }
  if (rows == 0) return Status::ok_status();  // documented no-op: nothing is read or written

  for (const auto& [name, s] : {std::pair{"q", p.q_stride}, std::pair{"k", p.k_stride},
                                std::pair{"v", p.v_stride}, std::pair{"o", p.o_stride}}) {
    if (Status st = check_strides(name, s); !st.ok()) return st;
  }
  // Every tensor's extent must fit in int64 elements and bytes (K and V only where keys are read).
  const int64_t elem = dtype_size(p.dtype);
  const std::array<TensorView, 4> views{{
      {"o", p.o, elem, {p.batch, p.heads_q, p.seqlen_q, p.head_dim}, {p.o_stride.batch, p.o_stride.head, p.o_stride.row, 1}},
      {"q", p.q, elem, {p.batch, p.heads_q, p.seqlen_q, p.head_dim}, {p.q_stride.batch, p.q_stride.head, p.q_stride.row, 1}},
      {"k", p.k, elem, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim}, {p.k_stride.batch, p.k_stride.head, p.k_stride.row, 1}},
      {"v", p.v, elem, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim}, {p.v_stride.batch, p.v_stride.head, p.v_stride.row, 1}},
  }};
  for (const TensorView& view : views) {
    if (view.extent[2] == 0) continue;  // seqlen_k = 0: K and V are never read
    int64_t span = 0;
    if (Status st = span_elements(view, &span); !st.ok()) return st;
  }
  return Status::ok_status();
}

Status can_implement(const Params& p) {
  if (Status st = validate_shape(p); !st.ok()) return st;
  int64_t rows = p.batch * p.heads_q * p.seqlen_q;  // validate_shape checked it for overflow
  if (rows == 0) return Status::ok_status();  // documented no-op: nothing is read or written

  const int64_t elem = dtype_size(p.dtype);
  const bool reads_kv = p.seqlen_k > 0;  // with no keys every row is O = 0, LSE = -inf: K, V, Q unread
  struct Pointer {
    const char* name;
    const void* ptr;
    int64_t align;
    bool required;
  };
  // The sink is optional: checked only where given.
  const std::array<Pointer, 6> pointers{{{"q", p.q, elem, reads_kv},
                                         {"k", p.k, elem, reads_kv},
                                         {"v", p.v, elem, reads_kv},
                                         {"o", p.o, elem, true},
                                         {"lse", p.lse, static_cast<int64_t>(sizeof(float)), true},
                                         {"sink", p.sink, static_cast<int64_t>(sizeof(float)), p.sink != nullptr}}};
  for (const Pointer& ptr : pointers) {
    if (!ptr.required) continue;
    if (ptr.ptr == nullptr) return invalid(cat(ptr.name, ": null pointer"));
    if (reinterpret_cast<uintptr_t>(ptr.ptr) % static_cast<uintptr_t>(ptr.align) != 0) {
      return invalid(cat(ptr.name, ": pointer ", ptr.ptr, " is not aligned to its element size (", ptr.align,
                         " bytes)"));
    }
  }

  const TensorView o_view{"o", p.o, elem, {p.batch, p.heads_q, p.seqlen_q, p.head_dim},
                          {p.o_stride.batch, p.o_stride.head, p.o_stride.row, 1}};
  int64_t o_span = 0;
  if (Status st = span_elements(o_view, &o_span); !st.ok()) return st;
  if (Status st = check_no_self_overlap(o_view); !st.ok()) return st;
  const int64_t o_bytes = o_span * elem;
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

  if (!reads_kv) return Status::ok_status();
  const std::array<TensorView, 3> inputs{{
      {"q", p.q, elem, {p.batch, p.heads_q, p.seqlen_q, p.head_dim},
       {p.q_stride.batch, p.q_stride.head, p.q_stride.row, 1}},
      {"k", p.k, elem, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim},
       {p.k_stride.batch, p.k_stride.head, p.k_stride.row, 1}},
      {"v", p.v, elem, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim},
       {p.v_stride.batch, p.v_stride.head, p.v_stride.row, 1}},
  }};
  for (const TensorView& in : inputs) {
    int64_t span = 0;
    if (Status st = span_elements(in, &span); !st.ok()) return st;
    // Outputs may not alias inputs: the kernel reads K/V tiles after other blocks have written O.
    if (ranges_overlap(p.o, o_bytes, in.ptr, span * elem)) return invalid(cat("o: overlaps input ", in.name));
    if (ranges_overlap(p.lse, lse_bytes, in.ptr, span * elem)) return invalid(cat("lse: overlaps input ", in.name));
  }
  return Status::ok_status();
}

}  // namespace flashcheck
