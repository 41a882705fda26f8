/*
 * The heart of libincoll_mpi: bootstrap from MPI, knobs, per-communicator
 * state, the offload paths and their fallback decision, statistics and
 * cleanup. See mpi_layer.h for the parts and docs/mpi.md for the user's
 * view.
 *
 * Two rules keep every answer right:
 *  - A call is offloaded only when every rank of the communicator will
 *    offload it too. Whether a communicator is offloaded is agreed once,
 *    collectively, when its state is made; the per-call checks (datatype,
 *    op, size, collective enabled) depend only on arguments MPI requires to
 *    match on every rank and on knobs rank 0 broadcast at MPI_Init.
 *  - An offloaded call is one libincoll collective, and libincoll returns
 *    on every rank the right result once, or an error, in bounded time
 *    (after a failure its members agree among themselves on the recovery:
 *    a new group or its host-based algorithms). So INCOLL_OK ends the call
 *    with no MPI call of the layer's own; an error, which other ranks may
 *    not share, goes to the communicator's MPI error handler and is never
 *    redone with PMPI_ on this rank alone. INCOLL_MPI_AGREE=1 (for
 *    fabrics without a manager, where libincoll cannot recover) adds the
 *    old agreement: one PMPI_Allreduce of an int after each call, and a
 *    redo with PMPI_ on every rank when any failed.
 *
 * The layer keeps process-wide state (the MPI library it wraps is itself a
 * process-wide singleton). Under MPI_THREAD_MULTIPLE one lock guards it
 * (mpi_layer_enter), which libincoll gives up whenever it blocks, so that
 * threads running collectives on different communicators do not wait for
 * each other's.
 */
#include "mpi/mpi_layer.h"

#include "incoll.h"
#include "host/host_colls.h"
#include "host/req.h"

#include "common/fabric_conf.h"
#include "common/knobs.h"
#include "common/log.h"

#include <inttypes.h>
#include <pthread.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

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
    R_COUNT
} reason_t;

static const char *const reason_names[R_COUNT] = {
    "off",   "coll", "args",   "dtype", "op",
    "bytes", "comm", "failed", "left",  "unequal"};

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
static const char *const coll_names[MPI_COLL_COUNT] = {
    "allreduce",     "reduce", "bcast",   "barrier",
    "allgather",     "gather", "scatter", "reduce_scatter_block",
    "reduce_scatter"};

/* The MPI names of the collectives, for messages. */
static const char *const mpi_names[MPI_COLL_COUNT] = {
    "Allreduce",     "Reduce", "Bcast",   "Barrier",
    "Allgather",     "Gather", "Scatter", "Reduce_scatter_block",
    "Reduce_scatter"};

/* Datatype kinds, after MPI's groups of basic types (MPI 4.0, 6.9.2). */
enum {
    K_CINT = 1, /* C integer, signed: arithmetic, logical and bitwise ops */
    K_CUINT,    /* C integer, unsigned */
    K_FINT,     /* Fortran integer: arithmetic and bitwise ops */
    K_FLOAT,    /* floating point: arithmetic ops */
    K_BOOL,     /* C bool: logical ops */
    K_BYTE,     /* MPI_BYTE: bitwise ops */
    K_BCAST,    /* any other contiguous predefined type: broadcast only */
};

typedef struct {
    MPI_Datatype dt;
    int kind;
    int size;
    incoll_dtype_t idt; /* valid unless kind == K_BCAST */
} dt_entry_t;

#define DT_MAX 64

/* MPI's pair types for MINLOC and MAXLOC (MPI 4.0, 6.9.4): a value and an
 * int index, laid out as the C struct {T value; int index;}. */
typedef struct {
    MPI_Datatype dt;
    incoll_dtype_t vdt; /* the value's type in incoll */
    int vsize;          /* bytes of the value */
    size_t ioff;        /* offset of the index in a pair */
    size_t extent;      /* bytes of one pair, padding included */
} pair_entry_t;

#define PAIR_MAX 8

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
} mpi_cfg_t;

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
    void *scratch; /* saved inputs (INCOLL_MPI_AGREE=1), MINLOC pairs */
    size_t scratch_len;
    uint64_t key; /* the MPI_Comm handle, in the lookup table */
    struct comm_state *next;
    struct comm_state *prev;
} comm_state_t;

static struct {
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
    mpi_cfg_t cfg;
    int nsetups;     /* communicators set up so far */
    int keyval;      /* per-communicator state */
    int self_keyval; /* on MPI_COMM_SELF: its deletion is MPI_Finalize */
    incoll_ctx_h ctx;
    incoll_comm_h world;
    dt_entry_t dts[DT_MAX];
    int ndts;
    pair_entry_t pairs[PAIR_MAX];
    int npairs;
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
    /* Reused by every call: bcast's zeros (never written, so they stay
     * zero) and the discarded results of reduce's non-roots and bcast's
     * root. Grown, never shrunk: no allocation once the sizes repeat. */
    void *zeros;
    size_t zeros_len;
    void *sink;
    size_t sink_len;
    int errcode[ERRCODE_MAX];
    unsigned long offloaded[MPI_COLL_COUNT]; /* completed in the network */
    unsigned long hosts[MPI_COLL_COUNT];     /* by libincoll on the hosts */
    unsigned long errors[MPI_COLL_COUNT];    /* raised as MPI errors */
    /* Of the calls given to libincoll: nonblocking ones, and starts of
     * persistent ones (mpi_nb.c). */
    unsigned long nb[MPI_COLL_COUNT];
    unsigned long persistent[MPI_COLL_COUNT];
    unsigned long passed[MPI_COLL_COUNT][R_COUNT];
} L = {.keyval = MPI_KEYVAL_INVALID, .self_keyval = MPI_KEYVAL_INVALID};

/* A state for communicators whose own state could not be allocated: it
 * says "not offloaded" and is never freed, so such a rank still answers
 * consistently after the collective setup. */
static comm_state_t nomem_state = {.why = "out of memory in the MPI layer"};

/* Verbose lines are printed whatever INCOLL_LOG_LEVEL says. */
#define verbose(...)                                                           \
    do {                                                                       \
        if (L.cfg.verbose)                                                     \
            log_emit(LOG_LEVEL_INFO, __VA_ARGS__);                             \
    } while (0)

static void errcodes_init(void);

static void pass(mpi_coll_t coll, reason_t why)
{
    L.passed[coll][why]++;
}

/* ------------------------------------------------------------------ */
/* Communicator lookup                                                 */

/* The handle's bits: a pointer in Open MPI, an int in MPICH. */
static uint64_t comm_key(MPI_Comm comm)
{
    uint64_t k = 0;
    memcpy(&k, &comm, sizeof(comm) < sizeof(k) ? sizeof(comm) : sizeof(k));
    return k;
}

static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

static comm_state_t *table_find(uint64_t key)
{
    if (L.table_cap == 0)
        return NULL;
    for (size_t i = slot_of(key, L.table_cap);;
         i = (i + 1) & (L.table_cap - 1)) {
        if (L.table[i].st == NULL)
            return NULL;
        if (L.table[i].key == key)
            return L.table[i].st;
    }
}

/* Adds key -> st (at setup, not per call). Returns 0, or -1 when out of
 * memory (the caller then finds the state through its attribute). */
static int table_put(uint64_t key, comm_state_t *st)
{
    size_t i;

    if ((L.table_n + 1) * 2 > L.table_cap) {
        size_t cap = L.table_cap ? L.table_cap * 2 : 64;
        struct comm_slot *t = calloc(cap, sizeof(*t)), *old = L.table;
        if (t == NULL)
            return -1;
        for (size_t j = 0; j < L.table_cap; j++) {
            if (old[j].st == NULL)
                continue;
            for (i = slot_of(old[j].key, cap); t[i].st; i = (i + 1) & (cap - 1))
                ;
            t[i] = old[j];
        }
        L.table = t;
        L.table_cap = cap;
        free(old);
    }
    for (i = slot_of(key, L.table_cap); L.table[i].st;
         i = (i + 1) & (L.table_cap - 1)) {
        if (L.table[i].key == key) {
            L.table[i].st = st; /* a handle MPI reused */
            return 0;
        }
    }
    L.table[i].key = key;
    L.table[i].st = st;
    L.table_n++;
    return 0;
}

/* Removes key, moving later entries of its probe run back so that lookups
 * never stop at the hole. */
static void table_del(uint64_t key)
{
    size_t mask = L.table_cap - 1, i, j;

    if (L.table_cap == 0)
        return;
    for (i = slot_of(key, L.table_cap);; i = (i + 1) & mask) {
        if (L.table[i].st == NULL)
            return;
        if (L.table[i].key == key)
            break;
    }
    L.table[i].st = NULL;
    L.table_n--;
    for (j = (i + 1) & mask; L.table[j].st; j = (j + 1) & mask) {
        size_t home = slot_of(L.table[j].key, L.table_cap);
        /* Move j into the hole i unless its home lies cyclically in
         * (i, j]. */
        if ((j > i && (home <= i || home > j)) ||
            (j < i && (home <= i && home > j))) {
            L.table[i] = L.table[j];
            L.table[j].st = NULL;
            i = j;
        }
    }
}

/* ------------------------------------------------------------------ */
/* Knobs                                                               */

static int32_t parse_colls(const char *text)
{
    char buf[256], *save = NULL, *tok;
    int32_t mask = 0;

    snprintf(buf, sizeof(buf), "%s", text ? text : "");
    for (tok = strtok_r(buf, ", ", &save); tok;
         tok = strtok_r(NULL, ", ", &save)) {
        int found = 0;
        if (strcmp(tok, "all") == 0) {
            mask = (1 << MPI_COLL_COUNT) - 1;
            continue;
        }
        if (strcmp(tok, "none") == 0) {
            mask = 0;
            continue;
        }
        for (int c = 0; c < MPI_COLL_COUNT; c++) {
            if (strcmp(tok, coll_names[c]) == 0) {
                mask |= 1 << c;
                found = 1;
            }
        }
        if (!found)
            incoll_warn("mpi: INCOLL_MPI_COLLS: unknown collective '%s' "
                        "(known: allreduce, reduce, bcast, barrier, "
                        "allgather, gather, scatter, reduce_scatter_block, "
                        "reduce_scatter, all, none)",
                        tok);
    }
    return mask;
}

static void cfg_read(mpi_cfg_t *cfg)
{
    char err[512];

    memset(cfg, 0, sizeof(*cfg));
    /* The one rule for a bad setting: an error naming it, and here MPI's
     * own collectives run (the application still works). */
    if (settings_check("mpi", err, sizeof(err)) != INCOLL_OK) {
        incoll_error("mpi: %s: offload off", err);
        return;
    }
    cfg->enable = setting_bool(SETTING_MPI_ENABLE);
    cfg->colls = parse_colls(setting_text(SETTING_MPI_COLLS));
    if (setting_str(SETTING_JOB) &&
        strlen(setting_str(SETTING_JOB)) < sizeof(cfg->job_name))
        snprintf(cfg->job_name, sizeof(cfg->job_name), "%s",
                 setting_str(SETTING_JOB));
    cfg->min_ranks = (int32_t)setting_int(SETTING_MPI_MIN_RANKS);
    cfg->max_bytes = setting_u64(SETTING_MPI_MAX_BYTES);
    cfg->verbose = setting_bool(SETTING_MPI_VERBOSE);
    cfg->stats = setting_bool(SETTING_MPI_STATS);
    cfg->eager = setting_bool(SETTING_MPI_EAGER);
    cfg->agree = setting_bool(SETTING_MPI_AGREE);
}

/* A job id when MPI_Init was not seen (so no broadcast is possible): the
 * launcher's own job name, hashed (FNV-1a), the same on every rank. */
static uint64_t job_from_env(void)
{
    static const char *const vars[] = {"PMIX_NAMESPACE",
                                       "OMPI_MCA_ess_base_jobid", "PMI_KVSNAME",
                                       "PMI_JOBID", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        uint64_t h = 0xcbf29ce484222325ull;
        if (v == NULL || *v == '\0')
            continue;
        for (; *v; v++)
            h = (h ^ (unsigned char)*v) * 0x100000001b3ull;
        return h;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Datatypes and ops                                                   */

static void dt_add(MPI_Datatype dt, int kind)
{
    dt_entry_t *e;
    int size = 0;
    MPI_Aint lb = 0, extent = 0;

    if (dt == MPI_DATATYPE_NULL || L.ndts >= DT_MAX)
        return;
    for (int i = 0; i < L.ndts; i++)
        if (L.dts[i].dt == dt)
            return; /* an alias such as MPI_LONG_LONG_INT */
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || size <= 0 ||
        PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS || lb != 0 ||
        extent != size)
        return;
    e = &L.dts[L.ndts];
    e->dt = dt;
    e->kind = kind;
    e->size = size;
    e->idt = INCOLL_DTYPE_COUNT;
    switch (kind) {
    case K_CINT:
    case K_FINT:
        e->idt = size == 1   ? INCOLL_INT8
                 : size == 2 ? INCOLL_INT16
                 : size == 4 ? INCOLL_INT32
                 : size == 8 ? INCOLL_INT64
                             : INCOLL_DTYPE_COUNT;
        break;
    case K_CUINT:
        e->idt = size == 1   ? INCOLL_UINT8
                 : size == 2 ? INCOLL_UINT16
                 : size == 4 ? INCOLL_UINT32
                 : size == 8 ? INCOLL_UINT64
                             : INCOLL_DTYPE_COUNT;
        break;
    case K_FLOAT:
        e->idt = size == 4   ? INCOLL_FLOAT32
                 : size == 8 ? INCOLL_FLOAT64
                             : INCOLL_DTYPE_COUNT;
        break;
    case K_BOOL:
    case K_BYTE:
        e->idt = size == 1 ? INCOLL_UINT8 : INCOLL_DTYPE_COUNT;
        break;
    default:
        break;
    }
    if (e->idt == INCOLL_DTYPE_COUNT)
        e->kind = K_BCAST;
    L.ndts++;
}

/* The predefined datatypes the layer knows, most used first. MPI_CHAR is
 * not a C integer for MPI's reductions (MPI 4.0, 6.9.2), so it is
 * broadcast only, as MPI_WCHAR and the Fortran non-numeric types are. */
static void dt_table_build(void)
{
    L.ndts = 0;
    dt_add(MPI_DOUBLE, K_FLOAT);
    dt_add(MPI_INT, K_CINT);
    dt_add(MPI_FLOAT, K_FLOAT);
    dt_add(MPI_LONG, K_CINT);
    dt_add(MPI_UNSIGNED, K_CUINT);
    dt_add(MPI_UNSIGNED_LONG, K_CUINT);
    dt_add(MPI_LONG_LONG, K_CINT);
    dt_add(MPI_LONG_LONG_INT, K_CINT);
    dt_add(MPI_UNSIGNED_LONG_LONG, K_CUINT);
    dt_add(MPI_SHORT, K_CINT);
    dt_add(MPI_UNSIGNED_SHORT, K_CUINT);
    dt_add(MPI_SIGNED_CHAR, K_CINT);
    dt_add(MPI_UNSIGNED_CHAR, K_CUINT);
    dt_add(MPI_INT8_T, K_CINT);
    dt_add(MPI_INT16_T, K_CINT);
    dt_add(MPI_INT32_T, K_CINT);
    dt_add(MPI_INT64_T, K_CINT);
    dt_add(MPI_UINT8_T, K_CUINT);
    dt_add(MPI_UINT16_T, K_CUINT);
    dt_add(MPI_UINT32_T, K_CUINT);
    dt_add(MPI_UINT64_T, K_CUINT);
    dt_add(MPI_AINT, K_CINT);
    dt_add(MPI_OFFSET, K_CINT);
    dt_add(MPI_COUNT, K_CINT);
    dt_add(MPI_C_BOOL, K_BOOL);
    dt_add(MPI_BYTE, K_BYTE);
    dt_add(MPI_INTEGER, K_FINT);
    dt_add(MPI_REAL, K_FLOAT);
    dt_add(MPI_DOUBLE_PRECISION, K_FLOAT);
    /* MPICH defines the optional Fortran types as MPI_DATATYPE_NULL when
     * the compiler lacks them: dt_add skips those. */
    dt_add(MPI_INTEGER1, K_FINT);
    dt_add(MPI_INTEGER2, K_FINT);
    dt_add(MPI_INTEGER4, K_FINT);
    dt_add(MPI_INTEGER8, K_FINT);
    dt_add(MPI_REAL4, K_FLOAT);
    dt_add(MPI_REAL8, K_FLOAT);
    dt_add(MPI_CHAR, K_BCAST);
    dt_add(MPI_WCHAR, K_BCAST);
    dt_add(MPI_PACKED, K_BCAST);
    dt_add(MPI_C_FLOAT_COMPLEX, K_BCAST);
    dt_add(MPI_C_DOUBLE_COMPLEX, K_BCAST);
    dt_add(MPI_LOGICAL, K_BCAST);
    dt_add(MPI_CHARACTER, K_BCAST);
    dt_add(MPI_COMPLEX, K_BCAST);
    dt_add(MPI_DOUBLE_COMPLEX, K_BCAST);
}

static const dt_entry_t *dt_find(MPI_Datatype dt)
{
    for (int i = 0; i < L.ndts; i++)
        if (L.dts[i].dt == dt)
            return &L.dts[i];
    return NULL;
}

/* The C layouts MPI defines for its pair types. */
typedef struct {
    int v, i;
} pair_2int_t;
typedef struct {
    float v;
    int i;
} pair_float_int_t;
typedef struct {
    double v;
    int i;
} pair_double_int_t;
typedef struct {
    long v;
    int i;
} pair_long_int_t;
typedef struct {
    short v;
    int i;
} pair_short_int_t;

/* Adds a pair type whose value is an incoll vdt of vsize bytes, if MPI
 * lays it out as the C struct (size without padding, extent with). */
static void pair_add(MPI_Datatype dt, incoll_dtype_t vdt, int vsize,
                     size_t ioff, size_t extent)
{
    MPI_Aint lb = 0, ext = 0;
    int size = 0;

    if (dt == MPI_DATATYPE_NULL || L.npairs >= PAIR_MAX ||
        vdt == INCOLL_DTYPE_COUNT)
        return;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS ||
        size != vsize + (int)sizeof(int) ||
        PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS || lb != 0 ||
        (size_t)ext != extent)
        return;
    L.pairs[L.npairs++] = (pair_entry_t){dt, vdt, vsize, ioff, extent};
}

static incoll_dtype_t int_dtype(size_t size)
{
    return size == 2   ? INCOLL_INT16
           : size == 4 ? INCOLL_INT32
           : size == 8 ? INCOLL_INT64
                       : INCOLL_DTYPE_COUNT;
}

#define PAIR_ADD(dt, type, vdt)                                                \
    pair_add(dt, vdt, (int)sizeof(((type *)0)->v), offsetof(type, i),          \
             sizeof(type))

/* MPI_2INT, MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT.
 * (MPI_LONG_DOUBLE_INT and the Fortran pairs, whose index is of the
 * value's type, stay with MPI.) */
static void pair_table_build(void)
{
    L.npairs = 0;
    PAIR_ADD(MPI_2INT, pair_2int_t, int_dtype(sizeof(int)));
    PAIR_ADD(MPI_FLOAT_INT, pair_float_int_t, INCOLL_FLOAT32);
    PAIR_ADD(MPI_DOUBLE_INT, pair_double_int_t, INCOLL_FLOAT64);
    PAIR_ADD(MPI_LONG_INT, pair_long_int_t, int_dtype(sizeof(long)));
    PAIR_ADD(MPI_SHORT_INT, pair_short_int_t, int_dtype(sizeof(short)));
}

static const pair_entry_t *pair_find(MPI_Datatype dt)
{
    for (int i = 0; i < L.npairs; i++)
        if (L.pairs[i].dt == dt)
            return &L.pairs[i];
    return NULL;
}

/* incoll's op for a predefined MPI op; 0 when there is none. */
static int op_map(MPI_Op op, incoll_op_t *iop_p)
{
    static const struct {
        int which;
        incoll_op_t iop;
    } ops[] = {{0, INCOLL_OP_SUM},  {1, INCOLL_OP_PROD}, {2, INCOLL_OP_MIN},
               {3, INCOLL_OP_MAX},  {4, INCOLL_OP_LAND}, {5, INCOLL_OP_LOR},
               {6, INCOLL_OP_LXOR}, {7, INCOLL_OP_BAND}, {8, INCOLL_OP_BOR},
               {9, INCOLL_OP_BXOR}};
    MPI_Op mpi_ops[10];

    mpi_ops[0] = MPI_SUM;
    mpi_ops[1] = MPI_PROD;
    mpi_ops[2] = MPI_MIN;
    mpi_ops[3] = MPI_MAX;
    mpi_ops[4] = MPI_LAND;
    mpi_ops[5] = MPI_LOR;
    mpi_ops[6] = MPI_LXOR;
    mpi_ops[7] = MPI_BAND;
    mpi_ops[8] = MPI_BOR;
    mpi_ops[9] = MPI_BXOR;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (mpi_ops[ops[i].which] == op) {
            *iop_p = ops[i].iop;
            return 1;
        }
    }
    return 0;
}

/* 1 if MPI defines op on datatypes of this kind and incoll can do it. */
static int op_applies(incoll_op_t iop, const dt_entry_t *e)
{
    int k = e->kind, ok;

    switch (iop) {
    case INCOLL_OP_SUM:
    case INCOLL_OP_PROD:
    case INCOLL_OP_MIN:
    case INCOLL_OP_MAX:
        ok = k == K_CINT || k == K_CUINT || k == K_FINT || k == K_FLOAT;
        break;
    case INCOLL_OP_LAND:
    case INCOLL_OP_LOR:
    case INCOLL_OP_LXOR:
        ok = k == K_CINT || k == K_CUINT || k == K_BOOL;
        break;
    case INCOLL_OP_BAND:
    case INCOLL_OP_BOR:
    case INCOLL_OP_BXOR:
        ok = k == K_CINT || k == K_CUINT || k == K_FINT || k == K_BYTE;
        break;
    default:
        ok = 0;
    }
    return ok && incoll_op_valid(iop, e->idt);
}

/* ------------------------------------------------------------------ */
/* Finalize and statistics                                             */

static void stats_print(void)
{
    char line[4096];
    size_t n = 0;

    n += (size_t)snprintf(line + n, sizeof(line) - n, "mpi: stats rank 0:");
    for (int c = 0; c < MPI_COLL_COUNT && n < sizeof(line); c++) {
        unsigned long total = 0;
        int first = 1;
        for (int r = 0; r < R_COUNT; r++)
            total += L.passed[c][r];
        n += (size_t)snprintf(line + n, sizeof(line) - n,
                              " %s offloaded=%lu hosts=%lu errors=%lu "
                              "passed=%lu",
                              coll_names[c], L.offloaded[c], L.hosts[c],
                              L.errors[c], total);
        if (L.nb[c] && n < sizeof(line))
            n += (size_t)snprintf(line + n, sizeof(line) - n, " nb=%lu",
                                  L.nb[c]);
        if (L.persistent[c] && n < sizeof(line))
            n += (size_t)snprintf(line + n, sizeof(line) - n, " persistent=%lu",
                                  L.persistent[c]);
        for (int r = 0; r < R_COUNT && n < sizeof(line); r++) {
            if (L.passed[c][r] == 0)
                continue;
            n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s=%lu",
                                  first ? " (" : " ", reason_names[r],
                                  L.passed[c][r]);
            first = 0;
        }
        if (!first && n < sizeof(line))
            n += (size_t)snprintf(line + n, sizeof(line) - n, ")");
        if (c + 1 < MPI_COLL_COUNT && n < sizeof(line))
            n += (size_t)snprintf(line + n, sizeof(line) - n, ";");
    }
    log_emit(LOG_LEVEL_INFO, "%s", line);
}

/* Ends the layer: statistics, then libincoll (which frees every
 * communicator it still holds). No MPI calls, so it can also run from
 * atexit after MPI is gone. States stay allocated until MPI deletes their
 * attributes; they only lose their libincoll communicator. */
static void layer_end(void)
{
    if (L.finalized)
        return;
    L.finalized = 1;
    if (L.cfg.stats && L.rank == 0)
        stats_print();
    for (comm_state_t *st = L.states; st; st = st->next) {
        st->icomm = NULL;
        st->owned = 0;
        st->offloaded = 0;
        snprintf(st->why, sizeof(st->why), "MPI is finalized");
    }
    if (L.ctx) {
        incoll_finalize(L.ctx);
        L.ctx = NULL;
        L.world = NULL;
    }
    L.active = 0;
}

/* MPI deletes MPI_COMM_SELF's attributes first thing in MPI_Finalize,
 * while MPI still works, whichever binding called it (MPICH's mpi_f08
 * finalize does not go through the C MPI_Finalize). */
static int self_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)attr;
    (void)extra;
    layer_end();
    return MPI_SUCCESS;
}

static void atexit_cb(void)
{
    layer_end();
}

static int comm_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    comm_state_t *st = attr;

    (void)keyval;
    (void)extra;
    if (st == NULL || st == &nomem_state) {
        if (table_find(comm_key(comm)) == st)
            table_del(comm_key(comm));
        return MPI_SUCCESS;
    }
    if (table_find(st->key) == st)
        table_del(st->key);
    if (st->owned && st->icomm && L.ctx)
        incoll_comm_destroy(st->icomm);
    if (st->prev)
        st->prev->next = st->next;
    else
        L.states = st->next;
    if (st->next)
        st->next->prev = st->prev;
    free(st->scratch);
    free(st);
    return MPI_SUCCESS;
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
static void warn_world_off(const char *why)
{
    static int warned;
    const char *hosts = setting_str(SETTING_HOSTS);
    const char *host = setting_str(SETTING_HOST);
    const char *mgr = setting_str(SETTING_MGR);

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

/* The value of name in DIR/fabric.env (NAME=VALUE or NAME='VALUE', as
 * `incoll fabric up` writes it) into buf; -1 when absent. */
static int fabric_env_get(const char *dir, const char *name, char *buf,
                          size_t len)
{
    char path[PATH_MAX + 16], line[PATH_MAX + 64];
    size_t nl = strlen(name);
    int ret = -1;
    FILE *f;

    snprintf(path, sizeof(path), "%s/fabric.env", dir);
    f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (ret != 0 && fgets(line, sizeof(line), f)) {
        char *v = line + nl + 1;
        size_t n;
        if (strncmp(line, name, nl) != 0 || line[nl] != '=')
            continue;
        v[strcspn(v, "\n")] = '\0';
        n = strlen(v);
        if (n >= 2 && v[0] == '\'' && v[n - 1] == '\'') {
            v[n - 1] = '\0';
            v++;
        }
        if (*v != '\0' && strlen(v) < len) {
            snprintf(buf, len, "%s", v);
            ret = 0;
        }
    }
    fclose(f);
    return ret;
}

/* The fabric's manager as adopt_fabric_mgr() read it from fabric.env:
 * handed to libincoll through incoll_init_params (the application's
 * environment is left alone). */
static struct {
    char mgr[256];
    char secret[PATH_MAX];
    char hosts[8192];
} adopted;

/*
 * A fabric.conf of fewer hosts than MPI_COMM_WORLD has ranks: when the
 * fabric has a manager (DIR/fabric.env), libincoll takes it from there,
 * ranks share hosts (rank r on host r of INCOLL_HOSTS, modulo the hosts)
 * and each host's ranks reduce through one leader (src/host/hier.c).
 * Returns 1 when it filled params' manager, secret file and (unless
 * INCOLL_HOSTS is set) hosts from DIR/fabric.env.
 */
static int adopt_fabric_mgr(const char *fab, incoll_init_params_t *params)
{
    const char *own = setting_str(SETTING_HOSTS);

    if (fabric_env_get(fab, "INCOLL_MGR", adopted.mgr, sizeof(adopted.mgr)) !=
            0 ||
        fabric_env_get(fab, "INCOLL_SECRET_FILE", adopted.secret,
                       sizeof(adopted.secret)) != 0)
        return 0;
    params->field_mask |= INCOLL_INIT_FIELD_MGR | INCOLL_INIT_FIELD_SECRET_FILE;
    params->mgr = adopted.mgr;
    params->secret_file = adopted.secret;
    if ((own == NULL || *own == '\0') &&
        fabric_env_get(fab, "INCOLL_HOSTS", adopted.hosts,
                       sizeof(adopted.hosts)) == 0) {
        params->field_mask |= INCOLL_INIT_FIELD_HOSTS;
        params->hosts = adopted.hosts;
    }
    return 1;
}

/* The host of an emulated fabric this rank runs in (the one whose network
 * namespace is ours), or -1. */
static int netns_host(const fabric_conf_t *conf)
{
    struct stat me, ns;
    char path[PATH_MAX];

    if (stat("/proc/self/ns/net", &me) != 0)
        return -1;
    for (int h = 0; h < conf->nhosts; h++) {
        if (conf->hosts[h].netns[0] == '\0')
            return -1;
        snprintf(path, sizeof(path), "/run/netns/%s", conf->hosts[h].netns);
        if (stat(path, &ns) == 0 && ns.st_ino == me.st_ino &&
            ns.st_dev == me.st_dev)
            return h;
    }
    return -1;
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
    const char *fab = setting_str(SETTING_FABRIC);
    const char *mgr = setting_str(SETTING_MGR);
    char path[PATH_MAX + 16], err[256];
    int mine[2] = {node_id, -1}, *all, *nodes, n = L.size, nnodes = 0;
    int use = 0, emulated = 1;
    fabric_conf_t conf;

    memset(&conf, 0, sizeof(conf));
    if (fab && *fab && (mgr == NULL || *mgr == '\0')) {
        snprintf(path, sizeof(path), "%s/fabric.conf", fab);
        use = fabric_conf_load(path, &conf, err, sizeof(err)) == INCOLL_OK;
        if (use)
            mine[1] = netns_host(&conf);
    }
    all = malloc((size_t)n * 2 * sizeof(int));
    nodes = malloc((size_t)n * sizeof(int));
    if (all == NULL || nodes == NULL) {
        /* The others are in the exchange already: nothing else is safe. */
        incoll_error("mpi: out of memory at MPI_Init");
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    PMPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    if (!use || conf.nhosts >= n)
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
    if (!emulated && nnodes != conf.nhosts) {
        snprintf(L.map_why, sizeof(L.map_why),
                 "MPI_COMM_WORLD spans %d nodes but the fabric in %.100s has "
                 "%d hosts and no manager: each node must be one fabric.conf "
                 "host (or every rank on one machine)",
                 nnodes, fab, conf.nhosts);
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
    fabric_conf_free(&conf);
}

/* Brings libincoll up on this rank, or says in L.why_off why not. */
static void incoll_up(int local_rank, int local_size)
{
    const char *fab = setting_str(SETTING_FABRIC);
    const char *mgr = setting_str(SETTING_MGR);
    incoll_init_params_t params;
    char job[32];
    incoll_status_t status;

    /* libincoll takes what the layer knows from us, not from the
     * environment (the application's, which the layer does not touch). */
    memset(&params, 0, sizeof(params));

    if (!L.cfg.enable) {
        snprintf(L.why_off, sizeof(L.why_off), "INCOLL_MPI_ENABLE=0");
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
        char path[PATH_MAX + 16], err[256];
        fabric_conf_t conf;
        snprintf(path, sizeof(path), "%s/fabric.conf", fab);
        if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
            snprintf(L.why_off, sizeof(L.why_off),
                     "cannot read the fabric: %.200s", err);
            return;
        }
        if (conf.nhosts != L.size && adopt_fabric_mgr(fab, &params)) {
            if (L.rank == 0)
                incoll_info("mpi: the fabric in %s has %d hosts and "
                            "MPI_COMM_WORLD %d ranks: using its manager "
                            "(fabric.env), ranks sharing a host reduce "
                            "through one leader",
                            fab, conf.nhosts, L.size);
        } else if (conf.nhosts > L.size) {
            /* Without a manager every host of fabric.conf is a member of
             * the world group: one without a rank would never contribute. */
            snprintf(L.why_off, sizeof(L.why_off),
                     "the fabric in %s has %d hosts but MPI_COMM_WORLD has "
                     "only %d ranks: without a manager every host of "
                     "fabric.conf needs a rank",
                     fab, conf.nhosts, L.size);
            snprintf(off_fix, sizeof(off_fix),
                     "run at least %d ranks, or bring up a fabric of %d hosts "
                     "(`incoll fabric up --hosts %d`)",
                     conf.nhosts, L.size, L.size);
            fabric_conf_free(&conf);
            return;
        } else if (conf.nhosts < L.size) {
            /* Ranks share the hosts: libincoll's node level reduces each
             * host's ranks into the one that binds its port
             * (docs/hierarchy.md, "Without a manager"). */
            if (L.map_why[0]) {
                snprintf(L.why_off, sizeof(L.why_off), "%s", L.map_why);
                snprintf(off_fix, sizeof(off_fix),
                         "place the ranks of each fabric.conf host on one "
                         "node (or all on one machine), or give the ranks "
                         "the fabric's manager");
                fabric_conf_free(&conf);
                return;
            }
            if (L.host_map) {
                params.field_mask |= INCOLL_INIT_FIELD_HOST_MAP;
                params.host_map = L.host_map;
            }
            if (L.rank == 0)
                incoll_info("mpi: the fabric in %s has %d hosts and "
                            "MPI_COMM_WORLD %d ranks, no manager: ranks "
                            "sharing a host reduce through one leader",
                            fab, conf.nhosts, L.size);
        }
        fabric_conf_free(&conf);
    }
    params.field_mask |=
        INCOLL_INIT_FIELD_RANK | INCOLL_INIT_FIELD_SIZE | INCOLL_INIT_FIELD_JOB;
    params.rank = L.rank;
    params.size = L.size;
    /* The launcher's job name when it gave one (its manager knows the job
     * by it: quotas), else rank 0's random id. */
    if (L.cfg.job_name[0])
        params.job = L.cfg.job_name;
    else {
        snprintf(job, sizeof(job), "0x%016" PRIx64, L.cfg.job);
        params.job = job;
    }
    if (local_size > 0) {
        params.field_mask |=
            INCOLL_INIT_FIELD_LOCAL_RANK | INCOLL_INIT_FIELD_LOCAL_SIZE;
        params.local_rank = local_rank;
        params.local_size = local_size;
    }
    /* A program blocks in MPI calls the layer does not see (receives,
     * MPI's own collectives), during which nobody would progress its
     * nonblocking collectives: libincoll's request threads run them
     * (unless INCOLL_PROGRESS_THREAD says otherwise). */
    if (!setting_in_env(SETTING_PROGRESS_THREAD)) {
        params.field_mask |= INCOLL_INIT_FIELD_PROGRESS_THREAD;
        params.progress_thread = 1;
    }
    /* The agreement after each call checks that the operation completed
     * on every rank: a member that returned early (INCOLL_EARLY_MAX) has
     * not seen its end. */
    if (L.cfg.agree) {
        params.field_mask |= INCOLL_INIT_FIELD_EARLY_MAX;
        params.early_max = 0;
    }
    status = incoll_init_params(&params, &L.ctx);
    if (status != INCOLL_OK) {
        L.ctx = NULL;
        snprintf(L.why_off, sizeof(L.why_off), "incoll_init failed: %s",
                 incoll_status_string(status));
        return;
    }
    status = incoll_comm_world(L.ctx, &L.world);
    if (status != INCOLL_OK) {
        incoll_finalize(L.ctx);
        L.ctx = NULL;
        snprintf(L.why_off, sizeof(L.why_off), "no world communicator: %s",
                 incoll_status_string(status));
        return;
    }
    if (L.thread_multiple)
        mpi_layer_threads_init(L.ctx);
    L.active = 1;
}

/* ---- threads ---- */

/* Under MPI_THREAD_MULTIPLE: one recursive lock around the layer's calls
 * (mpi_layer_enter), given up by libincoll while it blocks (hooks). */
static pthread_mutex_t layer_mu;
static int layer_locking;
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

void mpi_layer_threads_init(incoll_ctx_h ctx)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&layer_mu, &a);
    pthread_mutexattr_destroy(&a);
    host_sync_hooks(ctx, layer_release, layer_reacquire, NULL);
    layer_locking = 1;
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
    return setting_str(SETTING_FABRIC) != NULL ||
           setting_str(SETTING_MGR) != NULL;
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
    log_set_name(who);
    PMPI_Query_thread(&provided);
    L.thread_multiple = provided == MPI_THREAD_MULTIPLE;
    cfg_read(&L.cfg);
    if (from_init) {
        /* Rank 0's job id and knobs rule, so every rank decides alike. */
        mpi_cfg_t cfg = L.cfg;
        if (L.rank == 0 &&
            getrandom(&cfg.job, sizeof(cfg.job), 0) != sizeof(cfg.job))
            cfg.job = job_from_env();
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
        L.cfg.job = job_from_env();
    }
    dt_table_build();
    pair_table_build();
    errcodes_init();
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_cb, &L.keyval,
                            NULL);
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_cb,
                                &L.self_keyval, NULL) == MPI_SUCCESS)
        PMPI_Comm_set_attr(MPI_COMM_SELF, L.self_keyval, NULL);
    atexit(atexit_cb);

    incoll_up(local_rank, local_size);
    if (L.rank == 0) {
        if (L.active)
            verbose("mpi: offload on: fabric %s, %d ranks, job 0x%016" PRIx64
                    "%s",
                    setting_str(SETTING_FABRIC) ? setting_str(SETTING_FABRIC)
                                                : setting_str(SETTING_MGR),
                    L.size, L.cfg.job, from_init ? "" : " (late start)");
        else if (fabric_set() && L.cfg.enable)
            warn_world_off(L.why_off);
        else if (L.cfg.verbose)
            log_emit(LOG_LEVEL_INFO, "mpi: offload off: %s", L.why_off);
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

/* ------------------------------------------------------------------ */
/* Communicators                                                       */

/* Setup codes, agreed with MPI_MAX: the largest reason wins. */
enum {
    C_OK = 0,
    C_NOMEM,
    C_INACTIVE,
    C_CREATE,
    C_HOST,
};

static const char *const code_text[] = {
    "offloaded",
    "out of memory in the MPI layer",
    "the layer is off on some rank",
    "incoll_comm_create failed on some rank",
    "the fabric cannot host its group (libincoll would run host-based "
    "algorithms, MPI's own are used instead)",
};

/* The communicator's MPI name, or "communicator #k" (k counts the
 * communicators this rank has set up). */
static void comm_label(MPI_Comm comm, int seq, char *buf, size_t len)
{
    char name[MPI_MAX_OBJECT_NAME];
    int n = 0;

    name[0] = '\0';
    PMPI_Comm_get_name(comm, name, &n);
    if (n > 0)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "communicator #%d", seq);
}

/* World ranks of comm's members in comm's order; malloc'ed, NULL if out of
 * memory. */
static int *world_ranks(MPI_Comm comm, int size)
{
    MPI_Group g, wg;
    int *in = malloc((size_t)size * sizeof(int));
    int *out = malloc((size_t)size * sizeof(int));

    if (in == NULL || out == NULL) {
        free(in);
        free(out);
        return NULL;
    }
    for (int i = 0; i < size; i++)
        in[i] = i;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_translate_ranks(g, size, in, wg, out);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    free(in);
    return out;
}

/*
 * Makes comm's state: whether it is offloaded and on which libincoll
 * communicator. Collective over comm (every member is in the same
 * collective call, or has just received comm). Two agreements: first that
 * every rank can try (so no rank waits in incoll_comm_create for one that
 * will not come), then that every rank succeeded.
 */
static comm_state_t *comm_setup(MPI_Comm comm, const char *how)
{
    comm_state_t *st = calloc(1, sizeof(*st));
    int inter = 0, code = C_OK, agreed, cmp = MPI_UNEQUAL, *ranks = NULL;
    int rank = 0, size = 0;
    char local_why[384] = "", label[MPI_MAX_OBJECT_NAME];
    comm_state_t *set;

    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    if (st == NULL) {
        code = C_NOMEM;
    } else {
        st->rank = rank;
        st->size = size;
        st->seq = ++L.nsetups;
    }
    if (inter || size < L.cfg.min_ranks) {
        /* Consistent on every rank: no agreement (and an allreduce on an
         * inter-communicator means something else). */
        if (st == NULL) {
            if (L.keyval != MPI_KEYVAL_INVALID)
                PMPI_Comm_set_attr(comm, L.keyval, &nomem_state);
            return &nomem_state;
        }
        if (inter)
            snprintf(st->why, sizeof(st->why), "inter-communicator");
        else
            snprintf(st->why, sizeof(st->why),
                     "%d ranks, fewer than INCOLL_MPI_MIN_RANKS=%d", size,
                     (int)L.cfg.min_ranks);
        goto out;
    }
    if (code == C_OK && !L.active) {
        code = C_INACTIVE;
        snprintf(local_why, sizeof(local_why), ": %.150s", L.why_off);
    }
    if (code == C_OK) {
        PMPI_Comm_compare(comm, MPI_COMM_WORLD, &cmp);
        if (cmp != MPI_IDENT && (ranks = world_ranks(comm, size)) == NULL)
            code = C_NOMEM;
    }
    agreed = code;
    PMPI_Allreduce(MPI_IN_PLACE, &agreed, 1, MPI_INT, MPI_MAX, comm);
    if (agreed == C_OK) {
        const char *why = NULL;
        if (cmp == MPI_IDENT) {
            /* MPI_COMM_WORLD itself: the fabric's world group. Any other
             * communicator, even one congruent with it (a dup), gets a
             * libincoll communicator of its own: collectives on two
             * communicators may be started in different orders on
             * different ranks (a nonblocking one on the world, then a
             * blocking one on a dup here, the other way round there), so
             * two MPI communicators sharing one would match each other's
             * calls. */
            st->icomm = L.world;
        } else {
            incoll_comm_h ic = NULL;
            incoll_status_t status =
                incoll_comm_create(L.world, st->size, ranks, &ic);
            if (status == INCOLL_OK && ic) {
                st->icomm = ic;
                st->owned = 1;
            } else {
                code = C_CREATE;
                snprintf(local_why, sizeof(local_why), ": %s here",
                         incoll_status_string(status));
            }
        }
        if (code == C_OK && !incoll_comm_offloaded(st->icomm, &why)) {
            code = C_HOST;
            snprintf(local_why, sizeof(local_why), ": %s",
                     why ? why : "no reason given");
        }
        agreed = code;
        PMPI_Allreduce(MPI_IN_PLACE, &agreed, 1, MPI_INT, MPI_MAX, comm);
    }
    free(ranks);
    if (st == NULL) {
        /* Cache the "not offloaded" answer too, so this rank does not run
         * the collective setup again at the next call while the others
         * answer from their cache. */
        if (L.keyval != MPI_KEYVAL_INVALID)
            PMPI_Comm_set_attr(comm, L.keyval, &nomem_state);
        return &nomem_state;
    }
    if (agreed == C_OK) {
        st->offloaded = 1;
    } else {
        if (st->owned)
            incoll_comm_destroy(st->icomm);
        st->icomm = NULL;
        st->owned = 0;
        snprintf(st->why, sizeof(st->why), "%s%s", code_text[agreed],
                 agreed == code ? local_why : "");
    }
out:
    set = st;
    st->next = L.states;
    if (L.states)
        L.states->prev = st;
    L.states = st;
    st->key = comm_key(comm);
    if (L.keyval == MPI_KEYVAL_INVALID ||
        PMPI_Comm_set_attr(comm, L.keyval, set) != MPI_SUCCESS) {
        /* Cannot cache it: never offload this communicator. */
        st->offloaded = 0;
        snprintf(st->why, sizeof(st->why), "cannot cache state on it");
    } else {
        /* Out of memory here only costs the attribute lookup per call. */
        (void)table_put(st->key, st);
    }
    if (st->rank == 0 && !st->offloaded && L.active && cmp == MPI_IDENT)
        warn_world_off(st->why);
    if (st->rank == 0) {
        comm_label(comm, st->seq, label, sizeof(label));
        verbose("mpi: communicator '%s' (%s, %d ranks): %s%s", label, how,
                st->size, st->offloaded ? "offloaded" : "not offloaded: ",
                st->offloaded ? (st->owned ? " on its own fabric group"
                                           : " on the fabric's world group")
                              : st->why);
    }
    return st;
}

/* comm's state, made at the first offloadable collective on it. Found in
 * the lookup table without an MPI call; the attribute is the fallback for
 * a state the table could not take. */
static comm_state_t *comm_state(MPI_Comm comm, const char *how)
{
    comm_state_t *st = table_find(comm_key(comm));
    void *val = NULL;
    int flag = 0;

    if (st)
        return st;
    if (L.keyval != MPI_KEYVAL_INVALID &&
        PMPI_Comm_get_attr(comm, L.keyval, &val, &flag) == MPI_SUCCESS && flag)
        return val;
    return comm_setup(comm, how);
}

void mpi_layer_comm_created(MPI_Comm newcomm, const char *how)
{
    if (!L.booted)
        mpi_layer_bootstrap(0);
    if (!L.booted || L.finalized || !L.cfg.eager || newcomm == MPI_COMM_NULL)
        return;
    (void)comm_state(newcomm, how);
}

/* ------------------------------------------------------------------ */
/* Offload paths                                                       */

static void *scratch(comm_state_t *st, size_t len)
{
    if (st->scratch_len < len) {
        void *p = realloc(st->scratch, len);
        if (p == NULL)
            return NULL;
        st->scratch = p;
        st->scratch_len = len;
    }
    return st->scratch;
}

/*
 * The checks every offloaded call shares: layer up, collective enabled,
 * communicator offloaded. Counts the reason and returns NULL when the call
 * must go to MPI. Everything before comm_state() is local and the same on
 * every rank, so the collective setup runs only when all ranks reach it.
 */
static comm_state_t *gate(mpi_coll_t coll, MPI_Comm comm, size_t bytes,
                          reason_t pre)
{
    comm_state_t *st;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    if (!L.booted || L.finalized || !L.active) {
        pass(coll, R_OFF);
        return NULL;
    }
    if (!(L.cfg.colls & (1 << coll))) {
        pass(coll, R_COLL);
        return NULL;
    }
    if (comm == MPI_COMM_NULL) {
        pass(coll, R_ARGS);
        return NULL;
    }
    if (pre != R_COUNT) {
        pass(coll, pre);
        return NULL;
    }
    if (L.cfg.max_bytes && bytes > L.cfg.max_bytes) {
        pass(coll, R_BYTES);
        return NULL;
    }
    st = comm_state(comm, "first collective");
    if (!st->offloaded) {
        pass(coll, R_COMM);
        return NULL;
    }
    return st;
}

/* 1 while comm's libincoll communicator runs its collectives in the
 * network. */
static int in_net(const comm_state_t *st)
{
    return incoll_comm_offloaded(st->icomm, NULL);
}

/*
 * A call libincoll completed but not in the network: the communicator
 * left it (its group failed and libincoll recovered on the hosts, or on a
 * new group after this call's check). Says so once per libincoll
 * communicator, at warn level, at rank 0 of the MPI communicator.
 */
static __attribute__((noinline)) void note_left(comm_state_t *st,
                                                mpi_coll_t coll, MPI_Comm comm)
{
    const char *why = NULL;
    char label[MPI_MAX_OBJECT_NAME];

    L.hosts[coll]++;
    if (st->left || in_net(st))
        return;
    incoll_comm_offloaded(st->icomm, &why);
    for (comm_state_t *s = L.states; s; s = s->next)
        if (s->icomm == st->icomm)
            s->left = s->want_mpi = 1;
    if (st->rank == 0) {
        comm_label(comm, st->seq, label, sizeof(label));
        incoll_warn("mpi: communicator '%s' is no longer in the network (%s): "
                    "from %s on its collectives run on libincoll's "
                    "host-based algorithms",
                    label, why ? why : "no reason given", coll_names[coll]);
    }
}

/* Adds the layer's error class and one code per incoll error status, so a
 * failure reaches the error handler with its cause. Local calls, at
 * bootstrap, in the same order on every rank. */
static void errcodes_init(void)
{
    int cls = MPI_ERR_OTHER;

    for (int i = 0; i < ERRCODE_MAX; i++)
        L.errcode[i] = MPI_ERR_OTHER;
    if (PMPI_Add_error_class(&cls) != MPI_SUCCESS)
        return;
    PMPI_Add_error_string(cls, "incoll: a collective failed on the fabric");
    for (int i = 1; i < ERRCODE_MAX; i++) {
        const char *text = incoll_status_string((incoll_status_t)-i);
        char buf[MPI_MAX_ERROR_STRING];
        int code;
        if (text == NULL || strstr(text, "unknown"))
            break;
        if (PMPI_Add_error_code(cls, &code) != MPI_SUCCESS)
            break;
        snprintf(buf, sizeof(buf), "incoll: %s", text);
        PMPI_Add_error_string(code, buf);
        L.errcode[i] = code;
    }
}

/*
 * A call that failed on this rank's libincoll (which has bounded it in
 * time and, with a manager, already tried to recover). Other ranks may
 * have completed it, so it cannot be redone with PMPI_ on this rank
 * alone: the error goes to comm's error handler, as an MPI library's
 * network failure does (MPI_ERRORS_ARE_FATAL ends the job; with
 * MPI_ERRORS_RETURN the caller gets the code). Returns the MPI code.
 */
static __attribute__((noinline)) int raise_error(comm_state_t *st,
                                                 mpi_coll_t coll, MPI_Comm comm,
                                                 incoll_status_t status)
{
    const char *why = NULL;
    char label[MPI_MAX_OBJECT_NAME];
    int code = MPI_ERR_OTHER;

    L.errors[coll]++;
    if (status < 0 && -(int)status < ERRCODE_MAX)
        code = L.errcode[-(int)status];
    (void)incoll_comm_offloaded(st->icomm, &why);
    comm_label(comm, st->seq, label, sizeof(label));
    incoll_error("mpi: MPI_%s on communicator '%s' (rank %d of %d) failed on "
                 "the fabric: %s%s%s; other ranks may have completed it, so "
                 "it is not redone by MPI: raising it through the "
                 "communicator's error handler",
                 mpi_names[coll], label, st->rank, st->size,
                 incoll_status_string(status), why ? ": " : "", why ? why : "");
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/*
 * After an offloaded call: did the fabric deliver on every rank? With
 * INCOLL_MPI_AGREE=1 the ranks agree with one PMPI_Allreduce of an int;
 * on any failure the communicator stops being offloaded and the caller
 * redoes the call with PMPI_. For fabrics without a manager, where
 * libincoll cannot recover by itself.
 */
static int agree(comm_state_t *st, mpi_coll_t coll, MPI_Comm comm,
                 incoll_status_t status)
{
    int ok = status == INCOLL_OK;

    if (PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm) !=
        MPI_SUCCESS)
        ok = 0;
    if (ok)
        return 1;
    pass(coll, R_FAILED);
    snprintf(st->why, sizeof(st->why),
             "the fabric failed during a call (%s); MPI runs its "
             "collectives from now on",
             status == INCOLL_OK ? "on another rank"
                                 : incoll_status_string(status));
    /* Every communicator on the same libincoll communicator has exactly
     * the ranks that just agreed, so all of them can stop at once rather
     * than each wait for its own timeout. */
    for (comm_state_t *s = L.states; s; s = s->next) {
        if (s != st && s->icomm == st->icomm && s->offloaded) {
            s->offloaded = 0;
            snprintf(s->why, sizeof(s->why), "%s", st->why);
        }
    }
    st->offloaded = 0;
    if (st->rank == 0) {
        char label[MPI_MAX_OBJECT_NAME];
        comm_label(comm, st->seq, label, sizeof(label));
        incoll_warn("mpi: communicator '%s': %s: %s", label, coll_names[coll],
                    st->why);
    }
    return 0;
}

/*
 * Ends an offloaded call whose libincoll status is status; was_in is
 * in_net() before the call. The fast path (default): INCOLL_OK is the
 * answer on every rank (libincoll's guarantee), counted as offloaded when
 * it ran in the network and under hosts when libincoll ran it on the
 * hosts; an error is raised (raise_error). No MPI call on success.
 * Returns 1 with *ret_p set, or 0 (INCOLL_MPI_AGREE=1 only) when every
 * rank agreed that the fabric failed and the caller must redo the call
 * with PMPI_.
 */
static inline int settle(comm_state_t *st, mpi_coll_t coll, MPI_Comm comm,
                         incoll_status_t status, int was_in, int *ret_p)
{
    if (L.cfg.agree) {
        if (!agree(st, coll, comm, status))
            return 0;
    }
    if (status != INCOLL_OK) {
        *ret_p = raise_error(st, coll, comm, status);
        return 1;
    }
    if (was_in && in_net(st))
        L.offloaded[coll]++;
    else
        note_left(st, coll, comm);
    *ret_p = MPI_SUCCESS;
    return 1;
}

/* Plans a reduction: the mapped datatype and op, or the reason not. */
static reason_t plan_reduction(int count, MPI_Datatype dtype, MPI_Op op,
                               incoll_dtype_t *idt_p, incoll_op_t *iop_p,
                               size_t *bytes_p)
{
    const dt_entry_t *e;

    if (count < 0)
        return R_ARGS;
    e = dt_find(dtype);
    if (e == NULL || e->kind == K_BCAST)
        return R_DTYPE;
    if (!op_map(op, iop_p) || !op_applies(*iop_p, e))
        return R_OP;
    *idt_p = e->idt;
    *bytes_p = (size_t)count * (size_t)e->size;
    return R_COUNT;
}

/* Plans MINLOC/MAXLOC on a pair type pe: the op, or the reason not. */
static reason_t plan_pairs(int count, const pair_entry_t *pe, MPI_Op op,
                           incoll_op_t *iop_p, size_t *bytes_p)
{
    if (count < 0)
        return R_ARGS;
    if (op == MPI_MINLOC)
        *iop_p = INCOLL_OP_MIN;
    else if (op == MPI_MAXLOC)
        *iop_p = INCOLL_OP_MAX;
    else
        return R_OP; /* MPI defines only MINLOC and MAXLOC on pairs */
    if (!incoll_op_valid(*iop_p, pe->vdt))
        return R_OP;
    *bytes_p = (size_t)count * pe->extent;
    return R_COUNT;
}

static int value_eq(incoll_dtype_t vdt, const void *a, const void *b)
{
    switch (vdt) {
    case INCOLL_INT16: {
        int16_t x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return x == y;
    }
    case INCOLL_INT32: {
        int32_t x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return x == y;
    }
    case INCOLL_INT64: {
        int64_t x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return x == y;
    }
    case INCOLL_FLOAT32: {
        float x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return x == y;
    }
    case INCOLL_FLOAT64: {
        double x, y;
        memcpy(&x, a, sizeof(x));
        memcpy(&y, b, sizeof(y));
        return x == y;
    }
    default:
        return 0;
    }
}

static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/*
 * MINLOC/MAXLOC of n pairs (pe's layout, from in) as two allreduces of
 * plain types on the fabric: the MIN (MAX) of the values, then the MIN of
 * the indices of the members whose value equals that result (INT_MAX from
 * the others). That is MPI's definition, ties included: the value, and the
 * lowest index among the ranks that hold it. The results stay in st's
 * scratch (*vals_p, *idx_p) for pairs_store(), so the caller's buffers are
 * untouched until every rank has agreed that the fabric delivered. Both
 * allreduces are always issued, so a rank whose first one failed does not
 * leave the others waiting in the second.
 */
static incoll_status_t pairs_reduce(comm_state_t *st, const pair_entry_t *pe,
                                    incoll_op_t iop, const void *in, size_t n,
                                    const char **vals_p, const int32_t **idx_p)
{
    size_t vb = round8(n * (size_t)pe->vsize), ib = round8(n * sizeof(int32_t));
    char *s = scratch(st, 2 * vb + 2 * ib), *vin, *vout;
    int32_t *iin, *iout;
    incoll_status_t s1, s2;

    if (s == NULL)
        return INCOLL_ERR_NO_MEMORY;
    vin = s;
    vout = s + vb;
    iin = (int32_t *)(void *)(s + 2 * vb);
    iout = (int32_t *)(void *)(s + 2 * vb + ib);
    for (size_t i = 0; i < n; i++)
        memcpy(vin + i * (size_t)pe->vsize, (const char *)in + i * pe->extent,
               (size_t)pe->vsize);
    s1 = incoll_allreduce(st->icomm, vin, vout, n, pe->vdt, iop);
    for (size_t i = 0; i < n; i++) {
        int idx;
        const char *p = (const char *)in + i * pe->extent;
        memcpy(&idx, p + pe->ioff, sizeof(idx));
        iin[i] = s1 == INCOLL_OK &&
                         value_eq(pe->vdt, p, vout + i * (size_t)pe->vsize)
                     ? (int32_t)idx
                     : INT32_MAX;
    }
    s2 = incoll_allreduce(st->icomm, iin, iout, n, INCOLL_INT32, INCOLL_OP_MIN);
    *vals_p = vout;
    *idx_p = iout;
    return s1 != INCOLL_OK ? s1 : s2;
}

/* Writes the pairs pairs_reduce() left in scratch into out: the value and
 * the index of each; the padding between pairs is not touched. */
static void pairs_store(const pair_entry_t *pe, const char *vals,
                        const int32_t *idx, void *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *p = (char *)out + i * pe->extent;
        int v = (int)idx[i];
        memcpy(p, vals + i * (size_t)pe->vsize, (size_t)pe->vsize);
        memcpy(p + pe->ioff, &v, sizeof(v));
    }
}

/* MINLOC/MAXLOC of coll on the fabric: 1 when done (out written, unless
 * NULL, or the error raised; *ret_p set), 0 when every rank agreed that
 * the fabric failed (INCOLL_MPI_AGREE=1) and the caller must redo the call
 * with PMPI_ (its buffers are untouched). */
static int pairs_call(mpi_coll_t coll, comm_state_t *st, MPI_Comm comm,
                      const pair_entry_t *pe, incoll_op_t iop, const void *in,
                      void *out, size_t n, int *ret_p)
{
    const char *vals = NULL;
    const int32_t *idx = NULL;
    int was_in = in_net(st);
    incoll_status_t status = pairs_reduce(st, pe, iop, in, n, &vals, &idx);

    if (!settle(st, coll, comm, status, was_in, ret_p))
        return 0;
    if (status == INCOLL_OK && out)
        pairs_store(pe, vals, idx, out, n);
    return 1;
}

int mpi_layer_allreduce(const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                        int *ret_p)
{
    incoll_dtype_t idt = INCOLL_UINT8;
    incoll_op_t iop = INCOLL_OP_SUM;
    size_t bytes = 0;
    reason_t pre;
    comm_state_t *st;
    incoll_status_t status;
    void *saved = NULL;
    const pair_entry_t *pe;
    int was_in;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    pe = pair_find(dtype);
    pre = pe ? plan_pairs(count, pe, op, &iop, &bytes)
             : plan_reduction(count, dtype, op, &idt, &iop, &bytes);
    st = gate(MPI_COLL_ALLREDUCE, comm, bytes, pre);
    if (st == NULL)
        return 0;
    if (count == 0) {
        L.offloaded[MPI_COLL_ALLREDUCE]++;
        *ret_p = MPI_SUCCESS;
        return 1;
    }
    if (pe) {
        if (!pairs_call(MPI_COLL_ALLREDUCE, st, comm, pe, iop,
                        sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf,
                        (size_t)count, ret_p))
            *ret_p = PMPI_Allreduce(sendbuf, recvbuf, count, dtype, op, comm);
        return 1;
    }
    was_in = in_net(st);
    if (sendbuf == MPI_IN_PLACE && L.cfg.agree) {
        /* Keep the input for a redo: a failed call leaves recvbuf
         * unspecified. */
        saved = scratch(st, bytes);
        if (saved == NULL)
            status = INCOLL_ERR_NO_MEMORY;
        else {
            memcpy(saved, recvbuf, bytes);
            status = incoll_allreduce(st->icomm, saved, recvbuf, (size_t)count,
                                      idt, iop);
        }
    } else {
        /* In place, libincoll keeps what it needs for its own retries. */
        status = incoll_allreduce(
            st->icomm, sendbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sendbuf,
            recvbuf, (size_t)count, idt, iop);
    }
    if (settle(st, MPI_COLL_ALLREDUCE, comm, status, was_in, ret_p))
        return 1;
    if (sendbuf == MPI_IN_PLACE) {
        if (saved == NULL) {
            /* No copy of the input: let MPI report the failure honestly
             * instead of reducing a clobbered buffer. */
            *ret_p = MPI_ERR_NO_MEM;
            return 1;
        }
        memcpy(recvbuf, saved, bytes);
    }
    *ret_p = PMPI_Allreduce(sendbuf, recvbuf, count, dtype, op, comm);
    return 1;
}

int mpi_layer_reduce(const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm,
                     int *ret_p)
{
    incoll_dtype_t idt = INCOLL_UINT8;
    incoll_op_t iop = INCOLL_OP_SUM;
    size_t bytes = 0;
    reason_t pre;
    comm_state_t *st;
    incoll_status_t status = INCOLL_ERR_NO_MEMORY;
    int in_place, was_in;
    void *buf;
    const pair_entry_t *pe;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    pe = pair_find(dtype);
    pre = pe ? plan_pairs(count, pe, op, &iop, &bytes)
             : plan_reduction(count, dtype, op, &idt, &iop, &bytes);
    if (pre == R_COUNT && root < 0)
        pre = R_ARGS;
    st = gate(MPI_COLL_REDUCE, comm, bytes, pre);
    if (st == NULL)
        return 0;
    if (root >= st->size || (st->rank != root && sendbuf == MPI_IN_PLACE)) {
        /* Erroneous: MPI says so (with the same call on every rank). */
        pass(MPI_COLL_REDUCE, R_ARGS);
        return 0;
    }
    if (st->to_mpi) {
        pass(MPI_COLL_REDUCE, R_LEFT);
        return 0;
    }
    if (count == 0) {
        L.offloaded[MPI_COLL_REDUCE]++;
        *ret_p = MPI_SUCCESS;
        return 1;
    }
    in_place = st->rank == root && sendbuf == MPI_IN_PLACE;
    if (pe) {
        if (!pairs_call(MPI_COLL_REDUCE, st, comm, pe, iop,
                        in_place ? recvbuf : sendbuf,
                        st->rank == root ? recvbuf : NULL, (size_t)count,
                        ret_p))
            *ret_p =
                PMPI_Reduce(sendbuf, recvbuf, count, dtype, op, root, comm);
        return 1;
    }
    was_in = in_net(st);
    if (in_place && L.cfg.agree) {
        buf = scratch(st, bytes); /* the input, kept for a redo */
        if (buf) {
            memcpy(buf, recvbuf, bytes);
            status = incoll_reduce(st->icomm, buf, recvbuf, (size_t)count, idt,
                                   iop, root);
        }
    } else {
        buf = recvbuf;
        status = incoll_reduce(st->icomm, in_place ? INCOLL_IN_PLACE : sendbuf,
                               st->rank == root ? recvbuf : NULL, (size_t)count,
                               idt, iop, root);
    }
    if (settle(st, MPI_COLL_REDUCE, comm, status,
               was_in && host_coll_last_in_net(), ret_p))
        return 1;
    if (in_place) {
        if (buf == NULL) {
            *ret_p = MPI_ERR_NO_MEM;
            return 1;
        }
        memcpy(recvbuf, buf, bytes);
    }
    *ret_p = PMPI_Reduce(sendbuf, recvbuf, count, dtype, op, root, comm);
    return 1;
}

int mpi_layer_bcast(void *buf, int count, MPI_Datatype dtype, int root,
                    MPI_Comm comm, int *ret_p)
{
    const dt_entry_t *e;
    reason_t pre = R_COUNT;
    size_t bytes = 0;
    comm_state_t *st;
    incoll_status_t status;
    int was_in;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    e = dt_find(dtype);
    if (count < 0 || root < 0)
        pre = R_ARGS;
    else if (e == NULL)
        pre = R_DTYPE;
    else
        bytes = (size_t)count * (size_t)e->size;
    st = gate(MPI_COLL_BCAST, comm, bytes, pre);
    if (st == NULL)
        return 0;
    if (root >= st->size) {
        pass(MPI_COLL_BCAST, R_ARGS);
        return 0;
    }
    if (st->to_mpi && bytes < LEFT_MPI_BYTES) {
        pass(MPI_COLL_BCAST, R_LEFT);
        return 0;
    }
    if (bytes == 0) {
        L.offloaded[MPI_COLL_BCAST]++;
        *ret_p = MPI_SUCCESS;
        return 1;
    }
    was_in = in_net(st);
    status = incoll_bcast(st->icomm, buf, bytes, root);
    if (settle(st, MPI_COLL_BCAST, comm, status,
               was_in && host_coll_last_in_net(), ret_p))
        return 1;
    *ret_p = PMPI_Bcast(buf, count, dtype, root, comm);
    return 1;
}

/*
 * The ranks agreed, at a barrier on comm, that comm left the network:
 * from now on its reduces and small broadcasts (and those of every
 * communicator on the same libincoll communicator, which has the same
 * ranks in the same order of calls) go to MPI. Every rank gets the same
 * barrier result, so every rank switches at the same call.
 */
static __attribute__((noinline)) void switch_to_mpi(comm_state_t *st,
                                                    MPI_Comm comm)
{
    char label[MPI_MAX_OBJECT_NAME];

    for (comm_state_t *s = L.states; s; s = s->next)
        if (s->icomm == st->icomm)
            s->to_mpi = 1;
    if (st->rank == 0) {
        comm_label(comm, st->seq, label, sizeof(label));
        incoll_info("mpi: communicator '%s': its ranks agreed at a barrier "
                    "that it left the network: reduces, and broadcasts under "
                    "%d bytes, go to MPI from now on (faster than on the "
                    "hosts), the rest stays with libincoll",
                    label, LEFT_MPI_BYTES);
    }
}

int mpi_layer_barrier(MPI_Comm comm, int *ret_p)
{
    comm_state_t *st;
    incoll_status_t status;
    uint8_t in, out = 0;
    int was_in;

    st = gate(MPI_COLL_BARRIER, comm, 1, R_COUNT);
    if (st == NULL)
        return 0;
    /*
     * No rank gets an allreduce's result before every rank contributed.
     * Its byte carries, for free, whether this rank saw the communicator
     * leave the network: the bitwise OR is the same on every rank, so the
     * switch of reduces and small broadcasts to MPI happens at the same
     * call everywhere (a rank's own view may differ from its peers' for a
     * while: the manager's failure notice reaches each at its own time).
     */
    in = (uint8_t)(st->want_mpi && !st->to_mpi);
    was_in = in_net(st);
    if (st->to_mpi) {
        /* Agreed already: nothing more to carry. */
        status = incoll_barrier(st->icomm);
        was_in = was_in && host_coll_last_in_net();
    } else {
        status = incoll_allreduce(st->icomm, &in, &out, 1, INCOLL_UINT8,
                                  INCOLL_OP_BOR);
    }
    if (settle(st, MPI_COLL_BARRIER, comm, status, was_in, ret_p)) {
        if (status == INCOLL_OK && (out & 1) && !st->to_mpi)
            switch_to_mpi(st, comm);
        return 1;
    }
    *ret_p = PMPI_Barrier(comm);
    return 1;
}

/* ------------------------------------------------------------------ */
/* Gathers, scatters and reduce_scatters                               */

/* The bytes of count elements of a contiguous predefined datatype, or the
 * reason not. */
static reason_t plan_block(int count, MPI_Datatype dt, size_t *bytes_p)
{
    const dt_entry_t *e;
    if (count < 0)
        return R_ARGS;
    e = dt_find(dt);
    if (e == NULL)
        return R_DTYPE;
    *bytes_p = (size_t)count * (size_t)e->size;
    return R_COUNT;
}

/* The other side of a gather or scatter, when given, must carry the same
 * bytes (MPI's type signatures match; different bytes are erroneous). */
static reason_t plan_other(reason_t pre, int count, MPI_Datatype dt,
                           size_t bytes)
{
    size_t other = 0;
    reason_t r;
    if (pre != R_COUNT)
        return pre;
    r = plan_block(count, dt, &other);
    if (r != R_COUNT)
        return r;
    return other == bytes ? R_COUNT : R_ARGS;
}

/* Ends a data-moving call: settles it (see settle) with the library's word
 * on where it ran. */
static int settle_coll(comm_state_t *st, mpi_coll_t coll, MPI_Comm comm,
                       incoll_status_t status, int was_in, int *ret_p)
{
    return settle(st, coll, comm, status, was_in && host_coll_last_in_net(),
                  ret_p);
}

int mpi_layer_allgather(const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, int *ret_p)
{
    size_t bytes = 0;
    reason_t pre;
    comm_state_t *st;
    incoll_status_t status;
    void *saved = NULL;
    int was_in, in_place = sendbuf == MPI_IN_PLACE;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    /* recvcount and recvtype count on every rank: the same decision. */
    pre = plan_block(recvcount, recvtype, &bytes);
    if (!in_place)
        pre = plan_other(pre, sendcount, sendtype, bytes);
    st = gate(MPI_COLL_ALLGATHER, comm, bytes, pre);
    if (st == NULL)
        return 0;
    if (bytes == 0) {
        L.offloaded[MPI_COLL_ALLGATHER]++;
        *ret_p = MPI_SUCCESS;
        return 1;
    }
    if (in_place && L.cfg.agree) {
        /* Keep this rank's block for a redo. */
        saved = scratch(st, bytes);
        if (saved == NULL) {
            pass(MPI_COLL_ALLGATHER, R_ARGS);
            return 0;
        }
        memcpy(saved, (char *)recvbuf + (size_t)st->rank * bytes, bytes);
    }
    was_in = in_net(st);
    status = incoll_allgather(st->icomm, in_place ? INCOLL_IN_PLACE : sendbuf,
                              recvbuf, bytes);
    if (settle_coll(st, MPI_COLL_ALLGATHER, comm, status, was_in, ret_p))
        return 1;
    if (saved)
        memcpy((char *)recvbuf + (size_t)st->rank * bytes, saved, bytes);
    *ret_p = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                            recvtype, comm);
    return 1;
}

/*
 * The start shared by the rooted collectives whose root moves every
 * rank's block (gather, scatter): the block size comes from the root's
 * side that holds all blocks (root_count, root_type) at the root and from
 * the other side (count, type) elsewhere, equal by MPI's rules; a root
 * not in place checks its other side too. Returns the communicator's
 * state, or NULL when MPI runs the call (counted).
 */
static comm_state_t *rooted_gate(mpi_coll_t coll, MPI_Comm comm, int root,
                                 int in_place, int root_count,
                                 MPI_Datatype root_type, int count,
                                 MPI_Datatype type, size_t *bytes_p,
                                 int *is_root_p)
{
    reason_t pre = R_COUNT;
    comm_state_t *st;
    int rank = -1;

    *bytes_p = 0;
    if (!L.booted)
        mpi_layer_bootstrap(0);
    if (root < 0 || comm == MPI_COMM_NULL)
        pre = R_ARGS;
    if (pre == R_COUNT && PMPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
        pre = R_ARGS;
    *is_root_p = pre == R_COUNT && rank == root;
    if (pre == R_COUNT)
        pre = *is_root_p ? plan_block(root_count, root_type, bytes_p)
                         : plan_block(count, type, bytes_p);
    if (*is_root_p && !in_place)
        pre = plan_other(pre, count, type, *bytes_p);
    st = gate(coll, comm, *bytes_p, pre);
    if (st != NULL && (root >= st->size || (!*is_root_p && in_place))) {
        pass(coll, R_ARGS);
        return NULL;
    }
    return st;
}

int mpi_layer_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype,
                     int root, MPI_Comm comm, int *ret_p)
{
    size_t bytes;
    comm_state_t *st;
    incoll_status_t status;
    int was_in, is_root, in_place = sendbuf == MPI_IN_PLACE;
    void *saved = NULL;

    st = rooted_gate(MPI_COLL_GATHER, comm, root, in_place, recvcount, recvtype,
                     sendcount, sendtype, &bytes, &is_root);
    if (st == NULL)
        return 0;
    if (bytes == 0) {
        L.offloaded[MPI_COLL_GATHER]++;
        *ret_p = MPI_SUCCESS;
        return 1;
    }
    if (in_place && L.cfg.agree) {
        saved = scratch(st, bytes);
        if (saved == NULL) {
            pass(MPI_COLL_GATHER, R_ARGS);
            return 0;
        }
        memcpy(saved, (char *)recvbuf + (size_t)root * bytes, bytes);
    }
    was_in = in_net(st);
    status = incoll_gather(st->icomm, in_place ? INCOLL_IN_PLACE : sendbuf,
                           is_root ? recvbuf : NULL, bytes, root);
    if (settle_coll(st, MPI_COLL_GATHER, comm, status, was_in, ret_p))
        return 1;
    if (saved)
        memcpy((char *)recvbuf + (size_t)root * bytes, saved, bytes);
    *ret_p = PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, root, comm);
    return 1;
}

int mpi_layer_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                      void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      int root, MPI_Comm comm, int *ret_p)
{
    size_t bytes;
    comm_state_t *st;
    incoll_status_t status;
    int was_in, is_root, in_place = recvbuf == MPI_IN_PLACE;

    st = rooted_gate(MPI_COLL_SCATTER, comm, root, in_place, sendcount,
                     sendtype, recvcount, recvtype, &bytes, &is_root);
    if (st == NULL)
        return 0;
    if (bytes == 0) {
        L.offloaded[MPI_COLL_SCATTER]++;
        *ret_p = MPI_SUCCESS;
        return 1;
    }
    was_in = in_net(st);
    status = incoll_scatter(st->icomm, is_root ? sendbuf : NULL,
                            in_place ? (void *)INCOLL_IN_PLACE : recvbuf, bytes,
                            root);
    if (settle_coll(st, MPI_COLL_SCATTER, comm, status, was_in, ret_p))
        return 1;
    *ret_p = PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                          recvtype, root, comm);
    return 1;
}

/* Both reduce_scatters once planned: count elements per rank. */
static int rs_call(mpi_coll_t coll, comm_state_t *st, const void *sendbuf,
                   void *recvbuf, size_t count, incoll_dtype_t idt,
                   incoll_op_t iop, size_t esize, MPI_Comm comm, int *ret_p,
                   void **saved_p)
{
    size_t all = count * esize * (size_t)st->size;
    incoll_status_t status;
    int was_in;

    *saved_p = NULL;
    if (sendbuf == MPI_IN_PLACE && L.cfg.agree) {
        *saved_p = scratch(st, all);
        if (*saved_p == NULL)
            status = INCOLL_ERR_NO_MEMORY;
        else
            memcpy(*saved_p, recvbuf, all);
    }
    was_in = in_net(st);
    status = incoll_reduce_scatter(
        st->icomm, sendbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sendbuf, recvbuf,
        count, idt, iop);
    if (settle_coll(st, coll, comm, status, was_in, ret_p))
        return 1;
    if (*saved_p)
        memcpy(recvbuf, *saved_p, all);
    return 0;
}

int mpi_layer_reduce_scatter_block(const void *sendbuf, void *recvbuf,
                                   int recvcount, MPI_Datatype dtype, MPI_Op op,
                                   MPI_Comm comm, int *ret_p)
{
    incoll_dtype_t idt = INCOLL_UINT8;
    incoll_op_t iop = INCOLL_OP_SUM;
    size_t bytes = 0;
    comm_state_t *st;
    reason_t pre;
    void *saved;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    pre = pair_find(dtype)
              ? R_DTYPE
              : plan_reduction(recvcount, dtype, op, &idt, &iop, &bytes);
    st = gate(MPI_COLL_REDUCE_SCATTER_BLOCK, comm, bytes, pre);
    if (st == NULL)
        return 0;
    if (bytes == 0) {
        L.offloaded[MPI_COLL_REDUCE_SCATTER_BLOCK]++;
        *ret_p = MPI_SUCCESS;
        return 1;
    }
    if (rs_call(MPI_COLL_REDUCE_SCATTER_BLOCK, st, sendbuf, recvbuf,
                (size_t)recvcount, idt, iop, bytes / (size_t)recvcount, comm,
                ret_p, &saved))
        return 1;
    *ret_p =
        PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, dtype, op, comm);
    return 1;
}

/* MPI_Reduce_scatter's recvcounts: equal ones (R_COUNT) go to the fabric
 * as a reduce_scatter_block. recvcounts is the same array on every rank:
 * so is the decision. */
static reason_t rs_counts(MPI_Comm comm, const int recvcounts[])
{
    int size = 0;

    if (comm == MPI_COMM_NULL || recvcounts == NULL ||
        PMPI_Comm_size(comm, &size) != MPI_SUCCESS || size < 1)
        return R_ARGS;
    for (int i = 1; i < size; i++)
        if (recvcounts[i] != recvcounts[0])
            return R_UNEQUAL;
    return R_COUNT;
}

int mpi_layer_reduce_scatter(const void *sendbuf, void *recvbuf,
                             const int recvcounts[], MPI_Datatype dtype,
                             MPI_Op op, MPI_Comm comm, int *ret_p)
{
    incoll_dtype_t idt = INCOLL_UINT8;
    incoll_op_t iop = INCOLL_OP_SUM;
    size_t bytes = 0;
    comm_state_t *st;
    reason_t pre;
    void *saved;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    pre = rs_counts(comm, recvcounts);
    if (pre == R_COUNT)
        pre = pair_find(dtype) ? R_DTYPE
                               : plan_reduction(recvcounts[0], dtype, op, &idt,
                                                &iop, &bytes);
    st = gate(MPI_COLL_REDUCE_SCATTER, comm, bytes, pre);
    if (st == NULL)
        return 0;
    if (bytes == 0) {
        L.offloaded[MPI_COLL_REDUCE_SCATTER]++;
        *ret_p = MPI_SUCCESS;
        return 1;
    }
    if (rs_call(MPI_COLL_REDUCE_SCATTER, st, sendbuf, recvbuf,
                (size_t)recvcounts[0], idt, iop, bytes / (size_t)recvcounts[0],
                comm, ret_p, &saved))
        return 1;
    *ret_p = PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, dtype, op, comm);
    return 1;
}

/* ---- for the nonblocking and persistent forms (mpi_nb.c) ---- */

/* The end every nonblocking plan shares, once gate() let the call in. */
static int nb_fill(mpi_coll_t coll, comm_state_t *st, int root, size_t bytes,
                   mpi_nb_plan_t *p)
{
    if (st == NULL)
        return 0;
    if (root >= st->size) {
        pass(coll, R_ARGS);
        return 0;
    }
    /* The ranks agreed the communicator left the network (switch_to_mpi):
     * its nonblocking collectives go to MPI, decided alike everywhere. */
    if (st->to_mpi) {
        pass(coll, R_LEFT);
        return 0;
    }
    p->st = st;
    p->icomm = st->icomm;
    p->bytes = bytes;
    p->was_in = in_net(st);
    return 1;
}

int mpi_layer_nb_plan(mpi_coll_t coll, MPI_Comm comm, int count,
                      MPI_Datatype dtype, MPI_Op op, int root, mpi_nb_plan_t *p)
{
    reason_t pre = R_COUNT;
    size_t bytes = 0;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    p->idt = INCOLL_UINT8;
    p->iop = INCOLL_OP_SUM;
    switch (coll) {
    case MPI_COLL_ALLREDUCE:
    case MPI_COLL_REDUCE:
    case MPI_COLL_REDUCE_SCATTER_BLOCK:
    case MPI_COLL_REDUCE_SCATTER:
        /* MINLOC and MAXLOC pairs go to MPI's nonblocking forms. */
        pre = pair_find(dtype)
                  ? R_DTYPE
                  : plan_reduction(count, dtype, op, &p->idt, &p->iop, &bytes);
        break;
    case MPI_COLL_BCAST:
        pre = root < 0 ? R_ARGS : plan_block(count, dtype, &bytes);
        break;
    case MPI_COLL_ALLGATHER:
        pre = plan_block(count, dtype, &bytes);
        break;
    case MPI_COLL_BARRIER:
        break;
    default:
        pre = R_ARGS;
    }
    /* The agreement after each call is a blocking MPI call of its own. */
    if (pre == R_COUNT && L.cfg.agree)
        pre = R_ARGS;
    return nb_fill(coll, gate(coll, comm, bytes, pre), root, bytes, p);
}

int mpi_layer_nb_plan_rooted(mpi_coll_t coll, MPI_Comm comm, int root,
                             int in_place, int root_count,
                             MPI_Datatype root_type, int count,
                             MPI_Datatype type, mpi_nb_plan_t *p,
                             int *is_root_p)
{
    size_t bytes = 0;
    comm_state_t *st;

    *is_root_p = 0;
    p->idt = INCOLL_UINT8;
    p->iop = INCOLL_OP_SUM;
    if (!L.booted)
        mpi_layer_bootstrap(0);
    if (L.cfg.agree) {
        (void)gate(coll, comm, 0, R_ARGS); /* counts the reason */
        return 0;
    }
    st = rooted_gate(coll, comm, root, in_place, root_count, root_type, count,
                     type, &bytes, is_root_p);
    return nb_fill(coll, st, root, bytes, p);
}

int mpi_layer_nb_plan_rs(MPI_Comm comm, const int recvcounts[],
                         MPI_Datatype dtype, MPI_Op op, mpi_nb_plan_t *p)
{
    reason_t pre;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    pre = rs_counts(comm, recvcounts);
    if (pre != R_COUNT) {
        (void)gate(MPI_COLL_REDUCE_SCATTER, comm, 0, pre);
        return 0;
    }
    return mpi_layer_nb_plan(MPI_COLL_REDUCE_SCATTER, comm, recvcounts[0],
                             dtype, op, 0, p);
}

int mpi_layer_nb_in_net(void *st)
{
    return in_net(st);
}

int mpi_layer_nb_settle(void *st, mpi_coll_t coll, MPI_Comm comm,
                        incoll_status_t status, int was_in, int persistent)
{
    int ret = MPI_SUCCESS;
    if (persistent)
        L.persistent[coll]++;
    else
        L.nb[coll]++;
    settle(st, coll, comm, status, was_in, &ret);
    return ret;
}
