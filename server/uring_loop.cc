// server/uring_loop.cc: see uring_loop.h.

#include "server/uring_loop.h"

#include <fmt/format.h>
#include <liburing.h>
#include <poll.h>
#include <sys/epoll.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "server/log.h"

#if ASIO_VERSION == 102201 && defined(ASIO_HAS_EPOLL) && !defined(ASIO_HAS_IO_URING_AS_DEFAULT)
#define SEKKA_URING_LOOP 1
#endif

namespace sekka::server {
namespace {

// Ring sizes: submissions a round may queue before one is made at once, and completions the
// ring holds (more wait in the kernel: IORING_FEAT_NODROP).
constexpr unsigned kSubmissions = 1024;
constexpr unsigned kCompletions = 16384;
// Completions a round runs at most: then Asio's timers, listeners and posts get their turn, as
// on epoll, whose reactor takes at most 128 events per wait (a flood of completions does not
// hold back an accept or a timeout). The rest wait in the ring for the next round, which does
// not sleep while they do.
constexpr std::size_t kRoundCompletions = 128;
// The reactor's watch, told apart from operations (which are pointers, never 1).
constexpr std::uint64_t kReactorWatch = 1;
// Stopping: how long the loop waits for the completions of the operations it cancelled.
constexpr std::chrono::seconds kQuiesce{5};

thread_local UringLoop* current_loop = nullptr;

#ifdef SEKKA_URING_LOOP
using asio::detail::epoll_reactor;
using asio::detail::scheduler;

// Asio's private members the loop needs, each named once by an explicit instantiation of
// Reveal (the language exempts those from access checks). Each member has a tag, a type of its
// own whose MemberOf the instantiation defines.
template <typename T, auto kMember>
struct Reveal {
  friend constexpr auto MemberOf(T) { return kMember; }
};
// clang-format off
struct EpollFd { friend constexpr auto MemberOf(EpollFd); };
struct SchedulerMutex { friend constexpr auto MemberOf(SchedulerMutex); };
struct TaskInterrupted { friend constexpr auto MemberOf(TaskInterrupted); };
struct OpQueue { friend constexpr auto MemberOf(OpQueue); };
struct TaskOperation { friend constexpr auto MemberOf(TaskOperation); };
struct Stopped { friend constexpr auto MemberOf(Stopped); };
// clang-format on
template struct Reveal<EpollFd, &epoll_reactor::epoll_fd_>;
template struct Reveal<SchedulerMutex, &scheduler::mutex_>;
template struct Reveal<TaskInterrupted, &scheduler::task_interrupted_>;
template struct Reveal<OpQueue, &scheduler::op_queue_>;
template struct Reveal<TaskOperation, &scheduler::task_operation_>;
template struct Reveal<Stopped, &scheduler::stopped_>;

// Whether a handler waits in the scheduler's queue (anything but its reactor task) or the loop
// was stopped (a stop interrupts only a reactor marked asleep). When neither and `sleeping`,
// marks the reactor as asleep, so that the next post or stop from another thread interrupts
// it (uring_loop.h, Asio's work, 2). Without `sleeping`, marks it awake.
bool HandlersWaitOrSleep(scheduler& s, bool sleeping) {
  asio::detail::conditionally_enabled_mutex::scoped_lock lock(s.*MemberOf(SchedulerMutex{}));
  auto& queue = s.*MemberOf(OpQueue{});
  const asio::detail::scheduler_operation* task = &(s.*MemberOf(TaskOperation{}));
  const bool waiting =
      s.*MemberOf(Stopped{}) ||
      (!queue.empty() &&
       (queue.front() != task || asio::detail::op_queue_access::next(queue.front()) != nullptr));
  s.*MemberOf(TaskInterrupted{}) = !(sleeping && !waiting);
  return waiting;
}
#endif

}  // namespace

Result<std::unique_ptr<UringLoop>> UringLoop::Open(asio::io_context& loop) {
#ifndef SEKKA_URING_LOOP
  (void)loop;
  return Unavailable("io_uring needs this build's Asio 1.22 epoll reactor");
#else
  auto ring = std::make_unique<io_uring>();
  io_uring_params params{};
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED |
                 IORING_SETUP_CQSIZE;
  params.cq_entries = kCompletions;
  if (const int r = io_uring_queue_init_params(kSubmissions, ring.get(), &params); r < 0) {
    return Unavailable(fmt::format("io_uring_setup: {}", std::strerror(-r)));
  }
  if ((params.features & IORING_FEAT_NODROP) == 0) {
    io_uring_queue_exit(ring.get());
    return Unavailable("io_uring without IORING_FEAT_NODROP (Linux 5.5)");
  }
  // The flags above need Linux 6.1 (deferred task work), which has every operation and flag used
  // here (poll-first receives and cancel-any are 5.19's); the probe is for a kernel that lists
  // fewer operations than its version has (restricted).
  std::unique_ptr<io_uring_probe, void (*)(io_uring_probe*)> probe(
      io_uring_get_probe_ring(ring.get()), io_uring_free_probe);
  if (probe == nullptr || !io_uring_opcode_supported(probe.get(), IORING_OP_SEND) ||
      !io_uring_opcode_supported(probe.get(), IORING_OP_RECV) ||
      !io_uring_opcode_supported(probe.get(), IORING_OP_POLL_ADD) ||
      !io_uring_opcode_supported(probe.get(), IORING_OP_ASYNC_CANCEL)) {
    io_uring_queue_exit(ring.get());
    return Unavailable("io_uring without send, recv, poll or cancel");
  }
  auto& reactor = asio::use_service<epoll_reactor>(loop);
  reactor.init_task();  // the scheduler's task exists, so posts can wake it
  std::unique_ptr<UringLoop> made(new UringLoop(loop, std::move(ring)));
  made->epoll_fd_ = reactor.*MemberOf(EpollFd{});
  return made;
#endif
}

UringLoop::UringLoop(asio::io_context& loop, std::unique_ptr<io_uring> ring)
    : loop_(loop), ring_(std::move(ring)) {}

UringLoop::~UringLoop() {
  if (live_count_ == 0) {
    io_uring_queue_exit(ring_.get());
  } else {
    // Their memory may still be the kernel's: kept, with the ring (uring_loop.h, 3).
    Log(LogLevel::kError, "io_uring operations not completed at exit",
        fmt::format("count={}", live_count_));
    (void)ring_.release();
  }
}

UringLoop* UringLoop::Current() { return current_loop; }

bool UringLoop::LeaveReactor(int fd) {
  epoll_event ignored{};
  return ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, &ignored) == 0;
}

void UringLoop::SubmitQueued() {
  if (io_uring_sq_ready(ring_.get()) > 0) io_uring_submit(ring_.get());
}

io_uring_sqe* UringLoop::Sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  while (sqe == nullptr) {                   // full: hand the queue to the kernel (uring_loop.h, 4)
    if (io_uring_submit(ring_.get()) < 0) {  // short of memory: a moment, not a spin
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    sqe = io_uring_get_sqe(ring_.get());
  }
  return sqe;
}

void UringLoop::PrepareReceive(io_uring_sqe* sqe, int fd, void* buffer, std::size_t size,
                               bool poll_first) {
  io_uring_prep_recv(sqe, fd, buffer, size, 0);
  if (poll_first) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
}

void UringLoop::PrepareSend(io_uring_sqe* sqe, int fd, const void* data, std::size_t size) {
  io_uring_prep_send(sqe, fd, data, size, MSG_NOSIGNAL);
}

void UringLoop::PreparePoll(io_uring_sqe* sqe, int fd) { io_uring_prep_poll_add(sqe, fd, POLLIN); }

void UringLoop::Keep(io_uring_sqe* sqe, UringOp* op) {
  io_uring_sqe_set_data(sqe, op);
  op->next_ = live_;
  if (live_ != nullptr) live_->prev_ = op;
  live_ = op;
  ++live_count_;
}

void UringLoop::ArmReactorWatch() {
  if (watch_armed_) return;
  io_uring_sqe* sqe = Sqe();
  io_uring_prep_poll_add(sqe, epoll_fd_, POLLIN);
  io_uring_sqe_set_data64(sqe, kReactorWatch);
  watch_armed_ = true;
}

void UringLoop::Run() {
#ifdef SEKKA_URING_LOOP
  if (refused_) {
    loop_.run();
    return;
  }
  if (!enabled_) {
    // (liburing 2.3 declares io_uring_enable_rings but does not export it.)
    if (const int r = io_uring_register(ring_->ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
        r < 0) {
      // Its sockets are still Asio's (none moved to a ring that is not current): epoll.
      Log(LogLevel::kError, "io_uring not enabled; this event loop runs on epoll",
          fmt::format("error=\"{}\"", std::strerror(-r)));
      refused_ = true;
      loop_.run();
      return;
    }
    enabled_ = true;
  }
  current_loop = this;
  auto& sched = asio::use_service<scheduler>(loop_);
  bool reactor_ready = true;
  while (!loop_.stopped()) {
    if (reactor_ready || HandlersWaitOrSleep(sched, /*sleeping=*/false)) {
      loop_.poll();
      ArmReactorWatch();
      if (loop_.stopped()) break;
    }
    // Completions left from the last round (kRoundCompletions): a round without sleep.
    const bool sleep =
        io_uring_cq_ready(ring_.get()) == 0 && !HandlersWaitOrSleep(sched, /*sleeping=*/true);
    const int r = sleep ? io_uring_submit_and_wait(ring_.get(), 1)
                        : io_uring_submit_and_get_events(ring_.get());
    if (sleep) HandlersWaitOrSleep(sched, /*sleeping=*/false);
    const std::size_t done = Reap(/*run=*/true, reactor_ready);
    if (r < 0 && r != -EINTR && r != -ETIME) Failed(r, done);
  }
  Quiesce();
  current_loop = nullptr;
#endif
}

void UringLoop::Failed(int error, std::size_t reaped) {
  // Its sockets are the ring's: the loop goes on with what completes, telling once a minute
  // (not of EAGAIN and EBUSY: the kernel short of memory a moment, completions to take first),
  // and does not spin while nothing does.
  const auto now = std::chrono::steady_clock::now();
  if (error != -EAGAIN && error != -EBUSY && now - last_failure_log_ >= std::chrono::minutes(1)) {
    last_failure_log_ = now;
    Log(LogLevel::kError, "io_uring_enter failed",
        fmt::format("error=\"{}\"", std::strerror(-error)));
  }
  if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

std::size_t UringLoop::Reap(bool run, bool& reactor) {
  reactor = false;
  std::size_t count = 0;
  io_uring_cqe* cqe = nullptr;
  while (count < kRoundCompletions && io_uring_peek_cqe(ring_.get(), &cqe) == 0) {
    const std::uint64_t data = cqe->user_data;
    const int res = cqe->res;
    io_uring_cqe_seen(ring_.get(), cqe);  // taken before its handler runs (uring_loop.h, 2)
    ++count;
    if (data == kReactorWatch) {
      watch_armed_ = false;
      reactor = true;
      continue;
    }
    if (data == 0) continue;  // a cancel's own completion
    std::unique_ptr<UringOp> op(reinterpret_cast<UringOp*>(data));
    (op->prev_ != nullptr ? op->prev_->next_ : live_) = op->next_;
    if (op->next_ != nullptr) op->next_->prev_ = op->prev_;
    --live_count_;
    if (run) op->Run(res);
  }
  return count;
}

void UringLoop::Quiesce() {
  io_uring_sqe* sqe = Sqe();
  io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
  io_uring_sqe_set_data64(sqe, 0);
  const auto deadline = std::chrono::steady_clock::now() + kQuiesce;
  while ((live_count_ > 0 || watch_armed_) && std::chrono::steady_clock::now() < deadline) {
    __kernel_timespec wait{0, 10'000'000};
    io_uring_cqe* cqe = nullptr;
    const int r = io_uring_submit_and_wait_timeout(ring_.get(), &cqe, 1, &wait, nullptr);
    if (r < 0 && r != -ETIME && r != -EINTR)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    bool reactor = false;
    Reap(/*run=*/false, reactor);  // the loop has stopped: handlers are dropped unrun
  }
}

}  // namespace sekka::server
