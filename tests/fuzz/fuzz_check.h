/*
 * The properties every parser must keep on any input, shared by the unit
 * fuzz tests (tests/test_fuzz.c) and the libFuzzer harnesses
 * (tests/fuzz/fuzz_*.c, docs/fuzzing.md). Each fuzz_check_*() feeds one
 * input to a parser and checks that the parser either rejects it cleanly
 * (an error status, a reason, for files a message "path:line: cause"
 * with a line that exists) or accepts something
 * self-consistent (fields within the documented limits, and encoding what
 * was decoded gives the input back, or saving and loading again gives the
 * same thing). They return NULL when the parser behaved and otherwise a
 * constant string naming the broken property, so that the unit tests can
 * report it and the harnesses can abort on it.
 *
 * Header-only (static inline functions): the Makefile builds the tests/
 * sources into the test binaries, and each harness is one translation
 * unit of its own that uses part of it.
 */
#ifndef INCOLL_FUZZ_CHECK_H
#define INCOLL_FUZZ_CHECK_H

#include "common/fabric_conf.h"
#include "common/mgr_proto.h"
#include "common/wire.h"
#include "common/wire_mac.h"
#include "mgr/topo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- files ---- */

/*
 * The file parsers take a path: inputs go to an in-memory file (memfd),
 * opened by its name in /proc/self/fd, so that thousands of inputs cost no
 * disk writes. fuzz_memfd_open() creates one and writes its path into
 * path (size len); returns the fd or -1.
 */
static inline int fuzz_memfd_open(char *path, size_t len)
{
    int fd = memfd_create("incoll-fuzz", MFD_CLOEXEC);
    if (fd >= 0)
        snprintf(path, len, "/proc/self/fd/%d", fd);
    return fd;
}

/* Replaces the content of the memfd with data[0..len). Returns 0 or -1. */
static inline int fuzz_memfd_set(int fd, const void *data, size_t len)
{
    if (ftruncate(fd, 0) != 0)
        return -1;
    return pwrite(fd, data, len, 0) == (ssize_t)len ? 0 : -1;
}

/* Reads a whole file into a new NUL-terminated buffer that the caller
 * frees; NULL when it cannot. */
static inline char *fuzz_read_file(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    long size;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1))) {
        *len_p = fread(text, 1, (size_t)size, f);
        text[*len_p] = '\0';
    }
    fclose(f);
    return text;
}

/*
 * Checks an error message of a file parser: "path:line: cause" with a
 * line between 0 (the whole file) and the last line of text.
 */
static inline const char *fuzz_check_file_error(const char *err,
                                                const char *path,
                                                const char *text, size_t len)
{
    size_t plen = strlen(path);
    long line = 0, lines = 1;
    const char *s;

    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (strncmp(err, path, plen) != 0 || err[plen] != ':')
        return "error message does not start with the file name";
    s = err + plen + 1;
    if (*s < '0' || *s > '9')
        return "error message has no line number";
    for (; *s >= '0' && *s <= '9'; s++)
        line = line * 10 + (*s - '0');
    if (line > lines)
        return "error message names a line past the end of the file";
    if (s[0] != ':' || s[1] != ' ' || s[2] == '\0')
        return "error message has no cause after the line number";
    return NULL;
}

/* ---- wire format ---- */

/* The key the seeds are sealed under (wire_mac.h). */
static const wire_key_t fuzz_wire_key = {.k0 = 0x0706050403020100ull,
                                         .k1 = 0x0f0e0d0c0b0a0908ull};

/*
 * The mac of an accepted datagram (wire_mac_check): deterministic; after
 * sealing a copy under fuzz_wire_key it checks, and it fails once any one
 * byte outside the mac field (the first, the last, one in the middle)
 * changes or under another key.
 */
static inline const char *fuzz_check_wire_mac(const uint8_t *buf, size_t len)
{
    static const wire_key_t other = {.k0 = 0x0706050403020100ull,
                                     .k1 = 0x0f0e0d0c0b0a0909ull};
    uint8_t *c = malloc(len);
    size_t at[3] = {0, len / 2, len - 1};
    const char *why = NULL;

    if (c == NULL)
        return NULL;
    memcpy(c, buf, len);
    if (wire_mac_check(&fuzz_wire_key, c, len) !=
        wire_mac_check(&fuzz_wire_key, buf, len))
        why = "wire: mac check is not deterministic";
    wire_mac_seal(&fuzz_wire_key, c, c + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
    if (!why && !wire_mac_check(&fuzz_wire_key, c, len))
        why = "wire: a sealed packet fails its mac check";
    if (!why && wire_mac_check(&other, c, len))
        why = "wire: a sealed packet passes under another key";
    for (int i = 0; i < 3 && !why; i++) {
        if (at[i] >= 16 && at[i] < 24)
            continue; /* the mac field itself */
        c[at[i]] ^= 0x40;
        if (wire_mac_check(&fuzz_wire_key, c, len))
            why = "wire: a packet with a changed byte passes its mac check";
        c[at[i]] ^= 0x40;
    }
    free(c);
    return why;
}

/*
 * wire_parse() on one datagram. An accepted packet has a known type, a
 * valid op and dtype pair and non-zero count for CONTRIB/RESULT, exactly
 * the payload its count asks for; packing the parsed header gives the
 * received header bytes back; and every shorter or longer datagram with
 * the same bytes is rejected.
 */
static inline const char *fuzz_check_wire(const uint8_t *buf, size_t len)
{
    wire_hdr_t h, sentinel;
    const char *why = NULL;
    uint8_t packed[WIRE_HDR_LEN];
    uint8_t *longer;
    size_t payload;
    int reject;

    /* Byte copies: an assignment need not copy wire_hdr_t's padding,
     * which the memcmp below compares. */
    memset(&h, 0xa5, sizeof(h));
    memcpy(&sentinel, &h, sizeof(h));
    if (wire_parse(buf, len, &h, &why) != INCOLL_OK) {
        if (why == NULL)
            return "wire: rejected without a reason";
        if (memcmp(&h, &sentinel, sizeof(h)) != 0)
            return "wire: rejected but wrote the header";
        return NULL;
    }
    if (len < WIRE_HDR_LEN || h.version != WIRE_VERSION)
        return "wire: accepted a short header or another version";
    switch (h.type) {
    case WIRE_CONTRIB:
    case WIRE_RESULT:
        if (h.dtype >= INCOLL_DTYPE_COUNT || h.op >= INCOLL_OP_COUNT ||
            !incoll_op_valid((incoll_op_t)h.op, (incoll_dtype_t)h.dtype) ||
            h.count == 0)
            return "wire: accepted a bad op, dtype or count";
        break;
    case WIRE_STATS_REQ:
    case WIRE_STATS_REP:
    case WIRE_P2P_DATA:
    case WIRE_P2P_ACK:
        break;
    default:
        return "wire: accepted an unknown type";
    }
    payload = wire_payload_len(&h);
    if (payload > WIRE_MAX_PAYLOAD || len != WIRE_HDR_LEN + payload)
        return "wire: accepted a payload that does not match count";
    wire_pack(&h, packed);
    if (memcmp(packed, buf, WIRE_HDR_LEN) != 0)
        return "wire: packing the parsed header does not give its bytes";
    for (size_t n = 0; n < len; n++)
        if (wire_parse(buf, n, &sentinel, NULL) == INCOLL_OK)
            return "wire: accepted a truncation of a valid packet";
    longer = malloc(len + 1);
    if (longer == NULL)
        return NULL;
    memcpy(longer, buf, len);
    longer[len] = 0;
    reject = wire_parse(longer, len + 1, &sentinel, NULL) != INCOLL_OK;
    free(longer);
    if (!reject)
        return "wire: accepted a packet with a byte too many";
    return fuzz_check_wire_mac(buf, len);
}

/*
 * wire_ep_parse() on a NUL-terminated text. An accepted endpoint has a
 * port in 1..65535 and the address in 32 bits; formatting it gives the
 * text back, but for leading zeros of the port; and the formatted text
 * parses to the same endpoint.
 */
static inline const char *fuzz_check_ep(const char *text)
{
    incoll_ep_t ep = 12345, again = 0;
    char canon[32];
    const char *colon, *port, *canon_colon;

    if (wire_ep_parse(text, &ep) != INCOLL_OK)
        return ep == 12345 ? NULL : "ep: rejected but wrote the endpoint";
    if ((ep & 0xffff) == 0 || (ep >> 48) != 0)
        return "ep: accepted port 0 or an address over 32 bits";
    wire_ep_str(ep, canon, sizeof(canon));
    if (wire_ep_parse(canon, &again) != INCOLL_OK || again != ep)
        return "ep: the formatted endpoint does not parse to itself";
    colon = strrchr(text, ':');
    canon_colon = strrchr(canon, ':');
    if (colon == NULL || colon - text != canon_colon - canon ||
        strncmp(text, canon, (size_t)(colon - text)) != 0)
        return "ep: accepted an address that is not a plain dotted quad";
    for (port = colon + 1; *port == '0'; port++)
        ;
    if (strcmp(port, canon_colon + 1) != 0)
        return "ep: accepted a port that is not plain digits";
    return NULL;
}

/* ---- control protocol ---- */

/* 1 when [q, q + n) lies inside [p, p + len). */
static inline int fuzz_inside(const uint8_t *q, size_t n, const uint8_t *p,
                              size_t len)
{
    return q != NULL && q >= p && n <= len && (size_t)(q - p) <= len - n;
}

static inline int fuzz_ep_ok(incoll_ep_t ep)
{
    return ep != INCOLL_EP_NONE && (ep & 0xffff) != 0 && (ep >> 48) == 0;
}

static inline int fuzz_name_ok(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    if (n >= max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((uint8_t)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* Compares what w holds with p[0..n): the encoder must give the decoded
 * message's bytes back. Frees w. */
static inline const char *fuzz_same_bytes(mgr_wbuf_t *w, const uint8_t *p,
                                          size_t n, const char *why)
{
    int oom = w->oom;
    int same = !oom && w->len == n && (n == 0 || memcmp(w->buf, p, n) == 0);
    mgr_wbuf_free(w);
    return same || oom ? NULL : why;
}

/*
 * One checker per control message: decodes p[0..n), sets *ok_p to whether
 * it was accepted and checks the accepted fields and the re-encoding.
 */
typedef const char *(*fuzz_mgr_check_t)(const uint8_t *p, size_t n, int *ok_p);

static inline const char *fuzz_mgr_an_register(const uint8_t *p, size_t n,
                                               int *ok_p)
{
    mgr_an_register_t m;
    mgr_wbuf_t w = {0}, gw = {0};
    const char *why = NULL, *ret;

    *ok_p = mgr_dec_an_register(p, n, &m, &why) == INCOLL_OK;
    if (!*ok_p)
        return why ? NULL : "an_register: rejected without a reason";
    if (m.name[0] == '\0' || !fuzz_name_ok(m.name, sizeof(m.name)) ||
        !fuzz_ep_ok(m.ep) || m.caps.max_payload < 8 ||
        m.caps.max_payload > WIRE_MAX_PAYLOAD || m.caps.slots == 0 ||
        m.caps.max_groups == 0 || m.ngroups > 1u << 20 ||
        !fuzz_inside(m.groups, m.groups_len, p, n))
        return "an_register: accepted a field out of its limits";
    for (uint32_t i = 0; i < m.ngroups; i++) {
        mgr_an_group_t g;
        mgr_an_group_at(&m, i, &g);
        if (g.id == 0 ||
            !fuzz_inside(g.rec, g.rec_len, m.groups, m.groups_len)) {
            mgr_wbuf_free(&gw);
            return "an_register: a group entry is bad or outside the body";
        }
        mgr_enc_an_group(&gw, &g);
    }
    ret = fuzz_same_bytes(&gw, m.groups, m.groups_len,
                          "an_register: re-encoding the groups differs");
    if (ret)
        return ret;
    mgr_enc_an_register(&w, &m);
    return fuzz_same_bytes(&w, p, n, "an_register: re-encoding differs");
}

static inline const char *fuzz_mgr_group_add(const uint8_t *p, size_t n,
                                             int *ok_p)
{
    mgr_group_add_t m;
    mgr_wbuf_t w = {0};
    const char *why = NULL;

    *ok_p = mgr_dec_group_add(p, n, &m, &why) == INCOLL_OK;
    if (!*ok_p)
        return why ? NULL : "group_add: rejected without a reason";
    if (m.id == 0 || m.slots < 1 || m.slots > 65535 || m.payload < 8 ||
        m.payload > WIRE_MAX_PAYLOAD || m.nchildren < 1 ||
        m.nchildren > MGR_MAX_CHILDREN ||
        !fuzz_inside(m.children, (size_t)m.nchildren * 8, p, n) ||
        !fuzz_inside(m.rec, m.rec_len, p, n))
        return "group_add: accepted a field out of its limits";
    mgr_enc_group_add(&w, &m);
    return fuzz_same_bytes(&w, p, n, "group_add: re-encoding differs");
}

static inline const char *fuzz_mgr_join(const uint8_t *p, size_t n, int *ok_p)
{
    mgr_join_t m;
    mgr_wbuf_t w = {0};
    const char *why = NULL;

    *ok_p = mgr_dec_join(p, n, &m, &why) == INCOLL_OK;
    if (!*ok_p)
        return why ? NULL : "join: rejected without a reason";
    if (m.job[0] == '\0' || !fuzz_name_ok(m.job, sizeof(m.job)) ||
        !fuzz_name_ok(m.host, sizeof(m.host)) || m.size < 1 ||
        m.size > MGR_MAX_MEMBERS || m.rank < 0 || m.rank >= m.size ||
        !fuzz_ep_ok(m.ep))
        return "join: accepted a field out of its limits";
    mgr_enc_join(&w, &m);
    return fuzz_same_bytes(&w, p, n, "join: re-encoding differs");
}

static inline const char *fuzz_mgr_group_req(const uint8_t *p, size_t n,
                                             int *ok_p)
{
    mgr_group_req_t m;
    mgr_wbuf_t w = {0};
    const char *why = NULL;

    *ok_p = mgr_dec_group_req(p, n, &m, &why) == INCOLL_OK;
    if (!*ok_p)
        return why ? NULL : "group_req: rejected without a reason";
    if (m.slots > 65535 ||
        (m.payload != 0 && (m.payload < 8 || m.payload > WIRE_MAX_PAYLOAD)) ||
        m.nmembers < 1 || m.nmembers > MGR_MAX_MEMBERS ||
        !fuzz_inside(m.members, (size_t)m.nmembers * 4, p, n))
        return "group_req: accepted a field out of its limits";
    mgr_enc_group_req(&w, &m);
    return fuzz_same_bytes(&w, p, n, "group_req: re-encoding differs");
}

static inline const char *fuzz_mgr_group_info(const uint8_t *p, size_t n,
                                              int *ok_p)
{
    mgr_group_info_t m;
    mgr_wbuf_t w = {0};
    const char *why = NULL;

    *ok_p = mgr_dec_group_info(p, n, &m, &why) == INCOLL_OK;
    if (!*ok_p)
        return why ? NULL : "group_info: rejected without a reason";
    if (!fuzz_name_ok(m.reason, sizeof(m.reason)) ||
        m.opseq_min > m.opseq_max || m.status > 0 || m.status < -64 ||
        (m.status == INCOLL_OK &&
         (m.group == 0 || m.slots < 1 || m.slots > 65535 || m.payload < 8 ||
          m.payload > WIRE_MAX_PAYLOAD || m.an == INCOLL_EP_NONE ||
          m.child >= MGR_MAX_CHILDREN)) ||
        m.nmembers < 1 || m.nmembers > MGR_MAX_MEMBERS ||
        !fuzz_inside(m.peers, (size_t)m.nmembers * 8, p, n))
        return "group_info: accepted a field out of its limits";
    mgr_enc_group_info(&w, &m);
    return fuzz_same_bytes(&w, p, n, "group_info: re-encoding differs");
}

static inline const char *fuzz_mgr_usage(const uint8_t *p, size_t n, int *ok_p)
{
    mgr_usage_t m;
    mgr_usage_entry_t *e;
    mgr_wbuf_t w = {0};
    const char *why = NULL, *bad = NULL;

    *ok_p = mgr_dec_usage(p, n, &m, &why) == INCOLL_OK;
    if (!*ok_p)
        return why ? NULL : "usage: rejected without a reason";
    if (m.nentries < 1 || m.nentries > MGR_USAGE_MAX_ENTRIES ||
        m.nreasons < 1 || m.nreasons > MGR_FB_COUNT ||
        !fuzz_inside(m.entries, m.entries_len, p, n))
        return "usage: accepted a field out of its limits";
    e = calloc(m.nentries, sizeof(*e));
    if (e == NULL)
        return NULL;
    for (uint16_t i = 0; i < m.nentries && bad == NULL; i++) {
        uint64_t sum = 0;
        mgr_usage_at(&m, i, &e[i]);
        for (int k = 0; k < MGR_FB_COUNT; k++)
            sum += e[i].fb[k];
        if (sum != e[i].ops_sw || e[i].ops_net > MGR_USAGE_MAX_COUNT ||
            e[i].ops_sw > MGR_USAGE_MAX_COUNT ||
            e[i].ops_net + e[i].ops_sw == 0)
            bad = "usage: accepted counts that do not add up";
    }
    if (bad == NULL && m.nreasons == MGR_FB_COUNT) {
        mgr_enc_usage(&w, e, m.nentries);
        bad = fuzz_same_bytes(&w, p, n, "usage: re-encoding differs");
    }
    free(e);
    return bad;
}

static const fuzz_mgr_check_t fuzz_mgr_checks[] = {
    fuzz_mgr_an_register, fuzz_mgr_group_add,  fuzz_mgr_join,
    fuzz_mgr_group_req,   fuzz_mgr_group_info, fuzz_mgr_usage,
};
#define FUZZ_MGR_NCHECKS                                                       \
    ((int)(sizeof(fuzz_mgr_checks) / sizeof(fuzz_mgr_checks[0])))

/*
 * Every control-message decoder on one body. Sets bit i of *accepted_p
 * when checker i accepted it. Every message has a fixed layout with
 * lengths inside it and must be read to its end, so no decoder may accept
 * a truncation of a body it accepts.
 */
static inline const char *fuzz_check_mgr_msg(const uint8_t *p, size_t n,
                                             unsigned *accepted_p)
{
    unsigned accepted = 0;

    for (int i = 0; i < FUZZ_MGR_NCHECKS; i++) {
        int ok = 0;
        const char *why = fuzz_mgr_checks[i](p, n, &ok);
        if (why)
            return why;
        if (!ok)
            continue;
        accepted |= 1u << i;
        for (size_t k = 0; k < n; k++) {
            fuzz_mgr_checks[i](p, k, &ok);
            if (ok)
                return "mgr: accepted a truncation of a valid message";
        }
    }
    if (accepted_p)
        *accepted_p = accepted;
    return NULL;
}

/*
 * Feeds a byte stream to one end of a control connection: server = 1 is
 * the manager reading what a client sent (after its HELLO carried
 * snonce), server = 0 a host reading what the manager sent. No socket is
 * used: the stream's fd is -1 and the bytes go straight into its receive
 * buffer. Frames are taken out until the stream needs more bytes or
 * fails; a failed stream must stay failed, and a frame must lie inside
 * what was received. When frames is not NULL, each application frame is
 * appended to it as u16 type, u32 length, body, so that a caller can
 * check that only frames the real peer sent came out.
 */
static inline const char *fuzz_check_mgr_stream(int server,
                                                const uint8_t key[MGR_KEY_LEN],
                                                const uint8_t *snonce,
                                                const uint8_t *p, size_t n,
                                                mgr_wbuf_t *frames)
{
    mgr_stream_t st;
    const char *ret = NULL;

    if (mgr_stream_init(&st, -1, server, MGR_ROLE_HOST, key) != INCOLL_OK)
        return "stream: init failed";
    if (server && snonce)
        memcpy(st.snonce, snonce, MGR_NONCE_LEN);
    st.rx = malloc(n ? n : 1);
    if (st.rx == NULL) {
        mgr_stream_close(&st);
        return NULL;
    }
    memcpy(st.rx, p, n);
    st.rx_len = st.rx_cap = n;
    for (size_t step = 0; step <= n + 1; step++) {
        uint16_t type = 0;
        const uint8_t *body = NULL;
        size_t len = 0;
        const char *why = NULL;
        mgr_next_t r = mgr_stream_next(&st, &type, &body, &len, &why);
        if (st.rx_off > st.rx_len) {
            ret = "stream: consumed more than it received";
            break;
        }
        if (r == MGR_NEXT_NONE)
            break;
        if (r == MGR_NEXT_ERROR) {
            if (why == NULL || st.state != MGR_ST_FAILED ||
                mgr_stream_next(&st, &type, &body, &len, &why) !=
                    MGR_NEXT_ERROR)
                ret = "stream: an error without a reason or not final";
            break;
        }
        if (r == MGR_NEXT_FRAME) {
            if (st.state != MGR_ST_READY || type < MGR_ERROR ||
                !fuzz_inside(body, len, st.rx, st.rx_off)) {
                ret = "stream: a frame before the handshake or outside it";
                break;
            }
            if (frames) {
                mgr_w_u16(frames, type);
                mgr_w_u32(frames, (uint32_t)len);
                mgr_w_bytes(frames, body, len);
            }
        }
    }
    mgr_stream_close(&st);
    return ret;
}

/* ---- fabric.conf ---- */

/* What fabric_conf_load() promises about a configuration it accepts. */
static inline const char *fuzz_fabric_invariants(const fabric_conf_t *c)
{
    int roots = 0;

    if (c->nhosts < 1 || c->nhosts > 1000000 || c->radix < 2 ||
        c->radix > AGG_RADIX_MAX || c->levels < 1 || c->levels > 16 ||
        c->admin_key == 0 || c->group_id == 0 || c->group_key == 0 ||
        c->slots < 1 || c->slots > 65535 || c->payload < 8 ||
        c->payload > WIRE_MAX_PAYLOAD || c->nans < 1 || c->ans == NULL ||
        c->hosts == NULL)
        return "fabric.conf: a global field out of its limits";
    for (int i = 0; i < c->nans; i++) {
        const fabric_an_t *a = &c->ans[i];
        size_t len = strnlen(a->name, FABRIC_NAME_MAX);
        int n;
        if (len == 0 || len >= FABRIC_NAME_MAX ||
            strnlen(a->netns, FABRIC_NETNS_MAX) >= FABRIC_NETNS_MAX)
            return "fabric.conf: an an name or netns out of its limits";
        if (fabric_conf_find_an(c, a->name) != i)
            return "fabric.conf: two ans of one name";
        for (int j = 0; j < i; j++)
            if (c->ans[j].addr == a->addr)
                return "fabric.conf: two ans of one address";
        if (a->level < 1 || a->level > 16 || !fuzz_ep_ok(a->addr))
            return "fabric.conf: an an level or address out of its limits";
        if (a->parent < -1 || a->parent >= c->nans ||
            (a->parent >= 0 && c->ans[a->parent].level <= a->level))
            return "fabric.conf: an an parent out of range or not above";
        roots += a->parent < 0;
        n = fabric_conf_children(c, i, NULL, NULL, 0);
        if (n < 1 || n > AGG_RADIX_MAX)
            return "fabric.conf: an an without children or with too many";
    }
    if (roots != 1)
        return "fabric.conf: not exactly one root";
    for (int r = 0; r < c->nhosts; r++) {
        const fabric_host_t *h = &c->hosts[r];
        if (h->leaf < 0 || h->leaf >= c->nans ||
            strnlen(h->netns, FABRIC_NETNS_MAX) >= FABRIC_NETNS_MAX)
            return "fabric.conf: a host leaf out of range";
    }
    return NULL;
}

static inline int fuzz_fabric_equal(const fabric_conf_t *a,
                                    const fabric_conf_t *b)
{
    if (a->nhosts != b->nhosts || a->radix != b->radix ||
        a->levels != b->levels || a->admin_key != b->admin_key ||
        a->nans != b->nans || a->group_id != b->group_id ||
        a->group_key != b->group_key || a->slots != b->slots ||
        a->payload != b->payload)
        return 0;
    for (int i = 0; i < a->nans; i++)
        if (strcmp(a->ans[i].name, b->ans[i].name) != 0 ||
            a->ans[i].level != b->ans[i].level ||
            a->ans[i].addr != b->ans[i].addr ||
            a->ans[i].parent != b->ans[i].parent ||
            strcmp(a->ans[i].netns, b->ans[i].netns) != 0)
            return 0;
    for (int r = 0; r < a->nhosts; r++)
        if (a->hosts[r].leaf != b->hosts[r].leaf ||
            a->hosts[r].ip != b->hosts[r].ip ||
            a->hosts[r].port != b->hosts[r].port ||
            strcmp(a->hosts[r].netns, b->hosts[r].netns) != 0)
            return 0;
    return 1;
}

/*
 * fabric_conf_load() on path, which holds text[0..len). A rejection says
 * "path:line: cause"; an accepted configuration
 * keeps the loader's invariants and survives fabric_conf_save() to scratch
 * and a second load unchanged.
 */
static inline const char *fuzz_check_fabric_conf(const char *path,
                                                 const char *text, size_t len,
                                                 const char *scratch)
{
    fabric_conf_t c, again;
    char err[512] = "";
    const char *ret;

    if (fabric_conf_load(path, &c, err, sizeof(err)) != INCOLL_OK) {
        ret = fuzz_check_file_error(err, path, text, len);
        if (ret)
            fprintf(stderr, "fabric.conf: message '%s'\n", err);
        return ret;
    }
    ret = fuzz_fabric_invariants(&c);
    if (ret == NULL && fabric_conf_save(&c, scratch) != INCOLL_OK)
        ret = "fabric.conf: cannot save what was loaded";
    if (ret == NULL) {
        if (fabric_conf_load(scratch, &again, err, sizeof(err)) != INCOLL_OK) {
            fprintf(stderr, "fabric.conf: reload: %s\n", err);
            ret = "fabric.conf: what was saved does not load again";
        } else {
            if (!fuzz_fabric_equal(&c, &again))
                ret = "fabric.conf: saving and loading changed it";
            fabric_conf_free(&again);
        }
    }
    fabric_conf_free(&c);
    return ret;
}

/* ---- topology ---- */

static inline int fuzz_caps_ok(const topo_caps_t *c)
{
    return (c->ops & ~TOPO_OPS_ALL) == 0 &&
           (c->dtypes & ~TOPO_DTYPES_ALL) == 0 && c->max_payload >= 8 &&
           c->max_payload <= WIRE_MAX_PAYLOAD && c->slots >= 1 &&
           c->slots <= 1u << 24 && c->max_groups >= 1 &&
           c->max_groups <= 1u << 24 && c->buffer_bytes >= 1024;
}

static inline int fuzz_topo_name_ok(const char *s)
{
    size_t n = strnlen(s, TOPO_NAME_MAX);
    if (n == 0 || n >= TOPO_NAME_MAX)
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_.-") == n;
}

/* 1 when a link joins lo (below) and hi (above). */
static inline int fuzz_topo_linked(const topo_t *t, int lo, int hi)
{
    for (int d = 0; d < t->sw[hi].ndown; d++)
        if (t->sw[hi].down[d] == lo)
            return 1;
    return 0;
}

/* What topo_load() promises about a topology it accepts. */
static inline const char *fuzz_topo_invariants(const topo_t *t)
{
    int levels = 0, roots = 0, *per_leaf, *ups, *downs;
    const char *ret = NULL;

    if (t->nswitches < 1 || t->nswitches > TOPO_MAX_SWITCHES || t->nhosts < 0 ||
        t->nhosts > TOPO_MAX_HOSTS || t->nlinks < 0)
        return "topo: counts out of their limits";
    for (int i = 0; i < t->nswitches; i++) {
        const topo_switch_t *s = &t->sw[i];
        if (!fuzz_topo_name_ok(s->name) || topo_find_switch(t, s->name) != i)
            return "topo: a switch name is bad or used twice";
        if (s->level < 1 || s->level > TOPO_MAX_LEVELS ||
            !fuzz_caps_ok(&s->caps))
            return "topo: a switch level or capability out of its limits";
        if (s->addr != INCOLL_EP_NONE && !fuzz_ep_ok(s->addr))
            return "topo: a switch address without a port";
        for (int j = 0; j < i; j++)
            if (s->addr != INCOLL_EP_NONE && s->addr == t->sw[j].addr)
                return "topo: two switches of one address";
        if (s->ndown > 1024)
            return "topo: a switch with more than 1024 links down";
        levels = s->level > levels ? s->level : levels;
        roots += s->nup == 0;
    }
    if (levels != t->levels || roots != t->ntrees)
        return "topo: levels or tree count do not match the switches";
    ups = calloc((size_t)t->nswitches, sizeof(int));
    downs = calloc((size_t)t->nswitches, sizeof(int));
    per_leaf = calloc((size_t)t->nswitches, sizeof(int));
    if (ups == NULL || downs == NULL || per_leaf == NULL)
        goto out;
    for (int l = 0; l < t->nlinks && !ret; l++) {
        int lo = t->links[l][0], hi = t->links[l][1];
        if (lo < 0 || lo >= t->nswitches || hi < 0 || hi >= t->nswitches ||
            t->sw[lo].level >= t->sw[hi].level) {
            ret = "topo: a link out of range or not upwards";
            break;
        }
        if (ups[lo] >= t->sw[lo].nup || t->sw[lo].up[ups[lo]] != hi ||
            downs[hi] >= t->sw[hi].ndown || t->sw[hi].down[downs[hi]] != lo)
            ret = "topo: neighbour lists do not follow the links";
        ups[lo]++;
        downs[hi]++;
        for (int m = 0; m < l && !ret; m++)
            if (t->links[m][0] == lo && t->links[m][1] == hi)
                ret = "topo: a link listed twice";
    }
    for (int i = 0; i < t->nswitches && !ret; i++)
        if (ups[i] != t->sw[i].nup || downs[i] != t->sw[i].ndown)
            ret = "topo: neighbour counts do not match the links";
    for (int h = 0; h < t->nhosts && !ret; h++) {
        const topo_host_t *hh = &t->hosts[h];
        if (!fuzz_topo_name_ok(hh->name) || topo_find_host(t, hh->name) != h)
            ret = "topo: a host name is bad or used twice";
        else if (hh->leaf < 0 || hh->leaf >= t->nswitches ||
                 t->sw[hh->leaf].level != 1 || ++per_leaf[hh->leaf] > 1024)
            ret = "topo: a host leaf out of range or not a leaf";
    }
    /* Every tree is rooted at a switch without uplinks and follows links
     * downwards; together they reach every switch. */
    memset(ups, 0, (size_t)t->nswitches * sizeof(int));
    for (int k = 0; k < t->ntrees && !ret; k++) {
        const topo_tree_t *tr = &t->trees[k];
        if (tr->root < 0 || tr->root >= t->nswitches ||
            t->sw[tr->root].nup != 0 || tr->parent[tr->root] != -1 ||
            tr->height < 1 || tr->height > TOPO_MAX_LEVELS) {
            ret = "topo: a tree with a bad root";
            break;
        }
        for (int i = 0; i < t->nswitches && !ret; i++) {
            int p = tr->parent[i];
            if (p == -2 || i == tr->root)
                continue;
            ups[i] = 1;
            if (p < 0 || p >= t->nswitches || !fuzz_topo_linked(t, i, p))
                ret = "topo: a tree parent that is not linked above";
        }
        ups[tr->root] = 1;
    }
    for (int i = 0; i < t->nswitches && !ret; i++)
        if (!ups[i])
            ret = "topo: a switch that no tree reaches";
out:
    free(ups);
    free(downs);
    free(per_leaf);
    return ret;
}

static inline int fuzz_topo_equal(const topo_t *a, const topo_t *b)
{
    if (a->nswitches != b->nswitches || a->nhosts != b->nhosts ||
        a->nlinks != b->nlinks || a->ntrees != b->ntrees ||
        a->levels != b->levels)
        return 0;
    for (int i = 0; i < a->nswitches; i++) {
        const topo_switch_t *x = &a->sw[i], *y = &b->sw[i];
        if (strcmp(x->name, y->name) != 0 || x->level != y->level ||
            x->addr != y->addr || x->caps.ops != y->caps.ops ||
            x->caps.dtypes != y->caps.dtypes ||
            x->caps.max_payload != y->caps.max_payload ||
            x->caps.slots != y->caps.slots ||
            x->caps.max_groups != y->caps.max_groups ||
            x->caps.buffer_bytes != y->caps.buffer_bytes)
            return 0;
    }
    for (int l = 0; l < a->nlinks; l++)
        if (a->links[l][0] != b->links[l][0] ||
            a->links[l][1] != b->links[l][1])
            return 0;
    for (int h = 0; h < a->nhosts; h++)
        if (strcmp(a->hosts[h].name, b->hosts[h].name) != 0 ||
            a->hosts[h].leaf != b->hosts[h].leaf ||
            a->hosts[h].ip != b->hosts[h].ip)
            return 0;
    for (int k = 0; k < a->ntrees; k++) {
        if (a->trees[k].root != b->trees[k].root ||
            a->trees[k].height != b->trees[k].height ||
            memcmp(a->trees[k].parent, b->trees[k].parent,
                   (size_t)a->nswitches * sizeof(int)) != 0)
            return 0;
    }
    return 1;
}

/*
 * topo_load() on path, which holds text[0..len). A rejection says
 * "path:line: cause"; topo_parse() on the same text (when it holds no NUL
 * byte) gives the same answer and message; an accepted topology keeps the
 * loader's invariants and survives topo_save() to scratch and a second
 * load unchanged.
 */
static inline const char *fuzz_check_topo(const char *path, const char *text,
                                          size_t len, const char *scratch)
{
    topo_t t, again;
    char err[512] = "", err2[512] = "";
    incoll_status_t status;
    const char *ret = NULL;

    status = topo_load(path, &t, err, sizeof(err));
    if (memchr(text, '\0', len) == NULL) {
        char *copy = malloc(len + 1);
        incoll_status_t status2;
        if (copy == NULL)
            return NULL;
        memcpy(copy, text, len);
        copy[len] = '\0';
        status2 = topo_parse(copy, path, &again, err2, sizeof(err2));
        free(copy);
        if (status2 == INCOLL_OK)
            topo_free(&again);
        if (status2 != status || (status != INCOLL_OK && strcmp(err, err2)))
            return "topo: topo_load and topo_parse disagree";
    }
    if (status != INCOLL_OK) {
        if (status != INCOLL_ERR_CONFIG)
            return "topo: rejected with another status than a config error";
        ret = fuzz_check_file_error(err, path, text, len);
        if (ret)
            fprintf(stderr, "topo: message '%s'\n", err);
        return ret;
    }
    ret = fuzz_topo_invariants(&t);
    if (ret == NULL && topo_save(&t, scratch) != INCOLL_OK)
        ret = "topo: cannot save what was loaded";
    /* topo_load() is reading the file and topo_parse(), which is cheaper
     * for a second time (topo_load takes 64 KiB per call). */
    if (ret == NULL) {
        size_t slen = 0;
        char *saved = fuzz_read_file(scratch, &slen);
        if (saved == NULL ||
            topo_parse(saved, scratch, &again, err, sizeof(err)) != INCOLL_OK) {
            fprintf(stderr, "topo: reload: %s\n", saved ? err : "no file");
            ret = "topo: what was saved does not load again";
        } else {
            if (!fuzz_topo_equal(&t, &again))
                ret = "topo: saving and loading changed it";
            topo_free(&again);
        }
        free(saved);
    }
    topo_free(&t);
    return ret;
}

/* ---- seeds: valid inputs from the project's own encoders ---- */

#define FUZZ_WIRE_SEEDS 6

/* Seed which (0..FUZZ_WIRE_SEEDS-1): a packet of each type, made by
 * wire_pack(), in buf (WIRE_HDR_LEN + 64 bytes). Returns its length. */
static inline size_t fuzz_wire_seed(int which, uint8_t *buf)
{
    wire_hdr_t h = {0};
    size_t payload;

    h.group = 7;
    h.child = 2;
    h.slot = 3;
    h.epoch = 9;
    h.total = 0xabcd;
    switch (which) {
    case 0:
        h.type = WIRE_CONTRIB;
        h.op = INCOLL_OP_SUM;
        h.dtype = INCOLL_FLOAT32;
        h.count = 5;
        h.flags = WIRE_F_LAST;
        h.offset = 1000;
        break;
    case 1:
        h.type = WIRE_RESULT;
        h.op = INCOLL_OP_BXOR;
        h.dtype = INCOLL_UINT16;
        h.count = 3;
        h.flags = WIRE_F_RETRANS;
        break;
    case 2:
        h.type = WIRE_STATS_REQ;
        h.child = WIRE_CHILD_NONE;
        break;
    case 3:
        h.type = WIRE_STATS_REP;
        h.count = 12;
        break;
    case 4:
        h.type = WIRE_P2P_DATA;
        h.count = 24;
        h.total = 4096;
        break;
    default:
        h.type = WIRE_P2P_ACK;
        h.flags = WIRE_F_P2P_DONE;
        break;
    }
    wire_pack(&h, buf);
    payload = wire_payload_len(&h);
    for (size_t i = 0; i < payload; i++)
        buf[WIRE_HDR_LEN + i] = (uint8_t)('a' + i % 26);
    wire_mac_seal(&fuzz_wire_key, buf, buf + WIRE_HDR_LEN, payload);
    return WIRE_HDR_LEN + payload;
}

#define FUZZ_MGR_SEEDS 7

/* A body of every decoded message, from the encoders: an_register,
 * group_add, join, group_req, two group_info (a group, a refusal) and
 * usage.
 * The caller frees each w[i] with mgr_wbuf_free(). */
static inline void fuzz_mgr_seeds(mgr_wbuf_t w[FUZZ_MGR_SEEDS])
{
    static uint8_t children[3 * 8], members[4 * 4], peers[4 * 8];
    static const uint8_t rec[] = "group record";
    mgr_wbuf_t groups = {0};

    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 8; b++)
            children[8 * i + b] =
                (uint8_t)(wire_ep(0x7f000001u, (uint16_t)(41000 + i)) >>
                          (8 * b));
    for (int i = 0; i < 4; i++) {
        for (int b = 0; b < 4; b++)
            members[4 * i + b] = (uint8_t)((uint32_t)(3 - i) >> (8 * b));
        for (int b = 0; b < 8; b++)
            peers[8 * i + b] =
                (uint8_t)(wire_ep(0x0a000001u + (uint32_t)i, 5000) >> (8 * b));
    }
    {
        mgr_an_register_t m = {.name = "l0", .ngroups = 2};
        mgr_an_group_t g = {
            .id = 5, .key = 0x55, .rec = rec, .rec_len = sizeof(rec)};
        m.ep = wire_ep(0x7f000001u, 41000);
        m.caps = (mgr_caps_t){0x3ff, 0xfff, 8192, 1024, 64, 1u << 28};
        mgr_enc_an_group(&groups, &g);
        g.id = 6;
        g.rec_len = 0;
        mgr_enc_an_group(&groups, &g);
        m.groups = groups.buf;
        m.groups_len = groups.len;
        mgr_enc_an_register(&w[0], &m);
    }
    {
        mgr_group_add_t m = {.id = 77,
                             .key = 0x1122334455667788ull,
                             .slots = 64,
                             .payload = 8192,
                             .nchildren = 3,
                             .children = children,
                             .rec = rec,
                             .rec_len = sizeof(rec)};
        m.parent = wire_ep(0x7f000001u, 41003);
        m.index_at_parent = 1;
        mgr_enc_group_add(&w[1], &m);
    }
    {
        mgr_join_t m = {.job = "job-1",
                        .rank = 2,
                        .size = 4,
                        .host = "node01",
                        .pid = 4242};
        m.ep = wire_ep(0x0a000003u, 5000);
        mgr_enc_join(&w[2], &m);
    }
    {
        mgr_group_req_t m = {.req = 1,
                             .comm = 0xc0,
                             .gen = 2,
                             .slots = 16,
                             .payload = 4096,
                             .opseq = 99,
                             .nmembers = 4,
                             .members = members};
        mgr_enc_group_req(&w[3], &m);
    }
    {
        mgr_group_info_t m = {.req = 1,
                              .comm = 0xc0,
                              .gen = 2,
                              .status = INCOLL_OK,
                              .reason = "",
                              .group = 9,
                              .key = 0x99,
                              .child = 1,
                              .slots = 16,
                              .payload = 4096,
                              .ops = 0x3ff,
                              .dtypes = 0xfff,
                              .opseq_min = 3,
                              .opseq_max = 5,
                              .nmembers = 4,
                              .peers = peers};
        m.an = wire_ep(0x7f000001u, 41001);
        mgr_enc_group_info(&w[4], &m);
        m.status = INCOLL_ERR_NO_RESOURCE;
        snprintf(m.reason, sizeof(m.reason), "no an has room");
        m.group = 0;
        m.an = INCOLL_EP_NONE;
        mgr_enc_group_info(&w[5], &m);
    }
    {
        mgr_usage_entry_t e[2] = {{.comm = 0, .group = 9, .ops_net = 40}, {0}};
        e[0].ops_sw = 3;
        e[0].fb[MGR_FB_REQUESTED] = 2;
        e[0].fb[MGR_FB_UNSUPPORTED] = 1;
        e[1].comm = 0xc0;
        e[1].ops_sw = 5;
        e[1].fb[MGR_FB_REFUSED] = 5;
        mgr_enc_usage(&w[6], e, 2);
    }
    mgr_wbuf_free(&groups);
}

/*
 * Writes fabric.conf seed k (0 or 1) to path with fabric_conf_save(): two
 * tree shapes, with and without host ports and network namespaces.
 */
static inline incoll_status_t fuzz_fabric_seed(int k, const char *path)
{
    fabric_conf_t conf;
    incoll_status_t status;

    status = k == 0 ? fabric_conf_generate(9, 3, &conf)
                    : fabric_conf_generate(7, 2, &conf);
    if (status != INCOLL_OK)
        return status;
    for (int i = 0; i < conf.nans; i++) {
        conf.ans[i].addr =
            wire_ep(0x7f000001u, (uint16_t)(41000 + 100 * k + i));
        if (k == 1)
            snprintf(conf.ans[i].netns, FABRIC_NETNS_MAX, "an-%d", i);
    }
    for (int r = 0; r < conf.nhosts; r++) {
        conf.hosts[r].port = r % 4 == 3 ? 0 : (uint16_t)(42000 + 100 * k + r);
        if (k == 1)
            snprintf(conf.hosts[r].netns, FABRIC_NETNS_MAX, "h.%d", r);
    }
    status = fabric_conf_save(&conf, path);
    fabric_conf_free(&conf);
    return status;
}

/*
 * Writes topology seed k (0 or 1) to path with topo_save(): a leaf-spine
 * and a 3-level fat-tree with other capabilities, some switch addresses
 * and host addresses; seed 0 ends with a defaults record and comments,
 * which topo_save() never writes.
 */
static inline incoll_status_t fuzz_topo_seed(int k, const char *path)
{
    static const char extra[] =
        "# spliced in\n"
        "defaults payload=4K slots=16 groups=2 buffer=1M ops=sum,max "
        "dtypes=float32,int8\n"
        "switch x9 level=3 addr=- ops=none dtypes=all # a comment\n"
        "link l0 x9\n"
        "host extra leaf=l1 addr=10.0.0.9\n";
    topo_t topo;
    topo_caps_t caps;
    incoll_status_t status;
    FILE *f;

    topo_caps_default(&caps);
    caps.ops = 1u << INCOLL_OP_SUM | 1u << INCOLL_OP_MAX;
    caps.max_payload = 4096;
    status = k == 0 ? topo_fat_tree(4, 2, 7, NULL, &topo)
                    : topo_fat_tree(2, 3, 2, &caps, &topo);
    if (status != INCOLL_OK)
        return status;
    for (int i = 0; i < topo.nswitches; i += 2)
        topo.sw[i].addr = wire_ep(0x7f000001u, (uint16_t)(41000 + 100 * k + i));
    for (int h = 0; h < topo.nhosts; h += 2)
        topo.hosts[h].ip = 0x0a000001u + (uint32_t)h;
    status = topo_save(&topo, path);
    topo_free(&topo);
    if (status != INCOLL_OK || k != 0)
        return status;
    f = fopen(path, "a");
    if (f == NULL)
        return INCOLL_ERR_IO;
    fputs(extra, f);
    return fclose(f) == 0 ? INCOLL_OK : INCOLL_ERR_IO;
}

/* ---- for the libFuzzer harnesses ---- */

/* Aborts with the broken property, which libFuzzer reports as a crash
 * and saves the input of. */
static inline void fuzz_fail_if(const char *why)
{
    if (why) {
        fprintf(stderr, "incoll fuzz: %s\n", why);
        abort();
    }
}

/*
 * Writes data as file "<name>-<i>" into the corpus directory of the
 * command line (its first argument that is not an option), when it is a
 * directory, so that a run starts from valid inputs.
 */
static inline void fuzz_corpus_add(int argc, char **argv, const char *name,
                                   int i, const void *data, size_t len)
{
    char path[4096];
    FILE *f;

    for (int a = 1; a < argc; a++) {
        DIR *d;
        if (argv[a][0] == '-')
            continue;
        d = opendir(argv[a]);
        if (d == NULL)
            return;
        closedir(d);
        snprintf(path, sizeof(path), "%s/%s-%d", argv[a], name, i);
        f = fopen(path, "w");
        if (f) {
            fwrite(data, 1, len, f);
            fclose(f);
        }
        return;
    }
}

/* A scratch file for what a text parser accepted and is saved again: on
 * tmpfs when there is one. */
static inline void fuzz_scratch_path(char *path, size_t len, const char *what)
{
    snprintf(path, len, "%s/incoll-fuzz-%d-%s",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid(),
             what);
}

#endif
