/*
 * The manager's state machine, sans I/O: authenticated messages and the
 * time in, messages out through a callback. No sockets, no clock, no
 * timers of its own: the daemon's event loop (src/mgr/mgr.c) and the unit
 * tests' in-memory driver (tests/test_mgr_core.c) drive this same code, as
 * they drive the AN's (src/core/agg_core.h).
 *
 * What it keeps (docs/manager.md):
 *  - peers: authenticated connections, each with the role it proved (AN,
 *    host, tool). The driver opens a peer once the handshake is done, hands
 *    in its frames, and says when its connection ended; the core says when
 *    it wants a peer closed (malformed registration, replaced by a newer
 *    connection, heartbeats missed, goodbye) through close_cb.
 *  - ANs: one per topology switch, up while its registration's peer lives
 *    and its heartbeats arrive (dead after HB_MISSED heartbeat_ms without
 *    one); their capabilities feed placement (place.h).
 *  - registrations: jobs an admin peer (the Slurm plugin) announced, with
 *    their quota, until it ends them or they linger unused too long. A
 *    job "A.B" with no registration of its own is governed by A's.
 *  - quotas: the groups and slots a job's groups hold on each AN, bounded
 *    by its registration's quota or else by job_share of the AN.
 *  - memory: every job, rank record, request, group and registration is
 *    charged to state_budget (and its job's to job_state_budget); what
 *    would go over is refused with the reason, so no client can grow the
 *    manager without bound. Ranks are kept sparsely (only those that
 *    joined), so a job's declared size costs nothing.
 *  - jobs and their ranks: a rank is up while its host's peer lives, lost
 *    for host_grace_ms after its connection broke (its groups are then
 *    reclaimed), left after a goodbye, adopted (after a restart, from an
 *    AN's report) until it joins again within adopt_grace_ms, else dead.
 *  - requests: every member of a communicator asks for its group; when all
 *    did (within request_ms) the group is placed and added to its ANs,
 *    and every member is answered once all ANs acknowledged it.
 *  - groups: torn down when released by all members, when an AN of theirs
 *    fails or restarts without them, when a member is gone for good, or
 *    when a newer generation of the communicator is asked for. The ids of
 *    the last TOMBSTONES groups torn down are remembered, so an AN that
 *    still reports one is told to remove it rather than have it adopted.
 *  - restarts: within recover_ms of the core's creation, groups an AN
 *    reports with the record this manager's predecessor gave it are
 *    adopted; an adopted group whose ANs do not all come back within
 *    adopt_grace_ms, or whose members do not, is torn down.
 *
 * Time is milliseconds of any monotonic clock, given with every call; the
 * core never reads a clock. Timers fire in mgr_core_tick(), which the
 * driver calls at least every tick_ms.
 *
 * Reentrancy: send_cb may close the peer it sends to (a peer that does not
 * read); the driver then calls mgr_core_peer_closed() from inside send_cb,
 * and the core copes. close_cb must not call back into the core. Peers are
 * freed when the outermost call into the core returns, so a handle stays
 * valid until then.
 */
#ifndef INCOLL_MGR_CORE_H
#define INCOLL_MGR_CORE_H

#include "common/mgr_codec.h"
#include "mgr/place.h"
#include "mgr/topo.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mgr_core mgr_core_t;
typedef struct mgr_peer mgr_peer_t;

/* Sends one application frame to a peer (user is what the driver gave
 * mgr_core_peer_open). body is valid only during the call. */
typedef void (*mgr_core_send_cb_t)(void *arg, void *user, uint16_t type,
                                   const void *body, size_t len);
/* The core is done with a peer: close its connection (after letting what
 * is queued leave, if it can). Must not call into the core. */
typedef void (*mgr_core_close_cb_t)(void *arg, void *user, const char *why);

/* What the driver counts of its connections, shown by `incoll stat`. */
typedef struct {
    int conns;
    int max_conns;
    int conns_unauth;
    uint64_t conns_accepted;
    uint64_t conns_refused;
    uint64_t conns_evicted;
    uint64_t conns_shed;
    uint64_t rx_buffered;
    uint64_t tx_queued;
    uint64_t conns_slow;      /* closed for not reading (send budget) */
    uint64_t conns_timed_out; /* closed: the peer stopped answering */
    uint64_t frames_late;
    uint64_t frames_refused;
    uint64_t auth_failures;
    uint64_t malformed; /* added to the core's own count */
} mgr_io_stats_t;

typedef void (*mgr_core_io_stats_cb_t)(void *arg, mgr_io_stats_t *stats);

typedef struct {
    const topo_t *topo;      /* must outlive the core */
    const char *listen;      /* shown by stat; copied */
    uint32_t heartbeat_ms;   /* told to ANs; dead after HB_MISSED missed */
    uint32_t host_grace_ms;  /* a host gone this long loses its groups */
    uint32_t adopt_grace_ms; /* adopted groups wait this long for hosts */
    uint32_t recover_ms;     /* adopt what ANs report this long after
                                creation */
    uint32_t request_ms;     /* members must all ask within this */
    uint64_t boot_id;        /* told to peers; a new one per start */
    /* Jobs (docs/manager.md, "Jobs and quotas"). */
    double job_share;          /* of each AN's groups and slots a job
                                  without a quota may hold; 0: all */
    int registered_only;       /* 1: only registered jobs may join */
    uint32_t job_linger_ms;    /* an idle registration is forgotten after
                                  this; 0: 24 h */
    uint32_t gen_base;         /* the first registered job's generation
                                  (the daemon: the wall clock in ms) */
    uint64_t state_budget;     /* bytes of state in all; 0: no bound */
    uint64_t job_state_budget; /* ... for one job; 0: no bound */
    place_params_t place;      /* first_id: the first group id (the daemon
                                  picks it at random) */
    const char *tune_text;     /* handed to joining hosts, or NULL */
    const char *tune_source;   /* where it came from */
    mgr_core_send_cb_t send;
    mgr_core_close_cb_t close;
    mgr_core_io_stats_cb_t io_stats; /* may be NULL */
    void *arg;
} mgr_core_params_t;

/* An AN that misses this many heartbeats in a row is dead. */
#define MGR_HB_MISSED 5

/* Creates the core at time now. Returns NULL (cause in err) on bad
 * parameters or out of memory. mgr_core_destroy() frees it and its peers
 * (without calling close_cb). */
mgr_core_t *mgr_core_create(const mgr_core_params_t *params, uint64_t now,
                            char *err, size_t errlen);
void mgr_core_destroy(mgr_core_t *core);

/*
 * A connection authenticated as role (MGR_ROLE_*). id and name ("IP:port")
 * are for logs, peer_ip (host order) finds a joining host's topology host
 * by address. Returns the peer's handle, or NULL when out of memory (the
 * driver closes the connection).
 */
mgr_peer_t *mgr_core_peer_open(mgr_core_t *core, void *user, uint32_t id,
                               int role, uint32_t peer_ip, const char *name,
                               uint64_t now);
/* One application frame from peer. */
void mgr_core_frame(mgr_core_t *core, mgr_peer_t *peer, uint16_t type,
                    const uint8_t *body, size_t len, uint64_t now);
/* The peer's connection ended (why: the cause) without the core asking;
 * close_cb is not called. The handle is invalid once the outermost call
 * into the core returns. */
void mgr_core_peer_closed(mgr_core_t *core, mgr_peer_t *peer, const char *why,
                          uint64_t now);
/* Fires what is due: heartbeat deadlines, lost and adopted ranks, request
 * and acknowledgement timeouts, and forgets jobs with nothing left. */
void mgr_core_tick(mgr_core_t *core, uint64_t now);

/*
 * A host peer's job: its name and rank, and a byte counter per job that
 * belongs to the driver (the daemon charges partial frames to it; the core
 * never reads it). NULL for a peer that has not joined.
 */
uint64_t *mgr_core_peer_job(mgr_peer_t *peer, const char **name_p, int *rank_p);

/* The state as `incoll stat` shows it (docs/manager.md), malloc'ed; the
 * caller frees it. NULL when out of memory. */
char *mgr_core_stat_text(const mgr_core_t *core, uint64_t now);

/* The metrics (docs/manager.md, "Metrics"): the manager's own, each AN's
 * (from its heartbeats), each job's and each group's, in the OpenMetrics
 * text format 1.0 (om = 1) or the Prometheus text format 0.0.4 (om = 0).
 * malloc'ed, the caller frees it; NULL when out of memory. */
char *mgr_core_metrics_text(const mgr_core_t *core, uint64_t now, int om);

/* Counts, for tests and logs. */
typedef struct {
    int ans_up;
    int jobs;
    int groups;
    int requests;
    int registrations;
    uint64_t state_bytes; /* charged to the state budget */
    uint64_t quota_refused;
    uint64_t budget_refused;
    uint64_t groups_made;
    uint64_t groups_refused;
    uint64_t groups_failed;
    uint64_t groups_released;
    uint64_t groups_reclaimed;
    uint64_t groups_adopted;
    uint64_t malformed;
} mgr_core_counts_t;

void mgr_core_counts(const mgr_core_t *core, mgr_core_counts_t *counts);

#endif
