/*
 * Integration tests: real incoll-agg daemons on 127.0.0.1, brought up by
 * the fabric lifecycle module (test_fabric_up, tests/integ.c; a few tests
 * drive the `incoll fabric` CLI itself), real ranks started with `incoll
 * run`, results checked element by element by tests/progs/allreduce_check,
 * and the daemons' counters read back with `incoll stat` and checked
 * against what the job must have cost. Every test brings its fabric down, also
 * when it fails.
 */
#include "integ.h"

#include "incoll.h"

#include "common/fabric_conf.h"
#include "common/procstat.h"
#include "common/wire.h"
#include "common/wire_mac.h"
#include "common/log.h"
#include "fabric/daemon.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 1 when the binaries these tests drive exist. */
static int have_binaries(char *why, size_t len)
{
    char path[PATH_MAX];
    const char *need[][2] = {{test_bindir(), "incoll"},
                             {test_bindir(), "incoll-agg"},
                             {progdir(), "allreduce_check"}};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", need[i][0], need[i][1]);
        if (access(path, X_OK) != 0) {
            snprintf(why, len, "%s not built", path);
            return 0;
        }
    }
    return 1;
}

/* An allreduce_check job and what it must cost the fabric. */
typedef struct {
    const incoll_dtype_t *dtypes;
    int ndtypes;
    const incoll_op_t *ops;
    int nops;
    const size_t *sizes;
    int nsizes;
    int iters;
    int inplace;
} job_t;

static void job_args(const job_t *j, char *buf, size_t len)
{
    /* --algo inc: the counters below assume every allreduce crosses the
     * ANs, whatever incoll_allreduce would pick by itself. */
    size_t off = (size_t)snprintf(buf, len, "--algo inc --iters %d%s --sizes ",
                                  j->iters, j->inplace ? " --inplace" : "");
    for (int i = 0; i < j->nsizes && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%zu", i ? "," : "",
                                j->sizes[i]);
    off += (size_t)snprintf(buf + off, len - off, " --dtype ");
    for (int i = 0; i < j->ndtypes && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "",
                                incoll_dtype_name(j->dtypes[i]));
    off += (size_t)snprintf(buf + off, len - off, " --op ");
    for (int i = 0; i < j->nops && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "",
                                incoll_op_name(j->ops[i]));
}

/*
 * Segments (one reduction on every AN each) and result bytes of the job
 * with payload bytes per packet: a vector goes in segments of
 * payload / dtype_size elements, and each case is followed by two
 * one-element uint64 allreduces (the cross-rank hash check).
 */
static void job_cost(const job_t *j, uint32_t payload, uint64_t *segs_p,
                     uint64_t *bytes_p, int *ncases_p)
{
    uint64_t segs = 0, bytes = 0;
    int ncases = 0;
    for (int d = 0; d < j->ndtypes; d++) {
        size_t ds = incoll_dtype_size(j->dtypes[d]), per = payload / ds;
        for (int o = 0; o < j->nops; o++) {
            if (!incoll_op_valid(j->ops[o], j->dtypes[d]))
                continue;
            for (int s = 0; s < j->nsizes; s++) {
                ncases++;
                segs += (j->sizes[s] + per - 1) / per + 2;
                bytes += j->sizes[s] * ds + 2 * 8;
            }
        }
    }
    *segs_p = segs * (uint64_t)j->iters;
    *bytes_p = bytes * (uint64_t)j->iters;
    *ncases_p = ncases;
}

/* What run_job also wants of every AN's counters (NULL or 0: nothing):
 * its udp path (incoll stat's udp=), segmented sends and coalesced
 * receives (several datagrams per buffer), its threads, and datagrams
 * handed between them. */
static const char *expect_udp;
static int expect_offload, expect_threads;

/* Checks stat's lines for the ANs of conf against the expectations
 * above; 0, or -1 with the cause printed. */
static int check_datapath(const fabric_conf_t *conf, const char *stat)
{
    uint64_t handed = 0;
    for (int i = 0; i < conf->nans; i++) {
        const char *an = conf->ans[i].name, *line;
        char key[64], want[96];
        uint64_t txp, txw, rxp, rxr, h = 0;
        snprintf(key, sizeof(key), "an=%s ", an);
        line = strstr(stat, key);
        if (line == NULL)
            return -1;
        if (expect_udp) {
            snprintf(want, sizeof(want), " udp=%s ", expect_udp);
            if (strstr(line, want) == NULL ||
                strstr(line, want) > strchr(line, '\n')) {
                fprintf(stderr, "    an %s: not on the path%s:\n%s", an, want,
                        stat);
                return -1;
            }
        }
        if (stat_get(stat, an, "udp_tx_packets", &txp) != 0 ||
            stat_get(stat, an, "udp_tx_writes", &txw) != 0 ||
            stat_get(stat, an, "udp_rx_packets", &rxp) != 0 ||
            stat_get(stat, an, "udp_rx_reads", &rxr) != 0 ||
            stat_get(stat, an, "handed", &h) != 0) {
            fprintf(stderr, "    an %s: no udp counters:\n%s", an, stat);
            return -1;
        }
        if (expect_offload > 0 && (txw >= txp || rxr >= rxp)) {
            fprintf(stderr,
                    "    an %s: offloads on, but %llu datagrams sent in %llu "
                    "buffers, %llu received in %llu\n",
                    an, (unsigned long long)txp, (unsigned long long)txw,
                    (unsigned long long)rxp, (unsigned long long)rxr);
            return -1;
        }
        if (expect_offload < 0 && (txw != txp || rxr != rxp)) {
            fprintf(stderr,
                    "    an %s: offloads off, but %llu datagrams sent in %llu "
                    "buffers, %llu received in %llu\n",
                    an, (unsigned long long)txp, (unsigned long long)txw,
                    (unsigned long long)rxp, (unsigned long long)rxr);
            return -1;
        }
        if (expect_threads) {
            snprintf(want, sizeof(want), " threads=%d ", expect_threads);
            if (strstr(line, want) == NULL) {
                fprintf(stderr, "    an %s: not%s:\n%s", an, want, stat);
                return -1;
            }
        }
        handed += h;
    }
    if (expect_threads > 1 && handed == 0) {
        fprintf(stderr,
                "    %d threads, but no datagram was handed from one "
                "to another:\n%s",
                expect_threads, stat);
        return -1;
    }
    return 0;
}

/* Runs the job on a fresh fabric and checks the results and counters.
 * faults: the counters must show that loss recovery was exercised. */
static int run_job(const char *dir, int hosts, int radix, const job_t *j,
                   int faults, int timeout_s)
{
    char args[1024], want[128], *out = NULL, *stat = NULL;
    uint64_t segs, bytes, recovered = 0;
    fabric_conf_t conf;
    int ncases, rc, ret = TEST_FAILED;
    double t0;

    job_args(j, args, sizeof(args));
    if (load_conf(dir, &conf) != 0)
        return TEST_FAILED;
    job_cost(j, conf.payload, &segs, &bytes, &ncases);
    t0 = now_s();
    rc = run_cmd(&out, timeout_s + 10,
                 "'%s/incoll' run -n %d --fabric '%s' "
                 "--timeout %d -- '%s/allreduce_check' %s",
                 test_bindir(), hosts, dir, timeout_s, progdir(), args);
    fprintf(stderr,
            "    %d ranks, radix %d%s: %d cases, %llu segments in "
            "%.1f s\n",
            hosts, radix, faults ? ", faults" : "", ncases,
            (unsigned long long)segs, now_s() - t0);
    if (rc != 0) {
        fprintf(stderr, "    incoll run exited %d:\n%s", rc, out);
        goto out;
    }
    snprintf(want, sizeof(want), "allreduce_check: %d ranks, %d cases,", hosts,
             ncases);
    if (strstr(out, want) == NULL || strstr(out, ": ok") == NULL) {
        fprintf(stderr, "    no \"%s ... ok\" in the output:\n%s", want, out);
        goto out;
    }
    rc = run_cmd(&stat, 30, "'%s/incoll' stat --fabric '%s'", test_bindir(),
                 dir);
    if (rc != 0) {
        fprintf(stderr, "    incoll stat exited %d:\n%s", rc, stat);
        goto out;
    }
    for (int i = 0; i < conf.nans; i++) {
        const char *an = conf.ans[i].name;
        int nchildren = fabric_conf_children(&conf, i, NULL, NULL, 0);
        uint64_t red, red_bytes, dup = 0, resent = 0;
        if (stat_get(stat, an, "reductions", &red) != 0 ||
            stat_get(stat, an, "bytes_reduced", &red_bytes) != 0 ||
            stat_get(stat, an, "duplicates_dropped", &dup) != 0 ||
            stat_get(stat, an, "results_resent", &resent) != 0) {
            fprintf(stderr, "    no counters for an %s in:\n%s", an, stat);
            goto out;
        }
        /* Each segment is reduced exactly once per AN, however many
         * copies of its contributions arrived. */
        if (red != segs) {
            fprintf(stderr,
                    "    an %s: reductions=%llu, want %llu (one per "
                    "segment)\n%s",
                    an, (unsigned long long)red, (unsigned long long)segs,
                    stat);
            goto out;
        }
        /* bytes_reduced counts either the result bytes or the input bytes
         * (one vector per child) of each reduction. */
        if (red_bytes != bytes && red_bytes != bytes * (uint64_t)nchildren) {
            fprintf(stderr,
                    "    an %s: bytes_reduced=%llu, want %llu or "
                    "%d x that\n%s",
                    an, (unsigned long long)red_bytes,
                    (unsigned long long)bytes, nchildren, stat);
            goto out;
        }
        recovered += dup + resent;
    }
    if (getenv("INCOLL_STREAM_THRESHOLD")) {
        /* Streaming on: some operations locked the tree and streamed. */
        uint64_t granted = 0, streamed = 0;
        for (int i = 0; i < conf.nans; i++) {
            uint64_t g = 0, b = 0;
            if (stat_get(stat, conf.ans[i].name, "locks_granted", &g) != 0 ||
                stat_get(stat, conf.ans[i].name, "stream_bytes", &b) != 0) {
                fprintf(stderr, "    no lock counters in:\n%s", stat);
                goto out;
            }
            granted += g;
            streamed += b;
        }
        fprintf(stderr, "    locks granted %llu, stream bytes %llu\n",
                (unsigned long long)granted, (unsigned long long)streamed);
        if (granted == 0 || streamed == 0) {
            fprintf(stderr, "    streaming on but nothing streamed:\n%s", stat);
            goto out;
        }
    }
    if (faults && recovered == 0) {
        fprintf(stderr,
                "    faults were injected but no AN saw a duplicate "
                "or resent a result:\n%s",
                stat);
        goto out;
    }
    if (check_datapath(&conf, stat) != 0)
        goto out;
    ret = TEST_PASSED;
out:
    free(out);
    free(stat);
    fabric_conf_free(&conf);
    return ret;
}

static int fabric_job_test(int hosts, int radix, const job_t *j, int faults,
                           int timeout_s)
{
    char why[PATH_MAX + 32];
    const char *dir;
    int ret;

    if (!have_binaries(why, sizeof(why)))
        return test_skip("%s", why);
    if (faults) {
        /* Before fabric up, so the daemons inherit them too. */
        setenv("INCOLL_FAULT_DROP", "0.05", 1);
        setenv("INCOLL_FAULT_DUP", "0.02", 1);
        setenv("INCOLL_FAULT_REORDER", "0.05", 1);
    }
    dir = test_tmpdir();
    if (test_fabric_up(dir, hosts, radix) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    ret = run_job(dir, hosts, radix, j, faults, timeout_s);
    test_fabric_down(dir);
    return ret;
}

static const size_t big_sizes[] = {1, 7, 1000, 65536, 1048576};

/* (a) A 2-level tree: 9 ranks under 3 leaves of radix 3, up to 8 MB. */
TEST(integ_fabric_tree9, TEST_INTEG)
{
    static const incoll_dtype_t dts[] = {INCOLL_FLOAT32, INCOLL_INT64,
                                         INCOLL_FLOAT64};
    static const incoll_op_t ops[] = {INCOLL_OP_SUM, INCOLL_OP_MAX};
    job_t j = {dts, 3, ops, 2, big_sizes, 5, 1, 0};
    return fabric_job_test(9, 3, &j, 0, 120);
}

/* (b) 16 ranks, radix 4, in place, more types and ops. */
TEST(integ_fabric_tree16, TEST_INTEG)
{
    static const incoll_dtype_t dts[] = {INCOLL_FLOAT32, INCOLL_INT8,
                                         INCOLL_FLOAT16, INCOLL_UINT64};
    static const incoll_op_t ops[] = {INCOLL_OP_SUM, INCOLL_OP_PROD,
                                      INCOLL_OP_MIN, INCOLL_OP_BXOR};
    static const size_t sizes[] = {1, 7, 1000, 65536, 524288};
    job_t j = {dts, 4, ops, 4, sizes, 5, 1, 1};
    return fabric_job_test(16, 4, &j, 0, 120);
}

/* The largest count the API promises, 2^28 elements (int8: 256 MiB a
 * rank, 32768 segments), in place, through one AN: the counters must show
 * every segment reduced there once. */
TEST(integ_fabric_count_2p28, TEST_INTEG)
{
    static const incoll_dtype_t dts[] = {INCOLL_INT8};
    static const incoll_op_t ops[] = {INCOLL_OP_SUM};
    static const size_t sizes[] = {(size_t)1 << 28};
    job_t j = {dts, 1, ops, 1, sizes, 1, 1, 1};
    return fabric_job_test(2, 2, &j, 0, 120);
}

/* (c) The same trees with loss, duplication and reordering on every
 * socket, hosts and daemons alike. */
static const incoll_dtype_t fault_dts[] = {INCOLL_FLOAT32, INCOLL_INT64};
static const incoll_op_t fault_ops[] = {INCOLL_OP_SUM, INCOLL_OP_MAX};
static const size_t fault_sizes[] = {1, 1000, 100000};

TEST(integ_fabric_tree9_faults, TEST_INTEG)
{
    job_t j = {fault_dts, 2, fault_ops, 2, fault_sizes, 3, 1, 0};
    return fabric_job_test(9, 3, &j, 1, 120);
}

TEST(integ_fabric_tree16_faults, TEST_INTEG)
{
    job_t j = {fault_dts, 2, fault_ops, 2, fault_sizes, 3, 1, 1};
    return fabric_job_test(16, 4, &j, 1, 120);
}

/* (d) Streaming on (docs/streaming.md): allreduces of 4 KiB and more
 * lock the tree for 3 operations and stream, with the same faults; each
 * segment is still reduced exactly once per AN, every result checked. */
TEST(integ_fabric_tree9_stream_faults, TEST_INTEG)
{
    job_t j = {fault_dts, 2, fault_ops, 2, fault_sizes, 3, 1, 0};
    setenv("INCOLL_STREAM_THRESHOLD", "4K", 1);
    setenv("INCOLL_STREAM_LOCK", "3", 1);
    return fabric_job_test(9, 3, &j, 1, 120);
}

/*
 * (e) The kernel's offloads forced on and then off on every host and AN
 * (INCOLL_UDP_GSO, INCOLL_UDP_GRO), with the same loss, duplication and
 * reordering: the same results, each segment reduced once per AN; the ANs
 * say which path they are on, and on the offloaded one they sent and
 * received several datagrams per kernel buffer (a loss among them costs
 * one datagram: the faults drop datagram by datagram as they are queued).
 */
TEST(integ_fabric_udp_paths_faults, TEST_INTEG)
{
    job_t j = {fault_dts, 2, fault_ops, 2, fault_sizes, 3, 1, 0};
    for (int on = 1; on >= 0; on--) {
        int ret;
        setenv("INCOLL_UDP_GSO", on ? "on" : "off", 1);
        setenv("INCOLL_UDP_GRO", on ? "on" : "off", 1);
        expect_udp = on ? "send=gso,recv=gro" : "send=sendmmsg,recv=recvmmsg";
        expect_offload = on ? 1 : -1;
        ret = fabric_job_test(9, 3, &j, 1, 120);
        if (ret != TEST_PASSED) {
            fprintf(stderr, "    with the offloads %s\n", on ? "on" : "off");
            return ret;
        }
    }
    return TEST_PASSED;
}

/*
 * (f) ANs of 2 and 4 threads (INCOLL_AGG_THREADS), each a shard of the
 * slots, with the faults: every segment reduced exactly once per AN
 * (their counters summed over the threads), every result right, and
 * datagrams handed from the thread that read them to their owner.
 */
TEST(integ_fabric_threads_faults, TEST_INTEG)
{
    static const int threads[] = {2, 4};
    job_t j = {fault_dts, 2, fault_ops, 2, fault_sizes, 3, 1, 0};
    for (int k = 0; k < 2; k++) {
        char v[8];
        int ret;
        snprintf(v, sizeof(v), "%d", threads[k]);
        setenv("INCOLL_AGG_THREADS", v, 1);
        expect_threads = threads[k];
        ret = fabric_job_test(9, 3, &j, 1, 120);
        if (ret != TEST_PASSED) {
            fprintf(stderr, "    with %d threads\n", threads[k]);
            return ret;
        }
    }
    return TEST_PASSED;
}

/* (g) The same with streaming: the lock rounds and the stream window on
 * the first thread, the slots on all four. */
TEST(integ_fabric_threads_stream_faults, TEST_INTEG)
{
    job_t j = {fault_dts, 2, fault_ops, 2, fault_sizes, 3, 1, 0};
    setenv("INCOLL_AGG_THREADS", "4", 1);
    setenv("INCOLL_STREAM_THRESHOLD", "4K", 1);
    setenv("INCOLL_STREAM_LOCK", "3", 1);
    expect_threads = 4;
    return fabric_job_test(9, 3, &j, 1, 120);
}

/* Sends one datagram of len bytes to ep. */
static void send_to(int fd, incoll_ep_t ep, const void *buf, size_t len)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl((uint32_t)(ep >> 16)),
        .sin_port = htons((uint16_t)(ep & 0xffff)),
    };
    if (sendto(fd, buf, len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        fprintf(stderr, "    sendto: %s\n", log_strerror(errno));
}

typedef struct {
    uint64_t malformed, unknown_group, bad_mac, version, mac_alg;
} garbage_count_t;

/* 1 when a line of the file at path holds text, 0 when none, -1 when it
 * cannot be read. */
static int file_has_line_with(const char *path, const char *text)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

/*
 * One round of hostile packets to ep: random bytes, a truncated header, a
 * wrong version, a count that does not match the length, an oversized
 * datagram, an unknown group, the right group with a wrong key, and the
 * right key under another mac algorithm than the fabric's.
 */
static void send_garbage(int fd, incoll_ep_t ep, const fabric_conf_t *conf,
                         uint64_t *rng, garbage_count_t *c)
{
    static uint8_t buf[65536];
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_CONTRIB,
                    .op = INCOLL_OP_SUM,
                    .dtype = INCOLL_FLOAT32,
                    .group = conf->group_id,
                    .child = 0,
                    .count = 4,
                    .total = 4};

    /* Random bytes (never starting with the magic). */
    for (size_t i = 0; i < 200; i++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (uint8_t)(*rng >> 56);
    }
    buf[0] ^= (buf[0] == 0x49) ? 1 : 0;
    send_to(fd, ep, buf, 200);
    c->malformed++;

    /* A truncated header. */
    wire_pack(&h, buf);
    send_to(fd, ep, buf, WIRE_HDR_LEN - 5);
    c->malformed++;

    /* A valid header with a wrong version. */
    wire_pack(&h, buf);
    buf[4] = WIRE_VERSION + 1;
    memset(buf + WIRE_HDR_LEN, 0, 16);
    send_to(fd, ep, buf, WIRE_HDR_LEN + 16);
    c->version++;

    /* A count that does not match the payload. */
    h.count = 1000;
    wire_pack(&h, buf);
    send_to(fd, ep, buf, WIRE_HDR_LEN + 16);
    c->malformed++;

    /* An oversized payload (count and length agree, but above the limit). */
    h.count = (WIRE_MAX_PAYLOAD + 200) / 4;
    wire_pack(&h, buf);
    memset(buf + WIRE_HDR_LEN, 0, (size_t)h.count * 4);
    send_to(fd, ep, buf, WIRE_HDR_LEN + (size_t)h.count * 4);
    c->malformed++;

    /* An unknown group. */
    h.count = 4;
    h.group = conf->group_id + 1000;
    wire_pack(&h, buf);
    send_to(fd, ep, buf, WIRE_HDR_LEN + 16);
    c->unknown_group++;

    /* The right group with a mac under a wrong key. */
    h.group = conf->group_id;
    wire_pack(&h, buf);
    {
        wire_key_t wrong;
        wire_key_derive(NULL, WIRE_KEY_GROUP, conf->group_id,
                        conf->group_key ^ 0x5a5a5a5a5a5a5a5aull, &wrong);
        wire_mac_seal(&wrong, buf, buf + WIRE_HDR_LEN, 16);
    }
    send_to(fd, ep, buf, WIRE_HDR_LEN + 16);
    c->bad_mac++;

    /* The right key (fabric.conf's, no secret) under siphash where the
     * fabric uses the default algorithm. */
    wire_pack(&h, buf);
    {
        wire_key_t key;
        wire_key_derive(NULL, WIRE_KEY_GROUP, conf->group_id, conf->group_key,
                        &key);
        wire_key_set_alg(&key, key.alg == WIRE_MAC_SIPHASH ? WIRE_MAC_POLY1305
                                                           : WIRE_MAC_SIPHASH);
        wire_mac_seal(&key, buf, buf + WIRE_HDR_LEN, 16);
    }
    send_to(fd, ep, buf, WIRE_HDR_LEN + 16);
    c->mac_alg++;
}

static int garbage_body(const char *dir)
{
    static const incoll_dtype_t dts[] = {INCOLL_FLOAT32};
    static const incoll_op_t ops[] = {INCOLL_OP_SUM};
    static const size_t sizes[] = {1, 1000, 20000};
    job_t j = {dts, 1, ops, 1, sizes, 3, 1, 0};
    char args[512], *stat = NULL;
    garbage_count_t sent[16] = {{0}};
    fabric_conf_t conf;
    uint64_t rng = 12345;
    proc_t run;
    int fd, rc, rounds = 0, ret = TEST_FAILED;
    double t_end;

    if (load_conf(dir, &conf) != 0)
        return TEST_FAILED;
    CHECK(conf.nans <= 16);
    job_args(&j, args, sizeof(args));
    if (proc_start(&run, 60,
                   "'%s/incoll' run -n %d --fabric '%s' -- "
                   "'%s/allreduce_check' --min-seconds 3 %s",
                   test_bindir(), conf.nhosts, dir, progdir(), args) != 0) {
        fprintf(stderr, "    cannot start incoll run\n");
        goto out_conf;
    }
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "    socket: %s\n", log_strerror(errno));
        proc_wait(&run);
        free(run.out);
        goto out_conf;
    }
    /* Hostile traffic to every AN while the job runs. */
    usleep(300000);
    t_end = now_s() + 2.0;
    while (now_s() < t_end) {
        for (int i = 0; i < conf.nans; i++)
            send_garbage(fd, conf.ans[i].addr, &conf, &rng, &sent[i]);
        rounds++;
        usleep(100000);
    }
    close(fd);
    rc = proc_wait(&run);
    if (rc != 0) {
        fprintf(stderr, "    incoll run exited %d under garbage:\n%s", rc,
                run.out);
        free(run.out);
        goto out_conf;
    }
    if (strstr(run.out, ": ok") == NULL) {
        fprintf(stderr, "    allreduce_check did not report ok:\n%s", run.out);
        free(run.out);
        goto out_conf;
    }
    free(run.out);
    rc = run_cmd(&stat, 30, "'%s/incoll' stat --fabric '%s'", test_bindir(),
                 dir);
    if (rc != 0) {
        fprintf(stderr, "    incoll stat exited %d:\n%s", rc, stat);
        goto out_conf;
    }
    fprintf(stderr, "    %d rounds of 8 hostile packets to each of %d ans\n",
            rounds, conf.nans);
    for (int i = 0; i < conf.nans; i++) {
        const char *an = conf.ans[i].name;
        uint64_t malformed, unknown, bad_mac, version, mac_alg, red;
        char path[PATH_MAX + 64], want[2][160];
        if (stat_get(stat, an, "malformed_dropped", &malformed) != 0 ||
            stat_get(stat, an, "unknown_group", &unknown) != 0 ||
            stat_get(stat, an, "bad_mac", &bad_mac) != 0 ||
            stat_get(stat, an, "version_mismatch", &version) != 0 ||
            stat_get(stat, an, "mac_mismatch", &mac_alg) != 0 ||
            stat_get(stat, an, "reductions", &red) != 0) {
            fprintf(stderr, "    no counters for an %s in:\n%s", an, stat);
            goto out_conf;
        }
        /* Nothing else on the fabric sends such packets: the counts are
         * exactly ours. */
        if (malformed != sent[i].malformed ||
            unknown != sent[i].unknown_group || bad_mac != sent[i].bad_mac ||
            version != sent[i].version || mac_alg != sent[i].mac_alg ||
            red == 0) {
            fprintf(stderr,
                    "    an %s: malformed_dropped=%llu unknown_group="
                    "%llu bad_mac=%llu version_mismatch=%llu "
                    "mac_mismatch=%llu reductions=%llu, want %llu %llu "
                    "%llu %llu %llu >0\n%s",
                    an, (unsigned long long)malformed,
                    (unsigned long long)unknown, (unsigned long long)bad_mac,
                    (unsigned long long)version, (unsigned long long)mac_alg,
                    (unsigned long long)red,
                    (unsigned long long)sent[i].malformed,
                    (unsigned long long)sent[i].unknown_group,
                    (unsigned long long)sent[i].bad_mac,
                    (unsigned long long)sent[i].version,
                    (unsigned long long)sent[i].mac_alg, stat);
            goto out_conf;
        }
        /* The peer of another version and of another algorithm are
         * errors in the AN's log, naming both values. */
        snprintf(path, sizeof(path), "%s/%s.log", dir, an);
        snprintf(want[0], sizeof(want[0]),
                 "speaks wire version %d, this an speaks %d", WIRE_VERSION + 1,
                 WIRE_VERSION);
        snprintf(want[1], sizeof(want[1]),
                 "is authenticated with %s, this an with %s",
                 wire_mac_alg_name(wire_mac_alg_default() == WIRE_MAC_SIPHASH
                                       ? WIRE_MAC_POLY1305
                                       : WIRE_MAC_SIPHASH),
                 wire_mac_alg_name(wire_mac_alg_default()));
        for (int k = 0; k < 2; k++)
            if (file_has_line_with(path, want[k]) != 1) {
                fprintf(stderr, "    %s: no error line with '%s'\n", path,
                        want[k]);
                goto out_conf;
            }
    }
    ret = TEST_PASSED;
out_conf:
    free(stat);
    fabric_conf_free(&conf);
    return ret;
}

/* (d) Hostile packets while a job runs: counted, dropped, harmless. */
TEST(integ_fabric_garbage, TEST_INTEG)
{
    char why[PATH_MAX + 32];
    const char *dir;
    int ret;

    if (!have_binaries(why, sizeof(why)))
        return test_skip("%s", why);
    dir = test_tmpdir();
    if (test_fabric_up(dir, 4, 2) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    ret = garbage_body(dir);
    test_fabric_down(dir);
    return ret;
}

static int two_jobs_body(const char *dir)
{
    static const incoll_dtype_t dts[] = {INCOLL_FLOAT32, INCOLL_INT32};
    static const incoll_op_t ops[] = {INCOLL_OP_SUM};
    static const size_t sizes[] = {1, 7, 1000, 5000};
    job_t j = {dts, 2, ops, 1, sizes, 4, 2, 0};
    char args[512], *out = NULL, *stat = NULL;
    uint64_t segs, bytes;
    fabric_conf_t conf;
    int ncases, rc, ret = TEST_FAILED;

    if (load_conf(dir, &conf) != 0)
        return TEST_FAILED;
    job_args(&j, args, sizeof(args));
    job_cost(&j, conf.payload, &segs, &bytes, &ncases);
    /* Same shapes, other values: if anything of the first job (a result
     * kept in a slot for retransmission) reached the second, the second
     * would see the first one's sums. */
    for (int seed = 1; seed <= 2; seed++) {
        free(out);
        rc = run_cmd(&out, 60,
                     "'%s/incoll' run -n %d --fabric '%s' -- "
                     "'%s/allreduce_check' --seed %d %s",
                     test_bindir(), conf.nhosts, dir, progdir(), seed, args);
        if (rc != 0 || strstr(out, ": ok") == NULL) {
            fprintf(stderr, "    job %d on the same fabric: exit %d:\n%s", seed,
                    rc, out);
            goto out;
        }
    }
    rc = run_cmd(&stat, 30, "'%s/incoll' stat --fabric '%s'", test_bindir(),
                 dir);
    if (rc != 0) {
        fprintf(stderr, "    incoll stat exited %d:\n%s", rc, stat);
        goto out;
    }
    for (int i = 0; i < conf.nans; i++) {
        uint64_t red;
        if (stat_get(stat, conf.ans[i].name, "reductions", &red) != 0 ||
            red != 2 * segs) {
            fprintf(stderr,
                    "    an %s: want reductions=%llu (two jobs of %llu "
                    "segments):\n%s",
                    conf.ans[i].name, (unsigned long long)(2 * segs),
                    (unsigned long long)segs, stat);
            goto out;
        }
    }
    ret = TEST_PASSED;
out:
    free(out);
    free(stat);
    fabric_conf_free(&conf);
    return ret;
}

/* Two jobs, one after the other, on one fabric: the second gets its own
 * results, never the first one's. */
TEST(integ_fabric_two_jobs, TEST_INTEG)
{
    char why[PATH_MAX + 32];
    const char *dir;
    int ret;

    if (!have_binaries(why, sizeof(why)))
        return test_skip("%s", why);
    dir = test_tmpdir();
    if (test_fabric_up(dir, 4, 2) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    ret = two_jobs_body(dir);
    test_fabric_down(dir);
    return ret;
}

static pid_t read_pid(const char *dir, const char *name)
{
    char path[PATH_MAX];
    FILE *f;
    int pid = -1;
    snprintf(path, sizeof(path), "%s/%s.pid", dir, name);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%d", &pid) != 1)
        pid = -1;
    fclose(f);
    return pid;
}

/* Waits until pid is gone (or a zombie nobody reaps), at most ms. */
static int wait_gone(pid_t pid, int ms)
{
    for (int t = 0; t < ms; t += 20) {
        if (!proc_running(pid))
            return 0;
        usleep(20000);
    }
    return -1;
}

static int dead_an_body(const char *dir)
{
    char *out = NULL, *stat = NULL;
    pid_t pid;
    double t0, took;
    int rc, ret = TEST_FAILED;

    /* 4 hosts, radix 2: leaves l0 (ranks 0-1) and l1 (ranks 2-3), root. */
    pid = read_pid(dir, "l1");
    CHECK_MSG(pid > 0, "no pid file for l1 in %s", dir);
    CHECK_EQ_INT(kill(pid, SIGKILL), 0);
    CHECK_EQ_INT(wait_gone(pid, 2000), 0);

    setenv("INCOLL_TIMEOUT_MS", "1000", 1);
    t0 = now_s();
    /* fabric.conf alone (--no-mgr): no manager to route around the dead
     * AN, so the ranks must give up (with a manager they fall back to the
     * host-based algorithms: integ_mgr_an_killed). */
    rc = run_cmd(&out, 30,
                 "'%s/incoll' run -n 4 --no-mgr --fabric '%s' -- "
                 "'%s/allreduce_check' --sizes 1,1000",
                 test_bindir(), dir, progdir());
    took = now_s() - t0;
    unsetenv("INCOLL_TIMEOUT_MS");
    if (rc != 3 ||
        strstr(out, incoll_status_string(INCOLL_ERR_TIMEOUT)) == NULL ||
        strstr(out, "exited with status 3") == NULL) {
        fprintf(stderr,
                "    want exit 3 with \"%s\" and \"exited with "
                "status 3\", got %d:\n%s",
                incoll_status_string(INCOLL_ERR_TIMEOUT), rc, out);
        goto out;
    }
    if (took > 15) {
        fprintf(stderr, "    the timeout took %.1f s (want < 15 s)\n", took);
        goto out;
    }
    fprintf(stderr, "    ranks gave up after %.1f s\n", took);

    /* stat names the missing AN and fails; the others still answer. */
    rc = run_cmd(&stat, 30, "'%s/incoll' stat --fabric '%s' --wait-ms 300",
                 test_bindir(), dir);
    if (rc != 1 || strstr(stat, "an=l1 error=no-answer") == NULL ||
        strstr(stat, "an=l0 packets_in=") == NULL ||
        strstr(stat, "an=root packets_in=") == NULL) {
        fprintf(stderr, "    want exit 1 with l1 missing, got %d:\n%s", rc,
                stat);
        goto out;
    }
    ret = TEST_PASSED;
out:
    free(out);
    free(stat);
    return ret;
}

/* (e) A leaf AN dies: the ranks fail with a timeout, in bounded time. */
TEST(integ_fabric_dead_an, TEST_INTEG)
{
    char why[PATH_MAX + 32];
    const char *dir;
    int ret;

    if (!have_binaries(why, sizeof(why)))
        return test_skip("%s", why);
    dir = test_tmpdir();
    if (test_fabric_up(dir, 4, 2) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    ret = dead_an_body(dir);
    test_fabric_down(dir);
    return ret;
}

static int lifecycle_body(const char *dir)
{
    char *out = NULL;
    pid_t pids[3];
    const char *names[3] = {"l0", "l1", "root"};
    int rc, ret = TEST_FAILED;

    /* A second fabric in the same directory is refused. */
    rc = run_cmd(&out, 30,
                 "'%s/incoll' fabric up --hosts 4 --radix 2 --dir "
                 "'%s'",
                 test_bindir(), dir);
    if (rc != 1 || strstr(out, "already runs a fabric") == NULL) {
        fprintf(stderr, "    second fabric up: want exit 1, got %d:\n%s", rc,
                out);
        goto out;
    }
    free(out);
    out = NULL;

    /* A fabric whose daemons all died is stale: up cleans it and starts. */
    for (int i = 0; i < 3; i++) {
        pids[i] = read_pid(dir, names[i]);
        CHECK_MSG(pids[i] > 0, "no pid file for %s", names[i]);
        kill(pids[i], SIGKILL);
    }
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(wait_gone(pids[i], 2000), 0);
    rc = run_cmd(&out, 30,
                 "'%s/incoll' fabric up --hosts 4 --radix 2 --dir "
                 "'%s'",
                 test_bindir(), dir);
    if (rc != 0 || strstr(out, "stale") == NULL) {
        fprintf(stderr,
                "    fabric up over a stale fabric: want exit 0 and "
                "\"stale\", got %d:\n%s",
                rc, out);
        goto out;
    }
    free(out);
    out = NULL;

    /* incoll run names a failing rank and passes its status on. */
    rc = run_cmd(&out, 30,
                 "'%s/incoll' run -n 4 --fabric '%s' -- sh -c "
                 "'if [ $INCOLL_RANK = 2 ]; then exit 5; fi; "
                 "test $INCOLL_SIZE = 4 && test -f "
                 "\"$INCOLL_FABRIC/fabric.conf\" && sleep 20'",
                 test_bindir(), dir);
    if (rc != 5 || strstr(out, "rank 2 exited with status 5") == NULL) {
        fprintf(stderr,
                "    failing rank: want exit 5 naming rank 2, got "
                "%d:\n%s",
                rc, out);
        goto out;
    }
    free(out);
    out = NULL;

    /* --timeout kills everything and fails with 124. */
    rc = run_cmd(&out, 30,
                 "'%s/incoll' run -n 4 --fabric '%s' --timeout 1 "
                 "-- sleep 20",
                 test_bindir(), dir);
    if (rc != 124 || strstr(out, "timed out") == NULL) {
        fprintf(stderr, "    --timeout: want exit 124, got %d:\n%s", rc, out);
        goto out;
    }
    free(out);
    out = NULL;

    /* Down, then down again: both succeed, and nothing is left. */
    rc = run_cmd(&out, 30, "'%s/incoll' fabric down --dir '%s'", test_bindir(),
                 dir);
    if (rc != 0 || strstr(out, "stopped 3 ans") == NULL) {
        fprintf(stderr, "    fabric down: want \"stopped 3 ans\", got %d:\n%s",
                rc, out);
        goto out;
    }
    free(out);
    out = NULL;
    rc = run_cmd(&out, 30, "'%s/incoll' fabric down --dir '%s'", test_bindir(),
                 dir);
    if (rc != 0 || strstr(out, "nothing was running") == NULL) {
        fprintf(stderr, "    second fabric down: want exit 0, got %d:\n%s", rc,
                out);
        goto out;
    }
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(read_pid(dir, names[i]), -1);
    ret = TEST_PASSED;
out:
    free(out);
    return ret;
}

/* The CLI around a fabric: refusal, stale cleanup, run's failure and
 * timeout handling, idempotent down. */
TEST(integ_fabric_lifecycle, TEST_INTEG)
{
    char why[PATH_MAX + 32];
    const char *dir;
    int ret;

    if (!have_binaries(why, sizeof(why)))
        return test_skip("%s", why);
    dir = test_tmpdir();
    if (test_fabric_up(dir, 4, 2) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    ret = lifecycle_body(dir);
    test_fabric_down(dir);
    return ret;
}

/* ---- forged results from everything on the wire (real daemons) ---- */

#define FORGE_SNIFFS 8 /* sniffed packets of each kind to forge from */

typedef struct {
    int raw;               /* IPPROTO_RAW socket: sends with any source */
    uint64_t results;      /* forged RESULTs sent to hosts */
    uint64_t contribs[16]; /* forged CONTRIBs sent, per AN */
    int nres, ncon;        /* packets sniffed so far */
} forger_t;

static int an_index(const fabric_conf_t *conf, incoll_ep_t ep)
{
    for (int i = 0; i < conf->nans && i < 16; i++)
        if (conf->ans[i].addr == ep)
            return i;
    return -1;
}

/* Sends one UDP datagram from src to dst through the raw socket, as an
 * attacker on the path would (no UDP checksum: allowed over IPv4). */
static void spoof(forger_t *f, incoll_ep_t src, incoll_ep_t dst,
                  const uint8_t *payload, size_t len)
{
    static uint8_t pkt[20 + 8 + 2048];
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl((uint32_t)(dst >> 16))};
    uint32_t s = htonl((uint32_t)(src >> 16)), d = htonl((uint32_t)(dst >> 16));
    uint16_t v;

    if (len > 2048)
        return;
    memset(pkt, 0, 28);
    pkt[0] = 0x45;
    v = htons((uint16_t)(28 + len));
    memcpy(pkt + 2, &v, 2);
    pkt[8] = 64;
    pkt[9] = IPPROTO_UDP;
    memcpy(pkt + 12, &s, 4);
    memcpy(pkt + 16, &d, 4);
    v = htons((uint16_t)(src & 0xffff));
    memcpy(pkt + 20, &v, 2);
    v = htons((uint16_t)(dst & 0xffff));
    memcpy(pkt + 22, &v, 2);
    v = htons((uint16_t)(8 + len));
    memcpy(pkt + 24, &v, 2);
    memcpy(pkt + 28, payload, len);
    if (sendto(f->raw, pkt, 28 + len, 0, (struct sockaddr *)&sa, sizeof(sa)) <
        0)
        fprintf(stderr, "    raw sendto: %s\n", log_strerror(errno));
}

/*
 * Forges from one sniffed data packet: the same header moved to each of
 * the next slots and epochs (where the operations to come will be), with
 * an all-zero payload, once keeping the sniffed tag and once sealed under
 * the tag taken as a key (what v1's clear key field would have given).
 */
static void forge_from(forger_t *f, const fabric_conf_t *conf, incoll_ep_t src,
                       incoll_ep_t dst, const uint8_t *pkt, size_t len)
{
    static uint8_t c[2048];
    wire_hdr_t h;
    uint32_t slots = conf->slots < 16 ? conf->slots : 16;
    int an = an_index(conf, dst);

    if (wire_parse(pkt, len, &h, NULL) != INCOLL_OK || len > sizeof(c))
        return;
    for (uint32_t e = h.epoch; e <= h.epoch + 1; e++) {
        for (uint32_t s = 0; s < slots; s++) {
            for (int way = 0; way < 2; way++) {
                wire_hdr_t q = h;
                q.slot = (uint16_t)s;
                q.epoch = e;
                wire_pack(&q, c);
                memset(c + WIRE_HDR_LEN, 0, len - WIRE_HDR_LEN);
                if (way == 1) {
                    /* Under the algorithm the packet names. */
                    wire_key_t k = {.k0 = h.mac, .k1 = h.mac};
                    wire_key_set_alg(&k, (wire_mac_alg_t)h.mac_alg);
                    wire_mac_seal(&k, c, c + WIRE_HDR_LEN, len - WIRE_HDR_LEN);
                }
                spoof(f, src, dst, c, len);
                if (h.type == WIRE_RESULT)
                    f->results++;
                else if (an >= 0)
                    f->contribs[an]++;
            }
        }
    }
}

/* Reads what the packet socket captured on lo; forges from the first
 * FORGE_SNIFFS results (AN -> host) and contributions (host -> AN). */
static void sniff_and_forge(int ps, forger_t *f, const fabric_conf_t *conf)
{
    static uint8_t buf[70000];
    for (;;) {
        ssize_t n = recv(ps, buf, sizeof(buf), MSG_DONTWAIT);
        size_t ihl;
        incoll_ep_t src, dst;
        uint32_t a;
        uint16_t p;
        wire_hdr_t h;
        if (n < 0)
            return;
        if (n < 28 || (buf[0] >> 4) != 4 || buf[9] != IPPROTO_UDP)
            continue;
        ihl = (size_t)(buf[0] & 15) * 4;
        if ((size_t)n < ihl + 8)
            continue;
        memcpy(&a, buf + 12, 4);
        memcpy(&p, buf + ihl, 2);
        src = wire_ep(ntohl(a), ntohs(p));
        memcpy(&a, buf + 16, 4);
        memcpy(&p, buf + ihl + 2, 2);
        dst = wire_ep(ntohl(a), ntohs(p));
        if (wire_parse(buf + ihl + 8, (size_t)n - ihl - 8, &h, NULL) !=
            INCOLL_OK)
            continue;
        if (h.type == WIRE_RESULT && an_index(conf, src) >= 0 &&
            an_index(conf, dst) < 0 && f->nres < FORGE_SNIFFS) {
            f->nres++;
            forge_from(f, conf, src, dst, buf + ihl + 8, (size_t)n - ihl - 8);
        } else if (h.type == WIRE_CONTRIB && an_index(conf, src) < 0 &&
                   an_index(conf, dst) >= 0 && f->ncon < FORGE_SNIFFS) {
            f->ncon++;
            forge_from(f, conf, src, dst, buf + ihl + 8, (size_t)n - ihl - 8);
        }
    }
}

static int forged_body(const char *dir)
{
    static const incoll_dtype_t dts[] = {INCOLL_INT32};
    static const incoll_op_t ops[] = {INCOLL_OP_SUM};
    static const size_t sizes[] = {1, 300};
    job_t j = {dts, 1, ops, 1, sizes, 2, 1, 0};
    struct sockaddr_ll ll = {.sll_family = AF_PACKET,
                             .sll_protocol = htons(ETH_P_IP)};
    char args[512], *stat = NULL;
    static forger_t f;
    fabric_conf_t conf;
    proc_t run;
    int ps, rc, ret = TEST_FAILED;
    double t_end;

    if (load_conf(dir, &conf) != 0)
        return TEST_FAILED;
    memset(&f, 0, sizeof(f));
    ll.sll_ifindex = (int)if_nametoindex("lo");
    ps = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
    f.raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
    if (ps < 0 || f.raw < 0 ||
        bind(ps, (struct sockaddr *)&ll, sizeof(ll)) != 0) {
        fprintf(stderr, "    packet or raw socket on lo: %s\n",
                log_strerror(errno));
        goto out_close;
    }
    job_args(&j, args, sizeof(args));
    if (proc_start(&run, 60,
                   "'%s/incoll' run -n %d --fabric '%s' -- "
                   "'%s/allreduce_check' --min-seconds 3 %s",
                   test_bindir(), conf.nhosts, dir, progdir(), args) != 0) {
        fprintf(stderr, "    cannot start incoll run\n");
        goto out_close;
    }
    t_end = now_s() + 2.5;
    while (now_s() < t_end) {
        struct pollfd pfd = {.fd = ps, .events = POLLIN};
        if (poll(&pfd, 1, 50) > 0)
            sniff_and_forge(ps, &f, &conf);
    }
    rc = proc_wait(&run);
    if (rc != 0 || strstr(run.out, ": ok") == NULL) {
        fprintf(stderr,
                "    incoll run exited %d with forged packets on the "
                "wire:\n%s",
                rc, run.out);
        free(run.out);
        goto out_close;
    }
    free(run.out);
    fprintf(stderr,
            "    sniffed %d results and %d contributions, forged %llu "
            "results\n",
            f.nres, f.ncon, (unsigned long long)f.results);
    CHECK(f.nres == FORGE_SNIFFS && f.ncon == FORGE_SNIFFS && f.results > 0);
    rc = run_cmd(&stat, 30, "'%s/incoll' stat --fabric '%s'", test_bindir(),
                 dir);
    if (rc != 0) {
        fprintf(stderr, "    incoll stat exited %d:\n%s", rc, stat);
        goto out_close;
    }
    /* Every forged contribution failed its mac at the AN it was sent to. */
    for (int i = 0; i < conf.nans && i < 16; i++) {
        uint64_t bad;
        if (stat_get(stat, conf.ans[i].name, "bad_mac", &bad) != 0 ||
            bad != f.contribs[i]) {
            fprintf(stderr, "    an %s: bad_mac %llu, forged %llu:\n%s",
                    conf.ans[i].name, (unsigned long long)bad,
                    (unsigned long long)f.contribs[i], stat);
            goto out_close;
        }
    }
    ret = TEST_PASSED;
out_close:
    free(stat);
    if (ps >= 0)
        close(ps);
    if (f.raw >= 0)
        close(f.raw);
    fabric_conf_free(&conf);
    return ret;
}

/*
 * (e) An attacker on the path: a packet socket on lo sees every packet of
 * a running job, and forged RESULTs (to the hosts, from their leaf's
 * address) and CONTRIBs (to the ANs, from a host's address) built from
 * them go out through a raw socket, for the slots and epochs the next
 * operations use. The job must get only right answers, and each AN must
 * count every forged contribution in bad_mac.
 */
TEST(integ_fabric_forged_result, TEST_INTEG)
{
    char why[PATH_MAX + 32];
    const char *dir;
    int ret;

    if (!have_binaries(why, sizeof(why)))
        return test_skip("%s", why);
    if (geteuid() != 0)
        return test_skip("not root: sniffing and spoofing need raw sockets");
    dir = test_tmpdir();
    if (test_fabric_up(dir, 4, 2) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    ret = forged_body(dir);
    test_fabric_down(dir);
    return ret;
}

/* ---- --an-cpus: the ANs run where they are told ---- */

/* Checks every AN's pid file in dir names a daemon whose
 * Cpus_allowed_list (/proc/PID/status) is want; how many it checked, or
 * -1. */
static int ans_on_cpus(const char *dir, const char *want)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while (n >= 0 && (e = readdir(d)) != NULL) {
        char path[PATH_MAX + 300], line[256], got[64] = "?";
        size_t len = strlen(e->d_name);
        pid_t pid;
        FILE *f;
        if (len < 5 || strcmp(e->d_name + len - 4, ".pid") != 0 ||
            strcmp(e->d_name, "mgr.pid") == 0 ||
            strcmp(e->d_name, "keep.pid") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        pid = fabric_pidfile_read(path);
        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = pid > 0 ? fopen(path, "r") : NULL;
        while (f && fgets(line, sizeof(line), f))
            if (sscanf(line, "Cpus_allowed_list: %63s", got) == 1)
                break;
        if (f)
            fclose(f);
        if (strcmp(got, want) != 0) {
            fprintf(stderr, "    %s (pid %d): Cpus_allowed_list %s, want %s\n",
                    e->d_name, (int)pid, got, want);
            n = -1;
        } else {
            n++;
        }
    }
    closedir(d);
    return n;
}

TEST(integ_fabric_an_cpus, TEST_INTEG)
{
    char why[PATH_MAX + 32], cpu[16], *out = NULL;
    const char *dir, *modes[] = {"", "--no-mgr"};
    cpu_set_t have;
    int ret = TEST_PASSED, last = -1, rc;

    if (!have_binaries(why, sizeof(why)))
        return test_skip("%s", why);
    if (sched_getaffinity(0, sizeof(have), &have) != 0)
        return TEST_FAILED;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &have))
            last = c;
    snprintf(cpu, sizeof(cpu), "%d", last);
    dir = test_tmpdir();
    /* Through the manager's launch and fabric.conf's own. */
    for (int m = 0; m < 2 && ret == TEST_PASSED; m++) {
        int n;
        rc = run_cmd(&out, 30,
                     "'%s/incoll' fabric up --hosts 4 --radix 2 --dir '%s' "
                     "--an-cpus %s %s",
                     test_bindir(), dir, cpu, modes[m]);
        n = rc == 0 ? ans_on_cpus(dir, cpu) : -1;
        if (rc != 0 || n != 3 || strstr(out, "ANs run on CPUs") == NULL) {
            fprintf(stderr,
                    "    fabric up %s --an-cpus %s: exit %d, %d ANs on it:\n%s",
                    modes[m], cpu, rc, n, out);
            ret = TEST_FAILED;
        }
        free(out);
        out = NULL;
        test_fabric_down(dir);
    }
    /* A bad list is refused before anything starts, saying why. */
    {
        const char *bad[][2] = {{"1-x", "bad CPU list '1-x'"},
                                {"1023", "CPU 1023 is not one"},
                                {"", "bad CPU list ''"}};
        for (size_t i = 0; i < 3 && ret == TEST_PASSED; i++) {
            rc = run_cmd(&out, 10,
                         "'%s/incoll' fabric up --hosts 4 --radix 2 --dir "
                         "'%s' --an-cpus '%s'",
                         test_bindir(), dir, bad[i][0]);
            if (rc != 2 || strstr(out, bad[i][1]) == NULL) {
                fprintf(stderr,
                        "    --an-cpus '%s': want exit 2 and '%s', "
                        "got %d:\n%s",
                        bad[i][0], bad[i][1], rc, out);
                ret = TEST_FAILED;
            }
            free(out);
            out = NULL;
        }
    }
    return ret;
}
