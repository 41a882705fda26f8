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
 *                      host_comm_recover(), host_comm_result_buf()
 *   host algorithms    host_comm_peer_ep(), host_comm_wire_id()
 */
#ifndef INCOLL_HOST_COMM_H
#define INCOLL_HOST_COMM_H

#include "incoll.h"

#include "common/udp.h"
#include "common/wire.h"

#include <stddef.h>
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

/* The context's manager link, or NULL without a manager. */
struct host_mgr;
struct host_mgr *host_ctx_mgr(incoll_ctx_h ctx);

/* Why a collective that comm could not run in the network ran on the
 * hosts (mgr_fb_t): no manager, no group from it, a failed group, or a
 * group that cannot do what was asked. */
int host_comm_fb_reason(incoll_comm_h comm);

/*
 * 1 if comm has a working fabric group that can do op on dtype; 0 when
 * the operation must run on the hosts (no group, the group failed, or the
 * group's ANs cannot do this op or dtype).
 */
int host_comm_inc_usable(incoll_comm_h comm, incoll_op_t op,
                         incoll_dtype_t dtype);

/*
 * Why a member enters a recovery although no fabric failure stopped it
 * (an erroneous call): every member then returns an error for the call it
 * is in and the communicator goes on (docs/failures.md, "Erroneous
 * programs"). 1 .. WIRE_MISMATCH_COUNT - 1: the members' calls differ
 * (wire_mismatch_t, an AN or a peer saw it).
 */
enum {
    HOST_ABORT_NONE = 0,      /* a failure: recover, and run the call */
    HOST_ABORT_ARG = 16,      /* this member refused its arguments */
    HOST_ABORT_DEADLINE = 17, /* this member's INCOLL_DEADLINE_MS passed */
    /* No failure here: another member's recovery pulled this one in (its
     * group may be fine: it is given up only if the agreement says a
     * member gave it up). */
    HOST_ABORT_PULLED = 18,
};

/*
 * Recovery after an in-network operation on comm failed (started = 1: it
 * timed out or its group failed), or before starting one on a group the
 * manager said failed (started = 0), or when another member's recovery
 * pulled this one in (host_comm_pulled), or after an erroneous call (why,
 * above; HOST_ABORT_NONE for a failure). Every member must call it; the
 * members meet on the hosts (docs/failures.md):
 *   1. with a manager, it asks for the next generation's group first (the
 *      manager then tears the failed group down and tells the members
 *      outside a call, who join at their next call);
 *   2. the members agree on the hosts which operations they are at
 *      (lo..hi, at most one apart with blocking collectives, up to five
 *      with broadcasts that go one-way or ahead of their round);
 *   3. when hi > lo, those at lo take operation lo's result from the
 *      copies kept by those ahead (host_comm_result_done): it goes into
 *      recvbuf (bytes long) and *done_p is 1: the caller returns INCOLL_OK;
 *      when hi > lo + 1, they leave the recovery then and their next call
 *      joins it again, at lo + 1, while the others wait for them there;
 *   4. everyone else (*done_p 0) runs its operation again: on the new
 *      group if every member got it, else on the hosts.
 * Returns INCOLL_OK, or INCOLL_ERR_GROUP_FAILED when the members could not
 * agree within twice INCOLL_MGR_OP_TIMEOUT_MS or disagree: comm is then
 * broken (host_comm_broken) and every later call on it fails at once.
 * A communicator gets at most two new groups; after that it recovers onto
 * the hosts.
 */
incoll_status_t host_comm_recover(incoll_comm_h comm, int started,
                                  void *recvbuf, size_t count,
                                  incoll_dtype_t dtype, incoll_op_t op, int why,
                                  int *done_p);

/* 1 if comm has a fabric group the manager said failed: call
 * host_comm_recover(comm, 0, ...) before the next operation (the other
 * members will fail on it and recover too). */
int host_comm_group_failed(incoll_comm_h comm);

/* 1 (and the reason in *why_p) when a recovery on comm failed: every
 * collective on it must fail with INCOLL_ERR_GROUP_FAILED. */
int host_comm_broken(incoll_comm_h comm, const char **why_p);

/* 1 when a failed in-network operation on comm can be recovered (there is
 * a manager): its operations then write their results into
 * host_comm_result_buf() and copy them out. */
int host_comm_recoverable(incoll_comm_h comm);

/*
 * For recoverable comms: the comm-owned buffer (at least bytes long; NULL
 * without memory) into which the next in-network operation writes its
 * result. There are two, used in turn, so the result of the last completed
 * operation stays intact while the next one runs. After the operation
 * succeeded, the caller copies the result out and calls
 * host_comm_result_done(): that buffer is now the kept result, which
 * members behind may ask for in a recovery.
 */
void *host_comm_result_buf(incoll_comm_h comm, size_t bytes);
void host_comm_result_done(incoll_comm_h comm, size_t count,
                           incoll_dtype_t dtype, incoll_op_t op);

/*
 * A collective as a recovery sees it: what it is (kind is a
 * host_coll_kind_t of host/inc_coll.h; count in elements of dtype for the
 * reductions, in bytes per rank otherwise; root 0 where there is none)
 * and, for a member in the call, its buffers (sendbuf as resolved from
 * INCOLL_IN_PLACE; NULL where the call has none).
 */
typedef struct {
    int kind;
    int root;
    size_t count;
    incoll_dtype_t dtype;
    incoll_op_t op;
    const void *sendbuf;
    void *recvbuf;
} host_rec_call_t;

/*
 * For recoverable comms, after an in-network operation described by call
 * succeeded: its result is the first res_bytes of host_comm_result_buf()
 * (which was asked for at least res_bytes + in_bytes), and in_bytes of
 * input at in are copied behind it, before the caller copies the result
 * out (so an input that the result overwrites in place is kept as it
 * was). What each kind keeps is what a recovery needs to give members
 * behind their result (docs/failures.md): host_comm_keep_sizes().
 */
void host_comm_result_kept(incoll_comm_h comm, const host_rec_call_t *call,
                           size_t res_bytes, const void *in, size_t in_bytes);

/*
 * host_comm_result_buf() for a broadcast of bytes: one of at most the
 * engine's ahead_bytes (one-way, or sent ahead of its round) writes into
 * a buffer of its own, kept by its operation's number, since such
 * broadcasts complete at members while others have not started them and
 * a recovery may need several of them and the last other operation's
 * result (docs/failures.md). After success the caller copies the data
 * (the root into it, the others out) and calls host_comm_bcast_kept().
 */
void *host_comm_bcast_buf(incoll_comm_h comm, size_t bytes);
void host_comm_bcast_kept(incoll_comm_h comm, const host_rec_call_t *call,
                          size_t bytes);

/* The result and input bytes a member keeps for call (comm of size ranks,
 * this one rank). */
void host_comm_keep_sizes(const host_rec_call_t *call, int rank, int size,
                          size_t *res_bytes, size_t *in_bytes);

/*
 * host_comm_recover() for any collective: a member behind (in call,
 * started) gets call's result (or nothing, where its rank has none) from
 * what the members ahead kept, *done_p 1. host_comm_recover(comm, started,
 * recvbuf, bytes, done_p) is this for an allreduce of bytes.
 */
incoll_status_t host_comm_recover_coll(incoll_comm_h comm, int started,
                                       const host_rec_call_t *call, int why,
                                       int *done_p);

/*
 * After an operation on comm ended with status: the reason to recover
 * with (HOST_ABORT_NONE for a failure, a wire_mismatch_t when the
 * members' calls differ, HOST_ABORT_DEADLINE), or -1 when status is
 * returned as it is (success, or a failure without a manager). net: the
 * operation ran in the network (else on the host-based engine).
 */
int host_comm_fail_why(incoll_comm_h comm, incoll_status_t status, int net);

/*
 * This member refused its arguments of a call on comm (said already, with
 * status): unless alone, it still takes part, in a recovery with reason
 * HOST_ABORT_ARG, so that the others' calls of it fail too and every
 * member's next call pairs with the others' next call. Returns status,
 * or INCOLL_ERR_GROUP_FAILED when the members could not agree.
 */
incoll_status_t host_comm_refuse(incoll_comm_h comm, incoll_status_t status);

/* The call this member is in on comm fails on every member, for why
 * (HOST_ABORT_ARG, a wire_mismatch_t, HOST_ABORT_DEADLINE): a recovery
 * with that reason. Returns this member's status of the call. */
incoll_status_t host_comm_abort_call(incoll_comm_h comm, int why);

/* 1 and the manager's random key of comm's group in *key_p when comm
 * has a group from a manager. */
int host_comm_group_key(incoll_comm_h comm, uint64_t *key_p);

/* The job's generation and key changed (host_job_key): comm's engines
 * are made again with them, on every member at the same point. */
incoll_status_t host_comm_rekey(incoll_comm_h comm);

/* 1 when another member of comm started a recovery (its recovery
 * channel's data came) that this one must join: a call in progress gives
 * its operation up, the next call recovers first (host_comm_recover_coll
 * with HOST_ABORT_NONE). */
int host_comm_pulled(incoll_comm_h comm);

/* With the library's threads (INCOLL_PROGRESS_THREAD), a member outside
 * any call on comm takes part in a recovery the others started, so that
 * members that wait for it there are not left waiting for its next call
 * (which may wait for them elsewhere, an MPI collective the library does
 * not run). _wants says that one is due; _serve_idle runs it (the
 * recovery of host_comm_recover_coll without a call: a member ahead gives
 * what it kept; one found behind joins at its next call instead). */
int host_comm_wants_serve(incoll_comm_h comm);
incoll_status_t host_comm_serve_idle(incoll_comm_h comm);

/* The status this member's next call on comm fails with, unrun, after a
 * recovery in which the others are in an erroneous call that this one
 * had not reached (INCOLL_OK: none); taken once. _pending says without
 * taking it. */
incoll_status_t host_comm_doomed(incoll_comm_h comm);
int host_comm_doomed_pending(incoll_comm_h comm);

/* For the context's dispatch: a host-based packet of no communicator's
 * engine; when it is another member's recovery data for a communicator
 * whose recovery channel this process has not made yet, makes it, feeds
 * the packet and marks the communicator pulled. 1 when it took it. */
int host_comm_shadow_dispatch(incoll_ctx_h ctx, const udp_msg_t *m,
                              const wire_hdr_t *h, uint64_t now_ns);
/* After a packet went to comm's engine c->p2p.eng: when c is a recovery
 * channel that is idle and the packet is data of an agreement it has not
 * started (early: held or refused), marks its communicator pulled. */
void host_comm_shadow_fed(incoll_comm_h c, uint64_t early_before);

/*
 * The decision of one member in a recovery, without I/O: the members are
 * at operations lo..hi (agreed), this one at mine, having started it or
 * not, with the kept result of operation saved_op (if has_saved).
 */
typedef enum {
    HOST_REC_REDO,  /* all at one operation: run it again */
    HOST_REC_FETCH, /* behind: take operation lo's result, return it */
    HOST_REC_SERVE, /* ahead: give the kept result of lo, then run again
                       (or, hi > lo + 1, wait for the next round) */
    HOST_REC_FAIL,  /* impossible with blocking collectives: an error */
} host_rec_action_t;

host_rec_action_t host_recovery_action(uint64_t lo, uint64_t hi, uint64_t mine,
                                       int started, int has_saved,
                                       uint64_t saved_op);
const char *host_recovery_action_name(host_rec_action_t act);

/* UDP endpoint of comm's rank, for host-based algorithms: what the
 * manager said, or fabric.conf's, or INCOLL_EP_NONE. */
incoll_ep_t host_comm_peer_ep(incoll_comm_h comm, int rank);

/* The communicator's id (0 for the world) and an id and key for its
 * host-to-host packets, alike on every member and distinct from fabric
 * group ids (high bit set). */
uint64_t host_comm_id(incoll_comm_h comm);
uint32_t host_comm_wire_id(incoll_comm_h comm);
uint64_t host_comm_wire_key(incoll_comm_h comm);

/*
 * Makes a communicator without a fabric group whose n members (world
 * ranks world_ranks, taken over; we are rank me) have the UDP endpoints
 * peers (taken over), and links it to the context. For the world and
 * the leaders' exchange of a fabric whose hosts ranks share without a
 * manager (src/host/rdv.c). Freed by host_comm_destroy_impl or with the
 * context.
 */
incoll_status_t host_comm_bare(incoll_ctx_h ctx, uint64_t id, int n,
                               int *world_ranks, int me, incoll_ep_t *peers,
                               incoll_comm_h *comm_p);

/* Gives comm, the communicator of the world's host leaders without a
 * manager (one member per fabric.conf host, in host order), fabric.conf's
 * world group as fabric host host (src/host/hier.c). */
incoll_status_t host_comm_take_world_group(incoll_comm_h comm, int host);

/* 1 when comm's collectives reach the fabric through its hosts' leaders
 * (its node or socket level is made, src/host/hier.c; the world of ranks
 * that share fabric.conf's hosts without a manager is one): they are
 * offloaded, with no group of its own. */
int host_comm_via_leaders(incoll_comm_h comm);

/* comm's level of hosts' leaders is made: its own group, which no
 * collective of it uses any more, goes back to the manager, so that a
 * failure of its ANs makes no recovery among all its members (the
 * leaders recover on their own communicator and tell their hosts'
 * members). */
void host_comm_leave_group(incoll_comm_h comm);

/* comm's engine on fabric.conf's world group as its host host
 * (src/host/comm.c). */
incoll_status_t host_world_engine(incoll_comm_h comm, int host);

/* Runs comm's engine until its operation completes; returns its status.
 * Returns INCOLL_ERR_GROUP_FAILED as soon as the manager says comm's group
 * failed (the caller rebuilds, src/host/comm.h). */
incoll_status_t host_comm_wait(incoll_comm_h comm);
/* As host_comm_wait, but returns INCOLL_OK as soon as a broadcast's data
 * is in at a non-root (host_engine_data_in, INCOLL_BCAST_AHEAD): the
 * operation then still runs until its round's result, which
 * host_comm_finish_op waits for before the engine's next operation. */
incoll_status_t host_comm_wait_data(incoll_comm_h comm);
/* Runs comm's engine's operation to its end if one is still running (a
 * broadcast that returned with its data): before each new operation of
 * the engine. A failure leaves the engine failed, so that the next
 * operation recovers (docs/failures.md). */
void host_comm_finish_op(incoll_comm_h comm);
/* Runs comm's engine's last operation (host_comm_finish_op) and its
 * background unlock (host_stream_end) to their ends, if pending: before
 * the next lock, and before the group goes. */
incoll_status_t host_comm_settle(incoll_comm_h comm);

/* Frees a communicator that is no longer on its context's list: its
 * host-based engine (after lingering for peers), its fabric engine, what
 * comm.c keeps for it, and comm itself (src/host/comm.c). */
void host_comm_free(incoll_comm_h comm);

/* The selection table the manager handed to the job, NULL none
 * (src/host/comm.c). */
const char *host_ctx_mgr_tune(incoll_ctx_h ctx, const char **source_p);

/* incoll_comm_split, incoll_comm_create and incoll_comm_destroy's
 * implementations, called with the lock held. */
incoll_status_t host_comm_split_impl(incoll_comm_h comm, int color, int key,
                                     incoll_comm_h *newcomm_p);
incoll_status_t host_comm_create_impl(incoll_comm_h comm, int nranks,
                                      const int *ranks,
                                      incoll_comm_h *newcomm_p);
incoll_status_t host_comm_destroy_impl(incoll_comm_h comm);

#endif
