// chstate/detail/schema.hpp — ready(): what the connected server is, once.
//
// The first operation of a store reads the server's version (the dialect,
// statements.hpp), resolves the lock protocol (config.hpp, lock_mode) and
// creates the database and tables if absent: the seed's DDL, plus the
// strict lock's grant table when that protocol runs. Cluster mode first
// counts the shard's replicas (the quorum), and skips its ON CLUSTER DDL
// when the connected replica already has every table (such DDL waits for
// every replica, and a store must start while one is down).
#pragma once

#include <chstate/detail/separate_compilation.hpp>

#include <chstate/detail/session.hpp>

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
