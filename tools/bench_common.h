/*
 * What `incoll bench allreduce` and `incoll bench pingpong` share: size
 * ranges, the fabric a run uses (given with --fabric, or brought up for the
 * run and always torn down, also on failure and SIGINT), launching the
 * ranks with `incoll run`, and a progress line fed by rank 0.
 */
#ifndef INCOLL_BENCH_COMMON_H
#define INCOLL_BENCH_COMMON_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Entry points, dispatched by tools/cmd_bench.c; the _rank ones are the
 * hidden `incoll bench _allreduce` / `_pingpong` the ranks run. */
int bench_allreduce_main(int argc, char **argv);
int bench_allreduce_rank_main(int argc, char **argv);
int bench_pingpong_main(int argc, char **argv);
int bench_pingpong_rank_main(int argc, char **argv);

/* Parses "MIN:MAX" (or one size) with optional K, M, G (powers of 1024)
 * suffixes. Returns 0 or -1. */
int bench_sizes_parse(const char *text, size_t *min_p, size_t *max_p);
/* "8", "64K", "4M": exact when the size is a whole number of the unit. */
const char *bench_size_str(size_t bytes, char *buf, size_t len);
/* Sizes min, 2*min, 4*min, ... <= max into *sizes_p (caller frees);
 * returns how many. */
int bench_size_list(size_t min, size_t max, size_t **sizes_p);

typedef struct {
    const char *fabric_dir; /* --fabric DIR: use it as it is */
    int emulate;            /* --emulate */
    int hosts;
    int radix;
    uint64_t link_rate; /* --link-rate, 0 = default */
    int keep;           /* --keep: leave the work directory */
    const char *who;    /* "bench allreduce", for messages */
} bench_fabric_opts_t;

typedef struct {
    char dir[PATH_MAX];  /* the fabric directory in use */
    char work[1024];     /* our scratch directory: results, logs */
    char self[PATH_MAX]; /* this executable */
    int own_fabric;      /* brought up by us: torn down by close */
    int emulated;
    uint64_t link_rate; /* of a host link in bit/s; 0 = unknown */
    int hosts, radix, levels;
    int keep;
    const char *who;
} bench_fabric_t;

/*
 * Makes the scratch directory and gets the fabric ready: opens --fabric,
 * or brings one up (emulated when asked and possible; without root it says
 * so and uses the loopback fabric). Installs SIGINT/SIGTERM handlers so a
 * run can be interrupted and still cleaned up. Returns 0, or -1 with the
 * cause printed (and nothing left behind).
 */
int bench_fabric_open(bench_fabric_t *f, const bench_fabric_opts_t *opts);

/* Tears down what open brought up and removes the scratch directory
 * (unless keep). Safe to call twice. */
void bench_fabric_close(bench_fabric_t *f);

/* 1 once SIGINT or SIGTERM arrived. */
int bench_interrupted(void);

/*
 * Runs `incoll run -n hosts --fabric DIR -- SELF bench _<kind> ARGS` and
 * waits, showing rank 0's progress file (progress_path, may be NULL) on
 * stderr. Returns the exit status of incoll run (0 = every rank passed).
 */
int bench_launch(bench_fabric_t *f, char *const rank_args[],
                 const char *progress_path, int timeout_s);

/*
 * For ranks: overwrites the progress file with one line (rate-limited to a
 * few writes per second unless force).
 */
void bench_progress_write(const char *path, int force, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Monotonic clock in ns. */
uint64_t bench_now_ns(void);

/* Writes text to path (for CSV and small files); 0 or -1 (printed). */
FILE *bench_fopen_out(const char *path, const char *who);

#endif
