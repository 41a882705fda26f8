/*
 * An AN's link to the manager; see agg_mgr_link.h and docs/manager.md.
 */
#include "agg/agg_mgr_link.h"

#include "common/log.h"
#include "common/settings.h"
#include "common/clock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define RETRY_MAX_MS 2000
#define HANDSHAKE_MS 5000
#define HB_MISSED 5 /* manager silent for this many heartbeats: reconnect */

/* A group the manager gave us, with its record (reported back on
 * re-registration). */
typedef struct lgroup {
    uint32_t id;
    uint64_t key;
    uint8_t *rec;
    size_t rec_len;
    struct lgroup *next;
} lgroup_t;

struct agg_mgr_link {
    char addr[256];
    char name[MGR_NAME_MAX];
    incoll_ep_t ep;
    mgr_caps_t caps;
    agg_t *agg;
    uint8_t key[MGR_KEY_LEN];
    int epfd; /* ours: socket + timer */
    int tfd;
    mgr_stream_t st;
    int connected; /* st holds a socket */
    int registered;
    int watching_out;
    uint32_t retry_ms;
    uint32_t retry_first;
    uint32_t heartbeat_ms;
    uint64_t next_retry;  /* while disconnected */
    uint64_t next_beat;   /* while registered */
    uint64_t last_rx;     /* anything from the manager */
    uint64_t hs_deadline; /* handshake and registration */
    uint64_t beat_seq;
    uint64_t boot_id;
    lgroup_t *groups;
    int ngroups;
};

/* What the AN offers the manager, from the settings (checked at start:
 * src/agg/agg_main.c). */
void agg_mgr_link_caps_from_env(mgr_caps_t *caps)
{
    caps->ops = (1u << INCOLL_OP_COUNT) - 1;
    caps->dtypes = (1u << INCOLL_DTYPE_COUNT) - 1;
    caps->max_payload = (uint32_t)setting_u64(SETTING_AGG_PAYLOAD);
    caps->slots = (uint32_t)setting_u64(SETTING_AGG_SLOTS);
    caps->max_groups = (uint32_t)setting_u64(SETTING_AGG_GROUPS);
    caps->buffer_bytes = setting_u64(SETTING_AGG_BUFFER);
}

/* Arms the timer for the next thing due. */
static void arm(agg_mgr_link_t *l)
{
    uint64_t due, now = now_ms();
    struct itimerspec its;

    if (!l->connected)
        due = l->next_retry;
    else if (!l->registered)
        due = l->hs_deadline;
    else {
        due = l->next_beat;
        if (l->last_rx + HB_MISSED * (uint64_t)l->heartbeat_ms < due)
            due = l->last_rx + HB_MISSED * (uint64_t)l->heartbeat_ms;
    }
    memset(&its, 0, sizeof(its));
    due = due > now ? due - now : 1;
    its.it_value.tv_sec = (time_t)(due / 1000);
    its.it_value.tv_nsec = (long)(due % 1000) * 1000000L;
    timerfd_settime(l->tfd, 0, &its, NULL);
}

static void watch_out(agg_mgr_link_t *l)
{
    int want = l->connected && mgr_stream_pending(&l->st) > 0;
    struct epoll_event ev;
    if (!l->connected || want == l->watching_out)
        return;
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0);
    ev.data.fd = l->st.fd;
    epoll_ctl(l->epfd, EPOLL_CTL_MOD, l->st.fd, &ev);
    l->watching_out = want;
}

static void disconnect(agg_mgr_link_t *l, const char *why)
{
    if (!l->connected)
        return;
    if (l->registered)
        incoll_warn("manager %s: connection lost: %s; keeping %d "
                    "groups and reconnecting",
                    l->addr, why, l->ngroups);
    else
        incoll_debug("manager %s: %s", l->addr, why);
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->st.fd, NULL);
    mgr_stream_close(&l->st);
    l->connected = 0;
    l->registered = 0;
    l->watching_out = 0;
    l->next_retry = now_ms() + l->retry_ms;
    l->retry_ms =
        l->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : l->retry_ms * 2;
}

static void try_connect(agg_mgr_link_t *l)
{
    char err[256];
    struct epoll_event ev;
    int fd = mgr_connect(l->addr, err, sizeof(err));

    if (fd < 0) {
        incoll_debug("%s", err);
        l->next_retry = now_ms() + l->retry_ms;
        return;
    }
    if (mgr_stream_init(&l->st, fd, 0, MGR_ROLE_AN, l->key) != INCOLL_OK) {
        mgr_stream_close(&l->st);
        l->next_retry = now_ms() + RETRY_MAX_MS;
        return;
    }
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        mgr_stream_close(&l->st);
        l->next_retry = now_ms() + l->retry_ms;
        return;
    }
    l->connected = 1;
    l->registered = 0;
    l->watching_out = 0;
    l->hs_deadline = now_ms() + HANDSHAKE_MS;
}

static void send_frame(agg_mgr_link_t *l, uint16_t type, const mgr_wbuf_t *w)
{
    if (!l->connected)
        return;
    if (w->oom || mgr_stream_send(&l->st, type, w->buf, w->len) != INCOLL_OK) {
        disconnect(l, "cannot queue a message");
        return;
    }
    if (mgr_stream_flush(&l->st) != 0)
        disconnect(l, "send failed");
}

static void send_register(agg_mgr_link_t *l)
{
    mgr_an_register_t reg;
    mgr_wbuf_t gw = {0}, w = {0};

    memset(&reg, 0, sizeof(reg));
    snprintf(reg.name, sizeof(reg.name), "%s", l->name);
    reg.ep = l->ep;
    reg.caps = l->caps;
    for (lgroup_t *g = l->groups; g; g = g->next) {
        mgr_an_group_t ag = {g->id, g->key, g->rec, g->rec_len};
        mgr_enc_an_group(&gw, &ag);
        reg.ngroups++;
    }
    reg.groups = gw.buf;
    reg.groups_len = gw.len;
    mgr_enc_an_register(&w, &reg);
    if (gw.oom)
        w.oom = 1;
    send_frame(l, MGR_AN_REGISTER, &w);
    mgr_wbuf_free(&w);
    mgr_wbuf_free(&gw);
}

static void send_ack(agg_mgr_link_t *l, uint32_t id, uint8_t op,
                     incoll_status_t status)
{
    mgr_wbuf_t w = {0};
    mgr_w_u32(&w, id);
    mgr_w_u8(&w, op);
    mgr_w_u32(&w, (uint32_t)status);
    send_frame(l, MGR_GROUP_ACK, &w);
    mgr_wbuf_free(&w);
}

static void forget_group(agg_mgr_link_t *l, uint32_t id)
{
    for (lgroup_t **pg = &l->groups; *pg; pg = &(*pg)->next) {
        if ((*pg)->id == id) {
            lgroup_t *g = *pg;
            *pg = g->next;
            free(g->rec);
            free(g);
            l->ngroups--;
            return;
        }
    }
}

static void on_group_add(agg_mgr_link_t *l, const uint8_t *body, size_t len)
{
    mgr_group_add_t add;
    agg_group_params_t gp;
    incoll_ep_t *children;
    const char *why = NULL;
    incoll_status_t status;
    lgroup_t *lg;

    if (mgr_dec_group_add(body, len, &add, &why) != INCOLL_OK) {
        incoll_warn("malformed group_add from the manager: %s", why);
        disconnect(l, "malformed group_add");
        return;
    }
    children = malloc((size_t)add.nchildren * sizeof(*children));
    lg = calloc(1, sizeof(*lg));
    if (children == NULL || lg == NULL ||
        (lg->rec = malloc(add.rec_len ? add.rec_len : 1)) == NULL) {
        free(children);
        if (lg)
            free(lg->rec);
        free(lg);
        send_ack(l, add.id, 1, INCOLL_ERR_NO_MEMORY);
        return;
    }
    for (uint16_t i = 0; i < add.nchildren; i++)
        children[i] = mgr_get_u64(add.children, i);
    memset(&gp, 0, sizeof(gp));
    gp.id = add.id;
    /* The mac key is derived from the manager's random group key and the
     * fabric secret, as the members derive it (src/host/comm.c): the
     * group key alone, readable on the control connection, is not
     * enough to forge a packet. */
    wire_key_derive(l->key, WIRE_KEY_GROUP, add.id, add.key, &gp.key);
    gp.nchildren = add.nchildren;
    gp.children = children;
    gp.parent = add.parent;
    gp.index_at_parent = add.index_at_parent;
    gp.slots = add.slots;
    gp.max_payload = add.payload;
    gp.mcast = setting_bool(SETTING_MCAST) ? add.mcast : INCOLL_EP_NONE;
    status = agg_group_add(l->agg, &gp);
    if (status == INCOLL_ERR_BUSY) {
        /* A leftover of an earlier life with the same id: the manager
         * hands out only ids it does not know, so replace it. */
        incoll_info("replacing stale group %u", add.id);
        agg_group_remove(l->agg, add.id);
        forget_group(l, add.id);
        status = agg_group_add(l->agg, &gp);
    }
    free(children);
    if (status != INCOLL_OK) {
        incoll_warn("cannot add group %u: %s", add.id,
                    incoll_status_string(status));
        free(lg->rec);
        free(lg);
    } else {
        lg->id = add.id;
        lg->key = add.key;
        memcpy(lg->rec, add.rec, add.rec_len);
        lg->rec_len = add.rec_len;
        lg->next = l->groups;
        l->groups = lg;
        l->ngroups++;
        incoll_debug("group %u added (%u children, %u slots, payload "
                     "%u, %s)",
                     add.id, add.nchildren, add.slots, add.payload,
                     add.parent == INCOLL_EP_NONE ? "root" : "has a parent");
    }
    send_ack(l, add.id, 1, status);
}

static void on_group_remove(agg_mgr_link_t *l, const uint8_t *body, size_t len)
{
    mgr_rbuf_t r = {body, len, 0, 0};
    uint32_t id = mgr_r_u32(&r);
    incoll_status_t status;

    if (mgr_r_done(&r) || id == 0) {
        incoll_warn("malformed group_remove from the manager");
        disconnect(l, "malformed group_remove");
        return;
    }
    forget_group(l, id);
    status = agg_group_remove(l->agg, id);
    incoll_debug("group %u removed: %s", id, incoll_status_string(status));
    send_ack(l, id, 2, status);
}

static void on_frame(agg_mgr_link_t *l, uint16_t type, const uint8_t *body,
                     size_t len)
{
    switch (type) {
    case MGR_AN_REGISTER_OK: {
        mgr_rbuf_t r = {body, len, 0, 0};
        uint32_t hb = mgr_r_u32(&r);
        uint64_t boot = mgr_r_u64(&r);
        if (mgr_r_done(&r) || hb < 10 || hb > 600000) {
            disconnect(l, "malformed an_register_ok");
            return;
        }
        l->registered = 1;
        l->heartbeat_ms = hb;
        l->next_beat = now_ms() + hb;
        l->retry_ms = l->retry_first;
        if (boot != l->boot_id)
            incoll_info("registered with manager %s (heartbeat %u ms, "
                        "%d groups held)",
                        l->addr, hb, l->ngroups);
        l->boot_id = boot;
        return;
    }
    case MGR_AN_PONG:
        return;
    case MGR_GROUP_ADD:
        on_group_add(l, body, len);
        return;
    case MGR_GROUP_REMOVE:
        on_group_remove(l, body, len);
        return;
    case MGR_ERROR: {
        mgr_rbuf_t r = {body, len, 0, 0};
        char reason[256];
        int32_t status;
        mgr_r_u32(&r);
        status = (int32_t)mgr_r_u32(&r);
        mgr_r_str(&r, reason, sizeof(reason));
        incoll_warn("manager says: %s (%s)", r.err ? "(malformed)" : reason,
                    incoll_status_string((incoll_status_t)status));
        return;
    }
    default:
        incoll_debug("ignoring %s from the manager", mgr_msg_name(type));
    }
}

static void pump(agg_mgr_link_t *l)
{
    const char *why = NULL;
    int closed = mgr_stream_read(&l->st, &why) != 0;
    const char *close_why = why;

    for (;;) {
        uint16_t type;
        const uint8_t *body;
        size_t len;
        mgr_next_t r = mgr_stream_next(&l->st, &type, &body, &len, &why);
        if (r == MGR_NEXT_NONE)
            break;
        if (r == MGR_NEXT_ERROR) {
            incoll_error("manager %s: %s", l->addr, why);
            disconnect(l, why);
            return;
        }
        l->last_rx = now_ms();
        if (r == MGR_NEXT_READY) {
            send_register(l);
            if (!l->connected)
                return;
            continue;
        }
        on_frame(l, type, body, len);
        if (!l->connected)
            return;
    }
    if (closed)
        disconnect(l, close_why);
}

static void heartbeat(agg_mgr_link_t *l)
{
    char text[2048];
    size_t n = agg_format_counters(l->agg, text, sizeof(text));
    mgr_wbuf_t w = {0};
    mgr_w_u64(&w, ++l->beat_seq);
    mgr_w_u32(&w, (uint32_t)l->ngroups);
    mgr_w_text(&w, text, n);
    send_frame(l, MGR_AN_HEARTBEAT, &w);
    mgr_wbuf_free(&w);
}

void agg_mgr_link_on_event(agg_mgr_link_t *l)
{
    struct epoll_event ev[4];
    uint64_t expirations, now;
    int n = epoll_wait(l->epfd, ev, 4, 0);

    for (int i = 0; i < n; i++) {
        if (ev[i].data.fd == l->tfd) {
            if (read(l->tfd, &expirations, sizeof(expirations)) < 0 &&
                errno != EAGAIN)
                incoll_debug("timerfd: %s", log_strerror(errno));
        } else if (l->connected && ev[i].data.fd == l->st.fd) {
            if (ev[i].events & EPOLLOUT && mgr_stream_flush(&l->st) != 0)
                disconnect(l, "send failed");
            if (l->connected &&
                (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                pump(l);
        }
    }
    now = now_ms();
    if (!l->connected && now >= l->next_retry)
        try_connect(l);
    else if (l->connected && !l->registered && now >= l->hs_deadline)
        disconnect(l, "no registration within 5 s");
    else if (l->registered &&
             now > l->last_rx + HB_MISSED * (uint64_t)l->heartbeat_ms)
        disconnect(l, "manager silent for 5 heartbeats");
    else if (l->registered && now >= l->next_beat) {
        heartbeat(l);
        l->next_beat = now + l->heartbeat_ms;
    }
    if (l->connected && mgr_stream_flush(&l->st) != 0)
        disconnect(l, "send failed");
    watch_out(l);
    arm(l);
}

agg_mgr_link_t *agg_mgr_link_create(const agg_mgr_link_params_t *p, char *err,
                                    size_t errlen)
{
    agg_mgr_link_t *l = calloc(1, sizeof(*l));
    struct epoll_event ev;
    uint32_t ip;
    uint16_t port;

    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->epfd = l->tfd = -1;
    l->st.fd = -1;
    if (p->mgr_addr == NULL || mgr_parse_addr(p->mgr_addr, &ip, &port) ||
        port == 0) {
        snprintf(err, errlen, "manager address '%s' is not HOST:PORT",
                 p->mgr_addr ? p->mgr_addr : "");
        goto err;
    }
    if (p->name == NULL || p->name[0] == '\0' ||
        strlen(p->name) >= MGR_NAME_MAX || p->agg == NULL) {
        snprintf(err, errlen, "an name of 1..%d characters required",
                 MGR_NAME_MAX - 1);
        goto err;
    }
    if (mgr_secret_load(p->secret_file, l->key, err, errlen) != INCOLL_OK)
        goto err;
    snprintf(l->addr, sizeof(l->addr), "%s", p->mgr_addr);
    snprintf(l->name, sizeof(l->name), "%s", p->name);
    l->ep = p->ep;
    l->caps = p->caps;
    l->agg = p->agg;
    l->retry_first = p->retry_ms ? p->retry_ms : 200;
    l->retry_ms = l->retry_first;
    l->heartbeat_ms = 200;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (l->epfd < 0 || l->tfd < 0) {
        snprintf(err, errlen, "epoll or timerfd: %s", log_strerror(errno));
        goto err;
    }
    ev.events = EPOLLIN;
    ev.data.fd = l->tfd;
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) != 0) {
        snprintf(err, errlen, "epoll_ctl: %s", log_strerror(errno));
        goto err;
    }
    l->next_retry = 0;
    try_connect(l);
    arm(l);
    return l;
err:
    agg_mgr_link_destroy(l);
    return NULL;
}

void agg_mgr_link_destroy(agg_mgr_link_t *l)
{
    if (l == NULL)
        return;
    if (l->connected) {
        mgr_stream_flush(&l->st);
        mgr_stream_close(&l->st);
    }
    while (l->groups) {
        lgroup_t *g = l->groups;
        l->groups = g->next;
        free(g->rec);
        free(g);
    }
    if (l->tfd >= 0)
        close(l->tfd);
    if (l->epfd >= 0)
        close(l->epfd);
    memset(l->key, 0, sizeof(l->key));
    free(l);
}

int agg_mgr_link_fd(const agg_mgr_link_t *l)
{
    return l->epfd;
}

int agg_mgr_link_up(const agg_mgr_link_t *l)
{
    return l->registered;
}

int agg_mgr_link_groups(const agg_mgr_link_t *l)
{
    return l->ngroups;
}
