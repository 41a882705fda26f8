/*
 * The service calls (service.h): the library's own blocking calls, the
 * same path as the public functions' (api.c calls these for them).
 */
#include "host/service.h"

#include "host/comm.h"
#include "host/host.h"
#include "host/host_colls.h"
#include "host/req.h"

incoll_status_t host_service_allreduce(incoll_comm_h comm, incoll_algo_t algo,
                                       const void *sendbuf, void *recvbuf,
                                       size_t count, incoll_dtype_t dtype,
                                       incoll_op_t op)
{
    LOCKED_CALL(comm, host_allreduce_algo_impl(comm, algo, sendbuf, recvbuf,
                                               count, dtype, op));
}

incoll_status_t host_service_split(incoll_comm_h comm, int color, int key,
                                   incoll_comm_h *newcomm_p)
{
    LOCKED_CALL(comm, host_comm_split_impl(comm, color, key, newcomm_p));
}

incoll_status_t host_service_destroy(incoll_comm_h comm)
{
    incoll_status_t status, early;
    incoll_ctx_h ctx;
    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    ctx = comm->ctx;
    host_enter(ctx, comm);
    /* The error of an operation that returned early, not taken yet. */
    early = host_early_take(comm, INCOLL_OK);
    if (comm != ctx->world)
        host_req_comm_fini(comm);
    status = host_comm_destroy_impl(comm);
    host_unlock(ctx);
    return status == INCOLL_OK ? early : status;
}
