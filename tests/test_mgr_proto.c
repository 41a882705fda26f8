/*
 * Unit tests of the manager's control protocol (src/common/mgr_proto.c):
 * message codecs round trip and reject every truncation and random bytes;
 * the handshake over a socketpair succeeds with the same secret and fails
 * with another; a tampered, replayed or oversized frame is rejected; the
 * secret file is checked.
 */
#include "test.h"

#include "common/log.h"
#include "common/mgr_proto.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint32_t rnd32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* Every decoder on p[0..n). */
static int decode_any(const uint8_t *p, size_t n)
{
    mgr_an_register_t reg;
    mgr_group_add_t add;
    mgr_join_t jn;
    mgr_group_req_t rq;
    mgr_group_info_t gi;
    mgr_usage_t us;
    const char *why = NULL;
    int ok = 0;
    if (mgr_dec_an_register(p, n, &reg, &why) == INCOLL_OK) {
        ok |= 1;
        for (uint32_t i = 0; i < reg.ngroups; i++) {
            mgr_an_group_t g;
            mgr_an_group_at(&reg, i, &g);
        }
    }
    ok |= (mgr_dec_group_add(p, n, &add, &why) == INCOLL_OK) << 1;
    ok |= (mgr_dec_join(p, n, &jn, &why) == INCOLL_OK) << 2;
    ok |= (mgr_dec_group_req(p, n, &rq, &why) == INCOLL_OK) << 3;
    ok |= (mgr_dec_group_info(p, n, &gi, &why) == INCOLL_OK) << 4;
    if (mgr_dec_usage(p, n, &us, &why) == INCOLL_OK) {
        ok |= 1 << 5;
        for (uint16_t i = 0; i < us.nentries; i++) {
            mgr_usage_entry_t e;
            mgr_usage_at(&us, i, &e);
        }
    }
    return ok;
}

TEST(mgr_proto_codecs, TEST_UNIT)
{
    mgr_wbuf_t w = {0};
    uint8_t children[3 * 8], members[5 * 4], peers[5 * 8], rec[7] = "record";
    const char *why = NULL;

    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 8; b++)
            children[8 * i + b] =
                (uint8_t)((0x7f00000100010000ull + (uint64_t)i) >> (8 * b));
    for (int i = 0; i < 5; i++) {
        for (int b = 0; b < 4; b++)
            members[4 * i + b] = (uint8_t)((uint32_t)(4 - i) >> (8 * b));
        for (int b = 0; b < 8; b++)
            peers[8 * i + b] =
                (uint8_t)((wire_ep(0x7f000001u, (uint16_t)(5000 + i))) >>
                          (8 * b));
    }

    /* group_add */
    {
        mgr_group_add_t a = {0}, b;
        a.id = 77;
        a.key = 0x1122334455667788ull;
        a.slots = 64;
        a.payload = 8192;
        a.parent = wire_ep(0x7f000001u, 41000);
        a.index_at_parent = 3;
        a.nchildren = 3;
        a.children = children;
        a.rec = rec;
        a.rec_len = sizeof(rec);
        mgr_enc_group_add(&w, &a);
        CHECK(!w.oom);
        CHECK(mgr_dec_group_add(w.buf, w.len, &b, &why) == INCOLL_OK);
        CHECK(b.id == 77 && b.key == a.key && b.slots == 64 &&
              b.payload == 8192 && b.parent == a.parent &&
              b.index_at_parent == 3 && b.nchildren == 3 && b.rec_len == 7);
        CHECK(mgr_get_u64(b.children, 2) == 0x7f00000100010002ull);
        CHECK(memcmp(b.rec, "record", 7) == 0);
        /* Every truncation and one extra byte fail. */
        for (size_t n = 0; n < w.len; n++)
            CHECK(mgr_dec_group_add(w.buf, n, &b, &why) == INCOLL_ERR_PROTOCOL);
        mgr_w_u8(&w, 0);
        CHECK(mgr_dec_group_add(w.buf, w.len, &b, &why) == INCOLL_ERR_PROTOCOL);
        CHECK(strcmp(why, "children or record length") == 0);
        mgr_wbuf_free(&w);
        /* Field checks. */
        a.slots = 0;
        mgr_enc_group_add(&w, &a);
        CHECK(mgr_dec_group_add(w.buf, w.len, &b, &why) == INCOLL_ERR_PROTOCOL);
        CHECK(strcmp(why, "slots") == 0);
        mgr_wbuf_free(&w);
        a.slots = 64;
        a.nchildren = 0;
        mgr_enc_group_add(&w, &a);
        CHECK(mgr_dec_group_add(w.buf, w.len, &b, &why) == INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
    }
    /* join */
    {
        mgr_join_t a = {0}, b;
        snprintf(a.job, sizeof(a.job), "job-7");
        snprintf(a.host, sizeof(a.host), "h3");
        a.rank = 3;
        a.size = 8;
        a.ep = wire_ep(0x7f000001u, 5003);
        a.pid = 1234;
        mgr_enc_join(&w, &a);
        CHECK(mgr_dec_join(w.buf, w.len, &b, &why) == INCOLL_OK);
        CHECK(strcmp(b.job, "job-7") == 0 && strcmp(b.host, "h3") == 0 &&
              b.rank == 3 && b.size == 8 && b.ep == a.ep && b.pid == 1234);
        for (size_t n = 0; n < w.len; n++)
            CHECK(mgr_dec_join(w.buf, n, &b, &why) == INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
        a.rank = 8; /* out of range */
        mgr_enc_join(&w, &a);
        CHECK(mgr_dec_join(w.buf, w.len, &b, &why) == INCOLL_ERR_PROTOCOL);
        CHECK(strcmp(why, "rank or size") == 0);
        mgr_wbuf_free(&w);
        /* A control character in a name. */
        a.rank = 1;
        snprintf(a.job, sizeof(a.job), "bad\njob");
        mgr_enc_join(&w, &a);
        CHECK(mgr_dec_join(w.buf, w.len, &b, &why) == INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
        /* A name too long for the field. */
        mgr_w_u16(&w, 200);
        for (int i = 0; i < 200; i++)
            mgr_w_u8(&w, 'a');
        CHECK(mgr_dec_join(w.buf, w.len, &b, &why) == INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
    }
    /* group_req and group_info */
    {
        mgr_group_req_t a = {0}, b;
        mgr_group_info_t c = {0}, d;
        a.req = 9;
        a.comm = 0xabcdef;
        a.gen = 2;
        a.slots = 16;
        a.opseq = 12345;
        a.nmembers = 5;
        a.members = members;
        mgr_enc_group_req(&w, &a);
        CHECK(mgr_dec_group_req(w.buf, w.len, &b, &why) == INCOLL_OK);
        CHECK(b.req == 9 && b.comm == 0xabcdef && b.gen == 2 && b.slots == 16 &&
              b.opseq == 12345 && b.nmembers == 5);
        CHECK(mgr_get_u32(b.members, 0) == 4 && mgr_get_u32(b.members, 4) == 0);
        for (size_t n = 0; n < w.len; n++)
            CHECK(mgr_dec_group_req(w.buf, n, &b, &why) == INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
        /* A member count the body cannot hold (the count sits at offset
         * 32), and one beyond the limit. */
        mgr_enc_group_req(&w, &a);
        w.buf[32] = 6;
        CHECK(mgr_dec_group_req(w.buf, w.len, &b, &why) == INCOLL_ERR_PROTOCOL);
        w.buf[32] = 0;
        w.buf[35] = 0x40;
        CHECK(mgr_dec_group_req(w.buf, w.len, &b, &why) == INCOLL_ERR_PROTOCOL);
        CHECK(strcmp(why, "member count") == 0);
        mgr_wbuf_free(&w);

        c.req = 9;
        c.comm = 0xabcdef;
        c.status = INCOLL_OK;
        c.group = 300;
        c.key = 42;
        c.child = 1;
        c.an = wire_ep(0x7f000001u, 41001);
        c.slots = 64;
        c.payload = 8192;
        c.ops = 0x3ff;
        c.dtypes = 0xfff;
        c.opseq_min = 3;
        c.opseq_max = 4;
        c.nmembers = 5;
        c.peers = peers;
        mgr_enc_group_info(&w, &c);
        CHECK(mgr_dec_group_info(w.buf, w.len, &d, &why) == INCOLL_OK);
        CHECK(d.group == 300 && d.key == 42 && d.child == 1 && d.an == c.an &&
              d.opseq_min == 3 && d.opseq_max == 4 && d.nmembers == 5);
        CHECK(mgr_get_u64(d.peers, 4) == wire_ep(0x7f000001u, 5004));
        for (size_t n = 0; n < w.len; n++)
            CHECK(mgr_dec_group_info(w.buf, n, &d, &why) ==
                  INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
        /* A success without a group, a min above the max. */
        c.group = 0;
        mgr_enc_group_info(&w, &c);
        CHECK(mgr_dec_group_info(w.buf, w.len, &d, &why) ==
              INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
        c.group = 300;
        c.opseq_min = 5;
        mgr_enc_group_info(&w, &c);
        CHECK(mgr_dec_group_info(w.buf, w.len, &d, &why) ==
              INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
    }
    /* group_shape: round trip, truncations, bad values, another format */
    {
        mgr_group_shape_t a = {MGR_SHAPE_FORMAT, 9, 4, 2, 4, 2}, b;
        mgr_enc_group_shape(&w, &a);
        CHECK(mgr_dec_group_shape(w.buf, w.len, &b, &why) == INCOLL_OK);
        CHECK(b.req == 9 && b.hosts == 4 && b.ppn == 2 && b.radix == 4 &&
              b.levels == 2);
        for (size_t n = 0; n < w.len; n++)
            CHECK(mgr_dec_group_shape(w.buf, n, &b, &why) ==
                  INCOLL_ERR_PROTOCOL);
        w.buf[0] = 2; /* format 2 */
        CHECK(mgr_dec_group_shape(w.buf, w.len, &b, &why) ==
              INCOLL_ERR_UNSUPPORTED);
        mgr_wbuf_free(&w);
        a.ppn = 0; /* hosts without ppn */
        mgr_enc_group_shape(&w, &a);
        CHECK(mgr_dec_group_shape(w.buf, w.len, &b, &why) ==
              INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
    }
    /* an_register with two groups */
    {
        mgr_an_register_t a = {0}, b;
        mgr_wbuf_t gw = {0};
        mgr_an_group_t g1 = {300, 1, rec, 7}, g2 = {301, 2, rec, 0}, g;
        snprintf(a.name, sizeof(a.name), "s0");
        a.ep = wire_ep(0x7f000001u, 41000);
        a.caps = (mgr_caps_t){0x3ff, 0xfff, 8192, 1024, 64, 1 << 28};
        mgr_enc_an_group(&gw, &g1);
        mgr_enc_an_group(&gw, &g2);
        a.ngroups = 2;
        a.groups = gw.buf;
        a.groups_len = gw.len;
        mgr_enc_an_register(&w, &a);
        CHECK(mgr_dec_an_register(w.buf, w.len, &b, &why) == INCOLL_OK);
        CHECK(strcmp(b.name, "s0") == 0 && b.ngroups == 2 &&
              b.caps.slots == 1024 && b.caps.buffer_bytes == 1 << 28);
        mgr_an_group_at(&b, 1, &g);
        CHECK(g.id == 301 && g.key == 2 && g.rec_len == 0);
        mgr_an_group_at(&b, 0, &g);
        CHECK(g.id == 300 && g.rec_len == 7 && memcmp(g.rec, rec, 7) == 0);
        for (size_t n = 0; n < w.len; n++)
            CHECK(mgr_dec_an_register(w.buf, n, &b, &why) ==
                  INCOLL_ERR_PROTOCOL);
        mgr_wbuf_free(&w);
        mgr_wbuf_free(&gw);
    }
    /* Random bytes never crash a decoder, and rarely pass. */
    {
        uint8_t buf[512];
        int passed = 0;
        for (int iter = 0; iter < 20000; iter++) {
            size_t n = rnd32() % sizeof(buf);
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)rnd32();
            passed += decode_any(buf, n) != 0;
        }
        CHECK(passed < 100);
    }
    return TEST_PASSED;
}

/* Runs both ends of a handshake over a socketpair until both are ready or
 * one fails. Returns 0 when both are ready. */
static int handshake(mgr_stream_t *c, mgr_stream_t *s, const char **why_p)
{
    int ready_c = 0, ready_s = 0;
    for (int round = 0; round < 20 && !(ready_c && ready_s); round++) {
        mgr_stream_t *st[2] = {s, c};
        for (int k = 0; k < 2; k++) {
            uint16_t type;
            const uint8_t *body;
            size_t len;
            mgr_next_t r;
            mgr_stream_flush(st[k]);
            if (mgr_stream_read(st[k], why_p) != 0)
                return -1;
            while ((r = mgr_stream_next(st[k], &type, &body, &len, why_p)) !=
                   MGR_NEXT_NONE) {
                if (r == MGR_NEXT_ERROR) {
                    mgr_stream_flush(st[k]);
                    return -1;
                }
                if (r == MGR_NEXT_READY) {
                    if (k == 0)
                        ready_s = 1;
                    else
                        ready_c = 1;
                }
            }
            mgr_stream_flush(st[k]);
        }
    }
    return ready_c && ready_s ? 0 : -1;
}

static int pair(int fds[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0)
        return -1;
    return 0;
}

TEST(mgr_proto_handshake, TEST_UNIT)
{
#ifndef INCOLL_HAVE_SODIUM
    return test_skip("built without libsodium");
#else
    uint8_t key[MGR_KEY_LEN], other[MGR_KEY_LEN];
    mgr_stream_t c, s;
    const char *why = NULL;
    int fds[2];

    memset(key, 7, sizeof(key));
    memset(other, 8, sizeof(other));

    /* Same secret: both ready, the role known, frames pass both ways. */
    CHECK(pair(fds) == 0);
    CHECK(mgr_stream_init(&s, fds[0], 1, 0, key) == INCOLL_OK);
    CHECK(mgr_stream_init(&c, fds[1], 0, MGR_ROLE_HOST, key) == INCOLL_OK);
    CHECK_MSG(handshake(&c, &s, &why) == 0, "%s", why ? why : "");
    CHECK_EQ_INT(s.role, MGR_ROLE_HOST);
    {
        uint16_t type;
        const uint8_t *body;
        size_t len;
        uint8_t saved[256];
        size_t saved_len;
        CHECK(mgr_stream_send(&c, MGR_STAT_REQ, "abcd", 4) == INCOLL_OK);
        CHECK(mgr_stream_flush(&c) == 0);
        CHECK(mgr_stream_read(&s, &why) == 0);
        /* Keep a copy of the frame to replay it. */
        saved_len = s.rx_len - s.rx_off;
        CHECK(saved_len < sizeof(saved));
        memcpy(saved, s.rx + s.rx_off, saved_len);
        CHECK(mgr_stream_next(&s, &type, &body, &len, &why) == MGR_NEXT_FRAME);
        CHECK(type == MGR_STAT_REQ && len == 4 && memcmp(body, "abcd", 4) == 0);
        CHECK(mgr_stream_send(&s, MGR_STAT_REP, "ok", 2) == INCOLL_OK);
        CHECK(mgr_stream_flush(&s) == 0);
        CHECK(mgr_stream_read(&c, &why) == 0);
        CHECK(mgr_stream_next(&c, &type, &body, &len, &why) == MGR_NEXT_FRAME);
        CHECK(type == MGR_STAT_REP && len == 2);
        /* A replayed frame fails its mac (the sequence moved on). */
        CHECK(write(fds[1], saved, saved_len) == (ssize_t)saved_len);
        CHECK(mgr_stream_read(&s, &why) == 0);
        CHECK(mgr_stream_next(&s, &type, &body, &len, &why) == MGR_NEXT_ERROR);
        CHECK(strcmp(why, "bad frame mac") == 0);
    }
    mgr_stream_close(&c);
    mgr_stream_close(&s);

    /* A tampered frame fails its mac. */
    CHECK(pair(fds) == 0);
    CHECK(mgr_stream_init(&s, fds[0], 1, 0, key) == INCOLL_OK);
    CHECK(mgr_stream_init(&c, fds[1], 0, MGR_ROLE_AN, key) == INCOLL_OK);
    CHECK(handshake(&c, &s, &why) == 0);
    {
        uint16_t type;
        const uint8_t *body;
        size_t len;
        CHECK(mgr_stream_send(&c, MGR_STAT_REQ, "abcd", 4) == INCOLL_OK);
        c.tx[c.tx_len - MGR_MAC_LEN - 1] ^= 1; /* a body byte */
        CHECK(mgr_stream_flush(&c) == 0);
        CHECK(mgr_stream_read(&s, &why) == 0);
        CHECK(mgr_stream_next(&s, &type, &body, &len, &why) == MGR_NEXT_ERROR);
        CHECK(strcmp(why, "bad frame mac") == 0);
    }
    mgr_stream_close(&c);
    mgr_stream_close(&s);

    /* Another secret: the manager refuses, the client hears it. */
    CHECK(pair(fds) == 0);
    CHECK(mgr_stream_init(&s, fds[0], 1, 0, key) == INCOLL_OK);
    CHECK(mgr_stream_init(&c, fds[1], 0, MGR_ROLE_HOST, other) == INCOLL_OK);
    CHECK(handshake(&c, &s, &why) != 0);
    CHECK_MSG(strstr(why, "proof") != NULL, "%s", why);
    {
        /* The client then reads the refusal. */
        uint16_t type;
        const uint8_t *body;
        size_t len;
        const char *cwhy = NULL;
        mgr_stream_read(&c, &cwhy);
        CHECK(mgr_stream_next(&c, &type, &body, &len, &cwhy) == MGR_NEXT_ERROR);
        CHECK_MSG(strstr(cwhy, "refused") != NULL, "%s", cwhy);
    }
    mgr_stream_close(&c);
    mgr_stream_close(&s);

    /* Garbage and oversized frames before and after the handshake. */
    CHECK(pair(fds) == 0);
    CHECK(mgr_stream_init(&s, fds[0], 1, 0, key) == INCOLL_OK);
    {
        uint8_t junk[8] = {0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4};
        uint16_t type;
        const uint8_t *body;
        size_t len;
        CHECK(write(fds[1], junk, sizeof(junk)) == (ssize_t)sizeof(junk));
        CHECK(mgr_stream_read(&s, &why) == 0);
        CHECK(mgr_stream_next(&s, &type, &body, &len, &why) == MGR_NEXT_ERROR);
        CHECK_MSG(strstr(why, "over the limit of 256 during the handshake"),
                  "%s", why);
    }
    close(fds[1]);
    mgr_stream_close(&s);
    CHECK(pair(fds) == 0);
    CHECK(mgr_stream_init(&s, fds[0], 1, 0, key) == INCOLL_OK);
    {
        /* A well-framed message that is not AUTH. */
        uint8_t f[10] = {6, 0, 0, 0, MGR_JOIN, 0, 1, 2, 3, 4};
        uint16_t type;
        const uint8_t *body;
        size_t len;
        CHECK(write(fds[1], f, sizeof(f)) == (ssize_t)sizeof(f));
        CHECK(mgr_stream_read(&s, &why) == 0);
        CHECK(mgr_stream_next(&s, &type, &body, &len, &why) == MGR_NEXT_ERROR);
        CHECK(strcmp(why, "expected auth") == 0);
    }
    close(fds[1]);
    mgr_stream_close(&s);
    return TEST_PASSED;
#endif
}

TEST(mgr_proto_secret, TEST_UNIT)
{
#ifndef INCOLL_HAVE_SODIUM
    return test_skip("built without libsodium");
#else
    char path[4200], err[256];
    uint8_t k1[MGR_KEY_LEN], k2[MGR_KEY_LEN];
    struct stat sb;
    FILE *f;

    snprintf(path, sizeof(path), "%s/secret", test_tmpdir());
    CHECK(mgr_secret_generate(path) == INCOLL_OK);
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    log_level_current = -1; /* the refusals below are expected */
    CHECK(mgr_secret_generate(path) == INCOLL_ERR_IO); /* never overwrites */
    CHECK(mgr_secret_load(path, k1, err, sizeof(err)) == INCOLL_OK);
    CHECK(mgr_secret_load(path, k2, err, sizeof(err)) == INCOLL_OK);
    CHECK(memcmp(k1, k2, sizeof(k1)) == 0);
    /* A trailing newline does not change the key. */
    {
        char text[128];
        size_t n;
        f = fopen(path, "r");
        CHECK(f != NULL);
        n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        snprintf(path, sizeof(path), "%s/secret2", test_tmpdir());
        f = fopen(path, "w");
        CHECK(f != NULL);
        fprintf(f, "%.64s\n\n", text);
        fclose(f);
        chmod(path, 0600);
        CHECK(mgr_secret_load(path, k2, err, sizeof(err)) == INCOLL_OK);
        CHECK(memcmp(k1, k2, sizeof(k1)) == 0);
    }
    /* Too short, missing, not set. */
    snprintf(path, sizeof(path), "%s/short", test_tmpdir());
    f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "short\n");
    fclose(f);
    CHECK(mgr_secret_load(path, k2, err, sizeof(err)) == INCOLL_ERR_AUTH);
    CHECK(strstr(err, "shorter than 16 bytes") != NULL);
    CHECK(mgr_secret_load("/nonexistent/x", k2, err, sizeof(err)) ==
          INCOLL_ERR_CONFIG);
    CHECK(strstr(err, "cannot open") != NULL);
    CHECK(mgr_secret_load(NULL, k2, err, sizeof(err)) == INCOLL_ERR_CONFIG);
    CHECK(strstr(err, "INCOLL_SECRET_FILE") != NULL);
    return TEST_PASSED;
#endif
}

/* A process's counters: a round trip, then a later version, another
 * count, a value too large and trailing bytes refused, each named. */
TEST(mgr_proto_usage_proc, TEST_UNIT)
{
    uint64_t v[MGR_PC_COUNT], got[MGR_PC_COUNT];
    mgr_wbuf_t w = {0};
    const char *why = NULL;

    for (int k = 0; k < MGR_PC_COUNT; k++)
        v[k] = 1000 + (uint64_t)k;
    mgr_enc_usage_proc(&w, v);
    CHECK_EQ_INT(w.len, 2 + 8 * MGR_PC_COUNT);
    CHECK(mgr_dec_usage_proc(w.buf, w.len, got, &why) == INCOLL_OK);
    CHECK(memcmp(got, v, sizeof(v)) == 0);
    for (size_t n = 0; n < w.len; n++)
        CHECK(mgr_dec_usage_proc(w.buf, n, got, &why) == INCOLL_ERR_PROTOCOL);
    w.buf[0] = MGR_PC_VERSION + 1;
    CHECK(mgr_dec_usage_proc(w.buf, w.len, got, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strstr(why, "version") != NULL, "%s", why);
    w.buf[0] = MGR_PC_VERSION;
    w.buf[1] = MGR_PC_COUNT - 1;
    CHECK(mgr_dec_usage_proc(w.buf, w.len - 8, got, &why) ==
          INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strcmp(why, "counter count") == 0, "%s", why);
    w.buf[1] = MGR_PC_COUNT;
    mgr_w_u8(&w, 0);
    CHECK(mgr_dec_usage_proc(w.buf, w.len, got, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strcmp(why, "length") == 0, "%s", why);
    mgr_wbuf_free(&w);
    v[MGR_PC_RX] = MGR_USAGE_MAX_COUNT + 1;
    mgr_enc_usage_proc(&w, v);
    CHECK(mgr_dec_usage_proc(w.buf, w.len, got, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strcmp(why, "counter value") == 0, "%s", why);
    mgr_wbuf_free(&w);
    CHECK(strcmp(mgr_msg_name(MGR_USAGE_PROC), "usage_proc") == 0);
    CHECK(strcmp(mgr_pc_name(MGR_PC_MC_RESULTS), "mcast_results") == 0);
    CHECK(strcmp(mgr_pc_metric(MGR_PC_OPS), "incoll_job_rank_operations") == 0);
    CHECK(strcmp(mgr_pc_name(MGR_PC_COUNT), "unknown") == 0);
    return TEST_PASSED;
}

/* The usage report: a round trip of two entries, then every field that
 * must be refused, each named. */
TEST(mgr_proto_usage, TEST_UNIT)
{
    mgr_usage_entry_t e[2] = {{0}};
    mgr_usage_t u;
    mgr_usage_entry_t got;
    mgr_wbuf_t w = {0};
    const char *why = NULL;

    e[0].comm = 0; /* the world */
    e[0].group = 7;
    e[0].ops_net = 10;
    e[0].ops_sw = 3;
    e[0].fb[MGR_FB_REQUESTED] = 2;
    e[0].fb[MGR_FB_UNSUPPORTED] = 1;
    e[1].comm = 0x1234;
    e[1].ops_sw = 4;
    e[1].fb[MGR_FB_REFUSED] = 4;
    mgr_enc_usage(&w, e, 2);
    CHECK(mgr_dec_usage(w.buf, w.len, &u, &why) == INCOLL_OK);
    CHECK_EQ_INT(u.nentries, 2);
    CHECK_EQ_INT(u.nreasons, MGR_FB_COUNT);
    mgr_usage_at(&u, 1, &got);
    CHECK(memcmp(&got, &e[1], sizeof(got)) == 0);
    mgr_usage_at(&u, 0, &got);
    CHECK(memcmp(&got, &e[0], sizeof(got)) == 0);
    for (size_t n = 0; n < w.len; n++)
        CHECK(mgr_dec_usage(w.buf, n, &u, &why) == INCOLL_ERR_PROTOCOL);
    mgr_wbuf_free(&w);
    CHECK_MSG(strcmp(mgr_fb_name(MGR_FB_REQUESTED), "requested") == 0, "%s",
              mgr_fb_name(MGR_FB_REQUESTED));
    CHECK_MSG(strcmp(mgr_fb_name(MGR_FB_COUNT), "unknown") == 0, "%s",
              mgr_fb_name(MGR_FB_COUNT));
    CHECK_MSG(strcmp(mgr_msg_name(MGR_USAGE), "usage") == 0, "%s",
              mgr_msg_name(MGR_USAGE));
    /* Fallbacks that do not add up to the software operations. */
    e[0].fb[MGR_FB_REQUESTED] = 3;
    mgr_enc_usage(&w, e, 1);
    CHECK(mgr_dec_usage(w.buf, w.len, &u, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strstr(why, "fallback counts") != NULL, "%s", why);
    mgr_wbuf_free(&w);
    e[0].fb[MGR_FB_REQUESTED] = 2;
    /* A count no process makes in one period. */
    e[0].ops_net = MGR_USAGE_MAX_COUNT + 1;
    mgr_enc_usage(&w, e, 1);
    CHECK(mgr_dec_usage(w.buf, w.len, &u, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strcmp(why, "operation count") == 0, "%s", why);
    mgr_wbuf_free(&w);
    e[0].ops_net = 10;
    /* Nothing to say. */
    memset(&e[1], 0, sizeof(e[1]));
    mgr_enc_usage(&w, e, 2);
    CHECK(mgr_dec_usage(w.buf, w.len, &u, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strcmp(why, "empty entry") == 0, "%s", why);
    mgr_wbuf_free(&w);
    /* No entries; more reasons than this side knows; trailing bytes. */
    mgr_enc_usage(&w, e, 0);
    CHECK(mgr_dec_usage(w.buf, w.len, &u, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strcmp(why, "entry count") == 0, "%s", why);
    mgr_wbuf_free(&w);
    mgr_enc_usage(&w, e, 1);
    w.buf[2] = MGR_FB_COUNT + 1;
    CHECK(mgr_dec_usage(w.buf, w.len, &u, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strcmp(why, "reason count") == 0, "%s", why);
    w.buf[2] = MGR_FB_COUNT;
    mgr_w_u8(&w, 0);
    CHECK(mgr_dec_usage(w.buf, w.len, &u, &why) == INCOLL_ERR_PROTOCOL);
    CHECK_MSG(strcmp(why, "trailing bytes") == 0, "%s", why);
    mgr_wbuf_free(&w);
    return TEST_PASSED;
}
