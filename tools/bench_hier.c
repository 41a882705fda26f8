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
 * iteration, runs every algorithm once in an order rotated by the
 * iteration, each after a barrier (not timed); it checks every result
 * (float32 small integers: exact). Latency is averaged per rank, then
 * avg/min/max over ranks; bandwidth = bytes / avg latency; tx/host is
 * what the ranks' UDP sockets sent per operation, summed and divided by
 * the hosts (MPI's own traffic is not counted). Rank 0 prints the table
 * and writes the CSV and the plot.
 *
 * --sockets N makes every host look like N sockets to hwloc
 * (HWLOC_SYNTHETIC) and binds local rank i to CPU i modulo the CPUs, so
 * the socket mode has N leaders per host even on a one-socket machine.
 */
#include "bench_hier.h"

#include "bench_plot.h"
#include "cli.h"
#include "fabric/emu.h"

#include "common/udp.h"
#include "host/hier.h"
#include "host/host.h"
#include "incoll.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    A_INC_NODE,
    A_INC_SOCKET,
    A_INC_FLAT,
    A_RD,
    A_RING,
    A_RAB,
    A_RD_FLAT,
    A_RING_FLAT,
    A_RAB_FLAT,
    A_MPI,
    A_COUNT
};

static const char *const algo_names[A_COUNT] = {
    "inc-node", "inc-socket", "inc-flat",          "rd", "ring", "rabenseifner",
    "rd-flat",  "ring-flat",  "rabenseifner-flat", "mpi"};

#define DEFAULT_ALGOS "inc-node,inc-socket,inc-flat,rd,ring,rabenseifner"

typedef struct {
    int hosts, ppn, radix, emulate, keep, timeout_s, iters, sockets;
    uint64_t link_rate;
    const char *fabric, *csv, *plot, *algos_text;
    size_t min_size, max_size;
    int algos[A_COUNT], nalgos;
} hb_opts_t;

static int parse_algos(const char *text, int *algos, int *n_p)
{
    char buf[512], *save = NULL;
    int n = 0;

    snprintf(buf, sizeof(buf), "%s", text);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int a;
        for (a = 0; a < A_COUNT && strcmp(t, algo_names[a]) != 0; a++)
            ;
        if (a == A_COUNT || n == A_COUNT) {
            fprintf(stderr,
                    "incoll bench allreduce: unknown algorithm '%s' with "
                    "--ppn (inc-node, inc-socket, inc-flat, rd, ring, "
                    "rabenseifner, rd-flat, ring-flat, rabenseifner-flat, "
                    "mpi)\n",
                    t);
            return -1;
        }
        algos[n++] = a;
    }
    *n_p = n;
    return n > 0 ? 0 : -1;
}

static int has_algo(const hb_opts_t *o, int a)
{
    for (int i = 0; i < o->nalgos; i++)
        if (o->algos[i] == a)
            return 1;
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: incoll bench allreduce --ppn K [-n HOSTS] [--fabric DIR | "
            "--emulate [--link-rate R]]\n"
            "                              [--radix R] [--sizes MIN:MAX] "
            "[--algos LIST] [--iters N]\n"
            "                              [--sockets N] [--csv FILE] "
            "[--plot FILE.png] [--keep] [--timeout SEC]\n"
            "\n"
            "Allreduce (float32 sum) with K ranks on each of HOSTS hosts "
            "(default 4 x 4),\n"
            "every algorithm side by side, every result checked. LIST "
            "(default\n" DEFAULT_ALGOS "):\n"
            "  inc-node      in the network, one leader per host (shared "
            "memory below)\n"
            "  inc-socket    in the network, one leader per CPU socket\n"
            "  inc-flat      in the network, every rank a child of its AN\n"
            "  rd, ring, rabenseifner   host-based: shared memory, then the "
            "leaders\n"
            "  rd-flat, ring-flat, rabenseifner-flat   host-based over all "
            "ranks\n"
            "  mpi           the MPI library's own MPI_Allreduce (ranks "
            "under mpirun)\n"
            "--sockets N: hwloc shows each host as N sockets and the ranks "
            "are bound\n"
            "round-robin to the CPUs (socket mode on a one-socket "
            "machine).\n");
}

static int parse_opts(int argc, char **argv, hb_opts_t *o)
{
    enum {
        O_PPN = 256,
        O_FABRIC,
        O_EMULATE,
        O_RATE,
        O_RADIX,
        O_SIZES,
        O_ALGOS,
        O_ITERS,
        O_CSV,
        O_PLOT,
        O_KEEP,
        O_TIMEOUT,
        O_SOCKETS
    };
    static const struct option lo[] = {
        {"hosts", required_argument, NULL, 'n'},
        {"ppn", required_argument, NULL, O_PPN},
        {"fabric", required_argument, NULL, O_FABRIC},
        {"emulate", no_argument, NULL, O_EMULATE},
        {"link-rate", required_argument, NULL, O_RATE},
        {"radix", required_argument, NULL, O_RADIX},
        {"sizes", required_argument, NULL, O_SIZES},
        {"algos", required_argument, NULL, O_ALGOS},
        {"iters", required_argument, NULL, O_ITERS},
        {"sockets", required_argument, NULL, O_SOCKETS},
        {"csv", required_argument, NULL, O_CSV},
        {"plot", required_argument, NULL, O_PLOT},
        {"keep", no_argument, NULL, O_KEEP},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int opt;

    memset(o, 0, sizeof(*o));
    o->hosts = 4;
    o->ppn = 4;
    o->radix = 4;
    o->timeout_s = 1800;
    o->min_size = 8;
    o->max_size = 4u << 20;
    o->algos_text = DEFAULT_ALGOS;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "n:h", lo, NULL)) != -1) {
        switch (opt) {
        case 'n':
            o->hosts = atoi(optarg);
            break;
        case O_PPN:
            o->ppn = atoi(optarg);
            break;
        case O_FABRIC:
            o->fabric = optarg;
            break;
        case O_EMULATE:
            o->emulate = 1;
            break;
        case O_RATE:
            if (emu_parse_rate(optarg, &o->link_rate) != 0)
                return -1;
            break;
        case O_RADIX:
            o->radix = atoi(optarg);
            break;
        case O_SIZES:
            if (bench_sizes_parse(optarg, &o->min_size, &o->max_size) != 0) {
                fprintf(stderr, "incoll bench allreduce: bad --sizes '%s'\n",
                        optarg);
                return -1;
            }
            break;
        case O_ALGOS:
            o->algos_text = optarg;
            break;
        case O_ITERS:
            o->iters = atoi(optarg);
            break;
        case O_SOCKETS:
            o->sockets = atoi(optarg);
            break;
        case O_CSV:
            o->csv = optarg;
            break;
        case O_PLOT:
            o->plot = optarg;
            break;
        case O_KEEP:
            o->keep = 1;
            break;
        case O_TIMEOUT:
            o->timeout_s = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return -1;
        }
    }
    if (parse_algos(o->algos_text, o->algos, &o->nalgos) != 0)
        return -1;
    if (o->hosts < 1 || o->ppn < 1 || o->radix < 2 || o->timeout_s < 1 ||
        o->sockets < 0 || o->min_size < 4) {
        fprintf(stderr, "incoll bench allreduce: need -n >= 1, --ppn >= 1, "
                        "--radix >= 2, sizes >= 4 bytes\n");
        return -1;
    }
    return 0;
}

/* Runs argv (argv[0] a path) and waits; its exit status. */
static int run_wait(char **argv)
{
    int st;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execv(argv[0], argv);
        fprintf(stderr, "incoll bench allreduce: cannot run %s: %s\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int bench_hier_main(int argc, char **argv)
{
    hb_opts_t o;
    bench_fabric_opts_t fo;
    bench_fabric_t f;
    char np[16], ppn[16], tmo[16], sizes[64], lo[24], hi[24], iters[16],
        rate[32], socks[16], hosts[16], worker[PATH_MAX], why[PATH_MAX + 128];
    char *av[48];
    int a = 0, rc, mpi;

    rc = parse_opts(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    mpi = has_algo(&o, A_MPI);
    if (mpi &&
        bench_mpi_usable(worker, sizeof(worker), why, sizeof(why)) != 0) {
        fprintf(stderr,
                "incoll bench allreduce: --algos mpi needs Open MPI: %s\n",
                why);
        return 1;
    }
    memset(&fo, 0, sizeof(fo));
    fo.fabric_dir = o.fabric;
    fo.emulate = o.emulate;
    fo.hosts = o.hosts;
    fo.radix = o.radix;
    fo.link_rate = o.link_rate;
    fo.keep = o.keep;
    fo.who = "bench allreduce";
    if (bench_fabric_open(&f, &fo) != 0)
        return bench_interrupted() ? 130 : 1;
    snprintf(np, sizeof(np), "%d", o.hosts * o.ppn);
    snprintf(ppn, sizeof(ppn), "%d", o.ppn);
    snprintf(tmo, sizeof(tmo), "%d", o.timeout_s);
    snprintf(sizes, sizeof(sizes), "%s:%s",
             bench_size_str(o.min_size, lo, sizeof(lo)),
             bench_size_str(o.max_size, hi, sizeof(hi)));
    snprintf(iters, sizeof(iters), "%d", o.iters);
    snprintf(rate, sizeof(rate), "%" PRIu64, f.link_rate);
    snprintf(socks, sizeof(socks), "%d", o.sockets);
    av[a++] = f.self;
    if (mpi) {
        av[a++] = "mpirun";
        av[a++] = "--no-preload";
    } else {
        av[a++] = "run";
    }
    av[a++] = "-n";
    av[a++] = np;
    av[a++] = "--ppn";
    av[a++] = ppn;
    av[a++] = "--fabric";
    av[a++] = f.dir;
    av[a++] = "--timeout";
    av[a++] = tmo;
    av[a++] = "--";
    if (mpi) {
        av[a++] = worker;
    } else {
        av[a++] = f.self;
        av[a++] = "bench";
    }
    av[a++] = "_hier";
    av[a++] = "--sizes";
    av[a++] = sizes;
    av[a++] = "--algos";
    av[a++] = (char *)o.algos_text;
    av[a++] = "--iters";
    av[a++] = iters;
    av[a++] = "--ppn";
    av[a++] = ppn;
    snprintf(hosts, sizeof(hosts), "%d", o.hosts);
    av[a++] = "--hosts";
    av[a++] = hosts;
    av[a++] = "--link-rate";
    av[a++] = rate;
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
            "incoll bench allreduce: %d hosts x %d ranks (%s fabric), sizes "
            "%s, algorithms %s\n",
            o.hosts, o.ppn, f.emulated ? "emulated" : "loopback", sizes,
            o.algos_text);
    rc = run_wait(av);
    if (rc != 0)
        fprintf(stderr,
                "incoll bench allreduce: the run failed (exit %d): no "
                "results\n",
                rc);
    bench_fabric_close(&f);
    return rc == 0 ? 0 : 1;
}

/* ---- the rank side ---- */

typedef struct {
    double sum_us, tx;
    double avg, min, max, txavg;
    int failed; /* the algorithm failed at this size (or before) */
} hb_cell_t;

static int mode_of(int a, const char **mode_p)
{
    switch (a) {
    case A_INC_NODE:
    case A_RD:
    case A_RING:
    case A_RAB:
        *mode_p = "node";
        return 0;
    case A_INC_SOCKET:
        *mode_p = "socket";
        return 1;
    case A_MPI:
        *mode_p = "mpi";
        return 3;
    default:
        *mode_p = "flat";
        return 2;
    }
}

static incoll_algo_t algo_of(int a)
{
    switch (a) {
    case A_RD:
    case A_RD_FLAT:
        return INCOLL_ALGO_RD;
    case A_RING:
    case A_RING_FLAT:
        return INCOLL_ALGO_RING;
    case A_RAB:
    case A_RAB_FLAT:
        return INCOLL_ALGO_RABENSEIFNER;
    default:
        return INCOLL_ALGO_INC;
    }
}

static int write_outputs(const hb_opts_t *o, const size_t *sizes, int nsizes,
                         hb_cell_t *cells, const char *csv, const char *plot,
                         uint64_t link_bps)
{
    int ret = 0;
    if (csv) {
        FILE *fp = bench_fopen_out(csv, "bench allreduce");
        if (fp == NULL)
            return -1;
        fprintf(fp, "bytes,algo,avg_us,min_us,max_us,MBps,tx_per_host,hosts,"
                    "ppn\n");
        for (int s = 0; s < nsizes; s++)
            for (int i = 0; i < o->nalgos; i++) {
                hb_cell_t *c = &cells[s * o->nalgos + i];
                if (c->failed)
                    continue;
                fprintf(fp, "%zu,%s,%.2f,%.2f,%.2f,%.2f,%.0f,%d,%d\n", sizes[s],
                        algo_names[o->algos[i]], c->avg, c->min, c->max,
                        (double)sizes[s] / c->avg, c->txavg, o->hosts, o->ppn);
            }
        fclose(fp);
    }
    if (plot) {
        plot_series_t ser[A_COUNT];
        double *buf =
            calloc((size_t)o->nalgos * (size_t)nsizes * 3, sizeof(double));
        char title[128];
        plot_opts_t po = {0};
        if (buf == NULL)
            return -1;
        for (int i = 0; i < o->nalgos; i++) {
            double *b = buf + (size_t)i * (size_t)nsizes * 3;
            int k = 0;
            for (int s = 0; s < nsizes; s++) {
                hb_cell_t *c = &cells[s * o->nalgos + i];
                if (c->failed)
                    continue;
                b[k] = (double)sizes[s];
                b[nsizes + k] = c->avg;
                b[2 * nsizes + k] = (double)sizes[s] / c->avg;
                k++;
            }
            ser[i].name = algo_names[o->algos[i]];
            ser[i].n = k;
            ser[i].bytes = b;
            ser[i].lat_us = b + nsizes;
            ser[i].bw_MBps = b + 2 * nsizes;
        }
        snprintf(title, sizeof(title), "allreduce, %d hosts x %d ranks",
                 o->hosts, o->ppn);
        po.title = title;
        po.link_MBps = (double)link_bps / 8e6;
        ret = bench_plot_write(plot, &po, ser, o->nalgos);
        free(buf);
    }
    return ret;
}

int bench_hier_rank_run(int argc, char **argv, const bench_mpi_t *mpi)
{
    hb_opts_t o;
    incoll_ctx_h ctx = NULL;
    incoll_comm_h world, comms[4] = {NULL};
    const char *csv = NULL, *plot = NULL, *synth = NULL;
    uint64_t link_bps = 0;
    size_t *sizes = NULL;
    hb_cell_t *cells = NULL;
    float *send = NULL, *recv = NULL;
    int rank, size, nsizes, ret = 1, bad = 0;
    uint32_t dead = 0; /* algorithms that failed: skipped from then on */
    incoll_status_t status;

    memset(&o, 0, sizeof(o));
    o.ppn = 1;
    o.hosts = 1;
    o.algos_text = DEFAULT_ALGOS;
    o.min_size = 8;
    o.max_size = 4u << 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--sizes") == 0)
            bench_sizes_parse(v, &o.min_size, &o.max_size);
        else if (strcmp(k, "--algos") == 0)
            o.algos_text = v;
        else if (strcmp(k, "--iters") == 0)
            o.iters = atoi(v);
        else if (strcmp(k, "--ppn") == 0)
            o.ppn = atoi(v);
        else if (strcmp(k, "--hosts") == 0)
            o.hosts = atoi(v);
        else if (strcmp(k, "--link-rate") == 0)
            link_bps = strtoull(v, NULL, 10);
        else if (strcmp(k, "--sockets") == 0)
            o.sockets = atoi(v);
        else if (strcmp(k, "--csv") == 0)
            csv = v;
        else if (strcmp(k, "--plot") == 0)
            plot = v;
    }
    if (parse_algos(o.algos_text, o.algos, &o.nalgos) != 0)
        return 2;
    if (has_algo(&o, A_MPI) && mpi == NULL) {
        fprintf(stderr, "incoll bench _hier: mpi runs in the MPI worker\n");
        return 2;
    }
    if (mpi) {
        ctx = mpi->ctx;
        world = mpi->world;
    } else {
        status = incoll_init(&ctx);
        if (status != INCOLL_OK) {
            fprintf(stderr, "incoll bench _hier: init: %s\n",
                    incoll_status_string(status));
            return 1;
        }
        incoll_comm_world(ctx, &world);
    }
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    if (o.sockets > 0) {
        /* N sockets per host to hwloc; local rank i on CPU i mod CPUs. */
        static char topo[64];
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        cpu_set_t set;
        if (ncpu < 1)
            ncpu = 1;
        snprintf(topo, sizeof(topo), "package:%d core:%ld pu:1", o.sockets,
                 ncpu / o.sockets > 0 ? ncpu / o.sockets : 1);
        synth = topo;
        setenv("HWLOC_SYNTHETIC", synth, 1);
        CPU_ZERO(&set);
        CPU_SET((int)((rank % o.ppn) % ncpu), &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
    /* One communicator per mode, all made before any is used. */
    for (int i = 0; i < o.nalgos; i++) {
        const char *mode;
        int m = mode_of(o.algos[i], &mode);
        if (m == 3 || comms[m])
            continue;
        status = incoll_comm_split(world, 0, rank, &comms[m]);
        if (status == INCOLL_OK)
            status = host_hier_set_mode(comms[m], mode);
        if (status != INCOLL_OK) {
            fprintf(stderr,
                    "incoll bench _hier: rank %d: %s communicator: %s\n", rank,
                    mode, incoll_status_string(status));
            goto out;
        }
    }
    nsizes = bench_size_list(o.min_size, o.max_size, &sizes);
    cells = calloc((size_t)nsizes * (size_t)o.nalgos, sizeof(*cells));
    send = malloc(o.max_size + 16);
    recv = malloc(o.max_size + 16);
    if (nsizes <= 0 || cells == NULL || send == NULL || recv == NULL)
        goto out;
    for (size_t i = 0; i < o.max_size / 4 + 1; i++)
        send[i] = (float)((rank % 13) + (int)(i % 5));
    for (int s = 0; s < nsizes && !bad; s++) {
        size_t count = sizes[s] / 4;
        int iters = o.iters > 0 ? o.iters
                                : (int)((4u << 20) / sizes[s] > 40
                                            ? 40
                                            : ((4u << 20) / sizes[s] < 5
                                                   ? 5
                                                   : (4u << 20) / sizes[s]));
        double base = 0;
        for (int r = 0; r < size; r++)
            base += (double)(r % 13);
        for (int it = -2; it < iters && !bad; it++) { /* 2 warm-up */
            for (int j = 0; j < o.nalgos && !bad; j++) {
                int i = (j + (it < 0 ? 0 : it)) % o.nalgos;
                int a = o.algos[i];
                const char *mode;
                int m = mode_of(a, &mode);
                uint64_t t0, t1, tx0 = 0, tx1 = 0;
                if (dead & (1u << i))
                    continue;
                incoll_barrier(world);
                tx0 = udp_counters(ctx->sock)->tx_bytes;
                t0 = bench_now_ns();
                if (m == 3) {
                    status = mpi->allreduce(send, recv, count) == 0
                                 ? INCOLL_OK
                                 : INCOLL_ERR_IO;
                } else {
                    status = incoll_allreduce_algo(comms[m], algo_of(a), send,
                                                   recv, count, INCOLL_FLOAT32,
                                                   INCOLL_OP_SUM);
                }
                t1 = bench_now_ns();
                tx1 = udp_counters(ctx->sock)->tx_bytes;
                if (status != INCOLL_OK) {
                    /* A failed communicator fails on every member (its
                     * recovery is collective): drop the algorithm from
                     * here on and go on with the others. */
                    fprintf(stderr,
                            "incoll bench _hier: rank %d: %s of %zu bytes: "
                            "%s; dropping it\n",
                            rank, algo_names[a], sizes[s],
                            incoll_status_string(status));
                    dead |= 1u << i;
                    continue;
                }
                for (size_t e = 0; e < count; e++) {
                    double want = base + (double)size * (double)(e % 5);
                    if ((double)recv[e] != want) {
                        fprintf(stderr,
                                "incoll bench _hier: rank %d: %s of %zu "
                                "bytes: element %zu is %g, want %g\n",
                                rank, algo_names[a], sizes[s], e,
                                (double)recv[e], want);
                        bad = 1;
                        break;
                    }
                }
                if (it >= 0) {
                    cells[s * o.nalgos + i].sum_us += (double)(t1 - t0) / 1e3;
                    cells[s * o.nalgos + i].tx += (double)(tx1 - tx0);
                }
            }
        }
        {
            int32_t d = (int32_t)dead;
            incoll_allreduce(world, INCOLL_IN_PLACE, &d, 1, INCOLL_INT32,
                             INCOLL_OP_BOR);
            dead = (uint32_t)d;
        }
        for (int i = 0; i < o.nalgos; i++) {
            cells[s * o.nalgos + i].sum_us /= iters;
            cells[s * o.nalgos + i].tx /= iters;
            cells[s * o.nalgos + i].failed = (dead >> i) & 1;
        }
    }
    /* Everyone agrees whether all went well, then the statistics. */
    {
        int32_t b = bad;
        incoll_allreduce(world, INCOLL_IN_PLACE, &b, 1, INCOLL_INT32,
                         INCOLL_OP_MAX);
        bad = b;
    }
    if (!bad) {
        size_t n = (size_t)nsizes * (size_t)o.nalgos;
        double *v = calloc(n * 4, sizeof(double));
        for (size_t c = 0; c < n; c++) {
            v[c] = v[n + c] = v[2 * n + c] = cells[c].sum_us;
            v[3 * n + c] = cells[c].tx;
        }
        incoll_allreduce(world, INCOLL_IN_PLACE, v, n, INCOLL_FLOAT64,
                         INCOLL_OP_SUM);
        incoll_allreduce(world, INCOLL_IN_PLACE, v + n, n, INCOLL_FLOAT64,
                         INCOLL_OP_MIN);
        incoll_allreduce(world, INCOLL_IN_PLACE, v + 2 * n, n, INCOLL_FLOAT64,
                         INCOLL_OP_MAX);
        incoll_allreduce(world, INCOLL_IN_PLACE, v + 3 * n, n, INCOLL_FLOAT64,
                         INCOLL_OP_SUM);
        for (size_t c = 0; c < n; c++) {
            cells[c].avg = v[c] / size;
            cells[c].min = v[n + c];
            cells[c].max = v[2 * n + c];
            cells[c].txavg = v[3 * n + c] / o.hosts;
        }
        free(v);
        if (rank == 0) {
            printf("# allreduce float32 sum, %d hosts x %d ranks per host%s\n",
                   o.hosts, o.ppn, synth ? " (hwloc: sockets emulated)" : "");
            printf("# tx/host: bytes the ranks' UDP sockets sent per operation "
                   "per host (not counted for mpi)\n");
            printf("%10s %-18s %10s %10s %10s %10s %12s\n", "bytes", "algo",
                   "avg(us)", "min(us)", "max(us)", "MB/s", "tx/host");
            for (int s = 0; s < nsizes; s++)
                for (int i = 0; i < o.nalgos; i++) {
                    hb_cell_t *c = &cells[s * o.nalgos + i];
                    if (c->failed)
                        printf("%10zu %-18s %10s\n", sizes[s],
                               algo_names[o.algos[i]], "failed");
                    else
                        printf("%10zu %-18s %10.1f %10.1f %10.1f %10.2f "
                               "%12.0f\n",
                               sizes[s], algo_names[o.algos[i]], c->avg, c->min,
                               c->max, (double)sizes[s] / c->avg, c->txavg);
                }
            fflush(stdout);
            if (write_outputs(&o, sizes, nsizes, cells, csv, plot, link_bps) !=
                0)
                bad = 1;
        }
    }
    ret = bad ? 1 : 0;
out:
    free(cells);
    free(send);
    free(recv);
    free(sizes);
    for (int m = 0; m < 4; m++)
        if (comms[m])
            incoll_comm_destroy(comms[m]);
    if (!mpi)
        incoll_finalize(ctx);
    return ret;
}

int bench_hier_rank_main(int argc, char **argv)
{
    return bench_hier_rank_run(argc, argv, NULL);
}
