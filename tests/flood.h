/*
 * A flood of TCP connections that never say a word, for the manager's
 * tests (tests/test_integ_mgr.c) and its probe (tests/probe/mgr_flood.c):
 * a child process opens them from a chosen local address and holds them,
 * or opens each again as soon as the manager closes it.
 */
#ifndef INCOLL_TESTS_FLOOD_H
#define INCOLL_TESTS_FLOOD_H

#include <sys/types.h>

/*
 * Starts the flooder: n connections to addr ("IP:PORT") from src (an
 * address of 127/8, e.g. "127.0.0.2"), held open, or (reopen) opened
 * again as soon as the manager closes one. Returns its pid once the first
 * n connections are made, or -1; it runs until killed (it dies with the
 * caller).
 */
pid_t flood_start(const char *addr, const char *src, int n, int reopen);

#endif
