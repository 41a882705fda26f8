/*
 * Multicast results (src/host/mcast.c).
 */
#ifndef INCOLL_HOST_MCAST_H
#define INCOLL_HOST_MCAST_H

#include "host/host.h"

/*
 * Multicast results (docs/multicast.md). host_mcast_params makes comm's
 * engine listen on ep (the address its leaf AN multicasts to; 0 or
 * INCOLL_EP_NONE: none, an the AN's endpoint): it joins the address and
 * sets p->mcast, or says once why it cannot and leaves p->mcast 0.
 * host_mcast_leave leaves comm's address (before its engine goes).
 * host_mcast_check, after an operation, gives up an address the engine
 * gave up on (nothing came by multicast), said once. host_mcast_recv
 * reads what came to the listening socket (0 when there is none).
 * host_mcast_fd is its descriptor or -1. host_mcast_close closes it.
 */
void host_mcast_params(incoll_comm_h comm, incoll_ep_t ep, incoll_ep_t an,
                       host_engine_params_t *p);
void host_mcast_leave(incoll_comm_h comm);
void host_mcast_check(incoll_comm_h comm);
int host_mcast_recv(incoll_ctx_h ctx, udp_msg_t *msgs, int max);
int host_mcast_fd(incoll_ctx_h ctx);
void host_mcast_close(incoll_ctx_h ctx);

#endif
