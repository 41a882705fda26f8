/*
 * Starting and watching a local fabric's daemons: what the fabric
 * lifecycle (fabric.h), the managed-fabric launcher (mgr_fabric.h) and the
 * network emulation (emu.h) share. A daemon runs detached (its own
 * session, stdin from /dev/null, its output in a log, none of the
 * caller's descriptors), maybe in a network namespace of an emulated
 * fabric, and is known by a pid file DIR/<name>.pid.
 */
#ifndef INCOLL_FABRIC_DAEMON_H
#define INCOLL_FABRIC_DAEMON_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Sleeps ms milliseconds, also when a signal interrupts. */
void fabric_sleep_ms(int ms);

/* mkdir -p with mode 0755. 0, or -1 with errno. */
int fabric_mkdir_p(const char *dir);

/* In a child just forked: detaches it (its own session, stdin from
 * /dev/null, stdout and stderr to log_path, appended or truncated, no
 * other descriptor of the parent's, SIGHUP ignored). */
void fabric_detach(const char *log_path, int append);

/*
 * Starts argv[0] with argv, detached (fabric_detach), output to log_path
 * (appended when append, else truncated), in network namespace netns unless
 * that is NULL or "" (the child prints why it could not enter it to the log and
 * exits 127). Returns the pid (a child of the caller), or -1 with errno when it
 * could not fork.
 */
pid_t fabric_spawn(const char *netns, char *const argv[], const char *log_path,
                   int append);
/* fabric_spawn, and the child runs only on the CPUs in cpus (unless NULL),
 * set before it execs, so every thread it makes inherits them. */
pid_t fabric_spawn_on(const char *netns, const cpu_set_t *cpus,
                      char *const argv[], const char *log_path, int append);

/*
 * Parses a CPU list as taskset -c and /proc's Cpus_allowed_list spell it
 * ("1", "0-3", "0,2-3") into set. Every CPU must be one this process may
 * run on. 0, or -1 with the cause in err (naming the list and the CPUs
 * there are).
 */
int fabric_cpus_parse(const char *text, cpu_set_t *set, char *err, size_t len);
/* set as a CPU list ("0-1,3"); "" when empty. */
const char *fabric_cpus_str(const cpu_set_t *set, char *buf, size_t len);

/* Writes text to path atomically (a temporary file, then rename), with
 * mode. 0, or -1 with errno. */
int fabric_write_file(const char *path, const char *text, mode_t mode);

/* Writes pid to path atomically (a temporary file, then rename). 0, or -1
 * with errno. */
int fabric_pidfile_write(const char *path, pid_t pid);
/* The pid in the file at path, or -1 (missing, or not a pid). */
pid_t fabric_pidfile_read(const char *path);

/*
 * 1 if pid is a running incoll-agg or incoll-mgr. Reads /proc rather than
 * trusting kill(pid, 0): an exited daemon may linger as a zombie when
 * nobody reaps it, and a recycled pid may belong to something else.
 */
int fabric_daemon_alive(pid_t pid);

/*
 * Waits until the manager pid has written its address (a line) to
 * port_path, until deadline_ms (now_ms() time). Returns 0 with the address
 * in addr, or -1 when the manager died or the time ran out.
 */
int fabric_wait_port_file(const char *port_path, pid_t pid,
                          uint64_t deadline_ms, char *addr, size_t len);

/*
 * Asks the manager at addr (proving secret) until want ANs have registered
 * or deadline_ms passes. Returns how many were registered at the last
 * answer (-1: the manager never answered).
 */
int fabric_wait_ans_up(const char *addr, const char *secret, int want,
                       uint64_t deadline_ms);

#endif
