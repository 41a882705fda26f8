/*
 * UDP endpoints for the daemons and the host library: a bound, non-blocking
 * IPv4 socket with batched receive (recvmmsg) and batched send (sendmmsg),
 * and fault injection on send from the environment so anyone can watch
 * loss recovery on the real daemons:
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
    uint64_t fault_dropped, fault_duplicated, fault_reordered;
    uint64_t fault_bursts; /* bursts of drops begun (INCOLL_FAULT_BURST) */
} udp_counters_t;

/*
 * Opens a socket bound to ip:port (host order; port 0 picks one), with
 * receive and send buffers of at least bufsize bytes where the kernel
 * allows (SO_RCVBUFFORCE when root). who names the owner in log lines.
 * Returns NULL and logs the cause on failure.
 */
udp_sock_t *udp_open(uint32_t ip, uint16_t port, int bufsize, const char *who);
void udp_close(udp_sock_t *sock);
int udp_fd(const udp_sock_t *sock);
incoll_ep_t udp_local_ep(const udp_sock_t *sock);

/* Receives up to max datagrams without blocking; returns how many (0 when
 * none are waiting, -1 on a socket error, logged). */
int udp_recv_batch(udp_sock_t *sock, udp_msg_t *msgs, int max);

/* Queues hdr+payload for dst (copied), applying fault injection; flushes
 * by itself when the batch is full. */
void udp_send(udp_sock_t *sock, incoll_ep_t dst, const void *hdr,
              size_t hdr_len, const void *payload, size_t payload_len);
/* Sends everything queued (sendmmsg), waiting briefly when the socket
 * buffer is full rather than dropping. */
void udp_flush(udp_sock_t *sock);

const udp_counters_t *udp_counters(const udp_sock_t *sock);

#endif
