/*
 * incoll: in-network collective offload.
 *
 * The whole public API. Aggregation nodes in the network reduce vectors on
 * the way up a tree and replicate the result on the way down; this library
 * is the host side: it cuts a vector into packets, keeps a window of them in
 * flight, recovers from loss, and hands back the result exactly once.
 *
 * Objects:
 *   incoll_ctx_h   one per process: transport, fabric, identity.
 *   incoll_comm_h  a set of ranks that run collectives together.
 *
 * Conventions: every function returns an incoll_status_t (0 success,
 * negative error); output arguments come last, end in _p, and are written
 * only on success.
 */
#ifndef INCOLL_H
#define INCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define INCOLL_API __attribute__((visibility("default")))
#else
#define INCOLL_API
#endif

/*
 * The version of this header. A library of the same major version and the
 * same or a later minor version runs a program built against it:
 * incoll_init() and incoll_init_params() pass these numbers to
 * incoll_init_version(), which refuses any other library with
 * INCOLL_ERR_VERSION (and says which two versions met). New functions and
 * new fields at the end of incoll_init_params_t raise the minor version.
 */
#define INCOLL_VERSION_MAJOR 0
#define INCOLL_VERSION_MINOR 5
/* One number for comparisons: INCOLL_VERSION >= INCOLL_VERSION_OF(0, 2). */
#define INCOLL_VERSION_OF(major, minor) (((major) << 16) | (minor))
#define INCOLL_VERSION                                                         \
    INCOLL_VERSION_OF(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR)

/*
 * Status codes: one list, so the enum and incoll_status_string() can't drift.
 * 0 is success, positive values mean "not done yet", negative are errors.
 */
#define INCOLL_STATUS_LIST(X)                                                  \
    X(INCOLL_OK, 0, "success")                                                 \
    X(INCOLL_INPROGRESS, 1, "operation in progress")                           \
    X(INCOLL_WAIT_TIMEOUT, 2,                                                  \
      "wait timed out; the operation is still in progress")                    \
    X(INCOLL_ERR_INVALID_ARG, -1, "invalid argument")                          \
    X(INCOLL_ERR_NO_MEMORY, -2, "out of memory")                               \
    X(INCOLL_ERR_TIMEOUT, -3, "timed out waiting for the fabric")              \
    X(INCOLL_ERR_IO, -4, "input/output error")                                 \
    X(INCOLL_ERR_CONFIG, -5, "bad configuration")                              \
    X(INCOLL_ERR_UNSUPPORTED, -6, "operation not supported")                   \
    X(INCOLL_ERR_NO_RESOURCE, -7, "no resources in the fabric")                \
    X(INCOLL_ERR_PROTOCOL, -8, "protocol error")                               \
    X(INCOLL_ERR_NOT_FOUND, -9, "not found")                                   \
    X(INCOLL_ERR_BUSY, -10, "resource busy")                                   \
    X(INCOLL_ERR_AUTH, -11, "authentication failed")                           \
    X(INCOLL_ERR_GROUP_FAILED, -12, "group failed")                            \
    X(INCOLL_ERR_MISMATCH, -13, "the ranks' calls do not match")               \
    X(INCOLL_ERR_VERSION, -14,                                                 \
      "incoll.h and libincoll are of incompatible versions")

typedef enum {
#define INCOLL_X_ENUM(name, value, text) name = value,
    INCOLL_STATUS_LIST(INCOLL_X_ENUM)
#undef INCOLL_X_ENUM
} incoll_status_t;

/* Returns a constant, human-readable string for any status value. */
INCOLL_API const char *incoll_status_string(incoll_status_t status);

/*
 * The version of the library the program runs with (which may be newer
 * than the header it was built against): major and minor (either pointer
 * may be NULL); returns INCOLL_VERSION_OF(major, minor).
 */
INCOLL_API unsigned incoll_get_version(unsigned *major_p, unsigned *minor_p);
/* The same as a constant string, "MAJOR.MINOR". */
INCOLL_API const char *incoll_get_version_string(void);

/* Element types. Values are part of the wire format: never renumber. */
typedef enum {
    INCOLL_INT8 = 0,
    INCOLL_INT16 = 1,
    INCOLL_INT32 = 2,
    INCOLL_INT64 = 3,
    INCOLL_UINT8 = 4,
    INCOLL_UINT16 = 5,
    INCOLL_UINT32 = 6,
    INCOLL_UINT64 = 7,
    INCOLL_FLOAT16 = 8,  /* IEEE 754 binary16, stored as uint16_t */
    INCOLL_BFLOAT16 = 9, /* bfloat16, stored as uint16_t */
    INCOLL_FLOAT32 = 10,
    INCOLL_FLOAT64 = 11,
    INCOLL_DTYPE_COUNT
} incoll_dtype_t;

/* Reduction operations, with MPI's rules for which types each applies to:
 * SUM, PROD, MIN, MAX on every type; LAND, LOR, LXOR on integers and
 * floating types (nonzero is true, result 0 or 1); BAND, BOR, BXOR on
 * integers only. Values are part of the wire format. */
typedef enum {
    INCOLL_OP_SUM = 0,
    INCOLL_OP_PROD = 1,
    INCOLL_OP_MIN = 2,
    INCOLL_OP_MAX = 3,
    INCOLL_OP_LAND = 4,
    INCOLL_OP_LOR = 5,
    INCOLL_OP_LXOR = 6,
    INCOLL_OP_BAND = 7,
    INCOLL_OP_BOR = 8,
    INCOLL_OP_BXOR = 9,
    INCOLL_OP_COUNT
} incoll_op_t;

/* Pass as sendbuf to reduce in place: recvbuf holds the input and receives
 * the result. */
#define INCOLL_IN_PLACE ((const void *)1)

typedef struct incoll_ctx *incoll_ctx_h;
typedef struct incoll_comm *incoll_comm_h;

/* Size in bytes of one element of dtype, or 0 for an invalid dtype. */
INCOLL_API size_t incoll_dtype_size(incoll_dtype_t dtype);
INCOLL_API const char *incoll_dtype_name(incoll_dtype_t dtype);
INCOLL_API const char *incoll_op_name(incoll_op_t op);

/*
 * 1 when the environment gives the setting called name (an INCOLL_...
 * variable that `incoll info` lists) a value, 0 when its default rules,
 * -1 when there is no such setting. For front ends (an MPI component, a
 * launcher) that decide from what libincoll will read, without reading
 * its variables themselves.
 */
INCOLL_API int incoll_setting_given(const char *name);
/* 1 if op applies to dtype under MPI's rules, else 0. */
INCOLL_API int incoll_op_valid(incoll_op_t op, incoll_dtype_t dtype);

/*
 * Creates the process context. Identity and fabric come from the
 * environment: INCOLL_RANK, INCOLL_SIZE and INCOLL_FABRIC (a fabric
 * directory holding fabric.conf, written by `incoll fabric up`) or
 * INCOLL_MGR; every setting is checked first (`incoll info` lists them),
 * and a bad one fails with INCOLL_ERR_CONFIG naming it.
 * The caller owns *ctx_p and frees it with incoll_finalize().
 * A macro: it passes this header's version to incoll_init_version().
 */
INCOLL_API incoll_status_t(incoll_init)(incoll_ctx_h *ctx_p);
#define incoll_init(ctx_p) incoll_init_params(NULL, (ctx_p))

/* Fields of incoll_init_params_t that the caller set (its field_mask). */
typedef enum {
    INCOLL_INIT_FIELD_RANK = 1u << 0,
    INCOLL_INIT_FIELD_SIZE = 1u << 1,
    INCOLL_INIT_FIELD_JOB = 1u << 2,
    INCOLL_INIT_FIELD_HOST = 1u << 3,
    INCOLL_INIT_FIELD_LOCAL_RANK = 1u << 4,
    INCOLL_INIT_FIELD_LOCAL_SIZE = 1u << 5,
    INCOLL_INIT_FIELD_FABRIC = 1u << 6,
    INCOLL_INIT_FIELD_MGR = 1u << 7,
    INCOLL_INIT_FIELD_SECRET_FILE = 1u << 8,
    INCOLL_INIT_FIELD_HOSTS = 1u << 9,
    INCOLL_INIT_FIELD_PROGRESS_THREAD = 1u << 10,
    INCOLL_INIT_FIELD_EARLY_MAX = 1u << 11,
    INCOLL_INIT_FIELD_HOST_MAP = 1u << 12,
    INCOLL_INIT_FIELD_THREAD_MODE = 1u << 13,
    INCOLL_INIT_FIELD_OUTER_LOCK = 1u << 14,
    INCOLL_INIT_FIELD_OOB = 1u << 15,
} incoll_init_field_t;

/*
 * Thread modes, as MPI's thread levels (incoll_init_params_t.thread_mode;
 * INCOLL_THREAD_MULTIPLE when not given). The library is thread safe in
 * every mode (its own lock, its own request threads); the mode is what
 * the caller promises about its own threads:
 *   SINGLE, FUNNELED  one thread (the one that called init) makes every
 *                     call;
 *   SERIALIZED        any thread, one at a time;
 *   MULTIPLE          any threads at once, one at a time per communicator
 *                     (MPI's rule); different communicators run
 *                     concurrently. Only this mode takes an outer lock.
 */
typedef enum {
    INCOLL_THREAD_SINGLE = 0,
    INCOLL_THREAD_FUNNELED = 1,
    INCOLL_THREAD_SERIALIZED = 2,
    INCOLL_THREAD_MULTIPLE = 3,
} incoll_thread_mode_t;

/*
 * An outer lock (incoll_init_params_t.outer_lock): a lock of the caller's
 * (an MPI layer's under MPI_THREAD_MULTIPLE) that its threads hold around
 * their libincoll calls. Whenever a libincoll call blocks (waiting for
 * packets or for a request), it calls release(arg) after giving up its
 * own lock and reacquire(arg) before taking its own back, so that other
 * threads of the caller can run meanwhile and the two locks are always
 * taken in the same order (outer first). release must do nothing in a
 * thread that does not hold the outer lock (libincoll's own threads call
 * it too).
 */
typedef struct {
    void (*release)(void *arg);
    void (*reacquire)(void *arg);
    void *arg;
} incoll_outer_lock_t;

/*
 * Out-of-band bootstrap (incoll_init_params_t.oob), as UCC and SHARP take
 * it: a caller that already connects its processes (an MPI library, a
 * launcher, a test) gives the world's rank and size and two blocking
 * collectives over its own channel, and init needs no INCOLL_RANK,
 * INCOLL_SIZE or INCOLL_JOB. They are called by every rank of the world,
 * in the same order on every rank, from the thread that calls
 * incoll_init_params() or incoll_finalize(), and only there:
 *   allgather  sbuf's len bytes of every rank, in rank order, into rbuf
 *              (size * len bytes); twice in init;
 *   barrier    returns when every rank called it; once in
 *              incoll_finalize(), before the context's socket closes, so
 *              that no rank leaves while another may still need its
 *              retransmissions (may be NULL: an allgather of one byte
 *              stands in).
 * Each returns 0 on success; anything else fails init with INCOLL_ERR_IO.
 * Init agrees through them on the job's id (the one given to rank 0, by
 * the job field or INCOLL_JOB, else a random one of rank 0's: unique per
 * job, as `incoll run` makes it), checks that every rank has the same
 * size and a distinct rank and that no rank was given another job, and
 * returns the same status on every rank, after every rank's endpoint is
 * up: a rank that fails makes every rank fail, naming it. coll_info must
 * stay valid until incoll_finalize(). The fabric is still named by the
 * fabric or mgr field (or the environment).
 */
typedef struct {
    int (*allgather)(void *coll_info, const void *sbuf, void *rbuf, size_t len);
    int (*barrier)(void *coll_info);
    void *coll_info; /* passed to both */
    int rank;        /* 0..size-1 */
    int size;        /* ranks in the world */
} incoll_oob_t;

/*
 * What a caller that knows the process's identity and fabric (a launcher,
 * an MPI layer) passes to incoll_init_params() instead of setting
 * environment variables. Only the fields named in field_mask are read;
 * the others come from the environment as with incoll_init(), so the
 * struct can grow without breaking callers (new fields are added at the
 * end). Each given value is checked as its environment variable would be
 * (`incoll info` lists type and range): a bad one fails with
 * INCOLL_ERR_CONFIG naming the setting and the value. Strings are copied.
 */
typedef struct {
    uint64_t field_mask; /* incoll_init_field_t bits */
    int rank;            /* INCOLL_RANK: 0..size-1 */
    int size;            /* INCOLL_SIZE: ranks in the world */
    const char *job;     /* INCOLL_JOB: id shared by the job's ranks */
    const char *host;    /* INCOLL_HOST: host in the manager's topology */
    int local_rank;      /* INCOLL_LOCAL_RANK: rank on this node */
    int local_size;      /* INCOLL_LOCAL_SIZE: the job's ranks on it */
    const char *fabric;  /* INCOLL_FABRIC: fabric directory */
    const char *mgr;     /* INCOLL_MGR: host:port of the manager ("":
                            none, fabric.conf then) */
    /* INCOLL_SECRET_FILE: the file holding the fabric secret (`incoll
     * fabric up` writes DIR/secret); "" for none. */
    const char *secret_file;
    /* INCOLL_HOSTS: the manager topology's hosts for ranks 0, 1, ...,
     * comma-separated (rank r on entry r modulo their number), when host
     * is not given. */
    const char *hosts;
    /* INCOLL_PROGRESS_THREAD: 1 runs the nonblocking collectives in a
     * library thread blocked in poll (full overlap), 0 progresses them in
     * the caller's libincoll calls. */
    int progress_thread;
    /* INCOLL_EARLY_MAX: bytes up to which a reduce's and a gather's
     * non-roots and a bcast's and a scatter's root return early (the
     * operation completes in the background, docs/nonblocking.md); 0 off.
     * An MPI layer that checks each call's outcome on every rank before
     * returning (INCOLL_MPI_AGREE=1) sets 0. */
    size_t early_max;
    /* INCOLL_HOST_MAP: on a fabric without a manager whose fabric.conf
     * has fewer hosts than the world has ranks, the fabric.conf host of
     * ranks 0, 1, ..., comma-separated (docs/hierarchy.md). */
    const char *host_map;
    /* Added in 0.2. */
    incoll_thread_mode_t thread_mode; /* INCOLL_INIT_FIELD_THREAD_MODE */
    incoll_outer_lock_t outer_lock;   /* INCOLL_INIT_FIELD_OUTER_LOCK:
                                         MULTIPLE only */
    incoll_oob_t oob; /* INCOLL_INIT_FIELD_OOB: rank and size from it (a
                         rank or size also given must agree) */
} incoll_init_params_t;

/*
 * incoll_init() with the identity given by params (NULL: all from the
 * environment). A bad value, given or from the environment, fails with
 * INCOLL_ERR_CONFIG and an error message naming it. A macro: it passes
 * this header's version to incoll_init_version().
 */
INCOLL_API
incoll_status_t(incoll_init_params)(const incoll_init_params_t *params,
                                    incoll_ctx_h *ctx_p);
#define incoll_init_params(params, ctx_p)                                      \
    incoll_init_version(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, (params),  \
                        (ctx_p))

/*
 * incoll_init_params() for a program built against incoll.h version
 * major.minor: INCOLL_ERR_VERSION, with an error message naming both
 * versions, when this library cannot run it (another major version, or an
 * older minor one that lacks what the header declares). The
 * incoll_init() and incoll_init_params() macros call it; a binding that
 * loads the library at run time passes the version it was written for.
 */
INCOLL_API incoll_status_t
incoll_init_version(unsigned major, unsigned minor,
                    const incoll_init_params_t *params, incoll_ctx_h *ctx_p);

/* Frees the context and every communicator still attached to it. */
INCOLL_API incoll_status_t incoll_finalize(incoll_ctx_h ctx);

/* The communicator of all ranks. Owned by the context: do not destroy it. */
INCOLL_API incoll_status_t incoll_comm_world(incoll_ctx_h ctx,
                                             incoll_comm_h *comm_p);
INCOLL_API incoll_status_t incoll_comm_rank(incoll_comm_h comm, int *rank_p);
INCOLL_API incoll_status_t incoll_comm_size(incoll_comm_h comm, int *size_p);

/*
 * Makes new communicators, as MPI_Comm_split and MPI_Comm_create_group do.
 * Collective over comm: every member calls it. Ranks with the same color
 * form a communicator, ordered by key then by rank in comm; color
 * INCOLL_UNDEFINED gets no communicator (*newcomm_p = NULL). The fabric
 * group of the new communicator is made by the manager; when the fabric
 * cannot host it, the communicator still works through host-based
 * algorithms (INCOLL_LOG_LEVEL=info says why once).
 */
#define INCOLL_UNDEFINED (-32766)
INCOLL_API incoll_status_t incoll_comm_split(incoll_comm_h comm, int color,
                                             int key, incoll_comm_h *newcomm_p);
/* ranks: nranks distinct ranks of comm, in the order of the new
 * communicator. Collective over those ranks only; others must not call.
 * Not ordered with comm's collectives: it does not wait for comm's
 * outstanding nonblocking requests.
 */
INCOLL_API incoll_status_t incoll_comm_create(incoll_comm_h comm, int nranks,
                                              const int *ranks,
                                              incoll_comm_h *newcomm_p);
/* Releases the communicator and its fabric group on every AN. */
INCOLL_API incoll_status_t incoll_comm_destroy(incoll_comm_h comm);
/* 1 if comm's collectives run in the network, 0 if on the hosts; why_p (may
 * be NULL) gets a constant reason when 0. */
INCOLL_API int incoll_comm_offloaded(incoll_comm_h comm, const char **why_p);

/*
 * Where a collective ran, and why not in the network: what
 * incoll_comm_where() and incoll_req_where() report. A collective counts
 * as in the network (in_network 1) when it ran there from start to end,
 * natively or over the in-network allreduce, and also when the
 * communicator has one rank (nothing to exchange).
 */
typedef enum {
    INCOLL_WHY_NONE = 0,    /* no collective completed yet */
    INCOLL_WHY_NETWORK,     /* ran in the network */
    INCOLL_WHY_ALONE,       /* one rank: nothing to exchange (in_network 1) */
    INCOLL_WHY_NO_GROUP,    /* the communicator has no fabric group, or lost
                               it (text: incoll_comm_offloaded's reason) */
    INCOLL_WHY_UNSUPPORTED, /* its group cannot run this collective with
                               this op and dtype */
    INCOLL_WHY_TOO_LARGE,   /* a gather or scatter larger than the
                               in-network allreduce carries for it */
    INCOLL_WHY_ALGO,        /* the caller asked for a host-based algorithm */
    INCOLL_WHY_RECOVERED,   /* the group failed during the call: the result
                               came from the hosts */
    INCOLL_WHY_COUNT
} incoll_why_t;

typedef struct {
    int in_network; /* 1 in the network, 0 on the hosts */
    incoll_why_t why;
    char text[160]; /* why in words (incoll_why_string, and for
                       INCOLL_WHY_NO_GROUP the communicator's reason) */
} incoll_where_t;

/* A constant text for why. */
INCOLL_API const char *incoll_why_string(incoll_why_t why);

/*
 * Per call: where the last blocking collective that returned on comm (in
 * this process) ran. Call it after the collective, from the thread that
 * made it, before the next collective of comm (MPI's rule of one thread at
 * a time per communicator makes that well defined). INCOLL_WHY_NONE
 * before any.
 */
INCOLL_API incoll_status_t incoll_comm_where(incoll_comm_h comm,
                                             incoll_where_t *where_p);

/*
 * Counts one collective of comm that the caller ran itself instead of
 * through the library: a front end that gave a call to its MPI library's
 * own algorithms (a user-defined op, a derived datatype, its tuning table,
 * a communicator left after a failure). The per-job and per-group counts
 * the manager serves (operations in software, fallbacks by reason) then
 * include it, as they include the library's own calls. why is the reason:
 * INCOLL_WHY_UNSUPPORTED (the library cannot run it), INCOLL_WHY_ALGO (the
 * caller chose not to), INCOLL_WHY_NO_GROUP or INCOLL_WHY_RECOVERED (the
 * fabric gave no group or failed); other values are
 * INCOLL_ERR_INVALID_ARG. Counted on comm's rank 0 alone, like the
 * library's own calls, so every rank may call it. Cheap enough for every
 * call: an atomic count, with no system call and (but once every few
 * dozen calls) without the library's lock.
 */
INCOLL_API incoll_status_t incoll_comm_count_elsewhere(incoll_comm_h comm,
                                                       incoll_why_t why);

/*
 * Reduces count elements of dtype from every rank of comm with op and
 * leaves the result in recvbuf on every rank. sendbuf may be
 * INCOLL_IN_PLACE. Blocks until the result is in or the operation failed;
 * on failure recvbuf's contents are unspecified but sendbuf (or, in place,
 * nothing the caller can rely on) is untouched. Every rank must call the
 * collectives of a communicator in the same order. With a manager, when
 * the fabric fails every rank still returns the correct result, or
 * INCOLL_ERR_GROUP_FAILED when the ranks could not recover together; the
 * communicator then fails every later call (docs/failures.md).
 */
INCOLL_API incoll_status_t incoll_allreduce(incoll_comm_h comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t count, incoll_dtype_t dtype,
                                            incoll_op_t op);

/*
 * Allreduce algorithms. INCOLL_ALGO_AUTO (what incoll_allreduce uses) runs
 * in the network when the communicator has a fabric group and falls back to
 * a host-based algorithm otherwise. The others force one algorithm: the
 * in-network one, or a host-based one over the same UDP transport and loss
 * recovery (benchmarks compare them side by side).
 */
typedef enum {
    INCOLL_ALGO_AUTO = 0,
    INCOLL_ALGO_INC = 1,  /* in the network */
    INCOLL_ALGO_RD = 2,   /* recursive doubling */
    INCOLL_ALGO_RING = 3, /* ring reduce-scatter + allgather */
    INCOLL_ALGO_RABENSEIFNER =
        4, /* halving reduce-scatter + doubling allgather */
    INCOLL_ALGO_COUNT
} incoll_algo_t;

/* incoll_allreduce with a chosen algorithm. */
INCOLL_API incoll_status_t incoll_allreduce_algo(
    incoll_comm_h comm, incoll_algo_t algo, const void *sendbuf, void *recvbuf,
    size_t count, incoll_dtype_t dtype, incoll_op_t op);

/*
 * Where a call should run: the selection table (docs/tuning.md). A front
 * end that can also run a collective on its own implementation (an MPI
 * layer, an MPI library's component) asks per call, and every front end
 * decides alike. The context loads the table once, at init: from
 * INCOLL_TUNE_FILE, else the table the manager hands to the job, else
 * DIR/tune.conf of the fabric directory, else the built-in table;
 * INCOLL_TUNE's entries go before it; a table whose shape line does not
 * match the job's set aside. Init then compares a hash of it across the
 * world's ranks: where they differ, every rank follows rank 0's (a rank
 * whose own differs says so, naming both hashes and sources), so a call's
 * answer is the same on every rank of a communicator.
 */
typedef enum {
    INCOLL_COLL_ALLREDUCE = 0,
    INCOLL_COLL_REDUCE = 1,
    INCOLL_COLL_BCAST = 2,
    INCOLL_COLL_BARRIER = 3,
    INCOLL_COLL_ALLGATHER = 4,
    INCOLL_COLL_GATHER = 5,
    INCOLL_COLL_SCATTER = 6,
    INCOLL_COLL_REDUCE_SCATTER_BLOCK = 7,
    INCOLL_COLL_REDUCE_SCATTER = 8,
    INCOLL_COLL_COUNT
} incoll_coll_t;

typedef enum {
    INCOLL_FORM_BLOCKING = 0,
    INCOLL_FORM_NB = 1,         /* the MPI_I... calls */
    INCOLL_FORM_PERSISTENT = 2, /* the ..._init calls, decided at init */
} incoll_form_t;

typedef enum {
    INCOLL_PATH_INC = 0,  /* libincoll (in the network, or its host-based
                             algorithms when the group cannot) */
    INCOLL_PATH_MPI = 1,  /* the caller's own implementation */
    INCOLL_PATH_HOST = 2, /* libincoll's host-based algorithm algo
                             (incoll_allreduce_algo) */
} incoll_path_t;

typedef struct {
    incoll_path_t path;
    incoll_algo_t algo; /* INCOLL_PATH_HOST: the algorithm; else AUTO */
    int entry;          /* the deciding entry, -1 none (then INC) */
} incoll_choice_t;

/*
 * The path of a call of coll in form on comm: bytes as the table counts
 * them (the whole vector of an allreduce, reduce and bcast; one rank's
 * block of an allgather, gather and scatter; one rank's result of a
 * reduce_scatter(_block); 0 for a barrier), dtype the reduction's element
 * type (INCOLL_DTYPE_COUNT for a collective that does not reduce). No
 * lock, no allocation: a scan of the table. choice_p (may be NULL) gets
 * the algorithm and the entry. Bad arguments give INCOLL_PATH_INC.
 */
INCOLL_API incoll_path_t incoll_select(incoll_comm_h comm, incoll_coll_t coll,
                                       incoll_form_t form, uint64_t bytes,
                                       incoll_dtype_t dtype,
                                       incoll_choice_t *choice_p);
/* The same for a communicator of nranks ranks the caller has not made
 * yet (a front end that creates libincoll communicators lazily). */
INCOLL_API incoll_path_t incoll_ctx_select(incoll_ctx_h ctx, int nranks,
                                           incoll_coll_t coll,
                                           incoll_form_t form, uint64_t bytes,
                                           incoll_dtype_t dtype,
                                           incoll_choice_t *choice_p);

/*
 * Makes every rank of the world follow the same table: the ranks' tables
 * compared, rank 0's taken where they differ (each rank that differed
 * warns, naming both). Collective over the world, at most once per
 * context (later calls return at once). Without a manager libincoll does
 * it inside incoll_init; with one a front end whose ranks may be
 * configured differently calls it right after incoll_init, before any
 * collective (the PMPI layer and coll/incoll do).
 */
INCOLL_API incoll_status_t incoll_ctx_agree_table(incoll_ctx_h ctx);

/* The longest shape note with its NUL: what the context's table holds. */
#define INCOLL_TABLE_NOTE_LEN 512

/* The table in force in a context. (Before 0.5 shape_note had 200 bytes
 * and clipped longer notes.) */
typedef struct {
    uint64_t hash;     /* of what decides: equal on every rank */
    int entries;       /* in force */
    int shape_matches; /* 1 the shape line matches the job, 0 it did not
                          (its entries set aside), -1 no shape ranges */
    char source[256];  /* where its entries came from */
    char shape[128];   /* its shape line, "" none */
    char shape_note[INCOLL_TABLE_NOTE_LEN]; /* the comparison with the job,
                                               word by word, whole */
    char override[256];                     /* INCOLL_TUNE as given, "" none */
} incoll_table_info_t;
/*
 * Fills *info_p; info_size is the size of the caller's
 * incoll_table_info_t (a program built against 0.4's header passes that
 * one's and gets its layout); another size is INCOLL_ERR_INVALID_ARG. The
 * macro incoll_ctx_table passes it. Since minor version 5 (the function
 * incoll_ctx_table of 0.3 and 0.4, which fills 0.4's layout, stays exported
 * for the programs built against it).
 */
INCOLL_API incoll_status_t incoll_ctx_table_sized(incoll_ctx_h ctx,
                                                  incoll_table_info_t *info_p,
                                                  size_t info_size);
#define incoll_ctx_table(ctx, info_p)                                          \
    incoll_ctx_table_sized((ctx), (info_p), sizeof(*(info_p)))
/* Entry entry of ctx's table in words, "bcast:blocking 0-64K mpi
 * (tune.conf:7)"; -1: the default. */
INCOLL_API incoll_status_t incoll_table_entry(incoll_ctx_h ctx, int entry,
                                              char *buf, size_t len);

/*
 * The other collectives, with MPI's meaning (MPI_Reduce, MPI_Bcast,
 * MPI_Barrier, MPI_Allgather, MPI_Gather, MPI_Scatter,
 * MPI_Reduce_scatter_block). Every rank of comm calls them in the same
 * order as its other collectives, with the same count, bytes, dtype, op and
 * root. bytes is the size of one rank's block. They run in the network when
 * the communicator's group can, else on the hosts (host-based algorithms
 * over the same UDP transport and loss recovery); they block until done
 * and return the correct result or an error in bounded time. Buffers that
 * overlap other than in place are refused (INCOLL_ERR_INVALID_ARG).
 *
 * In place (INCOLL_IN_PLACE), as in MPI:
 *   reduce          sendbuf at the root: recvbuf holds its input.
 *   allgather       sendbuf: rank r's block is already at recvbuf + r*bytes.
 *   gather          sendbuf at the root: its block is already in recvbuf.
 *   scatter         recvbuf at the root: its block stays in sendbuf.
 *   reduce_scatter  sendbuf: recvbuf holds the size*count input and gets
 *                   the result at its start.
 * Arguments significant only at the root (reduce's recvbuf, gather's
 * recvbuf, scatter's sendbuf) may be NULL elsewhere.
 */
INCOLL_API incoll_status_t incoll_reduce(incoll_comm_h comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t count, incoll_dtype_t dtype,
                                         incoll_op_t op, int root);
INCOLL_API incoll_status_t incoll_bcast(incoll_comm_h comm, void *buf,
                                        size_t bytes, int root);
INCOLL_API incoll_status_t incoll_barrier(incoll_comm_h comm);
INCOLL_API incoll_status_t incoll_allgather(incoll_comm_h comm,
                                            const void *sendbuf, void *recvbuf,
                                            size_t bytes);
INCOLL_API incoll_status_t incoll_gather(incoll_comm_h comm,
                                         const void *sendbuf, void *recvbuf,
                                         size_t bytes, int root);
INCOLL_API incoll_status_t incoll_scatter(incoll_comm_h comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t bytes, int root);
/* count elements per rank: rank r gets block r of the reduced size*count
 * elements (MPI_Reduce_scatter_block). */
INCOLL_API incoll_status_t incoll_reduce_scatter(incoll_comm_h comm,
                                                 const void *sendbuf,
                                                 void *recvbuf, size_t count,
                                                 incoll_dtype_t dtype,
                                                 incoll_op_t op);

/*
 * Streaming (docs/streaming.md). Every communicator with a fabric group
 * has a small share of slots on its ANs for low latency; a large vector
 * goes faster when the group locks the tree and streams through the ANs'
 * shared streaming pools. incoll_allreduce locks by itself for vectors of
 * INCOLL_STREAM_THRESHOLD bytes or more; these calls let the caller hold
 * a lock over a phase of large operations instead.
 *
 * incoll_comm_lock asks for the lock now, for nops operations (1..65535;
 * 0: until incoll_comm_unlock). Collective over comm, in order with its
 * other collectives (it waits for comm's outstanding requests first). It
 * returns INCOLL_OK both when the lock is granted (*granted_p 1) and when
 * it is refused (*granted_p 0: another group holds the tree, the ANs have
 * no streaming pool, the communicator has no fabric group): a refusal is
 * not an error, the later operations simply run on the slots, and
 * INCOLL_LOG_LEVEL=info says why once per communicator. granted_p may be
 * NULL. Every member gets the same answer (a group that fails during the
 * round is recovered by the next operation). While the lock is held, every
 * in-network operation larger than what the group's slots carry in one
 * round (slots x payload bytes, 64 KiB with the default share) streams,
 * whatever INCOLL_STREAM_THRESHOLD says, and counts toward nops; smaller
 * ones keep the slots and do not count. After nops such operations the
 * lock goes by itself. A lock held when incoll_comm_lock is called again
 * is let go first. Errors: INCOLL_ERR_INVALID_ARG (nops above 65535), or
 * the group's failure when the lock round got no answer and no manager
 * can rebuild the group.
 *
 * incoll_comm_unlock lets the lock go now (collective; waits for comm's
 * outstanding requests first); INCOLL_OK also when comm holds none. A
 * lock still held when a communicator is destroyed goes with its group
 * (the manager removes it from the ANs); one of a fabric without a manager
 * goes to the next group that asks once it is quiet for
 * INCOLL_AGG_LOCK_IDLE_MS.
 */
INCOLL_API incoll_status_t incoll_comm_lock(incoll_comm_h comm, unsigned nops,
                                            int *granted_p);
INCOLL_API incoll_status_t incoll_comm_unlock(incoll_comm_h comm);

/*
 * Nonblocking and persistent collectives.
 *
 * incoll_iX takes the arguments of incoll_X and returns at once with a
 * request in *req_p; the buffers belong to the operation until it is
 * complete. Requests of one communicator complete in the order they were
 * started (every rank starts a communicator's collectives, blocking or
 * not, in the same order); requests of different communicators are
 * independent. A blocking collective waits for the communicator's
 * earlier requests first.
 *
 * Progress: every libincoll call progresses the outstanding requests; an
 * in-network allreduce runs on the fabric while the caller computes, the
 * host-based algorithms and the other collectives run in a thread of the
 * communicator. With INCOLL_PROGRESS_THREAD=1 every request runs in that
 * thread, which blocks in poll while the network works (no spinning), so
 * the computation of the caller overlaps all of it.
 *
 * Threads: any number of threads may call libincoll, one at a time per
 * communicator (MPI's rule); different communicators run concurrently.
 */
typedef struct incoll_req *incoll_req_h;

/* *done_p is 1 when the request completed: the return value is then the
 * operation's status and a nonpersistent request is released (a
 * persistent one becomes inactive). While it runs, *done_p is 0 and the
 * return value INCOLL_OK. */
INCOLL_API incoll_status_t incoll_req_test(incoll_req_h req, int *done_p);
/* Waits until the request completed; returns the operation's status and
 * releases a nonpersistent request (a persistent one becomes inactive). */
INCOLL_API incoll_status_t incoll_req_wait(incoll_req_h req);
/*
 * incoll_req_wait() for at most timeout_ns nanoseconds: the operation's
 * status when it completed in time (and the request is released as by
 * incoll_req_wait), else INCOLL_WAIT_TIMEOUT: the request is still
 * running and still the caller's, to test, wait for or free later. 0
 * polls once. Everything outstanding progresses while it waits.
 */
INCOLL_API incoll_status_t incoll_req_wait_timeout(incoll_req_h req,
                                                   uint64_t timeout_ns);
/*
 * Explicit progress: one turn of the library, without blocking. Feeds
 * every outstanding request of the context the packets that came in and
 * runs its timers, and hands completed ones over (for incoll_req_test).
 * For a front end that polls its own engine and libincoll in one loop.
 */
INCOLL_API incoll_status_t incoll_progress(incoll_ctx_h ctx);
/*
 * 1 when req completed (incoll_req_test and incoll_req_wait then return
 * at once), 0 while it runs. Takes no lock and progresses nothing: for a
 * front end that looks at many requests after one incoll_progress().
 */
INCOLL_API int incoll_req_completed(incoll_req_h req);
/*
 * Per request: where req's collective ran, once it completed: for a
 * nonpersistent request after its completion (incoll_req_completed)
 * and before the test or wait that releases it; for a persistent one
 * whenever it is inactive after a start (its last run).
 * INCOLL_INPROGRESS while it runs; INCOLL_WHY_NONE for a persistent
 * request never started.
 */
INCOLL_API incoll_status_t incoll_req_where(incoll_req_h req,
                                            incoll_where_t *where_p);
/* Starts an inactive persistent request again; INCOLL_ERR_BUSY while it
 * is active. */
INCOLL_API incoll_status_t incoll_req_start(incoll_req_h req);
/* Frees a request: a persistent one (after waiting for it when active), or
 * a nonpersistent one the caller will not test (it completes in the
 * background and is released then, as MPI_Request_free). */
INCOLL_API incoll_status_t incoll_req_free(incoll_req_h req);

INCOLL_API incoll_status_t incoll_iallreduce(incoll_comm_h comm,
                                             const void *sendbuf, void *recvbuf,
                                             size_t count, incoll_dtype_t dtype,
                                             incoll_op_t op,
                                             incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_ireduce(incoll_comm_h comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t count, incoll_dtype_t dtype,
                                          incoll_op_t op, int root,
                                          incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_ibcast(incoll_comm_h comm, void *buf,
                                         size_t bytes, int root,
                                         incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_ibarrier(incoll_comm_h comm,
                                           incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_iallgather(incoll_comm_h comm,
                                             const void *sendbuf, void *recvbuf,
                                             size_t bytes, incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_igather(incoll_comm_h comm,
                                          const void *sendbuf, void *recvbuf,
                                          size_t bytes, int root,
                                          incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_iscatter(incoll_comm_h comm,
                                           const void *sendbuf, void *recvbuf,
                                           size_t bytes, int root,
                                           incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_ireduce_scatter(
    incoll_comm_h comm, const void *sendbuf, void *recvbuf, size_t count,
    incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p);

/*
 * incoll_iallreduce and incoll_allreduce_init with a chosen algorithm
 * (incoll_allreduce_algo's): the request runs that host-based algorithm
 * (or the network, INCOLL_ALGO_INC; INCOLL_ALGO_AUTO is incoll_iallreduce)
 * in its turn among the communicator's calls. What a selection table's
 * host-algorithm entry gives a nonblocking or persistent allreduce
 * (choice.algo of incoll_select). INCOLL_ERR_INVALID_ARG for an algo not
 * of incoll_algo_t. Since minor version 4.
 */
INCOLL_API incoll_status_t incoll_iallreduce_algo(
    incoll_comm_h comm, incoll_algo_t algo, const void *sendbuf, void *recvbuf,
    size_t count, incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_allreduce_init_algo(
    incoll_comm_h comm, incoll_algo_t algo, const void *sendbuf, void *recvbuf,
    size_t count, incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p);

/* Persistent forms: the same arguments, an inactive request in *req_p
 * that incoll_req_start() starts as often as wanted (the arguments are
 * checked here once) and incoll_req_free() frees. */
INCOLL_API incoll_status_t incoll_allreduce_init(
    incoll_comm_h comm, const void *sendbuf, void *recvbuf, size_t count,
    incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_reduce_init(
    incoll_comm_h comm, const void *sendbuf, void *recvbuf, size_t count,
    incoll_dtype_t dtype, incoll_op_t op, int root, incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_bcast_init(incoll_comm_h comm, void *buf,
                                             size_t bytes, int root,
                                             incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_barrier_init(incoll_comm_h comm,
                                               incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_allgather_init(incoll_comm_h comm,
                                                 const void *sendbuf,
                                                 void *recvbuf, size_t bytes,
                                                 incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_gather_init(incoll_comm_h comm,
                                              const void *sendbuf,
                                              void *recvbuf, size_t bytes,
                                              int root, incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_scatter_init(incoll_comm_h comm,
                                               const void *sendbuf,
                                               void *recvbuf, size_t bytes,
                                               int root, incoll_req_h *req_p);
INCOLL_API incoll_status_t incoll_reduce_scatter_init(
    incoll_comm_h comm, const void *sendbuf, void *recvbuf, size_t count,
    incoll_dtype_t dtype, incoll_op_t op, incoll_req_h *req_p);

/*
 * Added in 0.4: what a front end of libincoll (an MPI layer, an MPI
 * component, a launcher) needs besides the collectives, so that it reads
 * incoll's settings, logs and checks a fabric through this header alone.
 */

/* Log levels, as INCOLL_LOG_LEVEL names them. */
typedef enum {
    INCOLL_LOG_ERROR = 0,
    INCOLL_LOG_WARN = 1,
    INCOLL_LOG_INFO = 2,
    INCOLL_LOG_DEBUG = 3,
    INCOLL_LOG_TRACE = 4
} incoll_log_level_t;

/* The level INCOLL_LOG_LEVEL sets (default INCOLL_LOG_WARN): a line of a
 * higher level is not wanted. */
INCOLL_API int incoll_log_level(void);
/* One line on stderr, "incoll <who>: <level>: <text>", as libincoll's own
 * lines are; printed whatever the level in force (the caller decides with
 * incoll_log_level(), or prints it because its own verbose switch asks). */
INCOLL_API void incoll_log(incoll_log_level_t level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Who is speaking in every line of this process ("rank 3"); copied. */
INCOLL_API void incoll_log_set_name(const char *name);

/*
 * The value of the setting called name (an INCOLL_... variable that
 * `incoll info` lists), as libincoll reads it: text_p (may be NULL) gets
 * its text (the environment's when given and not empty, else the
 * default; "" when unset), num_p (may be NULL) its number (an integer, a
 * size in bytes, a boolean 0 or 1, an enumeration's index, a duration in
 * nanoseconds; 0 when unset). INCOLL_ERR_NOT_FOUND for no such setting,
 * INCOLL_ERR_CONFIG for a value that does not parse (then nothing is
 * written; incoll_settings_check() says why).
 */
INCOLL_API incoll_status_t incoll_setting_value(const char *name,
                                                int64_t *num_p,
                                                const char **text_p);
/*
 * Checks every setting of components (comma-separated, as `incoll info`
 * groups them: "host", "mpi", ...; settings of "all" always): INCOLL_OK,
 * or INCOLL_ERR_CONFIG with a message naming the first bad one in err.
 */
INCOLL_API incoll_status_t incoll_settings_check(const char *components,
                                                 char *err, size_t len);
/*
 * Loads the selection table incoll_init would load (INCOLL_TUNE_FILE,
 * else the fabric's tune.conf; INCOLL_TUNE before it) without making a
 * context: INCOLL_OK, or INCOLL_ERR_CONFIG with the file, line and cause
 * in err. For a front end that turns offload off on every rank when one
 * rank's table is bad.
 */
INCOLL_API incoll_status_t incoll_table_check(char *err, size_t len);
/* Names, as the selection table writes them ("mpi", "ring",
 * "persistent"); "?" for a value out of range. */
INCOLL_API const char *incoll_path_name(incoll_path_t path);
INCOLL_API const char *incoll_algo_name(incoll_algo_t algo);
INCOLL_API const char *incoll_form_name(incoll_form_t form);

/*
 * The fabric in directory dir (DIR/fabric.conf, as `incoll fabric up`
 * writes it): nhosts_p gets its number of hosts, here_p (may be NULL)
 * the host of an emulated fabric whose network namespace this process
 * runs in (-1: none, or not an emulated fabric). INCOLL_ERR_CONFIG or
 * INCOLL_ERR_IO with the cause (file and line) in err.
 */
INCOLL_API incoll_status_t incoll_fabric_hosts(const char *dir, int *nhosts_p,
                                               int *here_p, char *err,
                                               size_t len);

#ifdef __cplusplus
}
#endif
#endif /* INCOLL_H */
