// kernel_dropout_rng_test (cpu): the kernel's dropout generator (common/dropout_rng.h) against the oracle's
// (flashcheck/dropout.h), two implementations of docs/design/dropout-rng.md that share no code. Here, where both may
// be included: the kernel's Philox against Random123's known answers; every element (b, h, i, j) of a set of shapes
// (ragged sequences, key counts not a multiple of 4, GQA) under offsets near 2^32 and 2^64, draw for draw and keep
// decision for keep decision at p in {0, 2^-32, 1e-6, 0.1, 0.5, 1 - 2^-24}; the threshold across the floats below 1;
// and that the contract tells apart the realistic bugs issue 62 lists (offset truncated to 32 bits or summed in 32
// bits, the backward's offset + 1, the threshold's boundary, the mask indexed by the K/V head).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/dropout_rng.h"
#include "flashcheck/dropout.h"
#include "flashcheck/oracle_problem.h"

namespace flashcheck {
namespace {

using detail::dropout_draws;
using detail::dropout_keep;
using detail::dropout_keeps_draw;
using detail::dropout_threshold;
using detail::PhiloxWords;

constexpr uint64_t kTwo32 = uint64_t{1} << 32;
constexpr uint64_t kAllOnes = ~uint64_t{0};

struct Shape {
  std::string name;
  int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k;
  std::vector<int64_t> seqlens_q, seqlens_k;  // empty: every sequence full
};

// A shape as the oracle's problem (it reads the shape and the sequence lengths only).
oracle::Problem problem_of(const Shape& s) {
  oracle::Problem p;
  p.batch = s.batch;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.seqlens_q = s.seqlens_q;
  p.seqlens_k = s.seqlens_k;
  return p;
}
int64_t rows_of(const Shape& s, int64_t b) { return s.seqlens_q.empty() ? s.seqlen_q : s.seqlens_q[b]; }
int64_t keys_of(const Shape& s, int64_t b) { return s.seqlens_k.empty() ? s.seqlen_k : s.seqlens_k[b]; }
size_t at(const Shape& s, int64_t b, int64_t h, int64_t i, int64_t j) {
  return static_cast<size_t>(((b * s.heads_q + h) * s.seqlen_q + i) * s.seqlen_k + j);
}

const std::vector<Shape> kShapes = {
    {"one_element", 1, 1, 1, 1, 1, {}, {}},
    {"seven_keys", 2, 3, 1, 5, 7, {}, {}},                // 7 keys: one group of 4 and one of 3
    {"gqa_tile_plus_two", 2, 8, 2, 33, 130, {}, {}},      // a 128-key tile and 2 keys more; groups of 4 heads
    {"mqa_long_rows", 1, 4, 1, 3, 1027, {}, {}},          // 1027 = 4 * 256 + 3
    {"ragged", 4, 3, 3, 33, 71, {33, 0, 17, 1}, {71, 9, 0, 70}},  // a sequence without rows, one without keys
};
// Streams carry into the high word within the batch (2^32 - 5), start past it, wrap past 2^64 (2^64 - 5), and one
// far from any edge.
const uint64_t kOffsets[] = {0, 1, kTwo32 - 5, kTwo32, kTwo32 + 3, uint64_t{0x0123456789ABCDEF}, kAllOnes - 4, kAllOnes};
const uint64_t kSeeds[] = {0, kAllOnes, uint64_t{0xDEADBEEF00C0FFEE}};
const float kProbabilities[] = {0.0f, 0x1p-32f, 1e-6f, 0.1f, 0.5f, 0x1.fffffep-1f};

std::string where(const Shape& s, uint64_t seed, uint64_t offset, int64_t b, int64_t h, int64_t i, int64_t j) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s seed %#llx offset %#llx: b %lld h %lld i %lld j %lld", s.name.c_str(),
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(offset),
                static_cast<long long>(b), static_cast<long long>(h), static_cast<long long>(i),
                static_cast<long long>(j));
  return buf;
}

// The kernel's draws of every element as a kernel reads them: one call per group of four keys.
std::vector<uint32_t> kernel_draws(const Shape& s, uint64_t seed, uint64_t offset) {
  std::vector<uint32_t> draws(static_cast<size_t>(s.batch * s.heads_q * s.seqlen_q * s.seqlen_k), 0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads_q; ++h) {
      for (int64_t i = 0; i < rows_of(s, b); ++i) {
        for (int64_t group = 0; group * detail::kDropoutKeysPerDraw < keys_of(s, b); ++group) {
          const PhiloxWords words = dropout_draws(seed, offset, s.heads_q, b, h, i, group);
          for (int w = 0; w < detail::kDropoutKeysPerDraw; ++w) {
            const int64_t j = group * detail::kDropoutKeysPerDraw + w;
            if (j < keys_of(s, b)) draws[at(s, b, h, i, j)] = words.w[w];
          }
        }
      }
    }
  }
  return draws;
}

TEST(DropoutRng, KernelPhiloxMatchesRandom123KnownAnswers) {
  struct Kat {
    PhiloxWords counter;
    uint32_t key0, key1;
    PhiloxWords expected;
  };
  // Random123's tests/kat_vectors, the three "philox4x32 10" lines.
  const Kat kats[] = {
      {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}}, 0x00000000, 0x00000000,
       {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Kat& kat : kats) {
    const PhiloxWords out = detail::philox4x32_10(kat.counter, kat.key0, kat.key1);
    for (int w = 0; w < 4; ++w) EXPECT_EQ(out.w[w], kat.expected.w[w]) << "word " << w;
  }
}

// Every element of every shape, seed and offset: the kernel's draw (four keys per call) equals the oracle's (one
// call per element), and for each p the kernel's keep decision, by the four-key path and by dropout_keep, equals
// the oracle's mask. Elements past a sequence's lengths are 0 in the oracle's mask and not drawn by the kernel.
TEST(DropoutRng, KernelMatchesOracleOnEveryElement) {
  uint64_t elements = 0, decisions = 0, kept_half = 0, dropped_half = 0;
  for (const Shape& s : kShapes) {
    const oracle::Problem problem = problem_of(s);
    for (uint64_t seed : kSeeds) {
      for (uint64_t offset : kOffsets) {
        const std::vector<uint32_t> draws = kernel_draws(s, seed, offset);
        for (int64_t b = 0; b < s.batch; ++b) {
          for (int64_t h = 0; h < s.heads_q; ++h) {
            for (int64_t i = 0; i < rows_of(s, b); ++i) {
              for (int64_t j = 0; j < keys_of(s, b); ++j) {
                const uint32_t want = oracle::dropout_draw(oracle::Dropout{0.0f, seed, offset}, s.heads_q, b, h, i, j);
                ASSERT_EQ(draws[at(s, b, h, i, j)], want) << where(s, seed, offset, b, h, i, j);
                ++elements;
              }
            }
          }
        }
        for (float p : kProbabilities) {
          const oracle::Dropout dropout{p, seed, offset};
          const std::vector<uint8_t> mask = oracle::dropout_keep_mask(problem, dropout);
          const uint32_t threshold = dropout_threshold(p);
          ASSERT_EQ(threshold, oracle::drop_threshold(p)) << "p = " << p;
          for (int64_t b = 0; b < s.batch; ++b) {
            for (int64_t h = 0; h < s.heads_q; ++h) {
              for (int64_t i = 0; i < s.seqlen_q; ++i) {
                for (int64_t j = 0; j < s.seqlen_k; ++j) {
                  const bool exists = i < rows_of(s, b) && j < keys_of(s, b);
                  const bool want = mask[at(s, b, h, i, j)] != 0;
                  if (!exists) {
                    ASSERT_FALSE(want) << "p = " << p << " " << where(s, seed, offset, b, h, i, j);
                    continue;
                  }
                  const bool four_key = dropout_keeps_draw(draws[at(s, b, h, i, j)], threshold);
                  const bool single = dropout_keep(seed, offset, s.heads_q, b, h, i, j, threshold);
                  ASSERT_EQ(four_key, want) << "p = " << p << " " << where(s, seed, offset, b, h, i, j);
                  ASSERT_EQ(single, want) << "p = " << p << " " << where(s, seed, offset, b, h, i, j);
                  ++decisions;
                  if (p == 0.5f) (want ? kept_half : dropped_half) += 1;
                }
              }
            }
          }
        }
      }
    }
  }
  // Not vacuous: both outcomes occur at p = 0.5.
  EXPECT_GT(kept_half, elements / 3);
  EXPECT_GT(dropped_half, elements / 3);
  std::printf("%llu draws and %llu keep decisions identical\n", static_cast<unsigned long long>(elements),
              static_cast<unsigned long long>(decisions));
}

// p = 0 keeps every element in both generators: nothing is below a threshold of 0.
TEST(DropoutRng, ZeroProbabilityKeepsEveryElement) {
  ASSERT_EQ(dropout_threshold(0.0f), 0u);
  for (const Shape& s : kShapes) {
    for (uint64_t offset : kOffsets) {
      const std::vector<uint8_t> mask = oracle::dropout_keep_mask(problem_of(s), oracle::Dropout{0.0f, 99, offset});
      for (int64_t b = 0; b < s.batch; ++b) {
        for (int64_t h = 0; h < s.heads_q; ++h) {
          for (int64_t i = 0; i < rows_of(s, b); ++i) {
            for (int64_t j = 0; j < keys_of(s, b); ++j) {
              ASSERT_TRUE(dropout_keep(99, offset, s.heads_q, b, h, i, j, 0)) << where(s, 99, offset, b, h, i, j);
              ASSERT_EQ(mask[at(s, b, h, i, j)], 1) << where(s, 99, offset, b, h, i, j);
            }
          }
        }
      }
    }
  }
}

// The threshold at floats across [0, 1): the 4096 at each end of every binade (subnormals included) and every 61st
// float between, 18.5 million in all: the kernel's conversion of p * 2^32 equals the oracle's floor.
TEST(DropoutRng, ThresholdsAgreeAcrossTheFloatsBelowOne) {
  const uint32_t one_bits = std::bit_cast<uint32_t>(1.0f);
  constexpr uint32_t kSignificands = 1u << 23, kEdge = 4096, kStride = 61;
  uint64_t checked = 0;
  for (uint32_t bits = 0; bits < one_bits;) {
    const float p = std::bit_cast<float>(bits);
    ASSERT_EQ(dropout_threshold(p), oracle::drop_threshold(p)) << "p = " << p << " (bits " << bits << ")";
    ++checked;
    const uint32_t significand = bits % kSignificands;
    if (significand < kEdge || significand >= kSignificands - kEdge) {
      bits += 1;
    } else {  // a stride, stopping at the binade's top edge
      bits += std::min(kStride, kSignificands - kEdge - significand);
    }
  }
  EXPECT_GT(checked, 18000000u);
}

// The counter's limits: rows up to 2^32 - 1, keys up to 2^34 - 1 (key groups up to 2^32 - 1), every stream word.
TEST(DropoutRng, KernelMatchesOracleAtTheCounterLimits) {
  oracle::Problem problem;
  problem.batch = 3;
  problem.heads_q = 5;
  problem.heads_kv = 1;
  problem.seqlen_q = int64_t{1} << 32;
  problem.seqlen_k = int64_t{1} << 34;
  const int64_t rows[] = {0, 1, int64_t{1} << 31, (int64_t{1} << 32) - 1};
  const int64_t keys[] = {0, 3, 4, int64_t{1} << 32, (int64_t{1} << 34) - 5, (int64_t{1} << 34) - 1};
  for (uint64_t offset : kOffsets) {
    for (float p : {0.1f, 0.5f}) {
      const oracle::Dropout dropout{p, 0x5EED5EED5EED5EEDull, offset};
      for (int64_t b = 0; b < problem.batch; ++b) {
        for (int64_t h = 0; h < problem.heads_q; ++h) {
          for (int64_t i : rows) {
            for (int64_t j : keys) {
              const bool want = oracle::dropout_kept(problem, dropout, b, h, i, j);
              ASSERT_EQ(dropout_keep(dropout.seed, offset, problem.heads_q, b, h, i, j, dropout_threshold(p)), want)
                  << "p = " << p << " offset " << offset << " b " << b << " h " << h << " i " << i << " j " << j;
            }
          }
        }
      }
    }
  }
}

// ---- The bugs, each as another mask: the contract's mask (the oracle's) against the one the bug draws.

// Elements of `s` (every one that exists) on which two masks differ; only_b and only_h restrict to one (b, h).
int64_t differing(const Shape& s, const std::vector<uint8_t>& x, const std::vector<uint8_t>& y, int64_t only_b = -1,
                  int64_t only_h = -1) {
  int64_t n = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads_q; ++h) {
      if ((only_b >= 0 && b != only_b) || (only_h >= 0 && h != only_h)) continue;
      for (int64_t i = 0; i < rows_of(s, b); ++i) {
        for (int64_t j = 0; j < keys_of(s, b); ++j) n += x[at(s, b, h, i, j)] != y[at(s, b, h, i, j)];
      }
    }
  }
  return n;
}

// A mask drawn with a stream function of the bug's: stream(b, h) gives the 64-bit stream of element (b, h, ., .).
template <class Stream>
std::vector<uint8_t> mask_with_streams(const Shape& s, uint64_t seed, float p, Stream stream) {
  std::vector<uint8_t> mask(static_cast<size_t>(s.batch * s.heads_q * s.seqlen_q * s.seqlen_k), 0);
  const uint32_t threshold = oracle::drop_threshold(p);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const uint64_t st = stream(b, h);
      for (int64_t i = 0; i < rows_of(s, b); ++i) {
        for (int64_t j = 0; j < keys_of(s, b); ++j) {
          const std::array<uint32_t, 4> words = oracle::philox4x32_10(
              {static_cast<uint32_t>(j / 4), static_cast<uint32_t>(i), static_cast<uint32_t>(st),
               static_cast<uint32_t>(st >> 32)},
              {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
          mask[at(s, b, h, i, j)] = words[j % 4] >= threshold ? 1 : 0;
        }
      }
    }
  }
  return mask;
}

const Shape kGqa = {"gqa", 2, 8, 2, 17, 67, {}, {}};
constexpr float kHalf = 0.5f;

int64_t element_count(const Shape& s) { return s.batch * s.heads_q * s.seqlen_q * s.seqlen_k; }

// An offset truncated to 32 bits (PyTorch PR #188015's wrap): past 2^32 every stream moves, and the masks differ
// in about half the elements at p = 0.5, as independent draws do.
TEST(DropoutRng, TruncatedOffsetGivesAnotherMask) {
  const Shape& s = kGqa;
  const int64_t n = element_count(s);
  for (uint64_t offset : {kTwo32, kTwo32 + 3, uint64_t{0x0123456789ABCDEF}, kAllOnes - 4}) {
    const std::vector<uint8_t> contract =
        oracle::dropout_keep_mask(problem_of(s), oracle::Dropout{kHalf, 42, offset});
    const std::vector<uint8_t> truncated =
        oracle::dropout_keep_mask(problem_of(s), oracle::Dropout{kHalf, 42, offset & 0xFFFFFFFFu});
    const int64_t d = differing(s, contract, truncated);
    EXPECT_GT(d, n * 4 / 10) << "offset " << offset << ": " << d << " of " << n << " differ";
    EXPECT_LT(d, n * 6 / 10) << "offset " << offset << ": " << d << " of " << n << " differ";
  }
}

// The stream summed in 32 bits (the carry into the high word lost): just below 2^32 the heads whose stream stays
// below 2^32 keep their masks, and every head past it gets another.
TEST(DropoutRng, StreamSummedIn32BitsGivesAnotherMaskPastTheCarry) {
  const Shape& s = kGqa;
  const uint64_t offset = kTwo32 - 5;
  const std::vector<uint8_t> contract = oracle::dropout_keep_mask(problem_of(s), oracle::Dropout{kHalf, 42, offset});
  const std::vector<uint8_t> no_carry = mask_with_streams(s, 42, kHalf, [&](int64_t b, int64_t h) {
    const uint32_t low = static_cast<uint32_t>(offset) + static_cast<uint32_t>(b * s.heads_q + h);
    return (offset & ~uint64_t{0xFFFFFFFF}) | low;
  });
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t d = differing(s, contract, no_carry, b, h);
      if (b * s.heads_q + h < 5) {
        EXPECT_EQ(d, 0) << "b " << b << " h " << h;
      } else {
        EXPECT_GT(d, 0) << "b " << b << " h " << h << ": the lost carry went unseen";
      }
    }
  }
}

// The backward regenerating with the forward's offset + 1: every head's mask changes, into the next stream's mask
// (offset counts (sequence, head) streams), so the fraction dropped per head stays as it was; only a comparison of
// masks, or of gradients, sees it.
TEST(DropoutRng, OffsetPlusOneGivesAnotherMask) {
  const Shape& s = kGqa;
  for (uint64_t offset : {uint64_t{0}, kTwo32 - 1, kAllOnes}) {
    const std::vector<uint8_t> forward = oracle::dropout_keep_mask(problem_of(s), oracle::Dropout{kHalf, 42, offset});
    const std::vector<uint8_t> backward =
        oracle::dropout_keep_mask(problem_of(s), oracle::Dropout{kHalf, 42, offset + 1});
    const int64_t heads = s.batch * s.heads_q;
    for (int64_t stream = 0; stream < heads; ++stream) {
      const int64_t b = stream / s.heads_q, h = stream % s.heads_q;
      EXPECT_GT(differing(s, forward, backward, b, h), 0) << "offset " << offset << " b " << b << " h " << h;
      if (stream + 1 < heads) {  // backward's (b, h) is forward's next stream
        const int64_t nb = (stream + 1) / s.heads_q, nh = (stream + 1) % s.heads_q;
        for (int64_t i = 0; i < s.seqlen_q; ++i) {
          for (int64_t j = 0; j < s.seqlen_k; ++j) {
            ASSERT_EQ(backward[at(s, b, h, i, j)], forward[at(s, nb, nh, i, j)]) << "offset " << offset;
          }
        }
      }
    }
  }
}

// Elements of sequence b on which heads h1 and h2 of one mask differ.
int64_t differing_heads(const Shape& s, const std::vector<uint8_t>& mask, int64_t b, int64_t h1, int64_t h2) {
  int64_t n = 0;
  for (int64_t i = 0; i < rows_of(s, b); ++i) {
    for (int64_t j = 0; j < keys_of(s, b); ++j) n += mask[at(s, b, h1, i, j)] != mask[at(s, b, h2, i, j)];
  }
  return n;
}

// The mask indexed by the K/V head: the contract gives the query heads of one group masks of their own; the bug
// (stream offset + b * heads_kv + h / group) gives them one mask, which matches the contract's only where the two
// streams coincide (b = 0, h = 0).
TEST(DropoutRng, KvHeadIndexingGivesAnotherMask) {
  const Shape& s = kGqa;
  const int64_t group = s.heads_q / s.heads_kv;
  for (uint64_t offset : {uint64_t{7}, kAllOnes - 4}) {
    const std::vector<uint8_t> contract =
        oracle::dropout_keep_mask(problem_of(s), oracle::Dropout{kHalf, 42, offset});
    const std::vector<uint8_t> by_kv_head = mask_with_streams(s, 42, kHalf, [&](int64_t b, int64_t h) {
      return offset + static_cast<uint64_t>(b * s.heads_kv + h / group);
    });
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.heads_q; ++h) {
        const int64_t d = differing(s, contract, by_kv_head, b, h);
        if (b * s.heads_q + h == b * s.heads_kv + h / group) {
          EXPECT_EQ(d, 0) << "b " << b << " h " << h;
        } else {
          EXPECT_GT(d, 0) << "b " << b << " h " << h << ": K/V-head indexing went unseen";
        }
        const int64_t first = h - h % group;  // the group's first query head
        if (h != first) {
          EXPECT_GT(differing_heads(s, contract, b, h, first), 0) << "b " << b << " h " << h;
          EXPECT_EQ(differing_heads(s, by_kv_head, b, h, first), 0) << "b " << b << " h " << h;
        }
      }
    }
  }
}

// The boundary: an element whose draw r is exactly t = floor(p * 2^32) for some float p is kept at that p (r < t is
// false) and dropped at the next float above it, by both generators. A rule r <= t, or a threshold one higher,
// would drop it at p.
TEST(DropoutRng, ThresholdBoundaryIsStrict) {
  const Shape& s = kShapes[2];
  const uint64_t seed = 3, offset = kTwo32 + 3;
  const std::vector<uint32_t> draws = kernel_draws(s, seed, offset);
  int found = 0;
  for (int64_t b = 0; b < s.batch && found < 8; ++b) {
    for (int64_t h = 0; h < s.heads_q && found < 8; ++h) {
      for (int64_t i = 0; i < s.seqlen_q && found < 8; ++i) {
        for (int64_t j = 0; j < s.seqlen_k && found < 8; ++j) {
          const uint32_t r = draws[at(s, b, h, i, j)];
          const float p = std::ldexp(static_cast<float>(r), -32);
          if (r == 0 || static_cast<double>(p) * 4294967296.0 != static_cast<double>(r)) continue;  // r not p 2^32
          ++found;
          const float above = std::nextafter(p, 1.0f);
          ASSERT_EQ(dropout_threshold(p), r);
          ASSERT_GT(dropout_threshold(above), r);
          const oracle::Problem problem = problem_of(s);
          EXPECT_TRUE(dropout_keep(seed, offset, s.heads_q, b, h, i, j, dropout_threshold(p)));
          EXPECT_TRUE(oracle::dropout_kept(problem, oracle::Dropout{p, seed, offset}, b, h, i, j));
          EXPECT_FALSE(dropout_keep(seed, offset, s.heads_q, b, h, i, j, dropout_threshold(above)));
          EXPECT_FALSE(oracle::dropout_kept(problem, oracle::Dropout{above, seed, offset}, b, h, i, j));
        }
      }
    }
  }
  EXPECT_EQ(found, 8) << "too few draws with 24 significant bits in the shape";
}

}  // namespace
}  // namespace flashcheck
