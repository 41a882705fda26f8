/*
 * incoll-agg: the aggregation node daemon. Its groups come from the fabric
 * description (--conf: it finds its own AN record by name, binds the UDP
 * address the record gives and serves the fabric's world group), from the
 * aggregation manager (--mgr: it registers under its switch name and the
 * manager adds and removes groups at run time, src/agg/agg_mgr_link.h), or
 * from both. It drives the agg core from an epoll loop over the socket, the
 * manager link's descriptor and a signalfd: SIGTERM or SIGINT end it
 * cleanly, SIGHUP is ignored. It never exits because of a packet or a
 * manager's message: the core counts and drops bad ones.
 */
#include "agg/agg_mgr_link.h"
#include "common/fabric_conf.h"
#include "common/settings.h"
#include "common/log.h"
#include "common/mgr_proto.h"
#include "common/udp.h"
#include "core/agg_core.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AGG_RX_BATCH 64

typedef struct {
    fabric_conf_t conf; /* zeroed without --conf */
    int me;             /* index of our AN in conf.ans, -1 without */
    udp_sock_t *sock;
    agg_t *agg;
    agg_mgr_link_t *link; /* NULL without --mgr */
    int epfd;
    int sigfd;
    const char *pidfile;
    /* The fabric master key (--secret or INCOLL_SECRET_FILE) the world
     * group's mac key is derived from; has_secret 0 without one. */
    uint8_t secret[WIRE_SECRET_LEN];
    int has_secret;
} agg_daemon_t;

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll-agg --name NAME (--conf FILE | --listen IP:PORT)\n"
        "                  [--mgr HOST:PORT [--secret FILE]]\n"
        "                  [--pidfile FILE] [--foreground]\n"
        "\n"
        "Runs the aggregation node NAME: of the fabric described in the\n"
        "conf file (written by `incoll fabric up`), serving its world\n"
        "group, and/or of the fabric of a manager, which gives it groups\n"
        "at run time (docs/manager.md). One of --conf and --mgr is\n"
        "needed.\n"
        "\n"
        "  --name NAME       which an record of the conf file, and the\n"
        "                    switch name in the manager's topology\n"
        "  --conf FILE       fabric description; its an record gives the\n"
        "                    udp address\n"
        "  --listen IP:PORT  udp address without --conf (default\n"
        "                    127.0.0.1:0, any port)\n"
        "  --mgr HOST:PORT   register with this aggregation manager\n"
        "  --secret FILE     the fabric secret for the manager (default\n"
        "                    $INCOLL_SECRET_FILE); with --conf, given here\n"
        "                    or with --mgr, it also keys the world\n"
        "                    group's packets (docs/security.md)\n"
        "  --pidfile FILE    write the daemon's pid there; removed at exit\n"
        "  --foreground      accepted for compatibility: the daemon never\n"
        "                    forks by itself (`incoll fabric up` does)\n"
        "  --help            this text\n"
        "\n"
        "Environment (src/common/settings.h; `incoll info` lists all):\n");
    settings_print(out, "agg,fault", 0);
}

/*
 * Fault injection for the tests, INCOLL_AGG_FAULT_DROP_RESULTS=N: from the
 * (N+1)-th result packet of the first group this AN sends results for,
 * every result packet of that group is dropped while its contributions
 * still go up (a one-way fault of the AN's downlinks, as in
 * docs/failures.md). Later groups are spared, so a rebuilt group works.
 * Returns 1 when the packet must be dropped.
 */
static int fault_drop_result(const void *hdr, const void *payload, size_t len)
{
    static long long after = -2; /* -2: not read yet; -1: off */
    static uint32_t group;
    static unsigned long long seen;
    static uint8_t pkt[WIRE_HDR_LEN + WIRE_MAX_PAYLOAD];
    wire_hdr_t h;

    if (after == -2) {
        const char *v = setting_str(SETTING_AGG_FAULT_DROP_RESULTS);
        after = v ? setting_int(SETTING_AGG_FAULT_DROP_RESULTS) : -1;
        if (after < 0)
            after = -1;
        else
            incoll_warn("agg: fault injection: dropping the results of the "
                        "first group after %lld of them",
                        after);
    }
    if (after < 0 || len > WIRE_MAX_PAYLOAD)
        return 0;
    memcpy(pkt, hdr, WIRE_HDR_LEN);
    memcpy(pkt + WIRE_HDR_LEN, payload, len);
    if (wire_parse(pkt, WIRE_HDR_LEN + len, &h, NULL) != INCOLL_OK ||
        h.type != WIRE_RESULT)
        return 0;
    if (group == 0)
        group = h.group;
    return h.group == group && seen++ >= (unsigned long long)after;
}

static void agg_send(void *arg, incoll_ep_t dst, const void *hdr,
                     const void *payload, size_t len)
{
    udp_sock_t *sock = arg;
    if (fault_drop_result(hdr, payload, len))
        return;
    udp_send(sock, dst, hdr, WIRE_HDR_LEN, payload, len);
}

static int write_pidfile(const char *path)
{
    char tmp[4096], text[32];
    int fd, n;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        incoll_error("pidfile %s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    n = snprintf(text, sizeof(text), "%d\n", (int)getpid());
    if (write(fd, text, (size_t)n) != n) {
        incoll_error("pidfile %s: cannot write: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        incoll_error("pidfile %s: cannot rename into place: %s", path,
                     strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Adds the fabric's world group with this AN's place in the tree. */
static int add_world_group(agg_daemon_t *d)
{
    const fabric_conf_t *conf = &d->conf;
    const fabric_an_t *an = &conf->ans[d->me];
    agg_group_params_t gp;
    incoll_ep_t *children;
    int n, index = 0;
    incoll_status_t status;

    children = calloc(AGG_RADIX_MAX, sizeof(*children));
    if (children == NULL) {
        incoll_error("group %u: out of memory", conf->group_id);
        return -1;
    }
    n = fabric_conf_children(conf, d->me, children, NULL, AGG_RADIX_MAX);
    if (an->parent >= 0) {
        int kinds[AGG_RADIX_MAX];
        int np =
            fabric_conf_children(conf, an->parent, NULL, kinds, AGG_RADIX_MAX);
        index = -1;
        for (int i = 0; i < np && i < AGG_RADIX_MAX; i++)
            if (kinds[i] == d->me)
                index = i;
        if (index < 0) {
            incoll_error("group %u: an %s is not among its parent %s's "
                         "children",
                         conf->group_id, an->name, conf->ans[an->parent].name);
            free(children);
            return -1;
        }
    }
    memset(&gp, 0, sizeof(gp));
    gp.id = conf->group_id;
    /* The members derive the same key (src/host/ctx.c). */
    wire_key_derive(d->has_secret ? d->secret : NULL, WIRE_KEY_GROUP,
                    conf->group_id, conf->group_key, &gp.key);
    gp.nchildren = n;
    gp.children = children;
    gp.parent = an->parent >= 0 ? conf->ans[an->parent].addr : INCOLL_EP_NONE;
    gp.index_at_parent = (uint16_t)index;
    gp.slots = conf->slots;
    gp.max_payload = conf->payload;
    status = agg_group_add(d->agg, &gp);
    free(children);
    if (status != INCOLL_OK) {
        incoll_error("group %u: cannot add: %s", conf->group_id,
                     incoll_status_string(status));
        return -1;
    }
    return 0;
}

/* Drains the socket into the core, flushing the core's replies after each
 * batch so they leave while the next batch is read. */
static void on_readable(agg_daemon_t *d)
{
    udp_msg_t msgs[AGG_RX_BATCH];
    int n;

    do {
        n = udp_recv_batch(d->sock, msgs, AGG_RX_BATCH);
        if (n > 0)
            agg_set_now(d->agg, now_ns());
        for (int i = 0; i < n; i++)
            agg_on_packet(d->agg, msgs[i].src, msgs[i].data, msgs[i].len);
        udp_flush(d->sock);
    } while (n == AGG_RX_BATCH);
}

/* Returns 0 on a clean stop, 1 on a failure of the loop itself. */
static int run_loop(agg_daemon_t *d)
{
    for (;;) {
        struct epoll_event ev[4];
        int n = epoll_wait(d->epfd, ev, 4, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            incoll_error("event loop: epoll_wait failed: %s", strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == d->sigfd) {
                struct signalfd_siginfo si;
                while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
                        incoll_info("stopping on signal %u from pid %u",
                                    si.ssi_signo, si.ssi_pid);
                        return 0;
                    }
                    incoll_debug("ignoring signal %u", si.ssi_signo);
                }
            } else if (d->link && ev[i].data.fd == agg_mgr_link_fd(d->link)) {
                agg_mgr_link_on_event(d->link);
                /* Group commands may have queued packets (none today). */
                udp_flush(d->sock);
            } else {
                on_readable(d);
            }
        }
    }
}

static void log_counters(const agg_daemon_t *d)
{
    char text[2048];
    const udp_counters_t *u = udp_counters(d->sock);

    agg_format_counters(d->agg, text, sizeof(text));
    incoll_info("counters: %s", text);
    incoll_info(
        "udp: rx_packets=%" PRIu64 " rx_bytes=%" PRIu64 " tx_packets=%" PRIu64
        " tx_bytes=%" PRIu64 " tx_errors=%" PRIu64 " fault_dropped=%" PRIu64
        " fault_duplicated=%" PRIu64 " fault_reordered=%" PRIu64,
        u->rx_packets, u->rx_bytes, u->tx_packets, u->tx_bytes, u->tx_errors,
        u->fault_dropped, u->fault_duplicated, u->fault_reordered);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"conf", required_argument, NULL, 'c'},
        {"name", required_argument, NULL, 'n'},
        {"listen", required_argument, NULL, 'l'},
        {"mgr", required_argument, NULL, 'm'},
        {"secret", required_argument, NULL, 's'},
        {"pidfile", required_argument, NULL, 'p'},
        {"foreground", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    agg_daemon_t d = {.me = -1, .epfd = -1, .sigfd = -1};
    const char *conf_path = NULL, *name = NULL, *listen_addr = NULL;
    const char *mgr_addr = NULL, *secret = NULL;
    int secret_opt = 0;
    char err[512], who[64], ep[32];
    agg_params_t ap;
    struct epoll_event ev;
    sigset_t mask;
    uint32_t ip = 0x7f000001u;
    uint16_t port = 0;
    int opt, ret = 1;

    while ((opt = getopt_long(argc, argv, "c:n:l:m:s:p:fh", longopts, NULL)) !=
           -1) {
        switch (opt) {
        case 'c':
            conf_path = optarg;
            break;
        case 'n':
            name = optarg;
            break;
        case 'l':
            listen_addr = optarg;
            break;
        case 'm':
            mgr_addr = optarg;
            break;
        case 's':
            secret = optarg;
            secret_opt = 1;
            break;
        case 'p':
            d.pidfile = optarg;
            break;
        case 'f':
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (name == NULL || optind != argc ||
        (conf_path == NULL && mgr_addr == NULL)) {
        if (name != NULL && optind == argc)
            fprintf(stderr, "incoll-agg: need --conf FILE or --mgr HOST:PORT "
                            "(or both)\n");
        usage(stderr);
        return 2;
    }
    if (conf_path && listen_addr) {
        fprintf(stderr, "incoll-agg: --listen and --conf both give the udp "
                        "address; use one\n");
        return 2;
    }
    if (listen_addr &&
        (mgr_parse_addr(listen_addr, &ip, &port) != INCOLL_OK || ip == 0)) {
        fprintf(stderr,
                "incoll-agg: --listen '%s' is not IP:PORT (a local "
                "IPv4 address; port 0 picks one)\n",
                listen_addr);
        return 2;
    }
    if (settings_check("agg,fault", err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll-agg: %s\n", err);
        return 2;
    }
    if (secret == NULL)
        secret = setting_str(SETTING_SECRET_FILE);
    if (mgr_addr && (secret == NULL || *secret == '\0')) {
        fprintf(stderr, "incoll-agg: --mgr needs the fabric secret: --secret "
                        "FILE or INCOLL_SECRET_FILE\n");
        return 2;
    }
    snprintf(who, sizeof(who), "agg %s", name);
    log_set_name(who);
    log_init_from_env();

    if (conf_path) {
        if (fabric_conf_load(conf_path, &d.conf, err, sizeof(err)) !=
            INCOLL_OK) {
            fprintf(stderr, "incoll-agg: %s\n", err);
            return 1;
        }
        d.me = fabric_conf_find_an(&d.conf, name);
        if (d.me < 0) {
            fprintf(stderr, "incoll-agg: %s: no an named '%s'\n", conf_path,
                    name);
            goto out_free_conf;
        }
        ip = (uint32_t)(d.conf.ans[d.me].addr >> 16);
        port = (uint16_t)(d.conf.ans[d.me].addr & 0xffff);
        /* The world group's mac key comes from the secret when the AN has
         * one: given with --secret, or for the manager with --mgr (the
         * fabric of `incoll fabric up`, whose `incoll run --no-mgr` hands
         * the hosts the same secret). INCOLL_SECRET_FILE alone does not
         * count here, so that a fabric.conf-only fabric's ANs do not take
         * a secret from whoever started them that its hosts lack. */
        if (secret && *secret && (secret_opt || mgr_addr)) {
            if (mgr_secret_load(secret, d.secret, err, sizeof(err)) !=
                INCOLL_OK) {
                fprintf(stderr, "incoll-agg: %s\n", err);
                goto out_free_conf;
            }
            d.has_secret = 1;
        } else {
            incoll_info("no fabric secret (--secret): "
                        "group %u's packets are authenticated with a key "
                        "derived from %s alone; anyone who can read it can "
                        "forge them",
                        d.conf.group_id, conf_path);
        }
    }

    /* Block the signals we take through the signalfd before anything can
     * deliver them; SIGHUP is ignored outright (no config to reload). */
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0) {
        incoll_error("cannot block signals: %s", strerror(errno));
        goto out_free_conf;
    }
    d.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (d.sigfd < 0) {
        incoll_error("cannot create a signalfd: %s", strerror(errno));
        goto out_free_conf;
    }

    d.sock = udp_open(ip, port, (int)setting_u64(SETTING_UDP_BUF), who);
    if (d.sock == NULL)
        goto out_close_sigfd;

    memset(&ap, 0, sizeof(ap));
    ap.name = name;
    ap.admin_key = d.conf.admin_key;
    ap.send = agg_send;
    ap.send_arg = d.sock;
    ap.gen_idle_ns = setting_ns(SETTING_AGG_GEN_IDLE_MS);
    ap.stream_pool_bytes = (size_t)setting_u64(SETTING_AGG_STREAM_POOL);
    ap.lock_idle_ns = setting_ns(SETTING_AGG_LOCK_IDLE_MS);
    d.agg = agg_create(&ap);
    if (d.agg == NULL) {
        incoll_error("cannot create the aggregation core: out of memory");
        goto out_close_sock;
    }
    if (conf_path && add_world_group(&d) != 0)
        goto out_destroy_agg;
    if (mgr_addr) {
        agg_mgr_link_params_t lp;
        memset(&lp, 0, sizeof(lp));
        lp.mgr_addr = mgr_addr;
        lp.secret_file = secret;
        lp.name = name;
        lp.ep = udp_local_ep(d.sock);
        lp.agg = d.agg;
        agg_mgr_link_caps_from_env(&lp.caps);
        d.link = agg_mgr_link_create(&lp, err, sizeof(err));
        if (d.link == NULL) {
            incoll_error("manager %s: %s", mgr_addr, err);
            goto out_destroy_agg;
        }
    }

    d.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (d.epfd < 0) {
        incoll_error("cannot create an epoll instance: %s", strerror(errno));
        goto out_destroy_agg;
    }
    ev = (struct epoll_event){.events = EPOLLIN, .data.fd = udp_fd(d.sock)};
    if (epoll_ctl(d.epfd, EPOLL_CTL_ADD, udp_fd(d.sock), &ev) != 0) {
        incoll_error("cannot watch the udp socket: %s", strerror(errno));
        goto out_close_epoll;
    }
    ev = (struct epoll_event){.events = EPOLLIN, .data.fd = d.sigfd};
    if (epoll_ctl(d.epfd, EPOLL_CTL_ADD, d.sigfd, &ev) != 0) {
        incoll_error("cannot watch the signalfd: %s", strerror(errno));
        goto out_close_epoll;
    }
    if (d.link) {
        int lfd = agg_mgr_link_fd(d.link);
        ev = (struct epoll_event){.events = EPOLLIN, .data.fd = lfd};
        if (epoll_ctl(d.epfd, EPOLL_CTL_ADD, lfd, &ev) != 0) {
            incoll_error("cannot watch the manager link: %s", strerror(errno));
            goto out_close_epoll;
        }
    }
    if (d.pidfile && write_pidfile(d.pidfile) != 0)
        goto out_close_epoll;

    if (conf_path)
        incoll_info("an %s (level %d) serving group %u on %s, parent %s", name,
                    d.conf.ans[d.me].level, d.conf.group_id,
                    wire_ep_str(udp_local_ep(d.sock), ep, sizeof(ep)),
                    d.conf.ans[d.me].parent < 0
                        ? "none (root)"
                        : d.conf.ans[d.conf.ans[d.me].parent].name);
    if (mgr_addr)
        incoll_info("an %s on %s: groups from the manager at %s", name,
                    wire_ep_str(udp_local_ep(d.sock), ep, sizeof(ep)),
                    mgr_addr);

    ret = run_loop(&d);
    udp_flush(d.sock);
    log_counters(&d);
    if (d.pidfile)
        unlink(d.pidfile);

out_close_epoll:
    close(d.epfd);
out_destroy_agg:
    /* The groups stay on no AN once it exits; the manager hears the link
     * close and tears down the groups this AN was part of. */
    agg_mgr_link_destroy(d.link);
    agg_destroy(d.agg);
out_close_sock:
    udp_close(d.sock);
out_close_sigfd:
    close(d.sigfd);
out_free_conf:
    fabric_conf_free(&d.conf);
    memset(d.secret, 0, sizeof(d.secret));
    return ret;
}
