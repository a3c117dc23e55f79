// What ClickHouse 18.16 refuses of the modern dialect, with its codes
// (measured on Debian's 18.16.1). The simulator as 18.16 must answer the
// same (tests/simulation.cpp), and the real 18.16 does (tests/server.cpp):
// so the simulator cannot let through a statement of the wrong dialect.
#pragma once

#include <chstate/transport.hpp>

#include <string>
#include <vector>

namespace chstate::test {

/// A statement and 18.16's code for it. On `db`, which has a table `t`
/// (k String); each is accepted by a modern server (the simulator's default).
struct refusal {
    std::string sql;
    int code;
    std::vector<parameter> parameters = {};
};

inline std::vector<refusal> refusals_18_16(const std::string& db) {
    const std::string t = "`" + db + "`.`t`";
    return {
        {"SELECT {x:String}", 62, {{"x", "String", "a"}}},
        {"DELETE FROM " + t + " WHERE k = 'a'", 62},
        {"CREATE TABLE `" + db + "`.`x1` (k String, at DateTime) ENGINE = MergeTree ORDER BY k TTL at + INTERVAL 1 SECOND",
         62},
        {"SELECT now() + INTERVAL 1 MILLISECOND", 62},
        {"INSERT INTO " + t + " (k) SETTINGS insert_deduplication_token = 'x' VALUES ('a')", 62},
        {"CREATE TABLE `" + db + "`.`x2` (k String, at DateTime64(3)) ENGINE = MergeTree ORDER BY k", 50},
        {"SELECT now64(3)", 46},
        {"SELECT toUnixTimestamp64Milli(now64(3))", 46},
        {"CREATE TABLE `" + db + "`.`x3` (k String) ENGINE = MergeTree ORDER BY k"
         " SETTINGS non_replicated_deduplication_window = 10",
         36},
        {"SELECT 1 SETTINGS insert_deduplication_token = 'x'", 115},
        {"SELECT name FROM system.columns WHERE database = '" + db + "' ORDER BY position", 47},
    };
}

} // namespace chstate::test
