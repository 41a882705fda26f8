/*
 * Host-based allreduce over UDP: the driver of the point-to-point engine
 * (core/p2p_engine.h), which runs the schedules of core/algo.h with loss
 * recovery. Used as the fallback when the network cannot do an operation
 * and as the baselines the benchmarks compare the in-network algorithm
 * against (incoll_allreduce_algo with INCOLL_ALGO_RD, _RING,
 * _RABENSEIFNER).
 *
 * Each communicator gets one engine, made on its first host-based
 * operation (or when a peer's packet arrives first). The packets carry the
 * communicator's wire id and a mac under a key derived from the fabric
 * secret, the communicator and the job's generation (p2p_key), so neither
 * a forger nor a straggler from an earlier job on the same ports gets in.
 * Waiting blocks in ppoll (host_ctx_progress) until a packet or the engine's
 * next deadline: no busy-polling.
 */
#include "host/host.h"

#include "host/comm.h"
#include "host/colls.h"
#include "host/fallback.h"

#include "common/log.h"

#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void p2p_send(void *arg, incoll_ep_t dst, const void *hdr,
                     const void *payload, size_t len)
{
    incoll_ctx_h ctx = arg;
    udp_send(ctx->sock, dst, hdr, WIRE_HDR_LEN, payload, len);
}

/*
 * The communicator's mac key for the host-based algorithms: derived from
 * the fabric secret when there is one, else from fabric.conf's group key,
 * with the communicator and the job's generation mixed in (so a straggler
 * of an earlier job is dropped too). Every member computes the same key.
 */
static void p2p_key(incoll_comm_h comm, wire_key_t *key_p)
{
    incoll_ctx_h ctx = comm->ctx;
    wire_key_derive(ctx->has_secret ? ctx->secret : NULL, WIRE_KEY_P2P,
                    host_comm_wire_key(comm) ^ ctx->conf.group_key,
                    ctx->job_key, key_p);
}

incoll_status_t host_comm_p2p(incoll_comm_h comm)
{
    incoll_ctx_h ctx = comm->ctx;
    const host_engine_params_t *d = &ctx->eng_defaults;
    p2p_engine_params_t p;
    incoll_ep_t *peers;
    uint64_t payload = ctx->cfg.p2p_payload;
    uint64_t window = ctx->cfg.p2p_window;

    if (comm->p2p.eng != NULL)
        return INCOLL_OK;
    if (comm->size > P2P_MAX_RANKS) {
        incoll_error("allreduce: host-based algorithms support up to %d ranks, "
                     "the communicator has %d",
                     P2P_MAX_RANKS, comm->size);
        return INCOLL_ERR_UNSUPPORTED;
    }
    peers = malloc((size_t)comm->size * sizeof(*peers));
    if (peers == NULL)
        return INCOLL_ERR_NO_MEMORY;
    for (int r = 0; r < comm->size; r++) {
        peers[r] = host_comm_peer_ep(comm, r);
        if (peers[r] == INCOLL_EP_NONE) {
            incoll_error("allreduce: rank %d has no fixed UDP port: host-based "
                         "algorithms need fixed host ports in fabric.conf "
                         "(host rank=%d leaf=... addr=IP:PORT)",
                         r, comm->world_ranks[r]);
            free(peers);
            return INCOLL_ERR_CONFIG;
        }
    }
    if (payload == 0)
        payload = ctx->conf.payload ? ctx->conf.payload : 8192;
    if (payload < 8 || payload > WIRE_MAX_PAYLOAD) {
        incoll_warn("init: INCOLL_P2P_PAYLOAD=%" PRIu64 " is outside 8..%d; "
                    "using 8192",
                    payload, WIRE_MAX_PAYLOAD);
        payload = 8192;
    }
    if (window > P2P_WINDOW_MAX) /* (the table's range is 1..512) */
        window = P2P_WINDOW_MAX;
    memset(&p, 0, sizeof(p));
    p2p_engine_params_default(&p);
    p.group = host_comm_wire_id(comm);
    p2p_key(comm, &p.key);
    p.rank = comm->rank;
    p.size = comm->size;
    p.peers = peers;
    p.max_payload = (uint32_t)payload;
    p.window = (uint32_t)window;
    if (d->rto_min_ns && d->rto_max_ns >= d->rto_min_ns) {
        p.rto_init_ns = d->rto_init_ns;
        p.rto_min_ns = d->rto_min_ns;
        p.rto_max_ns = d->rto_max_ns;
    }
    /* The host-based algorithms' own floor (INCOLL_P2P_RTO_MIN_US): at the
     * in-network engine's 200 us, ring and Rabenseifner on 50 Mbit/s
     * emulated links resent what was only queued or not yet scheduled,
     * and took three times as long at 64 KiB. */
    {
        uint64_t floor_ns = ctx->cfg.p2p_rto_min_ns;
        if (p.rto_min_ns < floor_ns)
            p.rto_min_ns = floor_ns;
        if (p.rto_max_ns < p.rto_min_ns)
            p.rto_max_ns = p.rto_min_ns;
        if (p.rto_init_ns < p.rto_min_ns)
            p.rto_init_ns = p.rto_min_ns;
    }
    if (d->max_retries > 0)
        p.max_retries = d->max_retries;
    if (d->progress_timeout_ns)
        p.progress_timeout_ns = d->progress_timeout_ns;
    /* A peer that is silent may merely be late: outside the library,
     * computing or writing a checkpoint, in the MPI library's own
     * collective or in another communicator's recovery. Its socket keeps
     * what we send, and nothing tells it from a dead one; so, as MPI
     * does, it is waited for, up to INCOLL_WAIT_MS. */
    {
        uint64_t timeout_ns = ctx->cfg.wait_ns;
        uint64_t rto = p.rto_max_ns; /* at least the floor, above */
        if (p.progress_timeout_ns < timeout_ns)
            p.progress_timeout_ns = timeout_ns;
        if ((uint64_t)p.max_retries < timeout_ns / rto + 8)
            p.max_retries = (int)(timeout_ns / rto + 8);
    }
    p.send = p2p_send;
    p.send_arg = ctx;
    comm->p2p.eng = p2p_engine_create(&p);
    free(peers);
    if (comm->p2p.eng == NULL) {
        incoll_error("allreduce: cannot create the host-based engine "
                     "(%d ranks, payload %u, window %u)",
                     p.size, p.max_payload, p.window);
        return INCOLL_ERR_NO_MEMORY;
    }
    comm->p2p.id = p.group;
    return INCOLL_OK;
}

void host_p2p_dispatch(incoll_ctx_h ctx, const udp_msg_t *m,
                       const wire_hdr_t *h, uint64_t now_ns)
{
    for (incoll_comm_h c = ctx->comms; c; c = c->next) {
        const p2p_engine_counters_t *k;
        uint64_t before;
        if (c->p2p.retired != NULL && c->p2p.retired_id == h->group) {
            p2p_engine_on_packet(c->p2p.retired, m->src, m->data, m->len,
                                 now_ns);
            return;
        }
        if (c->p2p.eng ? c->p2p.id != h->group
                       : host_comm_wire_id(c) != h->group)
            continue;
        /* A peer ahead of us: make the engine now so its data is kept. */
        if (c->p2p.eng == NULL && host_comm_p2p(c) != INCOLL_OK)
            return;
        k = p2p_engine_counters(c->p2p.eng);
        before = k->early + k->refused;
        p2p_engine_on_packet(c->p2p.eng, m->src, m->data, m->len, now_ns);
        /* Another member's recovery data: this member joins it. */
        host_comm_shadow_fed(c, before);
        return;
    }
    /* The first recovery data of a communicator whose recovery channel
     * is not made here yet. */
    (void)host_comm_shadow_dispatch(ctx, m, h, now_ns);
}

/* Runs comm's engine until the operation it started ends (status is what
 * the start returned). */
static incoll_status_t p2p_wait(incoll_comm_h comm, incoll_status_t status,
                                const char *what, const char *algo)
{
    incoll_ctx_h ctx = comm->ctx;

    while (status == INCOLL_INPROGRESS) {
        /* Another member recovers the communicator (this operation
         * cannot complete any more: the member left it), or the call's
         * deadline passed: the operation is given up, and the caller
         * recovers with the others. */
        if (host_comm_pulled(comm) || host_call_expired(comm)) {
            p2p_engine_abandon(comm->p2p.eng, INCOLL_ERR_GROUP_FAILED);
            udp_flush(ctx->sock);
            return INCOLL_ERR_GROUP_FAILED;
        }
        host_ctx_progress(
            ctx, host_call_due(comm, p2p_engine_deadline(comm->p2p.eng)));
        p2p_engine_on_time(comm->p2p.eng, host_now_ns());
        status = p2p_engine_status(comm->p2p.eng);
    }
    /* Ack what peers ahead of us already sent for the next operation. */
    p2p_engine_on_time(comm->p2p.eng, host_now_ns());
    udp_flush(ctx->sock);
    if (status == INCOLL_ERR_GROUP_FAILED && comm->p2p.failed_what) {
        incoll_error("%s: the host-based operations of this communicator "
                     "are out of step since a %s (%s) failed on it",
                     what, comm->p2p.failed_what, comm->p2p.failed_algo);
    } else if (status != INCOLL_OK && status != INCOLL_ERR_GROUP_FAILED) {
        comm->p2p.failed_what = what;
        comm->p2p.failed_algo = algo;
    }
    return status;
}

incoll_status_t host_allreduce_sched(incoll_comm_h comm, algo_kind_t kind,
                                     const void *sendbuf, void *recvbuf,
                                     size_t count, incoll_dtype_t dtype,
                                     incoll_op_t op)
{
    incoll_status_t status = host_comm_p2p(comm);

    if (status != INCOLL_OK)
        return status;
    if (recvbuf != sendbuf)
        memcpy(recvbuf, sendbuf, count * incoll_dtype_size(dtype));
    p2p_engine_set_tag(comm->p2p.eng, comm->call_tag);
    status = p2p_engine_allreduce(comm->p2p.eng, kind, recvbuf, count, dtype,
                                  op, host_now_ns());
    return p2p_wait(comm, status, "allreduce", algo_name(kind));
}

incoll_status_t host_coll_sched(incoll_comm_h comm, algo_calgo_t id, int root,
                                void *work, size_t count, size_t seg,
                                incoll_dtype_t dtype, incoll_op_t op)
{
    const algo_calgo_info_t *info = algo_calgo_info(id);
    incoll_status_t status = host_comm_p2p(comm);

    if (status != INCOLL_OK)
        return status;
    status = p2p_engine_coll(comm->p2p.eng, id, root, work, count, seg, dtype,
                             op, host_now_ns());
    if (status == INCOLL_ERR_INVALID_ARG)
        incoll_error("%s: host-based algorithm %s cannot run over %d ranks",
                     algo_coll_name(info->coll), info->name, comm->size);
    return p2p_wait(comm, status, algo_coll_name(info->coll), info->name);
}

/* Waits for a packet on the context's socket until deadline_ns and feeds
 * those of comm's engine to it. Used while lingering, when comm may no
 * longer be on the context's list. */
static void linger_wait(incoll_comm_h comm, uint64_t deadline_ns)
{
    incoll_ctx_h ctx = comm->ctx;
    udp_msg_t msgs[64];
    struct pollfd pfd = {.fd = udp_fd(ctx->sock), .events = POLLIN};
    uint64_t now = host_now_ns();
    int n;

    udp_flush(ctx->sock);
    n = udp_recv_batch(ctx->sock, msgs, 64);
    if (n == 0 && deadline_ns > now) {
        struct timespec ts;
        uint64_t wait = deadline_ns - now;
        ts.tv_sec = (time_t)(wait / 1000000000ull);
        ts.tv_nsec = (long)(wait % 1000000000ull);
        if (ppoll(&pfd, 1, &ts, NULL) > 0)
            n = udp_recv_batch(ctx->sock, msgs, 64);
    }
    now = host_now_ns();
    for (int i = 0; i < n; i++) {
        wire_hdr_t h;
        if (wire_parse(msgs[i].data, msgs[i].len, &h, NULL) == INCOLL_OK &&
            (h.type == WIRE_P2P_DATA || h.type == WIRE_P2P_ACK) &&
            h.group == comm->p2p.id)
            p2p_engine_on_packet(comm->p2p.eng, msgs[i].src, msgs[i].data,
                                 msgs[i].len, now);
    }
}

void host_comm_p2p_free(incoll_comm_h comm)
{
    uint64_t next;

    p2p_engine_destroy(comm->p2p.retired);
    comm->p2p.retired = NULL;
    if (comm->p2p.eng == NULL)
        return;
    if (comm->ctx->sock != NULL) {
        next = p2p_engine_linger(comm->p2p.eng, host_now_ns());
        while (next != 0) {
            uint64_t d = p2p_engine_deadline(comm->p2p.eng);
            linger_wait(comm, d < next ? d : next);
            p2p_engine_on_time(comm->p2p.eng, host_now_ns());
            next = p2p_engine_linger(comm->p2p.eng, host_now_ns());
        }
        udp_flush(comm->ctx->sock);
    }
    {
        const p2p_engine_counters_t *k = p2p_engine_counters(comm->p2p.eng);
        incoll_debug(
            "p2p %08x: ops=%" PRIu64 " steps=%" PRIu64 " packets_sent=%" PRIu64
            " retransmits=%" PRIu64 " fast_retransmits=%" PRIu64
            " spurious=%" PRIu64 " needless=%" PRIu64 " probes=%" PRIu64
            " duplicates=%" PRIu64 " stale=%" PRIu64 " early=%" PRIu64
            " refused=%" PRIu64 " assumed_acked=%" PRIu64 " timeouts=%" PRIu64,
            comm->p2p.id, k->ops, k->steps, k->packets_sent, k->retransmits,
            k->fast_retransmits, k->spurious, k->needless, k->probes,
            k->duplicates, k->stale, k->early, k->refused, k->assumed_acked,
            k->timeouts);
    }
    p2p_engine_destroy(comm->p2p.eng);
    comm->p2p.eng = NULL;
}
