/*
 * Where the programs and libraries that ship with incoll are. In the build
 * tree the programs are in build/bin, beside `incoll`, and the libraries in
 * build/lib; an installed tree has them in the directories `make install`
 * was given (bindir, libexecdir, libdir), which this file is compiled with.
 * Each lookup tries the build tree's place first (relative to this
 * executable, so a tree moved or installed with another prefix still finds
 * its own), then the installed one.
 */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef INCOLL_LIBDIR
#define INCOLL_LIBDIR "/usr/local/lib"
#endif
#ifndef INCOLL_LIBEXECDIR
#define INCOLL_LIBEXECDIR "/usr/local/libexec"
#endif

int cli_self_dir(char *buf, size_t len)
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
    return (size_t)snprintf(buf, len, "%s", self) < len ? 0 : -1;
}

int cli_companion_path(cli_place_t place, const char *name, char *buf,
                       size_t len)
{
    char dir[PATH_MAX];
    const char *rel = place == CLI_PLACE_LIB ? "/../lib/" : "/";
    const char *installed = place == CLI_PLACE_LIB       ? INCOLL_LIBDIR
                            : place == CLI_PLACE_LIBEXEC ? INCOLL_LIBEXECDIR
                                "/incoll"
                                                         : NULL;

    if (cli_self_dir(dir, sizeof(dir)) != 0)
        return -1;
    if ((size_t)snprintf(buf, len, "%s%s%s", dir, rel, name) >= len)
        return -1;
    if (installed == NULL || access(buf, F_OK) == 0)
        return 0;
    char other[PATH_MAX];
    if ((size_t)snprintf(other, sizeof(other), "%s/%s", installed, name) >=
        sizeof(other))
        return 0;
    if (access(other, F_OK) == 0)
        snprintf(buf, len, "%s", other);
    return 0;
}
