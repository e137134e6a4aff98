// The system OpenSSL (libssl-dev), for TLS in BoardNet. Functions that OpenSSL defines as macros
// are wrapped here, since Swift cannot call a macro.
#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

static inline int boardsync_ssl_ctx_set_min_tls12(SSL_CTX *context) {
    return (int)SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
}

static inline long boardsync_ssl_ctx_set_modes(SSL_CTX *context) {
    // Writes may be retried from a different buffer; partial writes are never needed (memory BIOs).
    return SSL_CTX_set_mode(context, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
}

static inline int boardsync_ssl_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

static inline size_t boardsync_bio_pending(BIO *bio) {
    return BIO_ctrl_pending(bio);
}
#endif
