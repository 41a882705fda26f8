/*
 * coll/incoll: incoll as a native Open MPI collective component
 * (mca_coll_incoll.so), selected per communicator the way coll/hcoll and
 * coll/ucc are, with no preloaded library. Built against the internal
 * headers of the Open MPI it is loaded by (libopenmpi-dev); it drives
 * libincoll through its public API (include/incoll.h) only, and shares the
 * MPI layer's datatype and op tables (src/mpi/mpi_dtype.c) and its
 * communicator set-up (src/mpi/mpi_commstate.c: libincoll's context, the
 * job id, a communicator's agreed libincoll communicator). docs/ompi.md.
 *
 *   coll_incoll_component.c  the component: MCA parameters, the version
 *                            check, libincoll's context, per-communicator
 *                            query, statistics.
 *   coll_incoll_module.c     the module: enable (the saved functions of the
 *                            module below, the communicator's libincoll
 *                            communicator, one decision on every rank) and
 *                            the blocking, nonblocking and persistent
 *                            collectives, each with its fallback.
 */
#ifndef INCOLL_COLL_INCOLL_H
#define INCOLL_COLL_INCOLL_H

#include "ompi_config.h"

#include <pthread.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/request/request.h"

#include "incoll.h"

/* The collectives the component can take, in coll_incoll_colls order. */
typedef enum {
    CI_ALLREDUCE = 0,
    CI_REDUCE,
    CI_BCAST,
    CI_BARRIER,
    CI_ALLGATHER,
    CI_GATHER,
    CI_SCATTER,
    CI_REDUCE_SCATTER_BLOCK,
    CI_REDUCE_SCATTER,
    CI_COUNT
} ci_coll_t;

/* Where a call went, for the statistics. */
typedef enum {
    CI_NET = 0,  /* libincoll, in the network */
    CI_HOST,     /* libincoll, on its host-based algorithms (after a failure) */
    CI_FALLBACK, /* the module below */
    CI_FAILED,   /* the fabric failed during it: redone by the module below */
    CI_TUNED,    /* the selection table gave it to the module below */
    CI_WHERES
} ci_where_t;

typedef struct {
    mca_coll_base_component_2_0_0_t super;
    /* MCA parameters (coll_incoll_*) */
    bool enable;
    int priority;
    int verbose;
    char *fabric;
    char *mgr;
    char *secret_file;
    char *colls; /* comma-separated list of collectives taken */
    unsigned long max_bytes;
    int min_ranks;
    bool stats;
    int agree; /* the agreement after each call: -1 without a manager */
    /* state */
    int agree_on; /* the agreement runs (coll_incoll_agree, the fabric) */
    uint32_t colls_mask;
    char off_why[1024]; /* why the component is off in this process */
    int mpi_threads;    /* MPI_THREAD_MULTIPLE (init_query's word) */
    int warned;
    int layer_aside; /* the PMPI layer is preloaded */
    incoll_ctx_h ctx;
    incoll_comm_h world;
    long counts[CI_COUNT][CI_WHERES]; /* by ci_where_t */
} mca_coll_incoll_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_incoll_component_t
    mca_coll_incoll_component;

/* The function of the module below that the component replaced, and that
 * module (retained while saved). */
#define CI_SAVED(fn)                                                           \
    mca_coll_base_module_##fn##_fn_t fn;                                       \
    mca_coll_base_module_t *fn##_module

typedef struct {
    mca_coll_base_module_t super;
    ompi_communicator_t *comm;
    incoll_comm_h icomm; /* NULL: everything goes below */
    int own_icomm;       /* 0 for the world's (the context owns it) */
    int rank, size;
    int said_host; /* told that it left the network */
    int left;      /* the ranks agreed the fabric failed: all goes below */
    pthread_mutex_t lock; /* one libincoll call on icomm at a time */
    struct {
        CI_SAVED(allreduce);
        CI_SAVED(reduce);
        CI_SAVED(bcast);
        CI_SAVED(barrier);
        CI_SAVED(allgather);
        CI_SAVED(gather);
        CI_SAVED(scatter);
        CI_SAVED(reduce_scatter_block);
        CI_SAVED(reduce_scatter);
        CI_SAVED(iallreduce);
        CI_SAVED(ireduce);
        CI_SAVED(ibcast);
        CI_SAVED(ibarrier);
        CI_SAVED(iallgather);
        CI_SAVED(igather);
        CI_SAVED(iscatter);
        CI_SAVED(ireduce_scatter_block);
        CI_SAVED(ireduce_scatter);
        CI_SAVED(allreduce_init);
        CI_SAVED(reduce_init);
        CI_SAVED(bcast_init);
        CI_SAVED(barrier_init);
        CI_SAVED(allgather_init);
        CI_SAVED(gather_init);
        CI_SAVED(scatter_init);
        CI_SAVED(reduce_scatter_block_init);
        CI_SAVED(reduce_scatter_init);
    } below;
} mca_coll_incoll_module_t;
OBJ_CLASS_DECLARATION(mca_coll_incoll_module_t);

/* The module for comm, or NULL with the reason given (verbose). */
mca_coll_base_module_t *ci_comm_query(ompi_communicator_t *comm, int *priority);
/* A new module for comm (enabled later by Open MPI), or NULL. */
mca_coll_base_module_t *ci_module_new(ompi_communicator_t *comm);
/* Stops the progress callback (the component's close). */
void ci_module_progress_off(void);
/* Brings libincoll up at the world's enable (collective over the world,
 * through the module below's broadcast); 0 or -1 with off_why set. */
int ci_context_up(mca_coll_incoll_module_t *m);
/* Every rank of comm gets the minimum of the ranks' *v (min = 1) or rank
 * 0's (0), by point-to-point messages; at enable. OMPI code. */
int ci_exchange(ompi_communicator_t *comm, int64_t *v, int min);
/* Counts a call. */
void ci_count(ci_coll_t coll, ci_where_t where);
/* "coll/incoll: ..." on stderr when the component's verbosity is at least
 * level (0: always). */
void ci_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The collective's name in coll_incoll_colls. */
const char *ci_coll_name(ci_coll_t coll);

#endif /* INCOLL_COLL_INCOLL_H */
