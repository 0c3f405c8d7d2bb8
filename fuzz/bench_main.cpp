// flashcheck-fuzz-bench PROFILE RUNS [SEED]: the host side of fuzz_kernel's executions, timed per stage, without
// libFuzzer or a GPU. RUNS pseudo-random byte strings (splitmix64 from SEED) go through check_one with
// kernel_target_spec(PROFILE) on the host model instead of the kernel: decoding, input generation and the verdict
// are fuzz_kernel's own, the run stage is the host model's (on the GPU, FLASHCHECK_FUZZ_TIMING=1 times the kernel's).
// Built in the fuzz builds, so the host libraries carry the same sanitizers and coverage as in fuzz_kernel.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "check_one.h"

namespace {

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

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
  uint64_t state = argc == 4 ? std::strtoull(argv[3], nullptr, 10) : 1;
  TargetSpec spec = kernel_target_spec(profile);
  spec.name = "flashcheck-fuzz-bench";
  spec.backend = flashcheck::Backend::kHostModel;
  std::vector<uint8_t> bytes(kInputBytes);
  for (long n = 0; n < runs; ++n) {
    for (size_t i = 0; i < bytes.size(); i += 8) {
      const uint64_t word = splitmix64(&state);
      for (size_t j = 0; j < 8 && i + j < bytes.size(); ++j) bytes[i + j] = static_cast<uint8_t>(word >> (8 * j));
    }
    check_one(spec, bytes.data(), bytes.size());
  }
  std::printf("profile %s: %s\n", to_string(profile), format_stage_times(stage_times()).c_str());
  return 0;
}
