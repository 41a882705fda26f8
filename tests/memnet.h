/*
 * memnet: a deterministic in-memory network and virtual clock for the unit
 * tests of the sans-I/O cores (core/agg_core.h, core/host_engine.h).
 *
 * Nodes are aggregation nodes (each an agg_t), hosts (each a
 * host_engine_t, one per group and rank) and sinks (a tool that only
 * collects what it is sent, e.g. STATS replies). Every node has an
 * endpoint id assigned here (small integers, never INCOLL_EP_NONE).
 *
 * A send enqueues a copy of the packet with a delivery time of now + base
 * delay + uniform jitter; a seeded PRNG decides whether it is dropped,
 * duplicated (the copy gets its own delay) or held back (reordered: extra
 * delay). The run loop delivers the earliest packet or fires
 * host_engine_on_time() at the earliest host_engine_deadline(), whichever
 * is first; time is virtual nanoseconds and nothing sleeps. ANs are told
 * the time (agg_set_now) before each packet. Ties are broken
 * by enqueue order and host order, so one seed gives one run.
 *
 * Trees: memnet_tree_t describes ANs and which AN each host hangs off. An
 * AN's children, in their fixed order, are first its child ANs (in AN
 * index order), then its hosts (in rank order), as in fabric.conf.
 */
#ifndef INCOLL_TESTS_MEMNET_H
#define INCOLL_TESTS_MEMNET_H

#include "core/agg_core.h"
#include "common/udp.h"
#include "core/host_engine.h"

#include <stddef.h>
#include <stdint.h>

#define MEMNET_MAX_ANS 128
#define MEMNET_MAX_HOSTS 256

/* A tree shape. an_parent[i] < i for every non-root AN (the root is AN 0
 * with parent -1), so a walk from nans-1 down to 0 visits children first. */
typedef struct {
    int nans;
    int nhosts;
    int an_parent[MEMNET_MAX_ANS];
    int host_an[MEMNET_MAX_HOSTS];
} memnet_tree_t;

/*
 * The fabric generator's shape: leaves of up to radix hosts, then levels of
 * up to radix switches until one root remains. Returns 0, or -1 when the
 * shape does not fit the limits.
 */
int memnet_tree_radix(memnet_tree_t *tree, int nhosts, int radix);

/*
 * Parses a nested shape: an AN is "[...]" holding numbers (that many hosts)
 * and nested ANs, e.g. "[[1][3][5]]" (a root over three leaves of 1, 3 and
 * 5 hosts), "[1]" (one AN, one host), "[[[2]] 1]". Ranks are given in the
 * order hosts appear in the text; ANs are numbered in pre-order. Returns 0,
 * or -1 on bad text or a shape over the limits.
 */
int memnet_tree_parse(memnet_tree_t *tree, const char *spec);

/* A random shape of 1..max_hosts hosts and at most max_depth AN levels.
 * *rng is a PRNG state (see memnet_rand). */
void memnet_tree_random(memnet_tree_t *tree, uint64_t *rng, int max_hosts,
                        int max_depth);

/*
 * Children of AN an in their fixed order: kinds[i] >= 0 is an AN index,
 * kinds[i] < 0 is host rank -(kinds[i] + 1). Returns the number written
 * (kinds must hold nans + nhosts entries).
 */
int memnet_tree_children(const memnet_tree_t *tree, int an, int *kinds);

/* Formats the shape back as text (same syntax as memnet_tree_parse). */
void memnet_tree_str(const memnet_tree_t *tree, char *buf, size_t len);

/* splitmix64: the PRNG of the network and the tests. */
uint64_t memnet_rand(uint64_t *state);
/* Uniform in [0, n); n > 0. */
uint64_t memnet_rand_below(uint64_t *state, uint64_t n);
/* Uniform in [0, 1). */
double memnet_rand_unit(uint64_t *state);

typedef struct {
    uint64_t seed;
    uint64_t delay_ns;      /* base one-way delay of every packet */
    uint64_t jitter_ns;     /* plus uniform [0, jitter_ns] */
    double drop;            /* probability a packet is lost */
    double burst;           /* losses come in bursts of this mean length
                               per destination (udp_loss_t); <= 1:
                               independent */
    double dup;             /* probability a packet is delivered twice */
    double reorder;         /* probability a packet is held back ... */
    uint64_t reorder_ns;    /* ... by uniform [0, reorder_ns] more */
    uint64_t start_skew_ns; /* hosts start an operation up to this late */
    /* The ANs' agg_params_t.gen_idle_ns; 0 = 1 s (INCOLL_AGG_GEN_IDLE_MS's
     * default). Read by memnet_add_tree. */
    uint64_t gen_idle_ns;
    /* The ANs' streaming pool and lock idle time (agg_params_t). */
    size_t stream_pool_bytes;
    uint64_t lock_idle_ns;
    /* Links shaped as the emulated fabric's tbf: each direction of each
     * (sender, receiver) pair passes link_rate bytes per second, and a
     * packet that finds link_burst bytes of tokens passes at once; one
     * that does not waits in the link's queue (never dropped). The base
     * delay and jitter come on top. 0: unlimited. */
    uint64_t link_rate;
    uint64_t link_burst;
    /* ANs take what arrives together as a batch (agg_on_batch), as a
     * daemon's receive does: with a packet for an AN come the packets
     * right behind it in delivery order that are for the same AN and due
     * within this many ns of it. 0: one packet at a time. */
    uint64_t an_batch_ns;
    /* Each AN runs as this many shards (incoll-agg's INCOLL_AGG_THREADS,
     * agg_shard_of): one agg_t each, packets routed to their owner.
     * 0 or 1: one. At most MEMNET_MAX_SHARDS. */
    int an_shards;
} memnet_cfg_t;

#define MEMNET_MAX_SHARDS 8

/* One group over the whole tree: configured on every AN, with one host
 * engine per rank. Timing fields of host_engine_params_default() are used
 * unless the fields here are nonzero. */
typedef struct {
    uint32_t id;
    uint64_t key;
    uint32_t gen; /* the job's generation, carried by CONTRIB/RESULT */
    uint32_t slots;
    uint32_t window; /* 0 = slots */
    uint32_t max_payload;
    uint64_t rto_init_ns, rto_min_ns, rto_max_ns;
    int max_retries;
    uint64_t progress_timeout_ns;
    uint32_t stream_window;    /* stream slots a lock asks for (0: none) */
    uint32_t pace;             /* host_engine_params_t.pace */
    uint32_t window_min;       /* host_engine_params_t.window_min */
    uint32_t copy_bytes;       /* host_engine_params_t.copy_bytes */
    uint32_t copy_adapt_bytes; /* host_engine_params_t.copy_adapt_bytes */
    uint32_t hedge_pct;        /* host_engine_params_t.hedge_pct */
    uint32_t ask_bytes;        /* host_engine_params_t.ask_bytes */
    uint32_t ahead_bytes;      /* host_engine_params_t.ahead_bytes */
} memnet_group_cfg_t;

typedef struct {
    uint64_t sent; /* packets handed to the network */
    uint64_t delivered;
    uint64_t dropped;
    uint64_t duplicated;
    uint64_t reordered;
    uint64_t injected;
    uint64_t unroutable; /* sent to an endpoint with no node */
    uint64_t timer_fires;
} memnet_stats_t;

typedef struct memnet memnet_t;

/* Called for every packet a node sends, before fault injection; pkt is the
 * packed header then the payload, valid only during the call. */
typedef void (*memnet_tap_fn)(void *arg, incoll_ep_t src, incoll_ep_t dst,
                              const uint8_t *pkt, size_t len);

memnet_t *memnet_create(const memnet_cfg_t *cfg);
/* Frees the network, its queued packets, ANs and host engines. */
void memnet_destroy(memnet_t *net);
/* Changes the fault parameters (the seed is ignored). */
void memnet_set_faults(memnet_t *net, const memnet_cfg_t *cfg);

/*
 * Creates one AN per tree AN (names "an<i>"), with admin_key for STATS.
 * Call once, before memnet_add_group. Returns 0 or -1.
 */
int memnet_add_tree(memnet_t *net, const memnet_tree_t *tree,
                    uint64_t admin_key);
/* Adds a group over the whole tree; returns its index (0, 1, ...) or -1
 * if agg_group_add or host_engine_create failed. */
int memnet_add_group(memnet_t *net, const memnet_group_cfg_t *g);
/*
 * A new job on group: every rank's engine is replaced by a fresh one
 * (sequence numbers from 0 again) with generation gen; endpoints and the
 * ANs' group stay. Ranks must be idle. Returns 0 or -1.
 */
int memnet_new_job(memnet_t *net, int group, uint32_t gen);
/* Adds a sink node and returns its endpoint. */
incoll_ep_t memnet_add_sink(memnet_t *net);

const memnet_tree_t *memnet_tree(const memnet_t *net);
agg_t *memnet_an(const memnet_t *net, int an);
/* AN an's counters, summed over its shards (memnet_cfg_t.an_shards). */
agg_counters_t memnet_an_counters(const memnet_t *net, int an);
incoll_ep_t memnet_an_ep(const memnet_t *net, int an);
host_engine_t *memnet_host(const memnet_t *net, int group, int rank);
incoll_ep_t memnet_host_ep(const memnet_t *net, int group, int rank);
/* The counters of group's engines, every field summed over its ranks. */
host_engine_counters_t memnet_group_counters(const memnet_t *net, int group);

/*
 * Starts an allreduce on every host of group (send[r], recv[r] for rank
 * r). With start_skew_ns, each host starts at a random time up to that
 * late; otherwise now. host_engine_start's return value is kept: see
 * memnet_start_status.
 */
void memnet_start_allreduce(memnet_t *net, int group, const void *const *send,
                            void *const *recv, size_t count,
                            incoll_dtype_t dtype, incoll_op_t op);
/* The same for a collective of another kind (host_engine_start_coll):
 * root is the root rank of a reduce or broadcast (-1 for none); send or
 * recv may be NULL (no buffers), or hold NULL for ranks without one. */
void memnet_start_coll(memnet_t *net, int group, wire_coll_t kind, int root,
                       const void *const *send, void *const *recv, size_t count,
                       incoll_dtype_t dtype, incoll_op_t op);
/* memnet_start_coll for one rank alone, with its own arguments (a test
 * of members whose calls differ): root is the call's root rank as this
 * rank sees it (-1: none). */
void memnet_start_one(memnet_t *net, int group, int rank, wire_coll_t kind,
                      int root, const void *send, void *recv, size_t count,
                      incoll_dtype_t dtype, incoll_op_t op);
/* An allgather or gather (host_engine_start_gather) of block bytes per
 * rank, rank r's block at r * block of the vector. */
void memnet_start_gather(memnet_t *net, int group, wire_coll_t kind, int root,
                         const void *const *send, void *const *recv,
                         size_t block);
/* A scatter or reduce_scatter (host_engine_start_split) of block elements
 * per rank, rank r's block at r * block; recv[r] holds block elements. */
void memnet_start_split(memnet_t *net, int group, wire_coll_t kind, int root,
                        const void *const *send, void *const *recv,
                        size_t block, incoll_dtype_t dtype, incoll_op_t op);
/* Starts a lock round for nops operations (host_engine_lock), or an
 * unlock round, on every host of group (with the start skew). */
void memnet_start_lock(memnet_t *net, int group, uint16_t nops);
void memnet_start_unlock(memnet_t *net, int group);
/* Starts host_engine_unlock_bg on every host of group (with the start
 * skew): a host is idle again once it started it, while the round runs
 * on (its timer is driven all the same); memnet_unlock_pending counts the
 * hosts of group whose background unlock has no answer yet. */
void memnet_start_unlock_bg(memnet_t *net, int group);
int memnet_unlock_pending(const memnet_t *net, int group);
/* What host_engine_start returned for rank's last start (INCOLL_INPROGRESS
 * until it actually started). */
incoll_status_t memnet_start_status(const memnet_t *net, int group, int rank);
/* Virtual time at which rank's last operation ended (its status left
 * INCOLL_INPROGRESS, or the start returned anything else). */
uint64_t memnet_done_ns(const memnet_t *net, int group, int rank);

/*
 * Processes one event (a packet delivery, a host timer or a host start).
 * Returns 1 if it did, 0 if there was nothing to do.
 */
int memnet_step(memnet_t *net);
/*
 * Runs until no host of any group has an operation pending or running.
 * Packets still in flight stay queued (they arrive during the next
 * operation, as late packets do). Returns 0, or -1 if virtual time would
 * pass now + limit_ns first (a hang).
 */
int memnet_run(memnet_t *net, uint64_t limit_ns);
/* Delivers every queued packet (hosts' timers still fire). Returns 0, or
 * -1 if that takes more than limit_ns of virtual time. */
int memnet_drain(memnet_t *net, uint64_t limit_ns);
/* Number of hosts with an operation pending or running. */
int memnet_busy(const memnet_t *net);
/* Packets queued. */
size_t memnet_queued(const memnet_t *net);

uint64_t memnet_now(const memnet_t *net);
/* Moves the clock forward (never back) without delivering anything. */
void memnet_advance(memnet_t *net, uint64_t now_ns);

/*
 * Per-node faults: packets from or to ep are dropped with probability p
 * (on top of the global drop); 1.0 cuts the node off.
 */
void memnet_set_node_drop(memnet_t *net, incoll_ep_t ep, double p);

void memnet_set_tap(memnet_t *net, memnet_tap_fn fn, void *arg);

/* Called for every packet after the tap; returning 1 drops it (a loss
 * placed exactly, on top of the random ones). NULL removes it. */
typedef int (*memnet_filter_fn)(void *arg, incoll_ep_t src, incoll_ep_t dst,
                                const uint8_t *pkt, size_t len);
void memnet_set_filter(memnet_t *net, memnet_filter_fn fn, void *arg);

/* Enqueues a copy of pkt from src to dst, delivered delay_ns from now,
 * bypassing fault injection and the tap. */
void memnet_inject(memnet_t *net, incoll_ep_t src, incoll_ep_t dst,
                   const void *pkt, size_t len, uint64_t delay_ns);

/* Takes the oldest packet a sink received: copies up to cap bytes into buf
 * and returns the packet's length, or 0 if none is left. */
size_t memnet_sink_take(memnet_t *net, incoll_ep_t sink, void *buf, size_t cap,
                        incoll_ep_t *src_p);

const memnet_stats_t *memnet_stats(const memnet_t *net);

#endif
