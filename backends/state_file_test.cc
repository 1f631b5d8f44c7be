#include "backends/state_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace sekka {
namespace {

TEST(HwmTest, StateRoundTripsThroughText) {
  StoredState s{LayoutFingerprint(Layout::Default()), 1795240486887};
  Result<StoredState> back = ParseState(FormatState(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->layout, s.layout);
  EXPECT_EQ(back->hwm_millis, s.hwm_millis);
}

TEST(HwmTest, CorruptStateIsAClearError) {
  for (const char* bad : {"", "hello\n", "sekka-state 1\nhwm_ms x\n", "sekka-state 1\nhwm_ms 5\n",
                          "sekka-state 1\nlayout a\nhwm_ms -3\n", "sekka-state 1\nwhat 1\n"}) {
    Result<StoredState> s = ParseState(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().message.find("state file is corrupt"), std::string::npos);
  }
}

TEST(HwmTest, WritesDurablyAndReadsBack) {
  // One per process: the suite's stages run this test side by side.
  const std::string dir =
      std::filesystem::temp_directory_path() / ("sekka_hwm_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/0-0.state";
  std::filesystem::remove(path);
  Result<std::optional<StoredState>> none = ReadStateFile(path);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(WriteStateFile(path, {"l", 42}).ok());
  ASSERT_TRUE(WriteStateFile(path, {"l", 43}).ok());
  Result<std::optional<StoredState>> read = ReadStateFile(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ((*read)->hwm_millis, 43);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove_all(dir);
}

TEST(HwmTest, TheFingerprintNamesEveryFieldThatGivesAnIdItsMeaning) {
  const std::string f = LayoutFingerprint(*Layout::Preset("twitter"));
  EXPECT_EQ(f,
            "time_bits=41 datacenter_bits=5 worker_bits=5 sequence_bits=12 tick_ms=1 "
            "epoch_ms=1288834974657 order=time,datacenter,worker,sequence");
}

}  // namespace
}  // namespace sekka
