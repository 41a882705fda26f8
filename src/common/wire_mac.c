/*
 * SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012), incremental so that a packet's header and payload can be hashed
 * where they lie, and the key derivation. See wire_mac.h.
 */
#include "common/wire_mac.h"

#include <string.h>

#ifdef INCOLL_HAVE_SODIUM
#include <sodium.h>
#endif

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

typedef struct {
    uint64_t v0, v1, v2, v3;
    uint64_t tail; /* bytes not yet in a full word, little-endian */
    size_t ntail;
    size_t len;
} sip_t;

static inline void sipround(sip_t *s)
{
    s->v0 += s->v1;
    s->v1 = ROTL(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = ROTL(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = ROTL(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = ROTL(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = ROTL(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = ROTL(s->v2, 32);
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void compress(sip_t *s, uint64_t m)
{
    s->v3 ^= m;
    sipround(s);
    sipround(s);
    s->v0 ^= m;
}

static void sip_init(sip_t *s, const wire_key_t *key)
{
    s->v0 = key->k0 ^ 0x736f6d6570736575ull;
    s->v1 = key->k1 ^ 0x646f72616e646f6dull;
    s->v2 = key->k0 ^ 0x6c7967656e657261ull;
    s->v3 = key->k1 ^ 0x7465646279746573ull;
    s->tail = 0;
    s->ntail = 0;
    s->len = 0;
}

static void sip_update(sip_t *s, const void *data, size_t n)
{
    const uint8_t *p = data;

    s->len += n;
    while (s->ntail > 0 && n > 0) {
        s->tail |= (uint64_t)*p++ << (8 * s->ntail);
        n--;
        if (++s->ntail == 8) {
            compress(s, s->tail);
            s->tail = 0;
            s->ntail = 0;
        }
    }
    for (; n >= 8; p += 8, n -= 8)
        compress(s, load64(p));
    for (size_t i = 0; i < n; i++)
        s->tail |= (uint64_t)p[i] << (8 * i);
    s->ntail = n;
}

static uint64_t sip_final(sip_t *s)
{
    compress(s, s->tail | ((uint64_t)s->len << 56));
    s->v2 ^= 0xff;
    sipround(s);
    sipround(s);
    sipround(s);
    sipround(s);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t wire_siphash(const wire_key_t *key, const void *p, size_t n)
{
    sip_t s;
    sip_init(&s, key);
    sip_update(&s, p, n);
    return sip_final(&s);
}

/* The mac field: bytes 16..23 of the header (wire.h). */
#define MAC_OFF 16
#define MAC_LEN 8

/* The payload first, then the header without its mac field. */
static void hash_payload(sip_t *s, const wire_key_t *key, const void *payload,
                         size_t len)
{
    sip_init(s, key);
    if (len)
        sip_update(s, payload, len);
}

static uint64_t finish_header(sip_t *s, const uint8_t *hdr)
{
    sip_update(s, hdr, MAC_OFF);
    sip_update(s, hdr + MAC_OFF + MAC_LEN, WIRE_HDR_LEN - MAC_OFF - MAC_LEN);
    return sip_final(s);
}

static uint64_t packet_tag(const wire_key_t *key, const uint8_t *hdr,
                           const void *payload, size_t len)
{
    sip_t s;
    hash_payload(&s, key, payload, len);
    return finish_header(&s, hdr);
}

static void put_tag(uint8_t *hdr, uint64_t t)
{
    for (int i = 0; i < MAC_LEN; i++)
        hdr[MAC_OFF + i] = (uint8_t)(t >> (8 * i));
}

void wire_mac_seal(const wire_key_t *key, uint8_t *hdr, const void *payload,
                   size_t len)
{
    put_tag(hdr, packet_tag(key, hdr, payload, len));
}

void wire_mac_prepare(const wire_key_t *key, const void *payload, size_t len,
                      wire_mac_state_t *st_p)
{
    sip_t s;
    hash_payload(&s, key, payload, len);
    st_p->v[0] = s.v0;
    st_p->v[1] = s.v1;
    st_p->v[2] = s.v2;
    st_p->v[3] = s.v3;
    st_p->tail = s.tail;
    st_p->ntail = s.ntail;
    st_p->len = s.len;
}

void wire_mac_seal_prepared(const wire_mac_state_t *st, uint8_t *hdr)
{
    sip_t s = {st->v[0], st->v[1],  st->v[2], st->v[3],
               st->tail, st->ntail, st->len};
    put_tag(hdr, finish_header(&s, hdr));
}

int wire_mac_check(const wire_key_t *key, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t t, got = 0;

    if (len < WIRE_HDR_LEN)
        return 0;
    t = packet_tag(key, p, p + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
    for (int i = 0; i < MAC_LEN; i++)
        got |= (uint64_t)p[MAC_OFF + i] << (8 * i);
    /* One comparison of the whole word: no early exit on a matching
     * prefix. */
    return (t ^ got) == 0;
}

void wire_key_derive(const uint8_t *secret, wire_key_purpose_t purpose,
                     uint64_t a, uint64_t b, wire_key_t *key_p)
{
    /* label (16 bytes) | purpose | a | b, little-endian */
    uint8_t msg[16 + 1 + 8 + 8];
    static const wire_key_t pub0 = {0x696e636f6c6c2d30ull,
                                    0x7075626c69632d6bull};
    static const wire_key_t pub1 = {0x696e636f6c6c2d31ull,
                                    0x7075626c69632d6bull};

    memcpy(msg, "incoll-wire-key1", 16);
    msg[16] = (uint8_t)purpose;
    for (int i = 0; i < 8; i++) {
        msg[17 + i] = (uint8_t)(a >> (8 * i));
        msg[25 + i] = (uint8_t)(b >> (8 * i));
    }
#ifdef INCOLL_HAVE_SODIUM
    if (secret != NULL) {
        uint8_t out[16];
        crypto_generichash(out, sizeof(out), msg, sizeof(msg), secret,
                           WIRE_SECRET_LEN);
        key_p->k0 = load64(out);
        key_p->k1 = load64(out + 8);
        sodium_memzero(out, sizeof(out));
        return;
    }
#else
    (void)secret;
#endif
    key_p->k0 = wire_siphash(&pub0, msg, sizeof(msg));
    key_p->k1 = wire_siphash(&pub1, msg, sizeof(msg));
}
