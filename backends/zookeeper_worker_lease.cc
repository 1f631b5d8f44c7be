#include "backends/zookeeper_worker_lease.h"

#include <fmt/format.h>
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <vector>

#include "backends/host_ports.h"

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

class ZooKeeperLease final : public WorkerLease {
 public:
  ZooKeeperLease(std::string servers, std::string cluster, WorkerLeaseOptions options,
                 std::string username, std::string password)
      : servers_(std::move(servers)),
        cluster_(std::move(cluster)),
        options_(std::move(options)),
        username_(std::move(username)),
        password_(std::move(password)),
        root_(fmt::format("/sekka/{}", cluster_)),
        // With a user, the cluster's nodes are that user's alone (digest ACL of the creator).
        acl_(username_.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL) {}
  ~ZooKeeperLease() override { Close(); }

  Result<LeaseGrant> Acquire() override;
  Status Renew() override;
  Status StoreHwm(std::int64_t hwm_millis) override;
  Status Release() override;
  std::string Describe() const override {
    return fmt::format("zookeeper session {:x} on {}{} (cluster {})", session_, servers_,
                       username_.empty() ? "" : " as digest user " + username_, cluster_);
  }
  std::string_view source() const override { return "zookeeper"; }

 private:
  Status Connect();
  void Close();
  Error FromRc(int rc, std::string_view what) const;
  std::string OwnerPath(std::int64_t id) const {
    return fmt::format("{}/workers/{}/{}", root_, options_.datacenter_id, id);
  }
  std::string HwmPath(std::int64_t id) const {
    return fmt::format("{}/hwm/{}/{}", root_, options_.datacenter_id, id);
  }
  // Takes over the hwm node of `id`: returns its value. Errors: as FromRc.
  Result<std::int64_t> FenceHwm(std::int64_t id);
  // Binds the cluster to options_.layout if nothing is bound yet (the node root_/layout), and
  // checks the bound one (CheckClusterLayout). Errors: kInvalidArgument, as FromRc.
  Status BindLayout();

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
  std::int64_t held_ = -1;
  bool layout_bound_ = false;  // BindLayout succeeded once
  std::int32_t hwm_version_ = -1;
  std::int64_t hwm_known_ = 0;  // what the hwm node holds (this lease wrote it last)
};

Error ZooKeeperLease::FromRc(int rc, std::string_view what) const {
  if (rc == ZNOAUTH) {
    return Unauthenticated(fmt::format(
        "zookeeper {} ({}): not allowed: the nodes under {} belong to {} (their ACL); set "
        "worker.username and worker.password to the user that created them",
        what, servers_, root_, username_.empty() ? "a digest user" : "another digest user"));
  }
  const std::string message = fmt::format("zookeeper {} ({}): {}", what, servers_, zerror(rc));
  return IsSessionGone(rc) ? LeaseLost(message) : Unavailable(message);
}

Status ZooKeeperLease::Connect() {
  if (zh_ != nullptr) {
    const int state = zoo_state(zh_);
    if (state == ZOO_CONNECTED_STATE && (username_.empty() || authenticated_)) {
      return Status::Ok();
    }
    // A dead session is replaced; one still (re)connecting is waited for, as a new one is.
    if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) Close();
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

void ZooKeeperLease::Close() {
  if (zh_ != nullptr) zookeeper_close(zh_);  // ends the session: its ephemeral nodes go
  zh_ = nullptr;
  session_ = 0;
  held_ = -1;
  authenticated_ = false;
}

Result<std::int64_t> ZooKeeperLease::FenceHwm(std::int64_t id) {
  const std::string path = HwmPath(id);
  for (int attempt = 0; attempt < 20; ++attempt) {
    char buf[64];
    int len = sizeof(buf) - 1;
    Stat stat{};
    int rc = zoo_get(zh_, path.c_str(), 0, buf, &len, &stat);
    if (rc == ZNONODE) {
      rc = zoo_create(zh_, path.c_str(), "0", 1, acl_, ZOO_PERSISTENT, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + path);
      continue;
    }
    if (rc != ZOK) return FromRc(rc, "get " + path);
    const std::string text(buf, static_cast<std::size_t>(std::max(len, 0)));
    std::int64_t hwm = 0;
    try {
      hwm = text.empty() ? 0 : std::stoll(text);
    } catch (...) {
      return Internal(fmt::format("zookeeper node {} holds \"{}\", not a number of ms", path,
                                  text.substr(0, 40)));
    }
    Stat after{};
    rc = zoo_set2(zh_, path.c_str(), text.data(), static_cast<int>(text.size()), stat.version,
                  &after);
    if (rc == ZBADVERSION) continue;  // the earlier holder wrote once more: read it again
    if (rc != ZOK) return FromRc(rc, "set " + path);
    hwm_version_ = after.version;
    return hwm;
  }
  return Unavailable(fmt::format("zookeeper node {} keeps changing", path));
}

Status ZooKeeperLease::BindLayout() {
  if (layout_bound_ || options_.layout.empty()) return Status::Ok();
  const std::string path = root_ + "/layout";
  int rc = zoo_create(zh_, path.c_str(), options_.layout.data(),
                      static_cast<int>(options_.layout.size()), acl_, ZOO_PERSISTENT, nullptr, 0);
  if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + path);
  char buf[512];
  int len = sizeof(buf);
  Stat stat{};
  rc = zoo_get(zh_, path.c_str(), 0, buf, &len, &stat);
  if (rc != ZOK) return FromRc(rc, "get " + path);
  const std::string bound(buf, static_cast<std::size_t>(std::max(len, 0)));
  if (Status s = CheckClusterLayout(cluster_, bound, options_.layout); !s.ok()) return s;
  layout_bound_ = true;
  return Status::Ok();
}

Result<LeaseGrant> ZooKeeperLease::Acquire() {
  if (options_.identity.empty()) return InvalidArgument("the lease identity must not be empty");
  if (Status c = Connect(); !c.ok()) return std::move(c).error();
  if (held_ >= 0) return LeaseGrant{options_.datacenter_id, held_, hwm_known_};
  if (Status s = BindLayout(); !s.ok()) return std::move(s).error();
  const std::string dir = fmt::format("{}/workers/{}", root_, options_.datacenter_id);
  for (int pass = 0; pass < 8; ++pass) {
    String_vector children{};
    int rc = zoo_get_children(zh_, dir.c_str(), 0, &children);
    if (rc != ZOK) return FromRc(rc, "list " + dir);
    struct Holder {
      std::string identity;
      std::int64_t owner_session = 0;
      std::int32_t version = 0;
    };
    std::map<std::int64_t, Holder> holders;
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
      const std::string path = OwnerPath(id);
      if (zoo_get(zh_, path.c_str(), 0, buf, &len, &stat) != ZOK) continue;  // gone meanwhile
      holders[id] = Holder{std::string(buf, static_cast<std::size_t>(std::max(len, 0))),
                           stat.ephemeralOwner, stat.version};
    }
    deallocate_String_vector(&children);
    // The core's order (WorkerIdCandidates); a pass that finds them all taken meanwhile lists
    // again.
    std::map<std::int64_t, bool> mine;
    for (const auto& [id, h] : holders) mine[id] = h.identity == options_.identity;
    const std::vector<std::int64_t> order =
        WorkerIdCandidates(mine, options_.preferred, options_.worker_count);
    if (order.empty()) break;
    for (std::int64_t id : order) {
      const std::string path = OwnerPath(id);
      auto it = holders.find(id);
      if (it != holders.end() && it->second.owner_session != session_) {
        // This identity's earlier run, whose session has not expired yet: take it over.
        rc = zoo_delete(zh_, path.c_str(), it->second.version);
        if (rc != ZOK && rc != ZNONODE) {
          if (IsConnectionError(rc) || IsSessionGone(rc)) return FromRc(rc, "delete " + path);
          continue;
        }
      }
      if (it == holders.end() || it->second.owner_session != session_) {
        rc =
            zoo_create(zh_, path.c_str(), options_.identity.data(),
                       static_cast<int>(options_.identity.size()), acl_, ZOO_EPHEMERAL, nullptr, 0);
        if (rc == ZNODEEXISTS) continue;  // taken meanwhile: the next candidate
        if (rc != ZOK) return FromRc(rc, "create " + path);
      }
      Result<std::int64_t> hwm = FenceHwm(id);
      if (!hwm.ok()) {
        zoo_delete(zh_, path.c_str(), -1);
        return std::move(hwm).error();
      }
      held_ = id;
      hwm_known_ = *hwm;
      return LeaseGrant{options_.datacenter_id, id, *hwm};
    }
  }
  return Exhausted(fmt::format(
      "no free worker id: all {} worker ids of datacenter {} in cluster {} are held by live "
      "ZooKeeper sessions; raise the layout's worker bits or stop a holder",
      options_.worker_count, options_.datacenter_id, cluster_));
}

Status ZooKeeperLease::Renew() {
  // The client's own thread keeps the session alive; this checks that the node is still ours.
  if (held_ < 0 || zh_ == nullptr) return LeaseLost("no worker id is held");
  const int state = zoo_state(zh_);
  if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
    const std::int64_t id = held_;
    Close();
    return LeaseLost(fmt::format("the zookeeper session holding worker id {} expired", id));
  }
  Stat stat{};
  const int rc = zoo_exists(zh_, OwnerPath(held_).c_str(), 0, &stat);
  if (rc == ZOK && stat.ephemeralOwner == session_) return Status::Ok();
  if (rc == ZOK || rc == ZNONODE) {
    const std::int64_t id = held_;
    held_ = -1;
    return LeaseLost(fmt::format("worker id {} is no longer held by this zookeeper session", id));
  }
  Error e = FromRc(rc, "exists " + OwnerPath(held_));
  if (e.code == ErrorCode::kLeaseLost) Close();
  return e;
}

Status ZooKeeperLease::StoreHwm(std::int64_t hwm_millis) {
  if (held_ < 0 || zh_ == nullptr) return LeaseLost("no worker id is held");
  // Never lower: the node is written only with the version this lease last saw, so
  // hwm_known_ is what it holds (a write that timed out but landed moves the version, the next
  // write fails with ZBADVERSION, and the id is re-acquired, which reads the node again).
  if (hwm_millis <= hwm_known_) return Status::Ok();
  const std::string text = std::to_string(hwm_millis);
  Stat stat{};
  const int rc = zoo_set2(zh_, HwmPath(held_).c_str(), text.data(), static_cast<int>(text.size()),
                          hwm_version_, &stat);
  if (rc == ZOK) {
    hwm_version_ = stat.version;
    hwm_known_ = hwm_millis;
    return Status::Ok();
  }
  if (rc == ZBADVERSION || rc == ZNONODE) {
    const std::int64_t id = held_;
    held_ = -1;
    return LeaseLost(fmt::format("worker id {} was taken over by another zookeeper session", id));
  }
  Error e = FromRc(rc, "set " + HwmPath(held_));
  if (e.code == ErrorCode::kLeaseLost) Close();
  return e;
}

Status ZooKeeperLease::Release() {
  if (zh_ == nullptr) return Status::Ok();
  if (held_ >= 0) {
    const int rc = zoo_delete(zh_, OwnerPath(held_).c_str(), -1);
    if (IsConnectionError(rc)) return FromRc(rc, "delete");
  }
  Close();
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<WorkerLease>> NewZooKeeperWorkerLease(std::string_view servers,
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
  return std::unique_ptr<WorkerLease>(std::make_unique<ZooKeeperLease>(
      std::move(list), std::string(cluster), options, username, password));
}

}  // namespace sekka
