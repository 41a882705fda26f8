/*
 * Single-producer single-consumer rings of datagrams (agg_handoff.h).
 * Positions count bytes from the ring's creation and never wrap in
 * practice (64 bits); a position's place in the buffer is pos & mask.
 * A record is a 16-byte head (the datagram's length and source) and the
 * datagram, padded to 64 bytes, never split across the buffer's end: when
 * it does not fit before the end, a head of length RING_WRAP says "go to
 * the start".
 */
#include "agg/agg_handoff.h"

#include <stdlib.h>
#include <string.h>

#define RING_HEAD 16
#define RING_ALIGN 64
#define RING_WRAP UINT32_MAX
#define RING_MAX_RECORD (RING_HEAD + WIRE_HDR_LEN + WIRE_MAX_PAYLOAD + 64)

struct agg_ring {
    uint8_t *buf;
    size_t size, mask;
    /* Written by the producer only (tail) and by the consumer only
     * (head), read by the other with acquire loads. */
    size_t tail __attribute__((aligned(64)));
    size_t head __attribute__((aligned(64)));
};

agg_ring_t *agg_ring_create(size_t bytes)
{
    agg_ring_t *r = aligned_alloc(64, sizeof(*r));
    size_t size = 1;
    if (r == NULL)
        return NULL;
    if (bytes < (64u << 10) + RING_MAX_RECORD)
        bytes = (64u << 10) + RING_MAX_RECORD;
    while (size < bytes)
        size <<= 1;
    memset(r, 0, sizeof(*r));
    r->buf = aligned_alloc(RING_ALIGN, size);
    if (r->buf == NULL) {
        free(r);
        return NULL;
    }
    r->size = size;
    r->mask = size - 1;
    return r;
}

void agg_ring_destroy(agg_ring_t *r)
{
    if (r == NULL)
        return;
    free(r->buf);
    free(r);
}

static size_t rec_len(size_t len)
{
    return (RING_HEAD + len + RING_ALIGN - 1) & ~(size_t)(RING_ALIGN - 1);
}

static void put_head(uint8_t *p, uint32_t len, incoll_ep_t src)
{
    memcpy(p, &len, 4);
    memcpy(p + 8, &src, 8);
}

int agg_ring_push(agg_ring_t *r, incoll_ep_t src, const void *buf, size_t len)
{
    size_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    size_t tail = r->tail, need = rec_len(len);
    size_t at = tail & r->mask, to_end = r->size - at;

    if (len > WIRE_HDR_LEN + WIRE_MAX_PAYLOAD)
        return -1;
    /* A record that would cross the end starts over at the front, after
     * a wrap mark in what is left (always at least RING_HEAD: records
     * are multiples of RING_ALIGN). */
    if (need > to_end) {
        if (tail + to_end + need - head > r->size)
            return -1;
        put_head(r->buf + at, RING_WRAP, 0);
        tail += to_end;
        at = 0;
    } else if (tail + need - head > r->size) {
        return -1;
    }
    put_head(r->buf + at, (uint32_t)len, src);
    memcpy(r->buf + at + RING_HEAD, buf, len);
    __atomic_store_n(&r->tail, tail + need, __ATOMIC_RELEASE);
    return 0;
}

size_t agg_ring_begin(const agg_ring_t *r)
{
    return r->head;
}

int agg_ring_next(const agg_ring_t *r, size_t *pos, incoll_ep_t *src_p,
                  const uint8_t **buf_p, size_t *len_p)
{
    size_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t len;
        size_t at;
        if (*pos >= tail)
            return 0;
        at = *pos & r->mask;
        memcpy(&len, r->buf + at, 4);
        if (len == RING_WRAP) {
            *pos += r->size - at;
            continue;
        }
        memcpy(src_p, r->buf + at + 8, 8);
        *buf_p = r->buf + at + RING_HEAD;
        *len_p = len;
        *pos += rec_len(len);
        return 1;
    }
}

void agg_ring_release(agg_ring_t *r, size_t pos)
{
    __atomic_store_n(&r->head, pos, __ATOMIC_RELEASE);
}
