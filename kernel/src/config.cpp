// select_config(): asks the kernel families in order of preference (tensor core, split TF32, general)
// and returns the first that serves the params. Only families compiled into this build are asked
// (FLASHCHECK_HAS_* come from kernel/CMakeLists.txt); the general family serves every valid input.
#include "families.h"
#include "flashcheck/attention.h"
#include "common/host_device.h"

#include <algorithm>
#include <atomic>

#include "decode/tiles.h"

namespace flashcheck {

KernelConfig select_config(const Params& params) {
  KernelConfig config;
  // The inference path (sequences, paged caches, split-KV) runs in the general family, which implements all of it
  // for every dtype and head_dim. The tensor-core family also serves contiguous sequences (varlen prefill: packed
  // Q and K/V, seqused_k) and split-KV over contiguous K/V; paged caches it leaves to the decode and general
  // families, and the split-TF32 family serves dense unsplit problems only (num_splits = 0 leaves the split count
  // to the heuristic, pick_splits). The sizes tell it too, so that params whose index arrays are not bound yet (a
  // case's params before its inputs exist) select what the bound ones run. V and O of other columns than Q and K
  // (head_dim_v != head_dim) run in the general family too: every other family's select refuses them.
  // Dropout (dropout_p > 0) runs in the general family alone, every dtype: its kernel is the one that draws the mask
  // (one Philox call per four keys of a row) and applies it to P V; the other families never see it.
  if (params.dropout_p > 0.0f) {
    detail::general_select(params, &config);
    return config;
  }
  // fp8 inputs take the fp8 path alone (kernel/src/fp8/select.cpp); no other family reads e4m3.
  if (detail::fp8_select(params, &config)) return config;
  const bool paged = params.page_table != nullptr || params.page_size != 0;
  const bool inference_path = paged || params.num_splits > 1 || params.cu_seqlens_q != nullptr ||
                              params.cu_seqlens_k != nullptr || params.seqused_k != nullptr || params.total_q != 0 ||
                              params.total_k != 0;
#if defined(FLASHCHECK_HAS_DECODE)
  // Decoding shapes (every query row of a K/V head's query heads in one 16-row tile), dense or not.
  if (detail::decode_select(params, &config)) return config;
#endif
#if defined(FLASHCHECK_HAS_TENSOR_CORE)
  if (!paged && detail::tensor_core_select(params, &config)) return config;
#endif
  if (!inference_path) {
#if defined(FLASHCHECK_HAS_SPLIT_TF32)
    if (detail::split_tf32_select(params, &config)) return config;
#endif
  }
  detail::general_select(params, &config);
  return config;
}

namespace detail {
int32_t pick_splits(const Params& params, int64_t sm_count) {
  if (params.num_splits != 0) return params.num_splits;
  if (params.dropout_p > 0.0f) return 1;  // split-KV draws no dropout mask (can_implement refuses num_splits > 1)
  const KernelConfig config = select_config(params);
  if (config.block_m < 1 || config.block_n < 1 || sm_count < 1) return 1;
  if (config.path == ComputePath::kSplitTf32 || config.path == ComputePath::kTensorCoreFp8) {
    return 1;  // the families without split-KV
  }
  // Enough work items fill the GPU unsplit. Otherwise split until about two blocks per SM run (the decode family:
  // one wave of its warps; the tensor-core family: one wave of one CTA an SM), each run keeping at least two K/V
  // tiles (fewer and the combine's traffic outweighs the parallelism).
  const int64_t items =
      ceil_div(params.seqlen_q, config.block_m) * (params.heads_q / std::max(config.heads_per_tile, 1)) * params.batch;
  const int64_t k_tiles = ceil_div(params.seqlen_k, config.block_n);
  const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(k_tiles / 2, kMaxAutoSplits));
  if (items <= 0) return 1;
  if (is_decode(config)) {
    // A decode work item is one warp: split until the warps fill one wave of CTAs, one CTA an SM. The launch runs at
    // the pace of its busiest SM, so an even wave reads faster than a fuller one of smaller CTAs in which some SMs
    // hold three CTAs and others two (docs/design/inference-path.md).
    const int64_t target = sm_count * decode::resident_warps(config.head_dim_padded);
    return static_cast<int32_t>(std::clamp<int64_t>(target / items, 1, cap));
  }
  if (config.path == ComputePath::kTensorCore) {
    // The warp-specialized kernel holds one CTA an SM: floor(SMs / items) runs per Q tile fill at most one wave
    // (runs spilling into a second wave would end no sooner than the unsplit items). The partials and the combine
    // cost about as much as two runs save: split only into kMinTensorCoreRuns or more.
    const int64_t runs = std::min(sm_count / items, cap);
    return runs >= kMinTensorCoreRuns ? static_cast<int32_t>(runs) : 1;
  }
  const int64_t target = 2 * sm_count;
  if (items >= target) return 1;
  return static_cast<int32_t>(std::min<int64_t>(ceil_div(target, items), cap));
}

int64_t capped_grid(int64_t grid) {
  const int64_t cap = testing::grid_cap();
  return cap > 0 && grid > cap ? cap : grid;
}

}  // namespace detail

namespace testing {
namespace {
std::atomic<int64_t> g_grid_cap{0};
}  // namespace
void set_grid_cap(int64_t cap) { g_grid_cap.store(cap > 0 ? cap : 0, std::memory_order_relaxed); }
int64_t grid_cap() { return g_grid_cap.load(std::memory_order_relaxed); }
}  // namespace testing

}  // namespace flashcheck
