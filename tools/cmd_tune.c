/*
 * `incoll tune`: measures where each collective is fastest on a fabric
 * and writes the MPI layer's selection table (src/common/tune.h,
 * docs/tuning.md). It runs the MPI program incoll-tune-mpi
 * (tools/mpi/tune_worker.c) through `incoll mpirun` with the layer
 * preloaded and INCOLL_TUNE=all:*:inc, so that every call through the
 * layer runs in libincoll; the worker times that and the MPI library's
 * own side by side, checks every result, and rank 0 writes the table.
 * Then the table is read back as the layer would read it.
 */
#include "cli.h"

#include "common/tune.h"
#include "common/log.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TUNE_WORKER "incoll-tune-mpi"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: incoll tune -n P [--fabric DIR | --emulate [--link-rate "
            "R]]\n"
            "                   [--radix K] [--ppn K] [--sizes LO:HI] "
            "[--iters N]\n"
            "                   [--passes N] [--margin PCT]\n"
            "                   [--colls LIST] [--forms blocking,nb] [--out "
            "FILE]\n"
            "                   [--timeout SEC]\n"
            "\n"
            "Measures each collective of the MPI layer (blocking and "
            "nonblocking, sizes\n"
            "LO to HI by factors of 4) in libincoll and in the MPI library's "
            "own, side by\n"
            "side on P ranks of the fabric, every result checked, and writes "
            "the\n"
            "selection table: where each call is faster (docs/tuning.md).\n"
            "\n"
            "  -n, --np P       ranks\n"
            "  --fabric DIR     a running fabric (default: one made for the "
            "run, as\n"
            "                   `incoll mpirun` does); the table goes to "
            "DIR/tune.conf,\n"
            "                   where the layer of every job on DIR reads it\n"
            "  --emulate, --link-rate R, --radix K, --ppn K\n"
            "                   the fabric made for the run (incoll mpirun)\n"
            "  --sizes LO:HI    bytes (K, M suffixes; default 4:1M)\n"
            "  --iters N        iterations a size up to 4 KiB (default 50; "
            "fewer above)\n"
            "  --passes N       measure each size N times, keep the least "
            "(default 2)\n"
            "  --margin PCT     MPI's own must be faster by more than PCT "
            "percent to\n"
            "                   take a call from libincoll (default 5)\n"
            "  --colls LIST     collectives (default all of them)\n"
            "  --forms LIST     blocking, nb or both (default both; nb "
            "stands for the\n"
            "                   persistent form too)\n"
            "  --out FILE       where to write the table (default "
            "DIR/tune.conf with\n"
            "                   --fabric, else ./tune.conf)\n"
            "  --timeout SEC    stop after SEC seconds (default 3600)\n");
}

int cmd_tune(int argc, char **argv)
{
    static const struct option opts[] = {
        {"np", required_argument, NULL, 'n'},
        {"fabric", required_argument, NULL, 'f'},
        {"emulate", no_argument, NULL, 'e'},
        {"link-rate", required_argument, NULL, 'l'},
        {"radix", required_argument, NULL, 'r'},
        {"ppn", required_argument, NULL, 'p'},
        {"sizes", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'i'},
        {"passes", required_argument, NULL, 'P'},
        {"margin", required_argument, NULL, 'm'},
        {"colls", required_argument, NULL, 'c'},
        {"forms", required_argument, NULL, 'F'},
        {"out", required_argument, NULL, 'o'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *np = NULL, *fabric = NULL, *link_rate = NULL, *radix = "4";
    const char *ppn = "1", *sizes = "4:1M", *iters = "50", *colls = NULL;
    const char *passes = "2", *margin = "5";
    const char *forms = "blocking,nb", *out = NULL, *timeout = "3600";
    char self[PATH_MAX], worker[PATH_MAX], out_path[PATH_MAX];
    char shape[256], cmdline[1024], err[512];
    char *args[64];
    static tune_table_t t;
    int emulate = 0, opt, a = 0, st;
    size_t k = 0;
    pid_t pid;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            np = optarg;
            break;
        case 'f':
            fabric = optarg;
            break;
        case 'e':
            emulate = 1;
            break;
        case 'l':
            link_rate = optarg;
            break;
        case 'r':
            radix = optarg;
            break;
        case 'p':
            ppn = optarg;
            break;
        case 's':
            sizes = optarg;
            break;
        case 'i':
            iters = optarg;
            break;
        case 'P':
            passes = optarg;
            break;
        case 'm':
            margin = optarg;
            break;
        case 'c':
            colls = optarg;
            break;
        case 'F':
            forms = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 't':
            timeout = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (np == NULL || atoi(np) < 2 || optind != argc) {
        fprintf(stderr, "incoll tune: %s\n",
                np == NULL       ? "-n P is required"
                : optind != argc ? "unexpected arguments"
                                 : "-n wants at least 2 ranks");
        usage(stderr);
        return 2;
    }
    if (out == NULL && fabric)
        snprintf(out_path, sizeof(out_path), "%s/tune.conf", fabric);
    else
        snprintf(out_path, sizeof(out_path), "%s", out ? out : "tune.conf");
    if (cli_self_dir(self, sizeof(self)) != 0 ||
        strlen(self) + sizeof("/incoll") > sizeof(self) ||
        cli_companion_path(CLI_PLACE_LIBEXEC, TUNE_WORKER, worker,
                           sizeof(worker)) != 0) {
        fprintf(stderr, "incoll tune: cannot find this program's directory\n");
        return 1;
    }
    strcat(self, "/incoll");
    if (access(worker, X_OK) != 0) {
        fprintf(stderr,
                "incoll tune: %s: %s (`make` builds it when mpicc is "
                "installed)\n",
                worker, log_strerror(errno));
        return 1;
    }
    snprintf(shape, sizeof(shape), "%s%s ppn=%s%s%s",
             fabric    ? "fabric="
             : emulate ? "emulated radix="
                       : "loopback radix=",
             fabric ? fabric : radix, ppn, link_rate ? " link-rate=" : "",
             link_rate ? link_rate : "");
    for (int i = 0; i < argc && k < sizeof(cmdline); i++)
        k += (size_t)snprintf(cmdline + k, sizeof(cmdline) - k, "%s%s",
                              i ? " " : "incoll ", argv[i]);

    args[a++] = self;
    args[a++] = "mpirun";
    /* incoll-tune-mpi measures the PMPI layer's collectives. */
    args[a++] = "--layer";
    args[a++] = "pmpi";
    args[a++] = "-n";
    args[a++] = (char *)np;
    args[a++] = "--ppn";
    args[a++] = (char *)ppn;
    if (fabric) {
        args[a++] = "--fabric";
        args[a++] = (char *)fabric;
    } else {
        args[a++] = "--radix";
        args[a++] = (char *)radix;
        if (emulate)
            args[a++] = "--emulate";
        if (link_rate) {
            args[a++] = "--link-rate";
            args[a++] = (char *)link_rate;
        }
    }
    args[a++] = "--timeout";
    args[a++] = (char *)timeout;
    args[a++] = "--";
    args[a++] = worker;
    args[a++] = "--sizes";
    args[a++] = (char *)sizes;
    args[a++] = "--iters";
    args[a++] = (char *)iters;
    args[a++] = "--passes";
    args[a++] = (char *)passes;
    args[a++] = "--margin";
    args[a++] = (char *)margin;
    args[a++] = "--forms";
    args[a++] = (char *)forms;
    if (colls) {
        args[a++] = "--colls";
        args[a++] = (char *)colls;
    }
    args[a++] = "--out";
    args[a++] = out_path;
    args[a++] = "--shape";
    args[a++] = shape;
    args[a++] = "--cmd";
    args[a++] = cmdline;
    args[a] = NULL;

    /* Every call through the layer in libincoll: the column the worker
     * compares with MPI's own. */
    setenv("INCOLL_TUNE", "all:*:inc", 1);
    unsetenv("INCOLL_MPI_ENABLE");
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "incoll tune: cannot fork: %s\n", log_strerror(errno));
        return 1;
    }
    if (pid == 0) {
        execv(args[0], args);
        fprintf(stderr, "incoll tune: cannot run %s: %s\n", args[0],
                log_strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "incoll tune: waitpid: %s\n", log_strerror(errno));
            return 1;
        }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr,
                "incoll tune: the measuring job failed (%s %d): no "
                "table written\n",
                WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return 1;
    }
    /* Read back as the layer reads it: a table it cannot read is an
     * error here, not at the next job's MPI_Init. */
    tune_init(&t, out_path);
    if (tune_parse_file(&t, out_path, err, sizeof(err)) != 0) {
        fprintf(stderr, "incoll tune: the table written is bad: %s\n", err);
        return 1;
    }
    printf("incoll tune: %s: %u entries\n", out_path, t.n);
    return 0;
}
