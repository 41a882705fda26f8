/*
 * The per-thread buffer of the collectives run as allreduces in the
 * network (src/host/colls.c): bounded between calls, given back when its
 * thread exits and by incoll_finalize's release, whatever size one call
 * needed.
 */
#include "test.h"

#include "host/colls.h"

#include <pthread.h>
#include <stdint.h>

#define BIG (4u << 20)
#define SMALL 4096u

struct emu_seen {
    int ok;
    size_t during, after_big, after_small;
};

static void *emu_thread(void *arg)
{
    struct emu_seen *s = arg;
    uint8_t *p = host_coll_emu_get(BIG, 1);
    if (p == NULL)
        return NULL;
    p[BIG - 1] = 1;
    s->during = host_coll_emu_held();
    host_coll_emu_done();
    s->after_big = host_coll_emu_held();
    if (host_coll_emu_get(SMALL, 0) == NULL)
        return NULL;
    host_coll_emu_done();
    s->after_small = host_coll_emu_held();
    s->ok = 1;
    return NULL; /* the thread's buffer must go with it */
}

TEST(colls_emu_buffer_bounded, TEST_UNIT)
{
    size_t base = host_coll_emu_held();
    struct emu_seen s = {0};
    pthread_t th;

    CHECK(pthread_create(&th, NULL, emu_thread, &s) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(s.ok);
    CHECK_MSG(s.during >= base + BIG, "%zu bytes held during a %u-byte call",
              s.during, BIG);
    CHECK_MSG(s.after_big == base, "%zu bytes kept after a %u-byte call",
              s.after_big - base, BIG);
    CHECK_MSG(s.after_small == base + SMALL,
              "%zu bytes kept after a %u-byte call", s.after_small - base,
              SMALL);
    CHECK_MSG(host_coll_emu_held() == base,
              "%zu bytes still held after the thread exited",
              host_coll_emu_held() - base);

    /* The calling thread's buffer: freed by the release of finalize. */
    CHECK(host_coll_emu_get(SMALL, 1) != NULL);
    CHECK(host_coll_emu_held() == base + SMALL);
    host_coll_emu_release();
    CHECK(host_coll_emu_held() == base);
    host_coll_emu_release(); /* twice is harmless */
    CHECK(host_coll_emu_held() == base);
    return TEST_PASSED;
}
