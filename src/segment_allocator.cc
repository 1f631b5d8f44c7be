// SegmentAllocator: double-buffered ranges per tag with a lock-free hot path.
//
// Every id of a tag is a *ticket* from one atomic counter (next_ticket_); ranges fetched from the
// store are published in order into a ring of slots, range r covering tickets
// [first_ticket(r), first_ticket(r) + size(r)). A caller takes a ticket with one fetch_add and
// maps it through the current range's slot, read under a seqlock. Tickets increase, and ranges of
// one process increase, so ids increase in real-time order across threads. A ticket whose range
// is gone from the ring (a caller stalled for kRing fetches) or whose wait hit the deadline is
// abandoned: its id is never issued (a gap, never a repeat) and the caller takes a new, larger
// ticket. See docs/design.md ("Segments").

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "sekka/segment.h"

namespace sekka {
namespace {

// Backoff is real waiting by real threads: it is timed on the steady clock.
std::int64_t SteadyMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

SegmentSequence::SegmentSequence(SegmentAllocator& owner, std::string tag, std::int64_t delta,
                                 std::int64_t remainder)
    : owner_(owner), tag_(std::move(tag)), delta_(delta), remainder_(remainder) {}

bool SegmentSequence::Read(std::uint64_t range, View& view) const {
  const Slot& s = slots_[range % kRing];
  for (int tries = 0; tries < 8; ++tries) {
    const std::uint64_t v1 = s.version.load(std::memory_order_acquire);
    if (v1 & 1) continue;
    view.index = s.index.load(std::memory_order_relaxed);
    view.first_ticket = s.first_ticket.load(std::memory_order_relaxed);
    view.begin = s.begin.load(std::memory_order_relaxed);
    view.size = s.size.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) == v1) return view.index == range && v1 != 0;
  }
  return false;
}

Result<std::int64_t> SegmentSequence::NextIdSlow(std::uint64_t ticket) {
  if (ticket == hot_.prefetch_ticket.load(std::memory_order_relaxed)) {
    std::lock_guard lock(owner_.mu_);
    owner_.RequestFetch(*this);
  }
  return Resolve(ticket);
}

void SegmentSequence::SetCurrent(std::uint64_t range, const View& v) {
  const std::uint64_t version = hot_.version.load(std::memory_order_relaxed);
  hot_.version.store(version + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  hot_.first.store(v.first_ticket, std::memory_order_relaxed);
  hot_.end.store(v.first_ticket + static_cast<std::uint64_t>(v.size), std::memory_order_relaxed);
  hot_.delta.store(v.begin - static_cast<std::int64_t>(v.first_ticket), std::memory_order_relaxed);
  hot_.prefetch_ticket.store(
      v.first_ticket + static_cast<std::uint64_t>(v.size) *
                           static_cast<std::uint64_t>(owner_.options_.prefetch_percent) / 100,
      std::memory_order_relaxed);
  hot_.version.store(version + 2, std::memory_order_release);
  current_.store(range, std::memory_order_release);
}

Status SegmentSequence::NextIds(std::span<std::int64_t> out) {
  if (out.empty()) return Status::Ok();
  std::uint64_t ticket = hot_.next_ticket.fetch_add(out.size(), std::memory_order_relaxed);
  const std::uint64_t last = ticket + out.size() - 1;
  const std::uint64_t trigger = hot_.prefetch_ticket.load(std::memory_order_relaxed);
  if (trigger >= ticket && trigger <= last) {
    std::lock_guard lock(owner_.mu_);
    owner_.RequestFetch(*this);
  }
  std::size_t filled = 0;
  while (filled < out.size()) {
    View v;
    const bool fast = Read(current_.load(std::memory_order_acquire), v) &&
                      ticket >= v.first_ticket &&
                      ticket - v.first_ticket < static_cast<std::uint64_t>(v.size);
    if (!fast) {
      // Crosses into a range not current yet (or not fetched yet): map this one ticket the slow
      // way, which advances current_, and continue in bulk.
      const std::uint64_t asked = ticket;
      SEKKA_ASSIGN_OR_RETURN(auto id, Resolve(ticket));
      out[filled++] = id;
      if (ticket != asked && filled < out.size()) {
        // The batch's tickets were too old and Resolve took a newer one: the rest must come
        // after it, or the batch would go back down (the slow path's order defect).
        ticket = hot_.next_ticket.fetch_add(out.size() - filled, std::memory_order_relaxed);
      } else {
        ++ticket;
      }
      continue;
    }
    const std::uint64_t in_range = v.first_ticket + static_cast<std::uint64_t>(v.size) - ticket;
    const std::size_t n = std::min<std::size_t>(in_range, out.size() - filled);
    const std::int64_t base = v.begin + static_cast<std::int64_t>(ticket - v.first_ticket);
    for (std::size_t i = 0; i < n; ++i) out[filled + i] = ToId(base + static_cast<std::int64_t>(i));
    filled += n;
    ticket += n;
  }
  // The batch may have crossed into a range whose own prefetch point it passed.
  const std::uint64_t now_trigger = hot_.prefetch_ticket.load(std::memory_order_relaxed);
  if (now_trigger != trigger && now_trigger <= last) {
    std::lock_guard lock(owner_.mu_);
    owner_.RequestFetch(*this);
  }
  return Status::Ok();
}

Result<std::int64_t> SegmentSequence::Resolve(std::uint64_t& ticket) {
  SegmentAllocator& a = owner_;
  const auto deadline = std::chrono::steady_clock::now() + a.options_.wait_deadline;
  std::unique_lock lock(a.mu_);
  bool counted_wait = false;
  for (;;) {
    const std::uint64_t published = published_.load(std::memory_order_acquire);
    const std::uint64_t oldest = published > kRing ? published - kRing : 0;
    View v;
    bool too_old = published > 0;
    for (std::uint64_t r = published; r-- > oldest;) {
      if (!Read(r, v)) continue;
      if (ticket >= v.first_ticket + static_cast<std::uint64_t>(v.size)) {
        too_old = false;
        break;  // the ticket is past every published range
      }
      if (ticket >= v.first_ticket) {
        if (r > current_.load(std::memory_order_relaxed)) SetCurrent(r, v);
        if (ticket >= hot_.prefetch_ticket.load(std::memory_order_relaxed)) a.RequestFetch(*this);
        return ToId(v.begin + static_cast<std::int64_t>(ticket - v.first_ticket));
      }
    }
    if (too_old) {  // its range left the ring: abandon the ticket, take a new one
      ticket = hot_.next_ticket.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // The ticket is beyond every range fetched so far: both buffers are empty. Wait for the
    // fetch in flight, up to the deadline.
    a.RequestFetch(*this);
    if (!counted_wait) {
      counted_wait = true;
      waits_.fetch_add(1, std::memory_order_relaxed);
    }
    // The store's last answer was an error (and it is retried with backoff): say so now rather
    // than holding the caller, often an event loop, until the deadline.
    if (!last_error_.ok()) {
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      return Unavailable(fmt::format("tag \"{}\": no ids buffered and the store failed: {}", tag_,
                                     last_error_.error().message));
    }
    // Nothing fetches but the owner's RunFetches: waiting here would wait for nobody.
    if (!a.options_.fetch_threads) {
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      return Unavailable(fmt::format("tag \"{}\": no ids buffered; a fetch is queued", tag_));
    }
    const bool timed_out = a.fetched_.wait_until(lock, deadline) == std::cv_status::timeout;
    if (published_.load(std::memory_order_acquire) != published) continue;
    if (timed_out) {
      unavailable_.fetch_add(1, std::memory_order_relaxed);
      return Unavailable(
          fmt::format("tag \"{}\": no ids buffered and the store gave no new range within {} ms{}",
                      tag_, a.options_.wait_deadline.count(),
                      last_error_.ok() ? std::string() : ": " + last_error_.error().message));
    }
  }
}

void SegmentSequence::Publish(const IdRange& range) {
  const std::uint64_t r = published_.load(std::memory_order_relaxed);
  Slot& s = slots_[r % kRing];
  const std::uint64_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.index.store(r, std::memory_order_relaxed);
  s.first_ticket.store(end_ticket_, std::memory_order_relaxed);
  s.begin.store(range.begin, std::memory_order_relaxed);
  s.size.store(range.size(), std::memory_order_relaxed);
  s.version.store(v + 2, std::memory_order_release);
  const View view{r, end_ticket_, range.begin, range.size()};
  end_ticket_ += static_cast<std::uint64_t>(range.size());
  published_.store(r + 1, std::memory_order_release);
  if (r == 0) SetCurrent(0, view);
}

SegmentStats SegmentSequence::stats() const {
  SegmentStats st;
  {
    std::lock_guard lock(owner_.mu_);
    const std::uint64_t next = hot_.next_ticket.load(std::memory_order_relaxed);
    st.issued = next;
    st.remaining = end_ticket_ > next ? static_cast<std::int64_t>(end_ticket_ - next) : 0;
    st.step = step_;
    st.tag_step = tag_step_;
    if (!last_error_.ok()) st.last_error = last_error_.error().message;
    const std::uint64_t published = published_.load(std::memory_order_relaxed);
    for (std::uint64_t r = current_.load(std::memory_order_relaxed); r < published; ++r) {
      View v;
      if (!Read(r, v)) continue;
      // Positions of tickets not taken yet: from the next ticket's on, in the range in use.
      const std::int64_t used =
          next > v.first_ticket ? static_cast<std::int64_t>(next - v.first_ticket) : 0;
      if (used >= v.size) continue;
      st.buffered.push_back({ToId(v.begin + used), ToId(v.begin + v.size - 1) + 1});
    }
  }
  st.fetches = fetches_.load();
  st.fetch_errors = fetch_errors_.load();
  st.fetch_micros_total = fetch_micros_.load();
  st.waits = waits_.load();
  st.unavailable = unavailable_.load();
  return st;
}

SegmentAllocator::SegmentAllocator(SegmentStore& store, Clock& clock, SegmentOptions options)
    : store_(store), clock_(clock), options_(options) {
  if (!options_.fetch_threads) return;
  for (int i = 0; i < kFetchers; ++i) fetchers_.emplace_back([this] { Run(); });
}

SegmentAllocator::~SegmentAllocator() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  fetched_.notify_all();
  for (std::thread& t : fetchers_) t.join();
}

Result<SegmentSequence*> SegmentAllocator::Sequence(std::string_view tag) {
  std::unique_lock lock(mu_);
  if (auto it = sequences_.find(tag); it != sequences_.end()) return it->second.get();
  SEKKA_RETURN_IF_ERROR(ValidateTag(tag));
  // The row first: a tag that does not exist is not_found at the bound too (a client retries
  // an unavailable one).
  SEKKA_ASSIGN_OR_RETURN(auto info, LookUp(tag, lock));
  // A row that another program wrote is checked like a new tag: a delta of 0 divided by zero.
  SEKKA_RETURN_IF_ERROR(CheckServedRow(info));
  if (auto it = sequences_.find(tag); it != sequences_.end()) return it->second.get();
  if (sequences_.size() >= options_.max_tags) {
    return Exhausted(fmt::format(
        "tag \"{}\" is not served: this server already serves {} tags (segment.max_tags)", tag,
        sequences_.size()));
  }
  auto [it, inserted] = sequences_.emplace(std::string(tag), nullptr);
  if (!inserted) return it->second.get();  // another caller created it meanwhile
  std::uint64_t load_errors = 0;
  if (auto failed = load_errors_.find(tag); failed != load_errors_.end()) {
    load_errors = failed->second;
    load_errors_.erase(failed);
  }
  // A sequence, once made, lives as long as the allocator: callers may hold it and wait on it,
  // so a first fetch that fails leaves it in place (with the error) rather than erasing it.
  // Its first range is fetched by the fetcher thread like every other; callers wait for it up
  // to the deadline.
  it->second =
      std::make_unique<SegmentSequence>(*this, std::string(tag), info.delta, info.remainder);
  SegmentSequence& seq = *it->second;
  seq.fetch_errors_.store(load_errors, std::memory_order_relaxed);
  seq.tag_step_ = info.step;
  seq.step_ = std::clamp(info.step, options_.min_step, options_.max_step);
  RequestFetch(seq);
  return &seq;
}

Result<TagInfo> SegmentAllocator::LookUp(std::string_view tag, std::unique_lock<std::mutex>& lock) {
  // A name the store did not know lately is looked up again as the re-check budget allows:
  // names asked for again and again cost at most that many queries a second, not one each.
  if (auto it = unknown_.find(tag); it != unknown_.end()) {
    const std::int64_t now = SteadyMillis();
    const double rate = options_.unknown_tag_rechecks_per_second;
    recheck_tokens_ = std::min(rate, recheck_tokens_ + (now - recheck_counted_ms_) * rate / 1000);
    recheck_counted_ms_ = now;
    const bool fresh = now - it->second < options_.unknown_tag_ttl.count();
    if (fresh && recheck_tokens_ < 1) return TagNotFound(tag);
    if (fresh) recheck_tokens_ -= 1;
    unknown_.erase(it);
  }
  lock.unlock();
  Result<TagInfo> info = store_.GetTag(tag);
  const bool failed = !info.ok() && info.error().code != ErrorCode::kNotFound;
  if (failed && options_.on_store_error) options_.on_store_error(tag, info.error());
  lock.lock();
  if (auto served = sequences_.find(tag); failed && served != sequences_.end() && served->second) {
    served->second->fetch_errors_.fetch_add(1, std::memory_order_relaxed);  // a served tag's row
  } else if (failed) {
    auto counted = load_errors_.find(tag);
    if (counted == load_errors_.end()) {
      const bool room = load_errors_.size() < options_.max_tags;
      counted = load_errors_.emplace(room ? std::string(tag) : std::string(), 0).first;
    }
    ++counted->second;
  }
  if (!info.ok() && info.error().code == ErrorCode::kNotFound) {
    if (unknown_.size() >= options_.max_tags) unknown_.clear();
    unknown_[std::string(tag)] = SteadyMillis();
  }
  return info;
}

std::vector<std::pair<std::string, std::uint64_t>> SegmentAllocator::LoadErrors() const {
  std::lock_guard lock(mu_);
  return {load_errors_.begin(), load_errors_.end()};
}

Result<TagInfo> SegmentAllocator::GetTag(std::string_view tag) {
  SEKKA_RETURN_IF_ERROR(ValidateTag(tag));
  std::unique_lock lock(mu_);
  return LookUp(tag, lock);
}

bool SegmentAllocator::Buffered(std::string_view tag, std::int64_t n) const {
  std::lock_guard lock(mu_);
  auto it = sequences_.find(tag);
  if (it == sequences_.end()) return false;
  const SegmentSequence& seq = *it->second;
  const std::uint64_t next = seq.hot_.next_ticket.load(std::memory_order_relaxed);
  return seq.end_ticket_ > next && seq.end_ticket_ - next >= static_cast<std::uint64_t>(n);
}

Status SegmentAllocator::CreateTag(const TagInfo& tag) {
  Status s = store_.CreateTag(tag);
  std::lock_guard lock(mu_);
  if (auto it = unknown_.find(tag.tag); it != unknown_.end()) unknown_.erase(it);
  return s;
}

Status SegmentAllocator::SetStep(std::string_view tag, std::int64_t step) {
  if (Status s = ValidateTag(tag); !s.ok()) return s;
  if (Status s = store_.SetStep(tag, step); !s.ok()) return s;
  std::lock_guard lock(mu_);
  if (auto it = sequences_.find(tag); it != sequences_.end()) {
    it->second->tag_step_ = step;
    it->second->step_ = std::clamp(step, options_.min_step, options_.max_step);
  }
  return Status::Ok();
}

std::vector<const SegmentSequence*> SegmentAllocator::Sequences() const {
  std::lock_guard lock(mu_);
  std::vector<const SegmentSequence*> out;
  for (const auto& [name, seq] : sequences_) out.push_back(seq.get());
  return out;
}

void SegmentAllocator::RequestFetch(SegmentSequence& seq) {
  if (seq.fetching_ || stopping_) return;
  // Double buffering: at most one range ahead of the current one.
  const std::uint64_t published = seq.published_.load(std::memory_order_relaxed);
  const std::uint64_t next = seq.hot_.next_ticket.load(std::memory_order_relaxed);
  if (published > seq.current_.load(std::memory_order_relaxed) + 1 && next < seq.end_ticket_) {
    return;
  }
  seq.fetching_ = true;
  queue_.push_back(&seq);
  work_.notify_one();
}

Status SegmentAllocator::FetchNow(SegmentSequence& seq, std::unique_lock<std::mutex>& lock) {
  seq.fetching_ = true;
  // The step: doubled when the last range lasted less than half the target, halved when it
  // lasted more than twice the target (Leaf's rule), within the bounds.
  const std::int64_t now = clock_.NowMillis();
  const std::int64_t target = options_.target_range_duration.count();
  if (seq.last_fetch_ms_ > 0) {
    const std::int64_t lasted = now - seq.last_fetch_ms_;
    if (lasted < target / 2) {
      seq.step_ = std::min(seq.step_ * 2, options_.max_step);
    } else if (lasted > target * 2) {
      seq.step_ = std::max(seq.step_ / 2, options_.min_step);
    }
  }
  // A range of `delta` values or more holds at least one of the tag's ids.
  const std::int64_t step = std::max(seq.step_, seq.delta_);
  lock.unlock();
  const auto begin = std::chrono::steady_clock::now();
  Result<Allocation> range = store_.Allocate(seq.tag_, step);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - begin)
                          .count();
  // A range that is not ids (CheckServedRange) is dropped like a failed fetch.
  if (range.ok()) {
    if (Status s = CheckServedRange(seq.tag_, *range); !s.ok()) range = std::move(s).error();
  }
  if (!range.ok() && options_.on_store_error) options_.on_store_error(seq.tag_, range.error());
  lock.lock();
  seq.fetching_ = false;
  seq.fetches_.fetch_add(1, std::memory_order_relaxed);
  seq.fetch_micros_.fetch_add(static_cast<std::uint64_t>(micros), std::memory_order_relaxed);
  if (!range.ok()) {
    seq.fetch_errors_.fetch_add(1, std::memory_order_relaxed);
    seq.last_error_ = range.error();
    seq.backoff_ms_ = seq.backoff_ms_ == 0 ? options_.retry_backoff.count()
                                           : std::min<std::int64_t>(seq.backoff_ms_ * 2, 5000);
    seq.retry_at_ms_ = SteadyMillis() + seq.backoff_ms_;
    fetched_.notify_all();
    return std::move(range).error();
  }
  seq.last_error_ = Status::Ok();
  seq.backoff_ms_ = 0;
  seq.last_fetch_ms_ = now;
  // A step changed in the store (SetStep) is where the adaptive step starts again.
  if (range->tag_step > 0 && range->tag_step != seq.tag_step_) {
    seq.tag_step_ = range->tag_step;
    seq.step_ = std::clamp(range->tag_step, options_.min_step, options_.max_step);
  }
  seq.Publish(IdPositions(*range, seq.delta_, seq.remainder_));
  fetched_.notify_all();
  return Status::Ok();
}

void SegmentAllocator::RunFetches() {
  if (options_.fetch_threads) return;
  std::unique_lock lock(mu_);
  std::deque<SegmentSequence*> queued;
  queued.swap(queue_);
  for (SegmentSequence* seq : queued) {
    if (!FetchNow(*seq, lock).ok()) {
      seq->fetching_ = true;  // still queued: the next call tries again
      queue_.push_back(seq);
    }
  }
}

void SegmentAllocator::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    // The first tag whose backoff (after a failed fetch) is over; the others wait their turn
    // without holding up anyone.
    const std::int64_t now = SteadyMillis();
    auto ready = std::find_if(queue_.begin(), queue_.end(),
                              [now](const SegmentSequence* q) { return q->retry_at_ms_ <= now; });
    if (ready == queue_.end()) {
      std::int64_t earliest = queue_.front()->retry_at_ms_;
      for (const SegmentSequence* q : queue_) earliest = std::min(earliest, q->retry_at_ms_);
      work_.wait_for(lock,
                     std::chrono::milliseconds(std::clamp<std::int64_t>(earliest - now, 1, 5000)));
      continue;
    }
    SegmentSequence& seq = **ready;
    queue_.erase(ready);
    if (!FetchNow(seq, lock).ok() && !stopping_) {
      // Still needed? Callers waiting past the published ranges ask again; keep trying.
      seq.fetching_ = true;
      queue_.push_back(&seq);
      work_.notify_one();
    }
  }
}

}  // namespace sekka
