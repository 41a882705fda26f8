/*
 * The retransmission timer both host engines share (core/host_engine.c,
 * core/p2p_engine.c): one RFC 6298 estimator of the round trip and its
 * variation, the timeout with its floor, ceiling and backoff, and the
 * reordering window RACK (RFC 8985) waits before calling a hole lost.
 *
 * The floor (INCOLL_RTO_MIN_US) is low so that the timeout follows the
 * measured round trip: a lost packet then costs about one round trip,
 * not a fixed multiple of milliseconds. Giving up stays as slow as
 * before: a packet fails the operation only after its retries AND at
 * least the time that many backoffs from the initial timeout take
 * (rto_give_up), so a lower floor means earlier retransmissions, never
 * earlier failures.
 */
#ifndef INCOLL_RTO_H
#define INCOLL_RTO_H

#include <stdint.h>

typedef struct {
    int64_t srtt;   /* smoothed round trip, ns; 0 before the first sample */
    int64_t rttvar; /* its mean deviation, ns */
    uint64_t rto;   /* current timeout, ns */
    uint64_t init_ns, min_ns, max_ns;
    unsigned backoff; /* timeouts since the last sample (rto_timeout) */
} rto_t;

/* The timer's settings as the settings table's defaults give them
 * (INCOLL_RTO_INIT_US, INCOLL_RTO_MIN_US, INCOLL_RTO_MAX_US,
 * INCOLL_RETRIES, INCOLL_TIMEOUT_MS): what both engines' params start
 * from; libincoll sets its context's configured values over them. */
typedef struct {
    uint64_t init_ns, min_ns, max_ns;
    int retries;
    uint64_t timeout_ns;
} rto_defaults_t;

rto_defaults_t rto_defaults(void);

/* Starts the estimator with timeout init_ns (min_ns when 0), bounded by
 * [min_ns, max_ns]. */
void rto_init(rto_t *r, uint64_t init_ns, uint64_t min_ns, uint64_t max_ns);

/* Feeds sample x into a smoothed mean and its mean deviation with RFC
 * 6298's gains (1/8, 1/4); the first sample (*mean 0) sets them to x and
 * x / 2. */
void rto_smooth(int64_t *mean, int64_t *dev, uint64_t x);

/* Feeds one round-trip sample (Karn: never of a retransmitted packet,
 * unless it is known which transmission was answered). Ends a backoff. */
void rto_sample(rto_t *r, uint64_t rtt_ns);

/* A timeout fired: the timer stays doubled, for every packet, until the
 * next sample (RFC 6298, 5.5 and 5.7). A timeout learnt on short round
 * trips that fires on packets still queued behind a slow link then grows
 * past the queue instead of firing again and again, without a sample
 * ever coming (every packet it fired on was resent). */
void rto_timeout(rto_t *r);

/* The timeout after retries silent retransmissions of a packet, or the
 * timeouts since the last sample if more: rto doubled per retry, at most
 * max_ns. rto_backoff(r, 0) is the timer now. */
uint64_t rto_backoff(const rto_t *r, unsigned retries);

/* RACK's reordering window: a quarter round trip times mult (grown on
 * spurious fast retransmissions) plus twice the deviation. */
uint64_t rto_reo_wnd(const rto_t *r, unsigned mult);

/* 1 when a packet first sent at first_ns and retransmitted retries times
 * may be given up at now_ns: retries reached max_retries and at least
 * the time max_retries backoffs from the initial timeout take (at most
 * max_retries * max_ns) passed. */
int rto_give_up(const rto_t *r, int retries, int max_retries, uint64_t first_ns,
                uint64_t now_ns);

#endif
