/*
 * The communicator state that both MPI front ends build alike, the PMPI
 * layer (libincoll_mpi, src/mpi) and the Open MPI component (coll/incoll,
 * src/ompi): libincoll's context and world communicator from what MPI
 * says of the process, the job's id, and an MPI communicator's libincoll
 * communicator, made and agreed on by every rank. Written against
 * include/incoll.h only: what differs between the front ends (how the
 * ranks exchange a value, how a communicator's ranks map to the world's,
 * the settings' names) comes in as arguments.
 */
#ifndef INCOLL_MPI_COMMSTATE_H
#define INCOLL_MPI_COMMSTATE_H

#include "incoll.h"

#include <stddef.h>
#include <stdint.h>

/* The collectives both front ends take, in the order of their lists
 * (INCOLL_MPI_COLLS, coll_incoll_colls) and of their enums (mpi_coll_t,
 * ci_coll_t): allreduce, reduce, bcast, barrier, allgather, gather,
 * scatter, reduce_scatter_block, reduce_scatter. */
#define MPI_CS_COLLS 9
extern const char *const mpi_cs_coll_names[MPI_CS_COLLS];

/*
 * A list of those names, "all" and "none" (comma- or space-separated,
 * later words adding to or, "none", clearing what came before) as a mask
 * of bit c for mpi_cs_coll_names[c] in *mask_p. 0, or -1 with the
 * unknown words in bad ("x, y"; the mask then holds the known ones).
 */
int mpi_cs_colls_parse(const char *text, uint32_t *mask_p, char *bad,
                       size_t bad_len);

/* What a front end knows of the process when it brings libincoll up. */
typedef struct {
    int rank; /* in MPI_COMM_WORLD */
    int size;
    int local_rank; /* on its node */
    int local_size; /* 0: not known (libincoll's settings decide) */
    /* The job's name for the manager: libincoll's own INCOLL_JOB when
     * job_given, else job_name when set and not empty, else job_id in
     * hex (the same on every rank). */
    int job_given;
    const char *job_name;
    uint64_t job_id;
    /* The ranks agree after each call whether the fabric delivered: every
     * rank must see its call end, so no early returns. */
    int agree;
    incoll_thread_mode_t thread_mode;
} mpi_cs_proc_t;

/*
 * Brings libincoll up: params (the front end's own fields: fabric,
 * manager, host map, outer lock, ...) plus proc's identity, libincoll's
 * request threads unless INCOLL_PROGRESS_THREAD says otherwise, then the
 * context and its world communicator. 0 with *ctx_p and *world_p set, or
 * -1 with why (nothing left up).
 */
int mpi_cs_up(const mpi_cs_proc_t *proc, incoll_init_params_t *params,
              char *why, size_t why_len, incoll_ctx_h *ctx_p,
              incoll_comm_h *world_p);

/* A random job id (rank 0's, which the front end sends to every rank);
 * without randomness the launcher's job name, hashed, or the time. */
uint64_t mpi_cs_job_random(void);
/* The launcher's job name (PMIx namespace, Open MPI's or PMI's job id),
 * hashed: the same on every rank, without an exchange; 0 without one. */
uint64_t mpi_cs_job_from_env(void);

/* Why a communicator is not offloaded, agreed as the largest over its
 * ranks (so ordered by precedence). */
typedef enum {
    MPI_CS_OK = 0,
    MPI_CS_NOMEM,    /* out of memory on some rank */
    MPI_CS_INACTIVE, /* offload is off on some rank */
    MPI_CS_CREATE,   /* incoll_comm_create failed on some rank */
    MPI_CS_HOST,     /* the fabric cannot host its group */
    MPI_CS_AGREE,    /* the ranks' agreement itself failed */
    MPI_CS_COUNT
} mpi_cs_code_t;

/* The text of a code, for messages. */
const char *mpi_cs_code_text(mpi_cs_code_t code);

/* Every rank of the communicator gets the largest of the ranks' *code_p
 * (collective over the communicator); 0, or -1 when the exchange failed. */
typedef int (*mpi_cs_agree_cb_t)(void *arg, int *code_p);

/*
 * The libincoll communicator of an MPI communicator of size ranks.
 * Collective over it: every member calls it at the same point. Two
 * agreements: first that every rank can try (code, this rank's reason
 * not to, MPI_CS_OK when it can, with detail, ": ..." or ""), so that no
 * rank waits in incoll_comm_create for one that will not come; then that
 * every rank made it and that it runs in the network. world_ranks: the
 * members' ranks in MPI_COMM_WORLD, or NULL for MPI_COMM_WORLD itself,
 * whose communicator is world (not owned: the context's). Returns the
 * agreed code: MPI_CS_OK with *ic_p (and *owned_p, 1 when the caller
 * must destroy it, mpi_cs_comm_free), else *ic_p NULL and why saying why
 * (the code's text, and this rank's detail when the code is its own).
 */
mpi_cs_code_t mpi_cs_comm_make(incoll_comm_h world, int size,
                               const int *world_ranks, mpi_cs_code_t code,
                               const char *detail, mpi_cs_agree_cb_t agree,
                               void *arg, char *why, size_t why_len,
                               incoll_comm_h *ic_p, int *owned_p);

/* Destroys *ic_p when owned (and clears both). */
void mpi_cs_comm_free(incoll_comm_h *ic_p, int *owned_p);

#endif
