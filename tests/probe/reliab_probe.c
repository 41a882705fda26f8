/*
 * reliab_probe: the reliability probe (not part of `make test`: a full
 * run takes about half an hour). It runs, on fabrics of its own brought
 * up with the `incoll` command, what an operator hardening a cluster
 * would try, and counts for each case the calls that returned a wrong
 * result as success (the number that must stay 0), the calls that
 * failed, and the runs that hung (killed at their time limit):
 *
 *   kill       an AN (a leaf, a middle one, the root) killed while 8 ranks
 *              run all eight collectives in turn, and the root AN killed
 *              under 16 ranks two a host (node mode)
 *   stop       an AN stopped (SIGSTOP) for a few seconds, then resumed:
 *              a partition of everything through it
 *   partition  a rank stopped for a few seconds while the others wait for
 *              it in a collective (the other side of the same partition)
 *   late       a rank computing before its call: --late-ms (300 s by
 *              default; --quick: 45 s), every timeout at its default
 *   mismatch   erroneous programs (tests/progs/misuse_check: a call
 *              refused at one rank, different datatypes, ops, sizes,
 *              roots, collectives, a skipped call), with and without a
 *              manager, one rank a host and two
 *   deadline   INCOLL_DEADLINE_MS=10s under 50% loss on a 4 MiB
 *              allreduce: an error in bounded time, never a wrong result
 *   latejoin   a rank that starts 40 s after the others (past the
 *              manager's 30 s request time)
 *   replay     one job's packets recorded and replayed into the next one
 *              started alike (root only: `incoll-tests
 *              integ_replay_jobs_nomgr` run --reps times)
 *
 *   build/tests/probe/reliab_probe [--quick] [--reps N] [--late-ms MS]
 *                                  [--only CASE] [--keep]
 *
 * It prints one line per run and a table at the end; the exit status is
 * 1 when any call returned a wrong result as success, 0 otherwise (errors
 * and hangs are reported: some cases must end in errors). Run from the
 * source tree after `make all probe`.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_OUT (4 << 20)

static const char *bindir = "build/bin", *progdir = "build/tests";
static char workdir[512];
static int keep;

typedef struct {
    const char *name;
    int runs, hangs, bad_runs;
    long ok, wrong, errors;
} tally_t;

static tally_t tallies[16];
static int ntallies;

static tally_t *tally(const char *name)
{
    for (int i = 0; i < ntallies; i++)
        if (strcmp(tallies[i].name, name) == 0)
            return &tallies[i];
    tallies[ntallies].name = name;
    return &tallies[ntallies++];
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The whole file (NUL-terminated, caller frees; "" when unreadable). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, MAX_OUT + 1);
    size_t n = 0;
    if (buf == NULL)
        exit(3);
    if (f) {
        n = fread(buf, 1, MAX_OUT, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

/* Starts sh -c cmd with stdout and stderr into path; its pid. */
static pid_t start(const char *path, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    pid_t pid;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    pid = fork();
    if (pid == 0) {
        FILE *f = freopen(path, "w", stdout);
        if (f == NULL || dup2(1, 2) < 0)
            _exit(127);
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits for pid up to limit_s; its exit status, or -1 (killed) when it
 * ran longer. */
static int finish(pid_t pid, double limit_s)
{
    double end = now_s() + limit_s;
    int st;
    while (now_s() < end) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        sleep_s(0.05);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    int st;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A fabric in workdir/name: hosts hosts, radix, with a manager or not.
 * 0 or -1. */
static int fabric_up(const char *name, int hosts, int radix, int managed,
                     const char *env, char *dir, size_t len)
{
    snprintf(dir, len, "%s/%s", workdir, name);
    sh("'%s/incoll' fabric down --dir '%s' >/dev/null 2>&1", bindir, dir);
    return sh("env %s '%s/incoll' fabric up --hosts %d --radix %d %s --dir "
              "'%s' >'%s.up' 2>&1",
              env ? env : "", bindir, hosts, radix, managed ? "" : "--no-mgr",
              dir, dir) == 0
               ? 0
               : -1;
}

static void fabric_down(const char *dir)
{
    sh("'%s/incoll' fabric down --dir '%s' >/dev/null 2>&1", bindir, dir);
}

/* Counts what one run's output says into t: every rank's summary line
 * (ok=, wrong=, errors=) and WRONG lines; exit status st (-1 or 124:
 * a hang). */
static void count(tally_t *t, const char *out, int st, const char *what)
{
    long ok = 0, wrong = 0, errors = 0, lines = 0;
    for (const char *p = out; (p = strstr(p, "summary ok=")) != NULL; p++) {
        long a = 0, w = 0, e = 0;
        if (sscanf(p, "summary ok=%ld wrong=%ld errors=%ld", &a, &w, &e) == 3) {
            ok += a;
            wrong += w;
            errors += e;
        }
    }
    for (const char *p = out; (p = strstr(p, "WRONG")) != NULL; p++)
        lines++;
    if (lines > wrong)
        wrong = lines;
    t->runs++;
    t->ok += ok;
    t->wrong += wrong;
    t->errors += errors;
    if (st == -1 || st == 124)
        t->hangs++;
    if (st != 0)
        t->bad_runs++;
    printf("  %-10s %-44s exit %3d  ok %6ld  wrong %3ld  errors %5ld%s\n",
           t->name, what, st, ok, wrong, errors,
           st == -1 || st == 124 ? "  HANG" : "");
    fflush(stdout);
}

/* Runs `incoll run` of a test program on the fabric in dir; after
 * needle appears in the output (NULL: never), waits delay s and sends
 * sig to the pid in dir/victim.pid (SIGSTOP: SIGCONT after stop_s). */
static void run_job(tally_t *t, const char *dir, const char *env, int n,
                    int ppn, int managed, const char *prog, const char *args,
                    const char *needle, double delay, const char *victim,
                    int sig, double stop_s, double limit_s)
{
    static int seq;
    char log[700], what[256];
    pid_t run;
    int st;

    snprintf(log, sizeof(log), "%s/run-%d.out", workdir, seq++);
    run = start(log,
                "env %s '%s/incoll' run %s -n %d --ppn %d --fabric '%s' "
                "--timeout %d -- '%s/%s' %s",
                env ? env : "", bindir, managed ? "" : "--no-mgr", n, ppn, dir,
                (int)limit_s, progdir, prog, args);
    if (needle) {
        double end = now_s() + 60;
        for (;;) {
            char *out = slurp(log);
            int seen = strstr(out, needle) != NULL;
            free(out);
            if (seen || now_s() > end)
                break;
            sleep_s(0.01);
        }
        sleep_s(delay);
        if (victim) {
            char pidf[700];
            char *text;
            pid_t v;
            snprintf(pidf, sizeof(pidf), "%s/%s.pid", dir, victim);
            text = slurp(pidf);
            v = (pid_t)atoi(text);
            free(text);
            if (v > 0) {
                kill(v, sig);
                if (sig == SIGSTOP) {
                    sleep_s(stop_s);
                    kill(v, SIGCONT);
                }
            }
        }
    }
    st = finish(run, limit_s + 30);
    {
        char *out = slurp(log);
        snprintf(what, sizeof(what), "%s%s%s %s", prog, victim ? " " : "",
                 victim ? victim : "", args);
        count(t, out, st, what);
        free(out);
    }
}

static void probe_kill(int reps)
{
    static const char *const victims[] = {"l1", "s2-0", "root"};
    char dir[600];
    tally_t *t = tally("kill");
    for (int r = 0; r < reps; r++) {
        for (int v = 0; v < 3; v++) {
            if (fabric_up("kill", 8, 2, 1, NULL, dir, sizeof(dir)) != 0)
                continue;
            run_job(t, dir, "INCOLL_BCAST_AHEAD=16K", 8, 1, 1, "recover_check",
                    "--coll mix --iters 3000 --count 100 --progress 100",
                    "progress iter 400", 0.003 * r, victims[v], SIGKILL, 0,
                    180);
            fabric_down(dir);
        }
        if (fabric_up("kill-node", 8, 2, 1, NULL, dir, sizeof(dir)) == 0) {
            run_job(t, dir, NULL, 16, 2, 1, "recover_check",
                    "--coll bcast --iters 2000 --count 100 --progress 100",
                    "progress iter 300", 0.005 * r, "root", SIGKILL, 0, 180);
            fabric_down(dir);
        }
    }
}

static void probe_stop(int reps)
{
    char dir[600];
    tally_t *t = tally("stop");
    for (int r = 0; r < reps; r++) {
        if (fabric_up("stop", 8, 2, 1, NULL, dir, sizeof(dir)) != 0)
            continue;
        run_job(t, dir, NULL, 8, 1, 1, "recover_check",
                "--coll mix --iters 1500 --count 100 --progress 100",
                "progress iter 300", 0.01, r % 2 ? "root" : "l0", SIGSTOP,
                3.0 + r, 240);
        fabric_down(dir);
    }
}

static void probe_late(long late_ms, int reps)
{
    char dir[600], args[128];
    tally_t *t = tally("late");
    double limit = (double)late_ms / 1000 + 120;
    snprintf(args, sizeof(args), "--case late --who 2 --late-ms %ld", late_ms);
    for (int managed = 1; managed >= 0; managed--) {
        if (fabric_up(managed ? "late-mgr" : "late-nomgr", 4, 2, managed, NULL,
                      dir, sizeof(dir)) != 0)
            continue;
        for (int r = 0; r < reps; r++)
            run_job(t, dir, NULL, 4, 1, managed, "misuse_check", args, NULL, 0,
                    NULL, 0, 0, limit);
        if (managed)
            run_job(t, dir, NULL, 8, 2, managed, "misuse_check",
                    "--case late --who 3 --late-ms 20000", NULL, 0, NULL, 0, 0,
                    200);
        fabric_down(dir);
    }
}

/* A rank stopped (SIGSTOP) while the others wait for it: the rank's side
 * of a partition, seconds long. */
static void probe_partition(int reps)
{
    char dir[600];
    tally_t *t = tally("partition");
    for (int r = 0; r < reps; r++) {
        static int seq;
        char log[700];
        pid_t run, rank = 0;
        int st;
        if (fabric_up("part", 4, 2, 1, NULL, dir, sizeof(dir)) != 0)
            continue;
        snprintf(log, sizeof(log), "%s/part-%d.out", workdir, seq++);
        /* Rank 2 started by hand so that it can be stopped. */
        run = start(log,
                    ". '%s/fabric.env'; for r in 0 1 2 3; do "
                    "INCOLL_RANK=$r INCOLL_SIZE=4 INCOLL_JOB=part-%d-%d "
                    "INCOLL_HOST=h$r '%s/recover_check' --coll mix --iters "
                    "2000 --count 64 --progress 200 & echo $! > '%s/rank$r'; "
                    "done; wait",
                    dir, (int)getpid(), r, progdir, workdir);
        sleep_s(1.5);
        {
            char pf[700], *text;
            snprintf(pf, sizeof(pf), "%s/rank2", workdir);
            text = slurp(pf);
            rank = (pid_t)atoi(text);
            free(text);
        }
        if (rank > 0) {
            kill(rank, SIGSTOP);
            sleep_s(5.0 + 10.0 * r);
            kill(rank, SIGCONT);
        }
        st = finish(run, 300);
        {
            char *out = slurp(log), what[64];
            snprintf(what, sizeof(what), "rank 2 stopped %.0f s", 5.0 + 10 * r);
            count(t, out, st, what);
            free(out);
        }
        fabric_down(dir);
    }
}

static void probe_mismatch(void)
{
    static const char *const cases[] = {
        "root-null",    "inplace-recv",  "overlap",     "dtype",
        "op",           "count",         "bcast-roots", "bcast-allreduce",
        "reduce-roots", "reduce-noroot", "skip"};
    char dir[600];
    tally_t *t = tally("mismatch");
    for (int managed = 1; managed >= 0; managed--) {
        if (fabric_up(managed ? "mis-mgr" : "mis-nomgr", 4, 2, managed, NULL,
                      dir, sizeof(dir)) != 0)
            continue;
        for (int ppn = 1; ppn <= 2; ppn++)
            for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                char args[128];
                snprintf(args, sizeof(args), "--case %s --who 3", cases[c]);
                run_job(t, dir, NULL, 4 * ppn, ppn, managed, "misuse_check",
                        args, NULL, 0, NULL, 0, 0, 120);
            }
        fabric_down(dir);
    }
}

static void probe_deadline(void)
{
    char dir[600];
    tally_t *t = tally("deadline");
    if (fabric_up("ddl", 4, 2, 1, NULL, dir, sizeof(dir)) != 0)
        return;
    /* 4 MiB of int64 per call under 50% loss: errors after about 10 s
     * each, never a wrong result. */
    run_job(t, dir, "INCOLL_FAULT_DROP=0.5 INCOLL_DEADLINE_MS=10000", 4, 1, 1,
            "recover_check", "--iters 3 --count 524288", NULL, 0, NULL, 0, 0,
            240);
    fabric_down(dir);
}

static void probe_latejoin(void)
{
    char dir[600];
    tally_t *t = tally("latejoin");
    static int seq;
    char log[700];
    pid_t run;
    int st;
    if (fabric_up("latejoin", 4, 2, 1, NULL, dir, sizeof(dir)) != 0)
        return;
    snprintf(log, sizeof(log), "%s/latejoin-%d.out", workdir, seq++);
    run = start(log,
                ". '%s/fabric.env'; for r in 0 1 2 3; do ( [ $r = 3 ] && "
                "sleep 40; INCOLL_RANK=$r INCOLL_SIZE=4 "
                "INCOLL_JOB=latejoin-%d INCOLL_HOST=h$r '%s/misuse_check' "
                "--case none ) & done; wait",
                dir, (int)getpid(), progdir);
    st = finish(run, 200);
    {
        char *out = slurp(log);
        count(t, out, st, "rank 3 starts 40 s late");
        free(out);
    }
    fabric_down(dir);
}

static void probe_replay(int reps)
{
    tally_t *t = tally("replay");
    if (geteuid() != 0) {
        printf("  replay     skipped: not root (raw sockets)\n");
        return;
    }
    for (int r = 0; r < reps; r++) {
        char log[700];
        pid_t run;
        int st;
        snprintf(log, sizeof(log), "%s/replay-%d.out", workdir, r);
        run = start(log, "'%s/incoll-tests' integ_replay_jobs_nomgr", progdir);
        st = finish(run, 120);
        t->runs++;
        if (st != 0) {
            char *out = slurp(log);
            long w = 0;
            for (const char *p = out; (p = strstr(p, "WRONG")) != NULL; p++)
                w++;
            t->wrong += w;
            t->bad_runs++;
            if (st == -1)
                t->hangs++;
            free(out);
        }
        printf("  replay     run %d: exit %d\n", r, st);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    int quick = 0, reps = 2;
    long late_ms = 300000;
    const char *only = NULL;
    long wrong = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--keep") == 0) {
            keep = 1;
        } else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) {
            reps = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--late-ms") == 0) {
            late_ms = atol(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--only") == 0) {
            only = argv[++i];
        } else {
            fprintf(stderr,
                    "usage: reliab_probe [--quick] [--reps N] [--late-ms MS] "
                    "[--only kill|stop|partition|late|mismatch|deadline|"
                    "latejoin|replay] [--keep]\n");
            return 2;
        }
    }
    if (quick && late_ms == 300000)
        late_ms = 45000;
    if (access("build/bin/incoll", X_OK) != 0) {
        fprintf(stderr, "reliab_probe: run it from the source tree after "
                        "`make all probe`\n");
        return 2;
    }
    snprintf(workdir, sizeof(workdir), "/tmp/incoll-probe-%d", (int)getpid());
    mkdir(workdir, 0755);
    printf("reliab_probe: work in %s, %d repetitions, a rank %ld ms late\n",
           workdir, reps, late_ms);
    fflush(stdout); /* (not again in the children it forks) */
#define CASE(n, call)                                                          \
    if (only == NULL || strcmp(only, n) == 0)                                  \
    call
    CASE("mismatch", probe_mismatch());
    CASE("kill", probe_kill(reps));
    CASE("stop", probe_stop(reps));
    CASE("partition", probe_partition(reps));
    CASE("late", probe_late(late_ms, quick ? 1 : reps));
    CASE("deadline", probe_deadline());
    CASE("latejoin", probe_latejoin());
    CASE("replay", probe_replay(reps));
    printf("\n%-10s %5s %10s %12s %8s %6s %9s\n", "case", "runs", "calls ok",
           "wrong-as-OK", "errors", "hangs", "bad runs");
    for (int i = 0; i < ntallies; i++) {
        const tally_t *t = &tallies[i];
        printf("%-10s %5d %10ld %12ld %8ld %6d %9d\n", t->name, t->runs, t->ok,
               t->wrong, t->errors, t->hangs, t->bad_runs);
        wrong += t->wrong;
    }
    printf("total wrong-as-OK: %ld\n", wrong);
    if (!keep)
        sh("rm -rf '%s'", workdir);
    return wrong > 0 ? 1 : 0;
}
