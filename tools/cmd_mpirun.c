/*
 * `incoll mpirun -n P [options] -- PROGRAM [ARGS...]`: runs an unmodified
 * MPI program with libincoll_mpi preloaded into every rank (docs/mpi.md).
 *
 * Without --fabric (and without INCOLL_FABRIC in the environment) it
 * brings up a fabric of P hosts for the job, in a scratch directory, and
 * takes it down afterwards, also when the job fails, times out or is
 * interrupted: the loopback fabric, or with --emulate the emulated one
 * (src/fabric/emu.h: a network namespace per host and switch, shaped links).
 * It then runs Open MPI's mpirun (or MPICH's mpiexec with --mpi mpich)
 * with LD_PRELOAD, INCOLL_FABRIC and every INCOLL_* variable of its own
 * environment passed to the ranks, and exits with the job's status.
 *
 * On an emulated fabric (made here, or an emulated DIR given with
 * --fabric) rank r runs inside host r's namespace and the MPI library's
 * own TCP traffic crosses the emulated links: the launcher gets a
 * hostfile naming the host namespaces and the launch agent
 * build/bin/incoll-launch-agent (tools/mpi/launch_agent.c) as its remote
 * shell, so its daemon for host r (orted, hydra_pmi_proxy) and the rank it
 * starts live in that namespace; the launcher itself runs in host 0's
 * namespace, from where every daemon reaches it over the fabric; MPI is
 * restricted to the fabric's addresses (Open MPI: btl tcp,self and
 * 10.77.0.0/16; MPICH: UCX over TCP on the host's uplink). When the
 * emulated fabric has a manager the ranks get INCOLL_MGR and
 * INCOLL_SECRET_FILE, and the manager knows each rank's host by its
 * address; on loopback every rank has the same address, so they use
 * fabric.conf (or whatever INCOLL_MGR the caller set).
 */
#include "cli.h"
#include "fabric/emu.h"
#include "fabric/fabric.h"
#include "fabric/mgr_fabric.h"

#include "common/settings.h"
#include "common/clock.h"

#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MPIRUN_MAX_ARGS 4096
/* The emulated fabric's addresses (src/fabric/emu.h): MPI uses nothing else. */
#define EMU_NET_CIDR "10.77.0.0/16"
#define KILL_GRACE_S 5

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll mpirun -n P [--ppn K] [--fabric DIR | --emulate\n"
        "                     [--link-rate R]] [--radix K] [--mpi "
        "openmpi|mpich]\n"
        "                     [--lib PATH | --no-preload] [--stat] [--keep]\n"
        "                     [--timeout SEC] -- PROGRAM [ARGS...]\n"
        "\n"
        "Runs PROGRAM on P MPI ranks with libincoll_mpi preloaded, so its\n"
        "collectives run on the fabric.\n"
        "\n"
        "  -n, --np P        number of ranks\n"
        "  --ppn K           ranks per host (default 1): rank r on host r/K,\n"
        "                    the fabric made here has P/K hosts (rounded up)\n"
        "  --fabric DIR      use the running fabric in DIR (default:\n"
        "                    $INCOLL_FABRIC, else a fabric of P hosts made\n"
        "                    for this job and removed after it); on an\n"
        "                    emulated DIR each rank runs in its host\n"
        "  --emulate         make that fabric emulated: each rank in its own\n"
        "                    host's network namespace, MPI's own TCP\n"
        "                    traffic on the shaped links (root; without\n"
        "                    root: loopback)\n"
        "  --link-rate R     host link rate of the emulated fabric (100mbit,\n"
        "                    1g; default 800 Mbit/s shared by the hosts)\n"
        "  --radix K         children per switch of that fabric (default 4)\n"
        "  --mpi NAME        openmpi (default: mpirun) or mpich\n"
        "                    (mpiexec.mpich with libincoll_mpi_mpich.so)\n"
        "  --lib PATH        the interposer to preload (default: next to\n"
        "                    this program, in ../lib)\n"
        "  --no-preload      preload nothing (programs that link the layer)\n"
        "  --stat            print the ANs' counters after the job\n"
        "  --keep            keep the job's scratch directory (fabric, "
        "hostfile)\n"
        "  --timeout SEC     stop the job after SEC seconds (exit 124)\n"
        "  --help            this text\n"
        "\n"
        "Every INCOLL_* variable set here (INCOLL_MPI_VERBOSE=1,\n"
        "INCOLL_MPI_STATS=1, ...) is passed to the ranks.\n");
}

/* The interposer for mpi, in this executable's ../lib or libdir. */
static int default_lib(const char *mpi, char *buf, size_t len)
{
    return cli_companion_path(CLI_PLACE_LIB,
                              strcmp(mpi, "mpich") == 0
                                  ? "libincoll_mpi_mpich.so"
                                  : "libincoll_mpi.so",
                              buf, len);
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

/* A fabric of its own for the job (fabric.h), torn down at the end. */
static int own_fabric_up(const char *dir, int np, int radix, int emulate,
                         uint64_t link_rate)
{
    fabric_spec_t spec;

    fabric_spec_default(&spec);
    spec.dir = dir;
    spec.hosts = np;
    spec.radix = radix;
    spec.emulate = emulate;
    if (link_rate)
        spec.emu.link_rate = link_rate;
    return fabric_up(&spec) == 0 ? 0 : 1;
}

static void own_fabric_down(const char *dir)
{
    fabric_stop(dir, 0);
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

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

static const int handled[3] = {SIGINT, SIGTERM, SIGHUP};

/* From here on SIGINT, SIGTERM and SIGHUP only set got_signal, so that
 * this process always lives on to take the fabric down. */
static void signals_catch(struct sigaction old[3])
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        sigaction(handled[i], &sa, &old[i]);
}

static void signals_restore(const struct sigaction old[3])
{
    for (int i = 0; i < 3; i++)
        sigaction(handled[i], &old[i], NULL);
}

/*
 * Runs the launcher and returns the job's exit status: 124 when
 * timeout_s (0: none) passed, 128 + the signal when this process got
 * SIGINT, SIGTERM or SIGHUP. A terminal's ^C reaches the launcher itself
 * (same process group); a signal aimed at this process alone is passed on
 * as SIGTERM, and a launcher still alive KILL_GRACE_S seconds after that
 * is killed. The launcher gets the signal dispositions of old.
 */
static int run_launcher(char **av, int timeout_s, const struct sigaction old[3])
{
    double start = now_s(), kill_at = 0;
    int status = 0, stopped = 0, timed_out = 0;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "incoll mpirun: fork: %s\n", strerror(errno));
        return 127;
    }
    if (pid == 0) {
        signals_restore(old);
        execvp(av[0], av);
        fprintf(stderr, "incoll mpirun: cannot run %s: %s\n", av[0],
                strerror(errno));
        _exit(127);
    }
    for (;;) {
        struct timespec nap = {0, 50000000};
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            status = 1 << 8;
            break;
        }
        if (!stopped &&
            (got_signal || (timeout_s > 0 && now_s() - start > timeout_s))) {
            if (!got_signal) {
                timed_out = 1;
                fprintf(stderr,
                        "incoll mpirun: the job ran out of its %d s "
                        "(--timeout); stopping it\n",
                        timeout_s);
            }
            kill(pid, SIGTERM);
            stopped = 1;
            kill_at = now_s() + KILL_GRACE_S;
        }
        if (stopped && kill_at > 0 && now_s() > kill_at) {
            kill(pid, SIGKILL);
            kill_at = 0;
        }
        nanosleep(&nap, NULL);
    }
    return timed_out             ? 124
           : got_signal          ? 128 + got_signal
           : WIFEXITED(status)   ? WEXITSTATUS(status)
           : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                 : 1;
}

/*
 * Writes the launcher's hostfile for an emulated fabric: one line per
 * host namespace, in rank order, one slot each, so rank r lands on host
 * r. Returns 0, or -1 with the cause printed.
 */
static int write_hostfile(const char *path, const fabric_conf_t *conf,
                          int mpich, int ppn)
{
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        fprintf(stderr, "incoll mpirun: cannot write %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    for (int r = 0; r < conf->nhosts; r++)
        fprintf(f, mpich ? "%s:%d\n" : "%s slots=%d\n", conf->hosts[r].netns,
                ppn);
    if (fclose(f) != 0) {
        fprintf(stderr, "incoll mpirun: cannot write %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* Sets INCOLL_MGR, INCOLL_SECRET_FILE and INCOLL_HOSTS (the topology's
 * hosts, comma-separated) for the ranks of a job on the managed fabric
 * in dir. */
static int mpirun_mgr_env(const char *dir, int ppn)
{
    char addr[256], secret[PATH_MAX + 32], err[512], *list = NULL;
    char **names = NULL;
    size_t len = 1;
    int n, ret = -1;

    if (mgr_fabric_env(dir, addr, sizeof(addr), secret, sizeof(secret), err,
                       sizeof(err)) != 0) {
        fprintf(stderr, "incoll mpirun: %s\n", err);
        return -1;
    }
    n = mgr_fabric_host_names(dir, &names, err, sizeof(err));
    if (n < 1) {
        fprintf(stderr, "incoll mpirun: %s\n",
                n < 0 ? err : "the topology has no hosts");
        goto out;
    }
    for (int i = 0; i < n; i++)
        len += (strlen(names[i]) + 1) * (size_t)ppn;
    list = calloc(1, len);
    if (list == NULL) {
        fprintf(stderr, "incoll mpirun: out of memory\n");
        goto out;
    }
    /* Each host K times: rank r (entry r of the list) is on host r/K. */
    for (int i = 0; i < n * ppn; i++) {
        if (i)
            strcat(list, ",");
        strcat(list, names[i / ppn]);
    }
    setenv("INCOLL_MGR", addr, 1);
    setenv("INCOLL_SECRET_FILE", secret, 1);
    setenv("INCOLL_HOSTS", list, 1);
    ret = 0;
out:
    free(list);
    mgr_fabric_free_names(names, n);
    return ret;
}

int cmd_mpirun(int argc, char **argv)
{
    enum { OPT_LINK_RATE = 256, OPT_NO_PRELOAD, OPT_TIMEOUT, OPT_PPN };
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"fabric", required_argument, NULL, 'f'},
        {"radix", required_argument, NULL, 'k'},
        {"mpi", required_argument, NULL, 'm'},
        {"lib", required_argument, NULL, 'l'},
        {"no-preload", no_argument, NULL, OPT_NO_PRELOAD},
        {"stat", no_argument, NULL, 's'},
        {"keep", no_argument, NULL, 'K'},
        {"emulate", no_argument, NULL, 'E'},
        {"link-rate", required_argument, NULL, OPT_LINK_RATE},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"ppn", required_argument, NULL, OPT_PPN},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *fabric_arg = NULL, *mpi = "openmpi";
    char lib[PATH_MAX], work[128], npbuf[16];
    char fabric[PATH_MAX], hostfile[PATH_MAX], agent[PATH_MAX], why[256];
    char *av[MPIRUN_MAX_ARGS], *envs[MPIRUN_MAX_ARGS];
    int np = 0, radix = 4, stat = 0, keep = 0, own = 0, opt, nav = 0, nenv = 0;
    int emulate = 0, emulated = 0, preload = 1, timeout_s = 0, mpich, ret = 1;
    int have_work = 0, prog, ppn = 1, nhosts;
    uint64_t link_rate = 0;
    fabric_conf_t conf;
    int have_conf = 0;
    struct sigaction old_sigs[3];

    lib[0] = '\0';
    optind = 1;
    while ((opt = getopt_long(argc, argv, "+n:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            np = atoi(optarg);
            break;
        case 'f':
            fabric_arg = optarg;
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
        case OPT_NO_PRELOAD:
            preload = 0;
            break;
        case 's':
            stat = 1;
            break;
        case 'K':
            keep = 1;
            break;
        case 'E':
            emulate = 1;
            break;
        case OPT_LINK_RATE:
            if (emu_parse_rate(optarg, &link_rate) != 0) {
                fprintf(stderr,
                        "incoll mpirun: bad --link-rate '%s' (want e.g. "
                        "100mbit, 1g)\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_TIMEOUT:
            timeout_s = atoi(optarg);
            if (timeout_s < 1) {
                fprintf(stderr, "incoll mpirun: --timeout wants seconds >= "
                                "1\n");
                return 2;
            }
            break;
        case OPT_PPN:
            ppn = atoi(optarg);
            if (ppn < 1) {
                fprintf(stderr, "incoll mpirun: --ppn wants ranks per host "
                                ">= 1\n");
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    nhosts = (np + ppn - 1) / ppn;
    if (np < 1 || radix < 2 || optind >= argc ||
        (strcmp(mpi, "openmpi") != 0 && strcmp(mpi, "mpich") != 0)) {
        fprintf(stderr, "incoll mpirun: need -n P >= 1, --radix K >= 2, "
                        "--mpi openmpi|mpich and a program after --\n");
        usage(stderr);
        return 2;
    }
    if (fabric_arg && emulate) {
        fprintf(stderr, "incoll mpirun: --fabric uses a fabric as it is "
                        "(an emulated one is detected): it does not go "
                        "with --emulate\n");
        return 2;
    }
    if (link_rate && !emulate) {
        fprintf(stderr, "incoll mpirun: --link-rate needs --emulate\n");
        return 2;
    }
    mpich = strcmp(mpi, "mpich") == 0;
    prog = optind; /* cmd_fabric and cmd_stat reuse getopt's optind */
    if (fabric_arg == NULL && !emulate) {
        fabric_arg = setting_str(SETTING_FABRIC);
    }
    if (preload) {
        if (lib[0] == '\0' && default_lib(mpi, lib, sizeof(lib)) != 0) {
            fprintf(stderr,
                    "incoll mpirun: cannot find libincoll_mpi; use --lib\n");
            return 1;
        }
        if (access(lib, R_OK) != 0) {
            fprintf(stderr,
                    "incoll mpirun: %s: %s (built by `make` when %s is "
                    "installed)\n",
                    lib, strerror(errno), mpich ? "mpicc.mpich" : "mpicc");
            return 1;
        }
    }
    if (emulate && emu_usable(why, sizeof(why)) != 0) {
        fprintf(stderr,
                "incoll mpirun: cannot emulate links: %s; using the "
                "loopback fabric instead\n",
                why);
        emulate = 0;
    }
    /* The scratch directory goes into $TMPDIR as other tools' do (short
     * paths only: MPI puts its sockets under it too). */
    {
        const char *tmp = getenv("TMPDIR");
        if (tmp == NULL || tmp[0] != '/' || strlen(tmp) > 64)
            tmp = "/tmp";
        snprintf(work, sizeof(work), "%s/incoll-mpirun-XXXXXX", tmp);
    }
    if (mkdtemp(work) == NULL) {
        fprintf(stderr, "incoll mpirun: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    have_work = 1;
    got_signal = 0;
    signals_catch(old_sigs);
    if (fabric_arg) {
        if (realpath(fabric_arg, fabric) == NULL) {
            fprintf(stderr, "incoll mpirun: fabric %s: %s\n", fabric_arg,
                    strerror(errno));
            goto out;
        }
    } else {
        snprintf(fabric, sizeof(fabric), "%s/fabric", work);
        own = 1;
        if (own_fabric_up(fabric, nhosts, radix, emulate, link_rate) != 0) {
            fprintf(stderr,
                    "incoll mpirun: could not bring up a%s fabric in %s\n",
                    emulate ? "n emulated" : "", fabric);
            ret = got_signal ? 128 + got_signal : 1;
            goto out;
        }
    }

    /* An emulated fabric (made here or given): rank r in host r. */
    if (emu_present(fabric)) {
        char path[PATH_MAX + 32], err[256];
        snprintf(path, sizeof(path), "%s/fabric.conf", fabric);
        if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
            fprintf(stderr, "incoll mpirun: %s\n", err);
            goto out;
        }
        have_conf = 1;
        if (conf.nhosts != nhosts) {
            fprintf(stderr,
                    "incoll mpirun: the emulated fabric in %s has %d "
                    "hosts: with %d ranks per host (--ppn), run -n %d\n",
                    fabric, conf.nhosts, ppn, conf.nhosts * ppn);
            ret = 2;
            goto out;
        }
        if (emu_usable(why, sizeof(why)) != 0 || emu_ip_path() == NULL) {
            fprintf(stderr,
                    "incoll mpirun: the fabric in %s is emulated but its "
                    "namespaces cannot be entered: %s\n",
                    fabric, why);
            goto out;
        }
        if (cli_companion_path(CLI_PLACE_LIBEXEC, "incoll-launch-agent", agent,
                               sizeof(agent)) != 0) {
            fprintf(stderr, "incoll mpirun: cannot find my own directory\n");
            goto out;
        }
        if (access(agent, X_OK) != 0) {
            fprintf(stderr,
                    "incoll mpirun: %s: %s (the launch agent; built by "
                    "`make`)\n",
                    agent, strerror(errno));
            goto out;
        }
        snprintf(hostfile, sizeof(hostfile), "%s/hosts", work);
        if (write_hostfile(hostfile, &conf, mpich, ppn) != 0)
            goto out;
        emulated = 1;
    }
    /* With a manager every communicator can get a group: the ranks get
     * its address and secret, and their hosts in its topology in rank
     * order (INCOLL_HOSTS; the launcher cannot set INCOLL_HOST per rank),
     * as `incoll run` gives them. */
    if (mgr_fabric_managed(fabric)) {
        if (mpirun_mgr_env(fabric, ppn) != 0)
            goto out;
    } else {
        /* A fabric.conf-only fabric's ANs have no secret: the ranks must
         * not key the world group's packets with one from the caller's
         * environment (docs/security.md), as `incoll run` does. */
        unsetenv("INCOLL_SECRET_FILE");
    }

    if (geteuid() == 0) {
        /* Open MPI refuses root without these; harmless for MPICH. */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    setenv("INCOLL_FABRIC", fabric, 1);
    snprintf(npbuf, sizeof(npbuf), "%d", np);
    if (emulated) {
        /* The launcher runs in host 0: every daemon reaches it there. */
        char *pre[] = {(char *)emu_ip_path(), "netns", "exec",
                       conf.hosts[0].netns};
        for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
            push(av, &nav, pre[i]);
    }
    if (mpich) {
        /* Hydra passes the whole environment; name the ones we add. */
        char *fixed[] = {"mpiexec.mpich", "-n", npbuf};
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
            push(av, &nav, fixed[i]);
        if (emulated) {
            /* UCX would use shared memory between ranks of one machine:
             * TCP on the host's link only. */
            char *emu[] = {"-f",
                           hostfile,
                           "-iface",
                           "uplink",
                           "-launcher",
                           "rsh",
                           "-launcher-exec",
                           agent,
                           "-genv",
                           "UCX_TLS",
                           "tcp,self",
                           "-genv",
                           "UCX_NET_DEVICES",
                           "uplink"};
            for (size_t i = 0; i < sizeof(emu) / sizeof(emu[0]); i++)
                push(av, &nav, emu[i]);
        }
        if (preload) {
            push(av, &nav, "-genv");
            push(av, &nav, "LD_PRELOAD");
            push(av, &nav, lib);
        }
        push(av, &nav, "-genv");
        push(av, &nav, "INCOLL_FABRIC");
        push(av, &nav, fabric);
    } else {
        char *fixed[] = {"mpirun",          "-n",        npbuf,
                         "--oversubscribe", "--bind-to", "none",
                         "--mca",           "btl",       "tcp,self"};
        char *loop[] = {"--mca", "btl_tcp_if_include", "lo",
                        "--mca", "oob_tcp_if_include", "lo"};
        char *emu[] = {"--hostfile", hostfile, "--mca", "plm_rsh_agent", agent,
                       "--mca", "plm_rsh_no_tree_spawn", "1", "--mca",
                       "btl_tcp_if_include", EMU_NET_CIDR, "--mca",
                       "oob_tcp_if_include", EMU_NET_CIDR,
                       /* One slot per emulated host, so Open MPI would
                        * spin without yielding; the hosts share this
                        * machine's cores. */
                       "--mca", "mpi_yield_when_idle", "1"};
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
            push(av, &nav, fixed[i]);
        if (emulated)
            for (size_t i = 0; i < sizeof(emu) / sizeof(emu[0]); i++)
                push(av, &nav, emu[i]);
        else
            for (size_t i = 0; i < sizeof(loop) / sizeof(loop[0]); i++)
                push(av, &nav, loop[i]);
        /* -x NAME=VALUE for the preload, so mpirun itself is not
         * preloaded; -x NAME for every INCOLL_* variable. */
        if (preload) {
            envs[nenv] = malloc(strlen(lib) + 16);
            if (envs[nenv]) {
                sprintf(envs[nenv], "LD_PRELOAD=%s", lib);
                push(av, &nav, "-x");
                push(av, &nav, envs[nenv++]);
            }
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
    if (got_signal) {
        ret = 128 + got_signal;
        goto out_env;
    }
    ret = run_launcher(av, timeout_s, old_sigs);
    if (stat && !got_signal) {
        char *sargv[] = {"stat", "--fabric", fabric, NULL};
        fflush(NULL);
        if (cmd_stat(3, sargv) != 0)
            fprintf(stderr, "incoll mpirun: incoll stat failed\n");
    }
out_env:
    for (int i = 0; i < nenv; i++)
        free(envs[i]);
out:
    if (have_conf)
        fabric_conf_free(&conf);
    fflush(NULL);
    if (own)
        own_fabric_down(fabric);
    if (have_work) {
        if (keep)
            fprintf(stderr, "incoll mpirun: scratch directory kept: %s\n",
                    work);
        else
            nftw(work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        signals_restore(old_sigs);
    }
    return ret;
}
