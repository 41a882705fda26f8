/*
 * The public functions of the collectives and communicators: each takes
 * the library lock, progresses the outstanding requests, waits for the
 * earlier requests of its communicator (collectives of a communicator run
 * in the order they were called) and calls its implementation (req.h).
 * Also the nonblocking (incoll_iX) and persistent (incoll_X_init) forms,
 * which make requests (src/host/req.c), and the query of where a call
 * ran (incoll_comm_where; the version and the reasons' text are in
 * src/common/status.c).
 */
#include "host/comm.h"
#include "host/counters.h"
#include "host/host.h"
#include "host/colls.h"
#include "host/req.h"
#include "host/service.h"
#include "host/api.h"
#include "host/stream.h"

#include "common/fabric_conf.h"
#include "common/log.h"
#include "common/mgr_codec.h"
#include "common/settings.h"
#include "common/tune.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A rooted collective from which some members return early
 * (host_enter_early): the call as a request, and the blocking call. */
#define EARLY_CALL(kind, comm, send, recv, count, dtype, op, root, call)       \
    do {                                                                       \
        host_req_args_t a_ = {(kind),           (comm),  (send), (recv),       \
                              (count),          (dtype), (op),   (root),       \
                              INCOLL_ALGO_AUTO, 1,       NULL,   0};           \
        incoll_status_t status_ = INCOLL_OK;                                   \
        if ((comm) == NULL)                                                    \
            return INCOLL_ERR_INVALID_ARG;                                     \
        host_where_begin();                                                    \
        if (!host_enter_early(&a_, &status_))                                  \
            status_ = (call);                                                  \
        (comm)->where = host_where_end(comm);                                  \
        return host_leave((comm), status_);                                    \
    } while (0)

INCOLL_API incoll_status_t incoll_allreduce(incoll_comm_h comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t count, incoll_dtype_t dtype,
                                            incoll_op_t op)
{
    return incoll_allreduce_algo(comm, INCOLL_ALGO_AUTO, sendbuf, recvbuf,
                                 count, dtype, op);
}

INCOLL_API incoll_status_t incoll_allreduce_algo(
    incoll_comm_h comm, incoll_algo_t algo, const void *sendbuf, void *recvbuf,
    size_t count, incoll_dtype_t dtype, incoll_op_t op)
{
    return host_service_allreduce(comm, algo, sendbuf, recvbuf, count, dtype,
                                  op);
}

INCOLL_API incoll_status_t incoll_reduce(incoll_comm_h comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, incoll_dtype_t dtype,
                                         incoll_op_t op, int root)
{
    EARLY_CALL(
        RQ_REDUCE, comm, sendbuf, recvbuf, count, dtype, op, root,
        host_reduce_impl(comm, sendbuf, recvbuf, count, dtype, op, root));
}

INCOLL_API incoll_status_t incoll_bcast(incoll_comm_h comm, void *buf,
                                        size_t bytes, int root)
{
    EARLY_CALL(RQ_BCAST, comm, buf, buf, bytes, INCOLL_UINT8, INCOLL_OP_SUM,
               root, host_bcast_impl(comm, buf, bytes, root));
}

INCOLL_API incoll_status_t incoll_barrier(incoll_comm_h comm)
{
    LOCKED_CALL(comm, host_barrier_impl(comm));
}

INCOLL_API incoll_status_t incoll_allgather(incoll_comm_h comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t bytes)
{
    LOCKED_CALL(comm, host_allgather_impl(comm, sendbuf, recvbuf, bytes));
}

INCOLL_API incoll_status_t incoll_gather(incoll_comm_h comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t bytes, int root)
{
    EARLY_CALL(RQ_GATHER, comm, sendbuf, recvbuf, bytes, INCOLL_UINT8,
               INCOLL_OP_SUM, root,
               host_gather_impl(comm, sendbuf, recvbuf, bytes, root));
}

INCOLL_API incoll_status_t incoll_scatter(incoll_comm_h comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t bytes, int root)
{
    EARLY_CALL(RQ_SCATTER, comm, sendbuf, recvbuf, bytes, INCOLL_UINT8,
               INCOLL_OP_SUM, root,
               host_scatter_impl(comm, sendbuf, recvbuf, bytes, root));
}

INCOLL_API incoll_status_t incoll_reduce_scatter(incoll_comm_h comm,
                                                 const void *sendbuf,
                                                 void *recvbuf, size_t count,
                                                 incoll_dtype_t dtype,
                                                 incoll_op_t op)
{
    LOCKED_CALL(comm, host_reduce_scatter_impl(comm, sendbuf, recvbuf, count,
                                               dtype, op));
}

INCOLL_API incoll_status_t incoll_comm_lock(incoll_comm_h comm, unsigned nops,
                                            int *granted_p)
{
    LOCKED_CALL(comm, host_comm_lock_impl(comm, nops, granted_p));
}

INCOLL_API incoll_status_t incoll_comm_unlock(incoll_comm_h comm)
{
    LOCKED_CALL(comm, host_comm_unlock_impl(comm));
}

INCOLL_API incoll_status_t incoll_comm_split(incoll_comm_h comm, int color,
                                             int key, incoll_comm_h *newcomm_p)
{
    return host_service_split(comm, color, key, newcomm_p);
}

/* Not a collective of comm (the members ask the manager, not comm's
 * group): comm's outstanding requests are not waited for, or a rank that
 * started a nonblocking collective on comm before making a communicator
 * would wait for ranks that make theirs first. */
INCOLL_API incoll_status_t incoll_comm_create(incoll_comm_h comm, int nranks,
                                              const int *ranks,
                                              incoll_comm_h *newcomm_p)
{
    LOCKED_CALL_AFTER(comm, NULL,
                      host_comm_create_impl(comm, nranks, ranks, newcomm_p));
}

INCOLL_API incoll_status_t incoll_comm_destroy(incoll_comm_h comm)
{
    return host_service_destroy(comm);
}

/* ---- nonblocking and persistent forms ---- */

static incoll_status_t post(host_req_kind_t kind, incoll_comm_h comm,
                            const void *sendbuf, void *recvbuf, size_t count,
                            incoll_dtype_t dtype, incoll_op_t op, int root,
                            int persistent, incoll_req_h *req_p)
{
    host_req_args_t a = {kind, comm, sendbuf,          recvbuf, count, dtype,
                         op,   root, INCOLL_ALGO_AUTO, 0,       NULL,  0};
    if (comm == NULL || req_p == NULL)
        return INCOLL_ERR_INVALID_ARG;
    /* The arguments are checked when the request runs, in its turn among
     * the communicator's calls: a bad one then fails the request on every
     * rank (host_comm_refuse), which refusing it here on one rank would
     * not (that rank's later calls would pair with the others' earlier
     * ones). */
    return host_req_post(&a, persistent, req_p);
}

#define NOOP INCOLL_UINT8, INCOLL_OP_SUM

/* An allreduce request on algorithm algo (incoll_iallreduce_algo,
 * incoll_allreduce_init_algo): the executor runs it in its turn. */
static incoll_status_t
post_allreduce_algo(incoll_comm_h comm, incoll_algo_t algo, const void *sendbuf,
                    void *recvbuf, size_t count, incoll_dtype_t dtype,
                    incoll_op_t op, int persistent, incoll_req_h *req_p)
{
    host_req_args_t a = {RQ_ALLREDUCE, comm, sendbuf, recvbuf, count, dtype,
                         op,           0,    algo,    0,       NULL,  0};
    if (comm == NULL || req_p == NULL || (unsigned)algo >= INCOLL_ALGO_COUNT)
        return INCOLL_ERR_INVALID_ARG;
    return host_req_post(&a, persistent, req_p);
}

INCOLL_API incoll_status_t incoll_iallreduce_algo(
    incoll_comm_h comm, incoll_algo_t algo, const void *sendbuf, void *recvbuf,
    size_t count, incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p)
{
    return post_allreduce_algo(comm, algo, sendbuf, recvbuf, count, dtype, op,
                               0, req_p);
}

INCOLL_API incoll_status_t incoll_allreduce_init_algo(
    incoll_comm_h comm, incoll_algo_t algo, const void *sendbuf, void *recvbuf,
    size_t count, incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p)
{
    return post_allreduce_algo(comm, algo, sendbuf, recvbuf, count, dtype, op,
                               1, req_p);
}

INCOLL_API incoll_status_t incoll_iallreduce(incoll_comm_h comm,
                                             const void *sendbuf, void *recvbuf,
                                             size_t count, incoll_dtype_t dtype,
                                             incoll_op_t op,
                                             incoll_req_h *req_p)
{
    return post(RQ_ALLREDUCE, comm, sendbuf, recvbuf, count, dtype, op, 0, 0,
                req_p);
}

INCOLL_API incoll_status_t incoll_ireduce(incoll_comm_h comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t count, incoll_dtype_t dtype,
                                          incoll_op_t op, int root,
                                          incoll_req_h *req_p)
{
    return post(RQ_REDUCE, comm, sendbuf, recvbuf, count, dtype, op, root, 0,
                req_p);
}

INCOLL_API incoll_status_t incoll_ibcast(incoll_comm_h comm, void *buf,
                                         size_t bytes, int root,
                                         incoll_req_h *req_p)
{
    return post(RQ_BCAST, comm, buf, buf, bytes, NOOP, root, 0, req_p);
}

INCOLL_API incoll_status_t incoll_ibarrier(incoll_comm_h comm,
                                           incoll_req_h *req_p)
{
    return post(RQ_BARRIER, comm, NULL, NULL, 0, NOOP, 0, 0, req_p);
}

INCOLL_API incoll_status_t incoll_iallgather(incoll_comm_h comm,
                                             const void *sendbuf, void *recvbuf,
                                             size_t bytes, incoll_req_h *req_p)
{
    return post(RQ_ALLGATHER, comm, sendbuf, recvbuf, bytes, NOOP, 0, 0, req_p);
}

INCOLL_API incoll_status_t incoll_igather(incoll_comm_h comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t bytes, int root,
                                          incoll_req_h *req_p)
{
    return post(RQ_GATHER, comm, sendbuf, recvbuf, bytes, NOOP, root, 0, req_p);
}

INCOLL_API incoll_status_t incoll_iscatter(incoll_comm_h comm,
                                           const void *sendbuf, void *recvbuf,
                                           size_t bytes, int root,
                                           incoll_req_h *req_p)
{
    return post(RQ_SCATTER, comm, sendbuf, recvbuf, bytes, NOOP, root, 0,
                req_p);
}

INCOLL_API incoll_status_t incoll_ireduce_scatter(
    incoll_comm_h comm, const void *sendbuf, void *recvbuf, size_t count,
    incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p)
{
    return post(RQ_REDUCE_SCATTER, comm, sendbuf, recvbuf, count, dtype, op, 0,
                0, req_p);
}

INCOLL_API incoll_status_t incoll_allreduce_init(
    incoll_comm_h comm, const void *sendbuf, void *recvbuf, size_t count,
    incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p)
{
    return post(RQ_ALLREDUCE, comm, sendbuf, recvbuf, count, dtype, op, 0, 1,
                req_p);
}

INCOLL_API incoll_status_t incoll_reduce_init(
    incoll_comm_h comm, const void *sendbuf, void *recvbuf, size_t count,
    incoll_dtype_t dtype, incoll_op_t op, int root, incoll_req_h *req_p)
{
    return post(RQ_REDUCE, comm, sendbuf, recvbuf, count, dtype, op, root, 1,
                req_p);
}

INCOLL_API incoll_status_t incoll_bcast_init(incoll_comm_h comm, void *buf,
                                             size_t bytes, int root,
                                             incoll_req_h *req_p)
{
    return post(RQ_BCAST, comm, buf, buf, bytes, NOOP, root, 1, req_p);
}

INCOLL_API incoll_status_t incoll_barrier_init(incoll_comm_h comm,
                                               incoll_req_h *req_p)
{
    return post(RQ_BARRIER, comm, NULL, NULL, 0, NOOP, 0, 1, req_p);
}

INCOLL_API incoll_status_t incoll_allgather_init(incoll_comm_h comm,
                                                 const void *sendbuf,
                                                 void *recvbuf, size_t bytes,
                                                 incoll_req_h *req_p)
{
    return post(RQ_ALLGATHER, comm, sendbuf, recvbuf, bytes, NOOP, 0, 1, req_p);
}

INCOLL_API incoll_status_t incoll_gather_init(incoll_comm_h comm,
                                              const void *sendbuf,
                                              void *recvbuf, size_t bytes,
                                              int root, incoll_req_h *req_p)
{
    return post(RQ_GATHER, comm, sendbuf, recvbuf, bytes, NOOP, root, 1, req_p);
}

INCOLL_API incoll_status_t incoll_scatter_init(incoll_comm_h comm,
                                               const void *sendbuf,
                                               void *recvbuf, size_t bytes,
                                               int root, incoll_req_h *req_p)
{
    return post(RQ_SCATTER, comm, sendbuf, recvbuf, bytes, NOOP, root, 1,
                req_p);
}

INCOLL_API incoll_status_t incoll_reduce_scatter_init(
    incoll_comm_h comm, const void *sendbuf, void *recvbuf, size_t count,
    incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p)
{
    return post(RQ_REDUCE_SCATTER, comm, sendbuf, recvbuf, count, dtype, op, 0,
                1, req_p);
}

incoll_status_t host_iallreduce_algo(incoll_comm_h comm, incoll_algo_t algo,
                                     const void *sendbuf, void *recvbuf,
                                     size_t count, incoll_dtype_t dtype,
                                     incoll_op_t op, incoll_req_h *req_p)
{
    host_req_args_t a = {RQ_ALLREDUCE, comm, sendbuf, recvbuf, count, dtype,
                         op,           0,    algo,    0,       NULL,  0};
    if (comm == NULL || req_p == NULL || (unsigned)algo >= INCOLL_ALGO_COUNT)
        return INCOLL_ERR_INVALID_ARG;
    return host_req_post(&a, 0, req_p);
}

int incoll_setting_given(const char *name)
{
    const setting_t *s = name ? setting_find(name) : NULL;
    if (s == NULL)
        return -1;
    return setting_in_env((setting_id_t)(s - setting_table));
}

/* ---- version and where a call ran ---- */

INCOLL_API incoll_status_t incoll_comm_where(incoll_comm_h comm,
                                             incoll_where_t *where_p)
{
    host_where_t w;
    if (comm == NULL || where_p == NULL)
        return INCOLL_ERR_INVALID_ARG;
    host_lock(comm->ctx);
    w = comm->where;
    host_where_fill(comm, w, where_p);
    host_unlock(comm->ctx);
    return INCOLL_OK;
}

INCOLL_API incoll_status_t incoll_comm_count_elsewhere(incoll_comm_h comm,
                                                       incoll_why_t why)
{
    int reason;
    if (comm == NULL)
        return INCOLL_ERR_INVALID_ARG;
    switch (why) {
    case INCOLL_WHY_UNSUPPORTED:
        reason = MGR_FB_UNSUPPORTED;
        break;
    case INCOLL_WHY_ALGO:
        reason = MGR_FB_REQUESTED;
        break;
    case INCOLL_WHY_NO_GROUP:
        /* the communicator's state says which: read under the lock */
        host_lock(comm->ctx);
        host_usage_count(comm, host_comm_fb_reason(comm));
        host_unlock(comm->ctx);
        return INCOLL_OK;
    case INCOLL_WHY_RECOVERED:
        reason = MGR_FB_GROUP_FAILED;
        break;
    default:
        return INCOLL_ERR_INVALID_ARG;
    }
    /* A call given to MPI's own: counted without the library lock, which
     * is taken once every few dozen calls to take the counts in. */
    if (host_usage_count_nolock(comm, reason)) {
        host_lock(comm->ctx);
        host_usage_settle(comm);
        host_unlock(comm->ctx);
    }
    return INCOLL_OK;
}

/* ---- for front ends: settings, logging, the table, the fabric ---- */

INCOLL_API int incoll_log_level(void)
{
    return log_level_current;
}

INCOLL_API void incoll_log(incoll_log_level_t level, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    if ((unsigned)level > INCOLL_LOG_TRACE)
        level = INCOLL_LOG_ERROR;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    log_emit((log_level_t)level, "%s", text);
}

INCOLL_API void incoll_log_set_name(const char *name)
{
    log_set_name(name ? name : "");
}

INCOLL_API incoll_status_t incoll_setting_value(const char *name,
                                                int64_t *num_p,
                                                const char **text_p)
{
    const setting_t *s = name ? setting_find(name) : NULL;
    setting_value_t v;
    char err[256];

    if (s == NULL)
        return INCOLL_ERR_NOT_FOUND;
    if (setting_get((setting_id_t)(s - setting_table), &v, err, sizeof(err)) !=
        INCOLL_OK)
        return INCOLL_ERR_CONFIG;
    if (num_p)
        *num_p = v.set ? v.i : 0;
    if (text_p)
        *text_p = v.text ? v.text : "";
    return INCOLL_OK;
}

INCOLL_API incoll_status_t incoll_settings_check(const char *components,
                                                 char *err, size_t len)
{
    if (components == NULL || (err == NULL && len > 0))
        return INCOLL_ERR_INVALID_ARG;
    return settings_check(components, err, len);
}

/* The text of id now (NULL when unset or bad), for the front ends'
 * questions above: like incoll_setting_value, read at the call. */
static const char *front_text(setting_id_t id)
{
    setting_value_t v;
    char err[256];
    if (setting_get(id, &v, err, sizeof(err)) != INCOLL_OK || !v.set)
        return NULL;
    return v.text;
}

INCOLL_API incoll_status_t incoll_table_check(char *err, size_t len)
{
    tune_table_t *t = malloc(sizeof(*t));
    int rc;

    if (t == NULL)
        return INCOLL_ERR_NO_MEMORY;
    rc = tune_load(t, front_text(SETTING_TUNE_FILE), front_text(SETTING_FABRIC),
                   front_text(SETTING_TUNE), err, len);
    free(t);
    return rc == 0 ? INCOLL_OK : INCOLL_ERR_CONFIG;
}

INCOLL_API const char *incoll_path_name(incoll_path_t path)
{
    return tune_path_name((int)path);
}

INCOLL_API const char *incoll_algo_name(incoll_algo_t algo)
{
    return tune_algo_name((int)algo);
}

INCOLL_API const char *incoll_form_name(incoll_form_t form)
{
    return tune_form_name((int)form);
}

/* The host of conf whose network namespace is the caller's, or -1 (also
 * when a host has none: not an emulated fabric). */
static int netns_host(const fabric_conf_t *conf)
{
    struct stat me, ns;
    char path[PATH_MAX];

    if (stat("/proc/self/ns/net", &me) != 0)
        return -1;
    for (int h = 0; h < conf->nhosts; h++) {
        if (conf->hosts[h].netns[0] == '\0')
            return -1;
        snprintf(path, sizeof(path), "/run/netns/%s", conf->hosts[h].netns);
        if (stat(path, &ns) == 0 && ns.st_ino == me.st_ino &&
            ns.st_dev == me.st_dev)
            return h;
    }
    return -1;
}

INCOLL_API incoll_status_t incoll_fabric_hosts(const char *dir, int *nhosts_p,
                                               int *here_p, char *err,
                                               size_t len)
{
    char path[PATH_MAX + 16], why[256];
    fabric_conf_t conf;
    incoll_status_t rc;

    if (dir == NULL || nhosts_p == NULL || (err == NULL && len > 0))
        return INCOLL_ERR_INVALID_ARG;
    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    memset(&conf, 0, sizeof(conf));
    rc = fabric_conf_load(path, &conf, why, sizeof(why));
    if (rc != INCOLL_OK) {
        if (len > 0)
            snprintf(err, len, "%s", why);
        return rc;
    }
    *nhosts_p = conf.nhosts;
    if (here_p)
        *here_p = netns_host(&conf);
    fabric_conf_free(&conf);
    return INCOLL_OK;
}
