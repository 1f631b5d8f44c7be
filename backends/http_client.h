// backends/http_client.h
//
// The HTTP client of the etcd backend, on libcurl: POSTs of a JSON body over HTTP or HTTPS,
// with connections kept alive between calls (a TLS handshake per call would cost more than the
// call), a deadline per call, verified server certificates, an optional client certificate,
// and no proxy whatever the environment says.
//
// Thread-safety: one HttpClient is used by one thread at a time; several clients may be used
// on several threads at once.

#ifndef SEKKA_BACKENDS_HTTP_CLIENT_H_
#define SEKKA_BACKENDS_HTTP_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/host_ports.h"
#include "sekka/status.h"

namespace sekka {

struct TlsSettings {
  // "" = plain HTTP; "system" = HTTPS, verified against the system's CA store; else HTTPS,
  // verified against the CA certificates (PEM) in this file. The host name or IP address of
  // the endpoint must be in the server certificate.
  std::string ca_file;
  // A client certificate and its key (PEM), both or neither; only with HTTPS.
  std::string cert_file;
  std::string key_file;
  bool enabled() const { return !ca_file.empty(); }
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

class HttpClient {
 public:
  explicit HttpClient(TlsSettings tls);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `body` (application/json) to `path` at `to`, with the extra `headers` ("Name: value"),
  // and reads the whole answer within `timeout`. An answer over 16 MiB is refused. Any HTTP
  // status is a response. Errors: kUnavailable (cannot connect, TLS failed, timed out, reset),
  // naming the address and libcurl's reason.
  Result<HttpResponse> Post(const HostPort& to, std::string_view path, std::string_view body,
                            const std::vector<std::string>& headers,
                            std::chrono::milliseconds timeout);

  // How many connections (each with its TLS handshake, over HTTPS) the calls so far opened.
  std::int64_t connections_opened() const { return connections_opened_; }

 private:
  const TlsSettings tls_;
  std::int64_t connections_opened_ = 0;
  void* curl_ = nullptr;  // a CURL easy handle: its connection cache lives across calls
};

}  // namespace sekka

#endif  // SEKKA_BACKENDS_HTTP_CLIENT_H_
