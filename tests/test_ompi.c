/*
 * Integration tests of coll/incoll, the native Open MPI collective
 * component (build/lib/openmpi/mca_coll_incoll.so): `ompi_info` lists it,
 * and real, stock `mpirun` jobs (the component found through
 * --mca mca_base_component_path, nothing preloaded) of tests/ompi/ocolls
 * run every collective in its blocking, nonblocking and persistent forms
 * with checked results, while the component's statistics and `incoll stat`
 * show that they ran on the ANs. Also: communicators and calls it leaves
 * to Open MPI, a PMPI profiler preloaded beside it, the PMPI layer
 * preloaded too, another Open MPI. They skip only when Open MPI or its
 * development headers are missing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "test.h"
#include "integ.h"

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#define OMPI_HEADER                                                            \
    "/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi/ompi/mca/coll/coll.h"
#define FLAGS                                                                  \
    "--oversubscribe --bind-to none --mca btl tcp,self "                       \
    "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"
/* Open MPI's own components, then ours. */
#define COMPONENT_PATH                                                         \
    "\"$(ompi_info --path pkglibdir --parsable | "                             \
    "sed -n 's/^path:pkglibdir://p'):%s\""

static char compdir[PATH_MAX], prog[PATH_MAX + 32], prof[PATH_MAX + 32];

/* NULL when the tests can run, else why they skip. A component that is
 * missing while Open MPI's headers are there is a failure of the build,
 * not a skip: the caller checks compdir. */
static const char *ready(void)
{
    char inc[PATH_MAX + 64];
    if (system("command -v mpirun >/dev/null 2>&1 && "
               "command -v ompi_info >/dev/null 2>&1") != 0)
        return "Open MPI (mpirun, ompi_info) is not installed";
    snprintf(inc, sizeof(inc),
             "mpicc --showme:incdirs 2>/dev/null | tr ' ' '\\n' | "
             "while read d; do test -f \"$d/ompi/mca/coll/coll.h\" && "
             "echo yes; done | grep -q yes");
    if (system(inc) != 0 && access(OMPI_HEADER, F_OK) != 0)
        return "Open MPI's development headers (ompi/mca/coll/coll.h, "
               "libopenmpi-dev) are missing";
    snprintf(compdir, sizeof(compdir), "%s/../lib/openmpi", test_bindir());
    snprintf(prog, sizeof(prog), "%s/ompi/ocolls", progdir());
    snprintf(prof, sizeof(prof), "%s/ompi/liboprof.so", progdir());
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    unsetenv("INCOLL_FABRIC");
    unsetenv("INCOLL_MGR");
    unsetenv("LD_PRELOAD");
    /* These test the offload paths: no selection table (ompi_component_tune
     * sets its own). */
    setenv("INCOLL_TUNE_FILE", "none", 1);
    unsetenv("INCOLL_TUNE");
    return NULL;
}

static int built(void)
{
    char so[PATH_MAX + 32];
    snprintf(so, sizeof(so), "%s/mca_coll_incoll.so", compdir);
    if (access(so, F_OK) != 0 || access(prog, X_OK) != 0) {
        fprintf(stderr,
                "    Open MPI's headers are installed but %s or %s is not "
                "built\n",
                so, prog);
        return 0;
    }
    return 1;
}

/* ocolls on np ranks with the component's path, stats on, and extra
 * mpirun arguments; the output in out. */
static int job(const char *out, int np, const char *extra)
{
    return sh(out,
              "timeout -k 5 120 mpirun -n %d " FLAGS
              " --mca mca_base_component_path " COMPONENT_PATH
              " --mca coll_incoll_stats 1 %s '%s'",
              np, compdir, extra, prog);
}

/* The value of "<coll> net=N" (field net, host or fallback) on rank 0's
 * stats line; -1 when absent. */
static long stat_of(const char *text, const char *coll, const char *field)
{
    const char *line = strstr(text, "coll/incoll: stats rank 0:");
    char key[64];
    const char *p, *end;

    if (line == NULL)
        return -1;
    end = strchr(line, '\n');
    snprintf(key, sizeof(key), " %s %s=", coll, field);
    p = strstr(line, key);
    if (p == NULL || (end && p > end)) {
        /* fields after the collective's name: " coll net=.. host=.." */
        snprintf(key, sizeof(key), " %s net=", coll);
        p = strstr(line, key);
        if (p == NULL || (end && p > end))
            return -1;
        snprintf(key, sizeof(key), " %s=", field);
        p = strstr(p, key);
        if (p == NULL || (end && p > end))
            return -1;
    }
    return strtol(strstr(p, "=") + 1, NULL, 10);
}

/* How many times text says needle. */
static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static long fabric_reductions(const char *dir, const char *out)
{
    char *text;
    long total = 0;
    if (sh(out, "'%s/incoll' stat --fabric '%s'", test_bindir(), dir) != 0)
        return -1;
    text = slurp(out);
    for (const char *p = text; (p = strstr(p, " reductions=")); p++)
        total += strtol(p + strlen(" reductions="), NULL, 10);
    free(text);
    return total;
}

static const char *const colls[] = {
    "allreduce",      "reduce", "bcast",   "barrier",
    "allgather",      "gather", "scatter", "reduce_scatter_block",
    "reduce_scatter", NULL};

/* `ompi_info` lists the component and its parameters. */
TEST(ompi_component_info, TEST_INTEG)
{
    const char *why = ready();
    char out[PATH_MAX], *text;
    int rc;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(out, sizeof(out), "%s/ompi_info.out", test_tmpdir());
    rc = sh(out,
            "OMPI_MCA_mca_base_component_path=" COMPONENT_PATH
            " ompi_info && OMPI_MCA_mca_base_component_path=" COMPONENT_PATH
            " ompi_info --param coll incoll --level 9",
            compdir, compdir);
    text = slurp(out);
    CHECK_MSG(rc == 0, "ompi_info exited %d: %s", rc, out);
    CHECK_MSG(strstr(text, "MCA coll: incoll ("), "no 'MCA coll: incoll' in %s",
              out);
    static const char *const params[] = {
        "coll_incoll_enable",    "coll_incoll_priority",
        "coll_incoll_verbose",   "coll_incoll_fabric",
        "coll_incoll_mgr",       "coll_incoll_secret_file",
        "coll_incoll_colls",     "coll_incoll_max_bytes",
        "coll_incoll_min_ranks", "coll_incoll_stats",
        "coll_incoll_agree",     NULL};
    for (int i = 0; params[i]; i++)
        CHECK_MSG(strstr(text, params[i]), "no %s in %s", params[i], out);
    free(text);
    return TEST_PASSED;
}

/*
 * Both front ends are built on libincoll's public API only
 * (tests/ompi/public_api.sh): no include of libincoll's internal headers,
 * the shared libincoll linked rather than its code, and only symbols it
 * exports used. No MPI job: it runs whenever the layer (mpicc) is built.
 */
TEST(ompi_front_ends_public_api, TEST_INTEG)
{
    char out[PATH_MAX + 64], lib[PATH_MAX], *text;
    int rc, want = 0;

    snprintf(lib, sizeof(lib), "%s/../lib", test_bindir());
    snprintf(out, sizeof(out), "%s/libincoll_mpi.so", lib);
    if (access(out, F_OK) == 0)
        want++;
    snprintf(out, sizeof(out), "%s/openmpi/mca_coll_incoll.so", lib);
    if (access(out, F_OK) == 0)
        want++;
    if (want == 0 && ready() != NULL)
        return test_skip("%s", ready());
    snprintf(out, sizeof(out), "%s/public_api.out", test_tmpdir());
    rc = sh(out, "bash '%s/tests/ompi/public_api.sh' '%s' '%s'", test_srcdir(),
            test_srcdir(), lib);
    text = slurp(out);
    CHECK_MSG(rc == 0, "public_api.sh exited %d:\n%s", rc, text);
    {
        int n = -1;
        const char *c = strstr(text, "checked: ");
        CHECK_MSG(c && sscanf(c, "checked: %d", &n) == 1 && n >= want,
                  "checked %d front ends, %d built: %s", n, want, text);
    }
    free(text);
    return TEST_PASSED;
}

/* The pause osu_compare.sh puts at the start of each iteration for the
 * fabric in dir (a given emu.state line, or none) and the environment's
 * GAP_US; -1 when it does not say. No MPI job: zero rounds. */
static long compare_gap(const char *dir, const char *state, const char *env,
                        int max)
{
    char path[PATH_MAX], out[PATH_MAX];
    const char *p;
    char *text;
    long gap = -1;
    FILE *f;

    snprintf(path, sizeof(path), "%s/emu.state", dir);
    unlink(path);
    if (state && (f = fopen(path, "w")) != NULL) {
        fprintf(f, "# incoll emulated fabric\n%s\nnetns name=x-l0\n", state);
        fclose(f);
    }
    snprintf(out, sizeof(out), "%s/gap.out", dir);
    if (sh(out, "cd '%s' && %s sh tests/ompi/osu_compare.sh '%s' 8 0 %d 1",
           test_srcdir(), env, dir, max) != 0)
        return -1;
    text = slurp(out);
    if (text && (p = strstr(text, "a pause of ")) != NULL)
        gap = strtol(p + strlen("a pause of "), NULL, 10);
    free(text);
    return gap;
}

/*
 * osu_compare.sh (the measurement of docs/ompi.md) pauses at the start of
 * each iteration for as long as a host link of the emulated fabric takes
 * to get back the tokens of the largest call, at most a full bucket (1 ms
 * of the link's rate, at least two frames, as emu.c sizes it), so that no
 * call waits for tokens its iteration's barrier used: 16 KiB and 1 KiB of
 * MPI's at 100 Mbit/s are 1393 us; 1 MiB at 50 Mbit/s the bucket of two
 * 9000-byte frames, 2901 us. GAP_US sets it; another fabric has none.
 */
TEST(ompi_osu_compare_gap, TEST_INTEG)
{
    char dir[PATH_MAX];

    if (ready() != NULL)
        return test_skip("%s", ready());
    snprintf(dir, sizeof(dir), "%s/gap", test_tmpdir());
    CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
    CHECK_EQ_INT(compare_gap(dir,
                             "emu prefix=x rate=100000000 uplink=0 mtu=9000",
                             "GAP_US=auto", 16384),
                 1393);
    CHECK_EQ_INT(compare_gap(dir,
                             "emu prefix=x rate=50000000 uplink=0 mtu=9000",
                             "GAP_US=auto", 1048576),
                 2901);
    CHECK_EQ_INT(compare_gap(dir,
                             "emu prefix=x rate=100000000 uplink=0 mtu=9000",
                             "", 16384),
                 0);
    CHECK_EQ_INT(compare_gap(dir,
                             "emu prefix=x rate=100000000 uplink=0 mtu=9000",
                             "GAP_US=250", 16384),
                 250);
    CHECK_EQ_INT(compare_gap(dir,
                             "emu prefix=x rate=100000000 uplink=0 mtu=9000",
                             "GAP_US=0", 16384),
                 0);
    CHECK_EQ_INT(compare_gap(dir, NULL, "", 16384), 0);
    return TEST_PASSED;
}

/*
 * A stock mpirun, nothing preloaded, the fabric given by an MCA parameter:
 * every collective and form right (ocolls checks), each one run on the
 * ANs (the component's counts, `incoll stat`), the user op and MAXLOC and
 * unequal reduce_scatter counts left to Open MPI, and the dup and split,
 * which a fabric without a manager cannot host, left to Open MPI whole,
 * saying why.
 */
TEST(ompi_component_colls, TEST_INTEG)
{
    const char *why = ready();
    char dir[PATH_MAX], out[PATH_MAX + 16], st[PATH_MAX + 16],
        extra[PATH_MAX + 128];
    char *text;
    long red;
    int rc;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(dir, sizeof(dir), "%s/ompi-fabric", test_tmpdir());
    snprintf(out, sizeof(out), "%s.out", dir);
    snprintf(st, sizeof(st), "%s.stat", dir);
    CHECK_EQ_INT(test_fabric_up(dir, 4, 2), 0);
    /* The agreement is off by default, as in the PMPI layer, also
     * without a manager: the nonblocking and persistent forms run in the
     * network (with it on they would go below). */
    snprintf(extra, sizeof(extra),
             "--mca coll_incoll_fabric '%s' --mca coll_incoll_verbose 1", dir);
    rc = job(out, 4, extra);
    red = fabric_reductions(dir, st);
    test_fabric_down(dir);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", rc, out);
    CHECK_MSG(strstr(text, "MPI_COMM_WORLD (4 ranks): offloaded"), "%s", out);
    CHECK_MSG(strstr(text, "SPLIT FROM 0 (2 ranks): not offloaded"), "%s", out);
    for (int i = 0; colls[i]; i++)
        CHECK_MSG(stat_of(text, colls[i], "net") > 0, "%s net=%ld: %s",
                  colls[i], stat_of(text, colls[i], "net"), out);
    /* the user op and MAXLOC; unequal counts */
    CHECK_MSG(stat_of(text, "allreduce", "fallback") == 2, "%s", out);
    CHECK_MSG(stat_of(text, "reduce_scatter", "fallback") == 1, "%s", out);
    CHECK_MSG(stat_of(text, "allreduce", "host") == 0, "%s", out);
    CHECK_MSG(red > 0, "incoll stat shows %ld reductions: %s", red, st);
    free(text);
    return TEST_PASSED;
}

/*
 * The component follows libincoll's selection table per call, exactly as
 * the PMPI layer: small broadcasts and every scatter go to the module
 * below (counted "tuned"), the blocking allreduces of doubles and every
 * nonblocking and persistent one run on libincoll's host-based ring
 * (counted "host"), the blocking ones of ints in the network; ocolls
 * checks every result.
 */
TEST(ompi_component_tune, TEST_INTEG)
{
    const char *why = ready();
    char dir[PATH_MAX], out[PATH_MAX + 16], extra[PATH_MAX + 128];
    char *text;
    int rc;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(dir, sizeof(dir), "%s/ompi-tune", test_tmpdir());
    snprintf(out, sizeof(out), "%s.out", dir);
    CHECK_EQ_INT(test_fabric_up(dir, 4, 2), 0);
    snprintf(extra, sizeof(extra),
             "--mca coll_incoll_fabric '%s' --mca coll_incoll_agree 0", dir);
    setenv("INCOLL_TUNE",
           "bcast:0-1K:mpi,scatter:*:mpi,allreduce:blocking:*:ring:dtype=float,"
           "allreduce:nb:*:ring,allreduce:persistent:*:ring",
           1);
    rc = job(out, 4, extra);
    unsetenv("INCOLL_TUNE");
    test_fabric_down(dir);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", rc, out);
    CHECK_MSG(stat_of(text, "bcast", "tuned") > 0, "%s", out);
    CHECK_MSG(stat_of(text, "scatter", "tuned") > 0, "%s", out);
    CHECK_MSG(stat_of(text, "scatter", "net") == 0, "%s", out);
    /* on the hosts: the blocking ones of doubles and every nonblocking
     * and persistent one (ocolls runs each form of each type at each
     * size); in the network: the blocking ones of ints alone */
    CHECK_MSG(stat_of(text, "allreduce", "net") > 0, "%s", out);
    CHECK_MSG(stat_of(text, "allreduce", "host") >
                  2 * stat_of(text, "allreduce", "net"),
              "%s", out);
    CHECK_MSG(stat_of(text, "allreduce", "tuned") == 0, "%s", out);
    CHECK_MSG(stat_of(text, "gather", "tuned") == 0, "%s", out);
    free(text);
    return TEST_PASSED;
}

/*
 * With the fabric's manager (its fabric.env: INCOLL_MGR, INCOLL_SECRET_FILE,
 * INCOLL_HOSTS, libincoll's own settings) every communicator gets a fabric
 * group: the dup and both halves of the split run on the ANs too.
 */
TEST(ompi_component_mgr, TEST_INTEG)
{
    const char *why = ready();
    char dir[PATH_MAX], out[PATH_MAX + 16], extra[PATH_MAX + 128];
    char *text;
    int rc;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(dir, sizeof(dir), "%s/ompi-mgr", test_tmpdir());
    snprintf(out, sizeof(out), "%s.out", dir);
    CHECK_EQ_INT(test_fabric_up(dir, 4, 2), 0);
    snprintf(extra, sizeof(extra),
             "-x INCOLL_MGR -x INCOLL_SECRET_FILE -x INCOLL_HOSTS "
             "--mca coll_incoll_verbose 1");
    {
        char cmd[6 * PATH_MAX];
        snprintf(cmd, sizeof(cmd),
                 ". '%s/fabric.env' && timeout -k 5 120 "
                 "mpirun -n 4 " FLAGS
                 " --mca mca_base_component_path " COMPONENT_PATH
                 " --mca coll_incoll_stats 1 %s '%s'",
                 dir, compdir, extra, prog);
        rc = sh(out, "%s", cmd);
    }
    test_fabric_down(dir);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", rc, out);
    CHECK_MSG(strstr(text, "DUP FROM 0 (4 ranks): offloaded"), "%s", out);
    CHECK_MSG(strstr(text, "SPLIT FROM 0 (2 ranks): offloaded"), "%s", out);
    CHECK_MSG(!strstr(text, "not offloaded"), "%s", out);
    for (int i = 0; colls[i]; i++)
        CHECK_MSG(stat_of(text, colls[i], "net") > 0, "%s: %s", colls[i], out);
    free(text);
    return TEST_PASSED;
}

static long prof_calls(const char *text)
{
    const char *p = strstr(text, "oprof: rank 0 calls=");
    return p ? strtol(p + strlen("oprof: rank 0 calls="), NULL, 10) : -1;
}

/*
 * A PMPI profiler preloaded beside the component sees every MPI call (the
 * same counts as under Open MPI alone) while the collectives run on the
 * ANs; and the PMPI layer preloaded too runs the collectives itself, the
 * component standing aside and saying so once.
 */
TEST(ompi_component_profiler, TEST_INTEG)
{
    const char *why = ready();
    char dir[PATH_MAX], out[PATH_MAX + 16], base[PATH_MAX + 16];
    char lay[PATH_MAX + 16], extra[3 * PATH_MAX];
    char *text, *btext;
    int rc, brc, lrc;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    CHECK_MSG(access(prof, F_OK) == 0, "%s is not built", prof);
    snprintf(dir, sizeof(dir), "%s/ompi-prof", test_tmpdir());
    snprintf(out, sizeof(out), "%s.out", dir);
    snprintf(base, sizeof(base), "%s.base", dir);
    snprintf(lay, sizeof(lay), "%s.layer", dir);
    CHECK_EQ_INT(test_fabric_up(dir, 4, 2), 0);
    snprintf(extra, sizeof(extra),
             "-x LD_PRELOAD='%s' --mca coll_incoll_fabric '%s'", prof, dir);
    rc = job(out, 4, extra);
    /* the same program under Open MPI alone */
    snprintf(extra, sizeof(extra),
             "-x LD_PRELOAD='%s' --mca coll_incoll_enable 0", prof);
    brc = job(base, 4, extra);
    /* the PMPI layer preloaded as well */
    snprintf(extra, sizeof(extra),
             "-x LD_PRELOAD='%s/../lib/libincoll_mpi.so' -x INCOLL_FABRIC='%s' "
             "-x INCOLL_MPI_STATS=1",
             test_bindir(), dir);
    lrc = job(lay, 4, extra);
    test_fabric_down(dir);
    text = slurp(out);
    btext = slurp(base);
    CHECK_MSG(rc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", rc, out);
    CHECK_MSG(brc == 0 && strstr(btext, "ocolls: ok"), "exit %d: %s", brc,
              base);
    CHECK_MSG(prof_calls(text) > 100 && prof_calls(text) == prof_calls(btext),
              "the profiler counted %ld calls with the component, %ld "
              "without: %s %s",
              prof_calls(text), prof_calls(btext), out, base);
    CHECK_MSG(stat_of(text, "allreduce", "net") > 0, "%s", out);
    CHECK_MSG(stat_of(btext, "allreduce", "net") <= 0, "%s", base);
    free(text);
    free(btext);
    text = slurp(lay);
    CHECK_MSG(lrc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", lrc, lay);
    CHECK_MSG(strstr(text, "is preloaded and runs the collectives itself; "
                           "coll/incoll stands aside"),
              "%s", lay);
    CHECK_MSG(strstr(text, "mpi: stats rank 0: allreduce offloaded="), "%s",
              lay);
    CHECK_MSG(!strstr(text, "allreduce offloaded=0 "), "%s", lay);
    CHECK_MSG(strstr(text, "coll/incoll: stats rank 0: no collective"), "%s",
              lay);
    free(text);
    return TEST_PASSED;
}

/*
 * The component standing aside for the whole job: ocolls on np ranks of a
 * fabric of hosts hosts brought up by `incoll fabric up` with up_flags,
 * with the mpirun arguments env and coll_incoll_fabric. The job is right
 * on Open MPI's own, nothing is counted, and rank 0 says once (once: the
 * text said once) each of want[] (NULL-terminated).
 */
static int stands_aside(const char *name, int hosts, int np,
                        const char *up_flags, const char *env, const char *once,
                        const char *const *want)
{
    const char *why = ready();
    char dir[PATH_MAX], out[PATH_MAX + 16], extra[PATH_MAX + 256];
    char *text;
    int rc, n;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(dir, sizeof(dir), "%s/%s", test_tmpdir(), name);
    snprintf(out, sizeof(out), "%s.out", dir);
    CHECK_MSG(sh(out,
                 "'%s/incoll' fabric up %s --hosts %d --radix 2 --dir '%s'",
                 test_bindir(), up_flags, hosts, dir) == 0,
              "fabric up failed: %s", out);
    snprintf(extra, sizeof(extra), "%s --mca coll_incoll_fabric '%s'", env,
             dir);
    rc = job(out, np, extra);
    test_fabric_down(dir);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", rc, out);
    n = count_of(text, once);
    CHECK_MSG(n == 1, "said %d times, want once: %s", n, out);
    for (int i = 0; want[i]; i++)
        CHECK_MSG(strstr(text, want[i]), "no '%s': %s", want[i], out);
    CHECK_MSG(strstr(text, "coll/incoll: stats rank 0: no collective"), "%s",
              out);
    free(text);
    return TEST_PASSED;
}

/* Another Open MPI than the one it was built against (the test hook
 * COLL_INCOLL_TEST_OMPI_VERSION stands for its version string): the component
 * says so once and stands aside; the job runs on Open MPI's own. */
TEST(ompi_component_other_ompi, TEST_INTEG)
{
    static const char *const want[] = {
        "built against Open MPI 4.1 but running under 'Open MPI v5.0.3'", NULL};
    return stands_aside(
        "ompi-other", 2, 2, "",
        "-x COLL_INCOLL_TEST_OMPI_VERSION='Open MPI v5.0.3, package: test'",
        "but running under", want);
}

/*
 * A fabric.conf of 4 hosts, no manager, and a world of 3 ranks: host 3
 * of the world group would have no rank. The component says so once at
 * the default level with the PMPI layer's reason and fix (the shared
 * src/mpi/mpi_fit.c), stands aside, and Open MPI's own collectives give
 * the right results.
 */
TEST(ompi_component_host_count, TEST_INTEG)
{
    static const char *const want[] = {
        "MPI_COMM_WORLD is not offloaded, Open MPI's own collectives run: ",
        "has 4 hosts but MPI_COMM_WORLD has only 3 ranks: without a manager "
        "every host of fabric.conf needs a rank; to fix: run at least 4 "
        "ranks",
        NULL};
    return stands_aside("ompi-hosts", 4, 3, "--no-mgr", "", "is not offloaded",
                        want);
}

/*
 * An AN killed during a job with a manager: every result stays right
 * (osu_coll checks each), the calls after the failure run on libincoll's
 * host algorithms (counted host=), and rank 0 says so once.
 */
TEST(ompi_component_an_killed, TEST_INTEG)
{
    const char *why = ready();
    char dir[PATH_MAX], out[PATH_MAX + 16], osu[PATH_MAX + 32];
    char cmd[6 * PATH_MAX];
    char *text;
    int rc, n;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(osu, sizeof(osu), "%s/ompi/osu_coll", progdir());
    snprintf(dir, sizeof(dir), "%s/ompi-kill", test_tmpdir());
    snprintf(out, sizeof(out), "%s.out", dir);
    CHECK_EQ_INT(test_fabric_up(dir, 4, 2), 0);
    snprintf(cmd, sizeof(cmd),
             ". '%s/fabric.env' && timeout -k 5 120 mpirun -n 4 " FLAGS
             " --mca mca_base_component_path " COMPONENT_PATH
             " --mca coll_incoll_stats 1 -x INCOLL_MGR -x INCOLL_SECRET_FILE "
             "-x INCOLL_HOSTS -x OSU_COLL_KILL_CMD=\"kill $(cat '%s/l0.pid')\" "
             "'%s' 4096 10",
             dir, compdir, dir, osu);
    rc = sh(out, "%s", cmd);
    test_fabric_down(dir);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "osu_coll: ok"), "exit %d: %s", rc, out);
    CHECK_MSG(stat_of(text, "allreduce", "net") > 0, "%s", out);
    CHECK_MSG(stat_of(text, "allreduce", "host") +
                          stat_of(text, "allreduce", "net") >
                      0 &&
                  stat_of(text, "bcast", "host") > 0,
              "no call on the hosts after the failure: %s", out);
    n = count_of(text, "no longer runs in the network");
    CHECK_MSG(n == 1, "the failure said %d times, want once: %s", n, out);
    free(text);
    return TEST_PASSED;
}

/*
 * The fabric's ANs stopped during a job on a fabric without a manager (the
 * world of fabric.conf), where libincoll cannot recover by itself (as
 * tests/mpi/killmid.c does for the PMPI layer): the ranks agree
 * after each call, redo the failed one on Open MPI's own (counted failed=)
 * and leave the rest to it (fallback=); every result right (osu_coll checks
 * each), and rank 0 says so once.
 */
TEST(ompi_component_an_killed_no_mgr, TEST_INTEG)
{
    const char *why = ready();
    char dir[PATH_MAX], out[PATH_MAX + 16], osu[PATH_MAX + 32];
    char cmd[6 * PATH_MAX];
    char *text;
    int rc, n;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(osu, sizeof(osu), "%s/ompi/osu_coll", progdir());
    snprintf(dir, sizeof(dir), "%s/ompi-kill-nomgr", test_tmpdir());
    snprintf(out, sizeof(out), "%s.out", dir);
    CHECK_EQ_INT(test_fabric_up(dir, 4, 2), 0);
    /* Fail fast: this test is about the answer, not the timeout. The
     * agreement asked for as the PMPI layer's is (INCOLL_MPI_AGREE=1,
     * which coll_incoll_agree -1 follows). */
    snprintf(cmd, sizeof(cmd),
             "timeout -k 5 120 mpirun -n 4 " FLAGS
             " --mca mca_base_component_path " COMPONENT_PATH
             " --mca coll_incoll_stats 1 --mca coll_incoll_fabric '%s' "
             "-x INCOLL_TIMEOUT_MS=1000 -x INCOLL_MPI_AGREE=1 "
             "-x OSU_COLL_KILL_CMD=\"'%s/incoll' fabric down --dir '%s'\" "
             "'%s' 1024 5",
             compdir, dir, test_bindir(), dir, osu);
    rc = sh(out, "%s", cmd);
    test_fabric_down(dir);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "osu_coll: ok"), "exit %d: %s", rc, out);
    CHECK_MSG(stat_of(text, "allreduce", "net") > 0, "%s", out);
    CHECK_MSG(stat_of(text, "allreduce", "failed") +
                      stat_of(text, "reduce", "failed") +
                      stat_of(text, "bcast", "failed") +
                      stat_of(text, "barrier", "failed") ==
                  1,
              "want one call redone after the failure: %s", out);
    CHECK_MSG(stat_of(text, "bcast", "fallback") > 0 &&
                  stat_of(text, "reduce", "fallback") > 0,
              "the calls after the failure not on Open MPI's own: %s", out);
    CHECK_MSG(stat_of(text, "allreduce", "host") == 0, "%s", out);
    n = count_of(text, "the fabric failed during");
    CHECK_MSG(n == 1, "the failure said %d times, want once: %s", n, out);
    free(text);
    return TEST_PASSED;
}

/*
 * Every thread level Open MPI offers, with the fabric's manager (so that
 * dups get fabric groups): tests/ompi/othreads runs allreduce (in place
 * and not), reduce, bcast, barrier and iallreduce on two dups of the
 * world, under MPI_THREAD_MULTIPLE from two threads at the same time,
 * under SERIALIZED from two threads in turn, under FUNNELED and SINGLE
 * from the main thread; every result checked, every call counted in the
 * network.
 */
TEST(ompi_component_threads, TEST_INTEG)
{
    static const char *const levels[] = {"multiple", "serialized", "funneled",
                                         "single", NULL};
    const char *why = ready();
    char dir[PATH_MAX], out[PATH_MAX + 32], thr[PATH_MAX + 32];
    char cmd[6 * PATH_MAX];
    char *text;
    int rc;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(thr, sizeof(thr), "%s/ompi/othreads", progdir());
    snprintf(dir, sizeof(dir), "%s/ompi-threads", test_tmpdir());
    CHECK_EQ_INT(test_fabric_up(dir, 4, 2), 0);
    for (int l = 0; levels[l]; l++) {
        snprintf(out, sizeof(out), "%s.%s.out", dir, levels[l]);
        snprintf(cmd, sizeof(cmd),
                 ". '%s/fabric.env' && timeout -k 5 120 mpirun -n 4 " FLAGS
                 " --mca mca_base_component_path " COMPONENT_PATH
                 " --mca coll_incoll_stats 1 --mca coll_incoll_verbose 1 "
                 "-x INCOLL_MGR -x INCOLL_SECRET_FILE -x INCOLL_HOSTS "
                 "'%s' %s 8",
                 dir, compdir, thr, levels[l]);
        rc = sh(out, "%s", cmd);
        text = slurp(out);
        if (rc != 0 || !strstr(text, "othreads: ok") ||
            !strstr(text, "DUP FROM 0 (4 ranks): offloaded") ||
            stat_of(text, "allreduce", "net") < 2 * 8 * 3 ||
            stat_of(text, "reduce", "net") < 2 * 8 ||
            stat_of(text, "bcast", "net") < 2 * 8 ||
            stat_of(text, "barrier", "net") < 2 * 8 ||
            stat_of(text, "allreduce", "fallback") != 0 ||
            stat_of(text, "allreduce", "host") != 0) {
            test_fabric_down(dir);
            CHECK_MSG(0, "%s: exit %d, allreduce net=%ld: %s", levels[l], rc,
                      stat_of(text, "allreduce", "net"), out);
        }
        free(text);
    }
    test_fabric_down(dir);
    return TEST_PASSED;
}

/*
 * `make install` puts the component in Open MPI's own component directory
 * (ompi_info's pkglibdir) and a stock mpirun runs it from there: the
 * install staged under DESTDIR (a test leaves the system's Open MPI as it
 * is), the component path naming Open MPI's directory and the staged one
 * only, libincoll from the staged libdir. ompi_info lists it, every
 * collective runs in the network with checked results, and `make
 * uninstall` takes it back.
 */
TEST(ompi_component_installed, TEST_INTEG)
{
    const char *why = ready();
    char dest[PATH_MAX], out[PATH_MAX + 32], vars[3 * PATH_MAX + 64];
    char libdir[PATH_MAX], dir[PATH_MAX], env[4 * PATH_MAX];
    char *text;
    int rc;

    if (why)
        return test_skip("%s", why);
    if (!built())
        return TEST_FAILED;
    snprintf(dest, sizeof(dest), "%s/dest", test_tmpdir());
    snprintf(out, sizeof(out), "%s/install.out", test_tmpdir());
    test_install_vars(dest, vars, sizeof(vars), libdir);
    rc = sh_in(test_srcdir(), out,
               "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install %s",
               vars);
    if (rc != 0)
        show_tail(out);
    CHECK_MSG(rc == 0, "make install exited %d", rc);
    /* Open MPI's directory, then the staged copy of it. */
    snprintf(env, sizeof(env),
             "P=$(ompi_info --path pkglibdir --parsable | sed -n "
             "'s/^path:pkglibdir://p'); "
             "export OMPI_MCA_mca_base_component_path=\"$P:%s$P\" "
             "LD_LIBRARY_PATH='%s%s'",
             dest, dest, libdir);
    rc = sh(out, "%s; test -f \"%s$P/mca_coll_incoll.so\" && ompi_info", env,
            dest);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "MCA coll: incoll ("),
              "not installed in Open MPI's component directory, or not "
              "listed (exit %d): %s",
              rc, out);
    free(text);
    snprintf(dir, sizeof(dir), "%s/ompi-installed", test_tmpdir());
    snprintf(out, sizeof(out), "%s.out", dir);
    CHECK_EQ_INT(test_fabric_up(dir, 4, 2), 0);
    rc = sh(out,
            "%s; timeout -k 5 120 mpirun -n 4 " FLAGS
            " --mca coll_incoll_stats 1 --mca coll_incoll_fabric '%s' '%s'",
            env, dir, prog);
    test_fabric_down(dir);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", rc, out);
    for (int i = 0; colls[i]; i++)
        CHECK_MSG(stat_of(text, colls[i], "net") > 0, "%s net=%ld: %s",
                  colls[i], stat_of(text, colls[i], "net"), out);
    free(text);
    snprintf(out, sizeof(out), "%s/uninstall.out", test_tmpdir());
    rc = sh_in(test_srcdir(), out,
               "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s uninstall %s "
               "&& P=$(ompi_info --path pkglibdir --parsable | sed -n "
               "'s/^path:pkglibdir://p') && ! test -e \"%s$P/"
               "mca_coll_incoll.so\"",
               vars, dest);
    CHECK_MSG(rc == 0, "make uninstall left the component (exit %d): %s", rc,
              out);
    return TEST_PASSED;
}
