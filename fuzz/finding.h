// Findings of the fuzz targets: the case line and its report, written to the artifact directory before the
// target aborts, so an overnight run leaves a replayable line even when the crash itself loses the process.
// The case line is the whole input: it regenerates Q, K and V bit for bit (harness/inputs.h), so no tensor
// bytes are stored; the report carries the inputs' FNV-1a hash to confirm that a replay saw the same bits.
#pragma once

#include <string>
#include <string_view>

#include "flashcheck/case.h"

namespace flashcheck::fuzz {

// The directory (or file-name prefix) for findings: libFuzzer's -artifact_prefix= when given on the command
// line, else $FLASHCHECK_FUZZ_ARTIFACTS, else the current directory. Call from LLVMFuzzerInitialize.
void init_artifact_prefix(int argc, char** argv);
const std::string& artifact_prefix();

// Writes <prefix>finding-<hash>.case (the case line) and <prefix>finding-<hash>.txt (target, backend and
// report), hash = FNV-1a of the case line; returns the .case path ("" if it could not be written).
std::string write_finding(std::string_view target, std::string_view backend, const Case& c, const std::string& report);

// write_finding, then a one-paragraph notice with the replay command on stderr, then abort(): libFuzzer
// records the raw input as crash-<sha1> next to the finding.
[[noreturn]] void report_finding(std::string_view target, std::string_view backend, const Case& c,
                                 const std::string& report);

}  // namespace flashcheck::fuzz
