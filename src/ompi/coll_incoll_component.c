/*
 * coll/incoll, the component: its MCA parameters, the checks that keep it
 * out of a process it cannot serve (another Open MPI than the one it was
 * built against, the PMPI layer preloaded, no fabric), libincoll's context
 * (brought up at MPI_COMM_WORLD's enable), the per-communicator query and
 * the statistics printed at MPI_Finalize.
 */
#include "ompi/coll_incoll.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_commstate.h"
#include "mpi/mpi_fit.h"
#include "mpi/mpi_log.h"
#include "ompi/mca/coll/base/base.h"
#include "opal/mca/base/mca_base_var.h"

_Static_assert(CI_COUNT == MPI_CS_COLLS, "the front ends' collectives");

static char default_colls[] =
    "allreduce,reduce,bcast,barrier,allgather,gather,scatter,"
    "reduce_scatter_block,reduce_scatter";
static char empty[] = "";

const char *ci_coll_name(ci_coll_t coll)
{
    return mpi_cs_coll_names[coll];
}

static int my_rank = -1;

void ci_log(int level, const char *fmt, ...)
{
    va_list ap;
    char buf[1024];

    if (level > 0 && mca_coll_incoll_component.verbose < level)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (my_rank >= 0)
        fprintf(stderr, "coll/incoll: rank %d: %s\n", my_rank, buf);
    else
        fprintf(stderr, "coll/incoll: %s\n", buf);
}

void ci_count(ci_coll_t coll, ci_where_t where)
{
    __atomic_fetch_add(&mca_coll_incoll_component.counts[coll][where], 1,
                       __ATOMIC_RELAXED);
}

static int incoll_register(void)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;
    const mca_base_component_t *c = &cm->super.collm_version;

    cm->enable = true;
    (void)mca_base_component_var_register(
        c, "enable",
        "Run MPI collectives on the incoll fabric (1) or never (0); the "
        "component still stands aside when no fabric is configured",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_3,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->enable);
    cm->priority = 90;
    (void)mca_base_component_var_register(
        c, "priority",
        "Priority of coll/incoll (above tuned's 30 and han's, so that it is "
        "chosen where it can run)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_6,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->priority);
    cm->verbose = 0;
    (void)mca_base_component_var_register(
        c, "verbose",
        "0: warnings only; 1: where each communicator runs; 2: every "
        "fallback",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->verbose);
    cm->fabric = empty;
    (void)mca_base_component_var_register(
        c, "fabric",
        "Fabric directory (holding fabric.conf, written by `incoll fabric "
        "up`); empty: INCOLL_FABRIC",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_3,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->fabric);
    cm->mgr = empty;
    (void)mca_base_component_var_register(
        c, "mgr",
        "host:port of the incoll manager; empty: INCOLL_MGR (a manager comes "
        "before a fabric.conf)",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_3,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->mgr);
    cm->secret_file = empty;
    (void)mca_base_component_var_register(
        c, "secret_file",
        "File holding the fabric's secret; empty: INCOLL_SECRET_FILE",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_3,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->secret_file);
    cm->colls = default_colls;
    (void)mca_base_component_var_register(
        c, "colls",
        "The collectives coll/incoll takes (blocking, nonblocking and "
        "persistent forms), comma-separated, or all: allreduce, reduce, "
        "bcast, barrier, allgather, gather, scatter, reduce_scatter_block, "
        "reduce_scatter; the others go to the component below",
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_4,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->colls);
    cm->max_bytes = 0;
    (void)mca_base_component_var_register(
        c, "max_bytes",
        "Largest call (bytes per rank) coll/incoll takes; larger ones go to "
        "the component below; 0: no limit",
        MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL, 0, 0, OPAL_INFO_LVL_4,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->max_bytes);
    cm->min_ranks = 2;
    (void)mca_base_component_var_register(
        c, "min_ranks", "Smallest communicator coll/incoll takes",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_4,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->min_ranks);
    cm->stats = false;
    (void)mca_base_component_var_register(
        c, "stats",
        "Print each rank's counts at MPI_Finalize: per collective, calls "
        "run in the network, on libincoll's hosts, and by the component "
        "below",
        MCA_BASE_VAR_TYPE_BOOL, NULL, 0, 0, OPAL_INFO_LVL_4,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->stats);
    cm->agree = -1;
    (void)mca_base_component_var_register(
        c, "agree",
        "After each blocking call the ranks agree whether the fabric "
        "delivered everywhere, and redo a failed call, and run the "
        "communicator's collectives from then on, on the component below "
        "(nonblocking and persistent calls go below): 1 always, 0 never, "
        "-1 as INCOLL_MPI_AGREE says (default 0, as the PMPI layer; worth "
        "1 without a manager, where libincoll cannot recover from a failed "
        "AN by itself)",
        MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, OPAL_INFO_LVL_4,
        MCA_BASE_VAR_SCOPE_READONLY, &cm->agree);
    return OMPI_SUCCESS;
}

static void stats_print(void)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;
    char line[2048];
    size_t off = 0;

    for (int c = 0; c < CI_COUNT && off < sizeof(line); c++) {
        long *n = cm->counts[c];
        if (n[CI_NET] + n[CI_HOST] + n[CI_FALLBACK] + n[CI_FAILED] +
                n[CI_TUNED] ==
            0)
            continue;
        off += (size_t)snprintf(
            line + off, sizeof(line) - off,
            "%s %s net=%ld host=%ld fallback=%ld failed=%ld tuned=%ld",
            off ? ";" : "", mpi_cs_coll_names[c], n[CI_NET], n[CI_HOST],
            n[CI_FALLBACK], n[CI_FAILED], n[CI_TUNED]);
    }
    fprintf(stderr, "coll/incoll: stats rank %d:%s\n", my_rank,
            off ? line : " no collective");
}

static int incoll_close(void)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;

    ci_module_progress_off();
    if (cm->stats && my_rank >= 0)
        stats_print();
    if (cm->ctx) {
        incoll_finalize(cm->ctx);
        cm->ctx = NULL;
        cm->world = NULL;
    }
    return OMPI_SUCCESS;
}

/* The major.minor of the running Open MPI ("Open MPI v4.1.4, ..."); the
 * test hook COLL_INCOLL_TEST_OMPI_VERSION stands for another library. */
static int running_version(int *major_p, int *minor_p, char *text, size_t len)
{
    char buf[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    const char *v = getenv("COLL_INCOLL_TEST_OMPI_VERSION");

    if (v == NULL) {
        if (PMPI_Get_library_version(buf, &n) != MPI_SUCCESS)
            return -1;
        v = buf;
    }
    snprintf(text, len, "%.*s", (int)strcspn(v, ",\n"), v);
    if (sscanf(v, "Open MPI v%d.%d", major_p, minor_p) != 2)
        return -1;
    return 0;
}

/* The PMPI layer (libincoll_mpi) interposes MPI_Allreduce: when it is
 * preloaded it runs the collectives, and the component stands aside. */
static int layer_preloaded(char *path, size_t len)
{
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "MPI_Allreduce");

    if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL)
        return 0;
    if (strstr(info.dli_fname, "libincoll_mpi") == NULL)
        return 0;
    snprintf(path, len, "%s", info.dli_fname);
    return 1;
}

/* 1 when an MCA parameter or libincoll's settings name a fabric or a
 * manager. */
static int fabric_configured(const mca_coll_incoll_component_t *cm)
{
    return cm->fabric[0] || cm->mgr[0] ||
           incoll_setting_given("INCOLL_FABRIC") == 1 ||
           incoll_setting_given("INCOLL_MGR") == 1;
}

static int incoll_init_query(bool enable_progress_threads,
                             bool enable_mpi_threads)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;
    int major = 0, minor = 0;
    char text[256], path[512], bad[128];
    uint32_t mask;

    (void)enable_progress_threads;
    cm->mpi_threads = enable_mpi_threads;
    cm->off_why[0] = '\0';
    if (!cm->enable) {
        snprintf(cm->off_why, sizeof(cm->off_why), "coll_incoll_enable=0");
        return OMPI_SUCCESS;
    }
    if (running_version(&major, &minor, text, sizeof(text)) != 0 ||
        major != OMPI_MAJOR_VERSION || minor != OMPI_MINOR_VERSION) {
        snprintf(cm->off_why, sizeof(cm->off_why),
                 "built against Open MPI %d.%d but running under '%.100s': "
                 "coll/incoll stands aside (rebuild incoll against this Open "
                 "MPI, or preload the PMPI layer libincoll_mpi.so instead, "
                 "docs/ompi.md)",
                 OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, text);
        /* once per job: the launcher numbers the processes */
        if (getenv("OMPI_COMM_WORLD_RANK") == NULL ||
            strcmp(getenv("OMPI_COMM_WORLD_RANK"), "0") == 0)
            ci_log(0, "%s", cm->off_why);
        cm->warned = 1;
        return OMPI_SUCCESS;
    }
    if (layer_preloaded(path, sizeof(path))) {
        snprintf(cm->off_why, sizeof(cm->off_why),
                 "the PMPI layer %.300s is preloaded and runs the "
                 "collectives itself; coll/incoll stands aside",
                 path);
        cm->layer_aside = 1;
        return OMPI_SUCCESS;
    }
    if (mpi_cs_colls_parse(cm->colls, &mask, bad, sizeof(bad)) != 0) {
        snprintf(cm->off_why, sizeof(cm->off_why),
                 "coll_incoll_colls='%.100s' names an unknown collective "
                 "(%s; known: all, none, allreduce, reduce, bcast, barrier, "
                 "allgather, gather, scatter, reduce_scatter_block, "
                 "reduce_scatter)",
                 cm->colls, bad);
        return OMPI_SUCCESS;
    }
    cm->colls_mask = mask;
    if (!fabric_configured(cm)) {
        snprintf(cm->off_why, sizeof(cm->off_why),
                 "no fabric configured (coll_incoll_fabric, coll_incoll_mgr, "
                 "INCOLL_FABRIC and INCOLL_MGR are unset)");
        return OMPI_SUCCESS;
    }
    return OMPI_SUCCESS;
}

/* 1 when the user configured a fabric, so that not getting offload is
 * worth a warning. */
static int offload_wanted(void)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;
    return cm->enable && fabric_configured(cm);
}

mca_coll_base_module_t *ci_comm_query(ompi_communicator_t *comm, int *priority)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;
    mca_coll_base_module_t *module;
    int world = comm == &ompi_mpi_comm_world.comm;
    const char *why = NULL;

    if (world)
        my_rank = ompi_comm_rank(comm);
    if (cm->off_why[0])
        why = cm->off_why;
    else if (OMPI_COMM_IS_INTER(comm))
        why = "an inter-communicator";
    else if (ompi_comm_size(comm) < cm->min_ranks || ompi_comm_size(comm) < 2)
        why = "fewer ranks than coll_incoll_min_ranks";
    else if (!world && cm->world == NULL)
        why = "libincoll is not up on MPI_COMM_WORLD";
    if (why) {
        if (world && !cm->warned && offload_wanted() && my_rank == 0) {
            if (cm->layer_aside)
                ci_log(0, "%s", why);
            else
                ci_log(0,
                       "a fabric is configured but MPI_COMM_WORLD is not "
                       "offloaded, Open MPI's own collectives run: %s",
                       why);
            cm->warned = 1;
        } else {
            ci_log(world ? 1 : 2, "%s (%d ranks): not taken: %s",
                   world ? "MPI_COMM_WORLD" : comm->c_name,
                   ompi_comm_size(comm), why);
        }
        return NULL;
    }
    module = ci_module_new(comm);
    if (module != NULL)
        *priority = cm->priority;
    return module;
}

/* libincoll's context, at MPI_COMM_WORLD's enable. The identity is MPI's
 * (rank, size, the node's ranks from mpirun), the job id rank 0's (random,
 * broadcast through the module below), the fabric the MCA parameters' or
 * else libincoll's own INCOLL_* settings. */
int ci_context_up(mca_coll_incoll_module_t *m)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;
    incoll_init_params_t params;
    mpi_cs_proc_t proc;
    int64_t job = 0;
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const char *fab;
    int rc;

    if (m->rank == 0)
        job = (int64_t)mpi_cs_job_random();
    rc = ci_exchange(m->comm, &job, 0);
    if (rc != OMPI_SUCCESS) {
        snprintf(cm->off_why, sizeof(cm->off_why),
                 "the job id's broadcast failed (%d)", rc);
        return -1;
    }
    memset(&params, 0, sizeof(params));
    memset(&proc, 0, sizeof(proc));
    proc.rank = m->rank;
    proc.size = m->size;
    proc.job_given = incoll_setting_given("INCOLL_JOB") == 1;
    proc.job_id = (uint64_t)job;
    if (lr && ls && incoll_setting_given("INCOLL_LOCAL_RANK") != 1) {
        proc.local_rank = atoi(lr);
        proc.local_size = atoi(ls);
    }
    if (cm->fabric[0]) {
        params.field_mask |= INCOLL_INIT_FIELD_FABRIC;
        params.fabric = cm->fabric;
    }
    if (cm->mgr[0]) {
        params.field_mask |= INCOLL_INIT_FIELD_MGR;
        params.mgr = cm->mgr;
    }
    if (cm->secret_file[0]) {
        params.field_mask |= INCOLL_INIT_FIELD_SECRET_FILE;
        params.secret_file = cm->secret_file;
    }
    /* A fabric.conf of another host count than the world's ranks, no
     * manager given: as the PMPI layer does (its manager, ranks sharing
     * the hosts, or off with the reason). */
    if (!cm->mgr[0] && incoll_setting_given("INCOLL_MGR") != 1 &&
        (fab = cm->fabric[0] ? cm->fabric : mpi_setting_str("INCOLL_FABRIC")) !=
            NULL &&
        fab[0]) {
        static mpi_fit_adopted_t adopted;
        char why[512], fix[384], note[512];
        fix[0] = '\0';
        if (mpi_fit_fabric(fab, m->size, mpi_setting_str("INCOLL_HOSTS"), NULL,
                           NULL, &params, &adopted, why, sizeof(why), fix,
                           sizeof(fix), note, sizeof(note)) != 0) {
            snprintf(cm->off_why, sizeof(cm->off_why), "%s%s%s", why,
                     fix[0] ? "; to fix: " : "", fix);
            return -1;
        }
        if (m->rank == 0 && note[0])
            ci_log(1, "%s", note);
    }
    /* The agreement after each call (coll_incoll_agree): by default as
     * the PMPI layer has it, INCOLL_MPI_AGREE (off unless asked). */
    cm->agree_on = cm->agree > 0 ||
                   (cm->agree < 0 && mpi_setting_num("INCOLL_MPI_AGREE") != 0);
    proc.agree = cm->agree_on;
    /* The component's calls come from any thread under
     * MPI_THREAD_MULTIPLE, else one at a time. */
    proc.thread_mode =
        cm->mpi_threads ? INCOLL_THREAD_MULTIPLE : INCOLL_THREAD_SERIALIZED;
    if (mpi_cs_up(&proc, &params, cm->off_why, sizeof(cm->off_why), &cm->ctx,
                  &cm->world) != 0) {
        cm->ctx = NULL;
        cm->world = NULL;
        return -1;
    }
    return 0;
}

static int incoll_open(void)
{
    return OMPI_SUCCESS;
}

mca_coll_incoll_component_t mca_coll_incoll_component = {
    .super =
        {
            .collm_version =
                {
                    MCA_COLL_BASE_VERSION_2_0_0,
                    .mca_component_name = "incoll",
                    MCA_BASE_MAKE_VERSION(component, OMPI_MAJOR_VERSION,
                                          OMPI_MINOR_VERSION,
                                          OMPI_RELEASE_VERSION),
                    .mca_open_component = incoll_open,
                    .mca_close_component = incoll_close,
                    .mca_register_component_params = incoll_register,
                },
            .collm_data = {MCA_BASE_METADATA_PARAM_NONE},
            .collm_init_query = incoll_init_query,
            .collm_comm_query = ci_comm_query,
        },
};
