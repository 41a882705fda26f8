/*
 * Integration tests of what a user may get wrong, or be slow at, with real
 * daemons on 127.0.0.1 (docs/failures.md, "Erroneous programs" and "Late
 * ranks"): calls whose arguments differ between ranks, a call refused at
 * one rank only, a rank that skips a call, a rank that comes seconds late,
 * a per-call deadline, a rank that starts after the manager's request
 * time, and node mode when an AN dies. Each runs tests/progs/misuse_check
 * (or recover_check) with `incoll run` on a fabric of its own, with and
 * without a manager, one rank per host and two.
 */
#include "integ.h"

#include "fabric/fabric.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int have_binaries(void)
{
    char path[PATH_MAX + 32];
    const char *need[] = {"incoll", "incoll-mgr", "incoll-agg"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", test_bindir(), need[i]);
        if (access(path, X_OK) != 0)
            return test_skip("%s not built", path);
    }
    snprintf(path, sizeof(path), "%s/misuse_check", progdir());
    if (access(path, X_OK) != 0)
        return test_skip("%s not built", path);
    return TEST_PASSED;
}

/* A fabric of 4 hosts (radix 2) in a directory of its own: with a manager,
 * or fabric.conf alone with fixed host ports. 0 or -1. */
static int fab_up(char *dir, size_t len, const char *tag, int managed)
{
    fabric_spec_t spec;
    snprintf(dir, len, "%s/%s", test_tmpdir(), tag);
    fabric_spec_default(&spec);
    spec.dir = dir;
    spec.bindir = test_bindir();
    spec.hosts = 4;
    spec.radix = 2;
    spec.managed = managed;
    spec.host_ports = !managed;
    spec.quiet = 1;
    return fabric_up(&spec) == 0 ? 0 : -1;
}

/* Runs misuse_check with args (and env before it) as n ranks, ppn a host,
 * on the fabric in dir; 0 when it exited 0, else prints its output. */
static int misuse(const char *dir, int managed, int n, int ppn, const char *env,
                  const char *args)
{
    char out[PATH_MAX + 64];
    static int seq;
    int st;
    snprintf(out, sizeof(out), "%s-%d.txt", dir, seq++);
    st = run_cmd_file(out, 200,
                      "env %s '%s/incoll' run %s -n %d --ppn %d --fabric '%s' "
                      "--timeout 150 -- '%s/misuse_check' %s",
                      env ? env : "", test_bindir(), managed ? "" : "--no-mgr",
                      n, ppn, dir, progdir(), args);
    if (st != 0) {
        fprintf(stderr, "    %s%s, %d ranks %d a host: exit %d\n", args,
                managed ? "" : " (no manager)", n, ppn, st);
        show_tail(out);
        return -1;
    }
    return 0;
}

/* The cases of misuse_check that must fail on every rank, never giving a
 * wrong result or putting the communicator out of step. */
static int cases(const char *tag, int managed, int ppn,
                 const char *const *names, int ncases)
{
    char dir[PATH_MAX];
    int r = have_binaries(), bad = 0;
    if (r != TEST_PASSED)
        return r;
    if (fab_up(dir, sizeof(dir), tag, managed) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    for (int i = 0; i < ncases; i++) {
        char args[128];
        snprintf(args, sizeof(args), "--case %s --who 3", names[i]);
        bad += misuse(dir, managed, 4 * ppn, ppn, NULL, args) != 0;
    }
    test_fabric_down(dir);
    return bad ? TEST_FAILED : TEST_PASSED;
}

/* With a manager, one rank per host: every erroneous case. */
TEST(integ_misuse_calls, TEST_INTEG)
{
    static const char *const names[] = {
        "root-null",    "inplace-recv",  "overlap",     "dtype",
        "op",           "count",         "bcast-roots", "bcast-allreduce",
        "reduce-roots", "reduce-noroot", "skip"};
    return cases("misuse-mgr", 1, 1, names, 11);
}

/* Node mode (two ranks a host): ranks of one host whose calls differ are
 * seen by their leader, ranks of different hosts at the leaders' level. */
TEST(integ_misuse_calls_node, TEST_INTEG)
{
    static const char *const names[] = {"root-null", "count", "reduce-roots",
                                        "bcast-allreduce", "skip"};
    return cases("misuse-node", 1, 2, names, 5);
}

/*
 * Node mode with the shared socket (INCOLL_HIER_SHARED=1): a member (rank
 * 3, the reduce's root) refuses its arguments 5 ms after its leader went
 * to sleep on its socket waiting for the member's packet. The member's
 * refusal must wake the leader at once (before, it slept until its
 * 20 ms slice passed: the leader's log line below never came), every rank
 * must get the error once and the next calls must be right. Up to three
 * jobs, for a member that a loaded machine kept from coming within the
 * leader's slice.
 */
TEST(integ_misuse_refuse_shared, TEST_INTEG)
{
    char dir[PATH_MAX], out[PATH_MAX + 64];
    int r = have_binaries(), woke = 0;
    if (r != TEST_PASSED)
        return r;
    if (fab_up(dir, sizeof(dir), "refuse-shared", 1) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    snprintf(out, sizeof(out), "%s-refuse.txt", dir);
    for (int i = 0; i < 3 && !woke && r == TEST_PASSED; i++) {
        char *text;
        int st = run_cmd_file(
            out, 100,
            "env INCOLL_HIER_SHARED=1 INCOLL_LOG_LEVEL=info '%s/incoll' run "
            "-n 8 --ppn 2 --fabric '%s' --timeout 60 -- '%s/misuse_check' "
            "--case root-null --who 3 --delay-ms 5",
            test_bindir(), dir, progdir());
        text = slurp(out);
        if (st != 0 || text == NULL ||
            strstr(text, "error iter 2 (root-null): invalid argument") ==
                NULL) {
            fprintf(stderr, "    exit %d\n", st);
            show_tail(out);
            r = TEST_FAILED;
        }
        woke = text != NULL &&
               strstr(text, "rank 2: info: hier: member 1 found this host's "
                            "calls differ while the leader slept") != NULL;
        free(text);
    }
    test_fabric_down(dir);
    if (r == TEST_PASSED && !woke) {
        show_tail(out);
        FAILF("the refusal never woke the leader asleep on its socket");
    }
    return r;
}

/* Without a manager (fabric.conf's world group), flat and node mode. */
TEST(integ_misuse_calls_nomgr, TEST_INTEG)
{
    static const char *const names[] = {"root-null", "dtype", "bcast-roots"};
    int r = cases("misuse-nomgr", 0, 1, names, 3);
    if (r == TEST_PASSED)
        r = cases("misuse-nomgr-node", 0, 2, names, 2);
    return r;
}

/*
 * Without a manager nothing recovers a host-based operation that failed:
 * its communicator's host-based engine stays out of step, and every
 * later call there fails at once, its message naming the operation that
 * failed, collective and algorithm (before: "an earlier host-based rd
 * failed", whatever had). A split runs on the hosts there; its second
 * broadcast after a peer left must fail too, and say why.
 */
TEST(integ_misuse_peer_gone_nomgr, TEST_INTEG)
{
    char dir[PATH_MAX], out[PATH_MAX + 64];
    char *text;
    int st, r = have_binaries();
    if (r != TEST_PASSED)
        return r;
    if (fab_up(dir, sizeof(dir), "gone-nomgr", 0) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    snprintf(out, sizeof(out), "%s.txt", dir);
    st = run_cmd_file(out, 60,
                      "env INCOLL_WAIT_MS=1500 '%s/incoll' run --no-mgr -n 4 "
                      "--fabric '%s' --timeout 50 -- '%s/misuse_check' --case "
                      "gone --who 1",
                      test_bindir(), dir, progdir());
    test_fabric_down(dir);
    text = slurp(out);
    CHECK(text != NULL);
    if (st != 0 || strstr(text, "gone: first broadcast: ") == NULL ||
        strstr(text, "gone: second broadcast: ") == NULL ||
        strstr(text, "bcast: the host-based operations of this communicator "
                     "are out of step since a bcast (") == NULL) {
        fprintf(stderr, "    exit %d\n", st);
        show_tail(out);
        free(text);
        return TEST_FAILED;
    }
    free(text);
    return TEST_PASSED;
}

/*
 * A rank that computes for 4 s before its call while the others wait in
 * it: with operation timeouts of 1 s, the others must wait (the leaf AN
 * says it holds their parts, INCOLL_WAIT_MS) and every call be right.
 * Before, the operation timed out after the timeout, the members
 * recovered without the late rank and the communicator broke. The probe
 * (tests/probe) runs the same with a rank 300 s late and the default
 * timeouts.
 */
TEST(integ_late_rank, TEST_INTEG)
{
    char dir[PATH_MAX];
    int r = have_binaries(), bad = 0;
    const char *env = "INCOLL_MGR_OP_TIMEOUT_MS=1000 INCOLL_TIMEOUT_MS=1000";
    if (r != TEST_PASSED)
        return r;
    for (int managed = 1; managed >= 0; managed--) {
        if (fab_up(dir, sizeof(dir), managed ? "late-mgr" : "late-nomgr",
                   managed) != 0) {
            test_fabric_down(dir);
            return TEST_FAILED;
        }
        bad += misuse(dir, managed, 4, 1, env,
                      "--case late --who 2 --late-ms 4000") != 0;
        if (managed)
            bad += misuse(dir, managed, 8, 2, env,
                          "--case late --who 3 --late-ms 4000") != 0;
        test_fabric_down(dir);
    }
    return bad ? TEST_FAILED : TEST_PASSED;
}

/* INCOLL_DEADLINE_MS=1500 and a rank 4 s late: the others' call fails
 * with INCOLL_ERR_TIMEOUT at its deadline, the late rank's too (or it
 * finds it complete and right), and the calls after it are right. */
TEST(integ_call_deadline, TEST_INTEG)
{
    char dir[PATH_MAX];
    int r = have_binaries(), bad = 0;
    const char *env = "INCOLL_DEADLINE_MS=1500 INCOLL_MGR_OP_TIMEOUT_MS=1000 "
                      "INCOLL_TIMEOUT_MS=1000";
    if (r != TEST_PASSED)
        return r;
    for (int managed = 1; managed >= 0; managed--) {
        if (fab_up(dir, sizeof(dir), managed ? "ddl-mgr" : "ddl-nomgr",
                   managed) != 0) {
            test_fabric_down(dir);
            return TEST_FAILED;
        }
        bad += misuse(dir, managed, 4, 1, env,
                      "--case deadline --who 2 --late-ms 4000") != 0;
        test_fabric_down(dir);
    }
    return bad ? TEST_FAILED : TEST_PASSED;
}

/*
 * A rank that starts after the manager's request time (1 s here): the
 * others' request for the world's group expires before it asks. They ask
 * again until it does (INCOLL_WAIT_MS), and every call is right. Before,
 * the world had neither a group nor its members' endpoints, and every
 * collective failed with "rank 0 has no fixed UDP port".
 */
TEST(integ_world_request_late_rank, TEST_INTEG)
{
    char dir[PATH_MAX], out[PATH_MAX + 32], env[PATH_MAX * 2];
    int r = have_binaries(), bad = 0;
    char *text;
    proc_t p[4];

    if (r != TEST_PASSED)
        return r;
    setenv("INCOLL_MGR_REQUEST_MS", "1000", 1);
    r = fab_up(dir, sizeof(dir), "late-join", 1);
    unsetenv("INCOLL_MGR_REQUEST_MS");
    if (r != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    snprintf(out, sizeof(out), "%s/fabric.env", dir);
    text = slurp(out);
    /* INCOLL_MGR=..., INCOLL_SECRET_FILE=... from fabric.env */
    {
        char mgr[256] = "", sec[PATH_MAX] = "";
        const char *m = strstr(text, "INCOLL_MGR="),
                   *s = strstr(text, "INCOLL_SECRET_FILE=");
        if (m)
            sscanf(m, "INCOLL_MGR=%255s", mgr);
        if (s)
            sscanf(s, "INCOLL_SECRET_FILE=%4095s", sec);
        snprintf(env, sizeof(env),
                 "INCOLL_MGR=%s INCOLL_SECRET_FILE=%s INCOLL_JOB=latejoin-%d "
                 "INCOLL_SIZE=4",
                 mgr, sec, (int)getpid());
    }
    free(text);
    for (int i = 0; i < 4; i++) {
        p[i].out = NULL;
        /* Rank 3 starts 3 s after the others. */
        if (proc_start(&p[i], 60,
                       "sh -c \"sleep %d; exec env %s INCOLL_RANK=%d "
                       "INCOLL_HOST=h%d '%s/misuse_check' --case none\"",
                       i == 3 ? 3 : 0, env, i, i, progdir()) != 0)
            bad++;
    }
    for (int i = 0; i < 4; i++) {
        int st = p[i].out || p[i].pid ? proc_wait(&p[i]) : -1;
        if (st != 0 || strstr(p[i].out ? p[i].out : "",
                              "summary ok=8 wrong=0 errors=0") == NULL) {
            fprintf(stderr, "    rank %d: exit %d:\n%.2000s\n", i, st,
                    p[i].out ? p[i].out : "");
            bad++;
        }
        free(p[i].out);
    }
    test_fabric_down(dir);
    return bad ? TEST_FAILED : TEST_PASSED;
}

/*
 * Node mode and an AN failure: 8 ranks, 2 a host, a loop of broadcasts
 * (every rank checks every byte), the root AN killed during it. Every
 * rank must return every broadcast right: the leaders recover on their
 * own communicator and tell their hosts' members. Before, the world's
 * own group failed too and its recovery waited for the members, which sat
 * in shared memory and never joined: leaders returned errors, members
 * hung or returned other broadcasts' data as success.
 */
TEST(integ_node_an_kill, TEST_INTEG)
{
    char dir[PATH_MAX], log[PATH_MAX + 16], pidf[PATH_MAX + 16];
    char *env[] = {"INCOLL_MGR_OP_TIMEOUT_MS=1000", "INCOLL_TIMEOUT_MS=1000",
                   "INCOLL_LOG_LEVEL=info", NULL};
    char bin[PATH_MAX], prog[PATH_MAX];
    char *argv[] = {bin,    "run",      "-n",     "8",          "--ppn",
                    "2",    "--fabric", dir,      "--timeout",  "90",
                    "--",   prog,       "--coll", "bcast",      "--iters",
                    "1500", "--count",  "100",    "--progress", "100",
                    NULL};
    int r = have_binaries(), st, n = 0;
    pid_t run, an;
    double end;
    char *out = NULL, *pidtext;

    if (r != TEST_PASSED)
        return r;
    snprintf(dir, sizeof(dir), "%s/node-kill", test_tmpdir());
    snprintf(log, sizeof(log), "%s.out", dir);
    snprintf(bin, sizeof(bin), "%s/incoll", test_bindir());
    snprintf(prog, sizeof(prog), "%s/recover_check", progdir());
    if (access(prog, X_OK) != 0)
        return test_skip("%s not built", prog);
    if (test_fabric_up(dir, 4, 2) != 0) {
        test_fabric_down(dir);
        return TEST_FAILED;
    }
    run = spawn(log, argv, env);
    CHECK(run > 0);
    end = now_s() + 60;
    do {
        free(out);
        sleep_s(0.01);
        out = slurp(log);
    } while (strstr(out, "progress iter 300") == NULL &&
             strstr(out, "summary") == NULL && now_s() < end);
    free(out);
    snprintf(pidf, sizeof(pidf), "%s/root.pid", dir);
    pidtext = slurp(pidf);
    an = (pid_t)atoi(pidtext);
    free(pidtext);
    if (an > 0)
        kill(an, SIGKILL);
    st = wait_pid(run, 100);
    test_fabric_down(dir);
    out = slurp(log);
    for (const char *p = out;
         (p = strstr(p, "summary ok=1500 wrong=0 errors=0")) != NULL; p++)
        n++;
    if (an <= 0 || st != 0 || n != 8 || strstr(out, "WRONG")) {
        fprintf(stderr,
                "    root AN killed: exit %d, %d of 8 ranks all right; "
                "%s:\n%.3000s\n",
                st, n, log, out);
        r = TEST_FAILED;
    }
    free(out);
    stop_all();
    return r;
}
