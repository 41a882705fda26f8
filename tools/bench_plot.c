/*
 * The gnuplot writer of the benchmarks and the simulator: see
 * bench_plot.h.
 */
#include "bench_plot.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd",
                               "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"};

/* gnuplot's path: the usual places, then PATH. */
static int gnuplot_path(char *buf, size_t len)
{
    static const char *dirs[] = {"/usr/bin", "/usr/local/bin", "/bin"};
    const char *path = getenv("PATH");
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(buf, len, "%s/gnuplot", dirs[i]);
        if (access(buf, X_OK) == 0)
            return 0;
    }
    while (path && *path) {
        const char *colon = strchr(path, ':');
        int n = colon ? (int)(colon - path) : (int)strlen(path);
        snprintf(buf, len, "%.*s/gnuplot", n, path);
        if (n > 0 && access(buf, X_OK) == 0)
            return 0;
        path = colon ? colon + 1 : NULL;
    }
    return -1;
}

/* Quotes s for a gnuplot double-quoted string. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
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

/* Closes the script f (written to gp) and runs gnuplot on it. Returns 0
 * or -1 (printed). */
static int run_gnuplot(FILE *f, const char *who, const char *gnuplot,
                       const char *gp)
{
    pid_t pid;
    int st;

    if (fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", who, gp,
                log_strerror(errno));
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
        fprintf(stderr, "%s: gnuplot failed on %s (its message is above)\n",
                who, gp);
        return -1;
    }
    return 0;
}

static void put_panel(FILE *f, const plot_panel_t *p, int pi)
{
    double xmin = 0, xmax = 0;
    int first = 1;

    for (int c = 0; c < p->ncurves; c++)
        for (int k = 0; k < p->curves[c].n; k++) {
            double x = p->curves[c].x[k];
            if (x > 0 && (xmin == 0 || x < xmin))
                xmin = x;
            if (x > xmax)
                xmax = x;
        }
    fprintf(f, "set title ");
    put_quoted(f, p->title ? p->title : "");
    fprintf(f, "\nset xlabel ");
    put_quoted(f, p->xlabel ? p->xlabel : "");
    fprintf(f, "\nset ylabel ");
    put_quoted(f, p->ylabel ? p->ylabel : "");
    fprintf(f, "\n%s\n%s\n", p->logx ? "set logscale x 2" : "unset logscale x",
            p->logy ? "set logscale y 10" : "unset logscale y");
    fprintf(f, "set key %s box opaque\n", p->key ? p->key : "top left");
    if (p->logx && xmin > 0)
        fprintf(f, "set xrange [%g:%g]\n", xmin / 1.4, xmax * 1.4);
    else
        fprintf(f, "set xrange [%s:*]\n", p->logx ? "*" : "0");
    if (p->xbytes)
        put_xtics(f, xmin, xmax);
    else
        fprintf(f, "set xtics autofreq\n");
    if (p->ymin > 0 || p->ymax > 0) {
        fprintf(f, "set yrange [");
        if (p->ymin > 0)
            fprintf(f, "%g", p->ymin);
        else
            fprintf(f, "%s", p->logy ? "*" : "0");
        fprintf(f, ":");
        if (p->ymax > 0)
            fprintf(f, "%g", p->ymax);
        else
            fprintf(f, "*");
        fprintf(f, "]\n");
    } else {
        fprintf(f, "set yrange [%s:*]\n", p->logy ? "*" : "0");
    }
    fprintf(f, "plot ");
    for (int c = 0; c < p->ncurves; c++) {
        const plot_curve_t *cv = &p->curves[c];
        int ls = cv->style == PLOT_LIMIT       ? 100
                 : cv->style == PLOT_REFERENCE ? 101
                                               : cv->series % 8 + 1;
        if (cv->expr)
            fprintf(f, "%s%s with lines ls %d title ",
                    first ? "" : ", \\\n     ", cv->expr, ls);
        else
            fprintf(f, "%s$p%dc%d using 1:2 with %s ls %d title ",
                    first ? "" : ", \\\n     ", pi, c,
                    cv->style == PLOT_SERIES ? "linespoints" : "lines", ls);
        put_quoted(f, cv->name);
        first = 0;
    }
    if (first) /* no curve: an empty panel rather than a gnuplot error */
        fprintf(f, "NaN notitle");
    fprintf(f, "\n");
}

int plot_write(const char *png_path, const plot_doc_t *doc,
               const plot_panel_t *panels, int npanels)
{
    const char *who = doc->who ? doc->who : "incoll";
    char gp[PATH_MAX], gnuplot[PATH_MAX];
    size_t len = strlen(png_path);
    int width = doc->width ? doc->width : 750 * (npanels > 0 ? npanels : 1);
    int height = doc->height ? doc->height : 600;
    FILE *f;

    if (gnuplot_path(gnuplot, sizeof(gnuplot)) != 0) {
        fprintf(stderr,
                "%s: gnuplot not found: install it with `apt-get install "
                "gnuplot-nox` (or `make deps`)\n",
                who);
        return -1;
    }
    if (len == 0 || len + 4 > sizeof(gp)) {
        fprintf(stderr, "%s: bad plot file name '%s'\n", who, png_path);
        return -1;
    }
    if (len > 4 && strcmp(png_path + len - 4, ".png") == 0)
        snprintf(gp, sizeof(gp), "%.*s.gp", (int)(len - 4), png_path);
    else
        snprintf(gp, sizeof(gp), "%s.gp", png_path);
    f = fopen(gp, "w");
    if (f == NULL) {
        fprintf(stderr, "%s: cannot write %s: %s\n", who, gp,
                log_strerror(errno));
        return -1;
    }
    for (int p = 0; p < npanels; p++)
        for (int c = 0; c < panels[p].ncurves; c++) {
            const plot_curve_t *cv = &panels[p].curves[c];
            if (cv->expr)
                continue;
            fprintf(f, "$p%dc%d << EOD\n# x y (%s)\n", p, c,
                    cv->name ? cv->name : "");
            for (int k = 0; k < cv->n; k++)
                fprintf(f, "%.9g %.6g\n", cv->x[k], cv->y[k]);
            fprintf(f, "EOD\n");
        }
    fprintf(f,
            "set terminal pngcairo size %d,%d enhanced font "
            "\"DejaVu Sans,11\"\nset output ",
            width, height);
    put_quoted(f, png_path);
    fprintf(f, "\nset multiplot layout 1,%d title ", npanels);
    put_quoted(f, doc->title ? doc->title : "");
    fprintf(f, " font \",13\"\nset grid xtics ytics mytics\n");
    for (int i = 0; i < 8; i++)
        fprintf(f, "set style line %d lc rgb \"%s\" lw 2 pt %d ps 1.2\n", i + 1,
                colors[i], 5 + 2 * (i % 4));
    fprintf(f, "set style line 100 lc rgb \"black\" lw 2 dt 2\n"
               "set style line 101 lc rgb \"#555555\" lw 1.5 dt 3\n");
    for (int p = 0; p < npanels; p++)
        put_panel(f, &panels[p], p);
    fprintf(f, "unset multiplot\n");
    return run_gnuplot(f, who, gnuplot, gp);
}

int bench_plot_write(const char *png_path, const plot_opts_t *o,
                     const plot_series_t *s, int ns)
{
    plot_curve_t *lat = calloc((size_t)ns + 1, sizeof(*lat));
    plot_curve_t *bw = calloc((size_t)ns + 2, sizeof(*bw));
    char lat_limit[64], bw_limit[64], bw_name[64];
    double lat_min = 0;
    int nl = 0, nb = 0, ret;

    if (lat == NULL || bw == NULL) {
        free(lat);
        free(bw);
        return -1;
    }
    for (int i = 0; i < ns; i++) {
        for (int k = 0; k < s[i].n; k++)
            if (s[i].lat_us[k] > 0 &&
                (lat_min == 0 || s[i].lat_us[k] < lat_min))
                lat_min = s[i].lat_us[k];
        lat[nl++] = (plot_curve_t){s[i].name,  PLOT_SERIES, i,   s[i].n,
                                   s[i].bytes, s[i].lat_us, NULL};
        bw[nb++] = (plot_curve_t){s[i].name,  PLOT_SERIES,  i,   s[i].n,
                                  s[i].bytes, s[i].bw_MBps, NULL};
    }
    if (o->link_MBps > 0) {
        snprintf(lat_limit, sizeof(lat_limit), "x / %.6g", o->link_MBps);
        snprintf(bw_limit, sizeof(bw_limit), "%.6g", o->link_MBps);
        snprintf(bw_name, sizeof(bw_name), "link rate (%.4g MB/s)",
                 o->link_MBps);
        lat[nl++] = (plot_curve_t){
            "vector through one link", PLOT_LIMIT, 0, 0, NULL, NULL, lat_limit};
        bw[nb++] =
            (plot_curve_t){bw_name, PLOT_LIMIT, 0, 0, NULL, NULL, bw_limit};
    }
    {
        char ref[64];
        snprintf(ref, sizeof(ref), "%.6g", o->ref_MBps);
        if (o->ref_MBps > 0)
            bw[nb++] = (plot_curve_t){o->ref_name ? o->ref_name : "reference",
                                      PLOT_REFERENCE,
                                      0,
                                      0,
                                      NULL,
                                      NULL,
                                      ref};
        {
            plot_panel_t panels[2] = {
                {"latency (lower is better)", "vector size (bytes)",
                 "latency (us)", 1, 1, 1, lat_min / 2, 0, "top left", lat, nl},
                {"bandwidth = bytes / latency (higher is better)",
                 "vector size (bytes)", "bandwidth (MB/s)", 1, 1, 1, 0, 0,
                 "bottom right", bw, nb},
            };
            plot_doc_t doc = {"incoll bench", o->title ? o->title : "incoll",
                              1500, 600};
            ret = plot_write(png_path, &doc, panels, 2);
        }
    }
    free(lat);
    free(bw);
    return ret;
}
