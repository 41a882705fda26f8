/*
 * early_check: the early returns of libincoll's blocking rooted
 * collectives (INCOLL_EARLY_MAX, docs/nonblocking.md), for
 * tests/test_early.c. Every rank runs reduce, gather, bcast and scatter in
 * turn (int64 elements, count per rank, the root moving every four
 * calls). A member that may return early (a reduce's or gather's
 * non-root, a bcast's or scatter's root) overwrites its buffer at once
 * after the call; every member with a result checks it element by
 * element.
 *
 *   early_check [--iters N] [--count C] [--handshake DIR] [--fail-at K]
 *
 * --handshake DIR: after its call an early member creates a file in DIR;
 * the members with a result wait (up to 60 s) for the files of the
 * iteration's early members before they call. A member that returned
 * only when the operation completed would never let the others call: so
 * each early member's call provably returned before the operation
 * completed (a missing file is printed as NOT EARLY).
 *
 * --fail-at K: iterations 0..K-1 as above; then a reduce whose root
 * (rank 0) sleeps 4 s before it calls, so that the non-roots' operation,
 * which returned early, fails in the background (INCOLL_WAIT_MS of 1 s
 * and timeouts of 500 ms expected: a late rank is waited for that long),
 * then two barriers. A non-root's reduce must return INCOLL_OK
 * and both barriers an error (the first one the early operation's, the
 * second one the broken communicator's); the root's three calls errors.
 *
 * --kill-run K: iterations 0..K-1 as above; then a reduce whose root
 * (rank 0) sleeps 1.2 s before it calls: each non-root prints "early
 * returned from reduce K" once its call returned (the test kills an AN
 * then) and overwrites its input. Then an allreduce. The root's reduce
 * must return the right sum or an error; when it returns an error, every
 * rank's allreduce must fail too (the communicator is broken on all),
 * else the allreduce must be right on every rank. Prints "kill run:
 * reduce S right R, allreduce S right R" and "all correct" when so.
 *
 * With INCOLL_FAULT_NO_THREAD=1 (the communicator's thread cannot be
 * started) no call may return early, and after the iterations a
 * nonblocking bcast, which needs the thread, must fail with
 * INCOLL_ERR_NO_MEMORY on every rank and a blocking allreduce after it
 * must be right.
 *
 * Prints "summary ok=A wrong=W errors=E early=R expected=X" and "all
 * correct" when every call was right and, on an offloaded communicator,
 * the early returns counted by libincoll are the calls that could return
 * early. Exit status: 0 all correct, 1 otherwise, 2 usage.
 */
#include "incoll.h"

#include "host/counters.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int64_t input(int r, int it, size_t k)
{
    return (int64_t)r * 1000003 + (int64_t)it * 7919 + (int64_t)k;
}

static const char *const names[4] = {"reduce", "gather", "bcast", "scatter"};

static void flag_path(char *buf, size_t len, const char *dir, int it, int r)
{
    snprintf(buf, len, "%s/r%d-%d", dir, it, r);
}

/* Waits up to 60 s for the flag of rank r at iteration it; 1 when there. */
static int flag_wait(const char *dir, int it, int r)
{
    char path[PATH_MAX];
    flag_path(path, sizeof(path), dir, it, r);
    for (int i = 0; i < 60000; i++) {
        if (access(path, F_OK) == 0)
            return 1;
        sleep_ms(1);
    }
    return 0;
}

static void flag_set(const char *dir, int it, int r)
{
    char path[PATH_MAX];
    int fd;
    flag_path(path, sizeof(path), dir, it, r);
    fd = open(path, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0)
        close(fd);
}

static uint64_t early_count(incoll_comm_h comm)
{
    host_counters_t c;
    host_counters_read(comm, &c);
    return c.early_returns;
}

/* Without the communicator's thread (see the header): 0 when right. */
static int nothread_run(incoll_comm_h world, int rank, int size, int64_t *buf,
                        size_t count)
{
    incoll_req_h req = NULL;
    incoll_status_t status;
    int64_t sum = rank + 1;

    status = incoll_ibcast(world, buf, count * sizeof(*buf), 0, &req);
    if (status == INCOLL_OK)
        status = incoll_req_wait(req);
    if (status != INCOLL_ERR_NO_MEMORY) {
        printf("no thread: ibcast returned %s, want %s\n",
               incoll_status_string(status),
               incoll_status_string(INCOLL_ERR_NO_MEMORY));
        return 1;
    }
    status = incoll_allreduce(world, INCOLL_IN_PLACE, &sum, 1, INCOLL_INT64,
                              INCOLL_OP_SUM);
    if (status != INCOLL_OK || sum != (int64_t)size * (size + 1) / 2) {
        printf("no thread: allreduce after it: %s, sum %lld want %lld\n",
               incoll_status_string(status), (long long)sum,
               (long long)size * (size + 1) / 2);
        return 1;
    }
    return 0;
}

/* The AN failure run (--kill-run): see the header. */
static int kill_run(incoll_comm_h world, int rank, int size, int it,
                    size_t count, int64_t *in, int64_t *out)
{
    incoll_status_t s[2];
    int right[2] = {1, 1};
    int64_t one = rank, all = -1;
    for (size_t k = 0; k < count; k++) {
        in[k] = input(rank, it, k);
        out[k] = -1;
    }
    if (rank == 0)
        sleep_ms(1200);
    s[0] = incoll_reduce(world, in, out, count, INCOLL_INT64, INCOLL_OP_SUM, 0);
    if (rank != 0) {
        printf("early returned from reduce %d: %s\n", it,
               incoll_status_string(s[0]));
        fflush(stdout);
        memset(in, 0x5a, count * sizeof(*in));
    }
    for (size_t k = 0; rank == 0 && s[0] == INCOLL_OK && k < count; k++) {
        int64_t want = 0;
        for (int r = 0; r < size; r++)
            want += input(r, it, k);
        if (out[k] != want) {
            printf("WRONG kill run: reduce element %zu: got %lld want %lld\n",
                   k, (long long)out[k], (long long)want);
            right[0] = 0;
            break;
        }
    }
    s[1] = incoll_allreduce(world, &one, &all, 1, INCOLL_INT64, INCOLL_OP_SUM);
    if (s[1] == INCOLL_OK && all != (int64_t)size * (size - 1) / 2) {
        printf("WRONG kill run: allreduce %lld\n", (long long)all);
        right[1] = 0;
    }
    printf("kill run: reduce %s right %d, allreduce %s right %d\n",
           incoll_status_string(s[0]), right[0], incoll_status_string(s[1]),
           right[1]);
    if (right[0] && right[1])
        printf("all correct\n");
    return right[0] && right[1] ? 0 : 1;
}

/* The failure run (--fail-at): see the header. */
static int fail_run(incoll_comm_h world, int rank, int it, size_t count,
                    int64_t *in, int64_t *out)
{
    incoll_status_t s[3];
    int ok;
    for (size_t k = 0; k < count; k++)
        in[k] = input(rank, it, k);
    if (rank == 0)
        sleep_ms(4000);
    s[0] = incoll_reduce(world, in, out, count, INCOLL_INT64, INCOLL_OP_SUM, 0);
    if (rank != 0)
        memset(in, 0x5a, count * sizeof(*in));
    s[1] = incoll_barrier(world);
    s[2] = incoll_barrier(world);
    printf("failure: reduce %s, barrier %s, barrier %s\n",
           incoll_status_string(s[0]), incoll_status_string(s[1]),
           incoll_status_string(s[2]));
    ok = (rank == 0 ? s[0] != INCOLL_OK : s[0] == INCOLL_OK) &&
         s[1] != INCOLL_OK && s[2] != INCOLL_OK;
    if (ok)
        printf("all correct\n");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    int iters = 40, fail_at = -1, kill_at = -1, rank, size, nok = 0, nwrong = 0,
        nerr = 0;
    int notearly = 0, nothread;
    size_t count = 16;
    const char *dir = NULL;
    incoll_ctx_h ctx;
    incoll_comm_h world;
    int64_t *in, *out;
    uint64_t early0, expected = 0;
    int offloaded, on;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            fprintf(stderr, "early_check: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--iters") == 0)
            iters = atoi(v);
        else if (strcmp(a, "--count") == 0)
            count = (size_t)atol(v);
        else if (strcmp(a, "--handshake") == 0)
            dir = v;
        else if (strcmp(a, "--fail-at") == 0)
            fail_at = atoi(v);
        else if (strcmp(a, "--kill-run") == 0)
            fail_at = kill_at = atoi(v);
        else {
            fprintf(stderr, "early_check: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (incoll_init(&ctx) != INCOLL_OK ||
        incoll_comm_world(ctx, &world) != INCOLL_OK) {
        fprintf(stderr, "early_check: incoll_init failed\n");
        return 1;
    }
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    in = calloc(count * (size_t)size, sizeof(*in));
    out = calloc(count * (size_t)size, sizeof(*out));
    if (in == NULL || out == NULL || count == 0)
        return 2;
    offloaded = incoll_comm_offloaded(world, NULL);
    {
        const char *max = getenv("INCOLL_EARLY_MAX");
        const char *nt = getenv("INCOLL_FAULT_NO_THREAD");
        nothread = nt && strcmp(nt, "1") == 0;
        on = !(max && strcmp(max, "0") == 0) && !nothread;
    }
    early0 = early_count(world);
    for (int it = 0; it < (fail_at >= 0 ? fail_at : iters); it++) {
        int c = it % 4, root = (it / 4) % size, early;
        size_t all = count * (size_t)size, bad = SIZE_MAX;
        incoll_status_t status;
        early = c < 2 ? rank != root : rank == root;
        switch (c) {
        case 0:
        case 1:
            for (size_t k = 0; k < count; k++)
                in[k] = input(rank, it, k);
            break;
        case 2:
            for (size_t k = 0; k < count; k++)
                out[k] = rank == root ? input(root, it, k) : -1;
            break;
        default:
            for (size_t k = 0; rank == root && k < all; k++)
                in[k] = input((int)(k / count), it, k % count);
            for (size_t k = 0; k < count; k++)
                out[k] = -1;
        }
        if (dir && !early && notearly == 0) {
            for (int r = 0; r < size; r++) {
                int er = c < 2 ? r != root : r == root;
                if (er && !flag_wait(dir, it, r)) {
                    printf("NOT EARLY it=%d %s rank %d\n", it, names[c], r);
                    notearly++;
                }
            }
        }
        switch (c) {
        case 0:
            status = incoll_reduce(world, in, out, count, INCOLL_INT64,
                                   INCOLL_OP_SUM, root);
            break;
        case 1:
            status = incoll_gather(world, in, out, count * sizeof(*in), root);
            break;
        case 2:
            status = incoll_bcast(world, out, count * sizeof(*out), root);
            break;
        default:
            status = incoll_scatter(world, in, out, count * sizeof(*in), root);
        }
        /* The early member's buffers are its own again at once. */
        if (early && status == INCOLL_OK) {
            if (c == 2)
                memset(out, 0x5a, count * sizeof(*out));
            else
                memset(in, 0x5a, (c == 3 ? all : count) * sizeof(*in));
            expected++;
        }
        if (dir && early)
            flag_set(dir, it, rank);
        if (status != INCOLL_OK) {
            printf("it=%d %s root %d: %s\n", it, names[c], root,
                   incoll_status_string(status));
            nerr++;
            continue;
        }
        for (size_t k = 0; k < count && bad == SIZE_MAX; k++) {
            int64_t want = 0, got;
            switch (c) {
            case 0:
                if (rank != root)
                    break;
                for (int r = 0; r < size; r++)
                    want += input(r, it, k);
                if ((got = out[k]) != want)
                    bad = k;
                break;
            case 1:
                if (rank != root)
                    break;
                for (int r = 0; r < size && bad == SIZE_MAX; r++)
                    if ((got = out[(size_t)r * count + k]) !=
                        (want = input(r, it, k)))
                        bad = (size_t)r * count + k;
                break;
            case 2:
                if (rank != root &&
                    (got = out[k]) != (want = input(root, it, k)))
                    bad = k;
                break;
            default:
                if ((got = out[k]) != (want = input(rank, it, k)))
                    bad = k;
            }
            if (bad != SIZE_MAX)
                printf("WRONG it=%d %s root %d element %zu: got %lld want "
                       "%lld\n",
                       it, names[c], root, bad, (long long)got,
                       (long long)want);
        }
        if (bad == SIZE_MAX)
            nok++;
        else
            nwrong++;
    }
    if (fail_at >= 0) {
        int ret = nwrong || nerr ? 1
                  : kill_at >= 0
                      ? kill_run(world, rank, size, kill_at, count, in, out)
                      : fail_run(world, rank, fail_at, count, in, out);
        incoll_finalize(ctx);
        return ret;
    }
    /* A barrier: every early operation of this rank completed. */
    if (incoll_barrier(world) != INCOLL_OK)
        nerr++;
    if (nothread && nothread_run(world, rank, size, out, count) != 0)
        nerr++;
    {
        uint64_t early = early_count(world) - early0;
        printf("summary ok=%d wrong=%d errors=%d early=%llu expected=%llu "
               "offloaded=%d\n",
               nok, nwrong, nerr, (unsigned long long)early,
               (unsigned long long)expected, offloaded);
        if (nwrong == 0 && nerr == 0 && notearly == 0 &&
            (!offloaded || early == (on ? expected : 0)))
            printf("all correct\n");
        else
            nwrong++;
    }
    free(in);
    free(out);
    return incoll_finalize(ctx) == INCOLL_OK && nwrong == 0 ? 0 : 1;
}
