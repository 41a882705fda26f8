/*
 * `incoll bench allreduce --ppn K`: allreduce with K ranks on each host,
 * the in-network allreduce in its node, socket and flat modes beside the
 * host-based algorithms (hierarchical: shared memory, then the leaders'
 * recursive doubling, ring or Rabenseifner; or flat) and, with `mpi` in
 * --algos, the MPI library's own MPI_Allreduce, all in one run on the
 * same fabric, alternating.
 *
 * The driver gets a fabric of -n hosts (bench_fabric_open: --fabric,
 * --emulate or loopback) and starts hosts*K ranks with `incoll run -n P
 * --ppn K` running the hidden `incoll bench _hier`, or, with mpi, with
 * `incoll mpirun -n P --ppn K` running the MPI worker. Each rank makes one
 * communicator per mode (host_hier_set_mode) and, for every size and
 * iteration, runs every algorithm once in an order drawn for the
 * iteration (bench_run_order), each after a barrier (not timed); it checks
 * every result (float32 small integers: exact). Latency is averaged per rank,
 * then avg/min/max over ranks; bandwidth = bytes / avg latency; tx/host is what
 * the ranks' UDP sockets sent per operation, summed and divided by the hosts
 * (MPI's own traffic is not counted). Rank 0 prints the table and writes the
 * CSV and the plot.
 *
 * --sockets N makes every host look like N sockets to hwloc
 * (HWLOC_SYNTHETIC) and binds local rank i to CPU i modulo the CPUs, so
 * the socket mode has N leaders per host even on a one-socket machine.
 */
#include "bench_hier.h"

#include "bench_rank.h"
#include "bench_report.h"

#include "common/clock.h"
#include "core/algo.h"
#include "host/counters.h"
#include "host/hier.h"
#include "incoll.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Algorithm ids: the in-network allreduce in its three modes (inc-node,
 * inc-socket, inc-flat), the core's host-based algorithms (core/algo.h)
 * over the hierarchy (rd, ring, rabenseifner: shared memory, then the
 * leaders) and flat (NAME-flat), then the MPI library's own.
 */
#define NHOST (ALGO_COUNT - 1) /* host-based algorithms of the core */
enum { A_INC_NODE, A_INC_SOCKET, A_INC_FLAT, A_HOST };
#define A_HOST_FLAT (A_HOST + NHOST)
#define A_MPI (A_HOST + 2 * NHOST)
#define A_COUNT (A_MPI + 1)

static const char *hb_algo_name(const bench_cmd_t *cmd, int id)
{
    static char names[A_COUNT][40];
    static const char *const modes[] = {"node", "socket", "flat"};
    (void)cmd;
    if (id < 0 || id >= A_COUNT)
        return NULL;
    if (names[id][0] == '\0') {
        if (id < A_HOST)
            snprintf(names[id], sizeof(names[id]), "%s-%s", algo_name(ALGO_INC),
                     modes[id]);
        else if (id < A_HOST_FLAT)
            snprintf(names[id], sizeof(names[id]), "%s",
                     algo_name((algo_kind_t)(id - A_HOST + 1)));
        else if (id < A_MPI)
            snprintf(names[id], sizeof(names[id]), "%s-flat",
                     algo_name((algo_kind_t)(id - A_HOST_FLAT + 1)));
        else
            snprintf(names[id], sizeof(names[id]), "%s", BENCH_NAME_MPI);
    }
    return names[id];
}

/* Default: every algorithm but the flat host-based ones and mpi. */
static void hb_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    static char def[256];
    if (def[0] == '\0')
        for (int a = 0; a < A_HOST_FLAT; a++)
            snprintf(def + strlen(def), sizeof(def) - strlen(def), "%s%s",
                     a ? "," : "", hb_algo_name(cmd, a));
    o->hosts = 4;
    o->ppn = 4;
    o->max_size = 4u << 20;
    o->algos_text = def;
}

static const bench_optdoc_t hb_docs[] = {
    {BENCH_OPT_HOSTS, "hosts"},
    {BENCH_OPT_ALGOS, "inc-MODE: in the network, one leader per host "
                      "(node; shared memory below), per CPU socket, or "
                      "every rank a child of its AN (flat); rd, ring, "
                      "rabenseifner: host-based, shared memory then the "
                      "leaders; NAME-flat: host-based over all ranks; mpi: "
                      "the MPI library's own MPI_Allreduce (ranks under "
                      "mpirun)"},
    {BENCH_OPT_ITERS, "timed iterations per size (default: 4 MiB / size, "
                      "at least 5, at most 40)"},
    {BENCH_OPT_WARMUP, "untimed iterations before each size's timed ones "
                       "(default: a tenth of them, at least 2)"},
    {0, NULL},
};

static const bench_cmd_t hb_cmd = {
    .who = "bench allreduce",
    .synopsis = "bench allreduce --ppn K [-n HOSTS] [--fabric DIR | "
                "--emulate [--link-rate R]] [--radix R] [--sizes MIN:MAX] "
                "[--algos LIST] [--iters N] [--warmup N] [--sockets N] "
                "[--csv FILE] "
                "[--plot FILE.png] [--keep] [--timeout SEC]",
    .about = "Allreduce (float32 sum) with K ranks on each of HOSTS hosts, "
             "every algorithm side by side, every result checked.",
    .accepts = BENCH_OPTS_FABRIC | BENCH_OPT(PPN) | BENCH_OPT(LINK_RATE) |
               BENCH_OPT(SIZES) | BENCH_OPT(ALGOS) | BENCH_OPT(ITERS) |
               BENCH_OPT(WARMUP) | BENCH_OPT(SOCKETS) | BENCH_OPT(CSV) |
               BENCH_OPT(PLOT),
    .defaults = hb_defaults,
    .algo_name = hb_algo_name,
    .docs = hb_docs,
};

static int has_algo(const bench_opts_t *o, int a)
{
    return bench_algos_find(&o->algos, a) >= 0;
}

/* Parses argv; 0, or the exit code in *exit_p and non-zero. The sizes
 * are whole float32 elements. */
static int parse_opts(int argc, char **argv, bench_opts_t *o, int *exit_p)
{
    if (bench_opts_get(&hb_cmd, argc, argv, o, exit_p) != 0)
        return 1;
    if (o->min_size < 4) {
        fprintf(stderr,
                "incoll %s: --sizes: at least 4 bytes (one float) "
                "with --ppn\n",
                hb_cmd.who);
        *exit_p = 2;
        return 1;
    }
    return 0;
}

int bench_hier_main(int argc, char **argv)
{
    bench_opts_t o;
    bench_fabric_t f;
    char ppn[16], sizes[64], iters[16], warm[16], rate[32], socks[16],
        hosts[16], why[PATH_MAX + 128];
    char *av[32];
    int a = 0, rc, mpi;

    if (parse_opts(argc, argv, &o, &rc) != 0)
        return rc;
    mpi = has_algo(&o, A_MPI);
    if (mpi && bench_mpi_usable(NULL, 0, why, sizeof(why)) != 0) {
        fprintf(stderr, "incoll %s: --algos mpi needs Open MPI: %s\n",
                hb_cmd.who, why);
        return 1;
    }
    if (bench_fabric_start(&f, &o, hb_cmd.who) != 0)
        return bench_interrupted() ? 130 : 1;
    f.ppn = o.ppn;
    snprintf(ppn, sizeof(ppn), "%d", o.ppn);
    snprintf(hosts, sizeof(hosts), "%d", f.hosts);
    bench_sizes_str(o.min_size, o.max_size, sizes, sizeof(sizes));
    snprintf(iters, sizeof(iters), "%d", o.iters);
    snprintf(rate, sizeof(rate), "%" PRIu64 "bit", f.link_rate);
    snprintf(socks, sizeof(socks), "%d", o.sockets);
    av[a++] = "_hier";
    av[a++] = "--sizes";
    av[a++] = sizes;
    av[a++] = "--algos";
    av[a++] = (char *)o.algos_text;
    if (o.iters > 0) {
        av[a++] = "--iters";
        av[a++] = iters;
    }
    if (o.warmup >= 0) {
        snprintf(warm, sizeof(warm), "%d", o.warmup);
        av[a++] = "--warmup";
        av[a++] = warm;
    }
    av[a++] = "--ppn";
    av[a++] = ppn;
    av[a++] = "--hosts";
    av[a++] = hosts;
    if (f.link_rate) {
        /* Only for the plot's limit line (the ranks bring nothing up). */
        av[a++] = "--emulate";
        av[a++] = "--link-rate";
        av[a++] = rate;
    }
    av[a++] = "--sockets";
    av[a++] = socks;
    if (o.csv) {
        av[a++] = "--csv";
        av[a++] = (char *)o.csv;
    }
    if (o.plot) {
        av[a++] = "--plot";
        av[a++] = (char *)o.plot;
    }
    av[a] = NULL;
    fprintf(stderr,
            "incoll %s: %d hosts x %d ranks (%s fabric), sizes %s, "
            "algorithms %s\n",
            hb_cmd.who, f.hosts, o.ppn, f.emulated ? "emulated" : "loopback",
            sizes, o.algos_text);
    /* Rank 0 prints the table and writes the CSV and the plot. */
    rc = mpi ? bench_launch_mpi(&f, av, NULL, o.timeout_s)
             : bench_launch(&f, av, NULL, o.timeout_s);
    if (rc != 0 && !bench_interrupted())
        fprintf(stderr,
                "incoll %s: the run failed (incoll %s exited %d): no "
                "results\n",
                hb_cmd.who, mpi ? "mpirun" : "run", rc);
    bench_fabric_close(&f);
    return bench_interrupted() ? 130 : rc == 0 ? 0 : 1;
}

/* ---- the rank side ---- */

typedef struct {
    double sum_us, tx, wake;
    double avg, min, max, txavg, wakeavg;
    int failed; /* the algorithm failed at this size (or before) */
} hb_cell_t;

/* The communicator mode of algorithm a: 0 node, 1 socket, 2 flat, 3 MPI. */
static int mode_of(int a, const char **mode_p)
{
    if (a == A_INC_NODE || (a >= A_HOST && a < A_HOST_FLAT)) {
        *mode_p = "node";
        return 0;
    }
    if (a == A_INC_SOCKET) {
        *mode_p = "socket";
        return 1;
    }
    if (a == A_MPI) {
        *mode_p = "mpi";
        return 3;
    }
    *mode_p = "flat";
    return 2;
}

/* libincoll's algorithm of a (incoll_algo_t is the core's kind + 1). */
static incoll_algo_t algo_of(int a)
{
    if (a >= A_HOST && a < A_HOST_FLAT)
        return (incoll_algo_t)(a - A_HOST + 2);
    if (a >= A_HOST_FLAT && a < A_MPI)
        return (incoll_algo_t)(a - A_HOST_FLAT + 2);
    return INCOLL_ALGO_INC;
}

static int write_outputs(const bench_opts_t *o, const size_t *sizes, int nsizes,
                         hb_cell_t *cells, const char *csv, const char *plot,
                         uint64_t link_bps)
{
    const char *who = hb_cmd.who;
    int ret = 0;
    if (csv) {
        FILE *fp = bench_csv_open(csv, who,
                                  "bytes,algo,avg_us,min_us,max_us,MBps,"
                                  "tx_per_host,hosts,ppn");
        if (fp == NULL)
            return -1;
        for (int s = 0; s < nsizes; s++)
            for (int i = 0; i < o->algos.n; i++) {
                hb_cell_t *c = &cells[s * o->algos.n + i];
                if (c->failed)
                    continue;
                fprintf(fp, "%zu,%s,%.2f,%.2f,%.2f,%.2f,%.0f,%d,%d\n", sizes[s],
                        hb_algo_name(NULL, o->algos.id[i]), c->avg, c->min,
                        c->max, (double)sizes[s] / c->avg, c->txavg, o->hosts,
                        o->ppn);
            }
        if (bench_csv_close(fp, csv, who) != 0)
            ret = -1;
    }
    if (plot) {
        bench_point_t *pts =
            calloc((size_t)o->algos.n * (size_t)nsizes + 1, sizeof(*pts));
        char title[128];
        plot_opts_t po = {title, (double)link_bps / 8e6, 0, NULL};
        int n = 0;
        if (pts == NULL)
            return -1;
        for (int i = 0; i < o->algos.n; i++)
            for (int s = 0; s < nsizes; s++)
                if (!cells[s * o->algos.n + i].failed)
                    pts[n++] = (bench_point_t){
                        hb_algo_name(NULL, o->algos.id[i]), sizes[s],
                        cells[s * o->algos.n + i].avg};
        snprintf(title, sizeof(title), "allreduce, %d hosts x %d ranks",
                 o->hosts, o->ppn);
        if (bench_plot_points(plot, who, &po, pts, n) != 0)
            ret = -1;
        free(pts);
    }
    return ret;
}

/* What the measuring ranks share while bench_hier_rank_run runs. */
typedef struct {
    const bench_opts_t *o;
    const bench_mpi_t *mpi;
    incoll_comm_h world;
    incoll_comm_h comms[4]; /* one per mode (mode_of), made up front */
    int rank, size;
    float *send, *recv;
    size_t *sizes;
    int nsizes;
    hb_cell_t *cells; /* nsizes x algos.n */
    uint32_t dead;    /* algorithms that failed: skipped from then on */
    int bad;          /* a wrong result was seen */
} hb_run_t;

/*
 * N sockets per host to hwloc; local rank i of host h on CPU (i + h) mod
 * CPUs: the emulated hosts share this machine's CPUs, and without the
 * host's offset every host's leader (local rank 0) would sit on CPU 0
 * with the others' leaders, where real hosts each have CPUs of their
 * own. Returns the synthetic topology given to hwloc.
 */
static const char *emulate_sockets(const bench_opts_t *o, int rank)
{
    static char topo[64];
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;

    if (ncpu < 1)
        ncpu = 1;
    snprintf(topo, sizeof(topo), "package:%d core:%ld pu:1", o->sockets,
             ncpu / o->sockets > 0 ? ncpu / o->sockets : 1);
    setenv("HWLOC_SYNTHETIC", topo, 1);
    CPU_ZERO(&set);
    CPU_SET((int)((rank % o->ppn + rank / o->ppn) % ncpu), &set);
    sched_setaffinity(0, sizeof(set), &set);
    return topo;
}

/* One communicator per mode the algorithms use, all made before any is
 * used. Returns 0 or -1 (said why). */
static int make_comms(hb_run_t *h)
{
    for (int i = 0; i < h->o->algos.n; i++) {
        const char *mode;
        int m = mode_of(h->o->algos.id[i], &mode);
        incoll_status_t status;
        if (m == 3 || h->comms[m])
            continue;
        status = incoll_comm_split(h->world, 0, h->rank, &h->comms[m]);
        if (status == INCOLL_OK)
            status = host_hier_set_mode(h->comms[m], mode);
        if (status != INCOLL_OK) {
            fprintf(stderr,
                    "incoll bench _hier: rank %d: %s communicator: %s\n",
                    h->rank, mode, incoll_status_string(status));
            return -1;
        }
    }
    return 0;
}

/* Checks the result of size s: sets h->bad at the first wrong element. */
static void check_result(hb_run_t *h, int s, int a, size_t count)
{
    double base = 0;

    for (int q = 0; q < h->size; q++)
        base += (double)(q % 13);
    for (size_t e = 0; e < count; e++) {
        double want = base + (double)h->size * (double)(e % 5);
        if ((double)h->recv[e] != want) {
            fprintf(stderr,
                    "incoll bench _hier: rank %d: %s of %zu "
                    "bytes: element %zu is %g, want %g\n",
                    h->rank, hb_algo_name(NULL, a), h->sizes[s], e,
                    (double)h->recv[e], want);
            h->bad = 1;
            break;
        }
    }
}

/* One operation of algorithm i at size s (it < 0: warm-up), timed and
 * checked. */
static void run_one(hb_run_t *h, int s, int it, int i)
{
    int a = h->o->algos.id[i];
    const char *mode;
    int m = mode_of(a, &mode);
    size_t count = h->sizes[s] / 4;
    uint64_t t0, t1, tx0, tx1, wk0, wk1;
    host_counters_t hc;
    incoll_status_t status;
    hb_cell_t *c = &h->cells[s * h->o->algos.n + i];

    if (h->dead & (1u << i))
        return;
    incoll_barrier(h->world);
    host_counters_read(h->world, &hc);
    tx0 = hc.tx_bytes;
    wk0 = hc.wakeups;
    t0 = now_ns();
    if (m == 3) {
        status = h->mpi->allreduce(h->send, h->recv, count) == 0
                     ? INCOLL_OK
                     : INCOLL_ERR_IO;
    } else {
        status =
            incoll_allreduce_algo(h->comms[m], algo_of(a), h->send, h->recv,
                                  count, INCOLL_FLOAT32, INCOLL_OP_SUM);
    }
    t1 = now_ns();
    host_counters_read(h->world, &hc);
    tx1 = hc.tx_bytes;
    wk1 = hc.wakeups;
    if (status != INCOLL_OK) {
        /* A failed communicator fails on every member (its recovery is
         * collective): drop the algorithm from here on and go on with
         * the others. */
        fprintf(stderr,
                "incoll bench _hier: rank %d: %s of %zu bytes: "
                "%s; dropping it\n",
                h->rank, hb_algo_name(NULL, a), h->sizes[s],
                incoll_status_string(status));
        h->dead |= 1u << i;
        return;
    }
    check_result(h, s, a, count);
    if (it >= 0) {
        c->sum_us += (double)(t1 - t0) / 1e3;
        c->tx += (double)(tx1 - tx0);
        c->wake += (double)(wk1 - wk0);
    }
}

/* Every algorithm at size s, alternating, then this rank's means; the
 * algorithms that failed anywhere are marked failed everywhere. */
static void run_size(hb_run_t *h, int s)
{
    const bench_opts_t *o = h->o;
    int iters = bench_iters_for(o, h->sizes[s], 4u << 20, 5, 40);
    /* Warm-up: --warmup, else a tenth of the timed operations, as the
     * allreduce benchmark, and at least two (MPI's own sets up its
     * connections on first use). */
    int warm = bench_warmup_for(o, iters);
    int32_t d;

    if (o->warmup < 0 && warm < 2)
        warm = 2;
    for (int it = -warm; it < iters && !h->bad; it++)
        for (int j = 0; j < o->algos.n && !h->bad; j++)
            run_one(h, s, it, bench_run_order(o->algos.n, it, j));
    d = (int32_t)h->dead;
    incoll_allreduce(h->world, INCOLL_IN_PLACE, &d, 1, INCOLL_INT32,
                     INCOLL_OP_BOR);
    h->dead = (uint32_t)d;
    for (int i = 0; i < o->algos.n; i++) {
        hb_cell_t *c = &h->cells[s * o->algos.n + i];
        c->sum_us /= iters;
        c->tx /= iters;
        c->wake /= iters;
        c->failed = (h->dead >> i) & 1;
    }
}

/* Every cell's average, minimum and maximum over the ranks, and the
 * bytes per host and wake-ups per rank. */
static void reduce_cells(hb_run_t *h)
{
    size_t n = (size_t)h->nsizes * (size_t)h->o->algos.n;
    double *v = calloc(n * 5, sizeof(double));
    hb_cell_t *cells = h->cells;

    for (size_t c = 0; c < n; c++) {
        v[c] = v[n + c] = v[2 * n + c] = cells[c].sum_us;
        v[3 * n + c] = cells[c].tx;
        v[4 * n + c] = cells[c].wake;
    }
    incoll_allreduce(h->world, INCOLL_IN_PLACE, v, n, INCOLL_FLOAT64,
                     INCOLL_OP_SUM);
    incoll_allreduce(h->world, INCOLL_IN_PLACE, v + n, n, INCOLL_FLOAT64,
                     INCOLL_OP_MIN);
    incoll_allreduce(h->world, INCOLL_IN_PLACE, v + 2 * n, n, INCOLL_FLOAT64,
                     INCOLL_OP_MAX);
    incoll_allreduce(h->world, INCOLL_IN_PLACE, v + 3 * n, 2 * n,
                     INCOLL_FLOAT64, INCOLL_OP_SUM);
    for (size_t c = 0; c < n; c++) {
        cells[c].avg = v[c] / h->size;
        cells[c].min = v[n + c];
        cells[c].max = v[2 * n + c];
        cells[c].txavg = v[3 * n + c] / h->o->hosts;
        cells[c].wakeavg = v[4 * n + c] / h->size;
    }
    free(v);
}

/* Rank 0's table on stdout (synth: the sockets were emulated). */
static void print_table(const hb_run_t *h, const char *synth)
{
    const bench_opts_t *o = h->o;

    printf("# allreduce float32 sum, %d hosts x %d ranks per host%s\n",
           o->hosts, o->ppn, synth ? " (hwloc: sockets emulated)" : "");
    printf("# tx/host: bytes the ranks' UDP sockets sent per operation "
           "per host (not counted for mpi); wake/rank: a rank's "
           "returns from blocking waits per operation (ppoll, "
           "futex, lock; libincoll's only)\n");
    printf("%-18s ", "algo");
    bench_osu_head(stdout);
    printf(" %12s %9s\n", "tx/host", "wake/rank");
    for (int s = 0; s < h->nsizes; s++)
        for (int i = 0; i < o->algos.n; i++) {
            const hb_cell_t *c = &h->cells[s * o->algos.n + i];
            int iters = bench_iters_for(o, h->sizes[s], 4u << 20, 5, 40);
            printf("%-18s ", hb_algo_name(NULL, o->algos.id[i]));
            if (c->failed)
                printf("%9zu %6d %10s\n", h->sizes[s], iters, "failed");
            else {
                bench_osu_row(stdout, h->sizes[s], iters, c->avg, c->min,
                              c->max);
                printf(" %12.0f %9.2f\n", c->txavg, c->wakeavg);
            }
        }
    fflush(stdout);
}

int bench_hier_rank_run(int argc, char **argv, const bench_mpi_t *mpi)
{
    bench_opts_t o;
    bench_rank_t r;
    hb_run_t h = {0};
    const char *synth = NULL;
    int ret = 1;

    if (parse_opts(argc, argv, &o, &ret) != 0)
        return 2;
    ret = 1;
    if (has_algo(&o, A_MPI) && mpi == NULL) {
        fprintf(stderr, "incoll bench _hier: mpi runs in the MPI worker\n");
        return 2;
    }
    if (bench_rank_start(&r, mpi, "bench _hier") != 0)
        return 1;
    h.o = &o;
    h.mpi = mpi;
    h.world = r.world;
    h.rank = r.rank;
    h.size = r.size;
    if (o.sockets > 0)
        synth = emulate_sockets(&o, h.rank);
    if (make_comms(&h) != 0)
        goto out;
    h.nsizes = bench_size_list(o.min_size, o.max_size, &h.sizes);
    h.cells = calloc((size_t)h.nsizes * (size_t)o.algos.n, sizeof(*h.cells));
    h.send = malloc(o.max_size + 16);
    h.recv = malloc(o.max_size + 16);
    if (h.nsizes <= 0 || h.cells == NULL || h.send == NULL || h.recv == NULL)
        goto out;
    for (size_t i = 0; i < o.max_size / 4 + 1; i++)
        h.send[i] = (float)((h.rank % 13) + (int)(i % 5));
    for (int s = 0; s < h.nsizes && !h.bad; s++)
        run_size(&h, s);
    /* Everyone agrees whether all went well, then the statistics. */
    {
        int32_t b = h.bad;
        incoll_allreduce(h.world, INCOLL_IN_PLACE, &b, 1, INCOLL_INT32,
                         INCOLL_OP_MAX);
        h.bad = b;
    }
    if (!h.bad) {
        reduce_cells(&h);
        if (h.rank == 0) {
            print_table(&h, synth);
            if (write_outputs(&o, h.sizes, h.nsizes, h.cells, o.csv, o.plot,
                              o.link_rate) != 0)
                h.bad = 1;
        }
    }
    ret = h.bad ? 1 : 0;
out:
    free(h.cells);
    free(h.send);
    free(h.recv);
    free(h.sizes);
    for (int m = 0; m < 4; m++)
        if (h.comms[m])
            incoll_comm_destroy(h.comms[m]);
    bench_rank_stop(&r);
    return ret;
}

int bench_hier_rank_main(int argc, char **argv)
{
    return bench_hier_rank_run(argc, argv, NULL);
}
