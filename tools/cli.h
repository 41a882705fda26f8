/*
 * The `incoll` command: one subcommand per file, each an entry point
 * `int cmd_<name>(int argc, char **argv)` where argv[0] is the subcommand
 * name. Return value is the process exit status.
 */
#ifndef INCOLL_CLI_H
#define INCOLL_CLI_H

int cmd_fabric(int argc, char **argv); /* tools/cmd_fabric.c */
int cmd_run(int argc, char **argv);    /* tools/cmd_run.c */
int cmd_stat(int argc, char **argv);   /* tools/cmd_stat.c */
int cmd_bench(int argc, char **argv);  /* tools/cmd_bench.c */
int cmd_info(int argc, char **argv);   /* tools/cmd_info.c */
int cmd_sim(int argc, char **argv);    /* tools/cmd_sim.c: runs incoll-sim */
int cmd_mpirun(int argc, char **argv); /* tools/cmd_mpirun.c */

/* `incoll bench kernel`: tools/bench_kernel.c */
int bench_kernel_main(int argc, char **argv);

#endif
