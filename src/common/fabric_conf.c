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

incoll_status_t fabric_conf_load(const char *path, fabric_conf_t *conf,
                                 char *err, size_t errlen)
{
    kvline_t lx;
    char *text = NULL, *fields[MAX_FIELDS];
    size_t len;
    char(*parents)[FABRIC_NAME_MAX] = NULL;
    char(*leaves)[FABRIC_NAME_MAX] = NULL;
    int *an_lines = NULL, *host_lines = NULL;
    int seen_fabric = 0, seen_group = 0, cap_ans = 0, nhosts_seen = 0, nf, ret;
    int fabric_line = 0;
    incoll_status_t status;

    memset(conf, 0, sizeof(*conf));
    status = kvline_read_file(path, MAX_FILE, &text, &len, err, errlen);
    if (status != INCOLL_OK)
        return status;
    status = kvline_init(&lx, path, text, len, MAX_LINE, err, errlen);
    if (status != INCOLL_OK)
        goto out;
    while ((ret = kvline_next(&lx, fields, MAX_FIELDS, &nf)) > 0) {
        uint64_t v;

        for (int i = 1; i < nf; i++) {
            if (strchr(fields[i], '=') == NULL) {
                status =
                    kvline_error(&lx, "field '%s' is not key=value", fields[i]);
                goto out;
            }
        }
        if (strcmp(fields[0], "fabric") == 0) {
            if (seen_fabric++) {
                status = kvline_error(&lx, "second fabric record");
                goto out;
            }
            if ((status = need_u64(&lx, fields, nf, "hosts", 1, 1000000, &v)))
                goto out;
            conf->nhosts = (int)v;
            if ((status =
                     need_u64(&lx, fields, nf, "radix", 2, AGG_RADIX_MAX, &v)))
                goto out;
            conf->radix = (int)v;
            if ((status = need_u64(&lx, fields, nf, "levels", 1, 16, &v)))
                goto out;
            conf->levels = (int)v;
            fabric_line = lx.line;
            if ((status = need_u64(&lx, fields, nf, "admin_key", 1, UINT64_MAX,
                                   &conf->admin_key)))
                goto out;
            conf->hosts = calloc((size_t)conf->nhosts, sizeof(*conf->hosts));
            leaves = calloc((size_t)conf->nhosts, sizeof(*leaves));
            host_lines = calloc((size_t)conf->nhosts, sizeof(*host_lines));
            if (!conf->hosts || !leaves || !host_lines) {
                status = kvline_error(&lx, "out of memory");
                goto out;
            }
        } else if (strcmp(fields[0], "an") == 0) {
            const char *name = kvline_get(fields, nf, 1, "name");
            const char *addr = kvline_get(fields, nf, 1, "addr");
            const char *parent = kvline_get(fields, nf, 1, "parent");
            fabric_an_t *a;
            if (!name || !*name || strlen(name) >= FABRIC_NAME_MAX) {
                status = kvline_error(
                    &lx, "an record needs name= of 1..%d characters",
                    FABRIC_NAME_MAX - 1);
                goto out;
            }
            if (fabric_conf_find_an(conf, name) >= 0) {
                status = kvline_error(&lx, "duplicate an name '%s'", name);
                goto out;
            }
            if (conf->nans == cap_ans) {
                int ncap = cap_ans ? 2 * cap_ans : 16;
                void *na =
                    realloc(conf->ans, (size_t)ncap * sizeof(*conf->ans));
                void *np = realloc(parents, (size_t)ncap * sizeof(*parents));
                void *nl = realloc(an_lines, (size_t)ncap * sizeof(int));
                if (na)
                    conf->ans = na;
                if (np)
                    parents = np;
                if (nl)
                    an_lines = nl;
                if (!na || !np || !nl) {
                    status = kvline_error(&lx, "out of memory");
                    goto out;
                }
                cap_ans = ncap;
            }
            a = &conf->ans[conf->nans];
            memset(a, 0, sizeof(*a));
            snprintf(a->name, FABRIC_NAME_MAX, "%s", name);
            if ((status = need_u64(&lx, fields, nf, "level", 1, 16, &v)))
                goto out;
            a->level = (int)v;
            if (addr == NULL || wire_ep_parse(addr, &a->addr) != INCOLL_OK) {
                status = kvline_error(
                    &lx, "an %s: bad or missing addr= (want a.b.c.d:port)",
                    name);
                goto out;
            }
            /* Hosts and parents know an AN by its address alone. */
            for (int i = 0; i < conf->nans; i++) {
                if (conf->ans[i].addr == a->addr) {
                    status = kvline_error(
                        &lx, "an %s: addr %s is also an %s's (line %d)", name,
                        addr, conf->ans[i].name, an_lines[i]);
                    goto out;
                }
            }
            if (parent == NULL || strlen(parent) >= FABRIC_NAME_MAX) {
                status = kvline_error(
                    &lx, "an %s: bad or missing parent= (a name or -)", name);
                goto out;
            }
            if ((status = opt_netns(&lx, fields, nf, a->netns)))
                goto out;
            snprintf(parents[conf->nans], FABRIC_NAME_MAX, "%s", parent);
            an_lines[conf->nans] = lx.line;
            conf->nans++;
        } else if (strcmp(fields[0], "host") == 0) {
            const char *leaf = kvline_get(fields, nf, 1, "leaf");
            const char *addr = kvline_get(fields, nf, 1, "addr");
            struct in_addr in;
            incoll_ep_t hep = 0;
            if (!seen_fabric) {
                status =
                    kvline_error(&lx, "host record before the fabric record");
                goto out;
            }
            if ((status = need_u64(&lx, fields, nf, "rank", 0,
                                   (uint64_t)conf->nhosts - 1, &v)))
                goto out;
            if (host_lines[v]) {
                status = kvline_error(
                    &lx, "rank %" PRIu64 " listed twice (also line %d)", v,
                    host_lines[v]);
                goto out;
            }
            if (leaf == NULL || !*leaf || strlen(leaf) >= FABRIC_NAME_MAX) {
                status = kvline_error(
                    &lx, "host %" PRIu64 ": bad or missing leaf=", v);
                goto out;
            }
            if (addr != NULL && strchr(addr, ':') != NULL) {
                if (wire_ep_parse(addr, &hep) != INCOLL_OK) {
                    status = kvline_error(
                        &lx,
                        "host %" PRIu64
                        ": bad addr= '%s' (want a.b.c.d or a.b.c.d:port)",
                        v, addr);
                    goto out;
                }
                conf->hosts[v].ip = (uint32_t)(hep >> 16);
                conf->hosts[v].port = (uint16_t)(hep & 0xffff);
            } else if (addr == NULL || inet_pton(AF_INET, addr, &in) != 1) {
                status = kvline_error(
                    &lx,
                    "host %" PRIu64
                    ": bad or missing addr= (want a.b.c.d or a.b.c.d:port)",
                    v);
                goto out;
            } else {
                conf->hosts[v].ip = ntohl(in.s_addr);
            }
            if ((status = opt_netns(&lx, fields, nf, conf->hosts[v].netns)))
                goto out;
            snprintf(leaves[v], FABRIC_NAME_MAX, "%s", leaf);
            host_lines[v] = lx.line;
            nhosts_seen++;
        } else if (strcmp(fields[0], "group") == 0) {
            if (seen_group++) {
                status = kvline_error(&lx, "second group record");
                goto out;
            }
            if ((status = need_u64(&lx, fields, nf, "id", 1, UINT32_MAX, &v)))
                goto out;
            conf->group_id = (uint32_t)v;
            if ((status = need_u64(&lx, fields, nf, "key", 1, UINT64_MAX,
                                   &conf->group_key)))
                goto out;
            if ((status = need_u64(&lx, fields, nf, "slots", 1, 65535, &v)))
                goto out;
            conf->slots = (uint32_t)v;
            if ((status = need_u64(&lx, fields, nf, "payload", 8,
                                   WIRE_MAX_PAYLOAD, &v)))
                goto out;
            conf->payload = (uint32_t)v;
        } else {
            status = kvline_error(
                &lx, "unknown record '%s' (want fabric, an, host or group)",
                fields[0]);
            goto out;
        }
    }
    if (ret < 0) {
        status = INCOLL_ERR_CONFIG;
        goto out;
    }
    lx.line = 0;
    if (!seen_fabric) {
        status = kvline_error(&lx, "no fabric record");
        goto out;
    }
    if (!seen_group) {
        status = kvline_error(&lx, "no group record");
        goto out;
    }
    if (nhosts_seen != conf->nhosts) {
        status = kvline_error(&lx, "fabric has hosts=%d but %d host records",
                              conf->nhosts, nhosts_seen);
        goto out;
    }
    /* Resolve names now that every AN is known. */
    for (int i = 0; i < conf->nans; i++) {
        lx.line = an_lines[i];
        if (strcmp(parents[i], "-") == 0) {
            conf->ans[i].parent = -1;
            continue;
        }
        conf->ans[i].parent = fabric_conf_find_an(conf, parents[i]);
        if (conf->ans[i].parent < 0) {
            status = kvline_error(&lx, "an %s: unknown parent '%s'",
                                  conf->ans[i].name, parents[i]);
            goto out;
        }
        if (conf->ans[conf->ans[i].parent].level <= conf->ans[i].level) {
            status =
                kvline_error(&lx, "an %s: parent %s must be on a higher level",
                             conf->ans[i].name, parents[i]);
            goto out;
        }
    }
    for (int r = 0; r < conf->nhosts; r++) {
        lx.line = host_lines[r];
        conf->hosts[r].leaf = fabric_conf_find_an(conf, leaves[r]);
        if (conf->hosts[r].leaf < 0) {
            status =
                kvline_error(&lx, "host %d: unknown leaf '%s'", r, leaves[r]);
            goto out;
        }
    }
    {
        int roots = 0;
        for (int i = 0; i < conf->nans; i++)
            roots += conf->ans[i].parent < 0;
        int top = 0;
        for (int i = 0; i < conf->nans; i++)
            top = conf->ans[i].level > top ? conf->ans[i].level : top;
        if (top != conf->levels) {
            lx.line = fabric_line;
            status = kvline_error(&lx,
                                  "fabric has levels=%d but its ANs' highest "
                                  "level is %d",
                                  conf->levels, top);
            goto out;
        }
        lx.line = 0;
        if (roots != 1) {
            status = kvline_error(
                &lx, "the world group needs exactly one root an, found %d",
                roots);
            goto out;
        }
        for (int i = 0; i < conf->nans; i++) {
            int n = fabric_conf_children(conf, i, NULL, NULL, 0);
            if (n == 0) {
                lx.line = an_lines[i];
                status = kvline_error(&lx, "an %s has no children",
                                      conf->ans[i].name);
                goto out;
            }
            if (n > AGG_RADIX_MAX) {
                lx.line = an_lines[i];
                status = kvline_error(&lx, "an %s has %d children (at most %d)",
                                      conf->ans[i].name, n, AGG_RADIX_MAX);
                goto out;
            }
        }
    }
out:
    kvline_done(&lx);
    free(text);
    free(parents);
    free(leaves);
    free(an_lines);
    free(host_lines);
    if (status != INCOLL_OK)
        fabric_conf_free(conf);
    return status;
}
