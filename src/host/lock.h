/*
 * The library lock of a context (src/host/lock.c), at the bottom of
 * src/host: every file above takes it, and it calls nothing above.
 *
 * One lock per context guards everything the context
 * owns (its socket, its communicators' engines, the manager link, the
 * requests). It is not recursive: a call made inside another, with the
 * lock held, uses the _locked service calls (service.h), and a thread
 * that takes the lock it holds is told where it took it first and
 * aborts (a nesting fails its test; it never hangs). A thread gives it
 * up while it blocks in poll: so threads that run
 * collectives on different communicators take turns between packets and
 * never wait for each other's collectives. Of the threads waiting for the
 * network one polls the socket; the others sleep on a condition variable
 * until that one has dispatched what came in (every packet is handed to
 * its communicator's engine whoever reads it) or until their own deadline.
 *
 * The request threads (req.c) sleep on its conditions too, which is why
 * struct host_sync is declared here whole.
 */
#ifndef INCOLL_HOST_LOCK_H
#define INCOLL_HOST_LOCK_H

#include "incoll.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

struct host_sync {
    pthread_mutex_t mu;     /* guards the fields below */
    pthread_cond_t free_cv; /* the library lock was given up */
    pthread_cond_t ev_cv;   /* packets dispatched, a request done or new */
    pthread_t owner;
    int owned;
    uint64_t next_ticket; /* threads take the lock in the order they came */
    uint64_t serving;
    uint64_t ev_seq;              /* counts ev_cv broadcasts */
    void (*hook_release)(void *); /* the caller's outer lock
                                     (incoll_init_params_t.outer_lock) */
    void (*hook_reacquire)(void *);
    void *hook_arg;
    int polling;         /* a thread is blocked in ppoll on the socket */
    int wakefd;          /* eventfd in the poller's set (host_sync_kick) */
    int progress_thread; /* INCOLL_PROGRESS_THREAD */
    /* With progress_thread: a thread that looks for another member's
     * recovery that this process must join while no call of it runs in
     * the library (watch_main, src/host/req.c): it sleeps until a
     * datagram comes while the library is idle, and looks every WATCH_NS
     * while calls run or a recovery is pending. watch_fd (an eventfd, -1
     * none) wakes it to stop. */
    pthread_t watcher;
    int has_watcher;
    int watch_stop;
    int watch_fd;
    pthread_cond_t watch_cv;
};

/* Makes ctx->sync (incoll_init); INCOLL_ERR_NO_MEMORY or INCOLL_ERR_IO. */
incoll_status_t host_sync_create(incoll_ctx_h ctx);
/* Frees ctx->sync, last. */
void host_sync_destroy(incoll_ctx_h ctx);

/* Takes and gives back the library lock. A NULL ctx or one without sync
 * is a no-op. Taking it while holding it, or giving it back without
 * holding it, says so (the places of both acquisitions) and aborts. */
void host_lock_at(incoll_ctx_h ctx, const char *file, int line,
                  const char *func);
#define host_lock(ctx) host_lock_at((ctx), __FILE__, __LINE__, __func__)
void host_unlock_at(incoll_ctx_h ctx, const char *file, int line,
                    const char *func);
#define host_unlock(ctx) host_unlock_at((ctx), __FILE__, __LINE__, __func__)
/* 1 when the calling thread holds ctx's library lock. */
int host_lock_held(incoll_ctx_h ctx);
/* Gives the lock up (and the caller's outer lock) while the calling
 * thread blocks outside the library (the hierarchy's waits on shared
 * memory); returns 1 when it did, 0 when the thread did not hold it (a
 * benchmark that runs an implementation itself, outside the public
 * calls). host_block_end() with that value takes both back. */
int host_block_begin(incoll_ctx_h ctx);
void host_block_end(incoll_ctx_h ctx, int given);

/*
 * ppoll() for the progress loop (host_ctx_progress): gives up the lock
 * while blocked. When another thread already polls the context's socket,
 * sleeps until it dispatched what it received or until tsp instead, and
 * returns 0 with no revents. Also wakes when host_sync_kick() is called.
 */
int host_sync_ppoll(incoll_ctx_h ctx, struct pollfd *pfd, int n,
                    const struct timespec *tsp);
/*
 * Wake-ups of the calling thread: how many times it came back from a
 * blocking wait of the library (ppoll on the context's socket, a wait on
 * the library lock's condition, a futex wait in node mode's shared
 * memory), whether woken or timed out. Per thread, so a rank's count is
 * that of the thread that runs its operations; never reset.
 */
void host_wakeup_note(void);
uint64_t host_wakeups(void);
/* The same, summed over every thread of the process. */
uint64_t host_wakeups_all(void);

/* Wakes the threads waiting in host_sync_ppoll() and the request threads:
 * packets were dispatched, a request completed or was queued. */
void host_sync_kick(incoll_ctx_h ctx);

/* For the request threads (req.c), with s->mu held unless said: */
/* 1 when the calling thread holds the lock. */
int host_sync_held(const struct host_sync *s);
/* Takes the lock (waiting for it in turn), as host_lock_at(). */
void host_sync_acquire_at(struct host_sync *s, const char *file, int line,
                          const char *func);
#define host_sync_acquire_locked(s)                                            \
    host_sync_acquire_at((s), __FILE__, __LINE__, __func__)
/* Gives it up. */
void host_sync_release_locked(struct host_sync *s);
/* Takes it back after host_sync_release_locked() (where the thread took
 * it first stays what a nesting reports). */
void host_sync_retake_locked(struct host_sync *s);
/* Gives up the lock and then the caller's outer lock. */
void host_sync_release_for_wait(struct host_sync *s);
/* Takes the outer lock, then ours, back. */
void host_sync_reacquire_after_wait(struct host_sync *s);
/* Without s->mu: sleeps (lock given up) until an event or deadline_ns. */
void host_sync_wait_event(struct host_sync *s, uint64_t deadline_ns);
/* The calling thread is the watcher of recoveries: its ppoll never
 * blocks, gives nothing up and counts nothing. */
void host_sync_mark_watcher(void);

#endif
