// Input generation for a case on the host: every element by the one definition of element_values.h (Philox4x32-10
// at (seed, tensor stream, canonical element index), the case's distribution in double, rounded once to the dtype),
// or Q, K and V's elements drawn by the same definition on the device (DrawOn::kDevice), then injections; stored in
// the case's layout (dense, or with sequences packed or paged) over a buffer of poison. A grad case's dO is drawn
// the same way on the host and laid out like O.
// Compiled with -ffp-contract=off: only + - * / sqrt and detmath, evaluated in source order, so the bytes
// (and the golden hashes) are identical on every machine, and the device generator's (device_inputs.cu).
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "element_bytes.h"
#include "element_values.h"
#include "flashcheck/device_inputs.h"
#include "flashcheck/inputs.h"
#include "flashcheck/oracle_bridge.h"

namespace flashcheck {

void Philox4x32::generate(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  elements::philox4x32(counter, key, out);
}
double detmath::log(double x) { return elements::det_log(x); }
double detmath::cos_2pi(double turns) { return elements::det_cos_2pi(turns); }

namespace {

using elements::below;
using elements::Draw;

Draw draw(uint64_t seed, Stream stream, uint64_t index) { return elements::draw(seed, static_cast<uint32_t>(stream), index); }

using detail::load_bits;
using detail::store_bits;

// One tensor: its canonical shape [batch, heads, seqlen, head_dim] and where element [b, h, s, d] lies in the
// encoded buffer: dense strides, packed rows (sequence b's rows from row0[b]), or pages (row s of sequence b in
// page pages[b * pages_per_seq + s / page_size]).
struct TensorShape {
  int64_t batch, heads, seqlen, head_dim;
  Strides strides;  // of the encoded buffer, in elements
  const std::vector<int64_t>* lengths = nullptr;  // [batch] rows of each sequence; null: seqlen each
  const std::vector<int32_t>* row0 = nullptr;     // [batch + 1] packed rows (cu_seqlens)
  const std::vector<int32_t>* pages = nullptr;    // [batch, pages_per_seq] page table
  int64_t page_size = 0, pages_per_seq = 0;

  int64_t length(int64_t b) const { return lengths != nullptr ? (*lengths)[static_cast<size_t>(b)] : seqlen; }
  // Element offset of [b, h, s, 0].
  int64_t offset(int64_t b, int64_t h, int64_t s) const {
    if (pages != nullptr) {
      const int64_t page = (*pages)[static_cast<size_t>(b * pages_per_seq + s / page_size)];
      return page * strides.batch + (s % page_size) * strides.row + h * strides.head;
    }
    if (row0 != nullptr) return ((*row0)[static_cast<size_t>(b)] + s) * strides.row + h * strides.head;
    return b * strides.batch + h * strides.head + s * strides.row;
  }
  int64_t canonical(int64_t b, int64_t h, int64_t s) const { return ((b * heads + h) * seqlen + s) * head_dim; }
};

// The rule of dO: Case::dout over O's canonical [batch, heads_q, seqlen_q, value_dim()] array, in the case's dtype,
// on streams of its own; Q's rule but for the distribution and the streams (the same dtype, seed and S = seqlen_q,
// so a ramp runs along the query rows and dominant picks one query row per (b, h)).
elements::ElementRule dout_rule(const Case& c) {
  elements::ElementRule rule = elements::tensor_rule(c, 'q');
  rule.kind = c.dout.kind;
  rule.a = c.dout.a;
  rule.b = c.dout.b;
  rule.stream = static_cast<uint32_t>(Stream::kDOut);
  rule.dominant_stream = static_cast<uint32_t>(Stream::kDominantRowDOut);
  return rule;
}

// Fills `bytes` (layout) and `exact` (canonical) for one tensor of `dtype` (the case's, or fp32 for the sink) by its
// rule (element_values.h, the definition the device generator shares), or from `drawn`, the canonical elements'
// bits already drawn by that rule (draw_on_device, esize bytes each).
void generate(const elements::ElementRule& rule, DType dtype, const TensorShape& t, std::vector<uint8_t>* bytes,
              std::vector<double>* exact, const std::vector<uint8_t>* drawn = nullptr) {
  // An empty tensor has nothing to draw, however large its other extents (b=2^63-1 hq=0 must not loop).
  if (t.batch == 0 || t.heads == 0 || t.seqlen == 0 || t.head_dim == 0) return;
  const int64_t esize = dtype_size(dtype);
  for (int64_t b = 0; b < t.batch; ++b) {
    const int64_t length = t.length(b);
    for (int64_t h = 0; h < t.heads; ++h) {
      const int64_t dominant = elements::dominant_row(rule, b * t.heads + h);
      for (int64_t s = 0; s < length; ++s) {
        const int64_t row_offset = t.offset(b, h, s);
        const int64_t row_index = t.canonical(b, h, s);
        for (int64_t d = 0; d < t.head_dim; ++d) {
          const int64_t index = row_index + d;
          const uint32_t bits = drawn != nullptr ? load_bits(esize, drawn->data() + index * esize)
                                                 : elements::element_bits(rule, s, index, dominant);
          store_bits(bits, esize, bytes->data() + (row_offset + d) * esize);
          (*exact)[static_cast<size_t>(index)] = decode_dtype(dtype, bits);
        }
      }
    }
  }
}

// The bits of `poison` in `dtype`: the padding NaN pattern, +inf, or +0.
uint32_t poison_bits(DType dtype, Poison poison) {
  switch (poison) {
    case Poison::kNaN:
      return input_pad_bits(dtype);
    case Poison::kInf:
      return encode_dtype(dtype, std::numeric_limits<double>::infinity());
    case Poison::kZero:
      return encode_dtype(dtype, 0.0);
  }
  return input_pad_bits(dtype);
}

// Every element of `bytes` to the poison; generation then overwrites the elements that are data.
void fill_poison(DType dtype, Poison poison, std::vector<uint8_t>* bytes) {
  const int64_t esize = dtype_size(dtype);
  const uint32_t bits = poison_bits(dtype, poison);
  for (size_t i = 0; i + static_cast<size_t>(esize) <= bytes->size(); i += static_cast<size_t>(esize)) {
    store_bits(bits, esize, bytes->data() + i);
  }
}

// The index arrays of a case with sequences (HostInputs documents each). Every total fits int32 (validate_case).
void build_index_arrays(const Case& c, const Params& p, HostInputs* in) {
  const size_t batch = c.seqs.size();
  bool any_extra = false;
  in->cu_seqlens_q.assign(batch + 1, 0);
  in->seqlens_q.resize(batch);
  in->seqlens_k.resize(batch);
  for (size_t b = 0; b < batch; ++b) {
    const Sequence& s = c.seqs[b];
    in->cu_seqlens_q[b + 1] = in->cu_seqlens_q[b] + static_cast<int32_t>(s.q);
    in->seqlens_q[b] = s.q;
    in->seqlens_k[b] = s.k;
    any_extra = any_extra || s.extra > 0;
  }
  if (c.page > 0 || any_extra) {
    in->seqused_k.resize(batch);
    for (size_t b = 0; b < batch; ++b) in->seqused_k[b] = static_cast<int32_t>(c.seqs[b].k);
  }
  if (c.page == 0) {
    in->cu_seqlens_k.assign(batch + 1, 0);
    for (size_t b = 0; b < batch; ++b) {
      in->cu_seqlens_k[b + 1] = in->cu_seqlens_k[b] + static_cast<int32_t>(c.seqs[b].capacity());
    }
    return;
  }
  // Physical pages in a seeded order (Fisher-Yates, one Philox draw per step), handed out to the sequences' logical
  // pages in turn; the last one left is the spare page, which no sequence owns. A kernel that ignores the table
  // (reading pages in order) or reads a sequence's neighbour's pages then meets other keys or the poison.
  const int64_t num_pages = p.num_pages;
  std::vector<int32_t> order(static_cast<size_t>(num_pages));
  for (int64_t i = 0; i < num_pages; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  for (int64_t i = num_pages - 1; i >= 1; --i) {
    const Draw r = draw(c.seed, Stream::kPageOrder, static_cast<uint64_t>(i));
    const uint64_t j = below(uint64_t{r.w[0]} << 32 | r.w[1], static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  // Entries a sequence does not own: out of range on purpose, so a kernel that reads one reads outside K and V.
  const int32_t unread = static_cast<int32_t>(num_pages + 7);
  in->page_table.assign(static_cast<size_t>(static_cast<int64_t>(batch) * p.max_pages_per_seq), unread);
  size_t next = 0;
  for (size_t b = 0; b < batch; ++b) {
    const int64_t pages = sequence_pages(c.seqs[b], c.page);
    for (int64_t page = 0; page < pages; ++page) {
      in->page_table[b * static_cast<size_t>(p.max_pages_per_seq) + static_cast<size_t>(page)] = order[next++];
    }
  }
}

// a * b into *out unless it overflows int64.
bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

bool checked_product(std::initializer_list<int64_t> factors, int64_t* out) {
  int64_t acc = 1;
  for (int64_t f : factors) {
    if (!checked_mul(acc, f, &acc)) return false;
  }
  *out = acc;
  return true;
}

// The sizes of a validated case's host inputs, in elements and bytes; fits = false past 2^63 bytes.
struct InputSizes {
  bool fits = false;
  int64_t q_padded = 0, kv_padded = 0, v_padded = 0, q_elems = 0, kv_elems = 0, v_elems = 0, total = 0;
  int64_t o_padded = 0, o_elems = 0;  // O's buffer and canonical elements (the runner's, not counted in total)
};

// The bytes of dO's two copies (encoded like O, decoded canonical) with grad, 0 without; false past 2^63.
bool dout_bytes(const Case& c, int64_t o_padded, int64_t o_elems, int64_t* out) {
  int64_t encoded = 0, decoded = 0;
  if (!c.grad) {
    *out = 0;
    return true;
  }
  return checked_mul(o_padded, dtype_size(c.dtype), &encoded) &&
         checked_mul(o_elems, int64_t{sizeof(double)}, &decoded) && checked_add(encoded, decoded, out);
}

InputSizes input_sizes(const Case& c, const Params& params) {
  const int64_t esize = dtype_size(c.dtype);
  const bool has_seqs = !c.seqs.empty();
  // Bytes: encoded tensors (padded layout) plus the decoded canonical copies (8 bytes per element), and the
  // sink's fp32 values with their copies (its own check: heads_q may be huge where batch is 0). With sequences the
  // encoded tensors hold their packed or paged rows, and the index arrays (with the page shuffle's scratch) count.
  // With grad, dO's copies count: O's buffer and canonical elements; with descales their three [batch, heads_kv].
  int64_t row_elems = 0, v_row_elems = 0, q_padded = 0, kv_padded = 0, v_padded = 0, q_elems = 0, kv_elems = 0,
          v_elems = 0, o_padded = 0, o_elems = 0, encoded = 0, decoded = 0, total = 0;
  const int64_t sink_count = c.sink ? c.heads_q : 0;
  int64_t sink_bytes = 0, index_bytes = 0, d_o_bytes = 0, descale_bytes = 0;
  bool fits = checked_add(c.head_dim, c.pad, &row_elems) && checked_add(c.value_dim(), c.pad, &v_row_elems);
  if (!has_seqs) {
    fits = fits && checked_product({c.batch, c.heads_q, c.seqlen_q, row_elems}, &q_padded) &&
           checked_product({c.batch, c.heads_kv, c.seqlen_k, row_elems}, &kv_padded) &&
           checked_product({c.batch, c.heads_kv, c.seqlen_k, v_row_elems}, &v_padded) &&
           checked_product({c.batch, c.heads_q, c.seqlen_q, v_row_elems}, &o_padded);
  } else {
    const int64_t batch = static_cast<int64_t>(c.seqs.size());
    const int64_t kv_rows = c.page > 0 ? params.num_pages * params.page_size : params.total_k;  // int32 * int32
    int64_t table = 0;
    fits = fits && checked_product({params.total_q, c.heads_q, row_elems}, &q_padded) &&
           checked_product({kv_rows, c.heads_kv, row_elems}, &kv_padded) &&
           checked_product({kv_rows, c.heads_kv, v_row_elems}, &v_padded) &&
           checked_product({params.total_q, c.heads_q, v_row_elems}, &o_padded) &&
           checked_mul(batch, params.max_pages_per_seq, &table) &&
           checked_product({3 * batch + 2 + table + params.num_pages, int64_t{sizeof(int32_t)}}, &index_bytes) &&
           checked_add(index_bytes, 2 * batch * int64_t{sizeof(int64_t)}, &index_bytes);
  }
  fits = fits && checked_product({c.batch, c.heads_q, c.seqlen_q, c.head_dim}, &q_elems) &&
         checked_product({c.batch, c.heads_kv, c.seqlen_k, c.head_dim}, &kv_elems) &&
         checked_product({c.batch, c.heads_kv, c.seqlen_k, c.value_dim()}, &v_elems) &&
         checked_product({c.batch, c.heads_q, c.seqlen_q, c.value_dim()}, &o_elems) &&
         checked_add(q_padded, kv_padded, &encoded) && checked_add(encoded, v_padded, &encoded) &&
         checked_mul(encoded, esize, &encoded) && checked_add(q_elems, kv_elems, &decoded) &&
         checked_add(decoded, v_elems, &decoded) && checked_mul(decoded, int64_t{sizeof(double)}, &decoded) &&
         checked_add(encoded, decoded, &total) &&
         checked_mul(sink_count, int64_t{sizeof(float) + sizeof(double)}, &sink_bytes) &&
         checked_add(total, sink_bytes, &total) && checked_add(total, index_bytes, &total) &&
         dout_bytes(c, o_padded, o_elems, &d_o_bytes) && checked_add(total, d_o_bytes, &total) &&
         checked_product({c.descale ? 3 : 0, c.batch, c.heads_kv, int64_t{sizeof(float) + sizeof(double)}},
                         &descale_bytes) &&
         checked_add(total, descale_bytes, &total);
  InputSizes sizes;
  sizes.fits = fits;
  sizes.q_padded = q_padded;
  sizes.kv_padded = kv_padded;
  sizes.v_padded = v_padded;
  sizes.q_elems = q_elems;
  sizes.kv_elems = kv_elems;
  sizes.v_elems = v_elems;
  sizes.o_padded = o_padded;
  sizes.o_elems = o_elems;
  sizes.total = total;
  return sizes;
}

}  // namespace

oracle::Problem HostInputs::problem() const {
  oracle::Problem p = oracle_problem(params, q_exact, k_exact, v_exact, sink_exact, seqlens_q, seqlens_k);
  p.descale_q = descale_q_exact;
  p.descale_k = descale_k_exact;
  p.descale_v = descale_v_exact;
  return p;
}

uint64_t fnv1a64(const uint8_t* data, size_t size, uint64_t hash) {
  constexpr uint64_t kFnvPrime = 0x100000001b3ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= kFnvPrime;
  }
  return hash;
}

uint64_t HostInputs::hash() const {
  uint64_t h = fnv1a64(q.data(), q.size());
  h = fnv1a64(k.data(), k.size(), h);
  h = fnv1a64(v.data(), v.size(), h);
  h = fnv1a64(reinterpret_cast<const uint8_t*>(sink.data()), sink.size() * sizeof(float), h);
  // Empty for a dense case: its hash is that of q, k, v and the sink.
  for (const std::vector<int32_t>* array : {&cu_seqlens_q, &cu_seqlens_k, &seqused_k, &page_table}) {
    h = fnv1a64(reinterpret_cast<const uint8_t*>(array->data()), array->size() * sizeof(int32_t), h);
  }
  // Empty without grad: a forward case's hash covers its forward inputs alone.
  if (!d_o.empty()) h = fnv1a64(d_o.data(), d_o.size(), h);
  for (const std::vector<float>* d : {&descale_q, &descale_k, &descale_v}) {  // empty without descales
    h = fnv1a64(reinterpret_cast<const uint8_t*>(d->data()), d->size() * sizeof(float), h);
  }
  return h;
}

void HostInputs::bind() {
  params.q = q.empty() ? nullptr : q.data();
  params.k = k.empty() ? nullptr : k.data();
  params.v = v.empty() ? nullptr : v.data();
  params.sink = sink.empty() ? nullptr : sink.data();
  params.cu_seqlens_q = cu_seqlens_q.empty() ? nullptr : cu_seqlens_q.data();
  params.cu_seqlens_k = cu_seqlens_k.empty() ? nullptr : cu_seqlens_k.data();
  params.seqused_k = seqused_k.empty() ? nullptr : seqused_k.data();
  params.page_table = page_table.empty() ? nullptr : page_table.data();
  params.descale_q = descale_q.empty() ? nullptr : descale_q.data();
  params.descale_k = descale_k.empty() ? nullptr : descale_k.data();
  params.descale_v = descale_v.empty() ? nullptr : descale_v.data();
}

int64_t host_inputs_bytes(const Case& c) {
  const InputSizes sizes = input_sizes(c, case_params(c));
  return sizes.fits ? sizes.total : -1;
}

namespace {

// rule.seqlen fp32 values drawn by `rule` as a [1, 1, count, 1] tensor, as floats and as doubles.
void draw_fp32_values(const elements::ElementRule& rule, std::vector<float>* values, std::vector<double>* exact) {
  const int64_t count = rule.seqlen;
  const TensorShape shape{1, 1, count, 1, Strides{count, count, 1}};
  std::vector<uint8_t> bytes_f32(static_cast<size_t>(count) * sizeof(float));
  exact->resize(static_cast<size_t>(count));
  generate(rule, DType::kF32, shape, &bytes_f32, exact);
  values->resize(static_cast<size_t>(count));
  if (!bytes_f32.empty()) std::memcpy(values->data(), bytes_f32.data(), bytes_f32.size());
}

// The fp8 descales of `c` into `in` (all empty without Case::descale).
void make_descales(const Case& c, HostInputs* in) {
  if (!c.descale) return;
  draw_fp32_values(elements::descale_rule(c, *c.descale, 'q'), &in->descale_q, &in->descale_q_exact);
  draw_fp32_values(elements::descale_rule(c, *c.descale, 'k'), &in->descale_k, &in->descale_k_exact);
  draw_fp32_values(elements::descale_rule(c, *c.descale, 'v'), &in->descale_v, &in->descale_v_exact);
}

}  // namespace

void make_sink(const Case& c, std::vector<float>* sink, std::vector<double>* sink_exact) {
  sink->clear();
  sink_exact->clear();
  if (!c.sink) return;
  draw_fp32_values(elements::sink_rule(c, *c.sink), sink, sink_exact);
}

void regenerate_rows(const Case& c, char tensor, int64_t b, int64_t h, int64_t s_begin, int64_t s_end, double* out) {
  const elements::ElementRule rule = elements::tensor_rule(c, tensor);
  const int64_t heads = tensor == 'q' ? c.heads_q : c.heads_kv;
  const int64_t columns = tensor == 'v' ? c.value_dim() : c.head_dim;
  const int64_t dominant = elements::dominant_row(rule, b * heads + h);
  for (int64_t s = s_begin; s < s_end; ++s) {
    const int64_t row_index = ((b * heads + h) * rule.seqlen + s) * columns;
    double* const row = out + (s - s_begin) * columns;
    for (int64_t d = 0; d < columns; ++d) {
      row[d] = decode_dtype(c.dtype, elements::element_bits(rule, s, row_index + d, dominant));
    }
  }
  // Injections override the drawn values, as make_inputs applies them.
  for (const Injection& inj : c.inject) {
    if (inj.tensor != tensor || inj.b != b || inj.h != h || inj.s < s_begin || inj.s >= s_end) continue;
    out[(inj.s - s_begin) * columns + inj.d] = decode_dtype(c.dtype, encode_dtype(c.dtype, inj.value));
  }
}

namespace {
Status build_inputs(const Case& c, HostInputs* out, int64_t max_bytes, DrawOn draw_on) {
  if (Status status = validate_case(c); !status.ok()) return status;
  const int64_t esize = dtype_size(c.dtype);
  const Params params = case_params(c);
  const bool has_seqs = !c.seqs.empty();
  const InputSizes sizes = input_sizes(c, params);
  const bool fits = sizes.fits;
  const int64_t total = sizes.total, q_padded = sizes.q_padded, kv_padded = sizes.kv_padded, v_padded = sizes.v_padded;
  const int64_t q_elems = sizes.q_elems, kv_elems = sizes.kv_elems, v_elems = sizes.v_elems;
  if (!fits || total > max_bytes) {
    return {StatusCode::kInvalidArgument,
            "case inputs need " + (fits ? std::to_string(total) + " bytes" : std::string("more than 2^63 bytes")) +
                " of host memory, over the limit of " + std::to_string(max_bytes) + " bytes"};
  }

  HostInputs in;
  in.params = params;
  if (has_seqs) build_index_arrays(c, params, &in);

  in.q.resize(static_cast<size_t>(q_padded * esize));
  in.k.resize(static_cast<size_t>(kv_padded * esize));
  in.v.resize(static_cast<size_t>(v_padded * esize));
  in.q_exact.resize(static_cast<size_t>(q_elems));
  in.k_exact.resize(static_cast<size_t>(kv_elems));
  in.v_exact.resize(static_cast<size_t>(v_elems));
  in.o_padded = sizes.o_padded;
  in.o_elements = sizes.o_elems;
  for (auto* bytes : {&in.q, &in.k, &in.v}) fill_poison(c.dtype, c.poison, bytes);

  TensorShape q_shape{c.batch, c.heads_q, c.seqlen_q, c.head_dim, in.params.q_stride};
  TensorShape kv_shape{c.batch, c.heads_kv, c.seqlen_k, c.head_dim, in.params.k_stride};
  if (has_seqs) {
    q_shape.lengths = &in.seqlens_q;
    q_shape.row0 = &in.cu_seqlens_q;
    kv_shape.lengths = &in.seqlens_k;
    if (c.page > 0) {
      kv_shape.pages = &in.page_table;
      kv_shape.page_size = c.page;
      kv_shape.pages_per_seq = in.params.max_pages_per_seq;
    } else {
      kv_shape.row0 = &in.cu_seqlens_k;
    }
  }
  // V: K's rows (sequences, pages) with value_dim() columns and its own strides.
  TensorShape v_shape = kv_shape;
  v_shape.head_dim = c.value_dim();
  v_shape.strides = in.params.v_stride;
  const std::pair<char, const TensorShape*> tensors[] = {{'q', &q_shape}, {'k', &kv_shape}, {'v', &v_shape}};
  for (const auto& [tensor, shape] : tensors) {
    std::vector<uint8_t>& bytes = tensor == 'q' ? in.q : tensor == 'k' ? in.k : in.v;
    std::vector<double>& exact = tensor == 'q' ? in.q_exact : tensor == 'k' ? in.k_exact : in.v_exact;
    std::vector<uint8_t> drawn;
    if (draw_on == DrawOn::kDevice) {
      if (Status s = draw_on_device(c, tensor, &drawn); !s.ok()) return s;
    }
    generate(elements::tensor_rule(c, tensor), c.dtype, *shape, &bytes, &exact,
             draw_on == DrawOn::kDevice ? &drawn : nullptr);
  }
  make_sink(c, &in.sink, &in.sink_exact);
  make_descales(c, &in);
  if (c.grad) {
    // dO: O's layout (packed like O with sequences) over a buffer of poison, drawn on the host whatever `draw_on`
    // says (the device draw covers Q, K and V); injections name q, k or v, never dO.
    in.d_o.resize(static_cast<size_t>(sizes.o_padded * esize));
    in.d_o_exact.resize(static_cast<size_t>(sizes.o_elems));
    fill_poison(c.dtype, c.poison, &in.d_o);
    TensorShape o_shape{c.batch, c.heads_q, c.seqlen_q, c.value_dim(), in.params.o_stride};
    o_shape.lengths = q_shape.lengths;
    o_shape.row0 = q_shape.row0;
    generate(dout_rule(c), c.dtype, o_shape, &in.d_o, &in.d_o_exact);
  }

  for (const Injection& inj : c.inject) {
    const bool is_q = inj.tensor == 'q';
    const TensorShape& t = is_q ? q_shape : inj.tensor == 'k' ? kv_shape : v_shape;
    std::vector<uint8_t>& bytes = is_q ? in.q : inj.tensor == 'k' ? in.k : in.v;
    std::vector<double>& exact = is_q ? in.q_exact : inj.tensor == 'k' ? in.k_exact : in.v_exact;
    const uint32_t bits = encode_dtype(c.dtype, inj.value);
    store_bits(bits, esize, bytes.data() + (t.offset(inj.b, inj.h, inj.s) + inj.d) * esize);
    exact[static_cast<size_t>(t.canonical(inj.b, inj.h, inj.s) + inj.d)] = decode_dtype(c.dtype, bits);
  }
  *out = std::move(in);
  out->bind();  // after the move: params must point at *out's vectors
  return Status::ok_status();
}
}  // namespace

Status allocation_refusal(const std::string& what) {
  return {StatusCode::kInvalidArgument, "memory: allocating " + what +
                                            " failed: this host holds less than the memory cap lets a case take "
                                            "(lower --memory-cap or FLASHCHECK_MEMORY_CAP)"};
}

Status make_inputs(const Case& c, HostInputs* out, int64_t max_bytes, DrawOn draw_on) {
  try {
    return build_inputs(c, out, max_bytes, draw_on);
  } catch (const std::bad_alloc&) {
    return allocation_refusal("the case's inputs");
  }
}

}  // namespace flashcheck
