/*
 * The emulated fabric: network namespaces, veth pairs, routes and tbf
 * shapers made with iproute2. See emu.h for the layout and the rules that
 * keep it self-contained and removable.
 */
#include "fabric/emu.h"

#include "fabric/daemon.h"

#include "common/log.h"
#include "common/clock.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EMU_NET 0x0a4d0000u /* 10.77.0.0/16: only inside our namespaces */
#define NETNS_DIR "/run/netns"
#define KILL_GRACE_MS 2000

/* ---- small helpers ---------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        {
            size_t ncap = b->cap ? 2 * b->cap : 4096;
            char *ns;
            while (ncap - b->len <= (size_t)n)
                ncap *= 2;
            ns = realloc(b->s, ncap);
            if (ns == NULL) {
                b->oom = 1;
                return;
            }
            b->s = ns;
            b->cap = ncap;
        }
    }
}

static void sb_reset(sbuf_t *b)
{
    b->len = 0;
    if (b->s)
        b->s[0] = '\0';
}

static void sb_free(sbuf_t *b)
{
    free(b->s);
    memset(b, 0, sizeof(*b));
}

static const char *ip4_str(uint32_t ip, char *buf)
{
    struct in_addr in = {.s_addr = htonl(ip)};
    inet_ntop(AF_INET, &in, buf, INET_ADDRSTRLEN);
    return buf;
}

/* Path of an iproute2 tool; root's PATH usually has sbin, a user's not. */
static const char *tool_path(const char *tool)
{
    static char buf[2][64];
    static const char *dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
    int slot = strcmp(tool, "ip") == 0 ? 0 : 1;
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(buf[slot], sizeof(buf[slot]), "%s/%s", dirs[i], tool);
        if (access(buf[slot], X_OK) == 0)
            return buf[slot];
    }
    return NULL;
}

/*
 * Runs tool (ip or tc) with args (NULL-terminated, without argv[0]),
 * feeding input (may be NULL) on its stdin. Its stdout and stderr go to
 * out (truncated to outlen). Returns its exit status, or -1 if it could
 * not run.
 */
static int run_tool(const char *tool, const char *const *args,
                    const char *input, char *out, size_t outlen)
{
    const char *path = tool_path(tool);
    const char *argv[32];
    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, st, n = 0;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    size_t got = 0;
    pid_t pid;

    if (out && outlen)
        out[0] = '\0';
    if (path == NULL) {
        if (out)
            snprintf(out, outlen, "%s: not found (install iproute2)", tool);
        return -1;
    }
    argv[n++] = tool;
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
        if (out)
            snprintf(out, outlen, "pipe: %s", strerror(errno));
        goto err_close;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        if (out)
            snprintf(out, outlen, "fork: %s", strerror(errno));
        goto err_close;
    }
    if (pid == 0) {
        dup2(in_pipe[0], 0);
        dup2(out_pipe[1], 1);
        dup2(out_pipe[1], 2);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    sigaction(SIGPIPE, &ign, &old);
    if (input) {
        size_t len = strlen(input), off = 0;
        while (off < len) {
            ssize_t w = write(in_pipe[1], input + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    }
    close(in_pipe[1]);
    for (;;) {
        char tmp[1024];
        ssize_t r = read(out_pipe[0], tmp, sizeof(tmp));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (out && got + 1 < outlen) {
            size_t c =
                (size_t)r < outlen - 1 - got ? (size_t)r : outlen - 1 - got;
            memcpy(out + got, tmp, c);
            got += c;
            out[got] = '\0';
        }
    }
    close(out_pipe[0]);
    sigaction(SIGPIPE, &old, NULL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (out) {
        /* One line in logs: fold newlines. */
        for (char *p = out; *p; p++)
            if (*p == '\n' && p[1])
                *p = ';';
        if (got && out[got - 1] == '\n')
            out[got - 1] = '\0';
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);

err_close:
    for (int i = 0; i < 2; i++) {
        if (in_pipe[i] >= 0)
            close(in_pipe[i]);
        if (out_pipe[i] >= 0)
            close(out_pipe[i]);
    }
    return -1;
}

/* Runs a batch of commands with `tool [-n ns] -batch -`; logs failures. */
static int run_batch(const char *tool, const char *ns, int force,
                     const char *batch)
{
    const char *args[8];
    char out[2048];
    int n = 0, rc;

    if (ns) {
        args[n++] = "-n";
        args[n++] = ns;
    }
    if (force)
        args[n++] = "-force";
    args[n++] = "-batch";
    args[n++] = "-";
    args[n] = NULL;
    rc = run_tool(tool, args, batch, out, sizeof(out));
    if (rc != 0 && !force)
        incoll_error("emu: %s%s%s -batch failed (exit %d): %s", tool,
                     ns ? " -n " : "", ns ? ns : "", rc, out);
    return rc;
}

/* ---- namespaces ------------------------------------------------------- */

int emu_netns_enter(const char *name)
{
    char path[PATH_MAX];
    int fd, ret;

    snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ret = setns(fd, CLONE_NEWNET);
    {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return ret;
}

int emu_netns_push(const char *name, int *saved_fd_p)
{
    int saved = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (saved < 0) {
        incoll_error("emu: cannot open /proc/self/ns/net: %s", strerror(errno));
        return -1;
    }
    if (emu_netns_enter(name) != 0) {
        incoll_error("emu: cannot enter network namespace %s: %s", name,
                     strerror(errno));
        close(saved);
        return -1;
    }
    *saved_fd_p = saved;
    return 0;
}

void emu_netns_leave(int saved_fd)
{
    if (saved_fd < 0)
        return;
    if (setns(saved_fd, CLONE_NEWNET) != 0)
        incoll_error("emu: cannot return to the original network namespace: %s",
                     strerror(errno));
    close(saved_fd);
}

/* Writes value to a sysctl file of the current namespace. */
static int write_sysctl(const char *path, const char *value)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;
    if (fd < 0)
        return -1;
    if (write(fd, value, strlen(value)) != (ssize_t)strlen(value))
        ret = -1;
    close(fd);
    return ret;
}

/* Sets the namespace up as a host or a router: no IPv6 (nothing to
 * autoconfigure or solicit), no reverse-path filter, forwarding on
 * switches only. */
static int netns_sysctls(const char *name, int router)
{
    int saved;
    if (emu_netns_push(name, &saved) != 0)
        return -1;
    write_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
    write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
    write_sysctl("/proc/sys/net/ipv4/conf/all/rp_filter", "0");
    write_sysctl("/proc/sys/net/ipv4/conf/default/rp_filter", "0");
    write_sysctl("/proc/sys/net/ipv4/conf/all/send_redirects", "0");
    write_sysctl("/proc/sys/net/ipv4/conf/default/send_redirects", "0");
    if (write_sysctl("/proc/sys/net/ipv4/ip_forward", router ? "1" : "0") !=
            0 &&
        router) {
        incoll_error("emu: %s: cannot enable ip forwarding: %s", name,
                     strerror(errno));
        emu_netns_leave(saved);
        return -1;
    }
    emu_netns_leave(saved);
    return 0;
}

/* Identity (device, inode) of a namespace file. */
static int netns_id(const char *path, dev_t *dev_p, ino_t *ino_p)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    *dev_p = st.st_dev;
    *ino_p = st.st_ino;
    return 0;
}

/*
 * Signals every process inside the namespaces named (nns entries) except
 * ourselves; returns how many were signalled.
 */
static int signal_netns_procs(char (*names)[FABRIC_NETNS_MAX], int nns, int sig)
{
    dev_t *devs = calloc((size_t)nns + 1, sizeof(*devs));
    ino_t *inos = calloc((size_t)nns + 1, sizeof(*inos));
    int *ok = calloc((size_t)nns + 1, sizeof(*ok));
    int count = 0, any = 0;
    struct dirent *de;
    DIR *d;

    if (!devs || !inos || !ok)
        goto out;
    for (int i = 0; i < nns; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), NETNS_DIR "/%s", names[i]);
        ok[i] = netns_id(path, &devs[i], &inos[i]) == 0;
        any |= ok[i];
    }
    if (!any)
        goto out;
    d = opendir("/proc");
    if (d == NULL)
        goto out;
    while ((de = readdir(d)) != NULL) {
        char path[300];
        dev_t dev;
        ino_t ino;
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid())
            continue;
        snprintf(path, sizeof(path), "/proc/%ld/ns/net", pid);
        if (netns_id(path, &dev, &ino) != 0)
            continue;
        for (int i = 0; i < nns; i++) {
            if (ok[i] && devs[i] == dev && inos[i] == ino) {
                if (kill((pid_t)pid, sig) == 0)
                    count++;
                break;
            }
        }
    }
    closedir(d);
out:
    free(devs);
    free(inos);
    free(ok);
    return count;
}

/* Collects the namespaces in /run/netns whose name starts with
 * "<prefix>-" into *names_p (caller frees). */
static int list_netns(const char *prefix, char (**names_p)[FABRIC_NETNS_MAX])
{
    char(*names)[FABRIC_NETNS_MAX] = NULL;
    size_t plen = strlen(prefix);
    int n = 0, cap = 0;
    struct dirent *de;
    DIR *d = opendir(NETNS_DIR);

    *names_p = NULL;
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, prefix, plen) != 0 || de->d_name[plen] != '-' ||
            strlen(de->d_name) >= FABRIC_NETNS_MAX)
            continue;
        if (n == cap) {
            int ncap = cap ? 2 * cap : 32;
            void *nn = realloc(names, (size_t)ncap * sizeof(*names));
            if (nn == NULL)
                break;
            names = nn;
            cap = ncap;
        }
        memcpy(names[n++], de->d_name, strlen(de->d_name) + 1);
    }
    closedir(d);
    *names_p = names;
    return n;
}

int emu_count_netns(const char *prefix)
{
    char(*names)[FABRIC_NETNS_MAX];
    int n = list_netns(prefix, &names);
    free(names);
    return n;
}

/*
 * Stops every process in the namespaces and deletes them. Returns the
 * number of namespaces that remain afterwards (0 on success).
 */
static int remove_netns(char (*names)[FABRIC_NETNS_MAX], int n)
{
    sbuf_t b = {0};
    int left = 0;
    uint64_t deadline;

    if (n == 0)
        return 0;
    if (signal_netns_procs(names, n, SIGTERM) > 0) {
        deadline = now_ms() + KILL_GRACE_MS;
        while (signal_netns_procs(names, n, 0) > 0 && now_ms() < deadline)
            fabric_sleep_ms(20);
        if (signal_netns_procs(names, n, SIGKILL) > 0) {
            deadline = now_ms() + 1000;
            while (signal_netns_procs(names, n, 0) > 0 && now_ms() < deadline)
                fabric_sleep_ms(20);
        }
    }
    for (int i = 0; i < n; i++)
        sb_printf(&b, "netns del %s\n", names[i]);
    if (!b.oom)
        run_batch("ip", NULL, 1, b.s);
    sb_free(&b);
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), NETNS_DIR "/%s", names[i]);
        if (access(path, F_OK) == 0) {
            /* `ip netns del` refused: do what it does ourselves. */
            umount2(path, MNT_DETACH);
            if (unlink(path) != 0 && errno != ENOENT) {
                incoll_error("emu: cannot remove namespace %s: %s", names[i],
                             strerror(errno));
                left++;
            }
        }
    }
    return left;
}

/* ---- state file and registry ----------------------------------------- */

void emu_state_free(emu_state_t *st)
{
    free(st->netns);
    memset(st, 0, sizeof(*st));
}

static void state_path(const char *dir, char *buf, size_t len)
{
    snprintf(buf, len, "%s/" EMU_STATE_FILE, dir);
}

int emu_present(const char *dir)
{
    char path[PATH_MAX + 32];
    state_path(dir, path, sizeof(path));
    return access(path, F_OK) == 0;
}

incoll_status_t emu_state_load(const char *dir, emu_state_t *st)
{
    char path[PATH_MAX + 32], line[512];
    int cap = 0;
    FILE *f;

    memset(st, 0, sizeof(*st));
    state_path(dir, path, sizeof(path));
    f = fopen(path, "r");
    if (f == NULL)
        return INCOLL_ERR_NOT_FOUND;
    while (fgets(line, sizeof(line), f)) {
        char name[FABRIC_NETNS_MAX + 1];
        unsigned long long rate, uplink;
        int mtu;
        char prefix[EMU_PREFIX_MAX + 1];
        if (sscanf(line, "emu prefix=%16s rate=%llu uplink=%llu mtu=%d", prefix,
                   &rate, &uplink, &mtu) == 4) {
            if (strlen(prefix) >= EMU_PREFIX_MAX)
                continue;
            memcpy(st->prefix, prefix, strlen(prefix) + 1);
            st->link_rate = rate;
            st->uplink_rate = uplink;
            st->mtu = mtu;
        } else if (sscanf(line, "netns name=%48s", name) == 1 &&
                   strlen(name) < FABRIC_NETNS_MAX) {
            if (st->nnetns == cap) {
                int ncap = cap ? 2 * cap : 32;
                void *nn =
                    realloc(st->netns, (size_t)ncap * sizeof(*st->netns));
                if (nn == NULL) {
                    fclose(f);
                    emu_state_free(st);
                    return INCOLL_ERR_NO_MEMORY;
                }
                st->netns = nn;
                cap = ncap;
            }
            memcpy(st->netns[st->nnetns++], name, strlen(name) + 1);
        }
    }
    fclose(f);
    if (st->prefix[0] == '\0') {
        emu_state_free(st);
        return INCOLL_ERR_CONFIG;
    }
    return INCOLL_OK;
}

static void registry_path(const char *prefix, char *buf, size_t len)
{
    snprintf(buf, len, EMU_REGISTRY_DIR "/%s", prefix);
}

/* Removes the namespaces of prefix (listed and found) and its registry
 * entry. Returns how many namespaces remain. */
static int remove_prefix(const char *prefix, char (*listed)[FABRIC_NETNS_MAX],
                         int nlisted, int *removed_p)
{
    char(*found)[FABRIC_NETNS_MAX] = NULL, (*all)[FABRIC_NETNS_MAX];
    int nfound = list_netns(prefix, &found), n = 0, left;
    char reg[PATH_MAX];

    all = calloc((size_t)(nlisted + nfound) + 1, sizeof(*all));
    if (all == NULL) {
        free(found);
        return nlisted + nfound;
    }
    /* The recorded ones that exist, then any the record missed. */
    for (int i = 0; i < nlisted; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), NETNS_DIR "/%s", listed[i]);
        if (access(path, F_OK) == 0)
            snprintf(all[n++], FABRIC_NETNS_MAX, "%s", listed[i]);
    }
    for (int i = 0; i < nfound; i++) {
        int dup = 0;
        for (int j = 0; j < n && !dup; j++)
            dup = strcmp(all[j], found[i]) == 0;
        if (!dup)
            snprintf(all[n++], FABRIC_NETNS_MAX, "%s", found[i]);
    }
    left = remove_netns(all, n);
    if (removed_p)
        *removed_p = n - left;
    free(all);
    free(found);
    if (left == 0) {
        registry_path(prefix, reg, sizeof(reg));
        unlink(reg);
    }
    return left;
}

incoll_status_t emu_destroy(const char *dir, int *removed_p)
{
    emu_state_t st;
    char path[PATH_MAX + 32];
    incoll_status_t status;
    int left;

    if (removed_p)
        *removed_p = 0;
    status = emu_state_load(dir, &st);
    if (status == INCOLL_ERR_NOT_FOUND)
        return INCOLL_OK;
    if (status != INCOLL_OK) {
        incoll_error("emu: %s/" EMU_STATE_FILE " is unreadable; remove the "
                     "namespaces by hand (`ip netns list`)",
                     dir);
        return status;
    }
    left = remove_prefix(st.prefix, st.netns, st.nnetns, removed_p);
    if (left) {
        incoll_error("emu: %d namespace%s of fabric %s could not be removed",
                     left, left == 1 ? "" : "s", st.prefix);
        emu_state_free(&st);
        return INCOLL_ERR_IO;
    }
    state_path(dir, path, sizeof(path));
    unlink(path);
    emu_state_free(&st);
    return INCOLL_OK;
}

int emu_sweep_stale(void)
{
    struct dirent *de;
    DIR *d = opendir(EMU_REGISTRY_DIR);
    int cleaned = 0;

    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        char reg[PATH_MAX], dir[PATH_MAX] = "";
        emu_state_t st;
        int alive = 0;
        FILE *f;

        if (strncmp(de->d_name, "inc", 3) != 0 ||
            strlen(de->d_name) >= EMU_PREFIX_MAX)
            continue;
        registry_path(de->d_name, reg, sizeof(reg));
        f = fopen(reg, "r");
        if (f == NULL)
            continue;
        if (fgets(dir, sizeof(dir), f) != NULL)
            dir[strcspn(dir, "\n")] = '\0';
        fclose(f);
        if (dir[0] && emu_state_load(dir, &st) == INCOLL_OK) {
            alive = strcmp(st.prefix, de->d_name) == 0;
            emu_state_free(&st);
        }
        if (alive)
            continue;
        if (emu_count_netns(de->d_name) > 0)
            incoll_warn("emu: removing stale emulated fabric %s (its directory "
                        "%s no longer records it)",
                        de->d_name, dir[0] ? dir : "?");
        if (remove_prefix(de->d_name, NULL, 0, NULL) == 0)
            cleaned++;
    }
    closedir(d);
    return cleaned;
}

/* ---- rates ------------------------------------------------------------ */

void emu_params_default(emu_params_t *p)
{
    memset(p, 0, sizeof(*p));
    p->link_rate = 0;
    p->uplink_rate = 0;
    p->mtu = EMU_MTU_DEFAULT;
}

uint64_t emu_default_link_rate(int nhosts)
{
    uint64_t r =
        EMU_AGGREGATE_RATE_DEFAULT / (uint64_t)(nhosts > 0 ? nhosts : 1);
    r -= r % 1000000; /* whole Mbit/s */
    return r < 10000000 ? 10000000 : r > 1000000000 ? 1000000000 : r;
}

int emu_parse_rate(const char *text, uint64_t *bps_p)
{
    char *end;
    double v;
    double mult = 1;

    if (text == NULL || *text == '\0')
        return -1;
    errno = 0;
    v = strtod(text, &end);
    if (errno || end == text || !(v > 0))
        return -1;
    switch (tolower((unsigned char)*end)) {
    case 'k':
        mult = 1e3;
        end++;
        break;
    case 'm':
        mult = 1e6;
        end++;
        break;
    case 'g':
        mult = 1e9;
        end++;
        break;
    default:
        break;
    }
    if (strcasecmp(end, "bit") == 0 || strcasecmp(end, "bps") == 0 ||
        strcasecmp(end, "bit/s") == 0 || strcasecmp(end, "b") == 0)
        end += strlen(end);
    if (*end != '\0')
        return -1;
    v *= mult;
    if (v < 1e5 || v > 1e11) /* 100 kbit/s .. 100 Gbit/s */
        return -1;
    *bps_p = (uint64_t)llround(v);
    return 0;
}

const char *emu_rate_str(uint64_t bps, char *buf, size_t len)
{
    if (bps >= 1000000000ull)
        snprintf(buf, len, "%g Gbit/s", (double)bps / 1e9);
    else if (bps >= 1000000ull)
        snprintf(buf, len, "%g Mbit/s", (double)bps / 1e6);
    else
        snprintf(buf, len, "%g kbit/s", (double)bps / 1e3);
    return buf;
}

int emu_usable(char *why, size_t len)
{
    struct stat st;
    if (geteuid() != 0) {
        snprintf(why, len,
                 "not root (network namespaces and tc need "
                 "CAP_SYS_ADMIN and CAP_NET_ADMIN)");
        return -1;
    }
    if (tool_path("ip") == NULL || tool_path("tc") == NULL) {
        snprintf(why, len, "ip or tc not found (apt-get install iproute2)");
        return -1;
    }
    if (stat("/proc/self/ns/net", &st) != 0) {
        snprintf(why, len, "this kernel has no network namespaces");
        return -1;
    }
    return 0;
}

/* ---- building --------------------------------------------------------- */

/* Node numbering: ANs 0..nans-1, then hosts nans..nans+nhosts-1. */
typedef struct {
    const fabric_conf_t *conf;
    int nnodes;
    int *parent;     /* node index or -1 */
    int *pos;        /* position among the parent's children (dnN) */
    uint64_t *below; /* hosts in the subtree */
} topo_t;

static void topo_free(topo_t *t)
{
    free(t->parent);
    free(t->pos);
    free(t->below);
}

static int topo_build(const fabric_conf_t *conf, topo_t *t)
{
    int nans = conf->nans;
    memset(t, 0, sizeof(*t));
    t->conf = conf;
    t->nnodes = nans + conf->nhosts;
    t->parent = calloc((size_t)t->nnodes, sizeof(int));
    t->pos = calloc((size_t)t->nnodes, sizeof(int));
    t->below = calloc((size_t)t->nnodes, sizeof(uint64_t));
    if (!t->parent || !t->pos || !t->below) {
        topo_free(t);
        return -1;
    }
    for (int i = 0; i < nans; i++)
        t->parent[i] = conf->ans[i].parent;
    for (int r = 0; r < conf->nhosts; r++)
        t->parent[nans + r] = conf->hosts[r].leaf;
    /* Children order is fabric_conf_children's: ANs, then hosts. */
    for (int a = 0; a < nans; a++) {
        int kinds[AGG_RADIX_MAX];
        int n = fabric_conf_children(conf, a, NULL, kinds, AGG_RADIX_MAX);
        for (int k = 0; k < n && k < AGG_RADIX_MAX; k++) {
            int node = kinds[k] >= 0 ? kinds[k] : nans + (-kinds[k] - 1);
            t->pos[node] = k;
        }
    }
    for (int r = 0; r < conf->nhosts; r++)
        for (int n = t->parent[nans + r]; n >= 0; n = t->parent[n])
            t->below[n]++;
    return 0;
}

/* Link of node n (to its parent): a /30. */
static uint32_t link_base(int n)
{
    return EMU_NET + 256u * (uint32_t)(1 + n / 64) + 4u * (uint32_t)(n % 64);
}

static uint32_t an_loopback(int a)
{
    return EMU_NET + (uint32_t)(a + 1);
}

/* The child of s whose subtree holds node d, or -1 if d is not below s. */
static int child_toward(const topo_t *t, int s, int d)
{
    while (d >= 0 && t->parent[d] != s)
        d = t->parent[d];
    return d;
}

static void ns_name(const char *prefix, const topo_t *t, int n, char *buf)
{
    const fabric_conf_t *conf = t->conf;
    if (n < conf->nans)
        snprintf(buf, FABRIC_NETNS_MAX, "%s-%s", prefix, conf->ans[n].name);
    else
        snprintf(buf, FABRIC_NETNS_MAX, "%s-h%d", prefix, n - conf->nans);
}

static void tbf_line(sbuf_t *b, const char *dev, uint64_t rate,
                     const emu_params_t *p)
{
    uint64_t bytes_per_s = rate / 8;
    /*
     * The bucket: 1 ms of tokens, at least two full frames so the timer's
     * slack between two frames costs no throughput. A token bucket shapes
     * the rate, not each packet's serialization delay: a packet that finds
     * tokens passes at memory speed (netem, which could add the delay, is
     * not available on every kernel). docs/benchmarks.md says what that
     * means for small messages.
     */
    uint64_t burst = bytes_per_s / 1000;
    uint64_t min_burst = 2 * ((uint64_t)p->mtu + 64);
    uint64_t limit = p->queue_bytes;
    if (burst < min_burst)
        burst = min_burst;
    if (limit == 0) {
        /* Deeper than any socket's send buffer (INCOLL_UDP_BUF, 8 MiB), so
         * a local sender blocks on its buffer instead of losing datagrams
         * in the shaper; forwarded traffic gets 100 ms at least. */
        limit = bytes_per_s / 10;
        if (limit < (16u << 20))
            limit = 16u << 20;
    }
    sb_printf(b,
              "qdisc replace dev %s root tbf rate %" PRIu64 "bit burst %" PRIu64
              " limit %" PRIu64 "\n",
              dev, rate, burst, limit);
}

/*
 * Multicast results (docs/multicast.md): each switch with hosts below
 * replicates a multicast datagram to all of them, as an Ethernet switch
 * floods it to its ports, in the kernel: 224.0.0.0/4 is routed out of its
 * first host link (the AN sends one datagram), and a tc filter on that
 * link's egress mirrors every multicast datagram to the other host links,
 * each through its own shaper. The hosts' kernels keep the addresses they
 * joined and drop the others. Removed with the namespaces.
 */
static int mcast_replication(const fabric_conf_t *conf, const topo_t *t,
                             char (*names)[FABRIC_NETNS_MAX])
{
    sbuf_t b = {0};
    int ret = 0;
    for (int n = 0; n < conf->nans && ret == 0; n++) {
        int first = -1;
        sb_reset(&b);
        for (int c = conf->nans; c < t->nnodes; c++) {
            if (t->parent[c] != n)
                continue;
            if (first < 0) {
                first = c;
                sb_printf(&b,
                          "qdisc add dev dn%d clsact\nfilter add dev dn%d "
                          "egress protocol ip prio 1 u32 match ip dst "
                          "224.0.0.0/4",
                          t->pos[c], t->pos[c]);
            } else
                sb_printf(&b, " action mirred egress mirror dev dn%d",
                          t->pos[c]);
        }
        if (first < 0)
            continue;
        sb_printf(&b, "\n");
        if (b.oom || run_batch("tc", names[n], 0, b.s) != 0)
            ret = -1;
        sb_reset(&b);
        sb_printf(&b, "route add 224.0.0.0/4 dev dn%d\n", t->pos[first]);
        if (ret == 0 && (b.oom || run_batch("ip", names[n], 0, b.s) != 0))
            ret = -1;
    }
    if (ret != 0)
        incoll_error("emu: cannot set up multicast replication");
    sb_free(&b);
    return ret;
}

/* Picks a prefix no namespace and no registry entry uses yet. */
static void pick_prefix(char *prefix)
{
    for (;;) {
        char reg[PATH_MAX];
        snprintf(prefix, EMU_PREFIX_MAX, "inc%06x",
                 (unsigned)(fabric_random64() & 0xffffff));
        registry_path(prefix, reg, sizeof(reg));
        if (emu_count_netns(prefix) == 0 && access(reg, F_OK) != 0)
            return;
    }
}

/* Records the fabric (dir's state file and the registry) before it is
 * made: a crash from then on leaves a findable trail. 0, or -1 (said). */
static int emu_record(const char *dir, const char *prefix,
                      const emu_params_t *p, const topo_t *t,
                      char (*names)[FABRIC_NETNS_MAX])
{
    char path[PATH_MAX + 32], reg[PATH_MAX];
    FILE *f;

    state_path(dir, path, sizeof(path));
    f = fopen(path, "w");
    if (f == NULL) {
        incoll_error("emu: cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "# incoll emulated fabric: what `incoll fabric up --emulate` "
               "made; `incoll fabric down` removes it\n");
    fprintf(f, "emu prefix=%s rate=%" PRIu64 " uplink=%" PRIu64 " mtu=%d\n",
            prefix, p->link_rate, p->uplink_rate, p->mtu);
    for (int n = 0; n < t->nnodes; n++)
        fprintf(f, "netns name=%s\n", names[n]);
    if (fclose(f) != 0) {
        incoll_error("emu: cannot write %s: %s", path, strerror(errno));
        unlink(path);
        return -1;
    }
    registry_path(prefix, reg, sizeof(reg));
    f = fopen(reg, "w");
    if (f == NULL || fprintf(f, "%s\n", dir) < 0 || fclose(f) != 0) {
        incoll_error("emu: cannot write %s: %s", reg, strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

/* Node n's addresses and routes, as one batch of `ip`. */
static void node_addrs(sbuf_t *b, const fabric_conf_t *conf, const topo_t *t,
                       int n)
{
    char a[INET_ADDRSTRLEN], b2[INET_ADDRSTRLEN];
    int is_an = n < conf->nans;

    sb_printf(b, "link set dev lo up\n");
    if (is_an)
        sb_printf(b, "addr add %s/32 dev lo\n", ip4_str(an_loopback(n), a));
    if (t->parent[n] >= 0)
        sb_printf(b, "addr add %s/30 dev uplink\nlink set dev uplink up\n",
                  ip4_str(link_base(n) + 2, a));
    for (int c = 0; c < t->nnodes; c++) {
        if (t->parent[c] != n)
            continue;
        sb_printf(b, "addr add %s/30 dev dn%d\nlink set dev dn%d up\n",
                  ip4_str(link_base(c) + 1, a), t->pos[c], t->pos[c]);
    }
    if (t->parent[n] >= 0)
        sb_printf(b, "route add 10.77.0.0/16 via %s dev uplink\n",
                  ip4_str(link_base(n) + 1, a));
    if (is_an) {
        for (int d = 0; d < t->nnodes; d++) {
            int c = d == n ? -1 : child_toward(t, n, d);
            if (c < 0)
                continue;
            ip4_str(link_base(c) + 2, b2);
            if (d < conf->nans)
                sb_printf(b, "route add %s/32 via %s dev dn%d\n",
                          ip4_str(an_loopback(d), a), b2, t->pos[c]);
            if (d != c)
                sb_printf(b, "route add %s/30 via %s dev dn%d\n",
                          ip4_str(link_base(d), a), b2, t->pos[c]);
        }
    }
}

/* The shapers of node n's links (both directions of every link are
 * some node's), as one batch of `tc`. */
static void node_shapers(sbuf_t *b, const fabric_conf_t *conf, const topo_t *t,
                         int n, const emu_params_t *p)
{
    if (t->parent[n] >= 0) {
        uint64_t rate = n >= conf->nans  ? p->link_rate
                        : p->uplink_rate ? p->uplink_rate
                                         : p->link_rate * t->below[n];
        tbf_line(b, "uplink", rate, p);
    }
    for (int c = 0; c < t->nnodes; c++) {
        char dev[16];
        uint64_t rate;
        if (t->parent[c] != n)
            continue;
        rate = c >= conf->nans  ? p->link_rate
               : p->uplink_rate ? p->uplink_rate
                                : p->link_rate * t->below[c];
        snprintf(dev, sizeof(dev), "dn%d", t->pos[c]);
        tbf_line(b, dev, rate, p);
    }
}

incoll_status_t emu_create(const char *dir_arg, fabric_conf_t *conf,
                           emu_params_t *params)
{
    char dir[PATH_MAX], why[256], prefix[EMU_PREFIX_MAX];
    char(*names)[FABRIC_NETNS_MAX] = NULL;
    sbuf_t b = {0};
    topo_t t;
    emu_params_t p = *params;
    incoll_status_t status = INCOLL_ERR_IO;

    if (emu_usable(why, sizeof(why)) != 0) {
        incoll_error("emu: cannot emulate a fabric: %s", why);
        return INCOLL_ERR_UNSUPPORTED;
    }
    if (p.mtu <= 0)
        p.mtu = EMU_MTU_DEFAULT;
    if (p.link_rate == 0)
        p.link_rate = emu_default_link_rate(conf->nhosts);
    params->link_rate = p.link_rate;
    params->mtu = p.mtu;
    if (conf->nans > 250 || conf->nans + conf->nhosts > 60 * 64) {
        incoll_error("emu: %d switches and %d hosts is more than the emulator "
                     "addresses (250 switches, 3840 nodes)",
                     conf->nans, conf->nhosts);
        return INCOLL_ERR_INVALID_ARG;
    }
    if (realpath(dir_arg, dir) == NULL) {
        incoll_error("emu: %s: %s", dir_arg, strerror(errno));
        return INCOLL_ERR_IO;
    }
    emu_sweep_stale();
    if (emu_present(dir)) {
        incoll_warn("emu: removing the stale emulated fabric recorded in %s",
                    dir);
        if (emu_destroy(dir, NULL) != INCOLL_OK)
            return INCOLL_ERR_IO;
    }
    if (topo_build(conf, &t) != 0)
        return INCOLL_ERR_NO_MEMORY;
    names = calloc((size_t)t.nnodes, sizeof(*names));
    if (names == NULL) {
        topo_free(&t);
        return INCOLL_ERR_NO_MEMORY;
    }
    if (fabric_mkdir_p(EMU_REGISTRY_DIR) != 0) {
        incoll_error("emu: cannot create " EMU_REGISTRY_DIR ": %s",
                     strerror(errno));
        goto out;
    }
    pick_prefix(prefix);
    for (int n = 0; n < t.nnodes; n++)
        ns_name(prefix, &t, n, names[n]);

    /* Fill in the conf: addresses, ports and namespaces. */
    for (int i = 0; i < conf->nans; i++) {
        conf->ans[i].addr = wire_ep(an_loopback(i), EMU_AN_PORT);
        snprintf(conf->ans[i].netns, FABRIC_NETNS_MAX, "%s", names[i]);
    }
    for (int r = 0; r < conf->nhosts; r++) {
        int n = conf->nans + r;
        conf->hosts[r].ip = link_base(n) + 2;
        conf->hosts[r].port = EMU_HOST_PORT;
        snprintf(conf->hosts[r].netns, FABRIC_NETNS_MAX, "%s", names[n]);
    }

    if (emu_record(dir, prefix, &p, &t, names) != 0)
        goto out;

    /* Namespaces. */
    for (int n = 0; n < t.nnodes; n++)
        sb_printf(&b, "netns add %s\n", names[n]);
    if (b.oom || run_batch("ip", NULL, 0, b.s) != 0)
        goto err_destroy;
    for (int n = 0; n < t.nnodes; n++)
        if (netns_sysctls(names[n], n < conf->nans) != 0)
            goto err_destroy;

    /* Links: created directly in their namespaces, never in ours. */
    sb_reset(&b);
    for (int n = 0; n < t.nnodes; n++) {
        if (t.parent[n] < 0)
            continue;
        sb_printf(&b,
                  "link add name uplink netns %s mtu %d type veth peer name "
                  "dn%d netns %s mtu %d\n",
                  names[n], p.mtu, t.pos[n], names[t.parent[n]], p.mtu);
    }
    if (b.oom || (b.len && run_batch("ip", NULL, 0, b.s) != 0))
        goto err_destroy;

    /* Addresses and routes, one batch per namespace. */
    for (int n = 0; n < t.nnodes; n++) {
        sb_reset(&b);
        node_addrs(&b, conf, &t, n);
        if (b.oom || run_batch("ip", names[n], 0, b.s) != 0)
            goto err_destroy;
    }

    /* Shapers: every direction of every link. */
    for (int n = 0; n < t.nnodes; n++) {
        sb_reset(&b);
        node_shapers(&b, conf, &t, n, &p);
        if (b.len && (b.oom || run_batch("tc", names[n], 0, b.s) != 0))
            goto err_destroy;
    }
    if (mcast_replication(conf, &t, names) != 0)
        goto err_destroy;
    status = INCOLL_OK;
    goto out;

err_destroy:
    emu_destroy(dir, NULL);
    for (int i = 0; i < conf->nans; i++)
        conf->ans[i].netns[0] = '\0';
    for (int r = 0; r < conf->nhosts; r++)
        conf->hosts[r].netns[0] = '\0';
out:
    sb_free(&b);
    free(names);
    topo_free(&t);
    return status;
}

int emu_mgr_an(const fabric_conf_t *conf)
{
    for (int i = 0; i < conf->nans; i++)
        if (conf->ans[i].parent < 0 && conf->ans[i].netns[0])
            return i;
    return -1;
}

/* ---- for launchers ---------------------------------------------------- */

const char *emu_ip_path(void)
{
    return tool_path("ip");
}
