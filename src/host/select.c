/*
 * The selection table in the context (docs/tuning.md): loaded once at
 * init, agreed across the world's ranks, and asked per call by every
 * front end (incoll_select), so that the PMPI layer, the Open MPI
 * component and any other caller decide alike.
 */
#include "host/host.h"
#include "host/comm.h"
#include "host/counters.h"
#include "host/req.h"
#include "host/allreduce.h"
#include "host/fallback.h"
#include "host/select.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(tune_table_t) % sizeof(uint64_t) == 0,
               "a table travels as 64-bit words");
_Static_assert((int)INCOLL_PATH_HOST == (int)TUNE_PATH_HOST &&
                   (int)INCOLL_PATH_MPI == (int)TUNE_PATH_MPI &&
                   (int)INCOLL_ALGO_RING == TUNE_ALGO_RING &&
                   (int)INCOLL_ALGO_RD == TUNE_ALGO_RD &&
                   (int)INCOLL_ALGO_RABENSEIFNER == TUNE_ALGO_RABENSEIFNER &&
                   (int)INCOLL_COLL_COUNT == TUNE_COLL_COUNT,
               "incoll.h's selection values are tune.h's");

/*
 * The job's shape, which the table's shape line and its ppn= entries are
 * compared with: without a manager, fabric.conf's (the ranks sharing its
 * hosts, or one each; its widest switch and its levels); with one, what the
 * manager said of the world's members with the world's group answer (topology
 * hosts and most ranks on one, the widest switch and highest level of
 * the group's tree; 0s from an older manager: unknown). Every rank has
 * the same values.
 */
static void job_shape(incoll_ctx_h ctx, tune_job_t *job)
{
    memset(job, 0, sizeof(*job));
    job->ranks = (uint32_t)ctx->size;
    if (ctx->info != NULL) {
        *job = ctx->mgr_shape;
        job->ranks = (uint32_t)ctx->size;
        return;
    }
    job->ppn = 1;
    if (ctx->host_map && ctx->conf.nhosts > 0)
        job->ppn =
            (uint32_t)((ctx->size + ctx->conf.nhosts - 1) / ctx->conf.nhosts);
    job->hosts = (uint32_t)ctx->size / job->ppn;
    if (ctx->conf.nhosts > 0)
        tune_conf_tree(&ctx->conf, &job->radix, &job->levels);
}

/* Loads this rank's table. A rank other than 0 that cannot read its own
 * only warns: rank 0's replaces it (host_tune_agree). */
static incoll_status_t tune_load_own(incoll_ctx_h ctx)
{
    char err[1024], name[400];
    tune_job_t job;
    const char *msrc = NULL, *mtext = host_ctx_mgr_tune(ctx, &msrc);
    int ret;

    /* INCOLL_TUNE_FILE, else the manager's, else the fabric directory's,
     * else the built-in; INCOLL_TUNE before it. */
    if ((ctx->cfg.tune_file == NULL || *ctx->cfg.tune_file == '\0') &&
        mtext != NULL) {
        snprintf(name, sizeof(name), "manager's %s", msrc);
        tune_init(&ctx->tune, name);
        ret = tune_parse_text(&ctx->tune, mtext, name, err, sizeof(err));
        if (ret == 0 && ctx->cfg.tune && *ctx->cfg.tune)
            ret = tune_parse_override(&ctx->tune, ctx->cfg.tune, err,
                                      sizeof(err));
        if (ret != 0)
            tune_init(&ctx->tune, "none (an error)");
    } else {
        ret = tune_load(&ctx->tune, ctx->cfg.tune_file,
                        ctx->fabric_dir[0] ? ctx->fabric_dir : NULL,
                        ctx->cfg.tune, err, sizeof(err));
    }
    if (ret != 0) {
        if (ctx->rank == 0) {
            incoll_error("init: selection table: %s", err);
            return INCOLL_ERR_CONFIG;
        }
        incoll_warn("init: selection table: %s: rank 0's decides", err);
    }
    job_shape(ctx, &job);
    ctx->tune.ppn = job.ppn;
    tune_apply_job(&ctx->tune, &job);
    if (ctx->tune.shape_ok == 0 && ctx->rank == 0)
        incoll_info("init: selection table %s: shape '%s' %s", ctx->tune.source,
                    ctx->tune.shape, ctx->tune.shape_note);
    return INCOLL_OK;
}

/*
 * An allreduce over the world for the agreement below, in place. With a
 * manager the world's own (in the network, recovered like any call: a
 * host-to-host exchange beside it would be taken for a recovery by the
 * members that run ahead), as the library's own exchange, not one of the
 * job's collectives; else host to host.
 */
static incoll_status_t agree_allreduce(incoll_ctx_h ctx, algo_kind_t kind,
                                       void *buf, size_t count,
                                       incoll_dtype_t dtype, incoll_op_t op)
{
    incoll_status_t status;
    if (host_ctx_mgr(ctx) == NULL)
        return host_allreduce_sched(ctx->world, kind, buf, buf, count, dtype,
                                    op);
    host_usage_begin();
    status = host_allreduce_service(ctx->world, INCOLL_IN_PLACE, buf, count,
                                    dtype, op);
    host_usage_end();
    return status;
}

/*
 * Every rank's table hashed and compared (the largest of the hash and of
 * its negation): equal, nothing more; else rank 0's table goes to every
 * rank (an XOR allreduce to which only rank 0 gives its bytes) and
 * replaces theirs, each rank that differed naming both hashes and
 * sources. Collective over the world; under the context's lock.
 */
static incoll_status_t tune_agree(incoll_ctx_h ctx)
{
    uint64_t mine = tune_hash(&ctx->tune), theirs;
    int64_t c[2];
    size_t words = sizeof(tune_table_t) / sizeof(uint64_t);
    uint64_t *buf;
    tune_table_t *t0;
    incoll_status_t status;

    if (ctx->size == 1 || ctx->tune_cmp == 1)
        return INCOLL_OK;
    if (ctx->tune_cmp == 0) {
        c[0] = (int64_t)(mine >> 1);
        c[1] = -c[0];
        status =
            agree_allreduce(ctx, ALGO_RD, c, 2, INCOLL_INT64, INCOLL_OP_MAX);
        if (status != INCOLL_OK)
            goto failed;
        if (c[0] == -c[1])
            return INCOLL_OK;
    }
    buf = calloc(words, sizeof(uint64_t));
    if (buf == NULL)
        return INCOLL_ERR_NO_MEMORY;
    if (ctx->rank == 0)
        memcpy(buf, &ctx->tune, sizeof(ctx->tune));
    status = agree_allreduce(ctx, ALGO_RING, buf, words, INCOLL_UINT64,
                             INCOLL_OP_BXOR);
    if (status != INCOLL_OK) {
        free(buf);
        goto failed;
    }
    t0 = (tune_table_t *)buf;
    t0->source[sizeof(t0->source) - 1] = '\0';
    t0->shape[sizeof(t0->shape) - 1] = '\0';
    t0->env[sizeof(t0->env) - 1] = '\0';
    t0->shape_note[sizeof(t0->shape_note) - 1] = '\0';
    if (t0->n > TUNE_MAX) {
        free(buf);
        status = INCOLL_ERR_PROTOCOL;
        goto failed;
    }
    tune_reindex(t0);
    theirs = tune_hash(t0);
    if (ctx->rank == 0)
        incoll_warn("init: the ranks' selection tables differ: rank 0's is "
                    "%016" PRIx64 " (from %s%s%s); every rank follows rank "
                    "0's (docs/tuning.md)",
                    mine, ctx->tune.source,
                    ctx->tune.env[0] ? ", INCOLL_TUNE=" : "", ctx->tune.env);
    else if (theirs != mine)
        incoll_warn("init: this rank's selection table %016" PRIx64
                    " (from %s%s%s) differs from rank 0's %016" PRIx64
                    " (from %s%s%s): following rank 0's",
                    mine, ctx->tune.source,
                    ctx->tune.env[0] ? ", INCOLL_TUNE=" : "", ctx->tune.env,
                    theirs, t0->source, t0->env[0] ? ", INCOLL_TUNE=" : "",
                    t0->env);
    memcpy(&ctx->tune, t0, sizeof(ctx->tune));
    free(buf);
    return INCOLL_OK;

failed:
    incoll_error("init: the ranks could not compare their selection tables: "
                 "%s",
                 incoll_status_string(status));
    return status;
}

incoll_status_t host_tune_load(incoll_ctx_h ctx)
{
    incoll_status_t status = tune_load_own(ctx);
    ctx->tune_loaded = status == INCOLL_OK;
    return status;
}

incoll_status_t host_tune_agree(incoll_ctx_h ctx)
{
    incoll_status_t status;
    if (!ctx->tune_loaded && (status = host_tune_load(ctx)) != INCOLL_OK)
        return status;
    /* With a manager, the front end asks (incoll_ctx_agree_table): an
     * exchange of the library's own at init would shift every job's
     * operation numbers. */
    if (host_ctx_mgr(ctx) != NULL)
        return INCOLL_OK;
    return incoll_ctx_agree_table(ctx);
}

INCOLL_API incoll_status_t incoll_ctx_agree_table(incoll_ctx_h ctx)
{
    incoll_status_t status;
    if (ctx == NULL)
        return INCOLL_ERR_INVALID_ARG;
    host_lock(ctx);
    status = tune_agree(ctx);
    if (status == INCOLL_OK)
        ctx->tune_cmp = 1;
    host_unlock(ctx);
    return status;
}

static int dclass_of(incoll_dtype_t dtype)
{
    switch (dtype) {
    case INCOLL_FLOAT16:
    case INCOLL_BFLOAT16:
    case INCOLL_FLOAT32:
    case INCOLL_FLOAT64:
        return TUNE_DCLASS_FLOAT;
    default:
        return (unsigned)dtype < INCOLL_FLOAT16 ? TUNE_DCLASS_INT
                                                : TUNE_DCLASS_NONE;
    }
}

INCOLL_API incoll_path_t incoll_ctx_select(incoll_ctx_h ctx, int nranks,
                                           incoll_coll_t coll,
                                           incoll_form_t form, uint64_t bytes,
                                           incoll_dtype_t dtype,
                                           incoll_choice_t *choice_p)
{
    int entry = -1, path = TUNE_PATH_INC;

    if (ctx != NULL && nranks > 0 && (unsigned)coll < INCOLL_COLL_COUNT &&
        (unsigned)form < TUNE_FORM_COUNT)
        path = tune_select(&ctx->tune, (int)coll, (int)form,
                           coll == INCOLL_COLL_BARRIER ? 0 : bytes,
                           (uint32_t)nranks, ctx->tune.ppn, dclass_of(dtype),
                           &entry);
    if (choice_p) {
        choice_p->path = (incoll_path_t)path;
        choice_p->algo = path == TUNE_PATH_HOST
                             ? (incoll_algo_t)ctx->tune.e[entry].algo
                             : INCOLL_ALGO_AUTO;
        choice_p->entry = entry;
    }
    return (incoll_path_t)path;
}

INCOLL_API incoll_path_t incoll_select(incoll_comm_h comm, incoll_coll_t coll,
                                       incoll_form_t form, uint64_t bytes,
                                       incoll_dtype_t dtype,
                                       incoll_choice_t *choice_p)
{
    return incoll_ctx_select(comm ? comm->ctx : NULL, comm ? comm->size : 0,
                             coll, form, bytes, dtype, choice_p);
}

/* incoll_table_info_t as 0.3 and 0.4 had it: a 200-byte shape note. */
typedef struct {
    uint64_t hash;
    int entries;
    int shape_matches;
    char source[256];
    char shape[128];
    char shape_note[200];
    char override[256];
} table_info_0_4_t;

_Static_assert(sizeof(((incoll_table_info_t *)0)->shape_note) ==
                   sizeof(((tune_table_t *)0)->shape_note),
               "the public shape note holds the table's whole");
_Static_assert(sizeof(table_info_0_4_t) != sizeof(incoll_table_info_t),
               "the layouts are told apart by their sizes");

/* The fields of either layout (the note clipped to 0.4's 200 bytes
 * there). */
#define TABLE_INFO_FILL(info_p, t)                                             \
    do {                                                                       \
        memset((info_p), 0, sizeof(*(info_p)));                                \
        (info_p)->hash = tune_hash(t);                                         \
        (info_p)->entries = (int)(t)->n;                                       \
        (info_p)->shape_matches = (t)->shape_ok;                               \
        snprintf((info_p)->source, sizeof((info_p)->source), "%s",             \
                 (t)->source);                                                 \
        snprintf((info_p)->shape, sizeof((info_p)->shape), "%s", (t)->shape);  \
        snprintf((info_p)->shape_note, sizeof((info_p)->shape_note), "%.*s",   \
                 (int)sizeof((info_p)->shape_note) - 1, (t)->shape_note);      \
        snprintf((info_p)->override, sizeof((info_p)->override), "%s",         \
                 (t)->env);                                                    \
    } while (0)

INCOLL_API incoll_status_t incoll_ctx_table_sized(incoll_ctx_h ctx,
                                                  incoll_table_info_t *info_p,
                                                  size_t info_size)
{
    if (ctx == NULL || info_p == NULL)
        return INCOLL_ERR_INVALID_ARG;
    if (info_size == sizeof(incoll_table_info_t)) {
        TABLE_INFO_FILL(info_p, &ctx->tune);
        return INCOLL_OK;
    }
    if (info_size == sizeof(table_info_0_4_t)) {
        table_info_0_4_t *old = (table_info_0_4_t *)(void *)info_p;
        TABLE_INFO_FILL(old, &ctx->tune);
        return INCOLL_OK;
    }
    return INCOLL_ERR_INVALID_ARG;
}

/* 0.4's function, for the programs built against it (the header's
 * incoll_ctx_table is now a macro of incoll_ctx_table_sized). */
INCOLL_API incoll_status_t(incoll_ctx_table)(incoll_ctx_h ctx,
                                             table_info_0_4_t *info_p);
INCOLL_API incoll_status_t(incoll_ctx_table)(incoll_ctx_h ctx,
                                             table_info_0_4_t *info_p)
{
    return incoll_ctx_table_sized(ctx, (incoll_table_info_t *)(void *)info_p,
                                  sizeof(*info_p));
}

INCOLL_API incoll_status_t incoll_table_entry(incoll_ctx_h ctx, int entry,
                                              char *buf, size_t len)
{
    char line[256], where[320];
    if (ctx == NULL || buf == NULL || len == 0 ||
        (entry >= 0 && (uint32_t)entry >= ctx->tune.n))
        return INCOLL_ERR_INVALID_ARG;
    tune_entry_where(&ctx->tune, entry, where, sizeof(where));
    if (entry < 0) {
        snprintf(buf, len, "%s", where);
        return INCOLL_OK;
    }
    tune_entry_format(&ctx->tune.e[entry], line, sizeof(line));
    snprintf(buf, len, "%s (%s)", line, where);
    return INCOLL_OK;
}
