// chstate/testing/detail/parser.hpp — a statement's text to its
// description (ast.hpp). The statements, as the store sends them
// (detail/statements.hpp) and tests inspect tables with them:
//
//   SELECT [DISTINCT] item [AS name], … [FROM t [FINAL]] [PREWHERE e] [WHERE e]
//       [ORDER BY e [DESC], …] [LIMIT n]     item: e | count() | max(e) | min(e) | any(e)
//   INSERT INTO t [(col, …)] [SETTINGS …] VALUES (e, …), … | SELECT e, … [WHERE e] | FORMAT TabSeparated
//   CREATE DATABASE [IF NOT EXISTS] db [ON CLUSTER c]
//   CREATE TABLE [IF NOT EXISTS] db.t [ON CLUSTER c] (col Type [DEFAULT e], …)
//       ENGINE = [Replicated][Replacing]MergeTree[(…)] ORDER BY col | (col, …)
//       [TTL col + INTERVAL n UNIT] [SETTINGS …]
//   DELETE FROM t WHERE e          ALTER TABLE t DELETE WHERE e
//   TRUNCATE [TABLE] t             SYSTEM STOP MERGES t / SYSTEM START MERGES t
// each followed by any of SETTINGS name = literal, … / FORMAT name / `;`.
// Anything else fails with 48 (NOT_IMPLEMENTED), naming the statement;
// what ClickHouse 18.16 cannot parse fails on an 18.16 server with 62.
#pragma once

#include <chstate/testing/detail/expr_parser.hpp>

#include <string>
#include <utility>

namespace chstate::detail::sim {

class parser final : expr_parser {
public:
    using expr_parser::expr_parser;

    query parse() {
        if (accept_kw("SELECT")) {
            select_statement s{parse_select(), {}, {}};
            s.settings = finish(&s.format);
            return s;
        }
        if (accept_kw("INSERT"))
            return parse_insert();
        if (accept_kw("CREATE"))
            return accept_kw("DATABASE") ? query(parse_create_database()) : query(parse_create_table());
        if (is_kw("DELETE")) {
            if (!dialect_.lightweight_delete)
                old_syntax_error(peek(), "Expected one of: SELECT, INSERT INTO, ALTER TABLE, … (no DELETE FROM)");
            ++i_;
            expect_kw("FROM");
            delete_statement d{table_name(), {}, true};
            expect_kw("WHERE");
            d.where = parse_expr();
            finish();
            return d;
        }
        if (accept_kw("ALTER")) {
            expect_kw("TABLE");
            delete_statement d{table_name(), {}, false};
            expect_kw("DELETE");
            expect_kw("WHERE");
            d.where = parse_expr();
            finish();
            return d;
        }
        if (accept_kw("TRUNCATE")) {
            accept_kw("TABLE");
            truncate_statement t{table_name()};
            finish();
            return t;
        }
        if (accept_kw("SYSTEM")) {
            merges_statement m;
            m.stop = accept_kw("STOP");
            if (!m.stop)
                expect_kw("START");
            expect_kw("MERGES");
            m.table = table_name();
            finish();
            return m;
        }
        unsupported();
    }

private:
    select_query parse_select() override {
        select_query q;
        q.distinct = accept_kw("DISTINCT");
        do {
            select_item it;
            if (is_kw("COUNT") && is_sym("(", 1) && is_sym(")", 2)) {
                i_ += 3;
                it.aggregate = select_item::count;
                it.e.text = "count()";
            } else {
                it.e = parse_expr();
                const std::string f = upper(it.e.name);
                if (it.e.kind == expr::call && (f == "MAX" || f == "MIN" || f == "ANY") && it.e.args.size() == 1) {
                    it.aggregate = f == "MAX" ? select_item::max : f == "MIN" ? select_item::min : select_item::any;
                    std::string text = std::move(it.e.text);
                    expr arg = std::move(it.e.args.front());
                    it.e = std::move(arg);
                    it.e.text = std::move(text);
                } else if (has_aggregate(it.e)) {
                    it.aggregate = select_item::nested;
                }
            }
            it.name = it.e.text;
            if (accept_kw("AS"))
                it.name = name();
            q.items.push_back(std::move(it));
        } while (accept_sym(","));
        if (accept_kw("FROM")) {
            q.from = table_name();
            q.final = accept_kw("FINAL");
            if (accept_kw("PREWHERE"))
                q.prewhere = parse_expr();
        }
        if (accept_kw("WHERE"))
            q.where = parse_expr();
        if (accept_kw("ORDER")) {
            expect_kw("BY");
            do {
                order_term o{parse_expr(), false};
                o.descending = accept_kw("DESC");
                q.order.push_back(std::move(o));
            } while (accept_sym(","));
        }
        if (accept_kw("LIMIT")) {
            if (peek().kind != token::number)
                unsupported();
            q.limit = *to_int(peek().text);
            ++i_;
        }
        return q;
    }

    /// SETTINGS name = literal, … (after its keyword).
    void settings(settings_map& out) {
        do {
            std::string k = name();
            expect_sym("=");
            out[k] = parse_expr().v;
        } while (accept_sym(","));
    }

    /// The statement's tail: SETTINGS (returned) and FORMAT, then the end.
    settings_map finish(std::string* format = nullptr) {
        settings_map out;
        for (;;) {
            if (accept_kw("SETTINGS")) {
                settings(out);
            } else if (accept_kw("FORMAT")) {
                std::string f = name();
                if (format)
                    *format = std::move(f);
            } else
                break;
        }
        accept_sym(";");
        if (!at_end())
            unsupported();
        return out;
    }

    /// ON CLUSTER name, after a CREATE's object name.
    std::optional<std::string> on_cluster() {
        if (!accept_kw("ON"))
            return std::nullopt;
        expect_kw("CLUSTER");
        return name();
    }

    bool if_not_exists() {
        if (!accept_kw("IF"))
            return false;
        expect_kw("NOT");
        expect_kw("EXISTS");
        return true;
    }

    create_database parse_create_database() {
        create_database c;
        c.if_not_exists = if_not_exists();
        c.name = name();
        c.cluster = on_cluster();
        finish();
        return c;
    }

    create_table parse_create_table() {
        expect_kw("TABLE");
        create_table t;
        t.if_not_exists = if_not_exists();
        t.database = name();
        expect_sym(".");
        t.name = name();
        t.cluster = on_cluster();
        expect_sym("(");
        do {
            column_def c;
            c.name = name();
            // The type as written: up to a comma, DEFAULT or the closing
            // parenthesis outside the type's own parentheses.
            const std::size_t start = peek().pos;
            for (int depth = 0; !at_end() && !(depth == 0 && (is_sym(",") || is_sym(")") || is_kw("DEFAULT"))); ++i_)
                depth += is_sym("(") ? 1 : is_sym(")") ? -1 : 0;
            c.type = stmt_.sql.substr(start, peek().pos - start);
            while (!c.type.empty() && c.type.back() == ' ')
                c.type.pop_back();
            if (accept_kw("DEFAULT"))
                c.default_value = parse_expr();
            t.columns.push_back(std::move(c));
        } while (accept_sym(","));
        expect_sym(")");
        expect_kw("ENGINE");
        expect_sym("=");
        const std::size_t engine_start = peek().pos;
        t.engine = name();
        const bool replicated = t.engine.starts_with("Replicated");
        const std::string base = replicated ? t.engine.substr(std::string_view("Replicated").size()) : t.engine;
        if (base != "MergeTree" && base != "ReplacingMergeTree")
            unsupported();
        if (accept_sym("(")) {
            // Replicated…('zookeeper path', 'replica name'[, version]): the
            // path and the name are not interpreted.
            for (int arg = 0; replicated && arg < 2; ++arg) {
                if (peek().kind != token::string)
                    unsupported();
                ++i_;
                if (arg == 0 || !is_sym(")"))
                    expect_sym(",");
            }
            if (!accept_sym(")")) {
                t.version_column = name();
                expect_sym(")");
            }
        }
        expect_kw("ORDER");
        expect_kw("BY");
        if (accept_sym("(")) {
            if (!accept_sym(")")) {
                do
                    t.order_by.push_back(name());
                while (accept_sym(","));
                expect_sym(")");
            }
        } else
            t.order_by.push_back(name());
        if (is_kw("TTL")) {
            if (!dialect_.ttl)
                old_syntax_error(peek(), "Expected one of: PRIMARY KEY, PARTITION BY, SAMPLE BY, SETTINGS, …");
            ++i_;
            t.ttl_column = name();
            expect_sym("+");
            t.ttl_ms = parse_expr().v.n;
        }
        t.engine_full = stmt_.sql.substr(engine_start);
        t.settings = finish();
        return t;
    }

    insert_statement parse_insert() {
        expect_kw("INTO");
        insert_statement s;
        s.table = table_name();
        if (accept_sym("(")) {
            do
                s.columns.push_back(name());
            while (accept_sym(","));
            expect_sym(")");
        }
        if (is_kw("SETTINGS")) {
            if (!dialect_.insert_settings)
                old_syntax_error(peek(), "Expected one of: VALUES, WITH, FORMAT, SELECT");
            ++i_;
            settings(s.settings);
        }
        if (accept_kw("VALUES")) {
            s.source = insert_statement::values;
            do {
                expect_sym("(");
                std::vector<expr> row;
                do
                    row.push_back(parse_expr());
                while (accept_sym(","));
                expect_sym(")");
                s.rows.push_back(std::move(row));
            } while (accept_sym(","));
        } else if (accept_kw("SELECT")) {
            s.source = insert_statement::select;
            do
                s.select_items.push_back(parse_expr());
            while (accept_sym(","));
            if (accept_kw("WHERE"))
                s.where = parse_expr();
        } else if (is_kw("FORMAT")) {
            s.source = insert_statement::tab_separated;
        } else {
            unsupported();
        }
        std::string format;
        s.settings.merge(finish(&format));
        if ((s.source == insert_statement::tab_separated) != (format == "TabSeparated"))
            unsupported(); // FORMAT TabSeparated with the rows in statement::data, nothing else
        return s;
    }
};

/// The description of `st`'s text (placeholders bound from its parameters).
inline query parse(const statement& st, const dialect& d) {
    return parser(st, d).parse();
}

} // namespace chstate::detail::sim
