// rpc_load: a closed-loop load client for comparing sekka's request/reply protocols with the
// same client: N connections, each sending one request and waiting for its reply, for a fixed
// time. Speaks RESP (ID.NEXT) and Thrift (Twitter Snowflake's get_id over the framed
// transport and binary protocol), so a ratio between them measures the servers' protocol
// paths, not two clients. Prints one CSV line: protocol,clients,requests,seconds,rps,p50_us,p99_us.
//
//   rpc_load --protocol thrift --port 7609 --clients 4 --seconds 10

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::string U32(std::uint32_t v) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xff);
  return s;
}

std::string ThriftGetId() {
  const std::string name = "get_id", agent = "bench";
  std::string body = U32(0x80010001) + U32(name.size()) + name + U32(1);
  body += std::string("\x0b\x00\x01", 3) + U32(agent.size()) + agent + '\0';
  return U32(body.size()) + body;
}

bool ReadExactly(int fd, char* buf, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, buf + got, n - got);
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

// Reads one reply; false on a closed connection or an error reply.
bool ReadReply(int fd, bool thrift, std::string& buf) {
  if (thrift) {
    char head[4];
    if (!ReadExactly(fd, head, 4)) return false;
    const std::uint32_t n =
        (static_cast<std::uint8_t>(head[0]) << 24) | (static_cast<std::uint8_t>(head[1]) << 16) |
        (static_cast<std::uint8_t>(head[2]) << 8) | static_cast<std::uint8_t>(head[3]);
    buf.resize(n);
    if (!ReadExactly(fd, buf.data(), n)) return false;
    return n > 4 && (static_cast<std::uint8_t>(buf[3]) == 2);  // a reply, not an exception
  }
  // One request is outstanding, so the reply is all that arrives: read until its "\r\n"
  // (a few reads at most, as Thrift's two).
  buf.clear();
  char chunk[64];
  for (;;) {  // ":<id>\r\n"
    const ssize_t r = ::read(fd, chunk, sizeof chunk);
    if (r <= 0) return false;
    buf.append(chunk, static_cast<std::size_t>(r));
    if (buf.back() == '\n') return buf[0] == ':';
  }
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1 only
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  std::string protocol = "resp";
  int port = 0, clients = 4;
  double seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--protocol")
      protocol = argv[i + 1];
    else if (flag == "--port")
      port = std::atoi(argv[i + 1]);
    else if (flag == "--clients")
      clients = std::atoi(argv[i + 1]);
    else if (flag == "--seconds")
      seconds = std::atof(argv[i + 1]);
  }
  if (port <= 0 || clients < 1 || clients > 1000 || seconds <= 0 || seconds > 600 ||
      (protocol != "resp" && protocol != "thrift")) {
    std::fprintf(stderr,
                 "usage: rpc_load --protocol resp|thrift --port P [--clients 1-1000] "
                 "[--seconds 0-600]\n");
    return 2;
  }
  const bool thrift = protocol == "thrift";
  const std::string request = thrift ? ThriftGetId() : std::string("*1\r\n$7\r\nID.NEXT\r\n");
  std::atomic<bool> failed{false};
  std::vector<std::vector<std::uint32_t>> latencies(static_cast<std::size_t>(clients));
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      const int fd = Connect(port);
      std::string buf;
      auto& mine = latencies[static_cast<std::size_t>(c)];
      mine.reserve(1 << 20);
      while (!failed.load(std::memory_order_relaxed)) {
        const auto t0 = Clock::now();
        if (t0 >= deadline) break;
        if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size()) ||
            !ReadReply(fd, thrift, buf)) {
          failed = true;
          break;
        }
        mine.push_back(static_cast<std::uint32_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count() / 100));
      }
      ::close(fd);
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed) {
    std::fprintf(stderr, "rpc_load: a request failed (connection closed or an error reply)\n");
    return 1;
  }
  std::vector<std::uint32_t> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[static_cast<std::size_t>(p * (all.size() - 1))] / 10.0;
  };
  std::printf("%s,%d,%zu,%.2f,%.0f,%.1f,%.1f\n", protocol.c_str(), clients, all.size(), elapsed,
              all.size() / elapsed, pct(0.5), pct(0.99));
  return 0;
}
