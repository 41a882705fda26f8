/*
 * The Slurm plugin (contrib/slurm/spank_incoll.c) with a real Slurm that
 * the test starts itself: munged, slurmctld and slurmd of Debian's
 * slurm-wlm and munge on a one-node cluster of this machine (16 CPUs
 * with overcommit, proctrack/linuxproc, no cgroups, ports of its own),
 * plugstack.conf naming the plugin with the site's quotas, and a managed
 * fabric of 4 hosts on 127.0.0.1 (INCOLL_HOSTS through the plugin's env=,
 * as a site with a real topology would not need). Open MPI jobs
 * (loop_allreduce) are submitted with sbatch and srun and --incoll:
 *
 *  - a job's collectives run in the network (the MPI layer's counts and
 *    the ANs' reductions), and once it ended the manager holds nothing of
 *    it;
 *  - two jobs at once, each with its own quota (the manager's
 *    registrations say so), both offloaded;
 *  - a job cancelled mid-run (scancel): its groups, its steps and its
 *    registration are gone from the manager within 5 s;
 *  - a job over its quota (two steps of a 1-group quota at once): the
 *    second step's world is not offloaded and rank 0 says why, naming the
 *    quota;
 *  - --incoll=nosuch: srun refuses it, naming the site's quotas;
 *  - the manager unreachable: the job runs, without offload, and is told
 *    why once.
 *
 * Skips when slurm-wlm, munge, libslurm-dev (the plugin) or Open MPI
 * (openmpi-bin, libopenmpi-dev: the jobs) is missing, or without root (slurmd
 * runs jobs as their users). Everything it starts is stopped: jobs cancelled,
 * daemons killed.
 */
#include "integ.h"

#include "common/mgr_proto.h"
#include "fabric/mgr_tool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char dir[PATH_MAX - 64];
    char fab[PATH_MAX + 16];
    char conf[PATH_MAX + 32];
    char prog[PATH_MAX];
    char lib[PATH_MAX]; /* build/lib, absolute */
    char mgr[64];
    char secret[PATH_MAX + 32];
    int ctld_port, d_port;
    double t0;
} cluster_t;

static int write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    if (fclose(f) != 0)
        return -1;
    return chmod(path, mode);
}

/* What is missing to run the test, as a SKIP reason; NULL when nothing. */
static const char *missing(void)
{
    static const char *const need[][2] = {
        {"/usr/sbin/slurmctld", "slurm-wlm (slurmctld)"},
        {"/usr/sbin/slurmd", "slurm-wlm (slurmd)"},
        {"/usr/bin/srun", "slurm-wlm (slurm-client)"},
        {"/usr/sbin/munged", "munge"},
        {"/usr/include/slurm/spank.h", "libslurm-dev"},
        /* The jobs are Open MPI programs under srun (PMIx). */
        {"/usr/bin/mpirun.openmpi", "openmpi-bin"},
        {"/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h", "libopenmpi-dev"},
    };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (access(need[i][0], F_OK) != 0)
            return need[i][1];
    return NULL;
}

/* Runs a shell command with SLURM_CONF set; its output in *out_p. */
static int sh_out(char **out_p, int timeout_s, const char *cmd)
{
    return run_cmd(out_p, timeout_s, "%s", cmd);
}

/* The job id sbatch printed ("Submitted batch job N"), or -1. */
static long submit(cluster_t *c, const char *opts, const char *script,
                   const char *out)
{
    char cmd[8192], *text = NULL;
    long id = -1;
    const char *p;
    snprintf(cmd, sizeof(cmd), "sbatch %s -o %s/%s --wrap \"%s\"", opts, c->dir,
             out, script);
    if (sh_out(&text, 30, cmd) == 0 &&
        (p = strstr(text, "Submitted batch job ")) != NULL)
        id = strtol(p + 20, NULL, 10);
    else
        fprintf(stderr, "    %s:\n%s\n", cmd, text ? text : "");
    free(text);
    return id;
}

/* Waits until job id has left the queue (its epilog done). */
static int wait_job(long id, double timeout_s)
{
    double end = now_s() + timeout_s;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "squeue -h -j %ld -o %%T 2>/dev/null", id);
    while (now_s() < end) {
        char *text = NULL;
        int gone = sh_out(&text, 10, cmd) != 0 || text == NULL ||
                   text[strspn(text, " \n")] == '\0';
        free(text);
        if (gone)
            return 0;
        sleep_s(0.2);
    }
    fprintf(stderr, "    job %ld still queued after %.0f s\n", id, timeout_s);
    return -1;
}

static char *stat_of(cluster_t *c)
{
    char *text = NULL, err[256];
    if (mgr_tool_stat(c->mgr, c->secret, 3000, &text, err, sizeof(err)) !=
        INCOLL_OK) {
        fprintf(stderr, "    stat: %s\n", err);
        return calloc(1, 1);
    }
    return text;
}

/* 1 when the manager's view names job id ("slurm-ID" or its steps). */
static int mgr_knows(cluster_t *c, long id)
{
    char name[64], *text = stat_of(c);
    int found;
    snprintf(name, sizeof(name), "slurm-%ld", id);
    found = strstr(text, name) != NULL;
    free(text);
    return found;
}

/* Waits until the manager holds nothing of job id; the seconds it took,
 * or -1. */
static double wait_forgotten(cluster_t *c, long id, double timeout_s)
{
    double t0 = now_s();
    while (now_s() - t0 < timeout_s) {
        if (!mgr_knows(c, id))
            return now_s() - t0;
        sleep_s(0.1);
    }
    return -1;
}

/* The number after key= on the first line of text containing key=. */
static long long num_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static uint64_t reductions(cluster_t *c)
{
    uint64_t sum = 0, contribs, red;
    const char *ans[] = {"root", "l0", "l1"};
    for (int i = 0; i < 3; i++)
        if (an_counts(c->fab, ans[i], &contribs, &red) == 0)
            sum += red;
    return sum;
}

/* Munge, slurmctld and slurmd in the foreground (stop_all() stops them),
 * the node idle. */
static int cluster_up(cluster_t *c)
{
    char path[PATH_MAX + 64], text[10 * PATH_MAX + 2048], host[256];
    char key[1024];
    char *argv[12], sock[PATH_MAX + 32];
    FILE *r;

    if (gethostname(host, sizeof(host)) != 0)
        return -1;
    host[sizeof(host) - 1] = '\0';
    c->ctld_port = free_tcp_port();
    c->d_port = free_tcp_port();
    CHECK(c->ctld_port > 0 && c->d_port > 0 && c->ctld_port != c->d_port);
    snprintf(path, sizeof(path), "%s/munge", c->dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof(path), "%s/munge/munge.key", c->dir);
    r = fopen("/dev/urandom", "r");
    CHECK(r && fread(key, 1, sizeof(key), r) == sizeof(key));
    fclose(r);
    {
        FILE *k = fopen(path, "w");
        CHECK(k && fwrite(key, 1, sizeof(key), k) == sizeof(key));
        fclose(k);
        chmod(path, 0600);
    }
    snprintf(sock, sizeof(sock), "%s/munge/sock", c->dir);
    {
        char kf[PATH_MAX + 64], lf[PATH_MAX + 64], pf[PATH_MAX + 64],
            sf[PATH_MAX + 64], so[PATH_MAX + 64];
        snprintf(kf, sizeof(kf), "--key-file=%s/munge/munge.key", c->dir);
        snprintf(lf, sizeof(lf), "--log-file=%s/munge/log", c->dir);
        snprintf(pf, sizeof(pf), "--pid-file=%s/munge/pid", c->dir);
        snprintf(sf, sizeof(sf), "--seed-file=%s/munge/seed", c->dir);
        snprintf(so, sizeof(so), "--socket=%s", sock);
        argv[0] = "/usr/sbin/munged";
        argv[1] = "-F";
        argv[2] = "-f";
        argv[3] = so;
        argv[4] = kf;
        argv[5] = lf;
        argv[6] = pf;
        argv[7] = sf;
        argv[8] = NULL;
        snprintf(path, sizeof(path), "%s/munge/out", c->dir);
        CHECK(spawn(path, argv, NULL) > 0);
    }
    for (int i = 0; i < 100 && access(sock, F_OK) != 0; i++)
        sleep_s(0.05);
    CHECK_MSG(access(sock, F_OK) == 0, "munged did not start");
    snprintf(text, sizeof(text),
             "ClusterName=incolltest\n"
             "SlurmctldHost=%s(127.0.0.1)\n"
             "SlurmctldPort=%d\nSlurmdPort=%d\n"
             "AuthType=auth/munge\nCredType=cred/munge\n"
             "AuthInfo=socket=%s\n"
             "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
             "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
             "SlurmUser=root\nSlurmdUser=root\n"
             "StateSaveLocation=%s/state\nSlurmdSpoolDir=%s/spool\n"
             "SlurmctldPidFile=%s/ctld.pid\nSlurmdPidFile=%s/d.pid\n"
             "SlurmctldLogFile=%s/ctld.log\nSlurmdLogFile=%s/d.log\n"
             "PlugStackConfig=%s/plugstack.conf\n"
             "MpiDefault=pmix\nReturnToService=2\n"
             "JobAcctGatherType=jobacct_gather/none\n"
             "AccountingStorageType=accounting_storage/none\n"
             "SlurmdParameters=config_overrides\n"
             "SchedulerParameters=sched_interval=1\n"
             "NodeName=%s NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN\n"
             "PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE "
             "State=UP OverSubscribe=FORCE\n",
             host, c->ctld_port, c->d_port, sock, c->dir, c->dir, c->dir,
             c->dir, c->dir, c->dir, c->dir, host, host);
    snprintf(path, sizeof(path), "%s/state", c->dir);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/spool", c->dir);
    mkdir(path, 0755);
    CHECK(write_file(c->conf, text, 0644) == 0);
    setenv("SLURM_CONF", c->conf, 1);
    argv[0] = "/usr/sbin/slurmctld";
    argv[1] = "-D";
    argv[2] = "-i";
    argv[3] = "-f";
    argv[4] = c->conf;
    argv[5] = NULL;
    snprintf(path, sizeof(path), "%s/ctld.out", c->dir);
    CHECK(spawn(path, argv, NULL) > 0);
    sleep_s(0.5);
    argv[0] = "/usr/sbin/slurmd";
    argv[1] = "-D";
    argv[2] = "-f";
    argv[3] = c->conf;
    argv[4] = NULL;
    snprintf(path, sizeof(path), "%s/slurmd.out", c->dir);
    CHECK(spawn(path, argv, NULL) > 0);
    for (int i = 0; i < 150; i++) {
        char *out = NULL;
        int idle = sh_out(&out, 10, "sinfo -h -o %T") == 0 && out &&
                   strstr(out, "idle") != NULL;
        free(out);
        if (idle)
            return 0;
        sleep_s(0.1);
    }
    snprintf(path, sizeof(path), "%s/ctld.log", c->dir);
    show_tail(path);
    snprintf(path, sizeof(path), "%s/d.log", c->dir);
    show_tail(path);
    FAILF("the node did not come up idle");
}

static void cluster_down(cluster_t *c)
{
    char *out = NULL;
    sh_out(&out, 20, "scancel --full -u root; sleep 0.5; scancel -u root");
    free(out);
    stop_all();
    unsetenv("SLURM_CONF");
    test_fabric_down(c->fab);
}

static int slurm_body(cluster_t *c)
{
    char path[PATH_MAX + 64], text[6 * PATH_MAX + 1024], opts[256];
    char script[1024];
    char *out;
    long a, b, d, e, q;
    uint64_t red0, red1;
    double took;

    /* The fabric, with an admin secret of its own for registration. */
    snprintf(path, sizeof(path), "%s/admin.secret", c->dir);
    CHECK(mgr_secret_generate(path) == INCOLL_OK);
    setenv("INCOLL_MGR_ADMIN_SECRET_FILE", path, 1);
    CHECK(test_fabric_up(c->fab, 4, 2) == 0);
    unsetenv("INCOLL_MGR_ADMIN_SECRET_FILE");
    {
        char *env = NULL, err[256];
        snprintf(c->secret, sizeof(c->secret), "%s/secret", c->fab);
        snprintf(path, sizeof(path), "%s/fabric.env", c->fab);
        env = slurp(path);
        CHECK(sscanf(strstr(env, "INCOLL_MGR=") + 11, "%63s", c->mgr) == 1);
        free(env);
        /* The fabric secret alone does not register jobs. */
        mgr_tool_reg_t reg;
        CHECK(mgr_tool_job_register(c->mgr, c->secret, "x", 0, 0, 2000, &reg,
                                    err, sizeof(err)) != INCOLL_OK);
    }
    snprintf(text, sizeof(text),
             "# incoll, as a site has it (contrib/slurm/plugstack.conf)\n"
             "required %s/spank_incoll.so mgr=%s secret=%s "
             "admin_secret=%s/admin.secret preload=%s/libincoll_mpi.so "
             "quota=default:0:0 quota=tiny:1:8 quota=big:8:256 "
             "env=INCOLL_HOSTS=h0,h1,h2,h3 env=INCOLL_MPI_STATS=1 "
             "timeout_ms=2000 state_dir=%s/incoll-state\n",
             c->lib, c->mgr, c->secret, c->dir, c->lib, c->dir);
    snprintf(path, sizeof(path), "%s/plugstack.conf", c->dir);
    CHECK(write_file(path, text, 0644) == 0);
    CHECK(cluster_up(c) == 0);

    fprintf(stderr, "    %.1f s: cluster up\n", now_s() - c->t0);
    /* One job: offloaded, then nothing left of it. */
    red0 = reductions(c);
    a = submit(c, "--incoll -n 4", "srun loop_allreduce --iters 30", "a.out");
    CHECK(a > 0);
    CHECK(wait_job(a, 60) == 0);
    snprintf(path, sizeof(path), "%s/a.out", c->dir);
    out = slurp(path);
    CHECK_MSG(strstr(out, "loop_allreduce: ok 30 iterations on 4 ranks"), "%s",
              out);
    CHECK_MSG(num_after(out, "allreduce offloaded=") >= 60 &&
                  strstr(out, "hosts=0 errors=0 passed=0;"),
              "%s", out);
    free(out);
    red1 = reductions(c);
    CHECK_MSG(red1 >= red0 + 60, "the ANs reduced %llu times",
              (unsigned long long)(red1 - red0));
    CHECK_MSG(wait_forgotten(c, a, 5) >= 0, "the manager still holds job %ld",
              a);
    fprintf(stderr, "    job %ld: offloaded, %llu reductions in the ANs\n", a,
            (unsigned long long)(red1 - red0));

    fprintf(stderr, "    %.1f s: two jobs\n", now_s() - c->t0);
    /* Two at once, each with its quota. */
    b = submit(c, "--incoll=big -n 4", "srun loop_allreduce --seconds 4",
               "b.out");
    q = submit(c, "--incoll -n 4", "srun loop_allreduce --seconds 4", "q.out");
    CHECK(b > 0 && q > 0);
    {
        char rb[64], rq[64];
        double end = now_s() + 15;
        int seen = 0;
        snprintf(rb, sizeof(rb), "registration job=slurm-%ld gen=", b);
        snprintf(rq, sizeof(rq), "registration job=slurm-%ld gen=", q);
        while (!seen && now_s() < end) {
            char *st = stat_of(c);
            const char *pb = strstr(st, rb), *pq = strstr(st, rq);
            char gb[32];
            snprintf(gb, sizeof(gb), "group id=");
            if (pb && pq && num_after(pb, "quota_groups=") == 8 &&
                num_after(pb, "quota_slots=") == 256 &&
                num_after(pq, "quota_groups=") == 0 &&
                count_lines_with(st, "job=slurm-") >= 4 && strstr(st, gb))
                seen = 1;
            free(st);
            if (!seen)
                sleep_s(0.2);
        }
        CHECK_MSG(seen, "the manager never showed both jobs with their "
                        "quotas and groups");
    }
    CHECK(wait_job(b, 60) == 0 && wait_job(q, 60) == 0);
    snprintf(path, sizeof(path), "%s/b.out", c->dir);
    out = slurp(path);
    CHECK_MSG(strstr(out, "loop_allreduce: ok") &&
                  num_after(out, "allreduce offloaded=") > 0 &&
                  strstr(out, "passed=0;"),
              "%s", out);
    free(out);
    snprintf(path, sizeof(path), "%s/q.out", c->dir);
    out = slurp(path);
    CHECK_MSG(strstr(out, "loop_allreduce: ok") &&
                  num_after(out, "allreduce offloaded=") > 0,
              "%s", out);
    free(out);

    fprintf(stderr, "    %.1f s: scancel\n", now_s() - c->t0);
    /* Cancelled mid-run: gone from the manager within 5 s. */
    d = submit(c, "--incoll -n 4", "srun loop_allreduce --seconds 120",
               "d.out");
    CHECK(d > 0);
    {
        char g[64];
        double end = now_s() + 20;
        int up = 0;
        snprintf(g, sizeof(g), "job=slurm-%ld.0 comm=", d);
        while (!up && now_s() < end) {
            char *st = stat_of(c);
            up = count_lines_with(st, g) >= 2;
            free(st);
            if (!up)
                sleep_s(0.2);
        }
        CHECK_MSG(up, "job %ld never had its groups", d);
    }
    snprintf(text, sizeof(text), "scancel %ld", d);
    out = NULL;
    CHECK(sh_out(&out, 10, text) == 0);
    free(out);
    took = wait_forgotten(c, d, 5);
    CHECK_MSG(took >= 0, "5 s after scancel the manager still holds job %ld",
              d);
    fprintf(stderr, "    job %ld cancelled: gone from the manager in %.2f s\n",
            d, took);
    CHECK(wait_job(d, 30) == 0);

    fprintf(stderr, "    %.1f s: over quota\n", now_s() - c->t0);
    /* Over its quota: two steps of one group per AN at once. */
    snprintf(opts, sizeof(opts), "--incoll=tiny -n 8");
    snprintf(script, sizeof(script),
             "srun --overlap -n 4 loop_allreduce --seconds 3 & sleep 1; "
             "srun --overlap -n 4 loop_allreduce --seconds 1; wait");
    e = submit(c, opts, script, "e.out");
    CHECK(e > 0);
    CHECK(wait_job(e, 60) == 0);
    snprintf(path, sizeof(path), "%s/e.out", c->dir);
    out = slurp(path);
    CHECK_MSG(count_lines_with(out, "loop_allreduce: ok") == 2, "%s", out);
    snprintf(text, sizeof(text),
             "over job slurm-%ld.1's quota (1 group, 8 slots per an, "
             "slurm-%ld's): no group left on an ",
             e, e);
    CHECK_MSG(strstr(out, "warn: mpi: a fabric is configured but "
                          "MPI_COMM_WORLD is not offloaded") &&
                  strstr(out, text),
              "%s", out);
    free(out);
    CHECK(wait_forgotten(c, e, 5) >= 0);

    fprintf(stderr, "    %.1f s: bad value\n", now_s() - c->t0);
    /* A bad value. */
    out = NULL;
    CHECK(sh_out(&out, 30, "srun --incoll=nosuch -n 1 true") != 0);
    CHECK_MSG(strstr(out, "--incoll=nosuch: unknown quota (this site has: "
                          "default, tiny, big; or off)"),
              "%s", out);
    free(out);

    fprintf(stderr, "    %.1f s: unreachable\n", now_s() - c->t0);
    /* The manager unreachable: the job runs, told why once. */
    snprintf(path, sizeof(path), "%s/mgr.pid", c->fab);
    out = slurp(path);
    CHECK(atoi(out) > 0 && kill(atoi(out), SIGKILL) == 0);
    free(out);
    sleep_s(0.3);
    a = submit(c, "--incoll -n 4", "srun loop_allreduce --iters 10", "g.out");
    CHECK(a > 0);
    CHECK(wait_job(a, 60) == 0);
    snprintf(path, sizeof(path), "%s/g.out", c->dir);
    out = slurp(path);
    CHECK_MSG(strstr(out, "loop_allreduce: ok 10 iterations"), "%s", out);
    CHECK_MSG(count_lines_with(out, "cannot be used") == 1 &&
                  strstr(out, "this job runs without offload") &&
                  strstr(out, "offloaded=") == NULL,
              "%s", out);
    free(out);
    return TEST_PASSED;
}

TEST_LIMIT(integ_slurm, TEST_INTEG, 240)
{
    cluster_t c;
    const char *why = missing();
    int r;

    if (why)
        return test_skip("%s is not installed (scripts/install-deps.sh)", why);
    if (geteuid() != 0)
        return test_skip("slurmd needs root (it runs jobs as their users)");
    memset(&c, 0, sizeof(c));
    snprintf(c.dir, sizeof(c.dir), "%s/slurm", test_tmpdir());
    CHECK(mkdir(c.dir, 0755) == 0);
    snprintf(c.fab, sizeof(c.fab), "%s/fab", c.dir);
    snprintf(c.conf, sizeof(c.conf), "%s/slurm.conf", c.dir);
    {
        char rel[PATH_MAX];
        snprintf(rel, sizeof(rel), "%.*s/mpi/loop_allreduce", PATH_MAX - 32,
                 progdir());
        snprintf(c.lib, sizeof(c.lib), "%.*s/../lib", PATH_MAX - 16,
                 test_bindir());
        if (realpath(rel, c.prog) == NULL || realpath(c.lib, rel) == NULL) {
            fprintf(stderr,
                    "    %s/mpi/loop_allreduce or %s/../lib is not "
                    "built (`make test` builds them)\n",
                    progdir(), test_bindir());
            return TEST_FAILED;
        }
        snprintf(c.lib, sizeof(c.lib), "%s", rel);
        snprintf(rel, sizeof(rel), "%.*s/spank_incoll.so", PATH_MAX - 32,
                 c.lib);
        if (access(rel, R_OK) != 0) {
            fprintf(stderr, "    %s is not built (libslurm-dev is there)\n",
                    rel);
            return TEST_FAILED;
        }
    }
    {
        /* The jobs find the program on the PATH. */
        char path[PATH_MAX * 2], dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", c.prog);
        *strrchr(dir, '/') = '\0';
        snprintf(path, sizeof(path), "%s:%s", dir, getenv("PATH"));
        setenv("PATH", path, 1);
    }
    c.t0 = now_s();
    r = slurm_body(&c);
    cluster_down(&c);
    return r;
}
