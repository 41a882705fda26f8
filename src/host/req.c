/*
 * Requests (nonblocking and persistent collectives) and the library lock
 * (see req.h for the lock).
 *
 * Each communicator keeps a queue of its requests; only the head runs, so
 * they complete in the order they were started, as on every other rank.
 * The head runs one of two ways:
 *   - on the fabric from the caller's thread: an in-network allreduce is
 *     started on the communicator's engine and every libincoll call
 *     (test, wait, any other) feeds it the packets that came in and runs
 *     its timers, without blocking; it runs on while the caller computes
 *     as far as the window of the engine and the ANs carry it;
 *   - in the communicator's request thread, which calls the blocking
 *     collective: every other collective, an allreduce on the hosts, the
 *     recovery after a failed in-network one, and with
 *     INCOLL_PROGRESS_THREAD=1 every request. The thread gives the lock up
 *     while it waits for packets (blocked in poll, or asleep while another
 *     thread polls) and sleeps on a condition variable while it has no
 *     work: an idle thread costs nothing.
 * A blocking reduce's or gather's non-root that returns early (early_post)
 * starts its operation from the caller's thread when nothing else of the
 * communicator runs (its contribution leaves before the call returns);
 * the thread runs the rest of the call (the acknowledgement, resends, a
 * recovery).
 * One thread per communicator, made at its first request that needs one,
 * lets collectives of different communicators progress independently, as
 * MPI allows programs to start them in different orders on different
 * ranks.
 */
#include "host/host.h"
#include "host/req.h"

#include "host/comm.h"
#include "host/counters.h"

#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef enum {
    ST_QUEUED,  /* not started */
    ST_FAST,    /* on the engine, progressed by every libincoll call */
    ST_THREAD,  /* for the communicator's thread */
    ST_RECOVER, /* for the thread: recover a failed fast one */
    ST_RUNNING, /* the thread runs it */
} rq_state_t;

struct incoll_req {
    incoll_comm_h comm;
    host_req_kind_t kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count; /* elements (reductions) or bytes */
    incoll_dtype_t dtype;
    incoll_op_t op;
    int root;
    incoll_algo_t algo;
    int persistent;
    int threaded;           /* host_req_args_t.threaded */
    incoll_status_t *chain; /* host_req_args_t.chain */
    uint32_t tag;           /* host_req_args_t.tag */
    int active;   /* started and not complete (persistent: may be 0) */
    int done;     /* complete, status valid */
    int detached; /* freed by the caller before completion */
    int early;    /* a blocking call that returned early (host_early_post):
                     owned by its communicator's ring, never reaped */
    int sent;     /* early, and its operation started by its caller
                     (host_req_ops_t.early_send) */
    rq_state_t state;
    incoll_status_t status;
    int kept;            /* fast: result into host_comm_result_buf */
    void *res;           /* fast: where the engine writes the result */
    size_t bytes;        /* fast: result bytes */
    uint64_t ops_before; /* fast: engine's op count before the start */
    uint64_t deadline;   /* fast: INCOLL_DEADLINE_MS from its start (0:
                            none) */
    int why;             /* ST_RECOVER: the reason (host_comm_fail_why) */
    host_where_t where;  /* where it ran, once done (incoll_req_where) */
    struct incoll_req *next;
};

/* Blocking calls that returned early (host_early_post) take their
 * request and the copy of their data from a small ring per communicator,
 * reused: no malloc per call once the copies are as large as the calls
 * need. A slot is free again when its request completed; the next
 * blocking call that does not return early waits for all of them anyway
 * (collectives of a communicator run in order). */
#define EARLY_RING 4

/* How long a broadcast that returned with its data leaves its round to
 * the communicator's next operation before the request thread takes it
 * on (host_req_finish_later): a member that goes elsewhere holds the
 * others' round up at most this long (it only matters when its own
 * contribution or result was lost). */
#define LINGER_NS 20000000ull

typedef struct {
    struct incoll_req req;
    void *buf; /* the member's data the operation still needs */
    size_t cap;
} early_slot_t;

struct host_req_queue {
    incoll_req_h head, tail;
    pthread_t thread;
    int has_thread;
    int thread_said; /* that it could not be started: said once */
    int stop;
    early_slot_t early[EARLY_RING];
    unsigned early_next;
    int idle_timed; /* the idle thread sleeps until a linger's due time */
    /* The thread, idle, sleeps on work_cv (with the sync's mu) until its
     * queue has work for it (work_seq counts the wakes): not on every
     * packet dispatched, which would have every idle thread of the
     * process queue for the lock at each packet. */
    pthread_cond_t work_cv;
    uint64_t work_seq;
    /* A recovery to take part in outside a call (watch_pass): asked, and
     * running (no request starts and no call enters meanwhile). */
    int serve, serving;
};

/* ---- requests ---- */

static size_t dsize_of(const struct incoll_req *r)
{
    return incoll_dtype_size(r->dtype);
}

/* The blocking collective of r (the thread runs it). */
static incoll_status_t run_blocking(incoll_req_h r)
{
    host_req_args_t a = {r->kind,  r->comm,     r->sendbuf, r->recvbuf,
                         r->count, r->dtype,    r->op,      r->root,
                         r->algo,  r->threaded, r->chain,   r->tag};
    const host_req_ops_t *ops = r->comm->ctx->req_ops;
    if ((unsigned)r->kind > RQ_REDUCE_SCATTER || ops->run[r->kind] == NULL)
        return INCOLL_ERR_INVALID_ARG;
    return ops->run[r->kind](&a);
}

static int overlaps(const void *a, const void *b, size_t len)
{
    const char *pa = a, *pb = b;
    return pa < pb + len && pb < pa + len;
}

/* 1 when r can run on the engine from the caller's thread: an allreduce
 * with valid arguments on a communicator whose group works. Anything else
 * (errors included) goes to the blocking path, which says why. */
static int fast_ok(const struct incoll_req *r)
{
    incoll_comm_h c = r->comm;
    const char *why;
    size_t ds;
    const void *send;

    if (r->kind != RQ_ALLREDUCE ||
        (r->algo != INCOLL_ALGO_AUTO && r->algo != INCOLL_ALGO_INC) ||
        c->size < 2 || c->eng == NULL || r->count == 0 || r->recvbuf == NULL ||
        r->sendbuf == NULL || (unsigned)r->dtype >= INCOLL_DTYPE_COUNT ||
        (unsigned)r->op >= INCOLL_OP_COUNT || !incoll_op_valid(r->op, r->dtype))
        return 0;
    ds = dsize_of(r);
    if (r->count > SIZE_MAX / ds)
        return 0;
    send = r->sendbuf == INCOLL_IN_PLACE ? r->recvbuf : r->sendbuf;
    if (send != r->recvbuf && overlaps(send, r->recvbuf, r->count * ds))
        return 0;
    /* One that locks the tree first (INCOLL_STREAM_THRESHOLD) runs the
     * blocking way in the communicator's thread: lock, stream, unlock. */
    return !host_comm_broken(c, &why) && !host_comm_group_failed(c) &&
           !host_comm_pulled(c) && !host_comm_doomed_pending(c) &&
           host_engine_status(c->eng) != INCOLL_INPROGRESS &&
           host_comm_inc_usable(c, r->op, r->dtype) &&
           !c->ctx->req_ops->stream_would_lock(c, r->count * ds);
}

/* Lock held: comm's queue, made at its first request (NULL without
 * memory). */
static struct host_req_queue *queue_of(incoll_comm_h comm)
{
    if (comm->rq == NULL) {
        struct host_req_queue *q = calloc(1, sizeof(*q));
        if (q == NULL || pthread_cond_init(&q->work_cv, NULL) != 0) {
            free(q);
            return NULL;
        }
        comm->rq = q;
    }
    return comm->rq;
}

static void queue_pop(incoll_comm_h comm)
{
    struct host_req_queue *q = comm->rq;
    incoll_req_h r = q->head;
    q->head = r->next;
    if (q->head == NULL)
        q->tail = NULL;
    r->next = NULL;
}

static const char *kind_name(host_req_kind_t kind)
{
    static const char *const names[] = {"allreduce", "reduce",        "bcast",
                                        "barrier",   "allgather",     "gather",
                                        "scatter",   "reduce_scatter"};
    return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind]
                                                             : "collective";
}

/* status, or in its place (when INCOLL_OK) the error of an operation of
 * c that returned early and failed, which is then taken. */
static incoll_status_t early_take_error(incoll_comm_h c, incoll_status_t status)
{
    if (c->early_error != INCOLL_OK) {
        if (status == INCOLL_OK)
            status = c->early_error;
        c->early_error = INCOLL_OK;
    }
    return status;
}

/* The error of an operation that returned early does not vanish: it is
 * said once here and handed to the next call on the communicator (the
 * next request to complete, or host_leave()). */
static incoll_status_t early_error(incoll_req_h r, incoll_status_t status)
{
    incoll_comm_h c = r->comm;
    if (r->early) {
        if (status != INCOLL_OK) {
            incoll_warn("%s: the operation this member returned early from "
                        "failed: %s; the next call on the communicator "
                        "returns the error",
                        kind_name(r->kind), incoll_status_string(status));
            if (c->early_error == INCOLL_OK)
                c->early_error = status;
        }
        return status;
    }
    return early_take_error(c, status);
}

/* r (the head of its queue) is complete. */
static void complete(incoll_req_h r, incoll_status_t status)
{
    incoll_ctx_h ctx = r->comm->ctx;
    status = early_error(r, status);
    queue_pop(r->comm);
    r->status = status;
    r->active = 0;
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    if (r->detached)
        free(r);
    host_sync_kick(ctx);
}

static void *thread_main(void *arg);
static incoll_status_t enqueue(incoll_req_h r);

/* Makes comm's thread if there is none yet; 1 when it has one. */
static int ensure_thread(incoll_comm_h comm)
{
    struct host_req_queue *q = comm->rq;
    int ret;
    if (q->has_thread)
        return 1;
    ret = comm->ctx->cfg.fault_no_thread
              ? EAGAIN
              : pthread_create(&q->thread, NULL, thread_main, comm);
    if (ret != 0) {
        if (!q->thread_said)
            incoll_error("requests: cannot start the thread of a "
                         "communicator: %s; its nonblocking collectives "
                         "fail and its blocking ones do not return early",
                         log_strerror(ret));
        q->thread_said = 1;
        return 0; /* its requests then fail (thread_wake) */
    }
    q->has_thread = 1;
    return 1;
}

/* Lock held: comm's head is for its thread, or the thread must stop:
 * makes the thread if needed and wakes it. 0 when there is no thread
 * (it could not be made): the head must then end here, as nobody else
 * would ever run it. */
static int thread_wake(incoll_comm_h comm)
{
    struct host_req_queue *q = comm->rq;
    struct host_sync *s = comm->ctx->sync;
    if (!ensure_thread(comm))
        return 0;
    pthread_mutex_lock(&s->mu);
    q->work_seq++;
    pthread_cond_signal(&q->work_cv);
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* The thread, lock held, with nothing to do: sleeps until thread_wake()
 * (the queue only changes under the lock, so no wake is missed). */
static void thread_idle(incoll_comm_h comm)
{
    struct host_req_queue *q = comm->rq;
    struct host_sync *s = comm->ctx->sync;
    uint64_t seq, now = host_now_ns();
    struct timespec ts;
    pthread_mutex_lock(&s->mu);
    seq = q->work_seq;
    /* While a broadcast lingers (host_req_finish_later), until its due
     * time: work_cv runs on the realtime clock. */
    q->idle_timed = comm->linger && comm->linger_due > now;
    if (q->idle_timed) {
        uint64_t left = comm->linger_due - now, ns;
        clock_gettime(CLOCK_REALTIME, &ts);
        ns = (uint64_t)ts.tv_nsec + left % 1000000000ull;
        ts.tv_sec += (time_t)(left / 1000000000ull + ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
    }
    host_sync_release_for_wait(s);
    if (q->work_seq == seq) {
        if (q->idle_timed)
            pthread_cond_timedwait(&q->work_cv, &s->mu, &ts);
        else
            pthread_cond_wait(&q->work_cv, &s->mu);
    }
    q->idle_timed = 0;
    host_sync_reacquire_after_wait(s);
    pthread_mutex_unlock(&s->mu);
}

/* The engine's work for a fast request: copies the result out on
 * success; on a failure that a recovery can mend hands r to the thread. */
static void fast_end(incoll_req_h r, incoll_status_t status)
{
    incoll_comm_h c = r->comm;
    if (status == INCOLL_OK) {
        c->ctx->req_ops->stream_end(c); /* streamed under a lock of N
                                            operations */
        if (r->kept) {
            memcpy(r->recvbuf, r->res, r->bytes);
            host_comm_result_done(c, r->count, r->dtype, r->op);
        }
        r->where.in_net = 1;
        r->where.why = INCOLL_WHY_NETWORK;
        complete(r, INCOLL_OK);
        return;
    }
    if (r->deadline != 0 && host_now_ns() >= r->deadline)
        r->why = HOST_ABORT_DEADLINE;
    else
        r->why = host_comm_fail_why(c, status, 1);
    if (r->why >= 0) {
        incoll_info("allreduce: in-network operation on group %u failed: %s; "
                    "recovering with the other members",
                    c->group, incoll_status_string(status));
        r->state = ST_RECOVER;
        if (thread_wake(c)) {
            host_sync_kick(c->ctx);
            return;
        }
        incoll_error("allreduce: group %u: no thread to recover in; the "
                     "operation fails",
                     c->group);
    }
    complete(r, status);
}

static void fast_start(incoll_req_h r)
{
    incoll_comm_h c = r->comm;
    const void *send = r->sendbuf == INCOLL_IN_PLACE ? r->recvbuf : r->sendbuf;
    incoll_status_t status;

    r->bytes = r->count * dsize_of(r);
    r->kept = host_comm_recoverable(c);
    if (r->kept) {
        r->res = host_comm_result_buf(c, r->bytes);
        if (r->res == NULL) {
            complete(r, INCOLL_ERR_NO_MEMORY);
            return;
        }
    } else {
        r->res = r->recvbuf;
        if (send == r->recvbuf) {
            /* The engine needs its input intact until the result is in. */
            status = host_comm_scratch(c, r->bytes);
            if (status != INCOLL_OK) {
                complete(r, status);
                return;
            }
            memcpy(c->scratch, send, r->bytes);
            send = c->scratch;
        }
    }
    r->ops_before = host_engine_counters(c->eng)->ops;
    r->deadline = c->ctx->deadline_ns ? host_now_ns() + c->ctx->deadline_ns : 0;
    r->state = ST_FAST;
    status = host_engine_start(c->eng, send, r->res, r->count, r->dtype, r->op,
                               host_now_ns());
    udp_flush(c->ctx->sock);
    if (status != INCOLL_INPROGRESS)
        fast_end(r, status);
}

/* Moves comm's queue on as far as it goes without blocking. */
static void advance(incoll_comm_h comm)
{
    struct host_req_queue *q = comm->rq;
    if (q && q->serving)
        return; /* its thread takes part in a recovery */
    while (q && q->head) {
        incoll_req_h r = q->head;
        if (r->state == ST_QUEUED) {
            if (!comm->ctx->sync->progress_thread && !r->threaded &&
                fast_ok(r)) {
                fast_start(r);
            } else {
                r->state = ST_THREAD;
                if (thread_wake(comm)) {
                    host_sync_kick(comm->ctx);
                    return;
                }
                /* ensure_thread said why. */
                complete(r, INCOLL_ERR_NO_MEMORY);
            }
            continue;
        }
        if (r->state != ST_FAST)
            return;
        if (host_comm_group_failed(comm) || host_comm_pulled(comm) ||
            (r->deadline != 0 && host_now_ns() >= r->deadline)) {
            host_engine_abandon(comm->eng, INCOLL_ERR_GROUP_FAILED);
            fast_end(r, INCOLL_ERR_GROUP_FAILED);
            continue;
        }
        host_engine_on_time(comm->eng, host_now_ns());
        udp_flush(comm->ctx->sock);
        if (host_engine_status(comm->eng) == INCOLL_INPROGRESS)
            return;
        fast_end(r, host_engine_status(comm->eng));
    }
}

/* Progresses every communicator's requests; returns the earliest deadline
 * of the engines of fast requests (UINT64_MAX when none runs). */
static uint64_t advance_all(incoll_ctx_h ctx)
{
    uint64_t due = UINT64_MAX;
    for (incoll_comm_h c = ctx->comms; c; c = c->next) {
        if (c->rq == NULL || c->rq->head == NULL)
            continue;
        advance(c);
        if (c->rq->head && c->rq->head->state == ST_FAST) {
            uint64_t d = host_engine_deadline(c->eng);
            if (d < due)
                due = d;
        }
    }
    return due;
}

/* One round of waiting, lock held: progresses, then blocks until packets,
 * an event or deadline_ns. */
static void progress_wait(incoll_ctx_h ctx, uint64_t deadline_ns)
{
    uint64_t due = advance_all(ctx);
    if (due != UINT64_MAX) {
        host_ctx_progress(ctx, due < deadline_ns ? due : deadline_ns);
        advance_all(ctx);
    } else {
        host_sync_wait_event(ctx->sync, deadline_ns);
    }
}

static incoll_status_t recover_run(incoll_req_h r)
{
    incoll_comm_h c = r->comm;
    int started =
        c->eng != NULL && host_engine_counters(c->eng)->ops != r->ops_before;
    int done = 0;
    incoll_status_t status = host_comm_recover(c, started, r->recvbuf, r->count,
                                               r->dtype, r->op, r->why, &done);
    if (status != INCOLL_OK || done)
        return status;
    return run_blocking(r);
}

static void *thread_main(void *arg)
{
    incoll_comm_h comm = arg;
    incoll_ctx_h ctx = comm->ctx;
    struct host_req_queue *q = comm->rq;

    /* The thread sleeps in poll nearly all the time; when packets come it
     * must run at once, ahead of the computation it overlaps, or the
     * network waits for the host (a scheduler's share among the
     * application's threads is not enough). Where the system allows it
     * (root or CAP_SYS_NICE) it runs at a higher priority. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -10) != 0)
        incoll_debug("requests: thread priority unchanged: %s",
                     log_strerror(errno));
    host_lock(ctx);
    for (;;) {
        incoll_req_h r = q->head;
        if (r && (r->state == ST_THREAD || r->state == ST_RECOVER)) {
            int rec = r->state == ST_RECOVER;
            incoll_status_t status;
            r->state = ST_RUNNING;
            host_where_begin();
            if (rec)
                host_where_note(0, INCOLL_WHY_RECOVERED);
            if (r->chain && *r->chain != INCOLL_OK)
                status = *r->chain;
            else
                status = rec ? recover_run(r) : run_blocking(r);
            r->where = host_where_end(comm);
            if (rec && r->where.why == INCOLL_WHY_NETWORK)
                r->where = (host_where_t){0, INCOLL_WHY_RECOVERED};
            if (r->chain && status != INCOLL_OK && *r->chain == INCOLL_OK)
                *r->chain = status;
            complete(r, status);
            advance(comm);
            continue;
        }
        if (r && r->state == ST_QUEUED) {
            advance(comm);
            continue;
        }
        if (r == NULL && q->stop)
            break;
        if (r == NULL && q->serve) {
            q->serve = 0;
            if (comm->call_depth == 0) {
                q->serving = 1;
                (void)host_comm_serve_idle(comm);
                q->serving = 0;
                host_sync_kick(ctx);
            }
            continue;
        }
        if (r == NULL && comm->linger && host_now_ns() >= comm->linger_due) {
            /* Its caller went elsewhere: the round goes on here. */
            host_comm_finish_op(comm);
            continue;
        }
        thread_idle(comm);
    }
    host_unlock(ctx);
    return NULL;
}

/* Lock held. Waits for comm's outstanding requests. */
static void drain(incoll_comm_h comm)
{
    while (comm->rq && (comm->rq->head || comm->rq->serving))
        progress_wait(comm->ctx, UINT64_MAX);
}

/* ---- taking part in recoveries outside calls ---- */

#define WATCH_NS 100000000ull /* 100 ms */

/* Lock held: reads what came (only when nobody else waits on the socket,
 * and only when something is there: this pass never blocks), then asks
 * the thread of each communicator that another member's recovery pulled
 * in, outside any call on it, to take part (thread_main). Returns 1 when
 * the library is idle: nobody else polled, nothing had come, and no
 * communicator waits to take part in a recovery; then only a datagram
 * can bring one, and the watcher sleeps until it comes. */
static int watch_pass(incoll_ctx_h ctx)
{
    struct host_sync *s = ctx->sync;
    int polling, idle = 1;
    pthread_mutex_lock(&s->mu);
    polling = s->polling;
    pthread_mutex_unlock(&s->mu);
    if (polling) {
        idle = 0;
    } else {
        struct pollfd pfd = {.fd = udp_fd(ctx->sock), .events = POLLIN};
        if (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN)) {
            host_ctx_progress(ctx, 0);
            idle = 0;
        }
    }
    for (incoll_comm_h c = ctx->comms; c; c = c->next) {
        struct host_req_queue *q;
        if (!host_comm_wants_serve(c))
            continue;
        idle = 0; /* looked at again in WATCH_NS */
        if (c->call_depth != 0 || c->linger)
            continue;
        q = queue_of(c);
        if (q == NULL || q->head != NULL || q->serve || q->serving)
            continue;
        q->serve = 1;
        (void)thread_wake(c);
    }
    return idle;
}

/* Without s->mu: sleeps until a datagram comes to the context's socket or
 * watch_end() wakes it (never on a timer: an idle process's watcher costs
 * no wake-up while its program runs elsewhere, in MPI's own collectives
 * or its computation). */
static void watch_sleep(incoll_ctx_h ctx)
{
    struct host_sync *s = ctx->sync;
    struct pollfd pfd[2] = {{.fd = udp_fd(ctx->sock), .events = POLLIN},
                            {.fd = s->watch_fd, .events = POLLIN}};
    if (poll(pfd, 2, -1) > 0 && (pfd[1].revents & POLLIN)) {
        uint64_t v;
        if (read(s->watch_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            incoll_debug("requests: watcher eventfd read: %s",
                         log_strerror(errno));
    }
}

/* The watcher: one watch_pass, with the library lock alone (never the
 * caller's outer lock), every WATCH_NS while calls run (another thread
 * polls the socket) or a recovery is pending, and when a datagram comes
 * while the library is idle. */
static void *watch_main(void *arg)
{
    incoll_ctx_h ctx = arg;
    struct host_sync *s = ctx->sync;
    int idle = 0;
    pthread_setname_np(pthread_self(), "incoll-watch");
    host_sync_mark_watcher();
    pthread_mutex_lock(&s->mu);
    while (!s->watch_stop) {
        if (idle && s->watch_fd >= 0) {
            pthread_mutex_unlock(&s->mu);
            watch_sleep(ctx);
            pthread_mutex_lock(&s->mu);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += (long)WATCH_NS;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&s->watch_cv, &s->mu, &ts);
        }
        if (s->watch_stop)
            break;
        host_sync_acquire_locked(s);
        pthread_mutex_unlock(&s->mu);
        idle = watch_pass(ctx);
        pthread_mutex_lock(&s->mu);
        host_sync_release_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Whether a recovery can pull this process in: another member of one of
 * its communicators can recover (a failed group, and with or without a
 * manager an erroneous, refused or expired call, docs/failures.md), so a
 * communicator of at least two members (host_comm_shadow_dispatch). A
 * context of one rank has none: the watcher would only wake it (10 times
 * a second while its calls run). */
static int recovery_possible(incoll_ctx_h ctx)
{
    for (incoll_comm_h c = ctx->comms; c; c = c->next)
        if (c->size >= 2)
            return 1;
    return 0;
}

/* Lock held: starts the watcher once, with the library's threads, from
 * the first call after which a recovery can pull this process in. */
static void watch_start(incoll_ctx_h ctx)
{
    struct host_sync *s = ctx->sync;
    int ret;
    if (s->has_watcher || !s->progress_thread || s->watch_stop ||
        !recovery_possible(ctx))
        return;
    s->has_watcher = 1; /* tried once */
    /* without it the watcher looks every WATCH_NS, idle or not */
    s->watch_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ret = pthread_create(&s->watcher, NULL, watch_main, ctx);
    if (ret != 0) {
        if (s->watch_fd >= 0)
            close(s->watch_fd);
        s->watch_fd = -1;
        s->has_watcher = 0;
        s->watch_stop = 1; /* not again */
        incoll_warn("requests: cannot start the recovery watcher: %s; a "
                    "member outside a call joins another's recovery at its "
                    "next call",
                    log_strerror(ret));
    }
}

/* Lock held: stops the watcher (gives the lock up while it ends). */
static void watch_end(incoll_ctx_h ctx)
{
    struct host_sync *s = ctx->sync;
    pthread_mutex_lock(&s->mu);
    s->watch_stop = 1;
    pthread_cond_signal(&s->watch_cv);
    if (!s->has_watcher) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->has_watcher = 0;
    host_sync_release_locked(s);
    pthread_mutex_unlock(&s->mu);
    if (s->watch_fd >= 0) {
        uint64_t one = 1;
        if (write(s->watch_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            incoll_debug("requests: watcher eventfd write: %s",
                         log_strerror(errno));
    }
    pthread_join(s->watcher, NULL);
    if (s->watch_fd >= 0)
        close(s->watch_fd);
    s->watch_fd = -1;
    pthread_mutex_lock(&s->mu);
    host_sync_retake_locked(s);
    pthread_mutex_unlock(&s->mu);
}

void host_enter_at(incoll_ctx_h ctx, incoll_comm_h comm, const char *file,
                   int line, const char *func)
{
    if (ctx == NULL || ctx->sync == NULL)
        return;
    host_lock_at(ctx, file, line, func);
    if (!ctx->sync->has_watcher)
        watch_start(ctx);
    advance_all(ctx);
    if (comm)
        drain(comm);
}

/* r, cleared, with a's collective and arguments. */
static void req_fill(incoll_req_h r, const host_req_args_t *a)
{
    memset(r, 0, sizeof(*r));
    r->comm = a->comm;
    r->kind = a->kind;
    r->sendbuf = a->sendbuf;
    r->recvbuf = a->recvbuf;
    r->count = a->count;
    r->dtype = a->dtype;
    r->op = a->op;
    r->root = a->root;
    r->algo =
        (unsigned)a->algo < INCOLL_ALGO_COUNT ? a->algo : INCOLL_ALGO_AUTO;
    r->threaded = a->threaded;
    r->chain = a->chain;
    r->tag = a->tag;
}

/* The bytes a member returning early from a's call keeps (what the
 * operation still needs of its buffers), or 0 when this member does not
 * return early from this call (it has a result to wait for, or the
 * arguments are not plainly valid: the blocking call then says why). */
static size_t early_bytes(const host_req_args_t *a, algo_coll_t *coll_p)
{
    incoll_comm_h c = a->comm;
    int root = c->rank == a->root;
    size_t ds, all;

    if (c->size < 2 || a->root < 0 || a->root >= c->size || a->count == 0 ||
        a->sendbuf == NULL || a->sendbuf == INCOLL_IN_PLACE)
        return 0;
    switch (a->kind) {
    case RQ_REDUCE:
        *coll_p = ALGO_COLL_REDUCE;
        if (root || (unsigned)a->dtype >= INCOLL_DTYPE_COUNT ||
            (unsigned)a->op >= INCOLL_OP_COUNT ||
            !incoll_op_valid(a->op, a->dtype))
            return 0;
        ds = incoll_dtype_size(a->dtype);
        return a->count <= SIZE_MAX / ds ? a->count * ds : 0;
    case RQ_GATHER:
        *coll_p = ALGO_COLL_GATHER;
        return root ? 0 : a->count;
    case RQ_BCAST:
        *coll_p = ALGO_COLL_BCAST;
        return root ? a->count : 0;
    case RQ_SCATTER:
        *coll_p = ALGO_COLL_SCATTER;
        if (!root || a->recvbuf == NULL ||
            a->count > SIZE_MAX / (size_t)c->size)
            return 0;
        all = a->count * (size_t)c->size;
        if (a->recvbuf != (void *)INCOLL_IN_PLACE &&
            (const char *)a->recvbuf < (const char *)a->sendbuf + all &&
            (const char *)a->sendbuf < (const char *)a->recvbuf + a->count)
            return 0; /* erroneous: the blocking call says so */
        return all;
    default:
        return 0;
    }
}

/*
 * Lock held: makes a's call return early when it can (see
 * host_enter_early): copies what the operation still needs into a slot
 * of comm's ring and queues the slot's request, for the communicator's
 * thread (a non-root's contribution sent first when it can:
 * host_req_ops_t.early_send). 1 when done; 0 when the call must run as
 * usual.
 */
static int early_post(const host_req_args_t *a)
{
    incoll_comm_h c = a->comm;
    algo_coll_t coll = ALGO_COLL_BCAST;
    size_t keep = early_bytes(a, &coll);
    struct host_req_queue *q;
    early_slot_t *e;
    incoll_req_h r;

    if (keep == 0 || keep > c->ctx->early_max ||
        !c->ctx->req_ops->early_ok(c, coll, a->count, a->op, a->dtype) ||
        (q = queue_of(c)) == NULL)
        return 0;
    /* Only the thread completes an operation its caller left. */
    if (!ensure_thread(c))
        return 0;
    e = &q->early[q->early_next % EARLY_RING];
    if (e->req.active) {
        /* EARLY_RING operations of comm are outstanding: the oldest must
         * complete before its slot is used again. */
        c->early_waits++;
        while (e->req.active)
            progress_wait(c->ctx, UINT64_MAX);
    }
    if (e->cap < keep) {
        void *p = realloc(e->buf, keep);
        if (p == NULL)
            return 0;
        e->buf = p;
        e->cap = keep;
    }
    memcpy(e->buf, a->sendbuf, keep);
    r = &e->req;
    req_fill(r, a);
    r->sendbuf = e->buf;
    r->algo = INCOLL_ALGO_AUTO;
    r->threaded = 1;
    r->early = 1;
    switch (a->kind) {
    case RQ_BCAST:
        r->recvbuf = e->buf; /* the root's data, which stays as it is */
        break;
    case RQ_SCATTER:
        /* The root's own block is its result now; the operation writes
         * the same bytes into the copy. */
        if (a->recvbuf != (void *)INCOLL_IN_PLACE)
            memcpy(a->recvbuf,
                   (const char *)a->sendbuf + (size_t)c->rank * a->count,
                   a->count);
        r->recvbuf = (void *)INCOLL_IN_PLACE;
        break;
    default:
        r->recvbuf = NULL; /* a non-root has no result */
        /* Nothing of the communicator's runs: the contribution leaves
         * now, from this thread, and the thread is left the rest (the
         * acknowledgement, resends, a recovery). */
        if (q->head == NULL && !q->serve && !q->serving &&
            c->ctx->req_ops->early_send)
            r->sent = c->ctx->req_ops->early_send(&(host_req_args_t){
                r->kind, c, r->sendbuf, NULL, r->count, r->dtype, r->op,
                r->root, r->algo, 1, NULL, 0});
        break;
    }
    q->early_next++;
    c->early_returns++;
    enqueue(r); /* cannot fail: the queue exists */
    return 1;
}

int host_enter_early(const host_req_args_t *a, incoll_status_t *status_p)
{
    incoll_ctx_h ctx = a->comm->ctx;
    if (ctx->sync == NULL)
        return 0;
    host_lock(ctx);
    advance_all(ctx);
    if (early_post(a)) {
        *status_p = INCOLL_OK;
        return 1;
    }
    drain(a->comm);
    return 0;
}

void host_req_finish_later(incoll_comm_h comm)
{
    struct host_req_queue *q;
    struct host_sync *s = comm->ctx->sync;
    /* Only from a caller holding the library lock (every public call):
     * the thread reads the linger under that lock alone. */
    if (s == NULL || !host_sync_held(s) || (q = queue_of(comm)) == NULL) {
        host_comm_finish_op(comm);
        return;
    }
    comm->linger = 1;
    comm->linger_due = host_now_ns() + LINGER_NS;
    if (!ensure_thread(comm)) {
        host_comm_finish_op(comm);
        return;
    }
    /* An idle thread asleep without a due time learns of this one; one
     * asleep until an earlier linger's due time wakes then and looks
     * again, so a broadcast after another costs it no wake. */
    pthread_mutex_lock(&s->mu);
    if (!q->idle_timed) {
        q->work_seq++;
        pthread_cond_signal(&q->work_cv);
    }
    pthread_mutex_unlock(&s->mu);
}

void host_req_drain(incoll_comm_h comm)
{
    host_enter(comm->ctx, comm);
    host_unlock(comm->ctx);
}

incoll_status_t host_early_take(incoll_comm_h comm, incoll_status_t status)
{
    if (comm->ctx->sync == NULL)
        return status;
    return early_take_error(comm, status);
}

incoll_status_t host_leave(incoll_comm_h comm, incoll_status_t status)
{
    status = host_early_take(comm, status);
    host_unlock(comm->ctx);
    return status;
}

void host_req_comm_fini(incoll_comm_h comm)
{
    struct host_req_queue *q = comm->rq;
    struct host_sync *s = comm->ctx->sync;
    if (q == NULL)
        return;
    drain(comm);
    if (comm->early_error != INCOLL_OK)
        incoll_warn("requests: communicator freed with the error of an "
                    "operation that returned early untaken: %s",
                    incoll_status_string(comm->early_error));
    for (int i = 0; i < EARLY_RING; i++)
        free(q->early[i].buf);
    if (q->has_thread) {
        q->stop = 1;
        (void)thread_wake(comm);
        pthread_mutex_lock(&s->mu);
        host_sync_release_locked(s);
        pthread_mutex_unlock(&s->mu);
        pthread_join(q->thread, NULL);
        pthread_mutex_lock(&s->mu);
        host_sync_retake_locked(s);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_cond_destroy(&q->work_cv);
    free(q);
    comm->rq = NULL;
}

void host_req_ctx_fini(incoll_ctx_h ctx)
{
    if (ctx->sync == NULL)
        return;
    host_lock(ctx);
    watch_end(ctx);
    for (incoll_comm_h c = ctx->comms; c; c = c->next)
        host_req_comm_fini(c);
    host_unlock(ctx);
}

/* Lock held: queues r on its communicator and starts what can start. */
static incoll_status_t enqueue(incoll_req_h r)
{
    incoll_comm_h comm = r->comm;
    struct host_req_queue *q = queue_of(comm);
    if (q == NULL)
        return INCOLL_ERR_NO_MEMORY;
    r->active = 1;
    r->done = 0;
    r->state = ST_QUEUED;
    r->next = NULL;
    if (q->tail)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
    advance(comm);
    return INCOLL_OK;
}

incoll_status_t host_req_post(const host_req_args_t *a, int persistent,
                              incoll_req_h *req_p)
{
    incoll_req_h r;
    incoll_status_t status = INCOLL_OK;

    if (a->comm == NULL || req_p == NULL)
        return INCOLL_ERR_INVALID_ARG;
    r = malloc(sizeof(*r));
    if (r == NULL)
        return INCOLL_ERR_NO_MEMORY;
    req_fill(r, a);
    r->persistent = persistent;
    r->done = 1; /* an inactive persistent request */
    host_enter(a->comm->ctx, NULL);
    if (!persistent)
        status = enqueue(r);
    host_unlock(a->comm->ctx);
    if (status != INCOLL_OK) {
        free(r);
        return status;
    }
    *req_p = r;
    return INCOLL_OK;
}

/* Lock held: r is done; hands back its status and releases it. */
static incoll_status_t reap(incoll_req_h r)
{
    incoll_status_t status = r->status;
    if (!r->persistent)
        free(r);
    return status;
}

INCOLL_API incoll_status_t incoll_req_test(incoll_req_h req, int *done_p)
{
    incoll_ctx_h ctx;
    incoll_status_t status = INCOLL_OK;

    if (req == NULL || done_p == NULL || req->detached)
        return INCOLL_ERR_INVALID_ARG;
    ctx = req->comm->ctx;
    host_enter(ctx, NULL);
    if (!req->done && advance_all(ctx) != UINT64_MAX) {
        host_ctx_progress(ctx, 0);
        advance_all(ctx);
    }
    *done_p = req->done;
    if (req->done)
        status = reap(req);
    host_unlock(ctx);
    return status;
}

INCOLL_API incoll_status_t incoll_progress(incoll_ctx_h ctx)
{
    if (ctx == NULL || ctx->sync == NULL)
        return INCOLL_ERR_INVALID_ARG;
    host_enter(ctx, NULL);
    if (advance_all(ctx) != UINT64_MAX) {
        host_ctx_progress(ctx, 0);
        advance_all(ctx);
    }
    host_unlock(ctx);
    return INCOLL_OK;
}

int host_req_done(incoll_req_h req)
{
    return __atomic_load_n(&req->done, __ATOMIC_ACQUIRE);
}

INCOLL_API int incoll_req_completed(incoll_req_h req)
{
    return req != NULL && host_req_done(req);
}

INCOLL_API incoll_status_t incoll_req_where(incoll_req_h req,
                                            incoll_where_t *where_p)
{
    incoll_ctx_h ctx;
    incoll_status_t status = INCOLL_OK;

    if (req == NULL || where_p == NULL || req->detached)
        return INCOLL_ERR_INVALID_ARG;
    ctx = req->comm->ctx;
    host_lock(ctx);
    if (req->done)
        host_where_fill(req->comm, req->where, where_p);
    else
        status = INCOLL_INPROGRESS;
    host_unlock(ctx);
    return status;
}

int host_req_wait_ns(incoll_req_h req, uint64_t ns, incoll_status_t *status_p)
{
    incoll_ctx_h ctx = req->comm->ctx;
    uint64_t until = ns == UINT64_MAX ? UINT64_MAX : host_now_ns() + ns;
    int done;

    host_enter(ctx, NULL);
    while (!req->done && host_now_ns() < until)
        progress_wait(ctx, until);
    done = req->done;
    if (done)
        *status_p = reap(req);
    host_unlock(ctx);
    return done;
}

INCOLL_API incoll_status_t incoll_req_wait_timeout(incoll_req_h req,
                                                   uint64_t timeout_ns)
{
    incoll_status_t status = INCOLL_ERR_INVALID_ARG;
    if (req == NULL || req->detached)
        return INCOLL_ERR_INVALID_ARG;
    if (timeout_ns == 0) {
        int done = 0;
        status = incoll_req_test(req, &done);
        return done || status != INCOLL_OK ? status : INCOLL_WAIT_TIMEOUT;
    }
    if (!host_req_wait_ns(req, timeout_ns, &status))
        return INCOLL_WAIT_TIMEOUT;
    return status;
}

void host_req_set_ops(incoll_ctx_h ctx, const host_req_ops_t *ops)
{
    ctx->req_ops = ops;
}

incoll_status_t host_req_wait(incoll_req_h req)
{
    incoll_status_t status = INCOLL_ERR_INVALID_ARG;
    if (req == NULL || req->detached)
        return INCOLL_ERR_INVALID_ARG;
    host_req_wait_ns(req, UINT64_MAX, &status);
    return status;
}

INCOLL_API incoll_status_t incoll_req_start(incoll_req_h req)
{
    incoll_ctx_h ctx;
    incoll_status_t status;

    if (req == NULL || !req->persistent || req->detached)
        return INCOLL_ERR_INVALID_ARG;
    ctx = req->comm->ctx;
    host_enter(ctx, NULL);
    status = req->active ? INCOLL_ERR_BUSY : enqueue(req);
    host_unlock(ctx);
    return status;
}

INCOLL_API incoll_status_t incoll_req_free(incoll_req_h req)
{
    incoll_ctx_h ctx;

    if (req == NULL || req->detached)
        return INCOLL_ERR_INVALID_ARG;
    ctx = req->comm->ctx;
    host_enter(ctx, NULL);
    if (req->persistent) {
        while (!req->done)
            progress_wait(ctx, UINT64_MAX);
        free(req);
    } else if (req->done) {
        free(req);
    } else {
        req->detached = 1; /* complete() frees it */
    }
    host_unlock(ctx);
    return INCOLL_OK;
}

INCOLL_API incoll_status_t incoll_req_wait(incoll_req_h req)
{
    return host_req_wait(req);
}
