#include "server/http.h"

#include <fmt/format.h>
#include <llhttp.h>
#include <strings.h>

#include <cstring>
#include <utility>

namespace sekka::http {
namespace {

// The headers sekka reads, and the Request member each goes to.
constexpr std::pair<const char*, std::string Request::*> kKeptHeaders[] = {
    {"authorization", &Request::authorization},
    {"accept", &Request::accept},
    {"host", &Request::host},
    {"origin", &Request::origin},
    {"sec-fetch-site", &Request::fetch_site},
    {"referer", &Request::referer},
};

}  // namespace

struct RequestParser::State {
  // A member, not in the anonymous namespace: a class with linkage may not hold such a type
  // (g++'s -Wsubobject-linkage, which a unity build of this file raises).
  enum class Field { kNone, kKept, kOther };  // kKept: a header of kKeptHeaders

  Limits limits;
  llhttp_t parser;
  llhttp_settings_t settings;
  Request request;
  bool complete = false;
  std::size_t header_bytes = 0;
  std::size_t headers = 0;
  std::size_t body_bytes = 0;
  std::string field;  // the header name being read
  Field current = Field::kNone;
  std::string* value = nullptr;  // kKept: where its value goes
  int limit_status = 0;          // set by a callback that hit a limit
  std::string limit_error;

  static State& Of(llhttp_t* p) { return *static_cast<State*>(p->data); }

  int Fail(int status, std::string message) {
    limit_status = status;
    limit_error = std::move(message);
    return HPE_USER;
  }
  int CountHeaderBytes(std::size_t n) {
    header_bytes += n;
    if (header_bytes > limits.max_header_bytes) {
      return Fail(431,
                  fmt::format("request line and headers exceed {} bytes", limits.max_header_bytes));
    }
    return HPE_OK;
  }
};

RequestParser::RequestParser(const Limits& limits) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.limits = limits;
  llhttp_settings_init(&s.settings);
  s.settings.on_message_begin = [](llhttp_t* p) {
    State& st = State::Of(p);
    st.request = Request{};
    st.header_bytes = st.headers = st.body_bytes = 0;
    st.complete = false;
    return 0;
  };
  s.settings.on_url = [](llhttp_t* p, const char* at, std::size_t n) {
    State& st = State::Of(p);
    if (st.request.target.size() + n > st.limits.max_target) {
      return st.Fail(431, fmt::format("request target exceeds {} bytes", st.limits.max_target));
    }
    st.request.target.append(at, n);
    return st.CountHeaderBytes(n);
  };
  s.settings.on_header_field = [](llhttp_t* p, const char* at, std::size_t n) {
    State& st = State::Of(p);
    if (st.current != State::Field::kNone) {  // a new header begins
      st.current = State::Field::kNone;
      st.field.clear();
    }
    if (st.field.empty() && ++st.headers > st.limits.max_headers) {
      return st.Fail(431, fmt::format("more than {} headers", st.limits.max_headers));
    }
    if (st.field.size() < 64) st.field.append(at, std::min<std::size_t>(n, 64));
    return st.CountHeaderBytes(n);
  };
  s.settings.on_header_value = [](llhttp_t* p, const char* at, std::size_t n) {
    State& st = State::Of(p);
    if (st.current == State::Field::kNone) {
      st.current = State::Field::kOther;
      for (const auto& [name, member] : kKeptHeaders) {
        if (strcasecmp(st.field.c_str(), name) == 0) {
          st.current = State::Field::kKept;
          st.value = &(st.request.*member);
        }
      }
    }
    if (st.current == State::Field::kKept) st.value->append(at, n);
    return st.CountHeaderBytes(n);
  };
  s.settings.on_headers_complete = [](llhttp_t* p) {
    State& st = State::Of(p);
    st.current = State::Field::kNone;
    st.field.clear();
    // Whitespace after a field value is not part of it (RFC 9110 5.5); llhttp keeps it.
    for (const auto& [name, member] : kKeptHeaders) {
      std::string& value = st.request.*member;
      value.erase(value.find_last_not_of(" \t") + 1);
    }
    st.request.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
    st.request.keep_alive = llhttp_should_keep_alive(p) != 0;
    return 0;
  };
  s.settings.on_body = [](llhttp_t* p, const char*, std::size_t n) {
    State& st = State::Of(p);
    st.body_bytes += n;
    if (st.body_bytes > st.limits.max_body) {
      return st.Fail(413, fmt::format("request body exceeds {} bytes", st.limits.max_body));
    }
    return 0;
  };
  s.settings.on_message_complete = [](llhttp_t* p) {
    State& st = State::Of(p);
    st.complete = true;
    return static_cast<int>(HPE_PAUSED);  // one request at a time
  };
  llhttp_init(&s.parser, HTTP_REQUEST, &s.settings);
  s.parser.data = &s;
}

RequestParser::~RequestParser() = default;

RequestParser::Outcome RequestParser::Parse(std::string_view data) {
  State& s = *state_;
  Outcome out;
  if (llhttp_get_errno(&s.parser) == HPE_PAUSED) llhttp_resume(&s.parser);
  llhttp_errno_t err = llhttp_execute(&s.parser, data.data(), data.size());
  if (err == HPE_PAUSED_UPGRADE && !s.complete) {
    // sekka upgrades to nothing: an Upgrade or CONNECT request was answered as any other, and
    // what follows it is the next request.
    const char* at = llhttp_get_error_pos(&s.parser);
    llhttp_resume_after_upgrade(&s.parser);
    err = llhttp_execute(&s.parser, at, data.size() - static_cast<std::size_t>(at - data.data()));
  }
  if (err == HPE_OK) {
    out.consumed = data.size();
    return out;
  }
  if ((err == HPE_PAUSED || err == HPE_PAUSED_UPGRADE) && s.complete) {
    out.kind = Kind::kRequest;
    out.consumed = static_cast<std::size_t>(llhttp_get_error_pos(&s.parser) - data.data());
    out.request = std::move(s.request);
    s.complete = false;
    return out;
  }
  out.kind = Kind::kError;
  if (err == HPE_USER && s.limit_status != 0) {
    out.status = s.limit_status;
    out.error = s.limit_error;
  } else {
    out.status = 400;
    out.error = fmt::format("malformed HTTP request: {}", llhttp_get_error_reason(&s.parser));
  }
  return out;
}

void SplitTarget(std::string_view target, std::string_view& path, std::string_view& query) {
  const std::size_t q = target.find('?');
  path = target.substr(0, q);
  query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
}

std::optional<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (text[i] == '+') {
      out += ' ';
    } else {
      out += text[i];
    }
  }
  return out;
}

std::optional<std::string> QueryParam(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) != key) continue;
    if (eq == std::string_view::npos) return std::string();
    const std::string_view value = pair.substr(eq + 1);
    return PercentDecode(value).value_or(std::string(value));
  }
  return std::nullopt;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

std::string JsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += c;
    }
  }
  return out;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Response(int status, std::string_view content_type, std::string_view body,
                     bool keep_alive, std::string_view extra_headers) {
  std::string out;
  out.reserve(128 + body.size() + extra_headers.size());
  out += fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", status,
                     ReasonPhrase(status), content_type, body.size());
  if (!keep_alive) out += "Connection: close\r\n";
  out += extra_headers;
  out += "\r\n";
  out += body;
  return out;
}

}  // namespace sekka::http
