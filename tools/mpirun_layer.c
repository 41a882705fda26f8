/*
 * `incoll mpirun --layer`: the Open MPI component or the PMPI layer. The
 * component (build/lib/openmpi/mca_coll_incoll.so, or Open MPI's component
 * directory when installed) is compiled against one Open MPI's internal
 * headers and so only runs under that Open MPI's major.minor, which the
 * build gives this file (INCOLL_OMPI_BUILT); the running one's is what
 * `mpirun --version` says. MPICH and any other Open MPI get the PMPI layer,
 * which works with every MPI of its ABI.
 */
#include "mpirun_layer.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef INCOLL_OMPI_COMPDIR
#define INCOLL_OMPI_COMPDIR ""
#endif

#define COMPONENT_SO "mca_coll_incoll.so"

int mpirun_layer_parse(const char *word, mpirun_layer_t *out)
{
    if (strcmp(word, "auto") == 0)
        *out = MPIRUN_LAYER_AUTO;
    else if (strcmp(word, "component") == 0)
        *out = MPIRUN_LAYER_COMPONENT;
    else if (strcmp(word, "pmpi") == 0)
        *out = MPIRUN_LAYER_PMPI;
    else
        return -1;
    return 0;
}

/* The first line of cmd's output without its newline; 0, or -1. */
static int first_line(const char *cmd, char *buf, size_t len)
{
    FILE *p = popen(cmd, "r");
    int ok;
    if (p == NULL)
        return -1;
    ok = fgets(buf, (int)len, p) != NULL;
    pclose(p);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* The major.minor of the Open MPI `mpirun` runs ("4.1"); 0, or -1 when
 * it is not Open MPI (what it says is in said). */
static int running_ompi(char *ver, size_t len, char *said, size_t saidlen)
{
    const char *p;
    int major, minor;

    if (first_line("mpirun --version 2>&1", said, saidlen) != 0) {
        snprintf(said, saidlen, "no mpirun in PATH");
        return -1;
    }
    p = strstr(said, "(Open MPI) ");
    if (p == NULL || sscanf(p + 11, "%d.%d", &major, &minor) != 2)
        return -1;
    snprintf(ver, len, "%d.%d", major, minor);
    return 0;
}

/* Where the component is: 1 in the build tree (dir gets its directory),
 * 2 in Open MPI's own directory (nothing to add), 0 nowhere. */
static int find_component(char *dir, size_t len)
{
    char so[4096];
    if (cli_companion_path(CLI_PLACE_LIB, "openmpi/" COMPONENT_SO, so,
                           sizeof(so)) == 0 &&
        access(so, R_OK) == 0) {
        char *slash = strrchr(so, '/');
        *slash = '\0';
        snprintf(dir, len, "%s", so);
        return 1;
    }
    snprintf(so, sizeof(so), "%s/" COMPONENT_SO, INCOLL_OMPI_COMPDIR);
    if (INCOLL_OMPI_COMPDIR[0] && access(so, R_OK) == 0)
        return 2;
    return 0;
}

/* Why the component cannot run this job, in why; 0 when it can (c->path
 * then set). */
static int component_usable(mpirun_layer_choice_t *c, int mpich, char *why,
                            size_t len)
{
#ifdef INCOLL_OMPI_BUILT
    char ver[32], said[256], dir[4096], own[4096];
    int where;

    if (mpich) {
        snprintf(why, len, "--mpi mpich (the component is Open MPI's)");
        return -1;
    }
    if (running_ompi(ver, sizeof(ver), said, sizeof(said)) != 0) {
        snprintf(why, len, "mpirun is not Open MPI ('%.200s')", said);
        return -1;
    }
    if (strcmp(ver, INCOLL_OMPI_BUILT) != 0) {
        snprintf(why, len,
                 "the running Open MPI is %s, the component was built "
                 "against %s",
                 ver, INCOLL_OMPI_BUILT);
        return -1;
    }
    where = find_component(dir, sizeof(dir));
    if (where == 0) {
        snprintf(why, len, "%s is not built or installed", COMPONENT_SO);
        return -1;
    }
    c->path[0] = '\0';
    if (where == 1) {
        /* Open MPI's own components first, then ours. */
        if (first_line("ompi_info --path pkglibdir --parsable 2>/dev/null | "
                       "sed -n 's/^path:pkglibdir://p'",
                       own, sizeof(own)) != 0 ||
            own[0] == '\0')
            snprintf(own, sizeof(own), "%s", INCOLL_OMPI_COMPDIR);
        snprintf(c->path, sizeof(c->path), "%s:%s", own, dir);
    }
    snprintf(why, len, "Open MPI %s, as built", ver);
    return 0;
#else
    (void)c;
    (void)mpich;
    snprintf(why, len,
             "built without it (no Open MPI development headers at build "
             "time)");
    return -1;
#endif
}

int mpirun_layer_choose(mpirun_layer_t want, int mpich, int lib_given,
                        mpirun_layer_choice_t *c)
{
    char why[sizeof(c->why) - 64];

    memset(c, 0, sizeof(*c));
    if (want == MPIRUN_LAYER_PMPI || (want == MPIRUN_LAYER_AUTO && lib_given)) {
        c->layer = MPIRUN_LAYER_PMPI;
        snprintf(c->why, sizeof(c->why), "%s",
                 want == MPIRUN_LAYER_PMPI ? "--layer pmpi"
                                           : "--lib or --no-preload given");
        return 0;
    }
    if (component_usable(c, mpich, why, sizeof(why)) == 0) {
        c->layer = MPIRUN_LAYER_COMPONENT;
        snprintf(c->why, sizeof(c->why), "%s", why);
        return 0;
    }
    if (want == MPIRUN_LAYER_COMPONENT) {
        snprintf(c->why, sizeof(c->why), "cannot use the component: %s", why);
        return -1;
    }
    c->layer = MPIRUN_LAYER_PMPI;
    snprintf(c->why, sizeof(c->why), "no component: %s", why);
    return 0;
}
