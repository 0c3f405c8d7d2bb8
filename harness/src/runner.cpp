// The backend-independent runner: builds poisoned, canaried output images (O, LSE and the instrumentation
// the options ask for) and canaried images of the sink and the index arrays, hands them to the host model (in
// place) or to the GPU launcher (round trip), then inspects them: damaged canaries, elements still holding the
// poison, changed inputs (Q, K, V, the sink, the index arrays, compared byte for byte), and decodes O, LSE, m and
// l into canonical [B, Hq, Sq(, D)] order from the kernel's (packed with sequences).
// Invariant: every check runs on the bytes the backend left, so a skipped row or a stray write shows up.
#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "element_bytes.h"
#include "flashcheck/runner.h"
#include "runner_internal.h"

namespace flashcheck {
namespace {

using detail::first_damage;
using detail::is_poison;
using detail::store_poison;

using detail::OutputImages;
using detail::QkvChanged;

// LSE rows allocated for a case without O elements (head_dim = 0): enough for any shape a test builds.
constexpr int64_t kMaxRowsWithoutO = int64_t{1} << 24;
// The largest dropout mask dump a run takes (bytes, one per element of P): a debugging output, host memory.
constexpr int64_t kMaxMaskBytes = int64_t{1} << 30;

// The query rows of a run: canonical (b, h, i) with i below sequence b's length, as RunOutputs orders them
// ([B, Hq, Sq]), and where the kernel keeps each (instrument.h): LSE, m and l at (b * Hq + h) * Sq + i, or at
// h * total_q + cu_seqlens_q[b] + i when Q is packed; O's element at its strides, dense or packed.
struct RowMap {
  int64_t batch = 0, heads = 0, seqlen = 0, o_columns = 0;  // O's columns: value_head_dim
  const std::vector<int32_t>* cu_q = nullptr;  // packed Q: [batch + 1]; null: dense
  int64_t total_q = 0;

  bool packed() const { return cu_q != nullptr; }
  int64_t length(int64_t b) const {
    return packed() ? int64_t{(*cu_q)[static_cast<size_t>(b) + 1]} - (*cu_q)[static_cast<size_t>(b)] : seqlen;
  }
  int64_t canonical_row(int64_t b, int64_t h, int64_t i) const { return (b * heads + h) * seqlen + i; }
  int64_t kernel_row(int64_t b, int64_t h, int64_t i) const {
    return packed() ? h * total_q + (*cu_q)[static_cast<size_t>(b)] + i : canonical_row(b, h, i);
  }
  // Byte offset of element (b, h, i, d) of an output of `strides` over Q's rows (dense or packed).
  int64_t o_offset(const Strides& strides, int64_t esize, int64_t b, int64_t h, int64_t i, int64_t d) const {
    const int64_t row = packed() ? ((*cu_q)[static_cast<size_t>(b)] + i) * strides.row
                                 : b * strides.batch + i * strides.row;
    return (row + h * strides.head + d) * esize;
  }
  // Whether O's last element lies inside `payload` bytes: strides non-negative and its offset without overflow.
  bool o_fits(const Strides& strides, int64_t esize, int64_t payload) const {
    if (batch <= 0 || heads <= 0 || o_columns <= 0 || (!packed() && seqlen <= 0)) return true;
    if (strides.batch < 0 || strides.head < 0 || strides.row < 0) return false;
    int64_t last_b = batch - 1;
    while (packed() && last_b > 0 && length(last_b) == 0) --last_b;  // packed: batch entries of cu_seqlens_q
    const int64_t last_i = length(last_b) - 1;
    if (last_i < 0) return true;
    const int64_t last_row = packed() ? (*cu_q)[static_cast<size_t>(last_b)] + last_i : last_i;
    int64_t offset = 0, term = 0;
    const bool ok = !__builtin_mul_overflow(packed() ? 0 : last_b, strides.batch, &offset) &&
                    !__builtin_mul_overflow(last_row, strides.row, &term) &&
                    !__builtin_add_overflow(offset, term, &offset) &&
                    !__builtin_mul_overflow(heads - 1, strides.head, &term) &&
                    !__builtin_add_overflow(offset, term, &offset) &&
                    !__builtin_add_overflow(offset, o_columns, &offset) &&
                    !__builtin_mul_overflow(offset, esize, &offset);
    return ok && offset <= payload;
  }
  // Calls fn(b, h, i) for every row, in canonical order.
  template <typename Fn>
  void for_each_row(Fn&& fn) const {
    // No batch loop over problems without rows (no heads, or dense Q of no rows): batches may number billions.
    if (heads <= 0 || (!packed() && seqlen <= 0)) return;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t rows = length(b);
      if (rows == 0) continue;  // no head loop over a sequence without rows: heads may number billions
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < rows; ++i) fn(b, h, i);
    }
  }
};

// Calls fn(canonical_index, byte_offset) for every element of O, in canonical order. With packed Q these are
// every element of every packed row: no element of O lies outside a sequence.
template <typename Fn>
void for_each_o_element(const RowMap& rows, const Strides& strides, int64_t esize, Fn&& fn) {
  rows.for_each_row([&](int64_t b, int64_t h, int64_t i) {
    const int64_t index = rows.canonical_row(b, h, i) * rows.o_columns;
    for (int64_t d = 0; d < rows.o_columns; ++d) fn(index + d, rows.o_offset(strides, esize, b, h, i, d));
  });
}

// Guard | poisoned fp32 array | guard.
std::vector<uint8_t> make_f32_image(int64_t count) {
  std::vector<uint8_t> image(static_cast<size_t>(2 * kGuardBytes + count * int64_t{sizeof(float)}), kCanaryByte);
  for (int64_t i = 0; i < count; ++i) store_poison(DType::kF32, image.data() + kGuardBytes + i * int64_t{sizeof(float)});
  return image;
}

// Guard | the bytes of `values` | guard: an input that travels as an image.
template <typename T>
std::vector<uint8_t> make_input_image(const std::vector<T>& values) {
  std::vector<uint8_t> image(2 * kGuardBytes + values.size() * sizeof(T), kCanaryByte);
  std::memcpy(image.data() + kGuardBytes, values.data(), values.size() * sizeof(T));
  return image;
}

// Whether an input's payload in its image differs from the input's values.
template <typename T>
bool payload_differs(const std::vector<T>& values, std::vector<uint8_t>& image) {
  const size_t size = values.size() * sizeof(T);
  return size > 0 && std::memcmp(detail::payload(image), values.data(), size) != 0;
}

// Guard | zeroed uint64 counters | guard: Instrumentation's counters accumulate (+=).
std::vector<uint8_t> make_counter_image(int64_t count) {
  std::vector<uint8_t> image(static_cast<size_t>(2 * kGuardBytes + count * int64_t{sizeof(uint64_t)}), kCanaryByte);
  std::memset(image.data() + kGuardBytes, 0, static_cast<size_t>(count) * sizeof(uint64_t));
  return image;
}

// Records damage at `offset` (relative to the payload start; negative = in the leading guard).
void note_damage(RunOutputs* out, const char* buffer, int64_t offset) {
  if (out->canaries_intact) {
    out->damaged_buffer = buffer;
    out->first_damaged_canary = offset;
  }
  out->canaries_intact = false;
}

// Guards before and after one image (offsets reported relative to the payload start: negative = before).
void check_guards(RunOutputs* out, const char* buffer, const std::vector<uint8_t>& image) {
  if (image.empty()) return;
  const int64_t size = static_cast<int64_t>(image.size());
  const int64_t before = first_damage(image, 0, kGuardBytes);
  if (before >= 0) note_damage(out, buffer, before - kGuardBytes);
  const int64_t after = first_damage(image, size - kGuardBytes, size);
  if (after >= 0) note_damage(out, buffer, after - kGuardBytes);
}

// The payload of an image as `count` values of T.
template <typename T>
std::vector<T> decode_image(const std::vector<uint8_t>& image, int64_t count) {
  std::vector<T> values(static_cast<size_t>(count));
  if (count > 0) std::memcpy(values.data(), image.data() + kGuardBytes, static_cast<size_t>(count) * sizeof(T));
  return values;
}

// A per-row fp32 image (LSE, m, l: the kernel's row index) in canonical [B, Hq, Sq] order, 0 past a sequence's
// rows.
std::vector<float> decode_rows(const std::vector<uint8_t>& image, const RowMap& rows, int64_t kernel_rows) {
  const std::vector<float> kernel = decode_image<float>(image, kernel_rows);
  if (!rows.packed()) return kernel;
  std::vector<float> canonical(static_cast<size_t>(rows.batch * rows.heads * rows.seqlen), 0.0f);
  rows.for_each_row([&](int64_t b, int64_t h, int64_t i) {
    canonical[static_cast<size_t>(rows.canonical_row(b, h, i))] = kernel[static_cast<size_t>(rows.kernel_row(b, h, i))];
  });
  return canonical;
}

}  // namespace

const char* to_string(Backend backend) { return backend == Backend::kGpu ? "gpu" : "model"; }

int64_t count_poison(DType dtype, const uint8_t* bytes, int64_t elements) {
  const int64_t esize = dtype_size(dtype);
  int64_t count = 0;
  for (int64_t i = 0; i < elements; ++i) count += is_poison(dtype, bytes + i * esize) ? 1 : 0;
  return count;
}

bool is_unwritten(float x) { return is_poison(DType::kF32, reinterpret_cast<const uint8_t*>(&x)); }

namespace {

// Where a backend's results go: the call gets params whose o/lse (and sink, and index arrays) point into the
// images' payloads (host backends) and may replace them (the GPU round trip); it returns the call's status, the
// config that ran and which of Q, K, V it left changed.
using ImageCall =
    std::function<Status(Params* params, OutputImages* images, KernelConfig* config, QkvChanged* changed)>;

// The inputs a run compares after the call, in HostInputs' order, by the names RunOutputs::modified_input uses.
constexpr int kCheckedInputs = 11;
constexpr const char* kInputNames[kCheckedInputs] = {"q",         "k",          "v",         "sink",
                                                     "cu_seqlens_q", "cu_seqlens_k", "seqused_k", "page_table",
                                                     "descale_q", "descale_k",  "descale_v"};

RunOutputs run_guarded(const HostInputs& inputs, const RunOptions& options, const ImageCall& call) {
  RunOutputs out;
  Params params = inputs.params;
  params.q = inputs.q.empty() ? nullptr : inputs.q.data();
  params.k = inputs.k.empty() ? nullptr : inputs.k.data();
  params.v = inputs.v.empty() ? nullptr : inputs.v.data();

  const DType dtype = output_dtype(params.dtype);  // O's (bf16 for fp8 inputs)
  const int64_t esize = dtype_size(dtype);
  RowMap rows{params.batch, params.heads_q, params.seqlen_q, value_head_dim(params)};
  if (!inputs.cu_seqlens_q.empty()) {
    // Packed Q: the runner walks the rows by the inputs' own prefix sums (as make_inputs builds them), so they must
    // describe the buffers it allocates.
    const std::vector<int32_t>& cu = inputs.cu_seqlens_q;
    if (params.batch < 0 || cu.size() != static_cast<size_t>(params.batch) + 1 || cu.front() != 0 ||
        cu.back() != params.total_q || !std::is_sorted(cu.begin(), cu.end())) {
      out.status = {StatusCode::kInvalidArgument, "run_case: cu_seqlens_q must have batch + 1 non-decreasing entries "
                                                  "from 0 to total_q (as make_inputs builds it)"};
      return out;
    }
    rows.cu_q = &inputs.cu_seqlens_q;
    rows.total_q = params.total_q;
  }
  // O's buffer as make_inputs sized it (HostInputs::o_padded); its strides must stay inside it.
  const int64_t o_payload = inputs.o_padded * esize;
  const int64_t o_elements = inputs.o_elements;
  if (!rows.o_fits(params.o_stride, esize, o_payload)) {
    out.status = {StatusCode::kInvalidArgument, "run_case: O's strides reach past the O buffer make_inputs sized "
                                                "(HostInputs::o_padded)"};
    return out;
  }
  // Rows of the canonical outputs ([B, Hq, Sq]) and of LSE (and m, l) as the kernel writes them (heads_q * total_q
  // with packed Q, never more). With head_dim >= 1 they are bounded by O's element count, which make_inputs
  // bounded; with head_dim = 0 (an invalid case the backend must reject) they are not, so a huge row count
  // is answered by can_implement alone rather than by allocating the guards of a call that cannot run.
  int64_t row_count = 0;
  const bool sizes_sane = params.batch >= 0 && params.heads_q >= 0 && params.seqlen_q >= 0 &&
                          !__builtin_mul_overflow(params.batch, params.heads_q, &row_count) &&
                          !__builtin_mul_overflow(row_count, params.seqlen_q, &row_count);
  if (!sizes_sane || (row_count > o_elements && row_count > kMaxRowsWithoutO)) {
    out.status = can_implement(params);
    if (out.status.ok()) out.status = {StatusCode::kInvalidArgument, "run_case: row count too large for host memory"};
    return out;
  }
  const int64_t kernel_rows = rows.packed() ? params.heads_q * rows.total_q : row_count;

  // Trace rows index the per-row arrays: a row outside them is a caller's mistake, not the backend's. They come as
  // canonical rows; the backend gets the kernel's row index of each.
  OutputImages images;
  int64_t trace_slots = 0;
  if (!options.trace_rows.empty()) {
    for (int64_t row : options.trace_rows) {
      if (row < 0 || row >= row_count) {
        out.status = {StatusCode::kInvalidArgument, "run_case: trace row " + std::to_string(row) + " outside [0, " +
                                                        std::to_string(row_count) + ")"};
        return out;
      }
      const int64_t b = row / (params.heads_q * params.seqlen_q), h = row / params.seqlen_q % params.heads_q;
      const int64_t i = row % params.seqlen_q;
      if (i >= rows.length(b)) {
        out.status = {StatusCode::kInvalidArgument, "run_case: trace row " + std::to_string(row) + " is row " +
                                                        std::to_string(i) + " of sequence " + std::to_string(b) +
                                                        ", which has " + std::to_string(rows.length(b)) + " rows"};
        return out;
      }
      images.trace_rows.push_back(rows.kernel_row(b, h, i));
    }
    if (options.trace_tiles < 1 || options.trace_rows.size() > size_t{INT32_MAX}) {
      out.status = {StatusCode::kInvalidArgument,
                    "run_case: trace_rows needs trace_tiles >= 1 and at most 2^31 - 1 rows"};
      return out;
    }
    trace_slots = static_cast<int64_t>(options.trace_rows.size()) * options.trace_tiles;
  }

  // O: canary everywhere (guards and padding between rows), then poison on every element.
  images.o.assign(static_cast<size_t>(2 * kGuardBytes + o_payload), kCanaryByte);
  uint8_t* const o_base = images.o.data() + kGuardBytes;  // images are never reallocated after this
  for_each_o_element(rows, params.o_stride, esize, [&](int64_t, int64_t offset) { store_poison(dtype, o_base + offset); });
  images.lse = make_f32_image(kernel_rows);
  if (options.instrument) {
    images.m = make_f32_image(kernel_rows);
    images.l = make_f32_image(kernel_rows);
  }
  if (options.count_tiles) {
    images.tile_kinds = make_counter_image(kTileKindCount);
    images.rescale = make_counter_image(kRescaleBuckets);
  }
  if (trace_slots > 0) {
    images.trace_m = make_f32_image(trace_slots);
    images.trace_l = make_f32_image(trace_slots);
  }
  // The mask dump: [B, Hq, Sq, Sk] bytes, every one of which the kernel writes.
  int64_t mask_bytes = 0;
  if (options.dropout_mask) {
    const bool fits = params.dropout_p > 0.0f && !__builtin_mul_overflow(row_count, params.seqlen_k, &mask_bytes) &&
                      mask_bytes <= kMaxMaskBytes;
    if (!fits) {
      out.status = {StatusCode::kInvalidArgument,
                    params.dropout_p > 0.0f ? "run_case: the dropout mask dump would exceed " +
                                                  std::to_string(kMaxMaskBytes) + " bytes"
                                            : std::string("run_case: a dropout mask dump needs dropout_p > 0")};
      return out;
    }
    images.dropout_mask.assign(static_cast<size_t>(2 * kGuardBytes + mask_bytes), kCanaryByte);
    std::memset(images.dropout_mask.data() + kGuardBytes, detail::kMaskPoison, static_cast<size_t>(mask_bytes));
  }
  if (!inputs.sink.empty()) images.sink = make_input_image(inputs.sink);
  if (!inputs.cu_seqlens_q.empty()) images.cu_seqlens_q = make_input_image(inputs.cu_seqlens_q);
  if (!inputs.cu_seqlens_k.empty()) images.cu_seqlens_k = make_input_image(inputs.cu_seqlens_k);
  if (!inputs.seqused_k.empty()) images.seqused_k = make_input_image(inputs.seqused_k);
  if (!inputs.page_table.empty()) images.page_table = make_input_image(inputs.page_table);
  if (!inputs.descale_q.empty()) images.descale_q = make_input_image(inputs.descale_q);
  if (!inputs.descale_k.empty()) images.descale_k = make_input_image(inputs.descale_k);
  if (!inputs.descale_v.empty()) images.descale_v = make_input_image(inputs.descale_v);

  // The images of the inputs after q, k, v, in kInputNames' order.
  std::vector<uint8_t>* const input_images[kCheckedInputs - 3] = {
      &images.sink,      &images.cu_seqlens_q, &images.cu_seqlens_k, &images.seqused_k,
      &images.page_table, &images.descale_q,   &images.descale_k,    &images.descale_v};
  params.o = o_base;
  params.lse = reinterpret_cast<float*>(images.lse.data() + kGuardBytes);
  params.dropout_mask_out = detail::payload(images.dropout_mask);
  params.sink = reinterpret_cast<const float*>(detail::payload(images.sink));
  params.cu_seqlens_q = reinterpret_cast<const int32_t*>(detail::payload(images.cu_seqlens_q));
  params.cu_seqlens_k = reinterpret_cast<const int32_t*>(detail::payload(images.cu_seqlens_k));
  params.seqused_k = reinterpret_cast<const int32_t*>(detail::payload(images.seqused_k));
  params.page_table = reinterpret_cast<const int32_t*>(detail::payload(images.page_table));
  params.descale_q = reinterpret_cast<const float*>(detail::payload(images.descale_q));
  params.descale_k = reinterpret_cast<const float*>(detail::payload(images.descale_k));
  params.descale_v = reinterpret_cast<const float*>(detail::payload(images.descale_v));
  QkvChanged qkv_changed{};
  out.status = call(&params, &images, &out.config, &qkv_changed);
  // The split count the kernel and the host model derive from these params (pointers only count as null or not).
  out.splits = effective_splits(params);
  // The inputs as the run left them (in place, or read back from the device): the first that changed is named.
  const std::array<bool, kCheckedInputs> changed = {
      qkv_changed[0],
      qkv_changed[1],
      qkv_changed[2],
      payload_differs(inputs.sink, *input_images[0]),
      payload_differs(inputs.cu_seqlens_q, *input_images[1]),
      payload_differs(inputs.cu_seqlens_k, *input_images[2]),
      payload_differs(inputs.seqused_k, *input_images[3]),
      payload_differs(inputs.page_table, *input_images[4]),
      payload_differs(inputs.descale_q, *input_images[5]),
      payload_differs(inputs.descale_k, *input_images[6]),
      payload_differs(inputs.descale_v, *input_images[7])};
  for (int i = 0; i < kCheckedInputs && out.inputs_unchanged; ++i) {
    if (changed[static_cast<size_t>(i)]) {
      out.inputs_unchanged = false;
      out.modified_input = kInputNames[i];
    }
  }

  // Canaries are checked even after a failed call: a rejected launch must not have written anything either.
  check_guards(&out, "O", images.o);
  check_guards(&out, "LSE", images.lse);
  check_guards(&out, "m", images.m);
  check_guards(&out, "l", images.l);
  check_guards(&out, "tile kinds", images.tile_kinds);
  check_guards(&out, "rescale buckets", images.rescale);
  check_guards(&out, "trace m", images.trace_m);
  check_guards(&out, "trace l", images.trace_l);
  check_guards(&out, "dropout mask", images.dropout_mask);
  for (int i = 3; i < kCheckedInputs; ++i) check_guards(&out, kInputNames[i], *input_images[i - 3]);
  {
    // O padding: every payload byte that is not part of an element. Mark the elements, scan the rest.
    std::vector<uint8_t> is_element(static_cast<size_t>(o_payload), 0);
    for_each_o_element(rows, params.o_stride, esize, [&](int64_t, int64_t offset) {
      std::memset(is_element.data() + offset, 1, static_cast<size_t>(esize));
    });
    for (int64_t i = 0; i < o_payload; ++i) {
      if (!is_element[static_cast<size_t>(i)] && o_base[i] != kCanaryByte) {
        note_damage(&out, "O padding", i);
        break;
      }
    }
  }
  if (!out.status.ok()) return out;

  // Canonical outputs: rows past a sequence's length stay 0.
  out.o.assign(static_cast<size_t>(o_elements), 0.0);
  for_each_o_element(rows, params.o_stride, esize, [&](int64_t index, int64_t offset) {
    if (is_poison(dtype, o_base + offset)) ++out.unwritten_o;
    out.o[static_cast<size_t>(index)] = decode_dtype(dtype, detail::load_bits(esize, o_base + offset));
  });
  out.unwritten_lse = count_poison(DType::kF32, images.lse.data() + kGuardBytes, kernel_rows);
  out.lse = decode_rows(images.lse, rows, kernel_rows);
  if (options.instrument) {
    out.row_m = decode_rows(images.m, rows, kernel_rows);
    out.row_l = decode_rows(images.l, rows, kernel_rows);
  }
  if (options.count_tiles) {
    out.tile_kind_counts = decode_image<uint64_t>(images.tile_kinds, kTileKindCount);
    out.rescale_buckets = decode_image<uint64_t>(images.rescale, kRescaleBuckets);
  }
  if (mask_bytes > 0) {
    const uint8_t* mask = images.dropout_mask.data() + kGuardBytes;
    out.dropout_mask.assign(mask, mask + mask_bytes);
    out.unwritten_mask = std::count_if(mask, mask + mask_bytes, [](uint8_t x) { return x > 1; });
  }
  if (trace_slots > 0) {
    out.trace_m = decode_image<float>(images.trace_m, trace_slots);
    out.trace_l = decode_image<float>(images.trace_l, trace_slots);
  }
  return out;
}

}  // namespace

RunOutputs run_case(const HostInputs& inputs, const HostBackend& backend, const RunOptions& options) {
  return run_guarded(inputs, options, [&](Params* params, OutputImages* images, KernelConfig* config,
                                          QkvChanged* changed) {
    Instrumentation inst;
    inst.row_m = reinterpret_cast<float*>(detail::payload(images->m));
    inst.row_l = reinterpret_cast<float*>(detail::payload(images->l));
    inst.tile_kind_counts = reinterpret_cast<uint64_t*>(detail::payload(images->tile_kinds));
    inst.rescale_buckets = reinterpret_cast<uint64_t*>(detail::payload(images->rescale));
    if (!images->trace_m.empty()) {
      inst.trace_rows = images->trace_rows.data();
      inst.trace_row_count = static_cast<int32_t>(images->trace_rows.size());
      inst.max_tiles = options.trace_tiles;
      inst.trace_m = reinterpret_cast<float*>(detail::payload(images->trace_m));
      inst.trace_l = reinterpret_cast<float*>(detail::payload(images->trace_l));
    }
    *config = options.model.override_config ? options.model.config : select_config(*params);
    // The backend reads Q, K and V in place: copies of their bytes to compare with after the call.
    const std::vector<uint8_t> q_before = inputs.q, k_before = inputs.k, v_before = inputs.v;
    const Status status = backend(*params, inst);
    *changed = {inputs.q != q_before, inputs.k != k_before, inputs.v != v_before};
    return status;
  });
}

RunOutputs run_case(const HostInputs& inputs, Backend backend, const RunOptions& options) {
  if (backend == Backend::kGpu) {
    return run_guarded(inputs, options, [&](Params* params, OutputImages* images, KernelConfig* config,
                                            QkvChanged* changed) {
      *config = select_config(*params);
      return detail::run_on_gpu(inputs, *params, images, options, changed);
    });
  }
  const HostBackend model = [&](const Params& params, const Instrumentation& inst) {
    HostModelOptions model_options = options.model;
    model_options.instrumentation = inst;
    return run_host_model(params, model_options);
  };
  return run_case(inputs, model, options);
}

}  // namespace flashcheck
