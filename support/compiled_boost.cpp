// The separately compiled parts of Boost.Asio (with its SSL support),
// Boost.JSON and Boost.URL,
// built once for chstate's tests, examples and benchmarks (each of those
// translation units defines BOOST_ASIO_SEPARATE_COMPILATION through the
// build). A program of yours may instead link Boost::json and Boost::url
// from your distribution and compile Asio header-only.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/json/src.hpp>
#include <boost/url/src.hpp>
