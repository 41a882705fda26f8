/*
 * incoll: one command with subcommands, like git or ucx_info. Each
 * subcommand lives in its own file (tools/cmd_*.c) behind the entry points
 * of tools/cli.h; this file only dispatches.
 */
#include "incoll.h"

#include "common/log.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} cli_cmd_t;

static const cli_cmd_t commands[] = {
    {"fabric", cmd_fabric, "start or stop a local fabric of aggregation nodes"},
    {"run", cmd_run, "launch N ranks of a program on a fabric"},
    {"mpirun", cmd_mpirun, "run an MPI program with its collectives offloaded"},
    {"stat", cmd_stat, "print the counters of every aggregation node"},
    {"job", cmd_job, "register a job with the manager, or end it"},
    {"bench", cmd_bench, "run a benchmark (kernel, allreduce, pingpong)"},
    {"tune", cmd_tune,
     "measure where each MPI collective is fastest, write the table"},
    {"sim", cmd_sim, "simulate allreduce on large fat-trees (SimGrid)"},
    {"info", cmd_info,
     "print the version, the reduction kernels and every knob"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: incoll <command> [options]\n"
                 "       incoll --help | --version\n\ncommands:\n");
    for (const cli_cmd_t *c = commands; c->name; c++)
        fprintf(out, "  %-8s %s\n", c->name, c->summary);
    fprintf(out, "\n`incoll <command> --help` describes each command; "
                 "docs/cli.md has the details.\n");
}

int main(int argc, char **argv)
{
    const char *cmd;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("incoll %d.%d\n", INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR);
        return 0;
    }
    for (const cli_cmd_t *c = commands; c->name; c++) {
        if (strcmp(cmd, c->name) == 0) {
            log_set_name(c->name);
            return c->fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "incoll: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
