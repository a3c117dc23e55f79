// Cleanups main() runs after the tests, before static destruction (chDB
// crashes when its connections are closed during static destruction).
#pragma once

#include <functional>

namespace chstate::test {
void at_shutdown(std::function<void()> hook);
void run_shutdown_hooks();
} // namespace chstate::test
