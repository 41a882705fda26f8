/*
 * The emulated multi-host fabric: real links with real rates, on one
 * machine, out of Linux network namespaces (`incoll fabric up --emulate`).
 *
 * Every host and every switch of the tree in fabric.conf gets its own
 * network namespace, named "<prefix>-h<rank>" and "<prefix>-<an name>"
 * where the prefix ("inc" and 6 random hex digits) is unique to the fabric,
 * so nothing outside the fabric is ever touched. Each tree edge is a veth
 * pair with MTU 9000 and a tc tbf shaper on both ends (egress of each
 * direction), so every link direction carries at most the configured rate.
 *
 * Addresses are private (10.77.0.0/16) and exist only inside these
 * namespaces: no interface of the fabric is in the caller's namespace and
 * no namespace has a route outside 10.77.0.0/16, so no packet can leave
 * the machine. Each tree edge is a /30 ("upper" end .1 on the switch,
 * "lower" end .2 on the child). A host's address is the lower end of its
 * link; an AN binds 10.77.0.<i+1>:41000 on its switch's loopback. Switch
 * namespaces forward IPv4 with a route per address below them and a
 * 10.77.0.0/16 route up to their parent, so host-to-host traffic (the
 * host-based algorithms) crosses the same shaped links as the in-network
 * path: host -> leaf -> ... -> common ancestor -> ... -> leaf -> host.
 * The manager (incoll-mgr) runs in the root switch's namespace on the
 * root AN's address, TCP port EMU_MGR_PORT, which every namespace of the
 * fabric routes to: ANs register there and hosts join from their own
 * address, so the manager's groups use the addresses the ANs see.
 *
 * What was made is written to DIR/emu.state before it is made, and the
 * prefix is registered in /run/incoll-emu/<prefix> (holding DIR), so a
 * fabric whose creator crashed can always be found and removed:
 * emu_destroy(DIR) for a known directory, emu_sweep_stale() for fabrics
 * whose directory is gone.
 *
 * All of this needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); emu_usable()
 * says why not, and callers fall back to the loopback fabric.
 */
#ifndef INCOLL_EMU_H
#define INCOLL_EMU_H

#include "common/fabric_conf.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Default host link rate: this total over all host links, shared equally
 * (100 Mbit/s each for 8 hosts, 50 for 16), within 10 Mbit/s .. 1 Gbit/s.
 * Every byte on a link costs CPU on this one machine (sockets, veths,
 * forwarding, the ANs); measured on 2 cores, a fabric whose host links
 * together carry 800 Mbit/s leaves the cores about half idle, so the
 * links, not the CPU, limit what the benchmarks see. docs/benchmarks.md
 * has the numbers.
 */
#define EMU_AGGREGATE_RATE_DEFAULT 800000000ull
uint64_t emu_default_link_rate(int nhosts);
#define EMU_MTU_DEFAULT 9000
#define EMU_AN_PORT 41000
#define EMU_HOST_PORT 42000
#define EMU_MGR_PORT 40000 /* tcp, on the root AN's address */
#define EMU_STATE_FILE "emu.state"
#define EMU_REGISTRY_DIR "/run/incoll-emu"
#define EMU_PREFIX_MAX 16

typedef struct {
    uint64_t link_rate;   /* bit/s, each direction of a host link; 0 =
                             emu_default_link_rate() (emu_create fills in
                             what it used) */
    uint64_t uplink_rate; /* bit/s of a switch-to-switch link; 0: the sum of
                             the host links below it (non-blocking, as a
                             fat tree) */
    int mtu;              /* of every veth */
    uint64_t queue_bytes; /* tbf queue limit per link direction; 0: default
                             (max(16 MiB, 100 ms at the rate)) */
} emu_params_t;

/* What DIR/emu.state records. */
typedef struct {
    char prefix[EMU_PREFIX_MAX];
    uint64_t link_rate;
    uint64_t uplink_rate; /* as given: 0 = non-blocking */
    int mtu;
    int nnetns;
    char (*netns)[FABRIC_NETNS_MAX];
} emu_state_t;

void emu_params_default(emu_params_t *params);

/*
 * 0 when this process can build an emulated fabric (root, `ip` and `tc`
 * found, network namespaces supported); otherwise -1 with the reason in
 * why.
 */
int emu_usable(char *why, size_t len);

/*
 * Parses a rate: a number with an optional unit k, m, g (bit/s, powers of
 * 1000) and an optional "bit" or "bps" suffix ("100mbit", "1g", "250M",
 * "5e8"). Returns 0 and writes *bps_p, or -1.
 */
int emu_parse_rate(const char *text, uint64_t *bps_p);
/* "100 Mbit/s", "1.5 Gbit/s". */
const char *emu_rate_str(uint64_t bps, char *buf, size_t len);

/*
 * Builds the namespaces, links, addresses, routes and shapers for conf
 * (from fabric_conf_generate) and fills in conf's AN and host addresses,
 * host ports and netns names; the caller then saves conf and starts the
 * ANs inside their namespaces. A stale emulated fabric recorded in DIR is
 * removed first. On failure everything made so far is removed and the
 * cause is logged.
 */
incoll_status_t emu_create(const char *dir, fabric_conf_t *conf,
                           emu_params_t *params);

/*
 * Removes the emulated fabric recorded in DIR: stops every process inside
 * its namespaces (SIGTERM, SIGKILL after a grace period), deletes the
 * namespaces (which deletes their veths and qdiscs), DIR/emu.state and the
 * registry entry. Also removes namespaces of the recorded prefix that the
 * record missed (a crash between recording and creating). INCOLL_OK when
 * nothing is left, also when nothing was there; *removed_p (may be NULL)
 * gets the number of namespaces removed.
 */
incoll_status_t emu_destroy(const char *dir, int *removed_p);

/* 1 if DIR records an emulated fabric (DIR/emu.state exists). */
int emu_present(const char *dir);

/* Reads DIR/emu.state; the caller frees st with emu_state_free. */
incoll_status_t emu_state_load(const char *dir, emu_state_t *st);
void emu_state_free(emu_state_t *st);

/*
 * Removes every registered emulated fabric whose directory no longer
 * records it (the directory was deleted after a crash). Returns how many
 * were removed.
 */
int emu_sweep_stale(void);

/*
 * The AN whose namespace and address the manager of an emulated fabric
 * uses (the root of conf's tree), as an index into conf->ans; -1 when
 * conf is not emulated (its ANs have no netns).
 */
int emu_mgr_an(const fabric_conf_t *conf);

/* Number of namespaces whose name starts with prefix (for tests). */
int emu_count_netns(const char *prefix);

/*
 * Moves the calling process into network namespace name (setns). Call it
 * in a child between fork and exec. Returns 0, or -1 with errno set.
 */
int emu_netns_enter(const char *name);

/*
 * Enters namespace name for a while: *saved_fd_p gets a descriptor of the
 * current namespace for emu_netns_leave(). Sockets opened in between stay
 * in name. Single-threaded callers only. Returns 0 or -1 (logged).
 */
int emu_netns_push(const char *name, int *saved_fd_p);
void emu_netns_leave(int saved_fd);

/*
 * Path of iproute2's `ip`, or NULL: launchers run a program inside a
 * host's namespace with `ip netns exec NAME PROGRAM ARGS...`, which also
 * gives it that namespace's view of /sys (fabric_spawn, daemon.h, only
 * switches the network namespace). The string is static.
 */
const char *emu_ip_path(void);

#endif
