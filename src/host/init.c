/*
 * Start-up and teardown of a context (incoll_init, incoll_init_params,
 * incoll_finalize) and the world communicator's accessors: identity from
 * the parameters and the environment, the fabric from the manager
 * (INCOLL_MGR, src/host/comm.c) or from fabric.conf (INCOLL_FABRIC), the
 * out-of-band bootstrap, the UDP endpoint, the job's key, the world, and
 * in incoll_finalize each module's state freed in turn. At the top of
 * src/host beside api.c: it calls every layer below, none calls it.
 */
#include "host/host.h"

#include "host/comm.h"
#include "host/counters.h"
#include "host/hier.h"
#include "host/colls.h"
#include "host/lock.h"
#include "host/req.h"
#include "host/service.h"
#include "host/allreduce.h"
#include "host/fallback.h"
#include "host/init.h"
#include "host/mcast.h"
#include "host/rdv.h"
#include "host/select.h"
#include "host/stream.h"

#include "common/clock.h"
#include "common/settings.h"
#include "common/log.h"
#include "common/mgr_codec.h"
#include "common/mgr_proto.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The header makes these macros that pass its version (incoll.h): here
 * they are the functions that programs built before the check call. */
#undef incoll_init
#undef incoll_init_params

static void ctx_send(void *arg, incoll_ep_t dst, const void *hdr,
                     const void *payload, size_t len)
{
    incoll_ctx_h ctx = arg;
    udp_send(ctx->sock, dst, hdr, WIRE_HDR_LEN, payload, len);
}

/* A contribution from the operation's send buffer: sent from where it is
 * (the engine flushes before the operation ends, ctx_flush). */
static void ctx_send_ref(void *arg, incoll_ep_t dst, const void *hdr,
                         const void *payload, size_t len)
{
    incoll_ctx_h ctx = arg;
    udp_send_ref(ctx->sock, dst, hdr, WIRE_HDR_LEN, payload, len);
}

static void ctx_flush(void *arg)
{
    incoll_ctx_h ctx = arg;
    udp_flush(ctx->sock);
}

/* splitmix64 */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* 64 random bits (the kernel's; the clock and pid if it has none). */
static uint64_t random64(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = mix64((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^
                  (uint64_t)getpid() << 48);
    }
    return r;
}

static void job_key_set(incoll_ctx_h ctx, uint64_t key, uint32_t gen)
{
    ctx->job_key = key;
    ctx->gen = gen ? gen : 1;
    incoll_debug("init: the job's generation is %08x", ctx->gen);
}

incoll_status_t host_job_key(incoll_ctx_h ctx)
{
    incoll_comm_h w = ctx->world;
    uint64_t r[2], gk;
    int64_t c[6];
    incoll_status_t status;

    if (ctx->size == 1) {
        uint64_t k = random64();
        job_key_set(ctx, k, (uint32_t)k);
    } else if (host_comm_group_key(w, &gk)) {
        /* The manager's random key of the world's group: every job has a
         * group of its own (its ANs' slots, too), so nothing needs
         * ordering; mixed with the job id. */
        uint64_t k =
            mix64(gk ^ mix64(host_job_generation(ctx->cfg.gen, ctx->job)));
        job_key_set(ctx, k, (uint32_t)(k >> 32));
    } else {
        /* On the hosts: the XOR of a random number of every rank, and the
         * first rank's clock in ms, which orders the generations of jobs
         * that follow one another on a fabric.conf group (an AN lets a
         * newer one take it over at once). Then every rank checks that
         * all got the same, with the largest of each value and of its
         * negation: a packet of an earlier job's exchange (its key is
         * the launcher's) can only make them differ, and then init fails. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r[0] = random64();
        r[1] = ctx->rank == 0
                   ? (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000
                   : 0;
        status = host_allreduce_sched(w, ALGO_RD, r, r, 2, INCOLL_UINT64,
                                      INCOLL_OP_BXOR);
        if (status == INCOLL_OK) {
            c[0] = (int64_t)(r[0] >> 1);
            c[1] = -c[0];
            c[2] = (int64_t)(r[1] & 0x3fffffffffffffffull);
            c[3] = -c[2];
            /* and the ranks' selection tables, when loaded (one exchange
             * less at init: src/host/select.c) */
            c[4] = ctx->tune_loaded ? (int64_t)(tune_hash(&ctx->tune) >> 1) : 0;
            c[5] = -c[4];
            status = host_allreduce_sched(w, ALGO_RD, c, c, 6, INCOLL_INT64,
                                          INCOLL_OP_MAX);
            if (status == INCOLL_OK && ctx->tune_loaded)
                ctx->tune_cmp = c[4] == -c[5] ? 1 : 2;
        }
        if (status != INCOLL_OK) {
            incoll_error("init: the ranks could not agree on the job's key: "
                         "%s",
                         incoll_status_string(status));
            return status;
        }
        if (c[0] != -c[1] || c[2] != -c[3]) {
            incoll_error("init: the ranks did not agree on the job's key "
                         "(packets of another job, or forged ones, came in "
                         "the exchange)");
            return INCOLL_ERR_PROTOCOL;
        }
        job_key_set(ctx, mix64(r[0] ^ r[1]),
                    (uint32_t)(r[1] << 12) | (uint32_t)(r[0] & 0xfff));
    }
    return host_comm_rekey(w);
}

/* The string field of params if it is in the mask (checked), else the
 * configuration's value env of setting id; "" when neither. */
static incoll_status_t ident_text(const incoll_init_params_t *params,
                                  uint64_t field, const char *given,
                                  setting_id_t id, const char *env,
                                  const char **v_p)
{
    const char *v = env;
    if (params && (params->field_mask & field)) {
        if (host_cfg_check(id, given) != INCOLL_OK)
            return INCOLL_ERR_CONFIG;
        v = given;
    }
    *v_p = v ? v : "";
    return INCOLL_OK;
}

/* ident_text() into buf; a value that does not fit is an error. */
static incoll_status_t ident_str(const incoll_init_params_t *params,
                                 uint64_t field, const char *given,
                                 setting_id_t id, const char *env, char *buf,
                                 size_t len)
{
    const char *v;
    if (ident_text(params, field, given, id, env, &v) != INCOLL_OK)
        return INCOLL_ERR_CONFIG;
    if (strlen(v) >= len) {
        incoll_error("init: %s is longer than %zu bytes", host_cfg_name(id),
                     len - 1);
        return INCOLL_ERR_CONFIG;
    }
    snprintf(buf, len, "%s", v);
    return INCOLL_OK;
}

/* An int field of params if it is in the mask, else the configuration's
 * value env of setting id (-1 unset); -1 when neither. Checks min..max. */
static incoll_status_t ident_int(const incoll_init_params_t *params,
                                 uint64_t field, int given, setting_id_t id,
                                 int64_t env, int min, int max, int *v_p)
{
    int64_t v = env;
    if (params && (params->field_mask & field))
        v = given;
    if (v != -1 && (v < min || v > max)) {
        incoll_error("init: %s=%lld is not in %d..%d", host_cfg_name(id),
                     (long long)v, min, max);
        return INCOLL_ERR_CONFIG;
    }
    *v_p = (int)v;
    return INCOLL_OK;
}

/* The hosts list and the progress thread, from params or the settings. */
static incoll_status_t ident_fabric_rest(incoll_ctx_h ctx,
                                         const incoll_init_params_t *p)
{
    const char *hosts;

    if (ident_text(p, INCOLL_INIT_FIELD_HOSTS, p->hosts, SETTING_HOSTS,
                   ctx->cfg.hosts, &hosts) != INCOLL_OK)
        return INCOLL_ERR_CONFIG;
    ctx->hosts = strdup(hosts);
    if (ctx->hosts == NULL)
        return INCOLL_ERR_NO_MEMORY;
    if (p->field_mask & INCOLL_INIT_FIELD_PROGRESS_THREAD) {
        char text[16];
        snprintf(text, sizeof(text), "%d", p->progress_thread);
        if (host_cfg_check(SETTING_PROGRESS_THREAD, text) != INCOLL_OK)
            return INCOLL_ERR_CONFIG;
        ctx->progress_thread = p->progress_thread != 0;
    } else {
        ctx->progress_thread = ctx->cfg.progress_thread;
    }
    if (p->field_mask & INCOLL_INIT_FIELD_EARLY_MAX) {
        char text[32];
        snprintf(text, sizeof(text), "%zu", p->early_max);
        if (host_cfg_check(SETTING_EARLY_MAX, text) != INCOLL_OK)
            return INCOLL_ERR_CONFIG;
        ctx->early_max = p->early_max;
    } else {
        ctx->early_max = ctx->cfg.early_max;
    }
    return INCOLL_OK;
}

/* A name the manager is told (the job's, the host's): printable and
 * short enough for its join message (MGR_NAME_MAX), so that a bad one
 * fails here, naming it, and not later at the manager. */
static incoll_status_t ident_name(const char *setting, const char *v)
{
    size_t n = strlen(v);
    if (n >= MGR_NAME_MAX) {
        incoll_error("init: %s is %zu bytes long; the manager takes names "
                     "of at most %d",
                     setting, n, MGR_NAME_MAX - 1);
        return INCOLL_ERR_CONFIG;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 0x20 || c == 0x7f) {
            incoll_error("init: %s has a control character (byte 0x%02x at "
                         "%zu): use printable characters",
                         setting, c, i);
            return INCOLL_ERR_CONFIG;
        }
    }
    return INCOLL_OK;
}

/* The thread mode and the outer lock, from params. */
static incoll_status_t ident_threads(incoll_ctx_h ctx,
                                     const incoll_init_params_t *p)
{
    ctx->thread_mode = INCOLL_THREAD_MULTIPLE;
    if (p->field_mask & INCOLL_INIT_FIELD_THREAD_MODE) {
        if ((unsigned)p->thread_mode > INCOLL_THREAD_MULTIPLE) {
            incoll_error("init: thread_mode %d is not one of "
                         "INCOLL_THREAD_SINGLE..INCOLL_THREAD_MULTIPLE (0..3)",
                         (int)p->thread_mode);
            return INCOLL_ERR_CONFIG;
        }
        ctx->thread_mode = p->thread_mode;
    }
    if (p->field_mask & INCOLL_INIT_FIELD_OUTER_LOCK) {
        if (p->outer_lock.release == NULL || p->outer_lock.reacquire == NULL) {
            incoll_error("init: outer_lock needs both release and reacquire");
            return INCOLL_ERR_CONFIG;
        }
        if (ctx->thread_mode != INCOLL_THREAD_MULTIPLE) {
            incoll_error("init: an outer lock is for INCOLL_THREAD_MULTIPLE "
                         "(thread_mode is %d: one thread at a time calls, "
                         "nothing to give up while it blocks)",
                         (int)ctx->thread_mode);
            return INCOLL_ERR_CONFIG;
        }
        ctx->outer_lock = p->outer_lock;
    }
    return INCOLL_OK;
}

/* Sets ctx's identity from params and the settings. */
static incoll_status_t ident_load(incoll_ctx_h ctx,
                                  const incoll_init_params_t *p)
{
    incoll_init_params_t none = {0};
    incoll_status_t status;

    if (p == NULL)
        p = &none;
    status = ident_int(p, INCOLL_INIT_FIELD_SIZE, p->size, SETTING_SIZE,
                       ctx->cfg.size, 1, 1 << 24, &ctx->size);
    if (status != INCOLL_OK)
        return status;
    if (ctx->size < 0) {
        /* (before the rank: its range comes from the size) */
        incoll_error("init: INCOLL_SIZE is not set (use `incoll run`, or set "
                     "INCOLL_SIZE to the number of ranks)");
        return INCOLL_ERR_CONFIG;
    }
    status = ident_int(p, INCOLL_INIT_FIELD_RANK, p->rank, SETTING_RANK,
                       ctx->cfg.rank, 0, ctx->size - 1, &ctx->rank);
    if (status != INCOLL_OK)
        return status;
    if (ctx->rank < 0) {
        incoll_error("init: INCOLL_RANK is not set (use `incoll run`, or set "
                     "INCOLL_RANK to this process's rank, 0..%d)",
                     ctx->size - 1);
        return INCOLL_ERR_CONFIG;
    }
    status = ident_int(p, INCOLL_INIT_FIELD_LOCAL_SIZE, p->local_size,
                       SETTING_LOCAL_SIZE, ctx->cfg.local_size, 1, 1 << 24,
                       &ctx->local_size);
    if (status == INCOLL_OK)
        status =
            ident_int(p, INCOLL_INIT_FIELD_LOCAL_RANK, p->local_rank,
                      SETTING_LOCAL_RANK, ctx->cfg.local_rank, 0,
                      ctx->local_size > 0 ? ctx->local_size - 1 : (1 << 24) - 1,
                      &ctx->local_rank);
    if (status != INCOLL_OK)
        return status;
    if (ctx->local_size < 0)
        ctx->local_size = 0;
    if (ident_str(p, INCOLL_INIT_FIELD_JOB, p->job, SETTING_JOB, ctx->cfg.job,
                  ctx->job, sizeof(ctx->job)) != INCOLL_OK ||
        ident_str(p, INCOLL_INIT_FIELD_HOST, p->host, SETTING_HOST,
                  ctx->cfg.host, ctx->host, sizeof(ctx->host)) != INCOLL_OK ||
        ident_str(p, INCOLL_INIT_FIELD_MGR, p->mgr, SETTING_MGR, ctx->cfg.mgr,
                  ctx->mgr, sizeof(ctx->mgr)) != INCOLL_OK ||
        ident_str(p, INCOLL_INIT_FIELD_FABRIC, p->fabric, SETTING_FABRIC,
                  ctx->cfg.fabric, ctx->fabric_dir,
                  sizeof(ctx->fabric_dir)) != INCOLL_OK ||
        ident_str(p, INCOLL_INIT_FIELD_SECRET_FILE, p->secret_file,
                  SETTING_SECRET_FILE, ctx->cfg.secret_file, ctx->secret_file,
                  sizeof(ctx->secret_file)) != INCOLL_OK ||
        ident_name("INCOLL_JOB", ctx->job) != INCOLL_OK ||
        ident_name("INCOLL_HOST", ctx->host) != INCOLL_OK)
        return INCOLL_ERR_CONFIG;
    status = ident_threads(ctx, p);
    if (status != INCOLL_OK)
        return status;
    return ident_fabric_rest(ctx, p);
}

/*
 * Loads the fabric secret (INCOLL_SECRET_FILE) that the data path's mac keys
 * are derived from. With a manager it is required (the manager link needs
 * it as well); without one it is optional: a fabric.conf-only fabric
 * without a secret authenticates its packets with keys derived from
 * fabric.conf's group key, so that reading fabric.conf is what it takes to
 * forge them (docs/security.md).
 */
static incoll_status_t load_secret(incoll_ctx_h ctx, int with_mgr)
{
    const char *path = ctx->secret_file;
    char err[PATH_MAX + 128], own[PATH_MAX + 32];
    incoll_status_t status;

    /* A fabric of `incoll fabric up` with a manager (DIR/fabric.env) has
     * its secret in DIR/secret, and its ANs key fabric.conf's world group
     * with it: a job run on INCOLL_FABRIC alone (mpirun without `incoll
     * mpirun`) must do the same. */
    if ((path == NULL || *path == '\0') && !with_mgr &&
        ctx->fabric_dir[0] != '\0') {
        snprintf(own, sizeof(own), "%s/fabric.env", ctx->fabric_dir);
        if (access(own, F_OK) == 0) {
            snprintf(own, sizeof(own), "%s/secret", ctx->fabric_dir);
            path = own;
        }
    }

    if (path == NULL || *path == '\0') {
        if (!with_mgr)
            incoll_info("init: no fabric secret (INCOLL_SECRET_FILE): data "
                        "packets are authenticated with keys derived from "
                        "fabric.conf alone; anyone who can read it can forge "
                        "them");
        return INCOLL_OK; /* with a manager, its link reports the cause */
    }
    status = mgr_secret_load(path, ctx->secret, err, sizeof(err));
    if (status == INCOLL_OK) {
        ctx->has_secret = 1;
        return INCOLL_OK;
    }
    if (status == INCOLL_ERR_UNSUPPORTED && !with_mgr) {
        incoll_info("init: %s; data packets are authenticated with keys "
                    "derived from fabric.conf alone",
                    err);
        return INCOLL_OK;
    }
    if (with_mgr)
        return INCOLL_OK; /* the manager link fails with the same cause */
    incoll_error("init: %s", err);
    return status;
}

/* Makes the world communicator on the fabric's world group. */
static incoll_status_t world_create(incoll_ctx_h ctx)
{
    incoll_comm_h comm = calloc(1, sizeof(*comm));
    incoll_status_t status;

    if (comm == NULL)
        return INCOLL_ERR_NO_MEMORY;
    comm->ctx = ctx;
    comm->rank = ctx->rank;
    comm->size = ctx->size;
    comm->world_ranks = malloc((size_t)ctx->size * sizeof(int));
    if (comm->world_ranks == NULL) {
        free(comm);
        return INCOLL_ERR_NO_MEMORY;
    }
    for (int i = 0; i < ctx->size; i++)
        comm->world_ranks[i] = i;
    comm->group = ctx->conf.group_id;
    status = host_world_engine(comm, ctx->rank);
    if (status != INCOLL_OK) {
        host_comm_free(comm);
        return status;
    }
    ctx->world = comm;
    comm->next = ctx->comms;
    ctx->comms = comm;
    return INCOLL_OK;
}

/*
 * The world of a fabric whose hosts its ranks share, without a manager
 * (src/host/rdv.c): every rank's endpoint from the rendezvous, no group of
 * its own, and its node level made now, whose leaders' communicator
 * takes fabric.conf's world group (src/host/hier.c). Collective.
 */
static incoll_status_t world_create_shared(incoll_ctx_h ctx)
{
    incoll_ep_t *eps = NULL;
    int *wr = malloc((size_t)ctx->size * sizeof(int));
    incoll_status_t status;

    if (wr == NULL)
        return INCOLL_ERR_NO_MEMORY;
    status = host_rdv_run(ctx, &eps);
    if (status != INCOLL_OK) {
        free(wr);
        return status;
    }
    for (int i = 0; i < ctx->size; i++)
        wr[i] = i;
    status = host_comm_bare(ctx, 0, ctx->size, wr, ctx->rank, eps, &ctx->world);
    if (status != INCOLL_OK)
        return status;
    host_lock(ctx);
    status = host_job_key(ctx);
    if (status == INCOLL_OK && !host_hier_active(ctx->world, &status) &&
        status == INCOLL_OK)
        status = INCOLL_ERR_CONFIG;
    host_unlock(ctx);
    if (status != INCOLL_OK) {
        incoll_error("init: %d ranks on the %d hosts of the fabric in %s: "
                     "their node level could not be made: %s",
                     ctx->size, ctx->conf.nhosts, ctx->fabric_dir,
                     incoll_status_string(status));
        return status;
    }
    ctx->via_leaders = 1;
    incoll_debug("init: fabric host %d, %s; the world reaches the fabric "
                 "through the hosts' leaders",
                 ctx->fabric_host,
                 host_rdv_is_leader(ctx) ? "its leader" : "not its leader");
    return INCOLL_OK;
}

static incoll_status_t init_plain(const incoll_init_params_t *params,
                                  incoll_ctx_h *ctx_p);
static incoll_status_t init_oob(const incoll_init_params_t *params,
                                incoll_ctx_h *ctx_p);

INCOLL_API incoll_status_t incoll_init(incoll_ctx_h *ctx_p)
{
    return incoll_init_params(NULL, ctx_p);
}

INCOLL_API incoll_status_t
incoll_init_params(const incoll_init_params_t *params, incoll_ctx_h *ctx_p)
{
    if (params && (params->field_mask & INCOLL_INIT_FIELD_OOB))
        return init_oob(params, ctx_p);
    return init_plain(params, ctx_p);
}

INCOLL_API incoll_status_t
incoll_init_version(unsigned major, unsigned minor,
                    const incoll_init_params_t *params, incoll_ctx_h *ctx_p)
{
    if (major != INCOLL_VERSION_MAJOR || minor > INCOLL_VERSION_MINOR) {
        log_init_from_env();
        incoll_error("init: this program was built against incoll.h %u.%u "
                     "but runs with libincoll %s, which %s: rebuild it "
                     "against the incoll.h of this libincoll, or run it with "
                     "a libincoll %u.x of at least %u.%u",
                     major, minor, incoll_get_version_string(),
                     major != INCOLL_VERSION_MAJOR
                         ? "is another major version"
                         : "is older and lacks what that header declares",
                     major, major, minor);
        return INCOLL_ERR_VERSION;
    }
    return incoll_init_params(params, ctx_p);
}

/* ---- out-of-band bootstrap (incoll_oob_t) ---- */

/* What each rank tells the others first: who it thinks it is, whether
 * its arguments were good, and the job it was given ("" none). */
typedef struct {
    int32_t rank;
    int32_t size;
    int32_t status;
    char job[256];
} oob_rec_t;

/* Checks the records of every rank (the same on every rank, so every
 * rank decides alike); rank 0's job (or its random one) into job. */
static incoll_status_t oob_agree(const oob_rec_t *all, int size, char *job,
                                 size_t len)
{
    for (int r = 0; r < size; r++) {
        if (all[r].status != INCOLL_OK) {
            incoll_error("init: rank %d's arguments were refused (%s): no "
                         "rank starts",
                         r, incoll_status_string(all[r].status));
            return INCOLL_ERR_CONFIG;
        }
        if (all[r].rank != r || all[r].size != size) {
            incoll_error("init: out-of-band bootstrap: entry %d of the "
                         "allgather says rank %d of %d, not rank %d of %d "
                         "(every rank must give its own distinct rank and the "
                         "same size)",
                         r, (int)all[r].rank, (int)all[r].size, r, size);
            return INCOLL_ERR_CONFIG;
        }
        if (all[r].job[0] && strcmp(all[r].job, all[0].job) != 0) {
            incoll_error("init: rank %d was given job \"%.64s\" but rank 0 "
                         "\"%.64s\": the ranks of one world share a job",
                         r, all[r].job, all[0].job);
            return INCOLL_ERR_CONFIG;
        }
    }
    snprintf(job, len, "%s", all[0].job);
    return INCOLL_OK;
}

static incoll_status_t init_oob(const incoll_init_params_t *params,
                                incoll_ctx_h *ctx_p)
{
    const incoll_oob_t *oob = &params->oob;
    incoll_init_params_t p = *params;
    oob_rec_t mine, *all;
    int32_t st, *sts;
    incoll_status_t status = INCOLL_OK;
    incoll_ctx_h ctx = NULL;
    char job[256];
    const char *given;
    host_cfg_t cfg;
    char err[512];

    log_init_from_env();
    if (ctx_p == NULL || oob->allgather == NULL || oob->size < 1 ||
        oob->rank < 0 || oob->rank >= oob->size) {
        incoll_error("init: out-of-band bootstrap needs an allgather and a "
                     "rank in 0..size-1 (rank %d, size %d)",
                     oob->rank, oob->size);
        return INCOLL_ERR_INVALID_ARG;
    }
    memset(&mine, 0, sizeof(mine));
    mine.rank = oob->rank;
    mine.size = oob->size;
    if (((params->field_mask & INCOLL_INIT_FIELD_RANK) &&
         params->rank != oob->rank) ||
        ((params->field_mask & INCOLL_INIT_FIELD_SIZE) &&
         params->size != oob->size)) {
        incoll_error("init: rank/size %d/%d given beside the out-of-band "
                     "bootstrap's %d/%d",
                     params->rank, params->size, oob->rank, oob->size);
        mine.status = INCOLL_ERR_CONFIG;
    }
    /* (a bad setting fails init_plain() below, naming it) */
    (void)host_cfg_fill(&cfg, err, sizeof(err));
    given =
        (params->field_mask & INCOLL_INIT_FIELD_JOB) ? params->job : cfg.job;
    if (given && *given)
        snprintf(mine.job, sizeof(mine.job), "%s", given);
    else if (oob->rank == 0)
        snprintf(mine.job, sizeof(mine.job), "oob-%016" PRIx64, random64());
    host_cfg_free(&cfg);
    all = calloc((size_t)oob->size, sizeof(*all));
    sts = calloc((size_t)oob->size, sizeof(*sts));
    if (all == NULL || sts == NULL) {
        free(all);
        free(sts);
        return INCOLL_ERR_NO_MEMORY;
    }
    if (oob->allgather(oob->coll_info, &mine, all, sizeof(mine)) != 0) {
        incoll_error("init: the out-of-band allgather failed");
        status = INCOLL_ERR_IO;
        goto out;
    }
    status = oob_agree(all, oob->size, job, sizeof(job));
    if (status != INCOLL_OK)
        goto out;
    p.field_mask |=
        INCOLL_INIT_FIELD_RANK | INCOLL_INIT_FIELD_SIZE | INCOLL_INIT_FIELD_JOB;
    p.rank = oob->rank;
    p.size = oob->size;
    p.job = job;
    status = init_plain(&p, &ctx);
    /* No rank returns before every rank's endpoint is up, and all return
     * the same: a rank that failed fails them all. */
    st = status;
    if (oob->allgather(oob->coll_info, &st, sts, sizeof(st)) != 0) {
        incoll_error("init: the out-of-band allgather failed");
        status = INCOLL_ERR_IO;
    } else {
        for (int r = 0; r < oob->size && status == INCOLL_OK; r++)
            if (sts[r] != INCOLL_OK) {
                incoll_error("init: rank %d could not start (%s)", r,
                             incoll_status_string(sts[r]));
                status = sts[r];
            }
    }
    if (status != INCOLL_OK && ctx != NULL) {
        incoll_finalize(ctx);
        ctx = NULL;
    }
    if (ctx != NULL) {
        ctx->oob = *oob;
        *ctx_p = ctx;
    }
out:
    free(all);
    free(sts);
    return status;
}

/* Where this rank's socket binds, and the fabric: with a manager
 * (*mgr_p, its host:port) the fabric comes from it and fabric.conf is not
 * read; without one (*mgr_p NULL), fabric.conf describes the fabric and
 * its world group. On failure the caller frees ctx->conf and the
 * rendezvous' state. */
static incoll_status_t init_fabric(incoll_ctx_h ctx,
                                   const incoll_init_params_t *params,
                                   const char **mgr_p, uint32_t *ip_p,
                                   uint16_t *port_p)
{
    const char *mgr = ctx->mgr, *dir = ctx->fabric_dir;
    char path[PATH_MAX + 16], err[PATH_MAX + 512];
    incoll_status_t status = INCOLL_OK;

    *mgr_p = mgr;
    if (mgr != NULL && *mgr != '\0') {
        *ip_p = host_mgr_local_ip(mgr);
        *port_p = 0;
    } else {
        *mgr_p = NULL;
        if (dir == NULL || *dir == '\0') {
            incoll_error("init: neither INCOLL_MGR (host:port of the manager) "
                         "nor INCOLL_FABRIC (a directory made by `incoll "
                         "fabric up`) is set");
            return INCOLL_ERR_CONFIG;
        }
        snprintf(path, sizeof(path), "%s/fabric.conf", dir);
        status = fabric_conf_load(path, &ctx->conf, err, sizeof(err));
        if (status != INCOLL_OK) {
            incoll_error("init: %s", err);
            return status;
        }
        /* More ranks than hosts: they share them (src/host/rdv.c); the
         * first rank of each host binds its port, the others any port on
         * its address. */
        if (ctx->conf.nhosts != ctx->size) {
            const char *map;
            status = ident_text(params, INCOLL_INIT_FIELD_HOST_MAP,
                                params ? params->host_map : NULL,
                                SETTING_HOST_MAP, ctx->cfg.host_map, &map);
            if (status == INCOLL_OK)
                status = host_rdv_map(ctx, map);
            if (status != INCOLL_OK)
                return status;
        }
        *ip_p =
            ctx->conf.hosts[ctx->host_map ? ctx->fabric_host : ctx->rank].ip;
        *port_p =
            ctx->host_map && !host_rdv_is_leader(ctx)
                ? 0
                : ctx->conf.hosts[ctx->host_map ? ctx->fabric_host : ctx->rank]
                      .port;
    }
    return status;
}

/* What the progress loop hands up: the packets of the host-based
 * algorithms (fallback.c) and of the rendezvous (rdv.c), the multicast
 * socket (mcast.c), the manager link (comm.c); what the requests'
 * executor runs (service.c); what the communicators call above them
 * (host-based engine, usage counters, hierarchy, streaming lock) and what
 * the algorithms below the hierarchy call of it. */
static void init_handlers(incoll_ctx_h ctx)
{
    static const host_ctx_io_t io = {
        .mc_fd = host_mcast_fd,
        .mc_recv = host_mcast_recv,
        .mgr_pollfd = host_ctx_mgr_pollfd,
        .mgr_on_readable = host_ctx_mgr_on_readable,
    };
    static const host_up_t up = {
        .allreduce = host_allreduce_own,
        .p2p = host_comm_p2p,
        .allreduce_sched = host_allreduce_sched,
        .p2p_free = host_comm_p2p_free,
        .engine_gone = host_counters_engine_gone,
        .usage_flush = host_usage_flush,
        .usage_free = host_usage_free,
        .hier_on = host_hier_on,
        .hier_refuse = host_hier_refuse,
        .hier_free = host_hier_free,
        .hier_active = host_hier_active,
        .hier_allreduce = host_hier_allreduce,
        .hier_decided = host_hier_decided,
        .hier_leaders = host_hier_leaders,
        .stream_report = host_stream_report,
        .stream_end = host_stream_end,
    };
    ctx->io = io;
    host_ctx_on_packet(ctx, WIRE_P2P_DATA, host_p2p_dispatch);
    host_ctx_on_packet(ctx, WIRE_P2P_ACK, host_p2p_dispatch);
    host_ctx_on_packet(ctx, WIRE_RDV_HELLO, host_rdv_dispatch);
    host_ctx_on_packet(ctx, WIRE_RDV_TABLE, host_rdv_dispatch);
    host_req_set_ops(ctx, &host_service_req_ops);
    ctx->up = up;
}

/* The parameters every engine of ctx starts from (the configuration's
 * timers, windows and copy thresholds, and ctx's send functions). */
static void init_engine_defaults(incoll_ctx_h ctx)
{
    host_engine_params_t *p = &ctx->eng_defaults;

    memset(p, 0, sizeof(*p));
    host_engine_params_default(p);
    p->rto_init_ns = ctx->cfg.rto_init_ns;
    p->rto_min_ns = ctx->cfg.rto_min_ns;
    p->rto_max_ns = ctx->cfg.rto_max_ns;
    p->max_retries = ctx->cfg.retries;
    p->progress_timeout_ns = ctx->cfg.timeout_ns;
    p->wait_ns = ctx->cfg.wait_ns;
    ctx->deadline_ns = ctx->cfg.deadline_ns;
    p->window = ctx->cfg.window;
    p->pace = ctx->cfg.pace;
    p->window_min = ctx->cfg.window_min;
    p->copy_bytes = ctx->cfg.copy_bytes;
    p->copy_adapt_bytes = ctx->cfg.copy_adapt;
    p->hedge_pct = ctx->cfg.hedge_pct;
    p->ask_bytes = ctx->cfg.ask_bytes;
    p->ahead_bytes = ctx->cfg.bcast_ahead;
    ctx->stream.threshold = ctx->cfg.stream_threshold;
    /* Every engine can stream: by the threshold, or under a lock the
     * caller takes (incoll_comm_lock); small operations keep the slots. */
    p->stream_window = ctx->cfg.stream_window;
    p->stream_large_only = 1;
    p->send = ctx_send;
    p->send_ref = ctx_send_ref;
    p->flush = ctx_flush;
    p->send_arg = ctx;
}

static incoll_status_t init_plain(const incoll_init_params_t *params,
                                  incoll_ctx_h *ctx_p)
{
    incoll_ctx_h ctx;
    incoll_status_t status;
    const char *mgr;
    char err[PATH_MAX + 512], who[32];
    uint32_t ip;
    uint16_t port;

    if (ctx_p == NULL)
        return INCOLL_ERR_INVALID_ARG;
    log_init_from_env();
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return INCOLL_ERR_NO_MEMORY;
    init_handlers(ctx);
    /* Every setting read once, here; a bad value fails, naming it. */
    status = host_cfg_fill(&ctx->cfg, err, sizeof(err));
    if (status != INCOLL_OK) {
        incoll_error("init: %s", err);
        goto err_free;
    }
    status = ident_load(ctx, params);
    if (status != INCOLL_OK)
        goto err_free;
    snprintf(who, sizeof(who), "rank %d", ctx->rank);
    log_set_name(who);
    status = init_fabric(ctx, params, &mgr, &ip, &port);
    if (status != INCOLL_OK)
        goto err_conf;
    status = load_secret(ctx, mgr != NULL);
    if (status != INCOLL_OK)
        goto err_conf;
    ctx->gen0 = host_job_generation(ctx->cfg.gen, ctx->job);
    ctx->gen = ctx->gen0;
    ctx->job_key = ctx->gen0;
    init_engine_defaults(ctx);
    status = host_stream_lock_parse(ctx->cfg.stream_lock, &ctx->stream.nops);
    if (status != INCOLL_OK)
        goto err_conf;
    ctx->sock = udp_open(ip, port, (int)ctx->cfg.udp_buf, who);
    if (ctx->sock == NULL) {
        status = INCOLL_ERR_IO;
        goto err_conf;
    }
    incoll_debug("init: data path: mac %s (%s), %s",
                 wire_mac_alg_name(wire_mac_alg_default()),
                 wire_mac_alg_impl(wire_mac_alg_default()),
                 udp_path(ctx->sock));
    if (wire_mac_alg_default() == WIRE_MAC_NONE && ctx->rank == 0)
        incoll_warn("init: INCOLL_MAC=none: data packets are neither "
                    "authenticated nor checked");
    status = host_sync_create(ctx);
    if (status != INCOLL_OK)
        goto err_comms;
    status = mgr             ? host_ctx_mgr_init(ctx)
             : ctx->host_map ? world_create_shared(ctx)
                             : world_create(ctx);
    if (status == INCOLL_OK && !ctx->host_map) {
        /* (the shared world's is made before its node level) The
         * selection table first: the key's exchange compares it too. */
        status = host_tune_load(ctx);
        host_lock(ctx);
        if (status == INCOLL_OK)
            status = host_job_key(ctx);
        host_unlock(ctx);
    }
    /* The selection table, the same on every rank (src/host/select.c). */
    if (status == INCOLL_OK)
        status = host_tune_agree(ctx);
    if (status != INCOLL_OK)
        goto err_comms;
    *ctx_p = ctx;
    return INCOLL_OK;

err_comms:
    host_ctx_info_free(ctx);
    while (ctx->comms) {
        incoll_comm_h c = ctx->comms;
        ctx->comms = c->next;
        host_comm_free(c);
    }
    host_sync_destroy(ctx);
    host_mcast_close(ctx);
    udp_close(ctx->sock);
err_conf:
    host_rdv_free(ctx);
    fabric_conf_free(&ctx->conf);
err_free:
    free(ctx->hosts);
    host_cfg_free(&ctx->cfg);
    free(ctx);
    return status;
}

INCOLL_API incoll_status_t incoll_finalize(incoll_ctx_h ctx)
{
    if (ctx == NULL)
        return INCOLL_ERR_INVALID_ARG;
    /* Outstanding requests complete first, then their threads stop. */
    host_req_ctx_fini(ctx);
    /* Bootstrapped out of band: no rank closes its socket while another
     * may still need its retransmissions. */
    if (ctx->oob.barrier != NULL) {
        if (ctx->oob.barrier(ctx->oob.coll_info) != 0)
            incoll_warn("finalize: the out-of-band barrier failed");
    } else if (ctx->oob.allgather != NULL) {
        char b = 0, *all = malloc((size_t)ctx->oob.size);
        if (all == NULL ||
            ctx->oob.allgather(ctx->oob.coll_info, &b, all, 1) != 0)
            incoll_warn("finalize: the out-of-band allgather failed");
        free(all);
    }
    /* The calling thread's buffer of emulated collectives (the request
     * threads' went with them). */
    host_coll_emu_release();
    /* A background unlock ends first (the group is still there), then
     * the manager releases what we still hold on our goodbye. */
    for (incoll_comm_h c = ctx->comms; c; c = c->next)
        (void)host_comm_settle(c);
    host_usage_flush(ctx, NULL);
    host_ctx_info_free(ctx);
    if (ctx->mc_sock)
        incoll_debug("multicast: mcast_foreign=%" PRIu64, ctx->mc_foreign);
    while (ctx->comms) {
        incoll_comm_h c = ctx->comms;
        if (c->eng) {
            const host_engine_counters_t *k = host_engine_counters(c->eng);
            incoll_debug(
                "group %u: ops=%" PRIu64 " segments=%" PRIu64
                " packets_sent=%" PRIu64 " retransmits=%" PRIu64
                " fast_retransmits=%" PRIu64 " probes=%" PRIu64
                " queries=%" PRIu64 " asked=%" PRIu64 " spurious=%" PRIu64
                " copies=%" PRIu64 " hedges=%" PRIu64 " copy_on=%" PRIu64
                " copy_off=%" PRIu64 " duplicate_results=%" PRIu64
                " bad_mac=%" PRIu64 " timeouts=%" PRIu64
                " mcast_results=%" PRIu64 " mcast_duplicates=%" PRIu64
                " mcast_repaired=%" PRIu64,
                c->group, k->ops, k->segments, k->packets_sent, k->retransmits,
                k->fast_retransmits, k->probes, k->queries, k->asked,
                k->spurious, k->copies, k->hedges, k->copy_on, k->copy_off,
                k->duplicate_results, k->bad_mac, k->timeouts, k->mcast_results,
                k->mcast_duplicates, k->mcast_repaired);
        }
        ctx->comms = c->next;
        host_comm_free(c);
    }
    udp_flush(ctx->sock);
    {
        const udp_counters_t *u = udp_counters(ctx->sock);
        incoll_debug("udp: %s rx_packets=%" PRIu64 " rx_reads=%" PRIu64
                     " tx_packets=%" PRIu64 " tx_writes=%" PRIu64
                     " tx_errors=%" PRIu64 " gso_refused=%" PRIu64,
                     udp_path(ctx->sock), u->rx_packets, u->rx_reads,
                     u->tx_packets, u->tx_writes, u->tx_errors, u->gso_refused);
    }
    host_mcast_close(ctx);
    udp_close(ctx->sock);
    host_rdv_free(ctx);
    fabric_conf_free(&ctx->conf);
    host_sync_destroy(ctx);
    free(ctx->hosts);
    host_cfg_free(&ctx->cfg);
    free(ctx);
    return INCOLL_OK;
}

INCOLL_API incoll_status_t incoll_comm_world(incoll_ctx_h ctx,
                                             incoll_comm_h *comm_p)
{
    if (ctx == NULL || comm_p == NULL)
        return INCOLL_ERR_INVALID_ARG;
    *comm_p = ctx->world;
    return INCOLL_OK;
}

INCOLL_API incoll_status_t incoll_comm_rank(incoll_comm_h comm, int *rank_p)
{
    if (comm == NULL || rank_p == NULL)
        return INCOLL_ERR_INVALID_ARG;
    *rank_p = comm->rank;
    return INCOLL_OK;
}

INCOLL_API incoll_status_t incoll_comm_size(incoll_comm_h comm, int *size_p)
{
    if (comm == NULL || size_p == NULL)
        return INCOLL_ERR_INVALID_ARG;
    *size_p = comm->size;
    return INCOLL_OK;
}
