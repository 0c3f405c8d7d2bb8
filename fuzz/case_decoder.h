// Bytes -> Case, shared by every fuzz target and by the tools that replay their crash files.
// Two modes, chosen by the bytes alone so a crash file always decodes to the same case:
//   text   : the input is a case line (parse_case accepts it up to the first newline): findings stay readable;
//   binary : anything else; a structure-aware reading in which every byte string is a valid case (missing
//            bytes read as zero), aimed at tile boundaries through select_config's block sizes.
// Cost is bounded per target (DecodeLimits): a case over the limits is rejected, never run.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "flashcheck/attention.h"
#include "flashcheck/case.h"

namespace flashcheck::fuzz {

enum class DecodeMode : int32_t { kBinary = 0, kText = 1 };

// Case cost: work = batch * heads_q * seqlen_q * seqlen_k * head_dim (multiply-adds of one GEMM, what the
// host model and the oracle pay), elements = Q + K + V + O elements (what input generation pays).
struct DecodeLimits {
  int64_t max_work = 0;
  int64_t max_elements = 0;
};
// Host model under ASan: the model, the inputs and the oracle's sampled rows stay in the tens of milliseconds.
inline constexpr DecodeLimits kModelLimits{int64_t{1} << 20, int64_t{1} << 18};
// GPU kernel: the kernel is cheap, input generation and the sampled oracle rows on the host dominate.
inline constexpr DecodeLimits kKernelLimits{int64_t{1} << 32, int64_t{1} << 22};

// Saturating cost measures (a parsed case line can name sizes near INT64_MAX).
int64_t case_work(const Case& c);
int64_t case_elements(const Case& c);
bool within_limits(const Case& c, const DecodeLimits& limits);

// Decodes `bytes`. Text mode when the bytes up to the first newline parse as a case line; otherwise binary
// mode, which always succeeds. `mode` may be null.
Case decode_case(std::span<const uint8_t> bytes, DecodeMode* mode = nullptr);

const char* to_string(DecodeMode mode);  // "binary", "text"

}  // namespace flashcheck::fuzz
