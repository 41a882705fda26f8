/*
 * linkbytes: proves where an MPI job's own traffic goes. Each rank reads
 * the byte counters of its network namespace (/proc/net/dev: the
 * emulated host's link "uplink", and "lo") around one MPI_Allreduce of
 * 1 MiB of doubles and prints, per rank:
 *
 *   linkbytes: rank R addr A uplink_tx T uplink_rx X lo_tx L host H
 *
 * with A the rank's IPv4 address on uplink (or "-") and H MPI's processor
 * name (the emulated host's own host name). Run with the layer
 * off (INCOLL_MPI_ENABLE=0 or no preload) so that the allreduce is the
 * MPI library's own. tests/test_mpi.c checks that every rank is in its
 * own emulated host (distinct 10.77.x.x addresses, its host's name) and that
 * the vector crossed the links, not loopback. The result is checked too (exact
 * sums of small integers). Prints "linkbytes: ok" at rank 0.
 */
#include <mpi.h>

#include "common/netdev.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT (128 * 1024) /* doubles: 1 MiB */

/* Transmit and receive bytes of interface dev in this namespace. */
static void if_bytes(const char *dev, unsigned long long *tx,
                     unsigned long long *rx)
{
    netdev_counters_t c;

    netdev_counters(dev, &c);
    *tx = c.tx_bytes;
    *rx = c.rx_bytes;
}

static void uplink_addr(char *buf, size_t len)
{
    struct ifaddrs *ifa, *p;
    snprintf(buf, len, "-");
    if (getifaddrs(&ifa) != 0)
        return;
    for (p = ifa; p; p = p->ifa_next)
        if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET &&
            strcmp(p->ifa_name, "uplink") == 0)
            inet_ntop(AF_INET, &((struct sockaddr_in *)p->ifa_addr)->sin_addr,
                      buf, (socklen_t)len);
    freeifaddrs(ifa);
}

int main(int argc, char **argv)
{
    static double x[COUNT], y[COUNT];
    unsigned long long tx0, rx0, tx1, rx1, lo0, lo1, dummy;
    char addr[64], name[MPI_MAX_PROCESSOR_NAME];
    int r, n, len, ok = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int i = 0; i < COUNT; i++)
        x[i] = (double)((r + i) % 7);
    MPI_Barrier(MPI_COMM_WORLD); /* connections up before counting */
    if_bytes("uplink", &tx0, &rx0);
    if_bytes("lo", &lo0, &dummy);
    MPI_Allreduce(x, y, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if_bytes("uplink", &tx1, &rx1);
    if_bytes("lo", &lo1, &dummy);
    for (int i = 0; i < COUNT; i++) {
        double want = 0;
        for (int q = 0; q < n; q++)
            want += (double)((q + i) % 7);
        if (y[i] != want)
            ok = 0;
    }
    uplink_addr(addr, sizeof(addr));
    MPI_Get_processor_name(name, &len);
    printf("linkbytes: rank %d addr %s uplink_tx %llu uplink_rx %llu lo_tx "
           "%llu host %s\n",
           r, addr, tx1 - tx0, rx1 - rx0, lo1 - lo0, name);
    fflush(stdout);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (r == 0)
        printf("linkbytes: %s\n", ok ? "ok" : "WRONG RESULT");
    MPI_Finalize();
    return ok ? 0 : 1;
}
