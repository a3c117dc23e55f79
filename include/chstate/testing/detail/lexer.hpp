// chstate/testing/detail/lexer.hpp — splits a statement's SQL text into
// tokens: words, back-quoted names, string literals (escapes resolved),
// integers, {name:Type} placeholders and symbols.
#pragma once

#include <chstate/detail/sql.hpp>
#include <chstate/testing/detail/cell.hpp>

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail::sim {

struct token {
    enum kind_t { ident, quoted_ident, string, number, param, symbol, end } kind = end;
    std::string text; ///< the word, the name or literal's value (unquoted), the symbol; a placeholder's name
    std::string type; ///< a placeholder's type
    std::size_t pos = 0; ///< offset in the SQL text
};

inline std::string upper(std::string s) {
    for (auto& c : s)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

/// The tokens of `sql`, ending with one of kind `end`. Fails with 62
/// (ClickHouse's SYNTAX_ERROR) on an unterminated quote or placeholder.
inline std::vector<token> tokenize(std::string_view sql) {
    std::vector<token> out;
    std::size_t i = 0;
    auto fail = [&](const char* what) {
        throw sim_error{62, std::string("Syntax error: ") + what + " in: " + std::string(sql)};
    };
    auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    while (i < sql.size()) {
        const char c = sql[i];
        if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
            continue;
        }
        token t;
        t.pos = i;
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            std::size_t j = i;
            while (j < sql.size() && word_char(sql[j]))
                ++j;
            t.kind = token::ident;
            t.text = std::string(sql.substr(i, j - i));
            i = j;
        } else if (std::isdigit(static_cast<unsigned char>(c))) {
            std::size_t j = i;
            while (j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j])))
                ++j;
            t.kind = token::number;
            t.text = std::string(sql.substr(i, j - i));
            i = j;
        } else if (c == '`' || c == '\'') {
            // A doubled quote is the quote itself; backslash escapes as
            // quote_string (detail/sql.hpp) writes them.
            std::size_t j = i + 1;
            for (;; ++j) {
                if (j >= sql.size())
                    fail("unterminated quote");
                if (sql[j] == '\\' && j + 1 < sql.size()) {
                    t.text += unescaped(sql[++j]);
                } else if (sql[j] == c) {
                    if (j + 1 < sql.size() && sql[j + 1] == c) {
                        t.text += c;
                        ++j;
                    } else
                        break;
                } else
                    t.text += sql[j];
            }
            t.kind = c == '`' ? token::quoted_ident : token::string;
            i = j + 1;
        } else if (c == '{') {
            const auto close = sql.find('}', i);
            const auto colon = sql.find(':', i);
            if (close == std::string_view::npos || colon == std::string_view::npos || colon > close)
                fail("bad parameter");
            t.kind = token::param;
            t.text = std::string(sql.substr(i + 1, colon - i - 1));
            t.type = std::string(sql.substr(colon + 1, close - colon - 1));
            i = close + 1;
        } else {
            t.kind = token::symbol;
            const std::string_view two = sql.substr(i, 2);
            t.text = two == "<=" || two == ">=" || two == "!=" ? std::string(two) : std::string(1, c);
            i += t.text.size();
        }
        out.push_back(std::move(t));
    }
    token e;
    e.pos = sql.size();
    out.push_back(e);
    return out;
}

} // namespace chstate::detail::sim
