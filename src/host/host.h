/*
 * Internals of the host library: the context (one UDP endpoint per process,
 * the fabric description) and communicators (a group on the fabric, driven
 * by a host_engine_t). The context's progress loop blocks in ppoll until a
 * packet arrives or the engine's next deadline, so waiting costs no CPU.
 *
 * The types every file of src/host shares, and the functions of ctx.c
 * (the clock, the calls' deadlines, the progress loop, scratch buffers);
 * every other file's functions are in a header of its own name.
 */
#ifndef INCOLL_HOST_H
#define INCOLL_HOST_H

#include "incoll.h"

#include "common/fabric_conf.h"
#include "common/mgr_codec.h"
#include "common/tune.h"
#include "common/udp.h"
#include "core/algo.h"
#include "core/host_engine.h"
#include "core/p2p_engine.h"
#include "host/cfg.h"

#include <limits.h>
#include <poll.h>
#include <stdint.h>

/* Communicators beyond the world, fabric groups from the manager and
 * group rebuilds (src/host/comm.c, comm.h) use the info pointers below. */
struct host_comm_info; /* src/host/comm.c */
struct host_ctx_info;  /* src/host/comm.c */
struct host_hier;      /* src/host/hier.c */

/* Where a collective ran: incoll_where_t without its text. */
typedef struct {
    int in_net;
    incoll_why_t why;
} host_where_t;

/* Addresses a process listens on at once: the kernel's default limit of
 * memberships per socket (net.ipv4.igmp_max_memberships). */
#define HOST_MCAST_MAX 20

struct incoll_comm {
    incoll_ctx_h ctx;
    int rank;
    int size;
    int *world_ranks;   /* member i's rank in the world */
    uint32_t group;     /* 0 when the communicator has no fabric group */
    host_engine_t *eng; /* NULL when it has none: host-based only */
    incoll_ep_t mc_ep;  /* the multicast address its results come to and
                           we joined (src/host/mcast.c); 0: none */
    uint32_t mc_late;   /* operations before the join is made
                           (INCOLL_FAULT_MCAST_JOIN_OPS); 0: made */
    void *scratch;      /* staging for in-place and overlapping buffers */
    size_t scratch_len;
    /* The host-based algorithms (src/host/fallback.c). */
    struct {
        p2p_engine_t *eng; /* made on first use */
        uint32_t id;       /* its id on the wire (host_comm_wire_id) */
        /* The engine before the last renewal (a recovery, the job's
         * key): it still answers a peer that missed its last acks (that
         * peer retries under the old id until it has them). */
        p2p_engine_t *retired;
        uint32_t retired_id;
        /* The host-based operation (collective, algorithm) that failed
         * and left its engine out of step, for the messages of the calls
         * after it (constant strings; NULL: none). */
        const char *failed_what, *failed_algo;
    } p2p;
    struct host_comm_info *info; /* id, generation, why not offloaded, peers
                                    (comm.c; NULL until needed) */
    struct host_hier *hier;      /* ranks sharing a host (src/host/hier.c);
                                    NULL until the first allreduce */
    struct incoll_comm *next;    /* the context's list */
    host_where_t where;        /* the last blocking collective's, as it returned
                                  (incoll_comm_where; src/host/api.c) */
    struct host_req_queue *rq; /* its requests (src/host/req.c); NULL
                                  until its first one */
    /* Early returns (src/host/req.c): how many this member made, how
     * often one waited for a slot of the communicator's ring, and the
     * error of one that failed in the background, which the next call on
     * the communicator returns (INCOLL_OK: none). */
    uint64_t early_returns;
    uint64_t early_waits;
    incoll_status_t early_error;
    /* A reduce's or gather's non-root that returns early sends its
     * contribution from the calling thread (host_inc_send_early): its
     * engine operation is then started, its engine's operation count
     * before it was sent_ops, and the request thread, which runs the
     * rest of the call, takes it instead of starting one. */
    int sent_early;
    uint64_t sent_ops;
    /* A broadcast returned with its data while its engine operation
     * waits for the round (host_req_finish_later): the next operation on
     * the engine ends it, or the request thread after linger_due. */
    int linger;
    uint64_t linger_due;
    /* Streaming (src/host/stream.c). */
    struct {
        int said;      /* a lock refusal was logged */
        int mode;      /* host_stream_mode(): 0 by the threshold, 1 always,
                          -1 never */
        uint16_t nops; /* operations the held lock is for (0: until
                          released): INCOLL_STREAM_LOCK's, or
                          incoll_comm_lock's */
    } stream;
    /* While a collective runs as an allreduce (an emulated broadcast,
     * reduce, gather, scatter or barrier, src/host/colls.c): its kind and
     * root (host_call_tag), which the allreduce's packets and its node
     * level's records carry so that members whose calls differ in them
     * are told apart. 0 for a plain allreduce. */
    uint32_t call_tag;
    /* The running call's deadline (INCOLL_DEADLINE_MS; 0: none), set by
     * the outermost call on the communicator (host_call_begin). */
    int call_depth;
    uint64_t call_deadline;
    /* Where its collectives ran, not yet told to the manager
     * (src/host/counters.c); NULL until its first. */
    struct host_usage *usage;
    /* Collectives a front end ran elsewhere, by reason (mgr_fb_t),
     * counted without the library lock (host_usage_count_nolock) and
     * moved into the counts above under it; atomic. */
    uint64_t elsewhere[MGR_FB_COUNT];
    uint64_t elsewhere_n; /* how many were counted so, ever */
};

/* A handler of one wire type of packet that came to the context's socket
 * (host_ctx_on_packet). */
typedef void (*host_pkt_fn)(incoll_ctx_h ctx, const udp_msg_t *m,
                            const wire_hdr_t *h, uint64_t now_ns);
#define HOST_PKT_HANDLERS 8

/*
 * What the progress loop (ctx.c) calls in the layers above it, registered
 * when the context is made (src/host/init.c): never called directly. A
 * NULL entry is not called (mc_fd: no socket; mgr_pollfd: no link).
 */
typedef struct {
    /* The multicast socket (src/host/mcast.c): its descriptor or -1, and
     * up to max of what came to it. */
    int (*mc_fd)(incoll_ctx_h ctx);
    int (*mc_recv)(incoll_ctx_h ctx, udp_msg_t *msgs, int max);
    /* The manager link (src/host/comm.c): its poll entry and due time
     * (host_ctx_mgr_pollfd), and its reader (host_ctx_mgr_on_readable). */
    uint64_t (*mgr_pollfd)(incoll_ctx_h ctx, struct pollfd *pfd);
    void (*mgr_on_readable)(incoll_ctx_h ctx);
} host_ctx_io_t;

/*
 * What a file of src/host calls in the files above it, registered when
 * the context is made (src/host/init.c, docs/architecture.md): never
 * called directly. The communicators (comm.c) reach the library's own
 * exchanges (host_allreduce_own: a split's agreement), the host-based
 * engine (fallback.c: host_comm_p2p, host_allreduce_sched,
 * host_comm_p2p_free), the usage counters (counters.c:
 * host_counters_engine_gone, host_usage_flush, host_usage_free), the
 * hierarchy (hier.c: host_hier_on, host_hier_refuse, host_hier_free) and
 * the streaming lock (stream.c: host_stream_report, host_stream_end); the
 * algorithms below the hierarchy (allreduce.c, colls.c, service.c) reach
 * it (host_hier_active, host_hier_allreduce, host_hier_decided,
 * host_hier_leaders).
 */
typedef struct {
    incoll_status_t (*allreduce)(incoll_comm_h comm, const void *sendbuf,
                                 void *recvbuf, size_t count,
                                 incoll_dtype_t dtype, incoll_op_t op);
    incoll_status_t (*p2p)(incoll_comm_h comm);
    incoll_status_t (*allreduce_sched)(incoll_comm_h comm, algo_kind_t kind,
                                       const void *sendbuf, void *recvbuf,
                                       size_t count, incoll_dtype_t dtype,
                                       incoll_op_t op);
    void (*p2p_free)(incoll_comm_h comm);
    void (*engine_gone)(incoll_comm_h comm);
    void (*usage_flush)(struct incoll_ctx *ctx, incoll_comm_h comm);
    void (*usage_free)(incoll_comm_h comm);
    int (*hier_on)(incoll_comm_h comm);
    int (*hier_refuse)(incoll_comm_h comm, incoll_status_t *status_p);
    void (*hier_free)(incoll_comm_h comm);
    int (*hier_active)(incoll_comm_h comm, incoll_status_t *status_p);
    incoll_status_t (*hier_allreduce)(incoll_comm_h comm, incoll_algo_t algo,
                                      const void *sendbuf, void *recvbuf,
                                      size_t count, incoll_dtype_t dtype,
                                      incoll_op_t op);
    int (*hier_decided)(incoll_comm_h comm);
    incoll_comm_h (*hier_leaders)(incoll_comm_h comm, int *nlocal_p);
    void (*stream_report)(incoll_comm_h comm);
    void (*stream_end)(incoll_comm_h comm);
} host_up_t;

struct incoll_ctx {
    host_cfg_t cfg; /* every setting, read once at init (host/cfg.h) */
    int rank;
    int size;
    char fabric_dir[PATH_MAX];
    fabric_conf_t conf;
    udp_sock_t *sock;
    wire_once_t peers_told; /* peers of another wire version, named once */
    /* Packets of the types that are no fabric group's, by their handler
     * (host_ctx_on_packet), and the other descriptors of the loop. */
    struct {
        uint8_t type;
        host_pkt_fn fn;
    } pkt[HOST_PKT_HANDLERS];
    int npkt;
    host_ctx_io_t io;
    host_up_t up;
    struct incoll_comm *world;
    struct incoll_comm *comms;  /* every communicator, world included */
    struct host_ctx_info *info; /* the manager link (comm.c); NULL without
                                   INCOLL_MGR */
    host_engine_params_t eng_defaults;
    /* Streaming (src/host/stream.c): INCOLL_STREAM_THRESHOLD (0: off) and
     * INCOLL_STREAM_LOCK as operations per lock (0: until released). */
    struct {
        size_t threshold;
        uint16_t nops;
    } stream;
    /* The job's generation (CONTRIB/RESULT carry it; agg_core.h) and key
     * (the host-based algorithms' mac keys are derived from it): unique
     * to this job whatever its launcher set (host_job_key, at init);
     * gen0 is what the launcher's INCOLL_GEN or INCOLL_JOB gave, which the
     * exchanges before the key use. */
    uint32_t gen;
    uint32_t gen0;
    uint64_t job_key;
    /* The fabric master key from INCOLL_SECRET_FILE (mgr_secret_load),
     * from which the data path's mac keys are derived; has_secret is 0
     * without one (docs/security.md says what that protects). */
    uint8_t secret[WIRE_SECRET_LEN];
    int has_secret;
    /* The usage counters (src/host/counters.c): the next report of
     * usage, and the result path's counters the manager gets
     * (MGR_USAGE_PROC): what is counted here (operations, multicast
     * fallbacks) and what engines that are gone counted (acc), and the
     * totals last reported (sent). */
    struct {
        uint64_t usage_due_ns;
        uint64_t acc[MGR_PC_COUNT];
        uint64_t sent[MGR_PC_COUNT];
    } counters;
    uint64_t mgr_checked_ns; /* last look at the manager link while
                                packets kept coming (host_now_ns) */
    /* Identity from incoll_init_params() or the settings ("" unset;
     * local_size 0 when unknown). */
    char job[256];
    char host[256];
    char mgr[256];
    char secret_file[PATH_MAX];
    char *hosts; /* INCOLL_HOSTS, malloc'ed ("" when unset) */
    int progress_thread;
    incoll_thread_mode_t thread_mode; /* what the caller promised */
    incoll_outer_lock_t outer_lock;   /* release NULL: none */
    incoll_oob_t oob;     /* allgather NULL: not bootstrapped out of band; else
                             its barrier runs at incoll_finalize */
    size_t early_max;     /* INCOLL_EARLY_MAX: 0 no early returns */
    uint64_t deadline_ns; /* INCOLL_DEADLINE_MS in ns: 0 none */
    int local_rank;
    int local_size;
    const struct host_req_ops *req_ops; /* the executor's (req.h) */
    struct host_sync *sync;             /* the library lock, the poller and the
                                           request threads (src/host/lock.c) */
    /* Without a manager, ranks sharing fabric.conf's hosts (rdv.c):
     * host_map[r] is rank r's host (NULL when each rank is a host of its
     * own), fabric_host ours; rdv the endpoint exchange; via_leaders 1
     * once the world's node level is made (its collectives reach the
     * fabric through the hosts' leaders). */
    int *host_map;
    int fabric_host;
    struct host_rdv *rdv;
    int via_leaders;
    /* Multicast results (src/host/mcast.c): the listening socket (NULL
     * until a group has an address), the addresses joined and by how
     * many communicators, and whether a fallback was said. */
    udp_sock_t *mc_sock;
    struct {
        incoll_ep_t ep;
        uint32_t ip; /* the interface's */
        int refs;
    } mc_joined[HOST_MCAST_MAX];
    int mc_open_failed;
    int mc_warned;
    uint64_t mc_foreign; /* multicast packets of no communicator of ours
                            (another group's address joined: none) */
    /* The selection table in force (src/host/select.c): loaded and
     * agreed at init, with the job's ranks per fabric host (tune.ppn);
     * tune_cmp what the job key's exchange found of the ranks' tables
     * (0: not compared there, 1: the same, 2: not). */
    tune_table_t tune;
    /* With a manager: where the world's members are, as the manager
     * said with the world's group answer (the same on every rank; 0s:
     * unknown). src/host/comm.c sets it, select.c reads it. */
    tune_job_t mgr_shape;
    int tune_loaded;
    int tune_cmp;
};

/* Monotonic time in ns. */
uint64_t host_now_ns(void);

/*
 * The per-call deadline (INCOLL_DEADLINE_MS). host_call_begin at the
 * start of a collective on comm sets it when the call is the outermost on
 * comm (a collective made of others keeps its own), host_call_end after
 * it. host_call_expired says it passed (the call's operations are given
 * up and the members recover together, HOST_ABORT_DEADLINE);
 * host_call_due(comm, d) is d, or the deadline when that comes first.
 */
void host_call_begin(incoll_comm_h comm);

/* The call tag (incoll_comm.call_tag) of a collective of kind
 * (host_coll_kind_t) with root: the kind + 1 in the high byte, the root
 * (a rank, below INCOLL_SIZE's bound of 2^24) in the low three, so that
 * two calls have the same tag only when they are the same collective with
 * the same root; never 0 (a plain allreduce's). */
static inline uint32_t host_call_tag(int kind, int root)
{
    return (uint32_t)(kind + 1) << 24 | ((uint32_t)root & 0xffffffu);
}
void host_call_end(incoll_comm_h comm);
int host_call_expired(incoll_comm_h comm);
/* The outermost call's deadline counts again from now: after a recovery
 * at the start of the call, which waited for the others' earlier call. */
void host_call_restart(incoll_comm_h comm);
uint64_t host_call_due(incoll_comm_h comm, uint64_t due_ns);

/*
 * Receives what is waiting, or blocks until a packet arrives or deadline_ns
 * (CLOCK_MONOTONIC; UINT64_MAX = no deadline) passes, and hands each packet
 * to its communicator's engine. Flushes queued sends first.
 */
void host_ctx_progress(incoll_ctx_h ctx, uint64_t deadline_ns);
/* Hands the packets of wire type type to fn (at init, before the first
 * progress; at most HOST_PKT_HANDLERS types). */
void host_ctx_on_packet(incoll_ctx_h ctx, uint8_t type, host_pkt_fn fn);

/* The schedule of a public host-based algorithm. */
static inline algo_kind_t host_algo_kind(incoll_algo_t algo)
{
    return algo == INCOLL_ALGO_RD     ? ALGO_RD
           : algo == INCOLL_ALGO_RING ? ALGO_RING
                                      : ALGO_RABENSEIFNER;
}

/* Ensures comm->scratch holds at least len bytes. */
incoll_status_t host_comm_scratch(incoll_comm_h comm, size_t len);

#endif
