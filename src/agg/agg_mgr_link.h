/*
 * An aggregation node's link to the manager (INCOLL_MGR): it connects out,
 * proves knowledge of the fabric secret, registers the AN by its topology
 * name with its UDP endpoint and capabilities, applies the manager's group
 * add and remove commands to the agg core, sends heartbeats (with the AN's
 * counters, for `incoll stat`) and reconnects when the manager goes away.
 * Groups stay on the AN while the manager is away; on reconnection the AN
 * reports them, with the manager's record of each, so a restarted manager
 * adopts them and running jobs carry on.
 *
 * For the daemon's event loop the link is a single file descriptor that
 * never changes (an epoll instance of its own holding the TCP socket and a
 * timerfd): add agg_mgr_link_fd() to the loop once and call
 * agg_mgr_link_on_event() whenever it is readable. No other hook, no
 * timeouts to compute.
 */
#ifndef INCOLL_AGG_MGR_LINK_H
#define INCOLL_AGG_MGR_LINK_H

#include "common/mgr_proto.h"
#include "core/agg_core.h"

#include <stddef.h>
#include <stdint.h>

typedef struct agg_mgr_link agg_mgr_link_t;

typedef struct {
    const char *mgr_addr;    /* "host:port" (INCOLL_MGR) */
    const char *secret_file; /* INCOLL_SECRET_FILE */
    const char *name;        /* the AN's switch name in the topology */
    incoll_ep_t ep;          /* its UDP endpoint */
    mgr_caps_t caps;         /* what it offers */
    agg_t *agg;              /* where groups go; not owned */
    uint32_t retry_ms;       /* first reconnection delay (doubles to 2 s) */
} agg_mgr_link_params_t;

/*
 * Fills caps from the environment: every op and dtype the core reduces,
 * INCOLL_AGG_PAYLOAD (65000), INCOLL_AGG_SLOTS (1024), INCOLL_AGG_GROUPS
 * (64), INCOLL_AGG_BUFFER (268435456 bytes).
 */
void agg_mgr_link_caps_from_env(mgr_caps_t *caps);

/*
 * Creates the link and starts connecting (it does not wait). Returns NULL
 * with the cause in err (bad secret, bad address, no memory). The caller
 * frees it with agg_mgr_link_destroy(), which closes the connection but
 * leaves the groups on the AN.
 */
agg_mgr_link_t *agg_mgr_link_create(const agg_mgr_link_params_t *params,
                                    char *err, size_t errlen);
void agg_mgr_link_destroy(agg_mgr_link_t *link);

/* The descriptor to watch for EPOLLIN; stable for the link's life. */
int agg_mgr_link_fd(const agg_mgr_link_t *link);

/* Does what is due: reads and applies the manager's commands, flushes,
 * heartbeats, reconnects. Never blocks. */
void agg_mgr_link_on_event(agg_mgr_link_t *link);

/* 1 while registered with a manager. */
int agg_mgr_link_up(const agg_mgr_link_t *link);

/* Groups the manager gave this AN that it still holds. */
int agg_mgr_link_groups(const agg_mgr_link_t *link);

#endif
