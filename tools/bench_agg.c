/*
 * `incoll bench agg`: what one datagram costs a software aggregation node,
 * the `agg ns_per_packet` record of the simulator's calibration file
 * (docs/simulator.md, "Calibration").
 *
 * It brings up a loopback fabric of N hosts under one AN (radix N: the AN
 * is leaf and root at once), runs `incoll bench allreduce --algos inc` of
 * small vectors on it, and divides the CPU time the AN daemon spent during
 * the run (user + sys, /proc/PID/stat) by the datagrams it received and
 * sent (its packets_in and packets_out counters). Small vectors make the
 * reduction itself negligible, so what is left is the per-datagram work of
 * the daemon: the system calls, epoll, parsing, the slot table and the
 * replication. The simulator charges the payload's bytes separately, at
 * the kernel and memcpy rates of `incoll bench kernel --calib`.
 *
 * With --calib FILE the record is appended to FILE, so that
 *   incoll bench kernel --calib F && incoll bench agg --calib F
 * makes a whole calibration file.
 */
#include "bench_common.h"
#include "cli.h"

#include "common/fabric_conf.h"
#include "common/procstat.h"
#include "core/algo.h"
#include "fabric/an_stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void agg_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    (void)cmd;
    o->hosts = 4;
    o->iters = 20000;
    o->bytes = 8;
}

static const bench_range_t agg_ranges[] = {
    {BENCH_OPT_HOSTS, 2, 64},
    {BENCH_OPT_ITERS, 100, 10000000},
    {BENCH_OPT_BYTES, 4, 8192},
    {0, 1, 0},
};

static const bench_optdoc_t agg_docs[] = {
    {BENCH_OPT_HOSTS, "hosts under the one AN"},
    {BENCH_OPT_ITERS, "in-network allreduces run through the AN"},
    {BENCH_OPT_BYTES, "bytes of each allreduce"},
    {0, NULL},
};

static const bench_cmd_t agg_cmd = {
    .who = "bench agg",
    .synopsis = "bench agg [-n HOSTS] [--iters N] [--bytes B] [--calib FILE]",
    .about = "CPU time of an aggregation-node daemon per datagram, on a "
             "loopback fabric of HOSTS hosts under one AN: N in-network "
             "allreduces of B bytes run through it, and its user+sys time is "
             "divided by the datagrams it received and sent. --calib FILE "
             "appends the simulator's record `agg ns_per_packet=X` to FILE.",
    .accepts = BENCH_OPT(HOSTS) | BENCH_OPT(ITERS) | BENCH_OPT(BYTES) |
               BENCH_OPT(CALIB) | BENCH_OPT(HELP),
    .defaults = agg_defaults,
    .docs = agg_docs,
    .ranges = agg_ranges,
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

/* packets_in + packets_out from a stats reply "an=NAME key=value ...". */
static int reply_packets(const char *reply, uint64_t *pkts_p)
{
    static const char *const keys[] = {" packets_in=", " packets_out="};
    uint64_t sum = 0;

    for (int i = 0; i < 2; i++) {
        const char *p = reply ? strstr(reply, keys[i]) : NULL;
        if (p == NULL)
            return -1;
        sum += strtoull(p + strlen(keys[i]), NULL, 10);
    }
    *pkts_p = sum;
    return 0;
}

/* The AN's counters and CPU time now. */
static int sample(const fabric_conf_t *conf, pid_t pid, uint64_t *pkts_p,
                  uint64_t *cpu_p)
{
    char *reply = NULL;
    int ret = -1;

    if (fabric_an_stats(conf, 3, 300, &reply) == 0 &&
        reply_packets(reply, pkts_p) == 0)
        ret = proc_cpu_ns(pid, cpu_p);
    free(reply);
    return ret;
}

int bench_agg_main(int argc, char **argv)
{
    bench_opts_t o;
    bench_fabric_opts_t fo = {.who = "bench agg"};
    bench_fabric_t f;
    fabric_conf_t conf;
    char path[PATH_MAX + 128], err[512], n[16], iters[16], sizes[48];
    uint64_t pkts0, pkts1, cpu0, cpu1;
    double ns;
    pid_t pid;
    FILE *calib;
    int rc, ret = 1;

    if (bench_opts_get(&agg_cmd, argc, argv, &o, &rc) != 0)
        return rc;
    fo.hosts = o.hosts;
    fo.radix = o.hosts; /* one AN, leaf and root */
    memset(&conf, 0, sizeof(conf));
    if (bench_fabric_open(&f, &fo) != 0)
        return bench_interrupted() ? 130 : 1;
    snprintf(path, sizeof(path), "%s/fabric.conf", f.dir);
    if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll bench agg: %s\n", err);
        goto out;
    }
    if (conf.nans != 1) {
        fprintf(stderr, "incoll bench agg: want one AN, the fabric has %d\n",
                conf.nans);
        goto out;
    }
    snprintf(path, sizeof(path), "%s/%s.pid", f.dir, conf.ans[0].name);
    {
        FILE *pf = fopen(path, "r");
        int v = 0;
        if (pf == NULL || fscanf(pf, "%d", &v) != 1 || v <= 0) {
            fprintf(stderr, "incoll bench agg: no pid in %s\n", path);
            if (pf)
                fclose(pf);
            goto out;
        }
        fclose(pf);
        pid = (pid_t)v;
    }
    if (sample(&conf, pid, &pkts0, &cpu0) != 0) {
        fprintf(stderr, "incoll bench agg: an %s does not answer\n",
                conf.ans[0].name);
        goto out;
    }

    /* The load: the allreduce benchmark on this fabric, inc only. */
    snprintf(n, sizeof(n), "%d", o.hosts);
    snprintf(iters, sizeof(iters), "%d", o.iters);
    snprintf(sizes, sizeof(sizes), "%zu:%zu", o.bytes, o.bytes);
    {
        char *args[] = {"allreduce", "--fabric", f.dir,
                        "-n",        n,          "--sizes",
                        sizes,       "--algos",  (char *)algo_name(ALGO_INC),
                        "--iters",   iters,      "--warmup",
                        "0",         NULL};
        rc = bench_allreduce_main((int)(sizeof(args) / sizeof(args[0])) - 1,
                                  args);
    }
    if (rc != 0) {
        fprintf(stderr, "incoll bench agg: the allreduce run failed (%d)\n",
                rc);
        ret = rc;
        goto out;
    }
    if (sample(&conf, pid, &pkts1, &cpu1) != 0 || pkts1 <= pkts0) {
        fprintf(stderr, "incoll bench agg: no datagrams counted at an %s\n",
                conf.ans[0].name);
        goto out;
    }
    if (cpu1 == cpu0) {
        fprintf(stderr,
                "incoll bench agg: the an used less than one clock tick of "
                "cpu for %" PRIu64 " datagrams: run more --iters\n",
                pkts1 - pkts0);
        goto out;
    }
    ns = (double)(cpu1 - cpu0) / (double)(pkts1 - pkts0);
    printf("# incoll bench agg: an %s, %d hosts, %d allreduces of %zu bytes\n"
           "# cpu = user+sys of the daemon over the run; packets = "
           "packets_in + packets_out\n"
           "%-8s %12s %12s %14s\n%-8s %12" PRIu64 " %12.1f %14.1f\n",
           conf.ans[0].name, o.hosts, o.iters, o.bytes, "an", "packets",
           "cpu(ms)", "ns_per_packet", conf.ans[0].name, pkts1 - pkts0,
           (double)(cpu1 - cpu0) / 1e6, ns);
    ret = 0;
    if (o.calib) {
        int bad;
        calib = fopen(o.calib, "a");
        bad = calib == NULL;
        if (!bad) {
            bad = fprintf(calib,
                          "# incoll bench agg: %d hosts, %d allreduces of "
                          "%zu bytes, %" PRIu64
                          " datagrams\nagg ns_per_packet=%.1f\n",
                          o.hosts, o.iters, o.bytes, pkts1 - pkts0, ns) < 0;
            bad |= fclose(calib) != 0;
        }
        if (bad) {
            fprintf(stderr, "incoll bench agg: cannot write %s: %s\n", o.calib,
                    strerror(errno));
            ret = 1;
        } else {
            fprintf(stderr, "incoll bench agg: appended to %s\n", o.calib);
        }
    }
out:
    fabric_conf_free(&conf);
    bench_fabric_close(&f);
    return ret;
}
