/*
 * The manager's control protocol, its messages: see mgr_codec.h and
 * docs/manager.md.
 */
#include "common/mgr_codec.h"

#include <stdlib.h>
#include <string.h>

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

void mgr_w_u8(mgr_wbuf_t *w, uint8_t v)
{
    mgr_w_bytes(w, &v, 1);
}

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
    mgr_w_u64(w, m->mcast);
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
    m->mcast = mgr_r_u64(&r);
    if (m->children == NULL || m->rec == NULL || mgr_r_done(&r))
        return bad(why_p, "children or record length");
    if (m->mcast != INCOLL_EP_NONE && m->mcast != 0 &&
        ((m->mcast >> 16) & 0xf0000000u) != 0xe0000000u)
        return bad(why_p, "multicast address");
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
    mgr_w_u64(w, m->mcast);
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
        (m->group == 0 || m->slots < 1 || m->slots > 65535 || m->payload < 8 ||
         m->payload > WIRE_MAX_PAYLOAD || m->an == INCOLL_EP_NONE ||
         m->child >= MGR_MAX_CHILDREN))
        return bad(why_p, "group fields");
    if (m->nmembers < 1 || m->nmembers > MGR_MAX_MEMBERS)
        return bad(why_p, "member count");
    m->peers = mgr_r_bytes(&r, (size_t)m->nmembers * 8);
    m->mcast = mgr_r_u64(&r);
    if (m->peers == NULL || mgr_r_done(&r))
        return bad(why_p, "peer list length");
    if (m->mcast != INCOLL_EP_NONE && m->mcast != 0 &&
        ((m->mcast >> 16) & 0xf0000000u) != 0xe0000000u)
        return bad(why_p, "multicast address");
    return INCOLL_OK;
}

void mgr_enc_group_shape(mgr_wbuf_t *w, const mgr_group_shape_t *m)
{
    mgr_w_u16(w, MGR_SHAPE_FORMAT);
    mgr_w_u32(w, m->req);
    mgr_w_u32(w, m->hosts);
    mgr_w_u32(w, m->ppn);
    mgr_w_u16(w, m->radix);
    mgr_w_u16(w, m->levels);
}

incoll_status_t mgr_dec_group_shape(const uint8_t *p, size_t n,
                                    mgr_group_shape_t *m, const char **why_p)
{
    mgr_rbuf_t r = {p, n, 0, 0};

    memset(m, 0, sizeof(*m));
    m->format = mgr_r_u16(&r);
    if (r.err)
        return bad(why_p, "truncated");
    if (m->format != MGR_SHAPE_FORMAT) {
        if (why_p)
            *why_p = "format";
        return INCOLL_ERR_UNSUPPORTED;
    }
    m->req = mgr_r_u32(&r);
    m->hosts = mgr_r_u32(&r);
    m->ppn = mgr_r_u32(&r);
    m->radix = mgr_r_u16(&r);
    m->levels = mgr_r_u16(&r);
    if (mgr_r_done(&r))
        return bad(why_p, "length");
    if (m->hosts > MGR_MAX_MEMBERS || m->ppn > MGR_MAX_MEMBERS ||
        (m->hosts == 0) != (m->ppn == 0))
        return bad(why_p, "hosts or ppn");
    return INCOLL_OK;
}

const char *mgr_fb_name(int reason)
{
    static const char *const names[MGR_FB_COUNT] = {
        "no_manager", "refused", "group_failed", "unsupported", "requested"};
    return reason >= 0 && reason < MGR_FB_COUNT ? names[reason] : "unknown";
}

void mgr_enc_usage(mgr_wbuf_t *w, const mgr_usage_entry_t *e, uint16_t n)
{
    mgr_w_u16(w, n);
    mgr_w_u8(w, MGR_FB_COUNT);
    for (uint16_t i = 0; i < n; i++) {
        mgr_w_u64(w, e[i].comm);
        mgr_w_u32(w, e[i].group);
        mgr_w_u64(w, e[i].ops_net);
        mgr_w_u64(w, e[i].ops_sw);
        for (int k = 0; k < MGR_FB_COUNT; k++)
            mgr_w_u64(w, e[i].fb[k]);
    }
}

/* Reads one entry of nreasons reasons; sets r->err on a short body. */
static void usage_read(mgr_rbuf_t *r, uint8_t nreasons, mgr_usage_entry_t *e)
{
    memset(e, 0, sizeof(*e));
    e->comm = mgr_r_u64(r);
    e->group = mgr_r_u32(r);
    e->ops_net = mgr_r_u64(r);
    e->ops_sw = mgr_r_u64(r);
    for (uint8_t k = 0; k < nreasons; k++)
        e->fb[k] = mgr_r_u64(r);
}

incoll_status_t mgr_dec_usage(const uint8_t *p, size_t n, mgr_usage_t *m,
                              const char **why_p)
{
    mgr_rbuf_t r = {p, n, 0, 0};
    size_t start;

    memset(m, 0, sizeof(*m));
    m->nentries = mgr_r_u16(&r);
    m->nreasons = mgr_r_u8(&r);
    if (r.err)
        return bad(why_p, "truncated");
    if (m->nentries < 1 || m->nentries > MGR_USAGE_MAX_ENTRIES)
        return bad(why_p, "entry count");
    if (m->nreasons < 1 || m->nreasons > MGR_FB_COUNT)
        return bad(why_p, "reason count");
    start = r.off;
    for (uint16_t i = 0; i < m->nentries; i++) {
        mgr_usage_entry_t e;
        uint64_t sum = 0;
        usage_read(&r, m->nreasons, &e);
        if (r.err)
            return bad(why_p, "entry length");
        if (e.ops_net > MGR_USAGE_MAX_COUNT || e.ops_sw > MGR_USAGE_MAX_COUNT)
            return bad(why_p, "operation count");
        for (uint8_t k = 0; k < m->nreasons; k++)
            sum += e.fb[k] > MGR_USAGE_MAX_COUNT ? MGR_USAGE_MAX_COUNT + 1
                                                 : e.fb[k];
        if (sum != e.ops_sw)
            return bad(why_p, "fallback counts (their sum is not ops_sw)");
        if (e.ops_net + e.ops_sw == 0)
            return bad(why_p, "empty entry");
    }
    if (mgr_r_done(&r))
        return bad(why_p, "trailing bytes");
    m->entries = p + start;
    m->entries_len = n - start;
    return INCOLL_OK;
}

void mgr_usage_at(const mgr_usage_t *m, uint16_t i, mgr_usage_entry_t *e)
{
    mgr_rbuf_t r = {m->entries, m->entries_len, 0, 0};
    for (uint16_t k = 0; k <= i && !r.err; k++)
        usage_read(&r, m->nreasons, e);
}

void mgr_enc_usage_proc(mgr_wbuf_t *w, const uint64_t v[MGR_PC_COUNT])
{
    mgr_w_u8(w, MGR_PC_VERSION);
    mgr_w_u8(w, MGR_PC_COUNT);
    for (int k = 0; k < MGR_PC_COUNT; k++)
        mgr_w_u64(w, v[k]);
}

incoll_status_t mgr_dec_usage_proc(const uint8_t *p, size_t n,
                                   uint64_t v[MGR_PC_COUNT], const char **why_p)
{
    mgr_rbuf_t r = {p, n, 0, 0};
    uint8_t version = mgr_r_u8(&r), count = mgr_r_u8(&r);

    memset(v, 0, MGR_PC_COUNT * sizeof(*v));
    if (r.err)
        return bad(why_p, "truncated");
    if (version != MGR_PC_VERSION)
        return bad(why_p, "a version this manager does not read (it reads "
                          "version 1: upgrade the manager)");
    if (count != MGR_PC_COUNT)
        return bad(why_p, "counter count");
    for (int k = 0; k < MGR_PC_COUNT; k++)
        if ((v[k] = mgr_r_u64(&r)) > MGR_USAGE_MAX_COUNT)
            return bad(why_p, "counter value");
    if (mgr_r_done(&r))
        return bad(why_p, "length");
    return INCOLL_OK;
}

#define MGR_PC_STR(id, stat, metric, help) stat,
static const char *const pc_names[MGR_PC_COUNT] = {MGR_PC_LIST(MGR_PC_STR)};
#undef MGR_PC_STR
#define MGR_PC_STR(id, stat, metric, help) metric,
static const char *const pc_metrics[MGR_PC_COUNT] = {MGR_PC_LIST(MGR_PC_STR)};
#undef MGR_PC_STR
#define MGR_PC_STR(id, stat, metric, help) help,
static const char *const pc_helps[MGR_PC_COUNT] = {MGR_PC_LIST(MGR_PC_STR)};
#undef MGR_PC_STR

const char *mgr_pc_name(int i)
{
    return i >= 0 && i < MGR_PC_COUNT ? pc_names[i] : "unknown";
}

const char *mgr_pc_metric(int i)
{
    return i >= 0 && i < MGR_PC_COUNT ? pc_metrics[i] : "unknown";
}

const char *mgr_pc_help(int i)
{
    return i >= 0 && i < MGR_PC_COUNT ? pc_helps[i] : "";
}

const char *mgr_msg_name(uint16_t type)
{
    switch (type) {
    case MGR_HELLO:
        return "hello";
    case MGR_AUTH:
        return "auth";
    case MGR_AUTH_OK:
        return "auth_ok";
    case MGR_AUTH_FAIL:
        return "auth_fail";
    case MGR_ERROR:
        return "error";
    case MGR_BYE:
        return "bye";
    case MGR_AN_REGISTER:
        return "an_register";
    case MGR_AN_REGISTER_OK:
        return "an_register_ok";
    case MGR_AN_HEARTBEAT:
        return "an_heartbeat";
    case MGR_AN_PONG:
        return "an_pong";
    case MGR_GROUP_ADD:
        return "group_add";
    case MGR_GROUP_REMOVE:
        return "group_remove";
    case MGR_GROUP_ACK:
        return "group_ack";
    case MGR_JOIN:
        return "join";
    case MGR_JOIN_OK:
        return "join_ok";
    case MGR_GROUP_REQ:
        return "group_req";
    case MGR_GROUP_INFO:
        return "group_info";
    case MGR_GROUP_RELEASE:
        return "group_release";
    case MGR_GROUP_FAILED:
        return "group_failed";
    case MGR_USAGE:
        return "usage";
    case MGR_USAGE_PROC:
        return "usage_proc";
    case MGR_TUNE:
        return "tune";
    case MGR_GROUP_SHAPE:
        return "group_shape";
    case MGR_STAT_REQ:
        return "stat_req";
    case MGR_STAT_REP:
        return "stat_rep";
    case MGR_JOB_REGISTER:
        return "job_register";
    case MGR_JOB_REGISTER_OK:
        return "job_register_ok";
    case MGR_JOB_END:
        return "job_end";
    case MGR_JOB_END_OK:
        return "job_end_ok";
    default:
        return "unknown";
    }
}
