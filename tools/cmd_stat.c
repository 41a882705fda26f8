/*
 * `incoll stat --fabric DIR` (or `--mgr HOST:PORT` for a manager of a real
 * deployment): when DIR/fabric.env names a manager, asks it
 * for its view (docs/manager.md, "incoll stat format": trees, jobs and
 * their groups, per-AN state, load and free resources, and each AN's
 * counters from its last heartbeat); then asks every AN of fabric.conf for
 * its counters (WIRE_STATS_REQ carrying the fabric's admin key) and prints
 * the replies, one line "an=NAME ..." per AN in conf order. Each AN's
 * counters are printed once: the manager's "counters an=NAME" record is
 * left out for every AN that answered itself (its own reply is fresher),
 * and kept for the others (a silent AN, or a switch that fabric.conf does
 * not name). The AN query is src/fabric/an_stats.c's.
 *
 * On an emulated fabric the manager and the ANs are reached from inside
 * the fabric's namespaces (src/fabric/emu.h).
 *
 * `--format openmetrics` (or `prometheus`) prints the manager's metrics
 * instead, as its HTTP endpoint serves them (docs/manager.md, "Metrics"):
 * for node-exporter's textfile collector, `promtool check metrics` and
 * scripts.
 */
#include "cli.h"

#include "common/fabric_conf.h"
#include "common/log.h"
#include "common/settings.h"
#include "fabric/an_stats.h"
#include "fabric/emu.h"
#include "fabric/mgr_fabric.h"
#include "fabric/mgr_tool.h"
#include "common/clock.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * Asks the manager of dir for its view into *text_p (malloc'ed); from the
 * namespace it listens in when the fabric is emulated. Returns 0, or -1
 * after printing the cause.
 */
static int mgr_query(const char *dir, const char *mgr, const char *key,
                     uint32_t flags, int timeout_ms, char **text_p)
{
    char addr[256], secret[PATH_MAX + 32], path[PATH_MAX + 32], err[512];
    char netns[FABRIC_NETNS_MAX] = "";
    fabric_conf_t conf;
    int saved = -1;
    incoll_status_t status;

    if (mgr) {
        snprintf(addr, sizeof(addr), "%s", mgr);
        snprintf(secret, sizeof(secret), "%s", key ? key : "");
        dir = NULL;
    } else if (mgr_fabric_env(dir, addr, sizeof(addr), secret, sizeof(secret),
                              err, sizeof(err)) != 0) {
        fprintf(stderr, "incoll stat: %s\n", err);
        return -1;
    }
    if (dir == NULL)
        goto ask;
    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    if (fabric_conf_load(path, &conf, err, sizeof(err)) == INCOLL_OK) {
        int root = emu_mgr_an(&conf);
        if (root >= 0)
            snprintf(netns, sizeof(netns), "%s", conf.ans[root].netns);
        fabric_conf_free(&conf);
    }
    if (netns[0] && emu_netns_push(netns, &saved) != 0)
        return -1; /* logged */
ask:
    status = mgr_tool_stat_flags(addr, secret, flags, (uint32_t)timeout_ms,
                                 text_p, err, sizeof(err));
    emu_netns_leave(saved);
    if (status != INCOLL_OK) {
        fprintf(stderr, "incoll stat: manager %s: %s\n", addr, err);
        return -1;
    }
    return 0;
}

/*
 * Prints the manager's view but for the "counters an=NAME ..." records of
 * the ANs whose own reply is in replies (conf may be NULL: no fabric.conf,
 * every record is printed).
 */
static void print_mgr_view(const char *text, const fabric_conf_t *conf,
                           char *const *replies)
{
    static const char tag[] = "counters an=";

    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        int dup = 0;

        if (conf && strncmp(line, tag, sizeof(tag) - 1) == 0) {
            const char *name = line + sizeof(tag) - 1;
            size_t nlen = strcspn(name, " \n");
            for (int i = 0; i < conf->nans && !dup; i++)
                dup = replies[i] != NULL && strlen(conf->ans[i].name) == nlen &&
                      strncmp(conf->ans[i].name, name, nlen) == 0;
        }
        if (!dup)
            printf("%.*s\n", (int)len, line);
        line += len + (eol != NULL);
    }
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll stat (--fabric DIR | --mgr HOST:PORT [--secret FILE])\n"
        "                   [--format text|openmetrics|prometheus]\n"
        "                   [--attempts N] [--wait-ms MS]\n"
        "\n"
        "When DIR/fabric.env names a manager, prints its view first, one\n"
        "record per line \"kind key=value ...\" (docs/manager.md): the\n"
        "manager, its trees, every AN with its state, groups, slots,\n"
        "buffer, free fraction and capabilities, the jobs with their\n"
        "lost ranks, every group (job, communicator, tree, ANs) and the\n"
        "group requests still waiting for members. Then the counters of\n"
        "every aggregation node of fabric.conf, asked directly, one line\n"
        "\"an=<name> key=value ...\" per node in the order of fabric.conf.\n"
        "Each node's counters are printed once: the manager's copy from\n"
        "the node's last heartbeat (\"counters an=...\") only for a node\n"
        "that did not answer itself or that fabric.conf does not name.\n"
        "A node that does not answer (after --attempts requests, default\n"
        "3, each waiting --wait-ms, default 1000) prints\n"
        "\"an=<name> error=no-answer\" and the command exits 1; so does an\n"
        "unreachable manager.\n"
        "\n"
        "--mgr HOST:PORT asks a manager that no fabric directory describes\n"
        "(a deployment), proving the secret of --secret (default\n"
        "$INCOLL_SECRET_FILE); only its view is printed.\n"
        "\n"
        "--format openmetrics prints the manager's metrics in the\n"
        "OpenMetrics text format, as its HTTP endpoint serves them to\n"
        "Prometheus; --format prometheus the same in the Prometheus text\n"
        "format 0.0.4, which node-exporter's textfile collector and\n"
        "`promtool check metrics` read (docs/manager.md, \"Metrics\").\n");
}

int cmd_stat(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"fabric", required_argument, NULL, 'f'},
        {"attempts", required_argument, NULL, 'a'},
        {"wait-ms", required_argument, NULL, 'w'},
        {"mgr", required_argument, NULL, 'm'},
        {"secret", required_argument, NULL, 's'},
        {"format", required_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL, *mgr = NULL, *secret = NULL;
    uint32_t flags = 0;
    char path[PATH_MAX], err[512];
    fabric_conf_t conf;
    char **replies, *mgr_text = NULL;
    int opt, attempts = 3, wait_ms = 1000, missing, mgr_failed = 0;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "f:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'f':
            dir = optarg;
            break;
        case 'a':
            attempts = atoi(optarg);
            break;
        case 'w':
            wait_ms = atoi(optarg);
            break;
        case 'm':
            mgr = optarg;
            break;
        case 's':
            secret = optarg;
            break;
        case 'F':
            if (strcmp(optarg, "openmetrics") == 0) {
                flags = MGR_STAT_F_OPENMETRICS;
            } else if (strcmp(optarg, "prometheus") == 0) {
                flags = MGR_STAT_F_PROMETHEUS;
            } else if (strcmp(optarg, "text") != 0) {
                fprintf(stderr,
                        "incoll stat: --format '%s': one of text, "
                        "openmetrics, prometheus\n",
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
    if ((dir == NULL) == (mgr == NULL) || optind != argc || attempts < 1 ||
        wait_ms < 1) {
        usage(stderr);
        return 2;
    }
    if (mgr && secret == NULL)
        secret = setting_str(SETTING_SECRET_FILE);
    if (mgr || flags) {
        /* The manager alone: its view or its metrics. */
        if (dir && !mgr_fabric_managed(dir)) {
            fprintf(stderr,
                    "incoll stat: the fabric in %s has no manager, and the "
                    "metrics are the manager's\n",
                    dir);
            return 1;
        }
        if (mgr_query(dir, mgr, secret, flags, attempts * wait_ms, &mgr_text) !=
            0)
            return 1;
        fputs(mgr_text, stdout);
        free(mgr_text);
        return 0;
    }
    if (mgr_fabric_managed(dir) &&
        mgr_query(dir, NULL, NULL, 0, attempts * wait_ms, &mgr_text) != 0)
        mgr_failed = 1;
    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    if (mgr_text && access(path, F_OK) != 0) {
        /* A topology without fabric.conf: the manager's view is all. */
        print_mgr_view(mgr_text, NULL, NULL);
        free(mgr_text);
        return mgr_failed;
    }
    if (mgr_failed && access(path, F_OK) != 0)
        return 1;
    if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll stat: %s\n", err);
        free(mgr_text);
        return 1;
    }
    replies = calloc((size_t)conf.nans, sizeof(*replies));
    if (replies == NULL) {
        fprintf(stderr, "incoll stat: out of memory\n");
        fabric_conf_free(&conf);
        free(mgr_text);
        return 1;
    }
    missing = fabric_an_stats(&conf, attempts, wait_ms, replies);
    if (mgr_text) {
        print_mgr_view(mgr_text, &conf, replies);
        free(mgr_text);
    }
    for (int i = 0; i < conf.nans; i++) {
        if (replies[i])
            printf("%s\n", replies[i]);
        else
            printf("an=%s error=no-answer\n", conf.ans[i].name);
        free(replies[i]);
    }
    free(replies);
    fabric_conf_free(&conf);
    return missing || mgr_failed ? 1 : 0;
}
