/*
 * Replays across jobs (docs/security.md, "Replays across jobs"): an
 * attacker on the path records one job's packets and sends them again,
 * from their senders' addresses, into the next job on the same fabric,
 * which its launcher started exactly alike (no INCOLL_JOB and no
 * INCOLL_GEN, or the same INCOLL_JOB). Every rank derives a key and
 * generation no earlier job had (host_job_key), so the recorded packets
 * never count: the second job's results must all be right. Before, both
 * jobs ran at generation 0 under the same keys and the replayed results
 * were taken. A packet socket on lo records, a raw socket replays: root
 * only, as integ_fabric_forged_result.
 */
#include "integ.h"

#include "common/wire.h"
#include "fabric/fabric.h"
#include "fabric/mgr_fabric.h"
#include "host/host.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REC_MAX 4096

typedef struct {
    incoll_ep_t src, dst;
    int src_rank; /* host-to-host packets: the sender's rank (child) */
    uint16_t len;
    uint8_t data[1200];
} rec_pkt_t;

typedef struct {
    int ps, raw;
    int n;
    rec_pkt_t *p;
    uint64_t replayed;
    /* Host-to-host packets: each rank's endpoint in the recorded job and
     * in the replayed one (ranks bind ephemeral ports with a manager:
     * the attacker sends from and to the new job's, which it sees). */
    incoll_ep_t ep_a[4], ep_b[4];
} recorder_t;

static int rec_open(recorder_t *r)
{
    struct sockaddr_ll ll = {.sll_family = AF_PACKET,
                             .sll_protocol = htons(ETH_P_IP)};
    memset(r, 0, sizeof(*r));
    r->p = calloc(REC_MAX, sizeof(*r->p));
    ll.sll_ifindex = (int)if_nametoindex("lo");
    r->ps = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
    r->raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
    if (r->p == NULL || r->ps < 0 || r->raw < 0 ||
        bind(r->ps, (struct sockaddr *)&ll, sizeof(ll)) != 0) {
        fprintf(stderr, "    packet or raw socket on lo: %s\n",
                log_strerror(errno));
        return -1;
    }
    return 0;
}

static void rec_close(recorder_t *r)
{
    if (r->ps >= 0)
        close(r->ps);
    if (r->raw >= 0)
        close(r->raw);
    free(r->p);
}

/* Records the data packets of the given types seen on lo (what a tap
 * on the path sees). */
static void rec_take(recorder_t *r, int type_a, int type_b)
{
    static uint8_t buf[70000];
    for (;;) {
        ssize_t n = recv(r->ps, buf, sizeof(buf), MSG_DONTWAIT);
        size_t ihl, len;
        uint32_t a;
        uint16_t p;
        wire_hdr_t h;
        rec_pkt_t *q;
        if (n < 0)
            return;
        if (n < 28 || (buf[0] >> 4) != 4 || buf[9] != IPPROTO_UDP)
            continue;
        ihl = (size_t)(buf[0] & 15) * 4;
        if ((size_t)n < ihl + 8)
            continue;
        len = (size_t)n - ihl - 8;
        if (wire_parse(buf + ihl + 8, len, &h, NULL) != INCOLL_OK ||
            (h.type != type_a && h.type != type_b) || len > 1200 ||
            r->n >= REC_MAX)
            continue;
        q = &r->p[r->n++];
        memcpy(&a, buf + 12, 4);
        memcpy(&p, buf + ihl, 2);
        q->src = wire_ep(ntohl(a), ntohs(p));
        q->src_rank =
            h.type == WIRE_P2P_DATA || h.type == WIRE_P2P_ACK ? h.child : -1;
        if (q->src_rank >= 0 && q->src_rank < 4)
            r->ep_a[q->src_rank] = q->src;
        memcpy(&a, buf + 16, 4);
        memcpy(&p, buf + ihl + 2, 2);
        q->dst = wire_ep(ntohl(a), ntohs(p));
        q->len = (uint16_t)len;
        memcpy(q->data, buf + ihl + 8, len);
    }
}

/* The new job's endpoints, from its own host-to-host packets seen on lo. */
static void rec_learn(recorder_t *r)
{
    static uint8_t buf[70000];
    for (;;) {
        ssize_t n = recv(r->ps, buf, sizeof(buf), MSG_DONTWAIT);
        size_t ihl;
        uint32_t a;
        uint16_t p;
        wire_hdr_t h;
        if (n < 0)
            return;
        if (n < 28 || (buf[0] >> 4) != 4 || buf[9] != IPPROTO_UDP)
            continue;
        ihl = (size_t)(buf[0] & 15) * 4;
        if ((size_t)n < ihl + 8 ||
            wire_parse(buf + ihl + 8, (size_t)n - ihl - 8, &h, NULL) !=
                INCOLL_OK ||
            (h.type != WIRE_P2P_DATA && h.type != WIRE_P2P_ACK) || h.child >= 4)
            continue;
        memcpy(&a, buf + 12, 4);
        memcpy(&p, buf + ihl, 2);
        r->ep_b[h.child] = wire_ep(ntohl(a), ntohs(p));
    }
}

/* Sends every recorded packet again, from its sender's address (the new
 * job's endpoint of the same rank for host-to-host packets). */
static void rec_replay(recorder_t *r)
{
    static uint8_t pkt[28 + 1200];
    rec_learn(r);
    for (int i = 0; i < r->n; i++) {
        const rec_pkt_t *q = &r->p[i];
        incoll_ep_t src = q->src, dst = q->dst;
        struct sockaddr_in sa = {.sin_family = AF_INET};
        uint32_t s, d;
        uint16_t v;
        if (q->src_rank >= 0) {
            int to = -1;
            for (int k = 0; k < 4; k++)
                if (r->ep_a[k] == q->dst)
                    to = k;
            if (to < 0 || r->ep_b[q->src_rank] == 0 || r->ep_b[to] == 0)
                continue;
            src = r->ep_b[q->src_rank];
            dst = r->ep_b[to];
        }
        sa.sin_addr.s_addr = htonl((uint32_t)(dst >> 16));
        s = htonl((uint32_t)(src >> 16));
        d = htonl((uint32_t)(dst >> 16));
        memset(pkt, 0, 28);
        pkt[0] = 0x45;
        v = htons((uint16_t)(28 + q->len));
        memcpy(pkt + 2, &v, 2);
        pkt[8] = 64;
        pkt[9] = IPPROTO_UDP;
        memcpy(pkt + 12, &s, 4);
        memcpy(pkt + 16, &d, 4);
        v = htons((uint16_t)(src & 0xffff));
        memcpy(pkt + 20, &v, 2);
        v = htons((uint16_t)(dst & 0xffff));
        memcpy(pkt + 22, &v, 2);
        v = htons((uint16_t)(8 + q->len));
        memcpy(pkt + 24, &v, 2);
        memcpy(pkt + 28, q->data, q->len);
        if (sendto(r->raw, pkt, 28 + q->len, 0, (struct sockaddr *)&sa,
                   sizeof(sa)) >= 0)
            r->replayed++;
    }
}

/* 1 while process pid runs (not a zombie waiting for proc_wait). */
static int running(pid_t pid)
{
    char path[64], text[512] = "";
    const char *s;
    FILE *f;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fgets(text, sizeof(text), f) == NULL)
        text[0] = '\0';
    fclose(f);
    s = strrchr(text, ')');
    return s != NULL && s[1] == ' ' && s[2] != 'Z' && s[2] != 'X';
}

/* Starts the 4 ranks of a job by hand (no launcher: nothing sets
 * INCOLL_GEN or, unless env does, INCOLL_JOB) with misuse_check args. */
static int job_start(proc_t *p, const char *env, const char *args)
{
    for (int i = 0; i < 4; i++) {
        p[i].out = NULL;
        if (proc_start(&p[i], 120,
                       "env -u INCOLL_GEN -u INCOLL_JOB %s INCOLL_RANK=%d "
                       "INCOLL_SIZE=4 INCOLL_HOST=h%d '%s/misuse_check' "
                       "--case none %s",
                       env, i, i, progdir(), args) != 0)
            return -1;
    }
    return 0;
}

/* Waits for the job's ranks: 0 when every one ran every call right. */
static int job_wait(proc_t *p, const char *what)
{
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        int st = proc_wait(&p[i]);
        if (st != 0 || strstr(p[i].out, "wrong=0 errors=0") == NULL) {
            fprintf(stderr, "    %s rank %d: exit %d:\n%.1500s\n", what, i, st,
                    p[i].out);
            bad++;
        }
        free(p[i].out);
    }
    return bad ? -1 : 0;
}

/* Job A recorded (packets of types a and b), then job B started alike
 * while A's packets are replayed into it. */
static int record_replay(const char *env, const char *args, int type_a,
                         int type_b)
{
    recorder_t r;
    proc_t p[4];
    char args2[256];
    double end;
    int ret = -1;

    if (rec_open(&r) != 0)
        goto out;
    snprintf(args2, sizeof(args2), "%s --seed 1", args);
    if (job_start(p, env, args2) != 0)
        goto out;
    end = now_s() + 60;
    for (int done = 0; !done && now_s() < end;) {
        struct pollfd pfd = {.fd = r.ps, .events = POLLIN};
        if (poll(&pfd, 1, 20) > 0)
            rec_take(&r, type_a, type_b);
        done = 1;
        for (int i = 0; i < 4; i++)
            done &= !running(p[i].pid);
    }
    rec_take(&r, type_a, type_b);
    if (job_wait(p, "job A") != 0 || r.n == 0) {
        fprintf(stderr, "    job A: %d packets recorded\n", r.n);
        goto out;
    }
    snprintf(args2, sizeof(args2), "%s --seed 2", args);
    if (job_start(p, env, args2) != 0)
        goto out;
    end = now_s() + 20;
    for (int done = 0; !done && now_s() < end;) {
        rec_replay(&r);
        done = 1;
        for (int i = 0; i < 4; i++)
            done &= !running(p[i].pid);
    }
    ret = job_wait(p, "job B");
    fprintf(stderr,
            "    %d packets of job A, replayed %llu times into job "
            "B\n",
            r.n, (unsigned long long)r.replayed);
out:
    rec_close(&r);
    return ret;
}

/* Two jobs replayed one into the other on a fabric of 4 hosts: without
 * a manager, fabric.conf's world group in the network (results and
 * contributions replayed); with one, the same INCOLL_JOB in both and the
 * host-based allreduce (its data and acks replayed). */
static int replay_test(int managed)
{
    fabric_spec_t spec;
    char dir[PATH_MAX], env[3 * PATH_MAX], path[PATH_MAX + 32];
    int ret;

    if (geteuid() != 0)
        return test_skip("not root: recording and replaying need raw "
                         "sockets");
    snprintf(path, sizeof(path), "%s/misuse_check", progdir());
    if (access(path, X_OK) != 0)
        return test_skip("%s not built", path);
    snprintf(dir, sizeof(dir), "%s/replay%s", test_tmpdir(),
             managed ? "-mgr" : "");
    fabric_spec_default(&spec);
    spec.dir = dir;
    spec.bindir = test_bindir();
    spec.hosts = 4;
    spec.radix = 2;
    spec.managed = managed;
    spec.host_ports = !managed;
    spec.quiet = 1;
    if (fabric_up(&spec) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    if (managed) {
        char addr[256], secret[PATH_MAX], err[256];
        if (mgr_fabric_env(dir, addr, sizeof(addr), secret, sizeof(secret), err,
                           sizeof(err)) != 0) {
            fprintf(stderr, "    %s\n", err);
            test_fabric_down(dir);
            return TEST_FAILED;
        }
        snprintf(env, sizeof(env),
                 "INCOLL_FABRIC=%s INCOLL_MGR=%s INCOLL_SECRET_FILE=%s "
                 "INCOLL_JOB=same",
                 dir, addr, secret);
        ret = record_replay(env, "--iters 150 --gap-ms 4 --algo rd",
                            WIRE_P2P_DATA, WIRE_P2P_ACK);
    } else {
        snprintf(env, sizeof(env), "INCOLL_FABRIC=%s", dir);
        ret = record_replay(env, "--iters 150 --gap-ms 4", WIRE_RESULT,
                            WIRE_CONTRIB);
    }
    test_fabric_down(dir);
    return ret == 0 ? TEST_PASSED : TEST_FAILED;
}

/* fabric.conf's world group, a launcher that sets nothing: the second job
 * gets the first one's results and contributions replayed. */
TEST(integ_replay_jobs_nomgr, TEST_INTEG)
{
    return replay_test(0);
}

/* With a manager, both jobs under the same INCOLL_JOB: the second job's
 * host-based allreduces get the first one's data and acks replayed, each
 * rank's from and to that rank's new address. Before, the host-based key
 * came from the job id, the same in both jobs. */
TEST(integ_replay_jobs_mgr_hosts, TEST_INTEG)
{
    return replay_test(1);
}

/*
 * Two jobs started exactly alike (the same INCOLL_JOB, the same
 * INCOLL_GEN, or neither) get different generations and keys: what one
 * sent never counts in the other. A world of one rank on a fabric.conf
 * of one host draws them alone (larger worlds agree on them: the tests
 * above).
 */
TEST(job_key_unique, TEST_UNIT)
{
    static const char *const envs[][2] = {
        {NULL, NULL}, {"same", NULL}, {"same", "5"}};
    char conf[PATH_MAX + 32];
    FILE *f;

    snprintf(conf, sizeof(conf), "%s/fabric.conf", test_tmpdir());
    f = fopen(conf, "w");
    CHECK(f != NULL);
    fprintf(f, "fabric hosts=1 radix=2 levels=1 admin_key=0x1\n"
               "an name=l0 level=1 addr=127.0.0.1:9 parent=-\n"
               "host rank=0 leaf=l0 addr=127.0.0.1\n"
               "group id=1 key=0x5b98bc66794275c9 slots=8 payload=8192\n");
    fclose(f);
    setenv("INCOLL_FABRIC", test_tmpdir(), 1);
    setenv("INCOLL_RANK", "0", 1);
    setenv("INCOLL_SIZE", "1", 1);
    unsetenv("INCOLL_MGR");
    unsetenv("INCOLL_SECRET_FILE");
    for (size_t e = 0; e < sizeof(envs) / sizeof(envs[0]); e++) {
        uint32_t gen[2];
        uint64_t key[2];
        if (envs[e][0])
            setenv("INCOLL_JOB", envs[e][0], 1);
        else
            unsetenv("INCOLL_JOB");
        if (envs[e][1])
            setenv("INCOLL_GEN", envs[e][1], 1);
        else
            unsetenv("INCOLL_GEN");
        for (int j = 0; j < 2; j++) {
            incoll_ctx_h ctx;
            CHECK_EQ_INT(incoll_init(&ctx), INCOLL_OK);
            gen[j] = ctx->gen;
            key[j] = ctx->job_key;
            incoll_finalize(ctx);
        }
        CHECK_MSG(gen[0] != gen[1] && key[0] != key[1],
                  "INCOLL_JOB=%s INCOLL_GEN=%s: generations %08x and %08x",
                  envs[e][0] ? envs[e][0] : "(unset)",
                  envs[e][1] ? envs[e][1] : "(unset)", gen[0], gen[1]);
    }
    unsetenv("INCOLL_JOB");
    unsetenv("INCOLL_GEN");
    unsetenv("INCOLL_FABRIC");
    unsetenv("INCOLL_RANK");
    unsetenv("INCOLL_SIZE");
    return TEST_PASSED;
}
