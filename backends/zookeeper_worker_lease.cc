#include "backends/zookeeper_worker_lease.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <zookeeper/zookeeper.h>

#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "backends/coordinator_sessions.h"
#include "backends/host_ports.h"
#include "backends/one_line.h"
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

bool IsUnrecoverable(zhandle_t* zh) {
  const int state = zoo_state(zh);
  return state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
}

// The path field of any op (each kind has its own struct).
const char*& PathOf(zoo_op_t& op) {
  switch (op.type) {
    case ZOO_CREATE_OP:
      return op.create_op.path;
    case ZOO_DELETE_OP:
      return op.delete_op.path;
    case ZOO_SETDATA_OP:
      return op.set_op.path;
    default:
      return op.check_op.path;
  }
}

// zoo_multi, around two faults of the C client's zoo_amulti:
// 1. Once the session is unrecoverable (expired, auth failed), it frees memory it does not
//    own: the op whose request finds that state leaves its path in the request, and every op
//    after it, whose request is then not made, frees that path again as a copy of its own (a
//    server paused past its session died of a double free, beside Leaf's servers). So a multi
//    goes out on a connected handle only (else ZCONNECTIONLOSS, or ZINVALIDSTATE for a session
//    that is gone; nothing was sent). A connected session turns unrecoverable only at the end
//    of a new handshake (after a connection loss, a connect and the server's answer) or at
//    an auth answer (digest, which ZooKeeper never refuses), never within the loop's few
//    microseconds of work without I/O. The ops also go with malloc'd copies of their paths,
//    left to the library when it failed before sending: a further guard for two ops.
// 2. It turns every failure to send (ZINVALIDSTATE once the session expired among them) into
//    ZMARSHALLINGERROR, which would read as a passing fault and never end the lease (the fault
//    campaign's paused server stayed unready for good): the session's end is named as such.
// `sent`, when given, says whether the request went out (nothing lands of one that did not).
int Multi(zhandle_t* zh, int count, const zoo_op_t* ops, zoo_op_result_t* results,
          bool* sent = nullptr) {
  if (sent != nullptr) *sent = false;
  if (IsUnrecoverable(zh)) return ZINVALIDSTATE;
  if (zoo_state(zh) != ZOO_CONNECTED_STATE) return ZCONNECTIONLOSS;
  std::vector<zoo_op_t> copies(ops, ops + count);
  std::vector<char*> paths;
  for (zoo_op_t& op : copies) {
    char* path = ::strdup(PathOf(op));
    if (path == nullptr) {
      for (char* p : paths) std::free(p);
      return ZSYSTEMERROR;
    }
    PathOf(op) = path;
    paths.push_back(path);
  }
  if (sent != nullptr) *sent = true;
  const int rc = zoo_multi(zh, count, copies.data(), results);
  if (rc != ZMARSHALLINGERROR) {
    for (char* p : paths) std::free(p);
    return rc;
  }
  return IsUnrecoverable(zh) ? ZINVALIDSTATE : rc;
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
  std::int64_t session = 0;  // the session that claimed it
  std::int64_t czxid = 0;    // the owner node's creation
  std::int32_t hwm_version = -1;
  std::int64_t hwm_known = 0;      // what the hwm node holds (this session wrote it last)
  std::int32_t leaf_version = -1;  // with a Leaf registry: its node's version, likewise
};

// How often Leaf's servers write their node's timestamp (SnowflakeZookeeperHolder: every 3 s).
constexpr std::int64_t kLeafReportMillis = 3000;

// A child of Leaf's `forever` node, "<ip>:<port>-<sequence>", read as Leaf reads it (split at
// '-': the first part is the address, the second the sequence). nullopt: not that shape.
std::optional<std::pair<std::string, std::int64_t>> ParseLeafNodeName(std::string_view name) {
  const std::size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  std::string_view digits = name.substr(dash + 1);
  digits = digits.substr(0, digits.find('-'));
  std::int64_t seq = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
  if (ec != std::errc() || end != digits.data() + digits.size() || seq < 0) return std::nullopt;
  return std::make_pair(std::string(name.substr(0, dash)), seq);
}

// The timestamp of a Leaf node's data, {"ip":"..","port":"..","timestamp":N}. nullopt: not
// that shape (Leaf's own servers cannot read it either).
std::optional<std::int64_t> ParseLeafTimestamp(std::string_view data) {
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (!j.is_object() || !j.contains("timestamp") || !j["timestamp"].is_number_integer()) {
    return std::nullopt;
  }
  const std::int64_t t = j["timestamp"].get<std::int64_t>();
  return t >= 0 ? std::optional<std::int64_t>(t) : std::nullopt;
}

// One client and its session. The coordinators of a ZooKeeperSession share it; it is closed (the
// session ends, and its ephemeral nodes with it) once nobody holds it.
struct ZHandle {
  SessionState state;
  AuthState auth;  // outlives the client (closed first), so late answers are safe
  zhandle_t* zh = nullptr;
  std::int64_t session = 0;    // the session's id once connected (then never changed)
  bool authenticated = false;  // zoo_add_auth answered OK for this client
  ZHandle() = default;
  ZHandle(const ZHandle&) = delete;
  ZHandle& operator=(const ZHandle&) = delete;
  ~ZHandle() {
    if (zh != nullptr) zookeeper_close(zh);
  }
};

// An owner node a coordinator claimed (or may have: a claim whose answer was lost), to delete
// when it lets go of it.
struct OwnedNode {
  std::int64_t session = 0;  // the session the claim was sent in
  std::string owner_path;
  std::string hwm_path;
  // The owner node's creation (its czxid), which no later node shares; 0: not known (the claim's
  // answer was lost).
  std::int64_t czxid = 0;
  // With czxid 0: the hwm node's version if the claim landed (the one it read, + 1).
  std::int32_t landed_version = -1;
  // The claim's number in its session (ClaimLedger): a later claim of the node there takes it
  // over, and this one's release is then void.
  std::uint64_t claim = 0;
};

// A ZooKeeper session (backends/coordinator_sessions.h): one client, connected and authenticated
// on demand, and the releases of owner nodes that could not be sent yet.
class ZooKeeperSession {
 public:
  ZooKeeperSession(std::string servers, const WorkerLeaseOptions& options, std::string username,
                   std::string password)
      : servers_(std::move(servers)),
        ttl_(options.ttl),
        call_timeout_(options.call_timeout),
        username_(std::move(username)),
        password_(std::move(password)) {}

  const std::string& servers() const { return servers_; }
  const std::string& username() const { return username_; }

  // A connected (and, with a user, authenticated) handle: the current one, or a new session's
  // when there is none or its session is gone. Sends the releases kept for it first. Errors:
  // kUnavailable (also when another caller's connection attempt takes longer than the call
  // timeout), kUnauthenticated, kInvalidArgument (a session timeout below the TTL).
  Result<std::shared_ptr<ZHandle>> Connect();
  // The handle now, connected or not (null: none).
  std::shared_ptr<ZHandle> Current() {
    std::lock_guard lock(mu_);
    return current_;
  }
  // Lets go of `h` if it is the current handle (its session is gone): the next Connect opens a
  // new session; `h` closes once its last call returned.
  void Drop(const std::shared_ptr<ZHandle>& h) {
    std::lock_guard lock(mu_);
    if (current_ == h) current_.reset();
  }
  // Ends the session (its one coordinator closed): the current handle and one still connecting.
  void End();
  // Deletes `nodes` where they are still the claims they name; those the connection lost are
  // kept for the next Connect. Returns how many were kept.
  std::size_t Release(const std::shared_ptr<ZHandle>& h, std::vector<OwnedNode> nodes);
  // Claims of this session's nodes, and the releases against them, one at a time.
  ClaimLedger& ledger() { return ledger_; }
  // Sends the releases kept for `h`'s session.
  void SendKept(const std::shared_ptr<ZHandle>& h);

 private:
  // A new client whose session is connecting. Errors: kUnavailable.
  Result<std::shared_ptr<ZHandle>> CreateClient();
  // Waits for `h`'s session to connect; refuses one granted less than the TTL.
  Status AwaitSession(ZHandle& h);
  // Authenticates `h`'s session as the digest user username_.
  Status Authenticate(ZHandle& h);
  // Takes the one connection attempt's turn (connecting_ is the holder's), waiting at most a
  // call timeout for another caller's; false when it did not come.
  bool TakeTurn();
  void EndTurn();
  // Connect's part, in the turn: the connected handle.
  Result<std::shared_ptr<ZHandle>> ConnectLocked();
  // Deletes `node` if it is still the claim it names: ZOK when done or nothing is left to do,
  // else the connection error. REQUIRES: ledger_.Lock() held.
  int ReleaseOne(zhandle_t* zh, const OwnedNode& node);

  const std::string servers_;
  const std::chrono::milliseconds ttl_;
  const std::chrono::milliseconds call_timeout_;
  const std::string username_;  // "" = no authentication
  const std::string password_;
  // One connection attempt at a time (a flag and a condition, not a timed mutex: ThreadSanitizer
  // does not see pthread_mutex_clocklock).
  std::mutex turn_mu_;
  std::condition_variable turn_cv_;
  bool turn_taken_ = false;              // guarded by turn_mu_
  std::shared_ptr<ZHandle> connecting_;  // the turn's holder's: made, not yet published
  ClaimLedger ledger_;                   // by owner path
  std::mutex mu_;                        // held briefly
  std::shared_ptr<ZHandle> current_;     // guarded by mu_: connected when published
  std::vector<OwnedNode> kept_;          // guarded by mu_: releases the connection lost
};

Result<std::shared_ptr<ZHandle>> ZooKeeperSession::Connect() {
  std::shared_ptr<ZHandle> h = Current();
  if (h == nullptr || zoo_state(h->zh) != ZOO_CONNECTED_STATE) {
    // Each caller waits at most a call timeout for another's attempt, then its own.
    if (!TakeTurn()) {
      return Unavailable(fmt::format("zookeeper {} cannot be reached within {} ms", servers_,
                                     call_timeout_.count()));
    }
    Result<std::shared_ptr<ZHandle>> connected = ConnectLocked();
    EndTurn();
    SEKKA_RETURN_IF_ERROR(connected);
    h = std::move(connected).value();
  }
  SendKept(h);  // before anything else of the caller's
  return h;
}

bool ZooKeeperSession::TakeTurn() {
  std::unique_lock lock(turn_mu_);
  if (!turn_cv_.wait_for(lock, call_timeout_, [&] { return !turn_taken_; })) return false;
  turn_taken_ = true;
  return true;
}

void ZooKeeperSession::EndTurn() {
  {
    std::lock_guard lock(turn_mu_);
    turn_taken_ = false;
  }
  turn_cv_.notify_one();
}

void ZooKeeperSession::SendKept(const std::shared_ptr<ZHandle>& h) {
  {
    std::lock_guard lock(mu_);
    if (kept_.empty()) return;  // the usual case: no wait behind another tag's claim
  }
  const std::unique_lock claims = ledger_.Lock();
  std::vector<OwnedNode> kept;
  {
    std::lock_guard lock(mu_);
    kept.swap(kept_);
  }
  std::vector<OwnedNode> lost;
  for (OwnedNode& node : kept) {
    if (node.session != h->session) continue;  // gone with its session
    if (IsConnectionError(ReleaseOne(h->zh, node))) lost.push_back(std::move(node));
  }
  std::lock_guard lock(mu_);
  for (OwnedNode& node : lost) kept_.push_back(std::move(node));
}

Result<std::shared_ptr<ZHandle>> ZooKeeperSession::ConnectLocked() {
  std::shared_ptr<ZHandle> h = Current();
  if (h != nullptr) {
    // A dead session is replaced; one (re)connecting is waited for, as a new one is.
    if (IsUnrecoverable(h->zh)) {
      Drop(h);
    } else {
      SEKKA_RETURN_IF_ERROR(AwaitSession(*h));
      return h;
    }
  }
  // A client made by an earlier call that did not connect in time, unless its session died.
  if (connecting_ != nullptr && IsUnrecoverable(connecting_->zh)) connecting_.reset();
  if (connecting_ == nullptr) {
    SEKKA_ASSIGN_OR_RETURN(auto made, CreateClient());
    connecting_ = std::move(made);
  }
  if (Status s = AwaitSession(*connecting_); !s.ok()) {
    if (s.error().code != ErrorCode::kUnavailable) connecting_.reset();
    return std::move(s).error();
  }
  connecting_->session = zoo_client_id(connecting_->zh)->client_id;
  if (!username_.empty() && !connecting_->authenticated) {
    if (Status s = Authenticate(*connecting_); !s.ok()) {
      connecting_.reset();  // a new client authenticates from the start
      return std::move(s).error();
    }
    connecting_->authenticated = true;
  }
  h = std::move(connecting_);
  std::lock_guard lock(mu_);
  current_ = h;
  return h;
}

void ZooKeeperSession::End() {
  std::shared_ptr<ZHandle> closing;
  if (TakeTurn()) {  // else the attempt under way keeps its client (closed with the session)
    closing = std::move(connecting_);
    EndTurn();
  }
  std::lock_guard lock(mu_);
  current_.reset();
  kept_.clear();
}

Result<std::shared_ptr<ZHandle>> ZooKeeperSession::CreateClient() {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  auto h = std::make_shared<ZHandle>();
  h->zh = zookeeper_init2(servers_.c_str(), Watcher, static_cast<int>(ttl_.count()), nullptr,
                          &h->state, 0, RateLimitedClientLog);
  if (h->zh == nullptr)
    return Unavailable(fmt::format("zookeeper {}: cannot create a client", servers_));
  return h;
}

Status ZooKeeperSession::AwaitSession(ZHandle& h) {
  std::unique_lock lock(h.state.mu);
  h.state.changed.wait_for(lock, call_timeout_, [&] {
    return h.state.state == ZOO_CONNECTED_STATE || h.state.state == ZOO_EXPIRED_SESSION_STATE;
  });
  lock.unlock();
  if (zoo_state(h.zh) != ZOO_CONNECTED_STATE) {
    return Unavailable(fmt::format("zookeeper {} cannot be reached within {} ms", servers_,
                                   call_timeout_.count()));
  }
  // The servers grant at most their maxSessionTimeout (20 ticks unless set): a session shorter
  // than the TTL would free this process's holdings before it stops trusting them (a strict
  // tag's leader answers for ttl less a margin), so it is refused, naming both.
  if (const int granted = zoo_recv_timeout(h.zh); granted < ttl_.count()) {
    return InvalidArgument(fmt::format(
        "zookeeper {} granted a session timeout of {} ms, below worker.lease_ttl ({} ms): set "
        "worker.lease_ttl to {} ms or less, or raise the servers' maxSessionTimeout",
        servers_, granted, ttl_.count(), granted));
  }
  return Status::Ok();
}

Status ZooKeeperSession::Authenticate(ZHandle& h) {
  // Digest authentication, once per client: the client sends it again by itself after a
  // reconnection. A wrong password is not refused here (it is another identity): the nodes'
  // ACL refuses it (ZNOAUTH) at the first read.
  {
    std::lock_guard guard(h.auth.mu);
    h.auth.answered = false;
  }
  const std::string credentials = username_ + ":" + password_;
  int rc = zoo_add_auth(h.zh, "digest", credentials.data(), static_cast<int>(credentials.size()),
                        AuthAnswered, &h.auth);
  if (rc != ZOK) {
    return Unavailable(fmt::format("zookeeper add_auth ({}): {}", servers_, zerror(rc)));
  }
  std::unique_lock wait(h.auth.mu);
  if (!h.auth.changed.wait_for(wait, call_timeout_, [&] { return h.auth.answered; })) {
    return Unavailable(fmt::format("zookeeper {}: no answer to the authentication within {} ms",
                                   servers_, call_timeout_.count()));
  }
  rc = h.auth.rc;
  wait.unlock();
  if (rc != ZOK) {
    return Unauthenticated(fmt::format("zookeeper {} refused digest user \"{}\": {}", servers_,
                                       username_, zerror(rc)));
  }
  return Status::Ok();
}

std::size_t ZooKeeperSession::Release(const std::shared_ptr<ZHandle>& h,
                                      std::vector<OwnedNode> nodes) {
  std::vector<OwnedNode> lost;
  {
    const std::unique_lock claims = ledger_.Lock();
    for (OwnedNode& node : nodes) {
      // A node of another session went with it (or goes when it closes).
      if (h == nullptr || node.session != h->session) continue;
      if (IsConnectionError(ReleaseOne(h->zh, node))) lost.push_back(std::move(node));
    }
  }
  const std::size_t kept = lost.size();
  std::lock_guard lock(mu_);
  for (OwnedNode& node : lost) kept_.push_back(std::move(node));
  return kept;
}

int ZooKeeperSession::ReleaseOne(zhandle_t* zh, const OwnedNode& node) {
  // The owner node is deleted only while it is the one the claim made: its czxid (no later
  // node has it), or, for a claim whose answer was lost, this session's node with the hwm node
  // at the version the claim left. The hwm node's version, read first, is checked again as the
  // node is deleted: every claim writes it, so a claim between the reads and the delete fails
  // the delete. (A claim's step and a release never overlap in one session: ClaimLedger.) After a
  // later claim of the node in this session (that landed, or may have), it is that claim's.
  if (!ledger_.Latest(node.owner_path, node.claim)) return ZOK;
  Stat hwm{};
  int rc = zoo_exists(zh, node.hwm_path.c_str(), 0, &hwm);
  if (rc == ZNONODE) return ZOK;  // nothing was claimed
  if (rc != ZOK) return IsConnectionError(rc) ? rc : ZOK;
  Stat owner{};
  rc = zoo_exists(zh, node.owner_path.c_str(), 0, &owner);
  if (rc == ZNONODE) return ZOK;
  if (rc != ZOK) return IsConnectionError(rc) ? rc : ZOK;
  const bool claims =
      owner.ephemeralOwner == node.session &&
      (node.czxid != 0 ? owner.czxid == node.czxid : hwm.version == node.landed_version);
  if (!claims) return ZOK;  // another claim's since
  zoo_op_t ops[2];
  zoo_op_result_t results[2] = {};
  zoo_check_op_init(&ops[0], node.hwm_path.c_str(), hwm.version);
  zoo_delete_op_init(&ops[1], node.owner_path.c_str(), owner.version);
  rc = Multi(zh, 2, ops, results);
  return IsConnectionError(rc) ? rc : ZOK;  // else deleted, or claimed since
}

class ZooKeeperCoordinator final : public Coordinator {
 public:
  ZooKeeperCoordinator(std::shared_ptr<ZooKeeperSession> zk, bool shared, std::string cluster,
                       WorkerLeaseOptions options, LeafRegistry leaf)
      : zk_(std::move(zk)),
        shared_(shared),
        servers_(zk_->servers()),
        cluster_(std::move(cluster)),
        options_(std::move(options)),
        username_(zk_->username()),
        root_(fmt::format("/sekka/{}", cluster_)),
        // With a user, the cluster's nodes are that user's alone (digest ACL of the creator).
        acl_(username_.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL),
        leaf_(std::move(leaf)),
        leaf_dir_(leaf_.name.empty() ? "" : fmt::format("/snowflake/{}/forever", leaf_.name)),
        // Checked by ValidateLeafRegistry before: one IPv4:PORT.
        leaf_at_(leaf_.name.empty() ? HostPort{}
                                    : ParseHostPorts(leaf_.address, "").value().front()) {}
  // What it claimed is let go (Close): a shared session goes on for the others.
  ~ZooKeeperCoordinator() override { (void)Close(); }

  Result<std::string> BindLayout(const std::string& layout) override;
  Result<std::map<std::int64_t, Holding>> ListHolders() override;
  std::int64_t session() const override { return h_ == nullptr ? 0 : h_->session; }
  bool Mine(std::int64_t id, const Holding& h) const override {
    auto it = claimed_.find(id);
    return it != claimed_.end() && IsClaim(h, it->second.session, it->second.czxid);
  }
  Result<std::int64_t> PeekHwm(std::int64_t id) override;
  Result<std::optional<std::int64_t>> Claim(std::int64_t id,
                                            const std::optional<Holding>& seen) override;
  Status KeepAlive(std::int64_t id) override;
  Status StoreHwm(std::int64_t id, std::int64_t hwm_millis) override;
  Status Close() override;
  std::string Describe() const override {
    return fmt::format("zookeeper session {:x} on {}{} ({})", session(), servers_,
                       username_.empty() ? "" : " as digest user " + username_, Where());
  }
  std::string Where() const override {
    if (!leaf()) return "cluster " + cluster_;
    return fmt::format("cluster {} beside Leaf's registry {} as {}", cluster_, leaf_dir_,
                       leaf_.address);
  }
  std::string_view source() const override { return "zookeeper"; }
  Result<SharedDocument> ReadShared(std::string_view name) override;
  Result<bool> WriteShared(std::string_view name, std::string_view data,
                           std::int64_t version) override;

 private:
  // A connected (and, with a user, authenticated) session in h_, with the parent nodes made.
  Status Connect();
  // Makes the parent nodes of the cluster's nodes (and of Leaf's) where they are missing.
  Status CreateParentNodes();
  // The session is gone: so is everything it held.
  void Lost();
  // Ok when `id` is claimed by this coordinator in the session's current handle (then h_),
  // else kLeaseLost (its fence is dropped).
  Status Fenced(std::int64_t id);
  // After a claim of `id` landed: its owner node's czxid, kept in claimed_; nullopt when the
  // node is not this session's (it ended meanwhile). Errors: as FromRc (the claim stands).
  Result<std::optional<std::int64_t>> ClaimedNode(std::int64_t id);
  zhandle_t* zh() const { return h_->zh; }
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
  bool leaf() const { return !leaf_.name.empty(); }
  // With a Leaf registry: this address's node, found or made (LeafRegistry); its sequence is
  // the one worker id this coordinator may claim. Errors: as FromRc; kInvalidArgument (two
  // nodes of this address, sequence 0 or one past the layout's worker ids, a node that is not
  // Leaf's shape).
  Result<std::int64_t> LeafNode();
  // This address's nodes in Leaf's registry, by sequence. Errors: as FromRc; kInvalidArgument
  // (a node Leaf's parser breaks on).
  Result<std::map<std::int64_t, std::string>> LeafNodesOfAddress();
  // Makes this address's node as Leaf does, never of sequence 0. Errors: as FromRc.
  Status MakeLeafNode();
  // The node's data as Leaf writes it, with `timestamp` (ms since 1970).
  std::string LeafData(std::int64_t timestamp) const;
  // The timestamp in this address's node, and its stat. Errors: as FromRc; kInvalidArgument
  // (not Leaf's data; the node gone: never registered again while running).
  Result<std::int64_t> ReadLeafTimestamp(Stat* stat);
  // ListHolders with a Leaf registry: every worker id but this address's node's is held (by
  // Leaf's servers, now or later: their sequence numbers come from the same counter).
  Result<std::map<std::int64_t, Holding>> WithLeafRegistry(std::map<std::int64_t, Holding> sekka);

  const std::shared_ptr<ZooKeeperSession> zk_;
  const bool shared_;  // the session is others' too (else it ends with Close)
  const std::string servers_;
  const std::string cluster_;
  const WorkerLeaseOptions options_;
  const std::string username_;  // "" = no authentication, open ACLs
  const std::string root_;
  ACL_vector* const acl_;                 // the ACL of every node under root_ (root_ included)
  std::shared_ptr<ZHandle> h_;            // the session's handle as of the last Connect
  std::int64_t parents_made_ = 0;         // the session in which the parent nodes were made
  std::map<std::int64_t, Fence> fences_;  // the ids this coordinator claimed
  // The owner nodes this coordinator's claims made (or may have: an answer lost), let go by
  // Close.
  std::map<std::int64_t, OwnedNode> claimed_;
  const LeafRegistry leaf_;
  const std::string leaf_dir_;  // "/snowflake/<name>/forever"; "" without a Leaf registry
  const HostPort leaf_at_;      // leaf_.address, parsed
  std::int64_t leaf_seq_ = -1;  // this address's node's sequence, once found or made
  std::string leaf_node_;       // and its path
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
  SEKKA_ASSIGN_OR_RETURN(auto h, zk_->Connect());
  h_ = std::move(h);
  if (parents_made_ == h_->session) return Status::Ok();
  SEKKA_RETURN_IF_ERROR(CreateParentNodes());
  parents_made_ = h_->session;
  return Status::Ok();
}

Status ZooKeeperCoordinator::CreateParentNodes() {
  // The parent nodes (persistent; they may exist already). /sekka is shared by all clusters.
  for (const std::string& path :
       {std::string("/sekka"), root_, root_ + "/workers", root_ + "/hwm", root_ + "/shared",
        fmt::format("{}/workers/{}", root_, options_.datacenter_id),
        fmt::format("{}/hwm/{}", root_, options_.datacenter_id)}) {
    ACL_vector* acl = path == "/sekka" ? &ZOO_OPEN_ACL_UNSAFE : acl_;
    const int rc = zoo_create(zh(), path.c_str(), nullptr, -1, acl, ZOO_PERSISTENT, nullptr, 0);
    if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + path);
  }
  if (leaf()) {  // Leaf's parents, open to all as Leaf's own (Curator's) are
    for (const std::string& path :
         {std::string("/snowflake"), fmt::format("/snowflake/{}", leaf_.name), leaf_dir_}) {
      const int rc = zoo_create(zh(), path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                                ZOO_PERSISTENT, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + path);
    }
  }
  return Status::Ok();
}

void ZooKeeperCoordinator::Lost() {
  if (h_ != nullptr) zk_->Drop(h_);
  fences_.clear();
  claimed_.clear();
}

Result<std::string> ZooKeeperCoordinator::BindLayout(const std::string& layout) {
  SEKKA_RETURN_IF_ERROR(Connect());
  const std::string path = root_ + "/layout";
  // A cluster beside a Leaf registry is bound to it too: a server of the cluster without it
  // would take the lowest free ids, Leaf's among them (CheckClusterLayout shows both).
  const std::string bound = leaf() ? fmt::format("{} beside Leaf {}", layout, leaf_.name) : layout;
  int rc = zoo_create(zh(), path.c_str(), bound.data(), static_cast<int>(bound.size()), acl_,
                      ZOO_PERSISTENT, nullptr, 0);
  if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + path);
  char buf[512];
  int len = sizeof(buf);
  Stat stat{};
  rc = zoo_get(zh(), path.c_str(), 0, buf, &len, &stat);
  if (rc != ZOK) return FromRc(rc, "get " + path);
  const std::string stored(buf, static_cast<std::size_t>(std::max(len, 0)));
  if (leaf() && stored == layout) {  // bound by servers that take the lowest free ids
    return InvalidArgument(fmt::format(
        "cluster {} is bound to layout \"{}\" without Leaf's registry: its servers take the "
        "lowest free worker ids, Leaf's among them; run the servers beside Leaf {} in a cluster "
        "of their own (worker.cluster)",
        cluster_, layout, leaf_.name));
  }
  return stored == bound ? layout : stored;
}

Result<std::map<std::int64_t, Holding>> ZooKeeperCoordinator::ListHolders() {
  SEKKA_RETURN_IF_ERROR(Connect());
  const std::string dir = fmt::format("{}/workers/{}", root_, options_.datacenter_id);
  String_vector children{};
  int rc = zoo_get_children(zh(), dir.c_str(), 0, &children);
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
    if (zoo_get(zh(), OwnerPath(id).c_str(), 0, buf, &len, &stat) != ZOK) continue;  // gone
    // The node's creation, not its version (always 0: it is never written), tells one holding
    // from a later one, even of the same session (backends/coordinator_sessions.h).
    holders[id] = Holding{std::string(buf, static_cast<std::size_t>(std::max(len, 0))),
                          stat.ephemeralOwner, stat.czxid};
  }
  deallocate_String_vector(&children);
  if (leaf()) return WithLeafRegistry(std::move(holders));
  return holders;
}

std::string ZooKeeperCoordinator::LeafData(std::int64_t timestamp) const {
  return fmt::format(R"({{"ip":"{}","port":"{}","timestamp":{}}})", leaf_at_.host, leaf_at_.port,
                     timestamp);
}

Result<std::map<std::int64_t, std::string>> ZooKeeperCoordinator::LeafNodesOfAddress() {
  String_vector children{};
  const int rc = zoo_get_children(zh(), leaf_dir_.c_str(), 0, &children);
  if (rc != ZOK) return FromRc(rc, "list " + leaf_dir_);
  const std::vector<std::string> names(children.data, children.data + children.count);
  deallocate_String_vector(&children);
  std::map<std::int64_t, std::string> ours;
  for (const std::string& name : names) {
    const auto node = ParseLeafNodeName(name);
    if (!node) {
      return InvalidArgument(fmt::format(
          "Leaf's registry {} holds a node \"{}\" that is not ip:port-sequence: Leaf's own "
          "servers cannot read the registry either; remove that node",
          leaf_dir_, OneLine(name.substr(0, 80))));
    }
    if (node->first == leaf_.address) ours[node->second] = name;
  }
  return ours;
}

Status ZooKeeperCoordinator::MakeLeafNode() {
  const std::string prefix = fmt::format("{}/{}-", leaf_dir_, leaf_.address);
  const std::string data = LeafData(0);  // no timestamp yet: no id was issued
  char made[512];
  const int rc = zoo_create(zh(), prefix.c_str(), data.data(), static_cast<int>(data.size()), acl_,
                            ZOO_PERSISTENT_SEQUENTIAL, made, sizeof(made));
  if (rc != ZOK) return FromRc(rc, "create " + prefix);
  if (ParseLeafNodeName(std::string_view(made).substr(leaf_dir_.size() + 1))->second != 0) {
    return Status::Ok();
  }
  // Sequence 0 is Leaf's: a Leaf server that finds no registry runs as worker 0 whatever
  // sequence its node gets (it does not read it). This node goes, and another is made.
  const int d = zoo_delete(zh(), made, -1);
  if (d != ZOK && d != ZNONODE) return FromRc(d, fmt::format("delete {}", made));
  return MakeLeafNode();
}

Result<std::int64_t> ZooKeeperCoordinator::LeafNode() {
  if (leaf_seq_ >= 0) return leaf_seq_;
  Result<std::map<std::int64_t, std::string>> ours = LeafNodesOfAddress();
  SEKKA_RETURN_IF_ERROR(ours);
  if (ours->empty()) {
    // Made as Leaf makes it. Two sekka servers of one address that both made one keep the
    // lowest (it was made first: its maker saw no other): the others go, and the cluster's
    // owner node refuses the second server.
    SEKKA_RETURN_IF_ERROR(MakeLeafNode());
    ours = LeafNodesOfAddress();
    SEKKA_RETURN_IF_ERROR(ours);
    while (ours->size() > 1) {
      const std::string path = fmt::format("{}/{}", leaf_dir_, ours->rbegin()->second);
      const int d = zoo_delete(zh(), path.c_str(), -1);
      if (d != ZOK && d != ZNONODE) return FromRc(d, "delete " + path);
      ours->erase(std::prev(ours->end()));
    }
  }
  if (ours->empty())
    return Unavailable(fmt::format("Leaf's registry {} changed meanwhile", leaf_dir_));
  if (ours->size() > 1) {
    return InvalidArgument(fmt::format(
        "Leaf's registry {} has two nodes of {} ({} and {}): Leaf would take either; register "
        "this server as another worker.leaf_address",
        leaf_dir_, leaf_.address, ours->begin()->second, std::next(ours->begin())->second));
  }
  const auto& [seq, name] = *ours->begin();
  if (seq >= options_.worker_count || seq == 0) {
    return InvalidArgument(fmt::format(
        "Leaf's registry {} gave {} sequence {}: {}; register this server as another "
        "worker.leaf_address",
        leaf_dir_, leaf_.address, seq,
        seq == 0 ? "worker id 0 is Leaf's (a Leaf server that finds no registry takes it)"
                 : fmt::format("past worker id {}, the layout's last (Leaf's servers refuse it "
                               "too); start a new registry (another leaf_name and leaf.name)",
                               options_.worker_count - 1)));
  }
  leaf_seq_ = seq;
  leaf_node_ = fmt::format("{}/{}", leaf_dir_, name);
  return seq;
}

Result<std::map<std::int64_t, Holding>> ZooKeeperCoordinator::WithLeafRegistry(
    std::map<std::int64_t, Holding> sekka) {
  SEKKA_ASSIGN_OR_RETURN(auto seq, LeafNode());
  if (auto it = sekka.find(seq); it != sekka.end() && it->second.session != session() &&
                                 it->second.identity != options_.identity) {
    return InvalidArgument(fmt::format(
        "worker id {} ({}) is held by the live sekka server \"{}\": two servers registered as {}; "
        "give each its own worker.leaf_address",
        seq, leaf_node_, it->second.identity.substr(0, 120), leaf_.address));
  }
  for (std::int64_t id = 0; id < options_.worker_count; ++id) {
    if (id != seq) sekka.try_emplace(id, Holding{"Leaf's registry " + leaf_dir_, 0, 0});
  }
  return sekka;
}

Result<std::int64_t> ZooKeeperCoordinator::ReadLeafTimestamp(Stat* stat) {
  char buf[512];
  int len = sizeof(buf);
  *stat = Stat{};
  const int rc = zoo_get(zh(), leaf_node_.c_str(), 0, buf, &len, stat);
  if (rc == ZNONODE) {
    // Never registered again while running: a registry removed and made again (its sequence
    // counter back at 0) hands out sequences Leaf's running servers still use.
    return InvalidArgument(fmt::format(
        "Leaf node {} is gone (removed by hand, or the registry with it): not registering "
        "again while Leaf's servers may run on a reset registry's sequences; restart this "
        "server once the registry is as Leaf's servers left it",
        leaf_node_));
  }
  if (rc != ZOK) return FromRc(rc, "get " + leaf_node_);
  const std::string data(buf, static_cast<std::size_t>(std::max(len, 0)));
  const std::optional<std::int64_t> t =
      stat->dataLength <= len ? ParseLeafTimestamp(data) : std::nullopt;
  if (!t) {
    return InvalidArgument(fmt::format(
        "Leaf node {} holds \"{}\", not {{\"ip\",\"port\",\"timestamp\"}} as Leaf writes it",
        leaf_node_, OneLine(data.substr(0, 80))));
  }
  return *t;
}

Result<std::int64_t> ZooKeeperCoordinator::ReadHwm(std::int64_t id, Stat* stat, bool* exists) {
  const std::string path = HwmPath(id);
  char buf[64];
  int len = sizeof(buf) - 1;
  *stat = Stat{};
  const int rc = zoo_get(zh(), path.c_str(), 0, buf, &len, stat);
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
  SEKKA_RETURN_IF_ERROR(Connect());
  Stat stat{};
  bool exists = false;
  return ReadHwm(id, &stat, &exists);
}

Result<std::optional<std::int64_t>> ZooKeeperCoordinator::Claim(
    std::int64_t id, const std::optional<Holding>& seen) {
  SEKKA_RETURN_IF_ERROR(Connect());
  const std::string path = OwnerPath(id);
  const std::string hwm_path = HwmPath(id);
  const bool ours = seen.has_value() && Mine(id, *seen) && seen->session == session();
  if (leaf() && id != leaf_seq_) return std::optional<std::int64_t>();  // Leaf's, not ours
  for (int attempt = 0; attempt < 20; ++attempt) {
    // 1. The hwm node and its version (made first if it never existed).
    Stat hwm_stat{};
    bool exists = false;
    SEKKA_ASSIGN_OR_RETURN(auto hwm, ReadHwm(id, &hwm_stat, &exists));
    if (!exists) {
      const int rc = zoo_create(zh(), hwm_path.c_str(), "0", 1, acl_, ZOO_PERSISTENT, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return FromRc(rc, "create " + hwm_path);
      continue;
    }
    // 1b. With a Leaf registry, this address's node: sekka writes its timestamp only with its
    //     hwm (0 at first), so any other timestamp was written by a Leaf server registered as
    //     this address, which may still run (Leaf keeps no liveness): refused, never taken over.
    Stat leaf_stat{};
    if (leaf()) {
      SEKKA_ASSIGN_OR_RETURN(auto written, ReadLeafTimestamp(&leaf_stat));
      if (written != hwm) {
        // This identity's earlier run may have stored both since 1 read the hwm: read again.
        Stat again{};
        bool still = false;
        Result<std::int64_t> now = ReadHwm(id, &again, &still);
        if (now.ok() && again.version != hwm_stat.version) continue;
        return InvalidArgument(fmt::format(
            "Leaf node {} was written by a Leaf server (timestamp {}, not sekka's hwm {} for "
            "worker id {}): Leaf keeps no liveness, so sekka never takes a Leaf server's worker "
            "id; register this server as another worker.leaf_address",
            leaf_node_, written, hwm, id));
      }
    }
    // 2. The owner node is still as listed.
    Stat owner{};
    int rc = zoo_exists(zh(), path.c_str(), 0, &owner);
    if (rc != ZOK && rc != ZNONODE) return FromRc(rc, "exists " + path);
    const bool held = rc == ZOK;
    if (held != seen.has_value() ||
        (held && (owner.ephemeralOwner != seen->session || owner.czxid != seen->version))) {
      return std::optional<std::int64_t>();  // changed meanwhile
    }
    // 3. One atomic step: the listed holding ends, this session's begins, and the hwm node is
    //    written back unchanged at the version read in 1. Every claim writes that node, so a
    //    claim by anyone since 1 (or a store by the earlier holder) fails this one, and from
    //    now on only this session knows the node's version (the fence of StoreHwm and Close).
    const std::string text = std::to_string(hwm);
    zoo_op_t ops[4];
    zoo_op_result_t results[4] = {};
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
    // The Leaf node as read in 1b: a Leaf server's write since fails this claim too.
    if (leaf()) zoo_check_op_init(&ops[n++], leaf_node_.c_str(), leaf_stat.version);
    // Kept before the answer, which may be lost: Close lets go of what landed.
    std::optional<OwnedNode> before;
    if (auto it = claimed_.find(id); it != claimed_.end()) before = it->second;
    claimed_[id] =
        OwnedNode{session(), path, hwm_path, ours ? seen->version : 0, hwm_stat.version + 1};
    std::uint64_t previous = 0;
    bool sent = false;
    {
      const std::unique_lock step = zk_->ledger().Begin(path, claimed_[id].claim, previous);
      rc = Multi(zh(), n, ops, results, &sent);
    }
    if (rc == ZOK) {
      SEKKA_ASSIGN_OR_RETURN(auto czxid, ClaimedNode(id));
      if (!czxid) return std::optional<std::int64_t>();  // the node went meanwhile
      fences_[id] = Fence{session(), *czxid, after.version, hwm, leaf_stat.version};
      return std::optional<std::int64_t>(hwm);
    }
    // Sent without an answer: it may have landed (Close lets go of it).
    if (sent && (IsConnectionError(rc) || IsSessionGone(rc))) return FromRc(rc, "claim " + path);
    // Nothing landed.
    zk_->ledger().Undo(path, claimed_[id].claim, previous);
    if (before) {
      claimed_[id] = *before;
    } else {
      claimed_.erase(id);
    }
    if (IsConnectionError(rc) || IsSessionGone(rc) || rc == ZNOAUTH) {
      return FromRc(rc, "claim " + path);
    }
    // The hwm node (or the Leaf node) was written meanwhile: read it again (step 2 sees a new
    // holder, 1b a Leaf server's write). Any other failed op (the owner node came or went): the
    // id changed meanwhile.
    const bool leaf_written = leaf() && results[set + 1].err == ZBADVERSION;
    if (results[set].err != ZBADVERSION && !leaf_written) return std::optional<std::int64_t>();
  }
  return Unavailable(fmt::format("zookeeper node {} keeps changing", hwm_path));
}

Status ZooKeeperCoordinator::KeepAlive(std::int64_t id) {
  // The client's own thread keeps the session alive; this checks that the node is still ours.
  SEKKA_RETURN_IF_ERROR(Fenced(id));
  zk_->SendKept(h_);  // a server that only renews sends them too
  const int state = zoo_state(h_->zh);
  if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
    Lost();
    return LeaseLost(fmt::format("the zookeeper session holding worker id {} expired", id));
  }
  // The owner node made by this coordinator's claim (no other node has its czxid) lives only
  // while the session that made it does.
  Stat stat{};
  const int rc = zoo_exists(h_->zh, OwnerPath(id).c_str(), 0, &stat);
  if (rc == ZOK && stat.czxid == fences_[id].czxid) return Status::Ok();
  if (rc == ZOK || rc == ZNONODE) {
    fences_.erase(id);
    return LeaseLost(fmt::format("worker id {} is no longer held by this zookeeper session", id));
  }
  Error e = FromRc(rc, "exists " + OwnerPath(id));
  if (e.code == ErrorCode::kLeaseLost) Lost();
  return e;
}

Result<std::optional<std::int64_t>> ZooKeeperCoordinator::ClaimedNode(std::int64_t id) {
  // Read even when the czxid is known (the node was held before): it must still be there.
  OwnedNode& node = claimed_[id];
  Stat stat{};
  const int rc = zoo_exists(zh(), node.owner_path.c_str(), 0, &stat);
  if (rc == ZOK && stat.ephemeralOwner == node.session &&
      (node.czxid == 0 || stat.czxid == node.czxid)) {
    node.czxid = stat.czxid;
    return std::optional<std::int64_t>(node.czxid);
  }
  if (rc == ZOK || rc == ZNONODE) {
    claimed_.erase(id);
    return std::optional<std::int64_t>();
  }
  return FromRc(rc, "exists " + node.owner_path);
}

Status ZooKeeperCoordinator::Fenced(std::int64_t id) {
  auto it = fences_.find(id);
  if (it == fences_.end()) return LeaseLost("no worker id is held");
  // The session's current handle: another coordinator of a shared session may have found it
  // gone and opened a new one, which holds nothing of this one's.
  h_ = zk_->Current();
  if (h_ != nullptr && h_->session == it->second.session) return Status::Ok();
  fences_.erase(it);
  return LeaseLost(
      fmt::format("the zookeeper session that claimed worker id {} ended or expired", id));
}

Status ZooKeeperCoordinator::StoreHwm(std::int64_t id, std::int64_t hwm_millis) {
  SEKKA_RETURN_IF_ERROR(Fenced(id));
  auto it = fences_.find(id);
  // Never lower: the node is written only with the version this session last saw, so
  // hwm_known is what it holds (a write that timed out but landed moves the version, the next
  // write fails with ZBADVERSION, and the id is claimed again, which reads the node again).
  Fence& f = it->second;
  if (hwm_millis <= f.hwm_known) return Status::Ok();
  const std::string text = std::to_string(hwm_millis);
  // With a Leaf registry, the node's timestamp is the hwm too, in the same multi-op, at the
  // version this session last saw: a Leaf server's write there since ends this lease.
  const std::string hwm_path = HwmPath(id);  // the ops keep pointers into both strings
  const std::string leaf_data = leaf() ? LeafData(hwm_millis) : "";
  zoo_op_t ops[2];
  zoo_op_result_t results[2] = {};
  Stat stat{};
  Stat leaf_stat{};
  zoo_set_op_init(&ops[0], hwm_path.c_str(), text.data(), static_cast<int>(text.size()),
                  f.hwm_version, &stat);
  if (leaf()) {
    zoo_set_op_init(&ops[1], leaf_node_.c_str(), leaf_data.data(),
                    static_cast<int>(leaf_data.size()), f.leaf_version, &leaf_stat);
  }
  const int rc = Multi(zh(), leaf() ? 2 : 1, ops, results);
  if (rc == ZOK) {
    f.hwm_version = stat.version;
    f.hwm_known = hwm_millis;
    f.leaf_version = leaf_stat.version;
    return Status::Ok();
  }
  if (rc == ZBADVERSION || rc == ZNONODE) {
    fences_.erase(it);
    if (leaf() && results[0].err != ZBADVERSION && results[0].err != ZNONODE) {
      return LeaseLost(
          fmt::format("Leaf node {} of worker id {} was written by another process (a Leaf server "
                      "registered as {}?)",
                      leaf_node_, id, leaf_.address));
    }
    return LeaseLost(fmt::format("worker id {} was taken over by another zookeeper session", id));
  }
  Error e = FromRc(rc, "set " + HwmPath(id));
  if (e.code == ErrorCode::kLeaseLost) Lost();
  return e;
}

// A document is the persistent node shared/<name>; its version is 2^32 + the node's version as
// 32 unsigned bits (0: no node; the node's version wraps after 2^31 writes), so that a write at 0
// creates it and any other sets it at the version read.
Result<SharedDocument> ZooKeeperCoordinator::ReadShared(std::string_view name) {
  SEKKA_RETURN_IF_ERROR(Connect());
  const std::string path = fmt::format("{}/shared/{}", root_, name);
  // One zoo_get answers the data and the stat of one version; a buffer too small truncates the
  // data (the stat says how long it is), and a second get with room for any document sekka
  // writes takes it whole. (An exists-then-get pair saw another version under load.)
  for (const std::size_t room : {std::size_t{64} * 1024, kMaxSharedBytes + 1}) {
    std::string data(room, '\0');
    int len = static_cast<int>(data.size());
    Stat stat{};
    const int rc = zoo_get(zh(), path.c_str(), 0, data.data(), &len, &stat);
    if (rc == ZNONODE) return SharedDocument{};
    if (rc != ZOK) return FromRc(rc, "get " + path);
    if (stat.dataLength > static_cast<std::int64_t>(room)) continue;
    data.resize(static_cast<std::size_t>(std::max(len, 0)));
    return SharedDocument{std::move(data),
                          (std::int64_t{1} << 32) | static_cast<std::uint32_t>(stat.version)};
  }
  return Unavailable(fmt::format("zookeeper node {} holds more than {} bytes: not sekka's", path,
                                 kMaxSharedBytes));
}

Result<bool> ZooKeeperCoordinator::WriteShared(std::string_view name, std::string_view data,
                                               std::int64_t version) {
  SEKKA_RETURN_IF_ERROR(CheckSharedSize(name, data.size()));
  SEKKA_RETURN_IF_ERROR(Connect());
  const std::string path = fmt::format("{}/shared/{}", root_, name);
  const int size = static_cast<int>(data.size());
  const int at = static_cast<int>(static_cast<std::uint32_t>(version));
  if (version != 0 && at == -1) {  // zoo_set's "any version": never sent as a version read
    return Unavailable(fmt::format("zookeeper node {} has version -1 (wrapped): remove it", path));
  }
  const int rc = version == 0 ? zoo_create(zh(), path.c_str(), data.data(), size, acl_,
                                           ZOO_PERSISTENT, nullptr, 0)
                              : zoo_set(zh(), path.c_str(), data.data(), size, at);
  if (rc == ZOK) return true;
  if (rc == ZNODEEXISTS || rc == ZBADVERSION || rc == ZNONODE) return false;
  return FromRc(rc, "write " + path);
}

Status ZooKeeperCoordinator::Close() {
  // Each node this coordinator claimed is deleted before Close returns, so that its id is free
  // then (ending a session alone does not wait for the server). The delete is conditioned on
  // the hwm node's version (ZooKeeperSession::Release): a node another session made meanwhile
  // (a takeover) is never deleted.
  std::vector<OwnedNode> nodes;
  for (auto& [id, node] : claimed_) nodes.push_back(std::move(node));
  claimed_.clear();
  fences_.clear();
  std::shared_ptr<ZHandle> h = zk_->Current();
  const std::size_t kept = nodes.empty() ? 0 : zk_->Release(h, std::move(nodes));
  if (shared_) return Status::Ok();  // a release kept goes with the next call of the session
  // A session of its own ends here (what the connection lost goes with it, once it expires).
  zk_->End();
  h_.reset();
  if (kept == 0) return Status::Ok();
  return Unavailable(fmt::format(
      "zookeeper {}: the connection was lost while releasing {} worker id(s); they are free once "
      "the session expires",
      servers_, kept));
}

}  // namespace

Result<std::unique_ptr<Coordinator>> NewZooKeeperCoordinator(
    std::string_view servers, std::string_view cluster, const WorkerLeaseOptions& options,
    const std::string& username, const std::string& password, const LeafRegistry& leaf,
    CoordinatorSessions* sessions) {
  SEKKA_ASSIGN_OR_RETURN(auto s, ParseHostPorts(servers, "zookeeper servers"));
  SEKKA_RETURN_IF_ERROR(ValidateClusterName(cluster));
  std::string list;
  for (const HostPort& hp : s) {
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
  if (!leaf.name.empty() || !leaf.address.empty()) {
    SEKKA_RETURN_IF_ERROR(ValidateLeafRegistry(leaf));
  }
  std::function<std::shared_ptr<ZooKeeperSession>()> make = [&] {
    return std::make_shared<ZooKeeperSession>(list, options, username, password);
  };
  // Leaf's registry is one server's own: its coordinator keeps a session of its own.
  const bool shared = sessions != nullptr && leaf.name.empty();
  std::shared_ptr<ZooKeeperSession> zk =
      shared ? sessions->Get(fmt::format("zookeeper\n{}\n{}\n{}\n{}\n{}", list, username, password,
                                         options.ttl.count(), options.call_timeout.count()),
                             make)
             : make();
  return std::unique_ptr<Coordinator>(std::make_unique<ZooKeeperCoordinator>(
      std::move(zk), shared, std::string(cluster), options, leaf));
}

Status ValidateLeafRegistry(const LeafRegistry& leaf) {
  // Leaf reads its node's path split at '-', so a name with one breaks Leaf's own servers.
  const bool name_ok =
      !leaf.name.empty() && leaf.name.size() <= 200 &&
      leaf.name.find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._") == std::string::npos;
  if (!name_ok || leaf.name == "." || leaf.name == "..") {
    return InvalidArgument(fmt::format(
        "worker.leaf_name \"{}\" is not valid: allowed Leaf's leaf.name, 1 to 200 of A-Z a-z 0-9 "
        ". _ but not . or .. alone (Leaf's own servers cannot read a path with '-')",
        OneLine(leaf.name.substr(0, 80))));
  }
  // Leaf registers a host's IPv4 address and a port, "a.b.c.d:port": one entry of the
  // coordinator lists' form (ParseHostPorts) whose host is an IPv4 address.
  Result<std::vector<HostPort>> at = ParseHostPorts(leaf.address, "worker.leaf_address");
  in_addr ip{};
  if (!at.ok() || at->size() != 1 || inet_pton(AF_INET, at->front().host.c_str(), &ip) != 1) {
    return InvalidArgument(fmt::format(
        "worker.leaf_address \"{}\" is not valid: allowed IPv4:PORT, the address this server "
        "registers as in Leaf's registry, as Leaf registers its servers' ip:port",
        OneLine(leaf.address.substr(0, 80))));
  }
  return Status::Ok();
}

}  // namespace sekka
