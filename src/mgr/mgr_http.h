/*
 * The manager's metrics endpoint: HTTP with libmicrohttpd, driven from the
 * manager's own epoll loop (libmicrohttpd's epoll descriptor is one of
 * the loop's, MHD_run() runs when it is readable or its timeout is due),
 * so the page is made in the loop's thread from the core's state with no
 * lock. GET /metrics answers the metrics in the OpenMetrics text format
 * when the client's Accept header asks for application/openmetrics-text
 * (Prometheus does), else in the Prometheus text format 0.0.4; GET /
 * answers a line naming /metrics; anything else 404 or 405. Bounded: at
 * most 32 connections (4 per address), 10 s each, small request buffers.
 *
 * Built only with libmicrohttpd (INCOLL_HAVE_MHD); without it
 * mgr_http_start() fails saying so.
 */
#ifndef INCOLL_MGR_HTTP_H
#define INCOLL_MGR_HTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct mgr_http mgr_http_t;

/* Makes the page: the metrics in the OpenMetrics (om = 1) or Prometheus
 * text format, malloc'ed (the endpoint frees it), or NULL. */
typedef char *(*mgr_http_page_cb_t)(void *arg, int om);

/* 1 when this build has libmicrohttpd. */
int mgr_http_available(void);

/*
 * Listens on "IP:PORT" (port 0 picks one). Returns NULL with the cause in
 * err. mgr_http_stop() closes it.
 */
mgr_http_t *mgr_http_start(const char *listen, mgr_http_page_cb_t page,
                           void *arg, char *err, size_t errlen);
void mgr_http_stop(mgr_http_t *h);

/* The descriptor to wait on (readable: call mgr_http_run). */
int mgr_http_fd(const mgr_http_t *h);
/* The port it listens on. */
uint16_t mgr_http_port(const mgr_http_t *h);
/* Milliseconds until mgr_http_run() must run even without an event, or
 * UINT64_MAX. */
uint64_t mgr_http_timeout_ms(mgr_http_t *h);
/* Serves what is ready, without blocking. */
void mgr_http_run(mgr_http_t *h);

#endif
