#include "server/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace sekka::server {
namespace {

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/sekka_config_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigTest, DefaultsAreTheEmbeddedOnes) {
  Result<ServerConfig> c = BuildConfig({});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->http_listen, "127.0.0.1:8080");
  EXPECT_EQ(c->resp_listen, "127.0.0.1:6380");
  EXPECT_EQ(c->data_dir, "./sekka-data");
  EXPECT_EQ(c->worker_source, "local");
  EXPECT_EQ(c->generator.layout.name(), "sekka");
  EXPECT_EQ(c->generator.max_backwards_wait.count(), 1000);
  EXPECT_EQ(c->max_batch, 100000);
}

// Issue 41: segment.wait_deadline was "500ms" in the table and 2000 in config.h, so the tests
// and the simulation ran with 2 s while every server ran with 500 ms. Defaults live in the
// table only; DefaultConfig is the table's.
TEST(ConfigTest, TestsAndTheSimulationStartFromTheTablesDefaults) {
  const ServerConfig d = DefaultConfig();
  EXPECT_EQ(d.segment_wait_deadline_ms, 500);
  EXPECT_EQ(d.max_connections, 10000);
  EXPECT_EQ(d.lease_ttl_ms, 10000);
  EXPECT_EQ(d.cluster, "default");
  EXPECT_EQ(d.worker_lock_dir, "/var/lib/sekka/workers");
  EXPECT_EQ(d.after_id, -1);  // not set: no floor
}

TEST(ConfigTest, FileThenEnvironmentThenFlagsTheLaterWins) {
  const std::string path = WriteTemp(
      "[server]\nhttp_listen = \"127.0.0.1:1\"\nresp_listen = \"127.0.0.1:2\"\n"
      "[generator]\nmax_drift = \"250ms\"\n[layout]\npreset = \"twitter\"\n");
  Result<ConfigValues> file = ReadConfigFile(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<ConfigValues> env = ReadConfigEnvironment(
      {"PATH=/bin", "SEKKA_SERVER_HTTP_LISTEN=127.0.0.1:3", "SEKKA_DATA_DIR=/tmp/d"});
  ASSERT_TRUE(env.ok());
  ConfigValues flags = {{"server.http_listen", "127.0.0.1:4"}};
  Result<ServerConfig> c = BuildConfig({*file, *env, flags});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->http_listen, "127.0.0.1:4");
  EXPECT_EQ(c->resp_listen, "127.0.0.1:2");
  EXPECT_EQ(c->data_dir, "/tmp/d");
  EXPECT_EQ(c->generator.max_drift.count(), 250);
  EXPECT_EQ(c->generator.layout.name(), "twitter");
  const std::string printed = PrintConfig({*file, *env, flags});
  EXPECT_NE(printed.find("[server]\nhttp_listen = \"127.0.0.1:4\""), std::string::npos) << printed;
  std::remove(path.c_str());
}

TEST(ConfigTest, UnknownKeysAndBadValuesNameTheKey) {
  const std::string path = WriteTemp("[server]\nhtp_listen = \"x\"\n");
  Result<ConfigValues> file = ReadConfigFile(path);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().message.find("line 2: unknown key server.htp_listen"), std::string::npos)
      << file.error().message;
  std::remove(path.c_str());

  const std::string typed = WriteTemp("[server]\nmax_batch = \"many\"\n");
  EXPECT_NE(ReadConfigFile(typed).error().message.find("server.max_batch must be an integer"),
            std::string::npos);
  std::remove(typed.c_str());

  EXPECT_NE(ReadConfigEnvironment({"SEKKA_SERVR_HTTP=1"}).error().message.find("SEKKA_SERVR_HTTP"),
            std::string::npos);
  auto bad = [](const char* key, const char* value) {
    Result<ServerConfig> c = BuildConfig({{{key, value}}});
    EXPECT_FALSE(c.ok()) << key;
    return c.ok() ? std::string() : c.error().message;
  };
  EXPECT_NE(bad("generator.max_drift", "5x").find("generator.max_drift = \"5x\""),
            std::string::npos);
  EXPECT_NE(bad("generator.on_clock_backwards", "panic").find("allowed wait | fail | continue"),
            std::string::npos);
  EXPECT_NE(bad("worker.source", "dns").find("allowed static, local, hostname"), std::string::npos);
  EXPECT_NE(bad("layout.preset", "nope").find("layout.preset"), std::string::npos);
  EXPECT_NE(bad("layout.worker_bits", "11").find("sum to 64"), std::string::npos);
  EXPECT_NE(bad("server.threads", "-1").find("server.threads"), std::string::npos);
  EXPECT_NE(bad("nope.key", "1").find("unknown config key nope.key"), std::string::npos);
}

TEST(ConfigTest, StrictTagsAreNamesEachOnceAtMostAThousand) {
  auto build = [](const std::string& tags, const char* source = "etcd") {
    return BuildConfig({{{"strict.tags", tags},
                         {"worker.source", source},
                         {"worker.coordinator", std::string(source) + "://127.0.0.1:2379"},
                         {"worker.cluster", std::string(30, 'c')}}});
  };
  Result<ServerConfig> ok = build(" orders, feed.1 ,ledger_2");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->strict_tags, (std::vector<std::string>{"orders", "feed.1", "ledger_2"}));
  EXPECT_TRUE(BuildConfig({}).value().strict_tags.empty());  // none by default
  std::string thousand_and_one;
  for (int i = 0; i <= 1000; ++i) {
    if (i > 0) thousand_and_one += ',';
    thousand_and_one += 't';
    thousand_and_one += std::to_string(i);
  }
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"a,,b", "entry 2 is empty"},
      {"a,b,", "entry 3 is empty"},
      {"ch at", "strict tag \"ch at\" is not valid"},
      {"a,a", "lists \"a\" twice"},
      {"a/b", "allowed 1 to 40 characters"},
      {std::string(41, 'x'), "allowed 1 to 40 characters"},
      {std::string(30, 't'), "does not fit cluster"},  // 30 + ".strict." + 30 > 64
      {thousand_and_one, "lists 1001 tags: allowed at most 1000"},
  };
  for (const auto& [value, why] : refused) {
    Result<ServerConfig> c = build(value);
    ASSERT_FALSE(c.ok()) << value;
    EXPECT_NE(c.error().message.find(why), std::string::npos) << c.error().message;
    EXPECT_LT(c.error().message.size(), 400u) << "one short line, not the whole list";
  }
  // A server alone serves them too (issue 44), each bound in its data dir; never servers that
  // static or hostname name (each would count by itself).
  EXPECT_EQ(BuildConfig({{{"strict.tags", "a"}}}).value().strict_tags,
            std::vector<std::string>{"a"});
  for (const char* source : {"static", "hostname"}) {
    ConfigValues values{{"worker.source", source}, {"strict.tags", "a"}};
    if (std::string(source) == "static") values.emplace_back("worker.id", "1");
    Result<ServerConfig> alone = BuildConfig({values});
    ASSERT_FALSE(alone.ok()) << source;
    EXPECT_NE(alone.error().message.find("would count each tag by itself"), std::string::npos)
        << alone.error().message;
  }
}

TEST(ConfigTest, ACustomLayoutOverridesThePreset) {
  Result<ServerConfig> c = BuildConfig(
      {{{"layout.worker_bits", "11"}, {"layout.sequence_bits", "11"}, {"layout.tick", "2ms"}}});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->generator.layout.name(), "custom");
  EXPECT_EQ(c->generator.layout.worker_bits(), 11);
  EXPECT_EQ(c->generator.layout.tick_millis(), 2);
}

}  // namespace
}  // namespace sekka::server
