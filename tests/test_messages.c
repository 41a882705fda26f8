/*
 * What a user gets back when a call or a setting is wrong: the right
 * status and a message that names the cause (no crash, no misleading
 * text). Each case once came out wrong: a crash on INCOLL_IN_PLACE as an
 * allreduce's recvbuf, overlapping buffers taken by one collective and
 * refused by another, "out of memory" for a broadcast of SIZE_MAX bytes,
 * "INCOLL_RANK=0 is not in 0..-2" without INCOLL_SIZE, "using the default"
 * before init failed on INCOLL_LOG_LEVEL, a job id with a control
 * character that passed init and then failed at the manager (a
 * fabric.conf whose levels= did not match its tree: test_kvline.c),
 * `incoll run` going on
 * with a bad INCOLL_GEN that every rank then refused, and the manager's
 * "with 0 hosts".
 */
#include "integ.h"

#include "common/fabric_conf.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fabric.conf of one host (no daemon needed for a world of one rank)
 * in the test's directory; the environment set for a world of one rank
 * on it. */
static void one_host_fabric(void)
{
    char conf[PATH_MAX + 32];
    FILE *f;
    snprintf(conf, sizeof(conf), "%s/fabric.conf", test_tmpdir());
    f = fopen(conf, "w");
    if (f == NULL)
        return;
    fprintf(f, "fabric hosts=1 radix=2 levels=1 admin_key=0x1\n"
               "an name=l0 level=1 addr=127.0.0.1:9 parent=-\n"
               "host rank=0 leaf=l0 addr=127.0.0.1\n"
               "group id=1 key=0x5b98bc66794275c9 slots=8 payload=8192\n");
    fclose(f);
    setenv("INCOLL_FABRIC", test_tmpdir(), 1);
    setenv("INCOLL_RANK", "0", 1);
    setenv("INCOLL_SIZE", "1", 1);
    unsetenv("INCOLL_MGR");
    unsetenv("INCOLL_JOB");
    unsetenv("INCOLL_GEN");
}

static void env_clear(void)
{
    unsetenv("INCOLL_FABRIC");
    unsetenv("INCOLL_RANK");
    unsetenv("INCOLL_SIZE");
    unsetenv("INCOLL_JOB");
    unsetenv("INCOLL_LOG_LEVEL");
}

TEST(messages_init_settings, TEST_UNIT)
{
    char out[4096];

    one_host_fabric();
    /* The rank without the size: the size is what is missing. */
    unsetenv("INCOLL_SIZE");
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, NULL,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "INCOLL_SIZE is not set") != NULL &&
                  strstr(out, "..-") == NULL,
              "%s", out);
    setenv("INCOLL_SIZE", "1", 1);
    /* A bad log level fails init, saying so once, without claiming it
     * was taken as the default. */
    setenv("INCOLL_LOG_LEVEL", "loud", 1);
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, NULL,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "INCOLL_LOG_LEVEL='loud'") != NULL &&
                  strstr(out, "using the default") == NULL,
              "%s", out);
    unsetenv("INCOLL_LOG_LEVEL");
    /* A job id the manager would refuse is refused at init. */
    setenv("INCOLL_JOB", "job\001x", 1);
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, NULL,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "INCOLL_JOB has a control character") != NULL, "%s",
              out);
    unsetenv("INCOLL_JOB");
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, NULL,
                               out, sizeof(out)),
                 INCOLL_OK);
    env_clear();
    return TEST_PASSED;
}

/* Arguments: refused with INCOLL_ERR_INVALID_ARG, never a crash, and
 * overlapping buffers alike for every collective. */
TEST(messages_bad_arguments, TEST_UNIT)
{
    incoll_ctx_h ctx;
    incoll_comm_h w;
    int64_t buf[16] = {0};

    one_host_fabric();
    CHECK_EQ_INT(incoll_init(&ctx), INCOLL_OK);
    CHECK_EQ_INT(incoll_comm_world(ctx, &w), INCOLL_OK);
    /* INCOLL_IN_PLACE where only sendbuf may be. */
    CHECK_EQ_INT(incoll_allreduce(w, buf, (void *)INCOLL_IN_PLACE, 4,
                                  INCOLL_INT64, INCOLL_OP_SUM),
                 INCOLL_ERR_INVALID_ARG);
    CHECK_EQ_INT(incoll_reduce(w, buf, (void *)INCOLL_IN_PLACE, 4, INCOLL_INT64,
                               INCOLL_OP_SUM, 0),
                 INCOLL_ERR_INVALID_ARG);
    CHECK_EQ_INT(incoll_bcast(w, (void *)INCOLL_IN_PLACE, 8, 0),
                 INCOLL_ERR_INVALID_ARG);
    /* Overlap other than in place: refused by the allreduce as by the
     * reduce_scatter. */
    CHECK_EQ_INT(
        incoll_allreduce(w, buf, buf + 1, 4, INCOLL_INT64, INCOLL_OP_SUM),
        INCOLL_ERR_INVALID_ARG);
    CHECK_EQ_INT(
        incoll_reduce_scatter(w, buf, buf + 1, 4, INCOLL_INT64, INCOLL_OP_SUM),
        INCOLL_ERR_INVALID_ARG);
    CHECK_EQ_INT(incoll_allreduce(w, buf, buf, 4, INCOLL_INT64, INCOLL_OP_SUM),
                 INCOLL_OK); /* the same buffer: in place */
    /* A size no buffer has: an invalid argument, not "out of memory". */
    CHECK_EQ_INT(incoll_bcast(w, buf, SIZE_MAX, 0), INCOLL_ERR_INVALID_ARG);
    CHECK_EQ_INT(incoll_allgather(w, buf, buf + 8, SIZE_MAX),
                 INCOLL_ERR_INVALID_ARG);
    /* The communicator is still fine. */
    buf[0] = 7;
    CHECK_EQ_INT(incoll_allreduce(w, INCOLL_IN_PLACE, buf, 1, INCOLL_INT64,
                                  INCOLL_OP_SUM),
                 INCOLL_OK);
    CHECK_EQ_INT(buf[0], 7);
    incoll_finalize(ctx);
    env_clear();
    return TEST_PASSED;
}

/* `incoll run` refuses a bad INCOLL_GEN as the ranks would, at once; the
 * manager names a fat-tree without --hosts as one with a host on every
 * port. */
TEST(integ_messages_tools, TEST_INTEG)
{
    char *out = NULL;
    int st;

    if (access(test_bindir(), X_OK) != 0)
        return test_skip("%s not built", test_bindir());
    one_host_fabric();
    st = run_cmd(&out, 30,
                 "env INCOLL_GEN=abc '%s/incoll' run -n 1 --no-mgr "
                 "--fabric '%s' -- /bin/true",
                 test_bindir(), test_tmpdir());
    CHECK_MSG(st == 2 && strstr(out, "incoll run: INCOLL_GEN='abc'") != NULL &&
                  strstr(out, "using the default") == NULL,
              "exit %d: %s", st, out);
    free(out);
    out = NULL;
    st = run_cmd(&out, 30, "'%s/incoll-mgr' --radix 3 --levels 2",
                 test_bindir());
    CHECK_MSG(st != 0 && strstr(out, "with a host on every port") != NULL,
              "exit %d: %s", st, out);
    free(out);
    env_clear();
    return TEST_PASSED;
}
