/*
 * The manager's control protocol, its stream (docs/manager.md): frames on
 * a non-blocking TCP socket, the handshake's state machine (its crypto is
 * in mgr_auth.h) and the per-frame macs, with bounded buffers. Used by the
 * manager's event loop (src/mgr/mgr.c), the AN's link to it
 * (src/agg/agg_mgr_link.c), the host library (src/host/mgr_client.c) and
 * the CLI.
 *
 * A frame on the TCP stream is
 *     u32 len | u16 type | body | mac[32]
 * little-endian, len counting type, body and mac. The four handshake
 * frames (HELLO, AUTH, AUTH_OK, AUTH_FAIL) carry no mac and at most 256
 * bytes; every later frame carries its mac (mgr_auth_frame_mac).
 */
#ifndef INCOLL_MGR_STREAM_H
#define INCOLL_MGR_STREAM_H

#include "common/mgr_auth.h"

typedef enum {
    MGR_ST_HELLO, /* client: waiting for HELLO */
    MGR_ST_AUTH,  /* manager: waiting for AUTH; client: for AUTH_OK */
    MGR_ST_READY,
    MGR_ST_FAILED,
} mgr_stream_state_t;

typedef struct {
    int fd;
    int server;
    int role; /* client: ours; server: the peer's, once known */
    mgr_stream_state_t state;
    uint8_t key[MGR_KEY_LEN];
    uint8_t snonce[MGR_NONCE_LEN];
    uint8_t cnonce[MGR_NONCE_LEN];
    uint8_t k_tx[MGR_KEY_LEN];
    uint8_t k_rx[MGR_KEY_LEN];
    uint64_t seq_tx;
    uint64_t seq_rx;
    uint8_t *rx;
    size_t rx_len;
    size_t rx_cap;
    size_t rx_off; /* start of the next unparsed frame */
    uint8_t *tx;
    size_t tx_len;
    size_t tx_cap;
    size_t tx_off;    /* bytes of tx already written */
    size_t tx_limit;  /* refuse to queue beyond this (slow peer) */
    size_t max_frame; /* after the handshake; 0: MGR_MAX_FRAME */
    /* Manager side: the key an admin (MGR_ROLE_ADMIN) must prove instead
     * of key, or NULL for key itself; the caller's, it must outlive the
     * handshake. */
    const uint8_t *admin_key;
    char why[96]; /* an error reason with numbers in it */
} mgr_stream_t;

typedef enum {
    MGR_NEXT_ERROR = -1, /* protocol or auth error: close the connection */
    MGR_NEXT_NONE = 0,   /* need more bytes */
    MGR_NEXT_FRAME = 1,  /* an application frame is in type/body */
    MGR_NEXT_READY = 2,  /* the handshake just completed */
} mgr_next_t;

/*
 * Sets up a stream on a connected non-blocking fd (the stream owns it and
 * closes it in mgr_stream_close). The manager side (server = 1) queues
 * HELLO; the client waits for it and answers with AUTH as role.
 */
incoll_status_t mgr_stream_init(mgr_stream_t *st, int fd, int server, int role,
                                const uint8_t key[MGR_KEY_LEN]);
void mgr_stream_close(mgr_stream_t *st);

/* Reads what the socket holds. Returns 0, or -1 on end of stream or a
 * socket error (*why_p says which). */
int mgr_stream_read(mgr_stream_t *st, const char **why_p);

/*
 * Takes the next frame out of what was read. During the handshake it
 * handles HELLO/AUTH/AUTH_OK itself (queuing the replies). Application
 * frames come back only once READY, with their mac checked; body points
 * into the stream's buffer until the next call.
 */
mgr_next_t mgr_stream_next(mgr_stream_t *st, uint16_t *type_p,
                           const uint8_t **body_p, size_t *len_p,
                           const char **why_p);

/*
 * Bytes read but not yet taken out by mgr_stream_next(): the start of a
 * frame still incomplete. *frame_p gets that frame's whole size (length
 * prefix included) once its prefix has arrived, else 0.
 */
size_t mgr_stream_partial(const mgr_stream_t *st, size_t *frame_p);

/* Gives back the receive buffer's memory beyond what the frame in progress
 * needs (all of it when nothing is pending). Call after mgr_stream_next()
 * returned MGR_NEXT_NONE (bodies it returned point into the buffer), so a
 * connection that once sent a big frame does not keep its buffer. */
void mgr_stream_trim(mgr_stream_t *st);
/* Gives back the send buffer when everything was sent and it grew beyond
 * a page, so a peer once sent a big answer does not keep it. */
void mgr_stream_trim_tx(mgr_stream_t *st);

/* Queues one application frame (READY only); returns INCOLL_ERR_BUSY when
 * the peer does not read and the queue is over its limit. */
incoll_status_t mgr_stream_send(mgr_stream_t *st, uint16_t type,
                                const void *body, size_t len);
/* Queues a frame without mac (handshake frames, AUTH_FAIL). */
incoll_status_t mgr_stream_send_plain(mgr_stream_t *st, uint16_t type,
                                      const void *body, size_t len);

/* Writes what is queued. Returns 0 (maybe with bytes left: see
 * mgr_stream_pending), or -1 on a socket error. */
int mgr_stream_flush(mgr_stream_t *st);
size_t mgr_stream_pending(const mgr_stream_t *st);

/*
 * Opens a non-blocking TCP connection to "host:port" (IPv4 address or
 * name). Returns the fd, connecting in progress or done, or -1 with the
 * cause in err.
 */
int mgr_connect(const char *addr, char *err, size_t errlen);

/* Parses "host:port" into an IPv4 address and port (host order). */
incoll_status_t mgr_parse_addr(const char *addr, uint32_t *ip_p,
                               uint16_t *port_p);

#endif
