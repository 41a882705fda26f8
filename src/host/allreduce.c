/*
 * incoll_allreduce: argument checks, staging of in-place and overlapping
 * buffers (so a failed operation never leaves the input half overwritten),
 * then the fabric group's engine.
 */
#include "host/host.h"

#include "common/log.h"

#include <string.h>

static int overlaps(const void *a, const void *b, size_t len)
{
    const char *pa = a, *pb = b;
    return pa < pb + len && pb < pa + len;
}

INCOLL_API incoll_status_t incoll_allreduce(incoll_comm_h comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t count, incoll_dtype_t dtype,
                                            incoll_op_t op)
{
    return incoll_allreduce_algo(comm, INCOLL_ALGO_AUTO, sendbuf, recvbuf,
                                 count, dtype, op);
}

INCOLL_API incoll_status_t incoll_allreduce_algo(incoll_comm_h comm,
                                                 incoll_algo_t algo,
                                                 const void *sendbuf,
                                                 void *recvbuf, size_t count,
                                                 incoll_dtype_t dtype,
                                                 incoll_op_t op)
{
    incoll_status_t status;
    size_t dsize, bytes;

    if (comm == NULL || (unsigned)algo >= INCOLL_ALGO_COUNT)
        return INCOLL_ERR_INVALID_ARG;
    if ((unsigned)dtype >= INCOLL_DTYPE_COUNT || (unsigned)op >= INCOLL_OP_COUNT) {
        incoll_error("allreduce: unknown %s %d",
                     (unsigned)dtype >= INCOLL_DTYPE_COUNT ? "dtype" : "op",
                     (unsigned)dtype >= INCOLL_DTYPE_COUNT ? (int)dtype : (int)op);
        return INCOLL_ERR_INVALID_ARG;
    }
    if (!incoll_op_valid(op, dtype)) {
        incoll_error("allreduce: op %s does not apply to dtype %s",
                     incoll_op_name(op), incoll_dtype_name(dtype));
        return INCOLL_ERR_INVALID_ARG;
    }
    if (count == 0)
        return INCOLL_OK;
    dsize = incoll_dtype_size(dtype);
    if (count > SIZE_MAX / dsize || recvbuf == NULL || sendbuf == NULL) {
        incoll_error("allreduce: %s", recvbuf == NULL || sendbuf == NULL
                                          ? "null buffer"
                                          : "count too large");
        return INCOLL_ERR_INVALID_ARG;
    }
    bytes = count * dsize;
    if (sendbuf == INCOLL_IN_PLACE || overlaps(sendbuf, recvbuf, bytes)) {
        status = host_comm_scratch(comm, bytes);
        if (status != INCOLL_OK)
            return status;
        memcpy(comm->scratch,
               sendbuf == INCOLL_IN_PLACE ? (const void *)recvbuf : sendbuf,
               bytes);
        sendbuf = comm->scratch;
    }
    if (comm->size == 1) {
        memcpy(recvbuf, sendbuf, bytes);
        return INCOLL_OK;
    }
    if (algo == INCOLL_ALGO_RD || algo == INCOLL_ALGO_RING ||
        algo == INCOLL_ALGO_RABENSEIFNER)
        return host_allreduce_sched(comm, host_algo_kind(algo), sendbuf,
                                    recvbuf, count, dtype, op);
    status = host_engine_start(comm->eng, sendbuf, recvbuf, count, dtype, op,
                               host_now_ns());
    if (status == INCOLL_INPROGRESS)
        status = host_comm_wait(comm);
    return status;
}
