/*
 * The rank side of `incoll bench allreduce` (the hidden `incoll bench
 * _allreduce`, or the MPI worker: bench_allreduce_rank_run).
 *
 * For every size and iteration each rank runs every algorithm once, in an
 * order drawn for the iteration
 * (bench_run_order) so no algorithm always follows the same one; before
 * each operation the ranks meet in a barrier in shared memory (not timed,
 * bench_rank.h). Around the operation it reads the monotonic clock,
 * getrusage (user+sys of this process only) and the library's counters
 * (src/host/counters.h: bytes and datagrams its UDP socket really sent,
 * retransmissions and acks included, and the in-network engine's
 * retransmissions). MPI's traffic has no socket of ours: for `mpi` the
 * bytes and packets are those of the emulated host's link (/proc/net/dev
 * of its namespace), not measured on loopback.
 *
 * Inputs are float32 small integers, x_r[i] = a(r) + b(i), so the sum is
 * exact and known: A + P*b(i) with A the sum of a(r); every result is
 * checked element by element and a wrong one fails the run.
 * INCOLL_BENCH_CORRUPT=1 (or "result") makes the last rank change one
 * element of its result, "input" one element of its input, once, to prove
 * that the check catches it. Each rank writes its records (ar_rec_t) to
 * OUT/rank-R.rec for the driver.
 */
#include "bench_allreduce.h"
#include "bench_rank.h"

#include "common/clock.h"
#include "common/settings.h"
#include "host/counters.h"
#include "host/host.h"
#include "host/stream.h"
#include "common/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The input pattern: a(r) + b(i), b cycling over 17 values. */
typedef struct {
    float b[17];
    unsigned start; /* b index of element 0 */
    float a;        /* this rank's a(r) */
    float sum_a;    /* sum over ranks */
} pattern_t;

static void pattern_make(pattern_t *p, int rank, int size, int iter, int k)
{
    for (int j = 0; j < 17; j++)
        p->b[j] = (float)(j - 8);
    p->start = (unsigned)(iter + 5 * k) % 17;
    p->a = (float)((rank * 7 + iter * 3 + k) % 13);
    p->sum_a = 0;
    for (int r = 0; r < size; r++)
        p->sum_a += (float)((r * 7 + iter * 3 + k) % 13);
}

static void pattern_fill(const pattern_t *p, float *x, size_t n)
{
    unsigned j = p->start;
    for (size_t i = 0; i < n; i++) {
        x[i] = p->a + p->b[j];
        j += 14; /* 31 mod 17: neighbours differ, segments shift the phase */
        if (j >= 17)
            j -= 17;
    }
}

/* Index of the first wrong element, or n. */
static size_t pattern_check(const pattern_t *p, int size, const float *x,
                            size_t n, float *want_p)
{
    unsigned j = p->start;
    for (size_t i = 0; i < n; i++) {
        float want = p->sum_a + (float)size * p->b[j];
        if (x[i] != want) {
            *want_p = want;
            return i;
        }
        j += 14;
        if (j >= 17)
            j -= 17;
    }
    return n;
}

/* What one rank needs through its run. */
typedef struct {
    const bench_opts_t *o;
    const bench_mpi_t *mpi;
    bench_rank_t r;
    bench_barrier_t *bar;
    float *send, *recv;
    int have_uplink; /* an emulated host's link to count MPI's traffic */
    int corrupt_result, corrupt_input, corrupted;
    int streams; /* inc-stream is listed: inc and it set the stream mode */
} ar_rank_t;

/*
 * Runs algorithm index ai once at size index s, iteration it (timed when
 * it >= warm), checks the result and fills *rec. Returns 0, 1 on an
 * error, 3 on a wrong result (printed).
 */
static int one_op(ar_rank_t *k, const size_t *sizes, int s, int it, int warm,
                  int ai, ar_rec_t *rec)
{
    const char *who = "bench allreduce";
    const bench_opts_t *o = k->o;
    size_t count = sizes[s] / 4, bad;
    int algo = o->algos.id[ai], rank = k->r.rank, size = k->r.size;
    int is_mpi = algo == AR_ALGO_MPI, mpi_ret = 0, corrupt_now;
    uint64_t c0, c1, b0 = 0, p0 = 0, b1 = 0, p1 = 0, t0, t1;
    host_counters_t h0, h1;
    incoll_status_t status;
    pattern_t pat;
    float want = 0;
    char sz[32];

    bench_size_str(sizes[s], sz, sizeof(sz));
    /* The first timed operation of the run is the one the last rank
     * corrupts, when asked to. */
    corrupt_now = (k->corrupt_input || k->corrupt_result) && rank == size - 1 &&
                  s == 0 && it == warm && !k->corrupted;
    k->corrupted |= corrupt_now;
    pattern_make(&pat, rank, size, it, ai);
    pattern_fill(&pat, k->send, count);
    if (corrupt_now && k->corrupt_input)
        k->send[count / 2] += 1.0f;
    memset(k->recv, 0xff, count * sizeof(float));
    bench_barrier_wait(k->bar, size, k->r.world);
    if (is_mpi && k->have_uplink)
        bench_netdev_tx("uplink", &b0, &p0);
    c0 = bench_cpu_ns();
    host_counters_read(k->r.world, &h0);
    /* inc-stream streams; the others stay on the slots beside it. */
    if (k->streams && !is_mpi)
        host_stream_mode(k->r.world, algo == AR_ALGO_INC_STREAM ? 1 : -1);
    t0 = now_ns();
    if (is_mpi || algo == AR_ALGO_MPI_LAYER) {
        mpi_ret = is_mpi ? k->mpi->allreduce(k->send, k->recv, count)
                         : k->mpi->layer_allreduce(k->send, k->recv, count);
        status = mpi_ret == 0 ? INCOLL_OK : INCOLL_ERR_IO;
    } else {
        status = incoll_allreduce_algo(
            k->r.world,
            algo == AR_ALGO_INC_STREAM ? INCOLL_ALGO_INC : (incoll_algo_t)algo,
            k->send, k->recv, count, INCOLL_FLOAT32, INCOLL_OP_SUM);
    }
    t1 = now_ns();
    host_counters_read(k->r.world, &h1);
    c1 = bench_cpu_ns();
    if (is_mpi && k->have_uplink)
        bench_netdev_tx("uplink", &b1, &p1);
    if (status != INCOLL_OK) {
        if (is_mpi || algo == AR_ALGO_MPI_LAYER)
            fprintf(stderr,
                    "incoll %s: rank %d: %s MPI_Allreduce of %s bytes, "
                    "iteration %d: MPI error %d\n",
                    who, rank, ar_algo_str(algo), sz, it, mpi_ret);
        else
            fprintf(stderr,
                    "incoll %s: rank %d: allreduce %s of %s bytes, "
                    "iteration %d: %s\n",
                    who, rank, ar_algo_str(algo), sz, it,
                    incoll_status_string(status));
        return 1;
    }
    rec->algo_idx = (uint32_t)ai;
    rec->iter = (uint32_t)(it - warm);
    rec->start_ns = t0;
    rec->end_ns = t1;
    rec->cpu_ns = c1 - c0;
    if (!is_mpi) {
        /* No in-network engine when the communicator could not get a
         * group (inc then fails with the reason), or a new one after a
         * recovery: its retransmissions are not comparable. */
        int same = h0.has_engine && h1.engine == h0.engine;
        rec->tx_bytes = h1.tx_bytes - h0.tx_bytes;
        rec->tx_packets = h1.tx_packets - h0.tx_packets;
        rec->retrans = same ? h1.eng_retransmits - h0.eng_retransmits : AR_NA;
    } else if (k->have_uplink) {
        rec->tx_bytes = b1 - b0;
        rec->tx_packets = p1 - p0;
        rec->retrans = AR_NA;
    } else {
        rec->tx_bytes = rec->tx_packets = rec->retrans = AR_NA;
    }
    if (corrupt_now && k->corrupt_result)
        k->recv[count / 2] += 1.0f;
    bad = pattern_check(&pat, size, k->recv, count, &want);
    if (bad < count) {
        fprintf(stderr,
                "incoll %s: rank %d: WRONG RESULT: %s allreduce of %s "
                "bytes, iteration %d: element %zu is %g, expected %g\n",
                who, rank, ar_algo_str(algo), sz, it, bad, (double)k->recv[bad],
                (double)want);
        return 3;
    }
    return 0;
}

static int write_records(const char *out, int rank, int nsizes, int nalgos,
                         const ar_rec_t *recs, uint64_t nrecs)
{
    char path[PATH_MAX + 32];
    ar_file_hdr_t h = {AR_MAGIC, (uint32_t)nsizes, (uint32_t)nalgos,
                       (uint32_t)rank, nrecs};
    FILE *f;

    snprintf(path, sizeof(path), "%s/rank-%d.rec", out, rank);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(&h, sizeof(h), 1, f) != 1 ||
        fwrite(recs, sizeof(*recs), nrecs, f) != nrecs) {
        fprintf(stderr,
                "incoll bench allreduce: rank %d: cannot write %s: %s\n", rank,
                path, log_strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f) == 0 ? 0 : -1;
}

int bench_allreduce_rank_main(int argc, char **argv)
{
    return bench_allreduce_rank_run(argc, argv, NULL);
}

int bench_allreduce_rank_run(int argc, char **argv, const bench_mpi_t *mpi)
{
    const char *who = "bench allreduce";
    const char *corrupt = setting_str(SETTING_BENCH_CORRUPT);
    ar_rank_t k;
    bench_opts_t o;
    size_t *sizes = NULL;
    ar_rec_t *recs = NULL;
    bench_barrier_t *gate = NULL;
    uint64_t nrecs, ri = 0, total_ops = 0, done_ops = 0, nb, np;
    int nsizes, ret = 1, rc;

    if (ar_parse(argc, argv, &o, &rc) != 0 || o.out == NULL) {
        fprintf(stderr, "incoll %s: the rank side needs --out DIR\n", who);
        return 2;
    }
    if (ar_has_mpi(&o) && mpi == NULL) {
        fprintf(stderr,
                "incoll %s: the mpi algorithm runs in the MPI worker "
                "(" BENCH_MPI_WORKER "), not under `incoll run`\n",
                who);
        return 2;
    }
    memset(&k, 0, sizeof(k));
    k.o = &o;
    k.mpi = mpi;
    k.streams = bench_algos_find(&o.algos, AR_ALGO_INC_STREAM) >= 0;
    if (corrupt && *corrupt && strcmp(corrupt, "0") != 0) {
        k.corrupt_input = strcmp(corrupt, "input") == 0;
        k.corrupt_result = !k.corrupt_input;
    }
    if (bench_rank_start(&k.r, mpi, who) != 0)
        return 1;
    /* The MPI library's traffic has no socket of ours to count: in an
     * emulated host, the host's link counts it. */
    k.have_uplink = bench_netdev_tx("uplink", &nb, &np) == 0;
    nsizes = bench_size_list(o.min_size, o.max_size, &sizes);
    if (nsizes <= 0)
        goto out;
    nrecs = ar_nrecs(&o, sizes, nsizes);
    for (int s = 0; s < nsizes; s++)
        total_ops += (uint64_t)(ar_iters_for(&o, sizes[s]) +
                                ar_warmup_for(&o, sizes[s])) *
                     (uint64_t)ar_nactive(&o, sizes[s]);
    k.send = malloc(sizes[nsizes - 1]);
    k.recv = malloc(sizes[nsizes - 1]);
    recs = calloc(nrecs, sizeof(*recs));
    k.bar = bench_barrier_open(o.out);
    if (o.gate && o.jobs > 1 && (gate = bench_barrier_open(o.gate)) == NULL) {
        fprintf(stderr, "incoll %s: rank %d: cannot map %s/barrier: %s\n", who,
                k.r.rank, o.gate, log_strerror(errno));
        goto out;
    }
    if (k.bar == NULL) {
        fprintf(stderr, "incoll %s: rank %d: cannot map %s/barrier: %s\n", who,
                k.r.rank, o.out, log_strerror(errno));
        goto out;
    }
    if (k.send == NULL || k.recv == NULL || recs == NULL) {
        fprintf(stderr, "incoll %s: rank %d: out of memory\n", who, k.r.rank);
        goto out;
    }
    for (int s = 0; s < nsizes; s++) {
        int iters = ar_iters_for(&o, sizes[s]);
        int warm = ar_warmup_for(&o, sizes[s]);
        char sz[32];
        bench_size_str(sizes[s], sz, sizeof(sz));
        for (int it = 0; it < warm + iters; it++) {
            for (int j = 0; j < o.algos.n; j++) {
                int ai = bench_run_order(o.algos.n, it, j);
                ar_rec_t rec;
                if (!bench_algos_active(&o.algos, ai, sizes[s]))
                    continue;
                if (gate && s == 0 && it == warm && j == 0) {
                    /* --jobs: every job's ranks, warmed up (their groups
                     * made), start timing together. */
                    bench_barrier_wait(gate, k.r.size * o.jobs, k.r.world);
                }
                rc = one_op(&k, sizes, s, it, warm, ai, &rec);
                if (rc != 0) {
                    ret = rc;
                    goto out;
                }
                if (it >= warm)
                    recs[ri++] = rec;
                done_ops++;
                if (k.r.rank == 0)
                    bench_progress_write(o.progress, 0,
                                         "[%3d%%] %s bytes (%d/%d), iteration "
                                         "%d/%d%s",
                                         (int)(100 * done_ops / total_ops), sz,
                                         s + 1, nsizes, it + 1, warm + iters,
                                         it < warm ? " (warm-up)" : "");
            }
        }
    }
    bench_barrier_wait(k.bar, k.r.size, k.r.world);
    if (write_records(o.out, k.r.rank, nsizes, o.algos.n, recs, nrecs) != 0)
        goto out;
    ret = 0;
out:
    bench_barrier_close(gate);
    bench_barrier_close(k.bar);
    free(k.send);
    free(k.recv);
    free(recs);
    free(sizes);
    bench_rank_stop(&k.r);
    return ret;
}
