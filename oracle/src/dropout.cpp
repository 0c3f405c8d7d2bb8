// The oracle's dropout rule (dropout.h), from docs/design/dropout-rng.md: Philox4x32-10 as the paper states it,
// round keys taken from the Weyl sequence k + r * W and each multiply-high from a full 64-bit product; the mask
// element by element, one Philox call per element, as the contract reads.
#include "flashcheck/dropout.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace flashcheck::oracle {
namespace {

// Random123's constants for Philox4x32: the two round multipliers and the Weyl increments of the key schedule.
constexpr uint32_t kMultiplier[2] = {0xD2511F53u, 0xCD9E8D57u};
constexpr uint32_t kWeyl[2] = {0x9E3779B9u, 0xBB67AE85u};
constexpr uint32_t kRounds = 10;

constexpr uint32_t high_word(uint64_t x) { return static_cast<uint32_t>(x >> 32); }
constexpr uint32_t low_word(uint64_t x) { return static_cast<uint32_t>(x & 0xFFFFFFFFu); }

// Counter words c0 = j div 4 and c1 = i hold 32 bits each.
constexpr int64_t kRowLimit = int64_t{1} << 32;
constexpr int64_t kKeyLimit = int64_t{1} << 34;

void check_probability(float p) {
  if (!(p >= 0.0f && p < 1.0f)) {  // NaN fails both comparisons
    char shown[48];
    std::snprintf(shown, sizeof shown, "%.9g", static_cast<double>(p));
    throw std::invalid_argument(std::string("oracle: dropout p = ") + shown + " is outside [0, 1)");
  }
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(const std::array<uint32_t, 4>& counter, const std::array<uint32_t, 2>& key) {
  std::array<uint32_t, 4> x = counter;
  for (uint32_t r = 0; r < kRounds; ++r) {
    // Round r's key: the seed's words plus r times the Weyl increments, modulo 2^32.
    const uint32_t round_key0 = key[0] + r * kWeyl[0];
    const uint32_t round_key1 = key[1] + r * kWeyl[1];
    // The S-box: two 32 x 32 -> 64 products of the even words; the odd words and the key mix into the high halves,
    // and the words change places.
    const uint64_t product0 = uint64_t{kMultiplier[0]} * x[0];
    const uint64_t product1 = uint64_t{kMultiplier[1]} * x[2];
    x = {high_word(product1) ^ x[1] ^ round_key0, low_word(product1),
         high_word(product0) ^ x[3] ^ round_key1, low_word(product0)};
  }
  return x;
}

uint32_t drop_threshold(float p) {
  check_probability(p);
  // p * 2^32 as an exponent shift of p (exact), then the floor; p < 1 makes it at most 2^32 - 2^8.
  return static_cast<uint32_t>(std::floor(std::ldexp(static_cast<double>(p), 32)));
}

double keep_scale(float p) {
  check_probability(p);
  return 1.0 / (1.0 - static_cast<double>(p));
}

uint32_t dropout_draw(const Dropout& dropout, int64_t heads_q, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (b < 0 || h < 0 || heads_q < 0 || i < 0 || i >= kRowLimit || j < 0 || j >= kKeyLimit) {
    throw std::out_of_range("oracle: dropout element (b " + std::to_string(b) + ", h " + std::to_string(h) +
                            ", i " + std::to_string(i) + ", j " + std::to_string(j) +
                            ") is outside the contract's counter (i < 2^32, j < 2^34, none negative)");
  }
  // The (sequence, query head) stream, 64 bits, wrapping.
  const uint64_t stream = dropout.offset + static_cast<uint64_t>(b) * static_cast<uint64_t>(heads_q) +
                          static_cast<uint64_t>(h);
  const std::array<uint32_t, 4> counter = {static_cast<uint32_t>(j / 4), static_cast<uint32_t>(i),
                                           low_word(stream), high_word(stream)};
  const std::array<uint32_t, 2> key = {low_word(dropout.seed), high_word(dropout.seed)};
  return philox4x32_10(counter, key)[static_cast<size_t>(j % 4)];
}

bool dropout_kept(const Problem& problem, const Dropout& dropout, int64_t b, int64_t h, int64_t i, int64_t j) {
  const uint32_t threshold = drop_threshold(dropout.p);
  const int64_t seqlen_q = sequence_seqlen_q(problem, b);  // throws for b outside the batch
  const int64_t seqlen_k = sequence_seqlen_k(problem, b);
  if (h < 0 || h >= problem.heads_q || i < 0 || i >= seqlen_q || j < 0 || j >= seqlen_k) {
    throw std::out_of_range("oracle: dropout element (b " + std::to_string(b) + ", h " + std::to_string(h) +
                            ", i " + std::to_string(i) + ", j " + std::to_string(j) + ") is outside the problem (" +
                            std::to_string(problem.heads_q) + " query heads, sequence of " +
                            std::to_string(seqlen_q) + " rows and " + std::to_string(seqlen_k) + " keys)");
  }
  return !(dropout_draw(dropout, problem.heads_q, b, h, i, j) < threshold);
}

std::vector<uint8_t> dropout_keep_mask(const Problem& problem, const Dropout& dropout) {
  check_sequence_lengths(problem);
  drop_threshold(dropout.p);  // p checked before any allocation
  const int64_t rows = problem.seqlen_q, keys = problem.seqlen_k;
  std::vector<uint8_t> mask(static_cast<size_t>(problem.batch * problem.heads_q * rows * keys), 0);
  for (int64_t b = 0; b < problem.batch; ++b) {
    const int64_t seqlen_q = sequence_seqlen_q(problem, b), seqlen_k = sequence_seqlen_k(problem, b);
    for (int64_t h = 0; h < problem.heads_q; ++h) {
      for (int64_t i = 0; i < seqlen_q; ++i) {
        const size_t row = static_cast<size_t>(((b * problem.heads_q + h) * rows + i) * keys);
        for (int64_t j = 0; j < seqlen_k; ++j) {
          mask[row + static_cast<size_t>(j)] = dropout_kept(problem, dropout, b, h, i, j) ? 1 : 0;
        }
      }
    }
  }
  return mask;
}

}  // namespace flashcheck::oracle
