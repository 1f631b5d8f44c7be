#include "backends/postgres_segment_store.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <cstdlib>
#include <fstream>

#include "backends/segment_store_uri.h"
#include "testing/segment_store_contract.h"

namespace sekka {
namespace {

// The URI of the PostgreSQL that the ctest fixture started (scripts/pg.sh).
std::string BaseUri() {
  const char* file = std::getenv("SEKKA_TEST_POSTGRES_FILE");
  std::string uri;
  if (file != nullptr) std::ifstream(file) >> uri;
  if (uri.empty()) {
    ADD_FAILURE() << "no PostgreSQL for the tests: run them through ctest, whose `postgres` "
                     "fixture starts one (scripts/pg.sh start DIR) and sets "
                     "SEKKA_TEST_POSTGRES_FILE";
  }
  return uri;
}

// A fresh database per contract case.
std::string FreshDatabase() {
  static int n = 0;
  const std::string base = BaseUri();
  const std::string name =
      "sekka_contract_" + std::to_string(::getpid()) + "_" + std::to_string(++n);
  PGconn* c = PQconnectdb(base.c_str());
  EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  PQclear(PQexec(c, ("CREATE DATABASE " + name).c_str()));
  PQfinish(c);
  return base.substr(0, base.rfind('/') + 1) + name;
}

INSTANTIATE_TEST_SUITE_P(Postgres, SegmentStoreContractTest,
                         ::testing::Values(StoreFactory{
                             "postgres", FreshDatabase,
                             [](const std::string& uri) -> std::unique_ptr<SegmentStore> {
                               Result<std::unique_ptr<SegmentStore>> s =
                                   OpenPostgresSegmentStore(uri);
                               return s.ok() ? std::move(s).value() : nullptr;
                             }}));

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
  Result<IdRange> r = store->Allocate("t", 1);
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
