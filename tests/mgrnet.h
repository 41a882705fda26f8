/*
 * mgrnet: a deterministic in-memory control network and virtual clock for
 * the unit tests of the manager's core (src/mgr/mgr_core.h), as memnet is
 * for the data path's cores.
 *
 * It holds one manager core and, around it, model ANs (one per topology
 * switch) and model hosts that speak the real protocol: every message is
 * encoded and decoded with the codecs of src/common/mgr_codec.h and
 * delivered delay_ms after it was sent, in send order. The handshake is
 * left out (the core only ever sees authenticated peers).
 *
 * ANs behave as src/agg/agg_mgr_link.c does: they register with the groups
 * they hold (and the manager's record of each), send a heartbeat every
 * heartbeat_ms once registered, add and remove groups when told and
 * acknowledge it, and reconnect reconnect_ms after their connection broke.
 * A test can kill one (its groups are gone), cut its connection (it keeps
 * its groups and comes back), or hang it (it says nothing, its connection
 * stays). Hosts join, ask for groups, release them, say goodbye or crash
 * when the test says so, and record what the manager answered.
 *
 * Time is virtual milliseconds from 0; the core is ticked every tick_ms.
 * Nothing sleeps, and one test gives one run.
 */
#ifndef INCOLL_TESTS_MGRNET_H
#define INCOLL_TESTS_MGRNET_H

#include "mgr/mgr_core.h"

#include <stdint.h>

typedef struct mgrnet mgrnet_t;

typedef struct {
    uint32_t heartbeat_ms;   /* 0 = 200 */
    uint32_t host_grace_ms;  /* 0 = 3000 */
    uint32_t adopt_grace_ms; /* 0 = 30000 */
    uint32_t recover_ms;     /* 0 = 10000 */
    uint32_t request_ms;     /* 0 = 30000 */
    uint32_t tick_ms;        /* 0 = 100 */
    uint32_t delay_ms;       /* one-way delay of every message; 0 = 1 */
    uint32_t reconnect_ms;   /* an AN retries after this; 0 = 500 */
    /* Jobs and quotas (mgr_core_params_t): 0 leaves each unbounded. */
    double job_share;
    int registered_only;
    uint32_t job_linger_ms;
    uint64_t state_budget;
    uint64_t job_state_budget;
} mgrnet_cfg_t;

/* Parses the topology text (docs/topology.md) and creates the manager at
 * time 0; ANs are not started. NULL (cause printed) on error. */
mgrnet_t *mgrnet_create(const char *topo_text, const mgrnet_cfg_t *cfg);
void mgrnet_destroy(mgrnet_t *net);

mgr_core_t *mgrnet_core(mgrnet_t *net);
uint64_t mgrnet_now(const mgrnet_t *net);

/* Runs virtual time forward by ms: deliveries, heartbeats, reconnections
 * and the core's ticks, in time order. */
void mgrnet_run(mgrnet_t *net, uint64_t ms);

/*
 * The manager process restarts: every connection breaks at once, the core
 * is destroyed and a new one (a new boot id, other group ids) is created
 * now. Live ANs reconnect and report what they hold; hosts stay
 * disconnected until the test joins them again.
 */
void mgrnet_restart_manager(mgrnet_t *net);

/* ---- ANs (indexed by topology switch) ---- */

/* Starts the AN of switch name (connects and registers). Returns its
 * index, or -1 for an unknown name. */
int mgrnet_an_start(mgrnet_t *net, const char *name);
/* The AN process dies: its connection breaks and its groups are lost. It
 * stays down until mgrnet_an_start. */
void mgrnet_an_kill(mgrnet_t *net, int an);
/* Its connection breaks; it keeps its groups and reconnects after
 * reconnect_ms. */
void mgrnet_an_cut(mgrnet_t *net, int an);
/* Hung: sends nothing and ignores what it gets, connection open (1), or
 * back to normal (0). A hung AN whose connection broke reconnects only
 * once it is back to normal. */
void mgrnet_an_hang(mgrnet_t *net, int an, int hung);
/* Refuse the next group_add with this status (0: accept). */
void mgrnet_an_refuse(mgrnet_t *net, int an, int32_t status);

typedef struct {
    int connected;    /* a connection is open */
    int registered;   /* register_ok received on it */
    int ngroups;      /* groups held */
    uint64_t boot_id; /* from the last register_ok */
    uint32_t adds;    /* group_add received, in all */
    uint32_t removes; /* group_remove received, in all */
    uint32_t registrations;
    uint32_t errors;
} mgrnet_an_view_t;

void mgrnet_an_view(const mgrnet_t *net, int an, mgrnet_an_view_t *view);
/* 1 if the AN holds group id. */
int mgrnet_an_holds(const mgrnet_t *net, int an, uint32_t id);

/* ---- hosts ---- */

/* A rank of job on topology host (by name; "" = unknown). Returns its
 * index. Not connected until mgrnet_host_join. */
int mgrnet_host_add(mgrnet_t *net, const char *job, int rank, int size,
                    const char *host);
/* Gives node h another rank (before it joins again). */
void mgrnet_host_set_rank(mgrnet_t *net, int h, int rank);
/* Connects (again) and sends JOIN. */
void mgrnet_host_join(mgrnet_t *net, int h);
/* Asks for the group of comm (gen) over members (world ranks, comm
 * order), forgetting the previous answer. */
void mgrnet_host_request(mgrnet_t *net, int h, uint64_t comm, uint32_t gen,
                         const int *members, int n);
/* ... asking for slots (0: the manager's default). */
void mgrnet_host_request_slots(mgrnet_t *net, int h, uint64_t comm,
                               uint32_t gen, const int *members, int n,
                               uint32_t slots);
void mgrnet_host_release(mgrnet_t *net, int h, uint64_t comm, uint32_t group);
/* Sends BYE and closes. */
void mgrnet_host_bye(mgrnet_t *net, int h);
/* The process dies: the connection breaks without a goodbye. */
void mgrnet_host_crash(mgrnet_t *net, int h);
/* An admin peer (the Slurm plugin's side): a node whose connection,
 * opened by its first call below, is of MGR_ROLE_ADMIN. Its answers go
 * into its host view (reg_*, end_*, stat, errors). */
int mgrnet_admin_add(mgrnet_t *net);
void mgrnet_admin_register(mgrnet_t *net, int a, const char *job,
                           uint32_t groups, uint32_t slots);
void mgrnet_admin_end(mgrnet_t *net, int a, const char *job);
/* Asks for the stat text (flags: MGR_STAT_F_*); the answer is kept for
 * mgrnet_stat_text(). */
void mgrnet_admin_stat(mgrnet_t *net, int a, uint32_t flags);
/* The last stat answer any admin got ("" before one). */
const char *mgrnet_stat_text(const mgrnet_t *net);

/* Sends any frame (malformed input tests). */
void mgrnet_host_send_raw(mgrnet_t *net, int h, uint16_t type, const void *body,
                          size_t len);

typedef struct {
    int connected;
    int joined;       /* join_ok received on this connection */
    uint64_t boot_id; /* from join_ok */
    int answered;     /* group_info received since the last request */
    int32_t status;   /* its status */
    char reason[256];
    uint32_t group;
    uint64_t key;
    uint16_t child;
    incoll_ep_t an;
    incoll_ep_t mcast; /* the multicast address of our AN's results */
    uint32_t gen;
    uint32_t failed; /* group_failed received, in all */
    uint32_t failed_group;
    char failed_reason[256];
    uint32_t errors;      /* MGR_ERROR received, in all */
    int32_t error_status; /* the last one's */
    char error[256];
    uint32_t bad_info; /* group_info its decoder refused */
    char bad_why[64];  /* why, the last time */
    /* admins */
    uint32_t reg_ok; /* job_register_ok received, in all */
    uint32_t reg_gen, reg_groups, reg_slots;
    uint32_t end_ok; /* job_end_ok received, in all */
    uint32_t end_jobs, end_groups;
} mgrnet_host_view_t;

void mgrnet_host_view(const mgrnet_t *net, int h, mgrnet_host_view_t *view);

#endif
