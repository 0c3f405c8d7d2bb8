// The CUDA kernels' dropout decision (docs/design/dropout-rng.md): the keep bits of a group of four keys of one
// query row, drawn by common/dropout_rng.h from the call's DropoutArgs, with the mutant catalogue's dropout guards
// (flashcheck/mutants.h) in the one place every kernel that draws the mask goes through: the general forward, the
// mask dump and the CUDA-core backward. Rows and keys are counted within the sequence, h is the query head.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/args.h"
#include "common/dropout_rng.h"
#include "common/mutants.cuh"

namespace flashcheck::detail {

// Bits 0..3: keys 4 * key_group .. 4 * key_group + 3 of row `row` of (sequence b, query head h) kept. `backward`:
// the backward pass's regeneration of the forward's mask (which must draw the same bits).
__device__ __forceinline__ uint32_t device_keep_bits(const ProblemArgs& a, int64_t b, int64_t h, int64_t row,
                                                     int64_t key_group, bool backward) {
  uint64_t offset = a.dropout.offset;
  if (FC_MUTANT(kDropoutOffset32Bit)) offset &= 0xffffffffull;
  if (backward && FC_MUTANT(kDropoutBackwardOffsetPlusOne)) offset += 1;
  const int64_t head = FC_MUTANT(kDropoutKvHeadIndex) ? h / a.group_size : h;
  return dropout_keep_bits(a.dropout.seed, offset, a.heads_q, b, head, row, key_group, a.dropout.threshold,
                           FC_MUTANT(kDropoutThresholdOffByOne));
}

// Is key `key` of row `row` of (b, h) kept? One call for the key's group of four.
__device__ __forceinline__ bool device_keeps(const ProblemArgs& a, int64_t b, int64_t h, int64_t row, int64_t key,
                                             bool backward) {
  const uint32_t bits = device_keep_bits(a, b, h, row, key / kDropoutKeysPerDraw, backward);
  return ((bits >> (key % kDropoutKeysPerDraw)) & 1u) != 0;
}

}  // namespace flashcheck::detail
