/*
 * `incoll mpirun -n P [options] -- PROGRAM [ARGS...]`: runs an unmodified
 * MPI program with incoll in every rank: under the Open MPI the
 * collective component coll/incoll was built against, that component
 * (docs/ompi.md: given to a stock mpirun by its component path, nothing
 * preloaded); under MPICH or another Open MPI, the PMPI layer
 * libincoll_mpi preloaded (docs/mpi.md). --layer chooses; the choice is
 * said once on stderr (tools/mpirun_layer.c).
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
#include "mpirun_layer.h"
#include "fabric/emu.h"
#include "fabric/fabric.h"
#include "fabric/mgr_fabric.h"

#include "common/settings.h"
#include "common/clock.h"
#include "common/log.h"

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
        "                     [--layer auto|component|pmpi]\n"
        "                     [--lib PATH | --no-preload] [--stat] [--keep]\n"
        "                     [--timeout SEC] -- PROGRAM [ARGS...]\n"
        "\n"
        "Runs PROGRAM on P MPI ranks with incoll's Open MPI component or\n"
        "its PMPI layer, so its collectives run on the fabric.\n"
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
        "  --layer L         component: Open MPI's coll/incoll (no preload),\n"
        "                    pmpi: libincoll_mpi preloaded, auto (default):\n"
        "                    the component under the Open MPI it was built\n"
        "                    against, else pmpi\n"
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
                log_strerror(errno));
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
        fprintf(stderr, "incoll mpirun: fork: %s\n", log_strerror(errno));
        return 127;
    }
    if (pid == 0) {
        signals_restore(old);
        execvp(av[0], av);
        fprintf(stderr, "incoll mpirun: cannot run %s: %s\n", av[0],
                log_strerror(errno));
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
                log_strerror(errno));
        return -1;
    }
    for (int r = 0; r < conf->nhosts; r++)
        fprintf(f, mpich ? "%s:%d\n" : "%s slots=%d\n", conf->hosts[r].netns,
                ppn);
    if (fclose(f) != 0) {
        fprintf(stderr, "incoll mpirun: cannot write %s: %s\n", path,
                log_strerror(errno));
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

/* What the command line asks for. */
typedef struct {
    const char *fabric_arg; /* --fabric or INCOLL_FABRIC; NULL: make one */
    const char *mpi;        /* "openmpi" or "mpich" */
    char lib[PATH_MAX];     /* the interposer to preload */
    mpirun_layer_t layer;   /* --layer */
    int lib_given;          /* --lib or --no-preload */
    mpirun_layer_choice_t choice;
    int np, ppn, nhosts, radix;
    int stat, keep, emulate, preload, timeout_s, mpich;
    uint64_t link_rate;
    int prog; /* argv index of the program */
} mpirun_opts_t;

/* The job as planned: its scratch directory, its fabric, and for an
 * emulated fabric the hostfile and launch agent. */
typedef struct {
    char work[128];
    char fabric[PATH_MAX], hostfile[PATH_MAX], agent[PATH_MAX];
    int have_work, own, emulated, have_conf;
    fabric_conf_t conf;
    struct sigaction old_sigs[3];
} mpirun_job_t;

/* The launcher's argument vector; envs are the strings it owns. */
typedef struct {
    char *av[MPIRUN_MAX_ARGS], *envs[MPIRUN_MAX_ARGS];
    int nav, nenv;
    char npbuf[16];
} mpirun_argv_t;

/* Parses argv into o. 0 to go on; else the exit status (0 after --help). */
static int parse_opts(int argc, char **argv, mpirun_opts_t *o, int *exit_p)
{
    enum {
        OPT_LINK_RATE = 256,
        OPT_NO_PRELOAD,
        OPT_TIMEOUT,
        OPT_PPN,
        OPT_LAYER
    };
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
        {"layer", required_argument, NULL, OPT_LAYER},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;

    memset(o, 0, sizeof(*o));
    o->mpi = "openmpi";
    o->radix = 4;
    o->preload = 1;
    o->ppn = 1;
    optind = 1;
    *exit_p = 2;
    while ((opt = getopt_long(argc, argv, "+n:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            o->np = atoi(optarg);
            break;
        case 'f':
            o->fabric_arg = optarg;
            break;
        case 'k':
            o->radix = atoi(optarg);
            break;
        case 'm':
            o->mpi = optarg;
            break;
        case 'l':
            snprintf(o->lib, sizeof(o->lib), "%s", optarg);
            o->lib_given = 1;
            break;
        case OPT_NO_PRELOAD:
            o->preload = 0;
            o->lib_given = 1;
            break;
        case OPT_LAYER:
            if (mpirun_layer_parse(optarg, &o->layer) != 0) {
                fprintf(stderr,
                        "incoll mpirun: bad --layer '%s' (want "
                        "auto, component or pmpi)\n",
                        optarg);
                return -1;
            }
            break;
        case 's':
            o->stat = 1;
            break;
        case 'K':
            o->keep = 1;
            break;
        case 'E':
            o->emulate = 1;
            break;
        case OPT_LINK_RATE:
            if (emu_parse_rate(optarg, &o->link_rate) != 0) {
                fprintf(stderr,
                        "incoll mpirun: bad --link-rate '%s' (want e.g. "
                        "100mbit, 1g)\n",
                        optarg);
                return -1;
            }
            break;
        case OPT_TIMEOUT:
            o->timeout_s = atoi(optarg);
            if (o->timeout_s < 1) {
                fprintf(stderr, "incoll mpirun: --timeout wants seconds >= "
                                "1\n");
                return -1;
            }
            break;
        case OPT_PPN:
            o->ppn = atoi(optarg);
            if (o->ppn < 1) {
                fprintf(stderr, "incoll mpirun: --ppn wants ranks per host "
                                ">= 1\n");
                return -1;
            }
            break;
        case 'h':
            usage(stdout);
            *exit_p = 0;
            return -1;
        default:
            usage(stderr);
            return -1;
        }
    }
    o->nhosts = (o->np + o->ppn - 1) / o->ppn;
    if (o->np < 1 || o->radix < 2 || optind >= argc ||
        (strcmp(o->mpi, "openmpi") != 0 && strcmp(o->mpi, "mpich") != 0)) {
        fprintf(stderr, "incoll mpirun: need -n P >= 1, --radix K >= 2, "
                        "--mpi openmpi|mpich and a program after --\n");
        usage(stderr);
        return -1;
    }
    if (o->fabric_arg && o->emulate) {
        fprintf(stderr, "incoll mpirun: --fabric uses a fabric as it is "
                        "(an emulated one is detected): it does not go "
                        "with --emulate\n");
        return -1;
    }
    if (o->link_rate && !o->emulate) {
        fprintf(stderr, "incoll mpirun: --link-rate needs --emulate\n");
        return -1;
    }
    o->mpich = strcmp(o->mpi, "mpich") == 0;
    o->prog = optind; /* cmd_fabric and cmd_stat reuse getopt's optind */
    if (o->fabric_arg == NULL && !o->emulate)
        o->fabric_arg = setting_str(SETTING_FABRIC);
    return 0;
}

/* The layer (said once on stderr) and for the PMPI layer the
 * interposer to preload, checked; 0, or -1 with the cause printed. */
static int find_lib(mpirun_opts_t *o)
{
    if (o->layer == MPIRUN_LAYER_COMPONENT && o->lib_given) {
        fprintf(stderr, "incoll mpirun: --layer component preloads "
                        "nothing: it does not go with --lib or "
                        "--no-preload\n");
        return -1;
    }
    if (mpirun_layer_choose(o->layer, o->mpich, o->lib_given, &o->choice) !=
        0) {
        fprintf(stderr, "incoll mpirun: --layer component: %s\n",
                o->choice.why);
        return -1;
    }
    if (o->choice.layer == MPIRUN_LAYER_COMPONENT) {
        fprintf(stderr,
                "incoll mpirun: layer component (coll/incoll, no "
                "preload): %s\n",
                o->choice.why);
        o->preload = 0;
        return 0;
    }
    fprintf(stderr, "incoll mpirun: layer pmpi (libincoll_mpi%s): %s\n",
            o->preload ? " preloaded" : " linked by the program",
            o->choice.why);
    if (!o->preload)
        return 0;
    if (o->lib[0] == '\0' && default_lib(o->mpi, o->lib, sizeof(o->lib)) != 0) {
        fprintf(stderr,
                "incoll mpirun: cannot find libincoll_mpi; use --lib\n");
        return -1;
    }
    if (access(o->lib, R_OK) != 0) {
        fprintf(stderr,
                "incoll mpirun: %s: %s (built by `make` when %s is "
                "installed)\n",
                o->lib, log_strerror(errno),
                o->mpich ? "mpicc.mpich" : "mpicc");
        return -1;
    }
    return 0;
}

/* For an emulated fabric: its conf, the hostfile naming its hosts and the
 * launch agent. 0, or the exit status with the cause printed. */
static int plan_emulated(const mpirun_opts_t *o, mpirun_job_t *j)
{
    char path[PATH_MAX + 32], err[256], why[256];

    snprintf(path, sizeof(path), "%s/fabric.conf", j->fabric);
    if (fabric_conf_load(path, &j->conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll mpirun: %s\n", err);
        return 1;
    }
    j->have_conf = 1;
    if (j->conf.nhosts != o->nhosts) {
        fprintf(stderr,
                "incoll mpirun: the emulated fabric in %s has %d "
                "hosts: with %d ranks per host (--ppn), run -n %d\n",
                j->fabric, j->conf.nhosts, o->ppn, j->conf.nhosts * o->ppn);
        return 2;
    }
    if (emu_usable(why, sizeof(why)) != 0 || emu_ip_path() == NULL) {
        fprintf(stderr,
                "incoll mpirun: the fabric in %s is emulated but its "
                "namespaces cannot be entered: %s\n",
                j->fabric, why);
        return 1;
    }
    if (cli_companion_path(CLI_PLACE_LIBEXEC, "incoll-launch-agent", j->agent,
                           sizeof(j->agent)) != 0) {
        fprintf(stderr, "incoll mpirun: cannot find my own directory\n");
        return 1;
    }
    if (access(j->agent, X_OK) != 0) {
        fprintf(stderr,
                "incoll mpirun: %s: %s (the launch agent; built by "
                "`make`)\n",
                j->agent, log_strerror(errno));
        return 1;
    }
    snprintf(j->hostfile, sizeof(j->hostfile), "%s/hosts", j->work);
    if (write_hostfile(j->hostfile, &j->conf, o->mpich, o->ppn) != 0)
        return 1;
    j->emulated = 1;
    return 0;
}

/*
 * Plans the job: a scratch directory, the fabric (given, or brought up
 * here), the emulated fabric's hostfile, and the ranks' environment.
 * From here on the signals only set got_signal (job_end undoes it all).
 * 0, or the exit status with the cause printed.
 */
static int plan_job(mpirun_opts_t *o, mpirun_job_t *j)
{
    const char *tmp = getenv("TMPDIR");
    char why[256];
    int ret;

    if (o->emulate && emu_usable(why, sizeof(why)) != 0) {
        fprintf(stderr,
                "incoll mpirun: cannot emulate links: %s; using the "
                "loopback fabric instead\n",
                why);
        o->emulate = 0;
    }
    /* The scratch directory goes into $TMPDIR as other tools' do (short
     * paths only: MPI puts its sockets under it too). */
    if (tmp == NULL || tmp[0] != '/' || strlen(tmp) > 64)
        tmp = "/tmp";
    snprintf(j->work, sizeof(j->work), "%s/incoll-mpirun-XXXXXX", tmp);
    if (mkdtemp(j->work) == NULL) {
        fprintf(stderr, "incoll mpirun: mkdtemp: %s\n", log_strerror(errno));
        return 1;
    }
    j->have_work = 1;
    got_signal = 0;
    signals_catch(j->old_sigs);
    if (o->fabric_arg) {
        if (realpath(o->fabric_arg, j->fabric) == NULL) {
            fprintf(stderr, "incoll mpirun: fabric %s: %s\n", o->fabric_arg,
                    log_strerror(errno));
            return 1;
        }
    } else {
        snprintf(j->fabric, sizeof(j->fabric), "%s/fabric", j->work);
        j->own = 1;
        if (own_fabric_up(j->fabric, o->nhosts, o->radix, o->emulate,
                          o->link_rate) != 0) {
            fprintf(stderr,
                    "incoll mpirun: could not bring up a%s fabric in %s\n",
                    o->emulate ? "n emulated" : "", j->fabric);
            return got_signal ? 128 + got_signal : 1;
        }
    }
    /* An emulated fabric (made here or given): rank r in host r. */
    if (emu_present(j->fabric) && (ret = plan_emulated(o, j)) != 0)
        return ret;
    /* With a manager every communicator can get a group: the ranks get
     * its address and secret, and their hosts in its topology in rank
     * order (INCOLL_HOSTS; the launcher cannot set INCOLL_HOST per rank),
     * as `incoll run` gives them. */
    if (mgr_fabric_managed(j->fabric)) {
        if (mpirun_mgr_env(j->fabric, o->ppn) != 0)
            return 1;
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
    setenv("INCOLL_FABRIC", j->fabric, 1);
    return 0;
}

/* Pushes the n strings of list. */
static void push_all(mpirun_argv_t *a, char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        push(a->av, &a->nav, list[i]);
}

/* MPICH's mpiexec (Hydra), which passes the whole environment: the
 * variables added here are named with -genv. */
static void argv_mpich(const mpirun_opts_t *o, mpirun_job_t *j,
                       mpirun_argv_t *a)
{
    char *fixed[] = {"mpiexec.mpich", "-n", a->npbuf};
    /* UCX would use shared memory between ranks of one machine: TCP on
     * the host's link only. */
    char *emu[] = {
        "-f",       j->hostfile,      "-iface",          "uplink", "-launcher",
        "rsh",      "-launcher-exec", j->agent,          "-genv",  "UCX_TLS",
        "tcp,self", "-genv",          "UCX_NET_DEVICES", "uplink"};

    push_all(a, fixed, sizeof(fixed) / sizeof(fixed[0]));
    if (j->emulated)
        push_all(a, emu, sizeof(emu) / sizeof(emu[0]));
    if (o->preload) {
        char *pre[] = {"-genv", "LD_PRELOAD", (char *)o->lib};
        push_all(a, pre, sizeof(pre) / sizeof(pre[0]));
    }
    char *fab[] = {"-genv", "INCOLL_FABRIC", j->fabric};
    push_all(a, fab, sizeof(fab) / sizeof(fab[0]));
}

/* Open MPI's mpirun: TCP only, on the fabric's addresses; -x for the
 * preload (so mpirun itself is not preloaded) and every INCOLL_*. */
static void argv_openmpi(const mpirun_opts_t *o, mpirun_job_t *j,
                         mpirun_argv_t *a)
{
    char *fixed[] = {"mpirun",          "-n",        a->npbuf,
                     "--oversubscribe", "--bind-to", "none",
                     "--mca",           "btl",       "tcp,self"};
    char *loop[] = {"--mca", "btl_tcp_if_include", "lo",
                    "--mca", "oob_tcp_if_include", "lo"};
    char *emu[] = {"--hostfile", j->hostfile, "--mca", "plm_rsh_agent",
                   j->agent, "--mca", "plm_rsh_no_tree_spawn", "1", "--mca",
                   "btl_tcp_if_include", EMU_NET_CIDR, "--mca",
                   "oob_tcp_if_include", EMU_NET_CIDR,
                   /* One slot per emulated host, so Open MPI would spin
                    * without yielding; the hosts share this machine's
                    * cores. */
                   "--mca", "mpi_yield_when_idle", "1"};

    push_all(a, fixed, sizeof(fixed) / sizeof(fixed[0]));
    if (j->emulated)
        push_all(a, emu, sizeof(emu) / sizeof(emu[0]));
    else
        push_all(a, loop, sizeof(loop) / sizeof(loop[0]));
    if (o->choice.layer == MPIRUN_LAYER_COMPONENT) {
        /* Open MPI's own components, then ours (when not installed
         * among them); turned on whatever a site's defaults say. */
        char *path[] = {"--mca", "mca_base_component_path",
                        (char *)o->choice.path};
        char *on[] = {"--mca", "coll_incoll_enable", "1"};
        if (o->choice.path[0])
            push_all(a, path, sizeof(path) / sizeof(path[0]));
        push_all(a, on, sizeof(on) / sizeof(on[0]));
    }
    if (o->preload) {
        a->envs[a->nenv] = malloc(strlen(o->lib) + 16);
        if (a->envs[a->nenv]) {
            sprintf(a->envs[a->nenv], "LD_PRELOAD=%s", o->lib);
            push(a->av, &a->nav, "-x");
            push(a->av, &a->nav, a->envs[a->nenv++]);
        }
    }
    for (char **e = environ; *e && a->nenv < MPIRUN_MAX_ARGS - 1; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "INCOLL_", 7) != 0 || eq == NULL)
            continue;
        a->envs[a->nenv] = strndup(*e, (size_t)(eq - *e));
        if (a->envs[a->nenv] == NULL)
            continue;
        push(a->av, &a->nav, "-x");
        push(a->av, &a->nav, a->envs[a->nenv++]);
    }
}

/* The launcher's whole command line, the program's last. 0, or -1 when
 * it does not fit. */
static int build_argv(const mpirun_opts_t *o, mpirun_job_t *j, int argc,
                      char **argv, mpirun_argv_t *a)
{
    snprintf(a->npbuf, sizeof(a->npbuf), "%d", o->np);
    if (j->emulated) {
        /* The launcher runs in host 0: every daemon reaches it there. */
        char *pre[] = {(char *)emu_ip_path(), "netns", "exec",
                       j->conf.hosts[0].netns};
        push_all(a, pre, sizeof(pre) / sizeof(pre[0]));
    }
    if (o->mpich)
        argv_mpich(o, j, a);
    else
        argv_openmpi(o, j, a);
    for (int i = o->prog; i < argc; i++) {
        if (push(a->av, &a->nav, argv[i]) != 0) {
            fprintf(stderr, "incoll mpirun: too many arguments\n");
            return -1;
        }
    }
    return 0;
}

/* Undoes plan_job: the fabric made here, the scratch directory (unless
 * --keep), the signal dispositions. */
static void job_end(const mpirun_opts_t *o, mpirun_job_t *j)
{
    if (j->have_conf)
        fabric_conf_free(&j->conf);
    fflush(NULL);
    if (j->own)
        own_fabric_down(j->fabric);
    if (j->have_work) {
        if (o->keep)
            fprintf(stderr, "incoll mpirun: scratch directory kept: %s\n",
                    j->work);
        else
            nftw(j->work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        signals_restore(j->old_sigs);
    }
}

int cmd_mpirun(int argc, char **argv)
{
    mpirun_opts_t o;
    mpirun_job_t *j;
    mpirun_argv_t *a;
    int ret;

    if (parse_opts(argc, argv, &o, &ret) != 0)
        return ret;
    if (find_lib(&o) != 0)
        return 1;
    j = calloc(1, sizeof(*j));
    a = calloc(1, sizeof(*a));
    if (j == NULL || a == NULL) {
        fprintf(stderr, "incoll mpirun: out of memory\n");
        free(j);
        free(a);
        return 1;
    }
    ret = plan_job(&o, j);
    if (ret == 0 && build_argv(&o, j, argc, argv, a) != 0)
        ret = 2;
    if (ret == 0 && got_signal)
        ret = 128 + got_signal;
    if (ret == 0) {
        ret = run_launcher(a->av, o.timeout_s, j->old_sigs);
        if (o.stat && !got_signal) {
            char *sargv[] = {"stat", "--fabric", j->fabric, NULL};
            fflush(NULL);
            if (cmd_stat(3, sargv) != 0)
                fprintf(stderr, "incoll mpirun: incoll stat failed\n");
        }
    }
    for (int i = 0; i < a->nenv; i++)
        free(a->envs[i]);
    job_end(&o, j);
    free(j);
    free(a);
    return ret;
}
