// flashcheck-mutants: the mutant catalogue (flashcheck/mutants.h) as a table or as JSON, and whether this build
// compiled it into the kernels (-DFLASHCHECK_MUTANTS=ON, preset gpu-mutants); with --model, the host model's
// planted defects (flashcheck/host_model.h), which every build has. tools/mutation_test.py reads the JSON;
// FLASHCHECK_MUTANT=<name> selects a mutant in the kernels of such a build, FLASHCHECK_PLANT=<name> a defect.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

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
               "FLASHCHECK_MUTANT=<name> switches on (docs/mutation-testing.md).",
               "flashcheck-mutants"};
  bool json = false, model = false;
  app.add_flag("--json", json, "print the catalogue as JSON: {\"compiled_in\": bool, \"mutants\": [...]}");
  app.add_flag("--model", model,
               "the host model's planted defects instead (FLASHCHECK_PLANT=<name>; compiled into every build)");
  app.footer("exit codes: 0 the catalogue printed, 64 usage error");
  if (const int code = flashcheck::cli::parse(app, argc, argv); code >= 0) return code;

  // One entry of either catalogue, as the table and the JSON print it.
  struct Entry {
    const char* name;
    const char* family;
    const char* bug_class;
    const char* description;
  };
  std::vector<Entry> entries;
  if (model) {
    for (const flashcheck::ModelDefectInfo& d : flashcheck::kModelDefects) {
      if (d.id != flashcheck::ModelDefect::kNone) entries.push_back({d.name, "host model", d.bug_class, d.description});
    }
  } else {
    for (const flashcheck::MutantInfo& m : flashcheck::kMutants) {
      if (m.id != flashcheck::Mutant::kNone) entries.push_back({m.name, m.family, m.bug_class, m.description});
    }
  }
  const bool compiled_in = model || kCompiledIn;  // the host model's defects are in every build

  if (json) {
    nlohmann::json out;
    out["compiled_in"] = compiled_in;
    out["mutants"] = nlohmann::json::array();
    for (const Entry& e : entries) {
      out["mutants"].push_back(
          {{"name", e.name}, {"family", e.family}, {"bug_class", e.bug_class}, {"description", e.description}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (model) {
    std::printf("host-model defects (FLASHCHECK_PLANT selects one):\n");
  } else {
    std::printf("mutants compiled into this build's kernels: %s\n",
                kCompiledIn ? "yes (FLASHCHECK_MUTANT selects one)" : "no (configure with -DFLASHCHECK_MUTANTS=ON)");
  }
  for (const Entry& e : entries) std::printf("%-34s %-12s %-30s %s\n", e.name, e.family, e.bug_class, e.description);
  return 0;
}
