/*
 * Wire format v4: a fixed 56-byte little-endian header inside a UDP
 * datagram, followed by the payload. See docs/wire-format.md. Version 2
 * replaced v1's clear-text group key by a MAC over the whole packet
 * (common/wire_mac.h). Version 3 added the collective kind and the ROOT and
 * NODATA flags (CONTRIB/RESULT of collectives other than allreduce).
 * Version 4 names the MAC algorithm in the header (macalg), where v3's
 * hops field had its high byte: a receiver of another algorithm refuses
 * the packet and says so, instead of counting a bad tag; and it carries
 * the sender's call (its root, a mismatch's reason, a P2P call's hash) in
 * 8 more bytes, so that members whose calls differ fail together instead
 * of being reduced into a wrong result.
 * The streaming lock packets (LOCK, LOCK_REP, UNLOCK, UNLOCK_REP) are
 * types under the same header and version.
 *
 *  off size field
 *   0   4   magic    0x4C434E49 ("INCL" in memory order)
 *   4   1   version  4
 *   5   1   type     wire_type_t
 *   6   1   op       incoll_op_t
 *   7   1   dtype    incoll_dtype_t
 *   8   4   group    group id
 *  12   2   child    sender's child index at the receiver (CONTRIB), or
 *                    the receiver's index (RESULT); 0xffff when unused
 *  14   2   flags    WIRE_F_*
 *  16   8   mac      tag of the packet (wire_mac.h) under the group's
 *                    (P2P: communicator's; STATS: admin) key
 *  24   2   slot     slot in the group's window
 *  26   1   hops     hops travelled (debug aid, not trusted)
 *  27   1   macalg   the tag's algorithm (wire_mac_alg_t)
 *  28   4   epoch    how many times the slot was used before
 *  32   4   count    elements in this packet's payload
 *  36   4   total    CONTRIB/RESULT/LOCK*: the group generation (job);
 *                    P2P: bytes of the whole block
 *  40   8   offset   element offset of this segment in the vector
 *  48   4   call     CONTRIB/RESULT/P2P_DATA: the call's root rank
 *                    (rooted collectives; an allreduce's carried
 *                    collective), or with WIRE_F_ERROR the mismatch's
 *                    reason (wire_mismatch_t); 0 otherwise
 *  52   4   hash     P2P_DATA: a hash of the sender's schedule and
 *                    count; 0 otherwise
 *  56       payload  count * dtype_size bytes (STATS: text)
 */
#ifndef INCOLL_WIRE_H
#define INCOLL_WIRE_H

#include "incoll.h"

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC 0x4C434E49u
#define WIRE_VERSION 4
#define WIRE_HDR_LEN 56
#define WIRE_MACALG_OFF 27     /* the macalg byte */
#define WIRE_MAC_ALGS 4        /* macalg values 0..3 (wire_mac_alg_t) */
#define WIRE_MAX_PAYLOAD 65000 /* fits a loopback or jumbo datagram */
#define WIRE_CHILD_NONE 0xffffu

typedef enum {
    WIRE_CONTRIB = 1, /* host or AN -> parent: a contribution for a slot */
    WIRE_RESULT = 2,  /* AN -> child: the reduced result of a slot */
    /* Streaming tree lock (docs/streaming.md): no payload; epoch is the
     * group's lock sequence, count the window of stream slots (asked up,
     * granted down), offset the group's fairness ticket (0: none), total
     * the generation, slot the operations the lock is for (0: until
     * released), op the refusal reason (wire_lock_why_t). */
    WIRE_LOCK = 3,       /* child -> parent: lock request, collected like a
                            barrier (WIRE_F_REFUSE: refused below) */
    WIRE_LOCK_REP = 4,   /* parent -> child: grant, or WIRE_F_REFUSE */
    WIRE_UNLOCK = 5,     /* child -> parent: release, collected likewise */
    WIRE_UNLOCK_REP = 6, /* parent -> child: the release is complete */
    WIRE_STATS_REQ = 16, /* tool -> AN: send your counters */
    WIRE_STATS_REP = 17, /* AN -> tool: counters as "key=value ..." text */
    WIRE_P2P_DATA = 32,  /* host -> host: host-based algorithm data */
    WIRE_P2P_ACK = 33,   /* host -> host: acknowledgement */
    /* Without a manager, ranks that share a fabric.conf host learn every
     * rank's endpoint from their host's leader (src/host/rdv.c): */
    WIRE_RDV_HELLO = 34, /* rank -> its leader: my endpoint (offset: rank) */
    WIRE_RDV_TABLE = 35, /* leader -> rank: endpoints (offset: first rank,
                            count: bytes, 8 per rank, total: ranks) */
} wire_type_t;

enum {
    WIRE_F_RETRANS = 1u << 0, /* the sender sent this before */
    WIRE_F_LAST = 1u << 1,    /* last segment of the vector */
    /* CONTRIB/RESULT: bits 2..4 the collective kind (wire_coll_t). */
    WIRE_F_ROOT = 1u << 5,   /* CONTRIB: from the root rank's subtree */
    WIRE_F_NODATA = 1u << 6, /* CONTRIB/RESULT: no payload (count still
                                describes the segment) */
    /* CONTRIB (allreduce, reduce; with NODATA): a resend that asks instead
     * of carrying the data again: the AN answers as to any duplicate if
     * it holds the child's contribution, and with a RESULT flagged QUERY
     * (no data, no result: "send me your contribution") if not. */
    WIRE_F_QUERY = 1u << 7,
    /* CONTRIB/RESULT of a broadcast: the root's data sent ahead of the
     * round, not waiting for the other members (agg_core.h): up from the
     * root's side (a CONTRIB, also ROOT) and down to every other child (a
     * RESULT). Neither an arrival nor the round's result: a member takes
     * the data from it and still waits for the round's result. */
    WIRE_F_AHEAD = 1u << 8,
    /* CONTRIB of a broadcast's root: its ANs send the data ahead
     * (WIRE_F_AHEAD); the root sets it on operations of at most
     * INCOLL_BCAST_AHEAD bytes, larger ones would send the data twice
     * down every link. */
    WIRE_F_PUSH = 1u << 9,
    /* CONTRIB/RESULT of a one-packet broadcast acknowledged cumulatively
     * (docs/wire-format.md, "One-way broadcasts"): the root's data (a
     * CONTRIB with ROOT and PUSH) completes the slot's epoch at every AN
     * it passes, which sends it down as the slot's result at once; the
     * other members send nothing unless they lack the result (a NODATA
     * resend), and the AN at the tree's root acknowledges the data to the
     * root (a NODATA RESULT down its path). */
    WIRE_F_ONEWAY = 1u << 12,
    /* P2P_ACK only (field usage of P2P packets: core/p2p_engine.h). */
    WIRE_F_P2P_DONE = 1u << 8,    /* the whole block of the step arrived */
    WIRE_F_P2P_PROBE = 1u << 9,   /* receiver waits: resend what it lacks */
    WIRE_F_P2P_BEHIND = 1u << 10, /* acker has not reached the step yet */
    /* every packet of the block the ack reports came in its first
     * transmission (none stored from a RETRANS one) */
    WIRE_F_P2P_FIRST = 1u << 11,
    /* LOCK, LOCK_REP only. */
    WIRE_F_REFUSE = 1u << 11, /* the lock is refused (reason in op) */
    WIRE_F_LOST = 1u << 12,   /* LOCK_REP: the group holds no lock here
                                 (reclaimed): its stream slots are gone */
    /* CONTRIB from a host: it listens on its leaf AN's multicast address
     * for the group (docs/multicast.md), so the AN may send it the
     * slot's result there instead of to its endpoint. RESULT: the one
     * multicast copy (child WIRE_CHILD_NONE), sent to every member that
     * listens. */
    WIRE_F_MCAST = 1u << 11,
    /* CONTRIB/RESULT: redundancy for small operations. TWICE: the sender
     * sends this packet twice and asks the receiver to send what the slot
     * gives twice too; COPY: this is the second of the two, which a
     * receiver that has the first drops without answering. */
    WIRE_F_TWICE = 1u << 13,
    WIRE_F_COPY = 1u << 14,
    /* RESULT with QUERY: the AN holds the child's contribution (or has
     * sent the aggregate up again for another child) and waits for the
     * others: an answer to a duplicate, no request. */
    WIRE_F_WAIT = 1u << 15,
    /* CONTRIB/RESULT (with NODATA): the members' calls do not match (an
     * AN saw children of one slot describe it differently,
     * wire_mismatch_t in why): an AN forwards it up as its aggregate and
     * sends it down as the slot's result, so every member's operation
     * fails with the reason. */
    WIRE_F_ERROR = 1u << 10,
};

/* Why the members' calls of a slot do not match (wire_hdr_t.why of a
 * CONTRIB or RESULT flagged WIRE_F_ERROR): the first field in which a
 * child's contribution differs from the slot's first one. */
typedef enum {
    WIRE_MISMATCH_NONE = 0,
    WIRE_MISMATCH_KIND = 1,  /* different collectives */
    WIRE_MISMATCH_OP = 2,    /* different reduction operations */
    WIRE_MISMATCH_DTYPE = 3, /* different datatypes */
    WIRE_MISMATCH_SIZE = 4,  /* different sizes (count, offset or the
                                vector's last segment) */
    WIRE_MISMATCH_ROOT = 5,  /* different roots, or two members claim it */
    WIRE_MISMATCH_COUNT = 6,
} wire_mismatch_t;

/* The reason's text for messages ("different datatypes", ...). */
const char *wire_mismatch_str(unsigned why);

/* Why a streaming lock was refused: the op byte of a refused LOCK or
 * LOCK_REP (the first AN that refused says). */
typedef enum {
    WIRE_LOCK_OK = 0,
    WIRE_LOCK_HELD = 1,   /* another group holds or reserves the AN's pool */
    WIRE_LOCK_QUEUED = 2, /* another group has waited longer (fairness) */
    WIRE_LOCK_POOL = 3,   /* the AN's pool cannot hold one stream slot */
    WIRE_LOCK_NOPOOL = 4, /* the AN has no streaming pool (size 0) */
    WIRE_LOCK_WHY_COUNT = 5,
} wire_lock_why_t;

/* The reason's text for logs ("tree held by another group", ...). */
const char *wire_lock_why_str(unsigned why);

static inline int wire_is_lock(uint8_t type)
{
    return type >= 3 && type <= 6;
}

/* The collective a CONTRIB or RESULT belongs to: flags bits 2..4. */
typedef enum {
    WIRE_COLL_ALLREDUCE = 0,
    WIRE_COLL_REDUCE = 1,  /* reduced up, the result down to the root only */
    WIRE_COLL_BCAST = 2,   /* root's data up its path, replicated down */
    WIRE_COLL_BARRIER = 3, /* no payload either way */
    /* Gathers: bytes (uint8) of a vector of size x block bytes, concatenated
     * in rank order by the ANs; a CONTRIB carries a piece (below). */
    WIRE_COLL_ALLGATHER = 4, /* the vector down to every member */
    WIRE_COLL_GATHER = 5,    /* the vector down to the root only */
    /* Splits: each member gets only its block of a vector of size x block
     * elements; every CONTRIB starts with a piece descriptor saying which
     * elements of the segment the sender wants (length 0: none), and a
     * RESULT with data is a piece: descriptor, then those elements. */
    WIRE_COLL_SCATTER = 6,        /* bytes: the root's vector, split down */
    WIRE_COLL_REDUCE_SCATTER = 7, /* reduced up, split down */
    WIRE_COLL_COUNT = 8,
} wire_coll_t;

/* A gather kind's CONTRIB with data carries, before its bytes, a piece
 * descriptor: u32 offset of the piece in the segment, u32 its length;
 * then exactly that many bytes, offset + length <= count. */
#define WIRE_PIECE_LEN 8

static inline int wire_coll_is_gather(wire_coll_t kind)
{
    return kind == WIRE_COLL_ALLGATHER || kind == WIRE_COLL_GATHER;
}
static inline int wire_coll_is_split(wire_coll_t kind)
{
    return kind == WIRE_COLL_SCATTER || kind == WIRE_COLL_REDUCE_SCATTER;
}
#define WIRE_F_KIND_SHIFT 2
#define WIRE_F_KIND_MASK (7u << WIRE_F_KIND_SHIFT)

static inline wire_coll_t wire_flags_kind(uint16_t flags)
{
    return (wire_coll_t)((flags & WIRE_F_KIND_MASK) >> WIRE_F_KIND_SHIFT);
}
static inline uint16_t wire_kind_flags(wire_coll_t kind)
{
    return (uint16_t)((unsigned)kind << WIRE_F_KIND_SHIFT);
}
/* The kind's name for counters and logs ("allreduce", "bcast", ...). */
const char *wire_coll_name(wire_coll_t kind);

typedef struct {
    uint8_t version;
    uint8_t type;
    uint8_t op;
    uint8_t dtype;
    uint32_t group;
    uint16_t child;
    uint16_t flags;
    uint64_t mac; /* as received; wire_pack writes it, wire_mac_seal sets it */
    uint16_t slot;
    uint8_t hops;
    uint8_t mac_alg; /* as received; wire_mac_seal sets it */
    /* The call the packet belongs to (docs/wire-format.md, "Calls that
     * differ"); only wire_pack() and wire_parse() map them onto bytes:
     * root (or with WIRE_F_ERROR, why) at 48, call_hash at 52. */
    uint32_t root;      /* CONTRIB/RESULT/P2P_DATA: the call's root rank
                           (rooted collectives), or the collective an
                           allreduce carries (its tag) */
    uint32_t call_hash; /* P2P_DATA: a hash of the sender's schedule and
                           count */
    uint16_t why;       /* CONTRIB/RESULT with WIRE_F_ERROR:
                           wire_mismatch_t */
    uint32_t epoch;
    uint32_t count;
    uint32_t total;
    uint64_t offset;
} wire_hdr_t;

/* Writes hdr into buf (WIRE_HDR_LEN bytes). */
void wire_pack(const wire_hdr_t *hdr, void *buf);

/*
 * Parses and checks a datagram of len bytes: magic, version, known type,
 * a known mac algorithm,
 * for CONTRIB/RESULT a valid op/dtype pair, a known collective kind and a
 * payload of exactly count * dtype_size bytes (none with WIRE_F_NODATA)
 * no larger than WIRE_MAX_PAYLOAD. On success
 * fills *hdr_p and returns INCOLL_OK; otherwise returns
 * INCOLL_ERR_PROTOCOL and, when why_p is not NULL, points it to a constant
 * string naming the field at fault.
 */
incoll_status_t wire_parse(const void *buf, size_t len, wire_hdr_t *hdr_p,
                           const char **why_p);

/*
 * The version byte of a datagram whose magic is ours, else -1: for the
 * error that names a peer of another version (wire_parse only says
 * "unsupported version").
 */
int wire_peek_version(const void *buf, size_t len);

/*
 * Remembers which (peer, cause) pairs were already reported, so that a
 * misconfigured peer is named once at the default log level and not once
 * per packet. wire_once returns 1 the first time it sees key (any 64-bit
 * value made of the peer and the cause), 0 after; a full table forgets
 * the oldest.
 */
#define WIRE_ONCE_MAX 16
typedef struct {
    uint64_t key[WIRE_ONCE_MAX];
    unsigned n, next;
} wire_once_t;
int wire_once(wire_once_t *once, uint64_t key);

/* Payload length a header of this type and count must carry; for a
 * piece (a gather kind's CONTRIB with data, a split kind's RESULT with
 * data) the largest it may carry (WIRE_PIECE_LEN + the segment). */
size_t wire_payload_len(const wire_hdr_t *hdr);

/* Endpoint of a peer: for UDP, (IPv4 address << 16) | port, both in host
 * order; the simulator and the tests use their own numbering. */
typedef uint64_t incoll_ep_t;
#define INCOLL_EP_NONE UINT64_MAX

static inline incoll_ep_t wire_ep(uint32_t ipv4, uint16_t port)
{
    return ((uint64_t)ipv4 << 16) | port;
}

/* Formats an endpoint as "a.b.c.d:port" into buf (at least 22 bytes). */
const char *wire_ep_str(incoll_ep_t ep, char *buf, size_t len);

/* Parses "a.b.c.d:port"; returns INCOLL_ERR_INVALID_ARG on bad text. */
incoll_status_t wire_ep_parse(const char *text, incoll_ep_t *ep_p);

#endif
