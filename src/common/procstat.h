/*
 * The few fields of /proc/PID/stat that the daemons' supervisors, the
 * benchmarks and the tests read: the command name, the state and the CPU
 * time. Header-only, like netdev.h.
 */
#ifndef INCOLL_COMMON_PROCSTAT_H
#define INCOLL_COMMON_PROCSTAT_H

#include <stdio.h>
#include <string.h>
#include <sys/types.h>

typedef struct {
    char comm[64];            /* the name between the parentheses */
    char state;               /* R, S, D, Z (zombie), X (dead), ... */
    unsigned long long utime; /* user time, in clock ticks */
    unsigned long long stime; /* system time, in clock ticks */
} proc_stat_t;

/* Fills *st for pid. Returns 0, or -1 when the process does not exist
 * (or its stat line cannot be parsed). */
static inline int proc_stat_read(pid_t pid, proc_stat_t *st)
{
    char path[64], buf[1024], *open_paren, *close_paren;
    size_t n, len;
    FILE *f;

    memset(st, 0, sizeof(*st));
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r"); /* /proc files have no size: read what comes */
    if (f == NULL)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The name may hold spaces and parentheses: it ends at the last ')'.
     * After it: state, then 10 fields, then utime and stime. */
    open_paren = strchr(buf, '(');
    close_paren = strrchr(buf, ')');
    if (open_paren == NULL || close_paren == NULL || close_paren < open_paren ||
        sscanf(close_paren + 1,
               " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &st->state, &st->utime, &st->stime) != 3)
        return -1;
    len = (size_t)(close_paren - open_paren - 1);
    if (len >= sizeof(st->comm))
        len = sizeof(st->comm) - 1;
    memcpy(st->comm, open_paren + 1, len);
    st->comm[len] = '\0';
    return 0;
}

/* 1 if pid exists and is neither a zombie nor dead. */
static inline int proc_running(pid_t pid)
{
    proc_stat_t st;
    return proc_stat_read(pid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}

#endif
