/*
 * What a process's threads did, from /proc/self/task: context switches,
 * voluntary and not, CPU time and time spent runnable but waiting for a
 * CPU (schedstat), moves between CPUs (sched), by class of thread: the main
 * thread, libincoll's watcher (incoll-watch), every other. For the measuring
 * programs of tests/ompi (osu_coll, obarrier): take the counts before and after
 * what is measured, and print the difference per call.
 */
#ifndef INCOLL_TESTS_OMPI_OCOUNTS_H
#define INCOLL_TESTS_OMPI_OCOUNTS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OC_VCSW, OC_IVCSW, OC_CPU, OC_WAIT, OC_MIGR, OC_K };
enum { OC_MAIN, OC_WATCH, OC_OTHER, OC_T };
#define OC_N (OC_T * OC_K)

/* Adds each thread's counts into v[class * OC_K + k]; the thread count. */
static int ocounts_take(double *v)
{
    char path[300], line[256];
    struct dirent *e;
    DIR *d = opendir("/proc/self/task");
    int threads = 0, pid = (int)getpid();

    memset(v, 0, sizeof(double) * OC_N);
    while (d && (e = readdir(d)) != NULL) {
        FILE *f;
        double *t;
        unsigned long long run = 0, wait = 0;
        if (e->d_name[0] == '.')
            continue;
        threads++;
        t = v + OC_K * OC_OTHER;
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        if (atoi(e->d_name) == pid)
            t = v + OC_K * OC_MAIN;
        else if ((f = fopen(path, "r")) != NULL) {
            if (fgets(line, sizeof(line), f) &&
                strncmp(line, "incoll-watch", 12) == 0)
                t = v + OC_K * OC_WATCH;
            fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
        if ((f = fopen(path, "r")) != NULL) {
            while (fgets(line, sizeof(line), f)) {
                unsigned long n;
                if (sscanf(line, "voluntary_ctxt_switches: %lu", &n) == 1)
                    t[OC_VCSW] += (double)n;
                else if (sscanf(line, "nonvoluntary_ctxt_switches: %lu", &n) ==
                         1)
                    t[OC_IVCSW] += (double)n;
            }
            fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/self/task/%s/sched", e->d_name);
        if ((f = fopen(path, "r")) != NULL) {
            while (fgets(line, sizeof(line), f)) {
                unsigned long n;
                if (sscanf(line, "se.nr_migrations : %lu", &n) == 1)
                    t[OC_MIGR] += (double)n;
            }
            fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
        if ((f = fopen(path, "r")) != NULL) {
            if (fscanf(f, "%llu %llu", &run, &wait) == 2) {
                t[OC_CPU] += (double)run / 1e3;
                t[OC_WAIT] += (double)wait / 1e3;
            }
            fclose(f);
        }
    }
    if (d)
        closedir(d);
    return threads;
}

/* Prints v (OC_N values) as " main vcsw .. ivcsw .. cpu_us .. wait_us
 * .. migr .. watch ... other ...". */
static void ocounts_print(const double *v)
{
    static const char *const cls[OC_T] = {"main", "watch", "other"};
    for (int c = 0; c < OC_T; c++) {
        const double *t = v + c * OC_K;
        printf(" %s vcsw %.2f ivcsw %.2f cpu_us %.1f wait_us %.1f migr %.3f",
               cls[c], t[OC_VCSW], t[OC_IVCSW], t[OC_CPU], t[OC_WAIT],
               t[OC_MIGR]);
    }
}

/* The datagrams and segments of this process's network namespace
 * (/proc/self/net/snmp): v[0..3] = UDP in, UDP out, TCP in, TCP out. On an
 * emulated fabric a rank's namespace is its host's, which holds no other
 * process of the job: its own traffic, MPI's (TCP) and libincoll's (UDP).
 * Elsewhere the whole machine's. */
enum { ON_UDP_IN, ON_UDP_OUT, ON_TCP_IN, ON_TCP_OUT, ON_N };
static void onet_take(double *v)
{
    char names[512], vals[512];
    FILE *f = fopen("/proc/self/net/snmp", "r");

    memset(v, 0, sizeof(double) * ON_N);
    while (f && fgets(names, sizeof(names), f) &&
           fgets(vals, sizeof(vals), f)) {
        int udp = strncmp(names, "Udp:", 4) == 0;
        char *sn, *sv, *n = strtok_r(names, " \n", &sn);
        char *x = strtok_r(vals, " \n", &sv);
        if (!udp && strncmp(names, "Tcp:", 4) != 0)
            continue;
        while ((n = strtok_r(NULL, " \n", &sn)) != NULL &&
               (x = strtok_r(NULL, " \n", &sv)) != NULL) {
            int k = udp && strcmp(n, "InDatagrams") == 0    ? ON_UDP_IN
                    : udp && strcmp(n, "OutDatagrams") == 0 ? ON_UDP_OUT
                    : !udp && strcmp(n, "InSegs") == 0      ? ON_TCP_IN
                    : !udp && strcmp(n, "OutSegs") == 0     ? ON_TCP_OUT
                                                            : -1;
            if (k >= 0)
                v[k] = atof(x);
        }
    }
    if (f)
        fclose(f);
}

static void onet_print(const double *v)
{
    printf(" udp_in %.2f udp_out %.2f tcp_in %.2f tcp_out %.2f", v[ON_UDP_IN],
           v[ON_UDP_OUT], v[ON_TCP_IN], v[ON_TCP_OUT]);
}

#endif /* INCOLL_TESTS_OMPI_OCOUNTS_H */
