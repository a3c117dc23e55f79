// The SQL text the library generates (include/chstate/detail/statements.hpp)
// for the statements the pages show in ```sql blocks: one statement a line,
// `NAME<TAB>SQL`, for a modern server (every feature), schema `meltano`,
// table `state`. tests/readme/run.sh pipes it to check_docs_runtime.py sql,
// which compares each page's block with the line it names (whitespace
// normalised; placeholders as docs/development.md lists them).
// Only the statements header: no engine, no Boost; compiles in seconds.
#include <chstate/detail/statements.hpp>

#include <cstdio>
#include <string>

int main() {
    using namespace chstate::detail;
    const statements st(table_names("meltano", "state"), server_features{}, /*monotonic=*/true);
    auto line = [](const char* name, const std::string& sql) { std::printf("%s\t%s\n", name, sql.c_str()); };
    line("create_state_table", st.create_state_table().sql);
    line("create_lock_table", st.create_lock_table().sql);
    line("create_grant_table", st.create_grant_table().sql);
    // The monotonic version's INSERT (docs/versions.md), nothing read before it.
    line("insert_state", st.insert_state("id", std::string("{}"), std::nullopt).sql);
    // A fenced write: its WHERE is statements::fence_condition (private),
    // the holder the placeholder {lock_id:String}.
    const std::string fenced = st.insert_state("id", std::string("{}"), std::nullopt, 0, std::string("L")).sql;
    line("insert_fenced", fenced);
    // The fence alone: what follows the fenced INSERT's own SELECT.
    const auto where = fenced.find(" WHERE (SELECT max(token)");
    line("fence_condition", where == std::string::npos ? std::string("(not found)") : fenced.substr(where + 7));
    return 0;
}
