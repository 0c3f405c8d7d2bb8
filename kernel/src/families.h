// Kernel families and the dispatcher's contract. select_config() asks each family in order
// (tensor core, split TF32, general) whether it serves the params; the first that does runs.
// The *_select functions are host code (no CUDA) so the host model and the CPU tier see the same
// tiles the GPU would use; the *_launch functions are CUDA and exist only when FLASHCHECK_CUDA.
//
// Rounding points each family must honour (the host model and the error model rely on them):
//  general     : s = fp32 dot(q, k) (fp32 FMA chain); p = exp2f(s * scale*log2e - m * scale*log2e) in fp32;
//                l += p (fp32); acc = acc * exp2(m_old - m_new) + p * v (fp32); O = acc / l rounded to dtype.
//  tensor core : s = fp32 mma accumulation of dtype products; p = exp2(s*scale*log2e - r*scale*log2e) in fp32, where
//                the reference r is the tile's own max if that is within kRefSlackLog2 (log2 units) of the
//                running max m, else m (a tile with no usable key keeps r; common/softmax.h, tile_reference); l += fp32 p (before rounding);
//                P rounded to the dtype, acc = acc * exp2(r_old - r) + P_dtype * V (fp32 mma accumulation);
//                O = acc / l rounded to dtype; LSE and the reported m use the final r.
//  split tf32  : fp32 inputs split x = hi + lo (hi = tf32(x) rounded to nearest, ties away, as cvt.rna;
//                lo = x - hi exact, read by the tensor core as tf32 truncated toward zero); each product as
//                lo*hi' + hi*lo' and hi*hi' in fresh mma chains (the tensor core truncates every partial result,
//                so chains are kept short, small products first), each chain's result added to the running S
//                or O with one fp32 round-to-nearest add; for both Q K^T and P V. mma.sync kernel
//                (split_tf32/kernel.cuh; head_dim families 32, 256, and all of them off sm_90a): a chain is two
//                k8 steps. wgmma kernel (kernel_wgmma.cuh; families 64, 128 on sm_90a): S is two chains, one
//                per half of the head dims, s = S_a + S_b; P V is one chain per K/V tile and half of the head
//                dims. Scores a split cannot carry (non-finite or near-overflow Q/K) are recomputed as fp32 FMA
//                chains, and rows that see such a V value take an exact fp32 CUDA-core path for that tile.
#pragma once

#include <string_view>
#include <vector>

#include "common/softmax.h"
#include "flashcheck/attention.h"
#include "flashcheck/instrument.h"

// 1 in flashcheck_kernel_instrumented, 0 in flashcheck_kernel (set by kernel/CMakeLists.txt). Kernel bodies
// test it with `if constexpr`, so production code carries no instrumentation.
#ifndef FLASHCHECK_INSTRUMENT
#define FLASHCHECK_INSTRUMENT 0
#endif
#if FLASHCHECK_INSTRUMENT
#define FLASHCHECK_KERNEL_VARIANT instrumented
#else
#define FLASHCHECK_KERNEL_VARIANT production
#endif

namespace flashcheck::detail {

bool tensor_core_select(const Params& params, KernelConfig* config);  // kernel/src/tensor_core/
bool split_tf32_select(const Params& params, KernelConfig* config);   // kernel/src/split_tf32/
bool general_select(const Params& params, KernelConfig* config);      // kernel/src/general/ (serves everything valid)
bool decode_select(const Params& params, KernelConfig* config);       // kernel/src/decode/ (asked first)
// kernel/src/fp8/: every f8e4m3 problem (asked before all others; the others refuse the dtype).
bool fp8_select(const Params& params, KernelConfig* config);
inline constexpr int32_t kFp8BlockM = 128;
inline constexpr int32_t kFp8BlockN = 128;
// The decode family computes on the tensor cores (its path is kTensorCore); its configs are named decode_*.
inline bool is_decode(const KernelConfig& config) { return std::string_view(config.name).starts_with("decode"); }

// Split-KV's heuristic (num_splits = 0): the split count for a device of sm_count SMs (config.cpp); the given
// num_splits otherwise. effective_splits() passes the current device's SM count, or kModelSmCount without one,
// so that the host model splits as the GPU tier's H100 does.
inline constexpr int32_t kMaxAutoSplits = 128;
inline constexpr int64_t kModelSmCount = 132;
// The tensor-core family splits only into this many runs or more: on the H100 (bf16, N = 4096, one CTA an SM) two
// runs ran at 0.93x / 0.98x of unsplit (non-causal / causal d = 128), three 1.12x (d = 64 causal), four to six
// 1.35-1.81x (docs/design/tensor-core-kernel.md, "Split-KV").
inline constexpr int64_t kMinTensorCoreRuns = 3;
int32_t pick_splits(const Params& params, int64_t sm_count);

// A launch's grid under the test control testing::set_grid_cap (attention.h): `grid`, or the cap when one is set
// and smaller. Every family's launch passes its grid through it; the kernels loop over their work items.
int64_t capped_grid(int64_t grid);

// can_implement without check_indices: everything but the index arrays' contents (run_prechecked).
Status check_layout(const Params& params);

// Whether every row of O, Q, K and V starts on a multiple of `bytes`: the base addresses, and every stride whose
// axis has more than one index, in whole multiples (the tensors as laid out: dense, packed or paged;
// validate.cpp). The fp16/bf16 families' 16-byte copies and stores need it.
bool rows_aligned(const Params& params, int64_t bytes);

// Reads an index array (check_indices): the weak definition reads host memory; the CUDA library's reads device
// memory too.
Status read_index_array(const int32_t* src, int64_t count, std::vector<int32_t>* out);

#if defined(FLASHCHECK_HAS_CUDA)
// The production (flashcheck_kernel) and instrumented (flashcheck_kernel_instrumented) libraries compile
// the same family sources; each copy lives in its own inline namespace so one program (the harness) can
// link both without the linker merging a production kernel or launch function with its instrumented twin.
// Family sources therefore DEFINE their *_launch function, and any kernel or helper with external linkage,
// inside `namespace flashcheck::detail { inline namespace FLASHCHECK_KERNEL_VARIANT { ... } }`
// (kernels may instead sit in an anonymous namespace).
// `inst` is null in production; instrumented builds (FLASHCHECK_INSTRUMENT=1) pass device pointers.
// Preconditions: can_implement(params) is ok, and batch, heads_q, seqlen_q are all > 0.
inline namespace FLASHCHECK_KERNEL_VARIANT {
Status tensor_core_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst);
Status split_tf32_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst);
Status general_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst);
Status decode_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst);
// kernel/src/fp8/ (sm_90a builds only, FLASHCHECK_HAS_FP8).
Status fp8_launch(const Params& params, const KernelConfig& config, void* stream, const Instrumentation* inst);
// The dropout mask dump (general/dropout_mask.cu): every byte of params.dropout_mask_out from the contract and the
// visibility rule, on `stream` after the forward. Preconditions: can_implement(params) is ok, dropout_mask_out set.
Status dropout_mask_launch(const Params& params, void* stream);
// Test control (kernel_gpu_test): while on, tensor-core launches skip the warp-specialized sm_90a kernel
// (tensor_core/kernel_ws.cuh) and run the cp.async kernel, so the two can be compared on the same inputs.
// Off by default; process-wide.
void tensor_core_force_cp_async(bool on);
bool tensor_core_cp_async_forced();
}  // namespace FLASHCHECK_KERNEL_VARIANT
#endif

}  // namespace flashcheck::detail
