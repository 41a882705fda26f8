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

#include <stdint.h>

typedef struct {
    /* The context's UDP socket (payload bytes and datagrams it really
     * sent: retransmissions and acknowledgements included). */
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
     * around it): datagrams the context's socket received (tx_packets
     * above are those it sent), and the calling thread's wake-ups, each
     * return from a wait in which the library blocked (ppoll on the
     * socket, the library lock's condition, node mode's futex waits:
     * host_wakeups in req.h). */
    uint64_t rx_packets;
    uint64_t wakeups;
} host_counters_t;

/* Fills *c_p with comm's (and its context's) counters now. Cheap: no
 * system call, no lock; call it from the thread that runs comm's
 * operations. */
void host_counters_read(incoll_comm_h comm, host_counters_t *c_p);

/*
 * Lets the context answer its peers while the caller waits for something
 * outside libincoll (a barrier in shared memory, say): receives what is
 * waiting and blocks for at most timeout_ns for more (0: does not block).
 * A peer may still need an acknowledgement of the operation just finished.
 */
void host_counters_progress(incoll_comm_h comm, uint64_t timeout_ns);

#endif
