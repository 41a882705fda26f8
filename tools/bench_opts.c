/*
 * The benchmarks' option table and its parser: see bench_opts.h.
 */
#include "bench_opts.h"

#include "fabric/daemon.h"
#include "fabric/emu.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int letter;
    bench_arg_t kind;
    double min, max;
    const char *meta;
    const char *doc;
} opt_row_t;

static const opt_row_t rows[BENCH_OPT_COUNT] = {
#define BENCH_OPT_ROW(id, name, letter, kind, min, max, meta, doc)             \
    {name, letter, kind, min, max, meta, doc},
    BENCH_OPTIONS(BENCH_OPT_ROW)
#undef BENCH_OPT_ROW
};

/* ---- sizes ------------------------------------------------------------ */

static int parse_size(const char *s, size_t *v_p)
{
    char *end;
    unsigned long long v;
    uint64_t mult = 1;

    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    switch (*end) {
    case 'k':
    case 'K':
        mult = 1024;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1024 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mult = 1024ull * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'i' || *end == 'B')
        end++;
    if (*end == 'B')
        end++;
    if (*end != '\0' || v == 0 || v > (1ull << 40) / mult)
        return -1;
    *v_p = (size_t)(v * mult);
    return 0;
}

int bench_sizes_parse(const char *text, size_t *min_p, size_t *max_p)
{
    char buf[64];
    char *colon;
    size_t lo, hi;

    if (text == NULL || strlen(text) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", text);
    colon = strchr(buf, ':');
    if (colon)
        *colon = '\0';
    if (parse_size(buf, &lo) != 0)
        return -1;
    hi = lo;
    if (colon && parse_size(colon + 1, &hi) != 0)
        return -1;
    if (hi < lo)
        return -1;
    *min_p = lo;
    *max_p = hi;
    return 0;
}

const char *bench_size_str(size_t b, char *buf, size_t len)
{
    if (b >= (1u << 30) && b % (1u << 30) == 0)
        snprintf(buf, len, "%zuG", b >> 30);
    else if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(buf, len, "%zuM", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(buf, len, "%zuK", b >> 10);
    else
        snprintf(buf, len, "%zu", b);
    return buf;
}

const char *bench_sizes_str(size_t min, size_t max, char *buf, size_t len)
{
    char lo[24], hi[24];
    snprintf(buf, len, "%s:%s", bench_size_str(min, lo, sizeof(lo)),
             bench_size_str(max, hi, sizeof(hi)));
    return buf;
}

int bench_size_list(size_t min, size_t max, size_t **sizes_p)
{
    int n = 0;
    size_t *v;
    for (size_t s = min; s <= max; s *= 2) {
        n++;
        if (s > SIZE_MAX / 2)
            break;
    }
    v = calloc((size_t)n, sizeof(*v));
    if (v == NULL)
        return -1;
    n = 0;
    for (size_t s = min; s <= max; s *= 2) {
        v[n++] = s;
        if (s > SIZE_MAX / 2)
            break;
    }
    *sizes_p = v;
    return n;
}

/* ---- algorithms ------------------------------------------------------- */

int bench_algo_id(const bench_cmd_t *cmd, const char *name)
{
    for (int id = 0; cmd->algo_name && id < BENCH_ALGO_IDS; id++) {
        const char *n = cmd->algo_name(cmd, id);
        if (n && strcmp(n, name) == 0)
            return id;
    }
    return -1;
}

/* "inc, rd, ring, ...": every name of cmd, for messages and --help. */
static void algo_names(const bench_cmd_t *cmd, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int id = 0; cmd->algo_name && id < BENCH_ALGO_IDS && off < len; id++) {
        const char *n = cmd->algo_name(cmd, id);
        if (n)
            off += (size_t)snprintf(buf + off, len - off, "%s%s",
                                    off ? ", " : "", n);
    }
}

void bench_algos_str(const bench_cmd_t *cmd, const bench_algos_t *a, char *buf,
                     size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < a->n && off < len; i++) {
        char sz[32] = "";
        const char *name = cmd->algo_name(cmd, a->id[i]);
        if (a->max[i])
            bench_size_str(a->max[i], sz + 1, sizeof(sz) - 1), sz[0] = ':';
        off += (size_t)snprintf(buf + off, len - off, "%s%s%s", i ? "," : "",
                                name ? name : "?", sz);
    }
}

int bench_algos_find(const bench_algos_t *a, int id)
{
    for (int i = 0; i < a->n; i++)
        if (a->id[i] == id)
            return i;
    return -1;
}

int bench_algos_active(const bench_algos_t *a, int i, size_t bytes)
{
    return a->max[i] == 0 || bytes <= a->max[i];
}

int bench_iters_for(const bench_opts_t *o, size_t bytes, size_t budget, int lo,
                    int hi)
{
    size_t n;
    if (o->iters > 0)
        return o->iters;
    n = bytes ? budget / bytes : (size_t)hi;
    return n < (size_t)lo ? lo : n > (size_t)hi ? hi : (int)n;
}

int bench_warmup_for(const bench_opts_t *o, int iters)
{
    if (o->warmup >= 0)
        return o->warmup;
    return iters / 10 < 1 ? 1 : iters / 10;
}

/* ---- the parser ------------------------------------------------------- */

typedef struct {
    const bench_cmd_t *cmd;
    char *err;
    size_t errlen;
} parse_t;

/* Writes the one-line message; returns 2 (the exit code of bad input). */
static int fail(parse_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int fail(parse_t *p, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "incoll %s: %s", p->cmd->who, msg);
    return 2;
}

/* "-n/--hosts" or "--iters": how the user may have spelt it. */
static const char *spelt(bench_opt_id_t id, char *buf, size_t len)
{
    if (rows[id].letter)
        snprintf(buf, len, "-%c/--%s", rows[id].letter, rows[id].name);
    else
        snprintf(buf, len, "--%s", rows[id].name);
    return buf;
}

static void range_of(const bench_cmd_t *cmd, bench_opt_id_t id, double *min_p,
                     double *max_p)
{
    *min_p = rows[id].min;
    *max_p = rows[id].max;
    for (const bench_range_t *r = cmd->ranges; r && r->max >= r->min; r++)
        if (r->id == id) {
            *min_p = r->min;
            *max_p = r->max;
        }
}

static int parse_algos(parse_t *p, const char *text, bench_algos_t *a)
{
    char buf[512], have[512], *save = NULL;

    algo_names(p->cmd, have, sizeof(have));
    memset(a, 0, sizeof(*a));
    if (strlen(text) >= sizeof(buf))
        return fail(p, "--algos: list too long: '%.40s...'", text);
    snprintf(buf, sizeof(buf), "%s", text);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        size_t lo = 0, hi = 0;
        int id;
        if (colon) {
            *colon = '\0';
            if (bench_sizes_parse(colon + 1, &lo, &hi) != 0 || lo != hi)
                return fail(p,
                            "--algos: bad size limit '%s' of %s in '%s' "
                            "(want ALGO:SIZE, e.g. rd:256K)",
                            colon + 1, t, text);
        }
        id = bench_algo_id(p->cmd, t);
        if (id < 0)
            return fail(p, "--algos: unknown algorithm '%s' in '%s' (have: %s)",
                        t, text, have);
        if (bench_algos_find(a, id) >= 0)
            return fail(p, "--algos: '%s' is listed twice in '%s'", t, text);
        if (a->n == BENCH_MAX_ALGOS)
            return fail(p, "--algos: more than %d algorithms in '%s'",
                        BENCH_MAX_ALGOS, text);
        a->max[a->n] = hi;
        a->id[a->n++] = id;
    }
    if (a->n == 0)
        return fail(p, "--algos: no algorithm in '%s' (have: %s)", text, have);
    return 0;
}

/* "0,0.001,0.01": distinct numbers in [min, max], in the given order. */
static int parse_list(parse_t *p, bench_opt_id_t id, const char *text,
                      double *v, int *n_p)
{
    const char *s = text;
    double min, max;
    int n = 0;

    range_of(p->cmd, id, &min, &max);
    while (*s) {
        char *end;
        double x;
        int dup = 0;
        errno = 0;
        x = strtod(s, &end);
        if (errno || end == s || !(x >= min && x <= max) ||
            (*end && *end != ','))
            break;
        for (int i = 0; i < n; i++)
            dup |= v[i] == x;
        if (dup || n == BENCH_MAX_LOSS)
            break;
        v[n++] = x;
        s = *end ? end + 1 : end;
        if (*end && !*s)
            break;
    }
    if (*s || n == 0 || text[strlen(text) - 1] == ',')
        return fail(p,
                    "--%s wants up to %d distinct numbers in [%g, %g], "
                    "comma-separated (e.g. 0,0.001,0.01,0.05), not '%s'",
                    rows[id].name, BENCH_MAX_LOSS, min, max, text);
    *n_p = n;
    return 0;
}

/* Where an option of a plain kind keeps its value in bench_opts_t: an
 * int (BENCH_ARG_INT; a flag sets it to 1), a size_t (SIZE), a double
 * (DOUBLE) or the text itself (STR). The options without a row here
 * are checked and stored by store_special. */
typedef struct {
    int plain;
    size_t off;
} opt_field_t;

#define AT(f)                                                                  \
    {                                                                          \
        1, offsetof(bench_opts_t, f)                                           \
    }
static const opt_field_t fields[BENCH_OPT_COUNT] = {
    [BENCH_OPT_HOSTS] = AT(hosts),
    [BENCH_OPT_PPN] = AT(ppn),
    [BENCH_OPT_FABRIC] = AT(fabric),
    [BENCH_OPT_EMULATE] = AT(emulate),
    [BENCH_OPT_RADIX] = AT(radix),
    [BENCH_OPT_BYTES] = AT(bytes),
    [BENCH_OPT_ITERS] = AT(iters),
    [BENCH_OPT_WARMUP] = AT(warmup),
    [BENCH_OPT_SOCKETS] = AT(sockets),
    [BENCH_OPT_CSV] = AT(csv),
    [BENCH_OPT_POOL] = AT(pool),
    [BENCH_OPT_SECONDS] = AT(seconds),
    [BENCH_OPT_DTYPE] = AT(dtype),
    [BENCH_OPT_OP] = AT(op),
    [BENCH_OPT_NSRC] = AT(nsrc),
    [BENCH_OPT_IMPL] = AT(impl),
    [BENCH_OPT_CALIB] = AT(calib),
    [BENCH_OPT_REFERENCE] = AT(reference),
    [BENCH_OPT_BURST] = AT(burst),
    [BENCH_OPT_ROUNDS] = AT(rounds),
    [BENCH_OPT_JOBS] = AT(jobs),
    [BENCH_OPT_THREADS] = AT(threads),
    [BENCH_OPT_KEEP] = AT(keep),
    [BENCH_OPT_TIMEOUT] = AT(timeout_s),
    [BENCH_OPT_DRY_RUN] = AT(dry_run),
    [BENCH_OPT_OUT] = AT(out),
    [BENCH_OPT_GATE] = AT(gate),
    [BENCH_OPT_PROGRESS] = AT(progress),
    [BENCH_OPT_A] = AT(a),
    [BENCH_OPT_B] = AT(b),
    [BENCH_OPT_PT] = AT(pt),
};
#undef AT

/* Reads the value of a numeric option (INT, SIZE, DOUBLE) into *iv_p,
 * *zv_p or *dv_p, checked against its range. Returns 0 or 2. */
static int read_number(parse_t *p, bench_opt_id_t id, const char *name,
                       const char *arg, long long *iv_p, size_t *zv_p,
                       double *dv_p)
{
    const opt_row_t *r = &rows[id];
    double min, max;

    range_of(p->cmd, id, &min, &max);
    if (r->kind == BENCH_ARG_INT) {
        char *end;
        errno = 0;
        *iv_p = strtoll(arg, &end, 10);
        if (errno || end == arg || *end || *iv_p < (long long)min ||
            *iv_p > (long long)max)
            return fail(p, "%s wants %s in %.0f..%.0f, not '%s'", name, r->meta,
                        min, max, arg);
    } else if (r->kind == BENCH_ARG_SIZE) {
        size_t hi;
        if (bench_sizes_parse(arg, zv_p, &hi) != 0 || *zv_p != hi ||
            (double)*zv_p < min || (double)*zv_p > max)
            return fail(p,
                        "%s wants one size in %.0f..%.0f bytes (K/M/G "
                        "suffixes), not '%s'",
                        name, min, max, arg);
    } else if (r->kind == BENCH_ARG_DOUBLE) {
        char *end;
        errno = 0;
        *dv_p = strtod(arg, &end);
        if (errno || end == arg || *end || !(*dv_p >= min && *dv_p <= max))
            return fail(p, "%s wants %s in %g..%g, not '%s'", name, r->meta,
                        min, max, arg);
    }
    return 0;
}

/* --pair: same-leaf, cross-leaf or the ranks A,B. */
static int store_pair(parse_t *p, const char *name, const char *arg,
                      bench_opts_t *o)
{
    int a, b;
    char c;

    if (strcmp(arg, "same-leaf") != 0 && strcmp(arg, "cross-leaf") != 0) {
        if (sscanf(arg, "%d,%d%c", &a, &b, &c) != 2 || a < 0 || b < 0)
            return fail(p, "%s wants same-leaf, cross-leaf or A,B, not '%s'",
                        name, arg);
        o->a = a;
        o->b = b;
    }
    o->pair = arg;
    return 0;
}

/* --sizes MIN:MAX, up to the command's largest size. */
static int store_sizes(parse_t *p, const char *name, const char *arg,
                       bench_opts_t *o)
{
    size_t lim = p->cmd->max_size ? p->cmd->max_size : (size_t)1 << 30;
    char l[24];

    if (bench_sizes_parse(arg, &o->min_size, &o->max_size) != 0)
        return fail(p,
                    "%s wants MIN:MAX in bytes, MIN <= MAX, K/M/G "
                    "suffixes (e.g. 8:4M), not '%s'",
                    name, arg);
    if (o->max_size > lim)
        return fail(p, "%s: sizes above %s are not supported, not '%s'", name,
                    bench_size_str(lim, l, sizeof(l)), arg);
    return 0;
}

/* The options that are more than a value in a range (no row in fields):
 * checked and stored. Returns 0 or 2 (err written). */
static int store_special(parse_t *p, bench_opt_id_t id, const char *name,
                         const char *arg, bench_opts_t *o)
{
    switch (id) {
    case BENCH_OPT_AN_CPUS:
    case BENCH_OPT_HOST_CPUS: {
        cpu_set_t set;
        char why[512];
        if (fabric_cpus_parse(arg, &set, why, sizeof(why)) != 0)
            return fail(p, "%s: %s", name, why);
        *(id == BENCH_OPT_AN_CPUS ? &o->an_cpus : &o->host_cpus) = arg;
        return 0;
    }
    case BENCH_OPT_LINK_RATE:
        if (emu_parse_rate(arg, &o->link_rate) != 0)
            return fail(p,
                        "%s wants a rate such as 100mbit or 1gbit "
                        "(100 kbit/s .. 100 Gbit/s), not '%s'",
                        name, arg);
        return 0;
    case BENCH_OPT_SIZES:
        return store_sizes(p, name, arg, o);
    case BENCH_OPT_ALGOS:
        if (parse_algos(p, arg, &o->algos) != 0)
            return 2;
        o->algos_text = arg;
        return 0;
    case BENCH_OPT_PAIR:
        return store_pair(p, name, arg, o);
    case BENCH_OPT_PLOT: {
        size_t l = strlen(arg);
        if (l < 5 || strcmp(arg + l - 4, ".png") != 0)
            return fail(p, "%s wants a file name ending in .png, not '%s'",
                        name, arg);
        o->plot = arg;
        return 0;
    }
    case BENCH_OPT_LOSS:
        return parse_list(p, id, arg, o->loss, &o->nloss) != 0 ? 2 : 0;
    default:
        return 0;
    }
}

/* Stores optarg of option id into o. Returns 0 or 2 (err written). */
static int store(parse_t *p, bench_opt_id_t id, const char *arg,
                 bench_opts_t *o)
{
    char name[48];
    long long iv = 0;
    double dv = 0;
    size_t zv = 0;

    spelt(id, name, sizeof(name));
    if (read_number(p, id, name, arg, &iv, &zv, &dv) != 0)
        return 2;
    if (fields[id].plain) {
        char *f = (char *)o + fields[id].off;
        switch (rows[id].kind) {
        case BENCH_ARG_FLAG:
            *(int *)f = 1;
            break;
        case BENCH_ARG_INT:
            *(int *)f = (int)iv;
            break;
        case BENCH_ARG_SIZE:
            *(size_t *)f = zv;
            break;
        case BENCH_ARG_DOUBLE:
            *(double *)f = dv;
            break;
        default:
            *(const char **)f = arg;
            break;
        }
    } else if (store_special(p, id, name, arg, o) != 0) {
        return 2;
    }
    o->given |= 1ull << id;
    return 0;
}

void bench_opts_defaults(bench_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->hosts = 8;
    o->ppn = 1;
    o->radix = 4;
    o->min_size = 8;
    o->max_size = 1u << 20;
    o->warmup = -1;
    o->timeout_s = 1800;
    o->a = o->b = -1;
    o->pair = "same-leaf";
}

int bench_opts_parse(const bench_cmd_t *cmd, int argc, char **argv,
                     bench_opts_t *o, char *err, size_t errlen)
{
    struct option lo[BENCH_OPT_COUNT + 1];
    char shortopts[2 * BENCH_OPT_COUNT + 2] = ":";
    size_t ns = 1;
    int nl = 0, opt, idx;
    parse_t p = {cmd, err, errlen};

    err[0] = '\0';
    bench_opts_defaults(o);
    if (cmd->defaults)
        cmd->defaults(cmd, o);
    /* The default list must parse: it names the algorithms run when
     * --algos is not given. */
    if (o->algos_text && cmd->algo_name &&
        parse_algos(&p, o->algos_text, &o->algos) != 0)
        return 2;
    for (int id = 0; id < BENCH_OPT_COUNT; id++) {
        if (!((cmd->accepts >> id) & 1))
            continue;
        lo[nl].name = rows[id].name;
        lo[nl].has_arg =
            rows[id].kind == BENCH_ARG_FLAG ? no_argument : required_argument;
        lo[nl].flag = NULL;
        lo[nl].val = 1000 + id;
        nl++;
        if (rows[id].letter) {
            shortopts[ns++] = (char)rows[id].letter;
            if (rows[id].kind != BENCH_ARG_FLAG)
                shortopts[ns++] = ':';
        }
    }
    memset(&lo[nl], 0, sizeof(lo[nl]));
    shortopts[ns] = '\0';
    optind = 0; /* a fresh start: another argv than last time */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, shortopts, lo, &idx)) != -1) {
        bench_opt_id_t id = BENCH_OPT_COUNT;
        if (opt == ':')
            return fail(&p, "%s needs a value", argv[optind - 1]);
        if (opt == '?')
            return fail(&p, "unknown option '%s' (see --help)",
                        argv[optind - 1]);
        if (opt >= 1000)
            id = (bench_opt_id_t)(opt - 1000);
        else
            for (int i = 0; i < BENCH_OPT_COUNT; i++)
                if (rows[i].letter == opt)
                    id = (bench_opt_id_t)i;
        if (id == BENCH_OPT_HELP) {
            bench_opts_usage(cmd, stdout);
            return 1;
        }
        if (id == BENCH_OPT_COUNT)
            return fail(&p, "unknown option '%s' (see --help)",
                        argv[optind - 1]);
        if (store(&p, id, optarg, o) != 0)
            return 2;
    }
    if (optind != argc)
        return fail(&p, "unexpected argument '%s' (see --help)", argv[optind]);
    if (o->fabric && (o->emulate || o->link_rate))
        return fail(&p, "--fabric uses a fabric as it is: it does not go "
                        "with --emulate or --link-rate");
    if (o->fabric && o->an_cpus)
        return fail(&p, "--an-cpus places the ANs of a fabric brought up "
                        "for the run: it does not go with --fabric "
                        "(`incoll fabric up --an-cpus` places a fabric's)");
    if (o->link_rate && !o->emulate)
        return fail(&p, "--link-rate needs --emulate (loopback has no link "
                        "rate)");
    return 0;
}

int bench_opts_get(const bench_cmd_t *cmd, int argc, char **argv,
                   bench_opts_t *o, int *exit_p)
{
    char err[1024];
    int rc = bench_opts_parse(cmd, argc, argv, o, err, sizeof(err));
    if (rc == 2)
        fprintf(stderr, "%s\n", err);
    *exit_p = rc == 1 ? 0 : rc;
    return rc;
}

/* ---- --help ----------------------------------------------------------- */

/* Writes text from column col on, wrapped at 78 columns, each further line
 * indented to col. */
static void put_wrapped(FILE *out, const char *text, int at, int col)
{
    const char *s = text;
    while (*s) {
        const char *brk = NULL, *e = s;
        int room = 78 - at;
        while (*e && e - s <= room) {
            if (*e == ' ')
                brk = e;
            e++;
        }
        if (!*e || brk == NULL)
            brk = e;
        fprintf(out, "%.*s\n", (int)(brk - s), s);
        s = *brk ? brk + 1 : brk;
        if (*s)
            fprintf(out, "%*s", col, "");
        at = col;
    }
}

/* " (default 8)" for the options whose default is a plain value. */
static void default_of(bench_opt_id_t id, const bench_opts_t *d, char *buf,
                       size_t len)
{
    char sz[64];
    buf[0] = '\0';
    switch (id) {
    case BENCH_OPT_HOSTS:
        snprintf(buf, len, " (default %d)", d->hosts);
        break;
    case BENCH_OPT_RADIX:
        snprintf(buf, len, " (default %d)", d->radix);
        break;
    case BENCH_OPT_SIZES:
        snprintf(buf, len, " (default %s)",
                 bench_sizes_str(d->min_size, d->max_size, sz, sizeof(sz)));
        break;
    case BENCH_OPT_ITERS:
        if (d->iters > 0)
            snprintf(buf, len, " (default %d)", d->iters);
        break;
    case BENCH_OPT_TIMEOUT:
        snprintf(buf, len, " (default %d)", d->timeout_s);
        break;
    case BENCH_OPT_BYTES:
        if (d->bytes > 0)
            snprintf(buf, len, " (default %zu)", d->bytes);
        break;
    case BENCH_OPT_POOL:
        if (d->pool > 0)
            snprintf(buf, len, " (default %zu)", d->pool);
        break;
    case BENCH_OPT_SECONDS:
        if (d->seconds > 0)
            snprintf(buf, len, " (default %g)", d->seconds);
        break;
    case BENCH_OPT_ROUNDS:
        if (d->rounds > 0)
            snprintf(buf, len, " (default %d)", d->rounds);
        break;
    case BENCH_OPT_ALGOS:
        if (d->algos_text)
            snprintf(buf, len, " (default %s)", d->algos_text);
        break;
    default:
        break;
    }
}

void bench_opts_usage(const bench_cmd_t *cmd, FILE *out)
{
    bench_opts_t d;
    char have[512];

    bench_opts_defaults(&d);
    if (cmd->defaults)
        cmd->defaults(cmd, &d);
    fprintf(out, "usage: incoll ");
    put_wrapped(out, cmd->synopsis, 14, 20);
    if (cmd->about) {
        fprintf(out, "\n");
        put_wrapped(out, cmd->about, 0, 0);
    }
    fprintf(out, "\n");
    for (int id = 0; id < BENCH_OPT_COUNT; id++) {
        const char *doc = rows[id].doc;
        char head[64], text[1024], def[96];
        int w;
        if (!((cmd->accepts >> id) & 1))
            continue;
        for (const bench_optdoc_t *x = cmd->docs; x && x->doc; x++)
            if (x->id == (bench_opt_id_t)id)
                doc = x->doc;
        if (doc == NULL)
            continue;
        default_of((bench_opt_id_t)id, &d, def, sizeof(def));
        if (id == BENCH_OPT_ALGOS && cmd->algo_name) {
            algo_names(cmd, have, sizeof(have));
            snprintf(text, sizeof(text), "%s%s; of: %s", doc, def, have);
        } else {
            snprintf(text, sizeof(text), "%s%s", doc, def);
        }
        if (rows[id].letter)
            w = snprintf(head, sizeof(head), "  -%c, --%s %s", rows[id].letter,
                         rows[id].name, rows[id].meta ? rows[id].meta : "");
        else
            w = snprintf(head, sizeof(head), "      --%s %s", rows[id].name,
                         rows[id].meta ? rows[id].meta : "");
        if (w < 24)
            fprintf(out, "%-24s", head);
        else
            fprintf(out, "%s\n%24s", head, "");
        put_wrapped(out, text, 24, 24);
    }
    if (cmd->epilog) {
        fprintf(out, "\n");
        put_wrapped(out, cmd->epilog, 0, 0);
    }
}
