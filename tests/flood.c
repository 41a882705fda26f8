/* A flood of silent connections: see flood.h. */
#include "flood.h"

#include "common/mgr_stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* A flooder's connection: non-blocking, from src (an address of 127/8),
 * connecting to ip:port. -1 when the socket cannot be made. */
static int flood_connect(uint32_t src, uint32_t ip, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    sa.sin_addr.s_addr = htonl(src);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
        errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/*
 * The flooder (a child process): n connections that never say a word,
 * held open, or (reopen) opened again as soon as the manager closes one.
 * Writes a byte to ready once the first n are made; runs until killed.
 */
static void flood_run(const char *addr, const char *src, int n, int reopen,
                      int ready)
{
    struct rlimit rl;
    struct in_addr in;
    uint32_t ip;
    uint16_t port;
    struct pollfd *pfd = calloc((size_t)n, sizeof(*pfd));

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (pfd == NULL || mgr_parse_addr(addr, &ip, &port) != INCOLL_OK ||
        inet_pton(AF_INET, src, &in) != 1)
        _exit(1);
    for (int i = 0; i < n; i++) {
        pfd[i].fd = flood_connect(ntohl(in.s_addr), ip, port);
        pfd[i].events = POLLIN;
    }
    if (write(ready, "r", 1) != 1)
        _exit(1);
    for (;;) {
        if (poll(pfd, (nfds_t)n, 200) < 0 && errno != EINTR)
            _exit(1);
        for (int i = 0; i < n; i++) {
            char buf[512];
            ssize_t k;
            if (pfd[i].fd < 0 ||
                !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            k = recv(pfd[i].fd, buf, sizeof(buf), 0);
            if (k > 0 || (k < 0 && (errno == EAGAIN || errno == EINTR)))
                continue;
            close(pfd[i].fd);
            pfd[i].fd = reopen ? flood_connect(ntohl(in.s_addr), ip, port) : -1;
        }
    }
}

pid_t flood_start(const char *addr, const char *src, int n, int reopen)
{
    int p[2];
    pid_t pid;
    struct pollfd pfd;
    char c;

    if (pipe(p) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        flood_run(addr, src, n, reopen, p[1]);
        _exit(0);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    pfd = (struct pollfd){.fd = p[0], .events = POLLIN};
    if (poll(&pfd, 1, 10000) != 1 || read(p[0], &c, 1) != 1) {
        close(p[0]);
        return -1;
    }
    close(p[0]);
    return pid;
}
