/* Starting and watching a local fabric's daemons; see daemon.h. */
#include "fabric/daemon.h"

#include "common/clock.h"
#include "common/procstat.h"
#include "fabric/emu.h"
#include "fabric/mgr_tool.h"

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

void fabric_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int fabric_mkdir_p(const char *dir)
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

void fabric_detach(const char *log_path, int append)
{
    int null_fd = open("/dev/null", O_RDONLY);
    int log_fd = open(log_path,
                      O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
    setsid();
    if (null_fd >= 0)
        dup2(null_fd, 0);
    if (log_fd >= 0) {
        dup2(log_fd, 1);
        dup2(log_fd, 2);
    }
    /* Keep nothing of the caller's (a test runner's pipes, say). */
    close_range(3, ~0u, 0);
    signal(SIGHUP, SIG_IGN);
}

pid_t fabric_spawn(const char *netns, char *const argv[], const char *log_path,
                   int append)
{
    return fabric_spawn_on(netns, NULL, argv, log_path, append);
}

pid_t fabric_spawn_on(const char *netns, const cpu_set_t *cpus,
                      char *const argv[], const char *log_path, int append)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid != 0)
        return pid;
    fabric_detach(log_path, append);
    if (cpus && sched_setaffinity(0, sizeof(*cpus), cpus) != 0) {
        char list[256];
        fprintf(stderr, "incoll fabric: cannot run on CPUs %s: %s\n",
                fabric_cpus_str(cpus, list, sizeof(list)), strerror(errno));
        _exit(127);
    }
    if (netns && netns[0] && emu_netns_enter(netns) != 0) {
        fprintf(stderr,
                "incoll fabric: cannot enter network namespace %s: %s\n", netns,
                strerror(errno));
        _exit(127);
    }
    execv(argv[0], argv);
    fprintf(stderr, "incoll fabric: cannot run %s: %s\n", argv[0],
            strerror(errno));
    _exit(127);
}

const char *fabric_cpus_str(const cpu_set_t *set, char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && n < len; c++) {
        int e = c;
        if (!CPU_ISSET(c, set))
            continue;
        while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
            e++;
        n += (size_t)(e > c ? snprintf(buf + n, len - n, "%s%d-%d",
                                       n ? "," : "", c, e)
                            : snprintf(buf + n, len - n, "%s%d", n ? "," : "",
                                       c));
        c = e;
    }
    return buf;
}

int fabric_cpus_parse(const char *text, cpu_set_t *set, char *err, size_t len)
{
    cpu_set_t have;
    char list[256];
    const char *p = text;

    CPU_ZERO(set);
    if (sched_getaffinity(0, sizeof(have), &have) != 0)
        CPU_ZERO(&have);
    for (;;) {
        char *end;
        long lo, hi;
        errno = 0;
        lo = strtol(p, &end, 10);
        hi = lo;
        if (end != p && *end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
        }
        if (errno || end == p || !(*p >= '0' && *p <= '9') || lo < 0 ||
            hi < lo || hi >= CPU_SETSIZE || (*end != ',' && *end != 0)) {
            snprintf(err, len,
                     "bad CPU list '%s' (want CPUs as taskset -c takes "
                     "them: 1, 0-3, 0,2-3)",
                     text);
            return -1;
        }
        for (long c = lo; c <= hi; c++) {
            if (!CPU_ISSET((int)c, &have)) {
                snprintf(err, len,
                         "CPU list '%s': CPU %ld is not one this process may "
                         "run on (%s)",
                         text, c, fabric_cpus_str(&have, list, sizeof(list)));
                return -1;
            }
            CPU_SET((int)c, set);
        }
        if (*end == 0)
            return 0;
        p = end + 1;
    }
}

int fabric_write_file(const char *path, const char *text, mode_t mode)
{
    char tmp[PATH_MAX + 32];
    size_t len = strlen(text);
    int fd;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
        (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    if (write(fd, text, len) != (ssize_t)len || close(fd) != 0 ||
        rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int fabric_pidfile_write(const char *path, pid_t pid)
{
    char text[32];
    snprintf(text, sizeof(text), "%d\n", (int)pid);
    return fabric_write_file(path, text, 0644);
}

pid_t fabric_pidfile_read(const char *path)
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

int fabric_daemon_alive(pid_t pid)
{
    proc_stat_t st;

    if (proc_stat_read(pid, &st) != 0)
        return 0;
    if (strcmp(st.comm, "incoll-agg") != 0 &&
        strcmp(st.comm, "incoll-mgr") != 0)
        return 0;
    return st.state != 'Z' && st.state != 'X';
}

int fabric_wait_port_file(const char *port_path, pid_t pid,
                          uint64_t deadline_ms, char *addr, size_t len)
{
    for (;;) {
        FILE *f = fopen(port_path, "r");
        addr[0] = '\0';
        if (f) {
            if (fgets(addr, (int)len, f) == NULL || strchr(addr, '\n') == NULL)
                addr[0] = '\0';
            else
                *strchr(addr, '\n') = '\0';
            fclose(f);
        }
        if (addr[0])
            return 0;
        if (!proc_running(pid) || now_ms() > deadline_ms)
            return -1;
        fabric_sleep_ms(20);
    }
}

int fabric_wait_ans_up(const char *addr, const char *secret, int want,
                       uint64_t deadline_ms)
{
    int up = -1;
    char err[512];

    while (now_ms() <= deadline_ms) {
        char *stat = NULL;
        if (mgr_tool_stat(addr, secret, 1000, &stat, err, sizeof(err)) ==
            INCOLL_OK) {
            up = (int)mgr_tool_stat_value(stat, "manager ", "ans_up");
            free(stat);
            if (up == want)
                break;
        }
        fabric_sleep_ms(100);
    }
    return up;
}
