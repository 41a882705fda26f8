/*
 * The benchmarks' rank-side helpers: see bench_rank.h.
 */
#include "bench_rank.h"

#include "common/netdev.h"
#include "host/counters.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int bench_rank_start(bench_rank_t *r, const bench_mpi_t *mpi, const char *who)
{
    memset(r, 0, sizeof(*r));
    r->mpi = mpi;
    if (mpi) {
        /* libincoll came up from MPI; the MPI layer finalizes it. */
        r->ctx = mpi->ctx;
        r->world = mpi->world;
    } else {
        incoll_status_t status = incoll_init(&r->ctx);
        if (status != INCOLL_OK) {
            fprintf(stderr, "incoll %s: init: %s\n", who,
                    incoll_status_string(status));
            return 1;
        }
        incoll_comm_world(r->ctx, &r->world);
    }
    incoll_comm_rank(r->world, &r->rank);
    incoll_comm_size(r->world, &r->size);
    return 0;
}

void bench_rank_stop(bench_rank_t *r)
{
    if (r->mpi == NULL && r->ctx)
        incoll_finalize(r->ctx);
    r->ctx = NULL;
}

/* ---- the barrier ------------------------------------------------------ */

#define BAR_BYTES 4096

struct bench_barrier {
    _Atomic uint32_t arrived;
    _Atomic uint32_t gen;
};

static void futex(_Atomic uint32_t *addr, int op, uint32_t val,
                  const struct timespec *ts)
{
    syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

void bench_barrier_wait(bench_barrier_t *b, int size, incoll_comm_h comm)
{
    uint32_t g = atomic_load(&b->gen);
    if (atomic_fetch_add(&b->arrived, 1) == (uint32_t)size - 1) {
        atomic_store(&b->arrived, 0);
        atomic_fetch_add(&b->gen, 1);
        futex(&b->gen, FUTEX_WAKE, INT32_MAX, NULL);
        return;
    }
    while (atomic_load(&b->gen) == g) {
        struct timespec ts = {0, 2000000};
        futex(&b->gen, FUTEX_WAIT, g, &ts);
        if (atomic_load(&b->gen) != g)
            break;
        host_counters_progress(comm, 0);
    }
}

bench_barrier_t *bench_barrier_open(const char *dir)
{
    char path[PATH_MAX + 32];
    void *p;
    int fd;
    snprintf(path, sizeof(path), "%s/barrier", dir);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    p = mmap(NULL, BAR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

void bench_barrier_close(bench_barrier_t *b)
{
    if (b)
        munmap(b, BAR_BYTES);
}

int bench_barrier_create(const char *dir)
{
    char path[PATH_MAX + 32];
    int fd, ret;
    snprintf(path, sizeof(path), "%s/barrier", dir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ret = ftruncate(fd, BAR_BYTES);
    close(fd);
    return ret;
}

/* ---- order, clocks, counters ------------------------------------------ */

int bench_run_order(int n, int it, int k)
{
    int perm[64];
    /* splitmix64 from the iteration: the same order on every rank */
    uint64_t x = (uint64_t)(uint32_t)it * 0x9e3779b97f4a7c15ull;

    if (n <= 1)
        return 0;
    if (n > (int)(sizeof(perm) / sizeof(perm[0])))
        return (int)(((unsigned)k + (unsigned)it) % (unsigned)n);
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        uint64_t z;
        int j, t;
        x += 0x9e3779b97f4a7c15ull;
        z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        j = (int)(z % (uint64_t)(i + 1));
        t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return perm[k];
}

uint64_t bench_cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
               1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
               1000ull;
}

int bench_netdev_tx(const char *dev, uint64_t *bytes_p, uint64_t *pkts_p)
{
    netdev_counters_t c;
    int ret = netdev_counters(dev, &c);

    if (ret == 0) {
        *bytes_p = c.tx_bytes;
        *pkts_p = c.tx_packets;
    }
    return ret;
}
