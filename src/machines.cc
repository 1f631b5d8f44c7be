// MachineRegistry: machine ids for self-generating clients (the CosId proxy), with a
// high-water mark per id. See include/sekka/machines.h.

#include "sekka/machines.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "sekka/coordinator.h"

namespace sekka {
namespace {

constexpr std::string_view kHeader =
    "# sekka machine ids v2: ns, id, instance, stable, last_ms, lost_by, guard_ms";
// Files written before holdings kept their own guard.
constexpr std::string_view kHeaderV1 =
    "# sekka machine ids v1: ns, id, instance, stable, last_ms, lost_by";

bool ParseInt(std::string_view text, std::int64_t& out) {
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size();
}

// The one expiry rule: a holding lapses when its holder, not stable, has not guarded it for its
// own guard duration. Whoever asks, with whatever guard, cannot shorten it. A holding a peer's
// store keeps without a guard duration (guard_ms 0: CosId's own distributors) is judged by the
// asker's, `asker_guard_ms`, as the peer judges it.
bool Lapsed(const MachineRecord& r, std::int64_t now, std::int64_t asker_guard_ms) {
  const std::int64_t guard = r.guard_ms > 0 ? r.guard_ms : asker_guard_ms;
  return !r.instance.empty() && !r.stable && r.last_ms <= now - guard;
}

Status ValidateNamespace(std::string_view ns) {
  auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
  };
  if (ns.empty() || ns.size() > 128 || !std::all_of(ns.begin(), ns.end(), allowed)) {
    return InvalidArgument(fmt::format(
        "namespace \"{}\" is not valid: allowed 1 to 128 characters of A-Z a-z 0-9 _ . : -",
        ns.substr(0, 40)));
  }
  return Status::Ok();
}

Status ValidateInstance(std::string_view instance) {
  auto printable = [](char c) { return c >= 0x20 && c <= 0x7e; };
  if (instance.empty() || instance.size() > 256 ||
      !std::all_of(instance.begin(), instance.end(), printable)) {
    return InvalidArgument("instanceId is not valid: allowed 1 to 256 printable ASCII characters");
  }
  return Status::Ok();
}

Status ValidateGuard(std::int64_t guard_ms, const MachineLimits& limits) {
  if (guard_ms < 1 || guard_ms > limits.max_guard_ms) {
    return InvalidArgument(
        fmt::format("safeGuardDuration of {} ms is not valid: allowed 1 ms to {} ms", guard_ms,
                    limits.max_guard_ms));
  }
  return Status::Ok();
}

class MemoryMachineStore final : public MachineStore {
 public:
  Result<MachineSnapshot> Load(std::string_view ns) override {
    std::lock_guard lock(mu_);
    return MachineSnapshot{RecordsOf(records_, ns), std::to_string(version_)};
  }
  Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                    const std::string& version) override {
    std::lock_guard lock(mu_);
    if (version != std::to_string(version_)) return false;
    records_ = WithRecordsOf(std::move(records_), ns, records);
    ++version_;
    return true;
  }

 private:
  std::mutex mu_;
  std::vector<MachineRecord> records_;  // guarded by mu_
  std::int64_t version_ = 0;            // guarded by mu_
};

// One document per namespace, in FormatMachineRecords' text.
class CoordinatorMachineStore final : public MachineStore {
 public:
  explicit CoordinatorMachineStore(std::unique_ptr<Coordinator> coordinator)
      : coordinator_(std::move(coordinator)) {}

  Result<MachineSnapshot> Load(std::string_view ns) override {
    SEKKA_ASSIGN_OR_RETURN(auto d, coordinator_->ReadShared(Name(ns)));
    if (d.version == 0) return MachineSnapshot{{}, "0"};
    Result<std::vector<MachineRecord>> records = ParseMachineRecords(d.data);
    auto bad = [&](std::string_view why) {
      return InvalidArgument(
          fmt::format("{} document {}: {}", coordinator_->Where(), Name(ns), why));
    };
    if (!records.ok()) return bad(records.error().message);
    for (const MachineRecord& r : *records) {
      if (r.ns != ns) return bad(fmt::format("it lists namespace \"{}\"", r.ns.substr(0, 40)));
    }
    return MachineSnapshot{std::move(records).value(), std::to_string(d.version)};
  }

  Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                    const std::string& version) override {
    std::int64_t at = 0;
    if (!ParseInt(version, at)) return InvalidArgument("not a version of this store");
    return coordinator_->WriteShared(Name(ns), FormatMachineRecords(records), at);
  }

 private:
  static std::string Name(std::string_view ns) { return fmt::format("machines.{}", ns); }

  const std::unique_ptr<Coordinator> coordinator_;
};

}  // namespace

std::unique_ptr<MachineStore> NewMemoryMachineStore() {
  return std::make_unique<MemoryMachineStore>();
}

std::unique_ptr<MachineStore> NewCoordinatorMachineStore(std::unique_ptr<Coordinator> coordinator) {
  return std::make_unique<CoordinatorMachineStore>(std::move(coordinator));
}

std::vector<MachineRecord> RecordsOf(const std::vector<MachineRecord>& all, std::string_view ns) {
  std::vector<MachineRecord> out;
  for (const MachineRecord& r : all) {
    if (r.ns == ns) out.push_back(r);
  }
  return out;
}

std::vector<MachineRecord> WithRecordsOf(std::vector<MachineRecord> all, std::string_view ns,
                                         const std::vector<MachineRecord>& records) {
  std::erase_if(all, [&](const MachineRecord& r) { return r.ns == ns; });
  all.insert(all.end(), records.begin(), records.end());
  return all;
}

std::string FormatMachineRecords(const std::vector<MachineRecord>& records) {
  std::string out(kHeader);
  out += '\n';
  for (const MachineRecord& r : records) {
    out += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\n", r.ns, r.machine_id, r.instance,
                       r.stable ? 1 : 0, r.last_ms, r.lost_by, r.guard_ms);
  }
  return out;
}

Result<std::vector<MachineRecord>> ParseMachineRecords(std::string_view text) {
  std::vector<MachineRecord> out;
  std::set<std::pair<std::string, std::int64_t>> seen;
  std::size_t line_no = 0;
  bool v1 = false;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {
      return InvalidArgument(fmt::format("line {} does not end (a torn write?)", line_no + 1));
    }
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++line_no;
    if (line_no == 1) {
      v1 = line == kHeaderV1;
      if (line != kHeader && !v1) return InvalidArgument("the first line is not sekka's header");
      continue;
    }
    std::vector<std::string_view> f;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
      if (i == line.size() || line[i] == '\t') {
        f.push_back(line.substr(start, i - start));
        start = i + 1;
      }
    }
    auto bad = [&](std::string_view what) {
      return InvalidArgument(fmt::format("line {}: {}", line_no, what));
    };
    if (f.size() != (v1 ? 6u : 7u))
      return bad(v1 ? "not 6 tab-separated fields" : "not 7 tab-separated fields");
    MachineRecord r;
    r.ns = std::string(f[0]);
    r.instance = std::string(f[2]);
    r.lost_by = std::string(f[5]);
    std::int64_t stable = 0;
    if (!ValidateNamespace(r.ns).ok()) return bad("a bad namespace");
    if (!ParseInt(f[1], r.machine_id) || r.machine_id < 0 || r.machine_id >= (1 << 30)) {
      return bad("a bad machine id");
    }
    if (!ParseInt(f[3], stable) || (stable != 0 && stable != 1)) return bad("a bad stable flag");
    r.stable = stable == 1;
    if (!ParseInt(f[4], r.last_ms) || r.last_ms < 0) return bad("a bad last_ms");
    if ((!r.instance.empty() && !ValidateInstance(r.instance).ok()) ||
        (!r.lost_by.empty() && !ValidateInstance(r.lost_by).ok())) {
      return bad("a bad instance");
    }
    r.guard_ms = MachineLimits{}.max_guard_ms;
    if (!v1 && (!ParseInt(f[6], r.guard_ms) || r.guard_ms < 0)) return bad("a bad guard_ms");
    if (!seen.emplace(r.ns, r.machine_id).second) return bad("a machine id listed twice");
    out.push_back(std::move(r));
  }
  if (line_no == 0) return InvalidArgument("it is empty");
  return out;
}

Status ChangeMachines(MachineStore& store, std::string_view ns, const MachineChange& change) {
  constexpr int kAttempts = 16;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (attempt > 0) {  // another server saved in between: apart, so that each gets its turn
      static thread_local std::mt19937 random{std::random_device{}()};
      const int most_ms = std::min(50, 1 << std::min(attempt, 6));
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % (most_ms + 1)));
    }
    Result<MachineSnapshot> loaded = store.Load(ns);
    if (!loaded.ok()) return Unavailable("machine ids cannot be read: " + loaded.error().message);
    SEKKA_ASSIGN_OR_RETURN(auto save, change(loaded->records));
    if (!save) return Status::Ok();
    Result<bool> saved = store.Save(ns, loaded->records, loaded->version);
    if (!saved.ok()) {
      if (saved.error().code == ErrorCode::kExhausted) return std::move(saved).error();
      return Unavailable("machine ids cannot be stored: " + saved.error().message);
    }
    if (*saved) return Status::Ok();
  }
  return Unavailable(fmt::format(
      "machine ids of namespace \"{}\" were changed by other servers {} times in a row: try again",
      ns, kAttempts));
}

Status MachineRegistry::Update(std::string_view ns, const Change& change) {
  std::lock_guard lock(mu_);
  return ChangeMachines(store_, ns, [&](std::vector<MachineRecord>& records) -> Result<bool> {
    SEKKA_ASSIGN_OR_RETURN(auto outcome, change(records, clock_.NowMillis()));
    return outcome == Outcome::kSave;
  });
}

namespace {

// A Distribute request: who asks for a machine id of which namespace, and how.
struct MachineRequest {
  std::string_view ns;
  int machine_bits = 0;
  std::string_view instance;
  bool stable = false;
  std::int64_t guard_ms = 0;

  // The ids machine_bits holds.
  std::int64_t count() const { return std::int64_t{1} << machine_bits; }
  // Whether `r` is an id of the namespace that machine_bits can hold.
  bool Fits(const MachineRecord& r) const { return r.ns == ns && r.machine_id < count(); }
};

// Distribute's step 1: the id the instance holds already, its holding renewed; nullopt when it
// holds none that fits. Gives back (in `next`) a lapsed id it holds that does not fit.
Result<std::optional<MachineGrant>> RenewHeldId(std::vector<MachineRecord>& next,
                                                const MachineRequest& q, std::int64_t now) {
  for (MachineRecord& r : next) {
    if (r.ns == q.ns && r.instance == q.instance && !q.Fits(r)) {
      if (!Lapsed(r, now, q.guard_ms)) {
        return InvalidArgument(fmt::format(
            "instance \"{}\" holds machine id {} of namespace \"{}\", which machineBit {} "
            "cannot hold: ask with more bits, or revert it and ask again once its "
            "safeGuardDuration has passed",
            q.instance.substr(0, 64), r.machine_id, q.ns, q.machine_bits));
      }
      r.instance.clear();
      r.lost_by.clear();
      r.stable = false;
      r.last_ms = std::max(r.last_ms, now);
    }
    if (q.Fits(r) && r.instance == q.instance) {
      const MachineGrant grant{r.machine_id, r.last_ms};
      // Asked in the holder's name by anyone: a request never weakens the holding (a shorter
      // guard or stable dropped would let the id go while its holder still issues).
      r.stable = r.stable || q.stable;
      r.last_ms = std::max(r.last_ms, now);
      r.guard_ms = std::max(r.guard_ms, q.guard_ms);
      return std::optional<MachineGrant>(grant);
    }
  }
  return std::optional<MachineGrant>();
}

// Distribute's step 2: the lowest id given back, or (for a non-stable instance) lapsed, now
// held by the instance (in `next`); nullopt when there is none.
std::optional<MachineGrant> ReuseFreeId(std::vector<MachineRecord>& next, const MachineRequest& q,
                                        std::int64_t now) {
  MachineRecord* reuse = nullptr;
  for (MachineRecord& r : next) {
    const bool free = r.instance.empty();
    const bool expired = !q.stable && Lapsed(r, now, q.guard_ms);
    if (q.Fits(r) && (free || expired) && (reuse == nullptr || r.machine_id < reuse->machine_id)) {
      reuse = &r;
    }
  }
  if (reuse == nullptr) return std::nullopt;
  const bool expired = !reuse->instance.empty();
  const std::int64_t old_guard_ms = reuse->guard_ms > 0 ? reuse->guard_ms : q.guard_ms;
  const MachineGrant grant{reuse->machine_id,
                           expired ? reuse->last_ms + old_guard_ms : reuse->last_ms};
  reuse->lost_by = expired ? reuse->instance : std::string();
  reuse->instance = std::string(q.instance);
  reuse->stable = q.stable;
  reuse->last_ms = std::max(reuse->last_ms, now);
  reuse->guard_ms = q.guard_ms;
  return grant;
}

// Distribute's step 3: the lowest id never handed out, added to `next` for the instance.
// Errors: kExhausted (no such id, or `next` holds `max_records` already).
Result<MachineGrant> AddNewId(std::vector<MachineRecord>& next, const MachineRequest& q,
                              std::int64_t now, std::size_t max_records) {
  std::set<std::int64_t> used;
  for (const MachineRecord& r : next) {
    if (q.Fits(r)) used.insert(r.machine_id);
  }
  std::int64_t id = 0;
  while (id < q.count() && used.count(id) > 0) ++id;
  if (id == q.count()) {
    return Exhausted(
        fmt::format("no free machine id in namespace \"{}\": all {} ids of machineBit {} are held",
                    q.ns, q.count(), q.machine_bits));
  }
  if (next.size() >= max_records) {
    return Exhausted(
        fmt::format("no free machine id in namespace \"{}\": sekka keeps {} machine ids of "
                    "a namespace at most",
                    q.ns, max_records));
  }
  next.push_back({std::string(q.ns), id, std::string(q.instance), q.stable, now, "", q.guard_ms});
  return MachineGrant{id, now};
}

}  // namespace

Result<MachineGrant> MachineRegistry::Distribute(std::string_view ns, int machine_bits,
                                                 std::string_view instance, bool stable,
                                                 std::int64_t guard_ms) {
  SEKKA_RETURN_IF_ERROR(ValidateNamespace(ns));
  SEKKA_RETURN_IF_ERROR(ValidateInstance(instance));
  SEKKA_RETURN_IF_ERROR(ValidateGuard(guard_ms, limits_));
  SEKKA_RETURN_IF_ERROR(store_.CheckNames(ns, instance));
  if (machine_bits < 1 || machine_bits > limits_.max_machine_bits) {
    return InvalidArgument(fmt::format("machineBit {} is not valid: allowed 1 to {}", machine_bits,
                                       limits_.max_machine_bits));
  }
  const MachineRequest q{ns, machine_bits, instance, stable, guard_ms};
  MachineGrant grant;
  Status s = Update(ns, [&](std::vector<MachineRecord>& next, std::int64_t now) -> Result<Outcome> {
    // 1. The id this instance holds already (asking again is idempotent). An instance holds one
    // id: one asking with fewer machine bits than its id needs is refused until that id lapses
    // (anyone may ask in its name, so asking never takes an id from a holder that guards it),
    // and then gives it back (its hwm stays).
    SEKKA_ASSIGN_OR_RETURN(std::optional<MachineGrant> held, RenewHeldId(next, q, now));
    if (held.has_value()) {
      grant = *held;
      return Outcome::kSave;
    }
    // 2. The lowest id given back, or, for a non-stable instance, one whose holder let it lapse
    // (Lapsed: judged by the holder's own guard). The new holder waits past the last time the
    // old one may have issued ids: its last guard plus its own guard duration.
    if (std::optional<MachineGrant> reused = ReuseFreeId(next, q, now); reused.has_value()) {
      grant = *reused;
      return Outcome::kSave;
    }
    // 3. The lowest id never handed out.
    SEKKA_ASSIGN_OR_RETURN(grant, AddNewId(next, q, now, limits_.max_records));
    return Outcome::kSave;
  });
  SEKKA_RETURN_IF_ERROR(s);
  return grant;
}

bool MachineRegistry::Touch(std::vector<MachineRecord>& records, std::string_view instance,
                            std::int64_t guard_ms, std::int64_t now) {
  // Every holding of the instance: it may hold two (servers that each answered alone before
  // their files were adopted), and it issues with whichever it was told last.
  bool found = false;
  for (MachineRecord& r : records) {
    if (r.instance == instance) {
      r.last_ms = std::max(r.last_ms, now);
      r.guard_ms = std::max(r.guard_ms, guard_ms);  // never shortened (see Distribute)
      found = true;
    }
  }
  return found;
}

Status MachineRegistry::Guard(std::string_view ns, std::string_view instance,
                              std::int64_t guard_ms) {
  if (Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (Status s = ValidateInstance(instance); !s.ok()) return s;
  if (Status s = ValidateGuard(guard_ms, limits_); !s.ok()) return s;
  if (Status s = store_.CheckNames(ns, instance); !s.ok()) return s;
  return Update(ns, [&](std::vector<MachineRecord>& records, std::int64_t now) -> Result<Outcome> {
    if (Touch(records, instance, guard_ms, now)) return Outcome::kSave;
    for (const MachineRecord& r : records) {
      if (r.lost_by == instance) {
        return LeaseLost(fmt::format(
            "machine id {} of namespace \"{}\" went to another instance: \"{}\" did not guard "
            "it within its safeGuardDuration",
            r.machine_id, ns, instance));
      }
    }
    return NotFound(fmt::format("instance \"{}\" holds no machine id in namespace \"{}\"",
                                instance.substr(0, 64), ns));
  });
}

Status MachineRegistry::Revert(std::string_view ns, std::string_view instance) {
  if (Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (Status s = ValidateInstance(instance); !s.ok()) return s;
  if (Status s = store_.CheckNames(ns, instance); !s.ok()) return s;
  // A last guard, not a release: CosId's API does not say who sends a revert, so the id stays
  // the holder's until its guard lapses (Distribute, step 2), and a holder that goes on
  // guarding keeps it whoever reverted (issue 24, finding 5). Holding nothing is fine.
  return Update(ns, [&](std::vector<MachineRecord>& records, std::int64_t now) -> Result<Outcome> {
    return Touch(records, instance, 0, now) ? Outcome::kSave : Outcome::kKeep;
  });
}

Result<std::vector<MachineRecord>> MachineRegistry::Records(std::string_view ns) {
  std::lock_guard lock(mu_);
  Result<MachineSnapshot> loaded = store_.Load(ns);
  if (!loaded.ok()) return Unavailable("machine ids cannot be read: " + loaded.error().message);
  return std::move(loaded->records);
}

}  // namespace sekka
