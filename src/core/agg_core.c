/*
 * Aggregation node core: see agg_core.h for the protocol. Nothing here
 * allocates per packet: slot result buffers are allocated when a group is
 * added, and contribution buffers come from a per-group free list that
 * grows to the number of contributions in flight and is then reused.
 * Every buffer starts on a 64-byte boundary (BUF_ALIGN), whatever the
 * payload size, so the reduction kernels see aligned elements.
 *
 * Copies: within a batch (agg_on_batch) a contribution is not copied when
 * it arrives; its slot points into the caller's buffer (the child's bit in
 * the slot's lent bitmap says so), and a slot that completes in the same
 * batch reduces straight from there. At the end of the batch the
 * contributions still lent are copied into the free list's buffers
 * (unborrow). Results and aggregates leave from the slot's result buffer
 * through the driver's send_ref, which may send them without copying:
 * nothing in a batch overwrites a buffer it sent (a result copy is reused
 * only two epochs later, when every child has acknowledged it by
 * contributing to the next one; a re-forwarded aggregate, which a late
 * result of the same batch could overwrite, goes through send).
 */
#include "core/agg_core.h"

#include "core/agg_internal.h"
#include "core/agg_lock.h"

#include "common/dtype.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOMB ((group_t *)1)

static uint32_t hash_id(uint32_t id)
{
    return id * 2654435761u;
}

agg_t *agg_create(const agg_params_t *params)
{
    agg_t *agg = calloc(1, sizeof(*agg));
    if (agg == NULL)
        return NULL;
    snprintf(agg->name, sizeof(agg->name), "%s",
             params->name ? params->name : "an");
    snprintf(agg->info, sizeof(agg->info), "%s",
             params->info ? params->info : "");
    agg->admin_key = params->admin_key;
    wire_key_derive(NULL, WIRE_KEY_ADMIN, params->admin_key, 0,
                    &agg->admin_mac_key);
    agg->send = params->send;
    agg->send_ref = params->send_ref ? params->send_ref : params->send;
    agg->send_arg = params->send_arg;
    agg->retain = params->retain;
    agg->release = params->release;
    agg->stats = params->stats;
    agg->stats_arg = params->stats_arg;
    agg->gen_idle_ns = params->gen_idle_ns;
    agg->mcast_dual_bytes = params->mcast_dual_bytes;
    agg->pool_bytes = params->stream_pool_bytes;
    agg->lock_idle_ns = params->lock_idle_ns;
    agg->table_cap = 16;
    agg->table = calloc(agg->table_cap, sizeof(*agg->table));
    agg->borrows = calloc(AGG_BORROW_MAX, sizeof(*agg->borrows));
    if (agg->table == NULL || agg->borrows == NULL) {
        free(agg->table);
        free(agg->borrows);
        free(agg);
        return NULL;
    }
    return agg;
}

static void contrib_put(agg_t *agg, group_t *g, slot_t *sl, int c);

static void group_free(agg_t *agg, group_t *g)
{
    if (g == NULL)
        return;
    /* Buffers still held by collecting slots go back too, and the
     * driver's buffers kept for them (never one only lent by a batch:
     * groups change between batches only). */
    if (g->ready) {
        agg_lock_free_window(agg, g);
        for (uint32_t s = 0; s < g->nslots; s++)
            for (int c = 0; c < g->nchildren; c++)
                contrib_put(agg, g, &g->slots[s], c);
    }
    free(g->lk_seen);
    free(g->ul_seen);
    for (int i = 0; i < g->pool_free; i++)
        free(g->pool[i]);
    free(g->pool);
    free(g->contrib_all);
    free(g->want_all);
    free(g->seen_all);
    free(g->asked_all);
    free(g->lent_all);
    free(g->kept_all);
    free(g->res_all);
    free(g->slots);
    free(g->children);
    free(g->learned);
    free(g->srcs);
    free(g->piece);
    free(g->mc);
    free(g);
}

void agg_destroy(agg_t *agg)
{
    if (agg == NULL)
        return;
    for (uint32_t i = 0; i < agg->table_cap; i++)
        if (agg->table[i] && agg->table[i] != TOMB)
            group_free(agg, agg->table[i]);
    free(agg->table);
    free(agg->pool);
    free(agg->borrows);
    free(agg);
}

static group_t *group_find(const agg_t *agg, uint32_t id)
{
    uint32_t mask = agg->table_cap - 1;
    for (uint32_t i = hash_id(id) & mask, n = 0; n < agg->table_cap;
         i = (i + 1) & mask, n++) {
        group_t *g = agg->table[i];
        if (g == NULL)
            return NULL;
        if (g != TOMB && g->id == id)
            return g;
    }
    return NULL;
}

static incoll_status_t table_insert(agg_t *agg, group_t *g)
{
    uint32_t mask;
    if ((agg->ngroups + 1) * 2 > agg->table_cap) {
        uint32_t ncap = agg->table_cap * 2;
        group_t **nt = calloc(ncap, sizeof(*nt)), **old = agg->table;
        uint32_t ocap = agg->table_cap;
        if (nt == NULL)
            return INCOLL_ERR_NO_MEMORY;
        agg->table = nt;
        agg->table_cap = ncap;
        for (uint32_t i = 0; i < ocap; i++) {
            if (old[i] && old[i] != TOMB) {
                uint32_t m = ncap - 1, j = hash_id(old[i]->id) & m;
                while (nt[j])
                    j = (j + 1) & m;
                nt[j] = old[i];
            }
        }
        free(old);
    }
    mask = agg->table_cap - 1;
    for (uint32_t i = hash_id(g->id) & mask;; i = (i + 1) & mask) {
        if (agg->table[i] == NULL || agg->table[i] == TOMB) {
            agg->table[i] = g;
            agg->ngroups++;
            return INCOLL_OK;
        }
    }
}

static incoll_status_t group_add_one(agg_t *agg, const agg_group_params_t *p);
static incoll_status_t group_remove_one(agg_t *agg, uint32_t id);

/* 1 when agg is the first of shards that know each other: adding and
 * removing a group there does it on every shard. */
static int primary(const agg_t *agg)
{
    return agg->npeers > 1 && agg->peers[0] == agg;
}

incoll_status_t agg_group_add(agg_t *agg, const agg_group_params_t *p)
{
    incoll_status_t status;
    if (!primary(agg))
        return group_add_one(agg, p);
    for (int i = 0; i < agg->npeers; i++) {
        status = group_add_one(agg->peers[i], p);
        if (status != INCOLL_OK) {
            while (i-- > 0)
                group_remove_one(agg->peers[i], p->id);
            return status;
        }
    }
    return INCOLL_OK;
}

incoll_status_t agg_group_remove(agg_t *agg, uint32_t id)
{
    incoll_status_t status;
    if (!primary(agg))
        return group_remove_one(agg, id);
    status = group_remove_one(agg, id);
    for (int i = 1; i < agg->npeers; i++)
        group_remove_one(agg->peers[i], id);
    return status;
}

static incoll_status_t group_add_one(agg_t *agg, const agg_group_params_t *p)
{
    group_t *g;
    size_t nslots, nch;

    if (p->nchildren < 1 || p->nchildren > AGG_MAX_CHILDREN || p->slots < 1 ||
        p->slots > 65535 || p->max_payload < 8 ||
        p->max_payload > WIRE_MAX_PAYLOAD || p->children == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if (group_find(agg, p->id))
        return INCOLL_ERR_BUSY;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return INCOLL_ERR_NO_MEMORY;
    nslots = p->slots;
    nch = (size_t)p->nchildren;
    g->id = p->id;
    g->key = p->key;
    g->nchildren = p->nchildren;
    g->parent = p->parent;
    g->index_at_parent = p->index_at_parent;
    g->nslots = p->slots;
    g->max_payload = p->max_payload;
    g->stride =
        ((size_t)p->max_payload + BUF_ALIGN - 1) & ~(size_t)(BUF_ALIGN - 1);
    g->seen_words = (p->nchildren + 63) / 64;
    g->children = malloc(nch * sizeof(*g->children));
    g->learned = calloc(nch, 1);
    g->slots = calloc(nslots, sizeof(*g->slots));
    g->seen_all = calloc(nslots * (size_t)g->seen_words, sizeof(uint64_t));
    g->asked_all = calloc(nslots * (size_t)g->seen_words, sizeof(uint64_t));
    g->lent_all = calloc(nslots * (size_t)g->seen_words, sizeof(uint64_t));
    g->kept_all = calloc(nslots * (size_t)g->seen_words, sizeof(uint64_t));
    g->contrib_all = calloc(nslots * nch, sizeof(uint8_t *));
    g->want_all = calloc(nslots * nch * 2, sizeof(uint32_t));
    g->res_all = aligned_alloc(BUF_ALIGN, nslots * 2 * g->stride);
    g->pool_cap = (int)(nslots * nch);
    g->pool = calloc((size_t)g->pool_cap, sizeof(uint8_t *));
    g->srcs = calloc(nch, sizeof(void *));
    g->piece = malloc(WIRE_PIECE_LEN + g->stride);
    g->lk_seen = calloc((size_t)g->seen_words, sizeof(uint64_t));
    g->ul_seen = calloc((size_t)g->seen_words, sizeof(uint64_t));
    g->mc = calloc((size_t)g->seen_words, sizeof(uint64_t));
    g->mcast = p->mcast == 0 ? INCOLL_EP_NONE : p->mcast;
    if (!g->mc || !g->piece || !g->lk_seen || !g->ul_seen || !g->want_all ||
        !g->children || !g->learned || !g->slots || !g->seen_all ||
        !g->asked_all || !g->lent_all || !g->kept_all || !g->contrib_all ||
        !g->res_all || !g->pool || !g->srcs) {
        group_free(agg, g);
        return INCOLL_ERR_NO_MEMORY;
    }
    for (size_t c = 0; c < nch; c++) {
        g->children[c] = p->children[c];
        g->learned[c] = p->children[c] == INCOLL_EP_NONE;
    }
    for (size_t s = 0; s < nslots; s++) {
        slot_t *sl = &g->slots[s];
        sl->epoch = UINT32_MAX;
        sl->state = SLOT_DONE;
        sl->seen = &g->seen_all[s * (size_t)g->seen_words];
        sl->asked = &g->asked_all[s * (size_t)g->seen_words];
        sl->lent = &g->lent_all[s * (size_t)g->seen_words];
        sl->kept = &g->kept_all[s * (size_t)g->seen_words];
        sl->contrib = &g->contrib_all[s * nch];
        sl->want = &g->want_all[s * nch * 2];
        sl->res[0].buf = &g->res_all[(2 * s) * g->stride];
        sl->res[1].buf = &g->res_all[(2 * s + 1) * g->stride];
    }
    g->ready = 1;
    if (table_insert(agg, g) != INCOLL_OK) {
        group_free(agg, g);
        return INCOLL_ERR_NO_MEMORY;
    }
    agg->ctr.groups = agg->ngroups;
    incoll_debug("agg %s: group %u added: %d children, %s, %u slots, "
                 "payload %u",
                 agg->name, g->id, g->nchildren,
                 g->parent == INCOLL_EP_NONE ? "root" : "has parent", g->nslots,
                 g->max_payload);
    return INCOLL_OK;
}

static incoll_status_t group_remove_one(agg_t *agg, uint32_t id)
{
    uint32_t mask = agg->table_cap - 1;
    for (uint32_t i = hash_id(id) & mask, n = 0; n < agg->table_cap;
         i = (i + 1) & mask, n++) {
        group_t *g = agg->table[i];
        if (g == NULL)
            break;
        if (g != TOMB && g->id == id) {
            agg_lock_forget(agg, g);
            agg->table[i] = TOMB;
            agg->ngroups--;
            agg->ctr.groups = agg->ngroups;
            group_free(agg, g);
            return INCOLL_OK;
        }
    }
    return INCOLL_ERR_NOT_FOUND;
}

int agg_group_count(const agg_t *agg)
{
    return (int)agg->ngroups;
}

void agg_set_now(agg_t *agg, uint64_t now_ns)
{
    agg->now_ns = now_ns;
    agg->clock_set = 1;
}

const agg_counters_t *agg_counters(const agg_t *agg)
{
    return &agg->ctr;
}

void agg_counters_add(agg_counters_t *sum, const agg_counters_t *c)
{
    uint64_t groups = sum->groups;
#define AGG_X_ADD(f) sum->f += c->f;
    AGG_COUNTER_LIST(AGG_X_ADD)
#undef AGG_X_ADD
    sum->groups = groups;
}

size_t agg_format(const agg_t *agg, const agg_counters_t *ctr, char *buf,
                  size_t len)
{
    size_t n;

    if (len == 0)
        return 0;
    n = (size_t)snprintf(buf, len, "an=%s", agg->name);
#define AGG_X_FMT(f)                                                           \
    if (n < len)                                                               \
        n += (size_t)snprintf(buf + n, len - n, " " #f "=%" PRIu64, ctr->f);
    AGG_COUNTER_LIST(AGG_X_FMT)
#undef AGG_X_FMT
    /* Not counters: the streaming pool and who holds it (0: nobody), then
     * what the driver says of itself. */
    if (n < len)
        n += (size_t)snprintf(
            buf + n, len - n, " stream_pool=%zu stream_holder=%" PRIu32,
            agg->pool_bytes, agg->holder ? agg->holder->id : 0);
    if (n < len && agg->info[0])
        n += (size_t)snprintf(buf + n, len - n, " %s", agg->info);
    return n < len ? n : len - 1;
}

size_t agg_format_counters(const agg_t *agg, char *buf, size_t len)
{
    agg_counters_t sum = agg->ctr;
    if (primary(agg))
        for (int i = 1; i < agg->npeers; i++)
            agg_counters_add(&sum, &agg->peers[i]->ctr);
    return agg_format(agg, &sum, buf, len);
}

/* The slot numbered idx: one of the group's slots, one of its stream
 * window while it holds a lock here, else NULL. */
static slot_t *slot_at(group_t *g, uint32_t idx)
{
    if (idx < g->nslots)
        return &g->slots[idx];
    if (idx - g->nslots < g->st_win)
        return &g->st.slots[idx - g->nslots];
    return NULL;
}

/* Sends one packet sealed under key, or when st is not NULL under the
 * payload's hash prepared with wire_mac_prepare (replication). With ref,
 * the payload is a slot's buffer that nothing changes before the driver's
 * next flush (see the top): it may leave without a copy. */
static void emit_as(agg_t *agg, const wire_key_t *key,
                    const wire_mac_state_t *st, incoll_ep_t dst,
                    const wire_hdr_t *h, const void *payload, size_t len,
                    int ref)
{
    uint8_t hdr[WIRE_HDR_LEN];
    if (len == 0)
        payload = hdr; /* never NULL, even with nothing to send */
    wire_pack(h, hdr);
    if (st)
        wire_mac_seal_prepared(st, hdr);
    else
        wire_mac_seal(key, hdr, payload, len);
    agg->ctr.packets_out++;
    agg->ctr.bytes_out += WIRE_HDR_LEN + len;
    if (ref && len)
        agg->send_ref(agg->send_arg, dst, hdr, payload, len);
    else
        agg->send(agg->send_arg, dst, hdr, payload, len);
    if ((h->flags & (WIRE_F_TWICE | WIRE_F_COPY)) == WIRE_F_TWICE) {
        /* The slot's contributions came twice: so does what it gives. */
        wire_hdr_t c = *h;
        c.flags |= WIRE_F_COPY;
        emit_as(agg, key, st, dst, &c, payload, len, ref);
    }
}

static void emit(agg_t *agg, const wire_key_t *key, const wire_mac_state_t *st,
                 incoll_ep_t dst, const wire_hdr_t *h, const void *payload,
                 size_t len)
{
    emit_as(agg, key, st, dst, h, payload, len, 0);
}

/* Writes a piece descriptor (offset, length; little-endian). */
static void put_piece(uint8_t *p, uint32_t off, uint32_t n)
{
    for (int b = 0; b < 4; b++) {
        p[b] = (uint8_t)(off >> (8 * b));
        p[4 + b] = (uint8_t)(n >> (8 * b));
    }
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Bytes of the data of result copy rc. */
static size_t res_bytes(const res_copy_t *rc)
{
    return (size_t)rc->count * incoll_dtype_size((incoll_dtype_t)rc->dtype);
}

/*
 * 1 when child c gets the data of result copy rc, 0 when it gets the
 * header alone (NODATA, an acknowledgement): an allreduce's result goes
 * to all; a reduce's only toward the root; a broadcast's to all but the
 * child the data came from; a barrier carries none.
 */
static int result_has_data(const res_copy_t *rc, int c)
{
    switch ((wire_coll_t)rc->kind) {
    case WIRE_COLL_ALLREDUCE:
        return 1;
    case WIRE_COLL_REDUCE:
        return rc->has && c == rc->rootc;
    case WIRE_COLL_BCAST:
        return rc->has && c != rc->rootc;
    case WIRE_COLL_ALLGATHER:
        return rc->has;
    case WIRE_COLL_GATHER:
        return rc->has && c == rc->rootc;
    default:
        return 0;
    }
}

/* The header of result copy rc of slot, to child (WIRE_CHILD_NONE: to
 * the group's multicast address), with flags extra added. */
static wire_hdr_t result_hdr(const group_t *g, uint16_t slot,
                             const res_copy_t *rc, uint16_t child,
                             uint16_t extra)
{
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = WIRE_RESULT,
        .op = rc->op,
        .dtype = rc->dtype,
        .group = g->id,
        .child = child,
        .flags = (uint16_t)((rc->flags & ~WIRE_F_PUSH) |
                            wire_kind_flags((wire_coll_t)rc->kind) | extra),
        .slot = slot,
        .epoch = rc->epoch,
        .count = rc->count,
        .offset = rc->offset,
    };
    h.total = g->gen; /* CONTRIB/RESULT carry the generation in "total" */
    return h;
}

/* Sends result copy rc under header h to ep: the error when the members'
 * calls differ (every receiver's operation fails), the header alone when
 * it carries no data (data 0), else the whole result (st: the payload's
 * prepared hash, or NULL). */
static void emit_result(agg_t *agg, group_t *g, incoll_ep_t ep, wire_hdr_t *h,
                        const res_copy_t *rc, int data,
                        const wire_mac_state_t *st)
{
    if (rc->err) {
        h->flags |= WIRE_F_ERROR | WIRE_F_NODATA;
        h->why = rc->err;
        emit(agg, &g->key, NULL, ep, h, NULL, 0);
    } else if (!data)
        emit(agg, &g->key, NULL, ep, h, NULL, 0);
    else
        emit_as(agg, &g->key, st, ep, h, rc->buf, res_bytes(rc), 1);
}

/* Sends result copy rc of slot to child c (if its endpoint is known); st
 * is the payload's prepared hash, or NULL. */
static void send_result(agg_t *agg, group_t *g, uint16_t slot,
                        const res_copy_t *rc, int c, const wire_mac_state_t *st)
{
    const uint32_t *want = &slot_at(g, slot)->want[2 * c];
    int split = wire_coll_is_split((wire_coll_t)rc->kind);
    int data = split ? rc->has && want[1] > 0 : result_has_data(rc, c);
    wire_hdr_t h =
        result_hdr(g, slot, rc, (uint16_t)c, data ? 0 : WIRE_F_NODATA);
    if (g->children[c] == INCOLL_EP_NONE)
        return;
    if (split && data && !rc->err) {
        /* The elements the child's subtree wants, as a piece. */
        size_t ds = incoll_dtype_size((incoll_dtype_t)rc->dtype);
        put_piece(g->piece, want[0], want[1]);
        memcpy(g->piece + WIRE_PIECE_LEN, rc->buf + (size_t)want[0] * ds,
               (size_t)want[1] * ds);
        emit(agg, &g->key, NULL, g->children[c], &h, g->piece,
             WIRE_PIECE_LEN + (size_t)want[1] * ds);
        return;
    }
    emit_result(agg, g, g->children[c], &h, rc, data, st);
}

/* Answers child c's duplicate or query q without a result: a RESULT
 * flagged QUERY, without data. With wait 0 it asks the child to send its
 * contribution again (a query for a slot still collecting without it);
 * with wait 1 (WIRE_F_WAIT) it says the AN holds it and waits for other
 * children, so that the child knows its resend arrived (twice when the
 * slot's packets go twice). */
static void answer_query(agg_t *agg, group_t *g, const wire_hdr_t *q, int c,
                         int wait, uint16_t twice)
{
    wire_hdr_t h = *q;
    h.type = WIRE_RESULT;
    h.flags = (uint16_t)(WIRE_F_QUERY | WIRE_F_NODATA | twice |
                         (wait ? WIRE_F_WAIT : 0) |
                         wire_kind_flags(wire_flags_kind(q->flags)));
    h.total = g->gen;
    h.root = 0;
    if (!wait) {
        agg->ctr.asks++;
        incoll_debug("agg %s: group %u slot %u epoch %u: child %d's "
                     "contribution is missing, asking for it",
                     agg->name, g->id, q->slot, q->epoch, c);
    }
    emit(agg, &g->key, NULL, g->children[c], &h, NULL, 0);
}

/*
 * Sends a slot's result to every child: one header per child, sealed from
 * the payload's hash made once, and one payload, the slot's result buffer,
 * which send_ref passes to the driver by reference for each of them. A
 * driver that can multicast would take the same single buffer to one
 * group address with one header, without copying it either.
 */
static int mc_listens(const group_t *g, int c)
{
    return (int)(g->mc[c / 64] >> (c % 64)) & 1;
}

/*
 * Whether result copy rc may go to the group's multicast address: every
 * listening child gets the same packet (allreduce, allgather, barrier, a
 * broadcast's data, whose root among the children still gets its own
 * result without data by unicast, or an error), and at least one listens.
 * A one-way broadcast's data goes ahead of the members' calls, by
 * unicast.
 */
static int mc_usable(const group_t *g, const res_copy_t *rc)
{
    int any = 0;
    if (g->mcast == INCOLL_EP_NONE)
        return 0;
    if (!rc->err && rc->kind != WIRE_COLL_ALLREDUCE &&
        rc->kind != WIRE_COLL_ALLGATHER && rc->kind != WIRE_COLL_BARRIER &&
        (rc->kind != WIRE_COLL_BCAST || (rc->flags & WIRE_F_ONEWAY)))
        return 0;
    for (int w = 0; w < g->seen_words; w++)
        any |= g->mc[w] != 0;
    return any;
}

/* Sends result copy rc once to the group's multicast address: the header
 * names no child (WIRE_CHILD_NONE) and says MCAST. */
static void send_mcast(agg_t *agg, group_t *g, uint16_t slot,
                       const res_copy_t *rc, const wire_mac_state_t *st)
{
    int data = !rc->err &&
               (rc->kind == WIRE_COLL_BCAST ? rc->has : result_has_data(rc, 0));
    wire_hdr_t h = result_hdr(g, slot, rc, WIRE_CHILD_NONE,
                              WIRE_F_MCAST | (data ? 0 : WIRE_F_NODATA));
    agg->ctr.mcast_sent++;
    emit_result(agg, g, g->mcast, &h, rc, data, st);
}

static void replicate(agg_t *agg, group_t *g, uint16_t slot, res_copy_t *rc)
{
    /* The copies differ only in their headers: hash the payload once, and
     * keep the hash for the resends. */
    int same = rc->has && !wire_coll_is_split((wire_coll_t)rc->kind);
    int mc = mc_usable(g, rc);
    /* The dual send: small results go by unicast too, so a lost multicast
     * copy costs nothing (agg_params_t.mcast_dual_bytes). So does the
     * last segment of a result of several (LAST at a nonzero offset): a
     * lost copy of it shows a member no later result, and only the tail
     * probe or the timeout would tell it; one more copy per child and
     * operation, not per segment. */
    int dual = mc && (res_bytes(rc) <= agg->mcast_dual_bytes ||
                      ((rc->flags & WIRE_F_LAST) && rc->offset != 0));
    if (same)
        wire_mac_prepare(&g->key, rc->buf, res_bytes(rc), &rc->st);
    rc->st_valid = (uint8_t)same;
    if (mc)
        send_mcast(agg, g, slot, rc, same ? &rc->st : NULL);
    for (int c = 0; c < g->nchildren; c++)
        if (!mc || dual || !mc_listens(g, c) ||
            (rc->kind == WIRE_COLL_BCAST && c == rc->rootc))
            send_result(agg, g, slot, rc, c, same ? &rc->st : NULL);
    agg->ctr.results_sent++;
}

/* Sends the slot's aggregate to the parent; first is 1 when the slot has
 * just completed (0: a re-forward, which a late result of the same batch
 * may overwrite before the driver flushes: copied). */
static void forward_up(agg_t *agg, group_t *g, uint16_t slot,
                       const res_copy_t *rc, uint16_t hops, int first)
{
    wire_hdr_t h = {
        .version = WIRE_VERSION,
        .type = WIRE_CONTRIB,
        .op = rc->op,
        .dtype = rc->dtype,
        .group = g->id,
        .child = g->index_at_parent,
        .flags = (uint16_t)(rc->flags | wire_kind_flags((wire_coll_t)rc->kind) |
                            (rc->rootc >= 0 ? WIRE_F_ROOT : 0) |
                            (rc->has ? 0 : WIRE_F_NODATA)),
        .slot = slot,
        .hops = (uint8_t)(hops > 255 ? 255 : hops),
        .root = rc->root,
        .epoch = rc->epoch,
        .count = rc->count,
        .offset = rc->offset,
    };
    h.total = g->gen;
    if (rc->err) {
        /* Our children's calls differ: the error goes up as our
         * aggregate (a split's with an empty descriptor). */
        h.flags = (uint16_t)((rc->flags & (WIRE_F_LAST | WIRE_F_TWICE)) |
                             wire_kind_flags((wire_coll_t)rc->kind) |
                             WIRE_F_NODATA | WIRE_F_ERROR);
        h.why = rc->err;
        memset(g->piece, 0, WIRE_PIECE_LEN);
        emit(agg, &g->key, NULL, g->parent, &h, g->piece,
             wire_coll_is_split((wire_coll_t)rc->kind) ? WIRE_PIECE_LEN : 0);
        return;
    }
    if (rc->has && wire_coll_is_gather((wire_coll_t)rc->kind)) {
        /* The pieces below us, as one piece (holes between them zero:
         * the parent ORs pieces together, see slot_combine). */
        uint32_t n = rc->phi - rc->plo;
        put_piece(g->piece, rc->plo, n);
        memcpy(g->piece + WIRE_PIECE_LEN, rc->buf + rc->plo, n);
        emit(agg, &g->key, NULL, g->parent, &h, g->piece, WIRE_PIECE_LEN + n);
        return;
    }
    if (wire_coll_is_split((wire_coll_t)rc->kind)) {
        /* What our children want, then the data if we have it. */
        put_piece(g->piece, rc->plo, rc->phi - rc->plo);
        if (rc->has)
            memcpy(g->piece + WIRE_PIECE_LEN, rc->buf, res_bytes(rc));
        emit(agg, &g->key, NULL, g->parent, &h, g->piece,
             WIRE_PIECE_LEN + (rc->has ? res_bytes(rc) : 0));
        return;
    }
    emit_as(agg, &g->key, NULL, g->parent, &h, rc->has ? rc->buf : NULL,
            rc->has ? res_bytes(rc) : 0, first);
}

static uint8_t *pool_get(group_t *g)
{
    if (g->pool_free > 0)
        return g->pool[--g->pool_free];
    /* Grows once, then reused; BUF_ALIGN more than a payload for a gather
     * piece's position (piece_at). */
    return aligned_alloc(BUF_ALIGN, g->stride + BUF_ALIGN);
}

static void pool_put(group_t *g, uint8_t *buf)
{
    /* The pool holds at most nslots * nchildren buffers: every buffer came
     * from a contribution slot, so it always fits. */
    g->pool[g->pool_free++] = buf;
}

/* Child c's contribution buffer in slot sl: its own in the streaming
 * pool for a stream slot, else one from the group's free list. */
static uint8_t *contrib_get(group_t *g, slot_t *sl, int c)
{
    if (sl->fixed)
        return sl->fixed + (size_t)c * (g->stride + BUF_ALIGN);
    return pool_get(g);
}

static int lent(const slot_t *sl, int c)
{
    return (sl->lent[c / 64] >> (c % 64)) & 1;
}

/* Gives child c's contribution buffer of slot sl back, if it has one (a
 * contribution the batch lent only lets go of it; one the driver kept
 * goes back to the driver). */
static void contrib_put(agg_t *agg, group_t *g, slot_t *sl, int c)
{
    uint64_t bit = 1ull << (c % 64);
    if (lent(sl, c)) {
        sl->lent[c / 64] &= ~bit;
        if (sl->kept[c / 64] & bit) {
            sl->kept[c / 64] &= ~bit;
            agg->release(agg->send_arg, sl->contrib[c]);
        }
    } else if (sl->contrib[c] && !sl->fixed) {
        pool_put(g, sl->contrib[c]);
    }
    sl->contrib[c] = NULL;
}

/* Reduces the slot's contributions in child order into its result copy. */
static void slot_reduce(agg_t *agg, group_t *g, slot_t *sl, res_copy_t *rc)
{
    size_t bytes =
        (size_t)rc->count * incoll_dtype_size((incoll_dtype_t)rc->dtype);
    for (int c = 0; c < g->nchildren; c++) {
        g->srcs[c] = sl->contrib[c];
        agg->ctr.rx_inplace += (uint64_t)lent(sl, c);
    }
    reduce_n((incoll_op_t)rc->op, (incoll_dtype_t)rc->dtype, rc->buf, g->srcs,
             g->nchildren, rc->count);
    for (int c = 0; c < g->nchildren; c++)
        contrib_put(agg, g, sl, c);
    agg->ctr.reductions++;
    agg->ctr.bytes_reduced += bytes * (uint64_t)g->nchildren;
}

/* Where a gather contribution buffer keeps its piece's offset and length
 * (the piece's bytes are at the start). */
static uint32_t *piece_at(const group_t *g, uint8_t *buf)
{
    return (uint32_t *)(void *)(buf + g->stride);
}

/*
 * Gathers: the pieces of the children ORed into a zeroed segment. Every
 * byte of the vector is one rank's, and every other piece that spans it
 * (an AN's piece covers the holes between its children's) holds a zero
 * there, so the OR places each byte, in any order.
 */
static void slot_gather(group_t *g, slot_t *sl, res_copy_t *rc)
{
    rc->has = 0;
    rc->plo = UINT32_MAX;
    rc->phi = 0;
    for (int c = 0; c < g->nchildren; c++) {
        uint8_t *b = sl->contrib[c];
        uint32_t off, n;
        if (b == NULL)
            continue;
        off = piece_at(g, b)[0];
        n = piece_at(g, b)[1];
        if (!rc->has)
            memset(rc->buf, 0, res_bytes(rc));
        rc->has = 1;
        for (uint32_t i = 0; i < n; i++)
            rc->buf[off + i] |= b[i];
        if (off < rc->plo)
            rc->plo = off;
        if (off + n > rc->phi)
            rc->phi = off + n;
    }
}

/* All children are in: makes the slot's aggregate in rc by its kind. */
static void slot_combine(agg_t *agg, group_t *g, slot_t *sl, res_copy_t *rc)
{
    switch ((wire_coll_t)rc->kind) {
    case WIRE_COLL_ALLREDUCE:
    case WIRE_COLL_REDUCE:
    case WIRE_COLL_REDUCE_SCATTER:
        slot_reduce(agg, g, sl, rc);
        rc->has = 1;
        break;
    default:
        /* Gathers: the children's pieces. Broadcast and scatter: the
         * root's subtree's data, if it is below us. Barrier: nothing. */
        rc->has = 0;
        if (wire_coll_is_gather((wire_coll_t)rc->kind))
            slot_gather(g, sl, rc);
        else if ((rc->kind == WIRE_COLL_BCAST ||
                  rc->kind == WIRE_COLL_SCATTER) &&
                 rc->rootc >= 0 && sl->contrib[rc->rootc]) {
            memcpy(rc->buf, sl->contrib[rc->rootc], res_bytes(rc));
            rc->has = 1;
        }
        for (int c = 0; c < g->nchildren; c++)
            contrib_put(agg, g, sl, c);
        break;
    }
    if (wire_coll_is_split((wire_coll_t)rc->kind)) {
        /* What our subtree wants: the span of the children's wants. */
        rc->plo = UINT32_MAX;
        rc->phi = 0;
        for (int c = 0; c < g->nchildren; c++) {
            uint32_t o = sl->want[2 * c], n = sl->want[2 * c + 1];
            if (n == 0)
                continue;
            if (o < rc->plo)
                rc->plo = o;
            if (o + n > rc->phi)
                rc->phi = o + n;
        }
        if (rc->phi == 0)
            rc->plo = 0;
    }
    switch ((wire_coll_t)rc->kind) {
    case WIRE_COLL_ALLREDUCE:
        agg->ctr.coll_allreduce++;
        break;
    case WIRE_COLL_REDUCE:
        agg->ctr.coll_reduce++;
        break;
    case WIRE_COLL_BCAST:
        agg->ctr.coll_bcast++;
        break;
    case WIRE_COLL_ALLGATHER:
        agg->ctr.coll_allgather++;
        break;
    case WIRE_COLL_GATHER:
        agg->ctr.coll_gather++;
        break;
    case WIRE_COLL_SCATTER:
        agg->ctr.coll_scatter++;
        break;
    case WIRE_COLL_REDUCE_SCATTER:
        agg->ctr.coll_reduce_scatter++;
        break;
    default:
        agg->ctr.coll_barrier++;
        break;
    }
}

/*
 * 1 when a contribution's payload is as its kind wants: data for an
 * allreduce, a reduce, a reduce_scatter and a broadcast's or scatter's
 * root, none for their other ranks and a barrier, either for gathers (a
 * piece, or none); the ROOT flag only on a reduce, broadcast, gather or
 * scatter.
 */
static int contrib_well_formed(const wire_hdr_t *h)
{
    wire_coll_t kind = wire_flags_kind(h->flags);
    int has = !(h->flags & WIRE_F_NODATA), root = !!(h->flags & WIRE_F_ROOT);
    if (h->flags & WIRE_F_ERROR) /* an AN's: its children's calls differ */
        return !has && !(h->flags & (WIRE_F_QUERY | WIRE_F_PUSH | WIRE_F_AHEAD |
                                     WIRE_F_ROOT));
    if (root && kind != WIRE_COLL_REDUCE && kind != WIRE_COLL_BCAST &&
        kind != WIRE_COLL_GATHER && kind != WIRE_COLL_SCATTER)
        return 0;
    if ((h->flags & (WIRE_F_PUSH | WIRE_F_AHEAD)) &&
        (kind != WIRE_COLL_BCAST || !root || !has))
        return 0; /* only a broadcast root's data goes ahead */
    if ((h->flags & WIRE_F_ONEWAY) &&
        (kind != WIRE_COLL_BCAST || (h->flags & WIRE_F_AHEAD)))
        return 0;
    if (h->flags & WIRE_F_QUERY)
        return !has &&
               (kind == WIRE_COLL_ALLREDUCE || kind == WIRE_COLL_REDUCE);
    if (kind == WIRE_COLL_REDUCE_SCATTER)
        return has;
    if (kind == WIRE_COLL_SCATTER)
        return has == root;
    if (wire_coll_is_gather(kind))
        return 1; /* a piece, or none when the rank has no byte here */
    if (kind == WIRE_COLL_ALLREDUCE || kind == WIRE_COLL_REDUCE)
        return has;
    if (kind == WIRE_COLL_BCAST)
        return has == root;
    return !has;
}

static void drop(agg_t *agg, uint64_t *ctr, incoll_ep_t src, const char *why,
                 uint32_t group)
{
    char ep[32];
    (*ctr)++;
    incoll_debug("agg %s: drop packet from %s: %s (group %u)", agg->name,
                 wire_ep_str(src, ep, sizeof(ep)), why, group);
}

/* The latest of a group's stamps (lk: lk_active_ns, else active_ns) on
 * this shard and its peers. */
static uint64_t group_active(const agg_t *agg, const group_t *g, int lk)
{
    uint64_t t = __atomic_load_n(lk ? &g->lk_active_ns : &g->active_ns,
                                 __ATOMIC_RELAXED);
    for (int i = 0; i < agg->npeers; i++) {
        const group_t *pg;
        uint64_t u;
        if (agg->peers[i] == agg || agg->peers[i] == NULL)
            continue;
        pg = group_find(agg->peers[i], g->id);
        if (pg == NULL)
            continue;
        u = __atomic_load_n(lk ? &pg->lk_active_ns : &pg->active_ns,
                            __ATOMIC_RELAXED);
        if (u > t)
            t = u;
    }
    return t;
}

/*
 * 1 when the group has accepted no packet of its generation for the idle
 * period, so that an older generation may take it over. Without a clock
 * (agg_set_now never called) every group counts as quiet.
 */
static int group_quiet(const agg_t *agg, const group_t *g)
{
    uint64_t active;
    if (agg->gen_idle_ns == 0 || !agg->clock_set)
        return 1;
    active = group_active(agg, g, 0);
    return agg->now_ns >= active && agg->now_ns - active >= agg->gen_idle_ns;
}

/*
 * Forgets every slot: a new generation of the group (a new job on the same
 * group) starts its sequence numbers again at 0, so nothing of the old one
 * may be resent to it or counted with it.
 */
static void group_reset(agg_t *agg, group_t *g, uint32_t gen)
{
    agg_lock_reset(agg, g, gen);
    for (uint32_t s = 0; s < g->nslots; s++) {
        slot_t *sl = &g->slots[s];
        for (int c = 0; c < g->nchildren; c++)
            contrib_put(agg, g, sl, c);
        sl->epoch = UINT32_MAX;
        sl->state = SLOT_DONE;
        sl->arrived = 0;
        sl->ahead = 0;
        sl->res[0].valid = sl->res[0].st_valid = 0;
        sl->res[1].valid = sl->res[1].st_valid = 0;
    }
    g->gen = gen;
    g->gen_set = 1;
}

/*
 * Checks a packet from child c (CONTRIB, LOCK, UNLOCK): its index, the
 * child's address and the group's generation (agg_core.h), resetting the
 * group for a newer one. Returns 1 to go on, 0 when it was dropped.
 */
static int child_admit(agg_t *agg, group_t *g, incoll_ep_t src,
                       const wire_hdr_t *h)
{
    int c = h->child;
    if (c >= g->nchildren) {
        drop(agg, &agg->ctr.malformed_dropped, src, "child index out of range",
             g->id);
        return 0;
    }
    if (!g->learned[c] && g->children[c] != src) {
        drop(agg, &agg->ctr.bad_source, src, "not the child it claims to be",
             g->id);
        return 0;
    }
    if (g->gen_set && h->total != g->gen) {
        int newer = (int32_t)(h->total - g->gen) > 0;
        if (!newer && !group_quiet(agg, g)) {
            /* A straggler of an earlier job: it must neither reset the
             * running job's slots nor redirect its child's results. */
            drop(agg, &agg->ctr.gen_dropped, src,
                 "packet of an older generation", g->id);
            return 0;
        }
        incoll_info("agg %s: group %u: generation %08x replaces %s %08x, "
                    "slots reset",
                    agg->name, g->id, h->total, newer ? "older" : "quiet",
                    g->gen);
        agg->ctr.generation_resets++;
        group_reset(agg, g, h->total);
    } else if (!g->gen_set) {
        group_reset(agg, g, h->total);
    }
    agg_stamp(&g->active_ns, agg->now_ns);
    if (g->learned[c])
        g->children[c] = src; /* hosts: reply to where they send from */
    return 1;
}

/* The services of agg_internal.h, for the lock protocol (agg_lock.c):
 * out-of-line doors onto the data path's static helpers, so that these
 * stay inlined where contributions and results use them. */
void agg_send_ctl(agg_t *agg, group_t *g, incoll_ep_t dst, const wire_hdr_t *h)
{
    emit(agg, &g->key, NULL, dst, h, NULL, 0);
}

void agg_drop(agg_t *agg, uint64_t *ctr, incoll_ep_t src, const char *why,
              uint32_t group)
{
    drop(agg, ctr, src, why, group);
}

int agg_child_admit(agg_t *agg, group_t *g, incoll_ep_t src,
                    const wire_hdr_t *h)
{
    return child_admit(agg, g, src, h);
}

uint64_t agg_group_active(const agg_t *agg, const group_t *g, int lk)
{
    return group_active(agg, g, lk);
}

void agg_slot_release(agg_t *agg, group_t *g, slot_t *sl)
{
    for (int c = 0; c < g->nchildren; c++)
        contrib_put(agg, g, sl, c);
}

/* A child asks again for a slot still collecting: the loss is another
 * child's contribution (that child resends it, or is asked for it);
 * names the first child missing. */
static void log_missing(const agg_t *agg, const group_t *g, const slot_t *sl,
                        const wire_hdr_t *h, int c)
{
    char ep[32];
    int m = 0;
    if ((int)LOG_LEVEL_DEBUG > log_level_current)
        return;
    while (m < g->nchildren && (sl->seen[m / 64] & (1ull << (m % 64))))
        m++;
    if (m == g->nchildren)
        return;
    incoll_debug("agg %s: group %u slot %u epoch %u: child %d asks again; "
                 "waiting for child %d (%s), %d of %d in",
                 agg->name, g->id, h->slot, h->epoch, c, m,
                 wire_ep_str(g->children[m], ep, sizeof(ep)), sl->arrived,
                 g->nchildren);
}

/*
 * Broadcasts ahead of the round (wire.h, WIRE_F_AHEAD): the root's data
 * for epoch h->epoch of a slot, come from child `from` (-1: from the
 * parent), goes at once down to every other child and, from a child, up
 * to the parent, which does the same: the members get the data without
 * waiting for the others to arrive, the root's siblings in two hops. Only
 * once per epoch (the round's own packets carry the data again when it
 * completes); the slot's round is not touched. sl->epoch is the slot's
 * epoch or the one before (the round of h->epoch not started here yet).
 */
static void send_ahead(agg_t *agg, group_t *g, slot_t *sl, const wire_hdr_t *h,
                       const uint8_t *payload, size_t bytes, int from)
{
    wire_mac_state_t st;
    wire_hdr_t d = *h;

    if (sl->ahead == h->epoch + 1u ||
        (h->epoch != sl->epoch && h->epoch != sl->epoch + 1u))
        return;
    sl->ahead = h->epoch + 1u;
    agg->ctr.ahead_sent++;
    d.version = WIRE_VERSION;
    d.flags = (uint16_t)((h->flags & (WIRE_F_LAST | WIRE_F_KIND_MASK)) |
                         WIRE_F_AHEAD);
    d.total = g->gen;
    d.root = 0;
    wire_mac_prepare(&g->key, payload, bytes, &st);
    d.type = WIRE_RESULT;
    for (int c = 0; c < g->nchildren; c++) {
        if (c == from || g->children[c] == INCOLL_EP_NONE)
            continue;
        d.child = (uint16_t)c;
        emit(agg, &g->key, &st, g->children[c], &d, payload, bytes);
    }
    if (from >= 0 && g->parent != INCOLL_EP_NONE) {
        d.type = WIRE_CONTRIB;
        d.child = g->index_at_parent;
        d.flags |= WIRE_F_ROOT;
        emit(agg, &g->key, &st, g->parent, &d, payload, bytes);
    }
}

/* A broadcast's data sent ahead (WIRE_F_AHEAD), bytes of payload, by
 * child c or, with c -1, by the parent: checked against the slot, then
 * passed on. */
static void on_ahead(agg_t *agg, group_t *g, const wire_hdr_t *h,
                     const uint8_t *payload, size_t bytes, int c)
{
    slot_t *sl = slot_at(g, h->slot);
    if (sl == NULL || wire_flags_kind(h->flags) != WIRE_COLL_BCAST ||
        (h->flags & (WIRE_F_NODATA | WIRE_F_QUERY)) ||
        (c >= 0 && !(h->flags & WIRE_F_ROOT)) || bytes > g->max_payload) {
        agg->ctr.malformed_dropped++;
        return;
    }
    send_ahead(agg, g, sl, h, payload, bytes, c);
}

/*
 * Why contribution h does not belong to the slot's call rc (the first
 * field that differs, wire_mismatch_t), or WIRE_MISMATCH_NONE: members
 * that called different collectives, or one with different datatypes,
 * ops, sizes or roots, must not be reduced together. An ERROR
 * contribution (a child AN's children differ) carries its reason.
 */
static unsigned call_differs(const wire_hdr_t *h, const res_copy_t *rc)
{
    if (h->flags & WIRE_F_ERROR)
        return h->why > WIRE_MISMATCH_NONE && h->why < WIRE_MISMATCH_COUNT
                   ? h->why
                   : WIRE_MISMATCH_KIND;
    if (wire_flags_kind(h->flags) != rc->kind)
        return WIRE_MISMATCH_KIND;
    if (h->op != rc->op)
        return WIRE_MISMATCH_OP;
    if (h->dtype != rc->dtype)
        return WIRE_MISMATCH_DTYPE;
    if (h->count != rc->count || h->offset != rc->offset ||
        (h->flags & WIRE_F_LAST) != (rc->flags & WIRE_F_LAST))
        return WIRE_MISMATCH_SIZE;
    if (h->root != rc->root || ((h->flags & WIRE_F_ROOT) && rc->rootc >= 0))
        return WIRE_MISMATCH_ROOT;
    return WIRE_MISMATCH_NONE;
}

/* Every child of the slot is in: the aggregate goes up, or at the root
 * the result goes down (an error when the children's calls differ). */
static void slot_complete(agg_t *agg, group_t *g, slot_t *sl, res_copy_t *rc,
                          uint16_t slot, uint16_t hops)
{
    if (rc->err) {
        for (int c = 0; c < g->nchildren; c++)
            contrib_put(agg, g, sl, c);
        rc->has = 0;
        rc->st_valid = 0;
    } else {
        slot_combine(agg, g, sl, rc);
    }
    if (g->parent == INCOLL_EP_NONE) {
        sl->state = SLOT_DONE;
        rc->valid = 1;
        replicate(agg, g, slot, rc);
    } else {
        sl->state = SLOT_FORWARDED;
        forward_up(agg, g, slot, rc, hops, 1);
    }
}

/* Starts epoch h->epoch of slot sl, collecting, described by h. The copy
 * of this epoch's parity held epoch-1, which every child has (they all
 * contributed to sl->epoch, or it was a one-way broadcast). */
static void slot_start(group_t *g, slot_t *sl, const wire_hdr_t *h)
{
    res_copy_t *rc;
    sl->epoch = h->epoch;
    sl->state = SLOT_COLLECTING;
    sl->arrived = 0;
    memset(sl->seen, 0, (size_t)g->seen_words * sizeof(uint64_t));
    memset(sl->asked, 0, (size_t)g->seen_words * sizeof(uint64_t));
    rc = &sl->res[sl->epoch & 1];
    rc->valid = 0;
    rc->st_valid = 0;
    rc->epoch = h->epoch;
    rc->op = h->op;
    rc->dtype = h->dtype;
    rc->count = h->count;
    rc->offset = h->offset;
    rc->flags = h->flags & WIRE_F_LAST;
    rc->kind = (uint8_t)wire_flags_kind(h->flags);
    rc->has = 0;
    rc->rootc = -1;
    rc->root = h->flags & WIRE_F_ERROR ? 0 : h->root;
    rc->err = 0;
}

/*
 * One-way broadcasts (wire.h, WIRE_F_ONEWAY): the root's data h, come
 * from child c (-1: from the parent), completes epoch h->epoch of the
 * slot here without waiting for the other children: every child but c
 * gets it as the slot's result at once; from a child it goes up too (the
 * parent does the same), and the AN at the tree's root acknowledges it
 * with a NODATA result down the root's path (result_has_data), which
 * completes the epoch on that path. The other members send nothing
 * unless they lack the result; their resends find the result kept (two
 * epochs per slot, as for any round). The slot may already collect the
 * epoch (members that lacked the data resent first): their calls are
 * compared as for any contribution. Returns 0 when the packet is none of
 * this (another epoch, a call that differs): the ordinary path takes it.
 */
static int on_oneway(agg_t *agg, group_t *g, slot_t *sl, const wire_hdr_t *h,
                     const uint8_t *payload, size_t bytes, int c)
{
    res_copy_t *rc;
    if (h->epoch == sl->epoch + 1 && sl->state == SLOT_DONE)
        slot_start(g, sl, h);
    else if (h->epoch != sl->epoch)
        return 0;
    rc = &sl->res[sl->epoch & 1];
    if (rc->flags & WIRE_F_ONEWAY) {
        /* Again: the root resends (its acknowledgement was lost), or a
         * parent resends to a child AN that asked. */
        if (c < 0 || sl->state == SLOT_COLLECTING || (h->flags & WIRE_F_COPY)) {
            agg->ctr.duplicates_dropped++;
        } else if (c == rc->rootc && sl->state == SLOT_FORWARDED) {
            agg->ctr.reforwards++;
            forward_up(agg, g, h->slot, rc, (uint16_t)(h->hops + 1), 0);
        } else {
            agg->ctr.results_resent++;
            send_result(agg, g, h->slot, rc, c, rc->st_valid ? &rc->st : NULL);
        }
        return 1;
    }
    if (sl->state == SLOT_DONE || (sl->state == SLOT_FORWARDED && c >= 0) ||
        (sl->arrived > 0 && call_differs(h, rc) != WIRE_MISMATCH_NONE))
        return 0;
    for (int k = 0; k < g->nchildren; k++) {
        contrib_put(agg, g, sl, k);
        sl->seen[k / 64] |= 1ull << (k % 64);
    }
    sl->arrived = g->nchildren;
    memcpy(rc->buf, payload, bytes);
    rc->has = 1;
    rc->rootc = c;
    rc->root = h->root;
    rc->flags =
        (uint16_t)((h->flags & (WIRE_F_LAST | WIRE_F_TWICE)) | WIRE_F_ONEWAY);
    rc->valid = 1;
    if (c >= 0)
        agg->ctr.contribs_accepted++;
    if (sl->state == SLOT_COLLECTING)
        agg->ctr.coll_bcast++; /* (a forwarded slot was counted then) */
    if (c < 0 || g->parent == INCOLL_EP_NONE) {
        sl->state = SLOT_DONE;
        replicate(agg, g, h->slot, rc);
        return 1;
    }
    sl->state = SLOT_FORWARDED;
    wire_mac_prepare(&g->key, rc->buf, bytes, &rc->st);
    rc->st_valid = 1;
    for (int k = 0; k < g->nchildren; k++)
        if (k != c)
            send_result(agg, g, h->slot, rc, k, &rc->st);
    agg->ctr.results_sent++;
    forward_up(agg, g, h->slot, rc, (uint16_t)(h->hops + 1), 1);
    return 1;
}

/*
 * Checks contribution h of child c (h->child, passed so that the caller's
 * bit arithmetic on it is shared) and bytes of payload before it touches a
 * slot: the child's index, the size, the shape of the collective, the
 * source and the generation (child_admit); notes whether c listens to the
 * group's multicast. Returns 1 to go on, 0 when it was dropped.
 */
static int contrib_admit(agg_t *agg, group_t *g, incoll_ep_t src,
                         const wire_hdr_t *h, int c, size_t bytes)
{
    if (c >= g->nchildren) {
        drop(agg, &agg->ctr.malformed_dropped, src, "child index out of range",
             g->id);
        return 0;
    }
    if (bytes > g->max_payload) {
        drop(agg, &agg->ctr.malformed_dropped, src,
             "payload larger than the group's", g->id);
        return 0;
    }
    if (!contrib_well_formed(h)) {
        drop(agg, &agg->ctr.malformed_dropped, src,
             "payload or root flag does not fit the collective", g->id);
        return 0;
    }
    if (!child_admit(agg, g, src, h))
        return 0;
    if (h->flags & WIRE_F_MCAST)
        g->mc[c / 64] |= 1ull << (c % 64);
    else
        g->mc[c / 64] &= ~(1ull << (c % 64));
    return 1;
}

/* Contribution h of child c names a slot the group does not have: out
 * of range, or a stream slot of a lock no longer held (agg_lock.c says
 * so, so that the host stops waiting). */
static __attribute__((noinline)) void contrib_no_slot(agg_t *agg, group_t *g,
                                                      incoll_ep_t src,
                                                      const wire_hdr_t *h,
                                                      int c)
{
    if (!agg_lock_stream_lost(agg, g, src, c))
        drop(agg, &agg->ctr.malformed_dropped, src, "slot out of range", g->id);
}

/*
 * Contribution h of child c is for another epoch than slot sl's, and not
 * for the next one: a child that lacks the previous epoch's result gets
 * it again, anything else is out of the window and dropped.
 */
static void contrib_other_epoch(agg_t *agg, group_t *g, slot_t *sl,
                                incoll_ep_t src, const wire_hdr_t *h, int c)
{
    res_copy_t *prev = &sl->res[h->epoch & 1];

    if (h->epoch == sl->epoch - 1 && prev->valid && prev->epoch == h->epoch &&
        !(h->flags & WIRE_F_COPY)) {
        /* Lost result of the previous epoch: resend to that child. */
        agg->ctr.results_resent++;
        if (mc_listens(g, c) && mc_usable(g, prev))
            agg->ctr.mcast_repairs++;
        send_result(agg, g, h->slot, prev, c,
                    prev->st_valid ? &prev->st : NULL);
        return;
    }
    drop(agg, &agg->ctr.stale_dropped, src, "epoch out of window", g->id);
}

/* Child c, already in the slot's epoch, sent again (h): a copy, or a
 * question whose answer depends on where the slot's round is. */
static void contrib_again(agg_t *agg, group_t *g, slot_t *sl, res_copy_t *rc,
                          const wire_hdr_t *h, int c)
{
    agg->ctr.duplicates_dropped++;
    if (h->flags & WIRE_F_COPY)
        return; /* the second of two, not a question */
    if ((rc->flags & WIRE_F_ONEWAY) && c != rc->rootc) {
        /* A one-way broadcast's member that lacks the data. */
        agg->ctr.results_resent++;
        send_result(agg, g, h->slot, rc, c, rc->st_valid ? &rc->st : NULL);
    } else if (sl->state == SLOT_FORWARDED) {
        /* Our aggregate or the parent's result was lost. All the
         * children notice at about the same time (later results
         * came, ours did not): the first to ask sends the aggregate
         * up again, the others' copies wait until one of them asks
         * again (a round later: the resent aggregate was lost too). */
        uint64_t bit = 1ull << (c % 64);
        int any = 0;
        for (int wi = 0; wi < g->seen_words; wi++)
            any |= sl->asked[wi] != 0;
        if (any && !(sl->asked[c / 64] & bit)) {
            sl->asked[c / 64] |= bit;
            answer_query(agg, g, h, c, 1, rc->flags & WIRE_F_TWICE);
            return;
        }
        memset(sl->asked, 0, (size_t)g->seen_words * sizeof(uint64_t));
        sl->asked[c / 64] |= bit;
        agg->ctr.reforwards++;
        forward_up(agg, g, h->slot, rc, (uint16_t)(h->hops + 1), 0);
        answer_query(agg, g, h, c, 1, rc->flags & WIRE_F_TWICE);
    } else if (sl->state == SLOT_DONE) {
        agg->ctr.results_resent++;
        if (mc_listens(g, c) && mc_usable(g, rc))
            agg->ctr.mcast_repairs++;
        send_result(agg, g, h->slot, rc, c, rc->st_valid ? &rc->st : NULL);
    } else {
        agg->ctr.waits++;
        log_missing(agg, g, sl, h, c);
        answer_query(agg, g, h, c, 1, rc->flags & WIRE_F_TWICE);
    }
}

/* Child c's call differs from the slot's (why): the child counts as in,
 * its data is not used, and the slot's result is an error for all. */
static __attribute__((noinline)) void
contrib_differs(agg_t *agg, group_t *g, slot_t *sl, res_copy_t *rc,
                const wire_hdr_t *h, int c, unsigned why)
{
    if (rc->err == WIRE_MISMATCH_NONE) {
        rc->err = (uint8_t)why;
        if (!(h->flags & WIRE_F_ERROR))
            agg->ctr.calls_mismatched++;
        incoll_debug("agg %s: group %u slot %u epoch %u: child %d's "
                     "call differs from the slot's (%s)",
                     agg->name, g->id, h->slot, h->epoch, c,
                     wire_mismatch_str(why));
    }
    sl->seen[c / 64] |= 1ull << (c % 64);
    sl->arrived++;
    agg->ctr.contribs_accepted++;
    if (sl->arrived == g->nchildren)
        slot_complete(agg, g, sl, rc, h->slot, (uint16_t)(h->hops + 1));
}

/*
 * Keeps child c's data (h, payload, bytes) for the slot's reduction:
 * lent by the batch where it lies (see the top), else copied into a
 * buffer of the group's free list; a split's segment wanted is noted.
 * Returns 0, or -1 when it was dropped (out of memory).
 */
static int contrib_keep(agg_t *agg, group_t *g, slot_t *sl,
                        const res_copy_t *rc, incoll_ep_t src,
                        const wire_hdr_t *h, const uint8_t *payload,
                        size_t bytes, int c)
{
    if (!(h->flags & WIRE_F_NODATA) &&
        !wire_coll_is_gather((wire_coll_t)rc->kind) && agg->in_batch &&
        agg->nborrow < AGG_BORROW_MAX) {
        /* Kept where it lies until the batch ends (see the top). */
        const uint8_t *data = wire_coll_is_split((wire_coll_t)rc->kind)
                                  ? payload + WIRE_PIECE_LEN
                                  : payload;
        sl->contrib[c] = (uint8_t *)(uintptr_t)data;
        sl->lent[c / 64] |= 1ull << (c % 64);
        agg->borrows[agg->nborrow++] = (borrow_t){.g = g,
                                                  .data = data,
                                                  .epoch = h->epoch,
                                                  .slot = h->slot,
                                                  .child = (uint16_t)c};
    } else if (!(h->flags & WIRE_F_NODATA)) {
        sl->contrib[c] = contrib_get(g, sl, c);
        if (sl->contrib[c] == NULL) {
            drop(agg, &agg->ctr.malformed_dropped, src, "out of memory", g->id);
            return -1;
        }
        if (wire_coll_is_gather((wire_coll_t)rc->kind)) {
            /* wire_parse checked that the piece fits the segment. */
            uint32_t *pa = piece_at(g, sl->contrib[c]);
            pa[0] = (uint32_t)payload[0] | (uint32_t)payload[1] << 8 |
                    (uint32_t)payload[2] << 16 | (uint32_t)payload[3] << 24;
            pa[1] = (uint32_t)payload[4] | (uint32_t)payload[5] << 8 |
                    (uint32_t)payload[6] << 16 | (uint32_t)payload[7] << 24;
            memcpy(sl->contrib[c], payload + WIRE_PIECE_LEN, pa[1]);
        } else if (wire_coll_is_split((wire_coll_t)rc->kind)) {
            memcpy(sl->contrib[c], payload + WIRE_PIECE_LEN, bytes);
        } else {
            memcpy(sl->contrib[c], payload, bytes);
        }
    }
    if (wire_coll_is_split((wire_coll_t)rc->kind)) {
        sl->want[2 * c] = get_u32(payload);
        sl->want[2 * c + 1] = get_u32(payload + 4);
    }
    return 0;
}

/* A contribution h (payload) from src: admitted, matched to its slot and
 * epoch, kept, and the slot completed when every child is in. */
static void on_contrib(agg_t *agg, group_t *g, incoll_ep_t src,
                       const wire_hdr_t *h, const uint8_t *payload)
{
    slot_t *sl;
    res_copy_t *rc;
    int c = h->child;
    size_t bytes =
        (size_t)h->count * incoll_dtype_size((incoll_dtype_t)h->dtype);

    if (!contrib_admit(agg, g, src, h, c, bytes))
        return;
    if (h->flags & WIRE_F_AHEAD) {
        on_ahead(agg, g, h, payload, bytes, c);
        return;
    }
    sl = slot_at(g, h->slot);
    if (sl == NULL) {
        contrib_no_slot(agg, g, src, h, c);
        return;
    }
    /* Any contribution shows the group alive: a holder whose small
     * operations keep the slots while it holds the lock is not quiet. */
    agg_stamp(&g->lk_active_ns, agg->now_ns);
    if (h->slot >= g->nslots)
        agg->ctr.stream_bytes += bytes;
    if ((h->flags & WIRE_F_ONEWAY) && (h->flags & WIRE_F_ROOT) &&
        on_oneway(agg, g, sl, h, payload, bytes, c))
        return;
    if (h->epoch == sl->epoch + 1 && sl->state == SLOT_DONE) {
        /* The child holds the result of sl->epoch: start the next epoch.
         * The copy of this epoch's parity held epoch-1, which every child
         * has (they all contributed to sl->epoch). */
        slot_start(g, sl, h);
    } else if (h->epoch != sl->epoch) {
        contrib_other_epoch(agg, g, sl, src, h, c);
        return;
    }

    rc = &sl->res[sl->epoch & 1];
    if (sl->seen[c / 64] & (1ull << (c % 64))) {
        contrib_again(agg, g, sl, rc, h, c);
        return;
    }
    if (sl->state != SLOT_COLLECTING) {
        drop(agg, &agg->ctr.stale_dropped, src, "slot not collecting", g->id);
        return;
    }
    if (h->flags & WIRE_F_QUERY) {
        /* A query where the child's contribution never came: ask. */
        answer_query(agg, g, h, c, 0, 0);
        return;
    }
    {
        unsigned why = call_differs(h, rc);
        if (why != WIRE_MISMATCH_NONE) {
            contrib_differs(agg, g, sl, rc, h, c, why);
            return;
        }
    }
    if (contrib_keep(agg, g, sl, rc, src, h, payload, bytes, c) != 0)
        return;
    if (h->flags & WIRE_F_ROOT)
        rc->rootc = c;
    rc->flags |= h->flags & WIRE_F_TWICE;
    sl->seen[c / 64] |= 1ull << (c % 64);
    sl->arrived++;
    agg->ctr.contribs_accepted++;
    rc->flags |= h->flags & WIRE_F_PUSH;
    if ((h->flags & WIRE_F_PUSH) &&
        (sl->arrived < g->nchildren || g->parent != INCOLL_EP_NONE))
        send_ahead(agg, g, sl, h, payload, bytes, c);
    if (sl->arrived == g->nchildren)
        slot_complete(agg, g, sl, rc, h->slot, (uint16_t)(h->hops + 1));
    /* A one-way broadcast's member whose timer went before the root's
     * data came is in now: while the slot waits (for other children, or
     * for the parent), it is told so (WIRE_F_WAIT), and waits for the
     * root without asking again. */
    if ((h->flags & (WIRE_F_ONEWAY | WIRE_F_ROOT | WIRE_F_RETRANS)) ==
            (WIRE_F_ONEWAY | WIRE_F_RETRANS) &&
        sl->state != SLOT_DONE) {
        agg->ctr.waits++;
        answer_query(agg, g, h, c, 1, rc->flags & WIRE_F_TWICE);
    }
}

static void on_result(agg_t *agg, group_t *g, incoll_ep_t src,
                      const wire_hdr_t *h, const uint8_t *payload)
{
    slot_t *sl;
    res_copy_t *rc;
    int has, want;
    size_t bytes =
        (size_t)h->count * incoll_dtype_size((incoll_dtype_t)h->dtype);

    if (g->parent == INCOLL_EP_NONE || src != g->parent) {
        drop(agg, &agg->ctr.bad_source, src, "result not from the parent",
             g->id);
        return;
    }
    sl = slot_at(g, h->slot);
    if (sl == NULL) {
        drop(agg, &agg->ctr.malformed_dropped, src, "slot out of range", g->id);
        return;
    }
    if (h->total != g->gen) {
        drop(agg, &agg->ctr.gen_dropped, src, "result of another generation",
             g->id);
        return;
    }
    agg_stamp(&g->active_ns, agg->now_ns);
    if (h->slot >= g->nslots)
        agg_stamp(&g->lk_active_ns, agg->now_ns);
    if (h->flags & WIRE_F_AHEAD) {
        on_ahead(agg, g, h, payload, bytes, -1);
        return;
    }
    if ((h->flags & WIRE_F_ONEWAY) && !(h->flags & WIRE_F_NODATA) &&
        bytes <= g->max_payload && !(h->flags & WIRE_F_QUERY) &&
        wire_flags_kind(h->flags) == WIRE_COLL_BCAST &&
        on_oneway(agg, g, sl, h, payload, bytes, -1))
        return;
    if ((h->flags & WIRE_F_ONEWAY) && (h->flags & WIRE_F_NODATA) &&
        h->epoch == sl->epoch && sl->state == SLOT_FORWARDED &&
        (sl->res[sl->epoch & 1].flags & WIRE_F_ONEWAY)) {
        /* The acknowledgement of a one-way broadcast, down the root's
         * path: only the root's side waits for it. */
        rc = &sl->res[sl->epoch & 1];
        sl->state = SLOT_DONE;
        send_result(agg, g, h->slot, rc, rc->rootc,
                    rc->st_valid ? &rc->st : NULL);
        agg->ctr.results_sent++;
        return;
    }
    if (h->epoch != sl->epoch || sl->state != SLOT_FORWARDED ||
        (h->flags & WIRE_F_QUERY)) {
        /* (a QUERY answer from the parent carries no result) */
        agg->ctr.duplicates_dropped++;
        return;
    }
    rc = &sl->res[sl->epoch & 1];
    if (h->flags & WIRE_F_ERROR) {
        /* Members elsewhere in the tree called something else: every
         * child's operation fails. */
        rc->err = h->why > WIRE_MISMATCH_NONE && h->why < WIRE_MISMATCH_COUNT
                      ? (uint8_t)h->why
                      : WIRE_MISMATCH_KIND;
        rc->has = 0;
        rc->valid = 1;
        sl->state = SLOT_DONE;
        replicate(agg, g, h->slot, rc);
        return;
    }
    has = !(h->flags & WIRE_F_NODATA);
    switch ((wire_coll_t)rc->kind) {
    case WIRE_COLL_ALLREDUCE:
        want = 1;
        break;
    case WIRE_COLL_REDUCE: /* data only on the root's path */
        want = rc->rootc >= 0;
        break;
    case WIRE_COLL_BCAST: /* on the root's path we hold the data */
        want = rc->rootc < 0;
        break;
    case WIRE_COLL_ALLGATHER:
        want = 1;
        break;
    case WIRE_COLL_GATHER:
        want = rc->rootc >= 0;
        break;
    case WIRE_COLL_SCATTER:
    case WIRE_COLL_REDUCE_SCATTER: /* a piece when our children want one */
        want = rc->phi > rc->plo;
        break;
    default:
        want = 0;
        break;
    }
    if (h->op != rc->op || h->dtype != rc->dtype || h->count != rc->count ||
        h->offset != rc->offset || bytes > g->max_payload ||
        wire_flags_kind(h->flags) != rc->kind || has != want) {
        drop(agg, &agg->ctr.mismatch_dropped, src,
             "result does not match the slot", g->id);
        return;
    }
    if (has && wire_coll_is_split((wire_coll_t)rc->kind)) {
        size_t ds = incoll_dtype_size((incoll_dtype_t)rc->dtype);
        uint32_t off = get_u32(payload), n = get_u32(payload + 4);
        if (off != rc->plo || n != rc->phi - rc->plo) {
            drop(agg, &agg->ctr.mismatch_dropped, src,
                 "result piece is not what we asked for", g->id);
            return;
        }
        memcpy(rc->buf + (size_t)off * ds, payload + WIRE_PIECE_LEN,
               (size_t)n * ds);
        rc->has = 1;
    } else if (has) {
        memcpy(rc->buf, payload, bytes);
        rc->has = 1;
    } else if (rc->kind == WIRE_COLL_REDUCE || rc->kind == WIRE_COLL_GATHER) {
        rc->has = 0; /* buf holds our partial aggregate, not the result */
    }
    rc->valid = 1;
    sl->state = SLOT_DONE;
    replicate(agg, g, h->slot, rc);
}

static void on_stats(agg_t *agg, incoll_ep_t src, const wire_hdr_t *h,
                     const void *buf, size_t len)
{
    char text[2048];
    /* The reply echoes the request's slot and epoch, which the tool
     * fills with a random number, so it can tell its answer from a replay
     * of an older one. */
    wire_hdr_t r = {.version = WIRE_VERSION,
                    .type = WIRE_STATS_REP,
                    .child = WIRE_CHILD_NONE,
                    .slot = h->slot,
                    .epoch = h->epoch,
                    .offset = h->offset};
    size_t n;

    if (agg->admin_key == 0 || !wire_mac_check(&agg->admin_mac_key, buf, len)) {
        drop(agg, &agg->ctr.bad_mac, src, "stats request with a bad mac", 0);
        return;
    }
    agg->ctr.stats_requests++;
    n = agg->stats ? agg->stats(agg->stats_arg, text, sizeof(text))
                   : agg_format_counters(agg, text, sizeof(text));
    r.count = (uint32_t)n;
    emit(agg, &agg->admin_mac_key, NULL, src, &r, text, n);
}

/* A packet of another wire version: an error the first time a peer
 * sends one, for it is a misconfiguration (hosts and ANs of different
 * builds), not noise. */
static void drop_version(agg_t *agg, incoll_ep_t src, int version)
{
    char ep[32];
    agg->ctr.version_mismatch++;
    if (wire_once(&agg->once,
                  src ^ ((uint64_t)(unsigned)version << 48) ^ (1ull << 62)))
        incoll_error("agg %s: packet from %s speaks wire version %d, this an "
                     "speaks %d: hosts and ANs must run the same incoll "
                     "(dropped; counted in version_mismatch)",
                     agg->name, wire_ep_str(src, ep, sizeof(ep)), version,
                     WIRE_VERSION);
}

/* A packet authenticated with another algorithm than the group's: an
 * error the first time, as drop_version. */
static void drop_mac_alg(agg_t *agg, const group_t *g, incoll_ep_t src,
                         unsigned alg)
{
    char ep[32];
    agg->ctr.mac_mismatch++;
    if (wire_once(&agg->once, src ^ ((uint64_t)alg << 48) ^ (2ull << 62)))
        incoll_error("agg %s: packet from %s (group %u) is authenticated "
                     "with %s, this an with %s: set INCOLL_MAC alike on "
                     "every host and AN (dropped; counted in mac_mismatch)",
                     agg->name, wire_ep_str(src, ep, sizeof(ep)), g->id,
                     wire_mac_alg_name(alg), wire_mac_alg_name(g->key.alg));
}

/* The batch has ended: every contribution it lent that a slot still
 * holds is copied into a buffer of the slot's own (see the top). */
static void unborrow(agg_t *agg)
{
    for (int i = 0; i < agg->nborrow; i++) {
        const borrow_t *b = &agg->borrows[i];
        group_t *g = b->g;
        slot_t *sl = slot_at(g, b->slot);
        int c = b->child;
        res_copy_t *rc;
        uint8_t *buf;
        if (sl == NULL || sl->epoch != b->epoch || !lent(sl, c) ||
            sl->contrib[c] != b->data)
            continue;
        rc = &sl->res[sl->epoch & 1];
        if (agg->retain && !sl->fixed &&
            agg->retain(agg->send_arg, b->data) == 0) {
            /* The driver keeps its buffer: no copy (released by
             * contrib_put when the slot is done with it). */
            sl->kept[c / 64] |= 1ull << (c % 64);
            continue;
        }
        sl->lent[c / 64] &= ~(1ull << (c % 64));
        buf = contrib_get(g, sl, c);
        if (buf == NULL) {
            /* Forgotten, as if never received: the child sends it again. */
            incoll_debug("agg %s: group %u slot %u: out of memory for child "
                         "%d's contribution",
                         agg->name, g->id, b->slot, c);
            sl->contrib[c] = NULL;
            sl->seen[c / 64] &= ~(1ull << (c % 64));
            sl->arrived--;
            agg->ctr.contribs_accepted--;
            if (rc->rootc == c)
                rc->rootc = -1;
            continue;
        }
        memcpy(buf, b->data, res_bytes(rc));
        sl->contrib[c] = buf;
    }
    agg->nborrow = 0;
}

void agg_on_batch(agg_t *agg, const agg_pkt_t *pkts, int n)
{
    agg->in_batch = 1;
    for (int i = 0; i < n; i++)
        agg_on_packet(agg, pkts[i].src, pkts[i].buf, pkts[i].len);
    agg->in_batch = 0;
    unborrow(agg);
}

static void on_one(agg_t *agg, incoll_ep_t src, const void *buf, size_t len);

void agg_on_packet(agg_t *agg, incoll_ep_t src, const void *buf, size_t len)
{
    if (agg->in_batch) {
        on_one(agg, src, buf, len);
        return;
    }
    /* A batch of one: lent for its own handling, then kept if need be. */
    agg->in_batch = 1;
    on_one(agg, src, buf, len);
    agg->in_batch = 0;
    unborrow(agg);
}

int agg_shard_of(const agg_t *agg, const void *buf, size_t len, int nshards)
{
    const uint8_t *p = buf;
    const group_t *g;
    uint16_t slot;
    if (nshards <= 1 || len < WIRE_HDR_LEN ||
        wire_peek_version(buf, len) != WIRE_VERSION ||
        (p[5] != WIRE_CONTRIB && p[5] != WIRE_RESULT))
        return 0;
    g = group_find(agg, (uint32_t)p[8] | (uint32_t)p[9] << 8 |
                            (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24);
    slot = (uint16_t)(p[24] | p[25] << 8);
    if (g == NULL || slot >= g->nslots)
        return 0;
    return slot % nshards;
}

void agg_set_peers(agg_t *agg, agg_t *const *peers, int npeers)
{
    agg->peers = peers;
    agg->npeers = npeers;
}

static void on_one(agg_t *agg, incoll_ep_t src, const void *buf, size_t len)
{
    wire_hdr_t h;
    const char *why = NULL;
    group_t *g;

    agg->ctr.packets_in++;
    agg->ctr.bytes_in += len;
    if (wire_parse(buf, len, &h, &why) != INCOLL_OK) {
        int version = wire_peek_version(buf, len);
        if (version >= 0 && version != WIRE_VERSION)
            drop_version(agg, src, version);
        else
            drop(agg, &agg->ctr.malformed_dropped, src, why, 0);
        return;
    }
    if (h.type == WIRE_STATS_REQ) {
        on_stats(agg, src, &h, buf, len);
        return;
    }
    if (h.type != WIRE_CONTRIB && h.type != WIRE_RESULT &&
        !wire_is_lock(h.type)) {
        drop(agg, &agg->ctr.malformed_dropped, src, "packet type not for an an",
             h.group);
        return;
    }
    g = group_find(agg, h.group);
    if (g == NULL) {
        drop(agg, &agg->ctr.unknown_group, src, "unknown group", h.group);
        return;
    }
    if (!wire_mac_check(&g->key, buf, len)) {
        if (h.mac_alg != g->key.alg)
            drop_mac_alg(agg, g, src, h.mac_alg);
        else
            drop(agg, &agg->ctr.bad_mac, src, "bad mac", h.group);
        return;
    }
    switch (h.type) {
    case WIRE_CONTRIB:
        on_contrib(agg, g, src, &h, (const uint8_t *)buf + WIRE_HDR_LEN);
        break;
    case WIRE_RESULT:
        on_result(agg, g, src, &h, (const uint8_t *)buf + WIRE_HDR_LEN);
        break;
    case WIRE_LOCK:
        agg_lock_on_lock(agg, g, src, &h);
        break;
    case WIRE_LOCK_REP:
        agg_lock_on_lock_rep(agg, g, src, &h);
        break;
    case WIRE_UNLOCK:
        agg_lock_on_unlock(agg, g, src, &h);
        break;
    default:
        agg_lock_on_unlock_rep(agg, g, src, &h);
        break;
    }
}
