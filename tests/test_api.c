/*
 * The public API that front ends build on (include/incoll.h): the
 * version check at init, explicit progress and the timed wait, the
 * out-of-band bootstrap, the thread mode and the query of where a
 * collective ran; and the rule that the front ends (src/mpi, src/ompi)
 * use that header alone.
 */
#include "integ.h"
#include "test.h"

#include "incoll.h"
#include "common/wire.h"

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The library's version is the header's; a program built against another
 * major version, or a newer minor one, is refused with a message naming
 * both; the header's own version goes on to the usual checks. */
TEST(api_version, TEST_UNIT)
{
    unsigned major = 99, minor = 99;
    char out[4096], want[64];
    incoll_init_params_t p = {0};

    CHECK_EQ_INT(incoll_get_version(&major, &minor), INCOLL_VERSION);
    CHECK_EQ_INT(major, INCOLL_VERSION_MAJOR);
    CHECK_EQ_INT(minor, INCOLL_VERSION_MINOR);
    CHECK_EQ_INT(incoll_get_version(NULL, NULL), INCOLL_VERSION);
    snprintf(want, sizeof(want), "%d.%d", INCOLL_VERSION_MAJOR,
             INCOLL_VERSION_MINOR);
    CHECK_MSG(strcmp(incoll_get_version_string(), want) == 0, "version '%s'",
              incoll_get_version_string());
    CHECK(strstr(incoll_status_string(INCOLL_ERR_VERSION), "version"));
    CHECK(strstr(incoll_status_string(INCOLL_WAIT_TIMEOUT), "timed out"));

    /* A size of 0 is a bad identity: past the version check, init
     * refuses it as a configuration error. */
    p.field_mask = INCOLL_INIT_FIELD_SIZE | INCOLL_INIT_FIELD_RANK;
    p.size = 0;
    CHECK_EQ_INT(
        init_captured(INCOLL_VERSION_MAJOR + 1, 0, &p, out, sizeof(out)),
        INCOLL_ERR_VERSION);
    snprintf(want, sizeof(want), "incoll.h %d.0", INCOLL_VERSION_MAJOR + 1);
    CHECK_MSG(strstr(out, want) && strstr(out, incoll_get_version_string()) &&
                  strstr(out, "major"),
              "message: %s", out);
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR + 1,
                               &p, out, sizeof(out)),
                 INCOLL_ERR_VERSION);
    snprintf(want, sizeof(want), "incoll.h %d.%d", INCOLL_VERSION_MAJOR,
             INCOLL_VERSION_MINOR + 1);
    CHECK_MSG(strstr(out, want) && strstr(out, "older"), "message: %s", out);
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    /* An older minor version of the header runs. */
    if (INCOLL_VERSION_MINOR > 0)
        CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR,
                                   INCOLL_VERSION_MINOR - 1, &p, out,
                                   sizeof(out)),
                     INCOLL_ERR_CONFIG);
    /* The thread mode and the outer lock are checked like the rest. */
    p.field_mask = INCOLL_INIT_FIELD_THREAD_MODE | INCOLL_INIT_FIELD_SIZE |
                   INCOLL_INIT_FIELD_RANK;
    p.size = 1;
    p.thread_mode = (incoll_thread_mode_t)7;
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "thread_mode 7"), "message: %s", out);
    return TEST_PASSED;
}

/* 0.4's incoll_table_info_t, as a program built against it has it. */
typedef struct {
    uint64_t hash;
    int entries;
    int shape_matches;
    char source[256];
    char shape[128];
    char shape_note[200];
    char override[256];
} table_info_0_4_t;
/* 0.4's function, which the header now hides behind its macro. */
incoll_status_t(incoll_ctx_table)(incoll_ctx_h ctx, table_info_0_4_t *info_p);

/*
 * The shape note arrives whole: a table whose shape rules out this job
 * on every word has a note longer than 0.4's 200 bytes, and
 * incoll_ctx_table gives all of it, as the context has it; a program
 * built against 0.4 (its symbol, its layout) still gets its fields in
 * their places, the note clipped to its 199 characters; a size of
 * neither layout is refused.
 */
TEST(api_table_note_whole, TEST_UNIT)
{
    static const char want[] =
        "does not match this job (1 ranks, 1 hosts, ppn 1, radix 1, levels "
        "1): ranks not 1 (shape 5-6), hosts not 1 (shape 7-), ppn not 1 "
        "(shape 3-4), radix not 1 (shape 8), levels not 1 (shape 5-6); its "
        "entries set aside, every call not overridden runs in libincoll";
    char path[PATH_MAX + 32], fab[PATH_MAX];
    incoll_init_params_t p = {0};
    fabric_conf_t conf;
    incoll_table_info_t ti;
    table_info_0_4_t old;
    incoll_ctx_h ctx = NULL;
    FILE *f;

    CHECK(sizeof(want) - 1 > sizeof(old.shape_note));
    /* a fabric of one host */
    snprintf(fab, sizeof(fab), "%s/api-note-fabric", test_tmpdir());
    mkdir(fab, 0755);
    CHECK(fabric_conf_generate(1, 2, &conf) == INCOLL_OK);
    for (int i = 0; i < conf.nans; i++) /* never reached: nothing runs */
        conf.ans[i].addr = wire_ep(0x7f000001u, (uint16_t)(40000 + i));
    snprintf(path, sizeof(path), "%s/fabric.conf", fab);
    CHECK(fabric_conf_save(&conf, path) == INCOLL_OK);
    fabric_conf_free(&conf);
    snprintf(path, sizeof(path), "%s/api-note.conf", test_tmpdir());
    f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("shape ranks=5-6 hosts=7- ppn=3-4 radix=8 levels=5-6\n"
          "bcast * mpi\n",
          f);
    fclose(f);
    unsetenv("INCOLL_FABRIC");
    unsetenv("INCOLL_MGR");
    setenv("INCOLL_TUNE_FILE", path, 1);
    setenv("INCOLL_TUNE", "scatter:*:mpi", 1);
    p.field_mask = INCOLL_INIT_FIELD_SIZE | INCOLL_INIT_FIELD_RANK |
                   INCOLL_INIT_FIELD_FABRIC;
    p.size = 1;
    p.rank = 0;
    p.fabric = fab;
    CHECK_EQ_INT(incoll_init_params(&p, &ctx), INCOLL_OK);
    unsetenv("INCOLL_TUNE_FILE");
    unsetenv("INCOLL_TUNE");
    unlink(path);
    memset(&ti, 0x55, sizeof(ti));
    CHECK_EQ_INT(incoll_ctx_table(ctx, &ti), INCOLL_OK);
    CHECK_EQ_INT(ti.shape_matches, 0);
    CHECK_EQ_INT(ti.entries, 1);
    CHECK_MSG(strcmp(ti.shape_note, want) == 0, "note '%s'", ti.shape_note);
    CHECK(strcmp(ti.override, "scatter:*:mpi") == 0);
    /* a program built against 0.4 */
    memset(&old, 0x55, sizeof(old));
    CHECK_EQ_INT((incoll_ctx_table)(ctx, &old), INCOLL_OK);
    CHECK_EQ_INT(old.shape_matches, 0);
    CHECK_EQ_INT(old.entries, 1);
    CHECK(strlen(old.shape_note) == sizeof(old.shape_note) - 1 &&
          strncmp(old.shape_note, want, sizeof(old.shape_note) - 1) == 0);
    CHECK(strcmp(old.override, "scatter:*:mpi") == 0);
    CHECK(old.hash == ti.hash && strcmp(old.source, ti.source) == 0);
    CHECK_EQ_INT(incoll_ctx_table_sized(ctx, &ti, sizeof(ti) - 8),
                 INCOLL_ERR_INVALID_ARG);
    incoll_finalize(ctx);
    return TEST_PASSED;
}

static void nop_lock(void *arg)
{
    (void)arg;
}

/* An outer lock is for INCOLL_THREAD_MULTIPLE only, with both hooks. */
TEST(api_thread_mode, TEST_UNIT)
{
    char out[4096];
    incoll_init_params_t p = {0};

    p.field_mask = INCOLL_INIT_FIELD_THREAD_MODE |
                   INCOLL_INIT_FIELD_OUTER_LOCK | INCOLL_INIT_FIELD_SIZE |
                   INCOLL_INIT_FIELD_RANK;
    p.size = 1;
    p.thread_mode = INCOLL_THREAD_SERIALIZED;
    p.outer_lock.release = nop_lock;
    p.outer_lock.reacquire = nop_lock;
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "outer lock is for INCOLL_THREAD_MULTIPLE"),
              "message: %s", out);
    p.thread_mode = INCOLL_THREAD_MULTIPLE;
    p.outer_lock.reacquire = NULL;
    CHECK_EQ_INT(init_captured(INCOLL_VERSION_MAJOR, INCOLL_VERSION_MINOR, &p,
                               out, sizeof(out)),
                 INCOLL_ERR_CONFIG);
    CHECK_MSG(strstr(out, "release and reacquire"), "message: %s", out);
    return TEST_PASSED;
}

/* 1 when line is an #include of a header of src/host or src/core. */
static int internal_include(const char *line)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p++ != '#')
        return 0;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, "include", 7) != 0)
        return 0;
    p += 7;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != '"' && *p != '<')
        return 0;
    p++;
    return strncmp(p, "host/", 5) == 0 || strncmp(p, "core/", 5) == 0 ||
           strncmp(p, "src/host/", 9) == 0 || strncmp(p, "src/core/", 9) == 0;
}

/* 1 when line calls or declares a function of src/host (host_...(). */
static int internal_call(const char *line)
{
    for (const char *p = strstr(line, "host_"); p; p = strstr(p + 1, "host_")) {
        const char *q = p + 5;
        if (p > line &&
            (p[-1] == '_' || p[-1] == '.' || p[-1] == '>' ||
             (p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z') ||
             (p[-1] >= '0' && p[-1] <= '9')))
            continue;
        while ((*q >= 'a' && *q <= 'z') || *q == '_' ||
               (*q >= '0' && *q <= '9'))
            q++;
        if (*q == '(')
            return 1;
    }
    return 0;
}

/* The front ends live on include/incoll.h alone: no file of src/mpi or
 * src/ompi includes a header of src/host or src/core or calls a function
 * of src/host. */
TEST(api_front_ends_public_only, TEST_UNIT)
{
    static const char *const dirs[] = {"src/mpi", "src/ompi"};
    int files = 0, bad = 0;

    CHECK_MSG(test_srcdir()[0] != '\0', "no source tree above %s",
              test_bindir());
    for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
        char path[2048];
        DIR *dir;
        struct dirent *e;
        snprintf(path, sizeof(path), "%s/%s", test_srcdir(), dirs[d]);
        dir = opendir(path);
        CHECK_MSG(dir != NULL, "cannot open %s", path);
        while ((e = readdir(dir)) != NULL) {
            size_t n = strlen(e->d_name);
            char file[4096], line[4096];
            FILE *f;
            int lineno = 0;
            if (n < 3 || (strcmp(e->d_name + n - 2, ".c") != 0 &&
                          strcmp(e->d_name + n - 2, ".h") != 0))
                continue;
            snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
            f = fopen(file, "r");
            if (f == NULL)
                continue;
            files++;
            while (fgets(line, sizeof(line), f)) {
                lineno++;
                if (internal_include(line) || internal_call(line)) {
                    fprintf(stderr,
                            "    %s/%s:%d: a front end uses libincoll's "
                            "internals (only include/incoll.h): %s",
                            dirs[d], e->d_name, lineno, line);
                    bad++;
                }
            }
            fclose(f);
        }
        closedir(dir);
    }
    CHECK_MSG(files >= 5, "only %d files in src/mpi and src/ompi", files);
    CHECK_MSG(bad == 0, "%d uses of libincoll's internals", bad);
    return TEST_PASSED;
}

/* ---- a world bootstrapped out of band, in processes ---- */

#define OOB_N 4
#define OOB_MAX 512

/* The test's own channel: shared memory and a process-shared barrier. */
typedef struct {
    pthread_barrier_t bar;
    int barriers;
    int go; /* rank 0 timed out its wait: the others start theirs */
    unsigned char slot[OOB_N][OOB_MAX];
} oob_shm_t;

typedef struct {
    oob_shm_t *shm;
    int rank;
} oob_me_t;

static int oob_allgather(void *info, const void *sbuf, void *rbuf, size_t len)
{
    oob_me_t *me = info;
    if (len > OOB_MAX)
        return -1;
    memcpy(me->shm->slot[me->rank], sbuf, len);
    pthread_barrier_wait(&me->shm->bar);
    for (int r = 0; r < OOB_N; r++)
        memcpy((char *)rbuf + (size_t)r * len, me->shm->slot[r], len);
    pthread_barrier_wait(&me->shm->bar);
    return 0;
}

static int oob_barrier(void *info)
{
    oob_me_t *me = info;
    __atomic_add_fetch(&me->shm->barriers, 1, __ATOMIC_SEQ_CST);
    pthread_barrier_wait(&me->shm->bar);
    return 0;
}

#define RANK_FAIL(...)                                                         \
    do {                                                                       \
        fprintf(stderr, "    rank %d: ", rank);                                \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        return 1;                                                              \
    } while (0)

/* An allreduce of n int32 on comm, checked; 0 or 1. */
static int sum_check(int rank, incoll_comm_h comm, int size, int n,
                     incoll_algo_t algo)
{
    int32_t *in = calloc((size_t)n, 4), *out = calloc((size_t)n, 4);
    incoll_status_t st;
    int bad = 0;
    if (in == NULL || out == NULL)
        RANK_FAIL("out of memory");
    for (int i = 0; i < n; i++)
        in[i] = rank * 1000 + i;
    st = incoll_allreduce_algo(comm, algo, in, out, (size_t)n, INCOLL_INT32,
                               INCOLL_OP_SUM);
    for (int i = 0; i < n && st == INCOLL_OK; i++) {
        int32_t want = 0;
        for (int r = 0; r < size; r++)
            want += r * 1000 + i;
        bad += out[i] != want;
    }
    free(in);
    free(out);
    if (st != INCOLL_OK)
        RANK_FAIL("allreduce: %s", incoll_status_string(st));
    if (bad)
        RANK_FAIL("allreduce: %d wrong elements", bad);
    return 0;
}

/* One rank of the world: everything it checks; its exit status. */
static int oob_rank(oob_shm_t *shm, int rank, const char *fab)
{
    oob_me_t me = {shm, rank};
    incoll_init_params_t p = {0};
    incoll_ctx_h ctx;
    incoll_comm_h world, half;
    incoll_where_t w;
    incoll_req_h req;
    incoll_status_t st;
    int32_t in[256], out[256];
    int size = 0, r = -1;
    double t0;

    /* No identity in the environment: the callbacks give it. */
    unsetenv("INCOLL_RANK");
    unsetenv("INCOLL_SIZE");
    unsetenv("INCOLL_JOB");
    unsetenv("INCOLL_MGR");
    unsetenv("INCOLL_FABRIC");
    /* Selection tables that differ: rank 1 would send everything to MPI,
     * the others have none; rank 0's rules on every rank after init. */
    setenv("INCOLL_TUNE_FILE", "none", 1);
    if (rank == 0)
        setenv("INCOLL_TUNE",
               "bcast:0-1K:mpi,allreduce:blocking:0-64:ring:dtype=int", 1);
    else if (rank == 1)
        setenv("INCOLL_TUNE", "all:*:mpi", 1);
    else
        unsetenv("INCOLL_TUNE");
    p.field_mask = INCOLL_INIT_FIELD_OOB | INCOLL_INIT_FIELD_FABRIC;
    p.fabric = fab;
    p.oob.allgather = oob_allgather;
    p.oob.barrier = oob_barrier;
    p.oob.coll_info = &me;
    p.oob.rank = rank;
    p.oob.size = OOB_N;
    st = incoll_init_params(&p, &ctx);
    if (st != INCOLL_OK)
        RANK_FAIL("init: %s", incoll_status_string(st));
    incoll_comm_world(ctx, &world);
    incoll_comm_rank(world, &r);
    incoll_comm_size(world, &size);
    if (r != rank || size != OOB_N)
        RANK_FAIL("world rank %d size %d", r, size);
    if (incoll_comm_where(world, &w) != INCOLL_OK || w.why != INCOLL_WHY_NONE)
        RANK_FAIL("where before any collective: %d", (int)w.why);
    {
        incoll_choice_t ch;
        incoll_table_info_t ti;
        if (incoll_select(world, INCOLL_COLL_BCAST, INCOLL_FORM_BLOCKING, 512,
                          INCOLL_DTYPE_COUNT, &ch) != INCOLL_PATH_MPI ||
            ch.entry != 0 ||
            incoll_select(world, INCOLL_COLL_BCAST, INCOLL_FORM_NB, 4096,
                          INCOLL_DTYPE_COUNT, NULL) != INCOLL_PATH_INC ||
            incoll_select(world, INCOLL_COLL_ALLREDUCE, INCOLL_FORM_BLOCKING,
                          64, INCOLL_INT32, &ch) != INCOLL_PATH_HOST ||
            ch.algo != INCOLL_ALGO_RING ||
            incoll_select(world, INCOLL_COLL_ALLREDUCE, INCOLL_FORM_BLOCKING,
                          64, INCOLL_FLOAT32, NULL) != INCOLL_PATH_INC ||
            incoll_ctx_select(ctx, 2, INCOLL_COLL_SCATTER, INCOLL_FORM_NB, 8,
                              INCOLL_DTYPE_COUNT, NULL) != INCOLL_PATH_INC)
            RANK_FAIL("the selection table in force is not rank 0's");
        if (incoll_ctx_table(ctx, &ti) != INCOLL_OK || ti.entries != 2 ||
            strcmp(ti.override,
                   "bcast:0-1K:mpi,allreduce:blocking:0-64:ring:dtype=int"))
            RANK_FAIL("table info: %d entries, override '%s'", ti.entries,
                      ti.override);
    }

    /* In the network: the world of a fabric.conf fabric. */
    if (sum_check(rank, world, size, 1000, INCOLL_ALGO_AUTO))
        return 1;
    if (incoll_comm_where(world, &w) != INCOLL_OK || !w.in_network ||
        w.why != INCOLL_WHY_NETWORK)
        RANK_FAIL("offloaded allreduce: where %d/%d (%s)", w.in_network,
                  (int)w.why, w.text);
    /* Asked for on the hosts. */
    if (sum_check(rank, world, size, 1000, INCOLL_ALGO_RING))
        return 1;
    if (incoll_comm_where(world, &w) != INCOLL_OK || w.in_network ||
        w.why != INCOLL_WHY_ALGO)
        RANK_FAIL("ring allreduce: where %d/%d (%s)", w.in_network, (int)w.why,
                  w.text);
    /* A communicator without a fabric group (no manager makes one): on
     * the hosts, saying why. */
    st = incoll_comm_split(world, rank % 2, rank, &half);
    if (st != INCOLL_OK)
        RANK_FAIL("split: %s", incoll_status_string(st));
    if (sum_check(rank / 2, half, OOB_N / 2, 100, INCOLL_ALGO_AUTO))
        return 1;
    if (incoll_comm_where(half, &w) != INCOLL_OK || w.in_network ||
        w.why != INCOLL_WHY_NO_GROUP || !strstr(w.text, "no fabric group"))
        RANK_FAIL("split allreduce: where %d/%d (%s)", w.in_network, (int)w.why,
                  w.text);
    st = incoll_barrier(half);
    if (st != INCOLL_OK || incoll_comm_where(half, &w) != INCOLL_OK ||
        w.in_network || w.why != INCOLL_WHY_NO_GROUP)
        RANK_FAIL("split barrier: %s, where %d/%d (%s)",
                  incoll_status_string(st), w.in_network, (int)w.why, w.text);

    /* A timed wait that times out, and the request completing later
     * through explicit progress: rank 0 starts first and waits 50 ms
     * while the others wait for its word before they start theirs. */
    for (int i = 0; i < 256; i++)
        in[i] = rank + i;
    t0 = now_s();
    while (rank != 0 && !__atomic_load_n(&shm->go, __ATOMIC_ACQUIRE)) {
        if (now_s() - t0 > 60)
            RANK_FAIL("rank 0 never said go");
        usleep(1000);
    }
    st = incoll_iallreduce(world, in, out, 256, INCOLL_INT32, INCOLL_OP_MAX,
                           &req);
    if (st != INCOLL_OK)
        RANK_FAIL("iallreduce: %s", incoll_status_string(st));
    if (rank == 0) {
        t0 = now_s();
        st = incoll_req_wait_timeout(req, 50000000ull);
        if (st != INCOLL_WAIT_TIMEOUT)
            RANK_FAIL("wait_timeout before the others started: %s",
                      incoll_status_string(st));
        /* (at least the timeout; the bound only catches a hang) */
        if (now_s() - t0 < 0.045 || now_s() - t0 > 30)
            RANK_FAIL("wait_timeout of 50 ms took %.3f s", now_s() - t0);
        if (incoll_req_where(req, &w) != INCOLL_INPROGRESS)
            RANK_FAIL("where of a running request is not in progress");
        if (incoll_req_wait_timeout(req, 0) != INCOLL_WAIT_TIMEOUT)
            RANK_FAIL("a zero timeout while the others wait");
        __atomic_store_n(&shm->go, 1, __ATOMIC_RELEASE);
    }
    t0 = now_s();
    while (!incoll_req_completed(req)) {
        if (incoll_progress(ctx) != INCOLL_OK)
            RANK_FAIL("progress failed");
        if (now_s() - t0 > 20)
            RANK_FAIL("the request did not complete in 20 s of progress");
        usleep(200);
    }
    if (incoll_req_where(req, &w) != INCOLL_OK || !w.in_network ||
        w.why != INCOLL_WHY_NETWORK)
        RANK_FAIL("iallreduce: where %d/%d (%s)", w.in_network, (int)w.why,
                  w.text);
    st = incoll_req_wait_timeout(req, 1000000000ull);
    if (st != INCOLL_OK)
        RANK_FAIL("the completed request: %s", incoll_status_string(st));
    for (int i = 0; i < 256; i++)
        if (out[i] != OOB_N - 1 + i)
            RANK_FAIL("iallreduce: element %d is %d, not %d", i, (int)out[i],
                      OOB_N - 1 + i);

    /* A host-based algorithm as a request, on a communicator whose
     * collectives run in the network: on the hosts, the answer exact;
     * nonblocking (ring) and persistent (recursive doubling). */
    if (incoll_iallreduce_algo(world, INCOLL_ALGO_COUNT, in, out, 256,
                               INCOLL_INT32, INCOLL_OP_SUM,
                               &req) != INCOLL_ERR_INVALID_ARG)
        RANK_FAIL("iallreduce_algo took an algorithm out of range");
    for (int k = 0; k < 2; k++) {
        memset(out, 0, sizeof(out));
        st = k == 0
                 ? incoll_iallreduce_algo(world, INCOLL_ALGO_RING, in, out, 256,
                                          INCOLL_INT32, INCOLL_OP_SUM, &req)
                 : incoll_allreduce_init_algo(world, INCOLL_ALGO_RD, in, out,
                                              256, INCOLL_INT32, INCOLL_OP_SUM,
                                              &req);
        if (st == INCOLL_OK && k == 1)
            st = incoll_req_start(req);
        while (st == INCOLL_OK && !incoll_req_completed(req))
            st = incoll_progress(ctx);
        if (st != INCOLL_OK || incoll_req_where(req, &w) != INCOLL_OK ||
            w.in_network)
            RANK_FAIL("%s allreduce on a host algorithm: %s, in network %d",
                      k ? "persistent" : "nonblocking",
                      incoll_status_string(st), w.in_network);
        st = incoll_req_wait(req);
        if (k == 1)
            incoll_req_free(req);
        for (int i = 0; i < 256 && st == INCOLL_OK; i++)
            if (out[i] != OOB_N * i + OOB_N * (OOB_N - 1) / 2)
                RANK_FAIL("host-algorithm allreduce: element %d is %d", i,
                          (int)out[i]);
        if (st != INCOLL_OK)
            RANK_FAIL("host-algorithm allreduce: %s", incoll_status_string(st));
    }

    /* A persistent request on the hosts: its where after each run. */
    st = incoll_allreduce_init(half, in, out, 16, INCOLL_INT32, INCOLL_OP_SUM,
                               &req);
    if (st != INCOLL_OK || incoll_req_where(req, &w) != INCOLL_OK ||
        w.why != INCOLL_WHY_NONE)
        RANK_FAIL("persistent request before its start: %s, where %d",
                  incoll_status_string(st), (int)w.why);
    if (incoll_req_start(req) != INCOLL_OK || incoll_req_wait(req) != INCOLL_OK)
        RANK_FAIL("persistent allreduce failed");
    if (incoll_req_where(req, &w) != INCOLL_OK || w.in_network ||
        w.why != INCOLL_WHY_NO_GROUP)
        RANK_FAIL("persistent allreduce: where %d/%d (%s)", w.in_network,
                  (int)w.why, w.text);
    incoll_req_free(req);
    incoll_comm_destroy(half);
    st = incoll_finalize(ctx);
    if (st != INCOLL_OK)
        RANK_FAIL("finalize: %s", incoll_status_string(st));
    return 0;
}

/* OOB_N processes with no INCOLL_ identity bootstrap a world through the
 * test's own allgather and barrier, on a fabric.conf fabric. */
TEST_LIMIT(api_oob_world, TEST_INTEG, 120)
{
    char dir[1024];
    oob_shm_t *shm;
    pthread_barrierattr_t a;
    pid_t pids[OOB_N];
    int failed = 0;

    if (!have_fabric_binaries("nb_check"))
        return test_skip("build/bin/incoll or incoll-agg missing (make)");
    snprintf(dir, sizeof(dir), "%.900s/oob", test_tmpdir());
    if (test_fabric_up(dir, OOB_N, 2) != 0 || assign_host_ports(dir) != 0) {
        test_fabric_down(dir);
        FAILF("could not bring a fabric of %d hosts up in %s", OOB_N, dir);
    }
    shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(shm != MAP_FAILED);
    memset(shm, 0, sizeof(*shm));
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&shm->bar, &a, OOB_N);
    fflush(NULL);
    for (int r = 0; r < OOB_N; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(100);
            _exit(oob_rank(shm, r, dir));
        }
    }
    for (int r = 0; r < OOB_N; r++) {
        int status = 0;
        if (pids[r] < 0 || waitpid(pids[r], &status, 0) != pids[r] ||
            !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "    rank %d: exit status 0x%x\n", r, status);
            failed++;
        }
    }
    test_fabric_down(dir);
    CHECK_MSG(failed == 0, "%d of %d ranks failed", failed, OOB_N);
    /* incoll_finalize ran the caller's barrier once per rank. */
    CHECK_EQ_INT(shm->barriers, OOB_N);
    munmap(shm, sizeof(*shm));
    return TEST_PASSED;
}
