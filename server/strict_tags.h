// server/strict_tags.h
//
// The strict engine of one server (include/sekka/strict.h): for each strict tag asked for, it
// leads the tag (a StrictLeader) or forwards to the server that does. Forwarded requests that
// wait at once are coalesced into one call to the leader (as PD's TSO proxy batches): up to
// kStrictCallsInFlight calls are in flight per tag, each for every request waiting when it is
// made, which splits the leader's consecutive run among them in arrival order (they overlap in
// time, so any split keeps the real-time order). A request answered through NextAsync holds no
// thread while it waits: the calls run on threads of their own (the tick thread's owner's).
//
// A server keeps at most max_tags tags at once. A tag no request has used here for
// kStrictIdleRelease is let go (Tick): its lease is given back (its stored bound stays, so whoever
// leads it next starts above every id served) and its slot is freed. So made-up tags cost
// nothing after a minute, and only tags in use hold leases and coordinator sessions. A tag let
// go forgets the highest id this server got for it (Checked): the check covers ids got since
// the tag's last minute of use.
//
// Thread-safety: all methods may be called from any thread; Next may block on the coordinator or
// the leader (the command layer runs it off the event loops).

#ifndef SEKKA_SERVER_STRICT_TAGS_H_
#define SEKKA_SERVER_STRICT_TAGS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sekka/clock.h"
#include "sekka/status.h"
#include "sekka/strict.h"
#include "sekka/worker_lease.h"

namespace asio {
class thread_pool;  // asio/thread_pool.hpp, in strict_tags.cc only
}  // namespace asio

namespace sekka::server {

// The most strict tags a server serves (strict.tags lists at most this many).
inline constexpr std::size_t kStrictMaxTags = 1000;

// Calls to one tag's leader in flight at once from one server. A call more starts while others
// are in flight only when the requests waiting fill a window (one call's most), or for a
// blocking caller: each call costs both servers a request, and measured on one host, calls for
// a few requests each cost more than the wait they save (docs/benchmarks.md, "Strict ids").
// The call threads are twice as many, and each call goes to the back of their queue, so one
// busy or hung tag holds at most half of them.
inline constexpr int kStrictCallsInFlight = 4;
inline constexpr int kStrictCallThreads = 2 * kStrictCallsInFlight;

// How often a server reads the tags declared for the cluster (STRICT.CREATE): a tag declared
// anywhere is served everywhere within about this long.
inline constexpr std::chrono::milliseconds kStrictDeclaredRefresh{1'000};

// How long a tag may go unused on a server before the server lets it go.
inline constexpr std::chrono::milliseconds kStrictIdleRelease{60'000};

// How a server reaches the cluster's coordinator for strict tags (cli/serve.cc makes it of
// worker.source and worker.coordinator; tests and the simulation of the memory registry).
struct StrictCoordination {
  // A lease on `tag`'s own namespace, held as `identity` (unique to this process run).
  std::function<Result<std::unique_ptr<WorkerLease>>(const std::string& tag,
                                                     const std::string& identity)>
      open_lease;
  // The identity that holds `tag`'s lease now; "" when none. Errors: kUnavailable.
  std::function<Result<std::string>(const std::string& tag)> find_leader;
  // Asks the server at `address` (its RESP address) for `n` ids of `tag` within `timeout`;
  // returns the first. Errors: kLeaseLost (it does not lead the tag), kUnavailable
  // (unreachable, or no answer in time), others as its.
  std::function<Result<std::int64_t>(const std::string& address, const std::string& tag,
                                     std::int64_t n, std::chrono::milliseconds timeout)>
      forward;
  // `tag` was let go (kStrictIdleRelease): closes what was kept for finding its leader (a
  // session per tag). Null: nothing is kept.
  std::function<void(const std::string& tag)> forget;
  // The tags declared for the whole cluster (STRICT.CREATE), as last stored at the
  // coordinator. Null: none can be (the memory registry). Errors: kUnavailable.
  std::function<Result<std::vector<std::string>>()> declared;
  // Adds `tag` to the declared ones; false when it was there already. Errors: kExhausted (the
  // cluster declares kStrictMaxTags already), kUnavailable.
  std::function<Result<bool>(const std::string& tag)> declare;
  // Waits between tries to reach a leader; null: sleeps (the simulation passes its own time).
  std::function<void(std::chrono::milliseconds)> pause;
  // kStrictIdleRelease, shorter in the simulation (so that its runs let tags go).
  std::chrono::milliseconds idle_release = kStrictIdleRelease;
  // StrictOptions::planted_bug_start_at_bound: the simulation's self-test only.
  bool planted_bug_start_at_bound = false;
};

// `tag`'s namespace at the coordinator: "<cluster>.strict.<tag>". Errors: kInvalidArgument when
// that is not a valid cluster name (too long), naming the tag.
Result<std::string> StrictNamespace(std::string_view cluster, std::string_view tag);

// A leader's identity: "strict@<its RESP address>#<a number of this run>".
std::string StrictIdentity(std::string_view resp_address, std::uint64_t run);
// The RESP address in a leader's identity; "" when it has none.
std::string StrictAddressOf(std::string_view identity);

class StrictTags {
 public:
  // With `tick_thread`, a thread of its own calls Tick() every 100 ms (a slow coordinator then
  // holds up no other background work), and kStrictCallsInFlight threads make NextAsync's
  // calls; without, the owner calls Tick and NextAsync takes nothing.
  // `served`: the tags this server serves (strict.tags), with those declared for the cluster
  // (Declare, read again every kStrictDeclaredRefresh by Tick); a request for another is
  // refused before anything is asked of the coordinator.
  StrictTags(StrictCoordination coordination, Clock& clock, StrictOptions options, bool tick_thread,
             std::vector<std::string> served, std::size_t max_tags = kStrictMaxTags);
  // Gives back the leases of the tags led here: the next leaders start at once.
  ~StrictTags();

  // Where this server answers forwarded calls (its RESP address), set once it listens; until
  // then it forwards only.
  void SetAddress(const std::string& resp_address);
  // `n` consecutive ids of `tag`, the first returned: from this server when it leads the tag
  // (taking the lead when nobody has it), else from the leader. Errors: kInvalidArgument (tag,
  // n), kUnavailable (no leader reachable within the deadline, or the coordinator),
  // kExhausted.
  Result<std::int64_t> Next(std::string_view tag, std::int64_t n);
  // Next's answer through `done`, with no thread waiting for it: `done` runs in this thread
  // when the answer is at hand (led here with the ids, or refused), else on a call's thread
  // once the leader answered (it must not block). False, with `done` not run, when only Next
  // can answer: a tag this server has not used yet (adding it may wait for the coordinator),
  // or no call threads. `requests`: how many requests the ids answer (Stats).
  using Done = std::function<void(Result<std::int64_t>)>;
  bool NextAsync(std::string_view tag, std::int64_t n, std::uint64_t requests, Done done);
  // Waits for the calls in flight (each ends within its deadline); NextAsync takes nothing
  // after. The owner calls it before what the calls' `done`s reach goes away.
  void StopCalls();
  // Only from this server's own leadership, never forwarded (what a forwarded call runs); a
  // tag this server does not know is not added. Errors: kLeaseLost when this server does not
  // lead `tag`.
  Result<std::int64_t> NextAsLeader(std::string_view tag, std::int64_t n);
  // True when Next(tag, n) would be answered here at once (this server leads `tag` and holds n
  // ids below its bound): the command layer then runs it on the event loop.
  bool Ready(std::string_view tag, std::int64_t n);
  // Declares `tag` for every server of the cluster (STRICT.CREATE): served here at once, and
  // by the others once they read the declarations again. False when it was declared already
  // (or strict.tags lists it). Errors: kInvalidArgument (the name), kUnavailable (no
  // declarations at this coordinator, or it did not answer), kExhausted.
  Result<bool> Declare(std::string_view tag);
  // Renews the leases of the tags this server leads, each every ttl / 3, lets go of tags idle
  // for kStrictIdleRelease and reads the declared tags again (the service's background thread
  // calls it often).
  void Tick();
  // The tags in the table now (led or forwarded).
  std::size_t size() const;
  bool ticks_itself() const { return ticker_.joinable(); }
  // Counters, for metrics and tests.
  struct Stats {
    std::uint64_t led = 0;           // requests served from this server's leadership
    std::uint64_t forwarded = 0;     // requests answered by a leader elsewhere
    std::uint64_t leader_calls = 0;  // calls made to leaders (forwarded / leader_calls: coalescing)
    std::uint64_t elections = 0;     // leaderships taken
  };
  Stats stats() const;

 private:
  struct Tag;
  // A tag held for one request: Tick lets go only of tags nobody holds.
  struct Unuse {
    StrictTags* owner;
    void operator()(Tag* t) const;
  };
  using TagUse = std::unique_ptr<Tag, Unuse>;
  // The tag, added to the table when new. Errors: as Next's.
  Result<TagUse> Find(std::string_view tag);
  // The tag if the table has it (never added); null otherwise.
  TagUse Known(std::string_view tag);
  // Counts a use of `t` (under mu_).
  TagUse UseLocked(Tag& t);
  // Gives back the leases of tags idle for coordination_.idle_release, a few per call, and
  // drops them.
  void LetGoIdle();
  // Leads `t` if nobody does. Ok: this server leads it now.
  Status TryLead(Tag& t);
  Status CheckCount(std::int64_t n) const;
  // The refusal of a request that finds `t` suspect (its last call reached no leader in time)
  // with a call in flight; none otherwise. Under t.fmu.
  std::optional<Error> Suspect(const Tag& t) const;
  // One call for the requests waiting on `t` (within one window), answering them; the caller
  // has counted itself in t.calls.
  void MakeCall(Tag& t);
  // After MakeCall: while requests wait, the slot in t.calls passes to a call task at the back
  // of the call threads' queue (`use` holds the tag for it; null: one is taken); else it is
  // freed.
  void EndCall(Tag& t, TagUse use);
  // Queues a task that makes one call for the tag and ends it (EndCall); false once StopCalls
  // began.
  bool Post(TagUse use);
  // One call for `n` ids: to the leader elsewhere (`remote` set), or led here.
  Result<std::int64_t> CallLeader(Tag& t, std::int64_t n, bool& remote);
  // A leader's answer `first` for `n` ids, refused (kUnavailable) unless above `floor` (every id
  // this server got for `t` before the call was sent) and within an int64; the highest is then
  // raised.
  Result<std::int64_t> Checked(Tag& t, std::int64_t n, std::int64_t floor,
                               Result<std::int64_t> first);
  // TryLead's error in a follower's words.
  static Error LeadFailure(const Tag& t, const Error& e);

  const StrictCoordination coordination_;
  Clock& clock_;
  const StrictOptions options_;
  const std::set<std::string, std::less<>> served_;
  // Declared for the cluster, as last read (guarded by mu_), and when (Tick's thread only).
  std::set<std::string, std::less<>> declared_;
  std::int64_t declared_read_ms_ = std::numeric_limits<std::int64_t>::min() / 2;  // never
  // When a read of them last succeeded (guarded by mu_).
  std::int64_t declared_ok_ms_ = std::numeric_limits<std::int64_t>::min() / 2;
  // Reads the declared tags again when kStrictDeclaredRefresh has passed (Tick): on a call
  // thread, or on this one (`here`).
  void ReadDeclared(bool here = false);
  const std::size_t max_tags_;
  const std::uint64_t run_;
  mutable std::mutex mu_;
  std::string address_;                                            // guarded by mu_
  std::map<std::string, std::unique_ptr<Tag>, std::less<>> tags_;  // guarded by mu_
  std::atomic<std::uint64_t> led_{0}, forwarded_{0}, leader_calls_{0}, elections_{0};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  std::thread ticker_;
  std::unique_ptr<asio::thread_pool> calls_;   // NextAsync's calls (null: none)
  std::mutex post_mu_;                         // a post to calls_ and StopCalls, one at a time
  std::atomic<bool> calls_stopped_{false};     // written under post_mu_
  std::atomic<bool> declared_reading_{false};  // a read of the declarations is under way
  std::int64_t declared_failed_log_ms_ = std::numeric_limits<std::int64_t>::min() / 2;
};

}  // namespace sekka::server

#endif  // SEKKA_SERVER_STRICT_TAGS_H_
