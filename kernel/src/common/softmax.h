// The online softmax's shared rules, for every kernel family and the host model. State per row: a running max m
// (or, on the tensor-core path, a reference r near it), l = sum of p relative to it, and O's accumulator.
// Units: the scale is folded into the exponent base, x = fl(s * scale * log2 e), so p = exp2(x - m) costs one
// multiply per score and no exp(); m and LSE return to natural-log units through ln 2 (or the scale itself).
// What differs per family (which exp2, where P is rounded, how l is summed) is its rounding points (families.h).
#pragma once

#include <cmath>
#include <limits>

#include "common/host_device.h"
#include "flashcheck/instrument.h"  // kTensorCoreRefSlackLog2

namespace flashcheck::detail {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Tensor-core family: how far (log2 units) a tile's own max may lie below the running max and still serve as the
// reference of that tile's p. O, l and the rescale factors grow by at most 2^kRefSlackLog2 over the running-max
// formulation. Public (instrument.h), since the instrumentation's m and l follow from it. The oracle's m check allows
// the reported m this far below the max (it keeps its own copy of the constant; a harness test holds the two equal).
inline constexpr float kRefSlackLog2 = kTensorCoreRefSlackLog2;

// softmax_scale folded into exp2's argument: scale * log2(e), rounded once in fp32.
FLASHCHECK_HOST_DEVICE constexpr float fold_scale(float softmax_scale) { return softmax_scale * kLog2e; }

// The fp8 path (docs/design/fp8-forward.md). Its scores' scale takes the (batch, kv head)'s descales of Q and K,
// each product rounded in fp32 in this order before fold_scale (or make_softcap) takes it: c = fl(fl(fl(scale dq) dk)
// log2 e). Its weights carry an exponent offset, p = exp2(fl(x - r) + kFp8POffsetLog2) <= 2^8 (r >= every x of the
// tile), which e4m3 (largest finite 448) holds through P's rounding; l and O's accumulator carry the factor 2^8, and
// LSE, the reported l and the traces take it back (exactly: a power of two).
inline constexpr float kFp8POffsetLog2 = 8.0f;
FLASHCHECK_HOST_DEVICE inline float descaled_scale(float softmax_scale, float descale_q, float descale_k) {
  return mul_rn(mul_rn(softmax_scale, descale_q), descale_k);
}

// Softcap c > 0 turns a scaled score into c * tanh(scale * s / c). The scale cannot be folded past tanh, so a
// capped score goes straight to log2 units: x = fl(c * log2 e) * tanh(fl(s * fl(scale / c))), three roundings
// and tanh's own error (docs/error-model.md); without a softcap x = fl(s * fold_scale(scale)).
struct Softcap {
  float tanh_scale = 0.0f;  // scale / c
  float cap_log2 = 0.0f;    // c * log2 e
};
// A nonzero scale whose quotient by c rounds to 0 (|scale / c| below half the smallest subnormal) keeps the
// smallest subnormal of its sign instead: an infinite score times 0 would be NaN where the softcap maps it to -+c
// (attention.h); finite scores stay within the error model's folded-scale term (docs/error-model.md §4.6).
FLASHCHECK_HOST_DEVICE inline Softcap make_softcap(float softmax_scale, float softcap) {
  float tanh_scale = div_rn(softmax_scale, softcap);
  if (tanh_scale == 0.0f && softmax_scale != 0.0f) {
    constexpr float kLeast = std::numeric_limits<float>::denorm_min();
    tanh_scale = softmax_scale < 0.0f ? -kLeast : kLeast;
  }
  return {tanh_scale, mul_rn(softcap, kLog2e)};
}
// tanh(scale * s / c), the capped score over c: the backward pass's softcap derivative is 1 - that squared.
FLASHCHECK_HOST_DEVICE inline float capped_tanh(float s, const Softcap& cap) { return tanh_f32(mul_rn(s, cap.tanh_scale)); }
FLASHCHECK_HOST_DEVICE inline float capped_score_log2(float s, const Softcap& cap) {
  return mul_rn(cap.cap_log2, capped_tanh(s, cap));
}

// The value exponents are taken relative to. While a row has seen no usable key, m = -inf and exp2(x - m) would
// be exp2(-inf + inf) = NaN: subtract 0 instead, which still maps -inf scores to weight 0 and the (zero) old state
// to a rescale factor exp2(-inf) = 0.
FLASHCHECK_HOST_DEVICE constexpr float exponent_origin(float m) { return m == kNegInf ? 0.0f : m; }

// One K/V tile's update of a row's running max (log2 units): the new max, the origin its exponents use, and
// alpha = exp2(m_old - origin), the factor that moves O and l onto the new max. exp2 is the family's own.
struct MaxStep {
  float m;
  float origin;
  float alpha;
};
template <class Exp2>
FLASHCHECK_HOST_DEVICE MaxStep running_max_step(float m_old, float tile_max, Exp2&& exp2) {
  MaxStep step;
  step.m = fmax_f32(m_old, tile_max);
  step.origin = exponent_origin(step.m);
  step.alpha = exp2(m_old - step.origin);
  return step;
}

// Tensor-core reference rule: a tile's p is taken relative to the tile's own max where that lies within
// kRefSlackLog2 (log2 units) of the running max, else relative to the running max. The key at the reference gets
// p = exp2(0) = 1, which P's rounding to the input dtype leaves exact, so every tile's heaviest key enters P V
// without rounding error, instead of only the keys that raised the running max; the heaviest keys carry most of
// the error P's rounding causes. A tile without a usable key for the row (fully masked, or -inf scores) keeps the
// old reference: alpha = 1 and p = 0, exactly as skipping it would. With running_max = +inf no finite tile max is
// within the slack. tile_max and running_max are in any units; scaled(u) = fl(u * scale * log2 e) >= 0-monotone.
template <class Scaled>
FLASHCHECK_HOST_DEVICE float tile_reference(float tile_max, float running_max, float old_ref, Scaled&& scaled) {
  const bool local = scaled(tile_max) >= scaled(running_max) - kRefSlackLog2;
  return tile_max == kNegInf ? old_ref : (local ? tile_max : running_max);
}

}  // namespace flashcheck::detail
