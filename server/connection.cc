// A connection of the event loops (server/connection.h). Each connection reads, handles the
// complete requests in its buffer until about 1 MiB of replies waits (back-pressure), writes them
// with one write, and goes on: a client that pipelines gets batched replies, and a client that does
// not read its replies stops being read and served (no unbounded buffers, no loop held by one
// connection).
//
// A reply is written the moment it is ready, and a connection whose buffer is empty starts its
// next read at once: nothing is posted between a request and its reply, so the loop waits in
// epoll once per round, as Redis's does. Reads of plain TCP sockets are drained reads
// (server/drained_read.h): one recv per request, not two. (Writing replies at the end of the
// loop's round, as Redis's beforeSleep does, cost a second epoll_wait per round under Asio's
// scheduler and was dropped: docs/benchmarks.md.)

#include "server/connection.h"

#include <fmt/format.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <chrono>

#include "server/log.h"

namespace sekka::server {

Connection::Connection(ConnectionHost& server, tcp::socket socket, std::string host,
                       Protocol protocol, asio::ssl::context* tls)
    : server_(server),
      socket_(std::move(socket)),
      host_(std::move(host)),
      tls_context_(tls),
      idle_timer_(socket_.get_executor()),
      protocol_(protocol),
      chunk_(new char[kReadChunk]),
      http_parser_(http::Limits{}),
      opened_ms_(NowMs()),
      active_ms_(opened_ms_) {}

void Connection::Begin() {
  begun_.store(true);
  server_.service().ConnectionOpened(protocol_);
  asio::error_code ignored;
  socket_.non_blocking(true, ignored);
  fd_.store(socket_.native_handle());
  // TLS stays on Asio's reactor: each step of a handshake would be a round trip through the
  // ring's completions, where the stream's read on epoll tries the socket at once, and under a
  // flood of handshakes a good client's waited behind all of theirs (TlsHostileTest, loaded).
  if (tls_context_ == nullptr) socket_.UseRing();
  peer_ = socket_.remote_endpoint(ignored).address();
  trusted_ = StartsAuthenticated(server_.config(), tls_context_ != nullptr);
  ArmIdleTimer();
  if (tls_context_ == nullptr) {
    Read();
    return;
  }
  const std::optional<std::int64_t> delay = server_.HandshakeTurn(host_);
  if (!delay) {
    Close();
    return;
  }
  if (*delay == 0) {
    AwaitHello();
    return;
  }
  auto timer = std::make_shared<asio::steady_timer>(executor(), std::chrono::milliseconds(*delay));
  timer->async_wait([self = shared_from_this(), timer](const asio::error_code&) {
    if (!self->closed_) self->AwaitHello();
  });
}

template <typename Buffers, typename Handler>
void RawSocket::async_read_some(const Buffers& buffers, Handler&& handler) {
  auto done = [&owner = owner_, &socket = socket_, handler = std::forward<Handler>(handler)](
                  const asio::error_code& ec, std::size_t n) mutable {
    const std::uint64_t upto = socket.received();
    if (!ec && n > 0) owner.OnRawBytes();
    std::move(handler)(ec, n);  // the stream's handler holds the connection
    owner.handled_bytes_.store(upto);
  };
  // The TLS stream reads into one buffer of its own.
  if constexpr (std::is_convertible_v<Buffers, asio::mutable_buffer>) {
    socket_.DrainedRead(asio::mutable_buffer(buffers), std::move(done));
  } else {
    socket_.async_read_some(buffers, std::move(done));
  }
}

void Connection::OnRawBytes() {
  Touch();
  if (handshaking_ || closed_ || partial_since_ms_.load() != 0) return;
  partial_since_ms_.store(NowMs());
  ArmIdleTimer();  // its deadline may come before the idle one
}

void Connection::AwaitHello() {
  socket_.async_wait(tcp::socket::wait_read,
                     [self = shared_from_this()](const asio::error_code& ec) {
                       if (ec || self->closed_)
                         return;  // closed meanwhile (auth_timeout, made room)
                       self->Handshake();
                     });
}

void Connection::Handshake() {
  handshaking_ = true;
  Account();  // what OpenSSL holds from here on
  // Made now, not at accept: its buffers (34 KiB) and OpenSSL's are not held by a connection
  // waiting for its handshake's turn or its first bytes.
  tls_ = std::make_unique<TlsStream>(RawSocket(socket_, *this), *tls_context_);
  TrackPartial(/*completed=*/true, /*need_more=*/true);  // its deadline starts now
  tls_->async_handshake(
      asio::ssl::stream_base::server, [self = shared_from_this()](const asio::error_code& ec) {
        self->handshaking_ = false;
        if (self->closed_) return;
        self->Account();
        if (ec) {
          self->server_.service().ConnectionShed(ShedReason::kTlsHandshake);
          Log(LogLevel::kDebug, "TLS handshake failed",
              fmt::format("peer={} error=\"{}\"", self->peer_.to_string(), ec.message()));
          self->Close();
          return;
        }
        self->TrackPartial(/*completed=*/true, /*need_more=*/false);
        self->Touch();
        if (self->server_.config().auth_token.empty()) self->Trust();
        self->Read();
      });
}

// One timer for the time limits: server.idle_timeout since the last progress,
// server.request_timeout since an unfinished request began (however slowly it trickles in:
// every byte resets the idle time, never the request's), and server.auth_timeout since a
// connection that has not authenticated opened.
void Connection::ArmIdleTimer() {
  const ServerConfig& config = server_.config();
  const std::int64_t now = NowMs();
  std::int64_t at = active_ms_.load(std::memory_order_relaxed) + config.idle_timeout_ms;
  if (const std::int64_t since = partial_since_ms_.load(); since != 0) {
    at = std::min(at, since + config.request_timeout_ms);
  }
  if (!trusted()) at = std::min(at, opened_ms_ + config.auth_timeout_ms);
  // A deadline already past with the connection kept (a reply held for an auth turn, a request
  // on a lane's pool: the timer does not close those) would fire again at once, and the loop
  // would spin until it ends: look again in 100 ms.
  idle_timer_.expires_after(std::chrono::milliseconds(std::max<std::int64_t>(at - now, 100)));
  idle_timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (ec || self->closed_) return;
    const ServerConfig& config = self->server_.config();
    const std::int64_t now = self->NowMs();
    if (RequestOverdue(self->partial_since_ms_.load(), now, config.request_timeout_ms)) {
      self->Shed(ShedReason::kRequestTimeout);
    } else if (!self->trusted() && now - self->opened_ms_ >= config.auth_timeout_ms) {
      self->Shed(ShedReason::kAuthTimeout);
    } else if (!self->pending_ && !self->held_for_turn_.load() &&
               now - self->active_ms_.load(std::memory_order_relaxed) >= config.idle_timeout_ms &&
               !self->StillReading()) {
      self->Close();
    } else {
      self->ArmIdleTimer();
    }
  });
}

void Connection::Trust() {
  if (trusted_) return;
  trusted_ = true;
  server_.Authenticated(this);
  ArmIdleTimer();  // server.auth_timeout no longer applies
}

BufferLimits Connection::limits() const { return trusted() ? kTrustedLimits : kUntrustedLimits; }

const resp::Limits& Connection::RespLimits() const {
  static const resp::Limits kLimits;
  return trusted() ? kLimits : resp::kUnauthenticatedLimits;
}

bool Connection::StillReading() {
  const int fd = fd_.load();
  int queued = 0;  // bytes in the kernel the client has not acknowledged
  if (fd < 0 || ::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued <= 0) return false;
  const std::uint64_t sent = sent_total_.load();
  const std::uint64_t acked = sent - std::min(sent, static_cast<std::uint64_t>(queued));
  const bool first_look = !idle_acked_.has_value();
  const bool progress = first_look || acked > *idle_acked_;
  idle_acked_ = acked;
  if (progress) Touch();
  return progress;
}

bool Connection::AboutToRead() const {
  // Not begun yet (Begin is posted to its loop): its first read comes next.
  if (begun_.load() && !reading_.load() && !handshaking_.load()) return false;
  // Read from the kernel, its handler still queued on the loop (hostile_test's fresh client
  // was closed three times in a row so, behind a loop busy with the attackers' churn).
  if (socket_.received() > handled_bytes_.load()) return true;
  const int fd = fd_.load();
  int unread = 0;
  return fd >= 0 && ::ioctl(fd, FIONREAD, &unread) == 0 && unread > 0;
}

ConnectionLoad Connection::Load() const {
  return {.partial_since_ms = partial_since_ms_.load(),
          .write_since_ms = write_since_ms_.load(),
          .held = held_for_turn_.load(),
          .pending = pending_.load(),
          .handshaking = handshaking_.load(),
          .buffered = buffered_.load(),
          .active_ms = active_ms_.load(std::memory_order_relaxed),
          .presented_token = presented_token_.load(),
          .requested = requested_.load(std::memory_order_relaxed)};
}

bool Connection::ClientStalled(std::int64_t now_ms) {
  const int fd = fd_.load();
  int queued = 0;  // bytes in the kernel the client has not acknowledged
  if (fd < 0 || ::ioctl(fd, SIOCOUTQ, &queued) != 0) return false;
  const std::uint64_t sent = sent_total_.load();
  const std::uint64_t acked =
      sent - std::min(sent, static_cast<std::uint64_t>(std::max(queued, 0)));
  return drain_.Stalled(acked, queued, write_since_ms_.load(), now_ms);
}

void Connection::TrackPartial(bool completed, bool need_more) {
  if (!need_more) {
    partial_since_ms_.store(0);
    return;
  }
  if (!completed && partial_since_ms_.load() != 0) return;  // the same request, still arriving
  partial_since_ms_.store(NowMs());
  ArmIdleTimer();  // its deadline may come before the idle one
}

void Connection::Account() {
  if (in_.empty() && in_.capacity() > kKeptCapacity) std::string().swap(in_);
  if (out_.empty() && !busy_ && out_.capacity() > kKeptCapacity) std::string().swap(out_);
  const std::size_t now =
      closed_ ? 0 : in_.capacity() + out_.capacity() + (handshaking_ ? kHandshakeBytes : 0);
  const std::size_t before = buffered_.exchange(now);
  if (now != before) {
    server_.AddBuffered(static_cast<std::int64_t>(now) - static_cast<std::int64_t>(before));
  }
}

void Connection::Shed(ShedReason reason) {
  if (closed_) return;
  // Chosen to make room, it presented the token meanwhile (its credentials were read after the
  // choice): it keeps its slot (admission.h).
  const bool for_room = reason == ShedReason::kUnauthenticated || reason == ShedReason::kIdle ||
                        reason == ShedReason::kSlowSender;
  if (for_room && presented_token_.load()) {
    chosen.store(false);
    return;
  }
  server_.service().ConnectionShed(reason);
  Log(LogLevel::kDebug, "closing a connection at a limit",
      fmt::format("reason={} peer={}", ShedReasonName(reason), peer_.to_string()));
  if (reason != ShedReason::kRequestTimeout || busy_ || pending_ || handshaking_) {
    Close();
    return;
  }
  const std::string seconds = fmt::format("{:g}s", server_.config().request_timeout_ms / 1000.0);
  if (protocol_ == Protocol::kHttp) {
    out_ += HttpParseError(
        408, "the request did not arrive whole within server.request_timeout " + seconds);
  } else if (protocol_ == Protocol::kResp) {
    resp::AppendError(out_,
                      "ERR Protocol error: the command did not arrive whole within " + seconds);
  }
  in_.clear();
  partial_since_ms_.store(0);
  closing_ = true;
  if (out_.empty()) {
    Close();
  } else {
    QueueWrite();
  }
}

void Connection::AfterCredentials() {
  if (session_.first_auth) {
    session_.first_auth = false;
    presented_token_.store(true);
    Trust();
  }
  if (!session_.auth_failed) return;
  session_.auth_failed = false;
  server_.service().ConnectionShed(ShedReason::kAuthFailure);
  in_.clear();
  closing_ = true;
  const std::optional<std::int64_t> delay = server_.FailureTurn(host_);
  if (!delay) {
    Close();
    return;
  }
  if (*delay <= 0) return;
  held_for_turn_.store(true);  // QueueWrite waits; the connection reads nothing meanwhile
  auto timer = std::make_shared<asio::steady_timer>(executor(), std::chrono::milliseconds(*delay));
  timer->async_wait([self = shared_from_this(), timer](const asio::error_code&) {
    self->held_for_turn_.store(false);
    if (!self->closed_ && self->busy_) self->QueueWrite();
  });
}

void Connection::Read() {
  if (closed_ || reading_) return;
  reading_ = true;
  // A drained read: it never re-arms the socket in epoll (a wait op would, with one epoll_ctl
  // per request), and after a read that emptied the socket it waits for epoll's next edge
  // instead of trying the socket (server/drained_read.h).
  auto done = [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
    const std::uint64_t upto = self->socket_.received();
    self->OnRead(ec, n);
    self->handled_bytes_.store(upto);
  };
  if (tls_ != nullptr) {
    tls_->async_read_some(asio::buffer(chunk_.get(), kReadChunk), std::move(done));
  } else {
    socket_.DrainedRead(asio::buffer(chunk_.get(), kReadChunk), std::move(done));
  }
}

void Connection::OnRead(const asio::error_code& ec, std::size_t n) {
  reading_ = false;
  // The client finished sending (a FIN; under TLS with or without close_notify) while its
  // replies were being written (on a ring the read goes with the write; on either path after a
  // request timeout's reply): they are written first, as epoll reads the end only after them.
  if ((ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) && writing_ &&
      !closed_) {
    closing_ = true;
    return;
  }
  if (ec || closed_) {
    Close();
    return;
  }
  in_.append(chunk_.get(), n);
  // There may be more: take it without waiting (plain TCP only; a TLS record is read whole by
  // the stream, never from the socket under it).
  if (tls_context_ == nullptr && n == kReadChunk && !socket_.on_ring()) {
    asio::error_code more_ec;
    const std::size_t limit = limits().input;
    while (in_.size() <= limit) {
      const std::size_t more = socket_.read_some(asio::buffer(chunk_.get(), kReadChunk), more_ec);
      if (more_ec) break;
      in_.append(chunk_.get(), more);
      if (more < kReadChunk) break;
    }
  }
  Touch();
  Continue();
}

void Connection::Continue() {
  if (closed_ || writing_) return;  // the write's completion continues
  if (!pending_) Process();
  Account();
  if (closed_) return;  // the budget closed it
  // Credentials judged on the loop or on the blocking pool (Offload brings its session back
  // before it continues).
  if (session_.auth_failed || session_.first_auth) {
    AfterCredentials();
    if (closed_) return;
  }
  if (!out_.empty()) {
    QueueWrite();
  } else if (pending_) {
    return;  // Offload's completion continues
  } else if (closing_ || draining_) {
    Close();
  } else {
    Read();
  }
}

void Connection::Offload(
    Lane lane, std::function<void(Session& session, std::string& out, bool& close)> work) {
  pending_ = true;
  asio::post(server_.pool(lane),
             [self = shared_from_this(), session = session_, work = std::move(work)]() mutable {
               // A connection closed while its request waited for a thread (its client gave
               // up), or let go by a stopping server, is owed nothing: the request is dropped.
               if (self->fd_.load() < 0 || self->server_.abandoned()) return;
               std::string reply;
               bool close = false;
               work(session, reply, close);
               asio::post(self->executor(), [self, session = std::move(session),
                                             reply = std::move(reply), close]() mutable {
                 if (!self->closed_) {
                   self->session_ = std::move(session);
                   if (close) self->closing_ = true;
                 }
                 self->Deliver(std::move(reply));
               });
             });
}

void Connection::Deliver(std::string reply) {
  pending_ = false;
  if (closed_) return;
  Touch();
  if (writing_) {
    held_ += reply;  // sent after the write in flight
    return;
  }
  out_ += reply;
  Continue();
}

bool Connection::AwaitStrict(const std::vector<std::string_view>& args, std::string_view behind,
                             std::size_t& pos) {
  Service& service = server_.service();
  StrictRun run;
  if (!JoinStrictRun(service, session_, args, run)) return false;
  // The requests behind it that are here whole join while they are the same tag's (a pipeline
  // of them is one call, and one wait of this connection's).
  std::size_t ahead = 0;
  while (ahead < behind.size()) {
    resp::ParseCommand(behind.substr(ahead), RespLimits(), ahead_);
    if (ahead_.status != resp::ParseStatus::kComplete ||
        !JoinStrictRun(service, session_, ahead_.args, run)) {
      break;
    }
    ahead += ahead_.consumed;
    ++handled_;
  }
  pos += ahead;
  pending_ = true;
  auto answer = [self = shared_from_this(), run](Result<std::int64_t> first) {
    asio::post(self->executor(), [self, run, first = std::move(first)] {
      std::string reply;
      AnswerStrictRun(self->server_.service(), self->session_, run, first, reply);
      self->Deliver(std::move(reply));
    });
  };
  if (service.NextStrictAsync(run.tag, run.total, run.counts.size(), answer)) return true;
  // Only the blocking path can answer (a tag new here): on the lane's pool, as one call too.
  Offload(Lane::kStrict, [&service, run](Session& session, std::string& out, bool&) {
    AnswerStrictRun(service, session, run, service.NextStrict(run.tag, run.total), out);
  });
  return true;
}

void Connection::Process() {
  std::size_t pos = 0;
  Step step = Step::kGoOn;
  const std::uint64_t handled_before = handled_;
  // The limits are read before each request: a request may authenticate the connection.
  const std::size_t turn_end = out_.size() + kTurnOutput;
  while (step == Step::kGoOn && pos < in_.size() && !closing_ &&
         out_.size() < std::min(turn_end, limits().pending_output)) {
    const std::string_view data = std::string_view(in_).substr(pos);
    step = protocol_ == Protocol::kHttp     ? TakeHttp(data, pos)
           : protocol_ == Protocol::kThrift ? TakeThrift(data, pos)
                                            : TakeResp(data, pos);
  }
  in_.erase(0, pos);
  if (handled_ != handled_before && !requested_.load(std::memory_order_relaxed)) {
    requested_.store(true);
  }
  TrackPartial(handled_ != handled_before, step == Step::kNeedMore);
}

Connection::Step Connection::TakeHttp(std::string_view data, std::size_t& pos) {
  Service& service = server_.service();
  http::RequestParser::Outcome o = http_parser_.Parse(data);
  pos += o.consumed;  // the parser keeps what it has seen of an unfinished request
  if (o.kind == http::RequestParser::Kind::kNeedMore) return Step::kNeedMore;
  if (o.kind == http::RequestParser::Kind::kError) {
    out_ += HttpParseError(o.status, o.error);
    service.CountRequest(Protocol::kHttp, Command::kOther, false);
    closing_ = true;
    return Step::kStop;
  }
  ++handled_;
  if (const Lane lane = LaneOf(service, o.request); lane != Lane::kLoop) {
    Offload(lane, [&service, request = std::move(o.request)](Session& session, std::string& out,
                                                             bool& close) {
      HandleHttp(service, session, request, out, close);
    });
    return Step::kStop;
  }
  bool close = false;
  HandleHttp(service, session_, o.request, out_, close);
  if (close) closing_ = true;
  return Step::kGoOn;
}

Connection::Step Connection::TakeThrift(std::string_view data, std::size_t& pos) {
  static const thrift::Limits kLimits;
  Service& service = server_.service();
  thrift::ParseOutcome o = thrift::ParseFrame(data, kLimits);
  if (o.kind == thrift::ParseOutcome::Kind::kNeedMore) return Step::kNeedMore;
  if (o.kind != thrift::ParseOutcome::Kind::kCall) {
    // A frame that is too large or not a message: the stream cannot be trusted to go on.
    Log(LogLevel::kDebug, "closing a Thrift connection", fmt::format("error=\"{}\"", o.error));
    if (o.kind == thrift::ParseOutcome::Kind::kBadMessage) {
      thrift::AppendException(out_, "", 0, thrift::ExceptionType::kProtocolError, o.error);
    }
    service.CountRequest(Protocol::kThrift, Command::kOther, false);
    closing_ = true;
    return Step::kStop;
  }
  pos += o.consumed;
  ++handled_;
  HandleThrift(service, o.call, out_);  // no Thrift call waits for a store
  return Step::kGoOn;
}

Connection::Step Connection::TakeResp(std::string_view data, std::size_t& pos) {
  Service& service = server_.service();
  resp::ParseResult& r = parsed_;
  resp::ParseCommand(data, RespLimits(), r);
  if (r.status == resp::ParseStatus::kNeedMore) {
    if (data.size() > limits().input) {
      resp::AppendError(out_, "ERR Protocol error: request too large");
      closing_ = true;
    }
    return Step::kNeedMore;
  }
  if (r.status == resp::ParseStatus::kMalformed) {
    resp::AppendError(out_, "ERR " + r.error);
    service.CountRequest(Protocol::kResp, Command::kOther, false);
    closing_ = true;
    return Step::kStop;
  }
  pos += r.consumed;
  ++handled_;
  if (const Lane lane = LaneOf(service, r.args); lane != Lane::kLoop) {
    if (lane == Lane::kStrict && AwaitStrict(r.args, data.substr(r.consumed), pos)) {
      return Step::kStop;
    }
    std::vector<std::string> args(r.args.begin(), r.args.end());
    Offload(lane,
            [&service, args = std::move(args)](Session& session, std::string& out, bool& close) {
              const std::vector<std::string_view> views(args.begin(), args.end());
              HandleResp(service, session, views, out, close);
            });
    return Step::kStop;
  }
  bool close = false;
  HandleResp(service, session_, r.args, out_, close);
  if (close) closing_ = true;
  return Step::kGoOn;
}

void Connection::QueueWrite() {
  busy_ = true;  // Drain waits for the queued replies
  if (writing_ || held_for_turn_.load()) return;
  busy_ = false;
  Write();
}

void Connection::Write() {
  // Most replies fit the socket buffer: write them at once, and only wait when it is full
  // (plain TCP on epoll; TLS writes go through the stream's own writes). On a ring the write
  // goes with the round's others, and the next read with it (server/uring_loop.h).
  asio::error_code ec;
  std::size_t written = 0;
  while (tls_context_ == nullptr && !socket_.on_ring() && written < out_.size()) {
    const std::size_t n =
        socket_.write_some(asio::buffer(out_.data() + written, out_.size() - written), ec);
    if (ec) break;
    written += n;
    sent_total_.fetch_add(n, std::memory_order_relaxed);
  }
  if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
    Close();
    return;
  }
  if (written < out_.size()) {
    out_.erase(0, written);
    busy_ = true;
    writing_ = true;
    write_pos_ = 0;
    write_since_ms_.store(NowMs());
    WriteSome();
    // What AfterWrite would do once the write is done; reading meanwhile takes one chunk at
    // most (OnRead's Continue waits for the write).
    if (socket_.on_ring() && tls_ == nullptr && in_.empty() && !pending_ && !closing_ &&
        !draining_) {
      Read();
    }
    return;
  }
  out_.clear();
  AfterWrite();
}

void Connection::WriteSome() {
  const auto rest = asio::buffer(out_.data() + write_pos_, out_.size() - write_pos_);
  auto done = [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
    self->OnWritten(ec, n);
  };
  if (tls_ != nullptr) {
    tls_->async_write_some(rest, std::move(done));
  } else {
    socket_.async_write_some(rest, std::move(done));
  }
}

void Connection::OnWritten(const asio::error_code& ec, std::size_t n) {
  write_pos_ += n;
  sent_total_.fetch_add(n, std::memory_order_relaxed);
  if (!ec && write_pos_ < out_.size()) {
    WriteSome();
    return;
  }
  writing_ = false;
  busy_ = false;
  write_since_ms_.store(0);
  write_pos_ = 0;
  out_.clear();
  out_.swap(held_);  // replies that came meanwhile
  // held_ now has the written buffer: a large one is given back here (nothing accounts for
  // held_; a 43 MB reply's buffer stayed until the connection closed).
  if (held_.capacity() > kKeptCapacity) std::string().swap(held_);
  if (ec) {
    Close();
    return;
  }
  AfterWrite();
}

void Connection::AfterWrite() {
  if (out_.empty() && (closing_ || draining_)) {
    Close();
    return;
  }
  // Activity is the last reply, not the last read: a pipeline can take most of the idle
  // timeout to answer (a clock read per request, about 0.2% of its CPU).
  Touch();
  Account();
  if (in_.empty() && !pending_ && out_.empty()) {
    Read();
    return;
  }
  // Requests are buffered (the output bound stopped them). Posted, so that the loop's other
  // connections get their turn between two rounds of this one's pipeline.
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->in_.empty() && !self->pending_ && self->out_.empty()) {
      self->Read();
    } else {
      self->Continue();
    }
  });
}

void Connection::Drain() {
  draining_ = true;
  if (!busy_ && !pending_) Close();
}

void Connection::Close() {
  if (closed_) return;
  closed_ = true;
  asio::error_code ignored;
  idle_timer_.cancel();
  fd_.store(-1);
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  partial_since_ms_.store(0);
  const std::size_t freed = buffered_.load();
  Account();  // its buffers leave the budget (freed with the connection)
  server_.service().ConnectionClosed(protocol_);
  server_.Unregister(this, freed);
}

}  // namespace sekka::server
