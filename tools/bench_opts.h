/*
 * The command line of every `incoll bench` benchmark: one option table,
 * one parser, one rule for bad input, in the manner of fabtests' shared
 * option code (every benchmark a small driver over it).
 *
 * BENCH_OPTIONS lists every option any benchmark takes: its id, long name,
 * short letter, kind of value, range, the name of its value in the help
 * and its doc. A benchmark describes itself with a bench_cmd_t: which of
 * the options it takes (a mask of ids), its own defaults and doc lines
 * where they differ, and how its algorithm names are spelt (an
 * enumerator over ids, so the names come from the core's tables in
 * src/core/algo.h and one loop serves parsing, the error message and the
 * help). bench_opts_parse() then fills a bench_opts_t, the same struct
 * for every benchmark, and bench_opts_usage() writes the --help text.
 *
 * One rule for bad input: the parser stops at the first bad option and
 * returns 2 with one line naming the option and the value and saying what
 * it wants ("incoll bench allreduce: --iters wants 1..1000000, not '0'");
 * the drivers print it and exit 2. The checks every benchmark shares
 * (--fabric does not go with --emulate, --link-rate needs --emulate,
 * --plot ends in .png, the largest size) are made here too, so a driver
 * only adds what is its own. tests/test_bench.c drives the parser from a
 * table of good and bad command lines.
 *
 * The parser keeps no state between calls (getopt_long is restarted), so
 * the rank side of a benchmark parses the arguments its driver built with
 * the same table.
 */
#ifndef INCOLL_BENCH_OPTS_H
#define INCOLL_BENCH_OPTS_H

#include "common/fabric_conf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Kinds of option values. */
typedef enum {
    BENCH_ARG_FLAG,   /* no value: sets 1 */
    BENCH_ARG_INT,    /* an integer in [min, max] */
    BENCH_ARG_DOUBLE, /* a number in [min, max] */
    BENCH_ARG_STR,    /* any text */
    BENCH_ARG_SIZES,  /* MIN:MAX or one size, K/M/G suffixes */
    BENCH_ARG_SIZE,   /* one size in [min, max], K/M/G suffixes */
    BENCH_ARG_RATE,   /* a link rate: 100mbit, 1gbit (emu_parse_rate) */
    BENCH_ARG_ALGOS,  /* NAME[:SIZE],...: distinct names of the command */
    BENCH_ARG_LIST,   /* distinct numbers in [min, max], comma-separated */
} bench_arg_t;

/*
 * X(id, long name, short letter or 0, kind, min, max, value name, doc).
 * A doc of NULL hides the option from --help (the rank side's own).
 */
#define BENCH_OPTIONS(X)                                                       \
    X(HOSTS, "hosts", 'n', BENCH_ARG_INT, 1, 4096, "P", "ranks, one per host") \
    X(PPN, "ppn", 0, BENCH_ARG_INT, 1, 256, "K", "ranks per host")             \
    X(FABRIC, "fabric", 0, BENCH_ARG_STR, 0, 0, "DIR",                         \
      "use the running fabric in DIR (from `incoll fabric up`); else one is "  \
      "brought up for the run and always torn down")                           \
    X(EMULATE, "emulate", 0, BENCH_ARG_FLAG, 0, 0, NULL,                       \
      "bring up an emulated fabric: a network namespace per host and "         \
      "switch, veth links shaped to --link-rate (needs root; without root "    \
      "the loopback fabric is used)")                                          \
    X(LINK_RATE, "link-rate", 0, BENCH_ARG_RATE, 0, 0, "R",                    \
      "host link rate, e.g. 100mbit (default: 800 Mbit/s shared by the "       \
      "hosts: 100 for 8, 50 for 16)")                                          \
    X(AN_CPUS, "an-cpus", 0, BENCH_ARG_STR, 0, 0, "LIST",                      \
      "run the fabric's AN daemons only on these CPUs (1, 0-3, 0,2: as "       \
      "taskset -c), as ANs with servers of their own (default: any)")          \
    X(HOST_CPUS, "host-cpus", 0, BENCH_ARG_STR, 0, 0, "LIST",                  \
      "run the ranks only on these CPUs (default: any)")                       \
    X(RADIX, "radix", 0, BENCH_ARG_INT, 2, AGG_RADIX_MAX, "K",                 \
      "switch radix of a fabric brought up")                                   \
    X(SIZES, "sizes", 0, BENCH_ARG_SIZES, 0, 0, "MIN:MAX",                     \
      "bytes, K/M suffixes, doubling")                                         \
    X(BYTES, "bytes", 0, BENCH_ARG_SIZE, 1, 1 << 30, "B",                      \
      "bytes of every operation")                                              \
    X(ALGOS, "algos", 0, BENCH_ARG_ALGOS, 0, 0, "LIST",                        \
      "algorithms, side by side")                                              \
    X(ITERS, "iters", 0, BENCH_ARG_INT, 1, 1000000, "N",                       \
      "timed iterations per size")                                             \
    X(WARMUP, "warmup", 0, BENCH_ARG_INT, 0, 1000000, "N",                     \
      "untimed iterations first (default iters/10)")                           \
    X(SOCKETS, "sockets", 0, BENCH_ARG_INT, 0, 64, "N",                        \
      "hwloc shows each host as N sockets; ranks bound round-robin to the "    \
      "CPUs (socket mode on a one-socket machine)")                            \
    X(PAIR, "pair", 0, BENCH_ARG_STR, 0, 0, "P",                               \
      "same-leaf (default): two hosts under one leaf; cross-leaf: hosts "      \
      "under different leaves; or two ranks A,B")                              \
    X(CSV, "csv", 0, BENCH_ARG_STR, 0, 0, "FILE",                              \
      "write the results as CSV (header row first)")                           \
    X(PLOT, "plot", 0, BENCH_ARG_STR, 0, 0, "FILE.png",                        \
      "latency and bandwidth vs size (gnuplot)")                               \
    X(POOL, "pool", 0, BENCH_ARG_SIZE, 1, 1ull << 34, "B",                     \
      "bytes of source pool the calls walk through")                           \
    X(SECONDS, "seconds", 0, BENCH_ARG_DOUBLE, 0.001, 3600, "S",               \
      "time per contender per row")                                            \
    X(DTYPE, "dtype", 0, BENCH_ARG_STR, 0, 0, "LIST",                          \
      "comma-separated datatypes")                                             \
    X(OP, "op", 0, BENCH_ARG_STR, 0, 0, "NAME", "reduction op")                \
    X(NSRC, "nsrc", 0, BENCH_ARG_STR, 0, 0, "LIST",                            \
      "comma-separated source counts")                                         \
    X(IMPL, "impl", 0, BENCH_ARG_STR, 0, 0, "NAME",                            \
      "force a kernel variant: avx512, avx2, sse2, scalar (default: the best " \
      "this CPU runs)")                                                        \
    X(CALIB, "calib", 0, BENCH_ARG_STR, 0, 0, "FILE",                          \
      "append the simulator's calibration record to FILE")                     \
    X(REFERENCE, "reference", 0, BENCH_ARG_STR, 0, 0, "CSV",                   \
      "ping-pong results (`incoll bench pingpong --csv`) on the same links: "  \
      "adds inc's bandwidth as a share of ping-pong's, and its line to the "   \
      "plot")                                                                  \
    X(LOSS, "loss", 0, BENCH_ARG_LIST, 0, 0.9, "LIST",                         \
      "drop rates, e.g. 0,0.001,0.01,0.05: one run per rate (daemons and "     \
      "hosts drop what they send at that rate, INCOLL_FAULT_DROP), then "      \
      "goodput and p50/p99 latency per rate; --csv and --plot then hold "      \
      "goodput vs loss rate. With --fabric only the ranks drop")               \
    X(BURST, "burst", 0, BENCH_ARG_DOUBLE, 1, 1000, "L",                       \
      "drops in bursts of L datagrams on average (INCOLL_FAULT_BURST; "        \
      "default 1: independent)")                                               \
    X(ROUNDS, "rounds", 0, BENCH_ARG_INT, 1, 100, "N",                         \
      "run the list of rates N times, interleaved, and pool the samples "      \
      "(default 1)")                                                           \
    X(JOBS, "jobs", 0, BENCH_ARG_INT, 1, 64, "J",                              \
      "J jobs at once on the fabric, job j on hosts j, j+J, ... (every job "   \
      "under every leaf, so they share the ANs), each with P/J ranks; then "   \
      "each job's bandwidth, their sum and the least job's share of a fair "   \
      "one")                                                                   \
    X(THREADS, "threads", 0, BENCH_ARG_INT, 1, 64, "N",                        \
      "worker threads of the AN (INCOLL_AGG_THREADS)")                         \
    X(KEEP, "keep", 0, BENCH_ARG_FLAG, 0, 0, NULL,                             \
      "keep the scratch directory (raw records, logs)")                        \
    X(TIMEOUT, "timeout", 0, BENCH_ARG_INT, 1, 1000000, "SEC",                 \
      "stop the ranks after SEC seconds")                                      \
    X(DRY_RUN, "dry-run", 0, BENCH_ARG_FLAG, 0, 0, NULL,                       \
      "print the parsed plan and exit")                                        \
    X(OUT, "out", 0, BENCH_ARG_STR, 0, 0, "DIR", NULL)                         \
    X(GATE, "gate", 0, BENCH_ARG_STR, 0, 0, "DIR", NULL)                       \
    X(PROGRESS, "progress", 0, BENCH_ARG_STR, 0, 0, "FILE", NULL)              \
    X(A, "a", 0, BENCH_ARG_INT, 0, 1 << 20, "RANK", NULL)                      \
    X(B, "b", 0, BENCH_ARG_INT, 0, 1 << 20, "RANK", NULL)                      \
    X(PT, "pt", 0, BENCH_ARG_INT, 0, 1, "0|1", NULL)                           \
    X(HELP, "help", 'h', BENCH_ARG_FLAG, 0, 0, NULL, "this text")

typedef enum {
#define BENCH_OPT_ID(id, name, letter, kind, min, max, meta, doc)              \
    BENCH_OPT_##id,
    BENCH_OPTIONS(BENCH_OPT_ID)
#undef BENCH_OPT_ID
        BENCH_OPT_COUNT
} bench_opt_id_t;

/* A mask of option ids: BENCH_OPT(HOSTS) | BENCH_OPT(SIZES) ... */
#define BENCH_OPT(id) (1ull << BENCH_OPT_##id)

/* Options every benchmark that runs on a fabric takes. */
#define BENCH_OPTS_FABRIC                                                      \
    (BENCH_OPT(HOSTS) | BENCH_OPT(FABRIC) | BENCH_OPT(EMULATE) |               \
     BENCH_OPT(RADIX) | BENCH_OPT(KEEP) | BENCH_OPT(TIMEOUT) |                 \
     BENCH_OPT(AN_CPUS) | BENCH_OPT(HOST_CPUS) | BENCH_OPT(HELP))

#define BENCH_MAX_ALGOS 16
#define BENCH_MAX_LOSS 16
/* Largest algorithm id an enumerator is asked about. */
#define BENCH_ALGO_IDS 64

/* A parsed --algos: ids in the given order, each with its size limit. */
typedef struct {
    int n;
    int id[BENCH_MAX_ALGOS];
    size_t max[BENCH_MAX_ALGOS]; /* ALGO:SIZE: run only up to SIZE; 0 all */
} bench_algos_t;

typedef struct bench_cmd bench_cmd_t;

/* Everything a benchmark's command line can say. Fields of options the
 * command does not take keep their defaults. */
typedef struct {
    int hosts, ppn, radix, sockets;
    int emulate, keep, dry_run;
    int iters;  /* 0 = by size */
    int warmup; /* -1 = by iterations */
    int timeout_s;
    int rounds;  /* 0 = not given */
    int jobs;    /* --jobs; 0 = not given (one) */
    int threads; /* --threads; 0 = not given */
    int a, b;    /* -1 = not given */
    int pt;
    uint64_t link_rate; /* bit/s; 0 = not given */
    size_t min_size, max_size;
    size_t bytes; /* --bytes */
    size_t pool;  /* --pool */
    double seconds;
    double burst; /* 0 = not given */
    double loss[BENCH_MAX_LOSS];
    int nloss;
    bench_algos_t algos;
    const char *algos_text; /* as given (or the default) */
    const char *fabric, *csv, *plot, *reference, *pair, *out, *progress;
    const char *gate; /* --jobs: DIR of the barrier every job's ranks meet
                         at before timing (the rank side's) */
    const char *calib, *dtype, *op, *nsrc, *impl;
    const char *an_cpus, *host_cpus; /* CPU lists, checked */
    uint64_t given; /* BENCH_OPT() mask of the options on the line */
} bench_opts_t;

/* An option doc of one command (its default, its own names). */
typedef struct {
    bench_opt_id_t id;
    const char *doc; /* replaces the table's */
} bench_optdoc_t;

/* A range of one command that differs from the table's. */
typedef struct {
    bench_opt_id_t id;
    double min, max;
} bench_range_t;

struct bench_cmd {
    const char *who;      /* "bench allreduce": starts every message */
    const char *synopsis; /* after "usage: incoll " */
    const char *about;    /* paragraph of --help; may be NULL */
    uint64_t accepts;     /* BENCH_OPT() mask */
    /* Defaults the command changes (NULL: none); called on a zeroed
     * bench_opts_t after the common defaults (bench_opts_defaults). */
    void (*defaults)(const bench_cmd_t *cmd, bench_opts_t *o);
    /* The name of algorithm id (0 .. BENCH_ALGO_IDS-1), NULL for ids that
     * are no algorithm of this command. --algos is parsed with it. */
    const char *(*algo_name)(const bench_cmd_t *cmd, int id);
    const bench_optdoc_t *docs;  /* ends with doc NULL; may be NULL */
    const bench_range_t *ranges; /* ends with max < min; may be NULL */
    size_t max_size;             /* largest size of --sizes; 0 = 1 GiB */
    const char *epilog;          /* last lines of --help; may be NULL */
    int arg;                     /* the command's own (e.g. a collective) */
};

/* The common defaults: 8 hosts, radix 4, sizes 8:1M, iterations by size,
 * warm-up by iterations, 1800 s, no pair ranks. */
void bench_opts_defaults(bench_opts_t *o);

/*
 * Parses argv (argv[0] is the benchmark's name) into *o: the common
 * defaults, then cmd->defaults, then the options. Returns 0; 1 after
 * --help (the text written to stdout); or 2 with one line in err (no
 * newline): "incoll WHO: OPTION ..., not 'VALUE'".
 */
int bench_opts_parse(const bench_cmd_t *cmd, int argc, char **argv,
                     bench_opts_t *o, char *err, size_t errlen);

/* bench_opts_parse printing err to stderr: the exit code for 1 (0) and 2
 * (2) is what a driver returns; 0 means go on. */
int bench_opts_get(const bench_cmd_t *cmd, int argc, char **argv,
                   bench_opts_t *o, int *exit_p);

/* Writes the --help text of cmd to out. */
void bench_opts_usage(const bench_cmd_t *cmd, FILE *out);

/* 1 when option id was given on the command line. */
static inline int bench_opts_given(const bench_opts_t *o, bench_opt_id_t id)
{
    return (o->given >> id) & 1;
}

/* The id of algorithm name under cmd, or -1. */
int bench_algo_id(const bench_cmd_t *cmd, const char *name);
/* "inc,rd:256K,ring": the list as the ranks are given it. */
void bench_algos_str(const bench_cmd_t *cmd, const bench_algos_t *a, char *buf,
                     size_t len);
/* Index of algorithm id in the list, or -1. */
int bench_algos_find(const bench_algos_t *a, int id);
/* 1 when the list's algorithm i runs at bytes (its ALGO:SIZE limit). */
int bench_algos_active(const bench_algos_t *a, int i, size_t bytes);

/* Timed iterations at bytes: --iters, else budget / bytes within
 * [lo, hi] (many for small vectors, a few for large). */
int bench_iters_for(const bench_opts_t *o, size_t bytes, size_t budget, int lo,
                    int hi);
/* Untimed iterations first: --warmup, else a tenth of iters, at least 1. */
int bench_warmup_for(const bench_opts_t *o, int iters);

/* Names beside the core's algorithms, shared by the benchmarks that run
 * under MPI too: the MPI library's own collective and the same MPI call
 * through libincoll_mpi. */
#define BENCH_NAME_MPI "mpi"
#define BENCH_NAME_MPI_LAYER "mpi-layer"

/* Parses "MIN:MAX" (or one size) with optional K, M, G (powers of 1024)
 * suffixes, MIN <= MAX. Returns 0 or -1. */
int bench_sizes_parse(const char *text, size_t *min_p, size_t *max_p);
/* "8", "64K", "4M": exact when the size is a whole number of the unit. */
const char *bench_size_str(size_t bytes, char *buf, size_t len);
/* Sizes min, 2*min, 4*min, ... <= max into *sizes_p (caller frees);
 * returns how many. */
int bench_size_list(size_t min, size_t max, size_t **sizes_p);
/* "MIN:MAX" as --sizes takes it. */
const char *bench_sizes_str(size_t min, size_t max, char *buf, size_t len);

#endif
