// Device selection from a CTest resource allocation, on the host: the parser of CTEST_RESOURCE_GROUP_<g>_GPUS
// (the strings CTest writes, and malformed ones), and the choice from a fake environment with a fake device
// count (two "GPUs" of a spec on a host with two devices, one, or none). No CUDA call is made.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "flashcheck/device.h"

namespace flashcheck {
namespace {

TEST(ResourceSlots, ParsesTheFormCTestWrites) {
  std::vector<ResourceSlot> slots;
  ASSERT_TRUE(parse_resource_slots("id:0,slots:1", &slots).ok());
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].id, "0");
  EXPECT_EQ(slots[0].slots, 1);

  // Two requirements of one group ("gpus:1,gpus:2") on two GPUs.
  ASSERT_TRUE(parse_resource_slots("id:1,slots:1;id:gpu_7,slots:2", &slots).ok());
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0].id, "1");
  EXPECT_EQ(slots[1].id, "gpu_7");
  EXPECT_EQ(slots[1].slots, 2);
}

TEST(ResourceSlots, RejectsMalformedValuesNamingTheEntry) {
  const char* const kBad[] = {
      "",                // nothing
      "0",               // a bare id
      "id:0",            // no slots
      "slots:1,id:0",    // fields swapped
      "id:,slots:1",     // empty id
      "id:GPU0,slots:1", // upper case
      "id:0,slots:0",    // no slot
      "id:0,slots:-1",   // negative
      "id:0,slots:1x",   // trailing garbage
      "id:0,slots:99999999999",  // overflow
      "id:0,slots:1;",   // empty second entry
      "id:0, slots:1",   // space
  };
  for (const char* value : kBad) {
    std::vector<ResourceSlot> slots{{"stale", 3}};
    const Status s = parse_resource_slots(value, &slots);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << value << "'";
    EXPECT_TRUE(slots.empty()) << "'" << value << "'";
    EXPECT_FALSE(s.message().empty());
  }
  std::vector<ResourceSlot> slots;
  EXPECT_NE(parse_resource_slots("id:0,slots:1;id:1,slot:1", &slots).message().find("id:1,slot:1"),
            std::string::npos);
}

// A process environment in a map.
EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(ChooseDevice, RunByHandKeepsTheCurrentDevice) {
  DeviceChoice choice;
  ASSERT_TRUE(choose_device(fake_env({}), 4, &choice).ok());
  EXPECT_EQ(choice.device, -1);
  EXPECT_FALSE(choice.from_ctest);
  // A stray GPUS variable without CTest's group count is not an allocation.
  ASSERT_TRUE(choose_device(fake_env({{"CTEST_RESOURCE_GROUP_0_GPUS", "id:3,slots:1"}}), 4, &choice).ok());
  EXPECT_EQ(choice.device, -1);
}

TEST(ChooseDevice, TwoSpecGpusOnTwoDevicesGetOneEach) {
  for (int id = 0; id < 2; ++id) {
    DeviceChoice choice;
    const std::string slot = "id:" + std::to_string(id) + ",slots:1";
    ASSERT_TRUE(choose_device(fake_env({{"CTEST_RESOURCE_GROUP_COUNT", "1"}, {"CTEST_RESOURCE_GROUP_0", "gpus"},
                                        {"CTEST_RESOURCE_GROUP_0_GPUS", slot}}),
                              2, &choice)
                    .ok());
    EXPECT_EQ(choice.device, id);
    EXPECT_TRUE(choice.from_ctest);
    EXPECT_NE(choice.reason.find("CUDA device " + std::to_string(id)), std::string::npos) << choice.reason;
  }
}

TEST(ChooseDevice, ASpecGpuThisProcessCannotSeeIsAnError) {
  // The fake spec's two GPUs on a host that shows one device: id 1 names no device.
  DeviceChoice choice;
  const Status s = choose_device(
      fake_env({{"CTEST_RESOURCE_GROUP_COUNT", "1"}, {"CTEST_RESOURCE_GROUP_0_GPUS", "id:1,slots:1"}}), 1, &choice);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("only 1 CUDA device"), std::string::npos) << s.message();
  EXPECT_EQ(choice.device, -1);
  // id 0 of the same spec is fine.
  ASSERT_TRUE(choose_device(fake_env({{"CTEST_RESOURCE_GROUP_COUNT", "1"},
                                      {"CTEST_RESOURCE_GROUP_0_GPUS", "id:0,slots:1"}}),
                            1, &choice)
                  .ok());
  EXPECT_EQ(choice.device, 0);
}

TEST(ChooseDevice, NoDeviceSelectsNothingSoTestsSkip) {
  DeviceChoice choice;
  ASSERT_TRUE(choose_device(fake_env({{"CTEST_RESOURCE_GROUP_COUNT", "1"},
                                      {"CTEST_RESOURCE_GROUP_0_GPUS", "id:1,slots:1"}}),
                            0, &choice)
                  .ok());
  EXPECT_EQ(choice.device, -1);
  EXPECT_TRUE(choice.from_ctest);
}

TEST(ChooseDevice, AGroupWithoutGpusKeepsTheCurrentDevice) {
  DeviceChoice choice;
  ASSERT_TRUE(choose_device(fake_env({{"CTEST_RESOURCE_GROUP_COUNT", "1"}, {"CTEST_RESOURCE_GROUP_0", "cores"},
                                      {"CTEST_RESOURCE_GROUP_0_CORES", "id:0,slots:4"}}),
                            2, &choice)
                  .ok());
  EXPECT_EQ(choice.device, -1);
}

TEST(ChooseDevice, MalformedAllocationsAreErrors) {
  const std::map<std::string, std::string> kBad[] = {
      {{"CTEST_RESOURCE_GROUP_COUNT", "x"}},
      {{"CTEST_RESOURCE_GROUP_COUNT", "0"}},
      {{"CTEST_RESOURCE_GROUP_COUNT", "1"}, {"CTEST_RESOURCE_GROUP_0_GPUS", "id:0"}},
      {{"CTEST_RESOURCE_GROUP_COUNT", "1"}, {"CTEST_RESOURCE_GROUP_0_GPUS", "id:gpu_a,slots:1"}},
  };
  for (const auto& vars : kBad) {
    DeviceChoice choice;
    const Status s = choose_device(fake_env(vars), 2, &choice);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << vars.begin()->second;
    EXPECT_EQ(choice.device, -1);
  }
}

}  // namespace
}  // namespace flashcheck
