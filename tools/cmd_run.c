/*
 * `incoll run -n N --fabric DIR [--timeout SEC] [--no-mgr] -- PROGRAM
 * ARGS...`: a minimal launcher, like mpirun on one machine. It forks N
 * ranks with INCOLL_RANK, INCOLL_SIZE, INCOLL_FABRIC, INCOLL_JOB (a fresh
 * job id) and INCOLL_GEN (the wall clock in ms, which orders jobs on the
 * ANs) set, and, when DIR/fabric.env names a manager, INCOLL_MGR,
 * INCOLL_SECRET_FILE and INCOLL_HOST (rank r runs on host r of
 * DIR/topology, modulo the number of hosts). It lets them write to our
 * stdout and stderr, and waits. The first rank to
 * fail (nonzero exit or a signal) gets named, the others are stopped (SIGTERM,
 * SIGKILL 2 s later) and its status becomes ours; so does a timeout (exit 124).
 *
 * Waiting is a poll() on a signalfd for SIGCHLD, SIGINT and SIGTERM, with
 * the time limit as its timeout: no CPU while the ranks run.
 */
#include "cli.h"

#include "common/fabric_conf.h"
#include "common/settings.h"
#include "fabric/emu.h"
#include "fabric/mgr_fabric.h"
#include "common/clock.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_EXIT_TIMEOUT 124
#define RUN_KILL_GRACE_MS 2000

typedef struct {
    pid_t pid;  /* 0 once reaped */
    int status; /* as from waitpid */
} rank_proc_t;

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll run -n N --fabric DIR [--ppn K] [--timeout SEC] "
        "[--no-mgr] [--place FIRST:STRIDE] [--] PROGRAM [ARGS...]\n"
        "\n"
        "Starts N ranks of PROGRAM with INCOLL_RANK=0..N-1, INCOLL_SIZE=N,\n"
        "INCOLL_FABRIC=DIR (made absolute), INCOLL_JOB (a fresh id unless\n"
        "set) and INCOLL_GEN (the clock in ms unless set) and waits for\n"
        "them. When DIR/fabric.env names a manager (`incoll fabric up`)\n"
        "the ranks also get INCOLL_MGR, INCOLL_SECRET_FILE and INCOLL_HOST\n"
        "(host r of DIR/topology, modulo its hosts), and N may be any\n"
        "number; --no-mgr runs them on fabric.conf alone (N must fill its\n"
        "hosts: one rank each, or K each with --ppn K).\n"
        "--ppn K puts K ranks on each host (rank r on host r/K): with\n"
        "INCOLL_HIER=node (the default, and always without a manager) they\n"
        "reduce in shared memory and one leader per host talks to the\n"
        "fabric.\n"
        "--place FIRST:STRIDE puts host h of the job (rank r / K) on the\n"
        "fabric's host FIRST + h * STRIDE (modulo its hosts; needs the\n"
        "manager): several jobs side by side, e.g. 0:4 and 1:4.\n"
        "If a rank fails, the others are stopped and incoll run exits with\n"
        "that rank's exit status (128+signal if it was killed); after\n"
        "--timeout seconds (default 600) every rank is killed and it exits\n"
        "124.\n");
}

/* Signals every running rank's process group. */
static void signal_all(rank_proc_t *ranks, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (ranks[i].pid > 0 && kill(-ranks[i].pid, sig) != 0)
            kill(ranks[i].pid, sig);
}

static void describe(int rank, int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "rank %d exited with status %d", rank,
                 WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "rank %d was killed by signal %d (%s)", rank,
                 WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "rank %d ended with wait status 0x%x", rank, status);
}

/* What the ranks of a managed fabric get (mgr[0] == '\0': none). */
typedef struct {
    char mgr[256];
    char secret[PATH_MAX + 32];
    char **hosts; /* topology host names */
    int nhosts;
} run_mgr_t;

/* "0,0,1,1,...": rank r on host r / ppn, for INCOLL_HOST_MAP. */
static int run_host_map(int n, int ppn, char **map_p)
{
    size_t len = (size_t)n * 12 + 1, off = 0;
    char *map = malloc(len);

    if (map == NULL)
        return -1;
    for (int r = 0; r < n; r++)
        off += (size_t)snprintf(map + off, len - off, "%s%d", r ? "," : "",
                                r / ppn);
    *map_p = map;
    return 0;
}

static pid_t spawn_rank(int rank, int size, int host, const char *fabric,
                        const char *job, const char *gen, const run_mgr_t *m,
                        const char *host_map, const char *netns,
                        const sigset_t *oldmask, char **prog_argv)
{
    char text[32];
    pid_t pid, parent = getpid();

    fflush(NULL);
    pid = fork();
    if (pid > 0)
        setpgid(pid, pid); /* also here, so no signal can miss the group */
    if (pid != 0)
        return pid;
    /* Each rank leads its own process group, so stopping it stops what
     * it started too; and it dies with us, so a killed launcher leaves no
     * ranks behind. */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    /* In an emulated fabric each host is a network namespace. */
    if (netns[0] && emu_netns_enter(netns) != 0) {
        fprintf(stderr,
                "incoll run: rank %d: cannot enter network namespace "
                "%s: %s\n",
                rank, netns, strerror(errno));
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    snprintf(text, sizeof(text), "%d", rank);
    setenv("INCOLL_RANK", text, 1);
    snprintf(text, sizeof(text), "%d", size);
    setenv("INCOLL_SIZE", text, 1);
    setenv("INCOLL_FABRIC", fabric, 1);
    setenv("INCOLL_JOB", job, 1);
    setenv("INCOLL_GEN", gen, 1);
    if (m->mgr[0]) {
        setenv("INCOLL_MGR", m->mgr, 1);
        setenv("INCOLL_SECRET_FILE", m->secret, 1);
        if (m->nhosts > 0)
            setenv("INCOLL_HOST", m->hosts[host % m->nhosts], 1);
    } else {
        /* fabric.conf alone, whatever the caller's environment says. The
         * fabric's secret, when it has one, still keys the world group's
         * packets (its ANs have it: docs/security.md). */
        unsetenv("INCOLL_MGR");
        if (host_map)
            setenv("INCOLL_HOST_MAP", host_map, 1);
        else
            unsetenv("INCOLL_HOST_MAP");
        if (m->secret[0])
            setenv("INCOLL_SECRET_FILE", m->secret, 1);
        else
            unsetenv("INCOLL_SECRET_FILE");
    }
    execvp(prog_argv[0], prog_argv);
    fprintf(stderr, "incoll run: rank %d: cannot run %s: %s\n", rank,
            prog_argv[0], strerror(errno));
    _exit(127);
}

int cmd_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"fabric", required_argument, NULL, 'f'},
        {"timeout", required_argument, NULL, 't'},
        {"no-mgr", no_argument, NULL, 'M'},
        {"ppn", required_argument, NULL, 'p'},
        {"place", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *fabric_arg = NULL;
    char fabric[PATH_MAX], conf_path[PATH_MAX + 16], err[512], why[256];
    char job[32], gen[16];
    int n = 0, opt, timeout_s = 600, running, ret = 0, sigfd, ppn = 1;
    int stopping = 0, no_mgr = 0, have_conf, first = 0, stride = 1;
    int placed = 0;
    char *host_map = NULL;
    run_mgr_t m;
    uint64_t deadline, kill_at = 0;
    rank_proc_t *ranks;
    fabric_conf_t conf;
    sigset_t mask, oldmask;

    optind = 1;
    /* '+': options end at the program name, whose own options are its. */
    while ((opt = getopt_long(argc, argv, "+n:f:t:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            n = atoi(optarg);
            break;
        case 'f':
            fabric_arg = optarg;
            break;
        case 't':
            timeout_s = atoi(optarg);
            break;
        case 'M':
            no_mgr = 1;
            break;
        case 'p':
            ppn = atoi(optarg);
            break;
        case 'P': {
            char c;
            if (sscanf(optarg, "%d:%d%c", &first, &stride, &c) != 2 ||
                first < 0 || stride < 1) {
                fprintf(stderr,
                        "incoll run: --place wants FIRST:STRIDE, FIRST >= 0 "
                        "and STRIDE >= 1 (e.g. 1:4), not '%s'\n",
                        optarg);
                return 2;
            }
            placed = 1;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (n < 1 || fabric_arg == NULL || optind >= argc || timeout_s < 1 ||
        ppn < 1) {
        fprintf(stderr, "incoll run: need -n N>=1, --fabric DIR, --ppn "
                        "K>=1 and a program\n");
        usage(stderr);
        return 2;
    }
    if (realpath(fabric_arg, fabric) == NULL) {
        fprintf(stderr, "incoll run: fabric %s: %s\n", fabric_arg,
                strerror(errno));
        return 1;
    }
    memset(&m, 0, sizeof(m));
    if (!no_mgr && mgr_fabric_managed(fabric)) {
        if (mgr_fabric_env(fabric, m.mgr, sizeof(m.mgr), m.secret,
                           sizeof(m.secret), err, sizeof(err)) != 0) {
            fprintf(stderr, "incoll run: %s\n", err);
            return 1;
        }
        m.nhosts = mgr_fabric_host_names(fabric, &m.hosts, err, sizeof(err));
        if (m.nhosts < 1) {
            fprintf(stderr, "incoll run: %s\n",
                    m.nhosts < 0 ? err : "the topology has no hosts");
            mgr_fabric_free_names(m.hosts, m.nhosts);
            return 1;
        }
    }
    if (no_mgr && mgr_fabric_managed(fabric)) {
        /* Only the secret: the world group's keys are derived from it. */
        if (mgr_fabric_env(fabric, m.mgr, sizeof(m.mgr), m.secret,
                           sizeof(m.secret), err, sizeof(err)) != 0) {
            fprintf(stderr, "incoll run: %s\n", err);
            return 1;
        }
        m.mgr[0] = '\0';
    }
    snprintf(conf_path, sizeof(conf_path), "%s/fabric.conf", fabric);
    memset(&conf, 0, sizeof(conf));
    have_conf = access(conf_path, F_OK) == 0 || !m.mgr[0];
    if (have_conf &&
        fabric_conf_load(conf_path, &conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll run: %s\n", err);
        mgr_fabric_free_names(m.hosts, m.nhosts);
        return 1;
    }
    if (!m.mgr[0] && placed) {
        fprintf(stderr, "incoll run: --place needs a fabric with a manager "
                        "(fabric.conf alone has one rank per host)\n");
        fabric_conf_free(&conf);
        mgr_fabric_free_names(m.hosts, m.nhosts);
        return 1;
    }
    /* Without a manager rank r is fabric.conf's host r, or with --ppn K
     * host r / K (INCOLL_HOST_MAP, src/host/rdv.c): every host needs a
     * rank, and there is no host beyond fabric.conf's. */
    if (!m.mgr[0] && (n + ppn - 1) / ppn != conf.nhosts) {
        fprintf(stderr,
                "incoll run: the fabric in %s has %d hosts but -n %d with "
                "%d rank%s per host (--ppn) needs %d; without a manager "
                "every host of fabric.conf needs a rank: run -n %d..%d\n",
                fabric, conf.nhosts, n, ppn, ppn == 1 ? "" : "s",
                (n + ppn - 1) / ppn, (conf.nhosts - 1) * ppn + 1,
                conf.nhosts * ppn);
        fabric_conf_free(&conf);
        return 1;
    }
    if (!m.mgr[0] && ppn > 1 && run_host_map(n, ppn, &host_map) != 0) {
        fprintf(stderr, "incoll run: out of memory\n");
        fabric_conf_free(&conf);
        return 1;
    }

    /* The job id tells the ANs that a new job reuses the world group (its
     * generation), so nothing of an earlier job on this fabric can reach
     * this one. A caller's own INCOLL_JOB wins. */
    if (setting_str(SETTING_JOB) != NULL)
        snprintf(job, sizeof(job), "%s", setting_str(SETTING_JOB));
    else
        snprintf(job, sizeof(job), "run-%016llx",
                 (unsigned long long)fabric_random64());
    /* The generation orders jobs on the ANs: a newer one takes a group
     * over at once. The wall clock in ms (mod 2^32) is newer for every
     * later job. A caller's own INCOLL_GEN wins. */
    setting_value_t genv;
    char gen_err[256];
    /* The ranks refuse a bad one: so does the launcher, at once. */
    if (setting_get(SETTING_GEN, &genv, gen_err, sizeof(gen_err)) !=
        INCOLL_OK) {
        fprintf(stderr, "incoll run: %s\n", gen_err);
        fabric_conf_free(&conf);
        return 2;
    }
    if (genv.set) {
        snprintf(gen, sizeof(gen), "%s", genv.text);
    } else {
        struct timespec ts;
        uint32_t g;
        clock_gettime(CLOCK_REALTIME, &ts);
        g = (uint32_t)((uint64_t)ts.tv_sec * 1000 +
                       (uint64_t)ts.tv_nsec / 1000000);
        snprintf(gen, sizeof(gen), "%u", g ? g : 1u);
    }

    ranks = calloc((size_t)n, sizeof(*ranks));
    if (ranks == NULL) {
        fprintf(stderr, "incoll run: out of memory\n");
        fabric_conf_free(&conf);
        mgr_fabric_free_names(m.hosts, m.nhosts);
        return 1;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &oldmask);
    sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd < 0) {
        fprintf(stderr, "incoll run: cannot create a signalfd: %s\n",
                strerror(errno));
        ret = 1;
        goto out_mask;
    }

    running = 0;
    for (int r = 0; r < n; r++) {
        /* Rank r is on host r / ppn (mod the hosts with a manager; moved
         * by --place), in its namespace on an emulated fabric. */
        int host = first + r / ppn * stride;
        ranks[r].pid =
            spawn_rank(r, n, host, fabric, job, gen, &m, host_map,
                       conf.hosts ? conf.hosts[host % conf.nhosts].netns : "",
                       &oldmask, argv + optind);
        if (ranks[r].pid < 0) {
            fprintf(stderr, "incoll run: cannot fork rank %d: %s\n", r,
                    strerror(errno));
            ranks[r].pid = 0;
            ret = 1;
            stopping = 1;
            kill_at = now_ms() + RUN_KILL_GRACE_MS;
            signal_all(ranks, n, SIGTERM);
            break;
        }
        running++;
    }

    deadline = now_ms() + (uint64_t)timeout_s * 1000;
    while (running > 0) {
        struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
        uint64_t now = now_ms(), until = stopping ? kill_at : deadline;
        struct signalfd_siginfo si;
        pid_t pid;
        int st;

        if (now >= until) {
            if (stopping) {
                /* Grace is over: SIGKILL, then keep reaping. */
                signal_all(ranks, n, SIGKILL);
                kill_at = UINT64_MAX / 2;
            } else {
                fprintf(stderr,
                        "incoll run: timed out after %d s; stopping "
                        "%d rank%s\n",
                        timeout_s, running, running == 1 ? "" : "s");
                ret = RUN_EXIT_TIMEOUT;
                stopping = 1;
                kill_at = now + RUN_KILL_GRACE_MS;
                signal_all(ranks, n, SIGTERM);
            }
            continue;
        }
        if (poll(&pfd, 1, (int)(until - now > 60000 ? 60000 : until - now)) <=
            0)
            continue;
        while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            if (si.ssi_signo == SIGCHLD || stopping)
                continue;
            fprintf(stderr, "incoll run: got signal %u; stopping the ranks\n",
                    si.ssi_signo);
            ret = 128 + (int)si.ssi_signo;
            stopping = 1;
            kill_at = now_ms() + RUN_KILL_GRACE_MS;
            signal_all(ranks, n, SIGTERM);
        }
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            int r;
            for (r = 0; r < n && ranks[r].pid != pid; r++)
                ;
            if (r == n)
                continue;
            ranks[r].pid = 0;
            ranks[r].status = st;
            running--;
            if ((WIFEXITED(st) && WEXITSTATUS(st) == 0) || stopping)
                continue;
            describe(r, st, why, sizeof(why));
            fprintf(stderr, "incoll run: %s%s\n", why,
                    running ? "; stopping the other ranks" : "");
            ret = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            stopping = 1;
            kill_at = now_ms() + RUN_KILL_GRACE_MS;
            signal_all(ranks, n, SIGTERM);
        }
    }
    close(sigfd);
out_mask:
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    free(host_map);
    free(ranks);
    fabric_conf_free(&conf);
    mgr_fabric_free_names(m.hosts, m.nhosts);
    return ret;
}
