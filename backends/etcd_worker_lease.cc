#include "backends/etcd_worker_lease.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "backends/http_client.h"
#include "sekka/codec.h"

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

struct Owner {
  std::string identity;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

class EtcdLease final : public WorkerLease {
 public:
  EtcdLease(std::vector<HostPort> endpoints, std::string cluster, WorkerLeaseOptions options,
            CoordinatorAccess access)
      : endpoints_(std::move(endpoints)),
        cluster_(std::move(cluster)),
        options_(std::move(options)),
        access_(std::move(access)),
        prefix_(fmt::format("sekka/{}/", cluster_)),
        http_(access_.tls) {}

  Result<LeaseGrant> Acquire() override;
  Status Renew() override;
  Status StoreHwm(std::int64_t hwm_millis) override;
  Status Release() override;
  std::string Describe() const override {
    return fmt::format("etcd lease {:x} on {}{}{} (cluster {})", static_cast<std::uint64_t>(lease_),
                       endpoints_[current_].Text(), access_.tls.enabled() ? " over TLS" : "",
                       access_.username.empty() ? "" : " as user " + access_.username, cluster_);
  }
  std::string_view source() const override { return "etcd"; }

 private:
  // POSTs to the endpoints in turn, starting with the last that answered. An answer with an
  // "error" object is returned as it is (the caller decides); no answer is kUnavailable.
  Result<json> Call(std::string_view path, const json& request);
  struct Answer {
    long status = 0;
    json body;
  };
  // One call to one endpoint, authenticated when a user is set (once more with a new token
  // when etcd no longer knows the one sent), all of it within options_.call_timeout. Errors:
  // kUnavailable (no answer in time, an answer that is not JSON), kUnauthenticated
  // (authentication refused, or needed but not configured; permission denied).
  Result<Answer> CallOne(const HostPort& to, std::string_view path, const std::string& body);
  // Gets a token for access_.username from `to`, by `deadline`. Errors: kUnavailable,
  // kUnauthenticated.
  Status Authenticate(const HostPort& to, std::chrono::steady_clock::time_point deadline);
  std::string OwnerKey(std::int64_t id) const {
    return fmt::format("{}workers/{}/{}", prefix_, options_.datacenter_id, id);
  }
  std::string HwmKey(std::int64_t id) const {
    return fmt::format("{}hwm/{}/{}", prefix_, options_.datacenter_id, id);
  }
  Result<std::map<std::int64_t, Owner>> ListOwners();
  void Revoke(std::int64_t lease);
  // Binds the cluster to options_.layout if nothing is bound yet, and checks the bound one
  // (CheckClusterLayout). Errors: kInvalidArgument (another layout), kUnavailable.
  Status BindLayout();
  // The stored hwm of worker id `id` (base64 of decimal ms; "" = none stored = 0).
  // Errors: kInternal.
  Result<std::int64_t> ParseHwm(std::int64_t id, const std::string& base64) const;

  const std::vector<HostPort> endpoints_;
  const std::string cluster_;
  const WorkerLeaseOptions options_;
  const CoordinatorAccess access_;
  const std::string prefix_;
  HttpClient http_;
  std::string token_;      // etcd's auth token for access_.username; "" = none yet
  bool auth_off_ = false;  // etcd said authentication is not enabled: send no token
  std::size_t current_ = 0;
  bool layout_bound_ = false;        // BindLayout succeeded once
  std::int64_t lease_ = 0;           // 0: none granted
  std::int64_t held_ = -1;           // the worker id held
  std::int64_t owner_revision_ = 0;  // the owner key's mod_revision, as this lease wrote it
  std::int64_t hwm_known_ = 0;       // the hwm stored at etcd, as far as this lease knows
  std::int64_t hwm_revision_ = 0;    // the hwm key's mod_revision that goes with it (0: none)
};

Result<EtcdLease::Answer> EtcdLease::CallOne(const HostPort& to, std::string_view path,
                                             const std::string& body) {
  const auto deadline = std::chrono::steady_clock::now() + options_.call_timeout;
  for (int attempt = 0;; ++attempt) {
    if (!access_.username.empty() && token_.empty() && !auth_off_) {
      if (Status s = Authenticate(to, deadline); !s.ok()) return std::move(s).error();
    }
    std::vector<std::string> headers;
    if (!token_.empty()) headers.push_back("Authorization: " + token_);
    Result<HttpResponse> r = http_.Post(to, path, body, headers, Left(deadline));
    if (!r.ok()) return std::move(r).error();
    Result<json> parsed = ParseAnswer(to, *r);
    if (!parsed.ok()) return std::move(parsed).error();
    json answer = std::move(parsed).value();
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
          to.Text(), path, access_.username.empty() ? "(none)" : access_.username, prefix_));
    }
    return Answer{r->status, std::move(answer)};
  }
}

Status EtcdLease::Authenticate(const HostPort& to, std::chrono::steady_clock::time_point deadline) {
  const std::string body = json{{"name", access_.username}, {"password", access_.password}}.dump();
  Result<HttpResponse> r = http_.Post(to, "/v3/auth/authenticate", body, {}, Left(deadline));
  if (!r.ok()) return std::move(r).error();
  Result<json> answer = ParseAnswer(to, *r);
  if (!answer.ok()) return std::move(answer).error();
  const std::string message = ErrorText(*answer);
  if (message.find("authentication is not enabled") != std::string::npos) {
    auth_off_ = true;  // nothing to send; a later "user name is empty" authenticates again
    return Status::Ok();
  }
  const std::string token = Str(*answer, "token");
  if (token.empty() || token.find_first_of("\r\n") != std::string::npos) {
    return Unauthenticated(fmt::format(
        "etcd at {} refused user \"{}\": {}", to.Text(), access_.username,
        message.empty() ? fmt::format("HTTP {}, no token in the answer", r->status) : message));
  }
  token_ = token;
  return Status::Ok();
}

Result<json> EtcdLease::Call(std::string_view path, const json& request) {
  const std::string body = request.dump();
  std::string errors;
  for (std::size_t i = 0; i < endpoints_.size(); ++i) {
    const std::size_t at = (current_ + i) % endpoints_.size();
    Result<Answer> r = CallOne(endpoints_[at], path, body);
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
                                 options_.call_timeout.count(), errors));
}

Result<std::map<std::int64_t, Owner>> EtcdLease::ListOwners() {
  const std::string dir = fmt::format("{}workers/{}/", prefix_, options_.datacenter_id);
  std::string end = dir;
  end.back() = static_cast<char>(end.back() + 1);  // the prefix's range end: '/' + 1
  Result<json> r =
      Call("/v3/kv/range", {{"key", Base64Encode(dir)}, {"range_end", Base64Encode(end)}});
  if (!r.ok()) return std::move(r).error();
  if (r->contains("error")) {
    return Unavailable(fmt::format("etcd range failed: {}", ErrorText(*r)));
  }
  std::map<std::int64_t, Owner> owners;
  for (const json& kv : r->value("kvs", json::array())) {
    Result<std::string> key = Base64Decode(Str(kv, "key"));
    Result<std::string> value = Base64Decode(Str(kv, "value"));
    if (!key.ok() || !value.ok() || key->size() <= dir.size()) continue;
    std::int64_t id = -1;
    try {
      id = std::stoll(key->substr(dir.size()));
    } catch (...) {
      continue;
    }
    owners[id] = Owner{*value, Int(kv, "mod_revision"), Int(kv, "lease")};
  }
  return owners;
}

void EtcdLease::Revoke(std::int64_t lease) {
  if (lease == 0) return;
  (void)Call("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
}

Status EtcdLease::BindLayout() {
  if (layout_bound_ || options_.layout.empty()) return Status::Ok();
  const std::string key = Base64Encode(prefix_ + "layout");
  json txn = {
      {"compare",
       {{{"key", key}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}}}},
      {"success", {{{"request_put", {{"key", key}, {"value", Base64Encode(options_.layout)}}}}}},
      {"failure", {{{"request_range", {{"key", key}}}}}}};
  Result<json> r = Call("/v3/kv/txn", txn);
  if (!r.ok()) return std::move(r).error();
  if (r->contains("error")) return Unavailable(fmt::format("etcd txn failed: {}", ErrorText(*r)));
  std::string bound = options_.layout;
  if (!r->value("succeeded", false)) {
    const json kv = FirstKv(*r, 0);
    Result<std::string> value = Base64Decode(kv.is_null() ? "" : Str(kv, "value"));
    if (!value.ok()) return Internal("etcd key " + prefix_ + "layout: " + value.error().message);
    bound = *value;
  }
  if (Status s = CheckClusterLayout(cluster_, bound, options_.layout); !s.ok()) return s;
  layout_bound_ = true;
  return Status::Ok();
}

Result<LeaseGrant> EtcdLease::Acquire() {
  if (options_.identity.empty()) return InvalidArgument("the lease identity must not be empty");
  if (held_ >= 0) return LeaseGrant{options_.datacenter_id, held_, hwm_known_};
  if (Status s = BindLayout(); !s.ok()) return std::move(s).error();
  if (lease_ == 0) {
    const std::int64_t ttl_s = std::max<std::int64_t>(1, (options_.ttl.count() + 999) / 1000);
    Result<json> g = Call("/v3/lease/grant", {{"TTL", ttl_s}});
    if (!g.ok()) return std::move(g).error();
    lease_ = Int(*g, "ID");
    if (lease_ == 0) {
      return Unavailable(fmt::format("etcd did not grant a lease: {}", g->dump().substr(0, 200)));
    }
  }
  for (int pass = 0; pass < 8; ++pass) {
    Result<std::map<std::int64_t, Owner>> owners = ListOwners();
    if (!owners.ok()) return std::move(owners).error();
    // The core's order (WorkerIdCandidates); a pass that finds them all taken meanwhile lists
    // again.
    std::map<std::int64_t, bool> holders;
    for (const auto& [id, owner] : *owners) {
      holders[id] = owner.identity == options_.identity || owner.lease == lease_;
    }
    const std::vector<std::int64_t> order =
        WorkerIdCandidates(holders, options_.preferred, options_.worker_count);
    if (order.empty()) break;
    for (std::int64_t id : order) {
      auto it = owners->find(id);
      json compare = json::array();
      if (it == owners->end()) {
        compare.push_back({{"key", Base64Encode(OwnerKey(id))},
                           {"result", "EQUAL"},
                           {"target", "CREATE"},
                           {"create_revision", "0"}});
      } else {
        compare.push_back({{"key", Base64Encode(OwnerKey(id))},
                           {"result", "EQUAL"},
                           {"target", "MOD"},
                           {"mod_revision", std::to_string(it->second.mod_revision)}});
      }
      json txn = {{"compare", compare},
                  {"success",
                   {{{"request_put",
                      {{"key", Base64Encode(OwnerKey(id))},
                       {"value", Base64Encode(options_.identity)},
                       {"lease", std::to_string(lease_)}}}},
                    {{"request_range", {{"key", Base64Encode(HwmKey(id))}}}}}}};
      Result<json> r = Call("/v3/kv/txn", txn);
      if (!r.ok()) return std::move(r).error();
      if (r->contains("error")) {
        const std::string error = ErrorText(*r);
        if (error.find("lease not found") != std::string::npos) {
          lease_ = 0;  // it expired meanwhile: the next Acquire grants a new one
        }
        return Unavailable(fmt::format("etcd txn failed: {}", error));
      }
      if (!r->value("succeeded", false)) continue;  // taken meanwhile: the next candidate
      owner_revision_ = Int((*r)["header"], "revision");
      const json stored = FirstKv(*r, 1);
      Result<std::int64_t> hwm = ParseHwm(id, stored.is_null() ? "" : Str(stored, "value"));
      if (!hwm.ok()) return std::move(hwm).error();
      hwm_revision_ = stored.is_null() ? 0 : Int(stored, "mod_revision");
      hwm_known_ = *hwm;
      if (it != owners->end() && it->second.lease != lease_)
        Revoke(it->second.lease);  // the earlier run's
      held_ = id;
      return LeaseGrant{options_.datacenter_id, id, *hwm};
    }
  }
  Revoke(lease_);
  lease_ = 0;
  return Exhausted(fmt::format(
      "no free worker id: all {} worker ids of datacenter {} in cluster {} are held by live "
      "leases at etcd; raise the layout's worker bits or stop a holder",
      options_.worker_count, options_.datacenter_id, cluster_));
}

Status EtcdLease::Renew() {
  if (held_ < 0 || lease_ == 0) return LeaseLost("no worker id is held");
  Result<json> r = Call("/v3/lease/keepalive", {{"ID", std::to_string(lease_)}});
  if (!r.ok()) return std::move(r).error();
  // An answer that is an error ("etcdserver: no leader", a gateway timeout) says nothing about
  // the lease: only a result with TTL 0 means it is gone.
  if (r->contains("error") || !r->contains("result") || !(*r)["result"].is_object()) {
    const std::string error = ErrorText(*r);
    return Unavailable(
        fmt::format("etcd keepalive failed: {}", error.empty() ? r->dump().substr(0, 200) : error));
  }
  const json& result = (*r)["result"];
  if (Int(result, "TTL") > 0) return Status::Ok();
  const std::int64_t id = held_;
  held_ = -1;
  lease_ = 0;
  return LeaseLost(fmt::format("the etcd lease of worker id {} expired or was revoked", id));
}

Status EtcdLease::StoreHwm(std::int64_t hwm_millis) {
  if (held_ < 0) return LeaseLost("no worker id is held");
  // Read-max-write, fenced twice: the owner key must still be the one this lease wrote, and the
  // hwm key must be as this lease last saw it. A write that timed out but landed changes the
  // hwm key's revision: the compare fails, the failure branch reads both keys back, and the
  // next try starts from what is really stored, so the stored value can only go up.
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (hwm_millis <= hwm_known_) return Status::Ok();
    json txn = {{"compare",
                 {{{"key", Base64Encode(OwnerKey(held_))},
                   {"result", "EQUAL"},
                   {"target", "MOD"},
                   {"mod_revision", std::to_string(owner_revision_)}},
                  {{"key", Base64Encode(HwmKey(held_))},
                   {"result", "EQUAL"},
                   {"target", "MOD"},
                   {"mod_revision", std::to_string(hwm_revision_)}}}},
                {"success",
                 {{{"request_put",
                    {{"key", Base64Encode(HwmKey(held_))},
                     {"value", Base64Encode(std::to_string(hwm_millis))}}}}}},
                {"failure",
                 {{{"request_range", {{"key", Base64Encode(OwnerKey(held_))}}}},
                  {{"request_range", {{"key", Base64Encode(HwmKey(held_))}}}}}}};
    Result<json> r = Call("/v3/kv/txn", txn);
    if (!r.ok()) return std::move(r).error();
    if (r->contains("error")) return Unavailable(fmt::format("etcd txn failed: {}", ErrorText(*r)));
    if (r->value("succeeded", false)) {
      hwm_known_ = hwm_millis;
      hwm_revision_ = Int((*r)["header"], "revision");
      return Status::Ok();
    }
    const json owner = FirstKv(*r, 0);
    if (owner.is_null() || Int(owner, "mod_revision") != owner_revision_) break;  // not ours
    const json hwm = FirstKv(*r, 1);
    Result<std::int64_t> stored = ParseHwm(held_, hwm.is_null() ? "" : Str(hwm, "value"));
    if (!stored.ok()) return std::move(stored).error();
    hwm_known_ = std::max(hwm_known_, *stored);
    hwm_revision_ = hwm.is_null() ? 0 : Int(hwm, "mod_revision");
  }
  if (hwm_millis <= hwm_known_) return Status::Ok();
  const std::int64_t id = held_;
  held_ = -1;
  Revoke(lease_);  // whatever is left of it: the next Acquire starts with a new lease
  lease_ = 0;
  return LeaseLost(fmt::format(
      "worker id {} is no longer held by this process's etcd lease (expired, revoked or taken "
      "over)",
      id));
}

Result<std::int64_t> EtcdLease::ParseHwm(std::int64_t id, const std::string& base64) const {
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

Status EtcdLease::Release() {
  if (lease_ == 0) {
    held_ = -1;
    return Status::Ok();
  }
  Result<json> r = Call("/v3/lease/revoke", {{"ID", std::to_string(lease_)}});
  if (!r.ok()) return std::move(r).error();
  held_ = -1;
  lease_ = 0;
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<WorkerLease>> NewEtcdWorkerLease(std::string_view endpoints,
                                                        std::string_view cluster,
                                                        const WorkerLeaseOptions& options,
                                                        const CoordinatorAccess& access) {
  Result<std::vector<HostPort>> e = ParseHostPorts(endpoints, "etcd endpoints");
  if (!e.ok()) return std::move(e).error();
  if (Status s = ValidateClusterName(cluster); !s.ok()) return std::move(s).error();
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
    if (Status s = readable("worker.tls_ca_file", tls.ca_file); !s.ok())
      return std::move(s).error();
  }
  if (Status s = readable("worker.tls_cert_file", tls.cert_file); !s.ok()) {
    return std::move(s).error();
  }
  if (Status s = readable("worker.tls_key_file", tls.key_file); !s.ok())
    return std::move(s).error();
  if (access.username.empty() && !access.password.empty()) {
    return InvalidArgument("a worker.password without worker.username: set the etcd user too");
  }
  return std::unique_ptr<WorkerLease>(
      std::make_unique<EtcdLease>(std::move(e).value(), std::string(cluster), options, access));
}

}  // namespace sekka
