/*
 * The allreduce (src/host/allreduce.c).
 */
#ifndef INCOLL_HOST_ALLREDUCE_H
#define INCOLL_HOST_ALLREDUCE_H

#include "incoll.h"

/* incoll_allreduce_algo's implementation, called with the lock held
 * (service.c runs it for api.c and the executor). */
incoll_status_t host_allreduce_algo_impl(incoll_comm_h comm, incoll_algo_t algo,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, incoll_dtype_t dtype,
                                         incoll_op_t op);
/* incoll_allreduce for the library's own exchanges, under the lock the
 * caller holds (allreduce.c). */
incoll_status_t host_allreduce_service(incoll_comm_h comm, const void *sendbuf,
                                       void *recvbuf, size_t count,
                                       incoll_dtype_t dtype, incoll_op_t op);

/* host_allreduce_service for an exchange that is none of the job's
 * collectives (a split's agreement): not counted where collectives ran
 * (host_usage_begin: not the outermost call). comm.c reaches it through
 * ctx->up.allreduce. */
incoll_status_t host_allreduce_own(incoll_comm_h comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   incoll_dtype_t dtype, incoll_op_t op);

#endif
