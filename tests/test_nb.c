/*
 * Nonblocking and persistent collectives and threads in libincoll, on real
 * daemons: tests/progs/nb_check (many requests outstanding, every order of
 * test, wait and free, communicators interleaved, persistent requests
 * started 1000 times, two threads on two communicators), clean and under
 * 5% loss, with and without the progress thread; and with large
 * allreduces locking the tree and streaming (INCOLL_STREAM_THRESHOLD);
 * and, in one process, that the library's recovery watcher runs only
 * where a recovery can come.
 */
#include "integ.h"
#include "test.h"

#include "incoll.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_nb(int n, int k, const char *env, const char *args,
                  const char *what)
{
    char out[PATH_MAX];
    int ret;
    if (!have_fabric_binaries("nb_check"))
        return test_skip("build/bin/incoll, incoll-agg or build/tests/nb_check "
                         "not built");
    ret = run_fabric_check("nb_check", "nbfab", "nb", n, k, 0, env, args, out,
                           sizeof(out));
    if (ret != 0 || !file_has(out, "all correct")) {
        show_tail(out);
        CHECK_MSG(0, "%s: nb_check exited %d", what, ret);
    }
    return TEST_PASSED;
}

TEST(nb_requests_clean, TEST_INTEG)
{
    return run_nb(5, 2, NULL, "--iters 1000 --threads", "5 hosts, clean");
}

TEST(nb_requests_lossy, TEST_INTEG)
{
    return run_nb(4, 2, "INCOLL_FAULT_DROP=0.05 INCOLL_FAULT_SEED=7",
                  "--iters 100 --threads", "4 hosts, 5% loss");
}

TEST(nb_progress_thread, TEST_INTEG)
{
    return run_nb(6, 2,
                  "INCOLL_PROGRESS_THREAD=1 INCOLL_FAULT_DROP=0.05 "
                  "INCOLL_FAULT_SEED=9",
                  "--iters 100 --threads", "6 hosts, progress thread, 5% loss");
}

/* Nonblocking allreduces of 64 KiB and more lock the tree and stream
 * (with payloads of 1 KiB the 64 slots carry 64 KiB at once): they run
 * in the communicator's thread, lock, stream and unlock, among requests
 * on the slots, under 5% loss; every result checked, and some streamed. */
TEST(nb_requests_stream, TEST_INTEG)
{
    char out[PATH_MAX];
    int ret;
    if (!have_fabric_binaries("nb_check"))
        return test_skip("build/bin/incoll, incoll-agg or build/tests/nb_check "
                         "not built");
    ret = run_fabric_check("nb_check", "nbfab", "nbs", 4, 2, 0,
                           "INCOLL_STREAM_THRESHOLD=64K INCOLL_PAYLOAD=1024 "
                           "INCOLL_LOG_LEVEL=info INCOLL_FAULT_DROP=0.05 "
                           "INCOLL_FAULT_SEED=5",
                           "--iters 50", out, sizeof(out));
    if (ret != 0 || !file_has(out, "all correct")) {
        show_tail(out);
        CHECK_MSG(0, "nb_check exited %d", ret);
    }
    fprintf(stderr, "    %llu operations streamed\n", streamed_in(out));
    CHECK_MSG(streamed_in(out) > 0, "no operation streamed (%s)", out);
    return TEST_PASSED;
}

/* The threads of this process named name (/proc/self/task/N/comm). */
static int threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[300], comm[64] = "";
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%.200s/comm", e->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof(comm), f) != NULL)
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        n += strcmp(comm, name) == 0;
    }
    closedir(d);
    return n;
}

/* Context switches, voluntary and not, of this process's threads other
 * than the main one (/proc/self/task/N/status): how often the library's
 * threads woke. */
static long other_threads_switches(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    long n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[300], line[256];
        FILE *f;
        if (e->d_name[0] == '.' || atoi(e->d_name) == (int)getpid())
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%.200s/status",
                 e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        while (fgets(line, sizeof(line), f) != NULL) {
            long v;
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 ||
                sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
                n += v;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* Writes a fabric.conf of n hosts on 127.0.0.1 (ports from port) into
 * dir, with an AN that never runs: no call here goes to it. */
static int write_conf(const char *dir, int n, int port)
{
    char path[1100];
    FILE *f;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f,
            "fabric hosts=%d radix=2 levels=1 admin_key=0x1234\n"
            "an name=l0 level=1 addr=127.0.0.1:9 parent=-\n",
            n);
    for (int r = 0; r < n; r++)
        fprintf(f, "host rank=%d leaf=l0 addr=127.0.0.1:%d\n", r, port + r);
    fprintf(f, "group id=7 key=0x5151 slots=16 payload=1024\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* Rank rank of size on the fabric.conf in dir, with the library's threads
 * and no manager: the number of recovery watchers running after a call
 * (-1: a call failed, or a watcher outlived finalize). A world of one
 * rank also runs collectives, alone. */
static int watchers_after_calls(const char *dir, int rank, int size)
{
    incoll_init_params_t p = {0};
    incoll_ctx_h ctx;
    incoll_comm_h world;
    int32_t in[64], out[64];
    int watching;

    p.field_mask = INCOLL_INIT_FIELD_RANK | INCOLL_INIT_FIELD_SIZE |
                   INCOLL_INIT_FIELD_FABRIC | INCOLL_INIT_FIELD_MGR |
                   INCOLL_INIT_FIELD_PROGRESS_THREAD;
    p.rank = rank;
    p.size = size;
    p.fabric = dir;
    p.mgr = "";
    p.progress_thread = 1;
    for (int i = 0; i < 64; i++)
        in[i] = i;
    if (incoll_init_params(&p, &ctx) != INCOLL_OK ||
        incoll_comm_world(ctx, &world) != INCOLL_OK || incoll_progress(ctx) < 0)
        return -1;
    if (size == 1) {
        incoll_req_h req;
        if (incoll_allreduce(world, in, out, 64, INCOLL_INT32, INCOLL_OP_SUM) !=
                INCOLL_OK ||
            incoll_iallreduce(world, in, out, 64, INCOLL_INT32, INCOLL_OP_SUM,
                              &req) != INCOLL_OK ||
            incoll_req_wait(req) != INCOLL_OK || out[63] != 63)
            return -1;
    }
    /* (A new thread names itself: a moment later.) */
    for (int i = 0; i < 100 && (watching = threads_named("incoll-watch")) == 0;
         i++)
        usleep(10000);
    incoll_finalize(ctx);
    return threads_named("incoll-watch") == 0 ? watching : -1;
}

/* Rank r of a world of two on the fabric.conf in dir, each in a process
 * of its own that ends 0 when rank_ok(dir, r) says 1 (and by SIGALRM
 * after 20 s): their wait statuses into status. 0, or -1 when a fork or
 * a wait failed. */
static int two_ranks(const char *dir, int (*rank_ok)(const char *, int),
                     int status[2])
{
    pid_t pids[2];

    fflush(NULL);
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] < 0)
            return -1;
        if (pids[r] == 0) {
            alarm(20);
            _exit(rank_ok(dir, r) ? 0 : 1);
        }
    }
    for (int r = 0; r < 2; r++)
        if (waitpid(pids[r], &status[r], 0) != pids[r])
            return -1;
    return 0;
}

/* Rank r of two: exactly one watcher while its calls ran, none after
 * finalize. */
static int one_watcher(const char *dir, int r)
{
    int w = watchers_after_calls(dir, r, 2);
    if (w != 1)
        fprintf(stderr, "    rank %d: %d watchers\n", r, w);
    return w == 1;
}

/* The recovery watcher wakes its process (10 times a second while calls
 * run, nb_watcher_idle_sleeps below): it runs only
 * where a recovery can pull the process in, a communicator with another
 * member (here the world of two ranks), never in a context of one rank,
 * and ends at finalize. */
TEST(nb_watcher_only_with_peers, TEST_UNIT)
{
    char dir[1024];
    int status[2];
    int port = 20000 + (int)(getpid() % 20000);

    snprintf(dir, sizeof(dir), "%.900s/watch1", test_tmpdir());
    CHECK(write_conf(dir, 1, port) == 0);
    CHECK_EQ_INT(watchers_after_calls(dir, 0, 1), 0);
    snprintf(dir, sizeof(dir), "%.900s/watch2", test_tmpdir());
    CHECK(write_conf(dir, 2, port) == 0);
    CHECK(two_ranks(dir, one_watcher, status) == 0);
    for (int r = 0; r < 2; r++)
        CHECK_MSG(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
                  "rank %d of 2: no watcher, or one after finalize (0x%x)", r,
                  status[r]);
    return TEST_PASSED;
}

/* Rank rank of a world of two on the fabric.conf in dir, with the
 * library's threads, making no call for a second once its watcher runs:
 * how often the threads other than the main one woke in that second (-1:
 * init failed, or no watcher). */
static long idle_wakeups(const char *dir, int rank)
{
    incoll_init_params_t p = {0};
    incoll_ctx_h ctx;
    incoll_comm_h world;
    long before, woke;

    p.field_mask = INCOLL_INIT_FIELD_RANK | INCOLL_INIT_FIELD_SIZE |
                   INCOLL_INIT_FIELD_FABRIC | INCOLL_INIT_FIELD_MGR |
                   INCOLL_INIT_FIELD_PROGRESS_THREAD;
    p.rank = rank;
    p.size = 2;
    p.fabric = dir;
    p.mgr = "";
    p.progress_thread = 1;
    if (incoll_init_params(&p, &ctx) != INCOLL_OK ||
        incoll_comm_world(ctx, &world) != INCOLL_OK || incoll_progress(ctx) < 0)
        return -1;
    for (int i = 0; i < 100 && threads_named("incoll-watch") == 0; i++)
        usleep(10000);
    if (threads_named("incoll-watch") != 1)
        return -1;
    usleep(300000); /* its first look finds the library idle */
    before = other_threads_switches();
    sleep(1);
    woke = other_threads_switches() - before;
    incoll_finalize(ctx);
    return before < 0 ? -1 : woke;
}

/* Rank r of two: its library's threads woke at most twice in 1 s idle. */
static int idle_quiet(const char *dir, int r)
{
    long w = idle_wakeups(dir, r);
    fprintf(stderr,
            "    rank %d: the library's threads woke %ld times in "
            "1 s idle\n",
            r, w);
    return w >= 0 && w <= 2;
}

/* An idle process's library threads sleep until there is something to
 * do: the ranks of a world of two whose program makes no call (it runs
 * MPI's own collectives, say, or computes) and to which nothing comes.
 * Their recovery watchers, which looked 10 times a second, wake at most
 * twice in a second once they found the library idle. */
TEST(nb_watcher_idle_sleeps, TEST_UNIT)
{
    char dir[1024];
    int status[2];
    int port = 20000 + (int)((getpid() + 7) % 20000);

    snprintf(dir, sizeof(dir), "%.900s/watch_idle", test_tmpdir());
    CHECK(write_conf(dir, 2, port) == 0);
    CHECK(two_ranks(dir, idle_quiet, status) == 0);
    for (int r = 0; r < 2; r++)
        CHECK_MSG(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
                  "rank %d: its library threads woke more than twice in a "
                  "second idle, or no watcher ran (0x%x)",
                  r, status[r]);
    return TEST_PASSED;
}
