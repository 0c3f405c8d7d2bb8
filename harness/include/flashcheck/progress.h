// Progress of a long run on stderr: "<what>: 37% (4.9e+08 of 1.3e+09 terms), 6 s, about 10 s left". Quiet for
// the first quiet_seconds (short runs, and ctest's output, see nothing), then one line at most every
// every_seconds, and a last line at 100% once anything was printed. The estimate assumes the rate so far holds.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "flashcheck/oracle.h"

namespace flashcheck {

class ProgressLine {
 public:
  explicit ProgressLine(std::string what, std::string unit = "terms", double quiet_seconds = 2.0,
                        double every_seconds = 2.0);
  void update(int64_t done, int64_t total);
  // update() as a callback (JudgeOptions::progress, oracle::RowsOptions::progress); *this must outlive it.
  oracle::ProgressFn callback() {
    return [this](int64_t done, int64_t total) { update(done, total); };
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_, unit_;
  double quiet_seconds_, every_seconds_;
  Clock::time_point start_;
  double last_print_ = -1.0;  // seconds after start_ of the last line; < 0: none yet
  bool finished_ = false;
};

}  // namespace flashcheck
