/*
 * The collectives other than allreduce (src/host/colls.c): in the
 * network, as an allreduce or on the hosts, for the public functions
 * (api.c, service.c) and the benchmarks.
 */
#ifndef INCOLL_HOST_COLLS_H
#define INCOLL_HOST_COLLS_H

#include "host/host.h"

/* The arguments of one collective, resolved: sendbuf is never
 * INCOLL_IN_PLACE but points where the data is (in place: inside recvbuf,
 * or recvbuf inside sendbuf for scatter's root). count is elements for
 * reduce and reduce_scatter (per rank), bytes per rank otherwise. */
typedef struct {
    algo_coll_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    incoll_dtype_t dtype;
    incoll_op_t op;
    int root;
} host_coll_args_t;

#define HOST_CALGO_AUTO                                                        \
    (-1)                    /* in the network if the group can, else picked    \
                             */
#define HOST_CALGO_INC (-2) /* in the network only */

/*
 * Runs one collective with algorithm algo: HOST_CALGO_AUTO (what the
 * public functions use), HOST_CALGO_INC, or a host-based algorithm of
 * a->coll (algo_calgo_t). The arguments are checked already. Benchmarks
 * call it to compare algorithms side by side.
 */
incoll_status_t host_coll_run(incoll_comm_h comm, int algo,
                              const host_coll_args_t *a);

/* The per-thread buffer of the collectives run as allreduces in the
 * network: at least len bytes (zeroed when zero), NULL when out of
 * memory; host_coll_emu_done() at the end of the call gives back one
 * larger than the few pages kept between calls. The buffer is freed when
 * its thread exits, or by host_coll_emu_release() (incoll_finalize, for
 * the calling thread). host_coll_emu_held(): the bytes all threads'
 * buffers hold now (for tests). */
void *host_coll_emu_get(size_t len, int zero);
void host_coll_emu_done(void);
void host_coll_emu_release(void);
size_t host_coll_emu_held(void);

/*
 * 1 when a member of comm may return early from coll (count: elements of
 * a reduce, bytes per rank otherwise): comm is usable and its group runs
 * coll in the network, natively or as an allreduce (the operation may
 * still end on the hosts after a failure: it completes in the
 * communicator's thread either way). Notes the network (host_where_note)
 * when it returns 1. For the early returns of src/host/req.c.
 */
int host_coll_early_ok(incoll_comm_h comm, algo_coll_t coll, size_t count,
                       incoll_op_t op, incoll_dtype_t dtype);

/* The implementations of the public functions of the other
 * collectives, called with the lock held (service.c runs them for api.c
 * and the executor). */
incoll_status_t host_reduce_impl(incoll_comm_h comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 incoll_dtype_t dtype, incoll_op_t op,
                                 int root);
incoll_status_t host_bcast_impl(incoll_comm_h comm, void *buf, size_t bytes,
                                int root);
incoll_status_t host_barrier_impl(incoll_comm_h comm);
incoll_status_t host_allgather_impl(incoll_comm_h comm, const void *sendbuf,
                                    void *recvbuf, size_t bytes);
incoll_status_t host_gather_impl(incoll_comm_h comm, const void *sendbuf,
                                 void *recvbuf, size_t bytes, int root);
incoll_status_t host_scatter_impl(incoll_comm_h comm, const void *sendbuf,
                                  void *recvbuf, size_t bytes, int root);
incoll_status_t host_reduce_scatter_impl(incoll_comm_h comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, incoll_dtype_t dtype,
                                         incoll_op_t op);

/*
 * A reduce's or gather's non-root returning early (a: its call, sendbuf
 * the copy the communicator keeps): when the call would run natively in
 * the network now, starts its operation from the calling thread
 * (host_inc_send_early: the contribution leaves before the call
 * returns) and returns 1; the request thread's run of the same call then
 * waits for it and recovers as usual. 0 when not (the thread starts it).
 */
struct host_req_args;
int host_coll_early_send(const struct host_req_args *a);

#endif
