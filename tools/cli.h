/*
 * The `incoll` command: one subcommand per file, each an entry point
 * `int cmd_<name>(int argc, char **argv)` where argv[0] is the subcommand
 * name. Return value is the process exit status.
 */
#ifndef INCOLL_CLI_H
#define INCOLL_CLI_H

#include <stddef.h>

int cmd_fabric(int argc, char **argv); /* tools/cmd_fabric.c */
int cmd_run(int argc, char **argv);    /* tools/cmd_run.c */
int cmd_stat(int argc, char **argv);   /* tools/cmd_stat.c */
int cmd_bench(int argc, char **argv);  /* tools/cmd_bench.c */
int cmd_info(int argc, char **argv);   /* tools/cmd_info.c */
int cmd_sim(int argc, char **argv);    /* tools/cmd_sim.c: runs incoll-sim */
int cmd_mpirun(int argc, char **argv); /* tools/cmd_mpirun.c */
int cmd_job(int argc, char **argv);    /* tools/cmd_job.c */
int cmd_tune(int argc, char **argv);   /* tools/cmd_tune.c */

/* Where a program or library that ships with incoll is (tools/paths.c). */
typedef enum {
    CLI_PLACE_BIN,     /* beside `incoll`: the daemons, incoll-sim */
    CLI_PLACE_LIBEXEC, /* helper programs: beside `incoll` in the build
                        * tree, libexecdir/incoll when installed */
    CLI_PLACE_LIB,     /* libraries: ../lib from `incoll`, or libdir */
} cli_place_t;

/* Writes the directory of this executable into buf; 0, or -1 if it cannot
 * be read or does not fit. */
int cli_self_dir(char *buf, size_t len);

/* Writes the path of name in place into buf: the build tree's if the file
 * is there, else the installed tree's if it is there, else the build
 * tree's (so that an error names where it was looked for first). 0, or -1
 * if this executable's directory cannot be read. */
int cli_companion_path(cli_place_t place, const char *name, char *buf,
                       size_t len);

/* `incoll bench kernel`: tools/bench_kernel.c */
int bench_kernel_main(int argc, char **argv);

#endif
