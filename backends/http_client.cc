#include "backends/http_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <mutex>

namespace sekka {
namespace {

constexpr std::size_t kMaxResponse = 16 * 1024 * 1024;

struct Sink {
  std::string* body;
  bool too_large = false;
};

std::size_t Write(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const std::size_t n = size * count;
  if (sink->body->size() + n > kMaxResponse) {
    sink->too_large = true;
    return 0;  // libcurl stops with CURLE_WRITE_ERROR
  }
  sink->body->append(data, n);
  return n;
}

struct HeaderList {
  curl_slist* list = nullptr;
  ~HeaderList() { curl_slist_free_all(list); }
  bool Add(const std::string& line) {
    curl_slist* next = curl_slist_append(list, line.c_str());
    if (next == nullptr) return false;
    list = next;
    return true;
  }
};

}  // namespace

HttpClient::HttpClient(TlsSettings tls) : tls_(std::move(tls)) {
  // Once per process, before the first handle; thread-safe in this libcurl ("threadsafe").
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::~HttpClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<HttpResponse> HttpClient::Post(const HostPort& to, std::string_view path,
                                      std::string_view body,
                                      const std::vector<std::string>& headers,
                                      std::chrono::milliseconds timeout) {
  const std::string url =
      fmt::format("{}://{}{}", tls_.enabled() ? "https" : "http", to.Text(), path);
  auto fail = [&](std::string_view what) { return Unavailable(fmt::format("{}: {}", url, what)); };
  if (curl_ == nullptr) {
    curl_ = curl_easy_init();
    if (curl_ == nullptr) return fail("libcurl could not make a handle");
  }
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);  // keeps the connection cache, forgets the last call's options

  HeaderList list;
  bool ok = list.Add("Content-Type: application/json") && list.Add("Expect:");
  for (const std::string& h : headers) ok = ok && list.Add(h);
  if (!ok) return fail("out of memory for the request headers");

  HttpResponse response;
  Sink sink{&response.body};
  char error[CURL_ERROR_SIZE] = {};
  const long timeout_ms = std::max<long>(1, static_cast<long>(timeout.count()));
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_PROXY, "");  // never a proxy from http_proxy and the like
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list.list);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.empty() ? "" : body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  if (tls_.enabled()) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    if (tls_.ca_file != "system") curl_easy_setopt(curl, CURLOPT_CAINFO, tls_.ca_file.c_str());
    if (!tls_.cert_file.empty()) {
      curl_easy_setopt(curl, CURLOPT_SSLCERT, tls_.cert_file.c_str());
      curl_easy_setopt(curl, CURLOPT_SSLKEY, tls_.key_file.c_str());
    }
  }
  const CURLcode code = curl_easy_perform(curl);
  long opened = 0;
  if (curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK) {
    connections_opened_ += opened;
  }
  // The handle keeps pointers to these locals: drop them before they go.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  if (sink.too_large) return fail("the answer is larger than 16 MiB");
  if (code != CURLE_OK) {
    std::string what = error[0] != '\0' ? std::string(error) : curl_easy_strerror(code);
    if (code == CURLE_GOT_NOTHING && !tls_.enabled()) {
      what += " (the server may speak HTTPS only: give a CA file)";
    } else if (tls_.enabled() && tls_.cert_file.empty() &&
               (code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR ||
                code == CURLE_SSL_CONNECT_ERROR || code == CURLE_GOT_NOTHING)) {
      what += " (the server may require a client certificate)";
    }
    return fail(what);
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace sekka
