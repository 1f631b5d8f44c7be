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
// no field for. "<guard_ms>|<stable>|<length of lost_by>|<lost_by><holder>" (an instance id may
// hold '|'); the guard and stable flag apply while the holder still holds the id (a CosId
// instance may have taken it since).
std::string FormatNote(const MachineRecord& r) {
  return fmt::format("{}|{}|{}|{}{}", r.guard_ms, r.stable ? 1 : 0, r.lost_by.size(), r.lost_by,
                     r.instance);
}
bool WantsNote(const MachineRecord& r) {
  return !Unknown(r) &&
         ((!r.instance.empty() && (r.guard_ms > 0 || r.stable)) || !r.lost_by.empty());
}
// Applies the note `text` to `r`. False: not a note.
bool ApplyNote(MachineRecord& r, std::string_view text) {
  std::string_view f[3];
  for (std::string_view& field : f) {
    const std::size_t bar = text.find('|');
    if (bar == std::string_view::npos) return false;
    field = text.substr(0, bar);
    text.remove_prefix(bar + 1);
  }
  std::int64_t guard = 0;
  std::int64_t lost_size = 0;
  if (!DecimalInt64(f[0], guard) || guard < 0 || (f[1] != "0" && f[1] != "1") ||
      !DecimalInt64(f[2], lost_size) || lost_size < 0 ||
      static_cast<std::size_t>(lost_size) > text.size()) {
    return false;
  }
  const std::string_view holder = text.substr(static_cast<std::size_t>(lost_size));
  if (!r.instance.empty() && holder == r.instance) {
    r.guard_ms = guard;
    r.stable = f[1] == "1";
  }
  r.lost_by = std::string(text.substr(0, static_cast<std::size_t>(lost_size)));
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

// Save: if the state's text is still ARGV[1], the three hashes are replaced and the adder raised
// to ARGV[2] (never lowered); 0 when it changed. Then, for itc_idx, revert and the notes in turn: a
// count n and n pairs.
constexpr std::string_view kRedisSave = R"(
if state() ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
local at = 3
for _, k in ipairs({KEYS[1], KEYS[2], KEYS[4]}) do
  local n = tonumber(ARGV[at])
  for i = at + 1, at + 2 * n, 2 do redis.call('HSET', k, ARGV[i], ARGV[i + 1]) end
  at = at + 1 + 2 * n
end
if tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[3]) or '-1') then
  redis.call('SET', KEYS[3], ARGV[2])
end
return 1
)";

class CosIdRedisMachines final : public MachineStore {
 public:
  explicit CosIdRedisMachines(std::unique_ptr<RedisClient> redis) : redis_(std::move(redis)) {}

  Result<MachineSnapshot> Load(std::string_view ns) override {
    SEKKA_ASSIGN_OR_RETURN(auto r, Eval(kRedisLoad, ns, {}));
    if (r.kind != '*' || r.elements.size() != 5) return Broken(ns, "load", r);
    MachineSnapshot s{{}, r.elements[0].text};
    std::int64_t adder = -1;
    if (!r.elements[1].text.empty() && !DecimalInt64(r.elements[1].text, adder)) {
      return Corrupt(ns, "adder", r.elements[1].text);
    }
    const auto& itc = r.elements[2].elements;
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
    const auto& rev = r.elements[3].elements;
    for (std::size_t i = 0; i + 1 < rev.size(); i += 2) {
      MachineRecord rec{std::string(ns), 0, "", false, 0, "", 0};
      if (!DecimalInt64(rev[i].text, rec.machine_id) || rec.machine_id < 0 ||
          !DecimalInt64(rev[i + 1].text, rec.last_ms)) {
        return Corrupt(ns, "revert", rev[i].text + "=" + rev[i + 1].text);
      }
      s.records.push_back(std::move(rec));
    }
    std::set<std::int64_t> ids;
    for (const MachineRecord& rec : s.records) {
      if (!ids.insert(rec.machine_id).second) {
        return Internal(fmt::format(
            "{}: CosId's keys of {} hold machine id {} twice (itc_idx and revert): keep one",
            redis_->text(), ns, rec.machine_id));
      }
    }
    const auto& notes = r.elements[4].elements;
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
    SEKKA_ASSIGN_OR_RETURN(auto r, Eval(kRedisSave, ns, args));
    if (r.kind != ':') return Broken(ns, "save", r);
    return r.integer == 1;
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
    return Internal(fmt::format("{}: cosid:{{{}}}:{} holds \"{}\", not CosId's format",
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
    "ORDER BY name; SELECT machine_id, note FROM sekka_cosid_machines WHERE namespace = {0} "
    "ORDER BY machine_id";
constexpr std::string_view kNotesTable =
    "CREATE TABLE sekka_cosid_machines (namespace VARCHAR(100) NOT NULL, "
    "machine_id INT UNSIGNED NOT NULL, note VARCHAR(1024) NOT NULL, "
    "PRIMARY KEY (namespace, machine_id)) ENGINE=InnoDB CHARACTER SET utf8mb4";
// cosid_machine's name, namespace and instance_id are VARCHAR(100).
constexpr std::size_t kColumnChars = 100;

// Fails the statement batch (ERROR 1242, "Subquery returns more than 1 row") unless `condition`
// holds: the batch stops there, its connection is dropped and the transaction rolls back.
std::string Require(std::string_view condition) {
  return fmt::format("SELECT (SELECT 1 UNION ALL SELECT 1 FROM DUAL WHERE NOT ({})); ", condition);
}

class CosIdJdbcMachines final : public MachineStore {
 public:
  CosIdJdbcMachines(StoreUri uri, std::string text, int pad)
      : pad_(pad), db_(std::move(uri), std::move(text), "machines.store", CheckTables) {}

  Status CheckNames(std::string_view ns, std::string_view instance) override {
    // A name is "<ns>.<id padded to 4 or 8 digits>"; an id of 16 bits has 5 at most.
    if (ns.size() + 9 > kColumnChars || instance.size() > kColumnChars) {
      return InvalidArgument(fmt::format(
          "machines.store: CosId's table cosid_machine keeps instance ids of {} characters and "
          "namespaces of {} at most",
          kColumnChars, kColumnChars - 9));
    }
    return Status::Ok();
  }

  Result<MachineSnapshot> Load(std::string_view ns) override {
    std::lock_guard lock(mu_);
    SEKKA_ASSIGN_OR_RETURN(
        auto r, db_.Run(fmt::format(fmt::runtime(kRowsSql), MysqlConnection::Quote(ns))));
    return FromRows(ns, r.at(0).rows, r.at(1).rows);
  }

  // Reads the rows again (no lock: a change since the load is a conflict), then writes in one
  // batch that ends in its COMMIT, so that no lock of sekka's outlives the batch (a sekka server
  // paused mid-save makes no CosId call wait): sekka's notes of the namespace locked first
  // (another sekka server's batch waits) and unchanged, each CosId row changed only as read (an
  // UPDATE on the row's old values that must change it), each new row's name still free (an
  // INSERT: a duplicate key when a CosId instance took it). A CosId statement in between makes
  // the batch fail and roll back, and the registry read again.
  Result<bool> Save(std::string_view ns, const std::vector<MachineRecord>& records,
                    const std::string& version) override {
    std::lock_guard lock(mu_);
    const std::string q = MysqlConnection::Quote(ns);
    SEKKA_ASSIGN_OR_RETURN(auto read, db_.Run(fmt::format(fmt::runtime(kRowsSql), q)));
    const auto& rows = read.at(0).rows;
    const auto& notes = read.at(1).rows;
    SEKKA_ASSIGN_OR_RETURN(auto now, FromRows(ns, rows, notes));
    if (now.version != version) return false;
    std::string sql = fmt::format(
        "START TRANSACTION; SELECT machine_id FROM sekka_cosid_machines WHERE namespace = {} "
        "FOR UPDATE; ",
        q);
    sql += Require(fmt::format(
        "BINARY (SELECT COALESCE(GROUP_CONCAT(machine_id, '=', note ORDER BY machine_id "
        "SEPARATOR '\\n'), '') FROM sekka_cosid_machines WHERE namespace = {}) = BINARY {}",
        q, MysqlConnection::Quote(NotesText(notes))));
    sql += Writes(ns, records, rows);
    sql += fmt::format("DELETE FROM sekka_cosid_machines WHERE namespace = {}; ", q);
    for (const MachineRecord& r : records) {
      if (!WantsNote(r)) continue;
      sql += fmt::format("INSERT INTO sekka_cosid_machines VALUES ({}, {}, {}); ", q, r.machine_id,
                         MysqlConnection::Quote(FormatNote(r)));
    }
    Result<std::vector<MysqlAnswer>> wrote = db_.Run(sql + "COMMIT");
    if (wrote.ok()) return true;
    // Changed since the read (a failed requirement, a duplicate name), or a lock CosId held (a
    // deadlock, a wait too long): rolled back, read again. Anything else is the error.
    const unsigned code = db_.error_number();
    // (1020: MariaDB's innodb_snapshot_isolation says a row changed since the read view.)
    if (code == 1242 || code == 1062 || code == 1213 || code == 1205 || code == 1020) return false;
    return std::move(wrote).error();
  }

 private:
  // The table must be there, with the columns read and written; sekka's notes table is made
  // when missing (CREATE only then: a user may have it made once and the privilege revoked).
  static Status CheckTables(MysqlConnection& db) {
    // The notes are compared whole (Save): MySQL's GROUP_CONCAT keeps 1,024 bytes unless told.
    // Their lock serializes sekka's saves through REPEATABLE READ's gap locks, whatever the
    // server's default isolation (READ COMMITTED takes none).
    SEKKA_RETURN_IF_ERROR(db.Run(
        "SET SESSION group_concat_max_len = 16777216; SET SESSION TRANSACTION ISOLATION LEVEL "
        "REPEATABLE READ"));
    Result<std::vector<MysqlAnswer>> r = db.Run(
        "SELECT name, namespace, machine_id, last_timestamp, instance_id, distribute_time, "
        "revert_time FROM cosid_machine LIMIT 0");
    if (!r.ok()) {
      const unsigned code = db.error_number();
      if (code != 1146 && code != 1054) return std::move(r).error();  // no table, no column
      return Unavailable(fmt::format(
          "machines.store {}: schema=cosid uses CosId's table cosid_machine in place, and it is "
          "{} in database {}: create it as CosId's init-cosid-mysql.sql does",
          db.text(), code == 1146 ? "missing" : "missing a column", db.database()));
    }
    Result<std::vector<MysqlAnswer>> notes =
        db.Run("SELECT namespace, machine_id, note FROM sekka_cosid_machines LIMIT 0");
    if (notes.ok()) return Status::Ok();
    if (db.error_number() != 1146) return std::move(notes).error();
    return db.RunAllowing(std::string(kNotesTable), {1050});  // ER_TABLE_EXISTS_ERROR
  }

  // The statements that turn `rows` into `records`, each conditional on the row as read.
  std::string Writes(std::string_view ns, const std::vector<MachineRecord>& records,
                     const std::vector<std::vector<std::string>>& rows) const {
    std::map<std::int64_t, const std::vector<std::string>*> by_id;
    for (const auto& row : rows) by_id[std::stoll(row[1])] = &row;
    const int width = pad_;
    const std::int64_t stamp = NowMillis();
    const std::string q = MysqlConnection::Quote(ns);
    std::string sql;
    for (const MachineRecord& r : records) {
      if (Unknown(r)) continue;
      const std::string instance = MysqlConnection::Quote(r.instance);
      auto it = by_id.find(r.machine_id);
      if (it == by_id.end()) {
        sql += fmt::format(
            "INSERT INTO cosid_machine (name, namespace, machine_id, last_timestamp, instance_id, "
            "distribute_time, revert_time) VALUES ({}, {}, {}, {}, {}, {}, 0); ",
            MysqlConnection::Quote(fmt::format("{}.{:0{}}", ns, r.machine_id, width)), q,
            r.machine_id, r.last_ms, instance, stamp);
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
      sql += Require("ROW_COUNT() = 1");
    }
    return sql;
  }

  // The notes as the batch's GROUP_CONCAT spells them.
  static std::string NotesText(const std::vector<std::vector<std::string>>& notes) {
    std::string text;
    for (const auto& note : notes) {
      if (!text.empty()) text += '\n';
      text += note[0] + "=" + note[1];
    }
    return text;
  }

  // The records of the rows (name, machine_id, last_timestamp, instance_id) with the notes
  // (machine_id, note), and both as the version: any change of a row is a change of it.
  Result<MachineSnapshot> FromRows(std::string_view ns,
                                   const std::vector<std::vector<std::string>>& rows,
                                   const std::vector<std::vector<std::string>>& notes) const {
    MachineSnapshot s;
    std::int64_t last = -1;
    std::set<std::int64_t> ids;
    for (const auto& row : rows) {
      MachineRecord r{std::string(ns), 0, "", false, 0, "", 0};
      if (row.size() != 4 || !DecimalInt64(row[1], r.machine_id) ||
          !DecimalInt64(row[2], r.last_ms) || r.machine_id < 0) {
        return Internal(fmt::format("machines.store {}: a cosid_machine row of {} is not CosId's",
                                    db_.text(), ns));
      }
      if (!ids.insert(r.machine_id).second) {
        return Internal(fmt::format(
            "machines.store {}: cosid_machine has two rows of machine id {} in namespace {} "
            "(names padded two ways?): keep one",
            db_.text(), r.machine_id, ns));
      }
      // A row named with another padding was written by instances that pad otherwise: their
      // inserts and sekka's would not collide on the name, and could hold one id twice.
      if (row[0] != fmt::format("{}.{:0{}}", ns, r.machine_id, pad_)) {
        return Internal(fmt::format(
            "machines.store {}: cosid_machine row {} is not named with pad={} (\"{}.{:0{}}\"): "
            "set pad to the padding CosId's instances use",
            db_.text(), row[0].substr(0, 100), pad_, ns, r.machine_id, pad_));
      }
      r.instance = row[3];
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
        return Internal(
            fmt::format("machines.store {}: sekka_cosid_machines holds a note that is not sekka's",
                        db_.text()));
      }
      s.version += note[0] + '\0' + note[1] + '\n';
    }
    AddUnknownHolders(s.records, ns, last);
    return s;
  }

  const int pad_;  // the URI's pad: machine ids in names are zero-padded to it
  std::mutex mu_;
  MysqlConnection db_;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<MachineStore>> OpenCosIdMachineStore(std::string_view uri) {
  static constexpr std::array<std::string_view, 8> kAll = {
      "schema",   "socket",      "pad",           "durability",
      "eviction", "tls_ca_file", "tls_cert_file", "tls_key_file"};
  SEKKA_ASSIGN_OR_RETURN(auto parsed, ParseStoreUri(uri, "machines.store", kAll));
  const auto schema = parsed.params.find("schema");
  if (schema == parsed.params.end() || schema->second != "cosid") {
    return InvalidArgument(
        "machines.store names CosId's own distributor: add ?schema=cosid (the only schema)");
  }
  const std::string& scheme = parsed.scheme;
  const bool redis = scheme == "redis" || scheme == "rediss";
  if (!redis && scheme != "mysql" && scheme != "mariadb") {
    return InvalidArgument("machines.store begins redis://, rediss://, mysql:// or mariadb://");
  }
  for (const auto& [key, value] : parsed.params) {
    const bool allowed = key == "schema" || (redis ? key != "socket" && key != "pad"
                                                   : key == "socket" || key == "pad");
    if (!allowed) {
      return InvalidArgument(fmt::format("machines.store parameter {} is not one of {}'s", key,
                                         redis ? "Redis" : "MySQL"));
    }
  }
  std::string text = RedactSecrets(uri);
  if (redis) {
    SEKKA_ASSIGN_OR_RETURN(auto client,
                           RedisClient::Open(std::move(parsed), std::move(text), "machines.store"));
    return std::unique_ptr<MachineStore>(std::make_unique<CosIdRedisMachines>(std::move(client)));
  }
  if (parsed.path.empty() || parsed.path.find('/') != std::string::npos) {
    return InvalidArgument(
        "machines.store names no database: allowed mysql://USER@HOST:PORT/DATABASE?schema=cosid");
  }
  // CosId 1's JdbcMachineIdDistributor names rows "ns.0007", CosId 2's "ns.00000007": the name is
  // the table's only key, so sekka must name new rows as the fleet's instances do.
  const auto pad = parsed.params.find("pad");
  if (pad == parsed.params.end() || (pad->second != "4" && pad->second != "8")) {
    return InvalidArgument(
        "machines.store for CosId's JDBC table needs pad=4 (its rows are named like ns.0007) or "
        "pad=8 (ns.00000007), the padding its instances' CosId version uses");
  }
  const int width = pad->second == "4" ? 4 : 8;
  return std::unique_ptr<MachineStore>(
      std::make_unique<CosIdJdbcMachines>(std::move(parsed), std::move(text), width));
}

}  // namespace sekka
