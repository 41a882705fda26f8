/*
 * The communicator state both MPI front ends share (mpi_commstate.h):
 * libincoll brought up from MPI's view of the process, the job id, and
 * the agreed making of a communicator's libincoll communicator.
 */
#include "mpi/mpi_commstate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

const char *const mpi_cs_coll_names[MPI_CS_COLLS] = {
    "allreduce",     "reduce", "bcast",   "barrier",
    "allgather",     "gather", "scatter", "reduce_scatter_block",
    "reduce_scatter"};

int mpi_cs_colls_parse(const char *text, uint32_t *mask_p, char *bad,
                       size_t bad_len)
{
    const char *p = text ? text : "";
    uint32_t mask = 0;
    size_t off = 0;

    if (bad_len)
        bad[0] = '\0';
    while (*p) {
        size_t n = strcspn(p, ", ");
        int found = 0;
        if (n == 3 && strncmp(p, "all", 3) == 0) {
            mask = (1u << MPI_CS_COLLS) - 1;
            found = 1;
        } else if (n == 4 && strncmp(p, "none", 4) == 0) {
            mask = 0;
            found = 1;
        }
        for (int c = 0; c < MPI_CS_COLLS && !found; c++)
            if (strlen(mpi_cs_coll_names[c]) == n &&
                strncmp(p, mpi_cs_coll_names[c], n) == 0) {
                mask |= 1u << c;
                found = 1;
            }
        if (!found && n > 0 && off < bad_len)
            off += (size_t)snprintf(bad + off, bad_len - off, "%s%.*s",
                                    off ? ", " : "", (int)n, p);
        p += n;
        p += strspn(p, ", ");
    }
    *mask_p = mask;
    return bad_len && bad[0] ? -1 : 0;
}

int mpi_cs_up(const mpi_cs_proc_t *proc, incoll_init_params_t *params,
              char *why, size_t why_len, incoll_ctx_h *ctx_p,
              incoll_comm_h *world_p)
{
    incoll_ctx_h ctx = NULL;
    incoll_comm_h world = NULL;
    incoll_status_t status;
    char job[32];

    params->field_mask |= INCOLL_INIT_FIELD_RANK | INCOLL_INIT_FIELD_SIZE;
    params->rank = proc->rank;
    params->size = proc->size;
    /* The launcher's job name when it gave one (its manager knows the job
     * by it: quotas), else rank 0's random id. */
    if (!proc->job_given) {
        snprintf(job, sizeof(job), "0x%016" PRIx64, proc->job_id);
        params->field_mask |= INCOLL_INIT_FIELD_JOB;
        params->job =
            proc->job_name && proc->job_name[0] ? proc->job_name : job;
    }
    if (proc->local_size > 0) {
        params->field_mask |=
            INCOLL_INIT_FIELD_LOCAL_RANK | INCOLL_INIT_FIELD_LOCAL_SIZE;
        params->local_rank = proc->local_rank;
        params->local_size = proc->local_size;
    }
    /* A program blocks in MPI calls the front end does not see (receives,
     * MPI's own collectives, waits on other requests), during which nobody
     * would progress its nonblocking collectives: libincoll's request
     * threads run them (unless INCOLL_PROGRESS_THREAD says otherwise). */
    if (incoll_setting_given("INCOLL_PROGRESS_THREAD") != 1) {
        params->field_mask |= INCOLL_INIT_FIELD_PROGRESS_THREAD;
        params->progress_thread = 1;
    }
    /* The agreement after each call checks that the operation completed
     * on every rank: a member that returned early (INCOLL_EARLY_MAX) has
     * not seen its end. */
    if (proc->agree) {
        params->field_mask |= INCOLL_INIT_FIELD_EARLY_MAX;
        params->early_max = 0;
    }
    params->field_mask |= INCOLL_INIT_FIELD_THREAD_MODE;
    params->thread_mode = proc->thread_mode;
    status = incoll_init_params(params, &ctx);
    params->job = NULL; /* job[] ends here; libincoll has its copy */
    if (status != INCOLL_OK) {
        snprintf(why, why_len, "incoll_init failed: %s",
                 incoll_status_string(status));
        return -1;
    }
    status = incoll_comm_world(ctx, &world);
    if (status != INCOLL_OK) {
        incoll_finalize(ctx);
        snprintf(why, why_len, "no world communicator: %s",
                 incoll_status_string(status));
        return -1;
    }
    /* Every rank decides each call from the same selection table. */
    status = incoll_ctx_agree_table(ctx);
    if (status != INCOLL_OK) {
        incoll_finalize(ctx);
        snprintf(why, why_len, "the ranks' selection tables: %s",
                 incoll_status_string(status));
        return -1;
    }
    *ctx_p = ctx;
    *world_p = world;
    return 0;
}

uint64_t mpi_cs_job_from_env(void)
{
    static const char *const vars[] = {"PMIX_NAMESPACE",
                                       "OMPI_MCA_ess_base_jobid", "PMI_KVSNAME",
                                       "PMI_JOBID", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
        if (v == NULL || *v == '\0')
            continue;
        for (; *v; v++)
            h = (h ^ (unsigned char)*v) * 0x100000001b3ull;
        return h;
    }
    return 0;
}

uint64_t mpi_cs_job_random(void)
{
    uint64_t job = 0;

    if (getrandom(&job, sizeof(job), 0) == sizeof(job) && job)
        return job;
    job = mpi_cs_job_from_env();
    if (job == 0)
        job = (uint64_t)getpid() << 20 ^ (uint64_t)time(NULL);
    return job;
}

static const char *const code_text[MPI_CS_COUNT] = {
    "offloaded",
    "out of memory",
    "offload is off on some rank",
    "incoll_comm_create failed on some rank",
    "the fabric cannot host its group (libincoll would run host-based "
    "algorithms, MPI's own are used instead)",
    "the ranks could not agree on it",
};

const char *mpi_cs_code_text(mpi_cs_code_t code)
{
    return code >= 0 && code < MPI_CS_COUNT ? code_text[code] : "unknown";
}

/* The largest code over the ranks (MPI_CS_AGREE when the exchange
 * failed). */
static mpi_cs_code_t agreed_code(mpi_cs_code_t code, mpi_cs_agree_cb_t agree,
                                 void *arg)
{
    int v = (int)code;

    if (agree(arg, &v) != 0)
        return MPI_CS_AGREE;
    return v >= 0 && v < MPI_CS_COUNT ? (mpi_cs_code_t)v : MPI_CS_AGREE;
}

mpi_cs_code_t mpi_cs_comm_make(incoll_comm_h world, int size,
                               const int *world_ranks, mpi_cs_code_t code,
                               const char *detail, mpi_cs_agree_cb_t agree,
                               void *arg, char *why, size_t why_len,
                               incoll_comm_h *ic_p, int *owned_p)
{
    char local[384];
    incoll_comm_h ic = NULL;
    int owned = 0;
    mpi_cs_code_t agreed;

    snprintf(local, sizeof(local), "%s", detail ? detail : "");
    agreed = agreed_code(code, agree, arg);
    if (agreed == MPI_CS_OK) {
        const char *host_why = NULL;
        if (world_ranks == NULL) {
            /* MPI_COMM_WORLD itself: the fabric's world group. Any other
             * communicator, even one congruent with it (a dup), gets a
             * libincoll communicator of its own: collectives on two
             * communicators may be started in different orders on
             * different ranks (a nonblocking one on the world, then a
             * blocking one on a dup here, the other way round there), so
             * two MPI communicators sharing one would match each other's
             * calls. */
            ic = world;
        } else {
            incoll_status_t status =
                incoll_comm_create(world, size, world_ranks, &ic);
            if (status == INCOLL_OK && ic) {
                owned = 1;
            } else {
                ic = NULL;
                code = MPI_CS_CREATE;
                snprintf(local, sizeof(local), ": %s here",
                         incoll_status_string(status));
            }
        }
        if (code == MPI_CS_OK && !incoll_comm_offloaded(ic, &host_why)) {
            code = MPI_CS_HOST;
            snprintf(local, sizeof(local), ": %s",
                     host_why ? host_why : "no reason given");
        }
        agreed = agreed_code(code, agree, arg);
    }
    if (agreed != MPI_CS_OK) {
        mpi_cs_comm_free(&ic, &owned);
        snprintf(why, why_len, "%s%s", code_text[agreed],
                 agreed == code ? local : "");
    } else {
        snprintf(why, why_len, "%s", code_text[MPI_CS_OK]);
    }
    *ic_p = ic;
    *owned_p = owned;
    return agreed;
}

void mpi_cs_comm_free(incoll_comm_h *ic_p, int *owned_p)
{
    if (*ic_p && *owned_p)
        incoll_comm_destroy(*ic_p);
    *ic_p = NULL;
    *owned_p = 0;
}
