/*
 * The manager core's state, shared by the files of the core and nobody
 * else: mgr_core.c (peers, ANs, requests, groups, failures, the dispatch
 * and the timers), mgr_jobs.c (jobs and their ranks, registrations,
 * quotas and the state budget) and mgr_stat.c (`incoll stat`'s text and
 * the OpenMetrics text). The driver sees only mgr_core.h.
 *
 * Ownership: the core owns everything here. A job is freed by
 * mgr_jobs_gc() once nothing holds it (no live rank, group or request;
 * registrations are kept until ended or idle for job_linger_ms); a rank
 * record is dropped there once it has left or died. Pointers to rank
 * records are valid until the next mgr_rank_get() on their job or the
 * next mgr_jobs_gc(): callers never keep one across either.
 */
#ifndef INCOLL_MGR_STATE_H
#define INCOLL_MGR_STATE_H

#include "mgr/mgr_core.h"

#include <stddef.h>
#include <stdint.h>

#define MGR_TOMBSTONES 4096 /* ids of groups this manager tore down */

typedef struct job job_t;
typedef struct reg reg_t;
typedef struct pending pending_t;

/* An authenticated connection, as the core sees it. */
struct mgr_peer {
    void *user; /* the driver's */
    uint32_t id;
    char name[32];
    uint32_t peer_ip;
    int role;
    int dead;
    uint64_t hb_deadline; /* ANs: the next heartbeat is due by then */
    int an;               /* switch index of a registered AN, else -1 */
    job_t *job;           /* a joined host's job */
    int rank;
    int bye; /* the host said goodbye */
    struct mgr_peer *prev, *next;
};

typedef struct {
    mgr_peer_t *conn; /* NULL while down */
    incoll_ep_t ep;
    char counters[4096]; /* from the last heartbeat */
    uint64_t up_since;
    uint64_t last_seen;
    uint32_t registrations;
    uint32_t reported_groups;
    uint32_t failures; /* times it went down */
} an_state_t;

enum { R_NONE = 0, R_UP, R_LOST, R_LEFT, R_ADOPTED, R_DEAD, R_NSTATES };
extern const char *const mgr_rank_state_names[R_NSTATES];

/* A rank of a job that joined (or was adopted after a restart). */
typedef struct {
    int32_t rank; /* -1: a free entry of the job's table */
    int state;
    mgr_peer_t *conn;
    int host; /* topology host, -1 unknown */
    incoll_ep_t ep;
    uint32_t pid;
    uint64_t deadline; /* LOST/ADOPTED: reclaimed after this */
} rank_t;

/*
 * What a job may hold on each AN and what it holds: a registration's,
 * shared by the jobs it governs, or else a job's own. A limit of 0 means
 * the share (job_share) of that AN's capacity.
 */
typedef struct {
    uint32_t groups;  /* groups per AN */
    uint32_t slots;   /* slots per AN */
    uint32_t *g_used; /* per switch: groups held there */
    uint32_t *s_used; /* per switch: slots held there */
    uint32_t held;    /* groups held in all */
} quota_t;

/* A job an admin registered (job_register), until it ends it (job_end) or
 * nothing of it lives for job_linger_ms. */
struct reg {
    char name[MGR_NAME_MAX];
    quota_t q;
    int own_quota;       /* q's limits were given; else a child shares its
                            parent's quota */
    reg_t *parent;       /* "A" of "A.B", registered before it, or NULL */
    int nchildren;       /* registrations whose parent it is */
    uint32_t gen;        /* handed to the job's processes */
    int njobs;           /* jobs it governs */
    uint64_t created;    /* ms */
    uint64_t idle_since; /* ms; 0 while it governs a job */
    uint64_t mem;        /* charged to the state budget */
    struct reg *next;
};

/* What happened to a job's requests and groups (metrics, stat). */
typedef struct {
    uint64_t groups_made;
    uint64_t groups_refused; /* every refusal, the next two included */
    uint64_t quota_refused;
    uint64_t budget_refused;
    uint64_t groups_failed; /* torn down by an AN failure */
    uint64_t groups_reclaimed;
    uint64_t groups_released;
} job_ctr_t;

/* Where collectives ran, as the job's processes reported them
 * (MGR_USAGE): in the network, in software, and the software ones by
 * reason (mgr_fb_t). */
typedef struct {
    uint64_t net;
    uint64_t sw;
    uint64_t fb[MGR_FB_COUNT];
} usage_ctr_t;

struct job {
    char name[MGR_NAME_MAX];
    int size;
    rank_t *tab; /* open addressing on the rank, cap a power of two */
    uint32_t cap;
    uint32_t nrec;
    int nstate[R_NSTATES]; /* records per state */
    int nleft, ndead;      /* ranks that left or died, dropped since */
    int ngroups;
    int npending;
    reg_t *reg;   /* the registration governing it, or NULL */
    quota_t own;  /* its quota when reg is NULL */
    int ended;    /* an admin ended it: no more groups */
    uint64_t mem; /* its state's bytes, charged to both budgets */
    uint64_t created;
    uint64_t driver_bytes; /* the driver's (mgr_core_peer_job) */
    job_ctr_t ctr;
    usage_ctr_t usage;
    uint64_t pc[MGR_PC_COUNT]; /* its processes' counters (MGR_USAGE_PROC) */
    struct job *next;
};

/* The manager's side of a placed group (place_group_t.user). */
typedef struct {
    job_t *job;
    quota_t *q; /* charged with its groups and slots, or NULL (adopted) */
    uint64_t comm;
    uint32_t gen;
    int *ranks; /* world rank of each member */
    uint8_t *released;
    uint8_t *confirmed; /* per AN of the group: it holds the group */
    int unacked;        /* ANs still to acknowledge the add */
    int active;
    int adopted;
    uint64_t made;     /* ms */
    uint32_t mc_base;  /* its leaf ANs' multicast addresses: this index
                          of INCOLL_MCAST_RANGE and the next ones, one per
                          AN of the group (docs/multicast.md) */
    uint64_t deadline; /* acks, or (adopted) confirmation by every AN */
    pending_t *pend;   /* the request waiting for the acks */
    pending_t *held;   /* adopted: members' requests waiting for every AN
                          of the group to report it (group_whole) */
    uint8_t *rec;      /* the record the ANs keep */
    size_t rec_len;
    uint64_t mem; /* charged to its job */
    usage_ctr_t usage;
} mgroup_t;

struct pending {
    job_t *job;
    uint64_t comm;
    uint32_t gen;
    uint32_t slots;
    uint32_t payload;
    int n;
    int *ranks;
    mgr_peer_t **who;
    uint32_t *reqid;
    uint64_t *opseq;
    int nasked;
    uint64_t deadline;
    uint64_t mem;     /* charged to its job */
    place_group_t *g; /* placed, waiting for the ANs' acks */
    struct pending *next;
};

struct mgr_core {
    mgr_core_params_t p;
    const topo_t *topo;
    uint32_t mc_next;  /* next index of INCOLL_MCAST_RANGE to hand out */
    int fault_unknown; /* INCOLL_MGR_FAULT_UNKNOWN: a host message type
                          answered as unknown (0: none) */
    place_t *pl;
    char listen[64];
    uint64_t now; /* of the call in progress */
    int depth;    /* calls into the core in progress */
    mgr_peer_t *peers;
    mgr_peer_t *graveyard; /* closed, freed when the outermost call ends */
    an_state_t *an;
    job_t *jobs;
    int njobs;
    reg_t *regs;
    int nregs;
    uint32_t last_gen;
    pending_t *pend;
    uint64_t start;
    uint64_t mem;            /* state bytes charged, in all */
    uint32_t *q_groups_left; /* scratch per switch (quota limits) */
    uint32_t *q_slots_left;
    uint32_t tomb[MGR_TOMBSTONES]; /* never adopt these again */
    uint64_t ntomb;
    struct {
        uint64_t malformed;
        uint64_t groups_made;
        uint64_t groups_refused;
        uint64_t groups_failed;
        uint64_t groups_released;
        uint64_t groups_reclaimed;
        uint64_t groups_adopted;
        uint64_t quota_refused;
        uint64_t budget_refused;
        uint64_t joins_refused;
        uint64_t jobs_registered;
        uint64_t jobs_ended;
        uint64_t an_failures;
        uint64_t usage_reports; /* MGR_USAGE taken */
        uint64_t usage_refused; /* malformed, or another job's group */
    } ctr;
};

/* ---- mgr_jobs.c ---- */

/* Charges bytes of state to the budgets (to job's too, when given).
 * Returns 0, or -1 with the reason in why when that would go over a
 * budget (nothing is charged then). */
int mgr_charge(mgr_core_t *m, job_t *job, uint64_t bytes, char *why,
               size_t whylen);
void mgr_uncharge(mgr_core_t *m, job_t *job, uint64_t bytes);

job_t *mgr_job_find(const mgr_core_t *m, const char *name);
/* The job called name, made (with size ranks) when new. NULL with the
 * reason in why: the state budget, registered_only (unless adopted: a job
 * whose group an AN reported after a restart), out of memory. */
job_t *mgr_job_get(mgr_core_t *m, const char *name, int size, int adopted,
                   char *why, size_t whylen);
/* 1 while something holds the job (a live rank, a group, a request). */
int mgr_job_busy(const job_t *job);
/* The quota the job's groups are charged to. */
quota_t *mgr_job_quota(job_t *job);

rank_t *mgr_rank_find(const job_t *job, int rank);
/* The record of rank, made when new (state R_NONE). NULL with the reason
 * when the budget is full or out of memory. */
rank_t *mgr_rank_get(mgr_core_t *m, job_t *job, int rank, char *why,
                     size_t whylen);
void mgr_rank_set_state(job_t *job, rank_t *rk, int state);

/*
 * Fills the core's scratch with what q leaves the job on each switch
 * (m->q_groups_left, m->q_slots_left) and who with the quota's name and
 * numbers for reasons.
 */
void mgr_quota_left(mgr_core_t *m, const job_t *job, const quota_t *q,
                    char *who, size_t wholen);
/* Group g is charged to q (its groups and slots on each of its ANs), or
 * given back. */
void mgr_quota_take(quota_t *q, const place_group_t *g);
void mgr_quota_give(quota_t *q, const place_group_t *g);

/* Admin messages. */
void mgr_on_job_register(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                         size_t len);
void mgr_on_job_end(mgr_core_t *m, mgr_peer_t *c, const uint8_t *body,
                    size_t len);

/* Drops the records of ranks that left or died, frees jobs nothing holds
 * and forgets registrations idle for job_linger_ms. */
void mgr_jobs_gc(mgr_core_t *m);
/* Frees every job and registration (the core goes away). */
void mgr_jobs_free(mgr_core_t *m);

/* ---- mgr_core.c, for mgr_jobs.c ---- */

void mgr_send_error(mgr_core_t *m, mgr_peer_t *c, uint32_t req,
                    incoll_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void mgr_send_msg(mgr_core_t *m, mgr_peer_t *c, uint16_t type,
                  const mgr_wbuf_t *w);
/* Tears down every group and request of job (members hear reason). */
int mgr_job_teardown(mgr_core_t *m, job_t *job, const char *reason);

#endif
