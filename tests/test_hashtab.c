/*
 * The hash table of src/common/hashtab.h against a plain array: inserts,
 * lookups, deletions (with runs that wrap around the end of the slots and
 * keys that all collide), and growing by moving the records.
 */
#include "test.h"

#include "common/hashtab.h"

#include <stdint.h>

typedef struct {
    int64_t key; /* -1: empty */
    int value;
} rec_t;

static int collide; /* every key hashes alike */

static uint64_t rec_hash(const void *rec, const void *arg)
{
    (void)arg;
    return collide ? 7 : hashtab_mix((uint64_t)((const rec_t *)rec)->key);
}

static int rec_empty(const void *rec)
{
    return ((const rec_t *)rec)->key < 0;
}

static void rec_clear(void *rec)
{
    ((rec_t *)rec)->key = -1;
}

static int rec_eq(const void *rec, const void *key)
{
    return ((const rec_t *)rec)->key == *(const int64_t *)key;
}

static uint64_t key_hash(int64_t key)
{
    rec_t r = {.key = key};
    return rec_hash(&r, NULL);
}

/* Grows t to twice its slots, moving every record. */
static int grow(hashtab_t *t)
{
    uint32_t oldcap = t->cap, cap = oldcap ? oldcap * 2 : 8;
    rec_t *slots = malloc(cap * sizeof(*slots)), *old;
    if (slots == NULL)
        return -1;
    old = hashtab_swap(t, slots, cap);
    for (uint32_t i = 0; i < oldcap; i++)
        if (old[i].key >= 0)
            hashtab_put(t, &old[i]);
    free(old);
    return 0;
}

static int run(int n, uint32_t seed)
{
    hashtab_t t = {.esz = sizeof(rec_t),
                   .hash = rec_hash,
                   .empty = rec_empty,
                   .clear = rec_clear};
    char *in = calloc((size_t)n * 4, 1);
    uint32_t x = seed;

    CHECK(in != NULL);
    CHECK(hashtab_find(&t, key_hash(1), rec_eq, &(int64_t){1}) == NULL);
    for (int step = 0; step < n * 8; step++) {
        int64_t key;
        rec_t *r;
        x = x * 1103515245u + 12345u;
        key = (int64_t)((x >> 8) % (uint32_t)(n * 4));
        r = hashtab_find(&t, key_hash(key), rec_eq, &key);
        CHECK_MSG((r != NULL) == (in[key] != 0), "key %lld: found %d, in %d",
                  (long long)key, r != NULL, in[key]);
        if (r) {
            CHECK(r->value == (int)key * 3);
            if (x & 0x10000) {
                hashtab_delete(&t, r);
                in[key] = 0;
            }
            continue;
        }
        if (hashtab_full(&t))
            CHECK(grow(&t) == 0);
        r = hashtab_slot(&t, key_hash(key), rec_eq, &key);
        CHECK(r != NULL && r->key < 0);
        r->key = key;
        r->value = (int)key * 3;
        hashtab_added(&t);
        in[key] = 1;
    }
    {
        uint32_t count = 0;
        for (int64_t k = 0; k < n * 4; k++) {
            rec_t *r = hashtab_find(&t, key_hash(k), rec_eq, &k);
            CHECK_MSG((r != NULL) == (in[k] != 0), "key %lld at the end",
                      (long long)k);
            count += in[k];
        }
        CHECK_EQ_INT((int)t.n, (int)count);
        CHECK(t.n * 2 <= t.cap);
    }
    free(t.slots);
    free(in);
    return TEST_PASSED;
}

TEST(hashtab_against_array, TEST_UNIT)
{
    collide = 0;
    CHECK(run(20000, 1) == TEST_PASSED);
    CHECK(run(50, 7) == TEST_PASSED);
    /* All keys in one run: deletions shift it, wrapping round the end. */
    collide = 1;
    CHECK(run(300, 3) == TEST_PASSED);
    collide = 0;
    return TEST_PASSED;
}
