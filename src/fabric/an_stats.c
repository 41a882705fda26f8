/*
 * Asking a fabric's ANs for their counters (WIRE_STATS_REQ, macs under a
 * key derived from fabric.conf's admin key): what `incoll stat` prints and
 * how the fabric lifecycle learns that its daemons are ready (an AN that
 * answers has bound its port and built its group). On an emulated fabric
 * each AN is asked from inside its network namespace (emu.h).
 *
 * The query speaks through a plain socket rather than udp_sock_t on
 * purpose: fault injection (INCOLL_FAULT_*) is for the data path, and a
 * tool that dropped its own requests would only make the fabric look dead.
 */
#include "fabric/an_stats.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/wire_mac.h"
#include "fabric/emu.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A random number for this process's requests: the ANs echo it in
 * "offset", so a replayed reply to another request is not taken. */
static uint64_t stat_nonce(void)
{
    static uint64_t nonce;
    if (nonce == 0)
        nonce = fabric_random64() | 1;
    return nonce;
}

/* STATS requests and replies carry a mac under a key derived from the
 * admin key (common/wire_mac.h), never the key itself. */
static void send_req(int fd, const fabric_conf_t *conf, int i)
{
    uint8_t hdr[WIRE_HDR_LEN];
    wire_key_t key;
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = WIRE_STATS_REQ,
                    .offset = stat_nonce(),
                    .child = WIRE_CHILD_NONE};
    struct sockaddr_in sa = {
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl((uint32_t)(conf->ans[i].addr >> 16)),
        .sin_port = htons((uint16_t)(conf->ans[i].addr & 0xffff)),
    };

    wire_key_derive(NULL, WIRE_KEY_ADMIN, conf->admin_key, 0, &key);
    wire_pack(&h, hdr);
    wire_mac_seal(&key, hdr, NULL, 0);
    if (sendto(fd, hdr, sizeof(hdr), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        incoll_debug("stats request to an %s: %s", conf->ans[i].name,
                     strerror(errno));
}

/* Reads every waiting datagram and files the valid replies. Returns how
 * many new replies were filed. */
static int read_replies(int fd, const fabric_conf_t *conf, char **replies)
{
    static uint8_t buf[65536];
    int got = 0;
    wire_key_t key;

    wire_key_derive(NULL, WIRE_KEY_ADMIN, conf->admin_key, 0, &key);
    for (;;) {
        struct sockaddr_in sa;
        socklen_t salen = sizeof(sa);
        wire_hdr_t h;
        incoll_ep_t src;
        ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
                             (struct sockaddr *)&sa, &salen);
        if (n < 0) {
            if (errno == EINTR || errno == ECONNREFUSED)
                continue;
            return got;
        }
        src = wire_ep(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port));
        if (wire_parse(buf, (size_t)n, &h, NULL) != INCOLL_OK ||
            h.type != WIRE_STATS_REP || h.offset != stat_nonce() ||
            !wire_mac_check(&key, buf, (size_t)n))
            continue;
        for (int i = 0; i < conf->nans; i++) {
            if (conf->ans[i].addr != src || replies[i] != NULL)
                continue;
            replies[i] = malloc((size_t)h.count + 1);
            if (replies[i] == NULL)
                break;
            memcpy(replies[i], buf + WIRE_HDR_LEN, h.count);
            replies[i][h.count] = '\0';
            /* A reply is one line: fold anything else into spaces. */
            for (uint32_t k = 0; k < h.count; k++)
                if (replies[i][k] == '\n' || replies[i][k] == '\r')
                    replies[i][k] = ' ';
            got++;
            break;
        }
    }
}

/* A socket for talking to ANs; in network namespace netns unless "". */
static int open_sock(const char *netns)
{
    struct sockaddr_in any = {.sin_family = AF_INET};
    int fd, saved = -1;

    if (netns[0] && emu_netns_push(netns, &saved) != 0)
        return -1;
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        incoll_error("stats: cannot create a socket: %s", strerror(errno));
    else if (bind(fd, (struct sockaddr *)&any, sizeof(any)) != 0) {
        incoll_error("stats: cannot bind a socket: %s", strerror(errno));
        close(fd);
        fd = -1;
    }
    if (netns[0])
        emu_netns_leave(saved);
    return fd;
}

int fabric_an_stats(const fabric_conf_t *conf, int attempts, int wait_ms,
                    char **replies)
{
    /* One socket in our namespace for the ANs there, one per AN that
     * lives in a namespace of an emulated fabric (only it reaches it). */
    int *fds, shared = -1, missing = 0, nfds = 0;
    struct pollfd *pfds;

    for (int i = 0; i < conf->nans; i++)
        missing += replies[i] == NULL;
    if (missing == 0)
        return 0;
    fds = calloc((size_t)conf->nans, sizeof(*fds));
    pfds = calloc((size_t)conf->nans, sizeof(*pfds));
    if (fds == NULL || pfds == NULL) {
        free(fds);
        free(pfds);
        return missing;
    }
    for (int i = 0; i < conf->nans; i++) {
        fds[i] = -1;
        if (replies[i] != NULL)
            continue;
        if (conf->ans[i].netns[0]) {
            fds[i] = open_sock(conf->ans[i].netns);
            if (fds[i] >= 0)
                pfds[nfds++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        } else {
            if (shared < 0) {
                shared = open_sock("");
                if (shared >= 0)
                    pfds[nfds++] =
                        (struct pollfd){.fd = shared, .events = POLLIN};
            }
            fds[i] = shared;
        }
    }
    for (int a = 0; a < attempts && missing > 0 && nfds > 0; a++) {
        uint64_t deadline = now_ms() + (uint64_t)wait_ms;
        for (int i = 0; i < conf->nans; i++)
            if (replies[i] == NULL && fds[i] >= 0)
                send_req(fds[i], conf, i);
        while (missing > 0) {
            uint64_t now = now_ms();
            if (now >= deadline)
                break;
            if (poll(pfds, (nfds_t)nfds, (int)(deadline - now)) <= 0)
                continue;
            for (int k = 0; k < nfds; k++)
                if (pfds[k].revents & POLLIN)
                    missing -= read_replies(pfds[k].fd, conf, replies);
        }
    }
    for (int k = 0; k < nfds; k++)
        close(pfds[k].fd);
    free(fds);
    free(pfds);
    return missing;
}
