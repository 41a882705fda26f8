/*
 * The MPI layer's selection table (src/common/tune.[ch]): the file
 * format, good and bad entries, the override setting, where a table comes
 * from, and the lookups the layer makes per call.
 */
#include "test.h"

#include "common/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

enum { ALLREDUCE = 0, REDUCE, BCAST, BARRIER, ALLGATHER, GATHER, SCATTER };
enum { BL = TUNE_FORM_BLOCKING, NB = TUNE_FORM_NB, PE = TUNE_FORM_PERSISTENT };

static tune_table_t t;

static int parse(const char *text, char *err, size_t len)
{
    tune_init(&t, "t.conf");
    return tune_parse_text(&t, text, "t.conf", err, len);
}

TEST(mpi_tune_format, TEST_UNIT)
{
    char err[512], line[256];
    int entry;

    CHECK(parse("# a comment\n"
                "shape hosts=8 radix=4 ppn=1   # measured on\n"
                "\n"
                "bcast:blocking 1K-8K mpi\n"
                "bcast 0-4K mpi ranks=2-4\n"
                "allgather:nb 64- mpi\n"
                "  scatter\t*\tmpi  \n"
                "reduce:persistent 100 mpi\n"
                "all 1M- inc\n"
                "allreduce * mpi ranks=16\n",
                err, sizeof(err)) == 0);
    CHECK_EQ_INT((int)t.n, 7);
    CHECK(strcmp(t.shape, "hosts=8 radix=4 ppn=1") == 0);
    /* bcast: the blocking entry first, then any form on 2-4 ranks. */
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 1024, 8, &entry), TUNE_PATH_MPI);
    CHECK_EQ_INT(entry, 0);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 8192, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 8193, 8, &entry), TUNE_PATH_INC);
    CHECK_EQ_INT(entry, -1);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 1023, 8, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 1023, 4, &entry), TUNE_PATH_MPI);
    CHECK_EQ_INT(entry, 1);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, NB, 0, 2, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, NB, 0, 5, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, NB, 4097, 3, NULL), TUNE_PATH_INC);
    /* Forms are separate. */
    CHECK_EQ_INT(tune_lookup(&t, ALLGATHER, NB, 64, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLGATHER, PE, 64, 8, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, ALLGATHER, NB, 63, 8, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, SCATTER, PE, 0, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, SCATTER, BL, UINT64_MAX, 8, NULL),
                 TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, PE, 100, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, PE, 101, 8, NULL), TUNE_PATH_INC);
    /* "all" before the allreduce entry: the first match decides. */
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 1 << 20, 16, &entry),
                 TUNE_PATH_INC);
    CHECK_EQ_INT(entry, 5);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 4, 16, &entry), TUNE_PATH_MPI);
    CHECK_EQ_INT(entry, 6);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 4, 15, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, BARRIER, BL, 0, 8, NULL), TUNE_PATH_INC);
    /* Where an entry came from, and the entries written back. */
    tune_entry_where(&t, 2, line, sizeof(line));
    CHECK(strcmp(line, "t.conf:6") == 0);
    tune_entry_format(&t.e[0], line, sizeof(line));
    CHECK(strcmp(line, "bcast:blocking 1K-8K mpi") == 0);
    tune_entry_format(&t.e[1], line, sizeof(line));
    CHECK(strcmp(line, "bcast 0-4K mpi ranks=2-4") == 0);
    tune_entry_format(&t.e[2], line, sizeof(line));
    CHECK(strcmp(line, "allgather:nb 64- mpi") == 0);
    tune_entry_format(&t.e[3], line, sizeof(line));
    CHECK(strcmp(line, "scatter * mpi") == 0);
    tune_entry_format(&t.e[6], line, sizeof(line));
    CHECK(strcmp(line, "allreduce * mpi ranks=16") == 0);
    return TEST_PASSED;
}

/* The entry classes: ranks per host, datatype class, and the host-based
 * algorithms as paths; parsed, matched, formatted back. */
TEST(mpi_tune_classes, TEST_UNIT)
{
    char err[512], line[256];
    int entry;

    CHECK_MSG(parse("allreduce 0-4K ring ppn=2- dtype=float\n"
                    "allreduce:blocking 0-4K rabenseifner dtype=int\n"
                    "allreduce:nb * rd ppn=1\n"
                    "allreduce 8K- mpi dtype=any\n",
                    err, sizeof(err)) == 0,
              "%s", err);
    CHECK_EQ_INT((int)t.n, 4);
    /* float on 2 ranks a host: ring; on 1 or unknown: no match */
    CHECK_EQ_INT(
        tune_select(&t, ALLREDUCE, BL, 1024, 8, 2, TUNE_DCLASS_FLOAT, &entry),
        TUNE_PATH_HOST);
    CHECK_EQ_INT(entry, 0);
    CHECK_EQ_INT(t.e[entry].algo, TUNE_ALGO_RING);
    CHECK_EQ_INT(
        tune_select(&t, ALLREDUCE, BL, 1024, 8, 1, TUNE_DCLASS_FLOAT, &entry),
        TUNE_PATH_INC);
    CHECK_EQ_INT(entry, -1);
    CHECK_EQ_INT(
        tune_select(&t, ALLREDUCE, BL, 1024, 8, 0, TUNE_DCLASS_FLOAT, &entry),
        TUNE_PATH_INC);
    /* int: rabenseifner at any ppn; a call of no class matches neither */
    CHECK_EQ_INT(
        tune_select(&t, ALLREDUCE, BL, 4096, 8, 0, TUNE_DCLASS_INT, &entry),
        TUNE_PATH_HOST);
    CHECK_EQ_INT(t.e[entry].algo, TUNE_ALGO_RABENSEIFNER);
    CHECK_EQ_INT(
        tune_select(&t, ALLREDUCE, BL, 4096, 8, 4, TUNE_DCLASS_NONE, &entry),
        TUNE_PATH_INC);
    CHECK_EQ_INT(
        tune_select(&t, ALLREDUCE, NB, 1, 8, 1, TUNE_DCLASS_INT, &entry),
        TUNE_PATH_HOST);
    CHECK_EQ_INT(t.e[entry].algo, TUNE_ALGO_RD);
    CHECK_EQ_INT(
        tune_select(&t, ALLREDUCE, BL, 1 << 20, 8, 0, TUNE_DCLASS_NONE, &entry),
        TUNE_PATH_MPI);
    tune_entry_format(&t.e[0], line, sizeof(line));
    CHECK_MSG(strcmp(line, "allreduce 0-4K ring ppn=2- dtype=float") == 0, "%s",
              line);
    tune_entry_format(&t.e[2], line, sizeof(line));
    CHECK_MSG(strcmp(line, "allreduce:nb * rd ppn=1") == 0, "%s", line);
    tune_entry_format(&t.e[3], line, sizeof(line));
    CHECK_MSG(strcmp(line, "allreduce 8K- mpi") == 0, "%s", line);
    /* The override takes them too, and a bad one is named. */
    CHECK(tune_parse_override(&t, "allreduce:1K:ring:ppn=1-2:dtype=int", err,
                              sizeof(err)) == 0);
    CHECK_EQ_INT(
        tune_select(&t, ALLREDUCE, BL, 1024, 8, 2, TUNE_DCLASS_INT, &entry),
        TUNE_PATH_HOST);
    CHECK_EQ_INT(entry, 0);
    CHECK(tune_parse_override(&t, "bcast:1K:ring", err, sizeof(err)) == -1);
    CHECK_MSG(strstr(err, "INCOLL_TUNE item 1 'bcast:1K:ring': path 'ring'"),
              "%s", err);
    return TEST_PASSED;
}

/* The shape line: its ranges decide whether the file's entries apply to
 * a job; the override's always do; the hash follows what decides. */
TEST(mpi_tune_shape, TEST_UNIT)
{
    char err[512];
    uint64_t h0, h1;

    CHECK(parse("shape emulated radix=4 ppn=1 ranks=4-16\n"
                "bcast * mpi\n",
                err, sizeof(err)) == 0);
    CHECK(tune_parse_override(&t, "scatter:*:mpi", err, sizeof(err)) == 0);
    CHECK(t.s_rlo == 4 && t.s_rhi == 16 && t.s_plo == 1 && t.s_phi == 1);
    h0 = tune_hash(&t);
    tune_apply_shape(&t, 8, 8, 1);
    CHECK_EQ_INT(t.shape_ok, 1);
    CHECK_EQ_INT((int)t.n, 2);
    CHECK(tune_hash(&t) == h0);
    /* unknown values are not compared */
    tune_apply_shape(&t, 8, 0, 0);
    CHECK_EQ_INT(t.shape_ok, 1);
    /* 32 ranks: the file's entry set aside, the override's kept */
    tune_apply_shape(&t, 32, 32, 1);
    CHECK_EQ_INT(t.shape_ok, 0);
    CHECK_EQ_INT((int)t.n, 1);
    CHECK(t.e[0].from_env);
    CHECK(strstr(t.shape_note, "does not match this job (32 ranks") != NULL);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 8, 32, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, SCATTER, BL, 8, 32, NULL), TUNE_PATH_MPI);
    h1 = tune_hash(&t);
    CHECK(h1 != h0);
    /* ppn 2 against ppn=1 */
    CHECK(parse("shape ppn=1\nbcast * mpi\n", err, sizeof(err)) == 0);
    tune_apply_shape(&t, 8, 4, 2);
    CHECK_EQ_INT(t.shape_ok, 0);
    CHECK_EQ_INT((int)t.n, 0);
    /* radix= and levels= matched where known, each word said */
    {
        tune_job_t job = {8, 8, 1, 4, 2};
        CHECK(parse("shape emulated radix=4 levels=2 ppn=1\nbcast * mpi\n", err,
                    sizeof(err)) == 0);
        CHECK(t.s_xlo == 4 && t.s_xhi == 4 && t.s_llo == 2 && t.s_lhi == 2);
        tune_apply_job(&t, &job);
        CHECK_EQ_INT(t.shape_ok, 1);
        CHECK(strstr(t.shape_note, "ppn matched, radix matched, levels "
                                   "matched") != NULL);
        job.radix = 2;
        tune_apply_job(&t, &job);
        CHECK_EQ_INT(t.shape_ok, 0);
        CHECK_EQ_INT((int)t.n, 0);
        CHECK(strstr(t.shape_note, "radix not 2") != NULL);
        CHECK(parse("shape radix=2-4 levels=3-\nbcast * mpi\n", err,
                    sizeof(err)) == 0);
        job.levels = 2;
        tune_apply_job(&t, &job);
        CHECK_EQ_INT(t.shape_ok, 0);
        CHECK(strstr(t.shape_note, "radix matched, levels not 2") != NULL);
        /* unknown (a manager that did not say): not compared */
        job.radix = job.levels = 0;
        CHECK(parse("shape radix=2-4 levels=3-\nbcast * mpi\n", err,
                    sizeof(err)) == 0);
        tune_apply_job(&t, &job);
        CHECK_EQ_INT(t.shape_ok, 1);
        CHECK(strstr(t.shape_note, "radix not compared") != NULL);
        CHECK_EQ_INT((int)t.n, 1);
        CHECK(parse("shape levels=0\n", err, sizeof(err)) != 0);
        CHECK(strstr(err, "bad shape 'levels=0'") != NULL);
    }
    /* no shape ranges: any fabric */
    CHECK(parse("shape loopback link-rate=1g\nbcast * mpi\n", err,
                sizeof(err)) == 0);
    tune_apply_shape(&t, 1000, 1000, 9);
    CHECK_EQ_INT(t.shape_ok, -1);
    CHECK_EQ_INT((int)t.n, 1);
    /* the hash ignores where entries came from, not what they say */
    CHECK(parse("bcast * mpi\n", err, sizeof(err)) == 0);
    h0 = tune_hash(&t);
    tune_init(&t, "other.conf");
    CHECK(tune_parse_text(&t, "\n\nbcast * mpi # same\n", "o", err,
                          sizeof(err)) == 0);
    CHECK(tune_hash(&t) == h0);
    CHECK(parse("bcast * inc\n", err, sizeof(err)) == 0);
    CHECK(tune_hash(&t) != h0);
    return TEST_PASSED;
}

TEST(mpi_tune_format_errors, TEST_UNIT)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"bcast 1K mpi\nbcst 0-4 mpi\n", "t.conf:2: unknown collective 'bcst'"},
        {"bcast:nonblocking 0-4 mpi\n", "t.conf:1: unknown form 'nonblocking'"},
        {"bcast 8K-1K mpi\n", "t.conf:1: bad size range '8K-1K'"},
        {"bcast 1X mpi\n", "t.conf:1: bad size range '1X'"},
        {"bcast -5 mpi\n", "t.conf:1: bad size range '-5'"},
        {"bcast 99999999999999999999 mpi\n", "bad size range"},
        {"bcast 1K host\n", "t.conf:1: unknown path 'host'"},
        {"bcast 1K\n", "t.conf:1: want COLL[:FORM] BYTES PATH [ranks=R] "
                       "[ppn=P] [dtype=D], got 2"},
        {"\n\nbcast 1K mpi ranks=0\n", "t.conf:3: bad 'ranks=0'"},
        {"bcast 1K mpi size=4\n", "t.conf:1: unknown field 'size=4'"},
        {"bcast 1K mpi ranks=4 ppn=1 dtype=int x y\n", "got 8 fields"},
        {"allreduce 1K mpi ppn=0\n", "t.conf:1: bad 'ppn=0'"},
        {"allreduce 1K mpi ppn=70000\n", "t.conf:1: bad 'ppn=70000'"},
        {"allreduce 1K mpi dtype=double\n",
         "t.conf:1: bad 'dtype=double' (dtype=int, float or any)"},
        {"bcast 1K ring\n", "t.conf:1: path 'ring' is a host-based "
                            "allreduce algorithm: for allreduce entries"},
        {"all * rd\n", "t.conf:1: path 'rd' is a host-based"},
        {"allreduce 1K recursive\n", "t.conf:1: unknown path 'recursive'"},
        {"shape emulated ranks=8-4\n", "t.conf:1: bad shape 'ranks=8-4'"},
        {"\nshape ppn=x\n", "t.conf:2: bad shape 'ppn=x'"},
        {NULL, NULL}};
    char err[512], big[64 * (TUNE_MAX + 2)];
    size_t k = 0;

    for (int i = 0; bad[i].text; i++) {
        err[0] = '\0';
        CHECK_MSG(parse(bad[i].text, err, sizeof(err)) == -1, "'%s' accepted",
                  bad[i].text);
        CHECK_MSG(strstr(err, bad[i].want) != NULL, "'%s': '%s', want '%s'",
                  bad[i].text, err, bad[i].want);
    }
    for (int i = 0; i <= TUNE_MAX; i++)
        k += (size_t)snprintf(big + k, sizeof(big) - k, "bcast %d mpi\n", i);
    CHECK(parse(big, err, sizeof(err)) == -1);
    CHECK(strstr(err, "more than 256 entries") != NULL);
    /* The shipped table parses. */
    CHECK_MSG(parse(tune_default_text, err, sizeof(err)) == 0, "%s", err);
    CHECK(t.n > 0);
    /* Its small allreduces and barriers: MPI's own at 8 ranks, where
     * Open MPI's won, the network from 16 ranks, where it won. */
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 64, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 64, 16, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 4, 16, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, PE, 4, 32, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, BARRIER, NB, 0, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, BARRIER, NB, 0, 16, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 64, 16, NULL), TUNE_PATH_MPI);
    /* The 4 KiB allreduce: MPI's own below 16 ranks, the network from. */
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, NB, 4096, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, NB, 4096, 16, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 16384, 8, NULL), TUNE_PATH_INC);
    return TEST_PASSED;
}

TEST(mpi_tune_override, TEST_UNIT)
{
    char err[512];
    int entry;

    CHECK(parse("bcast * mpi\nallgather 0-1K mpi\n", err, sizeof(err)) == 0);
    CHECK(tune_parse_override(&t,
                              "bcast:0-4K:inc,allgather:nb:1K-16K:mpi,"
                              "gather:*:mpi:ranks=2-4",
                              err, sizeof(err)) == 0);
    CHECK_EQ_INT((int)t.n, 5);
    /* The override's entries come first. */
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 4096, 8, &entry), TUNE_PATH_INC);
    CHECK_EQ_INT(entry, 0);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 4097, 8, &entry), TUNE_PATH_MPI);
    CHECK_EQ_INT(entry, 3);
    CHECK_EQ_INT(tune_lookup(&t, ALLGATHER, NB, 2048, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLGATHER, BL, 2048, 8, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, GATHER, BL, 9, 4, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, GATHER, BL, 9, 5, NULL), TUNE_PATH_INC);
    {
        char where[128];
        tune_entry_where(&t, 1, where, sizeof(where));
        CHECK(strcmp(where, "INCOLL_TUNE item 2") == 0);
        tune_entry_where(&t, 4, where, sizeof(where));
        CHECK(strcmp(where, "t.conf:2") == 0);
    }
    /* A bad item is named, and the table is left as it was. */
    CHECK(tune_parse_override(&t, "bcast:0-4K:mpi,bcast:4K-1K:mpi", err,
                              sizeof(err)) == -1);
    CHECK_MSG(strstr(err, "INCOLL_TUNE item 2 'bcast:4K-1K:mpi': bad size "
                          "range") != NULL,
              "%s", err);
    CHECK_EQ_INT((int)t.n, 5);
    CHECK(tune_parse_override(&t, "bcast:blocking:0-4K", err, sizeof(err)) ==
          -1);
    CHECK_MSG(strstr(err, "item 1 'bcast:blocking:0-4K'") != NULL, "%s", err);
    CHECK(tune_parse_override(&t, "scatter:nb:*:mpi:ranks=2:x", err,
                              sizeof(err)) == -1);
    CHECK(tune_parse_override(&t, "sc:*:mpi", err, sizeof(err)) == -1);
    CHECK_MSG(strstr(err, "unknown collective 'sc'") != NULL, "%s", err);
    return TEST_PASSED;
}

/* Where the table comes from: INCOLL_TUNE_FILE, DIR/tune.conf, built-in,
 * none; INCOLL_TUNE before any of them. */
TEST(mpi_tune_load, TEST_UNIT)
{
    char dir[4096], path[4200], err[512];
    FILE *f;

    snprintf(dir, sizeof(dir), "%s/tune-load", test_tmpdir());
    CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
    snprintf(path, sizeof(path), "%s/tune.conf", dir);
    unlink(path);
    CHECK(tune_load(&t, NULL, dir, NULL, err, sizeof(err)) == 0);
    CHECK(strcmp(t.source, "built-in") == 0);
    CHECK(t.n > 0);
    f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("shape fabric=x ranks=4\nreduce 0-64 mpi\n", f);
    fclose(f);
    CHECK(tune_load(&t, NULL, dir, NULL, err, sizeof(err)) == 0);
    CHECK(strcmp(t.source, path) == 0);
    CHECK_EQ_INT((int)t.n, 1);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, NB, 64, 4, NULL), TUNE_PATH_MPI);
    CHECK(tune_load(&t, NULL, dir, "reduce:0-8:inc", err, sizeof(err)) == 0);
    CHECK_EQ_INT((int)t.n, 2);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, NB, 8, 4, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, NB, 9, 4, NULL), TUNE_PATH_MPI);
    CHECK(strcmp(t.env, "reduce:0-8:inc") == 0);
    CHECK(tune_load(&t, "none", dir, NULL, err, sizeof(err)) == 0);
    CHECK_EQ_INT((int)t.n, 0);
    CHECK_EQ_INT(tune_lookup(&t, SCATTER, BL, 4, 4, NULL), TUNE_PATH_INC);
    /* An explicit file must be there and be right. */
    CHECK(tune_load(&t, "/nonexistent/tune.conf", dir, NULL, err,
                    sizeof(err)) == -1);
    CHECK_MSG(strstr(err, "/nonexistent/tune.conf: No such file") != NULL, "%s",
              err);
    CHECK_EQ_INT((int)t.n, 0);
    f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("reduce 0-64 mpi\nreduce 0-64 maybe\n", f);
    fclose(f);
    CHECK(tune_load(&t, path, NULL, NULL, err, sizeof(err)) == -1);
    CHECK_MSG(strstr(err, "tune.conf:2: unknown path 'maybe'") != NULL, "%s",
              err);
    CHECK(tune_load(&t, NULL, dir, NULL, err, sizeof(err)) == -1);
    CHECK(tune_load(&t, "none", NULL, "x:1:mpi", err, sizeof(err)) == -1);
    CHECK_MSG(strstr(err, "INCOLL_TUNE item 1 'x:1:mpi'") != NULL, "%s", err);
    unlink(path);
    rmdir(dir);
    return TEST_PASSED;
}
