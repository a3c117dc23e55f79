// Exact values, measured against Python's json module (docs/values.md). Templated test cases over the data fixtures (DATA_CASE,
// tests/contract.hpp), included once per test file, inside its suite.
//
// tests/fidelity/corpus.py writes what Python's json.dumps produces for
// edge cases and 1,000 random nested states. Each case is stored raw, as a
// Meltano process would (the seed's INSERT), then read and rewritten by
// chstate's operations; what chstate hands out, and what the table holds
// afterwards, goes to a results file that tests/fidelity/check.py compares
// with Python's json.loads of the original, type-strictly and in key order.

namespace fidelity {

inline std::string hex_encode(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

inline std::string hex_decode(std::string_view hex) {
    std::string out;
    out.reserve(hex.size() / 2);
    auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        out += static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1]));
    return out;
}

struct corpus_case {
    std::string name;
    std::string text;
};

inline std::vector<corpus_case> read_corpus(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::vector<corpus_case> out;
    for (std::string line; std::getline(in, line);) {
        auto t1 = line.find('\t');
        auto t2 = line.find('\t', t1 + 1);
        if (t1 == std::string::npos || t2 == std::string::npos)
            continue;
        out.push_back({line.substr(0, t1), hex_decode(std::string_view(line).substr(t2 + 1))});
    }
    return out;
}

/// Runs a shell command; its exit status.
inline int shell(const std::string& command) {
    int rc = std::system(command.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

} // namespace fidelity

DATA_CASE("fidelity: what Python's json writes survives get, update, copy, merge, set_all/get_all, the CLI form and a "
          "user's get-modify-set") {
    namespace fs = std::filesystem;
    const char* base = std::getenv("CHSTATE_TEST_DIR");
    const fs::path dir = fs::path(base ? base : fs::temp_directory_path().string()) /
                         ("fidelity-" + std::string(fixture::name) + "-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string tools = CHSTATE_SOURCE_DIR "/tests/fidelity/";
    const fs::path corpus_file = dir / "corpus.tsv";
    // The random cases beside the fixed ones: 1000, or CHSTATE_FIDELITY_RANDOM
    // (scripts/sanitizers.sh runs 100: under ASan the same code paths, whose
    // results the full run checks against Python, at a tenth of the time).
    const long random_cases = test::env_or("CHSTATE_FIDELITY_RANDOM", 1000);
    REQUIRE_MESSAGE(random_cases >= 1, "CHSTATE_FIDELITY_RANDOM must be a positive count");
    REQUIRE_MESSAGE(fidelity::shell("python3 '" + tools + "corpus.py' --count " + std::to_string(random_cases) +
                                    " --seed 20261201 --out '" + corpus_file.string() + "' >/dev/null") == 0,
                    "python3 tests/fidelity/corpus.py failed (python3 is required)");
    const auto corpus = fidelity::read_corpus(corpus_file);
    REQUIRE(corpus.size() >= std::size_t(random_cases) + 300); // and the fixed cases

    fixture fx;
    auto transport = fx.make_transport();
    store_options o;
    o.schema = test::unique_schema(std::string(fixture::name) + "_fid");
    o.lock = test::fast_locks();
    o.lock.settle = std::chrono::milliseconds(1); // one process: no rival to wait for
    o.lock.retry_interval = std::chrono::milliseconds(1);
    basic_state_store<typename fixture::transport_type> store(transport, o);
    store.ensure_schema();
    const std::string table = detail::quote_identifier(o.schema) + ".`state`";

    // The table's bytes for one id, as Python would read them. NULL is how
    // an empty part is stored (the seed's rule): Meltano reads it as {}.
    auto stored = [&](const std::string& id) {
        auto row = test::stored_parts(transport, table, id);
        if (!row.found)
            return std::pair<std::string, std::string>{"ERROR:no row", "ERROR:no row"};
        return std::pair<std::string, std::string>{row.partial.value_or("{}"), row.completed.value_or("{}")};
    };
    std::ofstream results(dir / "results.tsv");
    std::mutex results_mutex;
    auto emit = [&](const std::string& name, const char* op, const std::string& text) {
        std::string line = name + '\t' + op + '\t' + fidelity::hex_encode(text) + '\n';
        std::lock_guard lk(results_mutex);
        results << line;
    };
    auto guarded = [&](const std::string& name, const char* op, auto&& fn) {
        try {
            fn();
        } catch (const std::exception& e) {
            emit(name, op, std::string("ERROR:") + e.what());
        }
    };

    // How much of the corpus each engine runs, to keep the test command
    // short: chDB all of it; the 18.16 server every case, but the locked
    // operations (update, merge) only on every 8th — there each lock cycle
    // waits for two ALTER TABLE … DELETE mutations; the simulator, in
    // either dialect (no index: each statement scans the table), every
    // 4th case.
    const std::string_view engine = fixture::name;
    const std::size_t case_every = engine.starts_with("simulated") ? 4 : 1;
    const std::size_t locked_every = engine == "server" ? 8 : 1;
    // Cases are independent: several run at once (8 threads, one store each).
    auto run_case = [&](basic_state_store<typename fixture::transport_type>& store, const fidelity::corpus_case& c,
                        bool locked) {
        const std::string id = "fid:" + c.name;
        // Written as a Meltano process writes it: the seed's INSERT, text as is.
        const statement raw = test::seed_insert(table, id, c.text, c.text);
        diagnostics diag;
        if (auto ec = test::run_statement(transport, raw, diag)) {
            emit(c.name, "get", "ERROR:raw insert: " + diag.message);
            return;
        }
        guarded(c.name, "get", [&] {
            auto s = store.get(id);
            emit(c.name, "get", serialize_json(value(s->partial_state)));
            emit(c.name, "get.completed", serialize_json(value(s->completed_state)));
            // The CLI's {"completed": …, "partial": …} text, read back.
            auto cli = state::from_json_text(id, s->to_json_text());
            emit(c.name, "cli", serialize_json(value(cli.partial_state)));
        });
        guarded(c.name, "copy", [&] {
            store.copy(id, id + "/copy");
            emit(c.name, "copy", stored(id + "/copy").first);
        });
        if (locked) {
        guarded(c.name, "merge", [&] {
            store.merge(id, id + "/merged"); // dst := src's merged view (partial onto an equal completed)
            emit(c.name, "merge", stored(id + "/merged").first);
        });
        guarded(c.name, "update+touch", [&] {
            // An incomplete state: merged onto the stored partial; the stored completed part is written back.
            store.update(state{id, object{{"chstate_touch", 1}}, {}});
            auto [partial, completed] = stored(id);
            emit(c.name, "update+touch", partial);
            emit(c.name, "update.completed", completed);
        });
        }
        guarded(c.name, "user+touch", [&] {
            auto s = store.get(id + "/copy"); // a user's own get → modify → set
            s->partial_state["chstate_touch"] = 1;
            store.set(*s);
            emit(c.name, "user+touch", stored(id + "/copy").first);
        });
    };
    {
        std::atomic<std::size_t> next{0};
        std::vector<std::thread> workers;
        for (int w = 0; w < 8; ++w)
            workers.emplace_back([&] {
                basic_state_store<typename fixture::transport_type> own(transport, o);
                for (std::size_t i; (i = next++) < corpus.size();)
                    if (i % case_every == 0)
                        run_case(own, corpus[i], i % locked_every == 0);
            });
        for (auto& w : workers)
            w.join();
    }
    // get_all streams every state; set_all writes the originals back under new ids in one batch.
    std::vector<state> originals;
    std::uint64_t unreadable = 0;
    store.get_all(
        [&](state&& s) {
            if (s.state_id.find('/') != std::string::npos)
                return;
            emit(s.state_id.substr(4), "get_all.completed", serialize_json(value(s.completed_state)));
            s.state_id += "/bulk";
            originals.push_back(std::move(s));
        },
        [&](unreadable_state&& u) {
            ++unreadable;
            emit(u.state_id.substr(4), "get_all.completed", "ERROR:" + u.reason);
        });
    CHECK(unreadable == 0);
    CHECK(originals.size() == (corpus.size() + case_every - 1) / case_every);
    store.set_all(originals);
    for (const auto& s : originals)
        emit(s.state_id.substr(4, s.state_id.size() - 9), "set_all.completed", stored(s.state_id).second);
    results.close();

    const std::string check = "python3 '" + tools + "check.py' --corpus '" + corpus_file.string() + "' --results '" +
                              (dir / "results.tsv").string() + "' --label " + fixture::name +
                              " --every " + std::to_string(case_every);
    const std::string why = "mismatches: see the lines above (" + check + ")";
    CHECK_MESSAGE(fidelity::shell(check) == 0, why);
    // The README's test command reports every engine's results together.
    if (const char* all = std::getenv("CHSTATE_FIDELITY_RESULTS")) {
        fs::create_directories(all);
        fs::copy_file(corpus_file, fs::path(all) / "corpus.tsv", fs::copy_options::overwrite_existing);
        fs::copy_file(dir / "results.tsv", fs::path(all) / ("results-" + std::string(fixture::name) + ".tsv"),
                      fs::copy_options::overwrite_existing);
    }
}
