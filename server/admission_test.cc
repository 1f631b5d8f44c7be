// The admission rules (server/admission.h) under FakeClock, case by case. The end-to-end tests
// (tests/hostile_test.py, tests/server_test.py) drive the same rules through the real binary.
#include "server/admission.h"

#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace sekka::server {
namespace {

TEST(AuthHostTest, EveryLoopbackAddressIsOneHost) {
  EXPECT_EQ(AuthHost("127.0.0.1"), "loopback");
  EXPECT_EQ(AuthHost("127.8.9.10"), "loopback");
  EXPECT_EQ(AuthHost("::1"), "loopback");
  EXPECT_EQ(AuthHost("::ffff:127.0.0.2"), "loopback");
}

TEST(AuthHostTest, AnIpv4MappedAddressIsItsIpv4Address) {
  EXPECT_EQ(AuthHost("::ffff:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(AuthHost("10.1.2.3"), "10.1.2.3");
}

TEST(AuthHostTest, AnIpv6AddressIsItsSlash64) {
  EXPECT_EQ(AuthHost("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
  EXPECT_EQ(AuthHost("2001:db8:1:2::9"), AuthHost("2001:db8:1:2:ffff::1"));
  EXPECT_NE(AuthHost("2001:db8:1:2::9"), AuthHost("2001:db8:1:3::9"));
}

TEST(AuthHostTest, ALinkLocalAddressIsItsSlash64WhateverItsZone) {
  EXPECT_EQ(AuthHost("fe80::1%eth0"), "fe80::");
  EXPECT_EQ(AuthHost("fe80::1%eth0"), AuthHost("fe80::2:3%eth1"));
  EXPECT_EQ(AuthHost("fe80::1%2"), AuthHost("fe80::9"));
}

class AuthTurnsTest : public ::testing::Test {
 protected:
  FakeClock clock_{1'700'000'000'000};
  AuthTurns turns_{clock_};
};

TEST_F(AuthTurnsTest, RightCredentialsOnAQuietHostAreAnsweredAtOnce) {
  EXPECT_EQ(turns_.Turn("10.0.0.1", false), 0);
  EXPECT_EQ(turns_.Turn("10.0.0.1", false), 0);
}

TEST_F(AuthTurnsTest, EachFailureTakesTheHostsTurn) {
  EXPECT_EQ(turns_.Turn("10.0.0.1", true), 0);
  EXPECT_EQ(turns_.Turn("10.0.0.1", true), kAuthFailureSpacingMs);
  EXPECT_EQ(turns_.Turn("10.0.0.1", true), 2 * kAuthFailureSpacingMs);
}

TEST_F(AuthTurnsTest, RightCredentialsWaitBehindFailuresButTakeNoTurn) {
  turns_.Turn("10.0.0.1", true);
  EXPECT_EQ(turns_.Turn("10.0.0.1", false), kAuthFailureSpacingMs);
  EXPECT_EQ(turns_.Turn("10.0.0.1", false), kAuthFailureSpacingMs);
}

TEST_F(AuthTurnsTest, AnotherHostKeepsItsOwnTurn) {
  turns_.Turn("10.0.0.1", true);
  turns_.Turn("10.0.0.1", true);
  EXPECT_EQ(turns_.Turn("10.0.0.2", true), 0);
}

TEST_F(AuthTurnsTest, TurnsComeDueAsTimePasses) {
  turns_.Turn("10.0.0.1", true);
  turns_.Turn("10.0.0.1", true);
  clock_.AdvanceMillis(2 * kAuthFailureSpacingMs);
  EXPECT_EQ(turns_.Turn("10.0.0.1", false), 0);
}

TEST_F(AuthTurnsTest, AWaitPastTheLimitIsRefusedAndTakesNoTurn) {
  const std::int64_t queued = kMaxAuthWaitMs / kAuthFailureSpacingMs + 1;
  for (std::int64_t i = 0; i < queued; ++i) ASSERT_TRUE(turns_.Turn("10.0.0.1", true));
  EXPECT_EQ(turns_.Turn("10.0.0.1", true), std::nullopt);
  EXPECT_EQ(turns_.Turn("10.0.0.1", false), std::nullopt);
  clock_.AdvanceMillis(kAuthFailureSpacingMs);
  EXPECT_EQ(turns_.Turn("10.0.0.1", false), kMaxAuthWaitMs);
}

TEST_F(AuthTurnsTest, AWallClockStepMovesNoTurn) {
  turns_.Turn("10.0.0.1", true);
  clock_.SetMillis(0);
  EXPECT_EQ(turns_.Turn("10.0.0.1", false), kAuthFailureSpacingMs);
}

TEST(MemoryWeightTest, AConnectionTheClientDoesNotHoldUpWeighsNothing) {
  const ConnectionLoad c{.buffered = 1 << 20};
  EXPECT_EQ(MemoryWeight(c, 10'000, [] { return true; }), 0u);
}

TEST(MemoryWeightTest, AnUnfinishedRequestCountsOnceItIsOld) {
  const ConnectionLoad c{.partial_since_ms = 10'000, .buffered = 4096};
  EXPECT_EQ(MemoryWeight(c, 10'000 + kStallAgeMs - 1, [] { return false; }), 0u);
  EXPECT_EQ(MemoryWeight(c, 10'000 + kStallAgeMs, [] { return false; }), 4096u);
}

TEST(MemoryWeightTest, AnOldWriteCountsOnlyWhenTheClientStalls) {
  const ConnectionLoad c{.write_since_ms = 10'000, .buffered = 4096};
  int asked = 0;
  auto stalled = [&] { return ++asked, true; };
  EXPECT_EQ(MemoryWeight(c, 10'000 + kStallAgeMs - 1, stalled), 0u);
  EXPECT_EQ(asked, 0);  // a young write takes no drain mark
  EXPECT_EQ(MemoryWeight(c, 10'000 + kStallAgeMs, stalled), 4096u);
  EXPECT_EQ(MemoryWeight(c, 10'000 + kStallAgeMs, [] { return false; }), 0u);
}

TEST(MemoryWeightTest, RepliesHeldForAnAuthTurnCount) {
  const ConnectionLoad c{.held = true, .buffered = 4096};
  EXPECT_EQ(MemoryWeight(c, 10'000, [] { return false; }), 4096u);
}

TEST(DrainWatchTest, TheFirstLookOfAWriteOnlyTakesAMark) {
  DrainWatch w;
  EXPECT_FALSE(w.Stalled(0, 1000, 10'000, 10'000));
}

TEST(DrainWatchTest, AClientThatAcknowledgesTooSlowlyStalls) {
  DrainWatch w;
  w.Stalled(0, 100'000, 10'000, 10'000);
  EXPECT_TRUE(w.Stalled(1000, 99'000, 10'000, 10'000 + kStallAgeMs));
}

TEST(DrainWatchTest, AClientThatReadsAtSpeedDoesNot) {
  DrainWatch w;
  w.Stalled(0, 4 << 20, 10'000, 10'000);
  EXPECT_FALSE(w.Stalled(2 << 20, 2 << 20, 10'000, 11'000));  // 2 MiB in 1 s
}

TEST(DrainWatchTest, ALookSoonerThanTheStallAgeJudgesNothing) {
  DrainWatch w;
  w.Stalled(0, 100'000, 10'000, 10'000);
  EXPECT_FALSE(w.Stalled(0, 100'000, 10'000, 10'000 + kStallAgeMs - 1));
  EXPECT_TRUE(w.Stalled(0, 100'000, 10'000, 10'000 + kStallAgeMs));
}

TEST(DrainWatchTest, NothingQueuedIsNoStall) {
  DrainWatch w;
  w.Stalled(0, 100, 10'000, 10'000);
  EXPECT_FALSE(w.Stalled(100, 0, 10'000, 20'000));
}

TEST(DrainWatchTest, AMarkOfAnEarlierWriteIsNotThisOnes) {
  DrainWatch w;
  w.Stalled(0, 100, 10'000, 10'000);
  EXPECT_FALSE(w.Stalled(0, 100, 20'000, 20'500));  // a new write: a new mark
  EXPECT_TRUE(w.Stalled(0, 100, 20'000, 20'500 + kStallAgeMs));
}

TEST(SlowSenderWeightTest, OnlyARequestArrivingForTheAgeIsASlowSender) {
  EXPECT_EQ(SlowSenderWeight(0, 50'000), 0);
  EXPECT_EQ(SlowSenderWeight(50'000 - kSlowSenderAgeMs + 1, 50'000), 0);
  EXPECT_EQ(SlowSenderWeight(50'000 - kSlowSenderAgeMs, 50'000), 1);
}

TEST(SlowSenderWeightTest, TheLongestArrivingWeighsMost) {
  EXPECT_GT(SlowSenderWeight(40'000, 50'000), SlowSenderWeight(45'000, 50'000));
}

TEST(RequestOverdueTest, ARequestIsOverdueAtItsTimeout) {
  EXPECT_FALSE(RequestOverdue(0, 50'000, 1000));
  EXPECT_FALSE(RequestOverdue(49'001, 50'000, 1000));
  EXPECT_TRUE(RequestOverdue(49'000, 50'000, 1000));
}

}  // namespace
}  // namespace sekka::server
