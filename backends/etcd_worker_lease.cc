#include "backends/etcd_worker_lease.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "backends/coordinator_sessions.h"
#include "backends/http_client.h"
#include "sekka/codec.h"
#include "sekka/coordinator.h"

namespace sekka {
namespace {

using nlohmann::json;

// etcd's gateway writes int64 fields as strings and leaves out fields that are zero.
std::int64_t Int(const json& object, const char* field) {
  if (!object.is_object()) return 0;
  auto it = object.find(field);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

std::string Str(const json& object, const char* field) {
  if (!object.is_object()) return {};
  auto it = object.find(field);
  if (it == object.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

// The gateway answers a failed call with {"error": "...", "message": "...", "code": N}.
std::string ErrorText(const json& answer) {
  if (!answer.is_object()) return {};
  auto it = answer.find("error");
  if (it == answer.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return Str(*it, "message");
  return Str(answer, "message");
}

// The first key-value of the range response at `index` of a txn answer; null when none.
json FirstKv(const json& answer, std::size_t index) {
  const json& responses = answer.value("responses", json::array());
  if (responses.size() <= index) return json();
  const json& kvs =
      responses[index].value("response_range", json::object()).value("kvs", json::array());
  return kvs.empty() ? json() : kvs[0];
}

// The time left until `deadline`, at least 1 ms (a call with none left fails at once).
std::chrono::milliseconds Left(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// etcd's answer as a JSON object. Errors: kUnavailable, quoting the start of what came instead.
Result<json> ParseAnswer(const HostPort& from, const HttpResponse& r) {
  json answer = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_discarded() && answer.is_object()) return answer;
  std::string text = r.body.substr(0, 200);
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  // etcd 3.4.10+ refuses, on its JSON gateway, client certificates with a Common Name.
  const char* hint = r.body.find("CommonName") != std::string::npos
                         ? " (issue sekka's client certificate without a Common Name, and "
                           "authenticate with worker.username)"
                         : "";
  return Unavailable(fmt::format("{}: HTTP {} with a body that is not a JSON object: \"{}\"{}",
                                 from.Text(), r.status, text, hint));
}

// What this session knows of an id it claimed: the revisions its fenced writes compare.
struct Fence {
  std::int64_t lease = 0;           // the lease it was claimed on
  std::int64_t owner_revision = 0;  // the owner key's mod_revision, as this session wrote it
  std::int64_t hwm_known = 0;       // the hwm stored at etcd, as far as this session knows
  std::int64_t hwm_revision = 0;    // the hwm key's mod_revision that goes with it (0: none)
};

// An etcd session (backends/coordinator_sessions.h): one lease, granted on demand, the calls of
// its coordinators one at a time over one HTTP connection, and the releases of owner keys that
// could not be sent yet.
class EtcdSession {
 public:
  EtcdSession(std::vector<HostPort> endpoints, const WorkerLeaseOptions& options,
              CoordinatorAccess access)
      : endpoints_(std::move(endpoints)),
        ttl_(options.ttl),
        call_timeout_(options.call_timeout),
        access_(std::move(access)),
        http_(access_.tls) {}

  // POSTs to the endpoints in turn, starting with the last that answered. An answer with an
  // "error" object is returned as it is (the caller decides); no answer is kUnavailable.
  // `prefix`: the caller's keys, for messages.
  Result<json> Call(std::string_view path, const json& request, std::string_view prefix);
  // The session's lease, granted first when none is (the releases kept are sent then).
  // Errors: kUnavailable, kUnauthenticated.
  Result<std::int64_t> Lease();
  // The lease now; 0: none granted.
  std::int64_t lease() {
    std::lock_guard lock(mu_);
    return lease_;
  }
  // `lease` expired or was revoked: the next Lease() grants another.
  void LeaseGone(std::int64_t lease) {
    std::lock_guard lock(mu_);
    if (lease_ == lease) lease_ = 0;
  }
  // Revokes `lease` (best effort): every key attached to it goes.
  void Revoke(std::int64_t lease) {
    if (lease == 0) return;
    (void)Call("/v3/lease/revoke", {{"ID", std::to_string(lease)}}, "");
    LeaseGone(lease);
  }
  // An owner key a coordinator claimed (or may have: a claim whose answer was lost).
  struct Owned {
    std::int64_t lease = 0;
    std::string key;            // base64
    std::int64_t revision = 0;  // its mod_revision as claimed; 0: not known
    std::string identity;       // base64 of the claim's value
    // The claim's number in this session (ClaimLedger): a later claim of the key here takes it
    // over, and this one's release is then void.
    std::uint64_t claim = 0;
  };
  // Deletes `keys` where they are still the claims they name; those without an answer are kept
  // for the next Lease() or SendKept(). Returns how many were kept.
  std::size_t Release(std::vector<Owned> keys);
  // Sends the releases kept.
  void SendKept() {
    std::vector<Owned> kept;
    {
      std::lock_guard lock(mu_);
      kept.swap(kept_);
    }
    if (!kept.empty()) Release(std::move(kept));
  }
  // Claims of this session's owner keys, and the releases against them, one at a time (taken
  // before call_mu_).
  ClaimLedger& ledger() { return ledger_; }
  std::string Describe() const {
    return fmt::format("{}{}{}", endpoints_[current_].Text(),
                       access_.tls.enabled() ? " over TLS" : "",
                       access_.username.empty() ? "" : " as user " + access_.username);
  }

 private:
  struct Answer {
    long status = 0;
    json body;
  };
  // One call to one endpoint, authenticated when a user is set (once more with a new token
  // when etcd no longer knows the one sent), all of it within call_timeout_. Errors:
  // kUnavailable (no answer in time, an answer that is not JSON), kUnauthenticated
  // (authentication refused, or needed but not configured; permission denied).
  Result<Answer> CallOne(const HostPort& to, std::string_view path, const std::string& body,
                         std::string_view prefix);
  // Gets a token for access_.username from `to`, by `deadline`. Errors: kUnavailable,
  // kUnauthenticated.
  Status Authenticate(const HostPort& to, std::chrono::steady_clock::time_point deadline);
  // Deletes `owned` if it is still the claim it names: false when the call had no answer.
  bool ReleaseOne(const Owned& owned);

  const std::vector<HostPort> endpoints_;
  const std::chrono::milliseconds ttl_;
  const std::chrono::milliseconds call_timeout_;
  const CoordinatorAccess access_;
  std::mutex call_mu_;     // one call at a time: the HTTP client and the token below
  HttpClient http_;        // guarded by call_mu_
  std::string token_;      // guarded by call_mu_: the auth token for access_.username
  bool auth_off_ = false;  // guarded by call_mu_: etcd said authentication is not enabled
  std::atomic<std::size_t> current_{0};  // the endpoint that answered last
  std::mutex grant_mu_;                  // one grant at a time
  ClaimLedger ledger_;                   // by owner key (base64)
  std::mutex mu_;                        // held briefly
  std::int64_t lease_ = 0;               // guarded by mu_; 0: none granted
  std::vector<Owned> kept_;              // guarded by mu_: releases without an answer
};

Result<EtcdSession::Answer> EtcdSession::CallOne(const HostPort& to, std::string_view path,
                                                 const std::string& body, std::string_view prefix) {
  const auto deadline = std::chrono::steady_clock::now() + call_timeout_;
  for (int attempt = 0;; ++attempt) {
    if (!access_.username.empty() && token_.empty() && !auth_off_) {
      SEKKA_RETURN_IF_ERROR(Authenticate(to, deadline));
    }
    std::vector<std::string> headers;
    if (!token_.empty()) headers.push_back("Authorization: " + token_);
    SEKKA_ASSIGN_OR_RETURN(auto r, http_.Post(to, path, body, headers, Left(deadline)));
    SEKKA_ASSIGN_OR_RETURN(auto parsed, ParseAnswer(to, r));
    json answer = std::move(parsed);
    const std::string message = ErrorText(answer);
    if (message.find("invalid auth token") != std::string::npos ||
        message.find("user name is empty") != std::string::npos) {
      // Refused before it was applied: the call may be sent again with a new token.
      if (access_.username.empty()) {
        return Unauthenticated(fmt::format(
            "etcd at {} has authentication enabled: set worker.username and worker.password "
            "(or worker.password_file)",
            to.Text()));
      }
      if (attempt == 0) {
        token_.clear();
        auth_off_ = false;
        continue;
      }
      return Unauthenticated(fmt::format("etcd at {} refused a new token of user \"{}\": {}",
                                         to.Text(), access_.username, message));
    }
    if (message.find("permission denied") != std::string::npos) {
      return Unauthenticated(fmt::format(
          "etcd at {} denied {} to user \"{}\": grant it a role with readwrite permission on "
          "the key prefix {}",
          to.Text(), path, access_.username.empty() ? "(none)" : access_.username, prefix));
    }
    return Answer{r.status, std::move(answer)};
  }
}

Status EtcdSession::Authenticate(const HostPort& to,
                                 std::chrono::steady_clock::time_point deadline) {
  const std::string body = json{{"name", access_.username}, {"password", access_.password}}.dump();
  SEKKA_ASSIGN_OR_RETURN(auto r, http_.Post(to, "/v3/auth/authenticate", body, {}, Left(deadline)));
  SEKKA_ASSIGN_OR_RETURN(auto answer, ParseAnswer(to, r));
  const std::string message = ErrorText(answer);
  if (message.find("authentication is not enabled") != std::string::npos) {
    auth_off_ = true;  // nothing to send; a later "user name is empty" authenticates again
    return Status::Ok();
  }
  const std::string token = Str(answer, "token");
  if (token.empty() || token.find_first_of("\r\n") != std::string::npos) {
    return Unauthenticated(fmt::format(
        "etcd at {} refused user \"{}\": {}", to.Text(), access_.username,
        message.empty() ? fmt::format("HTTP {}, no token in the answer", r.status) : message));
  }
  token_ = token;
  return Status::Ok();
}

Result<json> EtcdSession::Call(std::string_view path, const json& request,
                               std::string_view prefix) {
  std::lock_guard lock(call_mu_);
  const std::string body = request.dump();
  std::string errors;
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    const std::size_t at = (current_ + i) % endpoints_.size();
    Result<Answer> r = CallOne(endpoints_[at], path, body, prefix);
    // Every member answers alike about users and permissions: no use asking the others.
    if (!r.ok() && r.error().code == ErrorCode::kUnauthenticated) return std::move(r).error();
    if (r.ok()) {
      // A member without a leader (or being stopped) cannot answer: try the next one.
      const std::string message = ErrorText(r->body);
      if (r->status >= 500 && message.find("not found") == std::string::npos) {
        errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", endpoints_[at].Text(),
                              message.empty() ? fmt::format("HTTP {}", r->status) : message);
        continue;
      }
      current_ = at;
      return std::move(r->body);
    }
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ", r.error().message);
  }
  // A member slower than the budget (a loaded machine, bcrypt on every login) counts as down.
  return Unavailable(fmt::format("etcd cannot be reached within {} ms per member: {}",
                                 call_timeout_.count(), errors));
}

Result<std::int64_t> EtcdSession::Lease() {
  std::int64_t lease = 0;
  {
    std::lock_guard grant(grant_mu_);
    lease = this->lease();
    if (lease == 0) {
      const std::int64_t ttl_s = std::max<std::int64_t>(1, (ttl_.count() + 999) / 1000);
      SEKKA_ASSIGN_OR_RETURN(auto g, Call("/v3/lease/grant", {{"TTL", ttl_s}}, ""));
      lease = Int(g, "ID");
      if (lease == 0) {
        return Unavailable(fmt::format("etcd did not grant a lease: {}", g.dump().substr(0, 200)));
      }
      std::lock_guard lock(mu_);
      lease_ = lease;
    }
  }
  SendKept();
  return lease;
}

std::size_t EtcdSession::Release(std::vector<Owned> keys) {
  std::vector<Owned> lost;
  {
    const std::unique_lock claims = ledger_.Lock();
    const std::int64_t live = lease();
    for (Owned& owned : keys) {
      if (owned.lease != live) continue;  // gone with its lease (or goes with its revocation)
      // After a later claim of the key in this session (that landed, or may have), it is that
      // claim's.
      if (!ledger_.Latest(owned.key, owned.claim)) continue;
      if (!ReleaseOne(owned)) lost.push_back(std::move(owned));
    }
  }
  const std::size_t kept = lost.size();
  std::lock_guard lock(mu_);
  for (Owned& owned : lost) kept_.push_back(std::move(owned));
  return kept;
}

bool EtcdSession::ReleaseOne(const Owned& owned) {
  // The key is deleted only while it is the claim's: at the revision the claim wrote (no later
  // write has it), or, for a claim whose answer was lost, on this lease with this identity.
  json compare = json::array();
  if (owned.revision != 0) {
    compare.push_back({{"key", owned.key},
                       {"result", "EQUAL"},
                       {"target", "MOD"},
                       {"mod_revision", std::to_string(owned.revision)}});
  } else {
    compare.push_back({{"key", owned.key},
                       {"result", "EQUAL"},
                       {"target", "LEASE"},
                       {"lease", std::to_string(owned.lease)}});
    compare.push_back(
        {{"key", owned.key}, {"result", "EQUAL"}, {"target", "VALUE"}, {"value", owned.identity}});
  }
  json txn = {{"compare", compare},
              {"success", {{{"request_delete_range", {{"key", owned.key}}}}}}};
  Result<json> r = Call("/v3/kv/txn", txn, "");
  return r.ok() && !r->contains("error");
}

class EtcdCoordinator final : public Coordinator {
 public:
  EtcdCoordinator(std::shared_ptr<EtcdSession> etcd, bool shared, std::string cluster,
                  WorkerLeaseOptions options)
      : etcd_(std::move(etcd)),
        shared_(shared),
        cluster_(std::move(cluster)),
        options_(std::move(options)),
        prefix_(fmt::format("sekka/{}/", cluster_)) {}
  // What it claimed is let go (Close): a shared lease goes on for the others.
  ~EtcdCoordinator() override {
    if (shared_) (void)Close();
  }

  Result<std::string> BindLayout(const std::string& layout) override;
  Result<std::map<std::int64_t, Holding>> ListHolders() override;
  std::int64_t session() const override { return etcd_->lease(); }
  bool Mine(std::int64_t id, const Holding& h) const override {
    auto it = claimed_.find(id);
    return it != claimed_.end() && IsClaim(h, it->second.lease, it->second.revision);
  }
  Result<std::int64_t> PeekHwm(std::int64_t id) override;
  Result<std::optional<std::int64_t>> Claim(std::int64_t id,
                                            const std::optional<Holding>& seen) override;
  Status KeepAlive(std::int64_t id) override;
  Status StoreHwm(std::int64_t id, std::int64_t hwm_millis) override;
  Status Close() override;
  std::string Describe() const override {
    return fmt::format("etcd lease {:x} on {} (cluster {})",
                       static_cast<std::uint64_t>(etcd_->lease()), etcd_->Describe(), cluster_);
  }
  std::string Where() const override { return "cluster " + cluster_; }
  std::string_view source() const override { return "etcd"; }
  Result<SharedDocument> ReadShared(std::string_view name) override;
  Result<bool> WriteShared(std::string_view name, std::string_view data,
                           std::int64_t version) override;

 private:
  Result<json> Call(std::string_view path, const json& request) {
    return etcd_->Call(path, request, prefix_);
  }
  std::string OwnerKey(std::int64_t id) const {
    return fmt::format("{}workers/{}/{}", prefix_, options_.datacenter_id, id);
  }
  std::string HwmKey(std::int64_t id) const {
    return fmt::format("{}hwm/{}/{}", prefix_, options_.datacenter_id, id);
  }
  // Claim's one try. Errors: as Claim's; kLeaseLost when etcd no longer knew the lease.
  Result<std::optional<std::int64_t>> ClaimOnce(std::int64_t id,
                                                const std::optional<Holding>& seen);
  // The ids of `lease` are gone (it expired or was revoked).
  void LeaseGone(std::int64_t lease) {
    etcd_->LeaseGone(lease);
    std::erase_if(fences_, [&](const auto& f) { return f.second.lease == lease; });
    std::erase_if(claimed_, [&](const auto& c) { return c.second.lease == lease; });
  }
  // The stored hwm of worker id `id` (base64 of decimal ms; "" = none stored = 0).
  // Errors: kInternal.
  Result<std::int64_t> ParseHwm(std::int64_t id, const std::string& base64) const;

  const std::shared_ptr<EtcdSession> etcd_;
  const bool shared_;  // the lease is others' too (else Close revokes it)
  const std::string cluster_;
  const WorkerLeaseOptions options_;
  const std::string prefix_;
  std::map<std::int64_t, Fence> fences_;  // the ids this coordinator claimed
  // The owner keys this coordinator's claims wrote (or may have: an answer lost), let go by
  // Close.
  std::map<std::int64_t, EtcdSession::Owned> claimed_;
};

Result<std::map<std::int64_t, Holding>> EtcdCoordinator::ListHolders() {
  SEKKA_RETURN_IF_ERROR(etcd_->Lease());
  const std::string dir = fmt::format("{}workers/{}/", prefix_, options_.datacenter_id);
  std::string end = dir;
  end.back() = static_cast<char>(end.back() + 1);  // the prefix's range end: '/' + 1
  SEKKA_ASSIGN_OR_RETURN(
      auto r, Call("/v3/kv/range", {{"key", Base64Encode(dir)}, {"range_end", Base64Encode(end)}}));
  if (r.contains("error")) {
    return Unavailable(fmt::format("etcd range failed: {}", ErrorText(r)));
  }
  std::map<std::int64_t, Holding> holders;
  for (const json& kv : r.value("kvs", json::array())) {
    Result<std::string> key = Base64Decode(Str(kv, "key"));
    Result<std::string> value = Base64Decode(Str(kv, "value"));
    if (!key.ok() || !value.ok() || key->size() <= dir.size()) continue;
    std::int64_t id = -1;
    try {
      id = std::stoll(key->substr(dir.size()));
    } catch (...) {
      continue;
    }
    holders[id] = Holding{*value, Int(kv, "lease"), Int(kv, "mod_revision")};
  }
  return holders;
}

Result<std::int64_t> EtcdCoordinator::PeekHwm(std::int64_t id) {
  SEKKA_ASSIGN_OR_RETURN(auto r, Call("/v3/kv/range", {{"key", Base64Encode(HwmKey(id))}}));
  if (r.contains("error")) return Unavailable(fmt::format("etcd range failed: {}", ErrorText(r)));
  const json& kvs = r.value("kvs", json::array());
  return ParseHwm(id, kvs.empty() ? "" : Str(kvs[0], "value"));
}

Result<std::string> EtcdCoordinator::BindLayout(const std::string& layout) {
  const std::string key = Base64Encode(prefix_ + "layout");
  json txn = {
      {"compare",
       {{{"key", key}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}}}},
      {"success", {{{"request_put", {{"key", key}, {"value", Base64Encode(layout)}}}}}},
      {"failure", {{{"request_range", {{"key", key}}}}}}};
  SEKKA_ASSIGN_OR_RETURN(auto r, Call("/v3/kv/txn", txn));
  if (r.contains("error")) return Unavailable(fmt::format("etcd txn failed: {}", ErrorText(r)));
  if (r.value("succeeded", false)) return layout;
  const json kv = FirstKv(r, 0);
  Result<std::string> value = Base64Decode(kv.is_null() ? "" : Str(kv, "value"));
  if (!value.ok()) return Internal("etcd key " + prefix_ + "layout: " + value.error().message);
  return *value;
}

Result<std::optional<std::int64_t>> EtcdCoordinator::Claim(std::int64_t id,
                                                           const std::optional<Holding>& seen) {
  // A shared lease that expired while no coordinator renewed it (lookups only) is granted
  // again once, rather than failing a takeover.
  Result<std::optional<std::int64_t>> claimed = ClaimOnce(id, seen);
  if (claimed.ok() || claimed.error().code != ErrorCode::kLeaseLost) return claimed;
  claimed = ClaimOnce(id, seen);
  if (claimed.ok() || claimed.error().code != ErrorCode::kLeaseLost) return claimed;
  return Unavailable(claimed.error().message);
}

Result<std::optional<std::int64_t>> EtcdCoordinator::ClaimOnce(std::int64_t id,
                                                               const std::optional<Holding>& seen) {
  SEKKA_ASSIGN_OR_RETURN(auto lease, etcd_->Lease());
  // The owner key must not exist, or must still be as listed (this identity's earlier run); the
  // hwm is read in the same transaction (promise 1 of include/sekka/coordinator.h).
  const std::string key = Base64Encode(OwnerKey(id));
  json compare = {{"key", key}, {"result", "EQUAL"}};
  if (seen.has_value()) {
    compare["target"] = "MOD";
    compare["mod_revision"] = std::to_string(seen->version);
  } else {
    compare["target"] = "CREATE";
    compare["create_revision"] = "0";
  }
  json txn = {{"compare", json::array({compare})},
              {"success",
               {{{"request_put",
                  {{"key", key},
                   {"value", Base64Encode(options_.identity)},
                   {"lease", std::to_string(lease)}}}},
                {{"request_range", {{"key", Base64Encode(HwmKey(id))}}}}}}};
  // Kept before the answer, which may be lost: Close lets go of what landed.
  std::optional<EtcdSession::Owned> before;
  if (auto it = claimed_.find(id); it != claimed_.end()) before = it->second;
  EtcdSession::Owned& owned = claimed_[id];
  owned = EtcdSession::Owned{lease, key, 0, Base64Encode(options_.identity)};
  std::uint64_t previous = 0;
  Result<json> answer = Internal("not sent");
  {
    const std::unique_lock step = etcd_->ledger().Begin(key, owned.claim, previous);
    answer = Call("/v3/kv/txn", txn);
  }
  if (!answer.ok()) return std::move(answer).error();
  const json& r = *answer;
  if (r.contains("error") || !r.value("succeeded", false)) {  // nothing landed
    etcd_->ledger().Undo(key, owned.claim, previous);
    if (before) {
      claimed_[id] = *before;
    } else {
      claimed_.erase(id);
    }
  }
  if (r.contains("error")) {
    const std::string error = ErrorText(r);
    if (error.find("lease not found") != std::string::npos) {
      LeaseGone(lease);  // it expired meanwhile: the next call grants a new one
      return LeaseLost(fmt::format("etcd txn failed: {}", error));
    }
    return Unavailable(fmt::format("etcd txn failed: {}", error));
  }
  if (!r.value("succeeded", false)) return std::optional<std::int64_t>();
  const std::int64_t revision = Int(r["header"], "revision");
  claimed_[id].revision = revision;
  const json stored = FirstKv(r, 1);
  SEKKA_ASSIGN_OR_RETURN(auto hwm, ParseHwm(id, stored.is_null() ? "" : Str(stored, "value")));
  fences_[id] = Fence{lease, revision, hwm, stored.is_null() ? 0 : Int(stored, "mod_revision")};
  // The earlier run's lease (never this session's own, which other coordinators may share).
  if (seen.has_value() && seen->session != lease) etcd_->Revoke(seen->session);
  return std::optional<std::int64_t>(hwm);
}

Status EtcdCoordinator::KeepAlive(std::int64_t id) {
  auto fence = fences_.find(id);
  if (fence == fences_.end()) return LeaseLost("no worker id is held");
  const std::int64_t lease = fence->second.lease;
  if (lease != etcd_->lease()) {  // another coordinator of the session saw it end
    LeaseGone(lease);
    return LeaseLost(fmt::format("the etcd lease of worker id {} expired or was revoked", id));
  }
  SEKKA_ASSIGN_OR_RETURN(auto r, Call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}));
  // An answer that is an error ("etcdserver: no leader", a gateway timeout) says nothing about
  // the lease: only a result with TTL 0 means it is gone.
  if (r.contains("error") || !r.contains("result") || !(r)["result"].is_object()) {
    const std::string error = ErrorText(r);
    return Unavailable(
        fmt::format("etcd keepalive failed: {}", error.empty() ? r.dump().substr(0, 200) : error));
  }
  const json& result = (r)["result"];
  if (Int(result, "TTL") <= 0) {
    LeaseGone(lease);
    return LeaseLost(fmt::format("the etcd lease of worker id {} expired or was revoked", id));
  }
  // The lease lives; the owner key must still be this claim's (a lease shared by several
  // coordinators outlives a takeover of one of its keys).
  SEKKA_ASSIGN_OR_RETURN(auto owner, Call("/v3/kv/range", {{"key", Base64Encode(OwnerKey(id))}}));
  if (owner.contains("error")) {
    return Unavailable(fmt::format("etcd range failed: {}", ErrorText(owner)));
  }
  const json& kvs = owner.value("kvs", json::array());
  if (kvs.empty() || Int(kvs[0], "mod_revision") != fence->second.owner_revision ||
      Int(kvs[0], "lease") != lease) {
    fences_.erase(fence);
    return LeaseLost(
        fmt::format("worker id {} is no longer held by this process's etcd lease", id));
  }
  etcd_->SendKept();  // a server that only renews sends them too
  return Status::Ok();
}

Status EtcdCoordinator::StoreHwm(std::int64_t id, std::int64_t hwm_millis) {
  auto it = fences_.find(id);
  if (it == fences_.end()) return LeaseLost("no worker id is held");
  Fence& f = it->second;
  // Read-max-write, fenced twice: the owner key must still be the one this session wrote, and
  // the hwm key must be as this session last saw it. A write that timed out but landed changes
  // the hwm key's revision: the compare fails, the failure branch reads both keys back, and the
  // next try starts from what is really stored, so the stored value can only go up.
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (hwm_millis <= f.hwm_known) return Status::Ok();
    json txn = {{"compare",
                 {{{"key", Base64Encode(OwnerKey(id))},
                   {"result", "EQUAL"},
                   {"target", "MOD"},
                   {"mod_revision", std::to_string(f.owner_revision)}},
                  {{"key", Base64Encode(HwmKey(id))},
                   {"result", "EQUAL"},
                   {"target", "MOD"},
                   {"mod_revision", std::to_string(f.hwm_revision)}}}},
                {"success",
                 {{{"request_put",
                    {{"key", Base64Encode(HwmKey(id))},
                     {"value", Base64Encode(std::to_string(hwm_millis))}}}}}},
                {"failure",
                 {{{"request_range", {{"key", Base64Encode(OwnerKey(id))}}}},
                  {{"request_range", {{"key", Base64Encode(HwmKey(id))}}}}}}};
    SEKKA_ASSIGN_OR_RETURN(auto r, Call("/v3/kv/txn", txn));
    if (r.contains("error")) return Unavailable(fmt::format("etcd txn failed: {}", ErrorText(r)));
    if (r.value("succeeded", false)) {
      f.hwm_known = hwm_millis;
      f.hwm_revision = Int((r)["header"], "revision");
      return Status::Ok();
    }
    const json owner = FirstKv(r, 0);
    if (owner.is_null() || Int(owner, "mod_revision") != f.owner_revision) break;  // not ours
    const json hwm = FirstKv(r, 1);
    SEKKA_ASSIGN_OR_RETURN(auto stored, ParseHwm(id, hwm.is_null() ? "" : Str(hwm, "value")));
    f.hwm_known = std::max(f.hwm_known, stored);
    f.hwm_revision = hwm.is_null() ? 0 : Int(hwm, "mod_revision");
  }
  if (hwm_millis <= f.hwm_known) return Status::Ok();
  fences_.erase(it);
  return LeaseLost(fmt::format(
      "worker id {} is no longer held by this process's etcd lease (expired, revoked or taken "
      "over)",
      id));
}

Result<std::int64_t> EtcdCoordinator::ParseHwm(std::int64_t id, const std::string& base64) const {
  if (base64.empty()) return 0;
  Result<std::string> v = Base64Decode(base64);
  std::int64_t hwm = -1;
  if (v.ok()) {
    const auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), hwm);
    if (ec != std::errc() || ptr != v->data() + v->size()) hwm = -1;
  }
  if (hwm < 0) {
    return Internal(fmt::format("etcd key {} holds \"{}\", not a number of ms", HwmKey(id),
                                v.ok() ? v->substr(0, 40) : base64.substr(0, 40)));
  }
  return hwm;
}

// A document is the key shared/<name>; its version is the key's mod_revision, which etcd
// compares as 0 for a key that does not exist.
Result<SharedDocument> EtcdCoordinator::ReadShared(std::string_view name) {
  SEKKA_ASSIGN_OR_RETURN(
      auto r,
      Call("/v3/kv/range", {{"key", Base64Encode(prefix_ + "shared/" + std::string(name))}}));
  if (r.contains("error")) return Unavailable(fmt::format("etcd range failed: {}", ErrorText(r)));
  const json& kvs = r.value("kvs", json::array());
  if (kvs.empty()) return SharedDocument{};
  Result<std::string> value = Base64Decode(Str(kvs[0], "value"));
  if (!value.ok())
    return Internal(fmt::format("etcd key {}shared/{}: {}", prefix_, name, value.error().message));
  return SharedDocument{std::move(value).value(), Int(kvs[0], "mod_revision")};
}

Result<bool> EtcdCoordinator::WriteShared(std::string_view name, std::string_view data,
                                          std::int64_t version) {
  SEKKA_RETURN_IF_ERROR(CheckSharedSize(name, data.size()));
  const std::string key = Base64Encode(prefix_ + "shared/" + std::string(name));
  json txn = {{"compare",
               {{{"key", key},
                 {"result", "EQUAL"},
                 {"target", "MOD"},
                 {"mod_revision", std::to_string(version)}}}},
              {"success", {{{"request_put", {{"key", key}, {"value", Base64Encode(data)}}}}}}};
  SEKKA_ASSIGN_OR_RETURN(auto r, Call("/v3/kv/txn", txn));
  if (r.contains("error")) return Unavailable(fmt::format("etcd txn failed: {}", ErrorText(r)));
  return r.value("succeeded", false);
}

Status EtcdCoordinator::Close() {
  if (!shared_) {  // a lease of its own: revoked, every key on it goes
    const std::int64_t lease = etcd_->lease();
    if (lease != 0) {
      SEKKA_RETURN_IF_ERROR(Call("/v3/lease/revoke", {{"ID", std::to_string(lease)}}));
      etcd_->LeaseGone(lease);
    }
    fences_.clear();
    claimed_.clear();
    return Status::Ok();
  }
  fences_.clear();
  // A shared lease goes on: each owner key this coordinator wrote is deleted while it is still
  // that claim's (EtcdSession::Release); one without an answer goes with the session's next
  // call.
  std::vector<EtcdSession::Owned> keys;
  for (auto& [id, owned] : claimed_) keys.push_back(std::move(owned));
  claimed_.clear();
  if (!keys.empty()) etcd_->Release(std::move(keys));
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Coordinator>> NewEtcdCoordinator(std::string_view endpoints,
                                                        std::string_view cluster,
                                                        const WorkerLeaseOptions& options,
                                                        const CoordinatorAccess& access,
                                                        CoordinatorSessions* sessions) {
  SEKKA_ASSIGN_OR_RETURN(auto e, ParseHostPorts(endpoints, "etcd endpoints"));
  SEKKA_RETURN_IF_ERROR(ValidateClusterName(cluster));
  const TlsSettings& tls = access.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return InvalidArgument(
        "worker.tls_cert_file and worker.tls_key_file go together: set both or neither");
  }
  if (!tls.cert_file.empty() && !tls.enabled()) {
    return InvalidArgument(
        "worker.tls_cert_file needs worker.tls_ca_file (a CA file, or \"system\"): a client "
        "certificate is sent over TLS only");
  }
  auto readable = [](const char* key, const std::string& file) -> Status {
    if (file.empty() || ::access(file.c_str(), R_OK) == 0) return Status::Ok();
    return InvalidArgument(
        fmt::format("{} \"{}\" cannot be read: {}", key, file, std::strerror(errno)));
  };
  if (tls.ca_file != "system") {
    SEKKA_RETURN_IF_ERROR(readable("worker.tls_ca_file", tls.ca_file));
  }
  SEKKA_RETURN_IF_ERROR(readable("worker.tls_cert_file", tls.cert_file));
  SEKKA_RETURN_IF_ERROR(readable("worker.tls_key_file", tls.key_file));
  if (access.username.empty() && !access.password.empty()) {
    return InvalidArgument("a worker.password without worker.username: set the etcd user too");
  }
  std::function<std::shared_ptr<EtcdSession>()> make = [&] {
    return std::make_shared<EtcdSession>(e, options, access);
  };
  std::shared_ptr<EtcdSession> etcd =
      sessions == nullptr
          ? make()
          : sessions->Get(
                fmt::format("etcd\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", endpoints, tls.ca_file,
                            tls.cert_file, tls.key_file, access.username, access.password,
                            options.ttl.count(), options.call_timeout.count()),
                make);
  return std::unique_ptr<Coordinator>(std::make_unique<EtcdCoordinator>(
      std::move(etcd), sessions != nullptr, std::string(cluster), options));
}

}  // namespace sekka
