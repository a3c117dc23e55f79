// chstate/error.hpp — error codes, the server's diagnostics, and the exception type.
//
// Every asynchronous operation completes with a boost::system::error_code.
// Two categories are used:
//   * chstate::error_category()      — chstate's own conditions (chstate::errc);
//   * chstate::clickhouse_category() — a ClickHouse server error; value() is
//     ClickHouse's numeric code (46 UNKNOWN_FUNCTION, 81 UNKNOWN_DATABASE, …).
// chstate::errc is an error *condition*: a ClickHouse code maps onto the
// matching condition where one exists, so `ec == chstate::errc::unknown_database`
// holds whichever category produced `ec`. Make codes with make_error_code().
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace chstate {

using boost::system::error_code;

/// chstate's own error conditions.
enum class errc {
    ok = 0,
    invalid_argument,       ///< bad input: empty state id, non-object JSON, …
    invalid_configuration,  ///< a URI or setting that cannot be used
    corrupt_state,          ///< a row whose JSON cannot be read back
    state_not_found,        ///< the operation needs a state that does not exist
    state_id_locked,        ///< the lock could not be acquired before the timeout
    lock_lost,              ///< the lease was no longer held when it was used or released
    engine_unavailable,     ///< the embedded engine could not be loaded or opened
    server_error,           ///< ClickHouse refused the statement (see diagnostics)
    authentication_failed,  ///< wrong user or password
    unknown_database,       ///< the database does not exist
    connection_failed,      ///< could not reach the server
    timeout,                ///< an operation exceeded its time limit
    protocol_error,         ///< the reply could not be understood
    truncated_response,     ///< the reply ended early or carried an exception
    unsupported,            ///< the server lacks a feature the operation needs
    reply_too_large,        ///< a reply exceeded store_options::limits (config.hpp)
    outcome_unknown,        ///< a write was sent, then the reply was lost: it may have landed
    /// cluster mode: too few live replicas for the write's quorum, the
    /// coordination service (ZooKeeper) unreachable, or the connected
    /// replica behind the quorum; nothing was written
    replicas_unavailable,
    /// a callback of the caller's (get_all's visitor) threw; diagnostics
    /// carry its message
    callback_failed,
    /// a blocking call made from a thread the operation itself needs (one
    /// of the transport's own threads), or one that would wait on a
    /// simulated clock nothing advances (manual_clock.hpp): refused at once
    /// instead of hanging
    would_deadlock,
};

namespace detail {

class chstate_category_impl final : public boost::system::error_category {
public:
    constexpr chstate_category_impl() noexcept : error_category(0x63687374617465ULL) {}
    const char* name() const noexcept override { return "chstate"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::ok: return "success";
        case errc::invalid_argument: return "invalid argument";
        case errc::invalid_configuration: return "invalid configuration";
        case errc::corrupt_state: return "stored state cannot be read back";
        case errc::state_not_found: return "no state stored for this id";
        case errc::state_id_locked: return "the state id's lock was not acquired before the timeout";
        case errc::lock_lost: return "the lock is no longer held";
        case errc::engine_unavailable: return "the embedded ClickHouse engine is unavailable";
        case errc::server_error: return "ClickHouse reported an error";
        case errc::authentication_failed: return "authentication failed";
        case errc::unknown_database: return "unknown database";
        case errc::connection_failed: return "could not connect to ClickHouse";
        case errc::timeout: return "operation timed out";
        case errc::protocol_error: return "malformed reply from ClickHouse";
        case errc::truncated_response: return "reply from ClickHouse was truncated or carried an exception";
        case errc::unsupported: return "not supported by this ClickHouse server";
        case errc::reply_too_large: return "reply from ClickHouse exceeds the configured limit";
        case errc::outcome_unknown: return "the write may or may not have landed (its reply was lost)";
        case errc::replicas_unavailable: return "not enough ClickHouse replicas available";
        case errc::callback_failed: return "a callback passed to the operation threw";
        case errc::would_deadlock: return "a blocking call would never return";
        }
        return "unknown chstate error";
    }
};

class clickhouse_category_impl final : public boost::system::error_category {
public:
    constexpr clickhouse_category_impl() noexcept : error_category(0x636c69636b686f75ULL) {}
    const char* name() const noexcept override { return "clickhouse"; }
    std::string message(int ev) const override {
        return "ClickHouse error code " + std::to_string(ev);
    }
    boost::system::error_condition default_error_condition(int ev) const noexcept override;
};

inline constexpr chstate_category_impl chstate_category_instance{};
inline constexpr clickhouse_category_impl clickhouse_category_instance{};

} // namespace detail

/// The category of chstate::errc values.
inline const boost::system::error_category& error_category() noexcept {
    return detail::chstate_category_instance;
}

/// The category of ClickHouse server error codes.
inline const boost::system::error_category& clickhouse_category() noexcept {
    return detail::clickhouse_category_instance;
}

inline error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), error_category()};
}

inline boost::system::error_condition make_error_condition(errc e) noexcept {
    return {static_cast<int>(e), error_category()};
}

/// An error_code for ClickHouse's numeric error code `code`. An exception
/// with code 0 is errc::server_error: an error_code of 0 means success.
inline error_code make_clickhouse_error(int code) noexcept {
    if (code == 0)
        return make_error_code(errc::server_error);
    return {code, clickhouse_category()};
}

/// Well-known ClickHouse error codes the library reacts to.
namespace clickhouse_code {
inline constexpr int unknown_table = 60;
inline constexpr int table_already_exists = 57;
inline constexpr int database_already_exists = 82;
inline constexpr int unknown_database = 81;
inline constexpr int unknown_user = 192;
inline constexpr int wrong_password = 193;
inline constexpr int required_password = 194;
inline constexpr int authentication_failed = 516;
inline constexpr int timeout_exceeded = 159;
inline constexpr int syntax_error = 62;
// Replicated tables (cluster mode)
inline constexpr int table_is_read_only = 242;           ///< no ZooKeeper session
inline constexpr int too_few_live_replicas = 285;        ///< fewer live replicas than insert_quorum
inline constexpr int unsatisfied_quorum_for_previous_write = 286; ///< another quorum insert is under way
inline constexpr int replica_is_not_in_quorum = 289;     ///< this replica lacks a quorum-written part
inline constexpr int unknown_status_of_insert = 319;     ///< the quorum timed out: the write may still land
inline constexpr int keeper_exception = 999;             ///< a ZooKeeper request failed
} // namespace clickhouse_code

inline boost::system::error_condition
detail::clickhouse_category_impl::default_error_condition(int ev) const noexcept {
    switch (ev) {
    case clickhouse_code::unknown_user:
    case clickhouse_code::wrong_password:
    case clickhouse_code::required_password:
    case clickhouse_code::authentication_failed:
        return make_error_condition(errc::authentication_failed);
    case clickhouse_code::unknown_database:
        return make_error_condition(errc::unknown_database);
    case clickhouse_code::timeout_exceeded:
        return make_error_condition(errc::timeout);
    case clickhouse_code::table_is_read_only:
    case clickhouse_code::too_few_live_replicas:
    case clickhouse_code::unsatisfied_quorum_for_previous_write:
    case clickhouse_code::replica_is_not_in_quorum:
    case clickhouse_code::keeper_exception:
        return make_error_condition(errc::replicas_unavailable);
    case clickhouse_code::unknown_status_of_insert:
        return make_error_condition(errc::outcome_unknown);
    default:
        return make_error_condition(errc::server_error);
    }
}

/// Human-readable detail that accompanies an error_code: the server's own
/// message, or what chstate was doing. Never contains credentials.
struct diagnostics {
    std::string message{};
    /// Rows the last statement wrote, after deduplication and the WHERE of
    /// an INSERT … SELECT, as the engine counted them; set by transports
    /// that know it exactly (the embedded engine, the simulator), else empty.
    /// The strict lock uses it to learn a conditional INSERT's outcome
    /// without reading the grant table back.
    std::optional<std::uint64_t> written_rows{};
    void clear() noexcept {
        message.clear();
        written_rows.reset();
    }
};

/// The exception thrown by the blocking calls.
class error : public boost::system::system_error {
public:
    error(error_code ec, const std::string& what) : system_error(ec, what) {}
    explicit error(error_code ec) : system_error(ec) {}
};

/// Throws chstate::error if `ec` is set, with `detail` in the message.
inline void throw_if(error_code ec, const std::string& detail = {}) {
    if (ec) {
        if (detail.empty())
            throw error(ec);
        throw error(ec, detail);
    }
}

} // namespace chstate

template <>
struct boost::system::is_error_condition_enum<chstate::errc> : std::true_type {};
