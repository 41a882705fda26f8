/*
 * conform: what MPI allows in a collective call and a layer under the
 * program must keep. Every collective libincoll_mpi offloads, in its
 * blocking, nonblocking and persistent forms, on MPI_COMM_WORLD and on a
 * reversed copy of it (a split with keys reversed), with
 *
 *  - mixed layouts between the root and the others, and between ranks:
 *    the same bytes described as plain ints, a duplicate of MPI_INT, a
 *    contiguous type, a vector and a resized int (every other int), a
 *    struct of two ints with a gap, a struct of two ints in reverse order
 *    (its bytes are not in memory order), as MPI's type matching allows;
 *  - MPI_IN_PLACE at the root only, with the arguments MPI then ignores
 *    given as -1 and MPI_DATATYPE_NULL, and NULL / -1 /
 *    MPI_DATATYPE_NULL for the receive side of a gather's non-roots and
 *    the send side of a scatter's;
 *  - zero-byte calls: zero counts, a zero-size datatype with a count;
 *  - datatypes (and a user op, which MPI runs) freed by the program while
 *    a nonblocking call or the last start of a persistent one is pending;
 *  - persistent requests started in a different order on odd and even
 *    ranks (MPI matches them by their initialization);
 *  - an MPI_Iallreduce (the layer's) waited for while another rank waits
 *    in MPI for an MPI_Ialltoall (MPI's own) posted before it, and posts
 *    its MPI_Iallreduce only after that.
 *
 * Each result is checked against its closed form over the whole buffer:
 * the ints a layout leaves out must still hold what the program put there.
 * The buffers of every check also go into a digest per rank and section
 * (collective and form), which rank 0 prints at the end, one line per
 * section ("conform: gather persistent: 36 checks digest ..."), then
 * "conform: ok": the test runs the program with the layer and without it
 * (INCOLL_MPI_ENABLE=0) and wants the same lines. "--skip NAME:FORM"
 * leaves a section out (for an MPI whose own implementation of it is
 * broken). A mismatch names the call and aborts the job.
 */
#include <mpi.h>
#ifdef OPEN_MPI
#include <mpi-ext.h>
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OPEN_MPI) && defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define P_INIT(name) MPIX_##name##_init
#elif !defined(OPEN_MPI) && MPI_VERSION >= 4
#define P_INIT(name) MPI_##name##_init
#endif
#ifdef P_INIT
#define BCAST_INIT P_INIT(Bcast)
#define GATHER_INIT P_INIT(Gather)
#define SCATTER_INIT P_INIT(Scatter)
#define ALLGATHER_INIT P_INIT(Allgather)
#define ALLREDUCE_INIT P_INIT(Allreduce)
#define REDUCE_INIT P_INIT(Reduce)
#define RSB_INIT P_INIT(Reduce_scatter_block)
#define RS_INIT P_INIT(Reduce_scatter)
#define BARRIER_INIT P_INIT(Barrier)
#endif

#define BLK 6     /* ints in one rank's block */
#define ROUNDS 3  /* starts of each persistent request */
#define SENT (-7) /* what a layout's gaps hold */

typedef enum { F_BLOCK, F_NB, F_PERS, F_COUNT } form_t;
static const char *const form_names[F_COUNT] = {"blocking", "nonblocking",
                                                "persistent"};

/* Sections of the run, each with its checks and digest per form. */
typedef enum {
    S_BCAST,
    S_GATHER,
    S_SCATTER,
    S_ALLGATHER,
    S_ALLREDUCE,
    S_REDUCE,
    S_RSB,
    S_RS,
    S_BARRIER,
    S_ZERO,
    S_ORDER, /* persistent requests started out of order */
    S_MIX,   /* the layer's and MPI's own nonblocking calls together */
    S_MPI,   /* calls the layer leaves to MPI */
    S_COUNT
} section_t;
static const char *const section_names[S_COUNT] = {"bcast",
                                                   "gather",
                                                   "scatter",
                                                   "allgather",
                                                   "allreduce",
                                                   "reduce",
                                                   "reduce_scatter_block",
                                                   "reduce_scatter",
                                                   "barrier",
                                                   "zero",
                                                   "order",
                                                   "mix",
                                                   "mpi"};

static int wrank;
static long nchk[S_COUNT][F_COUNT];
static uint32_t dig[S_COUNT][F_COUNT];
static int skip[S_COUNT][F_COUNT];
static section_t cur_s;
static form_t cur_f;

/* 1 when section s of form f runs; it is then the current one. */
static int section(section_t s, form_t f)
{
    cur_s = s;
    cur_f = f;
    return !skip[s][f];
}

static void counted(void)
{
    nchk[cur_s][cur_f]++;
}

/* ---- layouts of one block of BLK ints ---- */

enum {
    L_INT,     /* MPI_INT x BLK */
    L_DUP,     /* a duplicate of MPI_INT x BLK */
    L_CONTIG,  /* contiguous(BLK, MPI_INT) x 1 */
    L_VEC,     /* vector(BLK, 1, 2, MPI_INT) x 1: every other int */
    L_RESIZED, /* MPI_INT resized to 2 ints x BLK: every other int */
    L_STRUCT,  /* {int at 0, int at 3}, extent 4 ints, x BLK/2 */
    L_SWAP,    /* {int at 1, int at 0} x BLK/2: pairs in reverse order */
    L_COUNT
};

typedef struct {
    int kind;
    MPI_Datatype dt;
    int count; /* elements of dt in one block */
    int ext;   /* extent of dt in ints */
} layout_t;

static void fail(const char *what, MPI_Comm comm, long at, int got, int want)
{
    char name[MPI_MAX_OBJECT_NAME] = "";
    int n = 0;
    MPI_Comm_get_name(comm, name, &n);
    fprintf(stderr, "conform: rank %d: %s on %s: int %ld is %d, want %d\n",
            wrank, what, name, at, got, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* A new layout of kind k (a new datatype each time, so the caller may free
 * it whenever MPI allows). */
static layout_t layout(int k)
{
    layout_t l = {k, MPI_INT, BLK, 1};
    MPI_Datatype t;
    int bl[2] = {1, 1};
    MPI_Aint disp[2];
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};

    switch (k) {
    case L_DUP:
        MPI_Type_dup(MPI_INT, &l.dt);
        break;
    case L_CONTIG:
        MPI_Type_contiguous(BLK, MPI_INT, &l.dt);
        l.count = 1;
        l.ext = BLK;
        break;
    case L_VEC:
        MPI_Type_vector(BLK, 1, 2, MPI_INT, &l.dt);
        l.count = 1;
        l.ext = 2 * BLK - 1;
        break;
    case L_RESIZED:
        MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &l.dt);
        l.ext = 2;
        break;
    case L_STRUCT:
        disp[0] = 0;
        disp[1] = 3 * sizeof(int);
        MPI_Type_create_struct(2, bl, disp, types, &t);
        MPI_Type_create_resized(t, 0, 4 * sizeof(int), &l.dt);
        MPI_Type_free(&t);
        l.count = BLK / 2;
        l.ext = 4;
        break;
    case L_SWAP:
        disp[0] = sizeof(int);
        disp[1] = 0;
        MPI_Type_create_struct(2, bl, disp, types, &l.dt);
        l.count = BLK / 2;
        l.ext = 2;
        break;
    default:
        break;
    }
    if (l.dt != MPI_INT)
        MPI_Type_commit(&l.dt);
    return l;
}

static void layout_free(layout_t *l)
{
    if (l->dt != MPI_INT && l->dt != MPI_DATATYPE_NULL)
        MPI_Type_free(&l->dt);
    l->dt = MPI_DATATYPE_NULL;
}

/* Where the i-th int of a block's signature lies, in ints from the start
 * of the block. */
static int pos(const layout_t *l, int i)
{
    switch (l->kind) {
    case L_VEC:
    case L_RESIZED:
        return 2 * i;
    case L_STRUCT:
        return 4 * (i / 2) + 3 * (i % 2);
    case L_SWAP:
        return 2 * (i / 2) + 1 - i % 2;
    default:
        return i;
    }
}

/* Ints from one block to the next, and a buffer for nb blocks. */
static int span(const layout_t *l)
{
    return l->count * l->ext;
}

static int *buf_new(const layout_t *l, int nb)
{
    int n = span(l) * nb + 4;
    int *b = malloc((size_t)n * sizeof(int));
    if (b == NULL) {
        fprintf(stderr, "conform: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < n; i++)
        b[i] = SENT;
    return b;
}

static int val(int origin, int i, int salt)
{
    return 1000 * origin + 10 * i + salt + 1;
}

/* Puts block b of origin's values into buf (laid out as l). */
static void put(const layout_t *l, int *buf, int b, int origin, int salt)
{
    for (int i = 0; i < BLK; i++)
        buf[b * span(l) + pos(l, i)] = val(origin, i, salt);
}

/* Compares the whole buffer (nb blocks laid out as l) with want, and adds
 * it to the digest. */
static void same(const char *what, MPI_Comm comm, const int *got,
                 const int *want, const layout_t *l, int nb)
{
    int n = span(l) * nb + 4;
    uint32_t *d = &dig[cur_s][cur_f];
    if (*d == 0)
        *d = 2166136261u;
    for (int i = 0; i < n; i++) {
        if (got[i] != want[i])
            fail(what, comm, i, got[i], want[i]);
        for (int k = 0; k < 4; k++)
            *d = (*d ^ (uint8_t)((uint32_t)got[i] >> (8 * k))) * 16777619u;
    }
    counted();
}

/* Starts persistent req and waits for it; in its last round the program
 * frees the datatypes a and b (when not NULL) while it is active. */
static void start_wait(MPI_Request *req, int last, layout_t *a, layout_t *b)
{
    MPI_Start(req);
    if (last && a)
        layout_free(a);
    if (last && b)
        layout_free(b);
    MPI_Wait(req, MPI_STATUS_IGNORE);
}

/* ---- data-moving collectives ---- */

/* MPI_Bcast from root: the root's block laid out as kr, the others' as
 * ko. */
static void do_bcast(MPI_Comm comm, form_t f, int kr, int ko, int root)
{
    int rank, rounds = f == F_PERS ? ROUNDS : 1;
    layout_t l;
    int *buf, *want;
    MPI_Request req = MPI_REQUEST_NULL;

    MPI_Comm_rank(comm, &rank);
    l = layout(rank == root ? kr : ko);
    buf = buf_new(&l, 1);
    want = buf_new(&l, 1);
#ifdef P_INIT
    if (f == F_PERS) {
        BCAST_INIT(buf, l.count, l.dt, root, comm, MPI_INFO_NULL, &req);
    }
#endif
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < span(&l) + 4; i++)
            buf[i] = SENT;
        if (rank == root)
            put(&l, buf, 0, root, r);
        if (f == F_BLOCK) {
            MPI_Bcast(buf, l.count, l.dt, root, comm);
        } else if (f == F_NB) {
            MPI_Ibcast(buf, l.count, l.dt, root, comm, &req);
            layout_free(&l);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            start_wait(&req, r == rounds - 1, &l, NULL);
        }
        put(&l, want, 0, root, r);
        same("bcast", comm, buf, want, &l, 1);
    }
    if (f == F_PERS)
        MPI_Request_free(&req);
    layout_free(&l);
    free(buf);
    free(want);
}

/* MPI_Gather to root: the root receives as kr (in place: its block is
 * there already, its send side -1 and MPI_DATATYPE_NULL), the others send
 * as ko and give NULL, -1, MPI_DATATYPE_NULL as the receive side. */
static void do_gather(MPI_Comm comm, form_t f, int kr, int ko, int root,
                      int in_place)
{
    int rank, size, rounds = f == F_PERS ? ROUNDS : 1, isroot;
    layout_t lr, ls;
    int *rbuf = NULL, *sbuf, *want = NULL, *sw;
    MPI_Request req = MPI_REQUEST_NULL;
    const void *sarg;
    int scount;
    MPI_Datatype stype;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    isroot = rank == root;
    lr = layout(kr);
    ls = layout(isroot ? kr : ko);
    sbuf = buf_new(&ls, 1);
    sw = buf_new(&ls, 1);
    if (isroot) {
        rbuf = buf_new(&lr, size);
        want = buf_new(&lr, size);
    }
    sarg = isroot && in_place ? MPI_IN_PLACE : sbuf;
    scount = isroot && in_place ? -1 : ls.count;
    stype = isroot && in_place ? MPI_DATATYPE_NULL : ls.dt;
#ifdef P_INIT
    if (f == F_PERS) {
        if (isroot) {
            GATHER_INIT(sarg, scount, stype, rbuf, lr.count, lr.dt, root, comm,
                        MPI_INFO_NULL, &req);
        } else {
            GATHER_INIT(sarg, scount, stype, NULL, -1, MPI_DATATYPE_NULL, root,
                        comm, MPI_INFO_NULL, &req);
        }
    }
#endif
    for (int r = 0; r < rounds; r++) {
        put(&ls, sbuf, 0, rank, r);
        if (isroot) {
            for (int i = 0; i < span(&lr) * size + 4; i++)
                rbuf[i] = SENT;
            if (in_place)
                put(&lr, rbuf, root, root, r);
        }
        if (f == F_BLOCK) {
            if (isroot)
                MPI_Gather(sarg, scount, stype, rbuf, lr.count, lr.dt, root,
                           comm);
            else
                MPI_Gather(sarg, scount, stype, NULL, -1, MPI_DATATYPE_NULL,
                           root, comm);
        } else if (f == F_NB) {
            if (isroot)
                MPI_Igather(sarg, scount, stype, rbuf, lr.count, lr.dt, root,
                            comm, &req);
            else
                MPI_Igather(sarg, scount, stype, NULL, -1, MPI_DATATYPE_NULL,
                            root, comm, &req);
            layout_free(&lr);
            layout_free(&ls);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            start_wait(&req, r == rounds - 1, &lr, &ls);
        }
        /* The send side is untouched, the root has every block. */
        for (int i = 0; i < span(&ls) + 4; i++)
            sw[i] = SENT;
        put(&ls, sw, 0, rank, r);
        same("gather (send side)", comm, sbuf, sw, &ls, 1);
        if (isroot) {
            for (int b = 0; b < size; b++)
                put(&lr, want, b, b, r);
            same("gather", comm, rbuf, want, &lr, size);
        }
    }
    if (f == F_PERS)
        MPI_Request_free(&req);
    layout_free(&lr);
    layout_free(&ls);
    free(sbuf);
    free(sw);
    free(rbuf);
    free(want);
}

/* MPI_Scatter from root: the root sends as kr (in place: it keeps its
 * block, its receive side MPI_IN_PLACE, -1, MPI_DATATYPE_NULL), the others
 * receive as ko and give NULL, -1, MPI_DATATYPE_NULL as the send side. */
static void do_scatter(MPI_Comm comm, form_t f, int kr, int ko, int root,
                       int in_place)
{
    int rank, size, rounds = f == F_PERS ? ROUNDS : 1, isroot;
    layout_t ls, lr;
    int *sbuf = NULL, *rbuf, *want, *sw = NULL;
    MPI_Request req = MPI_REQUEST_NULL;
    void *rarg;
    int rcount;
    MPI_Datatype rtype;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    isroot = rank == root;
    ls = layout(kr);
    lr = layout(isroot ? kr : ko);
    rbuf = buf_new(&lr, 1);
    want = buf_new(&lr, 1);
    if (isroot) {
        sbuf = buf_new(&ls, size);
        sw = buf_new(&ls, size);
    }
    rarg = isroot && in_place ? MPI_IN_PLACE : rbuf;
    rcount = isroot && in_place ? -1 : lr.count;
    rtype = isroot && in_place ? MPI_DATATYPE_NULL : lr.dt;
#ifdef P_INIT
    if (f == F_PERS) {
        if (isroot) {
            SCATTER_INIT(sbuf, ls.count, ls.dt, rarg, rcount, rtype, root, comm,
                         MPI_INFO_NULL, &req);
        } else {
            SCATTER_INIT(NULL, -1, MPI_DATATYPE_NULL, rarg, rcount, rtype, root,
                         comm, MPI_INFO_NULL, &req);
        }
    }
#endif
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < span(&lr) + 4; i++)
            rbuf[i] = SENT;
        if (isroot)
            for (int b = 0; b < size; b++)
                put(&ls, sbuf, b, b, r);
        if (f == F_BLOCK) {
            if (isroot)
                MPI_Scatter(sbuf, ls.count, ls.dt, rarg, rcount, rtype, root,
                            comm);
            else
                MPI_Scatter(NULL, -1, MPI_DATATYPE_NULL, rarg, rcount, rtype,
                            root, comm);
        } else if (f == F_NB) {
            if (isroot)
                MPI_Iscatter(sbuf, ls.count, ls.dt, rarg, rcount, rtype, root,
                             comm, &req);
            else
                MPI_Iscatter(NULL, -1, MPI_DATATYPE_NULL, rarg, rcount, rtype,
                             root, comm, &req);
            layout_free(&lr);
            layout_free(&ls);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            start_wait(&req, r == rounds - 1, &lr, &ls);
        }
        if (!(isroot && in_place))
            put(&lr, want, 0, rank, r);
        same("scatter", comm, rbuf, want, &lr, 1);
        if (isroot) {
            for (int b = 0; b < size; b++)
                put(&ls, sw, b, b, r);
            same("scatter (send side)", comm, sbuf, sw, &ls, size);
        }
    }
    if (f == F_PERS)
        MPI_Request_free(&req);
    layout_free(&lr);
    layout_free(&ls);
    free(sbuf);
    free(sw);
    free(rbuf);
    free(want);
}

/* MPI_Allgather: rank r sends as ks[r % n] and receives as kr[r % n] (in
 * place: its block is in its receive buffer, the send side -1 and
 * MPI_DATATYPE_NULL). */
static void do_allgather(MPI_Comm comm, form_t f, const int *ks, const int *kr,
                         int n, int in_place)
{
    int rank, size, rounds = f == F_PERS ? ROUNDS : 1;
    layout_t ls, lr;
    int *sbuf, *rbuf, *want;
    MPI_Request req = MPI_REQUEST_NULL;
    const void *sarg;
    int scount;
    MPI_Datatype stype;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ls = layout(ks[rank % n]);
    lr = layout(kr[rank % n]);
    sbuf = buf_new(&ls, 1);
    rbuf = buf_new(&lr, size);
    want = buf_new(&lr, size);
    sarg = in_place ? MPI_IN_PLACE : sbuf;
    scount = in_place ? -1 : ls.count;
    stype = in_place ? MPI_DATATYPE_NULL : ls.dt;
#ifdef P_INIT
    if (f == F_PERS) {
        ALLGATHER_INIT(sarg, scount, stype, rbuf, lr.count, lr.dt, comm,
                       MPI_INFO_NULL, &req);
    }
#endif
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < span(&lr) * size + 4; i++)
            rbuf[i] = SENT;
        put(&ls, sbuf, 0, rank, r);
        if (in_place)
            put(&lr, rbuf, rank, rank, r);
        if (f == F_BLOCK) {
            MPI_Allgather(sarg, scount, stype, rbuf, lr.count, lr.dt, comm);
        } else if (f == F_NB) {
            MPI_Iallgather(sarg, scount, stype, rbuf, lr.count, lr.dt, comm,
                           &req);
            layout_free(&lr);
            layout_free(&ls);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            /* Not freed while active: Open MPI 4.1's own persistent
             * allgather reads the datatype in its later rounds and
             * crashes then (measured without the layer). */
            start_wait(&req, 0, NULL, NULL);
        }
        for (int b = 0; b < size; b++)
            put(&lr, want, b, b, r);
        same("allgather", comm, rbuf, want, &lr, size);
    }
    if (f == F_PERS)
        MPI_Request_free(&req);
    layout_free(&lr);
    layout_free(&ls);
    free(sbuf);
    free(rbuf);
    free(want);
}

/* ---- reductions (predefined datatypes: MPI's ops need them) ---- */

typedef enum { R_ALLREDUCE, R_REDUCE, R_RSB, R_RS } red_t;

/* One reduction of BLK ints per rank (reduce_scatters: BLK per rank of
 * the result) with MPI_SUM, in place where MPI allows (reduce: at the
 * root only; the non-roots pass NULL as the receive buffer). */
static void do_reduction(MPI_Comm comm, form_t f, red_t which, int root,
                         int in_place)
{
    int rank, size, rounds = f == F_PERS ? ROUNDS : 1;
    int n, *in, *out, *want, *counts;
    int has_out;
    MPI_Request req = MPI_REQUEST_NULL;
    layout_t l = {L_INT, MPI_INT, 0, 1};
    const char *what = which == R_ALLREDUCE ? "allreduce"
                       : which == R_REDUCE  ? "reduce"
                       : which == R_RSB     ? "reduce_scatter_block"
                                            : "reduce_scatter";
    const void *sarg;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    n = which == R_RSB || which == R_RS ? BLK * size : BLK;
    has_out = which != R_REDUCE || rank == root;
    in = calloc((size_t)n, sizeof(int));
    out = calloc((size_t)n + 4, sizeof(int));
    want = calloc((size_t)n + 4, sizeof(int));
    counts = calloc((size_t)size, sizeof(int));
    if (!in || !out || !want || !counts)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < size; i++)
        counts[i] = BLK;
    in_place = in_place && has_out;
    sarg = in_place ? MPI_IN_PLACE : in;
#ifdef P_INIT
    if (f == F_PERS) {
        void *o = has_out ? out : NULL;
        if (which == R_ALLREDUCE) {
            ALLREDUCE_INIT(sarg, o, n, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL,
                           &req);
        } else if (which == R_REDUCE)
            REDUCE_INIT(sarg, o, n, MPI_INT, MPI_SUM, root, comm, MPI_INFO_NULL,
                        &req);
        else if (which == R_RSB) {
            RSB_INIT(sarg, o, BLK, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL, &req);
        } else {
            RS_INIT(sarg, o, counts, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL,
                    &req);
        }
    }
#endif
    for (int r = 0; r < rounds; r++) {
        int nout = which == R_RSB || which == R_RS ? BLK : n;
        for (int i = 0; i < n + 4; i++)
            out[i] = SENT;
        for (int i = 0; i < n; i++)
            in[i] = val(rank, i, r);
        if (in_place)
            memcpy(out, in, (size_t)n * sizeof(int));
        if (f == F_BLOCK) {
            void *o = has_out ? out : NULL;
            if (which == R_ALLREDUCE)
                MPI_Allreduce(sarg, o, n, MPI_INT, MPI_SUM, comm);
            else if (which == R_REDUCE)
                MPI_Reduce(sarg, o, n, MPI_INT, MPI_SUM, root, comm);
            else if (which == R_RSB)
                MPI_Reduce_scatter_block(sarg, o, BLK, MPI_INT, MPI_SUM, comm);
            else
                MPI_Reduce_scatter(sarg, o, counts, MPI_INT, MPI_SUM, comm);
        } else if (f == F_NB) {
            void *o = has_out ? out : NULL;
            if (which == R_ALLREDUCE)
                MPI_Iallreduce(sarg, o, n, MPI_INT, MPI_SUM, comm, &req);
            else if (which == R_REDUCE)
                MPI_Ireduce(sarg, o, n, MPI_INT, MPI_SUM, root, comm, &req);
            else if (which == R_RSB)
                MPI_Ireduce_scatter_block(sarg, o, BLK, MPI_INT, MPI_SUM, comm,
                                          &req);
            else
                MPI_Ireduce_scatter(sarg, o, counts, MPI_INT, MPI_SUM, comm,
                                    &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            start_wait(&req, 0, NULL, NULL);
        }
        for (int i = 0; i < n + 4; i++)
            want[i] = SENT;
        if (has_out) {
            int first = which == R_RSB || which == R_RS ? rank * BLK : 0;
            for (int i = 0; i < nout; i++) {
                long sum = 0;
                for (int p = 0; p < size; p++)
                    sum += val(p, first + i, r);
                want[i] = (int)sum;
            }
            /* In place, MPI leaves the rest of the buffer unspecified. */
            if (in_place)
                for (int i = nout; i < n; i++)
                    want[i] = out[i];
        }
        l.count = n;
        same(what, comm, out, want, &l, 1);
    }
    if (f == F_PERS)
        MPI_Request_free(&req);
    free(in);
    free(out);
    free(want);
    free(counts);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

/* MPI runs these (the layer gives them to MPI alike on every rank): a
 * user op freed while its MPI_Ireduce is pending, MINLOC on MPI_2INT
 * (offloaded as two allreduces), a derived datatype of a reduction. */
static void do_mpi_side(MPI_Comm comm)
{
    int rank, size, in[BLK], out[BLK + 4], want[BLK + 4];
    struct {
        int v, i;
    } a, b;
    MPI_Op op;
    MPI_Request req;
    layout_t l = {L_INT, MPI_INT, BLK, 1};

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int i = 0; i < BLK; i++)
        in[i] = val(rank, i, 5);
    for (int i = 0; i < BLK + 4; i++)
        out[i] = want[i] = SENT;
    MPI_Op_create(user_sum, 1, &op);
    MPI_Ireduce(in, rank == 0 ? out : NULL, BLK, MPI_INT, op, 0, comm, &req);
    MPI_Op_free(&op);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rank == 0)
        for (int i = 0; i < BLK; i++) {
            long s = 0;
            for (int p = 0; p < size; p++)
                s += val(p, i, 5);
            want[i] = (int)s;
        }
    same("ireduce (user op freed while pending)", comm, out, want, &l, 1);
    a.v = (rank * 3 + 1) % size;
    a.i = size - rank;
    MPI_Allreduce(&a, &b, 1, MPI_2INT, MPI_MINLOC, comm);
    {
        int v = size, idx = size + 1;
        for (int p = 0; p < size; p++) {
            int pv = (p * 3 + 1) % size;
            if (pv < v || (pv == v && size - p < idx)) {
                v = pv;
                idx = size - p;
            }
        }
        if (b.v != v || b.i != idx)
            fail("allreduce minloc", comm, 0, b.v * 1000 + b.i, v * 1000 + idx);
    }
    counted();
}

/* ---- zero bytes and persistent order ---- */

static void do_zero(MPI_Comm comm, form_t f)
{
    int rank, buf[4] = {1, 2, 3, 4}, root = 0, n;
    MPI_Datatype empty;
    MPI_Request req[5];
    MPI_Status st[5];

    MPI_Comm_rank(comm, &rank);
    MPI_Type_contiguous(0, MPI_INT, &empty);
    MPI_Type_commit(&empty);
    n = 0;
    if (f == F_BLOCK) {
        /* A zero-size type with a count: nothing moves. */
        MPI_Bcast(buf, 4, empty, root, comm);
        MPI_Allreduce(MPI_IN_PLACE, buf, 0, MPI_INT, MPI_SUM, comm);
        if (rank == root) {
            MPI_Gather(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, NULL, 0, MPI_BYTE,
                       root, comm);
            MPI_Scatter(NULL, 0, MPI_BYTE, MPI_IN_PLACE, -1, MPI_DATATYPE_NULL,
                        root, comm);
        } else {
            MPI_Gather(NULL, 0, MPI_BYTE, NULL, -1, MPI_DATATYPE_NULL, root,
                       comm);
            MPI_Scatter(NULL, -1, MPI_DATATYPE_NULL, NULL, 0, MPI_BYTE, root,
                        comm);
        }
        MPI_Allgather(NULL, 0, MPI_INT, NULL, 0, MPI_INT, comm);
    } else {
#ifdef P_INIT
        if (f == F_PERS) {
            BCAST_INIT(buf, 4, empty, root, comm, MPI_INFO_NULL, &req[n++]);
            ALLREDUCE_INIT(MPI_IN_PLACE, buf, 0, MPI_INT, MPI_SUM, comm,
                           MPI_INFO_NULL, &req[n++]);
            if (rank == root) {
                GATHER_INIT(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, NULL, 0,
                            MPI_BYTE, root, comm, MPI_INFO_NULL, &req[n++]);
            } else {
                GATHER_INIT(NULL, 0, MPI_BYTE, NULL, -1, MPI_DATATYPE_NULL,
                            root, comm, MPI_INFO_NULL, &req[n++]);
            }
            ALLGATHER_INIT(NULL, 0, MPI_INT, NULL, 0, MPI_INT, comm,
                           MPI_INFO_NULL, &req[n++]);
            MPI_Startall(n, req);
        }
#endif
        if (f == F_NB) {
            MPI_Ibcast(buf, 4, empty, root, comm, &req[n++]);
            MPI_Iallreduce(MPI_IN_PLACE, buf, 0, MPI_INT, MPI_SUM, comm,
                           &req[n++]);
            if (rank == root)
                MPI_Igather(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, NULL, 0,
                            MPI_BYTE, root, comm, &req[n++]);
            else
                MPI_Igather(NULL, 0, MPI_BYTE, NULL, -1, MPI_DATATYPE_NULL,
                            root, comm, &req[n++]);
            MPI_Iallgather(NULL, 0, MPI_INT, NULL, 0, MPI_INT, comm, &req[n++]);
        }
        MPI_Type_free(&empty);
        MPI_Waitall(n, req, st);
        if (f == F_PERS)
            for (int i = 0; i < n; i++)
                MPI_Request_free(&req[i]);
    }
    if (f == F_BLOCK)
        MPI_Type_free(&empty);
    for (int i = 0; i < 4; i++)
        if (buf[i] != i + 1)
            fail("zero-byte calls", comm, i, buf[i], i + 1);
    counted();
}

#ifdef P_INIT
/*
 * Persistent requests started in another order on odd ranks than on even
 * ones, each by its own MPI_Start, then completed together: a broadcast
 * (the root's block a vector), a barrier, an allreduce and a gather (the
 * root's receive side a struct with gaps). MPI matches them by their
 * initialization.
 */
static void do_pers_order(MPI_Comm comm)
{
    enum { NREQ = 4 };
    int rank, size, root = 0;
    layout_t lb, lg, li = {L_INT, MPI_INT, BLK, 1};
    int *bb, *bw, *gb = NULL, *gw = NULL, gs[BLK], ain[BLK], aout[BLK + 4],
                  aw[BLK + 4];
    MPI_Request req[NREQ];
    MPI_Status st[NREQ];

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    lb = layout(rank == root ? L_VEC : L_INT);
    lg = layout(L_STRUCT);
    bb = buf_new(&lb, 1);
    bw = buf_new(&lb, 1);
    if (rank == root) {
        gb = buf_new(&lg, size);
        gw = buf_new(&lg, size);
    }
    BCAST_INIT(bb, lb.count, lb.dt, root, comm, MPI_INFO_NULL, &req[0]);
    BARRIER_INIT(comm, MPI_INFO_NULL, &req[1]);
    ALLREDUCE_INIT(ain, aout, BLK, MPI_INT, MPI_SUM, comm, MPI_INFO_NULL,
                   &req[2]);
    GATHER_INIT(gs, BLK, MPI_INT, gb, lg.count, lg.dt, root, comm,
                MPI_INFO_NULL, &req[3]);
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < span(&lb) + 4; i++)
            bb[i] = bw[i] = SENT;
        if (rank == root)
            put(&lb, bb, 0, root, r);
        for (int i = 0; i < BLK; i++) {
            ain[i] = val(rank, i, r);
            gs[i] = val(rank, i, r + 1);
        }
        for (int i = 0; i < BLK + 4; i++)
            aout[i] = aw[i] = SENT;
        if (gb)
            for (int i = 0; i < span(&lg) * size + 4; i++)
                gb[i] = gw[i] = SENT;
        for (int k = 0; k < NREQ; k++)
            MPI_Start(&req[rank % 2 ? NREQ - 1 - k : (k + r) % NREQ]);
        MPI_Waitall(NREQ, req, st);
        put(&lb, bw, 0, root, r);
        same("persistent bcast (started out of order)", comm, bb, bw, &lb, 1);
        for (int i = 0; i < BLK; i++) {
            long s = 0;
            for (int p = 0; p < size; p++)
                s += val(p, i, r);
            aw[i] = (int)s;
        }
        li.count = BLK;
        same("persistent allreduce (started out of order)", comm, aout, aw, &li,
             1);
        if (rank == root) {
            for (int b = 0; b < size; b++)
                put(&lg, gw, b, b, r + 1);
            same("persistent gather (started out of order)", comm, gb, gw, &lg,
                 size);
        }
    }
    for (int k = 0; k < NREQ; k++)
        MPI_Request_free(&req[k]);
    layout_free(&lb);
    layout_free(&lg);
    free(bb);
    free(bw);
    free(gb);
    free(gw);
}
#endif

/*
 * MPI's own nonblocking collective and the layer's on one communicator:
 * every rank posts an MPI_Ialltoall (64 KiB to each rank: MPI moves it
 * only inside MPI calls of both sides), then even ranks post an
 * MPI_Iallreduce and wait for it first, odd ranks wait for the alltoall
 * first and post the allreduce after. The even ranks' wait for the
 * allreduce must let MPI progress the alltoall, or the odd ranks never
 * post theirs.
 */
static void do_mix(MPI_Comm comm)
{
    enum { N = 16384 };
    int rank, size, *sa, *ra, *rw, in[BLK], out[BLK + 4], want[BLK + 4];
    layout_t la = {L_INT, MPI_INT, 0, 1}, lb = {L_INT, MPI_INT, BLK, 1};
    MPI_Request x, y;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    la.count = N * size;
    sa = malloc(((size_t)N * size + 4) * sizeof(int));
    ra = malloc(((size_t)N * size + 4) * sizeof(int));
    rw = malloc(((size_t)N * size + 4) * sizeof(int));
    if (!sa || !ra || !rw)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (int p = 0; p < size; p++)
        for (int i = 0; i < N; i++) {
            sa[p * N + i] = val(rank, i, p);
            rw[p * N + i] = val(p, i, rank);
        }
    for (int i = 0; i < 4; i++)
        ra[N * size + i] = rw[N * size + i] = SENT;
    for (int i = 0; i < BLK; i++)
        in[i] = val(rank, i, 9);
    for (int i = 0; i < BLK + 4; i++)
        out[i] = want[i] = SENT;
    MPI_Ialltoall(sa, N, MPI_INT, ra, N, MPI_INT, comm, &x);
    if (rank % 2 == 0) {
        MPI_Iallreduce(in, out, BLK, MPI_INT, MPI_SUM, comm, &y);
        MPI_Wait(&y, MPI_STATUS_IGNORE);
        MPI_Wait(&x, MPI_STATUS_IGNORE);
    } else {
        MPI_Wait(&x, MPI_STATUS_IGNORE);
        MPI_Iallreduce(in, out, BLK, MPI_INT, MPI_SUM, comm, &y);
        MPI_Wait(&y, MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < BLK; i++) {
        long sum = 0;
        for (int p = 0; p < size; p++)
            sum += val(p, i, 9);
        want[i] = (int)sum;
    }
    same("iallreduce next to MPI's ialltoall", comm, out, want, &lb, 1);
    same("MPI's ialltoall next to an iallreduce", comm, ra, rw, &la, 1);
    free(sa);
    free(ra);
    free(rw);
}

/* ---- the run ---- */

/* The (root's, others') layouts of the rooted calls. */
static const int pairs[][2] = {{L_VEC, L_INT},     {L_INT, L_VEC},
                               {L_STRUCT, L_SWAP}, {L_SWAP, L_RESIZED},
                               {L_CONTIG, L_DUP},  {L_RESIZED, L_STRUCT}};
#define NPAIRS (int)(sizeof(pairs) / sizeof(pairs[0]))

static void run_comm(MPI_Comm comm)
{
    static const int ks[] = {L_INT, L_VEC, L_SWAP, L_STRUCT, L_CONTIG};
    static const int kr[] = {L_RESIZED, L_INT, L_DUP, L_VEC, L_SWAP};
    int size;

    MPI_Comm_size(comm, &size);
    for (int fi = 0; fi < F_COUNT; fi++) {
        form_t f = (form_t)fi;
#ifndef P_INIT
        if (f == F_PERS)
            continue;
#endif
        for (int p = 0; p < NPAIRS; p++) {
            int root = p % size;
            if (section(S_BCAST, f))
                do_bcast(comm, f, pairs[p][0], pairs[p][1], root);
            if (section(S_GATHER, f))
                do_gather(comm, f, pairs[p][0], pairs[p][1], root, 0);
            if (section(S_SCATTER, f))
                do_scatter(comm, f, pairs[p][0], pairs[p][1], root, 0);
        }
        /* In place at the root only. */
        if (section(S_GATHER, f)) {
            do_gather(comm, f, L_VEC, L_INT, size - 1, 1);
            do_gather(comm, f, L_INT, L_STRUCT, 0, 1);
        }
        if (section(S_SCATTER, f)) {
            do_scatter(comm, f, L_SWAP, L_INT, size - 1, 1);
            do_scatter(comm, f, L_INT, L_VEC, 0, 1);
        }
        if (section(S_ALLGATHER, f)) {
            do_allgather(comm, f, ks, kr, 5, 0);
            do_allgather(comm, f, ks, kr, 5, 1);
            do_allgather(comm, f, kr, ks, 3, 0);
        }
        for (int w = R_ALLREDUCE; w <= R_RS; w++) {
            if (!section((section_t)(S_ALLREDUCE + w), f))
                continue;
            do_reduction(comm, f, (red_t)w, size - 1, 0);
            do_reduction(comm, f, (red_t)w, 0, 1);
        }
        if (section(S_ZERO, f))
            do_zero(comm, f);
        if (section(S_BARRIER, f)) {
            MPI_Request req;
            if (f == F_BLOCK)
                MPI_Barrier(comm);
#ifdef P_INIT
            if (f == F_PERS) {
                BARRIER_INIT(comm, MPI_INFO_NULL, &req);
                for (int r = 0; r < ROUNDS; r++)
                    start_wait(&req, 0, NULL, NULL);
                MPI_Request_free(&req);
            }
#endif
            if (f == F_NB) {
                MPI_Ibarrier(comm, &req);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
            counted();
        }
    }
#ifdef P_INIT
    if (section(S_ORDER, F_PERS))
        do_pers_order(comm);
#endif
    if (section(S_MIX, F_NB))
        do_mix(comm);
    if (section(S_MPI, F_BLOCK))
        do_mpi_side(comm);
}

/* --skip NAME:FORM */
static void parse_skip(const char *arg)
{
    char name[64];
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : 0;

    if (colon && n < sizeof(name)) {
        memcpy(name, arg, n);
        name[n] = '\0';
        for (int s = 0; s < S_COUNT; s++)
            for (int f = 0; f < F_COUNT; f++)
                if (strcmp(name, section_names[s]) == 0 &&
                    strcmp(colon + 1, form_names[f]) == 0) {
                    skip[s][f] = 1;
                    return;
                }
    }
    if (wrank == 0)
        fprintf(stderr, "conform: bad --skip %s (NAME:FORM)\n", arg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    int wsize;
    MPI_Comm rev;
    uint32_t *all;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--skip") == 0 && i + 1 < argc)
            parse_skip(argv[++i]);
        else
            parse_skip(argv[i]);
    }
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev);
    MPI_Comm_set_name(rev, "reversed world");
    run_comm(MPI_COMM_WORLD);
    run_comm(rev);
    MPI_Comm_free(&rev);
    /* The digests through MPI's own gather, not the layer's. */
    all = calloc((size_t)wsize * S_COUNT * F_COUNT, sizeof(*all));
    if (all == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    PMPI_Gather(dig, S_COUNT * F_COUNT, MPI_UINT32_T, all, S_COUNT * F_COUNT,
                MPI_UINT32_T, 0, MPI_COMM_WORLD);
    if (wrank == 0) {
        for (int s = 0; s < S_COUNT; s++) {
            for (int f = 0; f < F_COUNT; f++) {
                if (nchk[s][f] == 0)
                    continue;
                printf("conform: %s %s: %ld checks digest", section_names[s],
                       form_names[f], nchk[s][f]);
                for (int r = 0; r < wsize; r++)
                    printf(" %08x",
                           (unsigned)all[(size_t)r * S_COUNT * F_COUNT +
                                         (size_t)s * F_COUNT + (size_t)f]);
                printf("\n");
            }
        }
        printf("conform: ok\n");
    }
    free(all);
    MPI_Finalize();
    return 0;
}
