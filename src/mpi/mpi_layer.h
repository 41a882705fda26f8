/*
 * libincoll_mpi: a PMPI interposer that runs an unmodified MPI program's
 * collectives on the incoll fabric. This header joins its parts:
 *
 *   mpi_layer.c    bootstrap from MPI, knobs, per-communicator state cached
 *                  as an MPI attribute, the offload paths with their
 *                  collective fallback decision, statistics, cleanup.
 *   mpi_wrap.c     the C entry points (MPI_Init ... MPI_Barrier).
 *   mpi_nb.c       the nonblocking and persistent collectives (generalized
 *                  requests, persistent receives the layer completes) and
 *                  the start, wait and test family that progresses them.
 *   mpi_fortran.c  the Fortran entry points that bypass the C ones
 *                  (Open MPI's mpif.h/`use mpi` and `use mpi_f08`
 *                  bindings call PMPI_ directly; MPICH's `mpi_f08` does
 *                  for its start, wait and test calls).
 *
 * Every call into the MPI library made here is a PMPI_ call (the Fortran
 * start and request_free go through the layer's own C MPI_Start,
 * MPI_Startall and MPI_Request_free). The docs are in docs/mpi.md.
 */
#ifndef INCOLL_MPI_LAYER_H
#define INCOLL_MPI_LAYER_H

#include <mpi.h>

#include "incoll.h"

/* The entry points the interposer must export (see exports.map). */
#define MPI_LAYER_EXPORT __attribute__((visibility("default")))

/* The collectives the layer knows, in the order of INCOLL_MPI_COLLS. */
typedef enum {
    MPI_COLL_ALLREDUCE = 0,
    MPI_COLL_REDUCE,
    MPI_COLL_BCAST,
    MPI_COLL_BARRIER,
    MPI_COLL_ALLGATHER,
    MPI_COLL_GATHER,
    MPI_COLL_SCATTER,
    MPI_COLL_REDUCE_SCATTER_BLOCK,
    MPI_COLL_REDUCE_SCATTER,
    MPI_COLL_COUNT
} mpi_coll_t;

/*
 * Starts the layer once MPI is initialised: identity from MPI_COMM_WORLD,
 * knobs, the attribute keyval, the finalize hook, and libincoll when a
 * fabric is configured. from_init is 1 when called right after MPI_Init or
 * MPI_Init_thread returned on every rank (then it may run collectives on
 * MPI_COMM_WORLD: the job id is drawn by rank 0 and broadcast, with rank
 * 0's knobs); 0 for a late start at the first intercepted call, when the
 * program initialised MPI through an entry point the layer does not see.
 * Safe to call many times.
 */
void mpi_layer_bootstrap(int from_init);

/* Notes a communicator made by an intercepted creation call; with
 * INCOLL_MPI_EAGER=1 sets up its fabric group now (collective over
 * newcomm, which every member has just received). */
void mpi_layer_comm_created(MPI_Comm newcomm, const char *how);

/*
 * The offload paths. Each returns 1 when the layer carried out the call
 * and stored the MPI return code in *ret_p: MPI_SUCCESS when libincoll
 * completed it (in the network, or on its host-based algorithms after a
 * failure), else the layer's error code, already raised through comm's
 * error handler (with INCOLL_MPI_AGREE=1: redone with PMPI_ after a
 * fabric failure that every rank agreed on). 0 when the caller must run
 * the MPI library's own function (the reason has been counted). No MPI
 * call on the success path. Arguments are C handles; sendbuf may be
 * MPI_IN_PLACE.
 */
int mpi_layer_allreduce(const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                        int *ret_p);
int mpi_layer_reduce(const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm,
                     int *ret_p);
int mpi_layer_bcast(void *buf, int count, MPI_Datatype dtype, int root,
                    MPI_Comm comm, int *ret_p);
int mpi_layer_barrier(MPI_Comm comm, int *ret_p);
int mpi_layer_allgather(const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, int *ret_p);
int mpi_layer_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype,
                     int root, MPI_Comm comm, int *ret_p);
int mpi_layer_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                      void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      int root, MPI_Comm comm, int *ret_p);
int mpi_layer_reduce_scatter_block(const void *sendbuf, void *recvbuf,
                                   int recvcount, MPI_Datatype dtype, MPI_Op op,
                                   MPI_Comm comm, int *ret_p);
/* Equal recvcounts go to the fabric as a reduce_scatter_block; unequal
 * ones to MPI (reason "unequal"). */
int mpi_layer_reduce_scatter(const void *sendbuf, void *recvbuf,
                             const int recvcounts[], MPI_Datatype dtype,
                             MPI_Op op, MPI_Comm comm, int *ret_p);

/*
 * libincoll as the layer brought it up in mpi_layer_bootstrap(): the
 * context (and in *world_p its world communicator, MPI_COMM_WORLD's ranks
 * in order), or NULL with the reason in *why_p when the layer is off. For
 * programs that link the layer's objects and drive libincoll themselves
 * next to MPI (the MPI worker of `incoll bench allreduce`,
 * tools/mpi/bench_worker.c). The layer owns both: it finalizes them
 * inside MPI_Finalize.
 */
incoll_ctx_h mpi_layer_incoll(incoll_comm_h *world_p, const char **why_p);

/*
 * Threads: under MPI_THREAD_MULTIPLE every call into the layer holds one
 * recursive lock, which libincoll gives up whenever it blocks (so threads
 * on different communicators run their collectives concurrently). No-ops
 * at the other thread levels. MPI_LAYER_CALL(x) evaluates x inside it.
 */
void mpi_layer_threads_init(incoll_ctx_h ctx);
void mpi_layer_enter(void);
int mpi_layer_leave(int done);
#define MPI_LAYER_CALL(call) (mpi_layer_enter(), mpi_layer_leave(call))

/* The nonblocking forms (mpi_nb.c): whether a call goes to the fabric,
 * decided as its blocking form decides (the same knobs and arguments on
 * every rank), with what libincoll needs. */
typedef struct {
    void *st; /* the communicator's state, for mpi_layer_nb_settle */
    incoll_comm_h icomm;
    incoll_dtype_t idt;
    incoll_op_t iop;
    size_t bytes; /* per rank (bcast: all; allgather: one block) */
    int was_in;   /* in the network at the start */
} mpi_nb_plan_t;

/* 1 when the call goes to libincoll (*p filled), 0 when to MPI (the
 * reason counted). count and dtype: the recv side for allgather. */
int mpi_layer_nb_plan(mpi_coll_t coll, MPI_Comm comm, int count,
                      MPI_Datatype dtype, MPI_Op op, int root,
                      mpi_nb_plan_t *p);
/* The same for gather and scatter: the block size from the root's side
 * that holds every block (root_count, root_type) at the root, from the
 * other side elsewhere, as the blocking forms take it; *is_root_p says
 * whether this rank is the root. */
int mpi_layer_nb_plan_rooted(mpi_coll_t coll, MPI_Comm comm, int root,
                             int in_place, int root_count,
                             MPI_Datatype root_type, int count,
                             MPI_Datatype type, mpi_nb_plan_t *p,
                             int *is_root_p);
/* The same for MPI_Ireduce_scatter: equal recvcounts go to libincoll
 * (recvcounts[0] elements per rank), unequal ones to MPI ("unequal"). */
int mpi_layer_nb_plan_rs(MPI_Comm comm, const int recvcounts[],
                         MPI_Datatype dtype, MPI_Op op, mpi_nb_plan_t *p);
/* 1 while the communicator of a plan's st runs in the network (taken again
 * at each start of a persistent request). */
int mpi_layer_nb_in_net(void *st);
/* Counts a completed nonblocking call (persistent: one start of a
 * persistent one) and, for an error, raises it as the blocking form does;
 * returns the MPI code for its status. */
int mpi_layer_nb_settle(void *st, mpi_coll_t coll, MPI_Comm comm,
                        incoll_status_t status, int was_in, int persistent);

/*
 * The nonblocking (persistent = 0) and persistent (1) forms, shared by the
 * C and Fortran entry points (mpi_nb.c). Each returns 1 with the MPI code
 * in *ret_p when the layer took the call (*request is then its request),
 * 0 when the MPI library's own function must run (the reason counted).
 * C handles; MPI_IN_PLACE allowed where MPI allows it. Called with the
 * layer's lock held (mpi_layer_enter).
 */
int mpi_nb_allreduce(const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype dt, MPI_Op op, MPI_Comm comm, int persistent,
                     MPI_Request *request, int *ret_p);
int mpi_nb_reduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
                  int persistent, MPI_Request *request, int *ret_p);
int mpi_nb_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
                 int persistent, MPI_Request *request, int *ret_p);
int mpi_nb_barrier(MPI_Comm comm, int persistent, MPI_Request *request,
                   int *ret_p);
int mpi_nb_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype,
                     MPI_Comm comm, int persistent, MPI_Request *request,
                     int *ret_p);
/* Gather (scatter = 0) or scatter (1). */
int mpi_nb_rooted(int scatter, const void *sendbuf, int sendcount,
                  MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm,
                  int persistent, MPI_Request *request, int *ret_p);
int mpi_nb_rsb(const void *sendbuf, void *recvbuf, int recvcount,
               MPI_Datatype dt, MPI_Op op, MPI_Comm comm, int persistent,
               MPI_Request *request, int *ret_p);
int mpi_nb_rs(const void *sendbuf, void *recvbuf, const int recvcounts[],
              MPI_Datatype dt, MPI_Op op, MPI_Comm comm, int persistent,
              MPI_Request *request, int *ret_p);

/* For the Fortran wait and test family, which calls MPI's own after
 * these (each takes the layer's lock): whether a request of the layer is
 * outstanding; progress without blocking; wait for req when it is the
 * layer's; wait a slice for one of the layer's among reqs (0 when none is
 * there). */
int mpi_nb_outstanding(void);
void mpi_nb_progress(void);
void mpi_nb_wait(MPI_Request req);
int mpi_nb_wait_slice(int n, MPI_Request reqs[]);

/* Completes every outstanding nonblocking call and frees the persistent
 * ones (MPI_Finalize). */
void mpi_nb_finalize(void);

#endif
