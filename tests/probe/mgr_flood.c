/*
 * mgr_flood: a probe of the manager's limits under hostile clients, as an
 * operator hardening a cluster would run it (docs/manager.md, "Limits on
 * clients"); long, so not part of `make test` (whose tests
 * integ_mgr_flood_*, integ_mgr_secret_memory and mgr_jobs_* are the short
 * versions). Build with `make probe-mgr`, run from the source tree:
 *
 *   build/tests/probe/mgr_flood [--case flood|memory|quota|all]
 *       [--conns N] [--hold S] [--jobs J] [--nofile K] [--reopen]
 *       [--src IP] [--fat-jobs N]
 *
 * flood   a managed fabric of 4 hosts; N (12000) connections that never
 *         authenticate, from --src (127.0.0.1), held S (30) seconds (or
 *         reopened as soon as closed, --reopen); meanwhile J (8) jobs of
 *         4 ranks are started one after another with the default
 *         INCOLL_MGR_CONNECT_MS (5 s) and must join and run offloaded.
 *         --nofile K starts the manager with that descriptor limit.
 * memory  a client with the secret joins --fat-jobs (300) jobs of 2^18
 *         ranks and asks, for each, for a group of all of them (1 MiB
 *         requests), keeping the connections: the manager's resident
 *         memory must stay under the documented bound (its state, receive
 *         and send budgets and 8 KiB per connection above what it had),
 *         its ANs up, and a real job offloaded meanwhile.
 * quota   one job asks for 16 groups of 64 slots on one leaf: it gets its
 *         share (INCOLL_MGR_JOB_SHARE) and the refusals name it; the next
 *         job still gets a group there.
 *
 * Prints one line per result and a last line "mgr_flood: N of M cases
 * met their targets"; exits 0 when all did.
 */
#include "../flood.h"

#include "common/clock.h"
#include "common/mgr_proto.h"
#include "common/procstat.h"
#include "fabric/mgr_tool.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct {
    int conns, hold, jobs, nofile, reopen, fat_jobs;
    const char *src;
} opt = {12000, 30, 8, 0, 0, 300, "127.0.0.1"};

static char fab[PATH_MAX], mgr_addr[64], secret[PATH_MAX + 16];

static double now(void)
{
    return (double)now_ms() / 1000.0;
}

/* A command's exit status (its output to the file log). */
static int run(const char *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int run(const char *log, const char *fmt, ...)
{
    char cmd[8192], full[8400];
    va_list ap;
    int st;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "%s >>'%s' 2>&1", cmd, log);
    st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int fabric_up(const char *tag)
{
    char log[PATH_MAX + 32], path[PATH_MAX + 32], *p;
    FILE *f;
    snprintf(fab, sizeof(fab), "/tmp/incoll-probe-mgr-%s-%d", tag,
             (int)getpid());
    snprintf(log, sizeof(log), "%s.log", fab);
    if (run(log, "build/bin/incoll fabric up --hosts 4 --radix 2 --dir '%s'",
            fab) != 0) {
        fprintf(stderr, "mgr_flood: fabric up failed (see %s)\n", log);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/fabric.env", fab);
    f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "mgr_flood: no %s (see %s)\n", path, log);
        return -1;
    }
    while (fgets(path, sizeof(path), f))
        if (strncmp(path, "INCOLL_MGR=", 11) == 0 &&
            (p = strchr(path, '\n')) != NULL) {
            *p = '\0';
            snprintf(mgr_addr, sizeof(mgr_addr), "%.63s", path + 11);
        }
    fclose(f);
    snprintf(secret, sizeof(secret), "%s/secret", fab);
    return mgr_addr[0] ? 0 : -1;
}

static void fabric_down(void)
{
    char log[PATH_MAX + 32];
    snprintf(log, sizeof(log), "%s.log", fab);
    run(log, "build/bin/incoll fabric down --dir '%s'", fab);
}

static pid_t mgr_pid(void)
{
    char path[PATH_MAX + 32];
    FILE *f;
    int pid = -1;
    snprintf(path, sizeof(path), "%s/mgr.pid", fab);
    f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = -1;
        fclose(f);
    }
    return pid;
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static long long stat_value(const char *prefix, const char *key)
{
    char *text = NULL, err[256];
    long long v;
    if (mgr_tool_stat(mgr_addr, secret, 5000, &text, err, sizeof(err)) !=
        INCOLL_OK)
        return -1;
    v = mgr_tool_stat_value(text, prefix, key);
    free(text);
    return v;
}

/* One job of 4 ranks, offloaded: 0 when it ran offloaded; its seconds. */
static int one_job(const char *name, double *secs_p)
{
    char log[PATH_MAX + 64];
    double t0 = now();
    int st;
    snprintf(log, sizeof(log), "%s/%s.log", fab, name);
    st = run(log,
             "env -u INCOLL_MGR_CONNECT_MS INCOLL_JOB=%s build/bin/incoll run "
             "-n 4 --fabric '%s' -- build/tests/comm_grid --cols 2 --iters 20 "
             "--count 300 --expect-offload all",
             name, fab);
    *secs_p = now() - t0;
    return st;
}

static int case_flood(void)
{
    pid_t flooder;
    double t0, worst = 0;
    int ok = 0;
    long long evicted;
    char nofile[32];

    if (fabric_up("flood") != 0)
        return -1;
    if (opt.nofile) {
        /* The manager takes its bounds from its limit at start: a fresh
         * one under the lower limit (`incoll fabric restart`). */
        pid_t old = mgr_pid();
        char log[PATH_MAX + 32];
        kill(old, SIGTERM);
        for (int i = 0; i < 100 && proc_running(old); i++)
            usleep(20000);
        snprintf(log, sizeof(log), "%s.log", fab);
        if (run(log,
                "prlimit --nofile=%d:%d build/bin/incoll fabric restart "
                "--dir '%s'",
                opt.nofile, opt.nofile, fab) != 0) {
            fprintf(stderr, "mgr_flood: fabric restart failed (see %s)\n", log);
            fabric_down();
            return -1;
        }
    }
    flooder = flood_start(mgr_addr, opt.src, opt.conns, opt.reopen);
    if (flooder <= 0) {
        fprintf(stderr, "mgr_flood: the flooder did not start\n");
        fabric_down();
        return -1;
    }
    t0 = now();
    for (int j = 0; j < opt.jobs; j++) {
        char name[32];
        double secs;
        snprintf(name, sizeof(name), "flood%d", j);
        if (one_job(name, &secs) == 0)
            ok++;
        else
            printf("mgr_flood: flood: job %s failed after %.2f s (%s/%s.log)\n",
                   name, secs, fab, name);
        worst = secs > worst ? secs : worst;
        /* Spread the jobs over the hold. */
        while (now() - t0 < (double)opt.hold * (j + 1) / opt.jobs &&
               j + 1 < opt.jobs)
            usleep(100000);
    }
    while (now() - t0 < opt.hold)
        usleep(100000);
    evicted = stat_value("manager ", "conns_evicted");
    if (opt.nofile)
        snprintf(nofile, sizeof(nofile), "%d", opt.nofile);
    else
        snprintf(nofile, sizeof(nofile), "its default");
    kill(flooder, SIGKILL);
    waitpid(flooder, NULL, 0);
    printf("mgr_flood: flood: %d connections from %s %s %d s (manager "
           "descriptors: %s): %d of %d jobs joined and ran offloaded, the "
           "slowest in %.2f s; %lld connections evicted\n",
           opt.conns, opt.src, opt.reopen ? "reopened for" : "held", opt.hold,
           nofile, ok, opt.jobs, worst, evicted);
    fabric_down();
    return ok == opt.jobs ? 0 : 1;
}

static int case_memory(void)
{
    mgr_stream_t *st = calloc((size_t)opt.fat_jobs, sizeof(*st));
    uint8_t key[MGR_KEY_LEN];
    char err[256];
    mgr_wbuf_t mem = {0}, w = {0};
    mgr_group_req_t rq = {0};
    long rss0, rss1, bound_kb;
    long long state, budget, rxb, txb;
    double cpu0, cpu1, secs;
    int refused = 0, opened = 0, ans_up, job_ok;
    pid_t mgr;
    proc_stat_t ps;

    if (st == NULL || fabric_up("memory") != 0)
        return -1;
    mgr = mgr_pid();
    if (mgr_secret_load(secret, key, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "mgr_flood: %s\n", err);
        fabric_down();
        return -1;
    }
    rss0 = rss_kb(mgr);
    proc_stat_read(mgr, &ps);
    cpu0 = (double)(ps.utime + ps.stime) / (double)sysconf(_SC_CLK_TCK);
    for (uint32_t i = 0; i < MGR_MAX_MEMBERS; i++)
        mgr_w_u32(&mem, i);
    rq.nmembers = MGR_MAX_MEMBERS;
    rq.members = mem.buf;
    for (int i = 0; i < opt.fat_jobs; i++) {
        mgr_join_t jn = {0};
        int fd = mgr_connect(mgr_addr, err, sizeof(err));
        double end = now() + 5;
        int ready = 0;
        if (fd < 0 ||
            mgr_stream_init(&st[i], fd, 0, MGR_ROLE_HOST, key) != INCOLL_OK)
            break;
        opened++;
        while (!ready && now() < end) {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            const char *why;
            uint16_t type;
            const uint8_t *body;
            size_t len;
            mgr_next_t r;
            mgr_stream_flush(&st[i]);
            poll(&pfd, 1, 100);
            if (mgr_stream_read(&st[i], &why) != 0)
                break;
            while ((r = mgr_stream_next(&st[i], &type, &body, &len, &why)) !=
                   MGR_NEXT_NONE)
                if (r == MGR_NEXT_READY)
                    ready = 1;
        }
        if (!ready)
            break;
        snprintf(jn.job, sizeof(jn.job), "fat%d", i);
        jn.size = MGR_MAX_MEMBERS;
        jn.ep = wire_ep(0x7f000001u, (uint16_t)(20000 + i));
        w.len = 0;
        mgr_enc_join(&w, &jn);
        mgr_stream_send(&st[i], MGR_JOIN, w.buf, w.len);
        rq.req = 1;
        rq.comm = 100;
        w.len = 0;
        mgr_enc_group_req(&w, &rq);
        mgr_stream_send(&st[i], MGR_GROUP_REQ, w.buf, w.len);
        while (mgr_stream_pending(&st[i]) && now() < end) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, 100);
            if (mgr_stream_flush(&st[i]) != 0)
                break;
        }
    }
    mgr_wbuf_free(&w);
    mgr_wbuf_free(&mem);
    sleep(5);
    for (int i = 0; i < opened; i++) {
        const char *why;
        uint16_t type;
        const uint8_t *body;
        size_t len;
        mgr_stream_read(&st[i], &why);
        while (mgr_stream_next(&st[i], &type, &body, &len, &why) ==
               MGR_NEXT_FRAME)
            refused += type == MGR_ERROR;
    }
    rss1 = rss_kb(mgr);
    proc_stat_read(mgr, &ps);
    cpu1 = (double)(ps.utime + ps.stime) / (double)sysconf(_SC_CLK_TCK);
    state = stat_value("manager ", "state_bytes");
    ans_up = (int)stat_value("manager ", "ans_up");
    job_ok = one_job("meanwhile", &secs) == 0;
    /* The documented bound above what it had: the state, receive and send
     * budgets and 8 KiB per connection (docs/manager.md). */
    budget = 256ll << 20;
    rxb = 64ll << 20;
    txb = 64ll << 20;
    bound_kb = (long)((budget + rxb + txb) / 1024) + 8L * opened;
    printf("mgr_flood: memory: %d jobs of %d ranks, each asking for a group "
           "of all: the manager grew from %ld to %ld KiB (bound %ld KiB "
           "more), state %lld bytes, %d requests refused, %.1f s of CPU; "
           "%d of 3 ANs up; a job meanwhile %s (%.2f s)\n",
           opened, MGR_MAX_MEMBERS, rss0, rss1, bound_kb, state, refused,
           cpu1 - cpu0, ans_up, job_ok ? "ran offloaded" : "FAILED", secs);
    for (int i = 0; i < opened; i++)
        mgr_stream_close(&st[i]);
    free(st);
    fabric_down();
    return rss1 - rss0 <= bound_kb && ans_up == 3 && job_ok ? 0 : 1;
}

/* A connection of role host, authenticated, joined as rank of job on
 * host; 0 or -1. */
static int join(mgr_stream_t *st, const uint8_t *key, const char *job, int rank,
                int size, const char *host, uint16_t port)
{
    char err[256];
    mgr_join_t jn = {0};
    mgr_wbuf_t w = {0};
    int fd = mgr_connect(mgr_addr, err, sizeof(err)), ready = 0;
    double end = now() + 5;
    if (fd < 0 || mgr_stream_init(st, fd, 0, MGR_ROLE_HOST, key) != INCOLL_OK)
        return -1;
    while (!ready && now() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        const char *why;
        uint16_t type;
        const uint8_t *body;
        size_t len;
        mgr_next_t r;
        mgr_stream_flush(st);
        poll(&pfd, 1, 100);
        if (mgr_stream_read(st, &why) != 0)
            return -1;
        while ((r = mgr_stream_next(st, &type, &body, &len, &why)) !=
               MGR_NEXT_NONE)
            ready |= r == MGR_NEXT_READY;
    }
    snprintf(jn.job, sizeof(jn.job), "%s", job);
    jn.rank = rank;
    jn.size = size;
    snprintf(jn.host, sizeof(jn.host), "%s", host);
    jn.ep = wire_ep(0x7f000001u, port);
    mgr_enc_join(&w, &jn);
    mgr_stream_send(st, MGR_JOIN, w.buf, w.len);
    mgr_stream_flush(st);
    mgr_wbuf_free(&w);
    return ready ? 0 : -1;
}

/* Both ranks of a pair ask for comm's group of `slots`; the status of the
 * answer (its reason into why), or 1 when none came. */
static int ask_pair(mgr_stream_t *pair, uint64_t comm, uint32_t slots,
                    char *why, size_t whylen)
{
    static const uint32_t members[2] = {0, 1};
    mgr_wbuf_t mem = {0}, w = {0};
    mgr_group_req_t rq = {0};
    double end = now() + 5;
    int status = 1;
    for (int i = 0; i < 2; i++)
        mgr_w_u32(&mem, members[i]);
    rq.comm = comm;
    rq.slots = slots;
    rq.nmembers = 2;
    rq.members = mem.buf;
    for (int i = 0; i < 2; i++) {
        rq.req = (uint32_t)comm;
        w.len = 0;
        mgr_enc_group_req(&w, &rq);
        mgr_stream_send(&pair[i], MGR_GROUP_REQ, w.buf, w.len);
        mgr_stream_flush(&pair[i]);
    }
    mgr_wbuf_free(&w);
    mgr_wbuf_free(&mem);
    while (status == 1 && now() < end) {
        struct pollfd pfd = {.fd = pair[0].fd, .events = POLLIN};
        const char *e;
        uint16_t type;
        const uint8_t *body;
        size_t len;
        poll(&pfd, 1, 100);
        if (mgr_stream_read(&pair[0], &e) != 0)
            break;
        while (mgr_stream_next(&pair[0], &type, &body, &len, &e) ==
               MGR_NEXT_FRAME) {
            mgr_group_info_t gi;
            if (type == MGR_GROUP_INFO &&
                mgr_dec_group_info(body, len, &gi, &e) == INCOLL_OK &&
                gi.comm == comm) {
                status = gi.status;
                snprintf(why, whylen, "%s", gi.reason);
            }
        }
    }
    return status;
}

static int case_quota(void)
{
    uint8_t key[MGR_KEY_LEN];
    char err[256], why[256] = "";
    mgr_stream_t hog[2], next[2];
    int got = 0, next_ok, ret = 1;

    memset(hog, 0, sizeof(hog));
    memset(next, 0, sizeof(next));
    if (fabric_up("quota") != 0)
        return -1;
    if (mgr_secret_load(secret, key, err, sizeof(err)) != INCOLL_OK ||
        join(&hog[0], key, "hog", 0, 2, "h0", 22000) != 0 ||
        join(&hog[1], key, "hog", 1, 2, "h1", 22001) != 0 ||
        join(&next[0], key, "next", 0, 2, "h0", 22002) != 0 ||
        join(&next[1], key, "next", 1, 2, "h1", 22003) != 0) {
        fprintf(stderr, "mgr_flood: quota: cannot join\n");
        goto out;
    }
    for (uint64_t c = 1; c <= 16; c++)
        got += ask_pair(hog, c, 64, why, sizeof(why)) == 0;
    next_ok = ask_pair(next, 1, 64, err, sizeof(err)) == 0;
    printf("mgr_flood: quota: job hog asked for 16 groups of 64 slots on an "
           "l0 (1024 slots, 64 groups): it got %d, then: %s; the next job "
           "%s\n",
           got, why[0] ? why : "-",
           next_ok ? "got its group there" : "was refused too");
    ret = got < 16 && next_ok && strstr(why, "share") ? 0 : 1;
out:
    for (int i = 0; i < 2; i++) {
        mgr_stream_close(&hog[i]);
        mgr_stream_close(&next[i]);
    }
    fabric_down();
    return ret;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"case", required_argument, NULL, 'c'},
        {"conns", required_argument, NULL, 'n'},
        {"hold", required_argument, NULL, 'H'},
        {"jobs", required_argument, NULL, 'j'},
        {"nofile", required_argument, NULL, 'f'},
        {"reopen", no_argument, NULL, 'r'},
        {"src", required_argument, NULL, 's'},
        {"fat-jobs", required_argument, NULL, 'F'},
        {NULL, 0, NULL, 0},
    };
    const char *which = "all";
    int c, met = 0, ran = 0;
    struct rlimit rl;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            which = optarg;
            break;
        case 'n':
            opt.conns = atoi(optarg);
            break;
        case 'H':
            opt.hold = atoi(optarg);
            break;
        case 'j':
            opt.jobs = atoi(optarg);
            break;
        case 'f':
            opt.nofile = atoi(optarg);
            break;
        case 'r':
            opt.reopen = 1;
            break;
        case 's':
            opt.src = optarg;
            break;
        case 'F':
            opt.fat_jobs = atoi(optarg);
            break;
        default:
            fprintf(stderr, "usage: mgr_flood [--case flood|memory|quota|all] "
                            "[--conns N] [--hold S] [--jobs J] [--nofile K] "
                            "[--reopen] [--src IP] [--fat-jobs N]\n");
            return 2;
        }
    }
    if (access("build/bin/incoll", X_OK) != 0 ||
        access("build/tests/comm_grid", X_OK) != 0) {
        fprintf(stderr, "mgr_flood: run from the source tree after `make "
                        "tests`\n");
        return 2;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(which, "flood") || !strcmp(which, "all")) {
        ran++;
        met += case_flood() == 0;
    }
    if (!strcmp(which, "memory") || !strcmp(which, "all")) {
        ran++;
        met += case_memory() == 0;
    }
    if (!strcmp(which, "quota") || !strcmp(which, "all")) {
        ran++;
        met += case_quota() == 0;
    }
    printf("mgr_flood: %d of %d cases met their targets\n", met, ran);
    return met == ran ? 0 : 1;
}
