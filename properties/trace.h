// Per-tile online-softmax traces for the invariants property: the (m, l) pair of sampled rows after every
// K/V tile, and the tile-kind and rescale counters, from the host model (HostModelOptions::instrumentation)
// or from the instrumented GPU build (run_instrumented with device buffers; compiled only into the
// instrumented GPU property binary, FLASHCHECK_TRACE_GPU=1). Slots a backend leaves unwritten keep
// kTracePoisonBits, so "not recorded" is told apart from any value the algorithm can produce.
#pragma once

#include <cstdint>
#include <vector>

#include "flashcheck/host_model.h"
#include "flashcheck/inputs.h"
#include "flashcheck/instrument.h"
#include "flashcheck/runner.h"

namespace flashcheck::properties {

inline constexpr uint32_t kTracePoisonBits = 0x7FC0FACEu;  // a NaN payload no backend computes
bool is_trace_poison(float x);

struct Trace {
  std::vector<int64_t> rows;  // flat row indices (b * heads_q + h) * seqlen_q + i
  int32_t max_tiles = 0;
  std::vector<float> m, l;    // [rows.size() * max_tiles]
  std::vector<uint64_t> tile_kind_counts = std::vector<uint64_t>(kTileKindCount, 0);
  std::vector<uint64_t> rescale_buckets = std::vector<uint64_t>(kRescaleBuckets, 0);
};

// Runs `in` on `backend` recording `trace->rows` for up to `trace->max_tiles` tiles (both set by the caller).
// kUnsupported when this binary has no instrumented GPU build.
Status run_traced(const HostInputs& in, Backend backend, ModelDefect defect, Trace* trace);

}  // namespace flashcheck::properties
