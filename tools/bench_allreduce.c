/*
 * `incoll bench allreduce`: in-network allreduce against the host-based
 * algorithms, side by side on the same fabric, OSU/ucc_perftest style.
 *
 * The driver (bench_allreduce_main) gets a fabric (--fabric DIR, or one it
 * brings up: emulated links with --emulate, else loopback, always torn
 * down), starts P ranks with `incoll run` running the hidden `incoll bench
 * _allreduce`, and turns their raw records into the table, the CSV and
 * the plot. With `mpi` in --algos (the MPI library's own MPI_Allreduce as
 * a baseline) the ranks are the MPI worker instead, started with `incoll
 * mpirun` (bench_launch_mpi; tools/mpi/bench_worker.c), which runs the
 * same rank code with libincoll brought up from MPI.
 *
 * Each rank (bench_allreduce_rank_main), for every size and iteration,
 * runs every algorithm once, in an order rotated by the iteration and
 * reversed every other round (run_order) so no algorithm always follows
 * the same one; before each operation the ranks
 * meet in a barrier (not timed, see shm_barrier()). Around the
 * operation it reads the monotonic clock, getrusage (user+sys of this
 * process only) and the counters of its UDP socket (bytes and datagrams it
 * really sent, retransmissions and acks included); the in-network engine's
 * retransmission counter too. MPI's traffic has no socket of ours: for
 * `mpi` the bytes and packets are those of the emulated host's link
 * (/proc/net/dev of its namespace), not measured on loopback. Inputs are
 * float32 small integers,
 *   x_r[i] = a(r) + b(i),
 * so the sum is exact and known: A + P*b(i) with A the sum of a(r); every
 * result is checked element by element and a wrong one fails the run.
 * INCOLL_BENCH_CORRUPT=1 (or "result") makes the last rank change one
 * element of its result, "input" one element of its input, once, to prove
 * that the check catches it.
 *
 * The records (clock values of every rank on the machine's one monotonic
 * clock) give per algorithm and size: latency averaged per rank, then
 * avg/min/max over ranks (as OSU does); bandwidth = bytes / avg latency;
 * bytes and datagrams sent per host per operation; CPU time per operation;
 * and the completion spread: for each operation, the time from its first
 * start on any rank to the moment each rank has the result, over ranks and
 * iterations (min, quartiles, max).
 */
#include "bench_common.h"
#include "bench_hier.h"
#include "bench_plot.h"
#include "cli.h"
#include "fabric/emu.h"

#include "common/netdev.h"
#include "common/settings.h"
#include "common/udp.h"
#include "host/host.h"
#include "incoll.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AR_MAGIC 0x31524142u /* "BAR1" */
#define AR_MAX_ALGOS 8
/* `mpi` in --algos: the MPI library's own MPI_Allreduce (not an
 * incoll_algo_t; the ranks then run under MPI, see bench_common.h). */
#define AR_ALGO_MPI (INCOLL_ALGO_COUNT + 1)
/* `mpi-layer`: MPI_Allreduce through the MPI layer (libincoll_mpi's offload
 * path, on the same libincoll communicator as inc). */
#define AR_ALGO_MPI_LAYER (INCOLL_ALGO_COUNT + 2)
/* Loss rates of one --loss run. */
#define AR_MAX_LOSS 16
/* A counter the rank could not read (records and stats). */
#define AR_NA UINT64_MAX

typedef struct {
    uint32_t algo_idx; /* index into the --algos list */
    uint32_t iter;     /* timed iteration */
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t cpu_ns;
    uint64_t tx_bytes;
    uint64_t tx_packets;
    uint64_t retrans;
} ar_rec_t;

typedef struct {
    uint32_t magic;
    uint32_t nsizes;
    uint32_t nalgos;
    uint32_t rank;
    uint64_t nrecs;
} ar_file_hdr_t;

typedef struct {
    /* What both the driver and the ranks need. */
    size_t min_size, max_size;
    int algos[AR_MAX_ALGOS];       /* incoll_algo_t */
    size_t algo_max[AR_MAX_ALGOS]; /* run only up to this size; 0 = all */
    int nalgos;
    int iters;  /* 0 = by size */
    int warmup; /* -1 = by iterations */
    /* Driver only. */
    int hosts;
    int radix;
    int emulate;
    uint64_t link_rate;
    const char *fabric;
    const char *csv;
    const char *plot;
    const char *reference; /* a `bench pingpong --csv` file */
    int keep;
    int timeout_s;
    int dry_run;
    double loss[AR_MAX_LOSS]; /* --loss: drop rates, one run each */
    int nloss;
    double burst; /* --burst: mean burst length (1 = none) */
    int rounds;   /* --rounds: the loss rates this many times */
    /* Rank only. */
    const char *out;
    const char *progress;
} ar_opts_t;

static const char *algo_str(int algo)
{
    switch (algo) {
    case INCOLL_ALGO_INC:
        return "inc";
    case INCOLL_ALGO_RD:
        return "rd";
    case INCOLL_ALGO_RING:
        return "ring";
    case INCOLL_ALGO_RABENSEIFNER:
        return "rabenseifner";
    case AR_ALGO_MPI:
        return "mpi";
    case AR_ALGO_MPI_LAYER:
        return "mpi-layer";
    default:
        return "auto";
    }
}

static int algo_from(const char *s)
{
    for (int a = INCOLL_ALGO_INC; a < INCOLL_ALGO_COUNT; a++)
        if (strcmp(s, algo_str(a)) == 0)
            return a;
    if (strcmp(s, "rab") == 0 || strcmp(s, "rabenseifer") == 0)
        return INCOLL_ALGO_RABENSEIFNER;
    if (strcmp(s, "mpi") == 0)
        return AR_ALGO_MPI;
    if (strcmp(s, "mpi-layer") == 0 || strcmp(s, "layer") == 0)
        return AR_ALGO_MPI_LAYER;
    return -1;
}

static int parse_algos(const char *text, ar_opts_t *o)
{
    char buf[256], *save = NULL;
    o->nalgos = 0;
    if (strlen(text) >= sizeof(buf))
        return -1;
    snprintf(buf, sizeof(buf), "%s", text);
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(t, ':');
        size_t lo = 0, hi = 0;
        int a;
        if (colon) {
            *colon = '\0';
            if (bench_sizes_parse(colon + 1, &lo, &hi) != 0 || lo != hi)
                return -1;
        }
        a = algo_from(t);
        if (a < 0 || o->nalgos == AR_MAX_ALGOS)
            return -1;
        for (int i = 0; i < o->nalgos; i++)
            if (o->algos[i] == a)
                return -1;
        o->algo_max[o->nalgos] = hi;
        o->algos[o->nalgos++] = a;
    }
    return o->nalgos > 0 ? 0 : -1;
}

static void algos_str(const ar_opts_t *o, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < o->nalgos && off < len; i++) {
        char sz[32] = "";
        if (o->algo_max[i])
            bench_size_str(o->algo_max[i], sz + 1, sizeof(sz) - 1), sz[0] = ':';
        off += (size_t)snprintf(buf + off, len - off, "%s%s%s", i ? "," : "",
                                algo_str(o->algos[i]), sz);
    }
}

/* 1 if mpi or mpi-layer is in the list (the ranks then run under MPI). */
static int has_mpi(const ar_opts_t *o)
{
    for (int i = 0; i < o->nalgos; i++)
        if (o->algos[i] == AR_ALGO_MPI || o->algos[i] == AR_ALGO_MPI_LAYER)
            return 1;
    return 0;
}

/* 1 if algorithm index ai runs at this size. */
static int active(const ar_opts_t *o, int ai, size_t bytes)
{
    return o->algo_max[ai] == 0 || bytes <= o->algo_max[ai];
}

/* How many algorithms run at this size. */
static int nactive(const ar_opts_t *o, size_t bytes)
{
    int n = 0;
    for (int i = 0; i < o->nalgos; i++)
        n += active(o, i, bytes);
    return n;
}

/* Timed iterations for a size: many for small vectors, a few for large. */
static int iters_for(const ar_opts_t *o, size_t bytes)
{
    size_t n;
    if (o->iters > 0)
        return o->iters;
    n = (4u << 20) / bytes;
    return n < 4 ? 4 : n > 100 ? 100 : (int)n;
}

static int warmup_for(const ar_opts_t *o, size_t bytes)
{
    int it;
    if (o->warmup >= 0)
        return o->warmup;
    it = iters_for(o, bytes) / 10;
    return it < 1 ? 1 : it;
}

/* Bytes are whole float32 elements, at least one. */
static size_t round_size(size_t b)
{
    return b < 4 ? 4 : (b + 3) / 4 * 4;
}

static int parse_int(const char *s, int min, int max, int *v_p)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min || v > max)
        return -1;
    *v_p = (int)v;
    return 0;
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll bench allreduce [-n P] [--fabric DIR | --emulate "
        "[--link-rate R]] [--radix K]\n"
        "                              [--sizes MIN:MAX] [--algos LIST] "
        "[--iters N] [--warmup N]\n"
        "                              [--csv FILE] [--plot FILE.png] "
        "[--keep] [--timeout SEC]\n"
        "\n"
        "Runs allreduce (float32 sum) over P ranks for every size from MIN\n"
        "to MAX (doubling) with each algorithm, side by side (alternating\n"
        "per iteration), checks every result, and prints one row per size\n"
        "and algorithm: bytes, avg/min/max latency (us), bandwidth (bytes /\n"
        "latency), bytes and datagrams each host sent per operation, CPU\n"
        "time per operation and the completion spread over ranks; then the\n"
        "speedup of inc over the best host-based algorithm per size.\n"
        "\n"
        "  -n, --hosts P     ranks, one per host (default 8)\n"
        "  --fabric DIR      use the running fabric in DIR (from `incoll\n"
        "                    fabric up`); else one is brought up for the run\n"
        "                    and always torn down\n"
        "  --emulate         bring up an emulated fabric: a network\n"
        "                    namespace per host and switch, veth links\n"
        "                    shaped to --link-rate (needs root; without\n"
        "                    root the loopback fabric is used)\n"
        "  --link-rate R     host link rate, e.g. 100mbit (default: 800 "
        "Mbit/s\n"
        "                    shared by the hosts: 100 for 8, 50 for 16)\n"
        "  --radix K         switch radix of a fabric brought up (default 4)\n"
        "  --sizes MIN:MAX   bytes, K/M suffixes (default 8:1M)\n"
        "  --algos LIST      of inc, rd, ring, rabenseifner (default: these\n"
        "                    four) and mpi (the MPI library's own\n"
        "                    MPI_Allreduce: the ranks then run under Open\n"
        "                    MPI's mpirun) and mpi-layer (the same call\n"
        "                    through libincoll_mpi, as a preloaded program\n"
        "                    makes it); ALGO:SIZE runs ALGO only up to\n"
        "                    SIZE (rd:256K)\n"
        "  --iters N         timed iterations per size (default: 4 MiB / "
        "size,\n"
        "                    at least 4, at most 100)\n"
        "  --warmup N        untimed iterations first (default iters/10)\n"
        "  --csv FILE        write the results as CSV (header row first)\n"
        "  --plot FILE.png   latency and bandwidth vs size (gnuplot)\n"
        "  --reference CSV   ping-pong results (`incoll bench pingpong "
        "--csv`)\n"
        "                    on the same links: adds inc's bandwidth as a\n"
        "                    share of ping-pong's, and its line to the plot\n"
        "  --loss LIST       drop rates, e.g. 0,0.001,0.01,0.05: one run per\n"
        "                    rate (a fabric brought up per run, its daemons\n"
        "                    and hosts dropping what they send at that rate,\n"
        "                    INCOLL_FAULT_DROP), then a table of goodput\n"
        "                    (bytes / avg latency, and as a share of the\n"
        "                    same algorithm's at the lowest rate) and p50/p99\n"
        "                    latency per rate; --csv and --plot then hold\n"
        "                    goodput vs loss rate. With --fabric only the\n"
        "                    ranks drop (the daemons keep their own knobs)\n"
        "  --burst L         drops in bursts of L datagrams on average\n"
        "                    (INCOLL_FAULT_BURST; default 1: independent)\n"
        "  --rounds N        run the list of rates N times, interleaved, and\n"
        "                    pool the samples (default 1)\n"
        "  --keep            keep the scratch directory (raw records, logs)\n"
        "  --timeout SEC     stop the ranks after SEC seconds (default 1800)\n"
        "\n"
        "Knobs of the library (INCOLL_WINDOW, INCOLL_RTO_MIN_US, ...) pass\n"
        "through the environment to every rank; `incoll info` lists them.\n");
}

enum {
    OPT_FABRIC = 256,
    OPT_EMULATE,
    OPT_LINK_RATE,
    OPT_RADIX,
    OPT_SIZES,
    OPT_ALGOS,
    OPT_ITERS,
    OPT_WARMUP,
    OPT_CSV,
    OPT_PLOT,
    OPT_KEEP,
    OPT_TIMEOUT,
    OPT_DRY_RUN,
    OPT_OUT,
    OPT_PROGRESS,
    OPT_REFERENCE,
    OPT_LOSS,
    OPT_BURST,
    OPT_ROUNDS,
};

static const struct option ar_longopts[] = {
    {"hosts", required_argument, NULL, 'n'},
    {"fabric", required_argument, NULL, OPT_FABRIC},
    {"emulate", no_argument, NULL, OPT_EMULATE},
    {"link-rate", required_argument, NULL, OPT_LINK_RATE},
    {"radix", required_argument, NULL, OPT_RADIX},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"algos", required_argument, NULL, OPT_ALGOS},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"csv", required_argument, NULL, OPT_CSV},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"keep", no_argument, NULL, OPT_KEEP},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"out", required_argument, NULL, OPT_OUT},
    {"progress", required_argument, NULL, OPT_PROGRESS},
    {"reference", required_argument, NULL, OPT_REFERENCE},
    {"loss", required_argument, NULL, OPT_LOSS},
    {"burst", required_argument, NULL, OPT_BURST},
    {"rounds", required_argument, NULL, OPT_ROUNDS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* "0,0.001,0.01": distinct drop rates in [0, 0.9], in the given order. */
static int parse_loss(const char *text, ar_opts_t *o)
{
    const char *p = text;
    o->nloss = 0;
    while (*p) {
        char *end;
        double v;
        errno = 0;
        v = strtod(p, &end);
        if (errno || end == p || !(v >= 0 && v <= 0.9) ||
            o->nloss == AR_MAX_LOSS || (*end && *end != ','))
            return -1;
        for (int i = 0; i < o->nloss; i++)
            if (o->loss[i] == v)
                return -1;
        o->loss[o->nloss++] = v;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return -1;
    }
    return o->nloss > 0 ? 0 : -1;
}

/* Parses argv into o. Returns 0, 1 after --help, or 2 after a message. */
static int parse_args(int argc, char **argv, ar_opts_t *o, const char *who)
{
    int opt;

    memset(o, 0, sizeof(*o));
    o->min_size = 8;
    o->max_size = 1u << 20;
    o->warmup = -1;
    o->hosts = 8;
    o->radix = 4;
    o->timeout_s = 1800;
    for (int a = INCOLL_ALGO_INC; a < INCOLL_ALGO_COUNT; a++)
        o->algos[o->nalgos++] = a;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":n:h", ar_longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            if (parse_int(optarg, 1, 4096, &o->hosts) != 0) {
                fprintf(stderr, "incoll %s: -n wants 1..4096 ranks, not '%s'\n",
                        who, optarg);
                return 2;
            }
            break;
        case OPT_FABRIC:
            o->fabric = optarg;
            break;
        case OPT_EMULATE:
            o->emulate = 1;
            break;
        case OPT_LINK_RATE:
            if (emu_parse_rate(optarg, &o->link_rate) != 0) {
                fprintf(stderr,
                        "incoll %s: bad --link-rate '%s' (want e.g. "
                        "100mbit, 1gbit; 100 kbit/s .. 100 Gbit/s)\n",
                        who, optarg);
                return 2;
            }
            break;
        case OPT_RADIX:
            if (parse_int(optarg, 2, AGG_RADIX_MAX, &o->radix) != 0) {
                fprintf(stderr, "incoll %s: --radix wants 2..%d, not '%s'\n",
                        who, AGG_RADIX_MAX, optarg);
                return 2;
            }
            break;
        case OPT_SIZES:
            if (bench_sizes_parse(optarg, &o->min_size, &o->max_size) != 0) {
                fprintf(stderr,
                        "incoll %s: bad --sizes '%s' (want MIN:MAX in "
                        "bytes, e.g. 8:4M)\n",
                        who, optarg);
                return 2;
            }
            break;
        case OPT_ALGOS:
            if (parse_algos(optarg, o) != 0) {
                fprintf(stderr,
                        "incoll %s: bad --algos '%s' (want a list of "
                        "distinct inc, rd, ring, rabenseifner, mpi, "
                        "mpi-layer)\n",
                        who, optarg);
                return 2;
            }
            break;
        case OPT_ITERS:
            if (parse_int(optarg, 1, 1000000, &o->iters) != 0) {
                fprintf(stderr,
                        "incoll %s: --iters wants a number >= 1, not "
                        "'%s'\n",
                        who, optarg);
                return 2;
            }
            break;
        case OPT_WARMUP:
            if (parse_int(optarg, 0, 1000000, &o->warmup) != 0) {
                fprintf(stderr,
                        "incoll %s: --warmup wants a number >= 0, not "
                        "'%s'\n",
                        who, optarg);
                return 2;
            }
            break;
        case OPT_CSV:
            o->csv = optarg;
            break;
        case OPT_PLOT:
            o->plot = optarg;
            break;
        case OPT_KEEP:
            o->keep = 1;
            break;
        case OPT_TIMEOUT:
            if (parse_int(optarg, 1, 1000000, &o->timeout_s) != 0) {
                fprintf(stderr, "incoll %s: --timeout wants seconds >= 1\n",
                        who);
                return 2;
            }
            break;
        case OPT_DRY_RUN:
            o->dry_run = 1;
            break;
        case OPT_OUT:
            o->out = optarg;
            break;
        case OPT_PROGRESS:
            o->progress = optarg;
            break;
        case OPT_REFERENCE:
            o->reference = optarg;
            break;
        case OPT_LOSS:
            if (parse_loss(optarg, o) != 0) {
                fprintf(stderr,
                        "incoll %s: bad --loss '%s' (want up to %d "
                        "distinct drop rates in [0, 0.9], comma-separated, "
                        "e.g. 0,0.001,0.01,0.05)\n",
                        who, optarg, AR_MAX_LOSS);
                return 2;
            }
            break;
        case OPT_BURST: {
            char *end;
            errno = 0;
            o->burst = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o->burst >= 1) ||
                o->burst > 1000) {
                fprintf(stderr,
                        "incoll %s: --burst wants a mean burst length in "
                        "datagrams, 1..1000, not '%s'\n",
                        who, optarg);
                return 2;
            }
            break;
        }
        case OPT_ROUNDS:
            if (parse_int(optarg, 1, 100, &o->rounds) != 0) {
                fprintf(stderr, "incoll %s: --rounds wants 1..100, not '%s'\n",
                        who, optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 1;
        case ':':
            fprintf(stderr, "incoll %s: %s needs a value\n", who,
                    argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "incoll %s: unknown option '%s' (see --help)\n",
                    who, argv[optind - 1]);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "incoll %s: unexpected argument '%s' (see --help)\n",
                who, argv[optind]);
        return 2;
    }
    if (o->fabric && (o->emulate || o->link_rate)) {
        fprintf(stderr,
                "incoll %s: --fabric uses a fabric as it is: it does "
                "not go with --emulate or --link-rate\n",
                who);
        return 2;
    }
    if (o->link_rate && !o->emulate) {
        fprintf(stderr,
                "incoll %s: --link-rate needs --emulate (loopback has "
                "no link rate)\n",
                who);
        return 2;
    }
    if ((o->burst > 0 || o->rounds > 0) && o->nloss == 0) {
        fprintf(stderr, "incoll %s: --burst and --rounds go with --loss\n",
                who);
        return 2;
    }
    if (o->nloss > 0 && (has_mpi(o) || o->reference)) {
        fprintf(stderr,
                "incoll %s: --loss runs libincoll's algorithms: not with "
                "mpi, mpi-layer or --reference\n",
                who);
        return 2;
    }
    if (o->rounds == 0)
        o->rounds = 1;
    o->min_size = round_size(o->min_size);
    o->max_size = round_size(o->max_size);
    if (o->max_size > (1u << 30)) {
        fprintf(stderr, "incoll %s: sizes above 1 GiB are not supported\n",
                who);
        return 2;
    }
    if (o->plot) {
        size_t l = strlen(o->plot);
        if (l < 5 || strcmp(o->plot + l - 4, ".png") != 0) {
            fprintf(stderr,
                    "incoll %s: --plot wants a file name ending in "
                    ".png\n",
                    who);
            return 2;
        }
    }
    return 0;
}

/* ---- the rank --------------------------------------------------------- */

/* The input pattern: a(r) + b(i), b cycling over 17 values. */
typedef struct {
    float b[17];
    unsigned start; /* b index of element 0 */
    float a;        /* this rank's a(r) */
    float sum_a;    /* sum over ranks */
} pattern_t;

static void pattern_make(pattern_t *p, int rank, int size, int iter, int k)
{
    for (int j = 0; j < 17; j++)
        p->b[j] = (float)(j - 8);
    p->start = (unsigned)(iter + 5 * k) % 17;
    p->a = (float)((rank * 7 + iter * 3 + k) % 13);
    p->sum_a = 0;
    for (int r = 0; r < size; r++)
        p->sum_a += (float)((r * 7 + iter * 3 + k) % 13);
}

static void pattern_fill(const pattern_t *p, float *x, size_t n)
{
    unsigned j = p->start;
    for (size_t i = 0; i < n; i++) {
        x[i] = p->a + p->b[j];
        j += 14; /* 31 mod 17: neighbours differ, segments shift the phase */
        if (j >= 17)
            j -= 17;
    }
}

/* Index of the first wrong element, or n. */
static size_t pattern_check(const pattern_t *p, int size, const float *x,
                            size_t n, float *want_p)
{
    unsigned j = p->start;
    for (size_t i = 0; i < n; i++) {
        float want = p->sum_a + (float)size * p->b[j];
        if (x[i] != want) {
            *want_p = want;
            return i;
        }
        j += 14;
        if (j >= 17)
            j -= 17;
    }
    return n;
}

static uint64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
               1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
               1000ull;
}

/*
 * The barrier before each timed operation. The ranks share this machine
 * (only their network namespaces differ), so they meet in shared memory: a
 * counter and a generation in a file of the scratch directory, waited on
 * with a futex. It sends nothing, so it neither loads the links nor shows
 * in the counters or the engines' round-trip estimates, and it waits for a
 * rank still busy with a long operation however long that takes (a barrier
 * through the network would give up after its retries). While waiting, a
 * rank keeps its library answering every couple of milliseconds: a peer
 * may still need an acknowledgement of the operation just finished.
 */
typedef struct {
    _Atomic uint32_t arrived;
    _Atomic uint32_t gen;
} shm_bar_t;

static void futex(_Atomic uint32_t *addr, int op, uint32_t val,
                  const struct timespec *ts)
{
    syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static void shm_barrier(shm_bar_t *b, int size, incoll_ctx_h ctx)
{
    uint32_t g = atomic_load(&b->gen);
    if (atomic_fetch_add(&b->arrived, 1) == (uint32_t)size - 1) {
        atomic_store(&b->arrived, 0);
        atomic_fetch_add(&b->gen, 1);
        futex(&b->gen, FUTEX_WAKE, INT32_MAX, NULL);
        return;
    }
    while (atomic_load(&b->gen) == g) {
        struct timespec ts = {0, 2000000};
        futex(&b->gen, FUTEX_WAIT, g, &ts);
        if (atomic_load(&b->gen) != g)
            break;
        host_ctx_progress(ctx, 0);
    }
}

static shm_bar_t *shm_barrier_open(const char *dir)
{
    char path[PATH_MAX + 32];
    void *p;
    int fd;
    snprintf(path, sizeof(path), "%s/barrier", dir);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* Made by the driver before the ranks start. */
static int shm_barrier_create(const char *dir)
{
    char path[PATH_MAX + 32];
    int fd, ret;
    snprintf(path, sizeof(path), "%s/barrier", dir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ret = ftruncate(fd, 4096);
    close(fd);
    return ret;
}

/*
 * Which algorithm runs k-th in iteration it: the list rotated by it, and
 * in every other block of n iterations reversed. A rotation alone keeps
 * the cyclic order, so with three or more algorithms each would always
 * follow the same one (and pay for what it leaves behind: MPI's TCP
 * acknowledgements and progress); with the reversed blocks each follows
 * every other one equally often.
 */
static int run_order(int n, int it, int k)
{
    int pos = (it / n) % 2 ? n - 1 - k : k;
    return (pos + it) % n;
}

/* Bytes and packets sent by interface dev of this process's network
 * namespace. Returns 0, or -1 when there is no such interface. */
static int netdev_tx(const char *dev, uint64_t *bytes_p, uint64_t *pkts_p)
{
    netdev_counters_t c;
    int ret = netdev_counters(dev, &c);

    if (ret == 0) {
        *bytes_p = c.tx_bytes;
        *pkts_p = c.tx_packets;
    }
    return ret;
}

int bench_allreduce_rank_main(int argc, char **argv)
{
    return bench_allreduce_rank_run(argc, argv, NULL);
}

int bench_allreduce_rank_run(int argc, char **argv, const bench_mpi_t *mpi)
{
    const char *who = "bench allreduce";
    const char *corrupt = setting_str(SETTING_BENCH_CORRUPT);
    int corrupt_result = 0, corrupt_input = 0, corrupted = 0, corrupt_now;
    int rank, size, nsizes, ret = 1, have_uplink;
    size_t *sizes = NULL, max_count;
    float *send = NULL, *recv = NULL;
    ar_rec_t *recs = NULL;
    uint64_t nrecs = 0, ri = 0, total_ops = 0, done_ops = 0, nb, np;
    incoll_ctx_h ctx = NULL;
    incoll_comm_h comm;
    incoll_status_t status;
    shm_bar_t *bar = NULL;
    ar_opts_t o;

    if (parse_args(argc, argv, &o, who) != 0 || o.out == NULL) {
        fprintf(stderr, "incoll %s: the rank side needs --out DIR\n", who);
        return 2;
    }
    if (has_mpi(&o) && mpi == NULL) {
        fprintf(stderr,
                "incoll %s: the mpi algorithm runs in the MPI worker "
                "(" BENCH_MPI_WORKER "), not under `incoll run`\n",
                who);
        return 2;
    }
    if (corrupt && *corrupt && strcmp(corrupt, "0") != 0) {
        corrupt_input = strcmp(corrupt, "input") == 0;
        corrupt_result = !corrupt_input;
    }
    if (mpi) {
        /* libincoll came up from MPI; the MPI layer finalizes it. */
        ctx = mpi->ctx;
        comm = mpi->world;
    } else {
        status = incoll_init(&ctx);
        if (status != INCOLL_OK) {
            fprintf(stderr, "incoll %s: init: %s\n", who,
                    incoll_status_string(status));
            return 1;
        }
        incoll_comm_world(ctx, &comm);
    }
    incoll_comm_rank(comm, &rank);
    incoll_comm_size(comm, &size);
    /* The MPI library's traffic has no socket of ours to count: in an
     * emulated host, the host's link counts it. */
    have_uplink = netdev_tx("uplink", &nb, &np) == 0;
    nsizes = bench_size_list(o.min_size, o.max_size, &sizes);
    if (nsizes <= 0)
        goto out;
    max_count = sizes[nsizes - 1] / 4;
    for (int s = 0; s < nsizes; s++) {
        nrecs +=
            (uint64_t)iters_for(&o, sizes[s]) * (uint64_t)nactive(&o, sizes[s]);
        total_ops +=
            (uint64_t)(iters_for(&o, sizes[s]) + warmup_for(&o, sizes[s])) *
            (uint64_t)nactive(&o, sizes[s]);
    }
    send = malloc(max_count * sizeof(float));
    recv = malloc(max_count * sizeof(float));
    recs = calloc(nrecs, sizeof(*recs));
    bar = shm_barrier_open(o.out);
    if (bar == NULL) {
        fprintf(stderr, "incoll %s: rank %d: cannot map %s/barrier: %s\n", who,
                rank, o.out, strerror(errno));
        goto out;
    }
    if (send == NULL || recv == NULL || recs == NULL) {
        fprintf(stderr, "incoll %s: rank %d: out of memory\n", who, rank);
        goto out;
    }

    for (int s = 0; s < nsizes; s++) {
        size_t count = sizes[s] / 4;
        int iters = iters_for(&o, sizes[s]), warm = warmup_for(&o, sizes[s]);
        char sz[32];
        bench_size_str(sizes[s], sz, sizeof(sz));
        for (int it = 0; it < warm + iters; it++) {
            for (int k = 0; k < o.nalgos; k++) {
                int ai = run_order(o.nalgos, it, k), algo = o.algos[ai];
                if (!active(&o, ai, sizes[s]))
                    continue;
                const udp_counters_t *uc = udp_counters(ctx->sock);
                /* No in-network engine when the communicator could not
                 * get a group: inc then fails with the reason. */
                const host_engine_counters_t *hc =
                    comm->eng ? host_engine_counters(comm->eng) : NULL;
                uint64_t c0, c1, b0 = 0, p0 = 0, r0, t0, t1, b1 = 0, p1 = 0;
                int is_mpi = algo == AR_ALGO_MPI, mpi_ret = 0;
                pattern_t pat;
                float want = 0;
                size_t bad;

                /* The first timed operation of the run is the one the
                 * last rank corrupts, when asked to. */
                corrupt_now = (corrupt_input || corrupt_result) &&
                              rank == size - 1 && s == 0 && it == warm &&
                              !corrupted;
                corrupted |= corrupt_now;
                pattern_make(&pat, rank, size, it, ai);
                pattern_fill(&pat, send, count);
                if (corrupt_now && corrupt_input)
                    send[count / 2] += 1.0f;
                memset(recv, 0xff, count * sizeof(float));
                shm_barrier(bar, size, ctx);
                if (is_mpi && have_uplink)
                    netdev_tx("uplink", &b0, &p0);
                c0 = cpu_ns();
                if (!is_mpi) {
                    b0 = uc->tx_bytes;
                    p0 = uc->tx_packets;
                }
                r0 = hc ? hc->retransmits + hc->fast_retransmits : 0;
                t0 = bench_now_ns();
                if (is_mpi || algo == AR_ALGO_MPI_LAYER) {
                    mpi_ret = is_mpi ? mpi->allreduce(send, recv, count)
                                     : mpi->layer_allreduce(send, recv, count);
                    status = mpi_ret == 0 ? INCOLL_OK : INCOLL_ERR_IO;
                } else {
                    status = incoll_allreduce_algo(
                        comm, (incoll_algo_t)algo, send, recv, count,
                        INCOLL_FLOAT32, INCOLL_OP_SUM);
                }
                t1 = bench_now_ns();
                c1 = cpu_ns();
                if (is_mpi && have_uplink)
                    netdev_tx("uplink", &b1, &p1);
                if (status != INCOLL_OK) {
                    if (is_mpi || algo == AR_ALGO_MPI_LAYER)
                        fprintf(stderr,
                                "incoll %s: rank %d: %s MPI_Allreduce of %s "
                                "bytes, iteration %d: MPI error %d\n",
                                who, rank, algo_str(algo), sz, it, mpi_ret);
                    else
                        fprintf(stderr,
                                "incoll %s: rank %d: allreduce %s of %s "
                                "bytes, iteration %d: %s\n",
                                who, rank, algo_str(algo), sz, it,
                                incoll_status_string(status));
                    goto out;
                }
                if (it >= warm) {
                    ar_rec_t *r = &recs[ri++];
                    r->algo_idx = (uint32_t)ai;
                    r->iter = (uint32_t)(it - warm);
                    r->start_ns = t0;
                    r->end_ns = t1;
                    r->cpu_ns = c1 - c0;
                    if (!is_mpi) {
                        r->tx_bytes = uc->tx_bytes - b0;
                        r->tx_packets = uc->tx_packets - p0;
                        r->retrans =
                            hc ? hc->retransmits + hc->fast_retransmits - r0
                               : AR_NA;
                    } else if (have_uplink) {
                        r->tx_bytes = b1 - b0;
                        r->tx_packets = p1 - p0;
                        r->retrans = AR_NA;
                    } else {
                        r->tx_bytes = r->tx_packets = r->retrans = AR_NA;
                    }
                }
                if (corrupt_now && corrupt_result)
                    recv[count / 2] += 1.0f;
                bad = pattern_check(&pat, size, recv, count, &want);
                if (bad < count) {
                    fprintf(stderr,
                            "incoll %s: rank %d: WRONG RESULT: %s "
                            "allreduce of %s bytes, iteration %d: "
                            "element %zu is %g, expected %g\n",
                            who, rank, algo_str(algo), sz, it, bad,
                            (double)recv[bad], (double)want);
                    ret = 3;
                    goto out;
                }
                done_ops++;
                if (rank == 0)
                    bench_progress_write(o.progress, 0,
                                         "[%3d%%] %s bytes (%d/%d), iteration "
                                         "%d/%d%s",
                                         (int)(100 * done_ops / total_ops), sz,
                                         s + 1, nsizes, it + 1, warm + iters,
                                         it < warm ? " (warm-up)" : "");
            }
        }
    }
    shm_barrier(bar, size, ctx);
    {
        char path[PATH_MAX + 32];
        ar_file_hdr_t h = {AR_MAGIC, (uint32_t)nsizes, (uint32_t)o.nalgos,
                           (uint32_t)rank, nrecs};
        FILE *f;
        snprintf(path, sizeof(path), "%s/rank-%d.rec", o.out, rank);
        f = fopen(path, "wb");
        if (f == NULL || fwrite(&h, sizeof(h), 1, f) != 1 ||
            fwrite(recs, sizeof(*recs), nrecs, f) != nrecs) {
            fprintf(stderr, "incoll %s: rank %d: cannot write %s: %s\n", who,
                    rank, path, strerror(errno));
            if (f)
                fclose(f);
            goto out;
        }
        if (fclose(f) != 0)
            goto out;
    }
    ret = 0;
out:
    if (bar)
        munmap(bar, 4096);
    free(send);
    free(recv);
    free(recs);
    free(sizes);
    if (mpi == NULL)
        incoll_finalize(ctx);
    return ret;
}

/* ---- the driver ------------------------------------------------------- */

typedef struct {
    double avg_us, min_us, max_us;
    double bw_MBps;
    double tx_bytes, tx_packets, cpu_us, retrans; /* NAN: not measured */
    double spread[5]; /* min, p25, p50, p75, max, us */
    int iters;
    int tx_na, retrans_na; /* some rank could not count them */
} ar_stat_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double frac = pos - (double)i;
    if (i + 1 >= n)
        return sorted[n - 1];
    return sorted[i] + frac * (sorted[i + 1] - sorted[i]);
}

/* Reads every rank's records: recs[r] holds nrecs entries. */
static int load_records(const char *dir, int nranks, int nsizes, int nalgos,
                        uint64_t nrecs, ar_rec_t **recs)
{
    for (int r = 0; r < nranks; r++) {
        char path[PATH_MAX + 32];
        ar_file_hdr_t h;
        FILE *f;
        snprintf(path, sizeof(path), "%s/rank-%d.rec", dir, r);
        f = fopen(path, "rb");
        if (f == NULL) {
            fprintf(stderr,
                    "incoll bench allreduce: rank %d left no records "
                    "(%s: %s)\n",
                    r, path, strerror(errno));
            return -1;
        }
        recs[r] = calloc(nrecs, sizeof(ar_rec_t));
        if (recs[r] == NULL || fread(&h, sizeof(h), 1, f) != 1 ||
            h.magic != AR_MAGIC || h.nsizes != (uint32_t)nsizes ||
            h.nalgos != (uint32_t)nalgos || h.nrecs != nrecs ||
            fread(recs[r], sizeof(ar_rec_t), nrecs, f) != nrecs) {
            fprintf(stderr,
                    "incoll bench allreduce: %s is not what rank %d "
                    "should have written\n",
                    path, r);
            fclose(f);
            return -1;
        }
        fclose(f);
    }
    return 0;
}

/*
 * stats[s * nalgos + algo index] from the records. Every rank ran the same
 * operations in the same order, so position p of a size's block names the
 * same operation on every rank.
 */
static int compute_stats(const ar_opts_t *o, const size_t *sizes, int nsizes,
                         int nranks, ar_rec_t **recs, ar_stat_t *stats)
{
    uint64_t base = 0;
    for (int s = 0; s < nsizes; s++) {
        int iters = iters_for(o, sizes[s]);
        uint64_t nops = (uint64_t)iters * (uint64_t)nactive(o, sizes[s]);
        size_t nsamp = (size_t)iters * (size_t)nranks;
        double *samp = malloc((size_t)o->nalgos * nsamp * sizeof(double));
        double *lat =
            calloc((size_t)o->nalgos * (size_t)nranks, sizeof(double));
        size_t *ns = calloc((size_t)o->nalgos, sizeof(size_t));
        if (samp == NULL || lat == NULL || ns == NULL) {
            free(samp);
            free(lat);
            free(ns);
            return -1;
        }
        /* iters stays 0 for an algorithm that did not run at this size. */
        for (int ai = 0; ai < o->nalgos; ai++) {
            memset(&stats[s * o->nalgos + ai], 0, sizeof(ar_stat_t));
            if (active(o, ai, sizes[s]))
                stats[s * o->nalgos + ai].iters = iters;
        }
        for (uint64_t p = base; p < base + nops; p++) {
            uint32_t ai = recs[0][p].algo_idx;
            ar_stat_t *st;
            uint64_t first = UINT64_MAX;
            if (ai >= (uint32_t)o->nalgos || !active(o, (int)ai, sizes[s])) {
                fprintf(stderr, "incoll bench allreduce: corrupt records\n");
                free(samp);
                free(lat);
                free(ns);
                return -1;
            }
            st = &stats[s * o->nalgos + (int)ai];
            for (int r = 0; r < nranks; r++) {
                const ar_rec_t *rc = &recs[r][p];
                if (rc->algo_idx != ai || rc->iter != recs[0][p].iter) {
                    fprintf(stderr,
                            "incoll bench allreduce: rank %d ran its "
                            "operations in another order than rank 0\n",
                            r);
                    free(samp);
                    free(lat);
                    free(ns);
                    return -1;
                }
                if (rc->start_ns < first)
                    first = rc->start_ns;
                lat[(size_t)ai * (size_t)nranks + (size_t)r] +=
                    (double)(rc->end_ns - rc->start_ns);
                if (rc->tx_bytes == AR_NA) {
                    st->tx_na = 1;
                } else {
                    st->tx_bytes += (double)rc->tx_bytes;
                    st->tx_packets += (double)rc->tx_packets;
                }
                st->cpu_us += (double)rc->cpu_ns / 1e3;
                if (rc->retrans == AR_NA)
                    st->retrans_na = 1;
                else
                    st->retrans += (double)rc->retrans;
            }
            for (int r = 0; r < nranks; r++)
                samp[(size_t)ai * nsamp + ns[ai]++] =
                    (double)(recs[r][p].end_ns - first) / 1e3;
        }
        for (int ai = 0; ai < o->nalgos; ai++) {
            ar_stat_t *st = &stats[s * o->nalgos + ai];
            double *sp = samp + (size_t)ai * nsamp, sum = 0;
            if (st->iters == 0)
                continue;
            st->min_us = INFINITY;
            for (int r = 0; r < nranks; r++) {
                double l =
                    lat[(size_t)ai * (size_t)nranks + (size_t)r] / iters / 1e3;
                sum += l;
                if (l < st->min_us)
                    st->min_us = l;
                if (l > st->max_us)
                    st->max_us = l;
            }
            st->avg_us = sum / nranks;
            st->bw_MBps = st->avg_us > 0 ? (double)sizes[s] / st->avg_us : 0;
            st->tx_bytes = st->tx_na ? NAN : st->tx_bytes / (double)nsamp;
            st->tx_packets = st->tx_na ? NAN : st->tx_packets / (double)nsamp;
            st->cpu_us /= (double)nsamp;
            st->retrans = st->retrans_na ? NAN : st->retrans / (double)nsamp;
            qsort(sp, ns[ai], sizeof(double), cmp_double);
            if (ns[ai] > 0) {
                st->spread[0] = sp[0];
                st->spread[1] = quantile(sp, ns[ai], 0.25);
                st->spread[2] = quantile(sp, ns[ai], 0.5);
                st->spread[3] = quantile(sp, ns[ai], 0.75);
                st->spread[4] = sp[ns[ai] - 1];
            }
        }
        free(samp);
        free(lat);
        free(ns);
        base += nops;
    }
    return 0;
}

/* Ping-pong bandwidth by size, from `incoll bench pingpong --csv`. */
typedef struct {
    int n;
    size_t bytes[64];
    double bw[64];
} ar_ref_t;

static int load_reference(const char *path, ar_ref_t *ref)
{
    char line[512];
    FILE *f = fopen(path, "r");
    memset(ref, 0, sizeof(*ref));
    if (f == NULL) {
        fprintf(stderr, "incoll bench allreduce: --reference %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    if (fgets(line, sizeof(line), f) == NULL ||
        strncmp(line, "bytes,iters,avg_us,min_us,max_us,bw_MBps,", 41) != 0) {
        fprintf(stderr,
                "incoll bench allreduce: --reference %s is not a "
                "`bench pingpong --csv` file\n",
                path);
        fclose(f);
        return -1;
    }
    while (fgets(line, sizeof(line), f) && ref->n < 64) {
        size_t b;
        double bw;
        if (sscanf(line, "%zu,%*d,%*f,%*f,%*f,%lf", &b, &bw) == 2) {
            ref->bytes[ref->n] = b;
            ref->bw[ref->n++] = bw;
        }
    }
    fclose(f);
    return 0;
}

/* Ping-pong bandwidth at bytes, or 0. */
static double ref_bw(const ar_ref_t *ref, size_t bytes)
{
    for (int i = 0; ref && i < ref->n; i++)
        if (ref->bytes[i] == bytes)
            return ref->bw[i];
    return 0;
}

/* Index of the inc algorithm in o->algos, or -1. */
static int inc_index(const ar_opts_t *o)
{
    for (int i = 0; i < o->nalgos; i++)
        if (o->algos[i] == INCOLL_ALGO_INC)
            return i;
    return -1;
}

/* Index of the mpi baseline in o->algos, or -1. */
static int mpi_index(const ar_opts_t *o)
{
    for (int i = 0; i < o->nalgos; i++)
        if (o->algos[i] == AR_ALGO_MPI)
            return i;
    return -1;
}

/* A counter column: "-" when it was not measured. */
static const char *num_str(double v, int decimals, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.*f", decimals, v);
    return buf;
}

/* Index of mpi-layer in o->algos, or -1. */
static int layer_index(const ar_opts_t *o)
{
    for (int i = 0; i < o->nalgos; i++)
        if (o->algos[i] == AR_ALGO_MPI_LAYER)
            return i;
    return -1;
}

/* The host-based algorithm (the MPI library's own included) with the
 * lowest latency at size s, or -1. */
static int best_host(const ar_opts_t *o, const ar_stat_t *stats, int s)
{
    int best = -1;
    for (int i = 0; i < o->nalgos; i++) {
        if (o->algos[i] == INCOLL_ALGO_INC ||
            o->algos[i] == AR_ALGO_MPI_LAYER ||
            stats[s * o->nalgos + i].iters == 0)
            continue;
        if (best < 0 || stats[s * o->nalgos + i].avg_us <
                            stats[s * o->nalgos + best].avg_us)
            best = i;
    }
    return best;
}

static void describe_fabric(const bench_fabric_t *f, char *buf, size_t len)
{
    char rate[32];
    if (f->emulated)
        snprintf(buf, len,
                 "%d hosts (radix %d, %d level%s), emulated links of "
                 "%s each way, non-blocking uplinks",
                 f->hosts, f->radix, f->levels, f->levels == 1 ? "" : "s",
                 emu_rate_str(f->link_rate, rate, sizeof(rate)));
    else
        snprintf(buf, len,
                 "%d hosts (radix %d, %d level%s), loopback fabric "
                 "(no link rate: every rank on 127.0.0.1)",
                 f->hosts, f->radix, f->levels, f->levels == 1 ? "" : "s");
}

/* The MPI layer's own table: MPI_Allreduce through libincoll_mpi against
 * libincoll's own call (its overhead) and the MPI library's (its gain). */
static void print_layer_table(const ar_opts_t *o, const size_t *sizes,
                              int nsizes, const ar_stat_t *stats)
{
    int inc = inc_index(o), mpi = mpi_index(o), lay = layer_index(o);
    char sz[32];

    printf("\n# mpi-layer: MPI_Allreduce through libincoll_mpi; layer/inc: "
           "its latency over libincoll's own call's (1.00 = no overhead); "
           "mpi/layer: the MPI library's own over it (> 1: the layer is "
           "faster)\n");
    printf("%9s %6s %10s %13s %9s %10s %9s\n", "bytes", "", "inc(us)",
           "mpi-layer(us)", "layer/inc", "mpi(us)", "mpi/layer");
    for (int s = 0; s < nsizes; s++) {
        const ar_stat_t *sl = &stats[s * o->nalgos + lay];
        const ar_stat_t *si = inc >= 0 ? &stats[s * o->nalgos + inc] : NULL;
        const ar_stat_t *sm = mpi >= 0 ? &stats[s * o->nalgos + mpi] : NULL;
        if (sl->iters == 0)
            continue;
        printf("%9zu %6s", sizes[s], bench_size_str(sizes[s], sz, sizeof(sz)));
        if (si && si->iters > 0)
            printf(" %10.1f", si->avg_us);
        else
            printf(" %10s", "-");
        printf(" %13.1f", sl->avg_us);
        if (si && si->iters > 0 && si->avg_us > 0)
            printf(" %8.3fx", sl->avg_us / si->avg_us);
        else
            printf(" %9s", "-");
        if (sm && sm->iters > 0 && sl->avg_us > 0)
            printf(" %10.1f %8.2fx\n", sm->avg_us, sm->avg_us / sl->avg_us);
        else
            printf(" %10s %9s\n", "-", "-");
    }
}

static void print_table(const ar_opts_t *o, const bench_fabric_t *f,
                        const size_t *sizes, int nsizes, const ar_stat_t *stats,
                        const ar_ref_t *ref)
{
    char desc[256], sz[32], tx[32], pk[32];
    int inc = inc_index(o), mpi = mpi_index(o);
    double link_MBps = (double)f->link_rate / 8e6;

    describe_fabric(f, desc, sizeof(desc));
    printf("# incoll bench allreduce: %s\n", desc);
    printf("# float32 sum; algorithms run side by side, alternating every "
           "iteration; every result verified\n");
    printf("# latency: per rank averaged over iterations, then avg/min/max "
           "over ranks (OSU); MB/s = bytes / avg latency\n");
    printf(
        "# tx/host: UDP payload bytes a host sent per operation, pkts: "
        "datagrams (socket counters); cpu: user+sys per rank and operation\n");
    if (layer_index(o) >= 0)
        printf("# mpi-layer: the same MPI_Allreduce through libincoll_mpi's "
               "offload path (as a preloaded program makes it), on inc's "
               "libincoll communicator; its tx/host and pkts are inc's "
               "socket counters\n");
    if (mpi >= 0)
        printf("# mpi: the MPI library's own MPI_Allreduce (ranks under "
               "mpirun); its tx/host and pkts are %s\n",
               f->emulated ? "the frames the host sent on its emulated link "
                             "(TCP/IP headers and acks included)"
                           : "not measured on loopback (-): the ranks share "
                             "one interface and MPI has no socket of ours");
    printf("# spread: time from an operation's first start to each rank's "
           "completion, over ranks and iterations: min/p25/p50/p75/max\n");
    printf("%-12s %9s %6s %10s %10s %10s %9s %10s %7s %8s  %s\n", "algo",
           "bytes", "iters", "avg(us)", "min(us)", "max(us)", "MB/s", "tx/host",
           "pkts", "cpu(us)", "spread min/p25/p50/p75/max (us)");
    for (int s = 0; s < nsizes; s++) {
        for (int ai = 0; ai < o->nalgos; ai++) {
            const ar_stat_t *st = &stats[s * o->nalgos + ai];
            if (st->iters == 0)
                continue;
            printf("%-12s %9zu %6d %10.1f %10.1f %10.1f %9.2f %10s %7s "
                   "%8.1f  %.0f/%.0f/%.0f/%.0f/%.0f\n",
                   algo_str(o->algos[ai]), sizes[s], st->iters, st->avg_us,
                   st->min_us, st->max_us, st->bw_MBps,
                   num_str(st->tx_bytes, 0, tx, sizeof(tx)),
                   num_str(st->tx_packets, 1, pk, sizeof(pk)), st->cpu_us,
                   st->spread[0], st->spread[1], st->spread[2], st->spread[3],
                   st->spread[4]);
        }
    }
    if (layer_index(o) >= 0)
        print_layer_table(o, sizes, nsizes, stats);
    if (inc < 0 || o->nalgos < 2)
        return;
    printf("\n# speedup of inc over the best host-based algorithm at each size "
           "(ratio of avg latencies)%s%s\n",
           f->link_rate ? "; link%: inc bandwidth / link rate" : "",
           ref ? "; pp%: inc bandwidth / ping-pong bandwidth" : "");
    printf("%9s %6s %10s %-13s %10s %8s %9s", "bytes", "", "inc(us)",
           "best host", "(us)", "speedup", "inc MB/s");
    if (mpi >= 0)
        printf(" %10s %7s", "mpi(us)", "vs mpi");
    if (f->link_rate)
        printf(" %6s", "link%");
    if (ref)
        printf(" %6s", "pp%");
    printf("\n");
    for (int s = 0; s < nsizes; s++) {
        int b = best_host(o, stats, s);
        const ar_stat_t *si = &stats[s * o->nalgos + inc];
        const ar_stat_t *sb = &stats[s * o->nalgos + (b < 0 ? 0 : b)];
        if (b < 0 || si->iters == 0)
            continue;
        printf("%9zu %6s %10.1f %-13s %10.1f %7.2fx %9.2f", sizes[s],
               bench_size_str(sizes[s], sz, sizeof(sz)), si->avg_us,
               algo_str(o->algos[b]), sb->avg_us,
               si->avg_us > 0 ? sb->avg_us / si->avg_us : 0, si->bw_MBps);
        if (mpi >= 0) {
            const ar_stat_t *sm = &stats[s * o->nalgos + mpi];
            if (sm->iters > 0)
                printf(" %10.1f %6.2fx", sm->avg_us,
                       si->avg_us > 0 ? sm->avg_us / si->avg_us : 0);
            else
                printf(" %10s %7s", "-", "-");
        }
        if (f->link_rate)
            printf(" %5.1f%%", 100.0 * si->bw_MBps / link_MBps);
        if (ref) {
            double pp = ref_bw(ref, sizes[s]);
            if (pp > 0)
                printf(" %5.1f%%", 100.0 * si->bw_MBps / pp);
            else
                printf(" %6s", "-");
        }
        printf("\n");
    }
}

/* Writes out and closes a CSV file: 0, or -1 after a message. */
static int close_csv(FILE *fp, const char *path)
{
    if (fclose(fp) != 0) {
        fprintf(stderr, "incoll bench allreduce: cannot write %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    return 0;
}

static int write_csv(const char *path, const ar_opts_t *o,
                     const bench_fabric_t *f, const size_t *sizes, int nsizes,
                     const ar_stat_t *stats)
{
    FILE *fp = bench_fopen_out(path, "bench allreduce");
    int inc = inc_index(o);
    if (fp == NULL)
        return -1;
    fprintf(fp,
            "algo,bytes,iters,avg_us,min_us,max_us,bw_MBps,"
            "tx_bytes_per_op,tx_packets_per_op,cpu_us_per_op,"
            "retransmits_per_op,spread_min_us,spread_p25_us,"
            "spread_p50_us,spread_p75_us,spread_max_us,"
            "speedup_vs_best_host,best_host,hosts,emulated,link_rate_bps\n");
    for (int s = 0; s < nsizes; s++) {
        int b = inc >= 0 ? best_host(o, stats, s) : -1;
        for (int ai = 0; ai < o->nalgos; ai++) {
            const ar_stat_t *st = &stats[s * o->nalgos + ai];
            if (st->iters == 0)
                continue;
            char tx[32], pk[32], rt[32];
            /* Counters not measured are empty fields. */
            if (isnan(st->tx_bytes))
                tx[0] = pk[0] = '\0';
            else {
                snprintf(tx, sizeof(tx), "%.1f", st->tx_bytes);
                snprintf(pk, sizeof(pk), "%.2f", st->tx_packets);
            }
            if (isnan(st->retrans))
                rt[0] = '\0';
            else
                snprintf(rt, sizeof(rt), "%.3f", st->retrans);
            fprintf(fp,
                    "%s,%zu,%d,%.3f,%.3f,%.3f,%.4f,%s,%s,%.3f,%s,"
                    "%.3f,%.3f,%.3f,%.3f,%.3f,",
                    algo_str(o->algos[ai]), sizes[s], st->iters, st->avg_us,
                    st->min_us, st->max_us, st->bw_MBps, tx, pk, st->cpu_us, rt,
                    st->spread[0], st->spread[1], st->spread[2], st->spread[3],
                    st->spread[4]);
            if (ai == inc && b >= 0)
                fprintf(fp, "%.4f,%s,",
                        stats[s * o->nalgos + b].avg_us / st->avg_us,
                        algo_str(o->algos[b]));
            else
                fprintf(fp, ",,");
            fprintf(fp, "%d,%d,%" PRIu64 "\n", f->hosts, f->emulated,
                    f->link_rate);
        }
    }
    return close_csv(fp, path);
}

static int write_plot(const char *path, const ar_opts_t *o,
                      const bench_fabric_t *f, const size_t *sizes, int nsizes,
                      const ar_stat_t *stats, const ar_ref_t *ref)
{
    plot_series_t series[AR_MAX_ALGOS];
    double *buf =
        calloc((size_t)nsizes * 3 * (size_t)o->nalgos, sizeof(double));
    char title[320], desc[256], ref_name[64];
    plot_opts_t po;
    int ret;

    if (buf == NULL)
        return -1;
    for (int ai = 0; ai < o->nalgos; ai++) {
        double *x = buf + (size_t)ai * 3 * (size_t)nsizes;
        int n = 0;
        series[ai].name = algo_str(o->algos[ai]);
        series[ai].bytes = x;
        series[ai].lat_us = x + nsizes;
        series[ai].bw_MBps = x + 2 * nsizes;
        for (int s = 0; s < nsizes; s++) {
            if (stats[s * o->nalgos + ai].iters == 0)
                continue;
            x[n] = (double)sizes[s];
            x[nsizes + n] = stats[s * o->nalgos + ai].avg_us;
            x[2 * nsizes + n] = stats[s * o->nalgos + ai].bw_MBps;
            n++;
        }
        series[ai].n = n;
    }
    describe_fabric(f, desc, sizeof(desc));
    snprintf(title, sizeof(title), "incoll allreduce (float32 sum): %s", desc);
    memset(&po, 0, sizeof(po));
    po.title = title;
    po.link_MBps = (double)f->link_rate / 8e6;
    if (ref && ref->n > 0) {
        /* Ping-pong at its largest size: the rate a link really delivers
         * (smaller messages can beat it, see docs/benchmarks.md). */
        char sz[32];
        int last = 0;
        for (int i = 1; i < ref->n; i++)
            if (ref->bytes[i] > ref->bytes[last])
                last = i;
        po.ref_MBps = ref->bw[last];
        snprintf(ref_name, sizeof(ref_name), "ping-pong at %s (%.3g MB/s)",
                 bench_size_str(ref->bytes[last], sz, sizeof(sz)),
                 ref->bw[last]);
        po.ref_name = ref_name;
    }
    ret = bench_plot_write(path, &po, series, o->nalgos);
    free(buf);
    return ret;
}

/*
 * Gets the fabric (bench_fabric_open: the caller closes it, also on
 * failure), runs the ranks on it and reads their records into *recs_p
 * (f->hosts arrays the caller frees). Returns 0, or the exit code (1, or
 * 130 when interrupted) after a message.
 */
static int run_on_fabric(const ar_opts_t *o, const size_t *sizes, int nsizes,
                         bench_fabric_t *f, ar_rec_t ***recs_p)
{
    const char *who = "bench allreduce";
    bench_fabric_opts_t fo;
    uint64_t nrecs = 0;
    int rc;

    *recs_p = NULL;
    memset(&fo, 0, sizeof(fo));
    fo.fabric_dir = o->fabric;
    fo.emulate = o->emulate;
    fo.hosts = o->hosts;
    fo.radix = o->radix;
    fo.link_rate = o->link_rate;
    fo.keep = o->keep;
    fo.who = who;
    if (bench_fabric_open(f, &fo) != 0)
        return bench_interrupted() ? 130 : 1;
    if (o->fabric && f->hosts != o->hosts) {
        fprintf(stderr, "incoll %s: the fabric in %s has %d hosts, not -n %d\n",
                who, f->dir, f->hosts, o->hosts);
        return 1;
    }
    {
        char out[PATH_MAX], progress[PATH_MAX + 16], sz[64], iters[16],
            warm[16], algos[128], timeout[16];
        char *args[24];
        int a = 0;
        char lo[24], hi[24];
        snprintf(out, sizeof(out), "%s", f->work);
        snprintf(progress, sizeof(progress), "%s/progress", f->work);
        snprintf(sz, sizeof(sz), "%s:%s",
                 bench_size_str(o->min_size, lo, sizeof(lo)),
                 bench_size_str(o->max_size, hi, sizeof(hi)));
        snprintf(iters, sizeof(iters), "%d", o->iters);
        snprintf(warm, sizeof(warm), "%d", o->warmup);
        snprintf(timeout, sizeof(timeout), "%d", o->timeout_s);
        algos_str(o, algos, sizeof(algos));
        args[a++] = "_allreduce";
        args[a++] = "--sizes";
        args[a++] = sz;
        args[a++] = "--algos";
        args[a++] = algos;
        if (o->iters > 0) {
            args[a++] = "--iters";
            args[a++] = iters;
        }
        if (o->warmup >= 0) {
            args[a++] = "--warmup";
            args[a++] = warm;
        }
        args[a++] = "--out";
        args[a++] = out;
        args[a++] = "--progress";
        args[a++] = progress;
        args[a] = NULL;
        {
            char desc[256];
            describe_fabric(f, desc, sizeof(desc));
            fprintf(stderr, "incoll %s: %s; sizes %s, algorithms %s\n", who,
                    desc, sz, algos);
        }
        if (shm_barrier_create(f->work) != 0) {
            fprintf(stderr, "incoll %s: cannot create %s/barrier: %s\n", who,
                    f->work, strerror(errno));
            return 1;
        }
        /* With mpi the ranks run under mpirun, in the MPI worker. */
        rc = has_mpi(o) ? bench_launch_mpi(f, args, progress, o->timeout_s)
                        : bench_launch(f, args, progress, o->timeout_s);
        if (bench_interrupted()) {
            fprintf(stderr, "incoll %s: interrupted; tearing down\n", who);
            return 130;
        }
        if (rc != 0) {
            fprintf(stderr,
                    "incoll %s: the run failed (incoll %s exited %d; "
                    "the failing rank said why above): no results\n",
                    who, has_mpi(o) ? "mpirun" : "run", rc);
            return 1;
        }
    }
    for (int s = 0; s < nsizes; s++)
        nrecs +=
            (uint64_t)iters_for(o, sizes[s]) * (uint64_t)nactive(o, sizes[s]);
    *recs_p = calloc((size_t)f->hosts, sizeof(**recs_p));
    if (*recs_p == NULL ||
        load_records(f->work, f->hosts, nsizes, o->nalgos, nrecs, *recs_p) != 0)
        return 1;
    return 0;
}

/* ---- --loss: goodput and latency against the drop rate --------------- */

/* One (rate, size, algorithm): every rank's latency of every timed
 * operation, over all rounds. */
typedef struct {
    double *lat_us;
    size_t n, cap;
    double retrans; /* summed over rank-operations */
    int retrans_na;
} ar_loss_acc_t;

typedef struct {
    double avg_us, p50_us, p99_us, bw_MBps, share, retrans;
    size_t n;
} ar_loss_stat_t;

/* Where rate li, size s and algorithm ai are in the per-rate arrays. */
static size_t loss_idx(const ar_opts_t *o, int nsizes, int li, int s, int ai)
{
    return ((size_t)li * (size_t)nsizes + (size_t)s) * (size_t)o->nalgos +
           (size_t)ai;
}

/* Adds the records of one run at rate index li into
 * acc[loss_idx(li, s, ai)]. */
static int loss_accumulate(const ar_opts_t *o, const size_t *sizes, int nsizes,
                           int nranks, ar_rec_t **recs, int li,
                           ar_loss_acc_t *acc)
{
    uint64_t base = 0;
    for (int s = 0; s < nsizes; s++) {
        uint64_t nops =
            (uint64_t)iters_for(o, sizes[s]) * (uint64_t)nactive(o, sizes[s]);
        for (uint64_t p = base; p < base + nops; p++) {
            uint32_t ai = recs[0][p].algo_idx;
            ar_loss_acc_t *a;
            if (ai >= (uint32_t)o->nalgos)
                return -1;
            a = &acc[loss_idx(o, nsizes, li, s, (int)ai)];
            for (int r = 0; r < nranks; r++) {
                const ar_rec_t *rc = &recs[r][p];
                if (a->n == a->cap) {
                    size_t ncap = a->cap ? 2 * a->cap : 256;
                    double *nl = realloc(a->lat_us, ncap * sizeof(double));
                    if (nl == NULL)
                        return -1;
                    a->lat_us = nl;
                    a->cap = ncap;
                }
                a->lat_us[a->n++] = (double)(rc->end_ns - rc->start_ns) / 1e3;
                if (rc->retrans == AR_NA || o->algos[ai] != INCOLL_ALGO_INC)
                    a->retrans_na = 1;
                else
                    a->retrans += (double)rc->retrans;
            }
        }
        base += nops;
    }
    return 0;
}

static void print_loss_table(const ar_opts_t *o, const bench_fabric_t *f,
                             const size_t *sizes, int nsizes, int base_li,
                             const ar_loss_stat_t *st)
{
    char desc[256], rt[32];
    describe_fabric(f, desc, sizeof(desc));
    printf("# incoll bench allreduce --loss: %s\n", desc);
    printf("# every daemon and host drops what it sends with the given "
           "probability (INCOLL_FAULT_DROP)%s; %d round%s, rates "
           "interleaved; every result verified\n",
           o->burst > 1 ? ", in bursts (INCOLL_FAULT_BURST)" : "", o->rounds,
           o->rounds == 1 ? "" : "s");
    if (o->burst > 1)
        printf("# mean burst length %g datagrams\n", o->burst);
    printf("# latency of every rank's every operation: avg, p50, p99; "
           "goodput MB/s = bytes / avg latency; share: of the same "
           "algorithm's goodput at loss %g%%; retr/op: inc's "
           "retransmissions (timeout, fast and probe) per rank and "
           "operation\n",
           100 * o->loss[base_li]);
    printf("%8s %-12s %9s %7s %11s %11s %11s %9s %7s %8s\n", "loss(%)", "algo",
           "bytes", "samples", "avg(us)", "p50(us)", "p99(us)", "MB/s", "share",
           "retr/op");
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < o->nalgos; ai++)
            for (int li = 0; li < o->nloss; li++) {
                const ar_loss_stat_t *x = &st[loss_idx(o, nsizes, li, s, ai)];
                if (x->n == 0)
                    continue;
                printf("%8.2f %-12s %9zu %7zu %11.1f %11.1f %11.1f %9.2f "
                       "%6.1f%% %8s\n",
                       100 * o->loss[li], algo_str(o->algos[ai]), sizes[s],
                       x->n, x->avg_us, x->p50_us, x->p99_us, x->bw_MBps,
                       100 * x->share, num_str(x->retrans, 2, rt, sizeof(rt)));
            }
}

static int write_loss_csv(const char *path, const ar_opts_t *o,
                          const bench_fabric_t *f, const size_t *sizes,
                          int nsizes, const ar_loss_stat_t *st)
{
    FILE *fp = bench_fopen_out(path, "bench allreduce");
    if (fp == NULL)
        return -1;
    fprintf(fp, "loss,burst,algo,bytes,samples,avg_us,p50_us,p99_us,"
                "goodput_MBps,goodput_share,retransmits_per_op,hosts,"
                "emulated,link_rate_bps\n");
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < o->nalgos; ai++)
            for (int li = 0; li < o->nloss; li++) {
                const ar_loss_stat_t *x = &st[loss_idx(o, nsizes, li, s, ai)];
                char rt[32];
                if (x->n == 0)
                    continue;
                if (isnan(x->retrans))
                    rt[0] = '\0';
                else
                    snprintf(rt, sizeof(rt), "%.3f", x->retrans);
                fprintf(fp,
                        "%g,%g,%s,%zu,%zu,%.3f,%.3f,%.3f,%.4f,%.4f,%s,%d,%d,"
                        "%" PRIu64 "\n",
                        o->loss[li], o->burst > 1 ? o->burst : 1,
                        algo_str(o->algos[ai]), sizes[s], x->n, x->avg_us,
                        x->p50_us, x->p99_us, x->bw_MBps, x->share, rt,
                        f->hosts, f->emulated, f->link_rate);
            }
    return close_csv(fp, path);
}

static int write_loss_plot(const char *path, const ar_opts_t *o,
                           const bench_fabric_t *f, const size_t *sizes,
                           int nsizes, const ar_loss_stat_t *st)
{
    int ns = 0, ret;
    size_t cap = (size_t)nsizes * (size_t)o->nalgos;
    plot_xy_series_t *series = calloc(cap, sizeof(*series));
    double *buf = calloc(cap * 2 * (size_t)o->nloss, sizeof(double));
    char(*names)[48] = calloc(cap, sizeof(*names));
    char title[400], desc[256], sz[32];

    if (series == NULL || buf == NULL || names == NULL) {
        free(series);
        free(buf);
        free(names);
        return -1;
    }
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < o->nalgos; ai++) {
            double *x = buf + (size_t)ns * 2 * (size_t)o->nloss;
            int n = 0;
            for (int li = 0; li < o->nloss; li++) {
                const ar_loss_stat_t *v = &st[loss_idx(o, nsizes, li, s, ai)];
                if (v->n == 0)
                    continue;
                x[n] = 100 * o->loss[li];
                x[o->nloss + n] = 100 * v->share;
                n++;
            }
            if (n == 0)
                continue;
            snprintf(names[ns], sizeof(names[ns]), "%s %s",
                     algo_str(o->algos[ai]),
                     bench_size_str(sizes[s], sz, sizeof(sz)));
            series[ns].name = names[ns];
            series[ns].n = n;
            series[ns].x = x;
            series[ns].y = x + o->nloss;
            ns++;
        }
    describe_fabric(f, desc, sizeof(desc));
    snprintf(title, sizeof(title), "incoll allreduce goodput under loss%s: %s",
             o->burst > 1 ? " (bursts)" : "", desc);
    ret = bench_plot_xy_write(path, title, "loss rate (% of datagrams dropped)",
                              "goodput (% of the same algorithm's at the "
                              "lowest rate)",
                              series, ns);
    free(series);
    free(buf);
    free(names);
    return ret;
}

/* Sets the fault knobs every process started from now on inherits. */
static void loss_env(const ar_opts_t *o, double p, int round)
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
 * `--loss`: for every round and every rate in turn, a fabric (brought up
 * with the rate in the environment, so its daemons drop too, or the one
 * of --fabric), the ranks, and their records pooled per rate; then the
 * table, the CSV and the plot of goodput vs loss rate.
 */
static int run_loss(const ar_opts_t *o, const size_t *sizes, int nsizes)
{
    size_t nacc = (size_t)o->nloss * (size_t)nsizes * (size_t)o->nalgos;
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
            fprintf(stderr,
                    "incoll bench allreduce: round %d/%d, loss %g%%%s\n",
                    round + 1, o->rounds, 100 * o->loss[li],
                    o->burst > 1 ? " in bursts" : "");
            loss_env(o, o->loss[li], round);
            memset(&f, 0, sizeof(f));
            rc = run_on_fabric(o, sizes, nsizes, &f, &recs);
            if (rc == 0 &&
                loss_accumulate(o, sizes, nsizes, f.hosts, recs, li, acc) != 0)
                rc = 1;
            if (recs)
                for (int r = 0; r < f.hosts; r++)
                    free(recs[r]);
            free(recs);
            last = f; /* its shape, for the table's heading */
            bench_fabric_close(&f);
            if (rc != 0) {
                ret = rc;
                goto out;
            }
        }
    }
    for (size_t i = 0; i < nacc; i++) {
        ar_loss_acc_t *a = &acc[i];
        double sum = 0;
        if (a->n == 0)
            continue;
        qsort(a->lat_us, a->n, sizeof(double), cmp_double);
        for (size_t k = 0; k < a->n; k++)
            sum += a->lat_us[k];
        st[i].n = a->n;
        st[i].avg_us = sum / (double)a->n;
        st[i].p50_us = quantile(a->lat_us, a->n, 0.5);
        st[i].p99_us = quantile(a->lat_us, a->n, 0.99);
        st[i].retrans = a->retrans_na ? NAN : a->retrans / (double)a->n;
    }
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < o->nalgos; ai++) {
            size_t b = loss_idx(o, nsizes, base_li, s, ai);
            for (int li = 0; li < o->nloss; li++) {
                ar_loss_stat_t *x = &st[loss_idx(o, nsizes, li, s, ai)];
                if (x->n == 0)
                    continue;
                x->bw_MBps = (double)sizes[s] / x->avg_us;
                x->share = st[b].avg_us > 0 ? st[b].avg_us / x->avg_us : 0;
            }
        }
    print_loss_table(o, &last, sizes, nsizes, base_li, st);
    fflush(stdout);
    ret = 0;
    if (o->csv) {
        if (write_loss_csv(o->csv, o, &last, sizes, nsizes, st) != 0)
            ret = 1;
        else
            fprintf(stderr, "incoll bench allreduce: wrote %s\n", o->csv);
    }
    if (o->plot) {
        if (write_loss_plot(o->plot, o, &last, sizes, nsizes, st) != 0)
            ret = 1;
        else
            fprintf(stderr, "incoll bench allreduce: wrote %s\n", o->plot);
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

int bench_allreduce_main(int argc, char **argv)
{
    const char *who = "bench allreduce";
    bench_fabric_t f;
    ar_opts_t o;
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
    rc = parse_args(argc, argv, &o, who);
    if (rc == 1)
        return 0;
    if (rc != 0)
        return 2;
    if (o.reference && load_reference(o.reference, &ref) != 0)
        return 2;
    nsizes = bench_size_list(o.min_size, o.max_size, &sizes);
    if (nsizes <= 0)
        return 1;
    if (o.dry_run) {
        char al[128];
        algos_str(&o, al, sizeof(al));
        printf("hosts=%d radix=%d emulate=%d link_rate=%" PRIu64
               " fabric=%s algos=%s csv=%s plot=%s\n",
               o.hosts, o.radix, o.emulate, o.link_rate,
               o.fabric ? o.fabric : "-", al, o.csv ? o.csv : "-",
               o.plot ? o.plot : "-");
        for (int s = 0; s < nsizes; s++)
            printf("size=%zu iters=%d warmup=%d\n", sizes[s],
                   iters_for(&o, sizes[s]), warmup_for(&o, sizes[s]));
        free(sizes);
        return 0;
    }
    if (has_mpi(&o)) {
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
    stats = calloc((size_t)nsizes * (size_t)o.nalgos, sizeof(*stats));
    if (stats == NULL ||
        compute_stats(&o, sizes, nsizes, f.hosts, recs, stats) != 0)
        goto out;
    print_table(&o, &f, sizes, nsizes, stats, o.reference ? &ref : NULL);
    fflush(stdout);
    ret = 0;
    if (o.csv) {
        if (write_csv(o.csv, &o, &f, sizes, nsizes, stats) != 0)
            ret = 1;
        else
            fprintf(stderr, "incoll %s: wrote %s\n", who, o.csv);
    }
    if (o.plot) {
        if (write_plot(o.plot, &o, &f, sizes, nsizes, stats,
                       o.reference ? &ref : NULL) != 0)
            ret = 1;
        else
            fprintf(stderr, "incoll %s: wrote %s\n", who, o.plot);
    }
out:
    if (recs)
        for (int r = 0; r < f.hosts; r++)
            free(recs[r]);
    free(recs);
    free(stats);
    free(sizes);
    bench_fabric_close(&f);
    if (bench_interrupted() && ret == 0)
        ret = 130;
    return ret;
}
