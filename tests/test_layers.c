/*
 * The layers of src/host (docs/architecture.md), checked from the
 * library's object files: which file's functions each file calls (nm).
 * Bottom up: context (cfg.c, lock.c, ctx.c), communicators (the manager
 * link, shared memory, multicast, the objects, p2p, the rendezvous, the
 * usage counters), requests (req.c), algorithms (streams, in-network,
 * allreduce, the other collectives, selection, the service calls, the
 * hierarchy), the public API (init.c, api.c). A file may call its own
 * layer and the ones below. The calls upward that the code still makes
 * are listed below: a new one fails the test, and so does a listed one
 * that went (take it off the list, so that it cannot come back unseen).
 * No files call each other, directly or through others (inside a layer
 * too). Each file declares its functions in its own header alone, and
 * the library lock is not recursive.
 */
#include "test.h"

#include "host/host.h"
#include "host/lock.h"

#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct {
    const char *file;
    int layer;
} host_layers[] = {
    {"cfg", 0},      {"lock", 0},      {"ctx", 0},   {"mgr_client", 1},
    {"shm", 1},      {"mcast", 1},     {"comm", 1},  {"fallback", 1},
    {"rdv", 1},      {"counters", 1},  {"req", 2},   {"stream", 3},
    {"inc_coll", 3}, {"allreduce", 3}, {"colls", 3}, {"select", 3},
    {"service", 3},  {"hier", 3},      {"init", 4},  {"api", 4},
};
#define NFILES (sizeof(host_layers) / sizeof(host_layers[0]))

/* The calls upward left to take out ("from to"): none. */
static const char *const known_up[] = {NULL};
#define NKNOWN (sizeof(known_up) / sizeof(known_up[0]))

static int file_index(const char *member)
{
    size_t n = strcspn(member, ".");
    for (size_t i = 0; i < NFILES; i++)
        if (strlen(host_layers[i].file) == n &&
            strncmp(host_layers[i].file, member, n) == 0)
            return (int)i;
    return -1;
}

typedef struct {
    char *name;
    int file; /* index in host_layers, or -1: not of src/host */
} sym_t;

static int sym_cmp(const void *a, const void *b)
{
    return strcmp(((const sym_t *)a)->name, ((const sym_t *)b)->name);
}

/* Every .c of src/host has a layer. */
static int all_placed(void)
{
    char path[4096];
    struct dirent *e;
    DIR *dir;
    int bad = 0, n = 0;

    snprintf(path, sizeof(path), "%s/src/host", test_srcdir());
    if ((dir = opendir(path)) == NULL)
        return -1;
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0)
            continue;
        n++;
        if (file_index(e->d_name) < 0) {
            fprintf(stderr, "    src/host/%s has no layer\n", e->d_name);
            bad++;
        }
    }
    closedir(dir);
    return bad ? -1 : n;
}

/* Appends the definition of name in member (an archive member's name)
 * to *defs_p; -1 when out of memory. */
static int def_add(sym_t **defs_p, size_t *n_p, size_t *cap_p, char *name,
                   const char *member)
{
    if (*n_p == *cap_p) {
        size_t cap = *cap_p ? 2 * *cap_p : 1024;
        sym_t *g = realloc(*defs_p, cap * sizeof(**defs_p));
        if (g == NULL)
            return -1;
        *defs_p = g;
        *cap_p = cap;
    }
    (*defs_p)[*n_p].name = name;
    (*defs_p)[*n_p].file = file_index(member);
    (*n_p)++;
    return 0;
}

/* The whole of nm -A -g on the library's archive (more than run_cmd
 * keeps), malloc'ed; NULL when it cannot be had (said why). */
static char *nm_archive(void)
{
    char lib[4096], cmd[4200], buf[65536], *out = NULL;
    size_t len = 0, n;
    FILE *nm;
    int rc;

    snprintf(lib, sizeof(lib), "%s/../obj/libincoll-internal.a", test_bindir());
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "    no %s\n", lib);
        return NULL;
    }
    snprintf(cmd, sizeof(cmd), "nm -A -g '%s'", lib);
    if ((nm = popen(cmd, "r")) == NULL) {
        fprintf(stderr, "    cannot run %s\n", cmd);
        return NULL;
    }
    while ((n = fread(buf, 1, sizeof(buf), nm)) > 0) {
        char *grown = realloc(out, len + n + 1);
        if (grown == NULL)
            break;
        out = grown;
        memcpy(out + len, buf, n);
        len += n;
        out[len] = '\0';
    }
    rc = pclose(nm);
    if (rc != 0 || out == NULL || n > 0) {
        fprintf(stderr, "    %s: status %d\n", cmd, rc);
        free(out);
        return NULL;
    }
    return out;
}

/* uses[i][j]: a function of file j that file i calls (NULL: none), from
 * the library's archive (nm: each member's undefined symbols against the
 * member that defines them). 0, or -1 when it cannot be had (said why). */
static int host_calls(const char *uses[NFILES][NFILES])
{
    char *out = NULL, *line, *save = NULL;
    sym_t *defs = NULL;
    size_t ndefs = 0, cap = 0;
    static char *names; /* the names uses points into: kept to the end */
    char *undef = NULL;
    size_t undef_len = 0;
    int rc = -1;

    memset(uses, 0, sizeof(const char *) * NFILES * NFILES);
    if (test_srcdir()[0] == '\0' || all_placed() <= 10 ||
        (out = nm_archive()) == NULL) {
        fprintf(stderr, "    no source tree, files without a layer, or no "
                        "nm of the library\n");
        return -1;
    }
    /* "lib:member.o:ADDR T name" or "lib:member.o:         U name" */
    for (line = strtok_r(out, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *member = strstr(line, ".a:"), *name = strrchr(line, ' ');
        char type;
        if (member == NULL || name == NULL || name - line < 2)
            continue;
        member += 3;
        type = name[-1];
        if (type == 'U') {
            int f = file_index(member);
            size_t l = strlen(name + 1);
            char *grown;
            if (f < 0)
                continue;
            grown = realloc(undef, undef_len + l + 4);
            if (grown == NULL)
                goto done;
            undef = grown;
            undef[undef_len++] = (char)('A' + f);
            memcpy(undef + undef_len, name + 1, l + 1);
            undef_len += l + 1;
        } else if (strchr("TDBR", type) != NULL) {
            if (def_add(&defs, &ndefs, &cap, name + 1, member) != 0)
                goto done;
        }
    }
    if (ndefs <= 100 || undef_len == 0) {
        fprintf(stderr, "    nm listed %zu definitions\n", ndefs);
        goto done;
    }
    qsort(defs, ndefs, sizeof(*defs), sym_cmp);
    for (size_t off = 0; off < undef_len;) {
        int from = undef[off] - 'A';
        sym_t key = {undef + off + 1, 0}, *d;
        off += strlen(undef + off + 1) + 2;
        d = bsearch(&key, defs, ndefs, sizeof(*defs), sym_cmp);
        if (d == NULL || d->file < 0 || d->file == from)
            continue;
        uses[from][d->file] = d->name;
    }
    free(names);
    names = out; /* the names in defs point into it */
    out = NULL;
    rc = 0;
done:
    free(undef);
    free(defs);
    free(out);
    return rc;
}

TEST(layers_host_calls_downward, TEST_UNIT)
{
    /* uses[i][j]: a function of file j that file i calls, or NULL */
    static const char *uses[NFILES][NFILES];
    int bad = 0, seen[NKNOWN] = {0};

    CHECK_MSG(host_calls(uses) == 0, "the calls between the files of "
                                     "src/host cannot be had");
    for (size_t i = 0; i < NFILES; i++) {
        for (size_t j = 0; j < NFILES; j++) {
            char pair[64];
            size_t k;
            if (!uses[i][j] || host_layers[i].layer >= host_layers[j].layer)
                continue;
            snprintf(pair, sizeof(pair), "%s %s", host_layers[i].file,
                     host_layers[j].file);
            for (k = 0; k < NKNOWN && known_up[k] != NULL &&
                        strcmp(known_up[k], pair) != 0;
                 k++)
                ;
            if (k < NKNOWN && known_up[k] != NULL) {
                seen[k] = 1;
                continue;
            }
            fprintf(stderr,
                    "    a new call upward: src/host/%s.c -> %s.c (%s)\n",
                    host_layers[i].file, host_layers[j].file, uses[i][j]);
            bad++;
        }
    }
    for (size_t k = 0; k < NKNOWN; k++) {
        if (known_up[k] != NULL && !seen[k]) {
            fprintf(stderr, "    '%s' calls up no more: take it off the list\n",
                    known_up[k]);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%d differences from the declared layers", bad);
    return TEST_PASSED;
}

/* Tarjan's strongly connected components of the graph uses (one file per
 * node): comp[v] is v's component's number, its lowest reaching index;
 * files on a cycle share one with another file. */
typedef struct {
    const char *(*uses)[NFILES];
    int index[NFILES], low[NFILES], on[NFILES], comp[NFILES];
    int stack[NFILES], sp, next;
} scc_t;

static void scc_visit(scc_t *g, int v)
{
    g->index[v] = g->low[v] = g->next++;
    g->stack[g->sp++] = v;
    g->on[v] = 1;
    for (int w = 0; w < (int)NFILES; w++) {
        if (g->uses[v][w] == NULL)
            continue;
        if (g->index[w] < 0) {
            scc_visit(g, w);
            if (g->low[w] < g->low[v])
                g->low[v] = g->low[w];
        } else if (g->on[w] && g->index[w] < g->low[v]) {
            g->low[v] = g->index[w];
        }
    }
    if (g->low[v] == g->index[v]) {
        int w;
        do {
            w = g->stack[--g->sp];
            g->on[w] = 0;
            g->comp[w] = v;
        } while (w != v);
    }
}

/* No two files of src/host call each other, directly or through others:
 * the files read bottom up, each calling only files below it (a file
 * that must hand work up does it through a hook registered at init). A
 * cycle is named with its files and the calls that make it. */
TEST(layers_host_no_cycles, TEST_UNIT)
{
    static const char *uses[NFILES][NFILES];
    scc_t g;
    int cycles = 0;

    CHECK_MSG(host_calls(uses) == 0, "the calls between the files of "
                                     "src/host cannot be had");
    memset(&g, 0, sizeof(g));
    g.uses = uses;
    for (size_t v = 0; v < NFILES; v++)
        g.index[v] = -1;
    for (size_t v = 0; v < NFILES; v++)
        if (g.index[v] < 0)
            scc_visit(&g, (int)v);
    for (size_t c = 0; c < NFILES; c++) {
        int n = 0;
        for (size_t v = 0; v < NFILES; v++)
            n += g.comp[v] == (int)c;
        if (n < 2)
            continue;
        cycles++;
        fprintf(stderr, "    a cycle of %d files of src/host:", n);
        for (size_t v = 0; v < NFILES; v++)
            if (g.comp[v] == (int)c)
                fprintf(stderr, " %s.c", host_layers[v].file);
        fprintf(stderr, "\n");
        for (size_t i = 0; i < NFILES; i++)
            for (size_t j = 0; j < NFILES; j++)
                if (uses[i][j] && g.comp[i] == (int)c && g.comp[j] == (int)c)
                    fprintf(stderr, "      %s.c -> %s.c (%s)\n",
                            host_layers[i].file, host_layers[j].file,
                            uses[i][j]);
    }
    CHECK_MSG(cycles == 0, "%d cycles of calls between the files of src/host",
              cycles);
    return TEST_PASSED;
}

/* The header a file of src/host declares its functions in: its own
 * (ctx.c's is host.h, with the types every file shares). */
static void own_header(int file, char *buf, size_t len)
{
    const char *f = host_layers[file].file;
    snprintf(buf, len, "%s.h", strcmp(f, "ctx") == 0 ? "host" : f);
}

/* text without its comments, in place (declarations only are looked at). */
static void strip_comments(char *t)
{
    char *w = t, *r = t;
    while (*r) {
        if (r[0] == '/' && r[1] == '*') {
            char *e = strstr(r + 2, "*/");
            r = e ? e + 2 : r + strlen(r);
            *w++ = ' ';
        } else if (r[0] == '/' && r[1] == '/') {
            while (*r && *r != '\n')
                r++;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

static int ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* 1 when text declares function name: "name(" after its return type (an
 * identifier other than return, or a '*'), not a call in a macro or an
 * inline function. */
static int declares(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        const char *q = p + n, *b = p, *e;
        if ((p > text && ident_char(p[-1])) || ident_char(*q))
            continue;
        while (*q == ' ')
            q++;
        if (*q != '(')
            continue;
        while (b > text && isspace((unsigned char)b[-1]))
            b--;
        if (b > text && b[-1] == '*')
            return 1;
        for (e = b; b > text && ident_char(b[-1]); b--)
            ;
        if (e > b && !(e - b == 6 && strncmp(b, "return", 6) == 0))
            return 1;
    }
    return 0;
}

/* Each file of src/host declares its functions in its own header alone
 * (ctx.c: host.h): no header declares another file's. */
TEST(layers_host_own_headers, TEST_UNIT)
{
    char *out = NULL, *line, *save = NULL, path[4096];
    sym_t *defs = NULL;
    size_t ndefs = 0, cap = 0, nheaders = 0;
    struct dirent *e;
    DIR *dir;
    int bad = 0;

    CHECK_MSG(test_srcdir()[0] != '\0', "no source tree above %s",
              test_bindir());
    CHECK_MSG(all_placed() > 10, "src/host: files without a layer, or none");
    out = nm_archive();
    CHECK_MSG(out != NULL, "nm of the library's archive failed");
    for (line = strtok_r(out, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *member = strstr(line, ".a:"), *name = strrchr(line, ' ');
        if (member == NULL || name == NULL || name - line < 2 ||
            name[-1] != 'T' || file_index(member + 3) < 0)
            continue;
        CHECK(def_add(&defs, &ndefs, &cap, name + 1, member + 3) == 0);
    }
    CHECK_MSG(ndefs > 100, "nm listed %zu functions of src/host", ndefs);
    snprintf(path, sizeof(path), "%s/src/host", test_srcdir());
    dir = opendir(path);
    CHECK_MSG(dir != NULL, "cannot list %s", path);
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        char file[4400], *text;
        FILE *f;
        long size;
        if (len < 3 || strcmp(e->d_name + len - 2, ".h") != 0)
            continue;
        snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
        f = fopen(file, "r");
        if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
            fseek(f, 0, SEEK_SET) != 0 ||
            (text = malloc((size_t)size + 1)) == NULL) {
            fprintf(stderr, "    cannot read %s\n", file);
            if (f)
                fclose(f);
            bad++;
            continue;
        }
        text[fread(text, 1, (size_t)size, f)] = '\0';
        fclose(f);
        strip_comments(text);
        nheaders++;
        for (size_t i = 0; i < ndefs; i++) {
            char own[64];
            own_header(defs[i].file, own, sizeof(own));
            if (strcmp(own, e->d_name) == 0 || !declares(text, defs[i].name))
                continue;
            fprintf(stderr,
                    "    src/host/%s declares %s of %s.c (its own header: "
                    "%s)\n",
                    e->d_name, defs[i].name, host_layers[defs[i].file].file,
                    own);
            bad++;
        }
        free(text);
    }
    closedir(dir);
    free(defs);
    free(out);
    CHECK_MSG(nheaders > 10, "src/host: %zu headers", nheaders);
    CHECK_MSG(bad == 0, "%d declarations away from their file's header", bad);
    return TEST_PASSED;
}

/* In a child with stderr on a pipe: a context's lock taken and given
 * back as how says (0: once, then again; 1: taken twice; 2: given back
 * unheld). The child's stderr in out; its wait status, or -1. */
static int lock_child(int how, char *out, size_t cap)
{
    int fds[2], st = -1;
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct incoll_ctx *ctx = calloc(1, sizeof(*ctx));
        dup2(fds[1], 2);
        close(fds[0]);
        if (ctx == NULL || host_sync_create(ctx) != INCOLL_OK)
            _exit(3);
        if (how == 2) {
            host_unlock(ctx);
            _exit(0);
        }
        host_lock(ctx);
        if (how == 1)
            host_lock(ctx);
        host_unlock(ctx);
        host_lock(ctx);
        host_unlock(ctx);
        _exit(host_lock_held(ctx) ? 4 : 0);
    }
    close(fds[1]);
    while (len + 1 < cap && (n = read(fds[0], out + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return st;
}

/* The library lock is not recursive: a thread that takes it again is
 * stopped with both places named, instead of waiting for itself; one
 * that gives it back unheld is stopped too; taking it in turn works. */
TEST(layers_lock_not_recursive, TEST_UNIT)
{
    char out[4096];
    int st = lock_child(0, out, sizeof(out));
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "lock, unlock, lock, unlock: status %d: %s", st, out);
    st = lock_child(1, out, sizeof(out));
    CHECK_MSG(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
              "nested lock: status %d (not aborted): %s", st, out);
    CHECK_MSG(strstr(out, "test_layers.c") != NULL &&
                  strstr(out, "lock_child") != NULL &&
                  strstr(strstr(out, "test_layers.c") + 1, "test_layers.c"),
              "the nesting's report names neither place: %s", out);
    st = lock_child(2, out, sizeof(out));
    CHECK_MSG(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
                  strstr(out, "does not hold") != NULL,
              "unlock unheld: status %d: %s", st, out);
    return TEST_PASSED;
}

/* A front end counts every call it gives to MPI's own
 * (incoll_comm_count_elsewhere) without the library lock: called while
 * its thread holds that lock, which a locking count would take again (and
 * be stopped for), 63 calls after a first one return. The child's wait
 * status, or -1. */
static int count_child(void)
{
    int st = -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct incoll_ctx *ctx = calloc(1, sizeof(*ctx));
        struct incoll_comm *comm = calloc(1, sizeof(*comm));
        int bad = 0;
        if (ctx == NULL || comm == NULL || host_sync_create(ctx) != INCOLL_OK)
            _exit(3);
        comm->ctx = ctx;
        comm->size = 2;
        bad |= incoll_comm_count_elsewhere(comm, INCOLL_WHY_ALGO) != INCOLL_OK;
        host_lock(ctx);
        for (int i = 0; i < 63; i++)
            bad |= incoll_comm_count_elsewhere(
                       comm, i % 2 ? INCOLL_WHY_ALGO
                                   : INCOLL_WHY_UNSUPPORTED) != INCOLL_OK;
        host_unlock(ctx);
        _exit(bad ? 5 : 0);
    }
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return st;
}

TEST(layers_count_elsewhere_takes_no_lock, TEST_UNIT)
{
    int st = count_child();
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "incoll_comm_count_elsewhere under the library lock: status "
              "0x%x (it took the lock: aborted)",
              st);
    return TEST_PASSED;
}
