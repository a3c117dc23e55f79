// chstate/chstate.hpp — everything: the store, its clocks and its transports.
//
//   state.hpp          the Meltano state value and merge rules
//   config.hpp         URIs, settings, environment overrides
//   error.hpp          error codes, diagnostics, chstate::error
//   clock.hpp          the Clock concept, real_clock
//   manual_clock.hpp   simulated time for tests
//   transport.hpp      the Transport concept, statement
//   store.hpp          basic_state_store<Transport, Clock>
//   lock.hpp           the lease returned by acquire_lock
//   transport/chdb.hpp the embedded engine
//
// Not included here, because it brings Boost.Beast and OpenSSL:
//   transport/http.hpp  ClickHouse's HTTP interface (include it yourself)
#pragma once

#include <chstate/clock.hpp>
#include <chstate/config.hpp>
#include <chstate/error.hpp>
#include <chstate/lock.hpp>
#include <chstate/manual_clock.hpp>
#include <chstate/state.hpp>
#include <chstate/store.hpp>
#include <chstate/transport.hpp>
#include <chstate/transport/chdb.hpp>
