// chstate/detail/separate_compilation.hpp — header-only by default, or
// compiled once (Boost's idiom, as BOOST_ASIO_SEPARATE_COMPILATION).
//
// Header-only (the default): every function is defined in the headers;
// those whose definitions are heavy (Boost.Beast, OpenSSL, Boost.URL) live
// in detail/**/*.ipp files that the public headers include at their end,
// and CHSTATE_DECL is `inline`.
//
// CHSTATE_SEPARATE_COMPILATION defined for the whole program: the public
// headers only declare those functions (and no longer include Beast,
// OpenSSL or Boost.URL); exactly one source file includes
// <chstate/src.hpp>, which includes every .ipp and so holds the
// definitions, and CHSTATE_DECL is empty. See docs/using-chstate.md.
//
// How a part of the library joins: define its heavy functions in
// detail/<part>/*.ipp, each starting with CHSTATE_DECL (templates stay in
// headers); declare them in the public header, marked CHSTATE_DECL too;
// at the end of the public header
//   #ifndef CHSTATE_SEPARATE_COMPILATION
//   #include <chstate/detail/<part>/x.ipp>
//   #endif
// and add the same #include to include/chstate/src.hpp. Each .ipp
// includes its public header first, so it compiles on its own.
#pragma once

#ifdef CHSTATE_SEPARATE_COMPILATION
#define CHSTATE_DECL
#else
#define CHSTATE_DECL inline
#endif
