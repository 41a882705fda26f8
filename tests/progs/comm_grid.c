/*
 * comm_grid: splits the world into row and column communicators of a grid
 * (and, with --create, makes a communicator of the even ranks in reverse
 * order with incoll_comm_create) and allreduces on all of them in turn,
 * checking every element. Run it under `incoll run`; public API only.
 *
 *   comm_grid [--cols C] [--iters N] [--count N] [--create]
 *             [--seconds S] [--expect-offload any|all|none]
 *
 * Every rank prints one line per communicator:
 *   comm NAME rank R size S offloaded 0|1 why TEXT
 * then "ok ITERS" at the end. The values are small integers summed as
 * int64 and float64 (exact), so each rank computes the expected result
 * from the membership alone. With --seconds the loop runs at least that
 * long (for failure tests that kill a daemon meanwhile).
 *
 * Exit status: 0 correct, 1 wrong result, 2 usage, 3 timeout, 4 other
 * incoll error, 5 offload expectation not met.
 */
#include "incoll.h"
#include "common/clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    EXIT_WRONG = 1,
    EXIT_USAGE = 2,
    EXIT_TIMEOUT = 3,
    EXIT_ERROR = 4,
    EXIT_OFFLOAD = 5
};

typedef struct {
    const char *name;
    incoll_comm_h comm;
    int nmembers;
    int members[1024]; /* world ranks, in communicator order */
} grid_comm_t;

static int fail(const char *what, incoll_status_t status)
{
    fprintf(stderr, "comm_grid: %s: %s\n", what, incoll_status_string(status));
    return status == INCOLL_ERR_TIMEOUT ? EXIT_TIMEOUT : EXIT_ERROR;
}

/* Allreduces count int64 and count float64 on c and checks them. */
static int check(grid_comm_t *c, int wrank, int iter, size_t count)
{
    int64_t *vi = malloc(count * sizeof(*vi));
    double *vd = malloc(count * sizeof(*vd));
    incoll_status_t status;
    int ret = 0;

    if (vi == NULL || vd == NULL) {
        free(vi);
        free(vd);
        return EXIT_ERROR;
    }
    for (size_t i = 0; i < count; i++) {
        vi[i] = (int64_t)wrank * 1000003 + (int64_t)i * 7 + iter;
        vd[i] = (double)(wrank + 1) * 0.5 + (double)(i % 97) + iter;
    }
    status = incoll_allreduce(c->comm, INCOLL_IN_PLACE, vi, count, INCOLL_INT64,
                              INCOLL_OP_SUM);
    if (status == INCOLL_OK)
        status = incoll_allreduce(c->comm, INCOLL_IN_PLACE, vd, count,
                                  INCOLL_FLOAT64, INCOLL_OP_SUM);
    if (status != INCOLL_OK) {
        char what[128];
        snprintf(what, sizeof(what), "allreduce on %s, iteration %d", c->name,
                 iter);
        ret = fail(what, status);
        goto out;
    }
    for (size_t i = 0; i < count && ret == 0; i++) {
        int64_t wi = 0;
        double wd = 0;
        for (int m = 0; m < c->nmembers; m++) {
            wi += (int64_t)c->members[m] * 1000003 + (int64_t)i * 7 + iter;
            wd += (double)(c->members[m] + 1) * 0.5 + (double)(i % 97) + iter;
        }
        if (vi[i] != wi || vd[i] != wd) {
            fprintf(stderr,
                    "comm_grid: rank %d: %s iteration %d element %zu: got "
                    "%lld %.1f, want %lld %.1f\n",
                    wrank, c->name, iter, i, (long long)vi[i], vd[i],
                    (long long)wi, wd);
            ret = EXIT_WRONG;
        }
    }
out:
    free(vi);
    free(vd);
    return ret;
}

int main(int argc, char **argv)
{
    incoll_ctx_h ctx;
    incoll_comm_h world;
    incoll_status_t status;
    grid_comm_t comms[4];
    int ncomms = 0, rank, size, cols = 2, iters = 10, create = 0, ret = 0;
    size_t count = 1000;
    double seconds = 0, t0;
    const char *expect = "any";

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cols") == 0 && i + 1 < argc)
            cols = atoi(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
            count = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--expect-offload") == 0 && i + 1 < argc)
            expect = argv[++i];
        else if (strcmp(argv[i], "--create") == 0)
            create = 1;
        else {
            fprintf(stderr, "usage: comm_grid [--cols C] [--iters N] "
                            "[--count N] [--create] [--seconds S] "
                            "[--expect-offload any|all|none]\n");
            return EXIT_USAGE;
        }
    }
    status = incoll_init(&ctx);
    if (status != INCOLL_OK)
        return fail("init", status);
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    if (cols < 1 || size % cols != 0 || size > 1024 || count < 1) {
        fprintf(stderr, "comm_grid: %d ranks do not make rows of %d\n", size,
                cols);
        incoll_finalize(ctx);
        return EXIT_USAGE;
    }
    comms[ncomms].name = "world";
    comms[ncomms].comm = world;
    comms[ncomms].nmembers = size;
    for (int r = 0; r < size; r++)
        comms[ncomms].members[r] = r;
    ncomms++;
    /* Rows: ranks with the same rank / cols, in rank order. */
    comms[ncomms].name = "row";
    status = incoll_comm_split(world, rank / cols, rank, &comms[ncomms].comm);
    if (status != INCOLL_OK)
        return fail("split into rows", status);
    comms[ncomms].nmembers = 0;
    for (int r = 0; r < size; r++)
        if (r / cols == rank / cols)
            comms[ncomms].members[comms[ncomms].nmembers++] = r;
    ncomms++;
    /* Columns, in reverse rank order (key = -rank). */
    comms[ncomms].name = "col";
    status = incoll_comm_split(world, rank % cols, -rank, &comms[ncomms].comm);
    if (status != INCOLL_OK)
        return fail("split into columns", status);
    comms[ncomms].nmembers = 0;
    for (int r = size - 1; r >= 0; r--)
        if (r % cols == rank % cols)
            comms[ncomms].members[comms[ncomms].nmembers++] = r;
    ncomms++;
    if (create) {
        int ranks[1024], n = 0;
        for (int r = size - 1; r >= 0; r--)
            if (r % 2 == 0)
                ranks[n++] = r;
        comms[ncomms].name = "evens";
        comms[ncomms].nmembers = n;
        memcpy(comms[ncomms].members, ranks, (size_t)n * sizeof(int));
        if (rank % 2 == 0) {
            status = incoll_comm_create(world, n, ranks, &comms[ncomms].comm);
            if (status != INCOLL_OK)
                return fail("create of the even ranks", status);
            ncomms++;
        }
    }
    for (int c = 0; c < ncomms; c++) {
        const char *why = "";
        int off = incoll_comm_offloaded(comms[c].comm, &why);
        int crank, csize;
        incoll_comm_rank(comms[c].comm, &crank);
        incoll_comm_size(comms[c].comm, &csize);
        printf("comm %s rank %d size %d offloaded %d why %s\n", comms[c].name,
               crank, csize, off, off ? "-" : why);
        if (csize != comms[c].nmembers || comms[c].members[crank] != rank) {
            fprintf(stderr,
                    "comm_grid: rank %d: %s has rank %d of %d, want "
                    "member %d of %d\n",
                    rank, comms[c].name, crank, csize, rank, comms[c].nmembers);
            ret = EXIT_WRONG;
        }
        if ((strcmp(expect, "all") == 0 && !off) ||
            (strcmp(expect, "none") == 0 && off && c > 0))
            ret = ret ? ret : EXIT_OFFLOAD;
    }
    fflush(stdout);
    t0 = now_s();
    for (int it = 0; ret == 0; it++) {
        int32_t more;
        for (int c = 0; c < ncomms && ret == 0; c++)
            ret = check(&comms[c], rank, it, count);
        if (ret != 0)
            break;
        /* Every rank goes on while any wants to: the decision is
         * collective, so no rank leaves the others waiting. */
        more = it + 1 < iters || now_s() - t0 < seconds;
        status = incoll_allreduce(world, INCOLL_IN_PLACE, &more, 1,
                                  INCOLL_INT32, INCOLL_OP_MAX);
        if (status != INCOLL_OK) {
            ret = fail("allreduce of the loop condition", status);
            break;
        }
        if (!more) {
            printf("ok %d\n", it + 1);
            break;
        }
    }
    fflush(stdout);
    for (int c = 1; c < ncomms; c++)
        incoll_comm_destroy(comms[c].comm);
    incoll_finalize(ctx);
    return ret;
}
