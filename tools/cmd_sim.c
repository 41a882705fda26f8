/*
 * `incoll sim ...`: the scale simulator (docs/simulator.md). It lives in
 * its own binary, incoll-sim, next to incoll, because it links SimGrid,
 * which the rest of incoll does not need; this command just runs it with
 * the same arguments.
 */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes "<directory of this executable>/incoll-sim" into buf. */
static int sim_binary(char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    if (n <= 0)
        return -1;
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    if ((size_t)snprintf(buf, len, "%s/incoll-sim", self) >= len)
        return -1;
    return 0;
}

int cmd_sim(int argc, char **argv)
{
    char path[PATH_MAX];
    char **args;

    if (sim_binary(path, sizeof(path)) != 0) {
        fprintf(stderr, "incoll sim: cannot find the directory of the incoll "
                        "binary (/proc/self/exe)\n");
        return 1;
    }
    if (access(path, X_OK) != 0) {
        fprintf(stderr,
                "incoll sim: %s is not built: the simulator needs SimGrid "
                "(Debian packages libsimgrid-dev and simgrid), which was not "
                "found when incoll was built.\n"
                "incoll sim: install it with scripts/install-deps.sh, then run "
                "`make sim`.\n",
                path);
        return 1;
    }
    args = calloc((size_t)argc + 2, sizeof(*args));
    if (args == NULL) {
        fprintf(stderr, "incoll sim: out of memory\n");
        return 1;
    }
    args[0] = path;
    for (int i = 1; i < argc; i++)
        args[i] = argv[i];
    fflush(NULL);
    execv(path, args);
    fprintf(stderr, "incoll sim: cannot run %s: %s\n", path, strerror(errno));
    free(args);
    return 1;
}
