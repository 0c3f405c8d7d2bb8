// The oracle's dropout rule, written from docs/design/dropout-rng.md and sharing nothing with the kernel: which
// elements of P a dropout of probability p keeps, and the factor kept elements are scaled by. Element (b, h, i, j)
// (sequence, query head, query row and key within the sequence) draws word j mod 4 of Philox4x32-10 at counter
// (j div 4, i, lo32(s), hi32(s)) with s = offset + b * heads_q + h modulo 2^64, key (lo32(seed), hi32(seed)); it is
// dropped iff that draw is below floor(p * 2^32), and a kept element is scaled by 1 / (1 - p).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "flashcheck/oracle_problem.h"

namespace flashcheck::oracle {

// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11; Random123's
// philox4x32 with 10 rounds): four 32-bit output words of a 128-bit counter under a 64-bit key.
std::array<uint32_t, 4> philox4x32_10(const std::array<uint32_t, 4>& counter, const std::array<uint32_t, 2>& key);

// Dropout (the drop probability, seed and offset) is declared in oracle_problem.h, a field of Problem.

// t = floor(p * 2^32): an element is dropped iff its draw is below t, with probability exactly t / 2^32: p itself
// for every p >= 2^-9 (whose p * 2^32 is an integer), less than 2^-32 below p for smaller p. std::invalid_argument
// for NaN or p outside [0, 1).
uint32_t drop_threshold(float p);

// The factor of a kept element, 1 / (1 - p), in double: within 2^-52 relative of the exact factor, and the exact
// factor rounded once where 1 - p is exact in double (p = 0, which gives 1, and p >= 2^-30). std::invalid_argument
// as drop_threshold.
double keep_scale(float p);

// The 32-bit draw of element (b, h, i, j) of a call with heads_q query heads: the definition, for any indices with
// b, h >= 0, 0 <= i < 2^32 and 0 <= j < 2^34 (the counter words' range; std::out_of_range past it). It does not ask
// whether the element exists: see dropout_kept.
uint32_t dropout_draw(const Dropout& dropout, int64_t heads_q, int64_t b, int64_t h, int64_t i, int64_t j);

// Is element (b, h, i, j) of `problem` kept? The problem gives the shape: batch, heads_q and each sequence's own
// lengths (sequence_seqlen_q / sequence_seqlen_k; inputs, head dims, visibility and heads_kv are not read: the mask
// is drawn per query head, whatever key the row sees). std::out_of_range for an element outside the problem (b
// outside the batch, h outside the query heads, i or j past the sequence's lengths), std::invalid_argument for
// malformed lengths (as sequence_seqlen_q) or p (as drop_threshold).
bool dropout_kept(const Problem& problem, const Dropout& dropout, int64_t b, int64_t h, int64_t i, int64_t j);

// The whole mask, [batch, heads_q, seqlen_q, seqlen_k] contiguous: 1 where the element is kept, 0 where it is
// dropped and where there is no element (rows or keys past the sequence's own lengths). Throws as dropout_kept.
std::vector<uint8_t> dropout_keep_mask(const Problem& problem, const Dropout& dropout);

}  // namespace flashcheck::oracle
