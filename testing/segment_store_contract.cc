// The contract cases; see segment_store_contract.h.

#include "testing/segment_store_contract.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace sekka {

StoreFactory MemoryStoreFactory() {
  // Connections to one memory store: views that share it.
  struct View final : SegmentStore {
    std::shared_ptr<SegmentStore> s;
    Result<Allocation> Allocate(std::string_view t, std::int64_t n) override {
      return s->Allocate(t, n);
    }
    Status CreateTag(const TagInfo& t) override { return s->CreateTag(t); }
    Result<TagInfo> GetTag(std::string_view t) override { return s->GetTag(t); }
    Result<std::vector<TagInfo>> ListTagsAfter(std::string_view a, std::size_t n) override {
      return s->ListTagsAfter(a, n);
    }
    Status SetStep(std::string_view t, std::int64_t n) override { return s->SetStep(t, n); }
    Result<TagInfo> DeleteTag(std::string_view t) override { return s->DeleteTag(t); }
  };
  struct Registry {
    std::mutex mu;
    std::map<std::string, std::shared_ptr<SegmentStore>> stores;
  };
  auto registry = std::make_shared<Registry>();
  return {"memory",
          [registry] {
            std::lock_guard lock(registry->mu);
            const std::string name = std::to_string(registry->stores.size());
            registry->stores[name] = NewMemorySegmentStore();
            return name;
          },
          [registry](const std::string& where) -> std::unique_ptr<SegmentStore> {
            std::lock_guard lock(registry->mu);
            auto view = std::make_unique<View>();
            view->s = registry->stores.at(where);
            return view;
          }};
}

namespace {

// Each case works on its own fresh database; `where` names it.
class Contract {
 public:
  explicit Contract(const StoreFactory& f) : f_(f), where_(f.fresh()) {}
  std::unique_ptr<SegmentStore> Open() const {
    std::unique_ptr<SegmentStore> store = f_.open(where_);
    EXPECT_NE(store, nullptr) << "cannot open " << where_;
    return store;
  }

 private:
  const StoreFactory& f_;
  const std::string where_;
};

std::unique_ptr<SegmentStore> Open(const StoreFactory& f) { return Contract(f).Open(); }

TEST_P(SegmentStoreContractTest, AnUnknownTagIsNotFound) {
  auto store = Open(GetParam());
  Result<Allocation> r = store->Allocate("nope", 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->GetTag("nope").error().code, ErrorCode::kNotFound);
}

TEST_P(SegmentStoreContractTest, RangesFollowEachOtherWithoutOverlap) {
  auto store = Open(GetParam());
  ASSERT_TRUE(store->CreateTag({"orders", 100, 50}).ok());
  EXPECT_EQ(*store->Allocate("orders", 50), (IdRange{100, 150}));
  EXPECT_EQ(*store->Allocate("orders", 7), (IdRange{150, 157}));
  EXPECT_EQ(*store->Allocate("orders", 1000), (IdRange{157, 1157}));
  Result<TagInfo> t = store->GetTag("orders");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->next_id, 1157);
  EXPECT_EQ(t->step, 50);
}

TEST_P(SegmentStoreContractTest, TwentyConcurrentAllocationsOfOneGiveExactlyOneToTwenty) {
  const Contract db(GetParam());
  auto setup = db.Open();
  ASSERT_TRUE(setup->CreateTag({"counter", 1, 1}).ok());
  std::vector<std::int64_t> got(20, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&, i] {
      auto store = db.Open();  // its own connection
      Result<Allocation> r = store->Allocate("counter", 1);
      if (r.ok() && r->size() == 1) got[i] = r->begin;
    });
  }
  for (auto& t : threads) t.join();
  std::sort(got.begin(), got.end());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(got[i], i + 1);
}

TEST_P(SegmentStoreContractTest, TagsAreListedAndValidated) {
  auto store = Open(GetParam());
  ASSERT_TRUE(store->CreateTag({"b.tag", 1, 10}).ok());
  ASSERT_TRUE(store->CreateTag({"a-tag", 5, 20}).ok());
  Result<std::vector<TagInfo>> tags = store->ListTags();
  ASSERT_TRUE(tags.ok());
  ASSERT_EQ(tags->size(), 2u);
  EXPECT_EQ((*tags)[0].tag, "a-tag");
  EXPECT_EQ((*tags)[0].next_id, 5);
  EXPECT_EQ((*tags)[1].step, 10);
  Status again = store->CreateTag({"a-tag", 1, 1});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(again.error().message.find("already exists"), std::string::npos);
  EXPECT_EQ(store->CreateTag({"bad\ttag", 1, 1}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->CreateTag({"", 1, 1}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->CreateTag({"zero", 0, 1}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->CreateTag({"nostep", 1, 0}).error().code, ErrorCode::kInvalidArgument);
}

// Issue 40: tags of any characters a peer's VARCHAR holds. sekka's own stores keep apart names
// that differ in case or a trailing space (a MySQL PAD SPACE or _ci column would not); a peer's
// table compares as its collation says, so there each name only comes back as it went in.
TEST_P(SegmentStoreContractTest, TagsOfAnyCharacterAreKeptApartAndListedInByteOrder) {
  auto store = Open(GetParam());
  const std::vector<std::string> names = {"a b", "a/b", "a}.meta", "\xe8\xae\xa2\xe5\x8d\x95",
                                          "x%2Fy\"'\\"};
  const std::vector<std::string> twins = {"A b", "a b "};  // apart from "a b" in sekka's stores
  std::int64_t start = 1;
  for (const std::string& name : names) {
    Status made = store->CreateTag({name, start++, 10});
    ASSERT_TRUE(made.ok()) << ShownTag(name) << ": " << made.error().message;
  }
  if (GetParam().deletes) {
    for (const std::string& name : twins) ASSERT_TRUE(store->CreateTag({name, start++, 10}).ok());
  }
  start = 1;
  for (const std::string& name : names) {
    Result<Allocation> a = store->Allocate(name, 10);
    ASSERT_TRUE(a.ok()) << ShownTag(name) << ": " << a.error().message;
    EXPECT_EQ(a->begin, start++) << ShownTag(name);
  }
  Result<std::vector<TagInfo>> listed = store->ListTags();
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> expected = names;
  if (GetParam().deletes) expected.insert(expected.end(), twins.begin(), twins.end());
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> got;
  for (const TagInfo& t : *listed) got.push_back(t.tag);
  EXPECT_EQ(got, expected);
}

TEST_P(SegmentStoreContractTest, DeltaAndRemainderAreKeptAndChecked) {
  auto store = Open(GetParam());
  const TagInfo odd{"odd", 1, 100, 2, 1};
  if (!GetParam().has_delta) {
    Status refused = store->CreateTag(odd);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.error().message.find("allowed delta 1 and remainder 0"), std::string::npos)
        << refused.error().message;
    EXPECT_EQ(store->GetTag("odd").error().code, ErrorCode::kNotFound);
    return;
  }
  ASSERT_TRUE(store->CreateTag(odd).ok());
  ASSERT_TRUE(store->CreateTag({"plain", 1, 100}).ok());
  EXPECT_EQ(*store->GetTag("odd"), odd);
  Result<std::vector<TagInfo>> tags = store->ListTags();
  ASSERT_TRUE(tags.ok());
  ASSERT_EQ(tags->size(), 2u);
  EXPECT_EQ((*tags)[0], odd);
  EXPECT_EQ((*tags)[1].delta, 1);
  EXPECT_EQ((*tags)[1].remainder, 0);
  // The store moves next_id by the raw step; delta and remainder choose ids inside the range.
  EXPECT_EQ(*store->Allocate("odd", 100), (IdRange{1, 101}));
  for (const TagInfo& bad : {TagInfo{"d0", 1, 1, 0, 0}, TagInfo{"r2", 1, 1, 2, 2},
                             TagInfo{"rneg", 1, 1, 2, -1}, TagInfo{"dbig", 1, 1, 1'000'001, 0}}) {
    Status s = store->CreateTag(bad);
    ASSERT_FALSE(s.ok()) << bad.tag;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(s.error().message.find("allowed delta 1 to 1000000"), std::string::npos);
  }
}

TEST_P(SegmentStoreContractTest, ADeletedTagComesBackOnlyAtOrAboveItsNextId) {
  auto store = Open(GetParam());
  ASSERT_TRUE(store->CreateTag({"gone", 1, 10}).ok());
  ASSERT_TRUE(store->Allocate("gone", 10).ok());
  Result<TagInfo> was = store->DeleteTag("gone");
  if (!GetParam().deletes) {
    ASSERT_FALSE(was.ok());
    EXPECT_EQ(was.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(was.error().message.find("keep no tombstone"), std::string::npos)
        << was.error().message;
    EXPECT_EQ(store->GetTag("gone")->next_id, 11);
    return;
  }
  ASSERT_TRUE(was.ok()) << was.error().message;
  EXPECT_EQ(was->next_id, 11);
  EXPECT_EQ(was->step, 10);
  EXPECT_EQ(store->GetTag("gone").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->Allocate("gone", 5).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->SetStep("gone", 5).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->DeleteTag("gone").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(store->ListTags()->empty());
  Status below = store->CreateTag({"gone", 10, 10});
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(below.error().message.find("deleted at next id 11"), std::string::npos)
      << below.error().message;
  ASSERT_TRUE(store->CreateTag({"gone", 11, 3}).ok());
  EXPECT_EQ(*store->Allocate("gone", 3), (IdRange{11, 14}));
  EXPECT_EQ(store->CreateTag({"gone", 20, 3}).error().code, ErrorCode::kAlreadyExists);
  // Deleted again higher up, the tombstone moves up with it.
  ASSERT_TRUE(store->DeleteTag("gone").ok());
  EXPECT_EQ(store->CreateTag({"gone", 11, 3}).error().code, ErrorCode::kInvalidArgument);
  Status other = store->CreateTag({"gone", 100, 3, 2, 1});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(other.error().message.find("was deleted with delta 1 and remainder 0"),
            std::string::npos)
      << other.error().message;
  EXPECT_TRUE(store->CreateTag({"gone", 100, 3}).ok());
}

TEST_P(SegmentStoreContractTest, TagsAreListedAPageAtATimeInByteOrder) {
  auto store = Open(GetParam());
  for (const char* t : {"b", "a", "B1", "c-1", "c.2", "d"})
    ASSERT_TRUE(store->CreateTag({t, 1, 5}).ok());
  auto names = [](const Result<std::vector<TagInfo>>& r) {
    std::string out;
    for (const TagInfo& t : *r) out += t.tag + " ";
    return out;
  };
  EXPECT_EQ(names(store->ListTagsAfter("", 2)), "B1 a ");  // (a peer's table may ignore case)
  EXPECT_EQ(names(store->ListTagsAfter("a", 2)), "b c-1 ");
  if (GetParam().deletes) {
    ASSERT_TRUE(store->DeleteTag("c.2").ok());
  }
  EXPECT_EQ(names(store->ListTagsAfter("c-1", 0)), GetParam().deletes ? "d " : "c.2 d ");
  EXPECT_EQ(names(store->ListTagsAfter("d", 5)), "");
}

TEST_P(SegmentStoreContractTest, AStepChangeIsKeptAndComesWithTheNextRange) {
  auto store = Open(GetParam());
  ASSERT_TRUE(store->CreateTag({"stepped", 1, 10}).ok());
  EXPECT_EQ(store->SetStep("stepped", 0).error().code, ErrorCode::kInvalidArgument);
  Status set = store->SetStep("stepped", 25);
  if (!GetParam().keeps_step) {
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(store->GetTag("stepped")->step, 10);
    return;
  }
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(store->SetStep("nope", 5).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->GetTag("stepped")->step, 25);
  EXPECT_TRUE(store->SetStep("stepped", 25).ok());  // the same step again is no error
  Result<Allocation> next = store->Allocate("stepped", 5);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, (IdRange{1, 6}));
  EXPECT_EQ(next->tag_step, 25);
}

TEST_P(SegmentStoreContractTest, ABadStepIsRejectedAndTheEndOfInt64IsExhausted) {
  auto store = Open(GetParam());
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  ASSERT_TRUE(store->CreateTag({"edge", max - 10, 5}).ok());
  EXPECT_EQ(store->Allocate("edge", 0).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(*store->Allocate("edge", 5), (IdRange{max - 10, max - 5}));
  Result<Allocation> over = store->Allocate("edge", 10);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kExhausted);
  EXPECT_EQ(*store->Allocate("edge", 5), (IdRange{max - 5, max}));  // nothing was lost
}

TEST_P(SegmentStoreContractTest, ManyThreadsAllocatingBatchesNeverOverlap) {
  const Contract db(GetParam());
  auto setup = db.Open();
  ASSERT_TRUE(setup->CreateTag({"mixed", 1, 3}).ok());
  std::vector<std::vector<IdRange>> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto store = db.Open();
      for (int j = 0; j < 25; ++j) {
        Result<Allocation> r = store->Allocate("mixed", 1 + (i + j) % 7);
        if (r.ok()) got[i].push_back(*r);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<IdRange> all;
  for (auto& v : got) all.insert(all.end(), v.begin(), v.end());
  ASSERT_EQ(all.size(), 100u);
  ExpectContiguous(all, 1);
}

}  // namespace

std::vector<IdRange> DrawBeside(const std::function<std::unique_ptr<SegmentStore>()>& open,
                                const std::string& tag,
                                const std::function<std::optional<IdRange>()>& peer, int stores,
                                int per_store, int peer_ranges) {
  std::vector<std::vector<IdRange>> got(static_cast<std::size_t>(stores) + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < stores; ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<SegmentStore> store = open();
      for (int j = 0; store != nullptr && j < per_store; ++j) {
        Result<Allocation> r = store->Allocate(tag, 1 + (i + j) % 50);
        if (r.ok()) got[i].push_back(*r);
      }
    });
  }
  threads.emplace_back([&] {
    while (static_cast<int>(got.back().size()) < peer_ranges) {
      if (std::optional<IdRange> r = peer()) got.back().push_back(*r);
    }
  });
  for (auto& t : threads) t.join();
  std::vector<IdRange> all;
  for (auto& v : got) all.insert(all.end(), v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<std::size_t>(stores * per_store + peer_ranges));
  return all;
}

std::string FixtureUri(const char* env, std::string_view server, std::string_view fixture,
                       std::string_view script) {
  const char* file = std::getenv(env);
  std::string uri;
  if (file != nullptr) std::ifstream(file) >> uri;
  if (uri.empty()) {
    ADD_FAILURE() << "no " << server << " for the tests: run them through ctest, whose `" << fixture
                  << "` fixture starts one (scripts/" << script << " start DIR) and sets " << env;
  }
  return uri;
}

void ExpectContiguous(std::vector<IdRange> ranges, std::int64_t first) {
  std::sort(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front().begin, first);
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_EQ(ranges[i].begin, ranges[i - 1].end) << "a gap or an overlap at range " << i;
  }
}

}  // namespace sekka
