/*
 * The host library's link to the manager; see mgr_client.h.
 */
#include "host/mgr_client.h"

#include "common/log.h"
#include "common/clock.h"
#include "common/settings.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct answer {
    uint32_t req;
    host_mgr_group_t g;
    struct answer *next;
} answer_t;

/* A request whose answer has not come: resent after a reconnection. */
typedef struct outreq {
    uint32_t req;
    uint8_t *body;
    size_t len;
    struct outreq *next;
} outreq_t;

typedef struct failure {
    uint32_t group;
    uint64_t comm;
    uint32_t gen;
    char reason[200];
    struct failure *next;
} failure_t;

struct host_mgr {
    char addr[256];
    char job[MGR_NAME_MAX];
    char host[MGR_NAME_MAX];
    int rank;
    int size;
    incoll_ep_t ep;
    uint32_t timeout_ms;
    uint32_t retry_ms;
    uint32_t retry_first;
    uint8_t key[MGR_KEY_LEN];
    mgr_stream_t st;
    int up;               /* authenticated and joined */
    int auth_failed;      /* the last attempt failed the handshake */
    uint64_t hs_deadline; /* connecting: give up at this time */
    uint64_t next_try;
    uint32_t next_req;
    uint64_t boot_id;
    answer_t *answers;
    outreq_t *out;
    failure_t *failures;
    failure_t **failures_tail;
    int pc_refused;        /* it refused our process counters: not sent again */
    char *tune_text;       /* the manager's selection table (MGR_TUNE) */
    char tune_source[256]; /* where the manager read it */
    mgr_group_shape_t shape; /* the last MGR_GROUP_SHAPE, for its req */
};

void host_mgr_group_free(host_mgr_group_t *g)
{
    free(g->peers);
    g->peers = NULL;
}

int host_mgr_fd(const host_mgr_t *m)
{
    return m->st.fd;
}

uint64_t host_mgr_deadline_ms(const host_mgr_t *m)
{
    if (m->st.fd < 0)
        return m->next_try;
    if (!m->up)
        return m->hs_deadline;
    return UINT64_MAX;
}

int host_mgr_want_write(const host_mgr_t *m)
{
    return m->st.fd >= 0 && mgr_stream_pending(&m->st) > 0;
}

static void drop_conn(host_mgr_t *m, const char *why)
{
    if (m->st.fd >= 0) {
        if (m->up)
            incoll_warn("manager %s: connection lost: %s; reconnecting",
                        m->addr, why);
        mgr_stream_close(&m->st);
    }
    m->st.fd = -1;
    m->up = 0;
    m->next_try = now_ms() + m->retry_ms;
    m->retry_ms = m->retry_ms * 2 > 2000 ? 2000 : m->retry_ms * 2;
}

static void add_answer(host_mgr_t *m, uint32_t req, host_mgr_group_t *g)
{
    answer_t *a;
    outreq_t **po;
    for (po = &m->out; *po; po = &(*po)->next) {
        if ((*po)->req == req) {
            outreq_t *o = *po;
            *po = o->next;
            free(o->body);
            free(o);
            break;
        }
    }
    if ((a = calloc(1, sizeof(*a))) == NULL) {
        host_mgr_group_free(g);
        return;
    }
    a->req = req;
    a->g = *g;
    a->next = m->answers;
    m->answers = a;
}

static int waiting_for(const host_mgr_t *m, uint32_t req)
{
    for (const outreq_t *o = m->out; o; o = o->next)
        if (o->req == req)
            return 1;
    return 0;
}

/* Each kind of message from the manager: 0, or -1 when the link must be
 * dropped (a malformed message, a refused join). */
static int on_join_ok(host_mgr_t *m, const uint8_t *body, size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    m->boot_id = mgr_r_u64(&r);
    mgr_r_u32(&r);
    if (mgr_r_done(&r)) {
        incoll_warn("manager %s: malformed join_ok", m->addr);
        return -1;
    }
    m->up = 1;
    m->retry_ms = m->retry_first;
    incoll_debug("manager %s: joined as job %s rank %d/%d", m->addr, m->job,
                 m->rank, m->size);
    for (outreq_t *o = m->out; o; o = o->next)
        if (mgr_stream_send(&m->st, MGR_GROUP_REQ, o->body, o->len) !=
            INCOLL_OK)
            return -1;
    return 0;
}

/* The fabric's selection table, before any group's answer. */
static int on_tune(host_mgr_t *m, const uint8_t *body, size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint16_t format = mgr_r_u16(&r);
    char source[256];
    const char *text;
    size_t n = 0;
    if (format != MGR_TUNE_FORMAT) {
        incoll_warn("manager %s: its selection table is of format %u, "
                    "this libincoll reads format %u: not used (update "
                    "libincoll, or name the table with INCOLL_TUNE_FILE)",
                    m->addr, (unsigned)format, (unsigned)MGR_TUNE_FORMAT);
        return 0;
    }
    mgr_r_str(&r, source, sizeof(source));
    text = mgr_r_text(&r, MGR_TUNE_MAX, &n);
    if (text == NULL || mgr_r_done(&r) || memchr(text, '\0', n)) {
        incoll_warn("manager %s: malformed tune", m->addr);
        return -1;
    }
    free(m->tune_text);
    m->tune_text = malloc(n + 1);
    if (m->tune_text == NULL)
        return 0;
    memcpy(m->tune_text, text, n);
    m->tune_text[n] = '\0';
    snprintf(m->tune_source, sizeof(m->tune_source), "%s", source);
    return 0;
}

static int on_group_shape(host_mgr_t *m, const uint8_t *body, size_t len)
{
    const char *why = NULL;
    incoll_status_t st = mgr_dec_group_shape(body, len, &m->shape, &why);
    if (st == INCOLL_ERR_UNSUPPORTED) {
        /* another format: the shape stays unknown */
        memset(&m->shape, 0, sizeof(m->shape));
        return 0;
    }
    if (st != INCOLL_OK) {
        incoll_warn("manager %s: malformed group_shape: %s", m->addr, why);
        return -1;
    }
    return 0;
}

/* A group's answer: the request's, with the shape that came before it. */
static int on_group_info(host_mgr_t *m, const uint8_t *body, size_t len)
{
    const char *why = NULL;
    mgr_group_info_t gi;
    host_mgr_group_t g;
    if (mgr_dec_group_info(body, len, &gi, &why) != INCOLL_OK) {
        incoll_warn("manager %s: malformed group_info: %s", m->addr, why);
        return -1;
    }
    if (!waiting_for(m, gi.req)) {
        memset(&m->shape, 0, sizeof(m->shape));
        return 0;
    }
    memset(&g, 0, sizeof(g));
    if (m->shape.req == gi.req && m->shape.format == MGR_SHAPE_FORMAT) {
        g.hosts = m->shape.hosts;
        g.ppn = m->shape.ppn;
        g.radix = m->shape.radix;
        g.levels = m->shape.levels;
    }
    memset(&m->shape, 0, sizeof(m->shape));
    g.status = (incoll_status_t)gi.status;
    snprintf(g.reason, sizeof(g.reason), "%s", gi.reason);
    g.group = gi.group;
    g.key = gi.key;
    g.child = gi.child;
    g.an = gi.an;
    g.mcast = gi.mcast;
    g.slots = gi.slots;
    g.payload = gi.payload;
    g.ops = gi.ops;
    g.dtypes = gi.dtypes;
    g.opseq_min = gi.opseq_min;
    g.opseq_max = gi.opseq_max;
    g.nmembers = (int)gi.nmembers;
    g.peers = malloc(gi.nmembers * sizeof(incoll_ep_t));
    if (g.peers == NULL) {
        g.status = INCOLL_ERR_NO_MEMORY;
        snprintf(g.reason, sizeof(g.reason), "out of memory");
    } else {
        for (uint32_t i = 0; i < gi.nmembers; i++)
            g.peers[i] = mgr_get_u64(gi.peers, i);
    }
    add_answer(m, gi.req, &g);
    return 0;
}

/* An error: a request's answer, a refused process report or join. */
static int on_error(host_mgr_t *m, const uint8_t *body, size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    host_mgr_group_t g;
    uint32_t req = mgr_r_u32(&r);
    memset(&g, 0, sizeof(g));
    g.status = (incoll_status_t)(int32_t)mgr_r_u32(&r);
    mgr_r_str(&r, g.reason, sizeof(g.reason));
    if (mgr_r_done(&r) || g.status >= 0) {
        incoll_warn("manager %s: malformed error message", m->addr);
        return -1;
    }
    if (req != 0 && waiting_for(m, req)) {
        add_answer(m, req, &g);
    } else if (req == 0 && (strstr(g.reason, "usage_proc") ||
                            strstr(g.reason, "type 0x27"))) {
        /* An older manager (it does not know the message) or one that
         * reads another version of it: said once, not sent again. */
        m->pc_refused = 1;
        incoll_warn("manager %s does not take this library's process "
                    "counters (%s): they are not reported to it; the "
                    "rest of the usage report is",
                    m->addr, g.reason);
    } else {
        incoll_warn("manager %s: %s (%s)", m->addr, g.reason,
                    incoll_status_string(g.status));
        if (!m->up)
            return -1; /* the join was refused */
    }
    return 0;
}

/* A group failed: queued for host_mgr_read's callback. */
static int on_group_failed(host_mgr_t *m, const uint8_t *body, size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    failure_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return 0;
    f->group = mgr_r_u32(&r);
    f->comm = mgr_r_u64(&r);
    f->gen = mgr_r_u32(&r);
    mgr_r_str(&r, f->reason, sizeof(f->reason));
    if (mgr_r_done(&r)) {
        free(f);
        incoll_warn("manager %s: malformed group_failed", m->addr);
        return -1;
    }
    *m->failures_tail = f;
    m->failures_tail = &f->next;
    return 0;
}

/* Handles one application frame. Returns -1 when the connection must go. */
static int on_frame(host_mgr_t *m, uint16_t type, const uint8_t *body,
                    size_t len)
{
    switch (type) {
    case MGR_JOIN_OK:
        return on_join_ok(m, body, len);
    case MGR_TUNE:
        return on_tune(m, body, len);
    case MGR_GROUP_SHAPE:
        return on_group_shape(m, body, len);
    case MGR_GROUP_INFO:
        return on_group_info(m, body, len);
    case MGR_ERROR:
        return on_error(m, body, len);
    case MGR_GROUP_FAILED:
        return on_group_failed(m, body, len);
    default:
        incoll_debug("manager %s: ignoring %s", m->addr, mgr_msg_name(type));
        return 0;
    }
}

/* Reads and handles what is there. Returns -1 when the connection broke. */
static int pump(host_mgr_t *m)
{
    const char *why = NULL;
    int closed = mgr_stream_read(&m->st, &why) != 0;
    const char *close_why = why;

    for (;;) {
        uint16_t type;
        const uint8_t *body;
        size_t len;
        mgr_next_t r = mgr_stream_next(&m->st, &type, &body, &len, &why);
        if (r == MGR_NEXT_NONE)
            break;
        if (r == MGR_NEXT_ERROR) {
            if (m->st.state != MGR_ST_READY || strstr(why, "secret"))
                m->auth_failed = 1;
            incoll_error("manager %s: %s", m->addr, why);
            drop_conn(m, why);
            return -1;
        }
        if (r == MGR_NEXT_READY) {
            mgr_join_t jn;
            mgr_wbuf_t w = {0};
            memset(&jn, 0, sizeof(jn));
            snprintf(jn.job, sizeof(jn.job), "%s", m->job);
            jn.rank = m->rank;
            jn.size = m->size;
            snprintf(jn.host, sizeof(jn.host), "%s", m->host);
            jn.ep = m->ep;
            jn.pid = (uint32_t)getpid();
            mgr_enc_join(&w, &jn);
            if (w.oom || mgr_stream_send(&m->st, MGR_JOIN, w.buf, w.len)) {
                mgr_wbuf_free(&w);
                drop_conn(m, "out of memory");
                return -1;
            }
            mgr_wbuf_free(&w);
            continue;
        }
        if (on_frame(m, type, body, len) != 0) {
            drop_conn(m, "protocol error");
            return -1;
        }
    }
    if (mgr_stream_flush(&m->st) != 0) {
        drop_conn(m, "send failed");
        return -1;
    }
    if (closed) {
        drop_conn(m, close_why);
        return -1;
    }
    return 0;
}

/* Starts connecting (without waiting): the handshake and the join run in
 * pump() as the manager answers. */
static incoll_status_t dial_start(host_mgr_t *m)
{
    char err[256];
    int fd = mgr_connect(m->addr, err, sizeof(err));

    m->up = 0;
    m->auth_failed = 0;
    if (fd < 0) {
        incoll_debug("manager: %s", err);
        m->next_try = now_ms() + m->retry_ms;
        return INCOLL_ERR_IO;
    }
    if (mgr_stream_init(&m->st, fd, 0, MGR_ROLE_HOST, m->key) != INCOLL_OK) {
        mgr_stream_close(&m->st);
        m->st.fd = -1;
        m->next_try = now_ms() + m->retry_ms;
        return INCOLL_ERR_UNSUPPORTED;
    }
    m->hs_deadline = now_ms() + m->timeout_ms;
    return INCOLL_OK;
}

incoll_status_t host_mgr_connect(const host_mgr_params_t *p, host_mgr_t **mgr_p)
{
    host_mgr_t *m;
    char err[512];
    incoll_status_t status;

    if (p->addr == NULL || p->job == NULL || p->job[0] == '\0' ||
        strlen(p->job) >= MGR_NAME_MAX ||
        (p->host && strlen(p->host) >= MGR_NAME_MAX) || p->size < 1 ||
        p->rank < 0 || p->rank >= p->size) {
        incoll_error("manager: bad parameters (INCOLL_MGR, INCOLL_JOB of 1..%d "
                     "characters, rank and size)",
                     MGR_NAME_MAX - 1);
        return INCOLL_ERR_CONFIG;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return INCOLL_ERR_NO_MEMORY;
    status = mgr_secret_load(p->secret_file, m->key, err, sizeof(err));
    if (status != INCOLL_OK) {
        incoll_error("manager: %s", err);
        free(m);
        return status == INCOLL_ERR_UNSUPPORTED ? status : INCOLL_ERR_CONFIG;
    }
    snprintf(m->addr, sizeof(m->addr), "%s", p->addr);
    snprintf(m->job, sizeof(m->job), "%s", p->job);
    snprintf(m->host, sizeof(m->host), "%s", p->host ? p->host : "");
    m->rank = p->rank;
    m->size = p->size;
    m->ep = p->ep;
    /* 0: INCOLL_MGR_CONNECT_MS's default (the context passes its own) */
    m->timeout_ms =
        p->timeout_ms
            ? p->timeout_ms
            : (uint32_t)(setting_default(SETTING_MGR_CONNECT_MS).i / 1000000);
    m->retry_ms = p->retry_ms ? p->retry_ms : 250;
    m->st.fd = -1;
    m->failures_tail = &m->failures;
    m->next_try = 0;
    m->retry_first = m->retry_ms;
    /* The manager may be starting: try for the whole timeout. */
    {
        uint64_t deadline = now_ms() + m->timeout_ms;
        status = INCOLL_ERR_TIMEOUT;
        while (!m->up && now_ms() < deadline) {
            struct pollfd pfd = {.fd = m->st.fd, .events = POLLIN};
            uint64_t now = now_ms(), until = host_mgr_deadline_ms(m);
            if (until > deadline)
                until = deadline;
            if (m->st.fd >= 0 && mgr_stream_pending(&m->st))
                pfd.events |= POLLOUT;
            if (poll(&pfd, m->st.fd >= 0 ? 1 : 0,
                     until > now ? (int)(until - now) : 0) < 0 &&
                errno != EINTR)
                break;
            if (host_mgr_read(m, NULL, NULL) != 0 && m->auth_failed) {
                status = INCOLL_ERR_AUTH;
                break;
            }
        }
        if (m->up)
            status = INCOLL_OK;
    }
    if (status != INCOLL_OK) {
        incoll_error("manager %s: cannot join as job %s rank %d: %s", m->addr,
                     m->job, m->rank, incoll_status_string(status));
        host_mgr_close(m);
        return status;
    }
    *mgr_p = m;
    return INCOLL_OK;
}

void host_mgr_close(host_mgr_t *m)
{
    if (m == NULL)
        return;
    if (m->up) {
        mgr_stream_send(&m->st, MGR_BYE, NULL, 0);
        /* Best effort, briefly: the manager copes with a plain close. */
        for (int i = 0; i < 20 && mgr_stream_pending(&m->st); i++) {
            struct pollfd pfd = {.fd = m->st.fd, .events = POLLOUT};
            if (mgr_stream_flush(&m->st) != 0 || poll(&pfd, 1, 5) < 0)
                break;
        }
        mgr_stream_flush(&m->st);
    }
    if (m->st.fd >= 0)
        mgr_stream_close(&m->st);
    while (m->answers) {
        answer_t *a = m->answers;
        m->answers = a->next;
        host_mgr_group_free(&a->g);
        free(a);
    }
    while (m->out) {
        outreq_t *o = m->out;
        m->out = o->next;
        free(o->body);
        free(o);
    }
    while (m->failures) {
        failure_t *f = m->failures;
        m->failures = f->next;
        free(f);
    }
    free(m->tune_text);
    free(m);
}

const char *host_mgr_tune(const host_mgr_t *m, const char **source_p)
{
    if (m == NULL || m->tune_text == NULL)
        return NULL;
    if (source_p)
        *source_p = m->tune_source;
    return m->tune_text;
}

incoll_status_t host_mgr_group_request(host_mgr_t *m, uint64_t comm,
                                       uint32_t gen, const int *world_ranks,
                                       int n, uint64_t opseq, uint32_t slots,
                                       uint32_t payload, uint32_t *req_p)
{
    mgr_group_req_t rq;
    mgr_wbuf_t w = {0}, mem = {0};
    outreq_t *o;

    if (n < 1 || n > MGR_MAX_MEMBERS)
        return INCOLL_ERR_INVALID_ARG;
    for (int i = 0; i < n; i++)
        mgr_w_u32(&mem, (uint32_t)world_ranks[i]);
    memset(&rq, 0, sizeof(rq));
    if (++m->next_req == 0)
        m->next_req = 1;
    rq.req = m->next_req;
    rq.comm = comm;
    rq.gen = gen;
    rq.slots = slots;
    rq.payload = payload;
    rq.opseq = opseq;
    rq.nmembers = (uint32_t)n;
    rq.members = mem.buf;
    mgr_enc_group_req(&w, &rq);
    mgr_wbuf_free(&mem);
    o = calloc(1, sizeof(*o));
    if (w.oom || mem.oom || o == NULL) {
        mgr_wbuf_free(&w);
        free(o);
        return INCOLL_ERR_NO_MEMORY;
    }
    o->req = rq.req;
    o->body = w.buf;
    o->len = w.len;
    o->next = m->out;
    m->out = o;
    if (m->up) {
        if (mgr_stream_send(&m->st, MGR_GROUP_REQ, o->body, o->len) !=
                INCOLL_OK ||
            mgr_stream_flush(&m->st) != 0)
            drop_conn(m, "send failed");
    }
    *req_p = rq.req;
    return INCOLL_OK;
}

int host_mgr_read(host_mgr_t *m, host_mgr_failed_cb_t cb, void *arg)
{
    uint64_t now = now_ms();

    if (m->st.fd < 0) {
        if (now >= m->next_try)
            dial_start(m);
    } else if (!m->up && now >= m->hs_deadline) {
        drop_conn(m, "no answer from the manager");
    } else if (pump(m) == 0 && mgr_stream_flush(&m->st) != 0) {
        drop_conn(m, "send failed");
    }
    while (m->failures) {
        failure_t *f = m->failures;
        m->failures = f->next;
        if (m->failures == NULL)
            m->failures_tail = &m->failures;
        if (cb)
            cb(arg, f->group, f->comm, f->gen, f->reason);
        free(f);
    }
    return m->up ? 0 : -1;
}

int host_mgr_take_answer(host_mgr_t *m, uint32_t req, host_mgr_group_t *g)
{
    for (answer_t **pa = &m->answers; *pa; pa = &(*pa)->next) {
        answer_t *a = *pa;
        if (a->req != req)
            continue;
        *pa = a->next;
        *g = a->g;
        free(a);
        return 1;
    }
    return 0;
}

void host_mgr_forget(host_mgr_t *m, uint32_t req)
{
    host_mgr_group_t g;
    for (outreq_t **po = &m->out; *po; po = &(*po)->next) {
        if ((*po)->req == req) {
            outreq_t *o = *po;
            *po = o->next;
            free(o->body);
            free(o);
            break;
        }
    }
    if (host_mgr_take_answer(m, req, &g))
        host_mgr_group_free(&g);
}

incoll_status_t host_mgr_group_release(host_mgr_t *m, uint64_t comm,
                                       uint32_t group)
{
    mgr_wbuf_t w = {0};
    incoll_status_t status = INCOLL_OK;

    if (!m->up)
        return INCOLL_ERR_IO; /* the manager reclaims it on its own */
    mgr_w_u64(&w, comm);
    mgr_w_u32(&w, group);
    if (w.oom ||
        mgr_stream_send(&m->st, MGR_GROUP_RELEASE, w.buf, w.len) != INCOLL_OK)
        status = INCOLL_ERR_NO_MEMORY;
    else if (mgr_stream_flush(&m->st) != 0)
        drop_conn(m, "send failed");
    mgr_wbuf_free(&w);
    return status;
}

incoll_status_t host_mgr_usage_proc(host_mgr_t *m,
                                    const uint64_t v[MGR_PC_COUNT])
{
    mgr_wbuf_t w = {0};
    incoll_status_t status = INCOLL_OK;

    if (!m->up)
        return INCOLL_ERR_IO;
    if (m->pc_refused)
        return INCOLL_ERR_UNSUPPORTED;
    mgr_enc_usage_proc(&w, v);
    if (w.oom ||
        mgr_stream_send(&m->st, MGR_USAGE_PROC, w.buf, w.len) != INCOLL_OK)
        status = INCOLL_ERR_NO_MEMORY;
    else if (mgr_stream_flush(&m->st) != 0)
        drop_conn(m, "send failed");
    mgr_wbuf_free(&w);
    return status;
}

incoll_status_t host_mgr_usage(host_mgr_t *m, const mgr_usage_entry_t *e,
                               uint16_t n)
{
    mgr_wbuf_t w = {0};
    incoll_status_t status = INCOLL_OK;

    if (!m->up)
        return INCOLL_ERR_IO;
    mgr_enc_usage(&w, e, n);
    if (w.oom || mgr_stream_send(&m->st, MGR_USAGE, w.buf, w.len) != INCOLL_OK)
        status = INCOLL_ERR_NO_MEMORY;
    else if (mgr_stream_flush(&m->st) != 0)
        drop_conn(m, "send failed");
    mgr_wbuf_free(&w);
    return status;
}
