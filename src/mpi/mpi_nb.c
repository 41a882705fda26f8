/*
 * The nonblocking collectives of libincoll_mpi: MPI_Iallreduce, Ireduce,
 * Ibcast, Ibarrier, Iallgather and Ireduce_scatter_block run on the fabric
 * as libincoll requests (incoll_iX) and hand the program a generalized
 * request (MPI_Grequest_start), which it completes with any of MPI's wait
 * and test calls, mixed freely with other requests.
 *
 * MPI completes a generalized request only when told (MPI_Grequest_
 * complete), and has no hook for the layer to progress its own. So the
 * layer wraps MPI_Wait, Test and the rest of the family, and
 * MPI_Request_get_status: each first progresses the outstanding libincoll
 * requests and completes the generalized requests of those that are done,
 * then lets MPI do the rest. A wait on one of them blocks in libincoll
 * (in poll, in slices of a millisecond between which the others are
 * progressed) before MPI's wait sees it complete. With
 * INCOLL_PROGRESS_THREAD=1 libincoll progresses them in the background as
 * well, so that computation between the start and the wait overlaps.
 *
 * The decision to offload is the blocking form's (mpi_layer_nb_plan): the
 * same on every rank. Errors are raised as the blocking forms raise them,
 * and are the request's MPI_ERROR.
 */
#include "mpi/mpi_layer.h"

#include "host/req.h"

#include "common/log.h"

#include <stdlib.h>

typedef struct nb_rec {
    MPI_Request mreq;  /* the generalized request */
    incoll_req_h ireq; /* NULL once complete */
    mpi_coll_t coll;
    MPI_Comm comm;
    void *st;
    int was_in;
    int err;       /* MPI code once complete */
    int app_freed; /* MPI_Request_free before completion */
    struct nb_rec *next;
} nb_rec_t;

static nb_rec_t *pending; /* not yet complete, oldest first */
static nb_rec_t *pending_tail;
static int npending;

#define SLICE_NS 1000000ull

static int query_fn(void *extra, MPI_Status *status)
{
    nb_rec_t *r = extra;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = r->err;
    return r->err;
}

static int free_fn(void *extra)
{
    free(extra);
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    /* A collective cannot be cancelled; MPI says nothing happens then. */
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* Takes r off the pending list. */
static void unlink_rec(nb_rec_t *r)
{
    nb_rec_t **pp = &pending, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL)
        return;
    *pp = r->next;
    if (pending_tail == r)
        pending_tail = prev;
    npending--;
}

/* r's libincoll request completed with status: counts it, raises an
 * error, completes the generalized request (after which MPI may free r at
 * once, when the program freed its request already). */
static void finish(nb_rec_t *r, incoll_status_t status)
{
    MPI_Request mreq = r->mreq;
    unlink_rec(r);
    r->ireq = NULL;
    r->err = mpi_layer_nb_settle(r->st, r->coll, r->comm, status, r->was_in);
    if (r->app_freed) {
        PMPI_Grequest_complete(mreq);
        PMPI_Request_free(&mreq); /* calls free_fn */
        return;
    }
    PMPI_Grequest_complete(mreq);
}

/* Completes what libincoll has completed, without blocking. Layer lock
 * held. */
static void progress(void)
{
    nb_rec_t *next;
    if (pending == NULL)
        return;
    /* One turn of libincoll's lock for all, not one per request: a
     * program that tests in a loop must leave the lock to libincoll's
     * request threads. */
    host_req_progress(pending->ireq ? mpi_layer_incoll(NULL, NULL) : NULL);
    for (nb_rec_t *r = pending; r; r = next) {
        int done = 0;
        incoll_status_t status = INCOLL_OK;
        next = r->next;
        if (!host_req_done(r->ireq))
            continue;
        status = incoll_req_test(r->ireq, &done);
        if (done)
            finish(r, status);
    }
}

static nb_rec_t *find(MPI_Request req)
{
    if (req == MPI_REQUEST_NULL)
        return NULL;
    for (nb_rec_t *r = pending; r; r = r->next)
        if (r->mreq == req)
            return r;
    return NULL;
}

/* Blocks (in libincoll) until r completes, progressing the others
 * between slices. */
static void wait_rec(nb_rec_t *r)
{
    MPI_Request mreq = r->mreq;

    for (;;) {
        incoll_status_t status;
        if (host_req_wait_ns(r->ireq, SLICE_NS, &status)) {
            finish(r, status); /* may free r (freed by the program) */
            return;
        }
        /* progress() may complete (and free) r too: look it up again. */
        progress();
        if (find(mreq) != r)
            return;
    }
}

/* Waits for one of ours among reqs for a slice; 0 when none is there. */
static int wait_slice(int n, MPI_Request reqs[])
{
    for (int i = 0; i < n; i++) {
        nb_rec_t *r = find(reqs[i]);
        incoll_status_t status;
        if (r == NULL)
            continue;
        if (host_req_wait_ns(r->ireq, SLICE_NS, &status))
            finish(r, status);
        return 1;
    }
    return 0;
}

/* Makes the generalized request of a started libincoll request. */
static int track(incoll_req_h ireq, mpi_coll_t coll, MPI_Comm comm,
                 const mpi_nb_plan_t *p, MPI_Request *request)
{
    nb_rec_t *r = calloc(1, sizeof(*r));
    int ret;
    if (r == NULL) {
        incoll_req_wait(ireq); /* no way to hand it over: finish it here */
        return MPI_ERR_NO_MEM;
    }
    r->ireq = ireq;
    r->coll = coll;
    r->comm = comm;
    r->st = p->st;
    r->was_in = p->was_in;
    ret = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, &r->mreq);
    if (ret != MPI_SUCCESS) {
        incoll_req_wait(ireq);
        free(r);
        return ret;
    }
    if (pending_tail)
        pending_tail->next = r;
    else
        pending = r;
    pending_tail = r;
    npending++;
    *request = r->mreq;
    return MPI_SUCCESS;
}

/* The call was refused by libincoll at once (bad arguments, no memory):
 * raised like a failed blocking call; no request. */
static int refused(const mpi_nb_plan_t *p, mpi_coll_t coll, MPI_Comm comm,
                   incoll_status_t status, MPI_Request *request)
{
    *request = MPI_REQUEST_NULL;
    return mpi_layer_nb_settle(p->st, coll, comm, status, p->was_in);
}

/* A zero-byte call on the fabric: a request that is complete at once. */
static int complete_now(const mpi_nb_plan_t *p, mpi_coll_t coll, MPI_Comm comm,
                        MPI_Request *request)
{
    nb_rec_t *r = calloc(1, sizeof(*r));
    int ret;
    if (r == NULL)
        return MPI_ERR_NO_MEM;
    r->err = mpi_layer_nb_settle(p->st, coll, comm, INCOLL_OK, p->was_in);
    ret = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, request);
    if (ret != MPI_SUCCESS) {
        free(r);
        return ret;
    }
    return PMPI_Grequest_complete(*request);
}

static int started(incoll_status_t status, incoll_req_h ireq,
                   const mpi_nb_plan_t *p, mpi_coll_t coll, MPI_Comm comm,
                   MPI_Request *request)
{
    if (status != INCOLL_OK)
        return refused(p, coll, comm, status, request);
    return track(ireq, coll, comm, p, request);
}

MPI_LAYER_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf,
                                    int count, MPI_Datatype datatype, MPI_Op op,
                                    MPI_Comm comm, MPI_Request *request)
{
    mpi_nb_plan_t p;
    incoll_req_h ireq = NULL;
    int ret;

    mpi_layer_enter();
    if (!mpi_layer_nb_plan(MPI_COLL_ALLREDUCE, comm, count, datatype, op, 0,
                           &p))
        return mpi_layer_leave(0)
                   ? 0
                   : PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op,
                                     comm, request);
    if (count == 0) {
        ret = complete_now(&p, MPI_COLL_ALLREDUCE, comm, request);
    } else {
        incoll_status_t status = incoll_iallreduce(
            p.icomm, sendbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sendbuf,
            recvbuf, (size_t)count, p.idt, p.iop, &ireq);
        ret = started(status, ireq, &p, MPI_COLL_ALLREDUCE, comm, request);
    }
    return mpi_layer_leave(ret);
}

MPI_LAYER_EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
                                 MPI_Datatype datatype, MPI_Op op, int root,
                                 MPI_Comm comm, MPI_Request *request)
{
    mpi_nb_plan_t p;
    incoll_req_h ireq = NULL;
    int ret;

    mpi_layer_enter();
    if (!mpi_layer_nb_plan(MPI_COLL_REDUCE, comm, count, datatype, op, root,
                           &p))
        return mpi_layer_leave(0)
                   ? 0
                   : PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root,
                                  comm, request);
    if (count == 0) {
        ret = complete_now(&p, MPI_COLL_REDUCE, comm, request);
    } else {
        incoll_status_t status = incoll_ireduce(
            p.icomm, sendbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sendbuf,
            recvbuf, (size_t)count, p.idt, p.iop, root, &ireq);
        ret = started(status, ireq, &p, MPI_COLL_REDUCE, comm, request);
    }
    return mpi_layer_leave(ret);
}

MPI_LAYER_EXPORT int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype,
                                int root, MPI_Comm comm, MPI_Request *request)
{
    mpi_nb_plan_t p;
    incoll_req_h ireq = NULL;
    int ret;

    mpi_layer_enter();
    if (!mpi_layer_nb_plan(MPI_COLL_BCAST, comm, count, datatype, MPI_OP_NULL,
                           root, &p))
        return mpi_layer_leave(0)
                   ? 0
                   : PMPI_Ibcast(buffer, count, datatype, root, comm, request);
    if (p.bytes == 0) {
        ret = complete_now(&p, MPI_COLL_BCAST, comm, request);
    } else {
        incoll_status_t status =
            incoll_ibcast(p.icomm, buffer, p.bytes, root, &ireq);
        ret = started(status, ireq, &p, MPI_COLL_BCAST, comm, request);
    }
    return mpi_layer_leave(ret);
}

MPI_LAYER_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    mpi_nb_plan_t p;
    incoll_req_h ireq = NULL;
    incoll_status_t status;

    mpi_layer_enter();
    if (!mpi_layer_nb_plan(MPI_COLL_BARRIER, comm, 0, MPI_DATATYPE_NULL,
                           MPI_OP_NULL, 0, &p))
        return mpi_layer_leave(0) ? 0 : PMPI_Ibarrier(comm, request);
    status = incoll_ibarrier(p.icomm, &ireq);
    return mpi_layer_leave(
        started(status, ireq, &p, MPI_COLL_BARRIER, comm, request));
}

MPI_LAYER_EXPORT int MPI_Iallgather(const void *sendbuf, int sendcount,
                                    MPI_Datatype sendtype, void *recvbuf,
                                    int recvcount, MPI_Datatype recvtype,
                                    MPI_Comm comm, MPI_Request *request)
{
    mpi_nb_plan_t p;
    incoll_req_h ireq = NULL;
    int ret, same = 1;

    mpi_layer_enter();
    /* The send side must carry the block's bytes (checked by the blocking
     * form too): else MPI judges. */
    if (sendbuf != MPI_IN_PLACE) {
        int ss = 0, rs = 0;
        same = PMPI_Type_size(sendtype, &ss) == MPI_SUCCESS &&
               PMPI_Type_size(recvtype, &rs) == MPI_SUCCESS &&
               (long long)ss * sendcount == (long long)rs * recvcount;
    }
    if (!same || !mpi_layer_nb_plan(MPI_COLL_ALLGATHER, comm, recvcount,
                                    recvtype, MPI_OP_NULL, 0, &p))
        return mpi_layer_leave(0)
                   ? 0
                   : PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf,
                                     recvcount, recvtype, comm, request);
    if (p.bytes == 0) {
        ret = complete_now(&p, MPI_COLL_ALLGATHER, comm, request);
    } else {
        incoll_status_t status = incoll_iallgather(
            p.icomm, sendbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sendbuf,
            recvbuf, p.bytes, &ireq);
        ret = started(status, ireq, &p, MPI_COLL_ALLGATHER, comm, request);
    }
    return mpi_layer_leave(ret);
}

MPI_LAYER_EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf,
                                               void *recvbuf, int recvcount,
                                               MPI_Datatype datatype, MPI_Op op,
                                               MPI_Comm comm,
                                               MPI_Request *request)
{
    mpi_nb_plan_t p;
    incoll_req_h ireq = NULL;
    int ret;

    mpi_layer_enter();
    if (!mpi_layer_nb_plan(MPI_COLL_REDUCE_SCATTER_BLOCK, comm, recvcount,
                           datatype, op, 0, &p))
        return mpi_layer_leave(0)
                   ? 0
                   : PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount,
                                                datatype, op, comm, request);
    if (recvcount == 0) {
        ret = complete_now(&p, MPI_COLL_REDUCE_SCATTER_BLOCK, comm, request);
    } else {
        incoll_status_t status = incoll_ireduce_scatter(
            p.icomm, sendbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sendbuf,
            recvbuf, (size_t)recvcount, p.idt, p.iop, &ireq);
        ret = started(status, ireq, &p, MPI_COLL_REDUCE_SCATTER_BLOCK, comm,
                      request);
    }
    return mpi_layer_leave(ret);
}

/* ---- completion: the wait and test family ---- */

/* Progresses ours before MPI's test or wait: with the lock, and only when
 * there are any (no cost to programs without them). */
static void progress_all(void)
{
    if (npending == 0)
        return;
    mpi_layer_enter();
    progress();
    mpi_layer_leave(0);
}

MPI_LAYER_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (npending > 0) {
        nb_rec_t *r;
        mpi_layer_enter();
        r = find(*request);
        if (r)
            wait_rec(r);
        progress();
        mpi_layer_leave(0);
    }
    return PMPI_Wait(request, status);
}

MPI_LAYER_EXPORT int MPI_Test(MPI_Request *request, int *flag,
                              MPI_Status *status)
{
    progress_all();
    return PMPI_Test(request, flag, status);
}

MPI_LAYER_EXPORT int MPI_Waitall(int count, MPI_Request requests[],
                                 MPI_Status statuses[])
{
    if (npending > 0) {
        mpi_layer_enter();
        for (int i = 0; i < count; i++) {
            nb_rec_t *r = find(requests[i]);
            if (r)
                wait_rec(r);
        }
        mpi_layer_leave(0);
    }
    return PMPI_Waitall(count, requests, statuses);
}

MPI_LAYER_EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag,
                                 MPI_Status statuses[])
{
    progress_all();
    return PMPI_Testall(count, requests, flag, statuses);
}

/* MPI_Waitany and MPI_Waitsome: MPI's test form until it finds one, with
 * a slice of waiting in libincoll between tries while one of ours is in
 * reqs; MPI's wait once none is. */
MPI_LAYER_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index,
                                 MPI_Status *status)
{
    for (;;) {
        int flag = 0, ret, ours;
        if (npending == 0)
            return PMPI_Waitany(count, requests, index, status);
        mpi_layer_enter();
        progress();
        ret = PMPI_Testany(count, requests, index, &flag, status);
        if (ret != MPI_SUCCESS || flag) {
            mpi_layer_leave(0);
            return ret;
        }
        ours = wait_slice(count, requests);
        mpi_layer_leave(0);
        if (!ours)
            return PMPI_Waitany(count, requests, index, status);
    }
}

MPI_LAYER_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[],
                                  int *outcount, int indices[],
                                  MPI_Status statuses[])
{
    for (;;) {
        int ret, ours;
        if (npending == 0)
            return PMPI_Waitsome(incount, requests, outcount, indices,
                                 statuses);
        mpi_layer_enter();
        progress();
        ret = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        if (ret != MPI_SUCCESS || *outcount != 0) {
            mpi_layer_leave(0);
            return ret;
        }
        ours = wait_slice(incount, requests);
        mpi_layer_leave(0);
        if (!ours)
            return PMPI_Waitsome(incount, requests, outcount, indices,
                                 statuses);
    }
}

MPI_LAYER_EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index,
                                 int *flag, MPI_Status *status)
{
    progress_all();
    return PMPI_Testany(count, requests, index, flag, status);
}

MPI_LAYER_EXPORT int MPI_Testsome(int incount, MPI_Request requests[],
                                  int *outcount, int indices[],
                                  MPI_Status statuses[])
{
    progress_all();
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

/* A request of ours freed before completion: MPI (MPICH at least) would
 * call free_fn at once, under the feet of the running operation; the
 * layer frees it itself once complete (finish). */
MPI_LAYER_EXPORT int MPI_Request_free(MPI_Request *request)
{
    if (npending > 0 && request != NULL) {
        nb_rec_t *r;
        mpi_layer_enter();
        r = find(*request);
        if (r) {
            r->app_freed = 1;
            *request = MPI_REQUEST_NULL;
            progress();
            mpi_layer_leave(0);
            return MPI_SUCCESS;
        }
        mpi_layer_leave(0);
    }
    return PMPI_Request_free(request);
}

MPI_LAYER_EXPORT int MPI_Request_get_status(MPI_Request request, int *flag,
                                            MPI_Status *status)
{
    progress_all();
    return PMPI_Request_get_status(request, flag, status);
}

void mpi_nb_finalize(void)
{
    if (npending == 0)
        return;
    mpi_layer_enter();
    while (pending)
        wait_rec(pending);
    mpi_layer_leave(0);
}
