/*
 * `incoll bench pingpong`: the reference a reduction's bandwidth is
 * compared with. Two hosts of a fabric bounce a message back and forth
 * over the same transport the collectives use (UDP datagrams of a wire v1
 * header plus up to the group's payload, 8192 bytes by default, from each
 * host's own address) and over the same links (on an emulated fabric: the
 * shaped veths, through the leaf switch, or up to the common ancestor for
 * --pair cross-leaf). Reported as OSU's osu_latency does: latency = half
 * the round trip; bandwidth = bytes / latency, which approaches the link
 * rate for large messages because the message is pipelined packet by
 * packet through every hop.
 *
 * Loss recovery is deliberately simple: when the reply has not fully
 * arrived within the timeout, the pinger sends the whole message again
 * (counted and reported; on a healthy fabric it stays 0), and the ponger
 * answers a repeated request again.
 */
#include "bench_common.h"
#include "bench_report.h"
#include "cli.h"
#include "fabric/emu.h"

#include "common/clock.h"
#include "common/fabric_conf.h"
#include "common/settings.h"
#include "common/udp.h"
#include "common/wire.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PP_GROUP 0x70696e67u /* "ping": never a collective's group */
#define PP_MAX_SIZE (64u << 20)
#define PP_GIVE_UP_NS 30000000000ull

/* Iterations by size: 8 MiB worth of round trips, 5..200. */
static int iters_for(const bench_opts_t *o, size_t bytes)
{
    return bench_iters_for(o, bytes, 8u << 20, 5, 200);
}

static int warmup_for(const bench_opts_t *o, size_t bytes)
{
    return bench_warmup_for(o, iters_for(o, bytes));
}

static void pp_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    (void)cmd;
    o->max_size = 4u << 20;
}

static const bench_range_t pp_ranges[] = {
    {BENCH_OPT_HOSTS, 2, 4096},
    {0, 1, 0},
};

static const bench_optdoc_t pp_docs[] = {
    {BENCH_OPT_HOSTS, "hosts of a fabric brought up"},
    {BENCH_OPT_ITERS, "timed round trips per size (default 8 MiB / size, at "
                      "least 5, at most 200)"},
    {BENCH_OPT_WARMUP, "untimed round trips first (default iters/10)"},
    {0, NULL},
};

static const bench_cmd_t pp_cmd = {
    .who = "bench pingpong",
    .synopsis = "bench pingpong [--fabric DIR | --emulate [--link-rate R]] "
                "[-n HOSTS] [--radix K] [--pair same-leaf|cross-leaf|A,B] "
                "[--sizes MIN:MAX] [--iters N] [--warmup N] [--csv FILE] "
                "[--keep]",
    .about = "Bounces messages between two hosts over UDP with the "
             "collectives' packet size and prints latency (half the round "
             "trip) and bandwidth (bytes / latency) per size: the reference "
             "for allreduce bandwidth.",
    .accepts = BENCH_OPTS_FABRIC | BENCH_OPT(LINK_RATE) | BENCH_OPT(SIZES) |
               BENCH_OPT(ITERS) | BENCH_OPT(WARMUP) | BENCH_OPT(CSV) |
               BENCH_OPT(PAIR) | BENCH_OPT(DRY_RUN) | BENCH_OPT(A) |
               BENCH_OPT(B) | BENCH_OPT(OUT) | BENCH_OPT(PROGRESS),
    .defaults = pp_defaults,
    .docs = pp_docs,
    .ranges = pp_ranges,
    .max_size = PP_MAX_SIZE,
};

/* ---- the rank --------------------------------------------------------- */

typedef struct {
    udp_sock_t *sock;
    incoll_ep_t peer;
    uint32_t payload;
    uint8_t *data; /* PP_MAX_SIZE bytes of message */
    uint8_t *seen; /* a flag per packet */
    uint64_t retrans;
} pp_t;

static uint32_t npackets(const pp_t *pp, size_t size)
{
    return size == 0 ? 1 : (uint32_t)((size + pp->payload - 1) / pp->payload);
}

static void send_msg(pp_t *pp, uint32_t seq, size_t size, int retrans)
{
    uint32_t n = npackets(pp, size);
    for (uint32_t i = 0; i < n; i++) {
        size_t off = (size_t)i * pp->payload;
        size_t len = size - off < pp->payload ? size - off : pp->payload;
        uint8_t hdr[WIRE_HDR_LEN];
        wire_hdr_t h = {
            .version = WIRE_VERSION,
            .type = WIRE_P2P_DATA,
            .group = PP_GROUP,
            .child = WIRE_CHILD_NONE,
            .flags = (uint16_t)((retrans ? WIRE_F_RETRANS : 0) |
                                (i + 1 == n ? WIRE_F_LAST : 0)),
            .epoch = seq,
            .count = (uint32_t)len,
            .total = (uint32_t)size,
            .offset = off,
        };
        wire_pack(&h, hdr);
        udp_send(pp->sock, pp->peer, hdr, WIRE_HDR_LEN, pp->data + off, len);
    }
    udp_flush(pp->sock);
}

static void send_ctl(pp_t *pp, uint16_t flags)
{
    uint8_t hdr[WIRE_HDR_LEN];
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_P2P_ACK,
                    .group = PP_GROUP,
                    .child = WIRE_CHILD_NONE,
                    .flags = flags};
    wire_pack(&h, hdr);
    udp_send(pp->sock, pp->peer, hdr, WIRE_HDR_LEN, NULL, 0);
    udp_flush(pp->sock);
}

/* Waits for readability up to deadline (monotonic ns). */
static void wait_readable(pp_t *pp, uint64_t deadline)
{
    uint64_t now = now_ns();
    struct pollfd pfd = {.fd = udp_fd(pp->sock), .events = POLLIN};
    int ms = deadline > now ? (int)((deadline - now + 999999) / 1000000) : 0;
    poll(&pfd, 1, ms > 1000 ? 1000 : ms);
}

/* A packet of ours: parsed header into h. */
static int our_packet(const pp_t *pp, const udp_msg_t *m, wire_hdr_t *h)
{
    return m->src == pp->peer &&
           wire_parse(m->data, m->len, h, NULL) == INCOLL_OK &&
           h->group == PP_GROUP;
}

/* The pinger's side of one round trip; returns its time in ns or 0. */
static uint64_t round_trip(pp_t *pp, uint32_t seq, size_t size, uint64_t *rto)
{
    uint32_t n = npackets(pp, size), got = 0;
    uint64_t t0 = now_ns(), deadline = t0 + *rto, t1;
    udp_msg_t msgs[64];

    memset(pp->seen, 0, n);
    send_msg(pp, seq, size, 0);
    while (got < n) {
        int k = udp_recv_batch(pp->sock, msgs, 64);
        uint64_t now;
        for (int i = 0; i < k; i++) {
            wire_hdr_t h;
            uint64_t idx;
            if (!our_packet(pp, &msgs[i], &h) || h.type != WIRE_P2P_DATA ||
                h.epoch != seq)
                continue;
            idx = h.offset / pp->payload;
            if (idx < n && !pp->seen[idx]) {
                pp->seen[idx] = 1;
                got++;
            }
        }
        if (got == n)
            break;
        now = now_ns();
        if (now >= deadline) {
            if (now - t0 > PP_GIVE_UP_NS)
                return 0;
            pp->retrans++;
            *rto = *rto * 2 > 2000000000ull ? 2000000000ull : *rto * 2;
            send_msg(pp, seq, size, 1);
            deadline = now + *rto;
            continue;
        }
        if (k <= 0)
            wait_readable(pp, deadline);
    }
    t1 = now_ns();
    /* Next timeout: a few round trips of this size, at least 20 ms. */
    *rto = 4 * (t1 - t0) > 20000000ull ? 4 * (t1 - t0) : 20000000ull;
    return t1 - t0;
}

/* The ponger: answers every complete request until the pinger says done. */
static int ponger(pp_t *pp)
{
    uint32_t cur = 0, got = 0, n = 0;
    size_t size = 0;
    int answered = 0;
    uint64_t last_rx = now_ns();
    udp_msg_t msgs[64];

    for (;;) {
        int k = udp_recv_batch(pp->sock, msgs, 64);
        for (int i = 0; i < k; i++) {
            wire_hdr_t h;
            uint64_t idx;
            if (!our_packet(pp, &msgs[i], &h))
                continue;
            last_rx = now_ns();
            if (h.type == WIRE_P2P_ACK && (h.flags & WIRE_F_LAST)) {
                send_ctl(pp, WIRE_F_LAST);
                return 0;
            }
            if (h.type != WIRE_P2P_DATA || h.total > PP_MAX_SIZE)
                continue;
            if (h.epoch < cur)
                continue; /* a late copy of an earlier request */
            if (h.epoch > cur) {
                cur = h.epoch;
                size = h.total;
                n = npackets(pp, size);
                memset(pp->seen, 0, n);
                got = 0;
                answered = 0;
            }
            idx = h.offset / pp->payload;
            if (idx < n && !pp->seen[idx]) {
                pp->seen[idx] = 1;
                got++;
            } else if (answered && (h.flags & WIRE_F_RETRANS) && idx == 0) {
                pp->retrans++;
                send_msg(pp, cur, size, 1); /* our reply was lost */
            }
            if (got == n && !answered) {
                send_msg(pp, cur, size, 0);
                answered = 1;
            }
        }
        if (k <= 0) {
            if (now_ns() - last_rx > PP_GIVE_UP_NS) {
                fprintf(stderr, "incoll bench pingpong: the pinger went quiet "
                                "for 30 s\n");
                return 1;
            }
            wait_readable(pp, now_ns() + 1000000000ull);
        }
    }
}

/* Publishes our port and learns the peer's when the fabric has none fixed. */
static int exchange_ports(const char *out, int me, int peer, uint16_t port,
                          uint16_t *peer_port)
{
    char path[PATH_MAX + 32], tmp[PATH_MAX + 48];
    uint64_t deadline = now_ns() + 20000000000ull;
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s/pp-%d.port.tmp", out, me);
    snprintf(path, sizeof(path), "%s/pp-%d.port", out, me);
    f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%u\n", (unsigned)port) < 0 || fclose(f) != 0 ||
        rename(tmp, path) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/pp-%d.port", out, peer);
    while (now_ns() < deadline) {
        unsigned p = 0;
        f = fopen(path, "r");
        if (f) {
            int ok = fscanf(f, "%u", &p) == 1 && p > 0 && p < 65536;
            fclose(f);
            if (ok) {
                *peer_port = (uint16_t)p;
                return 0;
            }
        }
        usleep(10000);
    }
    return -1;
}

int bench_pingpong_rank_main(int argc, char **argv)
{
    const char *who = "bench pingpong";
    const char *fabric = setting_str(SETTING_FABRIC),
               *rank_s = setting_str(SETTING_RANK);
    char path[PATH_MAX + 32], err[512];
    fabric_conf_t conf;
    bench_opts_t o;
    pp_t pp;
    int rank, peer, ret = 1, nsizes, rc;
    size_t *sizes = NULL;
    uint64_t rto = 1000000000ull;
    uint16_t my_port, peer_port;
    FILE *out = NULL;

    if (bench_opts_get(&pp_cmd, argc, argv, &o, &rc) != 0 || o.out == NULL ||
        o.a < 0 || o.b < 0 || fabric == NULL || rank_s == NULL) {
        fprintf(stderr,
                "incoll %s: the rank side needs --a, --b, --out and "
                "INCOLL_RANK/INCOLL_FABRIC\n",
                who);
        return 2;
    }
    rank = atoi(rank_s);
    if (rank != o.a && rank != o.b)
        return 0; /* not part of the pair */
    peer = rank == o.a ? o.b : o.a;
    snprintf(path, sizeof(path), "%s/fabric.conf", fabric);
    if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll %s: %s\n", who, err);
        return 1;
    }
    if (rank >= conf.nhosts || peer >= conf.nhosts) {
        fprintf(stderr, "incoll %s: ranks %d,%d: the fabric has %d hosts\n",
                who, o.a, o.b, conf.nhosts);
        fabric_conf_free(&conf);
        return 1;
    }
    memset(&pp, 0, sizeof(pp));
    pp.payload = conf.payload;
    pp.data = malloc(PP_MAX_SIZE);
    pp.seen = calloc(PP_MAX_SIZE / 8 + 1, 1);
    pp.sock = udp_open(conf.hosts[rank].ip, conf.hosts[rank].port, 8 << 20,
                       "pingpong");
    if (pp.data == NULL || pp.seen == NULL || pp.sock == NULL) {
        fprintf(stderr,
                "incoll %s: rank %d: cannot set up (memory or socket)\n", who,
                rank);
        goto out;
    }
    memset(pp.data, 0x5a, PP_MAX_SIZE);
    my_port = (uint16_t)(udp_local_ep(pp.sock) & 0xffff);
    peer_port = conf.hosts[peer].port;
    if (conf.hosts[peer].port == 0 || conf.hosts[rank].port == 0) {
        if (exchange_ports(o.out, rank, peer, my_port, &peer_port) != 0) {
            fprintf(stderr, "incoll %s: rank %d: no port from rank %d\n", who,
                    rank, peer);
            goto out;
        }
    }
    pp.peer = wire_ep(conf.hosts[peer].ip, peer_port);
    if (rank == o.b) {
        ret = ponger(&pp);
        goto out;
    }

    /* The pinger: one line per size into the result file. */
    nsizes = bench_size_list(o.min_size, o.max_size, &sizes);
    snprintf(path, sizeof(path), "%s/pingpong.txt", o.out);
    out = fopen(path, "w");
    if (nsizes <= 0 || out == NULL) {
        fprintf(stderr, "incoll %s: cannot write %s\n", who, path);
        goto out;
    }
    {
        uint32_t seq = 0;
        uint64_t total = 0, done = 0;
        for (int s = 0; s < nsizes; s++)
            total +=
                (uint64_t)(iters_for(&o, sizes[s]) + warmup_for(&o, sizes[s]));
        for (int s = 0; s < nsizes; s++) {
            int iters = iters_for(&o, sizes[s]),
                warm = warmup_for(&o, sizes[s]);
            double sum = 0, mn = INFINITY, mx = 0;
            uint64_t r0 = pp.retrans;
            char sz[32];
            bench_size_str(sizes[s], sz, sizeof(sz));
            for (int it = 0; it < warm + iters; it++) {
                uint64_t t = round_trip(&pp, ++seq, sizes[s], &rto);
                double one_way;
                if (t == 0) {
                    fprintf(stderr,
                            "incoll %s: no reply from rank %d for 30 s "
                            "(%s bytes)\n",
                            who, peer, sz);
                    goto out;
                }
                one_way = (double)t / 2e3;
                if (it >= warm) {
                    sum += one_way;
                    if (one_way < mn)
                        mn = one_way;
                    if (one_way > mx)
                        mx = one_way;
                }
                done++;
                bench_progress_write(
                    o.progress, 0, "[%3d%%] %s bytes, round trip %d/%d",
                    (int)(100 * done / total), sz, it + 1, warm + iters);
            }
            fprintf(out, "%zu %d %.3f %.3f %.3f %" PRIu64 "\n", sizes[s], iters,
                    sum / iters, mn, mx, pp.retrans - r0);
        }
        /* Tell the ponger; it confirms (or we give up after a while). */
        for (int i = 0; i < 20; i++) {
            udp_msg_t msgs[16];
            int k, fin = 0;
            send_ctl(&pp, WIRE_F_LAST);
            wait_readable(&pp, now_ns() + 100000000ull);
            k = udp_recv_batch(pp.sock, msgs, 16);
            for (int j = 0; j < k; j++) {
                wire_hdr_t h;
                if (our_packet(&pp, &msgs[j], &h) && h.type == WIRE_P2P_ACK &&
                    (h.flags & WIRE_F_LAST))
                    fin = 1;
            }
            if (fin)
                break;
        }
    }
    if (fclose(out) != 0) {
        out = NULL;
        goto out;
    }
    out = NULL;
    ret = 0;
out:
    if (out)
        fclose(out);
    if (pp.sock)
        udp_close(pp.sock);
    free(pp.data);
    free(pp.seen);
    free(sizes);
    fabric_conf_free(&conf);
    return ret;
}

/* ---- the driver ------------------------------------------------------- */

/* Picks the pair from the fabric: rank 0 and a host under the same leaf,
 * or under another leaf. */
static int choose_pair(const bench_fabric_t *f, bench_opts_t *o, char *desc,
                       size_t len)
{
    char path[PATH_MAX + 32], err[512];
    fabric_conf_t conf;
    int same = strcmp(o->pair, "same-leaf") == 0;

    snprintf(path, sizeof(path), "%s/fabric.conf", f->dir);
    if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll bench pingpong: %s\n", err);
        return -1;
    }
    if (strcmp(o->pair, "same-leaf") == 0 ||
        strcmp(o->pair, "cross-leaf") == 0) {
        o->a = 0;
        o->b = -1;
        for (int r = 1; r < conf.nhosts && o->b < 0; r++)
            if ((conf.hosts[r].leaf == conf.hosts[0].leaf) == same)
                o->b = r;
        if (o->b < 0) {
            fprintf(stderr,
                    "incoll bench pingpong: the fabric has no host %s "
                    "rank 0's leaf (use -n/--radix or --pair A,B)\n",
                    same ? "under" : "outside");
            fabric_conf_free(&conf);
            return -1;
        }
    }
    if (o->a < 0 || o->b < 0 || o->a >= conf.nhosts || o->b >= conf.nhosts ||
        o->a == o->b) {
        fprintf(stderr,
                "incoll bench pingpong: --pair %d,%d: want two distinct "
                "ranks below %d\n",
                o->a, o->b, conf.nhosts);
        fabric_conf_free(&conf);
        return -1;
    }
    {
        int la = conf.hosts[o->a].leaf, lb = conf.hosts[o->b].leaf, links = 2;
        /* Links crossed: up from a's leaf to the common ancestor and down. */
        for (int x = la, y = lb; x != y;) {
            if (conf.ans[x].level <= conf.ans[y].level) {
                x = conf.ans[x].parent;
                links++;
            } else {
                y = conf.ans[y].parent;
                links++;
            }
            if (x < 0 || y < 0)
                break;
        }
        snprintf(desc, len,
                 "ranks %d and %d (%s leaf: %s and %s; %d links "
                 "each way)",
                 o->a, o->b, la == lb ? "same" : "different", conf.ans[la].name,
                 conf.ans[lb].name, links);
    }
    fabric_conf_free(&conf);
    return 0;
}

int bench_pingpong_main(int argc, char **argv)
{
    const char *who = "bench pingpong";
    bench_fabric_t f;
    bench_opts_t o;
    char desc[256], fdesc[256], rate[32];
    int rc, ret = 1;

    if (bench_opts_get(&pp_cmd, argc, argv, &o, &rc) != 0)
        return rc;
    if (o.dry_run) {
        size_t *sizes;
        int n = bench_size_list(o.min_size, o.max_size, &sizes);
        printf("hosts=%d radix=%d emulate=%d link_rate=%" PRIu64
               " fabric=%s pair=%s csv=%s\n",
               o.hosts, o.radix, o.emulate, o.link_rate,
               o.fabric ? o.fabric : "-", o.pair, o.csv ? o.csv : "-");
        for (int s = 0; s < n; s++)
            printf("size=%zu iters=%d warmup=%d\n", sizes[s],
                   iters_for(&o, sizes[s]), warmup_for(&o, sizes[s]));
        free(sizes);
        return 0;
    }
    if (bench_fabric_start(&f, &o, who) != 0)
        return bench_interrupted() ? 130 : 1;
    if (choose_pair(&f, &o, desc, sizeof(desc)) != 0)
        goto out;
    if (f.emulated)
        snprintf(fdesc, sizeof(fdesc), "emulated links of %s",
                 emu_rate_str(f.link_rate, rate, sizeof(rate)));
    else
        snprintf(fdesc, sizeof(fdesc), "loopback fabric (no link rate)");
    {
        char a[16], b[16], sz[64], lo[24], hi[24], iters[16], warm[16];
        char progress[PATH_MAX + 16];
        char *args[24];
        int n = 0;
        snprintf(a, sizeof(a), "%d", o.a);
        snprintf(b, sizeof(b), "%d", o.b);
        snprintf(sz, sizeof(sz), "%s:%s",
                 bench_size_str(o.min_size, lo, sizeof(lo)),
                 bench_size_str(o.max_size, hi, sizeof(hi)));
        snprintf(iters, sizeof(iters), "%d", o.iters);
        snprintf(warm, sizeof(warm), "%d", o.warmup);
        snprintf(progress, sizeof(progress), "%s/progress", f.work);
        args[n++] = "_pingpong";
        args[n++] = "--a";
        args[n++] = a;
        args[n++] = "--b";
        args[n++] = b;
        args[n++] = "--sizes";
        args[n++] = sz;
        if (o.iters > 0) {
            args[n++] = "--iters";
            args[n++] = iters;
        }
        if (o.warmup >= 0) {
            args[n++] = "--warmup";
            args[n++] = warm;
        }
        args[n++] = "--out";
        args[n++] = f.work;
        args[n++] = "--progress";
        args[n++] = progress;
        args[n] = NULL;
        fprintf(stderr, "incoll %s: %s on %s\n", who, desc, fdesc);
        rc = bench_launch(&f, args, progress, o.timeout_s);
        if (bench_interrupted()) {
            ret = 130;
            goto out;
        }
        if (rc != 0) {
            fprintf(stderr,
                    "incoll %s: the run failed (incoll run exited %d)\n", who,
                    rc);
            goto out;
        }
    }
    {
        char path[PATH_MAX + 32], line[256];
        double link_MBps = (double)f.link_rate / 8e6;
        FILE *in, *csv = NULL;
        snprintf(path, sizeof(path), "%s/pingpong.txt", f.work);
        in = fopen(path, "r");
        if (in == NULL) {
            fprintf(stderr, "incoll %s: no results in %s\n", who, path);
            goto out;
        }
        if (o.csv) {
            csv = bench_csv_open(o.csv, who,
                                 "bytes,iters,avg_us,min_us,max_us,bw_MBps,"
                                 "link_pct,retransmits,a,b,emulated,"
                                 "link_rate_bps");
            if (csv == NULL) {
                fclose(in);
                goto out;
            }
        }
        printf("# incoll bench pingpong: %s, %s\n", desc, fdesc);
        printf("# UDP, %s; latency = round trip / 2 (OSU); MB/s = bytes / "
               "latency\n",
               "the collectives' packet size");
        bench_osu_head(stdout);
        if (f.link_rate)
            printf(" %6s", "link%");
        printf(" %7s\n", "retrans");
        while (fgets(line, sizeof(line), in)) {
            size_t bytes;
            int iters;
            double avg, mn, mx, bw, pct;
            unsigned long long rt;
            if (sscanf(line, "%zu %d %lf %lf %lf %llu", &bytes, &iters, &avg,
                       &mn, &mx, &rt) != 6)
                continue;
            bw = avg > 0 ? (double)bytes / avg : 0;
            pct = link_MBps > 0 ? 100.0 * bw / link_MBps : 0;
            bench_osu_row(stdout, bytes, iters, avg, mn, mx);
            if (f.link_rate)
                printf(" %5.1f%%", pct);
            printf(" %7llu\n", rt);
            if (csv)
                fprintf(csv,
                        "%zu,%d,%.3f,%.3f,%.3f,%.4f,%.2f,%llu,%d,%d,%d,%" PRIu64
                        "\n",
                        bytes, iters, avg, mn, mx, bw, pct, rt, o.a, o.b,
                        f.emulated, f.link_rate);
        }
        fclose(in);
        if (csv && bench_csv_close(csv, o.csv, who) != 0)
            goto out;
    }
    ret = 0;
out:
    bench_fabric_close(&f);
    if (bench_interrupted() && ret == 0)
        ret = 130;
    return ret;
}
