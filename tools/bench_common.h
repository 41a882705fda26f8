/*
 * What the fabric benchmarks' drivers share: the fabric a run uses (given
 * with --fabric, or brought up for the run and always torn down, also on
 * failure and SIGINT), launching the ranks with `incoll run` or `incoll
 * mpirun`, and a progress line fed by rank 0. The command line is
 * bench_opts.h's, the output bench_report.h's, the rank side's helpers
 * bench_rank.h's.
 */
#ifndef INCOLL_BENCH_COMMON_H
#define INCOLL_BENCH_COMMON_H

#include "bench_opts.h"
#include "incoll.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Entry points, dispatched by tools/cmd_bench.c; the _rank ones are the
 * hidden `incoll bench _allreduce` / `_pingpong` the ranks run. */
int bench_allreduce_main(int argc, char **argv);
int bench_allreduce_rank_main(int argc, char **argv);
int bench_pingpong_main(int argc, char **argv);
int bench_agg_main(int argc, char **argv);
int bench_pingpong_rank_main(int argc, char **argv);
/* `incoll bench <collective>` (argv[0] names it: bcast, reduce, barrier,
 * allgather, gather, scatter, reduce_scatter) and its rank side `_coll`
 * (tools/bench_colls.c). */
int bench_coll_main(int argc, char **argv);
int bench_iallreduce_main(int argc, char **argv);
int bench_iallreduce_rank_main(int argc, char **argv);
int bench_coll_rank_main(int argc, char **argv);

/*
 * What the MPI worker (build/bin/incoll-bench-mpi, tools/mpi/bench_worker.c:
 * the rank side linked with MPI and the MPI layer) hands the rank side of
 * `incoll bench allreduce` when `mpi` is in --algos. The ranks then run
 * under mpirun (through `incoll mpirun`), libincoll comes up from MPI as
 * in libincoll_mpi, and the MPI library's own MPI_Allreduce is one more
 * algorithm.
 */
typedef struct {
    incoll_ctx_h ctx;    /* libincoll, owned by the MPI layer */
    incoll_comm_h world; /* MPI_COMM_WORLD's ranks, in order */
    /* MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM,
     * MPI_COMM_WORLD) of the MPI library: 0, or MPI's error code. */
    int (*allreduce)(const float *send, float *recv, size_t count);
    /* The same call through the MPI layer (libincoll_mpi's MPI_Allreduce:
     * mpi_layer_allreduce, else PMPI_Allreduce): 0, or MPI's error code. */
    int (*layer_allreduce)(const float *send, float *recv, size_t count);
    /* For `incoll bench <collective>`: the MPI library's own collective
     * coll (an algo_coll_t) on MPI_COMM_WORLD, count int64 elements (SUM)
     * for reduce and reduce_scatter, bytes per rank otherwise; and the
     * same call through the MPI layer (mpi_layer_<coll>, else PMPI_).
     * 0, or MPI's error code. */
    int (*coll)(int coll, const void *send, void *recv, size_t count, int root);
    int (*layer_coll)(int coll, const void *send, void *recv, size_t count,
                      int root);
} bench_mpi_t;

/* The rank side of `incoll bench allreduce`: bench_allreduce_rank_main()
 * with mpi NULL (libincoll from the environment of `incoll run`), or
 * called by the MPI worker. */
int bench_allreduce_rank_run(int argc, char **argv, const bench_mpi_t *mpi);
/* The rank side of `incoll bench <collective>` (bench_coll_rank_main with
 * mpi NULL), or called by the MPI worker. */
int bench_coll_rank_run(int argc, char **argv, const bench_mpi_t *mpi);

/* The MPI worker's file name, next to `incoll`. */
#define BENCH_MPI_WORKER "incoll-bench-mpi"

typedef struct {
    const char *fabric_dir; /* --fabric DIR: use it as it is */
    int emulate;            /* --emulate */
    int hosts;
    int radix;
    uint64_t link_rate;    /* --link-rate, 0 = default */
    int keep;              /* --keep: leave the work directory */
    const char *who;       /* "bench allreduce", for messages */
    const char *an_cpus;   /* --an-cpus: the ANs of a fabric brought up */
    const char *host_cpus; /* --host-cpus: where the ranks run */
} bench_fabric_opts_t;

typedef struct {
    char dir[PATH_MAX];  /* the fabric directory in use */
    char work[1024];     /* our scratch directory: results, logs */
    char self[PATH_MAX]; /* this executable */
    int own_fabric;      /* brought up by us: torn down by close */
    int emulated;
    uint64_t link_rate; /* of a host link in bit/s; 0 = unknown */
    int hosts, radix, levels;
    int ppn; /* ranks per host bench_launch starts (0 or 1: one) */
    int keep;
    const char *who;
    const char *an_cpus;   /* as given, or NULL: any CPU */
    const char *host_cpus; /* as given, or NULL: any CPU */
} bench_fabric_t;

/*
 * Makes the scratch directory and gets the fabric ready: opens --fabric,
 * or brings one up (emulated when asked and possible; without root it says
 * so and uses the loopback fabric). Installs SIGINT/SIGTERM handlers so a
 * run can be interrupted and still cleaned up. Returns 0, or -1 with the
 * cause printed (and nothing left behind).
 */
int bench_fabric_open(bench_fabric_t *f, const bench_fabric_opts_t *opts);

/* bench_fabric_open with the fabric options of a command line (--fabric,
 * --emulate, -n, --radix, --link-rate, --keep). */
int bench_fabric_start(bench_fabric_t *f, const bench_opts_t *o,
                       const char *who);

/* "8 hosts (radix 4, 2 levels), emulated links of 100 Mbit/s each way,
 * non-blocking uplinks" or "..., loopback fabric (...)": for headings. */
void bench_fabric_describe(const bench_fabric_t *f, char *buf, size_t len);

/* Tears down what open brought up and removes the scratch directory
 * (unless keep). Safe to call twice. */
void bench_fabric_close(bench_fabric_t *f);

/* 1 once SIGINT or SIGTERM arrived. */
int bench_interrupted(void);

/*
 * Runs `incoll run -n hosts --fabric DIR -- SELF bench _<kind> ARGS` (with
 * f->ppn > 1: -n hosts*ppn --ppn ppn) and
 * waits, showing rank 0's progress file (progress_path, may be NULL) on
 * stderr. Returns the exit status of incoll run (0 = every rank passed).
 */
int bench_launch(bench_fabric_t *f, char *const rank_args[],
                 const char *progress_path, int timeout_s);

/*
 * The same under MPI: `incoll mpirun -n hosts --fabric DIR --no-preload
 * --timeout SEC -- WORKER ARGS` (each rank in its host's namespace when
 * the fabric is emulated), WORKER being the MPI worker next to this
 * executable. Returns the exit status of incoll mpirun.
 */
int bench_launch_mpi(bench_fabric_t *f, char *const rank_args[],
                     const char *progress_path, int timeout_s);

/*
 * J jobs at once on one fabric: job j is `incoll run -n hosts/J --place
 * j:J` (its ranks on hosts j, j+J, j+2J, ...: every job under every leaf)
 * with job_args[j] as its rank arguments; all started, then waited for
 * (the first to fail has the others stopped). progress_path is one job's.
 * Returns 0 when every job passed, else the first failure's status.
 */
int bench_launch_jobs(bench_fabric_t *f, int njobs, char **const job_args[],
                      const char *progress_path, int timeout_s);

/*
 * 0 when this machine can run the MPI worker: mpirun in PATH and the
 * worker built next to this executable (path in worker, may be NULL);
 * otherwise -1 with the reason in why.
 */
int bench_mpi_usable(char *worker, size_t worker_len, char *why, size_t len);

/*
 * For ranks: overwrites the progress file with one line (rate-limited to a
 * few writes per second unless force).
 */
void bench_progress_write(const char *path, int force, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
