/*
 * Multicast results on the host (docs/multicast.md): one listening socket
 * per process, bound to INCOLL_MCAST_PORT on every address and receiving
 * only the multicast addresses it joined; a communicator joins its
 * group's address when its engine is made and leaves it when the engine
 * goes. Its packets take the same dispatch as the unicast socket's: the
 * engine checks the group, the generation, the sender (the leaf AN) and
 * the mac as for any result, so a forged or foreign multicast packet is
 * dropped and counted there.
 */
#include "host/host.h"
#include "host/mcast.h"

#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>

/* Says once per process why results come by unicast (and counts each
 * communicator that falls back). */
static void fallback_warn(incoll_ctx_h ctx, const char *fmt, const char *why)
{
    ctx->counters.acc[MGR_PC_MC_FALLBACKS]++;
    if (ctx->mc_warned++)
        incoll_debug(fmt, why);
    else
        incoll_warn(fmt, why);
}

/* The interface to join on: our socket's address, or loopback for an AN
 * on loopback when our socket is bound to every address. */
static uint32_t join_ip(incoll_ctx_h ctx, incoll_ep_t an)
{
    uint32_t ip = (uint32_t)(udp_local_ep(ctx->sock) >> 16);
    if (ip == 0 && (uint32_t)(an >> 40) == 127)
        ip = 0x7f000001u;
    return ip;
}

void host_mcast_params(incoll_comm_h comm, incoll_ep_t ep, incoll_ep_t an,
                       host_engine_params_t *p)
{
    incoll_ctx_h ctx = comm->ctx;
    char why[192], es[32];
    int free_i = -1;

    p->mcast = 0;
    p->mcast_probe_ops = ctx->cfg.mcast_probe_ops;
    host_mcast_leave(comm);
    if (ep == 0 || ep == INCOLL_EP_NONE || !ctx->cfg.mcast)
        return;
    if (ctx->mc_sock == NULL && !ctx->mc_open_failed) {
        ctx->mc_sock =
            udp_open_flags(0, (uint16_t)(ep & 0xffff), (int)ctx->cfg.udp_buf,
                           "mcast", UDP_OPEN_MCAST);
        ctx->mc_open_failed = ctx->mc_sock == NULL;
    }
    if (ctx->mc_sock == NULL) {
        fallback_warn(ctx,
                      "multicast results: %s; results come by unicast "
                      "(INCOLL_MCAST=0 says this is meant)",
                      "cannot open the listening socket");
        return;
    }
    for (int i = 0; i < HOST_MCAST_MAX; i++) {
        if (ctx->mc_joined[i].refs > 0 && ctx->mc_joined[i].ep == ep) {
            ctx->mc_joined[i].refs++;
            comm->mc_ep = ep;
            p->mcast = 1;
            return;
        }
        if (ctx->mc_joined[i].refs == 0 && free_i < 0)
            free_i = i;
    }
    if (free_i < 0) {
        /* A limit, not a fault of the fabric: this group's results come
         * by unicast. */
        incoll_info("multicast results: this process listens on %d "
                    "addresses already; this communicator's results come "
                    "by unicast",
                    HOST_MCAST_MAX);
        return;
    }
    ctx->mc_joined[free_i].ip = join_ip(ctx, an);
    comm->mc_late = ctx->cfg.fault_mcast_join_ops;
    if (comm->mc_late == 0 &&
        udp_mcast_join(ctx->mc_sock, ep, ctx->mc_joined[free_i].ip, 1, why,
                       sizeof(why)) != 0) {
        fallback_warn(ctx,
                      "multicast results: %s; results come by unicast "
                      "(INCOLL_MCAST=0 says this is meant)",
                      why);
        return;
    }
    ctx->mc_joined[free_i].ep = ep;
    ctx->mc_joined[free_i].refs = 1;
    comm->mc_ep = ep;
    p->mcast = 1;
    incoll_debug("multicast results: listening on %s",
                 wire_ep_str(ep, es, sizeof(es)));
}

void host_mcast_leave(incoll_comm_h comm)
{
    incoll_ctx_h ctx = comm->ctx;
    char why[192];
    if (comm->mc_ep == 0)
        return;
    for (int i = 0; i < HOST_MCAST_MAX; i++) {
        if (ctx->mc_joined[i].refs == 0 || ctx->mc_joined[i].ep != comm->mc_ep)
            continue;
        if (--ctx->mc_joined[i].refs == 0 &&
            udp_mcast_join(ctx->mc_sock, comm->mc_ep, ctx->mc_joined[i].ip, 0,
                           why, sizeof(why)) != 0)
            incoll_debug("multicast results: %s", why);
        break;
    }
    comm->mc_ep = 0;
    comm->mc_late = 0;
}

/* Makes the join INCOLL_FAULT_MCAST_JOIN_OPS put off, when its
 * operations have gone. */
static void late_join(incoll_comm_h comm)
{
    incoll_ctx_h ctx = comm->ctx;
    char why[192];
    if (comm->mc_late == 0 || --comm->mc_late > 0)
        return;
    for (int i = 0; i < HOST_MCAST_MAX; i++)
        if (ctx->mc_joined[i].refs > 0 && ctx->mc_joined[i].ep == comm->mc_ep &&
            udp_mcast_join(ctx->mc_sock, comm->mc_ep, ctx->mc_joined[i].ip, 1,
                           why, sizeof(why)) != 0)
            incoll_warn("multicast results: %s", why);
}

void host_mcast_check(incoll_comm_h comm)
{
    char why[192], es[32];
    if (comm->mc_ep != 0)
        late_join(comm);
    if (comm->mc_ep == 0 || comm->eng == NULL ||
        host_engine_mcast(comm->eng) >= 0)
        return;
    snprintf(why, sizeof(why),
             "the first %" PRIu64 " operations of group %u brought no "
             "result to %s (the fabric does not carry multicast, or the AN "
             "does not send it)",
             (uint64_t)comm->ctx->cfg.mcast_probe_ops, comm->group,
             wire_ep_str(comm->mc_ep, es, sizeof(es)));
    fallback_warn(comm->ctx, "multicast results: %s; results come by unicast",
                  why);
    host_mcast_leave(comm);
}

int host_mcast_recv(incoll_ctx_h ctx, udp_msg_t *msgs, int max)
{
    int n;
    if (ctx->mc_sock == NULL)
        return 0;
    n = udp_recv_batch(ctx->mc_sock, msgs, max);
    return n > 0 ? n : 0;
}

int host_mcast_fd(incoll_ctx_h ctx)
{
    return ctx->mc_sock ? udp_fd(ctx->mc_sock) : -1;
}

void host_mcast_close(incoll_ctx_h ctx)
{
    udp_close(ctx->mc_sock);
    ctx->mc_sock = NULL;
    for (int i = 0; i < HOST_MCAST_MAX; i++)
        ctx->mc_joined[i].refs = 0;
}
