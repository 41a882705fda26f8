/*
 * Communicators beyond the world (src/host/comm.c): split and create, with
 * their fabric groups from the manager, group failures and rebuilds, and
 * the context's link to the manager.
 *
 * Every communicator has a 64-bit id that all its members compute alike
 * without talking: 0 for the world, and for the others a hash of the
 * parent's id with the parent's split count and the color (split), or with
 * the member list and how often this list was made from the parent
 * (create). The manager matches group requests by (job, id, generation).
 *
 * Hooks the rest of the library calls (see each):
 *   incoll_init        host_ctx_mgr_init() when INCOLL_MGR is set
 *   incoll_finalize    host_ctx_info_free() before freeing communicators
 *   comm_free          host_comm_info_free()
 *   progress loop      host_ctx_mgr_pollfd() / host_ctx_mgr_on_readable()
 *   collectives        host_comm_inc_usable(), host_comm_group_failed(),
 *                      host_comm_rebuild()
 *   host algorithms    host_comm_peer_ep(), host_comm_wire_id()
 */
#ifndef INCOLL_HOST_COMM_H
#define INCOLL_HOST_COMM_H

#include "incoll.h"

#include "common/wire.h"

#include <stdint.h>

/* The rank-th host (modulo their number) of the comma-separated list
 * INCOLL_HOSTS into buf; -1 if there is none. */
int host_rank_host(const char *list, int rank, char *buf, size_t len);

/*
 * INCOLL_MGR mode, called by incoll_init() after the UDP socket is open
 * and instead of making the world from fabric.conf: connects to the
 * manager (INCOLL_MGR, INCOLL_SECRET_FILE, INCOLL_JOB, INCOLL_HOST), joins
 * as (job, rank, size) and makes ctx->world from the manager's world group
 * (or without a group, host-based, saying why). Sets ctx->world and adds
 * it to ctx->comms.
 */
incoll_status_t host_ctx_mgr_init(incoll_ctx_h ctx);

/*
 * The local IPv4 address (host order) this process reaches the manager
 * at addr from, to bind the UDP socket to; 0x7f000001 when unknown.
 */
uint32_t host_mgr_local_ip(const char *addr);

/* Frees what comm.c keeps for the context (closes the manager link, with
 * a goodbye). incoll_finalize() calls it before freeing communicators. */
void host_ctx_info_free(incoll_ctx_h ctx);

/* Frees what comm.c keeps for a communicator; comm_free() calls it. */
void host_comm_info_free(incoll_comm_h comm);

/*
 * For the progress loop: fills *pfd with the manager's socket (fd -1 when
 * there is none, which poll() ignores) and returns the time (host_now_ns()
 * clock) by which host_ctx_mgr_on_readable() must run even without input,
 * to reconnect a lost link, or UINT64_MAX.
 */
struct pollfd;
uint64_t host_ctx_mgr_pollfd(incoll_ctx_h ctx, struct pollfd *pfd);
/* Reads the manager's messages (group failures mark their communicators)
 * and drives a reconnection; call when the fd of host_ctx_mgr_pollfd() has
 * events or its time has come. Never blocks. */
void host_ctx_mgr_on_readable(incoll_ctx_h ctx);

/*
 * 1 if comm has a working fabric group that can do op on dtype; 0 when
 * the operation must run on the hosts (no group, the group failed, or the
 * group's ANs cannot do this op or dtype).
 */
int host_comm_inc_usable(incoll_comm_h comm, incoll_op_t op,
                         incoll_dtype_t dtype);

/*
 * After an in-network operation on comm failed (started = 1), or before
 * starting one on a group known to have failed (started = 0): agrees with
 * the other
 * members (every member must call it; it returns when all did) on whether
 * they all failed on the same operation, and asks the manager for a new
 * group without the failed AN. *same_op_p is 1 when every member failed
 * on the same operation, so that running it again (on the new group or on
 * the hosts) gives every member the result exactly once; 0 when some
 * members had completed it (they are one operation ahead): the caller
 * must then fail the operation with INCOLL_ERR_GROUP_FAILED rather than
 * risk a wrong result. Returns INCOLL_OK with a new engine on comm, or an
 * error with comm left without a group (host-based from then on;
 * incoll_comm_offloaded() says why). A communicator gets at most two new
 * groups; without a manager the agreement runs on the hosts.
 */
incoll_status_t host_comm_rebuild(incoll_comm_h comm, int started,
                                  int *same_op_p);

/* 1 if comm has a fabric group the manager said failed: call
 * host_comm_rebuild(comm, 0, ...) before the next operation (the other
 * members will fail on it and rebuild too). */
int host_comm_group_failed(incoll_comm_h comm);

/* UDP endpoint of comm's rank, for host-based algorithms: what the
 * manager said, or fabric.conf's, or INCOLL_EP_NONE. */
incoll_ep_t host_comm_peer_ep(incoll_comm_h comm, int rank);

/* The communicator's id (0 for the world) and an id and key for its
 * host-to-host packets, alike on every member and distinct from fabric
 * group ids (high bit set). */
uint64_t host_comm_id(incoll_comm_h comm);
uint32_t host_comm_wire_id(incoll_comm_h comm);
uint64_t host_comm_wire_key(incoll_comm_h comm);

#endif
