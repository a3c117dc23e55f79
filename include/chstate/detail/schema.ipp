// chstate/detail/schema.ipp — the definitions of schema.hpp (header-only: included by it; CHSTATE_SEPARATE_COMPILATION: by chstate/src.hpp).
#pragma once

#include <chstate/detail/schema.hpp>

namespace chstate::detail {

CHSTATE_DECL op<replication> learn_replication(session& s, diagnostics& diag) {
    const cluster_options& c = s.options().cluster;
    replication repl;
    auto [ec, found] = co_await s.rows(statements::count_shard_replicas(c.name), diag);
    if (ec)
        co_return std::tuple{ec, repl};
    const auto n = found.empty() ? std::nullopt : uint_field(found.front(), "n");
    if (!n)
        co_return std::tuple{fail(diag, errc::protocol_error, "the system.clusters count has no number"), repl};
    if (*n == 0)
        co_return std::tuple{fail(diag, errc::invalid_configuration,
                                  "cluster \"" + c.name +
                                      "\" is not in this server's system.clusters (remote_servers), "
                                      "or the server is not one of its replicas"),
                             repl};
    const std::uint64_t quorum = c.insert_quorum ? c.insert_quorum : *n / 2 + 1;
    if (quorum > *n)
        co_return std::tuple{fail(diag, errc::invalid_configuration,
                                  "insert_quorum " + std::to_string(quorum) + " is more than the " +
                                      std::to_string(*n) + " replicas of this shard of cluster \"" + c.name + "\""),
                             repl};
    repl.cluster = c.name;
    repl.zookeeper_path = c.zookeeper_path;
    repl.replica = c.replica;
    repl.settings = {{"insert_quorum", std::to_string(quorum)},
                     {"insert_quorum_timeout", std::to_string(c.insert_quorum_timeout.count())},
                     {"select_sequential_consistency", "1"}};
    // Parallel quorum inserts (the default where the setting exists) leave
    // a sequentially consistent read free to miss an acknowledged write:
    // one quorum INSERT at a time, as on 18.16.
    if (auto p = uint_field(found.front(), "p"); p && *p > 0)
        repl.settings.push_back({"insert_quorum_parallel", "0"});
    co_return std::tuple{error_code{}, std::move(repl)};
}

CHSTATE_DECL op<bool> has_every_table(session& s, const resolved& r, diagnostics& diag) {
    const table_names& t = r.sql.tables();
    std::vector<std::string> names{t.state_name, t.lock_name};
    if (r.lock == lock_protocol::strict)
        names.push_back(t.grant_name);
    auto [ec, n] = co_await s.count(r.sql.count_existing_tables(names), diag);
    co_return std::tuple{ec, !ec && n == names.size()};
}

CHSTATE_DECL op<> create_schema(session& s, const resolved& r, diagnostics& diag) {
    const statements& sql = r.sql;
    const bool cluster = sql.replicated().enabled();
    std::vector<statement> ddl{sql.create_database(), sql.create_state_table(), sql.create_lock_table()};
    if (r.lock == lock_protocol::strict)
        ddl.push_back(sql.create_grant_table());
    if (cluster) {
        auto [ec, all_there] = co_await has_every_table(s, r, diag);
        if (ec)
            co_return std::tuple{ec};
        if (all_there)
            co_return std::tuple{error_code{}}; // no ON CLUSTER wait for every replica
    }
    bool timed_out = false;
    for (statement& st : ddl) {
        if (cluster)
            st.settings.push_back({"distributed_ddl_task_timeout",
                                   std::to_string(std::max<long long>(1, s.options().cluster.ddl_timeout.count()))});
        auto [ec] = co_await s.execute(std::move(st), diag);
        if (cluster && ec == make_clickhouse_error(clickhouse_code::timeout_exceeded)) {
            // A replica did not run it in time (it is down); the rest did,
            // and it will from the DDL queue when it is back.
            timed_out = true;
            continue;
        }
        // A concurrent creator may win the race between IF NOT EXISTS and CREATE.
        if (ec && ec != make_clickhouse_error(clickhouse_code::table_already_exists) &&
            ec != make_clickhouse_error(clickhouse_code::database_already_exists))
            co_return std::tuple{ec};
    }
    if (timed_out) {
        const std::string why = diag.message;
        auto [ec, all_there] = co_await has_every_table(s, r, diag);
        if (ec)
            co_return std::tuple{ec};
        if (!all_there)
            co_return std::tuple{fail(diag, errc::replicas_unavailable,
                                      "creating the tables ON CLUSTER " + s.options().cluster.name +
                                          " did not finish within " +
                                          std::to_string(s.options().cluster.ddl_timeout.count()) +
                                          " s (cluster_options::ddl_timeout), and the connected replica lacks "
                                          "some: " + why)};
    }
    co_return std::tuple{error_code{}};
}

CHSTATE_DECL op<> check_grant_deduplication(session& s, const resolved& r, diagnostics& diag) {
    const statements& sql = r.sql;
    const std::string& table = sql.tables().grant;
    auto [ec, found] = co_await s.rows(sql.select_grant_engine(), diag);
    if (ec)
        co_return std::tuple{ec};
    const auto engine = found.empty() ? std::nullopt : string_field(found.front(), "engine");
    const auto engine_full = found.empty() ? std::nullopt : string_field(found.front(), "engine_full");
    if (!engine || !engine_full)
        co_return std::tuple{fail(diag, errc::protocol_error,
                                  "the strict lock's grant table " + table + " is not in system.tables")};
    const bool replicated = engine->starts_with("Replicated");
    const std::string window_name =
        replicated ? "replicated_deduplication_window" : "non_replicated_deduplication_window";
    const std::string fix = "ALTER TABLE " + table +
                            (sql.replicated().enabled() ? " ON CLUSTER " + quote_identifier(sql.replicated().cluster) : "") +
                            " MODIFY SETTING " + window_name + " = " +
                            std::to_string(statements::grant_deduplication_window);
    const std::string why = "; without it two clients can be granted the same token and both write";
    if (!engine->ends_with("MergeTree"))
        co_return std::tuple{fail(diag, errc::invalid_configuration,
                                  "the strict lock's grant table " + table + " has engine " + *engine +
                                      ", which does not deduplicate inserts" + why +
                                      " (drop it: chstate creates a MergeTree with deduplication when absent)")};
    auto window = engine_setting(*engine_full, window_name);
    std::string source = "as the table states it";
    if (!window) {
        auto [sec, setting] = co_await s.rows(statements::select_merge_tree_setting(window_name), diag);
        if (sec)
            co_return std::tuple{sec};
        if (!setting.empty())
            window = uint_field(setting.front(), "value");
        source = "the server's MergeTree default; the table does not state it";
    }
    if (!window || *window < min_grant_deduplication_window)
        co_return std::tuple{fail(diag, errc::invalid_configuration,
                                  "the strict lock's grant table " + table + " does not deduplicate inserts: " +
                                      window_name + " = " + (window ? std::to_string(*window) : "unknown") + " (" +
                                      source + "), at least " + std::to_string(min_grant_deduplication_window) +
                                      " is needed" + why + ". Fix: " + fix)};
    co_return std::tuple{error_code{}};
}

CHSTATE_DECL op<> ready(session& s, diagnostics& diag) {
    if (s.known())
        co_return std::tuple{error_code{}};
    std::string version;
    auto [ec] = co_await s.execute(
        statements::select_version(),
        [&](std::string_view chunk) {
            version.append(chunk);
            if (version.size() > 256) // "18.16.1\n": anything longer is not a version
                return fail(diag, errc::protocol_error, "the server's version() reply is over 256 bytes");
            return error_code{};
        },
        diag);
    if (ec)
        co_return std::tuple{ec};
    while (!version.empty() && (version.back() == '\n' || version.back() == '\r'))
        version.pop_back();
    replication repl;
    if (!s.options().cluster.name.empty()) {
        auto [cec, learnt] = co_await learn_replication(s, diag);
        if (cec)
            co_return std::tuple{cec};
        repl = std::move(learnt);
    }
    const store_options& o = s.options();
    const auto features = server_features::from_version(version);
    auto r = std::make_shared<resolved>(resolved{
        .sql = statements(table_names(o.schema, o.table), features, o.versions == write_versions::monotonic,
                          std::move(repl)),
        .lock = choose_lock_protocol(o.lock.mode, s.eng().traits().embedded_engine, features),
    });
    // Sent before the session knows the server: the DDL and its checks go
    // without the cluster's quorum settings, which are for reads and writes.
    if (auto [dec] = co_await create_schema(s, *r, diag); dec)
        co_return std::tuple{dec};
    if (r->lock == lock_protocol::strict)
        if (auto [gec] = co_await check_grant_deduplication(s, *r, diag); gec)
            co_return std::tuple{gec};
    s.settle(std::move(r));
    co_return std::tuple{error_code{}};
}

} // namespace chstate::detail
