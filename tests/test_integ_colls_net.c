/*
 * Integration tests of the in-network reduce, broadcast, barrier, allgather and
 * gather: real incoll-agg daemons on 127.0.0.1 (test_fabric_up, tests/integ.c),
 * real ranks (`incoll run`) running tests/progs/inc_coll_check, which checks
 * every value, that non-roots send no broadcast payload and that gathers send
 * one block plus descriptors; then every AN's counters (`incoll stat`) must
 * show each segment of each collective completed exactly once, on a 2-level and
 * a 3-level tree, clean and under loss, duplication and reordering. Every test
 * brings its fabric down, also when it fails.
 */
#include "integ.h"

#include "incoll.h"

#include "common/fabric_conf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Segments of n bytes with payload-byte packets. */
static uint64_t nsegs(uint64_t n, uint32_t payload)
{
    return (n + payload - 1) / payload;
}

/*
 * Runs inc_coll_check with sizes on hosts ranks of a fresh fabric of the given
 * radix (faults: 5% loss, 2% duplication, 5% reordering on every sender),
 * then checks on every AN: coll_bcast, coll_reduce and coll_barrier equal
 * the segments the job must have made (each completed exactly once), no
 * allreduce went through, nothing was malformed or mismatched.
 */
static int colls_job(int hosts, int radix, int faults, const size_t *sizes,
                     int nsizes)
{
    char args[512], *out = NULL, *stat = NULL;
    const char *dir;
    fabric_conf_t conf;
    uint64_t bsegs = 0, rsegs = 0, gsegs = 0, ssegs = 0, rssegs = 0;
    uint64_t barriers = 1, recovered = 0, maxsz = 0;
    int rc, ret = TEST_FAILED, n = 0;
    char path[PATH_MAX];
    double t0;

    snprintf(path, sizeof(path), "%s/inc_coll_check", progdir());
    if (access(path, X_OK) != 0)
        return test_skip("%s not built", path);
    snprintf(path, sizeof(path), "%s/incoll-agg", test_bindir());
    if (access(path, X_OK) != 0)
        return test_skip("%s not built", path);
    if (faults) {
        setenv("INCOLL_FAULT_DROP", "0.05", 1);
        setenv("INCOLL_FAULT_DUP", "0.02", 1);
        setenv("INCOLL_FAULT_REORDER", "0.05", 1);
    }
    dir = test_tmpdir();
    memset(&conf, 0, sizeof(conf));
    if (test_fabric_up(dir, hosts, radix) != 0)
        goto out;
    if (load_conf(dir, &conf) != 0)
        goto out;
    n = snprintf(args, sizeof(args), "--sizes ");
    for (int s = 0; s < nsizes; s++) {
        n += snprintf(args + n, sizeof(args) - (size_t)n, "%s%zu", s ? "," : "",
                      sizes[s]);
        /* Three roots per size, a barrier before each. */
        bsegs += 3 * nsegs(sizes[s], conf.payload);
        rsegs += 3 * nsegs(sizes[s] * 8, conf.payload);
        /* Gathers: segments of the whole vector, less a piece
         * descriptor (8 bytes) each. */
        gsegs += 3 * nsegs(sizes[s] * (uint64_t)hosts, conf.payload - 8);
        ssegs += 3 * nsegs(sizes[s] * (uint64_t)hosts, conf.payload - 8);
        if (sizes[s] > maxsz)
            maxsz = sizes[s];
        barriers += 3;
    }
    /* Reduce_scatters of n int64 per rank where n x ranks fits the largest
     * size (inc_coll_check's buffers). */
    for (int s = 0; s < nsizes; s++)
        if (sizes[s] * (uint64_t)hosts <= maxsz)
            rssegs +=
                3 * nsegs(sizes[s] * (uint64_t)hosts, (conf.payload - 8) / 8);
    t0 = now_s();
    rc = run_cmd(&out, 100,
                 "'%s/incoll' run -n %d --fabric '%s' --timeout 90 -- "
                 "'%s/inc_coll_check' %s",
                 test_bindir(), hosts, dir, progdir(), args);
    fprintf(stderr, "    %d ranks, radix %d%s: %.1f s\n", hosts, radix,
            faults ? ", faults" : "", now_s() - t0);
    if (rc != 0 || strstr(out, ": ok") == NULL) {
        fprintf(stderr, "    incoll run exited %d:\n%s", rc, out);
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
        static const char *const keys[] = {
            "coll_bcast",         "coll_reduce",       "coll_barrier",
            "coll_allreduce",     "malformed_dropped", "mismatch_dropped",
            "coll_allgather",     "coll_gather",       "coll_scatter",
            "coll_reduce_scatter"};
        uint64_t want[10] = {bsegs, rsegs, barriers, 0,     0,
                             0,     gsegs, gsegs,    ssegs, rssegs},
                 v;
        for (int k = 0; k < 10; k++) {
            if (stat_get(stat, an, keys[k], &v) != 0) {
                fprintf(stderr, "    no %s for an %s in:\n%s", keys[k], an,
                        stat);
                goto out;
            }
            if (v != want[k]) {
                fprintf(stderr, "    an %s: %s=%llu, want %llu\n%s", an,
                        keys[k], (unsigned long long)v,
                        (unsigned long long)want[k], stat);
                goto out;
            }
        }
        if (stat_get(stat, an, "duplicates_dropped", &v) == 0)
            recovered += v;
        if (stat_get(stat, an, "results_resent", &v) == 0)
            recovered += v;
    }
    if (faults && recovered == 0) {
        fprintf(stderr,
                "    faults were injected but no AN saw a duplicate "
                "or resent a result:\n%s",
                stat);
        goto out;
    }
    ret = TEST_PASSED;
out:
    free(out);
    free(stat);
    test_fabric_down(dir);
    fabric_conf_free(&conf);
    return ret;
}

static const size_t colls_sizes[] = {0, 1, 7, 1001, 65536, 262144};

/* A 2-level tree: 9 ranks under 3 leaves. */
TEST(integ_colls_tree9, TEST_INTEG)
{
    return colls_job(9, 3, 0, colls_sizes, 6);
}

/* A 3-level tree (radix 2: 4 leaves, 2 middle ANs, a root) under 5% loss,
 * 2% duplication and 5% reordering. */
TEST(integ_colls_tree8_faults, TEST_INTEG)
{
    static const size_t sizes[] = {0, 1, 7, 1001, 9000};
    return colls_job(8, 2, 1, sizes, 5);
}
