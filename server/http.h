// server/http.h
//
// HTTP/1.1 request parsing over llhttp (Node.js's parser, from Debian's node-llhttp), with
// sekka's limits, and reply formatting. The parser does no I/O: the connection feeds it bytes
// and gets back complete requests one at a time (pipelined requests stay in order).
//
// Thread-safety: a RequestParser belongs to one connection; the functions are pure.

#ifndef SEKKA_SERVER_HTTP_H_
#define SEKKA_SERVER_HTTP_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace sekka::http {

struct Limits {
  std::size_t max_target = 8 * 1024;         // the request target (path and query)
  std::size_t max_header_bytes = 16 * 1024;  // request line and all headers
  std::size_t max_headers = 64;              // header count
  std::size_t max_body = 64 * 1024;          // a body is read and ignored up to this size
};

struct Request {
  std::string method;
  std::string target;         // "/v1/ids?count=5"
  std::string authorization;  // the Authorization header, if any
  std::string accept;         // the Accept header, if any
  std::string host;           // the Host header, if any
  std::string origin;         // the Origin header, if any (browsers send it cross-site)
  std::string fetch_site;     // Sec-Fetch-Site, if any (browsers' Fetch Metadata)
  std::string referer;        // the Referer header, if any
  bool keep_alive = true;
};

class RequestParser {
 public:
  enum class Kind { kNeedMore, kRequest, kError };
  struct Outcome {
    Kind kind = Kind::kNeedMore;
    std::size_t consumed = 0;  // bytes of the input used
    Request request;           // kRequest
    int status = 0;            // kError: 400, 413 or 431
    std::string error;         // kError: for people
  };

  explicit RequestParser(const Limits& limits);
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses from the front of `data` up to the end of one request. After kError the connection
  // must be closed (after sending the error).
  Outcome Parse(std::string_view data);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// "/v1/ids?count=5" -> path "/v1/ids", query "count=5".
void SplitTarget(std::string_view target, std::string_view& path, std::string_view& query);
// The percent-decoded value of `key` in a query string, if present; a value that does not
// decode ("%2") is given as sent, so that the check of its value names it.
std::optional<std::string> QueryParam(std::string_view query, std::string_view key);
// Percent-decodes a path segment; nullopt if it is malformed.
std::optional<std::string> PercentDecode(std::string_view text);

// A complete response with Content-Length. `extra_headers` is raw "Name: value\r\n" lines.
std::string Response(int status, std::string_view content_type, std::string_view body,
                     bool keep_alive, std::string_view extra_headers = {});
std::string_view ReasonPhrase(int status);
// `text` escaped for the inside of a JSON string (quotes, backslashes, control characters).
std::string JsonEscape(std::string_view text);
// `text` as a JSON string: quoted and escaped.
inline std::string JsonString(std::string_view text) { return '"' + JsonEscape(text) + '"'; }
// `text` escaped for HTML text and attribute values (& < > " ').
std::string HtmlEscape(std::string_view text);

}  // namespace sekka::http

#endif  // SEKKA_SERVER_HTTP_H_
