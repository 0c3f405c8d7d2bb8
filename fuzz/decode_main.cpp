// flashcheck-fuzz-decode FILE...: the case line of each fuzzer input (a crash-<sha1> file, a corpus entry or
// a case-line file), one per line, so a binary crash file replays with flashcheck-repro like any finding:
//   flashcheck-repro --backend gpu "$(flashcheck-fuzz-decode crash-1234)"
// Cases over a target's cost limits are still printed, with a note on stderr (the target rejected them).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "case_decoder.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE...  (prints the case line each fuzzer input decodes to)\n", argv[0]);
    return 2;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i]);
      status = 1;
      continue;
    }
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    flashcheck::fuzz::DecodeMode mode;
    const flashcheck::Case c = flashcheck::fuzz::decode_case(bytes, &mode);
    std::printf("%s\n", flashcheck::format_case(c).c_str());
    if (!flashcheck::fuzz::within_limits(c, flashcheck::fuzz::kKernelLimits)) {
      std::fprintf(stderr, "%s: %s decodes (%s) to a case over fuzz_kernel's cost limit (never run by the fuzzers)\n",
                   argv[0], argv[i], flashcheck::fuzz::to_string(mode));
    } else if (!flashcheck::fuzz::within_limits(c, flashcheck::fuzz::kModelLimits)) {
      std::fprintf(stderr, "%s: %s decodes (%s) to a case over fuzz_model's cost limit (fuzz_kernel only)\n", argv[0],
                   argv[i], flashcheck::fuzz::to_string(mode));
    }
  }
  return status;
}
