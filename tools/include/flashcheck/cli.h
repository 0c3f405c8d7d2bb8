// Command-line conventions shared by the flashcheck tools (CLI11): one parse call that turns --help into
// exit 0 and any malformed command line (unknown option, a number that does not parse, a value outside its
// set) into a message naming the option and kExitUsage, and the exit-code table every --help ends with.
// Tools include this header only; the harness and the libraries never see CLI11.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "flashcheck/budget.h"
#include "flashcheck/case.h"
#include "flashcheck/outcome.h"

namespace flashcheck::cli {

// The README's "Exit codes" table, as the footer of every tool's --help.
inline constexpr const char* kExitCodesHelp =
    "exit codes (the most severe outcome over all cases):\n"
    "  0 pass   1 fail (numerical check or guard)   2 rejected (invalid input; the message names the field)\n"
    "  3 unsupported (valid, no kernel serves it)   4 outside the error model's domain (nothing claimed)\n"
    "  64 usage error   66 input file unreadable   69 backend unavailable (no CUDA device)\n"
    "  78 the subject (--subject) cannot be loaded or is malformed";

// --memory-cap's values: a size parse_memory_size (budget.h) reads.
inline const CLI::Validator kMemorySize(
    [](std::string& value) -> std::string {
      int64_t bytes = 0;
      const Status s = parse_memory_size(value, &bytes);
      return s.ok() ? std::string() : s.message();
    },
    "SIZE");

// Cases per dtype a tool takes on its command line: an overnight run in one process (a longer one runs several
// seeds), few enough that the case list the tools build before the first case fits in memory.
inline constexpr int64_t kMaxCasesPerDtype = 100'000;
inline const CLI::Validator kCaseCount = CLI::Range(int64_t{0}, kMaxCasesPerDtype);

// A decimal uint64 (seeds), read as case lines read theirs (parse_u64): the conversion alone would take "-1" and
// wrap, and saturate past the top.
inline const CLI::Validator kDecimalU64(
    [](std::string& value) -> std::string {
      uint64_t parsed = 0;
      std::string reason;
      return parse_u64(value, &parsed, &reason)
                 ? std::string()
                 : "'" + value + "' is not a decimal integer in [0, 18446744073709551615] (" + reason + ")";
    },
    "UINT64");

// An output file (--json) the run can write: checked before the first case, so that a run does not end in an
// unwritable path. PATH itself is written at the end (a FIFO, a device or a symlink's target as it is), so the check
// creates nothing: PATH exists and is writable and no directory, or its directory exists and takes a new file.
inline bool writable_output(const std::string& path) {
  std::error_code ec;
  if (path.empty()) return false;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (std::filesystem::exists(status)) {
    return !std::filesystem::is_directory(status) && ::access(path.c_str(), W_OK) == 0;
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return std::filesystem::is_directory(dir, ec) && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

// Parses argv into `app`'s options. Returns -1 to go on, or the exit status to return from main (0 after
// --help, kExitUsage after a message on stderr for a malformed command line).
inline int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  return -1;
}

// Opens an input file the tools read (--file, --cases, a fuzz input): false for one that cannot be read, a directory
// included (an ifstream opens a directory on Linux and reads nothing), so that every tool answers kExitNoInput.
inline bool open_input_file(const std::string& path, std::ifstream* in,
                            std::ios::openmode mode = std::ios::in) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return false;
  in->open(path, mode);
  return in->is_open();
}

}  // namespace flashcheck::cli
