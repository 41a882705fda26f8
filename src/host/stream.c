/*
 * The library's side of streaming aggregation (docs/streaming.md): when to
 * lock the tree and when to let it go. The protocol itself is the host
 * engine's (host_engine_lock, host_engine_unlock); here are the settings
 * (INCOLL_STREAM_THRESHOLD, INCOLL_STREAM_LOCK) and the one info line that
 * says why a lock was refused.
 */
#include "host/host.h"

#include "common/log.h"
#include "common/wire.h"

#include <inttypes.h>

incoll_status_t host_stream_lock_parse(const char *text, uint16_t *nops_p)
{
    if (host_stream_policy_parse(text, nops_p) != 0) {
        incoll_error("init: INCOLL_STREAM_LOCK=%s: expected op, comm or a "
                     "number of operations 1..65535",
                     text);
        return INCOLL_ERR_CONFIG;
    }
    return INCOLL_OK;
}

/* Runs the engine's lock or unlock round to its end. */
static incoll_status_t round_wait(incoll_comm_h comm, incoll_status_t status)
{
    if (status == INCOLL_INPROGRESS)
        status = host_comm_wait(comm);
    return status;
}

void host_stream_mode(incoll_comm_h comm, int mode)
{
    comm->stream_mode = mode < 0 ? -1 : mode > 0 ? 1 : 0;
}

incoll_status_t host_stream_begin(incoll_comm_h comm, size_t bytes)
{
    incoll_ctx_h ctx = comm->ctx;
    size_t threshold = comm->stream_mode > 0   ? 1
                       : comm->stream_mode < 0 ? 0
                                               : ctx->stream_threshold;
    incoll_status_t status;
    unsigned why = 0;

    if (comm->eng == NULL)
        return INCOLL_OK;
    if (host_engine_stream_window(comm->eng, NULL, NULL) > 0) {
        /* Locked for several operations: they all stream, unless the
         * communicator was told not to, which lets the lock go. */
        if (comm->stream_mode >= 0)
            return INCOLL_OK;
        return round_wait(comm, host_engine_unlock(comm->eng, host_now_ns()));
    }
    if (!host_engine_stream_wants_lock(comm->eng, threshold, bytes))
        return INCOLL_OK;
    /* The last lock's unlock, left running by host_stream_end, ends
     * before the next lock round (the ANs take that round only then). */
    status = host_comm_settle(comm);
    if (status != INCOLL_OK)
        return status;
    status = host_engine_lock(comm->eng, ctx->stream_nops, host_now_ns());
    if (status == INCOLL_ERR_UNSUPPORTED)
        return INCOLL_OK; /* no room for stream slots after the group's */
    status = round_wait(comm, status);
    if (status != INCOLL_OK)
        return status;
    if (host_engine_stream_window(comm->eng, NULL, &why) == 0 &&
        !comm->stream_said) {
        comm->stream_said = 1;
        incoll_info("stream: lock refused on group %u: %s; large operations "
                    "run on the group's slots until a lock is granted "
                    "(said once)",
                    comm->group, wire_lock_why_str(why));
    }
    return INCOLL_OK;
}

void host_stream_end(incoll_comm_h comm)
{
    incoll_status_t status;

    if (comm->eng == NULL ||
        !host_engine_stream_wants_unlock(comm->eng, comm->ctx->stream_nops))
        return;
    /* The operation is done and its result delivered: the unlock round
     * runs in the background (the next lock, comm_destroy and finalize
     * wait for it, host_comm_settle; operations on the slots run beside
     * it). One that gets no answer leaves the engine failed, and the next
     * operation recovers (GROUP_FAILED) rather than this one being run
     * twice. */
    status = host_engine_unlock_bg(comm->eng, host_now_ns());
    if (status != INCOLL_OK && status != INCOLL_INPROGRESS)
        incoll_warn("stream: unlock on group %u failed: %s", comm->group,
                    incoll_status_string(status));
}

void host_stream_report(incoll_comm_h comm)
{
    const host_engine_counters_t *k;

    if (comm->eng == NULL)
        return;
    k = host_engine_counters(comm->eng);
    if (k->locks_granted + k->locks_refused > 0)
        incoll_info("stream: group %u: %" PRIu64 " of %" PRIu64
                    " operations streamed (%" PRIu64 " bytes), locks "
                    "granted %" PRIu64 " refused %" PRIu64 " lost %" PRIu64,
                    comm->group, k->stream_ops, k->ops, k->stream_bytes,
                    k->locks_granted, k->locks_refused, k->locks_lost);
}
