// Internal: an OpenSSL server context from TlsOptions, with errors that name the file and
// the reason ("the key k.pem does not match the certificate c.pem").
#pragma once

#include <openssl/ssl.h>

#include <memory>

#include "hal/result.h"
#include "serve/http/tls.h"

namespace ingero::serve::http::detail {

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

Result<SslCtxPtr> make_tls_context(const TlsOptions& o);

}  // namespace ingero::serve::http::detail
