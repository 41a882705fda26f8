/*
 * The report of `incoll bench allreduce` (bench_allreduce.h): the ranks'
 * raw records turned into statistics, the table, the CSV and the plot.
 *
 * The records (clock values of every rank on the machine's one monotonic
 * clock) give per algorithm and size: latency averaged per rank, then
 * avg/min/max over ranks (as OSU does); bandwidth = bytes / avg latency;
 * bytes and datagrams sent per host per operation; CPU time per operation;
 * and the completion spread: for each operation, the time from its first
 * start on any rank to the moment each rank has the result, over ranks and
 * iterations (min, quartiles, max). With --loss, every rank's latency of
 * every operation is pooled per rate over the rounds: avg, p50, p99 and
 * the goodput as a share of the same algorithm's at the lowest rate.
 */
#include "bench_allreduce.h"
#include "bench_report.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ar_load_records(const char *dir, int nranks, int nsizes, int nalgos,
                    uint64_t nrecs, ar_rec_t **recs)
{
    for (int r = 0; r < nranks; r++) {
        char path[PATH_MAX + 32];
        ar_file_hdr_t h;
        FILE *f;
        snprintf(path, sizeof(path), "%s/rank-%d.rec", dir, r);
        f = fopen(path, "rb");
        if (f == NULL) {
            fprintf(stderr,
                    "incoll bench allreduce: rank %d left no records "
                    "(%s: %s)\n",
                    r, path, log_strerror(errno));
            return -1;
        }
        recs[r] = calloc(nrecs, sizeof(ar_rec_t));
        if (recs[r] == NULL || fread(&h, sizeof(h), 1, f) != 1 ||
            h.magic != AR_MAGIC || h.nsizes != (uint32_t)nsizes ||
            h.nalgos != (uint32_t)nalgos || h.nrecs != nrecs ||
            fread(recs[r], sizeof(ar_rec_t), nrecs, f) != nrecs) {
            fprintf(stderr,
                    "incoll bench allreduce: %s is not what rank %d "
                    "should have written\n",
                    path, r);
            fclose(f);
            return -1;
        }
        fclose(f);
    }
    return 0;
}

/*
 * stats[s * nalgos + algo index] from the records. Every rank ran the same
 * operations in the same order, so position p of a size's block names the
 * same operation on every rank.
 */
int ar_compute_stats(const bench_opts_t *o, const size_t *sizes, int nsizes,
                     int nranks, ar_rec_t **recs, ar_stat_t *stats)
{
    uint64_t base = 0;
    for (int s = 0; s < nsizes; s++) {
        int iters = ar_iters_for(o, sizes[s]);
        uint64_t nops = (uint64_t)iters * (uint64_t)ar_nactive(o, sizes[s]);
        size_t nsamp = (size_t)iters * (size_t)nranks;
        double *samp = malloc((size_t)o->algos.n * nsamp * sizeof(double));
        double *lat =
            calloc((size_t)o->algos.n * (size_t)nranks, sizeof(double));
        size_t *ns = calloc((size_t)o->algos.n, sizeof(size_t));
        if (samp == NULL || lat == NULL || ns == NULL) {
            free(samp);
            free(lat);
            free(ns);
            return -1;
        }
        /* iters stays 0 for an algorithm that did not run at this size. */
        for (int ai = 0; ai < o->algos.n; ai++) {
            memset(&stats[s * o->algos.n + ai], 0, sizeof(ar_stat_t));
            if (bench_algos_active(&o->algos, ai, sizes[s]))
                stats[s * o->algos.n + ai].iters = iters;
        }
        for (uint64_t p = base; p < base + nops; p++) {
            uint32_t ai = recs[0][p].algo_idx;
            ar_stat_t *st;
            uint64_t first = UINT64_MAX;
            if (ai >= (uint32_t)o->algos.n ||
                !bench_algos_active(&o->algos, (int)ai, sizes[s])) {
                fprintf(stderr, "incoll bench allreduce: corrupt records\n");
                free(samp);
                free(lat);
                free(ns);
                return -1;
            }
            st = &stats[s * o->algos.n + (int)ai];
            for (int r = 0; r < nranks; r++) {
                const ar_rec_t *rc = &recs[r][p];
                if (rc->algo_idx != ai || rc->iter != recs[0][p].iter) {
                    fprintf(stderr,
                            "incoll bench allreduce: rank %d ran its "
                            "operations in another order than rank 0\n",
                            r);
                    free(samp);
                    free(lat);
                    free(ns);
                    return -1;
                }
                if (rc->start_ns < first)
                    first = rc->start_ns;
                lat[(size_t)ai * (size_t)nranks + (size_t)r] +=
                    (double)(rc->end_ns - rc->start_ns);
                if (rc->tx_bytes == AR_NA) {
                    st->tx_na = 1;
                } else {
                    st->tx_bytes += (double)rc->tx_bytes;
                    st->tx_packets += (double)rc->tx_packets;
                }
                st->cpu_us += (double)rc->cpu_ns / 1e3;
                if (rc->retrans == AR_NA)
                    st->retrans_na = 1;
                else
                    st->retrans += (double)rc->retrans;
            }
            for (int r = 0; r < nranks; r++)
                samp[(size_t)ai * nsamp + ns[ai]++] =
                    (double)(recs[r][p].end_ns - first) / 1e3;
        }
        for (int ai = 0; ai < o->algos.n; ai++) {
            ar_stat_t *st = &stats[s * o->algos.n + ai];
            double *sp = samp + (size_t)ai * nsamp, sum = 0;
            if (st->iters == 0)
                continue;
            st->min_us = INFINITY;
            for (int r = 0; r < nranks; r++) {
                double l =
                    lat[(size_t)ai * (size_t)nranks + (size_t)r] / iters / 1e3;
                sum += l;
                if (l < st->min_us)
                    st->min_us = l;
                if (l > st->max_us)
                    st->max_us = l;
            }
            st->avg_us = sum / nranks;
            st->bw_MBps = st->avg_us > 0 ? (double)sizes[s] / st->avg_us : 0;
            st->tx_bytes = st->tx_na ? NAN : st->tx_bytes / (double)nsamp;
            st->tx_packets = st->tx_na ? NAN : st->tx_packets / (double)nsamp;
            st->cpu_us /= (double)nsamp;
            st->retrans = st->retrans_na ? NAN : st->retrans / (double)nsamp;
            if (ns[ai] > 0) {
                bench_summary_t sm;
                bench_summarize(sp, ns[ai], &sm);
                st->spread[0] = sm.min;
                st->spread[1] = sm.p25;
                st->spread[2] = sm.p50;
                st->spread[3] = sm.p75;
                st->spread[4] = sm.max;
            }
        }
        free(samp);
        free(lat);
        free(ns);
        base += nops;
    }
    return 0;
}

int ar_load_reference(const char *path, ar_ref_t *ref)
{
    char line[512];
    FILE *f = fopen(path, "r");
    memset(ref, 0, sizeof(*ref));
    if (f == NULL) {
        fprintf(stderr, "incoll bench allreduce: --reference %s: %s\n", path,
                log_strerror(errno));
        return -1;
    }
    if (fgets(line, sizeof(line), f) == NULL ||
        strncmp(line, "bytes,iters,avg_us,min_us,max_us,bw_MBps,", 41) != 0) {
        fprintf(stderr,
                "incoll bench allreduce: --reference %s is not a "
                "`bench pingpong --csv` file\n",
                path);
        fclose(f);
        return -1;
    }
    while (fgets(line, sizeof(line), f) && ref->n < 64) {
        size_t b;
        double bw;
        if (sscanf(line, "%zu,%*d,%*f,%*f,%*f,%lf", &b, &bw) == 2) {
            ref->bytes[ref->n] = b;
            ref->bw[ref->n++] = bw;
        }
    }
    fclose(f);
    return 0;
}

/* Ping-pong bandwidth at bytes, or 0. */
static double ref_bw(const ar_ref_t *ref, size_t bytes)
{
    for (int i = 0; ref && i < ref->n; i++)
        if (ref->bytes[i] == bytes)
            return ref->bw[i];
    return 0;
}

/* Index of the inc algorithm in o->algos, or -1. */
static int inc_index(const bench_opts_t *o)
{
    for (int i = 0; i < o->algos.n; i++)
        if (o->algos.id[i] == INCOLL_ALGO_INC)
            return i;
    return -1;
}

/* Index of the inc-stream algorithm in o->algos, or -1. */
static int stream_index(const bench_opts_t *o)
{
    return bench_algos_find(&o->algos, AR_ALGO_INC_STREAM);
}

/* Index of the mpi baseline in o->algos, or -1. */
static int mpi_index(const bench_opts_t *o)
{
    for (int i = 0; i < o->algos.n; i++)
        if (o->algos.id[i] == AR_ALGO_MPI)
            return i;
    return -1;
}

/* A counter column: "-" when it was not measured. */
static int layer_index(const bench_opts_t *o)
{
    for (int i = 0; i < o->algos.n; i++)
        if (o->algos.id[i] == AR_ALGO_MPI_LAYER)
            return i;
    return -1;
}

/* The host-based algorithm (the MPI library's own included) with the
 * lowest latency at size s, or -1. */
static int best_host(const bench_opts_t *o, const ar_stat_t *stats, int s)
{
    int best = -1;
    for (int i = 0; i < o->algos.n; i++) {
        if (o->algos.id[i] == INCOLL_ALGO_INC ||
            o->algos.id[i] == AR_ALGO_INC_STREAM ||
            o->algos.id[i] == AR_ALGO_MPI_LAYER ||
            stats[s * o->algos.n + i].iters == 0)
            continue;
        if (best < 0 || stats[s * o->algos.n + i].avg_us <
                            stats[s * o->algos.n + best].avg_us)
            best = i;
    }
    return best;
}

static void print_layer_table(const bench_opts_t *o, const size_t *sizes,
                              int nsizes, const ar_stat_t *stats)
{
    int inc = inc_index(o), mpi = mpi_index(o), lay = layer_index(o);
    char sz[32];

    printf("\n# mpi-layer: MPI_Allreduce through libincoll_mpi; layer/inc: "
           "its latency over libincoll's own call's (1.00 = no overhead); "
           "mpi/layer: the MPI library's own over it (> 1: the layer is "
           "faster)\n");
    printf("%9s %6s %10s %13s %9s %10s %9s\n", "bytes", "", "inc(us)",
           "mpi-layer(us)", "layer/inc", "mpi(us)", "mpi/layer");
    for (int s = 0; s < nsizes; s++) {
        const ar_stat_t *sl = &stats[s * o->algos.n + lay];
        const ar_stat_t *si = inc >= 0 ? &stats[s * o->algos.n + inc] : NULL;
        const ar_stat_t *sm = mpi >= 0 ? &stats[s * o->algos.n + mpi] : NULL;
        if (sl->iters == 0)
            continue;
        printf("%9zu %6s", sizes[s], bench_size_str(sizes[s], sz, sizeof(sz)));
        if (si && si->iters > 0)
            printf(" %10.1f", si->avg_us);
        else
            printf(" %10s", "-");
        printf(" %13.1f", sl->avg_us);
        if (si && si->iters > 0 && si->avg_us > 0)
            printf(" %8.3fx", sl->avg_us / si->avg_us);
        else
            printf(" %9s", "-");
        if (sm && sm->iters > 0 && sl->avg_us > 0)
            printf(" %10.1f %8.2fx\n", sm->avg_us, sm->avg_us / sl->avg_us);
        else
            printf(" %10s %9s\n", "-", "-");
    }
}

size_t ar_crossover(const bench_opts_t *o, const size_t *sizes, int nsizes,
                    const ar_stat_t *stats)
{
    int inc = inc_index(o), st = stream_index(o);
    size_t from = 0;

    if (inc < 0 || st < 0)
        return 0;
    /* From the largest size down, as long as streaming is faster. */
    for (int s = nsizes - 1; s >= 0; s--) {
        const ar_stat_t *si = &stats[s * o->algos.n + inc];
        const ar_stat_t *ss = &stats[s * o->algos.n + st];
        if (si->iters == 0 || ss->iters == 0)
            continue;
        if (ss->avg_us >= si->avg_us)
            break;
        from = sizes[s];
    }
    return from;
}

/* inc (the slots) against inc-stream (streaming) at every size they both
 * ran, and where streaming starts to win. */
static void print_stream_table(const bench_opts_t *o, const bench_fabric_t *f,
                               const size_t *sizes, int nsizes,
                               const ar_stat_t *stats, const ar_ref_t *ref)
{
    int inc = inc_index(o), st = stream_index(o);
    size_t from = ar_crossover(o, sizes, nsizes, stats);
    double link_MBps = (double)f->link_rate / 8e6;
    char sz[32];

    printf("\n# streaming (inc-stream: the tree locked, INCOLL_STREAM_LOCK) "
           "against the slots (inc) at each size; stream/slots: ratio of avg "
           "latencies (< 1: streaming is faster)%s%s\n",
           f->link_rate ? "; link%: bandwidth / link rate" : "",
           ref ? "; pp%: bandwidth / ping-pong bandwidth" : "");
    printf("%9s %6s %10s %10s %9s %12s %12s", "bytes", "", "inc(us)",
           "stream(us)", "stream/", "inc MB/s", "stream MB/s");
    if (f->link_rate)
        printf(" %6s %6s", "link%", "link%");
    if (ref)
        printf(" %6s %6s", "pp%", "pp%");
    printf("\n%9s %6s %10s %10s %9s\n", "", "", "", "", "slots");
    for (int s = 0; s < nsizes; s++) {
        const ar_stat_t *si = &stats[s * o->algos.n + inc];
        const ar_stat_t *ss = &stats[s * o->algos.n + st];
        double pp = ref ? ref_bw(ref, sizes[s]) : 0;
        if (si->iters == 0 || ss->iters == 0)
            continue;
        printf("%9zu %6s %10.1f %10.1f %8.3f %12.2f %12.2f", sizes[s],
               bench_size_str(sizes[s], sz, sizeof(sz)), si->avg_us, ss->avg_us,
               si->avg_us > 0 ? ss->avg_us / si->avg_us : 0, si->bw_MBps,
               ss->bw_MBps);
        if (f->link_rate)
            printf(" %5.1f%% %5.1f%%", 100.0 * si->bw_MBps / link_MBps,
                   100.0 * ss->bw_MBps / link_MBps);
        if (ref && pp > 0)
            printf(" %5.1f%% %5.1f%%", 100.0 * si->bw_MBps / pp,
                   100.0 * ss->bw_MBps / pp);
        else if (ref)
            printf(" %6s %6s", "-", "-");
        printf("\n");
    }
    if (from)
        printf("# crossover: streaming is faster from %zu bytes (%s) up, at "
               "every size measured\n",
               from, bench_size_str(from, sz, sizeof(sz)));
    else
        printf("# crossover: streaming is not faster at the largest size "
               "measured\n");
}

void ar_print_table(const bench_opts_t *o, const bench_fabric_t *f,
                    const size_t *sizes, int nsizes, const ar_stat_t *stats,
                    const ar_ref_t *ref)
{
    char desc[256], sz[32], tx[32], pk[32];
    int inc = inc_index(o), mpi = mpi_index(o);
    double link_MBps = (double)f->link_rate / 8e6;

    bench_fabric_describe(f, desc, sizeof(desc));
    printf("# incoll bench allreduce: %s\n", desc);
    printf("# float32 sum; algorithms run side by side, alternating every "
           "iteration; every result verified\n");
    printf("# latency: per rank averaged over iterations, then avg/min/max "
           "over ranks (OSU); MB/s = bytes / avg latency\n");
    printf(
        "# tx/host: UDP payload bytes a host sent per operation, pkts: "
        "datagrams (socket counters); cpu: user+sys per rank and operation\n");
    if (layer_index(o) >= 0)
        printf("# mpi-layer: the same MPI_Allreduce through libincoll_mpi's "
               "offload path (as a preloaded program makes it), on inc's "
               "libincoll communicator; its tx/host and pkts are inc's "
               "socket counters\n");
    if (mpi >= 0)
        printf("# mpi: the MPI library's own MPI_Allreduce (ranks under "
               "mpirun); its tx/host and pkts are %s\n",
               f->emulated ? "the frames the host sent on its emulated link "
                             "(TCP/IP headers and acks included)"
                           : "not measured on loopback (-): the ranks share "
                             "one interface and MPI has no socket of ours");
    printf("# spread: time from an operation's first start to each rank's "
           "completion, over ranks and iterations: min/p25/p50/p75/max\n");
    printf("%-12s %9s %6s %10s %10s %10s %9s %10s %7s %8s  %s\n", "algo",
           "bytes", "iters", "avg(us)", "min(us)", "max(us)", "MB/s", "tx/host",
           "pkts", "cpu(us)", "spread min/p25/p50/p75/max (us)");
    for (int s = 0; s < nsizes; s++) {
        for (int ai = 0; ai < o->algos.n; ai++) {
            const ar_stat_t *st = &stats[s * o->algos.n + ai];
            if (st->iters == 0)
                continue;
            printf("%-12s %9zu %6d %10.1f %10.1f %10.1f %9.2f %10s %7s "
                   "%8.1f  %.0f/%.0f/%.0f/%.0f/%.0f\n",
                   ar_algo_str(o->algos.id[ai]), sizes[s], st->iters,
                   st->avg_us, st->min_us, st->max_us, st->bw_MBps,
                   bench_num_str(st->tx_bytes, 0, tx, sizeof(tx)),
                   bench_num_str(st->tx_packets, 1, pk, sizeof(pk)), st->cpu_us,
                   st->spread[0], st->spread[1], st->spread[2], st->spread[3],
                   st->spread[4]);
        }
    }
    if (layer_index(o) >= 0)
        print_layer_table(o, sizes, nsizes, stats);
    if (inc >= 0 && stream_index(o) >= 0)
        print_stream_table(o, f, sizes, nsizes, stats, ref);
    if (inc < 0 || o->algos.n < 2)
        return;
    for (int s = 0, any = 0; !any; s++) {
        if (s == nsizes)
            return; /* no host-based algorithm to compare with */
        any = best_host(o, stats, s) >= 0;
    }
    printf("\n# speedup of inc over the best host-based algorithm at each size "
           "(ratio of avg latencies)%s%s\n",
           f->link_rate ? "; link%: inc bandwidth / link rate" : "",
           ref ? "; pp%: inc bandwidth / ping-pong bandwidth" : "");
    printf("%9s %6s %10s %-13s %10s %8s %9s", "bytes", "", "inc(us)",
           "best host", "(us)", "speedup", "inc MB/s");
    if (mpi >= 0)
        printf(" %10s %7s", "mpi(us)", "vs mpi");
    if (f->link_rate)
        printf(" %6s", "link%");
    if (ref)
        printf(" %6s", "pp%");
    printf("\n");
    for (int s = 0; s < nsizes; s++) {
        int b = best_host(o, stats, s);
        const ar_stat_t *si = &stats[s * o->algos.n + inc];
        const ar_stat_t *sb = &stats[s * o->algos.n + (b < 0 ? 0 : b)];
        if (b < 0 || si->iters == 0)
            continue;
        printf("%9zu %6s %10.1f %-13s %10.1f %7.2fx %9.2f", sizes[s],
               bench_size_str(sizes[s], sz, sizeof(sz)), si->avg_us,
               ar_algo_str(o->algos.id[b]), sb->avg_us,
               si->avg_us > 0 ? sb->avg_us / si->avg_us : 0, si->bw_MBps);
        if (mpi >= 0) {
            const ar_stat_t *sm = &stats[s * o->algos.n + mpi];
            if (sm->iters > 0)
                printf(" %10.1f %6.2fx", sm->avg_us,
                       si->avg_us > 0 ? sm->avg_us / si->avg_us : 0);
            else
                printf(" %10s %7s", "-", "-");
        }
        if (f->link_rate)
            printf(" %5.1f%%", 100.0 * si->bw_MBps / link_MBps);
        if (ref) {
            double pp = ref_bw(ref, sizes[s]);
            if (pp > 0)
                printf(" %5.1f%%", 100.0 * si->bw_MBps / pp);
            else
                printf(" %6s", "-");
        }
        printf("\n");
    }
}

int ar_write_csv(const char *path, const bench_opts_t *o,
                 const bench_fabric_t *f, const size_t *sizes, int nsizes,
                 const ar_stat_t *stats)
{
    FILE *fp = bench_csv_open(
        path, "bench allreduce",
        "algo,bytes,iters,avg_us,min_us,max_us,bw_MBps,"
        "tx_bytes_per_op,tx_packets_per_op,cpu_us_per_op,"
        "retransmits_per_op,spread_min_us,spread_p25_us,"
        "spread_p50_us,spread_p75_us,spread_max_us,"
        "speedup_vs_best_host,best_host,hosts,emulated,link_rate_bps");
    int inc = inc_index(o);
    if (fp == NULL)
        return -1;
    for (int s = 0; s < nsizes; s++) {
        int b = inc >= 0 ? best_host(o, stats, s) : -1;
        for (int ai = 0; ai < o->algos.n; ai++) {
            const ar_stat_t *st = &stats[s * o->algos.n + ai];
            if (st->iters == 0)
                continue;
            char tx[32], pk[32], rt[32];
            /* Counters not measured are empty fields. */
            bench_csv_num(st->tx_bytes, 1, tx, sizeof(tx));
            bench_csv_num(st->tx_packets, 2, pk, sizeof(pk));
            bench_csv_num(st->retrans, 3, rt, sizeof(rt));
            fprintf(fp,
                    "%s,%zu,%d,%.3f,%.3f,%.3f,%.4f,%s,%s,%.3f,%s,"
                    "%.3f,%.3f,%.3f,%.3f,%.3f,",
                    ar_algo_str(o->algos.id[ai]), sizes[s], st->iters,
                    st->avg_us, st->min_us, st->max_us, st->bw_MBps, tx, pk,
                    st->cpu_us, rt, st->spread[0], st->spread[1], st->spread[2],
                    st->spread[3], st->spread[4]);
            if (ai == inc && b >= 0)
                fprintf(fp, "%.4f,%s,",
                        stats[s * o->algos.n + b].avg_us / st->avg_us,
                        ar_algo_str(o->algos.id[b]));
            else
                fprintf(fp, ",,");
            fprintf(fp, "%d,%d,%" PRIu64 "\n", f->hosts, f->emulated,
                    f->link_rate);
        }
    }
    return bench_csv_close(fp, path, "bench allreduce");
}

int ar_write_plot(const char *path, const bench_opts_t *o,
                  const bench_fabric_t *f, const size_t *sizes, int nsizes,
                  const ar_stat_t *stats, const ar_ref_t *ref)
{
    bench_point_t *pts =
        calloc((size_t)nsizes * (size_t)o->algos.n + 1, sizeof(*pts));
    char title[320], desc[256], ref_name[64];
    plot_opts_t po;
    int ret, n = 0;

    if (pts == NULL)
        return -1;
    for (int ai = 0; ai < o->algos.n; ai++)
        for (int s = 0; s < nsizes; s++)
            if (stats[s * o->algos.n + ai].iters > 0)
                pts[n++] =
                    (bench_point_t){ar_algo_str(o->algos.id[ai]), sizes[s],
                                    stats[s * o->algos.n + ai].avg_us};
    bench_fabric_describe(f, desc, sizeof(desc));
    snprintf(title, sizeof(title), "incoll allreduce (float32 sum): %s", desc);
    memset(&po, 0, sizeof(po));
    po.title = title;
    po.link_MBps = (double)f->link_rate / 8e6;
    if (ref && ref->n > 0) {
        /* Ping-pong at its largest size: the rate a link really delivers
         * (smaller messages can beat it, see docs/benchmarks.md). */
        char sz[32];
        int last = 0;
        for (int i = 1; i < ref->n; i++)
            if (ref->bytes[i] > ref->bytes[last])
                last = i;
        po.ref_MBps = ref->bw[last];
        snprintf(ref_name, sizeof(ref_name), "ping-pong at %s (%.3g MB/s)",
                 bench_size_str(ref->bytes[last], sz, sizeof(sz)),
                 ref->bw[last]);
        po.ref_name = ref_name;
    }
    ret = bench_plot_points(path, "bench allreduce", &po, pts, n);
    free(pts);
    return ret;
}

/* ---- --loss ---------------------------------------------------------- */

size_t ar_loss_idx(const bench_opts_t *o, int nsizes, int li, int s, int ai)
{
    return ((size_t)li * (size_t)nsizes + (size_t)s) * (size_t)o->algos.n +
           (size_t)ai;
}

/* Adds the records of one run at rate index li into
 * acc[ar_loss_idx(li, s, ai)]. */
int ar_loss_accumulate(const bench_opts_t *o, const size_t *sizes, int nsizes,
                       int nranks, ar_rec_t **recs, int li, ar_loss_acc_t *acc)
{
    uint64_t base = 0;
    for (int s = 0; s < nsizes; s++) {
        uint64_t nops = (uint64_t)ar_iters_for(o, sizes[s]) *
                        (uint64_t)ar_nactive(o, sizes[s]);
        for (uint64_t p = base; p < base + nops; p++) {
            uint32_t ai = recs[0][p].algo_idx;
            ar_loss_acc_t *a;
            if (ai >= (uint32_t)o->algos.n)
                return -1;
            a = &acc[ar_loss_idx(o, nsizes, li, s, (int)ai)];
            for (int r = 0; r < nranks; r++) {
                const ar_rec_t *rc = &recs[r][p];
                if (a->n == a->cap) {
                    size_t ncap = a->cap ? 2 * a->cap : 256;
                    double *nl = realloc(a->lat_us, ncap * sizeof(double));
                    if (nl == NULL)
                        return -1;
                    a->lat_us = nl;
                    a->cap = ncap;
                }
                a->lat_us[a->n++] = (double)(rc->end_ns - rc->start_ns) / 1e3;
                if (rc->retrans == AR_NA || o->algos.id[ai] != INCOLL_ALGO_INC)
                    a->retrans_na = 1;
                else
                    a->retrans += (double)rc->retrans;
            }
        }
        base += nops;
    }
    return 0;
}

void ar_print_loss_table(const bench_opts_t *o, const bench_fabric_t *f,
                         const size_t *sizes, int nsizes, int base_li,
                         const ar_loss_stat_t *st)
{
    char desc[256], rt[32];
    bench_fabric_describe(f, desc, sizeof(desc));
    printf("# incoll bench allreduce --loss: %s\n", desc);
    printf("# every daemon and host drops what it sends with the given "
           "probability (INCOLL_FAULT_DROP)%s; %d round%s, rates "
           "interleaved; every result verified\n",
           o->burst > 1 ? ", in bursts (INCOLL_FAULT_BURST)" : "", o->rounds,
           o->rounds == 1 ? "" : "s");
    if (o->burst > 1)
        printf("# mean burst length %g datagrams\n", o->burst);
    printf("# latency of every rank's every operation: avg, p50, p99; "
           "goodput MB/s = bytes / avg latency; share: of the same "
           "algorithm's goodput at loss %g%%; retr/op: inc's "
           "retransmissions (timeout, fast and probe) per rank and "
           "operation\n",
           100 * o->loss[base_li]);
    printf("%8s %-12s %9s %7s %11s %11s %11s %9s %7s %8s\n", "loss(%)", "algo",
           "bytes", "samples", "avg(us)", "p50(us)", "p99(us)", "MB/s", "share",
           "retr/op");
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < o->algos.n; ai++)
            for (int li = 0; li < o->nloss; li++) {
                const ar_loss_stat_t *x =
                    &st[ar_loss_idx(o, nsizes, li, s, ai)];
                if (x->n == 0)
                    continue;
                printf("%8.2f %-12s %9zu %7zu %11.1f %11.1f %11.1f %9.2f "
                       "%6.1f%% %8s\n",
                       100 * o->loss[li], ar_algo_str(o->algos.id[ai]),
                       sizes[s], x->n, x->avg_us, x->p50_us, x->p99_us,
                       x->bw_MBps, 100 * x->share,
                       bench_num_str(x->retrans, 2, rt, sizeof(rt)));
            }
}

int ar_write_loss_csv(const char *path, const bench_opts_t *o,
                      const bench_fabric_t *f, const size_t *sizes, int nsizes,
                      const ar_loss_stat_t *st)
{
    FILE *fp = bench_csv_open(path, "bench allreduce",
                              "loss,burst,algo,bytes,samples,avg_us,p50_us,"
                              "p99_us,goodput_MBps,goodput_share,"
                              "retransmits_per_op,hosts,emulated,"
                              "link_rate_bps");
    if (fp == NULL)
        return -1;
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < o->algos.n; ai++)
            for (int li = 0; li < o->nloss; li++) {
                const ar_loss_stat_t *x =
                    &st[ar_loss_idx(o, nsizes, li, s, ai)];
                char rt[32];
                if (x->n == 0)
                    continue;
                bench_csv_num(x->retrans, 3, rt, sizeof(rt));
                fprintf(fp,
                        "%g,%g,%s,%zu,%zu,%.3f,%.3f,%.3f,%.4f,%.4f,%s,%d,%d,"
                        "%" PRIu64 "\n",
                        o->loss[li], o->burst > 1 ? o->burst : 1,
                        ar_algo_str(o->algos.id[ai]), sizes[s], x->n, x->avg_us,
                        x->p50_us, x->p99_us, x->bw_MBps, x->share, rt,
                        f->hosts, f->emulated, f->link_rate);
            }
    return bench_csv_close(fp, path, "bench allreduce");
}

int ar_write_loss_plot(const char *path, const bench_opts_t *o,
                       const bench_fabric_t *f, const size_t *sizes, int nsizes,
                       const ar_loss_stat_t *st)
{
    int ns = 0, ret;
    size_t cap = (size_t)nsizes * (size_t)o->algos.n;
    plot_curve_t *series = calloc(cap, sizeof(*series));
    double *buf = calloc(cap * 2 * (size_t)o->nloss, sizeof(double));
    char(*names)[48] = calloc(cap, sizeof(*names));
    char title[400], desc[256], sz[32];

    if (series == NULL || buf == NULL || names == NULL) {
        free(series);
        free(buf);
        free(names);
        return -1;
    }
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < o->algos.n; ai++) {
            double *x = buf + (size_t)ns * 2 * (size_t)o->nloss;
            int n = 0;
            for (int li = 0; li < o->nloss; li++) {
                const ar_loss_stat_t *v =
                    &st[ar_loss_idx(o, nsizes, li, s, ai)];
                if (v->n == 0)
                    continue;
                x[n] = 100 * o->loss[li];
                x[o->nloss + n] = 100 * v->share;
                n++;
            }
            if (n == 0)
                continue;
            snprintf(names[ns], sizeof(names[ns]), "%s %s",
                     ar_algo_str(o->algos.id[ai]),
                     bench_size_str(sizes[s], sz, sizeof(sz)));
            series[ns].name = names[ns];
            series[ns].style = PLOT_SERIES;
            series[ns].series = ns;
            series[ns].n = n;
            series[ns].x = x;
            series[ns].y = x + o->nloss;
            ns++;
        }
    bench_fabric_describe(f, desc, sizeof(desc));
    snprintf(title, sizeof(title), "incoll allreduce goodput under loss%s: %s",
             o->burst > 1 ? " (bursts)" : "", desc);
    {
        plot_panel_t panel = {"",
                              "loss rate (% of datagrams dropped)",
                              "goodput (% of the same algorithm's at the "
                              "lowest rate)",
                              0,
                              0,
                              0,
                              0,
                              0,
                              "bottom left",
                              series,
                              ns};
        plot_doc_t doc = {"incoll bench allreduce", title, 1000, 650};
        ret = plot_write(path, &doc, &panel, 1);
    }
    free(series);
    free(buf);
    free(names);
    return ret;
}

void ar_loss_stats(const bench_opts_t *o, const size_t *sizes, int nsizes,
                   int base_li, ar_loss_acc_t *acc, ar_loss_stat_t *st)
{
    size_t nacc = (size_t)o->nloss * (size_t)nsizes * (size_t)o->algos.n;

    for (size_t i = 0; i < nacc; i++) {
        ar_loss_acc_t *a = &acc[i];
        bench_summary_t sm;
        if (a->n == 0)
            continue;
        bench_summarize(a->lat_us, a->n, &sm);
        st[i].n = a->n;
        st[i].avg_us = sm.avg;
        st[i].p50_us = sm.p50;
        st[i].p99_us = sm.p99;
        st[i].retrans = a->retrans_na ? NAN : a->retrans / (double)a->n;
    }
    for (int s = 0; s < nsizes; s++)
        for (int ai = 0; ai < o->algos.n; ai++) {
            size_t b = ar_loss_idx(o, nsizes, base_li, s, ai);
            for (int li = 0; li < o->nloss; li++) {
                ar_loss_stat_t *x = &st[ar_loss_idx(o, nsizes, li, s, ai)];
                if (x->n == 0)
                    continue;
                x->bw_MBps = (double)sizes[s] / x->avg_us;
                x->share = st[b].avg_us > 0 ? st[b].avg_us / x->avg_us : 0;
            }
        }
}
