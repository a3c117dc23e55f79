// chstate/detail/schema.hpp — ready(): what the connected server is, once.
//
// The first operation of a store reads the server's version (the dialect,
// statements.hpp), resolves the lock protocol (config.hpp, lock_mode) and
// creates the database and tables if absent: the seed's DDL, plus the
// strict lock's grant table when that protocol runs, whose deduplication
// is then checked (the strict lock rests on it). Cluster mode first
// counts the shard's replicas (the quorum), and skips its ON CLUSTER DDL
// when the connected replica already has every table (such DDL waits for
// every replica, and a store must start while one is down).
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/session.hpp>

#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>

namespace chstate::detail {

/// Cluster mode: the connected replica's shard size (system.clusters),
/// hence the quorum, and the settings every statement is sent with.
CHSTATE_DECL op<replication> learn_replication(session& s, diagnostics& diag);

/// The protocol lock_mode asks for, on what the server can do.
inline lock_protocol choose_lock_protocol(lock_mode mode, bool embedded_engine, const server_features& f) {
    switch (mode) {
    case lock_mode::automatic:
        return embedded_engine && f.dedup_token ? lock_protocol::strict : lock_protocol::seed_compatible;
    case lock_mode::seed_compatible:
        return lock_protocol::seed_compatible;
    case lock_mode::strict:
        return f.dedup_token ? lock_protocol::strict : lock_protocol::strict_unsupported;
    }
    return lock_protocol::seed_compatible;
}

/// A numeric setting `name` in a table's engine_full (`… SETTINGS a = 1,
/// name = 10000`), or nullopt when the table does not state it. Whole
/// names only (replicated_deduplication_window is not
/// non_replicated_deduplication_window, nor …_window_seconds).
inline std::optional<std::uint64_t> engine_setting(std::string_view engine_full, std::string_view name) {
    auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (std::size_t at = engine_full.find(name); at != std::string_view::npos;
         at = engine_full.find(name, at + 1)) {
        if (at > 0 && ident(engine_full[at - 1]))
            continue;
        std::size_t k = at + name.size();
        if (k < engine_full.size() && ident(engine_full[k]))
            continue;
        while (k < engine_full.size() && engine_full[k] == ' ')
            ++k;
        if (k >= engine_full.size() || engine_full[k] != '=')
            continue;
        ++k;
        while (k < engine_full.size() && engine_full[k] == ' ')
            ++k;
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(engine_full.data() + k, engine_full.data() + engine_full.size(), n);
        if (ec == std::errc{})
            return n;
    }
    return std::nullopt;
}

/// The smallest deduplication window the strict lock accepts on its grant
/// table: the window holds the table's last N insert blocks, every id's,
/// and a rival's grant of the same token must still be in it when a
/// duplicate arrives. chstate creates the table with 10,000.
inline constexpr std::uint64_t min_grant_deduplication_window = 100;

/// strict: the grant table deduplicates inserts — a MergeTree whose
/// deduplication window (stated in its engine, else the server's default)
/// is at least min_grant_deduplication_window. A table chstate did not make
/// (by hand, from a backup, a plain MergeTree's default window of 0) is
/// refused with errc::invalid_configuration naming the statement that
/// fixes it: without deduplication two clients can be granted one token.
CHSTATE_DECL op<> check_grant_deduplication(session& s, const resolved& r, diagnostics& diag);

/// Cluster mode: does the connected replica have every table of `r`?
CHSTATE_DECL op<bool> has_every_table(session& s, const resolved& r, diagnostics& diag);

/// Creates the schema of `r` (IF NOT EXISTS, so racing stores are fine).
CHSTATE_DECL op<> create_schema(session& s, const resolved& r, diagnostics& diag);

/// Learns the server and creates the schema the first time; afterwards
/// does nothing. Concurrent first operations may both do it (harmless).
CHSTATE_DECL op<> ready(session& s, diagnostics& diag);

} // namespace chstate::detail

#ifndef CHSTATE_SEPARATE_COMPILATION
#include <chstate/detail/schema.ipp>
#endif
