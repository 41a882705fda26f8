/*
 * The measuring tools' view of the library's counters: see counters.h.
 */
#include "counters.h"

#include "common/clock.h"
#include "common/mgr_codec.h"
#include "comm.h"
#include "host.h"
#include "mgr_client.h"
#include "lock.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What this process's members sent on their leaders' sockets (payload
 * bytes, datagrams): the sockets' own counters are the leaders'. */
static _Atomic uint64_t shared_tx[2];

void host_counters_shared_sent(size_t bytes)
{
    atomic_fetch_add_explicit(&shared_tx[0], bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&shared_tx[1], 1, memory_order_relaxed);
}

void host_counters_read(incoll_comm_h comm, host_counters_t *c_p)
{
    const udp_counters_t *uc = udp_counters(comm->ctx->sock);

    memset(c_p, 0, sizeof(*c_p));
    c_p->tx_bytes = uc->tx_bytes +
                    atomic_load_explicit(&shared_tx[0], memory_order_relaxed);
    c_p->tx_packets = uc->tx_packets +
                      atomic_load_explicit(&shared_tx[1], memory_order_relaxed);
    c_p->rx_packets = uc->rx_packets;
    if (comm->ctx->mc_sock != NULL) /* results by multicast come here */
        c_p->rx_packets += udp_counters(comm->ctx->mc_sock)->rx_packets;
    c_p->wakeups = host_wakeups();
    c_p->wakeups_all = host_wakeups_all();
    c_p->early_returns =
        __atomic_load_n(&comm->early_returns, __ATOMIC_RELAXED);
    c_p->early_waits = __atomic_load_n(&comm->early_waits, __ATOMIC_RELAXED);
    if (comm->eng) {
        const host_engine_counters_t *hc = host_engine_counters(comm->eng);
        c_p->has_engine = 1;
        c_p->engine = (uintptr_t)comm->eng;
        c_p->eng_bytes_sent = hc->bytes_sent;
        c_p->eng_retransmits = hc->retransmits + hc->fast_retransmits;
    }
}

void host_counters_progress(incoll_comm_h comm, uint64_t timeout_ns)
{
    /* Under the library lock, as every public call: a communicator's
     * request thread may be finishing an operation that returned early
     * (it gives the lock up while it waits in poll, and so does this). */
    host_lock(comm->ctx);
    host_ctx_progress(comm->ctx, timeout_ns ? now_ns() + timeout_ns : 0);
    host_unlock(comm->ctx);
}

/* ---- where collectives ran ---- */

struct host_usage {
    uint64_t ops_net;
    uint64_t ops_sw;
    uint64_t fb[MGR_FB_COUNT];
    uint64_t period_ns; /* INCOLL_USAGE_MS, read once */
};

/* Collectives in progress on this thread (nested: one running as
 * another), and where the last one noted inside the outermost ran. */
static _Thread_local int usage_depth;
static _Thread_local int inner_noted;
static _Thread_local int inner_reason;

void host_usage_begin(void)
{
    if (usage_depth++ == 0)
        inner_noted = 0;
}

void host_usage_end(void)
{
    if (usage_depth > 0)
        usage_depth--;
}

/* n collectives of comm, where reason says (-1: in the network); lock
 * held. Returns 1 when a report is due (the period passed). */
static int count_n(incoll_comm_h comm, int reason, uint64_t n)
{
    struct host_usage *u = comm->usage;
    uint64_t now, period;

    if (comm->size < 2 || host_ctx_mgr(comm->ctx) == NULL)
        return 0;
    comm->ctx->counters.acc[MGR_PC_OPS] += n; /* every rank: its own
                                                  operations */
    if (comm->rank == 0) {
        if (u == NULL) {
            if ((u = comm->usage = calloc(1, sizeof(*u))) == NULL)
                return 0;
            u->period_ns = comm->ctx->cfg.usage_ns;
        }
        if (reason < 0) {
            u->ops_net += n;
        } else {
            u->ops_sw += n;
            u->fb[reason < MGR_FB_COUNT ? reason : MGR_FB_UNSUPPORTED] += n;
        }
    }
    period = comm->ctx->cfg.usage_ns;
    if (period == 0)
        return 0;
    now = host_now_ns();
    if (comm->ctx->counters.usage_due_ns == 0)
        comm->ctx->counters.usage_due_ns = now + period;
    else if (now >= comm->ctx->counters.usage_due_ns)
        return 1;
    return 0;
}

/* Lock held: what was counted of comm without the lock joins its counts;
 * 1 when a report is due. */
static int fold(incoll_comm_h comm)
{
    int due = 0;
    for (int k = 0; k < MGR_FB_COUNT; k++) {
        uint64_t n;
        if (__atomic_load_n(&comm->elsewhere[k], __ATOMIC_RELAXED) == 0)
            continue;
        n = __atomic_exchange_n(&comm->elsewhere[k], 0, __ATOMIC_RELAXED);
        if (n)
            due |= count_n(comm, k, n);
    }
    return due;
}

static void count(incoll_comm_h comm, int reason)
{
    if (fold(comm) | count_n(comm, reason, 1))
        host_usage_flush(comm->ctx, NULL);
}

void host_usage_note(incoll_comm_h comm, int reason)
{
    inner_noted = 1;
    inner_reason = reason;
    if (usage_depth == 1)
        count(comm, reason);
}

void host_usage_count(incoll_comm_h comm, int reason)
{
    count(comm, reason);
}

/* Each call that does not run in the library is counted without its lock
 * (a front end that gives a call to MPI's own makes no system call and
 * waits for no other thread): one atomic addition, and at every
 * USAGE_NOLOCK_EVERY-th call the caller takes the lock once to fold them
 * in (host_usage_settle) and to report them when the period passed. The
 * rest are folded in by the next count under the lock or the next report
 * (every report, a communicator's destruction, incoll_finalize). */
#define USAGE_NOLOCK_EVERY 64

int host_usage_count_nolock(incoll_comm_h comm, int reason)
{
    uint64_t n;
    if (comm->size < 2 || host_ctx_mgr(comm->ctx) == NULL)
        return 0; /* nothing is counted for the manager */
    __atomic_fetch_add(
        &comm->elsewhere[(unsigned)reason < MGR_FB_COUNT ? reason
                                                         : MGR_FB_UNSUPPORTED],
        1, __ATOMIC_RELAXED);
    n = __atomic_add_fetch(&comm->elsewhere_n, 1, __ATOMIC_RELAXED);
    return n % USAGE_NOLOCK_EVERY == 1;
}

void host_usage_settle(incoll_comm_h comm)
{
    if (fold(comm))
        host_usage_flush(comm->ctx, NULL);
}

void host_usage_note_inner(incoll_comm_h comm)
{
    if (usage_depth == 1 && inner_noted)
        count(comm, inner_reason);
}

static int pending(const incoll_comm_h c)
{
    return c->usage && c->usage->ops_net + c->usage->ops_sw > 0;
}

void host_counters_engine_gone(incoll_comm_h comm)
{
    const host_engine_counters_t *k;
    if (comm->eng == NULL)
        return;
    k = host_engine_counters(comm->eng);
    comm->ctx->counters.acc[MGR_PC_MC_RESULTS] += k->mcast_results;
    comm->ctx->counters.acc[MGR_PC_MC_DUPS] += k->mcast_duplicates;
    comm->ctx->counters.acc[MGR_PC_MC_REPAIRED] += k->mcast_repaired;
}

/* The process's totals now: what was kept, the sockets' and every live
 * engine's. */
static void proc_totals(struct incoll_ctx *ctx, uint64_t v[MGR_PC_COUNT])
{
    const udp_counters_t *uc = udp_counters(ctx->sock);

    memcpy(v, ctx->counters.acc, sizeof(ctx->counters.acc));
    v[MGR_PC_RX] += uc->rx_packets;
    v[MGR_PC_TX] += uc->tx_packets;
    if (ctx->mc_sock != NULL) {
        uc = udp_counters(ctx->mc_sock);
        v[MGR_PC_RX] += uc->rx_packets;
        v[MGR_PC_TX] += uc->tx_packets;
    }
    v[MGR_PC_WAKEUPS] += host_wakeups_all();
    for (incoll_comm_h c = ctx->comms; c; c = c->next) {
        const host_engine_counters_t *k;
        if (c->eng == NULL)
            continue;
        k = host_engine_counters(c->eng);
        v[MGR_PC_MC_RESULTS] += k->mcast_results;
        v[MGR_PC_MC_DUPS] += k->mcast_duplicates;
        v[MGR_PC_MC_REPAIRED] += k->mcast_repaired;
    }
}

/* Reports the process's counters since the last report, when there is
 * anything new. */
static void proc_flush(struct incoll_ctx *ctx, struct host_mgr *mgr)
{
    uint64_t now[MGR_PC_COUNT], d[MGR_PC_COUNT];
    int any = 0;

    if (ctx->counters.acc[MGR_PC_OPS] == 0)
        return; /* no collective of its own: nothing to say per op */
    proc_totals(ctx, now);
    for (int k = 0; k < MGR_PC_COUNT; k++) {
        d[k] = now[k] >= ctx->counters.sent[k] ? now[k] - ctx->counters.sent[k]
                                               : 0;
        if (d[k] > MGR_USAGE_MAX_COUNT)
            d[k] = MGR_USAGE_MAX_COUNT;
        any |= d[k] != 0;
    }
    if (any && host_mgr_usage_proc(mgr, d) == INCOLL_OK)
        for (int k = 0; k < MGR_PC_COUNT; k++)
            ctx->counters.sent[k] += d[k];
}

void host_usage_flush(struct incoll_ctx *ctx, incoll_comm_h only)
{
    struct host_mgr *mgr = host_ctx_mgr(ctx);
    mgr_usage_entry_t *e;
    uint16_t n = 0;
    int want = 0;

    if (only) /* perhaps no longer in the list: being destroyed */
        (void)fold(only);
    else
        for (incoll_comm_h c = ctx->comms; c; c = c->next)
            (void)fold(c);
    for (incoll_comm_h c = ctx->comms; c; c = c->next)
        want += (only == NULL || c == only) && pending(c);
    if (only && want == 0 && pending(only))
        want = 1; /* not linked (yet or any more) */
    /* The process's counters too: periodically, at the end, and when a
     * communicator that held a group goes (it tells the manager then
     * anyway), not at every free of a software-only one. */
    if (mgr != NULL && (only == NULL || only->eng != NULL))
        proc_flush(ctx, mgr);
    if (mgr == NULL || want == 0) {
        if (mgr != NULL && only == NULL)
            ctx->counters.usage_due_ns = host_now_ns() + ctx->cfg.usage_ns;
        return;
    }
    if (want > MGR_USAGE_MAX_ENTRIES)
        want = MGR_USAGE_MAX_ENTRIES; /* the rest next time */
    if ((e = calloc((size_t)want, sizeof(*e))) == NULL)
        return;
    for (incoll_comm_h c = only ? only : ctx->comms; c && n < want;
         c = only ? NULL : c->next) {
        if (!pending(c))
            continue;
        e[n].comm = host_comm_id(c);
        e[n].group = c->eng ? c->group : 0;
        e[n].ops_net = c->usage->ops_net;
        e[n].ops_sw = c->usage->ops_sw;
        memcpy(e[n].fb, c->usage->fb, sizeof(e[n].fb));
        n++;
    }
    if (n && host_mgr_usage(mgr, e, n) == INCOLL_OK) {
        for (incoll_comm_h c = only ? only : ctx->comms; c;
             c = only ? NULL : c->next) {
            for (uint16_t i = 0; i < n; i++)
                if (c->usage && e[i].comm == host_comm_id(c)) {
                    uint64_t period = c->usage->period_ns;
                    memset(c->usage, 0, sizeof(*c->usage));
                    c->usage->period_ns = period;
                }
        }
    }
    free(e);
    ctx->counters.usage_due_ns = host_now_ns() + ctx->cfg.usage_ns;
}

void host_usage_free(incoll_comm_h comm)
{
    free(comm->usage);
    comm->usage = NULL;
}

/* ---- where a collective ran ---- */

/* Where this thread's collective ran (host_where_note). */
static _Thread_local host_where_t where_now = {0, INCOLL_WHY_NONE};

void host_where_begin(void)
{
    where_now.in_net = 0;
    where_now.why = INCOLL_WHY_NONE;
}

void host_where_note(int in_net, incoll_why_t why)
{
    where_now.in_net = in_net;
    where_now.why = why;
}

host_where_t host_where_end(incoll_comm_h comm)
{
    host_where_t w = where_now;
    if (w.why == INCOLL_WHY_NONE) {
        w.in_net = incoll_comm_offloaded(comm, NULL);
        w.why = w.in_net ? INCOLL_WHY_NETWORK : INCOLL_WHY_NO_GROUP;
    }
    return w;
}

void host_where_fill(incoll_comm_h comm, host_where_t w, incoll_where_t *out)
{
    const char *why = NULL;
    out->in_network = w.in_net;
    out->why = w.why;
    if (w.why == INCOLL_WHY_NO_GROUP && comm != NULL &&
        !incoll_comm_offloaded(comm, &why) && why != NULL)
        snprintf(out->text, sizeof(out->text), "%s: %s",
                 incoll_why_string(w.why), why);
    else
        snprintf(out->text, sizeof(out->text), "%s", incoll_why_string(w.why));
}

int host_coll_last_in_net(void)
{
    return where_now.in_net;
}
