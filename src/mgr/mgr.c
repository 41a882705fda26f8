/*
 * The aggregation manager: connections, ANs, jobs, group requests, groups,
 * failures and restarts. See mgr.h and docs/manager.md.
 */
#include "mgr/mgr.h"

#include "common/fabric_conf.h"
#include "common/log.h"
#include "common/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 8192
#define FD_RESERVE 16   /* descriptors kept for everything but connections */
#define MIN_CONNS 8
#define EVICT_MS 500    /* an unauthenticated connection's least chance */
#define LISTEN_REST_MS 100 /* out of descriptors: rest the listener */
#define RATE_MS 10000   /* hostile-traffic warnings: a burst per interval */
#define TOOL_MAX_FRAME (64u << 10)
#define HOST_MAX_FRAME (2u << 20)
#define TOOL_TX_LIMIT (8u << 20)  /* queued to a peer that does not read */
#define HOST_TX_LIMIT (16u << 20)
#define GROUP_ACK_MS 5000
#define HB_MISSED 5 /* heartbeats an AN may miss before it is dead */
#define TOMBSTONES 4096 /* ids of groups this manager tore down, remembered */
#define REC_VERSION 1

typedef struct job job_t;

typedef struct conn {
    mgr_stream_t st;
    uint32_t id;
    char peer[32];
    uint32_t peer_ip;
    int dead;
    int unauth;          /* counted in mgr.nunauth */
    int watching_out;    /* EPOLLOUT armed */
    uint64_t accepted;   /* when */
    uint64_t partial_since; /* the frame in progress began, or 0 */
    uint64_t reserved;   /* bytes of it, charged to the budgets */
    struct job *res_job; /* the job charged too, or NULL */
    uint64_t deadline;   /* auth deadline, then (ANs) heartbeat deadline */
    int an;              /* switch index of a registered AN, else -1 */
    job_t *job;          /* a joined host's job */
    int rank;
    int bye;             /* the host said goodbye */
    struct conn *next;
} conn_t;

typedef struct {
    conn_t *conn;        /* NULL while down */
    incoll_ep_t ep;
    char counters[4096]; /* from the last heartbeat */
    uint64_t up_since;
    uint64_t last_seen;
    uint32_t registrations;
    uint32_t reported_groups;
} an_state_t;

enum { R_NONE = 0, R_UP, R_LOST, R_LEFT, R_ADOPTED, R_DEAD };
static const char *const rank_state_names[] = {"none", "up", "lost",
                                               "left", "adopted", "dead"};

typedef struct {
    conn_t *conn;
    int state;
    int host;            /* topology host, -1 unknown */
    incoll_ep_t ep;
    uint32_t pid;
    uint64_t deadline;   /* LOST/ADOPTED: reclaimed after this */
} rank_t;

struct job {
    char name[MGR_NAME_MAX];
    int size;
    rank_t *ranks;
    uint64_t created;
    uint64_t rx_reserved; /* partial frames of its connections */
    struct job *next;
};

typedef struct pending pending_t;

/* The manager's side of a placed group (place_group_t.user). */
typedef struct {
    job_t *job;
    uint64_t comm;
    uint32_t gen;
    int *ranks;          /* world rank of each member */
    uint8_t *released;
    uint8_t *confirmed;  /* per AN of the group: it holds the group */
    int unacked;         /* ANs still to acknowledge the add */
    int active;
    int adopted;
    uint64_t deadline;   /* acks, or (adopted) confirmation by every AN */
    pending_t *pend;     /* the request waiting for the acks */
    uint8_t *rec;        /* the record the ANs keep */
    size_t rec_len;
} mgroup_t;

struct pending {
    job_t *job;
    uint64_t comm;
    uint32_t gen;
    uint32_t slots;
    uint32_t payload;
    int n;
    int *ranks;
    conn_t **who;
    uint32_t *reqid;
    uint64_t *opseq;
    int nasked;
    uint64_t deadline;
    place_group_t *g;    /* placed, waiting for the ANs' acks */
    struct pending *next;
};

/* Rate limits a kind of warning to `burst` lines per RATE_MS, counting
 * what it leaves out for the next line that goes through. */
typedef struct {
    const char *what;
    int burst;
    int used;
    uint64_t window;
    uint64_t suppressed;
} ratelog_t;

struct mgr {
    mgr_params_t p;
    const topo_t *topo;
    place_t *pl;
    int lfd;
    int epfd;
    uint16_t port;
    char listen[64];
    conn_t *conns;
    int nconns;
    int nunauth;
    int max_conns;       /* from RLIMIT_NOFILE */
    int max_unauth;
    int spare_fd;        /* /dev/null, given up to shed a connection */
    int listen_resting;  /* the listener is out of the epoll set */
    uint64_t listen_resume; /* until then */
    uint64_t rx_reserved; /* partial frames of every connection */
    ratelog_t rl_accept, rl_conn, rl_frame;
    conn_t *graveyard;
    an_state_t *an;
    job_t *jobs;
    pending_t *pend;
    uint64_t start;
    uint64_t boot_id;
    uint32_t tomb[TOMBSTONES]; /* never adopt these again */
    uint64_t ntomb;
    uint32_t next_conn_id;
    struct {
        uint64_t conns_accepted;
        uint64_t conns_refused;
        uint64_t conns_evicted;
        uint64_t conns_shed;
        uint64_t frames_late;
        uint64_t frames_refused;
        uint64_t auth_failures;
        uint64_t malformed;
        uint64_t groups_made;
        uint64_t groups_refused;
        uint64_t groups_failed;
        uint64_t groups_released;
        uint64_t groups_reclaimed;
        uint64_t groups_adopted;
    } ctr;
};

void mgr_params_default(mgr_params_t *p)
{
    memset(p, 0, sizeof(*p));
    p->listen = "127.0.0.1:0";
    p->heartbeat_ms = 200;
    p->host_grace_ms = 3000;
    p->adopt_grace_ms = 30000;
    p->recover_ms = 10000;
    p->request_ms = 30000;
    p->auth_ms = 5000;
    p->frame_ms = 10000;
    p->rx_budget = 64u << 20;
    p->job_rx_budget = 16u << 20;
    p->tick_ms = 100;
    p->stop_fd = -1;
    place_params_default(&p->place);
}

uint16_t mgr_port(const mgr_t *m) { return m->port; }

/* ---- rate-limited warnings ---- */

/* 1 when a warning of this kind may go out now; *suppressed_p then says
 * how many were left out before it. */
static int rate_ok(ratelog_t *rl, uint64_t *suppressed_p)
{
    uint64_t now = now_ms();
    if (rl->window == 0 || now >= rl->window + RATE_MS) {
        rl->window = now;
        rl->used = 0;
    }
    if (rl->used >= rl->burst) {
        rl->suppressed++;
        return 0;
    }
    rl->used++;
    *suppressed_p = rl->suppressed;
    rl->suppressed = 0;
    return 1;
}

static void rate_warn(ratelog_t *rl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void rate_warn(ratelog_t *rl, const char *fmt, ...)
{
    char text[512];
    uint64_t suppressed;
    va_list ap;
    if (!rate_ok(rl, &suppressed))
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (suppressed)
        incoll_warn("%s (and %" PRIu64 " more %s since the last)", text,
                    suppressed, rl->what);
    else
        incoll_warn("%s", text);
}

/* ---- connections ---- */

static void conn_watch_out(mgr_t *m, conn_t *c)
{
    int want = mgr_stream_pending(&c->st) > 0;
    struct epoll_event ev;
    if (want == c->watching_out || c->dead)
        return;
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0);
    ev.data.ptr = c;
    epoll_ctl(m->epfd, EPOLL_CTL_MOD, c->st.fd, &ev);
    c->watching_out = want;
}

static void conn_kill(mgr_t *m, conn_t *c, const char *why);

/* Queues a message; a peer that stopped reading is dropped. */
static void send_msg(mgr_t *m, conn_t *c, uint16_t type, const mgr_wbuf_t *w)
{
    incoll_status_t status;
    if (c == NULL || c->dead)
        return;
    if (w->oom) {
        incoll_error("conn %u (%s): out of memory building %s", c->id,
                     c->peer, mgr_msg_name(type));
        return;
    }
    status = mgr_stream_send(&c->st, type, w->buf, w->len);
    if (status != INCOLL_OK) {
        conn_kill(m, c, status == INCOLL_ERR_BUSY ? "peer does not read"
                                                  : "cannot queue a message");
        return;
    }
    if (mgr_stream_flush(&c->st) != 0) {
        conn_kill(m, c, "send failed");
        return;
    }
    conn_watch_out(m, c);
}

static void send_error(mgr_t *m, conn_t *c, uint32_t req,
                       incoll_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void send_error(mgr_t *m, conn_t *c, uint32_t req,
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
    send_msg(m, c, MGR_ERROR, &w);
    mgr_wbuf_free(&w);
}

/* ---- group records, kept by the ANs ---- */

static int encode_rec(mgr_t *m, const place_group_t *g, const mgroup_t *mg)
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

/* ---- jobs ---- */

static job_t *job_find(mgr_t *m, const char *name)
{
    for (job_t *j = m->jobs; j; j = j->next)
        if (strcmp(j->name, name) == 0)
            return j;
    return NULL;
}

static job_t *job_create(mgr_t *m, const char *name, int size)
{
    job_t *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return NULL;
    j->ranks = calloc((size_t)size, sizeof(*j->ranks));
    if (j->ranks == NULL) {
        free(j);
        return NULL;
    }
    snprintf(j->name, sizeof(j->name), "%s", name);
    j->size = size;
    j->created = now_ms();
    for (int r = 0; r < size; r++) {
        j->ranks[r].host = -1;
        j->ranks[r].ep = INCOLL_EP_NONE;
    }
    j->next = m->jobs;
    m->jobs = j;
    return j;
}

static int job_busy(const mgr_t *m, const job_t *j)
{
    for (int r = 0; r < j->size; r++)
        if (j->ranks[r].state == R_UP || j->ranks[r].state == R_LOST ||
            j->ranks[r].state == R_ADOPTED)
            return 1;
    for (int i = 0; i < place_group_count(m->pl); i++) {
        const mgroup_t *mg = place_group_at(m->pl, i)->user;
        if (mg->job == j)
            return 1;
    }
    for (const pending_t *p = m->pend; p; p = p->next)
        if (p->job == j)
            return 1;
    return 0;
}

static void job_gc(mgr_t *m)
{
    for (job_t **pj = &m->jobs; *pj;) {
        job_t *j = *pj;
        if (job_busy(m, j)) {
            pj = &j->next;
            continue;
        }
        incoll_info("job %s: gone, nothing left of it", j->name);
        *pj = j->next;
        free(j->ranks);
        free(j);
    }
}

/* ---- groups ---- */

static void mgroup_free(mgroup_t *mg)
{
    if (mg == NULL)
        return;
    free(mg->ranks);
    free(mg->released);
    free(mg->confirmed);
    free(mg->rec);
    free(mg);
}

static void pending_free(pending_t *p)
{
    free(p->opseq);
    free(p->ranks);
    free(p->who);
    free(p->reqid);
    free(p);
}

static void pending_unlink(mgr_t *m, pending_t *p)
{
    for (pending_t **pp = &m->pend; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

/* Sends every member that asked the answer to its request: the group (if
 * g) or status and reason. */
static void answer_pending(mgr_t *m, pending_t *p, const place_group_t *g,
                           incoll_status_t status, const char *reason)
{
    uint8_t *peers = malloc((size_t)p->n * 8);
    uint64_t lo = UINT64_MAX, hi = 0;

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
        uint64_t ep = p->job->ranks[p->ranks[i]].ep;
        for (int k = 0; k < 8; k++)
            peers[8 * i + k] = (uint8_t)(ep >> (8 * k));
    }
    for (int i = 0; i < p->n; i++) {
        mgr_group_info_t gi;
        mgr_wbuf_t w = {0};
        if (p->who[i] == NULL)
            continue;
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
        }
        mgr_enc_group_info(&w, &gi);
        send_msg(m, p->who[i], MGR_GROUP_INFO, &w);
        mgr_wbuf_free(&w);
    }
    free(peers);
}

static void notify_failed(mgr_t *m, const place_group_t *g,
                          const mgroup_t *mg, const char *reason)
{
    for (int i = 0; i < g->nmembers; i++) {
        rank_t *r = &mg->job->ranks[mg->ranks[i]];
        mgr_wbuf_t w = {0};
        if (r->state != R_UP || r->conn == NULL || mg->released[i])
            continue;
        mgr_w_u32(&w, g->id);
        mgr_w_u64(&w, mg->comm);
        mgr_w_u32(&w, mg->gen);
        mgr_w_str(&w, reason);
        send_msg(m, r->conn, MGR_GROUP_FAILED, &w);
        mgr_wbuf_free(&w);
    }
}

/*
 * Removes a group from its ANs and frees its resources. With reason set,
 * the group failed: members still using it hear GROUP_FAILED, and a
 * request still waiting for it gets the reason.
 */
static void group_teardown(mgr_t *m, place_group_t *g, const char *reason)
{
    mgroup_t *mg = g->user;
    uint32_t id = g->id;

    for (int i = 0; i < g->nans; i++) {
        an_state_t *a = &m->an[g->ans[i].sw];
        mgr_wbuf_t w = {0};
        if (a->conn == NULL)
            continue;
        mgr_w_u32(&w, id);
        send_msg(m, a->conn, MGR_GROUP_REMOVE, &w);
        mgr_wbuf_free(&w);
    }
    if (mg->pend) {
        pending_t *p = mg->pend;
        answer_pending(m, p, NULL, INCOLL_ERR_NO_RESOURCE,
                       reason ? reason : "group removed");
        pending_unlink(m, p);
        pending_free(p);
        mg->pend = NULL;
    } else if (reason) {
        notify_failed(m, g, mg, reason);
    }
    if (reason)
        incoll_info("group %u (job %s comm %016" PRIx64 "): torn down: %s",
                    id, mg->job->name, mg->comm, reason);
    else
        incoll_debug("group %u (job %s comm %016" PRIx64 "): released",
                     id, mg->job->name, mg->comm);
    m->tomb[m->ntomb++ % TOMBSTONES] = id;
    place_group_release(m->pl, id);
    mgroup_free(mg);
}

static int tombstone(const mgr_t *m, uint32_t id)
{
    int n = m->ntomb < TOMBSTONES ? (int)m->ntomb : TOMBSTONES;
    for (int i = 0; i < n; i++)
        if (m->tomb[i] == id)
            return 1;
    return 0;
}

/* Collects the ids of groups matching a predicate first: teardown changes
 * the group list. */
typedef int (*group_pred_t)(const mgr_t *m, const place_group_t *g,
                            const void *arg);

static void teardown_where(mgr_t *m, group_pred_t pred, const void *arg,
                           const char *reason, uint64_t *ctr)
{
    int n = place_group_count(m->pl), k = 0;
    uint32_t *ids;
    if (n == 0)
        return;
    ids = malloc((size_t)n * sizeof(*ids));
    if (ids == NULL)
        return;
    for (int i = 0; i < n; i++) {
        const place_group_t *g = place_group_at(m->pl, i);
        if (pred(m, g, arg))
            ids[k++] = g->id;
    }
    for (int i = 0; i < k; i++) {
        place_group_t *g = place_group_find(m->pl, ids[i]);
        if (g) {
            group_teardown(m, g, reason);
            if (ctr)
                (*ctr)++;
        }
    }
    free(ids);
}

static int pred_uses_an(const mgr_t *m, const place_group_t *g, const void *arg)
{
    return place_group_uses(g, *(const int *)arg);
}

typedef struct {
    const job_t *job;
    int rank;
} job_rank_t;

static int pred_has_rank(const mgr_t *m, const place_group_t *g,
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
        int st = mg->job->ranks[mg->ranks[i]].state;
        if (!mg->released[i] && st != R_LEFT && st != R_DEAD)
            return 0;
    }
    return 1;
}

static int pred_done(const mgr_t *m, const place_group_t *g, const void *arg)
{
    const mgroup_t *mg = g->user;
    return mg->active && (arg == NULL || mg->job == arg) && group_done(g);
}

static void an_down(mgr_t *m, int sw, const char *why)
{
    an_state_t *a = &m->an[sw];
    char reason[160];
    a->conn = NULL;
    place_an_down(m->pl, sw);
    incoll_warn("an %s down: %s", m->topo->sw[sw].name, why);
    snprintf(reason, sizeof(reason), "an %s failed: %s", m->topo->sw[sw].name,
             why);
    teardown_where(m, pred_uses_an, &sw, reason, &m->ctr.groups_failed);
}

/* A host connection ended: clean (bye) or not. */
static void host_gone(mgr_t *m, conn_t *c)
{
    job_t *j = c->job;
    rank_t *r = &j->ranks[c->rank];

    for (pending_t *p = m->pend; p; p = p->next) {
        for (int i = 0; i < p->n; i++) {
            if (p->who[i] == c) {
                p->who[i] = NULL;
                p->nasked--;
            }
        }
    }
    if (r->conn != c)
        return; /* replaced by a newer connection */
    r->conn = NULL;
    if (c->bye) {
        r->state = R_LEFT;
        incoll_debug("job %s rank %d: left", j->name, c->rank);
        teardown_where(m, pred_done, j, NULL, &m->ctr.groups_released);
    } else {
        r->state = R_LOST;
        r->deadline = now_ms() + m->p.host_grace_ms;
        incoll_info("job %s rank %d: connection lost; its groups are "
                    "reclaimed in %u ms unless it comes back",
                    j->name, c->rank, m->p.host_grace_ms);
    }
}

/* Charges what c buffers of a frame in progress to the budgets, in place
 * of what it had. */
static void conn_charge(mgr_t *m, conn_t *c, uint64_t bytes, job_t *j)
{
    m->rx_reserved -= c->reserved;
    if (c->res_job)
        c->res_job->rx_reserved -= c->reserved;
    c->reserved = bytes;
    c->res_job = bytes ? j : NULL;
    m->rx_reserved += bytes;
    if (c->res_job)
        c->res_job->rx_reserved += bytes;
}

static void conn_kill(mgr_t *m, conn_t *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = 1;
    conn_charge(m, c, 0, NULL);
    if (c->unauth) {
        c->unauth = 0;
        m->nunauth--;
    }
    /* A freed descriptor may be what the listener waits for. */
    if (m->listen_resting)
        m->listen_resume = 0;
    if (c->an >= 0 && m->an[c->an].conn == c)
        an_down(m, c->an, why);
    else if (c->job)
        host_gone(m, c);
    if (c->an < 0 && c->job == NULL)
        incoll_debug("conn %u (%s) closed: %s", c->id, c->peer, why);
    else if (c->job)
        incoll_debug("conn %u (%s, job %s rank %d) closed: %s", c->id,
                     c->peer, c->job->name, c->rank, why);
    epoll_ctl(m->epfd, EPOLL_CTL_DEL, c->st.fd, NULL);
    /* Let queued frames (an auth_fail, an error) leave if they can. */
    mgr_stream_flush(&c->st);
    mgr_stream_close(&c->st);
    for (conn_t **pc = &m->conns; *pc; pc = &(*pc)->next) {
        if (*pc == c) {
            *pc = c->next;
            break;
        }
    }
    m->nconns--;
    c->next = m->graveyard;
    m->graveyard = c;
}

/* ---- AN messages ---- */

static void adopt_reported(mgr_t *m, conn_t *c, const mgr_an_group_t *rg)
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
    uint64_t now = now_ms();

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
    j = job_find(m, jobname);
    if (j != NULL && j->size != (int)jsize)
        goto stale;
    if (j == NULL && (j = job_create(m, jobname, (int)jsize)) == NULL)
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
    mg->comm = comm;
    mg->gen = gen;
    mg->ranks = ranks;
    ranks = NULL;
    mg->active = 1;
    mg->adopted = 1;
    mg->deadline = now + m->p.adopt_grace_ms;
    if (encode_rec(m, g, mg) != 0) {
        place_group_release(m->pl, rg->id);
        mgroup_free(mg);
        goto stale;
    }
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
            group_teardown(m, g, reason);
            m->ctr.groups_failed++;
            return;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        rank_t *rk = &j->ranks[mg->ranks[i]];
        if (rk->state == R_NONE) {
            rk->state = R_ADOPTED;
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
        send_msg(m, c, MGR_GROUP_REMOVE, &w);
        mgr_wbuf_free(&w);
    }
}

static void on_an_register(mgr_t *m, conn_t *c, const uint8_t *body,
                           size_t len)
{
    const topo_t *topo = m->topo;
    mgr_an_register_t reg;
    const char *why = NULL;
    topo_caps_t caps;
    an_state_t *a;
    int sw;
    char ep[32], want[32];
    uint64_t now = now_ms();

    if (c->an >= 0) {
        send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "already registered");
        return;
    }
    if (mgr_dec_an_register(body, len, &reg, &why) != INCOLL_OK) {
        m->ctr.malformed++;
        incoll_warn("conn %u (%s): malformed an_register: %s", c->id,
                    c->peer, why);
        conn_kill(m, c, "malformed an_register");
        return;
    }
    sw = topo_find_switch(topo, reg.name);
    if (sw < 0) {
        incoll_warn("conn %u (%s): an '%s' is not in the topology",
                    c->id, c->peer, reg.name);
        send_error(m, c, 0, INCOLL_ERR_NOT_FOUND,
                   "an '%s' is not in the topology", reg.name);
        conn_kill(m, c, "unknown an");
        return;
    }
    if (topo->sw[sw].addr != INCOLL_EP_NONE && topo->sw[sw].addr != reg.ep) {
        incoll_warn("an %s registers udp %s but the topology says %s",
                    reg.name, wire_ep_str(reg.ep, ep, sizeof(ep)),
                    wire_ep_str(topo->sw[sw].addr, want, sizeof(want)));
        send_error(m, c, 0, INCOLL_ERR_CONFIG,
                   "an %s: udp endpoint %s differs from the topology's %s",
                   reg.name, ep, want);
        conn_kill(m, c, "wrong endpoint");
        return;
    }
    for (int i = 0; i < topo->nswitches; i++) {
        if (i != sw && m->an[i].conn && m->an[i].ep == reg.ep) {
            send_error(m, c, 0, INCOLL_ERR_BUSY,
                       "udp endpoint %s is an %s's",
                       wire_ep_str(reg.ep, ep, sizeof(ep)), topo->sw[i].name);
            conn_kill(m, c, "endpoint in use");
            return;
        }
    }
    a = &m->an[sw];
    if (a->conn)
        conn_kill(m, a->conn, "replaced by a new registration");
    c->an = sw;
    a->conn = c;
    a->ep = reg.ep;
    a->up_since = now;
    a->last_seen = now;
    a->registrations++;
    a->reported_groups = reg.ngroups;
    a->counters[0] = '\0';
    c->deadline = now + HB_MISSED * (uint64_t)m->p.heartbeat_ms;
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
        mgr_w_u64(&w, m->boot_id);
        send_msg(m, c, MGR_AN_REGISTER_OK, &w);
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
        } else if (g == NULL && now < m->start + m->p.recover_ms &&
                   !tombstone(m, rg.id)) {
            adopt_reported(m, c, &rg);
        } else {
            mgr_wbuf_t w = {0};
            incoll_info("an %s holds stale group %u: removing it",
                        reg.name, rg.id);
            mgr_w_u32(&w, rg.id);
            send_msg(m, c, MGR_GROUP_REMOVE, &w);
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
            group_teardown(m, g, reason);
            m->ctr.groups_failed++;
        }
        free(lost);
    }
}

static void on_heartbeat(mgr_t *m, conn_t *c, const uint8_t *body, size_t len)
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
        send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed heartbeat");
        return;
    }
    if (n >= sizeof(a->counters))
        n = sizeof(a->counters) - 1;
    memcpy(a->counters, text, n);
    a->counters[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)a->counters[i] < 0x20)
            a->counters[i] = ' ';
    a->last_seen = now_ms();
    c->deadline = a->last_seen + HB_MISSED * (uint64_t)m->p.heartbeat_ms;
    mgr_w_u64(&w, seq);
    send_msg(m, c, MGR_AN_PONG, &w);
    mgr_wbuf_free(&w);
}

static void on_group_ack(mgr_t *m, conn_t *c, const uint8_t *body, size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint32_t id = mgr_r_u32(&r);
    uint8_t op = mgr_r_u8(&r);
    int32_t status = (int32_t)mgr_r_u32(&r);
    place_group_t *g;
    mgroup_t *mg;

    if (mgr_r_done(&r) || (op != 1 && op != 2)) {
        m->ctr.malformed++;
        send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed group_ack");
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
            m->ctr.groups_refused++;
            group_teardown(m, g, reason);
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
        if (p) {
            answer_pending(m, p, g, INCOLL_OK, "");
            pending_unlink(m, p);
            pending_free(p);
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

static void on_join(mgr_t *m, conn_t *c, const uint8_t *body, size_t len)
{
    const topo_t *topo = m->topo;
    mgr_join_t jn;
    const char *why = NULL;
    job_t *j;
    rank_t *r;
    int host = -1;

    if (c->job) {
        send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "already joined");
        return;
    }
    if (mgr_dec_join(body, len, &jn, &why) != INCOLL_OK) {
        m->ctr.malformed++;
        incoll_warn("conn %u (%s): malformed join: %s", c->id, c->peer,
                    why);
        send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed join: %s", why);
        return;
    }
    j = job_find(m, jn.job);
    if (j && j->size != jn.size) {
        send_error(m, c, 0, INCOLL_ERR_INVALID_ARG,
                   "job %s has %d ranks, not %d", jn.job, j->size, jn.size);
        return;
    }
    if (j == NULL && (j = job_create(m, jn.job, jn.size)) == NULL) {
        send_error(m, c, 0, INCOLL_ERR_NO_MEMORY, "out of memory");
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
                    jn.job, jn.rank, jn.host, c->peer);
    r = &j->ranks[jn.rank];
    if (r->conn && r->conn != c)
        conn_kill(m, r->conn, "replaced by a new connection of the rank");
    r->conn = c;
    r->state = R_UP;
    r->host = host;
    r->ep = jn.ep;
    r->pid = jn.pid;
    c->job = j;
    c->rank = jn.rank;
    incoll_debug("job %s rank %d/%d joined from %s (host %s)", jn.job,
                 jn.rank, jn.size, c->peer,
                 host >= 0 ? topo->hosts[host].name : "?");
    {
        mgr_wbuf_t w = {0};
        mgr_w_u64(&w, m->boot_id);
        mgr_w_u32(&w, 0);
        send_msg(m, c, MGR_JOIN_OK, &w);
        mgr_wbuf_free(&w);
    }
}

static place_group_t *find_comm_group(mgr_t *m, const job_t *j, uint64_t comm,
                                      int *n_older, uint32_t gen)
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

static int pred_older_gen(const mgr_t *m, const place_group_t *g,
                          const void *arg)
{
    const pending_t *p = arg;
    const mgroup_t *mg = g->user;
    return mg->job == p->job && mg->comm == p->comm && mg->gen < p->gen;
}

/* All members asked: place the group and ask its ANs to add it. */
static void pending_complete(mgr_t *m, pending_t *p)
{
    const topo_t *topo = m->topo;
    int *hosts = malloc((size_t)p->n * sizeof(int));
    char why[256] = "";
    place_req_t req = {p->slots, 0, p->payload};
    place_group_t *g = NULL;
    mgroup_t *mg;
    incoll_status_t status = INCOLL_OK;
    int older;

    if (hosts == NULL) {
        answer_pending(m, p, NULL, INCOLL_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    /* A rebuild replaces the communicator's earlier group. */
    find_comm_group(m, p->job, p->comm, &older, p->gen);
    if (older)
        teardown_where(m, pred_older_gen, p, NULL, &m->ctr.groups_released);
    for (int i = 0; i < p->n; i++) {
        hosts[i] = p->job->ranks[p->ranks[i]].host;
        if (hosts[i] < 0) {
            snprintf(why, sizeof(why), "rank %d is on a host not in the "
                                       "topology",
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
            status = place_group_create(m->pl, hosts, p->n, &req, &g, why,
                                        sizeof(why));
        }
    }
    free(hosts);
    if (status != INCOLL_OK) {
        m->ctr.groups_refused++;
        incoll_info("job %s comm %016" PRIx64 " gen %u (%d members): no "
                    "group: %s",
                    p->job->name, p->comm, p->gen, p->n, why);
        answer_pending(m, p, NULL, status, why);
        goto done;
    }
    mg = calloc(1, sizeof(*mg));
    if (mg == NULL || (mg->ranks = malloc((size_t)p->n * sizeof(int))) == NULL ||
        (mg->released = calloc((size_t)p->n, 1)) == NULL ||
        (mg->confirmed = calloc((size_t)g->nans, 1)) == NULL) {
        mgroup_free(mg);
        place_group_release(m->pl, g->id);
        answer_pending(m, p, NULL, INCOLL_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    g->user = mg;
    mg->job = p->job;
    mg->comm = p->comm;
    mg->gen = p->gen;
    memcpy(mg->ranks, p->ranks, (size_t)p->n * sizeof(int));
    mg->unacked = g->nans;
    mg->deadline = now_ms() + GROUP_ACK_MS;
    mg->pend = p;
    p->g = g;
    if (encode_rec(m, g, mg) != 0) {
        group_teardown(m, g, "out of memory");
        return;
    }
    for (int i = 0; i < g->nans; i++) {
        const place_an_t *a = &g->ans[i];
        uint8_t *eps = malloc((size_t)a->nchildren * 8);
        mgr_group_add_t add;
        mgr_wbuf_t w = {0};
        if (eps == NULL) {
            group_teardown(m, g, "out of memory");
            return;
        }
        for (int k = 0; k < a->nchildren; k++) {
            int ch = a->child[k];
            uint64_t ep = ch >= 0 ? m->an[g->ans[ch].sw].ep
                                  : p->job->ranks[mg->ranks[-ch - 1]].ep;
            for (int b = 0; b < 8; b++)
                eps[8 * k + b] = (uint8_t)(ep >> (8 * b));
        }
        memset(&add, 0, sizeof(add));
        add.id = g->id;
        add.key = g->key;
        add.slots = g->slots;
        add.payload = g->payload;
        add.parent = a->parent >= 0 ? m->an[g->ans[a->parent].sw].ep
                                    : INCOLL_EP_NONE;
        add.index_at_parent = a->index_at_parent;
        add.nchildren = (uint16_t)a->nchildren;
        add.children = eps;
        add.rec = mg->rec;
        add.rec_len = mg->rec_len;
        mgr_enc_group_add(&w, &add);
        free(eps);
        send_msg(m, m->an[a->sw].conn, MGR_GROUP_ADD, &w);
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
    pending_free(p);
}

static void on_group_req(mgr_t *m, conn_t *c, const uint8_t *body, size_t len)
{
    job_t *j = c->job;
    mgr_group_req_t rq;
    const char *why = NULL;
    pending_t *p;
    int me = -1, older;
    place_group_t *same;

    if (j == NULL) {
        send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "group_req before join");
        return;
    }
    if (mgr_dec_group_req(body, len, &rq, &why) != INCOLL_OK) {
        m->ctr.malformed++;
        incoll_warn("job %s rank %d: malformed group_req: %s", j->name,
                    c->rank, why);
        send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed group_req: %s",
                   why);
        return;
    }
    /* Members: distinct ranks of the job, including the asker. */
    {
        uint8_t *seen = calloc((size_t)j->size, 1);
        if (seen == NULL) {
            send_error(m, c, rq.req, INCOLL_ERR_NO_MEMORY, "out of memory");
            return;
        }
        for (uint32_t i = 0; i < rq.nmembers; i++) {
            uint32_t r = mgr_get_u32(rq.members, i);
            if (r >= (uint32_t)j->size || seen[r]) {
                free(seen);
                m->ctr.malformed++;
                send_error(m, c, rq.req, INCOLL_ERR_INVALID_ARG,
                           "member %u: rank %u is out of range or repeated", i,
                           r);
                return;
            }
            seen[r] = 1;
            if ((int)r == c->rank)
                me = (int)i;
        }
        free(seen);
    }
    if (me < 0) {
        send_error(m, c, rq.req, INCOLL_ERR_INVALID_ARG,
                   "rank %d is not among the members", c->rank);
        return;
    }
    /* Asked again for a group that exists (e.g. after a reconnection):
     * answer at once. */
    same = find_comm_group(m, j, rq.comm, &older, rq.gen);
    if (same && ((mgroup_t *)same->user)->active &&
        same->nmembers == (int)rq.nmembers) {
        mgroup_t *mg = same->user;
        int match = 1;
        for (uint32_t i = 0; i < rq.nmembers; i++)
            match &= mg->ranks[i] == (int)mgr_get_u32(rq.members, i);
        if (match) {
            /* Answer this member alone through a view of the group as a
             * request in which only it asked. */
            pending_t one = {0};
            conn_t **whos = calloc(rq.nmembers, sizeof(*whos));
            uint32_t *reqs = calloc(rq.nmembers, sizeof(*reqs));
            if (whos && reqs) {
                whos[me] = c;
                reqs[me] = rq.req;
                one.job = j;
                one.comm = rq.comm;
                one.gen = rq.gen;
                one.n = (int)rq.nmembers;
                one.ranks = mg->ranks;
                one.who = whos;
                one.reqid = reqs;
                mg->released[me] = 0;
                answer_pending(m, &one, same, INCOLL_OK, "");
            } else {
                send_error(m, c, rq.req, INCOLL_ERR_NO_MEMORY, "out of memory");
            }
            free(whos);
            free(reqs);
            return;
        }
    }
    for (p = m->pend; p; p = p->next)
        if (p->job == j && p->comm == rq.comm && p->gen == rq.gen)
            break;
    if (p == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL || (p->ranks = malloc(rq.nmembers * sizeof(int))) == NULL ||
            (p->who = calloc(rq.nmembers, sizeof(conn_t *))) == NULL ||
            (p->reqid = calloc(rq.nmembers, sizeof(uint32_t))) == NULL ||
            (p->opseq = calloc(rq.nmembers, sizeof(uint64_t))) == NULL) {
            if (p)
                pending_free(p);
            send_error(m, c, rq.req, INCOLL_ERR_NO_MEMORY, "out of memory");
            return;
        }
        p->job = j;
        p->comm = rq.comm;
        p->gen = rq.gen;
        p->slots = rq.slots;
        p->payload = rq.payload;
        p->n = (int)rq.nmembers;
        for (uint32_t i = 0; i < rq.nmembers; i++)
            p->ranks[i] = (int)mgr_get_u32(rq.members, i);
        p->deadline = now_ms() + m->p.request_ms;
        p->next = m->pend;
        m->pend = p;
        /* The first request of a newer generation comes from a member
         * recovering from a failure: the older group is torn down now and
         * its other members are told, so that those outside a collective
         * join the recovery at their next call. */
        if (older) {
            char reason[128];
            snprintf(reason, sizeof(reason),
                     "rank %d asked for generation %u of the communicator",
                     c->rank, rq.gen);
            teardown_where(m, pred_older_gen, p, reason,
                           &m->ctr.groups_released);
        }
    } else {
        int match = p->n == (int)rq.nmembers;
        for (int i = 0; match && i < p->n; i++)
            match = p->ranks[i] == (int)mgr_get_u32(rq.members, i);
        if (!match) {
            send_error(m, c, rq.req, INCOLL_ERR_INVALID_ARG,
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

static void on_group_release(mgr_t *m, conn_t *c, const uint8_t *body,
                             size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint64_t comm = mgr_r_u64(&r);
    uint32_t id = mgr_r_u32(&r);
    place_group_t *g;
    mgroup_t *mg;

    if (c->job == NULL || mgr_r_done(&r)) {
        m->ctr.malformed++;
        send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "malformed group_release");
        return;
    }
    g = place_group_find(m->pl, id);
    if (g == NULL)
        return; /* failed or reclaimed before: nothing to do */
    mg = g->user;
    if (mg->job != c->job || mg->comm != comm) {
        send_error(m, c, 0, INCOLL_ERR_INVALID_ARG,
                   "group %u is not comm %016" PRIx64 "'s of job %s", id, comm,
                   c->job->name);
        return;
    }
    for (int i = 0; i < g->nmembers; i++)
        if (mg->ranks[i] == c->rank)
            mg->released[i] = 1;
    if (mg->active && group_done(g)) {
        group_teardown(m, g, NULL);
        m->ctr.groups_released++;
    }
}

/* ---- stat ---- */

typedef struct {
    char *buf;
    size_t len, cap;
} sbuf_t;

static void sb_printf(sbuf_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf_t *s, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (s->buf == NULL && s->cap != 0)
        return;
    for (;;) {
        size_t room = s->cap - s->len;
        va_start(ap, fmt);
        n = vsnprintf(s->buf ? s->buf + s->len : NULL, s->buf ? room : 0, fmt,
                      ap);
        va_end(ap);
        if (n < 0)
            return;
        if (s->buf && (size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        {
            size_t ncap = s->cap ? s->cap * 2 : 8192;
            char *nb;
            while (ncap < s->len + (size_t)n + 1)
                ncap *= 2;
            nb = realloc(s->buf, ncap);
            if (nb == NULL) {
                free(s->buf);
                s->buf = NULL;
                s->cap = 1;
                return;
            }
            s->buf = nb;
            s->cap = ncap;
        }
    }
}

char *mgr_stat_text(const mgr_t *m)
{
    const topo_t *topo = m->topo;
    sbuf_t s = {0};
    int ans_up = 0, njobs = 0;
    uint64_t now = now_ms();
    char ep[32], ops[160], dts[200];

    for (int i = 0; i < topo->nswitches; i++)
        ans_up += m->an[i].conn != NULL;
    for (const job_t *j = m->jobs; j; j = j->next)
        njobs++;
    sb_printf(&s,
              "manager listen=%s uptime_ms=%" PRIu64 " ans=%d ans_up=%d "
              "trees=%d hosts=%d jobs=%d groups=%d conns=%d max_conns=%d "
              "conns_unauth=%d conns_accepted=%" PRIu64
              " conns_refused=%" PRIu64 " conns_evicted=%" PRIu64
              " conns_shed=%" PRIu64 " rx_buffered=%" PRIu64
              " frames_late=%" PRIu64 " frames_refused=%" PRIu64
              " auth_failures=%" PRIu64
              " malformed=%" PRIu64 " groups_made=%" PRIu64
              " groups_refused=%" PRIu64 " groups_failed=%" PRIu64
              " groups_released=%" PRIu64 " groups_reclaimed=%" PRIu64
              " groups_adopted=%" PRIu64 "\n",
              m->listen, now - m->start, topo->nswitches, ans_up, topo->ntrees,
              topo->nhosts, njobs, place_group_count(m->pl), m->nconns,
              m->max_conns, m->nunauth, m->ctr.conns_accepted,
              m->ctr.conns_refused, m->ctr.conns_evicted, m->ctr.conns_shed,
              m->rx_reserved, m->ctr.frames_late, m->ctr.frames_refused,
              m->ctr.auth_failures,
              m->ctr.malformed, m->ctr.groups_made, m->ctr.groups_refused,
              m->ctr.groups_failed, m->ctr.groups_released,
              m->ctr.groups_reclaimed, m->ctr.groups_adopted);
    for (int t = 0; t < topo->ntrees; t++) {
        int leaves = 0, sws = 0;
        for (int i = 0; i < topo->nswitches; i++) {
            if (topo->trees[t].parent[i] == -2)
                continue;
            sws++;
            leaves += topo->sw[i].level == 1;
        }
        sb_printf(&s, "tree id=%d root=%s height=%d switches=%d leaves=%d\n",
                  t, topo->sw[topo->trees[t].root].name, topo->trees[t].height,
                  sws, leaves);
    }
    for (int i = 0; i < topo->nswitches; i++) {
        place_an_load_t l;
        const an_state_t *a = &m->an[i];
        double f = 1.0, x;
        place_an_load(m->pl, i, &l);
        x = l.caps.max_groups ? 1.0 - (double)l.groups / l.caps.max_groups : 0;
        f = x < f ? x : f;
        x = l.caps.slots ? 1.0 - (double)l.slots / l.caps.slots : 0;
        f = x < f ? x : f;
        x = l.caps.buffer_bytes
                ? 1.0 - (double)l.buffer_bytes / (double)l.caps.buffer_bytes
                : 0;
        f = x < f ? x : f;
        sb_printf(&s,
                  "an name=%s level=%d addr=%s state=%s groups=%u "
                  "max_groups=%u slots=%" PRIu64 " max_slots=%u buffer=%" PRIu64
                  " max_buffer=%" PRIu64 " free=%.3f payload=%u ops=%s "
                  "dtypes=%s registrations=%u\n",
                  topo->sw[i].name, topo->sw[i].level,
                  a->ep == INCOLL_EP_NONE || a->ep == 0
                      ? "-"
                      : wire_ep_str(a->ep, ep, sizeof(ep)),
                  a->conn ? "up" : "down", l.groups, l.caps.max_groups, l.slots,
                  l.caps.slots, l.buffer_bytes, l.caps.buffer_bytes,
                  f < 0 ? 0 : f, l.caps.max_payload,
                  topo_ops_str(l.caps.ops, ops, sizeof(ops)),
                  topo_dtypes_str(l.caps.dtypes, dts, sizeof(dts)),
                  a->registrations);
        if (a->conn && a->counters[0])
            sb_printf(&s, "counters %s\n", a->counters);
    }
    for (const job_t *j = m->jobs; j; j = j->next) {
        int cnt[6] = {0}, ng = 0;
        for (int r = 0; r < j->size; r++)
            cnt[j->ranks[r].state]++;
        for (int i = 0; i < place_group_count(m->pl); i++)
            ng += ((const mgroup_t *)place_group_at(m->pl, i)->user)->job == j;
        sb_printf(&s,
                  "job name=%s size=%d up=%d lost=%d left=%d adopted=%d "
                  "dead=%d groups=%d\n",
                  j->name, j->size, cnt[R_UP], cnt[R_LOST], cnt[R_LEFT],
                  cnt[R_ADOPTED], cnt[R_DEAD], ng);
        for (int r = 0; r < j->size; r++) {
            const rank_t *rk = &j->ranks[r];
            if (rk->state == R_UP || rk->state == R_NONE)
                continue;
            sb_printf(&s, "rank job=%s rank=%d state=%s\n", j->name, r,
                      rank_state_names[rk->state]);
        }
    }
    for (int i = 0; i < place_group_count(m->pl); i++) {
        const place_group_t *g = place_group_at(m->pl, i);
        const mgroup_t *mg = g->user;
        sb_printf(&s,
                  "group id=%u job=%s comm=%016" PRIx64 " gen=%u members=%d "
                  "tree=%s slots=%u payload=%u state=%s ans=",
                  g->id, mg->job->name, mg->comm, mg->gen, g->nmembers,
                  topo->sw[topo->trees[g->tree].root].name, g->slots,
                  g->payload,
                  mg->active ? (mg->adopted ? "adopted" : "active") : "adding");
        for (int k = 0; k < g->nans; k++)
            sb_printf(&s, "%s%s", k ? "," : "", topo->sw[g->ans[k].sw].name);
        sb_printf(&s, "\n");
    }
    for (const pending_t *p = m->pend; p; p = p->next)
        sb_printf(&s,
                  "request job=%s comm=%016" PRIx64 " gen=%u members=%d "
                  "asked=%d\n",
                  p->job->name, p->comm, p->gen, p->n, p->nasked);
    return s.buf;
}

static void on_stat(mgr_t *m, conn_t *c)
{
    char *text = mgr_stat_text(m);
    mgr_wbuf_t w = {0};
    if (text == NULL) {
        send_error(m, c, 0, INCOLL_ERR_NO_MEMORY, "out of memory");
        return;
    }
    mgr_w_text(&w, text, strlen(text));
    free(text);
    send_msg(m, c, MGR_STAT_REP, &w);
    mgr_wbuf_free(&w);
}

/* ---- dispatch ---- */

static void on_frame(mgr_t *m, conn_t *c, uint16_t type, const uint8_t *body,
                     size_t len)
{
    int role = c->st.role;

    if (type == MGR_BYE) {
        c->bye = 1;
        conn_kill(m, c, "goodbye");
        return;
    }
    if (role == MGR_ROLE_AN) {
        if (type == MGR_AN_REGISTER) {
            on_an_register(m, c, body, len);
            return;
        }
        if (c->an < 0) {
            m->ctr.malformed++;
            conn_kill(m, c, "an message before an_register");
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
        if (type == MGR_JOIN)
            on_join(m, c, body, len);
        else if (type == MGR_GROUP_REQ)
            on_group_req(m, c, body, len);
        else if (type == MGR_GROUP_RELEASE)
            on_group_release(m, c, body, len);
        else if (type == MGR_STAT_REQ)
            on_stat(m, c);
        else
            goto unexpected;
        return;
    }
    if (role == MGR_ROLE_TOOL && type == MGR_STAT_REQ) {
        on_stat(m, c);
        return;
    }
unexpected:
    m->ctr.malformed++;
    incoll_warn("conn %u (%s): unexpected %s (type 0x%x) from a role %d "
                "peer",
                c->id, c->peer, mgr_msg_name(type), type, role);
    send_error(m, c, 0, INCOLL_ERR_PROTOCOL, "unexpected message type 0x%x",
               type);
}

/* The largest frame a peer of this role has any use for. */
static size_t role_max_frame(int role)
{
    if (role == MGR_ROLE_TOOL)
        return TOOL_MAX_FRAME;
    if (role == MGR_ROLE_HOST)
        return HOST_MAX_FRAME;
    return MGR_MAX_FRAME;
}

/*
 * After c's frames were taken out: starts the deadline of a frame in
 * progress (began is 1 when it began in this read) and charges its
 * announced size to the budgets, closing c when they cannot take it.
 * Gives back the buffer of a frame that is done. Returns -1 when c was
 * closed.
 */
static int conn_account(mgr_t *m, conn_t *c, int began)
{
    size_t frame, have = mgr_stream_partial(&c->st, &frame);
    uint64_t want = frame > have ? frame : have;
    job_t *j = c->job;
    char why[256];

    mgr_stream_trim(&c->st);
    if (have == 0 || c->st.state != MGR_ST_READY) {
        c->partial_since = 0;
        conn_charge(m, c, 0, NULL);
        return 0;
    }
    if (began || c->partial_since == 0)
        c->partial_since = now_ms();
    if (want == c->reserved)
        return 0;
    conn_charge(m, c, 0, NULL);
    why[0] = '\0';
    if (m->rx_reserved + want > m->p.rx_budget)
        snprintf(why, sizeof(why),
                 "frame of %" PRIu64 " bytes refused: partial frames hold "
                 "%" PRIu64 " of the manager's %" PRIu64 " bytes",
                 want, m->rx_reserved, m->p.rx_budget);
    else if (j && j->rx_reserved + want > m->p.job_rx_budget)
        snprintf(why, sizeof(why),
                 "frame of %" PRIu64 " bytes refused: partial frames hold "
                 "%" PRIu64 " of job %s's %" PRIu64 " bytes",
                 want, j->rx_reserved, j->name, m->p.job_rx_budget);
    if (why[0]) {
        m->ctr.frames_refused++;
        rate_warn(&m->rl_frame, "conn %u (%s): %s", c->id, c->peer, why);
        conn_kill(m, c, why);
        return -1;
    }
    conn_charge(m, c, want, j);
    return 0;
}

static void on_readable(mgr_t *m, conn_t *c)
{
    const char *why = NULL;
    int closed = mgr_stream_read(&c->st, &why) != 0;
    const char *close_why = why;
    int frames = 0;

    /* Frames that arrived before an end of stream still count. */
    for (;;) {
        uint16_t type;
        const uint8_t *body;
        size_t len;
        mgr_next_t r = mgr_stream_next(&c->st, &type, &body, &len, &why);
        if (r == MGR_NEXT_NONE)
            break;
        if (r == MGR_NEXT_ERROR) {
            if (c->st.role == 0 || strstr(why, "proof"))
                m->ctr.auth_failures++;
            else
                m->ctr.malformed++;
            if (strstr(why, "over the limit"))
                m->ctr.frames_refused++;
            rate_warn(&m->rl_conn, "conn %u (%s): rejected: %s", c->id,
                      c->peer, why);
            conn_kill(m, c, why);
            return;
        }
        frames++;
        if (r == MGR_NEXT_READY) {
            c->deadline = 0;
            if (c->unauth) {
                c->unauth = 0;
                m->nunauth--;
                if (m->listen_resting)
                    m->listen_resume = 0;
            }
            c->st.max_frame = role_max_frame(c->st.role);
            if (c->st.role == MGR_ROLE_TOOL)
                c->st.tx_limit = TOOL_TX_LIMIT;
            else if (c->st.role == MGR_ROLE_HOST)
                c->st.tx_limit = HOST_TX_LIMIT;
            incoll_debug("conn %u (%s): authenticated as role %d", c->id,
                         c->peer, c->st.role);
            continue;
        }
        on_frame(m, c, type, body, len);
        if (c->dead)
            return;
    }
    if (!closed && conn_account(m, c, frames > 0) != 0)
        return;
    if (mgr_stream_flush(&c->st) != 0) {
        conn_kill(m, c, "send failed");
        return;
    }
    conn_watch_out(m, c);
    if (closed)
        conn_kill(m, c, close_why);
}

/* Takes the listener out of the epoll set for ms (0: until a connection
 * goes or authenticates), so a full house does not wake the loop. */
static void listener_rest(mgr_t *m, uint64_t ms)
{
    if (!m->listen_resting) {
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, m->lfd, NULL);
        m->listen_resting = 1;
    }
    m->listen_resume = now_ms() + ms;
}

static void listener_wake(mgr_t *m)
{
    struct epoll_event ev;
    if (!m->listen_resting || now_ms() < m->listen_resume)
        return;
    ev.events = EPOLLIN;
    ev.data.ptr = &m->lfd;
    if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->lfd, &ev) != 0) {
        rate_warn(&m->rl_accept, "listener: epoll_ctl: %s", strerror(errno));
        m->listen_resume = now_ms() + LISTEN_REST_MS;
        return;
    }
    m->listen_resting = 0;
}

/*
 * Makes room for one more connection when the manager is at its bound of
 * connections or of unauthenticated ones: evicts the oldest
 * unauthenticated connection if it has had EVICT_MS to authenticate.
 * Returns 1 when there is room, else 0 with *wait_p the ms until there may
 * be (0: until a connection goes).
 */
static int make_room(mgr_t *m, uint64_t *wait_p)
{
    uint64_t now = now_ms();
    conn_t *oldest = NULL;
    uint32_t evict_ms = m->p.auth_ms < EVICT_MS ? m->p.auth_ms : EVICT_MS;

    if (m->nconns < m->max_conns && m->nunauth < m->max_unauth)
        return 1;
    /* The list runs newest first. */
    for (conn_t *c = m->conns; c; c = c->next)
        if (c->unauth)
            oldest = c;
    if (oldest == NULL) {
        rate_warn(&m->rl_accept,
                  "at the limit of %d connections (RLIMIT_NOFILE); new ones "
                  "wait in the listen queue",
                  m->max_conns);
        *wait_p = 0;
        return 0;
    }
    if (now < oldest->accepted + evict_ms) {
        *wait_p = oldest->accepted + evict_ms - now;
        return 0;
    }
    m->ctr.conns_evicted++;
    rate_warn(&m->rl_conn,
              "conn %u (%s): evicted after %" PRIu64 " ms without "
              "authenticating: %d of %d connections, %d of %d "
              "unauthenticated",
              oldest->id, oldest->peer, now - oldest->accepted, m->nconns,
              m->max_conns, m->nunauth, m->max_unauth);
    conn_kill(m, oldest, "evicted: unauthenticated for too long while the "
                         "manager is full");
    return 1;
}

/* accept() ran out of descriptors: accepts the newest connection on the
 * spare descriptor and closes it, so the listener does not stay readable
 * for nothing, and rests the listener a moment. */
static void shed_one(mgr_t *m, int err)
{
    /* Descriptors went elsewhere, or the limit was lowered under us: take
     * what there is as the bound, so evictions make room from now on. */
    if (m->nconns < m->max_conns) {
        m->max_conns = m->nconns > MIN_CONNS ? m->nconns : MIN_CONNS;
        m->max_unauth = m->max_conns / 2;
        incoll_warn("accept: %s: from now on at most %d connections, %d of "
                    "them unauthenticated",
                    strerror(err), m->max_conns, m->max_unauth);
    }
    if (m->spare_fd >= 0) {
        int fd;
        close(m->spare_fd);
        m->spare_fd = -1;
        fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            m->ctr.conns_shed++;
            m->ctr.conns_refused++;
        }
        m->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    rate_warn(&m->rl_accept,
              "accept: %s with %d connections open; shedding the newest and "
              "resting the listener for %d ms",
              strerror(err), m->nconns, LISTEN_REST_MS);
    listener_rest(m, LISTEN_REST_MS);
}

static void on_accept(mgr_t *m)
{
    for (;;) {
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        int fd;
        conn_t *c;
        struct epoll_event ev;
        int one = 1;
        char ip[INET_ADDRSTRLEN];
        uint64_t wait = 0;

        if (!make_room(m, &wait)) {
            listener_rest(m, wait ? wait : 60000);
            return;
        }
        fd = accept4(m->lfd, (struct sockaddr *)&sa, &sl,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EMFILE || errno == ENFILE) {
                shed_one(m, errno);
                return;
            }
            rate_warn(&m->rl_accept, "accept: %s; resting the listener for "
                                     "%d ms",
                      strerror(errno), LISTEN_REST_MS);
            listener_rest(m, LISTEN_REST_MS);
            return;
        }
        m->ctr.conns_accepted++;
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->id = ++m->next_conn_id;
        c->an = -1;
        c->peer_ip = ntohl(sa.sin_addr.s_addr);
        inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "%s:%u", ip,
                 (unsigned)ntohs(sa.sin_port));
        c->accepted = now_ms();
        c->deadline = c->accepted + m->p.auth_ms;
        if (mgr_stream_init(&c->st, fd, 1, 0, m->p.key) != INCOLL_OK) {
            mgr_stream_close(&c->st);
            free(c);
            continue;
        }
        /* Handshake frames are small: so is the buffer until then. */
        c->st.max_frame = MGR_MAX_HS_FRAME;
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            mgr_stream_close(&c->st);
            free(c);
            continue;
        }
        c->next = m->conns;
        m->conns = c;
        m->nconns++;
        c->unauth = 1;
        m->nunauth++;
        if (mgr_stream_flush(&c->st) != 0)
            conn_kill(m, c, "cannot send hello");
        else
            conn_watch_out(m, c);
    }
}

/* ---- timers ---- */

static void on_tick(mgr_t *m)
{
    uint64_t now = now_ms();
    int nlate = 0;
    conn_t **late = malloc((size_t)(m->nconns + 1) * sizeof(*late));

    /* Collect first: killing one connection may kill others (an AN's
     * failure is told to members, whose connections may be broken). */
    for (conn_t *c = m->conns; late && c; c = c->next)
        if (((c->st.state != MGR_ST_READY || c->an >= 0) && c->deadline &&
             now > c->deadline) ||
            (c->partial_since && now > c->partial_since + m->p.frame_ms))
            late[nlate++] = c;
    for (int i = 0; i < nlate; i++) {
        conn_t *c = late[i];
        if (c->dead)
            continue;
        if (c->st.state != MGR_ST_READY) {
            m->ctr.auth_failures++;
            rate_warn(&m->rl_conn, "conn %u (%s): no authentication within "
                                   "%u ms",
                      c->id, c->peer, m->p.auth_ms);
            conn_kill(m, c, "authentication timeout");
        } else if (c->partial_since &&
                   now > c->partial_since + m->p.frame_ms) {
            size_t frame, have = mgr_stream_partial(&c->st, &frame);
            char why[160];
            m->ctr.frames_late++;
            snprintf(why, sizeof(why),
                     "frame incomplete after %u ms (%zu of %zu bytes)",
                     m->p.frame_ms, have, frame);
            if (c->job)
                rate_warn(&m->rl_frame, "conn %u (%s, job %s rank %d): "
                                        "closed: %s",
                          c->id, c->peer, c->job->name, c->rank, why);
            else
                rate_warn(&m->rl_frame, "conn %u (%s, role %d): closed: %s",
                          c->id, c->peer, c->st.role, why);
            conn_kill(m, c, why);
        } else {
            conn_kill(m, c, "heartbeats missed");
        }
    }
    free(late);
    /* Say what the rate limits left out once a quiet interval passed. */
    {
        ratelog_t *rls[] = {&m->rl_accept, &m->rl_conn, &m->rl_frame};
        for (int i = 0; i < 3; i++) {
            ratelog_t *rl = rls[i];
            if (rl->suppressed && now >= rl->window + RATE_MS) {
                incoll_warn("%" PRIu64 " more %s in the last %d s",
                            rl->suppressed, rl->what, RATE_MS / 1000);
                rl->suppressed = 0;
                rl->window = now;
                rl->used = 0;
            }
        }
    }
    for (job_t *j = m->jobs; j; j = j->next) {
        for (int r = 0; r < j->size; r++) {
            rank_t *rk = &j->ranks[r];
            job_rank_t jr = {j, r};
            char reason[160];
            if ((rk->state != R_LOST && rk->state != R_ADOPTED) ||
                now < rk->deadline)
                continue;
            snprintf(reason, sizeof(reason), "rank %d of job %s is gone", r,
                     j->name);
            incoll_info("job %s rank %d: gone for good (%s); reclaiming "
                        "its groups",
                        j->name, r, rank_state_names[rk->state]);
            rk->state = R_DEAD;
            teardown_where(m, pred_has_rank, &jr, reason,
                           &m->ctr.groups_reclaimed);
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
                    send_error(m, p->who[i], p->reqid[i], INCOLL_ERR_TIMEOUT,
                               "only %d of %d members asked for the group",
                               p->nasked, p->n);
            pending_unlink(m, p);
            pending_free(p);
        }
    }
    {
        int n = place_group_count(m->pl), k = 0;
        uint32_t *overdue = malloc((size_t)(n + 1) * sizeof(*overdue));
        for (int i = 0; overdue && i < n; i++) {
            const place_group_t *g = place_group_at(m->pl, i);
            const mgroup_t *mg = g->user;
            if ((!mg->active || mg->adopted) && mg->deadline && now > mg->deadline) {
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
                group_teardown(m, g, ((mgroup_t *)g->user)->active
                                         ? "not every an came back"
                                         : "an an did not acknowledge it");
                m->ctr.groups_failed++;
            }
        }
        free(overdue);
    }
    job_gc(m);
}

/* ---- life cycle ---- */

mgr_t *mgr_create(const mgr_params_t *params, char *err, size_t errlen)
{
    mgr_t *m = calloc(1, sizeof(*m));
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    uint32_t ip;
    uint16_t port;
    int one = 1;
    struct epoll_event ev;

    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    m->p = *params;
    m->topo = params->topo;
    m->lfd = -1;
    m->epfd = -1;
    m->spare_fd = -1;
    m->rl_accept = (ratelog_t){"accept warnings", 1, 0, 0, 0};
    m->rl_conn = (ratelog_t){"connection warnings", 10, 0, 0, 0};
    m->rl_frame = (ratelog_t){"frame warnings", 10, 0, 0, 0};
    if (m->p.frame_ms == 0)
        m->p.frame_ms = 10000;
    {
        /* Connections get what the descriptor limit leaves. */
        struct rlimit rl;
        uint64_t n = MAX_CONNS;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            n = rl.rlim_cur > FD_RESERVE + MIN_CONNS ? rl.rlim_cur - FD_RESERVE
                                                     : MIN_CONNS;
        m->max_conns = n < MAX_CONNS ? (int)n : MAX_CONNS;
        m->max_unauth = m->max_conns / 2;
    }
    m->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    m->start = now_ms();
    m->boot_id = fabric_random64();
    snprintf(m->listen, sizeof(m->listen), "%s", params->listen);
    if (m->p.tick_ms == 0)
        m->p.tick_ms = 100;
    m->an = calloc((size_t)m->topo->nswitches, sizeof(*m->an));
    /* Group ids start at a random point so a restarted manager rarely
     * meets ids of groups it has not heard of yet. */
    if (m->p.place.first_id == 0 || m->p.place.first_id == 256)
        m->p.place.first_id = 256 + (uint32_t)(fabric_random64() % 0x40000000u);
    m->pl = place_create(m->topo, &m->p.place);
    if (m->an == NULL || m->pl == NULL) {
        snprintf(err, errlen, "out of memory");
        goto err;
    }
    for (int i = 0; i < m->topo->nswitches; i++)
        m->an[i].ep = m->topo->sw[i].addr;
    if (mgr_parse_addr(params->listen, &ip, &port) != INCOLL_OK) {
        snprintf(err, errlen, "listen address '%s' is not IP:PORT",
                 params->listen);
        goto err;
    }
    m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (m->lfd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        goto err;
    }
    setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port);
    if (bind(m->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(m->lfd, 512) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", params->listen,
                 strerror(errno));
        goto err;
    }
    getsockname(m->lfd, (struct sockaddr *)&sa, &sl);
    m->port = ntohs(sa.sin_port);
    {
        struct in_addr in = {.s_addr = htonl(ip)};
        char ipbuf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &in, ipbuf, sizeof(ipbuf));
        snprintf(m->listen, sizeof(m->listen), "%s:%u", ipbuf, m->port);
    }
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (m->epfd < 0) {
        snprintf(err, errlen, "epoll_create1: %s", strerror(errno));
        goto err;
    }
    ev.events = EPOLLIN;
    ev.data.ptr = &m->lfd;
    if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->lfd, &ev) != 0) {
        snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
        goto err;
    }
    if (m->p.stop_fd >= 0) {
        ev.events = EPOLLIN;
        ev.data.ptr = &m->p.stop_fd;
        if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->p.stop_fd, &ev) != 0) {
            snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
            goto err;
        }
    }
    return m;
err:
    mgr_destroy(m);
    return NULL;
}

static void bury(mgr_t *m)
{
    while (m->graveyard) {
        conn_t *c = m->graveyard;
        m->graveyard = c->next;
        free(c);
    }
}

int mgr_run(mgr_t *m)
{
    uint64_t next_tick = now_ms() + m->p.tick_ms;

    incoll_info("listening on %s: %d switches, %d trees, %d hosts; at most "
                "%d connections, %d of them unauthenticated",
                m->listen, m->topo->nswitches, m->topo->ntrees,
                m->topo->nhosts, m->max_conns, m->max_unauth);
    for (;;) {
        struct epoll_event ev[64];
        uint64_t now = now_ms(), due = next_tick;
        int timeout, n;
        if (m->listen_resting && m->listen_resume < due)
            due = m->listen_resume;
        timeout = due > now ? (int)(due - now) : 0;
        n = epoll_wait(m->epfd, ev, 64, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            incoll_error("epoll_wait: %s", strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++) {
            void *ptr = ev[i].data.ptr;
            if (ptr == &m->lfd) {
                on_accept(m);
            } else if (ptr == &m->p.stop_fd) {
                incoll_info("stopping");
                return 0;
            } else {
                conn_t *c = ptr;
                if (c->dead)
                    continue;
                if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                    on_readable(m, c);
                if (!c->dead && (ev[i].events & EPOLLOUT)) {
                    if (mgr_stream_flush(&c->st) != 0)
                        conn_kill(m, c, "send failed");
                    else
                        conn_watch_out(m, c);
                }
            }
        }
        bury(m);
        now = now_ms();
        if (now >= next_tick) {
            on_tick(m);
            bury(m);
            next_tick = now + m->p.tick_ms;
        }
        listener_wake(m);
    }
}

void mgr_destroy(mgr_t *m)
{
    if (m == NULL)
        return;
    while (m->conns) {
        conn_t *c = m->conns;
        m->conns = c->next;
        mgr_stream_close(&c->st);
        free(c);
    }
    bury(m);
    while (m->pend) {
        pending_t *p = m->pend;
        m->pend = p->next;
        pending_free(p);
    }
    if (m->pl) {
        for (int i = 0; i < place_group_count(m->pl); i++)
            mgroup_free(place_group_at(m->pl, i)->user);
        place_destroy(m->pl);
    }
    while (m->jobs) {
        job_t *j = m->jobs;
        m->jobs = j->next;
        free(j->ranks);
        free(j);
    }
    if (m->lfd >= 0)
        close(m->lfd);
    if (m->epfd >= 0)
        close(m->epfd);
    if (m->spare_fd >= 0)
        close(m->spare_fd);
    free(m->an);
    free(m);
}
