/*
 * The manager's control protocol: see mgr_proto.h and docs/manager.md.
 */
#include "common/mgr_proto.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef INCOLL_HAVE_SODIUM
#include <sodium.h>
#endif

/* ---- codec ---- */

static void w_grow(mgr_wbuf_t *w, size_t n)
{
    size_t need, ncap;
    uint8_t *nb;
    if (w->oom)
        return;
    need = w->len + n;
    if (need <= w->cap)
        return;
    ncap = w->cap ? w->cap : 256;
    while (ncap < need)
        ncap *= 2;
    nb = realloc(w->buf, ncap);
    if (nb == NULL) {
        w->oom = 1;
        return;
    }
    w->buf = nb;
    w->cap = ncap;
}

void mgr_w_bytes(mgr_wbuf_t *w, const void *p, size_t n)
{
    w_grow(w, n);
    if (w->oom || n == 0)
        return;
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

void mgr_w_u8(mgr_wbuf_t *w, uint8_t v) { mgr_w_bytes(w, &v, 1); }

void mgr_w_u16(mgr_wbuf_t *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    mgr_w_bytes(w, b, 2);
}

void mgr_w_u32(mgr_wbuf_t *w, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    mgr_w_bytes(w, b, 4);
}

void mgr_w_u64(mgr_wbuf_t *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    mgr_w_bytes(w, b, 8);
}

void mgr_w_str(mgr_wbuf_t *w, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > 65535)
        n = 65535;
    mgr_w_u16(w, (uint16_t)n);
    mgr_w_bytes(w, s, n);
}

void mgr_w_text(mgr_wbuf_t *w, const char *s, size_t n)
{
    mgr_w_u32(w, (uint32_t)n);
    mgr_w_bytes(w, s, n);
}

void mgr_wbuf_free(mgr_wbuf_t *w)
{
    free(w->buf);
    memset(w, 0, sizeof(*w));
}

const uint8_t *mgr_r_bytes(mgr_rbuf_t *r, size_t n)
{
    const uint8_t *p;
    if (r->err || n > r->len - r->off) {
        r->err = 1;
        return NULL;
    }
    p = r->p + r->off;
    r->off += n;
    return p;
}

uint64_t mgr_get_u64(const uint8_t *p, size_t i)
{
    uint64_t v = 0;
    p += 8 * i;
    for (int k = 7; k >= 0; k--)
        v = (v << 8) | p[k];
    return v;
}

uint32_t mgr_get_u32(const uint8_t *p, size_t i)
{
    p += 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

uint8_t mgr_r_u8(mgr_rbuf_t *r)
{
    const uint8_t *p = mgr_r_bytes(r, 1);
    return p ? p[0] : 0;
}

uint16_t mgr_r_u16(mgr_rbuf_t *r)
{
    const uint8_t *p = mgr_r_bytes(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint32_t mgr_r_u32(mgr_rbuf_t *r)
{
    const uint8_t *p = mgr_r_bytes(r, 4);
    return p ? mgr_get_u32(p, 0) : 0;
}

uint64_t mgr_r_u64(mgr_rbuf_t *r)
{
    const uint8_t *p = mgr_r_bytes(r, 8);
    return p ? mgr_get_u64(p, 0) : 0;
}

void mgr_r_str(mgr_rbuf_t *r, char *dst, size_t dstlen)
{
    uint16_t n = mgr_r_u16(r);
    const uint8_t *p = mgr_r_bytes(r, n);
    if (dstlen)
        dst[0] = '\0';
    if (p == NULL || (size_t)n >= dstlen) {
        r->err = 1;
        return;
    }
    for (uint16_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] == 0x7f) {
            r->err = 1;
            return;
        }
    }
    memcpy(dst, p, n);
    dst[n] = '\0';
}

const char *mgr_r_text(mgr_rbuf_t *r, size_t max, size_t *n_p)
{
    uint32_t n = mgr_r_u32(r);
    const uint8_t *p;
    if (n > max) {
        r->err = 1;
        return NULL;
    }
    p = mgr_r_bytes(r, n);
    if (p == NULL)
        return NULL;
    *n_p = n;
    return (const char *)p;
}

int mgr_r_done(const mgr_rbuf_t *r)
{
    return r->err || r->off != r->len ? -1 : 0;
}

/* ---- messages ---- */

void mgr_enc_caps(mgr_wbuf_t *w, const mgr_caps_t *c)
{
    mgr_w_u32(w, c->ops);
    mgr_w_u32(w, c->dtypes);
    mgr_w_u32(w, c->max_payload);
    mgr_w_u32(w, c->slots);
    mgr_w_u32(w, c->max_groups);
    mgr_w_u64(w, c->buffer_bytes);
}

void mgr_dec_caps(mgr_rbuf_t *r, mgr_caps_t *c)
{
    c->ops = mgr_r_u32(r);
    c->dtypes = mgr_r_u32(r);
    c->max_payload = mgr_r_u32(r);
    c->slots = mgr_r_u32(r);
    c->max_groups = mgr_r_u32(r);
    c->buffer_bytes = mgr_r_u64(r);
}

static incoll_status_t bad(const char **why_p, const char *why)
{
    if (why_p)
        *why_p = why;
    return INCOLL_ERR_PROTOCOL;
}

void mgr_enc_an_group(mgr_wbuf_t *w, const mgr_an_group_t *g)
{
    mgr_w_u32(w, g->id);
    mgr_w_u64(w, g->key);
    mgr_w_u32(w, (uint32_t)g->rec_len);
    mgr_w_bytes(w, g->rec, g->rec_len);
}

void mgr_enc_an_register(mgr_wbuf_t *w, const mgr_an_register_t *m)
{
    mgr_w_str(w, m->name);
    mgr_w_u64(w, m->ep);
    mgr_enc_caps(w, &m->caps);
    mgr_w_u32(w, m->ngroups);
    mgr_w_bytes(w, m->groups, m->groups_len);
}

incoll_status_t mgr_dec_an_register(const uint8_t *p, size_t n,
                                    mgr_an_register_t *m, const char **why_p)
{
    mgr_rbuf_t r = {p, n, 0, 0};
    size_t start;

    memset(m, 0, sizeof(*m));
    mgr_r_str(&r, m->name, sizeof(m->name));
    if (r.err || m->name[0] == '\0')
        return bad(why_p, "an name");
    m->ep = mgr_r_u64(&r);
    if (m->ep == INCOLL_EP_NONE || (m->ep & 0xffff) == 0 || (m->ep >> 48))
        return bad(why_p, "an endpoint");
    mgr_dec_caps(&r, &m->caps);
    if (r.err || m->caps.max_payload < 8 ||
        m->caps.max_payload > WIRE_MAX_PAYLOAD || m->caps.slots == 0 ||
        m->caps.max_groups == 0)
        return bad(why_p, "capabilities");
    m->ngroups = mgr_r_u32(&r);
    if (r.err || m->ngroups > 1u << 20)
        return bad(why_p, "group count");
    start = r.off;
    for (uint32_t i = 0; i < m->ngroups; i++) {
        uint32_t id = mgr_r_u32(&r), len;
        mgr_r_u64(&r);
        len = mgr_r_u32(&r);
        if (r.err || id == 0 || mgr_r_bytes(&r, len) == NULL)
            return bad(why_p, "group entry");
    }
    if (mgr_r_done(&r))
        return bad(why_p, "trailing bytes");
    m->groups = p + start;
    m->groups_len = n - start;
    return INCOLL_OK;
}

void mgr_an_group_at(const mgr_an_register_t *m, uint32_t i, mgr_an_group_t *g)
{
    mgr_rbuf_t r = {m->groups, m->groups_len, 0, 0};
    memset(g, 0, sizeof(*g));
    for (uint32_t k = 0; k <= i && !r.err; k++) {
        g->id = mgr_r_u32(&r);
        g->key = mgr_r_u64(&r);
        g->rec_len = mgr_r_u32(&r);
        g->rec = mgr_r_bytes(&r, g->rec_len);
    }
}

void mgr_enc_group_add(mgr_wbuf_t *w, const mgr_group_add_t *m)
{
    mgr_w_u32(w, m->id);
    mgr_w_u64(w, m->key);
    mgr_w_u32(w, m->slots);
    mgr_w_u32(w, m->payload);
    mgr_w_u64(w, m->parent);
    mgr_w_u16(w, m->index_at_parent);
    mgr_w_u16(w, m->nchildren);
    mgr_w_bytes(w, m->children, (size_t)m->nchildren * 8);
    mgr_w_u32(w, (uint32_t)m->rec_len);
    mgr_w_bytes(w, m->rec, m->rec_len);
}

incoll_status_t mgr_dec_group_add(const uint8_t *p, size_t n,
                                  mgr_group_add_t *m, const char **why_p)
{
    mgr_rbuf_t r = {p, n, 0, 0};
    uint32_t rec_len;

    memset(m, 0, sizeof(*m));
    m->id = mgr_r_u32(&r);
    m->key = mgr_r_u64(&r);
    m->slots = mgr_r_u32(&r);
    m->payload = mgr_r_u32(&r);
    m->parent = mgr_r_u64(&r);
    m->index_at_parent = mgr_r_u16(&r);
    m->nchildren = mgr_r_u16(&r);
    if (r.err)
        return bad(why_p, "truncated");
    if (m->id == 0)
        return bad(why_p, "group id 0");
    if (m->slots < 1 || m->slots > 65535)
        return bad(why_p, "slots");
    if (m->payload < 8 || m->payload > WIRE_MAX_PAYLOAD)
        return bad(why_p, "payload");
    if (m->nchildren < 1 || m->nchildren > MGR_MAX_CHILDREN)
        return bad(why_p, "child count");
    m->children = mgr_r_bytes(&r, (size_t)m->nchildren * 8);
    rec_len = mgr_r_u32(&r);
    m->rec = mgr_r_bytes(&r, rec_len);
    m->rec_len = rec_len;
    if (m->children == NULL || m->rec == NULL || mgr_r_done(&r))
        return bad(why_p, "children or record length");
    return INCOLL_OK;
}

void mgr_enc_join(mgr_wbuf_t *w, const mgr_join_t *m)
{
    mgr_w_str(w, m->job);
    mgr_w_u32(w, (uint32_t)m->rank);
    mgr_w_u32(w, (uint32_t)m->size);
    mgr_w_str(w, m->host);
    mgr_w_u64(w, m->ep);
    mgr_w_u32(w, m->pid);
}

incoll_status_t mgr_dec_join(const uint8_t *p, size_t n, mgr_join_t *m,
                             const char **why_p)
{
    mgr_rbuf_t r = {p, n, 0, 0};

    memset(m, 0, sizeof(*m));
    mgr_r_str(&r, m->job, sizeof(m->job));
    if (r.err || m->job[0] == '\0')
        return bad(why_p, "job name");
    m->rank = (int32_t)mgr_r_u32(&r);
    m->size = (int32_t)mgr_r_u32(&r);
    if (r.err || m->size < 1 || m->size > MGR_MAX_MEMBERS || m->rank < 0 ||
        m->rank >= m->size)
        return bad(why_p, "rank or size");
    mgr_r_str(&r, m->host, sizeof(m->host));
    if (r.err)
        return bad(why_p, "host name");
    m->ep = mgr_r_u64(&r);
    m->pid = mgr_r_u32(&r);
    if (r.err || m->ep == INCOLL_EP_NONE || (m->ep & 0xffff) == 0 ||
        (m->ep >> 48))
        return bad(why_p, "udp endpoint");
    if (mgr_r_done(&r))
        return bad(why_p, "trailing bytes");
    return INCOLL_OK;
}

void mgr_enc_group_req(mgr_wbuf_t *w, const mgr_group_req_t *m)
{
    mgr_w_u32(w, m->req);
    mgr_w_u64(w, m->comm);
    mgr_w_u32(w, m->gen);
    mgr_w_u32(w, m->slots);
    mgr_w_u32(w, m->payload);
    mgr_w_u64(w, m->opseq);
    mgr_w_u32(w, m->nmembers);
    mgr_w_bytes(w, m->members, (size_t)m->nmembers * 4);
}

incoll_status_t mgr_dec_group_req(const uint8_t *p, size_t n,
                                  mgr_group_req_t *m, const char **why_p)
{
    mgr_rbuf_t r = {p, n, 0, 0};

    memset(m, 0, sizeof(*m));
    m->req = mgr_r_u32(&r);
    m->comm = mgr_r_u64(&r);
    m->gen = mgr_r_u32(&r);
    m->slots = mgr_r_u32(&r);
    m->payload = mgr_r_u32(&r);
    m->opseq = mgr_r_u64(&r);
    m->nmembers = mgr_r_u32(&r);
    if (r.err)
        return bad(why_p, "truncated");
    if (m->slots > 65535)
        return bad(why_p, "slots");
    if (m->payload != 0 && (m->payload < 8 || m->payload > WIRE_MAX_PAYLOAD))
        return bad(why_p, "payload");
    if (m->nmembers < 1 || m->nmembers > MGR_MAX_MEMBERS)
        return bad(why_p, "member count");
    m->members = mgr_r_bytes(&r, (size_t)m->nmembers * 4);
    if (m->members == NULL || mgr_r_done(&r))
        return bad(why_p, "member list length");
    return INCOLL_OK;
}

void mgr_enc_group_info(mgr_wbuf_t *w, const mgr_group_info_t *m)
{
    mgr_w_u32(w, m->req);
    mgr_w_u64(w, m->comm);
    mgr_w_u32(w, m->gen);
    mgr_w_u32(w, (uint32_t)m->status);
    mgr_w_str(w, m->reason);
    mgr_w_u32(w, m->group);
    mgr_w_u64(w, m->key);
    mgr_w_u16(w, m->child);
    mgr_w_u64(w, m->an);
    mgr_w_u32(w, m->slots);
    mgr_w_u32(w, m->payload);
    mgr_w_u32(w, m->ops);
    mgr_w_u32(w, m->dtypes);
    mgr_w_u64(w, m->opseq_min);
    mgr_w_u64(w, m->opseq_max);
    mgr_w_u32(w, m->nmembers);
    mgr_w_bytes(w, m->peers, (size_t)m->nmembers * 8);
}

incoll_status_t mgr_dec_group_info(const uint8_t *p, size_t n,
                                   mgr_group_info_t *m, const char **why_p)
{
    mgr_rbuf_t r = {p, n, 0, 0};

    memset(m, 0, sizeof(*m));
    m->req = mgr_r_u32(&r);
    m->comm = mgr_r_u64(&r);
    m->gen = mgr_r_u32(&r);
    m->status = (int32_t)mgr_r_u32(&r);
    mgr_r_str(&r, m->reason, sizeof(m->reason));
    m->group = mgr_r_u32(&r);
    m->key = mgr_r_u64(&r);
    m->child = mgr_r_u16(&r);
    m->an = mgr_r_u64(&r);
    m->slots = mgr_r_u32(&r);
    m->payload = mgr_r_u32(&r);
    m->ops = mgr_r_u32(&r);
    m->dtypes = mgr_r_u32(&r);
    m->opseq_min = mgr_r_u64(&r);
    m->opseq_max = mgr_r_u64(&r);
    m->nmembers = mgr_r_u32(&r);
    if (r.err)
        return bad(why_p, "truncated");
    if (m->opseq_min > m->opseq_max)
        return bad(why_p, "opseq range");
    if (m->status > 0 || m->status < -64)
        return bad(why_p, "status");
    if (m->status == INCOLL_OK &&
        (m->group == 0 || m->slots < 1 || m->slots > 65535 ||
         m->payload < 8 || m->payload > WIRE_MAX_PAYLOAD ||
         m->an == INCOLL_EP_NONE || m->child >= MGR_MAX_CHILDREN))
        return bad(why_p, "group fields");
    if (m->nmembers < 1 || m->nmembers > MGR_MAX_MEMBERS)
        return bad(why_p, "member count");
    m->peers = mgr_r_bytes(&r, (size_t)m->nmembers * 8);
    if (m->peers == NULL || mgr_r_done(&r))
        return bad(why_p, "peer list length");
    return INCOLL_OK;
}

const char *mgr_msg_name(uint16_t type)
{
    switch (type) {
    case MGR_HELLO: return "hello";
    case MGR_AUTH: return "auth";
    case MGR_AUTH_OK: return "auth_ok";
    case MGR_AUTH_FAIL: return "auth_fail";
    case MGR_ERROR: return "error";
    case MGR_BYE: return "bye";
    case MGR_AN_REGISTER: return "an_register";
    case MGR_AN_REGISTER_OK: return "an_register_ok";
    case MGR_AN_HEARTBEAT: return "an_heartbeat";
    case MGR_AN_PONG: return "an_pong";
    case MGR_GROUP_ADD: return "group_add";
    case MGR_GROUP_REMOVE: return "group_remove";
    case MGR_GROUP_ACK: return "group_ack";
    case MGR_JOIN: return "join";
    case MGR_JOIN_OK: return "join_ok";
    case MGR_GROUP_REQ: return "group_req";
    case MGR_GROUP_INFO: return "group_info";
    case MGR_GROUP_RELEASE: return "group_release";
    case MGR_GROUP_FAILED: return "group_failed";
    case MGR_STAT_REQ: return "stat_req";
    case MGR_STAT_REP: return "stat_rep";
    default: return "unknown";
    }
}

/* ---- secret ---- */

incoll_status_t mgr_secret_generate(const char *path)
{
#ifdef INCOLL_HAVE_SODIUM
    uint8_t raw[32];
    char hex[65 + 1];
    int fd;
    ssize_t n;

    if (sodium_init() < 0)
        return INCOLL_ERR_UNSUPPORTED;
    randombytes_buf(raw, sizeof(raw));
    sodium_bin2hex(hex, 65, raw, sizeof(raw));
    sodium_memzero(raw, sizeof(raw));
    hex[64] = '\n';
    hex[65] = '\0';
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        incoll_error("secret %s: cannot create: %s", path, strerror(errno));
        return INCOLL_ERR_IO;
    }
    n = write(fd, hex, 65);
    sodium_memzero(hex, sizeof(hex));
    if (fchmod(fd, 0600) != 0 || n != 65 || close(fd) != 0) {
        incoll_error("secret %s: cannot write: %s", path, strerror(errno));
        unlink(path);
        return INCOLL_ERR_IO;
    }
    return INCOLL_OK;
#else
    incoll_error("secret %s: incoll was built without libsodium", path);
    return INCOLL_ERR_UNSUPPORTED;
#endif
}

incoll_status_t mgr_secret_load(const char *path, uint8_t key[MGR_KEY_LEN],
                                char *err, size_t errlen)
{
#ifdef INCOLL_HAVE_SODIUM
    uint8_t buf[4097];
    struct stat sb;
    ssize_t n;
    size_t len;
    int fd;

    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialize");
        return INCOLL_ERR_UNSUPPORTED;
    }
    if (path == NULL || *path == '\0') {
        snprintf(err, errlen, "no secret file (set INCOLL_SECRET_FILE)");
        return INCOLL_ERR_CONFIG;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "secret %s: cannot open: %s", path,
                 strerror(errno));
        return INCOLL_ERR_CONFIG;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "secret %s: not a regular file", path);
        close(fd);
        return INCOLL_ERR_CONFIG;
    }
    if (sb.st_mode & 077)
        incoll_warn("secret %s: readable by others (mode %03o); chmod 600 it",
                    path, (unsigned)(sb.st_mode & 0777));
    n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n < 0 || n == (ssize_t)sizeof(buf)) {
        snprintf(err, errlen, "secret %s: %s", path,
                 n < 0 ? strerror(errno) : "longer than 4096 bytes");
        sodium_memzero(buf, sizeof(buf));
        return INCOLL_ERR_CONFIG;
    }
    len = (size_t)n;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
                       buf[len - 1] == ' ' || buf[len - 1] == '\t'))
        len--;
    if (len < 16) {
        snprintf(err, errlen, "secret %s: shorter than 16 bytes", path);
        sodium_memzero(buf, sizeof(buf));
        return INCOLL_ERR_AUTH;
    }
    crypto_generichash(key, MGR_KEY_LEN, buf, len, NULL, 0);
    sodium_memzero(buf, sizeof(buf));
    return INCOLL_OK;
#else
    (void)key;
    snprintf(err, errlen, "secret %s: incoll was built without libsodium, so "
                          "the manager cannot be used",
             path ? path : "");
    return INCOLL_ERR_UNSUPPORTED;
#endif
}

/* ---- stream ---- */

#define RX_CHUNK 65536u
#define TX_LIMIT_DEFAULT (64u << 20)

#ifdef INCOLL_HAVE_SODIUM
static const char label_client[] = "incoll-mgr v1 client proof";
static const char label_server[] = "incoll-mgr v1 server proof";
static const char label_c2s[] = "incoll-mgr v1 c2s";
static const char label_s2c[] = "incoll-mgr v1 s2c";

/* HMAC-SHA512-256 under key over label, both nonces and the role. */
static void proof(const uint8_t key[MGR_KEY_LEN], const char *label,
                  const uint8_t *snonce, const uint8_t *cnonce, uint8_t role,
                  uint8_t out[MGR_MAC_LEN])
{
    crypto_auth_hmacsha512256_state s;
    crypto_auth_hmacsha512256_init(&s, key, MGR_KEY_LEN);
    crypto_auth_hmacsha512256_update(&s, (const uint8_t *)label, strlen(label));
    crypto_auth_hmacsha512256_update(&s, snonce, MGR_NONCE_LEN);
    crypto_auth_hmacsha512256_update(&s, cnonce, MGR_NONCE_LEN);
    crypto_auth_hmacsha512256_update(&s, &role, 1);
    crypto_auth_hmacsha512256_final(&s, out);
    sodium_memzero(&s, sizeof(s));
}

static void derive(const uint8_t key[MGR_KEY_LEN], const char *label,
                   const uint8_t *snonce, const uint8_t *cnonce,
                   uint8_t out[MGR_KEY_LEN])
{
    crypto_generichash_state s;
    crypto_generichash_init(&s, key, MGR_KEY_LEN, MGR_KEY_LEN);
    crypto_generichash_update(&s, (const uint8_t *)label, strlen(label));
    crypto_generichash_update(&s, snonce, MGR_NONCE_LEN);
    crypto_generichash_update(&s, cnonce, MGR_NONCE_LEN);
    crypto_generichash_final(&s, out, MGR_KEY_LEN);
    sodium_memzero(&s, sizeof(s));
}

static void frame_mac(const uint8_t key[MGR_KEY_LEN], uint64_t seq,
                      const uint8_t *type_and_body, size_t n,
                      uint8_t out[MGR_MAC_LEN])
{
    crypto_auth_hmacsha512256_state s;
    uint8_t sb[8];
    for (int i = 0; i < 8; i++)
        sb[i] = (uint8_t)(seq >> (8 * i));
    crypto_auth_hmacsha512256_init(&s, key, MGR_KEY_LEN);
    crypto_auth_hmacsha512256_update(&s, sb, 8);
    crypto_auth_hmacsha512256_update(&s, type_and_body, n);
    crypto_auth_hmacsha512256_final(&s, out);
}

static void session_keys(mgr_stream_t *st)
{
    derive(st->key, st->server ? label_s2c : label_c2s, st->snonce, st->cnonce,
           st->k_tx);
    derive(st->key, st->server ? label_c2s : label_s2c, st->snonce, st->cnonce,
           st->k_rx);
    st->seq_tx = 0;
    st->seq_rx = 0;
}
#endif

static incoll_status_t queue(mgr_stream_t *st, uint16_t type, const void *body,
                             size_t len, int with_mac)
{
    size_t flen = 2 + len + (with_mac ? MGR_MAC_LEN : 0), need;
    uint8_t *p;

    if (flen > MGR_MAX_FRAME)
        return INCOLL_ERR_INVALID_ARG;
    if (st->tx_off > 0 && st->tx_off == st->tx_len)
        st->tx_off = st->tx_len = 0;
    need = st->tx_len + 4 + flen;
    if (need - st->tx_off > st->tx_limit)
        return INCOLL_ERR_BUSY;
    if (need > st->tx_cap) {
        size_t ncap = st->tx_cap ? st->tx_cap : 4096;
        uint8_t *nb;
        if (st->tx_off > 0) {
            memmove(st->tx, st->tx + st->tx_off, st->tx_len - st->tx_off);
            st->tx_len -= st->tx_off;
            st->tx_off = 0;
            need = st->tx_len + 4 + flen;
        }
        while (ncap < need)
            ncap *= 2;
        if (ncap > st->tx_cap) {
            nb = realloc(st->tx, ncap);
            if (nb == NULL)
                return INCOLL_ERR_NO_MEMORY;
            st->tx = nb;
            st->tx_cap = ncap;
        }
    }
    p = st->tx + st->tx_len;
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(flen >> (8 * i));
    p[4] = (uint8_t)type;
    p[5] = (uint8_t)(type >> 8);
    if (len)
        memcpy(p + 6, body, len);
#ifdef INCOLL_HAVE_SODIUM
    if (with_mac)
        frame_mac(st->k_tx, st->seq_tx++, p + 4, 2 + len, p + 6 + len);
#endif
    st->tx_len += 4 + flen;
    return INCOLL_OK;
}

incoll_status_t mgr_stream_send(mgr_stream_t *st, uint16_t type,
                                const void *body, size_t len)
{
    if (st->state != MGR_ST_READY)
        return INCOLL_ERR_INVALID_ARG;
    return queue(st, type, body, len, 1);
}

incoll_status_t mgr_stream_send_plain(mgr_stream_t *st, uint16_t type,
                                      const void *body, size_t len)
{
    if (len + 2 > MGR_MAX_HS_FRAME)
        return INCOLL_ERR_INVALID_ARG;
    return queue(st, type, body, len, 0);
}

incoll_status_t mgr_stream_init(mgr_stream_t *st, int fd, int server,
                                 int role, const uint8_t key[MGR_KEY_LEN])
{
    memset(st, 0, sizeof(*st));
    st->fd = fd;
    st->server = server;
    st->role = server ? 0 : role;
    st->tx_limit = TX_LIMIT_DEFAULT;
#ifdef INCOLL_HAVE_SODIUM
    if (sodium_init() < 0)
        return INCOLL_ERR_UNSUPPORTED;
    memcpy(st->key, key, MGR_KEY_LEN);
    if (server) {
        mgr_wbuf_t w = {0};
        incoll_status_t status;
        randombytes_buf(st->snonce, MGR_NONCE_LEN);
        mgr_w_u32(&w, MGR_PROTO_MAGIC);
        mgr_w_u16(&w, MGR_PROTO_VERSION);
        mgr_w_bytes(&w, st->snonce, MGR_NONCE_LEN);
        status = w.oom ? INCOLL_ERR_NO_MEMORY
                       : mgr_stream_send_plain(st, MGR_HELLO, w.buf, w.len);
        mgr_wbuf_free(&w);
        st->state = MGR_ST_AUTH;
        return status;
    }
    st->state = MGR_ST_HELLO;
    return INCOLL_OK;
#else
    (void)key;
    return INCOLL_ERR_UNSUPPORTED;
#endif
}

void mgr_stream_close(mgr_stream_t *st)
{
    if (st->fd >= 0)
        close(st->fd);
    st->fd = -1;
    free(st->rx);
    free(st->tx);
    st->rx = st->tx = NULL;
    st->rx_len = st->rx_cap = st->rx_off = 0;
    st->tx_len = st->tx_cap = st->tx_off = 0;
#ifdef INCOLL_HAVE_SODIUM
    sodium_memzero(st->key, sizeof(st->key));
    sodium_memzero(st->k_tx, sizeof(st->k_tx));
    sodium_memzero(st->k_rx, sizeof(st->k_rx));
#endif
    st->state = MGR_ST_FAILED;
}

int mgr_stream_read(mgr_stream_t *st, const char **why_p)
{
    size_t max_cap =
        4 + (st->max_frame ? st->max_frame : MGR_MAX_FRAME) + RX_CHUNK;

    for (;;) {
        ssize_t n;
        if (st->rx_off > 0) {
            memmove(st->rx, st->rx + st->rx_off, st->rx_len - st->rx_off);
            st->rx_len -= st->rx_off;
            st->rx_off = 0;
        }
        if (st->rx_cap - st->rx_len < RX_CHUNK) {
            size_t ncap = st->rx_cap ? st->rx_cap * 2 : RX_CHUNK * 2;
            uint8_t *nb;
            if (ncap > max_cap)
                ncap = max_cap;
            if (ncap <= st->rx_len) /* full: let next() take frames out */
                return 0;
            nb = realloc(st->rx, ncap);
            if (nb == NULL) {
                *why_p = "out of memory";
                return -1;
            }
            st->rx = nb;
            st->rx_cap = ncap;
        }
        n = recv(st->fd, st->rx + st->rx_len, st->rx_cap - st->rx_len, 0);
        if (n > 0) {
            st->rx_len += (size_t)n;
            if (st->rx_len < st->rx_cap)
                return 0;
            continue;
        }
        if (n == 0) {
            *why_p = "connection closed by the peer";
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        *why_p = strerror(errno);
        return -1;
    }
}

int mgr_stream_flush(mgr_stream_t *st)
{
    while (st->tx_off < st->tx_len) {
        ssize_t n = send(st->fd, st->tx + st->tx_off, st->tx_len - st->tx_off,
                         MSG_NOSIGNAL);
        if (n > 0) {
            st->tx_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return -1;
    }
    st->tx_off = st->tx_len = 0;
    return 0;
}

size_t mgr_stream_pending(const mgr_stream_t *st)
{
    return st->tx_len - st->tx_off;
}

size_t mgr_stream_partial(const mgr_stream_t *st, size_t *frame_p)
{
    size_t avail = st->rx_len - st->rx_off;
    *frame_p = avail >= 4 ? 4 + (size_t)mgr_get_u32(st->rx + st->rx_off, 0) : 0;
    return avail;
}

void mgr_stream_trim(mgr_stream_t *st)
{
    size_t avail = st->rx_len - st->rx_off, want;
    uint8_t *nb;

    if (st->rx_cap <= 2 * RX_CHUNK)
        return;
    if (avail == 0) {
        free(st->rx);
        st->rx = NULL;
        st->rx_len = st->rx_cap = st->rx_off = 0;
        return;
    }
    want = 2 * RX_CHUNK;
    while (want < avail + RX_CHUNK)
        want *= 2;
    if (want >= st->rx_cap)
        return;
    memmove(st->rx, st->rx + st->rx_off, avail);
    st->rx_len = avail;
    st->rx_off = 0;
    nb = realloc(st->rx, want);
    if (nb != NULL) {
        st->rx = nb;
        st->rx_cap = want;
    }
}

#ifdef INCOLL_HAVE_SODIUM
/* Handles one handshake frame. Returns MGR_NEXT_NONE to go on,
 * MGR_NEXT_READY when done, MGR_NEXT_ERROR. */
static mgr_next_t handshake(mgr_stream_t *st, uint16_t type,
                            const uint8_t *body, size_t len, const char **why_p)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint8_t want[MGR_MAC_LEN];

    if (st->server && st->state == MGR_ST_AUTH) {
        uint16_t version;
        uint8_t role;
        const uint8_t *cn, *pr;
        if (type != MGR_AUTH) {
            *why_p = "expected auth";
            return MGR_NEXT_ERROR;
        }
        version = mgr_r_u16(&r);
        role = mgr_r_u8(&r);
        cn = mgr_r_bytes(&r, MGR_NONCE_LEN);
        pr = mgr_r_bytes(&r, MGR_MAC_LEN);
        if (mgr_r_done(&r)) {
            *why_p = "malformed auth";
            return MGR_NEXT_ERROR;
        }
        if (version != MGR_PROTO_VERSION) {
            *why_p = "unsupported protocol version";
            return MGR_NEXT_ERROR;
        }
        if (role < MGR_ROLE_AN || role > MGR_ROLE_TOOL) {
            *why_p = "unknown role";
            return MGR_NEXT_ERROR;
        }
        memcpy(st->cnonce, cn, MGR_NONCE_LEN);
        proof(st->key, label_client, st->snonce, st->cnonce, role, want);
        if (sodium_memcmp(want, pr, MGR_MAC_LEN) != 0) {
            static const char msg[] = "authentication failed";
            mgr_wbuf_t w = {0};
            mgr_w_str(&w, msg);
            if (!w.oom)
                mgr_stream_send_plain(st, MGR_AUTH_FAIL, w.buf, w.len);
            mgr_wbuf_free(&w);
            *why_p = "wrong proof of the fabric secret";
            st->state = MGR_ST_FAILED;
            return MGR_NEXT_ERROR;
        }
        st->role = role;
        proof(st->key, label_server, st->snonce, st->cnonce, role, want);
        if (mgr_stream_send_plain(st, MGR_AUTH_OK, want, MGR_MAC_LEN) !=
            INCOLL_OK) {
            *why_p = "out of memory";
            return MGR_NEXT_ERROR;
        }
        session_keys(st);
        st->state = MGR_ST_READY;
        return MGR_NEXT_READY;
    }
    if (!st->server && st->state == MGR_ST_HELLO) {
        uint32_t magic;
        uint16_t version;
        const uint8_t *sn;
        mgr_wbuf_t w = {0};
        incoll_status_t status;
        if (type != MGR_HELLO) {
            *why_p = "expected hello";
            return MGR_NEXT_ERROR;
        }
        magic = mgr_r_u32(&r);
        version = mgr_r_u16(&r);
        sn = mgr_r_bytes(&r, MGR_NONCE_LEN);
        if (mgr_r_done(&r) || magic != MGR_PROTO_MAGIC) {
            *why_p = "not an incoll manager";
            return MGR_NEXT_ERROR;
        }
        if (version != MGR_PROTO_VERSION) {
            *why_p = "unsupported protocol version";
            return MGR_NEXT_ERROR;
        }
        memcpy(st->snonce, sn, MGR_NONCE_LEN);
        randombytes_buf(st->cnonce, MGR_NONCE_LEN);
        proof(st->key, label_client, st->snonce, st->cnonce, (uint8_t)st->role,
              want);
        mgr_w_u16(&w, MGR_PROTO_VERSION);
        mgr_w_u8(&w, (uint8_t)st->role);
        mgr_w_bytes(&w, st->cnonce, MGR_NONCE_LEN);
        mgr_w_bytes(&w, want, MGR_MAC_LEN);
        status = w.oom ? INCOLL_ERR_NO_MEMORY
                       : mgr_stream_send_plain(st, MGR_AUTH, w.buf, w.len);
        mgr_wbuf_free(&w);
        if (status != INCOLL_OK) {
            *why_p = "out of memory";
            return MGR_NEXT_ERROR;
        }
        st->state = MGR_ST_AUTH;
        return MGR_NEXT_NONE;
    }
    if (!st->server && st->state == MGR_ST_AUTH) {
        if (type == MGR_AUTH_FAIL) {
            *why_p = "the manager refused our proof of the fabric secret "
                     "(different INCOLL_SECRET_FILE?)";
            return MGR_NEXT_ERROR;
        }
        if (type != MGR_AUTH_OK || len != MGR_MAC_LEN) {
            *why_p = "expected auth_ok";
            return MGR_NEXT_ERROR;
        }
        proof(st->key, label_server, st->snonce, st->cnonce, (uint8_t)st->role,
              want);
        if (sodium_memcmp(want, body, MGR_MAC_LEN) != 0) {
            *why_p = "the manager does not know the fabric secret";
            return MGR_NEXT_ERROR;
        }
        session_keys(st);
        st->state = MGR_ST_READY;
        return MGR_NEXT_READY;
    }
    *why_p = "unexpected handshake state";
    return MGR_NEXT_ERROR;
}
#endif

mgr_next_t mgr_stream_next(mgr_stream_t *st, uint16_t *type_p,
                           const uint8_t **body_p, size_t *len_p,
                           const char **why_p)
{
#ifdef INCOLL_HAVE_SODIUM
    for (;;) {
        size_t avail = st->rx_len - st->rx_off, limit, blen;
        const uint8_t *p = st->rx + st->rx_off;
        uint32_t flen;
        uint16_t type;
        int ready = st->state == MGR_ST_READY;
        mgr_next_t r;

        if (st->state == MGR_ST_FAILED) {
            *why_p = "stream failed";
            return MGR_NEXT_ERROR;
        }
        if (avail < 4)
            return MGR_NEXT_NONE;
        flen = mgr_get_u32(p, 0);
        limit = !ready ? MGR_MAX_HS_FRAME
                : st->max_frame ? st->max_frame : MGR_MAX_FRAME;
        if (flen < 2 + (ready ? MGR_MAC_LEN : 0)) {
            *why_p = "bad frame length";
            st->state = MGR_ST_FAILED;
            return MGR_NEXT_ERROR;
        }
        if (flen > limit) {
            snprintf(st->why, sizeof(st->why),
                     "frame of %" PRIu32 " bytes over the limit of %zu%s",
                     flen, limit, ready ? "" : " during the handshake");
            *why_p = st->why;
            st->state = MGR_ST_FAILED;
            return MGR_NEXT_ERROR;
        }
        if (avail < 4 + (size_t)flen)
            return MGR_NEXT_NONE;
        type = (uint16_t)(p[4] | p[5] << 8);
        blen = flen - 2 - (ready ? MGR_MAC_LEN : 0);
        st->rx_off += 4 + flen;
        if (!ready) {
            r = handshake(st, type, p + 6, blen, why_p);
            if (r == MGR_NEXT_ERROR) {
                st->state = MGR_ST_FAILED;
                return r;
            }
            if (r == MGR_NEXT_READY)
                return r;
            continue;
        }
        {
            uint8_t mac[MGR_MAC_LEN];
            frame_mac(st->k_rx, st->seq_rx, p + 4, 2 + blen, mac);
            if (sodium_memcmp(mac, p + 6 + blen, MGR_MAC_LEN) != 0) {
                *why_p = "bad frame mac";
                st->state = MGR_ST_FAILED;
                return MGR_NEXT_ERROR;
            }
        }
        st->seq_rx++;
        if (type < MGR_ERROR) {
            *why_p = "handshake frame after the handshake";
            st->state = MGR_ST_FAILED;
            return MGR_NEXT_ERROR;
        }
        *type_p = type;
        *body_p = p + 6;
        *len_p = blen;
        return MGR_NEXT_FRAME;
    }
#else
    (void)st;
    (void)type_p;
    (void)body_p;
    (void)len_p;
    *why_p = "built without libsodium";
    return MGR_NEXT_ERROR;
#endif
}

incoll_status_t mgr_parse_addr(const char *addr, uint32_t *ip_p,
                               uint16_t *port_p)
{
    char host[256];
    const char *colon;
    char *end;
    unsigned long port;
    struct in_addr in;

    if (addr == NULL)
        return INCOLL_ERR_INVALID_ARG;
    colon = strrchr(addr, ':');
    if (colon == NULL || colon == addr || (size_t)(colon - addr) >= sizeof(host))
        return INCOLL_ERR_INVALID_ARG;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    errno = 0;
    port = strtoul(colon + 1, &end, 10);
    if (errno || *end || colon[1] == '\0' || port > 65535)
        return INCOLL_ERR_INVALID_ARG;
    if (inet_pton(AF_INET, host, &in) != 1) {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
            return INCOLL_ERR_INVALID_ARG;
        in = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
        freeaddrinfo(res);
    }
    *ip_p = ntohl(in.s_addr);
    *port_p = (uint16_t)port;
    return INCOLL_OK;
}

int mgr_connect(const char *addr, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    uint32_t ip;
    uint16_t port;
    int fd, one = 1;

    if (mgr_parse_addr(addr, &ip, &port) != INCOLL_OK || port == 0) {
        snprintf(err, errlen, "manager address '%s' is not HOST:PORT",
                 addr ? addr : "");
        return -1;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
        errno != EINPROGRESS) {
        snprintf(err, errlen, "connect to %s: %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}
