/*
 * The allreduce (incoll_allreduce's implementation, and the service
 * allreduce of the library's own exchanges): argument checks, staging of
 * in-place and overlapping buffers (so a failed in-network operation
 * never leaves the input half overwritten and can be run again), then the
 * fabric group's engine or a host-based algorithm.
 *
 * INCOLL_ALGO_AUTO runs in the network when the communicator has a working
 * group that can do the op and dtype, else on the hosts. With a manager,
 * an in-network operation writes its result into a buffer of the
 * communicator (host_comm_result_buf) and copies it out on success: one
 * copy, no staging even in place, and the result stays kept for members
 * that fail to get it. An operation that fails (its group failed, or it
 * made no progress for INCOLL_MGR_OP_TIMEOUT_MS) goes through a recovery
 * of all members (host_comm_recover, docs/failures.md): members that did
 * not get the result of the operation take it from those that did, the
 * others run theirs again, on a new group or on the hosts. A recovery that
 * cannot complete fails the call and every later one with
 * INCOLL_ERR_GROUP_FAILED: never a wrong or doubled result. Without a
 * manager nobody can tell a dead AN from a slow rank, so a timeout is
 * returned to the caller as it is.
 */
#include "host/host.h"
#include "host/req.h"

#include "host/comm.h"
#include "host/counters.h"
#include "host/colls.h"
#include "host/allreduce.h"
#include "host/fallback.h"
#include "host/stream.h"

#include "common/log.h"
#include "common/mgr_codec.h"

#include <string.h>

static int overlaps(const void *a, const void *b, size_t len)
{
    const char *pa = a, *pb = b;
    return pa < pb + len && pb < pa + len;
}

/* The library's own allreduce (split agreement, emulated collectives,
 * the selection table's agreement): what incoll_allreduce does under the
 * lock its caller already holds, without taking it. */
incoll_status_t host_allreduce_service(incoll_comm_h comm, const void *sendbuf,
                                       void *recvbuf, size_t count,
                                       incoll_dtype_t dtype, incoll_op_t op)
{
    incoll_status_t status;
    host_where_begin();
    status = host_allreduce_algo_impl(comm, INCOLL_ALGO_AUTO, sendbuf, recvbuf,
                                      count, dtype, op);
    comm->where = host_where_end(comm);
    return status;
}

incoll_status_t host_allreduce_own(incoll_comm_h comm, const void *sendbuf,
                                   void *recvbuf, size_t count,
                                   incoll_dtype_t dtype, incoll_op_t op)
{
    incoll_status_t status;
    host_usage_begin();
    status = host_allreduce_service(comm, sendbuf, recvbuf, count, dtype, op);
    host_usage_end();
    return status;
}

/* One in-network allreduce on comm's current group; its result also goes
 * into mirror unless that is NULL (host_engine_set_mirror). */
static incoll_status_t inc_run_to(incoll_comm_h comm, const void *sendbuf,
                                  void *recvbuf, void *mirror, size_t count,
                                  incoll_dtype_t dtype, incoll_op_t op)
{
    incoll_status_t status;
    host_comm_finish_op(comm);
    /* Large enough: lock the tree and stream (a refusal runs it on the
     * slots), then let the lock go when its operations are done. */
    status = host_stream_begin(comm, count * incoll_dtype_size(dtype));
    if (status != INCOLL_OK)
        return status;
    host_engine_set_root(comm->eng, comm->call_tag);
    /* Only now: an operation finished above (a nonblocking one) must not
     * write into it. */
    host_engine_set_mirror(comm->eng, mirror);
    status = host_engine_start(comm->eng, sendbuf, recvbuf, count, dtype, op,
                               host_now_ns());
    if (status == INCOLL_INPROGRESS)
        status = host_comm_wait(comm);
    if (status == INCOLL_OK)
        host_stream_end(comm);
    return status;
}

static incoll_status_t inc_run(incoll_comm_h comm, const void *sendbuf,
                               void *recvbuf, size_t count,
                               incoll_dtype_t dtype, incoll_op_t op)
{
    return inc_run_to(comm, sendbuf, recvbuf, NULL, count, dtype, op);
}

/* The host-based algorithm for this size (algo_pick); sendbuf may equal
 * recvbuf (in place, no staging needed) but not overlap it otherwise. */
static incoll_status_t host_run(incoll_comm_h comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                incoll_dtype_t dtype, incoll_op_t op)
{
    algo_kind_t kind = algo_pick_cut(&comm->ctx->cfg.algo_cuts, comm->size,
                                     count, incoll_dtype_size(dtype));
    return host_allreduce_sched(comm, kind, sendbuf, recvbuf, count, dtype, op);
}

/* One in-network allreduce whose result goes through the communicator's
 * result buffer (recoverable comms). In place, recvbuf is written only on
 * success (it is sendbuf, which a resend may still need); otherwise the
 * engine writes each result segment into recvbuf too as it arrives
 * (host_engine_set_mirror), so no copy of the whole result is left for
 * the end (recvbuf's contents are unspecified on failure). */
static incoll_status_t inc_run_kept(incoll_comm_h comm, const void *sendbuf,
                                    void *recvbuf, size_t count,
                                    incoll_dtype_t dtype, incoll_op_t op)
{
    size_t bytes = count * incoll_dtype_size(dtype);
    void *res = host_comm_result_buf(comm, bytes);
    int mirror = sendbuf != recvbuf && comm->eng != NULL;
    incoll_status_t status;

    if (res == NULL)
        return INCOLL_ERR_NO_MEMORY;
    status = inc_run_to(comm, sendbuf, res, mirror ? recvbuf : NULL, count,
                        dtype, op);
    if (comm->eng != NULL)
        host_engine_set_mirror(comm->eng, NULL);
    if (status == INCOLL_OK) {
        if (!mirror || comm->eng == NULL ||
            host_engine_mirrored(comm->eng) != count)
            memcpy(recvbuf, res, bytes);
        host_comm_result_done(comm, count, dtype, op);
    }
    return status;
}

/*
 * INCOLL_ALGO_AUTO: see the top of the file. sendbuf does not overlap
 * recvbuf unless it is recvbuf itself and the comm runs on the hosts or
 * keeps its results (host_comm_recoverable).
 */
static incoll_status_t auto_run(incoll_comm_h comm, const void *sendbuf,
                                void *recvbuf, size_t count,
                                incoll_dtype_t dtype, incoll_op_t op)
{
    int kept = host_comm_recoverable(comm);
    incoll_status_t status;
    int done;

    for (int attempt = 0;; attempt++) {
        uint64_t ops = 0;
        int started = 0, why, net = host_comm_inc_usable(comm, op, dtype);
        if (net) {
            ops = host_engine_counters(comm->eng)->ops;
            status =
                kept ? inc_run_kept(comm, sendbuf, recvbuf, count, dtype, op)
                     : inc_run(comm, sendbuf, recvbuf, count, dtype, op);
            /* An engine that failed before refuses to start. */
            started = comm->eng != NULL &&
                      host_engine_counters(comm->eng)->ops != ops;
        } else {
            status = host_run(comm, sendbuf, recvbuf, count, dtype, op);
        }
        if (status == INCOLL_OK)
            host_where_note(net && attempt == 0,
                            attempt > 0 ? INCOLL_WHY_RECOVERED
                            : net       ? INCOLL_WHY_NETWORK
                            : incoll_comm_offloaded(comm, NULL)
                                ? INCOLL_WHY_UNSUPPORTED
                                : INCOLL_WHY_NO_GROUP);
        why = host_comm_fail_why(comm, status, net);
        if (status == INCOLL_OK)
            host_usage_note(comm, net ? -1 : host_comm_fb_reason(comm));
        /* host_comm_recover() makes at most two new groups, then leaves
         * the comm without one: the loop ends on the hosts. */
        if (status == INCOLL_OK || why < 0 || attempt >= 4)
            return status;
        if (net)
            incoll_info("allreduce: in-network operation on group %u failed: "
                        "%s; recovering with the other members",
                        comm->group, incoll_status_string(status));
        status = host_comm_recover(comm, started, recvbuf, count, dtype, op,
                                   why, &done);
        if (status == INCOLL_OK && done) /* the result, from the others */
            host_usage_note(comm, MGR_FB_GROUP_FAILED);
        if (status != INCOLL_OK || done) {
            host_where_note(0, INCOLL_WHY_RECOVERED);
            return status;
        }
    }
}

static incoll_status_t allreduce_call(incoll_comm_h comm, incoll_algo_t algo,
                                      const void *sendbuf, void *recvbuf,
                                      size_t count, incoll_dtype_t dtype,
                                      incoll_op_t op);

incoll_status_t host_allreduce_algo_impl(incoll_comm_h comm, incoll_algo_t algo,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, incoll_dtype_t dtype,
                                         incoll_op_t op)
{
    incoll_status_t status;
    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    host_call_begin(comm);
    host_usage_begin();
    status = allreduce_call(comm, algo, sendbuf, recvbuf, count, dtype, op);
    host_usage_end();
    host_call_end(comm);
    return status;
}

/* The algorithm, dtype and op: known, and the op applies to the dtype. */
static incoll_status_t check_kinds(incoll_comm_h comm, incoll_algo_t algo,
                                   incoll_dtype_t dtype, incoll_op_t op)
{
    if ((unsigned)algo >= INCOLL_ALGO_COUNT) {
        incoll_error("allreduce: unknown algorithm %d", (int)algo);
        return host_comm_refuse(comm, INCOLL_ERR_INVALID_ARG);
    }
    if ((unsigned)dtype >= INCOLL_DTYPE_COUNT ||
        (unsigned)op >= INCOLL_OP_COUNT) {
        incoll_error("allreduce: unknown %s %d",
                     (unsigned)dtype >= INCOLL_DTYPE_COUNT ? "dtype" : "op",
                     (unsigned)dtype >= INCOLL_DTYPE_COUNT ? (int)dtype
                                                           : (int)op);
        return host_comm_refuse(comm, INCOLL_ERR_INVALID_ARG);
    }
    if (!incoll_op_valid(op, dtype)) {
        incoll_error("allreduce: op %s does not apply to dtype %s",
                     incoll_op_name(op), incoll_dtype_name(dtype));
        return host_comm_refuse(comm, INCOLL_ERR_INVALID_ARG);
    }
    return INCOLL_OK;
}

/* The buffers of a call of count elements of dsize bytes: given, not
 * INCOLL_IN_PLACE as recvbuf, and the same (in place) or apart. */
static incoll_status_t check_bufs(incoll_comm_h comm, const void *sendbuf,
                                  void *recvbuf, size_t count, size_t dsize)
{
    if (count > SIZE_MAX / dsize || recvbuf == NULL || sendbuf == NULL ||
        recvbuf == (void *)INCOLL_IN_PLACE) {
        incoll_error("allreduce: %s",
                     recvbuf == NULL || sendbuf == NULL ? "null buffer"
                     : recvbuf == (void *)INCOLL_IN_PLACE
                         ? "INCOLL_IN_PLACE is for sendbuf (recvbuf holds the "
                           "input then)"
                         : "count too large");
        return host_comm_refuse(comm, INCOLL_ERR_INVALID_ARG);
    }
    if (sendbuf == INCOLL_IN_PLACE)
        sendbuf = recvbuf;
    /* As every collective: the same buffer is in place, any other
     * overlap is refused (MPI forbids it). */
    if (sendbuf != recvbuf && overlaps(sendbuf, recvbuf, count * dsize)) {
        incoll_error("allreduce: sendbuf and recvbuf overlap (use "
                     "INCOLL_IN_PLACE)");
        return host_comm_refuse(comm, INCOLL_ERR_INVALID_ARG);
    }
    return INCOLL_OK;
}

/* A host-based algorithm the caller asked for (algo), with the recovery
 * a failed call goes through. */
static incoll_status_t host_asked(incoll_comm_h comm, incoll_algo_t algo,
                                  const void *sendbuf, void *recvbuf,
                                  size_t count, incoll_dtype_t dtype,
                                  incoll_op_t op)
{
    incoll_status_t status;

    host_where_note(0, INCOLL_WHY_ALGO);
    status = host_allreduce_sched(comm, host_algo_kind(algo), sendbuf, recvbuf,
                                  count, dtype, op);
    {
        /* A peer's call differs, this call's deadline passed or
         * another member recovers: all go on together. */
        int why = host_comm_fail_why(comm, status, 0), done;
        if (status != INCOLL_OK && why > HOST_ABORT_NONE) {
            incoll_status_t rec = host_comm_recover(comm, 0, recvbuf, count,
                                                    dtype, op, why, &done);
            if (rec != INCOLL_OK || done)
                return rec;
            status = host_allreduce_sched(comm, host_algo_kind(algo), sendbuf,
                                          recvbuf, count, dtype, op);
        }
    }
    if (status == INCOLL_OK)
        host_usage_note(comm, MGR_FB_REQUESTED);
    return status;
}

static incoll_status_t allreduce_call(incoll_comm_h comm, incoll_algo_t algo,
                                      const void *sendbuf, void *recvbuf,
                                      size_t count, incoll_dtype_t dtype,
                                      incoll_op_t op)
{
    incoll_status_t status;
    size_t dsize, bytes;
    int in_place, host;

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if ((status = host_comm_doomed(comm)) != INCOLL_OK)
        return status;
    /* A bad argument is refused on every rank: one rank alone leaving
     * the call would put the communicator out of step (host_comm_refuse). */
    if ((status = check_kinds(comm, algo, dtype, op)) != INCOLL_OK)
        return status;
    if (count == 0)
        return INCOLL_OK;
    dsize = incoll_dtype_size(dtype);
    if ((status = check_bufs(comm, sendbuf, recvbuf, count, dsize)) !=
        INCOLL_OK)
        return status;
    bytes = count * dsize;
    if (sendbuf == INCOLL_IN_PLACE)
        sendbuf = recvbuf;
    if (comm->size == 1) {
        if (sendbuf != recvbuf)
            memmove(recvbuf, sendbuf, bytes);
        host_where_note(1, INCOLL_WHY_ALONE);
        return INCOLL_OK;
    }
    /* Ranks sharing a host go through its leader (src/host/hier.c, above
     * this file: reached through ctx->up); the leaders' communicator does
     * the rest below. */
    if (comm->ctx->up.hier_active(comm, &status)) {
        status = comm->ctx->up.hier_allreduce(comm, algo, sendbuf, recvbuf,
                                              count, dtype, op);
        if (status == INCOLL_OK) /* where the leaders' allreduce ran */
            host_usage_note_inner(comm);
        return status;
    }
    if (status != INCOLL_OK) {
        /* Making the level failed: with every member alike, or because
         * another member recovers (a member refused this first call):
         * this one joins it. */
        int done;
        if (!host_comm_pulled(comm))
            return status;
        status = host_comm_recover(comm, 0, recvbuf, count, dtype, op,
                                   HOST_ABORT_PULLED, &done);
        if (status != INCOLL_OK || done)
            return status;
        return allreduce_call(comm, algo, sendbuf, recvbuf, count, dtype, op);
    }
    {
        const char *why;
        if (host_comm_broken(comm, &why)) {
            incoll_error("allreduce: the communicator cannot be used: %s", why);
            return INCOLL_ERR_GROUP_FAILED;
        }
    }
    /* A group the manager said failed, or another member recovering:
     * every member recovers before its next operation (those inside one
     * fail on it and recover too), also before a host-based one, so that
     * members behind can get the result they lack from this one. */
    if (host_comm_group_failed(comm) || host_comm_pulled(comm)) {
        int done;
        status = host_comm_recover(
            comm, 0, recvbuf, count, dtype, op,
            host_comm_group_failed(comm) ? HOST_ABORT_NONE : HOST_ABORT_PULLED,
            &done);
        if (done)
            host_where_note(0, INCOLL_WHY_RECOVERED);
        if (status != INCOLL_OK || done)
            return status; /* done: this call's result, from those ahead */
        host_call_restart(comm);
    }
    if (algo == INCOLL_ALGO_INC && !host_comm_inc_usable(comm, op, dtype)) {
        const char *why = "";
        incoll_comm_offloaded(comm, &why);
        incoll_error("allreduce: the in-network algorithm was asked for but "
                     "%s",
                     comm->eng && comm->group
                         ? "the group cannot do this op on this dtype"
                         : why);
        return comm->eng && comm->group ? INCOLL_ERR_UNSUPPORTED
                                        : INCOLL_ERR_NO_RESOURCE;
    }
    /* Every algorithm needs its input intact until the result is in: the
     * in-network engine to resend it, and either to run the call again
     * after a recovery (the host-based algorithms work in recvbuf, and a
     * member pulled into a recovery redoes its call). Only an in-network
     * operation through the communicator's result buffer
     * (host_comm_recoverable) needs no staging in place. */
    in_place = sendbuf == recvbuf;
    host = algo == INCOLL_ALGO_RD || algo == INCOLL_ALGO_RING ||
           algo == INCOLL_ALGO_RABENSEIFNER ||
           (algo == INCOLL_ALGO_AUTO && !host_comm_inc_usable(comm, op, dtype));
    if (in_place && (host || !host_comm_recoverable(comm))) {
        status = host_comm_scratch(comm, bytes);
        if (status != INCOLL_OK)
            return status;
        memcpy(comm->scratch, sendbuf, bytes);
        sendbuf = comm->scratch;
    }
    if (algo == INCOLL_ALGO_RD || algo == INCOLL_ALGO_RING ||
        algo == INCOLL_ALGO_RABENSEIFNER)
        return host_asked(comm, algo, sendbuf, recvbuf, count, dtype, op);
    if (algo == INCOLL_ALGO_INC) {
        host_where_note(1, INCOLL_WHY_NETWORK);
        status = host_comm_recoverable(comm)
                     ? inc_run_kept(comm, sendbuf, recvbuf, count, dtype, op)
                     : inc_run(comm, sendbuf, recvbuf, count, dtype, op);
        if (status == INCOLL_OK)
            host_usage_note(comm, -1);
        return status;
    }
    return auto_run(comm, sendbuf, recvbuf, count, dtype, op);
}
