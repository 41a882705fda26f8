/*
 * UDP endpoints for the daemons and the host library: a bound, non-blocking
 * IPv4 socket with batched receive (recvmmsg) and batched send (sendmmsg),
 * the kernel's segmentation and receive offloads where it has them, and
 * fault injection on send from the environment so anyone can watch loss
 * recovery on the real daemons:
 *   INCOLL_FAULT_DROP=P     drop each outgoing datagram with probability P
 *   INCOLL_FAULT_DUP=P      send it twice with probability P
 *   INCOLL_FAULT_REORDER=P  hold it back behind later ones with probability P
 *                           (held datagrams go out at the latest at the next
 *                           udp_flush() after that: nothing is held forever)
 *   INCOLL_FAULT_BURST=L    drops come in bursts of L datagrams on average
 *                           (geometric lengths; the loss rate stays
 *                           INCOLL_FAULT_DROP), as a full queue under incast
 *                           drops whatever arrives until it drains; 1 (the
 *                           default) drops each datagram independently
 *   INCOLL_FAULT_SEED=N     seed (mixed with the local port), for repeatable
 * runs
 *
 * The paths (docs/wire-format.md, "On the wire"):
 *  - send: datagrams are queued (udp_send copies them, udp_send_ref keeps a
 *    pointer to the payload) and leave at udp_flush. With segmentation
 *    offload (UDP_SEGMENT, INCOLL_UDP_GSO) the datagrams queued for one
 *    destination leave as one buffer of up to 64 KiB per system call
 *    entry, which the kernel (or the device) cuts back into the same
 *    datagrams: each keeps its own header and tag, and a loss costs one.
 *    Without it, one datagram per entry. Fault injection decides per
 *    datagram, when it is queued, either way.
 *  - receive: with receive offload (UDP_GRO, INCOLL_UDP_GRO) the kernel
 *    hands over datagrams of one sender that arrived together in one
 *    buffer with their size; udp_recv_batch cuts it back into datagrams.
 * Which path a socket uses is decided at udp_open (what the kernel
 * accepts and the settings ask) and changes only when the kernel refuses
 * a segmented send (then every later send goes one datagram at a time;
 * logged once): udp_path says which.
 */
#ifndef INCOLL_UDP_H
#define INCOLL_UDP_H

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

typedef struct udp_sock udp_sock_t;

/*
 * The loss process of the fault injection, shared with the tests'
 * in-memory network: a two-state (Gilbert) chain whose bad state drops
 * every datagram and lasts burst datagrams on average, entered so that
 * the long-run loss rate is p. burst <= 1 is independent loss.
 */
typedef struct {
    double p;     /* long-run loss rate, 0..1 */
    double burst; /* mean burst length in datagrams, >= 1 */
    int bad;      /* in a burst */
} udp_loss_t;

/* 1 when the next datagram is lost; u is uniform in [0, 1). */
int udp_loss_next(udp_loss_t *loss, double u);

typedef struct {
    incoll_ep_t src;
    size_t len;
    uint8_t *data; /* owned by the socket; valid until the next receive */
} udp_msg_t;

typedef struct {
    uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
    uint64_t tx_errors;
    uint64_t rx_reads;  /* buffers the kernel handed over (several
                           datagrams each with receive offload) */
    uint64_t tx_writes; /* buffers handed to the kernel (several datagrams
                           each with segmentation offload) */
    uint64_t rx_calls, tx_calls; /* recvmmsg and sendmmsg calls */
    uint64_t gso_refused;        /* segmented sends the kernel refused
                                    (resent one datagram at a time) */
    uint64_t rx_retained;        /* datagrams kept in their receive buffer
                                    past the next receive (udp_retain) */
    uint64_t fault_dropped, fault_duplicated, fault_reordered;
    uint64_t fault_bursts; /* bursts of drops begun (INCOLL_FAULT_BURST) */
} udp_counters_t;

/* udp_open_flags' flags. */
enum {
    UDP_OPEN_REUSEPORT = 1, /* SO_REUSEPORT: several sockets on one address
                               (incoll-agg's threads), the kernel spreads
                               senders over them */
    UDP_OPEN_RETAIN = 2,    /* spare receive buffers (16 MiB): a received
                               datagram may be kept where it lies
                               (udp_retain) */
    UDP_OPEN_MCAST = 4,     /* SO_REUSEADDR and IP_MULTICAST_ALL off: a
                               multicast listener, one of several on the
                               port, receiving only what it joined */
};

/*
 * Opens a socket bound to ip:port (host order; port 0 picks one), with
 * receive and send buffers of at least bufsize bytes where the kernel
 * allows (SO_RCVBUFFORCE when root), on the paths INCOLL_UDP_GSO and
 * INCOLL_UDP_GRO ask for. who names the owner in log lines. Returns NULL
 * and logs the cause on failure (also when a setting says "on" and the
 * kernel lacks the offload).
 */
udp_sock_t *udp_open(uint32_t ip, uint16_t port, int bufsize, const char *who);
udp_sock_t *udp_open_flags(uint32_t ip, uint16_t port, int bufsize,
                           const char *who, unsigned flags);
void udp_close(udp_sock_t *sock);
int udp_fd(const udp_sock_t *sock);
incoll_ep_t udp_local_ep(const udp_sock_t *sock);

/* The socket's paths: "send=gso recv=gro", "send=sendmmsg recv=recvmmsg"
 * or a mix (a constant string). */
const char *udp_path(const udp_sock_t *sock);

/*
 * What this machine's kernel accepts, probed on a socket of its own:
 * "gso,gro", "gso", "gro" or "none" (a constant string), for `incoll info`.
 */
const char *udp_offloads(void);

/* Receives up to max datagrams without blocking; returns how many (0 when
 * none are waiting, -1 on a socket error, logged). The datagrams of one
 * buffer of the kernel's (receive offload) may come over several calls;
 * each call's data stays valid until the next call. */
int udp_recv_batch(udp_sock_t *sock, udp_msg_t *msgs, int max);

/*
 * Keeps the receive buffer holding data (a datagram of the last receive,
 * or any byte of it) out of the next receives until udp_release(data):
 * the kernel fills a spare buffer in its place. Returns 0, or -1 (keep a
 * copy instead) when data is not in this socket's buffers, the socket
 * has no spares (opened without UDP_OPEN_RETAIN) or too few are left.
 * Several datagrams of one buffer may be retained; each retain needs its
 * release. Not thread-safe: the socket's receiving thread only.
 */
int udp_retain(udp_sock_t *sock, const void *data);
void udp_release(udp_sock_t *sock, const void *data);

/* Queues hdr+payload for dst (copied), applying fault injection; flushes
 * by itself when the queue is full. */
void udp_send(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
              size_t hdr_len, const void *payload, size_t payload_len);
/* The same, but only the header (at most WIRE_HDR_LEN bytes) is copied:
 * the payload is sent from where it is, and must stay there, unchanged,
 * until the next udp_flush() (or until udp_send_ref flushes by itself
 * because the queue is full: the caller's payload is sent then). */
void udp_send_ref(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
                  size_t hdr_len, const void *payload, size_t payload_len);
/* Sends everything queued (sendmmsg), waiting briefly when the socket
 * buffer is full rather than dropping. */
void udp_flush(udp_sock_t *sock);

const udp_counters_t *udp_counters(const udp_sock_t *sock);

/* Multicast results (docs/multicast.md). */
/* 1 when ep's address is an IPv4 multicast one (224.0.0.0/4). */
int udp_is_mcast(incoll_ep_t ep);
/* The range INCOLL_MCAST_RANGE names: first address and how many; -1 and
 * why on a bad value. */
int udp_mcast_range(uint32_t *base_p, uint32_t *n_p, char *why, size_t len);
/* Address index of the range (modulo its size) with INCOLL_MCAST_PORT, or
 * INCOLL_EP_NONE when the range is bad. */
incoll_ep_t udp_mcast_ep(uint32_t index);
/* Sends multicast out of loopback when the socket's address is a loopback
 * one (or any), else where the routes say; looped back to local
 * listeners; -1 (logged) on failure. */
int udp_mcast_sender(udp_sock_t *sock);
/* Joins (join 1) or leaves group's address on the interface of ifip; -1
 * and why on failure. */
int udp_mcast_join(udp_sock_t *sock, incoll_ep_t group, uint32_t ifip, int join,
                   char *why, size_t len);

#endif
