/*
 * The data path's packet authentication (common/wire_mac.h): SipHash-2-4
 * against its reference vectors and libsodium, sealing and checking
 * (a wrong key, any changed byte of header or payload, a truncation are
 * refused), the key derivation, and forgeries built from everything an
 * on-path attacker sees, against the ANs and hosts of the in-memory
 * network. The same forgery against real daemons is in
 * tests/test_integ_fabric.c (fabric_forged_result).
 */
#include "test.h"

#include "common/wire.h"
#include "common/wire_mac.h"
#include "core/agg_core.h"
#include "core/host_engine.h"
#include "memnet.h"

#include <stdint.h>
#include <string.h>

#ifdef INCOLL_HAVE_SODIUM
#include <sodium.h>
#endif

/* The reference key 00 01 .. 0f. */
static const wire_key_t ref_key = {.k0 = 0x0706050403020100ull,
                                   .k1 = 0x0f0e0d0c0b0a0908ull};

TEST(mac_siphash_vectors, TEST_UNIT)
{
    /* From the SipHash paper's reference implementation (vectors.h):
     * message 00 01 .. (n-1) under key 00 .. 0f. */
    static const struct {
        size_t n;
        uint64_t want;
    } v[] = {
        {0, 0x726fdb47dd0e0e31ull},
        {1, 0x74f839c593dc67fdull},
        {15, 0xa129ca6149be45e5ull},
        {63, 0x958a324ceb064572ull},
    };
    uint8_t msg[256];

    for (size_t i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)i;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        CHECK(wire_siphash(&ref_key, msg, v[i].n) == v[i].want);
#ifdef INCOLL_HAVE_SODIUM
    /* And libsodium's crypto_shorthash (SipHash-2-4) at every length to
     * 256, with a random key: the incremental code's block and tail
     * handling at every alignment. */
    {
        uint8_t k[16], out[8];
        wire_key_t key;
        uint64_t want;
        randombytes_buf(k, sizeof(k));
        randombytes_buf(msg, sizeof(msg));
        memcpy(&key.k0, k, 8); /* little-endian host, as the build */
        memcpy(&key.k1, k + 8, 8);
        for (size_t n = 0; n <= sizeof(msg); n++) {
            crypto_shorthash(out, msg, n, k);
            memcpy(&want, out, 8);
            CHECK(wire_siphash(&key, msg, n) == want);
        }
    }
#endif
    return TEST_PASSED;
}

/* A CONTRIB of count int64 elements with a recognizable payload. */
static size_t make_pkt(uint8_t *buf, uint32_t count)
{
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_CONTRIB,
                    .op = INCOLL_OP_SUM,
                    .dtype = INCOLL_INT64,
                    .group = 77,
                    .child = 3,
                    .slot = 5,
                    .epoch = 9,
                    .count = count,
                    .total = 0x1234,
                    .offset = 40};
    wire_pack(&h, buf);
    for (size_t i = 0; i < (size_t)count * 8; i++)
        buf[WIRE_HDR_LEN + i] = (uint8_t)(i * 13 + 1);
    return WIRE_HDR_LEN + (size_t)count * 8;
}

static uint8_t flat_check_buf[WIRE_HDR_LEN + 8 * 1024];

/* The algorithms this build and CPU can compute, and their names. */
static const wire_mac_alg_t all_algs[] = {WIRE_MAC_SIPHASH, WIRE_MAC_POLY1305,
                                          WIRE_MAC_GMAC};

/* The tag the algorithm's definition gives (docs/wire-format.md, "The
 * mac"), computed from its parts: SipHash over the payload (or 0x01 and
 * its digest), then the header without its tag. */
static uint64_t tag_by_definition(const wire_key_t *key, const uint8_t *buf,
                                  size_t len)
{
    static uint8_t flat[WIRE_HDR_LEN + 8 * 1024 + 17];
    size_t plen = len - WIRE_HDR_LEN, at = 0;
    if (key->alg != WIRE_MAC_SIPHASH && plen >= WIRE_MAC_DIGEST_MIN) {
        flat[at++] = 0x01;
        wire_mac_digest(key, buf + WIRE_HDR_LEN, plen, flat + at);
        at += 16;
    } else {
        memcpy(flat, buf + WIRE_HDR_LEN, plen);
        at = plen;
    }
    memcpy(flat + at, buf, 16);
    memcpy(flat + at + 16, buf + 24, WIRE_HDR_LEN - 24);
    return wire_siphash(key, flat, at + WIRE_HDR_LEN - 8);
}

TEST(mac_seal_check, TEST_UNIT)
{
    static uint8_t buf[WIRE_HDR_LEN + 8 * 1024];
    static const uint32_t counts[] = {1, 2, 3, 31, 32, 33, 1024};

    for (size_t a = 0; a < sizeof(all_algs) / sizeof(all_algs[0]); a++) {
        wire_key_t key, other, other_alg;
        wire_hdr_t h;
        const char *why;
        if (!wire_mac_alg_available(all_algs[a], &why))
            return test_skip("%s", why);
        wire_key_derive(NULL, WIRE_KEY_GROUP, 77, 0x1122334455667788ull, &key);
        wire_key_set_alg(&key, all_algs[a]);
        other = key;
        other.k1 ^= 1;
        wire_key_set_alg(&other, all_algs[a]);
        other_alg = key;
        wire_key_set_alg(&other_alg, all_algs[(a + 1) % 3]);
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            size_t len = make_pkt(buf, counts[c]);
            uint64_t tag = 0;

            CHECK(!wire_mac_check(&key, buf, len)); /* not sealed yet */
            wire_mac_seal(&key, buf, buf + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
            CHECK_EQ_INT(wire_mac_alg_of(buf), all_algs[a]);
            CHECK(wire_mac_check(&key, buf, len));
            CHECK(!wire_mac_check(&other, buf, len));
            CHECK(!wire_mac_check(&other_alg, buf, len));
            for (int i = 0; i < 8; i++)
                tag |= (uint64_t)buf[16 + i] << (8 * i);
            CHECK_MSG(tag == tag_by_definition(&key, buf, len),
                      "%s, %zu bytes: the tag is not the definition's",
                      wire_mac_alg_name(all_algs[a]), len - WIRE_HDR_LEN);
            /* Prepared once, sealed under two headers: the same tags as
             * sealing each. */
            {
                static uint8_t other_hdr[WIRE_HDR_LEN];
                wire_mac_state_t st;
                uint8_t save[8];
                memcpy(save, buf + 16, 8);
                wire_mac_prepare(&key, buf + WIRE_HDR_LEN, len - WIRE_HDR_LEN,
                                 &st);
                memset(buf + 16, 0, 8);
                wire_mac_seal_prepared(&st, buf);
                CHECK(memcmp(save, buf + 16, 8) == 0);
                memcpy(other_hdr, buf, WIRE_HDR_LEN);
                other_hdr[12] ^= 1; /* another child */
                wire_mac_seal_prepared(&st, other_hdr);
                CHECK(memcmp(other_hdr + 16, buf + 16, 8) != 0);
                memcpy(flat_check_buf, other_hdr, WIRE_HDR_LEN);
                memcpy(flat_check_buf + WIRE_HDR_LEN, buf + WIRE_HDR_LEN,
                       len - WIRE_HDR_LEN);
                CHECK(wire_mac_check(&key, flat_check_buf, len));
            }
            CHECK_EQ_INT(wire_parse(buf, len, &h, NULL), INCOLL_OK);
            CHECK(h.mac == tag);
            CHECK_EQ_INT(h.mac_alg, all_algs[a]);
            /* Every bit of the header outside the tag (the algorithm's
             * byte included), every bit of a small payload, and a sample
             * of a large one. */
            for (size_t i = 0; i < len; i += (i >= 256 ? 97 : 1)) {
                if (i >= 16 && i < 24)
                    continue;
                for (int b = 0; b < 8; b++) {
                    buf[i] ^= (uint8_t)(1u << b);
                    CHECK(!wire_mac_check(&key, buf, len));
                    buf[i] ^= (uint8_t)(1u << b);
                }
            }
            /* A changed tag, a truncation, an extension. */
            buf[16] ^= 1;
            CHECK(!wire_mac_check(&key, buf, len));
            buf[16] ^= 1;
            CHECK(!wire_mac_check(&key, buf, len - 1));
            CHECK(!wire_mac_check(&key, buf, WIRE_HDR_LEN - 1));
            CHECK(wire_mac_check(&key, buf, len));
        }
    }
    /* none: a zero tag that is never checked, and only under a key of
     * none (a packet of none is refused by a key of any other). */
    {
        wire_key_t key, none;
        size_t len = make_pkt(buf, 4);
        wire_key_derive(NULL, WIRE_KEY_GROUP, 77, 1, &key);
        none = key;
        wire_key_set_alg(&none, WIRE_MAC_NONE);
        wire_mac_seal(&none, buf, buf + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
        CHECK_EQ_INT(wire_mac_alg_of(buf), WIRE_MAC_NONE);
        for (int i = 16; i < 24; i++)
            CHECK_EQ_INT(buf[i], 0);
        CHECK(wire_mac_check(&none, buf, len));
        buf[WIRE_HDR_LEN] ^= 1;
        CHECK(wire_mac_check(&none, buf, len));
        for (size_t a = 0; a < 3; a++) {
            wire_key_set_alg(&key, all_algs[a]);
            CHECK(!wire_mac_check(&key, buf, len));
        }
    }
    return TEST_PASSED;
}

/* Hex of n bytes into out (2n + 1 chars). */
static void hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

/*
 * The digests against published vectors and, where the build has both
 * libraries, OpenSSL's against libsodium's at every length to 1100 bytes
 * and at 8 KiB (two implementations of one standard function).
 */
TEST(mac_digest_vectors, TEST_UNIT)
{
    /* RFC 8439, 2.5.2: Poly1305 of "Cryptographic Forum Research Group". */
    static const uint8_t poly_key[32] = {
        0x85, 0xd6, 0xbe, 0x78, 0x57, 0x55, 0x6d, 0x33, 0x7f, 0x44, 0x52,
        0xfe, 0x42, 0xd5, 0x06, 0xa8, 0x01, 0x03, 0x80, 0x8a, 0xfb, 0x0d,
        0xb2, 0xfd, 0x4a, 0xbf, 0xf6, 0xaf, 0x41, 0x49, 0xf5, 0x1b};
    static const char poly_msg[] = "Cryptographic Forum Research Group";
    /* McGrew and Viega, the GCM specification, test case 13: AES-256,
     * key and IV all zero, nothing to encrypt or authenticate. */
    static const char *want_poly = "a8061dc1305136c6c22b8baf0c0127a9";
    static const char *want_gmac = "530f8afbc74536b9a963b4f1c4cb738b";
    static uint8_t msg[8192];
    static const char *impls[] = {"openssl", "libsodium"};
    wire_key_t key;
    uint8_t d[16], d2[16];
    char text[33];
    int both = 1;

    memset(&key, 0, sizeof(key));
    for (int i = 0; i < 2; i++) {
        for (int alg = WIRE_MAC_POLY1305; alg <= WIRE_MAC_GMAC; alg++) {
            if (wire_mac_set_impl((wire_mac_alg_t)alg, impls[i]) != 0) {
                both = 0;
                continue;
            }
            key.alg = (uint8_t)alg;
            if (alg == WIRE_MAC_POLY1305) {
                memcpy(key.dk, poly_key, 32);
                wire_mac_digest(&key, poly_msg, strlen(poly_msg), d);
                hex(d, 16, text);
                CHECK_MSG(strcmp(text, want_poly) == 0,
                          "%s poly1305: %s, want %s", impls[i], text,
                          want_poly);
            } else {
                memset(key.dk, 0, 32);
                wire_mac_digest(&key, "", 0, d);
                hex(d, 16, text);
                CHECK_MSG(strcmp(text, want_gmac) == 0, "%s gmac: %s, want %s",
                          impls[i], text, want_gmac);
            }
        }
    }
    if (!both)
        return test_skip("the build lacks OpenSSL's libcrypto or libsodium "
                         "(or the CPU AES): the implementations were not "
                         "compared with each other");
    for (size_t i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)(i * 131 + 7);
    for (int alg = WIRE_MAC_POLY1305; alg <= WIRE_MAC_GMAC; alg++) {
        wire_key_derive(NULL, WIRE_KEY_GROUP, 5, 99, &key);
        wire_key_set_alg(&key, (wire_mac_alg_t)alg);
        for (size_t n = 0; n <= sizeof(msg); n += (n < 1100 ? 1 : 7092)) {
            CHECK(wire_mac_set_impl((wire_mac_alg_t)alg, "openssl") == 0);
            wire_mac_digest(&key, msg, n, d);
            CHECK(wire_mac_set_impl((wire_mac_alg_t)alg, "libsodium") == 0);
            wire_mac_digest(&key, msg, n, d2);
            CHECK_MSG(memcmp(d, d2, 16) == 0,
                      "%s of %zu bytes: openssl and libsodium differ",
                      wire_mac_alg_name((unsigned)alg), n);
        }
    }
    return TEST_PASSED;
}

TEST(mac_key_derive, TEST_UNIT)
{
    uint8_t secret[WIRE_SECRET_LEN], secret2[WIRE_SECRET_LEN];
    wire_key_t k[8];

    for (int i = 0; i < WIRE_SECRET_LEN; i++) {
        secret[i] = (uint8_t)(i * 7 + 3);
        secret2[i] = secret[i];
    }
    secret2[31] ^= 1;
    wire_key_derive(NULL, WIRE_KEY_GROUP, 5, 42, &k[0]);
    wire_key_derive(NULL, WIRE_KEY_GROUP, 5, 42, &k[1]);
    CHECK(k[0].k0 == k[1].k0 && k[0].k1 == k[1].k1); /* deterministic */
    wire_key_derive(NULL, WIRE_KEY_GROUP, 5, 43, &k[2]);
    wire_key_derive(NULL, WIRE_KEY_GROUP, 6, 42, &k[3]);
    wire_key_derive(NULL, WIRE_KEY_P2P, 5, 42, &k[4]);
    wire_key_derive(NULL, WIRE_KEY_ADMIN, 5, 42, &k[5]);
    wire_key_derive(secret, WIRE_KEY_GROUP, 5, 42, &k[6]);
    wire_key_derive(secret2, WIRE_KEY_GROUP, 5, 42, &k[7]);
#ifdef INCOLL_HAVE_SODIUM
    /* With a secret the key depends on it. */
    CHECK(k[6].k0 != k[0].k0 || k[6].k1 != k[0].k1);
    CHECK(k[6].k0 != k[7].k0 || k[6].k1 != k[7].k1);
#endif
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++) {
            if (j == 1 || (i == 0 && j == 6) || (i == 0 && j == 7) ||
                (i == 6 && j == 7))
                continue; /* checked above (or equal without libsodium) */
            CHECK(k[i].k0 != k[j].k0 || k[i].k1 != k[j].k1);
        }
    return TEST_PASSED;
}

/* ---- forgeries on the in-memory network ---- */

#define FG_HOSTS 4
#define FG_MAX_COUNT 64 /* 512 bytes: the digest's side of the mac */
#define FG_KEY 0x5eed5eed12345678ull

/* What the attacker saw: the last RESULT to rank 1 and the last CONTRIB
 * from rank 0, as sent. */
typedef struct {
    incoll_ep_t host1, host0, leaf;
    uint8_t result[WIRE_HDR_LEN + FG_MAX_COUNT * 8];
    size_t result_len;
    uint8_t contrib[WIRE_HDR_LEN + FG_MAX_COUNT * 8];
    size_t contrib_len;
} sniff_t;

static void sniff_tap(void *arg, incoll_ep_t src, incoll_ep_t dst,
                      const uint8_t *pkt, size_t len)
{
    sniff_t *s = arg;
    wire_hdr_t h;
    if (wire_parse(pkt, len, &h, NULL) != INCOLL_OK || len > sizeof(s->result))
        return;
    if (h.type == WIRE_RESULT && dst == s->host1) {
        memcpy(s->result, pkt, len);
        s->result_len = len;
        s->leaf = src;
    } else if (h.type == WIRE_CONTRIB && src == s->host0) {
        memcpy(s->contrib, pkt, len);
        s->contrib_len = len;
    }
}

/*
 * Forges a packet of the next operation from a sniffed one: moves it to
 * the next sequence number (slot, epoch), puts in a payload of the
 * attacker's choosing, and either keeps the sniffed tag (way 0), or seals
 * it under the key v1 would have carried in that field (way 1: anything
 * learned from the wire), or under the group id with the sniffed tag as
 * the group key (way 2); or keeps the sniffed payload but for one byte
 * (way 3: a modified packet).
 */
static void forge(uint8_t *pkt, size_t len, uint32_t slots, uint64_t seq,
                  int way)
{
    wire_hdr_t h;
    wire_key_t k;
    memset(&k, 0, sizeof(k));
    if (wire_parse(pkt, len, &h, NULL) != INCOLL_OK)
        return;
    h.slot = (uint16_t)(seq % slots);
    h.epoch = (uint32_t)(seq / slots);
    wire_pack(&h, pkt); /* keeps the sniffed tag */
    if (way == 3) {
        pkt[len - 1] ^= 0x10;
        return;
    }
    memset(pkt + WIRE_HDR_LEN, 0, len - WIRE_HDR_LEN);
    ((int64_t *)(void *)(pkt + WIRE_HDR_LEN))[0] = 666;
    /* Under the algorithm the sniffed packet names (an attacker would
     * not announce another: that is refused before the tag is looked at,
     * in mac_mismatch). */
    if (way == 1) {
        k.k0 = k.k1 = h.mac;
        wire_key_set_alg(&k, (wire_mac_alg_t)h.mac_alg);
        wire_mac_seal(&k, pkt, pkt + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
    } else if (way == 2) {
        wire_key_derive(NULL, WIRE_KEY_GROUP, h.group, h.mac, &k);
        wire_key_set_alg(&k, (wire_mac_alg_t)h.mac_alg);
        wire_mac_seal(&k, pkt, pkt + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
    }
}

#define FG_WAYS 4

/* Four operations of count int64 under algorithm alg: the attacker
 * watches, then forges operation k+1 from what it saw of operation k in
 * every way and sends them to rank 1 (from its leaf's address) and to
 * the leaf (as rank 0) before the real packets can arrive, and replays
 * what it saw. Returns 0 when every result is right and every forgery
 * and replay was counted where it landed. */
static int forged_run(wire_mac_alg_t alg, int count)
{
    memnet_cfg_t cfg = {.seed = 11, .delay_ns = 20000, .jitter_ns = 1000};
    memnet_tree_t t;
    memnet_group_cfg_t g = {
        .id = 9, .key = FG_KEY, .gen = 0x600d, .slots = 4, .max_payload = 1024};
    static int64_t send[FG_HOSTS][FG_MAX_COUNT], recv[FG_HOSTS][FG_MAX_COUNT];
    const void *sp[FG_HOSTS];
    void *rp[FG_HOSTS];
    static sniff_t sn;
    memnet_t *net;
    uint64_t an_bad = 0, replays = 0;
    int ret = -1;

    setenv("INCOLL_MAC", wire_mac_alg_name(alg), 1);
    if (memnet_tree_radix(&t, FG_HOSTS, 2) != 0 ||
        (net = memnet_create(&cfg)) == NULL)
        return -1;
    if (memnet_add_tree(net, &t, 0) != 0 || memnet_add_group(net, &g) != 0)
        goto out;
    memset(&sn, 0, sizeof(sn));
    sn.host0 = memnet_host_ep(net, 0, 0);
    sn.host1 = memnet_host_ep(net, 0, 1);
    memnet_set_tap(net, sniff_tap, &sn);
    for (int r = 0; r < FG_HOSTS; r++) {
        sp[r] = send[r];
        rp[r] = recv[r];
    }
    for (uint64_t op = 0; op < 4; op++) {
        for (int r = 0; r < FG_HOSTS; r++)
            for (int i = 0; i < count; i++) {
                send[r][i] =
                    (int64_t)(op * 1000 + (uint64_t)r * 10 + (uint64_t)i);
                recv[r][i] = -1;
            }
        memnet_start_allreduce(net, 0, sp, rp, (size_t)count, INCOLL_INT64,
                               INCOLL_OP_SUM);
        if (op > 0) {
            if (sn.result_len == 0 || sn.contrib_len == 0 ||
                wire_mac_alg_of(sn.result) != alg) {
                fprintf(stderr,
                        "    %s: nothing sniffed, or of another "
                        "algorithm\n",
                        wire_mac_alg_name(alg));
                goto out;
            }
            for (int way = 0; way < FG_WAYS; way++) {
                uint8_t res[sizeof(sn.result)], con[sizeof(sn.contrib)];
                memcpy(res, sn.result, sn.result_len);
                memcpy(con, sn.contrib, sn.contrib_len);
                forge(res, sn.result_len, g.slots, op, way);
                forge(con, sn.contrib_len, g.slots, op, way);
                memnet_inject(net, sn.leaf, sn.host1, res, sn.result_len, 1);
                memnet_inject(net, sn.host0, sn.leaf, con, sn.contrib_len, 1);
                an_bad++;
            }
            /* The sniffed packets replayed as they were: stale. */
            memnet_inject(net, sn.leaf, sn.host1, sn.result, sn.result_len, 1);
            replays++;
        }
        if (memnet_run(net, 5000000000ull) != 0) {
            fprintf(stderr, "    %s: operation %d did not finish\n",
                    wire_mac_alg_name(alg), (int)op);
            goto out;
        }
        for (int r = 0; r < FG_HOSTS; r++) {
            if (host_engine_status(memnet_host(net, 0, r)) != INCOLL_OK)
                goto out;
            for (int i = 0; i < count; i++) {
                int64_t want = 0;
                for (int q = 0; q < FG_HOSTS; q++)
                    want +=
                        (int64_t)(op * 1000 + (uint64_t)q * 10 + (uint64_t)i);
                if (recv[r][i] != want) {
                    fprintf(stderr,
                            "    %s op %d rank %d [%d]: got %lld want %lld\n",
                            wire_mac_alg_name(alg), (int)op, r, i,
                            (long long)recv[r][i], (long long)want);
                    goto out;
                }
            }
        }
    }
    /* Every forgery was counted where it landed; the replays were taken
     * for the duplicates they are. */
    {
        const host_engine_counters_t *hc =
            host_engine_counters(memnet_host(net, 0, 1));
        uint64_t bad = 0;
        for (int a = 0; a < t.nans; a++)
            bad += agg_counters(memnet_an(net, a))->bad_mac;
        if (hc->bad_mac != an_bad || bad != an_bad ||
            hc->duplicate_results < replays) {
            fprintf(stderr,
                    "    %s: bad_mac host %llu ans %llu, duplicates %llu: "
                    "want %llu, %llu, at least %llu\n",
                    wire_mac_alg_name(alg), (unsigned long long)hc->bad_mac,
                    (unsigned long long)bad,
                    (unsigned long long)hc->duplicate_results,
                    (unsigned long long)an_bad, (unsigned long long)an_bad,
                    (unsigned long long)replays);
            goto out;
        }
    }
    ret = 0;
out:
    memnet_destroy(net);
    unsetenv("INCOLL_MAC");
    return ret;
}

TEST(mac_forged_result_memnet, TEST_UNIT)
{
    for (size_t a = 0; a < sizeof(all_algs) / sizeof(all_algs[0]); a++) {
        const char *why;
        if (!wire_mac_alg_available(all_algs[a], &why))
            return test_skip("%s", why);
        CHECK(forged_run(all_algs[a], 8) == 0);
        CHECK(forged_run(all_algs[a], FG_MAX_COUNT) == 0);
    }
    return TEST_PASSED;
}
