// Many threads on one generator: no id twice, each thread's ids increasing. CI also runs this
// file's tests under ThreadSanitizer.

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "sekka/snowflake.h"

namespace sekka {
namespace {

void ExpectDistinctAndIncreasingPerThread(std::vector<std::vector<Id>>& per_thread) {
  std::vector<Id> all;
  for (const auto& ids : per_thread) {
    for (std::size_t i = 1; i < ids.size(); ++i) {
      ASSERT_GT(ids[i], ids[i - 1]) << "thread ids must increase, at index " << i;
    }
    all.insert(all.end(), ids.begin(), ids.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "an id was repeated";
}

void RunThreads(const SnowflakeOptions& options, int threads, int per_thread, bool mix_batches) {
  auto s = std::move(Snowflake::Create(options, SystemClock())).value();
  std::vector<std::vector<Id>> ids(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<Id>& mine = ids[t];
      mine.reserve(per_thread);
      std::vector<Id> batch(100);
      while (static_cast<int>(mine.size()) < per_thread) {
        if (mix_batches && mine.size() % 1000 == 0 &&
            static_cast<int>(mine.size()) + 100 <= per_thread) {
          ASSERT_TRUE(s->NextIds(std::span<Id>(batch)).ok());
          mine.insert(mine.end(), batch.begin(), batch.end());
        } else {
          Result<Id> id = s->NextId();
          ASSERT_TRUE(id.ok());
          mine.push_back(*id);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  ExpectDistinctAndIncreasingPerThread(ids);
}

TEST(SnowflakeConcurrencyTest, FourThreadsTakeAMillionIdsEachWithoutRepeats) {
  RunThreads(SnowflakeOptions{}, 4, 1'000'000, /*mix_batches=*/false);
}

TEST(SnowflakeConcurrencyTest, SingleCallsAndBatchesMixWithoutRepeats) {
  RunThreads(SnowflakeOptions{}, 4, 200'000, /*mix_batches=*/true);
}

TEST(SnowflakeConcurrencyTest, ThreadBlockOfOneIsAlsoSafe) {
  SnowflakeOptions o;
  o.thread_block = 1;
  o.sequence_start = SequenceStart::kRandom;
  RunThreads(o, 4, 200'000, /*mix_batches=*/true);
}

TEST(SnowflakeConcurrencyTest, BorrowingUnderContentionIsSafe) {
  SnowflakeOptions o;
  o.on_sequence_exhausted = SequenceExhaustedPolicy::kBorrow;
  o.max_drift = std::chrono::milliseconds(5);
  RunThreads(o, 4, 200'000, /*mix_batches=*/true);
}

}  // namespace
}  // namespace sekka
