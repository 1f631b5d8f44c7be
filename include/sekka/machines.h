// include/sekka/machines.h
//
// Machine ids for clients that generate snowflake ids themselves, as the CosId proxy's machine
// distributor hands them out: per namespace, ids 0 .. 2^machine_bits - 1, each held by one
// instance at a time. An instance keeps its id by guarding it (at least once per its
// safeGuardDuration); an id not guarded for that long goes to the next instance that asks. A
// revert (giving it back) counts as the holder's last guard: anyone can send one, so it never
// takes an id from a holder that goes on guarding. A "stable" instance (a fixed host, a StatefulSet
// pod) keeps its id across restarts and never loses it to expiry.
//
// Safety, as for sekka's own worker ids: each id keeps the last time (ms since 1970) its holder
// was known to be issuing ids (a high-water mark that never decreases), and whoever gets the id
// next is told a lastTimeStamp at or after it, so a client that waits until its clock is past
// lastTimeStamp (CosId's ClockBackwardsSynchronizer does) never repeats the previous holder's
// ids. Every change is stored (MachineStore::Save) before it is answered.
//
//   MachineRegistry& r = ...;
//   Result<MachineGrant> g = r.Distribute("orders", 10, "10.0.0.5:4123", false, 300'000);
//   r.Guard("orders", "10.0.0.5:4123", 300'000);   // every minute or so
//   r.Revert("orders", "10.0.0.5:4123");           // on shutdown
//
// Every change reads the namespace's records from the store, changes them and saves them at the
// version read (again when another server saved in between): servers that share a store (the
// cluster's coordinator) never hand one id to two instances.
//
// Thread-safety: MachineRegistry's methods may be called from any thread.

#ifndef SEKKA_MACHINES_H_
#define SEKKA_MACHINES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/clock.h"
#include "sekka/status.h"

namespace sekka {

class Coordinator;

// One machine id of a namespace as the store keeps it.
struct MachineRecord {
  std::string ns;
  std::int64_t machine_id = 0;
  std::string instance;      // the holder; "" when the id was given back
  bool stable = false;       // the holder keeps it across restarts and it never expires
  std::int64_t last_ms = 0;  // the hwm: the last time its holders were known to issue ids
  std::string lost_by;       // the holder it was taken from after it expired, for Guard's answer
  // The holder's own safeGuardDuration (ms), from its last Distribute or Guard: the holding
  // expires only when the holder has not guarded it for this long, whoever asks.
  std::int64_t guard_ms = 0;
  bool operator==(const MachineRecord&) const = default;
};

// One namespace's records as stored, and the version a save compares: opaque, from the store
// (a counter, a coordinator's revision, a digest of a peer's keys or rows).
struct MachineSnapshot {
  std::vector<MachineRecord> records;
  std::string version;
};

// Where the records live: a file of one server's data dir, or the cluster's coordinator, which
// every server of the cluster reads and writes (so each answers the same).
class MachineStore {
 public:
  virtual ~MachineStore() = default;
  // The records of namespace `ns`. Errors: kInternal or kUnavailable (unreadable),
  // kInvalidArgument (corrupt, naming the line).
  virtual Result<MachineSnapshot> Load(std::string_view ns) = 0;
  // Replaces the records of `ns` with `records` (all of `ns`), durably, if they are still at
  // `version`; false when another server saved them since (load again). Errors: kInternal or
  // kUnavailable (it may or may not have landed), kExhausted (more than the store keeps).
  virtual Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                            const std::string& version) = 0;
  // Whether this store can keep `ns` and `instance` (valid names, as MachineRegistry checks):
  // a peer's columns may be shorter. Errors: kInvalidArgument naming the limit.
  virtual Status CheckNames(std::string_view /*ns*/, std::string_view /*instance*/) {
    return Status::Ok();
  }
};
// A store in memory (tests): nothing survives the process.
std::unique_ptr<MachineStore> NewMemoryMachineStore();
// The cluster's store at `coordinator` (a session of its own: only its shared documents are
// used), one document per namespace, "machines.<ns>", in FormatMachineRecords' text: every server
// of the cluster answers /machines from the same records.
std::unique_ptr<MachineStore> NewCoordinatorMachineStore(std::unique_ptr<Coordinator> coordinator);

// For stores that keep every namespace in one list (memory, file, simulation): the records of
// `ns` in `all`, and `all` with them replaced by `records`.
std::vector<MachineRecord> RecordsOf(const std::vector<MachineRecord>& all, std::string_view ns);
std::vector<MachineRecord> WithRecordsOf(std::vector<MachineRecord> all, std::string_view ns,
                                         const std::vector<MachineRecord>& records);

// The records as text (one tab-separated line each) and back; the file store's format. A file
// of format v1 (no guard_ms) reads each holding as guarded for MachineLimits::max_guard_ms, the
// longest allowed: never shorter than its holder asked for.
std::string FormatMachineRecords(const std::vector<MachineRecord>& records);
Result<std::vector<MachineRecord>> ParseMachineRecords(std::string_view text);

struct MachineGrant {
  std::int64_t machine_id = 0;
  // Issue ids only once the clock is past this (ms since 1970).
  std::int64_t last_timestamp_ms = 0;
};

// A change of one namespace's records: edits them and says whether to save them.
using MachineChange = std::function<Result<bool>(std::vector<MachineRecord>& records)>;
// The one way records change in a store others may write too: loads `ns`, runs `change`, saves
// at the version loaded when it says so, and from the load again when another writer saved in
// between (16 tries, a few random ms apart). Errors: the change's; kExhausted (more than the
// store keeps); kUnavailable (the store; a save whose answer was lost may have landed).
Status ChangeMachines(MachineStore& store, std::string_view ns, const MachineChange& change);

struct MachineLimits {
  int max_machine_bits = 16;       // machineBit 1 to this
  std::size_t max_records = 4096;  // machine ids held or remembered, per namespace
  std::int64_t max_guard_ms = 30LL * 24 * 3600 * 1000;  // safeGuardDuration at most (30 days)
};

class MachineRegistry {
 public:
  // Reads nothing yet: each call reads the store.
  MachineRegistry(MachineStore& store, Clock& clock, MachineLimits limits = {})
      : store_(store), clock_(clock), limits_(limits) {}

  // The id `instance` holds in `ns` (asking again is answered with the same id), else a free
  // one: given back, or (for a non-stable instance) not guarded by its non-stable holder for the
  // holder's own guard_ms (never the asker's), else the lowest never used. `guard_ms` is this
  // instance's own, stored with its holding. An instance holds one id per namespace: asking
  // with fewer machine bits than its id needs gives that id back (its hwm raised to now). Errors:
  // kExhausted (every id of the namespace is held: CosId's M-01), kInvalidArgument (a bad
  // namespace, instance, machine_bits or guard_ms), kUnavailable (the store; nothing changed).
  Result<MachineGrant> Distribute(std::string_view ns, int machine_bits, std::string_view instance,
                                  bool stable, std::int64_t guard_ms);
  // Marks the id of `instance` as in use now. Errors: kNotFound (the instance holds no id in
  // `ns`: M-02), kLeaseLost (its id expired and went to another instance: M-03),
  // kInvalidArgument, kUnavailable.
  Status Guard(std::string_view ns, std::string_view instance, std::int64_t guard_ms);
  // Gives the id of `instance` back: its last guard. Another instance gets it once the guard
  // lapses, unless `instance` guards again first (anyone may send a revert); a stable instance
  // keeps it for its next start. Holding nothing is not an error. Errors: kInvalidArgument,
  // kUnavailable.
  Status Revert(std::string_view ns, std::string_view instance);

  // The records of `ns` as stored. Errors: kUnavailable.
  Result<std::vector<MachineRecord>> Records(std::string_view ns);

 private:
  // What a change does with the records it was given.
  enum class Outcome { kKeep, kSave };
  using Change =
      std::function<Result<Outcome>(std::vector<MachineRecord>& records, std::int64_t now_ms)>;
  // Loads the records of `ns`, runs `change` on them, and saves them at the version loaded when
  // it says so; from the load again when another server saved in between. Errors: the
  // change's; kUnavailable (the store; nothing changed, or, when a save's answer was lost, the
  // change may have landed).
  Status Update(std::string_view ns, const Change& change);
  // Raises the hwm of the id `instance` holds in `records` to `now`, with the holder's guard
  // duration when `guard_ms` > 0. Returns whether it holds one.
  static bool Touch(std::vector<MachineRecord>& records, std::string_view instance,
                    std::int64_t guard_ms, std::int64_t now);

  MachineStore& store_;
  Clock& clock_;
  const MachineLimits limits_;
  std::mutex mu_;  // one change at a time in this process
};

}  // namespace sekka

#endif  // SEKKA_MACHINES_H_
