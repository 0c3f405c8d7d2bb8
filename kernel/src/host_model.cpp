// Host model of the kernels' tiled forward pass (host_model.h): for each Q tile the same K/V tiles in the
// same order as the GPU, the same skipping of tiles no row sees (common/visibility.h), the same online-softmax
// rules (common/softmax.h) and epilogue (common/epilogue.h) in fp32 (float, never double; compiled with
// -ffp-contract=off, every FMA spelled out as std::fma where the kernel fuses) and the same rounding points per
// compute path (families.h). Scores run over Q's and K's head_dim columns, P V and O over V's value_head_dim
// columns, in the same order either way. Deliberate defects (ModelDefect) alter exactly one step each. Fills the
// Instrumentation from host pointers. Dropout as the general kernel applies it: m and l over every visible key, P V
// over the kept ones only, O = final_output(acc, fin) times s32 before the dtype's rounding; the mask dump from the
// same decision (host_dropout.h). The fp8 path (docs/design/fp8-forward.md) as its kernel is to compute it: scores
// and each K/V tile's P V as Hopper's fp8 wgmma adds them (14 kept bits, host_numeric.h), the descaled scale, P's
// exponent offset and e4m3 rounding, each tile's P V promoted into O's fp32 accumulator by one FMA, O = fl(fl(acc / l)
// descale_v) in bf16.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"
#include "flashcheck/instrument.h"
#include "common/args.h"
#include "common/epilogue.h"
#include "common/softmax.h"
#include "common/visibility.h"
#include "families.h"
#include "host_dropout.h"
#include "host_numeric.h"

namespace flashcheck {

namespace {
// kModelDefects is indexed by the enum's value.
constexpr bool defects_indexed() {
  for (size_t i = 0; i < std::size(kModelDefects); ++i) {
    if (static_cast<size_t>(kModelDefects[i].id) != i) return false;
  }
  return true;
}
static_assert(defects_indexed(), "kModelDefects[i].id must be i");
}  // namespace

const char* to_string(ModelDefect defect) {
  const auto i = static_cast<size_t>(defect);
  return i < std::size(kModelDefects) ? kModelDefects[i].name : "invalid-defect";
}

bool parse_model_defect(std::string_view name, ModelDefect* defect) {
  for (const ModelDefectInfo& d : kModelDefects) {
    if (name == d.name) {
      *defect = d.id;
      return true;
    }
  }
  return false;
}

namespace {

using detail::host::fp8_mma_step;
using detail::host::kFp8MmaK;
using detail::host::load_element;
using detail::host::round_to;
using detail::host::store_element;
using detail::host::round_to_e4m3;
using detail::host::round_to_tf32;
using detail::kLn2;
using detail::kNegInf;

Status invalid(const std::string& message) { return {StatusCode::kInvalidArgument, "host model: " + message}; }

// Formats P can be kept in, coarsest last: the ladder of ModelDefect::kPOneFormatCoarser.
enum class PFormat { kF32, kF16, kBF16, kE4M3 };

PFormat p_format(ComputePath path, DType dtype) {
  if (path == ComputePath::kTensorCoreFp8) return PFormat::kE4M3;
  if (path != ComputePath::kTensorCore) return PFormat::kF32;
  return dtype == DType::kBF16 ? PFormat::kBF16 : dtype == DType::kF16 ? PFormat::kF16 : PFormat::kF32;
}

PFormat one_coarser(PFormat format) {
  switch (format) {
    case PFormat::kF32: return PFormat::kF16;
    case PFormat::kF16: return PFormat::kBF16;
    case PFormat::kBF16:
    case PFormat::kE4M3: return PFormat::kE4M3;
  }
  return PFormat::kE4M3;
}

float round_p(PFormat format, float p) {
  switch (format) {
    case PFormat::kF32: return p;
    case PFormat::kF16: return round_to(DType::kF16, p);
    case PFormat::kBF16: return round_to(DType::kBF16, p);
    case PFormat::kE4M3: return round_to_e4m3(p);
  }
  return p;
}

// Rows [0, rows) of one head of a tensor, decoded to fp32: (rows, columns) row-major. For the split-TF32
// path also the hi and lo parts, x = hi + lo with hi = tf32(x), lo = tf32(x - hi).
// Values the split cannot carry: for a non-finite x, lo = x - tf32(x) is NaN, and near FLT_MAX tf32(x)
// rounds up to inf. The kernel sends any tile holding such a value ((2 - 2^-11) * 2^127 and up, inf, NaN)
// to an exact fp32 path (split_tf32/kernel.cuh); the model does the same product by product, keeping
// hi = x, lo = 0 for them. False for NaN.
inline constexpr float kSplitLimit = 0x1.ffep127f;
bool splittable(float x) { return std::fabs(x) < kSplitLimit; }

struct HeadRows {
  std::vector<float> value, hi, lo;
};

// Element type of the dtype's storage: rows are addressed as the kernels address them (RowSource), in elements.
// slot_mask: ModelDefect::kPageSlotMask's addressing of a paged row.
template <typename T>
void load_rows(const Params& p, const detail::RowSource<const T>& src, int64_t rows, int64_t d_count, bool slot_mask,
               std::vector<float>* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = src.row(r);
    if (slot_mask && src.pages != nullptr) {
      row = src.base + src.pages[r / src.page_size] * src.page_stride + (r & (src.page_size - 1)) * src.row_stride;
    }
    for (int64_t d = 0; d < d_count; ++d) (*out)[r * d_count + d] = load_element(p.dtype, row, d);
  }
}

// Rows [0, rows) of head h of sequence b of tensor `t` (Q: `query`, its packed or dense rows; K/V: contiguous or
// paged), the addressing of common/args.h; d_count columns (head_dim for Q and K, value_head_dim for V).
void load_head(const Params& p, const detail::ProblemArgs& a, const detail::TensorArg& t, bool query, int64_t b,
               int64_t h, int64_t rows, int64_t d_count, bool split, HeadRows* out,
               ModelDefect defect = ModelDefect::kNone) {
  out->value.resize(static_cast<size_t>(rows * d_count));
  const auto load = [&](auto element) {
    using T = decltype(element);
    detail::RowSource<const T> src;
    if (query) {
      src.base = a.template q_rows<const T>(t, b, h);
      src.row_stride = t.stride.row;
    } else {
      src = a.template kv_rows<const T>(t, b, h);
    }
    load_rows(p, src, rows, d_count, defect == ModelDefect::kPageSlotMask, &out->value);
    // ModelDefect::kValueWidthFromHeadDim: V's columns past Q's and K's head_dim read as the zero padding.
    if (defect == ModelDefect::kValueWidthFromHeadDim && &t == &a.v) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t d = p.head_dim; d < d_count; ++d) out->value[static_cast<size_t>(r * d_count + d)] = 0.0f;
    }
  };
  switch (dtype_size(p.dtype)) {
    case 4: load(float{}); break;
    case 2: load(uint16_t{}); break;
    default: load(uint8_t{}); break;
  }
  if (!split) return;
  out->hi.resize(out->value.size());
  out->lo.resize(out->value.size());
  for (size_t i = 0; i < out->value.size(); ++i) {
    const float x = out->value[i];
    out->hi[i] = splittable(x) ? round_to_tf32(x) : x;
    out->lo[i] = splittable(x) ? round_to_tf32(x - out->hi[i]) : 0.0f;
  }
}

// One split-TF32 product a*b as the kernel's three tf32 mma terms, small terms first, added to acc.
// An operand the split cannot carry (see splittable) multiplies as plain fp32, as the kernel's exact path does.
// drop_lo_hi: ModelDefect::kTf32MissingLoTerm.
float split_fma(float a_hi, float a_lo, float b_hi, float b_lo, float acc, bool drop_lo_hi = false) {
  if (!splittable(a_hi) || !splittable(b_hi)) return std::fma(a_hi + a_lo, b_hi + b_lo, acc);
  if (!drop_lo_hi) acc = std::fma(a_lo, b_hi, acc);
  acc = std::fma(a_hi, b_lo, acc);
  return std::fma(a_hi, b_hi, acc);
}

struct ModelSetup {
  const Params& params;
  KernelConfig config;
  ModelDefect defect;
  const Instrumentation& inst;
  float scale_log2;
  bool has_softcap;
  detail::Softcap softcap;  // when has_softcap
  PFormat p_format;  // format P has when it multiplies V (after the defect, if any)
  bool split;        // split-TF32 products
  bool tile_ref;     // tensor-core paths: p relative to the tile's own max where within kRefSlackLog2 (families.h)
  bool fp8;          // the fp8 path: fp8 wgmma steps, P V per tile promoted into acc
  float p_offset;    // log2 units added to every weight's exponent (kFp8POffsetLog2 on the fp8 path, else 0)
};

// exp2 as the family's kernel evaluates it, up to ex2.approx's own error: the tensor-core paths' softmax steps
// (tile_ref: the fp16/bf16 forward, decode and fp8) use ex2.approx.ftz, whose result below fp32's smallest normal is
// 0, so a weight or a rescale factor below 2^-126 is lost whole there (the bound's flush terms, docs/error-model.md);
// the general and split-TF32 kernels use exp2f, which keeps subnormals.
float family_exp2(bool ftz, float e) {
  const float y = std::exp2(e);
  return ftz && y < std::numeric_limits<float>::min() ? 0.0f : y;
}

// ModelDefect::kFp8LazyRescale: the reference stays put while a tile's max lies within this many log2 units above it.
inline constexpr float kFp8LazyRescaleLog2 = 8.0f;

// The fp8 path's scale of (batch b, kv head g): scale_log2 and softcap from the descaled scale (softmax.h). The
// descales are [batch, heads_kv] (null: 1); `index_head` is the head their index takes (g, but the query head for
// ModelDefect::kFp8DescaleQueryHead).
void set_fp8_scale(const Params& p, int64_t b, int64_t index_head, ModelSetup* setup) {
  const auto at = [&](const float* d) { return d != nullptr ? d[b * p.heads_kv + index_head % p.heads_kv] : 1.0f; };
  const float scale = detail::descaled_scale(p.softmax_scale, at(p.descale_q), at(p.descale_k));
  setup->scale_log2 = detail::fold_scale(scale);
  if (setup->has_softcap) setup->softcap = detail::make_softcap(scale, p.softcap);
}

// The row's dropout draws: (b, h, i) of the element (b, h, i, j), counted within the sequence.
struct RowDropout {
  const detail::host::ModelDropout* drop = nullptr;  // null or disabled: no dropout
  int64_t b = 0, h = 0, i = 0;
  bool keeps(int64_t j) const { return drop == nullptr || !drop->enabled || drop->keeps(b, h, i, j); }
};

struct RowResult {
  float m = kNegInf;    // log2 units: running max of s * scale * log2(e)
  float ref = kNegInf;  // log2 units: what p and l are relative to (m, or a tile's max on the tensor-core path)
  float l = 0.0f;
  int64_t moves = 0;
};

// The online softmax of one query row over K/V tiles [run_begin, run_end) of its Q tile's visited tiles (all of
// them unsplit). Tiles the row sees no key of leave the state untouched, as on the GPU (alpha = 1, p = 0 there).
RowResult run_row(const ModelSetup& setup, const HeadRows& q, int64_t q_row, const HeadRows& k, const HeadRows& v,
                  KeyRange keys, const detail::Visibility::TileRange& tiles, int64_t tile_keys_end, int64_t run_begin,
                  int64_t run_end, int trace_slot, std::vector<float>* acc, const RowDropout& dropout = {}) {
  const Params& p = setup.params;
  const int64_t d_count = p.head_dim;          // scores: Q's and K's columns
  const int64_t dv_count = value_head_dim(p);  // P V and O: V's columns
  const int64_t block_n = setup.config.block_n;
  // Q is loaded only when some key is visible; a row with none never reads it (and q may be null).
  const float* q_val = keys.size() > 0 ? q.value.data() + q_row * d_count : nullptr;
  RowResult row;
  // ModelDefect::kSoftcapAfterMask: every key of a visited tile enters, the masked ones with the cap of -inf (and a
  // zero V row past the keys loaded, as the kernels fill rows past seqlen_k).
  const bool cap_masked = setup.defect == ModelDefect::kSoftcapAfterMask && setup.has_softcap;
  const int64_t loaded_keys = d_count > 0 ? static_cast<int64_t>(k.value.size()) / d_count : 0;
  std::vector<float> x(static_cast<size_t>(cap_masked ? block_n : std::min(block_n, keys.size())));  // s, then p
  std::vector<float> tile_acc, p8, v8;  // the fp8 path's tile accumulator and the tile's P and V as its steps read them
  acc->assign(static_cast<size_t>(dv_count), 0.0f);

  for (int64_t kt = run_begin; kt < run_end; ++kt) {
    const int64_t tile_begin = (tiles.first + kt) * block_n;
    const int64_t k0 = cap_masked ? tile_begin : std::max(tile_begin, keys.begin);
    const int64_t k_end = cap_masked ? tile_begin + block_n : std::min(tile_begin + block_n, keys.end);
    if (setup.defect == ModelDefect::kHiddenTileMaxZero && keys.size() > 0 && tile_begin + block_n <= keys.begin &&
        row.ref == kNegInf) {
      row.m = row.ref = 0.0f;  // a tile wholly hidden from the row, before its first key: the origin as its max
    }
    if (k0 < k_end) {
      // Scores: fp32 dot products (an FMA chain over head dims; split: three tf32 terms per product). Only
      // visible keys are computed, so K and V at masked keys never enter.
      float tile_max = kNegInf;
      for (int64_t j = k0; j < k_end; ++j) {
        if (j < keys.begin || j >= keys.end) {  // cap_masked only
          x[j - k0] = detail::capped_score_log2(kNegInf, setup.softcap);
          tile_max = std::fmax(tile_max, x[j - k0]);
          continue;
        }
        float s = 0.0f;
        const float* k_val = k.value.data() + j * d_count;
        if (setup.fp8) {
          for (int64_t d0 = 0; d0 < d_count; d0 += kFp8MmaK) {
            s = fp8_mma_step(s, q_val + d0, k_val + d0, std::min<int64_t>(kFp8MmaK, d_count - d0), 1);
          }
        } else if (setup.split) {
          for (int64_t d = 0; d < d_count; ++d) {
            s = split_fma(q.hi[q_row * d_count + d], q.lo[q_row * d_count + d], k.hi[j * d_count + d],
                          k.lo[j * d_count + d], s, setup.defect == ModelDefect::kTf32MissingLoTerm);
          }
        } else {
          for (int64_t d = 0; d < d_count; ++d) s = std::fma(q_val[d], k_val[d], s);
        }
        x[j - k0] = setup.has_softcap ? detail::capped_score_log2(s, setup.softcap) : detail::mul_rn(s, setup.scale_log2);
        if (setup.defect == ModelDefect::kMaxShortReduction && (j - tile_begin) % 8 >= 4) continue;
        tile_max = std::fmax(tile_max, x[j - k0]);  // fmax ignores NaN, like fmaxf: NaN reaches O through p
      }
      // The reference: the running max, or on the tensor-core path the tile's own max where that lies within
      // kRefSlackLog2 of it (x is already in log2 units: the scaling is the identity).
      const float m_new = detail::fmax_f32(row.m, tile_max);
      float ref =
          setup.tile_ref ? detail::tile_reference(tile_max, m_new, row.ref, [](float u) { return u; }) : m_new;
      const bool lazy = setup.defect == ModelDefect::kFp8LazyRescale && setup.fp8 && row.ref != kNegInf;
      if (lazy && tile_max <= row.ref + kFp8LazyRescaleLog2) ref = row.ref;
      const float m_use = detail::exponent_origin(ref);
      const float alpha = family_exp2(setup.tile_ref, row.ref - m_use);
      float p_sum = 0.0f;
      for (int64_t j = k0; j < k_end; ++j) {
        x[j - k0] = family_exp2(setup.tile_ref, (x[j - k0] - m_use) + setup.p_offset);  // x now holds p
        p_sum += x[j - k0];
      }
      row.l = std::fma(row.l, alpha, p_sum);  // l accumulates fp32 p, before any rounding of P
      const bool skip_rescale = setup.defect == ModelDefect::kMissingRescale && kt == run_end - 1;
      row.moves += m_new != row.m ? 1 : 0;
      row.m = m_new;
      row.ref = ref;
      if (setup.fp8) {
        // The tile's P V in a fresh accumulator, k32 steps from the tile's first key (its keys before k0 and past
        // k_end with P = 0), then acc = fma(acc, alpha, tile).
        tile_acc.assign(static_cast<size_t>(dv_count), 0.0f);
        p8.assign(static_cast<size_t>(block_n), 0.0f);
        v8.assign(static_cast<size_t>(block_n * dv_count), 0.0f);
        for (int64_t j = k0; j < std::min(k_end, loaded_keys); ++j) {
          p8[j - tile_begin] = round_p(setup.p_format, x[j - k0]);
          std::copy_n(v.value.data() + j * dv_count, dv_count, v8.data() + (j - tile_begin) * dv_count);
        }
        for (int64_t j0 = 0; j0 < block_n; j0 += kFp8MmaK) {
          const int64_t count = std::min<int64_t>(kFp8MmaK, block_n - j0);
          for (int64_t d = 0; d < dv_count; ++d) {
            tile_acc[d] = fp8_mma_step(tile_acc[d], p8.data() + j0, v8.data() + j0 * dv_count + d, count, dv_count);
          }
        }
        const float factor = skip_rescale ? 1.0f : alpha;
        for (int64_t d = 0; d < dv_count; ++d) (*acc)[d] = std::fma((*acc)[d], factor, tile_acc[d]);
      } else {
        if (!skip_rescale) {
          for (float& a : *acc) a *= alpha;
        }
        for (int64_t j = k0; j < std::min(k_end, loaded_keys); ++j) {
          if (!dropout.keeps(j)) continue;  // a dropped key adds no term to P V (l above took its p)
          const float p_pv = round_p(setup.p_format, x[j - k0]);
          const float* v_val = v.value.data() + j * dv_count;
          if (setup.split) {
            const float p_hi = round_to_tf32(p_pv);
            const float p_lo = round_to_tf32(p_pv - p_hi);
            for (int64_t d = 0; d < dv_count; ++d) {
              (*acc)[d] = split_fma(p_hi, p_lo, v.hi[j * dv_count + d], v.lo[j * dv_count + d], (*acc)[d]);
            }
          } else {
            for (int64_t d = 0; d < dv_count; ++d) (*acc)[d] = std::fma(p_pv, v_val[d], (*acc)[d]);
          }
        }
      }
    }
    if (setup.defect == ModelDefect::kHiddenVUnmasked) {
      // The tile's masked keys up to the Q tile's last right edge, with their weight 0: 0 * V, NaN where V is not
      // finite.
      for (int64_t j = tile_begin; j < std::min(tile_begin + block_n, tile_keys_end); ++j) {
        if (j >= keys.begin && j < keys.end) continue;
        for (int64_t d = 0; d < dv_count; ++d) (*acc)[d] = std::fma(0.0f, v.value[j * dv_count + d], (*acc)[d]);
      }
    }
    if (setup.defect == ModelDefect::kOAccumInDtype) {
      for (float& a : *acc) a = round_to(p.dtype, a);
    }
    const Instrumentation& inst = setup.inst;
    detail::record_trace(inst, trace_slot, kt, row.ref * kLn2, std::ldexp(row.l, -static_cast<int>(setup.p_offset)));
  }
  return row;
}

// The mask dump (Params::dropout_mask_out, host memory): every byte of [batch, heads_q, seqlen_q, seqlen_k], 1 where
// sequence b's row i sees key j and keeps it, 0 where it drops it, hides it or lies past the sequence's lengths.
void write_dropout_mask(const Params& p, const detail::ProblemArgs& a, const detail::host::ModelDropout& dropout) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::SequenceView seq = a.sequence(b);
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        uint8_t* out = p.dropout_mask_out + ((b * p.heads_q + h) * p.seqlen_q + i) * p.seqlen_k;
        const bool row_exists = i < seq.seqlen_q;
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          out[j] = row_exists && seq.vis.sees(i, j) && dropout.keeps(b, h, i, j) ? 1 : 0;
        }
      }
    }
  }
}

Status check_options(const Params& params, const HostModelOptions& options) {
  if (options.override_config) {
    const KernelConfig& c = options.config;
    if (c.block_m < 1 || c.block_n < 1) {
      return invalid("config override: block_m and block_n must be >= 1 (got " + std::to_string(c.block_m) + ", " +
                     std::to_string(c.block_n) + ")");
    }
    if (c.path != ComputePath::kGeneralFp32 && c.path != ComputePath::kTensorCore &&
        c.path != ComputePath::kSplitTf32 && c.path != ComputePath::kTensorCoreFp8) {
      return invalid("config override: unknown compute path " + std::to_string(static_cast<int32_t>(c.path)));
    }
    if ((c.path == ComputePath::kTensorCoreFp8) != (params.dtype == DType::kF8E4M3)) {
      return invalid(std::string("config override: the fp8 path computes f8e4m3 inputs, and they take it only (got ") +
                     to_string(c.path) + " for " + to_string(params.dtype) + ")");
    }
    if (params.dropout_p > 0.0f && c.path != ComputePath::kGeneralFp32) {
      return invalid(std::string("config override: dropout runs on the general fp32 path only (got ") +
                     to_string(c.path) + ")");
    }
  }
  const auto d = static_cast<int32_t>(options.defect);
  if (d < 0 || static_cast<size_t>(d) >= std::size(kModelDefects)) {
    return invalid("defect: unknown value " + std::to_string(d));
  }
  const Instrumentation& inst = options.instrumentation;
  if (inst.trace_row_count < 0 || inst.max_tiles < 0) {
    return invalid("instrumentation: trace_row_count and max_tiles must be >= 0");
  }
  if (inst.trace_row_count > 0 && inst.trace_rows == nullptr) {
    return invalid("instrumentation: trace_rows is null but trace_row_count = " +
                   std::to_string(inst.trace_row_count));
  }
  return Status::ok_status();
}

}  // namespace

Status run_host_model(const Params& params, const HostModelOptions& options) {
  if (Status st = can_implement(params); !st.ok()) return st;
  if (Status st = check_options(params, options); !st.ok()) return st;
  if (params.batch == 0 || params.heads_q == 0 || params.seqlen_q == 0) return Status::ok_status();

  const KernelConfig config = options.override_config ? options.config : select_config(params);
  const Instrumentation& inst = options.instrumentation;
  PFormat format = p_format(config.path, params.dtype);
  if (options.defect == ModelDefect::kPOneFormatCoarser) format = one_coarser(format);
  const bool fp8 = config.path == ComputePath::kTensorCoreFp8;
  const float p_offset = fp8 && options.defect != ModelDefect::kFp8POffsetMissing ? detail::kFp8POffsetLog2 : 0.0f;
  ModelSetup setup{params,
                         config,
                         options.defect,
                         inst,
                         detail::fold_scale(params.softmax_scale),
                         params.softcap > 0.0f,
                         params.softcap > 0.0f ? detail::make_softcap(params.softmax_scale, params.softcap)
                                               : detail::Softcap{},
                         format,
                         config.path == ComputePath::kSplitTf32,
                         config.path == ComputePath::kTensorCore || fp8,
                         fp8,
                         p_offset};

  const int64_t block_m = config.block_m;
  const int64_t block_n = config.block_n;
  const int32_t splits = detail::pick_splits(params, detail::kModelSmCount);
  const detail::ProblemArgs a = detail::make_problem_args(params, block_m, splits);
  const int64_t heads_per_kv = params.heads_q / params.heads_kv;
  const int64_t dim = params.head_dim;
  const int64_t dim_v = value_head_dim(params);
  const auto exp2 = [](float e) { return std::exp2(e); };  // the split-KV combine's exp2f (common/combine.cuh)
  // The epilogue's: ex2.approx.ftz where the fp16/bf16 tensor-core and decode kernels finish a row themselves; the fp8
  // kernel's epilogue and the split-KV combine use exp2f.
  const auto epilogue_exp2 = [ftz = setup.tile_ref && !fp8 && splits == 1](float e) { return family_exp2(ftz, e); };
  const detail::host::ModelDropout dropout = detail::host::model_dropout(params, options.defect, false);
  const bool scale_output = dropout.enabled && options.defect != ModelDefect::kDropoutScaleMissing;

  HeadRows q_rows, k_rows, v_rows, k_other, v_other;
  std::vector<float> acc, merged_acc;
  std::vector<RowResult> runs(static_cast<size_t>(splits));
  std::vector<float> run_m(static_cast<size_t>(splits));  // the runs' bases, as the combine reads them
  std::vector<std::vector<float>> run_acc(static_cast<size_t>(splits));
  for (int64_t b = 0; b < params.batch; ++b) {
    detail::SequenceView seq = a.sequence(b);
    if (options.defect == ModelDefect::kReadsPastSeqused && a.used_k != nullptr) {
      // The memory the sequence's keys sit in: its packed rows, or its pages up to the last one's end.
      const int64_t end = a.cu_k != nullptr ? int64_t{a.cu_k[b + 1]} - a.cu_k[b]
                          : a.page_table != nullptr ? detail::ceil_div(seq.seqlen_k, a.page_size) * a.page_size
                                                    : params.seqlen_k;
      seq.seqlen_k = end;
      seq.vis = detail::make_visibility(params.mask, seq.seqlen_q, end, params.window_left, params.window_right);
    }
    const detail::Visibility& vis = seq.vis;
    const int64_t sq = seq.seqlen_q;
    if (sq == 0) continue;
    const int64_t q_tiles = detail::ceil_div(sq, block_m);
    const int64_t keys_read = vis.row_end(sq - 1);  // keys any row reads: the last row sees the most
    for (int64_t h_kv = 0; h_kv < params.heads_kv; ++h_kv) {
      if (keys_read > 0) {
        load_head(params, a, a.k, false, b, h_kv, keys_read, dim, setup.split, &k_rows, options.defect);
        load_head(params, a, a.v, false, b, h_kv, keys_read, dim_v, setup.split, &v_rows, options.defect);
      }
      for (int64_t h = h_kv * heads_per_kv; h < (h_kv + 1) * heads_per_kv; ++h) {
        if (fp8) set_fp8_scale(params, b, options.defect == ModelDefect::kFp8DescaleQueryHead ? h : h_kv, &setup);
        if (keys_read > 0) load_head(params, a, a.q, true, b, h, sq, dim, setup.split, &q_rows);
        // ModelDefect::kGqaHeadModulo: K/V of head h mod heads_kv.
        const HeadRows* k_head = &k_rows;
        const HeadRows* v_head = &v_rows;
        if (options.defect == ModelDefect::kGqaHeadModulo && h % params.heads_kv != h_kv && keys_read > 0) {
          const int64_t h_other = h % params.heads_kv;
          load_head(params, a, a.k, false, b, h_other, keys_read, dim, setup.split, &k_other, options.defect);
          load_head(params, a, a.v, false, b, h_other, keys_read, dim_v, setup.split, &v_other, options.defect);
          k_head = &k_other;
          v_head = &v_other;
        }
        const int64_t flat_head = a.row_block(b, h);
        for (int64_t q_tile = 0; q_tile < q_tiles; ++q_tile) {
          const int64_t m0 = q_tile * block_m;
          const int64_t rows_end = std::min(m0 + block_m, sq);
          const detail::Visibility::TileRange tiles = vis.tile_range(m0, rows_end - m0, block_n);
          const int64_t tile_keys_end = vis.row_end(rows_end - 1);  // the largest right edge of the Q tile's rows
          detail::count_tile_kinds(inst, vis, m0, block_m, block_n, tiles.first, tiles.first + tiles.count);
          for (int64_t i = m0; i < rows_end; ++i) {
            const int64_t flat_row = flat_head + i;
            KeyRange keys{vis.row_begin(i), vis.row_end(i)};
            // The mask-edge defects: one key more at the left or right edge, within the keys loaded.
            if (options.defect == ModelDefect::kWindowLeftOffByOne && vis.bounded_begin && keys.begin > 0) {
              keys.begin -= 1;
            }
            if (options.defect == ModelDefect::kCausalOffByOne && vis.bounded_end && keys.end < keys_read) {
              keys.end += 1;
            }
            // ModelDefect::kWindowLeftFirstTileOnly: the tiles after the Q tile's first that every row sees to their
            // end go unmasked, so a row whose left edge lies in one of them takes them from the first one's start.
            if (options.defect == ModelDefect::kWindowLeftFirstTileOnly && vis.bounded_begin && tiles.full_end > 1) {
              const int64_t unmasked_begin = (tiles.first + 1) * block_n;
              const int64_t unmasked_end = (tiles.first + tiles.full_end) * block_n;
              if (keys.begin > unmasked_begin && keys.begin <= unmasked_end) keys.begin = unmasked_begin;
            }
            RowResult row;
            float m_log2 = 0.0f;
            int64_t moves = 0;
            if (splits == 1) {
              row = run_row(setup, q_rows, i, *k_head, *v_head, keys, tiles, tile_keys_end, 0, tiles.count,
                            detail::trace_slot(inst, flat_row), &acc, RowDropout{&dropout, b, h, i});
              m_log2 = row.ref;
              moves = row.moves;
            } else {
              // Split-KV: every run from its own empty state, then the combine's merge in split order
              // (common/epilogue.h); traces follow unsplit rows only.
              for (int32_t sp = 0; sp < splits; ++sp) {
                runs[sp] = run_row(setup, q_rows, i, *k_head, *v_head, keys, tiles, tile_keys_end,
                                   a.split_begin(tiles.count, sp),
                                   a.split_begin(tiles.count, sp + 1), -1, &run_acc[sp]);
                run_m[sp] = runs[sp].ref;
              }
              m_log2 = detail::merged_base(run_m.data(), splits, 1);
              row.l = 0.0f;
              acc.assign(static_cast<size_t>(dim_v), 0.0f);
              for (int32_t sp = 0; sp < splits; ++sp) {
                float factor = detail::run_factor(run_m[sp], m_log2, exp2);
                if (options.defect == ModelDefect::kSplitMergeUnscaled) factor = 1.0f;
                if (options.defect == ModelDefect::kSplitEmptyNan) factor = std::exp2(run_m[sp] - m_log2);
                row.l = std::fma(runs[sp].l, factor, row.l);
                for (int64_t d = 0; d < dim_v; ++d) acc[d] = std::fma(run_acc[sp][d], factor, acc[d]);
              }
            }

            // The epilogue of common/epilogue.h: the sink merged in, O = alpha * acc / l rounded to the dtype
            // once, LSE = m + ln l, and the empty-row rule.
            const float* sink = options.defect == ModelDefect::kSinkIgnored ? nullptr : params.sink;
            const detail::RowFinal fin = detail::finish_row(m_log2, m_log2 * kLn2, row.l, sink, h, epilogue_exp2, p_offset);
            const float l_reported = std::ldexp(fin.l, -static_cast<int>(p_offset));  // the offset taken back
            const bool divide_empty = options.defect == ModelDefect::kEmptyRowDivide && detail::is_empty_row(fin.l);
            const int64_t o_row = (a.cu_q != nullptr ? (a.cu_q[b] + i) * params.o_stride.row
                                                     : b * params.o_stride.batch + i * params.o_stride.row) +
                                  h * params.o_stride.head;
            const float descale_v = fp8 && params.descale_v != nullptr ? params.descale_v[b * params.heads_kv + h_kv] : 1.0f;
            for (int64_t d = 0; d < dim_v; ++d) {
              float o = divide_empty ? acc[d] / fin.l : detail::final_output(acc[d], fin);
              if (scale_output) o = detail::mul_rn(o, dropout.keep_scale);
              if (fp8 && params.descale_v != nullptr) {
                o = detail::mul_rn(o, descale_v);
                if (options.defect == ModelDefect::kFp8DescaleVTwice) o = detail::mul_rn(o, descale_v);
              }
              store_element(output_dtype(params.dtype), params.o, o_row + d, o);
            }
            params.lse[flat_row] = detail::row_lse(fin.m_natural, l_reported);
            if (options.defect == ModelDefect::kLseBase2 && !detail::is_empty_row(fin.l)) {
              params.lse[flat_row] = (params.sink != nullptr ? fin.m_natural * detail::kLog2e : m_log2) + std::log2(l_reported);
            }
            detail::record_row(inst, flat_row, fin.m_natural, l_reported, moves);
          }
        }
      }
    }
  }
  if (params.dropout_mask_out != nullptr) write_dropout_mask(params, a, dropout);
  return Status::ok_status();
}

}  // namespace flashcheck
