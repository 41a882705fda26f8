/*
 * Handing datagrams from one thread of incoll-agg to another: the thread
 * whose socket received a datagram is not always the one that owns its
 * slot (agg_shard_of), so it copies the datagram into a ring of the
 * owner's, one ring per (sender, owner) pair, and wakes the owner once per
 * batch. A ring has one producer and one consumer and takes no lock: the
 * producer publishes a record by moving the tail (release), the consumer
 * frees records by moving the head. A full ring drops the datagram
 * (counted by the caller): the sender retransmits, as after any loss.
 */
#ifndef INCOLL_AGG_HANDOFF_H
#define INCOLL_AGG_HANDOFF_H

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

typedef struct agg_ring agg_ring_t;

/* A ring of bytes (rounded up to a power of two, at least 64 KiB + one
 * datagram); NULL when out of memory. */
agg_ring_t *agg_ring_create(size_t bytes);
void agg_ring_destroy(agg_ring_t *ring);

/* Producer: appends one datagram of len bytes from src. 0, or -1 when the
 * ring has no room for it. */
int agg_ring_push(agg_ring_t *ring, incoll_ep_t src, const void *buf,
                  size_t len);

/*
 * Consumer: the datagram at *pos (start with agg_ring_begin's position),
 * or 0 when no more is published; moves *pos past it. The datagrams stay
 * where they are until agg_ring_release(ring, pos) gives back everything
 * before pos.
 */
size_t agg_ring_begin(const agg_ring_t *ring);
int agg_ring_next(const agg_ring_t *ring, size_t *pos, incoll_ep_t *src_p,
                  const uint8_t **buf_p, size_t *len_p);
void agg_ring_release(agg_ring_t *ring, size_t pos);

#endif
