/*
 * misuse_check: an incoll program for the tests of erroneous programs and
 * late ranks (tests/test_misuse.c) and the reliability probe
 * (tests/probe/). It runs a loop of allreduces (SUM of int64, checked
 * element by element) on the world; at iteration --at the call is what
 * --case says, on rank --who or on every rank:
 *
 *   none            the allreduce (a control run)
 *   root-null       a reduce whose root (who) passes a NULL recvbuf
 *   inplace-recv    an allreduce where who passes INCOLL_IN_PLACE as recvbuf
 *   overlap         an allreduce where who's buffers overlap partly
 *   dtype           who reduces FLOAT64 where the others reduce INT64
 *   op              who reduces with MAX where the others sum
 *   count           who reduces half the count
 *   bcast-roots     a broadcast: who says it is the root, the others 0
 *   bcast-allreduce who broadcasts (root 0) while the others allreduce
 *   reduce-roots    a reduce: the lower half of the ranks says root 0,
 *                   the upper half root size-1
 *   reduce-noroot   a reduce: the lower half says root size-1, the upper
 *                   half root 0, so that no rank takes itself for the
 *                   root: none has a result, and each must get the error
 *                   at the call or (having returned early) at its next
 *   skip            who skips a broadcast the others make before the
 *                   allreduce of that iteration (and makes an extra
 *                   barrier at the end, so that every rank has as many
 *                   calls); the allreduces' counts differ from one
 *                   iteration to the next so that shifted calls differ
 *   late            who computes --late-ms before its call (outside the
 *                   library): everybody must wait for it
 *   deadline        as late, with INCOLL_DEADLINE_MS below --late-ms: the
 *                   call must fail on every rank with INCOLL_ERR_TIMEOUT
 *   gone            (no loop) the ranks split the world into one
 *                   communicator (without a manager it runs on the
 *                   hosts); who exits at once; the others broadcast from
 *                   rank 0 on it twice. A rank whose first broadcast
 *                   fails (its peer is gone: after INCOLL_WAIT_MS) must
 *                   fail the second too, saying "gone: second broadcast:
 *                   STATUS"; the library's log names the first as the
 *                   call that put the communicator out of step
 *
 * A call of a case that must fail (every case but none and late, from
 * --at on for skip) and returns success with data on a rank that has a
 * result is a wrong result; one of a rank without result (a broadcast's
 * root, a reduce's non-root) may succeed, and then its next call may
 * return the error (a member that returned early hears of its
 * operation's failure there: docs/nonblocking.md); the call before it
 * may fail too (a member whose result of it had not come yet when the
 * others agreed on the erroneous call, without a manager to keep it:
 * docs/failures.md). Every other call must return the right result. It prints a
 * line per wrong or unexpected outcome, then "summary ok=A wrong=W errors=E
 * expected=X unexpected=U" (errors: calls that failed; expected: failures the
 * case asks for).
 *
 *   misuse_check --case NAME [--iters N] [--at I] [--who R] [--count C]
 *                [--late-ms MS] [--seed S] [--algo auto|inc|rd]
 *                [--gap-ms G] [--delay-ms D]
 *
 * --seed S changes every input (two jobs with different seeds never
 * have a result in common: a test replaying one job's packets into
 * another sees them); --algo rd runs the allreduces on the hosts
 * (recursive doubling), --algo inc in the network only (no fallback,
 * no recovery); --gap-ms G computes G ms after each call; --delay-ms D:
 * who computes D ms before the call of --at (of a case with one), so
 * that the others are in it first (in node mode its leader then sleeps
 * waiting for its packet).
 *
 * Exit status: 0 as expected, 1 a wrong result returned as success,
 * 2 usage, 3 an outcome other than expected (a call that had to fail
 * did not, or a correct call failed).
 */
#include "incoll.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const cases[] = {
    "none",         "root-null",     "inplace-recv",
    "overlap",      "dtype",         "op",
    "count",        "bcast-roots",   "bcast-allreduce",
    "reduce-roots", "reduce-noroot", "skip",
    "late",         "deadline",      "gone"};
enum {
    C_NONE,
    C_ROOT_NULL,
    C_INPLACE_RECV,
    C_OVERLAP,
    C_DTYPE,
    C_OP,
    C_COUNT,
    C_BCAST_ROOTS,
    C_BCAST_ALLREDUCE,
    C_REDUCE_ROOTS,
    C_REDUCE_NOROOT,
    C_SKIP,
    C_LATE,
    C_DEADLINE,
    C_GONE,
    C_N
};

static int64_t seed;
static incoll_algo_t algo = INCOLL_ALGO_AUTO;

static int64_t input(int r, int it, size_t k)
{
    return (int64_t)r * 1000003 + (int64_t)it * 7919 + (int64_t)k +
           seed * 104729;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The checked allreduce of iteration it: 0 right, 1 wrong, -1 failed. */
static int allreduce_it(incoll_comm_h world, int rank, int size, int it,
                        size_t count, int64_t *in, int64_t *out,
                        incoll_status_t *st_p)
{
    for (size_t k = 0; k < count; k++) {
        in[k] = input(rank, it, k);
        out[k] = -1;
    }
    *st_p = incoll_allreduce_algo(world, algo, in, out, count, INCOLL_INT64,
                                  INCOLL_OP_SUM);
    if (*st_p != INCOLL_OK)
        return -1;
    for (size_t k = 0; k < count; k++) {
        int64_t want = 0;
        for (int r = 0; r < size; r++)
            want += input(r, it, k);
        if (out[k] != want) {
            printf("WRONG iter %d element %zu: got %lld want %lld\n", it, k,
                   (long long)out[k], (long long)want);
            return 1;
        }
    }
    return 0;
}

/* The special call of case c at iteration it. *has_result_p: this rank
 * gets data from it (so success is a wrong result). */
static incoll_status_t special(incoll_comm_h world, int c, int rank, int size,
                               int who, int it, size_t count, int64_t *in,
                               int64_t *out, int *has_result_p)
{
    size_t bytes = count * sizeof(int64_t);
    int me = rank == who;
    *has_result_p = 1;
    for (size_t k = 0; k < count; k++) {
        in[k] = input(rank, it, k);
        out[k] = -1;
    }
    switch (c) {
    case C_ROOT_NULL:
        *has_result_p = me;
        return incoll_reduce(world, in, me ? NULL : out, count, INCOLL_INT64,
                             INCOLL_OP_SUM, who);
    case C_INPLACE_RECV:
        return incoll_allreduce(world, in, me ? (void *)INCOLL_IN_PLACE : out,
                                count, INCOLL_INT64, INCOLL_OP_SUM);
    case C_OVERLAP:
        return incoll_allreduce(world, me ? (void *)(out + 1) : in, out, count,
                                INCOLL_INT64, INCOLL_OP_SUM);
    case C_DTYPE:
        return incoll_allreduce(world, in, out, count,
                                me ? INCOLL_FLOAT64 : INCOLL_INT64,
                                INCOLL_OP_SUM);
    case C_OP:
        return incoll_allreduce(world, in, out, count, INCOLL_INT64,
                                me ? INCOLL_OP_MAX : INCOLL_OP_SUM);
    case C_COUNT:
        return incoll_allreduce(world, in, out, me ? count / 2 : count,
                                INCOLL_INT64, INCOLL_OP_SUM);
    case C_BCAST_ROOTS:
        *has_result_p = rank != 0 && !me;
        return incoll_bcast(world, in, bytes, me ? who : 0);
    case C_BCAST_ALLREDUCE:
        if (me) {
            *has_result_p = rank != 0;
            return incoll_bcast(world, in, bytes, 0);
        }
        return incoll_allreduce(world, in, out, count, INCOLL_INT64,
                                INCOLL_OP_SUM);
    case C_REDUCE_ROOTS:
    case C_REDUCE_NOROOT: {
        int root = (rank < size / 2) == (c == C_REDUCE_ROOTS) ? 0 : size - 1;
        *has_result_p = rank == root;
        return incoll_reduce(world, in, out, count, INCOLL_INT64, INCOLL_OP_SUM,
                             root);
    }
    default:
        return INCOLL_ERR_INVALID_ARG;
    }
}

/* Case gone (above). 0 as expected, 3 otherwise. */
static int gone(incoll_comm_h world, int rank, int who, int64_t *buf,
                size_t bytes)
{
    incoll_comm_h sub;
    incoll_status_t st = incoll_comm_split(world, 0, rank, &sub), st2;
    if (st != INCOLL_OK) {
        printf("gone: split: %s\n", incoll_status_string(st));
        return 3;
    }
    if (rank == who)
        _exit(0); /* without a word to anybody */
    st = incoll_bcast(sub, buf, bytes, 0);
    printf("gone: first broadcast: %s\n", incoll_status_string(st));
    st2 = incoll_bcast(sub, buf, bytes, 0);
    printf("gone: second broadcast: %s\n", incoll_status_string(st2));
    fflush(stdout);
    return st != INCOLL_OK && st2 == INCOLL_OK ? 3 : 0;
}

int main(int argc, char **argv)
{
    int iters = 8, at = 2, who = 1, c = -1, rank, size;
    int nok = 0, nwrong = 0, nerr = 0, nexp = 0, nunexp = 0, deferred = 0;
    int must_next = 0;
    long late_ms = 3000, gap_ms = 0, delay_ms = 0;
    size_t count = 64;
    incoll_ctx_h ctx;
    incoll_comm_h world;
    incoll_status_t st;
    int64_t *in, *out;

    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--case") == 0) {
            for (int k = 0; k < C_N; k++)
                if (strcmp(v, cases[k]) == 0)
                    c = k;
        } else if (strcmp(a, "--iters") == 0) {
            iters = atoi(v);
        } else if (strcmp(a, "--at") == 0) {
            at = atoi(v);
        } else if (strcmp(a, "--who") == 0) {
            who = atoi(v);
        } else if (strcmp(a, "--count") == 0) {
            count = (size_t)strtoull(v, NULL, 10);
        } else if (strcmp(a, "--late-ms") == 0) {
            late_ms = atol(v);
        } else if (strcmp(a, "--gap-ms") == 0) {
            gap_ms = atol(v);
        } else if (strcmp(a, "--delay-ms") == 0) {
            delay_ms = atol(v);
        } else if (strcmp(a, "--seed") == 0) {
            seed = atol(v);
        } else if (strcmp(a, "--algo") == 0) {
            algo = strcmp(v, "rd") == 0    ? INCOLL_ALGO_RD
                   : strcmp(v, "inc") == 0 ? INCOLL_ALGO_INC
                                           : INCOLL_ALGO_AUTO;
        } else {
            fprintf(stderr, "misuse_check: unknown option %s\n", a);
            return 2;
        }
    }
    if (c < 0 || argc % 2 == 0 || count < 4 || iters <= at) {
        fprintf(stderr, "misuse_check: --case NAME (none, root-null, ...) "
                        "[--iters N > --at] [--at I] [--who R] [--count C "
                        ">= 4] [--late-ms MS]\n");
        return 2;
    }
    st = incoll_init(&ctx);
    if (st != INCOLL_OK) {
        fprintf(stderr, "misuse_check: init: %s\n", incoll_status_string(st));
        return 3;
    }
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &rank);
    incoll_comm_size(world, &size);
    if (who < 0 || who >= size || (c == C_BCAST_ROOTS && who == 0)) {
        fprintf(stderr, "misuse_check: --who must be a rank (not 0 for "
                        "bcast-roots)\n");
        return 2;
    }
    in = calloc(2 * count + 2, sizeof(*in));
    out = calloc(2 * count + 2, sizeof(*out));
    if (in == NULL || out == NULL)
        return 3;
    if (c == C_GONE)
        return gone(world, rank, who, in, count * sizeof(int64_t));
    for (int it = 0; it < iters; it++) {
        /* For skip, counts differ from one iteration to the next. */
        size_t n = c == C_SKIP ? count + (size_t)(it % 3) : count;
        int must_fail = (c == C_SKIP && it >= at) ||
                        (it == at && c != C_NONE && c != C_LATE);
        int may_fail = it + 1 == at && c != C_NONE && c != C_LATE;
        /* The late rank of deadline may find its call complete (the
         * others' parts were in when they gave up): then it is right. */
        int may_pass = it == at && c == C_DEADLINE && rank == who;
        if (gap_ms > 0 && it > 0)
            sleep_ms(gap_ms);
        int r;
        if (it == at && (c == C_LATE || c == C_DEADLINE) && rank == who) {
            printf("late iter %d: %ld ms\n", it, late_ms);
            fflush(stdout);
            sleep_ms(late_ms); /* computing: the library is not called */
        }
        if (it == at && c == C_SKIP && rank != who) {
            /* The others' broadcast, which who skips. */
            st = incoll_bcast(world, in, count * sizeof(int64_t), 0);
            if (st == INCOLL_OK && rank != 0) {
                printf("WRONG iter %d: the broadcast who skipped "
                       "succeeded\n",
                       it);
                nwrong++;
            } else if (st != INCOLL_OK) {
                nerr++;
                nexp++;
            }
        }
        if (it == at && c != C_NONE && c != C_LATE && c != C_DEADLINE &&
            c != C_SKIP) {
            int has;
            double t0;
            if (rank == who && delay_ms > 0)
                sleep_ms(delay_ms);
            t0 = now_s();
            st = special(world, c, rank, size, who, it, n, in, out, &has);
            if (st == INCOLL_OK && has) {
                printf("WRONG iter %d (%s): success where the calls differ\n",
                       it, cases[c]);
                nwrong++;
            } else if (st != INCOLL_OK) {
                printf("error iter %d (%s): %s after %.1f s\n", it, cases[c],
                       incoll_status_string(st), now_s() - t0);
                nerr++;
                nexp++;
            } else {
                nok++; /* no result here: success tells nothing wrong */
                deferred = 1;
                /* (unless no rank has one: then the error comes next) */
                must_next = c == C_REDUCE_NOROOT;
            }
            continue;
        }
        {
            double t0 = now_s();
            r = allreduce_it(world, rank, size, it, n, in, out, &st);
            if (r == 1) {
                nwrong++;
            } else if (r < 0) {
                nerr++;
                printf("error iter %d: %s after %.1f s\n", it,
                       incoll_status_string(st), now_s() - t0);
                if (must_fail || deferred || may_fail)
                    nexp++;
                else
                    nunexp++;
            } else if ((must_fail && !may_pass) || must_next) {
                printf("UNEXPECTED iter %d: success where it must fail\n", it);
                nunexp++;
            } else {
                nok++;
            }
            deferred = must_next = 0;
        }
    }
    if (c == C_SKIP && rank == who) {
        /* As many calls as the others: the job ends. */
        st = incoll_barrier(world);
        if (st != INCOLL_OK)
            nexp++, nerr++;
    }
    printf("summary ok=%d wrong=%d errors=%d expected=%d unexpected=%d\n", nok,
           nwrong, nerr, nexp, nunexp);
    fflush(stdout);
    incoll_finalize(ctx);
    free(in);
    free(out);
    if (nwrong > 0)
        return 1;
    return nunexp > 0 ? 3 : 0;
}
