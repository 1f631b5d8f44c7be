// include/sekka/client.h
//
// sekka's C++ client: ids from a local buffer that a background thread refills from a list of
// sekka servers over the Redis protocol (RESP2), with failover (docs/clients.md). Every
// client of sekka (Python, Node.js, Java, this one) behaves the same way:
//   - the buffer is filled by ID.BATCH n (snowflake ids) or SEG.NEXT tag n (segment tags); a
//     refill starts when less than `low_water` of a batch is left, so callers do not wait on
//     the network in steady state; the batch size adapts (Leaf's rule) so that a batch lasts
//     about `target_refill`;
//   - ids buffered longer than `validity` are dropped;
//   - a connection error, a timeout, -LEASELOST, -CLOCKBACKWARDS or -UNAVAILABLE moves to the
//     next server; a failed server is skipped for a backoff that doubles; an error reaches the
//     caller only when the buffer is empty and no server could serve (kUnavailable, naming each
//     server tried);
//   - a tag's ids increase within the client;
//   - strict ids (STRICT.BATCH tag n) are never buffered: each call is one request, on
//     connections of their own, tried again through a leader failover for up to
//     `strict_wait`.
//
//   ClientOptions o;
//   o.servers = {"127.0.0.1:6380", "127.0.0.1:6381"};
//   Result<std::unique_ptr<Client>> c = Client::Create(o);
//   Result<Id> id = (*c)->NextId();
//
// Thread-safety: a Client may be used from any number of threads.

#ifndef SEKKA_CLIENT_H_
#define SEKKA_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/layout.h"
#include "sekka/status.h"

namespace sekka {

struct ClientOptions {
  // "host:port" of each server's RESP listener, tried in this order.
  std::vector<std::string> servers;
  // The servers' server.auth_token ("" = none), sent with AUTH on each connection.
  std::string token;
  std::chrono::milliseconds connect_timeout{1000};  // per connection attempt
  std::chrono::milliseconds timeout{1000};          // per command
  std::size_t batch = 1000;                         // the first batch
  std::size_t min_batch = 100;
  std::size_t max_batch = 100'000;
  std::chrono::milliseconds target_refill{1000};  // how long a batch should last
  double low_water = 0.5;                         // refill below this share of a batch
  std::chrono::milliseconds validity{10'000};     // buffered ids older than this are dropped
  std::chrono::milliseconds backoff_min{100};     // a failed server is skipped this long,
  std::chrono::milliseconds backoff_max{5000};    //   doubling up to this
  // How long a strict call tries the servers, again and again, before kUnavailable: a strict
  // tag's leader failover takes the servers' worker.lease_ttl and a few seconds.
  std::chrono::milliseconds strict_wait{30'000};
  // TLS to the servers (TLS 1.2 or later; the certificate must name the host they are reached
  // by) when set: the CA file (PEM) that signed their certificates, or "system" for the
  // system's CAs; "" = plain TCP. tls_cert_file and tls_key_file: a client certificate (PEM)
  // for servers that require one, both or neither.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
};

struct ClientStats {
  std::uint64_t served = 0;         // ids handed out from the buffer
  std::uint64_t refills = 0;        // batches fetched
  std::uint64_t failovers = 0;      // moves to another server
  std::uint64_t server_errors = 0;  // calls a server failed (it is then backed off)
  std::uint64_t dropped = 0;        // ids dropped: expired, or not above a tag's highest
  std::uint64_t buffered = 0;       // ids in the buffers now
};

class Client {
 public:
  // Starts the refill thread; connects on the first call. Errors: kInvalidArgument naming a
  // bad option ("servers[1] = \"x\" is not host:port", batch sizes out of order, ...).
  static Result<std::unique_ptr<Client>> Create(const ClientOptions& options);
  // The servers as one text, "host:port,host:port", and the other options at their defaults.
  static Result<std::unique_ptr<Client>> Create(std::string_view servers);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The next snowflake id. Errors: kUnavailable (no server could serve and the buffer is
  // empty), kUnauthenticated (the token), kInvalidArgument with the server's message for a
  // request it refused, kCancelled after Close().
  Result<Id> NextId();
  // Fills `out` with ids in the order they were served. Errors: as NextId (`out` then holds
  // no usable ids).
  Status NextIds(std::span<Id> out);
  Result<std::vector<Id>> NextIds(std::size_t n);
  // The next id of segment tag `tag`, above every id this client gave for it. Errors: as
  // NextId (an unknown tag is the server's refusal, naming the tag).
  Result<std::int64_t> Next(std::string_view tag);
  // The next strict id of `tag` (docs/contract.md section 15): larger than every id of the
  // tag that any client of the cluster got before this call began. Errors: as StrictBatch.
  Result<std::int64_t> Strict(std::string_view tag);
  // `n` consecutive strict ids of `tag`, larger than every id of the tag that any client got
  // before this call began. One request, never buffered, on connections of its own (a
  // client's strict calls take turns): on a connection error, a timeout or -UNAVAILABLE (a
  // leader failover) the servers are tried again, in turn and with their backoff, for up to
  // `strict_wait`. Errors: kInvalidArgument (an empty tag, n outside 1 to 10,000,000, or the
  // server's refusal with its message, or ids that are not consecutive), kUnavailable,
  // kUnauthenticated, kCancelled after Close().
  Result<std::vector<std::int64_t>> StrictBatch(std::string_view tag, std::size_t n);

  ClientStats stats() const;

  // Stops the refill (a call in flight is cut off at once), closes every connection and wakes
  // waiting callers; they and every later call get kCancelled "the client is closed". Returns
  // when the refill thread has ended. Idempotent; the destructor calls it.
  void Close();

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sekka

#endif  // SEKKA_CLIENT_H_
