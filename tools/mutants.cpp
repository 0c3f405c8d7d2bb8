// flashcheck-mutants: the mutant catalogue (flashcheck/mutants.h) as a table or as JSON, and whether this build
// compiled it into the kernels (-DFLASHCHECK_MUTANTS=ON, preset gpu-mutants); with --model, the host model's
// planted defects (flashcheck/host_model.h), which every build has. tools/mutation_test.py reads the JSON;
// FLASHCHECK_MUTANT=<name> selects a mutant in the kernels of such a build, FLASHCHECK_PLANT=<name> a defect.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "flashcheck/cli.h"
#include "flashcheck/host_model.h"
#include "flashcheck/mutants.h"

namespace {

#if defined(FLASHCHECK_MUTANTS) && FLASHCHECK_MUTANTS
constexpr bool kCompiledIn = true;
#else
constexpr bool kCompiledIn = false;
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The mutant catalogue: realistic kernel bugs that a -DFLASHCHECK_MUTANTS=ON build compiles in and "
               "FLASHCHECK_MUTANT=<name> switches on (docs/mutation-testing.md)."};
  bool json = false, model = false;
  app.add_flag("--json", json, "print the catalogue as JSON: {\"compiled_in\": bool, \"mutants\": [...]}");
  app.add_flag("--model", model,
               "the host model's planted defects instead (FLASHCHECK_PLANT=<name>; compiled into every build)");
  app.footer(flashcheck::cli::kExitCodesHelp);
  if (const int code = flashcheck::cli::parse(app, argc, argv); code >= 0) return code;

  if (model) {
    nlohmann::json out;
    out["compiled_in"] = true;
    out["mutants"] = nlohmann::json::array();
    for (const flashcheck::ModelDefectInfo& d : flashcheck::kModelDefects) {
      if (d.id == flashcheck::ModelDefect::kNone) continue;
      if (json) {
        out["mutants"].push_back({{"name", d.name}, {"family", "host model"}, {"bug_class", d.bug_class},
                                  {"description", d.description}});
      } else {
        std::printf("%-34s %-12s %-30s %s\n", d.name, "host model", d.bug_class, d.description);
      }
    }
    if (json) std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  if (json) {
    nlohmann::json out;
    out["compiled_in"] = kCompiledIn;
    out["mutants"] = nlohmann::json::array();
    for (const flashcheck::MutantInfo& m : flashcheck::kMutants) {
      if (m.id == flashcheck::Mutant::kNone) continue;
      out["mutants"].push_back({{"name", m.name}, {"family", m.family}, {"bug_class", m.bug_class},
                                {"description", m.description}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("mutants compiled into this build's kernels: %s\n", kCompiledIn ? "yes (FLASHCHECK_MUTANT selects one)"
                                                                              : "no (configure with -DFLASHCHECK_MUTANTS=ON)");
  for (const flashcheck::MutantInfo& m : flashcheck::kMutants) {
    if (m.id == flashcheck::Mutant::kNone) continue;
    std::printf("%-34s %-12s %-30s %s\n", m.name, m.family, m.bug_class, m.description);
  }
  return 0;
}
