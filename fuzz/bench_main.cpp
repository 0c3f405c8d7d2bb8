// flashcheck-fuzz-bench: the host side of fuzz_kernel's executions, timed per stage, without libFuzzer or a GPU.
//   flashcheck-fuzz-bench PROFILE RUNS [SEED]         RUNS pseudo-random byte strings (Philox4x32-10 keyed by SEED)
//   flashcheck-fuzz-bench PROFILE --corpus DIR [--repeat N]   every file of DIR (a corpus: binary inputs and case
//                                                      lines), N times each: one line per file, then the total
// Each input goes through check_one with kernel_target_spec(PROFILE) on the host model instead of the kernel:
// decoding and the verdict are fuzz_kernel's own, the inputs are drawn on the host (fuzz_kernel draws them on its
// device, the same bits) and the run stage is the host model's (on the GPU, FLASHCHECK_FUZZ_TIMING=1 times
// fuzz_kernel's own stages). Built in the fuzz builds, so the host libraries carry the same sanitizers and coverage
// as in fuzz_kernel.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "check_one.h"
#include "flashcheck/cli.h"
#include "flashcheck/inputs.h"

namespace {

using flashcheck::fuzz::StageTimes;

// Bytes the binary decoder reads for a dense case with injections and features, and a few for sequences.
constexpr size_t kInputBytes = 72;

// RUNS pseudo-random inputs: counter (block, run), 16 bytes a Philox call.
void run_random(const flashcheck::fuzz::TargetSpec& spec, long runs, uint64_t seed) {
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  std::vector<uint8_t> bytes(kInputBytes);
  for (long n = 0; n < runs; ++n) {
    for (size_t i = 0; i < bytes.size(); i += 16) {
      const uint32_t counter[4] = {static_cast<uint32_t>(i / 16), static_cast<uint32_t>(n), 0, 0};
      uint32_t words[4];
      flashcheck::Philox4x32::generate(counter, key, words);
      for (size_t j = 0; j < 16 && i + j < bytes.size(); ++j) bytes[i + j] = static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)));
    }
    flashcheck::fuzz::check_one(spec, bytes.data(), bytes.size());
  }
}

// Every regular file of `dir` in name order, `repeat` times each; one line per file (its mean stage times, or
// "rejected" where check_one refused it). Returns false when the directory cannot be read.
bool run_corpus(const flashcheck::fuzz::TargetSpec& spec, const std::string& dir, int repeat) {
  std::error_code error;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  if (error) {
    std::fprintf(stderr, "flashcheck-fuzz-bench: --corpus %s: %s\n", dir.c_str(), error.message().c_str());
    return false;
  }
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const StageTimes before = flashcheck::fuzz::stage_times();
    for (int r = 0; r < repeat; ++r) flashcheck::fuzz::check_one(spec, bytes.data(), bytes.size());
    const StageTimes& after = flashcheck::fuzz::stage_times();
    const double ran = static_cast<double>(after.executions - before.executions);
    if (ran == 0) {
      std::printf("%-40s rejected\n", file.filename().c_str());
      continue;
    }
    std::printf("%-40s inputs %8.3f  run %8.3f  judge %8.3f ms, %5.1f oracle rows\n", file.filename().c_str(),
                1e3 * (after.inputs_s - before.inputs_s) / ran, 1e3 * (after.run_s - before.run_s) / ran,
                1e3 * (after.judge_s - before.judge_s) / ran,
                static_cast<double>(after.rows_checked - before.rows_checked) / ran);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashcheck::fuzz;
  CLI::App app{"Times the host side of fuzz_kernel's executions per stage (decode, inputs, run on the host model, "
               "judge) on random inputs or on a corpus.",
               "flashcheck-fuzz-bench"};
  std::string profile_name, corpus;
  long runs = -1;
  uint64_t seed = 1;
  int repeat = 1;
  app.add_option("profile", profile_name, "fuzz_kernel's size profile")
      ->required()
      ->check(CLI::IsMember({"small", "medium", "all"}));
  app.add_option("runs", runs, "pseudo-random inputs to run")->check(CLI::NonNegativeNumber);
  app.add_option("seed", seed, "the random inputs' Philox key (default 1)");
  app.add_option("--corpus", corpus, "time every file of this directory instead (one line each, then the total)");
  app.add_option("--repeat", repeat, "runs of each corpus file (default 1)")->check(CLI::PositiveNumber);
  if (const int exit = flashcheck::cli::parse(app, argc, argv); exit >= 0) return exit;
  if ((runs >= 0) == !corpus.empty()) {
    std::fprintf(stderr, "flashcheck-fuzz-bench: give RUNS or --corpus DIR, not both nor neither (--help)\n");
    return flashcheck::kExitUsage;
  }
  setenv("FLASHCHECK_FUZZ_PROFILE", profile_name.c_str(), /*overwrite=*/1);
  SizeProfile profile;
  profile_from_environment(&profile);
  TargetSpec spec = kernel_target_spec(profile);
  spec.name = "flashcheck-fuzz-bench";
  spec.backend = flashcheck::Backend::kHostModel;
  spec.draw_on = flashcheck::DrawOn::kHost;
  if (corpus.empty()) {
    run_random(spec, runs, seed);
  } else if (!run_corpus(spec, corpus, repeat)) {
    return flashcheck::kExitNoInput;
  }
  std::printf("profile %s: %s\n", to_string(profile), format_stage_times(stage_times()).c_str());
  return 0;
}
