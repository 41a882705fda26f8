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

#include <string.h>

static const char *const names[ALGO_COUNT] = {"inc", "rd", "ring",
                                               "rabenseifner"};

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

/* Up to this many bytes recursive doubling's log2(p) rounds beat the
 * 2(p-1) rounds of the bandwidth-optimal schedules (measured on loopback,
 * and MPICH's cutoff is of the same order). */
#define ALGO_SHORT_BYTES 16384

algo_kind_t algo_pick(int size, size_t count, size_t dsize)
{
    if (size <= 2 || count < (size_t)size || count * dsize <= ALGO_SHORT_BYTES)
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
        block_range(count, (size_t)size, (size_t)((rank - s - 1 + 2 * size) % size),
                    &soff, &scnt);
        block_range(count, (size_t)size, (size_t)((rank - s - 2 + 2 * size) % size),
                    &roff, &rcnt);
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
        block_range(count, (size_t)size, (size_t)((rank - s - 1 + 2 * size) % size),
                    &roff, &rcnt);
        set_send(st, next, soff, scnt);
        set_recv(st, prev, roff, rcnt, 0, 0);
    }
    return n;
}

/* Element range of blocks [lo, hi) of pof2 nearly equal blocks. */
static void blocks_range(size_t count, int pof2, int lo, int hi,
                         size_t *off_p, size_t *cnt_p)
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
