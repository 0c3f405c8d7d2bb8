// The example subject: a short FlashAttention-style forward kernel, written to be read and copied, packaged as a
// flashcheck subject (flashcheck/subject.h). One thread block per (query tile, head, batch); one thread per query
// row; K and V stream through shared memory in tiles of kBlockN keys; each row keeps an online softmax (running
// max m, running sum l, fp32 accumulator of O). Naive (no tensor cores, the accumulator in local memory), correct
// for fp32, fp16 and bf16, every mask, GQA, any strides, softcap and sink.
// Its arithmetic is the error model's general-fp32 class (fp32 scores as an FMA chain, fp32 P, fp32 accumulation,
// the scale folded into exp2), with K/V tiles of kBlockN keys: it declares exactly that, so flashcheck judges it
// by that class's bound (docs/error-model.md §3).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>

#include "flashcheck/subject.h"

namespace {

constexpr int kBlockM = 64;       // query rows per block: one thread each
constexpr int kBlockN = 16;       // keys per K/V tile in shared memory
constexpr int kMaxHeadDim = 256;  // the thread's q row and O accumulator are arrays of this many floats
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ float load(const float* p) { return *p; }
__device__ float load(const __half* p) { return __half2float(*p); }
__device__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ void store(float* p, float x) { *p = x; }
__device__ void store(__half* p, float x) { *p = __float2half_rn(x); }
__device__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// The max that keeps a NaN: a NaN in a visible score must reach O and LSE (fmaxf alone would drop it).
__device__ float nan_max(float a, float b) { return (a != a || b != b) ? NAN : fmaxf(a, b); }

// Whether query row i sees key j (attention.h): a window around the aligned diagonal a; causal is (-1, 0).
__device__ bool visible(const fc_subject_problem& p, int64_t i, int64_t j) {
  if (p.mask == FC_SUBJECT_MASK_NONE) return true;
  const bool bottom_right =
      p.mask == FC_SUBJECT_MASK_CAUSAL_BOTTOM_RIGHT || p.mask == FC_SUBJECT_MASK_WINDOW_BOTTOM_RIGHT;
  const bool window = p.mask == FC_SUBJECT_MASK_WINDOW_BOTTOM_RIGHT || p.mask == FC_SUBJECT_MASK_WINDOW_TOP_LEFT;
  const int64_t left = window ? p.window_left : -1, right = window ? p.window_right : 0;
  const int64_t a = i + (bottom_right ? p.seqlen_k - p.seqlen_q : 0);
  return (left < 0 || j >= a - left) && (right < 0 || j <= a + right);
}

template <typename T>
__global__ void forward_kernel(fc_subject_problem p, const T* q, const T* k, const T* v, T* o, float* lse,
                               const float* sink) {
  extern __shared__ float smem[];
  float* k_tile = smem;                     // (kBlockN, head_dim)
  float* v_tile = smem + kBlockN * p.head_dim;  // (kBlockN, head_dim)
  const int64_t b = blockIdx.z, h = blockIdx.y;
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);  // GQA: a group of query heads shares one K/V head
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlockM + threadIdx.x;
  const bool has_row = i < p.seqlen_q;
  const int64_t d_count = p.head_dim;

  // The scale folded into exp2: x = s * (scale * log2 e), p = exp2(x - m), m in log2 units.
  const float scale_log2 = p.softmax_scale * kLog2e;
  const float cap_log2 = p.softcap * kLog2e;          // softcap: x = cap * log2e * tanh(s * scale / cap)
  const float inv_cap = p.softcap > 0 ? p.softmax_scale / p.softcap : 0.0f;

  float q_row[kMaxHeadDim];  // (head_dim)
  float acc[kMaxHeadDim];    // (head_dim): sum_j p_j v_j relative to the running max
  float m = -INFINITY, l = 0.0f;
  if (has_row) {
    const T* q_ptr = q + b * p.q_stride.batch + h * p.q_stride.head + i * p.q_stride.row;
    for (int64_t d = 0; d < d_count; ++d) {
      q_row[d] = load(q_ptr + d);
      acc[d] = 0.0f;
    }
  }

  for (int64_t key0 = 0; key0 < p.seqlen_k; key0 += kBlockN) {
    const int64_t keys = p.seqlen_k - key0 < kBlockN ? p.seqlen_k - key0 : kBlockN;
    __syncthreads();  // the previous tile is no longer read
    for (int64_t e = threadIdx.x; e < keys * d_count; e += blockDim.x) {
      const int64_t j = key0 + e / d_count, d = e % d_count;
      k_tile[e] = load(k + b * p.k_stride.batch + h_kv * p.k_stride.head + j * p.k_stride.row + d);
      v_tile[e] = load(v + b * p.v_stride.batch + h_kv * p.v_stride.head + j * p.v_stride.row + d);
    }
    __syncthreads();
    if (!has_row) continue;

    // Scores of this tile in log2 units; keys the mask hides are never read into the result.
    float x[kBlockN];
    bool seen[kBlockN];
    float tile_max = -INFINITY;
    for (int64_t jj = 0; jj < keys; ++jj) {
      x[jj] = -INFINITY;
      seen[jj] = visible(p, i, key0 + jj);
      if (!seen[jj]) continue;
      float s = 0.0f;
      for (int64_t d = 0; d < d_count; ++d) s = fmaf(q_row[d], k_tile[jj * d_count + d], s);
      x[jj] = p.softcap > 0 ? cap_log2 * tanhf(s * inv_cap) : s * scale_log2;
      tile_max = nan_max(tile_max, x[jj]);
    }
    const float m_new = nan_max(m, tile_max);
    // Rescale what the earlier tiles accumulated to the new max (exp2(0) = 1 when the max did not move; 1 while
    // every score so far is -inf, where m - m_new would be inf - inf).
    const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m - m_new);
    float tile_sum = 0.0f;
    for (int64_t d = 0; d < d_count; ++d) acc[d] *= alpha;
    for (int64_t jj = 0; jj < keys; ++jj) {
      if (!seen[jj]) continue;  // hidden by the mask: its V row is never read into O
      // A -inf score weighs 0, but its V row is still multiplied in: a NaN or inf there reaches O (0 * inf),
      // as the semantics say for every key the mask lets the row see.
      const float pj = x[jj] == -INFINITY ? 0.0f : exp2f(x[jj] - m_new);
      tile_sum += pj;
      for (int64_t d = 0; d < d_count; ++d) acc[d] = fmaf(pj, v_tile[jj * d_count + d], acc[d]);
    }
    l = fmaf(l, alpha, tile_sum);
    m = m_new;
  }
  if (!has_row) return;

  // The sink: one more logit in the denominator whose value row is zero (+inf: it takes all the weight).
  T* o_ptr = o + b * p.o_stride.batch + h * p.o_stride.head + i * p.o_stride.row;
  float* lse_ptr = lse + (b * p.heads_q + h) * p.seqlen_q + i;
  if (sink != nullptr && sink[h] == INFINITY) {  // all the weight: LSE = +inf, O = 0 (acc * 0 keeps a NaN column NaN)
    const bool nan_row = m != m;                 // a NaN score: O is NaN, LSE still +inf
    for (int64_t d = 0; d < d_count; ++d) store(o_ptr + d, nan_row ? NAN : acc[d] * 0.0f);
    *lse_ptr = INFINITY;
    return;
  }
  float alpha = 1.0f;
  if (sink != nullptr && sink[h] != -INFINITY) {
    const float z = sink[h] * kLog2e;
    const float m_new = nan_max(m, z);
    alpha = exp2f(m - m_new);
    l = fmaf(l, alpha, exp2f(z - m_new));
    m = m_new;
  }
  const bool empty = l == 0.0f;  // no visible key (and no sink): O = 0, LSE = -inf
  for (int64_t d = 0; d < d_count; ++d) store(o_ptr + d, empty ? 0.0f : acc[d] * alpha / l);
  *lse_ptr = empty ? -INFINITY : m * kLn2 + logf(l);
}

int fail(char* err, size_t err_len, int code, const char* message) {
  if (err != nullptr && err_len > 0) std::snprintf(err, err_len, "%s", message);
  return code;
}

template <typename T>
int launch(const fc_subject_problem& p, const fc_subject_buffers& buf, cudaStream_t stream, char* err, size_t err_len) {
  const dim3 grid(static_cast<unsigned>((p.seqlen_q + kBlockM - 1) / kBlockM), static_cast<unsigned>(p.heads_q),
                  static_cast<unsigned>(p.batch));
  const size_t smem = 2 * kBlockN * p.head_dim * sizeof(float);
  forward_kernel<T><<<grid, kBlockM, smem, stream>>>(p, static_cast<const T*>(buf.q), static_cast<const T*>(buf.k),
                                                     static_cast<const T*>(buf.v), static_cast<T*>(buf.o), buf.lse,
                                                     buf.sink);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return fail(err, err_len, FC_SUBJECT_ERROR, cudaGetErrorString(e));
  return FC_SUBJECT_OK;
}

int forward(const fc_subject_problem* p, const fc_subject_buffers* buf, void* stream, char* err, size_t err_len) {
  if (p->batch == 0 || p->heads_q == 0 || p->seqlen_q == 0) return FC_SUBJECT_OK;  // nothing to compute
  if (p->head_dim < 1 || p->head_dim > kMaxHeadDim) return fail(err, err_len, FC_SUBJECT_UNSUPPORTED, "head_dim: 1..256");
  if (p->heads_q > 65535 || p->batch > 65535) {
    return fail(err, err_len, FC_SUBJECT_UNSUPPORTED, "heads_q and batch: at most 65535 (grid y and z)");
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (p->dtype) {
    case FC_SUBJECT_DTYPE_F32: return launch<float>(*p, *buf, s, err, err_len);
    case FC_SUBJECT_DTYPE_F16: return launch<__half>(*p, *buf, s, err, err_len);
    case FC_SUBJECT_DTYPE_BF16: return launch<__nv_bfloat16>(*p, *buf, s, err, err_len);
    default: return fail(err, err_len, FC_SUBJECT_INVALID_ARGUMENT, "dtype: unknown");
  }
}

const fc_subject kSubject = {
    FC_SUBJECT_ABI_VERSION,
    "example",
    {/*dtypes=*/FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F32) | FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_F16) |
         FC_SUBJECT_BIT(FC_SUBJECT_DTYPE_BF16),
     /*head_dim_min=*/1, /*head_dim_max=*/kMaxHeadDim, /*head_dims=*/nullptr, /*head_dim_count=*/0,
     /*masks=*/0x1f,
     /*layouts=*/FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BHSD) | FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_BSHD) |
         FC_SUBJECT_BIT(FC_SUBJECT_LAYOUT_STRIDED),
     /*gqa=*/1, /*lse=*/1, /*softcap=*/1, /*sink=*/1, FC_SUBJECT_MEMORY_DEVICE, /*instrumented=*/0},
    {/*arithmetic=*/{FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_GENERAL_FP32, FC_SUBJECT_ARITH_GENERAL_FP32},
     /*score_accumulation=*/{FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32},
     /*p_rounding=*/{FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32},
     /*o_accumulation=*/{FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32, FC_SUBJECT_FMT_FP32},
     /*key_tile=*/kBlockN},
    forward,
};

}  // namespace

// Declared in flashcheck/subject.h with C linkage and default visibility.
const fc_subject* fc_subject_v1(void) { return &kSubject; }
