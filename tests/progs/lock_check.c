/*
 * lock_check: an incoll program that takes and lets go of streaming locks
 * with the public calls (incoll_comm_lock, incoll_comm_unlock) on two
 * communicators of the same ranks, whose groups share every AN, and checks
 * every allreduce element by element. Run it under a manager (it splits
 * the world); it uses only the public API.
 *
 *   lock_check [--count N] [--iters N] [--world-only]
 *
 * Each round, on every rank:
 *   1. world locks until released: granted; a large allreduce streams, a
 *      small one keeps the slots;
 *   2. the other communicator (a split of the same ranks) asks: refused,
 *      as world holds the tree; its large allreduce runs on its slots;
 *   3. world unlocks; the other locks: granted, streams, unlocks;
 *   4. world locks for 2 operations: granted; three large allreduces, the
 *      third after the lock went by itself, which the other communicator's
 *      lock for 1 operation then shows (granted), and its allreduce
 *      streams and lets the lock go by itself;
 *   5. a nonblocking allreduce is in flight when world locks (the lock
 *      waits for it); a nonblocking one under the lock streams; unlock.
 * So per round world streams 1 + 2 + 1 operations and the other 2; the
 * test reads those numbers back from the library's info lines
 * (INCOLL_LOG_LEVEL=info) and the ANs' counters.
 *
 * --world-only (a fabric without a manager, ranks sharing hosts or not):
 * world locks until released (granted), a large and a small allreduce,
 * unlocks; locks for 1 operation (granted), two large allreduces, the
 * second after the lock went; every rank must get the same answers.
 *
 * Exit status: 0 all correct ("ok" printed), 1 wrong result or lock
 * answer, 2 usage, 4 an incoll error.
 */
#include "incoll.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_WRONG = 1, EXIT_USAGE = 2, EXIT_ERROR = 4 };

static int fail(const char *what, incoll_status_t status)
{
    fprintf(stderr, "lock_check: %s: %s\n", what, incoll_status_string(status));
    return EXIT_ERROR;
}

/* Fills v with rank r's input of call k. */
static void fill(int64_t *v, size_t count, int r, int k)
{
    for (size_t i = 0; i < count; i++)
        v[i] = (int64_t)((i * 7 + (size_t)k * 13) % 1000) * (r + 1) - r;
}

/* 0 when v holds the sum over size ranks of call k's inputs. */
static int verify(const int64_t *v, size_t count, int size, int k)
{
    for (size_t i = 0; i < count; i++) {
        int64_t want = 0;
        for (int r = 0; r < size; r++)
            want += (int64_t)((i * 7 + (size_t)k * 13) % 1000) * (r + 1) - r;
        if (v[i] != want) {
            fprintf(stderr,
                    "lock_check: call %d element %zu: %lld, want %lld\n", k, i,
                    (long long)v[i], (long long)want);
            return -1;
        }
    }
    return 0;
}

typedef struct {
    int rank, size, calls;
    int64_t *v;
} run_t;

/* One checked blocking allreduce of count elements on c. */
static int ar(run_t *r, incoll_comm_h c, size_t count)
{
    int k = r->calls++;
    incoll_status_t status;
    fill(r->v, count, r->rank, k);
    status = incoll_allreduce(c, INCOLL_IN_PLACE, r->v, count, INCOLL_INT64,
                              INCOLL_OP_SUM);
    if (status != INCOLL_OK)
        return fail("allreduce", status);
    return verify(r->v, count, r->size, k) == 0 ? 0 : EXIT_WRONG;
}

/* Locks c for nops operations and checks the answer against want. */
static int lock(incoll_comm_h c, unsigned nops, int want, const char *what)
{
    int granted = -1;
    incoll_status_t status = incoll_comm_lock(c, nops, &granted);
    if (status != INCOLL_OK)
        return fail(what, status);
    if (granted != want) {
        fprintf(stderr, "lock_check: %s: granted %d, want %d\n", what, granted,
                want);
        return EXIT_WRONG;
    }
    return 0;
}

static int unlock(incoll_comm_h c)
{
    incoll_status_t status = incoll_comm_unlock(c);
    return status == INCOLL_OK ? 0 : fail("unlock", status);
}

/* Step 5: nonblocking allreduces around a lock. */
static int nonblocking(run_t *r, incoll_comm_h world, size_t count)
{
    int64_t *w = malloc(count * sizeof(*w));
    incoll_req_h req;
    incoll_status_t status;
    int k = r->calls++, ret;

    if (w == NULL)
        return fail("nonblocking", INCOLL_ERR_NO_MEMORY);
    fill(w, count, r->rank, k);
    status = incoll_iallreduce(world, INCOLL_IN_PLACE, w, count, INCOLL_INT64,
                               INCOLL_OP_SUM, &req);
    if (status != INCOLL_OK) {
        free(w);
        return fail("iallreduce", status);
    }
    ret = lock(world, 0, 1, "world lock with a request in flight");
    status = incoll_req_wait(req);
    if (ret == 0 && status != INCOLL_OK)
        ret = fail("iallreduce before the lock", status);
    if (ret == 0 && verify(w, count, r->size, k) != 0)
        ret = EXIT_WRONG;
    if (ret == 0) {
        k = r->calls++;
        fill(w, count, r->rank, k);
        status = incoll_iallreduce(world, INCOLL_IN_PLACE, w, count,
                                   INCOLL_INT64, INCOLL_OP_SUM, &req);
        if (status == INCOLL_OK)
            status = incoll_req_wait(req);
        if (status != INCOLL_OK)
            ret = fail("iallreduce under the lock", status);
        else if (verify(w, count, r->size, k) != 0)
            ret = EXIT_WRONG;
    }
    free(w);
    return ret != 0 ? ret : unlock(world);
}

/* Returns from the function at the first step that fails. */
#define STEP(x)                                                                \
    do {                                                                       \
        if ((ret = (x)) != 0)                                                  \
            return ret;                                                        \
    } while (0)

static int round_run(run_t *r, incoll_comm_h world, incoll_comm_h other,
                     size_t count)
{
    int ret;
    /* 1 */
    STEP(lock(world, 0, 1, "world lock"));
    STEP(ar(r, world, count));
    STEP(ar(r, world, 8));
    /* 2 */
    STEP(lock(other, 0, 0, "other lock while world holds the tree"));
    STEP(ar(r, other, count));
    /* 3 */
    STEP(unlock(world));
    STEP(lock(other, 0, 1, "other lock after world's unlock"));
    STEP(ar(r, other, count));
    STEP(unlock(other));
    STEP(unlock(other)); /* not locked: fine */
    /* 4 */
    STEP(lock(world, 2, 1, "world lock for 2 operations"));
    STEP(ar(r, world, count));
    STEP(ar(r, world, 8)); /* small: the slots, not counted */
    STEP(ar(r, world, count));
    STEP(ar(r, world, count)); /* the lock went after the second */
    /* (not locked: waits until the ANs have the release, which may still
     * be on its way when packets are lost) */
    STEP(unlock(world));
    STEP(lock(other, 1, 1, "other lock after world's 2 operations"));
    STEP(ar(r, other, count));
    STEP(unlock(other));
    STEP(lock(world, 1, 1, "world lock after other's 1 operation"));
    STEP(unlock(world));
    /* 5 */
    STEP(nonblocking(r, world, count));
    return 0;
}

/* --world-only: the rounds on world alone. */
static int world_run(run_t *r, incoll_comm_h world, size_t count)
{
    int ret;
    STEP(lock(world, 0, 1, "world lock"));
    STEP(ar(r, world, count));
    STEP(ar(r, world, 8));
    STEP(unlock(world));
    STEP(lock(world, 1, 1, "world lock for 1 operation"));
    STEP(ar(r, world, count));
    STEP(ar(r, world, count));
    STEP(unlock(world));
    return 0;
}

int main(int argc, char **argv)
{
    incoll_ctx_h ctx;
    incoll_comm_h world, other;
    incoll_status_t status;
    run_t r = {0};
    size_t count = 40000; /* 320 KB: more than the slots carry at once */
    int iters = 2, ret = 0, world_only = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
            count = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--world-only") == 0)
            world_only = 1;
        else {
            fprintf(stderr, "usage: lock_check [--count N] [--iters N] "
                            "[--world-only]\n");
            return EXIT_USAGE;
        }
    }
    if (count < 8 || iters < 1)
        return EXIT_USAGE;
    status = incoll_init(&ctx);
    if (status != INCOLL_OK)
        return fail("init", status);
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &r.rank);
    incoll_comm_size(world, &r.size);
    r.v = malloc(count * sizeof(*r.v));
    if (r.v == NULL)
        return fail("buffer", INCOLL_ERR_NO_MEMORY);
    if (world_only) {
        for (int it = 0; it < iters && ret == 0; it++)
            ret = world_run(&r, world, count);
    } else {
        status = incoll_comm_split(world, 0, r.rank, &other);
        if (status != INCOLL_OK)
            return fail("split", status);
        if (!incoll_comm_offloaded(world, NULL) ||
            !incoll_comm_offloaded(other, NULL)) {
            fprintf(stderr, "lock_check: a communicator is not offloaded\n");
            return EXIT_WRONG;
        }
        if (lock(world, 70000, 0, "bad nops") != EXIT_ERROR)
            ret = EXIT_WRONG; /* INCOLL_ERR_INVALID_ARG expected */
        for (int it = 0; it < iters && ret == 0; it++)
            ret = round_run(&r, world, other, count);
        status = incoll_comm_destroy(other);
        if (ret == 0 && status != INCOLL_OK)
            ret = fail("destroy", status);
    }
    free(r.v);
    status = incoll_finalize(ctx);
    if (ret == 0 && status != INCOLL_OK)
        ret = fail("finalize", status);
    if (ret == 0)
        printf("\nok %d rounds, %d allreduces\n", iters, r.calls);
    return ret;
}
