/*
 * The aggregation node (AN) as a sans-I/O state machine: datagrams in,
 * datagrams out through a callback, no sockets, no clocks, no timers. The
 * daemon (src/agg), the tests' in-memory network and the simulator all
 * drive this same code.
 *
 * Per group the AN keeps a window of slots (SHARP's outstanding
 * operations). A slot collects one contribution per child for its current
 * epoch, counting each (slot, epoch, child) once; when all children are in
 * it reduces them in child order (so results are bitwise deterministic),
 * forwards one packet to its parent or, at the root, turns the result
 * around; every AN replicates the result to its children.
 *
 * Collectives (docs/wire-format.md, "Collectives"): the kind in the
 * packet's flags says what "reduce" and "replicate" mean. A reduce's
 * result goes down only to the child that leads to the root (it sent the
 * ROOT flag up); a broadcast keeps the ROOT child's bytes and sends them
 * down to every other child; a barrier carries no payload; gathers OR
 * their children's pieces (rank blocks) into the segment and forward the
 * span they hold, and send the segment down to all (allgather) or toward
 * the root (gather); splits (scatter, reduce_scatter) keep which elements
 * each child wants and send each child only those. Packets
 * without data carry NODATA; count and offset always describe the segment.
 *
 * Reliability is end to end, driven by the hosts' retransmissions:
 *  - a duplicate contribution for a slot already forwarded re-forwards the
 *    aggregate to the parent (which dedups it the same way), once per
 *    round: the children that ask after the first are not answered until
 *    one of them asks again (they all notice the same loss at once);
 *  - a duplicate for a slot whose result is known resends the result to
 *    that child only;
 *  - a slot moves to epoch e+1 only when a child sends e+1, which it does
 *    only after it holds result e; the result of e is kept beside e+1 (two
 *    copies per slot) for children whose copy of result e was lost.
 *
 * Generations: CONTRIB and RESULT packets carry the sender's group
 * generation in the header's "total" field (INCOLL_GEN, which `incoll run`
 * takes from the clock, else a hash of the job id). A job that reuses a
 * group starts its sequence numbers at 0 again, so no result of an earlier
 * job may ever be resent to, or reduced with, a later one. Generations are
 * ordered by serial-number arithmetic (RFC 1982): g is newer than the
 * group's when (int32_t)(g - gen) > 0.
 *  - A contribution of a newer generation resets the group's slots.
 *  - One of an older generation is dropped (gen_dropped): hosts of an
 *    earlier job may still be retransmitting while the next one runs.
 *  - Except when the group has been quiet (no packet of its generation
 *    accepted) for gen_idle_ns: then an older generation resets the group
 *    too, because generations that are hashes of job ids are not ordered
 *    in time.
 *  - Results of any other generation are dropped (gen_dropped).
 * The AN has no clock of its own: the driver tells it the time with
 * agg_set_now(). Until it does, every group counts as quiet (generations
 * are not ordered), as with gen_idle_ns 0.
 *
 * Streaming (docs/streaming.md): besides its slots, a group may lock the
 * AN's streaming pool, which then holds a second, larger window of stream
 * slots for it: slot numbers slots .. slots + window - 1 of the same
 * protocol (same dedup, same two result copies, same child-order
 * reduction), with every child's contribution buffer set aside in the
 * pool, so a contribution the window allows always has room. A LOCK
 * climbs the tree like a barrier: when all children asked, the AN
 * reserves its pool for the group (or notes why not) and forwards the
 * request; the root grants when nobody refused, and the answer comes back
 * down, each AN keeping or giving back what it reserved. Nobody waits
 * for a pool, so nothing deadlocks. One group holds an AN's pool at a
 * time. Refused groups get a ticket at their root and wait in ticket
 * order: a request is refused while a group with an older ticket is
 * waiting here. An UNLOCK is collected like the LOCK: when all children
 * are done, the pool goes back. A holder quiet for lock_idle_ns loses
 * the pool to the next group that asks (reclaim, checked only then: the
 * AN needs no timer).
 */
#ifndef INCOLL_AGG_CORE_H
#define INCOLL_AGG_CORE_H

#include "common/wire_mac.h"

#include <stddef.h>
#include <stdint.h>

typedef struct agg agg_t;

/* Sends one datagram: hdr is WIRE_HDR_LEN packed bytes, then len payload
 * bytes. Both buffers are valid only during the call: copy them. */
typedef void (*agg_send_cb_t)(void *arg, incoll_ep_t dst, const void *hdr,
                              const void *payload, size_t len);

/* Formats the text of a STATS reply into buf (at most len - 1 bytes and a
 * terminator); returns its length. */
typedef size_t (*agg_stats_cb_t)(void *arg, char *buf, size_t len);

/* One received datagram of a batch (agg_on_batch). */
typedef struct {
    incoll_ep_t src;
    const void *buf;
    size_t len;
} agg_pkt_t;

typedef struct {
    const char *name; /* for logs and counters, e.g. "s0" */
    /* The fabric's admin key: a STATS_REQ must carry a mac under the key
     * derived from it (WIRE_KEY_ADMIN), and the reply carries one too; 0
     * refuses all. */
    uint64_t admin_key;
    agg_send_cb_t send;
    void *send_arg;
    /* Optional: sends a datagram whose payload stays where it is, unchanged,
     * until the driver's next flush (a slot's result or aggregate: the
     * driver flushes after each batch, before it receives again), so the
     * driver may send it without copying. hdr is valid only during the
     * call. NULL: every datagram goes through send. */
    agg_send_cb_t send_ref;
    /* Optional, both or neither: keeps the driver's receive buffer that
     * holds data (a contribution of the batch just handled) until
     * release(send_arg, data), so that a contribution whose slot waits
     * for other children is kept where it arrived instead of copied;
     * retain returns 0, or -1 when the driver cannot (then it is copied). */
    int (*retain)(void *arg, const void *data);
    void (*release)(void *arg, const void *data);
    /* Optional: makes the text of a STATS reply (a daemon whose counters
     * are spread over several cores sums them); NULL: agg_format_counters
     * of this AN. */
    agg_stats_cb_t stats;
    void *stats_arg;
    /* Text appended to the counters (agg_format_counters), e.g. "mac=poly1305
     * udp=gso,gro threads=1"; NULL: none. Copied (at most 191 bytes). */
    const char *info;
    /* A group quiet for this long accepts an older generation
     * (INCOLL_AGG_GEN_IDLE_MS); 0 accepts any other generation at once. */
    uint64_t gen_idle_ns;
    /* Bytes of the AN-wide streaming pool (INCOLL_AGG_STREAM_POOL),
     * allocated at the first lock; 0 refuses every lock. */
    size_t stream_pool_bytes;
    /* A lock whose holder sent no lock or stream packet for this long is
     * reclaimed by the next group that asks (INCOLL_AGG_LOCK_IDLE_MS); a
     * refused group's place in the queue lasts as long. 0: never (and
     * never without agg_set_now). */
    uint64_t lock_idle_ns;
    /* Multicast results (docs/multicast.md) of at most this many bytes go
     * by unicast too, to every child (the dual send, INCOLL_MCAST_DUAL);
     * 0: a listening child gets only the multicast copy and a lost one
     * is repaired when it asks again. */
    uint32_t mcast_dual_bytes;
} agg_params_t;

typedef struct {
    uint32_t id;
    wire_key_t key; /* every packet's mac is checked and made
                       with it (wire_mac.h) */
    int nchildren;  /* 1 .. AGG_MAX_CHILDREN */
    /* Child addresses in child-index order; INCOLL_EP_NONE means "learn it
     * from the child's first packet that carries a valid mac" (hosts with
     * ephemeral ports). Copied. */
    const incoll_ep_t *children;
    incoll_ep_t parent;       /* INCOLL_EP_NONE at the root */
    uint16_t index_at_parent; /* our child index at the parent */
    uint32_t slots;           /* window: 1 .. 65535 */
    uint32_t max_payload;     /* bytes per packet, <= WIRE_MAX_PAYLOAD */
    /* The multicast address the group's hosts below this AN listen on
     * (docs/multicast.md): a result every listening child gets alike goes
     * there once instead of once per child; a child listens when its
     * contributions say WIRE_F_MCAST. 0 or INCOLL_EP_NONE: unicast only. */
    incoll_ep_t mcast;
} agg_group_params_t;

#define AGG_MAX_CHILDREN 1024

/* Counters, all monotonic. The names are those printed by incoll stat.
 * coll_<kind>: segments of that collective this AN completed (all its
 * children in), so each collective shows which ANs it went through. */
#define AGG_COUNTER_LIST(X)                                                    \
    X(packets_in)                                                              \
    X(packets_out)                                                             \
    X(bytes_in)                                                                \
    X(bytes_out)                                                               \
    X(contribs_accepted)                                                       \
    X(reductions)                                                              \
    X(bytes_reduced)                                                           \
    X(results_sent)                                                            \
    X(results_resent)                                                          \
    X(mcast_sent)                                                              \
    X(mcast_repairs)                                                           \
    X(reforwards)                                                              \
    X(ahead_sent)                                                              \
    X(asks)                                                                    \
    X(waits)                                                                   \
    X(duplicates_dropped)                                                      \
    X(stale_dropped)                                                           \
    X(gen_dropped)                                                             \
    X(malformed_dropped)                                                       \
    X(unknown_group)                                                           \
    X(bad_mac)                                                                 \
    X(bad_source)                                                              \
    X(mismatch_dropped)                                                        \
    X(mac_mismatch)                                                            \
    X(version_mismatch)                                                        \
    X(calls_mismatched)                                                        \
    X(stats_requests)                                                          \
    X(generation_resets)                                                       \
    X(groups)                                                                  \
    X(coll_allreduce)                                                          \
    X(coll_reduce)                                                             \
    X(coll_bcast)                                                              \
    X(coll_barrier)                                                            \
    X(coll_allgather)                                                          \
    X(coll_gather)                                                             \
    X(coll_scatter)                                                            \
    X(coll_reduce_scatter)                                                     \
    X(locks_granted)                                                           \
    X(locks_refused)                                                           \
    X(locks_reclaimed)                                                         \
    X(stream_bytes)                                                            \
    X(rx_inplace)

typedef struct {
#define AGG_X_FIELD(name) uint64_t name;
    AGG_COUNTER_LIST(AGG_X_FIELD)
#undef AGG_X_FIELD
} agg_counters_t;

/* Creates an AN with no groups. Returns NULL when out of memory. */
agg_t *agg_create(const agg_params_t *params);
/* Frees the AN and all its groups. */
void agg_destroy(agg_t *agg);

/* Adds a group; INCOLL_ERR_BUSY if the id exists, INCOLL_ERR_INVALID_ARG
 * for bad parameters, INCOLL_ERR_NO_MEMORY. */
incoll_status_t agg_group_add(agg_t *agg, const agg_group_params_t *params);
/* Removes a group and frees its buffers; INCOLL_ERR_NOT_FOUND if absent. */
incoll_status_t agg_group_remove(agg_t *agg, uint32_t id);
/* Number of groups. */
int agg_group_count(const agg_t *agg);

/*
 * Tells the AN the time, in nanoseconds of any monotonic clock; the
 * driver calls it before each batch of received packets. The AN uses it
 * only to see how long a group has been quiet (generations, above).
 */
void agg_set_now(agg_t *agg, uint64_t now_ns);

/*
 * Handles one received datagram from src. Never trusts it: a packet that
 * fails any check is counted and dropped, with a debug log line naming the
 * peer and the field (an error line, once per peer, for a peer of another
 * wire version or mac algorithm: a misconfiguration, not noise).
 */
void agg_on_packet(agg_t *agg, incoll_ep_t src, const void *buf, size_t len);

/*
 * Handles n datagrams received together, in order, as agg_on_packet does
 * each. A contribution is reduced where it lies, in the caller's buffer,
 * when every child of its slot is in by the end of the batch: only the
 * contributions of slots still waiting for a child are copied aside
 * (counter rx_inplace: the ones that were not). The buffers must stay
 * valid and unchanged until the call returns.
 */
void agg_on_batch(agg_t *agg, const agg_pkt_t *pkts, int n);

/*
 * Several cores (incoll-agg with INCOLL_AGG_THREADS): one agg_t each,
 * every one holding every group, each owning a share of the slots.
 * agg_shard_of says which of nshards owns a datagram: a CONTRIB or RESULT
 * of one of a group's slots goes to slot % nshards; everything else (lock
 * rounds, the stream window's slots, STATS, unknown groups, malformed
 * packets) to shard 0, so the streaming rules run on one core as before.
 * agg may be any of the shards (they hold the same groups).
 * agg_set_peers tells a shard all the shards (peers[0] is the first,
 * the one that gets shard 0's packets), whose packets count toward a
 * group's activity: a group quiet on this shard but busy on another is
 * not quiet (generations, lock reclaim). On the first shard,
 * agg_group_add and agg_group_remove act on every shard, and
 * agg_format_counters sums them; the caller makes sure none of the
 * others runs meanwhile (their group tables and counters are read).
 */
int agg_shard_of(const agg_t *agg, const void *buf, size_t len, int nshards);
void agg_set_peers(agg_t *agg, agg_t *const *peers, int npeers);

const agg_counters_t *agg_counters(const agg_t *agg);
/* Adds c's counters to sum, except groups (the same on every shard):
 * sum keeps its own. */
void agg_counters_add(agg_counters_t *sum, const agg_counters_t *c);
/* Formats counters as agg_format_counters does, for agg's name, pool and
 * info. */
size_t agg_format(const agg_t *agg, const agg_counters_t *ctr, char *buf,
                  size_t len);
/* Formats "an=<name> key=value ..." (the counters, then stream_pool, the
 * streaming pool's bytes, and stream_holder, the group holding it or 0,
 * then the info text of the parameters) into buf, truncated to len - 1 bytes
 * and terminated; returns the length written (0, writing nothing, when len
 * is 0). */
size_t agg_format_counters(const agg_t *agg, char *buf, size_t len);

#endif
