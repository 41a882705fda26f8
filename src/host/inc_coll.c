/*
 * In-network collectives other than allreduce: not yet in the network.
 * Every entry point says INCOLL_ERR_UNSUPPORTED, so the public functions
 * (src/host/colls.c) run the host-based algorithms.
 */
#include "host/inc_coll.h"

int host_inc_coll_usable(incoll_comm_h comm, host_coll_kind_t kind,
                         incoll_op_t op, incoll_dtype_t dtype)
{
    return 0;
}

incoll_status_t host_inc_reduce(incoll_comm_h comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                incoll_dtype_t dtype, incoll_op_t op, int root)
{
    return INCOLL_ERR_UNSUPPORTED;
}

incoll_status_t host_inc_bcast(incoll_comm_h comm, void *buf, size_t bytes,
                               int root)
{
    return INCOLL_ERR_UNSUPPORTED;
}

incoll_status_t host_inc_barrier(incoll_comm_h comm)
{
    return INCOLL_ERR_UNSUPPORTED;
}

incoll_status_t host_inc_allgather(incoll_comm_h comm, const void *sendbuf,
                                   void *recvbuf, size_t bytes)
{
    return INCOLL_ERR_UNSUPPORTED;
}

incoll_status_t host_inc_gather(incoll_comm_h comm, const void *sendbuf,
                                void *recvbuf, size_t bytes, int root)
{
    return INCOLL_ERR_UNSUPPORTED;
}

incoll_status_t host_inc_scatter(incoll_comm_h comm, const void *sendbuf,
                                 void *recvbuf, size_t bytes, int root)
{
    return INCOLL_ERR_UNSUPPORTED;
}

incoll_status_t host_inc_reduce_scatter(incoll_comm_h comm, const void *sendbuf,
                                        void *recvbuf, size_t count,
                                        incoll_dtype_t dtype, incoll_op_t op)
{
    return INCOLL_ERR_UNSUPPORTED;
}
