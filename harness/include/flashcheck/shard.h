// Deterministic sharding of a property run over GPUs (or machines): FLASHCHECK_SHARD=i/n makes a property
// binary run shard i of n. A run of N cases with base seed B is n RapidCheck runs: shard i checks
// shard_cases(N, s) cases drawn from seed shard_seed(B, s). The shares add up to N, no two shards share a
// seed, and the same (N, B, i/n) always gives the same cases; 0/1 is the unsharded run (seed B, N cases).
// A failing case prints its case line and RapidCheck's reproduce string, both replayable on one GPU.
#pragma once

#include <cstdint>
#include <string_view>

#include "flashcheck/attention.h"

namespace flashcheck {

struct Shard {
  int index = 0;  // 0 <= index < count
  int count = 1;
};

// "i/n" with whole numbers 0 <= i < n; kInvalidArgument names the text otherwise.
Status parse_shard(std::string_view text, Shard* out);

// The shard's share of `total` cases: total / n, one more for the first total % n shards.
int64_t shard_cases(int64_t total, Shard shard);
// Index of the shard's first case in 0..total-1: the shards cover consecutive, disjoint ranges.
int64_t shard_first_case(int64_t total, Shard shard);
// The shard's RapidCheck seed: `base` itself for an unsharded run, else base mixed with the index (SplitMix64,
// a bijection, so distinct indices give distinct seeds).
uint64_t shard_seed(uint64_t base, Shard shard);

}  // namespace flashcheck
