#include "backends/mysql_segment_store.h"

#include <gtest/gtest.h>
#include <mysql.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <thread>

#include "backends/segment_store_uri.h"
#include "testing/segment_store_contract.h"

namespace sekka {
namespace {

// The base URI (mysql://sekka@127.0.0.1:PORT/) of the MariaDB that the ctest fixture started
// (scripts/mariadb.sh).
std::string BaseUri() {
  return FixtureUri("SEKKA_TEST_MARIADB_FILE", "MariaDB", "mariadb", "mariadb.sh");
}

int Port() {
  const std::string base = BaseUri();
  return std::atoi(base.substr(base.rfind(':') + 1).c_str());
}

// A direct connection as the peers' servers have one (no sekka code in between).
class Direct {
 public:
  explicit Direct(const std::string& db = "") : c_(mysql_init(nullptr)) {
    EXPECT_NE(mysql_real_connect(c_, "127.0.0.1", "sekka", nullptr, db.c_str(), Port(), nullptr,
                                 CLIENT_MULTI_STATEMENTS),
              nullptr)
        << mysql_error(c_);
  }
  ~Direct() { mysql_close(c_); }
  // Runs statements, dropping their results; the last statement's changed rows.
  std::uint64_t Exec(const std::string& sql) {
    EXPECT_EQ(mysql_real_query(c_, sql.data(), sql.size()), 0) << sql << ": " << mysql_error(c_);
    std::uint64_t affected = 0;
    do {
      if (MYSQL_RES* r = mysql_store_result(c_); r != nullptr) {
        mysql_free_result(r);
      } else {
        affected = mysql_affected_rows(c_);
      }
    } while (mysql_next_result(c_) == 0);
    return affected;
  }
  // The first column of the first row.
  std::int64_t Value(const std::string& sql) {
    EXPECT_EQ(mysql_real_query(c_, sql.data(), sql.size()), 0) << sql << ": " << mysql_error(c_);
    MYSQL_RES* r = mysql_store_result(c_);
    std::int64_t v = -1;
    if (r != nullptr) {
      if (MYSQL_ROW row = mysql_fetch_row(r); row != nullptr) v = std::atoll(row[0]);
      mysql_free_result(r);
    }
    return v;
  }

 private:
  MYSQL* c_;
};

// The peers' tables, column for column as their projects' scripts make them.
constexpr const char* kLeafTable =
    "CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) NOT NULL DEFAULT '', "
    "max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL, description VARCHAR(256) DEFAULT NULL, "
    "update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, "
    "PRIMARY KEY (biz_tag)) ENGINE=InnoDB";
constexpr const char* kTinyidTable =
    "CREATE TABLE tiny_id_info (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, "
    "biz_type VARCHAR(63) NOT NULL DEFAULT '', begin_id BIGINT NOT NULL DEFAULT 0, "
    "max_id BIGINT NOT NULL DEFAULT 0, step INT DEFAULT 0, delta INT NOT NULL DEFAULT 1, "
    "remainder INT NOT NULL DEFAULT 0, "
    "create_time TIMESTAMP NOT NULL DEFAULT '2010-01-01 00:00:00', "
    "update_time TIMESTAMP NOT NULL DEFAULT '2010-01-01 00:00:00', "
    "version BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (id), UNIQUE KEY uniq_biz_type (biz_type)) "
    "ENGINE=InnoDB DEFAULT CHARSET=utf8";

// A fresh database per case, with the peer's table when the schema is a peer's.
std::string FreshDatabase(const std::string& schema) {
  static int n = 0;
  const std::string name =
      "sekka_" + schema + "_" + std::to_string(::getpid()) + "_" + std::to_string(++n);
  Direct().Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4");  // as Debian's default
  if (schema == "leaf") Direct(name).Exec(kLeafTable);
  if (schema == "tinyid") Direct(name).Exec(kTinyidTable);
  return BaseUri() + name + "?schema=" + schema;
}

std::unique_ptr<SegmentStore> OpenOrNull(const std::string& uri) {
  Result<std::unique_ptr<SegmentStore>> s = OpenMysqlSegmentStore(uri);
  return s.ok() ? std::move(s).value() : nullptr;
}

StoreFactory Factory(const std::string& schema) {
  return StoreFactory{"mysql_" + schema, [schema] { return FreshDatabase(schema); }, OpenOrNull,
                      schema != "leaf", schema == "sekka"};
}

INSTANTIATE_TEST_SUITE_P(Mysql, SegmentStoreContractTest,
                         ::testing::Values(Factory("sekka"), Factory("leaf"), Factory("tinyid")),
                         [](const auto& info) { return info.param.name; });

std::string DatabaseOf(const std::string& uri) {
  const std::size_t slash = uri.rfind('/');
  return uri.substr(slash + 1, uri.find('?') - slash - 1);
}

// Leaf's servers, as they take a range with a step of their own: the UPDATE and the read of the
// row in one transaction. They issue [max_id - step, max_id).
IdRange LeafTakes(Direct& leaf, const std::string& tag, int step) {
  leaf.Exec("START TRANSACTION");
  leaf.Exec("UPDATE leaf_alloc SET max_id = max_id + " + std::to_string(step) +
            " WHERE biz_tag = '" + tag + "'");
  const std::int64_t max_id =
      leaf.Value("SELECT max_id FROM leaf_alloc WHERE biz_tag = '" + tag + "'");
  leaf.Exec("COMMIT");
  return IdRange{max_id - step, max_id};
}

// tinyid's servers: read the row, then update it on the max_id and version read; they issue
// (max_id, max_id + step] when the update changed the row, and read again when it did not.
std::optional<IdRange> TinyidTakes(Direct& tinyid, const std::string& tag) {
  const std::string where = " FROM tiny_id_info WHERE biz_type = '" + tag + "'";
  const std::int64_t id = tinyid.Value("SELECT id" + where);
  const std::int64_t max_id = tinyid.Value("SELECT max_id" + where);
  const std::int64_t step = tinyid.Value("SELECT step" + where);
  const std::int64_t version = tinyid.Value("SELECT version" + where);
  const std::uint64_t changed =
      tinyid.Exec("UPDATE tiny_id_info SET max_id = " + std::to_string(max_id + step) +
                  ", update_time = now(), version = version + 1 WHERE id = " + std::to_string(id) +
                  " AND max_id = " + std::to_string(max_id) +
                  " AND version = " + std::to_string(version) + " AND biz_type = '" + tag + "'");
  if (changed != 1) return std::nullopt;
  return IdRange{max_id + 1, max_id + step + 1};
}

TEST(MysqlSegmentStoreTest, LeafsOwnServersAndSekkaShareARowWithoutOverlap) {
  const std::string uri = FreshDatabase("leaf");
  Direct leaf(DatabaseOf(uri));
  leaf.Exec("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100)");
  ExpectContiguous(DrawBeside([&] { return OpenOrNull(uri); }, "orders",
                              [&] { return std::optional(LeafTakes(leaf, "orders", 100)); }),
                   1);
}

TEST(MysqlSegmentStoreTest, TinyidsOwnServersAndSekkaShareARowWithoutOverlap) {
  const std::string uri = FreshDatabase("tinyid");
  Direct tinyid(DatabaseOf(uri));
  tinyid.Exec(
      "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder) "
      "VALUES ('test', 1, 1, 100, 1, 0)");
  // tinyid issues ids above max_id
  ExpectContiguous(DrawBeside([&] { return OpenOrNull(uri); }, "test",
                              [&] { return TinyidTakes(tinyid, "test"); }),
                   2);
}

// Issue 40: a table made when tags were ASCII (and before tombstones) is brought up to date at
// start: its tags keep their rows, and UTF-8 names, "a" beside "a " and "A", fit.
TEST(MysqlSegmentStoreTest, AnAsciiTableMadeBeforeTakesEveryTagAsBytes) {
  const std::string uri = FreshDatabase("sekka");
  Direct db(DatabaseOf(uri));
  db.Exec(
      "CREATE TABLE sekka_segments (tag VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin "
      "PRIMARY KEY, next_id BIGINT NOT NULL, step BIGINT NOT NULL, delta BIGINT NOT NULL DEFAULT "
      "1, remainder BIGINT NOT NULL DEFAULT 0, updated_at TIMESTAMP(3) NOT NULL DEFAULT "
      "CURRENT_TIMESTAMP(3)); INSERT INTO sekka_segments (tag, next_id, step) VALUES ('a', 41, 5)");
  std::unique_ptr<SegmentStore> store = OpenOrNull(uri);
  for (const char* name : {"a ", "A", "\xe8\xae\xa2\xe5\x8d\x95"}) {
    Status made = store->CreateTag({name, 7, 5});
    ASSERT_TRUE(made.ok()) << made.error().message;
  }
  Result<Allocation> old = store->Allocate("a", 5);
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(old->begin, 41);
  Result<Allocation> wide = store->Allocate("\xe8\xae\xa2\xe5\x8d\x95", 5);
  ASSERT_TRUE(wide.ok()) << wide.error().message;
  EXPECT_EQ(wide->begin, 7);
  EXPECT_EQ(db.Value("SELECT COUNT(*) FROM sekka_segments WHERE deleted = 0"), 4);
}

// Review of issue 40: on a Leaf table in latin1 (MariaDB's own default), the listing compared
// latin1 bytes with the cursor's UTF-8 and served one page for ever; a name latin1 cannot hold
// was a store error ("Illegal mix of collations") anyone could raise.
TEST(MysqlSegmentStoreTest, ALatin1PeerTableListsInUtf8OrderAndHoldsNoOtherName) {
  static int n = 0;
  const std::string name = "sekka_latin1_" + std::to_string(::getpid()) + "_" + std::to_string(++n);
  Direct().Exec("CREATE DATABASE " + name + " CHARACTER SET latin1");
  Direct db(name);
  db.Exec(std::string(kLeafTable) +
          "; INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('z', 1, 10), "
          "('\xc3\xa9"
          "1', 1, 10), ('\xc3\xa9"
          "2', 1, 10), ('a', 1, 10)");
  std::unique_ptr<SegmentStore> store = OpenOrNull(BaseUri() + name + "?schema=leaf");
  std::vector<std::string> names;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    Result<std::vector<TagInfo>> r = store->ListTagsAfter(after, 1);
    ASSERT_TRUE(r.ok()) << r.error().message;
    if (r->empty()) break;
    after = r->at(0).tag;
    names.push_back(after);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a", "z",
                                             "\xc3\xa9"
                                             "1",
                                             "\xc3\xa9"
                                             "2"}));
  Result<Allocation> other = store->Allocate("\xe8\xae\xa2\xe5\x8d\x95", 5);  // 订单
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kNotFound) << other.error().message;
  Result<Allocation> again = store->Allocate(
      "\xc3\xa9"
      "1",
      5);  // and the store still serves
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->begin, 1);
}

TEST(MysqlSegmentStoreTest, APeersMissingTableIsNamedNotMade) {
  const std::string uri = FreshDatabase("sekka");  // a database without Leaf's table
  const std::string leaf = uri.substr(0, uri.find('?')) + "?schema=leaf";
  Result<Allocation> r = OpenOrNull(leaf)->Allocate("orders", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("Leaf's table leaf_alloc in place, and it is missing"),
            std::string::npos)
      << r.error().message;
}

TEST(MysqlSegmentStoreTest, AnUnreachableDatabaseIsUnavailableAndNamed) {
  auto store = OpenOrNull("mysql://sekka:pw@127.0.0.1:1/x");
  ASSERT_NE(store, nullptr);
  Result<Allocation> r = store->Allocate("t", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("is unreachable"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("pw"), std::string::npos) << "the password must not leak";
}

TEST(MysqlSegmentStoreTest, BadUrisAreInvalidArgumentsNamingWhatIsAllowed) {
  for (const auto& [uri, says] : std::vector<std::pair<std::string, std::string>>{
           {"mysql://sekka@127.0.0.1:3306/db?schema=cosid", "allowed sekka, leaf, tinyid"},
           {"mysql://sekka@127.0.0.1:3306/db?sslmode=on", "allowed schema, socket"},
           {"mysql://sekka@127.0.0.1:3306", "names no database"},
           {"mysql://sekka@127.0.0.1:99999/db", "allowed 1 to 65535"},
           {"mysql://sekka:p%zz@127.0.0.1/db", "bad %-escape"}}) {
    Result<std::unique_ptr<SegmentStore>> s = OpenMysqlSegmentStore(uri);
    ASSERT_FALSE(s.ok()) << uri;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(s.error().message.find(says), std::string::npos) << s.error().message;
  }
  EXPECT_TRUE(OpenSegmentStore(BaseUri() + "x", "/tmp").ok());
  EXPECT_TRUE(OpenSegmentStore("mariadb://u:p%40ss@127.0.0.1/db?schema=leaf", "/tmp").ok());
}

// The review of issue 25: rows another program wrote are served only when they make sense. A
// tinyid row with delta 0 crashed the server (a division by zero); one with delta -1 issued ids
// outside its range, down through 0 to 2^64 - 1; a Leaf row at max_id 0 issued id 0.
TEST(MysqlSegmentStoreTest, AnotherProgramsBadRowsAreRefusedNotServed) {
  const std::string tinyid = FreshDatabase("tinyid");
  Direct(DatabaseOf(tinyid))
      .Exec(
          "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder) "
          "VALUES ('d0', 0, 0, 100, 0, 0), ('dneg', 0, 100, 100, -1, 0), "
          "('maxed', 0, 9223372036854775807, 100, 1, 0)");
  auto store = OpenOrNull(tinyid);
  SegmentAllocator allocator(*store, SystemClock());
  for (const char* tag : {"d0", "dneg"}) {
    Result<SegmentSequence*> seq = allocator.Sequence(tag);
    ASSERT_FALSE(seq.ok()) << tag;
    EXPECT_EQ(seq.error().code, ErrorCode::kUnavailable);
    EXPECT_NE(seq.error().message.find("allowed delta 1 to"), std::string::npos)
        << seq.error().message;
  }
  // A row at the end of int64 is listed (and exhausted), not an error for every tag.
  Result<std::vector<TagInfo>> tags = store->ListTags();
  ASSERT_TRUE(tags.ok()) << tags.error().message;
  EXPECT_EQ(tags->back().next_id, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(store->Allocate("maxed", 1).error().code, ErrorCode::kExhausted);

  const std::string leaf = FreshDatabase("leaf");
  Direct(DatabaseOf(leaf))
      .Exec("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('zero', -50, 10)");
  auto leaf_store = OpenOrNull(leaf);
  SegmentOptions options;
  options.wait_deadline = std::chrono::milliseconds(300);
  SegmentAllocator leaf_allocator(*leaf_store, SystemClock(), options);
  Result<SegmentSequence*> zero = leaf_allocator.Sequence("zero");
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  Result<std::int64_t> id = (*zero)->NextId();
  ASSERT_FALSE(id.ok()) << "issued " << *id;
  EXPECT_NE(id.error().message.find("ids start at 1"), std::string::npos) << id.error().message;
}

// The review of issue 25: the parser and the redaction of messages disagreed on where a
// password ends ('://' or a newline in it), and an '@' in a parameter's value was taken for the
// end of a user part. Such URIs are refused, and no error quotes a password back.
TEST(MysqlSegmentStoreTest, AUriThatHidesItsPasswordIsRefusedWithoutQuotingIt) {
  for (const std::string uri :
       {"mysql://u:a://SECRET@127.0.0.1:1/db", "mysql://u:SEC\nRET@127.0.0.1:1/db",
        "mysql://u:SECRET#x@127.0.0.1:1/db", "redis://default:a://SECRET@127.0.0.1:1/0"}) {
    Result<std::unique_ptr<SegmentStore>> s = OpenSegmentStore(uri, "/tmp");
    if (s.ok()) {
      Result<Allocation> r = (*s)->Allocate("t", 1);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().message.find("SEC"), std::string::npos) << r.error().message;
      continue;
    }
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument) << uri;
    EXPECT_EQ(s.error().message.find("SEC"), std::string::npos) << s.error().message;
  }
  Result<std::unique_ptr<SegmentStore>> at =
      OpenSegmentStore("redis://127.0.0.1:1/0?tls_ca_file=/etc/ca@127.0.0.1", "/tmp");
  ASSERT_FALSE(at.ok());
  EXPECT_NE(at.error().message.find("use rediss://"), std::string::npos)
      << "the '@' belongs to the file name: " << at.error().message;
}

TEST(MysqlSegmentStoreTest, LeafsIntStepColumnHoldsEveryTagStep) {
  auto store = OpenOrNull(FreshDatabase("leaf"));
  EXPECT_TRUE(store->CreateTag({"most", 1, kMaxTagStep}).ok());
  EXPECT_TRUE(store->SetStep("most", kMaxTagStep).ok());
  Status s = store->CreateTag({"big", 1, kMaxTagStep + 1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("allowed 1 to 1000000000"), std::string::npos);
}

}  // namespace
}  // namespace sekka
