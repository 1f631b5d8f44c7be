#include "backends/postgres_segment_store.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "backends/segment_store_uri.h"
#include "testing/segment_store_contract.h"

namespace sekka {
namespace {

// The URI of the PostgreSQL that the ctest fixture started (scripts/pg.sh).
std::string BaseUri() {
  return FixtureUri("SEKKA_TEST_POSTGRES_FILE", "PostgreSQL", "postgres", "pg.sh");
}

// Runs `sql` on the database at `uri`.
void Sql(const std::string& uri, const std::string& sql) {
  PGconn* c = PQconnectdb(uri.c_str());
  EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  PGresult* r = PQexec(c, sql.c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
}

// The peers' tables as a team that keeps them in PostgreSQL has them: Leaf's and tinyid's
// MySQL scripts, column for column, in PostgreSQL's types.
constexpr const char* kLeafTable =
    "CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) NOT NULL DEFAULT '' PRIMARY KEY, "
    "max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL, description VARCHAR(256), "
    "update_time TIMESTAMP NOT NULL DEFAULT now())";
constexpr const char* kTinyidTable =
    "CREATE TABLE tiny_id_info (id BIGSERIAL PRIMARY KEY, "
    "biz_type VARCHAR(63) NOT NULL DEFAULT '' UNIQUE, begin_id BIGINT NOT NULL DEFAULT 0, "
    "max_id BIGINT NOT NULL DEFAULT 0, step INT DEFAULT 0, delta INT NOT NULL DEFAULT 1, "
    "remainder INT NOT NULL DEFAULT 0, create_time TIMESTAMP NOT NULL DEFAULT '2010-01-01', "
    "update_time TIMESTAMP NOT NULL DEFAULT '2010-01-01', version BIGINT NOT NULL DEFAULT 0)";

// A fresh database per contract case, with the peer's table when the schema is a peer's.
std::string FreshDatabase(const std::string& schema = "") {
  static int n = 0;
  const std::string base = BaseUri();
  const std::string name =
      "sekka_contract_" + std::to_string(::getpid()) + "_" + std::to_string(++n);
  Sql(base, "CREATE DATABASE " + name);
  const std::string uri = base.substr(0, base.rfind('/') + 1) + name;
  if (schema == "leaf") Sql(uri, kLeafTable);
  if (schema == "tinyid") Sql(uri, kTinyidTable);
  return schema.empty() ? uri : uri + "?schema=" + schema;
}

StoreFactory Factory(const std::string& schema) {
  return StoreFactory{"postgres" + (schema.empty() ? "" : "_" + schema),
                      [schema] { return FreshDatabase(schema); },
                      [](const std::string& uri) -> std::unique_ptr<SegmentStore> {
                        Result<std::unique_ptr<SegmentStore>> s = OpenPostgresSegmentStore(uri);
                        return s.ok() ? std::move(s).value() : nullptr;
                      },
                      schema != "leaf", schema.empty()};
}

INSTANTIATE_TEST_SUITE_P(Postgres, SegmentStoreContractTest,
                         ::testing::Values(Factory(""), Factory("leaf"), Factory("tinyid")),
                         [](const auto& info) { return info.param.name; });

// Leaf's servers on PostgreSQL take a range as on MySQL (UPDATE, then the read, in one
// transaction); beside two sekka stores on the same row, no id is covered twice.
TEST(PostgresSegmentStoreTest, LeafsOwnServersAndSekkaShareARowWithoutOverlap) {
  const std::string uri = FreshDatabase("leaf");
  const std::string plain = uri.substr(0, uri.find('?'));
  Sql(plain, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('orders', 1, 100)");
  PGconn* leaf = PQconnectdb(plain.c_str());
  const auto leaf_takes = [leaf] {
    PGresult* r = PQexec(leaf,
                         "BEGIN; UPDATE leaf_alloc SET max_id = max_id + 100 WHERE biz_tag = "
                         "'orders'; SELECT max_id FROM leaf_alloc WHERE biz_tag = 'orders'");
    const std::int64_t max_id = std::atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQclear(PQexec(leaf, "COMMIT"));
    return std::optional(IdRange{max_id - 100, max_id});
  };
  const auto open = [&] { return std::move(OpenPostgresSegmentStore(uri)).value(); };
  ExpectContiguous(DrawBeside(open, "orders", leaf_takes), 1);
  PQfinish(leaf);
}

TEST(PostgresSegmentStoreTest, APeersMissingTableIsNamedNotMade) {
  auto store = std::move(OpenPostgresSegmentStore(FreshDatabase() + "?schema=tinyid")).value();
  Result<Allocation> r = store->Allocate("t", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("tinyid's table tiny_id_info in place, and it is missing"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(OpenPostgresSegmentStore("postgres://127.0.0.1/db?schema=cosid").error().code,
            ErrorCode::kInvalidArgument);
}

TEST(PostgresSegmentStoreTest, ATableFromBeforeDeltaGetsTheColumnsAndKeepsItsTags) {
  const std::string uri = FreshDatabase();
  PGconn* c = PQconnectdb(uri.c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  PGresult* r =
      PQexec(c,
             "CREATE TABLE sekka_segments (tag TEXT PRIMARY KEY, next_id BIGINT NOT NULL, "
             "step BIGINT NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now());"
             "INSERT INTO sekka_segments (tag, next_id, step) VALUES ('old', 7, 10)");
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
  for (int open = 0; open < 2; ++open) {  // the second open finds the columns there
    Result<std::unique_ptr<SegmentStore>> s = OpenPostgresSegmentStore(uri);
    ASSERT_TRUE(s.ok()) << s.error().message;
    Result<TagInfo> old = (*s)->GetTag("old");
    ASSERT_TRUE(old.ok()) << old.error().message;
    EXPECT_EQ(*old, (TagInfo{"old", 7 + 10 * open, 10, 1, 0}));
    EXPECT_EQ(*(*s)->Allocate("old", 10), (IdRange{7 + 10 * open, 17 + 10 * open}));
  }
}

TEST(PostgresSegmentStoreTest, AnUnreachableDatabaseIsUnavailableAndNamed) {
  auto store = std::move(OpenPostgresSegmentStore("postgres://sekka:pw@127.0.0.1:1/x")).value();
  Result<Allocation> r = store->Allocate("t", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("is unreachable"), std::string::npos);
  EXPECT_EQ(r.error().message.find("pw"), std::string::npos) << "the password must not leak";
}

TEST(PostgresSegmentStoreTest, ABadUriIsAnInvalidArgument) {
  Result<std::unique_ptr<SegmentStore>> bad =
      OpenPostgresSegmentStore("postgres://127.0.0.1/db?no_such_option=1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("not a valid PostgreSQL URI"), std::string::npos);
}

TEST(SegmentStoreUriTest, PicksTheStoreFromItsUri) {
  EXPECT_EQ(OpenSegmentStore("etcd://x", "/tmp").error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(OpenSegmentStore("mongodb://x", "/tmp").error().message.find("allowed"),
            std::string::npos);
  EXPECT_EQ(OpenSegmentStore("sqlite:", "/tmp").error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(OpenSegmentStore(BaseUri(), "/tmp").ok());
}

}  // namespace
}  // namespace sekka

namespace sekka {
namespace {

TEST(TakePostgresOptionTest, TakesSekkasParameterAndLeavesLibpqsOnes) {
  std::string a = "postgres://u:p?w@127.0.0.1/db?schema=leaf";
  EXPECT_EQ(TakePostgresOption(a, "schema"), "leaf");
  EXPECT_EQ(a, "postgres://u:p?w@127.0.0.1/db");
  std::string b = "postgres://127.0.0.1/db?schema=tinyid&sslmode=disable";
  EXPECT_EQ(TakePostgresOption(b, "schema"), "tinyid");
  EXPECT_EQ(b, "postgres://127.0.0.1/db?sslmode=disable");
  std::string c = "postgres://127.0.0.1/db?sslmode=disable&schema=leaf&connect_timeout=1";
  EXPECT_EQ(TakePostgresOption(c, "schema"), "leaf");
  EXPECT_EQ(c, "postgres://127.0.0.1/db?sslmode=disable&connect_timeout=1");
  std::string d = "postgres://127.0.0.1/db?sslmode=disable";
  EXPECT_EQ(TakePostgresOption(d, "schema"), "");
  EXPECT_EQ(d, "postgres://127.0.0.1/db?sslmode=disable");
}

// Review of issue 24: with a '?' in the password, connect_timeout went into the database name
// and a database that accepted and never answered hung every call.
TEST(WithPostgresOptionTest, TheQueryBeginsAfterThePassword) {
  EXPECT_EQ(WithPostgresOption("postgres://u:pw?x@127.0.0.1/db", "connect_timeout=5"),
            "postgres://u:pw?x@127.0.0.1/db?connect_timeout=5");
  EXPECT_EQ(WithPostgresOption("postgres://u@127.0.0.1/db?sslmode=disable", "connect_timeout=5"),
            "postgres://u@127.0.0.1/db?sslmode=disable&connect_timeout=5");
  EXPECT_EQ(WithPostgresOption("postgres://127.0.0.1/db?connect_timeout=1", "connect_timeout=5"),
            "postgres://127.0.0.1/db?connect_timeout=1");
  EXPECT_EQ(WithPostgresOption("postgresql://127.0.0.1/db", "keepalives_idle=5"),
            "postgresql://127.0.0.1/db?keepalives_idle=5");
}

}  // namespace
}  // namespace sekka
