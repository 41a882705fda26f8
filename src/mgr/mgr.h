/*
 * The aggregation manager: one per fabric. It owns the topology and the
 * trees, admits groups for communicators, tells the ANs of each group
 * their part in it, watches ANs (heartbeats, connection loss) and hosts
 * (connection loss), tears down and reclaims what failed, and answers
 * `incoll stat`. The protocol is in docs/manager.md and
 * src/common/mgr_proto.h.
 *
 * What it decides is in its sans-I/O core (mgr_core.h), which tests drive
 * through an in-memory network (tests/mgrnet.h); this is the daemon
 * around it: one thread, one epoll loop over a TCP listener, its
 * connections and a stop fd, waking at least every tick_ms for timers
 * (authentication and frame deadlines here, the core's heartbeat
 * deadlines, grace periods and request timeouts); it never spins.
 *
 * Hostile clients: connections are bounded by the descriptor limit
 * (RLIMIT_NOFILE less a reserve), unauthenticated ones by half of that.
 * The listener is drained at once, a batch per loop turn, so the kernel's
 * queue never holds a newcomer back: at either bound a new connection
 * takes the place of the oldest unauthenticated one of the addresses
 * holding more than their share (an eighth of the unauthenticated bound),
 * else of the oldest of all, once what that one sent was read (a client
 * that just answered the handshake stays). Only when every connection has
 * authenticated does the listener rest. A spare descriptor sheds the
 * newest connection when accept() still runs out of descriptors, and the
 * bound comes down to the connections it holds. Every frame must be
 * complete within frame_ms of its first byte, its size within its role's
 * limit and the bytes of partial frames within rx_budget (job_rx_budget
 * per job); a receive buffer shrinks back once its frame is taken. What is
 * queued to peers that do not read is bounded by tx_budget in all (the
 * connection holding the most is closed beyond). Warnings about hostile
 * traffic are rate limited, with a count of what was left out.
 *
 * Metrics: with a metrics address the loop also serves HTTP (mgr_http.h).
 *
 * Restarts: the manager keeps no state on disk. ANs keep their groups when
 * the manager goes away and report them, with the manager's record of
 * each, when they register again; within recover_ms of its start a new
 * manager adopts every group so reported, so running jobs go on. Hosts
 * reconnect and join again; a group none of whose members comes back
 * within adopt_grace_ms is reclaimed.
 */
#ifndef INCOLL_MGR_MGR_H
#define INCOLL_MGR_MGR_H

#include "common/mgr_proto.h"
#include "mgr/place.h"
#include "mgr/topo.h"

#include <stdint.h>

typedef struct mgr mgr_t;

typedef struct {
    const char *listen;       /* "IP:PORT"; port 0 picks one */
    const topo_t *topo;       /* must outlive the manager */
    uint8_t key[MGR_KEY_LEN]; /* from mgr_secret_load() */
    uint32_t heartbeat_ms;    /* told to ANs; dead after 5 missed (1 s) */
    uint32_t host_grace_ms;   /* a host gone this long loses its groups */
    uint32_t adopt_grace_ms;  /* adopted groups wait this long for hosts */
    uint32_t recover_ms;      /* adopt what ANs report this long after
                                 start */
    uint32_t request_ms;      /* members of a group request must all ask
                                 within this */
    uint32_t auth_ms;         /* a connection must authenticate in this */
    uint32_t peer_timeout_ms; /* a silent peer's connection is closed
                                 within this (TCP keepalive) */
    uint32_t frame_ms;        /* a frame once begun must be complete in
                                 this */
    uint64_t rx_budget;       /* bytes of partial frames buffered, in all */
    uint64_t job_rx_budget;   /* ... for the connections of one job */
    uint64_t tx_budget;       /* bytes queued to peers, in all */
    uint64_t state_budget;    /* the core's state, in all (mgr_core.h) */
    uint64_t job_state_budget;
    double job_share;    /* of an AN a job without a quota may hold */
    int registered_only; /* only registered jobs may join */
    uint32_t job_linger_ms;
    int has_admin_key; /* admins prove admin_key, else key */
    uint8_t admin_key[MGR_KEY_LEN];
    const char *metrics; /* "IP:PORT" to serve metrics on, or NULL */
    /* The selection table handed to joining jobs (MGR_TUNE), checked at
     * start; NULL: none. */
    const char *tune_text, *tune_source;
    uint32_t tick_ms; /* timer resolution */
    int stop_fd;      /* readable: stop (a signalfd), or -1 */
    place_params_t place;
} mgr_params_t;

/* Defaults: the settings table's (INCOLL_MGR_HEARTBEAT_MS and the other
 * INCOLL_MGR_ settings, src/common/settings.h, whatever the environment
 * says), listen on 127.0.0.1:0, tick 100 ms, place_params_default(). */
void mgr_params_default(mgr_params_t *params);
/* Sets the parameters that have a setting to its current value (the
 * environment's, else the default). Call settings_check("mgr") first: a
 * bad value is logged and its default used. */
void mgr_params_from_env(mgr_params_t *params);

/*
 * Creates the manager and binds its listener. On error writes the cause
 * into err and returns NULL. mgr_destroy() closes everything.
 */
mgr_t *mgr_create(const mgr_params_t *params, char *err, size_t errlen);
void mgr_destroy(mgr_t *mgr);

/* The listening port (useful with port 0). */
uint16_t mgr_port(const mgr_t *mgr);
/* The metrics endpoint's port, 0 without one. */
uint16_t mgr_metrics_port(const mgr_t *mgr);

/* Runs the loop until stop_fd is readable. Returns 0, or 1 if the loop
 * itself failed. */
int mgr_run(mgr_t *mgr);

/* Writes the state as `incoll stat` shows it (docs/manager.md) into a
 * malloc'ed string; the caller frees it. */
char *mgr_stat_text(const mgr_t *mgr);

#endif
