/*
 * The library's side of streaming aggregation (docs/streaming.md): when to
 * lock the tree and when to let it go. The protocol itself is the host
 * engine's (host_engine_lock, host_engine_unlock); here are the settings
 * (INCOLL_STREAM_THRESHOLD, INCOLL_STREAM_LOCK), the lock of one
 * communicator's engine that the caller's own locks take
 * (incoll_comm_lock, incoll_comm_unlock: service.c) and the one info
 * line that says why a lock was refused.
 */
#include "host/host.h"
#include "host/req.h"

#include "host/comm.h"
#include "host/stream.h"

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
    comm->stream.mode = mode < 0 ? -1 : mode > 0 ? 1 : 0;
}

/* The threshold comm's allreduces lock by (0: none locks). */
static size_t threshold_of(incoll_comm_h comm)
{
    return comm->stream.mode > 0   ? 1
           : comm->stream.mode < 0 ? 0
                                   : comm->ctx->stream.threshold;
}

int host_stream_would_lock(incoll_comm_h comm, size_t bytes)
{
    return comm->eng != NULL &&
           (host_engine_stream_wants_lock(comm->eng, threshold_of(comm),
                                          bytes) ||
            (comm->stream.mode < 0 &&
             host_engine_stream_window(comm->eng, NULL, NULL) > 0));
}

/* Says once per communicator, at info level, why a lock was refused. */
static void say_refused(incoll_comm_h comm, const char *why)
{
    if (comm->stream.said)
        return;
    comm->stream.said = 1;
    incoll_info("stream: lock refused on group %u: %s; large operations "
                "run on the group's slots until a lock is granted (said "
                "once)",
                comm->group, why);
}

/* A lock round for nops operations on comm's engine, after the last
 * lock's unlock; *granted_p 1 when granted. A refusal (also: no room for
 * stream slots after the group's) is INCOLL_OK with *granted_p 0. */
static incoll_status_t lock_round(incoll_comm_h comm, uint16_t nops,
                                  int *granted_p)
{
    incoll_status_t status;
    unsigned why = 0;

    *granted_p = 0;
    /* The last lock's unlock, left running by host_stream_end, ends
     * before the next lock round (the ANs take that round only then). */
    status = host_comm_settle(comm);
    if (status != INCOLL_OK)
        return status;
    comm->stream.nops = nops; /* before the round: host_comm_wait reads it */
    status = host_engine_lock(comm->eng, nops, host_now_ns());
    if (status == INCOLL_ERR_UNSUPPORTED) {
        say_refused(comm, "no room for stream slots after the group's");
        return INCOLL_OK;
    }
    status = round_wait(comm, status);
    if (status != INCOLL_OK)
        return status;
    if (host_engine_stream_window(comm->eng, NULL, &why) > 0)
        *granted_p = 1;
    else
        say_refused(comm, wire_lock_why_str(why));
    return INCOLL_OK;
}

incoll_status_t host_stream_begin(incoll_comm_h comm, size_t bytes)
{
    int granted;

    if (comm->eng == NULL)
        return INCOLL_OK;
    if (host_engine_stream_window(comm->eng, NULL, NULL) > 0) {
        /* Locked (for several operations, or by incoll_comm_lock): large
         * operations stream, small ones take the slots (the engine's
         * stream_large_only), unless the communicator was told not to
         * stream, which lets the lock go. */
        if (comm->stream.mode >= 0)
            return INCOLL_OK;
        return round_wait(comm, host_engine_unlock(comm->eng, host_now_ns()));
    }
    if (!host_engine_stream_wants_lock(comm->eng, threshold_of(comm), bytes))
        return INCOLL_OK;
    return lock_round(comm, comm->ctx->stream.nops, &granted);
}

void host_stream_end(incoll_comm_h comm)
{
    incoll_status_t status;

    if (comm->eng == NULL ||
        !host_engine_stream_wants_unlock(comm->eng, comm->stream.nops))
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
    incoll_debug("engine: group %u: ops=%" PRIu64 " segments=%" PRIu64
                 " packets_sent=%" PRIu64 " retransmits=%" PRIu64
                 " fast_retransmits=%" PRIu64 " probes=%" PRIu64
                 " queries=%" PRIu64 " spurious=%" PRIu64
                 " duplicate_results=%" PRIu64 " timeouts=%" PRIu64,
                 comm->group, k->ops, k->segments, k->packets_sent,
                 k->retransmits, k->fast_retransmits, k->probes, k->queries,
                 k->spurious, k->duplicate_results, k->timeouts);
    if (k->locks_granted + k->locks_refused > 0)
        incoll_info("stream: group %u: %" PRIu64 " of %" PRIu64
                    " operations streamed (%" PRIu64 " bytes), locks "
                    "granted %" PRIu64 " refused %" PRIu64 " lost %" PRIu64,
                    comm->group, k->stream_ops, k->ops, k->stream_bytes,
                    k->locks_granted, k->locks_refused, k->locks_lost);
}

incoll_status_t host_stream_unlock(incoll_comm_h comm)
{
    incoll_status_t status;

    if (comm->eng == NULL)
        return INCOLL_OK;
    status = host_comm_settle(comm);
    if (status != INCOLL_OK)
        return status;
    return round_wait(comm, host_engine_unlock(comm->eng, host_now_ns()));
}

/* A lock round that failed with the group: with a manager the next
 * operation recovers with the other members (the engine stays failed),
 * so the lock is only refused; without one the error is the caller's. */
static incoll_status_t lock_failed(incoll_comm_h comm, incoll_status_t status)
{
    if (comm->ctx->info == NULL ||
        (status != INCOLL_ERR_GROUP_FAILED && status != INCOLL_ERR_TIMEOUT))
        return status;
    incoll_info("stream: lock round on group %u failed: %s; the next "
                "operation recovers the group",
                comm->group, incoll_status_string(status));
    return INCOLL_OK;
}

incoll_status_t host_stream_lock(incoll_comm_h comm, uint16_t nops,
                                 int *granted_p)
{
    incoll_status_t status;

    *granted_p = 0;
    if (comm->eng == NULL) {
        say_refused(comm, "the communicator has no fabric group");
        return INCOLL_OK;
    }
    /* A lock held already goes first: the new one is for nops operations
     * from now (and a group that waits gets its turn before it). */
    status = host_stream_unlock(comm);
    if (status == INCOLL_OK)
        status = lock_round(comm, nops, granted_p);
    return status == INCOLL_OK ? status : lock_failed(comm, status);
}
