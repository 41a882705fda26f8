/*
 * UDP endpoints: one bound, non-blocking IPv4 socket with a receive batch
 * (recvmmsg into buffers the socket owns) and a send queue flushed with
 * sendmmsg. Fault injection (drop, duplicate, reorder) happens when a
 * datagram is queued, from a small seeded generator, so a run with the same
 * seed and the same traffic makes the same decisions.
 */
#include "common/udp.h"

#include "common/settings.h"
#include "common/log.h"
#include "common/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define UDP_BATCH 64           /* datagrams per recvmmsg / sendmmsg */
#define UDP_HOLD_MAX 16        /* datagrams held back for reordering */
#define UDP_BUF_LEN 65536      /* bytes per datagram buffer */
#define UDP_MAX_DATAGRAM 65507 /* largest IPv4 UDP payload */
#define UDP_FLUSH_WAIT_MS 100  /* longest wait for room in the socket buffer */

typedef struct {
    incoll_ep_t dst;
    size_t len;
    uint8_t *buf; /* UDP_BUF_LEN bytes, owned by the socket */
} udp_out_t;

struct udp_sock {
    int fd;
    incoll_ep_t local;
    char who[48];
    udp_counters_t ctr;

    /* Receive side: the buffers udp_msg_t.data points into. */
    uint8_t *rx_data;
    struct mmsghdr rx_hdr[UDP_BATCH];
    struct iovec rx_iov[UDP_BATCH];
    struct sockaddr_in rx_addr[UDP_BATCH];

    /* Send side: queued datagrams, then those held back for reordering. */
    uint8_t *tx_data; /* UDP_BATCH buffers, allocated on first send */
    udp_out_t tx[UDP_BATCH];
    int ntx;
    uint8_t *hold_data; /* UDP_HOLD_MAX buffers, allocated on first hold */
    udp_out_t hold[UDP_HOLD_MAX];
    int nhold;

    /* Fault injection; all zero means off. */
    double p_drop, p_dup, p_reorder;
    udp_loss_t loss;
    uint64_t rng;
};

static const char *ep_text(incoll_ep_t ep, char *buf, size_t len)
{
    return wire_ep_str(ep, buf, len);
}

/* splitmix64: tiny, good enough for fault decisions, and repeatable. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A uniform double in [0, 1). */
static double rng_unit(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * 0x1.0p-53;
}

int udp_loss_next(udp_loss_t *loss, double u)
{
    double start;

    if (loss->p <= 0)
        return 0;
    if (loss->burst <= 1 || loss->p >= 1)
        return u < loss->p;
    if (loss->bad) {
        /* Geometric lengths of mean burst: go on with 1 - 1/burst. */
        loss->bad = u < 1.0 - 1.0 / loss->burst;
        return loss->bad;
    }
    /* Entered at this rate, the chain spends a share p of its datagrams
     * in bursts: s / (s + 1/burst) = p. */
    start = loss->p / (loss->burst * (1.0 - loss->p));
    loss->bad = u < start;
    return loss->bad;
}

static void set_bufsize(udp_sock_t *sock, int bufsize)
{
    static const struct {
        int force, plain;
        const char *name;
    } opts[] = {{SO_RCVBUFFORCE, SO_RCVBUF, "receive"},
                {SO_SNDBUFFORCE, SO_SNDBUF, "send"}};

    if (bufsize <= 0)
        return;
    for (int i = 0; i < 2; i++) {
        int got = 0;
        socklen_t glen = sizeof(got);
        /* The forced variant ignores rmem_max/wmem_max but needs
         * CAP_NET_ADMIN; without it the kernel caps the plain one. */
        if (setsockopt(sock->fd, SOL_SOCKET, opts[i].force, &bufsize,
                       sizeof(bufsize)) != 0 &&
            setsockopt(sock->fd, SOL_SOCKET, opts[i].plain, &bufsize,
                       sizeof(bufsize)) != 0) {
            incoll_debug("udp %s: cannot set the %s buffer to %d bytes: %s",
                         sock->who, opts[i].name, bufsize, strerror(errno));
            continue;
        }
        if (getsockopt(sock->fd, SOL_SOCKET, opts[i].plain, &got, &glen) == 0 &&
            got < bufsize)
            incoll_debug("udp %s: %s buffer is %d bytes, asked for %d (raise "
                         "net.core.%cmem_max)",
                         sock->who, opts[i].name, got, bufsize,
                         i == 0 ? 'r' : 'w');
    }
}

udp_sock_t *udp_open(uint32_t ip, uint16_t port, int bufsize, const char *who)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t salen = sizeof(sa);
    udp_sock_t *sock;
    char ep[32];
    uint64_t seed;

    sock = calloc(1, sizeof(*sock));
    if (sock == NULL) {
        incoll_error("udp %s: out of memory", who ? who : "");
        return NULL;
    }
    snprintf(sock->who, sizeof(sock->who), "%s", who ? who : "");
    sock->rx_data = malloc((size_t)UDP_BATCH * UDP_BUF_LEN);
    if (sock->rx_data == NULL) {
        incoll_error("udp %s: out of memory for receive buffers", sock->who);
        goto err_free;
    }
    sock->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sock->fd < 0) {
        incoll_error("udp %s: cannot create a socket: %s", sock->who,
                     strerror(errno));
        goto err_free_rx;
    }
    set_bufsize(sock, bufsize);
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port);
    if (bind(sock->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        incoll_error("udp %s: cannot bind to %s: %s", sock->who,
                     ep_text(wire_ep(ip, port), ep, sizeof(ep)),
                     strerror(errno));
        goto err_close_fd;
    }
    if (getsockname(sock->fd, (struct sockaddr *)&sa, &salen) != 0) {
        incoll_error("udp %s: getsockname failed: %s", sock->who,
                     strerror(errno));
        goto err_close_fd;
    }
    sock->local = wire_ep(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port));

    for (int i = 0; i < UDP_BATCH; i++) {
        sock->rx_iov[i].iov_base = sock->rx_data + (size_t)i * UDP_BUF_LEN;
        sock->rx_iov[i].iov_len = UDP_BUF_LEN;
    }

    sock->p_drop = setting_real(SETTING_FAULT_DROP);
    sock->p_dup = setting_real(SETTING_FAULT_DUP);
    sock->p_reorder = setting_real(SETTING_FAULT_REORDER);
    sock->loss.p = sock->p_drop;
    sock->loss.burst = setting_real(SETTING_FAULT_BURST);
    seed = setting_u64(SETTING_FAULT_SEED);
    /* Mix in the port so the processes of one run make different choices. */
    sock->rng = seed ^ ((uint64_t)ntohs(sa.sin_port) * 0xd1b54a32d192ed03ull);
    (void)rng_next(&sock->rng);
    if (sock->p_drop > 0 || sock->p_dup > 0 || sock->p_reorder > 0)
        incoll_info("udp %s: fault injection on %s: drop=%g burst=%g dup=%g "
                    "reorder=%g seed=%llu",
                    sock->who, ep_text(sock->local, ep, sizeof(ep)),
                    sock->p_drop, sock->loss.burst > 1 ? sock->loss.burst : 1,
                    sock->p_dup, sock->p_reorder, (unsigned long long)seed);
    incoll_debug("udp %s: bound to %s", sock->who,
                 ep_text(sock->local, ep, sizeof(ep)));
    return sock;

err_close_fd:
    close(sock->fd);
err_free_rx:
    free(sock->rx_data);
err_free:
    free(sock);
    return NULL;
}

void udp_close(udp_sock_t *sock)
{
    if (sock == NULL)
        return;
    close(sock->fd);
    free(sock->rx_data);
    free(sock->tx_data);
    free(sock->hold_data);
    free(sock);
}

int udp_fd(const udp_sock_t *sock)
{
    return sock->fd;
}

incoll_ep_t udp_local_ep(const udp_sock_t *sock)
{
    return sock->local;
}

const udp_counters_t *udp_counters(const udp_sock_t *sock)
{
    return &sock->ctr;
}

int udp_recv_batch(udp_sock_t *sock, udp_msg_t *msgs, int max)
{
    int n;

    if (max > UDP_BATCH)
        max = UDP_BATCH;
    if (max <= 0)
        return 0;
    for (int i = 0; i < max; i++) {
        struct msghdr *mh = &sock->rx_hdr[i].msg_hdr;
        memset(mh, 0, sizeof(*mh));
        mh->msg_name = &sock->rx_addr[i];
        mh->msg_namelen = sizeof(sock->rx_addr[i]);
        mh->msg_iov = &sock->rx_iov[i];
        mh->msg_iovlen = 1;
    }
    for (int tries = 0;; tries++) {
        n = recvmmsg(sock->fd, sock->rx_hdr, (unsigned)max, MSG_DONTWAIT, NULL);
        if (n >= 0)
            break;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        /* An ICMP error from an earlier send surfaces here once; it says
         * nothing about what is waiting, so read again. */
        if ((errno == EINTR || errno == ECONNREFUSED || errno == EHOSTUNREACH ||
             errno == ENETUNREACH) &&
            tries < 4)
            continue;
        incoll_error("udp %s: receive failed: %s", sock->who, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const struct sockaddr_in *sa = &sock->rx_addr[i];
        msgs[i].src = wire_ep(ntohl(sa->sin_addr.s_addr), ntohs(sa->sin_port));
        msgs[i].len = sock->rx_hdr[i].msg_len;
        msgs[i].data = sock->rx_iov[i].iov_base;
        sock->ctr.rx_packets++;
        sock->ctr.rx_bytes += msgs[i].len;
    }
    return n;
}

/* Waits until the socket can take more, at most ms milliseconds. */
static void wait_writable(udp_sock_t *sock, int ms)
{
    struct pollfd pfd = {.fd = sock->fd, .events = POLLOUT};
    if (ms > 0 && poll(&pfd, 1, ms) < 0 && errno != EINTR)
        incoll_debug("udp %s: poll failed: %s", sock->who, strerror(errno));
}

/* Sends n datagrams in order; waits briefly when the socket buffer is full
 * and skips (counting tx_errors) those the kernel refuses outright. */
static void send_all(udp_sock_t *sock, udp_out_t *const *out, int n)
{
    struct mmsghdr mh[UDP_BATCH + UDP_HOLD_MAX];
    struct iovec iov[UDP_BATCH + UDP_HOLD_MAX];
    struct sockaddr_in sa[UDP_BATCH + UDP_HOLD_MAX];
    uint64_t give_up = 0;
    int done = 0;

    memset(mh, 0, sizeof(mh[0]) * (size_t)n);
    for (int i = 0; i < n; i++) {
        sa[i] = (struct sockaddr_in){
            .sin_family = AF_INET,
            .sin_addr.s_addr = htonl((uint32_t)(out[i]->dst >> 16)),
            .sin_port = htons((uint16_t)(out[i]->dst & 0xffff)),
        };
        iov[i].iov_base = out[i]->buf;
        iov[i].iov_len = out[i]->len;
        mh[i].msg_hdr.msg_name = &sa[i];
        mh[i].msg_hdr.msg_namelen = sizeof(sa[i]);
        mh[i].msg_hdr.msg_iov = &iov[i];
        mh[i].msg_hdr.msg_iovlen = 1;
    }
    while (done < n) {
        int r = sendmmsg(sock->fd, mh + done, (unsigned)(n - done), 0);
        if (r > 0) {
            for (int i = done; i < done + r; i++) {
                sock->ctr.tx_packets++;
                sock->ctr.tx_bytes += out[i]->len;
            }
            done += r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 &&
            (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
            uint64_t now = now_ms();
            if (give_up == 0)
                give_up = now + UDP_FLUSH_WAIT_MS;
            if (now < give_up) {
                wait_writable(sock, (int)(give_up - now));
                continue;
            }
            incoll_debug("udp %s: socket buffer full for %d ms, dropping %d "
                         "datagrams",
                         sock->who, UDP_FLUSH_WAIT_MS, n - done);
            sock->ctr.tx_errors += (uint64_t)(n - done);
            return;
        }
        /* The first remaining datagram failed for good (ICMP refusal
         * reported late, unreachable destination, ...): skip it. */
        if (r < 0 && errno != ECONNREFUSED) {
            char ep[32];
            incoll_debug("udp %s: send to %s failed: %s", sock->who,
                         ep_text(out[done]->dst, ep, sizeof(ep)),
                         strerror(errno));
        }
        sock->ctr.tx_errors++;
        done++;
    }
}

void udp_flush(udp_sock_t *sock)
{
    udp_out_t *out[UDP_BATCH + UDP_HOLD_MAX];
    int n = 0;

    if (sock->ntx == 0 && sock->nhold == 0)
        return;
    /* Held datagrams go out behind everything queued after them. */
    for (int i = 0; i < sock->ntx; i++)
        out[n++] = &sock->tx[i];
    for (int i = 0; i < sock->nhold; i++)
        out[n++] = &sock->hold[i];
    send_all(sock, out, n);
    sock->ntx = 0;
    sock->nhold = 0;
}

static int alloc_bufs(udp_sock_t *sock, uint8_t **data, udp_out_t *outs, int n)
{
    if (*data)
        return 0;
    *data = malloc((size_t)n * UDP_BUF_LEN);
    if (*data == NULL) {
        incoll_error("udp %s: out of memory for send buffers", sock->who);
        return -1;
    }
    for (int i = 0; i < n; i++)
        outs[i].buf = *data + (size_t)i * UDP_BUF_LEN;
    return 0;
}

static void fill(udp_out_t *o, incoll_ep_t dst, const void *hdr, size_t hdr_len,
                 const void *payload, size_t payload_len)
{
    o->dst = dst;
    o->len = hdr_len + payload_len;
    if (hdr_len)
        memcpy(o->buf, hdr, hdr_len);
    if (payload_len)
        memcpy(o->buf + hdr_len, payload, payload_len);
}

static void enqueue(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
                    size_t hdr_len, const void *payload, size_t payload_len)
{
    if (sock->ntx == UDP_BATCH)
        udp_flush(sock);
    if (alloc_bufs(sock, &sock->tx_data, sock->tx, UDP_BATCH) != 0) {
        sock->ctr.tx_errors++;
        return;
    }
    fill(&sock->tx[sock->ntx++], dst, hdr, hdr_len, payload, payload_len);
}

void udp_send(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
              size_t hdr_len, const void *payload, size_t payload_len)
{
    int copies = 1;

    if (hdr_len + payload_len > UDP_MAX_DATAGRAM || dst == INCOLL_EP_NONE) {
        char ep[32];
        incoll_warn(
            "udp %s: cannot send %zu bytes to %s: %s", sock->who,
            hdr_len + payload_len,
            dst == INCOLL_EP_NONE ? "nowhere" : ep_text(dst, ep, sizeof(ep)),
            dst == INCOLL_EP_NONE ? "no destination" : "datagram too large");
        sock->ctr.tx_errors++;
        return;
    }
    if (sock->p_drop > 0) {
        int was_bad = sock->loss.bad;
        if (udp_loss_next(&sock->loss, rng_unit(&sock->rng))) {
            sock->ctr.fault_dropped++;
            sock->ctr.fault_bursts += !was_bad;
            return;
        }
    }
    if (sock->p_dup > 0 && rng_unit(&sock->rng) < sock->p_dup) {
        sock->ctr.fault_duplicated++;
        copies = 2;
    }
    if (sock->p_reorder > 0 && sock->nhold < UDP_HOLD_MAX &&
        rng_unit(&sock->rng) < sock->p_reorder &&
        alloc_bufs(sock, &sock->hold_data, sock->hold, UDP_HOLD_MAX) == 0) {
        /* Held back until the end of the next flush, behind whatever is
         * queued in between. The duplicate, if any, goes out in order. */
        sock->ctr.fault_reordered++;
        fill(&sock->hold[sock->nhold++], dst, hdr, hdr_len, payload,
             payload_len);
        copies--;
    }
    while (copies-- > 0)
        enqueue(sock, dst, hdr, hdr_len, payload, payload_len);
}
