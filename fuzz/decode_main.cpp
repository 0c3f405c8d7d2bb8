// flashcheck-fuzz-decode FILE...: the case line of each fuzzer input (a crash-<sha1> file, a corpus entry or
// a case-line file), one per line, so a binary crash file replays with flashcheck-repro like any finding:
//   flashcheck-repro --backend gpu "$(flashcheck-fuzz-decode crash-1234)"
// Cases over a target's cost limits are still printed, with a note on stderr (the target rejected them).
// FLASHCHECK_FUZZ_PROFILE=small|medium decodes binary inputs as fuzz_kernel did under that size profile.
// A file whose first line is meant as a case line (it begins, after blanks, with a dtype name; a CRLF line end is
// taken) and does not parse is refused with the parser's message: the fuzzers refuse such an input too, rather than
// read its bytes as a binary case. Only the first line is a fuzzer input's case: a note on stderr says so for a file
// with more lines, and for one that begins with a '#' comment (decoded as binary bytes, as the fuzzers read it).
// Exit status (flashcheck/outcome.h): 0 every file decoded to a valid case, 2 a case line that does not parse or a
// decoded case that is invalid (validate_for_run: the message names the field), 64 usage error, 66 a file cannot
// be read.
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "case_decoder.h"
#include "flashcheck/admission.h"
#include "flashcheck/cli.h"
#include "flashcheck/outcome.h"

namespace {
constexpr size_t kMaxInputBytes = size_t{1} << 20;
}  // namespace

int main(int argc, char** argv) {
  using namespace flashcheck;
  CLI::App app{"Prints the case line each fuzzer input (crash file, corpus entry, case-line file) decodes to, one per "
               "line, for flashcheck-repro.",
               "flashcheck-fuzz-decode"};
  std::vector<std::string> files;
  app.add_option("files", files, "fuzzer inputs to decode")->required();
  app.footer("example: flashcheck-repro --backend gpu \"$(flashcheck-fuzz-decode crash-1234)\"\n"
             "exit codes: 0 decoded, 2 a decoded case is invalid (rejected), 64 usage error, 66 unreadable file (or over "
             "1 MiB: no fuzzer input)");
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
    // At most kMaxInputBytes: far larger than any input the fuzzers write (ci/oss-fuzz sets -max_len 4096), so a
    // bigger file (or /dev/zero) is no fuzzer input and is refused unread past the limit.
    std::vector<uint8_t> bytes(kMaxInputBytes + 1);
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<size_t>(in.gcount()));
    if (bytes.size() > kMaxInputBytes) {
      std::fprintf(stderr, "flashcheck-fuzz-decode: %s is over %zu bytes: no fuzzer input is\n", excerpt(path).c_str(),
                   kMaxInputBytes);
      status = kExitNoInput;
      continue;
    }
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
    // What the fuzzers read of the file is one case: say so where the file looks like more (or other) text.
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const size_t newline = text.find('\n');
    const size_t head = text.find_first_not_of(" \t");
    if (mode == fuzz::DecodeMode::kText && newline != std::string_view::npos &&
        text.find_first_not_of(" \t\r\n", newline) != std::string_view::npos) {
      std::fprintf(stderr, "flashcheck-fuzz-decode: %s: only its first line is decoded (a fuzzer input is one case); a "
                   "file of case lines replays with flashcheck-repro --file\n", excerpt(path).c_str());
    } else if (mode == fuzz::DecodeMode::kBinary && head != std::string_view::npos && text[head] == '#') {
      std::fprintf(stderr, "flashcheck-fuzz-decode: %s begins with a '#' line: decoded as binary bytes, as the fuzzers "
                   "read it (no comment is skipped); a file of case lines replays with flashcheck-repro --file\n",
                   excerpt(path).c_str());
    }
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
