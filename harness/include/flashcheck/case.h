// A case: one text line that fully determines a test problem (dtype, shape, mask, layout, value
// distributions, injected special values, seed), e.g.
//   bf16 b=2 hq=8 hkv=2 sq=129 sk=257 d=128 mask=causal-br q=normal(0,3) k=normal(0,3) v=uniform(-1,1) seed=42
// format_case(parse_case(s)) == s for every canonical line; parse errors name the offending token.
// Canonical order: dtype b hq hkv sq sk d [dv] mask [window] [layout] [pad] [seqs] [page] [poison] [splits] [scale]
// [softcap] [dropout drop_seed drop_offset] q k v [sink] [descale] [grad dout] [inject] [property] [subject] seed. window=L,R comes with mask=window-br /
// window-tl and only with them (each side -1 = unbounded, or >= 0).
// Optional keys (omitted when default): dv=N (V's and O's head dim, Params::head_dim_v; 0 or absent = d),
// layout=bshd, pad=N (extra elements after every row of Q, K, V, O), seqs=Q:K[+E],... (one entry per sequence:
// the inference path's variable lengths; b must equal their count, sq and sk bound them), page=P (K/V in pages of P keys; needs seqs), poison=inf|zero (what fills memory no kernel may read;
// needs seqs; default nan), splits=N (Params::num_splits; default 1, 0 = the kernel's heuristic), scale=X
// (softmax scale; default 1/sqrt(d) rounded to fp32), softcap=C (finite, > 0; default 0 = off), sink=DIST (one
// fp32 sink logit per query head, drawn like q, k, v; absent = no sink), descale=DIST (f8e4m3 only: the fp8 descales
// of Q, K and V, one fp32 value per (sequence, kv head) each, drawn from uniform(lo,hi) or const(c) with positive
// normal fp32 bounds; absent = no descales, i.e. 1), grad=1 (the case checks the backward pass,
// dQ, dK and dV, too; absent or grad=0 = forward only) with dout=DIST (dO's distribution, like q, k, v; default
// normal(0,1), always written with grad=1, allowed only with it), dropout=P (Params::dropout_p, an fp32 value in
// [0, 1); absent = 0, no dropout) with drop_seed=S and drop_offset=O (decimal uint64, Params::dropout_seed and
// dropout_offset; both always written with a dropout, allowed only with one), inject=q[b,h,s,d]:nan;k[...]:-inf;...
// A line without seqs, page, poison and splits is a dense case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashcheck/attention.h"

namespace flashcheck {

// Value families, named in RC_CLASSIFY and the case line. Every element is drawn in double from the
// case's Philox stream for its tensor, then rounded once to the dtype (values beyond the dtype's range
// become +-inf: the case asked for them). u, u' are independent uniforms in [0,1), z a standard normal.
enum class DistKind : int32_t {
  kNormal = 0,     // normal(mu,sigma): mu + sigma*z; sigma >= 0
  kUniform = 1,    // uniform(lo,hi): lo + (hi-lo)*u; lo <= hi
  kConst = 2,      // const(c): every element c (all logits equal); c may be nan/inf/-0
  kNearMax = 3,    // nearmax(frac): random sign * frac * dtype max * (1 - u/8); frac >= 0
  kSubnormal = 4,  // subnormal(): random nonzero subnormals of the dtype (uniform significand), random signs
  kRamp = 5,       // ramp(lo,hi): element [.., s, d] = lo + (hi-lo)*s/(S-1) + (hi-lo)*2^-12*(u-1/2)
                   //   (lo when S == 1); on K with positive q: logits increase along keys
  kDominant = 6,   // dominant(sigma,big): normal(0,sigma) except one row s* per (b,h), chosen by the seed,
                   //   drawn from normal(0,big): one dominant key (on K) or query/value row
  kNegZero = 7,    // negzero(): every element -0.0
};
inline constexpr int kDistKindCount = 8;
const char* to_string(DistKind kind);  // "normal", "uniform", ... as in the case line
const char* to_string(Layout layout);  // "bhsd", "bshd"

// Unused parameters (b of one-parameter kinds, both of parameterless kinds) play no role: equality
// ignores them and the parser leaves them at their defaults.
struct ValueSpec {
  DistKind kind = DistKind::kNormal;
  double a = 0.0;  // first parameter (mu, lo, c, frac, sigma)
  double b = 1.0;  // second parameter (sigma, hi, big)
  friend bool operator==(const ValueSpec& x, const ValueSpec& y);
};
// Number of parameters `kind` takes in the case line (0, 1 or 2).
int dist_arity(DistKind kind);

// One element overwritten after generation (before the dtype rounding of the value itself).
struct Injection {
  char tensor = 'q';  // 'q', 'k' or 'v'
  int64_t b = 0, h = 0, s = 0, d = 0;
  double value = 0.0;  // nan, inf, -inf, -0 or any number; rounded to the dtype
  // Equal when the positions match and the values are the same number (sign of zero included; any two
  // NaNs are the same value: the case line writes every NaN as "nan").
  friend bool operator==(const Injection& x, const Injection& y);
};

// One sequence of a variable-length batch (Case::seqs): `q` query rows, `k` keys, and `extra` key slots after the
// keys that exist in memory (the sequence's K/V capacity is k + extra) but are not its keys: seqused_k = k, and the
// slots hold the case's poison, so a kernel that reads past seqused_k poisons its result.
struct Sequence {
  int64_t q = 0, k = 0, extra = 0;
  int64_t capacity() const;  // k + extra, saturating
  friend bool operator==(const Sequence&, const Sequence&) = default;
};

// What fills the memory of a case's inputs that no kernel may read: a sequence's extra slots, the unused tail of
// its last page, the spare page, padding elements. NaN (the kInputPad* bits of inputs.h) poisons any row that
// reads it; +inf poisons the softmax of a row that scores it (and O through V); zero is a plausible value that
// poisons nothing by itself, so a kernel reading it is caught only by the values it changes.
enum class Poison : int32_t { kNaN = 0, kInf = 1, kZero = 2 };
inline constexpr int kPoisonCount = 3;
const char* to_string(Poison poison);  // "nan", "inf", "zero"

struct Case {
  DType dtype = DType::kF32;
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1, head_dim = 1;
  int64_t head_dim_v = 0;             // dv=: V's and O's columns (Params::head_dim_v); 0: head_dim
  Mask mask = Mask::kNone;
  // The window of mask=window-br / window-tl (attention.h): keys a - window_left .. a + window_right of the
  // aligned diagonal a, -1 = unbounded on that side; both -1 with every other mask.
  int64_t window_left = -1, window_right = -1;
  Layout layout = Layout::kBHSD;
  int64_t pad = 0;                    // extra elements after every row of Q, K, V and O
  // Sequences (attention.h, "Sequences"); empty: dense. With sequences batch == seqs.size(), seqlen_q bounds every
  // q and seqlen_k every capacity (k + extra), as Params' do; Q and O are packed (cu_seqlens_q), K and V packed
  // over the capacities (cu_seqlens_k) or paged, and seqused_k gives each sequence's k.
  std::vector<Sequence> seqs;
  int64_t page = 0;                   // > 0: K and V in pages of this many keys (needs seqs); 0: not paged
  Poison poison = Poison::kNaN;       // fill of the memory no kernel may read (non-default only with seqs)
  int32_t splits = 1;                 // Params::num_splits: >= 1 runs of K/V tiles per Q tile, 0 = heuristic
  std::optional<float> scale;         // default 1/sqrt(head_dim) rounded to fp32; always finite
  float softcap = 0.0f;               // > 0: each scaled score s becomes softcap * tanh(s / softcap); 0: off
  // Dropout (docs/design/dropout-rng.md): the drop probability, 0 = none, and the contract's seed and offset (both
  // 0 unless dropout > 0). They change no input value: the mask is the kernel's to draw and the oracle's to redraw.
  float dropout = 0.0f;
  uint64_t drop_seed = 0;
  uint64_t drop_offset = 0;
  ValueSpec q, k, v;
  // Sink logits, one per query head, drawn like q, k, v (Stream::kSink, index = head) and rounded to fp32, so
  // nearmax and subnormal mean fp32's; a ramp runs along the heads and dominant picks one head. No sink if
  // absent; const(-inf) is a sink that must change nothing.
  std::optional<ValueSpec> sink;
  // fp8 descales (Params::descale_q, descale_k, descale_v; dtype f8e4m3 only): each [batch, heads_kv], drawn from this
  // distribution (Stream::kDescaleQ, kDescaleK, kDescaleV, index = b * heads_kv + g) and rounded to fp32. Absent: no
  // descales (null pointers, each 1).
  std::optional<ValueSpec> descale;
  // The backward pass: with grad the case checks dQ, dK and dV as well as O, from an upstream gradient dO drawn
  // like q, k, v (Stream::kDOut, laid out like O) from `dout`; without it `dout` keeps its default (the parser and
  // validate_case reject any other) and nothing of the backward pass is drawn.
  bool grad = false;
  ValueSpec dout;                     // dO's distribution: normal(0,1) unless the line gives dout=
  std::vector<Injection> inject;      // q, k and v only: dO takes no injections
  // The property whose relation the case falsified (properties/properties.h), so that flashcheck-repro reruns that
  // relation, not only the oracle check: a relation between two runs (paged against packed, grouped against
  // repeated heads) can fail where each run alone is within its bound. Empty: the case alone. Inputs never depend
  // on it.
  std::string property;
  // The subject the case ran on (flashcheck/loaded_subject.h), so a finding replays against the same one; empty:
  // flashcheck's own kernel or host model. Inputs never depend on it.
  std::string subject;
  uint64_t seed = 0;

  // The scale given to the kernel: `scale`, else float(1.0 / sqrt(double(head_dim))) (IEEE sqrt and
  // division are correctly rounded, so this is the same number everywhere); 1 when head_dim <= 0, so that
  // can_implement complains about head_dim and nothing else.
  float softmax_scale() const;
  int64_t value_dim() const { return head_dim_v > 0 ? head_dim_v : head_dim; }  // V's and O's columns
  friend bool operator==(const Case&, const Case&) = default;
};

// The kernel's Params for a case, the one translation every caller uses (make_inputs, generators, the
// fuzz decoder, tools): dtype, shape, mask and window; strides contiguous in the case's layout over
// head_dim + pad elements per row of Q and K, value_dim() + pad of V and O (O laid out like Q); softmax_scale();
// softcap; num_splits = splits; dropout_p, dropout_seed and dropout_offset. Pointers
// null, the sink's and the index arrays' too: their values live in HostInputs, which points params at them (the
// runner at its guarded copies). Sizes saturate rather than overflow, so can_implement names the field of an
// impossible case. With sequences (R = head_dim + pad for Q and K, value_dim() + pad for V and O; H the tensor's heads):
//   Q, O    packed, total_q = sum of q: bshd .row = H * R, .head = R; bhsd (head-major over the packed tokens)
//           .head = total_q * R, .row = R; .batch = 0. LSE is [heads_q, total_q].
//   K, V    unpaged: packed the same way over the capacities, total_k = sum of (k + extra).
//           page = P: [num_pages, P, H, R] (bshd) or [num_pages, H, P, R] (bhsd), .batch = the page stride;
//           sequence b has ceil((k + extra) / P) pages, num_pages = their sum + 1 spare page, max_pages_per_seq
//           = the most pages of any sequence (at least 1), page_size = P.
// The index arrays' pointers are null here too, so validate_shape(case_params(c)) of a case with sequences names
// total_q (it holds only with cu_seqlens_q) until HostInputs::bind points them at the arrays.
Params case_params(const Case& c);

// The pages sequence `s` takes with page size `page` >= 1: ceil((k + extra) / page).
int64_t sequence_pages(const Sequence& s, int64_t page);

// A case given sequences (c->seqs) takes their count as its batch and their longest q and capacity as its seqlens.
void fit_to_sequences(Case* c);

// A subject name as case lines carry it: 1 to kMaxSubjectName characters of [A-Za-z0-9._-].
inline constexpr size_t kMaxSubjectName = 64;
bool is_subject_name(std::string_view name);
// A property name as case lines carry it: a letter, then letters and digits, kMaxPropertyName at most.
inline constexpr size_t kMaxPropertyName = 64;
bool is_property_name(std::string_view name);

// Canonical line for `c`. Numbers are printed in the shortest form that reads back to the same value.
std::string format_case(const Case& c);

// Parses a case line; on failure returns kInvalidArgument with a message naming the bad token, its column
// (1-based) and the reason. Tokens are separated by blanks and may come in any order after the dtype; each
// key at most once. Missing keys take the defaults of Case, except hkv which defaults to hq, and seed, which
// every line must give (a missing seed is an error, never seed 0 by default). The parser
// checks its own fields (syntax, non-negative sizes that fit int64, known names, distribution parameters,
// injection indices inside the shape, a window exactly with the window masks, a finite softcap >= 0, grad 0 or 1,
// dout only with grad=1);
// whether the kernel supports the shape is can_implement's business, so d=0 or hq % hkv != 0 parse fine.
// *out is written only on success.
Status parse_case(std::string_view line, Case* out);

// A decimal uint64 as case lines write seeds and offsets (digits only, at most 2^64 - 1); false with *reason
// otherwise. The tools read --seed with it too.
bool parse_u64(std::string_view text, uint64_t* out, std::string* reason);

// Whether a line of a case-line file (flashcheck-report --cases, flashcheck-repro --file) holds a case: not blank
// (spaces, tabs, a CRLF's carriage return) and not a comment ('#' after any blanks).
bool holds_case_line(std::string_view line);

// `text` fit for one line of a terminal: bytes outside printable ASCII escaped (\n, \t, \xNN), at most
// `limit` bytes of the input shown, and a longer text cut with "... (N bytes)". Tools echo input through it.
std::string excerpt(std::string_view text, size_t limit = 200);

// Checks a programmatically built Case the way parse_case checks a line (sizes, parameters, injections,
// window, softcap, dropout and its seed and offset, sink, dout and its agreement with grad, and seqs / page / poison / splits: their agreement with
// b, sq and sk, and index arrays that fit int32), naming the key of the field that is wrong.
Status validate_case(const Case& c);

}  // namespace flashcheck
