// The host model's dropout decision (forward, mask dump, backward): common/dropout_rng.h's draw from the call's
// Params, with the dropout model defects (flashcheck/host_model.h) applied where the GPU mutants of the same names
// apply theirs (common/dropout.cuh). Rows and keys are counted within the sequence, h is the query head.
// Host-only.
#pragma once

#include <cstdint>

#include "common/dropout_rng.h"
#include "flashcheck/attention.h"
#include "flashcheck/host_model.h"

namespace flashcheck::detail::host {

struct ModelDropout {
  bool enabled = false;  // dropout_p > 0: nothing else is read otherwise
  uint64_t seed = 0;
  uint64_t offset = 0;   // after the defects
  int64_t heads_q = 0;
  int64_t group_size = 1;  // heads_q / heads_kv
  uint32_t threshold = 0;
  float keep_scale = 1.0f;  // s32 = dropout_keep_scale_f32(p)
  bool drop_at_threshold = false;
  bool kv_head = false;

  // Is element (b, h, i, j) kept?
  bool keeps(int64_t b, int64_t h, int64_t i, int64_t j) const {
    const uint32_t bits = dropout_keep_bits(seed, offset, heads_q, b, kv_head ? h / group_size : h, i,
                                            j / kDropoutKeysPerDraw, threshold, drop_at_threshold);
    return ((bits >> (j % kDropoutKeysPerDraw)) & 1u) != 0;
  }
};

// The decision as the forward and the dump (backward = false) or the backward pass (true) draw it under `defect`.
inline ModelDropout model_dropout(const Params& p, ModelDefect defect, bool backward) {
  ModelDropout d;
  if (!(p.dropout_p > 0.0f)) return d;
  d.enabled = true;
  d.seed = p.dropout_seed;
  d.offset = p.dropout_offset;
  if (defect == ModelDefect::kDropoutOffset32Bit) d.offset &= 0xffffffffull;
  if (backward && defect == ModelDefect::kDropoutBackwardOffsetPlusOne) d.offset += 1;
  d.heads_q = p.heads_q;
  d.group_size = p.heads_kv > 0 ? p.heads_q / p.heads_kv : 1;
  d.threshold = dropout_threshold(p.dropout_p);
  d.keep_scale = dropout_keep_scale_f32(p.dropout_p);
  d.drop_at_threshold = defect == ModelDefect::kDropoutThresholdOffByOne;
  d.kv_head = defect == ModelDefect::kDropoutKvHeadIndex;
  return d;
}

}  // namespace flashcheck::detail::host
