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

#endif
