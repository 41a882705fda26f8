/*
 * incoll-agg: the aggregation node daemon. Its groups come from the fabric
 * description (--conf: it finds its own AN record by name, binds the UDP
 * address the record gives and serves the fabric's world group), from the
 * aggregation manager (--mgr: it registers under its switch name and the
 * manager adds and removes groups at run time, src/agg/agg_mgr_link.h), or
 * from both. It drives the agg core from an epoll loop over the socket, the
 * manager link's descriptor and a signalfd: SIGTERM or SIGINT end it
 * cleanly, SIGHUP is ignored. It never exits because of a packet or a
 * manager's message: the core counts and drops bad ones.
 *
 * With INCOLL_AGG_THREADS=N it runs N workers, each a thread with its own
 * socket on the AN's address (SO_REUSEPORT: the kernel spreads senders
 * over them) and its own agg core, a shard owning the slots s with
 * s % N == its index (agg_shard_of); shard 0 also owns the lock rounds and
 * the streaming window, so those rules run where they always did. A worker
 * hands a datagram it read for another shard to that shard's worker
 * (src/agg/agg_handoff.h). Each worker holds its shard's lock while it
 * handles a batch; worker 0 takes every lock around the manager link's
 * events (which add and remove groups on every shard) and to sum the
 * counters of a STATS reply.
 *
 * --relay makes it the benchmark's plain relay (`incoll bench agg`): every
 * CONTRIB it receives goes straight back to its sender as a RESULT, from
 * the receive buffer, through the same sockets, batches and offloads; no
 * mac, no reduction, no state.
 */
#include "agg/agg_handoff.h"
#include "agg/agg_mgr_link.h"
#include "common/fabric_conf.h"
#include "common/settings.h"
#include "common/log.h"
#include "common/mgr_proto.h"
#include "common/udp.h"
#include "core/agg_core.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Datagrams handed to the core at once, and batches read before the loop
 * looks at its other descriptors again. */
#define AGG_RX_BATCH 64
#define AGG_RX_ROUNDS 64
#define AGG_MAX_THREADS 64
#define AGG_RING_BYTES (4u << 20)

typedef struct agg_daemon agg_daemon_t;

/* One worker: a thread (worker 0: the main thread), its socket and its
 * shard of the groups' slots. */
typedef struct {
    agg_daemon_t *d;
    int idx;
    udp_sock_t *sock;
    agg_t *agg; /* NULL in relay mode */
    pthread_t thread;
    int epfd;
    int evfd; /* written by workers that handed us datagrams, and to stop */
    pthread_mutex_t lock;
    /* in[j]: datagrams worker j handed us (NULL for j == idx). */
    agg_ring_t **in;
    int wake[AGG_MAX_THREADS]; /* workers to wake after this batch */
    uint64_t handed, handoff_dropped;
    udp_msg_t *msgs;
    agg_pkt_t *pkts;
} agg_worker_t;

struct agg_daemon {
    fabric_conf_t conf; /* zeroed without --conf */
    int me;             /* index of our AN in conf.ans, -1 without */
    int nworkers;
    agg_worker_t *w;
    agg_t *shards[AGG_MAX_THREADS];
    int relay;
    int mcast; /* INCOLL_MCAST and the sockets can send multicast */
    int stop;
    agg_mgr_link_t *link; /* NULL without --mgr */
    int sigfd;
    const char *pidfile;
    /* The fabric master key (--secret or INCOLL_SECRET_FILE) the world
     * group's mac key is derived from; has_secret 0 without one. */
    uint8_t secret[WIRE_SECRET_LEN];
    int has_secret;
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll-agg --name NAME (--conf FILE | --listen IP:PORT)\n"
        "                  [--mgr HOST:PORT [--secret FILE]]\n"
        "                  [--pidfile FILE] [--foreground]\n"
        "       incoll-agg --name NAME --relay --listen IP:PORT\n"
        "\n"
        "Runs the aggregation node NAME: of the fabric described in the\n"
        "conf file (written by `incoll fabric up`), serving its world\n"
        "group, and/or of the fabric of a manager, which gives it groups\n"
        "at run time (docs/manager.md). One of --conf and --mgr is\n"
        "needed.\n"
        "\n"
        "  --name NAME       which an record of the conf file, and the\n"
        "                    switch name in the manager's topology\n"
        "  --conf FILE       fabric description; its an record gives the\n"
        "                    udp address\n"
        "  --listen IP:PORT  udp address without --conf (default\n"
        "                    127.0.0.1:0, any port)\n"
        "  --mgr HOST:PORT   register with this aggregation manager\n"
        "  --secret FILE     the fabric secret for the manager (default\n"
        "                    $INCOLL_SECRET_FILE); with --conf, given here\n"
        "                    or with --mgr, it also keys the world\n"
        "                    group's packets (docs/security.md)\n"
        "  --pidfile FILE    write the daemon's pid there; removed at exit\n"
        "  --foreground      accepted for compatibility: the daemon never\n"
        "                    forks by itself (`incoll fabric up` does)\n"
        "  --relay           no groups: send every contribution straight\n"
        "                    back to its sender as a result, through the\n"
        "                    same sockets and batches (the plain relay of\n"
        "                    `incoll bench agg`: the kernel path's limit)\n"
        "  --help            this text\n"
        "\n"
        "Environment (src/common/settings.h; `incoll info` lists all):\n");
    settings_print(out, "agg,fault", 0);
}

/*
 * Fault injection for the tests, INCOLL_AGG_FAULT_DROP_RESULTS=N: from the
 * (N+1)-th result of the first group this AN sends results for (a result
 * is one segment of one operation, however many packets carry it: one per
 * child, or one multicast copy), every result packet of that group is
 * dropped while its contributions
 * still go up (a one-way fault of the AN's downlinks, as in
 * docs/failures.md). Later groups are spared, so a rebuilt group works.
 * Returns 1 when the packet must be dropped. The header is the core's,
 * packed and sealed: its type and group are read where they are.
 */
static long long fault_after = -1; /* -1: off */
/* INCOLL_AGG_FAULT_MCAST_DROP: multicast results this AN sends are lost
 * with this probability (a fabric that loses or does not carry them). */
static double fault_mcast_p;
static uint64_t fault_mcast_rng = 0x9e3779b97f4a7c15ull;
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;

static void fault_init(void)
{
    const char *v = setting_str(SETTING_AGG_FAULT_DROP_RESULTS);
    fault_after = v ? setting_int(SETTING_AGG_FAULT_DROP_RESULTS) : -1;
    if (fault_after < 0)
        fault_after = -1;
    else
        incoll_warn("agg: fault injection: dropping the results of the "
                    "first group after %lld of them",
                    fault_after);
    fault_mcast_p = setting_real(SETTING_AGG_FAULT_MCAST_DROP);
    if (fault_mcast_p > 0)
        incoll_warn("agg: fault injection: dropping %g of the multicast "
                    "results",
                    fault_mcast_p);
}

static int fault_drop_result(const void *hdr)
{
    static uint32_t group;
    static unsigned long long seen;
    static uint8_t last[22]; /* slot .. offset of the last result */
    static int dropping;
    const uint8_t *p = hdr;
    uint32_t g;
    int drop = 0;

    if (fault_after < 0 || p[5] != WIRE_RESULT)
        return 0;
    g = (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 |
        (uint32_t)p[11] << 24;
    pthread_mutex_lock(&fault_lock);
    if (group == 0)
        group = g;
    if (g == group) {
        /* The same slot, epoch and offset (bytes 24-47 but hops and
         * macalg): the same result to another child. */
        uint8_t key[22];
        memcpy(key, p + 24, 2);
        memcpy(key + 2, p + 28, 20);
        if (!dropping && memcmp(key, last, sizeof(key)) != 0) {
            memcpy(last, key, sizeof(key));
            dropping = seen++ >= (unsigned long long)fault_after;
        }
        drop = dropping;
    }
    pthread_mutex_unlock(&fault_lock);
    return drop;
}

static int fault_drop_mcast(incoll_ep_t dst)
{
    uint64_t x;
    int drop;
    if (fault_mcast_p <= 0 || !udp_is_mcast(dst))
        return 0;
    pthread_mutex_lock(&fault_lock);
    x = fault_mcast_rng += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    drop = (double)(x >> 11) / 9007199254740992.0 < fault_mcast_p;
    pthread_mutex_unlock(&fault_lock);
    return drop;
}

static void agg_send(void *arg, incoll_ep_t dst, const void *hdr,
                     const void *payload, size_t len)
{
    udp_sock_t *sock = arg;
    if (fault_drop_result(hdr) || fault_drop_mcast(dst))
        return;
    udp_send(sock, dst, hdr, WIRE_HDR_LEN, payload, len);
}

/* A slot's buffer, unchanged until the flush after the batch: sent from
 * where it is (agg_core.h, send_ref). */
static void agg_send_ref(void *arg, incoll_ep_t dst, const void *hdr,
                         const void *payload, size_t len)
{
    udp_sock_t *sock = arg;
    if (fault_drop_result(hdr) || fault_drop_mcast(dst))
        return;
    udp_send_ref(sock, dst, hdr, WIRE_HDR_LEN, payload, len);
}

/* A contribution kept where it arrived until its slot is done with it
 * (agg_core.h, retain): its receive buffer stays out of the next reads. */
static int agg_retain(void *arg, const void *data)
{
    return udp_retain(arg, data);
}

static void agg_release(void *arg, const void *data)
{
    udp_release(arg, data);
}

static int write_pidfile(const char *path)
{
    char tmp[4096], text[32];
    int fd, n;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        incoll_error("pidfile %s: cannot create: %s", tmp, log_strerror(errno));
        return -1;
    }
    n = snprintf(text, sizeof(text), "%d\n", (int)getpid());
    if (write(fd, text, (size_t)n) != n) {
        incoll_error("pidfile %s: cannot write: %s", tmp, log_strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        incoll_error("pidfile %s: cannot rename into place: %s", path,
                     log_strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Adds the fabric's world group with this AN's place in the tree (on
 * every shard: the first acts for all). */
static int add_world_group(agg_daemon_t *d)
{
    const fabric_conf_t *conf = &d->conf;
    const fabric_an_t *an = &conf->ans[d->me];
    agg_group_params_t gp;
    incoll_ep_t *children;
    int n, index = 0;
    incoll_status_t status;

    children = calloc(AGG_RADIX_MAX, sizeof(*children));
    if (children == NULL) {
        incoll_error("group %u: out of memory", conf->group_id);
        return -1;
    }
    static int mykinds[AGG_RADIX_MAX];
    n = fabric_conf_children(conf, d->me, children, mykinds, AGG_RADIX_MAX);
    if (an->parent >= 0) {
        int kinds[AGG_RADIX_MAX];
        int np =
            fabric_conf_children(conf, an->parent, NULL, kinds, AGG_RADIX_MAX);
        index = -1;
        for (int i = 0; i < np && i < AGG_RADIX_MAX; i++)
            if (kinds[i] == d->me)
                index = i;
        if (index < 0) {
            incoll_error("group %u: an %s is not among its parent %s's "
                         "children",
                         conf->group_id, an->name, conf->ans[an->parent].name);
            free(children);
            return -1;
        }
    }
    memset(&gp, 0, sizeof(gp));
    gp.id = conf->group_id;
    /* The members derive the same key (src/host/comm.c). */
    wire_key_derive(d->has_secret ? d->secret : NULL, WIRE_KEY_GROUP,
                    conf->group_id, conf->group_key, &gp.key);
    gp.nchildren = n;
    gp.children = children;
    gp.parent = an->parent >= 0 ? conf->ans[an->parent].addr : INCOLL_EP_NONE;
    gp.index_at_parent = (uint16_t)index;
    gp.slots = conf->slots;
    gp.max_payload = conf->payload;
    /* The world group's hosts under this AN listen on the range's address
     * of the AN's index (src/host/comm.c does the same sum). */
    for (int i = 0; i < n; i++)
        if (mykinds[i] < 0 && d->mcast)
            gp.mcast = udp_mcast_ep((uint32_t)d->me);
    status = agg_group_add(d->shards[0], &gp);
    free(children);
    if (status != INCOLL_OK) {
        incoll_error("group %u: cannot add: %s", conf->group_id,
                     incoll_status_string(status));
        return -1;
    }
    return 0;
}

/* Every shard's lock, in order (worker 0, for what touches them all). */
static void lock_all(agg_daemon_t *d, int except)
{
    for (int i = 0; i < d->nworkers; i++)
        if (i != except)
            pthread_mutex_lock(&d->w[i].lock);
}

static void unlock_all(agg_daemon_t *d, int except)
{
    for (int i = d->nworkers - 1; i >= 0; i--)
        if (i != except)
            pthread_mutex_unlock(&d->w[i].lock);
}

/* The sockets' counters, summed over the workers (with the handoffs). */
static void udp_sum(const agg_daemon_t *d, udp_counters_t *u,
                    uint64_t *handed_p, uint64_t *hdrop_p)
{
    memset(u, 0, sizeof(*u));
    *handed_p = *hdrop_p = 0;
    for (int i = 0; i < d->nworkers; i++) {
        const udp_counters_t *c = udp_counters(d->w[i].sock);
        u->rx_packets += c->rx_packets;
        u->rx_bytes += c->rx_bytes;
        u->rx_reads += c->rx_reads;
        u->rx_retained += c->rx_retained;
        u->tx_packets += c->tx_packets;
        u->tx_bytes += c->tx_bytes;
        u->tx_writes += c->tx_writes;
        u->tx_errors += c->tx_errors;
        u->gso_refused += c->gso_refused;
        u->fault_dropped += c->fault_dropped;
        u->fault_duplicated += c->fault_duplicated;
        u->fault_reordered += c->fault_reordered;
        *handed_p += d->w[i].handed;
        *hdrop_p += d->w[i].handoff_dropped;
    }
}

/* The text of a STATS reply: every shard's counters summed, then the
 * sockets' (how many datagrams each buffer the kernel handed over or
 * took carried: the offloads at work). Called by shard 0's core in
 * worker 0, which holds its own lock. */
static size_t stats_text(void *arg, char *buf, size_t len)
{
    agg_daemon_t *d = arg;
    udp_counters_t u;
    uint64_t handed, hdrop;
    size_t n;
    lock_all(d, 0);
    n = agg_format_counters(d->shards[0], buf, len);
    udp_sum(d, &u, &handed, &hdrop);
    unlock_all(d, 0);
    if (n + 1 < len)
        n += (size_t)snprintf(
            buf + n, len - n,
            " udp_rx_packets=%" PRIu64 " udp_rx_reads=%" PRIu64
            " udp_rx_retained=%" PRIu64 " udp_tx_packets=%" PRIu64
            " udp_tx_writes=%" PRIu64 " udp_tx_errors=%" PRIu64
            " udp_gso_refused=%" PRIu64 " handed=%" PRIu64
            " handoff_dropped=%" PRIu64,
            u.rx_packets, u.rx_reads, u.rx_retained, u.tx_packets, u.tx_writes,
            u.tx_errors, u.gso_refused, handed, hdrop);
    return n < len ? n : len - 1;
}

/* Relay mode: every CONTRIB back to its sender as a RESULT, from where it
 * lies (the flush comes before the next receive). */
static void relay_batch(agg_worker_t *w, int n)
{
    for (int i = 0; i < n; i++) {
        const udp_msg_t *m = &w->msgs[i];
        uint8_t hdr[WIRE_HDR_LEN];
        if (m->len < WIRE_HDR_LEN || m->data[5] != WIRE_CONTRIB)
            continue;
        memcpy(hdr, m->data, WIRE_HDR_LEN);
        hdr[5] = WIRE_RESULT;
        udp_send_ref(w->sock, m->src, hdr, WIRE_HDR_LEN, m->data + WIRE_HDR_LEN,
                     m->len - WIRE_HDR_LEN);
    }
}

/* Hands the datagrams of another shard to its worker; keeps ours in
 * w->pkts. Returns how many are ours. */
static int sort_batch(agg_worker_t *w, int n)
{
    agg_daemon_t *d = w->d;
    int own = 0;
    for (int i = 0; i < n; i++) {
        const udp_msg_t *m = &w->msgs[i];
        int o = agg_shard_of(w->agg, m->data, m->len, d->nworkers);
        if (o == w->idx) {
            w->pkts[own++] = (agg_pkt_t){m->src, m->data, m->len};
            continue;
        }
        if (agg_ring_push(d->w[o].in[w->idx], m->src, m->data, m->len) != 0) {
            w->handoff_dropped++;
            continue;
        }
        w->handed++;
        w->wake[o] = 1;
    }
    return own;
}

/* Wakes the workers this batch handed datagrams to. */
static void wake_owners(agg_worker_t *w)
{
    uint64_t one = 1;
    for (int o = 0; o < w->d->nworkers; o++) {
        if (!w->wake[o])
            continue;
        w->wake[o] = 0;
        if (write(w->d->w[o].evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            incoll_debug("worker %d: cannot wake worker %d: %s", w->idx, o,
                         log_strerror(errno));
    }
}

/* Hands the core a batch of ours; the caller holds the shard's lock. */
static void run_batch(agg_worker_t *w, int n)
{
    if (n <= 0)
        return;
    agg_set_now(w->agg, now_ns());
    agg_on_batch(w->agg, w->pkts, n);
}

/* The datagrams other workers handed us, in batches; a batch's ring space
 * goes back once the core is done with it (it copies what it keeps and
 * sends from its own buffers). */
static void drain_rings(agg_worker_t *w)
{
    agg_daemon_t *d = w->d;
    for (int j = 0; j < d->nworkers; j++) {
        agg_ring_t *r = w->in[j];
        size_t pos;
        int n = 0;
        if (r == NULL)
            continue;
        pos = agg_ring_begin(r);
        for (;;) {
            incoll_ep_t src;
            const uint8_t *buf;
            size_t len;
            int more =
                n < AGG_RX_BATCH && agg_ring_next(r, &pos, &src, &buf, &len);
            if (more) {
                w->pkts[n++] = (agg_pkt_t){src, buf, len};
                continue;
            }
            if (n == 0)
                break;
            pthread_mutex_lock(&w->lock);
            run_batch(w, n);
            udp_flush(w->sock);
            pthread_mutex_unlock(&w->lock);
            agg_ring_release(r, pos);
            n = 0;
        }
    }
}

/* Drains the socket a batch at a time, flushing the replies after each
 * batch (before the next receive reuses the buffers they may point into)
 * so they leave while the next batch is read. The shard's lock covers a
 * batch from its receive to its flush: the sorting reads the shard's
 * group table, which the manager link changes under every lock, and
 * worker 0 reads the socket's counters under it (stats_text). */
static void on_readable(agg_worker_t *w)
{
    int n, rounds = 0;

    do {
        pthread_mutex_lock(&w->lock);
        n = udp_recv_batch(w->sock, w->msgs, AGG_RX_BATCH);
        if (n > 0 && w->d->relay) {
            relay_batch(w, n);
        } else if (n > 0) {
            int own = w->d->nworkers > 1 ? sort_batch(w, n) : n;
            if (w->d->nworkers == 1)
                for (int i = 0; i < n; i++)
                    w->pkts[i] = (agg_pkt_t){w->msgs[i].src, w->msgs[i].data,
                                             w->msgs[i].len};
            run_batch(w, own);
        }
        udp_flush(w->sock);
        pthread_mutex_unlock(&w->lock);
        wake_owners(w);
    } while (n > 0 && ++rounds < AGG_RX_ROUNDS);
}

/* A worker's loop; worker 0 also watches the signals and the manager
 * link. Returns 0 on a clean stop, 1 on a failure of the loop itself. */
static int worker_loop(agg_worker_t *w)
{
    agg_daemon_t *d = w->d;
    for (;;) {
        struct epoll_event ev[4];
        int n = epoll_wait(w->epfd, ev, 4, -1);
        if (__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE))
            return 0;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            incoll_error("event loop: epoll_wait failed: %s",
                         log_strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (w->idx == 0 && fd == d->sigfd) {
                struct signalfd_siginfo si;
                while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
                        incoll_info("stopping on signal %u from pid %u",
                                    si.ssi_signo, si.ssi_pid);
                        return 0;
                    }
                    incoll_debug("ignoring signal %u", si.ssi_signo);
                }
            } else if (w->idx == 0 && d->link &&
                       fd == agg_mgr_link_fd(d->link)) {
                lock_all(d, -1);
                agg_mgr_link_on_event(d->link);
                /* Group commands may have queued packets (none today). */
                udp_flush(w->sock);
                unlock_all(d, -1);
            } else if (fd == w->evfd) {
                uint64_t v;
                if (read(w->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                    incoll_debug("worker %d: eventfd: %s", w->idx,
                                 log_strerror(errno));
            } else {
                on_readable(w);
            }
        }
        drain_rings(w);
    }
}

static void *worker_main(void *arg)
{
    agg_worker_t *w = arg;
    char name[64];
    snprintf(name, sizeof(name), "agg-w%d", w->idx);
    pthread_setname_np(pthread_self(), name);
    (void)worker_loop(w);
    return NULL;
}

static int watch(int epfd, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Opens worker i's socket, core, epoll instance and eventfd. */
static int worker_open(agg_daemon_t *d, int i, uint32_t ip, uint16_t port,
                       const char *name, const char *who)
{
    agg_worker_t *w = &d->w[i];
    char info[192];
    agg_params_t ap;

    w->d = d;
    w->idx = i;
    w->epfd = -1;
    w->evfd = -1;
    pthread_mutex_init(&w->lock, NULL);
    w->msgs = calloc(AGG_RX_BATCH, sizeof(*w->msgs));
    w->pkts = calloc(AGG_RX_BATCH, sizeof(*w->pkts));
    w->in = calloc((size_t)d->nworkers, sizeof(*w->in));
    if (w->msgs == NULL || w->pkts == NULL || w->in == NULL) {
        incoll_error("worker %d: out of memory", i);
        return -1;
    }
    for (int j = 0; j < d->nworkers && d->nworkers > 1; j++) {
        if (j != i && (w->in[j] = agg_ring_create(AGG_RING_BYTES)) == NULL) {
            incoll_error("worker %d: out of memory for its rings", i);
            return -1;
        }
    }
    w->sock = udp_open_flags(ip, port, (int)setting_u64(SETTING_UDP_BUF), who,
                             (d->nworkers > 1 ? UDP_OPEN_REUSEPORT : 0) |
                                 (d->relay ? 0 : UDP_OPEN_RETAIN));
    if (w->sock == NULL)
        return -1;
    if (!d->relay && d->mcast && udp_mcast_sender(w->sock) != 0)
        d->mcast = 0; /* (said why) the hosts' results go by unicast */
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->epfd < 0 || w->evfd < 0 || watch(w->epfd, udp_fd(w->sock)) != 0 ||
        watch(w->epfd, w->evfd) != 0) {
        incoll_error("worker %d: cannot set up its event loop: %s", i,
                     log_strerror(errno));
        return -1;
    }
    if (d->relay)
        return 0;
    snprintf(info, sizeof(info), "mac=%s udp=%s threads=%d",
             wire_mac_alg_name(wire_mac_alg_default()), udp_path(w->sock),
             d->nworkers);
    for (char *c = info; *c; c++)
        if (*c == ' ' && strncmp(c + 1, "recv=", 5) == 0)
            *c = ','; /* one key=value: udp=send=gso,recv=gro */
    memset(&ap, 0, sizeof(ap));
    ap.name = name;
    ap.admin_key = d->conf.admin_key;
    ap.send = agg_send;
    ap.send_ref = agg_send_ref;
    ap.retain = agg_retain;
    ap.release = agg_release;
    ap.send_arg = w->sock;
    ap.stats = stats_text;
    ap.stats_arg = d;
    ap.info = info;
    ap.gen_idle_ns = setting_ns(SETTING_AGG_GEN_IDLE_MS);
    ap.stream_pool_bytes = (size_t)setting_u64(SETTING_AGG_STREAM_POOL);
    ap.lock_idle_ns = setting_ns(SETTING_AGG_LOCK_IDLE_MS);
    ap.mcast_dual_bytes = (uint32_t)setting_u64(SETTING_MCAST_DUAL);
    w->agg = agg_create(&ap);
    if (w->agg == NULL) {
        incoll_error("cannot create the aggregation core: out of memory");
        return -1;
    }
    d->shards[i] = w->agg;
    return 0;
}

static void worker_close(agg_worker_t *w)
{
    if (w->d == NULL)
        return;
    if (w->epfd >= 0)
        close(w->epfd);
    if (w->evfd >= 0)
        close(w->evfd);
    for (int j = 0; w->in && j < w->d->nworkers; j++)
        agg_ring_destroy(w->in[j]);
    free(w->in);
    agg_destroy(w->agg);
    udp_close(w->sock);
    free(w->msgs);
    free(w->pkts);
    pthread_mutex_destroy(&w->lock);
}

static void log_counters(const agg_daemon_t *d)
{
    char text[2048];
    udp_counters_t u;
    uint64_t handed, hdrop;

    udp_sum(d, &u, &handed, &hdrop);
    if (!d->relay) {
        agg_format_counters(d->shards[0], text, sizeof(text));
        incoll_info("counters: %s", text);
    }
    incoll_info(
        "udp: %s rx_packets=%" PRIu64 " rx_reads=%" PRIu64 " rx_bytes=%" PRIu64
        " tx_packets=%" PRIu64 " tx_writes=%" PRIu64 " tx_bytes=%" PRIu64
        " tx_errors=%" PRIu64 " gso_refused=%" PRIu64 " fault_dropped=%" PRIu64
        " fault_duplicated=%" PRIu64 " fault_reordered=%" PRIu64
        " handed=%" PRIu64 " handoff_dropped=%" PRIu64,
        udp_path(d->w[0].sock), u.rx_packets, u.rx_reads, u.rx_bytes,
        u.tx_packets, u.tx_writes, u.tx_bytes, u.tx_errors, u.gso_refused,
        u.fault_dropped, u.fault_duplicated, u.fault_reordered, handed, hdrop);
}

/* What the command line gave. */
typedef struct {
    const char *conf_path, *name, *listen_addr, *mgr_addr, *secret;
    int secret_opt;
    uint32_t ip; /* the udp address: --listen, or the conf's */
    uint16_t port;
} agg_opts_t;

/* The options against each other and the settings; -1 to go on, else
 * the exit code. */
static int check_opts(agg_daemon_t *d, agg_opts_t *o)
{
    const char *why = NULL;
    char err[512];

    if (d->relay && (o->conf_path || o->mgr_addr)) {
        fprintf(stderr, "incoll-agg: --relay serves no groups: give it "
                        "--listen, not --conf or --mgr\n");
        return 2;
    }
    if (o->conf_path && o->listen_addr) {
        fprintf(stderr, "incoll-agg: --listen and --conf both give the udp "
                        "address; use one\n");
        return 2;
    }
    if (o->listen_addr &&
        (mgr_parse_addr(o->listen_addr, &o->ip, &o->port) != INCOLL_OK ||
         o->ip == 0)) {
        fprintf(stderr,
                "incoll-agg: --listen '%s' is not IP:PORT (a local "
                "IPv4 address; port 0 picks one)\n",
                o->listen_addr);
        return 2;
    }
    if (settings_check("agg,fault", err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll-agg: %s\n", err);
        return 2;
    }
    if (setting_in_env(SETTING_MAC) &&
        !wire_mac_alg_available((wire_mac_alg_t)setting_enum(SETTING_MAC),
                                &why)) {
        fprintf(stderr, "incoll-agg: INCOLL_MAC=%s: %s\n",
                setting_text(SETTING_MAC), why);
        return 2;
    }
    d->nworkers = (int)setting_int(SETTING_AGG_THREADS);
    d->mcast = setting_bool(SETTING_MCAST);
    if (o->secret == NULL)
        o->secret = setting_str(SETTING_SECRET_FILE);
    if (o->mgr_addr && (o->secret == NULL || *o->secret == '\0')) {
        fprintf(stderr, "incoll-agg: --mgr needs the fabric secret: --secret "
                        "FILE or INCOLL_SECRET_FILE\n");
        return 2;
    }
    return -1;
}

/* With --conf: the fabric, this AN in it, its address and the world
 * group's secret. 0, or -1 (said) with d->conf to free. */
static int load_conf(agg_daemon_t *d, agg_opts_t *o)
{
    char err[512];

    if (fabric_conf_load(o->conf_path, &d->conf, err, sizeof(err)) !=
        INCOLL_OK) {
        fprintf(stderr, "incoll-agg: %s\n", err);
        return -1;
    }
    d->me = fabric_conf_find_an(&d->conf, o->name);
    if (d->me < 0) {
        fprintf(stderr, "incoll-agg: %s: no an named '%s'\n", o->conf_path,
                o->name);
        return -1;
    }
    o->ip = (uint32_t)(d->conf.ans[d->me].addr >> 16);
    o->port = (uint16_t)(d->conf.ans[d->me].addr & 0xffff);
    /* The world group's mac key comes from the secret when the AN has
     * one: given with --secret, or for the manager with --mgr (the
     * fabric of `incoll fabric up`, whose `incoll run --no-mgr` hands
     * the hosts the same secret). INCOLL_SECRET_FILE alone does not
     * count here, so that a fabric.conf-only fabric's ANs do not take
     * a secret from whoever started them that its hosts lack. */
    if (o->secret && *o->secret && (o->secret_opt || o->mgr_addr)) {
        if (mgr_secret_load(o->secret, d->secret, err, sizeof(err)) !=
            INCOLL_OK) {
            fprintf(stderr, "incoll-agg: %s\n", err);
            return -1;
        }
        d->has_secret = 1;
    } else {
        incoll_info("no fabric secret (--secret): "
                    "group %u's packets are authenticated with a key "
                    "derived from %s alone; anyone who can read it can "
                    "forge them",
                    d->conf.group_id, o->conf_path);
    }
    return 0;
}

/* The options into o and d; returns -1 to go on, else the exit code. */
static int parse_opts(int argc, char **argv, agg_daemon_t *d, agg_opts_t *o)
{
    static const struct option longopts[] = {
        {"conf", required_argument, NULL, 'c'},
        {"name", required_argument, NULL, 'n'},
        {"listen", required_argument, NULL, 'l'},
        {"mgr", required_argument, NULL, 'm'},
        {"secret", required_argument, NULL, 's'},
        {"pidfile", required_argument, NULL, 'p'},
        {"foreground", no_argument, NULL, 'f'},
        {"relay", no_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;

    while ((opt = getopt_long(argc, argv, "c:n:l:m:s:p:frh", longopts, NULL)) !=
           -1) {
        switch (opt) {
        case 'c':
            o->conf_path = optarg;
            break;
        case 'n':
            o->name = optarg;
            break;
        case 'l':
            o->listen_addr = optarg;
            break;
        case 'm':
            o->mgr_addr = optarg;
            break;
        case 's':
            o->secret = optarg;
            o->secret_opt = 1;
            break;
        case 'p':
            d->pidfile = optarg;
            break;
        case 'f':
            break;
        case 'r':
            d->relay = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (o->name == NULL || optind != argc ||
        (o->conf_path == NULL && o->mgr_addr == NULL && !d->relay)) {
        if (o->name != NULL && optind == argc)
            fprintf(stderr, "incoll-agg: need --conf FILE or --mgr HOST:PORT "
                            "(or both)\n");
        usage(stderr);
        return 2;
    }
    return check_opts(d, o);
}

/* What this daemon serves, where, once it runs. */
static void log_start(const agg_daemon_t *d, const agg_opts_t *o)
{
    char ep[32];

    if (d->relay)
        incoll_info("relay %s on %s, %d thread%s, %s", o->name,
                    wire_ep_str(udp_local_ep(d->w[0].sock), ep, sizeof(ep)),
                    d->nworkers, d->nworkers > 1 ? "s" : "",
                    udp_path(d->w[0].sock));
    if (o->conf_path)
        incoll_info("an %s (level %d) serving group %u on %s, parent %s",
                    o->name, d->conf.ans[d->me].level, d->conf.group_id,
                    wire_ep_str(udp_local_ep(d->w[0].sock), ep, sizeof(ep)),
                    d->conf.ans[d->me].parent < 0
                        ? "none (root)"
                        : d->conf.ans[d->conf.ans[d->me].parent].name);
    if (o->mgr_addr)
        incoll_info("an %s on %s: groups from the manager at %s", o->name,
                    wire_ep_str(udp_local_ep(d->w[0].sock), ep, sizeof(ep)),
                    o->mgr_addr);
    incoll_debug(
        "%s %s: %d worker%s, mac %s (%s), %s", d->relay ? "relay" : "an",
        o->name, d->nworkers, d->nworkers > 1 ? "s" : "",
        wire_mac_alg_name(wire_mac_alg_default()),
        wire_mac_alg_impl(wire_mac_alg_default()), udp_path(d->w[0].sock));
}

int main(int argc, char **argv)
{
    static agg_daemon_t d = {.me = -1, .sigfd = -1};
    agg_opts_t o = {.ip = 0x7f000001u};
    const char *conf_path, *name, *mgr_addr, *secret;
    int started = 0;
    char err[512], who[64];
    sigset_t mask;
    uint32_t ip;
    uint16_t port;
    int ret = parse_opts(argc, argv, &d, &o);

    if (ret >= 0)
        return ret;
    ret = 1;
    conf_path = o.conf_path;
    name = o.name;
    mgr_addr = o.mgr_addr;
    secret = o.secret;
    snprintf(who, sizeof(who), "agg %s", name);
    log_set_name(who);
    log_init_from_env();
    fault_init();

    if (conf_path && load_conf(&d, &o) != 0)
        goto out_free_conf;
    ip = o.ip;
    port = o.port;
    if (!d.relay && wire_mac_alg_default() == WIRE_MAC_NONE)
        incoll_warn("INCOLL_MAC=none: data packets are neither authenticated "
                    "nor checked; anyone who can send to this an can change "
                    "results");

    /* Block the signals we take through the signalfd before anything can
     * deliver them; SIGHUP is ignored outright (no config to reload).
     * The workers' threads inherit the mask. */
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0) {
        incoll_error("cannot block signals: %s", log_strerror(errno));
        goto out_free_conf;
    }
    d.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (d.sigfd < 0) {
        incoll_error("cannot create a signalfd: %s", log_strerror(errno));
        goto out_free_conf;
    }

    d.w = calloc((size_t)d.nworkers, sizeof(*d.w));
    if (d.w == NULL) {
        incoll_error("out of memory");
        goto out_close_sigfd;
    }
    for (int i = 0; i < d.nworkers; i++) {
        /* Every worker binds the address the first one got (port 0 picks
         * one for the first). */
        if (worker_open(&d, i, ip, port, name, who) != 0)
            goto out_close_workers;
        port = (uint16_t)(udp_local_ep(d.w[0].sock) & 0xffff);
    }
    for (int i = 0; i < d.nworkers && !d.relay; i++)
        agg_set_peers(d.shards[i], d.shards, d.nworkers);
    if (conf_path && add_world_group(&d) != 0)
        goto out_close_workers;
    if (mgr_addr) {
        agg_mgr_link_params_t lp;
        memset(&lp, 0, sizeof(lp));
        lp.mgr_addr = mgr_addr;
        lp.secret_file = secret;
        lp.name = name;
        lp.ep = udp_local_ep(d.w[0].sock);
        lp.agg = d.shards[0];
        agg_mgr_link_caps_from_env(&lp.caps);
        d.link = agg_mgr_link_create(&lp, err, sizeof(err));
        if (d.link == NULL) {
            incoll_error("manager %s: %s", mgr_addr, err);
            goto out_close_workers;
        }
    }
    if (watch(d.w[0].epfd, d.sigfd) != 0 ||
        (d.link && watch(d.w[0].epfd, agg_mgr_link_fd(d.link)) != 0)) {
        incoll_error("cannot watch the signalfd or the manager link: %s",
                     log_strerror(errno));
        goto out_destroy_link;
    }
    if (d.pidfile && write_pidfile(d.pidfile) != 0)
        goto out_destroy_link;

    log_start(&d, &o);

    for (int i = 1; i < d.nworkers; i++) {
        int rc = pthread_create(&d.w[i].thread, NULL, worker_main, &d.w[i]);
        if (rc != 0) {
            incoll_error("cannot start worker %d: %s", i, log_strerror(rc));
            goto out_stop;
        }
        started = i;
    }
    ret = worker_loop(&d.w[0]);
out_stop:
    __atomic_store_n(&d.stop, 1, __ATOMIC_RELEASE);
    for (int i = 1; i <= started; i++) {
        uint64_t one = 1;
        if (write(d.w[i].evfd, &one, sizeof(one)) < 0)
            incoll_debug("worker %d: eventfd: %s", i, log_strerror(errno));
        pthread_join(d.w[i].thread, NULL);
    }
    for (int i = 0; i < d.nworkers; i++)
        udp_flush(d.w[i].sock);
    log_counters(&d);
    if (d.pidfile)
        unlink(d.pidfile);

out_destroy_link:
    /* The groups stay on no AN once it exits; the manager hears the link
     * close and tears down the groups this AN was part of. */
    agg_mgr_link_destroy(d.link);
out_close_workers:
    for (int i = 0; i < d.nworkers; i++)
        worker_close(&d.w[i]);
    free(d.w);
out_close_sigfd:
    close(d.sigfd);
out_free_conf:
    fabric_conf_free(&d.conf);
    memset(d.secret, 0, sizeof(d.secret));
    return ret;
}
