/*
 * libincoll_mpi's communicators: the state the layer caches on each MPI
 * communicator it has looked at (an attribute, which MPI frees with the
 * communicator), made collectively at its first collective so that
 * every rank agrees whether it is offloaded and on which libincoll
 * communicator; the lookup from an MPI_Comm handle to that state without
 * an MPI call; and the pools of libincoll communicators of persistent
 * collectives. The offload paths (mpi_layer.c) ask mpi_comm_state().
 */
#include "mpi/mpi_state.h"

#include "incoll.h"

#include "common/hashtab.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A state for communicators whose own state could not be allocated: it
 * says "not offloaded" and is never freed, so such a rank still answers
 * consistently after the collective setup. */
static comm_state_t nomem_state = {.why = "out of memory in the MPI layer"};

/* ------------------------------------------------------------------ */
/* Communicator lookup                                                 */

/* The handle's bits: a pointer in Open MPI, an int in MPICH. */
static uint64_t comm_key(MPI_Comm comm)
{
    uint64_t k = 0;
    memcpy(&k, &comm, sizeof(comm) < sizeof(k) ? sizeof(comm) : sizeof(k));
    return k;
}

/* The handle -> state table (src/common/hashtab.h) over L.table: an
 * empty slot has no state. */
static uint64_t slot_hash(const void *rec, const void *arg)
{
    (void)arg;
    return hashtab_mix(((const struct comm_slot *)rec)->key);
}

static int slot_empty(const void *rec)
{
    return ((const struct comm_slot *)rec)->st == NULL;
}

static void slot_clear(void *rec)
{
    ((struct comm_slot *)rec)->st = NULL;
}

static int slot_eq(const void *rec, const void *key)
{
    return ((const struct comm_slot *)rec)->key == *(const uint64_t *)key;
}

static hashtab_t table_view(void)
{
    return (hashtab_t){.slots = L.table,
                       .esz = sizeof(*L.table),
                       .cap = (uint32_t)L.table_cap,
                       .n = (uint32_t)L.table_n,
                       .hash = slot_hash,
                       .empty = slot_empty,
                       .clear = slot_clear};
}

static void table_keep(const hashtab_t *t)
{
    L.table = t->slots;
    L.table_cap = t->cap;
    L.table_n = t->n;
}

static comm_state_t *table_find(uint64_t key)
{
    hashtab_t t = table_view();
    struct comm_slot *s = hashtab_find(&t, hashtab_mix(key), slot_eq, &key);
    return s ? s->st : NULL;
}

/* Adds key -> st (at setup, not per call). Returns 0, or -1 when out of
 * memory (the caller then finds the state through its attribute). */
static int table_put(uint64_t key, comm_state_t *st)
{
    hashtab_t t = table_view();
    struct comm_slot *s;

    if (hashtab_full(&t)) {
        uint32_t ocap = t.cap, cap = ocap ? ocap * 2 : 64;
        struct comm_slot *nt = malloc(cap * sizeof(*nt)), *old;
        if (nt == NULL)
            return -1;
        old = hashtab_swap(&t, nt, cap);
        for (uint32_t j = 0; j < ocap; j++)
            if (old[j].st)
                hashtab_put(&t, &old[j]);
        free(old);
    }
    s = hashtab_slot(&t, hashtab_mix(key), slot_eq, &key);
    if (s->st == NULL) {
        s->key = key;
        hashtab_added(&t);
    }
    s->st = st; /* new, or a handle MPI reused */
    table_keep(&t);
    return 0;
}

/* Removes key (later entries of its probe run move back, so that lookups
 * never stop at the hole). */
static void table_del(uint64_t key)
{
    hashtab_t t = table_view();
    struct comm_slot *s = hashtab_find(&t, hashtab_mix(key), slot_eq, &key);
    if (s == NULL)
        return;
    hashtab_delete(&t, s);
    table_keep(&t);
}

/* The MPI communicator of pool went: its idle libincoll communicators go
 * now, the busy ones with their requests (pool_put). */
static void pool_orphan(persist_pool_t *pool)
{
    if (pool == NULL)
        return;
    for (int i = 0; i < pool->n; i++) {
        if (!(pool->busy & (1ull << i)) && pool->ic[i] && L.ctx)
            incoll_comm_destroy(pool->ic[i]);
        if (!(pool->busy & (1ull << i)))
            pool->ic[i] = NULL;
    }
    pool->orphan = 1;
    if (pool->busy == 0)
        free(pool);
}

/* A persistent request gives slot back to pool (mpi_call_free). */
void mpi_pool_put(persist_pool_t *pool, int slot)
{
    pool->busy &= ~(1ull << slot);
    if (!pool->orphan)
        return;
    if (pool->ic[slot] && L.ctx)
        incoll_comm_destroy(pool->ic[slot]);
    pool->ic[slot] = NULL;
    if (pool->busy == 0)
        free(pool);
}

int mpi_comm_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    comm_state_t *st = attr;

    (void)keyval;
    (void)extra;
    if (st == NULL || st == &nomem_state) {
        if (table_find(comm_key(comm)) == st)
            table_del(comm_key(comm));
        return MPI_SUCCESS;
    }
    if (table_find(st->key) == st)
        table_del(st->key);
    if (L.ctx)
        mpi_cs_comm_free(&st->icomm, &st->owned);
    pool_orphan(st->pool);
    if (st->prev)
        st->prev->next = st->next;
    else
        L.states = st->next;
    if (st->next)
        st->next->prev = st->prev;
    free(st->scratch);
    free(st);
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* Communicators                                                       */

/* Every rank of the communicator arg gets the largest *code_p
 * (mpi_cs_comm_make's agreement). */
static int agree_max(void *arg, int *code_p)
{
    return PMPI_Allreduce(MPI_IN_PLACE, code_p, 1, MPI_INT, MPI_MAX,
                          *(MPI_Comm *)arg) == MPI_SUCCESS
               ? 0
               : -1;
}

/* The communicator's MPI name, or "communicator #k" (k counts the
 * communicators this rank has set up). */
void mpi_comm_label(MPI_Comm comm, int seq, char *buf, size_t len)
{
    char name[MPI_MAX_OBJECT_NAME];
    int n = 0;

    name[0] = '\0';
    PMPI_Comm_get_name(comm, name, &n);
    if (n > 0)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "communicator #%d", seq);
}

/* World ranks of comm's members in comm's order; malloc'ed, NULL if out of
 * memory. */
static int *world_ranks(MPI_Comm comm, int size)
{
    MPI_Group g, wg;
    int *in = malloc((size_t)size * sizeof(int));
    int *out = malloc((size_t)size * sizeof(int));

    if (in == NULL || out == NULL) {
        free(in);
        free(out);
        return NULL;
    }
    for (int i = 0; i < size; i++)
        in[i] = i;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_translate_ranks(g, size, in, wg, out);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    free(in);
    return out;
}

/*
 * Makes comm's state: whether it is offloaded and on which libincoll
 * communicator. Collective over comm (every member is in the same
 * collective call, or has just received comm); mpi_cs_comm_make's two
 * agreements, shared with the Open MPI component.
 */
static comm_state_t *comm_setup(MPI_Comm comm, const char *how)
{
    comm_state_t *st = calloc(1, sizeof(*st));
    int inter = 0, cmp = MPI_UNEQUAL, *ranks = NULL;
    int rank = 0, size = 0;
    mpi_cs_code_t code = MPI_CS_OK, agreed;
    char local_why[384] = "", why[sizeof(st->why)], label[MPI_MAX_OBJECT_NAME];
    comm_state_t *set;

    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    if (st == NULL) {
        code = MPI_CS_NOMEM;
    } else {
        st->rank = rank;
        st->size = size;
        st->seq = ++L.nsetups;
    }
    if (inter || size < L.cfg.min_ranks) {
        /* Consistent on every rank: no agreement (and an allreduce on an
         * inter-communicator means something else). */
        if (st == NULL) {
            if (L.keyval != MPI_KEYVAL_INVALID)
                PMPI_Comm_set_attr(comm, L.keyval, &nomem_state);
            return &nomem_state;
        }
        if (inter)
            snprintf(st->why, sizeof(st->why), "inter-communicator");
        else
            snprintf(st->why, sizeof(st->why),
                     "%d ranks, fewer than INCOLL_MPI_MIN_RANKS=%d", size,
                     (int)L.cfg.min_ranks);
        goto out;
    }
    if (code == MPI_CS_OK && !L.active) {
        code = MPI_CS_INACTIVE;
        snprintf(local_why, sizeof(local_why), ": %.150s", L.why_off);
    }
    if (code == MPI_CS_OK) {
        PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
        if (cmp != MPI_IDENT && (ranks = world_ranks(comm, size)) == NULL)
            code = MPI_CS_NOMEM;
    }
    {
        incoll_comm_h ic = NULL;
        int owned = 0;
        agreed =
            mpi_cs_comm_make(L.world, size, ranks, code, local_why, agree_max,
                             &comm, why, sizeof(why), &ic, &owned);
        if (st) {
            st->icomm = ic;
            st->owned = owned;
        }
    }
    free(ranks);
    if (st == NULL) {
        /* Cache the "not offloaded" answer too, so this rank does not run
         * the collective setup again at the next call while the others
         * answer from their cache. */
        if (L.keyval != MPI_KEYVAL_INVALID)
            PMPI_Comm_set_attr(comm, L.keyval, &nomem_state);
        return &nomem_state;
    }
    if (agreed == MPI_CS_OK)
        st->offloaded = 1;
    else
        snprintf(st->why, sizeof(st->why), "%s", why);
out:
    set = st;
    st->next = L.states;
    if (L.states)
        L.states->prev = st;
    L.states = st;
    st->key = comm_key(comm);
    if (L.keyval == MPI_KEYVAL_INVALID ||
        PMPI_Comm_set_attr(comm, L.keyval, set) != MPI_SUCCESS) {
        /* Cannot cache it: never offload this communicator. */
        st->offloaded = 0;
        snprintf(st->why, sizeof(st->why), "cannot cache state on it");
    } else {
        /* Out of memory here only costs the attribute lookup per call. */
        (void)table_put(st->key, st);
    }
    if (st->rank == 0 && !st->offloaded && L.active && cmp == MPI_IDENT)
        mpi_warn_world_off(st->why);
    if (st->rank == 0) {
        mpi_comm_label(comm, st->seq, label, sizeof(label));
        verbose("mpi: communicator '%s' (%s, %d ranks): %s%s", label, how,
                st->size, st->offloaded ? "offloaded" : "not offloaded: ",
                st->offloaded ? (st->owned ? " on its own fabric group"
                                           : " on the fabric's world group")
                              : st->why);
    }
    return st;
}

/* comm's state, made at the first offloadable collective on it. Found in
 * the lookup table without an MPI call; the attribute is the fallback for
 * a state the table could not take. */
comm_state_t *mpi_comm_state(MPI_Comm comm, const char *how)
{
    comm_state_t *st = table_find(comm_key(comm));
    void *val = NULL;
    int flag = 0;

    if (st)
        return st;
    if (L.keyval != MPI_KEYVAL_INVALID &&
        PMPI_Comm_get_attr(comm, L.keyval, &val, &flag) == MPI_SUCCESS && flag)
        return val;
    return comm_setup(comm, how);
}

void mpi_layer_comm_created(MPI_Comm newcomm, const char *how)
{
    if (!L.booted)
        mpi_layer_bootstrap(0);
    if (!L.booted || L.finalized || !L.cfg.eager || newcomm == MPI_COMM_NULL)
        return;
    (void)mpi_comm_state(newcomm, how);
}

/*
 * A libincoll communicator of a persistent request's own, so that its
 * starts match those of the same request on the other ranks whatever
 * order the requests are started in (MPI matches persistent collectives
 * by their initialization). Collective over comm: the ranks agree on a
 * communicator of the pool free on all of them, else make one with the
 * agreement of comm_setup (mpi_cs_comm_make: every rank made it and
 * it runs in the network). 0 when there is none (then MPI's own persistent
 * collective serves, on every rank).
 */
int mpi_comm_persist(mpi_call_t *c)
{
    comm_state_t *st = c->st;
    persist_pool_t *pool = st->pool;
    uint64_t idle = 0;
    int *ranks = NULL, slot, owned = 0;
    mpi_cs_code_t agreed;
    incoll_comm_h ic = NULL;
    char why[384];

    if (pool == NULL)
        pool = st->pool = calloc(1, sizeof(*pool));
    if (pool)
        for (int i = 0; i < pool->n; i++)
            if (pool->ic[i] && !(pool->busy & (1ull << i)))
                idle |= 1ull << i;
    /* A rank without a pool offers nothing and cannot keep a new one. */
    PMPI_Allreduce(MPI_IN_PLACE, &idle, 1, MPI_UINT64_T, MPI_BAND, c->comm);
    if (idle) {
        slot = __builtin_ctzll(idle);
        pool->busy |= 1ull << slot;
        c->icomm = pool->ic[slot];
        c->pool = pool;
        c->pool_slot = slot;
        return 1;
    }
    slot = pool ? pool->n : POOL_MAX; /* the same on every rank with one */
    ranks = world_ranks(c->comm, st->size);
    agreed = mpi_cs_comm_make(L.world, st->size, ranks,
                              ranks ? MPI_CS_OK : MPI_CS_NOMEM, NULL, agree_max,
                              &c->comm, why, sizeof(why), &ic, &owned);
    free(ranks);
    if (agreed != MPI_CS_OK) {
        if (st->rank == 0)
            incoll_info("mpi: a persistent MPI_%s_init runs as MPI's own: "
                        "it gets no fabric group of its own (%s)",
                        mpi_call_names[c->coll], mpi_cs_code_text(agreed));
        return 0;
    }
    c->icomm = ic;
    if (pool && slot < POOL_MAX) {
        pool->ic[slot] = ic;
        pool->n = slot + 1;
        pool->busy |= 1ull << slot;
        c->pool = pool;
        c->pool_slot = slot;
    } else {
        c->own_icomm = 1; /* no room to keep it: it goes with the request */
    }
    return 1;
}

comm_state_t *mpi_comm_known(MPI_Comm comm)
{
    return table_find(comm_key(comm));
}
