/*
 * The aggregation node's state, shared by its two halves: the data path
 * (agg_core.c: groups, slots, contributions, results) and the streaming
 * lock protocol (agg_lock.c: the lock and unlock rounds, the stream pool
 * and the groups queued for it). Private to src/core/agg_*.c; everything
 * else sees agg_t through agg_core.h.
 *
 * Who writes what: agg_lock.c alone writes the lock rounds' fields of
 * group_t (lk_*, ul_*, rep_*, st, st_win) and the pool's of agg_t
 * (pool, holder, ticket_last, waiters); the data path reads st_win and
 * st.slots (slot_at) and stamps lk_active_ns.
 */
#ifndef INCOLL_AGG_INTERNAL_H
#define INCOLL_AGG_INTERNAL_H

#include "core/agg_core.h"

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

#define BUF_ALIGN 64

enum {
    SLOT_DONE = 0,       /* result of slot->epoch known (or never used) */
    SLOT_COLLECTING = 1, /* waiting for children's contributions */
    SLOT_FORWARDED = 2,  /* aggregate sent to the parent, waiting for result */
};

/* One result copy: the epoch it belongs to and what the header said. */
typedef struct {
    uint8_t *buf;
    uint32_t epoch;
    uint32_t count;
    uint64_t offset;
    uint16_t flags; /* WIRE_F_LAST, TWICE, PUSH, ONEWAY (the slot's epoch
                       is a one-way broadcast: on_oneway) */
    uint8_t op, dtype;
    uint8_t valid;
    uint8_t kind;        /* wire_coll_t */
    uint8_t has;         /* buf holds data (NODATA packets carry none) */
    int rootc;           /* child whose subtree holds the root, or -1 */
    uint32_t root;       /* the call's root (wire_hdr_t.root) */
    uint8_t err;         /* the children's calls differ: wire_mismatch_t
                            (the slot's result is an error for every child) */
    uint32_t plo, phi;   /* gathers: bytes [plo, phi) of buf hold pieces;
                            splits: the elements our children want */
    uint8_t st_valid;    /* st is buf's prepared mac (replicate) */
    wire_mac_state_t st; /* for resends: a digest per result, not per
                            resend */
} res_copy_t;

typedef struct {
    uint32_t epoch; /* current epoch; UINT32_MAX before first use */
    uint8_t state;
    int arrived;
    uint64_t *seen;    /* one bit per child for the current epoch */
    uint64_t *asked;   /* children that sent a duplicate since the
                          aggregate last went up (see on_contrib) */
    uint64_t *lent;    /* children whose contrib points into the batch's
                          buffers (agg_on_batch), not into a pool buffer */
    uint64_t *kept;    /* of those, the ones whose buffer the driver keeps
                          past the batch (agg_params_t.retain) */
    uint8_t **contrib; /* per child, from the pool, while collecting */
    uint32_t *want;    /* splits: per child (offset, length) of the
                          segment its subtree wants, of the last epoch
                          it contributed to */
    res_copy_t res[2]; /* indexed by epoch & 1 */
    uint8_t *fixed;    /* stream slots: the children's contribution
                          buffers, set aside in the pool (NULL: from the
                          group's free list) */
    uint32_t ahead;    /* broadcasts: 1 + the epoch whose data this AN
                          sent ahead of the round (send_ahead); 0: none */
} slot_t;

/* A group's lock and unlock rounds (see agg_core.h). */
enum {
    LK_IDLE = 0,    /* no round, or the last one is answered */
    LK_COLLECT = 1, /* waiting for the children's requests */
    LK_UP = 2,      /* request forwarded, waiting for the parent's answer */
};

/* The stream window of a group that holds (or reserved) the pool. */
typedef struct {
    uint32_t nslots; /* reserved; at most this many granted */
    slot_t *slots;
    uint64_t *seen_all, *asked_all, *lent_all, *kept_all;
    uint8_t **contrib_all;
    uint32_t *want_all;
} stream_win_t;

typedef struct group {
    uint32_t id;
    wire_key_t key;
    int nchildren;
    incoll_ep_t *children;
    uint8_t *learned; /* 1 if the child's endpoint is learned */
    incoll_ep_t parent;
    uint16_t index_at_parent;
    uint32_t nslots;
    uint32_t max_payload;
    size_t stride; /* max_payload rounded up to BUF_ALIGN */
    uint32_t gen;  /* generation (job) the slots belong to */
    int gen_set;
    uint64_t active_ns; /* last packet of generation gen accepted */
    int seen_words;
    slot_t *slots;
    uint64_t *seen_all;    /* nslots * seen_words bitmap words */
    uint64_t *asked_all;   /* as many, for slot_t.asked */
    uint64_t *lent_all;    /* as many, for slot_t.lent */
    uint64_t *kept_all;    /* as many, for slot_t.kept */
    int ready;             /* the slots point into the arrays above */
    uint8_t **contrib_all; /* nslots * nchildren pointers */
    uint32_t *want_all;    /* nslots * nchildren * 2 */
    uint8_t *res_all;      /* nslots * 2 * stride bytes */
    uint8_t **pool;        /* free contribution buffers */
    int pool_free;
    int pool_cap;
    const void **srcs; /* scratch for reduce_n, nchildren entries */
    uint8_t *piece;    /* gathers and splits: a packet's payload being
                          put together (descriptor + data) */
    /* Streaming: the lock round (lk_*), the unlock round (ul_*). */
    uint32_t lk_seq; /* sequence of the last lock round (0: none) */
    uint8_t lk_state, ul_state;
    uint8_t lk_why;  /* refused below or here (wire_lock_why_t) */
    uint8_t rep_why; /* the answer of round lk_seq, once known */
    int lk_arrived, ul_arrived;
    uint32_t ul_seq;
    uint64_t *lk_seen, *ul_seen; /* seen_words each */
    uint32_t lk_win;             /* window: least asked, then reserved */
    uint32_t rep_win;            /* window granted */
    uint16_t lk_nops;
    uint64_t lk_ticket, rep_ticket;
    uint64_t lk_active_ns; /* last lock, stream or slot packet accepted */
    stream_win_t st;       /* while reserved or held (st.nslots > 0) */
    uint32_t st_win;       /* stream slots granted (0: not locked) */
    /* Multicast (docs/multicast.md): the address the children that are
     * hosts listen on (INCOLL_EP_NONE: none), and the children whose last
     * contribution said they listen (WIRE_F_MCAST), seen_words words. */
    incoll_ep_t mcast;
    uint64_t *mc;
} group_t;

/* A refused group waiting for the pool, by ticket (docs/streaming.md). */
typedef struct {
    uint32_t gid;
    uint64_t ticket;
    uint64_t seen_ns;
} waiter_t;

#define AGG_MAX_WAITERS 64

/* A contribution lent by the batch (agg_on_batch): where it is kept. */
typedef struct {
    group_t *g;
    const uint8_t *data;
    uint32_t epoch;
    uint16_t slot;
    uint16_t child;
} borrow_t;

#define AGG_BORROW_MAX 4096

struct agg {
    char name[32];
    char info[192];
    uint64_t admin_key;
    wire_key_t admin_mac_key;
    agg_send_cb_t send, send_ref;
    void *send_arg;
    int (*retain)(void *arg, const void *data);
    void (*release)(void *arg, const void *data);
    agg_stats_cb_t stats;
    void *stats_arg;
    uint32_t mcast_dual_bytes;
    /* The batch being handled and what it lent (agg_core.c, at the top). */
    int in_batch;
    borrow_t *borrows;
    int nborrow;
    /* The other shards of a daemon with several cores (agg_set_peers). */
    agg_t *const *peers;
    int npeers;
    /* Peers already told about (wire version, mac algorithm). */
    wire_once_t once;
    uint64_t gen_idle_ns;
    uint64_t now_ns;
    int clock_set;   /* agg_set_now() was called */
    group_t **table; /* open addressing by id; NULL = empty, TOMB = removed */
    uint32_t table_cap;
    uint32_t ngroups;
    agg_counters_t ctr;
    /* Streaming. */
    size_t pool_bytes;
    uint8_t *pool;   /* allocated at the first reservation */
    group_t *holder; /* reserved or holds the pool, or NULL */
    uint64_t lock_idle_ns;
    uint64_t ticket_last;
    waiter_t waiters[AGG_MAX_WAITERS];
    int nwaiters;
};

/* Records now in a group's activity stamp; peers read it (group_active)
 * from their own threads, hence the atomic store. */
static inline void agg_stamp(uint64_t *field, uint64_t now)
{
    __atomic_store_n(field, now, __ATOMIC_RELAXED);
}

/*
 * What the data path (agg_core.c) lends the lock protocol: none of these
 * is on the per-packet path of contributions and results.
 */
/* Sends h, a packet without payload, sealed with the group's key. */
void agg_send_ctl(agg_t *agg, group_t *g, incoll_ep_t dst, const wire_hdr_t *h);
/* Counts a dropped packet in *ctr and says why (debug). */
void agg_drop(agg_t *agg, uint64_t *ctr, incoll_ep_t src, const char *why,
              uint32_t group);
/* Checks a packet of a child (index, address, generation); 1 to go on. */
int agg_child_admit(agg_t *agg, group_t *g, incoll_ep_t src,
                    const wire_hdr_t *h);
/* The latest activity stamp of g on this shard and its peers (lk: of the
 * lock, else of the slots). */
uint64_t agg_group_active(const agg_t *agg, const group_t *g, int lk);
/* Gives back every contribution buffer slot sl holds. */
void agg_slot_release(agg_t *agg, group_t *g, slot_t *sl);

#endif
