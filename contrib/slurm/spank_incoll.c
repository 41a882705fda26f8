/*
 * spank_incoll: the Slurm plugin of incoll (SPANK, slurm/spank.h). It adds
 * the option --incoll[=QUOTA] to srun, sbatch and salloc. For a job that
 * gives it (or every job, with mode=always, unless --incoll=off):
 *
 *  - at job start (job_prolog, slurmd, each node) and at each step's start
 *    before its tasks (init_post_opt in slurmstepd, as root), registers
 *    the job with the manager as PREFIX-JOBID with the quota's groups and
 *    slots per AN, and the step as PREFIX-JOBID.STEPID (sharing the job's
 *    quota), proving the admin secret;
 *  - gives the step's tasks what libincoll and libincoll_mpi need:
 *    INCOLL_MGR, INCOLL_SECRET_FILE (a copy of the fabric secret that only
 *    the job's user can read, in state_dir, removed when the job ends: the
 *    secret itself stays root's), INCOLL_JOB (the step's name),
 *    INCOLL_GEN (the manager's generation for it), the site's env= values
 *    and, with preload=, libincoll_mpi in LD_PRELOAD: an MPI program gets
 *    its collectives offloaded with no other step;
 *  - when a step ends (exit in slurmstepd) and when the job ends however it
 *    ends (job_epilog, each node: cancelled, timed out, failed), ends it at
 *    the manager, which releases at once every group and request of it;
 *  - when the manager cannot be reached, the job runs without offload: the
 *    step's tasks get no INCOLL_MGR and the user is told why once per job
 *    (by its first step that could not register, on the stderr of its
 *    task 0; a mark in state_dir keeps later steps on that node quiet).
 *
 * Site settings are the plugin's arguments in plugstack.conf
 * (contrib/slurm/plugstack.conf, docs/deployment.md):
 *   mgr=HOST:PORT          the manager (required)
 *   secret=FILE            the fabric secret (required; root's, 0600)
 *   admin_secret=FILE      the admin secret registration proves (root
 *                          only); default: secret
 *   quota=NAME:GROUPS:SLOTS  a quota users may name (repeatable; 0: the
 *                          manager's default share)
 *   default_quota=NAME     the quota of a bare --incoll (default: the
 *                          quota called "default", else the share)
 *   mode=option|always     offload for jobs that ask, or for all
 *   preload=FILE           libincoll_mpi.so for LD_PRELOAD
 *   env=NAME=VALUE         more INCOLL_* settings for the tasks
 *                          (repeatable; a user's own value wins)
 *   prefix=NAME            job names are NAME-JOBID (default slurm)
 *   timeout_ms=N           for each request to the manager (default 3000)
 *   state_dir=DIR          where a job's copy of the secret and its
 *                          "told" mark live on a node (default
 *                          /run/incoll; root's, on a tmpfs)
 *
 * The plugin never fails a job or drains a node for the manager's sake:
 * only a bad --incoll value stops srun/sbatch, with the quotas there are.
 */
#include "common/log.h"
#include "fabric/mgr_tool.h"

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

/* SPANK_PLUGIN(incoll, 1), exported. */
API const char plugin_name[] = "incoll";
API const char plugin_type[] = "spank";
API const unsigned int plugin_version = SLURM_VERSION_NUMBER;
API const unsigned int spank_plugin_version = 1;

#define MAX_QUOTAS 16
#define MAX_ENV 32
#define NAME_LEN 64

typedef struct {
    char name[NAME_LEN];
    unsigned groups, slots;
} quota_t;

static struct {
    char mgr[256];
    char secret[256];
    char admin_secret[256];
    char preload[1024];
    char prefix[24]; /* names PREFIX-JOBID.STEPID fit NAME_LEN */
    char state_dir[256];
    char default_quota[NAME_LEN];
    int always;
    unsigned timeout_ms;
    quota_t quotas[MAX_QUOTAS];
    int nquotas;
    char *env[MAX_ENV];
    int nenv;
    int bad; /* the site settings are wrong: the plugin does nothing */
} site;

/* What the user asked: --incoll given, its value, --incoll=off. */
static struct {
    int given;
    int off;
    char value[NAME_LEN];
} opt;

static int registered; /* this slurmstepd registered its step */
static char step_name[NAME_LEN];
static char why_off[1536]; /* why this step runs without offload, or "" */
static char fam_name[NAME_LEN - 8];

static int opt_cb(int val, const char *optarg, int remote);

static struct spank_option incoll_opt = {
    "incoll",
    "[quota]",
    "Offload this job's collectives to the incoll fabric (quota: one the "
    "site defines; off: none even where every job gets it)",
    2,
    0,
    opt_cb};

/* ---- site settings ---- */

static const quota_t *quota_find(const char *name)
{
    for (int i = 0; i < site.nquotas; i++)
        if (strcmp(site.quotas[i].name, name) == 0)
            return &site.quotas[i];
    return NULL;
}

/* The site's quota names, for messages. */
static void quota_names(char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < site.nquotas && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "",
                              site.quotas[i].name);
    if (site.nquotas == 0)
        snprintf(buf, len, "none defined");
}

static int set_str(char *dst, size_t len, const char *key, const char *v)
{
    if (strlen(v) >= len || v[0] == '\0') {
        slurm_error("incoll: plugstack.conf: %s=%s is empty or too long", key,
                    v);
        return -1;
    }
    snprintf(dst, len, "%s", v);
    return 0;
}

static int parse_quota(const char *v)
{
    quota_t q;
    char extra;
    const char *c1 = strchr(v, ':');
    if (site.nquotas >= MAX_QUOTAS || c1 == NULL ||
        (size_t)(c1 - v) >= NAME_LEN || c1 == v ||
        sscanf(c1 + 1, "%u:%u%c", &q.groups, &q.slots, &extra) != 2 ||
        q.groups > 65535 || q.slots > 65535) {
        slurm_error("incoll: plugstack.conf: quota=%s is not NAME:GROUPS:SLOTS "
                    "(numbers 0..65535, at most %d quotas)",
                    v, MAX_QUOTAS);
        return -1;
    }
    memcpy(q.name, v, (size_t)(c1 - v));
    q.name[c1 - v] = '\0';
    site.quotas[site.nquotas++] = q;
    return 0;
}

/* Parses the plugin's arguments; on a bad one says which and marks the
 * site settings bad. */
static void parse_site(int ac, char **av)
{
    memset(&site, 0, sizeof(site));
    snprintf(site.prefix, sizeof(site.prefix), "slurm");
    snprintf(site.state_dir, sizeof(site.state_dir), "/run/incoll");
    site.timeout_ms = 3000;
    for (int i = 0; i < ac; i++) {
        const char *a = av[i], *eq = strchr(a, '=');
        const char *v = eq ? eq + 1 : "";
        size_t kl = eq ? (size_t)(eq - a) : strlen(a);
        int r = 0;
#define KEY(k) (kl == strlen(k) && strncmp(a, k, kl) == 0)
        if (KEY("mgr"))
            r = set_str(site.mgr, sizeof(site.mgr), "mgr", v);
        else if (KEY("secret"))
            r = set_str(site.secret, sizeof(site.secret), "secret", v);
        else if (KEY("admin_secret"))
            r = set_str(site.admin_secret, sizeof(site.admin_secret),
                        "admin_secret", v);
        else if (KEY("state_dir"))
            r = set_str(site.state_dir, sizeof(site.state_dir), "state_dir", v);
        else if (KEY("preload"))
            r = set_str(site.preload, sizeof(site.preload), "preload", v);
        else if (KEY("prefix"))
            r = set_str(site.prefix, sizeof(site.prefix), "prefix", v);
        else if (KEY("default_quota"))
            r = set_str(site.default_quota, sizeof(site.default_quota),
                        "default_quota", v);
        else if (KEY("quota"))
            r = parse_quota(v);
        else if (KEY("mode") &&
                 (strcmp(v, "always") == 0 || strcmp(v, "option") == 0))
            site.always = strcmp(v, "always") == 0;
        else if (KEY("timeout_ms") && atoi(v) > 0)
            site.timeout_ms = (unsigned)atoi(v);
        else if (KEY("env") && strncmp(v, "INCOLL_", 7) == 0 &&
                 strchr(v, '=') && site.nenv < MAX_ENV)
            site.env[site.nenv++] = (char *)v;
        else {
            slurm_error("incoll: plugstack.conf: unknown or bad argument "
                        "'%s' (mgr=, secret=, admin_secret=, quota=NAME:G:S, "
                        "default_quota=, mode=option|always, preload=, "
                        "env=INCOLL_...=, prefix=, timeout_ms=, state_dir=)",
                        a);
            r = -1;
        }
#undef KEY
        if (r != 0)
            site.bad = 1;
    }
    if (!site.bad && (site.mgr[0] == '\0' || site.secret[0] == '\0')) {
        slurm_error("incoll: plugstack.conf: mgr= and secret= are required");
        site.bad = 1;
    }
    if (!site.bad && site.default_quota[0] &&
        quota_find(site.default_quota) == NULL) {
        slurm_error("incoll: plugstack.conf: default_quota=%s is not one of "
                    "the quotas",
                    site.default_quota);
        site.bad = 1;
    }
    if (site.admin_secret[0] == '\0')
        snprintf(site.admin_secret, sizeof(site.admin_secret), "%s",
                 site.secret);
}

/* ---- the option ---- */

static int opt_cb(int val, const char *optarg, int remote)
{
    char names[512];
    (void)val;
    (void)remote;
    opt.given = 1;
    opt.off = 0;
    opt.value[0] = '\0';
    /* A bare --incoll given to sbatch or salloc reaches the steps' srun
     * (and the prolog) through the environment as "(null)". */
    if (optarg == NULL || optarg[0] == '\0' || strcmp(optarg, "(null)") == 0)
        return 0;
    if (strcmp(optarg, "off") == 0 || strcmp(optarg, "no") == 0) {
        opt.off = 1;
        return 0;
    }
    if (strlen(optarg) >= sizeof(opt.value) || quota_find(optarg) == NULL) {
        quota_names(names, sizeof(names));
        slurm_error("incoll: --incoll=%s: unknown quota (this site has: %s; "
                    "or off)",
                    optarg, names);
        return -1;
    }
    snprintf(opt.value, sizeof(opt.value), "%s", optarg);
    return 0;
}

/* 1 when the job gets offload. In the prolog and epilog (reread) the
 * option is read back with spank_option_getopt. */
static int active(spank_t sp, int reread)
{
    if (site.bad)
        return 0;
    if (reread) {
        char *arg = NULL;
        if (spank_option_getopt(sp, &incoll_opt, &arg) == ESPANK_SUCCESS &&
            opt_cb(0, arg, 1) != 0)
            return 0;
    }
    return !opt.off && (opt.given || site.always);
}

/* The quota of the job: --incoll=NAME, else default_quota, else "default",
 * else the manager's share. */
static quota_t job_quota(void)
{
    const quota_t *q = NULL;
    quota_t share = {"share", 0, 0};
    if (opt.value[0])
        q = quota_find(opt.value);
    if (q == NULL && site.default_quota[0])
        q = quota_find(site.default_quota);
    if (q == NULL)
        q = quota_find("default");
    return q ? *q : share;
}

static int get_u32(spank_t sp, spank_item_t item, uint32_t *v_p)
{
    return spank_get_item(sp, item, v_p) == ESPANK_SUCCESS ? 0 : -1;
}

/* The job's id, from the handle or (prolog, epilog) the environment. */
static int job_id(spank_t sp, uint32_t *id_p)
{
    const char *e;
    if (get_u32(sp, S_JOB_ID, id_p) == 0 && *id_p != 0)
        return 0;
    e = getenv("SLURM_JOB_ID");
    if (e == NULL || *e == '\0')
        e = getenv("SLURM_JOBID");
    if (e == NULL || *e == '\0')
        return -1;
    *id_p = (uint32_t)strtoul(e, NULL, 10);
    return 0;
}

/* The path of job id's "told" mark. */
static void mark_path(uint32_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/told-%u", site.state_dir, id);
}

/* The path of job id's copy of the secret. */
static void secret_path(uint32_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%s/secret-%u", site.state_dir, id);
}

/*
 * Copies the fabric secret for job id into a file only its user (uid,
 * gid) can read, once per node (steps share it); its path into out.
 * Returns 0, or -1 with the cause in err.
 */
static int job_secret(uint32_t id, uid_t uid, gid_t gid, char *out,
                      size_t outlen, char *err, size_t errlen)
{
    char buf[4096], tmp[760];
    ssize_t n;
    int in, fd;

    secret_path(id, out, outlen);
    if (access(out, F_OK) == 0)
        return 0;
    mkdir(site.state_dir, 0711);
    in = open(site.secret, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(err, errlen, "cannot read %s: %s", site.secret,
                 log_strerror(errno));
        return -1;
    }
    n = read(in, buf, sizeof(buf));
    close(in);
    snprintf(tmp, sizeof(tmp), "%s.%d", out, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    if (n <= 0 || fd < 0 || write(fd, buf, (size_t)n) != n ||
        fchown(fd, uid, gid) != 0 || close(fd) != 0 || rename(tmp, out) != 0) {
        snprintf(err, errlen, "cannot copy the secret for the job into %s: %s",
                 site.state_dir, log_strerror(errno));
        if (fd >= 0)
            unlink(tmp);
        memset(buf, 0, sizeof(buf));
        return -1;
    }
    memset(buf, 0, sizeof(buf));
    return 0;
}

/* 1 for the first step of job id on this node to be refused: it tells the
 * user; later ones find the mark. */
static int first_to_tell(uint32_t id)
{
    char path[600];
    int fd;
    mkdir(site.state_dir, 0700);
    mark_path(id, path, sizeof(path));
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno != EEXIST; /* no mark possible: tell anyway */
    close(fd);
    return 1;
}

static int register_job(const char *name, const quota_t *q, mgr_tool_reg_t *reg,
                        char *err, size_t errlen)
{
    return mgr_tool_job_register(site.mgr, site.admin_secret, name,
                                 q ? q->groups : 0, q ? q->slots : 0,
                                 site.timeout_ms, reg, err, errlen) == INCOLL_OK
               ? 0
               : -1;
}

/* ---- entry points ---- */

API int slurm_spank_init(spank_t sp, int ac, char **av)
{
    /* libincoll's own warnings (a secret file readable by others) would go
     * to slurmd's stderr: this plugin says what matters itself. */
    log_level_current = LOG_LEVEL_ERROR - 1;
    parse_site(ac, av);
    if (spank_option_register(sp, &incoll_opt) != ESPANK_SUCCESS)
        slurm_debug("incoll: cannot register --incoll in this context");
    return 0;
}

/* The job starts (slurmd's prolog, each node; no init before it in that
 * context): registered with its quota before any step. Never fails: a
 * failing prolog would drain the node. */
API int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
    uint32_t id;
    char name[NAME_LEN], err[512];
    mgr_tool_reg_t reg;
    quota_t q;
    log_level_current = LOG_LEVEL_ERROR - 1;
    parse_site(ac, av);
    if (!active(sp, 1) || job_id(sp, &id) != 0)
        return 0;
    q = job_quota();
    snprintf(name, sizeof(name), "%s-%u", site.prefix, id);
    if (register_job(name, &q, &reg, err, sizeof(err)) != 0)
        slurm_error("incoll: job %u: cannot register %s with the manager: "
                    "%s; it runs without offload",
                    id, name, err);
    else
        slurm_info("incoll: job %u registered as %s (quota %s: %u groups, "
                   "%u slots per an)",
                   id, name, q.name, reg.groups, reg.slots);
    return 0;
}

/* A step starts (slurmstepd, each node, as root, before its tasks): the
 * job and the step registered, the tasks' environment set. */
API int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    uint32_t id, step;
    uid_t uid = 0;
    gid_t gid = 0;
    char gen[16], err[1024], secret[700];
    mgr_tool_reg_t reg;
    quota_t q;
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_REMOTE || !active(sp, 0))
        return 0;
    if (job_id(sp, &id) != 0 || get_u32(sp, S_JOB_STEPID, &step) != 0)
        return 0;
    if (step == SLURM_EXTERN_CONT)
        return 0;
    q = job_quota();
    snprintf(fam_name, sizeof(fam_name), "%s-%u", site.prefix, id);
    if (step == SLURM_BATCH_SCRIPT)
        snprintf(step_name, sizeof(step_name), "%s.batch", fam_name);
    else
        snprintf(step_name, sizeof(step_name), "%s.%u", fam_name, step);
    spank_get_item(sp, S_JOB_UID, &uid);
    spank_get_item(sp, S_JOB_GID, &gid);
    if (register_job(fam_name, &q, &reg, err, sizeof(err)) != 0 ||
        register_job(step_name, NULL, &reg, err, sizeof(err)) != 0 ||
        job_secret(id, uid, gid, secret, sizeof(secret), err, sizeof(err)) !=
            0) {
        /* Said by its task 0 (slurm_spank_task_init), on the task's own
         * stderr (what slurmstepd logs here reaches only slurmd's log),
         * once per job. */
        char text[sizeof(why_off)];
        snprintf(text, sizeof(text),
                 "incoll: %s: the manager at %s cannot be used (%s): this "
                 "job runs without offload",
                 step_name, site.mgr, err);
        slurm_info("%s", text);
        if (first_to_tell(id))
            snprintf(why_off, sizeof(why_off), "%s", text);
        return 0;
    }
    registered = 1;
    snprintf(gen, sizeof(gen), "%u", reg.gen);
    spank_setenv(sp, "INCOLL_MGR", site.mgr, 1);
    spank_setenv(sp, "INCOLL_SECRET_FILE", secret, 1);
    spank_setenv(sp, "INCOLL_JOB", step_name, 1);
    spank_setenv(sp, "INCOLL_GEN", gen, 1);
    for (int i = 0; i < site.nenv; i++) {
        char name[NAME_LEN];
        const char *eq = strchr(site.env[i], '=');
        size_t n = (size_t)(eq - site.env[i]);
        if (n >= sizeof(name))
            continue;
        memcpy(name, site.env[i], n);
        name[n] = '\0';
        spank_setenv(sp, name, eq + 1, 0);
    }
    if (site.preload[0]) {
        char cur[4096], val[4096 + 1100];
        if (spank_getenv(sp, "LD_PRELOAD", cur, sizeof(cur)) ==
                ESPANK_SUCCESS &&
            cur[0])
            snprintf(val, sizeof(val), "%s:%s", site.preload, cur);
        else
            snprintf(val, sizeof(val), "%s", site.preload);
        spank_setenv(sp, "LD_PRELOAD", val, 1);
    }
    slurm_info("incoll: %s registered (generation %u, quota %s)", step_name,
               reg.gen, q.name);
    return 0;
}

/* In each task, before it runs (as the user): the step's global task 0
 * says why the job runs without offload, once, on its stderr. */
API int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    uint32_t task;
    (void)ac;
    (void)av;
    if (why_off[0] && get_u32(sp, S_TASK_GLOBAL_ID, &task) == 0 && task == 0)
        fprintf(stderr, "%s\n", why_off);
    return 0;
}

/* A step ends (slurmstepd, each node): the manager releases its groups at
 * once rather than when its ranks' connections are found gone. */
API int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    char err[512];
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_REMOTE || !registered)
        return 0;
    if (mgr_tool_job_end(site.mgr, site.admin_secret, step_name, "step ended",
                         site.timeout_ms, NULL, NULL, err,
                         sizeof(err)) != INCOLL_OK)
        slurm_info("incoll: %s: cannot end it at the manager: %s", step_name,
                   err);
    return 0;
}

/* The job ends however it ends (slurmd, each node): everything it and its
 * steps hold is released. Never fails. */
API int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    uint32_t id, jobs = 0, groups = 0;
    char name[NAME_LEN], err[512];
    log_level_current = LOG_LEVEL_ERROR - 1;
    parse_site(ac, av);
    if (!active(sp, 1) || job_id(sp, &id) != 0)
        return 0;
    {
        char path[700];
        mark_path(id, path, sizeof(path));
        unlink(path);
        secret_path(id, path, sizeof(path));
        unlink(path);
    }
    snprintf(name, sizeof(name), "%s-%u", site.prefix, id);
    if (mgr_tool_job_end(site.mgr, site.admin_secret, name, "job ended",
                         site.timeout_ms, &jobs, &groups, err,
                         sizeof(err)) != INCOLL_OK)
        slurm_error("incoll: job %u: cannot end %s at the manager: %s (its "
                    "groups go when its ranks' connections are found gone)",
                    id, name, err);
    else
        slurm_info("incoll: job %u ended: %u jobs, %u groups released", id,
                   jobs, groups);
    return 0;
}
