// server/server.h
//
// The network server: Asio event loops (one per core by default) serving HTTP/1.1 and the Redis
// protocol over TCP, with the limits of docs/contract.md section 6. All Asio code lives in
// server.cc, connection.cc and tls_context.cc.
//
// Thread-safety: Start and Run from one thread; RequestStop from any thread or a signal.

#ifndef SEKKA_SERVER_SERVER_H_
#define SEKKA_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "server/config.h"
#include "server/service.h"

namespace sekka::server {

// What Server::Start would refuse in `config` before binding anything: a listen address that
// is not IP:port, and TLS files OpenSSL cannot use. `sekka serve --print-config` checks it too,
// so that it never exits 0 on a configuration serve refuses. Errors: kInvalidArgument.
Status CheckListeners(const ServerConfig& config);
// The RESP address other servers forward strict calls to: strict.advertise, else the RESP
// listener's bound address `bound_resp` unless it is a wildcard (0.0.0.0, [::]) that other
// hosts cannot dial; "" when there is none (strict tags then answer unavailable, saying why).
std::string StrictAddress(const ServerConfig& config, const std::string& bound_resp);

class Server {
 public:
  // Binds the listeners. Errors: kInvalidArgument (a bad address), kUnavailable (in use).
  static Result<std::unique_ptr<Server>> Start(Service& service, const ServerConfig& config);
  virtual ~Server() = default;

  // The bound addresses ("127.0.0.1:8080"; the real port when 0 was asked); "" when off.
  virtual std::string http_address() const = 0;
  virtual std::string resp_address() const = 0;
  virtual std::string thrift_address() const = 0;
  // How the event loops do their I/O: "io_uring" or "epoll"; and with server.io = auto and
  // epoll, why io_uring was not used ("" otherwise).
  virtual std::string io() const = 0;
  virtual std::string io_refused() const = 0;

  // Serves until SIGTERM/SIGINT or RequestStop(): then stops accepting, lets requests in
  // flight finish (at most 5 s), closes the connections and returns.
  virtual void Run() = 0;
  virtual void RequestStop() = 0;
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_SERVER_H_
