// fuzz_model (CPU, ASan + UBSan): the host model of the tiled algorithm against the oracle. Cases stay under
// kModelLimits; cases up to 64 rows are checked in full, larger ones on the oracle's sampled rows (tile
// boundaries, masked rows, diagonal crossings) plus 8 random rows: the oracle dominates an execution.
// FLASHCHECK_FUZZ_MODEL_DEFECT=<defect> (names as to_string(ModelDefect), e.g. missing-rescale) fuzzes a
// deliberately broken model: the fuzzer must find it (the fuzz_model_finds_defect test).
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "check_one.h"
#include "finding.h"
#include "flashcheck/host_model.h"

namespace {

flashcheck::fuzz::TargetSpec g_spec;

flashcheck::ModelDefect defect_from_env() {
  const char* name = std::getenv("FLASHCHECK_FUZZ_MODEL_DEFECT");
  if (!name || !*name) return flashcheck::ModelDefect::kNone;
  flashcheck::ModelDefect defect = flashcheck::ModelDefect::kNone;
  if (flashcheck::parse_model_defect(name, &defect)) return defect;
  std::fprintf(stderr, "fuzz_model: unknown FLASHCHECK_FUZZ_MODEL_DEFECT '%s'\n", name);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  flashcheck::fuzz::init_artifact_prefix(*argc, *argv);
  const flashcheck::ModelDefect defect = defect_from_env();
  if (defect != flashcheck::ModelDefect::kNone) {
    std::fprintf(stderr, "fuzz_model: fuzzing the host model with the planted defect '%s'\n",
                 flashcheck::to_string(defect));
  }
  g_spec.name = "fuzz_model";
  g_spec.backend = flashcheck::Backend::kHostModel;
  g_spec.limits = flashcheck::fuzz::kModelLimits;
  g_spec.judge.full_check_limit = 64;
  g_spec.judge.random_rows = 8;
  g_spec.run.model.defect = defect;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return flashcheck::fuzz::check_one(g_spec, data, size);
}
