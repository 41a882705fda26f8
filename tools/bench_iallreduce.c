/*
 * `incoll bench iallreduce`: how much of a nonblocking allreduce the
 * hosts can hide behind computation, OSU-style (osu_iallreduce):
 *
 *   pure     the time of iallreduce + wait alone (avg over ranks);
 *   total    the time of iallreduce, a compute phase as long as pure, wait;
 *   overlap  100 * (1 - (total - compute) / pure), clamped to 0..100.
 *
 * Side by side in one run: in the network and on the hosts (ring and
 * recursive doubling, whose every step needs a host CPU), each without
 * and with INCOLL_PROGRESS_THREAD=1 (two launches). The compute
 * phase is a loop of arithmetic that calls nothing of libincoll. Also
 * reports the CPU time the progress thread costs while idle (the process's
 * CPU time over one second in which the main thread sleeps).
 */
#include "bench_common.h"
#include "bench_rank.h"

#include "incoll.h"
#include "common/clock.h"
#include "core/algo.h"
#include "host/req.h"
#include "host/api.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void ia_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    (void)cmd;
    o->iters = 20;
    o->timeout_s = 300;
    o->min_size = 16384;
}

static const bench_range_t ia_ranges[] = {
    {BENCH_OPT_HOSTS, 2, 4096},
    {0, 1, 0},
};

static const bench_cmd_t ia_cmd = {
    .who = "bench iallreduce",
    .synopsis = "bench iallreduce [-n|--hosts N] [--radix K] [--sizes "
                "MIN:MAX] [--iters N] [--fabric DIR | --emulate] [--timeout "
                "S] [--keep]",
    .about = "How much of a nonblocking allreduce (float64 sum) the hosts "
             "hide behind computation, OSU-style: in the network, ring and "
             "recursive doubling, each without and with a progress thread.",
    .accepts = BENCH_OPTS_FABRIC | BENCH_OPT(SIZES) | BENCH_OPT(ITERS) |
               BENCH_OPT(OUT) | BENCH_OPT(PT),
    .defaults = ia_defaults,
    .ranges = ia_ranges,
};

/* Computes (arithmetic only, no library call) for ns. */
static double sink;
static void compute(uint64_t ns)
{
    uint64_t t0 = now_ns();
    double x = 1.0;
    while (now_ns() - t0 < ns)
        for (int i = 0; i < 2000; i++)
            x = x * 1.0000001 + 1e-9;
    sink += x;
}

/* Average over iters of iallreduce [+ compute(ns)] + wait, in us; -1 on
 * an error. */
static double timed(incoll_comm_h comm, incoll_algo_t algo, const double *in,
                    double *out, size_t n, int iters, uint64_t ns)
{
    double sum = 0;
    for (int it = -2; it < iters; it++) {
        incoll_req_h r;
        uint64_t t0;
        incoll_barrier(comm);
        t0 = now_ns();
        if (host_iallreduce_algo(comm, algo, in, out, n, INCOLL_FLOAT64,
                                 INCOLL_OP_SUM, &r) != INCOLL_OK)
            return -1;
        if (ns)
            compute(ns);
        if (incoll_req_wait(r) != INCOLL_OK)
            return -1;
        if (it >= 0)
            sum += (double)(now_ns() - t0);
    }
    return sum / iters / 1e3;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int bench_iallreduce_rank_main(int argc, char **argv)
{
    bench_opts_t o;
    bench_rank_t r;
    incoll_comm_h world;
    static const incoll_algo_t algos[3] = {INCOLL_ALGO_INC, INCOLL_ALGO_RING,
                                           INCOLL_ALGO_RD};
    FILE *res = NULL;
    int rank, size, ret = 0;
    size_t *sizes = NULL;
    int nsizes;

    if (bench_opts_get(&ia_cmd, argc, argv, &o, &ret) != 0 || o.out == NULL) {
        fprintf(stderr, "incoll bench _iallreduce: the rank side needs "
                        "--out DIR\n");
        return 2;
    }
    if (bench_rank_start(&r, NULL, ia_cmd.who) != 0)
        return 4;
    world = r.world;
    rank = r.rank;
    size = r.size;
    if (rank == 0) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/iallreduce.txt", o.out);
        res = fopen(path, "a");
    }
    nsizes = bench_size_list(o.min_size, o.max_size, &sizes);
    for (int s = 0; s < nsizes && ret == 0; s++) {
        size_t n = sizes[s] / sizeof(double);
        double *in = malloc(n * sizeof(double)),
               *out = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++)
            in[i] = rank + 1;
        for (int a = 0; a < 3 && ret == 0; a++) {
            double pure, total, v[2], mx[2];
            if (a == 0 && !incoll_comm_offloaded(world, NULL))
                continue;
            pure = timed(world, algos[a], in, out, n, o.iters, 0);
            if (pure < 0 || out[0] != (double)size * (size + 1) / 2) {
                ret = 1;
                break;
            }
            /* Every rank computes as long as the slowest one's pure time
             * (OSU's compute phase). */
            incoll_allreduce(world, &pure, &mx[0], 1, INCOLL_FLOAT64,
                             INCOLL_OP_MAX);
            total = timed(world, algos[a], in, out, n, o.iters,
                          (uint64_t)(mx[0] * 1e3));
            if (total < 0) {
                ret = 1;
                break;
            }
            v[0] = pure;
            v[1] = total;
            incoll_allreduce(world, v, mx, 2, INCOLL_FLOAT64, INCOLL_OP_SUM);
            if (res) {
                double p = mx[0] / size, t = mx[1] / size, c = p;
                double ov = 100.0 * (1.0 - (t - c) / p);
                ov = ov < 0 ? 0 : ov > 100 ? 100 : ov;
                fprintf(res, "%d %s %zu %.1f %.1f %.1f %.1f\n", o.pt,
                        algo_name((algo_kind_t)(algos[a] - 1)), sizes[s], p, t,
                        c, ov);
                fflush(res);
            }
        }
        free(in);
        free(out);
    }
    /* The idle cost of the library's threads: CPU time while the main
     * thread sleeps one second with nothing outstanding. */
    if (ret == 0) {
        double c0 = cpu_s(), c1, mx;
        struct timespec one = {1, 0};
        nanosleep(&one, NULL);
        c1 = cpu_s() - c0;
        incoll_allreduce(world, &c1, &mx, 1, INCOLL_FLOAT64, INCOLL_OP_MAX);
        if (res)
            fprintf(res, "%d idle %.4f\n", o.pt, mx * 100.0);
    }
    if (res)
        fclose(res);
    free(sizes);
    bench_rank_stop(&r);
    return ret;
}

int bench_iallreduce_main(int argc, char **argv)
{
    bench_opts_t o;
    bench_fabric_t f;
    char path[PATH_MAX + 32], line[256];
    FILE *in;
    int rc, ret = 1;

    if (bench_opts_get(&ia_cmd, argc, argv, &o, &rc) != 0)
        return rc;
    if (bench_fabric_start(&f, &o, ia_cmd.who) != 0)
        return bench_interrupted() ? 130 : 1;
    for (int pt = 0; pt < 2; pt++) {
        char sz[64], lo[24], hi[24], iters[16], pts[4];
        char *args[16];
        int n = 0;
        snprintf(sz, sizeof(sz), "%s:%s",
                 bench_size_str(o.min_size, lo, sizeof(lo)),
                 bench_size_str(o.max_size, hi, sizeof(hi)));
        snprintf(iters, sizeof(iters), "%d", o.iters);
        snprintf(pts, sizeof(pts), "%d", pt);
        args[n++] = "_iallreduce";
        args[n++] = "--sizes";
        args[n++] = sz;
        args[n++] = "--iters";
        args[n++] = iters;
        args[n++] = "--out";
        args[n++] = f.work;
        args[n++] = "--pt";
        args[n++] = pts;
        args[n] = NULL;
        setenv("INCOLL_PROGRESS_THREAD", pt ? "1" : "0", 1);
        rc = bench_launch(&f, args, NULL, o.timeout_s);
        if (bench_interrupted()) {
            ret = 130;
            goto out;
        }
        if (rc != 0) {
            fprintf(stderr,
                    "incoll bench iallreduce: the run failed (incoll "
                    "run exited %d)\n",
                    rc);
            goto out;
        }
    }
    snprintf(path, sizeof(path), "%s/iallreduce.txt", f.work);
    in = fopen(path, "r");
    if (in == NULL) {
        fprintf(stderr, "incoll bench iallreduce: no results in %s\n", path);
        goto out;
    }
    printf("# incoll bench iallreduce: %d hosts, %s; float64 sum; times avg "
           "over ranks (us); overlap = 100*(1-(total-compute)/pure) (OSU)\n",
           f.hosts, f.emulated ? "emulated links" : "loopback fabric");
    printf("%-8s %-6s %9s %10s %10s %10s %8s\n", "progress", "algo", "bytes",
           "pure(us)", "total(us)", "compute", "overlap%");
    while (fgets(line, sizeof(line), in)) {
        int pt;
        char algo[16];
        size_t bytes;
        double p, t, c, ov;
        if (sscanf(line, "%d %15s %zu %lf %lf %lf %lf", &pt, algo, &bytes, &p,
                   &t, &c, &ov) == 7)
            printf("%-8s %-6s %9zu %10.1f %10.1f %10.1f %8.1f\n",
                   pt ? "thread" : "caller", algo, bytes, p, t, c, ov);
        else if (sscanf(line, "%d idle %lf", &pt, &p) == 2)
            printf("# idle CPU of the library's threads (%s): %.2f%% of a "
                   "core (max over ranks)\n",
                   pt ? "progress thread" : "no progress thread", p);
    }
    fclose(in);
    ret = 0;
out:
    bench_fabric_close(&f);
    return ret;
}
