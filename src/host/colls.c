/*
 * The collectives other than allreduce: incoll_reduce, incoll_bcast,
 * incoll_barrier, incoll_allgather, incoll_gather, incoll_scatter and
 * incoll_reduce_scatter. Each checks its arguments, resolves
 * INCOLL_IN_PLACE with MPI's meaning, then runs in the network when the
 * communicator's group can (src/host/inc_coll.c) and otherwise on the
 * hosts: the schedules of core/algo.h on the point-to-point engine
 * (src/host/fallback.c), laid out in a working buffer as algo.h says.
 *
 * Where the group has no native form of a collective but runs allreduces,
 * the collective runs as an allreduce in the network (emu_run): what the
 * MPI layer did before, now inside the library so that every caller gets
 * it, with the allreduce's recovery.
 *
 * Failures (with a manager): before an operation, a group the manager
 * said failed is recovered as before an allreduce; an in-network
 * operation that fails (timeout, group failed) goes through the recovery
 * of docs/failures.md (host_comm_recover_coll) as an allreduce does:
 * members behind get their result of the operation from what the members
 * ahead kept (inc_coll.c), or all run it again, on a new group or on the
 * hosts. Never a wrong or doubled result; an error when the recovery
 * itself fails.
 */
#include "host/colls.h"

#include "host/comm.h"
#include "host/counters.h"
#include "host/inc_coll.h"
#include "host/req.h"
#include "host/allreduce.h"
#include "host/fallback.h"

#include "common/log.h"
#include "common/mgr_codec.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
    const char *pa = a, *pb = b;
    return alen && blen && pa < pb + blen && pb < pa + alen;
}

static host_coll_kind_t inc_kind(algo_coll_t coll)
{
    static const host_coll_kind_t k[ALGO_COLL_NCOLLS] = {
        HOST_COLL_BCAST,         HOST_COLL_REDUCE, HOST_COLL_BARRIER,
        HOST_COLL_ALLGATHER,     HOST_COLL_GATHER, HOST_COLL_SCATTER,
        HOST_COLL_REDUCE_SCATTER};
    return k[coll];
}

static int reduces(algo_coll_t coll)
{
    return coll == ALGO_COLL_REDUCE || coll == ALGO_COLL_REDUCE_SCATTER;
}

/* ---- in the network ---- */

static incoll_status_t inc_run(incoll_comm_h comm, const host_coll_args_t *a)
{
    switch (a->coll) {
    case ALGO_COLL_BCAST:
        return host_inc_bcast(comm, a->recvbuf, a->count, a->root);
    case ALGO_COLL_REDUCE:
        return host_inc_reduce(comm, a->sendbuf, a->recvbuf, a->count, a->dtype,
                               a->op, a->root);
    case ALGO_COLL_BARRIER:
        return host_inc_barrier(comm);
    case ALGO_COLL_ALLGATHER:
        return host_inc_allgather(comm, a->sendbuf, a->recvbuf, a->count);
    case ALGO_COLL_GATHER:
        return host_inc_gather(comm, a->sendbuf, a->recvbuf, a->count, a->root);
    case ALGO_COLL_SCATTER:
        return host_inc_scatter(comm, a->sendbuf, a->recvbuf, a->count,
                                a->root);
    default:
        return host_inc_reduce_scatter(comm, a->sendbuf, a->recvbuf, a->count,
                                       a->dtype, a->op);
    }
}

/* Notes a collective that runs on the hosts by the host-based algorithm
 * algo (>= 0 when the caller asked for it): why not in the network. */
static void note_hosts(incoll_comm_h comm, int algo, const host_coll_args_t *a,
                       incoll_op_t op, incoll_dtype_t dt)
{
    incoll_why_t why = INCOLL_WHY_ALGO;
    if (algo < 0) {
        if (!incoll_comm_offloaded(comm, NULL))
            why = INCOLL_WHY_NO_GROUP;
        else if ((a->coll == ALGO_COLL_GATHER ||
                  a->coll == ALGO_COLL_SCATTER) &&
                 host_comm_inc_usable(comm, op, dt))
            why = INCOLL_WHY_TOO_LARGE;
        else
            why = INCOLL_WHY_UNSUPPORTED;
    }
    host_where_note(0, why);
}

/* ---- in the network, over the allreduce ---- */

/* Gathers and scatters ride on an allreduce only up to this many bytes in
 * all (each rank sends and receives all of them). */
#define EMU_MAX_BYTES (64u << 10)

/* The buffers of the allreduce-based forms: apart from comm->scratch,
 * which incoll_allreduce may use itself for staging. One per thread
 * (collectives of other communicators run in other threads while this
 * one waits), kept between calls only up to EMU_KEEP_BYTES: a larger one
 * (a broadcast, reduce or reduce_scatter of any size) is given back when
 * the call ends. A thread's buffer is freed when the thread exits (the
 * key's destructor: a communicator's request thread ends when the
 * communicator is freed) and by incoll_finalize for the thread calling
 * it (host_coll_emu_release). */
#define EMU_KEEP_BYTES (2 * EMU_MAX_BYTES)

typedef struct {
    void *buf;
    size_t len;
} emu_cache_t;

static pthread_key_t emu_key;
static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static int emu_key_ok;
static size_t emu_held; /* bytes of every thread's buffer (atomic) */

static void emu_cache_free(void *arg)
{
    emu_cache_t *c = arg;
    if (c == NULL)
        return;
    __atomic_sub_fetch(&emu_held, c->len, __ATOMIC_RELAXED);
    free(c->buf);
    free(c);
}

static void emu_key_make(void)
{
    emu_key_ok = pthread_key_create(&emu_key, emu_cache_free) == 0;
}

static emu_cache_t *emu_cache(int make)
{
    emu_cache_t *c;
    pthread_once(&emu_once, emu_key_make);
    if (!emu_key_ok)
        return NULL;
    c = pthread_getspecific(emu_key);
    if (c == NULL && make && (c = calloc(1, sizeof(*c))) != NULL &&
        pthread_setspecific(emu_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

void *host_coll_emu_get(size_t len, int zero)
{
    emu_cache_t *c = emu_cache(1);
    if (c == NULL)
        return NULL;
    if (c->len < len) {
        void *p = realloc(c->buf, len);
        if (p == NULL)
            return NULL;
        __atomic_add_fetch(&emu_held, len - c->len, __ATOMIC_RELAXED);
        c->buf = p;
        c->len = len;
    }
    if (zero)
        memset(c->buf, 0, len);
    return c->buf;
}

void host_coll_emu_done(void)
{
    emu_cache_t *c = emu_cache(0);
    if (c != NULL && c->len > EMU_KEEP_BYTES) {
        __atomic_sub_fetch(&emu_held, c->len, __ATOMIC_RELAXED);
        free(c->buf);
        c->buf = NULL;
        c->len = 0;
    }
}

void host_coll_emu_release(void)
{
    emu_cache_t *c = emu_cache(0);
    if (c != NULL) {
        pthread_setspecific(emu_key, NULL);
        emu_cache_free(c);
    }
}

size_t host_coll_emu_held(void)
{
    return __atomic_load_n(&emu_held, __ATOMIC_RELAXED);
}

/* A bitwise OR of bytes: the widest unsigned type that divides them. */
static incoll_status_t bor(incoll_comm_h comm, const void *in, void *out,
                           size_t bytes)
{
    size_t w = bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1;
    incoll_dtype_t dt = w == 8   ? INCOLL_UINT64
                        : w == 4 ? INCOLL_UINT32
                        : w == 2 ? INCOLL_UINT16
                                 : INCOLL_UINT8;
    return host_allreduce_service(comm, in, out, bytes / w, dt, INCOLL_OP_BOR);
}

/*
 * When the group has no native form of the collective but runs
 * allreduces: the collective as an allreduce in the network, with its
 * recovery (src/host/allreduce.c). A broadcast is a bitwise OR in which
 * only the root gives non-zero bytes (x | 0 == x), a gather an OR of
 * blocks each rank puts at its place in zeros, a reduce and a
 * reduce_scatter an allreduce whose result each rank keeps what it needs
 * of, a barrier an allreduce of one byte (nobody gets it before everyone
 * gave theirs). Returns INCOLL_ERR_UNSUPPORTED when the form does not fit
 * (a gather larger than EMU_MAX_BYTES): the hosts' algorithms then.
 */
static incoll_status_t emu_body(incoll_comm_h comm, const host_coll_args_t *a)
{
    int rank = comm->rank, size = comm->size, root = a->root;
    int red = reduces(a->coll);
    size_t blk = a->count * (red ? incoll_dtype_size(a->dtype) : 1);
    size_t all = (size_t)size * blk;
    uint8_t *e;
    incoll_status_t status;

    switch (a->coll) {
    case ALGO_COLL_BARRIER: {
        uint8_t in = 0, out;
        return host_allreduce_service(comm, &in, &out, 1, INCOLL_UINT8,
                                      INCOLL_OP_BOR);
    }
    case ALGO_COLL_BCAST:
        if ((e = host_coll_emu_get(blk, rank != root)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        return rank == root ? bor(comm, a->recvbuf, e, blk)
                            : bor(comm, e, a->recvbuf, blk);
    case ALGO_COLL_REDUCE:
        if (rank == root)
            return host_allreduce_service(
                comm, a->sendbuf == a->recvbuf ? INCOLL_IN_PLACE : a->sendbuf,
                a->recvbuf, a->count, a->dtype, a->op);
        if ((e = host_coll_emu_get(blk, 0)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        return host_allreduce_service(comm, a->sendbuf, e, a->count, a->dtype,
                                      a->op);
    case ALGO_COLL_REDUCE_SCATTER:
        if ((e = host_coll_emu_get(all, 0)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        status = host_allreduce_service(
            comm, a->sendbuf, e, a->count * (size_t)size, a->dtype, a->op);
        if (status == INCOLL_OK)
            memcpy(a->recvbuf, e + (size_t)rank * blk, blk);
        return status;
    default:
        break;
    }
    if (all > EMU_MAX_BYTES)
        return INCOLL_ERR_UNSUPPORTED;
    if ((e = host_coll_emu_get(2 * all, 1)) == NULL)
        return INCOLL_ERR_NO_MEMORY;
    switch (a->coll) {
    case ALGO_COLL_ALLGATHER:
        memcpy(e + (size_t)rank * blk, a->sendbuf, blk);
        return bor(comm, e, a->recvbuf, all);
    case ALGO_COLL_GATHER:
        memcpy(e + (size_t)rank * blk, a->sendbuf, blk);
        return bor(comm, e, rank == root ? a->recvbuf : e + all, all);
    default: /* ALGO_COLL_SCATTER */
        status = bor(comm, rank == root ? a->sendbuf : (const void *)e, e + all,
                     all);
        if (status == INCOLL_OK &&
            (uint8_t *)a->recvbuf !=
                (const uint8_t *)a->sendbuf + (size_t)rank * blk)
            memcpy(a->recvbuf, e + all + (size_t)rank * blk, blk);
        return status;
    }
}

static incoll_status_t emu_run(incoll_comm_h comm, const host_coll_args_t *a)
{
    incoll_status_t status = emu_body(comm, a);
    host_coll_emu_done();
    return status;
}

/* The call as the recovery sees it. */
static host_rec_call_t rec_call(const host_coll_args_t *a)
{
    host_rec_call_t c = {(int)inc_kind(a->coll),
                         a->root,
                         a->count,
                         a->dtype,
                         a->op,
                         a->sendbuf,
                         a->recvbuf};
    if (!reduces(a->coll)) {
        c.dtype = INCOLL_UINT8;
        c.op = INCOLL_OP_SUM;
    }
    return c;
}

/*
 * In the network natively, with the recovery after a failure where there
 * is a manager (as incoll_allreduce's auto_run): INCOLL_OK with the
 * result, INCOLL_ERR_UNSUPPORTED when the group cannot do it (now, or
 * after a recovery left the communicator without a group: the caller
 * falls back), or the error. algo HOST_CALGO_INC returns a failure as it
 * is. *fetched_p is 1 when the result came from the members ahead in a
 * recovery (over the hosts), not from the network.
 */
static incoll_status_t inc_run_recovered(incoll_comm_h comm, int algo,
                                         const host_coll_args_t *a,
                                         incoll_op_t op, incoll_dtype_t dt,
                                         int *fetched_p)
{
    const char *what = algo_coll_name(a->coll);
    host_rec_call_t c = rec_call(a);
    incoll_status_t status;
    int done;

    *fetched_p = 0;
    for (int attempt = 0;; attempt++) {
        /* (the call's operation may have been started when it returned
         * early: host_coll_early_send) */
        uint64_t ops = comm->sent_early ? comm->sent_ops
                                        : host_engine_counters(comm->eng)->ops;
        int why, started;
        status = inc_run(comm, a);
        if (status == INCOLL_OK || status == INCOLL_ERR_UNSUPPORTED)
            return status;
        incoll_info("%s: in-network operation on group %u failed: %s", what,
                    comm->group, incoll_status_string(status));
        why = host_comm_fail_why(comm, status, 1);
        if (why < 0 || (algo == HOST_CALGO_INC && why == HOST_ABORT_NONE) ||
            attempt >= 4)
            return status;
        /* An engine that failed before refuses to start (not started). */
        started = comm->eng && host_engine_counters(comm->eng)->ops != ops;
        status = host_comm_recover_coll(comm, started, &c, why, &done);
        *fetched_p = done;
        if (status != INCOLL_OK || done)
            return status;
        /* host_comm_recover_coll() makes at most two new groups, then
         * leaves the comm without one: the hosts then. */
        if (!host_inc_coll_usable(comm, inc_kind(a->coll), op, dt))
            return INCOLL_ERR_UNSUPPORTED;
    }
}

int host_coll_early_ok(incoll_comm_h comm, algo_coll_t coll, size_t count,
                       incoll_op_t op, incoll_dtype_t dtype)
{
    const char *why;
    int red = reduces(coll);
    incoll_dtype_t dt = red ? dtype : INCOLL_UINT8;

    if (comm->size < 2 || (comm->eng == NULL && !host_comm_via_leaders(comm)) ||
        host_comm_broken(comm, &why) || host_comm_group_failed(comm) ||
        host_comm_pulled(comm))
        return 0;
    if (!host_comm_via_leaders(comm) &&
        !host_inc_coll_usable(comm, inc_kind(coll), red ? op : INCOLL_OP_SUM,
                              dt) &&
        !host_comm_inc_usable(comm, red ? op : INCOLL_OP_BOR, dt))
        return 0;
    /* Without a native form, gathers and scatters ride on the allreduce
     * only up to EMU_MAX_BYTES in all (host_coll_run). Ranks sharing a
     * host may yet send a native one there (a hierarchy is made at the
     * first allreduce): it then completes on the hosts, in the thread. */
    if ((coll == ALGO_COLL_GATHER || coll == ALGO_COLL_SCATTER) &&
        !host_inc_coll_usable(comm, inc_kind(coll), INCOLL_OP_SUM, dt) &&
        count > EMU_MAX_BYTES / (size_t)comm->size)
        return 0;
    host_where_note(1, INCOLL_WHY_NETWORK);
    return 1;
}

int host_coll_early_send(const host_req_args_t *a)
{
    incoll_comm_h comm = a->comm;
    host_coll_kind_t kind;
    const char *why;

    if (a->kind == RQ_REDUCE)
        kind = HOST_COLL_REDUCE;
    else if (a->kind == RQ_GATHER)
        kind = HOST_COLL_GATHER;
    else
        return 0;
    /* Only where the call would start it in the network at once
     * (coll_run): a known hierarchy that is not on (making one is
     * collective), no recovery, failure or refusal pending, and no
     * broadcast's round left to end on the engine. */
    if (comm->size < 2 || comm->rank == a->root || comm->eng == NULL ||
        comm->linger || host_comm_doomed_pending(comm) ||
        host_comm_broken(comm, &why) || host_comm_group_failed(comm) ||
        host_comm_pulled(comm) || !comm->ctx->up.hier_decided(comm) ||
        comm->ctx->up.hier_on(comm) ||
        !host_inc_coll_usable(comm, kind, a->op,
                              kind == HOST_COLL_REDUCE ? a->dtype
                                                       : INCOLL_UINT8))
        return 0;
    return host_inc_send_early(
        comm, kind, a->sendbuf, a->count,
        kind == HOST_COLL_REDUCE ? a->dtype : INCOLL_UINT8,
        kind == HOST_COLL_REDUCE ? a->op : INCOLL_OP_SUM, a->root);
}

/* ---- on the hosts ---- */

static incoll_status_t host_run(incoll_comm_h comm, algo_calgo_t id, size_t seg,
                                const host_coll_args_t *a)
{
    int rank = comm->rank, size = comm->size, root = a->root;
    int vr = (rank - root + size) % size;
    size_t n = a->count,
           ds = reduces(a->coll) ? incoll_dtype_size(a->dtype) : 1;
    size_t blk = n * ds, all = (size_t)size * blk;
    incoll_dtype_t dt = reduces(a->coll) ? a->dtype : INCOLL_UINT8;
    incoll_op_t op = reduces(a->coll) ? a->op : INCOLL_OP_SUM;
    const uint8_t *in = a->sendbuf;
    uint8_t *out = a->recvbuf, *work;
    incoll_status_t status;

    switch (a->coll) {
    case ALGO_COLL_BCAST:
        return host_coll_sched(comm, id, root, out, n, seg, dt, op);
    case ALGO_COLL_BARRIER: {
        uint8_t token[2] = {1, 0};
        return host_coll_sched(comm, id, 0, token, 0, 0, dt, op);
    }
    case ALGO_COLL_REDUCE:
        if (rank == root && out != in) {
            work = out;
        } else {
            if ((status = host_comm_scratch(comm, blk)) != INCOLL_OK)
                return status;
            work = comm->scratch;
        }
        if (work != in)
            memcpy(work, in, blk);
        status = host_coll_sched(comm, id, root, work, n, seg, dt, op);
        if (status == INCOLL_OK && rank == root && work != out)
            memcpy(out, work, blk);
        return status;
    case ALGO_COLL_ALLGATHER:
        if (!algo_coll_rotated(id)) {
            if (out + (size_t)rank * blk != in)
                memcpy(out + (size_t)rank * blk, in, blk);
            return host_coll_sched(comm, id, 0, out, n, seg, dt, op);
        }
        if ((status = host_comm_scratch(comm, all)) != INCOLL_OK)
            return status;
        work = comm->scratch;
        memcpy(work, in, blk);
        status = host_coll_sched(comm, id, 0, work, n, seg, dt, op);
        if (status == INCOLL_OK)
            for (int j = 0; j < size; j++)
                memcpy(out + (size_t)((rank + j) % size) * blk,
                       work + (size_t)j * blk, blk);
        return status;
    case ALGO_COLL_GATHER:
        if (rank == root && root == 0) {
            work = out;
            if (work != in)
                memcpy(work, in, blk);
            return host_coll_sched(comm, id, root, work, n, seg, dt, op);
        }
        if ((status = host_comm_scratch(comm, all)) != INCOLL_OK)
            return status;
        work = comm->scratch;
        memcpy(work + (size_t)vr * blk, in, blk);
        status = host_coll_sched(comm, id, root, work, n, seg, dt, op);
        if (status == INCOLL_OK && rank == root)
            for (int j = 0; j < size; j++)
                memcpy(out + (size_t)((root + j) % size) * blk,
                       work + (size_t)j * blk, blk);
        return status;
    case ALGO_COLL_SCATTER:
        if ((status = host_comm_scratch(comm, all)) != INCOLL_OK)
            return status;
        work = comm->scratch;
        if (rank == root)
            for (int j = 0; j < size; j++)
                memcpy(work + (size_t)j * blk,
                       in + (size_t)((root + j) % size) * blk, blk);
        status = host_coll_sched(comm, id, root, work, n, seg, dt, op);
        if (status == INCOLL_OK && out != in + (size_t)rank * blk)
            memcpy(out, work + (size_t)vr * blk, blk);
        return status;
    default: /* ALGO_COLL_REDUCE_SCATTER */
        if ((status = host_comm_scratch(comm, all)) != INCOLL_OK)
            return status;
        work = comm->scratch;
        memcpy(work, in, all);
        status = host_coll_sched(comm, id, 0, work, n, seg, dt, op);
        if (status == INCOLL_OK)
            memcpy(out, work + (size_t)rank * blk, blk);
        return status;
    }
}

/* One rank: the result is the input, moved where it belongs. */
static void run_alone(const host_coll_args_t *a)
{
    size_t blk =
        a->count * (reduces(a->coll) ? incoll_dtype_size(a->dtype) : 1);
    if (a->coll == ALGO_COLL_BCAST || a->coll == ALGO_COLL_BARRIER || blk == 0)
        return;
    if (a->recvbuf != a->sendbuf)
        memmove(a->recvbuf, a->sendbuf, blk);
}

static incoll_status_t coll_run(incoll_comm_h comm, int algo,
                                const host_coll_args_t *a);

incoll_status_t host_coll_run(incoll_comm_h comm, int algo,
                              const host_coll_args_t *a)
{
    incoll_status_t status;
    host_call_begin(comm);
    host_usage_begin();
    status = coll_run(comm, algo, a);
    /* (an early start that the call failed before it took) */
    (void)host_inc_drop_early(comm, status);
    if (status == INCOLL_OK)
        host_usage_note(comm, host_coll_last_in_net() ? -1
                              : algo >= 0             ? MGR_FB_REQUESTED
                                          : host_comm_fb_reason(comm));
    host_usage_end();
    host_call_end(comm);
    return status;
}

static incoll_status_t coll_run(incoll_comm_h comm, int algo,
                                const host_coll_args_t *a)
{
    const char *what = algo_coll_name(a->coll), *why;
    incoll_dtype_t dt = reduces(a->coll) ? a->dtype : INCOLL_UINT8;
    incoll_op_t op = reduces(a->coll) ? a->op : INCOLL_OP_SUM;
    size_t seg = 0;
    incoll_status_t status;
    int usable, algo0 = algo;

    if ((status = host_comm_doomed(comm)) != INCOLL_OK)
        return status;
    if (algo >= 0 && (algo >= CALGO_COUNT ||
                      algo_calgo_info((algo_calgo_t)algo)->coll != a->coll)) {
        incoll_error("%s: algorithm %d is not one of this collective's", what,
                     algo);
        return host_comm_refuse(comm, INCOLL_ERR_INVALID_ARG);
    }
    if (algo >= 0 && !algo_calgo_fits((algo_calgo_t)algo, comm->size)) {
        incoll_error("%s: algorithm %s needs a power-of-two size, the "
                     "communicator has %d ranks",
                     what, algo_calgo_info((algo_calgo_t)algo)->name,
                     comm->size);
        return host_comm_refuse(comm, INCOLL_ERR_INVALID_ARG);
    }
    if (comm->size == 1) {
        run_alone(a);
        host_where_note(1, INCOLL_WHY_ALONE); /* as good as the network */
        return INCOLL_OK;
    }
    if (host_comm_broken(comm, &why)) {
        incoll_error("%s: the communicator cannot be used: %s", what, why);
        return INCOLL_ERR_GROUP_FAILED;
    }
    if (comm->sent_early && host_engine_status(comm->eng) == INCOLL_OK) {
        /* This call's operation, started as it returned early
         * (host_coll_early_send), ended well: the call is done, whatever
         * came since (a recovery finds it past this operation). */
        int fetched;
        status = inc_run_recovered(comm, algo, a, op, dt, &fetched);
        host_where_note(status == INCOLL_OK, INCOLL_WHY_NETWORK);
        return status;
    }
    if (host_comm_group_failed(comm) || host_comm_pulled(comm)) {
        host_rec_call_t c = rec_call(a);
        int done = 0;
        /* An operation this call started when it returned early is the
         * one it fails on (given up, as a call waiting for it would). */
        status = host_comm_recover_coll(
            comm, host_inc_drop_early(comm, INCOLL_ERR_GROUP_FAILED), &c,
            host_comm_group_failed(comm) ? HOST_ABORT_NONE : HOST_ABORT_PULLED,
            &done);
        if (status != INCOLL_OK)
            return status;
        if (done) {
            /* This member had not started the operation the others
             * completed (a broadcast ahead of its round returns before
             * every member has called): the recovery took this call's
             * result from them. */
            host_where_note(0, INCOLL_WHY_RECOVERED);
            return INCOLL_OK;
        }
        host_call_restart(comm);
    }
    host_where_note(0, INCOLL_WHY_NONE);
    usable = algo < 0 && host_inc_coll_usable(comm, inc_kind(a->coll), op, dt);
    if (usable && algo == HOST_CALGO_AUTO) {
        /* Ranks sharing a host reach the fabric through their leader, and
         * only the allreduce has that level (src/host/hier.c, reached
         * through ctx->up): the native forms would put every rank on the
         * wire again. */
        incoll_status_t hs;
        if (comm->ctx->up.hier_active(comm, &hs) && hs == INCOLL_OK)
            usable = 0;
    }
    if (!usable)
        (void)host_inc_drop_early(comm, INCOLL_ERR_UNSUPPORTED);
    if (algo == HOST_CALGO_INC && !usable) {
        incoll_comm_offloaded(comm, &why);
        incoll_error("%s: the in-network algorithm was asked for but %s", what,
                     comm->eng && comm->group
                         ? "the group cannot do this collective"
                         : why);
        return comm->eng && comm->group ? INCOLL_ERR_UNSUPPORTED
                                        : INCOLL_ERR_NO_RESOURCE;
    }
    if (usable) {
        int fetched;
        status = inc_run_recovered(comm, algo, a, op, dt, &fetched);
        host_where_note(status == INCOLL_OK && !fetched,
                        fetched ? INCOLL_WHY_RECOVERED : INCOLL_WHY_NETWORK);
        if (status != INCOLL_ERR_UNSUPPORTED || algo == HOST_CALGO_INC) {
            if (status != INCOLL_OK)
                incoll_error("%s: in-network operation failed: %s", what,
                             incoll_status_string(status));
            return status;
        }
    }
    /* A world that reaches the fabric only through its hosts' leaders
     * (no manager, src/host/rdv.c) has the allreduce alone there. */
    if (algo == HOST_CALGO_AUTO &&
        (host_comm_via_leaders(comm) ||
         host_comm_inc_usable(comm, reduces(a->coll) ? a->op : INCOLL_OP_BOR,
                              reduces(a->coll) ? a->dtype : INCOLL_UINT8))) {
        uint32_t tag = comm->call_tag;
        comm->call_tag = host_call_tag((int)inc_kind(a->coll), a->root);
        status = emu_run(comm, a);
        comm->call_tag = tag;
        if (status != INCOLL_ERR_UNSUPPORTED) {
            int in = status == INCOLL_OK && incoll_comm_offloaded(comm, NULL);
            host_where_note(in, in ? INCOLL_WHY_NETWORK : INCOLL_WHY_NO_GROUP);
            return status;
        }
    }
    if (algo < 0)
        algo = (int)algo_coll_pick_cut(&comm->ctx->cfg.algo_cuts, a->coll,
                                       comm->size, a->count,
                                       incoll_dtype_size(dt), &seg);
    else if (algo == CALGO_BCAST_PIPELINE || algo == CALGO_REDUCE_PIPELINE)
        seg = ALGO_SEG_BYTES / incoll_dtype_size(dt);
    note_hosts(comm, algo0, a, op, dt);
    status = host_run(comm, (algo_calgo_t)algo, seg, a);
    {
        /* A peer's call differs, this call's deadline passed or another
         * member recovers (this operation was given up): all go on
         * together, and this call runs again unless it failed (its input
         * is intact: host_run works beside it). */
        int fail = host_comm_fail_why(comm, status, 0), done = 0;
        if (status != INCOLL_OK && fail > HOST_ABORT_NONE) {
            host_rec_call_t c = rec_call(a);
            status = host_comm_recover_coll(comm, 0, &c, fail, &done);
            if (status != INCOLL_OK || done)
                return status;
            return coll_run(comm, algo0, a);
        }
    }
    return status;
}

/* ---- the public functions ---- */

/*
 * Argument checks. A check that fails on one rank only (a NULL buffer at
 * the root, an overlap) must not leave that rank out of the collective
 * while the others run it: every later call would pair with the wrong
 * one. So a refusal goes through host_comm_refuse(), which makes the
 * other ranks' calls fail too (INCOLL_ERR_MISMATCH, naming this rank)
 * and keeps the communicator in step. Only a NULL communicator is
 * refused alone: there is nobody to tell.
 */

static incoll_status_t refuse(incoll_comm_h comm, const char *what,
                              const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static incoll_status_t refuse(incoll_comm_h comm, const char *what,
                              const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    incoll_error("%s: %s", what, text);
    return host_comm_refuse(comm, INCOLL_ERR_INVALID_ARG);
}

static incoll_status_t check_root(incoll_comm_h comm, const char *what,
                                  int root)
{
    if (root < 0 || root >= comm->size)
        return refuse(comm, what,
                      "root %d is not a rank of the communicator (size %d)",
                      root, comm->size);
    return INCOLL_OK;
}

static incoll_status_t check_reduction(incoll_comm_h comm, const char *what,
                                       size_t count, incoll_dtype_t dtype,
                                       incoll_op_t op, size_t mult)
{
    if ((unsigned)dtype >= INCOLL_DTYPE_COUNT)
        return refuse(comm, what, "unknown dtype %d", (int)dtype);
    if ((unsigned)op >= INCOLL_OP_COUNT)
        return refuse(comm, what, "unknown op %d", (int)op);
    if (!incoll_op_valid(op, dtype))
        return refuse(comm, what, "op %s does not apply to dtype %s",
                      incoll_op_name(op), incoll_dtype_name(dtype));
    if (count > SIZE_MAX / incoll_dtype_size(dtype) / mult)
        return refuse(comm, what, "count %zu too large", count);
    return INCOLL_OK;
}

/* bytes per rank times the communicator's size must fit, and (a
 * broadcast's) the whole vector an in-network operation's segments
 * count. */
static incoll_status_t check_bytes(incoll_comm_h comm, const char *what,
                                   size_t bytes, size_t mult)
{
    if (bytes > SIZE_MAX / mult / 2)
        return refuse(comm, what, "%zu bytes per rank is too large", bytes);
    return INCOLL_OK;
}

static incoll_status_t null_buffer(incoll_comm_h comm, const char *what,
                                   const char *which)
{
    return refuse(comm, what, "%s is NULL", which);
}

static incoll_status_t overlap_error(incoll_comm_h comm, const char *what)
{
    return refuse(comm, what,
                  "sendbuf and recvbuf overlap (use INCOLL_IN_PLACE)");
}

static incoll_status_t in_place_error(incoll_comm_h comm, const char *what,
                                      const char *which)
{
    return refuse(comm, what, "INCOLL_IN_PLACE is not a valid %s here", which);
}

incoll_status_t host_reduce_impl(incoll_comm_h comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 incoll_dtype_t dtype, incoll_op_t op, int root)
{
    host_coll_args_t a = {
        ALGO_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root};
    incoll_status_t status;
    size_t bytes;

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if ((status = check_root(comm, "reduce", root)) != INCOLL_OK ||
        (status = check_reduction(comm, "reduce", count, dtype, op, 1)) !=
            INCOLL_OK)
        return status;
    if (count == 0)
        return INCOLL_OK;
    bytes = count * incoll_dtype_size(dtype);
    if (recvbuf == (void *)INCOLL_IN_PLACE)
        return in_place_error(comm, "reduce", "recvbuf");
    if (sendbuf == INCOLL_IN_PLACE) {
        if (comm->rank != root)
            return in_place_error(comm, "reduce", "sendbuf at a non-root");
        a.sendbuf = recvbuf;
    }
    if (a.sendbuf == NULL)
        return null_buffer(comm, "reduce", "sendbuf");
    if (comm->rank == root) {
        if (recvbuf == NULL)
            return null_buffer(comm, "reduce", "recvbuf at the root");
        if (a.sendbuf != recvbuf && overlaps(a.sendbuf, bytes, recvbuf, bytes))
            return overlap_error(comm, "reduce");
    }
    return host_coll_run(comm, HOST_CALGO_AUTO, &a);
}

incoll_status_t host_bcast_impl(incoll_comm_h comm, void *buf, size_t bytes,
                                int root)
{
    host_coll_args_t a = {ALGO_COLL_BCAST, buf,           buf, bytes,
                          INCOLL_UINT8,    INCOLL_OP_SUM, root};
    incoll_status_t status;

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if ((status = check_root(comm, "bcast", root)) != INCOLL_OK ||
        (status = check_bytes(comm, "bcast", bytes, 1)) != INCOLL_OK ||
        bytes == 0)
        return status;
    if (buf == NULL)
        return null_buffer(comm, "bcast", "buf");
    if (buf == (void *)INCOLL_IN_PLACE)
        return in_place_error(comm, "bcast", "buf");
    return host_coll_run(comm, HOST_CALGO_AUTO, &a);
}

incoll_status_t host_barrier_impl(incoll_comm_h comm)
{
    host_coll_args_t a = {ALGO_COLL_BARRIER, NULL,          NULL, 0,
                          INCOLL_UINT8,      INCOLL_OP_SUM, 0};

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    return host_coll_run(comm, HOST_CALGO_AUTO, &a);
}

incoll_status_t host_allgather_impl(incoll_comm_h comm, const void *sendbuf,
                                    void *recvbuf, size_t bytes)
{
    host_coll_args_t a = {ALGO_COLL_ALLGATHER, sendbuf,       recvbuf, bytes,
                          INCOLL_UINT8,        INCOLL_OP_SUM, 0};
    incoll_status_t status;

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if ((status = check_bytes(comm, "allgather", bytes, (size_t)comm->size)) !=
            INCOLL_OK ||
        bytes == 0)
        return status;
    if (recvbuf == NULL)
        return null_buffer(comm, "allgather", "recvbuf");
    if (recvbuf == (void *)INCOLL_IN_PLACE)
        return in_place_error(comm, "allgather", "recvbuf");
    if (sendbuf == INCOLL_IN_PLACE)
        a.sendbuf = (uint8_t *)recvbuf + (size_t)comm->rank * bytes;
    else if (sendbuf == NULL)
        return null_buffer(comm, "allgather", "sendbuf");
    else if (sendbuf != (uint8_t *)recvbuf + (size_t)comm->rank * bytes &&
             overlaps(sendbuf, bytes, recvbuf, (size_t)comm->size * bytes))
        return overlap_error(comm, "allgather");
    return host_coll_run(comm, HOST_CALGO_AUTO, &a);
}

incoll_status_t host_gather_impl(incoll_comm_h comm, const void *sendbuf,
                                 void *recvbuf, size_t bytes, int root)
{
    host_coll_args_t a = {ALGO_COLL_GATHER, sendbuf,       recvbuf, bytes,
                          INCOLL_UINT8,     INCOLL_OP_SUM, root};
    incoll_status_t status;
    int is_root;

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if ((status = check_root(comm, "gather", root)) != INCOLL_OK ||
        (status = check_bytes(comm, "gather", bytes, (size_t)comm->size)) !=
            INCOLL_OK ||
        bytes == 0)
        return status;
    is_root = comm->rank == root;
    if (is_root && recvbuf == NULL)
        return null_buffer(comm, "gather", "recvbuf at the root");
    if (is_root && recvbuf == (void *)INCOLL_IN_PLACE)
        return in_place_error(comm, "gather", "recvbuf");
    if (sendbuf == INCOLL_IN_PLACE) {
        if (!is_root)
            return in_place_error(comm, "gather", "sendbuf at a non-root");
        a.sendbuf = (uint8_t *)recvbuf + (size_t)root * bytes;
    } else if (sendbuf == NULL) {
        return null_buffer(comm, "gather", "sendbuf");
    } else if (is_root &&
               sendbuf != (uint8_t *)recvbuf + (size_t)root * bytes &&
               overlaps(sendbuf, bytes, recvbuf, (size_t)comm->size * bytes)) {
        return overlap_error(comm, "gather");
    }
    return host_coll_run(comm, HOST_CALGO_AUTO, &a);
}

incoll_status_t host_scatter_impl(incoll_comm_h comm, const void *sendbuf,
                                  void *recvbuf, size_t bytes, int root)
{
    host_coll_args_t a = {ALGO_COLL_SCATTER, sendbuf,       recvbuf, bytes,
                          INCOLL_UINT8,      INCOLL_OP_SUM, root};
    incoll_status_t status;
    int is_root;

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if ((status = check_root(comm, "scatter", root)) != INCOLL_OK ||
        (status = check_bytes(comm, "scatter", bytes, (size_t)comm->size)) !=
            INCOLL_OK ||
        bytes == 0)
        return status;
    is_root = comm->rank == root;
    if (is_root && (sendbuf == NULL || sendbuf == INCOLL_IN_PLACE))
        return null_buffer(comm, "scatter", "sendbuf at the root");
    if (recvbuf == (void *)INCOLL_IN_PLACE) {
        if (!is_root)
            return in_place_error(comm, "scatter", "recvbuf at a non-root");
        a.recvbuf = (uint8_t *)sendbuf + (size_t)root * bytes;
    } else if (recvbuf == NULL) {
        return null_buffer(comm, "scatter", "recvbuf");
    } else if (is_root &&
               recvbuf != (uint8_t *)sendbuf + (size_t)root * bytes &&
               overlaps(sendbuf, (size_t)comm->size * bytes, recvbuf, bytes)) {
        return overlap_error(comm, "scatter");
    }
    return host_coll_run(comm, HOST_CALGO_AUTO, &a);
}

incoll_status_t host_reduce_scatter_impl(incoll_comm_h comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, incoll_dtype_t dtype,
                                         incoll_op_t op)
{
    host_coll_args_t a = {
        ALGO_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype, op, 0};
    incoll_status_t status;
    size_t blk;

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if ((status = check_reduction(comm, "reduce_scatter", count, dtype, op,
                                  (size_t)comm->size)) != INCOLL_OK)
        return status;
    if (count == 0)
        return INCOLL_OK;
    blk = count * incoll_dtype_size(dtype);
    if (recvbuf == NULL)
        return null_buffer(comm, "reduce_scatter", "recvbuf");
    if (recvbuf == (void *)INCOLL_IN_PLACE)
        return in_place_error(comm, "reduce_scatter", "recvbuf");
    if (sendbuf == INCOLL_IN_PLACE || sendbuf == recvbuf)
        a.sendbuf = recvbuf; /* the input is at recvbuf */
    else if (sendbuf == NULL)
        return null_buffer(comm, "reduce_scatter", "sendbuf");
    else if (overlaps(sendbuf, (size_t)comm->size * blk, recvbuf, blk))
        return overlap_error(comm, "reduce_scatter");
    return host_coll_run(comm, HOST_CALGO_AUTO, &a);
}
