#include "common/hashtab.h"

#include <string.h>

#define REC(t, i) ((char *)(t)->slots + (size_t)(i) * (t)->esz)

uint64_t hashtab_mix(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ull;
    key ^= key >> 33;
    return key;
}

uint64_t hashtab_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s)
        h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

void *hashtab_slot(const hashtab_t *t, uint64_t h,
                   int (*eq)(const void *rec, const void *key), const void *key)
{
    uint32_t mask = t->cap - 1;
    if (t->cap == 0)
        return NULL;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        void *rec = REC(t, i);
        if (t->empty(rec) || eq(rec, key))
            return rec;
    }
}

void *hashtab_find(const hashtab_t *t, uint64_t h,
                   int (*eq)(const void *rec, const void *key), const void *key)
{
    void *rec = hashtab_slot(t, h, eq, key);
    return rec && !t->empty(rec) ? rec : NULL;
}

void hashtab_added(hashtab_t *t)
{
    t->n++;
}

int hashtab_full(const hashtab_t *t)
{
    return ((uint64_t)t->n + 1) * 2 > t->cap;
}

void hashtab_delete(hashtab_t *t, void *rec)
{
    uint32_t mask = t->cap - 1;
    uint32_t i = (uint32_t)(((char *)rec - (char *)t->slots) / t->esz), j = i;

    t->clear(REC(t, i));
    t->n--;
    for (;;) {
        uint32_t k;
        j = (j + 1) & mask;
        if (t->empty(REC(t, j)))
            return;
        k = (uint32_t)t->hash(REC(t, j), t->arg) & mask;
        /* j's record stays when its home k lies cyclically in (i, j]. */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        memcpy(REC(t, i), REC(t, j), t->esz);
        t->clear(REC(t, j));
        i = j;
    }
}

void *hashtab_put(hashtab_t *t, const void *rec)
{
    uint32_t mask = t->cap - 1;
    uint32_t i = (uint32_t)t->hash(rec, t->arg) & mask;
    while (!t->empty(REC(t, i)))
        i = (i + 1) & mask;
    memcpy(REC(t, i), rec, t->esz);
    t->n++;
    return REC(t, i);
}

void *hashtab_swap(hashtab_t *t, void *slots, uint32_t cap)
{
    void *old = t->slots;
    t->slots = slots;
    t->cap = cap;
    t->n = 0;
    for (uint32_t i = 0; i < cap; i++)
        t->clear(REC(t, i));
    return old;
}
