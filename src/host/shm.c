/*
 * The intra-host shared-memory segment (see shm.h): layout, life, and the
 * futex waits with liveness checks.
 */
#include "host/shm.h"

#include "host/host.h"
#include "host/lock.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x68696572u /* "hier" */
/* Longest single futex wait: the liveness of the awaited member is
 * checked at least this often. */
#define SHM_SLICE_NS 50000000ull

/* One counter on a cache line of its own, with the number of members
 * asleep on it: a store wakes (a system call) only when someone sleeps. */
typedef struct {
    _Atomic uint32_t v;
    _Atomic uint32_t sleepers;
    char pad[56];
} shm_line_t;

typedef struct {
    uint32_t magic;
    uint32_t nlocal;
    uint32_t nbuf; /* pipeline buffers */
    uint64_t slot_bytes;
    uint64_t total; /* bytes of the whole mapping */
    _Atomic int32_t abort_status;
    pthread_mutex_t alive[HOST_SHM_MAX_LOCAL];
    shm_line_t posted[HOST_SHM_MAX_LOCAL];
    shm_line_t consumed[HOST_SHM_MAX_LOCAL];
    shm_line_t done;
    /* The newest segment every member has posted (host_shm_post): the
     * leader sleeps on it alone and is woken once per segment, by the
     * member that completes it. */
    shm_line_t arrived;
    shm_line_t aborted; /* 1 after an abort: its futex wakes nobody, the
                           others' are woken */
    /* The leader's packet of a one-packet allreduce (host_shm_pack). */
    _Alignas(64) uint8_t pack[HOST_SHM_PACK_BYTES];
} shm_hdr_t;

struct host_shm {
    shm_hdr_t *hdr;
    uint8_t *data;
    size_t map_len;
    int idx;
    uint64_t spin_ns;
};

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static size_t data_off(void)
{
    return align_up(sizeof(shm_hdr_t), 4096);
}

static size_t slot_stride(size_t slot_bytes)
{
    return align_up(slot_bytes ? slot_bytes : 1, 64);
}

static int futex(_Atomic uint32_t *addr, int op, uint32_t val,
                 const struct timespec *ts)
{
    return (int)syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static host_shm_t *shm_wrap(void *map, size_t len, int idx)
{
    host_shm_t *shm = calloc(1, sizeof(*shm));
    if (shm == NULL)
        return NULL;
    shm->hdr = map;
    shm->data = (uint8_t *)map + data_off();
    shm->map_len = len;
    shm->idx = idx;
    return shm;
}

incoll_status_t host_shm_create(const char *name, int nlocal, int nbuf,
                                size_t slot_bytes, host_shm_t **shm_p)
{
    size_t len;
    pthread_mutexattr_t ma;
    shm_hdr_t *hdr;
    host_shm_t *shm;
    void *map;
    int fd;

    if (nlocal < 2 || nlocal > HOST_SHM_MAX_LOCAL) {
        incoll_error("hier: %d ranks on one host; at most %d share a segment",
                     nlocal, HOST_SHM_MAX_LOCAL);
        return INCOLL_ERR_UNSUPPORTED;
    }
    if (nbuf < 2)
        nbuf = 2;
    len = data_off() +
          (size_t)nbuf * (size_t)(nlocal + 1) * slot_stride(slot_bytes);
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        incoll_error("hier: shm_open %s: %s", name, log_strerror(errno));
        return INCOLL_ERR_IO;
    }
    if (ftruncate(fd, (off_t)len) != 0) {
        incoll_error("hier: ftruncate %s to %zu bytes: %s", name, len,
                     log_strerror(errno));
        close(fd);
        shm_unlink(name);
        return INCOLL_ERR_NO_MEMORY;
    }
    map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        incoll_error("hier: mmap %s (%zu bytes): %s", name, len,
                     log_strerror(errno));
        shm_unlink(name);
        return INCOLL_ERR_NO_MEMORY;
    }
    hdr = map;
    hdr->nlocal = (uint32_t)nlocal;
    hdr->nbuf = (uint32_t)nbuf;
    hdr->slot_bytes = slot_bytes;
    hdr->total = len;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    for (int i = 0; i < nlocal; i++)
        pthread_mutex_init(&hdr->alive[i], &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_mutex_lock(&hdr->alive[0]);
    atomic_store(&hdr->magic, SHM_MAGIC);
    shm = shm_wrap(map, len, 0);
    if (shm == NULL) {
        munmap(map, len);
        shm_unlink(name);
        return INCOLL_ERR_NO_MEMORY;
    }
    *shm_p = shm;
    return INCOLL_OK;
}

incoll_status_t host_shm_attach(const char *name, int idx, host_shm_t **shm_p)
{
    struct stat st;
    shm_hdr_t *hdr;
    host_shm_t *shm;
    void *map;
    int fd, ret;

    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        incoll_error("hier: shm_open %s: %s", name, log_strerror(errno));
        return INCOLL_ERR_IO;
    }
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < data_off()) {
        incoll_error("hier: segment %s is too small", name);
        close(fd);
        return INCOLL_ERR_PROTOCOL;
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               0);
    close(fd);
    if (map == MAP_FAILED) {
        incoll_error("hier: mmap %s: %s", name, log_strerror(errno));
        return INCOLL_ERR_NO_MEMORY;
    }
    hdr = map;
    if (hdr->magic != SHM_MAGIC || idx < 1 || idx >= (int)hdr->nlocal ||
        hdr->total != (uint64_t)st.st_size) {
        incoll_error("hier: segment %s does not fit member %d", name, idx);
        munmap(map, (size_t)st.st_size);
        return INCOLL_ERR_PROTOCOL;
    }
    ret = pthread_mutex_lock(&hdr->alive[idx]);
    if (ret == EOWNERDEAD)
        pthread_mutex_consistent(&hdr->alive[idx]);
    shm = shm_wrap(map, (size_t)st.st_size, idx);
    if (shm == NULL) {
        pthread_mutex_unlock(&hdr->alive[idx]);
        munmap(map, (size_t)st.st_size);
        return INCOLL_ERR_NO_MEMORY;
    }
    *shm_p = shm;
    return INCOLL_OK;
}

void host_shm_unlink(const char *name)
{
    if (shm_unlink(name) != 0 && errno != ENOENT)
        incoll_warn("hier: shm_unlink %s: %s", name, log_strerror(errno));
}

void host_shm_detach(host_shm_t *shm)
{
    if (shm == NULL)
        return;
    pthread_mutex_unlock(&shm->hdr->alive[shm->idx]);
    munmap(shm->hdr, shm->map_len);
    free(shm);
}

void *host_shm_slot(host_shm_t *shm, int buf, int idx)
{
    size_t stride = slot_stride(shm->hdr->slot_bytes);
    size_t per_buf = (size_t)(shm->hdr->nlocal + 1) * stride;
    return shm->data + (size_t)buf * per_buf + (size_t)idx * stride;
}

void *host_shm_result(host_shm_t *shm, int buf)
{
    return host_shm_slot(shm, buf, (int)shm->hdr->nlocal);
}

int host_shm_nbuf(const host_shm_t *shm)
{
    return (int)shm->hdr->nbuf;
}

static shm_line_t *ctr_of(host_shm_t *shm, host_shm_ctr_t ctr, int idx)
{
    switch (ctr) {
    case HOST_SHM_POSTED:
        return &shm->hdr->posted[idx];
    case HOST_SHM_CONSUMED:
        return &shm->hdr->consumed[idx];
    case HOST_SHM_ARRIVED:
        return &shm->hdr->arrived;
    default:
        return &shm->hdr->done;
    }
}

void host_shm_set(host_shm_t *shm, host_shm_ctr_t ctr, int idx, uint32_t v)
{
    shm_line_t *c = ctr_of(shm, ctr, idx);
    /* Both sequentially consistent: either the sleeper sees v before it
     * sleeps, or we see it counted and wake it. */
    atomic_store(&c->v, v);
    if (atomic_load(&c->sleepers) != 0)
        futex(&c->v, FUTEX_WAKE, INT_MAX, NULL);
}

uint32_t host_shm_get(host_shm_t *shm, host_shm_ctr_t ctr, int idx)
{
    return atomic_load(&ctr_of(shm, ctr, idx)->v);
}

void *host_shm_pack(host_shm_t *shm)
{
    return shm->hdr->pack;
}

void host_shm_wake(host_shm_t *shm, _Atomic uint32_t *word)
{
    (void)shm;
    futex(word, FUTEX_WAKE, INT_MAX, NULL);
}

int host_shm_post(host_shm_t *shm, int idx, uint32_t v)
{
    shm_hdr_t *h = shm->hdr;
    uint32_t cur, low = v;

    /* Sequentially consistent store, then loads: of members posting at
     * once, the one whose store comes last sees every other's, so the
     * member completing a segment always raises arrived to it. */
    atomic_store(&h->posted[idx].v, v);
    for (uint32_t m = 1; m < h->nlocal; m++) {
        uint32_t p = atomic_load(&h->posted[m].v);
        if ((int32_t)(p - low) < 0)
            low = p; /* the slowest member: every one posted this far */
    }
    cur = atomic_load(&h->arrived.v);
    do {
        if ((int32_t)(cur - low) >= 0)
            return 0; /* nothing new complete, or raised already */
    } while (!atomic_compare_exchange_weak(&h->arrived.v, &cur, low));
    if (atomic_load(&h->arrived.sleepers) != 0)
        futex(&h->arrived.v, FUTEX_WAKE, INT_MAX, NULL);
    return (int32_t)(low - v) >= 0;
}

void host_shm_abort(host_shm_t *shm, incoll_status_t status)
{
    shm_hdr_t *h = shm->hdr;
    int32_t zero = 0;

    if (status == INCOLL_OK)
        status = INCOLL_ERR_GROUP_FAILED;
    atomic_compare_exchange_strong(&h->abort_status, &zero, (int32_t)status);
    atomic_store(&h->aborted.v, 1);
    /* Every counter anyone may wait on: they wake and see the abort. */
    for (uint32_t i = 0; i < h->nlocal; i++) {
        futex(&h->posted[i].v, FUTEX_WAKE, INT_MAX, NULL);
        futex(&h->consumed[i].v, FUTEX_WAKE, INT_MAX, NULL);
    }
    futex(&h->done.v, FUTEX_WAKE, INT_MAX, NULL);
    futex(&h->arrived.v, FUTEX_WAKE, INT_MAX, NULL);
}

incoll_status_t host_shm_aborted(const host_shm_t *shm)
{
    return (incoll_status_t)atomic_load(&((shm_hdr_t *)shm->hdr)->abort_status);
}

/* 1 when member idx is still attached (holds its liveness mutex). */
static int member_alive(host_shm_t *shm, int idx)
{
    pthread_mutex_t *m = &shm->hdr->alive[idx];
    int ret;

    if (idx == shm->idx)
        return 1;
    ret = pthread_mutex_trylock(m);
    if (ret == EBUSY)
        return 1;
    if (ret == EOWNERDEAD) {
        /* Keep it locked: later checks see EBUSY, but the abort below is
         * what everyone sees from now on. */
        pthread_mutex_consistent(m);
        return 0;
    }
    if (ret == 0)
        pthread_mutex_unlock(m); /* it detached: gone as well */
    return 0;
}

/* The first member (other than us) that is no longer attached, or -1. */
static int first_dead(host_shm_t *shm)
{
    for (int m = 1; m < (int)shm->hdr->nlocal; m++)
        if (!member_alive(shm, m))
            return m;
    return -1;
}

/* The first member that has not posted segment v - 1 yet (1 if none). */
static int first_behind(host_shm_t *shm, uint32_t v)
{
    for (int m = 1; m < (int)shm->hdr->nlocal; m++)
        if ((int32_t)(atomic_load(&shm->hdr->posted[m].v) - v) < 0)
            return m;
    return 1;
}

incoll_status_t host_shm_wait(host_shm_t *shm, host_shm_ctr_t ctr, int idx,
                              uint32_t v, uint64_t deadline_ns)
{
    shm_line_t *line = ctr_of(shm, ctr, idx);
    _Atomic uint32_t *c = &line->v;
    /* Whose death ends the wait: the leader's for done, every member's
     * for arrived. */
    int owner = ctr == HOST_SHM_DONE ? 0 : ctr == HOST_SHM_ARRIVED ? -1 : idx;
    uint64_t spin_until = shm->spin_ns ? host_now_ns() + shm->spin_ns : 0;

    for (;;) {
        uint32_t cur = atomic_load_explicit(c, memory_order_acquire);
        uint64_t now, wait;
        struct timespec ts;
        incoll_status_t status;
        int dead;

        if ((int32_t)(cur - v) >= 0)
            return INCOLL_OK;
        status = host_shm_aborted(shm);
        if (status != INCOLL_OK)
            return status;
        now = host_now_ns();
        if (spin_until && now < spin_until)
            continue; /* INCOLL_HIER_SPIN_US asked for it */
        dead = owner >= 0 ? (member_alive(shm, owner) ? -1 : owner)
                          : first_dead(shm);
        if (dead >= 0) {
            incoll_error("hier: local member %d of the segment died or left "
                         "in the middle of a collective",
                         dead);
            host_shm_abort(shm, INCOLL_ERR_GROUP_FAILED);
            return INCOLL_ERR_GROUP_FAILED;
        }
        if (now >= deadline_ns) {
            incoll_error("hier: local member %d made no progress before the "
                         "deadline (INCOLL_HIER_TIMEOUT_MS)",
                         owner >= 0 ? owner : first_behind(shm, v));
            host_shm_abort(shm, INCOLL_ERR_TIMEOUT);
            return INCOLL_ERR_TIMEOUT;
        }
        wait =
            deadline_ns - now < SHM_SLICE_NS ? deadline_ns - now : SHM_SLICE_NS;
        ts.tv_sec = (time_t)(wait / 1000000000ull);
        ts.tv_nsec = (long)(wait % 1000000000ull);
        atomic_fetch_add(&line->sleepers, 1);
        if (atomic_load(c) == cur) {
            futex(c, FUTEX_WAIT, cur, &ts);
            host_wakeup_note();
        }
        atomic_fetch_sub(&line->sleepers, 1);
    }
}

incoll_status_t host_shm_wait_word(host_shm_t *shm, _Atomic uint32_t *sleepers,
                                   _Atomic uint32_t *word, uint32_t v, int who,
                                   uint64_t deadline_ns)
{
    while (atomic_load(word) == v) {
        uint64_t now = host_now_ns(), wait;
        struct timespec ts;
        incoll_status_t status = host_shm_aborted(shm);

        if (status != INCOLL_OK)
            return status;
        if (who >= 0 && who < (int)shm->hdr->nlocal &&
            !member_alive(shm, who)) {
            incoll_error("hier: local member %d of the segment died or left "
                         "in the middle of a collective",
                         who);
            host_shm_abort(shm, INCOLL_ERR_GROUP_FAILED);
            return INCOLL_ERR_GROUP_FAILED;
        }
        if (now >= deadline_ns) {
            incoll_error("hier: local member %d made no progress before the "
                         "deadline (INCOLL_HIER_TIMEOUT_MS)",
                         who);
            host_shm_abort(shm, INCOLL_ERR_TIMEOUT);
            return INCOLL_ERR_TIMEOUT;
        }
        wait =
            deadline_ns - now < SHM_SLICE_NS ? deadline_ns - now : SHM_SLICE_NS;
        ts.tv_sec = (time_t)(wait / 1000000000ull);
        ts.tv_nsec = (long)(wait % 1000000000ull);
        atomic_fetch_add(sleepers, 1);
        if (atomic_load(word) == v) {
            futex(word, FUTEX_WAIT, v, &ts);
            host_wakeup_note();
        }
        atomic_fetch_sub(sleepers, 1);
    }
    return INCOLL_OK;
}

void host_shm_spin(host_shm_t *shm, uint64_t ns)
{
    shm->spin_ns = ns;
}
