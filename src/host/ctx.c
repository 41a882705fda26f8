/*
 * Context: the clock and the calls' deadlines, the progress loop shared
 * by all communicators and the manager link with its dispatch of packets,
 * and the waits for a communicator's engine. The context is made and
 * freed by src/host/init.c.
 */
#include "host/host.h"

#include "host/comm.h"
#include "host/lock.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t host_now_ns(void)
{
    return now_ns();
}

void host_call_begin(incoll_comm_h comm)
{
    if (comm->call_depth++ == 0)
        comm->call_deadline =
            comm->ctx->deadline_ns ? host_now_ns() + comm->ctx->deadline_ns : 0;
}

void host_call_end(incoll_comm_h comm)
{
    if (comm->call_depth > 0 && --comm->call_depth == 0)
        comm->call_deadline = 0;
}

void host_call_restart(incoll_comm_h comm)
{
    if (comm->call_depth == 1 && comm->call_deadline != 0)
        comm->call_deadline = host_now_ns() + comm->ctx->deadline_ns;
}

int host_call_expired(incoll_comm_h comm)
{
    return comm->call_deadline != 0 && host_now_ns() >= comm->call_deadline;
}

uint64_t host_call_due(incoll_comm_h comm, uint64_t due_ns)
{
    return comm->call_deadline != 0 && comm->call_deadline < due_ns
               ? comm->call_deadline
               : due_ns;
}

/* Hands m to its destination; 0 when it has none here. */
static int dispatch(incoll_ctx_h ctx, const udp_msg_t *m, uint64_t now)
{
    wire_hdr_t h;
    if (wire_parse(m->data, m->len, &h, NULL) != INCOLL_OK) {
        char ep[32];
        int version = wire_peek_version(m->data, m->len);
        if (version >= 0 && version != WIRE_VERSION &&
            wire_once(&ctx->peers_told, m->src ^ ((uint64_t)version << 48)))
            incoll_error("packet from %s speaks wire version %d, this "
                         "process speaks %d: hosts and ANs must run the same "
                         "incoll",
                         wire_ep_str(m->src, ep, sizeof(ep)), version,
                         WIRE_VERSION);
        else
            incoll_debug("drop packet from %s: malformed",
                         wire_ep_str(m->src, ep, sizeof(ep)));
        return 0;
    }
    for (int i = 0; i < ctx->npkt; i++) {
        if (ctx->pkt[i].type == h.type) {
            ctx->pkt[i].fn(ctx, m, &h, now);
            return 1;
        }
    }
    for (incoll_comm_h c = ctx->comms; c; c = c->next) {
        if (c->eng && c->group == h.group) {
            host_engine_on_packet(c->eng, m->src, m->data, m->len, now);
            return 1;
        }
    }
    return 0;
}

/* Dispatches what came to the multicast socket (src/host/mcast.c);
 * returns the datagrams read. */
static int mc_dispatch(incoll_ctx_h ctx)
{
    udp_msg_t msgs[16];
    int n, got = 0;
    while ((n = ctx->io.mc_recv(ctx, msgs, 16)) > 0) {
        uint64_t now = host_now_ns();
        got += n;
        for (int i = 0; i < n; i++)
            if (!dispatch(ctx, &msgs[i], now))
                ctx->mc_foreign++;
        udp_flush(ctx->sock);
        if (n < 16)
            break;
    }
    return got;
}

void host_ctx_on_packet(incoll_ctx_h ctx, uint8_t type, host_pkt_fn fn)
{
    if (ctx->npkt < HOST_PKT_HANDLERS) {
        ctx->pkt[ctx->npkt].type = type;
        ctx->pkt[ctx->npkt].fn = fn;
        ctx->npkt++;
    }
}

/* While packets keep coming the loop does not poll; it still reads the
 * manager link this often, so a group failure is heard. */
#define MGR_BUSY_CHECK_NS 10000000ull

void host_ctx_progress(incoll_ctx_h ctx, uint64_t deadline_ns)
{
    udp_msg_t msgs[64];
    int n, mc = 0;

    udp_flush(ctx->sock);
    /* A multicast result that was waiting already (node mode's shared
     * socket starts the operation once its result is in) ends the wait
     * here: no blocking poll after it, or the caller would sleep until
     * its deadline with the operation done. */
    if (ctx->mc_sock != NULL && ctx->io.mc_recv != NULL)
        mc = mc_dispatch(ctx);
    n = udp_recv_batch(ctx->sock, msgs, 64);
    if (n == 0 && mc == 0) {
        struct pollfd pfd[3] = {{.fd = udp_fd(ctx->sock), .events = POLLIN},
                                {.fd = -1},
                                {.fd = -1, .events = POLLIN}};
        uint64_t now = host_now_ns();
        uint64_t mgr_due = UINT64_MAX;
        uint64_t until;
        struct timespec ts, *tsp = NULL;
        if (ctx->io.mc_fd != NULL && ctx->io.mc_recv != NULL)
            pfd[2].fd = ctx->io.mc_fd(ctx);
        if (ctx->io.mgr_pollfd != NULL)
            mgr_due = ctx->io.mgr_pollfd(ctx, &pfd[1]);
        until = deadline_ns < mgr_due ? deadline_ns : mgr_due;
        if (until != UINT64_MAX) {
            uint64_t wait = until > now ? until - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ull);
            ts.tv_nsec = (long)(wait % 1000000000ull);
            tsp = &ts;
        }
        /* poll() skips the manager's entry while its fd is -1. */
        /* Gives the library lock up while blocked (src/host/lock.c). */
        if (host_sync_ppoll(ctx, pfd, pfd[2].fd >= 0 ? 3 : 2, tsp) > 0 &&
            (pfd[0].revents & POLLIN))
            n = udp_recv_batch(ctx->sock, msgs, 64);
        if (pfd[2].fd >= 0 && (pfd[2].revents & POLLIN)) {
            mc_dispatch(ctx);
            host_sync_kick(ctx);
        }
        if ((pfd[1].fd >= 0 && pfd[1].revents) ||
            (mgr_due != UINT64_MAX && host_now_ns() >= mgr_due)) {
            ctx->io.mgr_on_readable(ctx);
            ctx->mgr_checked_ns = host_now_ns();
        }
    } else if (ctx->info != NULL && ctx->io.mgr_on_readable != NULL &&
               host_now_ns() - ctx->mgr_checked_ns >= MGR_BUSY_CHECK_NS) {
        ctx->io.mgr_on_readable(ctx);
        ctx->mgr_checked_ns = host_now_ns();
    }
    if (n > 0) {
        while (n > 0) {
            uint64_t now = host_now_ns();
            for (int i = 0; i < n; i++)
                dispatch(ctx, &msgs[i], now);
            udp_flush(ctx->sock);
            n = n == 64 ? udp_recv_batch(ctx->sock, msgs, 64) : 0;
        }
        /* Other threads may wait for what we dispatched. */
        host_sync_kick(ctx);
    } else if (mc > 0) {
        host_sync_kick(ctx);
    }
}

incoll_status_t host_comm_scratch(incoll_comm_h comm, size_t len)
{
    void *p;
    if (comm->scratch_len >= len)
        return INCOLL_OK;
    p = realloc(comm->scratch, len);
    if (p == NULL) {
        incoll_error("allreduce: cannot stage %zu bytes", len);
        return INCOLL_ERR_NO_MEMORY;
    }
    comm->scratch = p;
    comm->scratch_len = len;
    return INCOLL_OK;
}
