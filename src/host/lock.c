/*
 * The library lock of a context, its wake-ups and the poll that gives it
 * up while blocked (see lock.h).
 */
#include "host/lock.h"

#include "host/host.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int host_sync_held(const struct host_sync *s)
{
    return s->owned && pthread_equal(s->owner, pthread_self());
}

static _Thread_local uint64_t wakeups;
static _Thread_local int in_watcher; /* the thread is the watcher */
static uint64_t wakeups_all; /* every thread's, for the manager's report */

static void woke(void)
{
    wakeups++;
    __atomic_fetch_add(&wakeups_all, 1, __ATOMIC_RELAXED);
}

void host_wakeup_note(void)
{
    woke();
}

uint64_t host_wakeups(void)
{
    return wakeups;
}

uint64_t host_wakeups_all(void)
{
    return __atomic_load_n(&wakeups_all, __ATOMIC_RELAXED);
}

/* Where the calling thread took the lock it holds (a thread holds one
 * context's lock at a time): what a nested acquisition reports. */
static _Thread_local const char *held_file, *held_func;
static _Thread_local int held_line;

/* With s->mu held: the calling thread takes a lock it already holds.
 * The lock is not recursive, so this would wait for itself: says where
 * both acquisitions are and aborts, so that a nesting fails its test
 * rather than hanging. */
static void nested(const char *file, int line, const char *func)
{
    incoll_error("lock: the library lock is taken at %s:%d (%s) by the "
                 "thread that holds it since %s:%d (%s): a call made inside "
                 "another must use the _locked service calls; aborting",
                 file, line, func, held_file ? held_file : "?", held_line,
                 held_func ? held_func : "?");
    abort();
}

/* With s->mu held. First come, first served: a thread that calls
 * incoll_req_test in a loop must not keep the request thread, back from
 * poll with packets, from taking the lock. */
static void acquire(struct host_sync *s)
{
    uint64_t ticket = s->next_ticket++;
    while (s->owned || s->serving != ticket) {
        pthread_cond_wait(&s->free_cv, &s->mu);
        woke();
    }
    s->serving++;
    s->owned = 1;
    s->owner = pthread_self();
}

void host_sync_acquire_at(struct host_sync *s, const char *file, int line,
                          const char *func)
{
    if (host_sync_held(s))
        nested(file, line, func);
    acquire(s);
    held_file = file;
    held_line = line;
    held_func = func;
}

/* With s->mu held and the lock ours: gives it up. */
void host_sync_release_locked(struct host_sync *s)
{
    s->owned = 0;
    pthread_cond_broadcast(&s->free_cv);
}

void host_sync_retake_locked(struct host_sync *s)
{
    acquire(s);
}

/* With s->mu held and the lock ours: gives up the lock and the outer
 * lock (the caller's outer lock; in that order, the reverse of taking them). */
void host_sync_release_for_wait(struct host_sync *s)
{
    host_sync_release_locked(s);
    if (s->hook_release) {
        pthread_mutex_unlock(&s->mu);
        s->hook_release(s->hook_arg);
        pthread_mutex_lock(&s->mu);
    }
}

/* With s->mu held: takes the outer lock, then ours, back (where the
 * thread took it first stays what a nesting reports). */
void host_sync_reacquire_after_wait(struct host_sync *s)
{
    if (s->hook_reacquire) {
        pthread_mutex_unlock(&s->mu);
        s->hook_reacquire(s->hook_arg);
        pthread_mutex_lock(&s->mu);
    }
    acquire(s);
}

/* With s->mu held and the lock ours: sleeps until an event or deadline_ns
 * (UINT64_MAX: none), without the lock. */
static void wait_event_locked(struct host_sync *s, uint64_t deadline_ns)
{
    uint64_t seq = s->ev_seq;
    host_sync_release_for_wait(s);
    /* An event while the outer lock was given up is not missed. */
    if (s->ev_seq == seq) {
        if (deadline_ns == UINT64_MAX) {
            pthread_cond_wait(&s->ev_cv, &s->mu);
        } else {
            struct timespec ts = {(time_t)(deadline_ns / 1000000000ull),
                                  (long)(deadline_ns % 1000000000ull)};
            pthread_cond_timedwait(&s->ev_cv, &s->mu, &ts);
        }
        woke();
    }
    host_sync_reacquire_after_wait(s);
}

/* The calling thread gives back a lock it does not hold: a call's lock
 * and unlock do not pair up. */
static void not_held(const char *file, int line, const char *func)
{
    incoll_error("lock: the library lock is given back at %s:%d (%s) by a "
                 "thread that does not hold it; aborting",
                 file, line, func);
    abort();
}

int host_block_begin(incoll_ctx_h ctx)
{
    struct host_sync *s = ctx ? ctx->sync : NULL;
    int held;
    if (s == NULL)
        return 0;
    pthread_mutex_lock(&s->mu);
    held = host_sync_held(s);
    if (held)
        host_sync_release_for_wait(s);
    pthread_mutex_unlock(&s->mu);
    return held;
}

void host_block_end(incoll_ctx_h ctx, int given)
{
    struct host_sync *s = ctx ? ctx->sync : NULL;
    if (s == NULL || !given)
        return;
    pthread_mutex_lock(&s->mu);
    host_sync_reacquire_after_wait(s);
    pthread_mutex_unlock(&s->mu);
}

int host_lock_held(incoll_ctx_h ctx)
{
    struct host_sync *s = ctx ? ctx->sync : NULL;
    int held;
    if (s == NULL)
        return 0;
    pthread_mutex_lock(&s->mu);
    held = host_sync_held(s);
    pthread_mutex_unlock(&s->mu);
    return held;
}

void host_lock_at(incoll_ctx_h ctx, const char *file, int line,
                  const char *func)
{
    struct host_sync *s = ctx ? ctx->sync : NULL;
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    host_sync_acquire_at(s, file, line, func);
    pthread_mutex_unlock(&s->mu);
}

void host_unlock_at(incoll_ctx_h ctx, const char *file, int line,
                    const char *func)
{
    struct host_sync *s = ctx ? ctx->sync : NULL;
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    if (!host_sync_held(s))
        not_held(file, line, func);
    host_sync_release_locked(s);
    pthread_mutex_unlock(&s->mu);
}

/* Sleeps (lock given up) until an event or deadline_ns. */
void host_sync_wait_event(struct host_sync *s, uint64_t deadline_ns)
{
    pthread_mutex_lock(&s->mu);
    wait_event_locked(s, deadline_ns);
    pthread_mutex_unlock(&s->mu);
}

void host_sync_kick(incoll_ctx_h ctx)
{
    struct host_sync *s = ctx ? ctx->sync : NULL;
    int poke;
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->ev_seq++;
    pthread_cond_broadcast(&s->ev_cv);
    poke = s->polling;
    pthread_mutex_unlock(&s->mu);
    if (poke) {
        uint64_t one = 1;
        if (write(s->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            incoll_debug("sync: eventfd write: %s", log_strerror(errno));
    }
}

static int counted_ppoll(struct pollfd *pfd, int n, const struct timespec *tsp)
{
    int ret = ppoll(pfd, (nfds_t)n, tsp, NULL);
    if (tsp == NULL || tsp->tv_sec || tsp->tv_nsec)
        woke(); /* it may have slept (a zero timeout only looks) */
    return ret;
}

int host_sync_ppoll(incoll_ctx_h ctx, struct pollfd *pfd, int n,
                    const struct timespec *tsp)
{
    struct host_sync *s = ctx->sync;
    struct pollfd all[8];
    int ret;

    if (s == NULL || n > 7)
        return counted_ppoll(pfd, n, tsp);
    if (in_watcher) /* never blocks, gives nothing up, counts nothing */
        return poll(pfd, (nfds_t)n, 0);
    pthread_mutex_lock(&s->mu);
    if (!host_sync_held(s)) {
        /* Called from outside the public functions (a benchmark driving
         * the loop itself): nothing to give up. */
        pthread_mutex_unlock(&s->mu);
        return counted_ppoll(pfd, n, tsp);
    }
    if (s->polling) {
        uint64_t until = UINT64_MAX;
        if (tsp)
            until = now_ns() + (uint64_t)tsp->tv_sec * 1000000000ull +
                    (uint64_t)tsp->tv_nsec;
        wait_event_locked(s, until);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++)
            pfd[i].revents = 0;
        return 0;
    }
    s->polling = 1;
    host_sync_release_for_wait(s);
    pthread_mutex_unlock(&s->mu);

    memcpy(all, pfd, (size_t)n * sizeof(*pfd));
    all[n].fd = s->wakefd;
    all[n].events = POLLIN;
    all[n].revents = 0;
    ret = counted_ppoll(all, n + 1, tsp);
    if (ret > 0 && (all[n].revents & POLLIN)) {
        uint64_t v;
        if (read(s->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
            incoll_debug("sync: eventfd read: %s", log_strerror(errno));
        ret--;
    }
    for (int i = 0; i < n; i++)
        pfd[i].revents = all[i].revents;

    pthread_mutex_lock(&s->mu);
    s->polling = 0;
    /* Those asleep look again once we have dispatched (they need the lock
     * for that, which we hold until our next wait). */
    s->ev_seq++;
    pthread_cond_broadcast(&s->ev_cv);
    host_sync_reacquire_after_wait(s);
    pthread_mutex_unlock(&s->mu);
    return ret;
}

incoll_status_t host_sync_create(incoll_ctx_h ctx)
{
    struct host_sync *s = calloc(1, sizeof(*s));
    pthread_condattr_t ca;

    if (s == NULL)
        return INCOLL_ERR_NO_MEMORY;
    s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wakefd < 0) {
        incoll_error("init: eventfd: %s", log_strerror(errno));
        free(s);
        return INCOLL_ERR_IO;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->free_cv, NULL);
    pthread_cond_init(&s->ev_cv, &ca);
    pthread_cond_init(&s->watch_cv, &ca);
    pthread_condattr_destroy(&ca);
    s->progress_thread = ctx->progress_thread;
    s->hook_release = ctx->outer_lock.release;
    s->hook_reacquire = ctx->outer_lock.reacquire;
    s->hook_arg = ctx->outer_lock.arg;
    ctx->sync = s;
    return INCOLL_OK;
}

void host_sync_destroy(incoll_ctx_h ctx)
{
    struct host_sync *s = ctx->sync;
    if (s == NULL)
        return;
    close(s->wakefd);
    pthread_cond_destroy(&s->watch_cv);
    pthread_cond_destroy(&s->ev_cv);
    pthread_cond_destroy(&s->free_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    ctx->sync = NULL;
}

void host_sync_mark_watcher(void)
{
    in_watcher = 1;
}
