/*
 * The host library's link to the aggregation manager (INCOLL_MGR): one TCP
 * connection per process, authenticated with the fabric secret, joined as
 * (job, rank, size). Through it the process asks for the group of a
 * communicator, releases it, and hears that a group failed.
 *
 * Only host_mgr_connect() blocks (at most its timeout); after that,
 * requests are sent and answers collected by host_mgr_read(), so the
 * caller waits on the manager's fd beside its UDP socket (src/host/comm.c
 * and the progress loop do). A lost connection is retried without
 * blocking, first after retry_ms then backing off to 2 s: the process
 * joins again and resends the requests it waits for, so a restarted
 * manager carries on.
 */
#ifndef INCOLL_HOST_MGR_CLIENT_H
#define INCOLL_HOST_MGR_CLIENT_H

#include "common/mgr_proto.h"

#include <stdint.h>

typedef struct host_mgr host_mgr_t;

typedef struct {
    const char *addr;        /* INCOLL_MGR: "host:port" */
    const char *secret_file; /* INCOLL_SECRET_FILE */
    const char *job;         /* INCOLL_JOB */
    int rank;
    int size;
    const char *host;    /* topology host (INCOLL_HOST); "" = by address */
    incoll_ep_t ep;      /* our UDP endpoint */
    uint32_t timeout_ms; /* connect, authenticate and join within this;
                            0: INCOLL_MGR_CONNECT_MS's default */
    uint32_t retry_ms;   /* between reconnection attempts */
} host_mgr_params_t;

/* The manager's answer to a group request. */
typedef struct {
    incoll_status_t status; /* INCOLL_OK: a group; else why there is none */
    char reason[256];
    uint32_t group;
    uint64_t key;
    uint16_t child;
    incoll_ep_t an;
    incoll_ep_t mcast; /* where the AN multicasts results (INCOLL_EP_NONE:
                          nowhere; docs/multicast.md) */
    uint32_t slots;
    uint32_t payload;
    uint32_t ops; /* bit (1 << op) for each op the group can do */
    uint32_t dtypes;
    /* The smallest and largest opseq the members sent: for logs only. An
     * error answer carries 0 for both, so these never tell where the
     * members are (the library agrees on the hosts, src/host/comm.c). */
    uint64_t opseq_min;
    uint64_t opseq_max;
    int nmembers;
    incoll_ep_t *peers; /* members' UDP endpoints (malloc'ed; the
                           caller frees with host_mgr_group_free) */
    /* Where the members are, as the manager said it before the answer
     * (MGR_GROUP_SHAPE; the same for every member): topology hosts, most
     * members on one, the widest switch and highest level of the group's
     * tree. 0: unknown (an older manager, or no group). */
    uint32_t hosts, ppn, radix, levels;
} host_mgr_group_t;

void host_mgr_group_free(host_mgr_group_t *g);

/* Called for each GROUP_FAILED notification. */
typedef void (*host_mgr_failed_cb_t)(void *arg, uint32_t group, uint64_t comm,
                                     uint32_t gen, const char *reason);

/*
 * Connects, authenticates and joins. On failure logs the cause and returns
 * INCOLL_ERR_CONFIG (bad parameters or secret), INCOLL_ERR_AUTH,
 * INCOLL_ERR_IO or INCOLL_ERR_TIMEOUT. The caller frees *mgr_p with
 * host_mgr_close().
 */
incoll_status_t host_mgr_connect(const host_mgr_params_t *params,
                                 host_mgr_t **mgr_p);

/* Says goodbye (so the manager releases what is left without waiting) and
 * closes. */
void host_mgr_close(host_mgr_t *mgr);

/* The socket to wait on (for input), or -1 while disconnected. */
int host_mgr_fd(const host_mgr_t *mgr);
/* When host_mgr_read() must run even without input (a reconnection
 * attempt or a handshake deadline, CLOCK_MONOTONIC ms), or UINT64_MAX. */
uint64_t host_mgr_deadline_ms(const host_mgr_t *mgr);
/* 1 when a frame waits to be sent (wait for POLLOUT too). */
int host_mgr_want_write(const host_mgr_t *mgr);

/*
 * Sends a group request for a communicator (comm, gen) of n members given
 * by their world ranks in communicator order; opseq tells the others where
 * this member is (rebuilds after a failure). Returns the request number to
 * wait for in *req_p.
 */
incoll_status_t host_mgr_group_request(host_mgr_t *mgr, uint64_t comm,
                                       uint32_t gen, const int *world_ranks,
                                       int n, uint64_t opseq, uint32_t slots,
                                       uint32_t payload, uint32_t *req_p);

/*
 * Processes what the manager sent (without blocking): answers are kept
 * for host_mgr_take_answer(), GROUP_FAILED go to cb. Reconnects when the
 * connection was lost and retry_ms has passed. Returns 0, or -1 while
 * disconnected.
 */
int host_mgr_read(host_mgr_t *mgr, host_mgr_failed_cb_t cb, void *arg);

/* 1 and fills *g when the answer to req came (then it is forgotten);
 * 0 otherwise. */
int host_mgr_take_answer(host_mgr_t *mgr, uint32_t req, host_mgr_group_t *g);

/* Tells the manager this process is done with the group. */
incoll_status_t host_mgr_group_release(host_mgr_t *mgr, uint64_t comm,
                                       uint32_t group);

/* Reports where n communicators' collectives ran since the last report
 * (MGR_USAGE). INCOLL_ERR_IO while disconnected: the caller keeps the
 * counts for the next report. */
/* The selection table the manager handed over at join (MGR_TUNE), with
 * where it read it in *source_p; NULL when it sent none. */
const char *host_mgr_tune(const host_mgr_t *m, const char **source_p);

incoll_status_t host_mgr_usage(host_mgr_t *mgr, const mgr_usage_entry_t *e,
                               uint16_t n);

/* Reports the process's counters of the result path since the last
 * report (MGR_USAGE_PROC). INCOLL_ERR_IO while disconnected (kept for the
 * next report); INCOLL_ERR_UNSUPPORTED once the manager refused them
 * (an older manager: said once at warn level). */
incoll_status_t host_mgr_usage_proc(host_mgr_t *mgr,
                                    const uint64_t v[MGR_PC_COUNT]);

/* Gives up waiting for req (forgets it; a late answer is dropped). */
void host_mgr_forget(host_mgr_t *mgr, uint32_t req);

#endif
