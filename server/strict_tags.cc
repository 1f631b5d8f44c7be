#include "server/strict_tags.h"

#include <fmt/format.h>

#include <algorithm>
#include <asio/post.hpp>
#include <asio/thread_pool.hpp>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "server/log.h"

namespace sekka::server {

// One strict tag on this server: its lease (led or not) and its forwarding queue.
struct StrictTags::Tag {
  std::string name;
  std::unique_ptr<StrictLeader> leader;  // made with the tag, never replaced
  std::mutex lead_mu;                    // one Lead() at a time
  std::int64_t next_tick_ms = 0;         // guarded by lead_mu (monotonic ms)
  // Guarded by StrictTags::mu_: requests holding it now, and when it was last held.
  int users = 0;
  std::int64_t last_used_ms = 0;
  // Forwarding, guarded by fmu: requests waiting for a call, and the calls in flight.
  struct Waiter {
    std::int64_t n = 0;
    std::uint64_t requests = 1;  // the requests it answers (Stats)
    Done done;
    bool* taken = nullptr;  // a blocking Next's: set when a call takes it (guarded by fmu)
  };
  std::mutex fmu;
  std::condition_variable slot_free;  // a call ended, or a waiter's answer came
  std::deque<Waiter> queue;
  std::int64_t waiting = 0;    // the ids the queue asks for
  int calls = 0;               // at most kStrictCallsInFlight
  std::string leader_address;  // the leader's last known address ("" unknown)
  // Until then (monotonic ms), a request that finds a call in flight is refused at once: the
  // last call found no leader that answered in time.
  std::int64_t suspect_until_ms = 0;
  std::int64_t highest = 0;  // the highest id this server got for the tag through a call
};

Result<std::string> StrictNamespace(std::string_view cluster, std::string_view tag) {
  std::string name = fmt::format("{}.strict.{}", cluster, tag);
  if (Status s = ValidateClusterName(name); !s.ok()) {
    return InvalidArgument(fmt::format(
        "strict tag {} does not fit cluster {}: \"{}\" is its coordinator namespace, and {}", tag,
        cluster, name, s.error().message));
  }
  return name;
}

std::string StrictIdentity(std::string_view resp_address, std::uint64_t run) {
  return fmt::format("strict@{}#{:016x}", resp_address, run);
}

std::string StrictAddressOf(std::string_view identity) {
  if (identity.rfind("strict@", 0) != 0) return "";
  const std::size_t hash = identity.rfind('#');
  if (hash == std::string_view::npos || hash < 7) return "";
  return std::string(identity.substr(7, hash - 7));
}

StrictTags::StrictTags(StrictCoordination coordination, Clock& clock, StrictOptions options,
                       bool tick_thread, std::vector<std::string> served, std::size_t max_tags)
    : coordination_(std::move(coordination)),
      clock_(clock),
      options_(options),
      served_(std::make_move_iterator(served.begin()), std::make_move_iterator(served.end())),
      max_tags_(max_tags),
      run_(std::random_device{}() * 0x100000000ull + std::random_device{}()) {
  if (!tick_thread) return;
  // Once before serving, on this thread: a server that was just started knows the tags
  // declared for the cluster (else it answers unavailable for them until it does).
  ReadDeclared(/*here=*/true);
  calls_ = std::make_unique<asio::thread_pool>(kStrictCallThreads);
  ticker_ = std::thread([this] {
    std::unique_lock lock(stop_mu_);
    while (!stopping_) {
      lock.unlock();
      Tick();
      lock.lock();
      stop_cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_; });
    }
  });
}

StrictTags::~StrictTags() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  StopCalls();
  std::lock_guard lock(mu_);
  for (auto& [name, t] : tags_) t->leader->Resign();  // the next leader starts at once
}

void StrictTags::SetAddress(const std::string& resp_address) {
  std::lock_guard lock(mu_);
  address_ = resp_address;
}

void StrictTags::Unuse::operator()(Tag* t) const {
  std::lock_guard lock(owner->mu_);
  --t->users;
  t->last_used_ms = owner->clock_.MonotonicMillis();
}

StrictTags::TagUse StrictTags::UseLocked(Tag& t) {
  ++t.users;
  t.last_used_ms = clock_.MonotonicMillis();
  return TagUse(&t, Unuse{this});
}

StrictTags::TagUse StrictTags::Known(std::string_view tag) {
  std::lock_guard lock(mu_);
  auto it = tags_.find(tag);
  return it == tags_.end() ? TagUse(nullptr, Unuse{this}) : UseLocked(*it->second);
}

std::size_t StrictTags::size() const {
  std::lock_guard lock(mu_);
  return tags_.size();
}

Result<StrictTags::TagUse> StrictTags::Find(std::string_view tag) {
  SEKKA_RETURN_IF_ERROR(ValidateStrictTag(tag));
  // Only listed tags: each tag leaves records at the coordinator for good (its bound), so the
  // operator decides how many there are, not whoever can send a request.
  std::lock_guard lock(mu_);
  if (!served_.contains(tag) && !declared_.contains(tag)) {
    // Not known here may be not read yet: a server that started, or lost its coordinator,
    // while the tag was declared says so rather than that the tag does not exist.
    if (coordination_.declared &&
        clock_.MonotonicMillis() - declared_ok_ms_ > 3 * kStrictDeclaredRefresh.count()) {
      return Unavailable(fmt::format(
          "strict tag {} is not in strict.tags, and the tags declared for the cluster are not "
          "read yet, or not in the last {} s (the coordinator did not answer): try again",
          tag, 3 * kStrictDeclaredRefresh.count() / 1000));
    }
    return NotFound(fmt::format(
        "strict tag {} is not served here: strict.tags lists the tags a server serves ({} here), "
        "and STRICT.CREATE declares more for the cluster ({} so far)",
        tag, served_.size(), declared_.size()));
  }
  if (auto it = tags_.find(tag); it != tags_.end()) return UseLocked(*it->second);
  if (tags_.size() >= max_tags_) {
    return Exhausted(fmt::format("strict tag {} is not served: this server serves {} tags already",
                                 tag, tags_.size()));
  }
  // A tag is made only once this server can be found by others: every tag then has a leader
  // part that can take the lead (made once, never replaced: read without mu_).
  if (address_.empty()) {
    return Unavailable(
        "this server has no RESP address for other servers to forward to (server.resp_listen is "
        "off or a wildcard address without strict.advertise, or it is starting): strict ids need "
        "it");
  }
  auto t = std::make_unique<Tag>();
  t->name = std::string(tag);
  SEKKA_ASSIGN_OR_RETURN(auto lease,
                         coordination_.open_lease(t->name, StrictIdentity(address_, run_)));
  t->leader = std::make_unique<StrictLeader>(t->name, std::move(lease), clock_, options_);
  Tag& added = *t;
  tags_.emplace(added.name, std::move(t));
  return UseLocked(added);
}

Status StrictTags::TryLead(Tag& t) {
  std::lock_guard lock(t.lead_mu);
  if (t.leader->leading()) return Status::Ok();
  Status s = t.leader->Lead();
  if (s.ok()) elections_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

bool StrictTags::Ready(std::string_view tag, std::int64_t n) {
  std::unique_lock lock(mu_, std::try_to_lock);  // never waits: the event loops ask
  if (!lock.owns_lock()) return false;
  auto it = tags_.find(tag);
  if (it == tags_.end()) return false;
  it->second->last_used_ms = clock_.MonotonicMillis();  // Next follows: it is not let go between
  return it->second->leader->Ready(n);
}

Result<std::int64_t> StrictTags::NextAsLeader(std::string_view tag, std::int64_t n) {
  SEKKA_RETURN_IF_ERROR(ValidateStrictTag(tag));
  // A forwarded call never adds a tag: a server that does not know a tag does not lead it, and
  // calls for made-up tags cannot fill the table (and open a lease each).
  TagUse t = Known(tag);
  if (t == nullptr || !t->leader->leading()) {
    return LeaseLost(fmt::format("this server does not lead strict tag {}", tag));
  }
  Result<std::int64_t> first = t->leader->Next(n);
  if (first.ok()) led_.fetch_add(1, std::memory_order_relaxed);
  return first;
}

Status StrictTags::CheckCount(std::int64_t n) const {
  if (n >= 1 && n <= options_.window) return Status::Ok();
  return InvalidArgument(
      fmt::format("count {} is not valid for strict ids: allowed 1 to {}", n, options_.window));
}

Result<std::int64_t> StrictTags::Next(std::string_view tag, std::int64_t n) {
  SEKKA_RETURN_IF_ERROR(CheckCount(n));
  SEKKA_ASSIGN_OR_RETURN(auto found, Find(tag));
  Tag& t = *found;
  // 1. Led here: served here.
  if (t.leader->leading()) {
    Result<std::int64_t> first = t.leader->Next(n);
    if (first.ok() || first.error().code != ErrorCode::kLeaseLost) {
      if (first.ok()) led_.fetch_add(1, std::memory_order_relaxed);
      return first;
    }
  }
  // 2. Else from the leader elsewhere: a call made by this thread when one more may be in
  // flight and no call has taken this request yet, else by the call that took it.
  auto answer = std::make_shared<std::optional<Result<std::int64_t>>>();
  Done done = [&t, answer](Result<std::int64_t> first) {
    std::lock_guard lock(t.fmu);
    *answer = std::move(first);
    t.slot_free.notify_all();
  };
  bool taken = false;  // guarded by t.fmu
  std::unique_lock lock(t.fmu);
  if (std::optional<Error> refused = Suspect(t)) return *std::move(refused);
  t.queue.push_back({n, 1, std::move(done), &taken});
  t.waiting += n;
  while (!answer->has_value()) {
    if (taken || t.calls >= kStrictCallsInFlight) {
      t.slot_free.wait(lock);
      continue;
    }
    ++t.calls;
    lock.unlock();
    MakeCall(t);
    EndCall(t, TagUse(nullptr, Unuse{this}));
    lock.lock();
  }
  return **std::move(answer);
}

bool StrictTags::NextAsync(std::string_view tag, std::int64_t n, std::uint64_t requests,
                           Done done) {
  if (calls_ == nullptr || calls_stopped_.load()) return false;
  if (Status s = CheckCount(n); !s.ok()) {
    done(s.error());
    return true;
  }
  TagUse t = Known(tag);
  if (t == nullptr) return false;  // Next adds it (a coordinator session may be opened)
  if (t->leader->Ready(n)) {       // led here, with the ids at hand
    Result<std::int64_t> first = t->leader->Next(n);
    if (first.ok() || first.error().code != ErrorCode::kLeaseLost) {
      if (first.ok()) led_.fetch_add(requests, std::memory_order_relaxed);
      done(std::move(first));
      return true;
    }  // the lease ran out meanwhile: a call finds the leader (or leads again)
  }
  std::unique_lock lock(t->fmu);
  if (std::optional<Error> refused = Suspect(*t)) {
    lock.unlock();
    done(*std::move(refused));
    return true;
  }
  t->queue.push_back({n, requests, std::move(done), nullptr});
  t->waiting += n;
  if (t->calls >= kStrictCallsInFlight || (t->calls > 0 && t->waiting < options_.window)) {
    return true;  // a call in flight, or the one after it, takes it
  }
  ++t->calls;
  lock.unlock();
  Tag& tag_ref = *t;
  if (!Post(std::move(t))) EndCall(tag_ref, TagUse(nullptr, Unuse{this}));
  return true;
}

bool StrictTags::Post(TagUse use) {
  std::lock_guard lock(post_mu_);  // StopCalls joins only after every post it allows
  if (calls_stopped_.load()) return false;
  asio::post(*calls_, [this, use = std::move(use)]() mutable {
    Tag& t = *use;
    MakeCall(t);
    EndCall(t, std::move(use));
  });
  return true;
}

void StrictTags::EndCall(Tag& t, TagUse use) {
  {
    std::lock_guard lock(t.fmu);
    if (t.queue.empty() || calls_ == nullptr || calls_stopped_.load()) {
      --t.calls;
      t.slot_free.notify_all();  // a waiting Next makes the next call
      return;
    }
  }
  // Requests still wait: the slot passes to a task at the back of the call threads' queue, so
  // that one busy tag takes its turn with the others' calls rather than keep a thread.
  if (use == nullptr) {
    std::lock_guard table(mu_);
    use = UseLocked(t);
  }
  if (Post(std::move(use))) return;
  std::lock_guard lock(t.fmu);
  --t.calls;
  t.slot_free.notify_all();
}

void StrictTags::StopCalls() {
  if (calls_ == nullptr) return;
  {
    std::lock_guard lock(post_mu_);
    if (calls_stopped_.exchange(true)) return;
  }
  calls_->join();
  // What no call will take now is answered: a server stopping.
  std::vector<Tag*> tags;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, t] : tags_) tags.push_back(t.get());
  }
  for (Tag* t : tags) {
    std::deque<Tag::Waiter> left;
    {
      std::lock_guard lock(t->fmu);
      left.swap(t->queue);
      t->waiting = 0;
    }
    for (Tag::Waiter& w : left) {
      w.done(Unavailable(fmt::format("strict tag {}: the server is stopping", t->name)));
    }
  }
}

std::optional<Error> StrictTags::Suspect(const Tag& t) const {
  // While the last call found no leader that answered in time, the calls in flight try again;
  // other requests are refused at once rather than wait.
  if (t.calls == 0 || clock_.MonotonicMillis() >= t.suspect_until_ms) return std::nullopt;
  return Unavailable(fmt::format(
      "strict tag {}: its leader did not answer in time; another call is trying again", t.name));
}

void StrictTags::MakeCall(Tag& t) {
  std::unique_lock lock(t.fmu);
  // One call for every request waiting now (within one window). They all began before it was
  // made, so it splits the leader's consecutive run among them in any order.
  std::vector<Tag::Waiter> batch;
  std::int64_t total = 0;
  while (!t.queue.empty() && total + t.queue.front().n <= options_.window) {
    Tag::Waiter& w = t.queue.front();
    total += w.n;
    t.waiting -= w.n;
    if (w.taken != nullptr) *w.taken = true;
    batch.push_back(std::move(w));
    t.queue.pop_front();
  }
  lock.unlock();
  if (batch.empty()) return;
  bool remote = false;
  Result<std::int64_t> first = CallLeader(t, total, remote);
  lock.lock();
  t.suspect_until_ms = first.ok() ? 0 : clock_.MonotonicMillis() + 1000;
  lock.unlock();
  if (first.ok()) {
    std::uint64_t requests = 0;
    for (const Tag::Waiter& w : batch) requests += w.requests;
    (remote ? forwarded_ : led_).fetch_add(requests, std::memory_order_relaxed);
  }
  for (Tag::Waiter& w : batch) {
    if (first.ok()) {
      w.done(*first);
      *first += w.n;
    } else {
      w.done(first.error());
    }
  }
}

Result<std::int64_t> StrictTags::CallLeader(Tag& t, std::int64_t n, bool& remote) {
  // Until a leader answers, within the deadline: the known leader, else the coordinator's, else
  // this server takes the lead. A failover takes up to a TTL; callers see kUnavailable after.
  const std::int64_t deadline = clock_.MonotonicMillis() + 2000;
  Error last = Unavailable(fmt::format("no leader of strict tag {} answered", t.name));
  for (int attempt = 0; attempt < 10 && clock_.MonotonicMillis() < deadline; ++attempt) {
    if (attempt > 0) {
      const std::chrono::milliseconds wait(20 * attempt);
      coordination_.pause ? coordination_.pause(wait) : std::this_thread::sleep_for(wait);
    }
    if (t.leader->leading()) {
      Result<std::int64_t> first = t.leader->Next(n);
      if (first.ok() || first.error().code != ErrorCode::kLeaseLost) return first;
    }
    std::string address;
    {
      std::lock_guard lock(t.fmu);
      address = t.leader_address;
    }
    if (address.empty()) {
      Result<std::string> holder = coordination_.find_leader(t.name);
      if (!holder.ok()) {
        last = std::move(holder).error();
        continue;
      }
      if (holder->empty()) {  // nobody leads: this server does, if it can
        Status led = TryLead(t);
        if (!led.ok()) last = LeadFailure(t, led.error());
        continue;
      }
      address = StrictAddressOf(*holder);
    }
    std::string mine;
    {
      std::lock_guard lock(mu_);
      mine = address_;
    }
    if (address == mine) {  // this server's own earlier run, or this one: lead here
      if (Status led = TryLead(t); !led.ok()) last = LeadFailure(t, led.error());
      continue;
    }
    leader_calls_.fetch_add(1, std::memory_order_relaxed);
    const std::chrono::milliseconds left(
        std::max<std::int64_t>(deadline - clock_.MonotonicMillis(), 50));
    // The answer must be above every id this server got from calls answered before this one is
    // sent (the leader served those first). Calls in flight together overlap: one answered
    // later, though sent earlier, may hold lower ids than this server has.
    std::int64_t floor = 0;
    {
      std::lock_guard lock(t.fmu);
      floor = t.highest;
    }
    Result<std::int64_t> first =
        Checked(t, n, floor, coordination_.forward(address, t.name, n, left));
    if (first.ok()) {
      remote = true;
      std::lock_guard lock(t.fmu);
      t.leader_address = address;
      return first;
    }
    // Not (or no longer) the leader, or unreachable: look it up again.
    {
      std::lock_guard lock(t.fmu);
      t.leader_address.clear();
    }
    const ErrorCode code = first.error().code;
    if (code != ErrorCode::kLeaseLost && code != ErrorCode::kUnavailable) return first;
    last = std::move(first).error();
  }
  return Unavailable(fmt::format("strict tag {}: {}", t.name, last.message));
}

Result<std::int64_t> StrictTags::Checked(Tag& t, std::int64_t n, std::int64_t floor,
                                         Result<std::int64_t> first) {
  if (!first.ok()) return first;
  std::lock_guard lock(t.fmu);
  // A leader's run starts above every id of the tag answered before the call was made, and fits
  // in an int64. Anything else is not a leader (a process that took a dead leader's port, a
  // broken one): its answer is dropped, and the leader looked up again.
  if (*first <= floor || *first > std::numeric_limits<std::int64_t>::max() - (n - 1)) {
    return Unavailable(fmt::format(
        "strict tag {}: the server at the leader's address answered {} ids from {}, not above "
        "{} (ids this server got already) or past 2^63 - 1",
        t.name, n, *first, floor));
  }
  t.highest = std::max(t.highest, *first + n - 1);
  return first;
}

Error StrictTags::LeadFailure(const Tag& t, const Error& e) {
  // "No free worker id" is the lease's word for a one-slot namespace someone else holds.
  if (e.code != ErrorCode::kExhausted) return e;
  return Unavailable(fmt::format(
      "strict tag {} has a leader this server could not reach yet (its lease ends within "
      "worker.lease_ttl if it is gone)",
      t.name));
}

void StrictTags::Tick() {
  std::vector<Tag*> led;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, t] : tags_) {
      if (t->leader->leading()) led.push_back(t.get());
    }
  }
  const std::int64_t now = clock_.MonotonicMillis();
  for (Tag* t : led) {
    std::lock_guard lock(t->lead_mu);
    if (now < t->next_tick_ms) continue;
    t->next_tick_ms = now + options_.ttl.count() / 3;
    (void)t->leader->Tick();  // a lost lease shows as leading() false: the next call re-elects
  }
  LetGoIdle();  // after the renewals, which have deadlines
  ReadDeclared();
}

Result<bool> StrictTags::Declare(std::string_view tag) {
  SEKKA_RETURN_IF_ERROR(ValidateStrictTag(tag));
  if (!coordination_.declare) {
    return Unavailable(
        "strict tags cannot be declared here: STRICT.CREATE needs worker.source etcd, zookeeper "
        "or redis (list the tag in strict.tags)");
  }
  const std::string name(tag);
  // Declared even when strict.tags lists it here: the other servers may not.
  SEKKA_ASSIGN_OR_RETURN(auto added, coordination_.declare(name));
  std::lock_guard lock(mu_);
  declared_.insert(name);
  return added;
}

void StrictTags::ReadDeclared(bool here) {
  if (!coordination_.declared) return;
  const std::int64_t now = clock_.MonotonicMillis();
  if (now - declared_read_ms_ < kStrictDeclaredRefresh.count()) return;
  if (declared_reading_.exchange(true)) return;  // the last read is not over
  declared_read_ms_ = now;
  auto read = [this, now] {
    Result<std::vector<std::string>> tags = coordination_.declared();
    if (tags.ok()) {
      std::set<std::string, std::less<>> got(std::make_move_iterator(tags->begin()),
                                             std::make_move_iterator(tags->end()));
      std::lock_guard lock(mu_);
      declared_.merge(got);  // a declaration is never taken back
      declared_ok_ms_ = now;
    } else if (now - declared_failed_log_ms_ >= 60'000) {  // kept as last read meanwhile
      declared_failed_log_ms_ = now;
      Log(LogLevel::kWarn, "the declared strict tags cannot be read (retried every second)",
          fmt::format("error=\"{}\"", tags.error().message));
    }
    declared_reading_.store(false);
  };
  // Off the tick thread, whose renewals have deadlines: a slow coordinator delays only this.
  if (calls_ != nullptr && !here) {
    std::lock_guard lock(post_mu_);
    if (!calls_stopped_.load()) {
      asio::post(*calls_, read);
      return;
    }
  }
  read();
}

void StrictTags::LetGoIdle() {
  // A few per call: each gives its lease back with a coordinator call.
  constexpr std::size_t kPerCall = 32;
  std::vector<std::unique_ptr<Tag>> idle;
  {
    std::lock_guard lock(mu_);
    const std::int64_t now = clock_.MonotonicMillis();
    for (auto it = tags_.begin(); it != tags_.end() && idle.size() < kPerCall;) {
      const Tag& t = *it->second;
      if (t.users == 0 && now - t.last_used_ms >= coordination_.idle_release.count()) {
        idle.push_back(std::move(it->second));
        it = tags_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Out of the table, nobody holds them: the next request for one adds it anew and elects.
  for (const std::unique_ptr<Tag>& t : idle) {
    t->leader->Resign();
    if (coordination_.forget) coordination_.forget(t->name);
  }
}

StrictTags::Stats StrictTags::stats() const {
  return {led_.load(), forwarded_.load(), leader_calls_.load(), elections_.load()};
}

}  // namespace sekka::server
