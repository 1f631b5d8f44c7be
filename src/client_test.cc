// sekka::Client against real `sekka serve` processes on 127.0.0.1 ($SEKKA_BIN, which ctest
// sets): uniqueness across clients and servers, kill -9 while drawing, all servers down and
// back, a wrong token, a tag across a failover.

#include "sekka/client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace sekka {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string Sekka() {
  const char* bin = std::getenv("SEKKA_BIN");
  return bin != nullptr ? bin : "build/cli/sekka";
}

int WorkerOf(Id id) { return static_cast<int>((id >> 12) & 1023); }

// A port for a server started on a known address: tests/free_port.py's, below the kernel's
// ephemeral range, so that neither another connection nor the client's own reconnects (a
// self-connect to a port in that range) take it while its server is down.
int FreePort() {
  FILE* pick = ::popen("/usr/bin/python3 " SEKKA_SOURCE_DIR "/tests/free_port.py", "r");
  int port = 0;
  EXPECT_NE(pick, nullptr);
  if (pick != nullptr) {
    EXPECT_EQ(std::fscanf(pick, "%d", &port), 1);
    EXPECT_EQ(::pclose(pick), 0);
  }
  return port;
}

// One `sekka serve`, stopped by its PID.
class Server {
 public:
  Server(const fs::path& dir, int worker_id, const std::string& resp = "127.0.0.1:0",
         std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {Sekka(),       "serve",       "--http",
                                     "127.0.0.1:0", "--resp",      resp,
                                     "--data-dir",  dir.string(),  "--worker-source",
                                     "static",      "--worker-id", std::to_string(worker_id)};
    args.insert(args.end(), flags.begin(), flags.end());
    // Each server is a host of its own (its own worker lock dir); built before fork.
    std::vector<std::string> env = {"SEKKA_WORKER_LOCK_DIR=" + (dir / "host-locks").string()};
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).rfind("SEKKA_WORKER_LOCK_DIR=", 0) != 0) env.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 2);
      ::close(out[0]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(out[0]);
    std::smatch m;
    EXPECT_TRUE(std::regex_search(line, m, std::regex(R"(Redis protocol on (\S+?)(,| \())")))
        << "first line: " << line;
    if (!m.empty()) resp_ = m[1];
  }
  ~Server() { Stop(SIGTERM); }

  void Stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  const std::string& resp() const { return resp_; }

 private:
  pid_t pid_ = -1;
  std::string resp_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sekka-cpp-client-XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    servers_.clear();
    fs::remove_all(root_);
  }
  Server& Start(const std::string& name, int worker_id, const std::string& resp = "127.0.0.1:0",
                std::vector<std::string> flags = {}) {
    servers_.push_back(std::make_unique<Server>(root_ / name, worker_id, resp, std::move(flags)));
    return *servers_.back();
  }
  static std::unique_ptr<Client> Make(const ClientOptions& o) {
    Result<std::unique_ptr<Client>> c = Client::Create(o);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
    return std::move(c).value();
  }

  fs::path root_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_F(ClientTest, EightThreadsTwoClientsTwoServersGiveDistinctIds) {
  Server& a = Start("a", 1);
  Server& b = Start("b", 2);
  ClientOptions o1, o2;
  o1.servers = {a.resp(), b.resp()};
  o2.servers = {b.resp(), a.resp()};
  // No failover is expected: a slow machine (TSan, two hogs) must not turn into one through the
  // 1 s per-command default, so the bounds here are liveness bounds only.
  o1.timeout = o2.timeout = o1.connect_timeout = o2.connect_timeout = 30s;
  std::unique_ptr<Client> clients[] = {Make(o1), Make(o2)};
  std::vector<std::vector<Id>> per_thread(8);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 100'000; ++i) {
        Result<Id> id = clients[k % 2]->NextId();
        if (!id.ok()) {
          ++errors;
          return;
        }
        per_thread[k].push_back(*id);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  std::set<Id> all;
  for (const auto& ids : per_thread) {
    for (std::size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]);
    all.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(all.size(), 800'000u);
  EXPECT_EQ(WorkerOf(per_thread[0][0]), 1);
  EXPECT_EQ(WorkerOf(per_thread[1][0]), 2);
  EXPECT_EQ(clients[0]->stats().failovers, 0u);
  EXPECT_EQ(clients[0]->stats().served, 400'000u);
  EXPECT_EQ(clients[0]->NextIds(5)->size(), 5u);
}

TEST_F(ClientTest, KillNineWhileDrawing) {
  Server& a = Start("a", 1);
  Server& b = Start("b", 2);
  ClientOptions o;
  o.servers = {a.resp(), b.resp()};
  o.validity = 1000ms;
  o.timeout = 500ms;
  // Fixed batches lasting ~2.5 s at ~400 ids/s: the dead server's ids would still be buffered
  // after the validity period if the client did not drop them.
  o.batch = o.min_batch = o.max_batch = 1000;
  auto c = Make(o);
  std::mutex mu;
  std::vector<std::pair<std::chrono::steady_clock::time_point, Id>> got;
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      while (!stop) {
        Result<Id> id = c->NextId();
        if (!id.ok()) {
          ++errors;
          return;
        }
        {
          std::lock_guard lock(mu);
          got.emplace_back(std::chrono::steady_clock::now(), *id);
        }
        std::this_thread::sleep_for(10ms);
      }
    });
  }
  std::this_thread::sleep_for(500ms);
  const auto killed_at = std::chrono::steady_clock::now();
  a.Stop(SIGKILL);
  std::this_thread::sleep_for(o.validity + 1500ms);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  std::set<Id> ids;
  std::set<int> late;
  bool saw_dead = false;
  for (const auto& [t, id] : got) {
    EXPECT_TRUE(ids.insert(id).second) << "repeated " << id;
    if (t < killed_at && WorkerOf(id) == 1) saw_dead = true;
    if (t > killed_at + o.validity + 200ms) late.insert(WorkerOf(id));
  }
  EXPECT_TRUE(saw_dead);
  EXPECT_EQ(late, std::set<int>{2});
  EXPECT_GE(c->stats().failovers, 1u);
}

TEST_F(ClientTest, AllDownThenBack) {
  const std::string ra = "127.0.0.1:" + std::to_string(FreePort());
  const std::string rb = "127.0.0.1:" + std::to_string(FreePort());
  Server& a = Start("a", 1, ra);
  Server& b = Start("b", 2, rb);
  ClientOptions o;
  o.servers = {ra, rb};
  o.batch = o.min_batch = o.max_batch = 100;
  o.validity = 60s;
  o.backoff_max = 500ms;
  o.timeout = o.connect_timeout = 500ms;
  auto c = Make(o);
  std::vector<Id> drawn = {*c->NextId()};
  a.Stop(SIGKILL);
  b.Stop(SIGKILL);
  Result<Id> id = Internal("none");
  for (int i = 0; i < 10'000; ++i) {
    id = c->NextId();
    if (!id.ok()) break;
    drawn.push_back(*id);
  }
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(id.error().message.find(ra), std::string::npos) << id.error().message;
  EXPECT_NE(id.error().message.find(rb), std::string::npos) << id.error().message;
  EXPECT_LE(drawn.size(), 201u);
  Start("a", 1, ra);  // the same data dir and port
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  Result<Id> more = c->NextId();
  while (!more.ok()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the client did not recover";
    std::this_thread::sleep_for(100ms);
    more = c->NextId();
  }
  EXPECT_GT(*more, *std::max_element(drawn.begin(), drawn.end()));
}

TEST_F(ClientTest, AWrongTokenFailsAtTheFirstCall) {
  Server& a = Start("a", 1, "127.0.0.1:0", {"--auth-token", "right-token-0123456"});
  ClientOptions o;
  o.servers = {a.resp()};
  o.token = "right-token-0123456";
  EXPECT_TRUE(Make(o)->NextId().ok());
  o.token = "wrong-token-0123456";
  const auto t0 = std::chrono::steady_clock::now();
  Result<Id> bad = Make(o)->NextId();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(bad.error().message.find("token"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  o.token = "";
  Result<Id> none = Make(o)->NextId();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kUnauthenticated);
}

TEST_F(ClientTest, ATagsIdsIncreaseAcrossAFailover) {
  const std::string store = "sqlite:" + (root_ / "segments.db").string();
  const std::string create =
      Sekka() + " segment create order --step 50 --segment-store " + store + " > /dev/null";
  ASSERT_EQ(std::system(create.c_str()), 0);
  Server& a = Start("a", 1, "127.0.0.1:0", {"--segment-store", store});
  Server& b = Start("b", 2, "127.0.0.1:0", {"--segment-store", store});
  ClientOptions o;
  o.servers = {a.resp(), b.resp()};
  o.batch = o.min_batch = o.max_batch = 20;
  auto c = Make(o);
  ClientOptions ob = o;
  ob.servers = {b.resp()};
  auto other = Make(ob);
  ASSERT_TRUE(other->Next("order").ok());
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back(*c->Next("order"));
  a.Stop(SIGKILL);
  for (int i = 0; i < 300; ++i) {
    Result<std::int64_t> id = c->Next("order");
    ASSERT_TRUE(id.ok()) << id.error().message;
    ids.push_back(*id);
  }
  for (std::size_t i = 1; i < ids.size(); ++i) ASSERT_LT(ids[i - 1], ids[i]);
  Result<std::int64_t> unknown = c->Next("no-such-tag");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("no-such-tag"), std::string::npos);
}

// Issue 23's finding 2: a connection the server closed (its idle timeout, a restart) failed the
// next refill and put a healthy server into backoff; with one server and nothing buffered, the
// caller got "no sekka server could serve". A reused connection that fails before any byte of
// the reply is tried once more on a fresh one.
TEST_F(ClientTest, AConnectionTheServerClosedWhileIdleIsReplaced) {
  Server& a = Start("a", 6, "127.0.0.1:0", {"--idle-timeout", "1s"});
  ClientOptions o;
  o.servers = {a.resp()};
  o.batch = o.min_batch = o.max_batch = 20;
  o.low_water = 0.01;  // each batch is used up before the next refill meets the closed connection
  o.validity = 60s;
  auto c = Make(o);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20; ++i) {
      Result<Id> id = c->NextId();
      ASSERT_TRUE(id.ok()) << id.error().message;
      EXPECT_EQ(WorkerOf(*id), 6);
    }
    std::this_thread::sleep_for(
        1500ms);  // past the server's idle timeout: it closes the connection
  }
  EXPECT_EQ(c->stats().server_errors, 0u) << "a closed idle connection counted as a server failure";
}

TEST(ClientOptionsTest, BadOptionsAreNamed) {
  EXPECT_NE(Client::Create("").error().message.find("servers is empty"), std::string::npos);
  EXPECT_NE(Client::Create("localhost").error().message.find("servers[0] = \"localhost\""),
            std::string::npos);
  ClientOptions o;
  o.servers = {"127.0.0.1:1"};
  o.min_batch = 5000;
  EXPECT_NE(Client::Create(o).error().message.find("min_batch 5000"), std::string::npos);
}

}  // namespace
}  // namespace sekka
