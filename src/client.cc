// sekka::Client (include/sekka/client.h): the buffer and the refill thread, over the RESP
// connection of resp/resp_connection.h.

#include "sekka/client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "resp/resp_connection.h"

namespace sekka {
namespace {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using std::chrono::milliseconds;

// The most ids one batch may hold: the server's largest server.max_batch.
constexpr std::size_t kMaxBatch = 10'000'000;

// The client's TLS context (ClientOptions::tls_*), or null for plain TCP. Errors:
// kInvalidArgument naming the option that cannot be used.
Result<std::shared_ptr<SSL_CTX>> TlsContext(const ClientOptions& o) {
  return TlsClientContext(TlsFiles{o.tls_ca_file, o.tls_cert_file, o.tls_key_file});
}

Result<std::pair<std::string, int>> ParseServer(std::string_view text, std::size_t index) {
  const std::size_t colon = text.rfind(':');
  int port = 0;
  if (colon != std::string_view::npos && colon > 0) {
    const std::string_view p = text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc() || end != p.data() + p.size()) port = 0;
  }
  if (port < 1 || port > 65535) {
    return InvalidArgument(
        fmt::format("servers[{}] = \"{}\" is not host:port (a port from 1 to 65535)", index, text));
  }
  std::string host(text.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::pair(host, port);
}

}  // namespace

struct Client::Impl {
  // Its types are members, not in the anonymous namespace: a class with linkage may not hold
  // one (g++'s -Wsubobject-linkage, which a unity build of this file raises).
  struct Server {
    std::string host;
    int port = 0;
    std::string name;
    std::unique_ptr<RespConnection> conn;
    TimePoint down_until{};
    milliseconds backoff{0};
    std::string last_error;
  };

  struct Batch {
    std::vector<std::int64_t> ids;
    std::size_t pos = 0;
    TimePoint expires;
  };

  struct Stream {
    std::optional<std::string> tag;  // none: snowflake ids
    std::deque<Batch> batches;
    std::size_t size = 0;
    std::size_t left = 0;  // ids in batches not handed out yet
    bool wanted = false;
    bool busy = false;
    std::uint64_t attempts = 0;
    std::optional<Error> error;  // the last refill's failure
    TimePoint retry_at{};
    std::int64_t high = -1;  // tags: the highest id queued or handed out
    std::optional<TimePoint> last_refill;
  };

  // The servers, with a connection each, their backoffs and the current one. Used by one
  // thread at a time: the refill thread (`pool`), or a strict caller holding the strict turn
  // (`strict_pool`).
  struct Pool {
    explicit Pool(Impl& owner) : impl(owner) {}

    Impl& impl;
    std::vector<Server> servers;
    std::size_t current = 0;

    // When the first server's backoff runs out.
    TimePoint SoonestUp() const {
      TimePoint soonest = servers.front().down_until;
      for (const Server& s : servers) soonest = std::min(soonest, s.down_until);
      return soonest;
    }

    // Opens `s`'s connection and authenticates; `error` holds a refused token.
    std::optional<TransportError> Connect(Server& s, std::optional<ServerError>& error) {
      std::optional<TransportError> t = RespConnection::Open(s.host, s.port, impl.o.connect_timeout,
                                                             impl.wake, impl.tls.get(), s.conn);
      if (!t && !impl.o.token.empty()) {
        t = s.conn->Call({"AUTH", impl.o.token}, impl.o.timeout, nullptr, 0, &error);
      }
      return t;
    }
    Status Refused(Server& s, const ServerError& error) {
      s.conn.reset();
      return Unauthenticated(
          fmt::format("sekka server {} refused the token: {}", s.name, error.message));
    }

    // The `count` ids of the first server that answers batch command `args`, from the current
    // one.
    Status Call(const std::vector<std::string>& args, std::size_t count,
                std::vector<std::int64_t>& out) {
      const TimePoint now = SteadyClock::now();
      const std::size_t n = servers.size();
      std::vector<std::size_t> up;
      std::size_t soonest = current;
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (current + k) % n;
        if (servers[i].down_until <= now) up.push_back(i);
        if (servers[i].down_until < servers[soonest].down_until) soonest = i;
      }
      if (up.empty()) up.push_back(soonest);  // all backing off: the one back first
      std::vector<std::size_t> tried;
      for (std::size_t i : up) {
        Server& s = servers[i];
        std::optional<ServerError> error;
        std::optional<TransportError> transport;
        const bool reused = s.conn != nullptr;
        if (!s.conn) transport = Connect(s, error);
        if (!transport && error) return Refused(s, *error);
        if (!transport) transport = s.conn->Call(args, impl.o.timeout, &out, count, &error);
        // A connection made before this call that failed before any byte of the reply (the
        // server closed it while idle, or restarted) is replaced and the command sent once more,
        // without counting against the server: a command it did run costs a range, never an id.
        if (transport && transport->stale && reused) {
          s.conn.reset();
          transport = Connect(s, error);
          if (!transport && error) return Refused(s, *error);
          if (!transport) transport = s.conn->Call(args, impl.o.timeout, &out, count, &error);
        }
        if (!transport && !error) {
          s.backoff = milliseconds(0);
          s.down_until = TimePoint{};
          if (i != current) {
            std::lock_guard lock(impl.mu);
            ++impl.counters.failovers;
            current = i;
          }
          return Status::Ok();
        }
        if (error && error->auth()) {
          s.conn.reset();
          return Unauthenticated(fmt::format("sekka server {}: {}", s.name, error->message));
        }
        if (error && !error->failover()) {
          return InvalidArgument(fmt::format("sekka server {}: {}", s.name, error->message));
        }
        if (transport && transport->closing) return Cancelled("the client is closed");
        s.last_error = error ? error->message : transport->message;
        {
          std::lock_guard lock(impl.mu);
          ++impl.counters.server_errors;
        }
        tried.push_back(i);
        s.conn.reset();
        s.backoff = std::min(impl.o.backoff_max, std::max(impl.o.backoff_min, s.backoff * 2));
        s.down_until = SteadyClock::now() + s.backoff;
      }
      // Every server, with its last error (those backing off were not tried this time).
      std::vector<std::string> each;
      for (std::size_t i = 0; i < n; ++i) {
        const bool now_tried = std::find(tried.begin(), tried.end(), i) != tried.end();
        each.push_back(fmt::format("{} ({}{})", servers[i].name, servers[i].last_error,
                                   now_tried ? "" : "; backing off"));
      }
      return Unavailable(fmt::format("no sekka server could serve {}: {}", fmt::join(args, " "),
                                     fmt::join(each, ", ")));
    }
  };

  ClientOptions o;
  std::shared_ptr<SSL_CTX> tls;  // null: plain TCP
  Pool pool{*this};              // the refill thread's
  Pool strict_pool{*this};       // strict calls' own connections (a strict id is never buffered)
  std::mutex strict_mu;          // guards strict_busy
  std::condition_variable strict_free;  // strict_busy became false
  bool strict_busy = false;  // a strict call (or Close) has strict_pool    // strict calls take
                             // turns on strict_pool

  mutable std::mutex mu;
  std::condition_variable changed;
  Stream ids;                                       // guarded by mu
  std::map<std::string, Stream, std::less<>> tags;  // guarded by mu
  bool closed = false;                              // guarded by mu
  ClientStats counters;                             // guarded by mu (buffered: computed)
  milliseconds max_wait{0};
  std::thread refiller;
  int wake = -1;          // an eventfd, written once by Close(): ends every network wait
  std::mutex closing_mu;  // one Close() at a time

  ~Impl() {
    if (wake >= 0) ::close(wake);
  }

  // An id from the buffer, asking for a refill at the low-water mark. REQUIRES: mu held.
  std::optional<std::int64_t> Pop(Stream& s) {
    const TimePoint now = SteadyClock::now();
    while (!s.batches.empty() && (s.batches.front().pos == s.batches.front().ids.size() ||
                                  s.batches.front().expires <= now)) {
      const Batch& b = s.batches.front();
      s.left -= b.ids.size() - b.pos;
      counters.dropped += b.ids.size() - b.pos;
      s.batches.pop_front();
    }
    if (static_cast<double>(s.left) < o.low_water * static_cast<double>(s.size) && !s.wanted &&
        !s.busy && now >= s.retry_at) {
      s.wanted = true;
      changed.notify_all();
    }
    if (s.batches.empty()) return std::nullopt;
    Batch& b = s.batches.front();
    --s.left;
    ++counters.served;
    return b.ids[b.pos++];
  }

  Result<std::int64_t> Take(Stream& s, std::unique_lock<std::mutex>& lock) {
    if (closed) return Cancelled("the client is closed");
    if (std::optional<std::int64_t> v = Pop(s)) return *v;
    std::uint64_t start = s.attempts;
    const TimePoint deadline = SteadyClock::now() + max_wait;
    for (;;) {
      if (!s.wanted && !s.busy) {
        s.wanted = true;
        changed.notify_all();
      }
      if (changed.wait_until(lock, deadline) == std::cv_status::timeout &&
          SteadyClock::now() >= deadline) {
        return Unavailable(fmt::format("no ids within {} ms from {}", max_wait.count(),
                                       fmt::join(o.servers, ", ")));
      }
      if (closed) return Cancelled("the client is closed");
      if (std::optional<std::int64_t> v = Pop(s)) return *v;
      if (s.attempts > start) {
        if (s.error) return *s.error;
        start = s.attempts;  // a refill with nothing usable: ask again
      }
    }
  }

  Stream* Wanted() {
    if (ids.wanted) return &ids;
    for (auto& [name, s] : tags) {
      if (s.wanted) return &s;
    }
    return nullptr;
  }

  void RefillLoop() {
    for (;;) {
      Stream* s = nullptr;
      std::size_t n = 0;
      std::vector<std::string> args;
      {
        std::unique_lock lock(mu);
        changed.wait(lock, [&] { return closed || (s = Wanted()) != nullptr; });
        if (closed) return;
        s->wanted = false;
        s->busy = true;
        const TimePoint now = SteadyClock::now();
        if (s->last_refill) {  // adapt: how long did the last batch last?
          const auto lasted = now - *s->last_refill;
          if (lasted < o.target_refill / 2) {
            s->size = std::min(o.max_batch, s->size * 2);
          } else if (lasted > o.target_refill * 2) {
            s->size = std::max(o.min_batch, s->size / 2);
          }
        }
        n = s->size;
        if (s->tag) {
          args = {"SEG.NEXT", *s->tag, std::to_string(n)};
        } else {
          args = {"ID.BATCH", std::to_string(n)};
        }
      }
      std::vector<std::int64_t> got;
      Status status = pool.Call(args, n, got);
      std::lock_guard lock(mu);
      s->busy = false;
      if (!status.ok() && LearnMaxBatch(status.error(), n)) {
        s->size = o.max_batch;
        s->wanted = true;  // at once, with the server's size: not a failure
        continue;
      }
      ++s->attempts;
      if (status.ok()) {
        s->error.reset();
        ++counters.refills;
        s->last_refill = SteadyClock::now();
        if (s->tag) {  // a tag's ids stay increasing within the client
          const std::size_t before = got.size();
          std::erase_if(got, [&](std::int64_t id) { return id <= s->high; });
          counters.dropped += before - got.size();
        }
        if (!got.empty()) {
          s->high = std::max(s->high, got.back());
          s->left += got.size();
          s->batches.push_back({std::move(got), 0, *s->last_refill + o.validity});
        }
      } else {
        s->error = status.error();
        s->retry_at = SteadyClock::now() + o.backoff_min;
      }
      changed.notify_all();
    }
  }

  // Client::StrictBatch once its arguments are checked.
  Result<std::vector<std::int64_t>> StrictBatch(std::string_view tag, std::size_t n) {
    // strict_wait bounds the whole call, its turn for the connections included.
    const TimePoint deadline = SteadyClock::now() + o.strict_wait;
    if (!TakeStrictTurn(deadline)) {
      return Unavailable(fmt::format(
          "no strict ids within {} ms: the client's other strict calls held its connections",
          o.strict_wait.count()));
    }
    struct Turn {
      Impl& impl;
      ~Turn() { impl.GiveStrictTurn(); }
    } turn{*this};
    const std::vector<std::string> args = {"STRICT.BATCH", std::string(tag), std::to_string(n)};
    for (;;) {
      std::vector<std::int64_t> got;
      Status status =
          IsClosed() ? Cancelled("the client is closed") : strict_pool.Call(args, n, got);
      if (status.ok() && got.back() - got.front() != static_cast<std::int64_t>(n - 1)) {
        return InvalidArgument(
            fmt::format("the ids of STRICT.BATCH {} {} are not consecutive: {} to {}", tag, n,
                        got.front(), got.back()));
      }
      if (status.ok()) return got;
      if (status.error().code != ErrorCode::kUnavailable) return std::move(status).error();
      const TimePoint up = strict_pool.SoonestUp();
      if (up >= deadline) {
        return Unavailable(fmt::format("no strict ids within {} ms: {}", o.strict_wait.count(),
                                       status.error().message));
      }
      std::unique_lock lock(mu);
      if (changed.wait_until(lock, up, [&] { return closed; }))
        return Cancelled("the client is closed");
    }
  }

  // Waits until no other strict call has strict_pool, or until `deadline` (false). A mutex and a
  // condition rather than a timed mutex, whose timed lock ThreadSanitizer does not see.
  bool TakeStrictTurn(TimePoint deadline) {
    std::unique_lock lock(strict_mu);
    if (!strict_free.wait_until(lock, deadline, [&] { return !strict_busy; })) return false;
    strict_busy = true;
    return true;
  }
  void GiveStrictTurn() {
    {
      std::lock_guard lock(strict_mu);
      strict_busy = false;
    }
    strict_free.notify_one();
  }

  bool IsClosed() {
    std::lock_guard lock(mu);
    return closed;
  }

  // A batch of `n` refused because the server allows fewer ("... allowed 1 to M", its
  // server.max_batch): the client keeps to M from now on. REQUIRES: mu held.
  bool LearnMaxBatch(const Error& error, std::size_t n) {
    constexpr std::string_view kAllowed = ": ERR count \"";
    constexpr std::string_view kMost = "allowed 1 to ";
    const std::size_t at = error.message.rfind(kMost);
    std::size_t most = 0;
    if (error.code != ErrorCode::kInvalidArgument ||
        error.message.find(kAllowed) == std::string::npos || at == std::string::npos) {
      return false;
    }
    const char* end = error.message.data() + error.message.size();
    const auto [ptr, ec] = std::from_chars(error.message.data() + at + kMost.size(), end, most);
    if (ec != std::errc() || ptr != end || most == 0 || most >= n) return false;
    o.max_batch = most;
    o.min_batch = std::min(o.min_batch, most);
    return true;
  }
};

Result<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->o = options;
  if (options.servers.empty())
    return InvalidArgument("servers is empty: give at least one host:port");
  for (std::size_t i = 0; i < options.servers.size(); ++i) {
    SEKKA_ASSIGN_OR_RETURN(auto hp, ParseServer(options.servers[i], i));
    for (Impl::Pool* pool : {&impl->pool, &impl->strict_pool}) {
      Impl::Server s;
      s.host = hp.first;
      s.port = hp.second;
      s.name = options.servers[i];
      pool->servers.push_back(std::move(s));
    }
  }
  if (!(1 <= options.min_batch && options.min_batch <= options.batch &&
        options.batch <= options.max_batch && options.max_batch <= kMaxBatch)) {
    return InvalidArgument(fmt::format(
        "batch sizes min_batch {}, batch {}, max_batch {}: allowed 1 <= min_batch <= batch <= "
        "max_batch <= {}",
        options.min_batch, options.batch, options.max_batch, kMaxBatch));
  }
  if (!(options.low_water > 0 && options.low_water < 1)) {
    return InvalidArgument(
        fmt::format("low_water = {}: allowed above 0 and below 1", options.low_water));
  }
  constexpr milliseconds kDay{86'400'000};  // the longest time option: deadlines stay in range
  for (auto [name, value] :
       {std::pair{"connect_timeout", options.connect_timeout},
        std::pair{"timeout", options.timeout}, std::pair{"target_refill", options.target_refill},
        std::pair{"validity", options.validity}, std::pair{"backoff_min", options.backoff_min},
        std::pair{"backoff_max", options.backoff_max},
        std::pair{"strict_wait", options.strict_wait}}) {
    if (value.count() <= 0 || value > kDay) {
      return InvalidArgument(fmt::format("{} = {} ms: allowed 1 ms to {} ms (a day)", name,
                                         value.count(), kDay.count()));
    }
  }
  if (options.backoff_max < options.backoff_min) {
    return InvalidArgument(fmt::format("backoff_max = {} ms: allowed at least backoff_min ({} ms)",
                                       options.backoff_max.count(), options.backoff_min.count()));
  }
  Result<std::shared_ptr<SSL_CTX>> tls = TlsContext(options);
  SEKKA_RETURN_IF_ERROR(tls);
  impl->tls = std::move(*tls);
  impl->ids.size = options.batch;
  impl->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake < 0) return Internal(fmt::format("eventfd: {}", std::strerror(errno)));
  impl->max_wait =
      2 * (options.connect_timeout + options.timeout) * static_cast<int>(options.servers.size()) +
      milliseconds(1000);
  Impl* raw = impl.get();
  impl->refiller = std::thread([raw] { raw->RefillLoop(); });
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<std::unique_ptr<Client>> Client::Create(std::string_view servers) {
  ClientOptions o;
  while (!servers.empty()) {
    const std::size_t comma = servers.find(',');
    o.servers.emplace_back(servers.substr(0, comma));
    servers = comma == std::string_view::npos ? std::string_view() : servers.substr(comma + 1);
  }
  return Create(o);
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() { Close(); }

void Client::Close() {
  std::lock_guard closing(impl_->closing_mu);
  {
    std::lock_guard lock(impl_->mu);
    impl_->closed = true;
  }
  const std::uint64_t one = 1;
  (void)!::write(impl_->wake, &one, sizeof one);  // cannot fail: the counter is far from full
  impl_->changed.notify_all();
  if (impl_->refiller.joinable()) impl_->refiller.join();
  for (Impl::Server& s : impl_->pool.servers) s.conn.reset();  // the refill thread's, now ended
  // A strict call in flight ends at once (the wake cut it off); the next ones see the close.
  {
    std::unique_lock lock(impl_->strict_mu);
    impl_->strict_free.wait(lock, [&] { return !impl_->strict_busy; });
    impl_->strict_busy = true;
  }
  for (Impl::Server& s : impl_->strict_pool.servers) s.conn.reset();
  impl_->GiveStrictTurn();
}

Result<Id> Client::NextId() {
  std::unique_lock lock(impl_->mu);
  return impl_->Take(impl_->ids, lock);
}

Status Client::NextIds(std::span<Id> out) {
  std::unique_lock lock(impl_->mu);
  for (Id& id : out) {
    SEKKA_ASSIGN_OR_RETURN(auto v, impl_->Take(impl_->ids, lock));
    id = v;
  }
  return Status::Ok();
}

Result<std::vector<Id>> Client::NextIds(std::size_t n) {
  std::vector<Id> out(n);
  SEKKA_RETURN_IF_ERROR(NextIds(std::span<Id>(out)));
  return out;
}

Result<std::int64_t> Client::Next(std::string_view tag) {
  if (tag.empty()) return InvalidArgument("tag is empty");
  std::unique_lock lock(impl_->mu);
  auto it = impl_->tags.find(tag);
  if (it == impl_->tags.end()) {
    Impl::Stream s;
    s.tag = std::string(tag);
    s.size = impl_->o.batch;
    it = impl_->tags.emplace(std::string(tag), std::move(s)).first;
  }
  return impl_->Take(it->second, lock);
}

Result<std::int64_t> Client::Strict(std::string_view tag) {
  SEKKA_ASSIGN_OR_RETURN(auto ids, StrictBatch(tag, 1));
  return ids.front();
}

Result<std::vector<std::int64_t>> Client::StrictBatch(std::string_view tag, std::size_t n) {
  if (tag.empty()) return InvalidArgument("tag is empty");
  if (n < 1 || n > kMaxBatch) {
    return InvalidArgument(fmt::format("n = {}: allowed 1 to {}", n, kMaxBatch));
  }
  return impl_->StrictBatch(tag, n);
}

ClientStats Client::stats() const {
  std::lock_guard lock(impl_->mu);
  ClientStats st = impl_->counters;
  st.buffered = impl_->ids.left;
  for (const auto& [name, s] : impl_->tags) st.buffered += s.left;
  return st;
}

}  // namespace sekka
