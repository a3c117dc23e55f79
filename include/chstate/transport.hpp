// chstate/transport.hpp — what the store asks of a transport.
//
// A transport executes one statement and streams back the result bytes. It
// knows nothing of states, locks or versions: the store builds every
// statement (detail/statements.hpp) and parses every reply (detail/rows.hpp,
// detail/row_binary.hpp).
//
// Transport concept. For a transport `t`:
//
//   t.get_executor()
//       The executor the store runs its operations on by default.
//
//   t.async_execute(const statement& stmt, result_sink sink,
//                   diagnostics& diag, CompletionToken&& token)
//       Sends `stmt`; passes the reply body to `sink` in one or more chunks,
//       in order; completes with void(error_code). On failure the code is
//       a chstate::errc (connection_failed, timeout, protocol_error, …) or a
//       ClickHouse error (category clickhouse_category(), value = the
//       server's code), and `diag.message` holds the server's message
//       (never credentials). If `sink` returns an error the statement is
//       abandoned and the operation completes with that error.
//       `stmt`, `sink` and `diag` must stay valid until completion.
//       The handler runs on its associated executor, and until it has run
//       the operation keeps outstanding work on that executor (Asio's rule
//       for asynchronous operations):
//       a blocking store call runs an io_context of its own only until its
//       operation has no work left. Per-operation cancellation is honoured
//       where the transport can (documented per transport).
//
// Optional: `static constexpr bool binds_parameters = true` declares that
// the transport delivers {name:Type} values itself on every server version
// (http_transport sends them in the request body); otherwise, for servers
// without query parameters, the store writes them as quoted literals.
// `static constexpr bool embedded_engine = true` declares the embedded
// engine, where lock_mode::automatic runs the strict lock (config.hpp).
//
// A transport that knows these only at run time (any_transport) instead
// has `transport_traits traits() const`.
//
// Implementations: chdb_transport (transport/chdb.hpp, the embedded engine),
// http_transport (transport/http.hpp), simulated_transport
// (testing/simulated.hpp); any_transport (any_transport.hpp) holds any
// of them.
#pragma once

#include <chstate/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/deferred.hpp>

#include <cctype>
#include <concepts>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chstate {

namespace asio = boost::asio;

/// A named query parameter, written `{name:Type}` in the statement text.
/// A disengaged value is SQL NULL (for Nullable types).
struct parameter {
    std::string name{};
    std::string type{};
    std::optional<std::string> value{};
};

/// A ClickHouse setting for one statement: `name` is lower-case letters,
/// digits and '_'; `value` is its text.
struct setting {
    std::string name{};
    std::string value{};
};

/// One statement, ready for a transport.
struct statement {
    /// SQL text; values appear only as {name:Type} placeholders, or already
    /// quoted as literals for servers without query parameters.
    std::string sql{};
    /// Bound values for the placeholders.
    std::vector<parameter> parameters{};
    /// Output format the reply is read in ("JSONEachRow", "TabSeparated"); empty: none.
    std::string format{};
    /// Rows sent after the statement text, in the format the text names
    /// (INSERT … FORMAT JSONEachRow). Empty for most statements.
    std::string data{};
    /// True when sending the statement twice does the same as once, so a
    /// transport may resend it after a failure on a reused connection.
    bool idempotent = false;
    /// Settings for this statement alone. The store's cluster mode sends
    /// insert_quorum, insert_quorum_timeout and select_sequential_consistency
    /// (config.hpp, cluster_options). A transport that cannot apply a setting
    /// fails the statement with errc::unsupported instead of running it
    /// without (http_transport sends them as URL parameters; chDB and the
    /// simulator have no replicas and refuse any).
    std::vector<setting> settings{};
    /// What the statement is for, e.g. "state.select" or "grant.claim"
    /// (detail/statements.hpp names every statement the store sends): for
    /// tests that expect statements, and for messages. Never sent.
    std::string name{};
    /// True when the reply can be as large as the table (get_all reads every
    /// state): the transport must hand it to the sink in pieces as they
    /// arrive, holding at most a piece. False: the reply is bounded by what
    /// the operation gives its caller anyway (one state, the ids listed, a
    /// batch's versions), so a transport may read it whole when that is
    /// cheaper — chdb_transport then makes one buffered chdb_query call, the
    /// engine's cheapest, instead of its streaming calls.
    bool streamed_reply = false;
};

/// True for a statement that changes stored data (INSERT, ALTER … DELETE,
/// DELETE, TRUNCATE). A transport that loses such a statement's reply after
/// sending it completes with errc::outcome_unknown: the write may have
/// landed.
inline bool writes_data(const statement& s) {
    std::size_t i = s.sql.find_first_not_of(" \t\r\n(");
    if (i == std::string::npos)
        return false;
    auto starts = [&](std::string_view word) {
        if (s.sql.size() - i < word.size())
            return false;
        for (std::size_t k = 0; k < word.size(); ++k)
            if ((s.sql[i + k] & ~0x20) != word[k])
                return false;
        return s.sql.size() - i == word.size() || !std::isalnum(static_cast<unsigned char>(s.sql[i + word.size()]));
    };
    return starts("INSERT") || starts("ALTER") || starts("DELETE") || starts("TRUNCATE");
}

/// Receives reply bytes. Return a non-zero error_code to abandon the statement.
using result_sink = std::function<error_code(std::string_view chunk)>;

/// What the store needs to know about a transport beyond the concept.
struct transport_traits {
    /// The transport delivers {name:Type} values itself on every server
    /// version (transport.hpp).
    bool binds_parameters = false;
    /// The transport is the embedded engine (no Python Meltano process can
    /// share its tables): lock_mode::automatic runs the strict protocol.
    bool embedded_engine = false;
};

/// The traits a transport type declares (its static members; false where absent).
template <class T>
constexpr transport_traits traits_of() {
    transport_traits t;
    if constexpr (requires { T::binds_parameters; })
        t.binds_parameters = T::binds_parameters;
    if constexpr (requires { T::embedded_engine; })
        t.embedded_engine = T::embedded_engine;
    return t;
}

/// See the header comment.
template <class T>
concept transport = requires(T& t, const statement& s, result_sink sink, diagnostics& d) {
    { t.get_executor() } -> std::convertible_to<asio::any_io_executor>;
    t.async_execute(s, sink, d, asio::deferred);
};

} // namespace chstate
