/*
 * The state of libincoll_mpi that its files share (private to the layer;
 * mpi_layer.h is its interface to the wrappers): the knobs rank 0
 * broadcast, the per-communicator state, and the one process-wide record
 * L (the MPI library the layer wraps is itself a process-wide singleton).
 * mpi_boot.c fills it at MPI_Init (knobs, bootstrap, threads);
 * mpi_layer.c keeps the communicators, the offload paths and the
 * statistics.
 */
#ifndef INCOLL_MPI_STATE_H
#define INCOLL_MPI_STATE_H

#include "mpi/mpi_commstate.h"
#include "mpi/mpi_layer.h"

#include "mpi/mpi_log.h"

#include <stdint.h>

/* Why a call went to the MPI library: the reasons the statistics count. */
typedef enum {
    R_OFF = 0, /* the layer is inactive (no fabric, disabled, ...) */
    R_COLL,    /* the collective is not in INCOLL_MPI_COLLS */
    R_ARGS,    /* arguments the layer leaves to MPI to judge */
    R_DTYPE,   /* datatype not predefined or not mapped */
    R_OP,      /* user-defined op, or not valid for the datatype */
    R_BYTES,   /* larger than INCOLL_MPI_MAX_BYTES */
    R_COMM,    /* the communicator is not offloaded */
    R_FAILED,  /* the fabric failed; redone with PMPI_ (INCOLL_MPI_AGREE=1) */
    R_LEFT,    /* left the network; MPI's is faster than the hosts' here */
    R_UNEQUAL, /* MPI_Reduce_scatter with unequal counts */
    R_TUNE,    /* the selection table says MPI's own is faster */
    R_COUNT
} reason_t;

/* After the communicator left the network, reduces, and broadcasts of
 * fewer bytes than this, go to MPI once the ranks agreed on it (see
 * mpi_layer_barrier): MPI's own are faster than an allreduce on the hosts
 * there (MPI's non-roots of a reduce and root of a broadcast return
 * early; measured with tests/mpi/osu_side.c, docs/mpi.md). */
#define LEFT_MPI_BYTES 65536

/* Error codes the layer raises through a communicator's error handler,
 * one per negative incoll_status_t (index -status), in an error class of
 * its own; MPI_ERR_OTHER where MPI could not add them. */
#define ERRCODE_MAX 32

/* Knobs as rank 0 saw them; broadcast at MPI_Init so all ranks decide
 * alike. Plain integers and characters only: it travels as bytes. */
typedef struct {
    uint64_t job;
    char job_name[64]; /* INCOLL_JOB as rank 0 saw it (a launcher's, such as
                          the Slurm plugin's, for its quota), or "" */
    uint64_t max_bytes;
    int32_t enable;
    int32_t colls; /* bit per mpi_coll_t */
    int32_t min_ranks;
    int32_t verbose;
    int32_t stats;
    int32_t eager;
    int32_t agree;
    int32_t tune_debug;
} mpi_cfg_t;

_Static_assert((int)INCOLL_COLL_COUNT == (int)MPI_COLL_COUNT &&
                   (int)INCOLL_FORM_BLOCKING == (int)MPI_FORM_BLOCKING &&
                   (int)INCOLL_FORM_NB == (int)MPI_FORM_NB &&
                   (int)INCOLL_FORM_PERSISTENT == (int)MPI_FORM_PERSISTENT,
               "the selection table's collectives and forms are the layer's");

/*
 * The libincoll communicators of a communicator's persistent collectives
 * (persist_icomm): made collectively at an init, so slot i is the same
 * communicator on every rank; kept when their request is freed and taken
 * again by a later init (destroying one costs libincoll a linger of a
 * few hundred milliseconds). Which are busy is each rank's own (a
 * request is freed locally): an init takes the first slot free on every
 * rank, agreed with one allreduce. When the MPI communicator goes, the
 * idle ones go with it and the pool stays (orphan) until the last
 * request using one of its slots is freed.
 */
#define POOL_MAX 64
typedef struct {
    incoll_comm_h ic[POOL_MAX];
    uint64_t busy;
    int n;
    int orphan;
} persist_pool_t;

/* The state cached on each communicator the layer has looked at. */
typedef struct comm_state {
    incoll_comm_h icomm; /* NULL when not offloaded */
    int owned;           /* made by incoll_comm_create: destroy with comm */
    int offloaded;
    int rank;
    int size;
    int seq;       /* order of setup on this rank, for messages */
    int left;      /* said that its libincoll communicator left the network */
    int want_mpi;  /* this rank saw it leave: asks at the next barrier */
    int to_mpi;    /* all ranks agreed: small bcast and reduce go to MPI */
    char why[512]; /* why not offloaded (the manager's reason in it) */
    void *scratch; /* MINLOC/MAXLOC's values and indices */
    size_t scratch_len;
    persist_pool_t *pool; /* persistent collectives' communicators */
    uint64_t key;         /* the MPI_Comm handle, in the lookup table */
    struct comm_state *next;
    struct comm_state *prev;
} comm_state_t;

/* The collectives' names in INCOLL_MPI_COLLS and the statistics (the
 * front ends' shared list, mpi_commstate.h), and their MPI names for
 * messages ("Allreduce"). */
#define mpi_coll_names mpi_cs_coll_names
_Static_assert(MPI_COLL_COUNT == MPI_CS_COLLS, "the front ends' collectives");
extern const char *const mpi_call_names[MPI_COLL_COUNT];

typedef struct {
    int booted;
    int finalized;
    int active; /* libincoll is up: communicators may be offloaded */
    char why_off[256];
    /* Without a manager, MPI_COMM_WORLD on fewer fabric.conf hosts than
     * ranks: each rank's host (INCOLL_HOST_MAP, made at MPI_Init by
     * world_host_map), or why there is none (map_why). */
    char *host_map;
    char map_why[256];
    int rank;
    int size;
    int thread_multiple;
    incoll_thread_mode_t thread_mode; /* MPI's thread level */
    mpi_cfg_t cfg;
    int nsetups;     /* communicators set up so far */
    int keyval;      /* per-communicator state */
    int self_keyval; /* on MPI_COMM_SELF: its deletion is MPI_Finalize */
    incoll_ctx_h ctx;
    incoll_comm_h world;
    comm_state_t *states;
    /* MPI_Comm handle -> state, open addressing with linear probing:
     * the per-call lookup, O(1) and without an MPI call (the attribute
     * stays the owner: its delete callback removes the entry). */
    struct comm_slot {
        uint64_t key;
        comm_state_t *st; /* NULL: empty */
    } * table;
    size_t table_cap; /* 0 or a power of two */
    size_t table_n;
    int errcode[ERRCODE_MAX];
    unsigned long offloaded[MPI_COLL_COUNT]; /* completed in the network */
    unsigned long hosts[MPI_COLL_COUNT];     /* by libincoll on the hosts */
    unsigned long errors[MPI_COLL_COUNT];    /* raised as MPI errors */
    /* Of the calls given to libincoll: nonblocking ones, and starts of
     * persistent ones (mpi_nb.c). */
    unsigned long nb[MPI_COLL_COUNT];
    unsigned long persistent[MPI_COLL_COUNT];
    unsigned long passed[MPI_COLL_COUNT][R_COUNT];
} mpi_state_t;

extern mpi_state_t L;

/* Verbose lines are printed whatever INCOLL_LOG_LEVEL says. */
#define verbose(...)                                                           \
    do {                                                                       \
        if (L.cfg.verbose)                                                     \
            incoll_log(INCOLL_LOG_INFO, __VA_ARGS__);                          \
    } while (0)

/* The communicators (mpi_comm.c). mpi_comm_state: comm's state, made
 * collectively at its first collective (how: for messages); never NULL
 * (a state that says why it is not offloaded). mpi_comm_known: the state
 * of a communicator seen before, without an MPI call, or NULL.
 * mpi_comm_label: its MPI name or "communicator #k". mpi_comm_persist: a
 * libincoll communicator of a persistent request's own (collective over
 * c->comm; 0 when there is none, then MPI's own serves). mpi_pool_put:
 * a persistent request gives its pool slot back. */
comm_state_t *mpi_comm_state(MPI_Comm comm, const char *how);
comm_state_t *mpi_comm_known(MPI_Comm comm);
void mpi_comm_label(MPI_Comm comm, int seq, char *buf, size_t len);
int mpi_comm_persist(mpi_call_t *c);
void mpi_pool_put(persist_pool_t *pool, int slot);
/* Prints rank 0's statistics line (mpi_stats.c). */
void mpi_stats_print(void);
/* Says at warn level, once, why MPI_COMM_WORLD is not offloaded and how
 * to get offload (mpi_boot.c). */
void mpi_warn_world_off(const char *why);
/* The layer's error codes, one per libincoll error (mpi_layer.c). */
void mpi_errcodes_init(void);
/* The attribute callbacks and the exit hook that end the layer
 * (mpi_layer.c). */
int mpi_comm_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra);
int mpi_self_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra);
void mpi_atexit_cb(void);

#endif
