// chstate/testing/detail/expr_parser.hpp — reading tokens, and the
// expressions of the simulator's SQL:
//
//   or      := and (OR and)*
//   and     := compare (AND compare)*
//   compare := sum [(= | != | < | <= | > | >=) sum | IN (SELECT arrayJoin(primary))]
//   sum     := product ((+ | -) product)*
//   product := primary (* primary)*
//   primary := (SELECT …) | (or) | 'text' | integer | {name:Type} | NULL
//            | INTERVAL integer MILLISECOND|SECOND|MINUTE|HOUR|DAY | ['text', …]
//            | function(or, …) | column
//
// The statements around them are parser.hpp's.
#pragma once

#include <chstate/testing/detail/ast.hpp>
#include <chstate/testing/detail/dialect.hpp>
#include <chstate/testing/detail/lexer.hpp>

#include <chstate/transport.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace chstate::detail::sim {

class expr_parser {
public:
    expr_parser(const statement& st, const dialect& d) : stmt_(st), dialect_(d), toks_(tokenize(st.sql)) {}

    expr parse_expr() { return parse_or(); }

protected:
    [[noreturn]] void unsupported() const { not_understood(stmt_.sql); }
    /// What ClickHouse 18.16 answers for SQL of a later dialect at `t`: 62.
    [[noreturn]] void old_syntax_error(const token& t, std::string_view what) const {
        throw sim_error{62, "Syntax error: failed at position " + std::to_string(t.pos + 1) + ": " +
                                stmt_.sql.substr(t.pos, 60) + ". " + std::string(what) + " (as ClickHouse 18.16)"};
    }

    const token& peek(std::size_t k = 0) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
    bool is_kw(std::string_view kw, std::size_t k = 0) const {
        return peek(k).kind == token::ident && upper(peek(k).text) == kw;
    }
    bool is_sym(std::string_view sym, std::size_t k = 0) const {
        return peek(k).kind == token::symbol && peek(k).text == sym;
    }
    bool accept_kw(std::string_view kw) {
        if (!is_kw(kw))
            return false;
        ++i_;
        return true;
    }
    bool accept_sym(std::string_view sym) {
        if (!is_sym(sym))
            return false;
        ++i_;
        return true;
    }
    void expect_kw(std::string_view kw) {
        if (!accept_kw(kw))
            unsupported();
    }
    void expect_sym(std::string_view sym) {
        if (!accept_sym(sym))
            unsupported();
    }
    /// A word or a back-quoted name.
    std::string name() {
        const token& t = peek();
        if (t.kind != token::ident && t.kind != token::quoted_ident)
            unsupported();
        ++i_;
        return t.text;
    }
    /// db.t or t, back quotes removed.
    std::string table_name() {
        std::string n = name();
        if (accept_sym("."))
            n += "." + name();
        return n;
    }
    bool at_end() const { return peek().kind == token::end; }

    /// Parses SELECT … after its keyword (parser.hpp): scalar subqueries.
    virtual select_query parse_select() = 0;

    ~expr_parser() = default;

    const statement& stmt_;
    const dialect& dialect_;
    std::vector<token> toks_;
    std::size_t i_ = 0;

private:
    static expr binary(std::string op, expr a, expr b) {
        expr e;
        e.kind = expr::binary;
        e.name = std::move(op);
        e.text = a.text + " " + e.name + " " + b.text;
        e.args.push_back(std::move(a));
        e.args.push_back(std::move(b));
        return e;
    }

    expr parse_or() {
        expr l = parse_and();
        while (accept_kw("OR"))
            l = binary("OR", std::move(l), parse_and());
        return l;
    }
    expr parse_and() {
        expr l = parse_compare();
        while (accept_kw("AND"))
            l = binary("AND", std::move(l), parse_compare());
        return l;
    }
    expr parse_compare() {
        expr l = parse_sum();
        for (const char* op : {"=", "!=", "<", "<=", ">", ">="})
            if (accept_sym(op))
                return binary(op, std::move(l), parse_sum());
        if (accept_kw("IN")) { // x IN (SELECT arrayJoin(list)): the one form of IN the store sends
            expect_sym("(");
            expect_kw("SELECT");
            expect_kw("ARRAYJOIN");
            expect_sym("(");
            expr list = parse_primary();
            expect_sym(")");
            expect_sym(")");
            return binary("IN", std::move(l), std::move(list));
        }
        return l;
    }
    expr parse_sum() {
        expr l = parse_product();
        for (;;) {
            if (accept_sym("+"))
                l = binary("+", std::move(l), parse_product());
            else if (accept_sym("-"))
                l = binary("-", std::move(l), parse_product());
            else
                return l;
        }
    }
    expr parse_product() {
        expr l = parse_primary();
        while (accept_sym("*"))
            l = binary("*", std::move(l), parse_primary());
        return l;
    }

    /// A placeholder's value: a number for the integer types, else text
    /// (an Array(String) stays its text, ['a','b'], read where it is used).
    value bind(const token& t) const {
        if (!dialect_.query_parameters)
            old_syntax_error(t, "Unrecognized token");
        for (const auto& p : stmt_.parameters) {
            if (p.name != t.text)
                continue;
            if (!p.value)
                return value::of_null();
            if (t.type.find("Int") != std::string::npos) {
                auto n = to_int(*p.value);
                if (!n)
                    throw sim_error{27, "Cannot parse " + t.type + " parameter " + p.name};
                return value::of_number(*n);
            }
            return value::of_text(*p.value);
        }
        throw sim_error{456, "Substitution `" + t.text + "` is not set"};
    }

    /// INTERVAL n UNIT as milliseconds.
    expr parse_interval() {
        expr n = parse_primary();
        const token& unit_token = peek();
        const std::string unit = upper(name());
        if (unit.starts_with("MILLISECOND") && !dialect_.millisecond_intervals)
            old_syntax_error(unit_token, "Expected one of: SECOND, MINUTE, HOUR, DAY, …");
        const std::int64_t ms = unit.starts_with("MILLISECOND") ? 1
                                : unit.starts_with("SECOND")    ? 1000
                                : unit.starts_with("MINUTE")    ? 60'000
                                : unit.starts_with("HOUR")      ? 3'600'000
                                : unit.starts_with("DAY")       ? 86'400'000
                                                                : (unsupported(), 0);
        expr e;
        e.v = value::of_number(n.v.n * ms);
        e.text = "INTERVAL";
        return e;
    }

    expr parse_primary() {
        const token& t = peek();
        expr e;
        if (accept_sym("(")) {
            if (accept_kw("SELECT")) {
                e.kind = expr::subquery;
                e.query = std::make_shared<select_query>(parse_select());
                e.text = "(SELECT …)";
            } else {
                e = parse_expr();
            }
            expect_sym(")");
            return e;
        }
        if (accept_sym("[")) { // an Array(String) literal, as the store inlines one
            e.kind = expr::array;
            if (!accept_sym("]")) {
                do {
                    if (peek().kind != token::string)
                        unsupported();
                    e.args.push_back(parse_primary());
                } while (accept_sym(","));
                expect_sym("]");
            }
            e.text = "[…]";
            return e;
        }
        if (t.kind == token::string || t.kind == token::number || t.kind == token::param) {
            ++i_;
            e.v = t.kind == token::string ? value::of_text(t.text)
                  : t.kind == token::number ? value::of_number(*to_int(t.text))
                                            : bind(t);
            e.text = t.kind == token::string ? "'" + t.text + "'"
                     : t.kind == token::number ? t.text
                                               : "{" + t.text + ":" + t.type + "}";
            return e;
        }
        if (t.kind == token::ident && upper(t.text) == "NULL") {
            ++i_;
            e.text = "NULL";
            return e;
        }
        if (t.kind == token::ident && upper(t.text) == "INTERVAL") {
            ++i_;
            return parse_interval();
        }
        if (t.kind != token::ident && t.kind != token::quoted_ident)
            unsupported();
        ++i_;
        e.name = t.text;
        e.text = t.text;
        if (t.kind == token::quoted_ident || !accept_sym("(")) {
            e.kind = expr::column;
            return e;
        }
        e.kind = expr::call;
        e.text += "(";
        if (!accept_sym(")")) {
            for (;;) {
                e.args.push_back(parse_expr());
                e.text += e.args.back().text;
                if (accept_sym(")"))
                    break;
                expect_sym(",");
                e.text += ", ";
            }
        }
        e.text += ")";
        return e;
    }
};

} // namespace chstate::detail::sim
