#include "finding.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "flashcheck/inputs.h"

namespace flashcheck::fuzz {
namespace {

std::string g_prefix = "./";

bool write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

void init_artifact_prefix(int argc, char** argv) {
  if (const char* env = std::getenv("FLASHCHECK_FUZZ_ARTIFACTS"); env && *env) {
    g_prefix = env;
    if (g_prefix.back() != '/') g_prefix += '/';
  }
  constexpr std::string_view kFlag = "-artifact_prefix=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, kFlag.size()) == kFlag) g_prefix = std::string(arg.substr(kFlag.size()));
  }
}

const std::string& artifact_prefix() { return g_prefix; }

std::string write_finding(std::string_view target, std::string_view backend, const Case& c, const std::string& report) {
  const std::string line = format_case(c);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(fnv1a64(reinterpret_cast<const uint8_t*>(line.data()), line.size())));
  const std::string stem = g_prefix + "finding-" + hash;
  // The report starts with the case line (Verdict::report); target and backend say where it failed.
  const std::string details =
      "target: " + std::string(target) + "\nbackend: " + std::string(backend) + "\n\n" + report + "\n";
  if (!write_file(stem + ".case", line + "\n") || !write_file(stem + ".txt", details)) return "";
  return stem + ".case";
}

void report_finding(std::string_view target, std::string_view backend, const Case& c, const std::string& report) {
  const std::string path = write_finding(target, backend, c, report);
  std::fprintf(stderr, "\n==flashcheck== FINDING in %.*s (%.*s backend)\n%s\n", static_cast<int>(target.size()),
               target.data(), static_cast<int>(backend.size()), backend.data(), report.c_str());
  if (path.empty()) {
    std::fprintf(stderr, "==flashcheck== could not write the finding under '%s'; the case line is:\n%s\n",
                 g_prefix.c_str(), format_case(c).c_str());
  } else if (!c.subject.empty()) {  // the line names the subject: replay on its library
    const char* library = std::getenv("FLASHCHECK_SUBJECT");
    std::fprintf(stderr,
                 "==flashcheck== case line written to %s\n==flashcheck== replay: flashcheck-repro --subject %s --file %s\n",
                 path.c_str(), library != nullptr ? library : "PATH", path.c_str());
  } else {
    std::fprintf(
        stderr,
        "==flashcheck== case line written to %s\n==flashcheck== replay: flashcheck-repro --backend %.*s --file %s\n",
        path.c_str(), static_cast<int>(backend.size()), backend.data(), path.c_str());
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace flashcheck::fuzz
