/*
 * The three parts of `incoll bench allreduce` (one rank per host; K per
 * host is tools/bench_hier.c): the driver (bench_allreduce.c: its command
 * line, the fabric, the launch, --loss), the rank side
 * (bench_allreduce_rank.c: every algorithm side by side, every result
 * checked, raw records into the scratch directory) and the report
 * (bench_allreduce_report.c: records into statistics, the table, the CSV
 * and the plot). What they pass between them is declared here: the
 * record each rank writes per timed operation and the statistics per
 * size and algorithm.
 */
#ifndef INCOLL_BENCH_ALLREDUCE_H
#define INCOLL_BENCH_ALLREDUCE_H

#include "bench_common.h"

#include <stdint.h>

#define AR_MAGIC 0x31524142u /* "BAR1" */
/* `mpi` in --algos: the MPI library's own MPI_Allreduce (not an
 * incoll_algo_t; the ranks then run under MPI, see bench_common.h). */
#define AR_ALGO_MPI (INCOLL_ALGO_COUNT + 1)
/* `mpi-layer`: MPI_Allreduce through the MPI layer (libincoll_mpi's offload
 * path, on the same libincoll communicator as inc). */
#define AR_ALGO_MPI_LAYER (INCOLL_ALGO_COUNT + 2)
/* `inc-stream`: the in-network allreduce streaming through a locked tree
 * (docs/streaming.md); beside it, `inc` runs on the group's slots. */
#define AR_ALGO_INC_STREAM (INCOLL_ALGO_COUNT + 3)
/* A counter the rank could not read (records and stats). */
#define AR_NA UINT64_MAX

/* One timed operation of one rank. */
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

/* The head of a rank's record file, DIR/rank-R.rec. */
typedef struct {
    uint32_t magic;
    uint32_t nsizes;
    uint32_t nalgos;
    uint32_t rank;
    uint64_t nrecs;
} ar_file_hdr_t;

/* Per size and algorithm. */
typedef struct {
    double avg_us, min_us, max_us;
    double bw_MBps;
    double tx_bytes, tx_packets, cpu_us, retrans; /* NAN: not measured */
    double spread[5]; /* min, p25, p50, p75, max, us */
    int iters;
    int tx_na, retrans_na; /* some rank could not count them */
} ar_stat_t;

/* Ping-pong bandwidth by size, from `incoll bench pingpong --csv`. */
typedef struct {
    int n;
    size_t bytes[64];
    double bw[64];
} ar_ref_t;

/* The command line (bench_opts.h) of the driver and the rank side. */
extern const bench_cmd_t ar_cmd;
/* Parses argv with ar_cmd plus the allreduce's own rules; 0, or the exit
 * code (0 after --help, 2 after a message) in *exit_p and non-zero. */
int ar_parse(int argc, char **argv, bench_opts_t *o, int *exit_p);

/* "inc", "rd", ..., "mpi", "mpi-layer" (the core's names for libincoll's). */
const char *ar_algo_str(int algo);
/* With inc-stream in the list, turns streaming on in the environment the
 * ranks inherit (INCOLL_STREAM_THRESHOLD=1 unless set to a size): the rank
 * side then tells the library per operation which of inc and inc-stream
 * it runs (host_stream_mode). */
void ar_stream_env(const bench_opts_t *o);
/* 1 if mpi or mpi-layer is in the list (the ranks then run under MPI). */
int ar_has_mpi(const bench_opts_t *o);
/* Timed and warm-up iterations at a size; algorithms running at it. */
int ar_iters_for(const bench_opts_t *o, size_t bytes);
int ar_warmup_for(const bench_opts_t *o, size_t bytes);
int ar_nactive(const bench_opts_t *o, size_t bytes);
/* Timed operations of a rank over all sizes (its records). */
uint64_t ar_nrecs(const bench_opts_t *o, const size_t *sizes, int nsizes);

/* ---- the report (bench_allreduce_report.c) ---------------------------- */

/* Reads every rank's records: recs[r] holds nrecs entries (caller frees). */
int ar_load_records(const char *dir, int nranks, int nsizes, int nalgos,
                    uint64_t nrecs, ar_rec_t **recs);
/* stats[s * nalgos + algo index] from the records; 0 or -1 (printed). */
int ar_compute_stats(const bench_opts_t *o, const size_t *sizes, int nsizes,
                     int nranks, ar_rec_t **recs, ar_stat_t *stats);
int ar_load_reference(const char *path, ar_ref_t *ref);
/* With inc and inc-stream in the list: the smallest size from which
 * inc-stream's average latency is below inc's at every larger size that
 * both ran; 0 when it is not below at the largest. */
size_t ar_crossover(const bench_opts_t *o, const size_t *sizes, int nsizes,
                    const ar_stat_t *stats);
void ar_print_table(const bench_opts_t *o, const bench_fabric_t *f,
                    const size_t *sizes, int nsizes, const ar_stat_t *stats,
                    const ar_ref_t *ref);
int ar_write_csv(const char *path, const bench_opts_t *o,
                 const bench_fabric_t *f, const size_t *sizes, int nsizes,
                 const ar_stat_t *stats);
int ar_write_plot(const char *path, const bench_opts_t *o,
                  const bench_fabric_t *f, const size_t *sizes, int nsizes,
                  const ar_stat_t *stats, const ar_ref_t *ref);

/* --loss: every rank's latency of every operation at one (rate, size,
 * algorithm), over all rounds, and what it comes to. */
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
size_t ar_loss_idx(const bench_opts_t *o, int nsizes, int li, int s, int ai);
/* Adds one run's records at rate index li into acc. 0 or -1. */
int ar_loss_accumulate(const bench_opts_t *o, const size_t *sizes, int nsizes,
                       int nranks, ar_rec_t **recs, int li, ar_loss_acc_t *acc);
/* The statistics of every rate from acc, shares against rate base_li. */
void ar_loss_stats(const bench_opts_t *o, const size_t *sizes, int nsizes,
                   int base_li, ar_loss_acc_t *acc, ar_loss_stat_t *st);
void ar_print_loss_table(const bench_opts_t *o, const bench_fabric_t *f,
                         const size_t *sizes, int nsizes, int base_li,
                         const ar_loss_stat_t *st);
int ar_write_loss_csv(const char *path, const bench_opts_t *o,
                      const bench_fabric_t *f, const size_t *sizes, int nsizes,
                      const ar_loss_stat_t *st);
int ar_write_loss_plot(const char *path, const bench_opts_t *o,
                       const bench_fabric_t *f, const size_t *sizes, int nsizes,
                       const ar_loss_stat_t *st);

#endif
