// chstate/transport/simulated.hpp — the simulated ClickHouse's former
// place, kept so that code including it still compiles: simulated_clickhouse
// and simulated_transport live in chstate/testing/simulated.hpp.
#pragma once

#include <chstate/testing/simulated.hpp>
