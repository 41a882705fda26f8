/*
 * The nonblocking and persistent collectives of libincoll_mpi.
 *
 * Nonblocking: MPI_Iallreduce, Ireduce, Ibcast, Ibarrier, Iallgather,
 * Igather, Iscatter, Ireduce_scatter_block and Ireduce_scatter run on the
 * fabric as libincoll requests (incoll_iX) and hand the program a
 * generalized request (MPI_Grequest_start), which it completes with any
 * of MPI's wait and test calls, mixed freely with other requests.
 *
 * Persistent: MPI 4.0's MPI_Allreduce_init family (MPICH 4.0) or Open MPI
 * 4.1's MPIX_Allreduce_init family (mpi-ext.h) make a persistent libincoll
 * request (incoll_X_init, prepared once) and hand the program a real
 * persistent MPI request: a zero-byte receive (MPI_Recv_init) on the
 * layer's own duplicate of MPI_COMM_SELF with a tag of its own. MPI_Start
 * and MPI_Startall start the libincoll request and the receive; when the
 * libincoll request completes the layer sends the receive its zero-byte
 * message, and MPI's own wait or test completes it and leaves it
 * inactive, ready for the next start, as MPI defines persistent requests.
 * (A generalized request cannot be started again.)
 *
 * MPI completes a generalized request or that receive only when the layer
 * says so, and has no hook for the layer to progress its own. So the
 * layer wraps MPI_Wait, Test and the rest of the family, and
 * MPI_Request_get_status: each first progresses the outstanding libincoll
 * requests and completes the MPI requests of those that are done, then
 * lets MPI do the rest. A wait on one of them blocks in libincoll (in
 * poll, in slices of a millisecond between which the others are
 * progressed) before MPI's wait sees it complete. With
 * INCOLL_PROGRESS_THREAD=1 libincoll progresses them in the background as
 * well, so that computation between the start and the wait overlaps.
 *
 * The decision to offload is the blocking form's (mpi_call_plan): the
 * same on every rank; a persistent request's is taken once, at init, and
 * the request gets a libincoll communicator of its own, so that requests
 * started in different orders on different ranks still match. Sides that
 * are not dense are packed when a call is issued (persistent: at each
 * start) and unpacked when it completes, with duplicates of their
 * datatypes the layer keeps.
 * Errors are raised as the blocking forms raise them, and are the
 * request's MPI_ERROR (persistent: MPI_Wait's and MPI_Test's return
 * value).
 */
#include "mpi/mpi_layer.h"

#ifdef OPEN_MPI
#include <mpi-ext.h>
#endif

#include "mpi/mpi_log.h"

#include <stdlib.h>

typedef struct nb_rec {
    MPI_Request mreq;  /* the generalized request, or the persistent
                          receive */
    incoll_req_h ireq; /* nonpersistent: NULL once complete; persistent:
                          its libincoll request (NULL for zero bytes) */
    mpi_call_t call;   /* the planned call, its staging and kept types */
    int err;           /* MPI code once complete */
    int app_freed;     /* MPI_Request_free before completion */
    int persistent;    /* an MPI_X_init request */
    int tag;           /* persistent: its receive's tag */
    int active;        /* persistent: started, not complete */
    int waiting;       /* a thread blocks on ireq in libincoll, which gives the
                          layer lock up meanwhile: no other thread tests it */
    struct nb_rec *next;  /* on the pending list */
    struct nb_rec *pnext; /* persistent: on the persistent list */
} nb_rec_t;

static nb_rec_t *pending; /* not yet complete, oldest first */
static nb_rec_t *pending_tail;
static int npending;
static nb_rec_t *persist; /* every persistent request */
static int npersist;
static MPI_Comm self_comm = MPI_COMM_NULL; /* the persistent receives' */
static int next_tag;

#define SLICE_NS 1000000ull
/* Tags of the persistent receives: MPI guarantees at least this many. */
#define TAG_LIMIT 32768

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
    nb_rec_t *r = extra;
    mpi_call_free(&r->call);
    free(r);
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
    r->next = NULL;
    npending--;
}

static void push_pending(nb_rec_t *r)
{
    r->next = NULL;
    if (pending_tail)
        pending_tail->next = r;
    else
        pending = r;
    pending_tail = r;
    npending++;
}

/* Frees an inactive persistent request: its receive, its libincoll
 * request and the record. */
static void persist_destroy(nb_rec_t *r)
{
    nb_rec_t **pp = &persist;
    while (*pp && *pp != r)
        pp = &(*pp)->pnext;
    if (*pp) {
        *pp = r->pnext;
        npersist--;
    }
    if (r->mreq != MPI_REQUEST_NULL)
        PMPI_Request_free(&r->mreq);
    if (r->ireq)
        incoll_req_free(r->ireq);
    mpi_call_free(&r->call); /* and the request's libincoll communicator */
    free(r);
}

/* A start of persistent r is over (its status counted in r->err): the
 * receive gets its message, so MPI's wait and test see it complete. */
static void persist_done(nb_rec_t *r)
{
    r->active = 0;
    PMPI_Send(NULL, 0, MPI_BYTE, 0, r->tag, self_comm);
    if (r->app_freed)
        persist_destroy(r);
}

/* r's libincoll request completed with status: counts it, raises an
 * error, completes the MPI request (after which MPI may free r at once,
 * when the program freed its request already). */
static void finish(nb_rec_t *r, incoll_status_t status)
{
    MPI_Request mreq = r->mreq;
    unlink_rec(r);
    /* the table's host-based algorithm ran on the hosts (the request,
     * released by its test or wait, cannot be asked any more) */
    if (r->call.algo != INCOLL_ALGO_AUTO)
        r->call.algo_where = r->call.algo == INCOLL_ALGO_INC;
    r->err = mpi_call_done(&r->call, status,
                           r->persistent ? MPI_FORM_PERSISTENT : MPI_FORM_NB);
    if (r->persistent) {
        persist_done(r);
        return;
    }
    r->ireq = NULL;
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
    (void)incoll_progress(mpi_layer_incoll(NULL, NULL));
    for (nb_rec_t *r = pending; r; r = next) {
        int done = 0;
        incoll_status_t status = INCOLL_OK;
        next = r->next;
        if (r->waiting || !incoll_req_completed(r->ireq))
            continue;
        status = incoll_req_test(r->ireq, &done);
        if (done)
            finish(r, status);
    }
}

/* The outstanding record of req (a nonblocking request, or a started
 * persistent one), or NULL. */
static nb_rec_t *find(MPI_Request req)
{
    if (req == MPI_REQUEST_NULL)
        return NULL;
    for (nb_rec_t *r = pending; r; r = r->next)
        if (r->mreq == req)
            return r;
    return NULL;
}

/* The persistent record of req, active or not, or NULL. */
static nb_rec_t *persist_find(MPI_Request req)
{
    if (req == MPI_REQUEST_NULL)
        return NULL;
    for (nb_rec_t *r = persist; r; r = r->pnext)
        if (r->mreq == req)
            return r;
    return NULL;
}

/* Waits in libincoll for r for a slice, marked as waited for (no other
 * thread tests it meanwhile); finishes it when it is done (which may free
 * it). 1 when done. */
static int slice_rec(nb_rec_t *r)
{
    incoll_status_t status;
    int done;
    r->waiting = 1;
    status = incoll_req_wait_timeout(r->ireq, SLICE_NS);
    done = status != INCOLL_WAIT_TIMEOUT;
    r->waiting = 0;
    if (done)
        finish(r, status);
    return done;
}

/* A tag nobody is likely to wait for (MPI guarantees tags up to 32767). */
#define PROGRESS_TAG 32761

/* Lets the MPI library progress its own pending operations. Its
 * nonblocking collectives move only inside MPI calls of every rank: a
 * rank that blocked in libincoll alone could hold up another rank that
 * waits in MPI for one of them, while that rank's part of the layer's
 * request (which the one here waits for) comes only after it. An
 * MPI_Iprobe that finds nothing runs MPI's progress engine and takes no
 * message; on MPI_COMM_WORLD, since MPICH's probe on MPI_COMM_SELF looks
 * at that communicator alone. */
static void mpi_progress(void)
{
    int flag = 0;
    PMPI_Iprobe(MPI_ANY_SOURCE, PROGRESS_TAG, MPI_COMM_WORLD, &flag,
                MPI_STATUS_IGNORE);
}

/* Blocks (in libincoll) until r completes, progressing the others and
 * MPI's own operations between slices. */
static void wait_rec(nb_rec_t *r)
{
    MPI_Request mreq = r->mreq;

    for (;;) {
        if (slice_rec(r))
            return; /* r may be freed (freed by the program) */
        /* progress() may complete (and free) r too: look it up again. */
        progress();
        if (find(mreq) != r)
            return;
        mpi_progress();
    }
}

/* Waits for one of ours among reqs for a slice; 0 when none is there. */
static int wait_slice(int n, MPI_Request reqs[])
{
    for (int i = 0; i < n; i++) {
        nb_rec_t *r = find(reqs[i]);
        if (r == NULL)
            continue;
        (void)slice_rec(r);
        return 1;
    }
    return 0;
}

/* Makes the generalized request of a started libincoll request (c is
 * the record's from now on). */
static int track(incoll_req_h ireq, const mpi_call_t *c, MPI_Request *request)
{
    nb_rec_t *r = calloc(1, sizeof(*r));
    int ret;
    if (r == NULL) {
        incoll_req_wait(ireq); /* no way to hand it over: finish it here */
        return MPI_ERR_NO_MEM;
    }
    r->ireq = ireq;
    r->call = *c;
    ret = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, &r->mreq);
    if (ret != MPI_SUCCESS) {
        incoll_req_wait(ireq);
        free(r);
        return ret;
    }
    push_pending(r);
    *request = r->mreq;
    return MPI_SUCCESS;
}

/* A call that ends at once (zero bytes on every rank, or refused or
 * failed on this rank): counted, an error raised, and a request complete
 * from the start (MPI_REQUEST_NULL for an error). */
static int complete_now(mpi_call_t *c, incoll_status_t status,
                        MPI_Request *request)
{
    nb_rec_t *r;
    int ret, err = mpi_call_done(c, status, MPI_FORM_NB);

    *request = MPI_REQUEST_NULL;
    if (err != MPI_SUCCESS)
        return err;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return MPI_ERR_NO_MEM;
    ret = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, request);
    if (ret != MPI_SUCCESS) {
        free(r);
        return ret;
    }
    return PMPI_Grequest_complete(*request);
}

/* A tag no live persistent receive has. */
static int free_tag(void)
{
    for (int tries = 0; tries < TAG_LIMIT; tries++) {
        int tag = next_tag;
        next_tag = (next_tag + 1) % TAG_LIMIT;
        nb_rec_t *r = persist;
        while (r && r->tag != tag)
            r = r->pnext;
        if (r == NULL)
            return tag;
    }
    return -1;
}

/* Makes the persistent MPI request of a persistent libincoll request
 * (NULL for a zero-byte call, complete at each start); c is the record's
 * from now on, or freed on failure. */
static int persist_make(incoll_req_h ireq, mpi_call_t *c, MPI_Request *request)
{
    nb_rec_t *r = calloc(1, sizeof(*r));
    int ret = MPI_ERR_NO_MEM;

    if (r == NULL)
        goto err_free_ireq;
    if (self_comm == MPI_COMM_NULL &&
        (ret = PMPI_Comm_dup(MPI_COMM_SELF, &self_comm)) != MPI_SUCCESS)
        goto err_free_rec;
    r->tag = free_tag();
    if (r->tag < 0) {
        incoll_error("mpi: more than %d persistent collectives at once",
                     TAG_LIMIT);
        ret = MPI_ERR_INTERN;
        goto err_free_rec;
    }
    ret = PMPI_Recv_init(NULL, 0, MPI_BYTE, 0, r->tag, self_comm, &r->mreq);
    if (ret != MPI_SUCCESS)
        goto err_free_rec;
    r->ireq = ireq;
    r->call = *c;
    r->persistent = 1;
    r->pnext = persist;
    persist = r;
    npersist++;
    *request = r->mreq;
    return MPI_SUCCESS;

err_free_rec:
    free(r);
err_free_ireq:
    if (ireq)
        incoll_req_free(ireq);
    mpi_call_free(c);
    *request = MPI_REQUEST_NULL;
    return ret;
}

/* MPI_Start of persistent r: its input packed as it is now, then the
 * libincoll request started (on the request's own libincoll
 * communicator, so that requests started in different orders on
 * different ranks still match). */
static int persist_start(nb_rec_t *r)
{
    incoll_status_t status = INCOLL_OK;
    int ret;

    if (r->active)
        return MPI_ERR_REQUEST; /* started twice: erroneous */
    ret = PMPI_Start(&r->mreq);
    if (ret != MPI_SUCCESS)
        return ret;
    r->active = 1;
    r->call.was_in = mpi_call_in_net(&r->call);
    if (r->ireq) {
        r->call.fail = mpi_call_pack(&r->call);
        if (r->call.fail == MPI_SUCCESS)
            status = incoll_req_start(r->ireq);
    }
    if (r->ireq == NULL || r->call.fail || status != INCOLL_OK) {
        /* Zero bytes, or refused: over at once. */
        r->err = mpi_call_done(&r->call, status, MPI_FORM_PERSISTENT);
        r->call.fail = MPI_SUCCESS;
        persist_done(r);
        return MPI_SUCCESS;
    }
    push_pending(r);
    return MPI_SUCCESS;
}

/* libincoll's nonblocking or persistent request for planned call c. */
static incoll_status_t post(const mpi_call_t *c, int persistent,
                            incoll_req_h *ireq)
{
    incoll_comm_h ic = c->icomm;
    const void *sb = c->sbuf;
    void *rb = c->rbuf;

    switch (c->coll) {
    case MPI_COLL_ALLREDUCE:
        /* the selection table's host-based algorithm, in libincoll's
         * request executor */
        if (c->algo != INCOLL_ALGO_AUTO)
            return persistent
                       ? incoll_allreduce_init_algo(ic, c->algo, sb, rb,
                                                    c->count, c->idt, c->iop,
                                                    ireq)
                       : incoll_iallreduce_algo(ic, c->algo, sb, rb, c->count,
                                                c->idt, c->iop, ireq);
        return persistent ? incoll_allreduce_init(ic, sb, rb, c->count, c->idt,
                                                  c->iop, ireq)
                          : incoll_iallreduce(ic, sb, rb, c->count, c->idt,
                                              c->iop, ireq);
    case MPI_COLL_REDUCE:
        return persistent ? incoll_reduce_init(ic, sb, rb, c->count, c->idt,
                                               c->iop, c->root, ireq)
                          : incoll_ireduce(ic, sb, rb, c->count, c->idt, c->iop,
                                           c->root, ireq);
    case MPI_COLL_BCAST:
        return persistent ? incoll_bcast_init(ic, rb, c->count, c->root, ireq)
                          : incoll_ibcast(ic, rb, c->count, c->root, ireq);
    case MPI_COLL_BARRIER:
        return persistent ? incoll_barrier_init(ic, ireq)
                          : incoll_ibarrier(ic, ireq);
    case MPI_COLL_ALLGATHER:
        return persistent ? incoll_allgather_init(ic, sb, rb, c->count, ireq)
                          : incoll_iallgather(ic, sb, rb, c->count, ireq);
    case MPI_COLL_GATHER:
        return persistent
                   ? incoll_gather_init(ic, sb, rb, c->count, c->root, ireq)
                   : incoll_igather(ic, sb, rb, c->count, c->root, ireq);
    case MPI_COLL_SCATTER:
        return persistent
                   ? incoll_scatter_init(ic, sb, rb, c->count, c->root, ireq)
                   : incoll_iscatter(ic, sb, rb, c->count, c->root, ireq);
    case MPI_COLL_REDUCE_SCATTER_BLOCK:
    case MPI_COLL_REDUCE_SCATTER:
        return persistent ? incoll_reduce_scatter_init(ic, sb, rb, c->count,
                                                       c->idt, c->iop, ireq)
                          : incoll_ireduce_scatter(ic, sb, rb, c->count, c->idt,
                                                   c->iop, ireq);
    default:
        return INCOLL_ERR_INVALID_ARG;
    }
}

/* Plans coll with the arguments a and, when the layer takes it, gives it
 * to libincoll as a nonblocking (persistent = 0) or persistent request
 * and makes the MPI request the program gets. 0 when MPI's own function
 * must run (the reason counted). */
static int issue(mpi_coll_t coll, const mpi_args_t *a, int persistent,
                 MPI_Request *request, int *ret_p)
{
    mpi_form_t form = persistent ? MPI_FORM_PERSISTENT : MPI_FORM_NB;
    incoll_req_h ireq = NULL;
    incoll_status_t status = INCOLL_OK;
    mpi_call_t c;
    int empty;

    if (!mpi_call_plan(coll, a, form, &c))
        return 0;
    empty = coll != MPI_COLL_BARRIER && c.count == 0;
    /* The program may free its datatypes while the call is pending: the
     * staged sides keep their own. A nonblocking call reads its input
     * now; a persistent one at each start. */
    if (!c.fail)
        c.fail = mpi_call_keep(&c);
    if (!c.fail && !persistent)
        c.fail = mpi_call_pack(&c);
    if (!empty && !c.fail)
        status = post(&c, persistent, &ireq);
    if (c.fail || status != INCOLL_OK) {
        *request = MPI_REQUEST_NULL;
        *ret_p = mpi_call_done(&c, status, form);
        mpi_call_free(&c);
        return 1;
    }
    if (persistent)
        *ret_p = persist_make(ireq, &c, request);
    else if (empty) {
        *ret_p = complete_now(&c, INCOLL_OK, request);
        mpi_call_free(&c);
    } else
        *ret_p = track(ireq, &c, request);
    return 1;
}

/* The bodies shared by the nonblocking and persistent entry points, C and
 * Fortran (mpi_layer.h). */
int mpi_nb_allreduce(const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype dt, MPI_Op op, MPI_Comm comm, int persistent,
                     MPI_Request *request, int *ret_p)
{
    mpi_args_t a = {sendbuf, count, dt, recvbuf, count, dt, NULL, op, 0, comm};
    return issue(MPI_COLL_ALLREDUCE, &a, persistent, request, ret_p);
}

int mpi_nb_reduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
                  int persistent, MPI_Request *request, int *ret_p)
{
    mpi_args_t a = {sendbuf, count, dt, recvbuf, count,
                    dt,      NULL,  op, root,    comm};
    return issue(MPI_COLL_REDUCE, &a, persistent, request, ret_p);
}

int mpi_nb_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
                 int persistent, MPI_Request *request, int *ret_p)
{
    mpi_args_t a = {buf, count, dt,          buf,  count,
                    dt,  NULL,  MPI_OP_NULL, root, comm};
    return issue(MPI_COLL_BCAST, &a, persistent, request, ret_p);
}

int mpi_nb_barrier(MPI_Comm comm, int persistent, MPI_Request *request,
                   int *ret_p)
{
    mpi_args_t a = {NULL, 0,           MPI_DATATYPE_NULL,
                    NULL, 0,           MPI_DATATYPE_NULL,
                    NULL, MPI_OP_NULL, 0,
                    comm};
    return issue(MPI_COLL_BARRIER, &a, persistent, request, ret_p);
}

int mpi_nb_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype,
                     MPI_Comm comm, int persistent, MPI_Request *request,
                     int *ret_p)
{
    mpi_args_t a = {sendbuf,  sendcount, sendtype,    recvbuf, recvcount,
                    recvtype, NULL,      MPI_OP_NULL, 0,       comm};
    return issue(MPI_COLL_ALLGATHER, &a, persistent, request, ret_p);
}

/* Gather (scatter = 0) or scatter (1). */
int mpi_nb_rooted(int scatter, const void *sendbuf, int sendcount,
                  MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm,
                  int persistent, MPI_Request *request, int *ret_p)
{
    mpi_args_t a = {sendbuf,  sendcount, sendtype,    recvbuf, recvcount,
                    recvtype, NULL,      MPI_OP_NULL, root,    comm};
    return issue(scatter ? MPI_COLL_SCATTER : MPI_COLL_GATHER, &a, persistent,
                 request, ret_p);
}

int mpi_nb_rsb(const void *sendbuf, void *recvbuf, int recvcount,
               MPI_Datatype dt, MPI_Op op, MPI_Comm comm, int persistent,
               MPI_Request *request, int *ret_p)
{
    mpi_args_t a = {sendbuf, recvcount, dt, recvbuf, recvcount,
                    dt,      NULL,      op, 0,       comm};
    return issue(MPI_COLL_REDUCE_SCATTER_BLOCK, &a, persistent, request, ret_p);
}

int mpi_nb_rs(const void *sendbuf, void *recvbuf, const int recvcounts[],
              MPI_Datatype dt, MPI_Op op, MPI_Comm comm, int persistent,
              MPI_Request *request, int *ret_p)
{
    int rc = recvcounts ? recvcounts[0] : 0;
    mpi_args_t a = {sendbuf, rc, dt, recvbuf, rc, dt, recvcounts, op, 0, comm};
    return issue(MPI_COLL_REDUCE_SCATTER, &a, persistent, request, ret_p);
}

/* Runs body (a do_ call ending in &ret) under the layer's lock; when it
 * declines, the MPI library's own function (fallback). */
#define NB_CALL(body, fallback)                                                \
    do {                                                                       \
        int ret = MPI_SUCCESS;                                                 \
        mpi_layer_enter();                                                     \
        if (mpi_layer_leave(body))                                             \
            return ret;                                                        \
        return fallback;                                                       \
    } while (0)

/* ---- the nonblocking entry points ---- */

MPI_LAYER_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf,
                                    int count, MPI_Datatype datatype, MPI_Op op,
                                    MPI_Comm comm, MPI_Request *request)
{
    NB_CALL(
        mpi_nb_allreduce(sendbuf, recvbuf, count, datatype, op, comm, 0,
                         request, &ret),
        PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request));
}

MPI_LAYER_EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
                                 MPI_Datatype datatype, MPI_Op op, int root,
                                 MPI_Comm comm, MPI_Request *request)
{
    NB_CALL(mpi_nb_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, 0,
                          request, &ret),
            PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm,
                         request));
}

MPI_LAYER_EXPORT int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype,
                                int root, MPI_Comm comm, MPI_Request *request)
{
    NB_CALL(mpi_nb_bcast(buffer, count, datatype, root, comm, 0, request, &ret),
            PMPI_Ibcast(buffer, count, datatype, root, comm, request));
}

MPI_LAYER_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    NB_CALL(mpi_nb_barrier(comm, 0, request, &ret),
            PMPI_Ibarrier(comm, request));
}

MPI_LAYER_EXPORT int MPI_Iallgather(const void *sendbuf, int sendcount,
                                    MPI_Datatype sendtype, void *recvbuf,
                                    int recvcount, MPI_Datatype recvtype,
                                    MPI_Comm comm, MPI_Request *request)
{
    NB_CALL(mpi_nb_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                             recvtype, comm, 0, request, &ret),
            PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                            recvtype, comm, request));
}

MPI_LAYER_EXPORT int MPI_Igather(const void *sendbuf, int sendcount,
                                 MPI_Datatype sendtype, void *recvbuf,
                                 int recvcount, MPI_Datatype recvtype, int root,
                                 MPI_Comm comm, MPI_Request *request)
{
    NB_CALL(mpi_nb_rooted(0, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                          recvtype, root, comm, 0, request, &ret),
            PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, root, comm, request));
}

MPI_LAYER_EXPORT int MPI_Iscatter(const void *sendbuf, int sendcount,
                                  MPI_Datatype sendtype, void *recvbuf,
                                  int recvcount, MPI_Datatype recvtype,
                                  int root, MPI_Comm comm, MPI_Request *request)
{
    NB_CALL(mpi_nb_rooted(1, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                          recvtype, root, comm, 0, request, &ret),
            PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                          recvtype, root, comm, request));
}

MPI_LAYER_EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf,
                                               void *recvbuf, int recvcount,
                                               MPI_Datatype datatype, MPI_Op op,
                                               MPI_Comm comm,
                                               MPI_Request *request)
{
    NB_CALL(mpi_nb_rsb(sendbuf, recvbuf, recvcount, datatype, op, comm, 0,
                       request, &ret),
            PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype,
                                       op, comm, request));
}

MPI_LAYER_EXPORT int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
                                         const int recvcounts[],
                                         MPI_Datatype datatype, MPI_Op op,
                                         MPI_Comm comm, MPI_Request *request)
{
    NB_CALL(mpi_nb_rs(sendbuf, recvbuf, recvcounts, datatype, op, comm, 0,
                      request, &ret),
            PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op,
                                 comm, request));
}

/* ---- the persistent entry points ---- */

/* MPI 4.0's names (MPICH 4.0), or Open MPI 4.1's MPIX_ extension. */
#if defined(OPEN_MPI) && defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define P_INIT(name) MPIX_##name##_init
#define PMPI_P_INIT(name) PMPIX_##name##_init
#elif !defined(OPEN_MPI) && MPI_VERSION >= 4
#define P_INIT(name) MPI_##name##_init
#define PMPI_P_INIT(name) PMPI_##name##_init
#endif

#ifdef P_INIT
MPI_LAYER_EXPORT int P_INIT(Allreduce)(const void *sendbuf, void *recvbuf,
                                       int count, MPI_Datatype datatype,
                                       MPI_Op op, MPI_Comm comm, MPI_Info info,
                                       MPI_Request *request)
{
    NB_CALL(mpi_nb_allreduce(sendbuf, recvbuf, count, datatype, op, comm, 1,
                             request, &ret),
            PMPI_P_INIT(Allreduce)(sendbuf, recvbuf, count, datatype, op, comm,
                                   info, request));
}

MPI_LAYER_EXPORT int P_INIT(Reduce)(const void *sendbuf, void *recvbuf,
                                    int count, MPI_Datatype datatype, MPI_Op op,
                                    int root, MPI_Comm comm, MPI_Info info,
                                    MPI_Request *request)
{
    NB_CALL(mpi_nb_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, 1,
                          request, &ret),
            PMPI_P_INIT(Reduce)(sendbuf, recvbuf, count, datatype, op, root,
                                comm, info, request));
}

MPI_LAYER_EXPORT int P_INIT(Bcast)(void *buffer, int count,
                                   MPI_Datatype datatype, int root,
                                   MPI_Comm comm, MPI_Info info,
                                   MPI_Request *request)
{
    NB_CALL(
        mpi_nb_bcast(buffer, count, datatype, root, comm, 1, request, &ret),
        PMPI_P_INIT(Bcast)(buffer, count, datatype, root, comm, info, request));
}

MPI_LAYER_EXPORT int P_INIT(Barrier)(MPI_Comm comm, MPI_Info info,
                                     MPI_Request *request)
{
    NB_CALL(mpi_nb_barrier(comm, 1, request, &ret),
            PMPI_P_INIT(Barrier)(comm, info, request));
}

MPI_LAYER_EXPORT int P_INIT(Allgather)(const void *sendbuf, int sendcount,
                                       MPI_Datatype sendtype, void *recvbuf,
                                       int recvcount, MPI_Datatype recvtype,
                                       MPI_Comm comm, MPI_Info info,
                                       MPI_Request *request)
{
    NB_CALL(mpi_nb_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                             recvtype, comm, 1, request, &ret),
            PMPI_P_INIT(Allgather)(sendbuf, sendcount, sendtype, recvbuf,
                                   recvcount, recvtype, comm, info, request));
}

MPI_LAYER_EXPORT int P_INIT(Gather)(const void *sendbuf, int sendcount,
                                    MPI_Datatype sendtype, void *recvbuf,
                                    int recvcount, MPI_Datatype recvtype,
                                    int root, MPI_Comm comm, MPI_Info info,
                                    MPI_Request *request)
{
    NB_CALL(mpi_nb_rooted(0, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                          recvtype, root, comm, 1, request, &ret),
            PMPI_P_INIT(Gather)(sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, root, comm, info,
                                request));
}

MPI_LAYER_EXPORT int P_INIT(Scatter)(const void *sendbuf, int sendcount,
                                     MPI_Datatype sendtype, void *recvbuf,
                                     int recvcount, MPI_Datatype recvtype,
                                     int root, MPI_Comm comm, MPI_Info info,
                                     MPI_Request *request)
{
    NB_CALL(mpi_nb_rooted(1, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                          recvtype, root, comm, 1, request, &ret),
            PMPI_P_INIT(Scatter)(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcount, recvtype, root, comm, info,
                                 request));
}

MPI_LAYER_EXPORT int
P_INIT(Reduce_scatter_block)(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                             MPI_Info info, MPI_Request *request)
{
    NB_CALL(mpi_nb_rsb(sendbuf, recvbuf, recvcount, datatype, op, comm, 1,
                       request, &ret),
            PMPI_P_INIT(Reduce_scatter_block)(sendbuf, recvbuf, recvcount,
                                              datatype, op, comm, info,
                                              request));
}

MPI_LAYER_EXPORT int P_INIT(Reduce_scatter)(const void *sendbuf, void *recvbuf,
                                            const int recvcounts[],
                                            MPI_Datatype datatype, MPI_Op op,
                                            MPI_Comm comm, MPI_Info info,
                                            MPI_Request *request)
{
    NB_CALL(mpi_nb_rs(sendbuf, recvbuf, recvcounts, datatype, op, comm, 1,
                      request, &ret),
            PMPI_P_INIT(Reduce_scatter)(sendbuf, recvbuf, recvcounts, datatype,
                                        op, comm, info, request));
}
#endif /* P_INIT */

MPI_LAYER_EXPORT int MPI_Start(MPI_Request *request)
{
    nb_rec_t *r;
    int ret;

    if (npersist == 0 || request == NULL)
        return PMPI_Start(request);
    mpi_layer_enter();
    r = persist_find(*request);
    ret = r ? persist_start(r) : PMPI_Start(request);
    return mpi_layer_leave(ret);
}

MPI_LAYER_EXPORT int MPI_Startall(int count, MPI_Request requests[])
{
    int ret = MPI_SUCCESS;

    if (npersist == 0)
        return PMPI_Startall(count, requests);
    mpi_layer_enter();
    for (int i = 0; i < count && ret == MPI_SUCCESS; i++) {
        nb_rec_t *r = persist_find(requests[i]);
        ret = r ? persist_start(r) : PMPI_Start(&requests[i]);
    }
    return mpi_layer_leave(ret);
}

/* ---- completion: the wait and test family ---- */

int mpi_nb_outstanding(void)
{
    return npending > 0;
}

void mpi_nb_wait(MPI_Request req)
{
    nb_rec_t *r;
    if (npending == 0)
        return;
    mpi_layer_enter();
    r = find(req);
    if (r)
        wait_rec(r);
    progress();
    mpi_layer_leave(0);
}

int mpi_nb_wait_slice(int n, MPI_Request reqs[])
{
    int ours;
    mpi_layer_enter();
    ours = wait_slice(n, reqs);
    mpi_layer_leave(0);
    return ours;
}

/* Progresses ours before MPI's test or wait: with the lock, and only when
 * there are any (no cost to programs without them). */
void mpi_nb_progress(void)
{
    if (npending == 0)
        return;
    mpi_layer_enter();
    progress();
    mpi_layer_leave(0);
}

MPI_LAYER_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    nb_rec_t *pr = NULL;
    int ret;

    if (npending > 0) {
        nb_rec_t *r;
        mpi_layer_enter();
        r = find(*request);
        if (r)
            wait_rec(r);
        progress();
        mpi_layer_leave(0);
    }
    if (npersist > 0) {
        mpi_layer_enter();
        pr = persist_find(*request);
        mpi_layer_leave(0);
    }
    ret = PMPI_Wait(request, status);
    /* A persistent request's error: its receive knows nothing of it. */
    if (ret == MPI_SUCCESS && pr && pr->err != MPI_SUCCESS) {
        if (status != MPI_STATUS_IGNORE)
            status->MPI_ERROR = pr->err;
        ret = pr->err;
    }
    return ret;
}

MPI_LAYER_EXPORT int MPI_Test(MPI_Request *request, int *flag,
                              MPI_Status *status)
{
    mpi_nb_progress();
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
    mpi_nb_progress();
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
    mpi_nb_progress();
    return PMPI_Testany(count, requests, index, flag, status);
}

MPI_LAYER_EXPORT int MPI_Testsome(int incount, MPI_Request requests[],
                                  int *outcount, int indices[],
                                  MPI_Status statuses[])
{
    mpi_nb_progress();
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

/* A request of ours freed before completion: MPI (MPICH at least) would
 * call free_fn at once, under the feet of the running operation; the
 * layer frees it itself once complete (finish). An inactive persistent
 * one is freed at once, with its libincoll request. */
MPI_LAYER_EXPORT int MPI_Request_free(MPI_Request *request)
{
    if ((npending > 0 || npersist > 0) && request != NULL) {
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
        r = persist_find(*request);
        if (r) {
            persist_destroy(r);
            *request = MPI_REQUEST_NULL;
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
    mpi_nb_progress();
    return PMPI_Request_get_status(request, flag, status);
}

void mpi_nb_finalize(void)
{
    if (npending == 0 && npersist == 0)
        return;
    mpi_layer_enter();
    while (pending)
        wait_rec(pending);
    /* Persistent requests the program did not free: their libincoll
     * requests and communicators go before libincoll does (MPI frees the
     * receives). */
    for (nb_rec_t *r = persist; r; r = r->pnext) {
        if (r->ireq)
            incoll_req_free(r->ireq);
        r->ireq = NULL;
        mpi_call_free(&r->call);
    }
    mpi_layer_leave(0);
}
