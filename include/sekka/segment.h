// include/sekka/segment.h
//
// Segments: strictly increasing ids per *tag* (Leaf's biz_tag), served from ranges that a store
// hands out. A SegmentStore is all a database backend implements: it keeps, per tag, the next
// unallocated id and a default step, and moves the next id forward atomically. Buffering and
// prefetch live in the core, not in backends.
//
// Thread-safety: SegmentStore implementations must allow concurrent calls from any number of
// threads, and (for shared stores) from any number of processes.

#ifndef SEKKA_SEGMENT_H_
#define SEKKA_SEGMENT_H_

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sekka/clock.h"
#include "sekka/status.h"

namespace sekka {

// A half-open block [begin, end) of ids.
struct IdRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const IdRange&) const = default;
};

// A range as a store hands it out, with the tag's step as the store keeps it at that moment
// (0 where the store keeps none), read with the allocation: a step an administrator changes
// reaches every server at its next range, as Leaf's servers read theirs.
struct Allocation : IdRange {
  std::int64_t tag_step = 0;
};

// One tag as a store keeps it.
struct TagInfo {
  std::string tag;
  std::int64_t next_id = 1;  // the next id no range has covered yet
  std::int64_t step = 1000;  // the default range size
  // tinyid's multi-database ids: of the values a range covers, only those with
  // id % delta == remainder are issued, so several stores (one remainder each) never overlap.
  // delta 1, remainder 0: every value.
  std::int64_t delta = 1;
  std::int64_t remainder = 0;
  bool operator==(const TagInfo&) const = default;
};

// The part of the range [begin, end) a tag issues, as positions k with id = k * delta +
// remainder: [ceil((begin - remainder) / delta), ceil((end - remainder) / delta)). Every id it
// stands for lies inside the range, so ranges that never overlap give ids that never repeat.
IdRange IdPositions(const IdRange& range, std::int64_t delta, std::int64_t remainder);

// A tag name is 1 to kMaxTagCharacters characters of valid UTF-8 with no control character
// (U+0000 to U+001F, U+007F to U+009F): anything Leaf's and tinyid's VARCHAR columns hold, a
// space, `/` and 订单 included. Each front end spells it its own way (docs/contract.md, "Tags").
// Errors: kInvalidArgument naming what is allowed.
inline constexpr std::size_t kMaxTagCharacters = 128;
Status ValidateTag(std::string_view tag);
// A tag name for messages and listings: its characters as they are, `"` and `\` escaped, a
// control or a byte that is not UTF-8 as \xNN; cut at 60 characters ("...").
std::string ShownTag(std::string_view tag);
// A tag a store may create: a valid name, start >= 1, step 1 to kMaxTagStep, delta 1 to 1,000,000
// and remainder 0 to delta - 1. Errors: kInvalidArgument.
Status ValidateNewTag(const TagInfo& tag);
// The delta and remainder part of ValidateNewTag, also applied to every tag read from a store
// (a row another program wrote may hold anything). Errors: kInvalidArgument.
Status ValidateDelta(const TagInfo& tag);
// What a server serves from a store, checked the same on every path (its own buffers, and
// ranges handed straight to clients): a row with a valid delta and remainder (a row another
// program wrote may hold anything: a tag moved off tinyid's table has delta 0), and ranges of ids
// from 1 (Leaf's max_id 0, or a tinyid max_id that wrapped below 0, hands out values that are not
// ids). Errors: kUnavailable naming the row or the range and saying to fix the tag's row.
Status CheckServedRow(const TagInfo& row);
Status CheckServedRange(std::string_view tag, const IdRange& range);
// A tag's own step (TagInfo::step, SetStep): 1 to this, as segment.max_step bounds a server's.
inline constexpr std::int64_t kMaxTagStep = 1'000'000'000;
// A tag's own step in range. Errors: kInvalidArgument naming the range.
Status ValidateTagStep(std::int64_t step);

// The errors every store returns, worded once.
Error TagNotFound(std::string_view tag);
Error TagExhausted(std::string_view tag, std::int64_t next_id, std::int64_t step);
Error TagExists(std::string_view tag);
Error BadStep(std::int64_t step);
// A create below a deleted tag's tombstone (kInvalidArgument).
Error TagDeletedAt(std::string_view tag, std::int64_t next_id);
// Whether `tag` may take the place of the deleted row `dead` (its tombstone): at or above its
// next id, and with its delta and remainder (servers that served it keep those until they
// restart, so a change would make ids other stores of the tag issue). Errors: kInvalidArgument.
Status CheckRevival(const TagInfo& dead, const TagInfo& tag);
// DeleteTag on a peer's table (kInvalidArgument).
Error NoDeleteOnPeerTable(std::string_view tag, std::string_view peer);

// A row of tinyid's tiny_id_token table: a token, and a bizType (tag) it may ask for.
struct PeerToken {
  std::string token;
  std::string tag;
};

class SegmentStore {
 public:
  virtual ~SegmentStore() = default;

  // Atomically moves the tag's next id up by `step` and returns the range [old, old + step).
  // Ranges of one tag never overlap, across threads and processes.
  // Errors: kNotFound (unknown tag), kInvalidArgument (step < 1), kExhausted (the range would
  // pass 2^63 - 1), kUnavailable (the store cannot be reached).
  virtual Result<Allocation> Allocate(std::string_view tag, std::int64_t step) = 0;

  // Tag management, for `sekka segment ...`, the server's auto-create and its /v1/tags routes.
  // A deleted tag leaves a tombstone: its next id stays in the store, and the tag can be
  // created again only at that id or above, so no id it issued is issued again.
  // Errors: kInvalidArgument (bad name, start < 1, step < 1, or a start below a deleted tag's
  // next id: TagDeletedAt), kAlreadyExists, kUnavailable.
  virtual Status CreateTag(const TagInfo& tag) = 0;
  // Errors: kNotFound (unknown or deleted), kUnavailable.
  virtual Result<TagInfo> GetTag(std::string_view tag) = 0;
  // The tags named after `after` ("": from the first), in name order, at most `limit` of them
  // (0: all); not the deleted ones. A page of a large store: the next starts after its last.
  // Errors: kUnavailable.
  virtual Result<std::vector<TagInfo>> ListTagsAfter(std::string_view after, std::size_t limit) = 0;
  // Every tag (for tests and small stores).
  Result<std::vector<TagInfo>> ListTags() { return ListTagsAfter("", 0); }
  // Sets the tag's step: the size of a server's first range of it, and where its adaptive step
  // starts again at the server's next range. Errors: kNotFound, kInvalidArgument (step < 1, or
  // more than the table's column holds, or a store that keeps no step: CosId's), kUnavailable.
  virtual Status SetStep(std::string_view tag, std::int64_t step) = 0;
  // Deletes the tag, leaving its tombstone; returns the row as it was. Servers go on issuing
  // the ids they hold (they were allocated), then answer kNotFound. Errors: kNotFound,
  // kInvalidArgument (a peer's table: its own servers know no tombstone, and one of them making
  // the row again would issue old ids), kUnavailable.
  virtual Result<TagInfo> DeleteTag(std::string_view tag) = 0;
  // Moves `tag` from a peer's table in this store's database (`from`: "leaf", "tinyid") into
  // this store's own table, while the peer's servers may still draw from the peer's row: in one
  // transaction, under the peer row's lock, sekka's row is made at the peer's next id (step,
  // delta and remainder carried over) and the peer's row is raised to 2^63 - 1, past every id
  // sekka will serve, so that a peer server's next range fails instead of overlapping (tinyid's
  // row also gets delta 0: tinyid's servers compute the next max_id in Java, where it would
  // wrap, and fail on a delta of 0; the row stays, so the tag is never made there again).
  // Returns sekka's new row. Errors: kInvalidArgument (a store that cannot: not a SQL store
  // serving sekka's table on the peer's database), kNotFound (no such row in the peer's table),
  // kAlreadyExists (sekka's table has the tag, live or deleted; or the peer's row was moved
  // already), kUnavailable.
  virtual Result<TagInfo> ImportTag(std::string_view tag, std::string_view from);
  // True for a store serving tinyid's table in place, whose database holds tinyid's per-bizType
  // tokens (tiny_id_token): tinyid's routes then check them as tinyid does.
  virtual bool has_peer_tokens() const { return false; }
  // Those tokens (at most 100,000 rows). Errors: kUnavailable (the table cannot be read),
  // kInvalidArgument (a store without them).
  virtual Result<std::vector<PeerToken>> PeerTokens();
};

// An in-memory store, for tests and for trying things out: nothing survives the process.
std::unique_ptr<SegmentStore> NewMemorySegmentStore();

struct SegmentOptions {
  // Bounds of the range size asked of the store; the first range uses the tag's own step.
  std::int64_t min_step = 1;
  std::int64_t max_step = 10'000'000;
  // The step is doubled when a range lasted less than half this, halved when it lasted more
  // than twice this (Leaf: 15 minutes).
  std::chrono::milliseconds target_range_duration{15 * 60 * 1000};
  // The next range is fetched once this share of the current one is used (Leaf: 10%).
  int prefetch_percent = 10;
  // When both ranges are empty, a caller waits this long for the fetch in flight before
  // failing with kUnavailable.
  std::chrono::milliseconds wait_deadline{2000};
  // After a failed fetch, the next try waits this long (doubling up to 5 s).
  std::chrono::milliseconds retry_backoff{100};
  // At most this many tags are served (each keeps buffers and a place in the metrics); more
  // is kExhausted. Bounds what clients can make a server hold, with auto-create too.
  std::size_t max_tags = 10'000;
  // A tag the store did not know is remembered for this long (at most max_tags such names);
  // asked for again meanwhile, it is looked up again only as this budget allows (a token
  // bucket across all names), else answered kNotFound from memory. A tag created by another
  // process is seen at once unless clients flood the server with unknown names.
  std::chrono::milliseconds unknown_tag_ttl{5000};
  int unknown_tag_rechecks_per_second = 20;
  // Called after each failed store call for a tag: a range fetch, or the load of its row on
  // first use (an unknown tag is not a failure); from the thread that made the call, without
  // the allocator's lock. Unset: none.
  std::function<void(std::string_view tag, const Error& error)> on_store_error;
  // false: no fetcher threads. The owner makes the queued fetches with RunFetches() (the
  // simulation: every store call under its scheduler), and a caller with no ids buffered is
  // answered kUnavailable at once instead of waiting for a fetch.
  bool fetch_threads = true;
};

// Counters of one tag, for metrics.
struct SegmentStats {
  std::uint64_t issued = 0;    // tickets taken: ids issued, plus any skipped
  std::int64_t remaining = 0;  // ids buffered in this process (current and next range)
  std::int64_t step = 0;       // the step of the last fetch
  std::uint64_t fetches = 0;
  std::uint64_t fetch_errors = 0;
  std::uint64_t fetch_micros_total = 0;
  std::uint64_t waits = 0;        // callers that found both ranges empty
  std::uint64_t unavailable = 0;  // callers that gave up at the deadline
  std::int64_t tag_step = 0;      // the tag's step as the store last said
  // The ids this process holds, as ranges of ids [first, last + 1), the one in use first (with
  // delta > 1 only every delta-th of them is issued).
  std::vector<IdRange> buffered;
  std::string last_error;  // of the last fetch; "" when it succeeded
};

class SegmentAllocator;

// The ids of one tag in this process: strictly increasing for any one thread and across
// threads in real-time order. NextId() takes no lock: one atomic add and a few loads.
class SegmentSequence {
 public:
  // Errors: kUnavailable (both ranges empty past the deadline: the store is slow or down),
  // kExhausted, kNotFound (the tag was removed from the store).
  Result<std::int64_t> NextId() {
    const std::uint64_t ticket = hot_.next_ticket.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t v1 = hot_.version.load(std::memory_order_acquire);
    const std::uint64_t first = hot_.first.load(std::memory_order_relaxed);
    const std::uint64_t end = hot_.end.load(std::memory_order_relaxed);
    const std::int64_t delta = hot_.delta.load(std::memory_order_relaxed);
    const std::uint64_t trigger = hot_.prefetch_ticket.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (hot_.version.load(std::memory_order_relaxed) == v1 && (v1 & 1) == 0 && ticket >= first &&
        ticket < end && ticket != trigger) {
      return ToId(static_cast<std::int64_t>(ticket) + delta);
    }
    return NextIdSlow(ticket);
  }
  // Fills `out` with increasing ids. Errors: as NextId(); on error `out` holds no usable ids.
  Status NextIds(std::span<std::int64_t> out);
  SegmentStats stats() const;
  const std::string& tag() const { return tag_; }

  // `delta` and `remainder` as the tag's TagInfo (fixed for the sequence's life).
  SegmentSequence(SegmentAllocator& owner, std::string tag, std::int64_t delta = 1,
                  std::int64_t remainder = 0);

 private:
  friend class SegmentAllocator;
  static constexpr std::uint64_t kRing = 8;
  // One published range; written only under owner's mutex, read without a lock under the
  // seqlock `version` (odd while being written).
  struct Slot {
    std::atomic<std::uint64_t> version{0};
    std::atomic<std::uint64_t> index{0};         // which range (0, 1, 2, ...)
    std::atomic<std::uint64_t> first_ticket{0};  // the ticket of its first id
    std::atomic<std::int64_t> begin{0};
    std::atomic<std::int64_t> size{0};
  };
  struct View {
    std::uint64_t index, first_ticket;
    std::int64_t begin, size;
  };

  bool Read(std::uint64_t range, View& view) const;
  // Ranges hold positions (IdPositions); this is the id of one.
  std::int64_t ToId(std::int64_t position) const { return position * delta_ + remainder_; }
  // The ticket is outside the hot copy of the current range, or it is the prefetch ticket.
  Result<std::int64_t> NextIdSlow(std::uint64_t ticket);
  // Maps a ticket to its id, waiting for its range if needed. Errors: kUnavailable at the
  // deadline, or the fetch error.
  // Maps `ticket` to its id, waiting for its range if needed. A ticket whose range has left
  // the ring is abandoned for a new one, which is written back into `ticket`.
  Result<std::int64_t> Resolve(std::uint64_t& ticket);
  void Publish(const IdRange& range);  // REQUIRES: owner's mu_ held

  // Sets the hot copy of the current range. REQUIRES: owner's mu_ held.
  void SetCurrent(std::uint64_t range, const View& view);

  SegmentAllocator& owner_;
  const std::string tag_;
  const std::int64_t delta_;
  const std::int64_t remainder_;
  // The hot path's cache line: the ticket counter and, under a seqlock written with owner's
  // mu_ held, a copy of the current range (id = ticket + delta for tickets in [first, end)).
  struct alignas(64) Hot {
    std::atomic<std::uint64_t> next_ticket{0};
    std::atomic<std::uint64_t> version{0};
    std::atomic<std::uint64_t> first{0};
    std::atomic<std::uint64_t> end{0};
    std::atomic<std::int64_t> delta{0};
    std::atomic<std::uint64_t> prefetch_ticket{~0ull};  // the ticket that asks for the next range
  } hot_;
  alignas(64) std::atomic<std::uint64_t> current_{0};  // the range tickets are in now
  std::atomic<std::uint64_t> published_{0};            // ranges published so far
  std::array<Slot, kRing> slots_{};
  // Guarded by owner's mu_:
  std::uint64_t end_ticket_ = 0;  // one past the last ticket of the last published range
  bool fetching_ = false;
  std::int64_t step_ = 0;
  std::int64_t tag_step_ = 0;  // the tag's own step, as the store last said
  std::int64_t last_fetch_ms_ = 0;
  std::int64_t retry_at_ms_ = 0;  // steady-clock ms before which no fetch is retried
  std::int64_t backoff_ms_ = 0;
  Status last_error_;
  std::atomic<std::uint64_t> fetches_{0}, fetch_errors_{0}, fetch_micros_{0}, waits_{0},
      unavailable_{0};
};

// Hands out segment ids for many tags from one store, with a background thread that fetches
// each tag's next range well before the current one runs out (double buffering).
//
// Thread-safety: all methods may be called from any thread.
class SegmentAllocator {
 public:
  // `store` and `clock` must outlive the allocator.
  SegmentAllocator(SegmentStore& store, Clock& clock, SegmentOptions options = {});
  ~SegmentAllocator();

  // The sequence of `tag`, created on first use; its first range is fetched in the
  // background (callers wait for it up to the deadline). The pointer stays valid for the
  // allocator's life, whatever its fetches do. Errors: kNotFound (unknown tag),
  // kInvalidArgument (bad name), kUnavailable (the store).
  Result<SegmentSequence*> Sequence(std::string_view tag);
  // True when `tag` is served here and has at least `n` ids buffered: a call for them will not
  // wait for the store (a hint: another caller may take them first).
  bool Buffered(std::string_view tag, std::int64_t n) const;
  // The tag as the store keeps it; a name the store did not know is answered kNotFound from
  // memory for a while, as Sequence does. Errors: kNotFound, kInvalidArgument, kUnavailable.
  Result<TagInfo> GetTag(std::string_view tag);
  // Creates `tag` in the store (and forgets that it was unknown). Errors: as
  // SegmentStore::CreateTag.
  Status CreateTag(const TagInfo& tag);
  // The store's SetStep; a tag served here takes the new step at once (others at their next
  // range). Errors: as SegmentStore::SetStep.
  Status SetStep(std::string_view tag, std::int64_t step);
  // Every sequence created so far, for metrics.
  std::vector<const SegmentSequence*> Sequences() const;
  // The tags not served yet whose row failed to load, with how many loads failed (for
  // metrics; a tag's count moves into its sequence's fetch_errors once it is served). At most
  // max_tags names; failures of names past that are counted under "".
  std::vector<std::pair<std::string, std::uint64_t>> LoadErrors() const;
  // Without fetch_threads: makes every fetch queued now, once each (a failed one stays queued,
  // with no backoff: the caller paces the calls). With fetch threads: nothing.
  void RunFetches();

 private:
  friend class SegmentSequence;
  void RequestFetch(SegmentSequence& seq);  // REQUIRES: mu_ held
  // The store's GetTag behind the cache of unknown names; unlocks `lock` around the query.
  Result<TagInfo> LookUp(std::string_view tag, std::unique_lock<std::mutex>& lock);
  Status FetchNow(SegmentSequence& seq, std::unique_lock<std::mutex>& lock);
  void Run();

  SegmentStore& store_;
  Clock& clock_;
  const SegmentOptions options_;
  mutable std::mutex mu_;
  std::condition_variable fetched_;  // a fetch finished (or failed)
  std::condition_variable work_;     // a fetch was requested
  std::map<std::string, std::unique_ptr<SegmentSequence>, std::less<>> sequences_;  // mu_
  // Tags the store did not know, and when (steady ms); guarded by mu_.
  std::map<std::string, std::int64_t, std::less<>> unknown_;
  // LoadErrors(); guarded by mu_.
  std::map<std::string, std::uint64_t, std::less<>> load_errors_;
  // The re-check budget (unknown_tag_rechecks_per_second): tokens, and when they were counted
  // (steady ms); guarded by mu_.
  double recheck_tokens_ = 0;
  std::int64_t recheck_counted_ms_ = 0;
  std::deque<SegmentSequence*> queue_;  // guarded by mu_: tags waiting for a fetch
  bool stopping_ = false;               // guarded by mu_
  // Several fetchers, so that one tag whose store calls hang does not hold up the others.
  static constexpr int kFetchers = 4;
  std::vector<std::thread> fetchers_;
};

}  // namespace sekka

#endif  // SEKKA_SEGMENT_H_
