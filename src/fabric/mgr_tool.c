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

/*
 * One request on a connection of its own: connects to addr, proves the
 * secret in secret_file as role, sends type with body w and waits for a
 * frame of type want, whose body is copied into *reply_p (NUL-terminated,
 * the caller frees) with its length in *len_p. An error answer gives
 * INCOLL_ERR_PROTOCOL (or the manager's status) with its reason in err.
 */
static incoll_status_t request(const char *addr, const char *secret_file,
                               int role, uint16_t type, const mgr_wbuf_t *w,
                               uint16_t want, uint32_t timeout_ms,
                               uint8_t **reply_p, size_t *len_p, char *err,
                               size_t errlen)
{
    uint8_t key[MGR_KEY_LEN];
    mgr_stream_t st;
    incoll_status_t status;
    uint64_t deadline = now_ms() + timeout_ms;
    int fd, sent = 0;

    if (w->oom) {
        snprintf(err, errlen, "out of memory");
        return INCOLL_ERR_NO_MEMORY;
    }
    status = mgr_secret_load(secret_file, key, err, errlen);
    if (status != INCOLL_OK)
        return status;
    fd = mgr_connect(addr, err, errlen);
    if (fd < 0)
        return INCOLL_ERR_IO;
    status = mgr_stream_init(&st, fd, 0, role, key);
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
            uint16_t rtype;
            const uint8_t *body;
            size_t len;
            mgr_next_t r = mgr_stream_next(&st, &rtype, &body, &len, &why);
            if (r == MGR_NEXT_NONE)
                break;
            if (r == MGR_NEXT_ERROR) {
                snprintf(err, errlen, "manager %s: %s", addr, why);
                mgr_stream_close(&st);
                return INCOLL_ERR_AUTH;
            }
            if (r == MGR_NEXT_READY && !sent) {
                if (mgr_stream_send(&st, type, w->buf, w->len) != INCOLL_OK) {
                    mgr_stream_close(&st);
                    snprintf(err, errlen, "out of memory");
                    return INCOLL_ERR_NO_MEMORY;
                }
                sent = 1;
                continue;
            }
            if (r == MGR_NEXT_FRAME && rtype == want) {
                uint8_t *out = malloc(len + 1);
                if (out == NULL) {
                    mgr_stream_close(&st);
                    return INCOLL_ERR_NO_MEMORY;
                }
                memcpy(out, body, len);
                out[len] = '\0';
                mgr_stream_send(&st, MGR_BYE, NULL, 0);
                mgr_stream_flush(&st);
                mgr_stream_close(&st);
                *reply_p = out;
                *len_p = len;
                return INCOLL_OK;
            }
            if (r == MGR_NEXT_FRAME && rtype == MGR_ERROR) {
                mgr_rbuf_t rb = {body, len, 0, 0};
                char reason[256];
                int32_t st_code;
                mgr_r_u32(&rb);
                st_code = (int32_t)mgr_r_u32(&rb);
                mgr_r_str(&rb, reason, sizeof(reason));
                snprintf(err, errlen, "manager %s: %s", addr,
                         rb.err ? "refused the request" : reason);
                mgr_stream_close(&st);
                return !rb.err && st_code < 0 ? (incoll_status_t)st_code
                                              : INCOLL_ERR_PROTOCOL;
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

incoll_status_t mgr_tool_stat_flags(const char *addr, const char *secret_file,
                                    uint32_t flags, uint32_t timeout_ms,
                                    char **text_p, char *err, size_t errlen)
{
    mgr_wbuf_t w = {0};
    uint8_t *body = NULL;
    size_t len = 0, n = 0;
    incoll_status_t status;
    const char *text;
    char *out;
    mgr_rbuf_t rb;

    mgr_w_u32(&w, flags);
    status = request(addr, secret_file, MGR_ROLE_TOOL, MGR_STAT_REQ, &w,
                     MGR_STAT_REP, timeout_ms, &body, &len, err, errlen);
    mgr_wbuf_free(&w);
    if (status != INCOLL_OK)
        return status;
    rb = (mgr_rbuf_t){body, len, 0, 0};
    text = mgr_r_text(&rb, MGR_MAX_FRAME, &n);
    if (text == NULL || mgr_r_done(&rb)) {
        snprintf(err, errlen, "manager %s: malformed stat reply", addr);
        free(body);
        return INCOLL_ERR_PROTOCOL;
    }
    out = malloc(n + 1);
    if (out == NULL) {
        free(body);
        return INCOLL_ERR_NO_MEMORY;
    }
    memcpy(out, text, n);
    out[n] = '\0';
    free(body);
    *text_p = out;
    return INCOLL_OK;
}

incoll_status_t mgr_tool_stat(const char *addr, const char *secret_file,
                              uint32_t timeout_ms, char **text_p, char *err,
                              size_t errlen)
{
    return mgr_tool_stat_flags(addr, secret_file, 0, timeout_ms, text_p, err,
                               errlen);
}

incoll_status_t mgr_tool_job_register(const char *addr,
                                      const char *admin_secret, const char *job,
                                      uint32_t groups, uint32_t slots,
                                      uint32_t timeout_ms,
                                      mgr_tool_reg_t *reg_p, char *err,
                                      size_t errlen)
{
    mgr_wbuf_t w = {0};
    uint8_t *body = NULL;
    size_t len = 0;
    incoll_status_t status;
    mgr_rbuf_t rb;
    mgr_tool_reg_t reg;

    mgr_w_str(&w, job);
    mgr_w_u32(&w, groups);
    mgr_w_u32(&w, slots);
    mgr_w_u32(&w, 0);
    status = request(addr, admin_secret, MGR_ROLE_ADMIN, MGR_JOB_REGISTER, &w,
                     MGR_JOB_REGISTER_OK, timeout_ms, &body, &len, err, errlen);
    mgr_wbuf_free(&w);
    if (status != INCOLL_OK)
        return status;
    rb = (mgr_rbuf_t){body, len, 0, 0};
    reg.gen = mgr_r_u32(&rb);
    reg.groups = mgr_r_u32(&rb);
    reg.slots = mgr_r_u32(&rb);
    free(body);
    if (mgr_r_done(&rb)) {
        snprintf(err, errlen, "manager %s: malformed job_register_ok", addr);
        return INCOLL_ERR_PROTOCOL;
    }
    *reg_p = reg;
    return INCOLL_OK;
}

incoll_status_t mgr_tool_job_end(const char *addr, const char *admin_secret,
                                 const char *job, const char *reason,
                                 uint32_t timeout_ms, uint32_t *jobs_p,
                                 uint32_t *groups_p, char *err, size_t errlen)
{
    mgr_wbuf_t w = {0};
    uint8_t *body = NULL;
    size_t len = 0;
    incoll_status_t status;
    mgr_rbuf_t rb;
    uint32_t jobs, groups;

    mgr_w_str(&w, job);
    mgr_w_str(&w, reason ? reason : "");
    status = request(addr, admin_secret, MGR_ROLE_ADMIN, MGR_JOB_END, &w,
                     MGR_JOB_END_OK, timeout_ms, &body, &len, err, errlen);
    mgr_wbuf_free(&w);
    if (status != INCOLL_OK)
        return status;
    rb = (mgr_rbuf_t){body, len, 0, 0};
    jobs = mgr_r_u32(&rb);
    groups = mgr_r_u32(&rb);
    free(body);
    if (mgr_r_done(&rb)) {
        snprintf(err, errlen, "manager %s: malformed job_end_ok", addr);
        return INCOLL_ERR_PROTOCOL;
    }
    if (jobs_p)
        *jobs_p = jobs;
    if (groups_p)
        *groups_p = groups;
    return INCOLL_OK;
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
