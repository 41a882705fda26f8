/*
 * Support code shared by the integration tests (tests/test_integ_*.c and
 * test_recovery.c): where the test programs are, shell commands run with a
 * time limit (their output collected in memory or appended to a file),
 * fabrics brought up and down through src/fabric/fabric.h, counters out of
 * `incoll stat` output and a fabric's fabric.conf, a check program run on a
 * fresh fabric, and daemons started directly (spawn) that stop_all() stops
 * whatever happens.
 */
#ifndef INCOLL_TEST_INTEG_H
#define INCOLL_TEST_INTEG_H

#include "test.h"

#include "incoll.h"

#include "common/clock.h"
#include "common/fabric_conf.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Most output proc_wait() keeps of one command. */
#define OUT_MAX (64 * 1024)

/* Directory of the test programs (INCOLL_TEST_PROGDIR, else build/tests). */
const char *progdir(void);

/* A command started with sh -c in its own process group, its stdout and
 * stderr collected, killed (the whole group) after timeout_s. */
typedef struct {
    pid_t pid;
    int fd;
    char *out;
    size_t len;
    double deadline;
} proc_t;

/* Starts the command; 0, or -1 when it could not (p->out is still freed
 * by the caller). The command dies with the test. */
int proc_start(proc_t *p, int timeout_s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Waits for the command; returns its exit status, 128+signal, or -1 when it
 * had to be killed for running too long. p->out holds its output. */
int proc_wait(proc_t *p);
/* Runs a command to the end; *out_p (caller frees) holds its output. */
int run_cmd(char **out_p, int timeout_s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Runs a shell command in its own process group with stdout and stderr
 * appended to out_path; kills the group after timeout_s. Returns the exit
 * status, 128 + signal, or -1 on a timeout or when it could not start.
 */
int run_cmd_file(const char *out_path, int timeout_s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints the last lines of a file to stderr (a failing test's evidence). */
void show_tail(const char *path);
/* 1 when a line of the file at path contains text. */
int file_has(const char *path, const char *text);

/* The make variables that install the tree as it was built (its flags, and
 * the libdir and libexecdir compiled into its programs: build/.flags and
 * build/.dirs, so that make rebuilds and relinks nothing under the tests
 * running beside) under DESTDIR dest with prefix /usr, into vars; libdir
 * (PATH_MAX bytes, or NULL) gets the library directory. */
void test_install_vars(const char *dest, char *vars, size_t len, char *libdir);
/* Brings a managed fabric of hosts hosts (radix) up in dir through the
 * fabric lifecycle module (src/fabric/fabric.h, as `incoll fabric up
 * --hosts --radix` does), the daemons from test_bindir(). 0, or -1 after
 * printing the cause; the caller still calls test_fabric_down(). */
int test_fabric_up(const char *dir, int hosts, int radix);
/* Stops the fabric of dir (fabric_stop(), as `incoll fabric down`). */
void test_fabric_down(const char *dir);
/* Finds "key=<number>" on the line "an=<an> ..." of stat output. */
int stat_get(const char *out, const char *an, const char *key, uint64_t *v);
/* Contributions accepted and reductions so far of the AN an of the fabric
 * in dir (`incoll stat`); 0, or -1 when unreadable. */
int an_counts(const char *dir, const char *an, uint64_t *contribs_p,
              uint64_t *reductions_p);
/* Loads dir/fabric.conf into conf, printing the error; 0 or -1. */
int load_conf(const char *dir, fabric_conf_t *conf);
/*
 * Gives every host of DIR/fabric.conf without a port a distinct free port
 * on its address. The sockets stay bound until all ports are chosen, so
 * the kernel cannot hand out one port twice. Returns 0 or -1.
 */
int assign_host_ports(const char *dir);

/* 1 when build/bin/incoll, incoll-agg and the test program prog (in
 * progdir()) exist. */
int have_fabric_binaries(const char *prog);
/*
 * Brings up a fabric of n hosts (radix k) in a fresh directory
 * <test_tmpdir()>/<dirtag><seq>, with fixed host ports unless keep_port0,
 * runs the test program prog (in progdir()) on it with `incoll run`, args
 * and the environment env (e.g. fault knobs) and INCOLL_JOB
 * <jobtag>-<seq>-<pid>, brings the fabric down and returns prog's exit
 * status (or -1). The output of all of it is in the file named in out
 * (<dir>.txt).
 */
int run_fabric_check(const char *prog, const char *dirtag, const char *jobtag,
                     int n, int k, int keep_port0, const char *env,
                     const char *args, char *out, size_t outlen);

/* A TCP port of 127.0.0.1 nobody uses now (for daemons given a port). */
int free_tcp_port(void);
/* Sleeps s seconds (also when interrupted). */
void sleep_s(double s);
/* Starts argv[0] with argv, env added to the environment and stdout and
 * stderr appended to logpath; remembers it for stop_all(). Its pid, or <= 0. */
pid_t spawn(const char *logpath, char **argv, char **env);
/* Remembers a process started otherwise, for stop_all(). */
void track_pid(pid_t pid);
/* Waits up to timeout_s for pid; returns its exit status, or -1 (killed
 * then) on timeout, -2 if killed by a signal. */
int wait_pid(pid_t pid, double timeout_s);
/* SIGTERM to everything spawn() started and still running, then waits for
 * each (3 s, then SIGKILL). */
void stop_all(void);
/* The whole file (NUL-terminated, caller frees); "" when it cannot be
 * opened. */
/* incoll_init_version(major, minor, p) with stderr captured into buf
 * (len bytes), then incoll_finalize when it succeeded; its status. */
incoll_status_t init_captured(unsigned major, unsigned minor,
                              const incoll_init_params_t *p, char *buf,
                              size_t len);
char *slurp(const char *path);
/* Operations streamed, summed over the info lines ("stream: group G: S of
 * N operations streamed") in the file at path. */
unsigned long long streamed_in(const char *path);
/* Runs a shell command (no time limit: for quick ones) with stdout and
 * stderr written to the file out. Returns the exit status, 128 when it died
 * of a signal, or -1 if it could not run. */
int sh(const char *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* sh() in directory dir (e.g. test_srcdir()). */
int sh_in(const char *dir, const char *out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
