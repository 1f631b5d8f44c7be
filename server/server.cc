// The listeners and the event loops: each loop runs its connections (server/connection.h);
// the server accepts them within server.max_connections, keeps the memory budget over their
// buffers, answers auth turns, runs the lanes' thread pools and stops gracefully. Its limits'
// rules are server/admission.h's.

#include "server/server.h"

#include <fmt/format.h>
#include <malloc.h>

#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <charconv>
#include <chrono>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "server/admission.h"
#include "server/connection.h"
#include "server/handlers.h"
#include "server/log.h"
#include "server/tls_context.h"
#include "server/uring_loop.h"

namespace sekka::server {
namespace {

Result<tcp::endpoint> ParseEndpoint(std::string_view key, const std::string& text) {
  auto bad = [&] {
    return InvalidArgument(
        fmt::format("{} \"{}\" is not valid: allowed host:port with a numeric IP address, such as "
                    "\"127.0.0.1:8080\" or \"[::1]:8080\"",
                    key, text));
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return bad();
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") host = "127.0.0.1";
  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) return bad();
  // Digits only: std::stoi would also take a sign or leading spaces.
  const std::string_view digits = std::string_view(text).substr(colon + 1);
  int port = -1;
  const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (err != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
      digits[0] == '-') {
    return bad();
  }
  if (port < 0 || port > 65535) return bad();
  return tcp::endpoint(address, static_cast<unsigned short>(port));
}

// Each listener's address, protocol and config key (Server::Start and CheckListeners).
std::array<std::tuple<std::string, Protocol, const char*>, 3> ListenKeys(
    const ServerConfig& config) {
  return {std::tuple{config.http_listen, Protocol::kHttp, "server.http_listen"},
          std::tuple{config.resp_listen, Protocol::kResp, "server.resp_listen"},
          std::tuple{config.thrift_listen, Protocol::kThrift, "server.thrift_listen"}};
}

std::string EndpointText(const tcp::endpoint& e) {
  if (e.address().is_v6()) return fmt::format("[{}]:{}", e.address().to_string(), e.port());
  return fmt::format("{}:{}", e.address().to_string(), e.port());
}

class ServerImpl final : public Server, public ConnectionHost {
 public:
  ServerImpl(Service& service, const ServerConfig& config)
      : service_(service),
        config_(config),
        auth_turns_(service.clock(), kAuthFailureSpacingMs, 1, kMaxAuthWaitMs),
        handshake_turns_(service.clock(), std::max(1, 1000 / config.tls_handshake_rate),
                         config.tls_handshake_rate, config.auth_timeout_ms) {
    const int n = config.threads > 0
                      ? config.threads
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i < n; ++i) {
      loops_.push_back(std::make_unique<asio::io_context>(1));
    }
    signals_ = std::make_unique<asio::signal_set>(*loops_[0], SIGINT, SIGTERM);
  }

  Status Listen() {
    SEKKA_ASSIGN_OR_RETURN(auto tls, TlsContext(config_));
    tls_ = std::move(tls);
    for (auto [listen, protocol, key] : ListenKeys(config_)) {
      if (listen.empty()) continue;
      SEKKA_ASSIGN_OR_RETURN(auto endpoint, ParseEndpoint(key, listen));
      auto acceptor = std::make_unique<tcp::acceptor>(*loops_[0]);
      asio::error_code ec;
      acceptor->open(endpoint.protocol(), ec);
      if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) acceptor->bind(endpoint, ec);
      if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        return Unavailable(fmt::format("cannot listen on {} ({} = \"{}\"): {}", listen, key, listen,
                                       ec.message()));
      }
      const std::string bound = EndpointText(acceptor->local_endpoint());
      (protocol == Protocol::kHttp   ? http_address_
       : protocol == Protocol::kResp ? resp_address_
                                     : thrift_address_) = bound;
      acceptors_.push_back({std::move(acceptor), protocol});
    }
    return Status::Ok();
  }

  // The rings of the loops (server.io, server/uring_loop.h), or none: the loops run on epoll.
  Status OpenRings() {
    if (config_.io == "epoll") return Status::Ok();
    std::vector<std::unique_ptr<UringLoop>> rings;
    for (auto& loop : loops_) {
      Result<std::unique_ptr<UringLoop>> ring = UringLoop::Open(*loop);
      if (!ring.ok()) {
        if (config_.io == "io_uring") {
          return Unavailable(
              fmt::format("server.io = \"io_uring\", and the kernel refused it: {} "
                          "(server.io = \"auto\" falls back to epoll)",
                          ring.error().message));
        }
        io_refused_ = ring.error().message;
        return Status::Ok();
      }
      rings.push_back(std::move(ring).value());
    }
    rings_ = std::move(rings);
    return Status::Ok();
  }

  std::string io() const override { return rings_.empty() ? "epoll" : "io_uring"; }
  std::string io_refused() const override { return io_refused_; }
  std::string http_address() const override { return http_address_; }
  std::string resp_address() const override { return resp_address_; }
  std::string thrift_address() const override { return thrift_address_; }

  void Run() override {
    for (auto& a : acceptors_) Accept(a);
    signals_->async_wait([this](const asio::error_code& ec, int signal) {
      if (!ec) {
        Log(LogLevel::kInfo, "shutting down", fmt::format("signal={}", signal));
        RequestStop();
      }
    });
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < loops_.size(); ++i) {
      threads.emplace_back([this, i] { RunLoop(i); });
    }
    RunLoop(0);
    for (auto& t : threads) t.join();
    store_.join();
    strict_.join();
    strict_leader_.join();
  }

  void RequestStop() override {
    asio::post(*loops_[0], [this] { BeginStop(); });
  }

  Service& service() override { return service_; }
  const ServerConfig& config() const override { return config_; }
  Clock& clock() const override { return service_.clock(); }
  bool abandoned() const override { return abandoned_.load(); }
  asio::thread_pool& pool(Lane lane) override {
    return lane == Lane::kStrict ? strict_ : lane == Lane::kStrictLeader ? strict_leader_ : store_;
  }

  void Unregister(Connection* c, std::size_t freed) override {
    {
      std::lock_guard lock(mu_);
      connections_.erase(c);
      unauthenticated_.Remove(c);
      open_.fetch_sub(1);
    }
    if (freed >= kHandshakeBytes) TrimSoon();
  }

  // The memory budget: every connection's buffers together. Past server.max_buffer_mib, the
  // connection with the most bytes waiting on a client that does not read them is closed
  // (Redis's client output limits and Envoy's overload manager shed the same way): one hostile
  // client cannot take the memory of all, and a client that reads is never the one closed.
  void AddBuffered(std::int64_t delta) override {
    const std::int64_t total = buffered_.fetch_add(delta) + delta;
    if (delta > 0 && total > Budget()) ShedForMemory();
  }

  std::int64_t Budget() const { return config_.max_buffer_mib * 1024 * 1024; }

  // Past the budget: closes the connections whose clients make the server hold the most
  // (MemoryWeight) until what they hold covers the excess. When too little counts yet (what is
  // held is younger than kStallAgeNs), it looks again then. One scan at a time.
  void ShedForMemory() {
    if (shedding_.exchange(true)) return;
    const std::int64_t now = clock().MonotonicMillis();
    std::vector<std::pair<MemoryCandidate, std::shared_ptr<Connection>>> held;
    std::int64_t going = 0;
    {
      std::lock_guard lock(mu_);
      for (auto& [ptr, weak] : connections_) {
        std::shared_ptr<Connection> c = weak.lock();
        if (c == nullptr) continue;
        const ConnectionLoad load = c->Load();
        if (c->chosen.load()) {  // closing already: what it holds is as good as freed
          going += static_cast<std::int64_t>(load.buffered);
          continue;
        }
        const std::size_t w = MemoryWeight(load, now, [&] { return c->ClientStalled(now); });
        if (w > 0) {
          const MemoryCandidate m{w, unauthenticated_.Count(c->host()), load.partial_since_ms};
          held.emplace_back(m, std::move(c));
        }
      }
    }
    std::sort(held.begin(), held.end(),
              [](const auto& a, const auto& b) { return ClosesFirst(a.first, b.first); });
    const std::int64_t excess = buffered_.load() - Budget() - going;
    std::int64_t freed = 0;
    for (auto& [m, c] : held) {
      if (freed >= excess) break;
      if (c->chosen.exchange(true)) continue;
      freed += static_cast<std::int64_t>(m.weight);
      const asio::any_io_executor executor = c->executor();
      asio::post(executor, [c = std::move(c)] { c->Shed(ShedReason::kMemory); });
    }
    shedding_.store(false);
    if (freed > 0) TrimSoon();
    if (freed < excess && !stopping_ && !recheck_armed_.exchange(true)) {
      auto timer =
          std::make_shared<asio::steady_timer>(*loops_[0], std::chrono::milliseconds(kStallAgeMs));
      timer->async_wait([this, timer](const asio::error_code& ec) {
        recheck_armed_.store(false);
        if (!ec && buffered_.load() > Budget()) ShedForMemory();
      });
    }
  }

  // Half a second after a connection let go of much memory (it was shed, or closed in a TLS
  // handshake or with a large buffer), once it has gone, gives what was freed back to the
  // system: glibc keeps freed memory in its arenas, so the RSS of a server that shed an attack
  // (3,000 half-finished handshakes: 234 MiB) would otherwise stay near the attack's peak. The
  // trim runs off the loops (it walks every arena); at most one waits at a time.
  void TrimSoon() {
    if (stopping_ || trim_armed_.exchange(true)) return;
    auto timer = std::make_shared<asio::steady_timer>(*loops_[0], std::chrono::milliseconds(500));
    timer->async_wait([this, timer](const asio::error_code&) {
      asio::post(store_, [this] {
        ::malloc_trim(0);
        trim_armed_.store(false);
      });
    });
  }

  std::optional<std::int64_t> FailureTurn(const std::string& host) override {
    return auth_turns_.Take(host);
  }

  std::optional<std::int64_t> HandshakeTurn(const std::string& host) override {
    return handshake_turns_.Take(host);
  }

  void Authenticated(Connection* c) override {
    std::lock_guard lock(mu_);
    unauthenticated_.Remove(c);
  }

 private:
  struct Listener {
    std::unique_ptr<tcp::acceptor> acceptor;
    Protocol protocol;
  };

  enum class Refusal { kNone, kFull, kHostFull };

  // Whether a new connection from `host` gets a slot (admission.h): an unauthenticated one past its
  // host's cap takes the slot of the host's oldest (kHostFull when it finds none to close), and at
  // max_connections, the oldest unauthenticated one of all, else the connection RoomWeight picks,
  // gives its slot up (kFull when none does). When it does, `make()` makes it, registered.
  template <typename Make>
  Refusal Admit(const std::string& host, Make make) {
    std::vector<std::pair<std::shared_ptr<Connection>, ShedReason>> closing;
    {
      std::lock_guard lock(mu_);
      const bool unauthenticated = !StartsAuthenticated(config_, tls_ != nullptr);
      if (unauthenticated &&
          unauthenticated_.Count(host) >=
              static_cast<std::size_t>(config_.max_unauthenticated_per_address)) {
        std::shared_ptr<Connection> v = TakeUnauthenticated(&host);
        if (v == nullptr) return Refusal::kHostFull;
        closing.emplace_back(std::move(v), ShedReason::kUnauthenticated);
      }
      // An unauthenticated one that took its host's oldest's slot needs no other.
      if (open_.fetch_add(1) >= config_.max_connections && closing.empty()) {
        std::pair<std::shared_ptr<Connection>, ShedReason> v = MakeRoom();
        if (v.first == nullptr) {
          open_.fetch_sub(1);
          return Refusal::kFull;
        }
        closing.push_back(std::move(v));
      }
      std::shared_ptr<Connection> c = make();
      connections_[c.get()] = c;
      if (unauthenticated) unauthenticated_.Add(c.get(), host);
    }
    for (auto& [v, reason] : closing) {
      asio::post(v->executor(), [v, reason] { v->Shed(reason); });
    }
    return Refusal::kNone;
  }

  // The oldest unauthenticated connection of `host` (nullptr: of all) not spared (chosen already,
  // or with bytes waiting to be read), marked chosen and removed from them; null if none. Under
  // mu_.
  std::shared_ptr<Connection> TakeUnauthenticated(const std::string* host) {
    const std::optional<UnauthenticatedConnections::Id> id =
        unauthenticated_.Oldest(host, [this](UnauthenticatedConnections::Id id) {
          const auto* c = static_cast<const Connection*>(id);
          return c->chosen.load() || c->AboutToRead();
        });
    if (!id) return nullptr;
    unauthenticated_.Remove(*id);
    const auto it = connections_.find(static_cast<Connection*>(const_cast<void*>(*id)));
    std::shared_ptr<Connection> c = it == connections_.end() ? nullptr : it->second.lock();
    if (c == nullptr || c->chosen.exchange(true)) return nullptr;
    return c;
  }

  // At max_connections: the connection that gives its slot to a new one (admission.h), marked
  // chosen, and why; null if none. Under mu_.
  std::pair<std::shared_ptr<Connection>, ShedReason> MakeRoom() {
    if (std::shared_ptr<Connection> c = TakeUnauthenticated(nullptr)) {
      return {std::move(c), ShedReason::kUnauthenticated};
    }
    const std::int64_t now = clock().MonotonicMillis();
    // The address holding the most connections (of those that did not present the token).
    std::unordered_map<std::string_view, int> per_host;
    std::string_view crowded;
    int most = 1;  // an address with one connection is no crowd
    for (auto& [ptr, weak] : connections_) {
      std::shared_ptr<Connection> c = weak.lock();
      if (c == nullptr || c->chosen.load() || c->Load().presented_token) continue;
      if (const int n = ++per_host[c->host()]; n > most) {
        most = n;
        crowded = c->host();
      }
    }
    std::shared_ptr<Connection> victim;
    ConnectionLoad load;
    std::int64_t best = 0;
    for (auto& [ptr, weak] : connections_) {
      std::shared_ptr<Connection> c = weak.lock();
      if (c == nullptr || c->chosen.load()) continue;
      const ConnectionLoad l = c->Load();
      const bool in_crowd = !crowded.empty() && c->host() == crowded;
      // One about to read its credentials is spared here too (TakeUnauthenticated).
      if (const std::int64_t w = RoomWeight(l, now, in_crowd); w > best && !c->AboutToRead()) {
        best = w;
        load = l;
        victim = std::move(c);
      }
    }
    if (victim == nullptr || victim->chosen.exchange(true)) return {nullptr, ShedReason::kIdle};
    return {std::move(victim),
            load.partial_since_ms != 0 ? ShedReason::kSlowSender : ShedReason::kIdle};
  }

  void RunLoop(std::size_t i) {
    asio::io_context& loop = *loops_[i];
    auto guard = asio::make_work_guard(loop);
    const auto spin = std::chrono::microseconds(config_.busy_poll_us);
    for (;;) {
      try {
        if (!rings_.empty()) {  // busy polling is the epoll path's
          rings_[i]->Run();
          break;
        }
        if (spin.count() == 0) {
          loop.run();
          break;
        }
        // Busy polling: after work, look for more for `spin` before sleeping in epoll_wait, so
        // that a client sending its next request soon does not have to wake this thread.
        auto last_work = SteadyClock::now();
        while (!loop.stopped()) {
          if (loop.poll() > 0) {
            last_work = SteadyClock::now();
          } else if (SteadyClock::now() - last_work >= spin) {
            loop.run_one();
            last_work = SteadyClock::now();
          }
        }
        break;
      } catch (const std::exception& e) {
        Log(LogLevel::kError, "event loop error", fmt::format("error=\"{}\"", e.what()));
      }
    }
  }

  void Accept(Listener& l) {
    asio::io_context& target = *loops_[next_loop_++ % loops_.size()];
    l.acceptor->async_accept(target, [this, &l](const asio::error_code& ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || stopping_) return;
        Log(LogLevel::kWarn, "accept failed", fmt::format("error=\"{}\"", ec.message()));
        // Out of file descriptors and the like: try again shortly rather than spin.
        auto timer =
            std::make_shared<asio::steady_timer>(*loops_[0], std::chrono::milliseconds(50));
        timer->async_wait([this, &l, timer](const asio::error_code&) {
          if (!stopping_) Accept(l);
        });
        return;
      }
      asio::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      const std::string host = ClientHost(socket.remote_endpoint(ignored).address().to_string());
      std::shared_ptr<Connection> c;
      const Refusal refusal = Admit(host, [&] {
        c = std::make_shared<Connection>(*this, std::move(socket), host, l.protocol, tls_.get());
        return c;
      });
      if (refusal == Refusal::kNone) {
        asio::post(c->executor(), [c] { c->Begin(); });
      } else {
        service_.ConnectionRejected(l.protocol);
        Reject(std::move(socket), RefusalReply(l.protocol, refusal));
      }
      if (!stopping_) Accept(l);
    });
  }

  // What a refused client is told. Thrift has no message a client reads before its first call,
  // and a TLS client none before the handshake: they are closed.
  std::string RefusalReply(Protocol protocol, Refusal refusal) const {
    if (tls_ != nullptr || protocol == Protocol::kThrift) return "";
    const std::string why =
        refusal == Refusal::kHostFull
            ? fmt::format(
                  "too many connections from this address before authenticating: the limit is "
                  "{} (server.max_unauthenticated_per_address)",
                  config_.max_unauthenticated_per_address)
            : fmt::format("too many connections: the limit is {} (server.max_connections)",
                          config_.max_connections);
    // Redis's words for its own limit, which clients know.
    if (protocol == Protocol::kResp) return "-ERR max number of clients reached: " + why + "\r\n";
    return HttpParseError(503, why);
  }

  // Sends `reply`, then reads and discards what the client sent (at most 1 s) before closing,
  // so that closing with unread input does not reset the connection and lose the reply. At
  // most kMaxRejecting at once: past them a refused client is closed at once (each holds a
  // descriptor, outside max_connections; a flood from one address over its cap took them all).
  void Reject(tcp::socket socket, std::string reply) {
    static constexpr int kMaxRejecting = 64;
    if (reply.empty() || rejecting_.fetch_add(1) >= kMaxRejecting) {
      if (!reply.empty()) rejecting_.fetch_sub(1);
      asio::error_code ignored;
      socket.close(ignored);
      return;
    }
    struct Rejected {
      tcp::socket socket;
      std::string reply;
      asio::steady_timer timer;
      std::atomic<int>* count;
      char sink[512];
      ~Rejected() { count->fetch_sub(1); }
    };
    std::shared_ptr<Rejected> r(new Rejected{
        std::move(socket), std::move(reply), asio::steady_timer(*loops_[0]), &rejecting_, {}});
    asio::async_write(
        r->socket, asio::buffer(r->reply), [r](const asio::error_code& ec, std::size_t) {
          asio::error_code ignored;
          if (ec) {
            r->socket.close(ignored);
            return;
          }
          r->socket.shutdown(tcp::socket::shutdown_send, ignored);
          r->timer.expires_after(std::chrono::seconds(1));
          r->timer.async_wait([r](const asio::error_code&) {
            asio::error_code ignored;
            r->socket.close(ignored);
          });
          auto drain = std::make_shared<std::function<void()>>();
          *drain = [r, drain] {
            r->socket.async_read_some(asio::buffer(r->sink),
                                      [r, drain](const asio::error_code& ec, std::size_t) {
                                        if (ec) {
                                          r->timer.cancel();
                                          *drain = nullptr;  // break the cycle
                                          return;
                                        }
                                        (*drain)();
                                      });
          };
          (*drain)();
        });
  }

  void BeginStop() {
    if (stopping_) return;
    stopping_ = true;
    for (auto& l : acceptors_) {
      asio::error_code ignored;
      l.acceptor->close(ignored);
    }
    signals_->cancel();
    std::vector<std::shared_ptr<Connection>> all;
    {
      std::lock_guard lock(mu_);
      for (auto& [ptr, weak] : connections_) {
        if (auto c = weak.lock()) all.push_back(std::move(c));
      }
    }
    for (auto& c : all) asio::post(c->executor(), [c] { c->Drain(); });
    WaitForConnections(SteadyClock::now() + std::chrono::seconds(5));
  }

  void WaitForConnections(SteadyClock::time_point deadline) {
    std::size_t open;
    {
      std::lock_guard lock(mu_);
      open = connections_.size();
    }
    if (open == 0 || SteadyClock::now() >= deadline) {
      if (open > 0) Log(LogLevel::kWarn, "closing connections still open after 5 s");
      abandoned_.store(true);  // their requests still waiting for a thread are dropped
      for (auto& loop : loops_) loop->stop();
      return;
    }
    auto timer = std::make_shared<asio::steady_timer>(*loops_[0], std::chrono::milliseconds(10));
    timer->async_wait(
        [this, deadline, timer](const asio::error_code&) { WaitForConnections(deadline); });
  }

  Service& service_;
  const ServerConfig config_;
  // Requests that may wait run on their lane's pool, never on a loop (commands.h, Lane).
  asio::thread_pool store_{4};
  asio::thread_pool strict_{4};
  asio::thread_pool strict_leader_{2};
  // One per loop, or none (OpenRings). Destroyed after the loops (declared before them): the
  // sockets of the connections the loops' handlers drop still name their rings.
  std::vector<std::unique_ptr<UringLoop>> rings_;
  std::string io_refused_;
  std::vector<std::unique_ptr<asio::io_context>> loops_;
  std::unique_ptr<asio::signal_set> signals_;
  std::unique_ptr<asio::ssl::context> tls_;  // every listener's, when TLS is on
  std::list<Listener> acceptors_;
  std::string http_address_, resp_address_, thrift_address_;
  std::atomic<std::size_t> next_loop_{0};
  std::atomic<int> open_{0};
  std::atomic<int> rejecting_{0};           // refused connections still draining (Reject)
  std::atomic<std::int64_t> buffered_{0};   // bytes, AddBuffered
  std::atomic<bool> shedding_{false};       // ShedForMemory is scanning
  std::atomic<bool> recheck_armed_{false};  // ShedForMemory looks again soon
  std::atomic<bool> trim_armed_{false};     // TrimSoon's timer waits
  std::atomic<bool> abandoned_{false};      // stopping, and the connections left were let go
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections_;  // guarded by mu_
  UnauthenticatedConnections unauthenticated_;                              // guarded by mu_
  Turns auth_turns_;                                                        // failed credentials'
  Turns handshake_turns_;                                                   // TLS handshakes'
};

}  // namespace

Status CheckListeners(const ServerConfig& config) {
  for (auto [listen, protocol, key] : ListenKeys(config)) {
    if (listen.empty()) continue;
    SEKKA_RETURN_IF_ERROR(ParseEndpoint(key, listen));
  }
  if (!config.strict_advertise.empty()) {
    SEKKA_ASSIGN_OR_RETURN(auto e, ParseEndpoint("strict.advertise", config.strict_advertise));
    if (e.port() == 0 || e.address().is_unspecified()) {
      return InvalidArgument(fmt::format(
          "strict.advertise \"{}\" is not valid: other servers must be able to dial it (not a "
          "wildcard address, not port 0)",
          config.strict_advertise));
    }
  }
  Result<std::unique_ptr<asio::ssl::context>> tls = TlsContext(config);
  return tls.ok() ? Status::Ok() : Status(std::move(tls).error());
}

std::string StrictAddress(const ServerConfig& config, const std::string& bound_resp) {
  if (bound_resp.empty()) return "";
  if (!config.strict_advertise.empty()) {  // as others dial it: "ip:port", "[ipv6]:port"
    Result<tcp::endpoint> e = ParseEndpoint("strict.advertise", config.strict_advertise);
    return e.ok() ? EndpointText(*e) : "";
  }
  Result<tcp::endpoint> e = ParseEndpoint("server.resp_listen", bound_resp);
  return e.ok() && !e->address().is_unspecified() ? bound_resp : "";
}

Result<std::unique_ptr<Server>> Server::Start(Service& service, const ServerConfig& config) {
  auto server = std::make_unique<ServerImpl>(service, config);
  SEKKA_RETURN_IF_ERROR(server->OpenRings());
  SEKKA_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace sekka::server
