/*
 * The manager's control protocol, its stream: see mgr_stream.h and
 * docs/manager.md.
 */
#include "common/mgr_stream.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RX_CHUNK 65536u
#define TX_LIMIT_DEFAULT (64u << 20)
#define TX_KEEP 4096u /* a send buffer kept when all was sent */

static void session_keys(mgr_stream_t *st)
{
    mgr_auth_session_keys(st->key, st->server, st->snonce, st->cnonce, st->k_tx,
                          st->k_rx);
    st->seq_tx = 0;
    st->seq_rx = 0;
}

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
    if (with_mac)
        mgr_auth_frame_mac(st->k_tx, st->seq_tx++, p + 4, 2 + len, p + 6 + len);
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

incoll_status_t mgr_stream_init(mgr_stream_t *st, int fd, int server, int role,
                                const uint8_t key[MGR_KEY_LEN])
{
    memset(st, 0, sizeof(*st));
    st->fd = fd;
    st->server = server;
    st->role = server ? 0 : role;
    st->tx_limit = TX_LIMIT_DEFAULT;
    if (mgr_auth_init() != INCOLL_OK)
        return INCOLL_ERR_UNSUPPORTED;
    memcpy(st->key, key, MGR_KEY_LEN);
    if (server) {
        mgr_wbuf_t w = {0};
        incoll_status_t status;
        mgr_auth_hello(st->snonce, &w);
        status = w.oom ? INCOLL_ERR_NO_MEMORY
                       : mgr_stream_send_plain(st, MGR_HELLO, w.buf, w.len);
        mgr_wbuf_free(&w);
        st->state = MGR_ST_AUTH;
        return status;
    }
    st->state = MGR_ST_HELLO;
    return INCOLL_OK;
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
    mgr_auth_wipe(st->key, sizeof(st->key));
    mgr_auth_wipe(st->k_tx, sizeof(st->k_tx));
    mgr_auth_wipe(st->k_rx, sizeof(st->k_rx));
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
        *why_p = log_strerror(errno);
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

    /* Nothing pending: a connection that waits holds no buffer at all
     * (what a frame it took touched would stay resident otherwise). */
    if (avail == 0) {
        free(st->rx);
        st->rx = NULL;
        st->rx_len = st->rx_cap = st->rx_off = 0;
        return;
    }
    if (st->rx_cap <= 2 * RX_CHUNK)
        return;
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

void mgr_stream_trim_tx(mgr_stream_t *st)
{
    if (st->tx_off < st->tx_len || st->tx_cap <= TX_KEEP)
        return;
    free(st->tx);
    st->tx = NULL;
    st->tx_len = st->tx_cap = st->tx_off = 0;
}

/* Handles one handshake frame. Returns MGR_NEXT_NONE to go on,
 * MGR_NEXT_READY when done, MGR_NEXT_ERROR. */
static mgr_next_t handshake(mgr_stream_t *st, uint16_t type,
                            const uint8_t *body, size_t len, const char **why_p)
{
    uint8_t pr[MGR_MAC_LEN];

    if (st->server && st->state == MGR_ST_AUTH) {
        uint8_t role;
        incoll_status_t status;
        if (type != MGR_AUTH) {
            *why_p = "expected auth";
            return MGR_NEXT_ERROR;
        }
        /* An admin proves the admin secret (body: u16 version, u8 role):
         * the session keys then derive from it too. */
        if (st->admin_key && len > 2 && body[2] == MGR_ROLE_ADMIN)
            memcpy(st->key, st->admin_key, MGR_KEY_LEN);
        status = mgr_auth_check_auth(st->key, st->snonce, body, len, &role,
                                     st->cnonce, pr, why_p);
        if (status == INCOLL_ERR_AUTH) {
            static const char msg[] = "authentication failed";
            mgr_wbuf_t w = {0};
            mgr_w_str(&w, msg);
            if (!w.oom)
                mgr_stream_send_plain(st, MGR_AUTH_FAIL, w.buf, w.len);
            mgr_wbuf_free(&w);
            st->state = MGR_ST_FAILED;
            return MGR_NEXT_ERROR;
        }
        if (status != INCOLL_OK)
            return MGR_NEXT_ERROR;
        st->role = role;
        if (mgr_stream_send_plain(st, MGR_AUTH_OK, pr, MGR_MAC_LEN) !=
            INCOLL_OK) {
            *why_p = "out of memory";
            return MGR_NEXT_ERROR;
        }
        session_keys(st);
        st->state = MGR_ST_READY;
        return MGR_NEXT_READY;
    }
    if (!st->server && st->state == MGR_ST_HELLO) {
        mgr_wbuf_t w = {0};
        incoll_status_t status;
        if (type != MGR_HELLO) {
            *why_p = "expected hello";
            return MGR_NEXT_ERROR;
        }
        if (mgr_auth_answer_hello(st->key, (uint8_t)st->role, body, len,
                                  st->snonce, st->cnonce, &w,
                                  why_p) != INCOLL_OK) {
            mgr_wbuf_free(&w);
            return MGR_NEXT_ERROR;
        }
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
        if (mgr_auth_check_ok(st->key, st->snonce, st->cnonce,
                              (uint8_t)st->role, body, len) != INCOLL_OK) {
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

mgr_next_t mgr_stream_next(mgr_stream_t *st, uint16_t *type_p,
                           const uint8_t **body_p, size_t *len_p,
                           const char **why_p)
{
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
        limit = !ready          ? MGR_MAX_HS_FRAME
                : st->max_frame ? st->max_frame
                                : MGR_MAX_FRAME;
        if (flen < 2 + (ready ? MGR_MAC_LEN : 0)) {
            *why_p = "bad frame length";
            st->state = MGR_ST_FAILED;
            return MGR_NEXT_ERROR;
        }
        if (flen > limit) {
            snprintf(st->why, sizeof(st->why),
                     "frame of %" PRIu32 " bytes over the limit of %zu%s", flen,
                     limit, ready ? "" : " during the handshake");
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
            mgr_auth_frame_mac(st->k_rx, st->seq_rx, p + 4, 2 + blen, mac);
            if (!mgr_auth_mac_equal(mac, p + 6 + blen)) {
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
    if (colon == NULL || colon == addr ||
        (size_t)(colon - addr) >= sizeof(host))
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
        snprintf(err, errlen, "socket: %s", log_strerror(errno));
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
        errno != EINPROGRESS) {
        snprintf(err, errlen, "connect to %s: %s", addr, log_strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}
