#include "backends/zookeeper_worker_lease.h"

#include <fmt/format.h>
#include <zookeeper/zookeeper.h>

#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

#include "backends/host_ports.h"
#include "sekka/coordinator.h"

namespace sekka {
namespace {

// Session events from the client's thread.
struct SessionState {
  std::mutex mu;
  std::condition_variable changed;
  int state = 0;
};

void Watcher(zhandle_t*, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT || context == nullptr) return;
  auto* s = static_cast<SessionState*>(context);
  {
    std::lock_guard lock(s->mu);
    s->state = state;
  }
  s->changed.notify_all();
}

// The ZooKeeper client logs each failed connection attempt: tens of lines a second while an
// ensemble is down, for as long as it is down (the fault campaign saw them fill a log). Its
// lines pass here: at most one per 10 s, with the count of those held back.
void RateLimitedClientLog(const char* message) {
  static std::mutex mu;
  static std::chrono::steady_clock::time_point last;
  static bool written = false;
  static unsigned long long held = 0;
  std::lock_guard lock(mu);
  const auto now = std::chrono::steady_clock::now();
  if (written && now - last < std::chrono::seconds(10)) {
    ++held;
    return;
  }
  written = true;
  last = now;
  std::string_view text(message);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  std::fprintf(stderr, "%.*s (zookeeper client; similar lines held back: %llu)\n",
               static_cast<int>(text.size()), text.data(), held);
  held = 0;
}

bool IsConnectionError(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZCLOSING;
}
bool IsSessionGone(int rc) {
  return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZAUTHFAILED;
}

// The answer to zoo_add_auth, from the client's thread.
struct AuthState {
  std::mutex mu;
  std::condition_variable changed;
  bool answered = false;
  int rc = 0;
};

void AuthAnswered(int rc, const void* data) {
  auto* a = static_cast<AuthState*>(const_cast<void*>(data));
  {
    std::lock_guard lock(a->mu);
    a->answered = true;
    a->rc = rc;
  }
  a->changed.notify_all();
}

// What this session knows of an id it claimed: the hwm node's version its writes name.
struct Fence {
  std::int32_t hwm_version = -1;
  std::int64_t hwm_known = 0;  // what the hwm node holds (this session wrote it last)
};

class ZooKeeperCoordinator final : public Coordinator {
 public:
  ZooKeeperCoordinator(std::string servers, std::string cluster, WorkerLeaseOptions options,
                       std::string username, std::string password)
      : servers_(std::move(servers)),
        cluster_(std::move(cluster)),
        options_(std::move(options)),
        username_(std::move(username)),
        password_(std::move(password)),
        root_(fmt::format("/sekka/{}", cluster_)),
        // With a user, the cluster's nodes are that user's alone (digest ACL of the creator).
        acl_(username_.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL) {}
  ~ZooKeeperCoordinator() override { Disconnect(); }

  Result<std::string> BindLayout(const std::string& layout) override;
  Result<std::map<std::int64_t, Holding>> ListHolders() override;
  std::int64_t session() const override { return session_; }
  Result<std::int64_t> PeekHwm(std::int64_t id) override;
  Result<std::optional<std::int64_t>> Claim(std::int64_t id,
                                            const std::optional<Holding>& seen) override;
  Status KeepAlive(std::int64_t id) override;
  Status StoreHwm(std::int64_t id, std::int64_t hwm_millis) override;
  Status Close() override;
  std::string Describe() const override {
    return fmt::format("zookeeper session {:x} on {}{} (cluster {})", session_, servers_,
                       username_.empty() ? "" : " as digest user " + username_, cluster_);
  }
  std::string Where() const override { return "cluster " + cluster_; }
  std::string_view source() const override { return "zookeeper"; }

 private:
  Status Connect();
  void Disconnect();
  Error FromRc(int rc, std::string_view what) const;
  std::string OwnerPath(std::int64_t id) const {
    return fmt::format("{}/workers/{}/{}", root_, options_.datacenter_id, id);
  }
  std::string HwmPath(std::int64_t id) const {
    return fmt::format("{}/hwm/{}/{}", root_, options_.datacenter_id, id);
  }
  // The hwm node of `id`: its value and stat; 0 and a zero stat when it does not exist.
  // Errors: as FromRc, kInternal (not a number).
  Result<std::int64_t> ReadHwm(std::int64_t id, Stat* stat, bool* exists);

  const std::string servers_;
  const std::string cluster_;
  const WorkerLeaseOptions options_;
  const std::string username_;  // "" = no authentication, open ACLs
  const std::string password_;
  const std::string root_;
  ACL_vector* const acl_;  // the ACL of every node under root_ (root_ included)
  SessionState session_state_;
  AuthState auth_state_;  // outlives the client (Close ends it first), so late answers are safe
  bool authenticated_ = false;  // zoo_add_auth answered OK for this client
  zhandle_t* zh_ = nullptr;
  std::int64_t session_ = 0;
  std::map<std::int64_t, Fence> fences_;  // the ids this session claimed
};

Error ZooKeeperCoordinator::FromRc(int rc, std::string_view what) const {
  if (rc == ZNOAUTH) {
    return Unauthenticated(fmt::format(
        "zookeeper {} ({}): not allowed: the nodes under {} belong to {} (their ACL); set "
        "worker.username and worker.password to the user that created them",
        what, servers_, root_, username_.empty() ? "a digest user" : "another digest user"));
  }
  const std::string message = fmt::format("zookeeper {} ({}): {}", what, servers_, zerror(rc));
  return IsSessionGone(rc) ? LeaseLost(message) : Unavailable(message);
}

Status ZooKeeperCoordinator::Connect() {
  if (zh_ != nullptr) {
    const int state = zoo_state(zh_);
    if (state == ZOO_CONNECTED_STATE && (username_.empty() || authenticated_)) {
      return Status::Ok();
    }
    // A dead session is replaced; one still (re)connecting is waited for, as a new one is.
    if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) Disconnect();
  }
  if (zh_ == nullptr) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    {
      std::lock_guard lock(session_state_.mu);
      session_state_.state = 0;
    }
    zh_ = zookeeper_init2(servers_.c_str(), Watcher, static_cast<int>(options_.ttl.count()),
                          nullptr, &session_state_, 0, RateLimitedClientLog);
    if (zh_ == nullptr)
      return Unavailable(fmt::format("zookeeper {}: cannot create a client", servers_));
  }
  std::unique_lock lock(session_state_.mu);
  session_state_.changed.wait_for(lock, options_.call_timeout, [&] {
    return session_state_.state == ZOO_CONNECTED_STATE ||
           session_state_.state == ZOO_EXPIRED_SESSION_STATE;
  });
  lock.unlock();
  if (zoo_state(zh_) != ZOO_CONNECTED_STATE) {
    return Unavailable(fmt::format("zookeeper {} cannot be reached within {} ms", servers_,
                                   options_.call_timeout.count()));
  }
  // The servers grant at most their maxSessionTimeout (20 ticks unless set): a session shorter
  // than the TTL would free this process's holdings before it stops trusting them (a strict
  // tag's leader answers for ttl less a margin), so it is refused, naming both.
  if (const int granted = zoo_recv_timeout(zh_); granted < options_.ttl.count()) {
    Disconnect();
    return InvalidArgument(fmt::format(
        "zookeeper {} granted a session timeout of {} ms, below worker.lease_ttl ({} ms): set "
        "worker.lease_ttl to {} ms or less, or raise the servers' maxSessionTimeout",
        servers_, granted, options_.ttl.count(), granted));
  }
  session_ = zoo_client_id(zh_)->client_id;
  if (!username_.empty() && !authenticated_) {
    // Digest authentication, once per client: the client sends it again by itself after a
    // reconnection. A wrong password is not refused here (it is another identity): the nodes'
    // ACL refuses it (ZNOAUTH) at the first read.
    {
      std::lock_guard guard(auth_state_.mu);
      auth_state_.answered = false;
    }
    const std::string credentials = username_ + ":" + password_;
    int rc = zoo_add_auth(zh_, "digest", credentials.data(), static_cast<int>(credentials.size()),
                          AuthAnswered, &auth_state_);
    if (rc != ZOK) return FromRc(rc, "add_auth");
    std::unique_lock wait(auth_state_.mu);
    if (!auth_state_.changed.wait_for(wait, options_.call_timeout,
                                      [&] { return auth_state_.answered; })) {
      return Unavailable(fmt::format("zookeeper {}: no answer to the authentication within {} ms",
                                     servers_, options_.call_timeout.count()));
    }
    rc = auth_state_.rc;
    wait.unlock();
    if (rc != ZOK) {
      return Unauthenticated(fmt::format("zookeeper {} refused digest user \"{}\": {}", servers_,
                                         username_, zerror(rc)));
    }
    authenticated_ = true;
  }
  // The parent nodes (persistent; they may exist already). /sekka is shared by all clusters.
  for (const std::string& path : {std::string("/sekka"), root_, root_ + "/workers", root_ + "/hwm",
                                  fmt::format("{}/workers/{}", root_, options_.datacenter_id),
                                  fmt::format("{}/hwm/{}", root_, options_.datacenter_id)}) {
    ACL_vector* acl = path == "/sekka" ? &ZOO_OPEN_ACL_UNSAFE : acl_;
    const int rc = zoo_create(zh_, path.c_str(), nullptr, -1, acl, ZOO_PERSISTENT, nullptr, 0);
    if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + path);
  }
  return Status::Ok();
}

void ZooKeeperCoordinator::Disconnect() {
  if (zh_ != nullptr) zookeeper_close(zh_);  // ends the session: its ephemeral nodes go
  zh_ = nullptr;
  session_ = 0;
  fences_.clear();
  authenticated_ = false;
}

Result<std::string> ZooKeeperCoordinator::BindLayout(const std::string& layout) {
  if (Status c = Connect(); !c.ok()) return std::move(c).error();
  const std::string path = root_ + "/layout";
  int rc = zoo_create(zh_, path.c_str(), layout.data(), static_cast<int>(layout.size()), acl_,
                      ZOO_PERSISTENT, nullptr, 0);
  if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + path);
  char buf[512];
  int len = sizeof(buf);
  Stat stat{};
  rc = zoo_get(zh_, path.c_str(), 0, buf, &len, &stat);
  if (rc != ZOK) return FromRc(rc, "get " + path);
  return std::string(buf, static_cast<std::size_t>(std::max(len, 0)));
}

Result<std::map<std::int64_t, Holding>> ZooKeeperCoordinator::ListHolders() {
  if (Status c = Connect(); !c.ok()) return std::move(c).error();
  const std::string dir = fmt::format("{}/workers/{}", root_, options_.datacenter_id);
  String_vector children{};
  int rc = zoo_get_children(zh_, dir.c_str(), 0, &children);
  if (rc != ZOK) return FromRc(rc, "list " + dir);
  std::map<std::int64_t, Holding> holders;
  for (int i = 0; i < children.count; ++i) {
    std::int64_t id = -1;
    try {
      id = std::stoll(children.data[i]);
    } catch (...) {
      continue;
    }
    char buf[512];
    int len = sizeof(buf);
    Stat stat{};
    if (zoo_get(zh_, OwnerPath(id).c_str(), 0, buf, &len, &stat) != ZOK) continue;  // gone
    holders[id] = Holding{std::string(buf, static_cast<std::size_t>(std::max(len, 0))),
                          stat.ephemeralOwner, stat.version};
  }
  deallocate_String_vector(&children);
  return holders;
}

Result<std::int64_t> ZooKeeperCoordinator::ReadHwm(std::int64_t id, Stat* stat, bool* exists) {
  const std::string path = HwmPath(id);
  char buf[64];
  int len = sizeof(buf) - 1;
  *stat = Stat{};
  const int rc = zoo_get(zh_, path.c_str(), 0, buf, &len, stat);
  *exists = rc != ZNONODE;
  if (rc == ZNONODE) return 0;
  if (rc != ZOK) return FromRc(rc, "get " + path);
  const std::string text(buf, static_cast<std::size_t>(std::max(len, 0)));
  if (text.empty()) return 0;
  // Strictly a whole non-negative number, as etcd's ParseHwm: a claim writes the value back,
  // so "1.7e12" must not become 1.
  std::int64_t hwm = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), hwm);
  if (ec == std::errc() && end == text.data() + text.size() && hwm >= 0 &&
      stat->dataLength <= len) {
    return hwm;
  }
  return Internal(
      fmt::format("zookeeper node {} holds \"{}\", not a number of ms", path, text.substr(0, 40)));
}

Result<std::int64_t> ZooKeeperCoordinator::PeekHwm(std::int64_t id) {
  if (Status c = Connect(); !c.ok()) return std::move(c).error();
  Stat stat{};
  bool exists = false;
  return ReadHwm(id, &stat, &exists);
}

Result<std::optional<std::int64_t>> ZooKeeperCoordinator::Claim(
    std::int64_t id, const std::optional<Holding>& seen) {
  if (Status c = Connect(); !c.ok()) return std::move(c).error();
  const std::string path = OwnerPath(id);
  const std::string hwm_path = HwmPath(id);
  const bool ours = seen.has_value() && seen->session == session_;
  for (int attempt = 0; attempt < 20; ++attempt) {
    // 1. The hwm node and its version (made first if it never existed).
    Stat hwm_stat{};
    bool exists = false;
    Result<std::int64_t> hwm = ReadHwm(id, &hwm_stat, &exists);
    if (!hwm.ok()) return std::move(hwm).error();
    if (!exists) {
      const int rc = zoo_create(zh_, hwm_path.c_str(), "0", 1, acl_, ZOO_PERSISTENT, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + hwm_path);
      continue;
    }
    // 2. The owner node is still as listed.
    Stat owner{};
    int rc = zoo_exists(zh_, path.c_str(), 0, &owner);
    if (rc != ZOK && rc != ZNONODE) return FromRc(rc, "exists " + path);
    const bool held = rc == ZOK;
    if (held != seen.has_value() || (held && owner.ephemeralOwner != seen->session)) {
      return std::optional<std::int64_t>();  // changed meanwhile
    }
    // 3. One atomic step: the listed holding ends, this session's begins, and the hwm node is
    //    written back unchanged at the version read in 1. Every claim writes that node, so a
    //    claim by anyone since 1 (or a store by the earlier holder) fails this one, and from
    //    now on only this session knows the node's version (the fence of StoreHwm and Close).
    const std::string text = std::to_string(*hwm);
    zoo_op_t ops[3];
    zoo_op_result_t results[3] = {};
    Stat after{};
    int n = 0;
    if (held && !ours) zoo_delete_op_init(&ops[n++], path.c_str(), owner.version);
    if (!ours) {
      zoo_create_op_init(&ops[n++], path.c_str(), options_.identity.data(),
                         static_cast<int>(options_.identity.size()), acl_, ZOO_EPHEMERAL, nullptr,
                         0);
    }
    const int set = n;
    zoo_set_op_init(&ops[n++], hwm_path.c_str(), text.data(), static_cast<int>(text.size()),
                    hwm_stat.version, &after);
    rc = zoo_multi(zh_, n, ops, results);
    if (rc == ZOK) {
      fences_[id] = Fence{after.version, *hwm};
      return std::optional<std::int64_t>(*hwm);
    }
    if (IsConnectionError(rc) || IsSessionGone(rc) || rc == ZNOAUTH) {
      return FromRc(rc, "claim " + path);
    }
    // The hwm node was written meanwhile: read it again (step 2 sees a new holder). Any other
    // failed op (the owner node came or went): the id changed meanwhile.
    if (results[set].err != ZBADVERSION) return std::optional<std::int64_t>();
  }
  return Unavailable(fmt::format("zookeeper node {} keeps changing", hwm_path));
}

Status ZooKeeperCoordinator::KeepAlive(std::int64_t id) {
  // The client's own thread keeps the session alive; this checks that the node is still ours.
  if (zh_ == nullptr || !fences_.contains(id)) return LeaseLost("no worker id is held");
  const int state = zoo_state(zh_);
  if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
    Disconnect();
    return LeaseLost(fmt::format("the zookeeper session holding worker id {} expired", id));
  }
  Stat stat{};
  const int rc = zoo_exists(zh_, OwnerPath(id).c_str(), 0, &stat);
  if (rc == ZOK && stat.ephemeralOwner == session_) return Status::Ok();
  if (rc == ZOK || rc == ZNONODE) {
    fences_.erase(id);
    return LeaseLost(fmt::format("worker id {} is no longer held by this zookeeper session", id));
  }
  Error e = FromRc(rc, "exists " + OwnerPath(id));
  if (e.code == ErrorCode::kLeaseLost) Disconnect();
  return e;
}

Status ZooKeeperCoordinator::StoreHwm(std::int64_t id, std::int64_t hwm_millis) {
  auto it = fences_.find(id);
  if (zh_ == nullptr || it == fences_.end()) return LeaseLost("no worker id is held");
  // Never lower: the node is written only with the version this session last saw, so
  // hwm_known is what it holds (a write that timed out but landed moves the version, the next
  // write fails with ZBADVERSION, and the id is claimed again, which reads the node again).
  Fence& f = it->second;
  if (hwm_millis <= f.hwm_known) return Status::Ok();
  const std::string text = std::to_string(hwm_millis);
  Stat stat{};
  const int rc = zoo_set2(zh_, HwmPath(id).c_str(), text.data(), static_cast<int>(text.size()),
                          f.hwm_version, &stat);
  if (rc == ZOK) {
    f.hwm_version = stat.version;
    f.hwm_known = hwm_millis;
    return Status::Ok();
  }
  if (rc == ZBADVERSION || rc == ZNONODE) {
    fences_.erase(it);
    return LeaseLost(fmt::format("worker id {} was taken over by another zookeeper session", id));
  }
  Error e = FromRc(rc, "set " + HwmPath(id));
  if (e.code == ErrorCode::kLeaseLost) Disconnect();
  return e;
}

Status ZooKeeperCoordinator::Close() {
  if (zh_ == nullptr) return Status::Ok();
  // Each node of this session is deleted before the session ends, so that its id is free when
  // this returns (ending the session alone does not wait for the server). The delete is
  // conditioned on the hwm node's version being this session's fence: every claim writes that
  // node, so a node another session made meanwhile (a takeover) is never deleted.
  for (const auto& [id, fence] : fences_) {
    const std::string path = OwnerPath(id);
    const std::string hwm_path = HwmPath(id);
    zoo_op_t ops[2];
    zoo_op_result_t results[2] = {};
    zoo_check_op_init(&ops[0], hwm_path.c_str(), fence.hwm_version);
    zoo_delete_op_init(&ops[1], path.c_str(), -1);
    const int rc = zoo_multi(zh_, 2, ops, results);
    if (IsConnectionError(rc)) return FromRc(rc, "delete " + path);
  }
  Disconnect();
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Coordinator>> NewZooKeeperCoordinator(std::string_view servers,
                                                             std::string_view cluster,
                                                             const WorkerLeaseOptions& options,
                                                             const std::string& username,
                                                             const std::string& password) {
  Result<std::vector<HostPort>> s = ParseHostPorts(servers, "zookeeper servers");
  if (!s.ok()) return std::move(s).error();
  if (Status c = ValidateClusterName(cluster); !c.ok()) return std::move(c).error();
  std::string list;
  for (const HostPort& hp : *s) {
    if (!list.empty()) list += ',';
    list += hp.Text();
  }
  if (username.empty() != password.empty()) {
    return InvalidArgument(
        "worker.username and worker.password go together for ZooKeeper's digest authentication");
  }
  if (username.find(':') != std::string::npos) {
    return InvalidArgument(fmt::format(
        "worker.username \"{}\" is not valid for ZooKeeper: allowed a name without ':'", username));
  }
  return std::unique_ptr<Coordinator>(std::make_unique<ZooKeeperCoordinator>(
      std::move(list), std::string(cluster), options, username, password));
}

}  // namespace sekka
