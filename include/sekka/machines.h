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
// Thread-safety: MachineRegistry's methods may be called from any thread.

#ifndef SEKKA_MACHINES_H_
#define SEKKA_MACHINES_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/clock.h"
#include "sekka/status.h"

namespace sekka {

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

// Where the records live. Save replaces everything stored with `records`, durably.
class MachineStore {
 public:
  virtual ~MachineStore() = default;
  // Errors: kInternal (unreadable), kInvalidArgument (corrupt, naming the line).
  virtual Result<std::vector<MachineRecord>> Load() = 0;
  // Errors: kInternal (the disk).
  virtual Status Save(const std::vector<MachineRecord>& records) = 0;
};
// A store in memory (tests, the simulation): nothing survives the process.
std::unique_ptr<MachineStore> NewMemoryMachineStore();

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

struct MachineLimits {
  int max_machine_bits = 16;       // machineBit 1 to this
  std::size_t max_records = 4096;  // machine ids held or remembered, all namespaces together
  std::int64_t max_guard_ms = 30LL * 24 * 3600 * 1000;  // safeGuardDuration at most (30 days)
};

class MachineRegistry {
 public:
  // Loads the store's records. Errors: the store's.
  static Result<std::unique_ptr<MachineRegistry>> Open(MachineStore& store, Clock& clock,
                                                       MachineLimits limits = {});

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

  std::vector<MachineRecord> Records() const;

 private:
  MachineRegistry(MachineStore& store, Clock& clock, MachineLimits limits,
                  std::vector<MachineRecord> records)
      : store_(store), clock_(clock), limits_(limits), records_(std::move(records)) {}
  // Stores `next` and makes it current. REQUIRES: mu_ held.
  Status Commit(std::vector<MachineRecord> next);
  // Raises the hwm of the id `instance` holds in `ns` to now and stores it, with the holder's
  // guard duration when `guard_ms` > 0. `found`: whether it holds one. REQUIRES: mu_.
  Status Touch(std::string_view ns, std::string_view instance, std::int64_t guard_ms, bool& found);

  MachineStore& store_;
  Clock& clock_;
  const MachineLimits limits_;
  mutable std::mutex mu_;
  std::vector<MachineRecord> records_;  // guarded by mu_
};

}  // namespace sekka

#endif  // SEKKA_MACHINES_H_
