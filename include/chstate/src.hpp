// chstate/src.hpp — the definitions CHSTATE_SEPARATE_COMPILATION takes out
// of the headers, for exactly one source file of a program that defines
// CHSTATE_SEPARATE_COMPILATION everywhere (Boost's idiom, as
// <boost/asio/impl/src.hpp>):
//
//     // chstate.cpp
//     #include <chstate/src.hpp>
//
// That file compiles the configuration parsing (Boost.URL), the HTTP
// transport (Boost.Beast, and OpenSSL unless CHSTATE_NO_TLS is defined) and
// the store's operations and lock protocols (coroutines over the session);
// the program links what chstate::http names (docs/using-chstate.md).
// Without the macro, the headers define everything and this
// file is not used.
#pragma once

#ifndef CHSTATE_SEPARATE_COMPILATION
#error "chstate/src.hpp is for programs that define CHSTATE_SEPARATE_COMPILATION in every file; \
without it chstate is header-only and needs no source file"
#endif

#include <chstate/detail/config/environment.ipp>
#include <chstate/detail/config/uri.ipp>
#include <chstate/detail/http/transport.ipp>
// The store's session, operations and lock protocols. Their coroutines
// hold lambdas; GCC warns (-Wsubobject-linkage) that a frame defined in an
// included file has a member of a type with no linkage, which is harmless
// here: these definitions exist in this one file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsubobject-linkage"
#endif
#include <chstate/detail/session.ipp>
#include <chstate/detail/deletes.ipp>
#include <chstate/detail/schema.ipp>
#include <chstate/detail/lock/seed.ipp>
#include <chstate/detail/lock/strict.ipp>
#include <chstate/detail/lock/fence.ipp>
#include <chstate/detail/lock/acquire.ipp>
#include <chstate/detail/lock/lease.ipp>
#include <chstate/detail/ops/read.ipp>
#include <chstate/detail/ops/write.ipp>
#include <chstate/detail/ops/locked.ipp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
