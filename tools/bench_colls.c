/*
 * `incoll bench bcast|reduce|barrier|allgather|gather|scatter|
 * reduce_scatter`: one collective through libincoll's public function
 * (`incoll`: in the network when the group can, natively or as an
 * allreduce there, else on the hosts) side by side with each of its
 * host-based algorithms (core/algo.h) on the same fabric, OSU style.
 *
 * The driver gets a fabric (--fabric DIR, or one it brings up: emulated
 * links with --emulate, else loopback, always torn down) and starts the
 * ranks with `incoll run` running the hidden `incoll bench _coll`. Each
 * rank, for every size and iteration, runs every algorithm once in an
 * order drawn for the iteration (bench_run_order), each after an untimed
 * allreduce of one byte (a barrier), and times it on the monotonic clock. Per
 * algorithm and size the latency is each rank's average, then avg/min/max over
 * ranks (as OSU does); MB/s = bytes per rank / avg latency. Every operation's
 * result is checked (a bcast's bytes, an allgather's, gather's and scatter's
 * blocks, integer sums of reduce and reduce_scatter) and a wrong one fails
 * the run. Sizes are bytes per rank (elements of int64 for the
 * reductions: size / 8 of them).
 *
 * With `mpi` in --algos (the MPI library's own collective) or `mpi-layer`
 * (the same MPI call through libincoll_mpi's offload path), the ranks run
 * under `incoll mpirun` in the MPI worker (tools/mpi/bench_worker.c), as
 * `incoll bench allreduce` does, and those are two more columns of the
 * same interleaved run. A summary table then puts incoll beside the best
 * host-based algorithm and MPI's own at each size.
 */
#include "bench_common.h"
#include "bench_rank.h"
#include "bench_report.h"

#include "common/clock.h"
#include "host/counters.h"
#include "host/colls.h"
#include "host/req.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ALGOS 10

/* --algos names beside incoll and the host algorithms (under MPI only). */
#define BC_MPI (-10)   /* "mpi": the MPI library's own collective */
#define BC_LAYER (-11) /* "mpi-layer": the MPI call through the layer */

/* Under MPI: the worker's calls (NULL under `incoll run`). */
static const bench_mpi_t *bc_mpi;

/* --algos names: ids 0 "incoll" (libincoll's public function), 1 "host"
 * (every host algorithm), then the core's table of host algorithms
 * (core/algo.h) for this collective, then mpi and mpi-layer. */
#define BC_ID_TABLE 2
#define BC_ID_MPI (BC_ID_TABLE + CALGO_COUNT)

static const char *bc_algo_name(const bench_cmd_t *cmd, int id)
{
    if (id == 0)
        return "incoll";
    if (id == 1)
        return "host";
    if (id >= BC_ID_TABLE && id < BC_ID_MPI) {
        const algo_calgo_info_t *in =
            algo_calgo_info((algo_calgo_t)(id - BC_ID_TABLE));
        return in && in->coll == (algo_coll_t)cmd->arg ? in->name : NULL;
    }
    if (id == BC_ID_MPI)
        return BENCH_NAME_MPI;
    if (id == BC_ID_MPI + 1)
        return BENCH_NAME_MPI_LAYER;
    return NULL;
}

static void bc_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    o->iters = 20;
    o->timeout_s = 300;
    o->algos_text = "incoll,host";
    if (cmd->arg == ALGO_COLL_BARRIER)
        o->min_size = o->max_size = 0;
}

static const bench_range_t bc_ranges[] = {
    {BENCH_OPT_HOSTS, 2, 4096},
    {0, 1, 0},
};

static const bench_optdoc_t bc_docs[] = {
    {BENCH_OPT_SIZES, "bytes per rank (a barrier has none)"},
    {BENCH_OPT_ALGOS, "incoll, host (all host algorithms), host algorithms "
                      "by name, mpi (MPI's own) and mpi-layer (through "
                      "libincoll_mpi)"},
    {BENCH_OPT_ITERS, "timed operations per size"},
    {BENCH_OPT_TIMEOUT, "the whole run, seconds"},
    {0, NULL},
};

/* The command line of `incoll bench <coll>` (coll: argv[0]). NULL with a
 * message when coll names no collective. */
static const bench_cmd_t *bc_cmd(const char *coll)
{
    static char who[64], synopsis[96];
    static bench_cmd_t cmd = {
        .who = who,
        .synopsis = synopsis,
        .accepts = BENCH_OPTS_FABRIC | BENCH_OPT(SIZES) | BENCH_OPT(ITERS) |
                   BENCH_OPT(ALGOS) | BENCH_OPT(CSV) | BENCH_OPT(PLOT) |
                   BENCH_OPT(OUT),
        .defaults = bc_defaults,
        .algo_name = bc_algo_name,
        .docs = bc_docs,
        .ranges = bc_ranges,
    };
    int c = algo_coll_parse(coll);

    if (c < 0) {
        fprintf(stderr, "incoll bench: unknown collective '%s'\n", coll);
        return NULL;
    }
    cmd.arg = c;
    snprintf(who, sizeof(who), "bench %s", algo_coll_name((algo_coll_t)c));
    snprintf(synopsis, sizeof(synopsis), "bench %s [options]",
             algo_coll_name((algo_coll_t)c));
    return &cmd;
}

typedef struct {
    algo_coll_t coll;
    const char *algos; /* --algos as given (names, filtered per size) */
    bench_opts_t b;
} bc_opts_t;

/* Parses argv (argv[0] the collective) into o: 0, or the exit code in
 * *exit_p and non-zero. */
static int parse(int argc, char **argv, bc_opts_t *o, int *exit_p)
{
    const bench_cmd_t *cmd = bc_cmd(argv[0]);
    if (cmd == NULL) {
        *exit_p = 2;
        return 1;
    }
    o->coll = (algo_coll_t)cmd->arg;
    if (bench_opts_get(cmd, argc, argv, &o->b, exit_p) != 0)
        return 1;
    o->algos = o->b.algos_text;
    return 0;
}

/* 1 when name is in the comma-separated list. */
static int listed(const char *list, const char *name)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (strcmp(t, name) == 0)
            return 1;
    return 0;
}

/* 1 when the run needs MPI (mpi or mpi-layer in --algos). */
static int has_mpi(const bc_opts_t *o)
{
    return o->algos &&
           (listed(o->algos, "mpi") || listed(o->algos, "mpi-layer"));
}

/* The algorithms of the run: HOST_CALGO_AUTO ("incoll") and the host ones
 * of the collective that fit size, filtered by list, then mpi and
 * mpi-layer when listed. */
static int algo_list(const bc_opts_t *o, int size, int *algos)
{
    int n = 0;
    for (int a = HOST_CALGO_AUTO; a < CALGO_COUNT && n < MAX_ALGOS; a++) {
        const char *name = "incoll";
        if (a >= 0) {
            const algo_calgo_info_t *in = algo_calgo_info((algo_calgo_t)a);
            if (a == HOST_CALGO_INC || in->coll != o->coll ||
                !algo_calgo_fits((algo_calgo_t)a, size))
                continue;
            name = in->name;
        } else if (a != HOST_CALGO_AUTO) {
            continue;
        }
        if (o->algos && !listed(o->algos, name) &&
            (a < 0 || !listed(o->algos, "host")))
            continue;
        algos[n++] = a;
    }
    if (o->algos && listed(o->algos, "mpi") && n < MAX_ALGOS)
        algos[n++] = BC_MPI;
    if (o->algos && listed(o->algos, "mpi-layer") && n < MAX_ALGOS)
        algos[n++] = BC_LAYER;
    return n;
}

static const char *algo_label(int a)
{
    if (a == BC_MPI || a == BC_LAYER)
        return a == BC_MPI ? "mpi" : "mpi-layer";
    return a < 0 ? "incoll" : algo_calgo_info((algo_calgo_t)a)->name;
}

static uint8_t pat(int r, size_t i, int it)
{
    return (uint8_t)(r * 31 + i * 7 + (size_t)it * 13);
}

/* libincoll's public function of a's collective (`incoll`): as a program
 * calls it, with the early returns of the rooted ones. */
static incoll_status_t public_call(incoll_comm_h comm,
                                   const host_coll_args_t *a)
{
    switch (a->coll) {
    case ALGO_COLL_BCAST:
        return incoll_bcast(comm, a->recvbuf, a->count, a->root);
    case ALGO_COLL_REDUCE:
        return incoll_reduce(comm, a->sendbuf, a->recvbuf, a->count, a->dtype,
                             a->op, a->root);
    case ALGO_COLL_BARRIER:
        return incoll_barrier(comm);
    case ALGO_COLL_ALLGATHER:
        return incoll_allgather(comm, a->sendbuf, a->recvbuf, a->count);
    case ALGO_COLL_GATHER:
        return incoll_gather(comm, a->sendbuf, a->recvbuf, a->count, a->root);
    case ALGO_COLL_SCATTER:
        return incoll_scatter(comm, a->sendbuf, a->recvbuf, a->count, a->root);
    default:
        return incoll_reduce_scatter(comm, a->sendbuf, a->recvbuf, a->count,
                                     a->dtype, a->op);
    }
}

/* One operation; 0, or -1 (printed) when it failed or its result is wrong. */
static int one_op(incoll_comm_h comm, const bc_opts_t *o, int a, size_t bytes,
                  int rank, int size, int root, int it, uint8_t *in,
                  uint8_t *out)
{
    int red =
        o->coll == ALGO_COLL_REDUCE || o->coll == ALGO_COLL_REDUCE_SCATTER;
    size_t n = red ? bytes / 8 : bytes, all = (size_t)size * bytes;
    host_coll_args_t args = {o->coll,       in,  out, n, INCOLL_INT64,
                             INCOLL_OP_SUM, root};
    incoll_status_t st;
    int bad = 0;

    switch (o->coll) {
    case ALGO_COLL_BCAST:
        for (size_t i = 0; i < bytes; i++)
            out[i] = rank == root ? pat(root, i, it) : 0;
        args.sendbuf = out;
        break;
    case ALGO_COLL_REDUCE:
    case ALGO_COLL_REDUCE_SCATTER: {
        int64_t *v = (int64_t *)(void *)in;
        size_t cnt = o->coll == ALGO_COLL_REDUCE ? n : n * (size_t)size;
        for (size_t i = 0; i < cnt; i++)
            v[i] = (int64_t)(rank + 1) * (int64_t)(i + (size_t)it);
        break;
    }
    case ALGO_COLL_SCATTER:
        for (size_t i = 0; rank == root && i < all; i++)
            in[i] = pat((int)(i / bytes), i % bytes, it);
        break;
    default:
        for (size_t i = 0; i < bytes; i++)
            in[i] = pat(rank, i, it);
    }
    if (a == BC_MPI || a == BC_LAYER) {
        int rc = (a == BC_MPI ? bc_mpi->coll : bc_mpi->layer_coll)(
            (int)o->coll, args.sendbuf, args.recvbuf, args.count, root);
        if (rc != 0) {
            fprintf(stderr, "bench %s/%s: %zu bytes: MPI error %d\n",
                    algo_coll_name(o->coll), algo_label(a), bytes, rc);
            return -1;
        }
        st = INCOLL_OK;
    } else if (a == HOST_CALGO_AUTO) {
        st = public_call(comm, &args);
    } else {
        st = host_coll_run(comm, a, &args);
    }
    if (st != INCOLL_OK) {
        fprintf(stderr, "bench %s/%s: %zu bytes: %s\n", algo_coll_name(o->coll),
                algo_label(a), bytes, incoll_status_string(st));
        return -1;
    }
    switch (o->coll) {
    case ALGO_COLL_BCAST:
        for (size_t i = 0; i < bytes && !bad; i++)
            bad = out[i] != pat(root, i, it);
        break;
    case ALGO_COLL_REDUCE:
    case ALGO_COLL_REDUCE_SCATTER: {
        const int64_t *v = (const int64_t *)(const void *)out;
        size_t base = o->coll == ALGO_COLL_REDUCE ? 0 : (size_t)rank * n;
        int64_t s = (int64_t)size * (size + 1) / 2;
        if (o->coll == ALGO_COLL_REDUCE && rank != root)
            break;
        for (size_t i = 0; i < n && !bad; i++)
            bad = v[i] != s * (int64_t)(base + i + (size_t)it);
        break;
    }
    case ALGO_COLL_ALLGATHER:
    case ALGO_COLL_GATHER:
        if (o->coll == ALGO_COLL_GATHER && rank != root)
            break;
        for (size_t i = 0; i < all && !bad; i++)
            bad = out[i] != pat((int)(i / bytes), i % bytes, it);
        break;
    case ALGO_COLL_SCATTER:
        for (size_t i = 0; i < bytes && !bad; i++)
            bad = out[i] != pat(rank, i, it);
        break;
    default:
        break;
    }
    if (bad) {
        fprintf(stderr, "bench %s/%s: %zu bytes: WRONG result on rank %d\n",
                algo_coll_name(o->coll), algo_label(a), bytes, rank);
        return -1;
    }
    return 0;
}

static incoll_status_t sync_ranks(incoll_comm_h comm)
{
    uint8_t x = 0, y;
    return incoll_allreduce(comm, &x, &y, 1, INCOLL_UINT8, INCOLL_OP_BOR);
}

int bench_coll_rank_main(int argc, char **argv)
{
    return bench_coll_rank_run(argc, argv, NULL);
}

int bench_coll_rank_run(int argc, char **argv, const bench_mpi_t *mpi)
{
    bc_opts_t o;
    bench_rank_t r;
    incoll_comm_h comm;
    int rank, size, algos[MAX_ALGOS], na, nsizes, ret = 0, rc;
    size_t *sizes;
    FILE *res = NULL;

    if (argc < 2 || parse(argc - 1, argv + 1, &o, &rc) != 0 ||
        o.b.out == NULL) {
        fprintf(stderr, "incoll bench _coll: the rank side needs a collective "
                        "and --out DIR\n");
        return 2;
    }
    if (has_mpi(&o) && mpi == NULL) {
        fprintf(stderr,
                "incoll bench %s: mpi and mpi-layer run in the MPI "
                "worker (" BENCH_MPI_WORKER "), not under `incoll "
                "run`\n",
                argv[1]);
        return 2;
    }
    bc_mpi = mpi;
    if (bench_rank_start(&r, mpi, "bench _coll") != 0)
        return 4;
    comm = r.world;
    rank = r.rank;
    size = r.size;
    na = algo_list(&o, size, algos);
    if (o.coll == ALGO_COLL_BARRIER) {
        sizes = calloc(1, sizeof(*sizes));
        nsizes = 1;
    } else {
        nsizes = bench_size_list(o.b.min_size, o.b.max_size, &sizes);
    }
    if (rank == 0) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/colls.txt", o.b.out);
        res = fopen(path, "w");
    }
    for (int s = 0; s < nsizes && ret == 0; s++) {
        size_t bytes = sizes[s];
        size_t cap = (size_t)size * (bytes + 8) + 64;
        uint8_t *in = malloc(cap), *out = malloc(cap);
        double sum_ns[MAX_ALGOS] = {0};
        /* incoll's bytes sent per operation (in-network engine counters,
         * headers included): [0] when this rank was the root, [1] not. */
        double tx[2] = {0, 0}, ntx[2] = {0, 0};
        /* Its cost counted (host_counters_t): datagrams this rank sent and
         * received, and its wake-ups, over the nops in-network operations. */
        double cost[4] = {0, 0, 0, 0};
        if (o.coll == ALGO_COLL_REDUCE || o.coll == ALGO_COLL_REDUCE_SCATTER)
            bytes = bytes / 8 * 8;
        for (int it = -2; it < o.b.iters && ret == 0; it++) {
            for (int k = 0; k < na && ret == 0; k++) {
                int ai = bench_run_order(na, it, k);
                int root = it < 0 ? 0 : it % size;
                host_counters_t h0, h1;
                uint64_t t0;
                if (sync_ranks(comm) != INCOLL_OK) {
                    ret = 4;
                    break;
                }
                host_counters_read(comm, &h0);
                t0 = now_ns();
                if (one_op(comm, &o, algos[ai], bytes, rank, size, root, it + 2,
                           in, out) != 0)
                    ret = 1;
                if (it >= 0)
                    sum_ns[ai] += (double)(now_ns() - t0);
                host_counters_read(comm, &h1);
                if (h1.early_returns != h0.early_returns) {
                    /* Returned early: the operation's packets are sent in
                     * the background; count them (untimed). */
                    host_req_drain(comm);
                    host_counters_read(comm, &h1);
                }
                if (it >= 0 && algos[ai] == HOST_CALGO_AUTO && h0.has_engine &&
                    h1.engine == h0.engine && host_coll_last_in_net()) {
                    tx[rank != root] +=
                        (double)(h1.eng_bytes_sent - h0.eng_bytes_sent);
                    ntx[rank != root]++;
                    cost[0] += (double)(h1.tx_packets - h0.tx_packets);
                    cost[1] += (double)(h1.rx_packets - h0.rx_packets);
                    cost[2] += (double)(h1.wakeups - h0.wakeups);
                    cost[3]++;
                }
            }
        }
        for (int k = 0; k < na && ret == 0; k++) {
            double avg = sum_ns[k] / o.b.iters / 1e3, mn, mx, tot;
            incoll_allreduce(comm, &avg, &mn, 1, INCOLL_FLOAT64, INCOLL_OP_MIN);
            incoll_allreduce(comm, &avg, &mx, 1, INCOLL_FLOAT64, INCOLL_OP_MAX);
            incoll_allreduce(comm, &avg, &tot, 1, INCOLL_FLOAT64,
                             INCOLL_OP_SUM);
            double txr[2] = {-1, -1}, pk[3] = {-1, -1, -1};
            if (algos[k] == HOST_CALGO_AUTO) {
                /* Datagrams per operation sent and received by all the
                 * hosts together, wake-ups per operation of one rank. */
                incoll_allreduce(comm, INCOLL_IN_PLACE, cost, 4, INCOLL_FLOAT64,
                                 INCOLL_OP_SUM);
                if (cost[3] > 0) {
                    pk[0] = cost[0] * size / cost[3];
                    pk[1] = cost[1] * size / cost[3];
                    pk[2] = cost[2] / cost[3];
                }
                /* At the root: the average; elsewhere: the most any
                 * rank sent (-1: none ran in the network). */
                double v[2] = {tx[0], ntx[0]},
                       other = ntx[1] > 0 ? tx[1] / ntx[1] : -1;
                incoll_allreduce(comm, INCOLL_IN_PLACE, v, 2, INCOLL_FLOAT64,
                                 INCOLL_OP_SUM);
                incoll_allreduce(comm, &other, &txr[1], 1, INCOLL_FLOAT64,
                                 INCOLL_OP_MAX);
                txr[0] = v[1] > 0 ? v[0] / v[1] : -1;
            }
            if (res)
                fprintf(res,
                        "%zu %s %d %.3f %.3f %.3f %.0f %.0f %.2f %.2f %.2f\n",
                        bytes, algo_label(algos[k]), o.b.iters, tot / size, mn,
                        mx, txr[0], txr[1], pk[0], pk[1], pk[2]);
        }
        free(in);
        free(out);
    }
    if (res)
        fclose(res);
    free(sizes);
    bench_rank_stop(&r);
    return ret;
}

/* One row of the results: a size and an algorithm's average latency. */
typedef struct {
    size_t bytes;
    char algo[32];
    double avg;
    double tx_root, tx_other; /* incoll's bytes sent per op, or -1 */
    /* incoll's datagrams per op sent and received by all hosts together,
     * its wake-ups per op and rank (host_counters_t), or -1 */
    double dg_tx, dg_rx, wakeups;
} bc_row_t;

/* --plot: one curve per algorithm (bench_report.h). */
static int plot_rows(const char *path, const char *coll, int hosts,
                     double link_MBps, const bc_row_t *rows, int n)
{
    bench_point_t *pts = calloc((size_t)n + 1, sizeof(*pts));
    char title[128], who[64];
    plot_opts_t po = {title, link_MBps, 0, NULL};
    int ret;

    if (pts == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        pts[i] = (bench_point_t){rows[i].algo, rows[i].bytes, rows[i].avg};
    snprintf(title, sizeof(title), "%s, %d hosts", coll, hosts);
    snprintf(who, sizeof(who), "bench %s", coll);
    ret = bench_plot_points(path, who, &po, pts, n);
    free(pts);
    return ret;
}

/*
 * The summary: per size, incoll beside the fastest host-based algorithm
 * of the run and, when they ran, MPI's own collective and the MPI call
 * through the layer (x: their latency over incoll's; mpi/lay: MPI's own
 * over the layer's, > 1 when the layer is faster).
 */
static void print_summary(const char *coll, const bc_row_t *rows, int n)
{
    int mpi = 0, lay = 0;
    for (int i = 0; i < n; i++) {
        mpi |= strcmp(rows[i].algo, "mpi") == 0;
        lay |= strcmp(rows[i].algo, "mpi-layer") == 0;
    }
    printf("\n# %s summary: incoll beside the best host-based algorithm%s%s"
           " (x: their latency over incoll's); tx: bytes incoll sent per "
           "operation, headers included (engine counters), at the root and "
           "the most of any other rank; dg tx/rx: datagrams per operation "
           "all hosts sent (into the leaf ANs) and received; wake: returns "
           "from blocking waits per operation and rank\n",
           coll, mpi ? ", MPI's own" : "",
           lay ? " and the MPI call through libincoll_mpi" : "");
    printf("%9s %10s %9s %9s %6s %6s %5s %10s %-12s %6s", "bytes", "incoll(us)",
           "tx root", "tx other", "dg tx", "dg rx", "wake", "host(us)",
           "best host", "x");
    if (mpi)
        printf(" %10s %6s", "mpi(us)", "x");
    if (lay)
        printf(" %10s %7s", "layer(us)", "mpi/lay");
    printf("\n");
    for (int i = 0; i < n;) {
        int j = i;
        const bc_row_t *inc = NULL, *best = NULL, *pm = NULL, *pl = NULL;
        for (; j < n && rows[j].bytes == rows[i].bytes; j++) {
            const bc_row_t *r = &rows[j];
            if (strcmp(r->algo, "incoll") == 0)
                inc = r;
            else if (strcmp(r->algo, "mpi") == 0)
                pm = r;
            else if (strcmp(r->algo, "mpi-layer") == 0)
                pl = r;
            else if (best == NULL || r->avg < best->avg)
                best = r;
        }
        i = j;
        if (inc == NULL)
            continue;
        printf("%9zu %10.1f %9.0f %9.0f %6.2f %6.2f %5.2f", inc->bytes,
               inc->avg, inc->tx_root, inc->tx_other, inc->dg_tx, inc->dg_rx,
               inc->wakeups);
        if (best)
            printf(" %10.1f %-12s %6.2f", best->avg, best->algo,
                   best->avg / inc->avg);
        else
            printf(" %10s %-12s %6s", "-", "-", "-");
        if (mpi && pm)
            printf(" %10.1f %6.2f", pm->avg, pm->avg / inc->avg);
        else if (mpi)
            printf(" %10s %6s", "-", "-");
        if (lay && pl)
            printf(" %10.1f %7.2f", pl->avg, pm ? pm->avg / pl->avg : 0.0);
        printf("\n");
    }
}

int bench_coll_main(int argc, char **argv)
{
    char who[64];
    bench_fabric_t f;
    bc_opts_t o;
    int rc, ret = 1;

    if (parse(argc, argv, &o, &rc) != 0)
        return rc;
    snprintf(who, sizeof(who), "bench %s", argv[0]);
    if (has_mpi(&o)) {
        char why[PATH_MAX + 128];
        if (bench_mpi_usable(NULL, 0, why, sizeof(why)) != 0) {
            fprintf(stderr,
                    "incoll %s: --algos mpi (the MPI library's own %s) needs "
                    "Open MPI: %s\n",
                    who, argv[0], why);
            return 1;
        }
    }
    if (bench_fabric_start(&f, &o.b, who) != 0)
        return bench_interrupted() ? 130 : 1;
    {
        char sz[64], lo[24], hi[24], iters[16];
        char *args[20];
        int n = 0;
        snprintf(sz, sizeof(sz), "%s:%s",
                 bench_size_str(o.b.min_size, lo, sizeof(lo)),
                 bench_size_str(o.b.max_size, hi, sizeof(hi)));
        snprintf(iters, sizeof(iters), "%d", o.b.iters);
        args[n++] = "_coll";
        args[n++] = argv[0];
        if (o.coll != ALGO_COLL_BARRIER) {
            args[n++] = "--sizes";
            args[n++] = sz;
        }
        args[n++] = "--iters";
        args[n++] = iters;
        if (o.algos) {
            args[n++] = "--algos";
            args[n++] = (char *)o.algos;
        }
        args[n++] = "--out";
        args[n++] = f.work;
        args[n] = NULL;
        rc = has_mpi(&o) ? bench_launch_mpi(&f, args, NULL, o.b.timeout_s)
                         : bench_launch(&f, args, NULL, o.b.timeout_s);
        if (bench_interrupted()) {
            ret = 130;
            goto out;
        }
        if (rc != 0) {
            fprintf(stderr, "incoll %s: the run failed (incoll %s exited %d)\n",
                    who, has_mpi(&o) ? "mpirun" : "run", rc);
            goto out;
        }
    }
    {
        char path[PATH_MAX + 32], line[256], algo[32];
        FILE *in, *csv = NULL;
        static bc_row_t rows[512];
        int nrows = 0;
        snprintf(path, sizeof(path), "%s/colls.txt", f.work);
        in = fopen(path, "r");
        if (in == NULL) {
            fprintf(stderr, "incoll %s: no results in %s\n", who, path);
            goto out;
        }
        if (o.b.csv) {
            csv = bench_csv_open(o.b.csv, who,
                                 "coll,algo,bytes,iters,avg_us,min_us,max_us,"
                                 "bw_MBps,hosts,emulated");
            if (csv == NULL) {
                fclose(in);
                goto out;
            }
        }
        printf("# incoll bench %s: %d hosts, %s; bytes per rank; latency "
               "avg/min/max over ranks (OSU); MB/s = bytes / avg\n",
               argv[0], f.hosts,
               f.emulated ? "emulated links" : "loopback fabric");
        printf("%-14s ", "algorithm");
        bench_osu_head(stdout);
        printf("\n");
        while (fgets(line, sizeof(line), in)) {
            size_t bytes;
            int iters;
            double avg, mn, mx, bw, txr = -1, txo = -1, dtx = -1, drx = -1,
                                    wk = -1;
            if (sscanf(line, "%zu %31s %d %lf %lf %lf %lf %lf %lf %lf %lf",
                       &bytes, algo, &iters, &avg, &mn, &mx, &txr, &txo, &dtx,
                       &drx, &wk) < 6)
                continue;
            bw = avg > 0 ? (double)bytes / avg : 0;
            printf("%-14s ", algo);
            bench_osu_row(stdout, bytes, iters, avg, mn, mx);
            printf("\n");
            if (nrows < 512) {
                rows[nrows].bytes = bytes;
                snprintf(rows[nrows].algo, sizeof(rows[nrows].algo), "%s",
                         algo);
                rows[nrows].tx_root = txr;
                rows[nrows].tx_other = txo;
                rows[nrows].dg_tx = dtx;
                rows[nrows].dg_rx = drx;
                rows[nrows].wakeups = wk;
                rows[nrows++].avg = avg;
            }
            if (csv)
                fprintf(csv, "%s,%s,%zu,%d,%.3f,%.3f,%.3f,%.4f,%d,%d\n",
                        argv[0], algo, bytes, iters, avg, mn, mx, bw, f.hosts,
                        f.emulated);
        }
        fclose(in);
        if (csv && bench_csv_close(csv, o.b.csv, who) != 0)
            goto out;
        print_summary(argv[0], rows, nrows);
        if (o.b.plot && plot_rows(o.b.plot, argv[0], f.hosts,
                                  f.emulated ? (double)f.link_rate / 8e6 : 0,
                                  rows, nrows) != 0)
            goto out;
    }
    ret = 0;
out:
    bench_fabric_close(&f);
    return ret;
}
