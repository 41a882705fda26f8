/*
 * The MPI layer's view of datatypes and ops: which predefined datatypes
 * and ops incoll reduces (the tables), and what one side of a call is
 * (count elements of a datatype at a buffer): the bytes of its type
 * signature, the one basic type the signature repeats, and whether those
 * bytes lie in the buffer in signature order without gaps ("dense"), so
 * that libincoll can read or write them where they are.
 *
 * Why it matters: MPI requires only that the type signatures of the two
 * ends of a collective match, not their (count, datatype) pairs. A root
 * may send one element of an MPI_Type_vector of n doubles where the other
 * ranks receive n MPI_DOUBLE, or gather with MPI_IN_PLACE and
 * MPI_DATATYPE_NULL where the others send. So the layer decides where a
 * call runs only from what every rank knows alike: the bytes of the
 * signature (data-moving collectives) or its basic type and element count
 * (reductions, whose datatype is the same everywhere). The layout is each
 * rank's own business: a side that is not dense is packed into a buffer
 * of the call (PMPI_Pack) before libincoll reads it, or unpacked from one
 * after libincoll wrote it (PMPI_Unpack), and the rank still takes the
 * path every other rank takes.
 *
 * A derived datatype's analysis (envelope and contents, recursively) is
 * cached on the datatype as an attribute, which MPI frees with it.
 */
#include "mpi/mpi_layer.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Datatype kinds, after MPI's groups of basic types (MPI 4.0, 6.9.2). */
enum {
    K_CINT = 1, /* C integer, signed: arithmetic, logical and bitwise ops */
    K_CUINT,    /* C integer, unsigned */
    K_FINT,     /* Fortran integer: arithmetic and bitwise ops */
    K_FLOAT,    /* floating point: arithmetic ops */
    K_BOOL,     /* C bool: logical ops */
    K_BYTE,     /* MPI_BYTE: bitwise ops */
    K_BCAST,    /* any other contiguous predefined type: moved, not reduced */
};

#define DT_MAX 64
#define PAIR_MAX 8
/* Deeper nesting than this is not analysed (the side is packed, and a
 * reduction on it goes to MPI). */
#define DEPTH_MAX 16

static mpi_dt_entry_t dts[DT_MAX];
static int ndts;
/* The entry mpi_dt_find found last: a program calls its collectives on
 * a few datatypes, and the scan of the table was a fifth of what deciding
 * a call cost (docs/tuning.md, "What the decision costs"). The table
 * holds predefined types only, which are never freed, so a handle found
 * once stays that entry. */
static const mpi_dt_entry_t *dt_last;
static mpi_pair_t pairs[PAIR_MAX];
static int npairs;
static int info_keyval = MPI_KEYVAL_INVALID;

/* A derived datatype's analysis, cached on it. */
typedef struct {
    MPI_Datatype basic; /* MPI_DATATYPE_NULL: several, or unknown */
    int dense;
} dt_info_t;

/* ---- the tables ---- */

static void dt_add(MPI_Datatype dt, int kind)
{
    mpi_dt_entry_t *e;
    int size = 0;
    MPI_Aint lb = 0, extent = 0;

    if (dt == MPI_DATATYPE_NULL || ndts >= DT_MAX)
        return;
    for (int i = 0; i < ndts; i++)
        if (dts[i].dt == dt)
            return; /* an alias such as MPI_LONG_LONG_INT */
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || size <= 0 ||
        PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS || lb != 0 ||
        extent != size)
        return;
    e = &dts[ndts];
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
    ndts++;
}

/* The predefined datatypes the layer reduces, most used first. MPI_CHAR is
 * not a C integer for MPI's reductions (MPI 4.0, 6.9.2), so it is moved
 * only, as MPI_WCHAR and the Fortran non-numeric types are. */
static void dt_table_build(void)
{
    __atomic_store_n(&dt_last, NULL, __ATOMIC_RELAXED);
    ndts = 0;
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

const mpi_dt_entry_t *mpi_dt_find(MPI_Datatype dt)
{
    const mpi_dt_entry_t *e = __atomic_load_n(&dt_last, __ATOMIC_RELAXED);
    if (e != NULL && e->dt == dt)
        return e;
    for (int i = 0; i < ndts; i++)
        if (dts[i].dt == dt) {
            __atomic_store_n(&dt_last, &dts[i], __ATOMIC_RELAXED);
            return &dts[i];
        }
    return NULL;
}

int mpi_dt_reducible(const mpi_dt_entry_t *e)
{
    return e != NULL && e->kind != K_BCAST;
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

    if (dt == MPI_DATATYPE_NULL || npairs >= PAIR_MAX ||
        vdt == INCOLL_DTYPE_COUNT)
        return;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS ||
        size != vsize + (int)sizeof(int) ||
        PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS || lb != 0 ||
        (size_t)ext != extent)
        return;
    pairs[npairs++] = (mpi_pair_t){dt, vdt, vsize, ioff, extent};
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
    npairs = 0;
    PAIR_ADD(MPI_2INT, pair_2int_t, int_dtype(sizeof(int)));
    PAIR_ADD(MPI_FLOAT_INT, pair_float_int_t, INCOLL_FLOAT32);
    PAIR_ADD(MPI_DOUBLE_INT, pair_double_int_t, INCOLL_FLOAT64);
    PAIR_ADD(MPI_LONG_INT, pair_long_int_t, int_dtype(sizeof(long)));
    PAIR_ADD(MPI_SHORT_INT, pair_short_int_t, int_dtype(sizeof(short)));
}

const mpi_pair_t *mpi_pair_find(MPI_Datatype dt)
{
    for (int i = 0; i < npairs; i++)
        if (pairs[i].dt == dt)
            return &pairs[i];
    return NULL;
}

int mpi_op_map(MPI_Op op, incoll_op_t *iop_p)
{
    static const incoll_op_t iops[] = {
        INCOLL_OP_SUM,  INCOLL_OP_PROD, INCOLL_OP_MIN,  INCOLL_OP_MAX,
        INCOLL_OP_LAND, INCOLL_OP_LOR,  INCOLL_OP_LXOR, INCOLL_OP_BAND,
        INCOLL_OP_BOR,  INCOLL_OP_BXOR};
    /* Handles are not constant expressions in every MPI. */
    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN,  MPI_MAX, MPI_LAND,
                          MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};

    for (size_t i = 0; i < sizeof(iops) / sizeof(iops[0]); i++) {
        if (ops[i] == op) {
            *iop_p = iops[i];
            return 1;
        }
    }
    return 0;
}

int mpi_op_applies(incoll_op_t iop, const mpi_dt_entry_t *e)
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

/* ---- analysis of derived datatypes ---- */

static int info_delete(MPI_Datatype dt, int keyval, void *attr, void *extra)
{
    (void)dt;
    (void)keyval;
    (void)extra;
    free(attr);
    return MPI_SUCCESS;
}

static int combiner_of(MPI_Datatype dt, int *ni, int *na, int *nd)
{
    int comb = -1;
    if (PMPI_Type_get_envelope(dt, ni, na, nd, &comb) != MPI_SUCCESS)
        return -1;
    return comb;
}

int mpi_dt_predefined(MPI_Datatype dt)
{
    int ni, na, nd;
    if (dt == MPI_DATATYPE_NULL)
        return 0;
    if (mpi_dt_find(dt) || mpi_pair_find(dt))
        return 1;
    return combiner_of(dt, &ni, &na, &nd) == MPI_COMBINER_NAMED;
}

/* A predefined datatype is dense when its bytes have no padding. */
static int named_dense(MPI_Datatype dt)
{
    MPI_Aint lb = 0, extent = 0;
    int size = 0;
    return PMPI_Type_size(dt, &size) == MPI_SUCCESS &&
           PMPI_Type_get_extent(dt, &lb, &extent) == MPI_SUCCESS && lb == 0 &&
           extent == size;
}

/* 1 when consecutive elements of dt adjoin (extent equals size). */
static int adjoins(MPI_Datatype dt)
{
    MPI_Aint lb = 0, extent = 0;
    int size = 0;
    return PMPI_Type_size(dt, &size) == MPI_SUCCESS &&
           PMPI_Type_get_extent(dt, &lb, &extent) == MPI_SUCCESS &&
           extent == size;
}

/*
 * The one basic type of dt's signature (dt itself when predefined; NULL
 * when it mixes several or the layer cannot tell, e.g. the Fortran
 * parameterized types) and whether one element of dt is dense: built only
 * of duplicates, contiguous runs of adjoining dense elements and resized
 * dense types, so that its bytes lie in signature order without gaps
 * (any other constructor is packed, which is always right).
 */
static void analyse(MPI_Datatype dt, int depth, MPI_Datatype *basic_p,
                    int *dense_p)
{
    int ni = 0, na = 0, nd = 0, comb, nkids, first = 1;
    int *ints = NULL;
    MPI_Aint *aints = NULL;
    MPI_Datatype *kids = NULL, basic = MPI_DATATYPE_NULL;
    int kid_dense = 0;

    *basic_p = MPI_DATATYPE_NULL;
    *dense_p = 0;
    comb = combiner_of(dt, &ni, &na, &nd);
    if (comb == MPI_COMBINER_NAMED) {
        *basic_p = dt;
        *dense_p = named_dense(dt);
        return;
    }
    if (comb < 0 || depth >= DEPTH_MAX || nd <= 0)
        return;
    ints = malloc((size_t)(ni > 0 ? ni : 1) * sizeof(int));
    aints = malloc((size_t)(na > 0 ? na : 1) * sizeof(MPI_Aint));
    kids = malloc((size_t)nd * sizeof(MPI_Datatype));
    if (ints == NULL || aints == NULL || kids == NULL ||
        PMPI_Type_get_contents(dt, ni, na, nd, ints, aints, kids) !=
            MPI_SUCCESS) {
        free(ints);
        free(aints);
        free(kids);
        return;
    }
    nkids = nd;
    for (int i = 0; i < nkids; i++) {
        MPI_Datatype b;
        int d;
        /* A struct's block of no elements adds nothing to the signature. */
        if (comb == MPI_COMBINER_STRUCT && ni > i + 1 && ints[i + 1] == 0)
            continue;
        analyse(kids[i], depth + 1, &b, &d);
        if (first) {
            basic = b;
            kid_dense = d;
            first = 0;
        } else if (b != basic) {
            basic = MPI_DATATYPE_NULL;
        }
    }
    *basic_p = first ? MPI_DATATYPE_NULL : basic;
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:
        *dense_p = kid_dense;
        break;
    case MPI_COMBINER_CONTIGUOUS:
        *dense_p = kid_dense && (ints[0] <= 1 || adjoins(kids[0]));
        break;
    default:
        break;
    }
    /* get_contents gives new handles of derived children: ours to free. */
    for (int i = 0; i < nkids; i++) {
        int a, b, c;
        if (kids[i] != MPI_DATATYPE_NULL &&
            combiner_of(kids[i], &a, &b, &c) != MPI_COMBINER_NAMED)
            PMPI_Type_free(&kids[i]);
    }
    free(ints);
    free(aints);
    free(kids);
}

/* dt's analysis, from its cache attribute or made now (and cached). */
static void dt_info(MPI_Datatype dt, MPI_Datatype *basic_p, int *dense_p)
{
    dt_info_t *info = NULL;
    int flag = 0;

    if (info_keyval != MPI_KEYVAL_INVALID &&
        PMPI_Type_get_attr(dt, info_keyval, &info, &flag) == MPI_SUCCESS &&
        flag && info) {
        *basic_p = info->basic;
        *dense_p = info->dense;
        return;
    }
    analyse(dt, 0, basic_p, dense_p);
    if (info_keyval == MPI_KEYVAL_INVALID || *basic_p == dt)
        return; /* predefined: nothing to cache on */
    info = malloc(sizeof(*info));
    if (info == NULL)
        return;
    info->basic = *basic_p;
    info->dense = *dense_p;
    if (PMPI_Type_set_attr(dt, info_keyval, info) != MPI_SUCCESS)
        free(info);
}

/* ---- sides ---- */

int mpi_side_make(const void *buf, int count, MPI_Datatype dt, mpi_side_t *s)
{
    const mpi_dt_entry_t *e;
    MPI_Datatype basic = MPI_DATATYPE_NULL;
    MPI_Aint lb = 0, extent = 0, tlb = 0, textent = 0;
    int size = 0, dense = 0, bsize = 0;

    memset(s, 0, sizeof(*s));
    s->buf = (void *)buf;
    s->count = count;
    s->dt = dt;
    s->basic = MPI_DATATYPE_NULL;
    if (count < 0)
        return -1;
    if (count == 0) {
        /* No bytes: the datatype is not looked at (it may be
         * MPI_DATATYPE_NULL where MPI ignores it). */
        s->data = (char *)buf;
        return 0;
    }
    if (dt == MPI_DATATYPE_NULL)
        return -1;
    e = mpi_dt_find(dt);
    if (e) {
        /* The table's types are dense, with no lower bound. */
        s->bytes = (size_t)count * (size_t)e->size;
        s->basic = dt;
        s->nbasic = (size_t)count;
        s->data = (char *)buf;
        return 0;
    }
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || size < 0 ||
        size == MPI_UNDEFINED)
        return -1;
    s->bytes = (size_t)count * (size_t)size;
    if (size == 0) {
        s->data = (char *)buf;
        return 0;
    }
    dt_info(dt, &basic, &dense);
    if (basic != MPI_DATATYPE_NULL &&
        PMPI_Type_size(basic, &bsize) == MPI_SUCCESS && bsize > 0 &&
        s->bytes % (size_t)bsize == 0) {
        s->basic = basic;
        s->nbasic = s->bytes / (size_t)bsize;
    }
    if (dense && PMPI_Type_get_extent(dt, &lb, &extent) == MPI_SUCCESS &&
        PMPI_Type_get_true_extent(dt, &tlb, &textent) == MPI_SUCCESS &&
        textent == size && (count == 1 || extent == size))
        s->data = (char *)((uintptr_t)buf + (uintptr_t)tlb);
    return 0;
}

int mpi_side_pack(const mpi_side_t *s, void *dst)
{
    int pos = 0, ret;

    if (s->bytes == 0)
        return MPI_SUCCESS;
    if (s->data) {
        memcpy(dst, s->data, s->bytes);
        return MPI_SUCCESS;
    }
    if (s->bytes > INT32_MAX)
        return MPI_ERR_COUNT;
    ret = PMPI_Pack(s->buf, s->count, s->dt, dst, (int)s->bytes, &pos,
                    MPI_COMM_SELF);
    if (ret == MPI_SUCCESS && (size_t)pos != s->bytes)
        ret = MPI_ERR_INTERN;
    return ret;
}

int mpi_side_unpack(const mpi_side_t *s, const void *src)
{
    int pos = 0, ret;

    if (s->bytes == 0)
        return MPI_SUCCESS;
    if (s->data) {
        memmove(s->data, src, s->bytes);
        return MPI_SUCCESS;
    }
    if (s->bytes > INT32_MAX)
        return MPI_ERR_COUNT;
    ret = PMPI_Unpack(src, (int)s->bytes, &pos, s->buf, s->count, s->dt,
                      MPI_COMM_SELF);
    if (ret == MPI_SUCCESS && (size_t)pos != s->bytes)
        ret = MPI_ERR_INTERN;
    return ret;
}

int mpi_side_keep(mpi_side_t *s)
{
    MPI_Datatype dup;

    if (s->owned || s->data || s->bytes == 0 || mpi_dt_predefined(s->dt))
        return MPI_SUCCESS;
    if (PMPI_Type_dup(s->dt, &dup) != MPI_SUCCESS)
        return MPI_ERR_TYPE;
    s->dt = dup;
    s->owned = 1;
    return MPI_SUCCESS;
}

void mpi_side_release(mpi_side_t *s)
{
    if (s->owned)
        PMPI_Type_free(&s->dt);
    s->owned = 0;
}

/* Packing must give a side's bytes in signature order, nothing more: a
 * vector of doubles and a struct with a gap packed and compared with the
 * same values laid out by hand. */
static int pack_is_raw(void)
{
    double v[6] = {1.5, -1, 2.5, -1, 3.5, -1}, got[3] = {0};
    struct probe {
        int i;
        double d;
    } st = {7, 8.25};
    char want_st[sizeof(int) + sizeof(double)], got_st[sizeof(want_st)];
    MPI_Datatype vec = MPI_DATATYPE_NULL, sty = MPI_DATATYPE_NULL;
    int bl[2] = {1, 1}, ok = 0;
    MPI_Aint disp[2] = {0, offsetof(struct probe, d)};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
    mpi_side_t s;

    memcpy(want_st, &st.i, sizeof(int));
    memcpy(want_st + sizeof(int), &st.d, sizeof(double));
    if (PMPI_Type_vector(3, 1, 2, MPI_DOUBLE, &vec) != MPI_SUCCESS ||
        PMPI_Type_commit(&vec) != MPI_SUCCESS ||
        PMPI_Type_create_struct(2, bl, disp, types, &sty) != MPI_SUCCESS ||
        PMPI_Type_commit(&sty) != MPI_SUCCESS)
        goto out;
    if (mpi_side_make(v, 1, vec, &s) != 0 || s.data != NULL ||
        s.bytes != sizeof(got) || s.basic != MPI_DOUBLE || s.nbasic != 3 ||
        mpi_side_pack(&s, got) != MPI_SUCCESS || got[0] != 1.5 ||
        got[1] != 2.5 || got[2] != 3.5)
        goto out;
    if (mpi_side_make(&st, 1, sty, &s) != 0 || s.data != NULL ||
        s.bytes != sizeof(got_st) || s.basic != MPI_DATATYPE_NULL ||
        mpi_side_pack(&s, got_st) != MPI_SUCCESS ||
        memcmp(got_st, want_st, sizeof(got_st)) != 0)
        goto out;
    ok = 1;
out:
    if (vec != MPI_DATATYPE_NULL)
        PMPI_Type_free(&vec);
    if (sty != MPI_DATATYPE_NULL)
        PMPI_Type_free(&sty);
    return ok;
}

int mpi_dtype_init(void)
{
    dt_table_build();
    pair_table_build();
    if (info_keyval == MPI_KEYVAL_INVALID)
        PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, info_delete,
                                &info_keyval, NULL);
    return pack_is_raw();
}
