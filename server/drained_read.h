// server/drained_read.h
//
// A read of a TCP socket (a connection's, plain or under TLS) that remembers when it emptied
// the socket.
//
// Asio's own reads try the socket first every time (a speculative recv) and wait in epoll only
// when that fails. On a connection whose client waits for each reply, the try fails with EAGAIN
// once per request: a second recv per request, which Redis does not make (docs/benchmarks.md,
// "Where the time goes"). When a read leaves the socket empty, the next one can go straight to
// waiting. DrainedRead tells Asio's reactor so by reporting such a read as done_and_exhausted,
// as Asio's own writes report a full socket buffer; the reactor then skips the try until epoll
// signals the socket again.
//
// "Empty" is the kernel's word, not a guess from the read's size: the socket has TCP_INQ set,
// and each read returns, beside the bytes, how many are left. A short read does not tell: the
// kernel stops a read at urgent data with more queued behind it, and a FIN that came with the
// data raises no edge of its own (the review of this change lost both). TCP_INQ counts the bytes
// past an urgent mark, and reports 1 when a FIN is queued, so the next read tries the socket and
// sees the end. Where the kernel has no TCP_INQ (before Linux 4.18), reads are Asio's own.
//
// Why no data is missed:
//   1. The reactor registers sockets edge-triggered; any data that arrives after the read
//      emptied the socket raises an edge.
//   2. The reactor records "exhausted" under the socket's lock, at the read itself; an edge
//      taken later clears it under the same lock (epoll_reactor::descriptor_state::perform_io)
//      and performs the waiting read.
//   3. So a read started after an exhausted one either waits for an edge still to come, or
//      finds the flag cleared and tries the socket at once.
//
// It uses Asio 1.22's reactor (asio::detail): with another version or reactor it is Asio's
// async_read_some.

#ifndef SEKKA_SERVER_DRAINED_READ_H_
#define SEKKA_SERVER_DRAINED_READ_H_

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <asio.hpp>
#include <cerrno>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#if ASIO_VERSION == 102201 && defined(ASIO_HAS_EPOLL) && !defined(ASIO_HAS_IO_URING_AS_DEFAULT)
#define SEKKA_DRAINED_READ 1
#endif

namespace sekka::server {

#ifdef SEKKA_DRAINED_READ
namespace drained_read_internal {

template <typename Handler>  // void(const asio::error_code&, std::size_t)
class Op : public asio::detail::reactor_op {
 public:
  // In a block of the loop thread's recycled memory, as Asio keeps its own operations: one
  // read per request, without a malloc.
  static Op* Make(int fd, asio::mutable_buffer buffer, Handler handler) {
    return new (Allocator().allocate(1)) Op(fd, buffer, std::move(handler));
  }

 private:
  using Allocator = asio::recycling_allocator<Op>;
  struct Free {
    void operator()(Op* op) const {
      op->~Op();
      Allocator().deallocate(op, 1);
    }
  };

  Op(int fd, asio::mutable_buffer buffer, Handler handler)
      : reactor_op(asio::error_code(), &Op::Perform, &Op::Complete),
        fd_(fd),
        buffer_(buffer),
        handler_(std::move(handler)) {}

  static status Perform(reactor_op* base) {
    auto* op = static_cast<Op*>(base);
    for (;;) {
      iovec iov{op->buffer_.data(), op->buffer_.size()};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      const ssize_t n = ::recvmsg(op->fd_, &msg, 0);
      if (n > 0) {
        op->bytes_transferred_ = static_cast<std::size_t>(n);
        return BytesLeft(msg) == 0 ? done_and_exhausted : done;
      }
      if (n == 0) {
        op->ec_ = asio::error::eof;
        return done_and_exhausted;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return not_done;
      op->ec_ = asio::error_code(errno, asio::error::get_system_category());
      return done;
    }
  }

  // TCP_INQ's count after a read: bytes still queued (1 when only a FIN is); -1 when absent.
  static int BytesLeft(msghdr& msg) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_TCP && c->cmsg_type == TCP_CM_INQ) {
        int left = -1;
        std::memcpy(&left, CMSG_DATA(c), sizeof(left));
        return left;
      }
    }
    return -1;
  }

  // `owner` null: the loop is shutting down and destroys the operation unrun.
  static void Complete(void* owner, asio::detail::operation* base, const asio::error_code&,
                       std::size_t) {
    std::unique_ptr<Op, Free> op(static_cast<Op*>(base));
    if (owner == nullptr) return;
    Handler handler = std::move(op->handler_);
    const asio::error_code ec = op->ec_;
    const std::size_t n = op->bytes_transferred_;
    op.reset();
    std::move(handler)(ec, n);
  }

  const int fd_;
  const asio::mutable_buffer buffer_;
  Handler handler_;
};

}  // namespace drained_read_internal
#endif

// A TCP socket with DrainedRead. Moved from an accepted tcp::socket.
class TcpSocket : public asio::ip::tcp::socket {
 public:
  explicit TcpSocket(asio::ip::tcp::socket&& socket) : asio::ip::tcp::socket(std::move(socket)) {
    const int on = 1;
    inq_ = ::setsockopt(native_handle(), SOL_TCP, TCP_INQ, &on, sizeof(on)) == 0;
  }

  // async_read_some of one buffer, which lets the next read skip the try when this one emptied
  // the socket. One at a time; the handler runs on the socket's executor.
  template <typename Handler>
  void DrainedRead(asio::mutable_buffer buffer, Handler&& handler) {
#ifdef SEKKA_DRAINED_READ
    auto& impl = impl_.get_implementation();
    asio::error_code ec;
    if (inq_ && buffer.size() > 0 && impl.reactor_data_ != nullptr &&
        ((impl.state_ & asio::detail::socket_ops::internal_non_blocking) != 0 ||
         asio::detail::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true,
                                                             ec))) {
      if (reactor_ == nullptr) {  // looked up once: a look-up takes the registry's lock
        reactor_ = &asio::use_service<asio::detail::epoll_reactor>(
            asio::query(get_executor(), asio::execution::context));
      }
      auto* op = drained_read_internal::Op<std::decay_t<Handler>>::Make(
          impl.socket_, buffer, std::forward<Handler>(handler));
      reactor_->start_op(asio::detail::epoll_reactor::read_op, impl.socket_, impl.reactor_data_, op,
                         /*is_continuation=*/false, /*allow_speculative=*/true);
      return;
    }
#endif
    async_read_some(buffer, std::forward<Handler>(handler));
  }

 private:
  bool inq_ = false;  // TCP_INQ is on: reads learn how much is left
#ifdef SEKKA_DRAINED_READ
  asio::detail::epoll_reactor* reactor_ = nullptr;  // the socket's loop's, once looked up
#endif
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_DRAINED_READ_H_
