/*
 * Multicast results (docs/multicast.md) on the loopback fabric, real
 * daemons and processes: a leaf AN sends each result once, to its hosts'
 * address (its datagrams per result fall from fan-out + 1 to 2, and back
 * with INCOLL_MCAST=0); multicast copies lost at random are repaired and
 * every result is exact; a fabric that carries none falls back to
 * unicast, each process saying so once; a leaf AN killed while its
 * multicast results are in flight costs no wrong or doubled result and no
 * hang; nothing stays joined after the job.
 */
#include "integ.h"

#include "common/wire.h"
#include "fabric/emu.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MC_RANKS 8
#define MC_RADIX 4

static int mc_have(char *why, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/allreduce_check", progdir());
    if (access(path, X_OK) != 0) {
        snprintf(why, len, "%s not built", path);
        return 0;
    }
    return 1;
}

/* Runs allreduce_check on the fabric of dir with env before it; 0 when
 * every result was right. *out_p (caller frees) holds the output. */
static int mc_job(const char *dir, const char *env, const char *sizes,
                  int iters, char **out_p)
{
    int rc =
        run_cmd(out_p, 90,
                "env %s '%s/incoll' run -n %d --fabric '%s' --timeout 80 "
                "-- '%s/allreduce_check' --sizes %s --iters %d --dtype "
                "int32 --op sum",
                env, test_bindir(), MC_RANKS, dir, progdir(), sizes, iters);
    if (rc != 0 || strstr(*out_p, ": ok") == NULL) {
        fprintf(stderr, "    job (%s) exited %d:\n%s", env, rc, *out_p);
        return -1;
    }
    return 0;
}

/* AN an's counters key1.. of the fabric of dir, in v (n of them). */
static int mc_counters(const char *dir, const char *an, const char *const *keys,
                       uint64_t *v, int n)
{
    char *text = NULL;
    int ret = 0;
    if (run_cmd(&text, 30, "'%s/incoll' stat --fabric '%s'", test_bindir(),
                dir) != 0)
        ret = -1;
    for (int i = 0; i < n && ret == 0; i++)
        if (stat_get(text, an, keys[i], &v[i]) != 0) {
            fprintf(stderr, "    no %s of an %s in:\n%s", keys[i], an, text);
            ret = -1;
        }
    free(text);
    return ret;
}

/* Multicast memberships in 239.b.c/24 (c < 0: 239.b/16) that this
 * machine's interfaces hold (/proc/net/igmp prints the group in memory
 * order: 239.b.c.y as "yyccbbEF"). */
static int mc_memberships_in(int b, int c)
{
    FILE *f = fopen("/proc/net/igmp", "r");
    char line[256], want[8];
    int n = 0;
    if (f == NULL)
        return 0;
    snprintf(want, sizeof(want), "%02X%02X", b, 0xef);
    while (fgets(line, sizeof(line), f)) {
        char grp[16], cc[3];
        if (sscanf(line, " %8s", grp) != 1 || strlen(grp) != 8 ||
            strcmp(grp + 4, want) != 0)
            continue;
        snprintf(cc, sizeof(cc), "%02X", c);
        n += c < 0 || strncmp(grp + 2, cc, 2) == 0;
    }
    fclose(f);
    return n;
}

/* Makes this test's fabric and jobs use addresses of their own,
 * 239.195.c.0/24 (returns c), so that what other jobs of the machine hold
 * does not count in mc_memberships_in. */
static int mc_private_range(void)
{
    char range[64];
    int c = (int)(getpid() % 256);
    snprintf(range, sizeof(range), "239.195.%d.0/24", c);
    setenv("INCOLL_MCAST_RANGE", range, 1);
    return c;
}

/* Occurrences of needle in text. */
static int mc_count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static const char *const mc_keys[] = {
    "packets_out", "results_sent",   "mcast_sent", "mcast_repairs",
    "reforwards",  "results_resent", "waits"};
#define MC_NKEYS 7

/* A leaf's datagrams out between two readings, less what recovery sent
 * (a loaded machine resends; this counts the first sends). */
static uint64_t mc_first_sends(const uint64_t *from, const uint64_t *to)
{
    uint64_t out = to[0] - from[0];
    for (int i = 3; i < MC_NKEYS; i++)
        out -= to[i] - from[i];
    return out;
}

/* One send per result from a leaf with multicast, fan-out + 1 without;
 * the same exact results either way; no membership left behind. */
TEST(integ_mcast_fabric, TEST_INTEG)
{
    char why[PATH_MAX + 32], *out = NULL;
    const char *dir = test_tmpdir();
    uint64_t a[MC_NKEYS], b[MC_NKEYS], c[MC_NKEYS];
    int ret = TEST_FAILED, rc3;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    rc3 = mc_private_range();
    if (test_fabric_up(dir, MC_RANKS, MC_RADIX) != 0)
        goto out;
    if (mc_counters(dir, "l0", mc_keys, a, MC_NKEYS) != 0 ||
        mc_job(dir, "INCOLL_MCAST=1", "1,1000", 100, &out) != 0 ||
        mc_counters(dir, "l0", mc_keys, b, MC_NKEYS) != 0)
        goto out;
    free(out);
    out = NULL;
    if (mc_job(dir, "INCOLL_MCAST=0", "1,1000", 100, &out) != 0 ||
        mc_counters(dir, "l0", mc_keys, c, MC_NKEYS) != 0)
        goto out;
    fprintf(
        stderr,
        "    leaf l0: with multicast %llu datagrams for %llu results "
        "(%llu multicast), without %llu for %llu\n",
        (unsigned long long)(b[0] - a[0]), (unsigned long long)(b[1] - a[1]),
        (unsigned long long)(b[2] - a[2]), (unsigned long long)(c[0] - b[0]),
        (unsigned long long)(c[1] - b[1]));
    CHECK_OR(out, b[1] - a[1] >= 200 && c[1] - b[1] >= 200);
    /* Each result: one aggregate up, one multicast down (what recovery
     * resends on a loaded machine not counted; the job's set-up and the
     * replies to incoll stat add about a tenth). */
    CHECK_MSG_OR(out, (b[2] - a[2]) == (b[1] - a[1]), "%lld != %lld",
                 (long long)(b[2] - a[2]), (long long)(b[1] - a[1]));
    CHECK_MSG_OR(out, mc_first_sends(a, b) <= 5 * (b[1] - a[1]) / 2,
                 "%llu first sends for %llu results",
                 (unsigned long long)mc_first_sends(a, b),
                 (unsigned long long)(b[1] - a[1]));
    /* Without: one up, one to each of the 4 hosts. */
    CHECK_MSG_OR(out, (c[2] - b[2]) == (0), "%lld != %lld",
                 (long long)(c[2] - b[2]), (long long)(0));
    CHECK_OR(out, c[0] - b[0] >= 5 * (c[1] - b[1]));
    CHECK_MSG_OR(out, (mc_memberships_in(195, rc3)) == (0), "%lld != %lld",
                 (long long)(mc_memberships_in(195, rc3)), (long long)(0));
    ret = TEST_PASSED;
out:
    free(out);
    test_fabric_down(dir);
    return ret;
}

/* A third of the multicast copies lost: the members that miss one get it
 * by unicast (large results too, segment by segment), all exact. */
TEST(integ_mcast_loss, TEST_INTEG)
{
    char why[PATH_MAX + 32], *out = NULL;
    const char *dir = test_tmpdir();
    uint64_t v[4];
    int ret = TEST_FAILED;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    setenv("INCOLL_AGG_FAULT_MCAST_DROP", "0.3", 1);
    if (test_fabric_up(dir, MC_RANKS, MC_RADIX) != 0)
        goto out;
    if (mc_job(dir, "INCOLL_MCAST=1", "1,100000", 10, &out) != 0 ||
        mc_counters(dir, "l1", mc_keys, v, 4) != 0)
        goto out;
    CHECK_OR(out, v[2] > 0);
    CHECK_OR(out, v[3] > 0);
    free(out);
    out = NULL;
    /* Broadcasts, small and large (160 KB: many segments), from rotating
     * roots: their data by multicast too, the lost copies repaired. */
    {
        uint64_t w[4];
        int rc = run_cmd(&out, 90,
                         "env INCOLL_MCAST=1 '%s/incoll' run -n %d --fabric "
                         "'%s' --timeout 80 -- '%s/recover_check' --coll "
                         "bcast --iters 6 --count 20000",
                         test_bindir(), MC_RANKS, dir, progdir());
        CHECK_MSG_OR(out,
                     rc == 0 &&
                         mc_count(out, "summary ok=6 wrong=0 errors=0") ==
                             MC_RANKS,
                     "exit %d:\n%s", rc, out);
        CHECK_OR(out, mc_counters(dir, "l1", mc_keys, w, 4) == 0);
        CHECK_MSG_OR(
            out, w[2] - v[2] >= 6 * 20 && w[3] > v[3],
            "l1 sent %llu broadcast results by multicast, repaired %llu",
            (unsigned long long)(w[2] - v[2]),
            (unsigned long long)(w[3] - v[3]));
    }
    ret = TEST_PASSED;
out:
    free(out);
    test_fabric_down(dir);
    return ret;
}

/* No multicast copy ever arrives: every process falls back to unicast
 * after its first operations and says so once; no result is wrong or
 * late for good. */
TEST(integ_mcast_blocked, TEST_INTEG)
{
    char why[PATH_MAX + 32], *out = NULL;
    const char *dir = test_tmpdir();
    const char *p;
    int ret = TEST_FAILED, warned = 0;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    setenv("INCOLL_AGG_FAULT_MCAST_DROP", "1", 1);
    if (test_fabric_up(dir, MC_RANKS, MC_RADIX) != 0)
        goto out;
    if (mc_job(dir, "INCOLL_MCAST=1 INCOLL_MCAST_PROBE_OPS=4", "1,1000", 30,
               &out) != 0)
        goto out;
    for (p = out; (p = strstr(p, "multicast results:")) != NULL; p++)
        warned++;
    CHECK_MSG_OR(out, warned == MC_RANKS, "%d warnings for %d ranks:\n%s",
                 warned, MC_RANKS, out);
    CHECK_OR(out, strstr(out, "brought no result") != NULL);
    ret = TEST_PASSED;
out:
    free(out);
    test_fabric_down(dir);
    return ret;
}

/*
 * A leaf AN killed while its multicast results are in flight: the 8 ranks
 * of a manager-run job run the eight collectives in turn (allreduce and
 * broadcast among them) back to back, multicast on, and l0 dies once it
 * has sent results to its address. Every call of every rank returns its
 * right result (the inputs differ per iteration, so a result taken twice
 * or from another operation is wrong), every rank recovers (on the hosts:
 * l0's hosts have no other leaf), the job ends in bounded time, and no
 * membership is left.
 */
TEST_LIMIT(integ_mcast_an_kill, TEST_INTEG, 90)
{
    char why[PATH_MAX + 32], log[PATH_MAX + 16], bin[PATH_MAX], prog[PATH_MAX],
        dir[PATH_MAX], pidf[PATH_MAX + 16];
    char *argv[] = {bin,      "run",        "-n",      "8",    "--fabric",
                    dir,      "--timeout",  "60",      "--",   prog,
                    "--coll", "mix",        "--iters", "2000", "--count",
                    "100",    "--progress", "100",     NULL};
    char *env[] = {"INCOLL_MGR_OP_TIMEOUT_MS=1000", "INCOLL_TIMEOUT_MS=1000",
                   "INCOLL_LOG_LEVEL=info", "INCOLL_MCAST=1", NULL};
    char *out = NULL, *text;
    const char *mkeys[] = {"mcast_sent"};
    uint64_t sent = 0;
    pid_t run, an;
    double end, t0;
    int st, ret = TEST_FAILED;

    int rc3;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    rc3 = mc_private_range();
    snprintf(dir, sizeof(dir), "%s/mc-kill", test_tmpdir());
    snprintf(log, sizeof(log), "%s.out", dir);
    snprintf(bin, sizeof(bin), "%s/incoll", test_bindir());
    snprintf(prog, sizeof(prog), "%s/recover_check", progdir());
    if (test_fabric_up(dir, MC_RANKS, MC_RADIX) != 0)
        goto out;
    run = spawn(log, argv, env);
    CHECK_OR(out, run > 0);
    end = now_s() + 30;
    do {
        free(out);
        sleep_s(0.005);
        out = slurp(log);
    } while (strstr(out, "progress iter 200") == NULL &&
             strstr(out, "summary") == NULL && now_s() < end);
    /* l0 has been sending its results by multicast. */
    if (mc_counters(dir, "l0", mkeys, &sent, 1) != 0 || sent == 0) {
        fprintf(stderr, "    l0 sent %llu results by multicast\n",
                (unsigned long long)sent);
        goto out;
    }
    snprintf(pidf, sizeof(pidf), "%s/l0.pid", dir);
    text = slurp(pidf);
    an = (pid_t)atoi(text);
    free(text);
    CHECK_OR(out, an > 0);
    kill(an, SIGKILL);
    t0 = now_s();
    st = wait_pid(run, 70);
    free(out);
    out = slurp(log);
    fprintf(stderr,
            "    l0 killed after %llu multicast results; the job ended "
            "%.2f s later\n",
            (unsigned long long)sent, now_s() - t0);
    CHECK_MSG_OR(out,
                 st == 0 && strstr(out, "WRONG") == NULL &&
                     mc_count(out, "summary ok=2000 wrong=0 errors=0") ==
                         MC_RANKS &&
                     mc_count(out, "recovered after a failure") == MC_RANKS,
                 "exit %d; %s:\n%.4000s", st, log, out);
    CHECK_MSG_OR(out, (mc_memberships_in(195, rc3)) == (0), "%lld != %lld",
                 (long long)(mc_memberships_in(195, rc3)), (long long)(0));
    ret = TEST_PASSED;
out:
    free(out);
    test_fabric_down(dir);
    return ret;
}

/* The sum of key=N over every line of text. */
static unsigned long long mc_sum_key(const char *text, const char *key)
{
    char pat[64];
    unsigned long long sum = 0;
    snprintf(pat, sizeof(pat), " %s=", key);
    for (const char *p = text; (p = strstr(p, pat)) != NULL; p++)
        sum += strtoull(p + strlen(pat), NULL, 10);
    return sum;
}

/* The sum of key=N over the lines of text that hold with. */
static unsigned long long mc_sum_key_on(const char *text, const char *key,
                                        const char *with)
{
    unsigned long long sum = 0;
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        char *line = strndup(p, n);
        if (line && strstr(line, with))
            sum += mc_sum_key(line, key);
        free(line);
        p = eol ? eol + 1 : NULL;
    }
    return sum;
}

/* A socket that listens to 239.195.c.0-7 on INCOLL_MCAST_PORT's default
 * as the members do (each leaf's address is one of them); -1 on error. */
static int mc_listen(int c)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1, zero = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(18517),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero)) !=
            0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    for (int i = 0; i < 8; i++) {
        struct ip_mreq mr;
        char a[32];
        snprintf(a, sizeof(a), "239.195.%d.%d", c, i);
        mr.imr_multiaddr.s_addr = inet_addr(a);
        mr.imr_interface.s_addr = htonl(INADDR_LOOPBACK);
        if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) !=
            0) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* Sends payload (n bytes) to dst:18517 from src over a raw socket, as if
 * from src's address and port: the forger spoofs the leaf AN. */
static int mc_spoof(const struct sockaddr_in *src, struct in_addr dst,
                    const uint8_t *payload, size_t n)
{
    uint8_t pkt[70000];
    struct iphdr *ip = (struct iphdr *)pkt;
    struct udphdr *udp = (struct udphdr *)(pkt + sizeof(*ip));
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr = dst};
    struct in_addr lo = {.s_addr = htonl(INADDR_LOOPBACK)};
    size_t len = sizeof(*ip) + sizeof(*udp) + n;
    int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW), rc;
    if (fd < 0 || len > sizeof(pkt))
        return -1;
    (void)setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof(lo));
    memset(pkt, 0, sizeof(*ip) + sizeof(*udp));
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 1;
    ip->protocol = IPPROTO_UDP;
    ip->tot_len = htons((uint16_t)len);
    ip->saddr = src->sin_addr.s_addr;
    ip->daddr = dst.s_addr;
    udp->source = src->sin_port;
    udp->dest = htons(18517);
    udp->len = htons((uint16_t)(sizeof(*udp) + n));
    udp->check = 0; /* none (IPv4) */
    memcpy(pkt + sizeof(*ip) + sizeof(*udp), payload, n);
    rc = sendto(fd, pkt, len, 0, (struct sockaddr *)&to, sizeof(to)) ==
                 (ssize_t)len
             ? 0
             : -1;
    close(fd);
    return rc;
}

/*
 * A forged multicast result on the real socket: while a job's allreduces
 * run, copies of the leaf ANs' multicast results, each with a byte of its
 * payload changed, are sent to the group's address from the leaf AN's own
 * address and port (a raw socket), as a forger on the switch could. Every
 * member that gets one rejects it by its MAC (bad_mac, in its counters at
 * finalize), and every result is right.
 */
TEST_LIMIT(integ_mcast_forged, TEST_INTEG, 60)
{
    char why[PATH_MAX + 32], log[PATH_MAX + 16], bin[PATH_MAX], prog[PATH_MAX],
        dir[PATH_MAX];
    char *argv[] = {bin,
                    "run",
                    "-n",
                    "8",
                    "--fabric",
                    dir,
                    "--timeout",
                    "40",
                    "--",
                    prog,
                    "--sizes",
                    "1,300",
                    "--dtype",
                    "int32",
                    "--op",
                    "sum",
                    "--iters",
                    "20",
                    "--min-seconds",
                    "1.5",
                    NULL};
    char *env[] = {"INCOLL_LOG_LEVEL=debug", "INCOLL_MCAST=1", NULL};
    char *out = NULL;
    uint8_t buf[65536];
    int fd = -1, st, sent = 0, ret = TEST_FAILED, rc3;
    pid_t run;
    double end;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    if (geteuid() != 0)
        return test_skip("a raw socket needs root");
    rc3 = mc_private_range();
    snprintf(dir, sizeof(dir), "%s/mc-forged", test_tmpdir());
    snprintf(log, sizeof(log), "%s.out", dir);
    snprintf(bin, sizeof(bin), "%s/incoll", test_bindir());
    snprintf(prog, sizeof(prog), "%s/allreduce_check", progdir());
    if (test_fabric_up(dir, MC_RANKS, MC_RADIX) != 0)
        goto out;
    fd = mc_listen(rc3);
    CHECK_MSG_OR(out, fd >= 0, "cannot listen to 239.195.%d.0-7: %s", rc3,
                 strerror(errno));
    run = spawn(log, argv, env);
    CHECK_OR(out, run > 0);
    end = now_s() + 20;
    while (sent < 30 && now_s() < end) {
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        ssize_t n;
        struct in_addr grp;
        if (poll(&pf, 1, 200) != 1)
            continue;
        n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
        if (n <= WIRE_HDR_LEN || from.sin_port == htons(18517))
            continue; /* a header alone, or our own forgery */
        /* Which address it went to is not told by recvfrom: send the
         * forgery to all eight (only the members of its group take it
         * past the group check). */
        buf[n - 1] ^= 0x5a;
        for (int i = 0; i < 8; i++) {
            char a[32];
            snprintf(a, sizeof(a), "239.195.%d.%d", rc3, i);
            grp.s_addr = inet_addr(a);
            CHECK_OR(out, mc_spoof(&from, grp, buf, (size_t)n) == 0);
        }
        sent++;
        sleep_s(0.02);
    }
    st = wait_pid(run, 50);
    out = slurp(log);
    fprintf(stderr,
            "    %d forged results sent; the members counted bad_mac=%llu, "
            "mcast_results=%llu\n",
            sent, mc_sum_key(out, "bad_mac"), mc_sum_key(out, "mcast_results"));
    CHECK_MSG_OR(out, sent >= 10, "only %d multicast results seen", sent);
    CHECK_MSG_OR(out,
                 st == 0 && mc_count(out, ": ok") >= 1 &&
                     strstr(out, "WRONG") == NULL,
                 "exit %d:\n%.3000s", st, out);
    CHECK_MSG_OR(out, mc_sum_key(out, "mcast_results") > 0, "%.3000s", out);
    /* Each forgery reaches the leaf's four members. */
    CHECK_MSG_OR(out, mc_sum_key(out, "bad_mac") >= (unsigned long long)sent,
                 "bad_mac=%llu for %d forgeries", mc_sum_key(out, "bad_mac"),
                 sent);
    ret = TEST_PASSED;
out:
    if (fd >= 0)
        close(fd);
    free(out);
    test_fabric_down(dir);
    return ret;
}

/*
 * An older manager, which does not know the processes' counters message
 * (usage_proc, 0x27: INCOLL_MGR_FAULT_UNKNOWN makes the manager answer it
 * as unknown): every process of a job that reports its usage every 100
 * ms for a second says once that the manager does not take its counters,
 * and sends them no more (the manager refuses one per process), and
 * every result is right.
 */
TEST_LIMIT(integ_mcast_old_mgr, TEST_INTEG, 60)
{
    char why[PATH_MAX + 32], path[PATH_MAX + 16], *out = NULL, *mlog = NULL;
    const char *dir = test_tmpdir();
    int ret = TEST_FAILED, warned, refused;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    setenv("INCOLL_MGR_FAULT_UNKNOWN", "39", 1); /* 0x27 */
    if (test_fabric_up(dir, MC_RANKS, MC_RADIX) != 0) {
        unsetenv("INCOLL_MGR_FAULT_UNKNOWN");
        goto out;
    }
    unsetenv("INCOLL_MGR_FAULT_UNKNOWN");
    if (run_cmd(&out, 50,
                "env INCOLL_MCAST=1 INCOLL_USAGE_MS=100 '%s/incoll' run -n "
                "%d --fabric '%s' --timeout 40 -- '%s/allreduce_check' "
                "--sizes 1,300 --iters 20 --min-seconds 1 --dtype int32 --op "
                "sum",
                test_bindir(), MC_RANKS, dir, progdir()) != 0 ||
        strstr(out, ": ok") == NULL) {
        fprintf(stderr, "    job failed:\n%s", out);
        goto out;
    }
    snprintf(path, sizeof(path), "%s/mgr.log", dir);
    mlog = slurp(path);
    warned = mc_count(out, "does not take this library's process counters");
    refused = mc_count(mlog, "(type 0x27)");
    fprintf(stderr,
            "    %d warnings from %d ranks; the manager refused %d "
            "reports\n",
            warned, MC_RANKS, refused);
    CHECK_MSG_OR(out, warned == MC_RANKS, "%d warnings:\n%.3000s", warned, out);
    CHECK_MSG_OR(out, refused >= 1 && refused <= MC_RANKS,
                 "%d refused:\n%.3000s", refused, mlog);
    ret = TEST_PASSED;
out:
    free(out);
    free(mlog);
    test_fabric_down(dir);
    return ret;
}

/*
 * Two jobs at once over the same hosts, each a group of its own with its
 * own addresses: each takes its results by multicast, and neither
 * process receives a multicast packet of the other's group (they would
 * show as mcast_foreign at finalize: packets of no communicator of the
 * process).
 */
TEST_LIMIT(integ_mcast_two_groups, TEST_INTEG, 60)
{
    char why[PATH_MAX + 32];
    const char *dir = test_tmpdir();
    proc_t job[2];
    int ret = TEST_FAILED, started = 0;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    (void)mc_private_range();
    memset(job, 0, sizeof(job));
    if (test_fabric_up(dir, MC_RANKS, MC_RADIX) != 0)
        goto out;
    for (; started < 2; started++)
        CHECK_OR(
            out,
            proc_start(&job[started], 50,
                       "env INCOLL_MCAST=1 INCOLL_LOG_LEVEL=debug "
                       "INCOLL_JOB=mc%d '%s/incoll' run -n %d --fabric '%s' "
                       "--timeout 40 -- '%s/allreduce_check' --sizes 1,300 "
                       "--iters 20 --min-seconds 1 --dtype int32 --op sum",
                       started, test_bindir(), MC_RANKS, dir, progdir()) == 0);
    for (int j = 0; j < 2; j++) {
        int st = proc_wait(&job[j]);
        unsigned long long mr = mc_sum_key(job[j].out, "mcast_results"),
                           fo = mc_sum_key(job[j].out, "mcast_foreign");
        fprintf(stderr,
                "    job %d: %llu results by multicast, %llu packets of "
                "the other group\n",
                j, mr, fo);
        CHECK_MSG_OR(out, st == 0 && mc_count(job[j].out, ": ok") >= 1,
                     "job %d exit %d:\n%.3000s", j, st, job[j].out);
        CHECK_MSG_OR(out, mr > 0, "%.3000s", job[j].out);
        CHECK_MSG_OR(out, mc_count(job[j].out, "mcast_foreign=") == MC_RANKS,
                     "%d processes said mcast_foreign",
                     mc_count(job[j].out, "mcast_foreign="));
        CHECK_MSG_OR(out, (fo) == (0), "%lld != %lld", (long long)(fo),
                     (long long)(0));
    }
    ret = TEST_PASSED;
out:
    for (int j = 0; j < started; j++) {
        if (job[j].pid > 0)
            (void)proc_wait(&job[j]);
        free(job[j].out);
    }
    test_fabric_down(dir);
    return ret;
}

/* Multicast state in the namespaces named in st (all when st is NULL: the
 * root namespace): the tc filters that mirror (mirred), the routes of
 * 224.0.0.0/4, and memberships in 239.195.c/24 (/proc/net/igmp prints
 * 239.195.c.y as "yyccC3EF"), counted into *n. */
static int mc_emu_state(const emu_state_t *st, int c, int *n)
{
    char *out = NULL;
    int ret = 0, k = st ? st->nnetns : 1;
    *n = 0;
    for (int i = 0; i < k && ret == 0; i++) {
        char pre[FABRIC_NETNS_MAX + 32] = "";
        if (st)
            snprintf(pre, sizeof(pre), "ip netns exec '%s' ", st->netns[i]);
        if (run_cmd(&out, 20,
                    "%ssh -c 'for d in $(ls /sys/class/net); do tc filter "
                    "show dev $d egress; done; ip route show table all "
                    "224.0.0.0/4; grep -i \"%02XC3EF\" /proc/net/igmp | sed "
                    "s/^/MEMBERSHIP:/' 2>&1",
                    pre, c) < 0)
            ret = -1;
        *n += mc_count(out, "mirred") + mc_count(out, "224.0.0.0/4") +
              mc_count(out, "MEMBERSHIP:");
        free(out);
        out = NULL;
    }
    return ret;
}

/*
 * The emulated fabric's multicast set-up, and its teardown: after a job
 * took its results by multicast, the switch namespaces carry the routes
 * and mirroring filters; `incoll fabric down` leaves none of the
 * namespaces, and no mirroring filter, multicast route or membership of
 * the job's range in this namespace.
 */
TEST_LIMIT(integ_mcast_emu_teardown, TEST_INTEG, 90)
{
    char why[PATH_MAX + 32], *out = NULL;
    const char *dir = test_tmpdir();
    emu_state_t st;
    int ret = TEST_FAILED, c, before = 0, after = 0, root0 = 0, root1 = 0,
        loaded = 0;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    if (geteuid() != 0)
        return test_skip("not root: emulated fabrics need network namespaces");
    if (emu_usable(why, sizeof(why)) != 0)
        return test_skip("%s", why);
    c = mc_private_range();
    memset(&st, 0, sizeof(st));
    CHECK_OR(out, mc_emu_state(NULL, c, &root0) == 0);
    if (run_cmd(&out, 60,
                "'%s/incoll' fabric up --dir '%s' --hosts 4 --radix 2 "
                "--emulate 2>&1",
                test_bindir(), dir) != 0) {
        fprintf(stderr, "    fabric up failed:\n%s", out);
        goto out;
    }
    free(out);
    out = NULL;
    CHECK_OR(out, emu_state_load(dir, &st) == INCOLL_OK);
    loaded = 1;
    if (run_cmd(
            &out, 60,
            "env INCOLL_MCAST=1 INCOLL_LOG_LEVEL=debug '%s/incoll' run -n 4 "
            "--fabric '%s' --timeout 40 -- '%s/allreduce_check' --sizes "
            "1,300 --iters 30 --dtype int32 --op sum 2>&1",
            test_bindir(), dir, progdir()) != 0 ||
        strstr(out, ": ok") == NULL) {
        fprintf(stderr, "    job failed:\n%.3000s", out);
        goto out;
    }
    CHECK_MSG_OR(out, mc_sum_key(out, "mcast_results") > 0, "%.3000s", out);
    CHECK_OR(out, mc_emu_state(&st, c, &before) == 0);
    /* Each switch with hosts: its route and a filter per host link. */
    CHECK_MSG_OR(out, before >= 2 * 2, "%d multicast routes and filters",
                 before);
    free(out);
    out = NULL;
    CHECK_OR(out, run_cmd(&out, 60, "'%s/incoll' fabric down --dir '%s' 2>&1",
                          test_bindir(), dir) == 0);
    CHECK_MSG_OR(out, (emu_count_netns(st.prefix)) == (0), "%lld != %lld",
                 (long long)(emu_count_netns(st.prefix)), (long long)(0));
    CHECK_OR(out, mc_emu_state(&st, c, &after) == 0); /* (gone: none to read) */
    CHECK_OR(out, mc_emu_state(NULL, c, &root1) == 0);
    fprintf(stderr,
            "    multicast routes, filters and memberships: %d in the "
            "fabric's namespaces with the job, %d after fabric down; %d "
            "here before, %d after\n",
            before, after, root0, root1);
    CHECK_MSG_OR(out, (after) == (0), "%lld != %lld", (long long)(after),
                 (long long)(0));
    CHECK_MSG_OR(out, (root1) == (root0), "%lld != %lld", (long long)(root1),
                 (long long)(root0));
    CHECK_MSG_OR(out, (mc_memberships_in(195, c)) == (0), "%lld != %lld",
                 (long long)(mc_memberships_in(195, c)), (long long)(0));
    ret = TEST_PASSED;
out:
    free(out);
    if (loaded)
        emu_state_free(&st);
    test_fabric_down(dir);
    return ret;
}

/*
 * Members whose membership comes late (INCOLL_FAULT_MCAST_JOIN_OPS: each
 * process joins its group's address only after its first 5 operations,
 * as when a switch learns a membership late, while the AN sends to the
 * address from the first): the first results come by repair, the rest by
 * multicast, every result is right and taken once (each segment's result
 * counted once, by multicast or by repair), and no process falls back.
 */
TEST_LIMIT(integ_mcast_late_join, TEST_INTEG, 60)
{
    char why[PATH_MAX + 32], *out = NULL;
    const char *dir = test_tmpdir();
    unsigned long long mr, rep, seg;
    int ret = TEST_FAILED;

    if (!mc_have(why, sizeof(why)))
        return test_skip("%s", why);
    (void)mc_private_range();
    if (test_fabric_up(dir, MC_RANKS, MC_RADIX) != 0)
        goto out;
    if (mc_job(dir,
               "INCOLL_MCAST=1 INCOLL_FAULT_MCAST_JOIN_OPS=5 "
               "INCOLL_LOG_LEVEL=debug",
               "1,300", 20, &out) != 0)
        goto out;
    mr = mc_sum_key(out, "mcast_results");
    rep = mc_sum_key(out, "mcast_repaired");
    seg = mc_sum_key_on(out, "segments", "mcast_repaired=");
    fprintf(stderr,
            "    %llu results by multicast, %llu by repair, %llu "
            "segments\n",
            mr, rep, seg);
    CHECK_MSG_OR(out, strstr(out, "brought no result") == NULL, "%.3000s", out);
    CHECK_OR(out, mr > 0);
    /* The first 5 operations of every process, at least. */
    CHECK_MSG_OR(out, rep >= 5 * MC_RANKS, "%llu repaired", rep);
    CHECK_MSG_OR(out, mr + rep == seg, "%llu + %llu results for %llu segments",
                 mr, rep, seg);
    ret = TEST_PASSED;
out:
    free(out);
    test_fabric_down(dir);
    return ret;
}
