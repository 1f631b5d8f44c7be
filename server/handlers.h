// server/handlers.h
//
// The front ends over the command table (server/commands.h): HTTP routes, RESP commands and
// Twitter Snowflake's Thrift service turn their requests into commands and format the replies.
// No I/O: the event loop (server/connection.cc) hands in parsed requests and sends the bytes back.
//
// Thread-safety: a Session belongs to one connection; the functions are reentrant.

#ifndef SEKKA_SERVER_HANDLERS_H_
#define SEKKA_SERVER_HANDLERS_H_

#include <string>
#include <string_view>
#include <vector>

#include "server/commands.h"
#include "server/http.h"
#include "server/service.h"
#include "server/thrift.h"

namespace sekka::server {

// What a connection has shown across its requests, kept by the event loop (server/connection.cc).
struct Session;

// Appends the complete HTTP response for `request` to `out`. Sets `close` when the connection
// must close after it.
void HandleHttp(Service& service, Session& session, const http::Request& request, std::string& out,
                bool& close);
// The response for a request the parser rejected (400, 413, 431); always closes.
std::string HttpParseError(int status, std::string_view message);

// Where the request runs (commands.h, Lane): kLoop unless it may wait (for a segment store: a
// tag not loaded yet, or with fewer ids buffered than asked; for a strict tag's leader; ...);
// else on that lane's thread pool, so a slow or hung store or server never holds up the loop's
// other connections.
Lane LaneOf(Service& service, const http::Request& request);
Lane LaneOf(Service& service, const std::vector<std::string_view>& args);

// How a connection gets ids: RESP integers, or decimal bulk strings (a JavaScript client turns
// an integer into a double and loses a 64-bit id's low bits).
enum class IdReply {
  kServerDefault,  // server.resp_ids
  kInteger,        // ID.REPLY INTEGER
  kString,         // ID.REPLY STRING
};

struct Session {
  // Sent the right credentials (AUTH, HELLO AUTH, a bearer token, ?token=): the connection gets
  // the larger buffer limits.
  bool authenticated = false;
  // The right credentials came on this connection for the first time (Authenticate): the
  // connection leaves the unauthenticated ones (connection.cc, AfterCredentials). The server clears
  // it.
  bool first_auth = false;
  void Authenticate() {
    first_auth = first_auth || !authenticated;
    authenticated = true;
  }
  // The last request sent wrong credentials: its reply is the last, and is delayed (connection.cc,
  // AfterCredentials). The handler sets `close` with it.
  bool auth_failed = false;
  std::string name;                            // RESP: CLIENT SETNAME
  IdReply id_reply = IdReply::kServerDefault;  // RESP: ID.REPLY
};

// Appends the reply to one command to `out`. Sets `close` for QUIT and for failed credentials.
void HandleResp(Service& service, Session& session, const std::vector<std::string_view>& args,
                std::string& out, bool& close);

// Pipelined strict requests of one tag that one call to its leader answers (a follower's, or a
// leader's past its bound: server/strict_tags.h): STRICT.NEXT and STRICT.BATCH with a valid
// count, from a connection that needs no credentials or sent them.
struct StrictRun {
  std::string tag;
  std::vector<std::int64_t> counts;  // each request's; 0: STRICT.NEXT's one-id form
  std::int64_t total = 0;            // ids, within strict.window
};
// Adds the request `args` to `run` (any tag when empty, else the same) and true; false when it
// is not such a request or would take the run past strict.window (it is answered alone).
bool JoinStrictRun(Service& service, const Session& session,
                   const std::vector<std::string_view>& args, StrictRun& run);
// Appends the replies of the run's requests, given its first id (each takes the next ones in
// order) or the error every request gets, and counts them.
void AnswerStrictRun(Service& service, const Session& session, const StrictRun& run,
                     const Result<std::int64_t>& first, std::string& out);

// Runs one call of Twitter Snowflake's Thrift service (get_id, get_worker_id, get_timestamp,
// get_datacenter_id) and appends its framed reply or TApplicationException (nothing for a
// oneway message, whose sender reads no reply).
void HandleThrift(Service& service, const thrift::Call& call, std::string& out);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_HANDLERS_H_
