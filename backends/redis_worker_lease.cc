#include "backends/redis_worker_lease.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "backends/redis_client.h"
#include "backends/store_uri.h"
#include "sekka/secrets.h"

namespace sekka {
namespace {

// The live holders of a datacenter: id, identity, session, version, for each owner record whose
// session key exists. KEYS: the owners set. ARGV: the key prefix, the datacenter.
constexpr const char* kList = R"(
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local o = redis.call('HMGET', ARGV[1] .. 'owner:' .. ARGV[2] .. ':' .. id,
                       'identity', 'session', 'version')
  if o[2] and redis.call('EXISTS', ARGV[1] .. 'session:' .. o[2]) == 1 then
    table.insert(out, id)
    table.insert(out, o[1])
    table.insert(out, o[2])
    table.insert(out, o[3])
  end
end
return out
)";

// Claim: the id must be free (no owner, or an owner whose session is gone) when no version was
// listed, else still at the version listed; then this session owns it at a new version, the
// listed holder's session (this identity's earlier run) ends, and the hwm is read. The owner
// record keeps the claim's settle (ms), the holder's TTL, and whether the holder released it
// (Close): when the earlier holder did not (its session expired, by Redis's wall clock, or was
// evicted, or is ended here) the settle is the largest of the two TTLs and what the earlier
// holder owed itself (a wait it did not finish is passed on); when the claim is this session's
// own again (a lost reply), what its earlier claim owed. nil: the id changed. KEYS: owner, hwm,
// owners set, this session, version counter. ARGV: prefix, id, identity, session, listed
// version or "", listed session or "", this session's TTL in ms.
// (An error reply needs a message after its code: Redis answers a code alone as "ERR CODE".)
constexpr const char* kClaim = R"(
if redis.call('EXISTS', KEYS[4]) == 0 then return redis.error_reply('NOSESSION the session key is gone') end
local cur = redis.call('HMGET', KEYS[1], 'session', 'version', 'settle', 'ttl', 'released')
local live = cur[1] and redis.call('EXISTS', ARGV[1] .. 'session:' .. cur[1]) == 1
if ARGV[5] == '' then
  if live then return false end
elseif cur[2] ~= ARGV[5] then
  return false
end
local settle = 0
if cur[1] == ARGV[4] then
  settle = tonumber(cur[3] or '0')
elseif cur[1] and cur[5] ~= '1' then
  settle = math.max(tonumber(ARGV[7]), tonumber(cur[4] or ARGV[7]), tonumber(cur[3] or '0'))
end
local v = redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[1], 'identity', ARGV[3], 'session', ARGV[4], 'version', v,
           'settle', settle, 'ttl', ARGV[7], 'released', '0')
redis.call('SADD', KEYS[3], ARGV[2])
if ARGV[6] ~= '' and ARGV[6] ~= ARGV[4] then
  redis.call('DEL', ARGV[1] .. 'session:' .. ARGV[6])
end
return {tostring(v), redis.call('GET', KEYS[2]) or '0', tostring(settle)}
)";

// Close: the session ends; with `released` = 1, the owner records it still heads say that it
// gave them back (their next claim owes no settle). KEYS: the session, then owner records.
// ARGV: the session, released.
constexpr const char* kClose = R"(
redis.call('DEL', KEYS[1])
if ARGV[2] == '1' then
  for i = 2, #KEYS do
    if redis.call('HGET', KEYS[i], 'session') == ARGV[1] then
      redis.call('HSET', KEYS[i], 'released', '1')
    end
  end
end
return 1
)";

// The database a cluster's keys live in on this Redis, bound by its first server: the key in
// database 0 (SET NX), then its value. KEYS: the binding. ARGV: this server's database.
constexpr const char* kBindDatabase = R"(
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
)";

// KeepAlive: 1 when the owner record names this session and its key lived to be renewed.
// KEYS: owner, this session. ARGV: session, ttl in ms.
constexpr const char* kKeepAlive = R"(
if redis.call('HGET', KEYS[1], 'session') ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[2], ARGV[2])
)";

// StoreHwm: raises the hwm (ms since 1970: exact in Lua's doubles) if the owner record names
// this session and it lives; 0 when not. KEYS: owner, this session, hwm. ARGV: session, hwm.
constexpr const char* kStoreHwm = R"(
if redis.call('HGET', KEYS[1], 'session') ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local cur = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[2]) > cur then redis.call('SET', KEYS[3], ARGV[2]) end
return 1
)";

// WriteShared: the document (a hash of version and data, no TTL) is replaced if still at the
// version read; 0 when another server wrote it since. KEYS: the document. ARGV: the version
// read, the data.
constexpr const char* kWriteShared = R"(
if tonumber(redis.call('HGET', KEYS[1], 'version') or '0') ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'version', tonumber(ARGV[1]) + 1, 'data', ARGV[2])
return 1
)";

class RedisCoordinator final : public Coordinator {
 public:
  RedisCoordinator(std::unique_ptr<RedisClient> redis, std::string cluster,
                   WorkerLeaseOptions options, std::string database)
      : redis_(std::move(redis)),
        cluster_(std::move(cluster)),
        options_(std::move(options)),
        prefix_(fmt::format("sekka:{{{}}}:", cluster_)),
        database_(database.empty() ? "0" : std::move(database)) {}

  Result<std::string> BindLayout(const std::string& layout) override {
    SEKKA_RETURN_IF_ERROR(BindDatabase());
    SEKKA_RETURN_IF_ERROR(Call({"SET", prefix_ + "layout", layout, "NX"}));
    SEKKA_ASSIGN_OR_RETURN(auto get, Call({"GET", prefix_ + "layout"}));
    return get.text;
  }

  Result<std::map<std::int64_t, Holding>> ListHolders() override {
    SEKKA_RETURN_IF_ERROR(OpenSession());
    SEKKA_ASSIGN_OR_RETURN(auto r, Call({"EVAL", kList, "1", DcKey("owners"), prefix_,
                                         std::to_string(options_.datacenter_id)}));
    std::map<std::int64_t, Holding> holders;
    for (std::size_t i = 0; i + 3 < r.elements.size(); i += 4) {
      std::int64_t id = 0;
      Holding h{r.elements[i + 1].text};
      if (DecimalInt64(r.elements[i].text, id) && DecimalInt64(r.elements[i + 2].text, h.session) &&
          DecimalInt64(r.elements[i + 3].text, h.version)) {
        holders[id] = h;
      }
    }
    return holders;
  }

  std::int64_t session() const override { return session_; }

  Result<std::int64_t> PeekHwm(std::int64_t id) override {
    SEKKA_ASSIGN_OR_RETURN(auto r, Call({"GET", Key("hwm", id)}));
    return Hwm(id, r.nil ? "0" : r.text);
  }

  Result<std::optional<std::int64_t>> Claim(std::int64_t id,
                                            const std::optional<Holding>& seen) override {
    SEKKA_RETURN_IF_ERROR(OpenSession());
    Result<RespReply> r = Call(
        {"EVAL", kClaim, "5", Key("owner", id), Key("hwm", id), DcKey("owners"),
         SessionKey(session_), prefix_ + "version", prefix_, std::to_string(id), options_.identity,
         std::to_string(session_), seen ? std::to_string(seen->version) : "",
         seen ? std::to_string(seen->session) : "", std::to_string(options_.ttl.count())},
        /*may_repeat=*/false);  // again after a lost reply: "changed"
    if (!r.ok()) {
      claim_unknown_ = true;  // it may have landed: this session may head the id, owing a settle
      return std::move(r).error();
    }
    if (r->kind == '-' && r->text.rfind("NOSESSION", 0) == 0) {
      session_ = 0;  // it expired before the claim: the next call opens a new one
      return Unavailable(
          fmt::format("the Redis session of {} expired before its claim", options_.identity));
    }
    if (r->nil) return std::optional<std::int64_t>();
    std::int64_t settle = -1;
    if (r->kind != '*' || r->elements.size() != 3 || !DecimalInt64(r->elements[2].text, settle) ||
        settle < 0) {
      return Broken("claim", *r);
    }
    settle_ = std::chrono::milliseconds(settle);
    claimed_at_ms_ = options_.clock_or_system().MonotonicMillis();
    claim_unknown_ = false;
    if (std::find(claimed_.begin(), claimed_.end(), id) == claimed_.end()) claimed_.push_back(id);
    SEKKA_ASSIGN_OR_RETURN(auto hwm, Hwm(id, r->elements[1].text));
    return std::optional<std::int64_t>(hwm);
  }

  Status KeepAlive(std::int64_t id) override {
    if (session_ == 0) return LeaseLost("no worker id is held");
    SEKKA_ASSIGN_OR_RETURN(auto r,
                           Call({"EVAL", kKeepAlive, "2", Key("owner", id), SessionKey(session_),
                                 std::to_string(session_), std::to_string(options_.ttl.count())}));
    if (r.kind != ':') return Broken("keepalive", r);
    if (r.integer == 1) return Status::Ok();
    session_ = 0;
    lost_ = true;
    return LeaseLost(fmt::format(
        "the Redis session holding worker id {} expired, or the id was taken over", id));
  }

  Status StoreHwm(std::int64_t id, std::int64_t hwm_millis) override {
    if (session_ == 0) return LeaseLost("no worker id is held");
    SEKKA_ASSIGN_OR_RETURN(
        auto r, Call({"EVAL", kStoreHwm, "3", Key("owner", id), SessionKey(session_),
                      Key("hwm", id), std::to_string(session_), std::to_string(hwm_millis)}));
    if (r.kind != ':') return Broken("hwm store", r);
    if (r.integer == 1) return Status::Ok();
    lost_ = true;
    return LeaseLost(fmt::format(
        "worker id {} is no longer held by this process's Redis session (expired or taken over)",
        id));
  }

  Status Close() override {
    if (session_ == 0) return Status::Ok();
    // Released only by a holder that gives its id back (it has stopped: a strict leader resigns
    // before it closes), not one that found it lost (it may still answer until its own lease
    // ends), and only once the last claim's settle has passed here: a session that resigns
    // while an earlier holder may still answer passes that wait on to the next holder.
    // A claim whose answer was lost may have landed with a settle this session never saw: not
    // released either.
    const bool released =
        !lost_ && !claim_unknown_ &&
        options_.clock_or_system().MonotonicMillis() >= claimed_at_ms_ + settle_.count();
    std::vector<std::string> args = {"EVAL", kClose, std::to_string(1 + claimed_.size()),
                                     SessionKey(session_)};
    for (std::int64_t id : claimed_) args.push_back(Key("owner", id));
    args.push_back(std::to_string(session_));
    args.push_back(released ? "1" : "0");
    SEKKA_RETURN_IF_ERROR(Call(args));
    session_ = 0;
    return Status::Ok();
  }

  // Redis expires a session key by its wall clock (and an evicting Redis may drop it): a step
  // of that clock frees an id before the TTL has passed since its holder's last renewal.
  std::chrono::milliseconds settle() const override { return settle_; }

  std::string Describe() const override {
    return fmt::format("Redis session {:x} on {} (cluster {})",
                       static_cast<std::uint64_t>(session_), redis_->text(), cluster_);
  }
  std::string Where() const override { return "cluster " + cluster_; }
  std::string_view source() const override { return "redis"; }

  // A document is the key shared:<name>, in the cluster's database (bound first).
  Result<SharedDocument> ReadShared(std::string_view name) override {
    SEKKA_RETURN_IF_ERROR(BindDatabase());
    const std::string key = fmt::format("{}shared:{}", prefix_, name);
    SEKKA_ASSIGN_OR_RETURN(auto r, Call({"HMGET", key, "version", "data"}));
    if (r.kind != '*' || r.elements.size() != 2) return Broken("document read", r);
    if (r.elements[0].nil) return SharedDocument{};
    SharedDocument d{r.elements[1].text, 0};
    if (!DecimalInt64(r.elements[0].text, d.version) || d.version < 1) {
      return Internal(fmt::format("Redis key {} has version \"{}\", not a positive number", key,
                                  r.elements[0].text.substr(0, 40)));
    }
    return d;
  }

  Result<bool> WriteShared(std::string_view name, std::string_view data,
                           std::int64_t version) override {
    SEKKA_RETURN_IF_ERROR(CheckSharedSize(name, data.size()));
    SEKKA_RETURN_IF_ERROR(BindDatabase());
    SEKKA_ASSIGN_OR_RETURN(
        auto r, Call({"EVAL", kWriteShared, "1", fmt::format("{}shared:{}", prefix_, name),
                      std::to_string(version), std::string(data)},
                     /*may_repeat=*/false));
    if (r.kind != ':') return Broken("document write", r);
    return r.integer == 1;
  }

 private:
  // A new session key, with the lease's TTL, unless one is open.
  Status OpenSession() {
    if (session_ != 0) return Status::Ok();
    static thread_local std::mt19937_64 random{std::random_device{}()};
    for (int attempt = 0; attempt < 3; ++attempt) {
      const std::int64_t candidate =
          static_cast<std::int64_t>(random() >> 1) | 1;  // positive, never 0
      SEKKA_ASSIGN_OR_RETURN(auto r, Call({"SET", SessionKey(candidate), options_.identity, "PX",
                                           std::to_string(options_.ttl.count()), "NX"}));
      if (r.kind == '+') {
        session_ = candidate;
        lost_ = false;
        claim_unknown_ = false;
        claimed_.clear();
        return Status::Ok();
      }
    }
    return Unavailable("Redis refused three new session keys in a row");
  }

  Result<RespReply> Call(const std::vector<std::string>& args, bool may_repeat = true) {
    Result<RespReply> r = redis_->Call(args, may_repeat);
    if (r.ok() && r->kind == '-' && r->text.rfind("NOSESSION", 0) != 0) {
      return Unavailable(fmt::format("{}: {}: {}", redis_->text(), args[0], r->text));
    }
    return r;
  }

  std::string Key(std::string_view what, std::int64_t id) const {
    return fmt::format("{}{}:{}:{}", prefix_, what, options_.datacenter_id, id);
  }
  std::string DcKey(std::string_view what) const {
    return fmt::format("{}{}:{}", prefix_, what, options_.datacenter_id);
  }
  std::string SessionKey(std::int64_t session) const {
    return fmt::format("{}session:{}", prefix_, session);
  }

  Result<std::int64_t> Hwm(std::int64_t id, const std::string& text) const {
    std::int64_t hwm = -1;
    if (DecimalInt64(text, hwm) && hwm >= 0) return hwm;
    return Internal(fmt::format("Redis key {} holds \"{}\", not a number of ms", Key("hwm", id),
                                text.substr(0, 40)));
  }

  Error Broken(std::string_view what, const RespReply& r) const {
    return Unavailable(fmt::format("{}: the {} script answered {}", redis_->text(), what,
                                   r.kind == '-' ? r.text : "something else"));
  }

  const std::unique_ptr<RedisClient> redis_;
  const std::string cluster_;
  const WorkerLeaseOptions options_;
  const std::string prefix_;
  std::int64_t session_ = 0;             // 0: none open
  std::chrono::milliseconds settle_{0};  // of the last claim
  std::int64_t claimed_at_ms_ = 0;       // when it was answered, on options_.clock's monotonic
  bool lost_ = false;                    // a renewal or store found the claim gone
  bool claim_unknown_ = false;           // a claim's answer was lost
  std::vector<std::int64_t> claimed_;    // the ids this session claimed
  const std::string database_;           // the URI's database ("0" when it names none)
  bool database_bound_ = false;

  // The cluster's database on this Redis, bound once (kBindDatabase). Errors: kInvalidArgument
  // when it is bound to another database, kUnavailable.
  Status BindDatabase() {
    if (database_bound_) return Status::Ok();
    const std::string binding = fmt::format("sekka:{{{}}}:database", cluster_);
    RespReply bound;
    if (database_ == "0") {
      SEKKA_ASSIGN_OR_RETURN(auto r, Call({"EVAL", kBindDatabase, "1", binding, database_}));
      bound = std::move(r);
    } else {
      // The binding lives in database 0, whatever database this connection serves: one MULTI,
      // which leaves the connection on its own database again.
      SEKKA_ASSIGN_OR_RETURN(auto all,
                             redis_->CallInOrder({{"MULTI"},
                                                  {"SELECT", "0"},
                                                  {"EVAL", kBindDatabase, "1", binding, database_},
                                                  {"SELECT", database_},
                                                  {"EXEC"}}));
      const RespReply& exec = all.back();
      if (exec.kind != '*' || exec.elements.size() != 3) return Broken("database binding", exec);
      bound = exec.elements[1];
    }
    if (bound.kind == '-' || bound.nil) return Broken("database binding", bound);
    if (bound.text != database_) {
      return InvalidArgument(fmt::format(
          "worker.coordinator {}: cluster {} keeps its worker ids in database {} of this Redis "
          "(key {} in database 0), and this server is on database {}: servers of one "
          "worker.cluster on one Redis share one database, or they would be two id spaces with "
          "equal ids; use /{} in the URI, or another worker.cluster",
          redis_->text(), cluster_, bound.text.substr(0, 8), binding, database_,
          bound.text.substr(0, 8)));
    }
    database_bound_ = true;
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<Coordinator>> NewRedisCoordinator(std::string_view uri,
                                                         std::string_view cluster,
                                                         const WorkerLeaseOptions& options,
                                                         const CoordinatorAccess& access) {
  SEKKA_ASSIGN_OR_RETURN(auto parsed,
                         ParseStoreUri(uri, "worker.coordinator", RedisClient::kParams));
  if (parsed.scheme != "redis" && parsed.scheme != "rediss") {
    return InvalidArgument(
        "worker.coordinator for worker.source = \"redis\" begins redis:// or "
        "rediss://");
  }
  SEKKA_RETURN_IF_ERROR(ValidateClusterName(cluster));

  // Credentials are given once: in the URI, or in worker.username/password and worker.tls_*.
  if ((parsed.has_password || !parsed.user.empty()) && !access.password.empty()) {
    return InvalidArgument(
        "worker.coordinator has a user or password and worker.password is set too: give them "
        "in one place");
  }
  for (const auto& [name, value] : {std::pair{"tls_ca_file", &access.tls.ca_file},
                                    {"tls_cert_file", &access.tls.cert_file},
                                    {"tls_key_file", &access.tls.key_file}}) {
    if (!value->empty() && parsed.params.contains(name)) {
      return InvalidArgument(fmt::format(
          "worker.coordinator has {} and worker.{} is set too: give it in one place", name, name));
    }
  }
  if (parsed.user.empty() && !parsed.has_password && !access.password.empty()) {
    parsed.user = access.username;
    parsed.password = access.password;
    parsed.has_password = true;
  }
  const std::pair<const char*, const std::string*> files[] = {
      {"tls_ca_file", &access.tls.ca_file},
      {"tls_cert_file", &access.tls.cert_file},
      {"tls_key_file", &access.tls.key_file}};
  for (const auto& [name, value] : files) {
    if (!value->empty() && !parsed.params.contains(name)) parsed.params[name] = *value;
  }
  std::string database = parsed.path;
  SEKKA_ASSIGN_OR_RETURN(auto redis, RedisClient::Open(std::move(parsed), RedactSecrets(uri),
                                                       "worker.coordinator", options.call_timeout));
  return std::unique_ptr<Coordinator>(std::make_unique<RedisCoordinator>(
      std::move(redis), std::string(cluster), options, std::move(database)));
}

}  // namespace sekka
