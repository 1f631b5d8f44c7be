// resp/resp_connection.h
//
// A small blocking RESP2 connection over POSIX sockets, plain or TLS (OpenSSL), every wait
// bounded by poll() with a deadline and ended at once by a write to a `wake` eventfd: what the
// C++ client (src/client.cc) speaks to sekka servers, and the Redis backends (backends/) to
// Redis. Its own small library (resp/CMakeLists.txt), built into sekka_client; not installed.

#ifndef SEKKA_RESP_RESP_CONNECTION_H_
#define SEKKA_RESP_RESP_CONNECTION_H_

#include <netdb.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sekka/status.h"

namespace sekka {

// A server's error reply, "-PREFIX message", and what the client does with it.
struct ServerError {
  std::string prefix;
  std::string message;
  bool failover() const {
    return prefix == "LEASELOST" || prefix == "CLOCKBACKWARDS" || prefix == "UNAVAILABLE";
  }
  bool auth() const { return prefix == "NOAUTH" || prefix == "WRONGPASS"; }
};

// A transport failure (connect, send, receive, a timeout, bytes that are not RESP).
struct TransportError {
  std::string message;
  bool timed_out = false;
  // It came before any byte of the reply, and is not a timeout: the server had closed the
  // connection (its idle timeout, a restart), and the command can be sent again on a new one.
  bool stale = false;
  bool closing = false;  // the client is closing: nothing is tried any more
};

// OpenSSL's oldest queued error as text ("no reason" when there is none), queue cleared.
std::string OpenSslError();

// The TLS files of a client: the CA file of the servers ("system": the system's CAs), and a
// client certificate with its key (both or neither).
struct TlsFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// A client TLS context that verifies the server's certificate, or null when no file is given.
// Errors: kInvalidArgument naming the file (as tls_ca_file, tls_cert_file, tls_key_file) that
// cannot be used.
Result<std::shared_ptr<SSL_CTX>> TlsClientContext(const TlsFiles& files);

// `s` whole as a decimal int64 (a reply's integer, length or text). False for anything else.
bool DecimalInt64(std::string_view s, std::int64_t& v);

// A reply of any kind: '+' and '-' (text), ':' (integer), '$' (text; nil when null), '*'
// (elements; nil when null).
struct RespReply {
  char kind = 0;
  std::string text;
  std::int64_t integer = 0;
  std::vector<RespReply> elements;
  bool nil = false;
};

// One connection, used by one thread at a time.
class RespConnection {
 public:
  using milliseconds = std::chrono::milliseconds;
  using TimePoint = std::chrono::steady_clock::time_point;

  ~RespConnection();

  // Connects to `host`:`port`, trying each of its addresses, all within `timeout` (the name's
  // lookup and, with `tls`, the handshake included). A write to `wake` (the client closing;
  // -1: none) ends any wait at once.
  static std::optional<TransportError> Open(const std::string& host, int port, milliseconds timeout,
                                            int wake, SSL_CTX* tls,
                                            std::unique_ptr<RespConnection>& out);

  // Sends a command and reads its reply; an error reply comes back in `error`. With `ids`, the
  // command asks for a batch of `expect` ids, which come back there (BatchIds says what is
  // accepted).
  std::optional<TransportError> Call(const std::vector<std::string>& args, milliseconds timeout,
                                     std::vector<std::int64_t>* ids, std::size_t expect,
                                     std::optional<ServerError>* error);

  // Sends a command and reads its reply, whatever its kind (an error reply is a reply of kind
  // '-'), nested at most 8 deep, at most 1,000,000 elements in all.
  std::optional<TransportError> Query(const std::vector<std::string>& args, milliseconds timeout,
                                      RespReply& reply);

 private:
  std::optional<TransportError> Exchange(const std::vector<std::string>& args, milliseconds timeout,
                                         std::vector<std::int64_t>* ids, std::size_t expect,
                                         std::optional<ServerError>* error);

  // A batch's reply: an array of exactly `n` distinct ids (integers, or decimal bulk strings of
  // at most 20 characters), not negative, increasing if `increasing` (a tag's; a snowflake
  // layout may be descending or sharded) (docs/contract.md). Anything else is a broken server,
  // failed over like a connection error; the first bad element ends the read (the connection
  // is then dropped).
  std::optional<TransportError> BatchIds(char kind, std::string_view rest, std::size_t n,
                                         bool increasing, std::vector<std::int64_t>& ids);

  RespConnection(int fd, int wake);

  // getaddrinfo has no timeout of its own: a name (not an address literal) is looked up on a
  // thread of its own, which may outlive this call and then frees what it found.
  static std::optional<TransportError> Resolve(const std::string& host, int port,
                                               milliseconds timeout,
                                               std::shared_ptr<addrinfo>& out);

  // Waits for `events` on the socket until the command's deadline, or until the client closes.
  std::optional<TransportError> Wait(short events);

  std::optional<TransportError> Fill();

  // The transport, plain or TLS. Send and Recv return the bytes moved (> 0); else 0 for a
  // closed connection or -1 for an error (LastError), with `wait` = 0, or -1 with `wait` the
  // poll event to wait for before the same call is made again (a TLS record may need the
  // other direction: a read that must write, or the reverse).
  ssize_t Send(const char* data, std::size_t size, short& wait);

  ssize_t Recv(char* data, std::size_t size, short& wait);

  ssize_t TlsResult(int n, short& wait);

  std::string LastError() const;

  // The TLS handshake on the connected socket, by deadline_; the server's certificate must be
  // signed by the context's CAs and name `host` (an IP address or a DNS name).
  std::optional<TransportError> Handshake(SSL_CTX* tls, const std::string& host);

  std::optional<TransportError> Line(std::string& line);

  std::optional<TransportError> Bulk(std::string_view length, std::string& out);

  // Sends `args` as one command, by the deadline set.
  std::optional<TransportError> Send(const std::vector<std::string>& args);

  // One reply of any kind into `reply`; `budget` elements may still be read.
  std::optional<TransportError> Reply(RespReply& reply, int depth, std::int64_t& budget);

  int fd_;
  SSL* ssl_ = nullptr;     // TLS over fd_; null: plain TCP
  std::string error_;      // the last Send/Recv error
  int wake_;               // the client's eventfd: readable once it closes
  bool received_ = false;  // a byte of the current command's reply came
  std::string in_;
  std::size_t start_ = 0;
  TimePoint deadline_;
};

}  // namespace sekka

#endif  // SEKKA_RESP_RESP_CONNECTION_H_
