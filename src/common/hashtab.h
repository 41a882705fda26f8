#ifndef INCOLL_COMMON_HASHTAB_H
#define INCOLL_COMMON_HASHTAB_H

/*
 * One open-addressing hash table (linear probing, a power-of-two number of
 * slots) for records kept in the table itself: the caller's records are
 * the slots, so a lookup touches no other memory. The caller owns the
 * memory of the slots (it may charge a budget for them) and says how a
 * record is hashed and when a slot is empty; the table finds, inserts,
 * deletes (moving later records of the run back, so that no lookup stops
 * short) and moves records into new slots when the caller grows it.
 * Used by the topology parser's name index, the manager's rank and
 * source-address tables.
 */
#include <stddef.h>
#include <stdint.h>

typedef struct {
    void *slots;  /* cap records of esz bytes */
    size_t esz;   /* bytes per record */
    uint32_t cap; /* a power of two (0: no slots yet) */
    uint32_t n;   /* records in use */
    /* The hash of a record in use, and whether a slot is empty; clear
     * makes a slot empty. */
    uint64_t (*hash)(const void *rec, const void *arg);
    int (*empty)(const void *rec);
    void (*clear)(void *rec);
    const void *arg; /* passed to hash */
} hashtab_t;

/* Spreads an integer key over 64 bits (for hash callbacks). */
uint64_t hashtab_mix(uint64_t key);
/* FNV-1a of a NUL-terminated string. */
uint64_t hashtab_str(const char *s);

/* The record whose key eq() says is key (its hash h), or NULL. */
void *hashtab_find(const hashtab_t *t, uint64_t h,
                   int (*eq)(const void *rec, const void *key),
                   const void *key);

/* The record of key, or the empty slot where it would go (the caller
 * fills it and calls hashtab_added); NULL when the table has no slots.
 * The caller keeps the load under 1 (hashtab_full). */
void *hashtab_slot(const hashtab_t *t, uint64_t h,
                   int (*eq)(const void *rec, const void *key),
                   const void *key);
/* A slot hashtab_slot gave was filled. */
void hashtab_added(hashtab_t *t);

/* 1 when one more record would pass half the slots: time to grow. */
int hashtab_full(const hashtab_t *t);

/* Empties the slot of rec (a record of t), moving back the records after
 * it that would no longer be found. */
void hashtab_delete(hashtab_t *t, void *rec);

/* Puts a copy of rec (a record from elsewhere, e.g. the old slots while
 * growing) into an empty slot of t, which has room; returns it. */
void *hashtab_put(hashtab_t *t, const void *rec);

/* Switches t to the slots given (cap records, a power of two) with every
 * slot made empty, and returns the old ones for the caller to move with
 * hashtab_put (those it keeps) and free. */
void *hashtab_swap(hashtab_t *t, void *slots, uint32_t cap);

#endif
