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
    /* Its small allreduces and barriers: MPI's own at 8 ranks and at 16
     * and more, where the network's wins per call cost more in the loop
     * (docs/tuning.md). */
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 64, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 64, 16, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 4, 16, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, PE, 4, 32, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, BARRIER, NB, 0, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, BARRIER, BL, 0, 16, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, BARRIER, NB, 0, 16, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, BCAST, BL, 64, 16, NULL), TUNE_PATH_MPI);
    /* The 4 KiB allreduce: MPI's own below 16 ranks, the network from. */
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, NB, 4096, 8, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, NB, 4096, 16, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, ALLREDUCE, BL, 16384, 8, NULL), TUNE_PATH_INC);
    /* The nonblocking reduce of 64-256 KiB: MPI's own at 16 ranks, the
     * network at 16 KiB and from 256 KiB. */
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, NB, 65536, 16, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, PE, 262143, 16, NULL), TUNE_PATH_MPI);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, NB, 16384, 16, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, NB, 262144, 16, NULL), TUNE_PATH_INC);
    CHECK_EQ_INT(tune_lookup(&t, REDUCE, BL, 65536, 16, NULL), TUNE_PATH_INC);
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

/* ---- the lookup index (tune_reindex) against a scan of every entry ---- */

static uint64_t idx_rng = 0x9e3779b97f4a7c15ull;

static uint64_t idx_rand(void)
{
    idx_rng ^= idx_rng << 13;
    idx_rng ^= idx_rng >> 7;
    idx_rng ^= idx_rng << 17;
    return idx_rng;
}

/* v, v - 1 and v + 1 (not past 0 and top) into a, each once, as many
 * as fit; the new count. */
static int idx_near(uint64_t *a, int n, int max, uint64_t v, uint64_t top)
{
    uint64_t c[3] = {v, v > 0 ? v - 1 : v, v < top ? v + 1 : v};
    for (int i = 0; i < 3 && n < max; i++) {
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = a[j] == c[i];
        if (!seen)
            a[n++] = c[i];
    }
    return n;
}

/*
 * Every lookup the table can be asked (each collective, form, datatype
 * class, and the sizes, communicator sizes and ranks per host at and
 * beside every bound of its entries) gives the same path and entry with
 * the index as a scan of every entry from the first (the same table with
 * its index marked stale, which tune_select scans whole). samples 0:
 * every communicator size with every ranks per host; else that many
 * pairs of them drawn for each collective, form, class and size. The
 * number of lookups compared into *n_p; 0, or -1 with the first
 * difference said.
 */
static int idx_compare(const tune_table_t *tt, int samples, long *n_p,
                       char *why, size_t len)
{
    static tune_table_t scan;
    static uint64_t bytes[3 * 2 * TUNE_MAX + 8], ranks[3 * 2 * TUNE_MAX + 8],
        ppns[3 * 2 * TUNE_MAX + 8];
    const int max = (int)(sizeof(bytes) / sizeof(bytes[0]));
    int nb = 0, nr = 0, np = 0;

    scan = *tt;
    scan.idx_n = scan.n + 1; /* stale: tune_select scans every entry */
    nb = idx_near(bytes, nb, max, 0, UINT64_MAX);
    nb = idx_near(bytes, nb, max, UINT64_MAX, UINT64_MAX);
    nr = idx_near(ranks, nr, max, 1, UINT32_MAX);
    nr = idx_near(ranks, nr, max, UINT32_MAX, UINT32_MAX);
    ppns[np++] = 0; /* unknown */
    for (uint32_t i = 0; i < tt->n; i++) {
        const tune_entry_t *e = &tt->e[i];
        nb = idx_near(bytes, nb, max, e->lo, UINT64_MAX);
        nb = idx_near(bytes, nb, max, e->hi, UINT64_MAX);
        nr = idx_near(ranks, nr, max, e->rlo, UINT32_MAX);
        nr = idx_near(ranks, nr, max, e->rhi, UINT32_MAX);
        np = idx_near(ppns, np, max, e->plo, 0xffff);
        np = idx_near(ppns, np, max, e->phi, 0xffff);
    }
    for (int c = 0; c < TUNE_COLL_COUNT; c++)
        for (int f = 0; f < TUNE_FORM_COUNT; f++)
            for (int d = TUNE_DCLASS_NONE; d <= TUNE_DCLASS_FLOAT; d++)
                for (int b = 0; b < nb; b++)
                    for (int k = 0; k < (samples ? samples : nr * np); k++) {
                        int r = samples ? (int)(idx_rand() % (uint64_t)nr)
                                        : k / np,
                            p = samples ? (int)(idx_rand() % (uint64_t)np)
                                        : k % np;
                        {
                            int e1, e2, p1, p2;
                            p1 = tune_select(tt, c, f, bytes[b],
                                             (uint32_t)ranks[r],
                                             (uint32_t)ppns[p], d, &e1);
                            p2 = tune_select(&scan, c, f, bytes[b],
                                             (uint32_t)ranks[r],
                                             (uint32_t)ppns[p], d, &e2);
                            (*n_p)++;
                            if (p1 != p2 || e1 != e2) {
                                snprintf(why, len,
                                         "%s:%s %llu B, %llu ranks, ppn %llu, "
                                         "class %d: indexed path %d entry %d, "
                                         "scan path %d entry %d",
                                         tune_coll_name(c), tune_form_name(f),
                                         (unsigned long long)bytes[b],
                                         (unsigned long long)ranks[r],
                                         (unsigned long long)ppns[p], d, p1, e1,
                                         p2, e2);
                                return -1;
                            }
                        }
                    }
    return 0;
}

/* One random entry: any collective or all, any set of forms, ranges
 * from a few bounds (so that entries overlap and shadow each other),
 * sometimes ranks=, ppn= and dtype=. */
static void idx_random_entry(tune_entry_t *e)
{
    static const uint64_t b[] = {0, 1, 4, 15, 16, 64, 1023, 1024, 4096, 65536};
    const int nbounds = (int)(sizeof(b) / sizeof(b[0]));
    uint64_t x = b[idx_rand() % nbounds], y = b[idx_rand() % nbounds];

    memset(e, 0, sizeof(*e));
    e->coll = idx_rand() % 8 == 0 ? TUNE_COLL_ALL
                                  : (uint8_t)(idx_rand() % TUNE_COLL_COUNT);
    e->forms = (uint8_t)(1 + idx_rand() % TUNE_FORMS_ALL);
    e->lo = x < y ? x : y;
    e->hi = idx_rand() % 4 == 0 ? UINT64_MAX : (x < y ? y : x);
    e->rlo = 1;
    e->rhi = UINT32_MAX;
    if (idx_rand() % 3 == 0) {
        e->rlo = (uint32_t)(1 + idx_rand() % 16);
        e->rhi =
            idx_rand() % 2 ? UINT32_MAX : e->rlo + (uint32_t)(idx_rand() % 16);
    }
    e->phi = 0xffff;
    if (idx_rand() % 5 == 0) {
        e->plo = (uint16_t)(1 + idx_rand() % 4);
        e->phi = (uint16_t)(e->plo + idx_rand() % 3);
    }
    e->dmask = idx_rand() % 4 == 0   ? TUNE_DCLASS_INT
               : idx_rand() % 4 == 0 ? TUNE_DCLASS_FLOAT
                                     : TUNE_DMASK_ANY;
    e->path = (uint8_t)(idx_rand() % 3);
    if (e->path == TUNE_PATH_HOST) {
        e->coll = 0;
        e->algo = TUNE_ALGO_RD;
    }
}

/* The index tune_select starts from is derived from the entries: for the
 * built-in table (as loaded, and as a job of 8 and of 32 ranks keeps
 * it), for tables with an override before them, and for random tables
 * (every collective or all, forms, overlapping ranges, ranks=, ppn=,
 * dtype=, and as each of the changes that reindex leaves them: entries
 * dropped by a shape, an override put before), every lookup gives the
 * same path and entry as a scan of every entry. */
TEST(mpi_tune_index, TEST_UNIT)
{
    static tune_table_t base;
    char err[512], why[512];
    long lookups = 0;

    CHECK_MSG(tune_load(&t, NULL, NULL, NULL, err, sizeof(err)) == 0, "%s",
              err);
    CHECK(strcmp(t.source, "built-in") == 0 && t.n > 20);
    CHECK_MSG(idx_compare(&t, 0, &lookups, why, sizeof(why)) == 0,
              "built-in: %s", why);
    base = t;
    tune_apply_shape(&t, 8, 8, 1);
    CHECK_EQ_INT(t.shape_ok, 1);
    CHECK_MSG(idx_compare(&t, 0, &lookups, why, sizeof(why)) == 0,
              "built-in, 8 ranks: %s", why);
    CHECK(tune_parse_override(&t, "bcast:nb:0-64:inc,all:1K-:mpi:ranks=8", err,
                              sizeof(err)) == 0);
    CHECK_MSG(idx_compare(&t, 0, &lookups, why, sizeof(why)) == 0,
              "built-in with an override: %s", why);
    t = base;
    tune_apply_shape(&t, 32, 32, 1);
    CHECK_EQ_INT(t.shape_ok, 0);
    CHECK_MSG(idx_compare(&t, 0, &lookups, why, sizeof(why)) == 0,
              "built-in set aside: %s", why);

    for (int k = 0; k < 150; k++) {
        tune_init(&t, "random");
        t.n = 1 + (uint32_t)(idx_rand() % 40);
        for (uint32_t i = 0; i < t.n; i++)
            idx_random_entry(&t.e[i]);
        t.e[idx_rand() % t.n].from_env = 1;
        tune_reindex(&t);
        CHECK_MSG(idx_compare(&t, 3, &lookups, why, sizeof(why)) == 0,
                  "random table %d: %s", k, why);
        /* the changes that reindex: a shape that drops the file's
         * entries (the override's stay), an override put before */
        if (k % 3 == 0) {
            t.s_rlo = t.s_rhi = 4;
            tune_apply_shape(&t, 8, 8, 1);
            CHECK_MSG(idx_compare(&t, 3, &lookups, why, sizeof(why)) == 0,
                      "random table %d, set aside: %s", k, why);
        } else if (k % 3 == 1) {
            CHECK(tune_parse_override(&t,
                                      "reduce:nb:0-100:mpi:ranks=2-6,all:"
                                      "persistent:*:inc:dtype=float",
                                      err, sizeof(err)) == 0);
            CHECK_MSG(idx_compare(&t, 3, &lookups, why, sizeof(why)) == 0,
                      "random table %d, overridden: %s", k, why);
        }
    }
    CHECK(lookups > 100000);
    return TEST_PASSED;
}

/* ---- incoll tune --merge: runs on several rank counts in one table ---- */

static const char *const mg_colls[] = {
    "allreduce",     "reduce", "bcast",   "barrier",
    "allgather",     "gather", "scatter", "reduce_scatter_block",
    "reduce_scatter"};
static const char *const mg_forms[] = {"blocking", "nb", "persistent"};

/* A table as incoll-tune-mpi writes it for a run on ranks ranks (its
 * entries for ranks=N- and a shape line naming the fabric), of the
 * collectives in mask, each collective and form's two ranges' paths
 * drawn from seed. */
static void mg_run(char *buf, size_t len, int ranks, unsigned mask,
                   unsigned seed, const char *shape)
{
    size_t k = (size_t)snprintf(buf, len,
                                "# incoll selection table (src/common/tune.h), "
                                "made by\n# incoll tune -n %d\nshape %s "
                                "ranks=%d\n",
                                ranks, shape, ranks);
    for (int c = 0; c < TUNE_COLL_COUNT; c++)
        for (int f = 0; f < 3 && (mask >> c & 1); f++) {
            unsigned v = (seed * 2654435761u) >> (c * 3 + f) % 29;
            k += (size_t)snprintf(
                buf + k, k < len ? len - k : 0,
                "%s:%s 0-1023 %s ranks=%d-\n%s:%s 1K- %s ranks=%d-\n",
                mg_colls[c], mg_forms[f], v & 1 ? "mpi" : "inc", ranks,
                mg_colls[c], mg_forms[f], v & 2 ? "mpi" : "inc", ranks);
        }
}

/* Every lookup on ranks at the sizes 0, 1023, 1024 and 1 MiB gives in
 * merged what it gives in want (path and, for a host path, algorithm).
 * 0, or -1 with the first difference in why. */
static int mg_same(const tune_table_t *merged, const tune_table_t *want,
                   uint32_t ranks, char *why, size_t len)
{
    static const uint64_t sizes[] = {0, 1023, 1024, 1 << 20};
    for (int c = 0; c < TUNE_COLL_COUNT; c++)
        for (int f = 0; f < TUNE_FORM_COUNT; f++)
            for (int s = 0; s < 4; s++)
                for (int d = 0; d <= TUNE_DCLASS_FLOAT; d++) {
                    int e1, e2;
                    int p1 = tune_select(merged, c, f, sizes[s], ranks, 1, d,
                                         &e1),
                        p2 =
                            tune_select(want, c, f, sizes[s], ranks, 1, d, &e2);
                    if (p1 != p2 || (p1 == TUNE_PATH_HOST &&
                                     merged->e[e1].algo != want->e[e2].algo)) {
                        snprintf(why, len,
                                 "%s:%s %llu B class %d on %u ranks: %s, want "
                                 "%s",
                                 mg_colls[c], mg_forms[f],
                                 (unsigned long long)sizes[s], d, ranks,
                                 tune_path_name(p1), tune_path_name(p2));
                        return -1;
                    }
                }
    return 0;
}

static int mg_parse(tune_table_t *tt, const char *text, char *err, size_t len)
{
    tune_init(tt, "m");
    return tune_parse_text(tt, text, "m", err, len);
}

/* `incoll tune --merge`'s merge (tune_merge_text): a run's entries rule
 * from its rank count up to the next one the table has entries for, the
 * table's own everywhere else (checked lookup by lookup against each
 * table alone), whichever run comes first; a run again on the same rank
 * count replaces that count's entries (the dead ones dropped); a run of
 * some collectives leaves the others' entries ruling; the built-in
 * table's rows for 4-15 and 16- ranks keep ruling outside the run's
 * range; the shape's ranks= widened; a shape of another radix refused;
 * the run's comments kept. */
TEST(mpi_tune_merge, TEST_UNIT)
{
    static tune_table_t m, r8, r16, old, once;
    static char run8[16384], run16[16384], part[16384];
    const char *shape = "emulated radix=4 levels=2 ppn=1";
    char err[512], why[512], *a, *b, *c;
    int dropped = -1;

    mg_run(run8, sizeof(run8), 8, 0x1ff, 1, shape);
    mg_run(run16, sizeof(run16), 16, 0x1ff, 2, shape);
    CHECK_MSG(mg_parse(&r8, run8, err, sizeof(err)) == 0, "%s", err);
    CHECK_MSG(mg_parse(&r16, run16, err, sizeof(err)) == 0, "%s", err);

    /* 16 ranks into the table of 8, and 8 into the table of 16 */
    a = tune_merge_text(run8, "t8.conf", run16, 16, "# merged\n", &dropped, err,
                        sizeof(err));
    CHECK_MSG(a != NULL, "%s", err);
    CHECK_EQ_INT(dropped, 0);
    b = tune_merge_text(run16, "t16.conf", run8, 8, NULL, &dropped, err,
                        sizeof(err));
    CHECK_MSG(b != NULL, "%s", err);
    {
        const char *top = "# merged\nshape emulated radix=4 levels=2 ppn=1 "
                          "ranks=8-16\n";
        CHECK_MSG(strncmp(a, top, strlen(top)) == 0, "%s", a);
    }
    CHECK_MSG(strncmp(b, "shape emulated radix=4 levels=2 ppn=1 ranks=8-16\n",
                      49) == 0,
              "%s", b);
    CHECK_MSG(strstr(b, "allreduce:blocking 0-1023 ") &&
                  strstr(b, " ranks=8-15\n") && strstr(b, " ranks=16-\n"),
              "%s", b);
    CHECK_MSG(strstr(a, "# incoll tune -n 16\n") && strstr(a, "t8.conf") &&
                  strstr(a, " ranks=16-\n") && strstr(a, " ranks=8-15\n"),
              "%s", a);
    for (int k = 0; k < 2; k++) {
        CHECK_MSG(mg_parse(&m, k ? b : a, err, sizeof(err)) == 0, "%s", err);
        for (uint32_t n = 8; n <= 40; n++)
            CHECK_MSG(mg_same(&m, n < 16 ? &r8 : &r16, n, why, sizeof(why)) ==
                          0,
                      "%s first: %s", k ? "16" : "8", why);
        tune_apply_shape(&m, 12, 12, 1);
        CHECK_EQ_INT(m.shape_ok, 1);
        tune_apply_shape(&m, 4, 4, 1);
        CHECK_EQ_INT(m.shape_ok, 0);
    }
    /* 8 again into the merged table: its old entries for 8-15 dropped */
    c = tune_merge_text(b, "m.conf", run8, 8, NULL, &dropped, err, sizeof(err));
    CHECK_MSG(c != NULL, "%s", err);
    CHECK_EQ_INT(dropped, (int)r8.n);
    CHECK_MSG(mg_parse(&m, c, err, sizeof(err)) == 0, "%s", err);
    CHECK_MSG(mg_parse(&once, b, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT((int)m.n, (int)once.n);
    free(c);
    /* a run of the allreduce alone at 8: the others' entries at 8 stay */
    mg_run(part, sizeof(part), 8, 0x1, 3, shape);
    c = tune_merge_text(b, "m.conf", part, 8, NULL, &dropped, err, sizeof(err));
    CHECK_MSG(c != NULL, "%s", err);
    CHECK_EQ_INT(dropped, 6); /* the allreduce's, 3 forms x 2 sizes */
    CHECK_MSG(mg_parse(&m, c, err, sizeof(err)) == 0, "%s", err);
    CHECK_MSG(mg_parse(&once, part, err, sizeof(err)) == 0, "%s", err);
    for (int f = 0; f < TUNE_FORM_COUNT; f++) {
        CHECK_EQ_INT(tune_lookup(&m, ALLREDUCE, f, 64, 9, NULL),
                     tune_lookup(&once, ALLREDUCE, f, 64, 9, NULL));
        CHECK_EQ_INT(tune_lookup(&m, BCAST, f, 64, 9, NULL),
                     tune_lookup(&r8, BCAST, f, 64, 9, NULL));
        CHECK_EQ_INT(tune_lookup(&m, BCAST, f, 64, 16, NULL),
                     tune_lookup(&r16, BCAST, f, 64, 16, NULL));
    }
    free(c);
    free(a);
    free(b);

    /* into the built-in table: its rows rule below 8 and from 16 on */
    CHECK(tune_load(&old, NULL, NULL, NULL, err, sizeof(err)) == 0);
    a = tune_merge_text(tune_default_text, "built-in", run8, 8, NULL, &dropped,
                        err, sizeof(err));
    CHECK_MSG(a != NULL, "%s", err);
    CHECK_MSG(strncmp(a, "shape emulated radix=4 levels=2 ppn=1 ranks=4-16\n",
                      49) == 0,
              "%s", a);
    CHECK_MSG(strstr(a, "# incoll tune -n 8 --emulate --radix 4 --sizes "
                        "4:1M --iters 50 --passes 3\n"),
              "the built-in table's comments: %.2000s", a);
    CHECK_MSG(strstr(a, "\nallreduce:blocking 4K-16383 mpi ranks=4-7\n"),
              "the built-in table's rows for 4-15 ranks: %.4000s", a);
    CHECK_MSG(mg_parse(&m, a, err, sizeof(err)) == 0, "%s", err);
    for (uint32_t n = 4; n <= 32; n++)
        CHECK_MSG(mg_same(&m, n >= 8 && n < 16 ? &r8 : &old, n, why,
                          sizeof(why)) == 0,
                  "into the built-in table: %s", why);
    free(a);

    /* the run's comments kept; another radix refused */
    snprintf(part, sizeof(part),
             "shape %s ranks=8\n# checked on ...\nbcast:nb 0-15 mpi ranks=8- "
             "# 120.6 us with the table, 45.9 us without the layer\n"
             "bcast * inc ranks=8-\n",
             shape);
    a = tune_merge_text(run16, "t16.conf", part, 8, NULL, &dropped, err,
                        sizeof(err));
    CHECK_MSG(a != NULL, "%s", err);
    CHECK_MSG(strstr(a, "\n# checked on ...\nbcast:nb 0-15 mpi ranks=8-15 # "
                        "120.6 us with the table, 45.9 us without the layer\n"
                        "bcast * inc ranks=8-15\n"),
              "%s", a);
    free(a);
    mg_run(part, sizeof(part), 8, 0x1ff, 1, "emulated radix=2 levels=2 ppn=1");
    CHECK(tune_merge_text(run16, "t16.conf", part, 8, NULL, &dropped, err,
                          sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "t16.conf: its shape says radix=4, this run's "
                          "radix=2") != NULL,
              "%s", err);
    CHECK(tune_merge_text("bcast 1K maybe\n", "bad.conf", run8, 8, NULL,
                          &dropped, err, sizeof(err)) == NULL);
    CHECK_MSG(strstr(err, "bad.conf:1: unknown path 'maybe'") != NULL, "%s",
              err);
    return TEST_PASSED;
}
