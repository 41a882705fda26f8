/*
 * The public API (src/host/api.c): what the benchmarks call beside
 * include/incoll.h.
 */
#ifndef INCOLL_HOST_API_H
#define INCOLL_HOST_API_H

#include "incoll.h"

/* incoll_iallreduce with a chosen algorithm (benchmarks). */
incoll_status_t host_iallreduce_algo(incoll_comm_h comm, incoll_algo_t algo,
                                     const void *sendbuf, void *recvbuf,
                                     size_t count, incoll_dtype_t dtype,
                                     incoll_op_t op, incoll_req_h *req_p);

#endif
