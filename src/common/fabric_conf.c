#include "common/fabric_conf.h"

#include "common/kvline.h"
#include "common/settings.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint64_t fabric_random64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^
            ((uint64_t)getpid() << 48);
    }
    return v ? v : 1;
}

void fabric_conf_free(fabric_conf_t *conf)
{
    free(conf->ans);
    free(conf->hosts);
    memset(conf, 0, sizeof(*conf));
}

int fabric_conf_find_an(const fabric_conf_t *conf, const char *name)
{
    for (int i = 0; i < conf->nans; i++)
        if (strcmp(conf->ans[i].name, name) == 0)
            return i;
    return -1;
}

int fabric_conf_children(const fabric_conf_t *conf, int an, incoll_ep_t *eps,
                         int *kinds, int max)
{
    int n = 0;
    for (int i = 0; i < conf->nans; i++) {
        if (conf->ans[i].parent != an)
            continue;
        if (n < max) {
            if (eps)
                eps[n] = conf->ans[i].addr;
            if (kinds)
                kinds[n] = i;
        }
        n++;
    }
    for (int r = 0; r < conf->nhosts; r++) {
        if (conf->hosts[r].leaf != an)
            continue;
        if (n < max) {
            if (eps)
                eps[n] = fabric_conf_host_ep(conf, r);
            if (kinds)
                kinds[n] = -(r + 1);
        }
        n++;
    }
    return n;
}

incoll_ep_t fabric_conf_host_ep(const fabric_conf_t *conf, int rank)
{
    const fabric_host_t *h = &conf->hosts[rank];
    return h->port ? wire_ep(h->ip, h->port) : INCOLL_EP_NONE;
}

int fabric_conf_host_child(const fabric_conf_t *conf, int rank)
{
    int leaf = conf->hosts[rank].leaf, idx = 0;
    for (int i = 0; i < conf->nans; i++)
        if (conf->ans[i].parent == leaf)
            idx++;
    for (int r = 0; r < rank; r++)
        if (conf->hosts[r].leaf == leaf)
            idx++;
    return idx;
}

incoll_status_t fabric_conf_generate(int nhosts, int radix, fabric_conf_t *conf)
{
    int level_start, level_count, total = 0, cap;

    if (nhosts < 1 || nhosts > 1000000 || radix < 2 || radix > AGG_RADIX_MAX)
        return INCOLL_ERR_INVALID_ARG;
    memset(conf, 0, sizeof(*conf));
    /* Upper bound on switches: nhosts/radix + nhosts/radix^2 + ... + levels. */
    cap = 2 * (nhosts / radix + 2) + 64;
    conf->ans = calloc((size_t)cap, sizeof(*conf->ans));
    conf->hosts = calloc((size_t)nhosts, sizeof(*conf->hosts));
    if (conf->ans == NULL || conf->hosts == NULL) {
        fabric_conf_free(conf);
        return INCOLL_ERR_NO_MEMORY;
    }
    conf->nhosts = nhosts;
    conf->radix = radix;
    level_count = (nhosts + radix - 1) / radix;
    for (int i = 0; i < level_count; i++) {
        snprintf(conf->ans[total].name, FABRIC_NAME_MAX, "l%d", i);
        conf->ans[total].level = 1;
        conf->ans[total].parent = -1;
        total++;
    }
    for (int r = 0; r < nhosts; r++) {
        conf->hosts[r].leaf = r / radix;
        conf->hosts[r].ip = 0x7f000001u;
    }
    level_start = 0;
    conf->levels = 1;
    while (level_count > 1) {
        int next_count = (level_count + radix - 1) / radix;
        int next_start = total;
        conf->levels++;
        for (int i = 0; i < next_count; i++) {
            if (next_count == 1)
                snprintf(conf->ans[total].name, FABRIC_NAME_MAX, "root");
            else
                snprintf(conf->ans[total].name, FABRIC_NAME_MAX, "s%d-%d",
                         conf->levels, i);
            conf->ans[total].level = conf->levels;
            conf->ans[total].parent = -1;
            total++;
        }
        for (int i = 0; i < level_count; i++)
            conf->ans[level_start + i].parent = next_start + i / radix;
        level_start = next_start;
        level_count = next_count;
    }
    conf->nans = total;
    conf->admin_key = fabric_random64();
    conf->group_id = 1;
    conf->group_key = fabric_random64();
    conf->slots = (uint32_t)setting_default(SETTING_MGR_SLOTS).i;
    conf->payload = 8192;
    return INCOLL_OK;
}

incoll_status_t fabric_conf_save(const fabric_conf_t *conf, const char *path)
{
    char tmp[4096], ep[32];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (f == NULL)
        return INCOLL_ERR_IO;
    fprintf(f, "# incoll fabric, written by `incoll fabric up`; see "
               "docs/fabric-conf.md\n");
    fprintf(f,
            "fabric hosts=%d radix=%d levels=%d admin_key=0x%016" PRIx64 "\n",
            conf->nhosts, conf->radix, conf->levels, conf->admin_key);
    for (int i = 0; i < conf->nans; i++) {
        const fabric_an_t *a = &conf->ans[i];
        fprintf(f, "an name=%s level=%d addr=%s parent=%s%s%s\n", a->name,
                a->level, wire_ep_str(a->addr, ep, sizeof(ep)),
                a->parent < 0 ? "-" : conf->ans[a->parent].name,
                a->netns[0] ? " netns=" : "", a->netns);
    }
    for (int r = 0; r < conf->nhosts; r++) {
        struct in_addr in = {.s_addr = htonl(conf->hosts[r].ip)};
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &in, ip, sizeof(ip));
        const char *ns = conf->hosts[r].netns;
        if (conf->hosts[r].port)
            fprintf(f, "host rank=%d leaf=%s addr=%s:%u%s%s\n", r,
                    conf->ans[conf->hosts[r].leaf].name, ip,
                    (unsigned)conf->hosts[r].port, ns[0] ? " netns=" : "", ns);
        else
            fprintf(f, "host rank=%d leaf=%s addr=%s%s%s\n", r,
                    conf->ans[conf->hosts[r].leaf].name, ip,
                    ns[0] ? " netns=" : "", ns);
    }
    fprintf(f, "group id=%u key=0x%016" PRIx64 " slots=%u payload=%u\n",
            conf->group_id, conf->group_key, conf->slots, conf->payload);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return INCOLL_ERR_IO;
    }
    return INCOLL_OK;
}

static incoll_status_t need_u64(kvline_t *lx, char **f, int nf, const char *key,
                                uint64_t min, uint64_t max, uint64_t *v)
{
    const char *s = kvline_get(f, nf, 1, key);
    if (s == NULL)
        return kvline_error(lx, "%s record without %s=", f[0], key);
    if (kvline_u64(s, v) != 0 || *v < min || *v > max)
        return kvline_error(lx, "bad %s '%s' (want %" PRIu64 "..%" PRIu64 ")",
                            key, s, min, max);
    return INCOLL_OK;
}

/*
 * Copies the optional netns=NAME field into buf (left "" when absent).
 * Names are what `ip netns` accepts and we can put on a command line:
 * letters, digits, '.', '_' and '-'.
 */
static incoll_status_t opt_netns(kvline_t *lx, char **f, int nf, char *buf)
{
    const char *s = kvline_get(f, nf, 1, "netns");
    size_t len;
    if (s == NULL)
        return INCOLL_OK;
    len = strlen(s);
    if (len == 0 || len >= FABRIC_NETNS_MAX || strcmp(s, ".") == 0 ||
        strcmp(s, "..") == 0 ||
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789._-") != len)
        return kvline_error(lx,
                            "bad netns '%s' (want 1..%d of A-Z a-z 0-9 . _ -)",
                            s, FABRIC_NETNS_MAX - 1);
    memcpy(buf, s, len + 1);
    return INCOLL_OK;
}

/* The limits of docs/fabric-conf.md: words per record (the kind and 15
 * fields), characters per line but the newline, bytes per file. */
#define MAX_FIELDS 16
#define MAX_LINE 1023
#define MAX_FILE (256u << 20)

/* What fabric_conf_load keeps while it reads: names are resolved after the
 * last record, so each AN's parent and each host's leaf is kept as text,
 * with the line it came from for the messages. */
typedef struct {
    kvline_t lx;
    fabric_conf_t *conf;
    char (*parents)[FABRIC_NAME_MAX]; /* per AN */
    char (*leaves)[FABRIC_NAME_MAX];  /* per host */
    int *an_lines, *host_lines;
    int seen_fabric, seen_group, cap_ans, nhosts_seen;
    int fabric_line;
} conf_parse_t;

/* "fabric hosts= radix= levels= admin_key=": once, before any host. */
static incoll_status_t parse_fabric(conf_parse_t *p, char **f, int nf)
{
    fabric_conf_t *conf = p->conf;
    incoll_status_t status;
    uint64_t v;

    if (p->seen_fabric++)
        return kvline_error(&p->lx, "second fabric record");
    p->fabric_line = p->lx.line;
    if ((status = need_u64(&p->lx, f, nf, "hosts", 1, 1000000, &v)))
        return status;
    conf->nhosts = (int)v;
    if ((status = need_u64(&p->lx, f, nf, "radix", 2, AGG_RADIX_MAX, &v)))
        return status;
    conf->radix = (int)v;
    if ((status = need_u64(&p->lx, f, nf, "levels", 1, 16, &v)))
        return status;
    conf->levels = (int)v;
    if ((status = need_u64(&p->lx, f, nf, "admin_key", 1, UINT64_MAX,
                           &conf->admin_key)))
        return status;
    conf->hosts = calloc((size_t)conf->nhosts, sizeof(*conf->hosts));
    p->leaves = calloc((size_t)conf->nhosts, sizeof(*p->leaves));
    p->host_lines = calloc((size_t)conf->nhosts, sizeof(*p->host_lines));
    if (!conf->hosts || !p->leaves || !p->host_lines)
        return kvline_error(&p->lx, "out of memory");
    return INCOLL_OK;
}

/* Room for one more AN in conf->ans and the parse's per-AN arrays. */
static incoll_status_t grow_ans(conf_parse_t *p)
{
    fabric_conf_t *conf = p->conf;
    int ncap;
    void *na, *np, *nl;

    if (conf->nans < p->cap_ans)
        return INCOLL_OK;
    ncap = p->cap_ans ? 2 * p->cap_ans : 16;
    na = realloc(conf->ans, (size_t)ncap * sizeof(*conf->ans));
    if (na)
        conf->ans = na;
    np = realloc(p->parents, (size_t)ncap * sizeof(*p->parents));
    if (np)
        p->parents = np;
    nl = realloc(p->an_lines, (size_t)ncap * sizeof(*p->an_lines));
    if (nl)
        p->an_lines = nl;
    if (!na || !np || !nl)
        return kvline_error(&p->lx, "out of memory");
    p->cap_ans = ncap;
    return INCOLL_OK;
}

/* "an name= level= addr= parent= [netns=]". */
static incoll_status_t parse_an(conf_parse_t *p, char **f, int nf)
{
    fabric_conf_t *conf = p->conf;
    const char *name = kvline_get(f, nf, 1, "name");
    const char *addr = kvline_get(f, nf, 1, "addr");
    const char *parent = kvline_get(f, nf, 1, "parent");
    incoll_status_t status;
    fabric_an_t *a;
    uint64_t v;

    if (!name || !*name || strlen(name) >= FABRIC_NAME_MAX)
        return kvline_error(&p->lx, "an record needs name= of 1..%d characters",
                            FABRIC_NAME_MAX - 1);
    if (fabric_conf_find_an(conf, name) >= 0)
        return kvline_error(&p->lx, "duplicate an name '%s'", name);
    if ((status = grow_ans(p)))
        return status;
    a = &conf->ans[conf->nans];
    memset(a, 0, sizeof(*a));
    snprintf(a->name, FABRIC_NAME_MAX, "%s", name);
    if ((status = need_u64(&p->lx, f, nf, "level", 1, 16, &v)))
        return status;
    a->level = (int)v;
    if (addr == NULL || wire_ep_parse(addr, &a->addr) != INCOLL_OK)
        return kvline_error(
            &p->lx, "an %s: bad or missing addr= (want a.b.c.d:port)", name);
    /* Hosts and parents know an AN by its address alone. */
    for (int i = 0; i < conf->nans; i++)
        if (conf->ans[i].addr == a->addr)
            return kvline_error(&p->lx,
                                "an %s: addr %s is also an %s's (line %d)",
                                name, addr, conf->ans[i].name, p->an_lines[i]);
    if (parent == NULL || strlen(parent) >= FABRIC_NAME_MAX)
        return kvline_error(
            &p->lx, "an %s: bad or missing parent= (a name or -)", name);
    if ((status = opt_netns(&p->lx, f, nf, a->netns)))
        return status;
    snprintf(p->parents[conf->nans], FABRIC_NAME_MAX, "%s", parent);
    p->an_lines[conf->nans] = p->lx.line;
    conf->nans++;
    return INCOLL_OK;
}

/* "host rank= leaf= addr=a.b.c.d[:port] [netns=]": after the fabric. */
static incoll_status_t parse_host(conf_parse_t *p, char **f, int nf)
{
    fabric_conf_t *conf = p->conf;
    const char *leaf = kvline_get(f, nf, 1, "leaf");
    const char *addr = kvline_get(f, nf, 1, "addr");
    incoll_status_t status;
    struct in_addr in;
    incoll_ep_t hep = 0;
    uint64_t v;

    if (!p->seen_fabric)
        return kvline_error(&p->lx, "host record before the fabric record");
    if ((status = need_u64(&p->lx, f, nf, "rank", 0, (uint64_t)conf->nhosts - 1,
                           &v)))
        return status;
    if (p->host_lines[v])
        return kvline_error(&p->lx,
                            "rank %" PRIu64 " listed twice (also line %d)", v,
                            p->host_lines[v]);
    if (leaf == NULL || !*leaf || strlen(leaf) >= FABRIC_NAME_MAX)
        return kvline_error(&p->lx,
                            "host %" PRIu64 ": bad or missing leaf=", v);
    if (addr != NULL && strchr(addr, ':') != NULL) {
        if (wire_ep_parse(addr, &hep) != INCOLL_OK)
            return kvline_error(
                &p->lx,
                "host %" PRIu64
                ": bad addr= '%s' (want a.b.c.d or a.b.c.d:port)",
                v, addr);
        conf->hosts[v].ip = (uint32_t)(hep >> 16);
        conf->hosts[v].port = (uint16_t)(hep & 0xffff);
    } else if (addr == NULL || inet_pton(AF_INET, addr, &in) != 1) {
        return kvline_error(
            &p->lx,
            "host %" PRIu64
            ": bad or missing addr= (want a.b.c.d or a.b.c.d:port)",
            v);
    } else {
        conf->hosts[v].ip = ntohl(in.s_addr);
    }
    if ((status = opt_netns(&p->lx, f, nf, conf->hosts[v].netns)))
        return status;
    snprintf(p->leaves[v], FABRIC_NAME_MAX, "%s", leaf);
    p->host_lines[v] = p->lx.line;
    p->nhosts_seen++;
    return INCOLL_OK;
}

/* "group id= key= slots= payload=": the world group, once. */
static incoll_status_t parse_group(conf_parse_t *p, char **f, int nf)
{
    fabric_conf_t *conf = p->conf;
    incoll_status_t status;
    uint64_t v;

    if (p->seen_group++)
        return kvline_error(&p->lx, "second group record");
    if ((status = need_u64(&p->lx, f, nf, "id", 1, UINT32_MAX, &v)))
        return status;
    conf->group_id = (uint32_t)v;
    if ((status =
             need_u64(&p->lx, f, nf, "key", 1, UINT64_MAX, &conf->group_key)))
        return status;
    if ((status = need_u64(&p->lx, f, nf, "slots", 1, 65535, &v)))
        return status;
    conf->slots = (uint32_t)v;
    if ((status = need_u64(&p->lx, f, nf, "payload", 8, WIRE_MAX_PAYLOAD, &v)))
        return status;
    conf->payload = (uint32_t)v;
    return INCOLL_OK;
}

static const struct {
    const char *kind;
    incoll_status_t (*parse)(conf_parse_t *p, char **f, int nf);
} record_kinds[] = {
    {"fabric", parse_fabric},
    {"an", parse_an},
    {"host", parse_host},
    {"group", parse_group},
};

/* One record: every field key=value, then its kind's parser. */
static incoll_status_t parse_record(conf_parse_t *p, char **f, int nf)
{
    for (int i = 1; i < nf; i++)
        if (strchr(f[i], '=') == NULL)
            return kvline_error(&p->lx, "field '%s' is not key=value", f[i]);
    for (size_t k = 0; k < sizeof(record_kinds) / sizeof(record_kinds[0]); k++)
        if (strcmp(f[0], record_kinds[k].kind) == 0)
            return record_kinds[k].parse(p, f, nf);
    return kvline_error(
        &p->lx, "unknown record '%s' (want fabric, an, host or group)", f[0]);
}

/* After the last record: each AN's parent and each host's leaf named by
 * an AN, parents above their children. */
static incoll_status_t resolve_names(conf_parse_t *p)
{
    fabric_conf_t *conf = p->conf;

    for (int i = 0; i < conf->nans; i++) {
        fabric_an_t *a = &conf->ans[i];
        p->lx.line = p->an_lines[i];
        if (strcmp(p->parents[i], "-") == 0) {
            a->parent = -1;
            continue;
        }
        a->parent = fabric_conf_find_an(conf, p->parents[i]);
        if (a->parent < 0)
            return kvline_error(&p->lx, "an %s: unknown parent '%s'", a->name,
                                p->parents[i]);
        if (conf->ans[a->parent].level <= a->level)
            return kvline_error(&p->lx,
                                "an %s: parent %s must be on a higher level",
                                a->name, p->parents[i]);
    }
    for (int r = 0; r < conf->nhosts; r++) {
        p->lx.line = p->host_lines[r];
        conf->hosts[r].leaf = fabric_conf_find_an(conf, p->leaves[r]);
        if (conf->hosts[r].leaf < 0)
            return kvline_error(&p->lx, "host %d: unknown leaf '%s'", r,
                                p->leaves[r]);
    }
    return INCOLL_OK;
}

/* The tree as a whole: one root, on the fabric's top level, no AN above
 * that level, every AN with 1..AGG_RADIX_MAX children. */
static incoll_status_t check_tree(conf_parse_t *p)
{
    fabric_conf_t *conf = p->conf;
    int roots = 0, root = -1;

    for (int i = 0; i < conf->nans; i++) {
        if (conf->ans[i].parent < 0) {
            roots++;
            root = i;
        }
        if (conf->ans[i].level > conf->levels) {
            p->lx.line = p->an_lines[i];
            return kvline_error(
                &p->lx, "an %s: level %d is above the fabric's levels=%d",
                conf->ans[i].name, conf->ans[i].level, conf->levels);
        }
    }
    p->lx.line = p->fabric_line;
    if (roots != 1)
        return kvline_error(
            &p->lx, "the world group needs exactly one root an, found %d",
            roots);
    if (conf->ans[root].level != conf->levels)
        return kvline_error(&p->lx,
                            "the fabric record says levels=%d but the root an "
                            "%s is on level %d",
                            conf->levels, conf->ans[root].name,
                            conf->ans[root].level);
    for (int i = 0; i < conf->nans; i++) {
        int n = fabric_conf_children(conf, i, NULL, NULL, 0);
        p->lx.line = p->an_lines[i];
        if (n == 0)
            return kvline_error(&p->lx, "an %s has no children",
                                conf->ans[i].name);
        if (n > AGG_RADIX_MAX)
            return kvline_error(&p->lx, "an %s has %d children (at most %d)",
                                conf->ans[i].name, n, AGG_RADIX_MAX);
    }
    return INCOLL_OK;
}

incoll_status_t fabric_conf_load(const char *path, fabric_conf_t *conf,
                                 char *err, size_t errlen)
{
    conf_parse_t p = {.conf = conf};
    char *text = NULL, *fields[MAX_FIELDS];
    size_t len;
    int nf, ret;
    incoll_status_t status;

    memset(conf, 0, sizeof(*conf));
    status = kvline_read_file(path, MAX_FILE, &text, &len, err, errlen);
    if (status != INCOLL_OK)
        return status;
    status = kvline_init(&p.lx, path, text, len, MAX_LINE, err, errlen);
    if (status != INCOLL_OK)
        goto out;
    while ((ret = kvline_next(&p.lx, fields, MAX_FIELDS, &nf)) > 0)
        if ((status = parse_record(&p, fields, nf)) != INCOLL_OK)
            goto out;
    if (ret < 0) {
        status = INCOLL_ERR_CONFIG;
        goto out;
    }
    p.lx.line = 0;
    if (!p.seen_fabric)
        status = kvline_error(&p.lx, "no fabric record");
    else if (!p.seen_group)
        status = kvline_error(&p.lx, "no group record");
    else if (p.nhosts_seen != conf->nhosts)
        status = kvline_error(&p.lx, "fabric has hosts=%d but %d host records",
                              conf->nhosts, p.nhosts_seen);
    else if ((status = resolve_names(&p)) == INCOLL_OK)
        status = check_tree(&p);
out:
    kvline_done(&p.lx);
    free(text);
    free(p.parents);
    free(p.leaves);
    free(p.an_lines);
    free(p.host_lines);
    if (status != INCOLL_OK)
        fabric_conf_free(conf);
    return status;
}
