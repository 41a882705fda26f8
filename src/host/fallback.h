/*
 * Point-to-point and the host-based schedules over it (src/host/fallback.c).
 */
#ifndef INCOLL_HOST_FALLBACK_H
#define INCOLL_HOST_FALLBACK_H

#include "host/host.h"

/*
 * Runs a host-based allreduce schedule (src/core/algo.h) host to host over
 * the context's UDP endpoint with loss recovery (src/host/fallback.c).
 * sendbuf and recvbuf do not overlap (the caller stages them); count > 0.
 */
incoll_status_t host_allreduce_sched(incoll_comm_h comm, algo_kind_t kind,
                                     const void *sendbuf, void *recvbuf,
                                     size_t count, incoll_dtype_t dtype,
                                     incoll_op_t op);

/*
 * Runs host-based algorithm id (core/algo.h) with root, count elements per
 * block and segment seg over the working buffer work (laid out as algo.h
 * says for the collective) over the context's UDP endpoint with loss
 * recovery. Blocks until done; INCOLL_ERR_INVALID_ARG (said why) when the
 * algorithm does not fit comm's size.
 */
incoll_status_t host_coll_sched(incoll_comm_h comm, algo_calgo_t id, int root,
                                void *work, size_t count, size_t seg,
                                incoll_dtype_t dtype, incoll_op_t op);

/*
 * Makes comm->p2p.eng, the engine of the host-based algorithms, if it does not
 * exist yet (slow path, once): peers' endpoints from host_comm_peer_ep(),
 * timing from the context's knobs. INCOLL_ERR_CONFIG when a peer has no
 * fixed UDP port (src/host/fallback.c).
 */
incoll_status_t host_comm_p2p(incoll_comm_h comm);

/* Hands a WIRE_P2P_DATA/ACK packet to its communicator's engine (making the
 * engine when a peer is already ahead of us); the context's dispatch calls
 * it. */
void host_p2p_dispatch(incoll_ctx_h ctx, const udp_msg_t *m,
                       const wire_hdr_t *h, uint64_t now_ns);

/* Before comm is freed: lingers briefly to answer peers whose last ack was
 * lost (p2p_engine_linger), then destroys comm->p2p.eng. */
void host_comm_p2p_free(incoll_comm_h comm);

#endif
