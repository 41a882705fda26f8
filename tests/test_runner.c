/*
 * The test runner itself: it keeps every test registered, however many
 * (a fixed table once dropped those past 512 without a word). The test
 * runs in its own child, so the names it registers go with it.
 */
#include "test.h"

static int never_run(void)
{
    return TEST_FAILED;
}

TEST(runner_keeps_every_test, TEST_UNIT)
{
    enum { EXTRA = 1500 };
    static char names[EXTRA][32];
    int before = test_count();

    CHECK(before > 0);
    CHECK(test_is_registered("runner_keeps_every_test"));
    for (int i = 0; i < EXTRA; i++) {
        snprintf(names[i], sizeof(names[i]), "runner_extra_%d", i);
        test_register(names[i], TEST_UNIT, never_run);
    }
    CHECK_MSG(test_count() == before + EXTRA,
              "%d tests registered after adding %d to %d", test_count(), EXTRA,
              before);
    CHECK(test_is_registered("runner_extra_0"));
    CHECK(test_is_registered("runner_extra_1499"));
    CHECK(test_is_registered("runner_keeps_every_test"));
    return TEST_PASSED;
}
