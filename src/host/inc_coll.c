/*
 * In-network reduce, broadcast, barrier, allgather, gather, scatter and
 * reduce_scatter (inc_coll.h): one operation of the host engine with the
 * collective's kind (host_engine_start_coll, _gather, _split; the wire
 * format's "Collectives" section says what the ANs do with each).
 *
 * On communicators that keep results for recovery (host_comm_recoverable,
 * docs/failures.md) every member that receives a result takes it through
 * the communicator's result buffer, as an allreduce does, so the caller's
 * buffers are untouched until success, and after success keeps what a
 * recovery needs to give members behind their result
 * (host_comm_keep_sizes, host_comm_result_kept): a broadcast's data (its
 * root its own), an allgather's vector, the inputs of a reduce's and a
 * gather's non-roots, a scatter root's vector and every member's input
 * of a reduce_scatter; a barrier keeps nothing but its number. So a
 * member that completed an operation can serve it, of any kind, while
 * others are still in it. A broadcast small enough to go one-way or
 * ahead of its round keeps its data apart, by its number
 * (host_comm_bcast_buf), as members may then be several operations apart.
 */
#include "host/inc_coll.h"

#include "host/comm.h"
#include "host/host.h"
#include "host/req.h"

#include "common/dtype.h"

#include <stdint.h>
#include <string.h>

static int overlaps(const void *a, const void *b, size_t len)
{
    const char *pa = a, *pb = b;
    return pa < pb + len && pb < pa + len;
}

int host_inc_coll_usable(incoll_comm_h comm, host_coll_kind_t kind,
                         incoll_op_t op, incoll_dtype_t dtype)
{
    switch (kind) {
    case HOST_COLL_ALLREDUCE:
    case HOST_COLL_REDUCE:
    case HOST_COLL_REDUCE_SCATTER:
        return (unsigned)op < INCOLL_OP_COUNT &&
               (unsigned)dtype < INCOLL_DTYPE_COUNT &&
               incoll_op_valid(op, dtype) &&
               host_comm_inc_usable(comm, op, dtype);
    case HOST_COLL_BCAST:
    case HOST_COLL_BARRIER:
    case HOST_COLL_ALLGATHER:
    case HOST_COLL_GATHER:
    case HOST_COLL_SCATTER:
        /* Bytes, no arithmetic: what the packets say (uint8, sum). */
        return host_comm_inc_usable(comm, INCOLL_OP_SUM, INCOLL_UINT8);
    default:
        return 0;
    }
}

/* The operation as the recovery sees it. */
static host_rec_call_t rec_call(host_coll_kind_t kind, int root,
                                const void *sendbuf, void *recvbuf,
                                size_t count, incoll_dtype_t dtype,
                                incoll_op_t op)
{
    host_rec_call_t c = {(int)kind, root, count, dtype, op, sendbuf, recvbuf};
    return c;
}

/*
 * Recoverable comms: the result buffer for an operation writing out bytes
 * there, with room behind them for the input it keeps (*in_bytes), or
 * NULL without memory; (void *)comm when nothing is written nor kept.
 */
static void *kept_buf(incoll_comm_h comm, const host_rec_call_t *c, size_t out,
                      size_t *in_bytes)
{
    size_t rb;
    host_comm_keep_sizes(c, comm->rank, comm->size, &rb, in_bytes);
    if (out + *in_bytes == 0)
        return comm;
    return host_comm_result_buf(comm, out + *in_bytes);
}

/* The engine's next operation: its root rank rides in its packets, so
 * that the ANs fail the call when members disagree about it
 * (docs/failures.md, "Erroneous programs"). */
static void finish_and_root(incoll_comm_h comm, int root_rank)
{
    host_comm_finish_op(comm);
    host_engine_set_root(comm->eng, root_rank < 0 ? 0 : (uint32_t)root_rank);
}

int host_inc_take_early(incoll_comm_h comm)
{
    if (!comm->sent_early)
        return 0;
    comm->sent_early = 0;
    return 1;
}

int host_inc_drop_early(incoll_comm_h comm, incoll_status_t status)
{
    if (!host_inc_take_early(comm))
        return 0;
    if (host_engine_status(comm->eng) == INCOLL_INPROGRESS)
        host_engine_abandon(
            comm->eng, status != INCOLL_OK ? status : INCOLL_ERR_GROUP_FAILED);
    return 1;
}

int host_inc_send_early(incoll_comm_h comm, host_coll_kind_t kind,
                        const void *sendbuf, size_t count, incoll_dtype_t dtype,
                        incoll_op_t op, int root)
{
    uint64_t ops, now = host_now_ns();
    size_t total;
    incoll_status_t status;

    if (comm->sent_early || comm->eng == NULL || comm->rank == root ||
        comm->size < 2 || count == 0 ||
        host_engine_status(comm->eng) == INCOLL_INPROGRESS)
        return 0;
    ops = host_engine_counters(comm->eng)->ops;
    /* What host_inc_reduce and gather_run start at a non-root. */
    switch (kind) {
    case HOST_COLL_REDUCE:
        finish_and_root(comm, root);
        status = host_engine_start_coll(comm->eng, WIRE_COLL_REDUCE, 0, sendbuf,
                                        NULL, count, dtype, op, now);
        break;
    case HOST_COLL_GATHER:
        if (count > SIZE_MAX / (size_t)comm->size)
            return 0;
        total = count * (size_t)comm->size;
        finish_and_root(comm, root);
        status = host_engine_start_gather(comm->eng, WIRE_COLL_GATHER, 0,
                                          sendbuf, count * (size_t)comm->rank,
                                          count, NULL, total, now);
        break;
    default:
        return 0;
    }
    udp_flush(comm->ctx->sock);
    if (status != INCOLL_INPROGRESS)
        return 0; /* the call meets the same refusal and says why */
    comm->sent_early = 1;
    comm->sent_ops = ops;
    return 1;
}

/* One operation of the engine, waited for: until its result, or a
 * broadcast's non-root until its data is in (host_comm_wait_data; its
 * round then ends later, host_req_finish_later). root: whether this rank
 * is the root; root_rank: the call's root. */
static incoll_status_t run(incoll_comm_h comm, wire_coll_t kind, int root,
                           int root_rank, const void *sendbuf, void *recvbuf,
                           size_t count, incoll_dtype_t dtype, incoll_op_t op)
{
    incoll_status_t status;
    if (host_inc_take_early(comm)) {
        /* (ended already or not: the same end as below) */
        status = host_comm_wait(comm);
    } else {
        finish_and_root(comm, root_rank);
        status = host_engine_start_coll(comm->eng, kind, root, sendbuf, recvbuf,
                                        count, dtype, op, host_now_ns());
    }
    if (status == INCOLL_INPROGRESS)
        status = kind == WIRE_COLL_BCAST && !root ? host_comm_wait_data(comm)
                                                  : host_comm_wait(comm);
    if (status == INCOLL_OK &&
        host_engine_status(comm->eng) == INCOLL_INPROGRESS)
        host_req_finish_later(comm);
    return status;
}

incoll_status_t host_inc_reduce(incoll_comm_h comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                incoll_dtype_t dtype, incoll_op_t op, int root)
{
    size_t bytes = count * incoll_dtype_size(dtype);
    int me = comm->rank == root;
    incoll_status_t status;
    void *res;

    /* (one started as the call returned early is this call's, usable or
     * not since) */
    if (!comm->sent_early &&
        !host_inc_coll_usable(comm, HOST_COLL_REDUCE, op, dtype))
        return INCOLL_ERR_UNSUPPORTED;
    if (count == 0)
        return INCOLL_OK;
    if (comm->size == 1) {
        if (sendbuf != recvbuf)
            memmove(recvbuf, sendbuf, bytes);
        return INCOLL_OK;
    }
    if (host_comm_recoverable(comm)) {
        host_rec_call_t c = rec_call(HOST_COLL_REDUCE, root, sendbuf, recvbuf,
                                     count, dtype, op);
        size_t out = me ? bytes : 0, in;
        if ((res = kept_buf(comm, &c, out, &in)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        status = run(comm, WIRE_COLL_REDUCE, me, root, sendbuf, me ? res : NULL,
                     count, dtype, op);
        if (status == INCOLL_OK) {
            host_comm_result_kept(comm, &c, out, sendbuf, in);
            if (me)
                memcpy(recvbuf, res, bytes);
        }
        return status;
    }
    if (!me)
        return run(comm, WIRE_COLL_REDUCE, 0, root, sendbuf, NULL, count, dtype,
                   op);
    /* The engine's input stays intact until the result is in (a failed
     * operation may run again): stage an overlapping input. */
    if (overlaps(sendbuf, recvbuf, bytes)) {
        status = host_comm_scratch(comm, bytes);
        if (status != INCOLL_OK)
            return status;
        memcpy(comm->scratch, sendbuf, bytes);
        sendbuf = comm->scratch;
    }
    return run(comm, WIRE_COLL_REDUCE, 1, root, sendbuf, recvbuf, count, dtype,
               op);
}

incoll_status_t host_inc_bcast(incoll_comm_h comm, void *buf, size_t bytes,
                               int root)
{
    int me = comm->rank == root;
    incoll_status_t status;
    void *res;

    if (!host_inc_coll_usable(comm, HOST_COLL_BCAST, INCOLL_OP_SUM,
                              INCOLL_UINT8))
        return INCOLL_ERR_UNSUPPORTED;
    if (bytes == 0 || comm->size == 1)
        return INCOLL_OK;
    if (!host_comm_recoverable(comm))
        return run(comm, WIRE_COLL_BCAST, me, root, me ? buf : NULL,
                   me ? NULL : buf, bytes, INCOLL_UINT8, INCOLL_OP_SUM);
    res = host_comm_bcast_buf(comm, bytes);
    if (res == NULL)
        return INCOLL_ERR_NO_MEMORY;
    status = run(comm, WIRE_COLL_BCAST, me, root, me ? buf : NULL,
                 me ? NULL : res, bytes, INCOLL_UINT8, INCOLL_OP_SUM);
    if (status == INCOLL_OK) {
        host_rec_call_t c = rec_call(HOST_COLL_BCAST, root, buf, buf, bytes,
                                     INCOLL_UINT8, INCOLL_OP_SUM);
        if (me)
            memcpy(res, buf, bytes);
        else
            memcpy(buf, res, bytes);
        host_comm_bcast_kept(comm, &c, bytes);
    }
    return status;
}

incoll_status_t host_inc_barrier(incoll_comm_h comm)
{
    if (!host_inc_coll_usable(comm, HOST_COLL_BARRIER, INCOLL_OP_SUM,
                              INCOLL_UINT8))
        return INCOLL_ERR_UNSUPPORTED;
    incoll_status_t status;

    if (comm->size == 1)
        return INCOLL_OK;
    status = run(comm, WIRE_COLL_BARRIER, 0, 0, NULL, NULL, 1, INCOLL_UINT8,
                 INCOLL_OP_SUM);
    if (status == INCOLL_OK && host_comm_recoverable(comm)) {
        /* Nothing to keep but that this operation completed here. */
        host_rec_call_t c = rec_call(HOST_COLL_BARRIER, 0, NULL, NULL, 0,
                                     INCOLL_UINT8, INCOLL_OP_SUM);
        host_comm_result_kept(comm, &c, 0, NULL, 0);
    }
    return status;
}

/* Starts an allgather's or gather's operation on comm's engine, or takes
 * the one this member's call started already (host_inc_send_early). */
static incoll_status_t start_gather(incoll_comm_h comm, wire_coll_t kind,
                                    int root, const void *sendbuf, size_t off,
                                    size_t bytes, void *res, size_t total)
{
    if (host_inc_take_early(comm))
        return host_comm_wait(comm);
    finish_and_root(comm, root);
    return host_engine_start_gather(comm->eng, kind, comm->rank == root,
                                    sendbuf, off, bytes, res, total,
                                    host_now_ns());
}

/*
 * Allgather (root -1) or gather of bytes per rank: this rank's block is
 * bytes [rank * bytes, (rank + 1) * bytes) of the vector. The block may
 * sit at its own place in recvbuf (MPI's in place): the result writes
 * the same bytes there. Any other overlap is staged.
 */
static incoll_status_t gather_run(incoll_comm_h comm, wire_coll_t kind,
                                  const void *sendbuf, void *recvbuf,
                                  size_t bytes, int root)
{
    size_t total = bytes * (size_t)comm->size, off = bytes * (size_t)comm->rank;
    int me = kind == WIRE_COLL_ALLGATHER || comm->rank == root;
    incoll_status_t status;
    void *res;

    if (bytes == 0)
        return INCOLL_OK;
    if (comm->size == 1) {
        if (me && sendbuf != recvbuf)
            memmove(recvbuf, sendbuf, bytes);
        return INCOLL_OK;
    }
    if (host_comm_recoverable(comm)) {
        host_rec_call_t c =
            rec_call(kind == WIRE_COLL_ALLGATHER ? HOST_COLL_ALLGATHER
                                                 : HOST_COLL_GATHER,
                     root < 0 ? 0 : root, sendbuf, recvbuf, bytes, INCOLL_UINT8,
                     INCOLL_OP_SUM);
        size_t out = me ? total : 0, in;
        if ((res = kept_buf(comm, &c, out, &in)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        status = start_gather(comm, kind, root, sendbuf, off, bytes,
                              me ? res : NULL, total);
        if (status == INCOLL_INPROGRESS)
            status = host_comm_wait(comm);
        if (status == INCOLL_OK) {
            host_comm_result_kept(comm, &c, out, sendbuf, in);
            if (me)
                memcpy(recvbuf, res, total);
        }
        return status;
    }
    if (me && sendbuf != (const char *)recvbuf + off &&
        overlaps(sendbuf, recvbuf, total) && bytes <= total) {
        status = host_comm_scratch(comm, bytes);
        if (status != INCOLL_OK)
            return status;
        memcpy(comm->scratch, sendbuf, bytes);
        sendbuf = comm->scratch;
    }
    status = start_gather(comm, kind, root, sendbuf, off, bytes,
                          me ? recvbuf : NULL, total);
    if (status == INCOLL_INPROGRESS)
        status = host_comm_wait(comm);
    return status;
}

incoll_status_t host_inc_allgather(incoll_comm_h comm, const void *sendbuf,
                                   void *recvbuf, size_t bytes)
{
    if (!host_inc_coll_usable(comm, HOST_COLL_ALLGATHER, INCOLL_OP_SUM,
                              INCOLL_UINT8))
        return INCOLL_ERR_UNSUPPORTED;
    return gather_run(comm, WIRE_COLL_ALLGATHER, sendbuf, recvbuf, bytes, -1);
}

incoll_status_t host_inc_gather(incoll_comm_h comm, const void *sendbuf,
                                void *recvbuf, size_t bytes, int root)
{
    if (!comm->sent_early && !host_inc_coll_usable(comm, HOST_COLL_GATHER,
                                                   INCOLL_OP_SUM, INCOLL_UINT8))
        return INCOLL_ERR_UNSUPPORTED;
    return gather_run(comm, WIRE_COLL_GATHER, sendbuf, recvbuf, bytes, root);
}

/*
 * Scatter (bytes, root >= 0) or reduce_scatter (root -1) of count elements
 * per rank: sendbuf is the whole vector (the root's, or every rank's
 * input), recvbuf this rank's block. The block may be recvbuf at its own
 * place in sendbuf (a scatter's root in place: the result writes the same
 * bytes); any other overlap is staged, as the engine reads the vector
 * until its last segment's result is in.
 */
static incoll_status_t split_run(incoll_comm_h comm, wire_coll_t kind,
                                 const void *sendbuf, void *recvbuf,
                                 size_t count, incoll_dtype_t dtype,
                                 incoll_op_t op, int root)
{
    size_t ds = incoll_dtype_size(dtype);
    size_t total = count * (size_t)comm->size, off = count * (size_t)comm->rank;
    int has_vec = kind == WIRE_COLL_REDUCE_SCATTER || comm->rank == root;
    incoll_status_t status;
    void *res;

    if (count == 0)
        return INCOLL_OK;
    if (comm->size == 1) {
        if (sendbuf != recvbuf)
            memmove(recvbuf, sendbuf, count * ds);
        return INCOLL_OK;
    }
    if (host_comm_recoverable(comm)) {
        host_rec_call_t c =
            rec_call(kind == WIRE_COLL_SCATTER ? HOST_COLL_SCATTER
                                               : HOST_COLL_REDUCE_SCATTER,
                     root < 0 ? 0 : root, sendbuf, recvbuf, count, dtype, op);
        size_t in;
        if ((res = kept_buf(comm, &c, count * ds, &in)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        finish_and_root(comm, root);
        status = host_engine_start_split(comm->eng, kind, comm->rank == root,
                                         has_vec ? sendbuf : NULL, off, count,
                                         res, total, dtype, op, host_now_ns());
        if (status == INCOLL_INPROGRESS)
            status = host_comm_wait(comm);
        if (status == INCOLL_OK) {
            host_comm_result_kept(comm, &c, count * ds, sendbuf, in);
            memcpy(recvbuf, res, count * ds);
        }
        return status;
    }
    if (has_vec && recvbuf != (const char *)sendbuf + off * ds &&
        overlaps(sendbuf, recvbuf, total * ds)) {
        status = host_comm_scratch(comm, total * ds);
        if (status != INCOLL_OK)
            return status;
        memcpy(comm->scratch, sendbuf, total * ds);
        sendbuf = comm->scratch;
    }
    finish_and_root(comm, root);
    status = host_engine_start_split(comm->eng, kind, comm->rank == root,
                                     has_vec ? sendbuf : NULL, off, count,
                                     recvbuf, total, dtype, op, host_now_ns());
    if (status == INCOLL_INPROGRESS)
        status = host_comm_wait(comm);
    return status;
}

incoll_status_t host_inc_scatter(incoll_comm_h comm, const void *sendbuf,
                                 void *recvbuf, size_t bytes, int root)
{
    if (!host_inc_coll_usable(comm, HOST_COLL_SCATTER, INCOLL_OP_SUM,
                              INCOLL_UINT8))
        return INCOLL_ERR_UNSUPPORTED;
    if (comm->rank != root)
        sendbuf = NULL; /* significant at the root only */
    return split_run(comm, WIRE_COLL_SCATTER, sendbuf, recvbuf, bytes,
                     INCOLL_UINT8, INCOLL_OP_SUM, root);
}

incoll_status_t host_inc_reduce_scatter(incoll_comm_h comm, const void *sendbuf,
                                        void *recvbuf, size_t count,
                                        incoll_dtype_t dtype, incoll_op_t op)
{
    if (!host_inc_coll_usable(comm, HOST_COLL_REDUCE_SCATTER, op, dtype))
        return INCOLL_ERR_UNSUPPORTED;
    return split_run(comm, WIRE_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count,
                     dtype, op, -1);
}
