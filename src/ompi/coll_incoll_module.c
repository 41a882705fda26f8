/*
 * coll/incoll, the module of one communicator.
 *
 * Enable saves the functions (and modules) of the component below for
 * every collective it replaces, gives the communicator a libincoll
 * communicator (the world's for MPI_COMM_WORLD, incoll_comm_create over
 * the world ranks otherwise) and agrees with the other ranks, through the
 * module below's allreduce, that it runs in the network; otherwise the
 * module is not enabled and Open MPI keeps the one below.
 *
 * Each call decides from what every rank knows alike (op, datatype,
 * element count or a block's signature bytes, the limits) whether
 * libincoll runs it; what it does not take goes to the saved function.
 * A side whose bytes are not dense in the caller's buffer is packed into
 * (or unpacked from) a buffer of the call, with the MPI layer's datatype
 * code (src/mpi/mpi_dtype.c), so every rank takes the same path whatever
 * its own datatype. Nonblocking and persistent collectives are Open MPI
 * requests of the component, completed by a progress callback that tests
 * their libincoll requests.
 */
#include "ompi/coll_incoll.h"

#include <pthread.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>

#include "mpi/mpi_agree.h"
#include "mpi/mpi_commstate.h"
#include "mpi/mpi_layer.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/group/group.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"
#include "opal/runtime/opal_progress.h"

/* ---- datatypes (the MPI layer's tables, built at the first call) ---- */

static pthread_once_t dtype_once = PTHREAD_ONCE_INIT;
static int dtype_ok;

static void dtype_init(void)
{
    dtype_ok = mpi_dtype_init();
    if (!dtype_ok)
        ci_log(0, "this Open MPI's MPI_Pack does not give a datatype's bytes "
                  "as they are: only reductions and barriers are taken");
}

/* ---- one call ---- */

typedef struct {
    mpi_side_t side;
    char *at;
    int on;
} ci_stage_t;

typedef enum { F_BLOCKING = 0, F_NB, F_PERSISTENT } ci_form_t;

typedef struct {
    ci_coll_t coll;
    const void *sbuf;
    void *rbuf;
    size_t count; /* elements (reductions) or bytes of a block */
    incoll_dtype_t idt;
    incoll_op_t iop;
    int root;
    size_t esize; /* a reduction's element size */
    ci_stage_t in, out;
    char *tmp[2];
    int rc;             /* the MPI code of a blocking call */
    incoll_algo_t algo; /* an allreduce's host-based algorithm, from the
                           selection table (tuned); else AUTO */
} ci_plan_t;

static void plan_free(ci_plan_t *p)
{
    mpi_side_release(&p->in.side);
    mpi_side_release(&p->out.side);
    free(p->tmp[0]);
    free(p->tmp[1]);
    p->tmp[0] = p->tmp[1] = NULL;
}

static int taken(mca_coll_incoll_module_t *m, ci_coll_t coll, size_t bytes)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;

    if (m->icomm == NULL || !(cm->colls_mask & (1u << coll)))
        return 0;
    if (__atomic_load_n(&m->left, __ATOMIC_ACQUIRE)) {
        ci_log(2, "%s: the communicator left the network", ci_coll_name(coll));
        return 0;
    }
    if (cm->max_bytes && bytes > cm->max_bytes) {
        ci_log(2, "%s of %zu bytes: above coll_incoll_max_bytes",
               ci_coll_name(coll), bytes);
        return 0;
    }
    return 1;
}

/* A reduction of count elements of dt with op: 1 and p's type and op set
 * when libincoll can run it (the same answer on every rank). */
static int plan_reduction(mca_coll_incoll_module_t *m, ci_coll_t coll,
                          int count, ompi_datatype_t *dt, struct ompi_op_t *op,
                          ci_plan_t *p)
{
    const mpi_dt_entry_t *e;

    pthread_once(&dtype_once, dtype_init);
    memset(p, 0, sizeof(*p));
    p->coll = coll;
    e = mpi_dt_find(dt);
    if (count <= 0 || !mpi_dt_reducible(e) || !mpi_op_map(op, &p->iop) ||
        !mpi_op_applies(p->iop, e)) {
        ci_log(2, "%s: %s", ci_coll_name(coll),
               count <= 0 ? "no elements"
               : !mpi_dt_reducible(e)
                   ? "a datatype incoll does not reduce"
                   : "an op incoll does not run (user-defined or not for "
                     "this type)");
        return 0;
    }
    p->idt = e->idt;
    p->esize = (size_t)e->size;
    p->count = (size_t)count;
    return taken(m, coll, (size_t)count * (size_t)e->size);
}

/* A side of a data-moving call staged through a buffer of the call when
 * it is not dense: its address for libincoll, or NULL on failure. */
static void *side_at(ci_plan_t *p, ci_stage_t *st, int slot)
{
    if (st->side.data)
        return st->side.data;
    p->tmp[slot] = malloc(st->side.bytes ? st->side.bytes : 1);
    if (p->tmp[slot] == NULL)
        return NULL;
    st->at = p->tmp[slot];
    st->on = 1;
    return st->at;
}

/* Describes a side; -1 for an invalid one (the module below then raises
 * MPI's error). */
static int side(ci_stage_t *st, const void *buf, int count, ompi_datatype_t *dt)
{
    memset(st, 0, sizeof(*st));
    return mpi_side_make(buf, count, dt, &st->side);
}

/* The data-moving collectives: bytes is a rank's block (the same on every
 * rank). 1 when taken, with the staging set; 0 (nothing held) when not. */
static int plan_move(mca_coll_incoll_module_t *m, ci_coll_t coll,
                     const void *sbuf, int scount, ompi_datatype_t *sdt,
                     void *rbuf, int rcount, ompi_datatype_t *rdt, int root,
                     ci_plan_t *p)
{
    int is_root = m->rank == root;
    int sin = sbuf == MPI_IN_PLACE, rin = rbuf == MPI_IN_PLACE;
    int n = m->size;
    ci_stage_t snd, rcv;
    size_t bytes = 0;

    pthread_once(&dtype_once, dtype_init);
    memset(p, 0, sizeof(*p));
    memset(&snd, 0, sizeof(snd));
    memset(&rcv, 0, sizeof(rcv));
    p->coll = coll;
    p->root = root;
    if (!dtype_ok)
        return 0;
    switch (coll) {
    case CI_BCAST:
        if (side(&rcv, rbuf, rcount, rdt) != 0)
            return 0;
        bytes = rcv.side.bytes;
        break;
    case CI_ALLGATHER:
        if (side(&rcv, rbuf, rcount * n, rdt) != 0 ||
            (!sin && side(&snd, sbuf, scount, sdt) != 0))
            return 0;
        bytes = rcv.side.bytes / (size_t)n;
        break;
    case CI_GATHER:
        if ((is_root && side(&rcv, rbuf, rcount * n, rdt) != 0) ||
            (!(is_root && sin) && side(&snd, sbuf, scount, sdt) != 0))
            return 0;
        bytes = is_root ? rcv.side.bytes / (size_t)n : snd.side.bytes;
        break;
    case CI_SCATTER:
        if ((is_root && side(&snd, sbuf, scount * n, sdt) != 0) ||
            (!(is_root && rin) && side(&rcv, rbuf, rcount, rdt) != 0))
            return 0;
        bytes = is_root ? snd.side.bytes / (size_t)n : rcv.side.bytes;
        break;
    default:
        return 0;
    }
    if (bytes == 0 || !taken(m, coll, bytes)) {
        if (bytes == 0)
            ci_log(2, "%s: no bytes", ci_coll_name(coll));
        return 0;
    }
    p->count = bytes;
    p->in = snd;
    p->out = rcv;
    switch (coll) {
    case CI_BCAST:
        /* one buffer: the root's input, the others' output */
        if ((p->rbuf = side_at(p, &p->out, 1)) == NULL)
            goto nomem;
        if (p->out.at) {
            p->out.on = !is_root;
            if (is_root) {
                p->in.side = p->out.side;
                memset(&p->out.side, 0, sizeof(p->out.side));
                p->in.at = p->out.at;
                p->in.on = 1;
                p->out.at = NULL;
            }
        }
        break;
    case CI_ALLGATHER:
    case CI_GATHER:
        if (rcv.side.buf || rcv.side.count) {
            p->rbuf = side_at(p, &p->out, 1);
            if (p->rbuf == NULL)
                goto nomem;
        }
        if (sin && (coll == CI_ALLGATHER || is_root)) {
            p->sbuf = INCOLL_IN_PLACE;
            if (p->out.at) {
                /* the block is in the staged receive side: stage it in */
                p->in.side = p->out.side;
                p->in.side.owned = 0;
                p->in.at = p->out.at;
                p->in.on = 1;
            }
        } else {
            p->sbuf = side_at(p, &p->in, 0);
            if (p->sbuf == NULL)
                goto nomem;
        }
        break;
    case CI_SCATTER:
        if (is_root) {
            p->sbuf = side_at(p, &p->in, 0);
            if (p->sbuf == NULL)
                goto nomem;
        }
        if (is_root && rin)
            p->rbuf = (void *)INCOLL_IN_PLACE;
        else if ((p->rbuf = side_at(p, &p->out, 1)) == NULL)
            goto nomem;
        break;
    default:
        break;
    }
    return 1;
nomem:
    plan_free(p);
    return 0;
}

/* ---- running it ---- */

static int mpi_code(incoll_status_t status)
{
    switch (status) {
    case INCOLL_OK:
        return MPI_SUCCESS;
    case INCOLL_ERR_INVALID_ARG:
        return MPI_ERR_ARG;
    case INCOLL_ERR_NO_MEMORY:
        return MPI_ERR_NO_MEM;
    default:
        return MPI_ERR_OTHER;
    }
}

/* Starts (or, blocking, runs) p on icomm in form; *req_p for the others. */
static incoll_status_t launch(incoll_comm_h ic, const ci_plan_t *p,
                              ci_form_t form, incoll_req_h *req_p)
{
    void *b = p->rbuf;
    size_t n = p->count;

#define CI_FORMS(blocking, nb, init, ...)                                      \
    (form == F_BLOCKING ? blocking(__VA_ARGS__)                                \
     : form == F_NB     ? nb(__VA_ARGS__, req_p)                               \
                        : init(__VA_ARGS__, req_p))
    switch (p->coll) {
    case CI_ALLREDUCE:
        /* the selection table's host-based algorithm, in every form */
        if (p->algo != INCOLL_ALGO_AUTO)
            return CI_FORMS(incoll_allreduce_algo, incoll_iallreduce_algo,
                            incoll_allreduce_init_algo, ic, p->algo, p->sbuf, b,
                            n, p->idt, p->iop);
        return CI_FORMS(incoll_allreduce, incoll_iallreduce,
                        incoll_allreduce_init, ic, p->sbuf, b, n, p->idt,
                        p->iop);
    case CI_REDUCE:
        return CI_FORMS(incoll_reduce, incoll_ireduce, incoll_reduce_init, ic,
                        p->sbuf, b, n, p->idt, p->iop, p->root);
    case CI_BCAST:
        return CI_FORMS(incoll_bcast, incoll_ibcast, incoll_bcast_init, ic, b,
                        n, p->root);
    case CI_BARRIER:
        return form == F_BLOCKING ? incoll_barrier(ic)
               : form == F_NB     ? incoll_ibarrier(ic, req_p)
                                  : incoll_barrier_init(ic, req_p);
    case CI_ALLGATHER:
        return CI_FORMS(incoll_allgather, incoll_iallgather,
                        incoll_allgather_init, ic, p->sbuf, b, n);
    case CI_GATHER:
        return CI_FORMS(incoll_gather, incoll_igather, incoll_gather_init, ic,
                        p->sbuf, b, n, p->root);
    case CI_SCATTER:
        return CI_FORMS(incoll_scatter, incoll_iscatter, incoll_scatter_init,
                        ic, p->sbuf, b, n, p->root);
    case CI_REDUCE_SCATTER_BLOCK:
    case CI_REDUCE_SCATTER:
        return CI_FORMS(incoll_reduce_scatter, incoll_ireduce_scatter,
                        incoll_reduce_scatter_init, ic, p->sbuf, b, n, p->idt,
                        p->iop);
    default:
        return INCOLL_ERR_INVALID_ARG;
    }
#undef CI_FORMS
}

static int stage_in(ci_plan_t *p)
{
    return p->in.on ? mpi_side_pack(&p->in.side, p->in.at) : MPI_SUCCESS;
}

/* After libincoll completed p with status: unpacks, counts; MPI code. */
static int finish(mca_coll_incoll_module_t *m, ci_plan_t *p,
                  incoll_status_t status)
{
    int rc = mpi_code(status);

    if (status == INCOLL_OK && p->out.on)
        rc = mpi_side_unpack(&p->out.side, p->out.at);
    const char *why = NULL;
    int net = incoll_comm_offloaded(m->icomm, &why);

    /* a host-based algorithm the selection table named: on the hosts */
    ci_count(p->coll, net && p->algo == INCOLL_ALGO_AUTO ? CI_NET : CI_HOST);
    if (!net && !__atomic_exchange_n(&m->said_host, 1, __ATOMIC_RELAXED) &&
        m->rank == 0)
        ci_log(0,
               "%s (%d ranks) no longer runs in the network (%s): its "
               "collectives go on on libincoll's host-based algorithms",
               m->comm->c_name, m->size, why ? why : "the fabric failed");
    if (status != INCOLL_OK)
        ci_log(0, "%s on %s failed: %s", ci_coll_name(p->coll), m->comm->c_name,
               incoll_status_string(status));
    return rc;
}

static int run_blocking(mca_coll_incoll_module_t *m, ci_plan_t *p)
{
    incoll_status_t status;
    int rc = stage_in(p);

    if (rc == MPI_SUCCESS) {
        pthread_mutex_lock(&m->lock);
        status = launch(m->icomm, p, F_BLOCKING, NULL);
        pthread_mutex_unlock(&m->lock);
        rc = finish(m, p, status);
    }
    plan_free(p);
    return rc;
}

/* ---- fabrics without a manager: the agreement after each call ---- */

/* The bytes of the caller's buffer that a reduction in place reads, which
 * libincoll may have overwritten when it failed; 0 when none. */
static size_t in_place_bytes(const mca_coll_incoll_module_t *m,
                             const ci_plan_t *p)
{
    if (p->sbuf != INCOLL_IN_PLACE)
        return 0;
    switch (p->coll) {
    case CI_ALLREDUCE:
    case CI_REDUCE:
        return p->count * p->esize;
    case CI_REDUCE_SCATTER_BLOCK:
    case CI_REDUCE_SCATTER:
        return p->count * p->esize * (size_t)m->size;
    default:
        return 0; /* the rank's own block, written with the same bytes */
    }
}

/*
 * The communicator's ranks agreed that the fabric failed during a call:
 * from now on every collective on it goes to the module below (the same
 * decision at the same call on every rank), and rank 0 says so once.
 */
static void leave(mca_coll_incoll_module_t *m, ci_coll_t coll,
                  incoll_status_t status)
{
    __atomic_store_n(&m->left, 1, __ATOMIC_RELEASE);
    if (m->rank == 0)
        ci_log(0,
               "%s (%d ranks): the fabric failed during %s (%s); its ranks "
               "agreed to redo the call, and to run its collectives from "
               "now on, on the component below",
               m->comm->c_name, m->size, ci_coll_name(coll),
               mpi_agree_cause(status));
}

/*
 * A blocking call on a fabric without a manager, where libincoll cannot
 * recover from a dead AN: run on libincoll, then the ranks agree (one
 * allreduce of an int, MPI_MIN, by the module below) whether it delivered
 * everywhere. 1 with p->rc set when it did (or when an error of this rank
 * alone ends it); 0 when any rank's failed: the caller redoes the call with
 * the module below, from its untouched input (a reduction in place gets
 * its input back from a copy).
 */
static int below_min(void *arg, int *v)
{
    mca_coll_incoll_module_t *m = arg;
    return m->below.allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MIN, m->comm,
                              m->below.allreduce_module);
}

static int run_agreed(mca_coll_incoll_module_t *m, ci_plan_t *p)
{
    size_t keep = in_place_bytes(m, p);
    char *copy = NULL, why[128];
    incoll_status_t status = INCOLL_ERR_NO_MEMORY;
    mpi_agreed_t agreed;
    int rc;

    if (keep && (copy = malloc(keep)) != NULL)
        memcpy(copy, p->rbuf, keep);
    if ((keep == 0 || copy) && stage_in(p) == MPI_SUCCESS) {
        pthread_mutex_lock(&m->lock);
        status = launch(m->icomm, p, F_BLOCKING, NULL);
        pthread_mutex_unlock(&m->lock);
    }
    agreed =
        mpi_agree(m->icomm, status, below_min, m, 0, &rc, why, sizeof(why));
    if (agreed == MPI_AGREED_DELIVERED) {
        free(copy);
        p->rc = finish(m, p, status);
        plan_free(p);
        return 1;
    }
    if (copy)
        memcpy(p->rbuf, copy, keep);
    free(copy);
    plan_free(p);
    if (agreed == MPI_AGREED_BROKEN) {
        /* The agreement itself failed: MPI's own error. */
        p->rc = rc;
        return 1;
    }
    ci_log(2, "%s on %s: the fabric failed (%s): redone by the component below",
           ci_coll_name(p->coll), m->comm->c_name, mpi_agree_cause(status));
    ci_count(p->coll, CI_FAILED);
    if (!__atomic_load_n(&m->left, __ATOMIC_ACQUIRE))
        leave(m, p->coll, status);
    return 0;
}

/* A planned blocking call: 1 with p->rc set when done, 0 when every rank
 * agreed to redo it with the module below (REDO). */
static int blocking_done(mca_coll_incoll_module_t *m, ci_plan_t *p)
{
    if (mca_coll_incoll_component.agree_on)
        return run_agreed(m, p);
    p->rc = run_blocking(m, p);
    return 1;
}

/* The agreement after each call is a blocking MPI call: on a fabric
 * without a manager nonblocking and persistent calls go to the module
 * below (as do all calls once the communicator left the network). */
static int nb_below(mca_coll_incoll_module_t *m)
{
    if (m->icomm == NULL || !mca_coll_incoll_component.agree_on)
        return 0;
    return 1;
}

/* ---- requests ---- */

typedef struct ci_req {
    ompi_request_t super;
    mca_coll_incoll_module_t *m;
    ci_plan_t plan;
    incoll_req_h ireq;
    int active; /* on the active list */
    int freed;  /* the program freed it while active */
    struct ci_req *next;
} ci_req_t;
/* OBJ_NEW does not zero: the fields after super start cleared. */
static void req_construct(ci_req_t *r)
{
    memset((char *)r + sizeof(r->super), 0, sizeof(*r) - sizeof(r->super));
}
static OBJ_CLASS_INSTANCE(ci_req_t, ompi_request_t, req_construct, NULL);

static pthread_mutex_t active_mu = PTHREAD_MUTEX_INITIALIZER;
static ci_req_t *active_head;
static int progress_on;

static void req_release(ci_req_t *r)
{

    if (r->ireq && r->super.req_persistent)
        incoll_req_free(r->ireq);
    r->ireq = NULL;
    plan_free(&r->plan);
    OBJ_RELEASE(r->m);
    OMPI_REQUEST_FINI(&r->super);
    OBJ_RELEASE(r);
}

/* Tests the active requests; completes the ones done. */
static int ci_progress(void)
{
    ci_req_t **pp, *r, *done = NULL;
    int n = 0;

    if (active_head == NULL || pthread_mutex_trylock(&active_mu) != 0)
        return 0;
    for (pp = &active_head; (r = *pp) != NULL;) {
        int fin = 0;
        incoll_status_t status = INCOLL_OK;
        if (pthread_mutex_trylock(&r->m->lock) == 0) {
            status = incoll_req_test(r->ireq, &fin);
            pthread_mutex_unlock(&r->m->lock);
        }
        if (!fin) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        r->active = 0;
        if (!r->super.req_persistent)
            r->ireq = NULL; /* released by libincoll */
        r->super.req_status.MPI_ERROR = finish(r->m, &r->plan, status);
        r->next = done;
        done = r;
        n++;
    }
    pthread_mutex_unlock(&active_mu);
    while ((r = done) != NULL) {
        done = r->next;
        if (r->freed)
            req_release(r);
        else
            ompi_request_complete(&r->super, true);
    }
    return n;
}

static void activate(ci_req_t *r)
{
    pthread_mutex_lock(&active_mu);
    r->active = 1;
    r->next = active_head;
    active_head = r;
    if (!progress_on) {
        opal_progress_register(ci_progress);
        progress_on = 1;
    }
    pthread_mutex_unlock(&active_mu);
}

static int req_free_fn(ompi_request_t **request)
{
    ci_req_t *r = (ci_req_t *)*request;

    pthread_mutex_lock(&active_mu);
    if (r->active && !r->super.req_persistent) {
        /* completes in the background, released then */
        r->freed = 1;
        pthread_mutex_unlock(&active_mu);
        *request = MPI_REQUEST_NULL;
        return OMPI_SUCCESS;
    }
    if (r->active) {
        ci_req_t **pp = &active_head;
        while (*pp && *pp != r)
            pp = &(*pp)->next;
        if (*pp)
            *pp = r->next;
        r->active = 0;
    }
    pthread_mutex_unlock(&active_mu);
    req_release(r);
    *request = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int req_start_fn(size_t count, ompi_request_t **requests)
{
    for (size_t i = 0; i < count; i++) {
        ci_req_t *r = (ci_req_t *)requests[i];
        incoll_status_t status;
        int rc;

        if (r->active)
            return MPI_ERR_REQUEST;
        rc = stage_in(&r->plan);
        if (rc != MPI_SUCCESS)
            return rc;
        r->super.req_complete = REQUEST_PENDING;
        r->super.req_state = OMPI_REQUEST_ACTIVE;
        r->super.req_status.MPI_ERROR = MPI_SUCCESS;
        pthread_mutex_lock(&r->m->lock);
        status = incoll_req_start(r->ireq);
        pthread_mutex_unlock(&r->m->lock);
        if (status != INCOLL_OK) {
            r->super.req_status.MPI_ERROR = finish(r->m, &r->plan, status);
            ompi_request_complete(&r->super, true);
            continue;
        }
        activate(r);
    }
    return OMPI_SUCCESS;
}

/* Starts p as a nonblocking (F_NB) or persistent (F_PERSISTENT) request
 * in *request; the plan is the request's then. MPI code. */
static int run_request(mca_coll_incoll_module_t *m, ci_plan_t *p,
                       ci_form_t form, ompi_request_t **request)
{
    ci_req_t *r = OBJ_NEW(ci_req_t);
    incoll_status_t status;
    int rc;

    if (r == NULL) {
        plan_free(p);
        return MPI_ERR_NO_MEM;
    }
    OMPI_REQUEST_INIT(&r->super, form == F_PERSISTENT);
    r->super.req_type = OMPI_REQUEST_COLL;
    r->super.req_mpi_object.comm = m->comm;
    r->super.req_free = req_free_fn;
    r->super.req_cancel = NULL;
    r->super.req_start = form == F_PERSISTENT ? req_start_fn : NULL;
    r->m = m;
    OBJ_RETAIN(m);
    r->plan = *p;
    /* a persistent request's sides outlive the call: keep their types */
    if (form == F_PERSISTENT || form == F_NB) {
        if ((r->plan.in.on && mpi_side_keep(&r->plan.in.side) != MPI_SUCCESS) ||
            (r->plan.out.on &&
             mpi_side_keep(&r->plan.out.side) != MPI_SUCCESS)) {
            req_release(r);
            return MPI_ERR_INTERN;
        }
    }
    if (form == F_NB && (rc = stage_in(&r->plan)) != MPI_SUCCESS) {
        req_release(r);
        return rc;
    }
    pthread_mutex_lock(&m->lock);
    status = launch(m->icomm, &r->plan, form, &r->ireq);
    pthread_mutex_unlock(&m->lock);
    if (status != INCOLL_OK) {
        rc = finish(m, &r->plan, status);
        r->ireq = NULL;
        req_release(r);
        return rc;
    }
    if (form == F_NB) {
        r->super.req_state = OMPI_REQUEST_ACTIVE;
        activate(r);
    }
    *request = &r->super;
    return MPI_SUCCESS;
}

static int run(mca_coll_incoll_module_t *m, ci_plan_t *p, ci_form_t form,
               ompi_request_t **request)
{
    return form == F_BLOCKING ? run_blocking(m, p)
                              : run_request(m, p, form, request);
}

/* ---- the collectives ---- */

#define M(module) ((mca_coll_incoll_module_t *)(module))
/* A call the module below runs: counted here and, where the communicator
 * is incoll's, in the manager's per-job counts (the op, datatype or size
 * is one incoll does not take; or the communicator left the network). */
static void below_note(mca_coll_incoll_module_t *m, ci_coll_t coll)
{
    ci_count(coll, CI_FALLBACK);
    if (m->icomm != NULL)
        (void)incoll_comm_count_elsewhere(
            m->icomm, __atomic_load_n(&m->left, __ATOMIC_ACQUIRE)
                          ? INCOLL_WHY_RECOVERED
                          : INCOLL_WHY_UNSUPPORTED);
}

/*
 * The selection table's answer for a call in form, asked before anything
 * of the call is planned: libincoll's incoll_select, from values every
 * rank has alike (the collective, the form, the size as the table counts
 * it, a reduction's type, the communicator's size) and the table the
 * ranks agreed at init, so every rank answers the same. -1: the module
 * below runs it (counted as tuned here and in libincoll's usage counts as
 * requested elsewhere); otherwise the plan decides, and an allreduce (of
 * any form) that libincoll runs uses the algorithm returned (the
 * host-based one the table names, or INCOLL_ALGO_AUTO). A call the
 * component does not take (the plan says why) is not asked about.
 */
static int pick(mca_coll_incoll_module_t *m, ci_coll_t coll, ci_form_t form,
                uint64_t bytes, incoll_dtype_t idt)
{
    const mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;
    incoll_choice_t ch;

    if (m->icomm == NULL || !(cm->colls_mask & (1u << coll)) ||
        __atomic_load_n(&m->left, __ATOMIC_ACQUIRE) ||
        (cm->max_bytes && bytes > cm->max_bytes))
        return INCOLL_ALGO_AUTO;
    incoll_select(m->icomm, (incoll_coll_t)coll, (incoll_form_t)form, bytes,
                  idt, &ch);
    if (ch.path == INCOLL_PATH_HOST && coll == CI_ALLREDUCE)
        return ch.algo;
    if (ch.path != INCOLL_PATH_MPI)
        return INCOLL_ALGO_AUTO;
    if (cm->verbose >= 2)
        ci_log(2,
               "%s of %" PRIu64 " bytes: the selection table gives it to the "
               "module below (entry %d)",
               ci_coll_name(coll), bytes, ch.entry);
    ci_count(coll, CI_TUNED);
    (void)incoll_comm_count_elsewhere(m->icomm, INCOLL_WHY_ALGO);
    return -1;
}

/* A reduction of count elements of dt with op: the table's answer (pick)
 * when libincoll reduces them, the whole vector's bytes being the size;
 * else INCOLL_ALGO_AUTO (the plan says why not). */
static int pick_red(mca_coll_incoll_module_t *m, ci_coll_t coll, ci_form_t form,
                    int count, ompi_datatype_t *dt, struct ompi_op_t *op)
{
    const mpi_dt_entry_t *e;
    incoll_op_t iop;

    pthread_once(&dtype_once, dtype_init);
    if (count <= 0 || !mpi_dt_reducible(e = mpi_dt_find(dt)) ||
        !mpi_op_map(op, &iop) || !mpi_op_applies(iop, e))
        return INCOLL_ALGO_AUTO;
    return pick(m, coll, form, (uint64_t)count * (uint64_t)e->size, e->idt);
}

/* Bytes of count elements of dt as MPI's type signature counts them; 0
 * for an argument MPI would refuse (the plan then goes below). */
static uint64_t sig_bytes(int count, ompi_datatype_t *dt)
{
    size_t size = 0;
    if (count <= 0 || dt == NULL || dt == MPI_DATATYPE_NULL)
        return 0;
    ompi_datatype_type_size(dt, &size);
    return (uint64_t)count * size;
}

/* A data-moving collective: the table's answer (pick) for one rank's block
 * (what plan_move counts: the root's receive or send side, a non-root's
 * other side), before its sides are described. */
static int pick_move(mca_coll_incoll_module_t *m, ci_coll_t coll,
                     ci_form_t form, int scount, ompi_datatype_t *sdt,
                     int rcount, ompi_datatype_t *rdt, int root)
{
    int is_root = m->rank == root;
    uint64_t bytes;

    pthread_once(&dtype_once, dtype_init);
    if (!dtype_ok)
        return INCOLL_ALGO_AUTO;
    switch (coll) {
    case CI_GATHER:
        bytes = is_root ? sig_bytes(rcount, rdt) : sig_bytes(scount, sdt);
        break;
    case CI_SCATTER:
        bytes = is_root ? sig_bytes(scount, sdt) : sig_bytes(rcount, rdt);
        break;
    default: /* bcast, allgather: the receive side's block */
        bytes = sig_bytes(rcount, rdt);
        break;
    }
    return bytes ? pick(m, coll, form, bytes, INCOLL_DTYPE_COUNT)
                 : INCOLL_ALGO_AUTO;
}

/* To the module below; t is what pick said (-1: counted as tuned there,
 * else counted as a fallback here). */
#define BELOW(m, t, fn, ...)                                                   \
    ((t) < 0 ? (void)0 : below_note((m), COLL_OF_##fn),                        \
     (m)->below.fn(__VA_ARGS__, (m)->below.fn##_module))

/* A call every rank agreed to redo with the module below after the fabric
 * failed during it (counted as failed by run_agreed). */
#define REDO(m, fn, ...) ((m)->below.fn(__VA_ARGS__, (m)->below.fn##_module))

#define COLL_OF_allreduce CI_ALLREDUCE
#define COLL_OF_iallreduce CI_ALLREDUCE
#define COLL_OF_allreduce_init CI_ALLREDUCE
#define COLL_OF_reduce CI_REDUCE
#define COLL_OF_ireduce CI_REDUCE
#define COLL_OF_reduce_init CI_REDUCE
#define COLL_OF_bcast CI_BCAST
#define COLL_OF_ibcast CI_BCAST
#define COLL_OF_bcast_init CI_BCAST
#define COLL_OF_barrier CI_BARRIER
#define COLL_OF_ibarrier CI_BARRIER
#define COLL_OF_barrier_init CI_BARRIER
#define COLL_OF_allgather CI_ALLGATHER
#define COLL_OF_iallgather CI_ALLGATHER
#define COLL_OF_allgather_init CI_ALLGATHER
#define COLL_OF_gather CI_GATHER
#define COLL_OF_igather CI_GATHER
#define COLL_OF_gather_init CI_GATHER
#define COLL_OF_scatter CI_SCATTER
#define COLL_OF_iscatter CI_SCATTER
#define COLL_OF_scatter_init CI_SCATTER
#define COLL_OF_reduce_scatter_block CI_REDUCE_SCATTER_BLOCK
#define COLL_OF_ireduce_scatter_block CI_REDUCE_SCATTER_BLOCK
#define COLL_OF_reduce_scatter_block_init CI_REDUCE_SCATTER_BLOCK
#define COLL_OF_reduce_scatter CI_REDUCE_SCATTER
#define COLL_OF_ireduce_scatter CI_REDUCE_SCATTER
#define COLL_OF_reduce_scatter_init CI_REDUCE_SCATTER

/* allreduce */
static int plan_allreduce(mca_coll_incoll_module_t *m, const void *sbuf,
                          void *rbuf, int count, ompi_datatype_t *dt,
                          struct ompi_op_t *op, ci_plan_t *p)
{
    if (!plan_reduction(m, CI_ALLREDUCE, count, dt, op, p))
        return 0;
    p->sbuf = sbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sbuf;
    p->rbuf = rbuf;
    return 1;
}

static int ci_allreduce(const void *sbuf, void *rbuf, int count,
                        ompi_datatype_t *dt, struct ompi_op_t *op,
                        ompi_communicator_t *comm, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if ((t = pick_red(M(mod), CI_ALLREDUCE, F_BLOCKING, count, dt, op)) < 0 ||
        !plan_allreduce(M(mod), sbuf, rbuf, count, dt, op, &p))
        return BELOW(M(mod), t, allreduce, sbuf, rbuf, count, dt, op, comm);
    p.algo = (incoll_algo_t)t;
    return blocking_done(M(mod), &p)
               ? p.rc
               : REDO(M(mod), allreduce, sbuf, rbuf, count, dt, op, comm);
}

static int ci_iallreduce(const void *sbuf, void *rbuf, int count,
                         ompi_datatype_t *dt, struct ompi_op_t *op,
                         ompi_communicator_t *comm, ompi_request_t **req,
                         mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_red(M(mod), CI_ALLREDUCE, F_NB, count, dt, op)) < 0 ||
        !plan_allreduce(M(mod), sbuf, rbuf, count, dt, op, &p))
        return BELOW(M(mod), t, iallreduce, sbuf, rbuf, count, dt, op, comm,
                     req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_NB, req);
}

static int ci_allreduce_init(const void *sbuf, void *rbuf, int count,
                             ompi_datatype_t *dt, struct ompi_op_t *op,
                             ompi_communicator_t *comm, ompi_info_t *info,
                             ompi_request_t **req, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_red(M(mod), CI_ALLREDUCE, F_PERSISTENT, count, dt, op)) < 0 ||
        !plan_allreduce(M(mod), sbuf, rbuf, count, dt, op, &p))
        return BELOW(M(mod), t, allreduce_init, sbuf, rbuf, count, dt, op, comm,
                     info, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_PERSISTENT, req);
}

/* reduce */
static int plan_reduce(mca_coll_incoll_module_t *m, const void *sbuf,
                       void *rbuf, int count, ompi_datatype_t *dt,
                       struct ompi_op_t *op, int root, ci_plan_t *p)
{
    if (!plan_reduction(m, CI_REDUCE, count, dt, op, p))
        return 0;
    p->root = root;
    if (m->rank == root) {
        p->sbuf = sbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sbuf;
        p->rbuf = rbuf;
    } else {
        p->sbuf = sbuf;
        p->rbuf = NULL;
    }
    return 1;
}

static int ci_reduce(const void *sbuf, void *rbuf, int count,
                     ompi_datatype_t *dt, struct ompi_op_t *op, int root,
                     ompi_communicator_t *comm, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if ((t = pick_red(M(mod), CI_REDUCE, F_BLOCKING, count, dt, op)) < 0 ||
        !plan_reduce(M(mod), sbuf, rbuf, count, dt, op, root, &p))
        return BELOW(M(mod), t, reduce, sbuf, rbuf, count, dt, op, root, comm);
    p.algo = (incoll_algo_t)t;
    return blocking_done(M(mod), &p)
               ? p.rc
               : REDO(M(mod), reduce, sbuf, rbuf, count, dt, op, root, comm);
}

static int ci_ireduce(const void *sbuf, void *rbuf, int count,
                      ompi_datatype_t *dt, struct ompi_op_t *op, int root,
                      ompi_communicator_t *comm, ompi_request_t **req,
                      mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_red(M(mod), CI_REDUCE, F_NB, count, dt, op)) < 0 ||
        !plan_reduce(M(mod), sbuf, rbuf, count, dt, op, root, &p))
        return BELOW(M(mod), t, ireduce, sbuf, rbuf, count, dt, op, root, comm,
                     req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_NB, req);
}

static int ci_reduce_init(const void *sbuf, void *rbuf, int count,
                          ompi_datatype_t *dt, struct ompi_op_t *op, int root,
                          ompi_communicator_t *comm, ompi_info_t *info,
                          ompi_request_t **req, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_red(M(mod), CI_REDUCE, F_PERSISTENT, count, dt, op)) < 0 ||
        !plan_reduce(M(mod), sbuf, rbuf, count, dt, op, root, &p))
        return BELOW(M(mod), t, reduce_init, sbuf, rbuf, count, dt, op, root,
                     comm, info, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_PERSISTENT, req);
}

/* reduce_scatter_block, and reduce_scatter with equal counts */
static int plan_rsb(mca_coll_incoll_module_t *m, ci_coll_t coll,
                    const void *sbuf, void *rbuf, int count,
                    ompi_datatype_t *dt, struct ompi_op_t *op, ci_plan_t *p)
{
    if (!plan_reduction(m, coll, count, dt, op, p))
        return 0;
    p->sbuf = sbuf == MPI_IN_PLACE ? INCOLL_IN_PLACE : sbuf;
    p->rbuf = rbuf;
    return 1;
}

/* The one count of recvcounts, or -1 when they differ. */
static int equal_counts(const int *counts, int n)
{
    for (int i = 1; i < n; i++)
        if (counts[i] != counts[0])
            return -1;
    return counts[0];
}

static int ci_rsb(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt,
                  struct ompi_op_t *op, ompi_communicator_t *comm,
                  mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if ((t = pick_red(M(mod), CI_REDUCE_SCATTER_BLOCK, F_BLOCKING, count, dt,
                      op)) < 0 ||
        !plan_rsb(M(mod), CI_REDUCE_SCATTER_BLOCK, sbuf, rbuf, count, dt, op,
                  &p))
        return BELOW(M(mod), t, reduce_scatter_block, sbuf, rbuf, count, dt, op,
                     comm);
    p.algo = (incoll_algo_t)t;
    return blocking_done(M(mod), &p) ? p.rc
                                     : REDO(M(mod), reduce_scatter_block, sbuf,
                                            rbuf, count, dt, op, comm);
}

static int ci_irsb(const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt,
                   struct ompi_op_t *op, ompi_communicator_t *comm,
                   ompi_request_t **req, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_red(M(mod), CI_REDUCE_SCATTER_BLOCK, F_NB, count, dt, op)) <
            0 ||
        !plan_rsb(M(mod), CI_REDUCE_SCATTER_BLOCK, sbuf, rbuf, count, dt, op,
                  &p))
        return BELOW(M(mod), t, ireduce_scatter_block, sbuf, rbuf, count, dt,
                     op, comm, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_NB, req);
}

static int ci_rsb_init(const void *sbuf, void *rbuf, int count,
                       ompi_datatype_t *dt, struct ompi_op_t *op,
                       ompi_communicator_t *comm, ompi_info_t *info,
                       ompi_request_t **req, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_red(M(mod), CI_REDUCE_SCATTER_BLOCK, F_PERSISTENT, count, dt,
                      op)) < 0 ||
        !plan_rsb(M(mod), CI_REDUCE_SCATTER_BLOCK, sbuf, rbuf, count, dt, op,
                  &p))
        return BELOW(M(mod), t, reduce_scatter_block_init, sbuf, rbuf, count,
                     dt, op, comm, info, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_PERSISTENT, req);
}

static int ci_rs(const void *sbuf, void *rbuf, const int *counts,
                 ompi_datatype_t *dt, struct ompi_op_t *op,
                 ompi_communicator_t *comm, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    int count = equal_counts(counts, M(mod)->size);
    if (count < 0 ||
        (t = pick_red(M(mod), CI_REDUCE_SCATTER, F_BLOCKING, count, dt, op)) <
            0 ||
        !plan_rsb(M(mod), CI_REDUCE_SCATTER, sbuf, rbuf, count, dt, op, &p))
        return BELOW(M(mod), t, reduce_scatter, sbuf, rbuf, counts, dt, op,
                     comm);
    p.algo = (incoll_algo_t)t;
    return blocking_done(M(mod), &p)
               ? p.rc
               : REDO(M(mod), reduce_scatter, sbuf, rbuf, counts, dt, op, comm);
}

static int ci_irs(const void *sbuf, void *rbuf, const int *counts,
                  ompi_datatype_t *dt, struct ompi_op_t *op,
                  ompi_communicator_t *comm, ompi_request_t **req,
                  mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    int count = equal_counts(counts, M(mod)->size);
    if (nb_below(M(mod)) || count < 0 ||
        (t = pick_red(M(mod), CI_REDUCE_SCATTER, F_NB, count, dt, op)) < 0 ||
        !plan_rsb(M(mod), CI_REDUCE_SCATTER, sbuf, rbuf, count, dt, op, &p))
        return BELOW(M(mod), t, ireduce_scatter, sbuf, rbuf, counts, dt, op,
                     comm, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_NB, req);
}

static int ci_rs_init(const void *sbuf, void *rbuf, const int *counts,
                      ompi_datatype_t *dt, struct ompi_op_t *op,
                      ompi_communicator_t *comm, ompi_info_t *info,
                      ompi_request_t **req, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    int count = equal_counts(counts, M(mod)->size);
    if (nb_below(M(mod)) || count < 0 ||
        (t = pick_red(M(mod), CI_REDUCE_SCATTER, F_PERSISTENT, count, dt, op)) <
            0 ||
        !plan_rsb(M(mod), CI_REDUCE_SCATTER, sbuf, rbuf, count, dt, op, &p))
        return BELOW(M(mod), t, reduce_scatter_init, sbuf, rbuf, counts, dt, op,
                     comm, info, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_PERSISTENT, req);
}

/* barrier */
static int plan_barrier(mca_coll_incoll_module_t *m, ci_plan_t *p)
{
    memset(p, 0, sizeof(*p));
    p->coll = CI_BARRIER;
    return taken(m, CI_BARRIER, 0);
}

static int ci_barrier(ompi_communicator_t *comm, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if ((t = pick(M(mod), CI_BARRIER, F_BLOCKING, 0, INCOLL_DTYPE_COUNT)) < 0 ||
        !plan_barrier(M(mod), &p))
        return BELOW(M(mod), t, barrier, comm);
    p.algo = (incoll_algo_t)t;
    return blocking_done(M(mod), &p) ? p.rc : REDO(M(mod), barrier, comm);
}

static int ci_ibarrier(ompi_communicator_t *comm, ompi_request_t **req,
                       mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick(M(mod), CI_BARRIER, F_NB, 0, INCOLL_DTYPE_COUNT)) < 0 ||
        !plan_barrier(M(mod), &p))
        return BELOW(M(mod), t, ibarrier, comm, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_NB, req);
}

static int ci_barrier_init(ompi_communicator_t *comm, ompi_info_t *info,
                           ompi_request_t **req, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick(M(mod), CI_BARRIER, F_PERSISTENT, 0, INCOLL_DTYPE_COUNT)) <
            0 ||
        !plan_barrier(M(mod), &p))
        return BELOW(M(mod), t, barrier_init, comm, info, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_PERSISTENT, req);
}

/* bcast */
static int ci_bcast(void *buf, int count, ompi_datatype_t *dt, int root,
                    ompi_communicator_t *comm, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if ((t = pick_move(M(mod), CI_BCAST, F_BLOCKING, 0, NULL, count, dt,
                       root)) < 0 ||
        !plan_move(M(mod), CI_BCAST, NULL, 0, NULL, buf, count, dt, root, &p))
        return BELOW(M(mod), t, bcast, buf, count, dt, root, comm);
    p.algo = (incoll_algo_t)t;
    return blocking_done(M(mod), &p)
               ? p.rc
               : REDO(M(mod), bcast, buf, count, dt, root, comm);
}

static int ci_ibcast(void *buf, int count, ompi_datatype_t *dt, int root,
                     ompi_communicator_t *comm, ompi_request_t **req,
                     mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_move(M(mod), CI_BCAST, F_NB, 0, NULL, count, dt, root)) < 0 ||
        !plan_move(M(mod), CI_BCAST, NULL, 0, NULL, buf, count, dt, root, &p))
        return BELOW(M(mod), t, ibcast, buf, count, dt, root, comm, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_NB, req);
}

static int ci_bcast_init(void *buf, int count, ompi_datatype_t *dt, int root,
                         ompi_communicator_t *comm, ompi_info_t *info,
                         ompi_request_t **req, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_move(M(mod), CI_BCAST, F_PERSISTENT, 0, NULL, count, dt,
                       root)) < 0 ||
        !plan_move(M(mod), CI_BCAST, NULL, 0, NULL, buf, count, dt, root, &p))
        return BELOW(M(mod), t, bcast_init, buf, count, dt, root, comm, info,
                     req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_PERSISTENT, req);
}

/* allgather */
static int ci_allgather(const void *sbuf, int scount, ompi_datatype_t *sdt,
                        void *rbuf, int rcount, ompi_datatype_t *rdt,
                        ompi_communicator_t *comm, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if ((t = pick_move(M(mod), CI_ALLGATHER, F_BLOCKING, scount, sdt, rcount,
                       rdt, 0)) < 0 ||
        !plan_move(M(mod), CI_ALLGATHER, sbuf, scount, sdt, rbuf, rcount, rdt,
                   0, &p))
        return BELOW(M(mod), t, allgather, sbuf, scount, sdt, rbuf, rcount, rdt,
                     comm);
    p.algo = (incoll_algo_t)t;
    return blocking_done(M(mod), &p) ? p.rc
                                     : REDO(M(mod), allgather, sbuf, scount,
                                            sdt, rbuf, rcount, rdt, comm);
}

static int ci_iallgather(const void *sbuf, int scount, ompi_datatype_t *sdt,
                         void *rbuf, int rcount, ompi_datatype_t *rdt,
                         ompi_communicator_t *comm, ompi_request_t **req,
                         mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_move(M(mod), CI_ALLGATHER, F_NB, scount, sdt, rcount, rdt,
                       0)) < 0 ||
        !plan_move(M(mod), CI_ALLGATHER, sbuf, scount, sdt, rbuf, rcount, rdt,
                   0, &p))
        return BELOW(M(mod), t, iallgather, sbuf, scount, sdt, rbuf, rcount,
                     rdt, comm, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_NB, req);
}

static int ci_allgather_init(const void *sbuf, int scount, ompi_datatype_t *sdt,
                             void *rbuf, int rcount, ompi_datatype_t *rdt,
                             ompi_communicator_t *comm, ompi_info_t *info,
                             ompi_request_t **req, mca_coll_base_module_t *mod)
{
    ci_plan_t p;
    int t = 0;
    if (nb_below(M(mod)) ||
        (t = pick_move(M(mod), CI_ALLGATHER, F_PERSISTENT, scount, sdt, rcount,
                       rdt, 0)) < 0 ||
        !plan_move(M(mod), CI_ALLGATHER, sbuf, scount, sdt, rbuf, rcount, rdt,
                   0, &p))
        return BELOW(M(mod), t, allgather_init, sbuf, scount, sdt, rbuf, rcount,
                     rdt, comm, info, req);
    p.algo = (incoll_algo_t)t;
    return run(M(mod), &p, F_PERSISTENT, req);
}

/* gather and scatter: the same three forms */
#define CI_ROOTED(name, COLL)                                                  \
    static int ci_##name(const void *sbuf, int scount, ompi_datatype_t *sdt,   \
                         void *rbuf, int rcount, ompi_datatype_t *rdt,         \
                         int root, ompi_communicator_t *comm,                  \
                         mca_coll_base_module_t *mod)                          \
    {                                                                          \
        ci_plan_t p;                                                           \
        int t = 0;                                                             \
        if ((t = pick_move(M(mod), COLL, F_BLOCKING, scount, sdt, rcount, rdt, \
                           root)) < 0 ||                                       \
            !plan_move(M(mod), COLL, sbuf, scount, sdt, rbuf, rcount, rdt,     \
                       root, &p))                                              \
            return BELOW(M(mod), t, name, sbuf, scount, sdt, rbuf, rcount,     \
                         rdt, root, comm);                                     \
        p.algo = (incoll_algo_t)t;                                             \
        return blocking_done(M(mod), &p)                                       \
                   ? p.rc                                                      \
                   : REDO(M(mod), name, sbuf, scount, sdt, rbuf, rcount, rdt,  \
                          root, comm);                                         \
    }                                                                          \
    static int ci_i##name(const void *sbuf, int scount, ompi_datatype_t *sdt,  \
                          void *rbuf, int rcount, ompi_datatype_t *rdt,        \
                          int root, ompi_communicator_t *comm,                 \
                          ompi_request_t **req, mca_coll_base_module_t *mod)   \
    {                                                                          \
        ci_plan_t p;                                                           \
        int t = 0;                                                             \
        if (nb_below(M(mod)) ||                                                \
            (t = pick_move(M(mod), COLL, F_NB, scount, sdt, rcount, rdt,       \
                           root)) < 0 ||                                       \
            !plan_move(M(mod), COLL, sbuf, scount, sdt, rbuf, rcount, rdt,     \
                       root, &p))                                              \
            return BELOW(M(mod), t, i##name, sbuf, scount, sdt, rbuf, rcount,  \
                         rdt, root, comm, req);                                \
        p.algo = (incoll_algo_t)t;                                             \
        return run(M(mod), &p, F_NB, req);                                     \
    }                                                                          \
    static int ci_##name##_init(                                               \
        const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,        \
        int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm, \
        ompi_info_t *info, ompi_request_t **req, mca_coll_base_module_t *mod)  \
    {                                                                          \
        ci_plan_t p;                                                           \
        int t = 0;                                                             \
        if (nb_below(M(mod)) ||                                                \
            (t = pick_move(M(mod), COLL, F_PERSISTENT, scount, sdt, rcount,    \
                           rdt, root)) < 0 ||                                  \
            !plan_move(M(mod), COLL, sbuf, scount, sdt, rbuf, rcount, rdt,     \
                       root, &p))                                              \
            return BELOW(M(mod), t, name##_init, sbuf, scount, sdt, rbuf,      \
                         rcount, rdt, root, comm, info, req);                  \
        p.algo = (incoll_algo_t)t;                                             \
        return run(M(mod), &p, F_PERSISTENT, req);                             \
    }
CI_ROOTED(gather, CI_GATHER)
CI_ROOTED(scatter, CI_SCATTER)

/* ---- agreeing at enable ---- */

/* The tag of the component's messages at enable (one below the range
 * Open MPI gives coll/hcoll). */
#define CI_TAG (MCA_COLL_BASE_TAG_HCOLL_END + 1)

static int wait_all(ompi_request_t **reqs, int n)
{
    int rc = OMPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        while (!REQUEST_COMPLETE(reqs[i]))
            opal_progress();
        if (reqs[i]->req_status.MPI_ERROR != MPI_SUCCESS)
            rc = reqs[i]->req_status.MPI_ERROR;
        ompi_request_free(&reqs[i]);
    }
    return rc;
}

/* One message to or from peer through the PML, waited for. */
static int ci_p2p(int64_t *v, int peer, int send, ompi_communicator_t *comm)
{
    ompi_request_t *req[1];
    int rc =
        send ? MCA_PML_CALL(isend(v, 1, MPI_INT64_T, peer, CI_TAG,
                                  MCA_PML_BASE_SEND_STANDARD, comm, &req[0]))
             : MCA_PML_CALL(
                   irecv(v, 1, MPI_INT64_T, peer, CI_TAG, comm, &req[0]));
    return rc == OMPI_SUCCESS ? wait_all(req, 1) : rc;
}

/*
 * Every rank of comm gets the minimum of the ranks' *v (min = 1) or rank
 * 0's (min = 0). Point-to-point through the PML, progressed here: enable
 * runs inside opal_progress when a communicator is activated (dup, split),
 * where a blocking collective of the module below would wait for a
 * progress that never comes under MPI_THREAD_MULTIPLE. Up and down a
 * binomial tree, the tree of the module below's small broadcasts: each
 * rank speaks with its parent and children only, so the exchange opens no
 * connection the job's own collectives would not (a rank 0 that spoke
 * with every rank kept as many more sockets in every later progress).
 */
int ci_exchange(ompi_communicator_t *comm, int64_t *v, int min)
{
    int rank = ompi_comm_rank(comm), size = ompi_comm_size(comm);
    int rc = OMPI_SUCCESS, low = 1;

    while (low < size && !(rank & low))
        low <<= 1; /* rank's lowest set bit (size or more at rank 0) */
    /* Up: the children's values (below low), then to the parent. */
    for (int mask = 1; min && mask < low && rc == OMPI_SUCCESS; mask <<= 1) {
        int64_t t;
        if (rank + mask >= size)
            continue;
        rc = ci_p2p(&t, rank + mask, 0, comm);
        if (rc == OMPI_SUCCESS && t < *v)
            *v = t;
    }
    if (min && rank != 0 && rc == OMPI_SUCCESS)
        rc = ci_p2p(v, rank - low, 1, comm);
    /* Down: from the parent, then to the children, farthest first. An
     * error still answers the children, who wait otherwise. */
    if (rank != 0 && rc == OMPI_SUCCESS)
        rc = ci_p2p(v, rank - low, 0, comm);
    for (int mask = low >> 1; mask >= 1; mask >>= 1) {
        if (rank + mask < size &&
            ci_p2p(v, rank + mask, 1, comm) != OMPI_SUCCESS)
            rc = OMPI_ERROR;
    }
    return rc;
}

/* ---- enable, and the module's life ---- */

// clang-format off
/* one collective a line (clang-format has no stable
 * layout for a list of macro calls) */
#define CI_EACH(X)                                                             \
    X(allreduce) X(reduce) X(bcast) X(barrier) X(allgather) X(gather)         \
    X(scatter) X(reduce_scatter_block) X(reduce_scatter)                      \
    X(iallreduce) X(ireduce) X(ibcast) X(ibarrier) X(iallgather) X(igather)   \
    X(iscatter) X(ireduce_scatter_block) X(ireduce_scatter)                   \
    X(allreduce_init) X(reduce_init) X(bcast_init) X(barrier_init)            \
    X(allgather_init) X(gather_init) X(scatter_init)                          \
    X(reduce_scatter_block_init) X(reduce_scatter_init)
// clang-format on

static void module_construct(mca_coll_incoll_module_t *m)
{
    m->comm = NULL;
    m->icomm = NULL;
    m->own_icomm = 0;
    memset(&m->below, 0, sizeof(m->below));
    m->said_host = 0;
    m->left = 0;
    pthread_mutex_init(&m->lock, NULL);
}

static void module_destruct(mca_coll_incoll_module_t *m)
{
#define CI_RELEASE(fn)                                                         \
    if (m->below.fn##_module)                                                  \
        OBJ_RELEASE(m->below.fn##_module);
    CI_EACH(CI_RELEASE)
#undef CI_RELEASE
    mpi_cs_comm_free(&m->icomm, &m->own_icomm);
    pthread_mutex_destroy(&m->lock);
}

OBJ_CLASS_INSTANCE(mca_coll_incoll_module_t, mca_coll_base_module_t,
                   module_construct, module_destruct);

/* Every rank of the communicator arg gets the largest *code_p
 * (mpi_cs_comm_make's agreement), by point-to-point messages. */
static int agree_max(void *arg, int *code_p)
{
    int64_t v = -(int64_t)*code_p;

    if (ci_exchange(arg, &v, 1) != OMPI_SUCCESS)
        return -1;
    *code_p = (int)-v;
    return 0;
}

/* The world ranks of comm's members in comm's order (malloc'ed), or NULL
 * with *why_p. */
static int *world_ranks(ompi_communicator_t *comm, int size, const char **why_p)
{
    int *mine = malloc(sizeof(int) * (size_t)size);
    int *world = malloc(sizeof(int) * (size_t)size);

    if (mine && world) {
        for (int i = 0; i < size; i++)
            mine[i] = i;
        if (ompi_group_translate_ranks(comm->c_local_group, size, mine,
                                       ompi_mpi_comm_world.comm.c_local_group,
                                       world) != OMPI_SUCCESS) {
            *why_p = ": its ranks are not all in MPI_COMM_WORLD";
            free(world);
            world = NULL;
        }
    } else {
        *why_p = "";
        free(world);
        world = NULL;
    }
    free(mine);
    return world;
}

static int module_enable(mca_coll_base_module_t *module,
                         ompi_communicator_t *comm)
{
    mca_coll_incoll_component_t *cm = &mca_coll_incoll_component;
    mca_coll_incoll_module_t *m = M(module);
    int world = comm == &ompi_mpi_comm_world.comm;
    mpi_cs_code_t code = MPI_CS_OK, agreed;
    const char *detail = "";
    char why[sizeof(cm->off_why)], off[384];
    int *ranks = NULL, ok;

    m->comm = comm;
    m->rank = ompi_comm_rank(comm);
    m->size = ompi_comm_size(comm);
    /* what the component below runs: called for what this one does not */
#define CI_SAVE(fn)                                                            \
    m->below.fn = comm->c_coll->coll_##fn;                                     \
    m->below.fn##_module = comm->c_coll->coll_##fn##_module;                   \
    if (m->below.fn##_module)                                                  \
        OBJ_RETAIN(m->below.fn##_module);
    CI_EACH(CI_SAVE)
#undef CI_SAVE
#define CI_HAS(fn) &&m->below.fn != NULL
    ok = 1 CI_EACH(CI_HAS);
#undef CI_HAS
    if (!ok) {
        code = MPI_CS_INACTIVE;
        detail = ": the component below lacks a collective";
    } else if (world) {
        /* libincoll comes up at the world's enable */
        if (ci_context_up(m) != 0) {
            code = MPI_CS_INACTIVE;
            snprintf(off, sizeof(off), ": %.380s", cm->off_why);
            detail = off;
        }
    } else if ((ranks = world_ranks(comm, m->size, &detail)) == NULL) {
        code = *detail ? MPI_CS_INACTIVE : MPI_CS_NOMEM;
    }
    /* one decision on every rank */
    agreed =
        mpi_cs_comm_make(cm->world, m->size, ranks, code, detail, agree_max,
                         comm, why, sizeof(why), &m->icomm, &m->own_icomm);
    free(ranks);
    if (agreed != MPI_CS_OK) {
        if (world) {
            /* no later communicator may count on the world */
            if (cm->ctx)
                incoll_finalize(cm->ctx);
            cm->ctx = NULL;
            cm->world = NULL;
            snprintf(cm->off_why, sizeof(cm->off_why), "%s", why);
            if (m->rank == 0 && !cm->warned) {
                ci_log(0,
                       "a fabric is configured but MPI_COMM_WORLD is not "
                       "offloaded, Open MPI's own collectives run: %s",
                       cm->off_why);
                cm->warned = 1;
            }
        } else if (m->rank == 0)
            ci_log(1,
                   "%s (%d ranks): not offloaded, the component below "
                   "runs it: %s",
                   comm->c_name, m->size, why);
        return OMPI_ERROR;
    }
    if (m->rank == 0)
        ci_log(1, "%s (%d ranks): offloaded",
               world ? "MPI_COMM_WORLD" : comm->c_name, m->size);
    return OMPI_SUCCESS;
}

mca_coll_base_module_t *ci_module_new(ompi_communicator_t *comm)
{
    mca_coll_incoll_module_t *m = OBJ_NEW(mca_coll_incoll_module_t);
    mca_coll_base_module_t *b;

    if (m == NULL)
        return NULL;
    m->comm = comm;
    b = &m->super;
    b->coll_module_enable = module_enable;
    b->coll_allreduce = ci_allreduce;
    b->coll_reduce = ci_reduce;
    b->coll_bcast = ci_bcast;
    b->coll_barrier = ci_barrier;
    b->coll_allgather = ci_allgather;
    b->coll_gather = ci_gather;
    b->coll_scatter = ci_scatter;
    b->coll_iallreduce = ci_iallreduce;
    b->coll_ireduce = ci_ireduce;
    b->coll_ibcast = ci_ibcast;
    b->coll_ibarrier = ci_ibarrier;
    b->coll_iallgather = ci_iallgather;
    b->coll_igather = ci_igather;
    b->coll_iscatter = ci_iscatter;
    b->coll_allreduce_init = ci_allreduce_init;
    b->coll_reduce_init = ci_reduce_init;
    b->coll_bcast_init = ci_bcast_init;
    b->coll_barrier_init = ci_barrier_init;
    b->coll_allgather_init = ci_allgather_init;
    b->coll_gather_init = ci_gather_init;
    b->coll_scatter_init = ci_scatter_init;
    b->coll_reduce_scatter_block = ci_rsb;
    b->coll_ireduce_scatter_block = ci_irsb;
    b->coll_reduce_scatter_block_init = ci_rsb_init;
    b->coll_reduce_scatter = ci_rs;
    b->coll_ireduce_scatter = ci_irs;
    b->coll_reduce_scatter_init = ci_rs_init;
    return b;
}

void ci_module_progress_off(void)
{
    if (progress_on)
        opal_progress_unregister(ci_progress);
    progress_on = 0;
}
