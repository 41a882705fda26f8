/*
 * The hierarchy of a communicator (src/host/hier.c): its ranks that share
 * a host (node mode) or a CPU socket (socket mode) reduce through a
 * shared-memory segment (src/host/shm.h) into one leader, in the order of
 * their ranks; the leaders, one per host or socket, form a communicator
 * of their own that runs the in-network operation (its fabric group has
 * one child per host or socket) or a host-based algorithm; the result
 * goes back through the segment. INCOLL_HIER=node|socket|flat chooses;
 * node is the default and only matters where a host has more than one
 * rank of the communicator.
 *
 * It is made on a communicator's first allreduce (collective: every
 * member makes it at the same call) and freed with the communicator.
 */
#ifndef INCOLL_HOST_HIER_H
#define INCOLL_HOST_HIER_H

#include "incoll.h"

#include <stddef.h>

struct host_hier; /* per communicator: incoll_comm.hier */

/* 1 when allreduce on comm goes through the hierarchy (made now if it
 * does not exist yet, which is collective over comm); 0 when it runs
 * flat: INCOLL_HIER=flat, one rank per host, the hierarchy is being made,
 * or comm is itself a communicator of leaders. *status_p gets an error
 * when making it failed (then 0 is returned and the call must fail). */
int host_hier_active(incoll_comm_h comm, incoll_status_t *status_p);

/*
 * Allreduce on a communicator whose hierarchy is active (host_hier_active):
 * count > 0, sendbuf is not INCOLL_IN_PLACE (it may equal recvbuf), args
 * checked. algo is what the leaders run (AUTO, INC or a host-based one).
 */
incoll_status_t host_hier_allreduce(incoll_comm_h comm, incoll_algo_t algo,
                                    const void *sendbuf, void *recvbuf,
                                    size_t count, incoll_dtype_t dtype,
                                    incoll_op_t op);

/*
 * A member of comm refused its arguments of a call (host_comm_refuse):
 * when comm's collectives go through its hierarchy, the call fails on
 * every member through it (the leaders' communicator refuses the call,
 * every leader tells its members) and 1 is returned with *status_p the
 * outcome (INCOLL_OK: refused on every member). 0 when comm has no
 * hierarchy: the caller refuses on comm itself.
 */
int host_hier_refuse(incoll_comm_h comm, incoll_status_t *status_p);

/* 1 when comm's collectives go through its hierarchy (made, active or
 * broken); never makes it. */
int host_hier_on(incoll_comm_h comm);

/* 1 when comm's hierarchy is made or known flat, so that
 * host_hier_active makes nothing; never makes it. */
int host_hier_decided(incoll_comm_h comm);

/* Sets the mode of comm's hierarchy ("node", "socket" or "flat") instead
 * of INCOLL_HIER; on every member, before comm's first allreduce
 * (benchmarks compare the modes side by side). */
incoll_status_t host_hier_set_mode(incoll_comm_h comm, const char *mode);

/* The communicator of leaders comm's allreduces go through, NULL when
 * this rank is not a leader or comm has no hierarchy; for statistics and
 * tests. nlocal_p (may be NULL) gets the ranks of comm on this rank's
 * host (or socket). */
incoll_comm_h host_hier_leaders(incoll_comm_h comm, int *nlocal_p);

/* Frees comm's hierarchy: detaches from the segment and destroys the
 * leaders' communicator. host_comm_free() calls it. */
void host_hier_free(incoll_comm_h comm);

#endif
