/*
 * Shared plumbing of the fabric benchmarks: see bench_common.h.
 */
#include "bench_common.h"
#include "cli.h"

#include "common/clock.h"
#include "common/fabric_conf.h"
#include "fabric/daemon.h"
#include "fabric/emu.h"
#include "fabric/fabric.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

int bench_interrupted(void)
{
    return got_signal != 0;
}

static void nap_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* a signal may cut it short: callers loop */
}

/* ---- processes -------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* ---- the fabric ------------------------------------------------------- */

static int load_conf(bench_fabric_t *f)
{
    char path[PATH_MAX + 32], err[512];
    fabric_conf_t conf;
    emu_state_t st;

    snprintf(path, sizeof(path), "%s/fabric.conf", f->dir);
    if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll %s: %s\n", f->who, err);
        return -1;
    }
    f->hosts = conf.nhosts;
    f->radix = conf.radix;
    f->levels = conf.levels;
    fabric_conf_free(&conf);
    f->emulated = 0;
    f->link_rate = 0;
    if (emu_state_load(f->dir, &st) == INCOLL_OK) {
        f->emulated = 1;
        f->link_rate = st.link_rate;
        emu_state_free(&st);
    }
    return 0;
}

int bench_fabric_open(bench_fabric_t *f, const bench_fabric_opts_t *o)
{
    struct sigaction sa = {.sa_handler = on_signal};
    const char *tmp = getenv("TMPDIR");
    ssize_t n;

    memset(f, 0, sizeof(*f));
    f->who = o->who;
    f->keep = o->keep;
    f->an_cpus = o->an_cpus;
    f->host_cpus = o->host_cpus;
    n = readlink("/proc/self/exe", f->self, sizeof(f->self) - 1);
    if (n < 0) {
        fprintf(stderr, "incoll %s: cannot find my own executable: %s\n",
                f->who, log_strerror(errno));
        return -1;
    }
    f->self[n] = '\0';
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* Output into a closed pipe (`... | head`) must not kill us before
     * the teardown: writes fail instead. Children get the default back. */
    signal(SIGPIPE, SIG_IGN);

    snprintf(f->work, sizeof(f->work), "%s/incoll-bench-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(f->work) == NULL) {
        fprintf(stderr, "incoll %s: cannot create %s: %s\n", f->who, f->work,
                log_strerror(errno));
        f->work[0] = '\0';
        return -1;
    }

    if (o->fabric_dir) {
        if (realpath(o->fabric_dir, f->dir) == NULL) {
            fprintf(stderr, "incoll %s: fabric %s: %s\n", f->who, o->fabric_dir,
                    log_strerror(errno));
            goto err;
        }
        if (load_conf(f) != 0)
            goto err;
        return 0;
    }

    {
        fabric_spec_t spec;
        char why[256];
        int emulate = o->emulate;

        if (emulate && emu_usable(why, sizeof(why)) != 0) {
            fprintf(stderr,
                    "incoll %s: cannot emulate links: %s; using the "
                    "loopback fabric instead\n",
                    f->who, why);
            emulate = 0;
        }
        snprintf(f->dir, sizeof(f->dir), "%s/fabric", f->work);
        fabric_spec_default(&spec);
        spec.dir = f->dir;
        spec.hosts = o->hosts;
        spec.radix = o->radix;
        spec.emulate = emulate;
        if (emulate && o->link_rate)
            spec.emu.link_rate = o->link_rate;
        spec.quiet = 1;
        spec.an_cpus = o->an_cpus;
        f->own_fabric = 1;
        if (fabric_up(&spec) != 0) {
            fprintf(stderr,
                    "incoll %s: cannot bring the fabric up (see "
                    "above)\n",
                    f->who);
            goto err;
        }
        if (bench_interrupted())
            goto err;
        if (load_conf(f) != 0)
            goto err;
        if (emulate && !f->emulated) {
            fprintf(stderr,
                    "incoll %s: `incoll fabric up --emulate` made a "
                    "fabric without emulated links\n",
                    f->who);
            goto err;
        }
    }
    return 0;

err:
    bench_fabric_close(f);
    return -1;
}

void bench_fabric_close(bench_fabric_t *f)
{
    if (f->own_fabric) {
        if (fabric_stop(f->dir, 1) != 0 || emu_present(f->dir)) {
            fprintf(stderr,
                    "incoll %s: cannot stop the fabric of %s (see "
                    "above)\n",
                    f->who, f->dir);
            /* Whatever it left, the emulator can still find and remove. */
            emu_destroy(f->dir, NULL);
        }
        f->own_fabric = 0;
    }
    if (f->work[0]) {
        if (f->keep)
            fprintf(stderr, "incoll %s: kept %s\n", f->who, f->work);
        else
            nftw(f->work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        f->work[0] = '\0';
    }
}

/* ---- launching -------------------------------------------------------- */

static void show_progress(const char *path, char *last, size_t lastlen,
                          uint64_t *last_print_ms, int tty)
{
    char line[256];
    uint64_t now = now_ns() / 1000000;
    FILE *fp;
    size_t n;

    if (path == NULL)
        return;
    fp = fopen(path, "r");
    if (fp == NULL)
        return;
    n = fread(line, 1, sizeof(line) - 1, fp);
    fclose(fp);
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '\0' || strcmp(line, last) == 0)
        return;
    if (tty) {
        fprintf(stderr, "\r%-78.78s", line);
        fflush(stderr);
    } else if (now - *last_print_ms >= 10000) {
        fprintf(stderr, "%s\n", line);
        *last_print_ms = now;
    } else {
        return;
    }
    snprintf(last, lastlen, "%s", line);
}

/* Forks and execs argv (our own `incoll run` or `incoll mpirun`); frees
 * argv. Returns the pid, or -1 after a message. */
static pid_t launch_start(bench_fabric_t *f, char **argv)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "incoll %s: cannot fork: %s\n", f->who,
                log_strerror(errno));
        free(argv);
        return -1;
    }
    if (pid == 0) {
        cpu_set_t set;
        char why[512];
        signal(SIGPIPE, SIG_DFL);
        /* The ranks inherit where their launcher runs (incoll mpirun
         * starts Open MPI's with --bind-to none). */
        if (f->host_cpus) {
            if (fabric_cpus_parse(f->host_cpus, &set, why, sizeof(why)) != 0)
                ; /* why says it */
            else if (sched_setaffinity(0, sizeof(set), &set) != 0)
                snprintf(why, sizeof(why), "%s", log_strerror(errno));
            else
                why[0] = 0;
            if (why[0]) {
                fprintf(stderr, "incoll %s: --host-cpus: %s\n", f->who, why);
                _exit(127);
            }
        }
        execv(argv[0], argv);
        fprintf(stderr, "incoll %s: cannot run %s: %s\n", f->who, argv[0],
                log_strerror(errno));
        _exit(127);
    }
    free(argv);
    return pid;
}

/* Waits for the n launchers in pids (a pid <= 0 is none), showing rank 0's
 * progress; the first that fails has the others stopped. Returns 0 when
 * every one exited 0, else the first failure's status (128 + signal). */
static int launch_wait_all(pid_t *pids, int n, const char *progress_path)
{
    char last[256] = "";
    int tty = isatty(2), sent_term = 0, ret = 0, left = 0;
    uint64_t last_print = now_ns() / 1000000;

    for (int i = 0; i < n; i++)
        left += pids[i] > 0;
    while (left > 0) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w < 0 && errno != EINTR && errno != ECHILD)
            break;
        for (int i = 0; w > 0 && i < n; i++) {
            int rc;
            if (pids[i] != w)
                continue;
            pids[i] = 0;
            left--;
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            if (rc != 0 && ret == 0) {
                ret = rc;
                for (int j = 0; j < n; j++)
                    if (pids[j] > 0)
                        kill(pids[j], SIGTERM);
            }
        }
        if (w > 0)
            continue;
        if (w < 0 && errno == ECHILD)
            break;
        if (bench_interrupted() && !sent_term) {
            /* A terminal's ^C reached incoll run too; a SIGTERM aimed at
             * us alone did not: pass it on so the ranks stop. */
            for (int j = 0; j < n; j++)
                if (pids[j] > 0)
                    kill(pids[j], SIGTERM);
            sent_term = 1;
        }
        show_progress(progress_path, last, sizeof(last), &last_print, tty);
        nap_ms(200);
    }
    if (tty && last[0])
        fprintf(stderr, "\r%-78s\r", "");
    return left > 0 && ret == 0 ? 1 : ret;
}

/* Runs argv and waits for it (launch_start, launch_wait_all). */
static int launch_wait(bench_fabric_t *f, char **argv,
                       const char *progress_path)
{
    pid_t pid = launch_start(f, argv);
    if (pid < 0)
        return -1;
    return launch_wait_all(&pid, 1, progress_path);
}

/* The MPI worker's path: beside this executable, or in libexecdir. */
static void mpi_worker_path(char *buf, size_t len)
{
    if (cli_companion_path(CLI_PLACE_LIBEXEC, BENCH_MPI_WORKER, buf, len) != 0)
        snprintf(buf, len, "%s", BENCH_MPI_WORKER);
}

/* 1 if prog is an executable in PATH. */
static int in_path(const char *prog)
{
    const char *path = getenv("PATH");
    char dir[PATH_MAX + 64];

    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(dir, sizeof(dir), "%.*s/%s", (int)(n ? n : 1), n ? path : ".",
                 prog);
        if (access(dir, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

int bench_mpi_usable(char *worker, size_t worker_len, char *why, size_t len)
{
    char path[PATH_MAX];

    mpi_worker_path(path, sizeof(path));
    if (worker)
        snprintf(worker, worker_len, "%s", path);
    if (!in_path("mpirun")) {
        snprintf(why, len,
                 "Open MPI's mpirun is not in PATH (apt-get install "
                 "openmpi-bin libopenmpi-dev, then make)");
        return -1;
    }
    if (access(path, X_OK) != 0) {
        snprintf(why, len, "%s: %s (`make` builds it when mpicc is installed)",
                 path, log_strerror(errno));
        return -1;
    }
    return 0;
}

/* The ranks' command line: `incoll run ... -- incoll bench RANK_ARGS`, or
 * with mpi `incoll mpirun ... --no-preload -- WORKER RANK_ARGS`; nranks
 * ranks (0: the fabric's hosts times f->ppn), placed by place (NULL: from
 * host 0). Its strings live in *b. NULL when out of memory. */
typedef struct {
    char hosts[16], ppn[16], timeout[16], worker[PATH_MAX];
} launch_buf_t;

static char **ranks_argv(bench_fabric_t *f, int mpi, char *const rank_args[],
                         int nranks, const char *place, int timeout_s,
                         launch_buf_t *b)
{
    char **argv;
    int nargs = 0, a = 0;

    while (rank_args[nargs])
        nargs++;
    argv = calloc((size_t)nargs + 18, sizeof(*argv));
    if (argv == NULL)
        return NULL;
    snprintf(b->hosts, sizeof(b->hosts), "%d",
             nranks ? nranks : f->hosts * (f->ppn > 1 ? f->ppn : 1));
    snprintf(b->ppn, sizeof(b->ppn), "%d", f->ppn);
    snprintf(b->timeout, sizeof(b->timeout), "%d", timeout_s);
    argv[a++] = f->self;
    argv[a++] = mpi ? "mpirun" : "run";
    argv[a++] = "-n";
    argv[a++] = b->hosts;
    if (f->ppn > 1) {
        argv[a++] = "--ppn";
        argv[a++] = b->ppn;
    }
    if (place) {
        argv[a++] = "--place";
        argv[a++] = (char *)place;
    }
    argv[a++] = "--fabric";
    argv[a++] = f->dir;
    if (mpi)
        argv[a++] = "--no-preload";
    argv[a++] = "--timeout";
    argv[a++] = b->timeout;
    argv[a++] = "--";
    if (mpi) {
        mpi_worker_path(b->worker, sizeof(b->worker));
        argv[a++] = b->worker;
    } else {
        argv[a++] = f->self;
        argv[a++] = "bench";
    }
    for (int i = 0; i < nargs; i++)
        argv[a++] = rank_args[i];
    argv[a] = NULL;
    return argv;
}

static int launch_ranks(bench_fabric_t *f, int mpi, char *const rank_args[],
                        const char *progress_path, int timeout_s)
{
    launch_buf_t b;
    char **argv = ranks_argv(f, mpi, rank_args, 0, NULL, timeout_s, &b);
    if (argv == NULL)
        return -1;
    return launch_wait(f, argv, progress_path);
}

int bench_launch_jobs(bench_fabric_t *f, int njobs, char **const job_args[],
                      const char *progress_path, int timeout_s)
{
    launch_buf_t *b = calloc((size_t)njobs, sizeof(*b));
    pid_t *pids = calloc((size_t)njobs, sizeof(*pids));
    char place[32];
    int ret = -1, started = 0;

    if (b == NULL || pids == NULL)
        goto out;
    for (int j = 0; j < njobs; j++) {
        char **argv;
        snprintf(place, sizeof(place), "%d:%d", j, njobs);
        argv = ranks_argv(f, 0, job_args[j], f->hosts / njobs, place, timeout_s,
                          &b[j]);
        pids[j] = argv ? launch_start(f, argv) : -1;
        if (pids[j] < 0)
            break;
        started++;
    }
    if (started < njobs)
        for (int j = 0; j < started; j++)
            kill(pids[j], SIGTERM);
    ret = launch_wait_all(pids, started, progress_path);
    if (started < njobs && ret == 0)
        ret = 1;
out:
    free(b);
    free(pids);
    return ret;
}

int bench_launch(bench_fabric_t *f, char *const rank_args[],
                 const char *progress_path, int timeout_s)
{
    return launch_ranks(f, 0, rank_args, progress_path, timeout_s);
}

int bench_launch_mpi(bench_fabric_t *f, char *const rank_args[],
                     const char *progress_path, int timeout_s)
{
    return launch_ranks(f, 1, rank_args, progress_path, timeout_s);
}

void bench_progress_write(const char *path, int force, const char *fmt, ...)
{
    static uint64_t last_ns;
    char line[256];
    uint64_t now = now_ns();
    va_list ap;
    int fd, n;

    if (path == NULL || (!force && now - last_ns < 250000000ull))
        return;
    last_ns = now;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (pwrite(fd, line, (size_t)n, 0) == n)
        (void)!ftruncate(fd, n);
    close(fd);
}

int bench_fabric_start(bench_fabric_t *f, const bench_opts_t *o,
                       const char *who)
{
    bench_fabric_opts_t fo;

    memset(&fo, 0, sizeof(fo));
    fo.fabric_dir = o->fabric;
    fo.emulate = o->emulate;
    fo.hosts = o->hosts;
    fo.radix = o->radix;
    fo.link_rate = o->link_rate;
    fo.keep = o->keep;
    fo.who = who;
    fo.an_cpus = o->an_cpus;
    fo.host_cpus = o->host_cpus;
    return bench_fabric_open(f, &fo);
}

void bench_fabric_describe(const bench_fabric_t *f, char *buf, size_t len)
{
    char rate[32];
    size_t n;
    if (f->emulated)
        snprintf(buf, len,
                 "%d hosts (radix %d, %d level%s), emulated links of "
                 "%s each way, non-blocking uplinks",
                 f->hosts, f->radix, f->levels, f->levels == 1 ? "" : "s",
                 emu_rate_str(f->link_rate, rate, sizeof(rate)));
    else
        snprintf(buf, len,
                 "%d hosts (radix %d, %d level%s), loopback fabric "
                 "(no link rate: every rank on 127.0.0.1)",
                 f->hosts, f->radix, f->levels, f->levels == 1 ? "" : "s");
    n = strlen(buf);
    if (f->an_cpus || f->host_cpus)
        snprintf(buf + n, len - n, "; ANs on CPUs %s, ranks on CPUs %s",
                 f->an_cpus ? f->an_cpus : "any",
                 f->host_cpus ? f->host_cpus : "any");
}
