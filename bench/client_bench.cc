// The C++ client's cost per id from its buffer against one ID.NEXT round trip per id (a plain
// blocking socket: send the command, read the integer reply), and NextId() latency while 4
// threads draw 100,000 ids/s together. Needs a running server (bench/run_clients.sh).
//   build-bench/bench/client_bench 127.0.0.1:6380

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "sekka/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Ns(Clock::duration d) { return std::chrono::duration<double, std::nano>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: client_bench HOST:PORT\n");
    return 2;
  }
  auto made = sekka::Client::Create(argv[1]);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.error().message.c_str());
    return 2;
  }
  sekka::Client& c = **made;
  // From the buffer: rounds of 40,000 draws after a pause in which the refill completes, so no
  // timed call waits for the server (whose ceiling, 4.1 M ids/s per worker, would be measured).
  Clock::duration timed{};
  long n = 0;
  std::int64_t sink = 0;
  for (int round = 0; round < 150; ++round) {
    std::this_thread::sleep_for(30ms);
    const auto t0 = Clock::now();
    for (int i = 0; i < 40'000; ++i) sink ^= *c.NextId();
    if (round >= 50) {
      timed += Clock::now() - t0;
      n += 40'000;
    }
  }
  const double buffered = Ns(timed) / static_cast<double>(n);

  // One round trip per id over a plain socket.
  const std::string address = argv[1];
  const std::size_t colon = address.rfind(':');
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    std::fprintf(stderr, "cannot connect to %s\n", argv[1]);
    return 1;
  }
  const int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  auto round_trip = [&] {
    static constexpr char kCommand[] = "*1\r\n$7\r\nID.NEXT\r\n";
    if (::send(fd, kCommand, sizeof kCommand - 1, 0) < 0) return false;
    char reply[64];
    std::size_t got = 0;
    while (got < 2 || reply[got - 1] != '\n') {
      const ssize_t r = ::recv(fd, reply + got, sizeof reply - got, 0);
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    sink ^= reply[got - 3];
    return true;
  };
  for (int i = 0; i < 1000; ++i) round_trip();
  const int m = 20'000;
  auto t0 = Clock::now();
  for (int i = 0; i < m; ++i) {
    if (!round_trip()) return 1;
  }
  const double trip = Ns(Clock::now() - t0) / m;
  ::close(fd);

  const int threads = 4;
  const double per_ms = 100'000.0 / threads / 1000;
  const auto seconds = 3s;
  std::vector<std::vector<double>> samples(threads);
  std::vector<std::thread> ts;
  for (int k = 0; k < threads; ++k) {
    ts.emplace_back([&, k] {
      const auto start = Clock::now();
      long done = 0;
      while (Clock::now() - start < seconds) {
        const double elapsed_ms = Ns(Clock::now() - start) / 1e6;
        const long owed = static_cast<long>(elapsed_ms * per_ms) - done;
        for (long i = 0; i < owed; ++i) {
          const auto a = Clock::now();
          sekka::Result<sekka::Id> id = c.NextId();
          samples[k].push_back(Ns(Clock::now() - a));
          if (!id.ok()) return;
        }
        done += std::max(0L, owed);
        std::this_thread::sleep_for(500us);
      }
    });
  }
  for (auto& t : ts) t.join();
  std::vector<double> all;
  for (const auto& s : samples) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  auto pick = [&](double q) {
    return all[std::min(all.size() - 1, static_cast<std::size_t>(q * all.size()))] / 1000;
  };
  const sekka::ClientStats st = c.stats();
  fmt::print(
      "{{\"language\":\"cpp\",\"next_id_ns\":{:.1f},\"round_trip_ns\":{:.1f},\"ratio\":{:.1f},"
      "\"load\":{{\"ids\":{},\"ids_per_s\":{:.0f},\"p50_us\":{:.3f},\"p99_us\":{:.3f},"
      "\"p999_us\":{:.3f},\"max_us\":{:.3f}}},\"stats\":{{\"served\":{},\"refills\":{},"
      "\"failovers\":{},\"buffered\":{},\"dropped\":{}}},\"sink\":{}}}\n",
      buffered, trip, trip / buffered, all.size(), static_cast<double>(all.size()) / 3, pick(0.5),
      pick(0.99), pick(0.999), all.back() / 1000, st.served, st.refills, st.failovers, st.buffered,
      st.dropped, sink & 1);
  return 0;
}
