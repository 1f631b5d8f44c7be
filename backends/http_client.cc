#include "backends/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace sekka {
namespace {

constexpr std::size_t kMaxResponse = 16 * 1024 * 1024;

using SteadyClock = std::chrono::steady_clock;

bool ParseInt(std::string_view text, int base, std::size_t& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits for `events` on fd until `deadline`; false on timeout or error.
bool WaitFor(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

std::string HostPort::Text() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<std::vector<HostPort>> ParseHostPorts(std::string_view list, std::string_view what) {
  std::vector<HostPort> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view item = Trim(list.substr(start, comma - start));
    auto bad = [&] {
      return InvalidArgument(fmt::format(
          "{}: \"{}\" is not valid: allowed host:port with a numeric IP address or localhost, "
          "several separated by commas, such as \"127.0.0.1:2379,127.0.0.1:22379\"",
          what, item.substr(0, 100)));
    };
    const std::size_t colon = item.rfind(':');
    if (item.empty() || colon == std::string_view::npos || colon == 0) return bad();
    std::string host(item.substr(0, colon));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    if (host == "localhost") host = "127.0.0.1";
    in6_addr a6{};
    in_addr a4{};
    if (inet_pton(AF_INET, host.c_str(), &a4) != 1 && inet_pton(AF_INET6, host.c_str(), &a6) != 1) {
      return bad();
    }
    std::size_t port = 0;
    if (!ParseInt(item.substr(colon + 1), 10, port) || port == 0 || port > 65535) return bad();
    out.push_back({host, static_cast<int>(port)});
    start = comma + 1;
  }
  return out;
}

Result<HttpResponse> ParseHttpResponse(std::string_view raw) {
  auto bad = [](std::string_view what) {
    return InvalidArgument(fmt::format("malformed HTTP response: {}", what));
  };
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return bad("no end of headers");
  std::string_view head = raw.substr(0, head_end);
  std::string_view rest = raw.substr(head_end + 4);
  const std::size_t line_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, line_end);
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ') {
    return bad("no status line");
  }
  std::size_t status = 0;
  if (!ParseInt(status_line.substr(9, 3), 10, status) || status < 100 || status > 599) {
    return bad("bad status code");
  }
  bool chunked = false;
  std::size_t content_length = 0;
  bool has_length = false;
  std::string_view headers =
      line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  while (!headers.empty()) {
    std::size_t e = headers.find("\r\n");
    const std::string_view line = headers.substr(0, e);
    headers = e == std::string_view::npos ? std::string_view() : headers.substr(e + 2);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return bad("a header without a colon");
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (name.size() == 17 && strncasecmp(name.data(), "transfer-encoding", 17) == 0) {
      chunked =
          value.size() >= 7 && strncasecmp(value.data() + value.size() - 7, "chunked", 7) == 0;
    } else if (name.size() == 14 && strncasecmp(name.data(), "content-length", 14) == 0) {
      if (!ParseInt(value, 10, content_length)) return bad("bad Content-Length");
      has_length = true;
    }
  }
  HttpResponse r;
  r.status = static_cast<int>(status);
  if (chunked) {
    for (;;) {
      const std::size_t e = rest.find("\r\n");
      if (e == std::string_view::npos) return bad("a chunk without a size line");
      std::string_view size_text = rest.substr(0, e);
      size_text = size_text.substr(0, size_text.find(';'));
      std::size_t size = 0;
      if (!ParseInt(Trim(size_text), 16, size)) return bad("bad chunk size");
      rest.remove_prefix(e + 2);
      if (size == 0) break;
      if (size > rest.size() || rest.size() - size < 2) return bad("a truncated chunk");
      r.body.append(rest.substr(0, size));
      rest.remove_prefix(size + 2);
    }
  } else if (has_length) {
    if (content_length > rest.size()) return bad("a truncated body");
    r.body.assign(rest.substr(0, content_length));
  } else {
    r.body.assign(rest);
  }
  return r;
}

Result<HttpResponse> HttpPost(const HostPort& to, std::string_view path, std::string_view body,
                              std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  auto fail = [&](std::string_view what) {
    return Unavailable(fmt::format("{} {}: {}", to.Text(), path, what));
  };
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
  if (auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
      inet_pton(AF_INET, to.host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<std::uint16_t>(to.port));
    len = sizeof(sockaddr_in);
  } else if (auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
             inet_pton(AF_INET6, to.host.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<std::uint16_t>(to.port));
    len = sizeof(sockaddr_in6);
    family = AF_INET6;
  } else {
    return fail("not a numeric address");
  }
  Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return fail(std::strerror(errno));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) return fail(fmt::format("cannot connect: {}", std::strerror(errno)));
    if (!WaitFor(fd.get(), POLLOUT, deadline)) return fail("connect timed out");
    int err = 0;
    socklen_t err_len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) return fail(fmt::format("cannot connect: {}", std::strerror(err)));
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string request = fmt::format(
      "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n\r\n",
      path, to.Text(), body.size());
  request.append(body);
  std::size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitFor(fd.get(), POLLOUT, deadline)) return fail("send timed out");
    } else {
      return fail(fmt::format("send failed: {}", std::strerror(errno)));
    }
  }
  std::string raw;
  char buf[16 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      raw.append(buf, static_cast<std::size_t>(n));
      if (raw.size() > kMaxResponse) return fail("the answer is larger than 16 MiB");
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!WaitFor(fd.get(), POLLIN, deadline)) return fail("no answer in time");
    } else {
      return fail(fmt::format("receive failed: {}", std::strerror(errno)));
    }
  }
  Result<HttpResponse> r = ParseHttpResponse(raw);
  if (!r.ok()) return fail(r.error().message);
  return r;
}

}  // namespace sekka
