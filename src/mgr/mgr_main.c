/*
 * incoll-mgr: the aggregation manager daemon, one per fabric. It reads (or
 * generates) the topology, loads the fabric secret, listens on TCP and
 * runs the manager's loop (src/mgr/mgr.c) until SIGTERM or SIGINT. It does
 * not fork by itself (`incoll fabric up` does).
 */
#include "common/log.h"
#include "common/mgr_proto.h"
#include "common/settings.h"
#include "common/tune.h"
#include "mgr/mgr.h"
#include "mgr/topo.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: incoll-mgr (--topology FILE | --radix K --levels L "
            "[--hosts N])\n"
            "                  [--listen IP:PORT] [--secret FILE] "
            "[--port-file FILE]\n"
            "                  [--pidfile FILE] [--write-topology FILE]\n"
            "                  [--admin-secret FILE] [--metrics IP:PORT]\n"
            "                  [--tune FILE]\n"
            "\n"
            "Runs the aggregation manager of a fabric: it defines the\n"
            "reduction trees, admits and places groups for communicators,\n"
            "and watches aggregation nodes and hosts. See docs/manager.md.\n"
            "\n"
            "  --topology FILE        the fabric (docs/topology.md)\n"
            "  --radix K --levels L   or a k-ary fat-tree of 2 or 3 levels\n"
            "  --hosts N              hosts on the fat-tree (default: all "
            "ports)\n"
            "  --write-topology FILE  write the topology in use to FILE\n"
            "  --listen IP:PORT       TCP address (default 127.0.0.1:0, any "
            "port)\n"
            "  --secret FILE          fabric secret (default "
            "$INCOLL_SECRET_FILE)\n"
            "  --admin-secret FILE    secret job registration proves "
            "(default\n"
            "                         $INCOLL_MGR_ADMIN_SECRET_FILE, else "
            "the fabric secret)\n"
            "  --metrics IP:PORT      serve metrics over HTTP there "
            "(default\n"
            "                         $INCOLL_MGR_METRICS; unset: not "
            "served)\n"
            "  --port-file FILE       write IP:PORT there once listening\n"
            "  --pidfile FILE         write the pid there; removed at exit\n"
            "  --tune FILE            the selection table (docs/tuning.md) "
            "handed\n"
            "                         to every job that joins (default\n"
            "                         $INCOLL_MGR_TUNE_FILE; unset: none)\n"
            "  --help                 this text\n"
            "\n"
            "Environment (src/common/settings.h; `incoll info` lists all):\n");
    settings_print(out, "mgr", 0);
}

/*
 * Raises the soft descriptor limit to the hard one: every connection is a
 * descriptor, and the manager serves every process of the fabric. Where
 * the hard limit is low too, the manager bounds its connections by what
 * there is (src/mgr/mgr.c).
 */
static void raise_nofile(void)
{
    struct rlimit rl;
    rlim_t old;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        incoll_warn("mgr: cannot raise the descriptor limit from %llu to "
                    "%llu: %s",
                    (unsigned long long)old, (unsigned long long)rl.rlim_max,
                    strerror(errno));
    else
        incoll_debug("mgr: descriptor limit raised from %llu to %llu",
                     (unsigned long long)old, (unsigned long long)rl.rlim_max);
}

/* Writes text to path through a temporary file and a rename. */
static int write_atomic(const char *path, const char *text)
{
    char tmp[4096];
    FILE *f;
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (f == NULL) {
        incoll_error("mgr: cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    fputs(text, f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        incoll_error("mgr: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int parse_int(const char *s, int *v_p)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || *s == '\0' || v < 0 || v > 1 << 24)
        return -1;
    *v_p = (int)v;
    return 0;
}

/* What the command line gave. */
typedef struct {
    const char *topo_path, *write_topo, *secret, *port_file, *pidfile;
    const char *admin_secret, *metrics, *tune;
    int radix, levels, nhosts;
} mgr_opts_t;

static int parse_count(const char *opt, const char *arg, int *v_p)
{
    if (parse_int(arg, v_p) == 0)
        return 0;
    fprintf(stderr, "incoll-mgr: --%s '%s' is not a number\n", opt, arg);
    return -1;
}

/* The options into o and mp; -1 to go on, else the exit code. */
static int parse_opts(int argc, char **argv, mgr_opts_t *o, mgr_params_t *mp)
{
    static const struct option longopts[] = {
        {"topology", required_argument, NULL, 't'},
        {"radix", required_argument, NULL, 'k'},
        {"levels", required_argument, NULL, 'l'},
        {"hosts", required_argument, NULL, 'n'},
        {"write-topology", required_argument, NULL, 'w'},
        {"listen", required_argument, NULL, 'L'},
        {"secret", required_argument, NULL, 's'},
        {"port-file", required_argument, NULL, 'P'},
        {"pidfile", required_argument, NULL, 'p'},
        {"admin-secret", required_argument, NULL, 'A'},
        {"metrics", required_argument, NULL, 'M'},
        {"tune", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;

    while ((opt = getopt_long(argc, argv, "t:k:l:n:w:L:s:P:p:A:M:T:h", longopts,
                              NULL)) != -1) {
        switch (opt) {
        case 't':
            o->topo_path = optarg;
            break;
        case 'w':
            o->write_topo = optarg;
            break;
        case 'L':
            mp->listen = optarg;
            break;
        case 's':
            o->secret = optarg;
            break;
        case 'P':
            o->port_file = optarg;
            break;
        case 'p':
            o->pidfile = optarg;
            break;
        case 'A':
            o->admin_secret = optarg;
            break;
        case 'M':
            o->metrics = optarg;
            break;
        case 'T':
            o->tune = optarg;
            break;
        case 'k':
            if (parse_count("radix", optarg, &o->radix))
                return 2;
            break;
        case 'l':
            if (parse_count("levels", optarg, &o->levels))
                return 2;
            break;
        case 'n':
            if (parse_count("hosts", optarg, &o->nhosts))
                return 2;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc || (o->topo_path == NULL) == (o->radix == 0)) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* The selection table handed to jobs: read and checked now, so that a
 * bad one stops the manager naming its line. 0, or -1 (said). */
static int load_tune(mgr_opts_t *o, mgr_params_t *mp, char **text_p)
{
    char err[512];

    if (o->tune == NULL)
        o->tune = setting_str(SETTING_MGR_TUNE_FILE);
    if (o->tune && *o->tune) {
        static tune_table_t t;
        tune_init(&t, o->tune);
        *text_p = tune_read_text(o->tune, err, sizeof(err));
        if (*text_p == NULL ||
            tune_parse_text(&t, *text_p, o->tune, err, sizeof(err)) != 0) {
            fprintf(stderr, "incoll-mgr: selection table: %s\n", err);
            free(*text_p);
            *text_p = NULL;
            return -1;
        }
        mp->tune_text = *text_p;
        mp->tune_source = o->tune;
    }
    return 0;
}

/* The topology: read, or a generated fat-tree. 0, or -1 (said). */
static int load_topo(const mgr_opts_t *o, topo_t *topo)
{
    char err[512];
    incoll_status_t status;

    if (o->topo_path) {
        if (topo_load(o->topo_path, topo, err, sizeof(err)) != INCOLL_OK) {
            fprintf(stderr, "incoll-mgr: %s\n", err);
            return -1;
        }
        return 0;
    }
    status = topo_fat_tree(o->radix, o->levels, o->nhosts, NULL, topo);
    if (status != INCOLL_OK) {
        char hosts[48];
        if (o->nhosts > 0)
            snprintf(hosts, sizeof(hosts), "%d hosts", o->nhosts);
        else
            snprintf(hosts, sizeof(hosts), "a host on every port");
        fprintf(stderr,
                "incoll-mgr: cannot build a fat-tree of radix %d "
                "and %d levels with %s: %s (radix: even, "
                "2..64; levels: 2 or 3; hosts: at most the ports)\n",
                o->radix, o->levels, hosts, incoll_status_string(status));
        return -1;
    }
    return 0;
}

/* The fabric secret and the optional admin secret into mp. 0, or -1
 * (said). */
static int load_secrets(mgr_opts_t *o, mgr_params_t *mp)
{
    char err[512];

    if (o->secret == NULL)
        o->secret = setting_str(SETTING_SECRET_FILE);
    if (mgr_secret_load(o->secret, mp->key, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll-mgr: %s\n", err);
        return -1;
    }
    if (o->admin_secret == NULL)
        o->admin_secret = setting_str(SETTING_MGR_ADMIN_SECRET_FILE);
    if (o->admin_secret) {
        if (mgr_secret_load(o->admin_secret, mp->admin_key, err, sizeof(err)) !=
            INCOLL_OK) {
            fprintf(stderr, "incoll-mgr: admin secret: %s\n", err);
            return -1;
        }
        mp->has_admin_key = 1;
    }
    return 0;
}

/* The port and pid files, once the manager listens. 0, or -1. */
static int write_files(const mgr_opts_t *o, const mgr_params_t *mp, mgr_t *m)
{
    if (o->port_file) {
        char text[64];
        const char *colon = strrchr(mp->listen, ':');
        snprintf(text, sizeof(text), "%.*s:%u\n",
                 colon ? (int)(colon - mp->listen) : 9,
                 colon ? mp->listen : "127.0.0.1", (unsigned)mgr_port(m));
        if (write_atomic(o->port_file, text) != 0)
            return -1;
    }
    if (o->pidfile) {
        char text[32];
        snprintf(text, sizeof(text), "%d\n", (int)getpid());
        if (write_atomic(o->pidfile, text) != 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    mgr_opts_t o = {0};
    char *tune_text = NULL;
    int ret;
    mgr_params_t mp;
    topo_t topo;
    mgr_t *m = NULL;
    char err[512];
    sigset_t mask;
    int sigfd;

    mgr_params_default(&mp);
    if ((ret = parse_opts(argc, argv, &o, &mp)) >= 0)
        return ret;
    log_set_name("mgr");
    log_init_from_env();
    if (settings_check("mgr", err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll-mgr: %s\n", err);
        return 2;
    }
    mgr_params_from_env(&mp);
    if (o.metrics)
        mp.metrics = o.metrics;
    if (load_tune(&o, &mp, &tune_text) != 0)
        return 2;
    if (load_topo(&o, &topo) != 0) {
        free(tune_text);
        return 1;
    }
    ret = 1;
    if (o.write_topo && topo_save(&topo, o.write_topo) != INCOLL_OK) {
        fprintf(stderr, "incoll-mgr: cannot write %s: %s\n", o.write_topo,
                strerror(errno));
        goto out_topo;
    }
    if (load_secrets(&o, &mp) != 0)
        goto out_topo;

    raise_nofile();
    /* Frame buffers are big and short-lived: have them mapped apart, so
     * their memory goes back to the system when they are freed (a fixed
     * threshold, which glibc would otherwise raise past them). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);

    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0 ||
        (sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        incoll_error("mgr: cannot set up signals: %s", strerror(errno));
        goto out_topo;
    }
    mp.stop_fd = sigfd;
    mp.topo = &topo;
    m = mgr_create(&mp, err, sizeof(err));
    if (m == NULL) {
        fprintf(stderr, "incoll-mgr: %s\n", err);
        goto out_sig;
    }
    if (write_files(&o, &mp, m) != 0)
        goto out_mgr;
    ret = mgr_run(m);
    if (o.pidfile)
        unlink(o.pidfile);
out_mgr:
    mgr_destroy(m);
out_sig:
    close(sigfd);
out_topo:
    topo_free(&topo);
    free(tune_text);
    return ret;
}
