/*
 * The in-network collectives other than allreduce (src/host/inc_coll.c):
 * each runs on comm's fabric group through its host engine with the
 * collective's kind on the wire (common/wire.h, docs/wire-format.md), so
 * that the ANs reduce toward a root, replicate a root's data, or carry no
 * payload at all.
 */
#ifndef INCOLL_HOST_INC_COLL_H
#define INCOLL_HOST_INC_COLL_H

#include "incoll.h"

#include <stddef.h>

typedef enum {
    HOST_COLL_ALLREDUCE,
    HOST_COLL_REDUCE,
    HOST_COLL_BCAST,
    HOST_COLL_BARRIER,
    HOST_COLL_ALLGATHER,
    HOST_COLL_GATHER,
    HOST_COLL_SCATTER,
    HOST_COLL_REDUCE_SCATTER,
    HOST_COLL_COUNT
} host_coll_kind_t;

/* In-network collectives other than allreduce, on comm's fabric group. Each
 * returns INCOLL_OK with the result in place, INCOLL_ERR_UNSUPPORTED when the
 * group cannot do it (caller falls back to the hosts), or another error from
 * the engine (timeout, group failed) that the caller hands to the recovery like
 * an allreduce's. Arguments are already checked; sendbuf != INCOLL_IN_PLACE
 * (the caller resolved it). */
int host_inc_coll_usable(incoll_comm_h comm, host_coll_kind_t kind,
                         incoll_op_t op, incoll_dtype_t dtype);
incoll_status_t host_inc_reduce(incoll_comm_h comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                incoll_dtype_t dtype, incoll_op_t op, int root);
incoll_status_t host_inc_bcast(incoll_comm_h comm, void *buf, size_t bytes,
                               int root);
incoll_status_t host_inc_barrier(incoll_comm_h comm);
incoll_status_t host_inc_allgather(incoll_comm_h comm, const void *sendbuf,
                                   void *recvbuf, size_t bytes);
incoll_status_t host_inc_gather(incoll_comm_h comm, const void *sendbuf,
                                void *recvbuf, size_t bytes, int root);
incoll_status_t host_inc_scatter(incoll_comm_h comm, const void *sendbuf,
                                 void *recvbuf, size_t bytes, int root);
incoll_status_t host_inc_reduce_scatter(incoll_comm_h comm, const void *sendbuf,
                                        void *recvbuf, size_t count,
                                        incoll_dtype_t dtype, incoll_op_t op);

/*
 * A reduce's (HOST_COLL_REDUCE) or gather's (HOST_COLL_GATHER) non-root
 * that returns early: starts its operation on comm's engine from the
 * calling thread, so that its contribution is on the wire when the call
 * returns (the engine reads sendbuf, which must stay as it is, until the
 * operation ends). The caller checked that the call runs natively in the
 * network now and that the engine is idle. 1 when started
 * (comm->sent_early): the next host_inc_reduce or host_inc_gather on
 * comm, the same call run by the request thread, takes the operation
 * and waits for it; 0 when not (that call starts it).
 */
int host_inc_send_early(incoll_comm_h comm, host_coll_kind_t kind,
                        const void *sendbuf, size_t count, incoll_dtype_t dtype,
                        incoll_op_t op, int root);
/* 1 once when comm's operation was started by host_inc_send_early (then
 * no longer); 0 when not. */
int host_inc_take_early(incoll_comm_h comm);
/* An operation started by host_inc_send_early that its call does not
 * take (the call failed before it came to it, or recovers first): given
 * up with status if it still runs. 1 when there was one (the call had
 * started its operation), 0 when not. */
int host_inc_drop_early(incoll_comm_h comm, incoll_status_t status);

#endif
