/*
 * The monotonic clock, in the units the code uses: one definition for the
 * daemons, the library, the tools and the tests (CLOCK_MONOTONIC: never
 * steps back, not the wall clock). Header-only so that any program of the
 * tree can use it without linking anything.
 */
#ifndef INCOLL_CLOCK_H
#define INCOLL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t now_us(void)
{
    return now_ns() / 1000;
}

static inline uint64_t now_ms(void)
{
    return now_ns() / 1000000;
}

/* Seconds, as a double (for timeouts and reports). */
static inline double now_s(void)
{
    return (double)now_ns() / 1e9;
}

#endif
