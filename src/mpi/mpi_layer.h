/*
 * libincoll_mpi: a PMPI interposer that runs an unmodified MPI program's
 * collectives on the incoll fabric. This header joins its parts:
 *
 *   mpi_boot.c     knobs (rank 0's for every rank), the bootstrap from
 *                  MPI at MPI_Init (libincoll's context, on include/incoll.h
 *                  alone), the layer's lock under MPI_THREAD_MULTIPLE.
 *   mpi_comm.c     per-communicator state cached as an MPI attribute
 *                  (agreed at the first collective), its lookup, the
 *                  pools of persistent collectives' communicators.
 *   mpi_layer.c    the planning of a call (one decision on every rank,
 *                  this rank's staging), the blocking offload paths,
 *                  cleanup.
 *   mpi_stats.c    the statistics line (INCOLL_MPI_STATS=1).
 *   mpi_state.h    the state these share (private to the layer).
 *   mpi_dtype.c    datatypes and ops: the tables incoll reduces with, and
 *                  what one side of a call is (signature bytes, dense or
 *                  packed through a buffer of the call).
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
 * recursive lock, which libincoll gives up whenever it blocks (its outer
 * lock: mpi_layer_threads_init puts it in the init parameters; so threads
 * on different communicators run their collectives concurrently). No-ops
 * at the other thread levels. MPI_LAYER_CALL(x) evaluates x inside it.
 */
void mpi_layer_threads_init(incoll_init_params_t *params);
void mpi_layer_enter(void);
int mpi_layer_leave(int done);
#define MPI_LAYER_CALL(call) (mpi_layer_enter(), mpi_layer_leave(call))

/* ---- datatypes and ops (mpi_dtype.c) ---- */

/* A predefined datatype incoll knows: its kind (after MPI's groups of
 * basic types), size, and incoll type when it can be reduced. */
typedef struct {
    MPI_Datatype dt;
    int kind;
    int size;
    incoll_dtype_t idt;
} mpi_dt_entry_t;

/* MPI's pair types for MINLOC and MAXLOC (MPI 4.0, 6.9.4): a value and an
 * int index, laid out as the C struct {T value; int index;}. */
typedef struct {
    MPI_Datatype dt;
    incoll_dtype_t vdt; /* the value's type in incoll */
    int vsize;          /* bytes of the value */
    size_t ioff;        /* offset of the index in a pair */
    size_t extent;      /* bytes of one pair, padding included */
} mpi_pair_t;

/* Builds the tables and the analysis cache's keyval (bootstrap, after
 * MPI_Init). Returns 0 when this MPI's MPI_Pack does not give a side's
 * bytes as they are (then the layer cannot stage buffers and stays off). */
int mpi_dtype_init(void);
const mpi_dt_entry_t *mpi_dt_find(MPI_Datatype dt);
/* 1 when e (may be NULL) is a type incoll reduces. */
int mpi_dt_reducible(const mpi_dt_entry_t *e);
const mpi_pair_t *mpi_pair_find(MPI_Datatype dt);
/* 1 when dt is a predefined (named) datatype. */
int mpi_dt_predefined(MPI_Datatype dt);
/* incoll's op for a predefined MPI op; 0 when there is none. */
int mpi_op_map(MPI_Op op, incoll_op_t *iop_p);
/* 1 if MPI defines iop on datatypes of e's kind and incoll can do it. */
int mpi_op_applies(incoll_op_t iop, const mpi_dt_entry_t *e);

/*
 * One side of a call as this rank gives it: count elements of dt at buf.
 * bytes is its type signature's size (equal on the ranks whose sides MPI
 * matches); basic the one basic type the signature repeats, nbasic times
 * (MPI_DATATYPE_NULL when it mixes types); data, when not NULL, where the
 * bytes lie in signature order without gaps (buf plus the type's true
 * lower bound), so that libincoll can use them in place. Otherwise they
 * are packed and unpacked through a buffer of the call.
 */
typedef struct {
    void *buf;
    int count;
    MPI_Datatype dt; /* a duplicate of the caller's after mpi_side_keep */
    size_t bytes;
    MPI_Datatype basic;
    size_t nbasic;
    char *data;
    int owned; /* dt is the layer's duplicate */
} mpi_side_t;

/* Describes count elements of dt at buf (a zero count never looks at dt,
 * which may then be MPI_DATATYPE_NULL). 0, or -1 for a negative count or
 * an invalid datatype. Local; MPI calls only for derived datatypes not
 * seen before. */
int mpi_side_make(const void *buf, int count, MPI_Datatype dt, mpi_side_t *s);
/* Copies the side's bytes, in signature order, to dst / from src. MPI
 * codes. */
int mpi_side_pack(const mpi_side_t *s, void *dst);
int mpi_side_unpack(const mpi_side_t *s, const void *src);
/* For a side used after the MPI call returns (nonblocking, persistent):
 * holds a duplicate of a derived datatype it will pack or unpack, so the
 * program may free its own (MPI allows that while the operation is
 * pending); mpi_side_release frees it. */
int mpi_side_keep(mpi_side_t *s);
void mpi_side_release(mpi_side_t *s);

/* ---- one call, planned alike on every rank (mpi_layer.c) ---- */

/* The MPI arguments of a collective, C handles. Reductions and broadcast
 * give their count and datatype as both sides (sendcount/sendtype and
 * recvcount/recvtype), MPI_Reduce_scatter its recvcounts. */
typedef struct {
    const void *sendbuf; /* MPI_IN_PLACE allowed where MPI allows it */
    int sendcount;
    MPI_Datatype sendtype;
    void *recvbuf; /* MPI_IN_PLACE allowed (scatter's root) */
    int recvcount;
    MPI_Datatype recvtype;
    const int *recvcounts;
    MPI_Op op;
    int root;
    MPI_Comm comm;
} mpi_args_t;

/* The forms of a collective. */
typedef enum {
    MPI_FORM_BLOCKING = 0,
    MPI_FORM_NB,
    MPI_FORM_PERSISTENT
} mpi_form_t;

/* A side staged through the call's own buffer: packed into at before each
 * start (input), or unpacked from at after a successful completion
 * (output). */
typedef struct {
    mpi_side_t side;
    char *at;
    int on;
} mpi_stage_t;

/*
 * A call the layer gives libincoll. The decision (offload or MPI's own,
 * and what libincoll gets: count, incoll type and op) depends only on what
 * every rank knows alike; the staging (sbuf, rbuf, in, out) is this
 * rank's own layout.
 */
typedef struct {
    mpi_coll_t coll;
    MPI_Comm comm;
    void *st;            /* the communicator's state */
    incoll_comm_h icomm; /* where it runs (persistent: its own) */
    int own_icomm;       /* icomm is the request's, destroyed with it */
    void *pool;          /* persistent: the pool icomm was taken from */
    int pool_slot;       /* and its place there */
    int root;
    int is_root;
    int rank;
    int size;
    incoll_dtype_t idt;
    incoll_op_t iop;
    size_t count;         /* elements (reductions) or bytes of a block */
    size_t bytes;         /* per rank, for INCOLL_MPI_MAX_BYTES */
    const mpi_pair_t *pe; /* MINLOC/MAXLOC (blocking only) */
    const void *sbuf;     /* libincoll's input: INCOLL_IN_PLACE, or NULL */
    void *rbuf;           /* libincoll's output: INCOLL_IN_PLACE, or NULL */
    mpi_stage_t in;
    mpi_stage_t out;
    mpi_side_t pin, pout; /* MINLOC/MAXLOC's sides (pout.buf NULL: none) */
    void *tmp[3];         /* the call's own buffers */
    int mismatch;         /* this rank's two sides differ: an error after */
    int fail;             /* an MPI code: this rank cannot take part */
    int was_in;           /* in the network at the start */
    incoll_algo_t algo;   /* the selection table's host-based algorithm
                             (allreduce, every form), else AUTO */
    int algo_where;       /* a request on algo: 1 in the network, 0 on
                             the hosts; -1: ask the communicator (a
                             blocking call) */
} mpi_call_t;

/* Plans coll: 1 when libincoll runs it (c filled), 0 when MPI's own
 * function must (the reason counted). Collective only where every rank
 * reaches it alike (a communicator's first call; a persistent init,
 * which gets a libincoll communicator of its own). Layer lock held. */
int mpi_call_plan(mpi_coll_t coll, const mpi_args_t *a, mpi_form_t form,
                  mpi_call_t *c);
/* Before each start: packs the input side that is staged. MPI code. */
int mpi_call_pack(mpi_call_t *c);
/* Keeps the datatypes of staged sides (mpi_side_keep). MPI code. */
int mpi_call_keep(mpi_call_t *c);
/* 1 while the call's libincoll communicator runs in the network. */
int mpi_call_in_net(const mpi_call_t *c);
/* After libincoll completed a start of c with status: unpacks the output
 * on success, counts the call under form, raises an error through the
 * communicator's error handler as the blocking forms do; returns the MPI
 * code. */
int mpi_call_done(mpi_call_t *c, incoll_status_t status, mpi_form_t form);
/* Frees the call's buffers, kept datatypes and own communicator. */
void mpi_call_free(mpi_call_t *c);

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
