/*
 * The ring allreduce without stored schedules, and by its step recurrence
 * (--recurrence, docs/simulator.md "The ring by its recurrence").
 *
 * Steps. algo_schedule(ALGO_RING) lists 2(N - 1) steps per rank: at
 * 65,536 hosts 131,070 steps of 56 bytes for each of 65,536 ranks, 449
 * GiB. Step i of rank r is a function of (r, N, count, i) alone, so it is
 * computed when needed (sim_ring_step), and when the vector has fewer
 * elements than there are ranks, most blocks are empty and a rank's
 * non-empty steps are listed directly (sim_ring_active): at most 6 per
 * rank for 8 bytes. sim_ring_check proves both equal to algo_schedule() on
 * sample ranks before every ring measurement.
 *
 * Recurrence. In the ring each host sends to the next one only and
 * receives from the previous one only, so every link direction of the
 * tree carries at most one of its flows: no message ever shares
 * bandwidth, and SimGrid's CM02 charges each the latency of its route
 * plus its size over the route's narrowest link. A rank's step ends
 * when its own block has arrived and the previous rank's block has
 * arrived (the mailbox has a permanent receiver: blocks land without
 * waiting for the receive), then it sleeps for the reduction. With
 * T_r(i) the time rank r starts step i:
 *
 *   T_r(i+1) = max(T_r(i) + D_r(i),  T_{r-1}(i) + D_{r-1}(i)) + C_r(i)
 *
 * (a term only when that block is not empty), D the message's time on
 * its route, C the reduction's. This is what the actors of sim_run.c do,
 * computed without SimGrid: N doubles instead of N actors and 2N(N - 1)
 * messages. When every block has the same size, the step matrix is the
 * same for a whole phase (reduce-scatter or allgather), and once one step
 * moves every rank by the same amount it is a fixed point of the max-plus
 * map (max(a + x, b + y) + c is shifted by the shift of a and b), so the
 * rest of the phase is that shift times its steps: the computation jumps
 * there (shifts equal within 1 fs count as equal: the rounding of the
 * times' doubles, far below the us by which they differ otherwise). Equal to
 * the full simulation to the picosecond where both fit
 * (sim_ring_recurrence_matches_full_run).
 */
#include "sim/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void block_of(size_t count, int size, long i, size_t *off_p,
                     size_t *cnt_p)
{
    size_t n = (size_t)size, b = (size_t)(((i % size) + size) % size);
    size_t q = count / n, rem = count % n;
    *off_p = b * q + (b < rem ? b : rem);
    *cnt_p = q + (b < rem ? 1 : 0);
}

int sim_ring_nsteps(int size, size_t count)
{
    return size > 1 && count > 0 ? 2 * (size - 1) : 0;
}

void sim_ring_step(int rank, int size, size_t count, int i, algo_step_t *st)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int rs = i < size - 1, s = rs ? i : i - (size - 1);
    size_t soff, scnt, roff, rcnt;

    memset(st, 0, sizeof(*st));
    /* Reduce-scatter: send block r - s - 1, fold block r - s - 2 in (the
     * received partial sum on the left); allgather: pass block r - s on,
     * copy block r - s - 1 in. */
    block_of(count, size, (long)rank - s - (rs ? 1 : 0), &soff, &scnt);
    block_of(count, size, (long)rank - s - (rs ? 2 : 1), &roff, &rcnt);
    st->send_peer = scnt ? next : -1;
    st->send_off = soff;
    st->send_count = scnt;
    st->recv_peer = rcnt ? prev : -1;
    st->recv_off = roff;
    st->recv_count = rcnt;
    st->recv_reduce = rcnt && rs;
    st->recv_left = rcnt && rs;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int sim_ring_active(int rank, int size, size_t count, int *steps, int max)
{
    int n = 0;
    if (count >= (size_t)size)
        return -1;
    /* Only blocks 0..count-1 hold an element (block_of). A step is empty
     * unless its send block x or receive block x - 1 is one of them, that
     * is unless x is in [0, count]: reduce-scatter x = r - s - 1,
     * allgather x = r - s. */
    for (int phase = 0; phase < 2; phase++) {
        for (int x = 0; x <= (int)count; x++) {
            int s = ((rank - x - (phase ? 0 : 1)) % size + size) % size;
            if (s > size - 2)
                continue;
            if (n >= max)
                return -2;
            steps[n++] = phase ? size - 1 + s : s;
        }
    }
    qsort(steps, (size_t)n, sizeof(*steps), cmp_int);
    return n;
}

static int same_step(const algo_step_t *a, const algo_step_t *b)
{
    if (a->send_peer != b->send_peer || a->recv_peer != b->recv_peer)
        return 0;
    if (a->send_peer >= 0 &&
        (a->send_off != b->send_off || a->send_count != b->send_count))
        return 0;
    if (a->recv_peer >= 0 &&
        (a->recv_off != b->recv_off || a->recv_count != b->recv_count ||
         a->recv_reduce != b->recv_reduce || a->recv_left != b->recv_left))
        return 0;
    return 1;
}

int sim_ring_check(int size, size_t count)
{
    int max = algo_max_steps(ALGO_RING, size), ret = -1;
    algo_step_t *want = malloc((size_t)(max > 0 ? max : 1) * sizeof(*want));
    int *act = malloc((2 * (size_t)size + 2) * sizeof(*act));
    int ranks[4] = {0, 1 % size, size / 2, size - 1};

    if (want == NULL || act == NULL)
        goto out;
    for (int k = 0; k < 4; k++) {
        int r = ranks[k], n, na, j = 0;
        n = algo_schedule(ALGO_RING, r, size, count, want, max);
        if (n != sim_ring_nsteps(size, count))
            goto out;
        na = sim_ring_active(r, size, count, act, 2 * size + 2);
        for (int i = 0; i < n; i++) {
            algo_step_t got;
            int empty = want[i].send_peer < 0 && want[i].recv_peer < 0;
            sim_ring_step(r, size, count, i, &got);
            if (!same_step(&got, &want[i]))
                goto out;
            /* The active list names exactly the non-empty steps. */
            if (na >= 0) {
                int listed = j < na && act[j] == i;
                if (listed == empty)
                    goto out;
                j += listed;
            }
        }
        if (na >= 0 && j != na)
            goto out;
    }
    ret = 0;
out:
    if (ret != 0)
        fprintf(stderr,
                "incoll-sim: the ring's steps on %d ranks differ from "
                "algo_schedule()'s, or no memory to compare them\n",
                size);
    free(want);
    free(act);
    return ret;
}

/* ---- the recurrence ----------------------------------------------------- */

typedef struct {
    int n;
    size_t count;
    double *lat; /* per rank: latency of its route to the next rank */
    double *Bps; /* per rank: bandwidth of that route's narrowest link */
    const sim_config_t *cfg;
} ring_t;

/* Latency and narrowest bandwidth of the route from host r to host s in
 * the platform of sim_platform.c: each host's own link, and between
 * subtrees the up links of the switches crossed, each of latency L and
 * of as many links of rate R as hosts below it, over --oversub. */
static void route_of(const fabric_conf_t *conf, const int *depth,
                     const int *below, const sim_config_t *cfg, int r, int s,
                     double *lat_p, double *Bps_p)
{
    int a = conf->hosts[r].leaf, b = conf->hosts[s].leaf, hops = 2;
    double bw = cfg->link_Bps;

    while (a != b) {
        int up_a = depth[a] >= depth[b], up_b = depth[b] >= depth[a];
        int ends[2] = {up_a ? a : -1, up_b ? b : -1};
        for (int k = 0; k < 2; k++) {
            double width;
            if (ends[k] < 0)
                continue;
            width = ceil((double)below[ends[k]] / cfg->oversub - 1e-9);
            if ((width < 1 ? 1 : width) * cfg->link_Bps < bw)
                bw = (width < 1 ? 1 : width) * cfg->link_Bps;
            hops++;
        }
        if (up_a)
            a = conf->ans[a].parent;
        if (up_b)
            b = conf->ans[b].parent;
    }
    *lat_p = hops * cfg->link_lat_s;
    *Bps_p = bw;
}

static int ring_init(ring_t *g, const sim_config_t *cfg,
                     const fabric_conf_t *conf, size_t count)
{
    int na = conf->nans, ret = -1;
    int *depth = calloc((size_t)na, sizeof(int));
    int *below = calloc((size_t)na, sizeof(int));

    memset(g, 0, sizeof(*g));
    g->n = conf->nhosts;
    g->count = count;
    g->cfg = cfg;
    g->lat = malloc((size_t)g->n * sizeof(double));
    g->Bps = malloc((size_t)g->n * sizeof(double));
    if (depth == NULL || below == NULL || g->lat == NULL || g->Bps == NULL)
        goto out;
    for (int a = 0; a < na; a++)
        for (int p = conf->ans[a].parent; p >= 0; p = conf->ans[p].parent)
            depth[a]++;
    for (int r = 0; r < g->n; r++)
        for (int a = conf->hosts[r].leaf; a >= 0; a = conf->ans[a].parent)
            below[a]++;
    for (int r = 0; r < g->n; r++)
        route_of(conf, depth, below, cfg, r, (r + 1) % g->n, &g->lat[r],
                 &g->Bps[r]);
    ret = 0;
out:
    free(depth);
    free(below);
    return ret;
}

static void ring_free(ring_t *g)
{
    free(g->lat);
    free(g->Bps);
}

/* When the block of step i that rank r sends lands (the actors' put and
 * SimGrid's latency-then-transfer: start + latency + size / bandwidth). */
static double arrive(const ring_t *g, int r, double start, size_t elems)
{
    return start + g->lat[r] +
           (double)sim_p2p_len(g->cfg, elems * 4) / g->Bps[r];
}

/* T_r(i+1) from T_r(i) = mine and T_{r-1}(i) = prev. */
static double step_time(const ring_t *g, int r, int i, double mine, double prev)
{
    algo_step_t st;
    double t = mine;
    sim_ring_step(r, g->n, g->count, i, &st);
    if (st.send_peer >= 0)
        t = arrive(g, r, mine, st.send_count);
    if (st.recv_peer >= 0) {
        double a = arrive(g, st.recv_peer, prev, st.recv_count);
        if (a > t)
            t = a;
        if (st.recv_reduce)
            t += sim_host_reduce_s(g->cfg, st.recv_count * 4);
    }
    return t;
}

/* Every rank's step i at once when every block holds an element (count
 * >= N): step_time's arithmetic, in the same order, without computing
 * each rank's step from scratch. A[r] is when rank r's block lands at
 * r + 1 (and r's send completes); tx[c][r] and red[c] are a block of
 * class c's transfer time on r's route and reduction time, class 1 the
 * blocks with one element more. */
static void dense_step(const ring_t *g, int i, const double *T, double *U,
                       double *A, double *const tx[2], const double red[2])
{
    int n = g->n, rs = i < n - 1, s = rs ? i : i - (n - 1);
    size_t rem = g->count % (size_t)n;
    long b = ((-(long)s - (rs ? 1 : 0)) % n + n) % n; /* rank 0's block */

    for (int r = 0; r < n; r++) {
        A[r] = T[r] + g->lat[r] + tx[(size_t)b < rem][r];
        if (++b == n)
            b = 0;
    }
    b = ((-(long)s - (rs ? 2 : 1)) % n + n) % n; /* rank 0 receives */
    for (int r = 0; r < n; r++) {
        double t = A[r], a = A[r == 0 ? n - 1 : r - 1];
        if (a > t)
            t = a;
        if (rs)
            t += red[(size_t)b < rem];
        U[r] = t;
        if (++b == n)
            b = 0;
    }
}

int sim_ring_run(const sim_config_t *cfg, const fabric_conf_t *conf,
                 uint64_t bytes, sim_result_t *res)
{
    ring_t g;
    int n = conf->nhosts, nsteps, total, jumped = 0;
    size_t count = bytes / 4;
    double *T = NULL, *U = NULL, tmax = 0;
    uint64_t updates = 0, messages = 0;
    struct timespec w0, w1;
    int ret = -1;

    clock_gettime(CLOCK_MONOTONIC, &w0);
    memset(res, 0, sizeof(*res));
    if (sim_ring_check(n, count) != 0)
        return -1;
    if (ring_init(&g, cfg, conf, count) != 0) {
        ring_free(&g);
        return -1;
    }
    nsteps = sim_ring_nsteps(n, count);
    total = nsteps * cfg->iters;
    T = calloc((size_t)n, sizeof(double));
    U = calloc((size_t)n, sizeof(double));
    if (T == NULL || U == NULL)
        goto out;
    if (count >= (size_t)n) {
        /* Every rank sends and receives in every step. */
        int uniform = count % (size_t)n == 0;
        double *A = malloc((size_t)n * sizeof(double));
        double *tx[2] = {malloc((size_t)n * sizeof(double)),
                         malloc((size_t)n * sizeof(double))};
        double red[2];
        if (A == NULL || tx[0] == NULL || tx[1] == NULL) {
            free(A);
            free(tx[0]);
            free(tx[1]);
            goto out;
        }
        for (int c = 0; c < 2; c++) {
            size_t bytes4 = (count / (size_t)n + (size_t)c) * 4;
            red[c] = sim_host_reduce_s(cfg, bytes4);
            for (int r = 0; r < n; r++)
                tx[c][r] = (double)sim_p2p_len(cfg, bytes4) / g.Bps[r];
        }
        for (int k = 0; k < total;) {
            int i = k % nsteps, end, same = 1;
            double shift;
            dense_step(&g, i, T, U, A, tx, red);
            updates += (uint64_t)n;
            messages += (uint64_t)n;
            shift = U[0] - T[0];
            for (int r = 1; r < n && same; r++)
                same = fabs((U[r] - T[r]) - shift) <= 1e-15;
            {
                double *x = T;
                T = U;
                U = x;
            }
            k++;
            /* The end of this phase: every step up to it has the same
             * matrix when the blocks are of one size. */
            end = (k - 1) / nsteps * nsteps + (i < n - 1 ? n - 1 : nsteps);
            if (uniform && same && k < end) {
                for (int r = 0; r < n; r++)
                    T[r] += (double)(end - k) * shift;
                messages += (uint64_t)(end - k) * (uint64_t)n;
                k = end;
                jumped = 1;
            }
        }
        free(A);
        free(tx[0]);
        free(tx[1]);
    } else {
        /* Few elements: each step moves count + 1 ranks at most. */
        int cap = 2 * (int)count + 2, *who = malloc((size_t)cap * sizeof(int));
        if (who == NULL)
            goto out;
        for (int k = 0; k < total; k++) {
            int i = k % nsteps, rs = i < n - 1, s = rs ? i : i - (n - 1), m = 0;
            for (int x = 0; x <= (int)count; x++)
                who[m++] = ((s + x + (rs ? 1 : 0)) % n + n) % n;
            for (int j = 0; j < m; j++) {
                int r = who[j];
                U[j] = step_time(&g, r, i, T[r], T[(r + n - 1) % n]);
            }
            for (int j = 0; j < m; j++) {
                algo_step_t st;
                sim_ring_step(who[j], n, count, i, &st);
                messages += st.send_peer >= 0;
                T[who[j]] = U[j];
            }
            updates += (uint64_t)m;
        }
        free(who);
    }
    for (int r = 0; r < n; r++)
        if (T[r] > tmax)
            tmax = T[r];
    clock_gettime(CLOCK_MONOTONIC, &w1);
    res->algo = ALGO_RING;
    res->an = -1;
    res->hosts = n;
    res->levels = conf->levels;
    res->radix = conf->radix;
    res->bytes = bytes;
    res->outcome = SIM_OK;
    res->latency_us = tmax * 1e6 / cfg->iters;
    res->bandwidth_MBps =
        tmax > 0 ? (double)bytes / (res->latency_us * 1e-6) / 1e6 : 0;
    res->wall_s = (double)(w1.tv_sec - w0.tv_sec) +
                  (double)(w1.tv_nsec - w0.tv_nsec) * 1e-9;
    snprintf(res->note, sizeof(res->note),
             "recurrence: %.3g messages, %.3g rank-steps computed%s",
             (double)messages, (double)updates,
             jumped ? ", steady phases jumped" : "");
    ret = 0;
out:
    free(T);
    free(U);
    ring_free(&g);
    return ret;
}
