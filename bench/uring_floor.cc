// bench/uring_floor.cc: the floor of CPU per request on io_uring, for bench/run_cpu_pair.sh
// (FLOOR=1). A RESP server that does nothing but what any server must: it answers each ID.NEXT
// with one fixed id (and GET x with how many it answered, the script's count), on one
// single-issuer ring with deferred task work, multishot accept and receive into provided
// buffers, and the round's sends submitted with the round's wait: one io_uring_enter per round,
// no parsing beyond a byte compare, no generator, no limits, no timers. Whatever CPU per request
// it needs is the kernel's TCP work and the ring's, which no server on this machine avoids; a
// target below it is not reachable by any design. Not part of the product or the tests; it
// serves 127.0.0.1 only and runs until killed (the script stops it by PID).
//   g++ -O2 -std=c++20 bench/uring_floor.cc -o floor -luring && ./floor PORT

#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr unsigned kBuffers = 1024;
constexpr unsigned kBufferSize = 16 * 1024;
constexpr int kGroup = 1;
enum Kind : std::uint64_t { kAccept = 1, kReceive = 2, kSend = 3 };

struct Connection {
  int fd;
  std::string in, out, sending;
  bool sending_now = false;
  bool listed = false;
};

io_uring ring;
io_uring_buf_ring* buffers;
char* memory;
std::vector<std::unique_ptr<Connection>> connections(1 << 16);
std::vector<Connection*> ready;
unsigned long long answered = 0;

std::uint64_t Tag(Kind kind, int fd) { return (static_cast<std::uint64_t>(fd) << 8) | kind; }

io_uring_sqe* Sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  while (sqe == nullptr) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
  }
  return sqe;
}

void Receive(int fd) {
  io_uring_sqe* sqe = Sqe();
  io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = kGroup;
  io_uring_sqe_set_data64(sqe, Tag(kReceive, fd));
}

void Accept(int listener) {
  io_uring_sqe* sqe = Sqe();
  io_uring_prep_multishot_accept(sqe, listener, nullptr, nullptr, 0);
  io_uring_sqe_set_data64(sqe, Tag(kAccept, listener));
}

// Skips one RESP array it does not know (redis-benchmark's CONFIG GET at start) and answers
// an empty array; false when it is not whole yet.
bool SkipUnknown(Connection& c, std::size_t& pos) {
  const std::string_view d = c.in;
  if (d[pos] != '*') {  // not a command: skipped
    ++pos;
    return true;
  }
  std::size_t q = d.find("\r\n", pos);
  if (q == std::string_view::npos) return false;
  const int n = std::atoi(d.data() + pos + 1);
  q += 2;
  for (int i = 0; i < n; ++i) {
    const std::size_t e = d.find("\r\n", q);
    if (q >= d.size() || d[q] != '$' || e == std::string_view::npos) return false;
    q = e + 2 + static_cast<std::size_t>(std::atoi(d.data() + q + 1)) + 2;
    if (q > d.size()) return false;
  }
  c.out += "*0\r\n";
  pos = q;
  return true;
}

void Handle(Connection& c) {
  static constexpr std::string_view kNext = "*1\r\n$7\r\nID.NEXT\r\n";
  static constexpr std::string_view kCount = "*2\r\n$3\r\nGET\r\n$1\r\nx\r\n";
  const std::string_view d = c.in;
  std::size_t pos = 0;
  while (pos < d.size()) {
    if (d.substr(pos, kNext.size()) == kNext) {
      c.out += ":249780180292206592\r\n";
      ++answered;
      pos += kNext.size();
    } else if (d.substr(pos, kCount.size()) == kCount) {
      const std::string n = std::to_string(answered);
      c.out += "$" + std::to_string(n.size()) + "\r\n" + n + "\r\n";
      pos += kCount.size();
    } else if (!SkipUnknown(c, pos)) {
      break;
    }
  }
  c.in.erase(0, pos);
  if (!c.out.empty() && !c.listed) {
    c.listed = true;
    ready.push_back(&c);
  }
}

void SendReady() {
  for (Connection* c : ready) {
    c->listed = false;
    if (c->sending_now || c->out.empty()) continue;
    c->sending.swap(c->out);
    c->out.clear();
    c->sending_now = true;
    io_uring_sqe* sqe = Sqe();
    io_uring_prep_send(sqe, c->fd, c->sending.data(), c->sending.size(), MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, Tag(kSend, c->fd));
  }
  ready.clear();
}

void Complete(const io_uring_cqe& cqe) {
  const int fd = static_cast<int>(cqe.user_data >> 8);
  switch (cqe.user_data & 0xff) {
    case kAccept:
      if (cqe.res >= 0 && cqe.res < static_cast<int>(connections.size())) {
        const int one = 1;
        setsockopt(cqe.res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        connections[cqe.res] = std::make_unique<Connection>(Connection{cqe.res, {}, {}, {}});
        Receive(cqe.res);
      }
      if ((cqe.flags & IORING_CQE_F_MORE) == 0) Accept(fd);
      return;
    case kReceive: {
      Connection* c = connections[fd].get();
      if (cqe.res <= 0) {
        if (cqe.res == -ENOBUFS) {
          Receive(fd);
        } else if ((cqe.flags & IORING_CQE_F_MORE) == 0) {
          close(fd);
          connections[fd].reset();
        }
        return;
      }
      const unsigned id = cqe.flags >> IORING_CQE_BUFFER_SHIFT;
      char* buffer = memory + static_cast<std::size_t>(id) * kBufferSize;
      c->in.append(buffer, static_cast<std::size_t>(cqe.res));
      io_uring_buf_ring_add(buffers, buffer, kBufferSize, id, io_uring_buf_ring_mask(kBuffers), 0);
      io_uring_buf_ring_advance(buffers, 1);
      Handle(*c);
      if ((cqe.flags & IORING_CQE_F_MORE) == 0) Receive(fd);
      return;
    }
    case kSend: {
      Connection* c = connections[fd].get();
      if (c == nullptr) return;
      c->sending_now = false;
      if (cqe.res > 0 && static_cast<std::size_t>(cqe.res) < c->sending.size()) {
        c->out.insert(0, c->sending.substr(static_cast<std::size_t>(cqe.res)));
      }
      if (!c->out.empty() && !c->listed) {
        c->listed = true;
        ready.push_back(c);
      }
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PORT\n", argv[0]);
    return 2;
  }
  io_uring_params params{};
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  if (const int r = io_uring_queue_init_params(4096, &ring, &params); r < 0) {
    std::fprintf(stderr, "io_uring_setup: %s\n", std::strerror(-r));
    return 1;
  }
  buffers = static_cast<io_uring_buf_ring*>(aligned_alloc(4096, sizeof(io_uring_buf) * kBuffers));
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uint64_t>(buffers);
  reg.ring_entries = kBuffers;
  reg.bgid = kGroup;
  if (const int r = io_uring_register_buf_ring(&ring, &reg, 0); r < 0) {
    std::fprintf(stderr, "io_uring_register_buf_ring: %s\n", std::strerror(-r));
    return 1;
  }
  io_uring_buf_ring_init(buffers);
  memory = static_cast<char*>(std::malloc(static_cast<std::size_t>(kBuffers) * kBufferSize));
  for (unsigned i = 0; i < kBuffers; ++i) {
    io_uring_buf_ring_add(buffers, memory + static_cast<std::size_t>(i) * kBufferSize, kBufferSize,
                          i, io_uring_buf_ring_mask(kBuffers), static_cast<int>(i));
  }
  io_uring_buf_ring_advance(buffers, kBuffers);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[1])));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(listener, 4096) != 0) {
    std::perror("listen");
    return 1;
  }
  Accept(listener);
  for (;;) {
    SendReady();
    io_uring_submit_and_wait(&ring, 1);
    io_uring_cqe* cqe;
    while (io_uring_peek_cqe(&ring, &cqe) == 0) {
      const io_uring_cqe copy = *cqe;
      io_uring_cqe_seen(&ring, cqe);
      Complete(copy);
    }
  }
}
