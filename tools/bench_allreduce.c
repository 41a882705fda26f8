/*
 * `incoll bench allreduce`: in-network allreduce against the host-based
 * algorithms, side by side on the same fabric, OSU/ucc_perftest style.
 * This file is the driver; the rank side is bench_allreduce_rank.c and the
 * report bench_allreduce_report.c (bench_allreduce.h joins them), with K
 * ranks per host (--ppn) it is bench_hier.c.
 *
 * The driver parses the command line (bench_opts.h: the shared table; the
 * algorithm names are the core's, src/core/algo.h, plus mpi and
 * mpi-layer), gets a fabric (--fabric DIR, or one it brings up: emulated
 * links with --emulate, else loopback, always torn down), starts P ranks
 * with `incoll run` running the hidden `incoll bench _allreduce`, and
 * turns their raw records into the table, the CSV and the plot. With
 * `mpi` in --algos (the MPI library's own MPI_Allreduce as a baseline)
 * the ranks are the MPI worker instead, started with `incoll mpirun`
 * (bench_launch_mpi; tools/mpi/bench_worker.c), which runs the same rank
 * code with libincoll brought up from MPI.
 *
 * --loss runs the whole measurement once per drop rate (and per round),
 * each on a fabric brought up with the rate in its environment, and pools
 * the samples per rate into goodput and latency percentiles.
 */
#include "bench_allreduce.h"
#include "bench_hier.h"
#include "bench_rank.h"

#include "common/settings.h"
#include "core/algo.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the command line ------------------------------------------------- */

/* Ids are incoll_algo_t (the core's algo_kind_t + 1), then mpi,
 * mpi-layer and inc-stream. */
static const char *algo_name_of(const bench_cmd_t *cmd, int id)
{
    (void)cmd;
    if (id > INCOLL_ALGO_AUTO && id < INCOLL_ALGO_COUNT)
        return algo_name((algo_kind_t)(id - 1));
    if (id == AR_ALGO_MPI)
        return BENCH_NAME_MPI;
    if (id == AR_ALGO_MPI_LAYER)
        return BENCH_NAME_MPI_LAYER;
    if (id == AR_ALGO_INC_STREAM)
        return ALGO_INC_STREAM_NAME;
    return NULL;
}

const char *ar_algo_str(int algo)
{
    const char *n = algo_name_of(NULL, algo);
    return n ? n : "auto";
}

/* Default: every algorithm of libincoll, in the core's order. */
static void ar_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    static char all[128];
    (void)cmd;
    if (all[0] == '\0')
        for (int k = 0; k < ALGO_COUNT; k++)
            snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s",
                     k ? "," : "", algo_name((algo_kind_t)k));
    o->algos_text = all;
}

static const bench_optdoc_t ar_docs[] = {
    {BENCH_OPT_ALGOS,
     "libincoll's algorithms, and mpi (the MPI library's own "
     "MPI_Allreduce: the ranks then run under Open MPI's mpirun) and "
     "mpi-layer (the same call through libincoll_mpi, as a preloaded "
     "program makes it); inc-stream: inc streaming through a locked tree "
     "(docs/streaming.md; inc then stays on the slots, and the library's "
     "streaming settings apply: INCOLL_STREAM_LOCK, _WINDOW, _SLOTS); "
     "ALGO:SIZE runs ALGO only up to SIZE (rd:256K)"},
    {BENCH_OPT_ITERS, "timed iterations per size (default: 4 MiB / size, "
                      "at least 4, at most 100)"},
    {0, NULL},
};

const bench_cmd_t ar_cmd = {
    .who = "bench allreduce",
    .synopsis = "bench allreduce [-n P] [--fabric DIR | --emulate "
                "[--link-rate R]] [--radix K] [--sizes MIN:MAX] [--algos "
                "LIST] [--iters N] [--warmup N] [--jobs J] [--csv FILE] "
                "[--plot FILE.png] [--keep] [--timeout SEC]",
    .about = "Runs allreduce (float32 sum) over P ranks for every size from "
             "MIN to MAX (doubling) with each algorithm, side by side "
             "(alternating per iteration), checks every result, and prints "
             "one row per size and algorithm: bytes, avg/min/max latency "
             "(us), bandwidth (bytes / latency), bytes and datagrams each "
             "host sent per operation, CPU time per operation and the "
             "completion spread over ranks; then the speedup of inc over "
             "the best host-based algorithm per size. --ppn K runs K ranks "
             "per host (`incoll bench allreduce --ppn 1 --help`).",
    .accepts = BENCH_OPTS_FABRIC | BENCH_OPT(LINK_RATE) | BENCH_OPT(SIZES) |
               BENCH_OPT(ALGOS) | BENCH_OPT(ITERS) | BENCH_OPT(WARMUP) |
               BENCH_OPT(CSV) | BENCH_OPT(PLOT) | BENCH_OPT(REFERENCE) |
               BENCH_OPT(LOSS) | BENCH_OPT(BURST) | BENCH_OPT(ROUNDS) |
               BENCH_OPT(JOBS) | BENCH_OPT(DRY_RUN) | BENCH_OPT(OUT) |
               BENCH_OPT(GATE) | BENCH_OPT(PROGRESS),
    .defaults = ar_defaults,
    .algo_name = algo_name_of,
    .docs = ar_docs,
    .epilog = "Knobs of the library (INCOLL_WINDOW, INCOLL_RTO_MIN_US, ...) "
              "pass through the environment to every rank; `incoll info` "
              "lists them.",
};

/* Bytes are whole float32 elements, at least one. */
static size_t round_size(size_t b)
{
    return b < 4 ? 4 : (b + 3) / 4 * 4;
}

int ar_parse(int argc, char **argv, bench_opts_t *o, int *exit_p)
{
    const char *who = ar_cmd.who;

    if (bench_opts_get(&ar_cmd, argc, argv, o, exit_p) != 0)
        return 1;
    *exit_p = 2;
    if ((o->burst > 0 || o->rounds > 0) && o->nloss == 0) {
        fprintf(stderr, "incoll %s: --burst and --rounds go with --loss\n",
                who);
        return 1;
    }
    if (o->nloss > 0 && (ar_has_mpi(o) || o->reference)) {
        fprintf(stderr,
                "incoll %s: --loss runs libincoll's algorithms: not with "
                "mpi, mpi-layer or --reference\n",
                who);
        return 1;
    }
    if (o->jobs > 1) {
        const char *why = NULL;
        if (o->nloss > 0 || ar_has_mpi(o) || o->reference || o->csv || o->plot)
            why = "it does not go with --loss, mpi, mpi-layer, --reference, "
                  "--csv or --plot";
        else if (o->fabric == NULL && o->gate == NULL &&
                 (o->hosts % o->jobs != 0 || o->hosts / o->jobs < 2))
            why = "-n must be a multiple of J with at least two ranks per job";
        if (why) {
            fprintf(stderr, "incoll %s: --jobs %d: %s\n", who, o->jobs, why);
            return 1;
        }
    }
    if (o->jobs == 0)
        o->jobs = 1;
    if (o->rounds == 0)
        o->rounds = 1;
    o->min_size = round_size(o->min_size);
    o->max_size = round_size(o->max_size);
    *exit_p = 0;
    return 0;
}

int ar_has_mpi(const bench_opts_t *o)
{
    return bench_algos_find(&o->algos, AR_ALGO_MPI) >= 0 ||
           bench_algos_find(&o->algos, AR_ALGO_MPI_LAYER) >= 0;
}

int ar_iters_for(const bench_opts_t *o, size_t bytes)
{
    return bench_iters_for(o, bytes, 4u << 20, 4, 100);
}

int ar_warmup_for(const bench_opts_t *o, size_t bytes)
{
    return bench_warmup_for(o, ar_iters_for(o, bytes));
}

int ar_nactive(const bench_opts_t *o, size_t bytes)
{
    int n = 0;
    for (int i = 0; i < o->algos.n; i++)
        n += bench_algos_active(&o->algos, i, bytes);
    return n;
}

uint64_t ar_nrecs(const bench_opts_t *o, const size_t *sizes, int nsizes)
{
    uint64_t n = 0;
    for (int s = 0; s < nsizes; s++)
        n += (uint64_t)ar_iters_for(o, sizes[s]) *
             (uint64_t)ar_nactive(o, sizes[s]);
    return n;
}

/* ---- one run ---------------------------------------------------------- */

void ar_stream_env(const bench_opts_t *o)
{
    /* inc-stream needs streaming on in the ranks' library (a stream window
     * in their engines); the ranks then pick per operation. */
    if (bench_algos_find(&o->algos, AR_ALGO_INC_STREAM) >= 0 &&
        setting_u64(SETTING_STREAM_THRESHOLD) == 0)
        setenv("INCOLL_STREAM_THRESHOLD", "1", 1);
}

/* The rank side's command line (NULL-terminated, strings in *b). */
typedef struct {
    char sz[64], iters[16], warm[16], algos[256], jobs[16];
    char *args[28];
} ar_args_t;

static char **rank_args(const bench_opts_t *o, const char *out,
                        const char *progress, const char *gate, ar_args_t *b)
{
    int a = 0;
    bench_sizes_str(o->min_size, o->max_size, b->sz, sizeof(b->sz));
    snprintf(b->iters, sizeof(b->iters), "%d", o->iters);
    snprintf(b->warm, sizeof(b->warm), "%d", o->warmup);
    bench_algos_str(&ar_cmd, &o->algos, b->algos, sizeof(b->algos));
    b->args[a++] = "_allreduce";
    b->args[a++] = "--sizes";
    b->args[a++] = b->sz;
    b->args[a++] = "--algos";
    b->args[a++] = b->algos;
    if (o->iters > 0) {
        b->args[a++] = "--iters";
        b->args[a++] = b->iters;
    }
    if (o->warmup >= 0) {
        b->args[a++] = "--warmup";
        b->args[a++] = b->warm;
    }
    b->args[a++] = "--out";
    b->args[a++] = (char *)out;
    if (progress) {
        b->args[a++] = "--progress";
        b->args[a++] = (char *)progress;
    }
    if (gate) {
        snprintf(b->jobs, sizeof(b->jobs), "%d", o->jobs);
        b->args[a++] = "--jobs";
        b->args[a++] = b->jobs;
        b->args[a++] = "--gate";
        b->args[a++] = (char *)gate;
    }
    b->args[a] = NULL;
    return b->args;
}

/*
 * Gets the fabric (bench_fabric_start: the caller closes it, also on
 * failure), runs the ranks on it and reads their records into *recs_p
 * (f->hosts arrays the caller frees). Returns 0, or the exit code (1, or
 * 130 when interrupted) after a message.
 */
static int run_on_fabric(const bench_opts_t *o, const size_t *sizes, int nsizes,
                         bench_fabric_t *f, ar_rec_t ***recs_p)
{
    const char *who = ar_cmd.who;
    char progress[PATH_MAX + 16], desc[256];
    ar_args_t b;
    char **args;
    int rc;

    *recs_p = NULL;
    if (bench_fabric_start(f, o, who) != 0)
        return bench_interrupted() ? 130 : 1;
    if (o->fabric && f->hosts != o->hosts) {
        fprintf(stderr, "incoll %s: the fabric in %s has %d hosts, not -n %d\n",
                who, f->dir, f->hosts, o->hosts);
        return 1;
    }
    snprintf(progress, sizeof(progress), "%s/progress", f->work);
    ar_stream_env(o);
    args = rank_args(o, f->work, progress, NULL, &b);
    bench_fabric_describe(f, desc, sizeof(desc));
    fprintf(stderr, "incoll %s: %s; sizes %s, algorithms %s\n", who, desc, b.sz,
            b.algos);
    if (bench_barrier_create(f->work) != 0) {
        fprintf(stderr, "incoll %s: cannot create %s/barrier: %s\n", who,
                f->work, log_strerror(errno));
        return 1;
    }
    /* With mpi the ranks run under mpirun, in the MPI worker. */
    rc = ar_has_mpi(o) ? bench_launch_mpi(f, args, progress, o->timeout_s)
                       : bench_launch(f, args, progress, o->timeout_s);
    if (bench_interrupted()) {
        fprintf(stderr, "incoll %s: interrupted; tearing down\n", who);
        return 130;
    }
    if (rc != 0) {
        fprintf(stderr,
                "incoll %s: the run failed (incoll %s exited %d; the failing "
                "rank said why above): no results\n",
                who, ar_has_mpi(o) ? "mpirun" : "run", rc);
        return 1;
    }
    *recs_p = calloc((size_t)f->hosts, sizeof(**recs_p));
    if (*recs_p == NULL ||
        ar_load_records(f->work, f->hosts, nsizes, o->algos.n,
                        ar_nrecs(o, sizes, nsizes), *recs_p) != 0)
        return 1;
    return 0;
}

static void free_records(ar_rec_t **recs, int nranks)
{
    for (int r = 0; recs && r < nranks; r++)
        free(recs[r]);
    free(recs);
}

/* ---- --jobs ----------------------------------------------------------- */

/* Each job's bandwidth per size and algorithm, their sum, the least job
 * against a fair share, and how much the jobs overlapped in time. */
static void print_jobs(const bench_opts_t *o, const bench_fabric_t *f, int per,
                       const size_t *sizes, int nsizes, ar_stat_t **stats,
                       const uint64_t *t0, const uint64_t *t1)
{
    uint64_t first = UINT64_MAX, last_start = 0, first_end = UINT64_MAX;
    uint64_t longest = 0;
    char desc[256];
    int J = o->jobs, n = o->algos.n;

    for (int j = 0; j < J; j++) {
        first = t0[j] < first ? t0[j] : first;
        last_start = t0[j] > last_start ? t0[j] : last_start;
        first_end = t1[j] < first_end ? t1[j] : first_end;
        longest = t1[j] - t0[j] > longest ? t1[j] - t0[j] : longest;
    }
    bench_fabric_describe(f, desc, sizeof(desc));
    printf("# incoll bench allreduce --jobs %d: %s\n", J, desc);
    printf("# %d jobs of %d ranks at once, job j on hosts j, j+%d, ... (all "
           "under every leaf); float32 sum; every result verified\n",
           J, per, J);
    printf("# MB/s: bytes / the job's avg latency; window: the job's timed "
           "operations, first start to last end (s after the earliest)\n");
    for (int j = 0; j < J; j++)
        printf("# job %d: window %.3f .. %.3f s\n", j,
               (double)(t0[j] - first) / 1e9, (double)(t1[j] - first) / 1e9);
    printf("# all %d jobs ran at once for %.3f s, %.0f%% of the longest "
           "window\n",
           J,
           first_end > last_start ? (double)(first_end - last_start) / 1e9 : 0,
           first_end > last_start && longest
               ? 100.0 * (double)(first_end - last_start) / (double)longest
               : 0);
    printf("%-12s %9s %4s %6s %10s %9s\n", "algo", "bytes", "job", "iters",
           "avg(us)", "MB/s");
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < n; ai++)
            for (int j = 0; j < J; j++) {
                const ar_stat_t *st = &stats[j][s * n + ai];
                if (st->iters > 0)
                    printf("%-12s %9zu %4d %6d %10.1f %9.2f\n",
                           ar_algo_str(o->algos.id[ai]), sizes[s], j, st->iters,
                           st->avg_us, st->bw_MBps);
            }
    printf("\n# sum: the jobs' MB/s added up; fair: sum / %d; least/fair: the "
           "slowest job's MB/s over fair\n",
           J);
    printf("%-12s %9s %10s %9s %9s %10s\n", "algo", "bytes", "sum MB/s", "fair",
           "least", "least/fair");
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < n; ai++) {
            double sum = 0, least = -1;
            for (int j = 0; j < J; j++) {
                double bw = stats[j][s * n + ai].bw_MBps;
                sum += bw;
                least = least < 0 || bw < least ? bw : least;
            }
            if (stats[0][s * n + ai].iters == 0)
                continue;
            printf("%-12s %9zu %10.2f %9.2f %9.2f %9.2f\n",
                   ar_algo_str(o->algos.id[ai]), sizes[s], sum, sum / J, least,
                   sum > 0 ? least / (sum / J) : 0);
        }
}

/* --jobs J: one fabric, J jobs at once (bench_launch_jobs), each job's
 * records into its own statistics. */
static int run_jobs(const bench_opts_t *o, const size_t *sizes, int nsizes)
{
    const char *who = ar_cmd.who;
    int J = o->jobs, per, ret = 1, rc;
    uint64_t nrecs = ar_nrecs(o, sizes, nsizes);
    char progress[PATH_MAX + 16], desc[256];
    char(*dirs)[PATH_MAX + 16] = calloc((size_t)J, sizeof(*dirs));
    ar_args_t *b = calloc((size_t)J, sizeof(*b));
    char ***args = calloc((size_t)J, sizeof(*args));
    ar_rec_t ***recs = calloc((size_t)J, sizeof(*recs));
    ar_stat_t **stats = calloc((size_t)J, sizeof(*stats));
    uint64_t *t0 = calloc((size_t)J, sizeof(*t0));
    uint64_t *t1 = calloc((size_t)J, sizeof(*t1));
    bench_fabric_t f;

    memset(&f, 0, sizeof(f));
    if (!dirs || !b || !args || !recs || !stats || !t0 || !t1)
        goto out;
    if (bench_fabric_start(&f, o, who) != 0) {
        ret = bench_interrupted() ? 130 : 1;
        goto out;
    }
    if (f.hosts % J != 0 || f.hosts / J < 2) {
        fprintf(stderr,
                "incoll %s: --jobs %d: the fabric's %d hosts are not a "
                "multiple of %d with two or more per job\n",
                who, J, f.hosts, J);
        goto out;
    }
    per = f.hosts / J;
    ar_stream_env(o);
    /* The gate: every job's ranks meet before their first timed
     * operation, so the jobs' timed operations run at once. */
    if (bench_barrier_create(f.work) != 0) {
        fprintf(stderr, "incoll %s: cannot create %s/barrier: %s\n", who,
                f.work, log_strerror(errno));
        goto out;
    }
    snprintf(progress, sizeof(progress), "%s/progress", f.work);
    for (int j = 0; j < J; j++) {
        snprintf(dirs[j], sizeof(dirs[j]), "%s/job-%d", f.work, j);
        if (mkdir(dirs[j], 0755) != 0 || bench_barrier_create(dirs[j]) != 0) {
            fprintf(stderr, "incoll %s: cannot make %s: %s\n", who, dirs[j],
                    log_strerror(errno));
            goto out;
        }
        args[j] =
            rank_args(o, dirs[j], j == 0 ? progress : NULL, f.work, &b[j]);
    }
    bench_fabric_describe(&f, desc, sizeof(desc));
    fprintf(stderr,
            "incoll %s: %s; %d jobs of %d ranks; sizes %s, "
            "algorithms %s\n",
            who, desc, J, per, b[0].sz, b[0].algos);
    rc = bench_launch_jobs(&f, J, args, progress, o->timeout_s);
    if (bench_interrupted()) {
        fprintf(stderr, "incoll %s: interrupted; tearing down\n", who);
        ret = 130;
        goto out;
    }
    if (rc != 0) {
        fprintf(stderr,
                "incoll %s: a job failed (incoll run exited %d; the failing "
                "rank said why above): no results\n",
                who, rc);
        goto out;
    }
    for (int j = 0; j < J; j++) {
        recs[j] = calloc((size_t)per, sizeof(**recs));
        stats[j] = calloc((size_t)nsizes * (size_t)o->algos.n, sizeof(**stats));
        if (recs[j] == NULL || stats[j] == NULL ||
            ar_load_records(dirs[j], per, nsizes, o->algos.n, nrecs, recs[j]) !=
                0 ||
            ar_compute_stats(o, sizes, nsizes, per, recs[j], stats[j]) != 0)
            goto out;
        t0[j] = UINT64_MAX;
        for (int r = 0; r < per; r++)
            for (uint64_t i = 0; i < nrecs; i++) {
                const ar_rec_t *rc1 = &recs[j][r][i];
                t0[j] = rc1->start_ns < t0[j] ? rc1->start_ns : t0[j];
                t1[j] = rc1->end_ns > t1[j] ? rc1->end_ns : t1[j];
            }
    }
    print_jobs(o, &f, per, sizes, nsizes, stats, t0, t1);
    fflush(stdout);
    ret = 0;
out:
    for (int j = 0; recs && stats && j < J; j++) {
        free_records(recs[j], f.hosts / J);
        free(stats[j]);
    }
    free(dirs);
    free(b);
    free(args);
    free(recs);
    free(stats);
    free(t0);
    free(t1);
    bench_fabric_close(&f);
    if (bench_interrupted() && ret == 0)
        ret = 130;
    return ret;
}

/* ---- --loss ----------------------------------------------------------- */

/* Sets the fault knobs every process started from now on inherits. */
static void loss_env(const bench_opts_t *o, double p, int round)
{
    char v[64];
    snprintf(v, sizeof(v), "%.17g", p);
    setenv("INCOLL_FAULT_DROP", v, 1);
    snprintf(v, sizeof(v), "%.17g", o->burst > 1 ? o->burst : 1);
    setenv("INCOLL_FAULT_BURST", v, 1);
    /* Another seed every round, so the rounds see other drops. */
    snprintf(v, sizeof(v), "%d", round + 1);
    setenv("INCOLL_FAULT_SEED", v, 1);
}

/*
 * For every round and every rate in turn, a fabric (brought up with the
 * rate in the environment, so its daemons drop too, or the one of
 * --fabric), the ranks, and their records pooled per rate; then the
 * table, the CSV and the plot of goodput vs loss rate.
 */
static int run_loss(const bench_opts_t *o, const size_t *sizes, int nsizes)
{
    const char *who = ar_cmd.who;
    size_t nacc = (size_t)o->nloss * (size_t)nsizes * (size_t)o->algos.n;
    ar_loss_acc_t *acc = calloc(nacc, sizeof(*acc));
    ar_loss_stat_t *st = calloc(nacc, sizeof(*st));
    bench_fabric_t f, last;
    int ret = 1, base_li = 0;

    memset(&last, 0, sizeof(last));
    if (acc == NULL || st == NULL)
        goto out;
    for (int li = 1; li < o->nloss; li++)
        if (o->loss[li] < o->loss[base_li])
            base_li = li;
    for (int round = 0; round < o->rounds; round++) {
        for (int li = 0; li < o->nloss; li++) {
            ar_rec_t **recs = NULL;
            int rc;
            fprintf(stderr, "incoll %s: round %d/%d, loss %g%%%s\n", who,
                    round + 1, o->rounds, 100 * o->loss[li],
                    o->burst > 1 ? " in bursts" : "");
            loss_env(o, o->loss[li], round);
            memset(&f, 0, sizeof(f));
            rc = run_on_fabric(o, sizes, nsizes, &f, &recs);
            if (rc == 0 && ar_loss_accumulate(o, sizes, nsizes, f.hosts, recs,
                                              li, acc) != 0)
                rc = 1;
            free_records(recs, f.hosts);
            last = f; /* its shape, for the table's heading */
            bench_fabric_close(&f);
            if (rc != 0) {
                ret = rc;
                goto out;
            }
        }
    }
    ar_loss_stats(o, sizes, nsizes, base_li, acc, st);
    ar_print_loss_table(o, &last, sizes, nsizes, base_li, st);
    fflush(stdout);
    ret = 0;
    if (o->csv) {
        if (ar_write_loss_csv(o->csv, o, &last, sizes, nsizes, st) != 0)
            ret = 1;
        else
            fprintf(stderr, "incoll %s: wrote %s\n", who, o->csv);
    }
    if (o->plot) {
        if (ar_write_loss_plot(o->plot, o, &last, sizes, nsizes, st) != 0)
            ret = 1;
        else
            fprintf(stderr, "incoll %s: wrote %s\n", who, o->plot);
    }
out:
    for (size_t i = 0; acc && i < nacc; i++)
        free(acc[i].lat_us);
    free(acc);
    free(st);
    if (bench_interrupted() && ret == 0)
        ret = 130;
    return ret;
}

/* ---- the driver ------------------------------------------------------- */

/* --dry-run: the plan as parsed. */
static void print_plan(const bench_opts_t *o, const size_t *sizes, int nsizes)
{
    char al[256];
    bench_algos_str(&ar_cmd, &o->algos, al, sizeof(al));
    printf("hosts=%d radix=%d emulate=%d link_rate=%" PRIu64
           " fabric=%s algos=%s csv=%s plot=%s jobs=%d\n",
           o->hosts, o->radix, o->emulate, o->link_rate,
           o->fabric ? o->fabric : "-", al, o->csv ? o->csv : "-",
           o->plot ? o->plot : "-", o->jobs);
    for (int s = 0; s < nsizes; s++)
        printf("size=%zu iters=%d warmup=%d\n", sizes[s],
               ar_iters_for(o, sizes[s]), ar_warmup_for(o, sizes[s]));
}

int bench_allreduce_main(int argc, char **argv)
{
    const char *who = ar_cmd.who;
    bench_fabric_t f;
    bench_opts_t o;
    size_t *sizes = NULL;
    ar_rec_t **recs = NULL;
    ar_stat_t *stats = NULL;
    ar_ref_t ref;
    int nsizes, rc, ret = 1;

    /* K ranks per host: tools/bench_hier.c. */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--ppn") == 0 || strncmp(argv[i], "--ppn=", 6) == 0)
            return bench_hier_main(argc, argv);
    memset(&f, 0, sizeof(f));
    if (ar_parse(argc, argv, &o, &rc) != 0)
        return rc;
    if (o.reference && ar_load_reference(o.reference, &ref) != 0)
        return 2;
    nsizes = bench_size_list(o.min_size, o.max_size, &sizes);
    if (nsizes <= 0)
        return 1;
    if (o.dry_run) {
        print_plan(&o, sizes, nsizes);
        free(sizes);
        return 0;
    }
    if (ar_has_mpi(&o)) {
        char why[PATH_MAX + 128];
        if (bench_mpi_usable(NULL, 0, why, sizeof(why)) != 0) {
            fprintf(stderr,
                    "incoll %s: --algos mpi (the MPI library's own "
                    "allreduce) needs Open MPI: %s\n",
                    who, why);
            free(sizes);
            return 1;
        }
    }
    if (o.jobs > 1) {
        ret = run_jobs(&o, sizes, nsizes);
        free(sizes);
        return ret;
    }
    if (o.nloss > 0) {
        ret = run_loss(&o, sizes, nsizes);
        free(sizes);
        return ret;
    }
    rc = run_on_fabric(&o, sizes, nsizes, &f, &recs);
    if (rc != 0) {
        ret = rc;
        goto out;
    }
    stats = calloc((size_t)nsizes * (size_t)o.algos.n, sizeof(*stats));
    if (stats == NULL ||
        ar_compute_stats(&o, sizes, nsizes, f.hosts, recs, stats) != 0)
        goto out;
    ar_print_table(&o, &f, sizes, nsizes, stats, o.reference ? &ref : NULL);
    fflush(stdout);
    ret = 0;
    if (o.csv) {
        if (ar_write_csv(o.csv, &o, &f, sizes, nsizes, stats) != 0)
            ret = 1;
        else
            fprintf(stderr, "incoll %s: wrote %s\n", who, o.csv);
    }
    if (o.plot) {
        if (ar_write_plot(o.plot, &o, &f, sizes, nsizes, stats,
                          o.reference ? &ref : NULL) != 0)
            ret = 1;
        else
            fprintf(stderr, "incoll %s: wrote %s\n", who, o.plot);
    }
out:
    free_records(recs, f.hosts);
    free(stats);
    free(sizes);
    bench_fabric_close(&f);
    if (bench_interrupted() && ret == 0)
        ret = 130;
    return ret;
}
