// What the kernel reports about how it would run a problem: its configuration (compute path, tile sizes, query heads
// per tile, name) and its split-KV count. Generators aim shapes at these tiles, the error model follows the kernel's
// tiles and split runs; properties, fuzz targets and tools ask here rather than the kernel's API (fuzz_api, which
// fuzzes that API itself, is the exception). Which keys a
// row sees, for judging, is not a kernel fact: it is the oracle's predicate (judged_visible_keys, oracle_bridge.h).
#pragma once

#include <cstdint>

#include "flashcheck/attention.h"

namespace flashcheck {

// The configuration run() picks for `params` (select_config): path, block_m, block_n, head_dim_padded,
// heads_per_tile, name. Reads the fields, never the tensors or the index arrays: a case's params before its inputs
// exist (case_params) get what the bound ones run.
KernelConfig kernel_config(const Params& params);

// The split-KV runs run() divides each Q tile's K/V tiles into for `params` (effective_splits): num_splits, or the
// heuristic's pick for 0 (1 without a device).
int32_t kernel_splits(const Params& params);

}  // namespace flashcheck
