/*
 * usage_check: runs a known number of collectives in the network and in
 * software on a communicator split from the world, so that a test can
 * read where they ran in the manager's metrics. Run it under `incoll
 * run` with a manager; public API only.
 *
 *   usage_check [--net N] [--sw M] [--bcast B] [--hold FILE]
 *
 * On the communicator (every rank): N allreduces with the default
 * algorithm, M with INCOLL_ALGO_RING (a host-based algorithm asked for)
 * and B broadcasts, each result checked; then the communicator is
 * destroyed (its counts go to the manager), rank 0 prints
 * "offloaded 0|1 why TEXT", and every rank waits until FILE exists (at
 * most 30 s) before it finalizes, so that the test reads the job's
 * metrics while the job lives.
 *
 * Exit status: 0 correct, 1 wrong result, 2 usage, 4 an incoll error.
 */
#include "incoll.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *what, incoll_status_t status)
{
    fprintf(stderr, "usage_check: %s: %s\n", what,
            incoll_status_string(status));
    return 4;
}

/* One allreduce of 4 int64 by algo, checked. */
static int sum(incoll_comm_h c, int rank, int size, incoll_algo_t algo, int i)
{
    int64_t v[4], want;
    incoll_status_t status;
    for (int k = 0; k < 4; k++)
        v[k] = rank + k + i;
    status = incoll_allreduce_algo(c, algo, INCOLL_IN_PLACE, v, 4, INCOLL_INT64,
                                   INCOLL_OP_SUM);
    if (status != INCOLL_OK)
        return fail("allreduce", status);
    for (int k = 0; k < 4; k++) {
        want = (int64_t)size * (size - 1) / 2 + (int64_t)size * (k + i);
        if (v[k] != want) {
            fprintf(stderr,
                    "usage_check: rank %d: element %d is %lld, not %lld\n",
                    rank, k, (long long)v[k], (long long)want);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int nnet = 4, nsw = 3, nbcast = 2, rank, size, crank, csize, ret = 0;
    const char *hold = NULL, *why = "";
    incoll_ctx_h ctx;
    incoll_comm_h world, c;
    incoll_status_t status;

    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--net") == 0)
            nnet = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--sw") == 0)
            nsw = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--bcast") == 0)
            nbcast = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--hold") == 0)
            hold = argv[++i];
        else {
            fprintf(stderr, "usage: usage_check [--net N] [--sw M] "
                            "[--bcast B] [--hold FILE]\n");
            return 2;
        }
    }
    if ((status = incoll_init(&ctx)) != INCOLL_OK)
        return fail("init", status);
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    if ((status = incoll_comm_split(world, 0, rank, &c)) != INCOLL_OK) {
        incoll_finalize(ctx);
        return fail("split", status);
    }
    incoll_comm_rank(c, &crank);
    incoll_comm_size(c, &csize);
    for (int i = 0; i < nnet && ret == 0; i++)
        ret = sum(c, crank, csize, INCOLL_ALGO_AUTO, i);
    for (int i = 0; i < nsw && ret == 0; i++)
        ret = sum(c, crank, csize, INCOLL_ALGO_RING, i);
    for (int i = 0; i < nbcast && ret == 0; i++) {
        uint32_t v[8];
        for (int k = 0; k < 8; k++)
            v[k] = crank == 0 ? (uint32_t)(k * 31 + i) : 0;
        status = incoll_bcast(c, v, sizeof(v), 0);
        if (status != INCOLL_OK)
            ret = fail("bcast", status);
        for (int k = 0; k < 8 && ret == 0; k++)
            if (v[k] != (uint32_t)(k * 31 + i))
                ret = 1;
    }
    if (crank == 0) {
        int off = incoll_comm_offloaded(c, &why);
        printf("offloaded %d why %s\n", off, off ? "" : why);
    }
    incoll_comm_destroy(c);
    fflush(stdout);
    for (int t = 0; hold && t < 600 && access(hold, F_OK) != 0; t++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    incoll_finalize(ctx);
    return ret;
}
