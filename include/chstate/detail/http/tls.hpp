// chstate/detail/http/tls.hpp — TLS for secure http_transport connections
// (Boost.Asio SSL over OpenSSL): the client context, verifying the peer
// against ca_file's CAs or the system's default paths, and per connection
// the name OpenSSL checks during the handshake (transport/http.hpp's header
// comment, "TLS"). Empty under CHSTATE_NO_TLS.
#pragma once

#ifndef CHSTATE_NO_TLS

#include <chstate/detail/http/pool.hpp>
#include <chstate/error.hpp>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/system_error.hpp>

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <memory>
#include <string>

namespace chstate::detail {

/// Makes the pool's client context when its options ask for TLS. A CA file
/// that cannot be read (or any other setup failure) is kept as the error
/// every secure connection then fails with: errc::invalid_configuration,
/// "TLS setup failed: …".
inline void set_up_tls(http_pool& pool) {
    if (!pool.options.secure)
        return;
    try {
        auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
        ctx->set_verify_mode(asio::ssl::verify_peer);
        if (pool.options.ca_file.empty())
            ctx->set_default_verify_paths();
        else
            ctx->load_verify_file(pool.options.ca_file);
        pool.tls_context = std::move(ctx);
    } catch (const boost::system::system_error& e) {
        pool.tls_error = make_error_code(errc::invalid_configuration);
        pool.tls_error_text = std::string("TLS setup failed: ") + e.what();
    }
}

/// The name to verify, checked by OpenSSL during the handshake (its
/// failure then reads "hostname mismatch", not only "certificate verify
/// failed"). An IP address is matched against the certificate's IP
/// addresses and sent without SNI (RFC 6066). False when OpenSSL refused
/// the name.
inline bool set_name_to_verify(SSL* ssl, const std::string& host) {
    X509_VERIFY_PARAM* verify = SSL_get0_param(ssl);
    error_code not_ip;
    (void)asio::ip::make_address(host, not_ip);
    return not_ip ? SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 &&
                        X509_VERIFY_PARAM_set1_host(verify, host.c_str(), host.size()) == 1
                  : X509_VERIFY_PARAM_set1_ip_asc(verify, host.c_str()) == 1;
}

/// Why a handshake failed: OpenSSL's reason when the certificate did not
/// verify ("certificate verification failed: hostname mismatch"), else
/// the error's own message.
inline std::string handshake_failure(SSL* ssl, const error_code& ec) {
    if (const long v = SSL_get_verify_result(ssl); ec && v != X509_V_OK)
        return std::string("certificate verification failed: ") + X509_verify_cert_error_string(v);
    return ec.message();
}

} // namespace chstate::detail

#endif // CHSTATE_NO_TLS
