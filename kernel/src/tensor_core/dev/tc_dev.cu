// Standalone development harness of the tensor-core family (not part of the CMake build): correctness
// against a float64 CPU reference on ragged, causal (both alignments), GQA, strided and padded-head_dim
// shapes, special rows (no visible key, seqlen_k == 0, NaN at hidden keys, 64-bit offsets), then timing on
// the FA-paper grid with CUDA events (warm-up, median). Build and run: kernel/src/tensor_core/dev/run.sh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../../families.h"
#include "../kernel.cuh"

using namespace flashcheck;

#define CHECK_CUDA(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);     \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

uint16_t to_bits(float x, DType dt) {
  uint16_t r;
  if (dt == DType::kBF16) {
    __nv_bfloat16 b = __float2bfloat16_rn(x);
    std::memcpy(&r, &b, 2);
  } else {
    __half h = __float2half_rn(x);
    std::memcpy(&r, &h, 2);
  }
  return r;
}
float from_bits(uint16_t r, DType dt) {
  if (dt == DType::kBF16) {
    __nv_bfloat16 b;
    std::memcpy(&b, &r, 2);
    return __bfloat162float(b);
  }
  __half h;
  std::memcpy(&h, &r, 2);
  return __half2float(h);
}

struct Case {
  DType dtype = DType::kBF16;
  int64_t b = 1, hq = 1, hkv = 1, sq = 1, sk = 1, d = 64;
  Mask mask = Mask::kNone;
  bool bshd = false;
  int64_t row_pad = 0;  // extra elements per row (multiple of 8)
  float scale_mult = 1.0f;
  int inject = 0;  // 1: NaN in V at a key hidden from early rows; 2: inf in V there; 3: NaN in K there
  double amp = 1.0;
};

int64_t visible(Mask mask, int64_t i, int64_t sq, int64_t sk) {
  if (mask == Mask::kNone) return sk;
  const int64_t off = mask == Mask::kCausalBottomRight ? sk - sq : 0;
  return std::clamp<int64_t>(i + off + 1, 0, sk);
}

struct HostTensor {
  std::vector<uint16_t> data;
  Strides st;
};

HostTensor make_tensor(const Case& c, int64_t heads, int64_t seqlen, std::mt19937_64& rng, bool fill) {
  HostTensor t;
  const int64_t row = c.d + c.row_pad;
  if (c.bshd) {
    t.st = {seqlen * heads * row, row, heads * row};
  } else {
    t.st = {heads * seqlen * row, seqlen * row, row};
  }
  t.data.assign(static_cast<size_t>(std::max<int64_t>(c.b * heads * seqlen * row, 1)), to_bits(-777.0f, c.dtype));
  if (fill) {
    std::normal_distribution<double> nd(0.0, c.amp);
    for (int64_t bb = 0; bb < c.b; ++bb)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t s = 0; s < seqlen; ++s)
          for (int64_t x = 0; x < c.d; ++x)
            t.data[bb * t.st.batch + h * t.st.head + s * t.st.row + x] = to_bits(static_cast<float>(nd(rng)), c.dtype);
  }
  return t;
}

struct Result {
  bool ok = true;
  double rel_rms = 0, max_rel = 0, lse_err = 0;
  std::string why;
};

void* to_device(const std::vector<uint16_t>& h) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, h.size() * 2));
  CHECK_CUDA(cudaMemcpy(p, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  return p;
}

Result run_case(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  HostTensor q = make_tensor(c, c.hq, c.sq, rng, true);
  HostTensor k = make_tensor(c, c.hkv, c.sk, rng, true);
  HostTensor v = make_tensor(c, c.hkv, c.sk, rng, true);
  HostTensor o = make_tensor(c, c.hq, c.sq, rng, false);
  const int64_t inj_key = c.sk / 2 + 3;  // hidden from rows i < inj_key - off under causal masks
  if (c.inject != 0 && inj_key < c.sk) {
    for (int64_t bb = 0; bb < c.b; ++bb)
      for (int64_t h = 0; h < c.hkv; ++h)
        for (int64_t x = 0; x < c.d; x += (c.inject == 1 ? 3 : 1)) {
          const float val = c.inject == 2 ? INFINITY : NAN;
          HostTensor& t = c.inject == 3 ? k : v;
          t.data[bb * t.st.batch + h * t.st.head + inj_key * t.st.row + x] = to_bits(val, c.dtype);
        }
  }
  Params p;
  p.dtype = c.dtype;
  p.mask = c.mask;
  p.batch = c.b;
  p.heads_q = c.hq;
  p.heads_kv = c.hkv;
  p.seqlen_q = c.sq;
  p.seqlen_k = c.sk;
  p.head_dim = c.d;
  p.softmax_scale = c.scale_mult / std::sqrt(static_cast<float>(c.d));
  p.q_stride = q.st;
  p.k_stride = k.st;
  p.v_stride = v.st;
  p.o_stride = o.st;
  void* dq = c.sk > 0 ? to_device(q.data) : nullptr;
  void* dk = c.sk > 0 ? to_device(k.data) : nullptr;
  void* dv = c.sk > 0 ? to_device(v.data) : nullptr;
  void* dout = to_device(o.data);
  const int64_t rows = c.b * c.hq * c.sq;
  float* dlse = nullptr;
  CHECK_CUDA(cudaMalloc(&dlse, std::max<int64_t>(rows, 1) * 4));
  CHECK_CUDA(cudaMemset(dlse, 0xFF, std::max<int64_t>(rows, 1) * 4));  // NaN poison
  p.q = dq;
  p.k = dk;
  p.v = dv;
  p.o = dout;
  p.lse = dlse;
  Result r;
  KernelConfig cfg;
  if (!detail::tensor_core_select(p, &cfg)) {
    r.ok = false;
    r.why = "not selected";
    return r;
  }
  Status s = detail::tensor_core_launch(p, cfg, nullptr, nullptr);
  if (!s.ok()) {
    r.ok = false;
    r.why = "launch: " + s.message();
    return r;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> out(o.data.size());
  std::vector<float> lse(std::max<int64_t>(rows, 1));
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(lse.data(), dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
  for (void* ptr : {dq, dk, dv, dout}) cudaFree(ptr);
  cudaFree(dlse);

  // Reference in double from the rounded inputs.
  const double scale = p.softmax_scale;
  double err2 = 0, ref2 = 0, max_err = 0, max_ref = 0;
  const int64_t group = c.hq / c.hkv;
  std::vector<double> sc(std::max<int64_t>(c.sk, 1)), acc(c.d);
  for (int64_t bb = 0; bb < c.b && r.ok; ++bb)
    for (int64_t h = 0; h < c.hq && r.ok; ++h)
      for (int64_t i = 0; i < c.sq && r.ok; ++i) {
        const int64_t hk = h / group;
        const int64_t n = visible(c.mask, i, c.sq, c.sk);
        double m = -INFINITY;
        bool nan_row = false;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < c.d; ++x)
            dot += double(from_bits(q.data[bb * q.st.batch + h * q.st.head + i * q.st.row + x], c.dtype)) *
                   double(from_bits(k.data[bb * k.st.batch + hk * k.st.head + j * k.st.row + x], c.dtype));
          sc[j] = scale * dot;
          if (std::isnan(sc[j])) nan_row = true;
          m = std::max(m, sc[j]);
        }
        double l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        if (n > 0 && m > -INFINITY) {
          for (int64_t j = 0; j < n; ++j) {
            const double pj = std::exp(sc[j] - m);
            l += pj;
            for (int64_t x = 0; x < c.d; ++x) {
              const double vv = from_bits(v.data[bb * v.st.batch + hk * v.st.head + j * v.st.row + x], c.dtype);
              if (pj != 0 || std::isfinite(vv)) acc[x] += pj * vv;
              else acc[x] = NAN;
            }
          }
        }
        const bool empty = !(n > 0 && m > -INFINITY);
        const double lse_ref = empty ? -INFINITY : m + std::log(l);
        const float lse_got = lse[(bb * c.hq + h) * c.sq + i];
        const int64_t orow = bb * o.st.batch + h * o.st.head + i * o.st.row;
        for (int64_t x = 0; x < c.d + c.row_pad; ++x) {
          const float got = from_bits(out[orow + x], c.dtype);
          if (x >= c.d) {  // padding after the row must be untouched
            if (out[orow + x] != to_bits(-777.0f, c.dtype) && (c.bshd || x < c.d + c.row_pad)) {
              r.ok = false;
              r.why = "wrote padding column";
            }
            continue;
          }
          const double ref = empty ? 0.0 : (nan_row ? NAN : acc[x] / l);
          if (std::isnan(ref) || std::isinf(ref)) {
            if (!std::isnan(got) && !(std::isinf(ref) && got == ref)) {
              r.ok = false;
              r.why = "expected non-finite at b" + std::to_string(bb) + " h" + std::to_string(h) + " i" +
                      std::to_string(i) + " x" + std::to_string(x) + " got " + std::to_string(got);
            }
            continue;
          }
          if (!std::isfinite(got)) {
            r.ok = false;
            r.why = "non-finite O at b" + std::to_string(bb) + " h" + std::to_string(h) + " i" + std::to_string(i) +
                    " x" + std::to_string(x) + " ref " + std::to_string(ref) + " got " + std::to_string(got);
            continue;
          }
          if (empty && got != 0.0f) {
            r.ok = false;
            r.why = "empty row not zero";
          }
          const double e = std::fabs(got - ref);
          err2 += e * e;
          ref2 += ref * ref;
          max_err = std::max(max_err, e);
          max_ref = std::max(max_ref, std::fabs(ref));
        }
        if (std::isnan(lse_ref)) {
          if (!std::isnan(lse_got)) {
            r.ok = false;
            r.why = "lse not NaN";
          }
        } else if (std::isinf(lse_ref)) {
          if (lse_got != lse_ref) {
            r.ok = false;
            r.why = "lse expected -inf at i" + std::to_string(i) + " got " + std::to_string(lse_got);
          }
        } else {
          const double e = std::fabs(lse_got - lse_ref) / (1.0 + std::fabs(lse_ref));
          if (!(e <= 1e-3)) {
            r.ok = false;
            r.why = "lse err " + std::to_string(e) + " at i" + std::to_string(i);
          }
          r.lse_err = std::max(r.lse_err, e);
        }
      }
  r.rel_rms = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  r.max_rel = max_ref > 0 ? max_err / max_ref : max_err;
  const double tol_rms = c.dtype == DType::kBF16 ? 8e-3 : 1.2e-3;
  const double tol_max = c.dtype == DType::kBF16 ? 4e-2 : 6e-3;
  if (r.ok && (r.rel_rms > tol_rms || r.max_rel > tol_max)) {
    r.ok = false;
    r.why = "error above tolerance";
  }
  return r;
}

const char* mask_name(Mask m) { return m == Mask::kNone ? "none" : m == Mask::kCausalTopLeft ? "tl" : "br"; }

int correctness() {
  std::vector<Case> cases;
  const DType dts[] = {DType::kBF16, DType::kF16};
  const Mask masks[] = {Mask::kNone, Mask::kCausalTopLeft, Mask::kCausalBottomRight};
  for (DType dt : dts) {
    for (int64_t d : {64, 128, 256, 96, 32, 192})
      for (Mask m : masks)
        for (auto [sq, sk] : {std::pair<int64_t, int64_t>{128, 128}, {257, 257}, {1, 300}, {300, 1}, {129, 65},
                              {65, 200}, {200, 77}}) {
          Case c;
          c.dtype = dt;
          c.d = d;
          c.mask = m;
          c.sq = sq;
          c.sk = sk;
          c.b = 2;
          c.hq = 2;
          c.hkv = 1;
          cases.push_back(c);
        }
    // Padded head dims, BSHD with row padding, GQA, negative scale, large amplitude.
    for (int64_t d : {1, 8, 17, 40, 63, 72, 80, 100, 112, 130, 160, 200, 255}) {
      Case c;
      c.dtype = dt;
      c.d = d;
      c.sq = 97;
      c.sk = 131;
      c.mask = Mask::kCausalBottomRight;
      c.hq = 3;
      c.hkv = 3;
      c.row_pad = (8 - d % 8) % 8;  // strides in whole 16-byte chunks, as the family requires
      cases.push_back(c);
    }
    for (Mask m : masks) {
      Case c;
      c.dtype = dt;
      c.d = 128;
      c.sq = 190;
      c.sk = 333;
      c.mask = m;
      c.bshd = true;
      c.row_pad = 8;
      c.hq = 6;
      c.hkv = 2;
      c.b = 2;
      cases.push_back(c);
      c.d = 64;
      c.scale_mult = -1.0f;
      c.bshd = false;
      cases.push_back(c);
      c.d = 256;
      c.amp = 4.0;
      c.scale_mult = 2.0f;
      cases.push_back(c);
    }
    // seqlen_k == 0: every row O = 0, LSE = -inf, null Q/K/V.
    {
      Case c;
      c.dtype = dt;
      c.d = 128;
      c.sq = 70;
      c.sk = 0;
      cases.push_back(c);
    }
    // Non-finite values at keys hidden from early rows of diagonal tiles.
    for (int inj : {1, 2, 3})
      for (Mask m : {Mask::kCausalTopLeft, Mask::kCausalBottomRight})
        for (int64_t d : {64, 128, 256}) {
          Case c;
          c.dtype = dt;
          c.d = d;
          c.sq = 150;
          c.sk = 170;
          c.mask = m;
          c.inject = inj;
          cases.push_back(c);
        }
  }
  int failures = 0;
  uint64_t seed = 1;
  for (const Case& c : cases) {
    const Result r = run_case(c, seed++);
    const bool show = !r.ok;
    if (show || c.inject || c.sk == 0)
      std::printf("%s %s d=%ld b=%ld hq=%ld hkv=%ld sq=%ld sk=%ld mask=%s bshd=%d pad=%ld sm=%g inj=%d: rel_rms=%.2e max_rel=%.2e lse=%.1e %s\n",
                  r.ok ? "ok  " : "FAIL", c.dtype == DType::kBF16 ? "bf16" : "f16", c.d, c.b, c.hq, c.hkv, c.sq, c.sk,
                  mask_name(c.mask), c.bshd, c.row_pad, c.scale_mult, c.inject, r.rel_rms, r.max_rel, r.lse_err,
                  r.why.c_str());
    failures += !r.ok;
  }
  // Summary of error per dtype.
  std::printf("correctness: %zu cases, %d failures\n", cases.size(), failures);
  return failures;
}

// K/V batch stride past 2^31 elements: batch 1 lives beyond the 32-bit offset range.
int offsets64() {
  const int64_t sk = 256, d = 128, sq = 128;
  const int64_t big = (int64_t{1} << 31) + 64;
  Params p;
  p.dtype = DType::kBF16;
  p.batch = 2;
  p.heads_q = 1;
  p.heads_kv = 1;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.head_dim = d;
  p.softmax_scale = 1.0f / std::sqrt(128.0f);
  p.q_stride = {sq * d, sq * d, d};
  p.o_stride = p.q_stride;
  p.k_stride = {big, sk * d, d};
  p.v_stride = p.k_stride;
  const size_t kv_elems = static_cast<size_t>(big + sk * d);
  std::vector<uint16_t> hq(2 * sq * d), hk(2 * sk * d), hv(2 * sk * d);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd;
  for (auto& x : hq) x = to_bits(nd(rng), p.dtype);
  for (auto& x : hk) x = to_bits(nd(rng), p.dtype);
  for (auto& x : hv) x = to_bits(nd(rng), p.dtype);
  void *dq, *dk, *dv, *dout;
  float* dlse;
  CHECK_CUDA(cudaMalloc(&dq, hq.size() * 2));
  CHECK_CUDA(cudaMalloc(&dk, kv_elems * 2));
  CHECK_CUDA(cudaMalloc(&dv, kv_elems * 2));
  CHECK_CUDA(cudaMalloc(&dout, hq.size() * 2));
  CHECK_CUDA(cudaMalloc(&dlse, 2 * sq * 4));
  CHECK_CUDA(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
  for (int bb = 0; bb < 2; ++bb) {
    CHECK_CUDA(cudaMemcpy(static_cast<uint16_t*>(dk) + bb * big, hk.data() + bb * sk * d, sk * d * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(static_cast<uint16_t*>(dv) + bb * big, hv.data() + bb * sk * d, sk * d * 2, cudaMemcpyHostToDevice));
  }
  p.q = dq;
  p.k = dk;
  p.v = dv;
  p.o = dout;
  p.lse = dlse;
  KernelConfig cfg;
  if (!detail::tensor_core_select(p, &cfg)) return 1;
  if (!detail::tensor_core_launch(p, cfg, nullptr, nullptr).ok()) return 1;
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> out(hq.size());
  CHECK_CUDA(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost));
  double max_err = 0;
  for (int bb = 0; bb < 2; ++bb)
    for (int64_t i = 0; i < sq; ++i) {
      std::vector<double> s(sk), acc(d, 0.0);
      double m = -INFINITY, l = 0;
      for (int64_t j = 0; j < sk; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x)
          dot += double(from_bits(hq[(bb * sq + i) * d + x], p.dtype)) * from_bits(hk[(bb * sk + j) * d + x], p.dtype);
        s[j] = dot * p.softmax_scale;
        m = std::max(m, s[j]);
      }
      for (int64_t j = 0; j < sk; ++j) {
        const double e = std::exp(s[j] - m);
        l += e;
        for (int64_t x = 0; x < d; ++x) acc[x] += e * from_bits(hv[(bb * sk + j) * d + x], p.dtype);
      }
      for (int64_t x = 0; x < d; ++x)
        max_err = std::max(max_err, std::fabs(acc[x] / l - from_bits(out[(bb * sq + i) * d + x], p.dtype)));
    }
  for (void* ptr : {dq, dk, dv, dout}) cudaFree(ptr);
  cudaFree(dlse);
  std::printf("offsets64: max abs err %.3e %s\n", max_err, max_err < 2e-2 ? "ok" : "FAIL");
  return max_err < 2e-2 ? 0 : 1;
}

using Launcher = Status (*)(const detail::tc_kernel::KernelArgs&, cudaStream_t);

// Median time of one grid point; launcher == nullptr times the production dispatch.
double time_point(DType dt, int d, int64_t n, bool causal, int reps, Launcher launcher, int block_m) {
  const int64_t b = 16384 / n, h = 2048 / d;
  Params p;
  p.dtype = dt;
  p.mask = causal ? Mask::kCausalBottomRight : Mask::kNone;
  p.batch = b;
  p.heads_q = h;
  p.heads_kv = h;
  p.seqlen_q = n;
  p.seqlen_k = n;
  p.head_dim = d;
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(d));
  p.q_stride = {h * n * d, n * d, d};
  p.k_stride = p.q_stride;
  p.v_stride = p.q_stride;
  p.o_stride = p.q_stride;
  const size_t elems = static_cast<size_t>(b * h * n * d);
  std::vector<uint16_t> host(elems);
  std::mt19937_64 rng(n * 31 + d);
  std::normal_distribution<float> nd;
  for (auto& x : host) x = to_bits(nd(rng), dt);
  void *dq = to_device(host), *dk = to_device(host), *dv = to_device(host), *dout;
  float* dlse;
  CHECK_CUDA(cudaMalloc(&dout, elems * 2));
  CHECK_CUDA(cudaMalloc(&dlse, b * h * n * 4));
  p.q = dq;
  p.k = dk;
  p.v = dv;
  p.o = dout;
  p.lse = dlse;
  KernelConfig cfg;
  if (!detail::tensor_core_select(p, &cfg)) std::exit(3);
  const auto args = detail::tc_kernel::make_kernel_args(p, launcher ? block_m : cfg.block_m, nullptr);
  const auto launch = [&] {
    const Status st = launcher ? launcher(args, nullptr) : detail::tensor_core_launch(p, cfg, nullptr, nullptr);
    if (!st.ok()) {
      std::printf("launch failed: %s\n", st.message().c_str());
      std::exit(4);
    }
  };
  for (int w = 0; w < 3; ++w) launch();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0);
    launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t);
  }
  CHECK_CUDA(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  for (void* ptr : {dq, dk, dv, dout}) cudaFree(ptr);
  cudaFree(dlse);
  const double med = ms[ms.size() / 2];
  const double flops = 4.0 * b * h * double(n) * n * d / (causal ? 2.0 : 1.0);
  return flops / (med * 1e-3) / 1e12;
}

template <int D, int BM, int BN, int W, int S>
Status launch_variant(const detail::tc_kernel::KernelArgs& args, cudaStream_t stream) {
  using Cfg = tensor_core::TileConfig<D, BM, BN, W, S>;
  return detail::tc_kernel::launch_with<__nv_bfloat16, Cfg>(args, stream);
}

struct Variant {
  int d, bm, bn, warps, stages;
  Launcher launch;
};

void variants() {
#define FC_VARIANT(D, BM, BN, W, S) Variant{D, BM, BN, W, S, launch_variant<D, BM, BN, W, S>}
  const Variant list[] = {
      FC_VARIANT(64, 128, 128, 4, 2),
  };
#undef FC_VARIANT
  std::printf("\nvariants (bf16, TFLOP/s): d BMxBN warps stages | N=2048 nc, N=8192 nc, N=2048 c, N=8192 c\n");
  for (const Variant& v : list) {
    std::printf("d=%3d %3dx%-3d w%d s%d |", v.d, v.bm, v.bn, v.warps, v.stages);
    for (int causal = 0; causal < 2; ++causal)
      for (int64_t n : {2048, 8192}) std::printf(" %7.1f", time_point(DType::kBF16, v.d, n, causal, 10, v.launch, v.bm));
    std::printf("\n");
  }
}

void timing(const std::vector<int>& dims, const std::vector<int64_t>& ns, int reps) {
  std::printf("\n%-5s %4s %6s %6s %9s\n", "dtype", "d", "N", "causal", "TFLOP/s");
  for (DType dt : {DType::kBF16, DType::kF16})
    for (int d : dims)
      for (int causal = 0; causal < 2; ++causal)
        for (int64_t n : ns) {
          std::printf("%-5s %4d %6ld %6d %9.1f\n", dt == DType::kBF16 ? "bf16" : "f16", d, n, causal,
                      time_point(dt, d, n, causal, reps, nullptr, 0));
        }
}


// Instrumented build only: row_m/row_l against the float64 reference, traces ending at the final (m, l),
// tile-kind and rescale-bucket totals.
int instrumentation_check() {
  int failures = 0;
  for (Mask mask : {Mask::kNone, Mask::kCausalTopLeft, Mask::kCausalBottomRight}) {
    const int64_t b = 2, hq = 2, sq = 200, sk = 300, d = 128;
    Params p;
    p.dtype = DType::kBF16;
    p.mask = mask;
    p.batch = b;
    p.heads_q = hq;
    p.heads_kv = 1;
    p.seqlen_q = sq;
    p.seqlen_k = sk;
    p.head_dim = d;
    p.softmax_scale = 1.0f / std::sqrt(128.0f);
    p.q_stride = {hq * sq * d, sq * d, d};
    p.k_stride = {sk * d, sk * d, d};
    p.v_stride = p.k_stride;
    p.o_stride = p.q_stride;
    std::mt19937_64 rng(11);
    std::normal_distribution<float> nd;
    std::vector<uint16_t> hq_(b * hq * sq * d), hk(b * sk * d), hv(b * sk * d);
    for (auto& x : hq_) x = to_bits(nd(rng), p.dtype);
    for (auto& x : hk) x = to_bits(nd(rng), p.dtype);
    for (auto& x : hv) x = to_bits(nd(rng), p.dtype);
    void *dq = to_device(hq_), *dk = to_device(hk), *dv = to_device(hv), *dout = to_device(hq_);
    const int64_t rows = b * hq * sq;
    float *dlse, *dm, *dl, *dtm, *dtl;
    int64_t* dtr;
    uint64_t *dkinds, *dbuckets;
    const int max_tiles = 16;
    const std::vector<int64_t> traced = {0, 77, rows - 1};
    CHECK_CUDA(cudaMalloc(&dlse, rows * 4));
    CHECK_CUDA(cudaMalloc(&dm, rows * 4));
    CHECK_CUDA(cudaMalloc(&dl, rows * 4));
    CHECK_CUDA(cudaMalloc(&dtm, traced.size() * max_tiles * 4));
    CHECK_CUDA(cudaMalloc(&dtl, traced.size() * max_tiles * 4));
    CHECK_CUDA(cudaMemset(dtm, 0xFF, traced.size() * max_tiles * 4));
    CHECK_CUDA(cudaMemset(dtl, 0xFF, traced.size() * max_tiles * 4));
    CHECK_CUDA(cudaMalloc(&dtr, traced.size() * 8));
    CHECK_CUDA(cudaMemcpy(dtr, traced.data(), traced.size() * 8, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMalloc(&dkinds, kTileKindCount * 8));
    CHECK_CUDA(cudaMalloc(&dbuckets, kRescaleBuckets * 8));
    CHECK_CUDA(cudaMemset(dkinds, 0, kTileKindCount * 8));
    CHECK_CUDA(cudaMemset(dbuckets, 0, kRescaleBuckets * 8));
    p.q = dq;
    p.k = dk;
    p.v = dv;
    p.o = dout;
    p.lse = dlse;
    Instrumentation inst;
    inst.row_m = dm;
    inst.row_l = dl;
    inst.trace_rows = dtr;
    inst.trace_row_count = static_cast<int32_t>(traced.size());
    inst.max_tiles = max_tiles;
    inst.trace_m = dtm;
    inst.trace_l = dtl;
    inst.tile_kind_counts = dkinds;
    inst.rescale_buckets = dbuckets;
    KernelConfig cfg;
    if (!detail::tensor_core_select(p, &cfg) || !detail::tensor_core_launch(p, cfg, nullptr, &inst).ok()) return 1;
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> m(rows), l(rows), tm(traced.size() * max_tiles), tl(traced.size() * max_tiles);
    std::vector<uint64_t> kinds(kTileKindCount), buckets(kRescaleBuckets);
    CHECK_CUDA(cudaMemcpy(m.data(), dm, rows * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(l.data(), dl, rows * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(tm.data(), dtm, tm.size() * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(tl.data(), dtl, tl.size() * 4, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(kinds.data(), dkinds, kinds.size() * 8, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(buckets.data(), dbuckets, buckets.size() * 8, cudaMemcpyDeviceToHost));
    double worst_m = 0, worst_l = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t bb = r / (hq * sq), h = (r / sq) % hq, i = r % sq;
      const int64_t n = visible(mask, i, sq, sk);
      std::vector<double> sc(n);
      double mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x)
          dot += double(from_bits(hq_[((bb * hq + h) * sq + i) * d + x], p.dtype)) * from_bits(hk[(bb * sk + j) * d + x], p.dtype);
        sc[j] = dot * p.softmax_scale;
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(sc[j] - mx);
      if (n == 0) {
        if (!(m[r] == -INFINITY && l[r] == 0.0f)) ++failures;
        continue;
      }
      worst_m = std::max(worst_m, std::fabs(m[r] - mx) / (1 + std::fabs(mx)));
      worst_l = std::max(worst_l, std::fabs(l[r] - sum) / sum);
    }
    uint64_t bucket_total = 0, kind_total = 0;
    for (uint64_t x : buckets) bucket_total += x;
    for (uint64_t x : kinds) kind_total += x;
    const int64_t q_tiles = (sq + cfg.block_m - 1) / cfg.block_m, k_tiles = (sk + cfg.block_n - 1) / cfg.block_n;
    bool trace_ok = true;
    for (size_t t = 0; t < traced.size(); ++t) {  // the last written slot holds the final (m, l)
      int last = -1;
      for (int s = 0; s < max_tiles; ++s)
        if (!std::isnan(tl[t * max_tiles + s])) last = s;
      if (last >= 0 && (tm[t * max_tiles + last] != m[traced[t]] || tl[t * max_tiles + last] != l[traced[t]])) trace_ok = false;
    }
    const bool ok = worst_m < 1e-5 && worst_l < 1e-4 && bucket_total == uint64_t(rows) &&
                    kind_total == uint64_t(b * hq * q_tiles * k_tiles) && trace_ok;
    std::printf("instrumentation mask=%s: m err %.1e, l err %.1e, buckets %lu/%ld, kinds full %lu tail %lu diag %lu skip %lu (total %lu/%ld), traces %s: %s\n",
                mask_name(mask), worst_m, worst_l, (unsigned long)bucket_total, rows, (unsigned long)kinds[0],
                (unsigned long)kinds[1], (unsigned long)kinds[2], (unsigned long)kinds[3], (unsigned long)kind_total,
                b * hq * q_tiles * k_tiles, trace_ok ? "ok" : "BAD", ok ? "ok" : "FAIL");
    failures += !ok;
    for (void* ptr : {dq, dk, dv, dout}) cudaFree(ptr);
    for (void* ptr : std::initializer_list<void*>{dlse, dm, dl, dtm, dtl, dtr, dkinds, dbuckets}) cudaFree(ptr);
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  int failures = 0;
  if (mode == "all" || mode == "check") {
    failures += correctness();
    failures += offsets64();
  }
  if (mode == "all" || mode == "time") {
    timing({64, 128, 256}, {512, 1024, 2048, 4096, 8192, 16384}, 20);
  }
  if (mode == "variants") variants();
  if (mode == "inst") failures += instrumentation_check();
  std::printf("failures: %d\n", failures);
  return failures == 0 ? 0 : 1;
}
