// Engine-free tests, one file per header under tests/unit/ (the same path
// as the header under include/chstate/), compiled as one translation unit.
#include "complexity.hpp"
#include "support.hpp"

#include <chstate/detail/http/reply.hpp>
#include <chstate/detail/lock/held.hpp>
#include <chstate/detail/http/request.hpp>
#include <chstate/detail/rows.hpp>
#include <chstate/detail/schema.hpp>
#include <chstate/detail/server_error.hpp>
#include <chstate/detail/statements.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <doctest/doctest.h>

#include <array>
#include <iostream>
#include <map>
#include <mutex>

using namespace chstate;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {
json::object obj(std::string_view text) { return json::parse(text).as_object(); }
object cobj(std::string_view text) { return parse_json(text).as_object(); }
}

TEST_SUITE("unit") {

#include "unit/state.ipp"
#include "unit/detail/sql.ipp"
#include "unit/detail/glob.ipp"
#include "unit/detail/shown.ipp"
#include "unit/detail/statements.ipp"
#include "unit/detail/sha256.ipp"
#include "unit/detail/dialect.ipp"
#include "unit/detail/schema.ipp"
#include "unit/detail/server_error.ipp"
#include "unit/detail/rows.ipp"
#include "unit/config.ipp"
#include "unit/fake_http.ipp"
#include "unit/detail/http/request.ipp"
#include "unit/error.ipp"
#include "unit/manual_clock.ipp"
#include "unit/detail/uuid.ipp"
#include "unit/transport/http.ipp"
#include "unit/transport/http_failover.ipp"

} // TEST_SUITE("unit")
