/*
 * Communicators: incoll_comm_split, incoll_comm_create, incoll_comm_destroy,
 * incoll_comm_offloaded, and the fabric group behind each (see comm.h).
 *
 * With a manager (INCOLL_MGR) every communicator of two or more ranks asks
 * the manager for a group: all members send the same request and the
 * manager answers all of them together, with the group (id, key, our child
 * index and AN, slots, payload, capabilities) or with the reason there is
 * none, and with the members' UDP endpoints either way. Without a manager
 * (INCOLL_FABRIC with fabric.conf only) only the world has a group; the
 * others run host-based algorithms. incoll_comm_offloaded() says which and
 * why, and INCOLL_LOG_LEVEL=info says it once per communicator.
 *
 * Split exchanges (color, key) with an allreduce (bitwise or of one slot
 * per rank) on the parent, so it works over the fabric or the hosts alike.
 */
#include "host/comm.h"

#include "host/host.h"
#include "host/hier.h"
#include "host/inc_coll.h"
#include "host/req.h"
#include "host/mgr_client.h"
#include "host/mcast.h"

#include "common/log.h"
#include "common/clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint32_t host_mgr_local_ip(const char *addr)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    uint32_t ip;
    uint16_t port;
    int fd;

    if (mgr_parse_addr(addr, &ip, &port) != INCOLL_OK)
        return 0x7f000001u;
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0x7f000001u;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port ? port : 9);
    /* A connected UDP socket sends nothing but learns the route. */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0 ||
        sa.sin_addr.s_addr == htonl(INADDR_ANY)) {
        close(fd);
        return 0x7f000001u;
    }
    close(fd);
    return ntohl(sa.sin_addr.s_addr);
}

/* splitmix64: ids alike on every member. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The recovery decision (comm.h): pure, so that it can be tested alone. */
host_rec_action_t host_recovery_action(uint64_t lo, uint64_t hi, uint64_t mine,
                                       int started, int has_saved,
                                       uint64_t saved_op)
{
    if (hi < lo || mine < lo || mine > hi)
        return HOST_REC_FAIL;
    if (lo == hi)
        return HOST_REC_REDO;
    /* Behind, started or not: a broadcast ahead of its round
     * (INCOLL_BCAST_AHEAD) completes at members before others start it,
     * so a member may not have started lo while others completed it. */
    (void)started;
    if (mine == lo)
        return HOST_REC_FETCH;
    /* Ahead, at hi or between (one-way broadcasts complete at members
     * while others have not started them: docs/failures.md): every
     * member past lo completed it and must have kept it. */
    return has_saved && saved_op == lo ? HOST_REC_SERVE : HOST_REC_FAIL;
}

void host_comm_keep_sizes(const host_rec_call_t *call, int rank, int size,
                          size_t *res_bytes, size_t *in_bytes)
{
    size_t n = call->count, all = (size_t)size * n;
    int root = rank == call->root;
    *res_bytes = *in_bytes = 0;
    switch (call->kind) {
    case HOST_COLL_ALLREDUCE:
        *res_bytes = n * incoll_dtype_size(call->dtype);
        break;
    case HOST_COLL_BCAST:
        *res_bytes = n;
        break;
    case HOST_COLL_ALLGATHER:
        *res_bytes = all;
        break;
    case HOST_COLL_REDUCE: /* only a root behind lacks something */
        *in_bytes = root ? 0 : n * incoll_dtype_size(call->dtype);
        break;
    case HOST_COLL_GATHER:
        *in_bytes = root ? 0 : n;
        break;
    case HOST_COLL_SCATTER:
        *in_bytes = root ? all : 0;
        break;
    case HOST_COLL_REDUCE_SCATTER:
        *in_bytes = all * incoll_dtype_size(call->dtype);
        break;
    default: /* a barrier: nothing */
        break;
    }
}

const char *host_recovery_action_name(host_rec_action_t act)
{
    switch (act) {
    case HOST_REC_REDO:
        return "redo";
    case HOST_REC_FETCH:
        return "fetch";
    case HOST_REC_SERVE:
        return "serve";
    default:
        return "fail";
    }
}

#define TAG_SPLIT 0x53504c4954000000ull  /* "SPLIT" */
#define TAG_CREATE 0x4352454154450000ull /* "CREATE" */

typedef struct {
    uint64_t hash;
    uint64_t count;
} create_count_t;

/* Broadcasts kept by number (host_comm_info.bcasts): more than the
 * farthest apart one-way broadcasts and a round sent ahead can put the
 * members (HOST_ONEWAY_EVERY + 1 operations, docs/failures.md). */
#define KEEP_BCASTS 8
_Static_assert(KEEP_BCASTS > HOST_ONEWAY_EVERY + 1,
               "keep the broadcasts members may be apart by");

struct host_comm_info {
    uint64_t id;
    uint32_t gen;            /* group generation, +1 per rebuild */
    uint64_t nsplits;        /* splits of this communicator so far */
    create_count_t *creates; /* creates from it, per member list */
    int ncreates;
    int capcreates;
    int failed;      /* the manager said its group failed */
    int rebuilt;     /* new groups asked for after failures */
    int answered;    /* the manager answered the last request */
    uint64_t opbase; /* in-network operations on earlier engines */
    uint32_t ops;    /* the group's capabilities */
    uint32_t dtypes;
    char why[320];      /* why not offloaded; "" when it is */
    incoll_ep_t *peers; /* UDP endpoints by rank (manager mode) */
    int broken;         /* a recovery failed: every call fails (why says
                           why) */
    /* Results of in-network operations (manager mode, see
     * host_comm_result_buf): op k writes into res[k's turn], the other
     * buffer keeps the result of the last completed op (saved_op). */
    uint8_t *res[2];
    size_t res_cap[2];
    int saved; /* res[saved_idx] holds op saved_op's result */
    int saved_idx;
    uint64_t saved_op;
    size_t saved_bytes;         /* of result, at the start of res[saved_idx] */
    size_t saved_in_bytes;      /* of input kept behind it */
    host_rec_call_t saved_call; /* what op saved_op was (no buffers) */
    /* Broadcasts of at most the engine's ahead_bytes (one-way, or sent
     * ahead of their round) complete at some members while others have
     * not started them, so a recovery may find the members up to
     * KEEP_BCASTS - 1 operations apart (docs/failures.md): each such
     * broadcast keeps its data here, at its operation's number modulo
     * KEEP_BCASTS, and leaves res (and the result of the last other
     * operation) as they are. */
    struct kept_bcast {
        uint64_t op;
        int valid;
        host_rec_call_t call;
        size_t bytes, cap;
        uint8_t *data;
    } bcasts[KEEP_BCASTS];
    int bcast_slot; /* 1 + the slot the running broadcast writes, or 0 */
    /* A recovery this member left before its end (it took its call's
     * result while others are further ahead, or it was found behind
     * outside a call): where it is and what it asked the manager, for its
     * next call to go on with. */
    struct {
        int valid;
        int failure; /* it gave its group up */
        int asked;   /* it asked the manager for a new group: req */
        uint32_t req;
        uint64_t pos;
    } carry;
    struct incoll_comm *shadow; /* the members' recovery channel: its own
                                   host-based engine (see recover_comm) */
    struct incoll_comm *owner;  /* of a shadow: the communicator it serves */
    int pulled;     /* another member started a recovery (its recovery
                       channel's data came): this one joins it */
    int recovering; /* in host_comm_recover_coll */
    /* Outside a call, this member took part in a recovery (its thread,
     * host_comm_serve_idle) and was found behind: it joins the next round
     * at its next call, not before. */
    int serve_later;
    /* The member's next call on the communicator fails with this status,
     * unrun (INCOLL_OK: none): an erroneous call that the others are in,
     * while this member recovered the call before it (see
     * host_comm_recover_coll). */
    incoll_status_t doomed;
    /* A call of this member failed alone (its INCOLL_DEADLINE_MS passed:
     * the others may still be in it): at its next call the members agree
     * that call failed (pending_why, at position pending_pos). */
    int pending_why;
    uint64_t pending_pos;
    uint64_t group_key; /* the manager's random key of the group (0: none) */
    uint32_t p2p_epoch; /* host-based engines made so far, less one: each
                           recovery starts a fresh one (host_comm_wire_id) */
};

struct host_ctx_info {
    host_mgr_t *mgr;
};

const char *host_ctx_mgr_tune(incoll_ctx_h ctx, const char **source_p)
{
    return ctx->info ? host_mgr_tune(ctx->info->mgr, source_p) : NULL;
}

/* The communicator's info, made on first use for a world made from
 * fabric.conf (id 0, the world group's capabilities: everything). */
static struct host_comm_info *info_of(incoll_comm_h comm)
{
    if (comm->info == NULL) {
        comm->info = calloc(1, sizeof(*comm->info));
        if (comm->info == NULL)
            return NULL;
        comm->info->ops = (1u << INCOLL_OP_COUNT) - 1;
        comm->info->dtypes = (1u << INCOLL_DTYPE_COUNT) - 1;
        if (comm->eng == NULL)
            snprintf(comm->info->why, sizeof(comm->info->why),
                     "no fabric group");
    }
    return comm->info;
}

static host_mgr_t *mgr_of(incoll_ctx_h ctx)
{
    return ctx->info ? ctx->info->mgr : NULL;
}

static void shadow_free(incoll_comm_h shadow);

void host_comm_info_free(incoll_comm_h comm)
{
    if (comm == NULL || comm->info == NULL)
        return;
    if (comm->info->shadow)
        shadow_free(comm->info->shadow);
    if (comm->info->owner && comm->info->owner->info)
        comm->info->owner->info->shadow = NULL;
    free(comm->info->res[0]);
    free(comm->info->res[1]);
    for (int i = 0; i < KEEP_BCASTS; i++)
        free(comm->info->bcasts[i].data);
    free(comm->info->creates);
    free(comm->info->peers);
    free(comm->info);
    comm->info = NULL;
}

void host_ctx_info_free(incoll_ctx_h ctx)
{
    if (ctx == NULL || ctx->info == NULL)
        return;
    host_mgr_close(ctx->info->mgr);
    free(ctx->info);
    ctx->info = NULL;
}

uint64_t host_comm_id(incoll_comm_h comm)
{
    return comm->info ? comm->info->id : 0;
}

/* The id the wire id and key are made from: the communicator's, and the
 * host-based engine's epoch (a recovery starts a fresh engine whose
 * packets the old one's never match). */
static uint64_t wire_base(incoll_comm_h comm)
{
    uint32_t epoch = comm->info ? comm->info->p2p_epoch : 0;
    return host_comm_id(comm) ^ (epoch ? mix(0x45504f4348ull + epoch) : 0);
}

static uint32_t wire_id_of(uint64_t base)
{
    return 0x80000000u |
           (uint32_t)(mix(base ^ 0x5032505f4944ull) & 0x7fffffffu);
}

uint32_t host_comm_wire_id(incoll_comm_h comm)
{
    return wire_id_of(wire_base(comm));
}

uint64_t host_comm_wire_key(incoll_comm_h comm)
{
    uint64_t k = mix(wire_base(comm) ^ 0x503250504b4559ull);
    return k ? k : 1;
}

incoll_ep_t host_comm_peer_ep(incoll_comm_h comm, int rank)
{
    incoll_ctx_h ctx = comm->ctx;
    int w;
    if (rank < 0 || rank >= comm->size)
        return INCOLL_EP_NONE;
    if (comm->info && comm->info->peers)
        return comm->info->peers[rank];
    w = comm->world_ranks[rank];
    /* Ranks sharing fabric.conf's hosts: the world's from their leaders
     * (src/host/rdv.c). */
    if (ctx->world && ctx->world != comm && ctx->world->info &&
        ctx->world->info->peers && w >= 0 && w < ctx->world->size)
        return ctx->world->info->peers[w];
    if (ctx->conf.hosts == NULL || w < 0 || w >= ctx->conf.nhosts)
        return INCOLL_EP_NONE;
    return fabric_conf_host_ep(&ctx->conf, w);
}

/* Says once, at info level, why comm runs on the hosts. */
static void say_why(incoll_comm_h comm)
{
    incoll_info("comm %016" PRIx64 " (%d ranks, rank %d): collectives run on "
                "the hosts: %s",
                comm->info->id, comm->size, comm->rank, comm->info->why);
}

struct host_mgr *host_ctx_mgr(incoll_ctx_h ctx)
{
    return mgr_of(ctx);
}

int host_comm_fb_reason(incoll_comm_h comm)
{
    const struct host_comm_info *info = comm->info;
    if (comm->eng && comm->group && (info == NULL || !info->failed))
        return MGR_FB_UNSUPPORTED;
    if (info && (info->failed || info->rebuilt || info->broken))
        return MGR_FB_GROUP_FAILED;
    return mgr_of(comm->ctx) ? MGR_FB_REFUSED : MGR_FB_NO_MANAGER;
}

/* ---- the manager link ---- */

static void on_group_failed(void *arg, uint32_t group, uint64_t comm_id,
                            uint32_t gen, const char *reason)
{
    incoll_ctx_h ctx = arg;
    for (incoll_comm_h c = ctx->comms; c; c = c->next) {
        struct host_comm_info *info = c->info;
        if (info == NULL || c->group != group || info->id != comm_id ||
            info->failed)
            continue;
        info->failed = 1;
        snprintf(info->why, sizeof(info->why), "its group %u failed: %s", group,
                 reason);
        incoll_info("comm %016" PRIx64 ": group %u (generation %u) failed: %s",
                    comm_id, group, gen, reason);
    }
}

uint64_t host_ctx_mgr_pollfd(incoll_ctx_h ctx, struct pollfd *pfd)
{
    host_mgr_t *mgr = mgr_of(ctx);
    uint64_t ms;
    pfd->fd = mgr ? host_mgr_fd(mgr) : -1;
    pfd->events = POLLIN;
    pfd->revents = 0;
    if (mgr == NULL)
        return UINT64_MAX;
    if (host_mgr_want_write(mgr))
        pfd->events |= POLLOUT;
    ms = host_mgr_deadline_ms(mgr);
    return ms == UINT64_MAX ? UINT64_MAX : ms * 1000000ull;
}

void host_ctx_mgr_on_readable(incoll_ctx_h ctx)
{
    host_mgr_t *mgr = mgr_of(ctx);
    if (mgr)
        host_mgr_read(mgr, on_group_failed, ctx);
}

/*
 * Waits for the answer to req, receiving UDP meanwhile (peers that
 * finished an operation may need our answers) and never spinning.
 */
static incoll_status_t wait_answer(incoll_ctx_h ctx, host_mgr_t *mgr,
                                   uint32_t req, host_mgr_group_t *g,
                                   uint64_t timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;

    for (;;) {
        struct pollfd pfd[2];
        int nfd = 0, mfd, wait;
        uint64_t now;

        host_mgr_read(mgr, on_group_failed, ctx);
        if (host_mgr_take_answer(mgr, req, g))
            return INCOLL_OK;
        now = now_ms();
        if (now >= deadline) {
            host_mgr_forget(mgr, req);
            return INCOLL_ERR_TIMEOUT;
        }
        wait = (int)(deadline - now);
        if (host_mgr_deadline_ms(mgr) < deadline)
            wait = host_mgr_deadline_ms(mgr) > now
                       ? (int)(host_mgr_deadline_ms(mgr) - now)
                       : 0;
        mfd = host_mgr_fd(mgr);
        if (mfd >= 0) {
            pfd[nfd].fd = mfd;
            pfd[nfd].events = POLLIN | (host_mgr_want_write(mgr) ? POLLOUT : 0);
            pfd[nfd++].revents = 0;
        }
        pfd[nfd].fd = udp_fd(ctx->sock);
        pfd[nfd].events = POLLIN;
        pfd[nfd++].revents = 0;
        if (poll(pfd, (nfds_t)nfd, wait) < 0 && errno != EINTR)
            return INCOLL_ERR_IO;
        if (pfd[nfd - 1].revents & POLLIN)
            host_ctx_progress(ctx, 0);
    }
}

/* Sends the request for comm's group of generation gen; *req_p is what
 * group_take() waits for. */
static incoll_status_t group_ask(incoll_comm_h comm, uint32_t gen,
                                 uint64_t opseq, uint32_t *req_p)
{
    struct host_comm_info *info = comm->info;
    uint32_t slots = comm->ctx->cfg.group_slots;
    incoll_status_t status;

    /* Streaming carries the large vectors: the group's own share of the
     * ANs need only serve the small ones (docs/streaming.md). */
    if (slots == 0)
        slots = comm->ctx->cfg.stream_slots;
    status = host_mgr_group_request(mgr_of(comm->ctx), info->id, gen,
                                    comm->world_ranks, comm->size, opseq, slots,
                                    0, req_p);
    info->answered = 0;
    if (status != INCOLL_OK)
        snprintf(info->why, sizeof(info->why),
                 "the group request could not be sent: %s",
                 incoll_status_string(status));
    return status;
}

/*
 * Waits for the answer to req and sets comm up with it: an engine on
 * success, else no engine and the reason in info->why. An error answer
 * (refused, or the request expired because not every member asked) is an
 * error, never a group.
 */
static incoll_status_t group_take(incoll_comm_h comm, uint32_t req)
{
    incoll_ctx_h ctx = comm->ctx;
    struct host_comm_info *info = comm->info;
    host_mgr_t *mgr = mgr_of(ctx);
    host_mgr_group_t g;
    host_engine_params_t p;
    incoll_status_t status;
    uint64_t timeout = ctx->cfg.mgr_timeout_ms;
    uint64_t payload = ctx->cfg.payload;

    status = wait_answer(ctx, mgr, req, &g, timeout);
    if (status != INCOLL_OK) {
        snprintf(info->why, sizeof(info->why),
                 "the manager did not answer the group request: %s",
                 incoll_status_string(status));
        return status;
    }
    info->answered = 1;
    if (info->id == 0 && comm->info->owner == NULL) {
        /* the world's: the shape its selection table is compared with */
        ctx->mgr_shape.hosts = g.hosts;
        ctx->mgr_shape.ppn = g.ppn;
        ctx->mgr_shape.radix = g.radix;
        ctx->mgr_shape.levels = g.levels;
    }
    if (g.nmembers == comm->size && g.peers) {
        free(info->peers);
        info->peers = g.peers;
        g.peers = NULL;
    }
    if (g.status != INCOLL_OK) {
        snprintf(info->why, sizeof(info->why), "no fabric group: %s (%s)",
                 g.reason[0] ? g.reason : "the manager refused",
                 incoll_status_string(g.status));
        status = g.status;
        host_mgr_group_free(&g);
        return status == INCOLL_OK ? INCOLL_ERR_NO_RESOURCE : status;
    }
    p = ctx->eng_defaults;
    p.group = g.group;
    p.gen = ctx->gen;
    /* The manager's random key never goes on the wire: the mac key is
     * derived from it and the fabric secret, as on the ANs. */
    wire_key_derive(ctx->has_secret ? ctx->secret : NULL, WIRE_KEY_GROUP,
                    g.group, g.key, &p.key);
    p.child = g.child;
    p.an = g.an;
    p.slots = g.slots;
    p.max_payload = g.payload;
    if (payload >= 8 && payload < g.payload)
        p.max_payload = (uint32_t)payload;
    if (p.window > p.slots)
        p.window = p.slots;
    host_mcast_params(comm, g.mcast, g.an, &p);
    /* The manager watches the ANs and says when a group fails, so the
     * engine's own limits only guard against a silent manager: a member
     * that is merely late (busy, or recovering another communicator) must
     * not look like a failure. */
    {
        uint64_t timeout_ns = ctx->cfg.mgr_op_timeout_ms * 1000000ull;
        uint64_t rto = p.rto_max_ns; /* INCOLL_RTO_MAX_US, at least 1 us */
        if (p.progress_timeout_ns < timeout_ns)
            p.progress_timeout_ns = timeout_ns;
        if ((uint64_t)p.max_retries < timeout_ns / rto + 8)
            p.max_retries = (int)(timeout_ns / rto + 8);
    }
    comm->eng = host_engine_create(&p);
    if (comm->eng == NULL) {
        snprintf(info->why, sizeof(info->why), "out of memory for the engine");
        host_mgr_group_free(&g);
        return INCOLL_ERR_NO_MEMORY;
    }
    comm->group = g.group;
    info->ops = g.ops;
    info->group_key = g.key;
    info->dtypes = g.dtypes;
    info->failed = 0;
    info->why[0] = '\0';
    host_mgr_group_free(&g);
    incoll_debug("comm %016" PRIx64 ": group %u, child %u, %u slots, payload "
                 "%u",
                 info->id, comm->group, p.child, p.slots, p.max_payload);
    return INCOLL_OK;
}

/*
 * The group of a new communicator: the manager answers when every member
 * asked, with the group or why there is none, and the members' endpoints
 * either way. A request that expires before every member asked (a rank
 * that starts, or reaches its split, later than the manager's request
 * time, INCOLL_MGR_REQUEST_MS) or that the manager does not answer in
 * time brings no endpoints: the member asks again, as long as
 * INCOLL_WAIT_MS allows, so that a late rank is waited for as MPI waits.
 */
static void group_make(incoll_comm_h c)
{
    uint64_t end = host_now_ns() + c->ctx->cfg.wait_ns;
    uint32_t req;
    int tries = 0;

    for (;;) {
        incoll_status_t status;
        if (group_ask(c, 0, 0, &req) != INCOLL_OK)
            return;
        status = group_take(c, req);
        tries++;
        if (status != INCOLL_ERR_TIMEOUT || c->info->peers != NULL ||
            host_now_ns() >= end)
            return;
        if (tries == 1)
            incoll_info("comm %016" PRIx64 ": not every member has asked the "
                        "manager for the group yet (%s); asking again, up "
                        "to INCOLL_WAIT_MS",
                        c->info->id, c->info->why);
    }
}

/* A communicator of n members (world_ranks, taken over, freed on
 * failure) in which we are rank me, with id and no group yet; not linked
 * to the context. */
static incoll_comm_h comm_alloc(incoll_ctx_h ctx, uint64_t id, int n,
                                int *world_ranks, int me)
{
    incoll_comm_h c = calloc(1, sizeof(*c));
    struct host_comm_info *info = calloc(1, sizeof(*info));

    if (c == NULL || info == NULL) {
        free(c);
        free(info);
        free(world_ranks);
        return NULL;
    }
    c->ctx = ctx;
    c->rank = me;
    c->size = n;
    c->world_ranks = world_ranks;
    c->info = info;
    info->id = id;
    return c;
}

static void comm_link(incoll_comm_h c, incoll_comm_h *comm_p)
{
    c->next = c->ctx->comms;
    c->ctx->comms = c;
    *comm_p = c;
}

/* Makes a communicator of n members (world_ranks, taken over) in which we
 * are rank me, with id, and links it to the context. */
static incoll_status_t comm_make(incoll_ctx_h ctx, uint64_t id, int n,
                                 int *world_ranks, int me,
                                 incoll_comm_h *comm_p)
{
    incoll_comm_h c = comm_alloc(ctx, id, n, world_ranks, me);

    if (c == NULL)
        return INCOLL_ERR_NO_MEMORY;
    if (n == 1)
        snprintf(c->info->why, sizeof(c->info->why),
                 "a single rank needs no group");
    else if (mgr_of(ctx))
        group_make(c);
    else
        snprintf(c->info->why, sizeof(c->info->why),
                 "no manager (INCOLL_MGR is not set): only the world of "
                 "fabric.conf has a fabric group");
    if (c->eng == NULL)
        say_why(c);
    if (n > 1 && c->info->peers == NULL && mgr_of(ctx)) {
        /* Without the members' endpoints nothing can run, not even on
         * the hosts: every call would fail. */
        incoll_error("comm %016" PRIx64 ": not every member asked the "
                     "manager for the communicator's group within "
                     "INCOLL_WAIT_MS (%" PRIu64 " ms): a rank did not "
                     "start or called something else; its collectives "
                     "fail",
                     id, c->ctx->cfg.wait_ns / 1000000);
        snprintf(c->info->why, sizeof(c->info->why),
                 "not every member asked the manager for its group");
        c->info->broken = 1;
    }
    comm_link(c, comm_p);
    return INCOLL_OK;
}

incoll_status_t host_comm_bare(incoll_ctx_h ctx, uint64_t id, int n,
                               int *world_ranks, int me, incoll_ep_t *peers,
                               incoll_comm_h *comm_p)
{
    incoll_comm_h c = comm_alloc(ctx, id, n, world_ranks, me);

    if (c == NULL) {
        free(peers);
        return INCOLL_ERR_NO_MEMORY;
    }
    c->info->peers = peers;
    c->info->ops = (1u << INCOLL_OP_COUNT) - 1;
    c->info->dtypes = (1u << INCOLL_DTYPE_COUNT) - 1;
    snprintf(c->info->why, sizeof(c->info->why), "no fabric group");
    comm_link(c, comm_p);
    return INCOLL_OK;
}

incoll_status_t host_comm_take_world_group(incoll_comm_h comm, int host)
{
    struct host_comm_info *info = info_of(comm);
    incoll_status_t status;

    if (info == NULL)
        return INCOLL_ERR_NO_MEMORY;
    status = host_world_engine(comm, host);
    if (status != INCOLL_OK)
        return status;
    comm->group = comm->ctx->conf.group_id;
    info->ops = (1u << INCOLL_OP_COUNT) - 1;
    info->dtypes = (1u << INCOLL_DTYPE_COUNT) - 1;
    info->why[0] = '\0';
    return INCOLL_OK;
}

static void drop_group(incoll_comm_h comm);

int host_comm_via_leaders(incoll_comm_h comm)
{
    return comm != NULL &&
           ((comm == comm->ctx->world && comm->ctx->via_leaders) ||
            comm->ctx->up.hier_on(comm));
}

void host_comm_leave_group(incoll_comm_h comm)
{
    if (comm->eng == NULL || comm->info == NULL)
        return;
    (void)host_comm_settle(comm);
    incoll_debug("comm %016" PRIx64 ": its collectives go through its hosts' "
                 "leaders: group %u released",
                 comm->info->id, comm->group);
    drop_group(comm);
    comm->info->failed = 0;
}

/* The rank-th entry (modulo their number) of a comma-separated host list
 * into buf; -1 if the list is unset or empty or the entry does not fit. */
int host_rank_host(const char *list, int rank, char *buf, size_t len)
{
    int n = 1;
    const char *p;
    size_t w;

    if (list == NULL || *list == '\0' || rank < 0)
        return -1;
    for (p = list; *p; p++)
        n += *p == ',';
    p = list;
    for (int i = rank % n; i > 0; i--)
        p = strchr(p, ',') + 1;
    w = strcspn(p, ",");
    if (w == 0 || w >= len)
        return -1;
    memcpy(buf, p, w);
    buf[w] = '\0';
    return 0;
}

incoll_status_t host_ctx_mgr_init(incoll_ctx_h ctx)
{
    host_mgr_params_t mp;
    incoll_status_t status;
    const char *job = ctx->job;
    const char *host = ctx->host;
    char hostname[256] = "";
    int *ranks;

    if (job == NULL || *job == '\0') {
        incoll_error("init: INCOLL_MGR is set but INCOLL_JOB is not (use "
                     "`incoll run`, or set a job id shared by its ranks)");
        return INCOLL_ERR_CONFIG;
    }
    if (host == NULL || *host == '\0') {
        if (host_rank_host(ctx->hosts, ctx->rank, hostname, sizeof(hostname)) !=
            0)
            gethostname(hostname, sizeof(hostname) - 1);
        host = hostname;
    }
    ctx->info = calloc(1, sizeof(*ctx->info));
    ranks = malloc((size_t)ctx->size * sizeof(int));
    if (ctx->info == NULL || ranks == NULL) {
        free(ranks);
        return INCOLL_ERR_NO_MEMORY;
    }
    memset(&mp, 0, sizeof(mp));
    mp.addr = ctx->mgr;
    mp.secret_file = ctx->secret_file;
    mp.job = job;
    mp.rank = ctx->rank;
    mp.size = ctx->size;
    mp.host = strlen(host) < MGR_NAME_MAX ? host : "";
    mp.ep = udp_local_ep(ctx->sock);
    mp.timeout_ms = (uint32_t)ctx->cfg.mgr_connect_ms;
    status = host_mgr_connect(&mp, &ctx->info->mgr);
    if (status != INCOLL_OK) {
        free(ranks);
        host_ctx_info_free(ctx);
        return status;
    }
    for (int i = 0; i < ctx->size; i++)
        ranks[i] = i;
    status = comm_make(ctx, 0, ctx->size, ranks, ctx->rank, &ctx->world);
    if (status != INCOLL_OK)
        host_ctx_info_free(ctx);
    return status;
}

/* ---- the public calls ---- */

typedef struct {
    int64_t key;
    int rank;
} member_t;

static int cmp_member(const void *a, const void *b)
{
    const member_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank - y->rank;
}

incoll_status_t host_comm_split_impl(incoll_comm_h comm, int color, int key,
                                     incoll_comm_h *newcomm_p)
{
    struct host_comm_info *info;
    uint64_t *v, seq, id;
    member_t *mem;
    int n = 0, me = -1, *wr;
    incoll_status_t status;

    if (comm == NULL || newcomm_p == NULL ||
        (color < 0 && color != INCOLL_UNDEFINED)) {
        incoll_error("comm_split: %s",
                     comm == NULL || newcomm_p == NULL
                         ? "null communicator or result pointer"
                         : "color must be >= 0 or INCOLL_UNDEFINED");
        return INCOLL_ERR_INVALID_ARG;
    }
    info = info_of(comm);
    v = calloc((size_t)comm->size * 2, sizeof(*v));
    mem = malloc((size_t)comm->size * sizeof(*mem));
    if (info == NULL || v == NULL || mem == NULL) {
        free(v);
        free(mem);
        return INCOLL_ERR_NO_MEMORY;
    }
    v[2 * comm->rank] = (uint64_t)(int64_t)color;
    v[2 * comm->rank + 1] = (uint64_t)(int64_t)key;
    /* The library's own exchange: not one of the job's collectives
     * (host_allreduce_own). */
    status = comm->ctx->up.allreduce(comm, INCOLL_IN_PLACE, v,
                                     (size_t)comm->size * 2, INCOLL_UINT64,
                                     INCOLL_OP_BOR);
    if (status != INCOLL_OK) {
        incoll_error("comm_split: exchanging colors and keys failed: %s",
                     incoll_status_string(status));
        free(v);
        free(mem);
        return status;
    }
    seq = info->nsplits++;
    if (color == INCOLL_UNDEFINED) {
        free(v);
        free(mem);
        *newcomm_p = NULL;
        return INCOLL_OK;
    }
    for (int r = 0; r < comm->size; r++) {
        if ((int64_t)v[2 * r] != (int64_t)color)
            continue;
        mem[n].key = (int64_t)v[2 * r + 1];
        mem[n].rank = r;
        n++;
    }
    free(v);
    qsort(mem, (size_t)n, sizeof(*mem), cmp_member);
    wr = malloc((size_t)n * sizeof(int));
    if (wr == NULL) {
        free(mem);
        return INCOLL_ERR_NO_MEMORY;
    }
    for (int i = 0; i < n; i++) {
        wr[i] = comm->world_ranks[mem[i].rank];
        if (mem[i].rank == comm->rank)
            me = i;
    }
    free(mem);
    id = mix(mix(info->id ^ TAG_SPLIT) ^ seq) ^ mix((uint64_t)(uint32_t)color);
    return comm_make(comm->ctx, id, n, wr, me, newcomm_p);
}

incoll_status_t host_comm_create_impl(incoll_comm_h comm, int nranks,
                                      const int *ranks,
                                      incoll_comm_h *newcomm_p)
{
    struct host_comm_info *info;
    uint64_t h = 0x435245415445ull, id, count = 0;
    uint8_t *seen;
    int me = -1, *wr;
    create_count_t *cc = NULL;

    if (comm == NULL || newcomm_p == NULL || ranks == NULL || nranks < 1 ||
        nranks > comm->size) {
        incoll_error("comm_create: null argument or %d ranks out of 1..%d",
                     nranks, comm ? comm->size : 0);
        return INCOLL_ERR_INVALID_ARG;
    }
    info = info_of(comm);
    seen = calloc((size_t)comm->size, 1);
    wr = malloc((size_t)nranks * sizeof(int));
    if (info == NULL || seen == NULL || wr == NULL) {
        free(seen);
        free(wr);
        return INCOLL_ERR_NO_MEMORY;
    }
    for (int i = 0; i < nranks; i++) {
        int r = ranks[i];
        if (r < 0 || r >= comm->size || seen[r]) {
            incoll_error("comm_create: ranks[%d] = %d is %s", i, r,
                         r < 0 || r >= comm->size ? "not a rank of comm"
                                                  : "repeated");
            free(seen);
            free(wr);
            return INCOLL_ERR_INVALID_ARG;
        }
        seen[r] = 1;
        if (r == comm->rank)
            me = i;
        wr[i] = comm->world_ranks[r];
        h = mix(h ^ (uint64_t)(uint32_t)r);
    }
    free(seen);
    if (me < 0) {
        incoll_error("comm_create: rank %d is not among the %d ranks (only "
                     "they call it)",
                     comm->rank, nranks);
        free(wr);
        return INCOLL_ERR_INVALID_ARG;
    }
    for (int i = 0; i < info->ncreates; i++)
        if (info->creates[i].hash == h)
            cc = &info->creates[i];
    if (cc == NULL) {
        if (info->ncreates == info->capcreates) {
            int ncap = info->capcreates ? info->capcreates * 2 : 8;
            create_count_t *nc =
                realloc(info->creates, (size_t)ncap * sizeof(*nc));
            if (nc == NULL) {
                free(wr);
                return INCOLL_ERR_NO_MEMORY;
            }
            info->creates = nc;
            info->capcreates = ncap;
        }
        cc = &info->creates[info->ncreates++];
        cc->hash = h;
        cc->count = 0;
    }
    count = cc->count++;
    id = mix(mix(info->id ^ TAG_CREATE) ^ h) ^ mix(count + 1);
    return comm_make(comm->ctx, id, nranks, wr, me, newcomm_p);
}

incoll_status_t host_comm_destroy_impl(incoll_comm_h comm)
{
    incoll_ctx_h ctx;
    host_mgr_t *mgr;

    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    ctx = comm->ctx;
    if (comm == ctx->world) {
        incoll_error("comm_destroy: the world communicator belongs to the "
                     "context");
        return INCOLL_ERR_INVALID_ARG;
    }
    /* A background unlock ends while the group is still there. */
    (void)host_comm_settle(comm);
    mgr = mgr_of(ctx);
    ctx->up.usage_flush(ctx, comm); /* before the group goes */
    if (mgr && comm->group && comm->info)
        host_mgr_group_release(mgr, comm->info->id, comm->group);
    for (incoll_comm_h *pc = &ctx->comms; *pc; pc = &(*pc)->next) {
        if (*pc == comm) {
            *pc = comm->next;
            break;
        }
    }
    host_comm_free(comm);
    return INCOLL_OK;
}

INCOLL_API int incoll_comm_offloaded(incoll_comm_h comm, const char **why_p)
{
    const char *why;
    if (comm == NULL) {
        why = "null communicator";
    } else if (comm->eng && comm->group &&
               (comm->info == NULL ||
                (!comm->info->failed && !comm->info->broken))) {
        return 1;
    } else if (host_comm_via_leaders(comm)) {
        return 1;
    } else if (comm->info && comm->info->why[0]) {
        why = comm->info->why;
    } else if (comm->size == 1) {
        why = "a single rank needs no group";
    } else {
        why = "no fabric group";
    }
    if (why_p)
        *why_p = why;
    return 0;
}

int host_comm_inc_usable(incoll_comm_h comm, incoll_op_t op,
                         incoll_dtype_t dtype)
{
    const struct host_comm_info *info = comm->info;
    if (comm->eng == NULL || comm->group == 0)
        return 0;
    if (info == NULL)
        return 1;
    return !info->failed && (info->ops & (1u << op)) &&
           (info->dtypes & (1u << dtype));
}

int host_comm_group_failed(incoll_comm_h comm)
{
    return comm->eng != NULL && comm->info != NULL && comm->info->failed;
}

int host_comm_broken(incoll_comm_h comm, const char **why_p)
{
    if (comm->info == NULL || !comm->info->broken)
        return 0;
    if (why_p)
        *why_p = comm->info->why;
    return 1;
}

int host_comm_recoverable(incoll_comm_h comm)
{
    return comm->ctx->info != NULL && comm->info != NULL;
}

/* Index of the buffer the next in-network operation writes into: the one
 * that does not hold the last completed operation's result. */
static int next_res(const struct host_comm_info *info)
{
    return info->saved ? 1 - info->saved_idx : 0;
}

static uint8_t *res_grow(struct host_comm_info *info, int idx, size_t bytes)
{
    if (info->res_cap[idx] < bytes) {
        uint8_t *p = realloc(info->res[idx], bytes);
        if (p == NULL) {
            incoll_error("comm %016" PRIx64 ": cannot keep a result of %zu "
                         "bytes",
                         info->id, bytes);
            return NULL;
        }
        info->res[idx] = p;
        info->res_cap[idx] = bytes;
    }
    return info->res[idx];
}

void *host_comm_result_buf(incoll_comm_h comm, size_t bytes)
{
    struct host_comm_info *info = comm->info;
    return res_grow(info, next_res(info), bytes);
}

void host_comm_result_kept(incoll_comm_h comm, const host_rec_call_t *call,
                           size_t res_bytes, const void *in, size_t in_bytes)
{
    struct host_comm_info *info = comm->info;
    int idx = next_res(info);
    if (in_bytes > 0)
        memcpy(info->res[idx] + res_bytes, in, in_bytes);
    info->saved_idx = idx;
    info->saved = 1;
    info->saved_bytes = res_bytes;
    info->saved_in_bytes = in_bytes;
    info->saved_call = *call;
    info->saved_call.sendbuf = NULL;
    info->saved_call.recvbuf = NULL;
    info->saved_op = info->opbase + host_engine_counters(comm->eng)->ops - 1;
}

void *host_comm_bcast_buf(incoll_comm_h comm, size_t bytes)
{
    struct host_comm_info *info = comm->info;
    struct kept_bcast *k;
    uint64_t op;

    info->bcast_slot = 0;
    if (comm->eng == NULL || bytes > host_engine_params(comm->eng)->ahead_bytes)
        return host_comm_result_buf(comm, bytes);
    op = info->opbase + host_engine_counters(comm->eng)->ops;
    k = &info->bcasts[op % KEEP_BCASTS];
    if (k->cap < bytes) {
        uint8_t *p = realloc(k->data, bytes);
        if (p == NULL) {
            incoll_error("comm %016" PRIx64 ": cannot keep a broadcast of %zu "
                         "bytes",
                         info->id, bytes);
            return NULL;
        }
        k->data = p;
        k->cap = bytes;
    }
    k->valid = 0;
    k->op = op;
    info->bcast_slot = (int)(op % KEEP_BCASTS) + 1;
    return k->data;
}

void host_comm_bcast_kept(incoll_comm_h comm, const host_rec_call_t *call,
                          size_t bytes)
{
    struct host_comm_info *info = comm->info;
    struct kept_bcast *k;

    if (info->bcast_slot == 0) {
        host_comm_result_kept(comm, call, bytes, NULL, 0);
        return;
    }
    k = &info->bcasts[info->bcast_slot - 1];
    info->bcast_slot = 0;
    /* (the operation host_comm_bcast_buf gave the slot to, as it must) */
    k->valid = k->op == info->opbase + host_engine_counters(comm->eng)->ops - 1;
    k->call = *call;
    k->call.sendbuf = NULL;
    k->call.recvbuf = NULL;
    k->bytes = bytes;
}

/* What this member kept of operation op, for members behind. */
typedef struct {
    const host_rec_call_t *call;
    uint8_t *res;
    size_t res_bytes;
    const uint8_t *in;
    size_t in_bytes;
} kept_t;

/* 1 when this member kept operation op (then *k, when k is not NULL). */
static int kept_find(struct host_comm_info *info, uint64_t op, kept_t *k)
{
    const struct kept_bcast *b = &info->bcasts[op % KEEP_BCASTS];
    kept_t none;

    if (k == NULL)
        k = &none;
    if (info->saved && info->saved_op == op) {
        k->call = &info->saved_call;
        k->res = info->res[info->saved_idx];
        k->res_bytes = info->saved_bytes;
        k->in = k->res + info->saved_bytes;
        k->in_bytes = info->saved_in_bytes;
        return 1;
    }
    if (!b->valid || b->op != op)
        return 0;
    k->call = &b->call;
    k->res = b->data;
    k->res_bytes = b->bytes;
    k->in = NULL;
    k->in_bytes = 0;
    return 1;
}

int host_comm_fail_why(incoll_comm_h comm, incoll_status_t status, int net)
{
    if (status == INCOLL_OK)
        return -1;
    if (status == INCOLL_ERR_MISMATCH) {
        unsigned m = WIRE_MISMATCH_NONE;
        if (net && comm->eng != NULL)
            m = host_engine_mismatch(comm->eng);
        else if (!net && comm->p2p.eng != NULL)
            m = p2p_engine_mismatch(comm->p2p.eng);
        return m != WIRE_MISMATCH_NONE ? (int)m : WIRE_MISMATCH_KIND;
    }
    if (host_call_expired(comm))
        return HOST_ABORT_DEADLINE;
    if (host_comm_pulled(comm))
        return net && (host_comm_group_failed(comm) ||
                       status == INCOLL_ERR_TIMEOUT)
                   ? HOST_ABORT_NONE
                   : HOST_ABORT_PULLED;
    if (net && comm->ctx->info != NULL &&
        (status == INCOLL_ERR_GROUP_FAILED || status == INCOLL_ERR_TIMEOUT))
        return HOST_ABORT_NONE;
    return -1;
}

incoll_status_t host_comm_abort_call(incoll_comm_h comm, int why)
{
    host_rec_call_t c = {HOST_COLL_ALLREDUCE, 0,    0,   INCOLL_UINT8,
                         INCOLL_OP_SUM,       NULL, NULL};
    int done;
    return host_comm_recover_coll(comm, 0, &c, why, &done);
}

incoll_status_t host_comm_refuse(incoll_comm_h comm, incoll_status_t status)
{
    incoll_status_t rec;

    if (comm == NULL || comm->size < 2 || host_comm_broken(comm, NULL))
        return status;
    if (comm->ctx->up.hier_refuse(comm, &rec))
        return rec == INCOLL_OK ? status : rec;
    rec = host_comm_abort_call(comm, HOST_ABORT_ARG);
    return rec == INCOLL_ERR_GROUP_FAILED ? rec : status;
}

/* An allreduce of bytes, as the recovery sees it (count in bytes). */
static host_rec_call_t allreduce_call(void *recvbuf, size_t bytes)
{
    host_rec_call_t c = {HOST_COLL_ALLREDUCE, 0,    bytes,  INCOLL_UINT8,
                         INCOLL_OP_SUM,       NULL, recvbuf};
    return c;
}

void host_comm_result_done(incoll_comm_h comm, size_t count,
                           incoll_dtype_t dtype, incoll_op_t op)
{
    host_rec_call_t c = {
        HOST_COLL_ALLREDUCE, comm->call_tag, count, dtype, op, NULL, NULL};
    host_comm_result_kept(comm, &c, count * incoll_dtype_size(dtype), NULL, 0);
}

#define TAG_RECOVER 0x5245434f56455200ull /* "RECOVER" */

/* FNV-1a over a result, in 63 bits (so that -h is an int64 too). */
static int64_t result_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return (int64_t)(h >> 1);
}

static void shadow_free(incoll_comm_h shadow)
{
    incoll_ctx_h ctx = shadow->ctx;
    for (incoll_comm_h *pc = &ctx->comms; *pc; pc = &(*pc)->next) {
        if (*pc == shadow) {
            *pc = shadow->next;
            break;
        }
    }
    shadow->info->owner = NULL;
    /* No lingering: a lingering engine answers a member still waiting in
     * an agreement that it is behind, which keeps that member waiting as
     * long as it asks. Without it, that member times out (an error). */
    p2p_engine_destroy(shadow->p2p.eng);
    shadow->p2p.eng = NULL;
    host_comm_free(shadow);
}

/* The wire id of comm's recovery channel (recover_comm), made or not. */
static uint32_t shadow_wire_id(const struct host_comm_info *info)
{
    return wire_id_of(mix(info->id ^ TAG_RECOVER));
}

/*
 * The recovery channel of comm, made on its first recovery (or when
 * another member's recovery data comes first): a hidden communicator with
 * the same members whose host-based engine carries only the recovery
 * agreements (its own wire id and key). Agreements therefore never share
 * steps with the host-based operations of the caller's program on comm,
 * which members one operation apart may be running or about to run (a
 * member that completed an in-network operation may have started a
 * host-based one while another is still recovering): on one engine the
 * blocks of two different operations would be paired. Its engine waits up
 * to INCOLL_WAIT_MS for the slowest member, which may be computing before
 * its next call.
 */
static incoll_comm_h recover_comm(incoll_comm_h comm)
{
    struct host_comm_info *info = comm->info;
    incoll_ctx_h ctx = comm->ctx;
    host_engine_params_t keep = ctx->eng_defaults;
    uint64_t wait_ns = ctx->cfg.wait_ns;
    uint64_t rto = keep.rto_max_ns; /* INCOLL_RTO_MAX_US, at least 1 us */
    incoll_comm_h sh;
    incoll_status_t status;

    if (info->shadow)
        return info->shadow;
    sh = calloc(1, sizeof(*sh));
    if (sh == NULL)
        return NULL;
    sh->ctx = ctx;
    sh->rank = comm->rank;
    sh->size = comm->size;
    sh->world_ranks = malloc((size_t)comm->size * sizeof(int));
    sh->info = calloc(1, sizeof(*sh->info));
    if (sh->world_ranks && info->peers)
        sh->info->peers = malloc((size_t)comm->size * sizeof(incoll_ep_t));
    if (sh->world_ranks == NULL || sh->info == NULL ||
        (info->peers && sh->info->peers == NULL)) {
        host_comm_free(sh);
        return NULL;
    }
    memcpy(sh->world_ranks, comm->world_ranks,
           (size_t)comm->size * sizeof(int));
    if (info->peers)
        memcpy(sh->info->peers, info->peers,
               (size_t)comm->size * sizeof(incoll_ep_t));
    sh->info->id = mix(info->id ^ TAG_RECOVER);
    snprintf(sh->info->why, sizeof(sh->info->why), "recovery channel");
    ctx->eng_defaults.progress_timeout_ns = wait_ns;
    ctx->eng_defaults.max_retries = (int)(wait_ns / rto + 8);
    status = sh->ctx->up.p2p(sh);
    ctx->eng_defaults = keep;
    if (status != INCOLL_OK) {
        host_comm_free(sh);
        return NULL;
    }
    /* Right after its owner on the context's list, so that
     * incoll_finalize() frees the owner first, which frees the shadow
     * (shadow_free). */
    sh->info->owner = comm;
    sh->next = comm->next;
    comm->next = sh;
    info->shadow = sh;
    return sh;
}

static void renew_p2p(incoll_comm_h comm);

int host_comm_group_key(incoll_comm_h comm, uint64_t *key_p)
{
    if (comm->eng == NULL || comm->info == NULL || comm->info->group_key == 0)
        return 0;
    *key_p = comm->info->group_key;
    return 1;
}

incoll_status_t host_comm_rekey(incoll_comm_h comm)
{
    host_engine_params_t p;
    host_engine_t *eng;

    if (info_of(comm) == NULL)
        return INCOLL_ERR_NO_MEMORY;
    renew_p2p(comm);
    if (comm->eng == NULL)
        return INCOLL_OK;
    p = *host_engine_params(comm->eng);
    p.gen = comm->ctx->gen;
    p.mcast = comm->mc_ep != 0;
    eng = host_engine_create(&p);
    if (eng == NULL)
        return INCOLL_ERR_NO_MEMORY;
    comm->ctx->up.engine_gone(comm);
    host_engine_destroy(comm->eng);
    comm->eng = eng;
    return INCOLL_OK;
}

int host_comm_wants_serve(incoll_comm_h comm)
{
    const struct host_comm_info *info = comm->info;
    return info != NULL && info->pulled && !info->serve_later &&
           !info->recovering && !info->broken;
}

incoll_status_t host_comm_serve_idle(incoll_comm_h comm)
{
    int done = 0;
    if (!host_comm_wants_serve(comm))
        return INCOLL_OK;
    incoll_info("comm %016" PRIx64 ": another member is recovering while "
                "this one is outside a call: the library takes part for it",
                comm->info->id);
    /* As a call pulled in would (host_comm_fail_why): a group the manager
     * said failed is given up here too. */
    return host_comm_recover_coll(
        comm, 0, NULL,
        host_comm_group_failed(comm) ? HOST_ABORT_NONE : HOST_ABORT_PULLED,
        &done);
}

int host_comm_pulled(incoll_comm_h comm)
{
    return comm->info != NULL &&
           (comm->info->pulled || comm->info->pending_why != HOST_ABORT_NONE);
}

int host_comm_doomed_pending(incoll_comm_h comm)
{
    return comm->info != NULL && comm->info->doomed != INCOLL_OK;
}

incoll_status_t host_comm_doomed(incoll_comm_h comm)
{
    incoll_status_t status;
    if (comm->info == NULL || comm->info->doomed == INCOLL_OK)
        return INCOLL_OK;
    status = comm->info->doomed;
    comm->info->doomed = INCOLL_OK;
    incoll_error("comm %016" PRIx64 ": this call is the one the other ranks "
                 "failed: %s",
                 comm->info->id, incoll_status_string(status));
    return status;
}

/* Another member's recovery data reached the recovery channel of owner
 * while it was not in a recovery: it joins at once. */
static void pull(incoll_comm_h owner)
{
    struct host_comm_info *info = owner->info;
    if (info == NULL || info->recovering || info->pulled || info->broken)
        return;
    info->pulled = 1;
    incoll_info("comm %016" PRIx64 ": another member is recovering; this one "
                "joins",
                info->id);
}

static uint64_t early_count(const p2p_engine_t *eng)
{
    const p2p_engine_counters_t *k = p2p_engine_counters(eng);
    return k->early + k->refused;
}

void host_comm_shadow_fed(incoll_comm_h c, uint64_t early_before)
{
    if (c->info == NULL || c->info->owner == NULL || c->p2p.eng == NULL)
        return;
    if (p2p_engine_status(c->p2p.eng) != INCOLL_INPROGRESS &&
        early_count(c->p2p.eng) != early_before)
        pull(c->info->owner);
}

int host_comm_shadow_dispatch(incoll_ctx_h ctx, const udp_msg_t *m,
                              const wire_hdr_t *h, uint64_t now_ns)
{
    for (incoll_comm_h c = ctx->comms; c; c = c->next) {
        incoll_comm_h sh;
        uint64_t before;
        struct host_comm_info none = {0};
        const struct host_comm_info *ci = c->info ? c->info : &none;
        if (ci->owner != NULL || ci->shadow != NULL || c->size < 2 ||
            ci->broken || shadow_wire_id(ci) != h->group)
            continue;
        /* (A world made from fabric.conf has its info made on demand.) */
        if (info_of(c) == NULL)
            return 1;
        sh = recover_comm(c);
        if (sh == NULL || sh->p2p.eng == NULL)
            return 1;
        before = early_count(sh->p2p.eng);
        p2p_engine_on_packet(sh->p2p.eng, m->src, m->data, m->len, now_ns);
        host_comm_shadow_fed(sh, before);
        return 1;
    }
    return 0;
}

/* The largest of each of n values over the members, on the recovery
 * channel. */
static incoll_status_t agree_max(incoll_comm_h sh, int64_t *v, size_t n)
{
    return sh->ctx->up.allreduce_sched(sh, ALGO_RD, v, v, n, INCOLL_INT64,
                                       INCOLL_OP_MAX);
}

/* How the members behind get operation lo's result from those ahead. */
typedef enum {
    XFER_NONE,   /* nothing to carry: they return without a result */
    XFER_SAME,   /* every member ahead kept the same result: OR it over */
    XFER_REDUCE, /* the operation again on the hosts: an allreduce of the
                    inputs (kept ones from the members ahead) */
    XFER_OR,     /* a bitwise OR of the blocks each member holds */
} xfer_t;

/*
 * By kind, and whether the root is among the members behind. A reduce or
 * a gather whose root got its result needs nothing carried: the others
 * have no result. Otherwise the root's result was computed from inputs
 * that only the members hold: those ahead kept theirs, those behind are
 * still in the call (the inputs are intact until a call returns). A
 * scatter's blocks all come from the root's vector; a reduce_scatter's
 * block of a member behind lives nowhere else than in everybody's inputs.
 */
static xfer_t xfer_of(int kind, int root_behind)
{
    switch (kind) {
    case HOST_COLL_ALLREDUCE:
    case HOST_COLL_BCAST:
    case HOST_COLL_ALLGATHER:
        return XFER_SAME;
    case HOST_COLL_REDUCE:
        return root_behind ? XFER_REDUCE : XFER_NONE;
    case HOST_COLL_GATHER:
        return root_behind ? XFER_OR : XFER_NONE;
    case HOST_COLL_SCATTER:
        return XFER_OR;
    case HOST_COLL_REDUCE_SCATTER:
        return XFER_REDUCE;
    default:
        return XFER_NONE;
    }
}

/* What operation lo was: agreed with v[1..10] as the largest of each
 * field and of its negation (all members must say the same). */
static void call_put(int64_t *v, const host_rec_call_t *c)
{
    int64_t f[5] = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
    if (c == NULL) { /* outside a call: says nothing (MAX's neutral) */
        for (int i = 0; i < 10; i++)
            v[i] = INT64_MIN;
        return;
    }
    f[0] = c->kind;
    f[1] = c->root;
    f[2] = (int64_t)c->count;
    f[3] = (int64_t)c->dtype;
    f[4] = (int64_t)c->op;
    for (int i = 0; i < 5; i++) {
        v[2 * i] = f[i];
        v[2 * i + 1] = -f[i];
    }
}

/* The transfer of a result every member ahead kept alike (its hash):
 * the fetchers' zeros or'ed with the copies give each byte exactly. */
static incoll_status_t xfer_same(incoll_comm_h comm, incoll_comm_h sh,
                                 const host_rec_call_t *c, uint64_t lo,
                                 size_t len, const kept_t *k,
                                 const host_rec_call_t *call, int64_t hash)
{
    struct host_comm_info *info = comm->info;
    incoll_status_t status;
    uint8_t *buf;
    int idx = 0, fetch = k == NULL;

    if (fetch) {
        idx = next_res(info);
        if ((buf = res_grow(info, idx, len)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        memset(buf, 0, len);
    } else {
        buf = k->res;
    }
    status = sh->ctx->up.allreduce_sched(
        sh, algo_pick_cut(&sh->ctx->cfg.algo_cuts, sh->size, len, 1), buf, buf,
        len, INCOLL_UINT8, INCOLL_OP_BOR);
    if (status == INCOLL_OK && result_hash(buf, len) != hash) {
        snprintf(info->why, sizeof(info->why),
                 "the result of operation %" PRIu64 " taken from the "
                 "members ahead does not match their copies",
                 lo);
        return INCOLL_ERR_GROUP_FAILED;
    }
    if (status == INCOLL_OK && fetch) {
        memcpy(call->recvbuf, buf, len);
        info->saved = 1;
        info->saved_idx = idx;
        info->saved_op = lo;
        info->saved_bytes = len;
        info->saved_in_bytes = 0;
        info->saved_call = *c;
    }
    return status;
}

/*
 * Members at lo == hi - 1: those at hi (act SERVE) give what they kept of
 * operation lo to those at lo (act FETCH), who are in that call (call)
 * and return its result. First every member checks that all describe
 * operation lo alike (the members ahead by what they kept, those behind
 * by their call) and, where every member ahead kept the same result,
 * that the copies are identical (their hashes); then one allreduce on the
 * hosts carries it (xfer_of): identical copies or'ed with the fetchers'
 * zeros give each byte exactly; blocks or'ed at their places give every
 * block; the inputs reduced give the result the members behind lack.
 */
static incoll_status_t transfer(incoll_comm_h comm, incoll_comm_h sh,
                                host_rec_action_t act, uint64_t lo,
                                const host_rec_call_t *call)
{
    struct host_comm_info *info = comm->info;
    kept_t k = {0};
    int serve = act == HOST_REC_SERVE && kept_find(info, lo, &k);
    const host_rec_call_t *d = act == HOST_REC_FETCH ? call
                               : serve               ? k.call
                                                     : NULL;
    int64_t v[14];
    host_rec_call_t c;
    size_t rb, ib, len, ds, blk, me;
    incoll_status_t status;
    uint8_t *buf = NULL;
    const uint8_t *in = NULL;
    int fetch = act == HOST_REC_FETCH;
    xfer_t x;

    for (int i = 0; i < 14; i++)
        v[i] = INT64_MIN;
    v[0] = d == NULL;
    if (d) {
        call_put(v + 1, d);
        v[11] = fetch && comm->rank == d->root;
    }
    if (serve && xfer_of(d->kind, 0) == XFER_SAME) {
        v[12] = result_hash(k.res, k.res_bytes);
        v[13] = -v[12];
    }
    status = agree_max(sh, v, 14);
    if (status != INCOLL_OK)
        return status;
    if (v[0] != 0) {
        snprintf(info->why, sizeof(info->why),
                 "after a failure the members at operation %" PRIu64
                 " cannot take its result from those at %" PRIu64
                 ": a member ahead kept no result of that operation",
                 lo, lo + 1);
        return INCOLL_ERR_GROUP_FAILED;
    }
    for (int i = 1; i < 11; i += 2) {
        static const char *const field[5] = {"collective", "root", "count",
                                             "datatype", "op"};
        if (v[i] != -v[i + 1]) {
            snprintf(info->why, sizeof(info->why),
                     "after a failure the members at operation %" PRIu64
                     " and at %" PRIu64 " describe operation %" PRIu64
                     " differently (its %s: %" PRId64 " and %" PRId64 ")",
                     lo, lo + 1, lo, field[i / 2], -v[i + 1], v[i]);
            return INCOLL_ERR_GROUP_FAILED;
        }
    }
    c = allreduce_call(NULL, 0);
    c.kind = (int)v[1];
    c.root = (int)v[3];
    c.count = (size_t)v[5];
    c.dtype = (incoll_dtype_t)v[7];
    c.op = (incoll_op_t)v[9];
    x = xfer_of(c.kind, v[11] > 0);
    if ((unsigned)c.dtype >= INCOLL_DTYPE_COUNT ||
        (unsigned)c.op >= INCOLL_OP_COUNT ||
        (x == XFER_SAME && v[12] != -v[13])) {
        snprintf(info->why, sizeof(info->why),
                 "after a failure the members at operation %" PRIu64
                 " cannot take its result from those at %" PRIu64 ": %s",
                 lo, lo + 1,
                 x == XFER_SAME ? "the kept copies differ"
                                : "the operation's description is invalid");
        return INCOLL_ERR_GROUP_FAILED;
    }
    ds = incoll_dtype_size(c.dtype);
    me = (size_t)comm->rank;
    blk = c.count * (c.kind == HOST_COLL_REDUCE ||
                             c.kind == HOST_COLL_REDUCE_SCATTER ||
                             c.kind == HOST_COLL_ALLREDUCE
                         ? ds
                         : 1);
    /* What this member gives: a server its kept input or result, a
     * fetcher its live input. */
    if (!fetch)
        in = k.in;
    else
        in = call->sendbuf;
    host_comm_keep_sizes(&c, comm->rank, comm->size, &rb, &ib);
    switch (x) {
    case XFER_NONE:
        status = INCOLL_OK;
        break;
    case XFER_SAME:
        return xfer_same(comm, sh, &c, lo, rb, fetch ? NULL : &k, call, v[12]);
    case XFER_REDUCE:
        /* A reduce's root is behind, so every server is a non-root that
         * kept its input; a reduce_scatter's members all keep theirs. */
        len = c.kind == HOST_COLL_REDUCE ? c.count : c.count * (size_t)sh->size;
        if ((buf = res_grow(info, next_res(info), len * ds)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        memcpy(buf, in, len * ds);
        status = sh->ctx->up.allreduce_sched(
            sh, algo_pick_cut(&sh->ctx->cfg.algo_cuts, sh->size, len, ds), buf,
            buf, len, c.dtype, c.op);
        if (status == INCOLL_OK && fetch) {
            if (c.kind == HOST_COLL_REDUCE_SCATTER)
                memcpy(call->recvbuf, buf + me * blk, blk);
            else if (comm->rank == c.root)
                memcpy(call->recvbuf, buf, blk);
        }
        break;
    default: /* XFER_OR: a gather whose root is behind, or a scatter */
        len = c.count * (size_t)sh->size;
        if ((buf = res_grow(info, next_res(info), len)) == NULL)
            return INCOLL_ERR_NO_MEMORY;
        memset(buf, 0, len);
        if (c.kind == HOST_COLL_GATHER)
            memcpy(buf + me * blk, in, blk);
        else if (comm->rank == c.root)
            memcpy(buf, in, len);
        status = sh->ctx->up.allreduce_sched(
            sh, algo_pick_cut(&sh->ctx->cfg.algo_cuts, sh->size, len, 1), buf,
            buf, len, INCOLL_UINT8, INCOLL_OP_BOR);
        if (status == INCOLL_OK && fetch) {
            if (c.kind == HOST_COLL_SCATTER)
                memcpy(call->recvbuf, buf + me * blk, blk);
            else if (comm->rank == c.root)
                memcpy(call->recvbuf, buf, len);
        }
        break;
    }
    /* The member's kept result is of no use any more: every member is at
     * hi now, and a later recovery asks for hi or later. */
    if (status == INCOLL_OK && fetch)
        info->saved = 0;
    return status;
}

/* Drops comm's group and engine (telling the manager when there is one). */
static void drop_group(incoll_comm_h comm)
{
    host_mgr_t *mgr = mgr_of(comm->ctx);
    if (mgr && comm->group)
        host_mgr_group_release(mgr, comm->info->id, comm->group);
    comm->ctx->up.stream_report(comm);
    host_mcast_leave(comm);
    comm->ctx->up.engine_gone(comm);
    host_engine_destroy(comm->eng);
    comm->eng = NULL;
    comm->group = 0;
}

/* Forgets comm's engine without telling the manager (its group failed). */
static void forget_engine(incoll_comm_h comm)
{
    comm->ctx->up.stream_report(comm);
    host_mcast_leave(comm);
    comm->ctx->up.engine_gone(comm);
    host_engine_destroy(comm->eng);
    comm->eng = NULL;
    comm->group = 0;
}

/*
 * The members go on with comm's group after an erroneous call: a fresh
 * engine on the same group, with the next generation, so that the ANs
 * forget the slots the failed call left (a newer generation resets them)
 * and every member numbers its segments from 0 again. Alike on every
 * member: each replaces its engine at the same point.
 */
static incoll_status_t renew_engine(incoll_comm_h comm)
{
    host_engine_params_t p;
    host_engine_t *eng;

    if (comm->eng == NULL)
        return INCOLL_OK;
    p = *host_engine_params(comm->eng);
    p.gen++;
    p.mcast = comm->mc_ep != 0;
    comm->ctx->up.stream_report(comm);
    eng = host_engine_create(&p);
    comm->ctx->up.engine_gone(comm);
    host_engine_destroy(comm->eng);
    comm->eng = eng;
    if (eng == NULL) {
        comm->group = 0;
        return INCOLL_ERR_NO_MEMORY;
    }
    return INCOLL_OK;
}

/* A fresh host-based engine for comm after a recovery: members pulled out
 * of a host-based operation left theirs out of step, so every member
 * starts a new one (another wire id and key) at the same point. */
static void renew_p2p(incoll_comm_h comm)
{
    if (comm->p2p.eng != NULL) {
        p2p_engine_destroy(comm->p2p.retired);
        comm->p2p.retired = comm->p2p.eng;
        comm->p2p.retired_id = comm->p2p.id;
        comm->p2p.eng = NULL;
    }
    comm->info->p2p_epoch++;
    comm->p2p.failed_what = NULL;
    comm->p2p.failed_algo = NULL;
}

incoll_status_t host_comm_recover(incoll_comm_h comm, int started,
                                  void *recvbuf, size_t count,
                                  incoll_dtype_t dtype, incoll_op_t op, int why,
                                  int *done_p)
{
    /* An allreduce that carries another collective names it as its root
     * (incoll_comm.call_tag), as its packets do. */
    host_rec_call_t c = {
        HOST_COLL_ALLREDUCE, comm->call_tag, count, dtype, op, NULL, recvbuf};
    return host_comm_recover_coll(comm, started, &c, why, done_p);
}

/* The agreed reason of an erroneous call (its encoding in the first
 * agreement: reason << 24 | rank) as this member's status, said once. */
static incoll_status_t abort_status(incoll_comm_h comm, int64_t code)
{
    int why = (int)(code >> 24), who = (int)(code & 0xffffff);
    const char *text;
    incoll_status_t status;

    switch (why) {
    case HOST_ABORT_ARG:
        text = "refused its arguments";
        status =
            who == comm->rank ? INCOLL_ERR_INVALID_ARG : INCOLL_ERR_MISMATCH;
        break;
    case HOST_ABORT_DEADLINE:
        text = "reached the call's deadline (INCOLL_DEADLINE_MS)";
        status = INCOLL_ERR_TIMEOUT;
        break;
    default:
        text = wire_mismatch_str((unsigned)why);
        status = INCOLL_ERR_MISMATCH;
        break;
    }
    if (why == HOST_ABORT_ARG || why == HOST_ABORT_DEADLINE)
        incoll_error("comm %016" PRIx64 ": the call fails on every rank: "
                     "rank %d %s",
                     comm->info->id, who, text);
    else
        incoll_error("comm %016" PRIx64 ": the ranks' calls do not match (%s, "
                     "seen by rank %d): do all ranks call the same collectives "
                     "in the same order with the same count, datatype, op and "
                     "root? The call fails on every rank",
                     comm->info->id, text, who);
    return status;
}

/* Which field of two call descriptions (call_put's, agreed as the largest
 * of each value and of its negation in v) differs first: a reason of
 * wire_mismatch_t, or WIRE_MISMATCH_NONE when every member said the same. */
static int call_differs(const int64_t *v)
{
    static const int why[5] = {WIRE_MISMATCH_KIND, WIRE_MISMATCH_ROOT,
                               WIRE_MISMATCH_SIZE, WIRE_MISMATCH_DTYPE,
                               WIRE_MISMATCH_OP};
    for (int i = 0; i < 5; i++)
        if (v[2 * i] != -v[2 * i + 1])
            return why[i];
    return WIRE_MISMATCH_NONE;
}

/*
 * Step 4 of a recovery (docs/failures.md): every member that asked takes
 * the manager's answer (all asked, so the request completes), then a last
 * agreement (the largest of "I got no group") makes every member drop the
 * new group if any member lacks it: a new group for all, or the hosts for
 * all. INCOLL_OK, or an error when the agreement failed.
 */
static incoll_status_t groups_agree(incoll_comm_h comm, incoll_comm_h sh,
                                    host_mgr_t *mgr, int *asked_p, uint32_t req)
{
    struct host_comm_info *info = comm->info;
    incoll_status_t status;
    int64_t w[1];
    int got = 0;

    (void)mgr;
    if (*asked_p) {
        got = group_take(comm, req) == INCOLL_OK;
        *asked_p = 0; /* answered or forgotten */
    }
    w[0] = !got;
    status = agree_max(sh, w, 1);
    if (status != INCOLL_OK) {
        snprintf(info->why, sizeof(info->why),
                 "the members did not agree on a new group: %s",
                 incoll_status_string(status));
        return status;
    }
    if (got && w[0] != 0) {
        drop_group(comm);
        snprintf(info->why, sizeof(info->why),
                 "after a failure another member got no new fabric group");
    }
    return INCOLL_OK;
}

/* The end of a recovery: another member's next recovery may have begun
 * while this one ended (its data is held on the recovery channel): this
 * member joins it at its next call, or in the call it goes on with. */
static void recovery_end(incoll_comm_h comm, incoll_comm_h sh)
{
    comm->info->recovering = 0;
    if (sh != NULL && sh->p2p.eng != NULL && p2p_engine_early_held(sh->p2p.eng))
        pull(comm);
}

/* A step of the recovery below failed: the caller gives the
 * communicator up. */
static incoll_status_t rec_failed(int *fail_p)
{
    *fail_p = 1;
    return INCOLL_ERR_GROUP_FAILED;
}

/*
 * What this member does after the members agreed where they are (lo..hi,
 * this one at mine) and on the erroneous call, if any (code >= 0, at
 * apos): its status, the action it took (*act_p) and whether its call is
 * done (*done_p). *fail_p set: the recovery failed (info->why says why).
 */
static incoll_status_t rec_decide(incoll_comm_h comm, incoll_comm_h sh,
                                  const host_rec_call_t *call, int started,
                                  const int64_t *v, uint64_t lo, uint64_t hi,
                                  uint64_t mine, int64_t code,
                                  host_rec_action_t *act_p, int *done_p,
                                  int *fail_p)
{
    struct host_comm_info *info = comm->info;
    int64_t apos = v[14];
    int kept = kept_find(info, lo, NULL);
    incoll_status_t status;

    if (code >= 0 && apos < (int64_t)lo) {
        /* The erroneous call is behind every member (its member returned
         * at its deadline, the others completed it since): everyone runs
         * its call again. */
        status = INCOLL_OK;
    } else if (code >= 0 && (apos == (int64_t)lo || lo == hi)) {
        /* An erroneous call, which the members at lo are in: they return
         * its error; those at hi completed it (a member with nothing to
         * receive, a broadcast's root) and run their call again. */
        if (mine == lo)
            status = abort_status(comm, code);
        else
            status = INCOLL_OK;
    } else if (code >= 0) {
        /* The erroneous call is hi's: those at hi return its error; those
         * at lo, whose call the others completed, take its result from
         * what they kept where they can (else an error too), and fail
         * their next call, hi, unrun: so every member's next call pairs
         * with the others' again. */
        status = abort_status(comm, code);
        if (v[15] == 0) {
            /* (members further apart: no one takes anything, all fail) */
            *act_p = hi - lo > 1 ? HOST_REC_FAIL
                                 : host_recovery_action(lo, hi, mine, started,
                                                        kept, lo);
            if (transfer(comm, sh, *act_p, lo, call) != INCOLL_OK)
                return rec_failed(fail_p);
            if (mine == lo) {
                *done_p = 1;
                info->doomed = status;
                status = INCOLL_OK;
            }
        } else if (mine == lo) {
            info->doomed = status;
        }
    } else {
        *act_p = host_recovery_action(lo, hi, mine, started, kept, lo);
        if (hi - lo > 1) {
            /* Members further apart get here only when no round of
             * host_comm_recover_coll's could take them forward (no
             * member gave its group up). */
            snprintf(info->why, sizeof(info->why),
                     "after a failure the members are at operations %" PRIu64
                     "..%" PRIu64,
                     lo, hi);
            return rec_failed(fail_p);
        }
        if (lo != hi) {
            status = transfer(comm, sh, *act_p, lo, call);
            if (status != INCOLL_OK) {
                if (status != INCOLL_ERR_GROUP_FAILED)
                    snprintf(info->why, sizeof(info->why),
                             "the members at operation %" PRIu64 " could not "
                             "take its result from those at %" PRIu64 ": %s",
                             lo, hi, incoll_status_string(status));
                return rec_failed(fail_p);
            }
        } else if (*act_p == HOST_REC_FAIL) {
            status = INCOLL_ERR_GROUP_FAILED;
            snprintf(info->why, sizeof(info->why),
                     "after a failure the members are at operations %" PRIu64
                     "..%" PRIu64,
                     lo, hi);
            return rec_failed(fail_p);
        }
        *done_p = *act_p == HOST_REC_FETCH;
        status = INCOLL_OK;
    }
    return status;
}

/* A member gave the group up: this one leaves it too, if it still has
 * its engine, and asks the manager for the next generation's group
 * unless it already did (*asked_p, request *req_p) or the groups failed
 * three times. */
static void leave_group(incoll_comm_h comm, host_mgr_t *mgr, uint64_t mine,
                        int *asked_p, uint32_t *req_p)
{
    struct host_comm_info *info = comm->info;

    if (comm->eng == NULL)
        return;
    forget_engine(comm);
    if (!*asked_p && mgr && info->rebuilt < 2) {
        info->rebuilt++;
        info->gen++;
        *asked_p = group_ask(comm, info->gen, mine, req_p) == INCOLL_OK;
    }
}

/* After the agreement: when a member gave the group up (gave_up), all
 * do and ask for a new one (those that have not yet: *asked_p, *req_p)
 * or go on the hosts; else the same group on a fresh engine. INCOLL_OK,
 * or the recovery failed. */
static incoll_status_t rec_regroup(incoll_comm_h comm, incoll_comm_h sh,
                                   host_mgr_t *mgr, uint64_t mine, int gave_up,
                                   int *asked_p, uint32_t *req_p)
{
    struct host_comm_info *info = comm->info;

    if (gave_up) {
        /* A member gave the group up (it failed there): all do, and ask
         * for a new one (those that have not yet), or go on the hosts. */
        leave_group(comm, mgr, mine, asked_p, req_p);
        if (groups_agree(comm, sh, mgr, asked_p, *req_p) != INCOLL_OK)
            return INCOLL_ERR_GROUP_FAILED;
    } else if (renew_engine(comm) != INCOLL_OK) {
        /* The group works: the same group, a fresh engine of the next
         * generation (the ANs forget the slots the call left). */
        snprintf(info->why, sizeof(info->why),
                 "out of memory for a new engine");
        return INCOLL_ERR_NO_MEMORY;
    }
    return INCOLL_OK;
}

/* One recovery's state, shared by the steps of host_comm_recover_coll. */
typedef struct {
    host_mgr_t *mgr;
    uint64_t mine; /* the operation this member is at */
    uint64_t epos; /* the erroneous call's position (this member's) */
    uint64_t lo, hi;
    int why;
    int failure; /* this member gave its group up */
    int joined;  /* pulled in by another member's recovery */
    int asked;   /* asked the manager for a new group (request req) */
    uint32_t req;
    int64_t v[17], code;
    host_rec_action_t act;
    int resumed; /* goes on with a recovery it left (info->carry) */
} rec_state_t;

/* This member leaves the recovery before its end, at pos, and goes on
 * with it at its next call on comm (host_comm_pulled says so). */
static void rec_leave(incoll_comm_h comm, const rec_state_t *st, uint64_t pos)
{
    struct host_comm_info *info = comm->info;

    info->carry.valid = 1;
    info->carry.failure = st->failure || comm->eng == NULL;
    info->carry.asked = st->asked;
    info->carry.req = st->req;
    info->carry.pos = pos;
    info->recovering = 0;
    info->pulled = 1;
    info->serve_later = 1;
}

/* Where this member is, and why it recovers. INCOLL_ERR_TIMEOUT when the
 * call's deadline passed: it returns now and the members agree at its
 * next call. */
static incoll_status_t rec_start(incoll_comm_h comm, int started,
                                 const host_rec_call_t *call, rec_state_t *st)
{
    struct host_comm_info *info = comm->info;
    uint64_t ran = comm->eng ? host_engine_counters(comm->eng)->ops : 0;

    /* The operation this member is at: the one that failed, or the next. */
    st->mine = info->opbase + ran - (started && ran ? 1 : 0);
    st->epos = st->mine;
    if (st->why == HOST_ABORT_DEADLINE &&
        info->pending_why == HOST_ABORT_NONE) {
        /* The call returns now, as its deadline says; its operation is
         * given up here. The members agree at this member's next call
         * that it failed (the others may be in it still, or have it). */
        info->pending_why = st->why;
        info->pending_pos = st->mine;
        incoll_error("comm %016" PRIx64 ": the call's deadline passed "
                     "(INCOLL_DEADLINE_MS): it fails; the ranks agree on "
                     "it at the next call",
                     info->id);
        return INCOLL_ERR_TIMEOUT;
    }
    if (info->pending_why != HOST_ABORT_NONE) {
        /* This member's earlier call failed alone: that is the erroneous
         * one, at its position. */
        st->why = info->pending_why;
        st->epos = info->pending_pos;
        info->pending_why = HOST_ABORT_NONE;
    }
    st->failure = st->why == HOST_ABORT_NONE;
    st->joined = st->why == HOST_ABORT_PULLED;
    if (info->carry.valid) {
        /* A recovery this member left (rec_leave): it goes on at the
         * position it left at, with what it asked already. */
        st->mine = st->epos = info->carry.pos;
        st->failure = info->carry.failure;
        st->joined = !st->failure;
        st->asked = info->carry.asked;
        st->req = info->carry.req;
        st->resumed = 1;
        info->carry.valid = 0;
    }
    info->pulled = 0;
    info->recovering = 1;
    if (call != NULL)
        info->serve_later = 0;
    return INCOLL_OK;
}

/* A failure: the group is no more. First tell the manager (a request of
 * the next generation makes it tear the failed group down and tell the
 * members outside a call, who then join at their next call); the answer
 * is taken after the agreement, when every member has asked. */
static void rec_give_up(incoll_comm_h comm, rec_state_t *st)
{
    struct host_comm_info *info = comm->info;

    forget_engine(comm);
    if (st->mgr && info->rebuilt < 2) {
        info->rebuilt++;
        info->gen++;
        st->asked = group_ask(comm, info->gen, st->mine, &st->req) == INCOLL_OK;
    } else {
        snprintf(info->why, sizeof(info->why), "%s",
                 st->mgr == NULL ? "its fabric group failed and there is no "
                                   "manager to make another"
                                 : "its fabric groups failed three times");
    }
}

/* Where every member is (with blocking collectives at most one operation
 * apart, docs/failures.md), whether one saw an erroneous call (the reason
 * and who saw it), whether one asked the manager for a new group, and
 * every member's call, agreed over sh into st->v, lo, hi and code. Only
 * this agreement says so, never the manager. */
static incoll_status_t rec_agree_where(incoll_comm_h comm, incoll_comm_h sh,
                                       const host_rec_call_t *call,
                                       rec_state_t *st)
{
    struct host_comm_info *info = comm->info;
    int64_t *v = st->v;
    incoll_status_t status;

    for (int i = 0; i < 17; i++)
        v[i] = INT64_MIN;
    v[0] = (int64_t)st->mine;
    v[1] = -(int64_t)st->mine;
    v[2] = st->failure || st->joined ? -1 : (int64_t)st->why << 24 | comm->rank;
    v[3] = st->failure; /* this member gave its group up */
    call_put(v + 4, call);
    /* The call the erroneous one is (its member's position), and whether
     * a member cannot give the result of the operation before its own
     * (none kept: members behind then cannot take it). */
    v[14] = st->failure || st->joined ? INT64_MIN : (int64_t)st->epos;
    v[15] = st->mine == 0 || !kept_find(info, st->mine - 1, NULL);
    /* A member outside a call (its thread took part for it,
     * host_comm_serve_idle): where it is, as MAX of the negation (the
     * lowest such member). */
    v[16] = call == NULL ? -(int64_t)st->mine : INT64_MIN;
    status = agree_max(sh, v, 17);
    if (status != INCOLL_OK) {
        snprintf(info->why, sizeof(info->why),
                 "the members did not agree where they are after a failure: "
                 "%s",
                 incoll_status_string(status));
        return status;
    }
    st->hi = (uint64_t)v[0];
    st->lo = (uint64_t)-v[1];
    st->code = v[2];
    return INCOLL_OK;
}

/*
 * A round of a recovery whose members are more than one operation apart
 * (one-way broadcasts and broadcasts sent ahead of their round complete at
 * members that others have not started: docs/failures.md). Those at lo
 * take its result from the members ahead, who all completed it and kept
 * it, as in step 3 (transfer), return it and leave the recovery
 * (rec_leave): their next call joins its next round. The others stay for
 * that round. *fetched_p 1: this member took its call's result. INCOLL_OK,
 * or the recovery failed (info->why says why) on every member alike.
 */
static incoll_status_t rec_step(incoll_comm_h comm, incoll_comm_h sh,
                                const host_rec_call_t *call, int started,
                                rec_state_t *st, int *fetched_p)
{
    struct host_comm_info *info = comm->info;
    incoll_status_t status;

    *fetched_p = 0;
    st->act = host_recovery_action(st->lo, st->hi, st->mine, started,
                                   kept_find(info, st->lo, NULL), st->lo);
    status = transfer(comm, sh, st->act, st->lo, call);
    if (status != INCOLL_OK) {
        if (status != INCOLL_ERR_GROUP_FAILED)
            snprintf(info->why, sizeof(info->why),
                     "the members at operation %" PRIu64 " could not take "
                     "its result from those up to %" PRIu64 ": %s",
                     st->lo, st->hi, incoll_status_string(status));
        return INCOLL_ERR_GROUP_FAILED;
    }
    if (st->act != HOST_REC_FETCH)
        return INCOLL_OK;
    /* A member gave the group up (the round's condition): this one
     * leaves it too, as step 4 would, and asks for the new one now. */
    leave_group(comm, st->mgr, st->mine, &st->asked, &st->req);
    incoll_info("comm %016" PRIx64 ": took the result of operation %" PRIu64
                " from the members ahead (up to operation %" PRIu64
                "): joins their recovery again at its next call",
                info->id, st->lo, st->hi);
    rec_leave(comm, st, st->lo + 1);
    *fetched_p = 1;
    return INCOLL_OK;
}

/* The recovery failed: the communicator is broken for good. */
static incoll_status_t rec_fail(incoll_comm_h comm, rec_state_t *st,
                                int *done_p)
{
    struct host_comm_info *info = comm->info;

    *done_p = 0;
    if (st->asked)
        host_mgr_forget(st->mgr, st->req);
    drop_group(comm);
    info->broken = 1;
    info->recovering = 0;
    incoll_error("comm %016" PRIx64 ": recovery after a failed in-network "
                 "operation failed (this member at operation %" PRIu64
                 ", %s): %s; every later collective on it fails",
                 info->id, st->mine, host_recovery_action_name(st->act),
                 info->why);
    return INCOLL_ERR_GROUP_FAILED;
}

/* Says how a recovery after a failure ended. */
static void rec_say(incoll_comm_h comm, const rec_state_t *st)
{
    struct host_comm_info *info = comm->info;

    incoll_info(
        "comm %016" PRIx64 ": recovered after a failure: members at "
        "operations %" PRIu64 "..%" PRIu64 ", this one at %" PRIu64 " (%s)",
        info->id, st->lo, st->hi, st->mine, host_recovery_action_name(st->act));
    if (comm->eng)
        incoll_info("comm %016" PRIx64 ": %s group %u", info->id,
                    st->v[3] > 0 ? "rebuilt on" : "goes on on", comm->group);
    else
        say_why(comm);
}

incoll_status_t host_comm_recover_coll(incoll_comm_h comm, int started,
                                       const host_rec_call_t *call, int why,
                                       int *done_p)
{
    struct host_comm_info *info = info_of(comm);
    rec_state_t st = {
        .mgr = mgr_of(comm->ctx), .why = why, .act = HOST_REC_FAIL};
    incoll_status_t status;
    incoll_comm_h sh;
    int mismatch, failed = 0;

    *done_p = 0;
    if (info == NULL)
        return INCOLL_ERR_NO_MEMORY;
    if (info->broken)
        return INCOLL_ERR_GROUP_FAILED;
    status = rec_start(comm, started, call, &st);
    if (status != INCOLL_OK)
        return status;
    /* An erroneous call leaves the group as it is until the members agree
     * (below). */
    if (st.failure && !st.resumed)
        rec_give_up(comm, &st);
    sh = recover_comm(comm);
    if (sh == NULL) {
        snprintf(info->why, sizeof(info->why),
                 "no recovery channel (no memory, or no peer endpoints)");
        return rec_fail(comm, &st, done_p);
    }
    for (;;) {
        if (rec_agree_where(comm, sh, call, &st) != INCOLL_OK)
            return rec_fail(comm, &st, done_p);
        if (st.v[16] == INT64_MIN || (uint64_t)-st.v[16] != st.lo ||
            st.lo == st.hi) {
            int fetched;
            /* More than one operation apart, after a failure: those at
             * lo take its result and leave; the others go on with the
             * next round. */
            if (st.hi - st.lo < 2 || st.code >= 0 || st.v[3] <= 0)
                break;
            if (rec_step(comm, sh, call, started, &st, &fetched) != INCOLL_OK)
                return rec_fail(comm, &st, done_p);
            if (fetched) {
                *done_p = 1;
                return INCOLL_OK;
            }
            continue;
        }
        /* A member outside a call is behind: it has no call to take the
         * result into. Every member leaves this round alike; that member
         * joins the next at its next call, the others start it now. */
        if (call == NULL) {
            rec_leave(comm, &st, st.mine);
            recovery_end(comm, sh);
            incoll_info("comm %016" PRIx64 ": a recovery found this member "
                        "behind, outside a call: it joins at its next call",
                        info->id);
            return INCOLL_OK;
        }
    }
    /* Members at one operation that describe it differently called
     * different collectives, or the same with different arguments: that
     * call fails on every member, never run again on the hosts. */
    mismatch = st.lo == st.hi ? call_differs(st.v + 4) : WIRE_MISMATCH_NONE;
    if (st.code < 0 && mismatch != WIRE_MISMATCH_NONE)
        st.code = (int64_t)mismatch << 24 | comm->rank;
    status = rec_decide(comm, sh, call, started, st.v, st.lo, st.hi, st.mine,
                        st.code, &st.act, done_p, &failed);
    if (failed)
        return rec_fail(comm, &st, done_p);
    info->opbase = st.hi;
    renew_p2p(comm);
    if (rec_regroup(comm, sh, st.mgr, st.mine, st.v[3] > 0, &st.asked,
                    &st.req) != INCOLL_OK)
        return rec_fail(comm, &st, done_p);
    recovery_end(comm, sh);
    if (st.code >= 0)
        return status; /* OK without done: hi's members run the call */
    rec_say(comm, &st);
    return INCOLL_OK;
}

/* ---- freeing a communicator, the world's engine ---- */

void host_comm_free(incoll_comm_h comm)
{
    comm->ctx->up.hier_free(comm);
    comm->ctx->up.p2p_free(comm);
    comm->ctx->up.stream_report(comm);
    host_mcast_leave(comm);
    comm->ctx->up.engine_gone(comm);
    host_engine_destroy(comm->eng);
    comm->eng = NULL;
    host_comm_info_free(comm);
    comm->ctx->up.usage_free(comm);
    free(comm->world_ranks);
    free(comm->scratch);
    free(comm);
}

incoll_status_t host_world_engine(incoll_comm_h comm, int host)
{
    incoll_ctx_h ctx = comm->ctx;
    const fabric_conf_t *conf = &ctx->conf;
    host_engine_params_t p = ctx->eng_defaults;
    uint64_t payload = ctx->cfg.payload;
    host_engine_t *eng;

    p.group = conf->group_id;
    p.gen = ctx->gen;
    /* The ANs of fabric.conf derive the same key (src/agg/agg_main.c). */
    wire_key_derive(ctx->has_secret ? ctx->secret : NULL, WIRE_KEY_GROUP,
                    conf->group_id, conf->group_key, &p.key);
    p.child = (uint16_t)fabric_conf_host_child(conf, host);
    p.an = conf->ans[conf->hosts[host].leaf].addr;
    p.slots = conf->slots;
    p.max_payload = conf->payload;
    if (payload != 0) {
        if (payload > conf->payload)
            incoll_warn("init: INCOLL_PAYLOAD=%" PRIu64
                        " exceeds the group's %u bytes; using %u",
                        payload, conf->payload, conf->payload);
        else if (payload < 8)
            incoll_warn("init: INCOLL_PAYLOAD=%" PRIu64 " is below 8; using 8",
                        payload);
        p.max_payload = payload > conf->payload ? conf->payload
                        : payload < 8           ? 8
                                                : (uint32_t)payload;
    }
    /* The leaf AN multicasts to the range's address of its index
     * (src/agg/agg_main.c does the same sum). */
    host_mcast_params(comm, udp_mcast_ep((uint32_t)conf->hosts[host].leaf),
                      p.an, &p);
    eng = host_engine_create(&p);
    if (eng == NULL)
        return INCOLL_ERR_NO_MEMORY;
    comm->eng = eng;
    return INCOLL_OK;
}

/* ---- waiting for a communicator's engine ---- */

enum { WAIT_OP, WAIT_UNLOCK, WAIT_DATA };

/* 1 while comm_wait_for waits (what: WAIT_*). */
static int comm_waits(const host_engine_t *eng, int what)
{
    switch (what) {
    case WAIT_UNLOCK:
        return host_engine_unlock_pending(eng);
    case WAIT_DATA:
        return host_engine_status(eng) == INCOLL_INPROGRESS &&
               !host_engine_data_in(eng);
    default:
        return host_engine_status(eng) == INCOLL_INPROGRESS;
    }
}

/* Progresses comm's engine while its operation runs (WAIT_OP), while its
 * background unlock does (WAIT_UNLOCK), or until a broadcast's data is in
 * (WAIT_DATA: INCOLL_OK then, the operation still running). */
static incoll_status_t comm_wait_for(incoll_comm_h comm, int what)
{
    incoll_ctx_h ctx = comm->ctx;
    while (comm_waits(comm->eng, what)) {
        /* The manager said the group is gone (its operations cannot
         * end), another member recovers (it left them), or the call's
         * deadline passed: the operation is given up, and the caller
         * recovers with the others. */
        if (host_comm_group_failed(comm) || host_comm_pulled(comm) ||
            (what != WAIT_UNLOCK && host_call_expired(comm))) {
            udp_flush(ctx->sock);
            if (what != WAIT_UNLOCK)
                host_engine_abandon(comm->eng, INCOLL_ERR_GROUP_FAILED);
            return INCOLL_ERR_GROUP_FAILED;
        }
        host_ctx_progress(ctx,
                          host_call_due(comm, host_engine_deadline(comm->eng)));
        host_engine_on_time(comm->eng, host_now_ns());
    }
    udp_flush(ctx->sock);
    if (what == WAIT_DATA && host_engine_data_in(comm->eng))
        return INCOLL_OK;
    return host_engine_status(comm->eng);
}

incoll_status_t host_comm_wait(incoll_comm_h comm)
{
    incoll_status_t status = comm_wait_for(comm, WAIT_OP);
    host_mcast_check(comm);
    /* A lock whose operations are used up goes now, whichever
     * collective used the last one. */
    if (status == INCOLL_OK)
        comm->ctx->up.stream_end(comm);
    return status;
}

incoll_status_t host_comm_wait_data(incoll_comm_h comm)
{
    return comm_wait_for(comm, WAIT_DATA);
}

void host_comm_finish_op(incoll_comm_h comm)
{
    incoll_status_t status;
    comm->linger = 0;
    if (comm->eng == NULL || host_engine_status(comm->eng) != INCOLL_INPROGRESS)
        return;
    /* A broadcast that returned with its data (host_comm_wait_data): its
     * result only acknowledges the round now. Its failure is the group's,
     * which the next operation finds (the engine refuses it). */
    host_engine_resume(comm->eng, host_now_ns());
    status = comm_wait_for(comm, WAIT_OP);
    if (status != INCOLL_OK) {
        incoll_info("group %u: the round of a broadcast whose data was in "
                    "failed: %s",
                    comm->group, incoll_status_string(status));
        host_engine_abandon(comm->eng, status);
    }
}

incoll_status_t host_comm_settle(incoll_comm_h comm)
{
    host_comm_finish_op(comm);
    if (comm->eng == NULL || !host_engine_unlock_pending(comm->eng))
        return INCOLL_OK;
    return comm_wait_for(comm, WAIT_UNLOCK);
}
