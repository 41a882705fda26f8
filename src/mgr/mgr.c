/*
 * The manager daemon's event loop around its state machine (mgr_core.h):
 * the listener, connections and their authenticated streams, the bounds
 * that keep hostile clients from exhausting descriptors and memory, and
 * the clock. Everything the manager decides about ANs, jobs and groups is
 * in mgr_core.c; this file only moves bytes and time into it and its
 * messages out. See mgr.h and docs/manager.md.
 */
#include "mgr/mgr.h"

#include "common/settings.h"

#include "common/clock.h"
#include "common/fabric_conf.h"
#include "common/hashtab.h"
#include "common/log.h"
#include "mgr/mgr_core.h"
#include "mgr/mgr_http.h"

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
#define FD_RESERVE 16 /* descriptors kept for everything but connections */
#define MIN_CONNS 8
#define ACCEPT_BATCH 128   /* connections accepted per loop turn */
#define LISTEN_REST_MS 100 /* out of descriptors: rest the listener */
#define MAX_OVER 16        /* addresses over their share, tracked */
#define EVICT_RATE 4000    /* evictions a second, at most, on average */
#define EVICT_BURST 512    /* ... and in a burst */
#define RATE_MS 10000      /* hostile-traffic warnings: a burst per interval */
#define TOOL_MAX_FRAME (64u << 10)
#define HOST_MAX_FRAME (2u << 20)
#define TOOL_TX_LIMIT (8u << 20) /* queued to a peer that does not read */
#define HOST_TX_LIMIT (16u << 20)

typedef struct conn {
    mgr_stream_t st;
    uint32_t id;
    char peer[32];
    uint32_t peer_ip;
    int dead;
    int unauth; /* counted in mgr.nunauth, in the lists below */
    struct conn *u_prev, *u_next; /* unauthenticated, oldest first */
    struct conn *s_prev, *s_next; /* ... of the same address */
    uint64_t txq;                 /* bytes queued to it, counted in tx_queued */
    int watching_out;             /* EPOLLOUT armed */
    uint64_t accepted;            /* when */
    uint64_t partial_since;       /* the frame in progress began, or 0 */
    uint64_t reserved;            /* bytes of it, charged to the budgets */
    uint64_t *res_job;            /* the job's counter charged too, or NULL */
    uint64_t deadline; /* authentication deadline, 0 once authenticated */
    mgr_peer_t *core;  /* the core's peer, once authenticated */
    struct conn *next;
} conn_t;

/* The unauthenticated connections of one address, oldest first (an entry
 * of the open-addressing table mgr.src). */
typedef struct {
    uint32_t ip;
    int count; /* 0: a free entry */
    conn_t *head, *tail;
} src_t;

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
    mgr_core_t *core;
    int lfd;
    int epfd;
    uint16_t port;
    char listen[64];
    conn_t *conns;
    int nconns;
    int nunauth;
    int max_conns; /* from RLIMIT_NOFILE */
    int max_unauth;
    int src_share;           /* unauthenticated ones an address may hold
                                before its own are evicted first */
    conn_t *u_head, *u_tail; /* unauthenticated, oldest first */
    src_t *src;              /* per address, cap a power of two */
    uint32_t src_cap;
    uint32_t over[MAX_OVER]; /* addresses holding more than src_share */
    int nover;
    uint64_t tx_queued;    /* bytes queued to every peer */
    double evict_tokens;   /* evictions allowed now (a token bucket) */
    uint64_t evict_refill; /* ms of the last refill */
    mgr_http_t *http;
    int spare_fd;           /* /dev/null, given up to shed a connection */
    int listen_resting;     /* the listener is out of the epoll set */
    uint64_t listen_resume; /* until then */
    uint64_t rx_reserved;   /* partial frames of every connection */
    ratelog_t rl_accept, rl_conn, rl_frame;
    conn_t *graveyard;
    uint32_t next_conn_id;
    struct {
        uint64_t conns_accepted;
        uint64_t conns_refused;
        uint64_t conns_evicted;
        uint64_t conns_shed;
        uint64_t conns_slow;
        uint64_t conns_timed_out;
        uint64_t frames_late;
        uint64_t frames_refused;
        uint64_t auth_failures;
        uint64_t malformed;
    } ctr;
};

/* A setting's number: the table's default, or (env) its current value
 * (the environment's when set). Durations in nanoseconds. */
static uint64_t setting_num(setting_id_t id, int env)
{
    int64_t v = env ? setting_int(id) : setting_default(id).i;
    return v < 0 ? 0 : (uint64_t)v;
}

/* The one map from the INCOLL_MGR_ settings to the parameters. */
static void params_from_settings(mgr_params_t *p, int env)
{
    const uint64_t ms = 1000000;
    p->heartbeat_ms =
        (uint32_t)(setting_num(SETTING_MGR_HEARTBEAT_MS, env) / ms);
    p->host_grace_ms =
        (uint32_t)(setting_num(SETTING_MGR_HOST_GRACE_MS, env) / ms);
    p->adopt_grace_ms =
        (uint32_t)(setting_num(SETTING_MGR_ADOPT_GRACE_MS, env) / ms);
    p->recover_ms = (uint32_t)(setting_num(SETTING_MGR_RECOVER_MS, env) / ms);
    p->request_ms = (uint32_t)(setting_num(SETTING_MGR_REQUEST_MS, env) / ms);
    p->auth_ms = (uint32_t)(setting_num(SETTING_MGR_AUTH_MS, env) / ms);
    p->peer_timeout_ms =
        (uint32_t)(setting_num(SETTING_MGR_PEER_TIMEOUT_MS, env) / ms);
    p->frame_ms = (uint32_t)(setting_num(SETTING_MGR_FRAME_MS, env) / ms);
    p->rx_budget = setting_num(SETTING_MGR_RX_BUDGET, env);
    p->job_rx_budget = setting_num(SETTING_MGR_JOB_RX_BUDGET, env);
    p->tx_budget = setting_num(SETTING_MGR_TX_BUDGET, env);
    p->state_budget = setting_num(SETTING_MGR_STATE_BUDGET, env);
    p->job_state_budget = setting_num(SETTING_MGR_JOB_STATE_BUDGET, env);
    p->job_linger_ms =
        (uint32_t)(setting_num(SETTING_MGR_JOB_LINGER_MS, env) / ms);
    p->job_share = env ? setting_real(SETTING_MGR_JOB_SHARE)
                       : setting_default(SETTING_MGR_JOB_SHARE).d;
    p->registered_only = setting_num(SETTING_MGR_JOBS, env) == 1;
    p->metrics = env ? setting_str(SETTING_MGR_METRICS) : NULL;
    p->place.default_slots = (uint32_t)setting_num(SETTING_MGR_SLOTS, env);
    p->place.min_slots = (uint32_t)setting_num(SETTING_MGR_MIN_SLOTS, env);
    p->place.prune = setting_num(SETTING_MGR_PRUNE, env) != 0;
}

void mgr_params_default(mgr_params_t *p)
{
    memset(p, 0, sizeof(*p));
    place_params_default(&p->place);
    params_from_settings(p, 0);
    p->listen = "127.0.0.1:0";
    p->tick_ms = 100;
    p->stop_fd = -1;
}

void mgr_params_from_env(mgr_params_t *p)
{
    params_from_settings(p, 1);
}

uint16_t mgr_port(const mgr_t *m)
{
    return m->port;
}

uint16_t mgr_metrics_port(const mgr_t *m)
{
    return m->http ? mgr_http_port(m->http) : 0;
}

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

/* ---- unauthenticated connections, by age and by address ---- */

/* The table of source addresses (src/common/hashtab.h): a fixed number
 * of slots, more than twice the unauthenticated connections allowed; an
 * empty slot has count 0. */
static uint64_t src_hash(const void *rec, const void *arg)
{
    (void)arg;
    return ((const src_t *)rec)->ip * 2654435761u;
}

static int src_empty(const void *rec)
{
    return ((const src_t *)rec)->count == 0;
}

static void src_clear(void *rec)
{
    ((src_t *)rec)->count = 0;
}

static int src_eq(const void *rec, const void *key)
{
    return ((const src_t *)rec)->ip == *(const uint32_t *)key;
}

static hashtab_t src_tab(mgr_t *m)
{
    return (hashtab_t){.slots = m->src,
                       .esz = sizeof(src_t),
                       .cap = m->src_cap,
                       .hash = src_hash,
                       .empty = src_empty,
                       .clear = src_clear};
}

/* The entry of ip, or the free one where it would go. */
static src_t *src_slot(mgr_t *m, uint32_t ip)
{
    hashtab_t t = src_tab(m);
    src_t key = {.ip = ip};
    return hashtab_slot(&t, src_hash(&key, NULL), src_eq, &ip);
}

/* Frees entry e of the table (the entries after it that would no longer
 * be found move up). */
static void src_delete(mgr_t *m, src_t *e)
{
    hashtab_t t = src_tab(m);
    t.n = 1;
    hashtab_delete(&t, e);
}

static void over_add(mgr_t *m, uint32_t ip)
{
    for (int i = 0; i < m->nover; i++)
        if (m->over[i] == ip)
            return;
    if (m->nover < MAX_OVER)
        m->over[m->nover++] = ip;
}

static void over_del(mgr_t *m, uint32_t ip)
{
    for (int i = 0; i < m->nover; i++) {
        if (m->over[i] == ip) {
            m->over[i] = m->over[--m->nover];
            return;
        }
    }
}

/* c has not authenticated yet: the newest of all and of its address. */
static void unauth_add(mgr_t *m, conn_t *c)
{
    src_t *e = src_slot(m, c->peer_ip);
    c->unauth = 1;
    m->nunauth++;
    c->u_prev = m->u_tail;
    c->u_next = NULL;
    if (m->u_tail)
        m->u_tail->u_next = c;
    else
        m->u_head = c;
    m->u_tail = c;
    if (e->count == 0) {
        e->ip = c->peer_ip;
        e->head = e->tail = NULL;
    }
    c->s_prev = e->tail;
    c->s_next = NULL;
    if (e->tail)
        e->tail->s_next = c;
    else
        e->head = c;
    e->tail = c;
    if (++e->count == m->src_share + 1)
        over_add(m, c->peer_ip);
}

/* c authenticated or is closing. */
static void unauth_del(mgr_t *m, conn_t *c)
{
    src_t *e;
    if (!c->unauth)
        return;
    c->unauth = 0;
    m->nunauth--;
    if (c->u_prev)
        c->u_prev->u_next = c->u_next;
    else
        m->u_head = c->u_next;
    if (c->u_next)
        c->u_next->u_prev = c->u_prev;
    else
        m->u_tail = c->u_prev;
    e = src_slot(m, c->peer_ip);
    if (e->count == 0)
        return; /* cannot happen: it was counted */
    if (c->s_prev)
        c->s_prev->s_next = c->s_next;
    else
        e->head = c->s_next;
    if (c->s_next)
        c->s_next->s_prev = c->s_prev;
    else
        e->tail = c->s_prev;
    if (--e->count == m->src_share)
        over_del(m, e->ip);
    if (e->count == 0)
        src_delete(m, e);
}

/* Sets the share of an address from the bound of unauthenticated
 * connections, and the addresses over it (after the bound changed). */
static void set_share(mgr_t *m)
{
    m->src_share = m->max_unauth / 8 > 2 ? m->max_unauth / 8 : 2;
    m->nover = 0;
    for (uint32_t i = 0; m->src && i < m->src_cap; i++)
        if (m->src[i].count > m->src_share)
            over_add(m, m->src[i].ip);
}

/*
 * The unauthenticated connection a newcomer replaces: the oldest of the
 * address holding the most of them when it holds more than its share,
 * else the oldest of all. An address flooding the manager thus only
 * pushes out its own connections, and the handshakes of everybody else
 * (a host starting several ranks at once too) go through.
 */
static conn_t *pick_victim(mgr_t *m)
{
    src_t *big = NULL;
    for (int i = 0; i < m->nover; i++) {
        src_t *e = src_slot(m, m->over[i]);
        if (e->count <= m->src_share || e->head == NULL)
            continue;
        if (big == NULL || e->count > big->count ||
            (e->count == big->count && e->head->accepted < big->head->accepted))
            big = e;
    }
    return big ? big->head : m->u_head;
}

/* ---- connections ---- */

/* Counts what is queued to c in tx_queued. */
static void conn_tx_note(mgr_t *m, conn_t *c)
{
    uint64_t q = c->dead || c->st.fd < 0 ? 0 : mgr_stream_pending(&c->st);
    m->tx_queued = m->tx_queued - c->txq + q;
    c->txq = q;
    if (q == 0)
        mgr_stream_trim_tx(&c->st);
}

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

/* Charges what c buffers of a frame in progress to the budgets, in place
 * of what it had. */
static void conn_charge(mgr_t *m, conn_t *c, uint64_t bytes, uint64_t *job)
{
    m->rx_reserved -= c->reserved;
    if (c->res_job)
        *c->res_job -= c->reserved;
    c->reserved = bytes;
    c->res_job = bytes ? job : NULL;
    m->rx_reserved += bytes;
    if (c->res_job)
        *c->res_job += bytes;
}

static void conn_log_close(const conn_t *c, const char *why)
{
    const char *job;
    int rank;
    if (mgr_core_peer_job(c->core, &job, &rank))
        incoll_debug("conn %u (%s, job %s rank %d) closed: %s", c->id, c->peer,
                     job, rank, why);
    else
        incoll_debug("conn %u (%s) closed: %s", c->id, c->peer, why);
}

/* Closes c's socket and moves it to the graveyard; the core is told by the
 * caller (or asked for it). */
static void conn_close(mgr_t *m, conn_t *c, const char *why)
{
    c->dead = 1;
    conn_charge(m, c, 0, NULL);
    unauth_del(m, c);
    /* A freed descriptor may be what the listener waits for. */
    if (m->listen_resting)
        m->listen_resume = 0;
    conn_log_close(c, why);
    epoll_ctl(m->epfd, EPOLL_CTL_DEL, c->st.fd, NULL);
    /* Let queued frames (an auth_fail, an error) leave if they can. */
    mgr_stream_flush(&c->st);
    mgr_stream_close(&c->st);
    conn_tx_note(m, c);
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

/* The loop closes a connection (a socket error, a timeout, a bound): the
 * core hears of it after the socket is gone. */
static void conn_kill(mgr_t *m, conn_t *c, const char *why)
{
    mgr_peer_t *peer = c->core;
    if (c->dead)
        return;
    conn_close(m, c, why);
    if (peer)
        mgr_core_peer_closed(m->core, peer, why, now_ms());
}

/* Sending to c failed: closes it, counting a peer that stopped answering
 * (peer_timeout()). */
static void conn_send_failed(mgr_t *m, conn_t *c)
{
    if (errno == ETIMEDOUT)
        m->ctr.conns_timed_out++;
    conn_kill(m, c, "send failed");
}

/* ---- the core's callbacks ---- */

/* Queues a message; a peer that stopped reading is dropped. */
static void core_send(void *arg, void *user, uint16_t type, const void *body,
                      size_t len)
{
    mgr_t *m = arg;
    conn_t *c = user;
    incoll_status_t status;
    if (c->dead)
        return;
    status = mgr_stream_send(&c->st, type, body, len);
    if (status != INCOLL_OK) {
        conn_kill(m, c,
                  status == INCOLL_ERR_BUSY ? "peer does not read"
                                            : "cannot queue a message");
        return;
    }
    if (mgr_stream_flush(&c->st) != 0) {
        conn_send_failed(m, c);
        return;
    }
    conn_tx_note(m, c);
    conn_watch_out(m, c);
}

static void core_close(void *arg, void *user, const char *why)
{
    conn_t *c = user;
    if (!c->dead)
        conn_close(arg, c, why);
}

static void core_io_stats(void *arg, mgr_io_stats_t *s)
{
    const mgr_t *m = arg;
    s->conns = m->nconns;
    s->max_conns = m->max_conns;
    s->conns_unauth = m->nunauth;
    s->conns_accepted = m->ctr.conns_accepted;
    s->conns_refused = m->ctr.conns_refused;
    s->conns_evicted = m->ctr.conns_evicted;
    s->conns_shed = m->ctr.conns_shed;
    s->rx_buffered = m->rx_reserved;
    s->tx_queued = m->tx_queued;
    s->conns_slow = m->ctr.conns_slow;
    s->conns_timed_out = m->ctr.conns_timed_out;
    s->frames_late = m->ctr.frames_late;
    s->frames_refused = m->ctr.frames_refused;
    s->auth_failures = m->ctr.auth_failures;
    s->malformed = m->ctr.malformed;
}

char *mgr_stat_text(const mgr_t *m)
{
    return mgr_core_stat_text(m->core, now_ms());
}

/* ---- reading ---- */

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
    const char *job = NULL;
    uint64_t *jbytes = mgr_core_peer_job(c->core, &job, NULL);
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
    else if (jbytes && *jbytes + want > m->p.job_rx_budget)
        snprintf(why, sizeof(why),
                 "frame of %" PRIu64 " bytes refused: partial frames hold "
                 "%" PRIu64 " of job %s's %" PRIu64 " bytes",
                 want, *jbytes, job, m->p.job_rx_budget);
    if (why[0]) {
        m->ctr.frames_refused++;
        rate_warn(&m->rl_frame, "conn %u (%s): %s", c->id, c->peer, why);
        conn_kill(m, c, why);
        return -1;
    }
    conn_charge(m, c, want, jbytes);
    return 0;
}

/*
 * A peer whose machine dies or is cut off sends no FIN: without probes
 * its connection would sit idle for ever and its job's groups with it
 * (the connection's end is what starts INCOLL_MGR_HOST_GRACE_MS). TCP
 * keepalive probes an idle connection from half the timeout on, three
 * times in the other half, and TCP_USER_TIMEOUT closes one whose data or
 * probes stay unanswered for the timeout; a live peer's kernel answers
 * the probes, whatever its process does.
 */
static void peer_timeout(int fd, uint32_t ms)
{
    int on = 1, idle = (int)(ms / 2000), intvl = (int)(ms / 6000), cnt = 3;
    unsigned tmo = ms;
    if (idle < 1)
        idle = 1;
    if (intvl < 1)
        intvl = 1;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &tmo, sizeof(tmo));
}

static void on_readable(mgr_t *m, conn_t *c)
{
    const char *why = NULL;
    int closed = mgr_stream_read(&c->st, &why) != 0;
    const char *close_why = why;
    int frames = 0;

    /* The peer stopped answering (peer_timeout()). */
    if (closed && why && strcmp(why, strerror(ETIMEDOUT)) == 0)
        m->ctr.conns_timed_out++;

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
            rate_warn(&m->rl_conn, "conn %u (%s): rejected: %s", c->id, c->peer,
                      why);
            conn_kill(m, c, why);
            return;
        }
        frames++;
        if (r == MGR_NEXT_READY) {
            c->deadline = 0;
            if (c->unauth) {
                unauth_del(m, c);
                if (m->listen_resting)
                    m->listen_resume = 0;
            }
            /* Probed from now on; until now the handshake's deadline
             * bounds it (and a flood costs no more system calls). */
            peer_timeout(c->st.fd, m->p.peer_timeout_ms);
            c->st.max_frame = role_max_frame(c->st.role);
            if (c->st.role == MGR_ROLE_TOOL)
                c->st.tx_limit = TOOL_TX_LIMIT;
            else if (c->st.role == MGR_ROLE_HOST)
                c->st.tx_limit = HOST_TX_LIMIT;
            incoll_debug("conn %u (%s): authenticated as role %d", c->id,
                         c->peer, c->st.role);
            c->core = mgr_core_peer_open(m->core, c, c->id, c->st.role,
                                         c->peer_ip, c->peer, now_ms());
            if (c->core == NULL) {
                conn_kill(m, c, "out of memory");
                return;
            }
            continue;
        }
        mgr_core_frame(m->core, c->core, type, body, len, now_ms());
        if (c->dead)
            return;
    }
    if (!closed && conn_account(m, c, frames > 0) != 0)
        return;
    if (mgr_stream_flush(&c->st) != 0) {
        conn_send_failed(m, c);
        return;
    }
    conn_tx_note(m, c);
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
 * connections or of unauthenticated ones: a connection that has not
 * authenticated gives its place (pick_victim), after what it sent is read
 * (it may be the handshake that lets it stay). Evictions are paced
 * (EVICT_RATE a second, EVICT_BURST at once): a client that reopens its
 * connections as soon as they are closed cannot make the manager spin,
 * and newcomers wait meanwhile in the listen queue, which drains at that
 * pace. Returns 1 when there is room, else 0 with *wait_p the ms until
 * there may be (0: until a connection goes, every one having
 * authenticated).
 */
static int make_room(mgr_t *m, uint64_t *wait_p)
{
    for (int tries = 0; tries < 16; tries++) {
        uint64_t now = now_ms();
        conn_t *v;
        if (m->nconns < m->max_conns && m->nunauth < m->max_unauth)
            return 1;
        if (m->nunauth == 0) {
            rate_warn(&m->rl_accept,
                      "at the limit of %d connections (RLIMIT_NOFILE), all "
                      "authenticated; new ones wait in the listen queue",
                      m->max_conns);
            *wait_p = 0;
            return 0;
        }
        m->evict_tokens += (double)(now - m->evict_refill) * EVICT_RATE / 1000;
        if (m->evict_tokens > EVICT_BURST)
            m->evict_tokens = EVICT_BURST;
        m->evict_refill = now;
        if (m->evict_tokens < 1) {
            *wait_p = (uint64_t)((1 - m->evict_tokens) * 1000 / EVICT_RATE) + 1;
            return 0;
        }
        v = pick_victim(m);
        on_readable(m, v);
        if (v->dead || !v->unauth)
            continue; /* it went, or it authenticated: look again */
        m->evict_tokens -= 1;
        m->ctr.conns_evicted++;
        rate_warn(&m->rl_conn,
                  "conn %u (%s): evicted after %" PRIu64 " ms without "
                  "authenticating: %d of %d connections, %d of %d "
                  "unauthenticated",
                  v->id, v->peer, now - v->accepted, m->nconns, m->max_conns,
                  m->nunauth, m->max_unauth);
        conn_kill(m, v, "evicted: not authenticated while the manager is full");
    }
    *wait_p = 1;
    return m->nconns < m->max_conns && m->nunauth < m->max_unauth;
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
        set_share(m);
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
    /* A batch per loop turn: the listener stays readable, and the
     * connections that are in get served between batches. */
    for (int batch = 0; batch < ACCEPT_BATCH; batch++) {
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
            rate_warn(&m->rl_accept,
                      "accept: %s; resting the listener for "
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
        if (m->p.has_admin_key)
            c->st.admin_key = m->p.admin_key;
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
        unauth_add(m, c);
        if (mgr_stream_flush(&c->st) != 0) {
            conn_kill(m, c, "cannot send hello");
        } else {
            conn_tx_note(m, c);
            conn_watch_out(m, c);
        }
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
        if ((c->st.state != MGR_ST_READY && c->deadline && now > c->deadline) ||
            (c->partial_since && now > c->partial_since + m->p.frame_ms))
            late[nlate++] = c;
    for (int i = 0; i < nlate; i++) {
        conn_t *c = late[i];
        if (c->dead)
            continue;
        if (c->st.state != MGR_ST_READY) {
            m->ctr.auth_failures++;
            rate_warn(&m->rl_conn,
                      "conn %u (%s): no authentication within "
                      "%u ms",
                      c->id, c->peer, m->p.auth_ms);
            conn_kill(m, c, "authentication timeout");
        } else {
            size_t frame, have = mgr_stream_partial(&c->st, &frame);
            const char *job;
            int rank;
            char why[160];
            m->ctr.frames_late++;
            snprintf(why, sizeof(why),
                     "frame incomplete after %u ms (%zu of %zu bytes)",
                     m->p.frame_ms, have, frame);
            if (mgr_core_peer_job(c->core, &job, &rank))
                rate_warn(&m->rl_frame,
                          "conn %u (%s, job %s rank %d): "
                          "closed: %s",
                          c->id, c->peer, job, rank, why);
            else
                rate_warn(&m->rl_frame, "conn %u (%s, role %d): closed: %s",
                          c->id, c->peer, c->st.role, why);
            conn_kill(m, c, why);
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
    /* A heartbeat already in an AN's socket is not a missed one: a loop
     * kept busy (a flood of connections) reads them before the core looks
     * at the deadlines. */
    {
        int nan = 0;
        conn_t **ans = malloc((size_t)(m->nconns + 1) * sizeof(*ans));
        for (conn_t *c = m->conns; ans && c; c = c->next)
            if (!c->dead && c->core && c->st.role == MGR_ROLE_AN)
                ans[nan++] = c;
        for (int i = 0; i < nan; i++)
            if (!ans[i]->dead)
                on_readable(m, ans[i]);
        free(ans);
    }
    mgr_core_tick(m->core, now_ms());
}

/* Closes the connections holding the most of what is queued to peers,
 * while the send budget is exceeded: a peer that does not read cannot
 * grow the manager (checked after every loop turn). */
static void tx_shed(mgr_t *m)
{
    while (m->p.tx_budget && m->tx_queued > m->p.tx_budget) {
        conn_t *big = NULL;
        char why[160];
        for (conn_t *c = m->conns; c; c = c->next)
            if (!c->dead && (big == NULL || c->txq > big->txq))
                big = c;
        if (big == NULL || big->txq == 0)
            return;
        m->ctr.conns_slow++;
        snprintf(why, sizeof(why),
                 "peer does not read: %" PRIu64 " bytes queued to it, the "
                 "most of any, with the send budget of %" PRIu64 " full",
                 big->txq, m->p.tx_budget);
        rate_warn(&m->rl_conn, "conn %u (%s): closed: %s", big->id, big->peer,
                  why);
        conn_kill(m, big, why);
    }
}

/* The metrics page, for the HTTP endpoint. */
static char *http_page(void *arg, int om)
{
    mgr_t *m = arg;
    return mgr_core_metrics_text(m->core, now_ms(), om);
}

/* ---- life cycle ---- */

/* The listening socket on ip:port; m->port and m->listen say where it
 * listens. 0, or -1 with err said. */
static int listen_open(mgr_t *m, uint32_t ip, uint16_t port, char *err,
                       size_t errlen)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int one = 1;

    m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (m->lfd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port);
    if (bind(m->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(m->lfd, SOMAXCONN) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", m->p.listen,
                 strerror(errno));
        return -1;
    }
    getsockname(m->lfd, (struct sockaddr *)&sa, &sl);
    m->port = ntohs(sa.sin_port);
    {
        struct in_addr in = {.s_addr = htonl(ip)};
        char ipbuf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &in, ipbuf, sizeof(ipbuf));
        snprintf(m->listen, sizeof(m->listen), "%s:%u", ipbuf, m->port);
    }
    return 0;
}

/* The manager's core (src/mgr/mgr_core.c) with m's parameters and
 * callbacks. 0, or -1 with err said. */
static int core_start(mgr_t *m, char *err, size_t errlen)
{
    mgr_core_params_t cp;

    memset(&cp, 0, sizeof(cp));
    cp.topo = m->topo;
    cp.listen = m->listen;
    cp.heartbeat_ms = m->p.heartbeat_ms;
    cp.host_grace_ms = m->p.host_grace_ms;
    cp.adopt_grace_ms = m->p.adopt_grace_ms;
    cp.recover_ms = m->p.recover_ms;
    cp.request_ms = m->p.request_ms;
    cp.boot_id = fabric_random64();
    cp.place = m->p.place;
    cp.job_share = m->p.job_share;
    cp.registered_only = m->p.registered_only;
    cp.job_linger_ms = m->p.job_linger_ms;
    cp.state_budget = m->p.state_budget;
    cp.job_state_budget = m->p.job_state_budget;
    cp.tune_text = m->p.tune_text;
    cp.tune_source = m->p.tune_source;
    {
        /* Generations follow the wall clock in ms (mod 2^32), as
         * `incoll run`'s: a later job's is newer. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        cp.gen_base = (uint32_t)((uint64_t)ts.tv_sec * 1000 +
                                 (uint64_t)ts.tv_nsec / 1000000);
    }
    /* Group ids start at a random point so a restarted manager rarely
     * meets ids of groups it has not heard of yet. */
    if (cp.place.first_id == 0 || cp.place.first_id == 256)
        cp.place.first_id = 256 + (uint32_t)(fabric_random64() % 0x40000000u);
    cp.send = core_send;
    cp.close = core_close;
    cp.io_stats = core_io_stats;
    cp.arg = m;
    m->core = mgr_core_create(&cp, now_ms(), err, errlen);
    if (m->core == NULL)
        return -1;
    return 0;
}

mgr_t *mgr_create(const mgr_params_t *params, char *err, size_t errlen)
{
    mgr_t *m = calloc(1, sizeof(*m));
    uint32_t ip;
    uint16_t port;
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
    if (m->p.peer_timeout_ms == 0)
        m->p.peer_timeout_ms = 15000;
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
    m->src_cap = 16;
    while (m->src_cap < 2 * (uint32_t)m->max_unauth + 2)
        m->src_cap *= 2;
    m->src = calloc(m->src_cap, sizeof(*m->src));
    m->evict_tokens = EVICT_BURST;
    m->evict_refill = now_ms();
    if (m->src == NULL) {
        snprintf(err, errlen, "out of memory");
        goto err;
    }
    set_share(m);
    m->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    snprintf(m->listen, sizeof(m->listen), "%s", params->listen);
    if (m->p.tick_ms == 0)
        m->p.tick_ms = 100;
    if (mgr_parse_addr(params->listen, &ip, &port) != INCOLL_OK) {
        snprintf(err, errlen, "listen address '%s' is not IP:PORT",
                 params->listen);
        goto err;
    }
    if (listen_open(m, ip, port, err, errlen) != 0 ||
        core_start(m, err, errlen) != 0)
        goto err;
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
    if (m->p.metrics && m->p.metrics[0]) {
        m->http = mgr_http_start(m->p.metrics, http_page, m, err, errlen);
        if (m->http == NULL)
            goto err;
        ev.events = EPOLLIN;
        ev.data.ptr = &m->http;
        if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, mgr_http_fd(m->http), &ev) != 0) {
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
                m->listen, m->topo->nswitches, m->topo->ntrees, m->topo->nhosts,
                m->max_conns, m->max_unauth);
    if (m->http)
        incoll_info("metrics at http://%s/metrics (port %u)", m->p.metrics,
                    (unsigned)mgr_http_port(m->http));
    for (;;) {
        struct epoll_event ev[64];
        uint64_t now = now_ms(), due = next_tick;
        int timeout, n;
        if (m->listen_resting && m->listen_resume < due)
            due = m->listen_resume;
        timeout = due > now ? (int)(due - now) : 0;
        if (m->http) {
            uint64_t t = mgr_http_timeout_ms(m->http);
            if (t != UINT64_MAX && (uint64_t)timeout > t)
                timeout = (int)t;
        }
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
            } else if (ptr == &m->http) {
                mgr_http_run(m->http);
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
                    if (mgr_stream_flush(&c->st) != 0) {
                        conn_send_failed(m, c);
                    } else {
                        conn_tx_note(m, c);
                        conn_watch_out(m, c);
                    }
                }
            }
        }
        if (m->http && mgr_http_timeout_ms(m->http) == 0)
            mgr_http_run(m->http);
        tx_shed(m);
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
    mgr_http_stop(m->http);
    mgr_core_destroy(m->core);
    free(m->src);
    if (m->lfd >= 0)
        close(m->lfd);
    if (m->epfd >= 0)
        close(m->epfd);
    if (m->spare_fd >= 0)
        close(m->spare_fd);
    free(m);
}
