// The cluster suite (doctest suite `cluster`, tests/cluster_cases.ipp):
// cluster mode against a real replicated ClickHouse 18.16 rig, run on full
// runs by scripts/check-cluster-suite.sh. A translation unit of its own,
// built into chstate_tests only: the sanitized binaries never run it, and
// compiling it inside server.cpp cost them each a third of that file.
#include "contract.hpp"
#include "server_support.hpp"
#include "support.hpp"

#include <chstate/open.hpp>
#include <chstate/transport/http.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "cluster_cases.ipp"
