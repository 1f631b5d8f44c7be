// server/tls_context.h
//
// The listeners' TLS context, from server.tls_cert_file, server.tls_key_file and
// server.tls_client_ca_file. Internal to server/.

#ifndef SEKKA_SERVER_TLS_CONTEXT_H_
#define SEKKA_SERVER_TLS_CONTEXT_H_

#include <asio/ssl.hpp>
#include <memory>

#include "sekka/status.h"
#include "server/config.h"

namespace sekka::server {

// The context when server.tls_cert_file is set, else null: TLS 1.2 or later, the certificate
// chain and its key, and client certificates required when a client CA is set. Idle connections
// give their TLS buffers back (SSL_MODE_RELEASE_BUFFERS). Errors: kInvalidArgument naming the
// key and file that cannot be used, and why (an encrypted key is refused, never a passphrase
// prompt).
Result<std::unique_ptr<asio::ssl::context>> TlsContext(const ServerConfig& config);

}  // namespace sekka::server

#endif  // SEKKA_SERVER_TLS_CONTEXT_H_
