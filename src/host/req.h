/*
 * Requests and threads in libincoll (src/host/req.c). The library lock
 * they run under is lock.h's.
 *
 * The public functions of the collectives and communicators (src/host/
 * api.c) take the lock, progress the requests, wait for the earlier
 * requests of their communicator (host_enter) and call the
 * implementations (allreduce.h, colls.h, comm.h) through service.c.
 */
#ifndef INCOLL_HOST_REQ_H
#define INCOLL_HOST_REQ_H

#include "incoll.h"

#include "host/lock.h"

#include "core/algo.h"

#include <poll.h>
#include <stdint.h>
#include <time.h>

/* Completes every outstanding request and stops the request threads
 * (incoll_finalize, before the communicators are freed). */
void host_req_ctx_fini(incoll_ctx_h ctx);

/* host_lock() (lock.h) that also progresses the requests and, when comm
 * is not NULL, waits for comm's outstanding requests (collectives of a
 * communicator run in order). Never inside another call (the lock is not
 * recursive: that is what the _locked service calls are for). */
void host_enter_at(incoll_ctx_h ctx, incoll_comm_h comm, const char *file,
                   int line, const char *func);
#define host_enter(ctx, comm)                                                  \
    host_enter_at((ctx), (comm), __FILE__, __LINE__, __func__)

/* Stops comm's request thread after its requests completed (before comm
 * is freed). */
void host_req_comm_fini(incoll_comm_h comm);

/* A request's collective and arguments, as the public call got them. */
typedef enum {
    RQ_ALLREDUCE,
    RQ_REDUCE,
    RQ_BCAST,
    RQ_BARRIER,
    RQ_ALLGATHER,
    RQ_GATHER,
    RQ_SCATTER,
    RQ_REDUCE_SCATTER
} host_req_kind_t;

typedef struct host_req_args {
    host_req_kind_t kind;
    incoll_comm_h comm;
    const void *sendbuf;
    void *recvbuf; /* bcast: buf */
    size_t count;  /* elements for reductions, else bytes */
    incoll_dtype_t dtype;
    incoll_op_t op;
    int root;
    incoll_algo_t algo; /* allreduce: INCOLL_ALGO_AUTO unless a benchmark
                           asks for one */
    int threaded;       /* 1: runs in the communicator's thread, never on
                           the caller's (the caller blocks elsewhere) */
    /* Requests that make one call together (the segments of a leader's
     * allreduce, src/host/hier.c) share a status: once one failed, the
     * later ones complete at once with that status, unrun. NULL: none. */
    incoll_status_t *chain;
    uint32_t tag; /* the call's tag (incoll_comm.call_tag) while it runs */
} host_req_args_t;

/*
 * What the executor takes from the layers above it: the collective of a
 * request by its kind (with the lock held, in the communicator's thread
 * or the caller's), whether a rooted call may return early
 * (host_coll_early_ok), and the streaming lock's (host_stream_end,
 * host_stream_would_lock). Set on the context when it is made
 * (src/host/init.c, host_req_set_ops), before any request.
 */
typedef struct host_req_ops {
    incoll_status_t (*run[RQ_REDUCE_SCATTER + 1])(const host_req_args_t *a);
    int (*early_ok)(incoll_comm_h comm, algo_coll_t coll, size_t count,
                    incoll_op_t op, incoll_dtype_t dtype);
    /* A non-root's contribution sent from the calling thread as its call
     * returns early (host_coll_early_send); NULL: never. */
    int (*early_send)(const host_req_args_t *a);
    void (*stream_end)(incoll_comm_h comm);
    int (*stream_would_lock)(incoll_comm_h comm, size_t bytes);
} host_req_ops_t;
void host_req_set_ops(incoll_ctx_h ctx, const host_req_ops_t *ops);

/*
 * Early returns (INCOLL_EARLY_MAX, docs/nonblocking.md). host_enter() for
 * the blocking reduce, gather, bcast and scatter (a: the call as a
 * request): takes the lock and progresses the requests, then, when this
 * member has no result to wait for (a reduce's or gather's non-root, a
 * bcast's or scatter's root), the operation runs in the network and the
 * bytes it still needs of the member's buffers are at most the
 * context's early_max, copies them into the communicator's ring and
 * queues the operation for the communicator's thread: returns 1 with
 * *status_p INCOLL_OK (a scatter's root has its block already). Else
 * waits for the communicator's earlier requests, as host_enter(), and
 * returns 0: the caller runs the call. Either way host_leave() ends it.
 */
int host_enter_early(const host_req_args_t *a, incoll_status_t *status_p);
/* host_unlock() after a call on comm that returned status: the error of
 * an operation that returned early and failed since (said at warn level
 * when it failed) replaces INCOLL_OK, once. */
incoll_status_t host_leave(incoll_comm_h comm, incoll_status_t status);
/* Waits for comm's outstanding requests (early operations included),
 * locally: for a benchmark that counts an early operation's packets. */
void host_req_drain(incoll_comm_h comm);

/* Lock held: comm's engine still runs an operation whose caller returns
 * now (a broadcast's non-root with its data in, host_comm_wait_data):
 * comm's next operation on the engine runs it to its end first
 * (host_comm_finish_op), or, if that does not come within LINGER_NS, the
 * communicator's thread does, retransmitting as needed, so that a
 * member that goes on to other work never holds the others up for long.
 * Without the lock or a thread, waits for it here. */
void host_req_finish_later(incoll_comm_h comm);
/* host_leave() without the unlock. */
incoll_status_t host_early_take(incoll_comm_h comm, incoll_status_t status);

/* Makes a request for a (persistent: inactive, for incoll_req_start;
 * else started). */
incoll_status_t host_req_post(const host_req_args_t *a, int persistent,
                              incoll_req_h *req_p);

/* Says without the lock whether req completed (incoll_req_completed). */
int host_req_done(incoll_req_h req);

/* Waits up to ns for req, progressing everything; 1 when it completed
 * (then *status_p is its status and a nonpersistent req was released),
 * 0 when not yet (incoll_req_wait, incoll_req_wait_timeout). */
int host_req_wait_ns(incoll_req_h req, uint64_t ns, incoll_status_t *status_p);
/* Waits for req, progressing everything: its status (incoll_req_wait). */
incoll_status_t host_req_wait(incoll_req_h req);

#endif
