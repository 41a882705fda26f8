/*
 * The AN's streaming lock protocol: see agg_lock.h, and docs/streaming.md
 * for the rounds on the wire. The pool is one allocation per AN, made at
 * the first reservation; a group's window is slot_t arrays pointing into
 * it, which the data path uses as slots numbered from the group's
 * nslots up (slot_at) while st_win says the lock is held.
 */
#include "core/agg_lock.h"

#include "common/log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Gives back the group's stream window and, if it has it, the pool. */
void agg_lock_free_window(agg_t *agg, group_t *g)
{
    if (agg->holder == g)
        agg->holder = NULL;
    for (uint32_t s = 0; s < g->st.nslots && g->st.slots; s++)
        agg_slot_release(agg, g, &g->st.slots[s]);
    free(g->st.slots);
    free(g->st.seen_all);
    free(g->st.asked_all);
    free(g->st.lent_all);
    free(g->st.kept_all);
    free(g->st.contrib_all);
    free(g->st.want_all);
    memset(&g->st, 0, sizeof(g->st));
    g->st_win = 0;
}

/* Pool bytes one stream slot of group g takes: two result copies and a
 * contribution buffer per child. */
static size_t stream_slot_bytes(const group_t *g)
{
    return 2 * g->stride + (size_t)g->nchildren * (g->stride + BUF_ALIGN);
}

/*
 * Sets aside a window of n stream slots for g in the pool (allocated now
 * if it was not yet). The slots start at epoch lk_seq << 16, so that no
 * packet of an earlier lock's window can count in this one. Returns 0, or
 * -1 when out of memory.
 */
static int stream_alloc(agg_t *agg, group_t *g, uint32_t n)
{
    size_t nch = (size_t)g->nchildren, per = stream_slot_bytes(g);
    stream_win_t *w = &g->st;
    if (agg->pool == NULL) {
        agg->pool = aligned_alloc(BUF_ALIGN, (agg->pool_bytes + BUF_ALIGN - 1) &
                                                 ~(size_t)(BUF_ALIGN - 1));
        if (agg->pool == NULL)
            return -1;
    }
    w->slots = calloc(n, sizeof(*w->slots));
    w->seen_all = calloc((size_t)n * (size_t)g->seen_words, sizeof(uint64_t));
    w->asked_all = calloc((size_t)n * (size_t)g->seen_words, sizeof(uint64_t));
    w->lent_all = calloc((size_t)n * (size_t)g->seen_words, sizeof(uint64_t));
    w->kept_all = calloc((size_t)n * (size_t)g->seen_words, sizeof(uint64_t));
    w->contrib_all = calloc((size_t)n * nch, sizeof(uint8_t *));
    w->want_all = calloc((size_t)n * nch * 2, sizeof(uint32_t));
    if (!w->slots || !w->seen_all || !w->asked_all || !w->lent_all ||
        !w->kept_all || !w->contrib_all || !w->want_all) {
        agg_lock_free_window(agg, g);
        return -1;
    }
    w->nslots = n;
    for (uint32_t s = 0; s < n; s++) {
        slot_t *sl = &w->slots[s];
        uint8_t *base = agg->pool + (size_t)s * per;
        sl->epoch = (g->lk_seq << 16) - 1;
        sl->state = SLOT_DONE;
        sl->seen = &w->seen_all[s * (size_t)g->seen_words];
        sl->asked = &w->asked_all[s * (size_t)g->seen_words];
        sl->lent = &w->lent_all[s * (size_t)g->seen_words];
        sl->kept = &w->kept_all[s * (size_t)g->seen_words];
        sl->contrib = &w->contrib_all[s * nch];
        sl->want = &w->want_all[s * nch * 2];
        sl->res[0].buf = base;
        sl->res[1].buf = base + g->stride;
        sl->fixed = base + 2 * g->stride;
    }
    return 0;
}

/* Forgets waiters that did not ask for lock_idle_ns. */
static void waiters_expire(agg_t *agg)
{
    if (!agg->clock_set || agg->lock_idle_ns == 0)
        return;
    for (int i = 0; i < agg->nwaiters;) {
        if (agg->now_ns - agg->waiters[i].seen_ns > agg->lock_idle_ns)
            agg->waiters[i] = agg->waiters[--agg->nwaiters];
        else
            i++;
    }
}

/* Records (or refreshes) group gid waiting with ticket. A full queue
 * keeps the oldest tickets. */
static void waiter_touch(agg_t *agg, uint32_t gid, uint64_t ticket)
{
    int worst = 0;
    for (int i = 0; i < agg->nwaiters; i++) {
        if (agg->waiters[i].gid == gid) {
            agg->waiters[i].ticket = ticket;
            agg->waiters[i].seen_ns = agg->now_ns;
            return;
        }
        if (agg->waiters[i].ticket > agg->waiters[worst].ticket)
            worst = i;
    }
    if (agg->nwaiters < AGG_MAX_WAITERS)
        worst = agg->nwaiters++;
    else if (agg->waiters[worst].ticket < ticket)
        return;
    agg->waiters[worst] = (waiter_t){gid, ticket, agg->now_ns};
}

static void waiter_drop(agg_t *agg, uint32_t gid)
{
    for (int i = 0; i < agg->nwaiters; i++)
        if (agg->waiters[i].gid == gid) {
            agg->waiters[i] = agg->waiters[--agg->nwaiters];
            return;
        }
}

/* 1 when (ta, a) waits longer than (tb, b); ticket 0 has none. */
static int ticket_before(uint64_t ta, uint32_t a, uint64_t tb, uint32_t b)
{
    ta = ta ? ta : UINT64_MAX;
    tb = tb ? tb : UINT64_MAX;
    return ta < tb || (ta == tb && a < b);
}

/*
 * Tries to reserve the pool for g, with a window of at most asked stream
 * slots. Returns WIRE_LOCK_OK with *win_p set, or why not. A holder quiet
 * for lock_idle_ns loses the pool here.
 */
static wire_lock_why_t try_reserve(agg_t *agg, group_t *g, uint32_t asked,
                                   uint64_t ticket, uint32_t *win_p)
{
    size_t cap;
    uint32_t n;

    if (agg->pool_bytes == 0)
        return WIRE_LOCK_NOPOOL;
    if (agg->holder && agg->holder != g) {
        group_t *h = agg->holder;
        uint64_t active = agg_group_active(agg, h, 1);
        if (!agg->clock_set || agg->lock_idle_ns == 0 ||
            agg->now_ns - active < agg->lock_idle_ns)
            return WIRE_LOCK_HELD;
        incoll_info("agg %s: group %u: lock reclaimed after %" PRIu64
                    " ms without a packet, for group %u",
                    agg->name, h->id, (agg->now_ns - active) / 1000000, g->id);
        agg->ctr.locks_reclaimed++;
        agg_lock_free_window(agg, h);
    }
    /* All our children asked for a new lock: they are done with the old
     * one (a lost unlock), so it goes. */
    agg_lock_free_window(agg, g);
    waiters_expire(agg);
    for (int i = 0; i < agg->nwaiters; i++) {
        const waiter_t *w = &agg->waiters[i];
        if (w->gid != g->id && ticket_before(w->ticket, w->gid, ticket, g->id))
            return WIRE_LOCK_QUEUED;
    }
    cap = agg->pool_bytes / stream_slot_bytes(g);
    if (cap > 65535 - g->nslots)
        cap = 65535 - g->nslots;
    if (cap == 0)
        return WIRE_LOCK_POOL;
    n = asked < cap ? asked : (uint32_t)cap;
    if (stream_alloc(agg, g, n) != 0)
        return WIRE_LOCK_POOL;
    agg->holder = g;
    *win_p = n;
    return WIRE_LOCK_OK;
}

/* Sends child c the answer of the group's lock round; with lost, the
 * notice that the group holds no lock here. */
static void lock_reply(agg_t *agg, group_t *g, int c, unsigned why, int lost)
{
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = WIRE_LOCK_REP,
        .op = (uint8_t)why,
        .group = g->id,
        .child = (uint16_t)c,
        .flags =
            (uint16_t)((why ? WIRE_F_REFUSE : 0) | (lost ? WIRE_F_LOST : 0)),
        .slot = g->lk_nops,
        .epoch = g->lk_seq,
        .count = g->rep_win ? g->rep_win : 1,
        .total = g->gen,
        .offset = g->rep_ticket,
    };
    if (g->children[c] != INCOLL_EP_NONE)
        agg_send_ctl(agg, g, g->children[c], &h);
}

/* Sends a lock (or unlock) round's request to the parent. */
static void lock_forward(agg_t *agg, group_t *g, uint8_t type)
{
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = type,
        .group = g->id,
        .child = g->index_at_parent,
        .slot = g->lk_nops,
        .epoch = type == WIRE_LOCK ? g->lk_seq : g->ul_seq,
        .count = 1,
        .total = g->gen,
    };
    if (type == WIRE_LOCK) {
        h.op = g->lk_why;
        h.flags = g->lk_why ? WIRE_F_REFUSE : 0;
        h.count = g->lk_win ? g->lk_win : 1;
        h.offset = g->lk_ticket;
    }
    agg_send_ctl(agg, g, g->parent, &h);
}

/* The unlock round's answer to child c. */
static void unlock_reply(agg_t *agg, group_t *g, int c)
{
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = WIRE_UNLOCK_REP,
        .group = g->id,
        .child = (uint16_t)c,
        .epoch = g->ul_seq,
        .count = 1,
        .total = g->gen,
    };
    if (g->children[c] != INCOLL_EP_NONE)
        agg_send_ctl(agg, g, g->children[c], &h);
}

/*
 * The lock round's answer is known (decided here at the root, or come
 * from the parent): keep the window (granted) or give the reservation
 * back and queue the group by its ticket (refused), then tell every
 * child.
 */
static void lock_settle(agg_t *agg, group_t *g, unsigned why, uint32_t win,
                        uint64_t ticket)
{
    if (why == WIRE_LOCK_OK) {
        g->st_win = win < g->st.nslots ? win : g->st.nslots;
        waiter_drop(agg, g->id);
        agg->ctr.locks_granted++;
        agg_stamp(&g->lk_active_ns, agg->now_ns);
    } else {
        if (agg->holder == g)
            agg_lock_free_window(agg, g);
        if (ticket == 0) {
            /* First refusal: the root hands out the ticket. */
            ticket = agg->clock_set ? agg->now_ns : 0;
            if (ticket <= agg->ticket_last)
                ticket = agg->ticket_last + 1;
            agg->ticket_last = ticket;
        }
        waiter_touch(agg, g->id, ticket);
        agg->ctr.locks_refused++;
        incoll_debug(
            "agg %s: group %u: lock %u refused: %s (ticket %" PRIu64 ")",
            agg->name, g->id, g->lk_seq, wire_lock_why_str(why), ticket);
    }
    g->rep_why = (uint8_t)why;
    g->rep_win = why == WIRE_LOCK_OK ? g->st_win : 0;
    g->rep_ticket = why == WIRE_LOCK_OK ? 0 : ticket;
    g->lk_state = LK_IDLE;
    for (int c = 0; c < g->nchildren; c++)
        lock_reply(agg, g, c, why, 0);
}

/* Marks child c in a round's bitmap; returns 0 if it was already in. */
static int round_mark(uint64_t *seen, int c)
{
    uint64_t bit = 1ull << (c % 64);
    if (seen[c / 64] & bit)
        return 0;
    seen[c / 64] |= bit;
    return 1;
}

void agg_lock_on_lock(agg_t *agg, group_t *g, incoll_ep_t src,
                      const wire_hdr_t *h)
{
    int c = h->child;

    if (!agg_child_admit(agg, g, src, h))
        return;
    agg_stamp(&g->lk_active_ns, agg->now_ns);
    if (h->offset != 0 && agg->holder != g)
        waiter_touch(agg, g->id, h->offset); /* still waiting */
    if (h->epoch == g->lk_seq + 1 && g->lk_state == LK_IDLE &&
        (g->ul_state == LK_IDLE || g->ul_seq != g->lk_seq)) {
        g->lk_seq = h->epoch;
        g->lk_state = LK_COLLECT;
        g->lk_arrived = 0;
        g->lk_why = WIRE_LOCK_OK;
        g->lk_win = UINT32_MAX;
        g->lk_ticket = 0;
        g->lk_nops = h->slot;
        g->rep_why = WIRE_LOCK_OK;
        g->rep_win = 0;
        g->rep_ticket = 0;
        memset(g->lk_seen, 0, (size_t)g->seen_words * sizeof(uint64_t));
    } else if (h->epoch != g->lk_seq) {
        agg_drop(agg, &agg->ctr.stale_dropped, src, "lock round out of order",
                 g->id);
        return;
    }
    if (!round_mark(g->lk_seen, c)) {
        agg->ctr.duplicates_dropped++;
        if (g->lk_state == LK_UP)
            lock_forward(agg, g, WIRE_LOCK); /* ours or the answer lost */
        else if (g->lk_state == LK_IDLE)
            lock_reply(agg, g, c, g->rep_why, 0);
        return;
    }
    g->lk_arrived++;
    if ((h->flags & WIRE_F_REFUSE) && g->lk_why == WIRE_LOCK_OK)
        g->lk_why = h->op ? h->op : WIRE_LOCK_HELD;
    if (h->count < g->lk_win)
        g->lk_win = h->count;
    if (h->offset > g->lk_ticket)
        g->lk_ticket = h->offset;
    if (g->lk_arrived < g->nchildren)
        return;
    if (g->lk_why == WIRE_LOCK_OK) {
        uint32_t win = 0;
        g->lk_why = (uint8_t)try_reserve(agg, g, g->lk_win, g->lk_ticket, &win);
        g->lk_win = win;
    }
    if (g->parent != INCOLL_EP_NONE) {
        g->lk_state = LK_UP;
        lock_forward(agg, g, WIRE_LOCK);
    } else {
        lock_settle(agg, g, g->lk_why, g->lk_win, g->lk_ticket);
    }
}

void agg_lock_on_lock_rep(agg_t *agg, group_t *g, incoll_ep_t src,
                          const wire_hdr_t *h)
{
    unsigned why = h->flags & WIRE_F_REFUSE ? h->op : WIRE_LOCK_OK;

    if (g->parent == INCOLL_EP_NONE || src != g->parent) {
        agg_drop(agg, &agg->ctr.bad_source, src,
                 "lock answer not from the parent", g->id);
        return;
    }
    if (h->total == g->gen && h->epoch == g->lk_seq &&
        (h->flags & WIRE_F_LOST) && g->st_win > 0) {
        /* The parent lost our lock (reclaimed): ours goes too, and the
         * hosts below learn it at once instead of waiting for results. */
        if (agg->holder == g)
            agg_lock_free_window(agg, g);
        g->st_win = 0;
        for (int c = 0; c < g->nchildren; c++)
            lock_reply(agg, g, c, WIRE_LOCK_HELD, 1);
        return;
    }
    if (h->total != g->gen || h->epoch != g->lk_seq || g->lk_state != LK_UP ||
        (h->flags & WIRE_F_LOST)) {
        agg->ctr.duplicates_dropped++;
        return;
    }
    if (why == WIRE_LOCK_OK && agg->holder != g) {
        /* Our reservation was reclaimed while the request climbed. */
        why = WIRE_LOCK_HELD;
    }
    agg_stamp(&g->lk_active_ns, agg->now_ns);
    lock_settle(agg, g, why ? why : WIRE_LOCK_OK, h->count,
                why ? h->offset : 0);
}

void agg_lock_on_unlock(agg_t *agg, group_t *g, incoll_ep_t src,
                        const wire_hdr_t *h)
{
    int c = h->child;

    if (!agg_child_admit(agg, g, src, h))
        return;
    /* A round already started (or done) is answered whatever came since:
     * a member whose answer was lost asks again while others, answered,
     * may have started the next lock round already. */
    if (g->ul_seq == 0 || g->ul_seq != h->epoch) {
        if (h->epoch != g->lk_seq || g->lk_state != LK_IDLE ||
            g->rep_why != WIRE_LOCK_OK) {
            agg_drop(agg, &agg->ctr.stale_dropped, src,
                     "unlock of no granted lock", g->id);
            return;
        }
        g->ul_seq = h->epoch;
        g->ul_state = LK_COLLECT;
        g->ul_arrived = 0;
        memset(g->ul_seen, 0, (size_t)g->seen_words * sizeof(uint64_t));
    }
    if (!round_mark(g->ul_seen, c)) {
        agg->ctr.duplicates_dropped++;
        if (g->ul_state == LK_UP)
            lock_forward(agg, g, WIRE_UNLOCK);
        else if (g->ul_state == LK_IDLE)
            unlock_reply(agg, g, c);
        return;
    }
    if (++g->ul_arrived < g->nchildren)
        return;
    /* Every child holds every result of the window: it can go. */
    if (agg->holder == g)
        agg_lock_free_window(agg, g);
    if (g->parent != INCOLL_EP_NONE) {
        g->ul_state = LK_UP;
        lock_forward(agg, g, WIRE_UNLOCK);
        return;
    }
    g->ul_state = LK_IDLE;
    for (int k = 0; k < g->nchildren; k++)
        unlock_reply(agg, g, k);
}

void agg_lock_on_unlock_rep(agg_t *agg, group_t *g, incoll_ep_t src,
                            const wire_hdr_t *h)
{
    if (g->parent == INCOLL_EP_NONE || src != g->parent) {
        agg_drop(agg, &agg->ctr.bad_source, src,
                 "unlock answer not from the parent", g->id);
        return;
    }
    if (h->total != g->gen || h->epoch != g->ul_seq || g->ul_state != LK_UP) {
        agg->ctr.duplicates_dropped++;
        return;
    }
    g->ul_state = LK_IDLE;
    for (int k = 0; k < g->nchildren; k++)
        unlock_reply(agg, g, k);
}

void agg_lock_reset(agg_t *agg, group_t *g, uint32_t gen)
{
    if (agg->holder == g) {
        /* The earlier job's lock goes with its slots. */
        incoll_info("agg %s: group %u: lock of generation %08x reclaimed by "
                    "generation %08x",
                    agg->name, g->id, g->gen, gen);
        agg->ctr.locks_reclaimed++;
        agg_lock_free_window(agg, g);
    }
    g->lk_seq = 0;
    g->lk_state = LK_IDLE;
    g->ul_seq = 0;
    g->ul_state = LK_IDLE;
}

void agg_lock_forget(agg_t *agg, group_t *g)
{
    agg_lock_free_window(agg, g);
    for (int w = 0; w < agg->nwaiters; w++)
        if (agg->waiters[w].gid == g->id)
            agg->waiters[w] = agg->waiters[--agg->nwaiters];
}

int agg_lock_stream_lost(agg_t *agg, group_t *g, incoll_ep_t src, int c)
{
    if (g->lk_seq == 0 || g->rep_why != WIRE_LOCK_OK)
        return 0;
    /* A stream slot of the group's last lock, which we no longer hold
     * (reclaimed): say so, so the host stops waiting. */
    agg_drop(agg, &agg->ctr.stale_dropped, src, "stream slot without a lock",
             g->id);
    lock_reply(agg, g, c, WIRE_LOCK_HELD, 1);
    return 1;
}
