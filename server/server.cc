// The event loops. Each connection reads, handles the complete requests in its buffer until
// about 1 MiB of replies waits (back-pressure), writes them with one write, and goes on: a
// client that pipelines gets batched replies, and a client that does not read its replies
// stops being read and served (no unbounded buffers, no loop held by one connection).
//
// A reply is written the moment it is ready, and a connection whose buffer is empty starts its
// next read at once: nothing is posted between a request and its reply, so the loop waits in
// epoll once per round, as Redis's does. Reads of plain TCP sockets are drained reads
// (server/drained_read.h): one recv per request, not two. (Writing replies at the end of the
// loop's round, as Redis's beforeSleep does, cost a second epoll_wait per round under Asio's
// scheduler and was dropped: docs/benchmarks.md.)

#include "server/server.h"

#include <fmt/format.h>
#include <linux/sockios.h>
#include <malloc.h>
#include <openssl/ssl.h>
#include <sys/ioctl.h>

#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <charconv>
#include <chrono>
#include <fstream>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/drained_read.h"
#include "server/handlers.h"
#include "server/http.h"
#include "server/log.h"
#include "server/resp.h"

namespace sekka::server {
namespace {

using asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
class Connection;

// The socket under a connection's TLS stream. It tells the connection when raw bytes arrive
// (Connection::OnRawBytes), so that a TLS record that arrives only in part is an unfinished
// request like plain bytes would be: held to server.request_timeout and evictable as a slow
// sender. The stream sees no plaintext until a record is whole.
class RawSocket {
 public:
  using executor_type = tcp::socket::executor_type;
  using lowest_layer_type = tcp::socket::lowest_layer_type;
  RawSocket(TcpSocket& socket, Connection& owner) : socket_(socket), owner_(owner) {}
  executor_type get_executor() { return socket_.get_executor(); }
  lowest_layer_type& lowest_layer() { return socket_.lowest_layer(); }
  const lowest_layer_type& lowest_layer() const { return socket_.lowest_layer(); }
  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler);  // after Connection
  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    socket_.async_write_some(buffers, std::forward<Handler>(handler));
  }

 private:
  TcpSocket& socket_;
  Connection& owner_;
};
using TlsStream = asio::ssl::stream<RawSocket>;

constexpr std::size_t kReadChunk = 16 * 1024;
// How much one connection may buffer, as Redis limits its clients: input (a RESP command may
// not need more; argument limits keep it lower), and output before back-pressure: the
// connection stops executing pipelined requests once this much waits, and goes on when it has
// been written (its output is at most this plus one reply, a batch of max_batch ids, and it is
// not read meanwhile). Before a client has authenticated (server.auth_token set) both are small.
struct BufferLimits {
  std::size_t input;
  std::size_t pending_output;
};
constexpr BufferLimits kTrustedLimits{1024 * 1024, 1024 * 1024};
constexpr BufferLimits kUntrustedLimits{64 * 1024, 64 * 1024};
// One connection's turn on its loop ends once it has made this much output (then the others
// that are ready get theirs): a client pipelining batches cannot hold the loop for the 1 MiB of
// replies its back-pressure allows, which at 4,096 ids per ms is many milliseconds of the
// generator's time (the hostile-client campaign saw PING wait 0.7 s behind 25 such clients).
constexpr std::size_t kTurnOutput = 64 * 1024;
// A buffer larger than this is given back when it empties (an idle connection after a large
// batch keeps no megabytes).
constexpr std::size_t kKeptCapacity = 64 * 1024;
// Failed credentials from one address are answered at most once per this interval, however
// many connections it opens; an attempt that would wait more than kMaxAuthWait is closed
// unanswered.
constexpr auto kAuthFailureSpacing = std::chrono::milliseconds(200);
constexpr auto kMaxAuthWait = std::chrono::seconds(5);
// At max_connections, a connection whose request has been arriving for this long gives its
// slot to the new one.
constexpr auto kSlowSenderAge = std::chrono::seconds(1);
// Past the memory budget, what a connection's client makes the server hold counts once it is
// this old: an unfinished request, or replies read slower than kMinDrainRate.
constexpr std::int64_t kStallAgeNs = 250'000'000;
constexpr double kMinDrainRate = 1024.0 * 1024.0;  // bytes a second

std::int64_t NowNs() { return SteadyClock::now().time_since_epoch() / std::chrono::nanoseconds(1); }

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

// True when the PEM file at `path` holds an encrypted key (PKCS#8 or the traditional form).
bool PemIsEncrypted(const std::string& path) {
  std::ifstream in(path);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.find("ENCRYPTED") != std::string::npos;
}

// The listeners' TLS context when server.tls_cert_file is set, else null: TLS 1.2 or later, the
// certificate chain and its key, and client certificates required when a client CA is set.
// Idle connections give their TLS buffers back (SSL_MODE_RELEASE_BUFFERS).
Result<std::unique_ptr<asio::ssl::context>> TlsContext(const ServerConfig& config) {
  if (config.server_tls_cert_file.empty()) return std::unique_ptr<asio::ssl::context>();
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  SSL_CTX_set_mode(ctx->native_handle(), SSL_MODE_RELEASE_BUFFERS);
  // An encrypted key is refused, never a passphrase prompt on the terminal (OpenSSL's default).
  SSL_CTX_set_default_passwd_cb(ctx->native_handle(), [](char*, int, int, void*) { return 0; });
  auto refuse = [](const char* key, const std::string& path, const std::string& why) {
    return InvalidArgument(fmt::format("config {} \"{}\" cannot be used: {}", key, path, why));
  };
  asio::error_code ec;
  ctx->use_certificate_chain_file(config.server_tls_cert_file, ec);
  if (ec) return refuse("server.tls_cert_file", config.server_tls_cert_file, ec.message());
  ctx->use_private_key_file(config.server_tls_key_file, asio::ssl::context::pem, ec);
  if (ec) {
    return refuse("server.tls_key_file", config.server_tls_key_file,
                  PemIsEncrypted(config.server_tls_key_file)
                      ? "it is encrypted: allowed an unencrypted PEM key (openssl pkey -in KEY "
                        "-out NEW), kept from other users by its mode"
                      : ec.message());
  }
  if (!config.server_tls_client_ca_file.empty()) {
    ctx->load_verify_file(config.server_tls_client_ca_file, ec);
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.server_tls_client_ca_file.c_str());
    if (ec || names == nullptr) {
      return refuse("server.tls_client_ca_file", config.server_tls_client_ca_file,
                    ec ? ec.message() : "no PEM certificates in it");
    }
    SSL_CTX_set_client_CA_list(ctx->native_handle(), names);  // tells clients which CAs
    ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
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

class ServerImpl;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `tls` null: plain TCP.
  Connection(ServerImpl& server, tcp::socket socket, Protocol protocol, asio::ssl::context* tls);
  void Begin();
  void Drain();  // from its own executor
  // Closes it for breaking a limit (from its own executor): a request-timeout reply first
  // where the protocol has one.
  void Shed(ShedReason reason);
  asio::any_io_executor executor() { return socket_.get_executor(); }

  // Read from other loops' threads (the limits' choice of whom to close, MemoryWeight).
  std::atomic<std::int64_t> partial_since_ns{0};  // when its unfinished request began, or 0
  std::atomic<std::size_t> buffered{0};           // the capacity of its buffers, as in the budget
  // When a write the socket did not take at once began (0: none).
  std::atomic<std::int64_t> write_since_ns{0};
  std::atomic<bool> chosen{false};  // picked for closing already
  // Its replies wait for the host's auth turn (AwaitAuthTurn): QueueWrite waits, and the
  // budget counts its buffers.
  std::atomic<bool> held{false};
  // From the budget's scan (one at a time, any thread): whether the client acknowledged less
  // than kMinDrainRate of what the kernel holds for it since the scan's last look at least
  // kStallAgeNs ago, with bytes still queued. The kernel keeps sending while this loop is busy,
  // so the server's own pauses do not count. The first look only takes a mark.
  bool ClientStalled(std::int64_t now);
  // For the idle timer: whether the kernel still holds replies for the client and it took some
  // since the last look (the first look gives it the benefit of the doubt). A client reading a
  // long reply is not idle, however long ago the server wrote it; one that stops reading is
  // closed an idle timeout later.
  bool StillReading();
  // Raw bytes came under the TLS stream (RawSocket, on its loop): activity, and the start of an
  // unfinished request if none has begun (its plaintext comes when the record is whole).
  void OnRawBytes();

 private:
  // Writes the replies now, unless a write is in flight or the replies are held.
  void QueueWrite();
  void Write();
  // The rest of a write the socket did not take at once, one write_some at a time.
  void WriteSome();
  void OnWritten(const asio::error_code& ec, std::size_t n);
  // The TLS handshake, held to server.request_timeout like a request; then Read().
  void Handshake();
  void Read();
  void OnRead(const asio::error_code& ec, std::size_t n);
  // Handles buffered requests (up to the output bound), then writes, closes or reads.
  void Continue();
  // Runs a request that may wait on its lane's pool; the connection handles nothing more until
  // its reply is back (so replies keep their order).
  void Offload(Lane lane,
               std::function<void(Session& session, std::string& out, bool& close)> work);
  // Handles the buffered requests (up to the output bound) with the protocol's Take*, each of
  // which takes one request from the front of `data` and moves `pos` past what it used.
  void Process();
  enum class Step { kGoOn, kNeedMore, kStop };  // kNeedMore: an unfinished request
  Step TakeHttp(std::string_view data, std::size_t& pos);
  Step TakeThrift(std::string_view data, std::size_t& pos);
  Step TakeResp(std::string_view data, std::size_t& pos);
  void AfterWrite();
  void ArmIdleTimer();
  void Close();
  // True when no token is set or the client has authenticated: the larger limits apply.
  bool trusted() const;
  BufferLimits limits() const;
  // After Process: notes when an unfinished request began (the HTTP parser keeps the bytes of
  // one it has seen, so what is left in in_ does not tell).
  void TrackPartial(bool completed, bool need_more);
  // Gives back emptied large buffers and updates the budget (closing its largest user past it).
  void Account();
  // The first credentials a connection presented (AUTH, HELLO AUTH, a token): their answer and
  // everything after it wait for the host's turn (ServerImpl::AuthTurn); wrong ones
  // (`failed`) then end the connection.
  void AwaitAuthTurn(bool failed);

  ServerImpl& server_;
  TcpSocket socket_;
  std::unique_ptr<TlsStream> tls_;  // over socket_; null: plain TCP
  bool handshaking_ = false;
  asio::steady_timer idle_timer_;
  const Protocol protocol_;
  std::string in_;
  std::string out_;
  std::vector<char> chunk_;
  http::RequestParser http_parser_;
  Session session_;
  resp::ParseResult parsed_;  // reused: its argument vector keeps its capacity
  asio::ip::address peer_;
  SteadyClock::time_point last_activity_ = SteadyClock::now();
  std::uint64_t handled_ = 0;  // requests taken from in_
  bool closing_ = false;       // close after the pending write
  bool busy_ = false;          // replies are queued or a write is in flight
  bool pending_ = false;       // a request runs on a lane's pool
  // One read and one write at a time (the review of issue 24 saw two reads in flight into
  // chunk_ after pipelined blocking-pool requests, and a reply appended to out_ while an
  // async_write was sending it).
  bool reading_ = false;       // an async_read_some is in flight
  bool writing_ = false;       // an async_write is in flight: out_ is not touched
  std::string held_;           // a blocking-pool reply that came while writing_
  std::size_t write_pos_ = 0;  // what the write in flight has sent of out_
  std::atomic<int> fd_{-1};    // the socket's, for ClientStalled (-1 once closed)
  // Bytes handed to the socket so far (TLS: plaintext, which the records' overhead makes a
  // little less than the kernel holds).
  std::atomic<std::uint64_t> sent_total_{0};
  // ClientStalled's last look: the bytes the client had acknowledged, and when.
  std::atomic<std::uint64_t> acked_mark_{0};
  std::atomic<std::int64_t> acked_mark_ns_{0};
  std::optional<std::uint64_t> idle_acked_;  // StillReading's last look: bytes acknowledged
  bool draining_ = false;
  bool closed_ = false;
};

class ServerImpl final : public Server {
 public:
  ServerImpl(Service& service, const ServerConfig& config) : service_(service), config_(config) {
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
      threads.emplace_back([this, i] { RunLoop(*loops_[i]); });
    }
    RunLoop(*loops_[0]);
    for (auto& t : threads) t.join();
    store_.join();
    strict_.join();
    strict_leader_.join();
  }

  void RequestStop() override {
    asio::post(*loops_[0], [this] { BeginStop(); });
  }

  Service& service() { return service_; }
  const ServerConfig& config() const { return config_; }
  // True once stopping has let go of the connections still open after the grace period.
  bool abandoned() const { return abandoned_.load(); }
  // The thread pool of a lane (commands.h) other than kLoop.
  asio::thread_pool& pool(Lane lane) {
    return lane == Lane::kStrict ? strict_ : lane == Lane::kStrictLeader ? strict_leader_ : store_;
  }

  void Register(const std::shared_ptr<Connection>& c) {
    std::lock_guard lock(mu_);
    connections_[c.get()] = c;
  }
  void Unregister(Connection* c) {
    std::lock_guard lock(mu_);
    connections_.erase(c);
    open_.fetch_sub(1);
  }

  // The memory budget: every connection's buffers together. Past server.max_buffer_mib, the
  // connection with the most bytes waiting on a client that does not read them is closed
  // (Redis's client output limits and Envoy's overload manager shed the same way): one hostile
  // client cannot take the memory of all, and a client that reads is never the one closed.
  void AddBuffered(std::int64_t delta) {
    const std::int64_t total = buffered_.fetch_add(delta) + delta;
    if (delta > 0 && total > Budget()) ShedForMemory();
  }

  std::int64_t Budget() const { return config_.max_buffer_mib * 1024 * 1024; }

  // Past the budget: closes the connections whose clients make the server hold the most
  // (MemoryWeight) until what they hold covers the excess. When too little counts yet (what is
  // held is younger than kStallAgeNs), it looks again then. One scan at a time.
  void ShedForMemory() {
    if (shedding_.exchange(true)) return;
    const std::int64_t now = NowNs();
    std::vector<std::pair<std::size_t, std::shared_ptr<Connection>>> held;
    {
      std::lock_guard lock(mu_);
      for (auto& [ptr, weak] : connections_) {
        std::shared_ptr<Connection> c = weak.lock();
        if (c == nullptr || c->chosen.load()) continue;
        if (const std::size_t w = MemoryWeight(*c, now); w > 0) held.emplace_back(w, std::move(c));
      }
    }
    std::sort(held.begin(), held.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    const std::int64_t excess = buffered_.load() - Budget();
    std::int64_t freed = 0;
    for (auto& [weight, c] : held) {
      if (freed >= excess) break;
      if (c->chosen.exchange(true)) continue;
      freed += static_cast<std::int64_t>(weight);
      const asio::any_io_executor executor = c->executor();
      asio::post(executor, [c = std::move(c)] { c->Shed(ShedReason::kMemory); });
    }
    shedding_.store(false);
    if (freed > 0) TrimSoon();
    if (freed < excess && !stopping_ && !recheck_armed_.exchange(true)) {
      auto timer =
          std::make_shared<asio::steady_timer>(*loops_[0], std::chrono::nanoseconds(kStallAgeNs));
      timer->async_wait([this, timer](const asio::error_code& ec) {
        recheck_armed_.store(false);
        if (!ec && buffered_.load() > Budget()) ShedForMemory();
      });
    }
  }

  // Once the connections shed have gone (half a second), gives the memory they freed back to the
  // system: glibc keeps freed buffers in its arenas, so the RSS of a server that shed an attack
  // would otherwise stay near the attack's peak. At most one trim waits at a time.
  void TrimSoon() {
    if (stopping_ || trim_armed_.exchange(true)) return;
    auto timer = std::make_shared<asio::steady_timer>(*loops_[0], std::chrono::milliseconds(500));
    timer->async_wait([this, timer](const asio::error_code&) {
      ::malloc_trim(0);
      trim_armed_.store(false);
    });
  }

  // What closing `c` frees (its buffers) when its client is what makes the server hold them:
  // a request not whole for kStallAgeNs, or a reply waiting that long on a client that does not
  // read it at kMinDrainRate (ClientStalled). 0 otherwise: a client reading a large reply at
  // speed is never chosen, however large the reply.
  static std::size_t MemoryWeight(Connection& c, std::int64_t now) {
    const std::int64_t partial = c.partial_since_ns.load();
    const std::int64_t since = c.write_since_ns.load();
    const bool input = partial != 0 && now - partial >= kStallAgeNs;
    const bool output = since != 0 && now - since >= kStallAgeNs && c.ClientStalled(now);
    // Replies held for an auth turn wait on the host's guessing, up to 5 s: they count too.
    return input || output || c.held.load() ? c.buffered.load() : 0;
  }

  // At max_connections: the connection whose request has been arriving longest (at least
  // kSlowSenderAge) is closed, so that slow senders cannot hold every slot.
  bool MakeRoom() {
    const std::int64_t limit =
        (SteadyClock::now() - kSlowSenderAge).time_since_epoch() / std::chrono::nanoseconds(1);
    return CloseOne(ShedReason::kSlowSender, [limit](Connection& c) -> std::int64_t {
      const std::int64_t since = c.partial_since_ns.load();
      return since != 0 && since <= limit ? limit - since + 1 : 0;
    });
  }

  // How long credentials presented by `peer` wait for their answer: until the host's next turn
  // (now, unless failures are queued), or nullopt when that is more than kMaxAuthWait away (the
  // connection is then closed unanswered). Failed credentials (`failed`) take the turn, so the
  // host's next ones wait kAuthFailureSpacing more; right ones wait the same but take none. A
  // guess's timing thus says nothing about whether it was right.
  std::optional<SteadyClock::duration> AuthTurn(asio::ip::address peer, bool failed) {
    std::lock_guard lock(mu_);
    const auto now = SteadyClock::now();
    if (auth_failures_.size() > 4096) {
      std::erase_if(auth_failures_, [now](const auto& e) { return e.second < now; });
    }
    // One turn per host for loopback (any of 127/8 or ::1 is the same local user), per /64 for
    // IPv6, per address otherwise; an IPv4 client of a dual-stack listener is its IPv4 address.
    if (peer.is_v6() && peer.to_v6().is_v4_mapped()) {
      peer = asio::ip::make_address_v4(asio::ip::v4_mapped, peer.to_v6());
    }
    std::string key = peer.to_string();
    if (peer.is_loopback()) {
      key = "loopback";
    } else if (peer.is_v6()) {
      asio::ip::address_v6::bytes_type b = peer.to_v6().to_bytes();
      std::fill(b.begin() + 8, b.end(), 0);
      key = asio::ip::address_v6(b).to_string();
    }
    SteadyClock::time_point& next = auth_failures_[key];
    const SteadyClock::time_point turn = std::max(next, now);
    if (turn - now > kMaxAuthWait) return std::nullopt;
    if (failed) next = turn + kAuthFailureSpacing;
    return turn - now;
  }

 private:
  struct Listener {
    std::unique_ptr<tcp::acceptor> acceptor;
    Protocol protocol;
  };

  // Closes the connection with the largest positive `weight`, if any, not picked before.
  template <typename Weight>
  bool CloseOne(ShedReason reason, Weight weight) {
    std::shared_ptr<Connection> victim;
    {
      std::lock_guard lock(mu_);
      std::int64_t best = 0;
      for (auto& [ptr, weak] : connections_) {
        std::shared_ptr<Connection> c = weak.lock();
        if (c == nullptr || c->chosen.load()) continue;
        if (const auto w = static_cast<std::int64_t>(weight(*c)); w > best) {
          best = w;
          victim = std::move(c);
        }
      }
      if (victim == nullptr || victim->chosen.exchange(true)) return false;
    }
    asio::post(victim->executor(), [victim, reason] { victim->Shed(reason); });
    return true;
  }

  void RunLoop(asio::io_context& loop) {
    auto guard = asio::make_work_guard(loop);
    const auto spin = std::chrono::microseconds(config_.busy_poll_us);
    for (;;) {
      try {
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
      if (open_.fetch_add(1) >= config_.max_connections && !MakeRoom()) {
        open_.fetch_sub(1);
        service_.ConnectionRejected(l.protocol);
        // Thrift has no message a client reads before its first call, and a TLS client none
        // before the handshake: they are closed.
        const std::string reply =
            tls_ != nullptr                 ? std::string()
            : l.protocol == Protocol::kResp ? std::string("-ERR max number of clients reached\r\n")
            : l.protocol == Protocol::kHttp
                ? HttpParseError(503, fmt::format("too many connections: the limit is {}",
                                                  config_.max_connections))
                : std::string();
        Reject(std::move(socket), reply);
      } else {
        asio::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        auto c = std::make_shared<Connection>(*this, std::move(socket), l.protocol, tls_.get());
        Register(c);
        asio::post(c->executor(), [c] { c->Begin(); });
      }
      if (!stopping_) Accept(l);
    });
  }

  // Sends `reply`, then reads and discards what the client sent (at most 1 s) before closing,
  // so that closing with unread input does not reset the connection and lose the reply.
  void Reject(tcp::socket socket, std::string reply) {
    struct Rejected {
      tcp::socket socket;
      std::string reply;
      asio::steady_timer timer;
      char sink[512];
    };
    auto r = std::make_shared<Rejected>(
        Rejected{std::move(socket), std::move(reply), asio::steady_timer(*loops_[0]), {}});
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
  std::vector<std::unique_ptr<asio::io_context>> loops_;
  std::unique_ptr<asio::signal_set> signals_;
  std::unique_ptr<asio::ssl::context> tls_;  // every listener's, when TLS is on
  std::list<Listener> acceptors_;
  std::string http_address_, resp_address_, thrift_address_;
  std::atomic<std::size_t> next_loop_{0};
  std::atomic<int> open_{0};
  std::atomic<std::int64_t> buffered_{0};   // bytes, AddBuffered
  std::atomic<bool> shedding_{false};       // ShedForMemory is scanning
  std::atomic<bool> recheck_armed_{false};  // ShedForMemory looks again soon
  std::atomic<bool> trim_armed_{false};     // TrimSoon's timer waits
  std::atomic<bool> abandoned_{false};      // stopping, and the connections left were let go
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections_;  // guarded by mu_
  std::unordered_map<std::string, SteadyClock::time_point> auth_failures_;  // guarded by mu_
};

Connection::Connection(ServerImpl& server, tcp::socket socket, Protocol protocol,
                       asio::ssl::context* tls)
    : server_(server),
      socket_(std::move(socket)),
      tls_(tls != nullptr ? std::make_unique<TlsStream>(RawSocket(socket_, *this), *tls) : nullptr),
      idle_timer_(socket_.get_executor()),
      protocol_(protocol),
      chunk_(kReadChunk),
      http_parser_(http::Limits{}) {}

void Connection::Begin() {
  server_.service().ConnectionOpened(protocol_);
  asio::error_code ignored;
  socket_.non_blocking(true, ignored);
  fd_.store(socket_.native_handle());
  peer_ = socket_.remote_endpoint(ignored).address();
  ArmIdleTimer();
  if (tls_ != nullptr) {
    Handshake();
  } else {
    Read();
  }
}

template <typename Buffers, typename Handler>
void RawSocket::async_read_some(const Buffers& buffers, Handler&& handler) {
  auto done = [&owner = owner_, handler = std::forward<Handler>(handler)](
                  const asio::error_code& ec, std::size_t n) mutable {
    if (!ec && n > 0) owner.OnRawBytes();
    std::move(handler)(ec, n);
  };
  // The TLS stream reads into one buffer of its own.
  if constexpr (std::is_convertible_v<Buffers, asio::mutable_buffer>) {
    socket_.DrainedRead(asio::mutable_buffer(buffers), std::move(done));
  } else {
    socket_.async_read_some(buffers, std::move(done));
  }
}

void Connection::OnRawBytes() {
  last_activity_ = SteadyClock::now();
  if (handshaking_ || closed_ || partial_since_ns.load() != 0) return;
  partial_since_ns.store(NowNs());
  ArmIdleTimer();  // its deadline may come before the idle one
}

void Connection::Handshake() {
  handshaking_ = true;
  TrackPartial(/*completed=*/true, /*need_more=*/true);  // its deadline starts now
  tls_->async_handshake(
      asio::ssl::stream_base::server, [self = shared_from_this()](const asio::error_code& ec) {
        self->handshaking_ = false;
        if (self->closed_) return;
        if (ec) {
          self->server_.service().ConnectionShed(ShedReason::kTlsHandshake);
          Log(LogLevel::kDebug, "TLS handshake failed",
              fmt::format("peer={} error=\"{}\"", self->peer_.to_string(), ec.message()));
          self->Close();
          return;
        }
        self->TrackPartial(/*completed=*/true, /*need_more=*/false);
        self->last_activity_ = SteadyClock::now();
        self->Read();
      });
}

// One timer for both time limits: server.idle_timeout since the last progress, and
// server.request_timeout since an unfinished request began (however slowly it trickles in:
// every byte resets the idle time, never the request's).
void Connection::ArmIdleTimer() {
  const ServerConfig& config = server_.config();
  SteadyClock::time_point at = last_activity_ + std::chrono::milliseconds(config.idle_timeout_ms);
  if (const std::int64_t since = partial_since_ns.load(); since != 0) {
    at = std::min(at, SteadyClock::time_point(std::chrono::nanoseconds(since)) +
                          std::chrono::milliseconds(config.request_timeout_ms));
  }
  idle_timer_.expires_at(at);
  idle_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (ec || self->closed_) return;
    const ServerConfig& config = self->server_.config();
    const auto now = SteadyClock::now();
    const std::int64_t since = self->partial_since_ns.load();
    if (since != 0 && now.time_since_epoch() - std::chrono::nanoseconds(since) >=
                          std::chrono::milliseconds(config.request_timeout_ms)) {
      self->Shed(ShedReason::kRequestTimeout);
    } else if (!self->pending_ && !self->held.load() &&
               now - self->last_activity_ >= std::chrono::milliseconds(config.idle_timeout_ms) &&
               !self->StillReading()) {
      self->Close();
    } else {
      self->ArmIdleTimer();
    }
  });
}

bool Connection::trusted() const {
  return server_.config().auth_token.empty() || session_.authenticated;
}

BufferLimits Connection::limits() const { return trusted() ? kTrustedLimits : kUntrustedLimits; }

bool Connection::StillReading() {
  const int fd = fd_.load();
  int queued = 0;  // bytes in the kernel the client has not acknowledged
  if (fd < 0 || ::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued <= 0) return false;
  const std::uint64_t sent = sent_total_.load();
  const std::uint64_t acked = sent - std::min(sent, static_cast<std::uint64_t>(queued));
  const bool first_look = !idle_acked_.has_value();
  const bool progress = first_look || acked > *idle_acked_;
  idle_acked_ = acked;
  if (progress) last_activity_ = SteadyClock::now();
  return progress;
}

bool Connection::ClientStalled(std::int64_t now) {
  const int fd = fd_.load();
  int queued = 0;  // bytes in the kernel the client has not acknowledged
  if (fd < 0 || ::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return false;
  const std::uint64_t sent = sent_total_.load();
  const std::uint64_t acked = sent - std::min(sent, static_cast<std::uint64_t>(queued));
  const std::int64_t then = acked_mark_ns_.load();
  if (then != 0 && then >= write_since_ns.load() && now - then < kStallAgeNs) return false;
  const std::uint64_t before = acked_mark_.exchange(acked);
  acked_mark_ns_.store(now);
  if (then == 0 || then < write_since_ns.load()) return false;  // a mark for this write
  const double rate = static_cast<double>(acked - std::min(acked, before)) /
                      (static_cast<double>(now - then) / 1e9);
  return queued > 0 && rate < kMinDrainRate;
}

void Connection::TrackPartial(bool completed, bool need_more) {
  if (!need_more) {
    partial_since_ns.store(0);
    return;
  }
  if (!completed && partial_since_ns.load() != 0) return;  // the same request, still arriving
  partial_since_ns.store(SteadyClock::now().time_since_epoch() / std::chrono::nanoseconds(1));
  ArmIdleTimer();  // its deadline may come before the idle one
}

void Connection::Account() {
  if (in_.empty() && in_.capacity() > kKeptCapacity) std::string().swap(in_);
  if (out_.empty() && !busy_ && out_.capacity() > kKeptCapacity) std::string().swap(out_);
  const std::size_t now = closed_ ? 0 : in_.capacity() + out_.capacity();
  const std::size_t before = buffered.exchange(now);
  if (now != before) {
    server_.AddBuffered(static_cast<std::int64_t>(now) - static_cast<std::int64_t>(before));
  }
}

void Connection::Shed(ShedReason reason) {
  if (closed_) return;
  server_.service().ConnectionShed(reason);
  Log(LogLevel::kDebug, "closing a connection at a limit",
      fmt::format("reason={} peer={}", ShedReasonName(reason), peer_.to_string()));
  if (reason != ShedReason::kRequestTimeout || busy_ || pending_ || handshaking_) {
    Close();
    return;
  }
  const std::string seconds = fmt::format("{:g}s", server_.config().request_timeout_ms / 1000.0);
  if (protocol_ == Protocol::kHttp) {
    out_ += HttpParseError(
        408, "the request did not arrive whole within server.request_timeout " + seconds);
  } else if (protocol_ == Protocol::kResp) {
    resp::AppendError(out_,
                      "ERR Protocol error: the command did not arrive whole within " + seconds);
  }
  in_.clear();
  partial_since_ns.store(0);
  closing_ = true;
  if (out_.empty()) {
    Close();
  } else {
    QueueWrite();
  }
}

void Connection::AwaitAuthTurn(bool failed) {
  if (failed) {
    session_.auth_failed = false;
    server_.service().ConnectionShed(ShedReason::kAuthFailure);
    in_.clear();
    closing_ = true;
  }
  const std::optional<SteadyClock::duration> delay = server_.AuthTurn(peer_, failed);
  if (!delay) {
    Close();
    return;
  }
  if (*delay <= SteadyClock::duration::zero()) return;
  held.store(true);  // QueueWrite waits; the connection reads nothing meanwhile
  auto timer = std::make_shared<asio::steady_timer>(executor(), *delay);
  timer->async_wait([self = shared_from_this(), timer](const asio::error_code&) {
    self->held.store(false);
    if (!self->closed_ && self->busy_) self->QueueWrite();
  });
}

void Connection::Read() {
  if (closed_ || reading_) return;
  reading_ = true;
  // A drained read: it never re-arms the socket in epoll (a wait op would, with one epoll_ctl
  // per request), and after a read that emptied the socket it waits for epoll's next edge
  // instead of trying the socket (server/drained_read.h).
  auto done = [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
    self->OnRead(ec, n);
  };
  if (tls_ != nullptr) {
    tls_->async_read_some(asio::buffer(chunk_), std::move(done));
  } else {
    socket_.DrainedRead(asio::buffer(chunk_), std::move(done));
  }
}

void Connection::OnRead(const asio::error_code& ec, std::size_t n) {
  reading_ = false;
  if (ec || closed_) {
    Close();
    return;
  }
  in_.append(chunk_.data(), n);
  // There may be more: take it without waiting (plain TCP only; a TLS record is read whole by
  // the stream, never from the socket under it).
  if (tls_ == nullptr && n == chunk_.size()) {
    asio::error_code more_ec;
    const std::size_t limit = limits().input;
    while (in_.size() <= limit) {
      const std::size_t more = socket_.read_some(asio::buffer(chunk_), more_ec);
      if (more_ec) break;
      in_.append(chunk_.data(), more);
      if (more < chunk_.size()) break;
    }
  }
  last_activity_ = SteadyClock::now();
  Continue();
}

void Connection::Continue() {
  if (closed_ || writing_) return;  // the write's completion continues
  if (!pending_) Process();
  Account();
  if (closed_) return;  // the budget closed it
  // Credentials judged on the loop or on the blocking pool (Offload brings its session back
  // before it continues): their answer waits for the host's turn.
  if (session_.auth_failed || session_.first_auth) {
    session_.first_auth = false;
    AwaitAuthTurn(session_.auth_failed);
    if (closed_) return;
  }
  if (!out_.empty()) {
    QueueWrite();
  } else if (pending_) {
    return;  // Offload's completion continues
  } else if (closing_ || draining_) {
    Close();
  } else {
    Read();
  }
}

void Connection::Offload(
    Lane lane, std::function<void(Session& session, std::string& out, bool& close)> work) {
  pending_ = true;
  asio::post(server_.pool(lane),
             [self = shared_from_this(), session = session_, work = std::move(work)]() mutable {
               // A connection closed while its request waited for a thread (its client gave
               // up), or let go by a stopping server, is owed nothing: the request is dropped.
               if (self->fd_.load() < 0 || self->server_.abandoned()) return;
               std::string reply;
               bool close = false;
               work(session, reply, close);
               asio::post(self->executor(), [self, session = std::move(session),
                                             reply = std::move(reply), close]() mutable {
                 self->pending_ = false;
                 if (self->closed_) return;
                 self->last_activity_ = SteadyClock::now();
                 self->session_ = std::move(session);
                 if (close) self->closing_ = true;
                 if (self->writing_) {
                   self->held_ += reply;  // sent after the write in flight
                   return;
                 }
                 self->out_ += reply;
                 self->Continue();
               });
             });
}

void Connection::Process() {
  std::size_t pos = 0;
  Step step = Step::kGoOn;
  const std::uint64_t handled_before = handled_;
  // The limits are read before each request: a request may authenticate the connection.
  const std::size_t turn_end = out_.size() + kTurnOutput;
  while (step == Step::kGoOn && pos < in_.size() && !closing_ &&
         out_.size() < std::min(turn_end, limits().pending_output)) {
    const std::string_view data = std::string_view(in_).substr(pos);
    step = protocol_ == Protocol::kHttp     ? TakeHttp(data, pos)
           : protocol_ == Protocol::kThrift ? TakeThrift(data, pos)
                                            : TakeResp(data, pos);
  }
  in_.erase(0, pos);
  TrackPartial(handled_ != handled_before, step == Step::kNeedMore);
}

Connection::Step Connection::TakeHttp(std::string_view data, std::size_t& pos) {
  Service& service = server_.service();
  http::RequestParser::Outcome o = http_parser_.Parse(data);
  pos += o.consumed;  // the parser keeps what it has seen of an unfinished request
  if (o.kind == http::RequestParser::Kind::kNeedMore) return Step::kNeedMore;
  if (o.kind == http::RequestParser::Kind::kError) {
    out_ += HttpParseError(o.status, o.error);
    service.CountRequest(Protocol::kHttp, Command::kOther, false);
    closing_ = true;
    return Step::kStop;
  }
  ++handled_;
  if (const Lane lane = LaneOf(service, o.request); lane != Lane::kLoop) {
    Offload(lane, [&service, request = std::move(o.request)](Session& session, std::string& out,
                                                             bool& close) {
      HandleHttp(service, session, request, out, close);
    });
    return Step::kStop;
  }
  bool close = false;
  HandleHttp(service, session_, o.request, out_, close);
  if (close) closing_ = true;
  return Step::kGoOn;
}

Connection::Step Connection::TakeThrift(std::string_view data, std::size_t& pos) {
  static const thrift::Limits kLimits;
  Service& service = server_.service();
  thrift::ParseOutcome o = thrift::ParseFrame(data, kLimits);
  if (o.kind == thrift::ParseOutcome::Kind::kNeedMore) return Step::kNeedMore;
  if (o.kind != thrift::ParseOutcome::Kind::kCall) {
    // A frame that is too large or not a message: the stream cannot be trusted to go on.
    Log(LogLevel::kDebug, "closing a Thrift connection", fmt::format("error=\"{}\"", o.error));
    if (o.kind == thrift::ParseOutcome::Kind::kBadMessage) {
      thrift::AppendException(out_, "", 0, thrift::ExceptionType::kProtocolError, o.error);
    }
    service.CountRequest(Protocol::kThrift, Command::kOther, false);
    closing_ = true;
    return Step::kStop;
  }
  pos += o.consumed;
  ++handled_;
  HandleThrift(service, o.call, out_);  // no Thrift call waits for a store
  return Step::kGoOn;
}

Connection::Step Connection::TakeResp(std::string_view data, std::size_t& pos) {
  static const resp::Limits kLimits;
  Service& service = server_.service();
  resp::ParseResult& r = parsed_;
  resp::ParseCommand(data, trusted() ? kLimits : resp::kUnauthenticatedLimits, r);
  if (r.status == resp::ParseStatus::kNeedMore) {
    if (data.size() > limits().input) {
      resp::AppendError(out_, "ERR Protocol error: request too large");
      closing_ = true;
    }
    return Step::kNeedMore;
  }
  if (r.status == resp::ParseStatus::kMalformed) {
    resp::AppendError(out_, "ERR " + r.error);
    service.CountRequest(Protocol::kResp, Command::kOther, false);
    closing_ = true;
    return Step::kStop;
  }
  pos += r.consumed;
  ++handled_;
  if (const Lane lane = LaneOf(service, r.args); lane != Lane::kLoop) {
    std::vector<std::string> args(r.args.begin(), r.args.end());
    Offload(lane,
            [&service, args = std::move(args)](Session& session, std::string& out, bool& close) {
              const std::vector<std::string_view> views(args.begin(), args.end());
              HandleResp(service, session, views, out, close);
            });
    return Step::kStop;
  }
  bool close = false;
  HandleResp(service, session_, r.args, out_, close);
  if (close) closing_ = true;
  return Step::kGoOn;
}

void Connection::QueueWrite() {
  busy_ = true;  // Drain waits for the queued replies
  if (writing_ || held.load()) return;
  busy_ = false;
  Write();
}

void Connection::Write() {
  // Most replies fit the socket buffer: write them at once, and only wait when it is full
  // (plain TCP; TLS writes go through the stream's own writes).
  asio::error_code ec;
  std::size_t written = 0;
  while (tls_ == nullptr && written < out_.size()) {
    const std::size_t n =
        socket_.write_some(asio::buffer(out_.data() + written, out_.size() - written), ec);
    if (ec) break;
    written += n;
    sent_total_.fetch_add(n, std::memory_order_relaxed);
  }
  if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
    Close();
    return;
  }
  if (written < out_.size()) {
    out_.erase(0, written);
    busy_ = true;
    writing_ = true;
    write_pos_ = 0;
    write_since_ns.store(NowNs());
    WriteSome();
    return;
  }
  out_.clear();
  AfterWrite();
}

void Connection::WriteSome() {
  const auto rest = asio::buffer(out_.data() + write_pos_, out_.size() - write_pos_);
  auto done = [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
    self->OnWritten(ec, n);
  };
  if (tls_ != nullptr) {
    tls_->async_write_some(rest, std::move(done));
  } else {
    socket_.async_write_some(rest, std::move(done));
  }
}

void Connection::OnWritten(const asio::error_code& ec, std::size_t n) {
  write_pos_ += n;
  sent_total_.fetch_add(n, std::memory_order_relaxed);
  if (!ec && write_pos_ < out_.size()) {
    WriteSome();
    return;
  }
  writing_ = false;
  busy_ = false;
  write_since_ns.store(0);
  write_pos_ = 0;
  out_.clear();
  out_.swap(held_);  // replies that came meanwhile
  // held_ now has the written buffer: a large one is given back here (nothing accounts for
  // held_; a 43 MB reply's buffer stayed until the connection closed).
  if (held_.capacity() > kKeptCapacity) std::string().swap(held_);
  if (ec) {
    Close();
    return;
  }
  AfterWrite();
}

void Connection::AfterWrite() {
  if (out_.empty() && (closing_ || draining_)) {
    Close();
    return;
  }
  // Activity is the last reply, not the last read: a pipeline can take most of the idle
  // timeout to answer (a clock read per request, about 0.2% of its CPU).
  last_activity_ = SteadyClock::now();
  Account();
  if (in_.empty() && !pending_ && out_.empty()) {
    Read();
    return;
  }
  // Requests are buffered (the output bound stopped them). Posted, so that the loop's other
  // connections get their turn between two rounds of this one's pipeline.
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->in_.empty() && !self->pending_ && self->out_.empty()) {
      self->Read();
    } else {
      self->Continue();
    }
  });
}

void Connection::Drain() {
  draining_ = true;
  if (!busy_ && !pending_) Close();
}

void Connection::Close() {
  if (closed_) return;
  closed_ = true;
  asio::error_code ignored;
  idle_timer_.cancel();
  fd_.store(-1);
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  partial_since_ns.store(0);
  Account();  // its buffers leave the budget (freed with the connection)
  server_.service().ConnectionClosed(protocol_);
  server_.Unregister(this);
}

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
  SEKKA_RETURN_IF_ERROR(server->Listen());
  return std::unique_ptr<Server>(std::move(server));
}

}  // namespace sekka::server
