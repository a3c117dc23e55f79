// chstate's benchmark suite: every operation beside its floor, measured
// interleaved in the same run, on the embedded engine (chDB) and on a
// ClickHouse server over HTTP. Run it with benchmarks/run, which builds it,
// starts a private server and passes Google Benchmark flags through.
//
// The floor of an operation is the identical SQL — captured from the store
// by a recording transport (recording_transport below) — sent by the
// cheapest client there is, on the calling thread, never through chstate's
// transports:
//   embedded  chDB's C API (chdb_query_with_params_n, one buffered reply) on
//             the very connection the store uses (chdb_engine::with_connection;
//             the engine runs one thread, so it has one connection);
//   server    one kept-alive blocking HTTP/1.1 socket written here (POSIX
//             sockets, nothing of Beast); values inlined as SQL literals, as a
//             minimal client for a server without query parameters would
//             (chstate instead sends them as an external table);
// plus the parse work a minimal client must do: listings split the RowBinary
// rows (state_ids keeps each id as a std::string; get and get_all parse each
// part's JSON with chstate's parse_json), set_all builds its TabSeparated body.
//
// Each BM_x benchmark alternates one chstate call and one floor call per
// iteration (the order alternates too); its reported time is chstate's and
// its counters are the medians chstate_us, floor_us and ratio. BM_floor_x
// times the floor alone. After the run a table of medians is printed (to
// stderr when --benchmark_format is json or csv, else to stdout).
//
//   CHSTATE_BENCH_SERVER_DIR  a folder made by scripts/clickhouse-server.sh
//                             start (its env file); unset: server benchmarks
//                             report an error instead of running.
//   CHSTATE_BENCH_TRACE       set: print each floor statement and its time
//                             to stderr (what an operation sends, and where
//                             its floor's time goes).
#include "test_server.hpp"

#include <benchmark/benchmark.h>

#include <chstate/chstate.hpp>
#include <chstate/detail/sql.hpp>
#include <chstate/json_text.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/thread_pool.hpp>

#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace asio = boost::asio;
using namespace chstate;

namespace {

using steady = std::chrono::steady_clock;

double seconds_since(steady::time_point t0) { return std::chrono::duration<double>(steady::now() - t0).count(); }

double median(std::vector<double> v) {
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// ---------------------------------------------------------------------------
// The recording transport: forwards to Inner, and while `on` copies every
// statement the store sends.

struct recorder {
    bool on = false;
    std::vector<statement> got;
};

template <class Inner>
struct recording_transport {
    Inner inner;
    std::shared_ptr<recorder> rec;
    static constexpr bool binds_parameters = traits_of<Inner>().binds_parameters;
    static constexpr bool embedded_engine = traits_of<Inner>().embedded_engine;

    auto get_executor() const { return inner.get_executor(); }

    template <class CompletionToken>
    auto async_execute(const statement& stmt, result_sink sink, diagnostics& diag, CompletionToken&& token) {
        if (rec->on)
            rec->got.push_back(stmt);
        return inner.async_execute(stmt, std::move(sink), diag, std::forward<CompletionToken>(token));
    }
};

// ---------------------------------------------------------------------------
// Peak RSS: VmHWM from /proc/self/status, reset by writing 5 to clear_refs.

long status_kib(const char* key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    const std::size_t n = std::strlen(key);
    while (std::getline(in, line))
        if (line.compare(0, n, key) == 0)
            return std::atol(line.c_str() + n);
    return -1;
}
/// Gives freed heap back first, so the baseline is what is in use.
void reset_peak_rss() {
    ::malloc_trim(0);
    std::ofstream("/proc/self/clear_refs") << "5";
}

// ---------------------------------------------------------------------------
// RowBinary, as a minimal client reads it.

/// A reply in one piece or in chunks: a read past the end clears `ok`
/// (a row cut by a chunk boundary), it never throws.
struct rb_reader {
    const char* p;
    const char* e;
    bool ok = true;
    explicit rb_reader(std::string_view s) : p(s.data()), e(s.data() + s.size()) {}
    bool done() const { return p >= e; }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (int shift = 0; p < e; shift += 7) {
            auto b = static_cast<unsigned char>(*p++);
            v |= std::uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80))
                return v;
        }
        ok = false;
        return 0;
    }
    std::string_view str() {
        std::uint64_t n = varint();
        if (!ok || std::uint64_t(e - p) < n) {
            ok = false;
            return {};
        }
        std::string_view s(p, n);
        p += n;
        return s;
    }
    std::optional<std::string_view> nstr() {
        if (p >= e) {
            ok = false;
            return std::nullopt;
        }
        if (*p++)
            return std::nullopt;
        return str();
    }
};

void parse_part(const std::optional<std::string_view>& text) {
    if (text && !text->empty()) {
        value v = parse_json(*text);
        benchmark::DoNotOptimize(v);
    }
}

// The parse work per reply (applied to RowBinary replies only).
using reply_parser = std::function<void(std::string_view)>;
const reply_parser no_parse = [](std::string_view) {};
[[noreturn]] void truncated() { throw std::runtime_error("RowBinary reply ends inside a row"); }

const reply_parser parse_state = [](std::string_view body) {
    rb_reader r(body);
    if (r.done())
        return;
    auto a = r.nstr();
    auto b = r.nstr();
    if (!r.ok)
        truncated();
    parse_part(a);
    parse_part(b);
};
const reply_parser parse_ids = [](std::string_view body) {
    std::vector<std::string> ids;
    rb_reader r(body);
    while (!r.done()) {
        auto id = r.str();
        if (!r.ok)
            truncated();
        ids.emplace_back(id);
    }
    benchmark::DoNotOptimize(ids.data());
};
/// get_all's rows (id, partial, completed): the complete ones in `data` are
/// parsed; returns the bytes they took (the rest starts a cut row).
std::size_t parse_state_rows(std::string_view data) {
    rb_reader r(data);
    while (!r.done()) {
        const char* row = r.p;
        auto id = r.str();
        auto a = r.nstr();
        auto b = r.nstr();
        if (!r.ok)
            return std::size_t(row - data.data());
        std::string sid(id);
        parse_part(a);
        parse_part(b);
        benchmark::DoNotOptimize(sid);
    }
    return data.size();
}
const reply_parser parse_states = [](std::string_view body) {
    if (parse_state_rows(body) != body.size())
        truncated();
};

// ---------------------------------------------------------------------------
// Floor clients.

/// chDB's C API on the calling thread, on the engine's own connection.
struct chdb_floor {
    std::shared_ptr<chdb_engine> engine;

    void run(const statement& s, const reply_parser& parse, bool /*as_table*/ = false) {
        engine->with_connection([&](const chdb_engine::api& api, chdb_engine::api::connection conn) {
            std::string with_data;
            const std::string* text = &s.sql;
            if (!s.data.empty()) {
                with_data.reserve(s.sql.size() + 1 + s.data.size());
                with_data = s.sql;
                with_data += '\n';
                with_data += s.data;
                text = &with_data;
            }
            const std::string_view format = s.format.empty() ? std::string_view("TabSeparated") : s.format;
            std::vector<std::string> values;
            std::vector<const char*> np, vp;
            std::vector<std::size_t> nn, vn;
            for (const auto& p : s.parameters) {
                values.push_back(detail::escape_parameter_value(p));
                np.push_back(p.name.data());
                nn.push_back(p.name.size());
            }
            for (const auto& v : values) {
                vp.push_back(v.data());
                vn.push_back(v.size());
            }
            auto* r = api.query_with_params_n(conn, text->data(), text->size(), format.data(), format.size(), np.data(),
                                              nn.data(), vp.data(), vn.data(), s.parameters.size());
            if (!r)
                throw std::runtime_error("chDB returned no result");
            if (const char* err = api.result_error(r); err && *err) {
                std::string m = err;
                api.destroy_query_result(r);
                throw std::runtime_error("chDB floor: " + m.substr(0, 400));
            }
            if (s.format == "RowBinary")
                parse(std::string_view(api.result_buffer(r), api.result_length(r)));
            api.destroy_query_result(r);
        });
    }

    /// `s` (no parameters) through chDB's streaming API, each chunk's
    /// complete rows parsed as it arrives (rows(data) returns the bytes
    /// they took; a cut row waits for the next chunk): a minimal client
    /// that never holds the whole reply.
    void run_streaming(const statement& s, const std::function<std::size_t(std::string_view)>& rows) {
        if (!s.parameters.empty() || !s.data.empty())
            throw std::runtime_error("run_streaming: a statement without parameters or data only");
        engine->with_connection([&](const chdb_engine::api& api, chdb_engine::api::connection conn) {
            auto check = [&](void* r) {
                if (!r)
                    throw std::runtime_error("chDB returned no result");
                if (const char* err = api.result_error(r); err && *err)
                    throw std::runtime_error(std::string("chDB floor: ") + err);
            };
            auto* stream = api.stream_query_with_params_n(conn, s.sql.data(), s.sql.size(), s.format.data(),
                                                          s.format.size(), nullptr, nullptr, nullptr, nullptr, 0);
            struct done {
                const chdb_engine::api& api;
                void* r;
                ~done() {
                    if (r)
                        api.destroy_query_result(r);
                }
            } guard{api, stream};
            check(stream);
            std::string carry;
            for (;;) {
                auto* chunk = api.stream_fetch_result(conn, stream);
                done chunk_guard{api, chunk};
                check(chunk);
                std::string_view data(api.result_buffer(chunk), api.result_length(chunk));
                if (data.empty())
                    break;
                if (carry.empty()) {
                    std::size_t used = rows(data);
                    carry.assign(data.substr(used));
                } else {
                    carry.append(data);
                    carry.erase(0, rows(carry));
                }
            }
            if (!carry.empty())
                truncated();
        });
    }
};

/// chDB's streaming API on the engine's connection, every chunk dropped:
/// what the engine itself holds while it streams a reply (get_all's memory).
void chdb_stream_only(chdb_engine& engine, const statement& s) {
    engine.with_connection([&](const chdb_engine::api& api, chdb_engine::api::connection conn) {
        const std::string_view format = s.format.empty() ? std::string_view("TabSeparated") : s.format;
        auto* stream = api.stream_query_with_params_n(conn, s.sql.data(), s.sql.size(), format.data(), format.size(),
                                                      nullptr, nullptr, nullptr, nullptr, 0);
        if (!stream)
            throw std::runtime_error("chDB returned no result");
        for (;;) {
            auto* chunk = api.stream_fetch_result(conn, stream);
            std::size_t len = chunk ? api.result_length(chunk) : 0;
            if (chunk)
                api.destroy_query_result(chunk);
            if (len == 0)
                break;
        }
        api.destroy_query_result(stream);
    });
}

/// One kept-alive blocking HTTP/1.1 connection over a POSIX socket.
class http_floor {
public:
    std::string host, user, password;
    std::uint16_t port = 0;

    ~http_floor() { close(); }

    /// as_table: values sent as chstate's http_transport sends them (an
    /// external table in a multipart body) instead of as SQL literals.
    void run(const statement& s0, const reply_parser& parse, bool as_table = false) {
        const statement* s = &s0;
        statement inlined;
        std::string bound_body, content_type;
        if (as_table && !s0.parameters.empty()) {
            diagnostics d;
            detail::parameter_table bound;
            if (auto ec = detail::bind_parameters_as_table(s0, "_chstate_values", bound, d))
                throw std::runtime_error("bind_parameters_as_table: " + d.message);
            inlined.sql = bound.sql;
            inlined.format = s0.format;
            const std::string boundary = "chstate-bench-boundary";
            extra_query_ = "&_chstate_values_structure=";
            url_encode(extra_query_, bound.structure);
            extra_query_ += "&_chstate_values_format=TabSeparated";
            content_type = "multipart/form-data; boundary=" + boundary;
            bound_body = "--" + boundary +
                         "\r\nContent-Disposition: form-data; name=\"_chstate_values\"; filename=\"_chstate_values\"\r\n"
                         "Content-Type: application/octet-stream\r\n\r\n" +
                         bound.row + "\r\n--" + boundary + "--\r\n";
            s = &inlined;
        } else if (!s0.parameters.empty()) {
            inlined = s0;
            diagnostics d;
            if (auto ec = detail::inline_parameters(inlined, d))
                throw std::runtime_error("inline_parameters: " + d.message);
            s = &inlined;
        }
        // The same server settings as chstate's requests: the reply format,
        // and wait_end_of_query=1 for RowBinary (18.16 sends a large reply
        // faster so).
        std::string target = "/?";
        auto sep = [&target] {
            if (target.size() > 2)
                target += '&';
        };
        if (!s->format.empty()) {
            sep();
            target += "default_format=" + s->format;
        }
        if (s->format == "RowBinary")
            target += "&wait_end_of_query=1";
        const std::string* body = &s->sql;
        if (!bound_body.empty()) {
            sep();
            target += "query=";
            url_encode(target, s->sql);
            target += extra_query_;
            body = &bound_body;
        } else if (!s->data.empty()) {
            sep();
            target += "query=";
            url_encode(target, s->sql);
            body = &s->data;
        }
        head_.clear();
        head_ += "POST ";
        head_ += target;
        head_ += " HTTP/1.1\r\nHost: ";
        head_ += host + ":" + std::to_string(port);
        head_ += "\r\nX-ClickHouse-User: ";
        head_ += user;
        head_ += "\r\nX-ClickHouse-Key: ";
        head_ += password;
        if (!content_type.empty()) {
            head_ += "\r\nContent-Type: ";
            head_ += content_type;
        }
        head_ += "\r\nContent-Length: ";
        head_ += std::to_string(body->size());
        head_ += "\r\n\r\n";
        // The server drops an idle connection after its keep-alive timeout
        // (3 s by default): reconnect before that rather than fail.
        if (fd_ >= 0 && seconds_since(last_) > 2.0)
            close();
        for (int attempt = 0;; ++attempt) {
            if (fd_ < 0)
                connect();
            if (exchange(*body))
                break;
            close();
            if (attempt == 1)
                throw std::runtime_error("HTTP floor: the server closed the connection");
        }
        last_ = steady::now();
        if (status_ != 200)
            throw std::runtime_error("HTTP floor: status " + std::to_string(status_) + ": " + reply_.substr(0, 400));
        if (s->format == "RowBinary")
            parse(reply_);
    }

private:
    static void url_encode(std::string& out, std::string_view v) {
        static const char* hex = "0123456789ABCDEF";
        for (unsigned char c : v) {
            if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
                out += char(c);
            } else {
                out += '%';
                out += hex[c >> 4];
                out += hex[c & 15];
            }
        }
    }

    void connect() {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
            throw std::runtime_error("HTTP floor: cannot resolve " + host);
        for (addrinfo* a = res; a; a = a->ai_next) {
            fd_ = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (fd_ < 0)
                continue;
            if (::connect(fd_, a->ai_addr, a->ai_addrlen) == 0)
                break;
            ::close(fd_);
            fd_ = -1;
        }
        ::freeaddrinfo(res);
        if (fd_ < 0)
            throw std::runtime_error("HTTP floor: cannot connect to " + host + ":" + std::to_string(port));
        int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        in_.clear();
        pos_ = 0;
    }

    void close() {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = -1;
    }

    bool send_all(std::string_view a, std::string_view b) {
        iovec iov[2] = {{const_cast<char*>(a.data()), a.size()}, {const_cast<char*>(b.data()), b.size()}};
        int n = 2, i = 0;
        while (i < n) {
            ssize_t w = ::writev(fd_, iov + i, n - i);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                return false;
            }
            std::size_t left = std::size_t(w);
            while (i < n && left >= iov[i].iov_len) {
                left -= iov[i].iov_len;
                ++i;
            }
            if (i < n) {
                iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
                iov[i].iov_len -= left;
            }
        }
        return true;
    }

    /// Reads more bytes into in_; false on EOF or error.
    bool fill() {
        if (pos_ > 0 && pos_ == in_.size()) {
            in_.clear();
            pos_ = 0;
        }
        const std::size_t old = in_.size();
        in_.resize(old + 65536);
        ssize_t r;
        do
            r = ::recv(fd_, in_.data() + old, 65536, 0);
        while (r < 0 && errno == EINTR);
        in_.resize(old + (r > 0 ? std::size_t(r) : 0));
        return r > 0;
    }

    /// The line ending at the next CRLF (without it), consumed.
    std::string_view line() {
        for (;;) {
            auto at = in_.find("\r\n", pos_);
            if (at != std::string::npos) {
                std::string_view l(in_.data() + pos_, at - pos_);
                pos_ = at + 2;
                return l;
            }
            if (!fill())
                throw std::runtime_error("HTTP floor: connection closed mid-reply");
        }
    }

    void take(std::size_t n) {
        while (in_.size() - pos_ < n)
            if (!fill())
                throw std::runtime_error("HTTP floor: connection closed mid-body");
        reply_.append(in_, pos_, n);
        pos_ += n;
    }

    /// false: the connection was closed before any reply byte (retry).
    bool exchange(const std::string& body) {
        if (!send_all(head_, body))
            return false;
        if (pos_ == in_.size() && !fill())
            return false;
        reply_.clear();
        std::string_view status = line();
        status_ = status.size() > 12 ? std::atoi(std::string(status.substr(9, 3)).c_str()) : 0;
        std::optional<std::size_t> length;
        bool chunked = false, close_after = false;
        for (;;) {
            std::string_view h = line();
            if (h.empty())
                break;
            auto colon = h.find(':');
            if (colon == std::string_view::npos)
                continue;
            std::string name(h.substr(0, colon));
            std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
            std::string_view v = h.substr(colon + 1);
            while (!v.empty() && v.front() == ' ')
                v.remove_prefix(1);
            if (name == "content-length")
                length = std::strtoull(std::string(v).c_str(), nullptr, 10);
            else if (name == "transfer-encoding")
                chunked = v.find("chunked") != std::string_view::npos;
            else if (name == "connection")
                close_after = v.find("close") != std::string_view::npos;
        }
        if (chunked) {
            for (;;) {
                std::size_t n = std::strtoull(std::string(line()).c_str(), nullptr, 16);
                if (n == 0) {
                    while (!line().empty()) {
                    }
                    break;
                }
                take(n);
                line();
            }
        } else if (length) {
            take(*length);
        } else {
            while (fill()) {
            }
            reply_.append(in_, pos_);
            pos_ = in_.size();
            close_after = true;
        }
        if (close_after)
            close();
        return true;
    }

    int fd_ = -1;
    steady::time_point last_{};
    std::string head_, in_, reply_, extra_query_;
    std::size_t pos_ = 0;
    int status_ = 0;
};

// ---------------------------------------------------------------------------
// Engines.

struct embedded_ctx {
    static constexpr const char* name = "embedded";
    using inner_transport = chdb_transport;
    std::filesystem::path dir;
    std::shared_ptr<chdb_engine> engine;
    chdb_floor floor;
    std::string problem;

    embedded_ctx() {
        dir = std::filesystem::temp_directory_path() / ("chstate-bench-" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir);
        try {
            // One engine thread: the store's statements and the floor's use
            // the one connection.
            engine = chdb_engine::open({.path = dir.string(), .library = {}, .threads = 1});
            floor.engine = engine;
        } catch (const std::exception& e) {
            problem = std::string("chDB unavailable: ") + e.what();
        }
    }
    ~embedded_ctx() {
        floor.engine.reset();
        engine.reset();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    chdb_transport make_inner() { return chdb_transport(engine); }
};

struct server_ctx {
    static constexpr const char* name = "server";
    using inner_transport = http_transport;
    asio::thread_pool threads{1};
    http_options options;
    http_floor floor;
    std::string problem;

    server_ctx() {
        const char* dir = std::getenv("CHSTATE_BENCH_SERVER_DIR");
        if (!dir || !*dir) {
            problem = "CHSTATE_BENCH_SERVER_DIR is not set (benchmarks/run starts a server and sets it)";
            return;
        }
        try {
            options = bench::test_server_options(dir);
        } catch (const std::exception& e) {
            problem = e.what();
            return;
        }
        options.pool_size = 1; // one kept-alive connection per store, as the floor
        options.request_timeout = std::chrono::seconds(600);
        floor.host = options.host;
        floor.port = options.port;
        floor.user = options.user;
        floor.password = options.password;
        try {
            floor.run({"DROP DATABASE IF EXISTS bench", {}, {}, {}, true}, no_parse);
        } catch (const std::exception& e) {
            problem = std::string("server unavailable: ") + e.what();
        }
    }
    ~server_ctx() { threads.join(); }
    http_transport make_inner() { return http_transport(threads.get_executor(), options); }
};

// ---------------------------------------------------------------------------
// Results for the table.

struct result_row {
    std::string op, engine;
    std::vector<double> chstate, floor, floor_alt; // seconds per iteration
    std::string alt_label;
    double parts_min = 1e18, parts_max = 0;
    std::string note;
    long peak_kib = -1, floor_peak_kib = -1, stream_peak_kib = -1;
    std::string extra;
};
std::vector<std::string> g_order;
std::map<std::string, result_row> g_results;
std::deque<std::string> g_messages; // SkipWithError keeps the pointer in some versions

result_row& result_for(const std::string& op, const char* engine) {
    std::string key = op + "/" + engine;
    auto [it, fresh] = g_results.try_emplace(key);
    if (fresh) {
        g_order.push_back(key);
        it->second.op = op;
        it->second.engine = engine;
    }
    return it->second;
}

void skip(benchmark::State& st, std::string why) {
    g_messages.push_back(std::move(why));
    st.SkipWithError(g_messages.back().c_str());
}

// ---------------------------------------------------------------------------
// The benchmarks of one engine.

state sample_state(const std::string& id, int i = 0) {
    return state{id,
                 chstate::object{{"bookmarks", chstate::object{{"orders", chstate::object{{"replication_key", "updated_at"},
                                                                                           {"replication_key_value",
                                                                                            "2026-11-30T12:00:00Z"},
                                                                                           {"n", i}}}}}},
                 chstate::object{{"singer_state", chstate::object{{"done", true}}}}};
}

std::string seq_id(const char* prefix, int i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s-%06d:target-ch", prefix, i);
    return buf;
}

template <class Ctx>
struct engine_bench {
    using transport_t = recording_transport<typename Ctx::inner_transport>;
    using store_t = basic_state_store<transport_t>;
    struct entry {
        std::shared_ptr<recorder> rec;
        std::unique_ptr<store_t> store;
    };

    Ctx& ctx;
    std::map<std::string, entry> stores;
    std::map<std::string, std::vector<statement>> captures;
    std::map<std::string, bool> seeded;

    explicit engine_bench(Ctx& c) : ctx(c) {}

    entry& store(const std::string& table, write_versions v = write_versions::monotonic,
                 lock_mode m = lock_mode::automatic) {
        std::string key = table + "|" + std::to_string(int(v)) + "|" + std::to_string(int(m));
        auto it = stores.find(key);
        if (it != stores.end())
            return it->second;
        store_options o;
        o.schema = "bench";
        o.table = table;
        o.versions = v;
        o.lock.mode = m;
        entry e;
        e.rec = std::make_shared<recorder>();
        e.store = std::make_unique<store_t>(transport_t{ctx.make_inner(), e.rec}, o);
        e.store->ensure_schema();
        return stores.emplace(key, std::move(e)).first->second;
    }

    /// The statements `op` sends, recorded once per key (the call itself is not timed).
    const std::vector<statement>& capture(const std::string& key, entry& e, const std::function<void()>& op) {
        auto it = captures.find(key);
        if (it != captures.end())
            return it->second;
        e.rec->got.clear();
        e.rec->on = true;
        try {
            op();
        } catch (...) {
            e.rec->on = false;
            throw;
        }
        e.rec->on = false;
        return captures.emplace(key, std::move(e.rec->got)).first->second;
    }

    void replay(const std::vector<statement>& ss, const reply_parser& parse = no_parse) {
        static const bool trace = std::getenv("CHSTATE_BENCH_TRACE") != nullptr;
        for (const auto& s : ss) {
            auto t0 = steady::now();
            ctx.floor.run(s, parse);
            if (trace)
                std::fprintf(stderr, "floor %s %9.3f ms  %.100s%s (%zu params, %zu data bytes)\n", Ctx::name,
                             seconds_since(t0) * 1e3, s.sql.c_str(), s.sql.size() > 100 ? "…" : "",
                             s.parameters.size(), s.data.size());
        }
    }

    /// A statement of our own, through the floor client; returns the reply.
    std::string admin(const std::string& sql) {
        std::string out;
        ctx.floor.run({sql, {}, "RowBinary", {}, false}, [&](std::string_view b) { out.assign(b); });
        return out;
    }
    std::uint64_t count(const std::string& sql) {
        std::string r = admin(sql);
        if (r.size() < 8)
            throw std::runtime_error("no count from: " + sql);
        std::uint64_t n;
        std::memcpy(&n, r.data(), 8);
        return n;
    }

    /// `n` states in table `table`, written with set_all in batches of 10,000.
    void seed(const std::string& table, int n, const char* prefix) {
        if (seeded[table])
            return;
        auto& e = store(table);
        for (int from = 0; from < n; from += 10000) {
            std::vector<state> batch;
            for (int i = from; i < std::min(n, from + 10000); ++i)
                batch.push_back(sample_state(seq_id(prefix, i), i));
            e.store->set_all(std::move(batch));
        }
        seeded[table] = true;
    }

    // The timing loop: one chstate call and one floor call per iteration,
    // the order alternating; `between` runs untimed after each iteration.
    struct hooks {
        std::function<void()> before_chstate, after_chstate, before_floor, after_floor, between;
        /// Timed after the pair when set: a second floor, named by
        /// alt_label in the table and alt_counter among the counters (the
        /// server's floor with values bound as chstate binds them; set_all's
        /// floor with chstate's own statements).
        std::function<void()> floor_alt;
        std::string alt_label = "values as external table", alt_counter = "floor_ext_table_us";
    };
    void interleave(benchmark::State& st, const std::string& op, bool floor_only, const std::function<void()>& ch,
                    const std::function<void()>& fl, const hooks& h = {}) {
        std::vector<double> a, b, c;
        std::uint64_t i = 0;
        auto run_ch = [&] {
            if (h.before_chstate)
                h.before_chstate();
            auto t0 = steady::now();
            ch();
            double t = seconds_since(t0);
            if (h.after_chstate)
                h.after_chstate();
            return t;
        };
        auto run_fl = [&] {
            if (h.before_floor)
                h.before_floor();
            auto t0 = steady::now();
            fl();
            double t = seconds_since(t0);
            if (h.after_floor)
                h.after_floor();
            return t;
        };
        for (auto _ : st) {
            if (floor_only) {
                double tf = run_fl();
                st.SetIterationTime(tf);
                b.push_back(tf);
            } else {
                double tc, tf;
                if (i++ % 2 == 0) {
                    tc = run_ch();
                    tf = run_fl();
                } else {
                    tf = run_fl();
                    tc = run_ch();
                }
                st.SetIterationTime(tc);
                a.push_back(tc);
                b.push_back(tf);
                if (h.floor_alt) {
                    auto t0 = steady::now();
                    h.floor_alt();
                    c.push_back(seconds_since(t0));
                }
            }
            if (h.between)
                h.between();
        }
        st.counters["floor_us"] = median(b) * 1e6;
        if (!floor_only) {
            st.counters["chstate_us"] = median(a) * 1e6;
            st.counters["ratio"] = median(b) > 0 ? median(a) / median(b) : 0;
            auto& r = result_for(op, Ctx::name);
            r.chstate.insert(r.chstate.end(), a.begin(), a.end());
            r.floor.insert(r.floor.end(), b.begin(), b.end());
            if (!c.empty()) {
                st.counters[h.alt_counter] = median(c) * 1e6;
                r.floor_alt.insert(r.floor_alt.end(), c.begin(), c.end());
                r.alt_label = h.alt_label;
            }
        }
    }

    /// The floor again, values bound as chstate binds them, where that differs.
    std::function<void()> alt(const std::vector<statement>& ss, const reply_parser& parse = no_parse) {
        if constexpr (std::is_same_v<Ctx, server_ctx>) {
            bool any = false;
            for (const auto& s : ss)
                any = any || !s.parameters.empty();
            if (any)
                return [this, &ss, parse] {
                    for (const auto& s : ss)
                        ctx.floor.run(s, parse, true);
                };
        }
        return {};
    }

    // --- the operations ---------------------------------------------------

    void get(benchmark::State& st, bool floor_only) {
        auto& e = store("state");
        const state s = sample_state("dev:bench");
        if (!seeded["state"]) {
            e.store->set(s);
            seeded["state"] = true;
        }
        auto& ss = capture("get", e, [&] { e.store->get("dev:bench"); });
        hooks h;
        h.floor_alt = alt(ss, parse_state);
        interleave(
            st, "BM_get", floor_only, [&] { benchmark::DoNotOptimize(e.store->get("dev:bench")); },
            [&] { replay(ss, parse_state); }, h);
    }

    void set(benchmark::State& st, bool floor_only) {
        auto& e = store("state");
        const state s = sample_state("dev:bench");
        auto& ss = capture("set", e, [&] { e.store->set(s); });
        hooks h;
        h.floor_alt = alt(ss);
        interleave(st, "BM_set", floor_only, [&] { e.store->set(s); }, [&] { replay(ss); }, h);
    }

    void state_ids(benchmark::State& st, bool floor_only, int n) {
        const std::string table = "ids_" + std::to_string(n);
        seed(table, n, "tap");
        auto& e = store(table);
        auto& ss = capture("state_ids/" + std::to_string(n), e, [&] { e.store->state_ids("*"); });
        std::size_t got = 0;
        interleave(
            st, "BM_state_ids/" + std::to_string(n), floor_only, [&] { got = e.store->state_ids("*").size(); },
            [&] { replay(ss, parse_ids); });
        if (!floor_only && got != std::size_t(n))
            skip(st, "state_ids returned " + std::to_string(got) + " ids, expected " + std::to_string(n));
    }

    void get_all(benchmark::State& st, bool floor_only, int n) {
        const std::string table = "ids_" + std::to_string(n);
        seed(table, n, "tap");
        auto& e = store(table);
        std::uint64_t got = 0;
        auto& ss = capture("get_all/" + std::to_string(n), e,
                           [&] { e.store->get_all([](state&& s) { benchmark::DoNotOptimize(s); }); });
        long base = 0, peak = -1, floor_peak = -1;
        hooks h;
        h.before_chstate = h.before_floor = [&] {
            reset_peak_rss();
            base = status_kib("VmRSS:");
        };
        // Growth over the RSS just before the call (0 when the call fit in
        // pages the process already had).
        h.after_chstate = [&] { peak = std::max({peak, 0L, status_kib("VmHWM:") - base}); };
        h.after_floor = [&] { floor_peak = std::max({floor_peak, 0L, status_kib("VmHWM:") - base}); };
        std::function<void()> floor = [&] { replay(ss, parse_states); };
        if constexpr (std::is_same_v<Ctx, embedded_ctx>) {
            // The cheaper minimal client is not known in advance: the floor
            // streams and parses chunk by chunk; the second floor takes one
            // buffered chdb_query reply, then parses.
            if (ss.size() != 1)
                throw std::runtime_error("get_all sent " + std::to_string(ss.size()) + " statements, expected 1");
            floor = [&] { ctx.floor.run_streaming(ss[0], parse_state_rows); };
            h.floor_alt = [&] { replay(ss, parse_states); };
            h.alt_label = "one buffered chdb_query reply";
            h.alt_counter = "floor_buffered_us";
        }
        interleave(
            st, "BM_get_all/" + std::to_string(n), floor_only,
            [&] { got = e.store->get_all([](state&& s) { benchmark::DoNotOptimize(s); }); }, floor, h);
        st.counters["floor_peak_rss_mib"] = floor_peak / 1024.0;
        long stream_peak = -1;
        if constexpr (std::is_same_v<Ctx, embedded_ctx>) {
            // What the engine holds while it streams the reply, nothing kept.
            for (const auto& s : ss) {
                reset_peak_rss();
                long b0 = status_kib("VmRSS:");
                chdb_stream_only(*ctx.engine, s);
                stream_peak = std::max({stream_peak, 0L, status_kib("VmHWM:") - b0});
            }
            st.counters["engine_stream_peak_rss_mib"] = stream_peak / 1024.0;
        }
        if (!floor_only) {
            st.counters["peak_rss_mib"] = peak / 1024.0;
            auto& r = result_for("BM_get_all/" + std::to_string(n), Ctx::name);
            r.peak_kib = std::max(r.peak_kib, peak);
            r.floor_peak_kib = std::max(r.floor_peak_kib, floor_peak);
            r.stream_peak_kib = std::max(r.stream_peak_kib, stream_peak);
            if (got != std::uint64_t(n))
                skip(st, "get_all visited " + std::to_string(got) + " states, expected " + std::to_string(n));
        }
    }

    std::vector<state> bulk_states(int n) {
        std::vector<state> v;
        for (int i = 0; i < n; ++i)
            v.push_back(sample_state(seq_id("bulk", i), i));
        return v;
    }

    /// The floor is what a minimal client does for a bulk write: build the
    /// TabSeparated body (each state's parts as JSON) and send the seed's
    /// bulk INSERT (the statement a clock-versions store sends; its body is
    /// checked to be byte-identical to the one built here). chstate's own
    /// statements (default monotonic versions: a SELECT of the ids' newest
    /// versions, then the INSERT) replayed raw are the second floor.
    void set_all(benchmark::State& st, bool floor_only, int n) {
        auto& e = store("bulk");
        auto& seed_store = store("bulk", write_versions::clock);
        const std::vector<state> states = bulk_states(n);
        auto& ss = capture("set_all/" + std::to_string(n), e, [&] { e.store->set_all(states); });
        auto& seed_ss = capture("set_all_seed/" + std::to_string(n), seed_store, [&] { seed_store.store->set_all(states); });
        if (seed_ss.size() != 1 || seed_ss[0].data.empty())
            throw std::runtime_error("set_all with clock versions sent " + std::to_string(seed_ss.size()) +
                                     " statements, expected one INSERT");
        // A server without DateTime64 (18.16) takes the client's milliseconds
        // as each row's version.
        const bool with_ms = seed_ss[0].sql.find("updated_at") != std::string::npos;
        std::string body;
        auto build_body = [&] {
            body.clear();
            const std::string ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      std::chrono::system_clock::now().time_since_epoch())
                                                      .count());
            for (const auto& s : states) {
                detail::append_tsv_field(body, s.state_id);
                body += '\t';
                detail::append_tsv_field(body, serialize_json(value(s.partial_state)));
                body += '\t';
                detail::append_tsv_field(body, serialize_json(value(s.completed_state)));
                if (with_ms) {
                    body += '\t';
                    body += ms;
                }
                body += '\n';
            }
        };
        build_body();
        if (!with_ms && body != seed_ss[0].data)
            throw std::runtime_error("the floor's set_all body differs from the store's");
        statement insert{seed_ss[0].sql, {}, seed_ss[0].format, {}, false};
        std::vector<state> next = states;
        hooks h;
        h.after_chstate = [&] { next = states; }; // set_all takes its vector: refill untimed
        h.floor_alt = [&] { replay(ss); };
        h.alt_label = "chstate's own " + std::to_string(ss.size()) + " statements";
        h.alt_counter = "floor_same_statements_us";
        interleave(
            st, "BM_set_all/" + std::to_string(n), floor_only, [&] { e.store->set_all(std::move(next)); },
            [&] {
                build_body();
                insert.data = std::move(body);
                ctx.floor.run(insert, no_parse);
                body = std::move(insert.data);
            },
            h);
    }

    /// `n` sets of distinct ids per iteration, each set beside its floor
    /// (the same statements with the id's value).
    void set_loop(benchmark::State& st, bool floor_only, int n) {
        auto& e = store("loop");
        const state proto = sample_state(seq_id("loop", 0));
        auto& ss = capture("set_loop", e, [&] { e.store->set(proto); });
        std::vector<state> states;
        std::vector<std::vector<statement>> floors;
        for (int i = 0; i < n; ++i) {
            states.push_back(sample_state(seq_id("loop", i)));
            auto copy = ss;
            for (auto& s : copy)
                for (auto& p : s.parameters)
                    if (p.name == "state_id")
                        p.value = states.back().state_id;
            floors.push_back(std::move(copy));
        }
        std::vector<double> a, b;
        for (auto _ : st) {
            double tc = 0, tf = 0;
            for (int i = 0; i < n; ++i) {
                auto t0 = steady::now();
                if (!floor_only)
                    e.store->set(states[i]);
                auto t1 = steady::now();
                replay(floors[i]);
                tc += std::chrono::duration<double>(t1 - t0).count();
                tf += seconds_since(t1);
            }
            st.SetIterationTime(floor_only ? tf : tc);
            a.push_back(tc);
            b.push_back(tf);
        }
        st.counters["floor_us"] = median(b) * 1e6;
        if (!floor_only) {
            st.counters["chstate_us"] = median(a) * 1e6;
            st.counters["ratio"] = median(a) / median(b);
            auto& r = result_for("BM_set_loop/" + std::to_string(n), Ctx::name);
            r.chstate.insert(r.chstate.end(), a.begin(), a.end());
            r.floor.insert(r.floor.end(), b.begin(), b.end());
            r.extra = "each set then its floor";
        }
    }

    void update(benchmark::State& st, bool floor_only, lock_mode mode) {
        const bool strict = mode == lock_mode::strict;
        const std::string op = strict ? "BM_update_strict_mode" : "BM_update_seed_mode";
        auto& e = store(strict ? "upd_strict" : "upd_seed", write_versions::monotonic, mode);
        int n = 0;
        auto next = [&] {
            return state{"dev:update", chstate::object{{"bookmarks", chstate::object{{"n", n++}}}}, {}};
        };
        std::vector<statement> const* ss = nullptr;
        try {
            // The statements of a store's repeated updates of one id (the
            // loop below): a strict store's first update also reads the
            // newest grant token, which later ones know from their release.
            e.store->update(next());
            ss = &capture(op, e, [&] { e.store->update(next()); });
        } catch (const std::exception& ex) {
            auto& r = result_for(op, Ctx::name);
            r.note = std::string("not measurable here: ") + ex.what();
            skip(st, r.note);
            return;
        }
        hooks h;
        h.floor_alt = alt(*ss);
        interleave(st, op, floor_only, [&] { e.store->update(next()); }, [&] { replay(*ss); }, h);
        st.counters["statements"] = double(ss->size());
        if (!floor_only)
            result_for(op, Ctx::name).extra = std::to_string(ss->size()) + " statements";
    }

    /// set with monotonic or clock versions; the floor is the seed's INSERT
    /// (what a clock-versions store sends). parts: that many unmerged parts
    /// of the id (merges stopped), re-made when 100 more have accumulated.
    void set_versions(benchmark::State& st, bool floor_only, write_versions v, int parts) {
        const bool mono = v == write_versions::monotonic;
        std::string op = mono ? "BM_set_monotonic" : "BM_set_clock";
        if (parts)
            op += "/parts:" + std::to_string(parts);
        const std::string table = parts ? "versions_parts" : "versions";
        auto& e = store(table, v);
        auto& seed_store = store(table, write_versions::clock);
        const state s = sample_state("dev:versions");
        auto& seed_insert = capture("seed_insert/" + table, seed_store, [&] { seed_store.store->set(s); });
        const std::string qualified = "bench." + table;
        const std::string parts_sql = "SELECT toUInt64(count()) FROM system.parts WHERE database = 'bench' AND table = '" +
                                      table + "' AND active";
        std::uint64_t made = 0;
        double parts_min = 1e18, parts_max = 0;
        // Merge what is there into one part, stop merges, then one INSERT
        // per missing part. (TRUNCATE did not bring chDB's count of active
        // parts down here; OPTIMIZE … FINAL does.)
        auto remake = [&] {
            admin("SYSTEM START MERGES " + qualified);
            admin("OPTIMIZE TABLE " + qualified + " FINAL");
            try { // chDB: no delay or refusal at many parts (18.16: the server's config.d, see benchmarks/run)
                admin("ALTER TABLE " + qualified +
                      " MODIFY SETTING parts_to_delay_insert = 100000, parts_to_throw_insert = 100000");
            } catch (const std::exception&) {
            }
            admin("SYSTEM STOP MERGES " + qualified);
            for (auto have = count(parts_sql); have < std::uint64_t(parts); ++have)
                replay(seed_insert);
            parts_min = std::min(parts_min, double(count(parts_sql)));
            made = 0;
        };
        hooks h;
        h.floor_alt = alt(seed_insert);
        if (parts) {
            remake();
            h.between = [&] {
                if (++made * 2 >= 100) {
                    parts_max = std::max(parts_max, double(count(parts_sql)));
                    remake();
                }
            };
        }
        interleave(st, op, floor_only, [&] { e.store->set(s); }, [&] { replay(seed_insert); }, h);
        if (parts) {
            parts_max = std::max(parts_max, double(count(parts_sql)));
            st.counters["parts_min"] = parts_min;
            st.counters["parts_max"] = parts_max;
            if (!floor_only) {
                auto& r = result_for(op, Ctx::name);
                r.parts_min = std::min(r.parts_min, parts_min);
                r.parts_max = std::max(r.parts_max, parts_max);
                r.extra = "active parts " + std::to_string(long(r.parts_min)) + "-" + std::to_string(long(r.parts_max));
            }
            admin("SYSTEM START MERGES " + qualified);
        }
        if (!floor_only)
            result_for(op, Ctx::name).note = "floor: the seed's INSERT (clock versions)";
    }
};

// ---------------------------------------------------------------------------

void print_table(std::FILE* out) {
    auto fmt = [](double s) {
        char buf[32];
        if (s >= 0.1)
            std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
        else
            std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
        return std::string(buf);
    };
    std::fprintf(out, "\nchstate vs floor (medians of interleaved iterations; ratio = chstate / floor)\n");
    std::fprintf(out, "%-32s %-9s %12s %12s %7s  %s\n", "operation", "engine", "chstate", "floor", "ratio", "notes");
    for (const auto& key : g_order) {
        const auto& r = g_results[key];
        std::string notes = r.extra;
        if (r.peak_kib >= 0) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "peak RSS +%.1f MiB (floor +%.1f MiB", r.peak_kib / 1024.0,
                          r.floor_peak_kib / 1024.0);
            std::string m = buf;
            if (r.stream_peak_kib >= 0) {
                std::snprintf(buf, sizeof buf, ", engine streaming alone +%.1f MiB", r.stream_peak_kib / 1024.0);
                m += buf;
            }
            notes += (notes.empty() ? "" : "; ") + m + ")";
        }
        if (!r.floor_alt.empty()) {
            char buf[96];
            std::snprintf(buf, sizeof buf, "floor with %s: %s", r.alt_label.c_str(), fmt(median(r.floor_alt)).c_str());
            notes += (notes.empty() ? "" : "; ") + std::string(buf);
        }
        if (!r.note.empty())
            notes += (notes.empty() ? "" : "; ") + r.note;
        if (r.chstate.empty()) {
            std::fprintf(out, "%-32s %-9s %12s %12s %7s  %s\n", r.op.c_str(), r.engine.c_str(), "-", "-", "-",
                         notes.c_str());
            continue;
        }
        double a = median(r.chstate), b = median(r.floor);
        std::fprintf(out, "%-32s %-9s %12s %12s %7.2f  n=%zu%s%s\n", r.op.c_str(), r.engine.c_str(), fmt(a).c_str(),
                     fmt(b).c_str(), b > 0 ? a / b : 0.0, r.chstate.size(), notes.empty() ? "" : "; ", notes.c_str());
    }
    for (const char* engine : {"embedded", "server"}) {
        auto seed = g_results.find(std::string("BM_update_seed_mode/") + engine);
        auto strict = g_results.find(std::string("BM_update_strict_mode/") + engine);
        if (seed != g_results.end() && strict != g_results.end() && !seed->second.chstate.empty() &&
            !strict->second.chstate.empty())
            std::fprintf(out, "update %s: seed_compatible / strict = %.1fx\n", engine,
                         median(seed->second.chstate) / median(strict->second.chstate));
    }
    std::fflush(out);
}

template <class F>
void guarded(benchmark::State& st, const std::string& problem, F&& f) {
    if (!problem.empty()) {
        skip(st, problem);
        return;
    }
    try {
        f();
    } catch (const std::exception& e) {
        skip(st, e.what());
    }
}

} // namespace

int main(int argc, char** argv) {
    bool table_to_stderr = false;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a.rfind("--benchmark_format=", 0) == 0 && a != "--benchmark_format=console")
            table_to_stderr = true;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;

    auto embedded = std::make_unique<embedded_ctx>();
    auto server = std::make_unique<server_ctx>();
    auto eb = std::make_unique<engine_bench<embedded_ctx>>(*embedded);
    auto sb = std::make_unique<engine_bench<server_ctx>>(*server);

    // Registers BM_<op><variant>/<engine> and BM_floor_<op><variant>/<engine> for both engines.
    auto reg = [&](const std::string& op, const std::string& variant, benchmark::TimeUnit unit, auto fn) {
        auto one = [&](auto& bench, const std::string& problem, const char* engine) {
            for (bool floor_only : {false, true}) {
                std::string name = (floor_only ? "BM_floor_" + op : "BM_" + op) + variant + "/" + engine;
                benchmark::RegisterBenchmark(name.c_str(),
                                             [&bench, &problem, fn, floor_only](benchmark::State& st) {
                                                 guarded(st, problem, [&] { fn(bench, st, floor_only); });
                                             })
                    ->UseManualTime()
                    ->Unit(unit);
            }
        };
        one(*eb, embedded->problem, "embedded");
        one(*sb, server->problem, "server");
    };
    using benchmark::kMicrosecond;
    using benchmark::kMillisecond;
    reg("get", "", kMicrosecond, [](auto& b, benchmark::State& st, bool f) { b.get(st, f); });
    reg("set", "", kMicrosecond, [](auto& b, benchmark::State& st, bool f) { b.set(st, f); });
    for (int n : {1000, 10000, 100000})
        reg("state_ids", "/" + std::to_string(n), kMillisecond,
            [n](auto& b, benchmark::State& st, bool f) { b.state_ids(st, f, n); });
    for (int n : {10000, 100000})
        reg("get_all", "/" + std::to_string(n), kMillisecond,
            [n](auto& b, benchmark::State& st, bool f) { b.get_all(st, f, n); });
    reg("set_all", "/10000", kMillisecond, [](auto& b, benchmark::State& st, bool f) { b.set_all(st, f, 10000); });
    reg("set_loop", "/10000", kMillisecond, [](auto& b, benchmark::State& st, bool f) { b.set_loop(st, f, 10000); });
    reg("update_seed_mode", "", kMillisecond,
        [](auto& b, benchmark::State& st, bool f) { b.update(st, f, lock_mode::seed_compatible); });
    reg("update_strict_mode", "", kMillisecond,
        [](auto& b, benchmark::State& st, bool f) { b.update(st, f, lock_mode::strict); });
    for (int parts : {0, 200}) {
        std::string variant = parts ? "/parts:200" : "";
        reg("set_monotonic", variant, kMicrosecond, [parts](auto& b, benchmark::State& st, bool f) {
            b.set_versions(st, f, write_versions::monotonic, parts);
        });
        reg("set_clock", variant, kMicrosecond, [parts](auto& b, benchmark::State& st, bool f) {
            b.set_versions(st, f, write_versions::clock, parts);
        });
    }

    benchmark::RunSpecifiedBenchmarks();
    print_table(table_to_stderr ? stderr : stdout);

    // Every store (and so every chDB connection user) goes before the engine.
    eb.reset();
    sb.reset();
    server.reset();
    embedded.reset();
    benchmark::Shutdown();
}
