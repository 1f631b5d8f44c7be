#include "server/tls_context.h"

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <ctime>
#include <fstream>
#include <string>

#include "server/log.h"

namespace sekka::server {
namespace {

// True when the PEM file at `path` holds an encrypted key (PKCS#8 or the traditional form).
bool PemIsEncrypted(const std::string& path) {
  std::ifstream in(path);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.find("ENCRYPTED") != std::string::npos;
}

// A certificate outside its validity is loaded (a renewal may be on its way), with a warning
// naming the date: clients refuse the handshake meanwhile.
void WarnOutsideValidity(SSL_CTX* ctx, const std::string& path) {
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert == nullptr) return;
  auto text = [](const ASN1_TIME* t) {
    std::tm tm{};
    return ASN1_TIME_to_tm(t, &tm) == 1
               ? fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC", tm.tm_year + 1900,
                             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
               : std::string("an unreadable date");
  };
  const ASN1_TIME* after = X509_get0_notAfter(cert);
  const ASN1_TIME* before = X509_get0_notBefore(cert);
  std::string why;
  if (X509_cmp_current_time(after) < 0) {
    why = fmt::format("expired on {}", text(after));
  } else if (X509_cmp_current_time(before) > 0) {
    why = fmt::format("is not valid before {}", text(before));
  } else {
    return;
  }
  Log(LogLevel::kWarn,
      fmt::format("server.tls_cert_file \"{}\" {}: clients will refuse the handshake until it "
                  "is renewed",
                  path, why));
}

}  // namespace

// The listeners' TLS context when server.tls_cert_file is set, else null: TLS 1.2 or later, the
// certificate chain and its key, and client certificates required when a client CA is set.
// Idle connections give their TLS buffers back (SSL_MODE_RELEASE_BUFFERS).
Result<std::unique_ptr<asio::ssl::context>> TlsContext(const ServerConfig& config) {
  if (config.server_tls_cert_file.empty()) return std::unique_ptr<asio::ssl::context>();
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  SSL_CTX_set_mode(ctx->native_handle(), SSL_MODE_RELEASE_BUFFERS);
  // An encrypted key is refused, never a passphrase prompt on the terminal (OpenSSL's default).
  SSL_CTX_set_default_passwd_cb(ctx->native_handle(), [](char*, int, int, void*) { return 0; });
  auto refuse = [](const char* key, const std::string& path, const std::string& why) {
    return InvalidArgument(fmt::format("config {} \"{}\" cannot be used: {}", key, path, why));
  };
  asio::error_code ec;
  ctx->use_certificate_chain_file(config.server_tls_cert_file, ec);
  if (ec) return refuse("server.tls_cert_file", config.server_tls_cert_file, ec.message());
  WarnOutsideValidity(ctx->native_handle(), config.server_tls_cert_file);
  ctx->use_private_key_file(config.server_tls_key_file, asio::ssl::context::pem, ec);
  if (ec) {
    return refuse("server.tls_key_file", config.server_tls_key_file,
                  PemIsEncrypted(config.server_tls_key_file)
                      ? "it is encrypted: allowed an unencrypted PEM key (openssl pkey -in KEY "
                        "-out NEW), kept from other users by its mode"
                      : ec.message());
  }
  if (!config.server_tls_client_ca_file.empty()) {
    ctx->load_verify_file(config.server_tls_client_ca_file, ec);
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.server_tls_client_ca_file.c_str());
    if (ec || names == nullptr) {
      return refuse("server.tls_client_ca_file", config.server_tls_client_ca_file,
                    ec ? ec.message() : "no PEM certificates in it");
    }
    SSL_CTX_set_client_CA_list(ctx->native_handle(), names);  // tells clients which CAs
    ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

}  // namespace sekka::server
