// The worker-lease contract on the memory backend.

#include "testing/worker_lease_contract.h"

namespace sekka {
namespace {

INSTANTIATE_TEST_SUITE_P(Memory, WorkerLeaseContractTest, ::testing::Values(MemoryLeaseFactory()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace sekka

namespace sekka {
namespace {

// The worker-id policy, written once for every lease (issue 22): preferred when free or ours,
// then ours, then the lowest free, a bounded number of them.
TEST(WorkerIdCandidatesTest, PreferredThenOwnThenLowestFree) {
  // 0 and 2 held by others, 5 by this identity's earlier run.
  const std::map<std::int64_t, bool> holders = {{0, false}, {2, false}, {5, true}};
  EXPECT_EQ(WorkerIdCandidates(holders, 3, 8, 2), (std::vector<std::int64_t>{3, 5, 1}));
  EXPECT_EQ(WorkerIdCandidates(holders, 2, 8, 3), (std::vector<std::int64_t>{5, 1, 3, 4}));
  EXPECT_EQ(WorkerIdCandidates(holders, -1, 8, 16), (std::vector<std::int64_t>{5, 1, 3, 4, 6, 7}));
  EXPECT_EQ(WorkerIdCandidates(holders, 9, 3, 16), (std::vector<std::int64_t>{1}));
  EXPECT_TRUE(WorkerIdCandidates({{0, false}, {1, false}}, 0, 2).empty());
}

TEST(CheckStartupWaitTest, WaitsUpToTheLimitAndRefusesBeyondNamingBothTimes) {
  EXPECT_TRUE(CheckStartupWait(1'000, 500, 0, "x").ok());
  EXPECT_TRUE(CheckStartupWait(1'000, 10'999, 10'000, "x").ok());
  Status far = CheckStartupWait(1'000, 11'000, 10'000, "the hwm of worker id 3");
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(far.error().message.find("behind the hwm of worker id 3"), std::string::npos);
  EXPECT_NE(far.error().message.find("generator.max_startup_wait (10000 ms)"), std::string::npos);
}

}  // namespace
}  // namespace sekka
