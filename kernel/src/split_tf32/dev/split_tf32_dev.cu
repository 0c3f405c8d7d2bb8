// Development driver for the split-TF32 family, independent of the rest of the build: correctness of every
// head_dim family against a float64 CPU reference (shapes at tile edges, masks, GQA, strided layouts,
// non-finite and near-overflow values, 64-bit offsets, instrumentation) and timing of the FA-paper fp32 grid
// (B*N = 16384, H*d = 2048). Build and run with kernel/src/split_tf32/dev/run_dev.sh on a Hopper machine.
#include <cuda_runtime.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
#include "mask.h"
#include "split_tf32/kernel_wgmma.cuh"

namespace flashcheck::detail::instrumented::split_tf32 {
Status dev_launch_instrumented_hd64(const Params& params, const Instrumentation& inst);
}

using namespace flashcheck;
namespace st = flashcheck::detail::split_tf32;
namespace tiles = flashcheck::detail::split_tf32_tiles;

#define CUDA_OK(call)                                                                      \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "CUDA %s at %s:%d\n", cudaGetErrorString(err_), __FILE__, __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

constexpr uint32_t kPoisonBits = 0x7fc0dead;  // a NaN payload the kernel never produces
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Special { kNone, kNanVHidden, kInfQNegScores, kInfQMixed, kInfV, kHugeQ, kNanQ };
const char* special_name(Special s) {
  switch (s) {
    case Special::kNone: return "";
    case Special::kNanVHidden: return "nanV@diag";
    case Special::kInfQNegScores: return "-inf-scores";
    case Special::kInfQMixed: return "+-inf-scores";
    case Special::kInfV: return "infV";
    case Special::kHugeQ: return "hugeQ";
    case Special::kNanQ: return "nanQ";
  }
  return "?";
}

struct Case {
  int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  Mask mask = Mask::kNone;
  bool bshd = false;
  int64_t row_pad = 0;  // extra elements after each row (strided rows)
  float scale = NAN;    // NaN: 1/sqrt(head_dim)
  float amp = 1.0f;
  Special special = Special::kNone;
  double rel_rms_limit = 2e-6;
};

struct Layout4 {
  Strides s;
  int64_t span;
};
Layout4 layout_of(const Case& c, int64_t heads, int64_t seqlen) {
  const int64_t row = c.head_dim + c.row_pad;
  Layout4 l;
  if (c.bshd) {
    l.s = {seqlen * heads * row, row, heads * row};
  } else {
    l.s = {heads * seqlen * row, seqlen * row, row};
  }
  l.span = c.batch * heads * seqlen * row;
  return l;
}

// float64 reference with the API's semantics (attention.h), over the rounded fp32 inputs.
void reference(const Case& c, const Params& p, const std::vector<float>& q, const std::vector<float>& k,
               const std::vector<float>& v, std::vector<double>& o, std::vector<double>& lse) {
  const int64_t rows = c.batch * c.heads_q;
  o.assign(rows * c.seqlen_q * c.head_dim, 0.0);
  lse.assign(rows * c.seqlen_q, -kInf);
  const double scale = p.softmax_scale;
  auto work = [&](int64_t bh0, int64_t stride) {
    std::vector<double> s(std::max<int64_t>(c.seqlen_k, 1));
    for (int64_t bh = bh0; bh < rows; bh += stride) {
      const int64_t b = bh / c.heads_q, h = bh % c.heads_q, hk = h / (c.heads_q / c.heads_kv);
      for (int64_t i = 0; i < c.seqlen_q; ++i) {
        const int64_t vis = detail::visible_key_count(c.mask, i, c.seqlen_q, c.seqlen_k);
        double* orow = &o[(bh * c.seqlen_q + i) * c.head_dim];
        double& lrow = lse[bh * c.seqlen_q + i];
        if (vis == 0) continue;
        const float* qr = &q[b * p.q_stride.batch + h * p.q_stride.head + i * p.q_stride.row];
        double m = -kInf;
        bool any_nan = false;
        for (int64_t j = 0; j < vis; ++j) {
          const float* kr = &k[b * p.k_stride.batch + hk * p.k_stride.head + j * p.k_stride.row];
          double dot = 0;
          for (int64_t d = 0; d < c.head_dim; ++d) dot += double(qr[d]) * double(kr[d]);
          s[j] = scale * dot;
          if (std::isnan(s[j])) any_nan = true; else m = std::max(m, s[j]);
        }
        if (any_nan || m == kInf) {
          for (int64_t d = 0; d < c.head_dim; ++d) orow[d] = NAN;
          lrow = NAN;
          continue;
        }
        if (m == -kInf) continue;  // every visible score -inf: O = 0, LSE = -inf
        double l = 0;
        for (int64_t j = 0; j < vis; ++j) {
          const double pj = std::exp(s[j] - m);
          l += pj;
          const float* vr = &v[b * p.v_stride.batch + hk * p.v_stride.head + j * p.v_stride.row];
          for (int64_t d = 0; d < c.head_dim; ++d) orow[d] += pj * double(vr[d]);
        }
        for (int64_t d = 0; d < c.head_dim; ++d) orow[d] /= l;
        lrow = m + std::log(l);
      }
    }
  };
  const int n_threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int t = 0; t < n_threads; ++t) pool.emplace_back(work, t, n_threads);
  for (auto& th : pool) th.join();
}

struct Errors {
  double rel_rms = 0, max_abs = 0, lse_max = 0;
  int64_t unwritten = 0, nonfinite_mismatch = 0, pad_damaged = 0;
};

int g_failures = 0;

const char* mask_name(Mask m) { return m == Mask::kNone ? "none" : m == Mask::kCausalTopLeft ? "causal-tl" : "causal-br"; }

bool run_case(const Case& c, uint64_t seed, bool quiet = false) {
  Params p;
  p.dtype = DType::kF32;
  p.mask = c.mask;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.head_dim = c.head_dim;
  const Layout4 lq = layout_of(c, c.heads_q, c.seqlen_q), lk = layout_of(c, c.heads_kv, c.seqlen_k);
  p.q_stride = lq.s;
  p.o_stride = lq.s;
  p.k_stride = lk.s;
  p.v_stride = lk.s;
  p.softmax_scale = std::isnan(c.scale) ? 1.0f / std::sqrt(float(c.head_dim)) : c.scale;

  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Padding elements (between rows) hold NaN: the kernel must never read them.
  std::vector<float> q(lq.span, NAN), k(lk.span, NAN), v(lk.span, NAN);
  auto fill = [&](std::vector<float>& x, const Strides& s, int64_t heads, int64_t seqlen, float amp) {
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < seqlen; ++i)
          for (int64_t d = 0; d < c.head_dim; ++d) x[b * s.batch + h * s.head + i * s.row + d] = normal(rng) * amp;
  };
  fill(q, p.q_stride, c.heads_q, c.seqlen_q, c.amp);
  fill(k, p.k_stride, c.heads_kv, c.seqlen_k, c.amp);
  fill(v, p.v_stride, c.heads_kv, c.seqlen_k, 1.0f);
  auto at = [&](std::vector<float>& x, const Strides& s, int64_t h, int64_t i, int64_t d) -> float& {
    return x[h * s.head + i * s.row + d];  // batch 0
  };
  switch (c.special) {
    case Special::kNone: break;
    case Special::kNanVHidden:  // a key hidden from the early rows of its diagonal tile
      at(v, p.v_stride, 0, c.seqlen_k / 2, 0) = NAN;
      at(v, p.v_stride, 0, c.seqlen_k / 2 + 1, 1) = INFINITY;
      break;
    case Special::kInfQNegScores:  // row 3: every score -inf (K column 0 strictly negative)
      at(q, p.q_stride, 0, 3, 0) = INFINITY;
      for (int64_t j = 0; j < c.seqlen_k; ++j) at(k, p.k_stride, 0, j, 0) = -(std::fabs(normal(rng)) + 0.1f);
      break;
    case Special::kInfQMixed:  // row 3: -inf scores for even keys, +inf for odd keys -> NaN row
      at(q, p.q_stride, 0, 3, 0) = INFINITY;
      for (int64_t j = 0; j < c.seqlen_k; ++j)
        at(k, p.k_stride, 0, j, 0) = (j % 2 ? 1.0f : -1.0f) * (std::fabs(normal(rng)) + 0.1f);
      break;
    case Special::kInfV:
      at(v, p.v_stride, 0, 5, 2) = INFINITY;
      at(v, p.v_stride, 0, 9, 2) = -INFINITY;  // column 2: inf - inf = NaN for rows that see both
      at(v, p.v_stride, 0, 7, 3) = -INFINITY;
      break;
    case Special::kHugeQ:  // finite inputs whose tf32 rounding overflows; scores stay finite
      at(q, p.q_stride, 0, 2, 0) = 3.4028e38f;
      for (int64_t j = 0; j < c.seqlen_k; ++j) at(k, p.k_stride, 0, j, 0) = 1e-38f * normal(rng);
      at(v, p.v_stride, 0, 4, 1) = -3.40281e38f;
      break;
    case Special::kNanQ:
      at(q, p.q_stride, 0, 1, 0) = NAN;
      break;
  }

  KernelConfig cfg;
  if (!detail::split_tf32_select(p, &cfg)) {
    std::printf("FAIL select refused a case it should serve\n");
    ++g_failures;
    return false;
  }

  const int64_t o_span = lq.span;
  const int64_t lse_n = c.batch * c.heads_q * c.seqlen_q;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr, *dlse = nullptr;
  CUDA_OK(cudaMalloc(&dq, std::max<int64_t>(lq.span, 1) * 4));
  CUDA_OK(cudaMalloc(&dk, std::max<int64_t>(lk.span, 1) * 4));
  CUDA_OK(cudaMalloc(&dv, std::max<int64_t>(lk.span, 1) * 4));
  CUDA_OK(cudaMalloc(&dout, std::max<int64_t>(o_span, 1) * 4));
  CUDA_OK(cudaMalloc(&dlse, std::max<int64_t>(lse_n, 1) * 4));
  CUDA_OK(cudaMemcpy(dq, q.data(), lq.span * 4, cudaMemcpyHostToDevice));
  if (lk.span) {
    CUDA_OK(cudaMemcpy(dk, k.data(), lk.span * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dv, v.data(), lk.span * 4, cudaMemcpyHostToDevice));
  }
  std::vector<uint32_t> poison_o(o_span, kPoisonBits), poison_l(lse_n, kPoisonBits);
  CUDA_OK(cudaMemcpy(dout, poison_o.data(), o_span * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dlse, poison_l.data(), lse_n * 4, cudaMemcpyHostToDevice));
  p.q = dq;
  p.k = c.seqlen_k ? dk : nullptr;
  p.v = c.seqlen_k ? dv : nullptr;
  p.o = dout;
  p.lse = dlse;
  Status st = detail::split_tf32_launch(p, cfg, nullptr, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  if (!st.ok()) {
    std::printf("FAIL launch: %s\n", st.message().c_str());
    ++g_failures;
    return false;
  }
  std::vector<float> o(o_span), lse(lse_n);
  CUDA_OK(cudaMemcpy(o.data(), dout, o_span * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(lse.data(), dlse, lse_n * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(dq));
  CUDA_OK(cudaFree(dk));
  CUDA_OK(cudaFree(dv));
  CUDA_OK(cudaFree(dout));
  CUDA_OK(cudaFree(dlse));

  std::vector<double> ro, rl;
  reference(c, p, q, k, v, ro, rl);
  Errors e;
  double err2 = 0, ref2 = 0;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads_q; ++h)
      for (int64_t i = 0; i < c.seqlen_q; ++i) {
        const int64_t bh = b * c.heads_q + h;
        const float* orow = &o[b * p.o_stride.batch + h * p.o_stride.head + i * p.o_stride.row];
        const double* rrow = &ro[(bh * c.seqlen_q + i) * c.head_dim];
        for (int64_t d = 0; d < c.head_dim + c.row_pad; ++d) {
          uint32_t bits;
          std::memcpy(&bits, &orow[d], 4);
          if (d >= c.head_dim) {
            if (bits != kPoisonBits) ++e.pad_damaged;
            continue;
          }
          if (bits == kPoisonBits) { ++e.unwritten; continue; }
          const double r = rrow[d], x = orow[d];
          if (!std::isfinite(r) || !std::isfinite(x)) {
            const bool same = (std::isnan(r) && std::isnan(x)) || r == x;
            if (!same) ++e.nonfinite_mismatch;
            continue;
          }
          err2 += (x - r) * (x - r);
          ref2 += r * r;
          e.max_abs = std::max(e.max_abs, std::fabs(x - r));
        }
        uint32_t lbits;
        std::memcpy(&lbits, &lse[bh * c.seqlen_q + i], 4);
        if (lbits == kPoisonBits) { ++e.unwritten; continue; }
        const double rl_i = rl[bh * c.seqlen_q + i], xl = lse[bh * c.seqlen_q + i];
        if (!std::isfinite(rl_i) || !std::isfinite(xl)) {
          if (!((std::isnan(rl_i) && std::isnan(xl)) || rl_i == xl)) ++e.nonfinite_mismatch;
        } else {
          e.lse_max = std::max(e.lse_max, std::fabs(xl - rl_i));
        }
      }
  e.rel_rms = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  const bool ok = e.unwritten == 0 && e.nonfinite_mismatch == 0 && e.pad_damaged == 0 &&
                  e.rel_rms <= c.rel_rms_limit && e.lse_max <= 1e-5 * std::max(1.0f, c.amp * c.amp);
  if (!ok) ++g_failures;
  if (!ok || !quiet) {
    std::printf("%s B%" PRId64 " Hq%" PRId64 " Hkv%" PRId64 " Sq%" PRId64 " Sk%" PRId64 " d%" PRId64
                " %s%s pad%" PRId64 " amp%g scale%g %s [%s]: rel_rms %.3g max_abs %.3g lse_max %.3g unwritten %" PRId64
                " nonfinite_mismatch %" PRId64 " pad_damaged %" PRId64 "\n",
                ok ? "ok  " : "FAIL", c.batch, c.heads_q, c.heads_kv, c.seqlen_q, c.seqlen_k, c.head_dim,
                mask_name(c.mask), c.bshd ? " bshd" : "", c.row_pad, c.amp, p.softmax_scale,
                special_name(c.special), cfg.name, e.rel_rms, e.max_abs, e.lse_max, e.unwritten,
                e.nonfinite_mismatch, e.pad_damaged);
  }
  return ok;
}

// --- 64-bit offsets: batch stride 2^31 + 64 elements, Q, K and V share one buffer (inputs may alias).
__global__ void fill_hash(float* x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t z = (uint64_t(i) + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u1 = ((z >> 40) + 1) * (1.0f / 16777217.0f), u2 = ((z >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    x[i] = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
  }
}

void run_large_offset_case() {
  const int64_t S = 192, D = 128, batch_stride = (int64_t{1} << 31) + 64;
  const int64_t span = batch_stride + S * D;
  float *dx = nullptr, *dout = nullptr, *dlse = nullptr;
  CUDA_OK(cudaMalloc(&dx, span * 4));
  CUDA_OK(cudaMalloc(&dout, span * 4));
  CUDA_OK(cudaMalloc(&dlse, 2 * S * 4));
  fill_hash<<<1024, 256>>>(dx, S * D, 1);
  fill_hash<<<1024, 256>>>(dx + batch_stride, S * D, 2);
  CUDA_OK(cudaGetLastError());
  Params p;
  p.dtype = DType::kF32;
  p.mask = Mask::kCausalBottomRight;
  p.batch = 2;
  p.heads_q = p.heads_kv = 1;
  p.seqlen_q = p.seqlen_k = S;
  p.head_dim = D;
  p.q_stride = p.k_stride = p.v_stride = p.o_stride = {batch_stride, S * D, D};
  p.softmax_scale = 0.125f;
  p.q = p.k = p.v = dx;
  p.o = dout;
  p.lse = dlse;
  KernelConfig cfg;
  detail::split_tf32_select(p, &cfg);
  Status st = detail::split_tf32_launch(p, cfg, nullptr, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> x(S * D), o(S * D), lse(2 * S);
  CUDA_OK(cudaMemcpy(x.data(), dx + batch_stride, S * D * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(o.data(), dout + batch_stride, S * D * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(lse.data(), dlse, 2 * S * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dout));
  CUDA_OK(cudaFree(dlse));
  double err2 = 0, ref2 = 0, lse_err = 0;
  for (int64_t i = 0; i < S; ++i) {
    std::vector<double> s(i + 1);
    double m = -kInf;
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += double(x[i * D + d]) * x[j * D + d];
      s[j] = 0.125 * dot;
      m = std::max(m, s[j]);
    }
    double l = 0;
    std::vector<double> acc(D, 0.0);
    for (int64_t j = 0; j <= i; ++j) {
      const double pj = std::exp(s[j] - m);
      l += pj;
      for (int64_t d = 0; d < D; ++d) acc[d] += pj * x[j * D + d];
    }
    for (int64_t d = 0; d < D; ++d) {
      const double r = acc[d] / l;
      err2 += (o[i * D + d] - r) * (o[i * D + d] - r);
      ref2 += r * r;
    }
    lse_err = std::max(lse_err, std::fabs(lse[S + i] - (m + std::log(l))));
  }
  const double rel = std::sqrt(err2 / ref2);
  const bool ok = st.ok() && rel < 2e-6 && lse_err < 1e-5;
  if (!ok) ++g_failures;
  std::printf("%s 64-bit offsets (batch stride 2^31+64, second batch checked): rel_rms %.3g lse_max %.3g %s\n",
              ok ? "ok  " : "FAIL", rel, lse_err, st.message().c_str());
}

// --- instrumentation: row m / l against float64, traces, tile kinds against mask.h's classification.
void run_instrumented_case() {
  const int64_t B = 1, H = 2, Sq = 150, Sk = 200, D = 64;
  Params p;
  p.dtype = DType::kF32;
  p.mask = Mask::kCausalBottomRight;
  p.batch = B;
  p.heads_q = p.heads_kv = H;
  p.seqlen_q = Sq;
  p.seqlen_k = Sk;
  p.head_dim = D;
  p.q_stride = p.o_stride = {H * Sq * D, Sq * D, D};
  p.k_stride = p.v_stride = {H * Sk * D, Sk * D, D};
  p.softmax_scale = 0.125f;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(B * H * Sq * D), k(B * H * Sk * D), v(k.size());
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = normal(rng);
  float *dq, *dk, *dv, *dout, *dlse, *dm, *dl, *dtm, *dtl;
  int64_t* drows;
  unsigned long long* dcounts;
  const int max_tiles = 8;
  const std::vector<int64_t> trace_rows = {0, 149, Sq + 70};  // head 0 row 0, head 0 row 149, head 1 row 70
  CUDA_OK(cudaMalloc(&dq, q.size() * 4));
  CUDA_OK(cudaMalloc(&dk, k.size() * 4));
  CUDA_OK(cudaMalloc(&dv, v.size() * 4));
  CUDA_OK(cudaMalloc(&dout, q.size() * 4));
  CUDA_OK(cudaMalloc(&dlse, B * H * Sq * 4));
  CUDA_OK(cudaMalloc(&dm, B * H * Sq * 4));
  CUDA_OK(cudaMalloc(&dl, B * H * Sq * 4));
  CUDA_OK(cudaMalloc(&dtm, trace_rows.size() * max_tiles * 4));
  CUDA_OK(cudaMalloc(&dtl, trace_rows.size() * max_tiles * 4));
  CUDA_OK(cudaMalloc(&drows, trace_rows.size() * 8));
  CUDA_OK(cudaMalloc(&dcounts, (kTileKindCount + kRescaleBuckets) * 8));
  CUDA_OK(cudaMemcpy(dq, q.data(), q.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dk, k.data(), k.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(drows, trace_rows.data(), trace_rows.size() * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dcounts, 0, (kTileKindCount + kRescaleBuckets) * 8));
  CUDA_OK(cudaMemset(dtm, 0xff, trace_rows.size() * max_tiles * 4));
  CUDA_OK(cudaMemset(dtl, 0xff, trace_rows.size() * max_tiles * 4));
  p.q = dq;
  p.k = dk;
  p.v = dv;
  p.o = dout;
  p.lse = dlse;
  Instrumentation inst;
  inst.row_m = dm;
  inst.row_l = dl;
  inst.trace_rows = drows;
  inst.trace_row_count = int32_t(trace_rows.size());
  inst.max_tiles = max_tiles;
  inst.trace_m = dtm;
  inst.trace_l = dtl;
  inst.tile_kind_counts = reinterpret_cast<uint64_t*>(dcounts);
  inst.rescale_buckets = reinterpret_cast<uint64_t*>(dcounts) + kTileKindCount;
  Status st = detail::instrumented::split_tf32::dev_launch_instrumented_hd64(p, inst);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> m(B * H * Sq), l(B * H * Sq), tm(trace_rows.size() * max_tiles), tl(tm.size());
  std::vector<unsigned long long> counts(kTileKindCount + kRescaleBuckets);
  CUDA_OK(cudaMemcpy(m.data(), dm, m.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(l.data(), dl, l.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(tm.data(), dtm, tm.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(tl.data(), dtl, tl.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(counts.data(), dcounts, counts.size() * 8, cudaMemcpyDeviceToHost));
  double m_err = 0, l_rel = 0;
  int64_t rows_counted = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < Sq; ++i) {
      const int64_t vis = detail::visible_key_count(p.mask, i, Sq, Sk);
      double mx = -kInf;
      std::vector<double> s(vis);
      for (int64_t j = 0; j < vis; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(q[(h * Sq + i) * D + d]) * k[(h * Sk + j) * D + d];
        s[j] = 0.125 * dot;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < vis; ++j) sum += std::exp(s[j] - double(m[h * Sq + i]));
      m_err = std::max(m_err, std::fabs(m[h * Sq + i] - mx));
      l_rel = std::max(l_rel, std::fabs(l[h * Sq + i] - sum) / sum);
      ++rows_counted;
    }
  // Expected tile kinds from mask.h for the Q tiles of this shape (the wgmma kernel's, instrumented.cu).
  using Cfg = tiles::SplitTf32WgmmaConfig<64, 64>;
  std::vector<unsigned long long> expect(kTileKindCount, 0);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t m0 = 0; m0 < Sq; m0 += Cfg::kBlockM) {
      const int64_t visited = detail::visited_k_tiles(p.mask, m0, Cfg::kBlockM, Cfg::kBlockN, Sq, Sk);
      for (int64_t kt = 0; kt < visited; ++kt)
        ++expect[int(detail::classify_tile(p.mask, m0, Cfg::kBlockM, kt * Cfg::kBlockN, Cfg::kBlockN, Sq, Sk))];
      expect[int(TileKind::kSkipped)] += detail::ceil_div(Sk, Cfg::kBlockN) - visited;
    }
  bool kinds_ok = true;
  for (int i = 0; i < kTileKindCount; ++i) kinds_ok &= counts[i] == expect[i];
  unsigned long long bucket_rows = 0;
  for (int i = 0; i < kRescaleBuckets; ++i) bucket_rows += counts[kTileKindCount + i];
  // Trace of head 0 row 149 (sees all 200 keys: 4 tiles of 64): the last trace slot equals the final m, l.
  const int64_t last_tile = detail::ceil_div(Sk, Cfg::kBlockN) - 1;
  const bool trace_ok = tm[1 * max_tiles + last_tile] == m[149] && tl[1 * max_tiles + last_tile] == l[149] &&
                        std::isnan(tm[1 * max_tiles + last_tile + 1]);
  const bool ok = st.ok() && m_err < 1e-5 && l_rel < 1e-5 && kinds_ok && bucket_rows == uint64_t(B * H * Sq) && trace_ok;
  if (!ok) ++g_failures;
  std::printf("%s instrumented: m_err %.3g l_rel %.3g kinds(full,tail,diag,skip) %llu,%llu,%llu,%llu expect %llu,%llu,%llu,%llu "
              "bucket rows %llu trace %s buckets", ok ? "ok  " : "FAIL", m_err, l_rel, counts[0], counts[1], counts[2],
              counts[3], expect[0], expect[1], expect[2], expect[3], bucket_rows, trace_ok ? "ok" : "BAD");
  for (int i = 0; i < kRescaleBuckets; ++i) std::printf(" %llu", counts[kTileKindCount + i]);
  std::printf("\n");
  for (void* ptr : {(void*)dq, (void*)dk, (void*)dv, (void*)dout, (void*)dlse, (void*)dm, (void*)dl, (void*)dtm,
                    (void*)dtl, (void*)drows, (void*)dcounts})
    CUDA_OK(cudaFree(ptr));
}

// --- timing: median of kIters event-timed launches after warm-up; FLOPs 4*B*H*N^2*d (halved when causal).
template <typename Cfg, bool kWgmma>
Status launch_timed(const Params& p) {
  if constexpr (kWgmma) return st::launch_split_tf32_wgmma<Cfg>(p, nullptr, nullptr);
  else return st::launch_split_tf32_config<Cfg>(p, nullptr, nullptr);
}

template <typename Cfg, bool kWgmma>
double time_config(const Params& p) {
  constexpr int kWarmup = 3, kIters = 15;
  for (int i = 0; i < kWarmup; ++i) {
    Status st = launch_timed<Cfg, kWgmma>(p);
    if (!st.ok()) { std::printf("launch failed %s\n", st.message().c_str()); return 0; }
  }
  std::vector<float> ms;
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (int i = 0; i < kIters; ++i) {
    CUDA_OK(cudaEventRecord(e0));
    (void)launch_timed<Cfg, kWgmma>(p);
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float t;
    CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CUDA_OK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <typename Cfg, bool kWgmma = false>
void time_case(const char* label, int64_t N, int64_t D, bool causal, float* buf) {
  const int64_t B = 16384 / N, H = 2048 / D;
  Params p;
  p.dtype = DType::kF32;
  p.mask = causal ? Mask::kCausalBottomRight : Mask::kNone;
  p.batch = B;
  p.heads_q = p.heads_kv = H;
  p.seqlen_q = p.seqlen_k = N;
  p.head_dim = D;
  p.q_stride = p.k_stride = p.v_stride = p.o_stride = {H * N * D, N * D, D};
  p.softmax_scale = 1.0f / std::sqrt(float(D));
  const int64_t n = B * H * N * D;
  p.q = buf;
  p.k = buf + n;
  p.v = buf + 2 * n;
  p.o = buf + 3 * n;
  p.lse = buf + 4 * n;
  const double ms = time_config<Cfg, kWgmma>(p);
  const double flops = 4.0 * B * H * N * N * D * (causal ? 0.5 : 1.0);
  std::printf("time %-26s N=%5" PRId64 " d=%3" PRId64 " causal=%d  %8.3f ms  %6.1f TFLOP/s\n", label, N, D, causal, ms,
              flops / ms / 1e9);
}

int main(int argc, char** argv) {
  const bool do_tests = argc < 2 || std::strcmp(argv[1], "time") != 0;
  const bool do_time = argc < 2 || std::strcmp(argv[1], "test") != 0;
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s SMs %d\n", prop.name, prop.multiProcessorCount);
  if (do_tests) {
    // The peers' accuracy configurations (PyTorch is_causal is top-left aligned), B=2 H=4, randn * amp.
    struct Peer { int64_t n, d; bool causal; float amp; };
    for (const Peer& pc : {Peer{1024, 64, false, 1}, Peer{1024, 128, true, 1}, Peer{4096, 128, false, 1},
                           Peer{1024, 128, false, 8}, Peer{1000, 96, true, 1}, Peer{1, 128, false, 1},
                           Peer{4099, 128, false, 1}}) {
      Case c{2, 4, 4, pc.n, pc.n, pc.d, pc.causal ? Mask::kCausalTopLeft : Mask::kNone};
      c.amp = pc.amp;
      c.rel_rms_limit = pc.amp > 1 ? 6e-6 : 1e-6;
      run_case(c, 100 + pc.n + pc.d);
    }
    // Edge shapes: sequence lengths around the tiles, every head_dim family, masks, GQA, layouts, padding.
    const int64_t seqs[] = {1, 2, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200, 257};
    const int64_t dims[] = {1, 3, 4, 8, 30, 32, 33, 48, 64, 72, 96, 100, 128, 129, 160, 200, 256};
    std::mt19937_64 pick(1234);
    int n_edge = 0, n_edge_ok = 0;
    for (int it = 0; it < 160; ++it) {
      Case c{};
      c.batch = 1 + pick() % 3;
      c.heads_kv = 1 + pick() % 3;
      c.heads_q = c.heads_kv * (1 + pick() % 3);
      c.seqlen_q = seqs[pick() % std::size(seqs)];
      c.seqlen_k = pick() % 4 == 0 ? c.seqlen_q : seqs[pick() % std::size(seqs)];
      c.head_dim = dims[pick() % std::size(dims)];
      c.mask = static_cast<Mask>(pick() % 3);
      c.bshd = pick() % 2;
      c.row_pad = ((4 - c.head_dim % 4) % 4) + (pick() % 2) * 4;  // rows must start 16-byte aligned
      c.scale = pick() % 8 == 0 ? -0.3f : NAN;
      ++n_edge;
      n_edge_ok += run_case(c, 1000 + it, /*quiet=*/true);
    }
    std::printf("edge shapes: %d/%d ok\n", n_edge_ok, n_edge);
    // Semantics: fully masked rows, seqlen_k = 0, zero scale, non-finite and near-overflow values.
    {
      Case c{1, 2, 1, 200, 70, 64, Mask::kCausalBottomRight};
      run_case(c, 5);  // first 130 rows see no key: O = 0, LSE = -inf
      Case z{2, 2, 2, 33, 0, 64, Mask::kNone};
      run_case(z, 6);
      Case s0{1, 2, 2, 100, 90, 128, Mask::kCausalTopLeft};
      s0.scale = 0.0f;
      run_case(s0, 7);
      for (Special sp : {Special::kNanVHidden, Special::kInfQNegScores, Special::kInfQMixed, Special::kInfV,
                         Special::kHugeQ, Special::kNanQ}) {
        for (Mask mk : {Mask::kCausalTopLeft, Mask::kNone}) {
          Case c2{1, 2, 2, 150, 150, 64, mk};
          c2.special = sp;
          run_case(c2, 8);
          Case c3{1, 1, 1, 100, 100, 128, mk};
          c3.special = sp;
          run_case(c3, 9);
        }
      }
    }
    run_instrumented_case();
    run_large_offset_case();
    std::printf("TESTS: %d failures\n", g_failures);
  }
  if (do_time) {
    float* buf = nullptr;
    const int64_t n = int64_t{16384} * 2048;
    CUDA_OK(cudaMalloc(&buf, (4 * n + n) * 4));
    fill_hash<<<4096, 256>>>(buf, 3 * n, 11);
    CUDA_OK(cudaDeviceSynchronize());
    for (bool causal : {false, true}) {
      for (int64_t N : {1024, 4096}) {
        time_case<tiles::SplitTf32TileConfig<64, 64, 32, 4, 2>>("hd64 mma.sync (m64 n32)", N, 64, causal, buf);
        time_case<tiles::SplitTf32TileConfig<128, 64, 32, 4, 2>>("hd128 mma.sync (m64 n32)", N, 128, causal, buf);
        time_case<tiles::SplitTf32WgmmaConfig<128, 32>, true>("hd128 wgmma (m128 n32)", N, 128, causal, buf);
        time_case<tiles::SplitTf32WgmmaConfig<64, 32>, true>("hd64 wgmma (m128 n32)", N, 64, causal, buf);
        time_case<tiles::SplitTf32WgmmaConfig<64, 64>, true>("hd64 wgmma (m128 n64)", N, 64, causal, buf);
      }
    }
    time_case<tiles::SplitTf32ConfigFor<32>>("hd32", 4096, 32, false, buf);
    time_case<tiles::SplitTf32ConfigFor<256>>("hd256", 4096, 256, false, buf);
    time_case<tiles::SplitTf32ConfigFor<256>>("hd256", 4096, 256, true, buf);
    CUDA_OK(cudaFree(buf));
  }
  return g_failures == 0 ? 0 : 1;
}
