/*
 * The hierarchy of a communicator: placement of its ranks on hosts (and
 * sockets), the leaders' communicator, the shared segment, and the
 * pipelined allreduce through them (see hier.h).
 *
 * Placement. Every rank names its host: the fabric host it is attached to
 * (INCOLL_HOST, or its entry of INCOLL_HOSTS: ranks of a loopback or
 * emulated fabric share one machine but not one link) and the machine's
 * name, since only ranks of one machine can share memory. In socket mode
 * the package (else NUMA node) its CPU binding lies in is added, found
 * with hwloc; a rank that is not bound to one package, or a build without
 * hwloc, runs node mode instead and says why once. The members exchange
 * these names (hashed) and their pids in one host-based allreduce (not
 * on the fabric, whose ANs count only the application's operations);
 * the ranks of one host in rank order are its local members, the first
 * of them its leader.
 *
 * Allreduce. A vector is cut into segments of INCOLL_HIER_SEG bytes. For
 * each, every member but the leader copies its part into its slot of the
 * segment's pipeline buffer (up to INCOLL_HIER_DEPTH segments ahead); the
 * leader folds its own input and the slots, in the order of the members'
 * ranks (so that every run and every rank get the same bits), queues the
 * leaders' allreduce of the segment on their communicator's thread and
 * goes on with the next segments, and publishes each result, which the
 * members copy out, once its allreduce is done.
 */
#include "host/hier.h"

#include "host/comm.h"
#include "host/counters.h"
#include "host/host.h"
#include "host/req.h"
#include "host/service.h"
#include "host/shm.h"
#include "host/fallback.h"
#include "host/mcast.h"

#include "common/dtype.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifdef INCOLL_HAVE_HWLOC
#include <hwloc.h>
#endif

/* Most pipeline buffers (INCOLL_HIER_DEPTH). */
#define HIER_MAX_DEPTH 64

typedef enum {
    HIER_SETUP = 0, /* being made: allreduces on comm run flat */
    HIER_FLAT,      /* nothing to do: flat */
    HIER_LEADERS,   /* comm is a leaders' communicator: flat */
    HIER_ACTIVE,
    HIER_BROKEN, /* the segment failed: every allreduce fails */
} hier_state_t;

struct host_hier {
    hier_state_t state;
    uint64_t wait_ns; /* INCOLL_HIER_TIMEOUT_MS, or INCOLL_WAIT_MS when 0 */
    const char *mode; /* "node", "socket" or "flat" */
    incoll_comm_h leaders; /* NULL unless this rank leads its host */
    incoll_comm_h owner;   /* of a leaders' communicator: whom it serves */
    host_shm_t *shm;       /* NULL when this rank is alone on its host */
    int nlocal;
    int lidx;         /* our index among the local members; 0 leads */
    uint32_t seq;     /* segments through the pipeline so far */
    size_t seg;       /* bytes per segment (INCOLL_HIER_SEG), alike on all */
    int nbuf;         /* pipeline buffers of the segment (INCOLL_HIER_DEPTH) */
    uint32_t *err;    /* in the segment: the failed operation's record and
                         the members' calls (see fail_op) */
    uint64_t *calls2; /* in the segment: the second words of the members'
                         calls (call_rec) */
    const char *want; /* host_hier_set_mode(), else NULL: INCOLL_HIER */
    int failed;       /* the running operation failed (fail_op, op_failed):
                         every member goes on from segment next */
    uint32_t next;
    /* INCOLL_HIER_SHARED, on for the host's ranks: a member's copy of the
     * leader's UDP socket (-1 on the leader, which has its own), and the
     * leader's eventfd (every rank's copy), which a member writes to wake
     * the leader asleep on its socket when the pack goes bad (pack_bad). */
    int shared;
    int sock_fd;
    int wake_fd;
};

/*
 * The shared socket (INCOLL_HIER_SHARED). For an allreduce of one packet
 * the leader that comes before some member does not wait for them: it
 * puts its input into the segment's result buffer, the header of its
 * leaders' communicator's next packet, the group's key and the AN's
 * address into the pack (host_engine_next_hdr), opens the pack for
 * segment g and sleeps in poll on its socket. The member whose post
 * completes the segment takes the pack (one compare-and-swap: the leader
 * may take it back first), checks every member's call against the
 * leader's, folds the slots into the result buffer in rank order, seals
 * the header over it and sends it on the leader's socket, a copy of which
 * every member received at set-up (SCM_RIGHTS). The leader is woken by
 * the result packet alone: it starts its allreduce, whose engine counts
 * the packet as its own first transmission (host_engine_presend) and
 * finds the result waiting. A leader woken by anything else (its poll's
 * slice, another packet) takes the pack back and goes the usual way,
 * which waits for the members, checks their calls and their liveness,
 * and fails the call where it must; the engine starts only with the
 * whole fold in the buffer, so a resend or a recovery never carries a
 * part of it. A member that completes the segment and finds a call that
 * differs from the leader's, or that refused its own arguments, makes
 * the pack bad (PK_BAD) and wakes the leader through an eventfd it polls
 * beside its sockets (handed out with the socket): the leader goes the
 * usual way at once, which fails the call on every rank.
 */
enum { PK_OPEN = 1, PK_MEMBER, PK_SENT, PK_BAD, PK_LEADER };

typedef struct {
    _Atomic uint32_t state; /* g * 8 + PK_* */
    _Atomic uint32_t sleepers;
    uint32_t len;     /* payload bytes */
    int32_t who;      /* the member that took it */
    uint64_t an;      /* incoll_ep_t */
    uint64_t sent_ns; /* when it went (host_now_ns) */
    uint8_t hdr[WIRE_HDR_LEN];
    wire_key_t key;
} hier_pack_t;

_Static_assert(sizeof(hier_pack_t) <= HOST_SHM_PACK_BYTES,
               "the pack does not fit the segment's header");

/* How long the leader sleeps on its socket for the members before it
 * takes the pack back and waits for them the usual way. */
#define PACK_SLICE_NS 20000000ull

static uint32_t pk_val(uint32_t g, int st)
{
    return g * 8u + (uint32_t)st;
}

/*
 * The record of a failed operation, in the leader's free slot (h->err):
 * err[0] the operation's first segment + 1 (0: none yet), err[1] its
 * status, err[2] the segment every member goes on from, beyond anything a
 * member may have posted for the operation (so that members whose calls
 * cut it into different numbers of segments are in step again). Then the
 * first word of each member's call (call_rec; the second words are in the
 * leader's slot of the second buffer, h->calls2), written before it posts
 * the call's first segment: the leader compares them there, so that
 * ranks of one host whose calls differ, or one of which refused its
 * arguments, fail the call on every rank (host_hier_refuse).
 */
#define ERR_WORDS 4

/* A member's call as its record says it, two words: the count (<< 1),
 * bit 0 set when it refused its arguments (the other fields are then of
 * no matter); and the call's tag (incoll_comm.call_tag: the collective an
 * allreduce carries, and its root, exactly) << 32, its algorithm, dtype
 * and op. */
typedef struct {
    uint64_t w[2];
} call_rec_t;

static call_rec_t call_rec(size_t count, uint32_t tag, incoll_dtype_t dtype,
                           incoll_op_t op, incoll_algo_t algo, int refused)
{
    call_rec_t r = {{(uint64_t)count << 1 | (refused ? 1u : 0u),
                     (uint64_t)tag << 32 |
                         (uint64_t)((unsigned)algo & 0xffu) << 16 |
                         (uint64_t)((unsigned)dtype & 0xffu) << 8 |
                         (uint64_t)((unsigned)op & 0xffu)}};
    return r;
}

/* Member m's record: its first word behind the failure record, its second
 * in the leader's (free) slot of the second buffer. Written before the
 * member posts the call's first segment, read by the leader after. */
static void rec_put(const struct host_hier *h, int m, call_rec_t r)
{
    atomic_store((_Atomic uint64_t *)(void *)(h->err + ERR_WORDS) + m, r.w[0]);
    atomic_store((_Atomic uint64_t *)(void *)h->calls2 + m, r.w[1]);
}

static call_rec_t rec_get(const struct host_hier *h, int m)
{
    call_rec_t r = {
        {atomic_load((_Atomic uint64_t *)(void *)(h->err + ERR_WORDS) + m),
         atomic_load((_Atomic uint64_t *)(void *)h->calls2 + m)}};
    return r;
}

/* Why member calls theirs and mine differ: HOST_ABORT_ARG when one was
 * refused, a wire_mismatch_t, or WIRE_MISMATCH_NONE. */
static int rec_differs(call_rec_t mine, call_rec_t theirs)
{
    uint64_t a = mine.w[1], b = theirs.w[1];
    if ((mine.w[0] | theirs.w[0]) & 1u)
        return HOST_ABORT_ARG;
    if (a >> 56 != b >> 56)
        return WIRE_MISMATCH_KIND; /* the collective (host_call_tag) */
    if (a >> 32 != b >> 32)
        return WIRE_MISMATCH_ROOT;
    if (mine.w[0] != theirs.w[0])
        return WIRE_MISMATCH_SIZE;
    if ((a >> 16 & 0xffu) != (b >> 16 & 0xffu))
        return WIRE_MISMATCH_KIND;
    if ((a >> 8 & 0xffu) != (b >> 8 & 0xffu))
        return WIRE_MISMATCH_DTYPE;
    if ((a & 0xffu) != (b & 0xffu))
        return WIRE_MISMATCH_OP;
    return WIRE_MISMATCH_NONE;
}

/* Leader: the operation starting at h->seq (nseg segments here) fails on
 * every local member with status; all go on from the same segment. */
/* How long a rank of the level waits for its neighbours from now. */
static uint64_t wait_deadline(const struct host_hier *h)
{
    return host_now_ns() + h->wait_ns;
}

static incoll_status_t fail_op(struct host_hier *h, size_t nseg,
                               incoll_status_t status)
{
    uint32_t next = h->seq + (uint32_t)nseg + (uint32_t)h->nbuf + 1;
    uint64_t deadline;
    h->failed = 1;
    h->next = next;
    if (h->shm == NULL)
        return status;
    /* The record is overwritten only once every member is past the
     * operation before (a member still there must find that one's). */
    deadline = wait_deadline(h);
    for (int m = 1; m < h->nlocal; m++)
        if (host_shm_wait(h->shm, HOST_SHM_CONSUMED, m, h->seq, deadline) !=
            INCOLL_OK)
            break;
    h->err[1] = (uint32_t)(int32_t)status;
    h->err[2] = next;
    atomic_store((_Atomic uint32_t *)&h->err[0], h->seq + 1);
    host_shm_set(h->shm, HOST_SHM_DONE, 0, next);
    return status;
}

/* Member: 1 (and *status_p) when the leader failed the operation that
 * starts at h->seq; the member then goes on from where the leader says. */
static int op_failed(struct host_hier *h, incoll_status_t *status_p)
{
    if (atomic_load((_Atomic uint32_t *)&h->err[0]) != h->seq + 1)
        return 0;
    h->failed = 1;
    h->next = h->err[2];
    host_shm_set(h->shm, HOST_SHM_CONSUMED, h->lidx, h->next);
    *status_p = (incoll_status_t)(int32_t)h->err[1];
    return 1;
}

/* Leader, after every member posted the operation's first segment: the
 * members' calls against its own (mine). A member whose call differs, or
 * that refused its arguments, makes the call fail on every rank: the
 * leaders' communicator fails it there (host_comm_abort_call, which the
 * other leaders join wherever they are in it), and every member here
 * (fail_op). Returns INCOLL_OK when all match. */
static incoll_status_t check_calls(incoll_comm_h comm, struct host_hier *h,
                                   call_rec_t mine, size_t nseg)
{
    int why = WIRE_MISMATCH_NONE, who = 0;
    incoll_ctx_h ctx = comm->ctx;

    if (h->shm == NULL)
        return INCOLL_OK;
    for (int m = 1; m < h->nlocal && why == WIRE_MISMATCH_NONE; m++) {
        why = rec_differs(mine, rec_get(h, m));
        who = m;
    }
    if (why == WIRE_MISMATCH_NONE)
        return INCOLL_OK;
    incoll_error("hier: member %d of this host's ranks %s: the call fails on "
                 "every rank",
                 who,
                 why == HOST_ABORT_ARG ? "refused its arguments"
                                       : wire_mismatch_str((unsigned)why));
    if (h->leaders && h->leaders->size > 1) {
        host_lock(ctx);
        (void)host_comm_abort_call(h->leaders, why);
        host_unlock(ctx);
    }
    return fail_op(h, nseg, INCOLL_ERR_MISMATCH);
}

static uint64_t fnv64(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* The socket (package, else NUMA node) the rank's CPU binding lies in, or
 * -1 with the reason in why. */
static int socket_of(char *why, size_t len)
{
#ifdef INCOLL_HAVE_HWLOC
    hwloc_topology_t topo;
    hwloc_bitmap_t bound;
    hwloc_obj_type_t type = HWLOC_OBJ_PACKAGE;
    cpu_set_t set;
    int n, hits = 0, found = -1, all;

    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        snprintf(why, len, "cannot read the rank's CPU binding");
        return -1;
    }
    if (hwloc_topology_init(&topo) != 0)
        goto err_hwloc;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        goto err_hwloc;
    }
    bound = hwloc_bitmap_alloc();
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            hwloc_bitmap_set(bound, (unsigned)c);
    n = hwloc_get_nbobjs_by_type(topo, type);
    if (n <= 0) {
        type = HWLOC_OBJ_NUMANODE;
        n = hwloc_get_nbobjs_by_type(topo, type);
    }
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo, type, (unsigned)i);
        if (o && o->cpuset && hwloc_bitmap_intersects(o->cpuset, bound)) {
            hits++;
            found = (int)o->logical_index;
        }
    }
    all = hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(topo),
                                  bound) &&
          hwloc_bitmap_weight(hwloc_topology_get_topology_cpuset(topo)) > 1;
    hwloc_bitmap_free(bound);
    hwloc_topology_destroy(topo);
    if (hits == 1 && !(all && n > 1))
        return found;
    if (hits == 0)
        snprintf(why, len, "the rank's CPU binding is outside the topology");
    else
        snprintf(why, len,
                 "the rank is not bound to one socket (its CPU binding spans "
                 "%d of %d)",
                 hits, n);
    return -1;
err_hwloc:
    snprintf(why, len, "hwloc cannot load the topology");
    return -1;
#else
    snprintf(why, len, "this build has no hwloc (libhwloc-dev)");
    return -1;
#endif
}

/* This rank's placement key (never 0) for mode; socket mode may fall back
 * to node (mode_p says which). */
static uint64_t place_key(incoll_ctx_h ctx, const char **mode_p)
{
    char label[256] = "", machine[256] = "", why[160];
    const char *host = ctx->host;
    uint64_t h = 0xcbf29ce484222325ull;

    /* Without a manager the map of ranks to fabric.conf's hosts says
     * (src/host/rdv.c). */
    if (ctx->host_map != NULL)
        snprintf(label, sizeof(label), "fabric.conf host %d", ctx->fabric_host);
    else if (host != NULL && *host != '\0')
        snprintf(label, sizeof(label), "%s", host);
    else
        host_rank_host(ctx->hosts, ctx->rank, label, sizeof(label));
    gethostname(machine, sizeof(machine) - 1);
    h = fnv64(fnv64(fnv64(h, label), "@"), machine);
    if (strcmp(*mode_p, "socket") == 0) {
        int s = socket_of(why, sizeof(why));
        if (s >= 0) {
            h = (h ^ (uint64_t)(s + 1)) * 0x100000001b3ull;
        } else {
            static int said;
            if (!said)
                incoll_info("hier: INCOLL_HIER=socket runs as node: %s", why);
            said = 1;
            *mode_p = "node";
        }
    }
    return h ? h : 1;
}

/* The exchanges that make the level run host to host (recursive
 * doubling over the members' UDP endpoints, which the manager gave), not
 * on the fabric: the ANs count only the application's operations. */
static incoll_status_t exchange(incoll_comm_h comm, void *v, size_t count,
                                incoll_dtype_t dtype, incoll_op_t op)
{
    return host_allreduce_sched(comm, ALGO_RD, v, v, count, dtype, op);
}

/* Sums one int over comm: a barrier that also tells everyone whether
 * anyone failed. */
static incoll_status_t sum_flags(incoll_comm_h comm, int32_t *v)
{
    return exchange(comm, v, 1, INCOLL_INT32, INCOLL_OP_SUM);
}

static void hier_drop(struct host_hier *h)
{
    if (h->shared && h->lidx > 0)
        close(h->sock_fd);
    if (h->shared)
        close(h->wake_fd);
    h->shared = 0;
    host_shm_detach(h->shm);
    h->shm = NULL;
    h->err = NULL;
    h->calls2 = NULL;
    if (h->leaders) {
        incoll_comm_h l = h->leaders;
        h->leaders = NULL;
        if (l->hier)
            l->hier->owner = NULL;
        /* Inside a call (the communicator's destruction, a failed set-up)
         * with the lock, or at incoll_finalize without it. */
        if (host_lock_held(l->ctx))
            (void)host_service_destroy_locked(l);
        else
            (void)host_service_destroy(l);
    }
}

/* The abstract Unix socket's address the leader hands its socket out on
 * (named after the segment). */
static socklen_t pass_addr(const char *name, struct sockaddr_un *a)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "incoll-sock%s", name);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                       strlen(a->sun_path + 1));
}

/* Leader: listens on the segment's address (before the members look). */
static int pass_listen(const char *name)
{
    struct sockaddr_un a;
    socklen_t len = pass_addr(name, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 64) != 0) {
        incoll_warn("hier: INCOLL_HIER_SHARED: cannot listen on a Unix "
                    "socket: %s",
                    log_strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Leader: gives its socket and eventfd (fds[0], fds[1]) to the n members
 * that connect to lfd before the deadline. 0 or -1. */
static int pass_give(int lfd, const int fds[2], int n, uint64_t deadline)
{
    for (int i = 0; i < n; i++) {
        struct pollfd pfd = {.fd = lfd, .events = POLLIN};
        char byte = 'S';
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
            char buf[CMSG_SPACE(2 * sizeof(int))];
            struct cmsghdr align;
        } u;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = u.buf,
                             .msg_controllen = sizeof(u.buf)};
        struct cmsghdr *c;
        uint64_t now = host_now_ns();
        int cfd, ms = now < deadline ? (int)((deadline - now) / 1000000u) : 0;

        if (poll(&pfd, 1, ms) <= 0)
            return -1;
        cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            return -1;
        memset(u.buf, 0, sizeof(u.buf));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(2 * sizeof(int));
        memcpy(CMSG_DATA(c), fds, 2 * sizeof(int));
        if (sendmsg(cfd, &msg, MSG_NOSIGNAL) != 1) {
            close(cfd);
            return -1;
        }
        close(cfd);
    }
    return 0;
}

/* Member: the leader's socket and eventfd into fds; 0, or -1 (none). */
static int pass_take(const char *name, uint64_t wait_ns, int fds[2])
{
    struct sockaddr_un a;
    socklen_t len = pass_addr(name, &a);
    struct timeval tv = {.tv_sec = (time_t)(wait_ns / 1000000000u),
                         .tv_usec = (long)(wait_ns % 1000000000u / 1000u)};
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), got = -1;

    fds[0] = fds[1] = -1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, len) == 0 &&
        recvmsg(fd, &msg, MSG_CMSG_CLOEXEC) == 1 &&
        (c = CMSG_FIRSTHDR(&msg)) != NULL && c->cmsg_level == SOL_SOCKET &&
        c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(2 * sizeof(int))) {
        memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
        got = 0;
    }
    close(fd);
    return got;
}

/* INCOLL_HIER_SHARED: the leader hands its UDP socket to the members
 * (every member calls it, for the barrier); on failure anywhere the
 * host's ranks run without it, said once. */
static incoll_status_t share_socket(incoll_comm_h comm, struct host_hier *h,
                                    const char *name, int lfd)
{
    int32_t bad = 0;
    incoll_status_t status;
    uint64_t deadline = host_now_ns() + h->wait_ns;
    int fds[2] = {-1, -1};

    if (h->nlocal > 1 && h->lidx == 0) {
        fds[0] = udp_fd(comm->ctx->sock);
        fds[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        bad = lfd < 0 || fds[1] < 0 ||
              pass_give(lfd, fds, h->nlocal - 1, deadline) != 0;
    } else if (h->nlocal > 1) {
        bad = pass_take(name, h->wait_ns, fds) != 0;
    }
    status = sum_flags(comm, &bad);
    if (status == INCOLL_OK && bad == 0) {
        h->shared = h->nlocal > 1;
        h->sock_fd = h->lidx > 0 ? fds[0] : -1;
        h->wake_fd = fds[1];
        return INCOLL_OK;
    }
    if (h->nlocal > 1 && h->lidx > 0 && fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    if (status == INCOLL_OK) {
        static int said;
        if (!said)
            incoll_info("hier: INCOLL_HIER_SHARED: a leader could not hand "
                        "its socket to its host's ranks: the leaders wait "
                        "for their members");
        said = 1;
    }
    return status;
}

/* Makes the shared segment of our host: the leader creates, the others
 * attach once it exists, the leader removes the name once all did. Every
 * member calls it (also those alone on their host) for the barriers. */
static incoll_status_t make_segment(incoll_comm_h comm, struct host_hier *h,
                                    pid_t leader_pid)
{
    char name[96];
    int32_t bad = 0;
    size_t seg = h->seg;
    incoll_status_t status = INCOLL_OK;
    int lfd = -1, all_shared = 0;

    snprintf(name, sizeof(name), "/incoll-%d-%016" PRIx64 "-%08x",
             (int)leader_pid, host_comm_id(comm), comm->ctx->gen);
    if (h->nlocal > 1 && h->lidx == 0)
        status = host_shm_create(name, h->nlocal, h->nbuf, seg, &h->shm);
    if (status == INCOLL_OK && comm->ctx->cfg.hier_shared && h->nlocal > 1 &&
        h->lidx == 0)
        lfd = pass_listen(name);
    bad = status != INCOLL_OK;
    status = sum_flags(comm, &bad);
    if (status == INCOLL_OK && bad == 0 && h->nlocal > 1 && h->lidx > 0) {
        int32_t mine = host_shm_attach(name, h->lidx, &h->shm) != INCOLL_OK;
        bad = mine;
    }
    if (status == INCOLL_OK) {
        /* With the count of ranks that ask for the shared socket: it is
         * used only when all do (its set-up is a collective of its own). */
        int32_t b2 = bad + (comm->ctx->cfg.hier_shared ? 65536 : 0);
        status = sum_flags(comm, &b2);
        bad = b2 & 0xffff;
        all_shared = b2 >> 16 == comm->size;
    }
    if (h->nlocal > 1 && h->lidx == 0)
        host_shm_unlink(name);
    if (status == INCOLL_OK && bad == 0 && all_shared)
        status = share_socket(comm, h, name, lfd);
    if (lfd >= 0)
        close(lfd);
    if (status != INCOLL_OK)
        return status;
    if (bad) {
        host_shm_detach(h->shm);
        h->shm = NULL;
        return INCOLL_ERR_IO;
    }
    if (h->shm != NULL)
        host_shm_spin(h->shm, comm->ctx->cfg.hier_spin_ns);
    /* The leader reduces from its own buffer, so its slots are free: the
     * first holds the end and status of an operation that failed and the
     * members' calls, the second the calls' second words. */
    if (h->shm) {
        h->err = host_shm_slot(h->shm, 0, 0);
        h->calls2 = host_shm_slot(h->shm, 1, 0);
        h->nbuf = host_shm_nbuf(h->shm);
    }
    return INCOLL_OK;
}

/* Makes comm's hierarchy (collective over comm); see the top of the file. */
static incoll_status_t hier_make(incoll_comm_h comm, struct host_hier *h)
{
    const host_cfg_t *cfg = &comm->ctx->cfg;
    const char *knob = h->want ? h->want : cfg->hier;
    const char *mode = "node";
    uint64_t *v, key;
    int nhosts = 0, maxlocal = 0, leader = -1;
    /* The world of ranks sharing fabric.conf's hosts without a manager:
     * only its host leaders have a port and a child in the world group,
     * so it runs node mode whatever INCOLL_HIER says. */
    int shared = comm->ctx->host_map != NULL && comm == comm->ctx->world;
    incoll_status_t status;

    h->wait_ns = cfg->hier_timeout_ns ? cfg->hier_timeout_ns : cfg->wait_ns;
    if (shared && knob && *knob && strcmp(knob, "node") != 0) {
        static int said;
        if (!said)
            incoll_info("hier: INCOLL_HIER=%s runs as node on the world: "
                        "without a manager only one rank per fabric.conf "
                        "host has a child in the world group",
                        knob);
        said = 1;
        knob = "node";
    }
    /* Without a manager every other communicator has no group: its
     * ranks run host-based algorithms among themselves. */
    if ((knob && strcmp(knob, "flat") == 0) ||
        (comm->ctx->info == NULL && !shared)) {
        h->mode = "flat";
        h->state = HIER_FLAT;
        return INCOLL_OK;
    }
    if (knob && strcmp(knob, "socket") == 0)
        mode = "socket";
    else if (knob && *knob && strcmp(knob, "node") != 0)
        incoll_warn("hier: INCOLL_HIER='%s' is not node, socket or flat: "
                    "using node",
                    knob);
    key = place_key(comm->ctx, &mode);
    h->mode = mode;
    h->seg = cfg->hier_seg;
    if (h->seg < 4096) /* the failure record and the calls fit a slot */
        h->seg = 4096;
    h->nbuf = cfg->hier_depth;
    if (h->nbuf < 2)
        h->nbuf = 2;
    if (h->nbuf > HIER_MAX_DEPTH)
        h->nbuf = HIER_MAX_DEPTH;
    v = calloc((size_t)comm->size * 2, sizeof(*v));
    if (v == NULL)
        return INCOLL_ERR_NO_MEMORY;
    v[2 * comm->rank] = key;
    v[2 * comm->rank + 1] = (uint64_t)getpid();
    status =
        exchange(comm, v, (size_t)comm->size * 2, INCOLL_UINT64, INCOLL_OP_BOR);
    if (status != INCOLL_OK) {
        incoll_error("hier: exchanging placements failed: %s",
                     incoll_status_string(status));
        free(v);
        return status;
    }
    for (int r = 0; r < comm->size; r++) {
        int first = 1, n = 0;
        for (int q = 0; q < comm->size; q++) {
            if (v[2 * q] != v[2 * r])
                continue;
            first &= q >= r;
            n++;
        }
        nhosts += first;
        maxlocal = n > maxlocal ? n : maxlocal;
        if (v[2 * r] == key) {
            if (leader < 0)
                leader = r;
            if (r < comm->rank)
                h->lidx++;
            h->nlocal++;
        }
    }
    if (shared && nhosts != comm->ctx->conf.nhosts) {
        incoll_error("hier: the %d ranks are on %d hosts but the fabric in %s "
                     "has %d: the ranks of one fabric.conf host must share a "
                     "machine (INCOLL_HOST_MAP)",
                     comm->size, nhosts, comm->ctx->fabric_dir,
                     comm->ctx->conf.nhosts);
        free(v);
        return INCOLL_ERR_CONFIG;
    }
    if (maxlocal <= 1 && !shared) {
        free(v);
        h->state = HIER_FLAT;
        incoll_debug("hier: one rank per %s: the communicator runs flat", mode);
        return INCOLL_OK;
    }
    incoll_debug("hier: %s mode: %d %ss, %d local ranks here (member %d)", mode,
                 nhosts, mode, h->nlocal, h->lidx);
    status = make_segment(comm, h, (pid_t)v[2 * leader + 1]);
    free(v);
    if (status == INCOLL_OK) {
        incoll_comm_h l = NULL;
        /* The leaders of a shared world in host order: member h is
         * fabric.conf's host h in the world group. */
        status = host_service_split_locked(
            comm, h->lidx == 0 ? 0 : INCOLL_UNDEFINED,
            shared ? comm->ctx->fabric_host : comm->rank, &l);
        if (status == INCOLL_OK && l != NULL && shared) {
            status = host_comm_take_world_group(l, comm->ctx->fabric_host);
            if (status != INCOLL_OK) {
                host_service_destroy_locked(l);
                l = NULL;
            }
        }
        if (status == INCOLL_OK && l != NULL) {
            l->hier = calloc(1, sizeof(*l->hier));
            if (l->hier == NULL) {
                host_service_destroy_locked(l);
                status = INCOLL_ERR_NO_MEMORY;
            } else {
                l->hier->state = HIER_LEADERS;
                l->hier->mode = mode;
                l->hier->owner = comm;
                h->leaders = l;
            }
        }
    }
    if (status != INCOLL_OK) {
        incoll_error("hier: making the %s level failed: %s", mode,
                     incoll_status_string(status));
        hier_drop(h);
        return status;
    }
    h->state = HIER_ACTIVE;
    /* Its own group serves no collective any more (they go through the
     * leaders): it goes back, and its failures mean nothing here. */
    host_comm_leave_group(comm);
    return INCOLL_OK;
}

int host_hier_active(incoll_comm_h comm, incoll_status_t *status_p)
{
    struct host_hier *h = comm->hier;

    *status_p = INCOLL_OK;
    if (h == NULL || h->state == HIER_SETUP) {
        if (h == NULL)
            h = calloc(1, sizeof(*h));
        if (h == NULL) {
            *status_p = INCOLL_ERR_NO_MEMORY;
            return 0;
        }
        if (h->mode == NULL) {
            h->mode = "none";
        } else if (comm->hier == h) {
            return 0; /* being made: this is one of its exchanges */
        }
        comm->hier = h;
        *status_p = hier_make(comm, h);
        if (*status_p != INCOLL_OK) {
            /* Every member failed alike (the exchange is an allreduce):
             * the next call tries again. */
            const char *want = h->want;
            memset(h, 0, sizeof(*h));
            h->want = want;
            return 0;
        }
    }
    return h->state == HIER_ACTIVE || h->state == HIER_BROKEN;
}

/* The bytes of segment s of a vector of count elements. */
static size_t seg_len(const struct host_hier *h, size_t s, size_t count,
                      size_t dsize, size_t *off_p)
{
    size_t per = h->seg / dsize, off = s * per;
    *off_p = off * dsize;
    return (count - off < per ? count - off : per) * dsize;
}

/* The leader's pipeline of one allreduce (see the top of the file). */
typedef struct {
    struct host_hier *h;
    uint8_t *recv;
    size_t count, dsize, nseg;
    size_t pub;                       /* segments published so far */
    incoll_req_h req[HIER_MAX_DEPTH]; /* segment s: req[s % nbuf] */
    uint64_t deadline;
} lead_pipe_t;

/* The leaders' allreduce failed: the members end the whole operation
 * with its status. */
static incoll_status_t publish_status(lead_pipe_t *p, incoll_status_t status)
{
    return fail_op(p->h, p->nseg, status);
}

/* Waits for the leaders' allreduce of the oldest unpublished segment and
 * publishes its result to the members; on its failure the members end
 * the whole operation with its status. */
static incoll_status_t publish(lead_pipe_t *p, int net)
{
    struct host_hier *h = p->h;
    size_t s = p->pub, off, len = seg_len(h, s, p->count, p->dsize, &off);
    uint32_t g = h->seq + (uint32_t)s;
    incoll_status_t status = INCOLL_OK;

    if (net) {
        status = host_req_wait(p->req[s % (size_t)h->nbuf]);
        p->req[s % (size_t)h->nbuf] = NULL;
    }
    p->pub++;
    if (h->shm == NULL)
        return status;
    if (status != INCOLL_OK)
        return publish_status(p, status);
    for (int m = 1; m < h->nlocal; m++) {
        status = host_shm_wait(h->shm, HOST_SHM_CONSUMED, m,
                               g + 1 - (uint32_t)h->nbuf, p->deadline);
        if (status != INCOLL_OK)
            return status;
    }
    memcpy(host_shm_result(h->shm, (int)(g % (uint32_t)h->nbuf)), p->recv + off,
           len);
    host_shm_set(h->shm, HOST_SHM_DONE, 0, g + 1);
    return INCOLL_OK;
}

/* Waits until every member has posted segment g (one wake at most: by
 * the member that posts last) and points src at the leader's part and
 * the members' slots, in rank order. */
static incoll_status_t gather_slots(struct host_hier *h, uint32_t g,
                                    const void *mine, const void **src,
                                    uint64_t deadline)
{
    incoll_status_t status = INCOLL_OK;

    src[0] = mine;
    if (h->shm == NULL)
        return INCOLL_OK;
    status = host_shm_wait(h->shm, HOST_SHM_ARRIVED, 0, g + 1, deadline);
    for (int m = 1; m < h->nlocal; m++)
        src[m] = host_shm_slot(h->shm, (int)(g % (uint32_t)h->nbuf), m);
    return status;
}

/* Member that holds the pack of segment g (or found it open): the calls
 * differ, or this member refused its arguments. The pack goes bad and
 * the leader wakes, whether it waits for the member's send (on the
 * pack's word) or sleeps on its socket (by the eventfd it polls too),
 * and fails the call on every rank the usual way. */
static void pack_bad(struct host_hier *h, hier_pack_t *pk, uint32_t g)
{
    uint64_t one = 1;

    atomic_store(&pk->state, pk_val(g, PK_BAD));
    if (atomic_load(&pk->sleepers) != 0)
        host_shm_wake(h->shm, &pk->state);
    if (write(h->wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        incoll_debug("hier: waking the leader: %s", log_strerror(errno));
}

/* Member that refused its arguments and whose post completed segment g:
 * a leader asleep on its socket with the pack open would wait for a
 * packet nobody sends; it is woken to fail the call at once. */
static void pack_refuse(struct host_hier *h, uint32_t g)
{
    hier_pack_t *pk = host_shm_pack(h->shm);
    uint32_t open = pk_val(g, PK_OPEN);

    if (atomic_load(&pk->state) == open &&
        atomic_compare_exchange_strong(&pk->state, &open,
                                       pk_val(g, PK_MEMBER))) {
        pk->who = h->lidx;
        pack_bad(h, pk, g);
    }
}

/* Member, whose post completed segment g of a one-packet allreduce:
 * sends the leader's packet if the leader left the pack open for it
 * (see hier_pack_t). */
static void pack_complete(struct host_hier *h, uint32_t g, size_t count,
                          incoll_dtype_t dtype, incoll_op_t op)
{
    hier_pack_t *pk = host_shm_pack(h->shm);
    uint32_t open = pk_val(g, PK_OPEN);
    int buf = (int)(g % (uint32_t)h->nbuf), same = 1;
    uint8_t *res = host_shm_result(h->shm, buf);
    size_t len = count * incoll_dtype_size(dtype);
    const void *src[HOST_SHM_MAX_LOCAL];
    uint8_t hdr[WIRE_HDR_LEN];
    uint64_t an = pk->an;
    struct sockaddr_in to = {.sin_family = AF_INET};
    struct iovec iov[2] = {{.iov_base = hdr, .iov_len = WIRE_HDR_LEN},
                           {.iov_base = res, .iov_len = len}};
    struct msghdr msg = {.msg_name = &to,
                         .msg_namelen = sizeof(to),
                         .msg_iov = iov,
                         .msg_iovlen = 2};
    call_rec_t lead;

    if (atomic_load(&pk->state) != open ||
        !atomic_compare_exchange_strong(&pk->state, &open,
                                        pk_val(g, PK_MEMBER)))
        return;
    pk->who = h->lidx;
    lead = rec_get(h, 0);
    for (int m = 1; m < h->nlocal && same; m++)
        same = rec_differs(lead, rec_get(h, m)) == WIRE_MISMATCH_NONE;
    if (!same) {
        pack_bad(h, pk, g);
        return;
    }
    src[0] = res; /* the leader's input, first in rank order */
    for (int m = 1; m < h->nlocal; m++)
        src[m] = host_shm_slot(h->shm, buf, m);
    reduce_n(op, dtype, res, src, h->nlocal, count);
    memcpy(hdr, pk->hdr, WIRE_HDR_LEN);
    wire_mac_seal(&pk->key, hdr, res, len);
    to.sin_port = htons((uint16_t)(an & 0xffffu));
    to.sin_addr.s_addr = htonl((uint32_t)(an >> 16));
    /* Said sent before it goes, so that the leader, woken by the result,
     * never waits for us: the fold is whole, and a packet that does not
     * go is one the leader's engine resends. */
    pk->sent_ns = host_now_ns();
    atomic_store(&pk->state, pk_val(g, PK_SENT));
    if (atomic_load(&pk->sleepers) != 0)
        host_shm_wake(h->shm, &pk->state);
    if (sendmsg(h->sock_fd, &msg, MSG_DONTWAIT) < 0) {
        incoll_debug("hier: sending the leader's packet: %s",
                     log_strerror(errno));
        return;
    }
    host_counters_shared_sent(WIRE_HDR_LEN + len);
}

/* Leader: waits for the pack of segment g to leave PK_MEMBER (a member
 * folds and sends). PK_SENT, or the state it left it in. */
static int pack_settle(struct host_hier *h, uint32_t g, hier_pack_t *pk,
                       uint64_t deadline, incoll_status_t *status_p)
{
    for (;;) {
        uint32_t v = atomic_load(&pk->state);
        if (v != pk_val(g, PK_MEMBER))
            return v == pk_val(g, PK_SENT) ? PK_SENT : PK_BAD;
        *status_p = host_shm_wait_word(h->shm, &pk->sleepers, &pk->state, v,
                                       pk->who, deadline);
        if (*status_p != INCOLL_OK)
            return -1;
    }
}

/*
 * Leader, for the one-packet allreduce of segment g while some member is
 * still to come (hier_pack_t): opens the pack and sleeps on its socket.
 * Returns 1 when a member sent the packet (*pseq_p: its sequence number,
 * *sent_p: when), 0 when the leader goes the usual way, -1 on failure
 * (*status_p).
 */
static int pack_try(incoll_comm_h comm, struct host_hier *h, uint32_t g,
                    const uint8_t *send, size_t count, incoll_dtype_t dtype,
                    incoll_op_t op, incoll_algo_t algo, uint64_t deadline,
                    uint64_t *pseq_p, uint64_t *sent_p,
                    incoll_status_t *status_p)
{
    hier_pack_t *pk = host_shm_pack(h->shm);
    incoll_comm_h l = h->leaders;
    size_t len = count * incoll_dtype_size(dtype);
    uint8_t *res = host_shm_result(h->shm, (int)(g % (uint32_t)h->nbuf));
    int ok = 0, st;
    uint32_t mine;

    if (!h->shared || l == NULL || l->size < 2 ||
        (algo != INCOLL_ALGO_AUTO && algo != INCOLL_ALGO_INC) ||
        (int32_t)(host_shm_get(h->shm, HOST_SHM_ARRIVED, 0) - (g + 1)) >= 0)
        return 0;
    /* Only for a call the leaders' engine will start with this packet:
     * not one a recovery doomed to fail unrun (this leader was an
     * operation behind when the others failed the next one). A member's
     * packet for it would reach the AN as the next operation's, which the
     * others run with their next call's data: a wrong result there. */
    host_lock(comm->ctx);
    if (l->eng != NULL && host_comm_inc_usable(l, op, dtype) &&
        !host_comm_group_failed(l) && !host_comm_pulled(l) &&
        !host_comm_doomed_pending(l) && !host_comm_broken(l, NULL) &&
        host_engine_next_hdr(l->eng, count, dtype, op, comm->call_tag, pk->hdr,
                             pseq_p)) {
        const host_engine_params_t *ep = host_engine_params(l->eng);
        pk->key = ep->key;
        pk->an = ep->an;
        pk->len = (uint32_t)len;
        ok = 1;
    }
    host_unlock(comm->ctx);
    if (!ok)
        return 0;
    /* The result buffer is free once every member copied the result
     * that used it nbuf segments ago. */
    for (int m = 1; m < h->nlocal; m++) {
        *status_p = host_shm_wait(h->shm, HOST_SHM_CONSUMED, m,
                                  g + 1 - (uint32_t)h->nbuf, deadline);
        if (*status_p != INCOLL_OK)
            return -1;
    }
    memcpy(res, send, len);
    atomic_store(&pk->state, pk_val(g, PK_OPEN));
    for (;;) {
        /* The result comes on the socket, or on the multicast one; a
         * member whose pack went bad writes the eventfd (pack_bad). A
         * negative fd (no multicast socket) is not polled. */
        struct pollfd pfd[3] = {
            {.fd = udp_fd(comm->ctx->sock), .events = POLLIN},
            {.fd = host_mcast_fd(comm->ctx), .events = POLLIN},
            {.fd = h->wake_fd, .events = POLLIN}};
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)PACK_SLICE_NS};
        uint32_t open = pk_val(g, PK_OPEN);
        int ready, packet;

        /* The last member came meanwhile and may have missed the pack
         * (its post before our store): we fold ourselves. */
        if ((int32_t)(host_shm_get(h->shm, HOST_SHM_ARRIVED, 0) - (g + 1)) >=
                0 &&
            atomic_compare_exchange_strong(&pk->state, &open,
                                           pk_val(g, PK_LEADER)))
            return 0;
        st = pack_settle(h, g, pk, deadline, status_p);
        if (st < 0)
            return -1;
        mine = atomic_load(&pk->state);
        if (mine == pk_val(g, PK_SENT)) {
            *sent_p = pk->sent_ns;
            return 1;
        }
        if (mine != pk_val(g, PK_OPEN)) {
            /* PK_BAD: the calls differ, or a member refused */
            incoll_info("hier: member %d found this host's calls differ "
                        "while the leader slept on its socket: the leader "
                        "checks them now",
                        pk->who);
            return 0;
        }
        ready = ppoll(pfd, 3, &ts, NULL);
        host_wakeup_note();
        if (ready > 0 && (pfd[2].revents & POLLIN)) {
            uint64_t n;
            /* (a wake left from an earlier pack that went bad after
             * we saw it so is read here and changes nothing) */
            if (read(h->wake_fd, &n, sizeof(n)) < 0)
                incoll_debug("hier: reading the leader's eventfd: %s",
                             log_strerror(errno));
        }
        packet = ready > 0 && ((pfd[0].revents | pfd[1].revents) != 0);
        open = pk_val(g, PK_OPEN);
        if ((ready <= 0 || (packet && atomic_load(&pk->state) == open)) &&
            atomic_compare_exchange_strong(&pk->state, &open,
                                           pk_val(g, PK_LEADER)))
            return 0; /* the slice passed, or another packet came */
    }
}

/*
 * The leader's side of an allreduce of one segment, the small ones: the
 * leader folds straight into the segment's result buffer and runs the
 * leaders' allreduce in place there, on this thread, so the result is
 * published by one store and one wake the moment it is in, before the
 * leader copies it into its own buffer.
 */
static incoll_status_t lead_one(incoll_comm_h comm, struct host_hier *h,
                                incoll_algo_t algo, const uint8_t *send,
                                uint8_t *recv, size_t count,
                                incoll_dtype_t dtype, incoll_op_t op,
                                uint64_t deadline)
{
    const void *src[HOST_SHM_MAX_LOCAL];
    uint32_t g = h->seq, nbuf = (uint32_t)h->nbuf;
    size_t len = count * incoll_dtype_size(dtype);
    lead_pipe_t p = {.h = h, .nseg = 1};
    incoll_status_t status;
    uint8_t *res;
    uint64_t pseq = 0, sent_ns = 0;
    int pk;

    rec_put(h, 0, call_rec(count, comm->call_tag, dtype, op, algo, 0));
    pk = pack_try(comm, h, g, send, count, dtype, op, algo, deadline, &pseq,
                  &sent_ns, &status);
    if (pk < 0) {
        host_shm_abort(h->shm, status);
        return status;
    }
    if (pk > 0) {
        /* A member sent our packet with the host's whole fold in res,
         * every call alike: the leaders' allreduce counts it as sent. */
        res = host_shm_result(h->shm, (int)(g % nbuf));
        host_lock(comm->ctx);
        if (h->leaders->eng != NULL)
            host_engine_presend(h->leaders->eng, pseq, sent_ns);
        host_unlock(comm->ctx);
        goto net;
    }
    status = gather_slots(h, g, send, src, deadline);
    if (status == INCOLL_OK &&
        (status = check_calls(
             comm, h, call_rec(count, comm->call_tag, dtype, op, algo, 0),
             1)) != INCOLL_OK)
        return status;
    /* The result buffer is free once every member copied the result
     * that used it nbuf segments ago. */
    for (int m = 1; m < h->nlocal && status == INCOLL_OK; m++)
        status =
            host_shm_wait(h->shm, HOST_SHM_CONSUMED, m, g + 1 - nbuf, deadline);
    if (status != INCOLL_OK) {
        host_shm_abort(h->shm, status);
        return status;
    }
    res = host_shm_result(h->shm, (int)(g % nbuf));
    reduce_n(op, dtype, res, src, h->nlocal, count);
net:
    if (h->leaders && h->leaders->size > 1) {
        h->leaders->call_tag = comm->call_tag;
        status = host_service_allreduce(h->leaders, algo, INCOLL_IN_PLACE, res,
                                        count, dtype, op);
        h->leaders->call_tag = 0;
        if (pk > 0) {
            host_lock(comm->ctx);
            if (h->leaders->eng != NULL)
                host_engine_presend_clear(h->leaders->eng);
            host_unlock(comm->ctx);
        }
        if (status != INCOLL_OK)
            return publish_status(&p, status);
    }
    host_shm_set(h->shm, HOST_SHM_DONE, 0, g + 1);
    memcpy(recv, res, len);
    return INCOLL_OK;
}

/* The leader's side of one allreduce. For each segment it waits for the
 * members' parts, folds them in rank order into recv and queues the
 * leaders' allreduce of it on their communicator's thread; up to nbuf
 * segments are queued at a time, and each result goes to the members as
 * soon as the leader is not waiting for them. The library lock is given
 * up meanwhile, so that the thread runs the network part while this one
 * folds and copies. */
static incoll_status_t lead(incoll_comm_h comm, struct host_hier *h,
                            incoll_algo_t algo, const uint8_t *send,
                            uint8_t *recv, size_t count, incoll_dtype_t dtype,
                            incoll_op_t op, uint64_t deadline)
{
    const void *src[HOST_SHM_MAX_LOCAL];
    int net = h->leaders && h->leaders->size > 1;
    lead_pipe_t p = {.h = h,
                     .recv = recv,
                     .count = count,
                     .dsize = incoll_dtype_size(dtype),
                     .deadline = deadline};
    incoll_status_t status = INCOLL_OK;
    /* The segments' allreduces are one call on every leader: once one
     * fails (every leader's fails with it: a recovery fails the call each
     * is in), the later ones fail at once, on every leader alike, instead
     * of running without the leaders that stopped. */
    incoll_status_t chain = INCOLL_OK;
    size_t nbuf = (size_t)h->nbuf;
    int inline_net, given = 0;

    p.nseg = (count + h->seg / p.dsize - 1) / (h->seg / p.dsize);
    /* One segment has nothing to overlap: the leaders' allreduce runs
     * here, without a hand-over to their thread. */
    inline_net = p.nseg <= 1;
    if (!inline_net)
        given = host_block_begin(comm->ctx);
    for (size_t s = 0; s < p.nseg && status == INCOLL_OK; s++) {
        uint32_t g = h->seq + (uint32_t)s;
        size_t off, len = seg_len(h, s, count, p.dsize, &off);

        /* The members post segment s once segment s - nbuf is out (its
         * slots are then free); later ones go out when they are done. */
        while (
            status == INCOLL_OK && p.pub < s &&
            (p.pub + nbuf <= s || !net || host_req_done(p.req[p.pub % nbuf])))
            status = publish(&p, net);
        status = gather_slots(h, g, send + off, src, deadline);
        if (status == INCOLL_OK && s == 0)
            status = check_calls(
                comm, h, call_rec(count, comm->call_tag, dtype, op, algo, 0),
                p.nseg);
        if (status != INCOLL_OK)
            break;
        /* Alone on the host, in place: nothing to fold. */
        if (h->nlocal > 1 || src[0] != recv + off)
            reduce_n(op, dtype, recv + off, src, h->nlocal, len / p.dsize);
        if (net && inline_net) {
            h->leaders->call_tag = comm->call_tag;
            status = host_service_allreduce_locked(h->leaders, algo,
                                                   INCOLL_IN_PLACE, recv + off,
                                                   len / p.dsize, dtype, op);
            h->leaders->call_tag = 0;
            net = 0; /* publish() has no request to wait for */
            if (status != INCOLL_OK)
                (void)publish_status(&p, status);
        } else if (net) {
            host_req_args_t a = {RQ_ALLREDUCE,
                                 h->leaders,
                                 INCOLL_IN_PLACE,
                                 recv + off,
                                 len / p.dsize,
                                 dtype,
                                 op,
                                 0,
                                 algo,
                                 1,
                                 &chain,
                                 comm->call_tag};
            status = host_req_post(&a, 0, &p.req[s % nbuf]);
            if (status != INCOLL_OK)
                p.req[s % nbuf] = NULL;
        }
    }
    while (status == INCOLL_OK && p.pub < p.nseg)
        status = publish(&p, net);
    /* After a failure: the queued allreduces still write into recv. */
    for (size_t s = p.pub; s < p.nseg; s++) {
        if (p.req[s % nbuf] != NULL)
            (void)host_req_wait(p.req[s % nbuf]);
        p.req[s % nbuf] = NULL;
    }
    if (status != INCOLL_OK && h->shm != NULL && !h->failed)
        host_shm_abort(h->shm, status);
    host_block_end(comm->ctx, given);
    return status;
}

/* A member's side of one allreduce: it posts its parts up to nbuf
 * segments ahead of the result it waits for. */
static incoll_status_t follow(struct host_hier *h, const uint8_t *send,
                              uint8_t *recv, size_t count, incoll_dtype_t dtype,
                              incoll_op_t op, incoll_algo_t algo, uint32_t tag,
                              uint64_t deadline)
{
    size_t dsize = incoll_dtype_size(dtype);
    size_t nseg = (count + h->seg / dsize - 1) / (h->seg / dsize);
    size_t nbuf = (size_t)h->nbuf, next = 0;
    incoll_status_t status;

    /* Our call, for the leader to compare before it reduces anything. */
    rec_put(h, h->lidx, call_rec(count, tag, dtype, op, algo, 0));
    for (size_t s = 0; s < nseg; s++) {
        uint32_t g = h->seq + (uint32_t)s;
        size_t off, len;

        for (; next < nseg && next < s + nbuf; next++) {
            uint32_t gn = h->seq + (uint32_t)next;
            len = seg_len(h, next, count, dsize, &off);
            /* Our slot of its buffer is free once the leader published
             * segment next - nbuf, which it read before. */
            status = host_shm_wait(h->shm, HOST_SHM_DONE, 0,
                                   gn + 1 - (uint32_t)nbuf, deadline);
            if (status != INCOLL_OK || op_failed(h, &status))
                return status;
            memcpy(host_shm_slot(h->shm, (int)(gn % (uint32_t)nbuf), h->lidx),
                   send + off, len);
            /* (a leader whose one-packet call differs from ours opened
             * the pack too: it learns so from pack_complete at once) */
            if (host_shm_post(h->shm, h->lidx, gn + 1) && h->shared)
                pack_complete(h, gn, count, dtype, op);
        }
        len = seg_len(h, s, count, dsize, &off);
        status = host_shm_wait(h->shm, HOST_SHM_DONE, 0, g + 1, deadline);
        if (status != INCOLL_OK || op_failed(h, &status))
            return status;
        memcpy(recv + off, host_shm_result(h->shm, (int)(g % (uint32_t)nbuf)),
               len);
        host_shm_set(h->shm, HOST_SHM_CONSUMED, h->lidx, g + 1);
    }
    return INCOLL_OK;
}

incoll_status_t host_hier_allreduce(incoll_comm_h comm, incoll_algo_t algo,
                                    const void *sendbuf, void *recvbuf,
                                    size_t count, incoll_dtype_t dtype,
                                    incoll_op_t op)
{
    struct host_hier *h = comm->hier;
    size_t bytes = count * incoll_dtype_size(dtype);
    uint64_t deadline;
    incoll_status_t status;

    if (h->state == HIER_BROKEN) {
        incoll_error("allreduce: the communicator's %s level failed before",
                     h->mode);
        return INCOLL_ERR_GROUP_FAILED;
    }
    if (sendbuf != recvbuf &&
        (const uint8_t *)sendbuf < (uint8_t *)recvbuf + bytes &&
        (uint8_t *)recvbuf < (const uint8_t *)sendbuf + bytes) {
        status = host_comm_scratch(comm, bytes);
        if (status != INCOLL_OK)
            return status;
        memcpy(comm->scratch, sendbuf, bytes);
        sendbuf = comm->scratch;
    }
    h->failed = 0;
    deadline = wait_deadline(h);
    if (h->lidx > 0 ||
        (h->shm != NULL && count <= h->seg / incoll_dtype_size(dtype))) {
        /* Waiting for the host's other members gives the library lock up,
         * as waiting for packets does: a collective of another
         * communicator that one of them must finish first (a nonblocking
         * one in our request thread, a blocking one in another thread)
         * runs meanwhile. lead() gives it up itself. */
        int given = host_block_begin(comm->ctx);
        status = h->lidx > 0 ? follow(h, sendbuf, recvbuf, count, dtype, op,
                                      algo, comm->call_tag, deadline)
                             : lead_one(comm, h, algo, sendbuf, recvbuf, count,
                                        dtype, op, deadline);
        host_block_end(comm->ctx, given);
    } else {
        status =
            lead(comm, h, algo, sendbuf, recvbuf, count, dtype, op, deadline);
    }
    {
        /* After a failed operation every member goes on from where its
         * leader said (fail_op): they may have cut it differently. */
        size_t per = h->seg / incoll_dtype_size(dtype);
        h->seq =
            h->failed ? h->next : h->seq + (uint32_t)((count + per - 1) / per);
    }
    if (h->shm && host_shm_aborted(h->shm) != INCOLL_OK) {
        h->state = HIER_BROKEN;
        if (status == INCOLL_OK)
            status = host_shm_aborted(h->shm);
    }
    return status;
}

int host_hier_on(incoll_comm_h comm)
{
    const struct host_hier *h = comm ? comm->hier : NULL;
    return h != NULL && (h->state == HIER_ACTIVE || h->state == HIER_BROKEN);
}

int host_hier_decided(incoll_comm_h comm)
{
    const struct host_hier *h = comm ? comm->hier : NULL;
    return h != NULL && h->state != HIER_SETUP;
}

int host_hier_refuse(incoll_comm_h comm, incoll_status_t *status_p)
{
    struct host_hier *h = comm->hier;
    incoll_status_t status = INCOLL_OK;

    *status_p = INCOLL_OK;
    if (h == NULL || (h->state != HIER_ACTIVE && h->state != HIER_BROKEN))
        return 0;
    if (h->state == HIER_BROKEN) {
        *status_p = INCOLL_ERR_GROUP_FAILED;
        return 1;
    }
    h->failed = 0;
    if (h->lidx == 0) {
        /* The leader refused: the leaders fail the call, and so does
         * every member here (they posted, or will post, a call that the
         * record tells them failed). */
        if (h->leaders && h->leaders->size > 1)
            status = host_comm_abort_call(h->leaders, HOST_ABORT_ARG);
        (void)fail_op(h, 0, INCOLL_ERR_MISMATCH);
        /* (its own status is the refusal, unless the call broke the
         * communicator) */
        if (status != INCOLL_ERR_GROUP_FAILED)
            status = INCOLL_OK;
    } else if (h->shm != NULL) {
        /* A member: it posts the call's first segment with the refusal in
         * its record; its leader fails the call on every rank. */
        uint64_t deadline = wait_deadline(h);
        uint32_t g = h->seq;
        int given;
        rec_put(
            h, h->lidx,
            call_rec(0, 0, INCOLL_UINT8, INCOLL_OP_SUM, INCOLL_ALGO_AUTO, 1));
        given = host_block_begin(comm->ctx);
        status = host_shm_wait(h->shm, HOST_SHM_DONE, 0,
                               g + 1 - (uint32_t)h->nbuf, deadline);
        if (status == INCOLL_OK && !op_failed(h, &status)) {
            if (host_shm_post(h->shm, h->lidx, g + 1) && h->shared)
                pack_refuse(h, g);
            status = host_shm_wait(h->shm, HOST_SHM_DONE, 0, g + 1, deadline);
            if (status == INCOLL_OK && !op_failed(h, &status))
                status = INCOLL_ERR_PROTOCOL; /* the leader did not see it */
        }
        host_block_end(comm->ctx, given);
        if (!h->failed)
            host_shm_abort(h->shm, status);
        status = h->failed ? INCOLL_OK : status;
    }
    if (h->failed)
        h->seq = h->next;
    if (h->shm && host_shm_aborted(h->shm) != INCOLL_OK) {
        h->state = HIER_BROKEN;
        status = host_shm_aborted(h->shm);
    }
    *status_p = status == INCOLL_ERR_INVALID_ARG ? INCOLL_OK : status;
    return 1;
}

incoll_status_t host_hier_set_mode(incoll_comm_h comm, const char *mode)
{
    static const char *const modes[] = {"node", "socket", "flat"};
    const char *m = NULL;

    for (int i = 0; i < 3; i++)
        if (mode && strcmp(mode, modes[i]) == 0)
            m = modes[i];
    if (comm == NULL || m == NULL ||
        (comm->hier != NULL && comm->hier->mode != NULL)) {
        incoll_error("hier: cannot set mode '%s' on this communicator (node, "
                     "socket or flat, before its first allreduce)",
                     mode ? mode : "(null)");
        return INCOLL_ERR_INVALID_ARG;
    }
    if (comm->hier == NULL) {
        comm->hier = calloc(1, sizeof(*comm->hier));
        if (comm->hier == NULL)
            return INCOLL_ERR_NO_MEMORY;
    }
    comm->hier->want = m;
    return INCOLL_OK;
}

incoll_comm_h host_hier_leaders(incoll_comm_h comm, int *nlocal_p)
{
    struct host_hier *h = comm ? comm->hier : NULL;
    if (nlocal_p)
        *nlocal_p = h && h->state == HIER_ACTIVE ? h->nlocal : 1;
    return h && h->state == HIER_ACTIVE ? h->leaders : NULL;
}

void host_hier_free(incoll_comm_h comm)
{
    struct host_hier *h = comm->hier;
    if (h == NULL)
        return;
    comm->hier = NULL;
    if (h->owner && h->owner->hier)
        h->owner->hier->leaders = NULL;
    hier_drop(h);
    free(h);
}
