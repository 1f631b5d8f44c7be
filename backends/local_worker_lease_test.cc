// The worker-lease contract on the local sources: lock files and state files in a temp dir. A
// holder that dies is a forked child that acquires an id and exits without releasing it.

#include "backends/local_worker_lease.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "backends/worker_id.h"
#include "testing/worker_lease_contract.h"

namespace sekka {
namespace {

// The temp dirs the tests made, removed when the test process exits (the forked holders leave
// with _exit, so they never remove them).
struct TempDirs {
  std::mutex mu;
  std::vector<std::string> dirs;
  ~TempDirs() {
    std::error_code ignored;
    for (const std::string& d : dirs) std::filesystem::remove_all(d, ignored);
  }
};
TempDirs& Made() {
  static TempDirs made;
  return made;
}

std::string FreshDir() {
  static std::atomic<int> counter{0};
  const std::string dir =
      fmt::format("{}/sekka-local-lease-{}-{}", std::filesystem::temp_directory_path().string(),
                  ::getpid(), counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::lock_guard lock(Made().mu);
  Made().dirs.push_back(dir);
  return dir;
}

std::unique_ptr<WorkerLease> Open(const std::string& dir, const WorkerLeaseOptions& options) {
  LocalLeaseOptions local;
  local.source = "local";
  local.lock_dir = dir;
  return NewLocalWorkerLease(local, options);
}

LeaseFactory LocalFactory() {
  LeaseFactory f;
  f.name = "local";
  f.fresh = [] { return FreshDir(); };
  f.open = [](const std::string& where, const WorkerLeaseOptions& options) {
    return Open(where, options);
  };
  f.kill_holder = [](const std::string& where,
                     const WorkerLeaseOptions& options) -> Result<std::int64_t> {
    int fds[2];
    if (::pipe(fds) != 0) return Internal("pipe failed");
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(fds[0]);
      Result<LeaseGrant> g = Open(where, options)->Acquire();
      const std::int64_t id = g.ok() ? g->worker_id : -1;
      (void)::write(fds[1], &id, sizeof(id));
      ::_exit(0);  // dies holding it: no Release, no destructors
    }
    ::close(fds[1]);
    std::int64_t id = -1;
    const bool got = ::read(fds[0], &id, sizeof(id)) == sizeof(id);
    ::close(fds[0]);
    ::waitpid(child, nullptr, 0);
    if (!got || id < 0) return Internal("the holder did not acquire an id");
    return id;
  };
  f.frees_at_death = true;
  f.same_identity_takes_over = false;
  return f;
}

INSTANTIATE_TEST_SUITE_P(Local, WorkerLeaseContractTest, ::testing::Values(LocalFactory()),
                         [](const auto& info) { return info.param.name; });

WorkerLeaseOptions Identity(std::string identity) {
  WorkerLeaseOptions o;
  o.identity = std::move(identity);
  return o;
}

TEST(LocalWorkerLease, StaticAndHostnameSourcesHoldTheirOwnIdOnly) {
  const std::string dir = FreshDir();
  const WorkerLeaseOptions o = Identity("x");
  LocalLeaseOptions s;
  s.source.assign("static");
  s.lock_dir = dir;
  s.worker_id = 9;
  auto a = NewLocalWorkerLease(s, o);
  Result<LeaseGrant> g = a->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->worker_id, 9);
  Result<LeaseGrant> clash = NewLocalWorkerLease(s, Identity("y"))->Acquire();
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().code, ErrorCode::kUnavailable);
  LocalLeaseOptions h;
  h.source.assign("hostname");
  h.lock_dir = dir;
  h.hostname.assign("sekka-12.example");
  Result<LeaseGrant> byname = NewLocalWorkerLease(h, Identity("z"))->Acquire();
  ASSERT_TRUE(byname.ok()) << byname.error().message;
  EXPECT_EQ(byname->worker_id, 12);
  std::filesystem::remove_all(dir);
}

// A review found that a server whose lock file was removed never held an id again: Acquire
// returned the claim on the removed file. The loss drops the claim; the next Acquire locks anew.
TEST(LocalWorkerLease, ALeaseWhoseLockFileWasRemovedIsLostAndAcquiresAnew) {
  const std::string dir = FreshDir();
  LocalLeaseOptions l;
  l.lock_dir = dir;
  auto lease = NewLocalWorkerLease(l, Identity("x"));
  ASSERT_TRUE(lease->Acquire().ok());
  ASSERT_TRUE(lease->StoreHwm(1000).ok());
  std::filesystem::remove(dir + "/0-0.lock");
  Status renewed = lease->Renew();
  ASSERT_FALSE(renewed.ok());
  EXPECT_EQ(renewed.error().code, ErrorCode::kLeaseLost);
  EXPECT_EQ(lease->StoreHwm(2000).error().code, ErrorCode::kLeaseLost);
  Result<LeaseGrant> again = lease->Acquire();
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->hwm_millis, 1000);  // past the hwm its first holding stored
  EXPECT_TRUE(lease->Renew().ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/0-0.lock"));
  std::filesystem::remove_all(dir);
}

// Local-source options on `dir` with a preset layout.
LocalLeaseOptions InDir(const std::string& dir, const char* preset) {
  LocalLeaseOptions o;
  o.lock_dir = dir;
  o.layout = *Layout::Preset(preset);
  return o;
}

// Removes the lock dir's id-space binding, as an operator does to change a host's layout: the
// states of the old layout stay, and the per-id checks below keep their ids apart.
void Unbind(const std::string& dir) { std::filesystem::remove(dir + "/id-space"); }

// Issue 22, finding 3: an id's state names the layout (direction included) that used it. A
// free id whose earlier ids belong to another layout is passed over by `local`, so an upward and
// a downward generator on one host never hold one worker id, at once or one after the other.
TEST(LocalWorkerLease, LocalPassesOverAnIdWhoseStateIsOfAnotherLayout) {
  const std::string dir = FreshDir();
  LocalLeaseOptions up;
  up.lock_dir = dir;
  auto first = NewLocalWorkerLease(up, Identity("up"));
  ASSERT_EQ(first->Acquire()->worker_id, 0);
  ASSERT_TRUE(first->StoreHwm(1'000).ok());
  ASSERT_TRUE(first->Release().ok());
  Unbind(dir);
  LocalLeaseOptions down = up;
  down.layout = *Layout::Default().WithDescending(true);
  auto second = NewLocalWorkerLease(down, Identity("down"));
  Result<LeaseGrant> g = second->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->worker_id, 1);
  EXPECT_EQ(g->hwm_millis, 0);
  // The upward layout gets its own id back, with its hwm.
  Unbind(dir);
  auto again = NewLocalWorkerLease(up, Identity("up"));
  EXPECT_EQ(again->Acquire()->hwm_millis, 1'000);
}

TEST(LocalWorkerLease, AStaticIdOfAnotherLayoutIsRefusedUnlessForced) {
  const std::string dir = FreshDir();
  LocalLeaseOptions up;
  up.source.assign("static");
  up.lock_dir = dir;
  up.worker_id = 4;
  auto first = NewLocalWorkerLease(up, Identity("a"));
  ASSERT_TRUE(first->Acquire().ok());
  ASSERT_TRUE(first->StoreHwm(5'000).ok());
  ASSERT_TRUE(first->Release().ok());
  Unbind(dir);
  LocalLeaseOptions twitter = up;
  twitter.layout = *Layout::Preset("twitter");
  Result<LeaseGrant> refused = NewLocalWorkerLease(twitter, Identity("b"))->Acquire();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("was made with layout"), std::string::npos);
  twitter.force = true;
  auto forced = NewLocalWorkerLease(twitter, Identity("b"));
  Result<LeaseGrant> g = forced->Acquire();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->hwm_millis, 5'000);  // the earlier holder's time still bounds the start
  // A lower hwm never lowers the stored one, though the layout it names is now twitter's.
  ASSERT_TRUE(forced->StoreHwm(10).ok());
  ASSERT_TRUE(forced->Release().ok());
  Unbind(dir);
  twitter.force = false;
  EXPECT_EQ(NewLocalWorkerLease(twitter, Identity("b"))->Acquire()->hwm_millis, 5'000);
}

// Locks and states are keyed by (datacenter, worker), not by the bits an id carries: `twitter`
// datacenter 1 worker 0 and `leaf` worker 32 made 397,312 equal ids of 400,000 in one lock dir.
TEST(LocalWorkerLease, TwoLayoutsWhoseBitsOverlapNeverShareALockDir) {
  const std::string dir = FreshDir();
  const LocalLeaseOptions twitter = InDir(dir, "twitter");
  WorkerLeaseOptions dc1 = Identity("twitter");
  dc1.datacenter_id = 1;
  auto first = NewLocalWorkerLease(twitter, dc1);
  ASSERT_TRUE(first->Acquire().ok());
  ASSERT_TRUE(first->StoreHwm(1'000).ok());  // binds the lock dir, before any id is issued
  LocalLeaseOptions leaf = twitter;
  leaf.layout = *Layout::Preset("leaf");
  auto second = NewLocalWorkerLease(leaf, Identity("leaf"));
  ASSERT_TRUE(second->Acquire().ok());
  Status refused = second->StoreHwm(1'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  // One short line: what the lock dir serves, and the way to try a layout apart.
  EXPECT_NE(refused.error().message.find("serves layout twitter, not leaf: to try it, --lock-dir "
                                         "\"$(mktemp -d)\" (ids to throw away"),
            std::string::npos)
      << refused.error().message;
  ASSERT_TRUE(first->Release().ok());  // the binding outlives the holder
  EXPECT_FALSE(second->StoreHwm(1'000).ok());
}

// A binding removed while a process runs: its next store binds the lock dir again; if another
// process bound another id space meanwhile, its stores are refused and it issues no more (a
// review printed 1,967,232 equal ids when the binding was read only once).
TEST(LocalWorkerLease, ABindingRemovedWhileAProcessRunsIsMadeAgainOrStopsIt) {
  const std::string dir = FreshDir();
  const LocalLeaseOptions twitter = InDir(dir, "twitter");
  auto running = NewLocalWorkerLease(twitter, Identity("running"));
  ASSERT_TRUE(running->Acquire().ok());
  ASSERT_TRUE(running->StoreHwm(1'000).ok());
  Unbind(dir);
  ASSERT_TRUE(running->StoreHwm(2'000).ok());
  EXPECT_TRUE(BindLockDir(dir, LayoutFingerprint(twitter.layout), kHostWorkers).ok());
  Unbind(dir);
  ASSERT_TRUE(BindLockDir(dir, LayoutFingerprint(*Layout::Preset("leaf")), kHostWorkers).ok());
  Status refused = running->StoreHwm(3'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

// A start that ends before its first hwm store (the clock too far behind, a layout run out)
// issued nothing, and binds nothing: a mistaken `gen --layout baidu` left a host refusing
// every later process of its real layout.
TEST(LocalWorkerLease, AStartThatStoresNoHwmBindsNothing) {
  const std::string dir = FreshDir();
  const LocalLeaseOptions twitter = InDir(dir, "twitter");
  auto tried = NewLocalWorkerLease(twitter, Identity("tried"));
  ASSERT_TRUE(tried->Acquire().ok());
  ASSERT_TRUE(tried->Release().ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/id-space"));
  LocalLeaseOptions sekka;
  sekka.lock_dir = dir;
  auto real = NewLocalWorkerLease(sekka, Identity("real"));
  ASSERT_TRUE(real->Acquire().ok());
  EXPECT_TRUE(real->StoreHwm(1'000).ok());
}

// A FIFO planted in a shared lock dir hung every start (a blocking open); a directory or a
// link there is refused as well, in one line.
TEST(LocalWorkerLease, AnythingButARegularFileInTheLockDirIsAnErrorNotAHang) {
  for (const char* name : {"id-space", "0-0.lock", "0-0.state"}) {
    const std::string dir = FreshDir();
    ASSERT_EQ(::mkfifo((dir + "/" + name).c_str(), 0644), 0);
    LocalLeaseOptions l;
    l.lock_dir = dir;
    auto lease = NewLocalWorkerLease(l, Identity("x"));
    Result<LeaseGrant> g = lease->Acquire();
    Status s = g.ok() ? lease->StoreHwm(1'000) : Status(g.error());
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_NE(s.error().message.find("is not a regular file: remove it"), std::string::npos)
        << s.error().message;
  }
}

// Under umask 077 the lock dir (and the dirs made above it) were made 0700 and its files 0600,
// and a second user of the host could not take an id there.
// Users share a lock dir through its group; no other user can open a lock file and flock it to
// block a worker id (issue 24, finding 7: it was 0755 and 0644).
TEST(LocalWorkerLease, FilesAreReadableByTheirGroupOnlyWhateverTheUmask) {
  const std::string top = FreshDir() + "/var";
  const std::string dir = top + "/lib/locks";
  const mode_t old = ::umask(077);
  LocalLeaseOptions l;
  l.lock_dir = dir;
  auto lease = NewLocalWorkerLease(l, Identity("x"));
  const bool stored = lease->Acquire().ok() && lease->StoreHwm(1'000).ok();
  ::umask(old);
  ASSERT_TRUE(stored);
  auto mode = [](const std::string& path) {
    return static_cast<int>(std::filesystem::status(path).permissions() &
                            std::filesystem::perms::all);
  };
  // Parents made for it are passable (a user is let in by the dir's group alone, issue 43); the
  // dir itself is its group's.
  EXPECT_EQ(mode(top), 0755);
  EXPECT_EQ(mode(top + "/lib"), 0755);
  EXPECT_EQ(mode(dir), 0750);
  EXPECT_EQ(mode(dir + "/0-0.lock"), 0640);
  EXPECT_EQ(mode(dir + "/0-0.state"), 0640);
  EXPECT_EQ(mode(dir + "/id-space"), 0640);
}

// A server that takes its worker id from a coordinator binds its host's lock dir to the
// cluster: a `sekka gen` or local server of the host could otherwise lock a worker id that the
// cluster gave to a server (review 2: 82,000 of 120,000 ids repeated).
TEST(LocalWorkerLease, ALockDirBoundToAClusterIsRefusedToTheLocalSources) {
  const std::string dir = FreshDir();
  const std::string layout = LayoutFingerprint(Layout::Default());
  ASSERT_TRUE(BindLockDir(dir, layout, "etcd cluster prod").ok());
  EXPECT_TRUE(BindLockDir(dir, layout, "etcd cluster prod").ok());
  EXPECT_FALSE(BindLockDir(dir, layout, "zookeeper cluster prod").ok());
  LocalLeaseOptions l;
  l.lock_dir = dir;
  auto gen = NewLocalWorkerLease(l, Identity("gen"));
  ASSERT_TRUE(gen->Acquire().ok());
  Status refused = gen->StoreHwm(1'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("etcd cluster prod"), std::string::npos)
      << refused.error().message;
}

// Many processes binding an empty lock dir at once agree on one id space.
TEST(LocalWorkerLease, ProcessesBindingALockDirAtOnceAgreeOnOne) {
  const std::string dir = FreshDir();
  std::vector<pid_t> children;
  for (int i = 0; i < 16; ++i) {
    const pid_t child = ::fork();
    if (child == 0) {
      const std::string workers = fmt::format("etcd cluster c{}", i);
      ::_exit(BindLockDir(dir, "layout", workers).ok() ? 0 : 1);
    }
    children.push_back(child);
  }
  int bound = 0;
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    bound += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  EXPECT_EQ(bound, 1);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().string());
  EXPECT_EQ(left, std::vector<std::string>{dir + "/id-space"});  // no temp file left behind
}

TEST(LocalWorkerLease, AnIdSpaceFileThatIsNotOneIsRefusedNeverFollowed) {
  const std::string dir = FreshDir();
  {
    std::FILE* f = std::fopen((dir + "/id-space").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("layout=x\n", f);
    std::fclose(f);
  }
  Status corrupt = BindLockDir(dir, "x", kHostWorkers);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(corrupt.error().message.find("not a sekka id-space file"), std::string::npos);
  const std::string other = FreshDir();
  ASSERT_TRUE(BindLockDir(other, "x", kHostWorkers).ok());
  std::filesystem::remove(dir + "/id-space");
  std::filesystem::create_symlink(other + "/id-space", dir + "/id-space");
  Status linked = BindLockDir(dir, "x", kHostWorkers);
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.error().message.find("symbolic link"), std::string::npos);
}

TEST(LocalWorkerLease, AnUnusableLockDirIsAnErrorSayingWhatToDo) {
  const std::string dir = FreshDir();
  LocalLeaseOptions o;
  o.lock_dir = dir + "/file/locks";
  {
    std::FILE* f = std::fopen((dir + "/file").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  Result<LeaseGrant> g = NewLocalWorkerLease(o, Identity("x"))->Acquire();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, ErrorCode::kInternal);
  EXPECT_NE(g.error().message.find("worker.lock_dir"), std::string::npos) << g.error().message;
}

}  // namespace
}  // namespace sekka
