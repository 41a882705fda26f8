/*
 * `incoll mpirun --layer` (tools/mpirun_layer.c): by default the Open MPI
 * component under the Open MPI it was built against (nothing preloaded;
 * its statistics show the collectives ran in the network), the PMPI
 * layer under another Open MPI (an `mpirun` earlier in PATH that reports
 * another version and runs the real one), and --layer component refused
 * there with the reason. Each says its choice once on stderr. They skip
 * only when Open MPI or its development headers are missing.
 */
#include "integ.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

static char ocolls[PATH_MAX + 32];

static const char *layer_ready(void)
{
    char so[PATH_MAX + 64];
    if (system("command -v mpirun >/dev/null 2>&1 && "
               "mpirun --version 2>&1 | grep -q 'Open MPI'") != 0)
        return "Open MPI (mpirun) is not installed";
    snprintf(so, sizeof(so), "%s/../lib/openmpi/mca_coll_incoll.so",
             test_bindir());
    snprintf(ocolls, sizeof(ocolls), "%s/ompi/ocolls", progdir());
    if (access(so, F_OK) != 0 || access(ocolls, X_OK) != 0)
        return "coll/incoll is not built (no Open MPI development headers)";
    unsetenv("INCOLL_FABRIC");
    unsetenv("INCOLL_MGR");
    unsetenv("LD_PRELOAD");
    return NULL;
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++)
        n++;
    return n;
}

TEST(mpirun_layer_component, TEST_INTEG)
{
    const char *why = layer_ready();
    char out[PATH_MAX];
    char *text;
    const char *net;
    int rc;

    if (why)
        return test_skip("%s", why);
    snprintf(out, sizeof(out), "%s/layer-component.out", test_tmpdir());
    rc = sh(out,
            "OMPI_MCA_coll_incoll_stats=1 timeout -k 5 120 '%s/incoll' mpirun "
            "-n 2 -- '%s'",
            test_bindir(), ocolls);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", rc, out);
    CHECK_MSG(count_of(text, "incoll mpirun: layer component") == 1,
              "the choice not said once: %s", out);
    CHECK_MSG(count_of(text, "layer pmpi") == 0, "%s", out);
    net = strstr(text, "coll/incoll: stats rank 0: allreduce net=");
    CHECK_MSG(net && atol(strchr(net, '=') + 1) > 0,
              "no allreduce ran in the network: %s", out);
    free(text);
    return TEST_PASSED;
}

TEST(mpirun_layer_other_ompi, TEST_INTEG)
{
    const char *why = layer_ready();
    char dir[PATH_MAX], out[PATH_MAX + 16], fake[PATH_MAX + 16];
    char real[PATH_MAX];
    char *text;
    FILE *f;
    int rc;

    if (why)
        return test_skip("%s", why);
    snprintf(dir, sizeof(dir), "%s/layer-other", test_tmpdir());
    snprintf(out, sizeof(out), "%s.out", dir);
    snprintf(fake, sizeof(fake), "%s/mpirun", dir);
    CHECK(sh(out, "mkdir -p '%s' && command -v mpirun > '%s/real'", dir, dir) ==
          0);
    text = slurp(strcat(strcpy(real, dir), "/real"));
    CHECK(text != NULL && text[0] == '/');
    text[strcspn(text, "\n")] = '\0';
    f = fopen(fake, "w");
    CHECK(f != NULL);
    fprintf(f,
            "#!/bin/sh\n"
            "if [ \"$1\" = --version ]; then echo 'mpirun (Open MPI) 5.0.3'; "
            "exit 0; fi\n"
            "exec '%s' \"$@\"\n",
            text);
    fclose(f);
    free(text);
    CHECK(chmod(fake, 0755) == 0);

    /* auto: the PMPI layer, and the job runs. */
    rc = sh(out,
            "PATH='%s':\"$PATH\" timeout -k 5 120 '%s/incoll' mpirun -n 2 -- "
            "'%s'",
            dir, test_bindir(), ocolls);
    text = slurp(out);
    CHECK_MSG(rc == 0 && strstr(text, "ocolls: ok"), "exit %d: %s", rc, out);
    CHECK_MSG(count_of(text,
                       "incoll mpirun: layer pmpi (libincoll_mpi "
                       "preloaded): no component: the running Open "
                       "MPI is 5.0, the component was built against") == 1,
              "%s", out);
    CHECK_MSG(count_of(text, "layer component") == 0, "%s", out);
    free(text);

    /* --layer component: refused, with the reason, nothing run. */
    rc = sh(out,
            "PATH='%s':\"$PATH\" '%s/incoll' mpirun --layer component -n 2 "
            "-- '%s'",
            dir, test_bindir(), ocolls);
    text = slurp(out);
    CHECK_MSG(rc != 0 && strstr(text, "--layer component: cannot use the "
                                      "component: the running Open MPI is "
                                      "5.0"),
              "exit %d: %s", rc, out);
    CHECK_MSG(strstr(text, "ocolls") == NULL, "%s", out);
    free(text);
    return TEST_PASSED;
}
