/*
 * Streaming locks (src/host/stream.c).
 */
#ifndef INCOLL_HOST_STREAM_H
#define INCOLL_HOST_STREAM_H

#include "host/host.h"

/*
 * Streaming (docs/streaming.md). host_stream_begin locks comm's tree
 * before an in-network operation of bytes when INCOLL_STREAM_THRESHOLD
 * asks for it and the engine holds no lock; a refusal is no error (the
 * operation runs on the slots; INCOLL_LOG_LEVEL=info says why, once per
 * communicator). host_stream_end, after the operation, unlocks when the
 * lock's operations are used up (INCOLL_STREAM_LOCK), in the background
 * (host_engine_unlock_bg; host_stream_begin waits for it before the next
 * lock, host_comm_settle). host_stream_begin
 * returns the engine's error when its round got no answer (the group
 * failed); an unlock without answer leaves the engine failed for the next
 * operation. Every member calls them at the same points, as it calls the
 * operations.
 */
incoll_status_t host_stream_begin(incoll_comm_h comm, size_t bytes);
void host_stream_end(incoll_comm_h comm);
/* 1 when an in-network allreduce of bytes on comm would lock the tree
 * first (host_stream_begin would run a lock round): nonblocking ones then
 * run in the communicator's thread (src/host/req.c). */
int host_stream_would_lock(incoll_comm_h comm, size_t bytes);
/* A lock of comm's own engine for nops operations (0: until unlocked),
 * after the one it holds is let go: what incoll_comm_lock does on a
 * communicator without a hierarchy (service.c: host_comm_lock_impl).
 * *granted_p 1 when granted; a refusal, or no fabric group, is
 * INCOLL_OK with 0 (said once, at info level); a round that failed with
 * the group is refused too when a manager will recover it. */
incoll_status_t host_stream_lock(incoll_comm_h comm, uint16_t nops,
                                 int *granted_p);
/* Lets comm's lock go now, if it holds one (and ends a background
 * unlock), so that when every member returned the tree is free. */
incoll_status_t host_stream_unlock(incoll_comm_h comm);
/*
 * How comm's in-network allreduces choose (a benchmark runs both side by
 * side): 0 (the default) by INCOLL_STREAM_THRESHOLD; 1 every one locks and
 * streams; -1 none does (a lock still held is released first, by the
 * next allreduce). Streaming must be on in the context (a threshold at
 * init) for 1 to lock: otherwise the engine has no stream window and the
 * operations run on the slots. Every member sets the same mode at the
 * same point.
 */
void host_stream_mode(incoll_comm_h comm, int mode);
/* Says at debug level what comm's engine sent and resent, and at info
 * level what it streamed (when it ever locked); called before the engine
 * goes (communicator freed, group rebuilt). */
void host_stream_report(incoll_comm_h comm);
/* Parses INCOLL_STREAM_LOCK's value: "op" (1), "comm" (0) or 1..65535;
 * returns INCOLL_ERR_CONFIG for anything else. */
incoll_status_t host_stream_lock_parse(const char *text, uint16_t *nops_p);

#endif
