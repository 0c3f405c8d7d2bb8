// Development only: the split-TF32 kernel compiled with instrumentation (FLASHCHECK_INSTRUMENT=1) in its own
// translation unit, so split_tf32_dev can check row m/l, traces and tile-kind counters without the full build.
#define FLASHCHECK_INSTRUMENT 1
#include "split_tf32/kernel_wgmma.cuh"

namespace flashcheck::detail::instrumented::split_tf32 {

Status dev_launch_instrumented_hd64(const Params& params, const Instrumentation& inst) {
  return launch_split_tf32_wgmma<SplitTf32WgmmaConfig<64, 64>>(params, nullptr, &inst);
}

}  // namespace flashcheck::detail::instrumented::split_tf32
