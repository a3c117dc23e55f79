// The fault suite (issue 11): the server killed, stopped past the timeout or
// restarted under a stream of writes; idle connections the server closed;
// exceptions after status 200. Counted in test::faults() (tests/tallies.hpp).
