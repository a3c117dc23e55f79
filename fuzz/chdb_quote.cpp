// Fuzz target: quoting checked by the embedded engine itself (chDB).
//
// Built with -fsanitize=fuzzer only: libchdb.so cannot be loaded under
// AddressSanitizer. The engine is loaded through chstate::chdb_engine from
// CHSTATE_CHDB_LIBRARY (scripts/fuzz.sh points it at the copy
// scripts/fetch-chdb.sh caches), on a scratch data folder.
//
// Input: a value (any bytes).
//
// Properties, read back in RowBinary (LEB128 length, then the bytes):
//   * SELECT <quote_string(v)> returns exactly v;
//   * SELECT {p:String} with v bound (escape_parameter_value, as the
//     transport sends it) returns exactly v;
//   * SELECT 1 AS <quote_identifier(v)> names its column exactly v
//     (RowBinaryWithNames), for a non-empty v.
#include "fuzz_common.hpp"

#include <chstate/detail/sql.hpp>
#include <chstate/transport/chdb.hpp>

#include <cstdlib>
#include <filesystem>

namespace {

std::string leb128(std::uint64_t n) {
    std::string out;
    do {
        unsigned char b = n & 0x7f;
        n >>= 7;
        out += static_cast<char>(n ? b | 0x80 : b);
    } while (n);
    return out;
}

std::shared_ptr<chstate::chdb_engine> engine() {
    static std::shared_ptr<chstate::chdb_engine> e = [] {
        const char* lib = std::getenv("CHSTATE_CHDB_LIBRARY");
        const char* dir = std::getenv("CHSTATE_FUZZ_CHDB_DIR");
        chstate::chdb_options o;
        o.path = dir ? dir : (std::filesystem::temp_directory_path() / "chstate-fuzz-chdb").string();
        o.library = lib ? lib : "";
        o.threads = 1;
        chstate::error_code ec;
        chstate::diagnostics diag;
        auto opened = chstate::chdb_engine::open(o, ec, diag);
        if (!opened) {
            std::fprintf(stderr, "chdb_quote: cannot open chDB: %s\n", diag.message.c_str());
            std::exit(2);
        }
        return opened;
    }();
    return e;
}

std::string run(const chstate::statement& stmt, chstate::error_code& ec, std::string& message) {
    std::string out;
    chstate::diagnostics diag;
    ec = engine()->run(
        stmt,
        [&](std::string_view chunk) {
            out.append(chunk);
            return chstate::error_code{};
        },
        diag);
    message = diag.message;
    return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > 4096)
        return 0;
    const std::string v(reinterpret_cast<const char*>(data), size);
    const std::string expected = leb128(v.size()) + v;
    chstate::error_code ec;
    std::string message;

    // A string literal.
    chstate::statement literal{"SELECT " + chstate::detail::quote_string(v), {}, "RowBinary", {}, true};
    std::string got = run(literal, ec, message);
    FUZZ_CHECK(!ec && got == expected, "SELECT " + fuzz::show(literal.sql) + ": " + message + " -> " + fuzz::show(got));

    // A bound parameter.
    chstate::statement bound{"SELECT {p:String}", {{"p", "String", v}}, "RowBinary", {}, true};
    got = run(bound, ec, message);
    FUZZ_CHECK(!ec && got == expected, "parameter " + fuzz::show(v) + ": " + message + " -> " + fuzz::show(got));

    // An identifier.
    if (!v.empty()) {
        chstate::statement named{"SELECT 1 AS " + chstate::detail::quote_identifier(v), {}, "RowBinaryWithNames", {},
                                 true};
        got = run(named, ec, message);
        const std::string header = leb128(1) + expected + std::string(1, '\x01');
        FUZZ_CHECK(!ec && got == header, fuzz::show(named.sql) + ": " + message + " -> " + fuzz::show(got));
    }
    return 0;
}
