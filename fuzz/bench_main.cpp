// flashcheck-fuzz-bench PROFILE RUNS [SEED]: the host side of fuzz_kernel's executions, timed per stage, without
// libFuzzer or a GPU. RUNS pseudo-random byte strings (the inputs' Philox4x32-10 keyed by SEED) go through check_one with
// kernel_target_spec(PROFILE) on the host model instead of the kernel: decoding, input generation and the verdict
// are fuzz_kernel's own, the run stage is the host model's (on the GPU, FLASHCHECK_FUZZ_TIMING=1 times the kernel's).
// Built in the fuzz builds, so the host libraries carry the same sanitizers and coverage as in fuzz_kernel.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check_one.h"
#include "flashcheck/inputs.h"

namespace {

// Bytes the binary decoder reads for a dense case with injections and features, and a few for sequences.
constexpr size_t kInputBytes = 72;

}  // namespace

int main(int argc, char** argv) {
  using namespace flashcheck::fuzz;
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: flashcheck-fuzz-bench small|medium|all RUNS [SEED]\n");
    return 64;
  }
  setenv("FLASHCHECK_FUZZ_PROFILE", argv[1], /*overwrite=*/1);
  SizeProfile profile;
  if (!profile_from_environment(&profile)) {
    std::fprintf(stderr, "flashcheck-fuzz-bench: unknown profile '%s' (small, medium, all)\n", argv[1]);
    return 64;
  }
  const long runs = std::strtol(argv[2], nullptr, 10);
  const uint64_t seed = argc == 4 ? std::strtoull(argv[3], nullptr, 10) : 1;
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  TargetSpec spec = kernel_target_spec(profile);
  spec.name = "flashcheck-fuzz-bench";
  spec.backend = flashcheck::Backend::kHostModel;
  spec.draw_on = flashcheck::DrawOn::kHost;
  std::vector<uint8_t> bytes(kInputBytes);
  for (long n = 0; n < runs; ++n) {
    // Counter (block, run): 16 bytes a Philox call.
    for (size_t i = 0; i < bytes.size(); i += 16) {
      const uint32_t counter[4] = {static_cast<uint32_t>(i / 16), static_cast<uint32_t>(n), 0, 0};
      uint32_t words[4];
      flashcheck::Philox4x32::generate(counter, key, words);
      for (size_t j = 0; j < 16 && i + j < bytes.size(); ++j) bytes[i + j] = static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)));
    }
    check_one(spec, bytes.data(), bytes.size());
  }
  std::printf("profile %s: %s\n", to_string(profile), format_stage_times(stage_times()).c_str());
  return 0;
}
