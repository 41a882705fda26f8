/*
 * libincoll_mpi's start: the knobs (INCOLL_MPI_*, rank 0's for every
 * rank), the bootstrap from MPI at MPI_Init (rank, size, the node's
 * ranks, the fabric or its manager, libincoll's context with MPI's
 * thread level) and the layer's lock under MPI_THREAD_MULTIPLE, which
 * libincoll gives up whenever it blocks (its outer lock).
 */
#include "mpi/mpi_state.h"

#include "incoll.h"

#include "mpi/mpi_fit.h"

#include <inttypes.h>
#include <pthread.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Knobs                                                               */

static int32_t parse_colls(const char *text)
{
    uint32_t mask = 0;
    char bad[256];

    if (mpi_cs_colls_parse(text, &mask, bad, sizeof(bad)) != 0)
        incoll_warn("mpi: INCOLL_MPI_COLLS: unknown collective '%s' "
                    "(known: allreduce, reduce, bcast, barrier, "
                    "allgather, gather, scatter, reduce_scatter_block, "
                    "reduce_scatter, all, none)",
                    bad);
    return (int32_t)mask;
}

/* follow: rank 0's knobs and table will replace these (a rank other
 * than 0 at MPI_Init): a table this rank cannot read is then only
 * noted (rank 0's own says what happens). */
static void cfg_read(mpi_cfg_t *cfg, int follow)
{
    char err[512];

    memset(cfg, 0, sizeof(*cfg));
    /* The one rule for a bad setting: an error naming it, and here MPI's
     * own collectives run (the application still works). */
    if (incoll_settings_check("mpi", err, sizeof(err)) != INCOLL_OK) {
        incoll_error("mpi: %s: offload off", err);
        return;
    }
    cfg->enable = (int32_t)mpi_setting_num("INCOLL_MPI_ENABLE");
    cfg->colls = parse_colls(mpi_setting_text("INCOLL_MPI_COLLS"));
    if (mpi_setting_str("INCOLL_JOB") &&
        strlen(mpi_setting_str("INCOLL_JOB")) < sizeof(cfg->job_name))
        snprintf(cfg->job_name, sizeof(cfg->job_name), "%s",
                 mpi_setting_str("INCOLL_JOB"));
    cfg->min_ranks = (int32_t)mpi_setting_num("INCOLL_MPI_MIN_RANKS");
    cfg->max_bytes = (uint64_t)mpi_setting_num("INCOLL_MPI_MAX_BYTES");
    cfg->verbose = (int32_t)mpi_setting_num("INCOLL_MPI_VERBOSE");
    cfg->stats = (int32_t)mpi_setting_num("INCOLL_MPI_STATS");
    cfg->eager = (int32_t)mpi_setting_num("INCOLL_MPI_EAGER");
    cfg->agree = (int32_t)mpi_setting_num("INCOLL_MPI_AGREE");
    cfg->tune_debug = (int32_t)mpi_setting_num("INCOLL_MPI_TUNE_DEBUG");
    /* The table is libincoll's (loaded and agreed in incoll_init); read
     * here only so that rank 0's error turns the layer off everywhere. */
    if (incoll_table_check(err, sizeof(err)) != INCOLL_OK) {
        if (follow) {
            incoll_warn("mpi: selection table: %s: rank 0's settings decide",
                        err);
        } else {
            incoll_error("mpi: selection table: %s: offload off", err);
            cfg->enable = 0;
        }
    }
}

/* ------------------------------------------------------------------ */
/* Bootstrap                                                           */

/* How to get offload when the world is not offloaded: set with L.why_off
 * where a better hint than the generic one is known. */
static char off_fix[384];

/*
 * Says once, at warn level (rank 0 calls it), that a fabric is configured
 * but MPI_COMM_WORLD is not offloaded, so MPI's own collectives run: the
 * reason and how to fix it. A fix-less call gives the generic hint.
 */
void mpi_warn_world_off(const char *why)
{
    static int warned;
    const char *hosts = mpi_setting_str("INCOLL_HOSTS");
    const char *host = mpi_setting_str("INCOLL_HOST");
    const char *mgr = mpi_setting_str("INCOLL_MGR");

    if (warned)
        return;
    warned = 1;
    if (off_fix[0] == '\0' && mgr && *mgr && (!hosts || !*hosts) &&
        (!host || !*host))
        snprintf(off_fix, sizeof(off_fix),
                 "each rank must name its host of the manager's topology: "
                 "`. DIR/fabric.env` (it sets INCOLL_HOSTS) and pass "
                 "-x INCOLL_HOSTS to mpirun, or use `incoll mpirun`");
    incoll_warn("mpi: a fabric is configured but MPI_COMM_WORLD is not "
                "offloaded, MPI's own collectives run: %s; to fix: %s",
                why,
                off_fix[0] ? off_fix
                           : "see docs/mpi.md (INCOLL_MPI_VERBOSE=1 and "
                             "INCOLL_LOG_LEVEL=info say more)");
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/*
 * At MPI_Init (collective over MPI_COMM_WORLD): where each rank is, for a
 * fabric without a manager whose fabric.conf has fewer hosts than
 * MPI_COMM_WORLD has ranks. node_id is the lowest world rank of this
 * rank's node (MPI_COMM_TYPE_SHARED). On an emulated fabric a rank is on
 * the host whose network namespace it runs in; otherwise each node is one
 * fabric.conf host, in the order of their lowest ranks, or, when all ranks
 * share one machine (a loopback fabric), libincoll's default (rank r on
 * host r * hosts / ranks). Sets L.host_map, or L.map_why.
 */
static void world_host_map(int node_id)
{
    const char *fab = mpi_setting_str("INCOLL_FABRIC");
    const char *mgr = mpi_setting_str("INCOLL_MGR");
    char err[256];
    int mine[2] = {node_id, -1}, *all, *nodes, n = L.size, nnodes = 0;
    int use = 0, emulated = 1;
    int nhosts = 0;

    if (fab && *fab && (mgr == NULL || *mgr == '\0'))
        use = incoll_fabric_hosts(fab, &nhosts, &mine[1], err, sizeof(err)) ==
              INCOLL_OK;
    all = malloc((size_t)n * 2 * sizeof(int));
    nodes = malloc((size_t)n * sizeof(int));
    if (all == NULL || nodes == NULL) {
        /* The others are in the exchange already: nothing else is safe. */
        incoll_error("mpi: out of memory at MPI_Init");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    PMPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    if (!use || nhosts >= n)
        goto out;
    for (int r = 0; r < n; r++) {
        emulated &= all[2 * r + 1] >= 0;
        nodes[r] = all[2 * r];
    }
    qsort(nodes, (size_t)n, sizeof(int), cmp_int);
    for (int r = 0; r < n; r++)
        if (r == 0 || nodes[r] != nodes[r - 1])
            nodes[nnodes++] = nodes[r];
    if (!emulated && nnodes == 1)
        goto out; /* one machine: libincoll's blocks */
    if (!emulated && nnodes != nhosts) {
        snprintf(L.map_why, sizeof(L.map_why),
                 "MPI_COMM_WORLD spans %d nodes but the fabric in %.100s has "
                 "%d hosts and no manager: each node must be one fabric.conf "
                 "host (or every rank on one machine)",
                 nnodes, fab, nhosts);
        goto out;
    }
    L.host_map = malloc((size_t)n * 12 + 1);
    if (L.host_map == NULL) {
        snprintf(L.map_why, sizeof(L.map_why), "out of memory at MPI_Init");
        goto out;
    }
    {
        size_t off = 0, len = (size_t)n * 12 + 1;
        for (int r = 0; r < n; r++) {
            int h = all[2 * r + 1];
            if (!emulated)
                for (h = 0; nodes[h] != all[2 * r]; h++)
                    ;
            off += (size_t)snprintf(L.host_map + off, len - off, "%s%d",
                                    r ? "," : "", h);
        }
    }
out:
    free(all);
    free(nodes);
}

/* MPI_Pack gives a side's bytes as they are (mpi_dtype_init). */
static int pack_ok;
static int layer_locking; /* the layer's lock is in use (threads) */

/* Brings libincoll up on this rank, or says in L.why_off why not. */
static void incoll_up(int local_rank, int local_size)
{
    const char *fab = mpi_setting_str("INCOLL_FABRIC");
    const char *mgr = mpi_setting_str("INCOLL_MGR");
    incoll_init_params_t params;
    mpi_cs_proc_t proc;

    /* libincoll takes what the layer knows from us, not from the
     * environment (the application's, which the layer does not touch). */
    memset(&params, 0, sizeof(params));

    if (!L.cfg.enable) {
        snprintf(L.why_off, sizeof(L.why_off), "INCOLL_MPI_ENABLE=0");
        return;
    }
    if (!pack_ok) {
        /* Every rank runs the same library: all find this alike. */
        snprintf(L.why_off, sizeof(L.why_off),
                 "this MPI's MPI_Pack does not give a datatype's bytes as "
                 "they are, which the layer needs to stage buffers");
        return;
    }
    if ((fab == NULL || *fab == '\0') && (mgr == NULL || *mgr == '\0')) {
        snprintf(L.why_off, sizeof(L.why_off),
                 "no fabric configured (INCOLL_FABRIC and INCOLL_MGR are "
                 "unset): MPI collectives run unchanged");
        return;
    }
    /* With a manager, libincoll takes the world group from it (ctx.c:
     * INCOLL_MGR before INCOLL_FABRIC), for any number of ranks: the
     * host count of fabric.conf does not matter then. */
    if (fab && *fab && (mgr == NULL || *mgr == '\0')) {
        static mpi_fit_adopted_t adopted;
        char note[512];
        if (mpi_fit_fabric(fab, L.size, mpi_setting_str("INCOLL_HOSTS"),
                           L.host_map, L.map_why, &params, &adopted, L.why_off,
                           sizeof(L.why_off), off_fix, sizeof(off_fix), note,
                           sizeof(note)) != 0)
            return;
        if (L.rank == 0 && note[0])
            incoll_info("mpi: %s", note);
    }
    proc.rank = L.rank;
    proc.size = L.size;
    proc.local_rank = local_rank;
    proc.local_size = local_size;
    proc.job_given = 0;
    proc.job_name = L.cfg.job_name;
    proc.job_id = L.cfg.job;
    proc.agree = L.cfg.agree;
    proc.thread_mode = L.thread_mode;
    /* Under MPI_THREAD_MULTIPLE libincoll gives the layer's lock up
     * whenever it blocks (mpi_layer_threads_init). */
    if (L.thread_multiple)
        mpi_layer_threads_init(&params);
    if (mpi_cs_up(&proc, &params, L.why_off, sizeof(L.why_off), &L.ctx,
                  &L.world) != 0) {
        L.ctx = NULL;
        L.world = NULL;
        return;
    }
    if (L.thread_multiple)
        layer_locking = 1;
    L.active = 1;
}

/* ---- threads ---- */

/* Under MPI_THREAD_MULTIPLE: one recursive lock around the layer's calls
 * (mpi_layer_enter), given up by libincoll while it blocks (hooks). */
static pthread_mutex_t layer_mu;
static _Thread_local int layer_depth;   /* this thread's holds */
static _Thread_local int layer_dropped; /* given up while libincoll waits */

static void layer_release(void *arg)
{
    (void)arg;
    layer_dropped = layer_depth;
    for (int i = 0; i < layer_dropped; i++)
        pthread_mutex_unlock(&layer_mu);
}

static void layer_reacquire(void *arg)
{
    (void)arg;
    for (int i = 0; i < layer_dropped; i++)
        pthread_mutex_lock(&layer_mu);
    layer_dropped = 0;
}

void mpi_layer_threads_init(incoll_init_params_t *params)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&layer_mu, &a);
    pthread_mutexattr_destroy(&a);
    params->field_mask |= INCOLL_INIT_FIELD_OUTER_LOCK;
    params->outer_lock.release = layer_release;
    params->outer_lock.reacquire = layer_reacquire;
    params->outer_lock.arg = NULL;
}

void mpi_layer_enter(void)
{
    if (!layer_locking)
        return;
    pthread_mutex_lock(&layer_mu);
    layer_depth++;
}

int mpi_layer_leave(int done)
{
    if (layer_locking && layer_depth > 0) {
        layer_depth--;
        pthread_mutex_unlock(&layer_mu);
    }
    return done;
}

/* 1 if the environment names a fabric (INCOLL_FABRIC or INCOLL_MGR). */
static int fabric_set(void)
{
    return mpi_setting_str("INCOLL_FABRIC") != NULL ||
           mpi_setting_str("INCOLL_MGR") != NULL;
}

void mpi_layer_bootstrap(int from_init)
{
    int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
    int local_rank = 0, local_size = 0;
    char who[32];

    if (L.booted)
        return;
    if (PMPI_Initialized(&initialized) != MPI_SUCCESS || !initialized ||
        PMPI_Finalized(&finalized) != MPI_SUCCESS || finalized)
        return;
    L.booted = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &L.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &L.size);
    snprintf(who, sizeof(who), "rank %d", L.rank);
    incoll_log_set_name(who);
    PMPI_Query_thread(&provided);
    L.thread_multiple = provided == MPI_THREAD_MULTIPLE;
    L.thread_mode = provided == MPI_THREAD_MULTIPLE ? INCOLL_THREAD_MULTIPLE
                    : provided == MPI_THREAD_SERIALIZED
                        ? INCOLL_THREAD_SERIALIZED
                    : provided == MPI_THREAD_FUNNELED ? INCOLL_THREAD_FUNNELED
                                                      : INCOLL_THREAD_SINGLE;
    cfg_read(&L.cfg, from_init && L.rank != 0);
    if (from_init) {
        /* Rank 0's job id and knobs rule, so every rank decides alike. */
        mpi_cfg_t cfg = L.cfg;
        if (L.rank == 0)
            cfg.job = mpi_cs_job_random();
        PMPI_Bcast(&cfg, (int)sizeof(cfg), MPI_BYTE, 0, MPI_COMM_WORLD);
        L.cfg = cfg;
        if (L.cfg.enable) {
            /* Placement of ranks on nodes, for libincoll's node level. */
            MPI_Comm node = MPI_COMM_NULL;
            int node_id = L.rank;
            if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED,
                                     L.rank, MPI_INFO_NULL,
                                     &node) == MPI_SUCCESS &&
                node != MPI_COMM_NULL) {
                PMPI_Comm_rank(node, &local_rank);
                PMPI_Comm_size(node, &local_size);
                PMPI_Allreduce(&L.rank, &node_id, 1, MPI_INT, MPI_MIN, node);
                PMPI_Comm_free(&node);
            }
            world_host_map(node_id);
        }
    } else {
        L.cfg.job = mpi_cs_job_from_env();
    }
    pack_ok = mpi_dtype_init();
    mpi_errcodes_init();
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, mpi_comm_delete_cb,
                            &L.keyval, NULL);
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, mpi_self_delete_cb,
                                &L.self_keyval, NULL) == MPI_SUCCESS)
        PMPI_Comm_set_attr(MPI_COMM_SELF, L.self_keyval, NULL);
    atexit(mpi_atexit_cb);

    incoll_up(local_rank, local_size);
    if (L.rank == 0) {
        if (L.active)
            verbose("mpi: offload on: fabric %s, %d ranks, job 0x%016" PRIx64
                    "%s",
                    mpi_setting_str("INCOLL_FABRIC")
                        ? mpi_setting_str("INCOLL_FABRIC")
                        : mpi_setting_str("INCOLL_MGR"),
                    L.size, L.cfg.job, from_init ? "" : " (late start)");
        else if (fabric_set() && L.cfg.enable)
            mpi_warn_world_off(L.why_off);
        else if (L.cfg.verbose)
            incoll_log(INCOLL_LOG_INFO, "mpi: offload off: %s", L.why_off);
        else
            incoll_info("mpi: offload off: %s", L.why_off);
    }
    if (L.active && L.cfg.eager && from_init)
        mpi_layer_comm_created(MPI_COMM_WORLD, "world");
}

incoll_ctx_h mpi_layer_incoll(incoll_comm_h *world_p, const char **why_p)
{
    if (!L.booted || L.finalized || !L.active) {
        if (why_p)
            *why_p = !L.booted     ? "MPI is not initialized"
                     : L.finalized ? "MPI is finalized"
                                   : L.why_off;
        return NULL;
    }
    if (world_p)
        *world_p = L.world;
    return L.ctx;
}
