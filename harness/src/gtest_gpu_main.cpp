// main() of every GPU test binary (CTest label gpu, linked by flashcheck_gtest): selects the CUDA device of
// the test's CTest resource allocation before any test touches the runtime, then runs the tests. Run by hand,
// the binary keeps the current device. A malformed allocation, or one naming a device this process cannot
// see, fails the binary with the reason rather than testing the wrong GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include "flashcheck/device.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  flashcheck::DeviceChoice choice;
  if (flashcheck::Status s = flashcheck::select_device_from_environment(&choice); !s.ok()) {
    std::fprintf(stderr, "flashcheck: device selection failed: %s\n", s.message().c_str());
    return 1;
  }
  if (choice.from_ctest) std::printf("flashcheck: %s\n", choice.reason.c_str());
  return RUN_ALL_TESTS();
}
