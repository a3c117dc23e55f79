// The separately compiled parts of Boost.Asio (with its SSL support), built
// once for chstate's tests, examples and benchmarks (each of those
// translation units defines BOOST_ASIO_SEPARATE_COMPILATION through the
// build). Boost.JSON and Boost.URL are not here: they come from the
// distribution's shared libraries through chstate::chstate, exactly as in a
// program of yours (which may also compile Asio header-only, as the consumer
// checks in tests/consumers/ do).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
