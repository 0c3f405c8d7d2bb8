// The oracle's own description of an attention problem: number formats, which keys a query row sees, the
// arithmetic class an implementation computes in, and the problem itself (shape, visibility, scale, inputs
// as exact doubles). Plain structs and enums: nothing here comes from the kernel, so a mistake in the
// kernel's rules cannot hide in the reference. The visibility predicate visible() is the definition;
// visible_keys() is its closed form, tested against it on every (i, j) of small shapes. Sequences may have lengths
// of their own (varlen batches, paged caches): each row then aligns with its own sequence's lengths.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace flashcheck::oracle {

// Binary formats of the inputs and of O: significand bits (implicit bit included) 24 / 11 / 8 / 4. kE4M3 is OCP's
// fp8 E4M3FN (exponent bias 7, normals 2^-6 to 448, subnormals down to 2^-9, no infinities), the fp8 path's inputs
// and P (docs/design/fp8-forward.md); its O is bf16 (output_format).
enum class Format : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2, kE4M3 = 3 };
const char* to_string(Format format);  // "f32", "f16", "bf16", "f8e4m3"
std::optional<Format> format_from_name(std::string_view name);  // to_string's inverse; nullopt for others
// The format O is written in for inputs of `format`: bf16 for e4m3 inputs, else the input format itself.
constexpr Format output_format(Format format) { return format == Format::kE4M3 ? Format::kBF16 : format; }

// Where an implementation rounds (docs/error-model.md §3 has one bound per class):
enum class Arithmetic : int32_t {
  kGeneralFp32 = 0,  // fp32 scores, fp32 P, fp32 accumulation, round to nearest (CUDA cores)
  kTensorCore = 1,   // exact products of fp16/bf16 values, truncating fp32 accumulation, P rounded to the input
                     // format before P*V
  kSplitTf32 = 2,    // fp32 values as hi + lo tf32 parts, three tf32 products per product, truncating accumulation
  kTensorCoreFp8 = 3,  // exact products of e4m3 values, k32 blocks accumulated at 14 bits; P offset by 2^8 and rounded
                       // to e4m3, P*V promoted into fp32 per K/V tile (docs/design/fp8-forward.md)
};
const char* to_string(Arithmetic arithmetic);  // "general-fp32", "tensor-core", "split-tf32", "tensor-core-fp8"
// Whether a path chooses its P reference per tile (the tile's own max within kTensorCoreRefSlackLog2 of the running
// max, else the running max): the tensor-core paths.
constexpr bool uses_tile_reference(Arithmetic arithmetic) {
  return arithmetic == Arithmetic::kTensorCore || arithmetic == Arithmetic::kTensorCoreFp8;
}
// Whether `arithmetic` computes on inputs of `format`: the fp8 path takes e4m3 inputs, and e4m3 inputs take the fp8
// path only (bound_row and emulated_row throw std::invalid_argument for any other pairing).
constexpr bool computes_on(Arithmetic arithmetic, Format format) {
  return (arithmetic == Arithmetic::kTensorCoreFp8) == (format == Format::kE4M3);
}

// Which corner the diagonal of query row i is aligned to: d(i) = i (top-left), or d(i) = i + seqlen_k - seqlen_q
// (bottom-right: the last query row's diagonal is the last key).
enum class Alignment : int32_t { kTopLeft = 0, kBottomRight = 1 };

// Keys query row i sees, as a window around its diagonal key d(i): key j with 0 <= j < seqlen_k and
//   d(i) - window_left <= j   (when window_left >= 0; -1: unbounded to the left)
//   j <= d(i) + window_right  (when window_right >= 0; -1: unbounded to the right).
// Every key is (-1, -1); causal is (-1, 0) in either alignment; a sliding window is any other pair.
struct Visibility {
  int64_t window_left = -1;
  int64_t window_right = -1;
  Alignment alignment = Alignment::kTopLeft;
  friend bool operator==(const Visibility&, const Visibility&) = default;
};
inline constexpr Visibility kAllKeys{-1, -1, Alignment::kTopLeft};
inline constexpr Visibility kCausalTopLeft{-1, 0, Alignment::kTopLeft};          // j <= i
inline constexpr Visibility kCausalBottomRight{-1, 0, Alignment::kBottomRight};  // j <= i + seqlen_k - seqlen_q
// "all", "causal-tl", "causal-br", else "window(left,right,tl|br)".
std::string to_string(const Visibility& visibility);

// Inputs as doubles (exact for every Format), contiguous [B, H, S, D] whatever layout they came from. Query
// head h reads K/V head h / (heads_q / heads_kv) (grouped-query attention). Q and K have head_dim columns (the
// length of the score dot products); V, and so O, have value_dim() columns, which may differ (DeepSeek's 192 and
// 128).
// A dropout (dropout.h gives its mask and scale): the drop probability p, an fp32 value in [0, 1), 0 = none; the
// 64-bit seed (Philox's key) and the 64-bit offset (the first (batch, head) stream of the call; a caller advances it
// by at least batch * heads_q between calls that must not share draws, and passes the forward's seed and offset
// unchanged to the backward).
struct Dropout {
  float p = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;
};

struct Problem {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  // V's and O's columns; 0 means head_dim, so a problem that never sets it keeps one width for all four. Negative
  // is a caller's bug (std::invalid_argument naming the field).
  int64_t head_dim_v = 0;
  Visibility visibility = kAllKeys;
  double scale = 0.0;         // the softmax scale (an fp32 value), exactly
  // Softcap c > 0 (an fp32 value): the scaled score s = scale * q.k becomes c * tanh(s / c) before the softmax
  // (so s = +-inf becomes +-c); 0: off.
  double softcap = 0.0;
  // Sink logits, one per query head (empty: no sink; fp32 values): the sink of head h joins row (b, h, i)'s
  // softmax denominator as one more logit with a zero value row, O = sum_j e^(s_j) v_j / (sum_j e^(s_j) + e^sink),
  // LSE = log(sum_j e^(s_j) + e^sink). A row with no visible key then has O = 0 and LSE = sink. A sink of -inf
  // is no sink; +inf takes all the weight (O = 0, LSE = +inf); NaN makes the row NaN.
  std::span<const double> sink;  // [heads_q]
  // Sequences of their own lengths (variable-length batches, paged caches): sequence b has seqlens_q[b] query
  // rows and seqlens_k[b] keys (each at most seqlen_q / seqlen_k, which then size the arrays below, rows past a
  // sequence's length unused), and its visibility aligns with its own lengths. Empty: every sequence has
  // seqlen_q rows and seqlen_k keys.
  std::span<const int64_t> seqlens_q;  // [batch] or empty
  std::span<const int64_t> seqlens_k;  // [batch] or empty
  std::span<const double> q;  // [batch, heads_q, seqlen_q, head_dim]
  std::span<const double> k;  // [batch, heads_kv, seqlen_k, head_dim]
  std::span<const double> v;  // [batch, heads_kv, seqlen_k, value_dim]
  // Dropout of P's elements (docs/design/dropout-rng.md): O_i = sum_j P_ij z_ij / (1 - p) v_j with P the undropped
  // softmax (sink included in its denominator) and z_ij the keep decision; LSE is the undropped one. p = 0: none.
  Dropout dropout;
  // fp8 descales (docs/design/fp8-forward.md): one fp32 value per (batch, kv head) each, finite and > 0, or empty (1).
  // q, k and v then hold the raw values, and the problem is attention on descale_q q, descale_k k and descale_v v,
  // query head h reading its K/V head's entry of descale_q: the exact scores are (scale descale_q descale_k) q.k and
  // O is descale_v times the raw V's. Descales and a dropout do not go together (the fp8 path has none).
  std::span<const double> descale_q, descale_k, descale_v;  // [batch, heads_kv] or empty
};

// Whether the problem carries fp8 descales (any of the three spans non-empty).
inline bool has_descales(const Problem& problem) {
  return !problem.descale_q.empty() || !problem.descale_k.empty() || !problem.descale_v.empty();
}

// The columns of V and O: head_dim_v, or head_dim where it is 0.
inline int64_t value_dim(const Problem& problem) {
  return problem.head_dim_v > 0 ? problem.head_dim_v : problem.head_dim;
}

// Sequence b's own lengths: seqlens_q[b] and seqlens_k[b], or seqlen_q and seqlen_k where the span is empty.
// Throw std::out_of_range for b outside [0, batch), and std::invalid_argument naming the field for a span that is
// neither empty nor [batch] long, or whose entry b lies outside [0, seqlen_q] (seqlens_q) or [0, seqlen_k]
// (seqlens_k).
int64_t sequence_seqlen_q(const Problem& problem, int64_t b);
int64_t sequence_seqlen_k(const Problem& problem, int64_t b);
// Both spans whole, with the same std::invalid_argument: every entry, not only the ones a row reads.
void check_sequence_lengths(const Problem& problem);
// An array the problem sizes (dO, O, LSE, D): `size` values where it needs `want`, else std::invalid_argument
// naming the field.
void check_values(const char* field, size_t size, int64_t want);
// True when the problem carries per-sequence lengths (either span non-empty).
inline bool has_sequence_lengths(const Problem& problem) {
  return !problem.seqlens_q.empty() || !problem.seqlens_k.empty();
}

// The definition: does query row i of sequence b see key j of that sequence? Its diagonal key aligns with the
// sequence's own lengths, d(i) = i + sequence_seqlen_k - sequence_seqlen_q (bottom-right), and only its keys
// 0 <= j < sequence_seqlen_k exist.
bool visible(const Problem& problem, int64_t b, int64_t i, int64_t j);

// The keys query row i of sequence b sees, [begin, end) (begin == end when none): a window is contiguous, so its
// closed form is the predicate's; oracle_test checks the two agree on every (i, j) of small shapes, with and
// without per-sequence lengths.
struct KeySpan {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
KeySpan visible_keys(const Problem& problem, int64_t b, int64_t i);

// The same for a problem without per-sequence lengths, where every sequence sees alike. With them the sequence
// decides, and these throw std::invalid_argument rather than answer for the wrong one.
bool visible(const Problem& problem, int64_t i, int64_t j);
KeySpan visible_keys(const Problem& problem, int64_t i);

}  // namespace flashcheck::oracle
