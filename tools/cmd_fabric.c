/*
 * `incoll fabric up|down`: a local fabric on 127.0.0.1 (or, with --emulate,
 * in network namespaces with shaped links: tools/emu.h), one incoll-agg
 * daemon per aggregation node, described by DIR/fabric.conf.
 *
 * DIR holds everything about one fabric: fabric.conf, one <name>.pid and
 * one <name>.log per AN, and emu.state for an emulated one. A pid file is
 * written by `fabric up` right after the fork (the daemon does not fork again,
 * so the pid is the daemon's) and removed by `fabric down`. A pid file whose
 * process is gone, or is no longer an incoll-agg, is stale: `fabric up` cleans
 * it up and proceeds.
 */
#include "cli.h"

#include "common/fabric_conf.h"
#include "common/log.h"
#include "emu.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* tools/cmd_stat.c; see there. */
int cli_stat_query(const fabric_conf_t *conf, int attempts, int wait_ms,
                   char **replies);

#define FABRIC_CONF_FILE "fabric.conf"
#define AGG_COMM "incoll-agg"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/*
 * 1 if pid is a running incoll-agg. Reads /proc rather than trusting
 * kill(pid, 0): an exited daemon may linger as a zombie when nobody reaps
 * it, and a recycled pid may belong to something else entirely.
 */
static int agg_alive(pid_t pid)
{
    char path[64], buf[512], *open_paren, *close_paren;
    FILE *f;
    size_t n;

    if (pid <= 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    open_paren = strchr(buf, '(');
    close_paren = strrchr(buf, ')');
    if (open_paren == NULL || close_paren == NULL || close_paren[1] == '\0' ||
        close_paren[2] == '\0')
        return 0;
    *close_paren = '\0';
    if (strcmp(open_paren + 1, AGG_COMM) != 0)
        return 0;
    return close_paren[2] != 'Z' && close_paren[2] != 'X';
}

static pid_t read_pidfile(const char *path)
{
    FILE *f = fopen(path, "r");
    long pid = -1;
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld", &pid) != 1 || pid <= 0 || pid > INT_MAX)
        pid = -1;
    fclose(f);
    return (pid_t)pid;
}

static int write_pidfile(const char *path, pid_t pid)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "%d\n", (int)pid);
    return fclose(f) == 0 ? 0 : -1;
}

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
        l->pid[l->n] = read_pidfile(l->path[l->n]);
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
        if (agg_alive(l->pid[i])) {
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
                left += agg_alive(l->pid[i]);
            }
        }
        if (left == 0 || now_ms() >= deadline)
            break;
        sleep_ms(20);
    }
    *stopped_p = live - left;
    *killed_p = left;
    if (left) {
        for (int i = 0; i < l->n; i++)
            if (l->pid[i] > 0 && agg_alive(l->pid[i]))
                kill(l->pid[i], SIGKILL);
        deadline = now_ms() + 1000;
        do {
            left = 0;
            for (int i = 0; i < l->n; i++) {
                if (l->pid[i] > 0) {
                    waitpid(l->pid[i], NULL, WNOHANG);
                    left += agg_alive(l->pid[i]);
                }
            }
            if (left)
                sleep_ms(20);
        } while (left && now_ms() < deadline);
    }
    for (int i = 0; i < l->n; i++)
        unlink(l->path[i]);
    return left;
}

static int mkdir_p(const char *dir)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
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
static int find_agg_binary(char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0)
        return -1;
    self[n] = '\0';
    snprintf(buf, len, "%s/%s", dirname(self), AGG_COMM);
    return access(buf, X_OK);
}

/* Starts one daemon detached from the terminal, output to its log, in
 * network namespace netns unless that is "". */
static pid_t spawn_agg(const char *agg_bin, const char *conf_path,
                       const char *name, const char *netns,
                       const char *log_path)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid != 0)
        return pid;
    {
        int null_fd = open("/dev/null", O_RDONLY);
        int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char *const args[] = {(char *)AGG_COMM,
                              "--conf",
                              (char *)conf_path,
                              "--name",
                              (char *)name,
                              "--foreground",
                              NULL};
        setsid();
        if (null_fd >= 0)
            dup2(null_fd, 0);
        if (log_fd >= 0) {
            dup2(log_fd, 1);
            dup2(log_fd, 2);
        }
        if (netns[0] && emu_netns_enter(netns) != 0) {
            fprintf(stderr,
                    "incoll fabric: cannot enter network namespace "
                    "%s: %s\n",
                    netns, strerror(errno));
            _exit(127);
        }
        /* Keep nothing of the caller's (a test runner's pipes, say). */
        close_range(3, ~0u, 0);
        signal(SIGHUP, SIG_IGN);
        execv(agg_bin, args);
        fprintf(stderr, "incoll fabric: cannot run %s: %s\n", agg_bin,
                strerror(errno));
        _exit(127);
    }
}

/* Prints the last line of a log file, for a daemon that failed. */
static void print_log_tail(const char *path)
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

static void print_summary(const fabric_conf_t *conf, const char *dir,
                          const pid_t *pids)
{
    printf("fabric up in %s: %d hosts, radix %d, %d level%s, %d an%s\n", dir,
           conf->nhosts, conf->radix, conf->levels,
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
            printf("  %-8s level %d  %-21s pid %-7d parent %-8s children %s\n",
                   a->name, a->level, wire_ep_str(a->addr, ep, sizeof(ep)),
                   (int)pids[i],
                   a->parent < 0 ? "-" : conf->ans[a->parent].name, kids);
        }
    }
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll fabric up --hosts N --radix K --dir DIR\n"
        "                        [--slots S] [--payload BYTES] [--wait SEC]\n"
        "                        [--no-host-ports]\n"
        "                        [--emulate [--link-rate R] [--uplink-rate R]\n"
        "                                   [--mtu BYTES]]\n"
        "       incoll fabric down --dir DIR\n"
        "\n"
        "up    writes DIR/fabric.conf for a tree of aggregation nodes over\n"
        "      N hosts with K children per switch, starts one incoll-agg\n"
        "      per node (logs in DIR/<name>.log, pids in DIR/<name>.pid)\n"
        "      and waits up to --wait seconds (default 5) until every node\n"
        "      answers a stats request. Every AN and every host gets a\n"
        "      fixed port on 127.0.0.1 (--no-host-ports: hosts pick one at\n"
        "      start, and the host-based algorithms are unavailable).\n"
        "      --emulate puts every host and switch in its own network\n"
        "      namespace, linked by veths shaped to --link-rate (as root;\n"
        "      see tools/emu.h). Refuses if DIR holds a running fabric; a\n"
        "      stale one is cleaned up.\n"
        "down  stops every daemon of DIR (SIGTERM, then SIGKILL after 2 s),\n"
        "      removes the pid files and an emulated fabric's namespaces.\n"
        "      Succeeds if nothing runs.\n");
}

/* Removes what a dead or failed fabric left in dir: pid files, and the
 * namespaces of an emulated one. */
static int remove_leftovers(const char *dir, int term_ms)
{
    int stopped, killed, left = 0;
    pidlist_t l;

    if (pidlist_read(dir, &l) == 0) {
        left = stop_daemons(&l, term_ms, &stopped, &killed);
        pidlist_free(&l);
    }
    if (emu_present(dir) && emu_destroy(dir, NULL) != INCOLL_OK)
        left++;
    return left;
}

static int fabric_up(int argc, char **argv)
{
    enum {
        OPT_NO_HOST_PORTS = 256,
        OPT_EMULATE,
        OPT_LINK_RATE,
        OPT_UPLINK_RATE,
        OPT_MTU
    };
    static const struct option longopts[] = {
        {"hosts", required_argument, NULL, 'n'},
        {"radix", required_argument, NULL, 'k'},
        {"dir", required_argument, NULL, 'd'},
        {"slots", required_argument, NULL, 's'},
        {"payload", required_argument, NULL, 'p'},
        {"wait", required_argument, NULL, 'w'},
        {"no-host-ports", no_argument, NULL, OPT_NO_HOST_PORTS},
        {"emulate", no_argument, NULL, OPT_EMULATE},
        {"link-rate", required_argument, NULL, OPT_LINK_RATE},
        {"uplink-rate", required_argument, NULL, OPT_UPLINK_RATE},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir_arg = NULL;
    char dir[PATH_MAX], conf_path[PATH_MAX + 32], agg_bin[PATH_MAX], why[256];
    int hosts = 0, radix = 0, slots = 0, payload = 0, wait_s = 5, opt, ret = 1;
    int host_ports = 1, emulate = 0, nfds = 0, missing;
    emu_params_t ep;
    fabric_conf_t conf;
    pidlist_t old;
    pid_t *pids = NULL;
    int *fds = NULL;
    char **replies = NULL;
    uint64_t deadline;

    emu_params_default(&ep);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "n:k:d:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            hosts = atoi(optarg);
            break;
        case 'k':
            radix = atoi(optarg);
            break;
        case 'd':
            dir_arg = optarg;
            break;
        case 's':
            slots = atoi(optarg);
            break;
        case 'p':
            payload = atoi(optarg);
            break;
        case 'w':
            wait_s = atoi(optarg);
            break;
        case OPT_NO_HOST_PORTS:
            host_ports = 0;
            break;
        case OPT_EMULATE:
            emulate = 1;
            break;
        case OPT_LINK_RATE:
        case OPT_UPLINK_RATE:
            if (emu_parse_rate(optarg, opt == OPT_LINK_RATE
                                           ? &ep.link_rate
                                           : &ep.uplink_rate) != 0) {
                fprintf(stderr,
                        "incoll fabric up: bad rate '%s' (want e.g. "
                        "100mbit, 1g)\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_MTU:
            ep.mtu = atoi(optarg);
            if (ep.mtu < 576 || ep.mtu > 65535) {
                fprintf(stderr, "incoll fabric up: bad mtu '%s' (576..65535)\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (dir_arg == NULL || hosts < 1 || radix < 2 || radix > AGG_RADIX_MAX ||
        optind != argc || slots < 0 || slots > 65535 || payload < 0 ||
        payload > WIRE_MAX_PAYLOAD || (payload > 0 && payload < 8) ||
        wait_s < 1) {
        fprintf(stderr,
                "incoll fabric up: need --hosts N>=1, --radix K in "
                "2..%d and --dir DIR\n",
                AGG_RADIX_MAX);
        usage(stderr);
        return 2;
    }
    if (emulate && emu_usable(why, sizeof(why)) != 0) {
        fprintf(stderr, "incoll fabric up: cannot emulate a fabric: %s\n", why);
        return 1;
    }
    if (mkdir_p(dir_arg) != 0 || realpath(dir_arg, dir) == NULL) {
        fprintf(stderr, "incoll fabric up: cannot create %s: %s\n", dir_arg,
                strerror(errno));
        return 1;
    }
    if (find_agg_binary(agg_bin, sizeof(agg_bin)) != 0) {
        fprintf(stderr,
                "incoll fabric up: %s: %s (it is installed next to "
                "incoll)\n",
                agg_bin, strerror(errno));
        return 1;
    }

    /* One fabric per directory. */
    if (pidlist_read(dir, &old) != 0) {
        fprintf(stderr, "incoll fabric up: cannot read %s: %s\n", dir,
                strerror(errno));
        return 1;
    }
    for (int i = 0; i < old.n; i++) {
        if (agg_alive(old.pid[i])) {
            fprintf(stderr,
                    "incoll fabric up: %s already runs a fabric (%s: pid %d "
                    "is alive); run `incoll fabric down --dir %s` first\n",
                    dir, old.path[i], (int)old.pid[i], dir);
            pidlist_free(&old);
            return 1;
        }
    }
    if (old.n > 0 || emu_present(dir)) {
        fprintf(stderr, "incoll fabric up: removing a stale fabric from %s\n",
                dir);
        if (remove_leftovers(dir, 0) != 0) {
            fprintf(stderr, "incoll fabric up: cannot clean up %s\n", dir);
            pidlist_free(&old);
            return 1;
        }
    }
    pidlist_free(&old);
    /* Emulated fabrics whose directory is gone are nobody's: remove them. */
    if (emulate)
        emu_sweep_stale();

    if (fabric_conf_generate(hosts, radix, &conf) != INCOLL_OK) {
        fprintf(stderr,
                "incoll fabric up: cannot build a tree of %d hosts "
                "with radix %d\n",
                hosts, radix);
        return 1;
    }
    if (slots)
        conf.slots = (uint32_t)slots;
    if (payload)
        conf.payload = (uint32_t)payload;
    nfds = conf.nans + conf.nhosts;
    pids = calloc((size_t)conf.nans, sizeof(*pids));
    replies = calloc((size_t)conf.nans, sizeof(*replies));
    fds = calloc((size_t)nfds, sizeof(*fds));
    if (pids == NULL || replies == NULL || fds == NULL) {
        fprintf(stderr, "incoll fabric up: out of memory\n");
        goto out_free;
    }
    for (int i = 0; i < nfds; i++)
        fds[i] = -1;
    if (emulate) {
        /* Addresses, host ports and namespaces come from the emulator. */
        if (emu_create(dir, &conf, &ep) != INCOLL_OK) {
            fprintf(stderr, "incoll fabric up: cannot build the emulated "
                            "fabric (see above)\n");
            goto err_stop;
        }
    } else if (assign_ports(&conf, host_ports, fds) != 0) {
        goto out_free;
    }
    snprintf(conf_path, sizeof(conf_path), "%s/%s", dir, FABRIC_CONF_FILE);
    if (fabric_conf_save(&conf, conf_path) != INCOLL_OK) {
        fprintf(stderr, "incoll fabric up: cannot write %s: %s\n", conf_path,
                strerror(errno));
        goto err_stop;
    }

    /* The reserved ports go to their owners now. */
    close_fds(fds, nfds);
    for (int i = 0; i < conf.nans; i++) {
        char log_path[PATH_MAX + 64], pid_path[PATH_MAX + 64];
        snprintf(log_path, sizeof(log_path), "%s/%s.log", dir,
                 conf.ans[i].name);
        snprintf(pid_path, sizeof(pid_path), "%s/%s.pid", dir,
                 conf.ans[i].name);
        pids[i] = spawn_agg(agg_bin, conf_path, conf.ans[i].name,
                            conf.ans[i].netns, log_path);
        if (pids[i] < 0) {
            fprintf(stderr, "incoll fabric up: cannot fork: %s\n",
                    strerror(errno));
            goto err_stop;
        }
        if (write_pidfile(pid_path, pids[i]) != 0) {
            fprintf(stderr, "incoll fabric up: cannot write %s: %s\n", pid_path,
                    strerror(errno));
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
            goto err_stop;
        }
    }

    /* Ready means answering: each daemon has bound its port and built its
     * group once it replies to a stats request. */
    deadline = now_ms() + (uint64_t)wait_s * 1000;
    for (;;) {
        for (int i = 0; i < conf.nans; i++) {
            int st;
            if (replies[i] == NULL &&
                waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                char log_path[PATH_MAX + 64];
                snprintf(log_path, sizeof(log_path), "%s/%s.log", dir,
                         conf.ans[i].name);
                if (WIFEXITED(st))
                    fprintf(stderr,
                            "incoll fabric up: an %s exited with "
                            "status %d; see %s\n",
                            conf.ans[i].name, WEXITSTATUS(st), log_path);
                else
                    fprintf(stderr,
                            "incoll fabric up: an %s was killed by "
                            "signal %d; see %s\n",
                            conf.ans[i].name, WTERMSIG(st), log_path);
                print_log_tail(log_path);
                pids[i] = -1;
                goto err_stop;
            }
        }
        missing = cli_stat_query(&conf, 1, 100, replies);
        if (missing == 0)
            break;
        if (now_ms() >= deadline) {
            for (int i = 0; i < conf.nans; i++)
                if (replies[i] == NULL)
                    fprintf(stderr,
                            "incoll fabric up: an %s did not answer "
                            "within %d s; see %s/%s.log\n",
                            conf.ans[i].name, wait_s, dir, conf.ans[i].name);
            goto err_stop;
        }
    }
    print_summary(&conf, dir, pids);
    if (emulate) {
        char rate[64], uprate[64];
        emu_rate_str(ep.link_rate, rate, sizeof(rate));
        if (ep.uplink_rate)
            emu_rate_str(ep.uplink_rate, uprate, sizeof(uprate));
        else
            snprintf(uprate, sizeof(uprate), "non-blocking");
        printf("  emulated: one network namespace per host and switch, host "
               "links %s, uplinks %s, mtu %d\n",
               rate, uprate, ep.mtu);
    }
    ret = 0;
    goto out_free;

err_stop:
    close_fds(fds, nfds);
    remove_leftovers(dir, 1000);
    /* Reap what we started, so no zombie outlives us in our parent's view
     * (our own exit reparents the rest anyway). */
    for (int i = 0; i < conf.nans; i++)
        if (pids && pids[i] > 0)
            waitpid(pids[i], NULL, WNOHANG);
out_free:
    close_fds(fds, nfds);
    if (replies)
        for (int i = 0; i < conf.nans; i++)
            free(replies[i]);
    free(replies);
    free(pids);
    free(fds);
    fabric_conf_free(&conf);
    return ret;
}

static int fabric_down(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL;
    int opt, stopped = 0, killed = 0, left, removed = 0, emulated;
    pidlist_t l;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "d:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'd':
            dir = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (dir == NULL || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (pidlist_read(dir, &l) != 0) {
        fprintf(stderr, "incoll fabric down: cannot read %s: %s\n", dir,
                strerror(errno));
        return 1;
    }
    left = stop_daemons(&l, 2000, &stopped, &killed);
    pidlist_free(&l);
    if (left) {
        fprintf(stderr,
                "incoll fabric down: %d daemon%s in %s survived "
                "SIGKILL\n",
                left, left == 1 ? "" : "s", dir);
        return 1;
    }
    emulated = emu_present(dir);
    if (emulated && emu_destroy(dir, &removed) != INCOLL_OK) {
        fprintf(stderr,
                "incoll fabric down: cannot remove the emulated "
                "fabric of %s (see above)\n",
                dir);
        return 1;
    }
    if (stopped + killed == 0)
        printf("fabric down in %s: nothing was running", dir);
    else if (killed)
        printf("fabric down in %s: stopped %d an%s (%d with SIGKILL)", dir,
               stopped + killed, stopped + killed == 1 ? "" : "s", killed);
    else
        printf("fabric down in %s: stopped %d an%s", dir, stopped,
               stopped == 1 ? "" : "s");
    if (emulated)
        printf("; removed %d network namespace%s", removed,
               removed == 1 ? "" : "s");
    printf("\n");
    return 0;
}

int cmd_fabric(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "up") == 0)
        return fabric_up(argc - 1, argv + 1);
    if (strcmp(argv[1], "down") == 0)
        return fabric_down(argc - 1, argv + 1);
    fprintf(stderr, "incoll fabric: unknown subcommand '%s' (have: up, down)\n",
            argv[1]);
    return 2;
}
