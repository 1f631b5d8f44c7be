// The admission rules (server/admission.h) under FakeClock, case by case. The end-to-end tests
// (tests/hostile_test.py, tests/server_test.py) drive the same rules through the real binary.
#include "server/admission.h"

#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace sekka::server {
namespace {

TEST(ClientHostTest, EveryIpv4AddressCountsApartLoopbackToo) {
  EXPECT_EQ(ClientHost("127.0.0.1"), "127.0.0.1");
  EXPECT_NE(ClientHost("127.0.0.1"), ClientHost("127.0.0.2"));
  EXPECT_EQ(ClientHost("::ffff:127.0.0.2"), "127.0.0.2");
}

TEST(ClientHostTest, AnIpv4MappedAddressIsItsIpv4Address) {
  EXPECT_EQ(ClientHost("::ffff:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(ClientHost("10.1.2.3"), "10.1.2.3");
}

TEST(ClientHostTest, AnIpv6AddressIsItsSlash64) {
  EXPECT_EQ(ClientHost("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
  EXPECT_EQ(ClientHost("2001:db8:1:2::9"), ClientHost("2001:db8:1:2:ffff::1"));
  EXPECT_NE(ClientHost("2001:db8:1:2::9"), ClientHost("2001:db8:1:3::9"));
}

TEST(ClientHostTest, ALinkLocalAddressIsItsSlash64WhateverItsZone) {
  EXPECT_EQ(ClientHost("fe80::1%eth0"), "fe80::");
  EXPECT_EQ(ClientHost("fe80::1%eth0"), ClientHost("fe80::2:3%eth1"));
  EXPECT_EQ(ClientHost("fe80::1%2"), ClientHost("fe80::9"));
}

class AuthTurnsTest : public ::testing::Test {
 protected:
  FakeClock clock_{1'700'000'000'000};
  Turns turns_{clock_, kAuthFailureSpacingMs, 1, kMaxAuthWaitMs};
};

TEST_F(AuthTurnsTest, AFailureOnAQuietHostIsAnsweredAtOnce) {
  EXPECT_EQ(turns_.Take("10.0.0.1"), 0);
}

TEST_F(AuthTurnsTest, EachFailureTakesTheHostsTurn) {
  EXPECT_EQ(turns_.Take("10.0.0.1"), 0);
  EXPECT_EQ(turns_.Take("10.0.0.1"), kAuthFailureSpacingMs);
  EXPECT_EQ(turns_.Take("10.0.0.1"), 2 * kAuthFailureSpacingMs);
}

TEST_F(AuthTurnsTest, AnotherHostKeepsItsOwnTurn) {
  turns_.Take("10.0.0.1");
  turns_.Take("10.0.0.1");
  EXPECT_EQ(turns_.Take("10.0.0.2"), 0);
}

TEST_F(AuthTurnsTest, TurnsComeDueAsTimePasses) {
  turns_.Take("10.0.0.1");
  turns_.Take("10.0.0.1");
  clock_.AdvanceMillis(2 * kAuthFailureSpacingMs);
  EXPECT_EQ(turns_.Take("10.0.0.1"), 0);
}

TEST_F(AuthTurnsTest, AWaitPastTheLimitIsRefusedAndTakesNoTurn) {
  const std::int64_t queued = kMaxAuthWaitMs / kAuthFailureSpacingMs + 1;
  for (std::int64_t i = 0; i < queued; ++i) ASSERT_TRUE(turns_.Take("10.0.0.1"));
  EXPECT_EQ(turns_.Take("10.0.0.1"), std::nullopt);
  clock_.AdvanceMillis(kAuthFailureSpacingMs);
  EXPECT_EQ(turns_.Take("10.0.0.1"), kMaxAuthWaitMs);
}

TEST_F(AuthTurnsTest, AWallClockStepMovesNoTurn) {
  turns_.Take("10.0.0.1");
  clock_.SetMillis(0);
  EXPECT_EQ(turns_.Take("10.0.0.1"), kAuthFailureSpacingMs);
}

TEST(TurnsTest, ABurstComesAtOnceThenOneASpacing) {
  FakeClock clock{1'700'000'000'000};
  Turns turns(clock, 10, 3, 1000);
  EXPECT_EQ(turns.Take("10.0.0.1"), 0);
  EXPECT_EQ(turns.Take("10.0.0.1"), 0);
  EXPECT_EQ(turns.Take("10.0.0.1"), 0);
  EXPECT_EQ(turns.Take("10.0.0.1"), 10);
  EXPECT_EQ(turns.Take("10.0.0.1"), 20);
  clock.AdvanceMillis(1000);  // quiet: the whole burst again, no more
  EXPECT_EQ(turns.Take("10.0.0.1"), 0);
  EXPECT_EQ(turns.Take("10.0.0.1"), 0);
  EXPECT_EQ(turns.Take("10.0.0.1"), 0);
  EXPECT_EQ(turns.Take("10.0.0.1"), 10);
}

// Connection ids for the UnauthenticatedConnections cases.
int kA = 0, kB = 1, kC = 2, kD = 3;

TEST(UnauthenticatedConnectionsTest, EachHostCountsItsOwn) {
  UnauthenticatedConnections s;
  s.Add(&kA, "10.0.0.1");
  s.Add(&kB, "10.0.0.1");
  s.Add(&kC, "10.0.0.2");
  EXPECT_EQ(s.Count("10.0.0.1"), 2u);
  EXPECT_EQ(s.Count("10.0.0.2"), 1u);
  EXPECT_EQ(s.Count("10.0.0.3"), 0u);
  EXPECT_EQ(s.size(), 3u);
}

TEST(UnauthenticatedConnectionsTest, TheOldestGoesFirstOfAHostAndOfAll) {
  UnauthenticatedConnections s;
  s.Add(&kA, "10.0.0.1");
  s.Add(&kB, "10.0.0.2");
  s.Add(&kC, "10.0.0.2");
  const std::string host = "10.0.0.2";
  EXPECT_EQ(s.Oldest(&host, [](auto) { return false; }), &kB);
  EXPECT_EQ(s.Oldest(nullptr, [](auto) { return false; }), &kA);
}

TEST(UnauthenticatedConnectionsTest, ASparedOneIsPassedOver) {
  UnauthenticatedConnections s;
  s.Add(&kA, "10.0.0.1");
  s.Add(&kB, "10.0.0.1");
  EXPECT_EQ(s.Oldest(nullptr, [](UnauthenticatedConnections::Id id) { return id == &kA; }), &kB);
  EXPECT_EQ(s.Oldest(nullptr, [](auto) { return true; }), std::nullopt);
}

TEST(UnauthenticatedConnectionsTest, OneThatAuthenticatedOrClosedIsRemoved) {
  UnauthenticatedConnections s;
  s.Add(&kA, "10.0.0.1");
  s.Add(&kD, "10.0.0.1");
  EXPECT_TRUE(s.Remove(&kA));
  EXPECT_FALSE(s.Remove(&kA));
  EXPECT_EQ(s.Count("10.0.0.1"), 1u);
  EXPECT_TRUE(s.Remove(&kD));
  EXPECT_EQ(s.Count("10.0.0.1"), 0u);
  EXPECT_EQ(s.Oldest(nullptr, [](auto) { return false; }), std::nullopt);
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

TEST(MemoryWeightTest, AHandshakeCountsAtOnce) {
  const ConnectionLoad c{.partial_since_ms = 10'000, .handshaking = true, .buffered = 4096};
  EXPECT_EQ(MemoryWeight(c, 10'000, [] { return false; }), 4096u);
}

TEST(ClosesFirstTest, TheMostThenTheCrowdedAddressThenTheOldest) {
  EXPECT_TRUE(
      ClosesFirst({.weight = 2, .crowd = 1, .since = 9}, {.weight = 1, .crowd = 9, .since = 1}));
  EXPECT_TRUE(
      ClosesFirst({.weight = 1, .crowd = 9, .since = 9}, {.weight = 1, .crowd = 1, .since = 1}));
  EXPECT_TRUE(
      ClosesFirst({.weight = 1, .crowd = 1, .since = 1}, {.weight = 1, .crowd = 1, .since = 2}));
  EXPECT_FALSE(
      ClosesFirst({.weight = 1, .crowd = 1, .since = 1}, {.weight = 1, .crowd = 1, .since = 1}));
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

TEST(RoomWeightTest, OneThatPresentedTheTokenKeepsItsSlot) {
  const ConnectionLoad c{.partial_since_ms = 1, .active_ms = 1, .presented_token = true};
  EXPECT_EQ(RoomWeight(c, 50'000, true), 0);
}

TEST(RoomWeightTest, OnlyARequestArrivingForTheAgeIsASlowSender) {
  const std::int64_t now = 50'000;
  EXPECT_EQ(
      RoomWeight({.partial_since_ms = now - kSlowSenderAgeMs + 1, .active_ms = now}, now, false),
      0);
  EXPECT_GT(RoomWeight({.partial_since_ms = now - kSlowSenderAgeMs, .active_ms = now}, now, false),
            0);
}

TEST(RoomWeightTest, ASlowSenderGoesBeforeAnyIdleOne) {
  const std::int64_t now = 50'000'000;
  EXPECT_GT(RoomWeight({.partial_since_ms = now - kSlowSenderAgeMs, .active_ms = now}, now, false),
            RoomWeight({.active_ms = 1}, now, false));
  EXPECT_GT(RoomWeight({.partial_since_ms = 40'000, .active_ms = now}, now, false),
            RoomWeight({.partial_since_ms = 45'000, .active_ms = now}, now, false));
}

TEST(RoomWeightTest, TheCrowdedAddressGivesFirstAConnectionAtRestABriefSpell) {
  const std::int64_t now = 50'000;
  const ConnectionLoad busy{.active_ms = now - kCrowdedRestMs + 1, .requested = true};
  EXPECT_EQ(RoomWeight(busy, now, true), 0);  // a pool between two requests
  EXPECT_GT(RoomWeight({.active_ms = now, .requested = false}, now, true), 0);  // silent
  EXPECT_GT(RoomWeight({.active_ms = now - kCrowdedRestMs, .requested = true}, now, true),
            RoomWeight({.partial_since_ms = 1, .active_ms = 1}, now, false));
  EXPECT_EQ(RoomWeight({.write_since_ms = 1, .active_ms = 1}, now, true), 0);
  EXPECT_EQ(RoomWeight({.active_ms = 1, .presented_token = true}, now, true), 0);
}

TEST(RoomWeightTest, OnlyAConnectionIdleForTheAgeWithNothingUnderWayIsIdle) {
  const std::int64_t now = 50'000;
  EXPECT_EQ(RoomWeight({.active_ms = now - kIdleSpareMs + 1}, now, false), 0);
  EXPECT_GT(RoomWeight({.active_ms = now - kIdleSpareMs}, now, false), 0);
  EXPECT_EQ(RoomWeight({.write_since_ms = 1, .active_ms = 1}, now, false), 0);
  EXPECT_EQ(RoomWeight({.held = true, .active_ms = 1}, now, false), 0);
  EXPECT_EQ(RoomWeight({.pending = true, .active_ms = 1}, now, false), 0);
  EXPECT_GT(RoomWeight({.active_ms = 1}, now, false), RoomWeight({.active_ms = 2}, now, false));
}

TEST(RequestOverdueTest, ARequestIsOverdueAtItsTimeout) {
  EXPECT_FALSE(RequestOverdue(0, 50'000, 1000));
  EXPECT_FALSE(RequestOverdue(49'001, 50'000, 1000));
  EXPECT_TRUE(RequestOverdue(49'000, 50'000, 1000));
}

}  // namespace
}  // namespace sekka::server
