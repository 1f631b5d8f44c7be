// OpenSegmentStore over the table of store kinds (sekka/segment_stores.h): every kind the table
// lists opens (review of issue 41: a row without an opener would be refused by a message that
// lists it), and a scheme of no kind is refused naming every kind.
#include "backends/segment_store_uri.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "sekka/segment_stores.h"

namespace sekka {
namespace {

class SegmentStoreUriTest : public ::testing::Test {
 protected:
  SegmentStoreUriTest() {
    dir_ =
        std::filesystem::temp_directory_path() / ("sekka-store-uri-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  ~SegmentStoreUriTest() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SegmentStoreUriTest, EveryKindOfTheTableHasAnOpener) {
  for (const SegmentStoreKind& kind : SegmentStoreKinds()) {
    SCOPED_TRACE(std::string(kind.scheme));
    if (kind.name == "data-dir") {
      EXPECT_TRUE(OpenSegmentStore("", (dir_ / "data").string()).ok());
    } else if (kind.name == "sqlite") {
      EXPECT_TRUE(OpenSegmentStore(std::string(kind.scheme) + (dir_ / "s.db").string(), "").ok());
    } else {  // a network store checks its URI when made and connects at its first call
      const Status s = CheckSegmentStoreUri(std::string(kind.scheme) + "127.0.0.1:1/db");
      if (!s.ok()) {
        EXPECT_EQ(s.error().message.find("is not known"), std::string::npos) << s.error().message;
      }
    }
  }
}

TEST_F(SegmentStoreUriTest, ASchemeOfNoKindIsRefusedNamingEveryKind) {
  const Status s = CheckSegmentStoreUri("mongodb://127.0.0.1:27017/ids");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "segment.store \"mongodb://127.0.0.1:27017/ids\" is not known: allowed \"\" (SQLite "
            "in the data dir), sqlite:PATH, postgres://USER@HOST:PORT/DB, "
            "mysql://USER@HOST:PORT/DB or redis://HOST:PORT/DB");
}

}  // namespace
}  // namespace sekka
