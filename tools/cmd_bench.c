/*
 * `incoll bench <kind> ...`: dispatches to one benchmark. Each benchmark
 * is an entry point taking argv with argv[0] naming it. Kinds starting
 * with '_' are the hidden per-rank halves that a benchmark starts under
 * `incoll run`; they are not listed.
 */
#include "cli.h"

#include "bench_common.h"
#include "bench_hier.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} bench_kind_t;

static const bench_kind_t kinds[] = {
    {"kernel", bench_kernel_main, "reduction kernels, vectorized vs scalar"},
    {"allreduce", bench_allreduce_main,
     "allreduce latency and bandwidth, in-network vs host algorithms"},
    {"pingpong", bench_pingpong_main, "point-to-point round trips"},
    {"agg", bench_agg_main,
     "an aggregation node's CPU time per datagram (simulator calibration)"},
    {"bcast", bench_coll_main, "broadcast, incoll vs host algorithms"},
    {"reduce", bench_coll_main, "reduce, incoll vs host algorithms"},
    {"barrier", bench_coll_main, "barrier, incoll vs host algorithms"},
    {"allgather", bench_coll_main, "allgather, incoll vs host algorithms"},
    {"gather", bench_coll_main, "gather, incoll vs host algorithms"},
    {"scatter", bench_coll_main, "scatter, incoll vs host algorithms"},
    {"reduce_scatter", bench_coll_main,
     "reduce_scatter, incoll vs host algorithms"},
    {"iallreduce", bench_iallreduce_main,
     "nonblocking allreduce: overlap with computation (OSU)"},
    {"_allreduce", bench_allreduce_rank_main, NULL},
    {"_iallreduce", bench_iallreduce_rank_main, NULL},
    {"_coll", bench_coll_rank_main, NULL},
    {"_hier", bench_hier_rank_main, NULL},
    {"_pingpong", bench_pingpong_rank_main, NULL},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: incoll bench <kind> [options]\n\nkinds:\n");
    for (const bench_kind_t *k = kinds; k->name; k++)
        if (k->summary)
            fprintf(out, "  %-10s %s\n", k->name, k->summary);
    fprintf(out, "\n`incoll bench <kind> --help` lists a benchmark's "
                 "options.\n");
}

int cmd_bench(int argc, char **argv)
{
    char have[256] = "";
    size_t off = 0;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    for (const bench_kind_t *k = kinds; k->name; k++) {
        if (strcmp(argv[1], k->name) == 0)
            return k->fn(argc - 1, argv + 1);
        if (k->summary && off < sizeof(have))
            off += (size_t)snprintf(have + off, sizeof(have) - off, "%s%s",
                                    off ? ", " : "", k->name);
    }
    fprintf(stderr, "incoll bench: unknown benchmark '%s' (have: %s)\n",
            argv[1], have);
    return 2;
}
