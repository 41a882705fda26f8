/*
 * Topology: the file parser, the fat-tree generator, the trees. See
 * topo.h and docs/topology.md.
 */
#include "mgr/topo.h"

#include "common/hashtab.h"
#include "common/kvline.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const op_names[INCOLL_OP_COUNT] = {
    "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor",
};
static const char *const dtype_names[INCOLL_DTYPE_COUNT] = {
    "int8",   "int16",  "int32",   "int64",    "uint8",   "uint16",
    "uint32", "uint64", "float16", "bfloat16", "float32", "float64",
};

void topo_caps_default(topo_caps_t *caps)
{
    caps->ops = TOPO_OPS_ALL;
    caps->dtypes = TOPO_DTYPES_ALL;
    caps->max_payload = 8192;
    caps->slots = 4096;
    caps->max_groups = 64;
    caps->buffer_bytes = 256ull << 20;
}

void topo_caps_meet(topo_caps_t *dst, const topo_caps_t *a,
                    const topo_caps_t *b)
{
    topo_caps_t r;
    r.ops = a->ops & b->ops;
    r.dtypes = a->dtypes & b->dtypes;
    r.max_payload =
        a->max_payload < b->max_payload ? a->max_payload : b->max_payload;
    r.slots = a->slots < b->slots ? a->slots : b->slots;
    r.max_groups =
        a->max_groups < b->max_groups ? a->max_groups : b->max_groups;
    r.buffer_bytes =
        a->buffer_bytes < b->buffer_bytes ? a->buffer_bytes : b->buffer_bytes;
    *dst = r;
}

static const char *mask_str(uint32_t mask, const char *const *names, int n,
                            char *buf, size_t len)
{
    size_t off = 0;
    uint32_t all = (1u << n) - 1;

    if (len == 0)
        return buf;
    buf[0] = '\0';
    if ((mask & all) == all || (mask & all) == 0) {
        snprintf(buf, len, "%s", (mask & all) ? "all" : "none");
        return buf;
    }
    for (int i = 0; i < n; i++) {
        if (!(mask & (1u << i)))
            continue;
        int w =
            snprintf(buf + off, len - off, "%s%s", off ? "," : "", names[i]);
        if (w < 0 || (size_t)w >= len - off)
            break;
        off += (size_t)w;
    }
    return buf;
}

const char *topo_ops_str(uint32_t ops, char *buf, size_t len)
{
    return mask_str(ops, op_names, INCOLL_OP_COUNT, buf, len);
}

const char *topo_dtypes_str(uint32_t dtypes, char *buf, size_t len)
{
    return mask_str(dtypes, dtype_names, INCOLL_DTYPE_COUNT, buf, len);
}

void topo_free(topo_t *topo)
{
    if (topo->sw) {
        for (int i = 0; i < topo->nswitches; i++) {
            free(topo->sw[i].up);
            free(topo->sw[i].down);
        }
    }
    if (topo->trees) {
        for (int t = 0; t < topo->ntrees; t++)
            free(topo->trees[t].parent);
    }
    free(topo->sw);
    free(topo->hosts);
    free(topo->links);
    free(topo->trees);
    memset(topo, 0, sizeof(*topo));
}

int topo_find_switch(const topo_t *topo, const char *name)
{
    for (int i = 0; i < topo->nswitches; i++)
        if (strcmp(topo->sw[i].name, name) == 0)
            return i;
    return -1;
}

int topo_find_host(const topo_t *topo, const char *name)
{
    for (int i = 0; i < topo->nhosts; i++)
        if (strcmp(topo->hosts[i].name, name) == 0)
            return i;
    return -1;
}

/*
 * Name lookup during parsing and building: a hash table
 * (src/common/hashtab.h) of indexes into a caller's array, so files with
 * many thousands of hosts load in linear time.
 */
typedef struct {
    hashtab_t t; /* slots: int, the index + 1; 0 = empty */
    const char *(*get)(const void *, int); /* the name of entry i */
    const void *arg;
} name_index_t;

static uint64_t ix_hash(const void *rec, const void *arg)
{
    const name_index_t *ix = arg;
    return hashtab_str(ix->get(ix->arg, *(const int *)rec - 1));
}

static int ix_empty(const void *rec)
{
    return *(const int *)rec == 0;
}

static void ix_clear(void *rec)
{
    *(int *)rec = 0;
}

struct ix_key {
    const name_index_t *ix;
    const char *name;
};

static int ix_eq(const void *rec, const void *key)
{
    const struct ix_key *k = key;
    return strcmp(k->ix->get(k->ix->arg, *(const int *)rec - 1), k->name) == 0;
}

static void ix_setup(name_index_t *ix, const char *(*get)(const void *, int),
                     const void *arg)
{
    ix->get = get;
    ix->arg = arg;
    ix->t.esz = sizeof(int);
    ix->t.hash = ix_hash;
    ix->t.empty = ix_empty;
    ix->t.clear = ix_clear;
    ix->t.arg = ix;
}

/* Finds name; get(arg, i) returns the name of entry i. -1 if absent. */
static int index_find(name_index_t *ix, const char *name,
                      const char *(*get)(const void *, int), const void *arg)
{
    struct ix_key k = {ix, name};
    const int *rec;
    ix_setup(ix, get, arg);
    rec = hashtab_find(&ix->t, hashtab_str(name), ix_eq, &k);
    return rec ? *rec - 1 : -1;
}

/* Adds entry idx, whose name is not there yet. 0, or -1 out of memory. */
static int index_add(name_index_t *ix, const char *name, int idx,
                     const char *(*get)(const void *, int), const void *arg)
{
    struct ix_key k = {ix, name};
    int *slot;
    ix_setup(ix, get, arg);
    if (hashtab_full(&ix->t)) {
        uint32_t oldcap = ix->t.cap, ncap = oldcap ? oldcap * 2 : 64;
        int *ns = malloc(ncap * sizeof(*ns)), *old;
        if (ns == NULL)
            return -1;
        old = hashtab_swap(&ix->t, ns, ncap);
        for (uint32_t i = 0; i < oldcap; i++)
            if (old[i])
                hashtab_put(&ix->t, &old[i]);
        free(old);
    }
    slot = hashtab_slot(&ix->t, hashtab_str(name), ix_eq, &k);
    *slot = idx + 1;
    hashtab_added(&ix->t);
    return 0;
}

static const char *sw_name(const void *arg, int i)
{
    return ((const topo_t *)arg)->sw[i].name;
}

static const char *host_name(const void *arg, int i)
{
    return ((const topo_t *)arg)->hosts[i].name;
}

/* Appends v to a growable int array. */
static int push_int(int **arr, int *n, int v)
{
    int *na = realloc(*arr, (size_t)(*n + 1) * sizeof(int));
    if (na == NULL)
        return -1;
    na[*n] = v;
    *arr = na;
    (*n)++;
    return 0;
}

/*
 * Fills the up/down neighbour lists from the links and derives the trees.
 * Returns INCOLL_ERR_NO_MEMORY or INCOLL_OK; the shape was checked before.
 */
static incoll_status_t build_trees(topo_t *topo)
{
    int nroots = 0, *queue;

    for (int l = 0; l < topo->nlinks; l++) {
        int lo = topo->links[l][0], hi = topo->links[l][1];
        if (push_int(&topo->sw[lo].up, &topo->sw[lo].nup, hi) ||
            push_int(&topo->sw[hi].down, &topo->sw[hi].ndown, lo))
            return INCOLL_ERR_NO_MEMORY;
    }
    topo->levels = 0;
    for (int i = 0; i < topo->nswitches; i++) {
        nroots += topo->sw[i].nup == 0;
        if (topo->sw[i].level > topo->levels)
            topo->levels = topo->sw[i].level;
    }
    topo->trees = calloc((size_t)nroots, sizeof(*topo->trees));
    queue = malloc((size_t)topo->nswitches * 2 * sizeof(int));
    if (topo->trees == NULL || queue == NULL) {
        free(queue);
        return INCOLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < topo->nswitches; r++) {
        topo_tree_t *t;
        int *depth = queue + topo->nswitches, head = 0, tail = 0;
        if (topo->sw[r].nup != 0)
            continue;
        t = &topo->trees[topo->ntrees];
        t->parent = malloc((size_t)topo->nswitches * sizeof(int));
        if (t->parent == NULL) {
            free(queue);
            return INCOLL_ERR_NO_MEMORY;
        }
        topo->ntrees++;
        t->root = r;
        for (int i = 0; i < topo->nswitches; i++)
            t->parent[i] = -2;
        t->parent[r] = -1;
        queue[tail++] = r;
        depth[r] = 1;
        t->height = 1;
        while (head < tail) {
            int x = queue[head++];
            for (int d = 0; d < topo->sw[x].ndown; d++) {
                int y = topo->sw[x].down[d];
                if (t->parent[y] != -2)
                    continue;
                t->parent[y] = x;
                depth[y] = depth[x] + 1;
                if (depth[y] > t->height)
                    t->height = depth[y];
                queue[tail++] = y;
            }
        }
    }
    free(queue);
    return INCOLL_OK;
}

/* ---- the file format ---- */

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TOPO_NAME_MAX)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
            return 0;
    return 1;
}

/* A byte count with an optional K, M or G suffix (powers of 1024). */
static int parse_bytes(const char *s, uint64_t *v_p)
{
    char num[32];
    size_t n = strlen(s);
    unsigned shift = 0;
    uint64_t v;

    if (n == 0 || n >= sizeof(num))
        return -1;
    memcpy(num, s, n + 1);
    switch (num[n - 1]) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        break;
    }
    if (shift)
        num[n - 1] = '\0';
    if (kvline_u64(num, &v) != 0 || v > (UINT64_MAX >> shift))
        return -1;
    *v_p = v << shift;
    return 0;
}

/* "all", "none", or names separated by commas. */
static int parse_mask(const char *s, const char *const *names, int n,
                      uint32_t *mask_p, const char **bad_p)
{
    static char bad[TOPO_NAME_MAX + 8];
    char item[64];
    uint32_t mask = 0;

    if (strcmp(s, "all") == 0) {
        *mask_p = (1u << n) - 1;
        return 0;
    }
    if (strcmp(s, "none") == 0) {
        *mask_p = 0;
        return 0;
    }
    while (*s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        int found = -1;
        if (len == 0 || len >= sizeof(item)) {
            *bad_p = "an empty or overlong name";
            return -1;
        }
        memcpy(item, s, len);
        item[len] = '\0';
        for (int i = 0; i < n; i++)
            if (strcmp(item, names[i]) == 0)
                found = i;
        if (found < 0) {
            snprintf(bad, sizeof(bad), "'%.*s'", TOPO_NAME_MAX, item);
            *bad_p = bad;
            return -1;
        }
        mask |= 1u << found;
        s += len + (comma ? 1 : 0);
        if (comma && *s == '\0') {
            *bad_p = "a trailing comma";
            return -1;
        }
    }
    *mask_p = mask;
    return 0;
}

/*
 * Applies one key=value to caps if key is a capability. Returns 1 when it
 * was one (and sets *status on a bad value), 0 when key is not a
 * capability.
 */
static int caps_field(kvline_t *p, const char *key, const char *val,
                      topo_caps_t *caps, incoll_status_t *status)
{
    uint64_t v;
    const char *bad = NULL;

    if (strcmp(key, "ops") == 0) {
        if (parse_mask(val, op_names, INCOLL_OP_COUNT, &caps->ops, &bad))
            *status =
                kvline_error(p,
                             "ops: %s is not an op (want all, none or "
                             "sum,prod,min,max,land,lor,lxor,band,bor,bxor)",
                             bad);
    } else if (strcmp(key, "dtypes") == 0) {
        if (parse_mask(val, dtype_names, INCOLL_DTYPE_COUNT, &caps->dtypes,
                       &bad))
            *status =
                kvline_error(p,
                             "dtypes: %s is not a dtype (want all, none or "
                             "int8..int64,uint8..uint64,float16,bfloat16,"
                             "float32,float64)",
                             bad);
    } else if (strcmp(key, "payload") == 0) {
        if (parse_bytes(val, &v) || v < 8 || v > WIRE_MAX_PAYLOAD)
            *status =
                kvline_error(p, "payload '%s' is not a byte count in 8..%d",
                             val, WIRE_MAX_PAYLOAD);
        else
            caps->max_payload = (uint32_t)v;
    } else if (strcmp(key, "slots") == 0) {
        if (kvline_u64(val, &v) || v < 1 || v > 1u << 24)
            *status = kvline_error(p, "slots '%s' is not a number in 1..%u",
                                   val, 1u << 24);
        else
            caps->slots = (uint32_t)v;
    } else if (strcmp(key, "groups") == 0) {
        if (kvline_u64(val, &v) || v < 1 || v > 1u << 24)
            *status = kvline_error(p, "groups '%s' is not a number in 1..%u",
                                   val, 1u << 24);
        else
            caps->max_groups = (uint32_t)v;
    } else if (strcmp(key, "buffer") == 0) {
        if (parse_bytes(val, &v) || v < 1024)
            *status =
                kvline_error(p,
                             "buffer '%s' is not a byte count of at least "
                             "1024 (suffixes K, M, G)",
                             val);
        else
            caps->buffer_bytes = v;
    } else {
        return 0;
    }
    return 1;
}

/* Words per record, characters per line but the newline, bytes per file. */
#define MAX_FIELDS 24
#define MAX_LINE 4095
#define MAX_FILE (256u << 20)

typedef struct {
    char a[TOPO_NAME_MAX], b[TOPO_NAME_MAX];
    int line;
} pending_link_t;

typedef struct {
    char leaf[TOPO_NAME_MAX];
    int line;
} pending_host_t;

typedef struct {
    topo_t *topo;
    kvline_t p;
    topo_caps_t defaults;
    int cap_sw, cap_hosts, cap_links;
    pending_link_t *links;
    int nlinks;
    pending_host_t *hostleaf;
    int *sw_line;
    name_index_t sw_ix, host_ix;
} parser_t;

static int grow(void **arr, int *cap, int need, size_t elem)
{
    void *na;
    int ncap;
    if (need <= *cap)
        return 0;
    ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    na = realloc(*arr, (size_t)ncap * elem);
    if (na == NULL)
        return -1;
    *arr = na;
    *cap = ncap;
    return 0;
}

static incoll_status_t parse_switch(parser_t *ps, char **f, int nf)
{
    topo_t *topo = ps->topo;
    topo_switch_t *s;
    int have_level = 0;
    incoll_status_t status = INCOLL_OK;

    if (nf < 2 || strchr(f[1], '=') != NULL)
        return kvline_error(&ps->p,
                            "switch record needs a name first: switch NAME "
                            "level=N [addr=IP:PORT] [capabilities]");
    if (!valid_name(f[1]))
        return kvline_error(&ps->p,
                            "switch name '%.40s' must be 1..%d of "
                            "[A-Za-z0-9_.-]",
                            f[1], TOPO_NAME_MAX - 1);
    if (index_find(&ps->sw_ix, f[1], sw_name, topo) >= 0)
        return kvline_error(
            &ps->p, "duplicate switch '%s' (also line %d)", f[1],
            ps->sw_line[index_find(&ps->sw_ix, f[1], sw_name, topo)]);
    if (topo->nswitches >= TOPO_MAX_SWITCHES)
        return kvline_error(&ps->p, "more than %d switches", TOPO_MAX_SWITCHES);
    {
        int cap_lines = ps->cap_sw;
        if (grow((void **)&topo->sw, &ps->cap_sw, topo->nswitches + 1,
                 sizeof(*topo->sw)) ||
            grow((void **)&ps->sw_line, &cap_lines, ps->cap_sw, sizeof(int)))
            return kvline_error(&ps->p, "out of memory");
    }
    s = &topo->sw[topo->nswitches];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", f[1]);
    s->addr = INCOLL_EP_NONE;
    s->caps = ps->defaults;
    for (int i = 2; i < nf; i++) {
        const char *key = f[i], *val = kvline_value(f[i]);
        uint64_t v;
        if (val == NULL)
            return kvline_error(&ps->p, "switch %s: '%.40s' is not key=value",
                                s->name, f[i]);
        if (strcmp(key, "level") == 0) {
            if (kvline_u64(val, &v) || v < 1 || v > TOPO_MAX_LEVELS)
                return kvline_error(&ps->p,
                                    "switch %s: level '%s' is not in 1..%d",
                                    s->name, val, TOPO_MAX_LEVELS);
            s->level = (int)v;
            have_level = 1;
        } else if (strcmp(key, "addr") == 0) {
            if (strcmp(val, "-") == 0)
                s->addr = INCOLL_EP_NONE;
            else if (wire_ep_parse(val, &s->addr) != INCOLL_OK ||
                     (s->addr & 0xffff) == 0)
                return kvline_error(&ps->p,
                                    "switch %s: addr '%s' is not IP:PORT "
                                    "(or - to learn it when the an registers)",
                                    s->name, val);
        } else if (!caps_field(&ps->p, key, val, &s->caps, &status)) {
            return kvline_error(&ps->p,
                                "switch %s: unknown key '%s' (want level, "
                                "addr, ops, dtypes, payload, slots, groups, "
                                "buffer)",
                                s->name, key);
        }
        if (status != INCOLL_OK)
            return status;
    }
    if (!have_level)
        return kvline_error(&ps->p, "switch %s: missing level=", s->name);
    if (index_add(&ps->sw_ix, s->name, topo->nswitches, sw_name, topo))
        return kvline_error(&ps->p, "out of memory");
    ps->sw_line[topo->nswitches] = ps->p.line;
    topo->nswitches++;
    return INCOLL_OK;
}

static incoll_status_t parse_host(parser_t *ps, char **f, int nf)
{
    topo_t *topo = ps->topo;
    topo_host_t *h;
    pending_host_t *ph;
    int have_leaf = 0;

    if (nf < 2 || strchr(f[1], '=') != NULL)
        return kvline_error(&ps->p, "host record needs a name first: host NAME "
                                    "leaf=SWITCH [addr=IP]");
    if (!valid_name(f[1]))
        return kvline_error(&ps->p,
                            "host name '%.40s' must be 1..%d of [A-Za-z0-9_.-]",
                            f[1], TOPO_NAME_MAX - 1);
    if (index_find(&ps->host_ix, f[1], host_name, topo) >= 0)
        return kvline_error(
            &ps->p, "duplicate host '%s' (also line %d)", f[1],
            ps->hostleaf[index_find(&ps->host_ix, f[1], host_name, topo)].line);
    if (topo->nhosts >= TOPO_MAX_HOSTS)
        return kvline_error(&ps->p, "more than %d hosts", TOPO_MAX_HOSTS);
    {
        int cap_leaf = ps->cap_hosts;
        if (grow((void **)&topo->hosts, &ps->cap_hosts, topo->nhosts + 1,
                 sizeof(*topo->hosts)) ||
            grow((void **)&ps->hostleaf, &cap_leaf, ps->cap_hosts,
                 sizeof(*ps->hostleaf)))
            return kvline_error(&ps->p, "out of memory");
    }
    h = &topo->hosts[topo->nhosts];
    ph = &ps->hostleaf[topo->nhosts];
    memset(h, 0, sizeof(*h));
    memset(ph, 0, sizeof(*ph));
    snprintf(h->name, sizeof(h->name), "%s", f[1]);
    h->leaf = -1;
    ph->line = ps->p.line;
    for (int i = 2; i < nf; i++) {
        const char *val = kvline_value(f[i]);
        if (val == NULL)
            return kvline_error(&ps->p, "host %s: '%.40s' is not key=value",
                                h->name, f[i]);
        if (strcmp(f[i], "leaf") == 0) {
            if (!valid_name(val))
                return kvline_error(&ps->p,
                                    "host %s: leaf '%.40s' is not a switch "
                                    "name",
                                    h->name, val);
            snprintf(ph->leaf, sizeof(ph->leaf), "%s", val);
            have_leaf = 1;
        } else if (strcmp(f[i], "addr") == 0) {
            struct in_addr in;
            if (inet_pton(AF_INET, val, &in) != 1)
                return kvline_error(&ps->p,
                                    "host %s: addr '%.40s' is not an IPv4 "
                                    "address",
                                    h->name, val);
            h->ip = ntohl(in.s_addr);
        } else {
            return kvline_error(&ps->p,
                                "host %s: unknown key '%s' (want leaf, addr)",
                                h->name, f[i]);
        }
    }
    if (!have_leaf)
        return kvline_error(&ps->p, "host %s: missing leaf=", h->name);
    if (index_add(&ps->host_ix, h->name, topo->nhosts, host_name, topo))
        return kvline_error(&ps->p, "out of memory");
    topo->nhosts++;
    return INCOLL_OK;
}

static incoll_status_t parse_line(parser_t *ps, char **f, int nf)
{
    incoll_status_t status = INCOLL_OK;

    if (strcmp(f[0], "switch") == 0)
        return parse_switch(ps, f, nf);
    if (strcmp(f[0], "host") == 0)
        return parse_host(ps, f, nf);
    if (strcmp(f[0], "link") == 0) {
        pending_link_t *l;
        if (nf != 3)
            return kvline_error(&ps->p,
                                "link record wants two switch names: link A B");
        if (!valid_name(f[1]) || !valid_name(f[2]))
            return kvline_error(&ps->p, "link: '%.40s' is not a switch name",
                                valid_name(f[1]) ? f[2] : f[1]);
        if (grow((void **)&ps->links, &ps->cap_links, ps->nlinks + 1,
                 sizeof(*ps->links)))
            return kvline_error(&ps->p, "out of memory");
        l = &ps->links[ps->nlinks++];
        snprintf(l->a, sizeof(l->a), "%s", f[1]);
        snprintf(l->b, sizeof(l->b), "%s", f[2]);
        l->line = ps->p.line;
        return INCOLL_OK;
    }
    if (strcmp(f[0], "defaults") == 0) {
        for (int i = 1; i < nf; i++) {
            const char *val = kvline_value(f[i]);
            if (val == NULL)
                return kvline_error(&ps->p,
                                    "defaults: '%.40s' is not key=value", f[i]);
            if (!caps_field(&ps->p, f[i], val, &ps->defaults, &status))
                return kvline_error(&ps->p,
                                    "defaults: unknown key '%s' (want ops, "
                                    "dtypes, payload, slots, groups, buffer)",
                                    f[i]);
            if (status != INCOLL_OK)
                return status;
        }
        return INCOLL_OK;
    }
    return kvline_error(&ps->p,
                        "unknown record '%.40s' (want defaults, switch, link "
                        "or host)",
                        f[0]);
}

static int cmp_link(const void *a, const void *b, void *arg)
{
    int(*links)[2] = arg;
    const int *x = links[*(const int *)a], *y = links[*(const int *)b];
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    if (x[1] != y[1])
        return x[1] < y[1] ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* Resolves links and hosts' leaves, checks the shape, builds the trees. */
static incoll_status_t finish(parser_t *ps)
{
    topo_t *topo = ps->topo;
    int *hosts_per_leaf;
    incoll_status_t status = INCOLL_OK;

    ps->p.line = 0;
    if (topo->nswitches == 0)
        return kvline_error(&ps->p, "no switch records");
    topo->links = calloc((size_t)ps->nlinks + 1, sizeof(*topo->links));
    if (topo->links == NULL)
        return kvline_error(&ps->p, "out of memory");
    for (int i = 0; i < ps->nlinks; i++) {
        pending_link_t *l = &ps->links[i];
        int a = index_find(&ps->sw_ix, l->a, sw_name, topo);
        int b = index_find(&ps->sw_ix, l->b, sw_name, topo);
        ps->p.line = l->line;
        if (a < 0 || b < 0)
            return kvline_error(&ps->p, "link: unknown switch '%s'",
                                a < 0 ? l->a : l->b);
        if (topo->sw[a].level == topo->sw[b].level)
            return kvline_error(&ps->p,
                                "link %s %s: both switches are on level %d (a "
                                "link joins two levels)",
                                l->a, l->b, topo->sw[a].level);
        if (topo->sw[a].level > topo->sw[b].level) {
            int t = a;
            a = b;
            b = t;
        }
        topo->links[topo->nlinks][0] = a;
        topo->links[topo->nlinks][1] = b;
        topo->nlinks++;
    }
    /* Duplicate links: sort link indexes by (lower, upper) and compare
     * neighbours. */
    {
        int *order = malloc(((size_t)topo->nlinks + 1) * sizeof(int));
        if (order == NULL)
            return kvline_error(&ps->p, "out of memory");
        for (int i = 0; i < topo->nlinks; i++)
            order[i] = i;
        qsort_r(order, (size_t)topo->nlinks, sizeof(int), cmp_link,
                topo->links);
        for (int i = 1; i < topo->nlinks; i++) {
            int x = order[i - 1], y = order[i];
            if (topo->links[x][0] == topo->links[y][0] &&
                topo->links[x][1] == topo->links[y][1]) {
                int first = x < y ? x : y, second = x < y ? y : x;
                ps->p.line = ps->links[second].line;
                status = kvline_error(
                    &ps->p, "link %s %s: duplicate (also line %d)",
                    topo->sw[topo->links[x][0]].name,
                    topo->sw[topo->links[x][1]].name, ps->links[first].line);
                break;
            }
        }
        free(order);
        if (status != INCOLL_OK)
            return status;
    }
    hosts_per_leaf = calloc((size_t)topo->nswitches, sizeof(int));
    if (hosts_per_leaf == NULL)
        return kvline_error(&ps->p, "out of memory");
    for (int h = 0; h < topo->nhosts; h++) {
        int leaf = index_find(&ps->sw_ix, ps->hostleaf[h].leaf, sw_name, topo);
        ps->p.line = ps->hostleaf[h].line;
        if (leaf < 0) {
            status = kvline_error(&ps->p, "host %s: unknown leaf switch '%s'",
                                  topo->hosts[h].name, ps->hostleaf[h].leaf);
            break;
        }
        if (topo->sw[leaf].level != 1) {
            status = kvline_error(&ps->p,
                                  "host %s: switch %s is on level %d (hosts "
                                  "sit under level-1 switches)",
                                  topo->hosts[h].name, ps->hostleaf[h].leaf,
                                  topo->sw[leaf].level);
            break;
        }
        if (++hosts_per_leaf[leaf] > 1024) {
            status = kvline_error(&ps->p,
                                  "host %s: switch %s has more than 1024 "
                                  "hosts",
                                  topo->hosts[h].name, ps->hostleaf[h].leaf);
            break;
        }
        topo->hosts[h].leaf = leaf;
    }
    free(hosts_per_leaf);
    if (status != INCOLL_OK)
        return status;
    for (int i = 0; i < topo->nswitches; i++) {
        ps->p.line = ps->sw_line[i];
        for (int j = 0; j < i; j++) {
            if (topo->sw[i].addr != INCOLL_EP_NONE &&
                topo->sw[i].addr == topo->sw[j].addr)
                return kvline_error(
                    &ps->p, "switch %s: same addr as %s (line %d)",
                    topo->sw[i].name, topo->sw[j].name, ps->sw_line[j]);
        }
    }
    if (build_trees(topo) != INCOLL_OK) {
        ps->p.line = 0;
        return kvline_error(&ps->p, "out of memory");
    }
    for (int i = 0; i < topo->nswitches; i++) {
        if (topo->sw[i].ndown > 1024) {
            ps->p.line = ps->sw_line[i];
            return kvline_error(&ps->p,
                                "switch %s has %d links down (at most 1024)",
                                topo->sw[i].name, topo->sw[i].ndown);
        }
    }
    return INCOLL_OK;
}

/* Parses text[0..len), which may hold NUL bytes (refused with their
 * line). */
static incoll_status_t parse_text(const char *text, size_t len,
                                  const char *name, topo_t *topo, char *err,
                                  size_t errlen)
{
    parser_t ps;
    char *f[MAX_FIELDS];
    int nf, ret;
    incoll_status_t status;

    memset(topo, 0, sizeof(*topo));
    memset(&ps, 0, sizeof(ps));
    ps.topo = topo;
    topo_caps_default(&ps.defaults);
    status = kvline_init(&ps.p, name, text, len, MAX_LINE, err, errlen);
    while (status == INCOLL_OK &&
           (ret = kvline_next(&ps.p, f, MAX_FIELDS, &nf)) != 0)
        status = ret < 0 ? INCOLL_ERR_CONFIG : parse_line(&ps, f, nf);
    if (status == INCOLL_OK)
        status = finish(&ps);
    kvline_done(&ps.p);
    free(ps.links);
    free(ps.hostleaf);
    free(ps.sw_line);
    free(ps.sw_ix.t.slots);
    free(ps.host_ix.t.slots);
    if (status != INCOLL_OK)
        topo_free(topo);
    return status;
}

incoll_status_t topo_parse(const char *text, const char *name, topo_t *topo,
                           char *err, size_t errlen)
{
    return parse_text(text, strlen(text), name, topo, err, errlen);
}

incoll_status_t topo_load(const char *path, topo_t *topo, char *err,
                          size_t errlen)
{
    char *text;
    size_t len;
    incoll_status_t status;

    memset(topo, 0, sizeof(*topo));
    status = kvline_read_file(path, MAX_FILE, &text, &len, err, errlen);
    if (status != INCOLL_OK)
        return status;
    status = parse_text(text, len, path, topo, err, errlen);
    free(text);
    return status;
}

/* ---- the generator ---- */

static int add_switch(topo_t *topo, const char *name, int level,
                      const topo_caps_t *caps)
{
    topo_switch_t *s = &topo->sw[topo->nswitches];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->level = level;
    s->addr = INCOLL_EP_NONE;
    s->caps = *caps;
    return topo->nswitches++;
}

static void add_link(topo_t *topo, int lo, int hi)
{
    topo->links[topo->nlinks][0] = lo;
    topo->links[topo->nlinks][1] = hi;
    topo->nlinks++;
}

incoll_status_t topo_fat_tree(int radix, int levels, int nhosts,
                              const topo_caps_t *caps, topo_t *topo)
{
    topo_caps_t c;
    int half = radix / 2, nleaves, nsw, nlinks, maxhosts;
    char name[TOPO_NAME_MAX];

    if (radix < 2 || radix > 64 || radix % 2 || (levels != 2 && levels != 3) ||
        nhosts < 0)
        return INCOLL_ERR_INVALID_ARG;
    if (caps)
        c = *caps;
    else
        topo_caps_default(&c);
    if (levels == 2) {
        nleaves = radix;
        nsw = radix + half;
        nlinks = radix * half;
    } else {
        nleaves = radix * half;
        nsw = radix * radix + half * half;
        nlinks = radix * half * half * 2;
    }
    maxhosts = nleaves * half;
    if (nhosts == 0)
        nhosts = maxhosts;
    if (nhosts > maxhosts)
        return INCOLL_ERR_INVALID_ARG;
    memset(topo, 0, sizeof(*topo));
    topo->sw = calloc((size_t)nsw, sizeof(*topo->sw));
    topo->links = calloc((size_t)nlinks, sizeof(*topo->links));
    topo->hosts = calloc((size_t)nhosts, sizeof(*topo->hosts));
    if (topo->sw == NULL || topo->links == NULL || topo->hosts == NULL) {
        topo_free(topo);
        return INCOLL_ERR_NO_MEMORY;
    }
    if (levels == 2) {
        for (int i = 0; i < radix; i++) {
            snprintf(name, sizeof(name), "l%d", i);
            add_switch(topo, name, 1, &c);
        }
        for (int j = 0; j < half; j++) {
            snprintf(name, sizeof(name), "s%d", j);
            add_switch(topo, name, 2, &c);
        }
        for (int i = 0; i < radix; i++)
            for (int j = 0; j < half; j++)
                add_link(topo, i, radix + j);
    } else {
        int edge0 = 0, agg0 = radix * half, core0 = 2 * radix * half;
        for (int p = 0; p < radix; p++)
            for (int i = 0; i < half; i++) {
                snprintf(name, sizeof(name), "e%d-%d", p, i);
                add_switch(topo, name, 1, &c);
            }
        for (int p = 0; p < radix; p++)
            for (int j = 0; j < half; j++) {
                snprintf(name, sizeof(name), "a%d-%d", p, j);
                add_switch(topo, name, 2, &c);
            }
        for (int j = 0; j < half; j++)
            for (int m = 0; m < half; m++) {
                snprintf(name, sizeof(name), "c%d-%d", j, m);
                add_switch(topo, name, 3, &c);
            }
        for (int p = 0; p < radix; p++)
            for (int i = 0; i < half; i++)
                for (int j = 0; j < half; j++)
                    add_link(topo, edge0 + p * half + i, agg0 + p * half + j);
        for (int p = 0; p < radix; p++)
            for (int j = 0; j < half; j++)
                for (int m = 0; m < half; m++)
                    add_link(topo, agg0 + p * half + j, core0 + j * half + m);
    }
    for (int h = 0; h < nhosts; h++) {
        snprintf(topo->hosts[h].name, TOPO_NAME_MAX, "h%d", h);
        topo->hosts[h].leaf = h / half;
        topo->hosts[h].ip = 0;
    }
    topo->nhosts = nhosts;
    if (build_trees(topo) != INCOLL_OK) {
        topo_free(topo);
        return INCOLL_ERR_NO_MEMORY;
    }
    return INCOLL_OK;
}

incoll_status_t topo_save(const topo_t *topo, const char *path)
{
    char tmp[4096], ep[32], ops[160], dts[200];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (f == NULL)
        return INCOLL_ERR_IO;
    fprintf(f,
            "# incoll topology; format: docs/topology.md\n"
            "# %d switches, %d links, %d hosts, %d trees\n",
            topo->nswitches, topo->nlinks, topo->nhosts, topo->ntrees);
    for (int i = 0; i < topo->nswitches; i++) {
        const topo_switch_t *s = &topo->sw[i];
        fprintf(f,
                "switch %s level=%d addr=%s ops=%s dtypes=%s payload=%u "
                "slots=%u groups=%u buffer=%" PRIu64 "\n",
                s->name, s->level,
                s->addr == INCOLL_EP_NONE
                    ? "-"
                    : wire_ep_str(s->addr, ep, sizeof(ep)),
                topo_ops_str(s->caps.ops, ops, sizeof(ops)),
                topo_dtypes_str(s->caps.dtypes, dts, sizeof(dts)),
                s->caps.max_payload, s->caps.slots, s->caps.max_groups,
                s->caps.buffer_bytes);
    }
    for (int l = 0; l < topo->nlinks; l++)
        fprintf(f, "link %s %s\n", topo->sw[topo->links[l][0]].name,
                topo->sw[topo->links[l][1]].name);
    for (int h = 0; h < topo->nhosts; h++) {
        const topo_host_t *hh = &topo->hosts[h];
        if (hh->ip) {
            struct in_addr in = {.s_addr = htonl(hh->ip)};
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &in, ip, sizeof(ip));
            fprintf(f, "host %s leaf=%s addr=%s\n", hh->name,
                    topo->sw[hh->leaf].name, ip);
        } else {
            fprintf(f, "host %s leaf=%s\n", hh->name, topo->sw[hh->leaf].name);
        }
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return INCOLL_ERR_IO;
    }
    return INCOLL_OK;
}
