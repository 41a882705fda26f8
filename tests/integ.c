/* Support code shared by the integration tests: see integ.h. */
#include "integ.h"

#include "incoll.h"
#include "common/clock.h"
#include "fabric/fabric.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *progdir(void)
{
    const char *d = getenv("INCOLL_TEST_PROGDIR");
    return d && *d ? d : "build/tests";
}

int proc_start(proc_t *p, int timeout_s, const char *fmt, ...)
{
    char cmd[4096];
    int pipefd[2];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    memset(p, 0, sizeof(*p));
    p->out = calloc(1, OUT_MAX + 1);
    if (p->out == NULL || pipe2(pipefd, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    p->pid = fork();
    if (p->pid < 0)
        return -1;
    if (p->pid == 0) {
        char line[4200];
        /* Its own group, so a timeout can kill everything it started; and
         * it dies with the test (the runner's time limit kills the test's
         * group, not this one). "exec" makes the command itself, not sh,
         * the process that inherits this. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        snprintf(line, sizeof(line), "exec %s", cmd);
        execl("/bin/sh", "sh", "-c", line, (char *)NULL);
        _exit(127);
    }
    setpgid(p->pid, p->pid);
    close(pipefd[1]);
    p->fd = pipefd[0];
    p->deadline = now_s() + timeout_s;
    return 0;
}

int proc_wait(proc_t *p)
{
    int status = 0, timed_out = 0;

    for (;;) {
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        double left = p->deadline - now_s();
        char buf[4096];
        ssize_t n;
        if (left <= 0) {
            timed_out = 1;
            kill(-p->pid, SIGKILL);
            break;
        }
        if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        n = read(p->fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        if (p->len + (size_t)n > OUT_MAX)
            n = (ssize_t)(OUT_MAX - p->len);
        memcpy(p->out + p->len, buf, (size_t)n);
        p->len += (size_t)n;
        p->out[p->len] = '\0';
    }
    close(p->fd);
    waitpid(p->pid, &status, 0);
    if (timed_out)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_cmd(char **out_p, int timeout_s, const char *fmt, ...)
{
    char cmd[4096];
    proc_t p;
    va_list ap;
    int rc;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (proc_start(&p, timeout_s, "%s", cmd) != 0) {
        free(p.out);
        *out_p = strdup("(could not start)");
        return -1;
    }
    rc = proc_wait(&p);
    *out_p = p.out;
    return rc;
}

int run_cmd_file(const char *out_path, int timeout_s, const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    pid_t pid;
    int status = 0;
    double deadline;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        setpgid(0, 0);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    deadline = now_s() + timeout_s;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (now_s() > deadline) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(20000);
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
void show_tail(const char *path)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "tail -n 25 '%s' >&2", path);
    if (system(cmd) != 0)
        fprintf(stderr, "    (no output in %s)\n", path);
}

int file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int found = 0;
    if (f == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

int assign_host_ports(const char *dir)
{
    char path[PATH_MAX + 16], err[256];
    fabric_conf_t conf;
    int *fds, ret = 0;

    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "    %s\n", err);
        return -1;
    }
    fds = calloc((size_t)conf.nhosts, sizeof(int));
    for (int r = 0; fds && r < conf.nhosts; r++) {
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        fds[r] = -1;
        if (conf.hosts[r].port != 0)
            continue;
        fds[r] = socket(AF_INET, SOCK_DGRAM, 0);
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr =
            htonl(conf.hosts[r].ip ? conf.hosts[r].ip : INADDR_LOOPBACK);
        if (fds[r] < 0 ||
            bind(fds[r], (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            getsockname(fds[r], (struct sockaddr *)&sa, &sl) != 0) {
            ret = -1;
            break;
        }
        conf.hosts[r].port = ntohs(sa.sin_port);
    }
    if (fds == NULL)
        ret = -1;
    for (int r = 0; fds && r < conf.nhosts; r++)
        if (fds[r] >= 0)
            close(fds[r]);
    free(fds);
    if (ret == 0 && fabric_conf_save(&conf, path) != INCOLL_OK)
        ret = -1;
    fabric_conf_free(&conf);
    return ret;
}

int have_fabric_binaries(const char *prog)
{
    char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];
    snprintf(a, sizeof(a), "%s/incoll", test_bindir());
    snprintf(b, sizeof(b), "%s/incoll-agg", test_bindir());
    snprintf(c, sizeof(c), "%s/%s", progdir(), prog);
    return access(a, X_OK) == 0 && access(b, X_OK) == 0 && access(c, X_OK) == 0;
}

int free_tcp_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;
    sa.sin_addr.s_addr = htonl(0x7f000001u);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

int run_fabric_check(const char *prog, const char *dirtag, const char *jobtag,
                     int n, int k, int keep_port0, const char *env,
                     const char *args, char *out, size_t outlen)
{
    static int seq;
    char dir[1024];
    int ret;

    snprintf(dir, sizeof(dir), "%.900s/%s%d", test_tmpdir(), dirtag, seq++);
    snprintf(out, outlen, "%s.txt", dir);
    if (test_fabric_up(dir, n, k) != 0) {
        test_fabric_down(dir);
        return -1;
    }
    if (!keep_port0 && assign_host_ports(dir) != 0) {
        fprintf(stderr, "    could not give the hosts ports in %s\n", dir);
        ret = -1;
    } else {
        /* A distinct INCOLL_JOB per run: jobs sharing ANs one after another
         * must differ (the ANs keep slot state). */
        ret = run_cmd_file(out, 280,
                           "env INCOLL_JOB=%s-%d-%ld %s '%s/incoll' run -n %d "
                           "--fabric '%s' --timeout 240 -- '%s/%s' %s",
                           jobtag, seq, (long)getpid(), env ? env : "",
                           test_bindir(), n, dir, progdir(), prog,
                           args ? args : "");
    }
    test_fabric_down(dir);
    return ret;
}

void test_install_vars(const char *dest, char *vars, size_t len, char *libdir)
{
    char stamp[PATH_MAX + 16], lib[PATH_MAX] = "/usr/lib/x86_64-linux-gnu",
                               exec[PATH_MAX] = "/usr/lib";
    char *flags, *dirs, *p;

    snprintf(stamp, sizeof(stamp), "%.*s/../.flags", PATH_MAX - 16,
             test_bindir());
    flags = slurp(stamp);
    snprintf(stamp, sizeof(stamp), "%.*s/../.dirs", PATH_MAX - 16,
             test_bindir());
    dirs = slurp(stamp);
    if (dirs && (p = strstr(dirs, "libdir=")) != NULL)
        sscanf(p + 7, "%4095s", lib);
    if (dirs && (p = strstr(dirs, "libexecdir=")) != NULL)
        sscanf(p + 11, "%4095s", exec);
    snprintf(vars, len,
             "DESTDIR='%s' prefix=/usr libdir='%s' libexecdir='%s'%s", dest,
             lib, exec,
             getenv("WERROR") == NULL && flags && strstr(flags, " -Werror ")
                 ? " WERROR=1"
                 : "");
    if (libdir)
        snprintf(libdir, PATH_MAX, "%s", lib);
    free(flags);
    free(dirs);
}

int test_fabric_up(const char *dir, int hosts, int radix)
{
    fabric_spec_t spec;

    fabric_spec_default(&spec);
    spec.dir = dir;
    spec.bindir = test_bindir();
    spec.hosts = hosts;
    spec.radix = radix;
    spec.quiet = 1;
    return fabric_up(&spec) == 0 ? 0 : -1;
}

void test_fabric_down(const char *dir)
{
    if (fabric_stop(dir, 1) != 0)
        fprintf(stderr, "    could not stop the fabric of %s\n", dir);
}

int an_counts(const char *dir, const char *an, uint64_t *contribs_p,
              uint64_t *reductions_p)
{
    char *text = NULL;
    int ret = -1;
    if (run_cmd(&text, 30, "'%s/incoll' stat --fabric '%s'", test_bindir(),
                dir) == 0 &&
        stat_get(text, an, "contribs_accepted", contribs_p) == 0 &&
        stat_get(text, an, "reductions", reductions_p) == 0)
        ret = 0;
    free(text);
    return ret;
}

int stat_get(const char *out, const char *an, const char *key, uint64_t *v)
{
    char prefix[64], pat[64];
    const char *line = out;

    snprintf(prefix, sizeof(prefix), "an=%s ", an);
    snprintf(pat, sizeof(pat), " %s=", key);
    while (line && *line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (strncmp(line, prefix, strlen(prefix)) == 0) {
            const char *k = strstr(line, pat);
            if (k == NULL || (size_t)(k - line) > len)
                return -1;
            *v = strtoull(k + strlen(pat), NULL, 10);
            return 0;
        }
        line = eol ? eol + 1 : NULL;
    }
    return -1;
}

int load_conf(const char *dir, fabric_conf_t *conf)
{
    char path[PATH_MAX], err[512];
    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    if (fabric_conf_load(path, conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "    %s\n", err);
        return -1;
    }
    return 0;
}

#define MAX_PROCS 128

/* Everything spawn() and track_pid() were given, for stop_all(). */
static pid_t started[MAX_PROCS];
static int nstarted;

void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void track_pid(pid_t pid)
{
    if (pid > 0 && nstarted < MAX_PROCS)
        started[nstarted++] = pid;
}

pid_t spawn(const char *logpath, char **argv, char **env)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        for (int i = 0; env && env[i]; i++)
            putenv(env[i]);
        execv(argv[0], argv);
        _exit(127);
    }
    track_pid(pid);
    return pid;
}

int wait_pid(pid_t pid, double timeout_s)
{
    double end = now_s() + timeout_s;
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            for (int i = 0; i < nstarted; i++)
                if (started[i] == pid)
                    started[i] = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
        }
        if (r < 0)
            return -2;
        if (now_s() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            for (int i = 0; i < nstarted; i++)
                if (started[i] == pid)
                    started[i] = 0;
            return -1;
        }
        sleep_s(0.02);
    }
}

void stop_all(void)
{
    for (int i = 0; i < nstarted; i++)
        if (started[i] > 0)
            kill(started[i], SIGTERM);
    for (int i = 0; i < nstarted; i++)
        if (started[i] > 0)
            wait_pid(started[i], 3);
    nstarted = 0;
}

char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long len;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0) {
        if (f)
            fclose(f);
        return calloc(1, 1);
    }
    rewind(f);
    buf = calloc(1, (size_t)len + 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len)
        buf[0] = '\0';
    fclose(f);
    return buf ? buf : calloc(1, 1);
}

/* sh() and sh_in(): the command grouped, so that the redirection takes
 * all of its output. */
static int vsh(const char *dir, const char *out, const char *fmt, va_list ap)
{
    char cmd[8192];
    int n = 0, m, rc;

    if (dir)
        n = snprintf(cmd, sizeof(cmd), "cd '%s' && ", dir);
    n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, "{ ");
    m = vsnprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, ap);
    if (m < 0 || (size_t)(n + m) >= sizeof(cmd) - PATH_MAX - 32)
        return -1;
    n += m;
    snprintf(cmd + n, sizeof(cmd) - (size_t)n, "; } >'%s' 2>&1 </dev/null",
             out);
    rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

int sh(const char *out, const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = vsh(NULL, out, fmt, ap);
    va_end(ap);
    return rc;
}

int sh_in(const char *dir, const char *out, const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = vsh(dir, out, fmt, ap);
    va_end(ap);
    return rc;
}

unsigned long long streamed_in(const char *path)
{
    char *text = slurp(path);
    unsigned long long sum = 0, n;
    for (char *p = text; p && (p = strstr(p, "stream: group ")) != NULL; p++)
        if (sscanf(p, "stream: group %*u: %llu of", &n) == 1)
            sum += n;
    free(text);
    return sum;
}

incoll_status_t init_captured(unsigned major, unsigned minor,
                              const incoll_init_params_t *p, char *buf,
                              size_t len)
{
    char path[] = "/tmp/incoll-init-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    incoll_ctx_h ctx = NULL;
    incoll_status_t status;
    ssize_t n;

    buf[0] = '\0';
    if (fd < 0 || saved < 0)
        return INCOLL_ERR_IO;
    unlink(path);
    fflush(stderr);
    dup2(fd, 2);
    status = incoll_init_version(major, minor, p, &ctx);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (status == INCOLL_OK)
        incoll_finalize(ctx);
    n = pread(fd, buf, len - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    return status;
}
