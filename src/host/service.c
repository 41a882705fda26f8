/*
 * The service calls (service.h): the library's own blocking calls, the
 * same path as the public functions' (api.c calls these for them), and
 * the executor's operations table. Below the hierarchy (hier.c makes and
 * runs its leaders' communicator with these): where a call must go
 * through a communicator's hierarchy, it is reached through ctx->up.
 */
#include "host/service.h"

#include "host/comm.h"
#include "host/host.h"
#include "host/counters.h"
#include "host/colls.h"
#include "host/req.h"
#include "host/allreduce.h"
#include "host/stream.h"

#include "common/log.h"

/* The executor's operations (req.h): each request kind's implementation. */
static incoll_status_t run_allreduce(const host_req_args_t *a)
{
    incoll_status_t status;
    a->comm->call_tag = a->tag;
    status = host_allreduce_algo_impl(a->comm, a->algo, a->sendbuf, a->recvbuf,
                                      a->count, a->dtype, a->op);
    a->comm->call_tag = 0;
    return status;
}

static incoll_status_t run_reduce(const host_req_args_t *a)
{
    return host_reduce_impl(a->comm, a->sendbuf, a->recvbuf, a->count, a->dtype,
                            a->op, a->root);
}

static incoll_status_t run_bcast(const host_req_args_t *a)
{
    return host_bcast_impl(a->comm, a->recvbuf, a->count, a->root);
}

static incoll_status_t run_barrier(const host_req_args_t *a)
{
    return host_barrier_impl(a->comm);
}

static incoll_status_t run_allgather(const host_req_args_t *a)
{
    return host_allgather_impl(a->comm, a->sendbuf, a->recvbuf, a->count);
}

static incoll_status_t run_gather(const host_req_args_t *a)
{
    return host_gather_impl(a->comm, a->sendbuf, a->recvbuf, a->count, a->root);
}

static incoll_status_t run_scatter(const host_req_args_t *a)
{
    return host_scatter_impl(a->comm, a->sendbuf, a->recvbuf, a->count,
                             a->root);
}

static incoll_status_t run_reduce_scatter(const host_req_args_t *a)
{
    return host_reduce_scatter_impl(a->comm, a->sendbuf, a->recvbuf, a->count,
                                    a->dtype, a->op);
}

const host_req_ops_t host_service_req_ops = {
    .run = {[RQ_ALLREDUCE] = run_allreduce,
            [RQ_REDUCE] = run_reduce,
            [RQ_BCAST] = run_bcast,
            [RQ_BARRIER] = run_barrier,
            [RQ_ALLGATHER] = run_allgather,
            [RQ_GATHER] = run_gather,
            [RQ_SCATTER] = run_scatter,
            [RQ_REDUCE_SCATTER] = run_reduce_scatter},
    .early_ok = host_coll_early_ok,
    .early_send = host_coll_early_send,
    .stream_end = host_stream_end,
    .stream_would_lock = host_stream_would_lock,
};

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

/* The same with the lock already held by the caller: no progress, no wait
 * for earlier requests, no early error taken (what a call made inside
 * another does). */
incoll_status_t
host_service_allreduce_locked(incoll_comm_h comm, incoll_algo_t algo,
                              const void *sendbuf, void *recvbuf, size_t count,
                              incoll_dtype_t dtype, incoll_op_t op)
{
    incoll_status_t status;
    host_where_begin();
    status = host_allreduce_algo_impl(comm, algo, sendbuf, recvbuf, count,
                                      dtype, op);
    comm->where = host_where_end(comm);
    return status;
}

incoll_status_t host_service_split_locked(incoll_comm_h comm, int color,
                                          int key, incoll_comm_h *newcomm_p)
{
    incoll_status_t status;
    host_where_begin();
    status = host_comm_split_impl(comm, color, key, newcomm_p);
    comm->where = host_where_end(comm);
    return status;
}

incoll_status_t host_service_destroy_locked(incoll_comm_h comm)
{
    if (comm != comm->ctx->world)
        host_req_comm_fini(comm);
    return host_comm_destroy_impl(comm);
}

/* incoll_comm_lock and incoll_comm_unlock: on comm's own engine, or,
 * through a hierarchy (hier.c, reached through ctx->up), on the leaders'
 * communicator, whose answer every member learns. */
incoll_status_t host_comm_lock_impl(incoll_comm_h comm, unsigned nops,
                                    int *granted_p)
{
    incoll_status_t status = INCOLL_OK, agreed;
    incoll_comm_h leaders;
    int32_t granted = 0;
    int g = 0;

    if (nops > 65535) {
        incoll_error("comm_lock: %u operations: at most 65535 (0: until "
                     "incoll_comm_unlock)",
                     nops);
        return INCOLL_ERR_INVALID_ARG;
    }
    if (comm->size < 2) {
        /* Nothing to stream with: refused. */
    } else if (comm->ctx->up.hier_active(comm, &status)) {
        /* Ranks sharing a host go through their leader: the leaders'
         * communicator locks, and every member learns its answer. */
        leaders = comm->ctx->up.hier_leaders(comm, NULL);
        if (leaders != NULL)
            status = host_stream_lock(leaders, (uint16_t)nops, &g);
        granted = g;
        agreed =
            host_allreduce_algo_impl(comm, INCOLL_ALGO_AUTO, &granted, &granted,
                                     1, INCOLL_INT32, INCOLL_OP_MAX);
        if (status == INCOLL_OK)
            status = agreed;
    } else if (status == INCOLL_OK) {
        status = host_stream_lock(comm, (uint16_t)nops, &g);
        granted = g;
    }
    if (status == INCOLL_OK && granted_p != NULL)
        *granted_p = granted != 0;
    return status;
}

incoll_status_t host_comm_unlock_impl(incoll_comm_h comm)
{
    incoll_status_t status = INCOLL_OK;
    incoll_comm_h leaders;

    if (comm->size < 2)
        return INCOLL_OK;
    if (comm->hier != NULL) {
        leaders = comm->ctx->up.hier_leaders(comm, NULL);
        if (leaders != NULL)
            status = host_stream_unlock(leaders);
    }
    if (status == INCOLL_OK)
        status = host_stream_unlock(comm);
    return status;
}
