/*
 * UDP endpoints: one bound, non-blocking IPv4 socket with a receive batch
 * (recvmmsg into buffers the socket owns, cut into datagrams again when
 * the kernel coalesced them) and a send queue flushed with sendmmsg, one
 * message per destination's run of equal-sized datagrams when the kernel
 * segments (UDP_SEGMENT). Fault injection (drop, duplicate, reorder)
 * happens when a datagram is queued, from a small seeded generator, so a
 * run with the same seed and the same traffic makes the same decisions.
 */
#include "common/udp.h"

#include "common/settings.h"
#include "common/log.h"
#include "common/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define UDP_RX_BUFS 64         /* kernel buffers per recvmmsg */
#define UDP_RX_SPARE 256       /* spare buffers with UDP_OPEN_RETAIN */
#define UDP_BUF_LEN 65536      /* bytes per receive buffer */
#define UDP_QUEUE 1024         /* datagrams queued before a flush */
#define UDP_ARENA (4u << 20)   /* bytes of copied datagrams queued */
#define UDP_HOLD_MAX 16        /* datagrams held back for reordering */
#define UDP_MAX_DATAGRAM 65507 /* largest IPv4 UDP payload */
#define UDP_FLUSH_WAIT_MS 100  /* longest wait for room in the socket buffer */
/* A segmented send: at most this many datagrams (the kernel's limit is 64
 * or more) and this many bytes in all (one IPv4 datagram's). */
#define UDP_GSO_SEGS 64
#define UDP_GSO_BYTES UDP_MAX_DATAGRAM
#define UDP_MSGS (UDP_QUEUE + UDP_HOLD_MAX)
#define UDP_DEST_TAB 4096 /* > 2 * UDP_MSGS, a power of two */

/* One queued datagram: a (the header, or the whole datagram when copied)
 * then b (a referenced payload, or nothing). */
typedef struct {
    incoll_ep_t dst;
    const uint8_t *a, *b;
    size_t alen, blen;
    int next; /* the next of the same destination, while flushing */
    uint8_t hdr[WIRE_HDR_LEN];
} udp_out_t;

/* One message of a flush: datagrams gent[first .. first + n), segmented
 * at seg bytes when n > 1. */
typedef struct {
    int first, n;
    size_t seg, bytes;
} udp_sendmsg_t;

struct udp_sock {
    int fd;
    incoll_ep_t local;
    char who[48];
    udp_counters_t ctr;
    int gso, gro;       /* the paths in use */
    size_t gso_seg_max; /* larger segments go one by one (the path's MTU
                           refused them) */

    /* Receive side: the buffers udp_msg_t.data points into, and where
     * the last recvmmsg's buffers have been handed out to. rx_data holds
     * nbufs buffers: the UDP_RX_BUFS the kernel fills (rx_iov), and with
     * UDP_OPEN_RETAIN spare ones that replace a buffer a caller retained
     * (udp_retain) before the next recvmmsg; refs counts the retains of
     * each buffer, free_bufs lists the unused spares. */
    uint8_t *rx_data;
    int nbufs;
    uint32_t *refs;
    uint8_t *in_rx; /* the buffer is one the kernel fills (in rx_iov) */
    int *free_bufs;
    int nfree;
    int need; /* buffers in rx_iov retained: spares the next read takes */
    struct mmsghdr rx_hdr[UDP_RX_BUFS];
    struct iovec rx_iov[UDP_RX_BUFS];
    struct sockaddr_in rx_addr[UDP_RX_BUFS];
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } rx_ctrl[UDP_RX_BUFS];
    int rx_n, rx_i;
    size_t rx_off;

    /* Send side: queued datagrams, then those held back for reordering;
     * copies live in the arena (the hold arena for held ones). */
    udp_out_t tx[UDP_QUEUE];
    int ntx;
    uint8_t *arena; /* UDP_ARENA bytes, allocated on the first copy */
    size_t arena_used;
    udp_out_t hold[UDP_HOLD_MAX];
    int nhold;
    uint8_t *hold_data; /* UDP_HOLD_MAX * UDP_BUF_LEN, on the first hold */

    /* Flush scratch: datagrams by destination, then the messages. */
    struct {
        uint32_t gen;
        incoll_ep_t dst;
        int head, tail;
    } * dest; /* UDP_DEST_TAB entries */
    uint32_t dest_gen;
    int order[UDP_MSGS]; /* destinations' table entries, first seen first */
    udp_out_t *gent[UDP_MSGS];
    udp_sendmsg_t msg[UDP_MSGS];
    struct mmsghdr mh[UDP_MSGS];
    struct iovec iov[2 * UDP_MSGS];
    struct sockaddr_in sa[UDP_MSGS];
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctrl[UDP_MSGS];

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
                         sock->who, opts[i].name, bufsize, log_strerror(errno));
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

/* Asks the kernel for segmentation (gso) and receive (gro) offload on fd;
 * *gso_p and *gro_p say what it accepted. */
static void probe_offloads(int fd, int want_gso, int want_gro, int *gso_p,
                           int *gro_p)
{
    int zero = 0, one = 1;
    /* UDP_SEGMENT 0 keeps the socket unsegmented by default (each
     * segmented send says its size): accepted only where the kernel
     * knows the option. */
    *gso_p = want_gso &&
             setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)) == 0;
    *gro_p =
        want_gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
}

const char *udp_offloads(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), gso = 0, gro = 0;
    if (fd >= 0) {
        probe_offloads(fd, 1, 1, &gso, &gro);
        close(fd);
    }
    return gso && gro ? "gso,gro" : gso ? "gso" : gro ? "gro" : "none";
}

const char *udp_path(const udp_sock_t *sock)
{
    static const char *const paths[2][2] = {
        {"send=sendmmsg recv=recvmmsg", "send=sendmmsg recv=gro"},
        {"send=gso recv=recvmmsg", "send=gso recv=gro"}};
    return paths[sock->gso != 0][sock->gro != 0];
}

/* Sets the socket's paths from INCOLL_UDP_GSO and INCOLL_UDP_GRO (auto,
 * on, off); -1 when one says on and the kernel refuses. */
static int setup_paths(udp_sock_t *sock)
{
    int gso_mode = setting_enum(SETTING_UDP_GSO);
    int gro_mode = setting_enum(SETTING_UDP_GRO);
    probe_offloads(sock->fd, gso_mode != 2, gro_mode != 2, &sock->gso,
                   &sock->gro);
    if ((gso_mode == 1 && !sock->gso) || (gro_mode == 1 && !sock->gro)) {
        incoll_error("udp %s: INCOLL_UDP_%s=on, but the kernel refuses the "
                     "option (%s)",
                     sock->who, gso_mode == 1 && !sock->gso ? "GSO" : "GRO",
                     log_strerror(errno));
        return -1;
    }
    sock->gso_seg_max = UDP_GSO_BYTES;
    return 0;
}

udp_sock_t *udp_open(uint32_t ip, uint16_t port, int bufsize, const char *who)
{
    return udp_open_flags(ip, port, bufsize, who, 0);
}

udp_sock_t *udp_open_flags(uint32_t ip, uint16_t port, int bufsize,
                           const char *who, unsigned flags)
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
    sock->nbufs = UDP_RX_BUFS + (flags & UDP_OPEN_RETAIN ? UDP_RX_SPARE : 0);
    /* 64 KiB-aligned: a datagram's buffer is its address rounded down. */
    sock->rx_data =
        aligned_alloc(UDP_BUF_LEN, (size_t)sock->nbufs * UDP_BUF_LEN);
    sock->dest = calloc(UDP_DEST_TAB, sizeof(*sock->dest));
    sock->refs = calloc((size_t)sock->nbufs, sizeof(*sock->refs));
    sock->in_rx = calloc((size_t)sock->nbufs, 1);
    sock->free_bufs = calloc((size_t)sock->nbufs, sizeof(*sock->free_bufs));
    if (sock->rx_data == NULL || sock->dest == NULL || sock->refs == NULL ||
        sock->in_rx == NULL || sock->free_bufs == NULL) {
        incoll_error("udp %s: out of memory for receive buffers", sock->who);
        goto err_free;
    }
    for (int i = UDP_RX_BUFS; i < sock->nbufs; i++)
        sock->free_bufs[sock->nfree++] = i;
    sock->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sock->fd < 0) {
        incoll_error("udp %s: cannot create a socket: %s", sock->who,
                     log_strerror(errno));
        goto err_free;
    }
    set_bufsize(sock, bufsize);
    if (flags & UDP_OPEN_REUSEPORT) {
        int one = 1;
        if (setsockopt(sock->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) !=
            0) {
            incoll_error("udp %s: cannot share the port (SO_REUSEPORT): %s",
                         sock->who, log_strerror(errno));
            goto err_close_fd;
        }
    }
    if (flags & UDP_OPEN_MCAST) {
        int one = 1, zero = 0;
        /* Several processes of a host listen on one port, each only to
         * the addresses it joined (not every group some socket joined). */
        if (setsockopt(sock->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) !=
                0 ||
            setsockopt(sock->fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero,
                       sizeof(zero)) != 0) {
            incoll_warn("udp %s: cannot share the multicast port: %s",
                        sock->who, strerror(errno));
            goto err_close_fd;
        }
    }
    if (setup_paths(sock) != 0)
        goto err_close_fd;
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port);
    if (bind(sock->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        incoll_error("udp %s: cannot bind to %s: %s", sock->who,
                     ep_text(wire_ep(ip, port), ep, sizeof(ep)),
                     log_strerror(errno));
        goto err_close_fd;
    }
    if (getsockname(sock->fd, (struct sockaddr *)&sa, &salen) != 0) {
        incoll_error("udp %s: getsockname failed: %s", sock->who,
                     log_strerror(errno));
        goto err_close_fd;
    }
    sock->local = wire_ep(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port));

    for (int i = 0; i < UDP_RX_BUFS; i++) {
        sock->rx_iov[i].iov_base = sock->rx_data + (size_t)i * UDP_BUF_LEN;
        sock->rx_iov[i].iov_len = UDP_BUF_LEN;
        sock->in_rx[i] = 1;
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
    incoll_debug("udp %s: bound to %s, %s", sock->who,
                 ep_text(sock->local, ep, sizeof(ep)), udp_path(sock));
    return sock;

err_close_fd:
    close(sock->fd);
err_free:
    free(sock->rx_data);
    free(sock->dest);
    free(sock->refs);
    free(sock->in_rx);
    free(sock->free_bufs);
    free(sock);
    return NULL;
}

void udp_close(udp_sock_t *sock)
{
    if (sock == NULL)
        return;
    close(sock->fd);
    free(sock->rx_data);
    free(sock->dest);
    free(sock->refs);
    free(sock->in_rx);
    free(sock->free_bufs);
    free(sock->arena);
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

/* The index of the receive buffer holding p. */
static int buf_index(const udp_sock_t *sock, const void *p)
{
    return (int)(((const uint8_t *)p - sock->rx_data) / UDP_BUF_LEN);
}

int udp_retain(udp_sock_t *sock, const void *data)
{
    const uint8_t *p = data;
    int b;
    if (p < sock->rx_data ||
        p >= sock->rx_data + (size_t)sock->nbufs * UDP_BUF_LEN)
        return -1; /* not ours (a copy, another socket's) */
    b = buf_index(sock, p);
    /* Each retained buffer the kernel fills takes a spare at the next
     * read: there must be one for it. */
    if (sock->refs[b] == 0 && sock->in_rx[b]) {
        if (sock->nfree <= sock->need)
            return -1;
        sock->need++;
    }
    sock->refs[b]++;
    sock->ctr.rx_retained++;
    return 0;
}

void udp_release(udp_sock_t *sock, const void *data)
{
    int b = buf_index(sock, data);
    if (--sock->refs[b] > 0)
        return;
    /* Back to the spares, unless the kernel still fills it (then the next
     * read keeps it). */
    if (sock->in_rx[b])
        sock->need--;
    else
        sock->free_bufs[sock->nfree++] = b;
}

/* Reads the next kernel batch into the receive buffers; returns how many
 * buffers (0 when none wait, -1 on an error, logged). */
static int read_batch(udp_sock_t *sock)
{
    int n;

    /* A retained buffer stays with its retainer: a spare takes its place
     * (udp_retain kept enough of them). */
    for (int i = 0; i < UDP_RX_BUFS && sock->need > 0; i++) {
        int b = buf_index(sock, sock->rx_iov[i].iov_base);
        if (sock->refs[b] > 0) {
            sock->in_rx[b] = 0;
            b = sock->free_bufs[--sock->nfree];
            sock->in_rx[b] = 1;
            sock->rx_iov[i].iov_base = sock->rx_data + (size_t)b * UDP_BUF_LEN;
            sock->need--;
        }
    }
    for (int i = 0; i < UDP_RX_BUFS; i++) {
        struct msghdr *mh = &sock->rx_hdr[i].msg_hdr;
        memset(mh, 0, sizeof(*mh));
        mh->msg_name = &sock->rx_addr[i];
        mh->msg_namelen = sizeof(sock->rx_addr[i]);
        mh->msg_iov = &sock->rx_iov[i];
        mh->msg_iovlen = 1;
        if (sock->gro) {
            mh->msg_control = sock->rx_ctrl[i].buf;
            mh->msg_controllen = sizeof(sock->rx_ctrl[i].buf);
        }
    }
    for (int tries = 0;; tries++) {
        sock->ctr.rx_calls++;
        n = recvmmsg(sock->fd, sock->rx_hdr, UDP_RX_BUFS, MSG_DONTWAIT, NULL);
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
        incoll_error("udp %s: receive failed: %s", sock->who,
                     log_strerror(errno));
        return -1;
    }
    sock->ctr.rx_reads += (uint64_t)n;
    return n;
}

/* The datagram size of receive buffer i: the kernel's segment size when
 * it coalesced several, else its whole length. */
static size_t segment_of(udp_sock_t *sock, int i)
{
    struct msghdr *mh = &sock->rx_hdr[i].msg_hdr;
    size_t len = sock->rx_hdr[i].msg_len;
    if (!sock->gro)
        return len;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int seg;
            memcpy(&seg, CMSG_DATA(c), sizeof(seg));
            if (seg > 0 && (size_t)seg < len)
                return (size_t)seg;
        }
    }
    return len;
}

int udp_recv_batch(udp_sock_t *sock, udp_msg_t *msgs, int max)
{
    int k = 0;

    while (k < max) {
        const struct sockaddr_in *sa;
        size_t len, seg;
        if (sock->rx_i >= sock->rx_n) {
            int n;
            /* A new batch reuses the buffers: not while this call's
             * datagrams point into them. */
            if (k > 0)
                break;
            n = read_batch(sock);
            if (n <= 0)
                return n;
            sock->rx_n = n;
            sock->rx_i = 0;
            sock->rx_off = 0;
        }
        len = sock->rx_hdr[sock->rx_i].msg_len;
        if (sock->rx_hdr[sock->rx_i].msg_hdr.msg_flags & MSG_TRUNC) {
            incoll_debug("udp %s: dropping a truncated datagram", sock->who);
            sock->rx_i++;
            continue;
        }
        seg = segment_of(sock, sock->rx_i);
        sa = &sock->rx_addr[sock->rx_i];
        while (sock->rx_off < len && k < max) {
            size_t n = len - sock->rx_off < seg ? len - sock->rx_off : seg;
            msgs[k].src =
                wire_ep(ntohl(sa->sin_addr.s_addr), ntohs(sa->sin_port));
            msgs[k].len = n;
            msgs[k].data =
                (uint8_t *)sock->rx_iov[sock->rx_i].iov_base + sock->rx_off;
            sock->ctr.rx_packets++;
            sock->ctr.rx_bytes += n;
            sock->rx_off += n;
            k++;
        }
        if (sock->rx_off >= len) {
            sock->rx_i++;
            sock->rx_off = 0;
        }
    }
    return k;
}

/* Waits until the socket can take more, at most ms milliseconds. */
static void wait_writable(udp_sock_t *sock, int ms)
{
    struct pollfd pfd = {.fd = sock->fd, .events = POLLOUT};
    if (ms > 0 && poll(&pfd, 1, ms) < 0 && errno != EINTR)
        incoll_debug("udp %s: poll failed: %s", sock->who, log_strerror(errno));
}

/* Bytes of a queued datagram. */
static size_t out_len(const udp_out_t *o)
{
    return o->alen + o->blen;
}

/* Builds message m of the flush from its datagrams; segmented when it has
 * more than one. */
static void build_msg(udp_sock_t *sock, int m, int *iov_at)
{
    udp_sendmsg_t *sm = &sock->msg[m];
    struct msghdr *mh = &sock->mh[m].msg_hdr;
    const udp_out_t *o0 = sock->gent[sm->first];
    int iv = *iov_at;

    memset(&sock->mh[m], 0, sizeof(sock->mh[m]));
    sock->sa[m] = (struct sockaddr_in){
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl((uint32_t)(o0->dst >> 16)),
        .sin_port = htons((uint16_t)(o0->dst & 0xffff)),
    };
    mh->msg_name = &sock->sa[m];
    mh->msg_namelen = sizeof(sock->sa[m]);
    mh->msg_iov = &sock->iov[iv];
    for (int i = 0; i < sm->n; i++) {
        const udp_out_t *o = sock->gent[sm->first + i];
        sock->iov[iv++] = (struct iovec){(void *)o->a, o->alen};
        if (o->blen)
            sock->iov[iv++] = (struct iovec){(void *)o->b, o->blen};
    }
    mh->msg_iovlen = (size_t)(iv - *iov_at);
    *iov_at = iv;
    if (sm->n > 1) {
        struct cmsghdr *c;
        uint16_t seg = (uint16_t)sm->seg;
        mh->msg_control = sock->ctrl[m].buf;
        mh->msg_controllen = sizeof(sock->ctrl[m].buf);
        c = CMSG_FIRSTHDR(mh);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(seg));
        memcpy(CMSG_DATA(c), &seg, sizeof(seg));
    }
}

/* The kernel refused segmented message m with err: why it matters and
 * whether later sends may still segment. */
static void gso_refused(udp_sock_t *sock, const udp_sendmsg_t *sm, int err)
{
    sock->ctr.gso_refused++;
    if (err == EINVAL || err == EMSGSIZE) {
        /* Most often segments larger than the path's MTU: those go one
         * by one from now on, smaller ones are still segmented. */
        if (sm->seg <= sock->gso_seg_max)
            sock->gso_seg_max = sm->seg - 1;
        incoll_debug("udp %s: a segmented send of %zu-byte datagrams was "
                     "refused (%s): datagrams of %zu bytes and more go one "
                     "by one",
                     sock->who, sm->seg, log_strerror(err), sm->seg);
        return;
    }
    sock->gso = 0;
    incoll_info("udp %s: the kernel refuses segmented sends (%s): sending "
                "one datagram at a time from now on",
                sock->who, log_strerror(err));
}

/* Whether a send error on a segmented message is the segmentation's. */
static int gso_error(int err)
{
    return err == EIO || err == EINVAL || err == EMSGSIZE ||
           err == EOPNOTSUPP || err == ENOPROTOOPT || err == 524 /* ENOTSUPP */;
}

/* Sends one datagram by itself (a refused segmented message's), waiting
 * briefly for room as send_msgs does. */
static void send_one(udp_sock_t *sock, const udp_out_t *o)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl((uint32_t)(o->dst >> 16)),
        .sin_port = htons((uint16_t)(o->dst & 0xffff)),
    };
    struct iovec iov[2] = {{(void *)o->a, o->alen}, {(void *)o->b, o->blen}};
    struct msghdr mh = {.msg_name = &sa,
                        .msg_namelen = sizeof(sa),
                        .msg_iov = iov,
                        .msg_iovlen = o->blen ? 2 : 1};
    for (int tries = 0; tries < 2; tries++) {
        sock->ctr.tx_calls++;
        if (sendmsg(sock->fd, &mh, 0) >= 0) {
            sock->ctr.tx_packets++;
            sock->ctr.tx_writes++;
            sock->ctr.tx_bytes += out_len(o);
            return;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
            break;
        wait_writable(sock, UDP_FLUSH_WAIT_MS);
    }
    sock->ctr.tx_errors++;
}

/* Sends messages [from, to) of the flush in order; waits briefly when the
 * socket buffer is full, resends a refused segmented message one datagram
 * at a time, and skips (counting tx_errors) datagrams the kernel refuses
 * outright. */
static void send_msgs(udp_sock_t *sock, int from, int to)
{
    uint64_t give_up = 0;
    int done = from;

    while (done < to) {
        int r;
        sock->ctr.tx_calls++;
        r = sendmmsg(sock->fd, sock->mh + done, (unsigned)(to - done), 0);
        if (r > 0) {
            for (int i = done; i < done + r; i++) {
                sock->ctr.tx_packets += (uint64_t)sock->msg[i].n;
                sock->ctr.tx_bytes += sock->msg[i].bytes;
            }
            sock->ctr.tx_writes += (uint64_t)r;
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
            incoll_debug("udp %s: socket buffer full for %d ms, dropping the "
                         "rest of the flush",
                         sock->who, UDP_FLUSH_WAIT_MS);
            for (int i = done; i < to; i++)
                sock->ctr.tx_errors += (uint64_t)sock->msg[i].n;
            return;
        }
        if (r < 0 && sock->msg[done].n > 1 && gso_error(errno)) {
            udp_sendmsg_t sm = sock->msg[done];
            gso_refused(sock, &sm, errno);
            for (int i = 0; i < sm.n; i++)
                send_one(sock, sock->gent[sm.first + i]);
            done++;
            continue;
        }
        /* The first remaining message failed for good (ICMP refusal
         * reported late, unreachable destination, ...): skip it. */
        if (r < 0 && errno != ECONNREFUSED) {
            char ep[32];
            incoll_debug(
                "udp %s: send to %s failed: %s", sock->who,
                ep_text(sock->gent[sock->msg[done].first]->dst, ep, sizeof(ep)),
                log_strerror(errno));
        }
        sock->ctr.tx_errors += (uint64_t)sock->msg[done].n;
        done++;
    }
}

/* The destination table's entry for dst in this flush (inserting it). */
static int dest_slot(udp_sock_t *sock, incoll_ep_t dst, int *fresh_p)
{
    uint32_t mask = UDP_DEST_TAB - 1;
    uint32_t i = (uint32_t)((dst * 0x9e3779b97f4a7c15ull) >> 40) & mask;
    for (;; i = (i + 1) & mask) {
        if (sock->dest[i].gen != sock->dest_gen) {
            sock->dest[i].gen = sock->dest_gen;
            sock->dest[i].dst = dst;
            sock->dest[i].head = sock->dest[i].tail = -1;
            *fresh_p = 1;
            return (int)i;
        }
        if (sock->dest[i].dst == dst) {
            *fresh_p = 0;
            return (int)i;
        }
    }
}

void udp_flush(udp_sock_t *sock)
{
    udp_out_t *all[UDP_MSGS];
    int n = 0, ndest = 0, ng = 0, nm = 0, iv = 0;

    if (sock->ntx == 0 && sock->nhold == 0)
        return;
    /* Held datagrams go out behind everything queued after them. */
    for (int i = 0; i < sock->ntx; i++)
        all[n++] = &sock->tx[i];
    for (int i = 0; i < sock->nhold; i++)
        all[n++] = &sock->hold[i];
    /* Each destination's datagrams in order, destinations in the order
     * they were first queued for. */
    if (++sock->dest_gen == 0) {
        memset(sock->dest, 0, UDP_DEST_TAB * sizeof(*sock->dest));
        sock->dest_gen = 1;
    }
    for (int i = 0; i < n; i++) {
        int fresh, d = dest_slot(sock, all[i]->dst, &fresh);
        all[i]->next = -1;
        if (fresh)
            sock->order[ndest++] = d;
        else
            all[sock->dest[d].tail]->next = i;
        if (sock->dest[d].head < 0)
            sock->dest[d].head = i;
        sock->dest[d].tail = i;
    }
    /* Cut each destination's run into messages: with segmentation, as
     * many equal-sized datagrams as fit, the last one of a message may be
     * shorter. */
    for (int k = 0; k < ndest; k++) {
        for (int i = sock->dest[sock->order[k]].head; i >= 0;) {
            udp_sendmsg_t *sm = &sock->msg[nm++];
            size_t seg = out_len(all[i]);
            *sm = (udp_sendmsg_t){.first = ng, .n = 0, .seg = seg, .bytes = 0};
            do {
                size_t len = out_len(all[i]);
                sock->gent[ng++] = all[i];
                sm->n++;
                sm->bytes += len;
                i = all[i]->next;
                if (len < seg)
                    break; /* a shorter one ends the message */
            } while (i >= 0 && sock->gso && seg <= sock->gso_seg_max &&
                     sm->n < UDP_GSO_SEGS && out_len(all[i]) <= seg &&
                     sm->bytes + out_len(all[i]) <= UDP_GSO_BYTES);
        }
    }
    for (int m = 0; m < nm; m++)
        build_msg(sock, m, &iv);
    send_msgs(sock, 0, nm);
    sock->ntx = 0;
    sock->nhold = 0;
    sock->arena_used = 0;
}

/* Room in the arena for len bytes of copies; NULL when out of memory. */
static uint8_t *arena_get(udp_sock_t *sock, size_t len)
{
    uint8_t *p;
    if (sock->arena == NULL && (sock->arena = malloc(UDP_ARENA)) == NULL) {
        incoll_error("udp %s: out of memory for send buffers", sock->who);
        return NULL;
    }
    if (sock->arena_used + len > UDP_ARENA)
        udp_flush(sock);
    p = sock->arena + sock->arena_used;
    sock->arena_used += (len + 63) & ~(size_t)63;
    return p;
}

/* Queues one datagram (already past fault injection). */
static void enqueue(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
                    size_t hdr_len, const void *payload, size_t payload_len,
                    int ref)
{
    udp_out_t *o;
    if (sock->ntx == UDP_QUEUE)
        udp_flush(sock);
    if (ref) {
        o = &sock->tx[sock->ntx];
        memcpy(o->hdr, hdr, hdr_len);
        o->a = o->hdr;
        o->alen = hdr_len;
        o->b = payload;
        o->blen = payload_len;
    } else {
        uint8_t *p = arena_get(sock, hdr_len + payload_len);
        if (p == NULL) {
            sock->ctr.tx_errors++;
            return;
        }
        o = &sock->tx[sock->ntx];
        if (hdr_len)
            memcpy(p, hdr, hdr_len);
        if (payload_len)
            memcpy(p + hdr_len, payload, payload_len);
        o->a = p;
        o->alen = hdr_len + payload_len;
        o->b = NULL;
        o->blen = 0;
    }
    o->dst = dst;
    sock->ntx++;
}

/* Holds one datagram back (a copy) until the end of the next flush. */
static int hold(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
                size_t hdr_len, const void *payload, size_t payload_len)
{
    udp_out_t *o;
    uint8_t *p;
    if (sock->hold_data == NULL &&
        (sock->hold_data = malloc((size_t)UDP_HOLD_MAX * UDP_BUF_LEN)) == NULL)
        return -1;
    o = &sock->hold[sock->nhold];
    p = sock->hold_data + (size_t)sock->nhold * UDP_BUF_LEN;
    if (hdr_len)
        memcpy(p, hdr, hdr_len);
    if (payload_len)
        memcpy(p + hdr_len, payload, payload_len);
    *o = (udp_out_t){.dst = dst, .a = p, .alen = hdr_len + payload_len};
    sock->nhold++;
    return 0;
}

static void send_as(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
                    size_t hdr_len, const void *payload, size_t payload_len,
                    int ref)
{
    int copies = 1;

    if (hdr_len + payload_len > UDP_MAX_DATAGRAM || dst == INCOLL_EP_NONE ||
        hdr_len > WIRE_HDR_LEN) {
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
        hold(sock, dst, hdr, hdr_len, payload, payload_len) == 0) {
        /* Held back until the end of the next flush, behind whatever is
         * queued in between. The duplicate, if any, goes out in order. */
        sock->ctr.fault_reordered++;
        copies--;
    }
    while (copies-- > 0)
        enqueue(sock, dst, hdr, hdr_len, payload, payload_len, ref);
}

void udp_send(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
              size_t hdr_len, const void *payload, size_t payload_len)
{
    send_as(sock, dst, hdr, hdr_len, payload, payload_len, 0);
}

void udp_send_ref(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
                  size_t hdr_len, const void *payload, size_t payload_len)
{
    send_as(sock, dst, hdr, hdr_len, payload, payload_len, payload_len > 0);
}

/* ---- multicast (docs/multicast.md) ---------------------------------- */

int udp_is_mcast(incoll_ep_t ep)
{
    return ep != INCOLL_EP_NONE && ((ep >> 16) & 0xf0000000u) == 0xe0000000u;
}

int udp_mcast_range(uint32_t *base_p, uint32_t *n_p, char *why, size_t len)
{
    const char *v = setting_str(SETTING_MCAST_RANGE);
    unsigned a, b, c, d, bits;
    char extra;
    uint32_t base, n;

    if (v == NULL) {
        snprintf(why, len, "INCOLL_MCAST_RANGE is empty");
        return -1;
    }
    if (sscanf(v, "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &bits, &extra) != 5 ||
        a > 255 || b > 255 || c > 255 || d > 255 || bits < 4 || bits > 32) {
        snprintf(why, len,
                 "INCOLL_MCAST_RANGE='%s' is not an IPv4 prefix a.b.c.d/len",
                 v);
        return -1;
    }
    base = (uint32_t)a << 24 | (uint32_t)b << 16 | (uint32_t)c << 8 | d;
    n = bits == 32 ? 1 : 1u << (32 - bits);
    base &= ~(n - 1);
    if ((base & 0xf0000000u) != 0xe0000000u) {
        snprintf(why, len, "INCOLL_MCAST_RANGE='%s' is not inside 224.0.0.0/4",
                 v);
        return -1;
    }
    *base_p = base;
    *n_p = n;
    return 0;
}

incoll_ep_t udp_mcast_ep(uint32_t index)
{
    uint32_t base, n;
    char why[160];
    if (udp_mcast_range(&base, &n, why, sizeof(why)) != 0)
        return INCOLL_EP_NONE;
    return wire_ep(base + index % n, (uint16_t)setting_int(SETTING_MCAST_PORT));
}

int udp_mcast_sender(udp_sock_t *sock)
{
    uint32_t ip = (uint32_t)(sock->local >> 16);
    struct in_addr ifa = {.s_addr = htonl(ip)};
    int ttl = 8, loop = 1;
    /* On loopback, out of loopback; elsewhere out of the interface the
     * routes give the range (the emulated fabric routes 224.0.0.0/4 to
     * its hosts' links): the kernel would take the one of the socket's
     * address, the AN's loopback there. */
    if ((ip >> 24) != 127 && ip != 0) {
        incoll_ep_t probe = udp_mcast_ep(0);
        struct sockaddr_in sa = {.sin_family = AF_INET};
        socklen_t sl = sizeof(sa);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sa.sin_addr.s_addr = htonl((uint32_t)(probe >> 16));
        sa.sin_port = htons((uint16_t)probe);
        if (fd >= 0 && probe != INCOLL_EP_NONE &&
            connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
            ifa = sa.sin_addr;
        if (fd >= 0)
            close(fd);
    }
    if (setsockopt(sock->fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof(ifa)) !=
        0) {
        incoll_warn("udp %s: cannot send multicast: %s", sock->who,
                    strerror(errno));
        return -1;
    }
    if (setsockopt(sock->fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) !=
            0 ||
        setsockopt(sock->fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop,
                   sizeof(loop)) != 0) {
        incoll_warn("udp %s: cannot send multicast: %s", sock->who,
                    strerror(errno));
        return -1;
    }
    return 0;
}

int udp_mcast_join(udp_sock_t *sock, incoll_ep_t group, uint32_t ifip, int join,
                   char *why, size_t len)
{
    struct ip_mreq mr;
    char ep[32];
    mr.imr_multiaddr.s_addr = htonl((uint32_t)(group >> 16));
    mr.imr_interface.s_addr = htonl(ifip);
    if (setsockopt(sock->fd, IPPROTO_IP,
                   join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &mr,
                   sizeof(mr)) != 0) {
        snprintf(why, len, "%s %s failed: %s", join ? "joining" : "leaving",
                 ep_text(group, ep, sizeof(ep)), strerror(errno));
        return -1;
    }
    return 0;
}
