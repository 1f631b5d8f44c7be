// server/uring_loop.h
//
// The io_uring path of an event loop (server.io, server/server.cc). A loop's connections submit
// their receives, sends and waits to the loop's ring, and the loop's thread blocks in one
// io_uring_enter per round, which hands the kernel the round's sends and receives and waits for
// the next completions: no recv, send or epoll_wait of its own per request (the epoll path makes
// a recv and a send per request and an epoll_wait per round). Everything else stays Asio's:
// timers, listeners, posts from other threads (lanes' pools, strict calls, the limits' scans).
// Internal to server/.
//
// How Asio's work reaches a thread that sleeps in the ring:
//   1. Asio's reactor sleeps in epoll_wait; its timers are a timerfd and its wake-up (a post
//      from another thread) an event on its epoll instance. The ring watches that epoll
//      instance (a one-shot poll, armed again after each run of Asio's handlers: an arm looks
//      at the instance's state, so a report left unread fires it at once).
//   2. A post or a stop from another thread wakes the reactor only when Asio believes it
//      sleeps (its scheduler's task_interrupted_ is false). The loop says so under the
//      scheduler's lock, just before it sleeps, and only when no handler waits and the loop is
//      not stopped: either makes the round poll instead of sleep. Waking, it says the reactor
//      is awake again, so that the posts of its own handlers cost no wake-up.
//   3. So a post, a stop, a timer or a ready listener either comes before the look (and the
//      round does not sleep) or after it (and its epoll event ends the sleep).
//
// Why no completion is lost and no buffer is freed while the kernel uses it:
//   1. An operation owns its handler, and the handler owns what the kernel reads or writes (a
//      connection's buffers, through the connection it holds), from submission to completion.
//   2. Each completion is taken from the ring before its handler runs, so a handler that
//      throws loses no other completion and is not run twice.
//   3. The loop keeps every operation the kernel has until its completion comes. Stopping, it
//      cancels them all and waits for their completions; one that does not come is left
//      allocated (its memory may still be the kernel's), never freed.
//   4. A full submission queue is submitted at once and the entry taken again; a full
//      completion queue is the kernel's to hold (IORING_FEAT_NODROP, required).
//
// The ring is single-issuer with deferred task work (completions are made while the loop
// thread is in io_uring_enter, never by interrupting it): it is made disabled, and enabled by
// its loop's thread, the only one that submits.
//
// It relies on Asio 1.22's scheduler and epoll reactor (their private members, named through
// explicit instantiations in uring_loop.cc): with another version there is no io_uring path.

#ifndef SEKKA_SERVER_URING_LOOP_H_
#define SEKKA_SERVER_URING_LOOP_H_

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "sekka/status.h"

struct io_uring;
struct io_uring_sqe;

namespace sekka::server {

// One operation the loop has given the kernel. Run(res): its completion (res as io_uring gives
// it: a count or a negative errno). Deleting it unrun (a loop that stopped) drops its handler.
class UringOp {
 public:
  virtual ~UringOp() = default;
  virtual void Run(int res) = 0;

 private:
  friend class UringLoop;
  UringOp* prev_ = nullptr;  // the loop's list of the kernel's operations
  UringOp* next_ = nullptr;
};

class UringLoop {
 public:
  // The ring of `loop` (run by one thread, io_context(1)), or why the kernel refused one (an
  // old kernel, a seccomp filter, io_uring_disabled, a locked-memory limit).
  static Result<std::unique_ptr<UringLoop>> Open(asio::io_context& loop);
  ~UringLoop();
  UringLoop(const UringLoop&) = delete;
  UringLoop& operator=(const UringLoop&) = delete;

  // Runs the loop until it is stopped, on its thread (each call on the same one). A handler's
  // exception leaves it; calling it again goes on. Where the kernel refuses to enable the ring
  // (it was made disabled), the loop runs on epoll instead, saying so.
  void Run();
  // The ring of the loop this thread runs, or null.
  static UringLoop* Current();

  // The operations, from the loop's thread. Each handler runs once, on the loop's thread, with
  // io_uring's result; none runs after the loop has stopped.
  // A receive into `buffer`. `poll_first`: wait for data before trying (the last receive left
  // the socket empty); the kernel looks at the socket's state when it arms the wait.
  template <typename Handler>  // void(int res)
  void Receive(int fd, void* buffer, std::size_t size, bool poll_first, Handler&& handler) {
    UringOp* op = Make(std::forward<Handler>(handler));
    io_uring_sqe* sqe = Sqe();
    PrepareReceive(sqe, fd, buffer, size, poll_first);
    Keep(sqe, op);
  }
  template <typename Handler>
  void Send(int fd, const void* data, std::size_t size, Handler&& handler) {
    UringOp* op = Make(std::forward<Handler>(handler));
    io_uring_sqe* sqe = Sqe();
    PrepareSend(sqe, fd, data, size);
    Keep(sqe, op);
  }
  // Readable (POLLIN; an error or a hang-up counts).
  template <typename Handler>
  void WaitReadable(int fd, Handler&& handler) {
    UringOp* op = Make(std::forward<Handler>(handler));
    io_uring_sqe* sqe = Sqe();
    PreparePoll(sqe, fd);
    Keep(sqe, op);
  }

  // Hands the queued entries to the kernel now, which takes their descriptors' files (before a
  // socket closes: its number may be reused by the next accept).
  void SubmitQueued();

  // Removes `fd` from the epoll instance of Asio's reactor, where Asio registered it when the
  // socket was made: its events would wake the loop for nothing. False when that failed.
  bool LeaveReactor(int fd);

 private:
  template <typename Handler>
  class Op final : public UringOp {
   public:
    explicit Op(Handler h) : handler_(std::move(h)) {}
    void Run(int res) override { std::move(handler_)(res); }

   private:
    Handler handler_;
  };

  UringLoop(asio::io_context& loop, std::unique_ptr<io_uring> ring);
  // The next submission entry; a full queue is submitted first.
  io_uring_sqe* Sqe();
  static void PrepareReceive(io_uring_sqe* sqe, int fd, void* buffer, std::size_t size,
                             bool poll_first);
  static void PrepareSend(io_uring_sqe* sqe, int fd, const void* data, std::size_t size);
  static void PreparePoll(io_uring_sqe* sqe, int fd);
  // Made before its entry is taken (nothing after the entry's preparation can fail, so no entry
  // reaches the kernel without its operation).
  template <typename Handler>
  static UringOp* Make(Handler&& handler) {
    return new Op<std::decay_t<Handler>>(std::forward<Handler>(handler));
  }
  // Gives `op` to `sqe` and lists it among the kernel's.
  void Keep(io_uring_sqe* sqe, UringOp* op);
  void ArmReactorWatch();
  // Takes the completions there are, running their handlers when `run` (else dropping them);
  // how many. `reactor`: whether the reactor's watch was among them.
  std::size_t Reap(bool run, bool& reactor);
  // io_uring_enter failed with `error` (negative) in a round that took `reaped` completions.
  void Failed(int error, std::size_t reaped);
  // Cancels the kernel's operations and waits for them (Run's end).
  void Quiesce();

  asio::io_context& loop_;
  std::unique_ptr<io_uring> ring_;
  int epoll_fd_ = -1;  // Asio's reactor's
  bool enabled_ = false;
  bool refused_ = false;  // the kernel refused to enable it: the loop runs on epoll
  bool watch_armed_ = false;
  UringOp* live_ = nullptr;  // the kernel's operations, a list
  std::size_t live_count_ = 0;
  std::chrono::steady_clock::time_point last_failure_log_{};
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_URING_LOOP_H_
