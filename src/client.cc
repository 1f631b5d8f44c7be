// sekka::Client (include/sekka/client.h): the buffer, the refill thread, and a small blocking
// RESP2 connection over POSIX sockets with poll() timeouts.

#include "sekka/client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace sekka {
namespace {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using std::chrono::milliseconds;

// The most ids one batch may hold: the server's largest server.max_batch.
constexpr std::size_t kMaxBatch = 10'000'000;

// A server's error reply, "-PREFIX message", and what the client does with it.
struct ServerError {
  std::string prefix;
  std::string message;
  bool failover() const {
    return prefix == "LEASELOST" || prefix == "CLOCKBACKWARDS" || prefix == "UNAVAILABLE";
  }
  bool auth() const { return prefix == "NOAUTH" || prefix == "WRONGPASS"; }
};

// A transport failure (connect, send, receive, a timeout, bytes that are not RESP).
struct TransportError {
  std::string message;
  bool timed_out = false;
  // It came before any byte of the reply, and is not a timeout: the server had closed the
  // connection (its idle timeout, a restart), and the command can be sent again on a new one.
  bool stale = false;
  bool closing = false;  // the client is closing: nothing is tried any more
};

// OpenSSL's oldest queued error as text ("no reason" when there is none), queue cleared.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no reason";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

// The client's TLS context (ClientOptions::tls_*), or null for plain TCP. Errors:
// kInvalidArgument naming the option that cannot be used.
Result<std::shared_ptr<SSL_CTX>> TlsContext(const ClientOptions& o) {
  if (o.tls_ca_file.empty() && o.tls_cert_file.empty() && o.tls_key_file.empty()) {
    return std::shared_ptr<SSL_CTX>();
  }
  if (o.tls_ca_file.empty()) {
    return InvalidArgument("tls_ca_file is empty: give the CA file of the servers, or \"system\"");
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return InvalidArgument("tls_cert_file and tls_key_file go together: give both or neither");
  }
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (ctx == nullptr) return Internal("SSL_CTX_new: " + OpenSslError());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // An encrypted key fails here, never a passphrase prompt on the terminal (OpenSSL's default).
  SSL_CTX_set_default_passwd_cb(ctx.get(), [](char*, int, int, void*) { return 0; });
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  const bool cas = o.tls_ca_file == "system" ? SSL_CTX_set_default_verify_paths(ctx.get()) == 1
                                             : SSL_CTX_load_verify_locations(
                                                   ctx.get(), o.tls_ca_file.c_str(), nullptr) == 1;
  if (!cas) {
    return InvalidArgument(
        fmt::format("tls_ca_file = \"{}\" cannot be used: {}", o.tls_ca_file, OpenSslError()));
  }
  if (!o.tls_cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(ctx.get(), o.tls_cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx.get(), o.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
       SSL_CTX_check_private_key(ctx.get()) != 1)) {
    return InvalidArgument(
        fmt::format("tls_cert_file = \"{}\" with tls_key_file = \"{}\" cannot be used: {}",
                    o.tls_cert_file, o.tls_key_file, OpenSslError()));
  }
  return ctx;
}

// One connection, used by the refill thread only.
class Connection {
 public:
  ~Connection() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
  }

  // Connects to `host`:`port`, trying each of its addresses, all within `timeout` (the name's
  // lookup and, with `tls`, the handshake included). A write to `wake` (the client closing)
  // ends any wait at once.
  static std::optional<TransportError> Open(const std::string& host, int port, milliseconds timeout,
                                            int wake, SSL_CTX* tls,
                                            std::unique_ptr<Connection>& out) {
    const TimePoint deadline = SteadyClock::now() + timeout;
    std::shared_ptr<addrinfo> found;
    if (auto e = Resolve(host, port, timeout, found)) return e;
    std::string last = "no address";
    for (addrinfo* a = found.get(); a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        last = std::strerror(errno);
        continue;
      }
      auto conn = std::unique_ptr<Connection>(new Connection(fd, wake));
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
        last = std::strerror(errno);
        continue;
      }
      conn->deadline_ = deadline;
      if (auto e = conn->Wait(POLLOUT)) {
        last = e->timed_out ? fmt::format("connect timed out after {} ms", timeout.count())
                            : e->message;
        if (e->timed_out || e->closing)
          return TransportError{last, e->timed_out, false, e->closing};
        continue;
      }
      int error = 0;
      socklen_t len = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0) {
        last = std::strerror(error);
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (tls != nullptr) {
        if (auto e = conn->Handshake(tls, host)) return e;
      }
      out = std::move(conn);
      return std::nullopt;
    }
    return TransportError{last};
  }

  // Sends a command and reads its reply; an error reply comes back in `error`. With `ids`, the
  // command asks for a batch of `expect` ids, which come back there (BatchIds says what is
  // accepted).
  std::optional<TransportError> Call(const std::vector<std::string>& args, milliseconds timeout,
                                     std::vector<std::int64_t>* ids, std::size_t expect,
                                     std::optional<ServerError>* error) {
    received_ = in_.size() > start_;
    std::optional<TransportError> e = Exchange(args, timeout, ids, expect, error);
    if (e) e->stale = !received_ && !e->timed_out;
    return e;
  }

 private:
  std::optional<TransportError> Exchange(const std::vector<std::string>& args, milliseconds timeout,
                                         std::vector<std::int64_t>* ids, std::size_t expect,
                                         std::optional<ServerError>* error) {
    std::string out = fmt::format("*{}\r\n", args.size());
    for (const std::string& a : args) {
      out += fmt::format("${}\r\n", a.size());
      out += a;
      out += "\r\n";
    }
    deadline_ = SteadyClock::now() + timeout;
    for (std::size_t sent = 0; sent < out.size();) {
      short wait = 0;
      const ssize_t n = Send(out.data() + sent, out.size() - sent, wait);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        continue;
      }
      if (wait == 0)
        return TransportError{n == 0 ? "the server closed the connection" : LastError()};
      if (auto e = Wait(wait)) return e;
    }
    std::string line;
    if (auto e = Line(line)) return e;
    if (line.empty()) return TransportError{"an empty reply line"};
    const char kind = line[0];
    const std::string_view rest = std::string_view(line).substr(1);
    if (kind == '-') {
      const std::size_t space = rest.find(' ');
      *error = ServerError{std::string(rest.substr(0, space)), std::string(rest)};
      return std::nullopt;
    }
    if (ids) return BatchIds(kind, rest, expect, args[0] == "SEG.NEXT", *ids);
    if (kind == '+' || kind == ':') return std::nullopt;  // AUTH's +OK: nothing to keep
    std::string bulk;
    if (kind == '$') return Bulk(rest, bulk);
    return TransportError{fmt::format("a reply starting with '{}'", kind)};
  }

  // A batch's reply: an array of exactly `n` distinct ids (integers, or decimal bulk strings of
  // at most 20 characters), not negative, increasing if `increasing` (a tag's; a snowflake
  // layout may be descending or sharded) (docs/contract.md). Anything else is a broken server,
  // failed over like a connection error; the first bad element ends the read (the connection
  // is then dropped).
  std::optional<TransportError> BatchIds(char kind, std::string_view rest, std::size_t n,
                                         bool increasing, std::vector<std::int64_t>& ids) {
    std::int64_t count = 0;
    if (kind != '*' || !Number(rest, count) || count != static_cast<std::int64_t>(n)) {
      return TransportError{fmt::format("a reply to a batch of {} that is not {} ids", n, n)};
    }
    ids.clear();
    ids.reserve(n);
    std::string line;
    for (std::size_t i = 0; i < n; ++i) {
      if (auto e = Line(line)) return e;
      std::int64_t v = -1;
      const std::string_view element = std::string_view(line).substr(line.empty() ? 0 : 1);
      if (!line.empty() && line[0] == ':' && !Number(element, v)) v = -1;
      std::int64_t length = 0;
      if (!line.empty() && line[0] == '$' && Number(element, length) && length <= 20) {
        std::string bulk;  // an id: at most 20 characters
        if (auto e = Bulk(element, bulk)) return e;
        if (!Number(bulk, v)) v = -1;
      }
      if (v < 0 || (increasing && !ids.empty() && v <= ids.back())) {
        return TransportError{fmt::format("not an id, or not increasing, in a batch, at {}", i)};
      }
      ids.push_back(v);
    }
    if (!increasing) {
      std::vector<std::int64_t> sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
        return TransportError{"an id twice in a batch"};
      }
    }
    return std::nullopt;
  }

  Connection(int fd, int wake) : fd_(fd), wake_(wake) {}

  // getaddrinfo has no timeout of its own: a name (not an address literal) is looked up on a
  // thread of its own, which may outlive this call and then frees what it found.
  static std::optional<TransportError> Resolve(const std::string& host, int port,
                                               milliseconds timeout,
                                               std::shared_ptr<addrinfo>& out) {
    struct Lookup {
      std::mutex mu;
      std::condition_variable done_cv;
      bool done = false;
      int rc = 0;
      std::shared_ptr<addrinfo> found;
    };
    // An address literal needs no lookup, and no thread.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST;
    addrinfo* literal = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &literal) == 0) {
      out = std::shared_ptr<addrinfo>(literal, ::freeaddrinfo);
      return std::nullopt;
    }
    auto lookup = std::make_shared<Lookup>();
    std::thread([lookup, host, service = std::to_string(port)] {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* found = nullptr;
      const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
      std::lock_guard lock(lookup->mu);
      lookup->rc = rc;
      if (rc == 0) lookup->found = std::shared_ptr<addrinfo>(found, ::freeaddrinfo);
      lookup->done = true;
      lookup->done_cv.notify_all();
    }).detach();
    std::unique_lock lock(lookup->mu);
    if (!lookup->done_cv.wait_for(lock, timeout, [&] { return lookup->done; })) {
      return TransportError{fmt::format("looking up {} took over {} ms", host, timeout.count()),
                            true};
    }
    if (lookup->rc != 0) {
      return TransportError{fmt::format("cannot resolve {}: {}", host, ::gai_strerror(lookup->rc))};
    }
    out = lookup->found;
    return std::nullopt;
  }

  static bool Number(std::string_view s, std::int64_t& v) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty();
  }

  // Waits for `events` on the socket until the command's deadline, or until the client closes.
  std::optional<TransportError> Wait(short events) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - SteadyClock::now());
    if (left.count() <= 0) return TransportError{"no reply within the timeout", true};
    pollfd p[2] = {{fd_, events, 0}, {wake_, POLLIN, 0}};
    const int ready = ::poll(p, 2, static_cast<int>(left.count()) + 1);
    if (ready < 0 && errno != EINTR) return TransportError{std::strerror(errno)};
    if (ready == 0) return TransportError{"no reply within the timeout", true};
    if (p[1].revents != 0) return TransportError{"the client is closed", false, false, true};
    return std::nullopt;
  }

  std::optional<TransportError> Fill() {
    char chunk[65536];
    for (;;) {
      short wait = 0;
      const ssize_t n = Recv(chunk, sizeof chunk, wait);
      if (n > 0) {
        in_.append(chunk, static_cast<std::size_t>(n));
        received_ = true;
        return std::nullopt;
      }
      if (wait == 0)
        return TransportError{n == 0 ? "the server closed the connection" : LastError()};
      if (auto e = Wait(wait)) return e;
    }
  }

  // The transport, plain or TLS. Send and Recv return the bytes moved (> 0); else 0 for a
  // closed connection or -1 for an error (LastError), with `wait` = 0, or -1 with `wait` the
  // poll event to wait for before the same call is made again (a TLS record may need the
  // other direction: a read that must write, or the reverse).
  ssize_t Send(const char* data, std::size_t size, short& wait) {
    if (ssl_ == nullptr) {
      const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) wait = POLLOUT;
      if (n < 0) error_ = std::strerror(errno);
      return n;
    }
    return TlsResult(SSL_write(ssl_, data, static_cast<int>(std::min<std::size_t>(size, 1 << 30))),
                     wait);
  }

  ssize_t Recv(char* data, std::size_t size, short& wait) {
    if (ssl_ == nullptr) {
      const ssize_t n = ::recv(fd_, data, size, 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) wait = POLLIN;
      if (n < 0) error_ = std::strerror(errno);
      return n;
    }
    return TlsResult(SSL_read(ssl_, data, static_cast<int>(size)), wait);
  }

  ssize_t TlsResult(int n, short& wait) {
    if (n > 0) return n;
    switch (SSL_get_error(ssl_, n)) {
      case SSL_ERROR_WANT_READ:
        wait = POLLIN;
        return -1;
      case SSL_ERROR_WANT_WRITE:
        wait = POLLOUT;
        return -1;
      case SSL_ERROR_ZERO_RETURN:
        return 0;
      case SSL_ERROR_SYSCALL:
        error_ = errno != 0 ? std::strerror(errno) : "the server closed the connection";
        ERR_clear_error();
        return -1;
      default:
        error_ = "TLS: " + OpenSslError();
        return -1;
    }
  }

  std::string LastError() const { return error_; }

  // The TLS handshake on the connected socket, by deadline_; the server's certificate must be
  // signed by the context's CAs and name `host` (an IP address or a DNS name).
  std::optional<TransportError> Handshake(SSL_CTX* tls, const std::string& host) {
    ssl_ = SSL_new(tls);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1)
      return TransportError{"TLS: " + OpenSslError()};
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      ERR_clear_error();
      X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
      SSL_set_tlsext_host_name(ssl_, host.c_str());
    }
    for (;;) {
      const int rc = SSL_connect(ssl_);
      if (rc == 1) return std::nullopt;
      short wait = 0;
      TlsResult(rc, wait);
      if (wait == 0) {
        const long verify = SSL_get_verify_result(ssl_);
        return TransportError{verify != X509_V_OK
                                  ? fmt::format("TLS: the server's certificate: {}",
                                                X509_verify_cert_error_string(verify))
                                  : "TLS handshake: " + error_};
      }
      if (auto e = Wait(wait)) {
        if (e->timed_out) e->message = "the TLS handshake did not end within the connect timeout";
        return e;
      }
    }
  }

  std::optional<TransportError> Line(std::string& line) {
    for (;;) {
      const std::size_t end = in_.find("\r\n", start_);
      if (end != std::string::npos) {
        line.assign(in_, start_, end - start_);
        start_ = end + 2;
        if (start_ == in_.size()) {
          in_.clear();
          start_ = 0;
        }
        return std::nullopt;
      }
      if (in_.size() - start_ > (1 << 20)) return TransportError{"a reply line over 1 MiB"};
      if (start_ > 0) {
        in_.erase(0, start_);
        start_ = 0;
      }
      if (auto e = Fill()) return e;
    }
  }

  std::optional<TransportError> Bulk(std::string_view length, std::string& out) {
    std::int64_t n = 0;
    if (!Number(length, n) || n < -1 || n > (64 << 20)) return TransportError{"a bad bulk length"};
    if (n < 0) {
      out.clear();
      return std::nullopt;
    }
    const auto size = static_cast<std::size_t>(n);
    while (in_.size() - start_ < size + 2) {
      if (auto e = Fill()) return e;
    }
    out.assign(in_, start_, size);
    start_ += size + 2;
    return std::nullopt;
  }

  int fd_;
  SSL* ssl_ = nullptr;     // TLS over fd_; null: plain TCP
  std::string error_;      // the last Send/Recv error
  int wake_;               // the client's eventfd: readable once it closes
  bool received_ = false;  // a byte of the current command's reply came
  std::string in_;
  std::size_t start_ = 0;
  TimePoint deadline_;
};

struct Server {
  std::string host;
  int port = 0;
  std::string name;
  std::unique_ptr<Connection> conn;
  TimePoint down_until{};
  milliseconds backoff{0};
  std::string last_error;
};

struct Batch {
  std::vector<std::int64_t> ids;
  std::size_t pos = 0;
  TimePoint expires;
};

struct Stream {
  std::optional<std::string> tag;  // none: snowflake ids
  std::deque<Batch> batches;
  std::size_t size = 0;
  std::size_t left = 0;  // ids in batches not handed out yet
  bool wanted = false;
  bool busy = false;
  std::uint64_t attempts = 0;
  std::optional<Error> error;  // the last refill's failure
  TimePoint retry_at{};
  std::int64_t high = -1;  // tags: the highest id queued or handed out
  std::optional<TimePoint> last_refill;
};

Result<std::pair<std::string, int>> ParseServer(std::string_view text, std::size_t index) {
  const std::size_t colon = text.rfind(':');
  int port = 0;
  if (colon != std::string_view::npos && colon > 0) {
    const std::string_view p = text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc() || end != p.data() + p.size()) port = 0;
  }
  if (port < 1 || port > 65535) {
    return InvalidArgument(
        fmt::format("servers[{}] = \"{}\" is not host:port (a port from 1 to 65535)", index, text));
  }
  std::string host(text.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::pair(host, port);
}

}  // namespace

struct Client::Impl {
  ClientOptions o;
  std::shared_ptr<SSL_CTX> tls;  // null: plain TCP
  std::vector<Server> servers;   // the refill thread's
  std::size_t current = 0;       // the refill thread's

  mutable std::mutex mu;
  std::condition_variable changed;
  Stream ids;                                       // guarded by mu
  std::map<std::string, Stream, std::less<>> tags;  // guarded by mu
  bool closed = false;                              // guarded by mu
  ClientStats counters;                             // guarded by mu (buffered: computed)
  milliseconds max_wait{0};
  std::thread refiller;
  int wake = -1;          // an eventfd, written once by Close(): ends every network wait
  std::mutex closing_mu;  // one Close() at a time

  ~Impl() {
    if (wake >= 0) ::close(wake);
  }

  // An id from the buffer, asking for a refill at the low-water mark. REQUIRES: mu held.
  std::optional<std::int64_t> Pop(Stream& s) {
    const TimePoint now = SteadyClock::now();
    while (!s.batches.empty() && (s.batches.front().pos == s.batches.front().ids.size() ||
                                  s.batches.front().expires <= now)) {
      const Batch& b = s.batches.front();
      s.left -= b.ids.size() - b.pos;
      counters.dropped += b.ids.size() - b.pos;
      s.batches.pop_front();
    }
    if (static_cast<double>(s.left) < o.low_water * static_cast<double>(s.size) && !s.wanted &&
        !s.busy && now >= s.retry_at) {
      s.wanted = true;
      changed.notify_all();
    }
    if (s.batches.empty()) return std::nullopt;
    Batch& b = s.batches.front();
    --s.left;
    ++counters.served;
    return b.ids[b.pos++];
  }

  Result<std::int64_t> Take(Stream& s, std::unique_lock<std::mutex>& lock) {
    if (closed) return Cancelled("the client is closed");
    if (std::optional<std::int64_t> v = Pop(s)) return *v;
    std::uint64_t start = s.attempts;
    const TimePoint deadline = SteadyClock::now() + max_wait;
    for (;;) {
      if (!s.wanted && !s.busy) {
        s.wanted = true;
        changed.notify_all();
      }
      if (changed.wait_until(lock, deadline) == std::cv_status::timeout &&
          SteadyClock::now() >= deadline) {
        return Unavailable(fmt::format("no ids within {} ms from {}", max_wait.count(),
                                       fmt::join(o.servers, ", ")));
      }
      if (closed) return Cancelled("the client is closed");
      if (std::optional<std::int64_t> v = Pop(s)) return *v;
      if (s.attempts > start) {
        if (s.error) return *s.error;
        start = s.attempts;  // a refill with nothing usable: ask again
      }
    }
  }

  Stream* Wanted() {
    if (ids.wanted) return &ids;
    for (auto& [name, s] : tags) {
      if (s.wanted) return &s;
    }
    return nullptr;
  }

  void RefillLoop() {
    for (;;) {
      Stream* s = nullptr;
      std::size_t n = 0;
      std::vector<std::string> args;
      {
        std::unique_lock lock(mu);
        changed.wait(lock, [&] { return closed || (s = Wanted()) != nullptr; });
        if (closed) return;
        s->wanted = false;
        s->busy = true;
        const TimePoint now = SteadyClock::now();
        if (s->last_refill) {  // adapt: how long did the last batch last?
          const auto lasted = now - *s->last_refill;
          if (lasted < o.target_refill / 2) {
            s->size = std::min(o.max_batch, s->size * 2);
          } else if (lasted > o.target_refill * 2) {
            s->size = std::max(o.min_batch, s->size / 2);
          }
        }
        n = s->size;
        if (s->tag) {
          args = {"SEG.NEXT", *s->tag, std::to_string(n)};
        } else {
          args = {"ID.BATCH", std::to_string(n)};
        }
      }
      std::vector<std::int64_t> got;
      Status status = Call(args, n, got);
      std::lock_guard lock(mu);
      s->busy = false;
      if (!status.ok() && LearnMaxBatch(status.error(), n)) {
        s->size = o.max_batch;
        s->wanted = true;  // at once, with the server's size: not a failure
        continue;
      }
      ++s->attempts;
      if (status.ok()) {
        s->error.reset();
        ++counters.refills;
        s->last_refill = SteadyClock::now();
        if (s->tag) {  // a tag's ids stay increasing within the client
          const std::size_t before = got.size();
          std::erase_if(got, [&](std::int64_t id) { return id <= s->high; });
          counters.dropped += before - got.size();
        }
        if (!got.empty()) {
          s->high = std::max(s->high, got.back());
          s->left += got.size();
          s->batches.push_back({std::move(got), 0, *s->last_refill + o.validity});
        }
      } else {
        s->error = status.error();
        s->retry_at = SteadyClock::now() + o.backoff_min;
      }
      changed.notify_all();
    }
  }

  // A batch of `n` refused because the server allows fewer ("... allowed 1 to M", its
  // server.max_batch): the client keeps to M from now on. REQUIRES: mu held.
  bool LearnMaxBatch(const Error& error, std::size_t n) {
    constexpr std::string_view kAllowed = ": ERR count \"";
    constexpr std::string_view kMost = "allowed 1 to ";
    const std::size_t at = error.message.rfind(kMost);
    std::size_t most = 0;
    if (error.code != ErrorCode::kInvalidArgument ||
        error.message.find(kAllowed) == std::string::npos || at == std::string::npos) {
      return false;
    }
    const char* end = error.message.data() + error.message.size();
    const auto [ptr, ec] = std::from_chars(error.message.data() + at + kMost.size(), end, most);
    if (ec != std::errc() || ptr != end || most == 0 || most >= n) return false;
    o.max_batch = most;
    o.min_batch = std::min(o.min_batch, most);
    return true;
  }

  // Opens `s`'s connection and authenticates; `error` holds a refused token.
  std::optional<TransportError> Connect(Server& s, std::optional<ServerError>& error) {
    std::optional<TransportError> t =
        Connection::Open(s.host, s.port, o.connect_timeout, wake, tls.get(), s.conn);
    if (!t && !o.token.empty()) {
      t = s.conn->Call({"AUTH", o.token}, o.timeout, nullptr, 0, &error);
    }
    return t;
  }
  Status Refused(Server& s, const ServerError& error) {
    s.conn.reset();
    return Unauthenticated(
        fmt::format("sekka server {} refused the token: {}", s.name, error.message));
  }

  // The `count` ids of the first server that answers batch command `args`, from the current
  // one (refill thread only).
  Status Call(const std::vector<std::string>& args, std::size_t count,
              std::vector<std::int64_t>& out) {
    const TimePoint now = SteadyClock::now();
    const std::size_t n = servers.size();
    std::vector<std::size_t> up;
    std::size_t soonest = current;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (current + k) % n;
      if (servers[i].down_until <= now) up.push_back(i);
      if (servers[i].down_until < servers[soonest].down_until) soonest = i;
    }
    if (up.empty()) up.push_back(soonest);  // all backing off: the one back first
    std::vector<std::size_t> tried;
    for (std::size_t i : up) {
      Server& s = servers[i];
      std::optional<ServerError> error;
      std::optional<TransportError> transport;
      const bool reused = s.conn != nullptr;
      if (!s.conn) transport = Connect(s, error);
      if (!transport && error) return Refused(s, *error);
      if (!transport) transport = s.conn->Call(args, o.timeout, &out, count, &error);
      // A connection made before this call that failed before any byte of the reply (the
      // server closed it while idle, or restarted) is replaced and the command sent once more,
      // without counting against the server: a command it did run costs a range, never an id.
      if (transport && transport->stale && reused) {
        s.conn.reset();
        transport = Connect(s, error);
        if (!transport && error) return Refused(s, *error);
        if (!transport) transport = s.conn->Call(args, o.timeout, &out, count, &error);
      }
      if (!transport && !error) {
        s.backoff = milliseconds(0);
        s.down_until = TimePoint{};
        if (i != current) {
          std::lock_guard lock(mu);
          ++counters.failovers;
          current = i;
        }
        return Status::Ok();
      }
      if (error && error->auth()) {
        s.conn.reset();
        return Unauthenticated(fmt::format("sekka server {}: {}", s.name, error->message));
      }
      if (error && !error->failover()) {
        return InvalidArgument(fmt::format("sekka server {}: {}", s.name, error->message));
      }
      if (transport && transport->closing) return Cancelled("the client is closed");
      s.last_error = error ? error->message : transport->message;
      {
        std::lock_guard lock(mu);
        ++counters.server_errors;
      }
      tried.push_back(i);
      s.conn.reset();
      s.backoff = std::min(o.backoff_max, std::max(o.backoff_min, s.backoff * 2));
      s.down_until = SteadyClock::now() + s.backoff;
    }
    // Every server, with its last error (those backing off were not tried this time).
    std::vector<std::string> each;
    for (std::size_t i = 0; i < n; ++i) {
      const bool now_tried = std::find(tried.begin(), tried.end(), i) != tried.end();
      each.push_back(fmt::format("{} ({}{})", servers[i].name, servers[i].last_error,
                                 now_tried ? "" : "; backing off"));
    }
    return Unavailable(fmt::format("no sekka server could serve {}: {}", fmt::join(args, " "),
                                   fmt::join(each, ", ")));
  }
};

Result<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->o = options;
  if (options.servers.empty())
    return InvalidArgument("servers is empty: give at least one host:port");
  for (std::size_t i = 0; i < options.servers.size(); ++i) {
    Result<std::pair<std::string, int>> hp = ParseServer(options.servers[i], i);
    if (!hp.ok()) return std::move(hp).error();
    Server s;
    s.host = hp->first;
    s.port = hp->second;
    s.name = options.servers[i];
    impl->servers.push_back(std::move(s));
  }
  if (!(1 <= options.min_batch && options.min_batch <= options.batch &&
        options.batch <= options.max_batch && options.max_batch <= kMaxBatch)) {
    return InvalidArgument(fmt::format(
        "batch sizes min_batch {}, batch {}, max_batch {}: allowed 1 <= min_batch <= batch <= "
        "max_batch <= {}",
        options.min_batch, options.batch, options.max_batch, kMaxBatch));
  }
  if (!(options.low_water > 0 && options.low_water < 1)) {
    return InvalidArgument(
        fmt::format("low_water = {}: allowed above 0 and below 1", options.low_water));
  }
  constexpr milliseconds kDay{86'400'000};  // the longest time option: deadlines stay in range
  for (auto [name, value] :
       {std::pair{"connect_timeout", options.connect_timeout},
        std::pair{"timeout", options.timeout}, std::pair{"target_refill", options.target_refill},
        std::pair{"validity", options.validity}, std::pair{"backoff_min", options.backoff_min},
        std::pair{"backoff_max", options.backoff_max}}) {
    if (value.count() <= 0 || value > kDay) {
      return InvalidArgument(fmt::format("{} = {} ms: allowed 1 ms to {} ms (a day)", name,
                                         value.count(), kDay.count()));
    }
  }
  if (options.backoff_max < options.backoff_min) {
    return InvalidArgument(fmt::format("backoff_max = {} ms: allowed at least backoff_min ({} ms)",
                                       options.backoff_max.count(), options.backoff_min.count()));
  }
  Result<std::shared_ptr<SSL_CTX>> tls = TlsContext(options);
  if (!tls.ok()) return std::move(tls).error();
  impl->tls = std::move(*tls);
  impl->ids.size = options.batch;
  impl->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake < 0) return Internal(fmt::format("eventfd: {}", std::strerror(errno)));
  impl->max_wait =
      2 * (options.connect_timeout + options.timeout) * static_cast<int>(options.servers.size()) +
      milliseconds(1000);
  Impl* raw = impl.get();
  impl->refiller = std::thread([raw] { raw->RefillLoop(); });
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<std::unique_ptr<Client>> Client::Create(std::string_view servers) {
  ClientOptions o;
  while (!servers.empty()) {
    const std::size_t comma = servers.find(',');
    o.servers.emplace_back(servers.substr(0, comma));
    servers = comma == std::string_view::npos ? std::string_view() : servers.substr(comma + 1);
  }
  return Create(o);
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() { Close(); }

void Client::Close() {
  std::lock_guard closing(impl_->closing_mu);
  {
    std::lock_guard lock(impl_->mu);
    impl_->closed = true;
  }
  const std::uint64_t one = 1;
  (void)!::write(impl_->wake, &one, sizeof one);  // cannot fail: the counter is far from full
  impl_->changed.notify_all();
  if (impl_->refiller.joinable()) impl_->refiller.join();
  for (Server& s : impl_->servers) s.conn.reset();  // the refill thread's, now ended
}

Result<Id> Client::NextId() {
  std::unique_lock lock(impl_->mu);
  return impl_->Take(impl_->ids, lock);
}

Status Client::NextIds(std::span<Id> out) {
  std::unique_lock lock(impl_->mu);
  for (Id& id : out) {
    Result<std::int64_t> v = impl_->Take(impl_->ids, lock);
    if (!v.ok()) return std::move(v).error();
    id = *v;
  }
  return Status::Ok();
}

Result<std::vector<Id>> Client::NextIds(std::size_t n) {
  std::vector<Id> out(n);
  if (Status s = NextIds(std::span<Id>(out)); !s.ok()) return std::move(s).error();
  return out;
}

Result<std::int64_t> Client::Next(std::string_view tag) {
  if (tag.empty()) return InvalidArgument("tag is empty");
  std::unique_lock lock(impl_->mu);
  auto it = impl_->tags.find(tag);
  if (it == impl_->tags.end()) {
    Stream s;
    s.tag = std::string(tag);
    s.size = impl_->o.batch;
    it = impl_->tags.emplace(std::string(tag), std::move(s)).first;
  }
  return impl_->Take(it->second, lock);
}

ClientStats Client::stats() const {
  std::lock_guard lock(impl_->mu);
  ClientStats st = impl_->counters;
  st.buffered = impl_->ids.left;
  for (const auto& [name, s] : impl_->tags) st.buffered += s.left;
  return st;
}

}  // namespace sekka
