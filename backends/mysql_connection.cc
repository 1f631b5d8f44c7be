#include "backends/mysql_connection.h"

#include <fmt/format.h>
#include <mysql.h>

#include <algorithm>
#include <mutex>

#include "backends/one_line.h"

namespace sekka {

MysqlConnection::MysqlConnection(StoreUri uri, std::string text, std::string what,
                                 std::function<Status(MysqlConnection&)> on_connect)
    : uri_(std::move(uri)),
      text_(std::move(text)),
      what_(std::move(what)),
      on_connect_(std::move(on_connect)) {}

MysqlConnection::~MysqlConnection() { Drop(); }

std::string MysqlConnection::Quote(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\0') {
      out += "\\0";
      continue;
    }
    if (c == '\'' || c == '\\' || c == '"' || c == '\n' || c == '\r' || c == '\x1a') out += '\\';
    out += c;
  }
  return out + "'";
}

Status MysqlConnection::RunAllowing(const std::string& sql,
                                    std::initializer_list<unsigned> allowed) {
  Result<std::vector<MysqlAnswer>> r = Run(sql);
  if (r.ok() || std::find(allowed.begin(), allowed.end(), error_number_) != allowed.end()) {
    return Status::Ok();
  }
  return std::move(r).error();
}

Result<std::vector<MysqlAnswer>> MysqlConnection::Run(const std::string& sql) {
  SEKKA_RETURN_IF_ERROR(Connect());
  if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) return Fail();
  std::vector<MysqlAnswer> answers;
  for (;;) {
    MysqlAnswer a;
    if (MYSQL_RES* res = mysql_store_result(conn_); res != nullptr) {
      const unsigned fields = mysql_num_fields(res);
      while (MYSQL_ROW row = mysql_fetch_row(res)) {
        std::vector<std::string>& out = a.rows.emplace_back();
        for (unsigned i = 0; i < fields; ++i) out.emplace_back(row[i] != nullptr ? row[i] : "");
      }
      mysql_free_result(res);
    } else if (mysql_field_count(conn_) != 0) {
      return Fail();  // a result set that did not arrive
    } else {
      a.affected = mysql_affected_rows(conn_);
    }
    answers.push_back(std::move(a));
    const int next = mysql_next_result(conn_);
    if (next > 0) return Fail();
    if (next < 0) return answers;
  }
}

Error MysqlConnection::Fail() {
  error_number_ = mysql_errno(conn_);
  const std::string why = mysql_error(conn_);
  // A check (on_connect_) opens no transaction, and goes on after an error it expects (a table
  // to make): its connection stays; Connect drops it if the check fails.
  if (!checking_) Drop();
  return Unavailable(fmt::format("{} {}: {}", what_, text_, OneLine(why)));
}

void MysqlConnection::Drop() {
  if (conn_ != nullptr) mysql_close(conn_);
  conn_ = nullptr;
}

Status MysqlConnection::Connect() {
  if (conn_ != nullptr) return Status::Ok();
  error_number_ = 0;
  static std::once_flag init;
  std::call_once(init, [] { mysql_library_init(0, nullptr, nullptr); });
  conn_ = mysql_init(nullptr);
  if (conn_ == nullptr) return Unavailable(what_ + ": out of memory for a connection");
  const unsigned timeout = kTimeoutSeconds;
  const my_bool no = 0;
  mysql_options(conn_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  mysql_options(conn_, MYSQL_OPT_READ_TIMEOUT, &timeout);
  mysql_options(conn_, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
  mysql_options(conn_, MYSQL_OPT_RECONNECT, &no);  // a silent reconnect would lose a transaction
  mysql_options(conn_, MYSQL_SET_CHARSET_NAME, "utf8mb4");  // tags are UTF-8 (a peer's too)
  const auto socket = uri_.params.find("socket");
  if (mysql_real_connect(conn_, uri_.host.c_str(), uri_.user.c_str(),
                         uri_.has_password ? uri_.password.c_str() : nullptr, uri_.path.c_str(),
                         static_cast<unsigned>(uri_.port),
                         socket != uri_.params.end() ? socket->second.c_str() : nullptr,
                         CLIENT_MULTI_STATEMENTS) == nullptr) {
    const std::string why = mysql_error(conn_);
    error_number_ = mysql_errno(conn_);
    Drop();
    return Unavailable(fmt::format("{} {} is unreachable: {}", what_, text_, OneLine(why)));
  }
  // Out-of-range values are errors, not truncations; a lock held longer than a call ends the
  // statement that waits for it; and every statement outside START TRANSACTION commits on its
  // own, whatever the server's default (with autocommit off, tinyid's update and a new tag's
  // insert were never committed, and their ids were handed out again).
  const std::string setup = fmt::format(
      "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
      "innodb_lock_wait_timeout = {}, autocommit = 1",
      kTimeoutSeconds);
  if (mysql_real_query(conn_, setup.data(), setup.size()) != 0) return Fail();
  if (!on_connect_) return Status::Ok();
  checking_ = true;
  Status checked = on_connect_(*this);
  checking_ = false;
  if (!checked.ok()) Drop();
  return checked;
}

}  // namespace sekka
