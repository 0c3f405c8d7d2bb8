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
//    includes it. A row with no visible key then gives O = 0 and LSE = sink; a sink of -inf is no sink.
//  * A row with no visible key (fully masked, seqlen_k == 0, or every visible score == -inf) gives
//    O = 0 and LSE = -inf (LSE = sink with a sink), never NaN.
//  * batch == 0, heads == 0 or seqlen_q == 0 is a successful no-op (pointers may then be null).
//  * NaN in a visible score or a visible V row propagates (that row's O, and LSE for a NaN score, is NaN);
//    +inf in a visible score gives NaN (inf - inf in the softmax); -inf scores carry zero weight.
//    Values at keys the mask hides are never read into the result: NaN there cannot reach O.
//  * Offsets are 64-bit: tensors over 2^31 elements work.
//  * Scores are computed in fp32 from the dtype's inputs; a score whose magnitude exceeds FLT_MAX is
//    outside the kernel's domain (its row may be non-finite).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace flashcheck {

enum class DType : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };
enum class Mask : int32_t {
  kNone = 0,
  kCausalBottomRight = 1,
  kCausalTopLeft = 2,
  kWindowBottomRight = 3,  // window_left / window_right, aligned like kCausalBottomRight
  kWindowTopLeft = 4,      // window_left / window_right, aligned like kCausalTopLeft
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
  int64_t head_dim = 0;  // 1..256
  const void* q = nullptr;  // [batch, heads_q,  seqlen_q, head_dim] in dtype, strides q_stride
  const void* k = nullptr;  // [batch, heads_kv, seqlen_k, head_dim] in dtype, strides k_stride
  const void* v = nullptr;  // [batch, heads_kv, seqlen_k, head_dim] in dtype, strides v_stride
  void* o = nullptr;        // [batch, heads_q,  seqlen_q, head_dim] in dtype, strides o_stride
  float* lse = nullptr;     // [batch, heads_q, seqlen_q] fp32, contiguous, natural log
  Strides q_stride, k_stride, v_stride, o_stride;
  float softmax_scale = 0.0f;  // any finite value; make_params() sets 1/sqrt(head_dim)
  // Sliding window (Mask::kWindow* only; -1 = unbounded on that side, else >= 0): keys a - window_left ..
  // a + window_right of the aligned diagonal a (see Visibility above).
  int64_t window_left = -1;
  int64_t window_right = -1;
  float softcap = 0.0f;          // > 0: scores become softcap * tanh(score / softcap); 0: off
  const float* sink = nullptr;   // [heads_q] fp32 sink logits (device memory for run()), or null: no sink
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
const char* to_string(DType dtype);  // "f32", "f16", "bf16"
const char* to_string(Mask mask);    // "none", "causal-br", "causal-tl", "window-br", "window-tl"

// Contiguous strides for `layout`, the default softmax scale; pointers left null.
Params make_params(DType dtype, int64_t batch, int64_t heads_q, int64_t heads_kv, int64_t seqlen_q,
                   int64_t seqlen_k, int64_t head_dim, Mask mask = Mask::kNone,
                   Layout layout = Layout::kBHSD);
Strides contiguous_strides(Layout layout, int64_t heads, int64_t seqlen, int64_t head_dim);

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

// Where the kernel rounds, per compute path. The error model (oracle/error_model.h) has one bound per path.
enum class ComputePath : int32_t {
  kGeneralFp32 = 0,  // CUDA cores: fp32 scores, fp32 P, fp32 accumulation (all dtypes)
  kTensorCore = 1,   // fp16/bf16 mma: fp32 scores, P rounded to the input dtype before P*V, fp32 accumulation
  kSplitTf32 = 2,    // fp32 inputs on tensor cores, each product as three tf32 products
};
const char* to_string(ComputePath path);

// The kernel configuration run() would pick for `params` (tile sizes are what tests aim at).
struct KernelConfig {
  ComputePath path = ComputePath::kGeneralFp32;
  int32_t block_m = 0;   // query rows per tile
  int32_t block_n = 0;   // keys per K/V tile
  int32_t head_dim_padded = 0;
  const char* name = "";
};
KernelConfig select_config(const Params& params);

// Validates every field and the memory layout; never touches the pointed-to memory. Each failure has its
// own message naming the field. Checked before any launch by run().
Status can_implement(const Params& params);

// The checks of can_implement that need no pointers: dtype, mask, window, softcap, sizes and heads, scale,
// strides, and every tensor's extent in int64 elements and bytes. make_params' callers (the C ABI's
// fc_make_params) use it to reject a shape before any buffer exists; can_implement runs it first.
Status validate_shape(const Params& params);

// Runs the forward pass on `stream` (a cudaStream_t; nullptr = the legacy default stream). Asynchronous:
// errors of the launch itself are reported, errors during execution surface at the next synchronisation.
Status run(const Params& params, void* stream = nullptr);

// True if a CUDA device is usable by this process (false when built without CUDA).
bool device_available();

}  // namespace flashcheck
