/*
 * A shared-memory segment for the ranks of one communicator on one host
 * (or socket), the intra-host level of the hierarchy (src/host/hier.c).
 *
 * Life: the leader makes it (host_shm_create, a POSIX shm name with the
 * leader's pid and the communicator's id), the others attach by that name
 * (host_shm_attach), and once all have, the leader removes the name
 * (host_shm_unlink): from then on the segment exists only as long as one
 * of its members maps it, so a process that dies leaves nothing in
 * /dev/shm. Each member holds a robust process-shared mutex of its own
 * for as long as it is attached: the others learn of its death from that
 * mutex (EOWNERDEAD), even while it is a zombie that kill(pid, 0) finds.
 *
 * Synchronisation is by counters that only grow (32-bit, wrapping): a
 * member waits for a counter to reach a value in futex waits of bounded
 * length, checking in between that the member it waits for is alive and
 * that nobody aborted the segment. No spinning unless INCOLL_HIER_SPIN_US
 * asks for some before each wait.
 */
#ifndef INCOLL_HOST_SHM_H
#define INCOLL_HOST_SHM_H

#include "incoll.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Most members of one segment (ranks of a communicator on one host). */
#define HOST_SHM_MAX_LOCAL 256

typedef struct host_shm host_shm_t;

/*
 * Makes the segment named name (O_EXCL) for nlocal members with nbuf
 * pipeline buffers (at least 2) of data slots of slot_bytes, maps it and
 * attaches as member 0. The caller owns the result and frees it with
 * host_shm_detach(); the name stays until host_shm_unlink().
 */
incoll_status_t host_shm_create(const char *name, int nlocal, int nbuf,
                                size_t slot_bytes, host_shm_t **shm_p);

/* Maps the segment name made by the leader and attaches as member idx
 * (1..nlocal-1). */
incoll_status_t host_shm_attach(const char *name, int idx, host_shm_t **shm_p);

/* Removes the segment's name; mappings stay valid. Harmless when gone. */
void host_shm_unlink(const char *name);

/* Detaches (releases our liveness mutex) and unmaps; NULL is a no-op. */
void host_shm_detach(host_shm_t *shm);

/* How long host_shm_wait() polls before it blocks in a futex
 * (INCOLL_HIER_SPIN_US); 0, as made: never polls. */
void host_shm_spin(host_shm_t *shm, uint64_t ns);

/* Data slot of member idx (0 is unused: the leader reduces from its own
 * buffer) and the result slot, for pipeline buffer buf. */
void *host_shm_slot(host_shm_t *shm, int buf, int idx);
void *host_shm_result(host_shm_t *shm, int buf);
/* Pipeline buffers (segments in flight between the members and the
 * leader), as the leader made them. */
int host_shm_nbuf(const host_shm_t *shm);

/* The counters: posted[idx] (segments member idx wrote into its slots),
 * consumed[idx] (results it copied out), done (results the leader
 * published), arrived (segments every member 1..nlocal-1 has posted:
 * the leader waits on it alone, see host_shm_post). */
typedef enum {
    HOST_SHM_POSTED,
    HOST_SHM_CONSUMED,
    HOST_SHM_DONE,
    HOST_SHM_ARRIVED
} host_shm_ctr_t;

/* Sets a counter and wakes its waiters. */
void host_shm_set(host_shm_t *shm, host_shm_ctr_t ctr, int idx, uint32_t v);

/* The value of a counter now. */
uint32_t host_shm_get(host_shm_t *shm, host_shm_ctr_t ctr, int idx);

/* Member idx (1..nlocal-1) has posted its slots of the segments before
 * v: sets posted[idx] to v and raises arrived to the lowest posted
 * counter of the members when that grew (this post completed segments),
 * waking the leader if it sleeps on it. Whoever posts last wakes the
 * leader, once; the others make no system call. Returns 1 when this post
 * raised arrived to v (its poster completed segment v - 1). */
int host_shm_post(host_shm_t *shm, int idx, uint32_t v);

/* HOST_SHM_PACK_BYTES in the segment's header for src/host/hier.c's
 * shared-socket path (the leader's packet of a one-packet allreduce and
 * who sends it); zero when made. host_shm_wake wakes the futex waiters
 * of a 32-bit word in it; host_shm_wait_word waits (counting itself in
 * *sleepers) while *word is v, with host_shm_wait's checks: the abort,
 * member who's liveness (-1: none) and the deadline. */
#define HOST_SHM_PACK_BYTES 512
void *host_shm_pack(host_shm_t *shm);
void host_shm_wake(host_shm_t *shm, _Atomic uint32_t *word);
incoll_status_t host_shm_wait_word(host_shm_t *shm, _Atomic uint32_t *sleepers,
                                   _Atomic uint32_t *word, uint32_t v, int who,
                                   uint64_t deadline_ns);

/*
 * Waits until counter (ctr, idx) reaches v (wrapping compare). Returns
 * INCOLL_OK, or an error: the segment was aborted (the status the
 * aborting member gave), member `owner` of the counter died
 * (INCOLL_ERR_GROUP_FAILED) or deadline_ns (host_now_ns clock) passed
 * (INCOLL_ERR_TIMEOUT). Blocks in futex waits.
 */
incoll_status_t host_shm_wait(host_shm_t *shm, host_shm_ctr_t ctr, int idx,
                              uint32_t v, uint64_t deadline_ns);

/* Marks the segment failed with status (first one wins) and wakes every
 * waiter; later waits return that status. */
void host_shm_abort(host_shm_t *shm, incoll_status_t status);
/* The status the segment was aborted with, or INCOLL_OK. */
incoll_status_t host_shm_aborted(const host_shm_t *shm);

#endif
