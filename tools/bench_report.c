/*
 * Statistics, table, CSV and plot of the benchmarks: see bench_report.h.
 */
#include "bench_report.h"
#include "common/log.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_quantile(const double *sorted, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double frac = pos - (double)i;
    if (i + 1 >= n)
        return sorted[n - 1];
    return sorted[i] + frac * (sorted[i + 1] - sorted[i]);
}

void bench_summarize(double *v, size_t n, bench_summary_t *s)
{
    double sum = 0;
    memset(s, 0, sizeof(*s));
    if (n == 0)
        return;
    qsort(v, n, sizeof(double), cmp_double);
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    s->n = n;
    s->avg = sum / (double)n;
    s->min = v[0];
    s->max = v[n - 1];
    s->p25 = bench_quantile(v, n, 0.25);
    s->p50 = bench_quantile(v, n, 0.5);
    s->p75 = bench_quantile(v, n, 0.75);
    s->p99 = bench_quantile(v, n, 0.99);
}

void bench_osu_head(FILE *out)
{
    fprintf(out, "%9s %6s %10s %10s %10s %9s", "bytes", "iters", "avg(us)",
            "min(us)", "max(us)", "MB/s");
}

void bench_osu_row(FILE *out, size_t bytes, int iters, double avg_us,
                   double min_us, double max_us)
{
    fprintf(out, "%9zu %6d %10.1f %10.1f %10.1f %9.2f", bytes, iters, avg_us,
            min_us, max_us, avg_us > 0 ? (double)bytes / avg_us : 0);
}

const char *bench_num_str(double v, int decimals, char *buf, size_t len)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.*f", decimals, v);
    return buf;
}

const char *bench_csv_num(double v, int decimals, char *buf, size_t len)
{
    if (isnan(v))
        buf[0] = '\0';
    else
        snprintf(buf, len, "%.*f", decimals, v);
    return buf;
}

FILE *bench_csv_open(const char *path, const char *who, const char *header)
{
    FILE *fp = fopen(path, "w");
    if (fp == NULL) {
        fprintf(stderr, "incoll %s: cannot write %s: %s\n", who, path,
                log_strerror(errno));
        return NULL;
    }
    fprintf(fp, "%s\n", header);
    return fp;
}

int bench_csv_close(FILE *fp, const char *path, const char *who)
{
    int bad = ferror(fp);
    if (fclose(fp) != 0 || bad) {
        fprintf(stderr, "incoll %s: cannot write %s: %s\n", who, path,
                bad ? "write error" : log_strerror(errno));
        return -1;
    }
    return 0;
}

int bench_plot_points(const char *path, const char *who, const plot_opts_t *po,
                      const bench_point_t *pts, int n)
{
    plot_series_t *se = calloc((size_t)n + 1, sizeof(*se));
    double *buf = calloc((size_t)n * 3 + 1, sizeof(double));
    int ns = 0, ret = -1, used = 0;

    if (se == NULL || buf == NULL)
        goto out;
    /* Series k gets the slots of its points, in order of appearance. */
    for (int i = 0; i < n; i++) {
        int k = 0;
        if (pts[i].bytes == 0 || !(pts[i].avg_us > 0))
            continue;
        while (k < ns && strcmp(se[k].name, pts[i].algo) != 0)
            k++;
        if (k == ns) {
            int cnt = 0;
            for (int j = i; j < n; j++)
                cnt += strcmp(pts[j].algo, pts[i].algo) == 0;
            se[ns].name = pts[i].algo;
            se[ns].bytes = buf + used;
            se[ns].lat_us = buf + n + used;
            se[ns].bw_MBps = buf + 2 * n + used;
            used += cnt;
            ns++;
        }
        ((double *)se[k].bytes)[se[k].n] = (double)pts[i].bytes;
        ((double *)se[k].lat_us)[se[k].n] = pts[i].avg_us;
        ((double *)se[k].bw_MBps)[se[k].n] =
            (double)pts[i].bytes / pts[i].avg_us;
        se[k].n++;
    }
    if (ns == 0) {
        fprintf(stderr, "incoll %s: nothing to plot (no sizes)\n", who);
        goto out;
    }
    ret = bench_plot_write(path, po, se, ns);
out:
    free(se);
    free(buf);
    return ret;
}
