// Bytes -> Case, shared by every fuzz target and by the tools that replay their crash files.
// Two modes, chosen by the bytes alone so a crash file always decodes to the same case:
//   text   : the input's first line is a case line (blanks before it and a CRLF end taken): findings stay readable;
//   binary : anything else; a structure-aware reading in which every byte string is a valid case (missing
//            bytes read as zero), aimed at tile boundaries through kernel_config's block sizes.
// Cost is bounded per target (DecodeLimits): a case over the limits is rejected, never run. A size profile
// (SizeProfile) bounds the GPU target's cases further: the binary decoder clamps its sizes into the profile (every
// byte string still decodes, to a case inside it), a case line outside it is rejected.
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
// The host memory a fuzz target's make_inputs may take.
inline constexpr int64_t kMaxInputBytes = int64_t{1} << 30;

// Saturating cost measures (a parsed case line can name sizes near INT64_MAX).
int64_t case_work(const Case& c);
int64_t case_elements(const Case& c);
bool within_limits(const Case& c, const DecodeLimits& limits);

// Size profiles of fuzz_kernel (FLASHCHECK_FUZZ_PROFILE=small|medium|all), so that small and medium cases are fuzzed
// (and their rates measured) apart. Both sides count rows of the whole problem, what input generation, the copies
// and the kernel pay for: rows = query rows, batch * heads_q * seqlen_q (heads_q times the sum of the sequences'
// q with sequences); keys = key rows, batch * heads_kv * seqlen_k (heads_kv times the sum of the sequences' key
// capacities with sequences), so no row sees more keys than that either.
//   all    : no bound beyond the target's DecodeLimits (the mapping from bytes to cases of the stored corpora)
//   small  : rows <= 256, keys <= 1024
//   medium : rows <= 4096, keys <= 8192; the binary decoder's "any length" seqlens step by 2048 instead of 256, so
//            that lengths reach past the small profile's
enum class SizeProfile : int32_t { kAll = 0, kSmall = 1, kMedium = 2 };
struct SizeBounds {
  int64_t max_rows = 0;  // 0: unbounded
  int64_t max_keys = 0;
};
SizeBounds size_bounds(SizeProfile profile);
const char* to_string(SizeProfile profile);  // "all", "small", "medium"
// FLASHCHECK_FUZZ_PROFILE (unset or empty: all); false for an unknown name.
bool profile_from_environment(SizeProfile* profile);
int64_t case_rows(const Case& c);      // saturating
int64_t case_key_rows(const Case& c);  // saturating
bool within_profile(const Case& c, SizeProfile profile);

// Decodes `bytes` into *out. Text mode when the bytes up to the first newline are printable ASCII whose first
// word is a dtype name, as in every case line: the line is parsed (returned as parsed, whatever the
// profile: the caller rejects one outside it), and a line that does not parse is refused with parse_case's
// message (kInvalidArgument), never read as binary: a case-line file with a typo is an error, not some other case.
// Otherwise binary mode, which always succeeds and gives a case inside `profile`. `mode` may be null. A crash file
// decodes to its case under the profile it ran with (flashcheck-fuzz-decode reads FLASHCHECK_FUZZ_PROFILE too).
Status decode_case(std::span<const uint8_t> bytes, Case* out, DecodeMode* mode = nullptr,
                   SizeProfile profile = SizeProfile::kAll);

const char* to_string(DecodeMode mode);  // "binary", "text"

}  // namespace flashcheck::fuzz
