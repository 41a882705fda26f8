/*
 * Deterministic mutation fuzzing of every parser, as unit tests: the wire
 * header (wire_parse), endpoints (wire_ep_parse), the control messages
 * (mgr_dec_*) and the control stream's framing and handshake
 * (mgr_stream_next), fabric.conf (fabric_conf_load) and topology files
 * (topo_load). Each test starts from valid inputs made by the project's own
 * encoders and generators, mutates them with a fixed seed (bit flips,
 * boundary values, truncation at every length, garbage, spliced lines and
 * swapped values for the text formats) and checks every answer with the
 * properties of tests/fuzz/fuzz_check.h, which the libFuzzer harnesses of
 * tests/fuzz share for longer runs (docs/fuzzing.md). Under ASan and UBSan
 * this also catches out-of-bounds reads.
 */
#include "test.h"

#include "fuzz/fuzz_check.h"

#include <stdint.h>
#include <time.h>
#include <unistd.h>

/* Inputs per test beyond the systematic ones; a few thousand keep each
 * test well under a second under ASan. */
#define FUZZ_ROUNDS 3000
#define FUZZ_TEXT_ROUNDS 1500

/* ---- mutations ---- */

/* xorshift64*: a fixed seed per test makes every run the same. */
static uint32_t fuzz_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}

static size_t fuzz_below(uint64_t *s, size_t n)
{
    return n ? fuzz_rand(s) % n : 0;
}

static const uint8_t boundary8[] = {0x00, 0xff, 0x7f, 0x80, 0x01};
static const uint32_t boundary32[] = {
    0,          1,          2,          0x7f,     0x80,     0xff,
    0x100,      0x7fff,     0x8000,     0xffff,   0x10000,  0x7fffffff,
    0x80000000, 0xfffffffe, 0xffffffff, 1u << 20, 1u << 18, 65000,
};

/* Replaces buf[at, at + del) with n bytes of ins; returns the new length
 * (unchanged when it would not fit in cap). */
static size_t splice(uint8_t *buf, size_t len, size_t cap, size_t at,
                     size_t del, const void *ins, size_t n)
{
    if (at > len)
        at = len;
    if (del > len - at)
        del = len - at;
    if (len - del + n > cap)
        return len;
    memmove(buf + at + n, buf + at + del, len - at - del);
    if (n)
        memmove(buf + at, ins, n);
    return len - del + n;
}

/* One random byte-level mutation of buf[0..len) in place. */
static size_t mutate_bytes(uint64_t *s, uint8_t *buf, size_t len, size_t cap)
{
    size_t at = fuzz_below(s, len), n;
    uint8_t tmp[64];
    uint32_t v;

    switch (fuzz_rand(s) % 9) {
    case 0:
        if (len)
            buf[at] ^= (uint8_t)(1u << fuzz_below(s, 8));
        return len;
    case 1:
        if (len)
            buf[at] = boundary8[fuzz_below(s, sizeof(boundary8))];
        return len;
    case 2: /* a 16- or 32-bit little-endian field at a boundary */
    case 3:
        n = fuzz_rand(s) % 3 == 0 ? 2 : 4;
        v = boundary32[fuzz_below(s, sizeof(boundary32) / 4)];
        if (fuzz_rand(s) % 4 == 0)
            v = (uint32_t)fuzz_below(s, 300);
        for (size_t i = 0; i < n && at + i < len; i++)
            buf[at + i] = (uint8_t)(v >> (8 * i));
        return len;
    case 4:
        return fuzz_below(s, len + 1);
    case 5:
        n = 1 + fuzz_below(s, 32);
        for (size_t i = 0; i < n; i++)
            tmp[i] = (uint8_t)fuzz_rand(s);
        return splice(buf, len, cap, len, 0, tmp, n);
    case 6:
        return splice(buf, len, cap, at, 1 + fuzz_below(s, 16), NULL, 0);
    case 7:
        n = 1 + fuzz_below(s, sizeof(tmp));
        if (n > len - at)
            n = len - at;
        memcpy(tmp, buf + at, n);
        return splice(buf, len, cap, fuzz_below(s, len + 1), 0, tmp, n);
    default:
        if (len)
            buf[at] = (uint8_t)fuzz_rand(s);
        return len;
    }
}

/* Values that sit on the limits of the text formats' fields. */
static const char *const text_values[] = {
    "0",
    "1",
    "-1",
    "-",
    "+1",
    "010",
    "0x",
    "0x10",
    "08",
    "7",
    "8",
    "16",
    "17",
    "255",
    "256",
    "1023",
    "1024",
    "1025",
    "65000",
    "65001",
    "65535",
    "65536",
    "999999",
    "4294967295",
    "4294967296",
    "16777216",
    "16777217",
    "18446744073709551615",
    "18446744073709551616",
    "",
    "1K",
    "16M",
    "64G",
    "17179869183G",
    "17179869184G",
    "all",
    "none",
    "sum,",
    ",sum",
    "sum,,max",
    "float32,int8",
    "root",
    "l0",
    "l1",
    "s0",
    "e0-0",
    "c0-0",
    "127.0.0.1",
    "127.0.0.1:0",
    "127.0.0.1:65536",
    "127.0.0.1:080",
    "256.0.0.1:1",
    "1.2.3.4:5",
    "0.0.0.0",
    ".",
    "..",
    "#",
    "=",
    "x=y",
    "ns-1",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

/* Finds the n-th (modulo their count) line or token of buf[0..len):
 * tokens are runs without blanks or newlines. Returns 0 when there is
 * none, else sets [*at_p, *at_p + *len_p). */
static int pick_span(uint64_t *s, const uint8_t *buf, size_t len, int token,
                     size_t *at_p, size_t *len_p)
{
    size_t count = 0, want, i = 0;

    for (int pass = 0; pass < 2; pass++) {
        size_t k = 0;
        want = pass ? fuzz_below(s, count) : 0;
        i = 0;
        while (i < len) {
            size_t start;
            if (token) {
                while (i < len && strchr(" \t\n", buf[i]) && buf[i])
                    i++;
                if (i == len)
                    break;
                start = i;
                while (i < len && !(strchr(" \t\n", buf[i]) && buf[i]))
                    i++;
            } else {
                start = i;
                while (i < len && buf[i] != '\n')
                    i++;
                if (i < len)
                    i++;
            }
            if (pass && k == want) {
                *at_p = start;
                *len_p = i - start;
                return 1;
            }
            k++;
        }
        count = k;
        if (count == 0)
            return 0;
    }
    return 0;
}

/* One random line- or token-level mutation of a text format; donor is
 * another valid text whose lines and tokens get spliced in. */
static size_t mutate_text(uint64_t *s, uint8_t *buf, size_t len, size_t cap,
                          const char *donor)
{
    static const char specials[] = " \t\r\n#=:.-,\xff";
    size_t at, n, dat, dn, dlen = strlen(donor);
    const char *v;
    uint8_t c;

    switch (fuzz_rand(s) % 10) {
    case 0: /* delete a line */
        if (pick_span(s, buf, len, 0, &at, &n))
            return splice(buf, len, cap, at, n, NULL, 0);
        return len;
    case 1: /* move or copy a line elsewhere */
    case 2:
        if (pick_span(s, buf, len, 0, &at, &n)) {
            uint8_t line[1100];
            size_t where;
            if (n > sizeof(line))
                return len;
            memcpy(line, buf + at, n);
            if (fuzz_rand(s) % 2)
                len = splice(buf, len, cap, at, n, NULL, 0);
            where = fuzz_below(s, len + 1);
            while (where > 0 && buf[where - 1] != '\n')
                where--;
            return splice(buf, len, cap, where, 0, line, n);
        }
        return len;
    case 3: /* a line of the donor */
        if (pick_span(s, (const uint8_t *)donor, dlen, 0, &dat, &dn)) {
            size_t where = fuzz_below(s, len + 1);
            while (where > 0 && buf[where - 1] != '\n')
                where--;
            return splice(buf, len, cap, where, 0, donor + dat, dn);
        }
        return len;
    case 4: /* a value on a limit */
    case 5:
        if (pick_span(s, buf, len, 1, &at, &n)) {
            uint8_t *eq = memchr(buf + at, '=', n);
            v = text_values[fuzz_below(s, sizeof(text_values) /
                                              sizeof(text_values[0]))];
            if (eq) {
                n -= (size_t)(eq + 1 - (buf + at));
                at = (size_t)(eq + 1 - buf);
            }
            return splice(buf, len, cap, at, n, v, strlen(v));
        }
        return len;
    case 6: /* a token of the donor in place of one of ours */
        if (pick_span(s, buf, len, 1, &at, &n) &&
            pick_span(s, (const uint8_t *)donor, dlen, 1, &dat, &dn))
            return splice(buf, len, cap, at, fuzz_rand(s) % 2 ? n : 0,
                          donor + dat, dn);
        return len;
    case 7: /* a separator or a stray byte */
        c = (uint8_t)specials[fuzz_below(s, sizeof(specials))];
        return splice(buf, len, cap, fuzz_below(s, len + 1),
                      fuzz_rand(s) % 3 == 0, &c, 1);
    case 8: /* drop a token */
        if (pick_span(s, buf, len, 1, &at, &n))
            return splice(buf, len, cap, at, n, NULL, 0);
        return len;
    default:
        return mutate_bytes(s, buf, len, cap);
    }
}

/* Applies 1 to 3 mutations to a copy of seed in buf (size cap). */
static size_t mutate(uint64_t *s, const uint8_t *seed, size_t seed_len,
                     uint8_t *buf, size_t cap, const char *donor)
{
    size_t len = seed_len < cap ? seed_len : cap;
    int rounds = 1 + (int)fuzz_below(s, 3);

    memcpy(buf, seed, len);
    for (int r = 0; r < rounds; r++)
        len = donor ? mutate_text(s, buf, len, cap, donor)
                    : mutate_bytes(s, buf, len, cap);
    return len;
}

/* ---- the wire format ---- */

TEST(fuzz_wire, TEST_UNIT)
{
    uint8_t seed[FUZZ_WIRE_SEEDS][WIRE_HDR_LEN + 64], buf[WIRE_HDR_LEN + 256];
    size_t seed_len[FUZZ_WIRE_SEEDS];
    uint64_t rng = 0x5eed0001;
    wire_hdr_t h;
    const char *why;

    for (int k = 0; k < FUZZ_WIRE_SEEDS; k++) {
        seed_len[k] = fuzz_wire_seed(k, seed[k]);
        CHECK_EQ_INT(wire_parse(seed[k], seed_len[k], &h, NULL), INCOLL_OK);
        /* fuzz_check_wire also rejects every truncation of a seed. */
        why = fuzz_check_wire(seed[k], seed_len[k]);
        CHECK_MSG(why == NULL, "seed %d: %s", k, why);
        /* Every byte of the seed on each boundary value. */
        for (size_t at = 0; at < seed_len[k]; at++) {
            for (size_t b = 0; b < sizeof(boundary8); b++) {
                memcpy(buf, seed[k], seed_len[k]);
                buf[at] = boundary8[b];
                why = fuzz_check_wire(buf, seed_len[k]);
                CHECK_MSG(why == NULL, "seed %d, byte %zu = 0x%02x: %s", k, at,
                          boundary8[b], why);
            }
        }
    }
    for (int i = 0; i < FUZZ_ROUNDS; i++) {
        int k = (int)fuzz_below(&rng, FUZZ_WIRE_SEEDS);
        size_t len = mutate(&rng, seed[k], seed_len[k], buf, sizeof(buf), NULL);
        why = fuzz_check_wire(buf, len);
        CHECK_MSG(why == NULL, "input %d (seed %d, %zu bytes): %s", i, k, len,
                  why);
    }
    return TEST_PASSED;
}

TEST(fuzz_wire_ep, TEST_UNIT)
{
    static const char *const seeds[] = {
        "10.0.0.7:80",   "192.168.100.255:65535", "0.0.0.0:1",
        "1.2.3.4:00080", "127.0.0.1:41000",
    };
    const char *donor = "255.255.255.255:9 0:1 00:000 .:. 1.1.1.1:99999";
    uint64_t rng = 0x5eed0002;
    uint8_t buf[128];
    const char *why;

    for (int i = 0; i < FUZZ_ROUNDS; i++) {
        const char *seed = seeds[fuzz_below(&rng, 5)];
        size_t len = mutate(&rng, (const uint8_t *)seed, strlen(seed), buf,
                            sizeof(buf) - 1, donor);
        buf[len] = '\0';
        why = fuzz_check_ep((const char *)buf);
        CHECK_MSG(why == NULL, "input %d '%s': %s", i, buf, why);
    }
    return TEST_PASSED;
}

/* ---- the control protocol ---- */

TEST(fuzz_mgr_proto, TEST_UNIT)
{
    mgr_wbuf_t seed[FUZZ_MGR_SEEDS] = {{0}};
    static const int decoder_of[FUZZ_MGR_SEEDS] = {0, 1, 2, 3, 4, 4, 5};
    uint8_t buf[1024];
    uint64_t rng = 0x5eed0003;
    unsigned accepted;
    const char *why;

    fuzz_mgr_seeds(seed);
    for (int k = 0; k < FUZZ_MGR_SEEDS; k++) {
        accepted = 0;
        CHECK(!seed[k].oom && seed[k].len < sizeof(buf));
        why = fuzz_check_mgr_msg(seed[k].buf, seed[k].len, &accepted);
        CHECK_MSG(why == NULL, "seed %d: %s", k, why);
        CHECK_MSG(accepted & (1u << decoder_of[k]),
                  "seed %d refused by its decoder", k);
        for (size_t at = 0; at < seed[k].len; at++) {
            for (size_t b = 0; b < sizeof(boundary8); b++) {
                memcpy(buf, seed[k].buf, seed[k].len);
                buf[at] = boundary8[b];
                why = fuzz_check_mgr_msg(buf, seed[k].len, NULL);
                CHECK_MSG(why == NULL, "seed %d, byte %zu = 0x%02x: %s", k, at,
                          boundary8[b], why);
            }
        }
    }
    for (int i = 0; i < FUZZ_ROUNDS; i++) {
        int k = (int)fuzz_below(&rng, FUZZ_MGR_SEEDS);
        size_t len =
            mutate(&rng, seed[k].buf, seed[k].len, buf, sizeof(buf), NULL);
        why = fuzz_check_mgr_msg(buf, len, NULL);
        CHECK_MSG(why == NULL, "input %d (seed %d, %zu bytes): %s", i, k, len,
                  why);
    }
    for (int k = 0; k < FUZZ_MGR_SEEDS; k++)
        mgr_wbuf_free(&seed[k]);
    return TEST_PASSED;
}

/* Moves what from queued into to's receive buffer, and appends it to
 * log. */
static int pipe_stream(mgr_stream_t *from, mgr_stream_t *to, mgr_wbuf_t *log)
{
    size_t n = from->tx_len - from->tx_off;
    uint8_t *nb = realloc(to->rx, to->rx_len + n + 1);

    if (nb == NULL)
        return -1;
    to->rx = nb;
    memcpy(to->rx + to->rx_len, from->tx + from->tx_off, n);
    to->rx_len += n;
    to->rx_cap = to->rx_len + 1;
    mgr_w_bytes(log, from->tx + from->tx_off, n);
    from->tx_off = from->tx_len;
    return 0;
}

/*
 * The control stream: a real handshake between a manager and a host
 * stream in memory records what the host sent (AUTH and two messages);
 * mutations of it, fed to a manager stream that sent the same HELLO,
 * must never let out a frame the host did not send, and truncations must
 * never fail. The host side gets mutations of HELLO and AUTH_OK.
 */
TEST(fuzz_mgr_stream, TEST_UNIT)
{
    uint8_t key[MGR_KEY_LEN], snonce[MGR_NONCE_LEN], buf[2048];
    mgr_stream_t mgr, host;
    mgr_wbuf_t to_mgr = {0}, to_host = {0}, want = {0}, got = {0};
    mgr_wbuf_t seed[FUZZ_MGR_SEEDS] = {{0}};
    uint16_t type;
    const uint8_t *body;
    size_t blen;
    const char *why = NULL;
    uint64_t rng = 0x5eed0004;

    for (int i = 0; i < MGR_KEY_LEN; i++)
        key[i] = (uint8_t)(i * 7 + 1);
    if (mgr_stream_init(&mgr, -1, 1, 0, key) == INCOLL_ERR_UNSUPPORTED)
        return test_skip("built without libsodium");
    CHECK_EQ_INT(mgr_stream_init(&host, -1, 0, MGR_ROLE_HOST, key), INCOLL_OK);
    memcpy(snonce, mgr.snonce, sizeof(snonce));
    fuzz_mgr_seeds(seed);
    CHECK(pipe_stream(&mgr, &host, &to_host) == 0);
    CHECK_EQ_INT(mgr_stream_next(&host, &type, &body, &blen, &why),
                 MGR_NEXT_NONE);
    CHECK(pipe_stream(&host, &mgr, &to_mgr) == 0);
    CHECK_EQ_INT(mgr_stream_next(&mgr, &type, &body, &blen, &why),
                 MGR_NEXT_READY);
    CHECK(pipe_stream(&mgr, &host, &to_host) == 0);
    CHECK_EQ_INT(mgr_stream_next(&host, &type, &body, &blen, &why),
                 MGR_NEXT_READY);
    CHECK_EQ_INT(mgr_stream_send(&host, MGR_JOIN, seed[2].buf, seed[2].len),
                 INCOLL_OK);
    CHECK_EQ_INT(
        mgr_stream_send(&host, MGR_GROUP_REQ, seed[3].buf, seed[3].len),
        INCOLL_OK);
    CHECK(pipe_stream(&host, &mgr, &to_mgr) == 0);
    mgr_stream_close(&mgr);
    mgr_stream_close(&host);
    CHECK(!to_mgr.oom && to_mgr.len < sizeof(buf) / 2);

    /* The recorded stream gives both messages, and every prefix of it a
     * prefix of them without an error. */
    why = fuzz_check_mgr_stream(1, key, snonce, to_mgr.buf, to_mgr.len, &want);
    CHECK_MSG(why == NULL, "recorded stream: %s", why);
    CHECK_EQ_INT(want.len, 2 * 6 + seed[2].len + seed[3].len);
    for (size_t n = 0; n <= to_mgr.len; n++) {
        mgr_stream_t st;
        mgr_next_t r = MGR_NEXT_READY;
        CHECK_EQ_INT(mgr_stream_init(&st, -1, 1, 0, key), INCOLL_OK);
        memcpy(st.snonce, snonce, sizeof(snonce));
        st.rx = malloc(n + 1);
        CHECK(st.rx != NULL);
        memcpy(st.rx, to_mgr.buf, n);
        st.rx_len = n;
        st.rx_cap = n + 1;
        while (r == MGR_NEXT_READY || r == MGR_NEXT_FRAME)
            r = mgr_stream_next(&st, &type, &body, &blen, &why);
        mgr_stream_close(&st);
        CHECK_MSG(r == MGR_NEXT_NONE, "prefix of %zu bytes: %s", n, why);
    }
    for (int i = 0; i < FUZZ_ROUNDS; i++) {
        int to_mgr_side = i % 4 != 0;
        mgr_wbuf_t *src = to_mgr_side ? &to_mgr : &to_host;
        size_t len = mutate(&rng, src->buf, src->len, buf, sizeof(buf), NULL);
        got.len = 0;
        why = fuzz_check_mgr_stream(to_mgr_side, key, snonce, buf, len, &got);
        CHECK_MSG(why == NULL, "input %d: %s", i, why);
        if (to_mgr_side)
            CHECK_MSG(
                got.len <= want.len &&
                    (got.len == 0 || memcmp(got.buf, want.buf, got.len) == 0),
                "input %d: a frame the host did not send came out", i);
        else
            CHECK_MSG(got.len == 0, "input %d: the host accepted a frame", i);
    }
    mgr_wbuf_free(&got);
    mgr_wbuf_free(&want);
    mgr_wbuf_free(&to_mgr);
    mgr_wbuf_free(&to_host);
    for (int k = 0; k < FUZZ_MGR_SEEDS; k++)
        mgr_wbuf_free(&seed[k]);
    return TEST_PASSED;
}

/* ---- the text formats ---- */

/* Writes data[0..len) to path, replacing it. Returns 0 or -1. */
static int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "w");
    size_t n;
    if (f == NULL)
        return -1;
    n = fwrite(data, 1, len, f);
    return fclose(f) == 0 && n == len ? 0 : -1;
}

typedef const char *(*text_check_t)(const char *path, const char *text,
                                    size_t len, const char *scratch);

/*
 * The text-format fuzz loop shared by fabric.conf and topology files:
 * each seed as it is (it must pass), cut at every length, then rounds of
 * random mutations spliced with the other seed. Every input goes to an
 * in-memory file and is checked by check(), which saves what it accepts
 * to a scratch file.
 */
static int fuzz_text_format(const char *what, char *seeds[2],
                            const size_t seed_len[2], text_check_t check,
                            uint64_t rng)
{
    char path[64], scratch[512], kept[512];
    size_t cap = seed_len[0] + seed_len[1] + 4096, len;
    uint8_t *buf = malloc(cap);
    const char *why = NULL;
    int fd = fuzz_memfd_open(path, sizeof(path)), ret = TEST_PASSED;

    /* On tmpfs when there is one: creating and renaming thousands of
     * files on a disk costs more than parsing them. */
    fuzz_scratch_path(scratch, sizeof(scratch), what);
    CHECK(buf != NULL && fd >= 0);
    for (int k = 0; k < 2; k++) {
        CHECK(fuzz_memfd_set(fd, seeds[k], seed_len[k]) == 0);
        why = check(path, seeds[k], seed_len[k], scratch);
        CHECK_MSG(why == NULL, "seed %d: %s", k, why);
        for (len = 0; len < seed_len[k]; len++) {
            CHECK(fuzz_memfd_set(fd, seeds[k], len) == 0);
            why = check(path, seeds[k], len, scratch);
            CHECK_MSG(why == NULL, "seed %d cut at %zu bytes: %s", k, len, why);
        }
    }
    for (int i = 0; i < FUZZ_TEXT_ROUNDS && ret == TEST_PASSED; i++) {
        int k = (int)fuzz_below(&rng, 2);
        len = mutate(&rng, (const uint8_t *)seeds[k], seed_len[k], buf, cap,
                     seeds[1 - k]);
        CHECK(fuzz_memfd_set(fd, buf, len) == 0);
        why = check(path, (const char *)buf, len, scratch);
        if (why) {
            /* Keep the failing input in the test's directory. */
            snprintf(kept, sizeof(kept), "%.400s/%s.failed", test_tmpdir(),
                     what);
            write_file(kept, buf, len);
            fprintf(stderr,
                    "    input %d (seed %d, %zu bytes, kept in %s): %s\n", i, k,
                    len, kept, why);
            ret = TEST_FAILED;
        }
    }
    unlink(scratch);
    close(fd);
    free(buf);
    return ret;
}

TEST(fuzz_fabric_conf, TEST_UNIT)
{
    char path[512], *seeds[2];
    size_t seed_len[2];
    int ret;

    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof(path), "%.400s/seed%d.conf", test_tmpdir(), k);
        CHECK_EQ_INT(fuzz_fabric_seed(k, path), INCOLL_OK);
        seeds[k] = fuzz_read_file(path, &seed_len[k]);
        CHECK(seeds[k] != NULL);
    }
    ret = fuzz_text_format("fabric.conf", seeds, seed_len,
                           fuzz_check_fabric_conf, 0x5eed0005);
    free(seeds[0]);
    free(seeds[1]);
    return ret;
}

TEST(fuzz_topo, TEST_UNIT)
{
    char path[512], *seeds[2];
    size_t seed_len[2];
    int ret;

    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof(path), "%.400s/seed%d.topo", test_tmpdir(), k);
        CHECK_EQ_INT(fuzz_topo_seed(k, path), INCOLL_OK);
        seeds[k] = fuzz_read_file(path, &seed_len[k]);
        CHECK(seeds[k] != NULL);
    }
    ret = fuzz_text_format("topology", seeds, seed_len, fuzz_check_topo,
                           0x5eed0006);
    free(seeds[0]);
    free(seeds[1]);
    return ret;
}

/* ---- bugs the fuzzing found ---- */

/* Seed 0 of fabric.conf as text (NULL on failure), its length and its
 * line count (the number of the line a text appended to it starts). */
static char *fabric_seed_text(size_t *len_p, int *lines_p)
{
    char seed_path[512], *seed;

    snprintf(seed_path, sizeof(seed_path), "%.400s/seed.conf", test_tmpdir());
    if (fuzz_fabric_seed(0, seed_path) != INCOLL_OK)
        return NULL;
    seed = fuzz_read_file(seed_path, len_p);
    *lines_p = 1;
    for (size_t i = 0; seed && i < *len_p; i++)
        *lines_p += seed[i] == '\n';
    return seed;
}

/*
 * fabric.conf lines may have 1023 characters (docs/fabric-conf.md), but
 * the loader's buffer held 1022 and the newline: a 1023-character line
 * was refused as too long.
 */
TEST(fuzz_fabric_conf_line_1023, TEST_UNIT)
{
    char path[64], err[512], *seed, *text;
    size_t seed_len;
    fabric_conf_t conf;
    int fd = fuzz_memfd_open(path, sizeof(path)), lines;

    CHECK(fd >= 0);
    seed = fabric_seed_text(&seed_len, &lines);
    CHECK(seed != NULL);
    text = malloc(seed_len + 1100);
    CHECK(text != NULL);
    for (int chars = 1022; chars <= 1024; chars++) {
        for (int newline = 0; newline < 2; newline++) {
            size_t len = seed_len;
            memcpy(text, seed, seed_len);
            text[len++] = '#';
            memset(text + len, 'x', (size_t)chars - 1);
            len += (size_t)chars - 1;
            if (newline)
                text[len++] = '\n';
            CHECK(fuzz_memfd_set(fd, text, len) == 0);
            if (chars <= 1023) {
                incoll_status_t status =
                    fabric_conf_load(path, &conf, err, sizeof(err));
                CHECK_MSG(status == INCOLL_OK, "%d characters: %s", chars, err);
                fabric_conf_free(&conf);
            } else {
                char want[600];
                CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)),
                             INCOLL_ERR_CONFIG);
                snprintf(want, sizeof(want),
                         "%s:%d: line too long (1024 characters, at most "
                         "1023)",
                         path, lines);
                CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);
            }
        }
    }
    free(text);
    free(seed);
    close(fd);
    return TEST_PASSED;
}

/*
 * fabric.conf cut a line at a NUL byte when the file did not end in a
 * newline (fgets() and strchr()), and took two ANs on one address,
 * though hosts and parents know an AN by its address alone. Both are
 * refused now, with the line, as a topology file refuses them.
 */
TEST(fuzz_fabric_conf_nul_and_shared_addr, TEST_UNIT)
{
    char path[64], err[512], want[600], *seed, *text;
    size_t seed_len;
    fabric_conf_t conf;
    int fd = fuzz_memfd_open(path, sizeof(path)), lines, an = -1;

    CHECK(fd >= 0);
    seed = fabric_seed_text(&seed_len, &lines);
    CHECK(seed != NULL);
    text = malloc(seed_len + 64);
    CHECK(text != NULL);

    /* A NUL byte in a last line without a newline, and in one with. */
    for (int newline = 0; newline < 2; newline++) {
        size_t len = seed_len;
        memcpy(text, seed, seed_len);
        memcpy(text + len, "# a\0b", 6);
        len += 6;
        if (newline)
            text[len++] = '\n';
        CHECK(fuzz_memfd_set(fd, text, len) == 0);
        CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)),
                     INCOLL_ERR_CONFIG);
        snprintf(want, sizeof(want), "%s:%d: NUL byte in the line", path,
                 lines);
        CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);
    }

    /* The second AN given the first's address (the seed writes
     * 127.0.0.1:41000, :41001, ... in AN order). */
    memcpy(text, seed, seed_len);
    text[seed_len] = '\0';
    {
        char *first = strstr(text, "addr=127.0.0.1:41000");
        char *second = strstr(text, "addr=127.0.0.1:41001");
        CHECK(first != NULL && second != NULL);
        memcpy(second, "addr=127.0.0.1:41000", 20);
        for (char *q = text; q < second; q++)
            an += *q == '\n';
    }
    CHECK(fuzz_memfd_set(fd, text, seed_len) == 0);
    CHECK_EQ_INT(fabric_conf_load(path, &conf, err, sizeof(err)),
                 INCOLL_ERR_CONFIG);
    snprintf(want, sizeof(want), "%s:%d: an ", path, an + 2);
    CHECK_MSG(strncmp(err, want, strlen(want)) == 0 &&
                  strstr(err, "addr 127.0.0.1:41000 is also an ") != NULL,
              "'%s'", err);
    free(text);
    free(seed);
    close(fd);
    return TEST_PASSED;
}

/*
 * topo_load() counted the lines before a NUL byte with strlen() in the
 * loop's condition: quadratic unless the compiler hoisted it, 17 s for
 * a 1 MiB file under ASan. No clock here (timings are no pass/fail
 * test): the file is 8 MiB, a few hundredths of a second when linear and
 * about 20 minutes under ASan when quadratic, far past the runner's
 * limit, so the old code fails this test by timing out.
 */
TEST(fuzz_topo_nul_line_linear, TEST_UNIT)
{
    enum { SIZE = 8 << 20, WIDTH = 64 };
    char path[64], err[512], want[600];
    char *text = malloc(SIZE + 2);
    int fd = fuzz_memfd_open(path, sizeof(path));
    topo_t topo;

    CHECK(text != NULL && fd >= 0);
    for (size_t i = 0; i < SIZE; i++)
        text[i] = i % WIDTH == WIDTH - 1 ? '\n' : '#';
    text[SIZE] = '\0';
    text[SIZE + 1] = 'x';
    CHECK(fuzz_memfd_set(fd, text, SIZE + 2) == 0);
    CHECK_EQ_INT(topo_load(path, &topo, err, sizeof(err)), INCOLL_ERR_CONFIG);
    snprintf(want, sizeof(want), "%s:%d: NUL byte in the line", path,
             SIZE / WIDTH + 1);
    CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);
    free(text);
    close(fd);
    return TEST_PASSED;
}
