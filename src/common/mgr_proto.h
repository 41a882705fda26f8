/*
 * The manager's control protocol (docs/manager.md): framing, the
 * challenge-response handshake that proves knowledge of the fabric secret,
 * per-frame authentication, and the codecs of every message. Shared by the
 * manager (src/mgr), the AN's link to it (src/agg/agg_mgr_link.c) and the
 * host library (src/host/mgr_client.c).
 *
 * A frame on the TCP stream is
 *     u32 len | u16 type | body | mac[32]
 * little-endian, len counting type, body and mac. The four handshake
 * frames (HELLO, AUTH, AUTH_OK, AUTH_FAIL) carry no mac and at most 256
 * bytes; every later frame carries HMAC-SHA512-256 (libsodium's
 * crypto_auth) over (u64 sequence number, type, body) under a per-direction
 * session key, so a frame cannot be forged, replayed or reordered without
 * the secret. Crypto is libsodium's only; without it (no
 * INCOLL_HAVE_SODIUM) the manager cannot be used and every entry point that
 * needs it returns INCOLL_ERR_UNSUPPORTED.
 */
#ifndef INCOLL_MGR_PROTO_H
#define INCOLL_MGR_PROTO_H

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

#define MGR_PROTO_MAGIC 0x4D434E49u /* "INCM" in memory order */
#define MGR_PROTO_VERSION 1
#define MGR_MAX_FRAME (4u << 20)    /* after the handshake */
#define MGR_MAX_HS_FRAME 256u       /* during it */
#define MGR_KEY_LEN 32
#define MGR_NONCE_LEN 32
#define MGR_MAC_LEN 32
#define MGR_NAME_MAX 64             /* names: jobs, ANs, hosts */
#define MGR_TEXT_MAX (1u << 20)     /* stat and counter texts */
#define MGR_MAX_CHILDREN 1024
#define MGR_MAX_MEMBERS (1 << 18)

typedef enum {
    MGR_ROLE_AN = 1,
    MGR_ROLE_HOST = 2,
    MGR_ROLE_TOOL = 3,
} mgr_role_t;

typedef enum {
    /* handshake, no mac */
    MGR_HELLO = 0x01,       /* m -> c: u32 magic, u16 version, nonce */
    MGR_AUTH = 0x02,        /* c -> m: u16 version, u8 role, nonce, proof */
    MGR_AUTH_OK = 0x03,     /* m -> c: proof */
    MGR_AUTH_FAIL = 0x04,   /* m -> c: str reason */
    /* any role */
    MGR_ERROR = 0x05,       /* m -> c: u32 req, i32 status, str reason */
    MGR_BYE = 0x06,         /* c -> m: clean goodbye */
    /* ANs */
    MGR_AN_REGISTER = 0x10,
    MGR_AN_REGISTER_OK = 0x11,
    MGR_AN_HEARTBEAT = 0x12,
    MGR_AN_PONG = 0x13,
    MGR_GROUP_ADD = 0x14,
    MGR_GROUP_REMOVE = 0x15,
    MGR_GROUP_ACK = 0x16,
    /* hosts */
    MGR_JOIN = 0x20,
    MGR_JOIN_OK = 0x21,
    MGR_GROUP_REQ = 0x22,
    MGR_GROUP_INFO = 0x23,
    MGR_GROUP_RELEASE = 0x24,
    MGR_GROUP_FAILED = 0x25,
    /* tools */
    MGR_STAT_REQ = 0x30,
    MGR_STAT_REP = 0x31,
} mgr_msg_type_t;

/* ---- codec ---- */

/* A growable output buffer; oom is set (and writes stop) when memory runs
 * out. The caller frees buf. */
typedef struct {
    uint8_t *buf;
    size_t len;
    size_t cap;
    int oom;
} mgr_wbuf_t;

void mgr_w_u8(mgr_wbuf_t *w, uint8_t v);
void mgr_w_u16(mgr_wbuf_t *w, uint16_t v);
void mgr_w_u32(mgr_wbuf_t *w, uint32_t v);
void mgr_w_u64(mgr_wbuf_t *w, uint64_t v);
void mgr_w_bytes(mgr_wbuf_t *w, const void *p, size_t n);
/* u16 length + bytes (at most 65535). */
void mgr_w_str(mgr_wbuf_t *w, const char *s);
/* u32 length + bytes. */
void mgr_w_text(mgr_wbuf_t *w, const char *s, size_t n);
void mgr_wbuf_free(mgr_wbuf_t *w);

/* A bounds-checked reader over a received body: any read past the end, or
 * a string that breaks its limits, sets err and returns zeros. */
typedef struct {
    const uint8_t *p;
    size_t len;
    size_t off;
    int err;
} mgr_rbuf_t;

uint8_t mgr_r_u8(mgr_rbuf_t *r);
uint16_t mgr_r_u16(mgr_rbuf_t *r);
uint32_t mgr_r_u32(mgr_rbuf_t *r);
uint64_t mgr_r_u64(mgr_rbuf_t *r);
/* Returns a pointer to n bytes in the body, or NULL (err set). */
const uint8_t *mgr_r_bytes(mgr_rbuf_t *r, size_t n);
/* Copies a u16-length string into dst (size dstlen, NUL-terminated); a
 * string that does not fit or holds a NUL or a control character sets
 * err. */
void mgr_r_str(mgr_rbuf_t *r, char *dst, size_t dstlen);
/* A u32-length text of at most max bytes; returns a pointer into the body
 * (not terminated) and its length in *n_p, or NULL. */
const char *mgr_r_text(mgr_rbuf_t *r, size_t max, size_t *n_p);
/* 0 when everything was read without error and nothing is left over. */
int mgr_r_done(const mgr_rbuf_t *r);

/* Little-endian u64 at index i of a raw array from mgr_r_bytes(). */
uint64_t mgr_get_u64(const uint8_t *p, size_t i);
uint32_t mgr_get_u32(const uint8_t *p, size_t i);

/* ---- capabilities, as an AN reports them ---- */
typedef struct {
    uint32_t ops;
    uint32_t dtypes;
    uint32_t max_payload;
    uint32_t slots;
    uint32_t max_groups;
    uint64_t buffer_bytes;
} mgr_caps_t;

/* ---- messages ---- */

typedef struct {
    uint32_t id;
    uint64_t key;
    const uint8_t *rec; /* the manager's record of the group, opaque here */
    size_t rec_len;
} mgr_an_group_t;

/* AN -> manager, first message: who it is, what it can do, what it has
 * (after a manager restart, its running groups). */
typedef struct {
    char name[MGR_NAME_MAX];
    incoll_ep_t ep;
    mgr_caps_t caps;
    uint32_t ngroups;
    const uint8_t *groups; /* raw, decode with mgr_an_group_at() */
    size_t groups_len;
} mgr_an_register_t;

/* Manager -> AN: add a group. */
typedef struct {
    uint32_t id;
    uint64_t key;
    uint32_t slots;
    uint32_t payload;
    incoll_ep_t parent;       /* INCOLL_EP_NONE at the root */
    uint16_t index_at_parent;
    uint16_t nchildren;       /* 1..MGR_MAX_CHILDREN */
    const uint8_t *children;  /* nchildren little-endian u64 endpoints */
    const uint8_t *rec;       /* kept by the AN, reported back */
    size_t rec_len;
} mgr_group_add_t;

/* Host -> manager, first message. */
typedef struct {
    char job[MGR_NAME_MAX];
    int32_t rank;
    int32_t size;
    char host[MGR_NAME_MAX];  /* topology host name; "" = by address */
    incoll_ep_t ep;           /* its UDP endpoint */
    uint32_t pid;
} mgr_join_t;

/* Host -> manager: the group for a communicator. Every member sends the
 * same comm, gen and member list; the manager answers all when all have
 * asked. */
typedef struct {
    uint32_t req;
    uint64_t comm;
    uint32_t gen;             /* 0, then +1 for each rebuild */
    uint32_t slots;           /* wanted; 0 = the manager's default */
    uint32_t payload;         /* wanted; 0 = what the ANs allow */
    uint64_t opseq;           /* rebuilds: the operation this member is at */
    uint32_t nmembers;
    const uint8_t *members;   /* nmembers u32 world ranks, comm order */
} mgr_group_req_t;

/* Manager -> host: the answer. With status != INCOLL_OK there is no group
 * (reason says why) but peers still lists the members' UDP endpoints. */
typedef struct {
    uint32_t req;
    uint64_t comm;
    uint32_t gen;
    int32_t status;
    char reason[256];
    uint32_t group;
    uint64_t key;
    uint16_t child;           /* our child index at the AN */
    incoll_ep_t an;           /* the AN we send to */
    uint32_t slots;
    uint32_t payload;
    uint32_t ops;
    uint32_t dtypes;
    uint64_t opseq_min;       /* smallest and largest opseq the members */
    uint64_t opseq_max;       /* sent */
    uint32_t nmembers;
    const uint8_t *peers;     /* nmembers u64 UDP endpoints, comm order */
} mgr_group_info_t;

/* Encoders append the body of one message to w. Decoders check every
 * field and that nothing is left over; on failure they return
 * INCOLL_ERR_PROTOCOL and point *why_p at a constant naming the field. */
void mgr_enc_an_register(mgr_wbuf_t *w, const mgr_an_register_t *m);
incoll_status_t mgr_dec_an_register(const uint8_t *p, size_t n,
                                    mgr_an_register_t *m, const char **why_p);
/* Entry i of the register's groups (validated by the decoder). */
void mgr_an_group_at(const mgr_an_register_t *m, uint32_t i,
                     mgr_an_group_t *g);
/* Appends one group entry for mgr_an_register_t.groups. */
void mgr_enc_an_group(mgr_wbuf_t *w, const mgr_an_group_t *g);

void mgr_enc_group_add(mgr_wbuf_t *w, const mgr_group_add_t *m);
incoll_status_t mgr_dec_group_add(const uint8_t *p, size_t n,
                                  mgr_group_add_t *m, const char **why_p);

void mgr_enc_join(mgr_wbuf_t *w, const mgr_join_t *m);
incoll_status_t mgr_dec_join(const uint8_t *p, size_t n, mgr_join_t *m,
                             const char **why_p);

void mgr_enc_group_req(mgr_wbuf_t *w, const mgr_group_req_t *m);
incoll_status_t mgr_dec_group_req(const uint8_t *p, size_t n,
                                  mgr_group_req_t *m, const char **why_p);

void mgr_enc_group_info(mgr_wbuf_t *w, const mgr_group_info_t *m);
incoll_status_t mgr_dec_group_info(const uint8_t *p, size_t n,
                                   mgr_group_info_t *m, const char **why_p);

void mgr_enc_caps(mgr_wbuf_t *w, const mgr_caps_t *c);
void mgr_dec_caps(mgr_rbuf_t *r, mgr_caps_t *c);

/* ---- secret ---- */

/*
 * Reads the fabric secret (at least 16 bytes) from path and derives the
 * 32-byte master key from it (BLAKE2b). Warns when the file is readable by
 * group or others. On error writes the cause into err and returns
 * INCOLL_ERR_CONFIG, INCOLL_ERR_AUTH or INCOLL_ERR_UNSUPPORTED.
 */
incoll_status_t mgr_secret_load(const char *path, uint8_t key[MGR_KEY_LEN],
                                char *err, size_t errlen);

/* Writes a new random secret (64 hex digits) to path with mode 0600,
 * failing if it exists. */
incoll_status_t mgr_secret_generate(const char *path);

/* ---- a framed, authenticated stream over a non-blocking socket ---- */

typedef enum {
    MGR_ST_HELLO,      /* client: waiting for HELLO */
    MGR_ST_AUTH,       /* manager: waiting for AUTH; client: for AUTH_OK */
    MGR_ST_READY,
    MGR_ST_FAILED,
} mgr_stream_state_t;

typedef struct {
    int fd;
    int server;
    int role;                 /* client: ours; server: the peer's, once known */
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
    size_t rx_off;            /* start of the next unparsed frame */
    uint8_t *tx;
    size_t tx_len;
    size_t tx_cap;
    size_t tx_off;            /* bytes of tx already written */
    size_t tx_limit;          /* refuse to queue beyond this (slow peer) */
    size_t max_frame;         /* after the handshake; 0: MGR_MAX_FRAME */
    char why[96];             /* an error reason with numbers in it */
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
incoll_status_t mgr_stream_init(mgr_stream_t *st, int fd, int server,
                                 int role, const uint8_t key[MGR_KEY_LEN]);
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
 * returned MGR_NEXT_NONE, so a connection that once sent a big frame does
 * not keep its buffer. */
void mgr_stream_trim(mgr_stream_t *st);

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

/* Name of a message type for logs ("group_add"), or "unknown". */
const char *mgr_msg_name(uint16_t type);

#endif
