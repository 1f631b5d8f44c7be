// backends/mysql_connection.h
//
// One connection to MySQL or MariaDB for sekka's stores on it (the segment store, CosId's
// machine table): made lazily and again after a failure, so a server starts, and recovers, while
// the database is down. Every round trip is bounded (connect, read and write timeouts of 5 s;
// a lock held longer ends the statement that waits for it); a call that fails drops the
// connection, so the server rolls back whatever it had not committed and no transaction is left
// open (but during the check a new connection runs, which opens no transaction and may go on
// after an error it expects). Each session is strict (out-of-range values are errors) and
// autocommits every statement outside START TRANSACTION, whatever the server's defaults.
//
// Thread-safety: one call at a time; the owner serializes them.

#ifndef SEKKA_BACKENDS_MYSQL_CONNECTION_H_
#define SEKKA_BACKENDS_MYSQL_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "backends/store_uri.h"
#include "sekka/status.h"

struct st_mysql;  // MYSQL of <mysql.h>

namespace sekka {

// One answer of a (multi-)statement: rows of text, or the rows it changed.
struct MysqlAnswer {
  std::uint64_t affected = 0;
  std::vector<std::vector<std::string>> rows;
};

class MysqlConnection {
 public:
  // Each round trip's bound (seconds): a stopped server (SIGSTOP, a hung machine whose kernel
  // still acknowledges TCP) answers nothing, and the call fails instead of waiting.
  static constexpr unsigned kTimeoutSeconds = 5;

  // `uri` as ParseStoreUri gave it (its path is the database; parameter `socket` is read),
  // `text` the URI for messages (without a password), `what` the store in messages ("segment
  // store"), `on_connect` a check run on each new connection before its first call (a table's
  // presence), whose error drops it.
  MysqlConnection(StoreUri uri, std::string text, std::string what,
                  std::function<Status(MysqlConnection&)> on_connect = {});
  ~MysqlConnection();
  MysqlConnection(const MysqlConnection&) = delete;
  MysqlConnection& operator=(const MysqlConnection&) = delete;

  // Runs one or more statements (`;`-separated) in one round trip and returns each one's answer.
  // Errors: kUnavailable (the connection is dropped; error_number() says what the server said).
  Result<std::vector<MysqlAnswer>> Run(const std::string& sql);
  // Runs a statement whose effect may be in place already: OK when it ran, or failed with one
  // of the server's `allowed` error numbers (1050 ER_TABLE_EXISTS_ERROR for a CREATE TABLE,
  // 1060 ER_DUP_FIELDNAME for an ADD COLUMN). Errors: Run's.
  Status RunAllowing(const std::string& sql, std::initializer_list<unsigned> allowed);
  // The server's error number of the last failed call (0: none, or no answer).
  unsigned error_number() const { return error_number_; }
  const std::string& text() const { return text_; }
  const std::string& what() const { return what_; }
  const std::string& database() const { return uri_.path; }

  // A string literal (backslash escapes: the session's sql_mode keeps them on).
  static std::string Quote(std::string_view text);

 private:
  Status Connect();
  Error Fail();
  void Drop();

  const StoreUri uri_;
  const std::string text_;
  const std::string what_;
  const std::function<Status(MysqlConnection&)> on_connect_;
  st_mysql* conn_ = nullptr;
  unsigned error_number_ = 0;
  bool checking_ = false;  // on_connect_ runs: a failed statement keeps the connection
};

}  // namespace sekka

#endif  // SEKKA_BACKENDS_MYSQL_CONNECTION_H_
