// Names of the masks as case lines and reports write them: the one table behind to_string(Mask) and the
// case codec's parser (the dtype names live in the dtype table, dtype.h), and which masks take a window
// (Params::window_left / window_right; the case line's window=L,R). One row per Mask enumerator; names are
// unique, so name -> mask -> name is the identity.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "flashcheck/attention.h"

namespace flashcheck {

struct MaskName {
  Mask mask;
  const char* name;
  bool takes_window;  // window_left / window_right mean something (else both must be -1)
};
inline constexpr std::array<MaskName, 5> kMaskNames = {{
    {Mask::kNone, "none", false},
    {Mask::kCausalBottomRight, "causal-br", false},
    {Mask::kCausalTopLeft, "causal-tl", false},
    {Mask::kWindowBottomRight, "window-br", true},
    {Mask::kWindowTopLeft, "window-tl", true},
}};

constexpr std::optional<Mask> mask_from_name(std::string_view name) {
  for (const MaskName& entry : kMaskNames) {
    if (name == entry.name) return entry.mask;
  }
  return std::nullopt;
}

// False for a value outside the enum too.
constexpr bool takes_window(Mask mask) {
  for (const MaskName& entry : kMaskNames) {
    if (mask == entry.mask) return entry.takes_window;
  }
  return false;
}

}  // namespace flashcheck
