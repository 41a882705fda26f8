/*
 * The manager's state machine: ANs, jobs, group requests, groups, failures
 * and restarts, with no I/O. See mgr_core.h and docs/manager.md; the
 * daemon's event loop around it is mgr.c.
 */
#include "mgr/mgr_state.h"

#include "common/log.h"
#include "common/settings.h"
#include "common/udp.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define GROUP_ACK_MS 5000
#define REC_VERSION 1

/* Every entry point brackets its work with enter/leave: peers closed
 * during a call are freed only when the outermost one ends, since callers
 * up the stack may still hold them. */
static void enter(mgr_core_t *m, uint64_t now)
{
    if (m->depth++ == 0 || now > m->now)
        m->now = now;
}

static void leave(mgr_core_t *m)
{
    if (--m->depth > 0)
        return;
    while (m->graveyard) {
        mgr_peer_t *c = m->graveyard;
        m->graveyard = c->next;
        free(c);
    }
}

static void peer_kill(mgr_core_t *m, mgr_peer_t *c, const char *why);

/* Hands a message to the driver. A peer that does not read may be closed
 * by it meanwhile (then c->dead is set on return). */
void mgr_send_msg(mgr_core_t *m, mgr_peer_t *c, uint16_t type,
                  const mgr_wbuf_t *w)
{
    if (c == NULL || c->dead)
        return;
    if (w->oom) {
        incoll_error("conn %u (%s): out of memory building %s", c->id, c->name,
                     mgr_msg_name(type));
        return;
    }
    m->p.send(m->p.arg, c->user, type, w->buf, w->len);
}

void mgr_send_error(mgr_core_t *m, mgr_peer_t *c, uint32_t req,
                    incoll_status_t status, const char *fmt, ...)
{
    char reason[256];
    mgr_wbuf_t w = {0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    mgr_w_u32(&w, req);
    mgr_w_u32(&w, (uint32_t)status);
    mgr_w_str(&w, reason);
    mgr_send_msg(m, c, MGR_ERROR, &w);
    mgr_wbuf_free(&w);
}

/* ---- group records, kept by the ANs ---- */

static int encode_rec(mgr_core_t *m, const place_group_t *g, const mgroup_t *mg)
{
    mgr_wbuf_t w = {0};
    const topo_t *topo = m->topo;

    mgr_w_u8(&w, REC_VERSION);
    mgr_w_str(&w, mg->job->name);
    mgr_w_u32(&w, (uint32_t)mg->job->size);
    mgr_w_u64(&w, mg->comm);
    mgr_w_u32(&w, mg->gen);
    mgr_w_str(&w, topo->sw[topo->trees[g->tree].root].name);
    mgr_w_u32(&w, g->slots);
    mgr_w_u32(&w, g->payload);
    mgr_w_u32(&w, (uint32_t)g->nmembers);
    for (int i = 0; i < g->nmembers; i++) {
        mgr_w_u32(&w, (uint32_t)mg->ranks[i]);
        mgr_w_str(&w, topo->hosts[g->member_host[i]].name);
    }
    if (w.oom) {
        mgr_wbuf_free(&w);
        return -1;
    }
    free(((mgroup_t *)mg)->rec);
    ((mgroup_t *)mg)->rec = w.buf;
    ((mgroup_t *)mg)->rec_len = w.len;
    return 0;
}

/* ---- groups ---- */

/* What a request of n members is charged (its arrays). */
static uint64_t pending_bytes(int n)
{
    return sizeof(pending_t) +
           (uint64_t)n * (sizeof(int) + sizeof(mgr_peer_t *) +
                          sizeof(uint32_t) + sizeof(uint64_t));
}

/* Frees a request (unlinked by the caller) and gives back its charge. */
static void pending_free(mgr_core_t *m, pending_t *p)
{
    mgr_uncharge(m, p->job, p->mem);
    free(p->opseq);
    free(p->ranks);
    free(p->who);
    free(p->reqid);
    free(p);
}

/* Frees the manager's side of a group, with requests still held for it
 * (unanswered: the core is going away, or the caller answered them), and
 * gives back its charge. */
static void mgroup_free(mgr_core_t *m, mgroup_t *mg)
{
    if (mg == NULL)
        return;
    if (mg->held)
        pending_free(m, mg->held);
    if (mg->job) {
        mg->job->ngroups--;
        mgr_uncharge(m, mg->job, mg->mem);
    }
    free(mg->ranks);
    free(mg->released);
    free(mg->confirmed);
    free(mg->rec);
    free(mg);
}

static void pending_unlink(mgr_core_t *m, pending_t *p)
{
    for (pending_t **pp = &m->pend; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            p->job->npending--;
            return;
        }
    }
}

/* The multicast address results of AN i of group g go to: one per AN
 * whose children include hosts, INCOLL_EP_NONE for the others and when
 * INCOLL_MCAST is off or its range is bad (docs/multicast.md). */
static incoll_ep_t group_mcast(const place_group_t *g, int i)
{
    const mgroup_t *mg = g->user;
    const place_an_t *a = &g->ans[i];
    int hosts = 0;
    for (int k = 0; k < a->nchildren; k++)
        hosts |= a->child[k] < 0;
    static int told;
    char why[160];
    uint32_t base, n;
    if (!hosts || mg == NULL || !setting_bool(SETTING_MCAST))
        return INCOLL_EP_NONE;
    if (udp_mcast_range(&base, &n, why, sizeof(why)) != 0) {
        if (!told++)
            incoll_warn("multicast results off: %s", why);
        return INCOLL_EP_NONE;
    }
    return udp_mcast_ep(mg->mc_base + (uint32_t)i);
}

/* Where p's members are (the same for every member): topology hosts and
 * most members on one, from the ranks' joins (0 when one is unknown);
 * the widest switch and highest level of g's tree in the topology. */
static void pending_shape(const mgr_core_t *m, const pending_t *p,
                          const place_group_t *g, mgr_group_shape_t *sh)
{
    const topo_t *topo = m->topo;
    int *count = calloc((size_t)topo->nhosts + 1, sizeof(int));

    memset(sh, 0, sizeof(*sh));
    for (int i = 0; count != NULL && i < p->n; i++) {
        const rank_t *rk = mgr_rank_find(p->job, p->ranks[i]);
        if (rk == NULL || rk->host < 0 || rk->host >= topo->nhosts) {
            sh->hosts = sh->ppn = 0;
            break;
        }
        sh->hosts += count[rk->host] == 0;
        count[rk->host]++;
        if ((uint32_t)count[rk->host] > sh->ppn)
            sh->ppn = (uint32_t)count[rk->host];
    }
    free(count);
    for (int i = 0; g != NULL && i < g->nans; i++) {
        int sw = g->ans[i].sw, fan = topo->sw[sw].ndown;
        for (int h = 0; h < topo->nhosts; h++)
            fan += topo->hosts[h].leaf == sw;
        if (fan > sh->radix)
            sh->radix = (uint16_t)(fan > 65535 ? 65535 : fan);
        if (topo->sw[sw].level > sh->levels)
            sh->levels = (uint16_t)topo->sw[sw].level;
    }
}

/* Sends every member that asked the answer to its request: the group (if
 * g) or status and reason, each after the members' shape. */
static void answer_pending(mgr_core_t *m, pending_t *p, const place_group_t *g,
                           incoll_status_t status, const char *reason)
{
    uint8_t *peers = malloc((size_t)p->n * 8);
    uint64_t lo = UINT64_MAX, hi = 0;
    mgr_group_shape_t sh;

    for (int k = 0; p->opseq && k < p->n; k++) {
        if (p->who[k] == NULL)
            continue;
        lo = p->opseq[k] < lo ? p->opseq[k] : lo;
        hi = p->opseq[k] > hi ? p->opseq[k] : hi;
    }
    if (lo > hi)
        lo = hi = 0;
    if (peers == NULL) {
        incoll_error("job %s: out of memory answering a group request",
                     p->job->name);
        return;
    }
    for (int i = 0; i < p->n; i++) {
        const rank_t *rk = mgr_rank_find(p->job, p->ranks[i]);
        uint64_t ep = rk ? rk->ep : INCOLL_EP_NONE;
        for (int k = 0; k < 8; k++)
            peers[8 * i + k] = (uint8_t)(ep >> (8 * k));
    }
    pending_shape(m, p, status == INCOLL_OK ? g : NULL, &sh);
    for (int i = 0; i < p->n; i++) {
        mgr_group_info_t gi;
        mgr_wbuf_t w = {0};
        if (p->who[i] == NULL)
            continue;
        sh.req = p->reqid[i];
        mgr_enc_group_shape(&w, &sh);
        mgr_send_msg(m, p->who[i], MGR_GROUP_SHAPE, &w);
        mgr_wbuf_free(&w);
        memset(&w, 0, sizeof(w));
        memset(&gi, 0, sizeof(gi));
        gi.opseq_min = lo;
        gi.opseq_max = hi;
        gi.req = p->reqid[i];
        gi.comm = p->comm;
        gi.gen = p->gen;
        gi.status = status;
        snprintf(gi.reason, sizeof(gi.reason), "%s", reason ? reason : "");
        gi.nmembers = (uint32_t)p->n;
        gi.peers = peers;
        gi.an = INCOLL_EP_NONE;
        if (g != NULL && status == INCOLL_OK) {
            const place_an_t *a = &g->ans[g->member_an[i]];
            gi.group = g->id;
            gi.key = g->key;
            gi.child = g->member_child[i];
            gi.an = m->an[a->sw].ep;
            gi.slots = g->slots;
            gi.payload = g->payload;
            gi.ops = g->ops;
            gi.dtypes = g->dtypes;
            gi.mcast = group_mcast(g, g->member_an[i]);
        }
        mgr_enc_group_info(&w, &gi);
        mgr_send_msg(m, p->who[i], MGR_GROUP_INFO, &w);
        mgr_wbuf_free(&w);
    }
    free(peers);
}

static void notify_failed(mgr_core_t *m, const place_group_t *g,
                          const mgroup_t *mg, const char *reason)
{
    for (int i = 0; i < g->nmembers; i++) {
        const rank_t *r = mgr_rank_find(mg->job, mg->ranks[i]);
        mgr_wbuf_t w = {0};
        if (r == NULL || r->state != R_UP || r->conn == NULL || mg->released[i])
            continue;
        mgr_w_u32(&w, g->id);
        mgr_w_u64(&w, mg->comm);
        mgr_w_u32(&w, mg->gen);
        mgr_w_str(&w, reason);
        mgr_send_msg(m, r->conn, MGR_GROUP_FAILED, &w);
        mgr_wbuf_free(&w);
    }
}

/* Why a group is torn down, for the counters. */
enum { T_NONE, T_FAILED, T_RELEASED, T_RECLAIMED, T_REFUSED };

static void count_teardown(mgr_core_t *m, job_t *job, int kind)
{
    switch (kind) {
    case T_FAILED:
        m->ctr.groups_failed++;
        job->ctr.groups_failed++;
        break;
    case T_RELEASED:
        m->ctr.groups_released++;
        job->ctr.groups_released++;
        break;
    case T_RECLAIMED:
        m->ctr.groups_reclaimed++;
        job->ctr.groups_reclaimed++;
        break;
    case T_REFUSED:
        m->ctr.groups_refused++;
        job->ctr.groups_refused++;
        break;
    default:
        break;
    }
}

/*
 * Removes a group from its ANs and frees its resources. With reason set,
 * the group failed: members still using it hear GROUP_FAILED, and a
 * request still waiting for it gets the reason.
 */
static void group_teardown(mgr_core_t *m, place_group_t *g, const char *reason,
                           int kind)
{
    mgroup_t *mg = g->user;
    uint32_t id = g->id;

    count_teardown(m, mg->job, kind);
    for (int i = 0; i < g->nans; i++) {
        an_state_t *a = &m->an[g->ans[i].sw];
        mgr_wbuf_t w = {0};
        if (a->conn == NULL)
            continue;
        mgr_w_u32(&w, id);
        mgr_send_msg(m, a->conn, MGR_GROUP_REMOVE, &w);
        mgr_wbuf_free(&w);
    }
    if (mg->held) {
        answer_pending(m, mg->held, NULL, INCOLL_ERR_NO_RESOURCE,
                       reason ? reason : "group removed");
        pending_free(m, mg->held);
        mg->held = NULL;
    }
    if (mg->pend) {
        pending_t *p = mg->pend;
        answer_pending(m, p, NULL, INCOLL_ERR_NO_RESOURCE,
                       reason ? reason : "group removed");
        pending_unlink(m, p);
        pending_free(m, p);
        mg->pend = NULL;
    } else if (reason) {
        notify_failed(m, g, mg, reason);
    }
    if (reason)
        incoll_info("group %u (job %s comm %016" PRIx64 "): torn down: %s", id,
                    mg->job->name, mg->comm, reason);
    else
        incoll_debug("group %u (job %s comm %016" PRIx64 "): released", id,
                     mg->job->name, mg->comm);
    m->tomb[m->ntomb++ % MGR_TOMBSTONES] = id;
    if (mg->q)
        mgr_quota_give(mg->q, g);
    place_group_release(m->pl, id);
    mgroup_free(m, mg);
}

/* 1 when every AN of the group holds it. A group adopted after a restart
 * is whole once each of its ANs has registered again and reported it;
 * until then an AN may have no address and the group cannot run. */
static int group_whole(const place_group_t *g, const mgroup_t *mg)
{
    for (int i = 0; i < g->nans; i++)
        if (!mg->confirmed[i])
            return 0;
    return 1;
}

/*
 * A member asks for an adopted group that is not whole yet: its answer
 * waits in mg->held until the last AN reports the group (release_held),
 * or the group is torn down when the adopt grace ends without it
 * (group_teardown answers with the reason). Answering at once would name
 * an AN without an address, which no member can use.
 */
static void hold_request(mgr_core_t *m, place_group_t *g, mgr_peer_t *c, int me,
                         uint32_t req)
{
    mgroup_t *mg = g->user;
    pending_t *p = mg->held;
    char why[256];

    if (p == NULL) {
        uint64_t bytes = pending_bytes(g->nmembers);
        if (mgr_charge(m, mg->job, bytes, why, sizeof(why)) != 0) {
            m->ctr.budget_refused++;
            mg->job->ctr.budget_refused++;
            mgr_send_error(m, c, req, INCOLL_ERR_NO_RESOURCE, "%s", why);
            return;
        }
        p = calloc(1, sizeof(*p));
        if (p)
            p->mem = bytes;
        else
            mgr_uncharge(m, mg->job, bytes);
        if (p == NULL ||
            (p->ranks = malloc((size_t)g->nmembers * sizeof(int))) == NULL ||
            (p->who = calloc((size_t)g->nmembers, sizeof(mgr_peer_t *))) ==
                NULL ||
            (p->reqid = calloc((size_t)g->nmembers, sizeof(uint32_t))) ==
                NULL) {
            if (p) {
                p->job = mg->job;
                pending_free(m, p);
            }
            mgr_send_error(m, c, req, INCOLL_ERR_NO_MEMORY, "out of memory");
            return;
        }
        p->job = mg->job;
        p->comm = mg->comm;
        p->gen = mg->gen;
        p->n = g->nmembers;
        memcpy(p->ranks, mg->ranks, (size_t)g->nmembers * sizeof(int));
        mg->held = p;
    }
    p->who[me] = c;
    p->reqid[me] = req;
    mg->released[me] = 0;
    incoll_debug("group %u (job %s rank %d): held until every an of the "
                 "group has reported it",
                 g->id, mg->job->name, c->rank);
}

/* Answers the held requests of a group that has become whole. */
static void release_held(mgr_core_t *m, place_group_t *g)
{
    mgroup_t *mg = g->user;
    if (mg->held == NULL || !group_whole(g, mg))
        return;
    answer_pending(m, mg->held, g, INCOLL_OK, "");
    pending_free(m, mg->held);
    mg->held = NULL;
}

/* The peer is gone: requests it made are no longer answered to it. */
static void pending_forget(pending_t *p, mgr_peer_t *c)
{
    for (int i = 0; i < p->n; i++) {
        if (p->who[i] == c) {
            p->who[i] = NULL;
            p->nasked--;
        }
    }
}

static int tombstone(const mgr_core_t *m, uint32_t id)
{
    int n = m->ntomb < MGR_TOMBSTONES ? (int)m->ntomb : MGR_TOMBSTONES;
    for (int i = 0; i < n; i++)
        if (m->tomb[i] == id)
            return 1;
    return 0;
}

/* Collects the ids of groups matching a predicate first: teardown changes
 * the group list. */
typedef int (*group_pred_t)(const mgr_core_t *m, const place_group_t *g,
                            const void *arg);

static int teardown_where(mgr_core_t *m, group_pred_t pred, const void *arg,
                          const char *reason, int kind)
{
    int n = place_group_count(m->pl), k = 0, done = 0;
    uint32_t *ids;
    if (n == 0)
        return 0;
    ids = malloc((size_t)n * sizeof(*ids));
    if (ids == NULL)
        return 0;
    for (int i = 0; i < n; i++) {
        const place_group_t *g = place_group_at(m->pl, i);
        if (pred(m, g, arg))
            ids[k++] = g->id;
    }
    for (int i = 0; i < k; i++) {
        place_group_t *g = place_group_find(m->pl, ids[i]);
        if (g) {
            group_teardown(m, g, reason, kind);
            done++;
        }
    }
    free(ids);
    return done;
}

static int pred_uses_an(const mgr_core_t *m, const place_group_t *g,
                        const void *arg)
{
    return place_group_uses(g, *(const int *)arg);
}

typedef struct {
    const job_t *job;
    int rank;
} job_rank_t;

static int pred_has_rank(const mgr_core_t *m, const place_group_t *g,
                         const void *arg)
{
    const job_rank_t *jr = arg;
    const mgroup_t *mg = g->user;
    if (mg->job != jr->job)
        return 0;
    for (int i = 0; i < g->nmembers; i++)
        if (mg->ranks[i] == jr->rank)
            return 1;
    return 0;
}

/* A group is done when every member released it or is gone for good. */
static int group_done(const place_group_t *g)
{
    const mgroup_t *mg = g->user;
    for (int i = 0; i < g->nmembers; i++) {
        /* A rank without a record left or died, and was forgotten. */
        const rank_t *rk = mgr_rank_find(mg->job, mg->ranks[i]);
        int st = rk ? rk->state : R_DEAD;
        if (!mg->released[i] && st != R_LEFT && st != R_DEAD)
            return 0;
    }
    return 1;
}

static int pred_done(const mgr_core_t *m, const place_group_t *g,
                     const void *arg)
{
    const mgroup_t *mg = g->user;
    return mg->active && (arg == NULL || mg->job == arg) && group_done(g);
}

static void an_down(mgr_core_t *m, int sw, const char *why)
{
    an_state_t *a = &m->an[sw];
    char reason[160];
    a->conn = NULL;
    a->failures++;
    m->ctr.an_failures++;
    place_an_down(m->pl, sw);
    incoll_warn("an %s down: %s", m->topo->sw[sw].name, why);
    snprintf(reason, sizeof(reason), "an %s failed: %s", m->topo->sw[sw].name,
             why);
    teardown_where(m, pred_uses_an, &sw, reason, T_FAILED);
}

/* A host connection ended: clean (bye) or not. */
static void host_gone(mgr_core_t *m, mgr_peer_t *c)
{
    job_t *j = c->job;
    rank_t *r = mgr_rank_find(j, c->rank);

    for (pending_t *p = m->pend, *next; p; p = next) {
        next = p->next;
        pending_forget(p, c);
        /* A request nobody waits for any more is dropped now rather than
         * when it times out: its memory is the job's to use. */
        if (p->nasked == 0 && p->g == NULL) {
            pending_unlink(m, p);
            pending_free(m, p);
        }
    }
    for (int i = 0; i < place_group_count(m->pl); i++) {
        mgroup_t *mg = place_group_at(m->pl, i)->user;
        if (mg->held)
            pending_forget(mg->held, c);
    }
    if (r == NULL || r->conn != c)
        return; /* replaced by a newer connection */
    r->conn = NULL;
    /* A rank of a job that ended is not waited for. */
    if (c->bye || j->ended) {
        mgr_rank_set_state(j, r, R_LEFT);
        incoll_debug("job %s rank %d: left", j->name, c->rank);
        teardown_where(m, pred_done, j, NULL, T_RELEASED);
    } else {
        mgr_rank_set_state(j, r, R_LOST);
        r->deadline = m->now + m->p.host_grace_ms;
        incoll_info("job %s rank %d: connection lost; its groups are "
                    "reclaimed in %u ms unless it comes back",
                    j->name, c->rank, m->p.host_grace_ms);
    }
}

/* The peer's connection is over: the AN it registered goes down, the rank
 * it joined as is lost or left. */
static void peer_gone(mgr_core_t *m, mgr_peer_t *c, const char *why)
{
    if (c->an >= 0 && m->an[c->an].conn == c)
        an_down(m, c->an, why);
    else if (c->job)
        host_gone(m, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        m->peers = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = m->graveyard;
    m->graveyard = c;
}

/* The core closes a peer: the driver closes its connection first (so
 * nothing more is sent to it), then the core forgets it. */
static void peer_kill(mgr_core_t *m, mgr_peer_t *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = 1;
    m->p.close(m->p.arg, c->user, why);
    peer_gone(m, c, why);
}

void mgr_core_peer_closed(mgr_core_t *m, mgr_peer_t *c, const char *why,
                          uint64_t now)
{
    if (c == NULL || c->dead)
        return;
    enter(m, now);
    c->dead = 1;
    peer_gone(m, c, why);
    leave(m);
}

mgr_peer_t *mgr_core_peer_open(mgr_core_t *m, void *user, uint32_t id, int role,
                               uint32_t peer_ip, const char *name, uint64_t now)
{
    mgr_peer_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    if (now > m->now)
        m->now = now;
    c->user = user;
    c->id = id;
    c->role = role;
    c->peer_ip = peer_ip;
    c->an = -1;
    snprintf(c->name, sizeof(c->name), "%s", name ? name : "?");
    c->next = m->peers;
    if (m->peers)
        m->peers->prev = c;
    m->peers = c;
    return c;
}

uint64_t *mgr_core_peer_job(mgr_peer_t *c, const char **name_p, int *rank_p)
{
    if (c == NULL || c->job == NULL)
        return NULL;
    if (name_p)
        *name_p = c->job->name;
    if (rank_p)
        *rank_p = c->rank;
    return &c->job->driver_bytes;
}

/* ---- AN messages ---- */

/* What a group is charged: the manager's side and placement's arrays. */
static uint64_t group_bytes(const place_group_t *g, const mgroup_t *mg)
{
    return sizeof(place_group_t) + sizeof(mgroup_t) + mg->rec_len +
           (uint64_t)g->nmembers *
               (4 * sizeof(int) + sizeof(uint16_t) + sizeof(uint8_t)) +
           (uint64_t)g->nans * (sizeof(place_an_t) + sizeof(int) + 1);
}

/* Charges a group, once its record is made, to its job. */
static int group_charge(mgr_core_t *m, const place_group_t *g, mgroup_t *mg,
                        char *why, size_t whylen)
{
    uint64_t bytes = group_bytes(g, mg);
    if (mgr_charge(m, mg->job, bytes, why, whylen) != 0)
        return -1;
    mg->mem = bytes;
    return 0;
}

static void adopt_reported(mgr_core_t *m, mgr_peer_t *c,
                           const mgr_an_group_t *rg)
{
    const topo_t *topo = m->topo;
    mgr_rbuf_t r = {rg->rec, rg->rec_len, 0, 0};
    char jobname[MGR_NAME_MAX], root[TOPO_NAME_MAX + 8], host[MGR_NAME_MAX];
    uint32_t jsize, gen, slots, payload, n;
    uint64_t comm;
    int tree = -1, *hosts = NULL, *ranks = NULL;
    place_group_t *g;
    mgroup_t *mg;
    job_t *j;
    char why[256];
    uint64_t now = m->now;

    if (mgr_r_u8(&r) != REC_VERSION)
        goto stale;
    mgr_r_str(&r, jobname, sizeof(jobname));
    jsize = mgr_r_u32(&r);
    comm = mgr_r_u64(&r);
    gen = mgr_r_u32(&r);
    mgr_r_str(&r, root, sizeof(root));
    slots = mgr_r_u32(&r);
    payload = mgr_r_u32(&r);
    n = mgr_r_u32(&r);
    if (r.err || jobname[0] == '\0' || jsize < 1 || jsize > MGR_MAX_MEMBERS ||
        n < 2 || n > jsize)
        goto stale;
    for (int t = 0; t < topo->ntrees; t++)
        if (strcmp(topo->sw[topo->trees[t].root].name, root) == 0)
            tree = t;
    hosts = malloc(n * sizeof(int));
    ranks = malloc(n * sizeof(int));
    if (tree < 0 || hosts == NULL || ranks == NULL)
        goto stale;
    for (uint32_t i = 0; i < n; i++) {
        ranks[i] = (int)mgr_r_u32(&r);
        mgr_r_str(&r, host, sizeof(host));
        hosts[i] = topo_find_host(topo, host);
        if (r.err || ranks[i] < 0 || (uint32_t)ranks[i] >= jsize ||
            hosts[i] < 0)
            goto stale;
    }
    if (mgr_r_done(&r))
        goto stale;
    j = mgr_job_find(m, jobname);
    if (j != NULL && j->size != (int)jsize)
        goto stale;
    if (j == NULL &&
        (j = mgr_job_get(m, jobname, (int)jsize, 1, why, sizeof(why))) == NULL)
        goto stale;
    if (place_group_adopt(m->pl, rg->id, rg->key, tree, slots, payload, hosts,
                          (int)n, &g, why, sizeof(why)) != INCOLL_OK) {
        incoll_warn("an %s reports group %u that cannot be adopted: %s",
                    topo->sw[c->an].name, rg->id, why);
        goto stale;
    }
    mg = calloc(1, sizeof(*mg));
    if (mg == NULL || (mg->released = calloc(n, 1)) == NULL ||
        (mg->confirmed = calloc((size_t)g->nans, 1)) == NULL) {
        if (mg)
            free(mg->released);
        free(mg);
        place_group_release(m->pl, rg->id);
        goto stale;
    }
    g->user = mg;
    mg->job = j;
    j->ngroups++;
    mg->comm = comm;
    mg->gen = gen;
    mg->ranks = ranks;
    ranks = NULL;
    mg->active = 1;
    mg->adopted = 1;
    mg->made = now;
    mg->deadline = now + m->p.adopt_grace_ms;
    if (encode_rec(m, g, mg) != 0 ||
        group_charge(m, g, mg, why, sizeof(why)) != 0) {
        place_group_release(m->pl, rg->id);
        mgroup_free(m, mg);
        goto stale;
    }
    /* It holds what it holds, whatever the quota says. */
    mg->q = mgr_job_quota(j);
    mgr_quota_take(mg->q, g);
    for (int i = 0; i < g->nans; i++)
        if (g->ans[i].sw == c->an)
            mg->confirmed[i] = 1;
    /* An AN of the group that registered before without reporting it
     * (or the group would have been adopted then) does not hold it. */
    for (int i = 0; i < g->nans; i++) {
        if (g->ans[i].sw != c->an && m->an[g->ans[i].sw].conn != NULL) {
            char reason[128];
            snprintf(reason, sizeof(reason), "an %s does not hold it",
                     topo->sw[g->ans[i].sw].name);
            free(hosts);
            group_teardown(m, g, reason, T_FAILED);
            return;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        rank_t *rk = mgr_rank_get(m, j, mg->ranks[i], why, sizeof(why));
        if (rk && rk->state == R_NONE) {
            mgr_rank_set_state(j, rk, R_ADOPTED);
            rk->host = hosts[i];
            rk->deadline = now + m->p.adopt_grace_ms;
        }
    }
    m->ctr.groups_adopted++;
    incoll_info("adopted group %u (job %s comm %016" PRIx64
                ", %u members) reported by an %s",
                rg->id, jobname, comm, n, topo->sw[c->an].name);
    free(hosts);
    return;
stale:
    free(hosts);
    free(ranks);
    {
        mgr_wbuf_t w = {0};
        incoll_info("an %s holds unknown group %u: removing it",
                    topo->sw[c->an].name, rg->id);
        mgr_w_u32(&w, rg->id);
        mgr_send_msg(m, c, MGR_GROUP_REMOVE, &w);
        mgr_wbuf_free(&w);
    }
}

static void on_an_register(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                           size_t len)
{
    const topo_t *topo = m->topo;
    mgr_an_register_t reg;
    const char *why = NULL;
    topo_caps_t caps;
    an_state_t *a;
    int sw;
    char ep[32], want[32];
    uint64_t now = m->now;

    if (c->an >= 0) {
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "already registered");
        return;
    }
    if (mgr_dec_an_register(body, len, &reg, &why) != INCOLL_OK) {
        m->ctr.malformed++;
        incoll_warn("conn %u (%s): malformed an_register: %s", c->id, c->name,
                    why);
        peer_kill(m, c, "malformed an_register");
        return;
    }
    sw = topo_find_switch(topo, reg.name);
    if (sw < 0) {
        incoll_warn("conn %u (%s): an '%s' is not in the topology", c->id,
                    c->name, reg.name);
        mgr_send_error(m, c, 0, INCOLL_ERR_NOT_FOUND,
                       "an '%s' is not in the topology", reg.name);
        peer_kill(m, c, "unknown an");
        return;
    }
    if (topo->sw[sw].addr != INCOLL_EP_NONE && topo->sw[sw].addr != reg.ep) {
        incoll_warn("an %s registers udp %s but the topology says %s", reg.name,
                    wire_ep_str(reg.ep, ep, sizeof(ep)),
                    wire_ep_str(topo->sw[sw].addr, want, sizeof(want)));
        mgr_send_error(m, c, 0, INCOLL_ERR_CONFIG,
                       "an %s: udp endpoint %s differs from the topology's %s",
                       reg.name, ep, want);
        peer_kill(m, c, "wrong endpoint");
        return;
    }
    for (int i = 0; i < topo->nswitches; i++) {
        if (i != sw && m->an[i].conn && m->an[i].ep == reg.ep) {
            mgr_send_error(
                m, c, 0, INCOLL_ERR_BUSY, "udp endpoint %s is an %s's",
                wire_ep_str(reg.ep, ep, sizeof(ep)), topo->sw[i].name);
            peer_kill(m, c, "endpoint in use");
            return;
        }
    }
    a = &m->an[sw];
    if (a->conn)
        peer_kill(m, a->conn, "replaced by a new registration");
    c->an = sw;
    a->conn = c;
    a->ep = reg.ep;
    a->up_since = now;
    a->last_seen = now;
    a->registrations++;
    a->reported_groups = reg.ngroups;
    a->counters[0] = '\0';
    c->hb_deadline = now + MGR_HB_MISSED * (uint64_t)m->p.heartbeat_ms;
    caps.ops = reg.caps.ops;
    caps.dtypes = reg.caps.dtypes;
    caps.max_payload = reg.caps.max_payload;
    caps.slots = reg.caps.slots;
    caps.max_groups = reg.caps.max_groups;
    caps.buffer_bytes = reg.caps.buffer_bytes;
    place_an_up(m->pl, sw, &caps);
    incoll_info("an %s up at %s (conn %u), reporting %u groups", reg.name,
                wire_ep_str(reg.ep, ep, sizeof(ep)), c->id, reg.ngroups);
    {
        mgr_wbuf_t w = {0};
        mgr_w_u32(&w, m->p.heartbeat_ms);
        mgr_w_u64(&w, m->p.boot_id);
        mgr_send_msg(m, c, MGR_AN_REGISTER_OK, &w);
        mgr_wbuf_free(&w);
    }
    if (c->dead)
        return;
    /* Groups the AN holds: confirm, adopt, or have it remove them. */
    for (uint32_t i = 0; i < reg.ngroups && !c->dead; i++) {
        mgr_an_group_t rg;
        place_group_t *g;
        mgr_an_group_at(&reg, i, &rg);
        g = place_group_find(m->pl, rg.id);
        if (g && g->key == rg.key && place_group_uses(g, sw)) {
            mgroup_t *mg = g->user;
            for (int k = 0; k < g->nans; k++)
                if (g->ans[k].sw == sw)
                    mg->confirmed[k] = 1;
            release_held(m, g);
        } else if (g == NULL && now < m->start + m->p.recover_ms &&
                   !tombstone(m, rg.id)) {
            adopt_reported(m, c, &rg);
        } else {
            mgr_wbuf_t w = {0};
            incoll_info("an %s holds stale group %u: removing it", reg.name,
                        rg.id);
            mgr_w_u32(&w, rg.id);
            mgr_send_msg(m, c, MGR_GROUP_REMOVE, &w);
            mgr_wbuf_free(&w);
        }
    }
    /* Groups we placed on it that it no longer holds: it restarted. */
    if (!c->dead) {
        int n = place_group_count(m->pl), k = 0;
        uint32_t *lost = malloc((size_t)(n + 1) * sizeof(*lost));
        for (int i = 0; lost && i < n; i++) {
            const place_group_t *g = place_group_at(m->pl, i);
            const mgroup_t *mg = g->user;
            int held = 0;
            if (!place_group_uses(g, sw) || (mg->unacked && !mg->active))
                continue;
            for (uint32_t r = 0; r < reg.ngroups; r++) {
                mgr_an_group_t rg;
                mgr_an_group_at(&reg, r, &rg);
                if (rg.id == g->id)
                    held = 1;
            }
            if (!held)
                lost[k++] = g->id;
        }
        for (int i = 0; i < k; i++) {
            place_group_t *g = place_group_find(m->pl, lost[i]);
            char reason[128];
            if (g == NULL)
                continue;
            snprintf(reason, sizeof(reason), "an %s restarted and lost it",
                     reg.name);
            group_teardown(m, g, reason, T_FAILED);
        }
        free(lost);
    }
}

static void on_heartbeat(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                         size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint64_t seq = mgr_r_u64(&r);
    const char *text;
    size_t n = 0;
    an_state_t *a = &m->an[c->an];
    mgr_wbuf_t w = {0};

    mgr_r_u32(&r); /* groups held, informative */
    text = mgr_r_text(&r, 65536, &n);
    if (text == NULL || mgr_r_done(&r)) {
        m->ctr.malformed++;
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed heartbeat");
        return;
    }
    if (n >= sizeof(a->counters))
        n = sizeof(a->counters) - 1;
    memcpy(a->counters, text, n);
    a->counters[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)a->counters[i] < 0x20)
            a->counters[i] = ' ';
    a->last_seen = m->now;
    c->hb_deadline = a->last_seen + MGR_HB_MISSED * (uint64_t)m->p.heartbeat_ms;
    mgr_w_u64(&w, seq);
    mgr_send_msg(m, c, MGR_AN_PONG, &w);
    mgr_wbuf_free(&w);
}

static void on_group_ack(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                         size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint32_t id = mgr_r_u32(&r);
    uint8_t op = mgr_r_u8(&r);
    int32_t status = (int32_t)mgr_r_u32(&r);
    place_group_t *g;
    mgroup_t *mg;

    if (mgr_r_done(&r) || (op != 1 && op != 2)) {
        m->ctr.malformed++;
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed group_ack");
        return;
    }
    if (op == 2) {
        if (status != INCOLL_OK && status != INCOLL_ERR_NOT_FOUND)
            incoll_warn("an %s could not remove group %u: %s",
                        m->topo->sw[c->an].name, id,
                        incoll_status_string((incoll_status_t)status));
        return;
    }
    g = place_group_find(m->pl, id);
    if (g == NULL)
        return; /* torn down meanwhile */
    mg = g->user;
    for (int i = 0; i < g->nans; i++) {
        if (g->ans[i].sw != c->an || mg->confirmed[i])
            continue;
        if (status != INCOLL_OK) {
            char reason[160];
            snprintf(reason, sizeof(reason), "an %s refused the group: %s",
                     m->topo->sw[c->an].name,
                     incoll_status_string((incoll_status_t)status));
            group_teardown(m, g, reason, T_REFUSED);
            return;
        }
        mg->confirmed[i] = 1;
        mg->unacked--;
    }
    if (mg->unacked == 0 && !mg->active) {
        pending_t *p = mg->pend;
        mg->active = 1;
        mg->pend = NULL;
        m->ctr.groups_made++;
        mg->job->ctr.groups_made++;
        if (p) {
            answer_pending(m, p, g, INCOLL_OK, "");
            pending_unlink(m, p);
            pending_free(m, p);
        }
        incoll_info("group %u (job %s comm %016" PRIx64
                    " gen %u): %d members on tree %s, %d ans, %u slots, "
                    "payload %u",
                    g->id, mg->job->name, mg->comm, mg->gen, g->nmembers,
                    m->topo->sw[m->topo->trees[g->tree].root].name, g->nans,
                    g->slots, g->payload);
    }
}

/* ---- host messages ---- */

static void on_join(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                    size_t len)
{
    const topo_t *topo = m->topo;
    mgr_join_t jn;
    const char *why = NULL;
    char refused[256];
    job_t *j;
    rank_t *r;
    int host = -1;

    if (c->job) {
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "already joined");
        return;
    }
    if (mgr_dec_join(body, len, &jn, &why) != INCOLL_OK) {
        m->ctr.malformed++;
        incoll_warn("conn %u (%s): malformed join: %s", c->id, c->name, why);
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed join: %s", why);
        return;
    }
    j = mgr_job_find(m, jn.job);
    if (j && j->size != jn.size) {
        mgr_send_error(m, c, 0, INCOLL_ERR_INVALID_ARG,
                       "job %s has %d ranks, not %d", jn.job, j->size, jn.size);
        return;
    }
    if (j && j->ended) {
        m->ctr.joins_refused++;
        mgr_send_error(m, c, 0, INCOLL_ERR_NO_RESOURCE, "job %s has ended",
                       jn.job);
        return;
    }
    if (j == NULL && (j = mgr_job_get(m, jn.job, jn.size, 0, refused,
                                      sizeof(refused))) == NULL) {
        m->ctr.joins_refused++;
        incoll_info("conn %u (%s): join of job %s rank %d refused: %s", c->id,
                    c->name, jn.job, jn.rank, refused);
        mgr_send_error(m, c, 0, INCOLL_ERR_NO_RESOURCE, "%s", refused);
        return;
    }
    if (jn.host[0])
        host = topo_find_host(topo, jn.host);
    if (host < 0) {
        /* By address, when exactly one topology host has it. */
        int found = -1, count = 0;
        for (int h = 0; h < topo->nhosts; h++) {
            if (topo->hosts[h].ip && topo->hosts[h].ip == c->peer_ip) {
                found = h;
                count++;
            }
        }
        if (count == 1)
            host = found;
    }
    if (host < 0)
        incoll_warn("job %s rank %d: host '%s' (%s) is not in the "
                    "topology; its communicators will not be offloaded",
                    jn.job, jn.rank, jn.host, c->name);
    r = mgr_rank_find(j, jn.rank);
    if (r && r->conn && r->conn != c)
        peer_kill(m, r->conn, "replaced by a new connection of the rank");
    r = mgr_rank_get(m, j, jn.rank, refused, sizeof(refused));
    if (r == NULL) {
        m->ctr.joins_refused++;
        mgr_send_error(m, c, 0, INCOLL_ERR_NO_RESOURCE, "%s", refused);
        return;
    }
    r->conn = c;
    mgr_rank_set_state(j, r, R_UP);
    r->host = host;
    r->ep = jn.ep;
    r->pid = jn.pid;
    c->job = j;
    c->rank = jn.rank;
    incoll_debug("job %s rank %d/%d joined from %s (host %s)", jn.job, jn.rank,
                 jn.size, c->name, host >= 0 ? topo->hosts[host].name : "?");
    {
        mgr_wbuf_t w = {0};
        mgr_w_u64(&w, m->p.boot_id);
        mgr_w_u32(&w, 0);
        mgr_send_msg(m, c, MGR_JOIN_OK, &w);
        mgr_wbuf_free(&w);
    }
    if (m->p.tune_text) {
        /* the fabric's selection table (docs/tuning.md) */
        mgr_wbuf_t w = {0};
        mgr_w_u16(&w, MGR_TUNE_FORMAT);
        mgr_w_str(&w, m->p.tune_source);
        mgr_w_text(&w, m->p.tune_text, strlen(m->p.tune_text));
        mgr_send_msg(m, c, MGR_TUNE, &w);
        mgr_wbuf_free(&w);
    }
}

static place_group_t *find_comm_group(mgr_core_t *m, const job_t *j,
                                      uint64_t comm, int *n_older, uint32_t gen)
{
    place_group_t *same = NULL;
    *n_older = 0;
    for (int i = 0; i < place_group_count(m->pl); i++) {
        place_group_t *g = place_group_at(m->pl, i);
        mgroup_t *mg = g->user;
        if (mg->job != j || mg->comm != comm)
            continue;
        if (mg->gen == gen)
            same = g;
        else if (mg->gen < gen)
            (*n_older)++;
    }
    return same;
}

static int pred_older_gen(const mgr_core_t *m, const place_group_t *g,
                          const void *arg)
{
    const pending_t *p = arg;
    const mgroup_t *mg = g->user;
    return mg->job == p->job && mg->comm == p->comm && mg->gen < p->gen;
}

/* All members asked: place the group and ask its ANs to add it. */
static void pending_complete(mgr_core_t *m, pending_t *p)
{
    const topo_t *topo = m->topo;
    int *hosts = malloc((size_t)p->n * sizeof(int));
    char why[320] = "", who[200];
    place_req_t req = {.slots = p->slots, .payload = p->payload};
    place_group_t *g = NULL;
    mgroup_t *mg;
    quota_t *q = mgr_job_quota(p->job);
    incoll_status_t status = INCOLL_OK;
    int older, quota_hit = 0;

    if (hosts == NULL) {
        answer_pending(m, p, NULL, INCOLL_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    /* A rebuild replaces the communicator's earlier group. */
    find_comm_group(m, p->job, p->comm, &older, p->gen);
    if (older)
        teardown_where(m, pred_older_gen, p, NULL, T_RELEASED);
    for (int i = 0; i < p->n; i++) {
        const rank_t *rk = mgr_rank_find(p->job, p->ranks[i]);
        hosts[i] = rk ? rk->host : -1;
        if (hosts[i] < 0) {
            snprintf(why, sizeof(why),
                     rk ? "rank %d is on a host not in the topology"
                        : "rank %d is gone",
                     p->ranks[i]);
            status = INCOLL_ERR_NO_RESOURCE;
            break;
        }
    }
    if (why[0] == '\0') {
        if (p->n < 2) {
            snprintf(why, sizeof(why), "one member needs no group");
            status = INCOLL_ERR_NO_RESOURCE;
        } else {
            mgr_quota_left(m, p->job, q, who, sizeof(who));
            req.quota_groups = m->q_groups_left;
            req.quota_slots = m->q_slots_left;
            req.quota_who = who;
            req.quota_hit_p = &quota_hit;
            status = place_group_create(m->pl, hosts, p->n, &req, &g, why,
                                        sizeof(why));
        }
    }
    free(hosts);
    if (status != INCOLL_OK) {
        count_teardown(m, p->job, T_REFUSED);
        if (quota_hit) {
            m->ctr.quota_refused++;
            p->job->ctr.quota_refused++;
        }
        incoll_info("job %s comm %016" PRIx64 " gen %u (%d members): no "
                    "group: %s",
                    p->job->name, p->comm, p->gen, p->n, why);
        answer_pending(m, p, NULL, status, why);
        goto done;
    }
    mg = calloc(1, sizeof(*mg));
    if (mg == NULL ||
        (mg->ranks = malloc((size_t)p->n * sizeof(int))) == NULL ||
        (mg->released = calloc((size_t)p->n, 1)) == NULL ||
        (mg->confirmed = calloc((size_t)g->nans, 1)) == NULL) {
        mgroup_free(m, mg);
        place_group_release(m->pl, g->id);
        answer_pending(m, p, NULL, INCOLL_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    g->user = mg;
    mg->job = p->job;
    p->job->ngroups++;
    mg->comm = p->comm;
    mg->gen = p->gen;
    memcpy(mg->ranks, p->ranks, (size_t)p->n * sizeof(int));
    mg->unacked = g->nans;
    mg->made = m->now;
    /* One multicast address per AN of the group, handed out in turn
     * from the range: two live groups share one only after the range
     * wrapped (their packets still never mix: group id and key). */
    mg->mc_base = m->mc_next;
    m->mc_next += (uint32_t)g->nans;
    mg->deadline = m->now + GROUP_ACK_MS;
    mg->pend = p;
    p->g = g;
    mg->q = q;
    mgr_quota_take(q, g);
    if (encode_rec(m, g, mg) != 0) {
        group_teardown(m, g, "out of memory", T_REFUSED);
        return;
    }
    if (group_charge(m, g, mg, why, sizeof(why)) != 0) {
        m->ctr.budget_refused++;
        p->job->ctr.budget_refused++;
        group_teardown(m, g, why, T_REFUSED);
        return;
    }
    for (int i = 0; i < g->nans; i++) {
        const place_an_t *a = &g->ans[i];
        uint8_t *eps = malloc((size_t)a->nchildren * 8);
        mgr_group_add_t add;
        mgr_wbuf_t w = {0};
        if (eps == NULL) {
            group_teardown(m, g, "out of memory", T_REFUSED);
            return;
        }
        for (int k = 0; k < a->nchildren; k++) {
            int ch = a->child[k];
            const rank_t *rk =
                ch >= 0 ? NULL : mgr_rank_find(p->job, mg->ranks[-ch - 1]);
            uint64_t ep = ch >= 0 ? m->an[g->ans[ch].sw].ep
                          : rk    ? rk->ep
                                  : INCOLL_EP_NONE;
            for (int b = 0; b < 8; b++)
                eps[8 * k + b] = (uint8_t)(ep >> (8 * b));
        }
        memset(&add, 0, sizeof(add));
        add.id = g->id;
        add.key = g->key;
        add.slots = g->slots;
        add.payload = g->payload;
        add.parent =
            a->parent >= 0 ? m->an[g->ans[a->parent].sw].ep : INCOLL_EP_NONE;
        add.index_at_parent = a->index_at_parent;
        add.nchildren = (uint16_t)a->nchildren;
        add.children = eps;
        add.rec = mg->rec;
        add.rec_len = mg->rec_len;
        add.mcast = group_mcast(g, i);
        mgr_enc_group_add(&w, &add);
        free(eps);
        mgr_send_msg(m, m->an[a->sw].conn, MGR_GROUP_ADD, &w);
        mgr_wbuf_free(&w);
        /* A send failure kills the AN's connection, which tears the group
         * down and answers the request. */
        if (place_group_find(m->pl, add.id) != g)
            return;
    }
    incoll_debug("group %u placed for job %s comm %016" PRIx64
                 " on tree %s; waiting for %d ans",
                 g->id, p->job->name, p->comm,
                 topo->sw[topo->trees[g->tree].root].name, g->nans);
    return;
done:
    pending_unlink(m, p);
    pending_free(m, p);
}

/* The asker's place among the members of rq (distinct ranks of the job,
 * the asker among them: a bit per rank of the job, at most
 * MGR_MAX_MEMBERS / 8 bytes, for a moment), or -1 when it was refused. */
static int group_req_me(mgr_core_t *m, mgr_peer_t *c, const mgr_group_req_t *rq)
{
    job_t *j = c->job;
    uint64_t *seen = calloc(((size_t)j->size + 63) / 64, sizeof(*seen));
    int me = -1;

    if (seen == NULL) {
        mgr_send_error(m, c, rq->req, INCOLL_ERR_NO_MEMORY, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < rq->nmembers; i++) {
        uint32_t r = mgr_get_u32(rq->members, i);
        if (r >= (uint32_t)j->size || (seen[r / 64] >> (r % 64)) & 1) {
            free(seen);
            m->ctr.malformed++;
            mgr_send_error(m, c, rq->req, INCOLL_ERR_INVALID_ARG,
                           "member %u: rank %u is out of range or repeated", i,
                           r);
            return -1;
        }
        seen[r / 64] |= 1ull << (r % 64);
        if ((int)r == c->rank)
            me = (int)i;
    }
    free(seen);
    if (me < 0)
        mgr_send_error(m, c, rq->req, INCOLL_ERR_INVALID_ARG,
                       "rank %d is not among the members", c->rank);
    return me;
}

/* Asked again for a group that exists (e.g. after a reconnection): the
 * answer at once. 1 when same was that group and the request is
 * answered (or held until the group is whole). */
static int group_req_again(mgr_core_t *m, mgr_peer_t *c,
                           const mgr_group_req_t *rq, int me,
                           place_group_t *same)
{
    mgroup_t *mg;
    int match = 1;

    if (!same || !((mgroup_t *)same->user)->active ||
        same->nmembers != (int)rq->nmembers)
        return 0;
    mg = same->user;
    for (uint32_t i = 0; i < rq->nmembers; i++)
        match &= mg->ranks[i] == (int)mgr_get_u32(rq->members, i);
    if (match && !group_whole(same, mg)) {
        hold_request(m, same, c, me, rq->req);
        return 1;
    }
    if (match) {
        /* Answer this member alone through a view of the group as a
         * request in which only it asked. */
        pending_t one = {0};
        mgr_peer_t **whos = calloc(rq->nmembers, sizeof(*whos));
        uint32_t *reqs = calloc(rq->nmembers, sizeof(*reqs));
        if (whos && reqs) {
            whos[me] = c;
            reqs[me] = rq->req;
            one.job = c->job;
            one.comm = rq->comm;
            one.gen = rq->gen;
            one.n = (int)rq->nmembers;
            one.ranks = mg->ranks;
            one.who = whos;
            one.reqid = reqs;
            mg->released[me] = 0;
            answer_pending(m, &one, same, INCOLL_OK, "");
        } else {
            mgr_send_error(m, c, rq->req, INCOLL_ERR_NO_MEMORY,
                           "out of memory");
        }
        free(whos);
        free(reqs);
        return 1;
    }
    return 0;
}

/* The first request for the group of rq: a pending request, charged to
 * the job; NULL when it was refused. */
static pending_t *group_req_pending(mgr_core_t *m, mgr_peer_t *c,
                                    const mgr_group_req_t *rq, int older)
{
    job_t *j = c->job;
    uint64_t bytes = pending_bytes((int)rq->nmembers);
    char refused[256];
    pending_t *p;

    if (mgr_charge(m, j, bytes, refused, sizeof(refused)) != 0) {
        m->ctr.budget_refused++;
        j->ctr.budget_refused++;
        count_teardown(m, j, T_REFUSED);
        incoll_info("job %s rank %d: group request refused: %s", j->name,
                    c->rank, refused);
        mgr_send_error(m, c, rq->req, INCOLL_ERR_NO_RESOURCE, "%s", refused);
        return NULL;
    }
    p = calloc(1, sizeof(*p));
    if (p)
        p->mem = bytes;
    else
        mgr_uncharge(m, j, bytes);
    if (p == NULL || (p->ranks = malloc(rq->nmembers * sizeof(int))) == NULL ||
        (p->who = calloc(rq->nmembers, sizeof(mgr_peer_t *))) == NULL ||
        (p->reqid = calloc(rq->nmembers, sizeof(uint32_t))) == NULL ||
        (p->opseq = calloc(rq->nmembers, sizeof(uint64_t))) == NULL) {
        if (p) {
            p->job = j;
            pending_free(m, p);
        }
        mgr_send_error(m, c, rq->req, INCOLL_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    p->job = j;
    p->comm = rq->comm;
    p->gen = rq->gen;
    p->slots = rq->slots;
    p->payload = rq->payload;
    p->n = (int)rq->nmembers;
    for (uint32_t i = 0; i < rq->nmembers; i++)
        p->ranks[i] = (int)mgr_get_u32(rq->members, i);
    p->deadline = m->now + m->p.request_ms;
    p->next = m->pend;
    m->pend = p;
    j->npending++;
    /* The first request of a newer generation comes from a member
     * recovering from a failure: the older group is torn down now and
     * its other members are told, so that those outside a collective
     * join the recovery at their next call. */
    if (older) {
        char reason[128];
        snprintf(reason, sizeof(reason),
                 "rank %d asked for generation %u of the communicator", c->rank,
                 rq->gen);
        teardown_where(m, pred_older_gen, p, reason, T_RELEASED);
    }
    return p;
}

static void on_group_req(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                         size_t len)
{
    job_t *j = c->job;
    mgr_group_req_t rq;
    const char *why = NULL;
    pending_t *p;
    int me, older;
    place_group_t *same;

    if (j == NULL) {
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "group_req before join");
        return;
    }
    if (mgr_dec_group_req(body, len, &rq, &why) != INCOLL_OK) {
        m->ctr.malformed++;
        incoll_warn("job %s rank %d: malformed group_req: %s", j->name, c->rank,
                    why);
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed group_req: %s",
                       why);
        return;
    }
    if (j->ended) {
        mgr_send_error(m, c, rq.req, INCOLL_ERR_NO_RESOURCE, "job %s has ended",
                       j->name);
        return;
    }
    if ((me = group_req_me(m, c, &rq)) < 0)
        return;
    same = find_comm_group(m, j, rq.comm, &older, rq.gen);
    if (group_req_again(m, c, &rq, me, same))
        return;
    for (p = m->pend; p; p = p->next)
        if (p->job == j && p->comm == rq.comm && p->gen == rq.gen)
            break;
    if (p == NULL) {
        if ((p = group_req_pending(m, c, &rq, older)) == NULL)
            return;
    } else {
        int match = p->n == (int)rq.nmembers;
        for (int i = 0; match && i < p->n; i++)
            match = p->ranks[i] == (int)mgr_get_u32(rq.members, i);
        if (!match) {
            mgr_send_error(m, c, rq.req, INCOLL_ERR_INVALID_ARG,
                           "comm %016" PRIx64 ": members differ from another "
                           "rank's request",
                           rq.comm);
            return;
        }
    }
    /* A member asking again (from a new connection) is answered there. */
    if (p->who[me] == NULL)
        p->nasked++;
    p->who[me] = c;
    p->reqid[me] = rq.req;
    p->opseq[me] = rq.opseq;
    if (p->nasked == p->n && p->g == NULL)
        pending_complete(m, p);
}

static void on_group_release(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                             size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint64_t comm = mgr_r_u64(&r);
    uint32_t id = mgr_r_u32(&r);
    place_group_t *g;
    mgroup_t *mg;

    if (c->job == NULL || mgr_r_done(&r)) {
        m->ctr.malformed++;
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed group_release");
        return;
    }
    g = place_group_find(m->pl, id);
    if (g == NULL)
        return; /* failed or reclaimed before: nothing to do */
    mg = g->user;
    if (mg->job != c->job || mg->comm != comm) {
        mgr_send_error(m, c, 0, INCOLL_ERR_INVALID_ARG,
                       "group %u is not comm %016" PRIx64 "'s of job %s", id,
                       comm, c->job->name);
        return;
    }
    for (int i = 0; i < g->nmembers; i++)
        if (mg->ranks[i] == c->rank)
            mg->released[i] = 1;
    if (mg->active && group_done(g)) {
        group_teardown(m, g, NULL, T_RELEASED);
    }
}

static void usage_add(usage_ctr_t *u, const mgr_usage_entry_t *e)
{
    u->net += e->ops_net;
    u->sw += e->ops_sw;
    for (int k = 0; k < MGR_FB_COUNT; k++)
        u->fb[k] += e->fb[k];
}

/*
 * usage: where a communicator's collectives ran since its last report.
 * Added to its job and to its group while the group lives; a group of
 * another job (or of another communicator) refuses the whole report. A
 * group that is gone (released or failed since) counts for the job
 * alone.
 */
static void on_usage(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                     size_t len)
{
    mgr_usage_t u;
    const char *why = NULL;
    mgroup_t **mgs;

    if (c->job == NULL || mgr_dec_usage(body, len, &u, &why) != INCOLL_OK) {
        m->ctr.malformed++;
        m->ctr.usage_refused++;
        if (c->job)
            incoll_warn("job %s rank %d (conn %u, %s): malformed usage: %s",
                        c->job->name, c->rank, c->id, c->name, why);
        else
            incoll_warn("conn %u (%s): usage before join", c->id, c->name);
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed usage: %s",
                       why ? why : "before join");
        return;
    }
    mgs = calloc(u.nentries, sizeof(*mgs));
    if (mgs == NULL)
        return;
    for (uint16_t i = 0; i < u.nentries; i++) {
        mgr_usage_entry_t e;
        place_group_t *g;
        mgr_usage_at(&u, i, &e);
        g = e.group ? place_group_find(m->pl, e.group) : NULL;
        if (g == NULL)
            continue;
        mgs[i] = g->user;
        if (mgs[i]->job != c->job || mgs[i]->comm != e.comm) {
            m->ctr.usage_refused++;
            incoll_warn("job %s rank %d: usage for group %u of comm %016" PRIx64
                        ", which is not that communicator's group in this "
                        "job: refused",
                        c->job->name, c->rank, e.group, e.comm);
            mgr_send_error(m, c, 0, INCOLL_ERR_INVALID_ARG,
                           "usage: group %u is not comm %016" PRIx64
                           "'s of job %s",
                           e.group, e.comm, c->job->name);
            free(mgs);
            return;
        }
    }
    for (uint16_t i = 0; i < u.nentries; i++) {
        mgr_usage_entry_t e;
        mgr_usage_at(&u, i, &e);
        usage_add(&c->job->usage, &e);
        if (mgs[i])
            usage_add(&mgs[i]->usage, &e);
    }
    m->ctr.usage_reports++;
    free(mgs);
}

/*
 * usage_proc: a process's counters of the result path since its last
 * report, added to its job's. A body of another version is refused with an
 * error that says so (the process stops sending them).
 */
static void on_usage_proc(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                          size_t len)
{
    uint64_t v[MGR_PC_COUNT];
    const char *why = "before join";

    if (c->job == NULL || mgr_dec_usage_proc(body, len, v, &why) != INCOLL_OK) {
        m->ctr.malformed++;
        m->ctr.usage_refused++;
        incoll_warn("%s%s rank %d (conn %u, %s): process counters refused: "
                    "%s",
                    c->job ? "job " : "", c->job ? c->job->name : "(no job)",
                    c->rank, c->id, c->name, why);
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL,
                       "process counters (usage_proc) refused: %s", why);
        return;
    }
    for (int k = 0; k < MGR_PC_COUNT; k++)
        c->job->pc[k] += v[k];
    m->ctr.usage_reports++;
}

/* stat_req: u32 flags (an empty body is flags 0, as older tools send). */
static void on_stat(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                    size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint32_t flags = len ? mgr_r_u32(&r) : 0;
    char *text;
    size_t n;
    mgr_wbuf_t w = {0};

    if (len && mgr_r_done(&r)) {
        m->ctr.malformed++;
        mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed stat_req");
        return;
    }
    if (flags & (MGR_STAT_F_OPENMETRICS | MGR_STAT_F_PROMETHEUS))
        text = mgr_core_metrics_text(m, m->now,
                                     (flags & MGR_STAT_F_OPENMETRICS) != 0);
    else
        text = mgr_core_stat_text(m, m->now);
    if (text == NULL) {
        mgr_send_error(m, c, 0, INCOLL_ERR_NO_MEMORY, "out of memory");
        return;
    }
    n = strlen(text);
    if (n > MGR_MAX_FRAME - 4096) {
        free(text);
        mgr_send_error(m, c, 0, INCOLL_ERR_NO_RESOURCE,
                       "the answer has %zu bytes, more than a frame holds "
                       "(the metrics endpoint has no such bound)",
                       n);
        return;
    }
    mgr_w_text(&w, text, n);
    free(text);
    mgr_send_msg(m, c, MGR_STAT_REP, &w);
    mgr_wbuf_free(&w);
}

/* ---- dispatch ---- */

static void on_frame(mgr_core_t *m, mgr_peer_t *c, uint16_t type,
                     const uint8_t *body, size_t len)
{
    int role = c->role;

    if (type == MGR_BYE) {
        c->bye = 1;
        peer_kill(m, c, "goodbye");
        return;
    }
    if (role == MGR_ROLE_AN) {
        if (type == MGR_AN_REGISTER) {
            on_an_register(m, c, body, len);
            return;
        }
        if (c->an < 0) {
            m->ctr.malformed++;
            peer_kill(m, c, "an message before an_register");
            return;
        }
        if (type == MGR_AN_HEARTBEAT)
            on_heartbeat(m, c, body, len);
        else if (type == MGR_GROUP_ACK)
            on_group_ack(m, c, body, len);
        else
            goto unexpected;
        return;
    }
    if (role == MGR_ROLE_HOST) {
        if (type == m->fault_unknown)
            goto unexpected; /* INCOLL_MGR_FAULT_UNKNOWN */
        if (type == MGR_JOIN)
            on_join(m, c, body, len);
        else if (type == MGR_GROUP_REQ)
            on_group_req(m, c, body, len);
        else if (type == MGR_GROUP_RELEASE)
            on_group_release(m, c, body, len);
        else if (type == MGR_USAGE)
            on_usage(m, c, body, len);
        else if (type == MGR_USAGE_PROC)
            on_usage_proc(m, c, body, len);
        else if (type == MGR_STAT_REQ)
            on_stat(m, c, body, len);
        else
            goto unexpected;
        return;
    }
    if ((role == MGR_ROLE_TOOL || role == MGR_ROLE_ADMIN) &&
        type == MGR_STAT_REQ) {
        on_stat(m, c, body, len);
        return;
    }
    if (role == MGR_ROLE_ADMIN && type == MGR_JOB_REGISTER) {
        mgr_on_job_register(m, c, body, len);
        return;
    }
    if (role == MGR_ROLE_ADMIN && type == MGR_JOB_END) {
        mgr_on_job_end(m, c, body, len);
        return;
    }
unexpected:
    m->ctr.malformed++;
    incoll_warn("conn %u (%s): unexpected %s (type 0x%x) from a role %d "
                "peer",
                c->id, c->name, mgr_msg_name(type), type, role);
    mgr_send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "unexpected message type 0x%x",
                   type);
}

void mgr_core_frame(mgr_core_t *m, mgr_peer_t *c, uint16_t type,
                    const uint8_t *body, size_t len, uint64_t now)
{
    if (c == NULL || c->dead)
        return;
    enter(m, now);
    on_frame(m, c, type, body, len);
    leave(m);
}

/* ---- timers ---- */

void mgr_core_tick(mgr_core_t *m, uint64_t now)
{
    enter(m, now);
    now = m->now;
    /* ANs whose heartbeats stopped. Collect first: killing one peer may
     * kill others (an AN's failure is told to members, whose connections
     * may be broken). */
    {
        int nlate = 0;
        mgr_peer_t **late =
            malloc((size_t)(m->topo->nswitches + 1) * sizeof(*late));
        for (int i = 0; late && i < m->topo->nswitches; i++) {
            mgr_peer_t *c = m->an[i].conn;
            if (c && c->hb_deadline && now > c->hb_deadline)
                late[nlate++] = c;
        }
        for (int i = 0; i < nlate; i++)
            if (!late[i]->dead)
                peer_kill(m, late[i], "heartbeats missed");
        free(late);
    }
    /* Ranks lost or adopted for too long: tearing their groups down does
     * not touch the rank tables. */
    for (job_t *j = m->jobs; j; j = j->next) {
        if (j->nstate[R_LOST] + j->nstate[R_ADOPTED] == 0)
            continue;
        for (uint32_t i = 0; i < j->cap; i++) {
            rank_t *rk = &j->tab[i];
            job_rank_t jr = {j, rk->rank};
            char reason[160];
            if (rk->rank < 0 ||
                (rk->state != R_LOST && rk->state != R_ADOPTED) ||
                now < rk->deadline)
                continue;
            snprintf(reason, sizeof(reason), "rank %d of job %s is gone",
                     (int)rk->rank, j->name);
            incoll_info("job %s rank %d: gone for good (%s); reclaiming "
                        "its groups",
                        j->name, (int)rk->rank,
                        mgr_rank_state_names[rk->state]);
            mgr_rank_set_state(j, rk, R_DEAD);
            teardown_where(m, pred_has_rank, &jr, reason, T_RECLAIMED);
        }
    }
    for (pending_t *p = m->pend, *next; p; p = next) {
        next = p->next;
        if (p->g == NULL && now > p->deadline) {
            incoll_warn("job %s comm %016" PRIx64 ": only %d of %d "
                        "members asked for the group within %u ms",
                        p->job->name, p->comm, p->nasked, p->n,
                        m->p.request_ms);
            for (int i = 0; i < p->n; i++)
                if (p->who[i])
                    mgr_send_error(m, p->who[i], p->reqid[i],
                                   INCOLL_ERR_TIMEOUT,
                                   "only %d of %d members asked for the group",
                                   p->nasked, p->n);
            pending_unlink(m, p);
            pending_free(m, p);
        }
    }
    {
        int n = place_group_count(m->pl), k = 0;
        uint32_t *overdue = malloc((size_t)(n + 1) * sizeof(*overdue));
        for (int i = 0; overdue && i < n; i++) {
            const place_group_t *g = place_group_at(m->pl, i);
            const mgroup_t *mg = g->user;
            if ((!mg->active || mg->adopted) && mg->deadline &&
                now > mg->deadline) {
                int all = 1;
                for (int a = 0; a < g->nans; a++)
                    all &= mg->confirmed[a];
                if (!all)
                    overdue[k++] = g->id;
                else
                    ((mgroup_t *)mg)->deadline = 0;
            }
        }
        for (int i = 0; i < k; i++) {
            place_group_t *g = place_group_find(m->pl, overdue[i]);
            if (g) {
                group_teardown(m, g,
                               ((mgroup_t *)g->user)->active
                                   ? "not every an came back"
                                   : "an an did not acknowledge it",
                               T_FAILED);
            }
        }
        free(overdue);
    }
    mgr_jobs_gc(m);
    leave(m);
}

static int pred_job(const mgr_core_t *m, const place_group_t *g,
                    const void *arg)
{
    return ((const mgroup_t *)g->user)->job == arg;
}

int mgr_job_teardown(mgr_core_t *m, job_t *job, const char *reason)
{
    int n = teardown_where(m, pred_job, job, reason, T_RELEASED);
    for (pending_t *p = m->pend, *next; p; p = next) {
        next = p->next;
        if (p->job != job)
            continue;
        for (int i = 0; i < p->n; i++)
            if (p->who[i])
                mgr_send_error(m, p->who[i], p->reqid[i],
                               INCOLL_ERR_NO_RESOURCE, "%s", reason);
        pending_unlink(m, p);
        pending_free(m, p);
    }
    return n;
}

/* ---- life cycle ---- */

mgr_core_t *mgr_core_create(const mgr_core_params_t *params, uint64_t now,
                            char *err, size_t errlen)
{
    mgr_core_t *m;

    if (params->topo == NULL || params->send == NULL || params->close == NULL) {
        snprintf(err, errlen, "manager core: no topology or callbacks");
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    m->p = *params;
    m->topo = params->topo;
    m->now = now;
    m->fault_unknown = (int)setting_int(SETTING_MGR_FAULT_UNKNOWN);
    m->start = now;
    {
        /* In the default range, multicast addresses from a random place:
         * two managers whose hosts share a link (two fabrics on one
         * machine's loopback, a test and a job) rarely hand out the same
         * ones. A range the operator gives is the site's plan: from its
         * start. */
        uint32_t base, n, r;
        char why[160];
        if (!setting_in_env(SETTING_MCAST_RANGE) &&
            udp_mcast_range(&base, &n, why, sizeof(why)) == 0 && n > 1 &&
            getrandom(&r, sizeof(r), 0) == (ssize_t)sizeof(r))
            m->mc_next = r % n;
    }
    snprintf(m->listen, sizeof(m->listen), "%s",
             params->listen ? params->listen : "-");
    m->p.listen = m->listen;
    m->an = calloc((size_t)m->topo->nswitches + 1, sizeof(*m->an));
    m->q_groups_left =
        calloc((size_t)m->topo->nswitches + 1, sizeof(*m->q_groups_left));
    m->q_slots_left =
        calloc((size_t)m->topo->nswitches + 1, sizeof(*m->q_slots_left));
    m->pl = place_create(m->topo, &m->p.place);
    m->last_gen = m->p.gen_base - 1;
    if (m->an == NULL || m->pl == NULL || m->q_groups_left == NULL ||
        m->q_slots_left == NULL) {
        snprintf(err, errlen, "out of memory");
        mgr_core_destroy(m);
        return NULL;
    }
    for (int i = 0; i < m->topo->nswitches; i++)
        m->an[i].ep = m->topo->sw[i].addr;
    return m;
}

void mgr_core_destroy(mgr_core_t *m)
{
    if (m == NULL)
        return;
    while (m->peers) {
        mgr_peer_t *c = m->peers;
        m->peers = c->next;
        free(c);
    }
    while (m->graveyard) {
        mgr_peer_t *c = m->graveyard;
        m->graveyard = c->next;
        free(c);
    }
    while (m->pend) {
        pending_t *p = m->pend;
        m->pend = p->next;
        pending_free(m, p);
    }
    if (m->pl) {
        for (int i = 0; i < place_group_count(m->pl); i++)
            mgroup_free(m, place_group_at(m->pl, i)->user);
        place_destroy(m->pl);
    }
    mgr_jobs_free(m);
    free(m->an);
    free(m->q_groups_left);
    free(m->q_slots_left);
    free(m);
}

void mgr_core_counts(const mgr_core_t *m, mgr_core_counts_t *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < m->topo->nswitches; i++)
        out->ans_up += m->an[i].conn != NULL;
    out->jobs = m->njobs;
    out->registrations = m->nregs;
    out->state_bytes = m->mem;
    out->quota_refused = m->ctr.quota_refused;
    out->budget_refused = m->ctr.budget_refused;
    for (const pending_t *p = m->pend; p; p = p->next)
        out->requests++;
    out->groups = place_group_count(m->pl);
    out->groups_made = m->ctr.groups_made;
    out->groups_refused = m->ctr.groups_refused;
    out->groups_failed = m->ctr.groups_failed;
    out->groups_released = m->ctr.groups_released;
    out->groups_reclaimed = m->ctr.groups_reclaimed;
    out->groups_adopted = m->ctr.groups_adopted;
    out->malformed = m->ctr.malformed;
}
