// Deterministic inputs for a case: a counter-based generator (Philox4x32-10, keyed by the case seed,
// counter = (element index, stream id of the tensor)) feeding distributions built only from IEEE basic
// operations (+ - * / sqrt, exact frexp/ldexp) and our own fixed-coefficient log and cos, never std::
// distributions or libm, compiled with -ffp-contract=off: a case line replays bit for bit on every
// machine, compiler and standard library (golden-hash test).
#pragma once

#include <cstdint>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/case.h"
#include "flashcheck/dtype.h"  // encode_dtype, decode_dtype: how inputs are encoded and outputs decoded
#include "flashcheck/oracle_problem.h"

namespace flashcheck {

// Philox4x32-10 (Salmon et al., SC'11): four 32-bit outputs for (counter, key).
struct Philox4x32 {
  static void generate(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);
};

// Philox streams: counter = {index low, index high, stream, 0}, key = {seed low, seed high}. One call per
// element (index = canonical [B, H, S, D] position), so any element can be regenerated on its own.
enum class Stream : uint32_t {
  kQ = 1,
  kK = 2,
  kV = 3,
  kSink = 4,                 // index = query head
  kPageOrder = 5,            // index = i of the Fisher-Yates shuffle of the physical pages (i = num_pages - 1 .. 1)
  kDOut = 6,                 // dO of a grad case: index = canonical [B, Hq, Sq, value_dim] position, as O's elements
  kDescaleQ = 7,             // fp8 descales (Case::descale): index = b * heads_kv + g
  kDescaleK = 8,
  kDescaleV = 9,
  kDominantRowQ = 0x101,     // index = b * H + h: which row of (b, h) is dominant
  kDominantRowK = 0x102,
  kDominantRowV = 0x103,
  kDominantSink = 0x104,     // index 0: which head's sink is dominant
  kDominantRowDOut = 0x106,  // index = b * Hq + h: which row of dO's (b, h) is dominant
};

// Deterministic elementary functions (same bits on every platform; accurate to a few ulp).
namespace detmath {
double log(double x);        // natural log for finite x > 0
double cos_2pi(double turns);  // cos(2*pi*turns) for turns in [0, 1)
}  // namespace detmath

// Bit patterns. Inputs' padding elements hold a NaN so that a kernel reading padding poisons its result (with
// sequences, the case's Poison chooses: this NaN, +inf of the dtype, or 0);
// O and LSE are poisoned with a different NaN payload before a run so that "never written" is told apart
// from a NaN the kernel computed (which would carry the canonical payload).
inline constexpr uint8_t kInputPadBits8 = 0xFF;           // NaN as e4m3 (its one NaN, with the sign set)
inline constexpr uint16_t kInputPadBits16 = 0x7FD5;       // NaN as f16 and as bf16
inline constexpr uint32_t kInputPadBits32 = 0x7FC0BAD1u;  // NaN as f32
// The padding NaN of `dtype`'s inputs, by its size.
constexpr uint32_t input_pad_bits(DType dtype) {
  const int64_t size = find_dtype(dtype) != nullptr ? find_dtype(dtype)->size_bytes : 4;
  return size == 4 ? kInputPadBits32 : size == 2 ? kInputPadBits16 : kInputPadBits8;
}
inline constexpr uint16_t kPoisonBits16 = 0x7FC1;         // NaN as f16 and as bf16
inline constexpr uint32_t kPoisonBits32 = 0x7FC0DEADu;    // NaN as f32

// Values are drawn at their canonical index [b, h, s, d] of a [batch, heads, seqlen_q (or seqlen_k), head_dim]
// array, the same with or without sequences: a case with sequences holds, for s below a sequence's own q (Q) or
// k (K, V), the values of the dense case of the same b, sq and sk at the same positions. So the distributions
// that depend on the row run over sq and sk, not over a sequence's own length: ramp's position is s / (sq - 1)
// (or sk), and dominant's row is drawn below sq (or sk), which may lie past a shorter sequence's end.
struct HostInputs {
  // case_params(case) with host pointers to q/k/v, the sink and the index arrays below (o/lse null): what the host
  // model reads. The pointers refer to this object's vectors: after a copy, call bind() (the runner always
  // rebinds).
  Params params;
  // Dtype-encoded bytes in the case's layout (dense, packed or paged, case_params). Every element that is not a
  // valid row's (Q) or a used key's (K, V) holds the case's poison: padding, a sequence's extra slots, the unused
  // tail of its last page, the spare page.
  std::vector<uint8_t> q, k, v;
  // The values decoded, contiguous [B, H, S, D] with S = seqlen_q / seqlen_k (the maxima) and D = head_dim (Q, K)
  // or value_dim() (V); rows past a sequence's own q or k are 0.
  std::vector<double> q_exact, k_exact, v_exact;
  // O's buffer in the case's layout (params.o_stride: laid out like Q over value_dim() + pad elements per row) and
  // its canonical elements [B, Hq, Sq, value_dim()]: what the runner allocates and decodes.
  int64_t o_padded = 0, o_elements = 0;
  std::vector<float> sink;            // [heads_q] fp32 sink logits; empty: the case has no sink
  std::vector<double> sink_exact;     // the same values as doubles
  // fp8 descales (Case::descale): [batch, heads_kv] fp32 each, as doubles beside; all empty without descales.
  std::vector<float> descale_q, descale_k, descale_v;
  std::vector<double> descale_q_exact, descale_k_exact, descale_v_exact;
  // dO, the upstream gradient of a grad case (Case::grad; both empty without it): drawn like Q, K and V from
  // Case::dout (Stream::kDOut, the case's dtype, no injections) and always on the host. d_o is dtype-encoded and
  // laid out exactly like O (params.o_stride, o_padded elements; packed like O with sequences), its padding holding
  // the case's poison as the inputs' padding does; d_o_exact is canonical [B, Hq, Sq, value_dim()], 0 past a
  // sequence's own q.
  std::vector<uint8_t> d_o;
  std::vector<double> d_o_exact;
  // Index arrays of a case with sequences (attention.h, "Sequences"); each empty where the case has none:
  //   cu_seqlens_q  [batch + 1] prefix sums of the q rows (every case with seqs)
  //   cu_seqlens_k  [batch + 1] prefix sums of the capacities k + extra (unpaged K/V)
  //   seqused_k     [batch] the k's (paged K/V, or any extra > 0)
  //   page_table    [batch, max_pages_per_seq] (paged K/V): sequence b's pages in order, the physical order a
  //                 Philox shuffle (Stream::kPageOrder) of every page, the spare page included; entries past a
  //                 sequence's pages hold num_pages + 7, an index no kernel may read
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k, seqused_k, page_table;
  std::vector<int64_t> seqlens_q, seqlens_k;  // [batch] per sequence: q, and k (the used keys); empty when dense
  oracle::Problem problem() const;    // view for the oracle (oracle_problem of oracle_bridge.h, spans into *_exact)
  // FNV-1a 64 over q, k, v bytes, then the sink's, then the index arrays', then d_o's, then the descales' (golden-hash
  // tests; for a case without a sink, sequences, grad or descales, the bytes of q, k and v alone: grad leaves every
  // forward hash alone).
  uint64_t hash() const;
  // Points params.q/k/v/sink, the index arrays and the descales at this object's vectors (null for an empty one).
  void bind();
};

// The host memory make_inputs allows by default. A dense case past it runs on the GPU backend with its inputs
// generated in device memory (device_inputs.h): the same bits, and a sampled-row verdict.
inline constexpr int64_t kHostInputsLimit = int64_t{4} << 30;

// Where make_inputs draws the elements of Q, K and V: on the host, or on the current CUDA device (draw_on_device,
// device_inputs.h: the same definition, element_values.h, so the same bits), read back and laid out on the host. A
// small case's elements cost the host more than the GPU's run of it; the device draws them in microseconds.
enum class DrawOn { kHost, kDevice };

// Builds the inputs; fails with a message for a case that does not validate (validate_case) or whose
// buffers exceed `max_bytes` of host memory (encoded plus decoded copies, index arrays and dO included), and with
// draw_on_device's status where `draw_on` is kDevice and the device draw fails.
Status make_inputs(const Case& c, HostInputs* out, int64_t max_bytes = kHostInputsLimit,
                   DrawOn draw_on = DrawOn::kHost);
// A case refused because allocating `what` failed (std::bad_alloc: a memory cap above what the host holds): REJECTED,
// field memory. make_inputs returns it; the tools return it for an allocation that fails later in a case's run.
Status allocation_refusal(const std::string& what);

// The bytes make_inputs needs for `c` (encoded plus decoded copies, the sink, index arrays, and dO's two copies
// with grad), or -1 past 2^63.
// `c` must validate.
int64_t host_inputs_bytes(const Case& c);

// The sink logits of `c` as make_inputs builds them ([heads_q] fp32 and as doubles; both empty without a sink).
void make_sink(const Case& c, std::vector<float>* sink, std::vector<double>* sink_exact);

// Rows [s_begin, s_end) of slice (b, h) of tensor `tensor` ('q', 'k' or 'v'; h a K/V head for k and v) of a
// validated case, decoded to doubles as make_inputs decodes them (injections included), contiguous
// [s_end - s_begin, head_dim] into `out`: the values a sampled-row oracle reads, without the whole tensor.
void regenerate_rows(const Case& c, char tensor, int64_t b, int64_t h, int64_t s_begin, int64_t s_end, double* out);

// FNV-1a 64 of a byte range, continuing from `hash` (start with kFnvOffset).
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
uint64_t fnv1a64(const uint8_t* data, size_t size, uint64_t hash = kFnvOffset);

}  // namespace flashcheck
