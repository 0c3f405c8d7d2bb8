// Names of the masks as case lines and reports write them: the one table behind to_string(Mask) and the
// case codec's parser (the dtype names live in the dtype table, dtype.h). One row per Mask enumerator;
// names are unique, so name -> mask -> name is the identity.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "flashcheck/attention.h"

namespace flashcheck {

struct MaskName {
  Mask mask;
  const char* name;
};
inline constexpr std::array<MaskName, 5> kMaskNames = {{
    {Mask::kNone, "none"},
    {Mask::kCausalBottomRight, "causal-br"},
    {Mask::kCausalTopLeft, "causal-tl"},
    {Mask::kWindowBottomRight, "window-br"},
    {Mask::kWindowTopLeft, "window-tl"},
}};

constexpr std::optional<Mask> mask_from_name(std::string_view name) {
  for (const MaskName& entry : kMaskNames) {
    if (name == entry.name) return entry.mask;
  }
  return std::nullopt;
}

}  // namespace flashcheck
