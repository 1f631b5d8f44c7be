#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "sekka/secrets.h"
#include "server/commands.h"
#include "server/handlers.h"

namespace sekka::server {

// Thrift: Twitter Snowflake's IDL, service Snowflake { i64 get_worker_id(); i64 get_timestamp();
// i64 get_id(1:string useragent); i64 get_datacenter_id() }. The IDL declares no exceptions, so
// failures travel as TApplicationException with the message, as Twitter's server sent them.

namespace {

// Twitter's check: the whole user agent matches [a-zA-Z][a-zA-Z\-0-9]*.
bool ValidUserAgent(std::string_view agent) {
  if (agent.empty() || !std::isalpha(static_cast<unsigned char>(agent[0]))) return false;
  return std::all_of(agent.begin(), agent.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
}

}  // namespace

void HandleThrift(Service& service, const thrift::Call& call, std::string& out) {
  using thrift::ExceptionType;
  if (call.type == thrift::MessageType::kOneway) {
    service.CountRequest(Protocol::kThrift, Command::kOther, false);
    return;
  }
  if (call.type != thrift::MessageType::kCall) {
    thrift::AppendException(
        out, call.name, call.seqid, ExceptionType::kInvalidMessageType,
        fmt::format("message type {}: allowed 1 (call)", static_cast<int>(call.type)));
    service.CountRequest(Protocol::kThrift, Command::kOther, false);
    return;
  }
  auto answer = [&](Command command, std::int64_t value) {
    thrift::AppendI64Reply(out, call.name, call.seqid, value);
    service.CountRequest(Protocol::kThrift, command, true);
  };
  auto fail = [&](Command command, ExceptionType type, std::string_view message) {
    thrift::AppendException(out, call.name, call.seqid, type, message);
    service.CountRequest(Protocol::kThrift, command, false);
  };
  if (call.name == "get_id") {
    // A view of the argument itself (a conditional with "" would make it a view of a
    // temporary copy).
    std::string_view text;
    if (auto agent = call.strings.find(1); agent != call.strings.end()) text = agent->second;
    if (!ValidUserAgent(text)) {
      fail(Command::kId, ExceptionType::kInternalError,
           fmt::format("invalid_argument: useragent \"{}\" is not valid: allowed a letter, then "
                       "letters, digits and '-'",
                       http::JsonEscape(text.substr(0, 64))));
      return;
    }
    const Result<Reply> reply = Execute(service, Spec(CommandId::kIdNext), {});
    if (reply.ok()) {
      answer(Command::kId, std::get<std::int64_t>(*reply));
    } else {
      fail(Command::kId, ExceptionType::kInternalError,
           fmt::format("{}: {}", MapError(reply.error().code).http_code,
                       RedactSecrets(reply.error().message)));
    }
  } else if (call.name == "get_worker_id") {
    answer(Command::kWorker, service.worker().worker_id);
  } else if (call.name == "get_datacenter_id") {
    answer(Command::kWorker, service.worker().datacenter_id);
  } else if (call.name == "get_timestamp") {
    answer(Command::kWorker, service.now_millis());
  } else {
    fail(Command::kOther, ExceptionType::kUnknownMethod,
         fmt::format("Unknown function {}: allowed get_id, get_worker_id, get_timestamp, "
                     "get_datacenter_id",
                     http::JsonEscape(std::string_view(call.name).substr(0, 64))));
  }
}

}  // namespace sekka::server
