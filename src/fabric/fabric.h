/*
 * The fabric lifecycle: one module brings every local fabric up and down,
 * loopback (127.0.0.1) and emulated (network namespaces, emu.h) alike,
 * with a manager (mgr_fabric.h) or without. Its users: `incoll fabric
 * up|down|restart` (tools/cmd_fabric.c), `incoll mpirun`
 * (tools/cmd_mpirun.c), the benchmarks (tools/bench_common.c) and the
 * integration tests (tests/integ.c). Daemons are started and watched
 * through daemon.h, the ANs asked whether they are ready through
 * an_stats.h.
 *
 *   spec      what is wanted (fabric_spec_t): a tree of N hosts with K
 *             children per switch, a k-ary fat-tree (levels), or a
 *             topology file; slots, payload, ports for hosts, emulation,
 *             a manager or not, a keeper for the manager
 *   plan      fabric_plan(): DIR made and cleaned of a stale fabric,
 *             fabric.conf and the topology computed and written, ports
 *             reserved on 127.0.0.1 or the emulated network built
 *   start     fabric_start(): the daemons: the manager and one AN per
 *             switch (mgr_fabric_up), or the ANs of fabric.conf alone
 *   wait      fabric_wait(): until every AN of fabric.conf answers a
 *             stats request (so it has bound its port and built its group)
 *   describe  fabric_describe(): what runs where, for people
 *   stop      fabric_stop(): every daemon of DIR stopped (SIGTERM, then
 *             SIGKILL), pid files and fabric.env removed, an emulated
 *             network taken apart
 * fabric_up() runs plan to describe; on any failure it stops what it
 * started. DIR's files are described in tools/cmd_fabric.c and
 * src/fabric/mgr_fabric.h.
 */
#ifndef INCOLL_FABRIC_FABRIC_H
#define INCOLL_FABRIC_FABRIC_H

#include "fabric/emu.h"

#include <stdio.h>

typedef struct {
    const char *dir;    /* created if missing */
    const char *bindir; /* where incoll-agg and incoll-mgr are; NULL: the
                           directory of the running program (incoll's) */
    /* The shape: hosts and radix (a tree, fabric.conf's), radix and
     * levels (a fat-tree; hosts 0 = every host port), or topology. */
    int hosts;
    int radix;
    int levels;           /* 0, 2 or 3 */
    const char *topology; /* a topology file, or NULL */
    int slots;            /* 0: the default */
    int payload;          /* 0: the default */
    int wait_s;           /* for every AN to answer */
    int host_ports;       /* give every host of fabric.conf a fixed port */
    int managed;          /* start a manager */
    int keep;             /* leave a keeper that restarts the manager */
    int emulate;          /* network namespaces (tree shapes only) */
    emu_params_t emu;     /* their links */
    int quiet;            /* nothing on stdout */
    const char *an_cpus;  /* a CPU list the AN daemons run on (as a
                             deployment's ANs have their own servers);
                             NULL: anywhere */
} fabric_spec_t;

/* A tree of one host, radix 2, managed, host ports, 5 s, not emulated. */
void fabric_spec_default(fabric_spec_t *spec);

/* 0 when the spec is consistent, else -1 with the cause in err (the CLI
 * turns it into a usage error). */
int fabric_spec_check(const fabric_spec_t *spec, char *err, size_t errlen);

typedef struct fabric fabric_t;

/* Plans the fabric of spec (see above). Returns 0 and the plan in *fab_p,
 * or -1 after printing the cause, with nothing left behind. */
int fabric_plan(const fabric_spec_t *spec, fabric_t **fab_p);
/* Starts the daemons of a plan. 0, or -1 (printed). */
int fabric_start(fabric_t *fab);
/* Waits up to spec.wait_s for every AN to answer. 0, or -1 (printed, with
 * the daemon that died or did not answer and its log). */
int fabric_wait(fabric_t *fab);
/* Prints the fabric: ANs, addresses, pids, the manager, the emulation. */
void fabric_describe(const fabric_t *fab, FILE *out);
/* After a failed start or wait: stops and removes what the plan and the
 * start made. The plan stays to be freed. */
void fabric_abort(fabric_t *fab);
/* Frees a plan (the fabric keeps running). */
void fabric_free(fabric_t *fab);
/* The plan's fabric.conf (ANs, hosts, addresses, ports, namespaces), as
 * written to DIR/fabric.conf; valid until fabric_free(). For a topology
 * that no tree spans whole (no fabric.conf), nans is 0. */
const fabric_conf_t *fabric_plan_conf(const fabric_t *fab);

/* plan, start, wait, describe (unless quiet), keeper (with keep).
 * 0, or -1 (printed) with everything it started stopped. */
int fabric_up(const fabric_spec_t *spec);

/*
 * Stops the fabric of dir: its keeper, every daemon (SIGTERM, SIGKILL
 * after 2 s), fabric.env, an emulated network. Says what it stopped on
 * stdout unless quiet. Returns 0 (also when nothing ran) or -1 (printed).
 */
int fabric_stop(const char *dir, int quiet);

/*
 * Starts the manager of dir (absolute) again if it is gone, in the root
 * switch's namespace for an emulated fabric (mgr_fabric_restart), and
 * waits up to wait_s for the ANs to register. Returns 0 or -1 (printed).
 */
int fabric_restart_mgr(const char *dir, int wait_s, int quiet);

#endif
