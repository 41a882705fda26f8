/*
 * libincoll_mpi's statistics (INCOLL_MPI_STATS=1): rank 0's count of its
 * collectives by where they ran (offloaded, on libincoll's host-based
 * algorithms, raised as errors) and, for those MPI's own ran, why; one
 * line at MPI_Finalize. The counters are in L (mpi_state.h), counted
 * where each call ends (mpi_layer.c, mpi_nb.c).
 */
#include "mpi/mpi_state.h"

#include <stddef.h>
#include <stdio.h>

/* The reasons' names, in reason_t order. */
static const char *const reason_names[R_COUNT] = {
    "off",  "coll",   "args", "dtype",   "op",  "bytes",
    "comm", "failed", "left", "unequal", "tune"};

void mpi_stats_print(void)
{
    char line[4096];
    size_t n = 0;

    n += (size_t)snprintf(line + n, sizeof(line) - n, "mpi: stats rank 0:");
    for (int c = 0; c < MPI_COLL_COUNT && n < sizeof(line); c++) {
        unsigned long total = 0;
        int first = 1;
        for (int r = 0; r < R_COUNT; r++)
            total += L.passed[c][r];
        n += (size_t)snprintf(line + n, sizeof(line) - n,
                              " %s offloaded=%lu hosts=%lu errors=%lu "
                              "passed=%lu",
                              mpi_coll_names[c], L.offloaded[c], L.hosts[c],
                              L.errors[c], total);
        if (L.nb[c] && n < sizeof(line))
            n += (size_t)snprintf(line + n, sizeof(line) - n, " nb=%lu",
                                  L.nb[c]);
        if (L.persistent[c] && n < sizeof(line))
            n += (size_t)snprintf(line + n, sizeof(line) - n, " persistent=%lu",
                                  L.persistent[c]);
        for (int r = 0; r < R_COUNT && n < sizeof(line); r++) {
            if (L.passed[c][r] == 0)
                continue;
            n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s=%lu",
                                  first ? " (" : " ", reason_names[r],
                                  L.passed[c][r]);
            first = 0;
        }
        if (!first && n < sizeof(line))
            n += (size_t)snprintf(line + n, sizeof(line) - n, ")");
        if (c + 1 < MPI_COLL_COUNT && n < sizeof(line))
            n += (size_t)snprintf(line + n, sizeof(line) - n, ";");
    }
    incoll_log(INCOLL_LOG_INFO, "%s", line);
}
