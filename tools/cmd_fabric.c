/*
 * `incoll fabric up|down|restart`, the command line of the fabric
 * lifecycle (fabric.h): a local fabric on 127.0.0.1 (or, with
 * --emulate, in network namespaces with shaped links: src/fabric/emu.h): an
 * aggregation manager (incoll-mgr, docs/manager.md) and one incoll-agg
 * daemon per aggregation node, described by DIR/topology and
 * DIR/fabric.env for the manager and by DIR/fabric.conf for processes that
 * run without one.
 *
 * DIR holds everything about one fabric: fabric.conf, topology, secret,
 * fabric.env, one <name>.pid and one <name>.log per AN, mgr.pid and mgr.log
 * for the manager, and emu.state for an emulated one. A pid file is
 * written by `fabric up` right after the fork (the daemon does not fork again,
 * so the pid is the daemon's) and removed by `fabric down`. A pid file whose
 * process is gone, or is no longer an incoll-agg or incoll-mgr, is stale;
 * so is a manager whose ANs are all gone: `fabric up` cleans it up and
 * proceeds.
 *
 * Three shapes (docs/topology.md):
 *   --hosts N --radix K       the tree of fabric.conf (K children per
 *                             switch), given to the manager as a topology
 *                             of one tree;
 *   --radix K --levels L      a k-ary fat-tree ([--hosts N]);
 *   --topology FILE           any topology.
 * For the last two fabric.conf describes the first tree that reaches every
 * host (its world group); the other switches only serve the manager.
 * --no-mgr runs the ANs from fabric.conf alone, as before the manager
 * existed. `fabric restart` starts a dead manager again on its address;
 * `up --keep` leaves a keeper (DIR/keep.pid) that does so whenever it
 * dies, and which `fabric down` stops first. --emulate (the first shape
 * only) runs the manager in the root switch's namespace, on the root AN's
 * address (src/fabric/emu.h).
 */
#include "cli.h"
#include "fabric/fabric.h"
#include "common/log.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll fabric up --dir DIR (--hosts N --radix K |\n"
        "                        --radix K --levels L [--hosts N] |\n"
        "                        --topology FILE)\n"
        "                        [--slots S] [--payload BYTES] [--wait SEC]\n"
        "                        [--no-host-ports] [--no-mgr] [--keep]\n"
        "                        [--an-cpus LIST]\n"
        "                        [--emulate [--link-rate R] [--uplink-rate R]\n"
        "                                   [--mtu BYTES]]\n"
        "       incoll fabric down --dir DIR\n"
        "       incoll fabric restart --dir DIR [--wait SEC]\n"
        "\n"
        "up    starts an aggregation manager (incoll-mgr, docs/manager.md)\n"
        "      and one incoll-agg per switch, and waits up to --wait seconds\n"
        "      (default 5) until every AN has registered with the manager\n"
        "      and answers a stats request. The fabric is\n"
        "        --hosts N --radix K   a tree of K children per switch over\n"
        "                              N hosts (one tree);\n"
        "        --radix K --levels L  a k-ary fat-tree of 2 or 3 levels,\n"
        "                              K/2 hosts per leaf (--hosts: fewer);\n"
        "        --topology FILE       any topology (docs/topology.md).\n"
        "      DIR gets topology (the one in use), secret (mode 0600),\n"
        "      fabric.env (INCOLL_MGR, INCOLL_SECRET_FILE and INCOLL_HOSTS,\n"
        "      exported: `incoll run` passes them on; `. DIR/fabric.env`\n"
        "      for mpirun), fabric.conf (the first tree that reaches\n"
        "      every host, for processes without a manager), logs\n"
        "      (DIR/<name>.log, mgr.log) and pids (DIR/<name>.pid,\n"
        "      mgr.pid). Every AN and every host of fabric.conf gets a fixed\n"
        "      port on 127.0.0.1 (--no-host-ports: hosts pick one at start,\n"
        "      and without a manager the host-based algorithms are\n"
        "      unavailable). --no-mgr starts only the ANs of fabric.conf,\n"
        "      without a manager (--hosts N --radix K only).\n"
        "      --emulate puts every host and switch in its own network\n"
        "      namespace, linked by veths shaped to --link-rate (as root;\n"
        "      see src/fabric/emu.h); the manager runs in the root switch's\n"
        "      namespace. --keep leaves a keeper behind (DIR/keep.pid,\n"
        "      keep.log) that starts the manager again whenever it dies, as\n"
        "      `fabric restart` does, until `fabric down`.\n"
        "      --an-cpus LIST runs every AN daemon only on those CPUs (as\n"
        "      taskset -c spells them: 1, 0-3, 0,2), as a deployment's ANs\n"
        "      have servers of their own beside their switches; default:\n"
        "      any CPU.\n"
        "      Refuses if DIR holds a running fabric; a stale\n"
        "      one is cleaned up.\n"
        "down  stops every daemon of DIR, the manager included (SIGTERM,\n"
        "      then SIGKILL after 2 s), removes the pid files, fabric.env\n"
        "      and an emulated fabric's namespaces. Succeeds if nothing\n"
        "      runs.\n"
        "restart  starts the manager of DIR again if it is gone (killed,\n"
        "      crashed), on the address of DIR/fabric.env and with the\n"
        "      settings of `fabric up` (DIR/mgr.env), and waits up to --wait\n"
        "      seconds (default 10) for the ANs to register again; the ANs\n"
        "      and the processes of running jobs reconnect by themselves and\n"
        "      the manager adopts their groups. Does nothing if the manager\n"
        "      runs. For a manager kept alive by systemd, see\n"
        "      docs/manager.md.\n");
}

static int cli_up(int argc, char **argv)
{
    enum {
        OPT_NO_HOST_PORTS = 256,
        OPT_EMULATE,
        OPT_LINK_RATE,
        OPT_UPLINK_RATE,
        OPT_MTU,
        OPT_TOPOLOGY,
        OPT_LEVELS,
        OPT_NO_MGR,
        OPT_KEEP,
        OPT_AN_CPUS
    };
    static const struct option longopts[] = {
        {"hosts", required_argument, NULL, 'n'},
        {"radix", required_argument, NULL, 'k'},
        {"dir", required_argument, NULL, 'd'},
        {"slots", required_argument, NULL, 's'},
        {"payload", required_argument, NULL, 'p'},
        {"wait", required_argument, NULL, 'w'},
        {"no-host-ports", no_argument, NULL, OPT_NO_HOST_PORTS},
        {"emulate", no_argument, NULL, OPT_EMULATE},
        {"link-rate", required_argument, NULL, OPT_LINK_RATE},
        {"uplink-rate", required_argument, NULL, OPT_UPLINK_RATE},
        {"mtu", required_argument, NULL, OPT_MTU},
        {"topology", required_argument, NULL, OPT_TOPOLOGY},
        {"levels", required_argument, NULL, OPT_LEVELS},
        {"no-mgr", no_argument, NULL, OPT_NO_MGR},
        {"keep", no_argument, NULL, OPT_KEEP},
        {"an-cpus", required_argument, NULL, OPT_AN_CPUS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir_arg = NULL, *topo_arg = NULL, *an_cpus = NULL;
    char err[256];
    int hosts = 0, radix = 0, slots = 0, payload = 0, wait_s = 5, opt;
    int host_ports = 1, emulate = 0, levels = 0, no_mgr = 0, keep = 0;
    fabric_spec_t spec;
    emu_params_t ep;

    emu_params_default(&ep);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "n:k:d:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            hosts = atoi(optarg);
            break;
        case 'k':
            radix = atoi(optarg);
            break;
        case 'd':
            dir_arg = optarg;
            break;
        case 's':
            slots = atoi(optarg);
            break;
        case 'p':
            payload = atoi(optarg);
            break;
        case 'w':
            wait_s = atoi(optarg);
            break;
        case OPT_NO_HOST_PORTS:
            host_ports = 0;
            break;
        case OPT_EMULATE:
            emulate = 1;
            break;
        case OPT_TOPOLOGY:
            topo_arg = optarg;
            break;
        case OPT_LEVELS:
            levels = atoi(optarg);
            if (levels < 2 || levels > 3) {
                fprintf(stderr, "incoll fabric up: --levels is 2 or 3\n");
                return 2;
            }
            break;
        case OPT_NO_MGR:
            no_mgr = 1;
            break;
        case OPT_KEEP:
            keep = 1;
            break;
        case OPT_AN_CPUS:
            an_cpus = optarg;
            break;
        case OPT_LINK_RATE:
        case OPT_UPLINK_RATE:
            if (emu_parse_rate(optarg, opt == OPT_LINK_RATE
                                           ? &ep.link_rate
                                           : &ep.uplink_rate) != 0) {
                fprintf(stderr,
                        "incoll fabric up: bad rate '%s' (want e.g. "
                        "100mbit, 1g)\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_MTU:
            ep.mtu = atoi(optarg);
            if (ep.mtu < 576 || ep.mtu > 65535) {
                fprintf(stderr, "incoll fabric up: bad mtu '%s' (576..65535)\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    fabric_spec_default(&spec);
    /* Arguments left over are the same usage error as no --dir. */
    spec.dir = optind == argc ? dir_arg : NULL;
    spec.hosts = hosts;
    spec.radix = radix;
    spec.levels = levels;
    spec.topology = topo_arg;
    spec.slots = slots;
    spec.payload = payload;
    spec.wait_s = wait_s;
    spec.host_ports = host_ports;
    spec.managed = !no_mgr;
    spec.keep = keep;
    spec.emulate = emulate;
    spec.emu = ep;
    spec.an_cpus = an_cpus;
    if (fabric_spec_check(&spec, err, sizeof(err)) != 0) {
        fprintf(stderr, "incoll fabric up: %s\n", err);
        if (strncmp(err, "need ", 5) == 0)
            usage(stderr);
        return 2;
    }
    return fabric_up(&spec) == 0 ? 0 : 1;
}

static int cli_down(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL;
    int opt;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "d:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'd':
            dir = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (dir == NULL || optind != argc) {
        usage(stderr);
        return 2;
    }
    return fabric_stop(dir, 0) == 0 ? 0 : 1;
}

static int cli_restart(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"wait", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir_arg = NULL;
    char dir[PATH_MAX];
    int opt, wait_s = 10;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "d:w:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'd':
            dir_arg = optarg;
            break;
        case 'w':
            wait_s = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (dir_arg == NULL || optind != argc || wait_s < 1) {
        fprintf(stderr, "incoll fabric restart: need --dir DIR (and --wait "
                        "SEC >= 1)\n");
        return 2;
    }
    if (realpath(dir_arg, dir) == NULL) {
        fprintf(stderr, "incoll fabric restart: %s: %s\n", dir_arg,
                log_strerror(errno));
        return 1;
    }
    return fabric_restart_mgr(dir, wait_s, 0) == 0 ? 0 : 1;
}

int cmd_fabric(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "up") == 0)
        return cli_up(argc - 1, argv + 1);
    if (strcmp(argv[1], "down") == 0)
        return cli_down(argc - 1, argv + 1);
    if (strcmp(argv[1], "restart") == 0)
        return cli_restart(argc - 1, argv + 1);
    fprintf(stderr,
            "incoll fabric: unknown subcommand '%s' (have: up, down, "
            "restart)\n",
            argv[1]);
    return 2;
}
