// The backend-independent runner: builds poisoned, canaried output images (O, LSE and the instrumentation
// the options ask for) and a canaried image of the sink, hands them to the host model (in place) or to the GPU
// launcher (round trip), then inspects them: damaged canaries, elements still holding the poison, input
// hashes (Q, K, V and the sink), and decodes O into canonical [B, Hq, Sq, D] order.
// Invariant: every check runs on the bytes the backend left, so a skipped row or a stray write shows up.
#include <climits>
#include <cstring>
#include <functional>
#include <string>

#include "flashcheck/runner.h"
#include "runner_internal.h"

namespace flashcheck {
namespace {

using detail::OutputImages;

// LSE rows allocated for a case without O elements (head_dim = 0): enough for any shape a test builds.
constexpr int64_t kMaxRowsWithoutO = int64_t{1} << 24;

// A padded output laid out like Q: the byte offset of element (b, h, i, d) of O.
struct OLayout {
  int64_t batch, heads, seqlen, head_dim, esize;
  Strides strides;
  int64_t offset(int64_t b, int64_t h, int64_t i, int64_t d) const {
    return (b * strides.batch + h * strides.head + i * strides.row + d) * esize;
  }
};

// Calls fn(canonical_index, byte_offset) for every element of O, in canonical order.
template <typename Fn>
void for_each_o_element(const OLayout& layout, Fn&& fn) {
  int64_t index = 0;
  for (int64_t b = 0; b < layout.batch; ++b)
    for (int64_t h = 0; h < layout.heads; ++h)
      for (int64_t i = 0; i < layout.seqlen; ++i)
        for (int64_t d = 0; d < layout.head_dim; ++d) fn(index++, layout.offset(b, h, i, d));
}

void store_poison(DType dtype, uint8_t* dst) {
  if (dtype_size(dtype) == 4) {
    std::memcpy(dst, &kPoisonBits32, sizeof(kPoisonBits32));
  } else {
    std::memcpy(dst, &kPoisonBits16, sizeof(kPoisonBits16));
  }
}

bool is_poison(DType dtype, const uint8_t* src) {
  if (dtype_size(dtype) == 4) return std::memcmp(src, &kPoisonBits32, sizeof(kPoisonBits32)) == 0;
  return std::memcmp(src, &kPoisonBits16, sizeof(kPoisonBits16)) == 0;
}

uint32_t load_bits(DType dtype, const uint8_t* src) {
  if (dtype_size(dtype) == 4) {
    uint32_t bits;
    std::memcpy(&bits, src, sizeof(bits));
    return bits;
  }
  uint16_t bits;
  std::memcpy(&bits, src, sizeof(bits));
  return bits;
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

// FNV-1a of Q, K and V, the part of HostInputs::hash() a backend reports after the call (the sink's bytes
// follow, from its image).
uint64_t qkv_hash(const HostInputs& in) {
  return fnv1a64(in.v.data(), in.v.size(), fnv1a64(in.k.data(), in.k.size(), fnv1a64(in.q.data(), in.q.size())));
}

// Guard | zeroed uint64 counters | guard: Instrumentation's counters accumulate (+=).
std::vector<uint8_t> make_counter_image(int64_t count) {
  std::vector<uint8_t> image(static_cast<size_t>(2 * kGuardBytes + count * int64_t{sizeof(uint64_t)}), kCanaryByte);
  std::memset(image.data() + kGuardBytes, 0, static_cast<size_t>(count) * sizeof(uint64_t));
  return image;
}

// First byte offset in [begin, end) of `image` not equal to the canary, or -1.
int64_t first_damage(const std::vector<uint8_t>& image, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    if (image[static_cast<size_t>(i)] != kCanaryByte) return i;
  }
  return -1;
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

// Where a backend's results go: the call gets params whose o/lse (and sink) point into the images' payloads
// (host backends) and may replace them (the GPU round trip); it returns the call's status, the config that ran
// and the hash of Q, K, V after the call.
using ImageCall = std::function<Status(Params* params, OutputImages* images, KernelConfig* config, uint64_t* hash_after)>;

RunOutputs run_guarded(const HostInputs& inputs, const RunOptions& options, const ImageCall& call) {
  RunOutputs out;
  Params params = inputs.params;
  params.q = inputs.q.empty() ? nullptr : inputs.q.data();
  params.k = inputs.k.empty() ? nullptr : inputs.k.data();
  params.v = inputs.v.empty() ? nullptr : inputs.v.data();

  const DType dtype = params.dtype;
  const int64_t esize = dtype_size(dtype);
  // O is laid out like Q (make_inputs sets the same strides), so Q's buffer size is O's, padding included.
  if (params.o_stride.batch != params.q_stride.batch || params.o_stride.head != params.q_stride.head ||
      params.o_stride.row != params.q_stride.row) {
    out.status = {StatusCode::kInvalidArgument, "run_case: O strides must equal Q strides (as make_inputs sets them)"};
    return out;
  }
  const OLayout o_layout{params.batch, params.heads_q, params.seqlen_q, params.head_dim, esize, params.o_stride};
  const int64_t o_payload = static_cast<int64_t>(inputs.q.size());
  const int64_t o_elements = static_cast<int64_t>(inputs.q_exact.size());
  // Rows of LSE (and m, l). With head_dim >= 1 they are bounded by O's element count, which make_inputs
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

  // Trace rows index the per-row arrays: a row outside them is a caller's mistake, not the backend's.
  int64_t trace_slots = 0;
  if (!options.trace_rows.empty()) {
    for (int64_t row : options.trace_rows) {
      if (row < 0 || row >= row_count) {
        out.status = {StatusCode::kInvalidArgument, "run_case: trace row " + std::to_string(row) + " outside [0, " +
                                                        std::to_string(row_count) + ")"};
        return out;
      }
    }
    if (options.trace_tiles < 1 || options.trace_rows.size() > size_t{INT32_MAX}) {
      out.status = {StatusCode::kInvalidArgument,
                    "run_case: trace_rows needs trace_tiles >= 1 and at most 2^31 - 1 rows"};
      return out;
    }
    trace_slots = static_cast<int64_t>(options.trace_rows.size()) * options.trace_tiles;
  }

  OutputImages images;
  // O: canary everywhere (guards and padding between rows), then poison on every element.
  images.o.assign(static_cast<size_t>(2 * kGuardBytes + o_payload), kCanaryByte);
  uint8_t* const o_base = images.o.data() + kGuardBytes;  // images are never reallocated after this
  for_each_o_element(o_layout, [&](int64_t, int64_t offset) { store_poison(dtype, o_base + offset); });
  images.lse = make_f32_image(row_count);
  if (options.instrument) {
    images.m = make_f32_image(row_count);
    images.l = make_f32_image(row_count);
  }
  if (options.count_tiles) {
    images.tile_kinds = make_counter_image(kTileKindCount);
    images.rescale = make_counter_image(kRescaleBuckets);
  }
  if (trace_slots > 0) {
    images.trace_m = make_f32_image(trace_slots);
    images.trace_l = make_f32_image(trace_slots);
  }
  if (!inputs.sink.empty()) images.sink = make_input_image(inputs.sink);

  const uint64_t hash_before = inputs.hash();
  uint64_t qkv_hash_after = 0;
  params.o = o_base;
  params.lse = reinterpret_cast<float*>(images.lse.data() + kGuardBytes);
  params.sink = reinterpret_cast<const float*>(detail::payload(images.sink));
  out.status = call(&params, &images, &out.config, &qkv_hash_after);
  // The sink's bytes as the run left them (in place, or read back from the device) continue the hash.
  const uint64_t hash_after = fnv1a64(detail::payload(images.sink), inputs.sink.size() * sizeof(float), qkv_hash_after);
  out.inputs_unchanged = hash_after == hash_before;

  // Canaries are checked even after a failed call: a rejected launch must not have written anything either.
  check_guards(&out, "O", images.o);
  check_guards(&out, "LSE", images.lse);
  check_guards(&out, "m", images.m);
  check_guards(&out, "l", images.l);
  check_guards(&out, "tile kinds", images.tile_kinds);
  check_guards(&out, "rescale buckets", images.rescale);
  check_guards(&out, "trace m", images.trace_m);
  check_guards(&out, "trace l", images.trace_l);
  check_guards(&out, "sink", images.sink);
  {
    // O padding: every payload byte that is not part of an element. Mark the elements, scan the rest.
    std::vector<uint8_t> is_element(static_cast<size_t>(o_payload), 0);
    for_each_o_element(o_layout, [&](int64_t, int64_t offset) {
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

  out.o.resize(static_cast<size_t>(o_elements));
  for_each_o_element(o_layout, [&](int64_t index, int64_t offset) {
    if (is_poison(dtype, o_base + offset)) ++out.unwritten_o;
    out.o[static_cast<size_t>(index)] = decode_dtype(dtype, load_bits(dtype, o_base + offset));
  });
  out.unwritten_lse = count_poison(DType::kF32, images.lse.data() + kGuardBytes, row_count);
  out.lse = decode_image<float>(images.lse, row_count);
  if (options.instrument) {
    out.row_m = decode_image<float>(images.m, row_count);
    out.row_l = decode_image<float>(images.l, row_count);
  }
  if (options.count_tiles) {
    out.tile_kind_counts = decode_image<uint64_t>(images.tile_kinds, kTileKindCount);
    out.rescale_buckets = decode_image<uint64_t>(images.rescale, kRescaleBuckets);
  }
  if (trace_slots > 0) {
    out.trace_m = decode_image<float>(images.trace_m, trace_slots);
    out.trace_l = decode_image<float>(images.trace_l, trace_slots);
  }
  return out;
}

}  // namespace

RunOutputs run_case(const HostInputs& inputs, const HostBackend& backend, const RunOptions& options) {
  return run_guarded(inputs, options, [&](Params* params, OutputImages* images, KernelConfig* config, uint64_t* hash_after) {
    Instrumentation inst;
    inst.row_m = reinterpret_cast<float*>(detail::payload(images->m));
    inst.row_l = reinterpret_cast<float*>(detail::payload(images->l));
    inst.tile_kind_counts = reinterpret_cast<uint64_t*>(detail::payload(images->tile_kinds));
    inst.rescale_buckets = reinterpret_cast<uint64_t*>(detail::payload(images->rescale));
    if (!images->trace_m.empty()) {
      inst.trace_rows = options.trace_rows.data();
      inst.trace_row_count = static_cast<int32_t>(options.trace_rows.size());
      inst.max_tiles = options.trace_tiles;
      inst.trace_m = reinterpret_cast<float*>(detail::payload(images->trace_m));
      inst.trace_l = reinterpret_cast<float*>(detail::payload(images->trace_l));
    }
    *config = options.model.override_config ? options.model.config : select_config(*params);
    const Status status = backend(*params, inst);
    *hash_after = qkv_hash(inputs);
    return status;
  });
}

RunOutputs run_case(const HostInputs& inputs, Backend backend, const RunOptions& options) {
  if (backend == Backend::kGpu) {
    return run_guarded(inputs, options, [&](Params* params, OutputImages* images, KernelConfig* config, uint64_t* hash_after) {
      *config = select_config(*params);
      return detail::run_on_gpu(inputs, *params, images, options, hash_after);
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
