#include "common/fabric_conf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
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
    conf->slots = 64;
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

/* Parser state for one file: error reporting with file and line. */
typedef struct {
    const char *path;
    int line;
    char *err;
    size_t errlen;
} parse_t;

static incoll_status_t perr(parse_t *p, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(p->err, p->errlen, "%s:%d: ", p->path, p->line);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < p->errlen)
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return INCOLL_ERR_CONFIG;
}

/* Finds key=value among the line's fields; returns the value or NULL. */
static const char *field(char **fields, int nfields, const char *key)
{
    size_t klen = strlen(key);
    for (int i = 1; i < nfields; i++)
        if (strncmp(fields[i], key, klen) == 0 && fields[i][klen] == '=')
            return fields[i] + klen + 1;
    return NULL;
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    if (s == NULL || *s == '\0' || *s == '-')
        return -1;
    errno = 0;
    *v = strtoull(s, &end, 0);
    return (errno || *end) ? -1 : 0;
}

static incoll_status_t need_u64(parse_t *p, char **f, int nf, const char *key,
                                uint64_t min, uint64_t max, uint64_t *v)
{
    const char *s = field(f, nf, key);
    if (s == NULL)
        return perr(p, "%s record without %s=", f[0], key);
    if (parse_u64(s, v) != 0 || *v < min || *v > max)
        return perr(p, "bad %s '%s' (want %" PRIu64 "..%" PRIu64 ")", key, s,
                    min, max);
    return INCOLL_OK;
}

/*
 * Copies the optional netns=NAME field into buf (left "" when absent).
 * Names are what `ip netns` accepts and we can put on a command line:
 * letters, digits, '.', '_' and '-'.
 */
static incoll_status_t opt_netns(parse_t *p, char **f, int nf, char *buf)
{
    const char *s = field(f, nf, "netns");
    size_t len;
    if (s == NULL)
        return INCOLL_OK;
    len = strlen(s);
    if (len == 0 || len >= FABRIC_NETNS_MAX || strcmp(s, ".") == 0 ||
        strcmp(s, "..") == 0 ||
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789._-") != len)
        return perr(p, "bad netns '%s' (want 1..%d of A-Z a-z 0-9 . _ -)", s,
                    FABRIC_NETNS_MAX - 1);
    memcpy(buf, s, len + 1);
    return INCOLL_OK;
}

#define MAX_FIELDS 16
#define MAX_LINE 1023 /* characters but the newline: docs/fabric-conf.md */

incoll_status_t fabric_conf_load(const char *path, fabric_conf_t *conf,
                                 char *err, size_t errlen)
{
    parse_t p = {path, 0, err, errlen};
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t got;
    char(*parents)[FABRIC_NAME_MAX] = NULL;
    char(*leaves)[FABRIC_NAME_MAX] = NULL;
    int *an_lines = NULL, *host_lines = NULL;
    int seen_fabric = 0, seen_group = 0, cap_ans = 0, nhosts_seen = 0;
    incoll_status_t status = INCOLL_OK;
    FILE *f;

    memset(conf, 0, sizeof(*conf));
    f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return INCOLL_ERR_CONFIG;
    }
    while ((got = getline(&line, &line_cap, f)) >= 0) {
        char *fields[MAX_FIELDS], *save = NULL, *tok, *hash;
        size_t len = (size_t)got;
        int nf = 0;
        uint64_t v;

        p.line++;
        if (len > 0 && line[len - 1] == '\n')
            len--;
        if (len > MAX_LINE) {
            status = perr(&p, "line too long (%zu characters, at most %d)", len,
                          MAX_LINE);
            goto out;
        }
        if (memchr(line, '\0', len) != NULL) {
            status = perr(&p, "NUL byte in the line");
            goto out;
        }
        hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        for (tok = strtok_r(line, " \t\r\n", &save); tok;
             tok = strtok_r(NULL, " \t\r\n", &save)) {
            if (nf == MAX_FIELDS) {
                status = perr(&p, "too many fields");
                goto out;
            }
            fields[nf++] = tok;
        }
        if (nf == 0)
            continue;
        for (int i = 1; i < nf; i++) {
            if (strchr(fields[i], '=') == NULL) {
                status = perr(&p, "field '%s' is not key=value", fields[i]);
                goto out;
            }
        }
        if (strcmp(fields[0], "fabric") == 0) {
            if (seen_fabric++) {
                status = perr(&p, "second fabric record");
                goto out;
            }
            if ((status = need_u64(&p, fields, nf, "hosts", 1, 1000000, &v)))
                goto out;
            conf->nhosts = (int)v;
            if ((status =
                     need_u64(&p, fields, nf, "radix", 2, AGG_RADIX_MAX, &v)))
                goto out;
            conf->radix = (int)v;
            if ((status = need_u64(&p, fields, nf, "levels", 1, 16, &v)))
                goto out;
            conf->levels = (int)v;
            if ((status = need_u64(&p, fields, nf, "admin_key", 1, UINT64_MAX,
                                   &conf->admin_key)))
                goto out;
            conf->hosts = calloc((size_t)conf->nhosts, sizeof(*conf->hosts));
            leaves = calloc((size_t)conf->nhosts, sizeof(*leaves));
            host_lines = calloc((size_t)conf->nhosts, sizeof(*host_lines));
            if (!conf->hosts || !leaves || !host_lines) {
                status = perr(&p, "out of memory");
                goto out;
            }
        } else if (strcmp(fields[0], "an") == 0) {
            const char *name = field(fields, nf, "name");
            const char *addr = field(fields, nf, "addr");
            const char *parent = field(fields, nf, "parent");
            fabric_an_t *a;
            if (!name || !*name || strlen(name) >= FABRIC_NAME_MAX) {
                status = perr(&p, "an record needs name= of 1..%d characters",
                              FABRIC_NAME_MAX - 1);
                goto out;
            }
            if (fabric_conf_find_an(conf, name) >= 0) {
                status = perr(&p, "duplicate an name '%s'", name);
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
                    status = perr(&p, "out of memory");
                    goto out;
                }
                cap_ans = ncap;
            }
            a = &conf->ans[conf->nans];
            memset(a, 0, sizeof(*a));
            snprintf(a->name, FABRIC_NAME_MAX, "%s", name);
            if ((status = need_u64(&p, fields, nf, "level", 1, 16, &v)))
                goto out;
            a->level = (int)v;
            if (addr == NULL || wire_ep_parse(addr, &a->addr) != INCOLL_OK) {
                status =
                    perr(&p, "an %s: bad or missing addr= (want a.b.c.d:port)",
                         name);
                goto out;
            }
            /* Hosts and parents know an AN by its address alone. */
            for (int i = 0; i < conf->nans; i++) {
                if (conf->ans[i].addr == a->addr) {
                    status =
                        perr(&p, "an %s: addr %s is also an %s's (line %d)",
                             name, addr, conf->ans[i].name, an_lines[i]);
                    goto out;
                }
            }
            if (parent == NULL || strlen(parent) >= FABRIC_NAME_MAX) {
                status = perr(&p, "an %s: bad or missing parent= (a name or -)",
                              name);
                goto out;
            }
            if ((status = opt_netns(&p, fields, nf, a->netns)))
                goto out;
            snprintf(parents[conf->nans], FABRIC_NAME_MAX, "%s", parent);
            an_lines[conf->nans] = p.line;
            conf->nans++;
        } else if (strcmp(fields[0], "host") == 0) {
            const char *leaf = field(fields, nf, "leaf");
            const char *addr = field(fields, nf, "addr");
            struct in_addr in;
            incoll_ep_t hep = 0;
            if (!seen_fabric) {
                status = perr(&p, "host record before the fabric record");
                goto out;
            }
            if ((status = need_u64(&p, fields, nf, "rank", 0,
                                   (uint64_t)conf->nhosts - 1, &v)))
                goto out;
            if (host_lines[v]) {
                status =
                    perr(&p, "rank %" PRIu64 " listed twice (also line %d)", v,
                         host_lines[v]);
                goto out;
            }
            if (leaf == NULL || !*leaf || strlen(leaf) >= FABRIC_NAME_MAX) {
                status = perr(&p, "host %" PRIu64 ": bad or missing leaf=", v);
                goto out;
            }
            if (addr != NULL && strchr(addr, ':') != NULL) {
                if (wire_ep_parse(addr, &hep) != INCOLL_OK) {
                    status =
                        perr(&p,
                             "host %" PRIu64
                             ": bad addr= '%s' (want a.b.c.d or a.b.c.d:port)",
                             v, addr);
                    goto out;
                }
                conf->hosts[v].ip = (uint32_t)(hep >> 16);
                conf->hosts[v].port = (uint16_t)(hep & 0xffff);
            } else if (addr == NULL || inet_pton(AF_INET, addr, &in) != 1) {
                status = perr(
                    &p,
                    "host %" PRIu64
                    ": bad or missing addr= (want a.b.c.d or a.b.c.d:port)",
                    v);
                goto out;
            } else {
                conf->hosts[v].ip = ntohl(in.s_addr);
            }
            if ((status = opt_netns(&p, fields, nf, conf->hosts[v].netns)))
                goto out;
            snprintf(leaves[v], FABRIC_NAME_MAX, "%s", leaf);
            host_lines[v] = p.line;
            nhosts_seen++;
        } else if (strcmp(fields[0], "group") == 0) {
            if (seen_group++) {
                status = perr(&p, "second group record");
                goto out;
            }
            if ((status = need_u64(&p, fields, nf, "id", 1, UINT32_MAX, &v)))
                goto out;
            conf->group_id = (uint32_t)v;
            if ((status = need_u64(&p, fields, nf, "key", 1, UINT64_MAX,
                                   &conf->group_key)))
                goto out;
            if ((status = need_u64(&p, fields, nf, "slots", 1, 65535, &v)))
                goto out;
            conf->slots = (uint32_t)v;
            if ((status = need_u64(&p, fields, nf, "payload", 8,
                                   WIRE_MAX_PAYLOAD, &v)))
                goto out;
            conf->payload = (uint32_t)v;
        } else {
            status =
                perr(&p, "unknown record '%s' (want fabric, an, host or group)",
                     fields[0]);
            goto out;
        }
    }
    if (ferror(f)) {
        status = perr(&p, "read error: %s", strerror(errno));
        goto out;
    }
    p.line = 0;
    if (!seen_fabric) {
        status = perr(&p, "no fabric record");
        goto out;
    }
    if (!seen_group) {
        status = perr(&p, "no group record");
        goto out;
    }
    if (nhosts_seen != conf->nhosts) {
        status = perr(&p, "fabric has hosts=%d but %d host records",
                      conf->nhosts, nhosts_seen);
        goto out;
    }
    /* Resolve names now that every AN is known. */
    for (int i = 0; i < conf->nans; i++) {
        p.line = an_lines[i];
        if (strcmp(parents[i], "-") == 0) {
            conf->ans[i].parent = -1;
            continue;
        }
        conf->ans[i].parent = fabric_conf_find_an(conf, parents[i]);
        if (conf->ans[i].parent < 0) {
            status = perr(&p, "an %s: unknown parent '%s'", conf->ans[i].name,
                          parents[i]);
            goto out;
        }
        if (conf->ans[conf->ans[i].parent].level <= conf->ans[i].level) {
            status = perr(&p, "an %s: parent %s must be on a higher level",
                          conf->ans[i].name, parents[i]);
            goto out;
        }
    }
    for (int r = 0; r < conf->nhosts; r++) {
        p.line = host_lines[r];
        conf->hosts[r].leaf = fabric_conf_find_an(conf, leaves[r]);
        if (conf->hosts[r].leaf < 0) {
            status = perr(&p, "host %d: unknown leaf '%s'", r, leaves[r]);
            goto out;
        }
    }
    {
        int roots = 0;
        for (int i = 0; i < conf->nans; i++)
            roots += conf->ans[i].parent < 0;
        p.line = 0;
        if (roots != 1) {
            status =
                perr(&p, "the world group needs exactly one root an, found %d",
                     roots);
            goto out;
        }
        for (int i = 0; i < conf->nans; i++) {
            int n = fabric_conf_children(conf, i, NULL, NULL, 0);
            if (n == 0) {
                p.line = an_lines[i];
                status = perr(&p, "an %s has no children", conf->ans[i].name);
                goto out;
            }
            if (n > AGG_RADIX_MAX) {
                p.line = an_lines[i];
                status = perr(&p, "an %s has %d children (at most %d)",
                              conf->ans[i].name, n, AGG_RADIX_MAX);
                goto out;
            }
        }
    }
out:
    fclose(f);
    free(line);
    free(parents);
    free(leaves);
    free(an_lines);
    free(host_lines);
    if (status != INCOLL_OK)
        fabric_conf_free(conf);
    return status;
}
