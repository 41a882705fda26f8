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
#include "common/log.h"

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

/* What the command line asks for. */
typedef struct {
    const char *fabric_arg;
    int n, ppn, timeout_s, no_mgr, first, stride, placed;
    int prog; /* argv index of the program */
} run_opts_t;

/* The job as planned: the fabric, what the ranks get, their ids. */
typedef struct {
    char fabric[PATH_MAX];
    run_mgr_t m;
    fabric_conf_t conf;
    char *host_map; /* INCOLL_HOST_MAP without a manager and --ppn > 1 */
    char job[32], gen[16];
} run_plan_t;

static pid_t spawn_rank(int rank, int size, int host, const run_plan_t *p,
                        const char *netns, const sigset_t *oldmask,
                        char **prog_argv)
{
    const run_mgr_t *m = &p->m;
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
                rank, netns, log_strerror(errno));
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    snprintf(text, sizeof(text), "%d", rank);
    setenv("INCOLL_RANK", text, 1);
    snprintf(text, sizeof(text), "%d", size);
    setenv("INCOLL_SIZE", text, 1);
    setenv("INCOLL_FABRIC", p->fabric, 1);
    setenv("INCOLL_JOB", p->job, 1);
    setenv("INCOLL_GEN", p->gen, 1);
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
        if (p->host_map)
            setenv("INCOLL_HOST_MAP", p->host_map, 1);
        else
            unsetenv("INCOLL_HOST_MAP");
        if (m->secret[0])
            setenv("INCOLL_SECRET_FILE", m->secret, 1);
        else
            unsetenv("INCOLL_SECRET_FILE");
    }
    execvp(prog_argv[0], prog_argv);
    fprintf(stderr, "incoll run: rank %d: cannot run %s: %s\n", rank,
            prog_argv[0], log_strerror(errno));
    _exit(127);
}

/* Parses argv into o. 0 to go on; else -1 with *exit_p the status (0
 * after --help). */
static int parse_opts(int argc, char **argv, run_opts_t *o, int *exit_p)
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
    int opt;
    char c;

    memset(o, 0, sizeof(*o));
    o->timeout_s = 600;
    o->ppn = 1;
    o->stride = 1;
    *exit_p = 2;
    optind = 1;
    /* '+': options end at the program name, whose own options are its. */
    while ((opt = getopt_long(argc, argv, "+n:f:t:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            o->n = atoi(optarg);
            break;
        case 'f':
            o->fabric_arg = optarg;
            break;
        case 't':
            o->timeout_s = atoi(optarg);
            break;
        case 'M':
            o->no_mgr = 1;
            break;
        case 'p':
            o->ppn = atoi(optarg);
            break;
        case 'P':
            if (sscanf(optarg, "%d:%d%c", &o->first, &o->stride, &c) != 2 ||
                o->first < 0 || o->stride < 1) {
                fprintf(stderr,
                        "incoll run: --place wants FIRST:STRIDE, FIRST >= 0 "
                        "and STRIDE >= 1 (e.g. 1:4), not '%s'\n",
                        optarg);
                return -1;
            }
            o->placed = 1;
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
    if (o->n < 1 || o->fabric_arg == NULL || optind >= argc ||
        o->timeout_s < 1 || o->ppn < 1) {
        fprintf(stderr, "incoll run: need -n N>=1, --fabric DIR, --ppn "
                        "K>=1 and a program\n");
        usage(stderr);
        return -1;
    }
    o->prog = optind;
    return 0;
}

/* The manager's address and secret for the ranks (only the secret with
 * --no-mgr: the world group's keys are derived from it), and the
 * topology's hosts. 0, or -1 with the cause printed. */
static int plan_mgr(const run_opts_t *o, run_plan_t *p)
{
    run_mgr_t *m = &p->m;
    char err[512];

    if (!mgr_fabric_managed(p->fabric))
        return 0;
    if (mgr_fabric_env(p->fabric, m->mgr, sizeof(m->mgr), m->secret,
                       sizeof(m->secret), err, sizeof(err)) != 0) {
        fprintf(stderr, "incoll run: %s\n", err);
        return -1;
    }
    if (o->no_mgr) {
        m->mgr[0] = '\0';
        return 0;
    }
    m->nhosts = mgr_fabric_host_names(p->fabric, &m->hosts, err, sizeof(err));
    if (m->nhosts < 1) {
        fprintf(stderr, "incoll run: %s\n",
                m->nhosts < 0 ? err : "the topology has no hosts");
        return -1;
    }
    return 0;
}

/* The job id tells the ANs that a new job reuses the world group (its
 * generation), so nothing of an earlier job on this fabric can reach this
 * one; the generation orders jobs on the ANs: a newer one takes a group
 * over at once. The wall clock in ms (mod 2^32) is newer for every later
 * job. A caller's own INCOLL_JOB and INCOLL_GEN win. 0, or 2 with a bad
 * INCOLL_GEN printed (the ranks would refuse it). */
static int plan_ids(run_plan_t *p)
{
    setting_value_t genv;
    char err[256];

    if (setting_str(SETTING_JOB) != NULL)
        snprintf(p->job, sizeof(p->job), "%s", setting_str(SETTING_JOB));
    else
        snprintf(p->job, sizeof(p->job), "run-%016llx",
                 (unsigned long long)fabric_random64());
    /* The ranks refuse a bad INCOLL_GEN: so does the launcher, at once. */
    if (setting_get(SETTING_GEN, &genv, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll run: %s\n", err);
        return 2;
    }
    if (genv.set) {
        snprintf(p->gen, sizeof(p->gen), "%s", genv.text);
    } else {
        struct timespec ts;
        uint32_t g;
        clock_gettime(CLOCK_REALTIME, &ts);
        g = (uint32_t)((uint64_t)ts.tv_sec * 1000 +
                       (uint64_t)ts.tv_nsec / 1000000);
        snprintf(p->gen, sizeof(p->gen), "%u", g ? g : 1u);
    }
    return 0;
}

/* Plans the job: the fabric, the manager's environment, fabric.conf
 * (always without a manager) and the ids. 0, or -1 with the cause
 * printed (2: a bad setting, as for a bad option); plan_free undoes it
 * either way. */
static int plan_job(const run_opts_t *o, run_plan_t *p)
{
    char conf_path[PATH_MAX + 16], err[512];
    const run_mgr_t *m = &p->m;

    if (realpath(o->fabric_arg, p->fabric) == NULL) {
        fprintf(stderr, "incoll run: fabric %s: %s\n", o->fabric_arg,
                log_strerror(errno));
        return -1;
    }
    if (plan_mgr(o, p) != 0)
        return -1;
    snprintf(conf_path, sizeof(conf_path), "%s/fabric.conf", p->fabric);
    if ((access(conf_path, F_OK) == 0 || !m->mgr[0]) &&
        fabric_conf_load(conf_path, &p->conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll run: %s\n", err);
        return -1;
    }
    if (!m->mgr[0] && o->placed) {
        fprintf(stderr, "incoll run: --place needs a fabric with a manager "
                        "(fabric.conf alone has one rank per host)\n");
        return -1;
    }
    /* Without a manager rank r is fabric.conf's host r, or with --ppn K
     * host r / K (INCOLL_HOST_MAP, src/host/rdv.c): every host needs a
     * rank, and there is no host beyond fabric.conf's. */
    if (!m->mgr[0] && (o->n + o->ppn - 1) / o->ppn != p->conf.nhosts) {
        fprintf(stderr,
                "incoll run: the fabric in %s has %d hosts but -n %d with "
                "%d rank%s per host (--ppn) needs %d; without a manager "
                "every host of fabric.conf needs a rank: run -n %d..%d\n",
                p->fabric, p->conf.nhosts, o->n, o->ppn, o->ppn == 1 ? "" : "s",
                (o->n + o->ppn - 1) / o->ppn, (p->conf.nhosts - 1) * o->ppn + 1,
                p->conf.nhosts * o->ppn);
        return -1;
    }
    if (!m->mgr[0] && o->ppn > 1 &&
        run_host_map(o->n, o->ppn, &p->host_map) != 0) {
        fprintf(stderr, "incoll run: out of memory\n");
        return -1;
    }
    return plan_ids(p);
}

static void plan_free(run_plan_t *p)
{
    free(p->host_map);
    fabric_conf_free(&p->conf);
    mgr_fabric_free_names(p->m.hosts, p->m.nhosts);
}

/* The launcher's state while the ranks run. */
typedef struct {
    rank_proc_t *ranks;
    int n, running, stopping, ret;
    uint64_t kill_at;
} run_job_t;

/* Stops every rank (SIGTERM, SIGKILL after the grace) with ret as the
 * job's status. */
static void job_stop(run_job_t *j, int ret)
{
    j->ret = ret;
    j->stopping = 1;
    j->kill_at = now_ms() + RUN_KILL_GRACE_MS;
    signal_all(j->ranks, j->n, SIGTERM);
}

/* Forks every rank: rank r is on host r / ppn (mod the hosts with a
 * manager; moved by --place), in its namespace on an emulated fabric. */
static void launch(const run_opts_t *o, const run_plan_t *p, run_job_t *j,
                   const sigset_t *oldmask, char **prog_argv)
{
    for (int r = 0; r < o->n; r++) {
        int host = o->first + r / o->ppn * o->stride;
        j->ranks[r].pid = spawn_rank(
            r, o->n, host, p,
            p->conf.hosts ? p->conf.hosts[host % p->conf.nhosts].netns : "",
            oldmask, prog_argv);
        if (j->ranks[r].pid < 0) {
            fprintf(stderr, "incoll run: cannot fork rank %d: %s\n", r,
                    log_strerror(errno));
            j->ranks[r].pid = 0;
            job_stop(j, 1);
            return;
        }
        j->running++;
    }
}

/* Reaps the ranks that ended; the first to fail stops the others. */
static void reap(run_job_t *j)
{
    char why[256];
    pid_t pid;
    int st;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        int r;
        for (r = 0; r < j->n && j->ranks[r].pid != pid; r++)
            ;
        if (r == j->n)
            continue;
        j->ranks[r].pid = 0;
        j->ranks[r].status = st;
        j->running--;
        if ((WIFEXITED(st) && WEXITSTATUS(st) == 0) || j->stopping)
            continue;
        describe(r, st, why, sizeof(why));
        fprintf(stderr, "incoll run: %s%s\n", why,
                j->running ? "; stopping the other ranks" : "");
        job_stop(j, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
}

/* Waits for every rank, in poll() on the signalfd: the time limit, a
 * signal to us or a failed rank stops them all. */
static void supervise(const run_opts_t *o, run_job_t *j, int sigfd)
{
    uint64_t deadline = now_ms() + (uint64_t)o->timeout_s * 1000;

    while (j->running > 0) {
        struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
        uint64_t now = now_ms(), until = j->stopping ? j->kill_at : deadline;
        struct signalfd_siginfo si;

        if (now >= until) {
            if (j->stopping) {
                /* Grace is over: SIGKILL, then keep reaping. */
                signal_all(j->ranks, j->n, SIGKILL);
                j->kill_at = UINT64_MAX / 2;
            } else {
                fprintf(stderr,
                        "incoll run: timed out after %d s; stopping "
                        "%d rank%s\n",
                        o->timeout_s, j->running, j->running == 1 ? "" : "s");
                job_stop(j, RUN_EXIT_TIMEOUT);
            }
            continue;
        }
        if (poll(&pfd, 1, (int)(until - now > 60000 ? 60000 : until - now)) <=
            0)
            continue;
        while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            if (si.ssi_signo == SIGCHLD || j->stopping)
                continue;
            fprintf(stderr, "incoll run: got signal %u; stopping the ranks\n",
                    si.ssi_signo);
            job_stop(j, 128 + (int)si.ssi_signo);
        }
        reap(j);
    }
}

int cmd_run(int argc, char **argv)
{
    run_opts_t o;
    run_plan_t p;
    run_job_t j = {0};
    sigset_t mask, oldmask;
    int sigfd, ret;

    if (parse_opts(argc, argv, &o, &ret) != 0)
        return ret;
    memset(&p, 0, sizeof(p));
    if ((ret = plan_job(&o, &p)) != 0) {
        plan_free(&p);
        return ret > 0 ? ret : 1;
    }
    j.n = o.n;
    j.ranks = calloc((size_t)o.n, sizeof(*j.ranks));
    if (j.ranks == NULL) {
        fprintf(stderr, "incoll run: out of memory\n");
        plan_free(&p);
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
                log_strerror(errno));
        j.ret = 1;
    } else {
        launch(&o, &p, &j, &oldmask, argv + o.prog);
        supervise(&o, &j, sigfd);
        close(sigfd);
    }
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    free(j.ranks);
    plan_free(&p);
    return j.ret;
}
