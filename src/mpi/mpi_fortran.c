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
 * would count each call twice. Its mpi_f08 MPI_Init, MPI_Init_thread,
 * MPI_Barrier and the start, wait and test calls go to PMPI_ directly and
 * are wrapped here; its f08
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

/* ---- nonblocking and persistent forms, and their completion ---- */

/* The request the layer made (C handle) back to Fortran, with its code. */
static void set_req(MPI_Fint *request, MPI_Request creq, MPI_Fint *ierr,
                    int ret)
{
    if (ret == MPI_SUCCESS)
        *request = PMPI_Request_c2f(creq);
    set_err(ierr, ret);
}

typedef void iallreduce_fn_t(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                             MPI_Fint *, MPI_Fint *, MPI_Fint *);

/* MPI_Iallreduce (persistent = 0) and MPIX_Allreduce_init (1, info before
 * request); the same for each collective below. */
static void f_iallreduce(int persistent, const char *twin, const char *self,
                         void *sb, void *rb, MPI_Fint *count, MPI_Fint *dt,
                         MPI_Fint *op, MPI_Fint *comm, MPI_Fint *info,
                         MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request creq = MPI_REQUEST_NULL;
    int ret;
    void (*f)(void);

    if (MPI_LAYER_CALL(mpi_nb_allreduce(
            f2c_buf(sb), (void *)f2c_buf(rb), (int)*count, PMPI_Type_f2c(*dt),
            PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), persistent, &creq, &ret))) {
        set_req(request, creq, ierr, ret);
        return;
    }
    f = (void (*)(void))next_sym(twin, self);
    if (f == NULL)
        set_err(ierr, MPI_ERR_INTERN);
    else if (persistent)
        ((void (*)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(
            sb, rb, count, dt, op, comm, info, request, ierr);
    else
        ((iallreduce_fn_t *)f)(sb, rb, count, dt, op, comm, request, ierr);
}

static void f_ireduce(int persistent, const char *twin, const char *self,
                      void *sb, void *rb, MPI_Fint *count, MPI_Fint *dt,
                      MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,
                      MPI_Fint *info, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request creq = MPI_REQUEST_NULL;
    int ret;
    void (*f)(void);

    if (MPI_LAYER_CALL(
            mpi_nb_reduce(f2c_buf(sb), (void *)f2c_buf(rb), (int)*count,
                          PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), (int)*root,
                          PMPI_Comm_f2c(*comm), persistent, &creq, &ret))) {
        set_req(request, creq, ierr, ret);
        return;
    }
    f = (void (*)(void))next_sym(twin, self);
    if (f == NULL)
        set_err(ierr, MPI_ERR_INTERN);
    else if (persistent)
        ((void (*)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *))f)(sb, rb, count, dt, op, root, comm, info,
                                  request, ierr);
    else
        ((void (*)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(
            sb, rb, count, dt, op, root, comm, request, ierr);
}

static void f_ibcast(int persistent, const char *twin, const char *self,
                     void *buf, MPI_Fint *count, MPI_Fint *dt, MPI_Fint *root,
                     MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request,
                     MPI_Fint *ierr)
{
    MPI_Request creq = MPI_REQUEST_NULL;
    int ret;
    void (*f)(void);

    if (MPI_LAYER_CALL(mpi_nb_bcast(
            (void *)f2c_buf(buf), (int)*count, PMPI_Type_f2c(*dt), (int)*root,
            PMPI_Comm_f2c(*comm), persistent, &creq, &ret))) {
        set_req(request, creq, ierr, ret);
        return;
    }
    f = (void (*)(void))next_sym(twin, self);
    if (f == NULL)
        set_err(ierr, MPI_ERR_INTERN);
    else if (persistent)
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(
            buf, count, dt, root, comm, info, request, ierr);
    else
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *))f)(buf, count, dt, root, comm,
                                              request, ierr);
}

static void f_ibarrier(int persistent, const char *twin, const char *self,
                       MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request,
                       MPI_Fint *ierr)
{
    MPI_Request creq = MPI_REQUEST_NULL;
    int ret;
    void (*f)(void);

    if (MPI_LAYER_CALL(
            mpi_nb_barrier(PMPI_Comm_f2c(*comm), persistent, &creq, &ret))) {
        set_req(request, creq, ierr, ret);
        return;
    }
    f = (void (*)(void))next_sym(twin, self);
    if (f == NULL)
        set_err(ierr, MPI_ERR_INTERN);
    else if (persistent)
        ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(
            comm, info, request, ierr);
    else
        ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(comm, request, ierr);
}

/* Allgather (coll 0), gather (1) or scatter (2): the same arguments but
 * root (ignored for allgather). */
static void f_iblocks(int coll, int persistent, const char *twin,
                      const char *self, void *sb, MPI_Fint *sc, MPI_Fint *st,
                      void *rb, MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *root,
                      MPI_Fint *comm, MPI_Fint *info, MPI_Fint *request,
                      MPI_Fint *ierr)
{
    MPI_Request creq = MPI_REQUEST_NULL;
    int ret, done;
    void (*f)(void);

    mpi_layer_enter();
    if (coll == 0)
        done =
            mpi_nb_allgather(f2c_buf(sb), (int)*sc, PMPI_Type_f2c(*st),
                             (void *)f2c_buf(rb), (int)*rc, PMPI_Type_f2c(*rt),
                             PMPI_Comm_f2c(*comm), persistent, &creq, &ret);
    else
        done = mpi_nb_rooted(coll == 2, f2c_buf(sb), (int)*sc,
                             PMPI_Type_f2c(*st), (void *)f2c_buf(rb), (int)*rc,
                             PMPI_Type_f2c(*rt), (int)*root,
                             PMPI_Comm_f2c(*comm), persistent, &creq, &ret);
    if (mpi_layer_leave(done)) {
        set_req(request, creq, ierr, ret);
        return;
    }
    f = (void (*)(void))next_sym(twin, self);
    if (f == NULL)
        set_err(ierr, MPI_ERR_INTERN);
    else if (coll == 0 && persistent)
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *))f)(sb, sc, st, rb, rc, rt, comm, info, request,
                                  ierr);
    else if (coll == 0)
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(
            sb, sc, st, rb, rc, rt, comm, request, ierr);
    else if (persistent)
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *))f)(sb, sc, st, rb, rc, rt, root, comm, info,
                                  request, ierr);
    else
        ((void (*)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *))f)(sb, sc, st, rb, rc, rt, root, comm, request,
                                  ierr);
}

/* Reduce_scatter_block (vector 0: counts is one count) or reduce_scatter
 * (1: one count per rank, copied to C ints). */
static void f_irs(int vector, int persistent, const char *twin,
                  const char *self, void *sb, void *rb, MPI_Fint *counts,
                  MPI_Fint *dt, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *info,
                  MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request creq = MPI_REQUEST_NULL;
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int ret = MPI_SUCCESS, done = 0, size = 0, stack[64], *ic = stack;
    void (*f)(void);

    if (!vector) {
        done = MPI_LAYER_CALL(mpi_nb_rsb(
            f2c_buf(sb), (void *)f2c_buf(rb), (int)*counts, PMPI_Type_f2c(*dt),
            PMPI_Op_f2c(*op), c, persistent, &creq, &ret));
    } else if (PMPI_Comm_size(c, &size) == MPI_SUCCESS && size > 0 &&
               (size <= 64 ||
                (ic = malloc((size_t)size * sizeof(int))) != NULL)) {
        for (int i = 0; i < size; i++)
            ic[i] = (int)counts[i];
        done = MPI_LAYER_CALL(mpi_nb_rs(f2c_buf(sb), (void *)f2c_buf(rb), ic,
                                        PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), c,
                                        persistent, &creq, &ret));
        if (ic != stack)
            free(ic);
    }
    if (done) {
        set_req(request, creq, ierr, ret);
        return;
    }
    f = (void (*)(void))next_sym(twin, self);
    if (f == NULL)
        set_err(ierr, MPI_ERR_INTERN);
    else if (persistent)
        ((void (*)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(
            sb, rb, counts, dt, op, comm, info, request, ierr);
    else
        ((void (*)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(
            sb, rb, counts, dt, op, comm, request, ierr);
}

#endif /* OPEN_MPI */

/* Fortran requests of an array as C handles (in c, of n; malloc'ed when
 * more than fit in stack, which must be freed by the caller if it is not
 * stack). NULL when out of memory. */
static MPI_Request *f2c_reqs(int n, const MPI_Fint *freqs, MPI_Request *stack,
                             int nstack)
{
    MPI_Request *c = stack;
    if (n > nstack && (c = malloc((size_t)n * sizeof(*c))) == NULL)
        return NULL;
    for (int i = 0; i < n; i++)
        c[i] = PMPI_Request_f2c(freqs[i]);
    return c;
}

/* The wait and test family: the layer's progress (and its waits for its
 * own requests), then MPI's entry point, the pmpi_ twin, with the caller's
 * arguments. Waitany and Waitsome try MPI's Testany/Testsome twin first
 * and wait a slice for one of the layer's between tries, as in C. */
typedef void fn1_t(MPI_Fint *, MPI_Fint *, MPI_Fint *);

static void f_wait(const char *twin, const char *self, MPI_Fint *req,
                   MPI_Fint *status, MPI_Fint *ierr)
{
    fn1_t *f = (fn1_t *)next_sym(twin, self);
    mpi_nb_wait(PMPI_Request_f2c(*req));
    if (f)
        f(req, status, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

static void f_waitall(const char *twin, const char *self, MPI_Fint *count,
                      MPI_Fint *reqs, MPI_Fint *statuses, MPI_Fint *ierr)
{
    void (*f)(void);
    if (mpi_nb_outstanding())
        for (int i = 0; i < (int)*count; i++)
            mpi_nb_wait(PMPI_Request_f2c(reqs[i]));
    f = (void (*)(void))next_sym(twin, self);
    if (f)
        ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))f)(
            count, reqs, statuses, ierr);
    else
        set_err(ierr, MPI_ERR_INTERN);
}

/* Waitany (some = 0) or Waitsome (1); tw_test is the twin of the test
 * form, self_test its own name. a, b, c: index, status (waitany) or
 * outcount, indices, statuses (waitsome). */
static void f_waitany(int some, const char *twin, const char *self,
                      const char *tw_test, const char *self_test,
                      MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *a, MPI_Fint *b,
                      MPI_Fint *c, MPI_Fint *ierr)
{
    void (*wait)(void) = (void (*)(void))next_sym(twin, self);
    void (*test)(void) = (void (*)(void))next_sym(tw_test, self_test);
    MPI_Request stack[64], *creqs;
    int n = (int)*count;

    if (wait == NULL || test == NULL) {
        set_err(ierr, MPI_ERR_INTERN);
        return;
    }
    while (mpi_nb_outstanding()) {
        MPI_Fint flag = 0;
        int ours;
        mpi_nb_progress();
        if (some) {
            ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                       MPI_Fint *, MPI_Fint *))test)(count, reqs, a, b, c,
                                                     ierr);
            flag = *a != 0; /* outcount: MPI_UNDEFINED or a number */
        } else {
            ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                       MPI_Fint *, MPI_Fint *))test)(count, reqs, a, &flag, b,
                                                     ierr);
        }
        if ((ierr && *ierr != MPI_SUCCESS) || flag)
            return;
        creqs = f2c_reqs(n, reqs, stack, 64);
        if (creqs == NULL)
            break;
        ours = mpi_nb_wait_slice(n, creqs);
        if (creqs != stack)
            free(creqs);
        if (!ours)
            break;
    }
    if (some)
        ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *))wait)(count, reqs, a, b, c, ierr);
    else
        ((void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *))wait)(count, reqs, a, b, ierr);
}

/* The test forms and MPI_Request_get_status: progress, then MPI's twin
 * with the caller's n arguments (3, 4 or 5, ierr last). */
typedef void fn3_t(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void fn4_t(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void fn5_t(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                   MPI_Fint *);

static void f_test(int n, const char *twin, const char *self, MPI_Fint *a,
                   MPI_Fint *b, MPI_Fint *c, MPI_Fint *d, MPI_Fint *e,
                   MPI_Fint *ierr)
{
    void *f = next_sym(twin, self);
    mpi_nb_progress();
    if (f == NULL)
        set_err(ierr, MPI_ERR_INTERN);
    else if (n == 3)
        ((fn3_t *)f)(a, b, c, ierr);
    else if (n == 4)
        ((fn4_t *)f)(a, b, c, d, ierr);
    else
        ((fn5_t *)f)(a, b, c, d, e, ierr);
}

static void f_request_free(const char *twin, const char *self, MPI_Fint *req,
                           MPI_Fint *ierr)
{
    MPI_Request c = PMPI_Request_f2c(*req);
    int ret = MPI_Request_free(&c); /* the C wrapper knows the layer's */
    (void)twin;
    (void)self;
    if (ret == MPI_SUCCESS)
        *req = PMPI_Request_c2f(c);
    set_err(ierr, ret);
}

static void f_start(const char *twin, const char *self, MPI_Fint *req,
                    MPI_Fint *ierr)
{
    MPI_Request c = PMPI_Request_f2c(*req);
    (void)twin;
    (void)self;
    set_err(ierr, MPI_Start(&c));
}

static void f_startall(const char *twin, const char *self, MPI_Fint *count,
                       MPI_Fint *reqs, MPI_Fint *ierr)
{
    MPI_Request stack[64], *c = f2c_reqs((int)*count, reqs, stack, 64);
    (void)twin;
    (void)self;
    if (c == NULL) {
        set_err(ierr, MPI_ERR_NO_MEM);
        return;
    }
    set_err(ierr, MPI_Startall((int)*count, c));
    if (c != stack)
        free(c);
}

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

#define F_IALLREDUCE(name, twin)                                               \
    MPI_LAYER_EXPORT void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt,  \
                               MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req,    \
                               MPI_Fint *ierr);                                \
    void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt, MPI_Fint *op,     \
              MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)                   \
    {                                                                          \
        f_iallreduce(0, #twin, #name, sb, rb, n, dt, op, comm, NULL, req,      \
                     ierr);                                                    \
    }
#define F_ALLREDUCE_INIT(name, twin)                                           \
    MPI_LAYER_EXPORT void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt,  \
                               MPI_Fint *op, MPI_Fint *comm, MPI_Fint *info,   \
                               MPI_Fint *req, MPI_Fint *ierr);                 \
    void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt, MPI_Fint *op,     \
              MPI_Fint *comm, MPI_Fint *info, MPI_Fint *req, MPI_Fint *ierr)   \
    {                                                                          \
        f_iallreduce(1, #twin, #name, sb, rb, n, dt, op, comm, info, req,      \
                     ierr);                                                    \
    }
#define F_IREDUCE(name, twin)                                                  \
    MPI_LAYER_EXPORT void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt,  \
                               MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,   \
                               MPI_Fint *req, MPI_Fint *ierr);                 \
    void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt, MPI_Fint *op,     \
              MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)   \
    {                                                                          \
        f_ireduce(0, #twin, #name, sb, rb, n, dt, op, root, comm, NULL, req,   \
                  ierr);                                                       \
    }
#define F_REDUCE_INIT(name, twin)                                              \
    MPI_LAYER_EXPORT void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt,  \
                               MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm,   \
                               MPI_Fint *info, MPI_Fint *req, MPI_Fint *ierr); \
    void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt, MPI_Fint *op,     \
              MPI_Fint *root, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *req,   \
              MPI_Fint *ierr)                                                  \
    {                                                                          \
        f_ireduce(1, #twin, #name, sb, rb, n, dt, op, root, comm, info, req,   \
                  ierr);                                                       \
    }
#define F_IBCAST(name, twin)                                                   \
    MPI_LAYER_EXPORT void name(void *b, MPI_Fint *n, MPI_Fint *dt,             \
                               MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req,  \
                               MPI_Fint *ierr);                                \
    void name(void *b, MPI_Fint *n, MPI_Fint *dt, MPI_Fint *root,              \
              MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)                   \
    {                                                                          \
        f_ibcast(0, #twin, #name, b, n, dt, root, comm, NULL, req, ierr);      \
    }
#define F_BCAST_INIT(name, twin)                                               \
    MPI_LAYER_EXPORT void name(void *b, MPI_Fint *n, MPI_Fint *dt,             \
                               MPI_Fint *root, MPI_Fint *comm, MPI_Fint *info, \
                               MPI_Fint *req, MPI_Fint *ierr);                 \
    void name(void *b, MPI_Fint *n, MPI_Fint *dt, MPI_Fint *root,              \
              MPI_Fint *comm, MPI_Fint *info, MPI_Fint *req, MPI_Fint *ierr)   \
    {                                                                          \
        f_ibcast(1, #twin, #name, b, n, dt, root, comm, info, req, ierr);      \
    }
#define F_IBARRIER(name, twin)                                                 \
    MPI_LAYER_EXPORT void name(MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr); \
    void name(MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)                   \
    {                                                                          \
        f_ibarrier(0, #twin, #name, comm, NULL, req, ierr);                    \
    }
#define F_BARRIER_INIT(name, twin)                                             \
    MPI_LAYER_EXPORT void name(MPI_Fint *comm, MPI_Fint *info, MPI_Fint *req,  \
                               MPI_Fint *ierr);                                \
    void name(MPI_Fint *comm, MPI_Fint *info, MPI_Fint *req, MPI_Fint *ierr)   \
    {                                                                          \
        f_ibarrier(1, #twin, #name, comm, info, req, ierr);                    \
    }
#define F_IALLGATHER(name, twin)                                               \
    MPI_LAYER_EXPORT void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, \
                               MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *comm,     \
                               MPI_Fint *req, MPI_Fint *ierr);                 \
    void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc,    \
              MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)     \
    {                                                                          \
        f_iblocks(0, 0, #twin, #name, sb, sc, st, rb, rc, rt, NULL, comm,      \
                  NULL, req, ierr);                                            \
    }
#define F_ALLGATHER_INIT(name, twin)                                           \
    MPI_LAYER_EXPORT void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, \
                               MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *comm,     \
                               MPI_Fint *info, MPI_Fint *req, MPI_Fint *ierr); \
    void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc,    \
              MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *info, MPI_Fint *req,     \
              MPI_Fint *ierr)                                                  \
    {                                                                          \
        f_iblocks(0, 1, #twin, #name, sb, sc, st, rb, rc, rt, NULL, comm,      \
                  info, req, ierr);                                            \
    }
#define F_IROOTED(name, twin, coll)                                            \
    MPI_LAYER_EXPORT void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, \
                               MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *root,     \
                               MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr); \
    void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc,    \
              MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req,     \
              MPI_Fint *ierr)                                                  \
    {                                                                          \
        f_iblocks(coll, 0, #twin, #name, sb, sc, st, rb, rc, rt, root, comm,   \
                  NULL, req, ierr);                                            \
    }
#define F_ROOTED_INIT(name, twin, coll)                                        \
    MPI_LAYER_EXPORT void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, \
                               MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *root,     \
                               MPI_Fint *comm, MPI_Fint *info, MPI_Fint *req,  \
                               MPI_Fint *ierr);                                \
    void name(void *sb, MPI_Fint *sc, MPI_Fint *st, void *rb, MPI_Fint *rc,    \
              MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *info,    \
              MPI_Fint *req, MPI_Fint *ierr)                                   \
    {                                                                          \
        f_iblocks(coll, 1, #twin, #name, sb, sc, st, rb, rc, rt, root, comm,   \
                  info, req, ierr);                                            \
    }
#define F_IGATHER(name, twin) F_IROOTED(name, twin, 1)
#define F_ISCATTER(name, twin) F_IROOTED(name, twin, 2)
#define F_GATHER_INIT(name, twin) F_ROOTED_INIT(name, twin, 1)
#define F_SCATTER_INIT(name, twin) F_ROOTED_INIT(name, twin, 2)
#define F_IRS(name, twin, vector)                                              \
    MPI_LAYER_EXPORT void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt,  \
                               MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req,    \
                               MPI_Fint *ierr);                                \
    void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt, MPI_Fint *op,     \
              MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)                   \
    {                                                                          \
        f_irs(vector, 0, #twin, #name, sb, rb, n, dt, op, comm, NULL, req,     \
              ierr);                                                           \
    }
#define F_RS_INIT(name, twin, vector)                                          \
    MPI_LAYER_EXPORT void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt,  \
                               MPI_Fint *op, MPI_Fint *comm, MPI_Fint *info,   \
                               MPI_Fint *req, MPI_Fint *ierr);                 \
    void name(void *sb, void *rb, MPI_Fint *n, MPI_Fint *dt, MPI_Fint *op,     \
              MPI_Fint *comm, MPI_Fint *info, MPI_Fint *req, MPI_Fint *ierr)   \
    {                                                                          \
        f_irs(vector, 1, #twin, #name, sb, rb, n, dt, op, comm, info, req,     \
              ierr);                                                           \
    }
#define F_IRSB(name, twin) F_IRS(name, twin, 0)
#define F_IRSV(name, twin) F_IRS(name, twin, 1)
#define F_RSB_INIT(name, twin) F_RS_INIT(name, twin, 0)
#define F_RSV_INIT(name, twin) F_RS_INIT(name, twin, 1)
#define F_WAIT(name, twin)                                                     \
    MPI_LAYER_EXPORT void name(MPI_Fint *req, MPI_Fint *status,                \
                               MPI_Fint *ierr);                                \
    void name(MPI_Fint *req, MPI_Fint *status, MPI_Fint *ierr)                 \
    {                                                                          \
        f_wait(#twin, #name, req, status, ierr);                               \
    }
#define F_WAITALL(name, twin)                                                  \
    MPI_LAYER_EXPORT void name(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *sts,     \
                               MPI_Fint *ierr);                                \
    void name(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *sts, MPI_Fint *ierr)      \
    {                                                                          \
        f_waitall(#twin, #name, n, reqs, sts, ierr);                           \
    }
/* The test form's names from the wait form's: "wait" -> "test". */
#define F_WAITANY(name, twin, tname, ttwin)                                    \
    MPI_LAYER_EXPORT void name(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *idx,     \
                               MPI_Fint *st, MPI_Fint *ierr);                  \
    void name(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *idx, MPI_Fint *st,        \
              MPI_Fint *ierr)                                                  \
    {                                                                          \
        f_waitany(0, #twin, #name, #ttwin, #tname, n, reqs, idx, st, NULL,     \
                  ierr);                                                       \
    }
#define F_WAITSOME(name, twin, tname, ttwin)                                   \
    MPI_LAYER_EXPORT void name(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *out,     \
                               MPI_Fint *idx, MPI_Fint *sts, MPI_Fint *ierr);  \
    void name(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *out, MPI_Fint *idx,       \
              MPI_Fint *sts, MPI_Fint *ierr)                                   \
    {                                                                          \
        f_waitany(1, #twin, #name, #ttwin, #tname, n, reqs, out, idx, sts,     \
                  ierr);                                                       \
    }
/* Test (3 arguments and ierr), Testall and Request_get_status (4),
 * Testany (5), Testsome (6): all passed through after progress. */
#define F_TEST3(name, twin)                                                    \
    MPI_LAYER_EXPORT void name(MPI_Fint *a, MPI_Fint *b, MPI_Fint *c,          \
                               MPI_Fint *ierr);                                \
    void name(MPI_Fint *a, MPI_Fint *b, MPI_Fint *c, MPI_Fint *ierr)           \
    {                                                                          \
        f_test(3, #twin, #name, a, b, c, NULL, NULL, ierr);                    \
    }
#define F_TEST4(name, twin)                                                    \
    MPI_LAYER_EXPORT void name(MPI_Fint *a, MPI_Fint *b, MPI_Fint *c,          \
                               MPI_Fint *d, MPI_Fint *ierr);                   \
    void name(MPI_Fint *a, MPI_Fint *b, MPI_Fint *c, MPI_Fint *d,              \
              MPI_Fint *ierr)                                                  \
    {                                                                          \
        f_test(4, #twin, #name, a, b, c, d, NULL, ierr);                       \
    }
#define F_TEST5(name, twin)                                                    \
    MPI_LAYER_EXPORT void name(MPI_Fint *a, MPI_Fint *b, MPI_Fint *c,          \
                               MPI_Fint *d, MPI_Fint *e, MPI_Fint *ierr);      \
    void name(MPI_Fint *a, MPI_Fint *b, MPI_Fint *c, MPI_Fint *d, MPI_Fint *e, \
              MPI_Fint *ierr)                                                  \
    {                                                                          \
        f_test(5, #twin, #name, a, b, c, d, e, ierr);                          \
    }
#define F_REQUEST_FREE(name, twin)                                             \
    MPI_LAYER_EXPORT void name(MPI_Fint *req, MPI_Fint *ierr);                 \
    void name(MPI_Fint *req, MPI_Fint *ierr)                                   \
    {                                                                          \
        f_request_free(#twin, #name, req, ierr);                               \
    }
#define F_START(name, twin)                                                    \
    MPI_LAYER_EXPORT void name(MPI_Fint *req, MPI_Fint *ierr);                 \
    void name(MPI_Fint *req, MPI_Fint *ierr)                                   \
    {                                                                          \
        f_start(#twin, #name, req, ierr);                                      \
    }
#define F_STARTALL(name, twin)                                                 \
    MPI_LAYER_EXPORT void name(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *ierr);   \
    void name(MPI_Fint *n, MPI_Fint *reqs, MPI_Fint *ierr)                     \
    {                                                                          \
        f_startall(#twin, #name, n, reqs, ierr);                               \
    }

/* Wait forms name their test form too. */
#define F_ALL_NAMES2(GEN, lower, upper, tlower, tupper)                        \
    GEN(lower, p##lower, tlower, p##tlower)                                    \
    GEN(lower##_, p##lower##_, tlower##_, p##tlower##_)                        \
    GEN(lower##__, p##lower##__, tlower##__, p##tlower##__)                    \
    GEN(upper, P##upper, tupper, P##tupper)                                    \
    GEN(lower##_f08_, p##lower##_f08_, tlower##_f08_, p##tlower##_f08_)

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
/* Nonblocking forms, persistent forms (Open MPI's MPIX_ extension) and the
 * calls that start and complete them. */
F_ALL_NAMES(F_IALLREDUCE, mpi_iallreduce, MPI_IALLREDUCE)
F_ALL_NAMES(F_IREDUCE, mpi_ireduce, MPI_IREDUCE)
F_ALL_NAMES(F_IBCAST, mpi_ibcast, MPI_IBCAST)
F_ALL_NAMES(F_IBARRIER, mpi_ibarrier, MPI_IBARRIER)
F_ALL_NAMES(F_IALLGATHER, mpi_iallgather, MPI_IALLGATHER)
F_ALL_NAMES(F_IGATHER, mpi_igather, MPI_IGATHER)
F_ALL_NAMES(F_ISCATTER, mpi_iscatter, MPI_ISCATTER)
F_ALL_NAMES(F_IRSB, mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK)
F_ALL_NAMES(F_IRSV, mpi_ireduce_scatter, MPI_IREDUCE_SCATTER)
F_ALL_NAMES(F_ALLREDUCE_INIT, mpix_allreduce_init, MPIX_ALLREDUCE_INIT)
F_ALL_NAMES(F_REDUCE_INIT, mpix_reduce_init, MPIX_REDUCE_INIT)
F_ALL_NAMES(F_BCAST_INIT, mpix_bcast_init, MPIX_BCAST_INIT)
F_ALL_NAMES(F_BARRIER_INIT, mpix_barrier_init, MPIX_BARRIER_INIT)
F_ALL_NAMES(F_ALLGATHER_INIT, mpix_allgather_init, MPIX_ALLGATHER_INIT)
F_ALL_NAMES(F_GATHER_INIT, mpix_gather_init, MPIX_GATHER_INIT)
F_ALL_NAMES(F_SCATTER_INIT, mpix_scatter_init, MPIX_SCATTER_INIT)
F_ALL_NAMES(F_RSB_INIT, mpix_reduce_scatter_block_init,
            MPIX_REDUCE_SCATTER_BLOCK_INIT)
F_ALL_NAMES(F_RSV_INIT, mpix_reduce_scatter_init, MPIX_REDUCE_SCATTER_INIT)
F_ALL_NAMES(F_WAIT, mpi_wait, MPI_WAIT)
F_ALL_NAMES(F_WAITALL, mpi_waitall, MPI_WAITALL)
F_ALL_NAMES2(F_WAITANY, mpi_waitany, MPI_WAITANY, mpi_testany, MPI_TESTANY)
F_ALL_NAMES2(F_WAITSOME, mpi_waitsome, MPI_WAITSOME, mpi_testsome, MPI_TESTSOME)
F_ALL_NAMES(F_TEST3, mpi_test, MPI_TEST)
F_ALL_NAMES(F_TEST4, mpi_testall, MPI_TESTALL)
F_ALL_NAMES(F_TEST3, mpi_request_get_status, MPI_REQUEST_GET_STATUS)
F_ALL_NAMES(F_TEST5, mpi_testany, MPI_TESTANY)
F_ALL_NAMES(F_TEST5, mpi_testsome, MPI_TESTSOME)
F_ALL_NAMES(F_REQUEST_FREE, mpi_request_free, MPI_REQUEST_FREE)
F_ALL_NAMES(F_START, mpi_start, MPI_START)
F_ALL_NAMES(F_STARTALL, mpi_startall, MPI_STARTALL)
#else
/* MPICH's mpi_f08 calls PMPI_Init, PMPI_Init_thread and PMPI_Barrier
 * directly; its collectives with buffers go through the C MPI_ functions.
 * Its f08 entry points have no pmpi_ twins under these names, so the
 * wrappers forward to the next definition of their own name. */
F_INIT(mpi_init_f08_, pmpi_init_f08_)
F_INIT_THREAD(mpi_init_thread_f08_, pmpi_init_thread_f08_)
F_BARRIER(mpi_barrier_f08_, pmpi_barrier_f08_)
/* Its mpi_f08 start, wait and test calls go to PMPI_ directly too, so the
 * layer's requests (nonblocking collectives made through the C MPI_
 * functions, persistent ones) would never complete there. */
F_WAIT(mpi_wait_f08_, pmpi_wait_f08_)
F_WAITALL(mpi_waitall_f08_, pmpi_waitall_f08_)
F_WAITANY(mpi_waitany_f08_, pmpi_waitany_f08_, mpi_testany_f08_,
          pmpi_testany_f08_)
F_WAITSOME(mpi_waitsome_f08_, pmpi_waitsome_f08_, mpi_testsome_f08_,
           pmpi_testsome_f08_)
F_TEST3(mpi_test_f08_, pmpi_test_f08_)
F_TEST4(mpi_testall_f08_, pmpi_testall_f08_)
F_TEST3(mpi_request_get_status_f08_, pmpi_request_get_status_f08_)
F_TEST5(mpi_testany_f08_, pmpi_testany_f08_)
F_TEST5(mpi_testsome_f08_, pmpi_testsome_f08_)
F_REQUEST_FREE(mpi_request_free_f08_, pmpi_request_free_f08_)
F_START(mpi_start_f08_, pmpi_start_f08_)
F_STARTALL(mpi_startall_f08_, pmpi_startall_f08_)
#endif
