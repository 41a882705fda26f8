/*
 * The AN's streaming lock protocol (docs/streaming.md): a group locks the
 * tree for a window of stream slots set aside in every AN's pool, in a
 * lock round that climbs to the root and comes back granted or refused;
 * refused groups queue by ticket; an unlock round gives the pool back;
 * a holder quiet for the idle period loses it. agg_core.c dispatches the
 * four packets here and calls the rest where a group's life touches its
 * lock; nothing here runs per contribution or result.
 */
#ifndef INCOLL_AGG_LOCK_H
#define INCOLL_AGG_LOCK_H

#include "core/agg_internal.h"

/* The four packets of the protocol, from src (the group is known). */
void agg_lock_on_lock(agg_t *agg, group_t *g, incoll_ep_t src,
                      const wire_hdr_t *h);
void agg_lock_on_lock_rep(agg_t *agg, group_t *g, incoll_ep_t src,
                          const wire_hdr_t *h);
void agg_lock_on_unlock(agg_t *agg, group_t *g, incoll_ep_t src,
                        const wire_hdr_t *h);
void agg_lock_on_unlock_rep(agg_t *agg, group_t *g, incoll_ep_t src,
                            const wire_hdr_t *h);

/* A new generation gen takes group g over: the old one's lock and its
 * rounds go. */
void agg_lock_reset(agg_t *agg, group_t *g, uint32_t gen);

/* Gives back g's stream window and, if g has it, the pool. */
void agg_lock_free_window(agg_t *agg, group_t *g);

/* Group g is removed: its window, the pool if it has it, and its place
 * in the queue go. */
void agg_lock_forget(agg_t *agg, group_t *g);

/* A contribution of child c (from src) names a stream slot g does not
 * have: when g's last lock was granted (and is lost here since), drops
 * it and tells the child the lock is gone, returning 1; else 0. */
int agg_lock_stream_lost(agg_t *agg, group_t *g, incoll_ep_t src, int c);

#endif
