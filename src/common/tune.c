/*
 * The selection table (tune.h): parsing, loading, formatting. Lookups are
 * tune_lookup() in the header, inline at each call of the MPI layer.
 */
#include "common/tune.h"
#include "common/log.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const coll_names[TUNE_COLL_COUNT] = {
    "allreduce",     "reduce", "bcast",   "barrier",
    "allgather",     "gather", "scatter", "reduce_scatter_block",
    "reduce_scatter"};
static const char *const form_names[TUNE_FORM_COUNT] = {"blocking", "nb",
                                                        "persistent"};
static const char *const path_names[TUNE_PATH_COUNT] = {"inc", "mpi", "host"};
/* The host-based algorithms a path may name, by TUNE_ALGO_* value (the
 * names `incoll bench` gives them). */
static const char *const algo_names[] = {NULL, NULL, "rd", "ring",
                                         "rabenseifner"};
#define ALGO_NAMES ((int)(sizeof(algo_names) / sizeof(algo_names[0])))

/*
 * The default table, used when no tuned one exists. Made by `incoll tune`
 * on the emulated fabric (8 hosts, radix 4, 50 Mbit/s links, Open MPI
 * 4.1.4): docs/tuning.md has the command and the measurements.
 */
const char tune_default_text[] =
#include "common/tune_default.inc"
    ;

const char *tune_coll_name(int coll)
{
    if (coll == TUNE_COLL_ALL)
        return "all";
    return coll >= 0 && coll < TUNE_COLL_COUNT ? coll_names[coll] : "?";
}

const char *tune_form_name(int form)
{
    return form >= 0 && form < TUNE_FORM_COUNT ? form_names[form] : "?";
}

const char *tune_path_name(int path)
{
    return path >= 0 && path < TUNE_PATH_COUNT ? path_names[path] : "?";
}

const char *tune_algo_name(int algo)
{
    return algo >= 0 && algo < ALGO_NAMES && algo_names[algo] ? algo_names[algo]
                                                              : "?";
}

void tune_reindex(tune_table_t *t)
{
    for (int c = 0; c < TUNE_COLL_COUNT; c++)
        for (int f = 0; f < TUNE_FORM_COUNT; f++) {
            uint32_t i = 0;
            while (i < t->n &&
                   !((t->e[i].coll == c || t->e[i].coll == TUNE_COLL_ALL) &&
                     (t->e[i].forms & (1u << f))))
                i++;
            t->first[c][f] = (uint16_t)i;
        }
    t->idx_n = t->n;
}

void tune_init(tune_table_t *t, const char *source)
{
    memset(t, 0, sizeof(*t));
    t->shape_ok = -1;
    if (source)
        snprintf(t->source, sizeof(t->source), "%.*s",
                 (int)sizeof(t->source) - 1, source);
}

static void say(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* A size with an optional binary K, M, G or T suffix, all of s. */
static int parse_size(const char *s, size_t n, uint64_t *v_p)
{
    char buf[32];
    char *end;
    unsigned long long v;
    int shift = 0;

    if (n == 0 || n >= sizeof(buf) || !isdigit((unsigned char)s[0]))
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    v = strtoull(buf, &end, 0);
    if (errno != 0)
        return -1;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    case 't':
    case 'T':
        shift = 40;
        end++;
        break;
    default:
        return -1;
    }
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *v_p = (uint64_t)v << shift;
    return 0;
}

/* LO-HI, LO-, N or "*" into [*lo_p, *hi_p]; max is the open end. */
static int parse_range(const char *s, uint64_t max, uint64_t *lo_p,
                       uint64_t *hi_p)
{
    const char *dash = strchr(s, '-');
    uint64_t lo, hi;

    if (strcmp(s, "*") == 0) {
        *lo_p = 0;
        *hi_p = max;
        return 0;
    }
    if (dash == NULL) {
        if (parse_size(s, strlen(s), &lo) != 0 || lo > max)
            return -1;
        *lo_p = *hi_p = lo;
        return 0;
    }
    if (parse_size(s, (size_t)(dash - s), &lo) != 0)
        return -1;
    if (dash[1] == '\0')
        hi = max;
    else if (parse_size(dash + 1, strlen(dash + 1), &hi) != 0)
        return -1;
    if (lo > hi || hi > max)
        return -1;
    *lo_p = lo;
    *hi_p = hi;
    return 0;
}

/* COLL[:FORM] into e. */
static int parse_what(const char *s, tune_entry_t *e, char *err, size_t errlen)
{
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    int c;

    e->coll = 0;
    for (c = 0; c < TUNE_COLL_COUNT; c++)
        if (strlen(coll_names[c]) == n && strncmp(s, coll_names[c], n) == 0)
            break;
    if (c < TUNE_COLL_COUNT) {
        e->coll = (uint8_t)c;
    } else if (n == 3 && strncmp(s, "all", 3) == 0) {
        e->coll = TUNE_COLL_ALL;
    } else {
        say(err, errlen,
            "unknown collective '%.*s' (allreduce, reduce, bcast, barrier, "
            "allgather, gather, scatter, reduce_scatter_block, "
            "reduce_scatter or all)",
            (int)n, s);
        return -1;
    }
    e->forms = TUNE_FORMS_ALL;
    if (colon == NULL)
        return 0;
    for (int f = 0; f < TUNE_FORM_COUNT; f++)
        if (strcmp(colon + 1, form_names[f]) == 0) {
            e->forms = (uint8_t)(1u << f);
            return 0;
        }
    say(err, errlen, "unknown form '%s' (blocking, nb or persistent)",
        colon + 1);
    return -1;
}

/* One optional field of an entry: ranks=R, ppn=P or dtype=D. */
static int parse_opt(const char *f, tune_entry_t *e, char *err, size_t errlen)
{
    uint64_t lo, hi;

    if (strncmp(f, "ranks=", 6) == 0) {
        if (parse_range(f + 6, UINT32_MAX, &lo, &hi) != 0 || lo == 0) {
            say(err, errlen, "bad '%s' (ranks=LO-HI, LO- or N, at least 1)", f);
            return -1;
        }
        e->rlo = (uint32_t)lo;
        e->rhi = (uint32_t)hi;
        return 0;
    }
    if (strncmp(f, "ppn=", 4) == 0) {
        if (parse_range(f + 4, 0xffff, &lo, &hi) != 0 || lo == 0) {
            say(err, errlen,
                "bad '%s' (ppn=LO-HI, LO- or N ranks per host, 1 to 65535)", f);
            return -1;
        }
        e->plo = (uint16_t)lo;
        e->phi = (uint16_t)hi;
        return 0;
    }
    if (strncmp(f, "dtype=", 6) == 0) {
        if (strcmp(f + 6, "any") == 0)
            e->dmask = TUNE_DMASK_ANY;
        else if (strcmp(f + 6, "int") == 0)
            e->dmask = TUNE_DCLASS_INT;
        else if (strcmp(f + 6, "float") == 0)
            e->dmask = TUNE_DCLASS_FLOAT;
        else {
            say(err, errlen, "bad '%s' (dtype=int, float or any)", f);
            return -1;
        }
        return 0;
    }
    say(err, errlen, "unknown field '%s' (ranks=R, ppn=P or dtype=D)", f);
    return -1;
}

/* The path field: inc, mpi or a host-based algorithm's name. */
static int parse_path(const char *f, tune_entry_t *e, char *err, size_t errlen)
{
    e->path = TUNE_PATH_COUNT;
    for (int p = 0; p < TUNE_PATH_HOST; p++)
        if (strcmp(f, path_names[p]) == 0)
            e->path = (uint8_t)p;
    for (int a = 0; a < ALGO_NAMES; a++)
        if (algo_names[a] && strcmp(f, algo_names[a]) == 0) {
            e->path = TUNE_PATH_HOST;
            e->algo = (uint8_t)a;
        }
    if (e->path == TUNE_PATH_COUNT) {
        say(err, errlen,
            "unknown path '%s' (inc, mpi, or a host-based allreduce "
            "algorithm: rd, ring or rabenseifner)",
            f);
        return -1;
    }
    if (e->path == TUNE_PATH_HOST && e->coll != 0) {
        say(err, errlen,
            "path '%s' is a host-based allreduce algorithm: for allreduce "
            "entries only",
            f);
        return -1;
    }
    return 0;
}

/*
 * One entry from its fields: what, bytes, path and optionally ranks=R,
 * ppn=P, dtype=D. nf fields in f. 0 or -1 with err (the cause only).
 */
static int parse_entry(char **f, int nf, tune_entry_t *e, char *err,
                       size_t errlen)
{
    memset(e, 0, sizeof(*e));
    e->rlo = 1;
    e->rhi = UINT32_MAX;
    e->plo = 0;
    e->phi = 0xffff;
    e->dmask = TUNE_DMASK_ANY;
    if (nf < 3 || nf > 6) {
        say(err, errlen,
            "want COLL[:FORM] BYTES PATH [ranks=R] [ppn=P] [dtype=D], got "
            "%d field%s",
            nf, nf == 1 ? "" : "s");
        return -1;
    }
    if (parse_what(f[0], e, err, errlen) != 0)
        return -1;
    if (parse_range(f[1], UINT64_MAX, &e->lo, &e->hi) != 0) {
        say(err, errlen,
            "bad size range '%s' (LO-HI, LO-, N or *, with K, M, G "
            "suffixes; LO <= HI)",
            f[1]);
        return -1;
    }
    if (parse_path(f[2], e, err, errlen) != 0)
        return -1;
    for (int i = 3; i < nf; i++)
        if (parse_opt(f[i], e, err, errlen) != 0)
            return -1;
    return 0;
}

/* The shape line's words (f[1..nf-1]) into t. 0 or -1 with err. */
static int parse_shape(tune_table_t *t, char **f, int nf, char *err,
                       size_t errlen)
{
    size_t k = 0;

    t->shape[0] = '\0';
    t->s_rlo = t->s_rhi = t->s_hlo = t->s_hhi = t->s_plo = t->s_phi = 0;
    t->s_xlo = t->s_xhi = t->s_llo = t->s_lhi = 0;
    for (int i = 1; i < nf; i++) {
        static const char *const keys[] = {
            "ranks=", "hosts=", "ppn=", "radix=", "levels="};
        uint32_t *lo_hi[][2] = {{&t->s_rlo, &t->s_rhi},
                                {&t->s_hlo, &t->s_hhi},
                                {&t->s_plo, &t->s_phi},
                                {&t->s_xlo, &t->s_xhi},
                                {&t->s_llo, &t->s_lhi}};
        k += (size_t)snprintf(t->shape + k,
                              k < sizeof(t->shape) ? sizeof(t->shape) - k : 0,
                              "%s%s", i > 1 ? " " : "", f[i]);
        for (int j = 0; j < 5; j++) {
            size_t n = strlen(keys[j]);
            uint64_t lo, hi;
            if (strncmp(f[i], keys[j], n) != 0)
                continue;
            if (parse_range(f[i] + n, UINT32_MAX, &lo, &hi) != 0 || lo == 0) {
                say(err, errlen,
                    "bad shape '%s' (%sLO-HI, LO- or N, at least 1)", f[i],
                    keys[j]);
                return -1;
            }
            *lo_hi[j][0] = (uint32_t)lo;
            *lo_hi[j][1] = (uint32_t)hi;
        }
    }
    return 0;
}

/* Splits s in place at any of seps; at most max fields. Returns the
 * count, or max + 1 when there are more. */
static int split(char *s, const char *seps, char **f, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, seps, &save); tok;
         tok = strtok_r(NULL, seps, &save)) {
        if (n == max)
            return max + 1;
        f[n++] = tok;
    }
    return n;
}

int tune_parse_text(tune_table_t *t, const char *text, const char *name,
                    char *err, size_t errlen)
{
    const char *p = text;
    unsigned line = 0;

    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        char buf[512], why[256], *f[8], *hash;
        int nf;

        line++;
        if (n >= sizeof(buf)) {
            say(err, errlen, "%s:%u: line longer than %zu bytes", name, line,
                sizeof(buf) - 1);
            return -1;
        }
        memcpy(buf, p, n);
        buf[n] = '\0';
        p += n + (eol != NULL);
        if ((hash = strchr(buf, '#')) != NULL)
            *hash = '\0';
        nf = split(buf, " \t\r", f, 8);
        if (nf == 0)
            continue;
        if (strcmp(f[0], "shape") == 0) {
            if (nf > 8 || parse_shape(t, f, nf, why, sizeof(why)) != 0) {
                say(err, errlen, "%s:%u: %s", name, line,
                    nf > 8 ? "a shape line of more than 7 words" : why);
                return -1;
            }
            continue;
        }
        if (t->n == TUNE_MAX) {
            say(err, errlen, "%s:%u: more than %d entries", name, line,
                TUNE_MAX);
            return -1;
        }
        if (parse_entry(f, nf, &t->e[t->n], why, sizeof(why)) != 0) {
            say(err, errlen, "%s:%u: %s", name, line, why);
            return -1;
        }
        t->e[t->n].line = line < TUNE_NO_LINE ? (uint16_t)line : TUNE_NO_LINE;
        t->n++;
    }
    tune_reindex(t);
    return 0;
}

char *tune_read_text(const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    char *text;
    long len = 0;

    if (fp == NULL) {
        say(err, errlen, "%s: %s", path, log_strerror(errno));
        return NULL;
    }
    if (fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0 ||
        fseek(fp, 0, SEEK_SET) != 0 || len > (1 << 20)) {
        say(err, errlen, "%s: %s", path,
            len > (1 << 20) ? "larger than 1 MiB" : log_strerror(errno));
        fclose(fp);
        return NULL;
    }
    text = malloc((size_t)len + 1);
    if (text == NULL || fread(text, 1, (size_t)len, fp) != (size_t)len) {
        say(err, errlen, "%s: %s", path,
            text ? "cannot read it" : "out of memory");
        free(text);
        fclose(fp);
        return NULL;
    }
    fclose(fp);
    text[len] = '\0';
    if (memchr(text, '\0', (size_t)len)) {
        say(err, errlen, "%s: not a text file (a NUL byte in it)", path);
        free(text);
        return NULL;
    }
    return text;
}

int tune_parse_file(tune_table_t *t, const char *path, char *err, size_t errlen)
{
    char *text = tune_read_text(path, err, errlen);
    int ret;

    if (text == NULL)
        return -1;
    ret = tune_parse_text(t, text, path, err, errlen);
    free(text);
    return ret;
}

int tune_parse_override(tune_table_t *t, const char *spec, char *err,
                        size_t errlen)
{
    tune_entry_t add[TUNE_MAX];
    char copy[1024], *items[TUNE_MAX + 1], why[256];
    int n;

    if (strlen(spec) >= sizeof(copy)) {
        say(err, errlen, "INCOLL_TUNE: longer than %zu bytes",
            sizeof(copy) - 1);
        return -1;
    }
    snprintf(copy, sizeof(copy), "%s", spec);
    n = split(copy, ",", items, TUNE_MAX);
    if (n > TUNE_MAX || (uint32_t)n + t->n > TUNE_MAX) {
        say(err, errlen, "INCOLL_TUNE: more than %d entries in all", TUNE_MAX);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char item[256], *f[8];
        int nf, what_colon;
        snprintf(item, sizeof(item), "%s", items[i]);
        /* COLL[:FORM]:BYTES:PATH[:ranks=R]: the form is there when the
         * second field is one of the form names. */
        nf = split(items[i], ":", f, 7);
        what_colon = nf >= 2 && (strcmp(f[1], "blocking") == 0 ||
                                 strcmp(f[1], "nb") == 0 ||
                                 strcmp(f[1], "persistent") == 0);
        if (what_colon) {
            f[1][-1] = ':'; /* join COLL:FORM back */
            for (int k = 1; k + 1 < nf; k++)
                f[k] = f[k + 1];
            nf--;
        }
        if (nf > 6 || parse_entry(f, nf, &add[i], why, sizeof(why)) != 0) {
            if (nf > 6)
                snprintf(why, sizeof(why),
                         "want COLL[:FORM]:BYTES:PATH[:ranks=R][:ppn=P]"
                         "[:dtype=D]");
            say(err, errlen, "INCOLL_TUNE item %d '%s': %s", i + 1, item, why);
            return -1;
        }
        add[i].line = (uint16_t)(i + 1);
        add[i].from_env = 1;
    }
    memmove(&t->e[n], &t->e[0], t->n * sizeof(t->e[0]));
    memcpy(&t->e[0], add, (size_t)n * sizeof(add[0]));
    t->n += (uint32_t)n;
    tune_reindex(t);
    snprintf(t->env, sizeof(t->env), "%s", spec);
    return 0;
}

int tune_load(tune_table_t *t, const char *file, const char *fabric_dir,
              const char *override, char *err, size_t errlen)
{
    char path[4096];
    struct stat sb;
    int ret = 0;

    if (file && *file) {
        if (strcmp(file, "none") == 0) {
            tune_init(t, "none (INCOLL_TUNE_FILE=none)");
        } else {
            tune_init(t, file);
            ret = tune_parse_file(t, file, err, errlen);
        }
    } else if (fabric_dir && *fabric_dir &&
               snprintf(path, sizeof(path), "%s/tune.conf", fabric_dir) <
                   (int)sizeof(path) &&
               stat(path, &sb) == 0) {
        tune_init(t, path);
        ret = tune_parse_file(t, path, err, errlen);
    } else {
        tune_init(t, "built-in");
        ret = tune_parse_text(t, tune_default_text, "built-in", err, errlen);
    }
    if (ret == 0 && override && *override)
        ret = tune_parse_override(t, override, err, errlen);
    if (ret != 0)
        tune_init(t, "none (an error)");
    return ret;
}

void tune_entry_where(const tune_table_t *t, int i, char *buf, size_t len)
{
    if (i < 0 || (uint32_t)i >= t->n) {
        snprintf(buf, len, "no entry (the default, inc)");
        return;
    }
    if (t->e[i].from_env)
        snprintf(buf, len, "INCOLL_TUNE item %u", t->e[i].line);
    else
        snprintf(buf, len, "%s:%u", t->source, t->e[i].line);
}

/* A size in the file's syntax: with a suffix when it divides evenly. */
static void fmt_size(uint64_t v, char *buf, size_t len)
{
    static const char sfx[] = "KMGT";
    int s = -1;
    while (v && s < 3 && (v & 1023) == 0) {
        v >>= 10;
        s++;
    }
    if (s < 0)
        snprintf(buf, len, "%" PRIu64, v);
    else
        snprintf(buf, len, "%" PRIu64 "%c", v, sfx[s]);
}

static void fmt_range(uint64_t lo, uint64_t hi, uint64_t max, char *buf,
                      size_t len)
{
    char a[32], b[32];
    fmt_size(lo, a, sizeof(a));
    fmt_size(hi, b, sizeof(b));
    if (lo == 0 && hi == max)
        snprintf(buf, len, "*");
    else if (lo == hi)
        snprintf(buf, len, "%s", a);
    else if (hi == max)
        snprintf(buf, len, "%s-", a);
    else
        snprintf(buf, len, "%s-%s", a, b);
}

void tune_entry_format(const tune_entry_t *e, char *buf, size_t len)
{
    char what[64], bytes[80], ranks[96] = "", ppn[64] = "";
    int form = -1;

    for (int f = 0; f < TUNE_FORM_COUNT; f++)
        if (e->forms == (1u << f))
            form = f;
    if (form >= 0)
        snprintf(what, sizeof(what), "%s:%s", tune_coll_name(e->coll),
                 form_names[form]);
    else
        snprintf(what, sizeof(what), "%s", tune_coll_name(e->coll));
    fmt_range(e->lo, e->hi, UINT64_MAX, bytes, sizeof(bytes));
    if (e->rlo != 1 || e->rhi != UINT32_MAX) {
        char r[80];
        fmt_range(e->rlo, e->rhi, UINT32_MAX, r, sizeof(r));
        snprintf(ranks, sizeof(ranks), " ranks=%s", r);
    }
    if (e->plo != 0 || e->phi != 0xffff) {
        char r[48];
        fmt_range(e->plo, e->phi, 0xffff, r, sizeof(r));
        snprintf(ppn, sizeof(ppn), " ppn=%s", r);
    }
    snprintf(buf, len, "%s %s %s%s%s%s", what, bytes,
             e->path == TUNE_PATH_HOST ? tune_algo_name(e->algo)
                                       : tune_path_name(e->path),
             ranks, ppn,
             e->dmask == TUNE_DCLASS_INT     ? " dtype=int"
             : e->dmask == TUNE_DCLASS_FLOAT ? " dtype=float"
                                             : "");
}

void tune_write(const tune_table_t *t, FILE *out, int comments)
{
    if (t->shape[0])
        fprintf(out, "shape %s\n", t->shape);
    for (uint32_t i = 0; i < t->n; i++) {
        char line[256], where[320];
        tune_entry_format(&t->e[i], line, sizeof(line));
        if (comments) {
            tune_entry_where(t, (int)i, where, sizeof(where));
            fprintf(out, "%-44s # %s\n", line, where);
        } else {
            fprintf(out, "%s\n", line);
        }
    }
}

/* 1 when v (0: unknown) is in [lo, hi] (lo 0: not given). */
static int shape_holds(uint32_t lo, uint32_t hi, uint32_t v)
{
    return lo == 0 || v == 0 || (v >= lo && v <= hi);
}

void tune_apply_job(tune_table_t *t, const tune_job_t *job)
{
    const struct {
        const char *name;
        uint32_t lo, hi, v;
    } w[] = {{"ranks", t->s_rlo, t->s_rhi, job->ranks},
             {"hosts", t->s_hlo, t->s_hhi, job->hosts},
             {"ppn", t->s_plo, t->s_phi, job->ppn},
             {"radix", t->s_xlo, t->s_xhi, job->radix},
             {"levels", t->s_llo, t->s_lhi, job->levels}};
    char words[280], note[640];
    size_t len = 0;
    int holds = 1, given = 0;
    uint32_t k = 0;

    /* each word given: "ranks matched", "radix not 4 (shape 2)", "ppn not
     * compared" (the job's value unknown) */
    words[0] = '\0';
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        const char *how;
        char val[64];
        if (w[i].lo == 0)
            continue;
        given = 1;
        if (w[i].v == 0)
            how = "not compared";
        else if (shape_holds(w[i].lo, w[i].hi, w[i].v))
            how = "matched";
        else
            how = "not";
        holds &= shape_holds(w[i].lo, w[i].hi, w[i].v);
        if (strcmp(how, "not") != 0)
            val[0] = '\0';
        else if (w[i].lo == w[i].hi)
            snprintf(val, sizeof(val), " %u (shape %u)", w[i].v, w[i].lo);
        else if (w[i].hi == UINT32_MAX)
            snprintf(val, sizeof(val), " %u (shape %u-)", w[i].v, w[i].lo);
        else
            snprintf(val, sizeof(val), " %u (shape %u-%u)", w[i].v, w[i].lo,
                     w[i].hi);
        len += (size_t)snprintf(
            words + len, len < sizeof(words) ? sizeof(words) - len : 0,
            "%s%s %s%s", len ? ", " : "", w[i].name, how, val);
    }
    if (!given) {
        t->shape_ok = -1;
        snprintf(t->shape_note, sizeof(t->shape_note), "%s",
                 t->shape[0] ? "its shape names no ranks=, hosts=, ppn=, "
                               "radix= or levels=: it applies to any fabric"
                             : "no shape line: it applies to any fabric");
        return;
    }
    /* into a buffer that holds any note (440 characters at most, every
     * value of 10 digits), then into the table's, which holds it too */
    if (holds)
        snprintf(note, sizeof(note),
                 "matches this job (%u ranks, %u hosts, ppn %u, radix %u, "
                 "levels %u; 0: unknown): %s",
                 job->ranks, job->hosts, job->ppn, job->radix, job->levels,
                 words);
    else
        snprintf(note, sizeof(note),
                 "does not match this job (%u ranks, %u hosts, ppn %u, radix "
                 "%u, levels %u): %s; its entries set aside, every call not "
                 "overridden runs in libincoll",
                 job->ranks, job->hosts, job->ppn, job->radix, job->levels,
                 words);
    snprintf(t->shape_note, sizeof(t->shape_note), "%.*s",
             (int)sizeof(t->shape_note) - 1, note);
    t->shape_ok = holds;
    if (holds)
        return;
    for (uint32_t i = 0; i < t->n; i++)
        if (t->e[i].from_env)
            t->e[k++] = t->e[i];
    t->n = k;
    tune_reindex(t);
}

void tune_conf_tree(const fabric_conf_t *conf, uint32_t *radix_p,
                    uint32_t *levels_p)
{
    uint32_t widest = 0;
    for (int a = 0; a < conf->nans; a++) {
        uint32_t n = 0;
        for (int h = 0; h < conf->nhosts; h++)
            n += conf->hosts[h].leaf == a;
        for (int b = 0; b < conf->nans; b++)
            n += conf->ans[b].parent == a;
        widest = n > widest ? n : widest;
    }
    *radix_p = widest;
    *levels_p = conf->levels > 0 ? (uint32_t)conf->levels : 0;
}

void tune_apply_shape(tune_table_t *t, uint32_t ranks, uint32_t hosts,
                      uint32_t ppn)
{
    tune_job_t job = {ranks, hosts, ppn, 0, 0};
    tune_apply_job(t, &job);
}

uint64_t tune_hash(const tune_table_t *t)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < t->n; i++) {
        const tune_entry_t *e = &t->e[i];
        uint64_t v[6] = {e->lo,
                         e->hi,
                         (uint64_t)e->rlo << 32 | e->rhi,
                         (uint64_t)e->plo << 16 | e->phi,
                         (uint64_t)e->coll << 24 | (uint64_t)e->forms << 16 |
                             (uint64_t)e->path << 8 | e->algo,
                         e->dmask};
        const unsigned char *b = (const unsigned char *)v;
        for (size_t j = 0; j < sizeof(v); j++)
            h = (h ^ b[j]) * 0x100000001b3ull;
    }
    return (h ^ t->n) * 0x100000001b3ull ^ t->ppn;
}

/* ---- merging a run into a table (incoll tune --merge) ---- */

/* 1 when t's entries that name coll and form for any datatype class and
 * ranks per host cover every size. */
static int covers_every_size(const tune_table_t *t, int coll, int form)
{
    uint64_t reach = 0; /* every size below it is covered */
    int grew = 1;
    while (grew) {
        grew = 0;
        for (uint32_t i = 0; i < t->n; i++) {
            const tune_entry_t *e = &t->e[i];
            if ((e->coll != coll && e->coll != TUNE_COLL_ALL) ||
                !(e->forms & (1u << form)) || e->dmask != TUNE_DMASK_ANY ||
                e->plo != 0 || e->phi != 0xffff || e->lo > reach ||
                e->hi < reach)
                continue;
            if (e->hi == UINT64_MAX)
                return 1;
            reach = e->hi + 1;
            grew = 1;
        }
    }
    return 0;
}

/* The next line of *p (without its newline) into buf; 0 at the end. */
static int next_line(const char **p, char *buf, size_t len)
{
    const char *eol;
    size_t n;
    if (**p == '\0')
        return 0;
    eol = strchr(*p, '\n');
    n = eol ? (size_t)(eol - *p) : strlen(*p);
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), *p);
    *p += n + (eol != NULL);
    return 1;
}

/* 1 when line is a shape line. */
static int is_shape(const char *line)
{
    line += strspn(line, " \t");
    return strncmp(line, "shape", 5) == 0 &&
           (line[5] == '\0' || line[5] == ' ' || line[5] == '\t');
}

/* The merged shape line's words into out: the run's (the text of its
 * shape line, run_line) with ranks= the range of lo-hi (lo 0: none), and
 * the old table's range words the run does not give. 0, or -1 with err
 * when a word both give differs. */
static int merge_shape(const tune_table_t *o, const tune_table_t *r,
                       const char *run_line, uint32_t lo, uint32_t hi,
                       char *out, size_t len, char *err, size_t errlen)
{
    static const char *const keys[] = {"hosts", "ppn", "radix", "levels"};
    const uint32_t ov[4][2] = {{o->s_hlo, o->s_hhi},
                               {o->s_plo, o->s_phi},
                               {o->s_xlo, o->s_xhi},
                               {o->s_llo, o->s_lhi}};
    const uint32_t rv[4][2] = {{r->s_hlo, r->s_hhi},
                               {r->s_plo, r->s_phi},
                               {r->s_xlo, r->s_xhi},
                               {r->s_llo, r->s_lhi}};
    char copy[1024], *save = NULL, range[64];
    size_t k = 0;

    out[0] = '\0';
    for (int i = 0; i < 4; i++)
        if (ov[i][0] && rv[i][0] &&
            (ov[i][0] != rv[i][0] || ov[i][1] != rv[i][1])) {
            char a[64], b[64];
            fmt_range(ov[i][0], ov[i][1], UINT32_MAX, a, sizeof(a));
            fmt_range(rv[i][0], rv[i][1], UINT32_MAX, b, sizeof(b));
            say(err, errlen,
                "its shape says %s=%s, this run's %s=%s: a table is for one "
                "fabric shape",
                keys[i], a, keys[i], b);
            return -1;
        }
    snprintf(copy, sizeof(copy), "%s", run_line);
    for (char *w = strtok_r(copy, " \t", &save); w;
         w = strtok_r(NULL, " \t", &save)) {
        if (strcmp(w, "shape") == 0 || strncmp(w, "ranks=", 6) == 0)
            continue;
        k += (size_t)snprintf(out + k, k < len ? len - k : 0, "%s%s",
                              k ? " " : "", w);
    }
    for (int i = 0; i < 4; i++)
        if (ov[i][0] && !rv[i][0]) {
            fmt_range(ov[i][0], ov[i][1], UINT32_MAX, range, sizeof(range));
            k += (size_t)snprintf(out + k, k < len ? len - k : 0, "%s%s=%s",
                                  k ? " " : "", keys[i], range);
        }
    if (lo) {
        fmt_range(lo, hi, UINT32_MAX, range, sizeof(range));
        if (strcmp(range, "*") == 0)
            snprintf(range, sizeof(range), "1-");
        k += (size_t)snprintf(out + k, k < len ? len - k : 0, "%sranks=%s",
                              k ? " " : "", range);
    }
    if (k >= len) {
        say(err, errlen, "the merged shape line is too long");
        return -1;
    }
    return 0;
}

/* 1 when the run's entries, which rule on ranks lo-hi, cover every call
 * old entry e can decide there (covered: the collectives and forms they
 * name at every size). Then e is dead when its ranks are within lo-hi,
 * and its ranks that reach into lo-hi from below (up to hi at most) can
 * end below lo. */
static int merge_covers(const tune_entry_t *e,
                        int covered[TUNE_COLL_COUNT][TUNE_FORM_COUNT])
{
    for (int c = 0; c < TUNE_COLL_COUNT; c++)
        for (int f = 0; f < TUNE_FORM_COUNT; f++)
            if ((e->coll == c || e->coll == TUNE_COLL_ALL) &&
                (e->forms & (1u << f)) && !covered[c][f])
                return 0;
    return 1;
}

static int merge_dead(const tune_entry_t *e, uint32_t lo, uint32_t hi,
                      int covered[TUNE_COLL_COUNT][TUNE_FORM_COUNT])
{
    return e->rlo >= lo && e->rhi <= hi && merge_covers(e, covered);
}

char *tune_merge_text(const char *old, const char *old_name, const char *run,
                      uint32_t ranks, const char *header, int *dropped_p,
                      char *err, size_t errlen)
{
    tune_table_t *o = malloc(sizeof(*o)), *r = malloc(sizeof(*r));
    int covered[TUNE_COLL_COUNT][TUNE_FORM_COUNT];
    char why[512], line[1024], shape[512], run_shape[1024] = "";
    const char *p;
    uint32_t hi = UINT32_MAX, lo_all = 0, hi_all = 0, j = 0;
    unsigned n = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = NULL;
    int dropped = 0;

    if (o == NULL || r == NULL) {
        say(err, errlen, "out of memory");
        goto fail;
    }
    tune_init(o, old_name);
    tune_init(r, "this run");
    if (ranks == 0) {
        say(err, errlen, "no rank count for the run's entries");
        goto fail;
    }
    if (tune_parse_text(o, old, old_name, err, errlen) != 0)
        goto fail;
    if (tune_parse_text(r, run, "this run's table", why, sizeof(why)) != 0) {
        say(err, errlen, "%s", why);
        goto fail;
    }
    /* the run rules up to the next rank count the old table has rows for */
    for (uint32_t i = 0; i < o->n; i++)
        if (o->e[i].rlo > ranks && o->e[i].rlo - 1 < hi)
            hi = o->e[i].rlo - 1;
    for (p = run; next_line(&p, line, sizeof(line));)
        if (is_shape(line))
            snprintf(run_shape, sizeof(run_shape), "%s", line);
    /* the shape's ranks: both tables' (none: the old one applies to any) */
    if (o->s_rlo) {
        lo_all = o->s_rlo < ranks ? o->s_rlo : ranks;
        hi_all = o->s_rhi > ranks ? o->s_rhi : ranks;
    }
    if (merge_shape(o, r, run_shape, lo_all, hi_all, shape, sizeof(shape), why,
                    sizeof(why)) != 0) {
        say(err, errlen, "%s: %s", old_name, why);
        goto fail;
    }
    for (int c = 0; c < TUNE_COLL_COUNT; c++)
        for (int fm = 0; fm < TUNE_FORM_COUNT; fm++)
            covered[c][fm] = covers_every_size(r, c, fm);
    f = open_memstream(&text, &len);
    if (f == NULL) {
        say(err, errlen, "out of memory");
        goto fail;
    }
    if (header)
        fputs(header, f);
    fprintf(f, "shape %s\n", shape);
    /* the run's lines: its comments as they are, its entries for
     * ranks-hi (with their comments) */
    for (p = run; next_line(&p, line, sizeof(line));) {
        n++;
        if (is_shape(line))
            continue;
        if (j < r->n && r->e[j].line == n) {
            char entry[256];
            const char *hash = strchr(line, '#');
            r->e[j].rlo = ranks;
            r->e[j].rhi = hi;
            tune_entry_format(&r->e[j++], entry, sizeof(entry));
            if (hash)
                fprintf(f, "%s %s\n", entry, hash);
            else
                fprintf(f, "%s\n", entry);
        } else {
            fprintf(f, "%s\n", line);
        }
    }
    for (uint32_t i = 0; i < o->n; i++)
        dropped += merge_dead(&o->e[i], ranks, hi, covered);
    fprintf(f,
            "# the entries of %s (%d of them, which this run's rule "
            "everywhere, dropped):\n",
            old_name, dropped);
    for (p = old; next_line(&p, line, sizeof(line)) && !is_shape(line);) {
        const char *s = line + strspn(line, " \t");
        if (*s == '#')
            fprintf(f, "%s\n", line);
        else if (*s != '\0')
            break;
    }
    for (uint32_t i = 0; i < o->n; i++) {
        char entry[256];
        tune_entry_t e = o->e[i];
        if (merge_dead(&e, ranks, hi, covered))
            continue;
        if (e.rlo < ranks && e.rhi >= ranks && e.rhi <= hi &&
            merge_covers(&e, covered))
            e.rhi = ranks - 1; /* the run's rule from ranks on */
        tune_entry_format(&e, entry, sizeof(entry));
        fprintf(f, "%s\n", entry);
    }
    if (fclose(f) != 0) {
        f = NULL;
        say(err, errlen, "out of memory");
        goto fail;
    }
    f = NULL;
    if (dropped_p)
        *dropped_p = dropped;
    free(o);
    free(r);
    return text;

fail:
    if (f)
        fclose(f);
    free(text);
    free(o);
    free(r);
    return NULL;
}
