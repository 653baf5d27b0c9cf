#include "serve/http/tls_context.h"

#include <openssl/err.h>
#include <openssl/x509.h>

#include <filesystem>

namespace ingero::serve::http::detail {

namespace {

std::string openssl_error() {
  unsigned long e = ERR_get_error();
  std::string last = "unknown error";
  while (e) {  // the last queued error is usually the most specific
    char b[256];
    ERR_error_string_n(e, b, sizeof b);
    last = b;
    e = ERR_get_error();
  }
  return last;
}

// A file OpenSSL would fail on with a vague message gets a precise one first.
Status readable(const std::string& what, const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st))
    return make_error("TLS: " + what + " " + path + " does not exist");
  if (std::filesystem::is_directory(st))
    return make_error("TLS: " + what + " " + path + " is a directory");
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    std::fclose(f);
    return {};
  }
  return Error::sys("TLS: cannot read " + what + " " + path, errno);
}

int version(TlsVersion v) { return v == TlsVersion::tls13 ? TLS1_3_VERSION : TLS1_2_VERSION; }

}  // namespace

Result<SslCtxPtr> make_tls_context(const TlsOptions& o) {
  ERR_clear_error();
  if (o.cert_file.empty() || o.key_file.empty())
    return make_error("TLS: both a certificate file and a key file are needed");
  if (auto st = readable("certificate", o.cert_file); !st) return st.error();
  if (auto st = readable("key", o.key_file); !st) return st.error();
  if (o.min_version == TlsVersion::tls13 && o.max_version == TlsVersion::tls12)
    return make_error("TLS: the minimum version is above the maximum");
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return make_error("TLS: " + openssl_error());
  SSL_CTX_set_min_proto_version(ctx.get(), version(o.min_version));
  SSL_CTX_set_max_proto_version(ctx.get(), version(o.max_version));
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), o.cert_file.c_str()) != 1)
    return make_error("TLS: cannot load the certificate " + o.cert_file + ": " + openssl_error());
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    std::string e = openssl_error();
    if (e.find("mismatch") != std::string::npos)
      return make_error("TLS: the key " + o.key_file + " does not match the certificate " +
                        o.cert_file);
    return make_error("TLS: cannot load the key " + o.key_file + ": " + e);
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return make_error("TLS: the key " + o.key_file + " does not match the certificate " +
                      o.cert_file);
  if (o.client_auth != ClientAuth::none) {
    if (o.client_ca_file.empty())
      return make_error("TLS: verifying client certificates needs a client CA file");
    if (auto st = readable("client CA file", o.client_ca_file); !st) return st.error();
    if (SSL_CTX_load_verify_locations(ctx.get(), o.client_ca_file.c_str(), nullptr) != 1)
      return make_error("TLS: cannot load the client CA file " + o.client_ca_file + ": " +
                        openssl_error());
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.client_ca_file.c_str());
    if (!names)
      return make_error("TLS: no CA certificate in the client CA file " + o.client_ca_file);
    SSL_CTX_set_client_CA_list(ctx.get(), names);  // takes ownership
    int mode = SSL_VERIFY_PEER;
    if (o.client_auth == ClientAuth::require_and_verify) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx.get(), mode, nullptr);
    // Resumed sessions keep their verified client; OpenSSL refuses resumption without this.
    static const unsigned char kSid[] = "ingero-http";
    SSL_CTX_set_session_id_context(ctx.get(), kSid, sizeof kSid - 1);
  }
  return ctx;
}

}  // namespace ingero::serve::http::detail
