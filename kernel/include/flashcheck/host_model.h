// Host model of the kernel's tiled algorithm: the same tiling (select_config's block sizes), the same
// order of K/V tiles and rescaling, the same rounding points (fp32 arithmetic, dtype roundings where the
// kernel rounds). It lets the CPU tier run every property against the real algorithm without a GPU.
// Params are the kernel's, with host pointers. Not bit-identical to the GPU (fp32 summation order inside
// a dot product differs), but bound by the same error model.
#pragma once

#include "flashcheck/attention.h"
#include "flashcheck/instrument.h"

namespace flashcheck {

// Deliberate defects, to show that the verdicts catch them (docs/error-model.md). Never used in production.
enum class ModelDefect : int32_t {
  kNone = 0,
  kPOneFormatCoarser = 1,  // P rounded one step down the ladder fp32 -> fp16 -> bf16 -> fp8 e4m3 from the
                           // format the path keeps P in (fp32 on kGeneralFp32/kSplitTf32, the dtype on kTensorCore)
  kOAccumInDtype = 2,      // the O accumulator rounded to the input dtype after every K/V tile
  kMissingRescale = 3,     // the last K/V tile's update skips the exp(m_old - m_new) rescale of O
  kLseBase2 = 4,           // LSE reported in base 2 (m*log2e + log2 l)
  kSplitMergeUnscaled = 5, // split-KV runs merged without their exp2(m_run - m) factors
  kReadsPastSeqused = 6,   // a sequence's keys run to its memory's end (its packed rows, its last page's slots),
                           // not to seqused_k
};
const char* to_string(ModelDefect defect);

struct HostModelOptions {
  // Path and tiles to model; by default what select_config(params) picks for the GPU.
  bool override_config = false;
  KernelConfig config;
  ModelDefect defect = ModelDefect::kNone;
  Instrumentation instrumentation;  // host pointers
};

// Validates with can_implement(), then computes O and LSE into params.o / params.lse (host memory).
Status run_host_model(const Params& params, const HostModelOptions& options = {});

}  // namespace flashcheck
