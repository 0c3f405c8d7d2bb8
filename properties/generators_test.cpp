// The generators' draws, apart from any backend: every tile shape's windowed cases reach across its K tiles.
#include "generators.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <sstream>
#include <string>

namespace flashcheck::properties {
namespace {

// The window reach of `count` cases of gen_case(default_options()) under `limits`, per tile shape.
std::map<std::string, WindowReachTally> reach_of_draws(const CaseLimits& limits, int count) {
  set_active_limits(limits);
  const rc::Gen<Case> gen = gen_case(default_options());
  std::map<std::string, WindowReachTally> table;
  for (int i = 0; i < count; ++i) {
    const Case c = gen(rc::Random(0x5eed0000u + static_cast<uint64_t>(i)), i % 100).value();
    const WindowReach w = window_reach(c);
    if (!w.tiles.empty()) table[w.tiles].add(w);
  }
  return table;
}

std::string describe(const std::map<std::string, WindowReachTally>& table) {
  std::ostringstream out;
  for (const auto& [tiles, r] : table) {
    out << "  " << tiles << ": " << r.windowed << " windowed, left edge inside a later tile " << r.left_edge_inside_later_tile
        << ", hidden first tile then low scores " << r.hidden_tile_then_low_scores << "\n";
  }
  return out.str();
}

// Every compute path and tile shape with 40 windowed draws or more: at least 15% of them with a row's window over
// three K tiles or more and its left edge inside a later tile, at least 5% with a hidden first tile then every score
// below -90; and each kernel family among them.
void expect_reach(const CaseLimits& limits, const char* tier) {
  const std::map<std::string, WindowReachTally> table = reach_of_draws(limits, 20000);
  for (const char* family : {"decode, K tile 16", "decode, K tile 32", "general-fp32", "split-tf32", "tensor-core"}) {
    int64_t windowed = 0;
    for (const auto& [tiles, r] : table) windowed += tiles.rfind(family, 0) == 0 ? r.windowed : 0;
    EXPECT_GE(windowed, 40) << tier << ": " << family << "\n" << describe(table);
  }
  for (const auto& [tiles, r] : table) {
    if (r.windowed < 40) continue;
    EXPECT_GE(100 * r.left_edge_inside_later_tile, 15 * r.windowed) << tier << ": " << tiles << "\n" << describe(table);
    EXPECT_GE(100 * r.hidden_tile_then_low_scores, 5 * r.windowed) << tier << ": " << tiles << "\n" << describe(table);
  }
}

TEST(WindowReach, EveryTileShapeOfTheGpuTierMeetsBothShares) { expect_reach(gpu_limits(), "GPU limits"); }

TEST(WindowReach, EveryTileShapeOfTheCpuTierMeetsBothShares) { expect_reach(cpu_limits(), "CPU limits"); }

}  // namespace
}  // namespace flashcheck::properties
