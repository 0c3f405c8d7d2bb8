// fuzz_api (CPU, ASan + UBSan): the API's validators and the case-line parser on arbitrary input. They must
// return a Status (with a message when not ok) or succeed: no crash, no undefined behaviour, no write out of
// bounds, no read of the (fake) tensor memory. The first byte picks the surface:
//   0 C++ Params -> can_implement, select_config, visible_key_range, run_host_model's validation
//   1 C ABI     -> fc_make_params, fc_can_implement, fc_select_config, fc_effective_splits with exact-size message
//                  buffers
//   2 text      -> parse_case; for accepted lines format/parse round trip and make_inputs' validation
//   (first byte >= 252) the inference path's index arrays -> can_implement, then the host model on accepted ones
// Sizes and strides come from a menu of edge values (0, -1, INT64 extremes, 2^31, 2^62, ...) or raw bytes;
// pointers are fake addresses (null, misaligned, near the top of the address space) that ASan would
// catch on any dereference. Params that pass can_implement are then broken in one field at a time (a window
// side below -1, a window with a mask that takes none, a negative, NaN or infinite softcap, a misaligned sink,
// a sink overlapping O or LSE): can_implement (C++ and C) must reject each and name the field.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "byte_reader.h"
#include "flashcheck/attention.h"
#include "flashcheck/attention_c.h"
#include "flashcheck/case.h"
#include "flashcheck/host_model.h"
#include "flashcheck/inputs.h"
#include "flashcheck/mask_names.h"

namespace flashcheck::fuzz {
namespace {

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "\n==flashcheck== API contract violation in fuzz_api: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void require(bool condition, const std::string& what) {
  if (!condition) violation(what);
}

int64_t size_value(ByteReader& in) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kEdges[] = {0,
                                1,
                                -1,
                                2,
                                kMax,
                                kMin,
                                kMax - 1,
                                int64_t{1} << 31,
                                (int64_t{1} << 31) - 1,
                                int64_t{1} << 32,
                                int64_t{1} << 62,
                                -(int64_t{1} << 31),
                                256,
                                257,
                                int64_t{3} << 40,
                                int64_t{1} << 21};
  const uint8_t selector = in.u8();
  if (selector < 128) return selector % 80;                         // small, the common valid range
  if (selector < 224) return kEdges[selector % std::size(kEdges)];  // edges
  return static_cast<int64_t>(in.u64());                            // anything
}

const void* pointer_value(ByteReader& in) {
  constexpr uintptr_t kPointers[] = {0,
                                     0x1,
                                     0x2,
                                     0x3,
                                     0x10000,
                                     0x10001,
                                     0x10002,
                                     0x10004,
                                     0x10008,
                                     0x10010,
                                     0x10100,
                                     ~uintptr_t{0} - 0xf,
                                     uintptr_t{1} << 47};
  const uint8_t selector = in.u8();
  if (selector < 240) return reinterpret_cast<const void*>(kPointers[selector % std::size(kPointers)]);
  return reinterpret_cast<const void*>(static_cast<uintptr_t>(in.u64()));
}

float scale_value(ByteReader& in) {
  constexpr float kScales[] = {0.125f,
                               1.0f,
                               0.0f,
                               -1.0f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max()};
  const uint8_t selector = in.u8();
  if (selector < 200) return kScales[selector % std::size(kScales)];
  return in.f32_bits();
}

int32_t enum_value(ByteReader& in) {
  const uint8_t selector = in.u8();
  if (selector < 240) return selector % 6;  // every dtype, mask and layout, and 5 is out of range for each
  return static_cast<int32_t>(in.u32());
}

// A window side: -1 (no window, what zero bytes give) for half the selectors, else below -1 or a size.
int64_t window_value(ByteReader& in) {
  const uint8_t selector = in.u8();
  if (selector < 128) return -1;
  if (selector < 136) return -2;
  return size_value(in);
}

float softcap_value(ByteReader& in) {
  constexpr float kSoftcaps[] = {30.0f,
                                 0.5f,
                                 -1.0f,
                                 -0.0f,
                                 std::numeric_limits<float>::quiet_NaN(),
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::max()};
  const uint8_t selector = in.u8();
  if (selector < 128) return 0.0f;  // off, what zero bytes give
  if (selector < 240) return kSoftcaps[selector % std::size(kSoftcaps)];
  return in.f32_bits();
}

Params params_from(ByteReader& in) {
  Params p;
  p.dtype = static_cast<DType>(enum_value(in));
  p.mask = static_cast<Mask>(enum_value(in));
  for (int64_t* field : {&p.batch, &p.heads_q, &p.heads_kv, &p.seqlen_q, &p.seqlen_k, &p.head_dim}) {
    *field = size_value(in);
  }
  std::optional<Layout> contiguous;  // the layout of contiguous strides, where they are
  if (in.u8() & 1) {  // half the time contiguous strides, so the checks after the sizes are reached
    const Layout layout = (in.u8() & 1) ? Layout::kBSHD : Layout::kBHSD;
    auto small = [](int64_t x) { return x >= 0 && x <= (int64_t{1} << 20); };
    if (small(p.heads_q) && small(p.heads_kv) && small(p.seqlen_q) && small(p.seqlen_k) && small(p.head_dim)) {
      p.q_stride = p.o_stride = contiguous_strides(layout, p.heads_q, p.seqlen_q, p.head_dim);
      p.k_stride = p.v_stride = contiguous_strides(layout, p.heads_kv, p.seqlen_k, p.head_dim);
      contiguous = layout;
    }
  } else {
    for (Strides* s : {&p.q_stride, &p.k_stride, &p.v_stride, &p.o_stride}) {
      s->batch = size_value(in);
      s->head = size_value(in);
      s->row = size_value(in);
    }
  }
  p.q = pointer_value(in);
  p.k = pointer_value(in);
  p.v = pointer_value(in);
  p.o = const_cast<void*>(pointer_value(in));
  p.lse = static_cast<float*>(const_cast<void*>(pointer_value(in)));
  p.softmax_scale = scale_value(in);
  // Read last, so that inputs written before these fields existed keep their meaning (zeros: none of them).
  p.window_left = window_value(in);
  p.window_right = window_value(in);
  p.softcap = softcap_value(in);
  p.sink = static_cast<const float*>(pointer_value(in));
  // V's and O's own width: 0 (equal) where the bytes end; contiguous V and O strides follow it where Q's and K's are.
  const int64_t head_dim_v = size_value(in);
  if (contiguous && head_dim_v >= 0 && head_dim_v <= (int64_t{1} << 20)) {
    set_head_dim_v(&p, head_dim_v, *contiguous);
  } else {
    p.head_dim_v = head_dim_v;
  }
  return p;
}

const float* at_byte(const void* base, uintptr_t offset) {
  return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(base) + offset);
}

// One field of valid params broken: the field's name the message must lead with, and the break.
struct Break {
  const char* field;
  void (*apply)(Params&);
};
// The breaks of the window, the softcap and the sink; the sink's only where can_implement reads it (a problem
// with rows: an empty one is a no-op that checks no pointer).
std::vector<Break> breaks_of(const Params& valid) {
  std::vector<Break> breaks = {
      {"window_left", [](Params& p) { p.window_left = -2; }},
      {"window_right", [](Params& p) { p.window_right = std::numeric_limits<int64_t>::min(); }},
      {"window_left", [](Params& p) {  // a window with a mask that takes none
         if (takes_window(p.mask)) p.mask = Mask::kCausalTopLeft;
         p.window_left = 3;
       }},
      {"softcap", [](Params& p) { p.softcap = -1.0f; }},
      {"softcap", [](Params& p) { p.softcap = std::numeric_limits<float>::quiet_NaN(); }},
      {"softcap", [](Params& p) { p.softcap = std::numeric_limits<float>::infinity(); }},
  };
  if (valid.batch > 0 && valid.heads_q > 0 && valid.seqlen_q > 0) {
    breaks.push_back({"sink", [](Params& p) { p.sink = at_byte(p.lse, 1); }});  // misaligned
    breaks.push_back({"sink", [](Params& p) { p.sink = p.lse; }});              // overlaps LSE
    breaks.push_back({"sink", [](Params& p) { p.sink = at_byte(p.o, 0); }});    // overlaps O (or misaligned)
  }
  return breaks;
}

fc_params to_c(const Params& p) {
  fc_params c{};
  c.dtype = static_cast<int32_t>(p.dtype);
  c.mask = static_cast<int32_t>(p.mask);
  c.batch = p.batch, c.heads_q = p.heads_q, c.heads_kv = p.heads_kv;
  c.seqlen_q = p.seqlen_q, c.seqlen_k = p.seqlen_k, c.head_dim = p.head_dim;
  c.q = p.q, c.k = p.k, c.v = p.v, c.o = p.o, c.lse = p.lse;
  c.q_stride = {p.q_stride.batch, p.q_stride.head, p.q_stride.row};
  c.k_stride = {p.k_stride.batch, p.k_stride.head, p.k_stride.row};
  c.v_stride = {p.v_stride.batch, p.v_stride.head, p.v_stride.row};
  c.o_stride = {p.o_stride.batch, p.o_stride.head, p.o_stride.row};
  c.softmax_scale = p.softmax_scale;
  c.window_left = p.window_left, c.window_right = p.window_right;
  c.softcap = p.softcap;
  c.sink = p.sink;
  c.head_dim_v = p.head_dim_v;
  c.cu_seqlens_q = p.cu_seqlens_q;
  c.total_q = p.total_q;
  c.cu_seqlens_k = p.cu_seqlens_k;
  c.total_k = p.total_k;
  c.seqused_k = p.seqused_k;
  c.page_table = p.page_table;
  c.page_size = p.page_size;
  c.num_pages = p.num_pages;
  c.max_pages_per_seq = p.max_pages_per_seq;
  c.num_splits = p.num_splits;
  return c;
}

// Valid params broken in one field at a time: rejected by can_implement, the host model and the C ABI, each
// message leading with the field's name.
void check_breaks_are_named(const Params& valid) {
  for (const Break& b : breaks_of(valid)) {
    Params p = valid;
    b.apply(p);
    const Status status = can_implement(p);
    const std::string field = b.field;
    require(status.code() == StatusCode::kInvalidArgument && status.message().rfind(field, 0) == 0,
            "can_implement: breaking " + field + " gave '" + status.message() + "'");
    require(!run_host_model(p).ok(), "run_host_model accepted params with a broken " + field);
    const fc_params c = to_c(p);
    char msg[512];
    const fc_status c_status = fc_can_implement(&c, msg, sizeof msg);
    require(c_status == FC_ERR_INVALID_ARGUMENT && std::string(msg).rfind(field, 0) == 0,
            "fc_can_implement: breaking " + field + " gave " + std::to_string(c_status) + " '" + msg + "'");
  }
}

void check_cpp_api(ByteReader& in) {
  const Params p = params_from(in);
  const Status status = can_implement(p);
  require(status.ok() || !status.message().empty(), "can_implement: an error without a message");
  if (!status.ok()) {
    // The host model validates first: it must return the error without touching the fake memory.
    const Status model = run_host_model(p);
    require(!model.ok(), "run_host_model accepted params can_implement rejects: " + status.message());
    return;
  }
  check_breaks_are_named(p);
  const KernelConfig config = select_config(p);
  require(config.block_m > 0 && config.block_n > 0 && config.name != nullptr,
          "select_config: no tile sizes for valid params");
  require(dtype_size(p.dtype) > 0 && to_string(p.dtype) != nullptr && to_string(p.mask) != nullptr,
          "dtype_size/to_string: nothing for a valid enum");
  for (int64_t i : {int64_t{0}, p.seqlen_q / 2, p.seqlen_q - 1}) {
    if (i < 0 || i >= p.seqlen_q) continue;
    const KeyRange visible = visible_key_range(p, i);
    require(visible.begin >= 0 && visible.end <= p.seqlen_k, "visible_key_range outside [0, seqlen_k]");
  }
}

// Message buffers of exactly msg_size bytes: ASan reports a write one past the end.
void check_c_abi(ByteReader& in) {
  const size_t msg_size = in.u8() % 70;
  std::unique_ptr<char[]> msg(msg_size ? new char[msg_size] : nullptr);
  const int32_t dtype = enum_value(in), mask = enum_value(in), layout = enum_value(in);
  int64_t sizes[6];
  for (int64_t& s : sizes) s = size_value(in);
  fc_params params{};
  fc_status status = fc_make_params(dtype, sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5], mask, layout,
                                    (in.u8() % 8 == 0) ? nullptr : &params, msg.get(), msg_size);
  require(status == FC_OK || status == FC_ERR_INVALID_ARGUMENT || status == FC_ERR_UNSUPPORTED,
          "fc_make_params: unexpected status " + std::to_string(status));
  if (msg_size > 0)
    require(std::memchr(msg.get(), '\0', msg_size) != nullptr, "fc_make_params: message not terminated");
  if (in.u8() & 1) {  // overwrite what make_params gave with arbitrary strides, pointers and scale
    const Params p = params_from(in);
    params.q = p.q, params.k = p.k, params.v = p.v, params.o = p.o, params.lse = p.lse;
    params.q_stride = {p.q_stride.batch, p.q_stride.head, p.q_stride.row};
    params.k_stride = {p.k_stride.batch, p.k_stride.head, p.k_stride.row};
    params.softmax_scale = p.softmax_scale;
    params.window_left = p.window_left, params.window_right = p.window_right;
    params.softcap = p.softcap;
    params.sink = p.sink;
  }
  const fc_params* arg = (in.u8() % 16 == 0) ? nullptr : &params;
  status = fc_can_implement(arg, msg.get(), msg_size);
  require(status == FC_OK || status == FC_ERR_INVALID_ARGUMENT || status == FC_ERR_UNSUPPORTED,
          "fc_can_implement: unexpected status " + std::to_string(status) +
              (msg_size > 0 ? std::string(": ") + msg.get() : std::string()));
  if (msg_size > 0)
    require(std::memchr(msg.get(), '\0', msg_size) != nullptr, "fc_can_implement: message not terminated");
  int32_t path = -1, block_m = -1, block_n = -1;
  const fc_status select = fc_select_config(arg, &path, &block_m, &block_n, msg.get(), msg_size);
  require(select == status,
          "fc_select_config returned " + std::to_string(select) + ", fc_can_implement " + std::to_string(status));
  if (select == FC_OK) {
    require(block_m > 0 && block_n > 0 && path >= 0 && path <= static_cast<int32_t>(ComputePath::kTensorCoreFp8),
            "fc_select_config: bad config");
  }
  int32_t splits = -1;
  const fc_status counted = fc_effective_splits(arg, &splits, msg.get(), msg_size);
  require(counted == status,
          "fc_effective_splits returned " + std::to_string(counted) + ", fc_can_implement " + std::to_string(status));
  if (counted == FC_OK) require(splits >= 1, "fc_effective_splits: " + std::to_string(splits) + " runs");
}

void check_case_line(std::span<const uint8_t> bytes) {
  const std::string_view line(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  Case c;
  const Status status = parse_case(line, &c);
  if (!status.ok()) {
    require(!status.message().empty(), "parse_case: an error without a message");
    return;
  }
  require(validate_case(c).ok(), "validate_case rejects a parsed case: " + validate_case(c).message());
  const std::string canonical = format_case(c);
  Case again;
  const Status reparsed = parse_case(canonical, &again);
  require(reparsed.ok(), "parse_case rejects format_case's line '" + canonical + "': " + reparsed.message());
  require(again == c, "parse_case(format_case(c)) != c for '" + canonical + "'");
  require(format_case(again) == canonical, "format_case is not stable for '" + canonical + "'");
  // make_inputs validates the sizes against its byte budget before allocating: small budget, big shapes.
  HostInputs inputs;
  const Status made = make_inputs(c, &inputs, int64_t{1} << 16);
  require(made.ok() || !made.message().empty(), "make_inputs: an error without a message");
}

// A small problem of the inference path in real host memory, each tensor exactly its declared extent (ASan reports
// a read one past it), with index arrays from the bytes: prefix sums that may decrease or miss their total, seqused_k
// over capacity, page indices out of range, page geometry at its edges. can_implement must reject a malformed
// array naming an index field, or accept it, and then the host model runs it without a read outside the tensors.
void check_sequence_indices(ByteReader& in) {
  constexpr int64_t kHeads = 2, kDim = 8;
  const int64_t batch = 1 + in.u8() % 4;
  const bool paged = in.u8() & 1;
  const Mask mask = kMaskNames[in.u8() % kMaskNames.size()].mask;
  Params p = make_params(DType::kF32, batch, kHeads, 1, 0, 0, kDim, mask, Layout::kBSHD);
  if (takes_window(p.mask)) {
    p.window_left = static_cast<int64_t>(in.u8() % 6) - 1;
    p.window_right = static_cast<int64_t>(in.u8() % 6) - 1;
  }
  const auto index = [&in](int64_t hi) { return static_cast<int32_t>(static_cast<int8_t>(in.u8()) % (hi + 3)); };
  std::vector<int32_t> cu_q(static_cast<size_t>(batch + 1)), cu_k(cu_q.size()), used(static_cast<size_t>(batch));
  const bool well_formed = in.u8() % 4 != 0;  // mostly consistent arrays, so that accepted runs happen
  for (int64_t b = 1; b <= batch; ++b) {
    cu_q[b] = well_formed ? cu_q[b - 1] + in.u8() % 5 : index(16);
    cu_k[b] = well_formed ? cu_k[b - 1] + in.u8() % 20 : index(64);
  }
  if (!well_formed) cu_q[0] = index(2), cu_k[0] = index(2);
  p.total_q = std::max<int32_t>(0, cu_q.back()) + (well_formed ? 0 : in.u8() % 2);
  p.seqlen_q = 5 + (well_formed ? 0 : static_cast<int64_t>(in.u8() % 3) - 1);
  p.seqlen_k = 64;
  p.q_stride = p.o_stride = {0, kDim, kHeads * kDim};
  p.k_stride = p.v_stride = {0, kDim, kDim};
  p.cu_seqlens_q = cu_q.data();
  p.num_splits = static_cast<int32_t>(in.u8() % 20) - 1;
  std::vector<int32_t> table;
  int64_t kv_rows = 0;
  if (paged) {
    p.page_size = static_cast<int64_t>(in.u8() % 18) - 1;
    p.max_pages_per_seq = static_cast<int64_t>(in.u8() % 6);
    p.num_pages = static_cast<int64_t>(in.u8() % 9);
    // At least one entry: the table pointer must exist for the params to describe a paged cache at all.
    table.assign(static_cast<size_t>(std::max<int64_t>(1, batch * p.max_pages_per_seq)), 0);
    for (int32_t& page : table) page = index(static_cast<int32_t>(p.num_pages));
    for (int64_t b = 0; b < batch; ++b) used[b] = well_formed ? in.u8() % 40 : index(80);
    p.page_table = table.data();
    p.seqused_k = (in.u8() % 8 == 0) ? nullptr : used.data();
    p.k_stride = p.v_stride = {std::max<int64_t>(p.page_size, 1) * kDim, kDim, kDim};
    kv_rows = std::max<int64_t>(0, p.num_pages) * std::max<int64_t>(p.page_size, 0);
  } else {
    p.cu_seqlens_k = cu_k.data();
    p.total_k = std::max<int32_t>(0, cu_k.back());
    if (in.u8() & 1) {
      for (int64_t b = 0; b < batch; ++b) used[b] = well_formed ? in.u8() % 20 : index(40);
      p.seqused_k = used.data();
    }
    kv_rows = p.total_k;
  }
  // Exactly the declared extents (at least one element, so that a pointer exists).
  std::vector<float> q(static_cast<size_t>(std::max<int64_t>(1, p.total_q * kHeads * kDim)));
  std::vector<float> o(q.size()), lse(static_cast<size_t>(std::max<int64_t>(1, p.total_q * kHeads)));
  std::vector<float> k(static_cast<size_t>(std::max<int64_t>(1, kv_rows * kDim))), v(k.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < k.size(); ++i) k[i] = v[i] = static_cast<float>(i % 5) - 2.0f;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data(), p.lse = lse.data();
  const Status status = can_implement(p);
  if (!status.ok()) {
    static constexpr std::string_view kFields[] = {"cu_seqlens_q", "cu_seqlens_k", "seqused_k", "page_table",
                                                   "total_q", "total_k", "page_size", "num_pages",
                                                   "max_pages_per_seq", "seqlen_q", "seqlen_k", "num_splits",
                                                   "window_left", "window_right", "k:", "v:", "q:", "o:"};
    bool named = false;
    for (std::string_view field : kFields) named |= status.message().find(field) != std::string::npos;
    require(named, "can_implement rejects sequence params without naming a field: " + status.message());
    require(!run_host_model(p).ok(), "run_host_model accepted params can_implement rejects: " + status.message());
    return;
  }
  const Status ran = run_host_model(p);
  require(ran.ok(), "run_host_model failed on accepted sequence params: " + ran.message());
}

}  // namespace
}  // namespace flashcheck::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  flashcheck::fuzz::ByteReader in({data + 1, size - 1});
  if (data[0] >= 252) {  // the last four values of the first byte: the inference path's index arrays
    flashcheck::fuzz::check_sequence_indices(in);
    return 0;
  }
  switch (data[0] % 3) {
    case 0:
      flashcheck::fuzz::check_cpp_api(in);
      break;
    case 1:
      flashcheck::fuzz::check_c_abi(in);
      break;
    default:
      flashcheck::fuzz::check_case_line({data + 1, size - 1});
      break;
  }
  return 0;
}
