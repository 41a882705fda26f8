/*
 * The manager's control protocol, its messages (docs/manager.md): the
 * constants, roles and message types, a growable writer and a
 * bounds-checked reader of little-endian fields, and the encoder and
 * decoder of every message body. No I/O and no crypto: the manager's core
 * (src/mgr/mgr_core.c) and the tests' in-memory network use only this.
 * Authentication is in mgr_auth.h, the framed stream over a socket in
 * mgr_stream.h; mgr_proto.h includes all three.
 */
#ifndef INCOLL_MGR_CODEC_H
#define INCOLL_MGR_CODEC_H

#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>

#define MGR_PROTO_MAGIC 0x4D434E49u /* "INCM" in memory order */
#define MGR_PROTO_VERSION 1
#define MGR_MAX_FRAME (4u << 20) /* after the handshake */
#define MGR_MAX_HS_FRAME 256u    /* during it */
#define MGR_KEY_LEN 32
#define MGR_NONCE_LEN 32
#define MGR_MAC_LEN 32
#define MGR_NAME_MAX 64         /* names: jobs, ANs, hosts */
#define MGR_TEXT_MAX (1u << 20) /* stat and counter texts */
#define MGR_MAX_CHILDREN 1024
#define MGR_TUNE_FORMAT 1       /* MGR_TUNE's body */
#define MGR_TUNE_MAX (1u << 20) /* its table's bytes */
#define MGR_SHAPE_FORMAT 1      /* MGR_GROUP_SHAPE's body */
#define MGR_MAX_MEMBERS (1 << 18)

typedef enum {
    MGR_ROLE_AN = 1,
    MGR_ROLE_HOST = 2,
    MGR_ROLE_TOOL = 3,
    /* The workload manager's side (the Slurm plugin) and the operator's
     * tools: registers jobs with their quotas and ends them. It proves the
     * manager's admin secret (the fabric secret when none is set). */
    MGR_ROLE_ADMIN = 4,
} mgr_role_t;

typedef enum {
    /* handshake, no mac */
    MGR_HELLO = 0x01,     /* m -> c: u32 magic, u16 version, nonce */
    MGR_AUTH = 0x02,      /* c -> m: u16 version, u8 role, nonce, proof */
    MGR_AUTH_OK = 0x03,   /* m -> c: proof */
    MGR_AUTH_FAIL = 0x04, /* m -> c: str reason */
    /* any role */
    MGR_ERROR = 0x05, /* m -> c: u32 req, i32 status, str reason */
    MGR_BYE = 0x06,   /* c -> m: clean goodbye */
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
    MGR_USAGE = 0x26,      /* h -> m: where its collectives ran (mgr_usage_t) */
    MGR_USAGE_PROC = 0x27, /* h -> m: its result path's counters (MGR_PC_*) */
    /* m -> h after JOIN_OK when the manager has a selection table: u16
     * format (MGR_TUNE_FORMAT), str source, text table (a tune.conf's
     * lines, docs/tuning.md). A host of another format says so and uses
     * its own; an older host ignores it. */
    MGR_TUNE = 0x28,
    /* m -> h right before each MGR_GROUP_INFO: the shape of the
     * communicator's members on the fabric (mgr_group_shape_t), the same
     * for every member. A host of another format, or an older one,
     * ignores it (the shape is then unknown). */
    MGR_GROUP_SHAPE = 0x29,
    /* tools */
    MGR_STAT_REQ = 0x30, /* u32 flags (MGR_STAT_F_*) */
    MGR_STAT_REP = 0x31,
    /* admin */
    MGR_JOB_REGISTER = 0x40,    /* str job, u32 groups, u32 slots, u32 flags */
    MGR_JOB_REGISTER_OK = 0x41, /* u32 gen, u32 groups, u32 slots */
    MGR_JOB_END = 0x42,         /* str job, str reason */
    MGR_JOB_END_OK = 0x43,      /* u32 jobs, u32 groups released */
} mgr_msg_type_t;

/* stat_req flags: the answer as the metrics (what the manager's HTTP
 * endpoint serves) instead of `incoll stat`'s lines, in the OpenMetrics
 * text format or the Prometheus text format 0.0.4. */
#define MGR_STAT_F_OPENMETRICS 1u
#define MGR_STAT_F_PROMETHEUS 2u

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
    incoll_ep_t parent; /* INCOLL_EP_NONE at the root */
    uint16_t index_at_parent;
    uint16_t nchildren;      /* 1..MGR_MAX_CHILDREN */
    const uint8_t *children; /* nchildren little-endian u64 endpoints */
    const uint8_t *rec;      /* kept by the AN, reported back */
    size_t rec_len;
    incoll_ep_t mcast; /* where the hosts below listen for results
                          (docs/multicast.md); INCOLL_EP_NONE or 0:
                          nobody */
} mgr_group_add_t;

/* Host -> manager, first message. */
typedef struct {
    char job[MGR_NAME_MAX];
    int32_t rank;
    int32_t size;
    char host[MGR_NAME_MAX]; /* topology host name; "" = by address */
    incoll_ep_t ep;          /* its UDP endpoint */
    uint32_t pid;
} mgr_join_t;

/* Host -> manager: the group for a communicator. Every member sends the
 * same comm, gen and member list; the manager answers all when all have
 * asked. */
typedef struct {
    uint32_t req;
    uint64_t comm;
    uint32_t gen;     /* 0, then +1 for each rebuild */
    uint32_t slots;   /* wanted; 0 = the manager's default */
    uint32_t payload; /* wanted; 0 = what the ANs allow */
    uint64_t opseq;   /* rebuilds: the operation this member is at */
    uint32_t nmembers;
    const uint8_t *members; /* nmembers u32 world ranks, comm order */
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
    uint16_t child; /* our child index at the AN */
    incoll_ep_t an; /* the AN we send to */
    uint32_t slots;
    uint32_t payload;
    uint32_t ops;
    uint32_t dtypes;
    uint64_t opseq_min; /* smallest and largest opseq the members */
    uint64_t opseq_max; /* sent */
    uint32_t nmembers;
    const uint8_t *peers; /* nmembers u64 UDP endpoints, comm order */
    incoll_ep_t mcast;    /* the address our AN multicasts results to
                             (docs/multicast.md); INCOLL_EP_NONE or 0:
                             none */
} mgr_group_info_t;

/* Manager -> host, before the group_info answering req: where the
 * communicator's members are. Each value 0 when unknown. */
typedef struct {
    uint16_t format; /* MGR_SHAPE_FORMAT */
    uint32_t req;
    uint32_t hosts;  /* topology hosts the members are on */
    uint32_t ppn;    /* most members on one of them */
    uint16_t radix;  /* the widest switch of the group's tree (children in
                        the topology); 0: no group */
    uint16_t levels; /* the highest switch level of the group's tree */
} mgr_group_shape_t;

/* Encoders append the body of one message to w. Decoders check every
 * field and that nothing is left over; on failure they return
 * INCOLL_ERR_PROTOCOL and point *why_p at a constant naming the field. */
void mgr_enc_an_register(mgr_wbuf_t *w, const mgr_an_register_t *m);
incoll_status_t mgr_dec_an_register(const uint8_t *p, size_t n,
                                    mgr_an_register_t *m, const char **why_p);
/* Entry i of the register's groups (validated by the decoder). */
void mgr_an_group_at(const mgr_an_register_t *m, uint32_t i, mgr_an_group_t *g);
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
void mgr_enc_group_shape(mgr_wbuf_t *w, const mgr_group_shape_t *m);
/* INCOLL_ERR_UNSUPPORTED (why "format") for another format. */
incoll_status_t mgr_dec_group_shape(const uint8_t *p, size_t n,
                                    mgr_group_shape_t *m, const char **why_p);
incoll_status_t mgr_dec_group_info(const uint8_t *p, size_t n,
                                   mgr_group_info_t *m, const char **why_p);

/*
 * Why a collective ran in software (on the hosts) and not in the network:
 * the host library's reasons, as it reports them (MGR_USAGE) and the
 * manager names them in its metrics (mgr_fb_name).
 */
typedef enum {
    MGR_FB_NO_MANAGER =
        0,               /* no manager: only fabric.conf's world has a group */
    MGR_FB_REFUSED,      /* the manager gave the communicator no group
                            (quota, resources, no answer) */
    MGR_FB_GROUP_FAILED, /* its group failed (an AN), or the result came
                            from the other members in a recovery */
    MGR_FB_UNSUPPORTED,  /* the group cannot do this op, datatype,
                            collective or size */
    MGR_FB_REQUESTED,    /* the caller asked for a host-based algorithm */
    MGR_FB_COUNT
} mgr_fb_t;

/* "no_manager", "refused", ...; "unknown" out of range. */
const char *mgr_fb_name(int reason);

#define MGR_USAGE_MAX_ENTRIES 1024
/* Counts are increments since the last report: no more than this each. */
#define MGR_USAGE_MAX_COUNT (1ull << 48)

/* One communicator's collectives since the last report: how many ran in
 * the network and in software, and the software ones by reason (their sum
 * is ops_sw). */
typedef struct {
    uint64_t comm;
    uint32_t group; /* the group it holds, 0 for none */
    uint64_t ops_net;
    uint64_t ops_sw;
    uint64_t fb[MGR_FB_COUNT];
} mgr_usage_entry_t;

/* Host -> manager: u16 entries, u8 reasons (MGR_FB_COUNT), then per entry
 * u64 comm, u32 group, u64 ops_net, u64 ops_sw, reasons x u64. */
typedef struct {
    uint16_t nentries; /* 1..MGR_USAGE_MAX_ENTRIES */
    uint8_t nreasons;  /* as sent: at most MGR_FB_COUNT */
    const uint8_t *entries;
    size_t entries_len;
} mgr_usage_t;

void mgr_enc_usage(mgr_wbuf_t *w, const mgr_usage_entry_t *e, uint16_t n);
incoll_status_t mgr_dec_usage(const uint8_t *p, size_t n, mgr_usage_t *m,
                              const char **why_p);
/* Entry i of a decoded report (validated by the decoder); reasons the
 * sender did not know are 0. */
void mgr_usage_at(const mgr_usage_t *m, uint16_t i, mgr_usage_entry_t *e);

/*
 * A process's counters of the result path since its last report
 * (MGR_USAGE_PROC), sent with its usage by every process of a job and
 * summed per job by the manager (`incoll stat`'s "counters" line, the
 * incoll_job_* metrics; docs/manager.md). X(id, stat name, metric name,
 * help) in the order they are sent.
 */
#define MGR_PC_LIST(X)                                                         \
    X(OPS, "ops", "incoll_job_rank_operations",                                \
      "Collectives completed on the job's ranks, each rank counting its "      \
      "own calls.")                                                            \
    X(RX, "rx_datagrams", "incoll_job_rank_datagrams_received",                \
      "Datagrams the job's processes received (unicast and multicast).")       \
    X(TX, "tx_datagrams", "incoll_job_rank_datagrams_sent",                    \
      "Datagrams the job's processes sent.")                                   \
    X(WAKEUPS, "wakeups", "incoll_job_rank_wakeups",                           \
      "Returns from a wait in which a process of the job blocked (poll, the "  \
      "library lock, node mode's futexes).")                                   \
    X(MC_RESULTS, "mcast_results", "incoll_job_mcast_results",                 \
      "Results the job's processes took from a multicast copy.")               \
    X(MC_DUPS, "mcast_duplicates", "incoll_job_mcast_duplicates",              \
      "Multicast copies of results the job's processes already had.")          \
    X(MC_REPAIRED, "mcast_repaired", "incoll_job_mcast_repaired",              \
      "Results the job's processes took from a unicast copy while listening "  \
      "to multicast (the multicast copy was lost or late).")                   \
    X(MC_FALLBACKS, "mcast_fallbacks", "incoll_job_mcast_fallbacks",           \
      "Communicators of the job whose results went back to unicast because "   \
      "multicast did not work (join failed, nothing arrived).")

typedef enum {
#define MGR_PC_ENUM(id, stat, metric, help) MGR_PC_##id,
    MGR_PC_LIST(MGR_PC_ENUM)
#undef MGR_PC_ENUM
        MGR_PC_COUNT
} mgr_pc_t;

/* The body's version: a manager refuses, with an error naming both, a
 * version it does not read (never a silent drop of counters). */
#define MGR_PC_VERSION 1

/* Host -> manager: u8 version, u8 counters (MGR_PC_COUNT), counters x u64
 * (increments since the last report, at most MGR_USAGE_MAX_COUNT each). */
void mgr_enc_usage_proc(mgr_wbuf_t *w, const uint64_t v[MGR_PC_COUNT]);
incoll_status_t mgr_dec_usage_proc(const uint8_t *p, size_t n,
                                   uint64_t v[MGR_PC_COUNT],
                                   const char **why_p);
/* "ops", ...; "unknown" out of range; the metric's name and help. */
const char *mgr_pc_name(int i);
const char *mgr_pc_metric(int i);
const char *mgr_pc_help(int i);

void mgr_enc_caps(mgr_wbuf_t *w, const mgr_caps_t *c);
void mgr_dec_caps(mgr_rbuf_t *r, mgr_caps_t *c);

/* Name of a message type for logs ("group_add"), or "unknown". */
const char *mgr_msg_name(uint16_t type);

#endif
