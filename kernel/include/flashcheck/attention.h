// flashcheck public C++ API: the FlashAttention forward kernel.
//
// O = softmax(cap(scale * Q K^T) + mask) V and LSE = log(sum exp(cap(scale * Q K^T) + mask)) (natural log),
// with an optional per-head sink logit in the denominator, computed by one fused launch. This header is plain C++ (no CUDA headers) so host-only code, the
// oracle and the CPU tier can include it. Errors are values: every entry point returns a Status.
//
// Semantics (also in README.md):
//  * Visibility. Query row i of seqlen_q sees key j of seqlen_k (0 <= j < seqlen_k) when
//      Mask::kNone               : always
//      Mask::kCausalTopLeft      : j <= i                          (diagonal starts at the top-left corner)
//      Mask::kCausalBottomRight  : j <= i + (seqlen_k - seqlen_q)  (diagonal ends at the bottom-right corner;
//                                   the convention of FlashAttention >= 2.1 and PyTorch's is_causal with
//                                   seqlen_q != seqlen_k differs: name the one you mean)
//      Mask::kWindowBottomRight  : a - window_left <= j <= a + window_right with a = i + (seqlen_k - seqlen_q)
//      Mask::kWindowTopLeft      : the same with a = i
//    where a window side of -1 is unbounded. Causal is the window (-1, 0) of the same alignment, and the two
//    spellings give bit-identical results.
//  * Softcap c > 0: each scaled score s becomes c * tanh(s / c) before the mask and the softmax; 0 is off.
//  * Sink (optional, one fp32 logit per query head): it joins the softmax denominator as one more logit whose
//    value row is zero: O = sum_j p_j v_j / (sum_j p_j + exp(sink - m)) with p_j = exp(s_j - m), and LSE
//    includes it. A row with no visible key then gives O = 0 and LSE = sink; a sink of -inf is no sink. A sink
//    of +inf takes all the weight: LSE = +inf and O = 0, NaN where the accumulator is not finite (a NaN score,
//    0 * inf); a NaN sink makes the row NaN.
//  * A row with no visible key (fully masked, seqlen_k == 0, or every visible score == -inf) gives
//    O = 0 and LSE = -inf (LSE = sink with a sink), never NaN.
//  * batch == 0, heads == 0 or seqlen_q == 0 is a successful no-op (pointers may then be null).
//  * NaN in a visible score or a visible V row propagates (that row's O, and LSE for a NaN score, is NaN);
//    +inf in a visible score gives NaN (inf - inf in the softmax); -inf scores carry zero weight.
//    Values at keys the mask hides are never read into the result: NaN there cannot reach O.
//  * Offsets are 64-bit: tensors over 2^31 elements work.
//  * Scores are computed in fp32 from the dtype's inputs; a score whose magnitude exceeds FLT_MAX is
//    outside the kernel's domain (its row may be non-finite).
//  * Head dims. Q and K have head_dim columns (the dot products' length), V and O have value_head_dim(params)
//    columns: head_dim_v, or head_dim where head_dim_v is 0 (the default). Each is 1..256 and they may differ
//    (e.g. 192 and 128, the split of DeepSeek's MLA heads).
//
// Sequences (the inference path; all off by default, which is the dense layout above):
//  * Varlen Q: with cu_seqlens_q, Q and O are packed [total_q, heads_q, head_dim] (O: head_dim_v columns;
//    q_stride / o_stride .row and .head; .batch unused) and sequence b owns rows cu_seqlens_q[b] ..
//    cu_seqlens_q[b + 1] - 1, its seqlen_q(b) = cu_seqlens_q[b + 1] - cu_seqlens_q[b] rows (0 allowed); LSE is
//    [heads_q, total_q]. Params' seqlen_q is then an upper bound of every seqlen_q(b) (it sizes the launch).
//  * Varlen K/V: with cu_seqlens_k, K and V are packed [total_k, heads_kv, head_dim] the same way (V: head_dim_v
//    columns), sequence b's keys at rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1.
//  * Paged K/V: with page_table, K and V are [num_pages, page_size, heads_kv, head_dim] (V: head_dim_v columns;
//    k_stride / v_stride .batch = the page stride, .row, .head), and key j of sequence b is row j % page_size of
//    page page_table[b * max_pages_per_seq + j / page_size]; any page_size >= 1. Only the pages holding keys below
//    seqlen_k(b) are read: other table entries may hold anything.
//  * seqlen_k(b), the keys of sequence b: seqused_k[b] where given (required with page_table), else
//    cu_seqlens_k[b + 1] - cu_seqlens_k[b], else seqlen_k. Memory past seqlen_k(b) (the rest of a packed
//    sequence, the unused slots of its last page, pages beyond) never reaches O. Params' seqlen_k is an upper
//    bound of every seqlen_k(b). Masks, windows, softcap and sinks apply per sequence with seqlen_q(b) and
//    seqlen_k(b) in the formulas above.
//  * Split-KV: num_splits > 1 divides the K/V tiles a Q tile visits into that many contiguous runs, each run's
//    online-softmax state (O's accumulator, m, l in fp32) written to a workspace and merged in split order by
//    a combine kernel with the online softmax's own rescale (common/epilogue.h, merge_partial). Results for a
//    given num_splits are deterministic; across split counts they differ within the error model's bound
//    (docs/error-model.md). num_splits = 0 lets a heuristic pick from the shape and the SM count.
//  * Index arrays (cu_seqlens_*, seqused_k, page_table: int32) live where the tensors do; can_implement reads
//    them (device memory is copied back) and names any inconsistency.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace flashcheck {

// kF32, kF16, kBF16, kF8E4M3: one enumerator per row of flashcheck/dtypes.def (dtype.h reads the rest of each row).
enum class DType : int32_t {
#define FC_DTYPE_ROW(c_suffix, enumerator, code, ...) enumerator = code,
#include "flashcheck/dtypes.def"
#undef FC_DTYPE_ROW
};
// kNone, kCausalBottomRight, kCausalTopLeft, kWindowBottomRight (window_left / window_right, aligned like
// kCausalBottomRight), kWindowTopLeft (aligned like kCausalTopLeft): one enumerator per row of flashcheck/masks.def
// (mask_names.h reads the rest of each row).
enum class Mask : int32_t {
#define FC_MASK_ROW(c_suffix, enumerator, code, ...) enumerator = code,
#include "flashcheck/masks.def"
#undef FC_MASK_ROW
};
// Memory order of the four logical axes, used by make_params() to fill strides.
enum class Layout : int32_t { kBHSD = 0, kBSHD = 1 };

// Strides in elements (not bytes). The head_dim axis always has unit stride.
struct Strides {
  int64_t batch = 0;
  int64_t head = 0;
  int64_t row = 0;  // along seqlen
};

struct Params {
  DType dtype = DType::kF32;
  Mask mask = Mask::kNone;
  int64_t batch = 0;
  int64_t heads_q = 0;
  int64_t heads_kv = 0;  // heads_q % heads_kv == 0; query head h reads K/V head h / (heads_q / heads_kv)
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;    // 1..256: Q's and K's columns
  int64_t head_dim_v = 0;  // 0 (= head_dim) or 1..256: V's and O's columns (value_head_dim; set_head_dim_v)
  const void* q = nullptr;  // [batch, heads_q,  seqlen_q, head_dim]   in dtype, strides q_stride
  const void* k = nullptr;  // [batch, heads_kv, seqlen_k, head_dim]   in dtype, strides k_stride
  const void* v = nullptr;  // [batch, heads_kv, seqlen_k, head_dim_v] in dtype, strides v_stride
  void* o = nullptr;        // [batch, heads_q,  seqlen_q, head_dim_v] in output_dtype(dtype), strides o_stride
  float* lse = nullptr;     // [batch, heads_q, seqlen_q] fp32, contiguous, natural log
  Strides q_stride, k_stride, v_stride, o_stride;
  float softmax_scale = 0.0f;  // any finite value; make_params() sets 1/sqrt(head_dim)
  // Sliding window (Mask::kWindow* only; -1 = unbounded on that side, else >= 0): keys a - window_left ..
  // a + window_right of the aligned diagonal a (see Visibility above).
  int64_t window_left = -1;
  int64_t window_right = -1;
  float softcap = 0.0f;          // > 0: scores become softcap * tanh(score / softcap); 0: off
  const float* sink = nullptr;   // [heads_q] fp32 sink logits (device memory for run()), or null: no sink
  // Sequences (see "Sequences" above); null / 0 = dense.
  const int32_t* cu_seqlens_q = nullptr;  // [batch + 1]: 0, non-decreasing, total_q last
  int64_t total_q = 0;                    // packed Q and O rows (with cu_seqlens_q)
  const int32_t* cu_seqlens_k = nullptr;  // [batch + 1]: 0, non-decreasing, total_k last (not with page_table)
  int64_t total_k = 0;                    // packed K and V rows (with cu_seqlens_k)
  const int32_t* seqused_k = nullptr;     // [batch]: keys of each sequence, within its capacity
  const int32_t* page_table = nullptr;    // [batch, max_pages_per_seq]: page indices in [0, num_pages)
  int64_t page_size = 0;                  // keys per page (>= 1 with page_table)
  int64_t num_pages = 0;                  // pages of K and V
  int64_t max_pages_per_seq = 0;          // page_table's row length; capacity = max_pages_per_seq * page_size
  int32_t num_splits = 1;                 // >= 1 runs of K/V tiles per Q tile; 0 = pick by heuristic
  // Dropout (docs/design/dropout-rng.md): element (b, h, i, j) of P is kept or dropped by Philox4x32-10 keyed by
  // dropout_seed at stream dropout_offset + b * heads_q + h, and a kept one is scaled by 1 / (1 - dropout_p). O is
  // the dropped attention's; LSE stays the undropped softmax's. dropout_p = 0 (the default) is no dropout, bit for
  // bit. Not with paged K/V or split-KV (inference features: kUnsupported; num_splits = 0 picks 1). The backward pass
  // applies the same mask from the same three fields. Every dropout problem runs in the general family (CUDA cores,
  // fp32): the online softmax over every visible key undropped, P V over the kept keys only, O = acc / l times
  // s32 = fl(1 / (1 - p)) (the factor rounded to fp32 once) before the one rounding to the dtype.
  float dropout_p = 0.0f;        // in [0, 1)
  uint64_t dropout_seed = 0;
  uint64_t dropout_offset = 0;   // the first (b, h) stream; any 64-bit value
  // Mask dump, off (null) by default: [batch, heads_q, seqlen_q, seqlen_k] bytes (device memory for run(), host
  // memory for the host model), every byte written: 1 where a visible element is kept, 0 where it is dropped,
  // hidden by the mask, or past its sequence's lengths. Only with dropout_p > 0; rows and keys of sequence b counted
  // within it (seqlen_q and seqlen_k above being the maxima). run() writes it with a kernel of its own after the
  // forward, on the same stream; the backward pass never writes it.
  uint8_t* dropout_mask_out = nullptr;
  // fp8 descaling (dtype kF8E4M3 only; null = 1): [batch, heads_kv] fp32, contiguous, finite and > 0 (device memory
  // for run(), host memory for the host model). The inputs are Q = descale_q * Q8, K = descale_k * K8,
  // V = descale_v * V8 per (sequence, kv head), where Q8, K8, V8 are the stored e4m3 values: the scores are
  // softmax_scale * descale_q * descale_k * Q8 K8^T, and O = descale_v * softmax(...) V8, written in bf16
  // (output_dtype). A query head reads the descales of its kv head. Not with dropout.
  const float* descale_q = nullptr;
  const float* descale_k = nullptr;
  const float* descale_v = nullptr;
};

enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,  // the params break the API contract
  kUnsupported = 2,      // valid, but no compiled kernel serves it
  kCudaError = 3,        // a CUDA call failed; message carries cudaGetErrorString
  kNoDevice = 4,         // no CUDA device (or library built without CUDA)
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Size in bytes of one element of `dtype`.
int64_t dtype_size(DType dtype);
const char* to_string(DType dtype);  // "f32", "f16", "bf16", "f8e4m3"
const char* to_string(Mask mask);    // "none", "causal-br", "causal-tl", "window-br", "window-tl"

// Contiguous strides for `layout`, the default softmax scale; pointers left null. head_dim_v is 0: V and O have
// head_dim columns (set_head_dim_v gives them others).
Params make_params(DType dtype, int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t seqlen_q,
                   int64_t seqlen_k, int64_t head_dim, Mask mask = Mask::kNone,
                   Layout layout = Layout::kBHSD);
Strides contiguous_strides(Layout layout, int64_t heads, int64_t seqlen, int64_t head_dim);

// V's and O's columns: head_dim_v, or head_dim where head_dim_v is 0.
inline int64_t value_head_dim(const Params& params) {
  return params.head_dim_v != 0 ? params.head_dim_v : params.head_dim;
}
// Sets head_dim_v and recomputes v_stride and o_stride as contiguous_strides of `layout` with value_head_dim
// columns (make_params' V and O strides hold head_dim columns). Q's and K's strides are left as they are.
void set_head_dim_v(Params* params, int64_t head_dim_v, Layout layout);

// The keys a query row sees: [begin, end), empty when end <= begin.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end > begin ? end - begin : 0; }
};
// The keys query row `row` (0 <= row < seqlen_q) of `params` sees under its mask: the kernels' own rule
// (kernel/src/common/visibility.h), exposed for tests and callers. The oracle does not use it: it has its
// own predicate written from the formulas above, and a test compares the two on every (i, j).
KeyRange visible_key_range(const Params& params, int64_t row);
// The same for row `row` of sequence `batch_index` with its own lengths (host-readable index arrays).
KeyRange visible_key_range(const Params& params, int64_t batch_index, int64_t row);
// seqlen_q(b) and seqlen_k(b) of "Sequences" (host-readable index arrays).
int64_t sequence_q_len(const Params& params, int64_t batch_index);
int64_t sequence_k_len(const Params& params, int64_t batch_index);

// Where the kernel rounds, per compute path. The error model (oracle/error_model.h) has one bound per path.
enum class ComputePath : int32_t {
  kGeneralFp32 = 0,  // CUDA cores: fp32 scores, fp32 P, fp32 accumulation (all dtypes)
  kTensorCore = 1,   // fp16/bf16 mma: fp32 scores, P rounded to the input dtype before P*V, fp32 accumulation
  kSplitTf32 = 2,    // fp32 inputs on tensor cores, each product as three tf32 products
  kTensorCoreFp8 = 3,  // e4m3 wgmma (docs/design/fp8-forward.md): 14-bit accumulation, P offset by 2^8 and rounded
                       // to e4m3, P V promoted into fp32 per K/V tile, O in bf16
};
const char* to_string(ComputePath path);

// The kernel configuration run() would pick for `params` (tile sizes are what tests aim at).
struct KernelConfig {
  ComputePath path = ComputePath::kGeneralFp32;
  int32_t block_m = 0;   // query rows per tile (of one head)
  int32_t block_n = 0;   // keys per K/V tile
  int32_t head_dim_padded = 0;  // the family's padded head dim; the general family pads max(head_dim, head_dim_v)
  const char* name = "";
  // Query heads sharing one tile: the decode family packs the heads of one K/V head (GQA) into its 16 rows.
  int32_t heads_per_tile = 1;
};
KernelConfig select_config(const Params& params);

// Validates every field and the memory layout; never touches the tensors' memory. Each failure has its own
// message naming the field. Checked before any launch by run(). With sequences (varlen, paged, seqused_k) it
// also runs check_indices, which reads the index arrays.
Status can_implement(const Params& params);

// The checks of can_implement that need no pointers: dtype, mask, window, softcap, sizes and heads, scale,
// strides, and every tensor's extent in int64 elements and bytes. make_params' callers (the C ABI's
// fc_make_params) use it to reject a shape before any buffer exists; can_implement runs it first.
Status validate_shape(const Params& params);

// The index arrays' contents (cu_seqlens_q/k, seqused_k, page_table): prefix sums that start at 0, never
// decrease and end at total_q / total_k, lengths within seqlen_q / seqlen_k, seqused_k within each sequence's
// capacity, every page a sequence reads in [0, num_pages). Reads the arrays (device memory through a
// synchronous copy); part of can_implement, exposed for callers that validate once and launch with
// run_prechecked.
Status check_indices(const Params& params);

// Runs the forward pass on `stream` (a cudaStream_t; nullptr = the legacy default stream). Asynchronous:
// errors of the launch itself are reported, errors during execution surface at the next synchronisation.
Status run(const Params& params, void* stream = nullptr);
// run() without reading the index arrays back: the caller vouches that check_indices(params) passed for their
// current contents (a serving loop that validates a batch layout once, or captures run into a CUDA graph).
// Everything else can_implement checks is still checked.
Status run_prechecked(const Params& params, void* stream = nullptr);

// The split count run() uses for `params`: num_splits, or the heuristic's pick for 0 (from the shape and the
// SM count of the current device; 1 without one). The workspace (fp32 accumulators, m and l per split and row)
// is allocated on the stream (cudaMallocAsync) and freed after the combine. Causal and windowed fp16/bf16 launches
// on the warp-specialized kernel take 8 bytes per work item (a Q tile of one head, or one run of it) from the same
// pool for the launch's redo list (the items whose accumulators end inf or NaN, run again with the hidden-V check).
int32_t effective_splits(const Params& params);

// True if a CUDA device is usable by this process (false when built without CUDA).
bool device_available();

namespace testing {
// Test control (the property SmallGridsGiveTheSameBits): while cap > 0, every kernel launch uses at most `cap`
// CTAs, so each CTA of every family runs many work items in turn (the persistent pipelines' hand-offs between
// items, which a grid of one CTA per item never exercises). 0, the default, restores the normal grids. Results
// must not change, bit for bit. Process-wide; not for production use.
void set_grid_cap(int64_t cap);
int64_t grid_cap();
}  // namespace testing

}  // namespace flashcheck
