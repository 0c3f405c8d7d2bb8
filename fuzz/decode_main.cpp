// flashcheck-fuzz-decode FILE...: the case line of each fuzzer input (a crash-<sha1> file, a corpus entry or
// a case-line file), one per line, so a binary crash file replays with flashcheck-repro like any finding:
//   flashcheck-repro --backend gpu "$(flashcheck-fuzz-decode crash-1234)"
// Cases over a target's cost limits are still printed, with a note on stderr (the target rejected them).
// FLASHCHECK_FUZZ_PROFILE=small|medium decodes binary inputs as fuzz_kernel did under that size profile.
// A file whose first line is meant as a case line (it begins with a dtype name) and does not parse is refused with
// the parser's message: the fuzzers refuse such an input too, rather than read its bytes as a binary case.
// Exit status (flashcheck/outcome.h): 0 every file decoded to a valid case, 2 a case line that does not parse or a
// decoded case that is invalid (validate_for_run: the message names the field), 64 usage error, 66 a file cannot
// be read.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "case_decoder.h"
#include "flashcheck/admission.h"
#include "flashcheck/cli.h"
#include "flashcheck/outcome.h"

int main(int argc, char** argv) {
  using namespace flashcheck;
  CLI::App app{"Prints the case line each fuzzer input (crash file, corpus entry, case-line file) decodes to, one per "
               "line, for flashcheck-repro.",
               "flashcheck-fuzz-decode"};
  std::vector<std::string> files;
  app.add_option("files", files, "fuzzer inputs to decode")->required();
  app.footer("example: flashcheck-repro --backend gpu \"$(flashcheck-fuzz-decode crash-1234)\"\n"
             "exit codes: 0 decoded, 2 a decoded case is invalid (rejected), 64 usage error, 66 unreadable file");
  if (const int early = cli::parse(app, argc, argv); early >= 0) return early;

  fuzz::SizeProfile profile;
  if (!fuzz::profile_from_environment(&profile)) {
    std::fprintf(stderr, "flashcheck-fuzz-decode: unknown FLASHCHECK_FUZZ_PROFILE (small, medium, all)\n");
    return kExitUsage;
  }
  int status = exit_code(Outcome::kPass);
  for (const std::string& path : files) {
    std::ifstream in;
    if (!cli::open_input_file(path, &in, std::ios::binary)) {
      std::fprintf(stderr, "flashcheck-fuzz-decode: cannot read %s\n", excerpt(path).c_str());
      status = kExitNoInput;
      continue;
    }
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    fuzz::DecodeMode mode;
    Case c;
    if (const Status parsed = fuzz::decode_case(bytes, &c, &mode, profile); !parsed.ok()) {
      // A case line that does not parse: the fuzzers never ran it, and there is no case to print.
      std::fprintf(stderr, "flashcheck-fuzz-decode: %s is a case line that does not parse: %s\n", excerpt(path).c_str(),
                   parsed.message().c_str());
      if (status == exit_code(Outcome::kPass)) status = exit_code(Outcome::kRejected);
      continue;
    }
    std::printf("%s\n", format_case(c).c_str());
    if (const Status valid = validate_for_run(c); !valid.ok()) {
      std::fprintf(stderr, "flashcheck-fuzz-decode: %s decodes (%s) to an invalid case: %s\n", excerpt(path).c_str(),
                   fuzz::to_string(mode), valid.message().c_str());
      if (status == exit_code(Outcome::kPass)) status = exit_code(Outcome::kRejected);
    } else if (!fuzz::within_limits(c, fuzz::kKernelLimits)) {
      std::fprintf(stderr,
                   "flashcheck-fuzz-decode: %s decodes (%s) to a case over fuzz_kernel's cost limit (never run by the "
                   "fuzzers)\n",
                   excerpt(path).c_str(), fuzz::to_string(mode));
    } else if (!fuzz::within_limits(c, fuzz::kModelLimits)) {
      std::fprintf(stderr, "flashcheck-fuzz-decode: %s decodes (%s) to a case over fuzz_model's cost limit (fuzz_kernel only)\n",
                   excerpt(path).c_str(), fuzz::to_string(mode));
    }
  }
  return status;
}
