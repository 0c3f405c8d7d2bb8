// Test fixtures for the kernel folder: host buffers for one attention problem with deterministic inputs
// (splitmix64 hash of the element index, no std:: distributions), a naive double-precision reference
// (four passes: max, exp-sum, normalise, weighted V), the sanity tolerances of these tests, and the zero-padded
// equal-head-dims twin of a problem whose V and O have other columns than Q and K. The real error model lives in
// oracle/; these tolerances only need to separate fp32-accurate results from bugs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <tuple>

#include "tensor_core/tile_config.h"
#include <utility>

#include "flashcheck/attention.h"
#include "host_numeric.h"

namespace flashcheck {
// gtest prints parameters through PrintTo (found by argument-dependent lookup).
inline void PrintTo(DType dtype, std::ostream* os) { *os << to_string(dtype); }
}  // namespace flashcheck

namespace flashcheck::test {

inline constexpr double kEpsF32 = 0x1p-24;  // unit roundoff of fp32

// The (dtype, head_dim) grid of the model and GPU shape suites: every dtype against the head_dim families,
// odd and non-family sizes; test names like F16_Hdim40 so --gtest_filter can pick a configuration.
inline auto dtype_head_dim_grid() {
  return ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                            ::testing::Values(int64_t{1}, int64_t{8}, int64_t{40}, int64_t{64}, int64_t{96},
                                              int64_t{128}, int64_t{200}, int64_t{256}));
}
inline std::string dtype_head_dim_name(const ::testing::TestParamInfo<std::tuple<DType, int64_t>>& info) {
  const DType dtype = std::get<0>(info.param);
  const std::string d = dtype == DType::kF32 ? "F32" : dtype == DType::kF16 ? "F16" : "Bf16";
  return d + "_Hdim" + std::to_string(std::get<1>(info.param));
}

// Uniform double in [-1, 1) from a 64-bit hash of (seed, index): splitmix64's finaliser.
inline double hash_uniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + index + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  constexpr double kTwoPow53 = 9007199254740992.0;
  return static_cast<double>(z >> 11) / kTwoPow53 * 2.0 - 1.0;
}

// Host storage for one problem. Tensors are allocated with their strides (row padding allowed); params
// point into the vectors, so a Problem must not be copied after make().
struct Problem {
  Params params;
  std::vector<unsigned char> q, k, v, o;
  std::vector<float> lse;

  int64_t element_bytes() const { return dtype_size(params.dtype); }

  // Logical element (b, h, s, d) of a tensor, decoded to float.
  static float get(const Params& p, const std::vector<unsigned char>& t, const Strides& st, int64_t b, int64_t h,
                   int64_t s, int64_t d) {
    const int64_t off = b * st.batch + h * st.head + s * st.row + d;
    if (p.dtype == DType::kF32) {
      float x;
      std::memcpy(&x, t.data() + off * 4, 4);
      return x;
    }
    uint16_t bits;
    std::memcpy(&bits, t.data() + off * 2, 2);
    return p.dtype == DType::kF16 ? detail::host::f16_bits_to_float(bits) : detail::host::bf16_bits_to_float(bits);
  }
  static void set(const Params& p, std::vector<unsigned char>& t, const Strides& st, int64_t b, int64_t h,
                  int64_t s, int64_t d, float x) {
    const int64_t off = b * st.batch + h * st.head + s * st.row + d;
    if (p.dtype == DType::kF32) {
      std::memcpy(t.data() + off * 4, &x, 4);
      return;
    }
    const uint16_t bits = p.dtype == DType::kF16 ? detail::host::float_to_f16_bits(x) : detail::host::float_to_bf16_bits(x);
    std::memcpy(t.data() + off * 2, &bits, 2);
  }
  float q_at(int64_t b, int64_t h, int64_t s, int64_t d) const { return get(params, q, params.q_stride, b, h, s, d); }
  float k_at(int64_t b, int64_t h, int64_t s, int64_t d) const { return get(params, k, params.k_stride, b, h, s, d); }
  float v_at(int64_t b, int64_t h, int64_t s, int64_t d) const { return get(params, v, params.v_stride, b, h, s, d); }
  float o_at(int64_t b, int64_t h, int64_t s, int64_t d) const { return get(params, o, params.o_stride, b, h, s, d); }
  float lse_at(int64_t b, int64_t h, int64_t s) const { return lse[(b * params.heads_q + h) * params.seqlen_q + s]; }
};

// Bytes a strided tensor of `columns` columns spans.
inline int64_t span_bytes(const Params& p, const Strides& st, int64_t heads, int64_t seqlen, int64_t columns) {
  if (p.batch == 0 || heads == 0 || seqlen == 0) return 0;
  const int64_t last = (p.batch - 1) * st.batch + (heads - 1) * st.head + (seqlen - 1) * st.row + columns - 1;
  return (last + 1) * dtype_size(p.dtype);
}

struct ProblemSpec {
  DType dtype = DType::kF32;
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1, head_dim = 1;
  Mask mask = Mask::kNone;
  Layout layout = Layout::kBHSD;
  int64_t row_pad = 0;  // extra elements per row (non-contiguous rows, not 16-byte aligned when odd)
  uint64_t seed = 1;
  int64_t head_dim_v = 0;  // V's and O's columns; 0: head_dim

  std::string name() const {
    return std::string(to_string(dtype)) + " b" + std::to_string(batch) + " hq" + std::to_string(heads_q) + " hkv" +
           std::to_string(heads_kv) + " sq" + std::to_string(seqlen_q) + " sk" + std::to_string(seqlen_k) + " d" +
           std::to_string(head_dim) + (head_dim_v != 0 ? " dv" + std::to_string(head_dim_v) : "") + " " +
           to_string(mask) + (layout == Layout::kBSHD ? " bshd" : " bhsd") + " pad" + std::to_string(row_pad);
  }
};

// Strides of `layout` with each row widened by `row_pad` elements.
inline Strides padded_strides(Layout layout, int64_t heads, int64_t seqlen, int64_t head_dim, int64_t row_pad) {
  const int64_t row = head_dim + row_pad;
  if (layout == Layout::kBSHD) return {seqlen * heads * row, row, heads * row};
  return {heads * seqlen * row, seqlen * row, row};
}

// Inputs uniform in [-1, 1) rounded to the dtype (each tensor hashed with its own seed stream); O and LSE
// filled with NaN so unwritten elements show. Element (b, h, s, d) of K and V shares one hash index.
inline void make_problem(const ProblemSpec& spec, Problem* pr) {
  Params& p = pr->params;
  p = make_params(spec.dtype, spec.batch, spec.heads_q, spec.heads_kv, spec.seqlen_q, spec.seqlen_k, spec.head_dim,
                  spec.mask, spec.layout);
  p.head_dim_v = spec.head_dim_v;
  const int64_t dim_v = value_head_dim(p);
  p.q_stride = padded_strides(spec.layout, spec.heads_q, spec.seqlen_q, spec.head_dim, spec.row_pad);
  p.o_stride = padded_strides(spec.layout, spec.heads_q, spec.seqlen_q, dim_v, spec.row_pad);
  p.k_stride = padded_strides(spec.layout, spec.heads_kv, spec.seqlen_k, spec.head_dim, spec.row_pad);
  p.v_stride = padded_strides(spec.layout, spec.heads_kv, spec.seqlen_k, dim_v, spec.row_pad);
  pr->q.assign(static_cast<size_t>(span_bytes(p, p.q_stride, spec.heads_q, spec.seqlen_q, spec.head_dim)), 0);
  // 0xffff / 0xffffffff: NaN in every dtype
  pr->o.assign(static_cast<size_t>(span_bytes(p, p.o_stride, spec.heads_q, spec.seqlen_q, dim_v)), 0xff);
  pr->k.assign(static_cast<size_t>(span_bytes(p, p.k_stride, spec.heads_kv, spec.seqlen_k, spec.head_dim)), 0);
  pr->v.assign(static_cast<size_t>(span_bytes(p, p.v_stride, spec.heads_kv, spec.seqlen_k, dim_v)), 0);
  pr->lse.assign(static_cast<size_t>(spec.batch * spec.heads_q * spec.seqlen_q), std::nanf(""));
  uint64_t index = 0;
  for (int64_t b = 0; b < spec.batch; ++b) {
    for (int64_t h = 0; h < spec.heads_q; ++h) {
      for (int64_t s = 0; s < spec.seqlen_q; ++s) {
        for (int64_t d = 0; d < spec.head_dim; ++d) {
          Problem::set(p, pr->q, p.q_stride, b, h, s, d, static_cast<float>(hash_uniform(spec.seed * 3, index++)));
        }
      }
    }
    for (int64_t h = 0; h < spec.heads_kv; ++h) {
      for (int64_t s = 0; s < spec.seqlen_k; ++s) {
        for (int64_t d = 0; d < std::max(spec.head_dim, dim_v); ++d) {
          if (d < spec.head_dim) {
            Problem::set(p, pr->k, p.k_stride, b, h, s, d, static_cast<float>(hash_uniform(spec.seed * 3 + 1, index)));
          }
          if (d < dim_v) {
            Problem::set(p, pr->v, p.v_stride, b, h, s, d, static_cast<float>(hash_uniform(spec.seed * 3 + 2, index)));
          }
          ++index;
        }
      }
    }
  }
  p.q = pr->q.empty() ? nullptr : pr->q.data();
  p.k = pr->k.empty() ? nullptr : pr->k.data();
  p.v = pr->v.empty() ? nullptr : pr->v.data();
  p.o = pr->o.empty() ? nullptr : pr->o.data();
  p.lse = pr->lse.empty() ? nullptr : pr->lse.data();
}

// (head_dim, head_dim_v) pairs with V and O of other columns than Q and K: DeepSeek's MLA split (192, 128), V wider
// (64, 128), V narrower (128, 64) and (256, 128) (fp16/bf16: the tensor-core family's value pairs), and odd sizes
// inside one head_dim family (3, 5: the general family).
inline const std::vector<std::pair<int64_t, int64_t>> kUnequalHeadDims{
    {192, 128}, {64, 128}, {128, 64}, {256, 128}, {3, 5}};

// Whether select_config serves unequal head dims (d, dv) of `dtype` with contiguous rows in the tensor-core family
// (a value pair of tile_config.h, sm_90a; rows 16-byte aligned: both dims multiples of 8), not in the general family.
inline bool tensor_core_pair(DType dtype, int64_t d, int64_t dv) {
#if defined(FLASHCHECK_TC_WGMMA)
  const int family = tensor_core::family_head_dim(d), family_v = tensor_core::family_head_dim(dv);
  return dtype != DType::kF32 && d != dv && d % 8 == 0 && dv % 8 == 0 && family != family_v &&
         tensor_core::is_value_pair(family, family_v);
#else
  (void)dtype, (void)d, (void)dv;
  return false;
#endif
}
// `zero` (head_dim_v 0) into *a and the same problem with head_dim_v = head_dim spelled out into *b, both split into
// `splits` runs; the spelled problem's name.
inline std::string make_spelled_pair(const ProblemSpec& zero, int32_t splits, Problem* a, Problem* b) {
  ProblemSpec spelled = zero;
  spelled.head_dim_v = zero.head_dim;
  make_problem(zero, a);
  make_problem(spelled, b);
  a->params.num_splits = b->params.num_splits = splits;
  return spelled.name() + " splits " + std::to_string(splits);
}

// The configuration select_config picks for (head_dim, head_dim_v) of `dtype` (a one-row shape: the tiles do not
// depend on the sequence lengths of the general family).
inline KernelConfig unequal_config(DType dtype, int64_t head_dim, int64_t head_dim_v) {
  Params shape = make_params(dtype, 1, 1, 1, 1, 1, head_dim);
  set_head_dim_v(&shape, head_dim_v, Layout::kBHSD);
  return select_config(shape);
}

// The equal-head-dims twin of `pr` (made from `spec`): head_dim = head_dim_v = the larger of the two, Q and K zero
// past spec.head_dim, V zero past spec.head_dim_v, the same scale and split count. Zero columns add exact zeros to
// every dot product and accumulator, so where both run with the same tiles the twin's O holds pr's O in its first
// head_dim_v columns and its LSE is pr's, bit for bit.
inline void make_zero_padded_twin(const ProblemSpec& spec, const Problem& pr, Problem* twin) {
  ProblemSpec twin_spec = spec;
  twin_spec.head_dim = std::max(spec.head_dim, value_head_dim(pr.params));
  twin_spec.head_dim_v = 0;
  make_problem(twin_spec, twin);
  Params& t = twin->params;
  t.softmax_scale = pr.params.softmax_scale;
  t.num_splits = pr.params.num_splits;
  const int64_t dim = pr.params.head_dim, dim_v = value_head_dim(pr.params);
  for (int64_t b = 0; b < spec.batch; ++b) {
    for (int64_t d = 0; d < twin_spec.head_dim; ++d) {
      for (int64_t h = 0; h < spec.heads_q; ++h) {
        for (int64_t s = 0; s < spec.seqlen_q; ++s) {
          Problem::set(t, twin->q, t.q_stride, b, h, s, d, d < dim ? pr.q_at(b, h, s, d) : 0.0f);
        }
      }
      for (int64_t h = 0; h < spec.heads_kv; ++h) {
        for (int64_t s = 0; s < spec.seqlen_k; ++s) {
          Problem::set(t, twin->k, t.k_stride, b, h, s, d, d < dim ? pr.k_at(b, h, s, d) : 0.0f);
          Problem::set(t, twin->v, t.v_stride, b, h, s, d, d < dim_v ? pr.v_at(b, h, s, d) : 0.0f);
        }
      }
    }
  }
}

// Where `x`'s O (its head_dim_v columns) and LSE differ in any bit from the first columns of `twin`'s: the first
// such element, or "" where none does.
inline std::string first_bit_difference(const Problem& x, const Problem& twin) {
  const Params& p = x.params;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const float lx = x.lse_at(b, h, i), lt = twin.lse_at(b, h, i);
        if (std::memcmp(&lx, &lt, sizeof(float)) != 0) {
          return "LSE(" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + ") " +
                 std::to_string(lx) + " vs " + std::to_string(lt);
        }
        for (int64_t d = 0; d < value_head_dim(p); ++d) {
          const float ox = x.o_at(b, h, i, d), ot = twin.o_at(b, h, i, d);
          if (std::memcmp(&ox, &ot, sizeof(float)) != 0) {
            return "O(" + std::to_string(b) + "," + std::to_string(h) + "," + std::to_string(i) + "," +
                   std::to_string(d) + ") " + std::to_string(ox) + " vs " + std::to_string(ot);
          }
        }
      }
    }
  }
  return "";
}

// Exact-ish result of one row in double: O, LSE, and the scales the tolerances need.
struct ReferenceRow {
  std::vector<double> o;
  double lse = 0.0;
  int64_t keys = 0;      // visible keys
  double max_abs_v = 0;  // over visible keys
};

inline ReferenceRow reference_row(const Problem& pr, int64_t b, int64_t h, int64_t i) {
  const Params& p = pr.params;
  const int64_t h_kv = h / (p.heads_q / p.heads_kv);
  ReferenceRow ref;
  ref.keys = visible_key_range(p, i).end;
  ref.o.assign(static_cast<size_t>(value_head_dim(p)), 0.0);
  if (ref.keys == 0) {
    ref.lse = -std::numeric_limits<double>::infinity();
    return ref;
  }
  std::vector<double> s(static_cast<size_t>(ref.keys));
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < ref.keys; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < p.head_dim; ++d) dot += double{pr.q_at(b, h, i, d)} * double{pr.k_at(b, h_kv, j, d)};
    s[j] = double{p.softmax_scale} * dot;
    m = std::max(m, s[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < ref.keys; ++j) sum += std::exp(s[j] - m);
  for (int64_t j = 0; j < ref.keys; ++j) {
    const double w = std::exp(s[j] - m) / sum;
    for (int64_t d = 0; d < value_head_dim(p); ++d) {
      const double vd = pr.v_at(b, h_kv, j, d);
      ref.o[d] += w * vd;
      ref.max_abs_v = std::max(ref.max_abs_v, std::fabs(vd));
    }
  }
  ref.lse = m + std::log(sum);
  return ref;
}

// One unit in the last place of the dtype at magnitude |x| (subnormal spacing below the normal range).
inline double dtype_ulp(DType dtype, double x) {
  const int mantissa_bits = dtype == DType::kF32 ? 23 : dtype == DType::kF16 ? 10 : 7;
  const int min_exp = dtype == DType::kF16 ? -14 : -126;
  int e = 0;
  std::frexp(std::fabs(x), &e);
  return std::ldexp(1.0, std::max(e - 1, min_exp) - mantissa_bits);
}

// Sanity tolerance on |O - O*| for fp32 computation of a row (plus the final rounding to the dtype, and
// for P rounded to the dtype on the tensor-core path, one dtype rounding of each weight).
inline double o_tolerance(const Params& p, ComputePath path, const ReferenceRow& ref, double o_exact) {
  constexpr double kFp32Slack = 8.0;
  const double fp32 = kFp32Slack * kEpsF32 * static_cast<double>(p.head_dim + ref.keys + 8) * ref.max_abs_v;
  const double p_rounding = path == ComputePath::kTensorCore ? 2.0 * dtype_ulp(p.dtype, 1.0) * ref.max_abs_v : 0.0;
  return dtype_ulp(p.dtype, o_exact) + fp32 + p_rounding;
}

inline double lse_tolerance(const Params& p, const ReferenceRow& ref) {
  constexpr double kFp32Slack = 8.0;
  return kFp32Slack * kEpsF32 * (static_cast<double>(p.head_dim + ref.keys + 8) + std::fabs(ref.lse));
}

}  // namespace flashcheck::test
