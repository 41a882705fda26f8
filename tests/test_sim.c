/*
 * Integration tests of the scale simulator (build/bin/incoll-sim, built
 * when SimGrid is installed; every test skips without it):
 *  - a 64-host in-network allreduce of 8 bytes takes exactly the hand
 *    calculation of docs/simulator.md, on 2 and 3 levels and with a switch
 *    AN latency, and every host's result is checked;
 *  - so does a 3-level tree of 4,096 hosts, with the actors' stacks as
 *    at 65,536 hosts (no guard pages);
 *  - a run beyond its message or memory budget is refused with the
 *    reason, not started;
 *  - 1 MiB streams at more than 90% of the link rate;
 *  - mirroring identical subtrees (--mirror) gives the full run's
 *    latencies to the picosecond, results checked, and stays off where
 *    it would not be exact (server ANs, loss);
 *  - the ring by its step recurrence (--recurrence) gives the full run's
 *    latencies to the picosecond, on even and uneven trees, blocks of one
 *    size and of two, and takes over from a full run the guard refuses;
 *  - the same seed gives the same numbers, loss included;
 *  - with 1% of packets lost, every host still gets the right result;
 *  - streaming (--proto stream) runs through the same cores: every
 *    result is the exact sum, as on the slots, without and with loss,
 *    and the library's threshold and lock length hold;
 *    with no streaming pool every lock is refused and the operations run
 *    on the slots, as the AN daemon does;
 *  - two jobs racing for one tree (--groups 2): one is granted, the
 *    other refused and falls back, both right; the refused one gets the
 *    tree next (its ticket is older);
 *  - results by multicast (--mcast 1): a leaf AN sends a result once to
 *    its hosts' group, 2 datagrams per result against fan-out + 1 by
 *    unicast, fan-out + 2 with the dual send; a server AN's result
 *    reaches its hosts sooner; lost copies are repaired; a bad value of
 *    --mcast or --mcast-dual is refused with the option named;
 *  - the host-based algorithms agree within 10% with SMPI's own
 *    implementations on the same platform (skips without smpicc/smpirun).
 */
#include "test.h"

#include "common/wire.h"

#include "integ.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ROWS 64

typedef struct {
    char algo[32];
    char an[16];
    int hosts;
    long bytes;
    double latency_us;
    double bandwidth_MBps;
    int levels;
    char outcome[16];
    int checked;
    long dropped;
    long retransmits;
    int mirrored;  /* its note says it ran with mirrors */
    int recurrent; /* its note says it ran by the ring's recurrence */
    int jumped;    /* ... and jumped over steady phases */
    long streamed; /* its note: host operations that streamed, of ops */
    long ops;      /* -1 when the note does not say */
    int mcast;     /* results by multicast */
    long leaf_pkts, leaf_results; /* the first leaf AN's counters */
    long mcast_sent, mcast_repairs;
} row_t;

static int sim_path(char *buf, size_t len)
{
    snprintf(buf, len, "%s/incoll-sim", test_bindir());
    return access(buf, X_OK) == 0 ? 0 : -1;
}

/*
 * Parses incoll-sim's CSV: algorithm,an,hosts,bytes,latency_us,
 * bandwidth_MBps,levels,radix,outcome,checked,messages,retransmits,
 * dropped,wall_s,cpu_s,rss_MiB,mcast,leaf_packets_out,leaf_results,
 * mcast_sent,mcast_repairs,note. Returns the number of rows, or -1.
 */
static int read_csv(const char *path, row_t *rows, int max)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int n = 0;
    if (f == NULL)
        return -1;
    static const char head[] =
        "algorithm,an,hosts,bytes,latency_us,bandwidth_MBps,";
    if (fgets(line, sizeof(line), f) == NULL ||
        strncmp(line, head, sizeof(head) - 1) != 0) {
        fclose(f);
        return -1;
    }
    while (n < max && fgets(line, sizeof(line), f)) {
        row_t *r = &rows[n];
        long radix, messages;
        if (sscanf(
                line,
                "%31[^,],%15[^,],%d,%ld,%lf,%lf,%d,%ld,%15[^,],%d,%ld,%ld,%ld,"
                "%*f,%*f,%*f,%d,%ld,%ld,%ld,%ld",
                r->algo, r->an, &r->hosts, &r->bytes, &r->latency_us,
                &r->bandwidth_MBps, &r->levels, &radix, r->outcome, &r->checked,
                &messages, &r->retransmits, &r->dropped, &r->mcast,
                &r->leaf_pkts, &r->leaf_results, &r->mcast_sent,
                &r->mcast_repairs) != 18) {
            fclose(f);
            return -1;
        }
        r->mirrored = strstr(line, "mirrored:") != NULL;
        r->recurrent = strstr(line, "recurrence:") != NULL;
        r->jumped = strstr(line, "steady phases jumped") != NULL;
        {
            const char *st = strstr(line, "streamed ");
            r->streamed = r->ops = -1;
            if (st == NULL ||
                sscanf(st, "streamed %ld of %ld", &r->streamed, &r->ops) != 2)
                r->streamed = r->ops = -1;
        }
        n++;
    }
    fclose(f);
    return n;
}

/* Runs incoll-sim allreduce with args and reads its CSV. */
static int sim(const char *args, row_t *rows, int max)
{
    char bin[1024], csv[1100];
    if (sim_path(bin, sizeof(bin)) != 0)
        return -1;
    snprintf(csv, sizeof(csv), "%s/sim-%d.csv", test_tmpdir(), (int)getpid());
    unlink(csv);
    if (sh("/dev/null",
           "'%s' allreduce %s --quiet --csv '%s' > '%s/sim.out' 2>&1", bin,
           args, csv, test_tmpdir()) != 0) {
        char path[PATH_MAX + 16];
        snprintf(path, sizeof(path), "%s/sim.out", test_tmpdir());
        show_tail(path);
        return -1;
    }
    return read_csv(csv, rows, max);
}

/* Runs the same measurements two ways (base + " " + way_a, and way_b);
 * returns their number of rows if both gave the same number, else -1. */
static int sim_two_ways(const char *base, const char *way_a, const char *way_b,
                        row_t *a, row_t *b)
{
    char args[1024];
    int na, nb;
    snprintf(args, sizeof(args), "%s %s", base, way_a);
    na = sim(args, a, MAX_ROWS);
    snprintf(args, sizeof(args), "%s %s", base, way_b);
    nb = sim(args, b, MAX_ROWS);
    return na >= 1 && na == nb ? na : -1;
}

#define SKIP_WITHOUT_SIM()                                                     \
    do {                                                                       \
        char bin_[1024];                                                       \
        if (sim_path(bin_, sizeof(bin_)) != 0)                                 \
            return test_skip("%s not built: SimGrid (libsimgrid-dev) is not "  \
                             "installed; see scripts/install-deps.sh",         \
                             bin_);                                            \
    } while (0)

/*
 * The hand calculation of docs/simulator.md for a switch AN: a packet of
 * WIRE_HDR_LEN + b bytes crosses 2 x levels links, each costing its latency
 * plus the packet's transmission time, and 2 x levels - 1 AN visits (leaf up,
 * ..., root, ..., leaf down) each add the switch AN's latency.
 */
static double hand_us(int levels, double lat_s, double Bps, long bytes,
                      double switch_ns)
{
    double hop = lat_s + ((double)WIRE_HDR_LEN + (double)bytes) / Bps;
    return (2.0 * levels * hop + (2.0 * levels - 1) * switch_ns * 1e-9) * 1e6;
}

TEST(sim_inc_latency_matches_hand_calculation, TEST_INTEG)
{
    row_t r[MAX_ROWS];
    int n;
    double want;

    SKIP_WITHOUT_SIM();
    /* 2 levels: 64 hosts under 8 leaves of 8. */
    n = sim("--hosts 64 --radix 8 --link-rate 100Gbps --link-latency 1us "
            "--sizes 8 --algos inc --an switch --data",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r[0].levels, 2);
    CHECK(strcmp(r[0].outcome, "ok") == 0);
    CHECK_EQ_INT(r[0].checked, 1);
    want = hand_us(2, 1e-6, 100e9 / 8, 8, 0);
    CHECK_MSG(fabs(r[0].latency_us - want) < 0.001,
              "simulated %.6f us, hand %.6f us", r[0].latency_us, want);

    /* 3 levels, 25 Gbps, 500 ns, and a switch AN latency of 120 ns. */
    n = sim("--hosts 64 --radix 4 --link-rate 25Gbps --link-latency 500ns "
            "--sizes 8,64 --algos inc --an switch --switch-ns 120 --data",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 2);
    for (int i = 0; i < n; i++) {
        CHECK_EQ_INT(r[i].levels, 3);
        CHECK(strcmp(r[i].outcome, "ok") == 0);
        CHECK_EQ_INT(r[i].checked, 1);
        want = hand_us(3, 500e-9, 25e9 / 8, r[i].bytes, 120);
        CHECK_MSG(fabs(r[i].latency_us - want) < 0.001,
                  "%ld bytes: simulated %.6f us, hand %.6f us", r[i].bytes,
                  r[i].latency_us, want);
    }
    return TEST_PASSED;
}

/*
 * A 3-level fat-tree of 4,096 hosts (radix 16), 8 bytes, results checked:
 * the latency is the hand calculation, 6 links up and down, whatever the
 * width. Run once with the actors' stacks as at 65,536 hosts (no guard
 * pages, mapped on demand), so the path that large fabrics take is in the
 * tests too.
 */
TEST(sim_inc_3level_4096_matches_hand_calculation, TEST_INTEG)
{
    row_t r[MAX_ROWS];
    double want = hand_us(3, 1e-6, 100e9 / 8, 8, 0);

    SKIP_WITHOUT_SIM();
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(sim(i == 0
                             ? "--hosts 4096 --radix 16 --levels 3 --sizes 8 "
                               "--algos inc --data"
                             : "--hosts 4096 --radix 16 --levels 3 --sizes 8 "
                               "--algos inc --data --no-stack-guards",
                         r, MAX_ROWS),
                     1);
        CHECK_EQ_INT(r[0].hosts, 4096);
        CHECK_EQ_INT(r[0].levels, 3);
        CHECK(strcmp(r[0].outcome, "ok") == 0);
        CHECK_EQ_INT(r[0].checked, 1);
        CHECK_MSG(fabs(r[0].latency_us - want) < 0.001,
                  "simulated %.6f us, hand %.6f us", r[0].latency_us, want);
    }
    return TEST_PASSED;
}

/*
 * The guard: a run predicted beyond the message budget (--max-msgs) or
 * the memory budget (--max-mem) is refused before it starts, with the
 * reason and the limit in its row and on stderr, and the command exits 0;
 * the runs within budget of the same command still run.
 */
TEST(sim_guard_refuses_over_budget, TEST_INTEG)
{
    char bin[1024], out[1100], csv[1100], line[512];
    row_t r[MAX_ROWS];
    int n, said_msgs = 0, said_mem = 0;
    FILE *f;

    SKIP_WITHOUT_SIM();
    sim_path(bin, sizeof(bin));
    snprintf(out, sizeof(out), "%s/guard.out", test_tmpdir());
    snprintf(csv, sizeof(csv), "%s/guard.csv", test_tmpdir());
    /* 64 hosts: 8 B is ~256 messages either way; 1 MiB is ~33,000 for
     * inc and ~8,000 for the ring (here not by its recurrence). */
    CHECK_EQ_INT(sh("/dev/null",
                    "'%s' allreduce --hosts 64 --radix 8 --sizes 8,1M "
                    "--algos inc,ring --recurrence off --max-msgs 1000 "
                    "--csv '%s' > '%s' 2>&1",
                    bin, csv, out),
                 0);
    n = read_csv(csv, r, MAX_ROWS);
    CHECK_EQ_INT(n, 4);
    for (int i = 0; i < n; i++) {
        int small = r[i].bytes == 8;
        CHECK_MSG(strcmp(r[i].outcome, small ? "ok" : "skipped") == 0,
                  "%s %ld bytes: %s", r[i].algo, r[i].bytes, r[i].outcome);
    }
    /* A memory budget of 1 MiB refuses everything, without loading the
     * platform. */
    CHECK_EQ_INT(sh("/dev/null",
                    "'%s' allreduce --hosts 65536 --radix 64 --levels 3 "
                    "--sizes 8 --algos inc,rd --max-mem 1M --csv '%s' >> '%s' "
                    "2>&1",
                    bin, csv, out),
                 0);
    n = read_csv(csv, r, MAX_ROWS);
    CHECK_EQ_INT(n, 2);
    for (int i = 0; i < n; i++)
        CHECK(strcmp(r[i].outcome, "skipped") == 0 && r[i].hosts == 65536);
    f = fopen(out, "r");
    CHECK(f != NULL);
    while (fgets(line, sizeof(line), f)) {
        said_msgs +=
            strstr(line, "refused") && strstr(line, "--max-msgs 1e+03");
        said_mem += strstr(line, "refused") && strstr(line, "--max-mem");
    }
    fclose(f);
    /* Each refusal is said twice: on stderr and in the table. */
    CHECK_MSG(said_msgs == 4, "%d lines name --max-msgs", said_msgs);
    CHECK_MSG(said_mem == 4, "%d lines name --max-mem", said_mem);

    /* What 65,536 hosts on 3 levels still cannot do within the default
     * budget: a server AN streaming 1 MiB (its subtrees are not alike,
     * so no mirrors); and the ring's recurrence has a budget too. */
    CHECK_EQ_INT(sh("/dev/null",
                    "'%s' allreduce --hosts 65536 --radix 64 --levels 3 "
                    "--sizes 1M --algos inc --an server --csv '%s' > '%s' "
                    "2>&1",
                    bin, csv, out),
                 0);
    CHECK_EQ_INT(read_csv(csv, r, MAX_ROWS), 1);
    CHECK(strcmp(r[0].outcome, "skipped") == 0 && !r[0].mirrored);
    CHECK_EQ_INT(sh("/dev/null",
                    "'%s' allreduce --hosts 65536 --radix 64 --levels 3 "
                    "--sizes 1M --algos ring --max-msgs 1e5 --csv '%s' >> "
                    "'%s' 2>&1",
                    bin, csv, out),
                 0);
    CHECK_EQ_INT(read_csv(csv, r, MAX_ROWS), 1);
    CHECK(strcmp(r[0].outcome, "skipped") == 0);
    said_msgs = said_mem = 0;
    f = fopen(out, "r");
    CHECK(f != NULL);
    while (fgets(line, sizeof(line), f)) {
        said_msgs += strstr(line, "refused: ~3.4e+07 messages") &&
                     strstr(line, "--max-msgs 2e+07");
        said_mem += strstr(line, "rank-steps of the recurrence") &&
                    strstr(line, "--max-msgs 1e+05");
    }
    fclose(f);
    CHECK_MSG(said_msgs == 2, "%d lines refuse the server AN", said_msgs);
    CHECK_MSG(said_mem == 2, "%d lines refuse the recurrence", said_mem);
    return TEST_PASSED;
}

/*
 * The calibration comes from the real daemons: `incoll bench agg` measures
 * an incoll-agg's CPU time per datagram and byte and appends the record
 * the simulator reads. A server AN charged that cost is slower than one
 * charged 300 ns by at least the difference on each of the 2 x levels - 1
 * AN visits of the critical path.
 */
TEST(sim_calib_from_daemon, TEST_INTEG)
{
    char calib[1200], base[1200], line[256], args[2600];
    double ns = -1, slow_us, fast_us;
    row_t r[MAX_ROWS];
    FILE *f;

    SKIP_WITHOUT_SIM();
    snprintf(calib, sizeof(calib), "%s/calib.txt", test_tmpdir());
    snprintf(base, sizeof(base), "%s/calib300.txt", test_tmpdir());
    unlink(calib);
    CHECK_EQ_INT(sh("/dev/null",
                    "'%s/incoll' bench agg -n 2 --sizes 8:64 --seconds 0.2 "
                    "--rounds 1 --calib '%s' > '%s/agg.out' 2>&1",
                    test_bindir(), calib, test_tmpdir()),
                 0);
    f = fopen(calib, "r");
    CHECK_MSG(f != NULL, "no %s", calib);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "agg ns_per_packet=%lf", &ns) == 1)
            break;
    fclose(f);
    CHECK_MSG(ns > 0, "no positive agg ns_per_packet in %s", calib);
    CHECK(strstr(line, " ns_per_byte=") && strstr(line, " threads=1 ") &&
          strstr(line, " relay_ns_per_packet="));
    /* The AN and the relay side by side at every size, then the ratios. */
    {
        char path[1300];
        int an = 0, relay = 0, ratio = 0;
        snprintf(path, sizeof(path), "%s/agg.out", test_tmpdir());
        f = fopen(path, "r");
        CHECK(f != NULL);
        while (fgets(line, sizeof(line), f)) {
            unsigned long long b;
            char who[16];
            if (sscanf(line, "%llu %15s", &b, who) == 2) {
                an += strcmp(who, "an") == 0;
                relay += strcmp(who, "relay") == 0;
            }
            ratio +=
                strstr(line, "# an/relay: cpu per datagram at 8 bytes") != NULL;
        }
        fclose(f);
        CHECK_MSG(an == 4 && relay == 4 && ratio == 1,
                  "%d an rows, %d relay rows, %d ratio lines", an, relay,
                  ratio);
    }
    f = fopen(base, "w");
    CHECK(f != NULL);
    fprintf(f, "agg ns_per_packet=300\n");
    fclose(f);

    /* The measured cost, then the 300 ns one. */
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof(args),
                 "--hosts 64 --radix 8 --sizes 8 --algos inc --an server "
                 "--data --calib '%s'",
                 i == 0 ? calib : base);
        CHECK_EQ_INT(sim(args, r, MAX_ROWS), 1);
        CHECK(strcmp(r[0].outcome, "ok") == 0 && r[0].checked == 1);
        *(i == 0 ? &slow_us : &fast_us) = r[0].latency_us;
    }
    fprintf(stderr,
            "    measured %.0f ns per datagram: %.2f us, at 300 ns: "
            "%.2f us\n",
            ns, slow_us, fast_us);
    if (ns > 300)
        CHECK_MSG(slow_us - fast_us >= 3 * (ns - 300) * 1e-3 * 0.999,
                  "%.2f us against %.2f us: less than 3 x %.0f ns apart",
                  slow_us, fast_us, ns - 300);
    return TEST_PASSED;
}

/*
 * Cores of a server AN (--an-cores): the record measured with that many
 * threads is the one used (the costs line says so), and a large vector,
 * where the AN's CPU is the limit, goes about that many times faster
 * than on one core; a count of cores the file has no record of takes the
 * one-thread record.
 */
TEST(sim_an_cores, TEST_INTEG)
{
    char calib[1200], args[1600], out[1300], line[512];
    double bw[3];
    static const int cores[3] = {1, 4, 2};
    row_t r[MAX_ROWS];
    FILE *f;

    SKIP_WITHOUT_SIM();
    snprintf(calib, sizeof(calib), "%s/calib.txt", test_tmpdir());
    f = fopen(calib, "w");
    CHECK(f != NULL);
    fprintf(f, "agg ns_per_packet=1000 ns_per_byte=0.2 threads=1\n"
               "agg ns_per_packet=1200 ns_per_byte=0.25 threads=4\n");
    fclose(f);
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof(args),
                 "--hosts 8 --radix 4 --sizes 4M --algos inc --an server "
                 "--link-rate 400Gbps --calib '%s' --an-cores %d",
                 calib, cores[i]);
        CHECK_EQ_INT(sim(args, r, MAX_ROWS), 1);
        CHECK(strcmp(r[0].outcome, "ok") == 0);
        bw[i] = r[0].bandwidth_MBps;
    }
    fprintf(stderr,
            "    1 core %.0f MB/s, 4 cores %.0f MB/s, 2 cores %.0f MB/s\n",
            bw[0], bw[1], bw[2]);
    /* 4 cores at 1200 + 0.25/byte against 1 at 1000 + 0.2: 3.2x the
     * rate of datagrams, the links not yet the limit. */
    CHECK(bw[1] > 2.5 * bw[0] && bw[1] < 4.2 * bw[0]);
    CHECK(bw[2] > 1.7 * bw[0] && bw[2] < 2.3 * bw[0]);
    snprintf(out, sizeof(out), "%s/cores.out", test_tmpdir());
    CHECK_EQ_INT(sh(out,
                    "'%s/incoll' sim allreduce --hosts 8 --radix 4 --sizes 8 "
                    "--algos inc --an server --calib '%s' --an-cores 4",
                    test_bindir(), calib),
                 0);
    f = fopen(out, "r");
    CHECK(f != NULL);
    line[0] = '\0';
    while (fgets(line, sizeof(line), f) && strstr(line, "# costs") == NULL)
        ;
    fclose(f);
    CHECK_MSG(strstr(line, "server an of 4 cores 1200 ns/datagram + 0.25 "
                           "ns/byte") != NULL,
              "%s", line);
    return TEST_PASSED;
}

/* Runs one measurement that must give one row, right and checked. */
#define SIM_ONE_OK(args, row)                                                  \
    do {                                                                       \
        row_t rows_[MAX_ROWS];                                                 \
        CHECK_EQ_INT(sim(args, rows_, MAX_ROWS), 1);                           \
        CHECK_MSG(strcmp(rows_[0].outcome, "ok") == 0, "%s",                   \
                  rows_[0].outcome);                                           \
        CHECK_EQ_INT(rows_[0].checked, 1);                                     \
        *(row) = rows_[0];                                                     \
    } while (0)

TEST(sim_inc_streams_near_link_rate, TEST_INTEG)
{
    row_t r[1];

    SKIP_WITHOUT_SIM();
    SIM_ONE_OK("--hosts 64 --radix 8 --link-rate 100Gbps --link-latency 1us "
               "--sizes 1M --algos inc --data",
               r);
    /* Header overhead alone caps it at 8192/8240 of 12500 MB/s. */
    CHECK_MSG(r[0].bandwidth_MBps > 0.9 * 12500 &&
                  r[0].bandwidth_MBps < 12500.0 * 8192 / 8240,
              "%.1f MB/s", r[0].bandwidth_MBps);
    return TEST_PASSED;
}

/*
 * --mirror is exact: on a 3-level tree of identical subtrees and on an
 * uneven 4-level one (where only the subtrees of the same shape are
 * mirrored), with a switch AN latency, from one packet to a stream of 32
 * with the slot window at work, the mirrored run's latency is the full
 * run's to the picosecond (the CSV's precision), every simulated host's
 * result checked. With server ANs, whose NIC sends to one child after
 * another, and with loss, it does not mirror.
 */
TEST(sim_mirror_matches_full_run, TEST_INTEG)
{
    static const char *const trees[] = {
        "--hosts 64 --radix 4 --levels 3 --sizes 8,64K,256K",
        "--hosts 100 --radix 4 --levels 4 --sizes 8,64K",
    };
    row_t full[MAX_ROWS], mir[MAX_ROWS];
    char args[512];

    SKIP_WITHOUT_SIM();
    for (int t = 0; t < 2; t++) {
        int nf;
        snprintf(args, sizeof(args),
                 "%s --algos inc --an switch --switch-ns 120 --window 8 "
                 "--data",
                 trees[t]);
        nf = sim_two_ways(args, "--mirror off", "--mirror on", full, mir);
        CHECK(nf >= 2);
        for (int i = 0; i < nf; i++) {
            CHECK(strcmp(full[i].outcome, "ok") == 0 && full[i].checked);
            CHECK(strcmp(mir[i].outcome, "ok") == 0 && mir[i].checked);
            CHECK_MSG(!full[i].mirrored && mir[i].mirrored,
                      "%s, %ld bytes: not mirrored as asked", trees[t],
                      mir[i].bytes);
            CHECK_MSG(fabs(full[i].latency_us - mir[i].latency_us) < 1.5e-6,
                      "%s, %ld bytes: full %.6f us, mirrored %.6f us", trees[t],
                      full[i].bytes, full[i].latency_us, mir[i].latency_us);
        }
    }
    /* No mirrors where they would not be exact. */
    CHECK_EQ_INT(sim("--hosts 64 --radix 4 --levels 3 --sizes 8 --algos inc "
                     "--an server --mirror on",
                     mir, MAX_ROWS),
                 1);
    CHECK(strcmp(mir[0].outcome, "ok") == 0 && !mir[0].mirrored);
    CHECK_EQ_INT(sim("--hosts 64 --radix 4 --levels 3 --sizes 8 --algos inc "
                     "--drop 0.01 --mirror on",
                     mir, MAX_ROWS),
                 1);
    CHECK(strcmp(mir[0].outcome, "ok") == 0 && !mir[0].mirrored);
    return TEST_PASSED;
}

/*
 * --recurrence is exact: the ring computed by its step recurrence, without
 * SimGrid (sim_ring.c), gives the latency of the full simulation to the
 * picosecond (the CSV's precision), every host's result checked in the
 * full run: 64 hosts on 3 levels from 8 bytes (most blocks empty) to 256
 * KiB (blocks of one size: the recurrence jumps over steady phases), 1000
 * bytes (blocks of 3 and 4 elements), two operations back to back; 100
 * hosts on an uneven 4-level tree with blocks of two sizes and
 * oversubscribed uplinks; no computation costs and bare payloads. The
 * full run is asked for SimGrid's event dates to a femtosecond
 * (surf/precision; its default ends an activity within 1 ns of another
 * event early, which moves the full run by a few ns where two events come
 * that close: docs/simulator.md).
 */
TEST(sim_ring_recurrence_matches_full_run, TEST_INTEG)
{
    static const char *const cases[] = {
        "--hosts 64 --radix 4 --levels 3 --sizes 8,100,1000,64K,256K",
        "--hosts 64 --radix 4 --levels 3 --sizes 8,1000 --iters 2",
        "--hosts 100 --radix 4 --levels 4 --sizes 8,1000,64K --oversub 3",
        "--hosts 64 --radix 8 --sizes 8,64K --no-compute --no-p2p-headers",
    };
    row_t full[MAX_ROWS], rec[MAX_ROWS];
    char args[512];
    int jumped = 0;

    SKIP_WITHOUT_SIM();
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int nf;
        snprintf(args, sizeof(args), "%s --algos ring", cases[c]);
        nf = sim_two_ways(args,
                          "--data --recurrence off --cfg=surf/precision:1e-15",
                          "--recurrence on", full, rec);
        CHECK(nf >= 2);
        for (int i = 0; i < nf; i++) {
            CHECK(strcmp(full[i].outcome, "ok") == 0 && full[i].checked);
            CHECK(!full[i].recurrent);
            CHECK_MSG(strcmp(rec[i].outcome, "ok") == 0 && rec[i].recurrent,
                      "%s, %ld bytes: not by the recurrence as asked", cases[c],
                      rec[i].bytes);
            CHECK_MSG(fabs(full[i].latency_us - rec[i].latency_us) < 1.5e-6,
                      "%s, %ld bytes: full %.6f us, recurrence %.6f us",
                      cases[c], full[i].bytes, full[i].latency_us,
                      rec[i].latency_us);
            jumped += rec[i].jumped;
        }
    }
    CHECK_MSG(jumped > 0, "no case jumped over a steady phase");
    /* Auto: the recurrence takes over where the full run is refused (4,096
     * hosts, 1 MiB: 3.4e7 messages), and only there. */
    CHECK_EQ_INT(sim("--hosts 4096 --radix 16 --levels 3 --sizes 8,1M "
                     "--algos ring",
                     rec, MAX_ROWS),
                 2);
    CHECK(strcmp(rec[0].outcome, "ok") == 0 && !rec[0].recurrent &&
          rec[0].checked);
    CHECK(strcmp(rec[1].outcome, "ok") == 0 && rec[1].recurrent);
    return TEST_PASSED;
}

TEST(sim_same_seed_same_results, TEST_INTEG)
{
    const char *args = "--hosts 64 --radix 8 --sizes 8,64K --algos inc,rd "
                       "--an switch,server --drop 0.02 --seed 7";
    row_t a[MAX_ROWS], b[MAX_ROWS];
    int na, nb;

    SKIP_WITHOUT_SIM();
    na = sim(args, a, MAX_ROWS);
    nb = sim(args, b, MAX_ROWS);
    CHECK(na == 6);
    CHECK_EQ_INT(na, nb);
    for (int i = 0; i < na; i++) {
        CHECK(strcmp(a[i].algo, b[i].algo) == 0);
        CHECK_MSG(a[i].latency_us == b[i].latency_us, "%s %s %ld: %.6f vs %.6f",
                  a[i].algo, a[i].an, a[i].bytes, a[i].latency_us,
                  b[i].latency_us);
        CHECK_EQ_INT(a[i].dropped, b[i].dropped);
        CHECK_EQ_INT(a[i].retransmits, b[i].retransmits);
    }
    return TEST_PASSED;
}

TEST(sim_loss_still_correct, TEST_INTEG)
{
    row_t r[MAX_ROWS];
    int n;
    long dropped = 0, retrans = 0;

    SKIP_WITHOUT_SIM();
    /* Seed 3 loses packets still on their way to a switch port when
     * their sender's actor ends (SimGrid fails such a receive with "Link
     * failure"; the simulator takes it as a packet lost): it aborted
     * before; every row now runs to the end with the right results. */
    n = sim("--hosts 64 --radix 8 --sizes 8,64K,256K --algos inc "
            "--an switch,server --drop 0.01 --seed 3 --data",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 6);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(strcmp(r[i].outcome, "ok") == 0, "%s %ld bytes: %s", r[i].an,
                  r[i].bytes, r[i].outcome);
        CHECK_EQ_INT(r[i].checked, 1);
        dropped += r[i].dropped;
        retrans += r[i].retransmits;
    }
    /* The loss happened and was recovered by retransmission (not one
     * per lost packet: a lost WAIT answer, or a result's copy to a host
     * that already has it, needs none). */
    CHECK(dropped > 0);
    CHECK(retrans > 0);
    return TEST_PASSED;
}

/*
 * Streaming through the simulator runs the host engine's lock round and
 * the ANs' pool: on a 2-level tree of 32 hosts, from one packet to 64,
 * every host's result is the exact sum on the slots and streamed, every
 * operation streamed (lock per operation and for the whole run), and the
 * same with 1% loss, recovered by the same retransmissions.
 */
TEST(sim_stream_same_results_as_slots, TEST_INTEG)
{
    row_t r[MAX_ROWS];
    int n;

    SKIP_WITHOUT_SIM();
    n = sim("--hosts 32 --radix 8 --algos inc --sizes 4K,512K --slots 8 "
            "--stream-window 32 --proto ll,stream --data --iters 2",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 4);
    for (int i = 0; i < n; i++) {
        int stream = strcmp(r[i].algo, "inc-stream") == 0;
        CHECK_MSG(strcmp(r[i].outcome, "ok") == 0, "%s %ld bytes: %s",
                  r[i].algo, r[i].bytes, r[i].outcome);
        CHECK_EQ_INT(r[i].checked, 1);
        CHECK_EQ_INT(stream, i >= 2);
        if (stream) {
            CHECK_EQ_INT(r[i].ops, 64);
            CHECK_EQ_INT(r[i].streamed, 64);
        } else {
            CHECK_EQ_INT(r[i].ops, -1);
        }
    }
    SIM_ONE_OK("--hosts 32 --radix 8 --algos inc --sizes 512K --slots 8 "
               "--stream-window 32 --proto stream --stream-lock comm "
               "--iters 3 --drop 0.01 --seed 5 --data",
               r);
    CHECK(r[0].dropped > 0);
    CHECK(r[0].retransmits > 0);
    CHECK_EQ_INT(r[0].streamed, 96);
    /* The threshold is the library's: 4 KiB stays on the slots, 16 KiB
     * locks; with locks of 3 operations, every one of 7 streams. */
    n = sim("--hosts 16 --radix 4 --algos inc --sizes 4K,16K --proto stream "
            "--stream-threshold 8K --stream-lock 3 --iters 7 --data",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 2);
    for (int i = 0; i < n; i++) {
        CHECK(strcmp(r[i].outcome, "ok") == 0);
        CHECK_EQ_INT(r[i].ops, 112);
        CHECK_EQ_INT(r[i].streamed, i == 0 ? 0 : 112);
    }
    return TEST_PASSED;
}

/* As incoll-agg with INCOLL_AGG_STREAM_POOL=0: every lock is refused, no
 * operation streams, every result is still right. */
TEST(sim_stream_no_pool_falls_back, TEST_INTEG)
{
    row_t r[1];

    SKIP_WITHOUT_SIM();
    SIM_ONE_OK("--hosts 16 --radix 4 --algos inc --sizes 64K --proto stream "
               "--stream-pool 0 --data --iters 2",
               r);
    CHECK_EQ_INT(r[0].ops, 32);
    CHECK_EQ_INT(r[0].streamed, 0);
    return TEST_PASSED;
}

typedef struct {
    int hosts;
    char ok[8];
    long streamed, ops, granted, refused;
} job_row_t;

/* The per-job lines incoll-sim printed in its last run (sim()). */
static int read_jobs(job_row_t *jobs, int max)
{
    char path[PATH_MAX + 16], line[512];
    FILE *f;
    int n = 0;

    snprintf(path, sizeof(path), "%s/sim.out", test_tmpdir());
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (n < max && fgets(line, sizeof(line), f)) {
        job_row_t *j = &jobs[n];
        int g;
        double lat, bw;
        if (sscanf(line,
                   "#   job %d: %d hosts %lf %lf %7s streamed %ld of %ld "
                   "ops, locks granted %ld refused %ld",
                   &g, &j->hosts, &lat, &bw, j->ok, &j->streamed, &j->ops,
                   &j->granted, &j->refused) == 9 &&
            g == n)
            n++;
    }
    fclose(f);
    return n;
}

/*
 * Two jobs of 16 hosts, each on two leaves of a radix-8 tree, so both
 * rooted at the one root AN, lock it at once: one is granted and streams,
 * the other is refused and runs on its slots; both results are right.
 * The refusal gave the loser a ticket, so the next time round it gets
 * the tree and the winner is refused: each streams exactly once.
 */
TEST(sim_stream_two_jobs_contend, TEST_INTEG)
{
    row_t r[1];
    job_row_t j[4];

    SKIP_WITHOUT_SIM();
    SIM_ONE_OK("--hosts 32 --radix 8 --algos inc --sizes 256K --slots 8 "
               "--proto stream --groups 2 --data",
               r);
    CHECK_EQ_INT(read_jobs(j, 4), 2);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(j[i].hosts, 16);
        CHECK(strcmp(j[i].ok, "ok") == 0);
        CHECK_EQ_INT(j[i].ops, 1);
        CHECK_EQ_INT(j[i].granted + j[i].refused, 1);
    }
    CHECK_EQ_INT(j[0].granted + j[1].granted, 1);
    CHECK_EQ_INT(j[0].streamed + j[1].streamed, 1);

    SIM_ONE_OK("--hosts 32 --radix 8 --algos inc --sizes 256K --slots 8 "
               "--proto stream --groups 2 --iters 2 --data",
               r);
    CHECK_EQ_INT(read_jobs(j, 4), 2);
    for (int i = 0; i < 2; i++) {
        CHECK(strcmp(j[i].ok, "ok") == 0);
        CHECK_EQ_INT(j[i].granted, 1);
        CHECK_EQ_INT(j[i].refused, 1);
        CHECK_EQ_INT(j[i].streamed, 1);
    }
    return TEST_PASSED;
}

/* Runs allreduce_smpi under smpirun; returns the latency or -1. */
static double smpi_latency(const char *prog, const char *xml,
                           const char *hostfile, int np, const char *algo,
                           long bytes)
{
    char out[1100], line[256];
    FILE *f;
    double lat = -1;
    int ok = 0;

    snprintf(out, sizeof(out), "%s/smpi.out", test_tmpdir());
    if (sh("/dev/null",
           "smpirun -np %d -platform '%s' -hostfile '%s' "
           "--cfg=smpi/allreduce:%s --cfg=network/model:CM02 "
           "--cfg=network/crosstraffic:0 --cfg=network/TCP-gamma:1e18 "
           "--cfg=smpi/simulate-computation:no --log=root.thres:warning "
           "'%s' %ld > '%s' 2>&1",
           np, xml, hostfile, algo, prog, bytes, out) != 0)
        return -1;
    f = fopen(out, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "bytes=%*[0-9] latency_us=%lf ok=%d", &lat, &ok) == 2)
            break;
    fclose(f);
    return ok ? lat : -1;
}

/*
 * Results by multicast, counted: on 16 hosts under 4 leaves of 4 (the
 * emulated fabric's shape), 3 allreduces of one packet, every result
 * checked. By unicast the leaf AN sends each result to its 4 hosts and
 * its aggregate up, 5 datagrams per result; by multicast one up and one
 * to the group, 2; with the dual send (8 bytes <= --mcast-dual) the
 * group's copy and the 4 unicast ones, 6, while 1 KiB, above it, stays
 * at 2. On 32 hosts under leaves of 16, 17 against 2, and the server
 * AN, whose one NIC sent the 16 copies one after another, delivers
 * sooner. A copy lost to --drop is repaired.
 */
TEST(sim_mcast_counts, TEST_INTEG)
{
    char bin[1024], out[1100];
    row_t r[MAX_ROWS];
    int n;

    SKIP_WITHOUT_SIM();
    n = sim("--hosts 16 --radix 4 --sizes 8,1K --algos inc --an switch,server "
            "--mcast 0,1 --iters 3 --data",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 8);
    for (int i = 0; i < n; i++) {
        long per = r[i].mcast ? 2 : 5;
        CHECK_MSG(strcmp(r[i].outcome, "ok") == 0 && r[i].checked,
                  "%s %s %ld: %s", r[i].algo, r[i].an, r[i].bytes,
                  r[i].outcome);
        CHECK(strcmp(r[i].algo, r[i].mcast ? "inc-mcast" : "inc") == 0);
        CHECK_EQ_INT(r[i].leaf_results, 3);
        CHECK_MSG(r[i].leaf_pkts == per * r[i].leaf_results,
                  "%s %s %ld: leaf sent %ld datagrams for %ld results",
                  r[i].algo, r[i].an, r[i].bytes, r[i].leaf_pkts,
                  r[i].leaf_results);
        /* Every leaf's results went to its group, none by repair. */
        CHECK_EQ_INT(r[i].mcast_sent, r[i].mcast ? 4 * 3 : 0);
        CHECK_EQ_INT(r[i].mcast_repairs, 0);
    }
    n = sim("--hosts 16 --radix 4 --sizes 8,1K --algos inc --an switch "
            "--mcast 1 --mcast-dual 64 --iters 3 --data",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 2);
    for (int i = 0; i < n; i++) {
        long per = r[i].bytes <= 64 ? 6 : 2;
        CHECK(strcmp(r[i].outcome, "ok") == 0 && r[i].checked);
        CHECK_MSG(r[i].leaf_pkts == per * r[i].leaf_results &&
                      r[i].leaf_results == 3,
                  "dual, %ld bytes: leaf sent %ld datagrams for %ld results",
                  r[i].bytes, r[i].leaf_pkts, r[i].leaf_results);
    }
    n = sim("--hosts 32 --radix 16 --sizes 8 --algos inc --an server "
            "--mcast 0,1 --data",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 2);
    CHECK(!r[0].mcast && r[1].mcast);
    CHECK_EQ_INT(r[0].leaf_pkts, 17 * r[0].leaf_results);
    CHECK_EQ_INT(r[1].leaf_pkts, 2 * r[1].leaf_results);
    CHECK_MSG(r[1].latency_us < r[0].latency_us,
              "server AN at radix 16: %.3f us by multicast, %.3f by unicast",
              r[1].latency_us, r[0].latency_us);
    n = sim("--hosts 16 --radix 4 --sizes 8 --algos inc --mcast 1 "
            "--iters 20 --drop 0.05 --seed 5 --data",
            r, MAX_ROWS);
    CHECK_EQ_INT(n, 1);
    CHECK(strcmp(r[0].outcome, "ok") == 0 && r[0].checked);
    CHECK(r[0].dropped > 0);
    CHECK_MSG(r[0].mcast_repairs > 0, "%ld dropped, no repair", r[0].dropped);

    /* Bad values are refused, the option named. */
    sim_path(bin, sizeof(bin));
    snprintf(out, sizeof(out), "%s/mcast.out", test_tmpdir());
    CHECK(sh("/dev/null", "'%s' allreduce --hosts 16 --mcast 2 > '%s' 2>&1",
             bin, out) != 0);
    CHECK(file_has(out, "bad value for --mcast: '2'"));
    CHECK(sh("/dev/null",
             "'%s' allreduce --hosts 16 --mcast 1 --mcast-dual 70000 > '%s' "
             "2>&1",
             bin, out) != 0);
    CHECK(file_has(out, "bad value for --mcast-dual: '70000'"));
    return TEST_PASSED;
}

TEST(sim_host_algorithms_match_smpi, TEST_INTEG)
{
    static const struct {
        const char *ours, *smpi;
    } pairs[] = {{"rd", "rdb"}, {"ring", "lr"}, {"rabenseifner", "rab_rdb"}};
    static const long sizes[] = {8, 65536, 1048576};
    char bin[1024], prog[1100], xml[1100], hosts[1100], args[512];
    row_t r[MAX_ROWS];
    int n;

    SKIP_WITHOUT_SIM();
    if (sh("/dev/null",
           "command -v smpicc >/dev/null && command -v smpirun >/dev/null") !=
        0)
        return test_skip(
            "smpicc/smpirun not found (SimGrid's simgrid package)");
    sim_path(bin, sizeof(bin));
    snprintf(prog, sizeof(prog), "%s/allreduce_smpi", test_tmpdir());
    snprintf(xml, sizeof(xml), "%s/fabric.xml", test_tmpdir());
    snprintf(hosts, sizeof(hosts), "%s/hosts", test_tmpdir());
    if (sh("/dev/null",
           "smpicc -O2 -o '%s' tests/sim/allreduce_smpi.c > '%s/cc.out' 2>&1",
           prog, test_tmpdir()) != 0)
        return test_skip("smpicc cannot build tests/sim/allreduce_smpi.c");
    CHECK(sh("/dev/null",
             "'%s' platform --hosts 16 --radix 4 --xml '%s' --hostfile '%s' "
             "> /dev/null",
             bin, xml, hosts) == 0);
    /* The same platform, no computation cost and bare payloads: only the
     * algorithms and the network model remain. */
    snprintf(
        args, sizeof(args),
        "--hosts 16 --radix 4 --sizes 8,64K,1M --algos rd,ring,rabenseifner "
        "--no-compute --no-p2p-headers --data");
    n = sim(args, r, MAX_ROWS);
    CHECK_EQ_INT(n, 9);
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            double ref;
            const row_t *mine = NULL;
            /* SMPI's lr leaves the ring when there are fewer elements than
             * ranks; ours keeps ringing empty blocks: not comparable. */
            if (strcmp(pairs[p].smpi, "lr") == 0 && sizes[s] / 4 < 16)
                continue;
            ref = smpi_latency(prog, xml, hosts, 16, pairs[p].smpi, sizes[s]);
            for (int i = 0; i < n; i++)
                if (strcmp(r[i].algo, pairs[p].ours) == 0 &&
                    r[i].bytes == sizes[s])
                    mine = &r[i];
            CHECK(mine != NULL);
            CHECK_MSG(ref > 0, "smpirun %s %ld bytes failed", pairs[p].smpi,
                      sizes[s]);
            CHECK(strcmp(mine->outcome, "ok") == 0);
            CHECK_MSG(fabs(mine->latency_us - ref) <= 0.10 * ref,
                      "%s vs SMPI %s, %ld bytes: %.3f us vs %.3f us",
                      pairs[p].ours, pairs[p].smpi, sizes[s], mine->latency_us,
                      ref);
        }
    }
    return TEST_PASSED;
}
