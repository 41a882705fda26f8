/*
 * Tool calls to the manager; see mgr_tool.h.
 */
#include "fabric/mgr_tool.h"
#include "common/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

incoll_status_t mgr_tool_stat(const char *addr, const char *secret_file,
                              uint32_t timeout_ms, char **text_p, char *err,
                              size_t errlen)
{
    uint8_t key[MGR_KEY_LEN];
    mgr_stream_t st;
    incoll_status_t status;
    uint64_t deadline = now_ms() + timeout_ms;
    int fd, sent = 0;

    status = mgr_secret_load(secret_file, key, err, errlen);
    if (status != INCOLL_OK)
        return status;
    fd = mgr_connect(addr, err, errlen);
    if (fd < 0)
        return INCOLL_ERR_IO;
    status = mgr_stream_init(&st, fd, 0, MGR_ROLE_TOOL, key);
    memset(key, 0, sizeof(key));
    if (status != INCOLL_OK) {
        mgr_stream_close(&st);
        snprintf(err, errlen, "cannot set up the stream: %s",
                 incoll_status_string(status));
        return status;
    }
    for (;;) {
        struct pollfd pfd = {.fd = st.fd, .events = POLLIN};
        uint64_t now = now_ms();
        const char *why = NULL;
        int closed;

        if (mgr_stream_pending(&st))
            pfd.events |= POLLOUT;
        if (now >= deadline) {
            snprintf(err, errlen, "manager %s: no answer within %u ms", addr,
                     timeout_ms);
            status = INCOLL_ERR_TIMEOUT;
            break;
        }
        if (poll(&pfd, 1, (int)(deadline - now)) < 0 && errno != EINTR) {
            snprintf(err, errlen, "poll: %s", strerror(errno));
            status = INCOLL_ERR_IO;
            break;
        }
        if (mgr_stream_flush(&st) != 0) {
            snprintf(err, errlen, "manager %s: send failed", addr);
            status = INCOLL_ERR_IO;
            break;
        }
        if (!(pfd.revents & (POLLIN | POLLERR | POLLHUP)))
            continue;
        closed = mgr_stream_read(&st, &why) != 0;
        for (;;) {
            uint16_t type;
            const uint8_t *body;
            size_t len;
            mgr_next_t r = mgr_stream_next(&st, &type, &body, &len, &why);
            if (r == MGR_NEXT_NONE)
                break;
            if (r == MGR_NEXT_ERROR) {
                snprintf(err, errlen, "manager %s: %s", addr, why);
                mgr_stream_close(&st);
                return INCOLL_ERR_AUTH;
            }
            if (r == MGR_NEXT_READY && !sent) {
                mgr_wbuf_t w = {0};
                mgr_w_u32(&w, 0);
                if (w.oom || mgr_stream_send(&st, MGR_STAT_REQ, w.buf, w.len) !=
                                 INCOLL_OK) {
                    mgr_wbuf_free(&w);
                    mgr_stream_close(&st);
                    snprintf(err, errlen, "out of memory");
                    return INCOLL_ERR_NO_MEMORY;
                }
                mgr_wbuf_free(&w);
                sent = 1;
                continue;
            }
            if (r == MGR_NEXT_FRAME && type == MGR_STAT_REP) {
                mgr_rbuf_t rb = {body, len, 0, 0};
                size_t n = 0;
                const char *text = mgr_r_text(&rb, MGR_MAX_FRAME, &n);
                char *out;
                if (text == NULL || mgr_r_done(&rb)) {
                    snprintf(err, errlen, "manager %s: malformed stat reply",
                             addr);
                    mgr_stream_close(&st);
                    return INCOLL_ERR_PROTOCOL;
                }
                out = malloc(n + 1);
                if (out == NULL) {
                    mgr_stream_close(&st);
                    return INCOLL_ERR_NO_MEMORY;
                }
                memcpy(out, text, n);
                out[n] = '\0';
                mgr_stream_send(&st, MGR_BYE, NULL, 0);
                mgr_stream_flush(&st);
                mgr_stream_close(&st);
                *text_p = out;
                return INCOLL_OK;
            }
            if (r == MGR_NEXT_FRAME && type == MGR_ERROR) {
                snprintf(err, errlen, "manager %s refused the request", addr);
                mgr_stream_close(&st);
                return INCOLL_ERR_PROTOCOL;
            }
        }
        if (mgr_stream_flush(&st) != 0 || closed) {
            snprintf(err, errlen, "manager %s: %s", addr,
                     closed && why ? why : "connection lost");
            status = INCOLL_ERR_IO;
            break;
        }
    }
    mgr_stream_close(&st);
    return status;
}

long long mgr_tool_stat_value(const char *text, const char *prefix,
                              const char *key)
{
    size_t plen = strlen(prefix), klen = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len >= plen && strncmp(line, prefix, plen) == 0) {
            for (const char *p = line; p + klen + 1 <= line + len; p++) {
                if ((p == line || p[-1] == ' ') && strncmp(p, key, klen) == 0 &&
                    p[klen] == '=')
                    return strtoll(p + klen + 1, NULL, 10);
            }
            return -1;
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}
