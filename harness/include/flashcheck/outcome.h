// The outcomes of checking one case and the exit codes of every flashcheck tool (flashcheck-repro,
// flashcheck-report, flashcheck-fuzz-decode), in one place so that the tools, their tests and the README's
// "Exit codes" table cannot disagree. A run over several cases exits with its most severe outcome
// (fail > rejected > unsupported > outside the domain > pass). Usage and environment errors come from the
// BSD sysexits range, so they never collide with an outcome.
#pragma once

#include <cstddef>

#include "flashcheck/attention.h"

namespace flashcheck {

enum class Outcome : int {
  kPass = 0,           // every check within its bound
  kFail = 1,           // a numerical check or a guard failed: a kernel (or model) bug, or an error-model bug
  kRejected = 2,       // invalid input (case line or Params), the message names the field
  kUnsupported = 3,    // valid input that no compiled kernel serves
  kOutsideDomain = 4,  // ran, but every checked row lies outside the error model's domain: nothing was claimed
};
inline constexpr size_t kOutcomeCount = 5;  // Outcome values are 0 .. kOutcomeCount - 1 (tallies index by them)

inline constexpr int kExitUsage = 64;        // bad command line (EX_USAGE): unknown option, malformed number
inline constexpr int kExitNoInput = 66;      // an input file cannot be read (EX_NOINPUT)
inline constexpr int kExitUnavailable = 69;  // the requested backend is absent, e.g. no CUDA device (EX_UNAVAILABLE)
inline constexpr int kExitCantCreate = 73;   // an output file cannot be written (EX_CANTCREAT)

constexpr int exit_code(Outcome outcome) { return static_cast<int>(outcome); }
// A run stopped by a signal (flashcheck-report on SIGINT or SIGTERM: Ctrl-C, `timeout`) after writing what it judged:
// 128 + the signal's number, as a shell reports a process the signal ended (130, 143).
constexpr int exit_interrupted(int signal_number) { return 128 + signal_number; }

// Upper case, as the verdict line prints it: PASS, FAIL, REJECTED, UNSUPPORTED, OUTSIDE-DOMAIN.
constexpr const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
      return "PASS";
    case Outcome::kFail:
      return "FAIL";
    case Outcome::kRejected:
      return "REJECTED";
    case Outcome::kUnsupported:
      return "UNSUPPORTED";
    case Outcome::kOutsideDomain:
      return "OUTSIDE-DOMAIN";
  }
  return "FAIL";
}

// Severity rank for combining several cases' outcomes (higher is worse).
constexpr int severity(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
      return 0;
    case Outcome::kOutsideDomain:
      return 1;
    case Outcome::kUnsupported:
      return 2;
    case Outcome::kRejected:
      return 3;
    case Outcome::kFail:
      return 4;
  }
  return 4;
}

constexpr Outcome most_severe(Outcome a, Outcome b) { return severity(b) > severity(a) ? b : a; }

// The outcome of a call that did not run: invalid arguments are rejected, unserved shapes unsupported; any
// other error (CUDA) is a failure.
constexpr Outcome outcome_of(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return Outcome::kPass;
    case StatusCode::kInvalidArgument:
      return Outcome::kRejected;
    case StatusCode::kUnsupported:
      return Outcome::kUnsupported;
    default:
      return Outcome::kFail;
  }
}

}  // namespace flashcheck
