// Internal seam between the backend-independent runner (runner.cpp) and the GPU launcher
// (runner_gpu.cpp, compiled once per kernel library: production, instrumented, mutant).
// Output images are host byte buffers laid out kGuardBytes | payload | kGuardBytes, already poisoned (or
// zeroed, for counters) and canaried; a backend writes the payload in place (host model) or round-trips
// the image (GPU). An empty image is a buffer the run does not record: its pointer stays null. The sink and the
// index arrays of sequences, inputs, travel the same way (their payloads are their values), so their guards and
// their bytes are compared after the run with the inputs' like Q, K and V's.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/backward.h"
#include "flashcheck/inputs.h"
#include "flashcheck/runner.h"

namespace flashcheck::detail {

struct OutputImages {
  std::vector<uint8_t> o, lse;
  std::vector<uint8_t> m, l;                     // RunOptions::instrument
  std::vector<uint8_t> tile_kinds, rescale;      // RunOptions::count_tiles (uint64 counters, zeroed)
  std::vector<uint8_t> trace_m, trace_l;         // RunOptions::trace_rows
  std::vector<uint8_t> dropout_mask;             // RunOptions::dropout_mask: [B, Hq, Sq, Sk] bytes, kMaskPoison
  std::vector<uint8_t> sink;                     // the sink logits ([heads_q] fp32), when the inputs have them
  // The index arrays (int32), when the inputs have them (HostInputs).
  std::vector<uint8_t> cu_seqlens_q, cu_seqlens_k, seqused_k, page_table;
  // The fp8 descales ([batch, heads_kv] fp32 each), when the inputs have them.
  std::vector<uint8_t> descale_q, descale_k, descale_v;
  // RunOptions::trace_rows translated to the kernel's row index (instrument.h): the rows the backend traces.
  std::vector<int64_t> trace_rows;
};

// What fills the dropout mask dump's bytes before the call: neither 0 nor 1, so a byte the kernel leaves unwritten
// is told from a decision.
inline constexpr uint8_t kMaskPoison = 0xA5;

// Whether a backend left the bytes of Q, K and V different from the inputs', in that order (compared byte for byte:
// a hash of each before and after cost more than the GPU run of a small case).
using QkvChanged = std::array<bool, 3>;

// The poison pattern of `dtype` (kPoisonBits16 / kPoisonBits32) written at, or found at, one element.
inline void store_poison(DType dtype, uint8_t* dst) {
  if (dtype_size(dtype) == 4) {
    std::memcpy(dst, &kPoisonBits32, sizeof(kPoisonBits32));
  } else {
    std::memcpy(dst, &kPoisonBits16, sizeof(kPoisonBits16));
  }
}
inline bool is_poison(DType dtype, const uint8_t* src) {
  if (dtype_size(dtype) == 4) return std::memcmp(src, &kPoisonBits32, sizeof(kPoisonBits32)) == 0;
  return std::memcmp(src, &kPoisonBits16, sizeof(kPoisonBits16)) == 0;
}

// First byte offset in [begin, end) of `image` not equal to the canary, or -1.
inline int64_t first_damage(const std::vector<uint8_t>& image, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    if (image[static_cast<size_t>(i)] != kCanaryByte) return i;
  }
  return -1;
}

// Payload start of an image, or null for an image the run does not record.
inline uint8_t* payload(std::vector<uint8_t>& image) { return image.empty() ? nullptr : image.data() + kGuardBytes; }

// Uploads the inputs, the trace rows (images->trace_rows) and the images, runs the kernel on options.stream,
// synchronises, downloads the images (the sink's and the index arrays' too) and compares the device copies of q, k,
// v with the inputs' into *qkv_changed. `params` carries shape, strides, scale, window, softcap and the sequence sizes; its
// pointers are replaced by device pointers.
Status run_on_gpu(const HostInputs& inputs, Params params, OutputImages* images, const RunOptions& options,
                  QkvChanged* qkv_changed);

// The backward pass's images (backward_check.cpp): the forward's O and LSE, read; dQ, dK, dV and dsink (empty without a
// sink), written.
struct BackwardImages {
  std::vector<uint8_t> o, lse, dq, dk, dv, dsink;
};

// Uploads the inputs (Q, K, V, dO, the sink, the index arrays) and the images, runs run_backward(params) on `stream`
// (or `call`, a subject's backward, where given) with params' pointers replaced by the device copies, synchronises,
// downloads the images, and appends to *changed the name of every input ("q", "k", "v", "d_o", "sink", and the index
// arrays) whose device copy no longer holds the inputs' bytes.
Status backward_on_gpu(const HostInputs& inputs, BackwardParams params, BackwardImages* images, void* stream,
                       std::vector<const char*>* changed,
                       const std::function<Status(const BackwardParams&, void* stream)>& call = {});

}  // namespace flashcheck::detail
