/*
 * Plots of the fabric benchmarks with gnuplot (Debian: gnuplot-nox): one
 * PNG with latency vs size and bandwidth vs size side by side, log-log,
 * one curve per series, and the link rate drawn as the limit line (in the
 * latency panel: the time to push the vector through one link). The
 * gnuplot script is kept next to the PNG (FILE.gp) with the data inline,
 * so a plot can be restyled and redrawn without rerunning the benchmark.
 */
#ifndef INCOLL_BENCH_PLOT_H
#define INCOLL_BENCH_PLOT_H

typedef struct {
    const char *name; /* curve label */
    int n;            /* points */
    const double *bytes;
    const double *lat_us;
    const double *bw_MBps; /* 10^6 bytes per second */
} plot_series_t;

typedef struct {
    const char *title;
    double link_MBps; /* limit line; 0 = none (loopback) */
    double ref_MBps;  /* a measured reference (ping-pong); 0 = none */
    const char *ref_name;
} plot_opts_t;

/*
 * Writes png_path (and png_path with .gp instead of .png) and runs gnuplot
 * on it. Returns 0, or -1 with the cause printed (gnuplot missing: which
 * package to install).
 */
int bench_plot_write(const char *png_path, const plot_opts_t *opts,
                     const plot_series_t *series, int nseries);

/* One curve of an x-y plot (bench_plot_xy_write). */
typedef struct {
    const char *name;
    int n;
    const double *x;
    const double *y;
} plot_xy_series_t;

/*
 * A plain x-y plot, linear axes, one curve per series: e.g. goodput
 * against loss rate (`bench allreduce --loss`). Writes png_path and its
 * .gp script as bench_plot_write does. Returns 0 or -1 (printed).
 */
int bench_plot_xy_write(const char *png_path, const char *title,
                        const char *xlabel, const char *ylabel,
                        const plot_xy_series_t *series, int nseries);

#endif
