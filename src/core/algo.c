/*
 * Host-based allreduce schedules: see algo.h.
 *
 * Every schedule of one (kind, size, count) has the same number of steps on
 * every rank, and a send in step i is matched by the peer's receive in the
 * same step i with the same block. Ranks that sit out a phase (the ranks
 * folded away when size is not a power of two) get empty steps there. That
 * lets a transport name a step by its index alone: two ranks exchanging
 * data always agree on it.
 *
 * Non-power-of-two sizes are handled as MPICH does: with pof2 the largest
 * power of two <= size and rem = size - pof2, ranks below 2 * rem pair up
 * (even r with r + 1); the even rank sends its vector to the odd one, which
 * reduces, and sits out until the odd rank sends it the result at the end.
 * The remaining pof2 ranks get the new ranks 0..pof2-1 in rank order.
 */
#include "core/algo.h"

#include "common/settings.h"

#include <string.h>

static const char *const names[ALGO_COUNT] = {"inc", "rd", "ring",
                                              "rabenseifner"};

static const char *const descs[ALGO_COUNT] = {
    "in the network: the aggregation nodes' reduction tree",
    "recursive doubling: log2(p) rounds of the whole vector, for short "
    "vectors",
    "ring reduce-scatter and allgather: 2(p-1) rounds of 1/p of the vector",
    "recursive-halving reduce-scatter and recursive-doubling allgather: "
    "2 log2(p) rounds, powers of two (others fold first)"};

const char *algo_desc(algo_kind_t kind)
{
    return (unsigned)kind < ALGO_COUNT ? descs[kind] : "unknown";
}

const char *algo_name(algo_kind_t kind)
{
    return (unsigned)kind < ALGO_COUNT ? names[kind] : "unknown";
}

int algo_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < ALGO_COUNT; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* floor(log2(n)) for n >= 1. */
static int ilog2(int n)
{
    int k = 0;
    while ((n >> (k + 1)) != 0)
        k++;
    return k;
}

int algo_max_steps(algo_kind_t kind, int size)
{
    int k;
    if (size <= 1)
        return 1;
    k = ilog2(size);
    switch (kind) {
    case ALGO_RD:
        return k + 2;
    case ALGO_RING:
        return 2 * (size - 1);
    case ALGO_RABENSEIFNER:
        return 2 * k + 2;
    default:
        return 1;
    }
}

/* Up to INCOLL_ALGO_SHORT_BYTES (16K) recursive doubling's log2(p) rounds
 * beat the 2(p-1) rounds of the bandwidth-optimal schedules (measured on
 * loopback, and MPICH's cutoff is of the same order). */
algo_cuts_t algo_cuts_default(void)
{
    algo_cuts_t c;
    c.short_bytes = (uint64_t)setting_default(SETTING_ALGO_SHORT_BYTES).i;
    c.pipe_bytes = (uint64_t)setting_default(SETTING_ALGO_PIPE_BYTES).i;
    return c;
}

algo_kind_t algo_pick(int size, size_t count, size_t dsize)
{
    algo_cuts_t c = algo_cuts_default();
    return algo_pick_cut(&c, size, count, dsize);
}

algo_kind_t algo_pick_cut(const algo_cuts_t *cuts, int size, size_t count,
                          size_t dsize)
{
    if (size <= 2 || count < (size_t)size || count * dsize <= cuts->short_bytes)
        return ALGO_RD;
    if ((size & (size - 1)) == 0)
        return ALGO_RABENSEIFNER;
    return ALGO_RING;
}

/* Element range of block i when count elements are cut into n blocks of
 * nearly equal size, the first count % n blocks one element larger. */
static void block_range(size_t count, size_t n, size_t i, size_t *off_p,
                        size_t *cnt_p)
{
    size_t q = count / n, r = count % n;
    *off_p = i * q + (i < r ? i : r);
    *cnt_p = q + (i < r ? 1 : 0);
}

static algo_step_t empty_step(void)
{
    algo_step_t st = {.send_peer = -1, .recv_peer = -1};
    return st;
}

/* Fills in a send; an empty block sends nothing (the peer computes the same
 * empty block for its receive and skips it too). */
static void set_send(algo_step_t *st, int peer, size_t off, size_t cnt)
{
    st->send_peer = cnt ? peer : -1;
    st->send_off = off;
    st->send_count = cnt;
}

static void set_recv(algo_step_t *st, int peer, size_t off, size_t cnt,
                     int reduce, int left)
{
    st->recv_peer = cnt ? peer : -1;
    st->recv_off = off;
    st->recv_count = cnt;
    st->recv_reduce = cnt ? reduce : 0;
    st->recv_left = cnt && reduce ? left : 0;
}

/* Real rank of new rank nr when rem ranks were folded away. */
static int real_rank(int nr, int rem)
{
    return nr < rem ? 2 * nr + 1 : nr + rem;
}

/* The fold step of a non-power-of-two size: even ranks below 2 * rem send
 * everything to their odd neighbour, which reduces (the even rank is the
 * lower one: its data on the left). Returns the rank's new rank, or -1 if it
 * sits out. */
static int fold_in(int rank, int rem, size_t count, algo_step_t *st)
{
    *st = empty_step();
    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            set_send(st, rank + 1, 0, count);
            return -1;
        }
        set_recv(st, rank - 1, 0, count, 1, 1);
        return rank / 2;
    }
    return rank - rem;
}

/* The matching last step: odd ranks below 2 * rem send the result back. */
static void fold_out(int rank, int rem, size_t count, algo_step_t *st)
{
    *st = empty_step();
    if (rank < 2 * rem) {
        if (rank % 2 == 0)
            set_recv(st, rank + 1, 0, count, 0, 0);
        else
            set_send(st, rank - 1, 0, count);
    }
}

static int sched_rd(int rank, int size, size_t count, algo_step_t *steps)
{
    int pof2 = 1 << ilog2(size), rem = size - pof2, n = 0, nr;

    if (rem) {
        nr = fold_in(rank, rem, count, &steps[n++]);
    } else {
        nr = rank;
    }
    for (int mask = 1; mask < pof2; mask <<= 1) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        if (nr >= 0) {
            int peer = real_rank(nr ^ mask, rem);
            set_send(st, peer, 0, count);
            set_recv(st, peer, 0, count, 1, peer < rank);
        }
    }
    if (rem)
        fold_out(rank, rem, count, &steps[n++]);
    return n;
}

static int sched_ring(int rank, int size, size_t count, algo_step_t *steps)
{
    int n = 0, next = (rank + 1) % size, prev = (rank + size - 1) % size;
    size_t soff, scnt, roff, rcnt;

    /* Reduce-scatter: in step s rank r sends block r - s - 1 and receives
     * block r - s - 2, so after size - 1 steps it owns block r. The block
     * received holds the partial sum of the ranks before this one along the
     * ring: it is the left operand, and each block is a left fold in ring
     * order computed by one chain of ranks only. */
    for (int s = 0; s < size - 1; s++) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        block_range(count, (size_t)size,
                    (size_t)((rank - s - 1 + 2 * size) % size), &soff, &scnt);
        block_range(count, (size_t)size,
                    (size_t)((rank - s - 2 + 2 * size) % size), &roff, &rcnt);
        set_send(st, next, soff, scnt);
        set_recv(st, prev, roff, rcnt, 1, 1);
    }
    /* Allgather: in step s rank r passes on block r - s and receives block
     * r - s - 1, copying it in. */
    for (int s = 0; s < size - 1; s++) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        block_range(count, (size_t)size, (size_t)((rank - s + size) % size),
                    &soff, &scnt);
        block_range(count, (size_t)size,
                    (size_t)((rank - s - 1 + 2 * size) % size), &roff, &rcnt);
        set_send(st, next, soff, scnt);
        set_recv(st, prev, roff, rcnt, 0, 0);
    }
    return n;
}

/* Element range of blocks [lo, hi) of pof2 nearly equal blocks. */
static void blocks_range(size_t count, int pof2, int lo, int hi, size_t *off_p,
                         size_t *cnt_p)
{
    size_t a, b, ca, cb;
    block_range(count, (size_t)pof2, (size_t)lo, &a, &ca);
    block_range(count, (size_t)pof2, (size_t)hi - 1, &b, &cb);
    *off_p = a;
    *cnt_p = b + cb - a;
}

static int sched_rab(int rank, int size, size_t count, algo_step_t *steps)
{
    int pof2 = 1 << ilog2(size), rem = size - pof2, k = ilog2(pof2), n = 0;
    int nr, lo = 0, hi = pof2;
    int lo_hist[32], hi_hist[32];
    size_t off, cnt;

    if (rem)
        nr = fold_in(rank, rem, count, &steps[n++]);
    else
        nr = rank;
    /* Reduce-scatter by recursive halving: the range of blocks a rank is
     * responsible for halves with each step; the partner at distance mask
     * keeps the other half. */
    for (int i = 0, mask = 1; i < k; i++, mask <<= 1) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        if (nr < 0)
            continue;
        {
            int peer = real_rank(nr ^ mask, rem), mid = (lo + hi) / 2;
            lo_hist[i] = lo;
            hi_hist[i] = hi;
            if ((nr & mask) == 0) {
                blocks_range(count, pof2, mid, hi, &off, &cnt);
                set_send(st, peer, off, cnt);
                hi = mid;
            } else {
                blocks_range(count, pof2, lo, mid, &off, &cnt);
                set_send(st, peer, off, cnt);
                lo = mid;
            }
            blocks_range(count, pof2, lo, hi, &off, &cnt);
            set_recv(st, peer, off, cnt, 1, peer < rank);
        }
    }
    /* Allgather by recursive doubling, undoing the halving in reverse:
     * send the range owned, receive the partner's half of the parent
     * range. */
    for (int i = k - 1, mask = pof2 >> 1; i >= 0; i--, mask >>= 1) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        if (nr < 0)
            continue;
        {
            int peer = real_rank(nr ^ mask, rem);
            int plo = lo_hist[i], phi = hi_hist[i];
            blocks_range(count, pof2, lo, hi, &off, &cnt);
            set_send(st, peer, off, cnt);
            if (lo == plo)
                blocks_range(count, pof2, hi, phi, &off, &cnt);
            else
                blocks_range(count, pof2, plo, lo, &off, &cnt);
            set_recv(st, peer, off, cnt, 0, 0);
            lo = plo;
            hi = phi;
        }
    }
    if (rem)
        fold_out(rank, rem, count, &steps[n++]);
    return n;
}

int algo_schedule(algo_kind_t kind, int rank, int size, size_t count,
                  algo_step_t *steps, int max)
{
    if (size < 1 || rank < 0 || rank >= size || steps == NULL ||
        (kind != ALGO_RD && kind != ALGO_RING && kind != ALGO_RABENSEIFNER))
        return -1;
    if (size == 1 || count == 0)
        return 0;
    if (max < algo_max_steps(kind, size))
        return -1;
    switch (kind) {
    case ALGO_RD:
        return sched_rd(rank, size, count, steps);
    case ALGO_RING:
        return sched_ring(rank, size, count, steps);
    default:
        return sched_rab(rank, size, count, steps);
    }
}

/* ---- the other collectives ---- */

static const char *const coll_names[ALGO_COLL_NCOLLS] = {
    "bcast",  "reduce",  "barrier",       "allgather",
    "gather", "scatter", "reduce_scatter"};

static const algo_calgo_info_t calgos[CALGO_COUNT] = {
    {CALGO_BCAST_BINOMIAL, ALGO_COLL_BCAST, "binomial",
     "binomial tree from the root: log2(p) rounds of the whole vector", 0},
    {CALGO_BCAST_PIPELINE, ALGO_COLL_BCAST, "pipeline",
     "pipelined chain from the root in segments: p-2+segments rounds", 0},
    {CALGO_REDUCE_BINOMIAL, ALGO_COLL_REDUCE, "binomial",
     "binomial tree toward the root: log2(p) rounds of the whole vector", 0},
    {CALGO_REDUCE_PIPELINE, ALGO_COLL_REDUCE, "pipeline",
     "pipelined chain toward the root in segments, reduced on the way", 0},
    {CALGO_BARRIER_DISSEMINATION, ALGO_COLL_BARRIER, "dissemination",
     "dissemination: ceil(log2(p)) rounds of one byte to rank + 2^k", 0},
    {CALGO_ALLGATHER_RING, ALGO_COLL_ALLGATHER, "ring",
     "ring: p-1 rounds of one block to the right neighbour", 0},
    {CALGO_ALLGATHER_BRUCK, ALGO_COLL_ALLGATHER, "bruck",
     "Bruck: ceil(log2(p)) rounds of doubling, any size, rotated", 0},
    {CALGO_ALLGATHER_RD, ALGO_COLL_ALLGATHER, "rd",
     "recursive doubling: log2(p) rounds, powers of two only", 1},
    {CALGO_GATHER_BINOMIAL, ALGO_COLL_GATHER, "binomial",
     "binomial tree toward the root, subtrees' blocks concatenated", 0},
    {CALGO_SCATTER_BINOMIAL, ALGO_COLL_SCATTER, "binomial",
     "binomial tree from the root, each subtree gets its blocks", 0},
    {CALGO_RS_RING, ALGO_COLL_REDUCE_SCATTER, "ring",
     "ring: p-1 rounds of one partial block to the right neighbour", 0},
    {CALGO_RS_HALVING, ALGO_COLL_REDUCE_SCATTER, "halving",
     "recursive halving: log2(p) rounds, powers of two only", 1},
};

const char *algo_coll_name(algo_coll_t coll)
{
    return (unsigned)coll < ALGO_COLL_NCOLLS ? coll_names[coll] : "unknown";
}

int algo_coll_parse(const char *name)
{
    for (int i = 0; name != NULL && i < ALGO_COLL_NCOLLS; i++)
        if (strcmp(name, coll_names[i]) == 0)
            return i;
    return -1;
}

const algo_calgo_info_t *algo_calgo_info(algo_calgo_t id)
{
    return (unsigned)id < CALGO_COUNT ? &calgos[id] : NULL;
}

int algo_calgo_parse(algo_coll_t coll, const char *name)
{
    for (int i = 0; name != NULL && i < CALGO_COUNT; i++)
        if (calgos[i].coll == coll && strcmp(name, calgos[i].name) == 0)
            return i;
    return -1;
}

int algo_calgo_fits(algo_calgo_t id, int size)
{
    return (unsigned)id < CALGO_COUNT && size >= 1 &&
           (!calgos[id].pof2_only || (size & (size - 1)) == 0);
}

int algo_coll_rotated(algo_calgo_t id)
{
    return id == CALGO_ALLGATHER_BRUCK;
}

size_t algo_coll_work_count(algo_calgo_t id, int size, size_t count)
{
    if ((unsigned)id >= CALGO_COUNT)
        return 0;
    switch (calgos[id].coll) {
    case ALGO_COLL_BCAST:
    case ALGO_COLL_REDUCE:
        return count;
    case ALGO_COLL_BARRIER:
        return 2;
    default:
        return (size_t)size * count;
    }
}

/* ceil(log2(n)) for n >= 1: rounds of a binomial tree. */
static int clog2(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

static size_t nsegs(size_t count, size_t seg)
{
    if (count == 0)
        return 0;
    if (seg == 0 || seg >= count)
        return 1;
    return (count + seg - 1) / seg;
}

int algo_coll_max_steps(algo_calgo_t id, int size, size_t count, size_t seg)
{
    int r = clog2(size > 1 ? size : 1);
    size_t n;
    if (size <= 1 || (unsigned)id >= CALGO_COUNT)
        return 1;
    switch (id) {
    case CALGO_BCAST_PIPELINE:
    case CALGO_REDUCE_PIPELINE:
        n = nsegs(count, seg) + (size_t)size - 2;
        return n < 1 ? 1 : n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
    case CALGO_ALLGATHER_RING:
    case CALGO_RS_RING:
        return size - 1;
    default:
        return r ? r : 1;
    }
}

/* Real rank of relative rank vr (relative to root). */
static int real_of(int vr, int root, int size)
{
    return (vr + root) % size;
}

static int sched_bcast_binomial(int rank, int size, int root, size_t count,
                                algo_step_t *steps)
{
    int vr = (rank - root + size) % size, n = 0;
    for (int mask = 1; mask < size; mask <<= 1) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        if (vr < mask && vr + mask < size)
            set_send(st, real_of(vr + mask, root, size), 0, count);
        else if (vr >= mask && vr < 2 * mask)
            set_recv(st, real_of(vr - mask, root, size), 0, count, 0, 0);
    }
    return n;
}

/* A chain through positions 0..size-1 (pos 0 first), segment after
 * segment: in step t position p sends segment t - p and receives segment
 * t - p + 1 (reduced when reduce). */
static int sched_chain(int size, int pos, int prev, int next, size_t count,
                       size_t seg, int reduce, algo_step_t *steps)
{
    size_t ns = nsegs(count, seg), nst = ns + (size_t)size - 2;
    if (seg == 0 || seg > count)
        seg = count;
    for (size_t t = 0; t < nst; t++) {
        algo_step_t *st = &steps[t];
        *st = empty_step();
        if (pos < size - 1 && t >= (size_t)pos && t - (size_t)pos < ns) {
            size_t s = t - (size_t)pos, off = s * seg;
            set_send(st, next, off, count - off < seg ? count - off : seg);
        }
        if (pos >= 1 && t + 1 >= (size_t)pos && t + 1 - (size_t)pos < ns) {
            size_t s = t + 1 - (size_t)pos, off = s * seg;
            set_recv(st, prev, off, count - off < seg ? count - off : seg,
                     reduce, 0);
        }
    }
    return (int)nst;
}

static int sched_reduce_binomial(int rank, int size, int root, size_t count,
                                 algo_step_t *steps)
{
    int vr = (rank - root + size) % size, n = 0;
    for (int mask = 1; mask < size; mask <<= 1) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        if ((vr & mask) && (vr & (mask - 1)) == 0)
            set_send(st, real_of(vr - mask, root, size), 0, count);
        else if ((vr & (2 * mask - 1)) == 0 && vr + mask < size)
            set_recv(st, real_of(vr + mask, root, size), 0, count, 1, 0);
    }
    return n;
}

static int sched_barrier(int rank, int size, algo_step_t *steps)
{
    int n = 0;
    for (int dist = 1; dist < size; dist <<= 1) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        set_send(st, (rank + dist) % size, 0, 1);
        set_recv(st, (rank - dist + size) % size, 1, 1, 0, 0);
    }
    return n;
}

static size_t mod(long a, int size)
{
    return (size_t)(((a % size) + size) % size);
}

static int sched_ag_ring(int rank, int size, size_t count, algo_step_t *steps)
{
    for (int i = 0; i < size - 1; i++) {
        algo_step_t *st = &steps[i];
        *st = empty_step();
        set_send(st, (rank + 1) % size, mod(rank - i, size) * count, count);
        set_recv(st, (rank - 1 + size) % size, mod(rank - i - 1, size) * count,
                 count, 0, 0);
    }
    return size - 1;
}

static int sched_ag_rd(int rank, int size, size_t count, algo_step_t *steps)
{
    int n = 0;
    for (int mask = 1; mask < size; mask <<= 1) {
        algo_step_t *st = &steps[n++];
        int peer = rank ^ mask;
        size_t mine = (size_t)(rank & ~(mask - 1)),
               theirs = (size_t)(peer & ~(mask - 1));
        *st = empty_step();
        set_send(st, peer, mine * count, (size_t)mask * count);
        set_recv(st, peer, theirs * count, (size_t)mask * count, 0, 0);
    }
    return n;
}

static int sched_ag_bruck(int rank, int size, size_t count, algo_step_t *steps)
{
    int n = 0;
    for (int dist = 1; dist < size; dist <<= 1) {
        algo_step_t *st = &steps[n++];
        size_t cnt = (size_t)(dist < size - dist ? dist : size - dist);
        *st = empty_step();
        set_send(st, (rank - dist + size) % size, 0, cnt * count);
        set_recv(st, (rank + dist) % size, (size_t)dist * count, cnt * count, 0,
                 0);
    }
    return n;
}

static int sched_gather(int rank, int size, int root, size_t count,
                        algo_step_t *steps)
{
    int vr = (rank - root + size) % size, n = 0;
    for (int mask = 1; mask < size; mask <<= 1) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        if ((vr & mask) && (vr & (mask - 1)) == 0) {
            int end = vr + mask < size ? vr + mask : size;
            set_send(st, real_of(vr - mask, root, size), (size_t)vr * count,
                     (size_t)(end - vr) * count);
        } else if ((vr & (2 * mask - 1)) == 0 && vr + mask < size) {
            int end = vr + 2 * mask < size ? vr + 2 * mask : size;
            set_recv(st, real_of(vr + mask, root, size),
                     (size_t)(vr + mask) * count,
                     (size_t)(end - vr - mask) * count, 0, 0);
        }
    }
    return n;
}

static int sched_scatter(int rank, int size, int root, size_t count,
                         algo_step_t *steps)
{
    int vr = (rank - root + size) % size, n = 0;
    for (int mask = (1 << clog2(size)) / 2; mask >= 1; mask >>= 1) {
        algo_step_t *st = &steps[n++];
        *st = empty_step();
        if ((vr & (2 * mask - 1)) == 0 && vr + mask < size) {
            int end = vr + 2 * mask < size ? vr + 2 * mask : size;
            set_send(st, real_of(vr + mask, root, size),
                     (size_t)(vr + mask) * count,
                     (size_t)(end - vr - mask) * count);
        } else if ((vr & (2 * mask - 1)) == mask) {
            int end = vr + mask < size ? vr + mask : size;
            set_recv(st, real_of(vr - mask, root, size), (size_t)vr * count,
                     (size_t)(end - vr) * count, 0, 0);
        }
    }
    return n;
}

static int sched_rs_ring(int rank, int size, size_t count, algo_step_t *steps)
{
    for (int i = 0; i < size - 1; i++) {
        algo_step_t *st = &steps[i];
        *st = empty_step();
        set_send(st, (rank + 1) % size, mod(rank - i - 1, size) * count, count);
        /* The received partial result is the left operand: a left fold in
         * ring order, as in the allreduce ring. */
        set_recv(st, (rank - 1 + size) % size, mod(rank - i - 2, size) * count,
                 count, 1, 1);
    }
    return size - 1;
}

static int sched_rs_halving(int rank, int size, size_t count,
                            algo_step_t *steps)
{
    int n = 0;
    size_t lo = 0;
    for (int mask = size / 2; mask >= 1; mask >>= 1) {
        algo_step_t *st = &steps[n++];
        int peer = rank ^ mask;
        size_t m = (size_t)mask;
        *st = empty_step();
        if (rank & mask) {
            set_send(st, peer, lo * count, m * count);
            set_recv(st, peer, (lo + m) * count, m * count, 1, peer < rank);
            lo += m;
        } else {
            set_send(st, peer, (lo + m) * count, m * count);
            set_recv(st, peer, lo * count, m * count, 1, peer < rank);
        }
    }
    return n;
}

int algo_coll_schedule(algo_calgo_t id, int rank, int size, int root,
                       size_t count, size_t seg, algo_step_t *steps, int max)
{
    if ((unsigned)id >= CALGO_COUNT || size < 1 || rank < 0 || rank >= size ||
        root < 0 || root >= size || steps == NULL || !algo_calgo_fits(id, size))
        return -1;
    if (size == 1 || (count == 0 && id != CALGO_BARRIER_DISSEMINATION))
        return 0;
    if (max < algo_coll_max_steps(id, size, count, seg))
        return -1;
    switch (id) {
    case CALGO_BCAST_BINOMIAL:
        return sched_bcast_binomial(rank, size, root, count, steps);
    case CALGO_BCAST_PIPELINE: {
        int vr = (rank - root + size) % size;
        return sched_chain(size, vr, real_of(vr - 1 + size, root, size),
                           real_of(vr + 1, root, size), count, seg, 0, steps);
    }
    case CALGO_REDUCE_BINOMIAL:
        return sched_reduce_binomial(rank, size, root, count, steps);
    case CALGO_REDUCE_PIPELINE: {
        /* From the highest relative rank down to the root. */
        int vr = (rank - root + size) % size, pos = size - 1 - vr;
        return sched_chain(size, pos, real_of((vr + 1) % size, root, size),
                           real_of(vr - 1 + size, root, size), count, seg, 1,
                           steps);
    }
    case CALGO_BARRIER_DISSEMINATION:
        return sched_barrier(rank, size, steps);
    case CALGO_ALLGATHER_RING:
        return sched_ag_ring(rank, size, count, steps);
    case CALGO_ALLGATHER_BRUCK:
        return sched_ag_bruck(rank, size, count, steps);
    case CALGO_ALLGATHER_RD:
        return sched_ag_rd(rank, size, count, steps);
    case CALGO_GATHER_BINOMIAL:
        return sched_gather(rank, size, root, count, steps);
    case CALGO_SCATTER_BINOMIAL:
        return sched_scatter(rank, size, root, count, steps);
    case CALGO_RS_RING:
        return sched_rs_ring(rank, size, count, steps);
    case CALGO_RS_HALVING:
        return sched_rs_halving(rank, size, count, steps);
    default:
        return -1;
    }
}

algo_calgo_t algo_coll_pick(algo_coll_t coll, int size, size_t count,
                            size_t dsize, size_t *seg_p)
{
    algo_cuts_t c = algo_cuts_default();
    return algo_coll_pick_cut(&c, coll, size, count, dsize, seg_p);
}

/* Broadcast and reduce pipeline above cuts->pipe_bytes. */
algo_calgo_t algo_coll_pick_cut(const algo_cuts_t *cuts, algo_coll_t coll,
                                int size, size_t count, size_t dsize,
                                size_t *seg_p)
{
    int pof2 = size >= 1 && (size & (size - 1)) == 0;
    size_t bytes = count * (dsize ? dsize : 1);

    *seg_p = 0;
    switch (coll) {
    case ALGO_COLL_BCAST:
    case ALGO_COLL_REDUCE:
        if (bytes <= cuts->pipe_bytes || size <= 2)
            return coll == ALGO_COLL_BCAST ? CALGO_BCAST_BINOMIAL
                                           : CALGO_REDUCE_BINOMIAL;
        *seg_p = ALGO_SEG_BYTES / (dsize ? dsize : 1);
        return coll == ALGO_COLL_BCAST ? CALGO_BCAST_PIPELINE
                                       : CALGO_REDUCE_PIPELINE;
    case ALGO_COLL_BARRIER:
        return CALGO_BARRIER_DISSEMINATION;
    case ALGO_COLL_ALLGATHER:
        if (bytes * (size_t)size <= cuts->short_bytes * 4)
            return pof2 ? CALGO_ALLGATHER_RD : CALGO_ALLGATHER_BRUCK;
        return CALGO_ALLGATHER_RING;
    case ALGO_COLL_GATHER:
        return CALGO_GATHER_BINOMIAL;
    case ALGO_COLL_SCATTER:
        return CALGO_SCATTER_BINOMIAL;
    default:
        return pof2 ? CALGO_RS_HALVING : CALGO_RS_RING;
    }
}
