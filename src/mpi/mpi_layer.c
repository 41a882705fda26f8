/*
 * The heart of libincoll_mpi: the offload paths and their fallback
 * decision, and cleanup (the start from MPI is mpi_boot.c's, the
 * communicators' state mpi_comm.c's, the statistics mpi_stats.c's). See
 * mpi_layer.h for the parts and docs/mpi.md for the user's view.
 *
 * Two rules keep every answer right:
 *  - A call is offloaded only when every rank of the communicator will
 *    offload it too. Whether a communicator is offloaded is agreed once,
 *    collectively, when its state is made; the per-call decision
 *    (mpi_call_plan) depends only on what every rank knows alike: the
 *    bytes of the type signature of the data-moving collectives, the
 *    predefined datatype and op of the reductions, the root, and knobs
 *    rank 0 broadcast at MPI_Init. Never on a rank's layout: a side that
 *    libincoll cannot use where it is gets packed into, or unpacked from,
 *    a buffer of the call (mpi_dtype.c), on that rank alone.
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
#include "mpi/mpi_state.h"

#include "incoll.h"

#include "mpi/mpi_agree.h"

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

/* The MPI names of the collectives, for messages. */
const char *const mpi_call_names[MPI_COLL_COUNT] = {
    "Allreduce",     "Reduce", "Bcast",   "Barrier",
    "Allgather",     "Gather", "Scatter", "Reduce_scatter_block",
    "Reduce_scatter"};

mpi_state_t L = {.keyval = MPI_KEYVAL_INVALID,
                 .self_keyval = MPI_KEYVAL_INVALID};

/* The library's reason for a call the layer gives to MPI, for the
 * manager's per-job counts; INCOLL_WHY_NONE: not one of comm's
 * collectives as such (the layer is off, arguments MPI judges). */
static incoll_why_t why_elsewhere(reason_t why)
{
    switch (why) {
    case R_DTYPE:
    case R_OP:
    case R_UNEQUAL:
        return INCOLL_WHY_UNSUPPORTED;
    case R_COLL:
    case R_BYTES:
    case R_TUNE:
        return INCOLL_WHY_ALGO;
    case R_COMM:
        return INCOLL_WHY_NO_GROUP;
    case R_FAILED:
    case R_LEFT:
        return INCOLL_WHY_RECOVERED;
    default:
        return INCOLL_WHY_NONE;
    }
}

/* Counts a call of comm given to MPI: in the layer's statistics, and
 * where comm has a libincoll communicator, in its usage counts. st is
 * comm's state when the caller looked it up (NULL: it has none), else
 * looked is 0. */
static void pass_known(mpi_coll_t coll, reason_t why, MPI_Comm comm,
                       comm_state_t *st, int looked)
{
    incoll_why_t w = why_elsewhere(why);

    L.passed[coll][why]++;
    if (w == INCOLL_WHY_NONE || comm == MPI_COMM_NULL || L.finalized)
        return;
    if (!looked)
        st = mpi_comm_known(comm);
    if (st != NULL && st->icomm != NULL)
        (void)incoll_comm_count_elsewhere(st->icomm, w);
}

static void pass(mpi_coll_t coll, reason_t why, MPI_Comm comm)
{
    pass_known(coll, why, comm, NULL, 0);
}

/* ------------------------------------------------------------------ */
/* Finalize and statistics                                             */

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
        mpi_stats_print();
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
int mpi_self_delete_cb(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)attr;
    (void)extra;
    layer_end();
    return MPI_SUCCESS;
}

void mpi_atexit_cb(void)
{
    layer_end();
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
 * must go to MPI. Everything before mpi_comm_state() is the same on every rank
 * of a conforming program, so the collective setup runs only when all
 * ranks reach it.
 */
static comm_state_t *gate(mpi_coll_t coll, MPI_Comm comm, size_t bytes,
                          reason_t pre)
{
    comm_state_t *st;

    if (!L.booted)
        mpi_layer_bootstrap(0);
    if (!L.booted || L.finalized || !L.active) {
        pass(coll, R_OFF, comm);
        return NULL;
    }
    if (!(L.cfg.colls & (1 << coll))) {
        pass(coll, R_COLL, comm);
        return NULL;
    }
    if (comm == MPI_COMM_NULL) {
        pass(coll, R_ARGS, comm);
        return NULL;
    }
    if (pre != R_COUNT) {
        pass(coll, pre, comm);
        return NULL;
    }
    if (L.cfg.max_bytes && bytes > L.cfg.max_bytes) {
        pass(coll, R_BYTES, comm);
        return NULL;
    }
    st = mpi_comm_state(comm, "first collective");
    if (!st->offloaded) {
        pass(coll, R_COMM, comm);
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
        mpi_comm_label(comm, st->seq, label, sizeof(label));
        incoll_warn("mpi: communicator '%s' is no longer in the network (%s): "
                    "from %s on its collectives run on libincoll's "
                    "host-based algorithms",
                    label, why ? why : "no reason given", mpi_coll_names[coll]);
    }
}

/* Adds the layer's error class and one code per incoll error status, so a
 * failure reaches the error handler with its cause. Local calls, at
 * bootstrap, in the same order on every rank. */
void mpi_errcodes_init(void)
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
    mpi_comm_label(comm, st->seq, label, sizeof(label));
    incoll_error("mpi: MPI_%s on communicator '%s' (rank %d of %d) failed on "
                 "the fabric: %s%s%s; other ranks may have completed it, so "
                 "it is not redone by MPI: raising it through the "
                 "communicator's error handler",
                 mpi_call_names[coll], label, st->rank, st->size,
                 incoll_status_string(status), why ? ": " : "", why ? why : "");
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/*
 * An error of this rank's own arguments or memory, found after the call
 * took the path every rank takes (so MPI's own function cannot run it):
 * its two sides carry different bytes (an erroneous program; the rank
 * took part with zeros), a staging buffer could not be allocated, or MPI
 * could not pack or unpack a side. Raised through comm's error handler.
 */
static __attribute__((noinline)) int raise_local(mpi_call_t *c, int code,
                                                 const char *what)
{
    comm_state_t *st = c->st;
    char label[MPI_MAX_OBJECT_NAME];

    L.errors[c->coll]++;
    mpi_comm_label(c->comm, st->seq, label, sizeof(label));
    incoll_error("mpi: MPI_%s on communicator '%s' (rank %d of %d): %s: "
                 "raising it through the communicator's error handler",
                 mpi_call_names[c->coll], label, st->rank, st->size, what);
    PMPI_Comm_call_errhandler(c->comm, code);
    return code;
}

/*
 * After an offloaded call: did the fabric deliver on every rank? With
 * INCOLL_MPI_AGREE=1 the ranks agree with one PMPI_Allreduce of an int;
 * on any failure the communicator stops being offloaded and the caller
 * redoes the call with PMPI_. For fabrics without a manager, where
 * libincoll cannot recover by itself.
 */
static int agree_min(void *arg, int *v)
{
    return PMPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MIN,
                          *(MPI_Comm *)arg);
}

static int agree(comm_state_t *st, mpi_coll_t coll, MPI_Comm comm,
                 incoll_status_t status)
{
    size_t n;
    int rc;

    if (mpi_agree(L.finalized ? NULL : st->icomm, status, agree_min, &comm, 1,
                  &rc, st->why, sizeof(st->why)) == MPI_AGREED_DELIVERED)
        return 1;
    L.passed[coll][R_FAILED]++;
    n = strlen(st->why);
    snprintf(st->why + n, sizeof(st->why) - n,
             "; MPI runs its collectives from now on");
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
        mpi_comm_label(comm, st->seq, label, sizeof(label));
        incoll_warn("mpi: communicator '%s': %s: %s", label,
                    mpi_coll_names[coll], st->why);
    }
    return 0;
}

int mpi_call_in_net(const mpi_call_t *c)
{
    return incoll_comm_offloaded(c->icomm, NULL);
}

/*
 * Ends a call whose libincoll status is status. The fast path (default):
 * INCOLL_OK is the answer on every rank (libincoll's guarantee), counted
 * as offloaded when it ran in the network from start to end (c->was_in)
 * and under hosts when libincoll ran it on the hosts; an error is raised
 * (raise_error). No MPI call on success. Returns 1 with *ret_p set, or 0
 * (INCOLL_MPI_AGREE=1 only) when every rank agreed that the fabric failed
 * and the caller must redo the call with PMPI_ (its buffers untouched).
 */
static int settle(mpi_call_t *c, incoll_status_t status, int *ret_p)
{
    comm_state_t *st = c->st;

    if (L.cfg.agree) {
        if (!agree(st, c->coll, c->comm, status))
            return 0;
    }
    if (status != INCOLL_OK) {
        *ret_p = raise_error(st, c->coll, c->comm, status);
        return 1;
    }
    if (c->algo != INCOLL_ALGO_AUTO) {
        /* the table's host-based algorithm: where libincoll says it ran
         * (a request's own word, else the communicator's last call) */
        incoll_where_t w;
        if (c->algo_where >= 0
                ? c->algo_where == 1
                : incoll_comm_where(c->icomm, &w) == INCOLL_OK && w.in_network)
            L.offloaded[c->coll]++;
        else
            L.hosts[c->coll]++;
    } else if (c->was_in && mpi_call_in_net(c))
        L.offloaded[c->coll]++;
    else if (c->icomm != st->icomm)
        L.hosts[c->coll]++; /* a persistent request's own */
    else
        note_left(st, c->coll, c->comm);
    *ret_p = MPI_SUCCESS;
    return 1;
}

/* ---- MINLOC and MAXLOC ---- */

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
static incoll_status_t pairs_reduce(comm_state_t *st, const mpi_pair_t *pe,
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
static void pairs_store(const mpi_pair_t *pe, const char *vals,
                        const int32_t *idx, void *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *p = (char *)out + i * pe->extent;
        int v = (int)idx[i];
        memcpy(p, vals + i * (size_t)pe->vsize, (size_t)pe->vsize);
        memcpy(p + pe->ioff, &v, sizeof(v));
    }
}

/* ---- planning: the decision every rank takes alike ---- */

/* A buffer of the call, freed with it; zeroed. NULL when out of memory
 * (c->fail set). */
static char *call_tmp(mpi_call_t *c, size_t len)
{
    for (int i = 0; i < 3; i++) {
        if (c->tmp[i] == NULL) {
            c->tmp[i] = calloc(1, len ? len : 1);
            if (c->tmp[i] == NULL)
                c->fail = MPI_ERR_NO_MEM;
            return c->tmp[i];
        }
    }
    c->fail = MPI_ERR_INTERN;
    return NULL;
}

/* Where libincoll reads side s: its bytes where they are when dense
 * (except with INCOLL_MPI_AGREE=1 in place, whose redo needs the input
 * untouched), else a buffer of the call, which s is packed into at each
 * start. */
static const void *read_side(mpi_call_t *c, const mpi_side_t *s)
{
    char *t;
    if (s->data)
        return s->data;
    t = call_tmp(c, s->bytes);
    c->in.side = *s;
    c->in.at = t;
    c->in.on = t != NULL;
    return t;
}

/* Where libincoll writes side s: where it is when dense, else a buffer of
 * the call, unpacked into s after success. */
static void *write_side(mpi_call_t *c, const mpi_side_t *s)
{
    char *t;
    if (s->data)
        return s->data;
    t = call_tmp(c, s->bytes);
    c->out.side = *s;
    c->out.at = t;
    c->out.on = t != NULL;
    return t;
}

/* In place with side s as both input and output (allreduce, reduce's
 * root, the reduce_scatters with out, the first part of s, as output):
 * libincoll works on s where it is when dense, else on a buffer of the
 * call that s is packed into and out unpacked from. */
static void inplace_side(mpi_call_t *c, const mpi_side_t *s,
                         const mpi_side_t *out)
{
    char *t;
    c->sbuf = INCOLL_IN_PLACE;
    if (s->data && !L.cfg.agree) {
        c->rbuf = s->data;
        return;
    }
    t = call_tmp(c, s->bytes);
    c->rbuf = t;
    if (t == NULL)
        return;
    c->in = (mpi_stage_t){*s, t, 1};
    c->out = (mpi_stage_t){*out, t, 1};
}

/* The elements of the root's or every rank's gathered blocks, size blocks
 * of count elements of dt each (gather and allgather at their receivers,
 * scatter at its root), and rank r's block of them (r < 0: not needed).
 * -1 when dt is not a valid datatype. */
static int blocks_side(const mpi_call_t *c, void *buf, int count,
                       MPI_Datatype dt, int r, mpi_side_t *all,
                       mpi_side_t *mine)
{
    MPI_Aint lb = 0, extent = 0;
    if (mpi_side_make(buf, count * c->size, dt, all) != 0)
        return -1;
    if (r < 0)
        return 0;
    if (count > 0 && PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS)
        return -1;
    return mpi_side_make(
        (char *)((uintptr_t)buf +
                 (uintptr_t)r * (uintptr_t)count * (uintptr_t)extent),
        count, dt, mine);
}

/* The reductions' decision: their datatype, the same on every rank (MPI
 * requires the same count, datatype and op there), and the op. Only
 * predefined datatypes: Open MPI and MPICH refuse MPI's predefined ops on
 * derived ones (MPI_ERR_OP), so those go to MPI, which says so. */
static reason_t decide_reduction(mpi_call_t *c, const mpi_side_t *s, MPI_Op op,
                                 mpi_form_t form)
{
    const mpi_dt_entry_t *e;
    const mpi_pair_t *pe;

    c->count = s->nbasic;
    c->bytes = s->bytes;
    if (s->bytes == 0)
        return R_COUNT; /* nothing to reduce: done without communication */
    pe = mpi_pair_find(s->dt);
    if (pe) {
        /* MINLOC/MAXLOC: blocking allreduce and reduce only. */
        if (form != MPI_FORM_BLOCKING ||
            (c->coll != MPI_COLL_ALLREDUCE && c->coll != MPI_COLL_REDUCE))
            return R_DTYPE;
        if (op == MPI_MINLOC)
            c->iop = INCOLL_OP_MIN;
        else if (op == MPI_MAXLOC)
            c->iop = INCOLL_OP_MAX;
        else
            return R_OP; /* MPI defines only MINLOC and MAXLOC on pairs */
        if (!incoll_op_valid(c->iop, pe->vdt))
            return R_OP;
        c->pe = pe;
        return R_COUNT;
    }
    e = mpi_dt_find(s->dt);
    if (!mpi_dt_reducible(e))
        return R_DTYPE;
    if (!mpi_op_map(op, &c->iop) || !mpi_op_applies(c->iop, e))
        return R_OP;
    c->idt = e->idt;
    return R_COUNT;
}

/* A call's line under INCOLL_MPI_TUNE_DEBUG=1, at the communicator's
 * rank 0. */
static __attribute__((noinline)) void tune_say(const mpi_call_t *c,
                                               mpi_form_t form, uint64_t bytes,
                                               const incoll_choice_t *ch)
{
    char where[400];
    if (c->rank != 0)
        return;
    incoll_table_entry(L.ctx, ch->entry, where, sizeof(where));
    incoll_log(INCOLL_LOG_INFO,
               "mpi: tune: %s %s %" PRIu64 " B on %d ranks: %s (%s)",
               mpi_coll_names[c->coll], incoll_form_name((incoll_form_t)form),
               bytes, c->size,
               ch->path == INCOLL_PATH_HOST ? incoll_algo_name(ch->algo)
                                            : incoll_path_name(ch->path),
               where);
}

/* 1 when the selection table (libincoll's, incoll_ctx_select: the same
 * on every rank, agreed at init) sends the call to MPI's own. Its
 * arguments (collective, form, the size decide() found, the datatype and
 * the communicator's size) are the same on every rank: so is the path.
 * A host-based algorithm is kept in c->algo for an allreduce of any form
 * (incoll_allreduce_algo, incoll_iallreduce_algo,
 * incoll_allreduce_init_algo run it). */
static int tuned_to_mpi(mpi_call_t *c, mpi_form_t form)
{
    uint64_t bytes = c->coll == MPI_COLL_BARRIER ? 0 : c->bytes;
    int reduction = c->coll == MPI_COLL_ALLREDUCE ||
                    c->coll == MPI_COLL_REDUCE ||
                    c->coll == MPI_COLL_REDUCE_SCATTER_BLOCK ||
                    c->coll == MPI_COLL_REDUCE_SCATTER;
    incoll_choice_t ch;

    incoll_ctx_select(L.ctx, c->size, (incoll_coll_t)c->coll,
                      (incoll_form_t)form, bytes,
                      reduction ? c->idt : INCOLL_DTYPE_COUNT, &ch);
    if (L.cfg.tune_debug)
        tune_say(c, form, bytes, &ch);
    if (ch.path == INCOLL_PATH_HOST && c->coll == MPI_COLL_ALLREDUCE &&
        c->pe == NULL)
        c->algo = ch.algo;
    return ch.path == INCOLL_PATH_MPI;
}

/* The largest buffer a staged side of the call may need: packing goes
 * through MPI_Pack's int sizes. The same on every rank. */
static reason_t fits(size_t total)
{
    return total > (size_t)INT32_MAX ? R_BYTES : R_COUNT;
}

/*
 * The decision, from what every rank knows alike: for the reductions the
 * signature's basic type and element count and the op; for the others
 * the bytes of one rank's block, taken from whichever side the rank's
 * role makes significant (gather: the root's receive side, the others'
 * send side; scatter the other way round), which MPI's type matching
 * makes equal. Then this rank's staging (stage_call). R_ARGS only for
 * arguments that are erroneous where MPI reads them.
 */
static reason_t decide(mpi_call_t *c, const mpi_args_t *a, mpi_form_t form)
{
    mpi_side_t s;
    size_t n = (size_t)c->size;
    reason_t r;

    switch (c->coll) {
    case MPI_COLL_BARRIER:
        c->bytes = 1;
        return R_COUNT;
    case MPI_COLL_ALLREDUCE:
    case MPI_COLL_REDUCE:
        if (mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &s) != 0)
            return R_ARGS;
        r = decide_reduction(c, &s, a->op, form);
        return r == R_COUNT ? fits(s.bytes) : r;
    case MPI_COLL_REDUCE_SCATTER_BLOCK:
    case MPI_COLL_REDUCE_SCATTER:
        if (mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &s) != 0)
            return R_ARGS;
        r = decide_reduction(c, &s, a->op, form);
        return r == R_COUNT ? fits(s.bytes * n) : r;
    case MPI_COLL_BCAST:
        if (mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &s) != 0)
            return R_ARGS;
        c->count = c->bytes = s.bytes;
        return fits(s.bytes);
    case MPI_COLL_ALLGATHER:
        if (mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &s) != 0)
            return R_ARGS;
        break;
    case MPI_COLL_GATHER:
        if ((c->is_root
                 ? mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &s)
                 : mpi_side_make(a->sendbuf, a->sendcount, a->sendtype, &s)) !=
            0)
            return R_ARGS;
        break;
    case MPI_COLL_SCATTER:
        if ((c->is_root
                 ? mpi_side_make(a->sendbuf, a->sendcount, a->sendtype, &s)
                 : mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &s)) !=
            0)
            return R_ARGS;
        break;
    default:
        return R_ARGS;
    }
    c->count = c->bytes = s.bytes;
    return fits(s.bytes * n);
}

/* A send side whose bytes differ from the block every rank agreed on (an
 * erroneous program): the rank takes part with zeros and gets an error
 * afterwards, instead of leaving the others waiting. */
static const void *mismatched_input(mpi_call_t *c)
{
    c->mismatch = 1;
    return call_tmp(c, c->count);
}

/*
 * This rank's staging of a call decide() let in: sbuf and rbuf as
 * libincoll gets them, and the sides packed before each start (c->in) or
 * unpacked after success (c->out). Sides libincoll can use where they
 * are are used there. Returns R_ARGS for an argument erroneous where MPI
 * reads it, found only now (the caller then leaves the call to MPI, which
 * says so); c->fail when this rank cannot take part.
 */
static reason_t stage_call(mpi_call_t *c, const mpi_args_t *a)
{
    int in_place = a->sendbuf == MPI_IN_PLACE;
    mpi_side_t s, all, mine;

    memset(&s, 0, sizeof(s));

    switch (c->coll) {
    case MPI_COLL_BARRIER:
        return R_COUNT;
    case MPI_COLL_ALLREDUCE:
    case MPI_COLL_REDUCE: {
        int has_out = c->coll == MPI_COLL_ALLREDUCE || c->is_root;
        mpi_side_t out;
        if (in_place && !has_out)
            return R_ARGS; /* MPI_IN_PLACE at a reduce's non-root */
        if (mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &out) != 0 ||
            (!in_place &&
             mpi_side_make(a->sendbuf, a->sendcount, a->sendtype, &s) != 0))
            return R_ARGS;
        if (c->pe) {
            /* MINLOC/MAXLOC read and write the pairs themselves. */
            c->pin = in_place ? out : s;
            c->pout = out;
            if (!has_out)
                c->pout.buf = NULL;
            return R_COUNT;
        }
        if (in_place) {
            inplace_side(c, &out, &out);
            return R_COUNT;
        }
        c->sbuf = read_side(c, &s);
        c->rbuf = has_out ? write_side(c, &out) : NULL;
        return R_COUNT;
    }
    case MPI_COLL_REDUCE_SCATTER_BLOCK:
    case MPI_COLL_REDUCE_SCATTER: {
        mpi_side_t out, whole;
        /* recvcount (checked by decide) times size fits an int: fits(). */
        int all_count = a->recvcount * c->size;
        if (mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &out) != 0 ||
            mpi_side_make(in_place ? a->recvbuf : a->sendbuf, all_count,
                          a->recvtype, &whole) != 0)
            return R_ARGS;
        if (in_place) {
            inplace_side(c, &whole, &out);
            return R_COUNT;
        }
        c->sbuf = read_side(c, &whole);
        c->rbuf = write_side(c, &out);
        return R_COUNT;
    }
    case MPI_COLL_BCAST:
        if (mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &s) != 0)
            return R_ARGS;
        c->rbuf = c->is_root ? (void *)read_side(c, &s) : write_side(c, &s);
        return R_COUNT;
    case MPI_COLL_ALLGATHER:
    case MPI_COLL_GATHER: {
        int gets = c->coll == MPI_COLL_ALLGATHER || c->is_root;
        if (in_place && !gets)
            return R_ARGS; /* MPI_IN_PLACE at a gather's non-root */
        if (!gets) {
            c->rbuf = NULL;
        } else {
            int me = c->coll == MPI_COLL_ALLGATHER ? c->rank : c->root;
            if (blocks_side(c, a->recvbuf, a->recvcount, a->recvtype,
                            in_place ? me : -1, &all, &mine) != 0)
                return R_ARGS;
            if (in_place && L.cfg.agree)
                all.data = NULL; /* a redo needs our block untouched */
            c->rbuf = write_side(c, &all);
            if (in_place) {
                c->sbuf = INCOLL_IN_PLACE;
                if (c->rbuf != all.data && c->rbuf) {
                    /* Our block goes into the call's buffer first. */
                    c->in = (mpi_stage_t){
                        mine, (char *)c->rbuf + (size_t)me * c->count, 1};
                }
                return R_COUNT;
            }
        }
        if (mpi_side_make(a->sendbuf, a->sendcount, a->sendtype, &s) != 0)
            return R_ARGS;
        c->sbuf = s.bytes == c->count ? read_side(c, &s) : mismatched_input(c);
        return R_COUNT;
    }
    case MPI_COLL_SCATTER: {
        int recv_in_place = a->recvbuf == MPI_IN_PLACE;
        if (recv_in_place && !c->is_root)
            return R_ARGS; /* MPI_IN_PLACE at a scatter's non-root */
        if (c->is_root) {
            if (blocks_side(c, (void *)a->sendbuf, a->sendcount, a->sendtype,
                            -1, &all, &mine) != 0)
                return R_ARGS;
            c->sbuf = read_side(c, &all);
            if (recv_in_place) {
                c->rbuf = (void *)INCOLL_IN_PLACE;
                return R_COUNT;
            }
        }
        if (mpi_side_make(a->recvbuf, a->recvcount, a->recvtype, &s) != 0)
            return R_ARGS;
        if (s.bytes != c->count) {
            c->mismatch = 1;
            c->rbuf = call_tmp(c, c->count);
            return R_COUNT;
        }
        c->rbuf = write_side(c, &s);
        return R_COUNT;
    }
    default:
        return R_ARGS;
    }
}

int mpi_call_plan(mpi_coll_t coll, const mpi_args_t *a, mpi_form_t form,
                  mpi_call_t *c)
{
    reason_t pre = R_COUNT;
    comm_state_t *st, *known;

    memset(c, 0, sizeof(*c));
    c->algo_where = -1;
    c->coll = coll;
    c->comm = a->comm;
    c->root = a->root;
    c->idt = INCOLL_UINT8;
    c->iop = INCOLL_OP_SUM;
    if (!L.booted)
        mpi_layer_bootstrap(0);
    if (L.booted && !L.finalized && L.active && a->comm != MPI_COMM_NULL &&
        (L.cfg.colls & (1 << coll))) {
        int rooted = coll == MPI_COLL_REDUCE || coll == MPI_COLL_BCAST ||
                     coll == MPI_COLL_GATHER || coll == MPI_COLL_SCATTER;
        /* A communicator seen before knows its rank and size: no MPI call
         * on the fast path. */
        known = mpi_comm_known(a->comm);
        if (known) {
            c->rank = known->rank;
            c->size = known->size;
        } else if (PMPI_Comm_rank(a->comm, &c->rank) != MPI_SUCCESS ||
                   PMPI_Comm_size(a->comm, &c->size) != MPI_SUCCESS) {
            pre = R_ARGS;
        }
        if (rooted && (a->root < 0 || a->root >= c->size))
            pre = R_ARGS;
        c->is_root = rooted && c->rank == a->root;
        if (pre == R_COUNT && coll == MPI_COLL_REDUCE_SCATTER) {
            /* Equal recvcounts go to the fabric as a reduce_scatter_block;
             * recvcounts is the same array on every rank: so is this. */
            if (a->recvcounts == NULL)
                pre = R_ARGS;
            for (int i = 1; pre == R_COUNT && i < c->size; i++)
                if (a->recvcounts[i] != a->recvcounts[0])
                    pre = R_UNEQUAL;
        }
        if (pre == R_COUNT)
            pre = decide(c, a, form);
        if (pre == R_COUNT && tuned_to_mpi(c, form)) {
            /* gate() would say the same, looking comm up again */
            pass_known(coll, R_TUNE, a->comm, known, 1);
            return 0;
        }
        /* The agreement after each call is a blocking MPI call. */
        if (pre == R_COUNT && form != MPI_FORM_BLOCKING && L.cfg.agree)
            pre = R_ARGS;
    }
    st = gate(coll, a->comm, c->bytes, pre);
    if (st == NULL)
        return 0;
    /* The ranks agreed the communicator left the network (switch_to_mpi):
     * its reduces, small broadcasts and nonblocking and persistent
     * collectives go to MPI, decided alike everywhere. */
    if (st->to_mpi && (form != MPI_FORM_BLOCKING || coll == MPI_COLL_REDUCE ||
                       (coll == MPI_COLL_BCAST && c->bytes < LEFT_MPI_BYTES))) {
        pass(coll, R_LEFT, a->comm);
        return 0;
    }
    c->st = st;
    c->icomm = st->icomm;
    if (form == MPI_FORM_PERSISTENT &&
        (c->count > 0 || coll == MPI_COLL_BARRIER) && !mpi_comm_persist(c)) {
        pass(coll, R_COMM, a->comm);
        return 0;
    }
    if (c->count > 0 && stage_call(c, a) != R_COUNT) {
        /* Erroneous where MPI reads it: MPI's own says so. */
        mpi_call_free(c);
        pass(coll, R_ARGS, a->comm);
        return 0;
    }
    c->was_in = mpi_call_in_net(c);
    return 1;
}

int mpi_call_pack(mpi_call_t *c)
{
    if (!c->in.on)
        return MPI_SUCCESS;
    return mpi_side_pack(&c->in.side, c->in.at);
}

int mpi_call_keep(mpi_call_t *c)
{
    int ret = MPI_SUCCESS;
    if (c->in.on)
        ret = mpi_side_keep(&c->in.side);
    if (ret == MPI_SUCCESS && c->out.on)
        ret = mpi_side_keep(&c->out.side);
    return ret;
}

void mpi_call_free(mpi_call_t *c)
{
    mpi_side_release(&c->in.side);
    mpi_side_release(&c->out.side);
    c->in.on = c->out.on = 0;
    for (int i = 0; i < 3; i++) {
        free(c->tmp[i]);
        c->tmp[i] = NULL;
    }
    if (c->own_icomm && c->icomm && L.ctx)
        incoll_comm_destroy(c->icomm);
    c->own_icomm = 0;
    if (c->pool)
        mpi_pool_put(c->pool, c->pool_slot);
    c->pool = NULL;
}

/* After success: the output side unpacked, or this rank's own error. */
static int call_finish(mpi_call_t *c)
{
    int ret = MPI_SUCCESS;
    if (c->out.on &&
        (ret = mpi_side_unpack(&c->out.side, c->out.at)) != MPI_SUCCESS)
        return raise_local(c, ret, "MPI_Unpack failed on the received data");
    if (c->mismatch)
        return raise_local(c, MPI_ERR_TRUNCATE,
                           "its send and receive sides carry different "
                           "bytes (the type signatures do not match): it "
                           "took part with zeros");
    return ret;
}

int mpi_call_done(mpi_call_t *c, incoll_status_t status, mpi_form_t form)
{
    int ret = MPI_SUCCESS;
    if (form == MPI_FORM_PERSISTENT)
        L.persistent[c->coll]++;
    else if (form == MPI_FORM_NB)
        L.nb[c->coll]++;
    if (c->fail)
        return raise_local(c, c->fail, "cannot stage its buffers");
    settle(c, status, &ret);
    if (status == INCOLL_OK)
        ret = call_finish(c);
    return ret;
}

/* ---- the blocking forms ---- */

/* MINLOC/MAXLOC of a blocking allreduce or reduce (c->pe): 1 when done
 * (the output written, or the error raised; *ret_p set), 0 when every
 * rank agreed that the fabric failed (INCOLL_MPI_AGREE=1) and the caller
 * must redo the call with PMPI_ (its buffers are untouched). */
static int pairs_call(mpi_call_t *c, int *ret_p)
{
    const char *vals = NULL;
    const int32_t *idx = NULL;
    incoll_status_t status;

    status =
        pairs_reduce(c->st, c->pe, c->iop, c->pin.buf, c->count, &vals, &idx);
    if (!settle(c, status, ret_p))
        return 0;
    if (status == INCOLL_OK && c->pout.buf)
        pairs_store(c->pe, vals, idx, c->pout.buf, c->count);
    return 1;
}

/* 1 when comm's last blocking collective ran in the network (libincoll's
 * word: incoll_comm_where). */
static int ran_in_net(incoll_comm_h comm)
{
    incoll_where_t w;
    return incoll_comm_where(comm, &w) == INCOLL_OK && w.in_network;
}

/* libincoll's blocking collective for c. */
static incoll_status_t run_blocking(mpi_call_t *c)
{
    incoll_comm_h ic = c->icomm;
    incoll_status_t status;

    switch (c->coll) {
    case MPI_COLL_ALLREDUCE:
        if (c->algo != INCOLL_ALGO_AUTO)
            return incoll_allreduce_algo(ic, c->algo, c->sbuf, c->rbuf,
                                         c->count, c->idt, c->iop);
        return incoll_allreduce(ic, c->sbuf, c->rbuf, c->count, c->idt, c->iop);
    case MPI_COLL_REDUCE:
        status = incoll_reduce(ic, c->sbuf, c->rbuf, c->count, c->idt, c->iop,
                               c->root);
        break;
    case MPI_COLL_BCAST:
        status = incoll_bcast(ic, c->rbuf, c->count, c->root);
        break;
    case MPI_COLL_ALLGATHER:
        status = incoll_allgather(ic, c->sbuf, c->rbuf, c->count);
        break;
    case MPI_COLL_GATHER:
        status = incoll_gather(ic, c->sbuf, c->rbuf, c->count, c->root);
        break;
    case MPI_COLL_SCATTER:
        status = incoll_scatter(ic, c->sbuf, c->rbuf, c->count, c->root);
        break;
    case MPI_COLL_REDUCE_SCATTER_BLOCK:
    case MPI_COLL_REDUCE_SCATTER:
        status = incoll_reduce_scatter(ic, c->sbuf, c->rbuf, c->count, c->idt,
                                       c->iop);
        break;
    default:
        return INCOLL_ERR_INVALID_ARG;
    }
    /* The library's word on where the collective ran. */
    c->was_in = c->was_in && ran_in_net(ic);
    return status;
}

/*
 * A blocking collective: planned (0: MPI's own runs it, the reason
 * counted), staged, run, settled. 1 with *ret_p set when the layer
 * carried it out; 0 also when every rank agreed to redo it with PMPI_
 * (INCOLL_MPI_AGREE=1, buffers untouched).
 */
static int blocking(mpi_coll_t coll, const mpi_args_t *a, int *ret_p)
{
    mpi_call_t c;
    incoll_status_t status;
    int ret, done = 1;

    if (!mpi_call_plan(coll, a, MPI_FORM_BLOCKING, &c))
        return 0;
    if (c.count == 0) {
        /* Zero bytes on every rank: nothing moves, no communication. */
        L.offloaded[coll]++;
        *ret_p = MPI_SUCCESS;
        mpi_call_free(&c);
        return 1;
    }
    if (c.pe) {
        done = pairs_call(&c, ret_p);
        mpi_call_free(&c);
        return done;
    }
    ret = c.fail ? c.fail : mpi_call_pack(&c);
    if (ret != MPI_SUCCESS) {
        /* Cannot take part: the others get an error in bounded time. */
        c.fail = ret;
        *ret_p = mpi_call_done(&c, INCOLL_OK, MPI_FORM_BLOCKING);
        mpi_call_free(&c);
        return 1;
    }
    status = run_blocking(&c);
    if (settle(&c, status, ret_p)) {
        if (status == INCOLL_OK)
            *ret_p = call_finish(&c);
    } else {
        done = 0;
    }
    mpi_call_free(&c);
    return done;
}

int mpi_layer_allreduce(const void *sendbuf, void *recvbuf, int count,
                        MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                        int *ret_p)
{
    mpi_args_t a = {sendbuf, count, dtype, recvbuf, count,
                    dtype,   NULL,  op,    0,       comm};
    return blocking(MPI_COLL_ALLREDUCE, &a, ret_p);
}

int mpi_layer_reduce(const void *sendbuf, void *recvbuf, int count,
                     MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm,
                     int *ret_p)
{
    mpi_args_t a = {sendbuf, count, dtype, recvbuf, count,
                    dtype,   NULL,  op,    root,    comm};
    return blocking(MPI_COLL_REDUCE, &a, ret_p);
}

int mpi_layer_bcast(void *buf, int count, MPI_Datatype dtype, int root,
                    MPI_Comm comm, int *ret_p)
{
    mpi_args_t a = {buf,   count, dtype,       buf,  count,
                    dtype, NULL,  MPI_OP_NULL, root, comm};
    return blocking(MPI_COLL_BCAST, &a, ret_p);
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
        mpi_comm_label(comm, st->seq, label, sizeof(label));
        incoll_info("mpi: communicator '%s': its ranks agreed at a barrier "
                    "that it left the network: reduces, and broadcasts under "
                    "%d bytes, go to MPI from now on (faster than on the "
                    "hosts), the rest stays with libincoll",
                    label, LEFT_MPI_BYTES);
    }
}

int mpi_layer_barrier(MPI_Comm comm, int *ret_p)
{
    mpi_args_t a = {NULL, 0,           MPI_DATATYPE_NULL,
                    NULL, 0,           MPI_DATATYPE_NULL,
                    NULL, MPI_OP_NULL, 0,
                    comm};
    comm_state_t *st;
    mpi_call_t c;
    incoll_status_t status;
    uint8_t in, out = 0;

    if (!mpi_call_plan(MPI_COLL_BARRIER, &a, MPI_FORM_BLOCKING, &c))
        return 0;
    st = c.st;
    /*
     * No rank gets an allreduce's result before every rank contributed.
     * Its byte carries, for free, whether this rank saw the communicator
     * leave the network: the bitwise OR is the same on every rank, so the
     * switch of reduces and small broadcasts to MPI happens at the same
     * call everywhere (a rank's own view may differ from its peers' for a
     * while: the manager's failure notice reaches each at its own time).
     */
    in = (uint8_t)(st->want_mpi && !st->to_mpi);
    if (st->to_mpi) {
        /* Agreed already: nothing more to carry. */
        status = incoll_barrier(st->icomm);
        c.was_in = c.was_in && ran_in_net(st->icomm);
    } else {
        status = incoll_allreduce(st->icomm, &in, &out, 1, INCOLL_UINT8,
                                  INCOLL_OP_BOR);
    }
    if (settle(&c, status, ret_p)) {
        if (status == INCOLL_OK && (out & 1) && !st->to_mpi)
            switch_to_mpi(st, comm);
        return 1;
    }
    return 0;
}

int mpi_layer_allgather(const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, int *ret_p)
{
    mpi_args_t a = {sendbuf,  sendcount, sendtype,    recvbuf, recvcount,
                    recvtype, NULL,      MPI_OP_NULL, 0,       comm};
    return blocking(MPI_COLL_ALLGATHER, &a, ret_p);
}

int mpi_layer_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype,
                     int root, MPI_Comm comm, int *ret_p)
{
    mpi_args_t a = {sendbuf,  sendcount, sendtype,    recvbuf, recvcount,
                    recvtype, NULL,      MPI_OP_NULL, root,    comm};
    return blocking(MPI_COLL_GATHER, &a, ret_p);
}

int mpi_layer_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                      void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      int root, MPI_Comm comm, int *ret_p)
{
    mpi_args_t a = {sendbuf,  sendcount, sendtype,    recvbuf, recvcount,
                    recvtype, NULL,      MPI_OP_NULL, root,    comm};
    return blocking(MPI_COLL_SCATTER, &a, ret_p);
}

int mpi_layer_reduce_scatter_block(const void *sendbuf, void *recvbuf,
                                   int recvcount, MPI_Datatype dtype, MPI_Op op,
                                   MPI_Comm comm, int *ret_p)
{
    mpi_args_t a = {sendbuf, recvcount, dtype, recvbuf, recvcount,
                    dtype,   NULL,      op,    0,       comm};
    return blocking(MPI_COLL_REDUCE_SCATTER_BLOCK, &a, ret_p);
}

int mpi_layer_reduce_scatter(const void *sendbuf, void *recvbuf,
                             const int recvcounts[], MPI_Datatype dtype,
                             MPI_Op op, MPI_Comm comm, int *ret_p)
{
    mpi_args_t a = {sendbuf,
                    recvcounts ? recvcounts[0] : 0,
                    dtype,
                    recvbuf,
                    recvcounts ? recvcounts[0] : 0,
                    dtype,
                    recvcounts,
                    op,
                    0,
                    comm};
    return blocking(MPI_COLL_REDUCE_SCATTER, &a, ret_p);
}
