/*
 * The service calls of libincoll (src/host/service.c): what the public
 * functions of include/incoll.h do (take the library lock, progress the
 * requests, wait for the communicator's earlier requests, run the
 * implementation, record where it ran), for the library's own use. The
 * hierarchy (hier.c) makes and frees its leaders' communicator and runs
 * their allreduce through these, never through the public API; api.c's
 * incoll_allreduce_algo, incoll_comm_split and incoll_comm_destroy are
 * these calls too.
 */
#ifndef INCOLL_HOST_SERVICE_H
#define INCOLL_HOST_SERVICE_H

#include "incoll.h"

#include <stddef.h>

/* The body of a blocking call on comm: takes the lock and progresses
 * (after drain's outstanding requests: NULL for none), runs call, records
 * where it ran in comm->where, gives the lock back (host_leave). */
#define LOCKED_CALL_AFTER(comm, drain, call)                                   \
    do {                                                                       \
        incoll_status_t status_;                                               \
        if ((comm) == NULL)                                                    \
            return INCOLL_ERR_INVALID_ARG;                                     \
        host_enter((comm)->ctx, (drain));                                      \
        host_where_begin();                                                    \
        status_ = (call);                                                      \
        (comm)->where = host_where_end(comm);                                  \
        return host_leave((comm), status_);                                    \
    } while (0)
/* A collective of comm: after comm's outstanding requests. */
#define LOCKED_CALL(comm, call) LOCKED_CALL_AFTER(comm, comm, call)

/* The executor's operations (req.h), set on every context at init. */
extern const struct host_req_ops host_service_req_ops;

/* incoll_allreduce_algo. */
incoll_status_t host_service_allreduce(incoll_comm_h comm, incoll_algo_t algo,
                                       const void *sendbuf, void *recvbuf,
                                       size_t count, incoll_dtype_t dtype,
                                       incoll_op_t op);
/* incoll_comm_split. */
incoll_status_t host_service_split(incoll_comm_h comm, int color, int key,
                                   incoll_comm_h *newcomm_p);
/* incoll_comm_destroy. */
incoll_status_t host_service_destroy(incoll_comm_h comm);

/* The same, called with the library lock held (inside another call):
 * they do not take it again, progress, wait for comm's earlier requests
 * or take an early operation's error; they record where the call ran. */
incoll_status_t
host_service_allreduce_locked(incoll_comm_h comm, incoll_algo_t algo,
                              const void *sendbuf, void *recvbuf, size_t count,
                              incoll_dtype_t dtype, incoll_op_t op);
incoll_status_t host_service_split_locked(incoll_comm_h comm, int color,
                                          int key, incoll_comm_h *newcomm_p);
incoll_status_t host_service_destroy_locked(incoll_comm_h comm);

/* incoll_comm_lock and incoll_comm_unlock (include/incoll.h), called with
 * the library lock held after comm's outstanding requests. */
incoll_status_t host_comm_lock_impl(incoll_comm_h comm, unsigned nops,
                                    int *granted_p);
incoll_status_t host_comm_unlock_impl(incoll_comm_h comm);

#endif
