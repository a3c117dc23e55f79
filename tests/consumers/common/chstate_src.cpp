// tests/consumers: the one file of a CHSTATE_SEPARATE_COMPILATION program
// that holds chstate's compiled definitions (docs/using-chstate.md,
// "Compiling chstate once"). http_check_separate is http_check.cpp
// built that way.
#include <chstate/src.hpp>
