// The kernel's dropout draws (docs/design/dropout-rng.md): Philox4x32-10 keyed by the 64-bit seed, one call per
// four consecutive keys of a query row, counter (j / 4, i, offset + b * heads_q + h as two words). One definition
// for the CUDA kernels and the host model: the multiply-high is __umulhi on the device, the high word of a 64-bit
// product on the host, the same value by definition. The oracle has
// its own generator written from the same note (oracle/include/flashcheck/dropout.h); kernel_dropout_rng_test
// holds the two to each other on every element of its shapes, and to Random123's known answers.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace flashcheck::detail {

// Random123's Philox4x32 constants (Salmon, Moraes, Dror, Shaw, SC'11): the round multipliers and the Weyl
// increments that bump the key between rounds (golden ratio, sqrt(3) - 1, as 32-bit fractions).
inline constexpr uint32_t kDropoutPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kDropoutPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kDropoutPhiloxW0 = 0x9E3779B9u;
inline constexpr uint32_t kDropoutPhiloxW1 = 0xBB67AE85u;
inline constexpr int kDropoutPhiloxRounds = 10;
// One call's four words cover four consecutive keys of a row: word j % 4 of call j / 4.
inline constexpr int kDropoutKeysPerDraw = 4;

struct PhiloxWords {
  uint32_t w[4];
};

// The high half of the 64-bit product a * b.
FLASHCHECK_HOST_DEVICE inline uint32_t mulhi_u32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
#endif
}

// Philox4x32-10: ten rounds of (x0, x1, x2, x3) -> (hi(M1 x2) ^ x1 ^ k0, lo(M1 x2), hi(M0 x0) ^ x3 ^ k1, lo(M0 x0)),
// the key bumped by the Weyl increments between rounds (round r uses k + r * W; the bump after the last is unused).
FLASHCHECK_HOST_DEVICE inline PhiloxWords philox4x32_10(PhiloxWords counter, uint32_t key0, uint32_t key1) {
  uint32_t x0 = counter.w[0], x1 = counter.w[1], x2 = counter.w[2], x3 = counter.w[3];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < kDropoutPhiloxRounds; ++round) {
    const uint32_t hi0 = mulhi_u32(kDropoutPhiloxM0, x0), lo0 = kDropoutPhiloxM0 * x0;
    const uint32_t hi1 = mulhi_u32(kDropoutPhiloxM1, x2), lo1 = kDropoutPhiloxM1 * x2;
    x0 = hi1 ^ x1 ^ key0;
    x1 = lo1;
    x2 = hi0 ^ x3 ^ key1;
    x3 = lo0;
    key0 += kDropoutPhiloxW0;
    key1 += kDropoutPhiloxW1;
  }
  return PhiloxWords{{x0, x1, x2, x3}};
}

// t = floor(p * 2^32) for a drop probability p in [0, 1) (the caller has checked it: NaN or p outside the interval
// has no threshold). p * 2^32 is exact in double (a power-of-two scaling of a 24-bit significand) and below 2^32,
// so the conversion, which truncates toward zero, is the floor.
FLASHCHECK_HOST_DEVICE inline uint32_t dropout_threshold(float p) {
  return static_cast<uint32_t>(static_cast<double>(p) * 4294967296.0);
}

// The four draws of keys 4 * key_group .. 4 * key_group + 3 of query row `row` of (sequence b, query head h); row
// and key within the sequence, 0 <= row < 2^32 and 0 <= key_group < 2^32 (the contract's limits). The stream
// offset + b * heads_q + h wraps modulo 2^64 (unsigned arithmetic).
FLASHCHECK_HOST_DEVICE inline PhiloxWords dropout_draws(uint64_t seed, uint64_t offset, int64_t heads_q, int64_t b,
                                                        int64_t h, int64_t row, int64_t key_group) {
  const uint64_t stream = offset + static_cast<uint64_t>(b) * static_cast<uint64_t>(heads_q) + static_cast<uint64_t>(h);
  const PhiloxWords counter{{static_cast<uint32_t>(key_group), static_cast<uint32_t>(row),
                             static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)}};
  return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// A draw against the threshold: dropped iff r < t, so t = 0 (p = 0) drops nothing.
FLASHCHECK_HOST_DEVICE inline bool dropout_keeps_draw(uint32_t draw, uint32_t threshold) { return draw >= threshold; }

// The factor a kept element is scaled by, as the kernels apply it: s32 = 1 / (1 - p) computed in double and rounded
// to fp32 once (within 2u / (1 - u) of the exact factor the contract defines; p = 0 gives 1 exactly).
FLASHCHECK_HOST_DEVICE inline float dropout_keep_scale_f32(float p) {
  return static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
}

// The keep decisions of keys 4 * key_group .. 4 * key_group + 3 of one row as bits 0..3 (bit w: key
// 4 * key_group + w kept), from one call. `drop_at_threshold` drops a draw equal to t as well (r <= t): the threshold
// off by one, for the mutant builds and the host model's defect only.
FLASHCHECK_HOST_DEVICE inline uint32_t dropout_keep_bits(uint64_t seed, uint64_t offset, int64_t heads_q, int64_t b,
                                                         int64_t h, int64_t row, int64_t key_group, uint32_t threshold,
                                                         bool drop_at_threshold = false) {
  const PhiloxWords draws = dropout_draws(seed, offset, heads_q, b, h, row, key_group);
  uint32_t bits = 0;
  for (int w = 0; w < kDropoutKeysPerDraw; ++w) {
    const bool kept = drop_at_threshold ? draws.w[w] > threshold : dropout_keeps_draw(draws.w[w], threshold);
    bits |= kept ? 1u << w : 0u;
  }
  return bits;
}

// A call's dropout as the kernels read it (common/args.h fills it from Params): off when p = 0, and then nothing of
// it is read.
struct DropoutArgs {
  bool enabled = false;       // dropout_p > 0
  uint32_t threshold = 0;     // dropout_threshold(p)
  float keep_scale = 1.0f;    // dropout_keep_scale_f32(p)
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// Is element (b, h, row, key) kept? One Philox call per element: the reference form for the host model and the
// tests; a kernel that holds four consecutive keys calls dropout_draws once and tests each word.
FLASHCHECK_HOST_DEVICE inline bool dropout_keep(uint64_t seed, uint64_t offset, int64_t heads_q, int64_t b, int64_t h,
                                                int64_t row, int64_t key, uint32_t threshold) {
  const PhiloxWords draws = dropout_draws(seed, offset, heads_q, b, h, row, key / kDropoutKeysPerDraw);
  return dropout_keeps_draw(draws.w[key % kDropoutKeysPerDraw], threshold);
}

}  // namespace flashcheck::detail
