// resp/resp_connection.h: the RESP connection of the C++ client and the Redis backends.

#include "resp/resp_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace sekka {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

}  // namespace

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no reason";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

Result<std::shared_ptr<SSL_CTX>> TlsClientContext(const TlsFiles& o) {
  if (o.ca_file.empty() && o.cert_file.empty() && o.key_file.empty()) {
    return std::shared_ptr<SSL_CTX>();
  }
  if (o.ca_file.empty()) {
    return InvalidArgument("tls_ca_file is empty: give the CA file of the servers, or \"system\"");
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    return InvalidArgument("tls_cert_file and tls_key_file go together: give both or neither");
  }
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (ctx == nullptr) return Internal("SSL_CTX_new: " + OpenSslError());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // An encrypted key fails here, never a passphrase prompt on the terminal (OpenSSL's default).
  SSL_CTX_set_default_passwd_cb(ctx.get(), [](char*, int, int, void*) { return 0; });
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  const bool cas = o.ca_file == "system"
                       ? SSL_CTX_set_default_verify_paths(ctx.get()) == 1
                       : SSL_CTX_load_verify_locations(ctx.get(), o.ca_file.c_str(), nullptr) == 1;
  if (!cas) {
    return InvalidArgument(
        fmt::format("tls_ca_file = \"{}\" cannot be used: {}", o.ca_file, OpenSslError()));
  }
  if (!o.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ctx.get(), o.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
       SSL_CTX_check_private_key(ctx.get()) != 1)) {
    return InvalidArgument(
        fmt::format("tls_cert_file = \"{}\" with tls_key_file = \"{}\" cannot be used: {}",
                    o.cert_file, o.key_file, OpenSslError()));
  }
  return ctx;
}

RespConnection::~RespConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

std::optional<TransportError> RespConnection::Open(const std::string& host, int port,
                                                   milliseconds timeout, int wake, SSL_CTX* tls,
                                                   std::unique_ptr<RespConnection>& out) {
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
    auto conn = std::unique_ptr<RespConnection>(new RespConnection(fd, wake));
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = std::strerror(errno);
      continue;
    }
    conn->deadline_ = deadline;
    if (auto e = conn->Wait(POLLOUT)) {
      last =
          e->timed_out ? fmt::format("connect timed out after {} ms", timeout.count()) : e->message;
      if (e->timed_out || e->closing) return TransportError{last, e->timed_out, false, e->closing};
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

std::optional<TransportError> RespConnection::Call(const std::vector<std::string>& args,
                                                   milliseconds timeout,
                                                   std::vector<std::int64_t>* ids,
                                                   std::size_t expect,
                                                   std::optional<ServerError>* error) {
  received_ = in_.size() > start_;
  std::optional<TransportError> e = Exchange(args, timeout, ids, expect, error);
  if (e) e->stale = !received_ && !e->timed_out;
  return e;
}

std::optional<TransportError> RespConnection::Exchange(const std::vector<std::string>& args,
                                                       milliseconds timeout,
                                                       std::vector<std::int64_t>* ids,
                                                       std::size_t expect,
                                                       std::optional<ServerError>* error) {
  deadline_ = SteadyClock::now() + timeout;
  if (auto e = Send(args)) return e;
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
  if (ids)
    return BatchIds(kind, rest, expect, args[0] == "SEG.NEXT" || args[0] == "STRICT.BATCH", *ids);
  if (kind == '+' || kind == ':') return std::nullopt;  // AUTH's +OK: nothing to keep
  std::string bulk;
  if (kind == '$') return Bulk(rest, bulk);
  return TransportError{fmt::format("a reply starting with '{}'", kind)};
}

std::optional<TransportError> RespConnection::BatchIds(char kind, std::string_view rest,
                                                       std::size_t n, bool increasing,
                                                       std::vector<std::int64_t>& ids) {
  std::int64_t count = 0;
  if (kind != '*' || !DecimalInt64(rest, count) || count != static_cast<std::int64_t>(n)) {
    return TransportError{fmt::format("a reply to a batch of {} that is not {} ids", n, n)};
  }
  ids.clear();
  ids.reserve(n);
  std::string line;
  for (std::size_t i = 0; i < n; ++i) {
    if (auto e = Line(line)) return e;
    std::int64_t v = -1;
    const std::string_view element = std::string_view(line).substr(line.empty() ? 0 : 1);
    if (!line.empty() && line[0] == ':' && !DecimalInt64(element, v)) v = -1;
    std::int64_t length = 0;
    if (!line.empty() && line[0] == '$' && DecimalInt64(element, length) && length <= 20) {
      std::string bulk;  // an id: at most 20 characters
      if (auto e = Bulk(element, bulk)) return e;
      if (!DecimalInt64(bulk, v)) v = -1;
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

RespConnection::RespConnection(int fd, int wake) : fd_(fd), wake_(wake) {}

std::optional<TransportError> RespConnection::Resolve(const std::string& host, int port,
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

bool DecimalInt64(std::string_view s, std::int64_t& v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

std::optional<TransportError> RespConnection::Wait(short events) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - SteadyClock::now());
  if (left.count() <= 0) return TransportError{"no reply within the timeout", true};
  pollfd p[2] = {{fd_, events, 0}, {wake_, POLLIN, 0}};
  const int ready = ::poll(p, 2, static_cast<int>(left.count()) + 1);
  if (ready < 0 && errno != EINTR) return TransportError{std::strerror(errno)};
  if (ready == 0) return TransportError{"no reply within the timeout", true};
  if (p[1].revents != 0) return TransportError{"the client is closed", false, false, true};
  return std::nullopt;
}

std::optional<TransportError> RespConnection::Fill() {
  char chunk[65536];
  for (;;) {
    short wait = 0;
    const ssize_t n = Recv(chunk, sizeof chunk, wait);
    if (n > 0) {
      in_.append(chunk, static_cast<std::size_t>(n));
      received_ = true;
      return std::nullopt;
    }
    if (wait == 0) return TransportError{n == 0 ? "the server closed the connection" : LastError()};
    if (auto e = Wait(wait)) return e;
  }
}

ssize_t RespConnection::Send(const char* data, std::size_t size, short& wait) {
  if (ssl_ == nullptr) {
    const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) wait = POLLOUT;
    if (n < 0) error_ = std::strerror(errno);
    return n;
  }
  return TlsResult(SSL_write(ssl_, data, static_cast<int>(std::min<std::size_t>(size, 1 << 30))),
                   wait);
}

ssize_t RespConnection::Recv(char* data, std::size_t size, short& wait) {
  if (ssl_ == nullptr) {
    const ssize_t n = ::recv(fd_, data, size, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) wait = POLLIN;
    if (n < 0) error_ = std::strerror(errno);
    return n;
  }
  return TlsResult(SSL_read(ssl_, data, static_cast<int>(size)), wait);
}

ssize_t RespConnection::TlsResult(int n, short& wait) {
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

std::string RespConnection::LastError() const { return error_; }

std::optional<TransportError> RespConnection::Handshake(SSL_CTX* tls, const std::string& host) {
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
      return TransportError{verify != X509_V_OK ? fmt::format("TLS: the server's certificate: {}",
                                                              X509_verify_cert_error_string(verify))
                                                : "TLS handshake: " + error_};
    }
    if (auto e = Wait(wait)) {
      if (e->timed_out) e->message = "the TLS handshake did not end within the connect timeout";
      return e;
    }
  }
}

std::optional<TransportError> RespConnection::Line(std::string& line) {
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

std::optional<TransportError> RespConnection::Bulk(std::string_view length, std::string& out) {
  std::int64_t n = 0;
  if (!DecimalInt64(length, n) || n < -1 || n > (64 << 20))
    return TransportError{"a bad bulk length"};
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

std::optional<TransportError> RespConnection::Send(const std::vector<std::string>& args) {
  std::string out = fmt::format("*{}\r\n", args.size());
  for (const std::string& a : args) {
    out += fmt::format("${}\r\n", a.size());
    out += a;
    out += "\r\n";
  }
  for (std::size_t sent = 0; sent < out.size();) {
    short wait = 0;
    const ssize_t n = Send(out.data() + sent, out.size() - sent, wait);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (wait == 0) return TransportError{n == 0 ? "the server closed the connection" : LastError()};
    if (auto e = Wait(wait)) return e;
  }
  return std::nullopt;
}

std::optional<TransportError> RespConnection::Query(const std::vector<std::string>& args,
                                                    milliseconds timeout, RespReply& reply) {
  received_ = in_.size() > start_;
  deadline_ = SteadyClock::now() + timeout;
  std::optional<TransportError> e = Send(args);
  std::int64_t budget = 1'000'000;
  if (!e) e = Reply(reply, 0, budget);
  if (e) e->stale = !received_ && !e->timed_out;
  return e;
}

std::optional<TransportError> RespConnection::Reply(RespReply& reply, int depth,
                                                    std::int64_t& budget) {
  std::string line;
  if (auto e = Line(line)) return e;
  if (line.empty()) return TransportError{"an empty reply line"};
  reply = RespReply();
  reply.kind = line[0];
  const std::string_view rest = std::string_view(line).substr(1);
  switch (reply.kind) {
    case '+':
    case '-':
      reply.text = std::string(rest);
      return std::nullopt;
    case ':':
      if (!DecimalInt64(rest, reply.integer)) return TransportError{"a bad integer reply"};
      return std::nullopt;
    case '$':
      if (rest == "-1") reply.nil = true;
      return reply.nil ? std::nullopt : Bulk(rest, reply.text);
    case '*': {
      std::int64_t n = 0;
      if (rest == "-1") {
        reply.nil = true;
        return std::nullopt;
      }
      if (!DecimalInt64(rest, n) || n < 0 || n > budget || depth >= 8) {
        return TransportError{"an array reply too large or too deep"};
      }
      budget -= n;
      reply.elements.resize(static_cast<std::size_t>(n));
      for (RespReply& element : reply.elements) {
        if (auto e = Reply(element, depth + 1, budget)) return e;
      }
      return std::nullopt;
    }
    default:
      return TransportError{fmt::format("a reply starting with '{}'", reply.kind)};
  }
}

}  // namespace sekka
