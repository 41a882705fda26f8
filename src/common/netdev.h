/*
 * The byte and packet counters of one network interface of the calling
 * process's network namespace, from /proc/net/dev (per namespace, unlike
 * /sys/class/net after a plain setns). Header-only: the benchmark and the
 * separately built MPI test programs read it alike.
 */
#ifndef INCOLL_COMMON_NETDEV_H
#define INCOLL_COMMON_NETDEV_H

#include <stdio.h>
#include <string.h>

typedef struct {
    unsigned long long rx_bytes, rx_packets, tx_bytes, tx_packets;
} netdev_counters_t;

/* Fills *c for interface dev. Returns 0, or -1 (and *c zeroed) when
 * /proc/net/dev cannot be read or has no such interface. */
static inline int netdev_counters(const char *dev, netdev_counters_t *c)
{
    char line[512], name[64];
    int ret = -1;
    FILE *f = fopen("/proc/net/dev", "r");

    memset(c, 0, sizeof(*c));
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long v[10];
        char *colon = strchr(line, ':');
        if (colon == NULL)
            continue;
        *colon = '\0';
        if (sscanf(line, " %63s", name) != 1 || strcmp(name, dev) != 0)
            continue;
        /* rx: bytes packets errs drop fifo frame compressed multicast;
         * then tx: bytes packets ... */
        if (sscanf(colon + 1,
                   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8],
                   &v[9]) == 10) {
            c->rx_bytes = v[0];
            c->rx_packets = v[1];
            c->tx_bytes = v[8];
            c->tx_packets = v[9];
            ret = 0;
        }
        break;
    }
    fclose(f);
    return ret;
}

#endif
