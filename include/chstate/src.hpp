// chstate/src.hpp — the definitions CHSTATE_SEPARATE_COMPILATION takes out
// of the headers, for exactly one source file of a program that defines
// CHSTATE_SEPARATE_COMPILATION everywhere (Boost's idiom, as
// <boost/asio/impl/src.hpp>):
//
//     // chstate.cpp
//     #include <chstate/src.hpp>
//
// That file compiles the configuration parsing (Boost.URL) and the HTTP
// transport (Boost.Beast, and OpenSSL unless CHSTATE_NO_TLS is defined);
// the program links what chstate::http names (README: "Using chstate in
// your project"). Without the macro, the headers define everything and this
// file is not used.
#pragma once

#ifndef CHSTATE_SEPARATE_COMPILATION
#error "chstate/src.hpp is for programs that define CHSTATE_SEPARATE_COMPILATION in every file; \
without it chstate is header-only and needs no source file"
#endif

#include <chstate/detail/config/environment.ipp>
#include <chstate/detail/config/uri.ipp>
#include <chstate/detail/http/transport.ipp>
