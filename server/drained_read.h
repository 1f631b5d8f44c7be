// server/drained_read.h
//
// A read of a plain TCP socket that remembers when it emptied the socket.
//
// Asio's own reads try the socket first every time (a speculative recv) and wait in epoll only
// when that fails. On a connection whose client waits for each reply, the try fails with EAGAIN
// once per request: a second recv per request, which Redis does not make (docs/benchmarks.md,
// "Where the time goes"). A read that got less than it asked for emptied the socket, so the next
// one can go straight to waiting. DrainedRead tells Asio's reactor so by reporting such a read
// as done_and_exhausted, as Asio's own writes report a full socket buffer; the reactor then
// skips the try until epoll signals the socket again.
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

#include <sys/socket.h>

#include <asio.hpp>
#include <cerrno>
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
  Op(int fd, asio::mutable_buffer buffer, Handler handler)
      : reactor_op(asio::error_code(), &Op::Perform, &Op::Complete),
        fd_(fd),
        buffer_(buffer),
        handler_(std::move(handler)) {}

 private:
  static status Perform(reactor_op* base) {
    auto* op = static_cast<Op*>(base);
    for (;;) {
      const ssize_t n = ::recv(op->fd_, op->buffer_.data(), op->buffer_.size(), 0);
      if (n > 0) {
        op->bytes_transferred_ = static_cast<std::size_t>(n);
        return op->bytes_transferred_ < op->buffer_.size() ? done_and_exhausted : done;
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

  // `owner` null: the loop is shutting down and destroys the operation unrun.
  static void Complete(void* owner, asio::detail::operation* base, const asio::error_code&,
                       std::size_t) {
    std::unique_ptr<Op> op(static_cast<Op*>(base));
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
  explicit TcpSocket(asio::ip::tcp::socket&& socket) : asio::ip::tcp::socket(std::move(socket)) {}

  // async_read_some of one buffer, which lets the next read skip the try when this one emptied
  // the socket. One at a time; the handler runs on the socket's executor.
  template <typename Handler>
  void DrainedRead(asio::mutable_buffer buffer, Handler&& handler) {
#ifdef SEKKA_DRAINED_READ
    auto& impl = impl_.get_implementation();
    asio::error_code ec;
    if (buffer.size() > 0 && impl.reactor_data_ != nullptr &&
        ((impl.state_ & asio::detail::socket_ops::internal_non_blocking) != 0 ||
         asio::detail::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true,
                                                             ec))) {
      auto& reactor = asio::use_service<asio::detail::epoll_reactor>(
          asio::query(get_executor(), asio::execution::context));
      auto* op = new drained_read_internal::Op<std::decay_t<Handler>>(
          impl.socket_, buffer, std::forward<Handler>(handler));
      reactor.start_op(asio::detail::epoll_reactor::read_op, impl.socket_, impl.reactor_data_, op,
                       /*is_continuation=*/false, /*allow_speculative=*/true);
      return;
    }
#endif
    async_read_some(buffer, std::forward<Handler>(handler));
  }
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_DRAINED_READ_H_
