// testing/segment_store_contract.h
//
// The contract every SegmentStore passes (in the spirit of CosId's shared specs). A backend's
// test instantiates it with a factory that opens a fresh, empty store:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, SegmentStoreContractTest,
//                            ::testing::Values(StoreFactory{"sqlite", fresh, open}));

#ifndef SEKKA_TESTING_SEGMENT_STORE_CONTRACT_H_
#define SEKKA_TESTING_SEGMENT_STORE_CONTRACT_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/segment.h"

namespace sekka {

struct StoreFactory {
  std::string name;
  // Makes a new, empty database for one test case and says how to reach it (a path, a URI).
  std::function<std::string()> fresh;
  // Opens one more connection to it; several may be open at once (the concurrency cases).
  std::function<std::unique_ptr<SegmentStore>(const std::string& where)> open;
  // false: a table without delta and remainder (Leaf's), which refuses tags that need them.
  bool has_delta = true;
  // false: a peer's table, where DeleteTag is refused (no tombstones).
  bool deletes = true;
  // false: a store that keeps no step (CosId's counters), where SetStep is refused.
  bool keeps_step = true;
  friend void PrintTo(const StoreFactory& f, std::ostream* os) { *os << f.name; }
};

// A factory over one in-memory store per fresh() (for the core's own tests).
StoreFactory MemoryStoreFactory();

class SegmentStoreContractTest : public ::testing::TestWithParam<StoreFactory> {};

// Sekka and a peer drawing from one tag at once, as the backends' tests run them: `stores`
// threads each open a store with `open` and take `per_store` ranges of `tag` (steps 1 to 50),
// while `peer` (the peer's own statements; nullopt: its compare failed, try again) takes
// `peer_ranges` ranges. Every range taken, of either.
std::vector<IdRange> DrawBeside(const std::function<std::unique_ptr<SegmentStore>()>& open,
                                const std::string& tag,
                                const std::function<std::optional<IdRange>()>& peer, int stores = 2,
                                int per_store = 40, int peer_ranges = 40);
// The ranges, in order, cover [first, ...) with no gap and no overlap.
void ExpectContiguous(std::vector<IdRange> ranges, std::int64_t first);

// The URI of the server a ctest fixture started, read from the file the environment variable
// `env` names (scripts/pg.sh, mariadb.sh, redis.sh write it); a test failure naming `server`,
// the fixture and `script` when there is none.
std::string FixtureUri(const char* env, std::string_view server, std::string_view fixture,
                       std::string_view script);

}  // namespace sekka

#endif  // SEKKA_TESTING_SEGMENT_STORE_CONTRACT_H_
