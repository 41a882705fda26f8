/*
 * memnet: see memnet.h. Packets live in a binary heap ordered by (delivery
 * time, enqueue number); host timers and pending starts are found by a scan
 * over the hosts, which is cheap at test sizes and keeps ties deterministic
 * (lowest node first).
 */
#include "memnet.h"

#include "common/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMNET_MAX_GROUPS 8

enum { NODE_AN = 1, NODE_HOST = 2, NODE_SINK = 3 };

typedef struct {
    uint64_t t;
    uint64_t seq;
    incoll_ep_t src, dst;
    size_t len;
    uint8_t *data;
} pkt_t;

typedef struct sink_msg {
    struct sink_msg *next;
    incoll_ep_t src;
    size_t len;
    uint8_t data[];
} sink_msg_t;

/* One shaped link from a node (memnet_cfg_t.link_rate): to dst, the
 * time the last packet queued on it finished under the pure rate. */
typedef struct {
    incoll_ep_t dst;
    uint64_t vfin;
} link_t;

typedef struct node {
    struct memnet *net;
    int kind;
    incoll_ep_t ep;
    double drop;
    udp_loss_t loss_in; /* the loss process of packets to this node */
    agg_t *agg;         /* the AN, or its first shard */
    agg_t *shard[MEMNET_MAX_SHARDS];
    int nshards;
    host_engine_t *eng;
    host_engine_params_t hp;
    int group, rank;
    /* Host: an operation waiting for its start time, or running. */
    int pending;
    int busy;
    uint64_t start_at;
    uint64_t wake_at; /* start_at or the engine's deadline, while busy */
    const void *send;
    void *recv;
    size_t count;
    incoll_dtype_t dtype;
    incoll_op_t op;
    wire_coll_t coll;
    int root;
    int root_rank; /* the call's root rank (host_engine_set_root), or -1 */
    int ctl;       /* the pending start is a lock (1), unlock (2) or background
                    * unlock (3) round */
    uint16_t nops; /* the lock's operations */
    size_t blk_off, blk_len; /* gathers */
    incoll_status_t start_status;
    uint64_t done_ns;
    /* Sink. */
    sink_msg_t *head, *tail;
    link_t *links;
    size_t nlinks;
} node_t;

struct memnet {
    memnet_cfg_t cfg;
    uint64_t rng;
    uint64_t now;
    uint64_t next_seq;
    pkt_t *heap;
    size_t nheap, capheap;
    node_t **nodes; /* endpoint ep is nodes[ep - 1] */
    size_t nnodes, capnodes;
    int *hosts; /* node indexes of all hosts, in creation order */
    size_t nhosts_all, caphosts;
    int busy;
    memnet_tree_t tree;
    int have_tree;
    int an_node[MEMNET_MAX_ANS];
    int ngroups;
    int group_host[MEMNET_MAX_GROUPS][MEMNET_MAX_HOSTS];
    memnet_tap_fn tap;
    void *tap_arg;
    memnet_filter_fn filter;
    void *filter_arg;
    memnet_stats_t st;
    udp_loss_t loss_nowhere; /* of packets to no node */
};

/* ---- PRNG ---- */

uint64_t memnet_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t memnet_rand_below(uint64_t *s, uint64_t n)
{
    return n ? memnet_rand(s) % n : 0;
}

double memnet_rand_unit(uint64_t *s)
{
    return (double)(memnet_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- trees ---- */

static int tree_check(const memnet_tree_t *t)
{
    int kinds[MEMNET_MAX_ANS + MEMNET_MAX_HOSTS];
    if (t->nans < 1 || t->nans > MEMNET_MAX_ANS || t->nhosts < 1 ||
        t->nhosts > MEMNET_MAX_HOSTS || t->an_parent[0] != -1)
        return -1;
    for (int i = 1; i < t->nans; i++)
        if (t->an_parent[i] < 0 || t->an_parent[i] >= i)
            return -1;
    for (int r = 0; r < t->nhosts; r++)
        if (t->host_an[r] < 0 || t->host_an[r] >= t->nans)
            return -1;
    for (int i = 0; i < t->nans; i++) {
        int n = memnet_tree_children(t, i, kinds);
        if (n < 1 || n > AGG_MAX_CHILDREN)
            return -1;
    }
    return 0;
}

int memnet_tree_children(const memnet_tree_t *t, int an, int *kinds)
{
    int n = 0;
    for (int i = 0; i < t->nans; i++)
        if (i != an && t->an_parent[i] == an)
            kinds[n++] = i;
    for (int r = 0; r < t->nhosts; r++)
        if (t->host_an[r] == an)
            kinds[n++] = -(r + 1);
    return n;
}

int memnet_tree_radix(memnet_tree_t *t, int nhosts, int radix)
{
    /* Built bottom-up in level arrays, then numbered top-down so that the
     * root is 0 and every parent precedes its children. */
    int level_start[64], level_n[64], nlevels = 0, total = 0;
    int up[MEMNET_MAX_ANS]; /* bottom-up index -> bottom-up parent */
    int map[MEMNET_MAX_ANS];

    memset(t, 0, sizeof(*t));
    if (nhosts < 1 || nhosts > MEMNET_MAX_HOSTS || radix < 1 ||
        (radix == 1 && nhosts > 1))
        return -1;
    level_start[0] = 0;
    level_n[0] = (nhosts + radix - 1) / radix;
    total = level_n[0];
    nlevels = 1;
    while (level_n[nlevels - 1] > 1) {
        int below = level_n[nlevels - 1];
        level_start[nlevels] = total;
        level_n[nlevels] = (below + radix - 1) / radix;
        total += level_n[nlevels];
        if (total > MEMNET_MAX_ANS || nlevels >= 63)
            return -1;
        for (int j = 0; j < below; j++)
            up[level_start[nlevels - 1] + j] = level_start[nlevels] + j / radix;
        nlevels++;
    }
    if (total > MEMNET_MAX_ANS)
        return -1;
    up[total - 1] = -1;
    /* Top-down numbering: levels from the top, each left to right. */
    {
        int k = 0;
        for (int l = nlevels - 1; l >= 0; l--)
            for (int j = 0; j < level_n[l]; j++)
                map[level_start[l] + j] = k++;
    }
    t->nans = total;
    t->nhosts = nhosts;
    for (int b = 0; b < total; b++)
        t->an_parent[map[b]] = up[b] < 0 ? -1 : map[up[b]];
    for (int r = 0; r < nhosts; r++)
        t->host_an[r] = map[r / radix];
    return tree_check(t);
}

typedef struct {
    const char *p;
    memnet_tree_t *t;
} parse_t;

static void skip_ws(parse_t *ps)
{
    while (*ps->p == ' ' || *ps->p == ',' || *ps->p == '\t')
        ps->p++;
}

static int parse_an(parse_t *ps, int parent)
{
    int me;
    skip_ws(ps);
    if (*ps->p != '[' || ps->t->nans >= MEMNET_MAX_ANS)
        return -1;
    ps->p++;
    me = ps->t->nans++;
    ps->t->an_parent[me] = parent;
    for (;;) {
        skip_ws(ps);
        if (*ps->p == ']') {
            ps->p++;
            return 0;
        }
        if (*ps->p == '[') {
            if (parse_an(ps, me) != 0)
                return -1;
        } else if (*ps->p >= '0' && *ps->p <= '9') {
            char *end;
            long n = strtol(ps->p, &end, 10);
            ps->p = end;
            if (n < 0 || ps->t->nhosts + n > MEMNET_MAX_HOSTS)
                return -1;
            for (long i = 0; i < n; i++)
                ps->t->host_an[ps->t->nhosts++] = me;
        } else {
            return -1;
        }
    }
}

int memnet_tree_parse(memnet_tree_t *t, const char *spec)
{
    parse_t ps = {spec, t};
    memset(t, 0, sizeof(*t));
    if (parse_an(&ps, -1) != 0)
        return -1;
    skip_ws(&ps);
    if (*ps.p != '\0')
        return -1;
    return tree_check(t);
}

static void random_an(memnet_tree_t *t, uint64_t *rng, int parent, int depth,
                      int max_depth, int max_hosts)
{
    int me = t->nans++, nchild_ans = 0, nh;
    t->an_parent[me] = parent;
    if (depth < max_depth) {
        nchild_ans = (int)memnet_rand_below(rng, 4);
        for (int i = 0; i < nchild_ans && t->nans < MEMNET_MAX_ANS &&
                        t->nhosts < max_hosts;
             i++)
            random_an(t, rng, me, depth + 1, max_depth, max_hosts);
    }
    nh = (int)memnet_rand_below(rng, 6);
    if (nh == 0 && t->nans == me + 1)
        nh = 1; /* no child AN was made: it needs a host */
    for (int i = 0; i < nh && t->nhosts < max_hosts; i++)
        t->host_an[t->nhosts++] = me;
}

void memnet_tree_random(memnet_tree_t *t, uint64_t *rng, int max_hosts,
                        int max_depth)
{
    if (max_hosts > MEMNET_MAX_HOSTS)
        max_hosts = MEMNET_MAX_HOSTS;
    for (;;) {
        memset(t, 0, sizeof(*t));
        random_an(t, rng, -1, 1, max_depth, max_hosts);
        if (tree_check(t) != 0)
            continue; /* an AN ran out of hosts: try another shape */
        /* Shuffle ranks so that an AN's hosts are not always consecutive
         * ranks (its children are in rank order, not creation order). */
        for (int r = t->nhosts - 1; r > 0; r--) {
            int j = (int)memnet_rand_below(rng, (uint64_t)r + 1), x;
            x = t->host_an[r];
            t->host_an[r] = t->host_an[j];
            t->host_an[j] = x;
        }
        return;
    }
}

static size_t tree_str_an(const memnet_tree_t *t, int an, char *buf, size_t len,
                          size_t n)
{
    int kinds[MEMNET_MAX_ANS + MEMNET_MAX_HOSTS], k, nh = 0;
    k = memnet_tree_children(t, an, kinds);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "[");
    for (int i = 0; i < k; i++) {
        if (kinds[i] >= 0)
            n = tree_str_an(t, kinds[i], buf, len, n);
        else
            nh++;
    }
    if (n < len && nh)
        n += (size_t)snprintf(buf + n, len - n, "%s%d", k > nh ? " " : "", nh);
    if (n < len)
        n += (size_t)snprintf(buf + n, len - n, "]");
    return n;
}

void memnet_tree_str(const memnet_tree_t *t, char *buf, size_t len)
{
    if (len == 0)
        return;
    buf[0] = '\0';
    tree_str_an(t, 0, buf, len, 0);
}

/* ---- the network ---- */

static int pkt_less(const pkt_t *a, const pkt_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(memnet_t *net, pkt_t p)
{
    size_t i;
    if (net->nheap == net->capheap) {
        size_t ncap = net->capheap ? net->capheap * 2 : 256;
        pkt_t *nh = realloc(net->heap, ncap * sizeof(*nh));
        if (nh == NULL) {
            free(p.data);
            return;
        }
        net->heap = nh;
        net->capheap = ncap;
    }
    i = net->nheap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pkt_less(&p, &net->heap[parent]))
            break;
        net->heap[i] = net->heap[parent];
        i = parent;
    }
    net->heap[i] = p;
}

static pkt_t heap_pop(memnet_t *net)
{
    pkt_t top = net->heap[0], last = net->heap[--net->nheap];
    size_t i = 0, n = net->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && pkt_less(&net->heap[c + 1], &net->heap[c]))
            c++;
        if (!pkt_less(&net->heap[c], &last))
            break;
        net->heap[i] = net->heap[c];
        i = c;
    }
    if (n > 0)
        net->heap[i] = last;
    return top;
}

static node_t *node_of(const memnet_t *net, incoll_ep_t ep)
{
    if (ep == 0 || ep == INCOLL_EP_NONE || ep > net->nnodes)
        return NULL;
    return net->nodes[ep - 1];
}

static void enqueue(memnet_t *net, incoll_ep_t src, incoll_ep_t dst,
                    const uint8_t *data, size_t len, uint64_t delay)
{
    pkt_t p = {.t = net->now + delay,
               .seq = net->next_seq++,
               .src = src,
               .dst = dst,
               .len = len};
    p.data = malloc(len ? len : 1);
    if (p.data == NULL)
        return;
    memcpy(p.data, data, len);
    heap_push(net, p);
}

static uint64_t one_delay(memnet_t *net)
{
    uint64_t d = net->cfg.delay_ns;
    if (net->cfg.jitter_ns)
        d += memnet_rand_below(&net->rng, net->cfg.jitter_ns + 1);
    if (net->cfg.reorder > 0 &&
        memnet_rand_unit(&net->rng) < net->cfg.reorder) {
        net->st.reordered++;
        d += memnet_rand_below(&net->rng, net->cfg.reorder_ns + 1);
    }
    return d;
}

/*
 * The time a packet of len bytes sent now from self to dst waits in the
 * link's token bucket. vfin runs at the rate; a bucket of burst bytes
 * means a packet may finish up to burst / rate ahead of it, which is when
 * it leaves at once.
 */
static uint64_t link_wait(memnet_t *net, node_t *self, incoll_ep_t dst,
                          size_t len)
{
    uint64_t rate = net->cfg.link_rate, burst_ns, tx_ns;
    link_t *l = NULL;

    if (rate == 0)
        return 0;
    for (size_t i = 0; i < self->nlinks; i++)
        if (self->links[i].dst == dst)
            l = &self->links[i];
    if (l == NULL) {
        link_t *nl = realloc(self->links, (self->nlinks + 1) * sizeof(*nl));
        if (nl == NULL)
            return 0;
        self->links = nl;
        l = &nl[self->nlinks++];
        l->dst = dst;
        l->vfin = 0;
    }
    burst_ns = net->cfg.link_burst * 1000000000ull / rate;
    tx_ns = (uint64_t)len * 1000000000ull / rate;
    if (l->vfin + burst_ns < net->now)
        l->vfin = net->now - burst_ns;
    l->vfin += tx_ns;
    return l->vfin > net->now ? l->vfin - net->now : 0;
}

static void node_send(void *arg, incoll_ep_t dst, const void *hdr,
                      const void *payload, size_t len)
{
    node_t *self = arg;
    memnet_t *net = self->net;
    uint8_t stackbuf[2048], *pkt = stackbuf;
    size_t total = WIRE_HDR_LEN + len;
    node_t *to = node_of(net, dst);
    double p_drop = net->cfg.drop;

    if (total > sizeof(stackbuf)) {
        pkt = malloc(total);
        if (pkt == NULL)
            return;
    }
    memcpy(pkt, hdr, WIRE_HDR_LEN);
    if (len)
        memcpy(pkt + WIRE_HDR_LEN, payload, len);
    net->st.sent++;
    if (net->tap)
        net->tap(net->tap_arg, self->ep, dst, pkt, total);
    if (net->filter && net->filter(net->filter_arg, self->ep, dst, pkt, total))
        goto dropped;
    if (self->drop > 0 && memnet_rand_unit(&net->rng) < self->drop)
        goto dropped;
    if (to && to->drop > 0 && memnet_rand_unit(&net->rng) < to->drop)
        goto dropped;
    if (p_drop > 0) {
        /* Bursts hit what goes to one node, as a full queue toward it
         * under incast drops whatever arrives until it drains. */
        udp_loss_t *loss = to ? &to->loss_in : &net->loss_nowhere;
        loss->p = p_drop;
        loss->burst = net->cfg.burst;
        if (udp_loss_next(loss, memnet_rand_unit(&net->rng)))
            goto dropped;
    }
    enqueue(net, self->ep, dst, pkt, total,
            link_wait(net, self, dst, total) + one_delay(net));
    if (net->cfg.dup > 0 && memnet_rand_unit(&net->rng) < net->cfg.dup) {
        net->st.duplicated++;
        enqueue(net, self->ep, dst, pkt, total,
                link_wait(net, self, dst, total) + one_delay(net));
    }
    goto out;
dropped:
    net->st.dropped++;
out:
    if (pkt != stackbuf)
        free(pkt);
}

memnet_t *memnet_create(const memnet_cfg_t *cfg)
{
    memnet_t *net = calloc(1, sizeof(*net));
    if (net == NULL)
        return NULL;
    net->cfg = *cfg;
    net->rng = cfg->seed ^ 0x6d656d6e6574ull;
    /* Start away from 0 so that code assuming "time 0 = never" shows. */
    net->now = 1000000000ull;
    return net;
}

void memnet_set_faults(memnet_t *net, const memnet_cfg_t *cfg)
{
    uint64_t seed = net->cfg.seed;
    net->cfg = *cfg;
    net->cfg.seed = seed;
}

void memnet_destroy(memnet_t *net)
{
    if (net == NULL)
        return;
    for (size_t i = 0; i < net->nheap; i++)
        free(net->heap[i].data);
    free(net->heap);
    for (size_t i = 0; i < net->nnodes; i++) {
        node_t *n = net->nodes[i];
        for (int k = 1; k < n->nshards; k++)
            agg_destroy(n->shard[k]);
        agg_destroy(n->agg);
        host_engine_destroy(n->eng);
        free(n->links);
        while (n->head) {
            sink_msg_t *m = n->head;
            n->head = m->next;
            free(m);
        }
        free(n);
    }
    free(net->nodes);
    free(net->hosts);
    free(net);
}

static node_t *node_new(memnet_t *net, int kind)
{
    node_t *n;
    if (net->nnodes == net->capnodes) {
        size_t ncap = net->capnodes ? net->capnodes * 2 : 64;
        node_t **nn = realloc(net->nodes, ncap * sizeof(*nn));
        if (nn == NULL)
            return NULL;
        net->nodes = nn;
        net->capnodes = ncap;
    }
    n = calloc(1, sizeof(*n));
    if (n == NULL)
        return NULL;
    n->net = net;
    n->kind = kind;
    net->nodes[net->nnodes++] = n;
    n->ep = net->nnodes; /* ep - 1 is the index */
    return n;
}

int memnet_add_tree(memnet_t *net, const memnet_tree_t *tree,
                    uint64_t admin_key)
{
    if (net->have_tree || tree_check(tree) != 0)
        return -1;
    net->tree = *tree;
    net->have_tree = 1;
    for (int i = 0; i < tree->nans; i++) {
        char name[16];
        agg_params_t ap;
        node_t *n = node_new(net, NODE_AN);
        if (n == NULL)
            return -1;
        snprintf(name, sizeof(name), "an%d", i);
        ap = (agg_params_t){.name = name,
                            .admin_key = admin_key,
                            .send = node_send,
                            .send_arg = n,
                            .gen_idle_ns = net->cfg.gen_idle_ns
                                               ? net->cfg.gen_idle_ns
                                               : UINT64_C(1000000000),
                            .stream_pool_bytes = net->cfg.stream_pool_bytes,
                            .lock_idle_ns = net->cfg.lock_idle_ns};
        n->nshards = net->cfg.an_shards > 1 ? net->cfg.an_shards : 1;
        if (n->nshards > MEMNET_MAX_SHARDS)
            return -1;
        for (int k = 0; k < n->nshards; k++)
            if ((n->shard[k] = agg_create(&ap)) == NULL)
                return -1;
        n->agg = n->shard[0];
        for (int k = 0; k < n->nshards && n->nshards > 1; k++)
            agg_set_peers(n->shard[k], n->shard, n->nshards);
        net->an_node[i] = (int)(n->ep - 1);
    }
    return 0;
}

/* Index of child kind k in AN an's child list. */
static int child_index(const memnet_tree_t *t, int an, int k)
{
    int kinds[MEMNET_MAX_ANS + MEMNET_MAX_HOSTS];
    int n = memnet_tree_children(t, an, kinds);
    for (int i = 0; i < n; i++)
        if (kinds[i] == k)
            return i;
    return -1;
}

int memnet_add_group(memnet_t *net, const memnet_group_cfg_t *g)
{
    const memnet_tree_t *t = &net->tree;
    int gi = net->ngroups;
    if (!net->have_tree || gi >= MEMNET_MAX_GROUPS)
        return -1;
    for (int a = 0; a < t->nans; a++) {
        int kinds[MEMNET_MAX_ANS + MEMNET_MAX_HOSTS];
        incoll_ep_t eps[MEMNET_MAX_ANS + MEMNET_MAX_HOSTS];
        int n = memnet_tree_children(t, a, kinds);
        int parent = t->an_parent[a];
        agg_group_params_t gp;
        for (int i = 0; i < n; i++)
            eps[i] =
                kinds[i] >= 0 ? memnet_an_ep(net, kinds[i]) : INCOLL_EP_NONE;
        gp = (agg_group_params_t){
            .id = g->id,
            .nchildren = n,
            .children = eps,
            .parent = parent < 0 ? INCOLL_EP_NONE : memnet_an_ep(net, parent),
            .index_at_parent =
                (uint16_t)(parent < 0 ? 0 : child_index(t, parent, a)),
            .slots = g->slots,
            .max_payload = g->max_payload,
        };
        wire_key_derive(NULL, WIRE_KEY_GROUP, g->id, g->key, &gp.key);
        if (agg_group_add(memnet_an(net, a), &gp) != INCOLL_OK)
            return -1;
    }
    for (int r = 0; r < t->nhosts; r++) {
        host_engine_params_t hp;
        node_t *n = node_new(net, NODE_HOST);
        if (n == NULL)
            return -1;
        memset(&hp, 0, sizeof(hp));
        host_engine_params_default(&hp);
        hp.group = g->id;
        wire_key_derive(NULL, WIRE_KEY_GROUP, g->id, g->key, &hp.key);
        hp.gen = g->gen;
        hp.child = (uint16_t)child_index(t, t->host_an[r], -(r + 1));
        hp.an = memnet_an_ep(net, t->host_an[r]);
        hp.slots = g->slots;
        hp.window = g->window;
        hp.max_payload = g->max_payload;
        hp.stream_window = g->stream_window;
        hp.pace = g->pace;
        hp.window_min = g->window_min;
        hp.copy_bytes = g->copy_bytes;
        hp.copy_adapt_bytes = g->copy_adapt_bytes;
        hp.hedge_pct = g->hedge_pct;
        hp.ask_bytes = g->ask_bytes;
        hp.ahead_bytes = g->ahead_bytes;
        if (g->rto_init_ns)
            hp.rto_init_ns = g->rto_init_ns;
        if (g->rto_min_ns)
            hp.rto_min_ns = g->rto_min_ns;
        if (g->rto_max_ns)
            hp.rto_max_ns = g->rto_max_ns;
        if (g->max_retries)
            hp.max_retries = g->max_retries;
        if (g->progress_timeout_ns)
            hp.progress_timeout_ns = g->progress_timeout_ns;
        hp.send = node_send;
        hp.send_arg = n;
        n->hp = hp;
        n->eng = host_engine_create(&hp);
        if (n->eng == NULL)
            return -1;
        n->group = gi;
        n->rank = r;
        n->wake_at = UINT64_MAX;
        n->start_status = INCOLL_OK;
        net->group_host[gi][r] = (int)(n->ep - 1);
        if (net->nhosts_all == net->caphosts) {
            size_t ncap = net->caphosts ? net->caphosts * 2 : 64;
            int *nh = realloc(net->hosts, ncap * sizeof(*nh));
            if (nh == NULL)
                return -1;
            net->hosts = nh;
            net->caphosts = ncap;
        }
        net->hosts[net->nhosts_all++] = (int)(n->ep - 1);
    }
    net->ngroups++;
    return gi;
}

int memnet_new_job(memnet_t *net, int group, uint32_t gen)
{
    if (group < 0 || group >= net->ngroups)
        return -1;
    for (int r = 0; r < net->tree.nhosts; r++) {
        node_t *n = net->nodes[net->group_host[group][r]];
        if (n->busy)
            return -1;
        host_engine_destroy(n->eng);
        n->hp.gen = gen;
        n->eng = host_engine_create(&n->hp);
        if (n->eng == NULL)
            return -1;
        n->start_status = INCOLL_OK;
    }
    return 0;
}

incoll_ep_t memnet_add_sink(memnet_t *net)
{
    node_t *n = node_new(net, NODE_SINK);
    return n ? n->ep : INCOLL_EP_NONE;
}

const memnet_tree_t *memnet_tree(const memnet_t *net)
{
    return &net->tree;
}

agg_t *memnet_an(const memnet_t *net, int an)
{
    return net->nodes[net->an_node[an]]->agg;
}

agg_counters_t memnet_an_counters(const memnet_t *net, int an)
{
    const node_t *n = net->nodes[net->an_node[an]];
    agg_counters_t c = *agg_counters(n->agg);
    for (int k = 1; k < n->nshards; k++)
        agg_counters_add(&c, agg_counters(n->shard[k]));
    return c;
}

incoll_ep_t memnet_an_ep(const memnet_t *net, int an)
{
    return (incoll_ep_t)net->an_node[an] + 1;
}

host_engine_t *memnet_host(const memnet_t *net, int group, int rank)
{
    return net->nodes[net->group_host[group][rank]]->eng;
}

incoll_ep_t memnet_host_ep(const memnet_t *net, int group, int rank)
{
    return (incoll_ep_t)net->group_host[group][rank] + 1;
}

host_engine_counters_t memnet_group_counters(const memnet_t *net, int group)
{
    /* Every field is a uint64_t count: summed field by field. */
    host_engine_counters_t t = {0};
    uint64_t *sum = (uint64_t *)(void *)&t;
    _Static_assert(sizeof(t) % sizeof(uint64_t) == 0,
                   "host_engine_counters_t holds uint64_t counts only");
    for (int r = 0; r < net->tree.nhosts; r++) {
        const uint64_t *c =
            (const uint64_t *)(const void *)host_engine_counters(
                memnet_host(net, group, r));
        for (size_t k = 0; k < sizeof(t) / sizeof(uint64_t); k++)
            sum[k] += c[k];
    }
    return t;
}

/* Recomputes a host's busy flag and wake-up time after anything happened
 * to it (its engine's deadline changes only when the engine is called). */
static void host_update(memnet_t *net, node_t *n)
{
    int busy = n->pending || host_engine_status(n->eng) == INCOLL_INPROGRESS;
    if (n->busy && !busy) {
        n->done_ns = net->now;
        net->busy--;
    } else if (!n->busy && busy) {
        net->busy++;
    }
    n->busy = busy;
    /* A background unlock's timer runs while the host is idle too, as
     * the library's next call would drive it. */
    n->wake_at = n->pending ? n->start_at
                 : busy || host_engine_unlock_pending(n->eng)
                     ? host_engine_deadline(n->eng)
                     : UINT64_MAX;
}

static void host_start(memnet_t *net, node_t *n)
{
    n->pending = 0;
    if (n->ctl == 0 && n->root_rank >= 0)
        host_engine_set_root(n->eng, (uint16_t)n->root_rank);
    if (n->ctl == 1)
        n->start_status = host_engine_lock(n->eng, n->nops, net->now);
    else if (n->ctl == 2)
        n->start_status = host_engine_unlock(n->eng, net->now);
    else if (n->ctl == 3)
        n->start_status = host_engine_unlock_bg(n->eng, net->now);
    else if (wire_coll_is_split(n->coll))
        n->start_status = host_engine_start_split(
            n->eng, n->coll, n->root, n->send, n->blk_off, n->blk_len, n->recv,
            n->count, n->dtype, n->op, net->now);
    else if (wire_coll_is_gather(n->coll))
        n->start_status = host_engine_start_gather(
            n->eng, n->coll, n->root, n->send, n->blk_off, n->blk_len, n->recv,
            n->count, net->now);
    else
        n->start_status =
            host_engine_start_coll(n->eng, n->coll, n->root, n->send, n->recv,
                                   n->count, n->dtype, n->op, net->now);
    host_update(net, n);
}

/* Makes host n start what its fields describe now, or up to the start
 * skew later. */
static void schedule_start(memnet_t *net, node_t *n)
{
    n->start_status = INCOLL_INPROGRESS;
    n->start_at = net->now;
    if (net->cfg.start_skew_ns)
        n->start_at += memnet_rand_below(&net->rng, net->cfg.start_skew_ns + 1);
    n->pending = 1;
    host_update(net, n);
}

void memnet_start_allreduce(memnet_t *net, int group, const void *const *send,
                            void *const *recv, size_t count,
                            incoll_dtype_t dtype, incoll_op_t op)
{
    memnet_start_coll(net, group, WIRE_COLL_ALLREDUCE, -1, send, recv, count,
                      dtype, op);
}

void memnet_start_coll(memnet_t *net, int group, wire_coll_t kind, int root,
                       const void *const *send, void *const *recv, size_t count,
                       incoll_dtype_t dtype, incoll_op_t op)
{
    for (int r = 0; r < net->tree.nhosts; r++) {
        node_t *n = net->nodes[net->group_host[group][r]];
        n->coll = kind;
        n->ctl = 0;
        n->root = r == root;
        n->root_rank = root;
        n->send = send ? send[r] : NULL;
        n->recv = recv ? recv[r] : NULL;
        n->count = count;
        n->dtype = dtype;
        n->op = op;
        schedule_start(net, n);
    }
}

void memnet_start_one(memnet_t *net, int group, int rank, wire_coll_t kind,
                      int root, const void *send, void *recv, size_t count,
                      incoll_dtype_t dtype, incoll_op_t op)
{
    node_t *n = net->nodes[net->group_host[group][rank]];
    n->coll = kind;
    n->ctl = 0;
    n->root = rank == root;
    n->root_rank = root;
    n->send = send;
    n->recv = recv;
    n->count = count;
    n->dtype = dtype;
    n->op = op;
    schedule_start(net, n);
}

/* Schedules a lock (ctl 1) or unlock (ctl 2) round on every host. */
static void start_ctl(memnet_t *net, int group, int ctl, uint16_t nops)
{
    for (int r = 0; r < net->tree.nhosts; r++) {
        node_t *n = net->nodes[net->group_host[group][r]];
        n->ctl = ctl;
        n->nops = nops;
        schedule_start(net, n);
    }
}

void memnet_start_lock(memnet_t *net, int group, uint16_t nops)
{
    start_ctl(net, group, 1, nops);
}

void memnet_start_unlock(memnet_t *net, int group)
{
    start_ctl(net, group, 2, 0);
}

void memnet_start_unlock_bg(memnet_t *net, int group)
{
    start_ctl(net, group, 3, 0);
}

int memnet_unlock_pending(const memnet_t *net, int group)
{
    int k = 0;
    for (int r = 0; r < net->tree.nhosts; r++)
        k += host_engine_unlock_pending(
            net->nodes[net->group_host[group][r]]->eng);
    return k;
}

void memnet_start_gather(memnet_t *net, int group, wire_coll_t kind, int root,
                         const void *const *send, void *const *recv,
                         size_t block)
{
    int n = net->tree.nhosts;
    memnet_start_coll(net, group, kind, root, send, recv, block * (size_t)n,
                      INCOLL_UINT8, INCOLL_OP_SUM);
    for (int r = 0; r < n; r++) {
        node_t *nd = net->nodes[net->group_host[group][r]];
        nd->blk_off = block * (size_t)r;
        nd->blk_len = block;
    }
}

void memnet_start_split(memnet_t *net, int group, wire_coll_t kind, int root,
                        const void *const *send, void *const *recv,
                        size_t block, incoll_dtype_t dtype, incoll_op_t op)
{
    int n = net->tree.nhosts;
    memnet_start_coll(net, group, kind, root, send, recv, block * (size_t)n,
                      dtype, op);
    for (int r = 0; r < n; r++) {
        node_t *nd = net->nodes[net->group_host[group][r]];
        nd->blk_off = block * (size_t)r;
        nd->blk_len = block;
    }
}

incoll_status_t memnet_start_status(const memnet_t *net, int group, int rank)
{
    return net->nodes[net->group_host[group][rank]]->start_status;
}

uint64_t memnet_done_ns(const memnet_t *net, int group, int rank)
{
    return net->nodes[net->group_host[group][rank]]->done_ns;
}

/* The earliest host event: a pending start or an engine deadline. */
static node_t *next_timer(const memnet_t *net, uint64_t *t_p)
{
    node_t *best = NULL;
    uint64_t bt = UINT64_MAX;
    for (size_t i = 0; i < net->nhosts_all; i++) {
        node_t *n = net->nodes[net->hosts[i]];
        if (n->wake_at < bt) {
            bt = n->wake_at;
            best = n;
        }
    }
    *t_p = bt;
    return best;
}

static void deliver(memnet_t *net, pkt_t *p)
{
    node_t *n = node_of(net, p->dst);
    if (n == NULL) {
        net->st.unroutable++;
        return;
    }
    net->st.delivered++;
    switch (n->kind) {
    case NODE_AN: {
        int k = agg_shard_of(n->agg, p->data, p->len, n->nshards);
        agg_set_now(n->shard[k], net->now);
        agg_on_packet(n->shard[k], p->src, p->data, p->len);
        break;
    }
    case NODE_HOST:
        host_engine_on_packet(n->eng, p->src, p->data, p->len, net->now);
        host_update(net, n);
        break;
    case NODE_SINK: {
        sink_msg_t *m = malloc(sizeof(*m) + p->len);
        if (m == NULL)
            return;
        m->next = NULL;
        m->src = p->src;
        m->len = p->len;
        memcpy(m->data, p->data, p->len);
        if (n->tail)
            n->tail->next = m;
        else
            n->head = m;
        n->tail = m;
        break;
    }
    default:
        break;
    }
}

#define MEMNET_BATCH_MAX 256

/* first, and the packets right behind it for the same AN within
 * cfg.an_batch_ns, to the AN as one batch (memnet_cfg_t.an_batch_ns). */
static void deliver_batch(memnet_t *net, node_t *an, pkt_t *first)
{
    static pkt_t b[MEMNET_BATCH_MAX];
    static agg_pkt_t ap[MEMNET_BATCH_MAX];
    int n = 0;

    b[n++] = *first;
    while (n < MEMNET_BATCH_MAX && net->nheap &&
           net->heap[0].dst == first->dst &&
           net->heap[0].t <= first->t + net->cfg.an_batch_ns)
        b[n++] = heap_pop(net);
    if (b[n - 1].t > net->now)
        net->now = b[n - 1].t;
    net->st.delivered += (uint64_t)n;
    /* Each shard its share of the batch, in order. */
    for (int k = 0; k < an->nshards; k++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (agg_shard_of(an->agg, b[i].data, b[i].len, an->nshards) == k)
                ap[m++] = (agg_pkt_t){b[i].src, b[i].data, b[i].len};
        agg_set_now(an->shard[k], net->now);
        if (m > 0)
            agg_on_batch(an->shard[k], ap, m);
    }
    for (int i = 0; i < n; i++)
        free(b[i].data);
}

/* Processes the earliest event if it is due by end. Returns 1 if it did,
 * 0 if there was nothing to do, -1 if the next event is after end. */
static int step_until(memnet_t *net, uint64_t end)
{
    uint64_t tt;
    node_t *tn = next_timer(net, &tt);

    if (net->nheap && (tn == NULL || net->heap[0].t <= tt)) {
        pkt_t p;
        node_t *an;
        if (net->heap[0].t > end)
            return -1;
        p = heap_pop(net);
        if (p.t > net->now)
            net->now = p.t;
        an = node_of(net, p.dst);
        if (net->cfg.an_batch_ns && an && an->kind == NODE_AN) {
            deliver_batch(net, an, &p);
            return 1;
        }
        deliver(net, &p);
        free(p.data);
        return 1;
    }
    if (tn == NULL)
        return 0;
    if (tt > end)
        return -1;
    if (tt > net->now)
        net->now = tt;
    net->st.timer_fires++;
    if (tn->pending) {
        host_start(net, tn);
    } else {
        host_engine_on_time(tn->eng, net->now);
        host_update(net, tn);
    }
    return 1;
}

int memnet_step(memnet_t *net)
{
    return step_until(net, UINT64_MAX) == 1;
}

/* A guard against an engine whose deadline never moves past now: that
 * many events without the clock moving is a hang, not a burst. */
#define MEMNET_MAX_SAME_TIME 5000000

static int run_while(memnet_t *net, uint64_t limit_ns, int drain)
{
    uint64_t end = net->now + limit_ns, last = net->now;
    long same = 0;
    while (drain ? net->nheap > 0 : net->busy > 0) {
        int r = step_until(net, end);
        if (r <= 0)
            return r < 0 || !drain ? -1 : 0;
        if (net->now == last) {
            if (++same > MEMNET_MAX_SAME_TIME) {
                fprintf(stderr,
                        "    memnet: %d events at t=%llu ns without "
                        "the clock moving\n",
                        MEMNET_MAX_SAME_TIME, (unsigned long long)net->now);
                return -1;
            }
        } else {
            last = net->now;
            same = 0;
        }
    }
    return 0;
}

int memnet_run(memnet_t *net, uint64_t limit_ns)
{
    return run_while(net, limit_ns, 0);
}

int memnet_drain(memnet_t *net, uint64_t limit_ns)
{
    return run_while(net, limit_ns, 1);
}

int memnet_busy(const memnet_t *net)
{
    return net->busy;
}

size_t memnet_queued(const memnet_t *net)
{
    return net->nheap;
}

uint64_t memnet_now(const memnet_t *net)
{
    return net->now;
}

void memnet_advance(memnet_t *net, uint64_t now_ns)
{
    if (now_ns > net->now)
        net->now = now_ns;
}

void memnet_set_filter(memnet_t *net, memnet_filter_fn fn, void *arg)
{
    net->filter = fn;
    net->filter_arg = arg;
}

void memnet_set_node_drop(memnet_t *net, incoll_ep_t ep, double p)
{
    node_t *n = node_of(net, ep);
    if (n)
        n->drop = p;
}

void memnet_set_tap(memnet_t *net, memnet_tap_fn fn, void *arg)
{
    net->tap = fn;
    net->tap_arg = arg;
}

void memnet_inject(memnet_t *net, incoll_ep_t src, incoll_ep_t dst,
                   const void *pkt, size_t len, uint64_t delay_ns)
{
    net->st.injected++;
    enqueue(net, src, dst, pkt, len, delay_ns);
}

size_t memnet_sink_take(memnet_t *net, incoll_ep_t sink, void *buf, size_t cap,
                        incoll_ep_t *src_p)
{
    node_t *n = node_of(net, sink);
    sink_msg_t *m;
    size_t len;
    if (n == NULL || n->kind != NODE_SINK || n->head == NULL)
        return 0;
    m = n->head;
    n->head = m->next;
    if (n->head == NULL)
        n->tail = NULL;
    len = m->len;
    memcpy(buf, m->data, len < cap ? len : cap);
    if (src_p)
        *src_p = m->src;
    free(m);
    return len;
}

const memnet_stats_t *memnet_stats(const memnet_t *net)
{
    return &net->st;
}
