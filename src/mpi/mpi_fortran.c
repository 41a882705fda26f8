/*
 * Fortran entry points of libincoll_mpi.
 *
 * Open MPI's Fortran bindings (mpif.h, `use mpi`, `use mpi_f08`) call the
 * PMPI_ C functions directly, so a program written in Fortran never reaches
 * the C wrappers. This file wraps their entry points: the mpif.h/`use mpi`
 * names in the four manglings Open MPI exports (mpi_allreduce,
 * mpi_allreduce_, mpi_allreduce__, MPI_ALLREDUCE) and the `use mpi_f08`
 * ones (mpi_allreduce_f08_). Handles are turned into C handles, Fortran's
 * MPI_IN_PLACE sentinel (the common block mpi_fortran_in_place_) into C's,
 * and the call goes to mpi_layer.c; what the layer declines goes to the
 * pmpi_ twin of the entry point with the caller's arguments untouched.
 *
 * MPICH's Fortran bindings call the C MPI_ functions for the collectives
 * with buffers, so the C wrappers already see them: wrapping them here too
 * would count each call twice. Its mpi_f08 MPI_Init, MPI_Init_thread and
 * MPI_Barrier go to PMPI_ directly and are wrapped here; its f08
 * MPI_Finalize too, but the layer ends from MPI_COMM_SELF's attribute
 * deletion, which every binding's finalize triggers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include "mpi/mpi_layer.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

#ifdef OPEN_MPI
/* Fortran's MPI_IN_PLACE: a common block whose address is the sentinel.
 * Weak, so a C program that never loads the Fortran libraries still
 * links; a Fortran executable defines its own copy, which the dynamic
 * linker makes the one every library sees. */
extern int mpi_fortran_in_place __attribute__((weak));
extern int mpi_fortran_in_place_ __attribute__((weak));
extern int mpi_fortran_in_place__ __attribute__((weak));
extern int MPI_FORTRAN_IN_PLACE __attribute__((weak));
extern int mpi_fortran_bottom __attribute__((weak));
extern int mpi_fortran_bottom_ __attribute__((weak));
extern int mpi_fortran_bottom__ __attribute__((weak));
extern int MPI_FORTRAN_BOTTOM __attribute__((weak));

static const void *f2c_buf(const void *p)
{
    if (p == NULL)
        return p;
    if (p == &mpi_fortran_in_place_ || p == &mpi_fortran_in_place ||
        p == &mpi_fortran_in_place__ || p == &MPI_FORTRAN_IN_PLACE)
        return MPI_IN_PLACE;
    if (p == &mpi_fortran_bottom_ || p == &mpi_fortran_bottom ||
        p == &mpi_fortran_bottom__ || p == &MPI_FORTRAN_BOTTOM)
        return MPI_BOTTOM;
    return p;
}
#endif /* OPEN_MPI */

/* The MPI library's own entry point: the pmpi_ twin, or else the next
 * definition of the same name after this library. */
static void *next_sym(const char *twin, const char *self)
{
    void *f = dlsym(RTLD_NEXT, twin);
    return f ? f : dlsym(RTLD_NEXT, self);
}

static void set_err(MPI_Fint *ierr, int ret)
{
    if (ierr) /* optional in mpi_f08 */
        *ierr = (MPI_Fint)ret;
}

typedef void init_fn_t(MPI_Fint *);
typedef void init_thread_fn_t(MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void allreduce_fn_t(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                            MPI_Fint *, MPI_Fint *);
typedef void reduce_fn_t(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                         MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void bcast_fn_t(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                        MPI_Fint *);
typedef void barrier_fn_t(MPI_Fint *, MPI_Fint *);
typedef void allgather_fn_t(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *,
                            MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void rooted_fn_t(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *,
                         MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void rsb_fn_t(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                      MPI_Fint *, MPI_Fint *);

static void f_init(const char *twin, const char *self, MPI_Fint *ierr)
{
    init_fn_t *f = (init_fn_t *)next_sym(twin, self);
    if (f == NULL) {
        set_err(ierr, MPI_ERR_INTERN);
        return;
    }
    f(ierr);
    mpi_layer_bootstrap(1);
}

static void f_init_thread(const char *twin, const char *self,
                          MPI_Fint *required, MPI_Fint *provided,
                          MPI_Fint *ierr)
{
    init_thread_fn_t *f = (init_thread_fn_t *)next_sym(twin, self);
    if (f == NULL) {
        set_err(ierr, MPI_ERR_INTERN);
        return;
    }
    f(required, provided, ierr);
    mpi_layer_bootstrap(1);
}

#ifdef OPEN_MPI
static void f_allreduce(const char *twin, const char *self, void *sendbuf,
                        void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                        MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    allreduce_fn_t *f;
    int ret;

    if (MPI_LAYER_CALL(mpi_layer_allreduce(
            f2c_buf(sendbuf), (void *)f2c_buf(recvbuf), (int)*count,
            PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm),
            &ret))) {
        set_err(ierr, ret);
        return;
    }
    f = (allreduce_fn_t *)next_sym(twin, self);
    if (f)
        f(sendbuf, recvbuf, count, datatype, op, comm, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

static void f_reduce(const char *twin, const char *self, void *sendbuf,
                     void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                     MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,
                     MPI_Fint *ierr)
{
    reduce_fn_t *f;
    int ret;

    if (MPI_LAYER_CALL(mpi_layer_reduce(
            f2c_buf(sendbuf), (void *)f2c_buf(recvbuf), (int)*count,
            PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op), (int)*root,
            PMPI_Comm_f2c(*comm), &ret))) {
        set_err(ierr, ret);
        return;
    }
    f = (reduce_fn_t *)next_sym(twin, self);
    if (f)
        f(sendbuf, recvbuf, count, datatype, op, root, comm, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

static void f_bcast(const char *twin, const char *self, void *buf,
                    MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root,
                    MPI_Fint *comm, MPI_Fint *ierr)
{
    bcast_fn_t *f;
    int ret;

    if (MPI_LAYER_CALL(mpi_layer_bcast((void *)f2c_buf(buf), (int)*count,
                                       PMPI_Type_f2c(*datatype), (int)*root,
                                       PMPI_Comm_f2c(*comm), &ret))) {
        set_err(ierr, ret);
        return;
    }
    f = (bcast_fn_t *)next_sym(twin, self);
    if (f)
        f(buf, count, datatype, root, comm, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

static void f_allgather(const char *twin, const char *self, void *sendbuf,
                        MPI_Fint *scount, MPI_Fint *stype, void *recvbuf,
                        MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm,
                        MPI_Fint *ierr)
{
    allgather_fn_t *f;
    int ret;

    if (MPI_LAYER_CALL(mpi_layer_allgather(
            f2c_buf(sendbuf), (int)*scount, PMPI_Type_f2c(*stype),
            (void *)f2c_buf(recvbuf), (int)*rcount, PMPI_Type_f2c(*rtype),
            PMPI_Comm_f2c(*comm), &ret))) {
        set_err(ierr, ret);
        return;
    }
    f = (allgather_fn_t *)next_sym(twin, self);
    if (f)
        f(sendbuf, scount, stype, recvbuf, rcount, rtype, comm, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

/* Gather (scatter = 0) or scatter (1). */
static void f_rooted(int scatter, const char *twin, const char *self,
                     void *sendbuf, MPI_Fint *scount, MPI_Fint *stype,
                     void *recvbuf, MPI_Fint *rcount, MPI_Fint *rtype,
                     MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    rooted_fn_t *f;
    int ret, done;

    done =
        scatter
            ? MPI_LAYER_CALL(mpi_layer_scatter(
                  f2c_buf(sendbuf), (int)*scount, PMPI_Type_f2c(*stype),
                  (void *)f2c_buf(recvbuf), (int)*rcount, PMPI_Type_f2c(*rtype),
                  (int)*root, PMPI_Comm_f2c(*comm), &ret))
            : MPI_LAYER_CALL(mpi_layer_gather(
                  f2c_buf(sendbuf), (int)*scount, PMPI_Type_f2c(*stype),
                  (void *)f2c_buf(recvbuf), (int)*rcount, PMPI_Type_f2c(*rtype),
                  (int)*root, PMPI_Comm_f2c(*comm), &ret));
    if (done) {
        set_err(ierr, ret);
        return;
    }
    f = (rooted_fn_t *)next_sym(twin, self);
    if (f)
        f(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

static void f_reduce_scatter_block(const char *twin, const char *self,
                                   void *sendbuf, void *recvbuf,
                                   MPI_Fint *count, MPI_Fint *datatype,
                                   MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    rsb_fn_t *f;
    int ret;

    if (MPI_LAYER_CALL(mpi_layer_reduce_scatter_block(
            f2c_buf(sendbuf), (void *)f2c_buf(recvbuf), (int)*count,
            PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm),
            &ret))) {
        set_err(ierr, ret);
        return;
    }
    f = (rsb_fn_t *)next_sym(twin, self);
    if (f)
        f(sendbuf, recvbuf, count, datatype, op, comm, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

/* recvcounts: MPI_Fint, one per rank; the layer takes C ints. */
static void f_reduce_scatter(const char *twin, const char *self, void *sendbuf,
                             void *recvbuf, MPI_Fint *counts,
                             MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,
                             MPI_Fint *ierr)
{
    rsb_fn_t *f;
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int ret, size = 0, stack[64], *ic = stack;

    if (PMPI_Comm_size(c, &size) == MPI_SUCCESS && size > 0 &&
        (size <= 64 || (ic = malloc((size_t)size * sizeof(int))) != NULL)) {
        int done;
        for (int i = 0; i < size; i++)
            ic[i] = (int)counts[i];
        done = MPI_LAYER_CALL(mpi_layer_reduce_scatter(
            f2c_buf(sendbuf), (void *)f2c_buf(recvbuf), ic,
            PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op), c, &ret));
        if (ic != stack)
            free(ic);
        if (done) {
            set_err(ierr, ret);
            return;
        }
    }
    f = (rsb_fn_t *)next_sym(twin, self);
    if (f)
        f(sendbuf, recvbuf, counts, datatype, op, comm, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

#endif /* OPEN_MPI */

static void f_barrier(const char *twin, const char *self, MPI_Fint *comm,
                      MPI_Fint *ierr)
{
    barrier_fn_t *f;
    int ret;

    if (MPI_LAYER_CALL(mpi_layer_barrier(PMPI_Comm_f2c(*comm), &ret))) {
        set_err(ierr, ret);
        return;
    }
    f = (barrier_fn_t *)next_sym(twin, self);
    if (f)
        f(comm, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

/* One definition per mangled name; each forwards to its own pmpi_ twin. */
#define F_INIT(name, twin)                                                     \
    MPI_LAYER_EXPORT void name(MPI_Fint *ierr);                                \
    void name(MPI_Fint *ierr)                                                  \
    {                                                                          \
        f_init(#twin, #name, ierr);                                            \
    }
#define F_INIT_THREAD(name, twin)                                              \
    MPI_LAYER_EXPORT void name(MPI_Fint *required, MPI_Fint *provided,         \
                               MPI_Fint *ierr);                                \
    void name(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)          \
    {                                                                          \
        f_init_thread(#twin, #name, required, provided, ierr);                 \
    }
#define F_ALLREDUCE(name, twin)                                                \
    MPI_LAYER_EXPORT void name(void *sendbuf, void *recvbuf, MPI_Fint *count,  \
                               MPI_Fint *datatype, MPI_Fint *op,               \
                               MPI_Fint *comm, MPI_Fint *ierr);                \
    void name(void *sendbuf, void *recvbuf, MPI_Fint *count,                   \
              MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm,                \
              MPI_Fint *ierr)                                                  \
    {                                                                          \
        f_allreduce(#twin, #name, sendbuf, recvbuf, count, datatype, op, comm, \
                    ierr);                                                     \
    }
#define F_REDUCE(name, twin)                                                   \
    MPI_LAYER_EXPORT void name(                                                \
        void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,     \
        MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr);         \
    void name(void *sendbuf, void *recvbuf, MPI_Fint *count,                   \
              MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *root,                \
              MPI_Fint *comm, MPI_Fint *ierr)                                  \
    {                                                                          \
        f_reduce(#twin, #name, sendbuf, recvbuf, count, datatype, op, root,    \
                 comm, ierr);                                                  \
    }
#define F_BCAST(name, twin)                                                    \
    MPI_LAYER_EXPORT void name(void *buf, MPI_Fint *count, MPI_Fint *datatype, \
                               MPI_Fint *root, MPI_Fint *comm,                 \
                               MPI_Fint *ierr);                                \
    void name(void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root,  \
              MPI_Fint *comm, MPI_Fint *ierr)                                  \
    {                                                                          \
        f_bcast(#twin, #name, buf, count, datatype, root, comm, ierr);         \
    }
#define F_BARRIER(name, twin)                                                  \
    MPI_LAYER_EXPORT void name(MPI_Fint *comm, MPI_Fint *ierr);                \
    void name(MPI_Fint *comm, MPI_Fint *ierr)                                  \
    {                                                                          \
        f_barrier(#twin, #name, comm, ierr);                                   \
    }
#define F_ALLGATHER(name, twin)                                                \
    MPI_LAYER_EXPORT void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, \
                               MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *comm,     \
                               MPI_Fint *ierr);                                \
    void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc,    \
              MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr)                    \
    {                                                                          \
        f_allgather(#twin, #name, sb, sc, st, rb, rc, rt, comm, ierr);         \
    }
#define F_ROOTED(name, twin, scatter)                                          \
    MPI_LAYER_EXPORT void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, \
                               MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *root,     \
                               MPI_Fint *comm, MPI_Fint *ierr);                \
    void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc,    \
              MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)    \
    {                                                                          \
        f_rooted(scatter, #twin, #name, sb, sc, st, rb, rc, rt, root, comm,    \
                 ierr);                                                        \
    }
#define F_GATHER(name, twin) F_ROOTED(name, twin, 0)
#define F_SCATTER(name, twin) F_ROOTED(name, twin, 1)
#define F_RS(name, twin, fn)                                                   \
    MPI_LAYER_EXPORT void name(void *sb, void *rb, MPI_Fint *count,            \
                               MPI_Fint *datatype, MPI_Fint *op,               \
                               MPI_Fint *comm, MPI_Fint *ierr);                \
    void name(void *sb, void *rb, MPI_Fint *count, MPI_Fint *datatype,         \
              MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)                    \
    {                                                                          \
        fn(#twin, #name, sb, rb, count, datatype, op, comm, ierr);             \
    }
#define F_RSB(name, twin) F_RS(name, twin, f_reduce_scatter_block)
#define F_RSV(name, twin) F_RS(name, twin, f_reduce_scatter)

#define F_ALL_NAMES(GEN, lower, upper)                                         \
    GEN(lower, p##lower)                                                       \
    GEN(lower##_, p##lower##_)                                                 \
    GEN(lower##__, p##lower##__)                                               \
    GEN(upper, P##upper)                                                       \
    GEN(lower##_f08_, p##lower##_f08_)

#ifdef OPEN_MPI
F_ALL_NAMES(F_INIT, mpi_init, MPI_INIT)
F_ALL_NAMES(F_INIT_THREAD, mpi_init_thread, MPI_INIT_THREAD)
F_ALL_NAMES(F_ALLREDUCE, mpi_allreduce, MPI_ALLREDUCE)
F_ALL_NAMES(F_REDUCE, mpi_reduce, MPI_REDUCE)
F_ALL_NAMES(F_BCAST, mpi_bcast, MPI_BCAST)
F_ALL_NAMES(F_BARRIER, mpi_barrier, MPI_BARRIER)
F_ALL_NAMES(F_ALLGATHER, mpi_allgather, MPI_ALLGATHER)
F_ALL_NAMES(F_GATHER, mpi_gather, MPI_GATHER)
F_ALL_NAMES(F_SCATTER, mpi_scatter, MPI_SCATTER)
F_ALL_NAMES(F_RSB, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK)
F_ALL_NAMES(F_RSV, mpi_reduce_scatter, MPI_REDUCE_SCATTER)
#else
/* MPICH's mpi_f08 calls PMPI_Init, PMPI_Init_thread and PMPI_Barrier
 * directly; its collectives with buffers go through the C MPI_ functions.
 * Its f08 entry points have no pmpi_ twins under these names, so the
 * wrappers forward to the next definition of their own name. */
F_INIT(mpi_init_f08_, pmpi_init_f08_)
F_INIT_THREAD(mpi_init_thread_f08_, pmpi_init_thread_f08_)
F_BARRIER(mpi_barrier_f08_, pmpi_barrier_f08_)
#endif
