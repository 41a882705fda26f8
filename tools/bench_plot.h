/*
 * The one gnuplot writer of incoll (Debian: gnuplot-nox), used by every
 * `incoll bench` benchmark and by the simulator (src/sim/sim_main.c).
 *
 * A plot is one PNG of one or more panels side by side. A panel has its
 * axes (linear or logarithmic; an x axis of bytes gets tics 8, 64, 4K,
 * ...) and its curves; a curve is either data points (x, y) or a gnuplot
 * function of x (a limit such as the link rate), drawn in one of three
 * styles: a series (a colour and point shape per series number, the same
 * in every panel), a limit (black, dashed) or a reference (grey, dotted).
 * The gnuplot script is written next to the PNG (FILE.gp for FILE.png)
 * with the data inline, so a plot can be restyled and redrawn with
 * `gnuplot FILE.gp` without rerunning what produced it.
 *
 * bench_plot_write() is the benchmarks' usual figure on top of it:
 * latency vs size and bandwidth vs size, log-log, one curve per series
 * and the link rate as the limit line.
 */
#ifndef INCOLL_BENCH_PLOT_H
#define INCOLL_BENCH_PLOT_H

typedef enum {
    PLOT_SERIES,    /* colour and points of its series number */
    PLOT_LIMIT,     /* a physical limit: black, dashed */
    PLOT_REFERENCE, /* a measured reference: grey, dotted */
} plot_style_t;

typedef struct {
    const char *name; /* key label */
    plot_style_t style;
    int series; /* PLOT_SERIES: its number (colour, point shape) */
    int n;      /* points in x and y; 0 with expr */
    const double *x, *y;
    const char *expr; /* a function of x instead of points ("x / 12.5") */
} plot_curve_t;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int logx;          /* log2 x axis */
    int xbytes;        /* x is bytes: tics 8, 64, 512, 4K ... */
    int logy;          /* log10 y axis */
    double ymin, ymax; /* 0 = automatic */
    const char *key;   /* gnuplot key position, e.g. "top left" */
    const plot_curve_t *curves;
    int ncurves;
} plot_panel_t;

typedef struct {
    const char *who;   /* names the writer in messages ("incoll bench") */
    const char *title; /* over all panels; may be NULL */
    int width, height; /* pixels; 0 = 750 per panel x 600 */
} plot_doc_t;

/*
 * Writes png_path's script (png_path with .gp instead of .png, or .gp
 * appended) and runs gnuplot on it to draw png_path. Returns 0, or -1
 * with the cause printed (gnuplot missing: which package to install).
 */
int plot_write(const char *png_path, const plot_doc_t *doc,
               const plot_panel_t *panels, int npanels);

/* One algorithm of a benchmark: points of latency and bandwidth by size. */
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
 * The benchmarks' figure: latency (with the time to push the vector
 * through one link as the limit) and bandwidth (with the link rate and
 * the reference) against size, log-log, one curve per series. Returns 0
 * or -1 (printed).
 */
int bench_plot_write(const char *png_path, const plot_opts_t *opts,
                     const plot_series_t *series, int nseries);

#endif
