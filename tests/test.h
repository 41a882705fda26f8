/*
 * The test runner: tests register themselves with TEST(name, kind); the
 * runner (tests/runner.c) runs them in name order, prints PASS/FAIL/SKIP per
 * test and ends with "N passed, N failed, N skipped". A test skips only
 * when an optional package it needs is missing (or the CPU lacks what it
 * tests), saying which; a feature of this tree that breaks is a FAIL.
 *
 * kind: TEST_UNIT (pure, fast, also run under ASan/UBSan) or TEST_INTEG
 * (starts daemons or processes, needs build/bin). With -j 2 (`make test`)
 * the integration tests of the families that mostly wait (tests/runner.c,
 * shared_families: early_, hier_, integ_) run two at a time: such a test
 * takes its ports from the kernel and its fabric, namespaces and files
 * under names of its own, and counts nothing that a test beside it could
 * change (alone_words there names those that run alone).
 */
#ifndef INCOLL_TEST_H
#define INCOLL_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TEST_UNIT = 1, TEST_INTEG = 2 };

typedef int (*test_fn_t)(void);

void test_register(const char *name, int kind, test_fn_t fn);
/* Marks the running test skipped with a reason; return TEST_SKIPPED after. */
int test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Directory of the built binaries (build/bin), for integration tests. */
const char *test_bindir(void);
/* A fresh temporary directory for this test, removed when it passes. */
const char *test_tmpdir(void);
/* The source tree: the directory above test_bindir()'s parent (build/bin
 * -> .), as an absolute path; "" if that has no README.md. */
const char *test_srcdir(void);
/*
 * The first line of the source tree's file path (e.g. "README.md") that
 * starts with prefix, without its newline, into buf. Returns 0, or -1 when
 * there is none or it does not fit (tests that run what the docs say).
 */
int test_doc_line(const char *path, const char *prefix, char *buf, size_t len);

#define TEST_PASSED 0
#define TEST_FAILED 1
#define TEST_SKIPPED 2

/*
 * Registers a test. Each runs in a forked child with a time limit: by
 * default TEST_LIMIT_UNIT_S for unit tests and TEST_LIMIT_INTEG_S for
 * integration tests; TEST_LIMIT() gives a test its own (seconds), for
 * the few that need longer or should fail sooner. INCOLL_TEST_LIMIT_S
 * overrides every limit.
 */
#define TEST_LIMIT_UNIT_S 120
#define TEST_LIMIT_INTEG_S 300
void test_register_limit(const char *name, int kind, test_fn_t fn, int limit_s);
/* The tests registered so far, and whether one of them is name (the
 * runner's own tests). */
int test_count(void);
int test_is_registered(const char *name);

#define TEST_LIMIT(name, kind, limit_s)                                        \
    static int test_##name(void);                                              \
    __attribute__((constructor)) static void test_reg_##name(void)             \
    {                                                                          \
        test_register_limit(#name, kind, test_##name, limit_s);                \
    }                                                                          \
    static int test_##name(void)

#define TEST(name, kind) TEST_LIMIT(name, kind, 0)

/* Each check fails the current test with file, line and the expression;
 * they differ only in what they do after reporting: return
 * TEST_FAILED from the test, or go to a label for a test that must undo
 * what it set up (a fabric's daemons) when a check fails. */
#define CHECK_FAILED_(text, action)                                            \
    do {                                                                       \
        fprintf(stderr, "    %s:%d: check failed: %s\n", __FILE__, __LINE__,   \
                text);                                                         \
        action;                                                                \
    } while (0)

#define CHECK_FAILED_MSG_(text, action, ...)                                   \
    do {                                                                       \
        fprintf(stderr, "    %s:%d: check failed: %s: ", __FILE__, __LINE__,   \
                text);                                                         \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        action;                                                                \
    } while (0)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            CHECK_FAILED_(#cond, return TEST_FAILED);                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond))                                                           \
            CHECK_FAILED_MSG_(#cond, return TEST_FAILED, __VA_ARGS__);         \
    } while (0)

#define CHECK_OR(label, cond)                                                  \
    do {                                                                       \
        if (!(cond))                                                           \
            CHECK_FAILED_(#cond, goto label);                                  \
    } while (0)

#define CHECK_MSG_OR(label, cond, ...)                                         \
    do {                                                                       \
        if (!(cond))                                                           \
            CHECK_FAILED_MSG_(#cond, goto label, __VA_ARGS__);                 \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                     \
    do {                                                                       \
        long long va_ = (long long)(a), vb_ = (long long)(b);                  \
        if (va_ != vb_) {                                                      \
            fprintf(stderr, "    %s:%d: %s == %s failed: %lld != %lld\n",      \
                    __FILE__, __LINE__, #a, #b, va_, vb_);                     \
            return TEST_FAILED;                                                \
        }                                                                      \
    } while (0)

/* Prints a failure line with file and line and returns -1 from a helper
 * (CHECK returns TEST_FAILED from a test function). */
#define FAILF(...)                                                             \
    do {                                                                       \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);                    \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        return -1;                                                             \
    } while (0)

#endif
