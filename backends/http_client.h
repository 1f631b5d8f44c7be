// backends/http_client.h
//
// The smallest HTTP/1.1 client the coordinator backends need: one POST of a JSON body per
// connection (`Connection: close`), read to the end, within a deadline. etcd's JSON gateway is
// its only user; at about one call a second, a connection per call costs nothing that matters.
// The response parser is pure and has a fuzz target.
//
// Thread-safety: free functions; each call has its own socket.

#ifndef SEKKA_BACKENDS_HTTP_CLIENT_H_
#define SEKKA_BACKENDS_HTTP_CLIENT_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/status.h"

namespace sekka {

struct HostPort {
  std::string host;  // a numeric IPv4 or IPv6 address ("localhost" is read as 127.0.0.1)
  int port = 0;
  std::string Text() const;
};

// "h:p,h:p,..." (each "[v6]:p" or "ipv4:p"). `what` names the setting in errors.
// Errors: kInvalidArgument naming the bad entry and the allowed form.
Result<std::vector<HostPort>> ParseHostPorts(std::string_view list, std::string_view what);

struct HttpResponse {
  int status = 0;
  std::string body;  // de-chunked
};

// Parses a complete response (the connection was read to its end). Errors: kInvalidArgument.
Result<HttpResponse> ParseHttpResponse(std::string_view raw);

// POSTs `body` (application/json) to `path` and reads the whole answer within `timeout`.
// The answer is limited to 16 MiB. Errors: kUnavailable (cannot connect, timed out, reset,
// malformed answer), naming the address.
Result<HttpResponse> HttpPost(const HostPort& to, std::string_view path, std::string_view body,
                              std::chrono::milliseconds timeout);

}  // namespace sekka

#endif  // SEKKA_BACKENDS_HTTP_CLIENT_H_
