/*
 * `incoll bench agg`: what an aggregation node costs per datagram and per
 * byte, beside a plain UDP relay on the same path: the limit of the
 * kernel's path on this machine. The `agg` record of the simulator's
 * calibration file (docs/simulator.md, "Calibration") comes from it.
 *
 * It brings up a loopback fabric of N hosts under one AN (radix N: the AN
 * is leaf and root at once) and starts a relay (`incoll-agg --relay`: the
 * same daemon, sockets, batches and offloads, which sends every
 * contribution straight back to its sender as a result, with no mac, no
 * reduction and no state). The hosts are host engines in this process,
 * one socket each at the fabric's host addresses, running float32 sum
 * allreduces back to back with the group's whole window of slots in
 * flight; against the AN every result is checked, against the relay a
 * host takes its own data back (its packets carry no tag there: mac
 * none). For each size the two take turns for --rounds rounds of
 * --seconds each, and each daemon's user+sys time (/proc/PID/stat) over
 * its turns is divided by the datagrams it received and sent (the hosts'
 * socket counters: on loopback nothing is lost).
 *
 * With --calib FILE the fit of the AN's cost per datagram against its
 * size, ns = ns_per_packet + ns_per_byte * bytes, from the smallest and
 * the largest size, is appended to FILE (with the relay's), so that
 *   incoll bench kernel --calib F && incoll bench agg --calib F
 * makes a whole calibration file.
 */
#include "bench_common.h"
#include "bench_report.h"
#include "cli.h"

#include "common/clock.h"
#include "common/fabric_conf.h"
#include "common/mgr_auth.h"
#include "common/procstat.h"
#include "common/udp.h"
#include "common/wire_mac.h"
#include "core/host_engine.h"
#include "fabric/daemon.h"
#include "fabric/mgr_fabric.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define AGG_MAX_HOSTS 64
#define AGG_MAX_SIZES 24

static void agg_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    (void)cmd;
    o->hosts = 4;
    o->seconds = 2;
    o->rounds = 3;
    o->threads = 1;
}

static const bench_range_t agg_ranges[] = {
    {BENCH_OPT_HOSTS, 2, AGG_MAX_HOSTS},
    {0, 1, 0},
};

static const bench_optdoc_t agg_docs[] = {
    {BENCH_OPT_HOSTS, "hosts under the one AN"},
    {BENCH_OPT_SIZES, "bytes of the allreduces, doubling (default: 8, 8K "
                      "and 4M)"},
    {BENCH_OPT_SECONDS, "seconds of each daemon's turn at each size"},
    {BENCH_OPT_ROUNDS, "turns of each daemon at each size, alternating"},
    {BENCH_OPT_THREADS, "worker threads of the AN and of the relay"},
    {BENCH_OPT_CALIB, "append the simulator's `agg` record (the AN's cost "
                      "per datagram and per byte) to FILE"},
    {0, NULL},
};

static const bench_cmd_t agg_cmd = {
    .who = "bench agg",
    .synopsis = "bench agg [-n HOSTS] [--sizes MIN:MAX] [--seconds S] "
                "[--rounds N] [--threads N] [--csv FILE] [--calib FILE]",
    .about = "CPU time of an aggregation-node daemon per datagram and per "
             "byte, beside a plain relay (the same daemon sending every "
             "contribution back to its sender unreduced and unchecked) on "
             "the same loopback path, taking turns: HOSTS hosts under one "
             "AN run float32 sum allreduces back to back, every result "
             "checked, and each daemon's user+sys time is divided by the "
             "datagrams and bytes it moved.",
    .accepts = BENCH_OPT(HOSTS) | BENCH_OPT(SIZES) | BENCH_OPT(SECONDS) |
               BENCH_OPT(ROUNDS) | BENCH_OPT(THREADS) | BENCH_OPT(CSV) |
               BENCH_OPT(CALIB) | BENCH_OPT(KEEP) | BENCH_OPT(HELP),
    .defaults = agg_defaults,
    .docs = agg_docs,
    .ranges = agg_ranges,
    .max_size = 64u << 20,
};

/* User + sys time of process pid, in ns, into *ns_p; -1 if it cannot be
 * read. */
static int proc_cpu_ns(pid_t pid, uint64_t *ns_p)
{
    long hz = sysconf(_SC_CLK_TCK);
    proc_stat_t st;

    if (hz <= 0 || proc_stat_read(pid, &st) != 0)
        return -1;
    *ns_p = (uint64_t)(st.utime + st.stime) * (1000000000ull / (uint64_t)hz);
    return 0;
}

enum { T_AN, T_RELAY, T_COUNT };
static const char *const target_name[T_COUNT] = {"an", "relay"};

/* One host: its socket, and an engine per target (the relay's seals
 * nothing and checks nothing). */
typedef struct {
    udp_sock_t *sock;
    host_engine_t *eng[T_COUNT];
    float *send, *recv;
} host_t;

typedef struct {
    int n;
    host_t h[AGG_MAX_HOSTS];
    incoll_ep_t ep[T_COUNT];
    pid_t pid[T_COUNT];
    float *want;
    size_t max_count;
} gen_t;

/* What one turn measured. */
typedef struct {
    uint64_t ops, pkts, bytes, cpu_ns, wall_ns;
} turn_t;

/* A host engine's sends: from its send buffer, which stays unchanged
 * until the operation ends, after the flush that follows every round. */
static void host_send(void *arg, incoll_ep_t dst, const void *hdr,
                      const void *payload, size_t len)
{
    udp_send_ref(arg, dst, hdr, WIRE_HDR_LEN, payload, len);
}

static int gen_open(gen_t *g, const fabric_conf_t *conf, const char *dir,
                    size_t max_bytes)
{
    uint8_t secret[WIRE_SECRET_LEN];
    int has_secret = 0;
    char path[PATH_MAX + 32], err[512];
    wire_key_t key;
    incoll_ep_t kids[AGG_MAX_HOSTS];
    uint32_t gen = (uint32_t)(now_ns() / 1000000) | 1;

    /* The AN keys the world group with the fabric's secret when the
     * fabric has a manager, as its ranks do (docs/security.md). */
    if (mgr_fabric_managed(dir)) {
        snprintf(path, sizeof(path), "%s/secret", dir);
        if (mgr_secret_load(path, secret, err, sizeof(err)) != INCOLL_OK) {
            fprintf(stderr, "incoll bench agg: %s\n", err);
            return -1;
        }
        has_secret = 1;
    }
    wire_key_derive(has_secret ? secret : NULL, WIRE_KEY_GROUP, conf->group_id,
                    conf->group_key, &key);
    memset(secret, 0, sizeof(secret));
    g->max_count = max_bytes / sizeof(float);
    g->want = calloc(g->max_count, sizeof(float));
    if (g->want == NULL)
        return -1;
    /* The AN's children in its order: the hosts, by child index. */
    if (fabric_conf_children(conf, 0, kids, NULL, AGG_MAX_HOSTS) != g->n) {
        fprintf(stderr,
                "incoll bench agg: the an does not have the %d hosts as "
                "children\n",
                g->n);
        return -1;
    }
    for (int i = 0; i < g->n; i++) {
        host_t *h = &g->h[i];
        host_engine_params_t p;
        char who[32];
        snprintf(who, sizeof(who), "bench host %d", i);
        h->sock = udp_open((uint32_t)(kids[i] >> 16),
                           (uint16_t)(kids[i] & 0xffff), 32 << 20, who);
        h->send = malloc(g->max_count * sizeof(float));
        h->recv = malloc(g->max_count * sizeof(float));
        if (h->sock == NULL || h->send == NULL || h->recv == NULL)
            return -1;
        /* Small integers: every sum is exact, in any order. */
        for (size_t e = 0; e < g->max_count; e++) {
            h->send[e] = (float)((int)(e % 1000) + 1000 * i);
            g->want[e] += h->send[e];
        }
        memset(&p, 0, sizeof(p));
        host_engine_params_default(&p);
        p.group = conf->group_id;
        p.gen = gen;
        p.child = (uint16_t)i;
        p.slots = conf->slots;
        p.window = conf->slots; /* the whole window in flight */
        p.max_payload = conf->payload;
        /* Nothing is lost on loopback: a resend would only be the
         * scheduler's delay on these shared cores, and work for the
         * daemon that no target needs. */
        p.rto_init_ns = 50000000;
        p.rto_min_ns = 20000000;
        p.send = host_send;
        p.send_arg = h->sock;
        for (int t = 0; t < T_COUNT; t++) {
            p.key = key;
            if (t == T_RELAY)
                wire_key_set_alg(&p.key, WIRE_MAC_NONE);
            p.an = g->ep[t];
            h->eng[t] = host_engine_create(&p);
            if (h->eng[t] == NULL)
                return -1;
        }
    }
    return 0;
}

static void gen_close(gen_t *g)
{
    for (int i = 0; i < g->n; i++) {
        for (int t = 0; t < T_COUNT; t++)
            host_engine_destroy(g->h[i].eng[t]);
        udp_close(g->h[i].sock);
        free(g->h[i].send);
        free(g->h[i].recv);
    }
    free(g->want);
}

/* Runs one allreduce of count floats on every host against target t.
 * Returns 0, or -1 when an engine failed or (against the AN) a result
 * is wrong. */
static int gen_op(gen_t *g, int t, size_t count)
{
    struct pollfd pfd[AGG_MAX_HOSTS];
    uint64_t now = now_ns();
    int left = g->n;

    for (int i = 0; i < g->n; i++) {
        incoll_status_t st =
            host_engine_start(g->h[i].eng[t], g->h[i].send, g->h[i].recv, count,
                              INCOLL_FLOAT32, INCOLL_OP_SUM, now);
        if (st != INCOLL_INPROGRESS && st != INCOLL_OK) {
            fprintf(stderr, "incoll bench agg: host %d: %s\n", i,
                    incoll_status_string(st));
            return -1;
        }
        udp_flush(g->h[i].sock);
        pfd[i] = (struct pollfd){.fd = udp_fd(g->h[i].sock), .events = POLLIN};
    }
    while (left > 0) {
        uint64_t due = UINT64_MAX;
        int ms;
        for (int i = 0; i < g->n; i++) {
            uint64_t d = host_engine_deadline(g->h[i].eng[t]);
            due = d < due ? d : due;
        }
        now = now_ns();
        ms = due == UINT64_MAX ? 1000
             : due <= now      ? 0
                               : (int)((due - now) / 1000000 + 1);
        if (poll(pfd, (nfds_t)g->n, ms) < 0 && errno != EINTR)
            return -1;
        now = now_ns();
        left = 0;
        for (int i = 0; i < g->n; i++) {
            host_t *h = &g->h[i];
            udp_msg_t m[64];
            int k;
            if (pfd[i].revents & POLLIN)
                while ((k = udp_recv_batch(h->sock, m, 64)) > 0)
                    for (int j = 0; j < k; j++)
                        host_engine_on_packet(h->eng[t], m[j].src, m[j].data,
                                              m[j].len, now);
            host_engine_on_time(h->eng[t], now);
            udp_flush(h->sock);
            left += host_engine_status(h->eng[t]) == INCOLL_INPROGRESS;
        }
        if (bench_interrupted())
            return -1;
    }
    for (int i = 0; i < g->n; i++) {
        incoll_status_t st = host_engine_status(g->h[i].eng[t]);
        if (st != INCOLL_OK) {
            fprintf(stderr, "incoll bench agg: host %d against the %s: %s\n", i,
                    target_name[t], incoll_status_string(st));
            return -1;
        }
        if (t == T_AN &&
            memcmp(g->h[i].recv, g->want, count * sizeof(float)) != 0) {
            fprintf(stderr,
                    "incoll bench agg: host %d: wrong result from the an\n", i);
            return -1;
        }
    }
    return 0;
}

/* The hosts' datagrams and bytes so far: what the target received and
 * sent. */
static void gen_traffic(const gen_t *g, uint64_t *pkts_p, uint64_t *bytes_p)
{
    uint64_t p = 0, b = 0;
    for (int i = 0; i < g->n; i++) {
        const udp_counters_t *c = udp_counters(g->h[i].sock);
        p += c->tx_packets + c->rx_packets;
        b += c->tx_bytes + c->rx_bytes;
    }
    *pkts_p = p;
    *bytes_p = b;
}

/* One turn of target t at count floats for about seconds; adds what it
 * measured to *tn. */
static int gen_turn(gen_t *g, int t, size_t count, double seconds, turn_t *tn)
{
    uint64_t p0, b0, p1, b1, c0, c1, t0 = now_ns(), end;

    /* Two operations first: the AN's slots and the caches warm. */
    for (int w = 0; w < 2; w++)
        if (gen_op(g, t, count) != 0)
            return -1;
    gen_traffic(g, &p0, &b0);
    if (proc_cpu_ns(g->pid[t], &c0) != 0)
        return -1;
    t0 = now_ns();
    end = t0 + (uint64_t)(seconds * 1e9);
    do {
        if (gen_op(g, t, count) != 0)
            return -1;
        tn->ops++;
    } while (now_ns() < end);
    if (proc_cpu_ns(g->pid[t], &c1) != 0)
        return -1;
    gen_traffic(g, &p1, &b1);
    tn->wall_ns += now_ns() - t0;
    tn->cpu_ns += c1 - c0;
    tn->pkts += p1 - p0;
    tn->bytes += b1 - b0;
    return 0;
}

/* A free UDP port on 127.0.0.1 for the relay. */
static uint16_t free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    uint16_t port = 0;
    sa.sin_addr.s_addr = htonl(0x7f000001u);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Starts the relay (the AN's daemon with --relay) on 127.0.0.1:port,
 * its log in work; waits until its pid file is there. */
static pid_t relay_start(const bench_fabric_t *f, uint16_t port)
{
    char bin[PATH_MAX + 16], listen[32], log[1100], pidfile[1100];
    char *argv[] = {bin,    "--name",    "relay", "--relay", "--listen",
                    listen, "--pidfile", pidfile, NULL};
    const char *slash = strrchr(f->self, '/');
    pid_t pid;

    snprintf(bin, sizeof(bin), "%.*s/incoll-agg",
             slash ? (int)(slash - f->self) : 1, slash ? f->self : ".");
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
    snprintf(log, sizeof(log), "%s/relay.log", f->work);
    snprintf(pidfile, sizeof(pidfile), "%s/relay.pid", f->work);
    pid = fabric_spawn(NULL, argv, log, 0);
    if (pid < 0) {
        fprintf(stderr, "incoll bench agg: cannot start %s: %s\n", bin,
                log_strerror(errno));
        return -1;
    }
    for (int i = 0; i < 500; i++) {
        if (fabric_pidfile_read(pidfile) == pid)
            return pid;
        if (waitpid(pid, NULL, WNOHANG) == pid)
            break;
        fabric_sleep_ms(10);
    }
    fprintf(stderr, "incoll bench agg: the relay did not start (see %s)\n",
            log);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void relay_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* The sizes of the run: --sizes, doubling, or 8, 8 KiB and 4 MiB. */
static int sizes_of(const bench_opts_t *o, size_t *sizes)
{
    int n = 0;
    if (!bench_opts_given(o, BENCH_OPT_SIZES)) {
        sizes[0] = 8;
        sizes[1] = 8192;
        sizes[2] = 4u << 20;
        return 3;
    }
    for (size_t b = o->min_size; b <= o->max_size && n < AGG_MAX_SIZES; b *= 2)
        sizes[n++] = b;
    return n;
}

/* Sizes must be whole float32 vectors. Returns 0 or 2 (said why). */
static int check_sizes(const size_t *sizes, int nsizes)
{
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] < 4 || sizes[i] % 4 != 0) {
            fprintf(stderr,
                    "incoll bench agg: sizes are float32 vectors: multiples "
                    "of 4 bytes, not %zu\n",
                    sizes[i]);
            return 2;
        }
    return 0;
}

/* The fabric f is up: reads its configuration into conf, finds its one
 * AN, starts the relay beside it and sets up the hosts of g for vectors
 * of up to max_bytes. Returns 0 or -1 (said why). */
static int setup_targets(bench_fabric_t *f, const bench_opts_t *o,
                         fabric_conf_t *conf, gen_t *g, size_t max_bytes)
{
    char path[PATH_MAX + 128], err[512];
    uint16_t port;

    snprintf(path, sizeof(path), "%s/fabric.conf", f->dir);
    if (fabric_conf_load(path, conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll bench agg: %s\n", err);
        return -1;
    }
    if (conf->nans != 1 || conf->nhosts != o->hosts) {
        fprintf(stderr, "incoll bench agg: want one AN over %d hosts\n",
                o->hosts);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s.pid", f->dir, conf->ans[0].name);
    g->pid[T_AN] = fabric_pidfile_read(path);
    if (g->pid[T_AN] <= 0) {
        fprintf(stderr, "incoll bench agg: no pid in %s\n", path);
        return -1;
    }
    port = free_port();
    g->pid[T_RELAY] = port ? relay_start(f, port) : -1;
    if (g->pid[T_RELAY] < 0)
        return -1;
    g->n = o->hosts;
    g->ep[T_AN] = conf->ans[0].addr;
    g->ep[T_RELAY] = wire_ep(0x7f000001u, port);
    if (gen_open(g, conf, f->dir, max_bytes) != 0) {
        fprintf(stderr, "incoll bench agg: cannot set up the hosts\n");
        return -1;
    }
    return 0;
}

/* The lines above the table, and the CSV's header. */
static void print_head(const bench_opts_t *o, const fabric_conf_t *conf,
                       const gen_t *g, FILE *csv)
{
    printf("# incoll bench agg: an %s over %d hosts and a plain relay (no "
           "mac, no reduction) on the same loopback path, %d thread%s each; "
           "%s mac, %s\n",
           conf->ans[0].name, o->hosts, o->threads, o->threads > 1 ? "s" : "",
           wire_mac_alg_name(wire_mac_alg_default()), udp_path(g->h[0].sock));
    printf("# float32 sum allreduces back to back, window of %u slots; turns "
           "of %.1f s alternating, %d rounds; an results checked\n",
           conf->slots, o->seconds, o->rounds);
    printf("# cpu: the daemon's user+sys; packets, bytes: datagrams it "
           "received and sent; per cpu-s: per second of its cpu\n");
    printf("%9s %-6s %8s %10s %9s %9s %12s %10s %10s\n", "bytes", "daemon",
           "ops", "packets", "cpu(ms)", "ns/pkt", "kpkt/cpu-s", "MB/cpu-s",
           "us/op");
    if (csv)
        fprintf(csv, "bytes,daemon,ops,packets,bytes_moved,cpu_ns,wall_ns,"
                     "ns_per_packet,packets_per_cpu_s,bytes_per_cpu_s\n");
}

/* The rounds of turns at one size (bytes), then its rows. res[t] sums
 * target t's turns. Returns 0 or -1 (said why). */
static int run_size(gen_t *g, const bench_opts_t *o, size_t bytes, turn_t *res,
                    FILE *csv)
{
    size_t count = bytes / sizeof(float);

    for (int r = 0; r < o->rounds; r++)
        for (int k = 0; k < T_COUNT; k++) {
            /* Who goes first alternates from round to round. */
            int t = (k + r) % T_COUNT;
            if (gen_turn(g, t, count, o->seconds, &res[t]) != 0) {
                fprintf(stderr,
                        "incoll bench agg: the %s's turn at %zu bytes "
                        "failed\n",
                        target_name[t], bytes);
                return -1;
            }
        }
    for (int t = 0; t < T_COUNT; t++) {
        const turn_t *tn = &res[t];
        double cpu_s = (double)tn->cpu_ns / 1e9;
        double ns = tn->pkts ? (double)tn->cpu_ns / (double)tn->pkts : 0;
        double pps = cpu_s > 0 ? (double)tn->pkts / cpu_s : 0;
        double bps = cpu_s > 0 ? (double)tn->bytes / cpu_s : 0;
        printf("%9zu %-6s %8" PRIu64 " %10" PRIu64
               " %9.1f %9.1f %12.1f %10.1f %10.1f\n",
               bytes, target_name[t], tn->ops, tn->pkts,
               (double)tn->cpu_ns / 1e6, ns, pps / 1e3, bps / 1e6,
               tn->ops ? (double)tn->wall_ns / 1e3 / (double)tn->ops : 0);
        if (csv)
            fprintf(csv,
                    "%zu,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                    ",%" PRIu64 ",%.1f,%.0f,%.0f\n",
                    bytes, target_name[t], tn->ops, tn->pkts, tn->bytes,
                    tn->cpu_ns, tn->wall_ns, ns, pps, bps);
    }
    fflush(stdout);
    if (res[T_AN].cpu_ns == 0 || res[T_RELAY].cpu_ns == 0) {
        fprintf(stderr,
                "incoll bench agg: a daemon used less than one clock "
                "tick at %zu bytes: run longer --seconds\n",
                bytes);
        return -1;
    }
    return 0;
}

/*
 * Appends the fit of both targets to the calibration file o->calib: ns
 * per datagram = a + b * bytes per datagram, through the smallest (x)
 * and the largest (y) size. Returns 0 or 1 (said why).
 */
static int write_calib(const bench_opts_t *o, const size_t *sizes, int nsizes,
                       turn_t (*res)[T_COUNT])
{
    FILE *cf = fopen(o->calib, "a");
    int bad = cf == NULL;
    double fit[T_COUNT][2];

    for (int t = 0; t < T_COUNT; t++) {
        const turn_t *x = &res[0][t], *y = &res[nsizes - 1][t];
        double bx = (double)x->bytes / (double)x->pkts;
        double by = (double)y->bytes / (double)y->pkts;
        double nx = (double)x->cpu_ns / (double)x->pkts;
        double ny = (double)y->cpu_ns / (double)y->pkts;
        /* A slope only across sizes far enough apart that it is not
         * the noise of two small ones; else the mean cost. */
        double b = by > bx + 1024 ? (ny - nx) / (by - bx) : 0;
        if (b < 0)
            b = 0;
        fit[t][1] = b;
        fit[t][0] = b > 0
                        ? nx - b * bx
                        : (x->cpu_ns + y->cpu_ns) / (double)(x->pkts + y->pkts);
        if (fit[t][0] < 0)
            fit[t][0] = 0;
    }
    if (!bad) {
        bad = fprintf(cf,
                      "# incoll bench agg: %d hosts, %d thread%s, %zu to "
                      "%zu bytes, %s mac; ns per datagram = "
                      "ns_per_packet + ns_per_byte * datagram bytes\n"
                      "agg ns_per_packet=%.1f ns_per_byte=%.5f threads=%d "
                      "relay_ns_per_packet=%.1f relay_ns_per_byte=%.5f\n",
                      o->hosts, o->threads, o->threads > 1 ? "s" : "", sizes[0],
                      sizes[nsizes - 1],
                      wire_mac_alg_name(wire_mac_alg_default()), fit[T_AN][0],
                      fit[T_AN][1], o->threads, fit[T_RELAY][0],
                      fit[T_RELAY][1]) < 0;
        bad |= fclose(cf) != 0;
    }
    if (bad) {
        fprintf(stderr, "incoll bench agg: cannot write %s: %s\n", o->calib,
                log_strerror(errno));
        return 1;
    }
    fprintf(stderr, "incoll bench agg: appended to %s\n", o->calib);
    return 0;
}

int bench_agg_main(int argc, char **argv)
{
    bench_opts_t o;
    bench_fabric_opts_t fo = {.who = "bench agg"};
    bench_fabric_t f;
    fabric_conf_t conf;
    static gen_t g;
    char threads[16];
    size_t sizes[AGG_MAX_SIZES];
    turn_t res[AGG_MAX_SIZES][T_COUNT];
    FILE *csv = NULL;
    int nsizes, rc, ret = 1;

    if (bench_opts_get(&agg_cmd, argc, argv, &o, &rc) != 0)
        return rc;
    nsizes = sizes_of(&o, sizes);
    if (check_sizes(sizes, nsizes) != 0)
        return 2;
    /* The AN's daemon (started by the fabric) and the relay run with the
     * same threads. */
    snprintf(threads, sizeof(threads), "%d", o.threads);
    setenv("INCOLL_AGG_THREADS", threads, 1);
    fo.hosts = o.hosts;
    fo.radix = o.hosts; /* one AN, leaf and root */
    fo.keep = o.keep;
    memset(&conf, 0, sizeof(conf));
    memset(&g, 0, sizeof(g));
    memset(res, 0, sizeof(res));
    if (bench_fabric_open(&f, &fo) != 0)
        return bench_interrupted() ? 130 : 1;
    g.pid[T_RELAY] = -1;
    if (setup_targets(&f, &o, &conf, &g, sizes[nsizes - 1]) != 0)
        goto out;
    if (o.csv && (csv = fopen(o.csv, "w")) == NULL) {
        fprintf(stderr, "incoll bench agg: cannot write %s: %s\n", o.csv,
                log_strerror(errno));
        goto out;
    }
    print_head(&o, &conf, &g, csv);
    for (int s = 0; s < nsizes; s++)
        if (run_size(&g, &o, sizes[s], res[s], csv) != 0)
            goto out;
    /* The targets of docs/benchmarks.md: the AN against the relay. */
    {
        const turn_t *a0 = &res[0][T_AN], *r0 = &res[0][T_RELAY];
        const turn_t *a1 = &res[nsizes - 1][T_AN],
                     *r1 = &res[nsizes - 1][T_RELAY];
        double ns_a = (double)a0->cpu_ns / (double)a0->pkts;
        double ns_r = (double)r0->cpu_ns / (double)r0->pkts;
        double bps_a = (double)a1->bytes / (double)a1->cpu_ns;
        double bps_r = (double)r1->bytes / (double)r1->cpu_ns;
        printf("# an/relay: cpu per datagram at %zu bytes %.2fx; bytes per "
               "cpu-second at %zu bytes %.2fx\n",
               sizes[0], ns_a / ns_r, sizes[nsizes - 1], bps_a / bps_r);
    }
    ret = o.calib ? write_calib(&o, sizes, nsizes, res) : 0;
out:
    if (csv && fclose(csv) != 0) {
        fprintf(stderr, "incoll bench agg: cannot write %s\n", o.csv);
        ret = 1;
    }
    gen_close(&g);
    relay_stop(g.pid[T_RELAY]);
    fabric_conf_free(&conf);
    bench_fabric_close(&f);
    return ret;
}
