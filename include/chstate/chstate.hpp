// chstate/chstate.hpp — everything: the store, its clocks and its transports.
//
//   state.hpp          the Meltano state value and merge rules
//   config.hpp         URIs, settings, environment overrides
//   error.hpp          error codes, diagnostics, chstate::error
//   clock.hpp          the Clock concept, real_clock
//   manual_clock.hpp   simulated time for tests
//   transport.hpp      the Transport concept, statement
//   any_transport.hpp  one transport type for every engine
//   store.hpp          basic_state_store<Transport, Clock>
//   lock.hpp           the lease returned by acquire_lock
//   transport/chdb.hpp the embedded engine
//
// Not included here, because they bring Boost.Beast and OpenSSL:
//   transport/http.hpp  ClickHouse's HTTP interface (include it yourself)
//   open.hpp            chstate::open(config): a store for whatever engine a URI names
#pragma once

#include <chstate/any_transport.hpp>
#include <chstate/clock.hpp>
#include <chstate/config.hpp>
#include <chstate/error.hpp>
#include <chstate/lock.hpp>
#include <chstate/manual_clock.hpp>
#include <chstate/state.hpp>
#include <chstate/store.hpp>
#include <chstate/transport.hpp>
#include <chstate/transport/chdb.hpp>
