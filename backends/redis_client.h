// backends/redis_client.h
//
// One connection to a Redis server for the Redis backends: made on first use and again after a
// failure, authenticated (AUTH with the URI's user and password, ACL users included) and on the
// URI's database (SELECT), plain or TLS (rediss://). Every call is bounded: connect, TLS
// handshake and each command's reply within a timeout (5 s for the segment store, the lease's
// call timeout for the coordinator); a call without an answer drops the connection.
//
// Durability: a write Redis acknowledged is kept through a crash only with `appendonly yes` and
// `appendfsync always`. Unless the URI says `durability=any`, each new connection reads both
// settings (CONFIG GET) and refuses to be used without them: an id store that loses writes it
// acknowledged hands ids out twice.
//
// Eviction: an allkeys-* maxmemory-policy may evict any key (a counter, an owner record, an
// hwm) once maxmemory is reached. Unless the URI says `eviction=any`, each new connection reads
// the policy and refuses one other than noeviction or volatile-* (which evict only keys with a
// TTL: sessions, whose early end the lease's rules cover).
//
// Thread-safety: one call at a time (a mutex); each backend owns its client.

#ifndef SEKKA_BACKENDS_REDIS_CLIENT_H_
#define SEKKA_BACKENDS_REDIS_CLIENT_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/store_uri.h"
#include "resp/resp_connection.h"
#include "sekka/status.h"

namespace sekka {

class RedisClient {
 public:
  // `uri` as ParseStoreUri gave it (scheme redis or rediss), `text` the URI for messages
  // (without its password), `what` the setting's name in errors, `timeout` the bound of a
  // connect and of each reply. Errors: kInvalidArgument (a bad database number or durability,
  // TLS files that cannot be used).
  static Result<std::unique_ptr<RedisClient>> Open(
      StoreUri uri, std::string text, std::string_view what,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

  // Sends one command and returns its reply; an error reply is a reply of kind '-'. When the
  // connection turns out closed before any byte of the reply came (the server restarted, or
  // closed it idle), the command is sent once more on a new one if `may_repeat`: such a
  // connection may also have lost the reply of a command that ran, so a command whose second
  // run would do something else (a claim, a create) passes false. Errors: kUnavailable (no
  // connection, no answer in time: the connection is dropped).
  Result<RespReply> Call(const std::vector<std::string>& args, bool may_repeat = true);
  // Sends `commands` one after another on one connection (none is sent again, and no new
  // connection is made between them: a MULTI ... EXEC, whose SELECT must not outlive it), and
  // returns each reply. Errors: kUnavailable (the connection is dropped).
  Result<std::vector<RespReply>> CallInOrder(const std::vector<std::vector<std::string>>& commands);

  // The URI without its password, for messages.
  const std::string& text() const { return text_; }

  // The URI parameters this client reads, for the backends' allowed lists.
  static constexpr std::string_view kParams[] = {"durability", "eviction", "tls_ca_file",
                                                 "tls_cert_file", "tls_key_file"};

 private:
  RedisClient(StoreUri uri, std::string text, std::shared_ptr<SSL_CTX> tls,
              std::chrono::milliseconds timeout)
      : uri_(std::move(uri)), text_(std::move(text)), tls_(std::move(tls)), timeout_(timeout) {}
  Status Connect();
  // Errors: kUnavailable naming the setting that makes acknowledged writes losable.
  Status CheckDurable(RespConnection& conn);
  // Errors: kUnavailable naming the policy that may evict sekka's keys.
  Status CheckNoEviction(RespConnection& conn);
  // A setting's value; "unknown (...)" when CONFIG GET is refused. Errors: kUnavailable.
  Result<std::string> ConfigGet(RespConnection& conn, const char* name);

  const StoreUri uri_;
  const std::string text_;
  const std::shared_ptr<SSL_CTX> tls_;  // null: plain TCP
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::unique_ptr<RespConnection> conn_;  // guarded by mu_
};

}  // namespace sekka

#endif  // SEKKA_BACKENDS_REDIS_CLIENT_H_
