// The masks in one table, read from flashcheck/masks.def: the names case lines and reports write (behind
// to_string(Mask) and the case codec's parser; dtype names live in dtype.h), which masks take a window
// (Params::window_left / window_right; the case line's window=L,R), each mask's alignment and fixed window (the
// kernel's visibility rule and the oracle bridge read them), and the generators' weights. One row per Mask
// enumerator; names are unique, so name -> mask -> name is the identity.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "flashcheck/attention.h"

namespace flashcheck {

// The diagonal key a(i) of query row i that a window is around.
enum class Alignment : int32_t {
  kTopLeft = 0,      // a(i) = i
  kBottomRight = 1,  // a(i) = i + seqlen_k - seqlen_q: the last row's diagonal is the last key
};

struct MaskName {
  Mask mask;
  const char* name;
  int32_t c_code;     // FC_MASK_* (attention_c.h) and FC_SUBJECT_MASK_* (subject.h)
  bool takes_window;  // window_left / window_right mean something (else both must be -1)
  Alignment alignment;
  int64_t fixed_left;   // the window of a mask that takes none (-1: unbounded); causal is (-1, 0)
  int64_t fixed_right;
  int case_weight;      // relative share of generated cases
};
inline constexpr std::array kMaskNames = {
#define FC_MASK_ROW(c_suffix, enumerator, code, name, takes_window, alignment, left, right, weight) \
  MaskName{Mask::enumerator, name, code, takes_window != 0, Alignment::alignment, left, right, weight},
#include "flashcheck/masks.def"
#undef FC_MASK_ROW
};

// The row of `mask`, or null for a value outside the enum.
constexpr const MaskName* find_mask(Mask mask) {
  for (const MaskName& entry : kMaskNames) {
    if (entry.mask == mask) return &entry;
  }
  return nullptr;
}

constexpr std::optional<Mask> mask_from_name(std::string_view name) {
  for (const MaskName& entry : kMaskNames) {
    if (name == entry.name) return entry.mask;
  }
  return std::nullopt;
}

// False for a value outside the enum too.
constexpr bool takes_window(Mask mask) {
  const MaskName* entry = find_mask(mask);
  return entry != nullptr && entry->takes_window;
}

// The window sides a mask applies: Params' for a mask that takes a window, else the row's fixed ones.
struct WindowSides {
  int64_t left = -1;
  int64_t right = -1;
};
constexpr WindowSides window_sides(const MaskName& entry, int64_t window_left, int64_t window_right) {
  return entry.takes_window ? WindowSides{window_left, window_right} : WindowSides{entry.fixed_left, entry.fixed_right};
}

}  // namespace flashcheck
