// TLS settings of a server (OpenSSL). The same fields as the Prometheus web-config's
// tls_server_config, so that file maps onto them one to one (web_config.h).
#pragma once

#include <string>

namespace ingero::serve::http {

enum class ClientAuth {
  none,                // NoClientCert
  verify_if_given,     // VerifyClientCertIfGiven: a certificate, when sent, must verify
  require_and_verify,  // RequireAndVerifyClientCert: every client shows a verified certificate
};

enum class TlsVersion { tls12, tls13 };

struct TlsOptions {
  std::string cert_file;  // PEM: the server certificate, then its chain
  std::string key_file;   // PEM private key, matching cert_file
  ClientAuth client_auth = ClientAuth::none;
  std::string client_ca_file;  // PEM CAs that sign client certificates; required unless none
  TlsVersion min_version = TlsVersion::tls12;
  TlsVersion max_version = TlsVersion::tls13;
};

}  // namespace ingero::serve::http
