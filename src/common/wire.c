#include "common/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Little-endian stores and loads, independent of the host's byte order. */
static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)v);
    put16(p + 2, (uint16_t)(v >> 16));
}
static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}
static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)get16(p) | ((uint32_t)get16(p + 2) << 16);
}
static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | ((uint64_t)get32(p + 4) << 32);
}

void wire_pack(const wire_hdr_t *hdr, void *buf)
{
    uint8_t *p = buf;
    put32(p + 0, WIRE_MAGIC);
    p[4] = WIRE_VERSION;
    p[5] = hdr->type;
    p[6] = hdr->op;
    p[7] = hdr->dtype;
    put32(p + 8, hdr->group);
    put16(p + 12, hdr->child);
    put16(p + 14, hdr->flags);
    put64(p + 16, hdr->mac);
    put16(p + 24, hdr->slot);
    p[26] = hdr->hops;
    p[WIRE_MACALG_OFF] = hdr->mac_alg;
    put32(p + 28, hdr->epoch);
    put32(p + 32, hdr->count);
    put32(p + 36, hdr->total);
    put64(p + 40, hdr->offset);
    put32(p + 48, (hdr->type == WIRE_CONTRIB || hdr->type == WIRE_RESULT) &&
                          (hdr->flags & WIRE_F_ERROR)
                      ? hdr->why
                      : hdr->root);
    put32(p + 52, hdr->call_hash);
}

const char *wire_lock_why_str(unsigned why)
{
    switch (why) {
    case WIRE_LOCK_OK:
        return "granted";
    case WIRE_LOCK_HELD:
        return "tree held by another group";
    case WIRE_LOCK_QUEUED:
        return "another group has waited longer";
    case WIRE_LOCK_POOL:
        return "streaming pool too small for one slot";
    case WIRE_LOCK_NOPOOL:
        return "an has no streaming pool";
    default:
        return "unknown reason";
    }
}

const char *wire_mismatch_str(unsigned why)
{
    switch (why) {
    case WIRE_MISMATCH_KIND:
        return "different collectives";
    case WIRE_MISMATCH_OP:
        return "different reduction operations";
    case WIRE_MISMATCH_DTYPE:
        return "different datatypes";
    case WIRE_MISMATCH_SIZE:
        return "different sizes";
    case WIRE_MISMATCH_ROOT:
        return "different roots";
    default:
        return "different calls";
    }
}

size_t wire_payload_len(const wire_hdr_t *hdr)
{
    switch (hdr->type) {
    case WIRE_CONTRIB:
    case WIRE_RESULT:
        if (hdr->type == WIRE_CONTRIB && (hdr->flags & WIRE_F_NODATA) &&
            wire_coll_is_split(wire_flags_kind(hdr->flags)))
            return WIRE_PIECE_LEN; /* what it wants, no data */
        if (hdr->flags & WIRE_F_NODATA)
            return 0;
        if (hdr->type == WIRE_CONTRIB &&
            wire_coll_is_gather(wire_flags_kind(hdr->flags)))
            return WIRE_PIECE_LEN + (size_t)hdr->count;
        if (wire_coll_is_split(wire_flags_kind(hdr->flags)))
            return WIRE_PIECE_LEN +
                   (size_t)hdr->count *
                       incoll_dtype_size((incoll_dtype_t)hdr->dtype);
        return (size_t)hdr->count *
               incoll_dtype_size((incoll_dtype_t)hdr->dtype);
    case WIRE_LOCK:
    case WIRE_LOCK_REP:
    case WIRE_UNLOCK:
    case WIRE_UNLOCK_REP:
        return 0; /* count is the window, not a length */
    default:
        return (size_t)hdr->count;
    }
}

static int known_type(uint8_t type)
{
    switch (type) {
    case WIRE_CONTRIB:
    case WIRE_RESULT:
    case WIRE_STATS_REQ:
    case WIRE_STATS_REP:
    case WIRE_P2P_DATA:
    case WIRE_P2P_ACK:
    case WIRE_RDV_HELLO:
    case WIRE_RDV_TABLE:
    case WIRE_LOCK:
    case WIRE_LOCK_REP:
    case WIRE_UNLOCK:
    case WIRE_UNLOCK_REP:
        return 1;
    default:
        return 0;
    }
}

incoll_status_t wire_parse(const void *buf, size_t len, wire_hdr_t *hdr_p,
                           const char **why_p)
{
    const uint8_t *p = buf;
    wire_hdr_t h = {0};
    const char *why = NULL;

    if (len < WIRE_HDR_LEN) {
        why = "truncated header";
        goto bad;
    }
    if (get32(p) != WIRE_MAGIC) {
        why = "bad magic";
        goto bad;
    }
    h.version = p[4];
    if (h.version != WIRE_VERSION) {
        why = "unsupported version";
        goto bad;
    }
    h.type = p[5];
    h.op = p[6];
    h.dtype = p[7];
    h.group = get32(p + 8);
    h.child = get16(p + 12);
    h.flags = get16(p + 14);
    h.mac = get64(p + 16);
    h.slot = get16(p + 24);
    h.hops = p[26];
    h.mac_alg = p[WIRE_MACALG_OFF];
    h.epoch = get32(p + 28);
    h.count = get32(p + 32);
    h.total = get32(p + 36);
    h.offset = get64(p + 40);
    h.root = get32(p + 48);
    h.call_hash = get32(p + 52);
    if ((h.type == WIRE_CONTRIB || h.type == WIRE_RESULT) &&
        (h.flags & WIRE_F_ERROR)) {
        /* A reason, not a root; out of range is a kind mismatch to the
         * AN (call_differs). */
        h.why = (uint16_t)(h.root > 0xffffu ? 0xffffu : h.root);
        h.root = 0;
    }
    if (!known_type(h.type)) {
        why = "unknown packet type";
        goto bad;
    }
    if (h.mac_alg >= WIRE_MAC_ALGS) {
        why = "unknown mac algorithm";
        goto bad;
    }
    if (h.type == WIRE_CONTRIB || h.type == WIRE_RESULT) {
        if (h.dtype >= INCOLL_DTYPE_COUNT) {
            why = "bad dtype";
            goto bad;
        }
        if (h.op >= INCOLL_OP_COUNT) {
            why = "bad op";
            goto bad;
        }
        if (!incoll_op_valid((incoll_op_t)h.op, (incoll_dtype_t)h.dtype)) {
            why = "op not valid for dtype";
            goto bad;
        }
        if (h.count == 0) {
            why = "zero count";
            goto bad;
        }
        if (wire_flags_kind(h.flags) >= WIRE_COLL_COUNT) {
            why = "unknown collective kind";
            goto bad;
        }
        if ((uint64_t)h.count * incoll_dtype_size((incoll_dtype_t)h.dtype) >
            WIRE_MAX_PAYLOAD) {
            why = "count too large";
            goto bad;
        }
    }
    if (wire_is_lock(h.type)) {
        if (h.op >= WIRE_LOCK_WHY_COUNT || h.dtype != 0) {
            why = "bad lock reason";
            goto bad;
        }
        if (h.count == 0 || h.count > 65535) {
            why = "bad lock window";
            goto bad;
        }
    }
    if (wire_payload_len(&h) > WIRE_MAX_PAYLOAD) {
        why = "count too large";
        goto bad;
    }
    if (!(h.flags & WIRE_F_NODATA) &&
        ((h.type == WIRE_CONTRIB &&
          wire_coll_is_gather(wire_flags_kind(h.flags))) ||
         (h.type == WIRE_RESULT &&
          wire_coll_is_split(wire_flags_kind(h.flags))))) {
        /* A piece: its descriptor, then exactly its elements. */
        size_t ds = incoll_dtype_size((incoll_dtype_t)h.dtype);
        uint32_t off, n;
        if (len < WIRE_HDR_LEN + WIRE_PIECE_LEN + ds) {
            why = "piece too short";
            goto bad;
        }
        off = get32(p + WIRE_HDR_LEN);
        n = get32(p + WIRE_HDR_LEN + 4);
        if ((uint64_t)n * ds != len - WIRE_HDR_LEN - WIRE_PIECE_LEN ||
            (uint64_t)off + n > h.count) {
            why = "piece does not fit the segment";
            goto bad;
        }
    } else if (len - WIRE_HDR_LEN != wire_payload_len(&h)) {
        why = "payload length does not match count";
        goto bad;
    }
    if (h.type == WIRE_CONTRIB &&
        wire_coll_is_split(wire_flags_kind(h.flags)) &&
        (uint64_t)get32(p + WIRE_HDR_LEN) + get32(p + WIRE_HDR_LEN + 4) >
            h.count) {
        why = "wanted elements outside the segment";
        goto bad;
    }
    *hdr_p = h;
    return INCOLL_OK;
bad:
    if (why_p)
        *why_p = why;
    return INCOLL_ERR_PROTOCOL;
}

int wire_peek_version(const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (len < 5 || get32(p) != WIRE_MAGIC)
        return -1;
    return p[4];
}

int wire_once(wire_once_t *once, uint64_t key)
{
    for (unsigned i = 0; i < once->n; i++)
        if (once->key[i] == key)
            return 0;
    if (once->n < WIRE_ONCE_MAX) {
        once->key[once->n++] = key;
    } else {
        once->key[once->next] = key;
        once->next = (once->next + 1) % WIRE_ONCE_MAX;
    }
    return 1;
}

const char *wire_coll_name(wire_coll_t kind)
{
    switch (kind) {
    case WIRE_COLL_ALLREDUCE:
        return "allreduce";
    case WIRE_COLL_REDUCE:
        return "reduce";
    case WIRE_COLL_BCAST:
        return "bcast";
    case WIRE_COLL_BARRIER:
        return "barrier";
    case WIRE_COLL_ALLGATHER:
        return "allgather";
    case WIRE_COLL_GATHER:
        return "gather";
    case WIRE_COLL_SCATTER:
        return "scatter";
    case WIRE_COLL_REDUCE_SCATTER:
        return "reduce_scatter";
    default:
        return "unknown";
    }
}

const char *wire_ep_str(incoll_ep_t ep, char *buf, size_t len)
{
    uint32_t ip = (uint32_t)(ep >> 16);
    snprintf(buf, len, "%u.%u.%u.%u:%u", ip >> 24, (ip >> 16) & 255,
             (ip >> 8) & 255, ip & 255, (unsigned)(ep & 0xffff));
    return buf;
}

/* Parses a strict dotted quad of len bytes: four decimal numbers 0..255,
 * each of 1 to 3 digits without a sign, space or leading zero (so "010"
 * can't be read as octal anywhere else). Returns 0 and fills *ip_p, or -1. */
static int parse_ipv4(const char *s, size_t len, uint32_t *ip_p)
{
    uint32_t ip = 0;
    size_t i = 0;

    for (int part = 0; part < 4; part++) {
        unsigned v = 0;
        size_t start;
        if (part > 0) {
            if (i >= len || s[i] != '.')
                return -1;
            i++;
        }
        start = i;
        while (i < len && i - start < 3 && s[i] >= '0' && s[i] <= '9')
            v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
            return -1;
        ip = ip << 8 | v;
    }
    if (i != len)
        return -1;
    *ip_p = ip;
    return 0;
}

incoll_status_t wire_ep_parse(const char *text, incoll_ep_t *ep_p)
{
    const char *colon = strrchr(text, ':'), *p;
    uint32_t ip, port = 0;

    if (colon == NULL || parse_ipv4(text, (size_t)(colon - text), &ip) != 0)
        return INCOLL_ERR_INVALID_ARG;
    /* The port: 1 to 5 decimal digits and nothing else (strtoul would
     * take a sign and leading spaces). */
    for (p = colon + 1; *p >= '0' && *p <= '9' && p - colon <= 5; p++)
        port = port * 10 + (uint32_t)(*p - '0');
    if (p == colon + 1 || *p != '\0' || port == 0 || port > 65535)
        return INCOLL_ERR_INVALID_ARG;
    *ep_p = wire_ep(ip, (uint16_t)port);
    return INCOLL_OK;
}
