// Test helper shared by the harness tests: the inputs of a case line, with gtest failures (not aborts) when
// the line does not parse or the inputs cannot be made, so the calling test reports the line.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "flashcheck/case.h"
#include "flashcheck/inputs.h"

namespace flashcheck::test {

inline HostInputs inputs_for(const std::string& line) {
  Case c;
  const Status parsed = parse_case(line, &c);
  EXPECT_TRUE(parsed.ok()) << parsed.message();
  HostInputs in;
  const Status made = make_inputs(c, &in);
  EXPECT_TRUE(made.ok()) << made.message();
  return in;
}

}  // namespace flashcheck::test
