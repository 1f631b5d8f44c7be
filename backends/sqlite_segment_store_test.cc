#include "backends/sqlite_segment_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "testing/segment_store_contract.h"

namespace sekka {
namespace {

// A directory for this test process's database files, removed when the process exits.
struct TempDir {
  const std::string path =
      std::filesystem::temp_directory_path() / ("sekka_sqlite_test_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// A fresh database file per contract case.
std::string FreshPath() {
  static TempDir dir;
  static int n = 0;
  return dir.path + "/store" + std::to_string(++n) + ".db";
}

INSTANTIATE_TEST_SUITE_P(Sqlite, SegmentStoreContractTest,
                         ::testing::Values(StoreFactory{
                             "sqlite", FreshPath,
                             [](const std::string& path) -> std::unique_ptr<SegmentStore> {
                               Result<std::unique_ptr<SegmentStore>> s =
                                   OpenSqliteSegmentStore(path);
                               return s.ok() ? std::move(s).value() : nullptr;
                             }}));

TEST(SqliteSegmentStoreTest, AnUnreachableStoreIsUnavailable) {
  Result<std::unique_ptr<SegmentStore>> s = OpenSqliteSegmentStore("/nonexistent/dir/x.db");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(s.error().message.find("cannot open segment store sqlite:/nonexistent/dir/x.db"),
            std::string::npos);
}

TEST(SqliteSegmentStoreTest, AStoreFromBeforeDeltaGetsTheColumnsAndKeepsItsTags) {
  const std::string path = FreshPath();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE sekka_segments (tag TEXT PRIMARY KEY, next_id INTEGER NOT "
                         "NULL, step INTEGER NOT NULL, updated_ms INTEGER NOT NULL DEFAULT 0);"
                         "INSERT INTO sekka_segments (tag, next_id, step) VALUES ('old', 7, 10)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  for (int open = 0; open < 2; ++open) {  // the second open finds the columns there
    Result<std::unique_ptr<SegmentStore>> s = OpenSqliteSegmentStore(path);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(*(*s)->GetTag("old"), (TagInfo{"old", 7 + 10 * open, 10, 1, 0}));
    EXPECT_EQ(*(*s)->Allocate("old", 10), (IdRange{7 + 10 * open, 17 + 10 * open}));
  }
}

TEST(SqliteSegmentStoreTest, AllocationsSurviveReopening) {
  const std::string path = FreshPath();
  {
    auto s = std::move(OpenSqliteSegmentStore(path)).value();
    ASSERT_TRUE(s->CreateTag({"t", 1, 10}).ok());
    EXPECT_EQ(*s->Allocate("t", 10), (IdRange{1, 11}));
  }
  auto s = std::move(OpenSqliteSegmentStore(path)).value();
  EXPECT_EQ(*s->Allocate("t", 10), (IdRange{11, 21}));
}

}  // namespace
}  // namespace sekka
