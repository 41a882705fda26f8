/*
 * SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012), incremental so that a packet's header and payload can be hashed
 * where they lie; the payload digests of the poly1305 and gmac algorithms
 * from a library (OpenSSL's libcrypto when the build has it, else
 * libsodium); and the key derivation. See wire_mac.h.
 */
#include "common/wire_mac.h"

#include "common/log.h"
#include "common/settings.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef INCOLL_HAVE_SODIUM
#include <sodium.h>
#endif
#ifdef INCOLL_HAVE_OPENSSL
#include <openssl/core_names.h>
#include <openssl/evp.h>
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
    /* Whole words of the input beside a partial one (a tag's header after
     * the 17-byte digest message): one load and a shift per word, not a
     * byte at a time; the same words reach compress(). */
    if (s->ntail > 0 && n >= 8) {
        unsigned sh = 8 * (unsigned)s->ntail;
        for (; n >= 8; p += 8, n -= 8) {
            uint64_t w = load64(p);
            compress(s, s->tail | (w << sh));
            s->tail = w >> (64 - sh);
        }
    }
    while (s->ntail > 0 && n > 0) {
        s->tail |= (uint64_t)*p++ << (8 * s->ntail);
        n--;
        if (++s->ntail == 8) {
            compress(s, s->tail);
            s->tail = 0;
            s->ntail = 0;
        }
    }
    if (s->ntail > 0)
        return; /* n is 0: the partial word waits for more */
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

const char *wire_mac_alg_name(unsigned alg)
{
    switch (alg) {
    case WIRE_MAC_SIPHASH:
        return "siphash";
    case WIRE_MAC_POLY1305:
        return "poly1305";
    case WIRE_MAC_GMAC:
        return "gmac";
    case WIRE_MAC_NONE:
        return "none";
    default:
        return "unknown";
    }
}

/* ---- the digests: one library call per payload ------------------------ */

/*
 * Each thread keeps its own library contexts (made at its first digest,
 * freed when it exits), so that a digest allocates nothing and takes no
 * lock. GMAC's context is keyed: it is set up again only when the key
 * changes, which on an AN serving one group at a time is rarely.
 */
typedef struct {
#ifdef INCOLL_HAVE_OPENSSL
    EVP_MAC_CTX *poly;
    EVP_CIPHER_CTX *gcm;
    uint8_t gcm_key[32];
    int gcm_keyed;
#endif
#ifdef INCOLL_HAVE_SODIUM
    crypto_aead_aes256gcm_state *sgcm;
    uint8_t sgcm_key[32];
    int sgcm_keyed;
#endif
    int unused;
} mac_tls_t;

static pthread_once_t mac_once = PTHREAD_ONCE_INIT;
static pthread_key_t mac_tls_key;
static int mac_tls_ok;
#ifdef INCOLL_HAVE_OPENSSL
static EVP_MAC *ossl_poly;
#endif
/* Per algorithm: 0 none can compute it, 1 OpenSSL, 2 libsodium. */
enum { IMPL_NONE = 0, IMPL_OPENSSL = 1, IMPL_SODIUM = 2 };
static int impl_poly, impl_gmac;
static const uint8_t gcm_iv[12];

static void tls_free(void *arg)
{
    mac_tls_t *t = arg;
    if (t == NULL)
        return;
#ifdef INCOLL_HAVE_OPENSSL
    EVP_MAC_CTX_free(t->poly);
    EVP_CIPHER_CTX_free(t->gcm);
#endif
#ifdef INCOLL_HAVE_SODIUM
    if (t->sgcm) {
        sodium_memzero(t->sgcm, sizeof(*t->sgcm));
        free(t->sgcm);
    }
#endif
    memset(t, 0, sizeof(*t));
    free(t);
}

static void mac_init_once(void)
{
    mac_tls_ok = pthread_key_create(&mac_tls_key, tls_free) == 0;
#ifdef INCOLL_HAVE_SODIUM
    if (sodium_init() >= 0) {
        impl_poly = IMPL_SODIUM;
        if (crypto_aead_aes256gcm_is_available())
            impl_gmac = IMPL_SODIUM;
    }
#endif
#ifdef INCOLL_HAVE_OPENSSL
    ossl_poly = EVP_MAC_fetch(NULL, "POLY1305", NULL);
    if (ossl_poly)
        impl_poly = IMPL_OPENSSL;
    if (EVP_aes_256_gcm() != NULL)
        impl_gmac = IMPL_OPENSSL;
#endif
}

static mac_tls_t *tls_get(void)
{
    mac_tls_t *t;
    pthread_once(&mac_once, mac_init_once);
    if (!mac_tls_ok)
        return NULL;
    t = pthread_getspecific(mac_tls_key);
    if (t == NULL) {
        t = calloc(1, sizeof(*t));
        if (t == NULL || pthread_setspecific(mac_tls_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    return t;
}

int wire_mac_alg_available(wire_mac_alg_t alg, const char **why_p)
{
    const char *why = NULL;
    pthread_once(&mac_once, mac_init_once);
    if (alg == WIRE_MAC_POLY1305 && impl_poly == IMPL_NONE)
        why = "poly1305 needs libsodium or OpenSSL's libcrypto, and this "
              "build has neither";
    else if (alg == WIRE_MAC_GMAC && impl_gmac == IMPL_NONE)
        why = "gmac needs OpenSSL's libcrypto, or libsodium on a CPU with "
              "AES and PCLMUL instructions";
    else if (alg >= WIRE_MAC_COUNT)
        why = "unknown algorithm";
    if (why && why_p)
        *why_p = why;
    return why == NULL;
}

int wire_mac_set_impl(wire_mac_alg_t alg, const char *impl)
{
    int want = strcmp(impl, "openssl") == 0     ? IMPL_OPENSSL
               : strcmp(impl, "libsodium") == 0 ? IMPL_SODIUM
                                                : -1;
    pthread_once(&mac_once, mac_init_once);
    if (want < 0 || (alg != WIRE_MAC_POLY1305 && alg != WIRE_MAC_GMAC))
        return -1;
#ifndef INCOLL_HAVE_OPENSSL
    if (want == IMPL_OPENSSL)
        return -1;
#else
    if (want == IMPL_OPENSSL && alg == WIRE_MAC_POLY1305 && ossl_poly == NULL)
        return -1;
#endif
#ifndef INCOLL_HAVE_SODIUM
    if (want == IMPL_SODIUM)
        return -1;
#else
    if (want == IMPL_SODIUM && alg == WIRE_MAC_GMAC &&
        !crypto_aead_aes256gcm_is_available())
        return -1;
#endif
    if (alg == WIRE_MAC_POLY1305)
        impl_poly = want;
    else
        impl_gmac = want;
    return 0;
}

const char *wire_mac_alg_impl(wire_mac_alg_t alg)
{
    int impl;
    pthread_once(&mac_once, mac_init_once);
    if (alg == WIRE_MAC_POLY1305)
        impl = impl_poly;
    else if (alg == WIRE_MAC_GMAC)
        impl = impl_gmac;
    else
        return "builtin";
    return impl == IMPL_OPENSSL  ? "openssl"
           : impl == IMPL_SODIUM ? "libsodium"
                                 : "unavailable";
}

#ifdef INCOLL_HAVE_OPENSSL
static int ossl_poly1305(mac_tls_t *t, const uint8_t *key, const void *p,
                         size_t n, uint8_t out[16])
{
    size_t outl = 0;
    if (t->poly == NULL && (t->poly = EVP_MAC_CTX_new(ossl_poly)) == NULL)
        return -1;
    if (!EVP_MAC_init(t->poly, key, 32, NULL) ||
        !EVP_MAC_update(t->poly, p, n) ||
        !EVP_MAC_final(t->poly, out, &outl, 16) || outl != 16)
        return -1;
    return 0;
}

static int ossl_gmac(mac_tls_t *t, const uint8_t *key, const void *p, size_t n,
                     uint8_t out[16])
{
    uint8_t none[16];
    int outl;
    if (t->gcm == NULL && (t->gcm = EVP_CIPHER_CTX_new()) == NULL)
        return -1;
    if (!t->gcm_keyed || memcmp(t->gcm_key, key, 32) != 0) {
        t->gcm_keyed = 0;
        if (!EVP_EncryptInit_ex(t->gcm, EVP_aes_256_gcm(), NULL, key, gcm_iv))
            return -1;
        memcpy(t->gcm_key, key, 32);
        t->gcm_keyed = 1;
    } else if (!EVP_EncryptInit_ex(t->gcm, NULL, NULL, NULL, gcm_iv)) {
        return -1;
    }
    /* The associated data goes in pieces of at most INT_MAX bytes; a
     * packet is far below. */
    if (!EVP_EncryptUpdate(t->gcm, NULL, &outl, p, (int)n) ||
        !EVP_EncryptFinal_ex(t->gcm, none, &outl) ||
        !EVP_CIPHER_CTX_ctrl(t->gcm, EVP_CTRL_GCM_GET_TAG, 16, out))
        return -1;
    return 0;
}
#endif

/* The digest; all zero (and logged once) if the library fails, which
 * then fails every check: never a tag made without the key. */
void wire_mac_digest(const wire_key_t *key, const void *p, size_t n,
                     uint8_t out[16])
{
    static int warned;
    mac_tls_t *t = tls_get();
    int impl = key->alg == WIRE_MAC_GMAC ? impl_gmac : impl_poly;
    int rc = -1;

    if (t == NULL)
        goto fail;
#ifdef INCOLL_HAVE_OPENSSL
    if (impl == IMPL_OPENSSL)
        rc = key->alg == WIRE_MAC_GMAC ? ossl_gmac(t, key->dk, p, n, out)
                                       : ossl_poly1305(t, key->dk, p, n, out);
#endif
#ifdef INCOLL_HAVE_SODIUM
    if (impl == IMPL_SODIUM && key->alg == WIRE_MAC_POLY1305) {
        crypto_onetimeauth_poly1305(out, p, n, key->dk);
        rc = 0;
    } else if (impl == IMPL_SODIUM && key->alg == WIRE_MAC_GMAC) {
        unsigned long long maclen = 16;
        if (t->sgcm == NULL) {
            t->sgcm = aligned_alloc(16, (sizeof(*t->sgcm) + 15) & ~(size_t)15);
            t->sgcm_keyed = 0;
        }
        if (t->sgcm != NULL) {
            if (!t->sgcm_keyed || memcmp(t->sgcm_key, key->dk, 32) != 0) {
                crypto_aead_aes256gcm_beforenm(t->sgcm, key->dk);
                memcpy(t->sgcm_key, key->dk, 32);
                t->sgcm_keyed = 1;
            }
            uint8_t none[1];
            rc = crypto_aead_aes256gcm_encrypt_detached_afternm(
                none, out, &maclen, NULL, 0, p, n, NULL, gcm_iv, t->sgcm);
        }
    }
#endif
    (void)impl;
    if (rc == 0)
        return;
fail:
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
        incoll_error("mac: the %s digest failed (%s): packets of at least %d "
                     "bytes will fail their checks",
                     wire_mac_alg_name(key->alg),
                     wire_mac_alg_impl((wire_mac_alg_t)key->alg),
                     WIRE_MAC_DIGEST_MIN);
    }
    memset(out, 0, 16);
}

/* ---- tags --------------------------------------------------------------- */

/* The mac field: bytes 16..23 of the header (wire.h). */
#define MAC_OFF 16
#define MAC_LEN 8

static int uses_digest(const wire_key_t *key, size_t len)
{
    return (key->alg == WIRE_MAC_POLY1305 || key->alg == WIRE_MAC_GMAC) &&
           len >= WIRE_MAC_DIGEST_MIN;
}

/* The payload, or its digest, first; then the header without its mac
 * field. */
static void hash_payload(sip_t *s, const wire_key_t *key, const void *payload,
                         size_t len)
{
    sip_init(s, key);
    if (uses_digest(key, len)) {
        uint8_t d[17];
        d[0] = 0x01;
        wire_mac_digest(key, payload, len, d + 1);
        sip_update(s, d, sizeof(d));
    } else if (len) {
        sip_update(s, payload, len);
    }
}

static uint64_t finish_header(sip_t *s, const uint8_t *hdr)
{
    sip_update(s, hdr, MAC_OFF);
    sip_update(s, hdr + MAC_OFF + MAC_LEN, WIRE_HDR_LEN - MAC_OFF - MAC_LEN);
    return sip_final(s);
}

static void put_tag(uint8_t *hdr, uint64_t t)
{
    for (int i = 0; i < MAC_LEN; i++)
        hdr[MAC_OFF + i] = (uint8_t)(t >> (8 * i));
}

void wire_mac_seal(const wire_key_t *key, uint8_t *hdr, const void *payload,
                   size_t len)
{
    sip_t s;
    hdr[WIRE_MACALG_OFF] = key->alg;
    if (key->alg == WIRE_MAC_NONE) {
        put_tag(hdr, 0);
        return;
    }
    hash_payload(&s, key, payload, len);
    put_tag(hdr, finish_header(&s, hdr));
}

void wire_mac_prepare(const wire_key_t *key, const void *payload, size_t len,
                      wire_mac_state_t *st_p)
{
    sip_t s;
    st_p->alg = key->alg;
    if (key->alg == WIRE_MAC_NONE)
        return;
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
    sip_t s;
    hdr[WIRE_MACALG_OFF] = st->alg;
    if (st->alg == WIRE_MAC_NONE) {
        put_tag(hdr, 0);
        return;
    }
    s = (sip_t){st->v[0], st->v[1],  st->v[2], st->v[3],
                st->tail, st->ntail, st->len};
    put_tag(hdr, finish_header(&s, hdr));
}

int wire_mac_check(const wire_key_t *key, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint64_t t, got = 0;
    sip_t s;

    if (len < WIRE_HDR_LEN || p[WIRE_MACALG_OFF] != key->alg)
        return 0;
    if (key->alg == WIRE_MAC_NONE)
        return 1;
    hash_payload(&s, key, p + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
    t = finish_header(&s, p);
    for (int i = 0; i < MAC_LEN; i++)
        got |= (uint64_t)p[MAC_OFF + i] << (8 * i);
    /* One comparison of the whole word: no early exit on a matching
     * prefix. */
    return (t ^ got) == 0;
}

/* ---- keys --------------------------------------------------------------- */

void wire_key_set_alg(wire_key_t *key, wire_mac_alg_t alg)
{
    /* dk = SipHash-2-4(k, "incoll-mac-dk" || alg || i), i = 0..3: a key of
     * its own for each algorithm, never used as a SipHash key. */
    uint8_t msg[16];
    key->alg = (uint8_t)alg;
    memset(key->dk, 0, sizeof(key->dk));
    if (alg != WIRE_MAC_POLY1305 && alg != WIRE_MAC_GMAC)
        return;
    memcpy(msg, "incoll-mac-dk", 13);
    msg[13] = (uint8_t)alg;
    msg[15] = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t w;
        msg[14] = (uint8_t)i;
        w = wire_siphash(key, msg, sizeof(msg));
        for (int b = 0; b < 8; b++)
            key->dk[8 * i + b] = (uint8_t)(w >> (8 * b));
    }
}

wire_mac_alg_t wire_mac_alg_default(void)
{
    static int reported;
    int alg = setting_enum(SETTING_MAC);
    const char *why = NULL;

    if (alg < 0 || alg >= WIRE_MAC_COUNT)
        alg = WIRE_MAC_SIPHASH;
    if (wire_mac_alg_available((wire_mac_alg_t)alg, &why))
        return (wire_mac_alg_t)alg;
    if (!__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED)) {
        if (setting_in_env(SETTING_MAC))
            incoll_error("mac: INCOLL_MAC=%s: %s; using siphash",
                         wire_mac_alg_name((unsigned)alg), why);
        else
            incoll_info("mac: the default %s is not available (%s); using "
                        "siphash",
                        wire_mac_alg_name((unsigned)alg), why);
    }
    return WIRE_MAC_SIPHASH;
}

void wire_key_derive(const uint8_t *secret, wire_key_purpose_t purpose,
                     uint64_t a, uint64_t b, wire_key_t *key_p)
{
    /* label (16 bytes) | purpose | a | b, little-endian */
    uint8_t msg[16 + 1 + 8 + 8];
    static const wire_key_t pub0 = {.k0 = 0x696e636f6c6c2d30ull,
                                    .k1 = 0x7075626c69632d6bull};
    static const wire_key_t pub1 = {.k0 = 0x696e636f6c6c2d31ull,
                                    .k1 = 0x7075626c69632d6bull};

    memcpy(msg, "incoll-wire-key1", 16);
    msg[16] = (uint8_t)purpose;
    for (int i = 0; i < 8; i++) {
        msg[17 + i] = (uint8_t)(a >> (8 * i));
        msg[25 + i] = (uint8_t)(b >> (8 * i));
    }
    memset(key_p, 0, sizeof(*key_p));
#ifdef INCOLL_HAVE_SODIUM
    if (secret != NULL) {
        uint8_t out[16];
        crypto_generichash(out, sizeof(out), msg, sizeof(msg), secret,
                           WIRE_SECRET_LEN);
        key_p->k0 = load64(out);
        key_p->k1 = load64(out + 8);
        sodium_memzero(out, sizeof(out));
        goto set_alg;
    }
#else
    (void)secret;
#endif
    key_p->k0 = wire_siphash(&pub0, msg, sizeof(msg));
    key_p->k1 = wire_siphash(&pub1, msg, sizeof(msg));
#ifdef INCOLL_HAVE_SODIUM
set_alg:
#endif
    wire_key_set_alg(key_p, purpose == WIRE_KEY_ADMIN ? WIRE_MAC_SIPHASH
                                                      : wire_mac_alg_default());
}
