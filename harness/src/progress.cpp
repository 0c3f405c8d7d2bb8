// ProgressLine (progress.h): rate-limited progress lines with an estimate of the time left, on stderr.
#include "flashcheck/progress.h"

#include <cstdio>
#include <utility>

namespace flashcheck {

ProgressLine::ProgressLine(std::string what, std::string unit, double quiet_seconds, double every_seconds)
    : what_(std::move(what)), unit_(std::move(unit)), quiet_seconds_(quiet_seconds), every_seconds_(every_seconds),
      start_(Clock::now()) {}

void ProgressLine::update(int64_t done, int64_t total) {
  if (finished_ || total <= 0) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const bool complete = done >= total;
  if (complete) {
    finished_ = true;
    if (last_print_ >= 0) {
      std::fprintf(stderr, "%s: 100%% (%.3g %s), %.0f s\n", what_.c_str(), static_cast<double>(total), unit_.c_str(),
                   elapsed);
    }
    return;
  }
  if (elapsed < quiet_seconds_ || (last_print_ >= 0 && elapsed - last_print_ < every_seconds_)) return;
  last_print_ = elapsed;
  const double fraction = static_cast<double>(done) / static_cast<double>(total);
  if (done > 0) {
    const double left = elapsed * (1.0 - fraction) / fraction;
    std::fprintf(stderr, "%s: %.0f%% (%.3g of %.3g %s), %.0f s, about %.0f s left\n", what_.c_str(), 100 * fraction,
                 static_cast<double>(done), static_cast<double>(total), unit_.c_str(), elapsed, left);
  } else {
    std::fprintf(stderr, "%s: 0%% of %.3g %s, %.0f s\n", what_.c_str(), static_cast<double>(total), unit_.c_str(),
                 elapsed);
  }
}

}  // namespace flashcheck
