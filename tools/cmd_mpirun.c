/*
 * `incoll mpirun -n P [options] -- PROGRAM [ARGS...]`: runs an unmodified
 * MPI program with libincoll_mpi preloaded into every rank (docs/mpi.md).
 *
 * Without --fabric (and without INCOLL_FABRIC in the environment) it
 * brings up a loopback fabric of P hosts in a temporary directory for the
 * job and takes it down afterwards, also when the job fails or is
 * interrupted. It then runs Open MPI's mpirun (or MPICH's mpiexec with
 * --mpi mpich) with LD_PRELOAD, INCOLL_FABRIC and every INCOLL_* variable
 * of its own environment passed to the ranks, and exits with the job's
 * status.
 */
#include "cli.h"

#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MPIRUN_MAX_ARGS 4096

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll mpirun -n P [--fabric DIR] [--radix K]\n"
        "                     [--mpi openmpi|mpich] [--lib PATH] [--stat]\n"
        "                     [--keep] -- PROGRAM [ARGS...]\n"
        "\n"
        "Runs PROGRAM on P MPI ranks with libincoll_mpi preloaded, so its\n"
        "collectives run on the fabric.\n"
        "\n"
        "  -n, --np P        number of ranks (and of fabric hosts)\n"
        "  --fabric DIR      use the running fabric in DIR (default:\n"
        "                    $INCOLL_FABRIC, else a loopback fabric of P\n"
        "                    hosts made for this job and removed after it)\n"
        "  --radix K         children per switch of that fabric (default 4)\n"
        "  --mpi NAME        openmpi (default: mpirun) or mpich\n"
        "                    (mpiexec.mpich with libincoll_mpi_mpich.so)\n"
        "  --lib PATH        the interposer to preload (default: next to\n"
        "                    this program, in ../lib)\n"
        "  --stat            print the ANs' counters after the job\n"
        "  --keep            keep the job's fabric directory\n"
        "  --emulate         ranks on emulated hosts: not implemented yet\n"
        "  --help            this text\n"
        "\n"
        "Every INCOLL_* variable set here (INCOLL_MPI_VERBOSE=1,\n"
        "INCOLL_MPI_STATS=1, ...) is passed to the ranks.\n");
}

/* Directory of this executable's ../lib. */
static int default_lib(const char *mpi, char *buf, size_t len)
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
    snprintf(buf, len, "%.3900s/../lib/%s", self,
             strcmp(mpi, "mpich") == 0 ? "libincoll_mpi_mpich.so"
                                       : "libincoll_mpi.so");
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "incoll mpirun: cannot remove %s: %s\n", path,
                strerror(errno));
    return 0;
}

static int fabric_cmd(const char *verb, const char *dir, int np, int radix)
{
    char hosts[16], rad[16];
    char *up[] = {"fabric", (char *)verb, "--hosts",   hosts, "--radix",
                  rad,      "--dir",      (char *)dir, NULL};
    char *down[] = {"fabric", (char *)verb, "--dir", (char *)dir, NULL};

    snprintf(hosts, sizeof(hosts), "%d", np);
    snprintf(rad, sizeof(rad), "%d", radix);
    if (strcmp(verb, "up") == 0)
        return cmd_fabric(8, up);
    return cmd_fabric(4, down);
}

/* Adds one argument, or fails when the vector is full. */
static int push(char **av, int *n, char *arg)
{
    if (*n >= MPIRUN_MAX_ARGS - 1)
        return -1;
    av[(*n)++] = arg;
    av[*n] = NULL;
    return 0;
}

/* Runs the launcher and returns the job's exit status. Ctrl-C reaches the
 * launcher (same process group); this process waits for it so that it can
 * take the fabric down afterwards. */
static int run_launcher(char **av)
{
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_term;
    pid_t pid;
    int status = 0;

    fflush(NULL);
    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGTERM, &ign, &old_term);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "incoll mpirun: fork: %s\n", strerror(errno));
        status = 127;
    } else if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        execvp(av[0], av);
        fprintf(stderr, "incoll mpirun: cannot run %s: %s\n", av[0],
                strerror(errno));
        _exit(127);
    } else {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        status = WIFEXITED(status)     ? WEXITSTATUS(status)
                 : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                       : 1;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return status;
}

int cmd_mpirun(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"fabric", required_argument, NULL, 'f'},
        {"radix", required_argument, NULL, 'k'},
        {"mpi", required_argument, NULL, 'm'},
        {"lib", required_argument, NULL, 'l'},
        {"stat", no_argument, NULL, 's'},
        {"keep", no_argument, NULL, 'K'},
        {"emulate", no_argument, NULL, 'E'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *fabric = getenv("INCOLL_FABRIC"), *mpi = "openmpi";
    char lib[PATH_MAX], tmpdir[] = "/tmp/incoll-mpirun-XXXXXX", npbuf[16];
    char *av[MPIRUN_MAX_ARGS], *envs[MPIRUN_MAX_ARGS];
    int np = 0, radix = 4, stat = 0, keep = 0, own = 0, opt, nav = 0, nenv = 0;
    int ret, prog;

    lib[0] = '\0';
    optind = 1;
    while ((opt = getopt_long(argc, argv, "+n:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            np = atoi(optarg);
            break;
        case 'f':
            fabric = optarg;
            break;
        case 'k':
            radix = atoi(optarg);
            break;
        case 'm':
            mpi = optarg;
            break;
        case 'l':
            snprintf(lib, sizeof(lib), "%s", optarg);
            break;
        case 's':
            stat = 1;
            break;
        case 'K':
            keep = 1;
            break;
        case 'E':
            fprintf(stderr,
                    "incoll mpirun: --emulate is not implemented yet: ranks "
                    "run on the loopback fabric only (docs/mpi.md)\n");
            return 2;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (np < 1 || radix < 2 || optind >= argc ||
        (strcmp(mpi, "openmpi") != 0 && strcmp(mpi, "mpich") != 0)) {
        fprintf(stderr, "incoll mpirun: need -n P >= 1, --radix K >= 2, "
                        "--mpi openmpi|mpich and a program after --\n");
        usage(stderr);
        return 2;
    }
    prog = optind; /* cmd_fabric and cmd_stat reuse getopt's optind */
    if (lib[0] == '\0' && default_lib(mpi, lib, sizeof(lib)) != 0) {
        fprintf(stderr,
                "incoll mpirun: cannot find libincoll_mpi; use --lib\n");
        return 1;
    }
    if (access(lib, R_OK) != 0) {
        fprintf(stderr,
                "incoll mpirun: %s: %s (built by `make` when %s is "
                "installed)\n",
                lib, strerror(errno),
                strcmp(mpi, "mpich") == 0 ? "mpicc.mpich" : "mpicc");
        return 1;
    }
    if (fabric == NULL || *fabric == '\0') {
        if (mkdtemp(tmpdir) == NULL) {
            fprintf(stderr, "incoll mpirun: mkdtemp: %s\n", strerror(errno));
            return 1;
        }
        fabric = tmpdir;
        own = 1;
        if (fabric_cmd("up", fabric, np, radix) != 0) {
            fprintf(stderr,
                    "incoll mpirun: could not bring up a fabric in "
                    "%s\n",
                    fabric);
            ret = 1;
            goto out;
        }
    }
    if (geteuid() == 0) {
        /* Open MPI refuses root without these; harmless for MPICH. */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    snprintf(npbuf, sizeof(npbuf), "%d", np);
    if (strcmp(mpi, "mpich") == 0) {
        /* Hydra passes the whole environment; name the two we add. */
        char *fixed[] = {"mpiexec.mpich", "-n", npbuf,   "-genv",
                         "LD_PRELOAD",    lib,  "-genv", "INCOLL_FABRIC",
                         (char *)fabric};
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
            push(av, &nav, fixed[i]);
    } else {
        char *fixed[] = {"mpirun",
                         "-n",
                         npbuf,
                         "--oversubscribe",
                         "--bind-to",
                         "none",
                         "--mca",
                         "btl",
                         "tcp,self",
                         "--mca",
                         "btl_tcp_if_include",
                         "lo",
                         "--mca",
                         "oob_tcp_if_include",
                         "lo"};
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
            push(av, &nav, fixed[i]);
        setenv("INCOLL_FABRIC", fabric, 1);
        /* -x NAME=VALUE for the preload, so mpirun itself is not
         * preloaded; -x NAME for every INCOLL_* variable. */
        envs[nenv] = malloc(strlen(lib) + 16);
        if (envs[nenv]) {
            sprintf(envs[nenv], "LD_PRELOAD=%s", lib);
            push(av, &nav, "-x");
            push(av, &nav, envs[nenv++]);
        }
        for (char **e = environ; *e && nenv < MPIRUN_MAX_ARGS - 1; e++) {
            const char *eq = strchr(*e, '=');
            if (strncmp(*e, "INCOLL_", 7) != 0 || eq == NULL)
                continue;
            envs[nenv] = strndup(*e, (size_t)(eq - *e));
            if (envs[nenv] == NULL)
                continue;
            push(av, &nav, "-x");
            push(av, &nav, envs[nenv++]);
        }
    }
    for (int i = prog; i < argc; i++) {
        if (push(av, &nav, argv[i]) != 0) {
            fprintf(stderr, "incoll mpirun: too many arguments\n");
            ret = 2;
            goto out_env;
        }
    }
    ret = run_launcher(av);
    if (stat) {
        char *sargv[] = {"stat", "--fabric", (char *)fabric, NULL};
        fflush(NULL);
        if (cmd_stat(3, sargv) != 0)
            fprintf(stderr, "incoll mpirun: incoll stat failed\n");
    }
out_env:
    for (int i = 0; i < nenv; i++)
        free(envs[i]);
out:
    if (own) {
        fflush(NULL);
        fabric_cmd("down", fabric, np, radix);
        if (keep)
            fprintf(stderr, "incoll mpirun: fabric directory kept: %s\n",
                    fabric);
        else
            nftw(fabric, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    return ret;
}
