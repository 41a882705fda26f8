/*
 * `incoll sim ...`: the scale simulator (docs/simulator.md). It lives in
 * its own binary, incoll-sim, next to incoll, because it links SimGrid,
 * which the rest of incoll does not need; this command just runs it with
 * the same arguments.
 */
#include "cli.h"
#include "common/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_sim(int argc, char **argv)
{
    char path[PATH_MAX];
    char **args;

    if (cli_companion_path(CLI_PLACE_BIN, "incoll-sim", path, sizeof(path)) !=
        0) {
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
    fprintf(stderr, "incoll sim: cannot run %s: %s\n", path,
            log_strerror(errno));
    free(args);
    return 1;
}
