/*
 * The rendezvous without a manager (src/host/rdv.c).
 */
#ifndef INCOLL_HOST_RDV_H
#define INCOLL_HOST_RDV_H

#include "host/host.h"

/*
 * Ranks sharing fabric.conf's hosts without a manager (src/host/rdv.c).
 * host_rdv_map sets ctx->host_map and ctx->fabric_host from text
 * (INCOLL_HOST_MAP; NULL or "": rank r on host r * hosts / ranks), with
 * a clear error when the map cannot work. host_rdv_is_leader says whether
 * this rank binds its host's port. host_rdv_run, once the socket is
 * bound, exchanges every rank's endpoint (collective over the world) and
 * returns them in *eps_p (malloc'ed, ctx->size entries). host_rdv_dispatch
 * takes a HELLO or TABLE packet; host_rdv_free frees what these made.
 */
incoll_status_t host_rdv_map(incoll_ctx_h ctx, const char *text);
int host_rdv_is_leader(incoll_ctx_h ctx);
incoll_status_t host_rdv_run(incoll_ctx_h ctx, incoll_ep_t **eps_p);
void host_rdv_dispatch(incoll_ctx_h ctx, const udp_msg_t *m,
                       const wire_hdr_t *h, uint64_t now_ns);
void host_rdv_free(incoll_ctx_h ctx);

#endif
