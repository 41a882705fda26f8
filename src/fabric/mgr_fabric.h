/*
 * A local managed fabric for the CLI (`incoll fabric up --topology FILE`
 * or `--radix K --levels L`, `incoll run`, `incoll stat`): an incoll-mgr
 * and one incoll-agg per switch on 127.0.0.1, described by files in one
 * directory:
 *
 *   DIR/topology     the topology in use (docs/topology.md)
 *   DIR/secret       the fabric secret, mode 0600
 *   DIR/fabric.env   INCOLL_MGR=host:port, INCOLL_SECRET_FILE=path and
 *                    INCOLL_HOSTS (the topology's hosts in order), exported,
 *                    for `. DIR/fabric.env` and for `incoll run`
 *   DIR/mgr.pid, DIR/mgr.log, DIR/mgr.port, DIR/<switch>.pid,
 *   DIR/<switch>.log
 *   DIR/mgr.env      the manager's INCOLL_MGR_* settings at `fabric up`,
 *                    for `incoll fabric restart`
 *
 * The fabric lifecycle (fabric.h) also writes DIR/fabric.conf for
 * the processes that run without the manager; the ANs it names serve its
 * world group as well as the manager's groups. In an emulated fabric
 * (emu.h) they run in the network namespaces fabric.conf names, and
 * the manager on an address inside them.
 */
#ifndef INCOLL_FABRIC_MGR_FABRIC_H
#define INCOLL_FABRIC_MGR_FABRIC_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    const char *dir;      /* absolute, existing, without a running fabric */
    const char *bindir;   /* where incoll-mgr and incoll-agg are */
    const char *topology; /* a topology file, or NULL to generate: */
    int radix;            /* k-ary fat-tree, 2 or 3 levels */
    int levels;
    int hosts;                /* 0: every host port */
    int wait_s;               /* for every AN to register */
    int quiet;                /* no summary on stdout */
    const char *conf;         /* a fabric.conf, or NULL: the ANs it names
                                 load it (their address and its world group
                                 come from it), the others bind the topology's
                                 address or any port */
    const char *listen;       /* the manager's IP:PORT; NULL: 127.0.0.1:0 */
    const cpu_set_t *an_cpus; /* the ANs run on these CPUs; NULL: any */
} mgr_fabric_params_t;

/*
 * Starts the fabric. Returns 0, or -1 after printing the cause on stderr
 * (file:line for a bad topology); the caller then stops what was started
 * (every DIR/ *.pid). Daemons are detached (their own session) and write
 * their pid files through the caller's conventions: DIR/<name>.pid. The
 * manager runs in the caller's network namespace, and mgr_fabric_up talks
 * to it from there: a caller whose manager listens inside an emulated
 * fabric enters a namespace of it first.
 */
int mgr_fabric_up(const mgr_fabric_params_t *params);

/*
 * Starts the manager of the fabric in DIR again, on the address DIR/fabric.env
 * gives its clients, with the topology, secret and settings (DIR/mgr.env)
 * of `fabric up`, when DIR/mgr.pid names no running manager; its log goes
 * on in DIR/mgr.log. Waits up to wait_s for the ANs to register again (they
 * reconnect by themselves, as processes of running jobs do). Uses dir,
 * bindir, wait_s and quiet of params; the manager runs in the caller's
 * network namespace. Returns 0 (also when the manager was running), or -1
 * after printing the cause.
 */
int mgr_fabric_restart(const mgr_fabric_params_t *params);

/* 1 if DIR/fabric.env exists (a managed fabric), else 0. */
int mgr_fabric_managed(const char *dir);

/*
 * Reads DIR/fabric.env into addr (INCOLL_MGR) and secret
 * (INCOLL_SECRET_FILE). Returns 0, or -1 with the cause in err.
 */
int mgr_fabric_env(const char *dir, char *addr, size_t addrlen, char *secret,
                   size_t secretlen, char *err, size_t errlen);

/*
 * The host names of DIR/topology, in file order, in a malloc'ed array of
 * malloc'ed strings (free with mgr_fabric_free_names). Returns the count,
 * or -1 with the cause in err.
 */
int mgr_fabric_host_names(const char *dir, char ***names_p, char *err,
                          size_t errlen);
void mgr_fabric_free_names(char **names, int n);

/* Prints the last non-blank line of a daemon's log to stderr, to say why
 * it stopped. */
void mgr_fabric_log_tail(const char *path);

#endif
