/*
 * What a measuring tool may read of libincoll's state: the counters of a
 * context's UDP socket and of a communicator's in-network engine, read
 * through one call instead of through struct incoll_ctx and struct
 * incoll_comm (src/host/host.h), whose layout belongs to the library.
 *
 * The benchmarks (tools/bench_*.c) are the users. They read the counters
 * before and after one operation and keep the difference, so what is
 * returned is a snapshot of monotonically growing totals, never reset.
 * The engine's counters are per engine: a communicator that lost its
 * group and got another (recovery) has a new engine whose counters start
 * at zero, so a caller compares `engine` of the two snapshots before it
 * subtracts. Internal API: declared here, linked from libincoll-internal.a,
 * not exported by the installed library.
 */
#ifndef INCOLL_HOST_COUNTERS_H
#define INCOLL_HOST_COUNTERS_H

#include "incoll.h"

#include "host/host.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    /* The context's UDP socket (payload bytes and datagrams it really
     * sent: retransmissions and acknowledgements included), and what
     * this process sent as a member on its leaders' sockets (node mode's
     * shared socket). */
    uint64_t tx_bytes;
    uint64_t tx_packets;
    /* The communicator's in-network engine; all 0 and has_engine 0 when
     * the communicator has no fabric group (host-based only). */
    int has_engine;
    uintptr_t engine;         /* identity of the engine (see above) */
    uint64_t eng_bytes_sent;  /* datagrams of the engine, headers included */
    uint64_t eng_retransmits; /* timeout and fast retransmissions */
    /* Blocking calls on the communicator that returned early
     * (INCOLL_EARLY_MAX), and how many of them first waited for the
     * oldest of the communicator's outstanding early operations (its ring
     * of copies was full). */
    uint64_t early_returns;
    uint64_t early_waits;
    /* The cost of an operation, counted (the difference of two snapshots
     * around it): datagrams the context's sockets received, its multicast one
     * too (tx_packets above are those it sent), and the calling thread's
     * wake-ups, each return from a wait in which the library blocked (ppoll on
     * the socket, the library lock's condition, node mode's futex waits:
     * host_wakeups in req.h). */
    uint64_t rx_packets;
    uint64_t wakeups;
    /* The same wake-ups of every thread of the process (the request
     * threads' and the watcher's too): what an operation costs the
     * process when part of it runs after its call returned. */
    uint64_t wakeups_all;
} host_counters_t;

/* Fills *c_p with comm's (and its context's) counters now. Cheap: no
 * system call, no lock; call it from the thread that runs comm's
 * operations. */
void host_counters_read(incoll_comm_h comm, host_counters_t *c_p);

/* Node mode's shared socket (INCOLL_HIER_SHARED): a member sent a datagram
 * of bytes on its leader's UDP socket, whose own counters are the
 * leader's; host_counters_read adds these to the socket's. */
void host_counters_shared_sent(size_t bytes);

/*
 * Lets the context answer its peers while the caller waits for something
 * outside libincoll (a barrier in shared memory, say): receives what is
 * waiting and blocks for at most timeout_ns for more (0: does not block).
 * A peer may still need an acknowledgement of the operation just finished.
 */
void host_counters_progress(incoll_comm_h comm, uint64_t timeout_ns);

/*
 * Where collectives ran, for the manager's per-job and per-group metrics
 * (docs/metrics.md): each communicator's rank 0 counts the collectives
 * that completed on it, in the network or in software (on the hosts) and
 * why (mgr_fb_t), and reports the counts (MGR_USAGE) at most every
 * INCOLL_USAGE_MS (default 1000; 0 only at the end), when the
 * communicator is destroyed and at incoll_finalize. Counting is cheap: a
 * few additions and, at most once per period, a report of every
 * communicator of the context in one message.
 *
 * A collective that runs as another (a broadcast as an allreduce, an
 * allreduce through the hosts' leaders) counts once, as the outermost
 * call of its thread: host_usage_begin()/host_usage_end() bracket every
 * collective, and only a note at depth 1 counts.
 */
struct incoll_ctx;
void host_usage_begin(void);
void host_usage_end(void);
/* The collective on comm completed in the network (reason -1) or in
 * software for reason (mgr_fb_t). */
void host_usage_note(incoll_comm_h comm, int reason);
/* One collective of comm that ran outside the library (a front end's own),
 * for reason (mgr_fb_t): counted whatever the depth. */
void host_usage_count(incoll_comm_h comm, int reason);
/* The same without the library lock, for the public
 * incoll_comm_count_elsewhere: an atomic count that the next count under
 * the lock, or report, takes in. 1 when the caller should now take the
 * lock and call host_usage_settle(comm) (once every few dozen calls: a
 * report may be due), 0 otherwise. */
int host_usage_count_nolock(incoll_comm_h comm, int reason);
/* Lock held: takes in what host_usage_count_nolock counted of comm, and
 * reports when the period passed. */
void host_usage_settle(incoll_comm_h comm);
/* The collective on comm completed where the last collective noted inside
 * it ran (an allreduce through the leaders' communicator); nothing when
 * none was. */
void host_usage_note_inner(incoll_comm_h comm);
/* Reports what comm (NULL: every communicator of ctx) has counted and not
 * reported; kept for the next report when the manager is unreachable. */
void host_usage_flush(struct incoll_ctx *ctx, incoll_comm_h comm);
/* Frees comm's counts (comm goes away). */
void host_usage_free(incoll_comm_h comm);

/*
 * The process's counters of the result path (MGR_PC_*: its operations,
 * datagrams received and sent, wake-ups, multicast results, duplicates,
 * repairs and fallbacks) go to the manager with the usage, from every
 * process of a job, as increments since the last report
 * (MGR_USAGE_PROC); the manager sums them per job. comm's engine is
 * about to go (freed, rebuilt, failed): what it counted is kept for the
 * next report.
 */
void host_counters_engine_gone(incoll_comm_h comm);

/*
 * (src/host/counters.c) Where the collective that the calling thread runs now
 * ran (the public queries incoll_comm_where and incoll_req_where take it from
 * here): host_where_begin() before it, host_where_note() where the algorithms
 * decide, host_where_end() after it, which says, when nothing was noted,
 * what the communicator's state says (in the network when offloaded).
 * Per thread: a blocking call runs in its caller's thread, a request in
 * its communicator's.
 */
void host_where_begin(void);
void host_where_note(int in_net, incoll_why_t why);
host_where_t host_where_end(incoll_comm_h comm);
/* w as the public incoll_where_t (its text from comm's state). */
void host_where_fill(incoll_comm_h comm, host_where_t w, incoll_where_t *out);
/* 1 when the last collective host_coll_run() completed in this thread ran
 * in the network (natively or as an allreduce there): for the benchmarks. */
int host_coll_last_in_net(void);

#endif
