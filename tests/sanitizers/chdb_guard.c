/* A stand-in libchdb.so for sanitized runs (scripts/sanitizers.sh).
 *
 * The sanitized test binary is built with CHSTATE_CHDB_LIBRARY pointing here
 * and runs with the CHSTATE_CHDB_LIBRARY environment variable pointing here,
 * so this file is the first candidate chstate's loader dlopens
 * (transport/chdb.hpp) whatever path a test takes to the embedded engine.
 * Loading it stops the run at once, saying why: the real libchdb.so crashes
 * inside its own start-up under AddressSanitizer, and a test that reaches
 * chDB in a sanitized run has to be excluded by name in scripts/sanitizers.sh.
 * (doctest's crash handler then names the test case.) */
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void chstate_refuse_chdb(void) {
    static const char msg[] =
        "chstate sanitizers: a test case loaded the embedded engine (chDB) in a sanitized run; "
        "chDB is never loaded under sanitizers - exclude that test case in scripts/sanitizers.sh (chdb_cases)\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
}
