#include "backends/cosid_machines.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "backends/mysql_connection.h"
#include "backends/redis_client.h"
#include "backends/store_uri.h"
#include "sekka/secrets.h"

namespace sekka {
namespace {

// An id CosId counts as handed out that no key or row holds: no one can ask for it by name (an
// instance id is printable), and it never lapses.
constexpr std::string_view kUnknownHolder = "\t(handed out by CosId, held by no key or row)";
constexpr std::int64_t kNeverLapses = std::numeric_limits<std::int64_t>::max() / 4;

// Adds an unknown holder for each id in [0, last] that `records` lack.
void AddUnknownHolders(std::vector<MachineRecord>& records, std::string_view ns,
                       std::int64_t last) {
  std::set<std::int64_t> known;
  for (const MachineRecord& r : records) known.insert(r.machine_id);
  for (std::int64_t id = 0; id <= last && id < (1 << 16); ++id) {
    if (known.count(id) == 0) {
      records.push_back(
          {std::string(ns), id, std::string(kUnknownHolder), false, 0, "", kNeverLapses});
    }
  }
}

bool Unknown(const MachineRecord& r) { return r.instance == kUnknownHolder; }

// sekka's note of a machine id, beside CosId's keys or rows (CosId ignores it): what CosId keeps
// no field for. "<guard_ms>|<stable>|<lost_by>|<holder>"; the guard and stable flag apply while
// the holder still holds the id (a CosId instance may have taken it since).
std::string FormatNote(const MachineRecord& r) {
  return fmt::format("{}|{}|{}|{}", r.guard_ms, r.stable ? 1 : 0, r.lost_by, r.instance);
}
bool WantsNote(const MachineRecord& r) {
  return !Unknown(r) &&
         ((!r.instance.empty() && (r.guard_ms > 0 || r.stable)) || !r.lost_by.empty());
}
// Applies the note `text` to `r`. False: not a note.
bool ApplyNote(MachineRecord& r, std::string_view text) {
  std::string_view f[4];
  for (int i = 0; i < 3; ++i) {
    const std::size_t bar = text.find('|');
    if (bar == std::string_view::npos) return false;
    f[i] = text.substr(0, bar);
    text.remove_prefix(bar + 1);
  }
  f[3] = text;
  std::int64_t guard = 0;
  if (!DecimalInt64(f[0], guard) || guard < 0 || (f[1] != "0" && f[1] != "1")) return false;
  if (!r.instance.empty() && f[3] == r.instance) {
    r.guard_ms = guard;
    r.stable = f[1] == "1";
  }
  r.lost_by = std::string(f[2]);
  return true;
}

std::int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Applies the note `text` of machine id `id` to its record in `records`, if any. False: not a
// note.
bool ApplyNotes(std::vector<MachineRecord>& records, std::int64_t id, std::string_view text) {
  for (MachineRecord& r : records) {
    if (r.machine_id == id) return ApplyNote(r, text);
  }
  return true;
}

// The state of CosId's Redis keys of a namespace and sekka's notes, as text that changes
// whenever they do (each hash's entries sorted: the order HGETALL gives may change without a
// write), then the adder and the three hashes. KEYS: itc_idx, revert, adder, sekka's notes.
constexpr std::string_view kRedisState = R"(
local function state()
  local adder = redis.call('GET', KEYS[3]) or ''
  local text, hashes = adder, {}
  for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4]}) do
    local h = redis.call('HGETALL', k)
    local lines = {}
    for i = 1, #h, 2 do lines[#lines + 1] = h[i] .. '\0' .. h[i + 1] end
    table.sort(lines)
    text = text .. '\n\n' .. table.concat(lines, '\n')
    hashes[#hashes + 1] = h
  end
  return text, adder, hashes
end
)";

// Load: the state's text, the adder, itc_idx, revert and the notes.
constexpr std::string_view kRedisLoad = R"(
local text, adder, h = state()
return {text, adder, h[1], h[2], h[3]}
)";

// Save: if the state's text is still ARGV[1], the three hashes are replaced and the adder set
// (ARGV[2]); 0 when it changed. Then, for itc_idx, revert and the notes in turn: a count n and n
// pairs.
constexpr std::string_view kRedisSave = R"(
if state() ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
local at = 3
for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4]}) do
  local n = tonumber(ARGV[at])
  for i = at + 1, at + 2 * n, 2 do redis.call('HSET', k, ARGV[i], ARGV[i + 1]) end
  at = at + 1 + 2 * n
end
redis.call('SET', KEYS[3], ARGV[2])
return 1
)";

class CosIdRedisMachines final : public MachineStore {
 public:
  explicit CosIdRedisMachines(std::unique_ptr<RedisClient> redis) : redis_(std::move(redis)) {}

  Result<MachineSnapshot> Load(std::string_view ns) override {
    Result<RespReply> r = Eval(kRedisLoad, ns, {});
    if (!r.ok()) return std::move(r).error();
    if (r->kind != '*' || r->elements.size() != 5) return Broken(ns, "load", *r);
    MachineSnapshot s{{}, r->elements[0].text};
    std::int64_t adder = -1;
    if (!r->elements[1].text.empty() && !DecimalInt64(r->elements[1].text, adder)) {
      return Corrupt(ns, "adder", r->elements[1].text);
    }
    const auto& itc = r->elements[2].elements;
    for (std::size_t i = 0; i + 1 < itc.size(); i += 2) {
      const std::string& state = itc[i + 1].text;
      const std::size_t bar = state.find('|');
      MachineRecord rec{std::string(ns), 0, itc[i].text, false, 0, "", 0};
      if (bar == std::string::npos || !DecimalInt64(state.substr(0, bar), rec.machine_id) ||
          !DecimalInt64(state.substr(bar + 1), rec.last_ms) || rec.machine_id < 0) {
        return Corrupt(ns, "itc_idx", state);
      }
      s.records.push_back(std::move(rec));
    }
    const auto& rev = r->elements[3].elements;
    for (std::size_t i = 0; i + 1 < rev.size(); i += 2) {
      MachineRecord rec{std::string(ns), 0, "", false, 0, "", 0};
      if (!DecimalInt64(rev[i].text, rec.machine_id) || rec.machine_id < 0 ||
          !DecimalInt64(rev[i + 1].text, rec.last_ms)) {
        return Corrupt(ns, "revert", rev[i].text + "=" + rev[i + 1].text);
      }
      s.records.push_back(std::move(rec));
    }
    const auto& notes = r->elements[4].elements;
    for (std::size_t i = 0; i + 1 < notes.size(); i += 2) {
      std::int64_t id = -1;
      if (!DecimalInt64(notes[i].text, id)) return Corrupt(ns, "sekka", notes[i].text);
      if (!ApplyNotes(s.records, id, notes[i + 1].text)) {
        return Corrupt(ns, "sekka", notes[i + 1].text);
      }
    }
    AddUnknownHolders(s.records, ns, adder);
    return s;
  }

  Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                    const std::string& version) override {
    std::vector<std::string> held, given_back, notes;
    for (const MachineRecord& r : records) {
      if (Unknown(r)) continue;
      if (WantsNote(r)) {
        notes.push_back(std::to_string(r.machine_id));
        notes.push_back(FormatNote(r));
      }
      if (r.instance.empty()) {
        given_back.push_back(std::to_string(r.machine_id));
        given_back.push_back(std::to_string(r.last_ms));
      } else {
        held.push_back(r.instance);
        held.push_back(fmt::format("{}|{}", r.machine_id, r.last_ms));
      }
    }
    // The adder only goes up: CosId hands out the ids past it in order.
    std::int64_t adder = -1;
    for (const MachineRecord& r : records) adder = std::max(adder, r.machine_id);
    std::vector<std::string> args = {version, std::to_string(adder)};
    for (const std::vector<std::string>* pairs : {&held, &given_back, &notes}) {
      args.push_back(std::to_string(pairs->size() / 2));
      args.insert(args.end(), pairs->begin(), pairs->end());
    }
    Result<RespReply> r = Eval(kRedisSave, ns, args);
    if (!r.ok()) return std::move(r).error();
    if (r->kind != ':') return Broken(ns, "save", *r);
    return r->integer == 1;
  }

 private:
  Result<RespReply> Eval(std::string_view body, std::string_view ns,
                         const std::vector<std::string>& args) {
    const std::string prefix = fmt::format("cosid:{{{}}}:", ns);
    std::vector<std::string> call = {"EVAL",
                                     std::string(kRedisState) + std::string(body),
                                     "4",
                                     prefix + "itc_idx",
                                     prefix + "revert",
                                     prefix + "adder",
                                     prefix + "sekka"};
    call.insert(call.end(), args.begin(), args.end());
    Result<RespReply> r = redis_->Call(call, /*may_repeat=*/false);
    if (r.ok() && r->kind == '-') {
      return Unavailable(fmt::format("{}: CosId's machine keys: {}", redis_->text(), r->text));
    }
    return r;
  }

  Error Corrupt(std::string_view ns, std::string_view key, std::string_view value) const {
    return InvalidArgument(fmt::format("{}: cosid:{{{}}}:{} holds \"{}\", not CosId's format",
                                       redis_->text(), ns, key, value.substr(0, 60)));
  }
  Error Broken(std::string_view ns, std::string_view what, const RespReply& r) const {
    return Unavailable(fmt::format("{}: the {} script of CosId's keys of {} answered {}",
                                   redis_->text(), what, ns,
                                   r.kind == '-' ? r.text : "another shape"));
  }

  const std::unique_ptr<RedisClient> redis_;
};

// CosId's JDBC table, as its JdbcMachineIdDistributor keeps it, and sekka's notes beside it.
constexpr std::string_view kRowsSql =
    "SELECT name, machine_id, last_timestamp, instance_id FROM cosid_machine WHERE namespace = {0} "
    "ORDER BY name{1}; SELECT machine_id, note FROM sekka_cosid_machines WHERE namespace = {0} "
    "ORDER BY machine_id{1}";
constexpr std::string_view kNotesTable =
    "CREATE TABLE IF NOT EXISTS sekka_cosid_machines (namespace VARCHAR(100) NOT NULL, "
    "machine_id INT UNSIGNED NOT NULL, note VARCHAR(1024) NOT NULL, "
    "PRIMARY KEY (namespace, machine_id)) ENGINE=InnoDB CHARACTER SET utf8mb4";

class CosIdJdbcMachines final : public MachineStore {
 public:
  CosIdJdbcMachines(StoreUri uri, std::string text)
      : db_(std::move(uri), std::move(text), "machines.store", [](MysqlConnection& db) -> Status {
          // The table must be there, with the columns read and written.
          Result<std::vector<MysqlAnswer>> r = db.Run(
              "SELECT name, namespace, machine_id, last_timestamp, instance_id, distribute_time, "
              "revert_time FROM cosid_machine LIMIT 0");
          if (r.ok()) {
            Result<std::vector<MysqlAnswer>> made = db.Run(std::string(kNotesTable));
            return made.ok() ? Status::Ok() : Status(std::move(made).error());
          }
          if (db.error_number() != 1146 && db.error_number() != 1054) return std::move(r).error();
          return Unavailable(fmt::format(
              "machines.store {}: schema=cosid uses CosId's table cosid_machine in place, and it "
              "is {} in database {}: create it as CosId's init-cosid-mysql.sql does",
              db.text(), db.error_number() == 1146 ? "missing" : "missing a column",
              db.database()));
        }) {}

  Result<MachineSnapshot> Load(std::string_view ns) override {
    std::lock_guard lock(mu_);
    Result<std::vector<MysqlAnswer>> r =
        db_.Run(fmt::format(fmt::runtime(kRowsSql), MysqlConnection::Quote(ns), ""));
    if (!r.ok()) return std::move(r).error();
    return FromRows(ns, r->at(0).rows, r->at(1).rows);
  }

  // One transaction. sekka's notes of the namespace are locked (FOR UPDATE: another sekka
  // server's save waits), and CosId's rows and the notes must still be as loaded; then each
  // change is conditional on the row as loaded (an UPDATE that must change one row, an INSERT
  // whose name CosId may have taken: a duplicate key), so that a CosId statement in between
  // makes it roll back and the registry read again. No gap of CosId's table is locked: CosId's
  // own inserts never wait for sekka (a lock that deadlocked them would fail CosId's call).
  Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                    const std::string& version) override {
    std::lock_guard lock(mu_);
    const std::string q = MysqlConnection::Quote(ns);
    Result<std::vector<MysqlAnswer>> read =
        db_.Run("START TRANSACTION; " +
                fmt::format("SELECT machine_id FROM sekka_cosid_machines WHERE "
                            "namespace = {} FOR UPDATE; ",
                            q) +
                fmt::format(fmt::runtime(kRowsSql), q, ""));
    if (!read.ok()) return Conflict(std::move(read).error());
    Result<MachineSnapshot> now = FromRows(ns, read->at(2).rows, read->at(3).rows);
    if (!now.ok() || now->version != version) {
      (void)db_.Run("ROLLBACK");
      if (!now.ok()) return std::move(now).error();
      return false;
    }
    std::map<std::int64_t, const std::vector<std::string>*> rows;
    for (const auto& row : read->at(2).rows) rows[std::stoll(row[1])] = &row;
    const int width = PadWidth(ns, read->at(2).rows);
    const std::int64_t stamp = NowMillis();
    std::string sql;
    std::vector<bool> must_change;  // per statement: an UPDATE that must change its row
    for (const MachineRecord& r : records) {
      if (Unknown(r)) continue;
      auto it = rows.find(r.machine_id);
      const std::string instance = MysqlConnection::Quote(r.instance);
      if (it == rows.end()) {
        sql += fmt::format(
            "INSERT INTO cosid_machine (name, namespace, machine_id, last_timestamp, instance_id, "
            "distribute_time, revert_time) VALUES ({}, {}, {}, {}, {}, {}, 0); ",
            MysqlConnection::Quote(fmt::format("{}.{:0{}}", ns, r.machine_id, width)), q,
            r.machine_id, r.last_ms, instance, stamp);
        must_change.push_back(false);
        continue;
      }
      const std::vector<std::string>& row = *it->second;
      if (row[3] == r.instance && row[2] == std::to_string(r.last_ms)) continue;
      const char* when = r.instance.empty() ? "revert_time" : "distribute_time";
      sql += fmt::format(
          "UPDATE cosid_machine SET instance_id = {}, last_timestamp = {}{} WHERE name = {} AND "
          "instance_id = {} AND last_timestamp = {}; ",
          instance, r.last_ms, row[3] == r.instance ? "" : fmt::format(", {} = {}", when, stamp),
          MysqlConnection::Quote(row[0]), MysqlConnection::Quote(row[3]), row[2]);
      must_change.push_back(true);
    }
    sql += fmt::format("DELETE FROM sekka_cosid_machines WHERE namespace = {}", q);
    for (const MachineRecord& r : records) {
      if (!WantsNote(r)) continue;
      sql += fmt::format("; INSERT INTO sekka_cosid_machines VALUES ({}, {}, {})", q, r.machine_id,
                         MysqlConnection::Quote(FormatNote(r)));
    }
    Result<std::vector<MysqlAnswer>> wrote = db_.Run(sql);
    if (!wrote.ok()) return Conflict(std::move(wrote).error());
    for (std::size_t i = 0; i < must_change.size() && i < wrote->size(); ++i) {
      if (must_change[i] && (*wrote)[i].affected != 1) {  // its row changed since the load
        (void)db_.Run("ROLLBACK");
        return false;
      }
    }
    Result<std::vector<MysqlAnswer>> done = db_.Run("COMMIT");
    if (!done.ok()) return std::move(done).error();
    return true;
  }

 private:
  // The records of the rows (name, machine_id, last_timestamp, instance_id) with the notes
  // (machine_id, note), and both as the version: any change of a row is a change of it.
  Result<MachineSnapshot> FromRows(std::string_view ns,
                                   const std::vector<std::vector<std::string>>& rows,
                                   const std::vector<std::vector<std::string>>& notes) const {
    MachineSnapshot s;
    std::int64_t last = -1;
    for (const auto& row : rows) {
      MachineRecord r{std::string(ns), 0, row[3], false, 0, "", 0};
      if (row.size() != 4 || !DecimalInt64(row[1], r.machine_id) ||
          !DecimalInt64(row[2], r.last_ms) || r.machine_id < 0) {
        return InvalidArgument(fmt::format("machines.store {}: cosid_machine row {} is not CosId's",
                                           db_.text(), row.empty() ? "" : row[0].substr(0, 60)));
      }
      last = std::max(last, r.machine_id);
      s.records.push_back(std::move(r));
      for (const std::string& field : row) {
        s.version += field;
        s.version += '\0';
      }
      s.version += '\n';
    }
    for (const auto& note : notes) {
      std::int64_t id = -1;
      if (note.size() != 2 || !DecimalInt64(note[0], id) || !ApplyNotes(s.records, id, note[1])) {
        return InvalidArgument(
            fmt::format("machines.store {}: sekka_cosid_machines holds a note that is not sekka's",
                        db_.text()));
      }
      s.version += note[0] + '\0' + note[1] + '\n';
    }
    AddUnknownHolders(s.records, ns, last);
    return s;
  }

  // A failed statement of a save (its connection dropped: rolled back): a row CosId inserted in
  // between (a duplicate name), or a lock CosId held (a deadlock or a wait too long) is a change
  // since the load; anything else is the error.
  Result<bool> Conflict(Error e) const {
    const unsigned code = db_.error_number();
    if (code == 1062 || code == 1213 || code == 1205) return false;
    return e;
  }

  // The zero-padding of machine ids in names: as the namespace's rows have it (CosId wrote 4
  // digits before 2.x, 8 since), 8 when it has none.
  static int PadWidth(std::string_view ns, const std::vector<std::vector<std::string>>& rows) {
    for (const auto& row : rows) {
      if (row[0].size() > ns.size() + 1) return static_cast<int>(row[0].size() - ns.size() - 1);
    }
    return 8;
  }

  std::mutex mu_;
  MysqlConnection db_;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<MachineStore>> OpenCosIdMachineStore(std::string_view uri) {
  static constexpr std::array<std::string_view, 7> kAll = {
      "schema", "socket", "durability", "eviction", "tls_ca_file", "tls_cert_file", "tls_key_file"};
  Result<StoreUri> parsed = ParseStoreUri(uri, "machines.store", kAll);
  if (!parsed.ok()) return std::move(parsed).error();
  const auto schema = parsed->params.find("schema");
  if (schema == parsed->params.end() || schema->second != "cosid") {
    return InvalidArgument(
        "machines.store names CosId's own distributor: add ?schema=cosid (the only schema)");
  }
  const std::string& scheme = parsed->scheme;
  const bool redis = scheme == "redis" || scheme == "rediss";
  if (!redis && scheme != "mysql" && scheme != "mariadb") {
    return InvalidArgument("machines.store begins redis://, rediss://, mysql:// or mariadb://");
  }
  for (const auto& [key, value] : parsed->params) {
    const bool allowed = key == "schema" || (redis ? key != "socket" : key == "socket");
    if (!allowed) {
      return InvalidArgument(fmt::format("machines.store parameter {} is not one of {}'s", key,
                                         redis ? "Redis" : "MySQL"));
    }
  }
  std::string text = RedactSecrets(uri);
  if (redis) {
    Result<std::unique_ptr<RedisClient>> client =
        RedisClient::Open(std::move(parsed).value(), std::move(text), "machines.store");
    if (!client.ok()) return std::move(client).error();
    return std::unique_ptr<MachineStore>(
        std::make_unique<CosIdRedisMachines>(std::move(client).value()));
  }
  if (parsed->path.empty() || parsed->path.find('/') != std::string::npos) {
    return InvalidArgument(
        "machines.store names no database: allowed mysql://USER@HOST:PORT/DATABASE?schema=cosid");
  }
  return std::unique_ptr<MachineStore>(
      std::make_unique<CosIdJdbcMachines>(std::move(parsed).value(), std::move(text)));
}

}  // namespace sekka
