// server/connection.h
//
// One client connection of the event loops (server/server.cc): it reads, handles the complete
// requests in its buffer until about 1 MiB of replies waits (back-pressure), writes them with
// one write, and goes on: a client that pipelines gets batched replies, and a client that does
// not read its replies stops being read and served (no unbounded buffers, no loop held by one
// connection). What it asks of the server that holds it (the service, the budget, auth turns,
// the lanes' pools) is ConnectionHost. Internal to server/.
//
// Thread-safety: a connection runs on its loop's executor; Load, ClientStalled and `chosen`
// are read from other loops (the limits' scans).

#ifndef SEKKA_SERVER_CONNECTION_H_
#define SEKKA_SERVER_CONNECTION_H_

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/admission.h"
#include "server/drained_read.h"
#include "server/handlers.h"
#include "server/http.h"
#include "server/resp.h"

namespace sekka::server {

using asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
class Connection;

// What a connection asks of the server that holds it.
class ConnectionHost {
 public:
  virtual Service& service() = 0;
  virtual const ServerConfig& config() const = 0;
  // The admission rules' time (server/admission.h): its MonotonicMillis must be
  // CLOCK_MONOTONIC, the steady_clock the connection's timers wait on (the service's
  // SystemClock in `sekka serve`; a FakeClock is for the rules' unit tests, not a server).
  virtual Clock& clock() const = 0;
  // The connection's buffers grew or shrank by `delta` bytes (the memory budget).
  virtual void AddBuffered(std::int64_t delta) = 0;
  // How long failed credentials from `host` (ClientHost) wait for their answer, nullopt: close
  // unanswered (admission.h, Turns).
  virtual std::optional<std::int64_t> FailureTurn(const std::string& host) = 0;
  // How long a TLS handshake from `host` waits before it starts, nullopt: close.
  virtual std::optional<std::int64_t> HandshakeTurn(const std::string& host) = 0;
  // `c` authenticated: it leaves the unauthenticated connections (admission.h).
  virtual void Authenticated(Connection* c) = 0;
  // The thread pool of a lane (commands.h) other than kLoop.
  virtual asio::thread_pool& pool(Lane lane) = 0;
  // True once stopping has let go of the connections still open after the grace period.
  virtual bool abandoned() const = 0;
  // `c` closed, letting go of `freed` bytes of buffers (and a handshake's memory).
  virtual void Unregister(Connection* c, std::size_t freed) = 0;

 protected:
  ~ConnectionHost() = default;
};

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
// Whether a new connection starts authenticated: only plain TCP to a server without
// server.auth_token; else it is one of the unauthenticated connections (admission.h) until it
// presents the token, or with none set, until its TLS handshake is done.
inline bool StartsAuthenticated(const ServerConfig& config, bool tls) {
  return config.auth_token.empty() && !tls;
}
constexpr BufferLimits kUntrustedLimits{64 * 1024, 64 * 1024};
// One connection's turn on its loop ends once it has made this much output (then the others
// that are ready get theirs): a client pipelining batches cannot hold the loop for the 1 MiB of
// replies its back-pressure allows, which at 4,096 ids per ms is many milliseconds of the
// generator's time (the hostile-client campaign saw PING wait 0.7 s behind 25 such clients).
constexpr std::size_t kTurnOutput = 64 * 1024;
// What OpenSSL holds for a TLS handshake under way, counted in the memory budget while it
// lasts: about 106 KiB after a ClientHello (measured: 1,000 half-finished handshakes took RSS
// from 17 to 123 MiB).
constexpr std::size_t kHandshakeBytes = 112 * 1024;
// A buffer larger than this is given back when it empties (an idle connection after a large
// batch keeps no megabytes).
constexpr std::size_t kKeptCapacity = 64 * 1024;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  friend class RawSocket;  // it records the raw bytes its reads handled (handled_bytes_)
  // `tls` null: plain TCP.
  // `host`: the client's ClientHost.
  Connection(ConnectionHost& server, tcp::socket socket, std::string host, Protocol protocol,
             asio::ssl::context* tls);
  const std::string& host() const { return host_; }
  void Begin();
  void Drain();  // from its own executor
  // Closes it for breaking a limit (from its own executor): a request-timeout reply first
  // where the protocol has one.
  void Shed(ShedReason reason);
  asio::any_io_executor executor() { return socket_.get_executor(); }

  // Read from other loops' threads (the limits' choice of whom to close): what the admission
  // rules read of it (server/admission.h), its times the host clock's monotonic milliseconds.
  ConnectionLoad Load() const;
  std::atomic<bool> chosen{false};  // picked for closing already
  // From the budget's scan (one at a time, any thread): whether the client acknowledges what
  // the kernel holds for it slower than kMinDrainRate (DrainWatch).
  bool ClientStalled(std::int64_t now_ms);
  // For the idle timer: whether the kernel still holds replies for the client and it took some
  // since the last look (the first look gives it the benefit of the doubt). A client reading a
  // long reply is not idle, however long ago the server wrote it; one that stops reading is
  // closed an idle timeout later.
  bool StillReading();
  // Bytes from the client wait in the kernel, or were read and wait for their handler, and the
  // connection is reading (a read or its TLS handshake is under way, or it has not begun), so
  // it reads them soon (any thread): one that
  // has sent its credentials is not closed to make room before they are read. One the server
  // does not read (its output full, a handshake waiting its turn, a reply held) is no such.
  bool AboutToRead() const;
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
  // Waits for the client's first bytes (its ClientHello) before anything of TLS is made: a
  // silent connection holds no handshake memory (about 100 KiB each, counted only once made).
  void AwaitHello();
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
  // The reply of the request that was pending (Offload, AwaitStrict), on the loop: queued
  // after the write in flight, if any, and the connection goes on.
  void Deliver(std::string reply);
  // A strict request (`args`, already taken) that must wait for its tag's leader, with the
  // requests of the same tag in `behind` (taken too, `pos` moved past them): one call
  // answers them all, and no thread waits for it (StrictTags::NextAsync). False when `args` is
  // no such request; nothing is taken then.
  bool AwaitStrict(const std::vector<std::string_view>& args, std::string_view behind,
                   std::size_t& pos);
  // What a RESP request may be: smaller before credentials.
  const resp::Limits& RespLimits() const;
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
  // Authenticated: it presented server.auth_token, or with none set, it finished its TLS
  // handshake (plain TCP: at once). The larger limits apply, server.auth_timeout does not.
  bool trusted() const { return trusted_ || session_.authenticated; }
  void Trust();
  BufferLimits limits() const;
  // After Process: notes when an unfinished request began (the HTTP parser keeps the bytes of
  // one it has seen, so what is left in in_ does not tell).
  void TrackPartial(bool completed, bool need_more);
  // Gives back emptied large buffers and updates the budget (closing its largest user past it).
  void Account();
  // After credentials were judged (AUTH, HELLO AUTH, a token): right ones for the first time
  // take the connection out of the unauthenticated ones; for wrong ones, the reply and the close
  // wait for the host's turn (ServerImpl::FailureTurn).
  void AfterCredentials();
  // Progress: a read, a reply written, a request back from a lane's pool.
  void Touch() { active_ms_.store(NowMs(), std::memory_order_relaxed); }

  // The clock's monotonic milliseconds (admission's time).
  std::int64_t NowMs() const { return server_.clock().MonotonicMillis(); }

  ConnectionHost& server_;
  TcpSocket socket_;
  const std::string host_;
  asio::ssl::context* const tls_context_;  // null: plain TCP
  std::unique_ptr<TlsStream> tls_;         // over socket_, from the handshake on
  std::atomic<bool> handshaking_{false};
  asio::steady_timer idle_timer_;
  const Protocol protocol_;
  std::string in_;
  std::string out_;
  // The read buffer, kReadChunk bytes, left uninitialized: an idle connection's pages are
  // never touched (zero-filled, 5,000 idle connections held 80 MiB of them).
  std::unique_ptr<char[]> chunk_;
  http::RequestParser http_parser_;
  Session session_;
  resp::ParseResult parsed_;  // reused: its argument vector keeps its capacity
  resp::ParseResult ahead_;   // AwaitStrict's look at the requests behind
  asio::ip::address peer_;
  std::uint64_t handled_ = 0;         // requests taken from in_
  bool closing_ = false;              // close after the pending write
  bool busy_ = false;                 // replies are queued or a write is in flight
  std::atomic<bool> pending_{false};  // a request runs on a lane's pool
  // One read and one write at a time (the review of issue 24 saw two reads in flight into
  // chunk_ after pipelined blocking-pool requests, and a reply appended to out_ while an
  // async_write was sending it).
  std::atomic<bool> reading_{false};  // an async_read_some is in flight (AboutToRead)
  std::atomic<bool> begun_{false};    // Begin has run (AboutToRead)
  // Of socket_.received(), the bytes whose read handler has returned (AboutToRead).
  std::atomic<std::uint64_t> handled_bytes_{0};
  bool writing_ = false;       // an async_write is in flight: out_ is not touched
  std::string held_;           // a blocking-pool reply that came while writing_
  std::size_t write_pos_ = 0;  // what the write in flight has sent of out_
  std::atomic<int> fd_{-1};    // the socket's, for ClientStalled (-1 once closed)
  // Bytes handed to the socket so far (TLS: plaintext, which the records' overhead makes a
  // little less than the kernel holds).
  std::atomic<std::uint64_t> sent_total_{0};
  DrainWatch drain_;                               // ClientStalled's
  std::atomic<std::int64_t> partial_since_ms_{0};  // when its unfinished request began, or 0
  std::atomic<std::size_t> buffered_{0};           // the capacity of its buffers, as budgeted
  std::atomic<std::int64_t> write_since_ms_{0};    // when a write the socket did not take began
  const std::int64_t opened_ms_;                   // when it was accepted (server.auth_timeout)
  std::atomic<std::int64_t> active_ms_;            // its last progress (Touch)
  bool trusted_ = false;                           // trusted()
  std::atomic<bool> presented_token_{false};       // it presented server.auth_token
  std::atomic<bool> requested_{false};             // it has made a request (handled_ > 0)
  // Its replies wait for the host's auth turn (AwaitAuthTurn): QueueWrite waits, and the
  // budget counts its buffers.
  std::atomic<bool> held_for_turn_{false};
  std::optional<std::uint64_t> idle_acked_;  // StillReading's last look: bytes acknowledged
  bool draining_ = false;
  bool closed_ = false;
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_CONNECTION_H_
