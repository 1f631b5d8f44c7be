// The C++ client's conformance driver (tests/conformance/PROTOCOL.md): JSON requests on stdin,
// one JSON reply a line on stdout.

#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sekka/client.h"

namespace {

using nlohmann::json;

// The kind of `error`. The client refuses its own arguments with kInvalidArgument before any
// network, and passes a server's refusal on with the same code, so `argument` tells them apart.
std::string Kind(const sekka::Error& error, bool argument) {
  switch (error.code) {
    case sekka::ErrorCode::kUnauthenticated:
      return "auth";
    case sekka::ErrorCode::kCancelled:
      return "closed";
    case sekka::ErrorCode::kUnavailable:
      return "no_server";
    case sekka::ErrorCode::kInvalidArgument:
    case sekka::ErrorCode::kNotFound:
      return argument ? "invalid_argument" : "refused";
    default:
      return "other:" + std::string(sekka::ErrorCodeName(error.code));
  }
}

json ErrorReply(const sekka::Error& error, bool argument) {
  return {{"error", Kind(error, argument)}, {"message", error.message}};
}

sekka::Result<std::unique_ptr<sekka::Client>> Open(const json& req) {
  sekka::ClientOptions o;
  const std::string servers = req.at("servers");
  for (std::size_t at = 0;;) {
    const std::size_t comma = servers.find(',', at);
    o.servers.push_back(servers.substr(at, comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (servers.empty()) o.servers.clear();
  const json& opt = req.at("options");
  // A fraction cannot reach a whole-number option in C++: refused here, as a compiler would.
  for (const auto& [key, value] : opt.items()) {
    if (!value.is_string() && key != "low_water" && !value.is_number_integer()) {
      return sekka::InvalidArgument(key + " = " + value.dump() + ": not a whole number");
    }
  }
  const auto ms = [&](const char* key, std::chrono::milliseconds& field) {
    if (opt.contains(key)) field = std::chrono::milliseconds(opt.at(key).get<std::int64_t>());
  };
  const auto size = [&](const char* key, std::size_t& field) {
    // A negative size reaches the client as a huge one, which it refuses as out of order.
    if (opt.contains(key)) field = static_cast<std::size_t>(opt.at(key).get<std::int64_t>());
  };
  if (opt.contains("token")) o.token = opt.at("token");
  for (auto [key, field] :
       {std::pair{"tls_ca_file", &o.tls_ca_file}, std::pair{"tls_cert_file", &o.tls_cert_file},
        std::pair{"tls_key_file", &o.tls_key_file}}) {
    if (opt.contains(key)) *field = opt.at(key);
  }
  ms("connect_timeout_ms", o.connect_timeout);
  ms("timeout_ms", o.timeout);
  size("batch", o.batch);
  size("min_batch", o.min_batch);
  size("max_batch", o.max_batch);
  ms("target_refill_ms", o.target_refill);
  if (opt.contains("low_water")) o.low_water = opt.at("low_water");
  ms("validity_ms", o.validity);
  ms("backoff_min_ms", o.backoff_min);
  ms("backoff_max_ms", o.backoff_max);
  ms("strict_wait_ms", o.strict_wait);
  return sekka::Client::Create(o);
}

json Draw(sekka::Client& client, const json& req) {
  const std::string op = req.at("op");
  json ids = json::array();
  for (int i = 0; i < req.at("n").get<int>(); ++i) {
    sekka::Result<std::int64_t> id =
        op == "ids" ? client.NextId() : client.Next(req.at("tag").get<std::string>());
    if (!id.ok()) {
      json reply = ErrorReply(id.error(), false);
      reply["ids"] = ids;
      return reply;
    }
    ids.push_back(std::to_string(*id));
  }
  return {{"ids", ids}};
}

// `strict` and `strict_batch`. The client refuses its own arguments and passes a server's
// refusal on with one code (kInvalidArgument): the arguments it refuses tell them apart.
json DrawStrict(sekka::Client& client, const json& req) {
  const std::string tag = req.at("tag");
  const std::int64_t n = req.at("n");
  const bool bad_argument = tag.empty() || n < 1 || n > 10'000'000;
  json ids = json::array();
  const auto fail = [&](const sekka::Error& error) {
    json reply = ErrorReply(error, bad_argument);
    reply["ids"] = ids;
    return reply;
  };
  if (req.at("op") == "strict_batch") {
    sekka::Result<std::vector<std::int64_t>> got =
        client.StrictBatch(tag, static_cast<std::size_t>(n));
    if (!got.ok()) return fail(got.error());
    for (std::int64_t id : *got) ids.push_back(std::to_string(id));
    return {{"ids", ids}};
  }
  for (std::int64_t i = 0; i < n; ++i) {
    sekka::Result<std::int64_t> id = client.Strict(tag);
    if (!id.ok()) return fail(id.error());
    ids.push_back(std::to_string(*id));
  }
  return {{"ids", ids}};
}

json Handle(std::unique_ptr<sekka::Client>& client, const json& req) {
  const std::string op = req.at("op");
  if (op == "open") {
    sekka::Result<std::unique_ptr<sekka::Client>> c = Open(req);
    if (!c.ok()) return ErrorReply(c.error(), true);
    client = std::move(*c);
    return {{"ok", true}};
  }
  if (op == "ids" || op == "tag") return Draw(*client, req);
  if (op == "strict" || op == "strict_batch") return DrawStrict(*client, req);
  if (op == "batch") {
    sekka::Result<std::vector<sekka::Id>> got = client->NextIds(req.at("n").get<std::size_t>());
    if (!got.ok()) return ErrorReply(got.error(), false);
    json ids = json::array();
    for (sekka::Id id : *got) ids.push_back(std::to_string(id));
    return {{"ids", ids}};
  }
  if (op == "stats") {
    const sekka::ClientStats s = client->stats();
    return {{"stats",
             {{"served", s.served},
              {"refills", s.refills},
              {"failovers", s.failovers},
              {"buffered", s.buffered},
              {"dropped", s.dropped},
              {"server_errors", s.server_errors}}}};
  }
  if (op == "close") {
    client->Close();
    return {{"ok", true}};
  }
  return {{"ok", true}};  // exit
}

}  // namespace

int main() {
  std::unique_ptr<sekka::Client> client;
  for (std::string line; std::getline(std::cin, line);) {
    const json req = json::parse(line);
    const auto start = std::chrono::steady_clock::now();
    json reply = Handle(client, req);
    reply["ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::cout << reply.dump() << std::endl;
    if (req.at("op") == "exit") break;
  }
  return 0;
}
