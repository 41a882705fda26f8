/*
 * The manager's metrics endpoint over libmicrohttpd; see mgr_http.h.
 */
#include "mgr/mgr_http.h"

#include "common/mgr_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef INCOLL_HAVE_MHD

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#define HTTP_CONNS 32
#define HTTP_CONNS_PER_IP 4
#define HTTP_TIMEOUT_S 10
#define HTTP_CONN_MEMORY (16u << 10)

#define CT_OPENMETRICS                                                         \
    "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define CT_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"

struct mgr_http {
    struct MHD_Daemon *d;
    mgr_http_page_cb_t page;
    void *arg;
    uint16_t port;
};

int mgr_http_available(void)
{
    return 1;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code,
                             const char *type, char *body, int owned)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), body,
        owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;
    if (r == NULL) {
        if (owned)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* OpenMetrics when the client lists it among what it accepts. */
static int wants_om(struct MHD_Connection *conn)
{
    const char *accept =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
    return accept && strstr(accept, "application/openmetrics-text") != NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls)
{
    static char not_found[] = "not found: the metrics are at /metrics\n";
    static char index[] = "incoll-mgr: the metrics are at /metrics\n";
    static char not_allowed[] = "only GET and HEAD\n";
    mgr_http_t *h = cls;
    char *page;
    int om;

    (void)version;
    (void)upload;
    if (*req_cls == NULL) {
        /* Headers are in; answer with the request's end (no body). */
        *req_cls = h;
        return MHD_YES;
    }
    if (*upload_size != 0) {
        *upload_size = 0; /* a body is not read, nor kept */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                     not_allowed, 0);
    if (strcmp(url, "/") == 0)
        return reply(conn, MHD_HTTP_OK, "text/plain", index, 0);
    if (strcmp(url, "/metrics") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", not_found, 0);
    om = wants_om(conn);
    page = h->page(h->arg, om);
    if (page == NULL)
        return MHD_NO;
    return reply(conn, MHD_HTTP_OK, om ? CT_OPENMETRICS : CT_PROMETHEUS, page,
                 1);
}

mgr_http_t *mgr_http_start(const char *listen, mgr_http_page_cb_t page,
                           void *arg, char *err, size_t errlen)
{
    mgr_http_t *h = calloc(1, sizeof(*h));
    struct sockaddr_in sa;
    uint32_t ip;
    uint16_t port;
    const union MHD_DaemonInfo *info;

    if (h == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (mgr_parse_addr(listen, &ip, &port) != INCOLL_OK) {
        snprintf(err, errlen, "metrics address '%s' is not IP:PORT", listen);
        free(h);
        return NULL;
    }
    h->page = page;
    h->arg = arg;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons(port);
    h->d = MHD_start_daemon(
        MHD_USE_EPOLL, port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)HTTP_CONNS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)HTTP_CONNS_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HTTP_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)HTTP_CONN_MEMORY, MHD_OPTION_END);
    if (h->d == NULL) {
        snprintf(err, errlen,
                 "cannot serve metrics on %s (address in use, or not this "
                 "machine's?)",
                 listen);
        free(h);
        return NULL;
    }
    info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    return h;
}

void mgr_http_stop(mgr_http_t *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->d);
    free(h);
}

int mgr_http_fd(const mgr_http_t *h)
{
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
    return info ? info->epoll_fd : -1;
}

uint16_t mgr_http_port(const mgr_http_t *h)
{
    return h->port;
}

uint64_t mgr_http_timeout_ms(mgr_http_t *h)
{
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(h->d, &t) != MHD_YES)
        return UINT64_MAX;
    return (uint64_t)t;
}

void mgr_http_run(mgr_http_t *h)
{
    MHD_run(h->d);
}

#else /* !INCOLL_HAVE_MHD */

struct mgr_http {
    int unused;
};

int mgr_http_available(void)
{
    return 0;
}

mgr_http_t *mgr_http_start(const char *listen, mgr_http_page_cb_t page,
                           void *arg, char *err, size_t errlen)
{
    (void)page;
    (void)arg;
    snprintf(err, errlen,
             "cannot serve metrics on %s: this build has no libmicrohttpd "
             "(apt-get install libmicrohttpd-dev, then rebuild)",
             listen);
    return NULL;
}

void mgr_http_stop(mgr_http_t *h)
{
    (void)h;
}

int mgr_http_fd(const mgr_http_t *h)
{
    (void)h;
    return -1;
}

uint16_t mgr_http_port(const mgr_http_t *h)
{
    (void)h;
    return 0;
}

uint64_t mgr_http_timeout_ms(mgr_http_t *h)
{
    (void)h;
    return UINT64_MAX;
}

void mgr_http_run(mgr_http_t *h)
{
    (void)h;
}

#endif
