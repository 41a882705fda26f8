/*
 * What the benchmarks report and how, in the manner of OSU's and
 * fabtests' shared output code (show_perf): statistics of samples, the
 * OSU-style table, CSV files, and the latency/bandwidth plot of a set of
 * (algorithm, size, latency) points.
 *
 * Statistics: a sample array is sorted once and summarised as count,
 * average, minimum, maximum and the quartiles and 99th percentile
 * (linear interpolation between the closest ranks). A counter that was
 * not measured is NaN: the table shows it as "-", the CSV as an empty
 * field, so a missing measurement never reads as 0.
 *
 * The table: every benchmark prints the same OSU columns, bytes, iters,
 * avg/min/max latency in microseconds and MB/s = bytes / avg latency
 * (10^6 bytes per second), after its own leading column (the algorithm)
 * and before its own extra columns; comment lines start with '#'.
 *
 * CSV: a header row first, one row per size and algorithm; the file is
 * written in full or the run fails with the cause.
 */
#ifndef INCOLL_BENCH_REPORT_H
#define INCOLL_BENCH_REPORT_H

#include "bench_plot.h"

#include <stddef.h>
#include <stdio.h>

typedef struct {
    size_t n;
    double avg, min, max;
    double p25, p50, p75, p99;
} bench_summary_t;

/* Sorts v (n samples) and summarises it into *s; all 0 when n is 0. */
void bench_summarize(double *v, size_t n, bench_summary_t *s);
/* The q-quantile (0..1) of sorted samples, interpolated; n >= 1. */
double bench_quantile(const double *sorted, size_t n, double q);

/* The OSU columns: header and one row (MB/s from bytes and avg). */
void bench_osu_head(FILE *out);
void bench_osu_row(FILE *out, size_t bytes, int iters, double avg_us,
                   double min_us, double max_us);
/* A counter for the table: "-" when NaN (not measured). */
const char *bench_num_str(double v, int decimals, char *buf, size_t len);

/* Opens path for a CSV and writes its header row (with the newline).
 * NULL after a message naming who, path and the cause. */
FILE *bench_csv_open(const char *path, const char *who, const char *header);
/* Closes it: 0, or -1 after a message (the data did not all get out). */
int bench_csv_close(FILE *fp, const char *path, const char *who);
/* A counter for the CSV: empty when NaN. */
const char *bench_csv_num(double v, int decimals, char *buf, size_t len);

/* One measured point: an algorithm's average latency at a size. */
typedef struct {
    const char *algo;
    size_t bytes;
    double avg_us;
} bench_point_t;

/*
 * The latency and bandwidth plot of points, one curve per algorithm in
 * the order of first appearance (bench_plot_write). Points of 0 bytes or
 * no latency are left out; with none left it says so. Returns 0 or -1
 * (printed).
 */
int bench_plot_points(const char *path, const char *who, const plot_opts_t *po,
                      const bench_point_t *pts, int n);

#endif
