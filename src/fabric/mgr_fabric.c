/*
 * A local managed fabric for the CLI; see mgr_fabric.h.
 */
#include "fabric/mgr_fabric.h"

#include "common/fabric_conf.h"
#include "common/mgr_proto.h"
#include "common/procstat.h"
#include "fabric/daemon.h"
#include "fabric/mgr_tool.h"
#include "mgr/topo.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Starts a daemon (fabric_spawn) and writes its pid to pid_path. */
static pid_t spawn(char **argv, const char *netns, const cpu_set_t *cpus,
                   const char *log_path, const char *pid_path, int append)
{
    pid_t pid = fabric_spawn_on(netns, cpus, argv, log_path, append);
    if (pid < 0)
        return -1;
    if (fabric_pidfile_write(pid_path, pid) != 0) {
        kill(pid, SIGKILL);
        return -1;
    }
    return pid;
}

#define MGR_ENV_FILE "mgr.env"

/* Writes the manager's settings from our environment (INCOLL_MGR_* knobs
 * and INCOLL_LOG_LEVEL) to DIR/mgr.env, for `incoll fabric restart`. */
static int save_mgr_env(const char *dir)
{
    extern char **environ;
    char path[PATH_MAX + 32];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, MGR_ENV_FILE);
    f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "# the manager's settings at `incoll fabric up`, for "
               "`incoll fabric restart`\n");
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "INCOLL_MGR_", 11) == 0 ||
            strncmp(*e, "INCOLL_LOG_LEVEL=", 17) == 0)
            fprintf(f, "%s\n", *e);
    return fclose(f);
}

/* Sets the variables of DIR/mgr.env in our environment (a missing file
 * sets nothing). */
static void load_mgr_env(const char *dir)
{
    char path[PATH_MAX + 32], line[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, MGR_ENV_FILE);
    f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *eq = strchr(line, '='), *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (line[0] == '#' || eq == NULL || strncmp(line, "INCOLL_", 7) != 0)
            continue;
        *eq = '\0';
        setenv(line, eq + 1, 1);
    }
    fclose(f);
}

/* Writes NAME=VALUE, VALUE single-quoted for sh unless it needs no quotes
 * (mgr_fabric_env() reads both forms). */
static void put_var(FILE *f, const char *name, const char *value)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "_./:,@%+=-";

    if (value[strspn(value, plain)] == '\0') {
        fprintf(f, "%s=%s\n", name, value);
        return;
    }
    fprintf(f, "%s='", name);
    for (const char *c = value; *c; c++) {
        if (*c == '\'')
            fputs("'\\''", f);
        else
            fputc(*c, f);
    }
    fputs("'\n", f);
}

/*
 * Writes DIR/fabric.env (path): the manager, the secret, and the
 * topology's hosts in file order as INCOLL_HOSTS, all exported, so that
 * after `. DIR/fabric.env` whatever the shell starts has them (`mpirun -x
 * NAME` passes only variables of its environment). INCOLL_HOSTS is what a
 * rank started by hand needs to name its host: on 127.0.0.1 the manager
 * cannot tell hosts apart by address, and rank r takes host r (modulo
 * their number; src/host/comm.c), as under `incoll mpirun`.
 */
static int write_env(const char *path, const char *dir, const char *addr,
                     const char *secret, const topo_t *topo)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int ret;

    if (f == NULL)
        return -1;
    fprintf(f,
            "# incoll fabric in %s, written by `incoll fabric up`;\n"
            "# `. %s` to use it without `incoll run`\n",
            dir, path);
    put_var(f, "INCOLL_MGR", addr);
    put_var(f, "INCOLL_SECRET_FILE", secret);
    fputs("INCOLL_HOSTS=", f);
    for (int h = 0; h < topo->nhosts; h++)
        fprintf(f, "%s%s", h ? "," : "", topo->hosts[h].name);
    fputs("\nexport INCOLL_MGR INCOLL_SECRET_FILE INCOLL_HOSTS\n", f);
    if (fclose(f) != 0) {
        free(text);
        return -1;
    }
    ret = fabric_write_file(path, text, 0644);
    free(text);
    return ret;
}

void mgr_fabric_log_tail(const char *path)
{
    char line[1024], last[1024] = "";
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f))
        if (line[0] != '\n')
            snprintf(last, sizeof(last), "%s", line);
    fclose(f);
    if (last[0])
        fprintf(stderr, "  %s: %s%s", path, last,
                last[strlen(last) - 1] == '\n' ? "" : "\n");
}

/* fabric.conf (when given, else conf stays empty) and the topology: read,
 * or a generated fat-tree. 0, or -1 (said) with nothing to free. */
static int up_load(const mgr_fabric_params_t *p, fabric_conf_t *conf,
                   topo_t *topo)
{
    char err[512];

    memset(conf, 0, sizeof(*conf));
    if (p->conf &&
        fabric_conf_load(p->conf, conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll fabric up: %s\n", err);
        return -1;
    }
    if (p->topology) {
        if (topo_load(p->topology, topo, err, sizeof(err)) != INCOLL_OK) {
            fprintf(stderr, "incoll fabric up: %s\n", err);
            fabric_conf_free(conf);
            return -1;
        }
    } else if (topo_fat_tree(p->radix, p->levels, p->hosts, NULL, topo) !=
               INCOLL_OK) {
        fprintf(stderr,
                "incoll fabric up: cannot build a fat-tree of radix %d "
                "and %d levels with %d hosts (radix: even, 2..64; "
                "levels: 2 or 3; hosts: at most the ports)\n",
                p->radix, p->levels, p->hosts);
        fabric_conf_free(conf);
        return -1;
    }
    return 0;
}

/* The paths of a local fabric's files in p->dir. */
typedef struct {
    char topo[PATH_MAX + 32], secret[PATH_MAX + 32], port[PATH_MAX + 32];
    char env[PATH_MAX + 32];
} up_paths_t;

/* The manager, on any free port unless told; it says which in mgr.port,
 * read into addr. Its pid, or -1 (said). */
static pid_t up_mgr(const mgr_fabric_params_t *p, const up_paths_t *f,
                    uint64_t *deadline_p, char *addr, size_t addrlen)
{
    char log_path[PATH_MAX + 64], pid_path[PATH_MAX + 64], bin[PATH_MAX + 32];
    pid_t mgr_pid;

    snprintf(bin, sizeof(bin), "%s/incoll-mgr", p->bindir);
    snprintf(log_path, sizeof(log_path), "%s/mgr.log", p->dir);
    snprintf(pid_path, sizeof(pid_path), "%s/mgr.pid", p->dir);
    {
        char *listen = (char *)(p->listen ? p->listen : "127.0.0.1:0");
        char *argv[] = {bin,
                        "--topology",
                        (char *)f->topo,
                        "--listen",
                        listen,
                        "--port-file",
                        (char *)f->port,
                        "--secret",
                        (char *)f->secret,
                        NULL};
        mgr_pid = spawn(argv, "", NULL, log_path, pid_path, 0);
    }
    if (mgr_pid < 0) {
        fprintf(stderr, "incoll fabric up: cannot start %s: %s\n", bin,
                strerror(errno));
        return -1;
    }
    if (save_mgr_env(p->dir) != 0)
        fprintf(stderr,
                "incoll fabric up: cannot write %s/%s: %s (`fabric "
                "restart` will not know the manager's settings)\n",
                p->dir, MGR_ENV_FILE, strerror(errno));
    *deadline_p = now_ms() + (uint64_t)p->wait_s * 1000;
    if (fabric_wait_port_file(f->port, mgr_pid, *deadline_p, addr, addrlen) !=
        0) {
        fprintf(stderr, "incoll fabric up: the manager did not start\n");
        mgr_fabric_log_tail(log_path);
        return -1;
    }
    return mgr_pid;
}

/* One AN per switch, registering with the manager at addr. 0, or -1
 * (said). */
static int up_ans(const mgr_fabric_params_t *p, const topo_t *topo,
                  const fabric_conf_t *conf, const up_paths_t *f,
                  const char *addr, pid_t *pids)
{
    char log_path[PATH_MAX + 64], pid_path[PATH_MAX + 64], bin[PATH_MAX + 32];

    snprintf(bin, sizeof(bin), "%s/incoll-agg", p->bindir);
    for (int i = 0; i < topo->nswitches; i++) {
        char listen[32] = "127.0.0.1:0";
        char *argv[] = {bin,
                        "--name",
                        topo->sw[i].name,
                        "--listen",
                        listen,
                        "--mgr",
                        (char *)addr,
                        "--secret",
                        (char *)f->secret,
                        "--foreground",
                        NULL};
        const char *netns = "";
        int k =
            conf->nans > 0 ? fabric_conf_find_an(conf, topo->sw[i].name) : -1;
        if (topo->sw[i].addr != INCOLL_EP_NONE)
            wire_ep_str(topo->sw[i].addr, listen, sizeof(listen));
        /* An AN of fabric.conf takes its address (and the world group)
         * from there, and runs in its namespace. */
        if (k >= 0) {
            argv[3] = "--conf";
            argv[4] = (char *)p->conf;
            netns = conf->ans[k].netns;
        }
        snprintf(log_path, sizeof(log_path), "%s/%s.log", p->dir,
                 topo->sw[i].name);
        snprintf(pid_path, sizeof(pid_path), "%s/%s.pid", p->dir,
                 topo->sw[i].name);
        pids[i] = spawn(argv, netns, p->an_cpus, log_path, pid_path, 0);
        if (pids[i] < 0) {
            fprintf(stderr, "incoll fabric up: cannot start %s: %s\n", bin,
                    strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* What runs where, for the user. */
static void up_print(const mgr_fabric_params_t *p, const topo_t *topo,
                     const char *addr, pid_t mgr_pid, const pid_t *pids,
                     const char *env_path)
{
    char ep[32];
    printf("fabric up in %s: manager %s (pid %d), %d switches, %d trees, "
           "%d hosts\n",
           p->dir, addr, (int)mgr_pid, topo->nswitches, topo->ntrees,
           topo->nhosts);
    for (int lv = topo->levels; lv >= 1; lv--)
        for (int i = 0; i < topo->nswitches; i++)
            if (topo->sw[i].level == lv)
                printf("  %-10s level %d  %-21s pid %d\n", topo->sw[i].name, lv,
                       topo->sw[i].addr == INCOLL_EP_NONE
                           ? "(any port)"
                           : wire_ep_str(topo->sw[i].addr, ep, sizeof(ep)),
                       (int)pids[i]);
    printf("  use it: incoll run --fabric %s ..., or . %s\n", p->dir, env_path);
}

int mgr_fabric_up(const mgr_fabric_params_t *p)
{
    char log_path[PATH_MAX + 64], addr[64] = "";
    up_paths_t f;
    topo_t topo;
    fabric_conf_t conf;
    pid_t mgr_pid;
    uint64_t deadline = 0;
    int ret = -1, up = 0;
    pid_t *pids = NULL;

    if (up_load(p, &conf, &topo) != 0)
        return -1;
    if (topo_find_switch(&topo, "mgr") >= 0) {
        fprintf(stderr, "incoll fabric up: switch name 'mgr' is reserved in a "
                        "local fabric (mgr.pid is the manager's)\n");
        goto out;
    }
    pids = calloc((size_t)topo.nswitches, sizeof(*pids));
    if (pids == NULL)
        goto out;
    snprintf(f.topo, sizeof(f.topo), "%s/topology", p->dir);
    snprintf(f.secret, sizeof(f.secret), "%s/secret", p->dir);
    snprintf(f.port, sizeof(f.port), "%s/mgr.port", p->dir);
    snprintf(f.env, sizeof(f.env), "%s/fabric.env", p->dir);
    unlink(f.port);
    unlink(f.env);
    if (topo_save(&topo, f.topo) != INCOLL_OK) {
        fprintf(stderr, "incoll fabric up: cannot write %s: %s\n", f.topo,
                strerror(errno));
        goto out;
    }
    unlink(f.secret);
    if (mgr_secret_generate(f.secret) != INCOLL_OK) {
        fprintf(stderr, "incoll fabric up: cannot make the secret %s\n",
                f.secret);
        goto out;
    }
    mgr_pid = up_mgr(p, &f, &deadline, addr, sizeof(addr));
    if (mgr_pid < 0 || up_ans(p, &topo, &conf, &f, addr, pids) != 0)
        goto out;
    up = fabric_wait_ans_up(addr, f.secret, topo.nswitches, deadline);
    if (up != topo.nswitches) {
        fprintf(stderr,
                "incoll fabric up: %d of %d ans registered with the "
                "manager within %d s\n",
                up, topo.nswitches, p->wait_s);
        for (int i = 0; i < topo.nswitches; i++) {
            snprintf(log_path, sizeof(log_path), "%s/%s.log", p->dir,
                     topo.sw[i].name);
            mgr_fabric_log_tail(log_path);
        }
        goto out;
    }
    if (write_env(f.env, p->dir, addr, f.secret, &topo) != 0) {
        fprintf(stderr, "incoll fabric up: cannot write %s: %s\n", f.env,
                strerror(errno));
        goto out;
    }
    if (!p->quiet)
        up_print(p, &topo, addr, mgr_pid, pids, f.env);
    ret = 0;
out:
    free(pids);
    topo_free(&topo);
    fabric_conf_free(&conf);
    return ret;
}

int mgr_fabric_managed(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    return access(path, R_OK) == 0;
}

/* Copies a value as put_var() writes it (plain or single-quoted) into buf;
 * -1 if it does not fit. */
static int unquote(const char *v, char *buf, size_t len)
{
    size_t n = 0;
    int quoted = 0;

    for (; *v; v++) {
        if (*v == '\'') {
            quoted = !quoted;
            continue;
        }
        if (*v == '\\' && !quoted && v[1])
            v++;
        if (n + 1 >= len)
            return -1;
        buf[n++] = *v;
    }
    buf[n] = '\0';
    return 0;
}

int mgr_fabric_env(const char *dir, char *addr, size_t addrlen, char *secret,
                   size_t secretlen, char *err, size_t errlen)
{
    char path[PATH_MAX + 32], *line = NULL;
    size_t cap = 0;
    ssize_t n;
    FILE *f;
    int lineno = 0, ret = -1;

    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s:0: cannot open: %s", path, strerror(errno));
        return -1;
    }
    addr[0] = secret[0] = '\0';
    while ((n = getline(&line, &cap, f)) >= 0) {
        int bad = 0;
        lineno++;
        if (n > 0 && line[n - 1] == '\n')
            line[n - 1] = '\0';
        if (strncmp(line, "INCOLL_MGR=", 11) == 0)
            bad = unquote(line + 11, addr, addrlen);
        else if (strncmp(line, "INCOLL_SECRET_FILE=", 19) == 0)
            bad = unquote(line + 19, secret, secretlen);
        else if (strncmp(line, "INCOLL_HOSTS=", 13) == 0 ||
                 strncmp(line, "export ", 7) == 0 || line[0] == '#' ||
                 line[0] == '\0')
            continue; /* the tools take the hosts from DIR/topology */
        else
            bad = 1;
        if (bad) {
            snprintf(err, errlen,
                     "%s:%d: not INCOLL_MGR=, INCOLL_SECRET_FILE=, "
                     "INCOLL_HOSTS= or export, or too long",
                     path, lineno);
            goto out;
        }
    }
    if (addr[0] == '\0' || secret[0] == '\0') {
        snprintf(err, errlen,
                 "%s:0: needs INCOLL_MGR= and INCOLL_SECRET_FILE=", path);
        goto out;
    }
    ret = 0;
out:
    free(line);
    fclose(f);
    return ret;
}

int mgr_fabric_host_names(const char *dir, char ***names_p, char *err,
                          size_t errlen)
{
    char path[PATH_MAX + 32];
    topo_t topo;
    char **names;

    snprintf(path, sizeof(path), "%s/topology", dir);
    if (topo_load(path, &topo, err, errlen) != INCOLL_OK)
        return -1;
    names = calloc((size_t)topo.nhosts + 1, sizeof(*names));
    if (names == NULL) {
        topo_free(&topo);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int h = 0; h < topo.nhosts; h++) {
        names[h] = strdup(topo.hosts[h].name);
        if (names[h] == NULL) {
            mgr_fabric_free_names(names, h);
            topo_free(&topo);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    *names_p = names;
    {
        int n = topo.nhosts;
        topo_free(&topo);
        return n;
    }
}

void mgr_fabric_free_names(char **names, int n)
{
    for (int i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

int mgr_fabric_restart(const mgr_fabric_params_t *p)
{
    char addr[128], secret[PATH_MAX + 32], err[512], bin[PATH_MAX + 32];
    char topo_path[PATH_MAX + 32], port_path[PATH_MAX + 32];
    char log_path[PATH_MAX + 32], pid_path[PATH_MAX + 32], got[128] = "";
    topo_t topo;
    pid_t pid;
    uint64_t deadline;
    int up = -1;
    FILE *f;

    if (mgr_fabric_env(p->dir, addr, sizeof(addr), secret, sizeof(secret), err,
                       sizeof(err)) != 0) {
        fprintf(stderr,
                "incoll fabric restart: %s has no managed fabric "
                "(%s); start one with `incoll fabric up`\n",
                p->dir, err);
        return -1;
    }
    snprintf(topo_path, sizeof(topo_path), "%s/topology", p->dir);
    snprintf(port_path, sizeof(port_path), "%s/mgr.port", p->dir);
    snprintf(log_path, sizeof(log_path), "%s/mgr.log", p->dir);
    snprintf(pid_path, sizeof(pid_path), "%s/mgr.pid", p->dir);
    pid = fabric_pidfile_read(pid_path);
    if (fabric_daemon_alive(pid)) {
        if (!p->quiet)
            printf("manager of %s runs at %s (pid %d): nothing to restart\n",
                   p->dir, addr, (int)pid);
        return 0;
    }
    if (topo_load(topo_path, &topo, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll fabric restart: %s\n", err);
        return -1;
    }
    load_mgr_env(p->dir);
    f = fopen(log_path, "a");
    if (f) {
        fprintf(f,
                "incoll fabric restart: the manager was gone; starting it "
                "again on %s\n",
                addr);
        fclose(f);
    }
    unlink(port_path);
    snprintf(bin, sizeof(bin), "%s/incoll-mgr", p->bindir);
    {
        char *argv[] = {bin,    "--topology",  topo_path, "--listen",
                        addr,   "--port-file", port_path, "--secret",
                        secret, NULL};
        pid = spawn(argv, "", NULL, log_path, pid_path, 1);
    }
    if (pid < 0) {
        fprintf(stderr, "incoll fabric restart: cannot start %s: %s\n", bin,
                strerror(errno));
        topo_free(&topo);
        return -1;
    }
    deadline = now_ms() + (uint64_t)p->wait_s * 1000;
    if (fabric_wait_port_file(port_path, pid, deadline, got, sizeof(got)) !=
        0) {
        fprintf(stderr,
                "incoll fabric restart: the manager did not start on "
                "%s\n",
                addr);
        mgr_fabric_log_tail(log_path);
        if (proc_running(pid))
            kill(pid, SIGKILL);
        unlink(pid_path);
        topo_free(&topo);
        return -1;
    }
    /* The ANs come back by themselves (they retry every 2 s at most);
     * running jobs' processes too. */
    up = fabric_wait_ans_up(addr, secret, topo.nswitches, deadline);
    if (up != topo.nswitches)
        fprintf(stderr,
                "incoll fabric restart: %d of %d ans registered again "
                "within %d s (see %s/<name>.log)\n",
                up < 0 ? 0 : up, topo.nswitches, p->wait_s, p->dir);
    if (!p->quiet)
        printf("manager of %s restarted at %s (pid %d): %d of %d ans "
               "registered again\n",
               p->dir, addr, (int)pid, up < 0 ? 0 : up, topo.nswitches);
    topo_free(&topo);
    return 0;
}
