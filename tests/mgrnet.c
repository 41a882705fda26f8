/*
 * The manager core's in-memory control network: see mgrnet.h.
 */
#include "mgrnet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOSTS 512
#define MAX_HELD 64

typedef struct node node_t;

/* One connection between a node and the core. */
typedef struct link {
    node_t *node;
    mgr_peer_t *peer; /* the core's handle while open */
    int open;
    struct link *next;
} link_t;

typedef struct {
    uint32_t id;
    uint64_t key;
    uint8_t *rec;
    size_t rec_len;
} held_t;

struct node {
    int is_an;
    int is_admin;
    int index;
    link_t *link; /* the open connection, or NULL */
    /* AN */
    char name[MGR_NAME_MAX];
    incoll_ep_t ep;
    int alive; /* the process runs */
    int hung;
    int32_t refuse;
    uint64_t reconnect_at; /* 0: no reconnection pending */
    uint64_t next_beat;    /* 0: not beating */
    uint32_t hb_ms;
    uint64_t beat_seq;
    held_t held[MAX_HELD];
    int nheld;
    mgrnet_an_view_t av;
    /* host */
    char job[MGR_NAME_MAX];
    char host[MGR_NAME_MAX];
    int rank, size;
    uint32_t next_req;
    mgrnet_host_view_t hv;
};

typedef struct event {
    uint64_t at;
    uint64_t seq;
    link_t *link;
    int to_core; /* else to the node */
    uint16_t type;
    uint8_t *body;
    size_t len;
    struct event *next;
} event_t;

struct mgrnet {
    mgrnet_cfg_t cfg;
    topo_t topo;
    mgr_core_t *core;
    uint64_t now;
    uint64_t next_tick;
    uint64_t seq;
    uint32_t restarts;
    event_t *q;    /* sorted by (at, seq) */
    link_t *links; /* every link ever made, freed at the end */
    node_t *ans;   /* one per switch */
    node_t hosts[MAX_HOSTS];
    int nhosts;
    char stat[1 << 16]; /* the last stat answer */
};

/* ---- the queue ---- */

static void enqueue(mgrnet_t *net, link_t *l, int to_core, uint16_t type,
                    const void *body, size_t len)
{
    event_t *e = calloc(1, sizeof(*e)), **pe;
    if (e == NULL)
        abort();
    e->at = net->now + net->cfg.delay_ms;
    e->seq = net->seq++;
    e->link = l;
    e->to_core = to_core;
    e->type = type;
    if (len) {
        e->body = malloc(len);
        if (e->body == NULL)
            abort();
        memcpy(e->body, body, len);
    }
    e->len = len;
    for (pe = &net->q; *pe && (*pe)->at <= e->at; pe = &(*pe)->next)
        ;
    e->next = *pe;
    *pe = e;
}

static void node_send(mgrnet_t *net, node_t *n, uint16_t type,
                      const mgr_wbuf_t *w)
{
    if (n->link == NULL || w->oom)
        return;
    enqueue(net, n->link, 1, type, w->buf, w->len);
}

/* ---- the core's callbacks ---- */

static void core_send(void *arg, void *user, uint16_t type, const void *body,
                      size_t len)
{
    link_t *l = user;
    if (l->open)
        enqueue(arg, l, 0, type, body, len);
}

static void node_disconnected(mgrnet_t *net, node_t *n)
{
    n->link = NULL;
    if (n->is_an) {
        n->av.connected = 0;
        n->av.registered = 0;
        n->next_beat = 0;
        if (n->alive)
            n->reconnect_at = net->now + net->cfg.reconnect_ms;
    } else {
        n->hv.connected = 0;
        n->hv.joined = 0;
    }
}

static void core_close(void *arg, void *user, const char *why)
{
    link_t *l = user;
    (void)why;
    if (!l->open)
        return;
    l->open = 0;
    l->peer = NULL;
    if (l->node->link == l)
        node_disconnected(arg, l->node);
}

/* The node's side ends a connection: the core hears of it at once. */
static void link_break(mgrnet_t *net, node_t *n)
{
    link_t *l = n->link;
    if (l == NULL)
        return;
    l->open = 0;
    if (l->peer) {
        mgr_peer_t *p = l->peer;
        l->peer = NULL;
        mgr_core_peer_closed(net->core, p, "connection reset", net->now);
    }
    node_disconnected(net, n);
}

static void link_open(mgrnet_t *net, node_t *n)
{
    link_t *l = calloc(1, sizeof(*l));
    char name[32];
    if (l == NULL)
        abort();
    l->node = n;
    l->open = 1;
    l->next = net->links;
    net->links = l;
    snprintf(name, sizeof(name), "127.0.0.1:%u",
             (unsigned)(n->is_an ? 30000 + n->index : 40000 + n->index));
    l->peer = mgr_core_peer_open(net->core, l, (uint32_t)net->seq++,
                                 n->is_an      ? MGR_ROLE_AN
                                 : n->is_admin ? MGR_ROLE_ADMIN
                                               : MGR_ROLE_HOST,
                                 0x7f000001u, name, net->now);
    if (l->peer == NULL)
        abort();
    n->link = l;
}

/* ---- ANs ---- */

static void an_register(mgrnet_t *net, node_t *a)
{
    mgr_an_register_t reg;
    mgr_wbuf_t gw = {0}, w = {0};
    const topo_caps_t *tc = &net->topo.sw[a->index].caps;

    link_open(net, a);
    a->av.connected = 1;
    memset(&reg, 0, sizeof(reg));
    snprintf(reg.name, sizeof(reg.name), "%s", a->name);
    reg.ep = a->ep;
    reg.caps.ops = tc->ops;
    reg.caps.dtypes = tc->dtypes;
    reg.caps.max_payload = tc->max_payload;
    reg.caps.slots = tc->slots;
    reg.caps.max_groups = tc->max_groups;
    reg.caps.buffer_bytes = tc->buffer_bytes;
    for (int i = 0; i < a->nheld; i++) {
        mgr_an_group_t g = {a->held[i].id, a->held[i].key, a->held[i].rec,
                            a->held[i].rec_len};
        mgr_enc_an_group(&gw, &g);
    }
    reg.ngroups = (uint32_t)a->nheld;
    reg.groups = gw.buf;
    reg.groups_len = gw.len;
    mgr_enc_an_register(&w, &reg);
    node_send(net, a, MGR_AN_REGISTER, &w);
    mgr_wbuf_free(&w);
    mgr_wbuf_free(&gw);
}

static void an_ack(mgrnet_t *net, node_t *a, uint32_t id, uint8_t op,
                   int32_t status)
{
    mgr_wbuf_t w = {0};
    mgr_w_u32(&w, id);
    mgr_w_u8(&w, op);
    mgr_w_u32(&w, (uint32_t)status);
    node_send(net, a, MGR_GROUP_ACK, &w);
    mgr_wbuf_free(&w);
}

static int held_find(const node_t *a, uint32_t id)
{
    for (int i = 0; i < a->nheld; i++)
        if (a->held[i].id == id)
            return i;
    return -1;
}

static void held_drop(node_t *a, int i)
{
    free(a->held[i].rec);
    a->held[i] = a->held[--a->nheld];
}

static void an_receive(mgrnet_t *net, node_t *a, uint16_t type,
                       const uint8_t *body, size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    if (a->hung)
        return;
    switch (type) {
    case MGR_AN_REGISTER_OK:
        a->hb_ms = mgr_r_u32(&r);
        a->av.boot_id = mgr_r_u64(&r);
        a->av.registered = 1;
        a->av.registrations++;
        a->next_beat = net->now + a->hb_ms;
        break;
    case MGR_GROUP_ADD: {
        mgr_group_add_t add;
        const char *why;
        a->av.adds++;
        if (mgr_dec_group_add(body, len, &add, &why) != INCOLL_OK) {
            fprintf(stderr, "    mgrnet: an %s: bad group_add: %s\n", a->name,
                    why);
            break;
        }
        if (a->refuse) {
            an_ack(net, a, add.id, 1, a->refuse);
            a->refuse = 0;
            break;
        }
        if (held_find(a, add.id) < 0 && a->nheld < MAX_HELD) {
            held_t *h = &a->held[a->nheld++];
            h->id = add.id;
            h->key = add.key;
            h->rec = malloc(add.rec_len ? add.rec_len : 1);
            if (h->rec == NULL)
                abort();
            memcpy(h->rec, add.rec, add.rec_len);
            h->rec_len = add.rec_len;
        }
        an_ack(net, a, add.id, 1, INCOLL_OK);
        break;
    }
    case MGR_GROUP_REMOVE: {
        uint32_t id = mgr_r_u32(&r);
        int i = held_find(a, id);
        a->av.removes++;
        if (i >= 0)
            held_drop(a, i);
        an_ack(net, a, id, 2, i >= 0 ? INCOLL_OK : INCOLL_ERR_NOT_FOUND);
        break;
    }
    case MGR_ERROR:
        a->av.errors++;
        break;
    default:
        break;
    }
}

static void an_beat(mgrnet_t *net, node_t *a)
{
    mgr_wbuf_t w = {0};
    char text[64];
    int n = snprintf(text, sizeof(text), "groups=%d", a->nheld);
    mgr_w_u64(&w, ++a->beat_seq);
    mgr_w_u32(&w, (uint32_t)a->nheld);
    mgr_w_text(&w, text, (size_t)n);
    node_send(net, a, MGR_AN_HEARTBEAT, &w);
    mgr_wbuf_free(&w);
}

int mgrnet_an_start(mgrnet_t *net, const char *name)
{
    int sw = topo_find_switch(&net->topo, name);
    node_t *a;
    if (sw < 0)
        return -1;
    a = &net->ans[sw];
    if (a->link)
        link_break(net, a);
    a->alive = 1;
    a->hung = 0;
    a->reconnect_at = 0;
    an_register(net, a);
    return sw;
}

void mgrnet_an_kill(mgrnet_t *net, int an)
{
    node_t *a = &net->ans[an];
    a->alive = 0;
    link_break(net, a);
    while (a->nheld)
        held_drop(a, 0);
    a->reconnect_at = 0;
}

void mgrnet_an_cut(mgrnet_t *net, int an)
{
    link_break(net, &net->ans[an]);
}

void mgrnet_an_hang(mgrnet_t *net, int an, int hung)
{
    node_t *a = &net->ans[an];
    a->hung = hung;
    if (!hung && a->av.registered)
        a->next_beat = net->now + a->hb_ms;
    if (!hung && a->reconnect_at && a->reconnect_at < net->now)
        a->reconnect_at = net->now;
}

void mgrnet_an_refuse(mgrnet_t *net, int an, int32_t status)
{
    net->ans[an].refuse = status;
}

void mgrnet_an_view(const mgrnet_t *net, int an, mgrnet_an_view_t *view)
{
    *view = net->ans[an].av;
    view->ngroups = net->ans[an].nheld;
}

int mgrnet_an_holds(const mgrnet_t *net, int an, uint32_t id)
{
    return held_find(&net->ans[an], id) >= 0;
}

/* ---- hosts ---- */

static void host_receive(mgrnet_t *net, node_t *h, uint16_t type,
                         const uint8_t *body, size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    switch (type) {
    case MGR_JOIN_OK:
        h->hv.boot_id = mgr_r_u64(&r);
        h->hv.joined = 1;
        break;
    case MGR_GROUP_INFO: {
        mgr_group_info_t gi;
        const char *why;
        if (mgr_dec_group_info(body, len, &gi, &why) != INCOLL_OK) {
            h->hv.bad_info++;
            snprintf(h->hv.bad_why, sizeof(h->hv.bad_why), "%s", why);
            break;
        }
        h->hv.answered = 1;
        h->hv.status = gi.status;
        snprintf(h->hv.reason, sizeof(h->hv.reason), "%s", gi.reason);
        h->hv.group = gi.group;
        h->hv.key = gi.key;
        h->hv.child = gi.child;
        h->hv.an = gi.an;
        h->hv.mcast = gi.mcast;
        h->hv.gen = gi.gen;
        break;
    }
    case MGR_GROUP_FAILED:
        h->hv.failed++;
        h->hv.failed_group = mgr_r_u32(&r);
        mgr_r_u64(&r);
        mgr_r_u32(&r);
        mgr_r_str(&r, h->hv.failed_reason, sizeof(h->hv.failed_reason));
        break;
    case MGR_ERROR:
        h->hv.errors++;
        mgr_r_u32(&r);
        h->hv.error_status = (int32_t)mgr_r_u32(&r);
        mgr_r_str(&r, h->hv.error, sizeof(h->hv.error));
        break;
    case MGR_JOB_REGISTER_OK:
        h->hv.reg_ok++;
        h->hv.reg_gen = mgr_r_u32(&r);
        h->hv.reg_groups = mgr_r_u32(&r);
        h->hv.reg_slots = mgr_r_u32(&r);
        break;
    case MGR_JOB_END_OK:
        h->hv.end_ok++;
        h->hv.end_jobs = mgr_r_u32(&r);
        h->hv.end_groups = mgr_r_u32(&r);
        break;
    case MGR_STAT_REP: {
        size_t n = 0;
        const char *t = mgr_r_text(&r, MGR_MAX_FRAME, &n);
        if (t == NULL)
            break;
        if (n >= sizeof(net->stat))
            n = sizeof(net->stat) - 1;
        memcpy(net->stat, t, n);
        net->stat[n] = '\0';
        break;
    }
    default:
        break;
    }
}

int mgrnet_admin_add(mgrnet_t *net)
{
    int a = mgrnet_host_add(net, "", 0, 1, "");
    net->hosts[a].is_admin = 1;
    return a;
}

/* An admin's connection, opened on first use. */
static node_t *admin(mgrnet_t *net, int a)
{
    node_t *h = &net->hosts[a];
    if (h->link == NULL) {
        link_open(net, h);
        h->hv.connected = 1;
    }
    return h;
}

void mgrnet_admin_register(mgrnet_t *net, int a, const char *job,
                           uint32_t groups, uint32_t slots)
{
    mgr_wbuf_t w = {0};
    mgr_w_str(&w, job);
    mgr_w_u32(&w, groups);
    mgr_w_u32(&w, slots);
    mgr_w_u32(&w, 0);
    node_send(net, admin(net, a), MGR_JOB_REGISTER, &w);
    mgr_wbuf_free(&w);
}

void mgrnet_admin_end(mgrnet_t *net, int a, const char *job)
{
    mgr_wbuf_t w = {0};
    mgr_w_str(&w, job);
    mgr_w_str(&w, "test");
    node_send(net, admin(net, a), MGR_JOB_END, &w);
    mgr_wbuf_free(&w);
}

const char *mgrnet_stat_text(const mgrnet_t *net)
{
    return net->stat;
}

void mgrnet_host_set_rank(mgrnet_t *net, int hi, int rank)
{
    net->hosts[hi].rank = rank;
}

void mgrnet_admin_stat(mgrnet_t *net, int a, uint32_t flags)
{
    mgr_wbuf_t w = {0};
    mgr_w_u32(&w, flags);
    node_send(net, admin(net, a), MGR_STAT_REQ, &w);
    mgr_wbuf_free(&w);
}

int mgrnet_host_add(mgrnet_t *net, const char *job, int rank, int size,
                    const char *host)
{
    node_t *h;
    if (net->nhosts >= MAX_HOSTS)
        abort();
    h = &net->hosts[net->nhosts];
    memset(h, 0, sizeof(*h));
    h->index = net->nhosts;
    snprintf(h->job, sizeof(h->job), "%s", job);
    snprintf(h->host, sizeof(h->host), "%s", host);
    h->rank = rank;
    h->size = size;
    h->ep = wire_ep(0x7f000001u, (uint16_t)(50000 + h->index));
    return net->nhosts++;
}

void mgrnet_host_join(mgrnet_t *net, int hi)
{
    node_t *h = &net->hosts[hi];
    mgr_join_t jn;
    mgr_wbuf_t w = {0};
    if (h->link)
        link_break(net, h);
    link_open(net, h);
    h->hv.connected = 1;
    memset(&jn, 0, sizeof(jn));
    snprintf(jn.job, sizeof(jn.job), "%s", h->job);
    snprintf(jn.host, sizeof(jn.host), "%s", h->host);
    jn.rank = h->rank;
    jn.size = h->size;
    jn.ep = h->ep;
    jn.pid = 1000u + (uint32_t)hi;
    mgr_enc_join(&w, &jn);
    node_send(net, h, MGR_JOIN, &w);
    mgr_wbuf_free(&w);
}

void mgrnet_host_request(mgrnet_t *net, int hi, uint64_t comm, uint32_t gen,
                         const int *members, int n)
{
    mgrnet_host_request_slots(net, hi, comm, gen, members, n, 0);
}

void mgrnet_host_request_slots(mgrnet_t *net, int hi, uint64_t comm,
                               uint32_t gen, const int *members, int n,
                               uint32_t slots)
{
    node_t *h = &net->hosts[hi];
    mgr_group_req_t rq;
    mgr_wbuf_t mem = {0}, w = {0};
    for (int i = 0; i < n; i++)
        mgr_w_u32(&mem, (uint32_t)members[i]);
    memset(&rq, 0, sizeof(rq));
    rq.req = ++h->next_req;
    rq.comm = comm;
    rq.gen = gen;
    rq.slots = slots;
    rq.nmembers = (uint32_t)n;
    rq.members = mem.buf;
    mgr_enc_group_req(&w, &rq);
    h->hv.answered = 0;
    h->hv.status = 0;
    h->hv.group = 0;
    node_send(net, h, MGR_GROUP_REQ, &w);
    mgr_wbuf_free(&w);
    mgr_wbuf_free(&mem);
}

void mgrnet_host_release(mgrnet_t *net, int hi, uint64_t comm, uint32_t group)
{
    mgr_wbuf_t w = {0};
    mgr_w_u64(&w, comm);
    mgr_w_u32(&w, group);
    node_send(net, &net->hosts[hi], MGR_GROUP_RELEASE, &w);
    mgr_wbuf_free(&w);
}

void mgrnet_host_send_raw(mgrnet_t *net, int hi, uint16_t type,
                          const void *body, size_t len)
{
    node_t *h = &net->hosts[hi];
    if (h->link)
        enqueue(net, h->link, 1, type, body, len);
}

void mgrnet_host_bye(mgrnet_t *net, int hi)
{
    node_t *h = &net->hosts[hi];
    mgr_wbuf_t w = {0};
    /* The core closes the connection when the goodbye arrives. */
    node_send(net, h, MGR_BYE, &w);
}

void mgrnet_host_crash(mgrnet_t *net, int hi)
{
    link_break(net, &net->hosts[hi]);
}

void mgrnet_host_view(const mgrnet_t *net, int hi, mgrnet_host_view_t *view)
{
    *view = net->hosts[hi].hv;
}

/* ---- the manager ---- */

static int core_make(mgrnet_t *net)
{
    mgr_core_params_t cp;
    char err[256];
    memset(&cp, 0, sizeof(cp));
    cp.topo = &net->topo;
    cp.listen = "memory";
    cp.heartbeat_ms = net->cfg.heartbeat_ms;
    cp.host_grace_ms = net->cfg.host_grace_ms;
    cp.adopt_grace_ms = net->cfg.adopt_grace_ms;
    cp.recover_ms = net->cfg.recover_ms;
    cp.request_ms = net->cfg.request_ms;
    cp.job_share = net->cfg.job_share;
    cp.registered_only = net->cfg.registered_only;
    cp.job_linger_ms = net->cfg.job_linger_ms;
    cp.state_budget = net->cfg.state_budget;
    cp.job_state_budget = net->cfg.job_state_budget;
    cp.gen_base = 1000;
    cp.boot_id = 0x1000u + net->restarts;
    place_params_default(&cp.place);
    cp.place.first_id = 256 + 100000 * net->restarts;
    cp.send = core_send;
    cp.close = core_close;
    cp.arg = net;
    net->core = mgr_core_create(&cp, net->now, err, sizeof(err));
    if (net->core == NULL) {
        fprintf(stderr, "    mgrnet: %s\n", err);
        return -1;
    }
    return 0;
}

mgrnet_t *mgrnet_create(const char *topo_text, const mgrnet_cfg_t *cfg)
{
    mgrnet_t *net = calloc(1, sizeof(*net));
    char err[256];
    if (net == NULL)
        return NULL;
    net->cfg = *cfg;
#define DEF(f, v)                                                              \
    if (net->cfg.f == 0)                                                       \
        net->cfg.f = v;
    DEF(heartbeat_ms, 200)
    DEF(host_grace_ms, 3000)
    DEF(adopt_grace_ms, 30000)
    DEF(recover_ms, 10000)
    DEF(request_ms, 30000)
    DEF(tick_ms, 100)
    DEF(delay_ms, 1)
    DEF(reconnect_ms, 500)
#undef DEF
    if (topo_parse(topo_text, "mgrnet.topo", &net->topo, err, sizeof(err)) !=
        INCOLL_OK) {
        fprintf(stderr, "    mgrnet: %s\n", err);
        free(net);
        return NULL;
    }
    net->ans = calloc((size_t)net->topo.nswitches, sizeof(*net->ans));
    if (net->ans == NULL || core_make(net) != 0) {
        free(net->ans);
        topo_free(&net->topo);
        free(net);
        return NULL;
    }
    for (int i = 0; i < net->topo.nswitches; i++) {
        node_t *a = &net->ans[i];
        a->is_an = 1;
        a->index = i;
        snprintf(a->name, sizeof(a->name), "%s", net->topo.sw[i].name);
        a->ep = net->topo.sw[i].addr != INCOLL_EP_NONE
                    ? net->topo.sw[i].addr
                    : wire_ep(0x7f000001u, (uint16_t)(41000 + i));
    }
    net->next_tick = net->cfg.tick_ms;
    return net;
}

static void drop_queue(mgrnet_t *net)
{
    while (net->q) {
        event_t *e = net->q;
        net->q = e->next;
        free(e->body);
        free(e);
    }
}

void mgrnet_destroy(mgrnet_t *net)
{
    if (net == NULL)
        return;
    mgr_core_destroy(net->core);
    drop_queue(net);
    while (net->links) {
        link_t *l = net->links;
        net->links = l->next;
        free(l);
    }
    for (int i = 0; i < net->topo.nswitches; i++)
        while (net->ans[i].nheld)
            held_drop(&net->ans[i], 0);
    free(net->ans);
    topo_free(&net->topo);
    free(net);
}

mgr_core_t *mgrnet_core(mgrnet_t *net)
{
    return net->core;
}
uint64_t mgrnet_now(const mgrnet_t *net)
{
    return net->now;
}

void mgrnet_restart_manager(mgrnet_t *net)
{
    for (link_t *l = net->links; l; l = l->next) {
        if (!l->open)
            continue;
        l->open = 0;
        l->peer = NULL;
        if (l->node->link == l)
            node_disconnected(net, l->node);
    }
    mgr_core_destroy(net->core);
    net->restarts++;
    if (core_make(net) != 0)
        abort();
    net->next_tick = net->now + net->cfg.tick_ms;
}

static void deliver(mgrnet_t *net, event_t *e)
{
    link_t *l = e->link;
    if (!l->open)
        return; /* the connection ended while it was in flight */
    if (e->to_core) {
        mgr_core_frame(net->core, l->peer, e->type, e->body, e->len, net->now);
        return;
    }
    if (l->node->is_an)
        an_receive(net, l->node, e->type, e->body, e->len);
    else
        host_receive(net, l->node, e->type, e->body, e->len);
}

void mgrnet_run(mgrnet_t *net, uint64_t ms)
{
    uint64_t end = net->now + ms;
    for (;;) {
        uint64_t t = net->next_tick;
        int what = 0, who = -1;
        if (net->q && net->q->at < t) {
            t = net->q->at;
            what = 1;
        }
        for (int i = 0; i < net->topo.nswitches; i++) {
            node_t *a = &net->ans[i];
            if (a->next_beat && !a->hung && a->link && a->next_beat < t) {
                t = a->next_beat;
                what = 2;
                who = i;
            }
            if (a->reconnect_at && !a->hung && a->reconnect_at < t) {
                t = a->reconnect_at;
                what = 3;
                who = i;
            }
        }
        if (t > end) {
            net->now = end;
            return;
        }
        net->now = t;
        if (what == 0) {
            mgr_core_tick(net->core, t);
            net->next_tick = t + net->cfg.tick_ms;
        } else if (what == 1) {
            event_t *e = net->q;
            net->q = e->next;
            deliver(net, e);
            free(e->body);
            free(e);
        } else if (what == 2) {
            node_t *a = &net->ans[who];
            an_beat(net, a);
            a->next_beat = t + a->hb_ms;
        } else {
            node_t *a = &net->ans[who];
            a->reconnect_at = 0;
            if (a->alive && a->link == NULL)
                an_register(net, a);
        }
    }
}
