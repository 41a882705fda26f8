/*
 * How libincoll_mpi decides whether MPI_COMM_WORLD is offloaded, as a user
 * meets it (docs/mpi.md, "Bootstrap"):
 *   - with a manager the world group comes from it for any number of
 *     ranks: `incoll mpirun -n 4 --fabric DIR` on a 16-host fabric
 *     offloads, fabric.conf's host count notwithstanding;
 *   - with fabric.conf alone and more ranks than hosts, ranks share the
 *     hosts and reduce through one leader per host, offloaded;
 *   - with fabric.conf alone and fewer ranks than hosts nothing can be
 *     offloaded, and rank 0 says so once at the default log level, with
 *     the reason and the fix.
 * Open MPI jobs of tests/mpi/colls on loopback; skipped, saying why, when
 * Open MPI or the layer is missing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* PATH_MAX, setenv */
#endif
#include "integ.h"
#include "test.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Value of "allreduce offloaded=N" on the layer's stats line; -1 if
 * absent. */
static long allreduces_offloaded(const char *text)
{
    const char *p = strstr(text, "mpi: stats rank 0: allreduce offloaded=");
    if (p == NULL)
        return -1;
    return strtol(p + strlen("mpi: stats rank 0: allreduce offloaded="), NULL,
                  10);
}

/* NULL when Open MPI, the layer and colls are there; else why not. */
static const char *ready(char *colls, size_t len)
{
    static char why[PATH_MAX + 64];
    const char *env = getenv("INCOLL_TEST_PROGDIR");
    char lib[PATH_MAX + 32];

    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        return "mpirun is not installed";
    snprintf(lib, sizeof(lib), "%s/../lib/libincoll_mpi.so", test_bindir());
    snprintf(colls, len, "%s/mpi/colls", env ? env : "build/tests");
    if (access(lib, F_OK) != 0 || access(colls, X_OK) != 0) {
        snprintf(why, sizeof(why), "%s or %s is not built (no mpicc?)", lib,
                 colls);
        return why;
    }
    return NULL;
}

static void job_env(void)
{
    unsetenv("INCOLL_FABRIC");
    unsetenv("INCOLL_MGR");
    unsetenv("INCOLL_SECRET_FILE");
    unsetenv("INCOLL_HOSTS");
    unsetenv("INCOLL_HOST");
    unsetenv("INCOLL_LOG_LEVEL");
    unsetenv("INCOLL_MPI_VERBOSE");
    unsetenv("LD_PRELOAD");
    /* Offload itself is tested here: no selection table. */
    setenv("INCOLL_TUNE_FILE", "none", 1);
    unsetenv("INCOLL_TUNE");
    setenv("INCOLL_MPI_STATS", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
}

/* `incoll mpirun -n 4 --fabric DIR` on a fabric of 16 hosts with a
 * manager: the world of 4 ranks is offloaded on the manager's group. */
TEST(mpi_setup_mgr_over_host_count, TEST_INTEG)
{
    char colls[PATH_MAX], fab[PATH_MAX], out[PATH_MAX + 16];
    const char *why = ready(colls, sizeof(colls));
    char *text;
    int rc;

    if (why)
        return test_skip("%s", why);
    job_env();
    snprintf(fab, sizeof(fab), "%s/fab16", test_tmpdir());
    snprintf(out, sizeof(out), "%s/job.out", test_tmpdir());
    CHECK_MSG(sh(out, "'%s/incoll' fabric up --hosts 16 --radix 4 --dir '%s'",
                 test_bindir(), fab) == 0,
              "fabric up failed: %s", out);
    rc = sh(out,
            "timeout -k 5 120 '%s/incoll' mpirun --layer pmpi -n 4 --fabric "
            "'%s' --stat "
            "-- '%s' --quick",
            test_bindir(), fab, colls);
    text = slurp(out);
    sh(out, "'%s/incoll' fabric down --dir '%s'", test_bindir(), fab);
    CHECK_MSG(rc == 0 && strstr(text, "colls: ok"), "exit %d: %.3000s", rc,
              text);
    CHECK_MSG(strstr(text, ": warn: ") == NULL, "a warning: %.3000s", text);
    CHECK_MSG(allreduces_offloaded(text) > 0, "nothing offloaded: %.3000s",
              text);
    /* The four ranks are h0..h3, under the first leaf: it reduced. */
    CHECK_MSG(strstr(text, "\nan=l0 ") && !strstr(text, "\nan=l0 error") &&
                  !strstr(text, "\nan=l0 packets_in=0 "),
              "%.3000s", text);
    free(text);
    return TEST_PASSED;
}

/* `colls --quick` on ranks MPI ranks of Open MPI (mpich: MPICH) on this
 * machine with the layer lib preloaded and INCOLL_FABRIC passed on; the
 * exit status, the output in out. */
static int colls_job(int mpich, const char *out, int ranks, const char *lib,
                     const char *colls)
{
    if (mpich)
        return sh(out,
                  "timeout -k 5 120 mpiexec.mpich -n %d -genv LD_PRELOAD '%s' "
                  "'%s' --quick",
                  ranks, lib, colls);
    return sh(out,
              "timeout -k 5 120 mpirun -n %d --oversubscribe --bind-to none "
              "--mca btl tcp,self --mca btl_tcp_if_include lo --mca "
              "oob_tcp_if_include lo -x LD_PRELOAD='%s' -x INCOLL_FABRIC "
              "-x INCOLL_MPI_STATS '%s' --quick",
              ranks, lib, colls);
}

/*
 * fabric.conf alone (no manager) with hosts hosts and ranks MPI ranks
 * that do not match: nothing is offloaded, every answer is still right,
 * and rank 0 warns once (at the default log level) with the reason
 * (want_why) and the fix (want_fix).
 */
static int warns_not_offloaded(int hosts, int ranks, const char *want_why,
                               const char *want_fix)
{
    char colls[PATH_MAX], fab[PATH_MAX], out[PATH_MAX + 16];
    char lib[PATH_MAX + 32];
    const char *why = ready(colls, sizeof(colls));
    char *text;
    int rc;

    if (why)
        return test_skip("%s", why);
    job_env();
    snprintf(lib, sizeof(lib), "%s/../lib/libincoll_mpi.so", test_bindir());
    snprintf(fab, sizeof(fab), "%s/fab%dx%d", test_tmpdir(), hosts, ranks);
    snprintf(out, sizeof(out), "%s/job.out", test_tmpdir());
    CHECK_MSG(sh(out,
                 "'%s/incoll' fabric up --no-mgr --hosts %d --radix 2 "
                 "--dir '%s'",
                 test_bindir(), hosts, fab) == 0,
              "fabric up failed: %s", out);
    setenv("INCOLL_FABRIC", fab, 1);
    rc = colls_job(0, out, ranks, lib, colls);
    text = slurp(out);
    sh(out, "'%s/incoll' fabric down --dir '%s'", test_bindir(), fab);
    CHECK_MSG(rc == 0 && strstr(text, "colls: ok"), "exit %d: %.3000s", rc,
              text);
    CHECK_MSG(count_of(text, ": warn: ") == 1 &&
                  count_of(text, "MPI_COMM_WORLD is not offloaded") == 1 &&
                  strstr(text, want_why) && strstr(text, want_fix),
              "want one warning with reason and fix: %.3000s", text);
    CHECK_MSG(allreduces_offloaded(text) == 0, "%.3000s", text);
    free(text);
    return TEST_PASSED;
}

/* 4 hosts and 3 ranks: host 3 of the world group would have no rank. */
TEST(mpi_setup_warns_when_world_not_offloaded, TEST_INTEG)
{
    return warns_not_offloaded(4, 3,
                               "has 4 hosts but MPI_COMM_WORLD has only 3 "
                               "ranks",
                               "to fix: run at least 4 ranks");
}

/*
 * fabric.conf alone (no manager), 2 hosts and more MPI ranks, all on this
 * machine: rank r is on host r * 2 / ranks, each host's ranks reduce
 * through its first one, which alone is the AN's child. colls (every
 * collective on the world, a dup and a split, against PMPI_) is right, the
 * world is offloaded without a warning, and the AN counts exactly one
 * contribution per host per reduction. mpich: MPICH instead of Open MPI.
 */
static int ppn_without_mgr(int mpich, int ranks)
{
    char colls[PATH_MAX], fab[PATH_MAX], out[PATH_MAX + 16];
    char lib[PATH_MAX + 32];
    const char *why = ready(colls, sizeof(colls));
    uint64_t c0 = 0, r0 = 0, c1 = 0, r1 = 0;
    char *text;
    int rc;

    if (why)
        return test_skip("%s", why);
    if (mpich && system("command -v mpiexec.mpich >/dev/null 2>&1") != 0)
        return test_skip("MPICH (mpiexec.mpich) is not installed");
    job_env();
    snprintf(lib, sizeof(lib), "%s/../lib/libincoll_mpi%s.so", test_bindir(),
             mpich ? "_mpich" : "");
    if (mpich) {
        const char *env = getenv("INCOLL_TEST_PROGDIR");
        snprintf(colls, sizeof(colls), "%s/mpi-mpich/colls",
                 env ? env : "build/tests");
        if (access(lib, F_OK) != 0 || access(colls, X_OK) != 0)
            return test_skip("%s or %s is not built (no mpicc.mpich?)", lib,
                             colls);
    }
    snprintf(fab, sizeof(fab), "%s/fab2x%d%s", test_tmpdir(), ranks,
             mpich ? "m" : "");
    snprintf(out, sizeof(out), "%s/job.out", test_tmpdir());
    CHECK_MSG(sh(out,
                 "'%s/incoll' fabric up --no-mgr --hosts 2 --radix 2 "
                 "--dir '%s'",
                 test_bindir(), fab) == 0,
              "fabric up failed: %s", out);
    setenv("INCOLL_FABRIC", fab, 1);
    if (an_counts(fab, "l0", &c0, &r0) != 0) {
        sh(out, "'%s/incoll' fabric down --dir '%s'", test_bindir(), fab);
        CHECK_MSG(0, "incoll stat failed");
    }
    rc = colls_job(mpich, out, ranks, lib, colls);
    text = slurp(out);
    if (an_counts(fab, "l0", &c1, &r1) != 0)
        c1 = r1 = 0;
    sh(out, "'%s/incoll' fabric down --dir '%s'", test_bindir(), fab);
    CHECK_MSG(rc == 0 && strstr(text, "colls: ok"), "exit %d: %.3000s", rc,
              text);
    CHECK_MSG(strstr(text, ": warn: ") == NULL, "a warning: %.3000s", text);
    CHECK_MSG(allreduces_offloaded(text) > 0, "nothing offloaded: %.3000s",
              text);
    CHECK_MSG(r1 > r0 && c1 - c0 == 2 * (r1 - r0),
              "the AN saw %" PRIu64 " contributions in %" PRIu64
              " reductions, want 2 per reduction (one per host)",
              c1 - c0, r1 - r0);
    free(text);
    return TEST_PASSED;
}

/* Open MPI, 4 ranks on 2 hosts: 2 per host. */
TEST(mpi_setup_ppn_without_mgr, TEST_INTEG)
{
    return ppn_without_mgr(0, 4);
}

/* MPICH, 5 ranks on 2 hosts: 3 on one, 2 on the other. */
TEST(mpi_setup_mpich_odd_ppn_without_mgr, TEST_INTEG)
{
    return ppn_without_mgr(1, 5);
}
