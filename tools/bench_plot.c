/*
 * gnuplot output of the benchmarks: see bench_plot.h.
 */
#include "bench_plot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_gnuplot(FILE *f, const char *gnuplot, const char *gp);

static const char *colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd",
                               "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"};

static const char *gnuplot_path(void)
{
    static const char *cands[] = {"/usr/bin/gnuplot", "/usr/local/bin/gnuplot",
                                  "/bin/gnuplot"};
    for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++)
        if (access(cands[i], X_OK) == 0)
            return cands[i];
    return NULL;
}

/* Quotes s for a gnuplot double-quoted string. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Tics at powers of two, labelled 8, 64, 512, 4K, ..., at most ~10. */
static void put_xtics(FILE *f, double xmin, double xmax)
{
    double step = 2;
    int first = 1;
    if (xmin <= 0 || xmax < xmin)
        return;
    while (log2(xmax / xmin) / log2(step) > 9)
        step *= 2;
    fprintf(f, "set xtics (");
    for (double x = xmin; x <= xmax * 1.0001; x *= step) {
        static const char *units[] = {"", "K", "M", "G"};
        double v = x;
        int u = 0;
        while (v >= 1024 && u < 3) {
            v /= 1024;
            u++;
        }
        fprintf(f, "%s\"%g%s\" %.0f", first ? "" : ", ", v, units[u], x);
        first = 0;
    }
    fprintf(f, ")\n");
}

static void put_panel(FILE *f, const plot_opts_t *o, const plot_series_t *s,
                      int ns, int bandwidth)
{
    int first = 1;
    fprintf(f, "plot ");
    for (int i = 0; i < ns; i++) {
        fprintf(f, "%s$d%d using 1:%d with linespoints ls %d title ",
                first ? "" : ", \\\n     ", i, bandwidth ? 3 : 2, i + 1);
        put_quoted(f, s[i].name);
        first = 0;
    }
    if (o->link_MBps > 0) {
        if (bandwidth)
            fprintf(f,
                    ", \\\n     %.6g with lines ls 100 title \"link rate "
                    "(%.4g MB/s)\"",
                    o->link_MBps, o->link_MBps);
        else
            fprintf(f,
                    ", \\\n     x / %.6g with lines ls 100 title \"vector "
                    "through one link\"",
                    o->link_MBps);
    }
    if (bandwidth && o->ref_MBps > 0) {
        fprintf(f, ", \\\n     %.6g with lines ls 101 title ", o->ref_MBps);
        put_quoted(f, o->ref_name ? o->ref_name : "reference");
    }
    fprintf(f, "\n");
}

int bench_plot_write(const char *png_path, const plot_opts_t *o,
                     const plot_series_t *s, int ns)
{
    char gp[PATH_MAX];
    const char *gnuplot = gnuplot_path();
    size_t len = strlen(png_path);
    double xmin = 0, xmax = 0, lat_min = 0;
    FILE *f;

    if (gnuplot == NULL) {
        fprintf(stderr, "incoll bench: gnuplot not found: install it with "
                        "`apt-get install gnuplot-nox` (or `make deps`)\n");
        return -1;
    }
    if (len < 4 || len + 1 > sizeof(gp)) {
        fprintf(stderr, "incoll bench: bad plot file name %s\n", png_path);
        return -1;
    }
    snprintf(gp, sizeof(gp), "%.*s.gp", (int)(len - 4), png_path);
    f = fopen(gp, "w");
    if (f == NULL) {
        fprintf(stderr, "incoll bench: cannot write %s: %s\n", gp,
                strerror(errno));
        return -1;
    }
    for (int i = 0; i < ns; i++) {
        fprintf(f, "$d%d << EOD\n# bytes latency_us bandwidth_MBps (%s)\n", i,
                s[i].name);
        for (int k = 0; k < s[i].n; k++) {
            fprintf(f, "%.0f %.6g %.6g\n", s[i].bytes[k], s[i].lat_us[k],
                    s[i].bw_MBps[k]);
            if (xmin == 0 || s[i].bytes[k] < xmin)
                xmin = s[i].bytes[k];
            if (s[i].bytes[k] > xmax)
                xmax = s[i].bytes[k];
            if (s[i].lat_us[k] > 0 &&
                (lat_min == 0 || s[i].lat_us[k] < lat_min))
                lat_min = s[i].lat_us[k];
        }
        fprintf(f, "EOD\n");
    }
    fprintf(f, "set terminal pngcairo size 1500,600 enhanced font "
               "\"DejaVu Sans,11\"\nset output ");
    put_quoted(f, png_path);
    fprintf(f, "\nset multiplot layout 1,2 title ");
    put_quoted(f, o->title ? o->title : "incoll");
    fprintf(f, " font \",13\"\n");
    fprintf(f,
            "set logscale x 2\nset logscale y 10\nset grid xtics ytics mytics\n"
            "set key top left box opaque\n"
            "set xrange [%g:%g]\n"
            "set xlabel \"vector size (bytes)\"\n",
            xmin > 0 ? xmin / 1.4 : 1, xmax > 0 ? xmax * 1.4 : 2);
    put_xtics(f, xmin, xmax);
    for (int i = 0; i < ns; i++)
        fprintf(f, "set style line %d lc rgb \"%s\" lw 2 pt %d ps 1.2\n", i + 1,
                colors[i % 8], 5 + 2 * (i % 4));
    fprintf(f, "set style line 100 lc rgb \"black\" lw 2 dt 2\n"
               "set style line 101 lc rgb \"#555555\" lw 1.5 dt 3\n");
    fprintf(f, "set title \"latency (lower is better)\"\n"
               "set ylabel \"latency (us)\"\n");
    if (lat_min > 0)
        fprintf(f, "set yrange [%g:*]\n", lat_min / 2);
    put_panel(f, o, s, ns, 0);
    fprintf(f, "set title \"bandwidth = bytes / latency (higher is better)\"\n"
               "set ylabel \"bandwidth (MB/s)\"\nset key bottom right\n"
               "set yrange [*:*]\n");
    put_panel(f, o, s, ns, 1);
    fprintf(f, "unset multiplot\n");
    return run_gnuplot(f, gnuplot, gp);
}

/* Closes the script f (written to gp) and runs gnuplot on it. Returns 0
 * or -1 (printed). */
static int run_gnuplot(FILE *f, const char *gnuplot, const char *gp)
{
    pid_t pid;
    int st;

    if (fclose(f) != 0) {
        fprintf(stderr, "incoll bench: cannot write %s: %s\n", gp,
                strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null_fd = open("/dev/null", O_WRONLY);
        if (null_fd >= 0)
            dup2(null_fd, 1);
        execl(gnuplot, "gnuplot", gp, (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr,
                "incoll bench: gnuplot failed on %s (its message is "
                "above)\n",
                gp);
        return -1;
    }
    return 0;
}

/* Opens png_path's script (png_path with .gp for .png) for writing. */
static FILE *open_script(const char *png_path, char *gp, size_t gplen)
{
    size_t len = strlen(png_path);
    FILE *f;
    if (len < 4 || len + 1 > gplen) {
        fprintf(stderr, "incoll bench: bad plot file name %s\n", png_path);
        return NULL;
    }
    snprintf(gp, gplen, "%.*s.gp", (int)(len - 4), png_path);
    f = fopen(gp, "w");
    if (f == NULL)
        fprintf(stderr, "incoll bench: cannot write %s: %s\n", gp,
                strerror(errno));
    return f;
}

int bench_plot_xy_write(const char *png_path, const char *title,
                        const char *xlabel, const char *ylabel,
                        const plot_xy_series_t *s, int ns)
{
    char gp[PATH_MAX];
    const char *gnuplot = gnuplot_path();
    FILE *f;

    if (gnuplot == NULL) {
        fprintf(stderr, "incoll bench: gnuplot not found: install it with "
                        "`apt-get install gnuplot-nox` (or `make deps`)\n");
        return -1;
    }
    f = open_script(png_path, gp, sizeof(gp));
    if (f == NULL)
        return -1;
    for (int i = 0; i < ns; i++) {
        fprintf(f, "$d%d << EOD\n# x y (%s)\n", i, s[i].name);
        for (int k = 0; k < s[i].n; k++)
            fprintf(f, "%.6g %.6g\n", s[i].x[k], s[i].y[k]);
        fprintf(f, "EOD\n");
    }
    fprintf(f, "set terminal pngcairo size 1000,650 enhanced font "
               "\"DejaVu Sans,11\"\nset output ");
    put_quoted(f, png_path);
    fprintf(f, "\nset title ");
    put_quoted(f, title ? title : "incoll");
    fprintf(f, "\nset xlabel ");
    put_quoted(f, xlabel);
    fprintf(f, "\nset ylabel ");
    put_quoted(f, ylabel);
    fprintf(f, "\nset grid\nset key bottom left box opaque\n"
               "set yrange [0:*]\nset xrange [0:*]\n");
    for (int i = 0; i < ns; i++)
        fprintf(f, "set style line %d lc rgb \"%s\" lw 2 pt %d ps 1.2\n", i + 1,
                colors[i % 8], 5 + 2 * (i % 4));
    fprintf(f, "plot ");
    for (int i = 0; i < ns; i++) {
        fprintf(f, "%s$d%d using 1:2 with linespoints ls %d title ",
                i ? ", \\\n     " : "", i, i + 1);
        put_quoted(f, s[i].name);
    }
    fprintf(f, "\n");
    return run_gnuplot(f, gnuplot, gp);
}
