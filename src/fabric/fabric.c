/*
 * The fabric lifecycle: see fabric.h. Pid files are written right after
 * the fork (the daemons do not fork again, so the pid is the daemon's) and
 * removed by fabric_stop(). A pid file whose process is gone, or is no
 * longer an incoll-agg or incoll-mgr, is stale; so is a manager whose ANs
 * are all gone: fabric_plan() cleans it up and proceeds.
 */
#include "fabric/fabric.h"

#include "common/clock.h"
#include "common/fabric_conf.h"
#include "common/log.h"
#include "common/procstat.h"
#include "common/settings.h"
#include "fabric/an_stats.h"
#include "fabric/daemon.h"
#include "fabric/emu.h"
#include "fabric/mgr_fabric.h"
#include "mgr/topo.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FABRIC_CONF_FILE "fabric.conf"
#define AGG_COMM "incoll-agg"
#define MGR_COMM "incoll-mgr"
#define MGR_PIDFILE "mgr.pid"
#define KEEP_PIDFILE "keep.pid"

static void stop_keeper(const char *dir);
static pid_t spawn_keeper(const char *dir);

/* The pid files of a fabric directory. */
typedef struct {
    int n;
    char (*path)[PATH_MAX];
    pid_t *pid;
} pidlist_t;

static void pidlist_free(pidlist_t *l)
{
    free(l->path);
    free(l->pid);
    memset(l, 0, sizeof(*l));
}

/* Collects DIR/ *.pid. Returns -1 if dir cannot be read (ENOENT: 0, an
 * empty list). */
static int pidlist_read(const char *dir, pidlist_t *l)
{
    struct dirent *de;
    DIR *d;
    int cap = 0;

    memset(l, 0, sizeof(*l));
    d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : -1;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".pid") != 0)
            continue;
        if (l->n == cap) {
            int ncap = cap ? 2 * cap : 16;
            void *np = realloc(l->path, (size_t)ncap * sizeof(*l->path));
            void *nq =
                np ? realloc(l->pid, (size_t)ncap * sizeof(*l->pid)) : NULL;
            if (np)
                l->path = np;
            if (nq)
                l->pid = nq;
            if (!np || !nq) {
                closedir(d);
                pidlist_free(l);
                errno = ENOMEM;
                return -1;
            }
            cap = ncap;
        }
        snprintf(l->path[l->n], PATH_MAX, "%s/%s", dir, de->d_name);
        l->pid[l->n] = fabric_pidfile_read(l->path[l->n]);
        l->n++;
    }
    closedir(d);
    return 0;
}

/*
 * Stops every live daemon of the list: SIGTERM, up to term_ms for them to
 * go, then SIGKILL. Removes the pid files. Returns how many were still
 * alive after SIGKILL (0 normally); *stopped_p/killed_p count the rest.
 */
static int stop_daemons(pidlist_t *l, int term_ms, int *stopped_p,
                        int *killed_p)
{
    int live = 0, left = 0;
    uint64_t deadline;

    for (int i = 0; i < l->n; i++) {
        if (fabric_daemon_alive(l->pid[i])) {
            kill(l->pid[i], SIGTERM);
            live++;
        } else {
            l->pid[i] = -1;
        }
    }
    deadline = now_ms() + (uint64_t)term_ms;
    for (;;) {
        left = 0;
        for (int i = 0; i < l->n; i++) {
            if (l->pid[i] > 0) {
                /* Reap it if it is our own child (the failure path of up). */
                waitpid(l->pid[i], NULL, WNOHANG);
                left += fabric_daemon_alive(l->pid[i]);
            }
        }
        if (left == 0 || now_ms() >= deadline)
            break;
        fabric_sleep_ms(20);
    }
    *stopped_p = live - left;
    *killed_p = left;
    if (left) {
        for (int i = 0; i < l->n; i++)
            if (l->pid[i] > 0 && fabric_daemon_alive(l->pid[i]))
                kill(l->pid[i], SIGKILL);
        deadline = now_ms() + 1000;
        do {
            left = 0;
            for (int i = 0; i < l->n; i++) {
                if (l->pid[i] > 0) {
                    waitpid(l->pid[i], NULL, WNOHANG);
                    left += fabric_daemon_alive(l->pid[i]);
                }
            }
            if (left)
                fabric_sleep_ms(20);
        } while (left && now_ms() < deadline);
    }
    for (int i = 0; i < l->n; i++)
        unlink(l->path[i]);
    return left;
}

#define PORT_RANGE_MIN                                                         \
    10000 /* reserved ports come from here up to the                           \
             kernel's ephemeral range */

/* First port of the kernel's ephemeral range (bind to port 0 picks from
 * it), 32768 when unknown. */
static int ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int lo = 32768, hi;
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

/*
 * Reserves n distinct free UDP ports on 127.0.0.1 by binding a socket to
 * each; the sockets stay in fds[] until the caller closes them (just before
 * the daemons start), so nothing else on this machine can take them in
 * between. Ports come from below the ephemeral range, at a random place in
 * it: no bind(port 0), ours or anyone's, can collide with them while they
 * wait for their daemon or their rank. Falls back to ephemeral ports when
 * that range is too small. Returns 0 or -1 (printed).
 */
static int reserve_ports(int n, uint16_t *ports, int *fds)
{
    int lo = ephemeral_low(), span = lo - PORT_RANGE_MIN, got = 0;
    uint32_t start;

    for (int i = 0; i < n; i++)
        fds[i] = -1;
    if (span < 4 * n)
        span = 0;
    start = span ? (uint32_t)(fabric_random64() % (uint64_t)span) : 0;
    for (int k = 0; got < n && k < (span ? span : n); k++) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        if (span)
            sa.sin_port =
                htons((uint16_t)(PORT_RANGE_MIN + (int)((start + (uint32_t)k) %
                                                        (uint32_t)span)));
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
            close(fd);
            continue;
        }
        fds[got] = fd;
        ports[got] = ntohs(sa.sin_port);
        got++;
    }
    if (got < n) {
        fprintf(stderr,
                "incoll fabric up: cannot reserve %d udp ports on "
                "127.0.0.1 (got %d): %s\n",
                n, got, strerror(errno));
        for (int i = 0; i < got; i++)
            close(fds[i]);
        return -1;
    }
    return 0;
}

/* Gives each AN (and each host, unless host_ports is 0) its own port on
 * 127.0.0.1; fds (conf->nans + conf->nhosts entries) hold them. */
static int assign_ports(fabric_conf_t *conf, int host_ports, int *fds)
{
    int n = conf->nans + (host_ports ? conf->nhosts : 0);
    uint16_t *ports = calloc((size_t)n, sizeof(*ports));

    for (int i = 0; i < conf->nans + conf->nhosts; i++)
        fds[i] = -1;
    if (ports == NULL || reserve_ports(n, ports, fds) != 0) {
        free(ports);
        return -1;
    }
    for (int i = 0; i < conf->nans; i++)
        conf->ans[i].addr = wire_ep(INADDR_LOOPBACK, ports[i]);
    for (int r = 0; host_ports && r < conf->nhosts; r++) {
        conf->hosts[r].ip = INADDR_LOOPBACK;
        conf->hosts[r].port = ports[conf->nans + r];
    }
    free(ports);
    return 0;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; fds && i < n; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

/* Path of incoll-agg: next to this executable. */
static void print_summary(const fabric_conf_t *conf, const char *dir,
                          const pid_t *pids, FILE *out)
{
    fprintf(out, "fabric up in %s: %d hosts, radix %d, %d level%s, %d an%s\n",
            dir, conf->nhosts, conf->radix, conf->levels,
            conf->levels == 1 ? "" : "s", conf->nans,
            conf->nans == 1 ? "" : "s");
    for (int lv = conf->levels; lv >= 1; lv--) {
        for (int i = 0; i < conf->nans; i++) {
            const fabric_an_t *a = &conf->ans[i];
            int kinds[AGG_RADIX_MAX], n, first = -1, last = -1;
            char ep[32], kids[256] = "";
            size_t off = 0;
            if (a->level != lv)
                continue;
            n = fabric_conf_children(conf, i, NULL, kinds, AGG_RADIX_MAX);
            for (int c = 0; c < n && c < AGG_RADIX_MAX; c++) {
                if (kinds[c] >= 0) {
                    if (off < sizeof(kids))
                        off += (size_t)snprintf(kids + off, sizeof(kids) - off,
                                                "%s%s", off ? "," : "",
                                                conf->ans[kinds[c]].name);
                } else {
                    int r = -kinds[c] - 1;
                    if (first < 0)
                        first = r;
                    last = r;
                }
            }
            if (first >= 0 && off < sizeof(kids))
                snprintf(kids + off, sizeof(kids) - off, "%sranks %d-%d",
                         off ? "," : "", first, last);
            fprintf(out,
                    "  %-8s level %d  %-21s pid %-7d parent %-8s children %s\n",
                    a->name, a->level, wire_ep_str(a->addr, ep, sizeof(ep)),
                    (int)pids[i],
                    a->parent < 0 ? "-" : conf->ans[a->parent].name, kids);
        }
    }
}

/* 1 if path is the manager's pid file. */
static int is_mgr_pidfile(const char *path)
{
    const char *slash = strrchr(path, '/');
    return strcmp(slash ? slash + 1 : path, MGR_PIDFILE) == 0;
}

/* Removes DIR/fabric.env, so nobody looks for a manager that is gone. */
static void remove_env(const char *dir)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/mgr.port", dir);
    unlink(path);
}

/* Removes what a dead or failed fabric left in dir: pid files (stopping
 * what still runs, a lone manager say), fabric.env, and the namespaces of
 * an emulated one. */
static int remove_leftovers(const char *dir, int term_ms)
{
    int stopped, killed, left = 0;
    pidlist_t l;

    stop_keeper(dir);
    if (pidlist_read(dir, &l) == 0) {
        left = stop_daemons(&l, term_ms, &stopped, &killed);
        pidlist_free(&l);
    }
    remove_env(dir);
    if (emu_present(dir) && emu_destroy(dir, NULL) != INCOLL_OK)
        left++;
    return left;
}

/*
 * Writes the tree of conf as a topology file (docs/topology.md): the same
 * switches, names and addresses, one link per parent, host h<rank> under
 * its leaf. The manager then derives exactly one tree, fabric.conf's.
 */
static int conf_write_topology(const fabric_conf_t *conf, const char *path)
{
    char tmp[PATH_MAX + 64], ep[32];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    fprintf(f,
            "# Written by `incoll fabric up --hosts %d --radix %d`: the tree "
            "of fabric.conf\n# (%d children per switch), one reduction tree. "
            "See docs/topology.md.\ndefaults payload=%u\n\n",
            conf->nhosts, conf->radix, conf->radix, conf->payload);
    for (int lv = conf->levels; lv >= 1; lv--)
        for (int i = 0; i < conf->nans; i++)
            if (conf->ans[i].level == lv)
                fprintf(f, "switch %s level=%d addr=%s\n", conf->ans[i].name,
                        lv, wire_ep_str(conf->ans[i].addr, ep, sizeof(ep)));
    fprintf(f, "\n");
    for (int i = 0; i < conf->nans; i++)
        if (conf->ans[i].parent >= 0)
            fprintf(f, "link %s %s\n", conf->ans[i].name,
                    conf->ans[conf->ans[i].parent].name);
    fprintf(f, "\n");
    for (int r = 0; r < conf->nhosts; r++) {
        struct in_addr in = {
            .s_addr =
                htonl(conf->hosts[r].ip ? conf->hosts[r].ip : INADDR_LOOPBACK)};
        fprintf(f, "host h%d leaf=%s addr=%s\n", r,
                conf->ans[conf->hosts[r].leaf].name, inet_ntoa(in));
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/*
 * The world group of a topology for fabric.conf: the first tree that
 * reaches every host's leaf, without the switches that have no host below
 * them. Rank r is topology host r. Addresses come from the topology (all
 * set by now), host addresses are 127.0.0.1 without a port. Returns 0, or
 * -1 when no tree reaches every host (then there is no fabric.conf).
 */
static int topo_to_conf(const topo_t *topo, fabric_conf_t *conf)
{
    int t, *need = NULL, *map = NULL, *nkids = NULL, n = 0;

    memset(conf, 0, sizeof(*conf));
    if (topo->nhosts < 1)
        return -1;
    for (t = 0; t < topo->ntrees; t++) {
        int ok = 1;
        for (int h = 0; h < topo->nhosts && ok; h++)
            ok = topo->trees[t].parent[topo->hosts[h].leaf] != -2;
        if (ok)
            break;
    }
    if (t == topo->ntrees)
        return -1;
    need = calloc((size_t)topo->nswitches, sizeof(int));
    map = calloc((size_t)topo->nswitches, sizeof(int));
    nkids = calloc((size_t)topo->nswitches, sizeof(int));
    conf->ans = calloc((size_t)topo->nswitches, sizeof(*conf->ans));
    conf->hosts = calloc((size_t)topo->nhosts, sizeof(*conf->hosts));
    if (!need || !map || !nkids || !conf->ans || !conf->hosts)
        goto err;
    for (int h = 0; h < topo->nhosts; h++) {
        int s = topo->hosts[h].leaf;
        nkids[s]++;
        while (s >= 0 && !need[s]) {
            int up = topo->trees[t].parent[s];
            need[s] = 1;
            if (up >= 0)
                nkids[up]++;
            s = up;
        }
    }
    for (int s = 0; s < topo->nswitches; s++) {
        map[s] = -1;
        if (!need[s])
            continue;
        map[s] = n;
        snprintf(conf->ans[n].name, FABRIC_NAME_MAX, "%s", topo->sw[s].name);
        conf->ans[n].level = topo->sw[s].level;
        conf->ans[n].addr = topo->sw[s].addr;
        if (topo->sw[s].level > conf->levels)
            conf->levels = topo->sw[s].level;
        if (nkids[s] > conf->radix)
            conf->radix = nkids[s];
        n++;
    }
    conf->nans = n;
    for (int s = 0; s < topo->nswitches; s++)
        if (map[s] >= 0)
            conf->ans[map[s]].parent = topo->trees[t].parent[s] >= 0
                                           ? map[topo->trees[t].parent[s]]
                                           : -1;
    conf->nhosts = topo->nhosts;
    for (int h = 0; h < topo->nhosts; h++) {
        conf->hosts[h].leaf = map[topo->hosts[h].leaf];
        conf->hosts[h].ip = INADDR_LOOPBACK;
    }
    if (conf->radix < 2)
        conf->radix = 2;
    conf->payload = 65000;
    for (int i = 0; i < topo->nswitches; i++)
        if (need[i] && topo->sw[i].caps.max_payload < conf->payload)
            conf->payload = topo->sw[i].caps.max_payload;
    if (conf->payload < 8)
        conf->payload = 8;
    conf->slots = (uint32_t)setting_default(SETTING_MGR_SLOTS).i;
    conf->admin_key = fabric_random64();
    conf->group_id = 1;
    conf->group_key = fabric_random64();
    free(need);
    free(map);
    free(nkids);
    return 0;
err:
    free(need);
    free(map);
    free(nkids);
    fabric_conf_free(conf);
    return -1;
}

/* Gives every switch of topo without an address, and every host of conf
 * (unless host_ports is 0), a port on 127.0.0.1; *fds_p / *nfds_p hold the
 * reserved ports until the daemons start. */
static int assign_topo_ports(topo_t *topo, fabric_conf_t *conf, int host_ports,
                             int **fds_p, int *nfds_p)
{
    int nsw = 0, nh = host_ports ? conf->nhosts : 0, k = 0;
    uint16_t *ports;
    int *fds;

    for (int i = 0; i < topo->nswitches; i++)
        nsw += topo->sw[i].addr == INCOLL_EP_NONE;
    ports = calloc((size_t)(nsw + nh) + 1, sizeof(*ports));
    fds = calloc((size_t)(nsw + nh) + 1, sizeof(*fds));
    if (ports == NULL || fds == NULL || reserve_ports(nsw + nh, ports, fds)) {
        free(ports);
        free(fds);
        return -1;
    }
    for (int i = 0; i < topo->nswitches; i++)
        if (topo->sw[i].addr == INCOLL_EP_NONE)
            topo->sw[i].addr = wire_ep(INADDR_LOOPBACK, ports[k++]);
    for (int r = 0; r < nh; r++)
        conf->hosts[r].port = ports[k++];
    free(ports);
    *fds_p = fds;
    *nfds_p = nsw + nh;
    return 0;
}

/* Where the daemons are: dir if given, else the directory of this
 * executable (incoll's; installed side by side). 0, or -1 with errno. */
static int bindir_find(const char *dir, char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n;

    if (dir != NULL) {
        snprintf(buf, len, "%s", dir);
        return 0;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0)
        return -1;
    self[n] = '\0';
    snprintf(buf, len, "%s", dirname(self));
    return 0;
}

static pid_t read_pid_of(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s.pid", dir, name);
    return fabric_pidfile_read(path);
}

/* ---- spec ---- */

void fabric_spec_default(fabric_spec_t *spec)
{
    memset(spec, 0, sizeof(*spec));
    spec->hosts = 1;
    spec->radix = 2;
    spec->wait_s = 5;
    spec->host_ports = 1;
    spec->managed = 1;
    emu_params_default(&spec->emu);
}

/* --topology or --levels: the manager's own topology. */
static int spec_shaped(const fabric_spec_t *s)
{
    return s->topology != NULL || s->levels != 0;
}

int fabric_spec_check(const fabric_spec_t *s, char *err, size_t errlen)
{
    int shaped = spec_shaped(s);
    if (s->dir == NULL || s->slots < 0 || s->slots > 65535 || s->payload < 0 ||
        s->payload > WIRE_MAX_PAYLOAD || (s->payload > 0 && s->payload < 8) ||
        s->wait_s < 1 || s->hosts < 0 ||
        (s->levels != 0 && s->levels != 2 && s->levels != 3) ||
        (!shaped &&
         (s->hosts < 1 || s->radix < 2 || s->radix > AGG_RADIX_MAX)) ||
        (s->levels && (s->radix < 2 || s->radix > 64 || s->radix % 2)) ||
        (s->topology && (s->levels || s->radix || s->hosts))) {
        snprintf(err, errlen,
                 "need --dir DIR and one of --hosts N>=1 --radix K in 2..%d, "
                 "--radix K (even, 2..64) --levels L [--hosts N], or "
                 "--topology FILE",
                 AGG_RADIX_MAX);
        return -1;
    }
    if (s->keep && !s->managed) {
        snprintf(err, errlen,
                 "--keep keeps the manager up; there is none "
                 "with --no-mgr");
        return -1;
    }
    if (shaped && (!s->managed || s->emulate)) {
        snprintf(err, errlen,
                 "--topology and --levels need the manager (not "
                 "with --no-mgr) and do not go with --emulate");
        return -1;
    }
    if (s->an_cpus) {
        cpu_set_t set;
        char why[512];
        if (fabric_cpus_parse(s->an_cpus, &set, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "--an-cpus: %s", why);
            return -1;
        }
    }
    return 0;
}

/* ---- plan, start, wait, describe ---- */

struct fabric {
    fabric_spec_t spec;
    char dir[PATH_MAX];
    char conf_path[PATH_MAX + 32];
    char topo_path[PATH_MAX + 32];
    char agg_bin[PATH_MAX + 32];
    char bindir[PATH_MAX];
    int shaped;
    int have_conf;
    int made; /* something in DIR to remove on failure */
    fabric_conf_t conf;
    topo_t topo;
    int *fds; /* ports reserved until the daemons start */
    int nfds;
    pid_t *pids;       /* per AN of conf */
    char **replies;    /* per AN of conf: its stats reply, once answered */
    cpu_set_t an_cpus; /* spec.an_cpus parsed */
};

void fabric_free(fabric_t *f)
{
    if (f == NULL)
        return;
    close_fds(f->fds, f->nfds);
    if (f->replies)
        for (int i = 0; i < f->conf.nans; i++)
            free(f->replies[i]);
    free(f->replies);
    free(f->pids);
    free(f->fds);
    fabric_conf_free(&f->conf);
    topo_free(&f->topo);
    free(f);
}

const fabric_conf_t *fabric_plan_conf(const fabric_t *f)
{
    static const fabric_conf_t none;
    return f->have_conf ? &f->conf : &none;
}

void fabric_abort(fabric_t *f)
{
    close_fds(f->fds, f->nfds);
    remove_leftovers(f->dir, 1000);
    /* Reap what we started, so no zombie outlives us in our parent's view
     * (our own exit reparents the rest anyway). */
    for (int i = 0; i < f->conf.nans; i++)
        if (f->pids && f->pids[i] > 0)
            waitpid(f->pids[i], NULL, WNOHANG);
}

/* DIR made, binaries found, a stale fabric removed. 0 or -1 (printed). */
static int plan_dir(fabric_t *f)
{
    const fabric_spec_t *s = &f->spec;
    char why[256];
    pidlist_t old;

    if (s->emulate && emu_usable(why, sizeof(why)) != 0) {
        fprintf(stderr, "incoll fabric up: cannot emulate a fabric: %s\n", why);
        return -1;
    }
    if (fabric_mkdir_p(s->dir) != 0 || realpath(s->dir, f->dir) == NULL) {
        fprintf(stderr, "incoll fabric up: cannot create %s: %s\n", s->dir,
                strerror(errno));
        return -1;
    }
    f->spec.dir = f->dir;
    if (bindir_find(s->bindir, f->bindir, sizeof(f->bindir)) != 0) {
        fprintf(stderr,
                "incoll fabric up: cannot find where incoll runs from: %s\n",
                strerror(errno));
        return -1;
    }
    snprintf(f->agg_bin, sizeof(f->agg_bin), "%s/%s", f->bindir, AGG_COMM);
    if (access(f->agg_bin, X_OK) != 0) {
        fprintf(stderr,
                "incoll fabric up: %s: %s (it is installed next to "
                "incoll)\n",
                f->agg_bin, strerror(errno));
        return -1;
    }
    if (s->managed) {
        char mgr_bin[PATH_MAX + 32];
        snprintf(mgr_bin, sizeof(mgr_bin), "%s/%s", f->bindir, MGR_COMM);
        if (access(mgr_bin, X_OK) != 0) {
            fprintf(stderr,
                    "incoll fabric up: %s: %s (it is installed next to "
                    "incoll; --no-mgr runs without it)\n",
                    mgr_bin, strerror(errno));
            return -1;
        }
    }
    /* One fabric per directory: it runs while any AN does. A manager
     * whose ANs are all gone is part of a stale fabric. */
    if (pidlist_read(f->dir, &old) != 0) {
        fprintf(stderr, "incoll fabric up: cannot read %s: %s\n", f->dir,
                strerror(errno));
        return -1;
    }
    for (int i = 0; i < old.n; i++) {
        if (!is_mgr_pidfile(old.path[i]) && fabric_daemon_alive(old.pid[i])) {
            fprintf(stderr,
                    "incoll fabric up: %s already runs a fabric (%s: pid %d "
                    "is alive); run `incoll fabric down --dir %s` first\n",
                    f->dir, old.path[i], (int)old.pid[i], f->dir);
            pidlist_free(&old);
            return -1;
        }
    }
    if (old.n > 0 || emu_present(f->dir)) {
        fprintf(stderr, "incoll fabric up: removing a stale fabric from %s\n",
                f->dir);
        if (remove_leftovers(f->dir, 1000) != 0) {
            fprintf(stderr, "incoll fabric up: cannot clean up %s\n", f->dir);
            pidlist_free(&old);
            return -1;
        }
    }
    pidlist_free(&old);
    remove_env(f->dir);
    /* Emulated fabrics whose directory is gone are nobody's: remove them. */
    if (s->emulate)
        emu_sweep_stale();
    return 0;
}

/* The manager's topology (--topology, --levels) and fabric.conf from it. */
static int plan_shaped(fabric_t *f)
{
    const fabric_spec_t *s = &f->spec;
    char err[512];
    incoll_status_t status =
        s->topology
            ? topo_load(s->topology, &f->topo, err, sizeof(err))
            : topo_fat_tree(s->radix, s->levels, s->hosts, NULL, &f->topo);
    if (status != INCOLL_OK) {
        if (s->topology)
            fprintf(stderr, "incoll fabric up: %s\n", err);
        else
            fprintf(stderr,
                    "incoll fabric up: cannot build a fat-tree of radix %d "
                    "and %d levels with %d hosts (radix: even, 2..64; "
                    "hosts: at most the K/2 per leaf of every leaf)\n",
                    s->radix, s->levels, s->hosts);
        return -1;
    }
    if (topo_to_conf(&f->topo, &f->conf) != 0) {
        f->have_conf = 0;
        fprintf(stderr,
                "incoll fabric up: no tree of the topology reaches every "
                "host: no %s (processes need the manager)\n",
                f->conf_path);
    } else {
        if (s->slots)
            f->conf.slots = (uint32_t)s->slots;
        if (s->payload && (uint32_t)s->payload < f->conf.payload)
            f->conf.payload = (uint32_t)s->payload;
    }
    if (assign_topo_ports(&f->topo, &f->conf, s->host_ports && f->have_conf,
                          &f->fds, &f->nfds) != 0)
        return -1;
    /* The ports just chosen, into fabric.conf too. */
    for (int i = 0; f->have_conf && i < f->conf.nans; i++)
        f->conf.ans[i].addr =
            f->topo.sw[topo_find_switch(&f->topo, f->conf.ans[i].name)].addr;
    if (topo_save(&f->topo, f->topo_path) != INCOLL_OK) {
        fprintf(stderr, "incoll fabric up: cannot write %s: %s\n", f->topo_path,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* fabric.conf's tree (--hosts --radix), the manager's topology from it. */
static int plan_tree(fabric_t *f)
{
    const fabric_spec_t *s = &f->spec;
    if (fabric_conf_generate(s->hosts, s->radix, &f->conf) != INCOLL_OK) {
        fprintf(stderr,
                "incoll fabric up: cannot build a tree of %d hosts with "
                "radix %d\n",
                s->hosts, s->radix);
        return -1;
    }
    if (s->slots)
        f->conf.slots = (uint32_t)s->slots;
    if (s->payload)
        f->conf.payload = (uint32_t)s->payload;
    f->nfds = f->conf.nans + f->conf.nhosts;
    f->fds = calloc((size_t)f->nfds, sizeof(*f->fds));
    if (f->fds == NULL) {
        fprintf(stderr, "incoll fabric up: out of memory\n");
        return -1;
    }
    for (int i = 0; i < f->nfds; i++)
        f->fds[i] = -1;
    if (s->emulate) {
        /* Addresses, host ports and namespaces come from the emulator. */
        f->made = 1;
        if (emu_create(f->dir, &f->conf, &f->spec.emu) != INCOLL_OK) {
            fprintf(stderr, "incoll fabric up: cannot build the emulated "
                            "fabric (see above)\n");
            return -1;
        }
    } else if (assign_ports(&f->conf, s->host_ports, f->fds) != 0) {
        return -1;
    }
    if (s->managed && conf_write_topology(&f->conf, f->topo_path) != 0) {
        f->made = 1;
        fprintf(stderr, "incoll fabric up: cannot write %s: %s\n", f->topo_path,
                strerror(errno));
        return -1;
    }
    return 0;
}

int fabric_plan(const fabric_spec_t *spec, fabric_t **fab_p)
{
    fabric_t *f = calloc(1, sizeof(*f));
    char err[256];

    if (f == NULL) {
        fprintf(stderr, "incoll fabric up: out of memory\n");
        return -1;
    }
    f->spec = *spec;
    f->shaped = spec_shaped(spec);
    f->have_conf = 1;
    if (fabric_spec_check(spec, err, sizeof(err)) != 0) {
        fprintf(stderr, "incoll fabric up: %s\n", err);
        goto err;
    }
    if (spec->an_cpus)
        fabric_cpus_parse(spec->an_cpus, &f->an_cpus, err, sizeof(err));
    if (plan_dir(f) != 0)
        goto err;
    snprintf(f->conf_path, sizeof(f->conf_path), "%s/%s", f->dir,
             FABRIC_CONF_FILE);
    snprintf(f->topo_path, sizeof(f->topo_path), "%s/topology", f->dir);
    if ((f->shaped ? plan_shaped(f) : plan_tree(f)) != 0)
        goto err;
    if (f->have_conf && fabric_conf_save(&f->conf, f->conf_path) != INCOLL_OK) {
        fprintf(stderr, "incoll fabric up: cannot write %s: %s\n", f->conf_path,
                strerror(errno));
        f->made = 1;
        goto err;
    } else if (!f->have_conf) {
        unlink(f->conf_path);
    }
    f->pids = calloc((size_t)f->conf.nans + 1, sizeof(*f->pids));
    f->replies = calloc((size_t)f->conf.nans + 1, sizeof(*f->replies));
    if (f->pids == NULL || f->replies == NULL) {
        fprintf(stderr, "incoll fabric up: out of memory\n");
        f->made = 1;
        goto err;
    }
    *fab_p = f;
    return 0;
err:
    if (f->made)
        fabric_abort(f);
    fabric_free(f);
    return -1;
}

int fabric_start(fabric_t *f)
{
    const fabric_spec_t *s = &f->spec;
    fabric_conf_t *conf = &f->conf;

    /* The reserved ports go to their owners now. */
    close_fds(f->fds, f->nfds);
    if (s->managed) {
        mgr_fabric_params_t mp;
        char text[16], listen[32];
        int root = emu_mgr_an(conf), saved = -1, rc;
        memset(&mp, 0, sizeof(mp));
        mp.dir = f->dir;
        mp.bindir = f->bindir;
        mp.topology = f->topo_path;
        mp.wait_s = s->wait_s;
        mp.quiet = s->quiet || !f->shaped;
        mp.conf = f->have_conf ? f->conf_path : NULL;
        mp.an_cpus = s->an_cpus ? &f->an_cpus : NULL;
        /* The manager's groups get fabric.conf's slots when asked for. */
        if (s->slots) {
            snprintf(text, sizeof(text), "%d", s->slots);
            setenv("INCOLL_MGR_SLOTS", text, 1);
        }
        /* An emulated fabric's manager listens in the root switch's
         * namespace, which every namespace of the fabric reaches; it is
         * started, and asked whether the ANs registered, from there. */
        if (root >= 0) {
            wire_ep_str(
                wire_ep((uint32_t)(conf->ans[root].addr >> 16), EMU_MGR_PORT),
                listen, sizeof(listen));
            mp.listen = listen;
            if (emu_netns_push(conf->ans[root].netns, &saved) != 0)
                return -1;
        }
        rc = mgr_fabric_up(&mp);
        emu_netns_leave(saved);
        if (rc != 0)
            return -1;
        for (int i = 0; i < conf->nans; i++)
            f->pids[i] = read_pid_of(f->dir, conf->ans[i].name);
        return 0;
    }
    for (int i = 0; i < conf->nans; i++) {
        char log_path[PATH_MAX + 64], pid_path[PATH_MAX + 64];
        snprintf(log_path, sizeof(log_path), "%s/%s.log", f->dir,
                 conf->ans[i].name);
        snprintf(pid_path, sizeof(pid_path), "%s/%s.pid", f->dir,
                 conf->ans[i].name);
        char *const argv[] = {f->agg_bin, "--conf",          f->conf_path,
                              "--name",   conf->ans[i].name, "--foreground",
                              NULL};
        f->pids[i] = fabric_spawn_on(conf->ans[i].netns,
                                     f->spec.an_cpus ? &f->an_cpus : NULL, argv,
                                     log_path, 0);
        if (f->pids[i] < 0) {
            fprintf(stderr, "incoll fabric up: cannot fork: %s\n",
                    strerror(errno));
            return -1;
        }
        if (fabric_pidfile_write(pid_path, f->pids[i]) != 0) {
            fprintf(stderr, "incoll fabric up: cannot write %s: %s\n", pid_path,
                    strerror(errno));
            kill(f->pids[i], SIGKILL);
            waitpid(f->pids[i], NULL, 0);
            f->pids[i] = -1;
            return -1;
        }
    }
    return 0;
}

int fabric_wait(fabric_t *f)
{
    const fabric_conf_t *conf = &f->conf;
    uint64_t deadline = now_ms() + (uint64_t)f->spec.wait_s * 1000;

    /* Ready means answering: each daemon of fabric.conf has bound its port
     * and built its group once it replies to a stats request. */
    for (;;) {
        for (int i = 0; i < conf->nans; i++) {
            int st;
            if (f->replies[i] == NULL && f->pids[i] > 0 &&
                waitpid(f->pids[i], &st, WNOHANG) == f->pids[i]) {
                char log_path[PATH_MAX + 64];
                snprintf(log_path, sizeof(log_path), "%s/%s.log", f->dir,
                         conf->ans[i].name);
                if (WIFEXITED(st))
                    fprintf(stderr,
                            "incoll fabric up: an %s exited with "
                            "status %d; see %s\n",
                            conf->ans[i].name, WEXITSTATUS(st), log_path);
                else
                    fprintf(stderr,
                            "incoll fabric up: an %s was killed by "
                            "signal %d; see %s\n",
                            conf->ans[i].name, WTERMSIG(st), log_path);
                mgr_fabric_log_tail(log_path);
                f->pids[i] = -1;
                return -1;
            }
        }
        if (fabric_an_stats(conf, 1, 100, f->replies) == 0)
            return 0;
        if (now_ms() >= deadline) {
            for (int i = 0; i < conf->nans; i++)
                if (f->replies[i] == NULL)
                    fprintf(stderr,
                            "incoll fabric up: an %s did not answer "
                            "within %d s; see %s/%s.log\n",
                            conf->ans[i].name, f->spec.wait_s, f->dir,
                            conf->ans[i].name);
            return -1;
        }
    }
}

void fabric_describe(const fabric_t *f, FILE *out)
{
    const fabric_spec_t *s = &f->spec;

    /* A shaped fabric's manager described it already (mgr_fabric_up). */
    if (!f->shaped)
        print_summary(&f->conf, f->dir, f->pids, out);
    if (s->managed && !f->shaped) {
        char addr[128] = "", secret[PATH_MAX + 32], err[512];
        if (mgr_fabric_env(f->dir, addr, sizeof(addr), secret, sizeof(secret),
                           err, sizeof(err)) != 0)
            snprintf(addr, sizeof(addr), "?");
        fprintf(out,
                "  manager  %-31s pid %-7d topology %s/topology (one tree)\n",
                addr, (int)read_pid_of(f->dir, "mgr"), f->dir);
        fprintf(out,
                "  use it: incoll run --fabric %s ..., or . %s/fabric.env\n",
                f->dir, f->dir);
    }
    if (s->emulate) {
        char rate[64], uprate[64];
        emu_rate_str(s->emu.link_rate, rate, sizeof(rate));
        if (s->emu.uplink_rate)
            emu_rate_str(s->emu.uplink_rate, uprate, sizeof(uprate));
        else
            snprintf(uprate, sizeof(uprate), "non-blocking");
        fprintf(out,
                "  emulated: one network namespace per host and switch, host "
                "links %s, uplinks %s, mtu %d%s\n",
                rate, uprate, s->emu.mtu,
                s->managed ? "" : "; no manager (fabric.conf only)");
    }
    if (s->an_cpus) {
        char list[256];
        fprintf(out, "  ANs run on CPUs %s (--an-cpus)\n",
                fabric_cpus_str(&f->an_cpus, list, sizeof(list)));
    }
}

int fabric_up(const fabric_spec_t *spec)
{
    fabric_t *f;

    if (fabric_plan(spec, &f) != 0)
        return -1;
    if (fabric_start(f) != 0 || fabric_wait(f) != 0)
        goto err;
    if (!spec->quiet)
        fabric_describe(f, stdout);
    if (spec->keep) {
        pid_t kp = spawn_keeper(f->dir);
        if (kp < 0) {
            fprintf(stderr,
                    "incoll fabric up: cannot start the keeper of the "
                    "manager: %s\n",
                    strerror(errno));
            goto err;
        }
        if (!spec->quiet)
            printf("  keeper   pid %-7d starts the manager again if it dies "
                   "(%s/keep.log)\n",
                   (int)kp, f->dir);
    }
    fabric_free(f);
    return 0;
err:
    fabric_abort(f);
    fabric_free(f);
    return -1;
}

/* ---- stop, restart ---- */

int fabric_stop(const char *dir, int quiet)
{
    int stopped = 0, killed = 0, left, removed = 0, emulated, mgr = 0;
    int ans;
    pidlist_t l;

    stop_keeper(dir);
    if (pidlist_read(dir, &l) != 0) {
        fprintf(stderr, "incoll fabric down: cannot read %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    for (int i = 0; i < l.n; i++)
        if (is_mgr_pidfile(l.path[i]) && fabric_daemon_alive(l.pid[i]))
            mgr = 1;
    left = stop_daemons(&l, 2000, &stopped, &killed);
    pidlist_free(&l);
    remove_env(dir);
    if (left) {
        fprintf(stderr,
                "incoll fabric down: %d daemon%s in %s survived "
                "SIGKILL\n",
                left, left == 1 ? "" : "s", dir);
        return -1;
    }
    emulated = emu_present(dir);
    if (emulated && emu_destroy(dir, &removed) != INCOLL_OK) {
        fprintf(stderr,
                "incoll fabric down: cannot remove the emulated "
                "fabric of %s (see above)\n",
                dir);
        return -1;
    }
    ans = stopped + killed - mgr;
    if (quiet)
        return 0;
    if (stopped + killed == 0)
        printf("fabric down in %s: nothing was running", dir);
    else
        printf("fabric down in %s: stopped %d an%s%s%s", dir, ans,
               ans == 1 ? "" : "s", mgr ? " and the manager" : "",
               killed ? " (some with SIGKILL)" : "");
    if (emulated)
        printf("; removed %d network namespace%s", removed,
               removed == 1 ? "" : "s");
    printf("\n");
    return 0;
}

int fabric_restart_mgr(const char *dir, int wait_s, int quiet)
{
    char bindir[PATH_MAX], conf_path[PATH_MAX + 32], err[512];
    mgr_fabric_params_t mp;
    int saved = -1, rc;

    if (bindir_find(NULL, bindir, sizeof(bindir)) != 0) {
        fprintf(stderr,
                "incoll fabric restart: cannot find where incoll "
                "runs from: %s\n",
                strerror(errno));
        return -1;
    }
    memset(&mp, 0, sizeof(mp));
    mp.dir = dir;
    mp.bindir = bindir;
    mp.wait_s = wait_s;
    mp.quiet = quiet;
    /* An emulated fabric's manager lives in the root switch's namespace,
     * as `fabric up` started it. */
    if (emu_present(dir)) {
        fabric_conf_t conf;
        int root;
        snprintf(conf_path, sizeof(conf_path), "%s/%s", dir, FABRIC_CONF_FILE);
        if (fabric_conf_load(conf_path, &conf, err, sizeof(err)) != INCOLL_OK) {
            fprintf(stderr, "incoll fabric restart: %s\n", err);
            return -1;
        }
        root = emu_mgr_an(&conf);
        if (root >= 0 && emu_netns_push(conf.ans[root].netns, &saved) != 0) {
            fabric_conf_free(&conf);
            return -1;
        }
        fabric_conf_free(&conf);
    }
    rc = mgr_fabric_restart(&mp);
    emu_netns_leave(saved);
    return rc;
}

/* ---- the keeper of `fabric up --keep` ---- */

/* 1 while at least one AN of dir runs (a pid file other than the
 * manager's and the keeper's naming a live incoll-agg). */
static int ans_alive(const char *dir)
{
    pidlist_t l;
    int n = 0;
    if (pidlist_read(dir, &l) != 0)
        return 1; /* cannot tell: assume the fabric is there */
    for (int i = 0; i < l.n; i++) {
        proc_stat_t st;
        if (!is_mgr_pidfile(l.path[i]) && proc_stat_read(l.pid[i], &st) == 0 &&
            strcmp(st.comm, AGG_COMM) == 0 && st.state != 'Z' &&
            st.state != 'X')
            n++;
    }
    pidlist_free(&l);
    return n > 0;
}

/*
 * The keeper of `fabric up --keep`: waits for the manager of dir to exit
 * (a pidfd, blocking; every second without one) and starts it again, as
 * `fabric restart` does, for as long as the fabric is there (fabric.env
 * and a live AN). Ends on SIGTERM or SIGINT (`fabric down` sends one
 * before it stops the daemons). Returns the exit status.
 */
static int keep_loop(const char *dir)
{
    char path[PATH_MAX + 32];
    sigset_t mask;
    int sfd;

    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0 ||
        (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
        fprintf(stderr, "incoll fabric keep: cannot set up signals: %s\n",
                strerror(errno));
        return 1;
    }
    printf("incoll fabric keep: keeping the manager of %s up (pid %d)\n", dir,
           (int)getpid());
    fflush(stdout);
    for (;;) {
        struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN},
                                {.fd = -1, .events = POLLIN}};
        pid_t pid;
        int n;
        /* Managers it started are its children: reap the ones gone. */
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        snprintf(path, sizeof(path), "%s/%s", dir, MGR_PIDFILE);
        pid = fabric_pidfile_read(path);
        if (pid > 0 && fabric_daemon_alive(pid)) {
            pfd[1].fd = (int)syscall(SYS_pidfd_open, pid, 0);
            n = poll(pfd, 2, pfd[1].fd >= 0 ? -1 : 1000);
            if (pfd[1].fd >= 0)
                close(pfd[1].fd);
            if (n < 0 && errno != EINTR)
                break;
            if (pfd[0].revents & POLLIN) {
                printf("incoll fabric keep: stopped\n");
                break;
            }
            if (fabric_daemon_alive(pid))
                continue;
        } else {
            /* A moment for a stopping fabric to show it. */
            n = poll(pfd, 1, 500);
            if (n > 0)
                break;
        }
        if (!mgr_fabric_managed(dir) || !ans_alive(dir)) {
            printf("incoll fabric keep: the fabric of %s is gone; done\n", dir);
            break;
        }
        printf("incoll fabric keep: the manager of %s is gone; starting it "
               "again\n",
               dir);
        fflush(stdout);
        if (fabric_restart_mgr(dir, 10, 0) != 0) {
            /* Not at once again: its address may be busy for a while. */
            if (poll(pfd, 1, 2000) > 0)
                break;
        }
        fflush(stdout);
    }
    close(sfd);
    snprintf(path, sizeof(path), "%s/%s", dir, KEEP_PIDFILE);
    unlink(path);
    fflush(stdout);
    return 0;
}

/* Starts the keeper of dir detached (own session, output to
 * DIR/keep.log, pid in DIR/keep.pid). Returns its pid or -1. */
static pid_t spawn_keeper(const char *dir)
{
    char path[PATH_MAX + 32];
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        snprintf(path, sizeof(path), "%s/keep.log", dir);
        fabric_detach(path, 1);
        _exit(keep_loop(dir));
    }
    snprintf(path, sizeof(path), "%s/%s", dir, KEEP_PIDFILE);
    if (fabric_pidfile_write(path, pid) != 0) {
        kill(pid, SIGTERM);
        return -1;
    }
    return pid;
}

/* Stops the keeper of dir, if one runs, before the daemons go: it would
 * start the manager again. */
static void stop_keeper(const char *dir)
{
    char path[PATH_MAX + 32], cmd[256] = "";
    pid_t pid;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, KEEP_PIDFILE);
    pid = fabric_pidfile_read(path);
    if (pid <= 0)
        return;
    /* Ours only: an incoll whose command line says `fabric` (a recycled
     * pid is left alone). */
    snprintf(cmd, sizeof(cmd), "/proc/%d/cmdline", (int)pid);
    f = fopen(cmd, "r");
    cmd[0] = '\0';
    if (f) {
        size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
        cmd[n] = '\0';
        for (size_t i = 0; i < n; i++)
            if (cmd[i] == '\0')
                cmd[i] = ' ';
        fclose(f);
    }
    if (proc_running(pid) && strstr(cmd, "fabric") != NULL) {
        uint64_t deadline = now_ms() + 2000;
        kill(pid, SIGTERM);
        while (proc_running(pid) && now_ms() < deadline) {
            waitpid(pid, NULL, WNOHANG);
            fabric_sleep_ms(20);
        }
        if (proc_running(pid))
            kill(pid, SIGKILL);
    }
    unlink(path);
}
