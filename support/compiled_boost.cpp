// What chstate's tests, examples and benchmarks compile once, so that each
// of their translation units does not (they all define
// BOOST_ASIO_SEPARATE_COMPILATION and CHSTATE_SEPARATE_COMPILATION through
// the build):
//   * Boost.Asio, with its SSL support;
//   * chstate's own heavy definitions (<chstate/src.hpp>: the configuration
//     parsing on Boost.URL, the HTTP transport on Boost.Beast and OpenSSL),
//     exactly as a program of yours would under CHSTATE_SEPARATE_COMPILATION
//     (docs/using-chstate.md).
// Boost.JSON and Boost.URL are not here: they come from the distribution's
// shared libraries through chstate::chstate, as in a program of yours.
// chstate header-only (no macro) is what the fuzz targets, the `chstate`
// tool and the consumer checks (tests/consumers/) build.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>

#include <chstate/src.hpp>
