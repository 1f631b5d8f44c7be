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
// "Empty" is a short read while the socket's last epoll report showed data and nothing else.
// A short read alone does not tell: the kernel stops a read at urgent data with more queued
// behind it, and a FIN that came with the data raises no edge of its own (an earlier review
// lost both). epoll reports the socket's state at the time of the report: EPOLLPRI while urgent
// data is pending, and EPOLLRDHUP (which DrainedRead adds to Asio's registration) once a FIN
// has come. With either in the report, the next read tries the socket and sees the rest or the
// end. (The kernel's own count, TCP_INQ, needs recvmsg and a control message: 3.5% more CPU per
// request than recv, docs/benchmarks.md.)
//
// Why no data and no FIN is missed:
//   1. The reactor registers sockets edge-triggered; any data, urgent byte or FIN that arrives
//      after an epoll report raises a new edge, and a report describes the socket when it is
//      made (the reactor keeps the last one in the descriptor's state).
//   2. So a short read that is not the end either had urgent data or a FIN in the last report
//      (and is not taken for empty), or has an edge still to come.
//   3. The reactor records "exhausted" under the socket's lock, at the read itself; an edge
//      taken later clears it under the same lock (epoll_reactor::descriptor_state::perform_io)
//      and performs the waiting read.
//   4. So a read started after an exhausted one either waits for an edge still to come, or
//      finds the flag cleared and tries the socket at once.
//
// The first drained read of a socket may meet a report made before EPOLLRDHUP was registered,
// or one left in the descriptor's state by an earlier socket (Asio reuses them). It is safe
// because ReportFin runs before that read, and EPOLL_CTL_MOD queues a new report when the
// socket is already readable: keep it first and unconditional.
//
// It relies on each io_context being run by one thread (io_context(1), server/server.cc): the
// reactor writes the report without the descriptor's lock. It uses Asio 1.22's reactor
// (asio::detail), some of it private (named through explicit instantiations, which the language
// exempts from access checks; they may be defined once in a program, so include this header
// from one translation unit only): with another version or reactor it is Asio's
// async_read_some.

#ifndef SEKKA_SERVER_DRAINED_READ_H_
#define SEKKA_SERVER_DRAINED_READ_H_

#include <sys/epoll.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "server/uring_loop.h"

#if ASIO_VERSION == 102201 && defined(ASIO_HAS_EPOLL) && !defined(ASIO_HAS_IO_URING_AS_DEFAULT)
#define SEKKA_DRAINED_READ 1
#endif

namespace sekka::server {

#ifdef SEKKA_DRAINED_READ
namespace drained_read_internal {

using Reactor = asio::detail::epoll_reactor;
using DescriptorState = Reactor::descriptor_state;

// Asio's private members this needs, each named once by an explicit instantiation of Expose.
template <typename Tag, typename Tag::Type member>
struct Expose {
  friend typename Tag::Type MemberOf(Tag) { return member; }
};
struct EpollFd {  // the reactor's epoll instance
  using Type = int Reactor::*;
  friend Type MemberOf(EpollFd);
};
struct RegisteredEvents {  // what the descriptor is registered for
  using Type = std::uint32_t DescriptorState::*;
  friend Type MemberOf(RegisteredEvents);
};
struct DescriptorMutex {
  using Type = asio::detail::conditionally_enabled_mutex DescriptorState::*;
  friend Type MemberOf(DescriptorMutex);
};
struct LastReport {  // the events of the descriptor's last epoll report (set_ready_events)
  using Type = unsigned int asio::detail::scheduler_operation::*;
  friend Type MemberOf(LastReport);
};
template struct Expose<EpollFd, &Reactor::epoll_fd_>;
template struct Expose<RegisteredEvents, &DescriptorState::registered_events_>;
template struct Expose<DescriptorMutex, &DescriptorState::mutex_>;
template struct Expose<LastReport, &asio::detail::scheduler_operation::task_result_>;

// The last report showed more than data: urgent data, a FIN, an error or a hang-up.
inline bool ReportedMoreThanData(DescriptorState* state) {
  // A C-style cast reaches the private base, as the reactor's own code does implicitly.
  const auto* op = (const asio::detail::scheduler_operation*)state;  // NOLINT
  return (op->*MemberOf(LastReport{}) & (EPOLLRDHUP | EPOLLPRI | EPOLLERR | EPOLLHUP)) != 0;
}

// Adds EPOLLRDHUP to the descriptor's registration, so that a report shows a FIN that has come.
// Where that fails, DrainedRead is not used on the socket.
inline bool ReportFin(Reactor& reactor, DescriptorState* state, int fd) {
  asio::detail::conditionally_enabled_mutex::scoped_lock lock(state->*MemberOf(DescriptorMutex{}));
  std::uint32_t& events = state->*MemberOf(RegisteredEvents{});
  if (events == 0) return false;
  epoll_event ev{};
  ev.events = events | EPOLLRDHUP;
  ev.data.ptr = state;
  if (::epoll_ctl(reactor.*MemberOf(EpollFd{}), EPOLL_CTL_MOD, fd, &ev) != 0) return false;
  events = ev.events;
  return true;
}

template <typename Handler>  // void(const asio::error_code&, std::size_t)
class Op : public asio::detail::reactor_op {
 public:
  // In a block of the loop thread's recycled memory, as Asio keeps its own operations: one
  // read per request, without a malloc.
  static Op* Make(int fd, DescriptorState* state, asio::mutable_buffer buffer,
                  std::atomic<std::uint64_t>* received, Handler handler) {
    return new (Allocator().allocate(1)) Op(fd, state, buffer, received, std::move(handler));
  }

 private:
  using Allocator = asio::recycling_allocator<Op>;
  struct Free {
    void operator()(Op* op) const {
      op->~Op();
      Allocator().deallocate(op, 1);
    }
  };

  Op(int fd, DescriptorState* state, asio::mutable_buffer buffer,
     std::atomic<std::uint64_t>* received, Handler handler)
      : reactor_op(asio::error_code(), &Op::Perform, &Op::Complete),
        fd_(fd),
        state_(state),
        buffer_(buffer),
        received_(received),
        handler_(std::move(handler)) {}

  static status Perform(reactor_op* base) {
    auto* op = static_cast<Op*>(base);
    for (;;) {
      const ssize_t n = ::recv(op->fd_, op->buffer_.data(), op->buffer_.size(), 0);
      if (n > 0) {
        op->bytes_transferred_ = static_cast<std::size_t>(n);
        op->received_->fetch_add(op->bytes_transferred_);
        const bool emptied =
            op->bytes_transferred_ < op->buffer_.size() && !ReportedMoreThanData(op->state_);
        return emptied ? done_and_exhausted : done;
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
    std::unique_ptr<Op, Free> op(static_cast<Op*>(base));
    if (owner == nullptr) return;
    Handler handler = std::move(op->handler_);
    const asio::error_code ec = op->ec_;
    const std::size_t n = op->bytes_transferred_;
    op.reset();
    std::move(handler)(ec, n);
  }

  const int fd_;
  DescriptorState* const state_;
  const asio::mutable_buffer buffer_;
  std::atomic<std::uint64_t>* const received_;
  Handler handler_;
};

}  // namespace drained_read_internal
#endif

// A TCP socket with DrainedRead. Moved from an accepted tcp::socket. On a loop that runs on a
// ring (server/uring_loop.h), UseRing moves its reads, writes and waits there: then only the
// operations below may be started on it, never the base class's asynchronous ones.
class TcpSocket : public asio::ip::tcp::socket {
 public:
  explicit TcpSocket(asio::ip::tcp::socket&& socket) : asio::ip::tcp::socket(std::move(socket)) {}

  // From the socket's loop, before its first operation: its operations go to the loop's ring
  // when the loop runs on one. True then.
  bool UseRing() {
    UringLoop* ring = UringLoop::Current();
    if (ring != nullptr && ring->LeaveReactor(native_handle())) ring_ = ring;
    return ring_ != nullptr;
  }
  bool on_ring() const { return ring_ != nullptr; }

  // async_read_some, async_write_some and async_wait of the base class, or on the ring. On the
  // ring, one buffer (the first non-empty one) per call.
  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (ring_ == nullptr) {
      asio::ip::tcp::socket::async_read_some(buffers, std::forward<Handler>(handler));
      return;
    }
    RingReceive(FirstOf<asio::mutable_buffer>(buffers), std::forward<Handler>(handler));
  }
  template <typename Buffers, typename Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (ring_ == nullptr) {
      asio::ip::tcp::socket::async_write_some(buffers, std::forward<Handler>(handler));
      return;
    }
    const asio::const_buffer first = FirstOf<asio::const_buffer>(buffers);
    if (first.size() == 0) {
      Complete(std::forward<Handler>(handler), asio::error_code(), 0);
      return;
    }
    ring_->Send(native_handle(), first.data(), first.size(),
                [this, first, handler = std::forward<Handler>(handler)](int res) mutable {
                  if (res == -EAGAIN) {  // a spurious wake-up: again
                    async_write_some(first, std::move(handler));
                    return;
                  }
                  std::move(handler)(ErrorOf(res), res > 0 ? static_cast<std::size_t>(res) : 0);
                });
  }
  template <typename Handler>  // void(const asio::error_code&)
  void async_wait(wait_type type, Handler&& handler) {
    if (ring_ == nullptr || type != wait_read) {
      asio::ip::tcp::socket::async_wait(type, std::forward<Handler>(handler));
      return;
    }
    ring_->WaitReadable(native_handle(),
                        [handler = std::forward<Handler>(handler)](int res) mutable {
                          std::move(handler)(res < 0 ? ErrorOf(res) : asio::error_code());
                        });
  }

  // async_read_some of one buffer, which lets the next read skip the try when this one emptied
  // the socket. One at a time; the handler runs on the socket's executor. The bytes it reads
  // are added to `received()` when they leave the kernel, which may be long before the handler
  // runs (a read tried at once posts its handler behind the loop's queue).
  template <typename Handler>
  void DrainedRead(asio::mutable_buffer buffer, Handler&& handler) {
    if (ring_ != nullptr) {
      RingReceive(buffer, std::forward<Handler>(handler));
      return;
    }
#ifdef SEKKA_DRAINED_READ
    auto& impl = impl_.get_implementation();
    asio::error_code ec;
    if (buffer.size() > 0 && SetUp(impl.socket_, impl.reactor_data_) &&
        ((impl.state_ & asio::detail::socket_ops::internal_non_blocking) != 0 ||
         asio::detail::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true,
                                                             ec))) {
      auto* op = drained_read_internal::Op<std::decay_t<Handler>>::Make(
          impl.socket_, impl.reactor_data_, buffer, &received_, std::forward<Handler>(handler));
      reactor_->start_op(asio::detail::epoll_reactor::read_op, impl.socket_, impl.reactor_data_, op,
                         /*is_continuation=*/false, /*allow_speculative=*/true);
      return;
    }
#endif
    async_read_some(buffer, [this, handler = std::forward<Handler>(handler)](
                                const asio::error_code& ec, std::size_t n) mutable {
      received_.fetch_add(n);
      std::move(handler)(ec, n);
    });
  }

  // Closes it. On a ring, what was queued for it is submitted first: once the descriptor's
  // number is free, an accept may reuse it, and an entry still queued would act on that socket.
  void close(asio::error_code& ec) {
    if (ring_ != nullptr) ring_->SubmitQueued();
    asio::ip::tcp::socket::close(ec);
  }

  // Bytes the socket's reads have taken from the kernel (any thread).
  std::uint64_t received() const { return received_.load(); }

 private:
  static asio::error_code ErrorOf(int res) {
    if (res >= 0) return {};
    if (res == -ECANCELED) return asio::error::operation_aborted;
    return asio::error_code(-res, asio::error::get_system_category());
  }
  template <typename Buffer, typename Buffers>
  static Buffer FirstOf(const Buffers& buffers) {
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
         ++it) {
      const Buffer b(*it);
      if (b.size() > 0) return b;
    }
    return Buffer();
  }
  // A handler for nothing to do (an empty buffer: the TLS stream reads none to get its
  // handler run by the loop), posted, as Asio's own sockets do.
  template <typename Handler>
  void Complete(Handler&& handler, asio::error_code ec, std::size_t n) {
    asio::post(get_executor(), [handler = std::forward<Handler>(handler), ec, n]() mutable {
      std::move(handler)(ec, n);
    });
  }
  // A receive on the ring. After one that left the socket empty (a short one), the next waits
  // for data before trying (the kernel checks the socket's state as it arms that wait).
  template <typename Handler>
  void RingReceive(asio::mutable_buffer buffer, Handler&& handler) {
    if (buffer.size() == 0) {
      Complete(std::forward<Handler>(handler), asio::error_code(), 0);
      return;
    }
    ring_->Receive(native_handle(), buffer.data(), buffer.size(), emptied_,
                   [this, buffer, handler = std::forward<Handler>(handler)](int res) mutable {
                     if (res == -EAGAIN) {  // a spurious wake-up: wait again
                       emptied_ = true;
                       RingReceive(buffer, std::move(handler));
                       return;
                     }
                     const std::size_t n = res > 0 ? static_cast<std::size_t>(res) : 0;
                     received_.fetch_add(n);
                     emptied_ = n < buffer.size();
                     std::move(handler)(res == 0 ? asio::error::eof : ErrorOf(res), n);
                   });
  }

  UringLoop* ring_ = nullptr;  // UseRing's
  bool emptied_ = false;       // the last receive on the ring was short
#ifdef SEKKA_DRAINED_READ
  // Once per socket, before its first drained read: the reactor (a look-up takes the service
  // registry's lock), and FINs in its epoll reports. False where either is missing.
  bool SetUp(int fd, drained_read_internal::DescriptorState* state) {
    if (reactor_ != nullptr) return true;
    if (unusable_ || state == nullptr) return false;
    auto& reactor = asio::use_service<drained_read_internal::Reactor>(
        asio::query(get_executor(), asio::execution::context));
    if (!drained_read_internal::ReportFin(reactor, state, fd)) {
      unusable_ = true;
      return false;
    }
    reactor_ = &reactor;
    return true;
  }

  drained_read_internal::Reactor* reactor_ = nullptr;  // the socket's loop's, once set up
  bool unusable_ = false;                              // reads are Asio's own
#endif
  std::atomic<std::uint64_t> received_{0};
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_DRAINED_READ_H_
