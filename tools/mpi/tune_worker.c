/*
 * incoll-tune-mpi: the ranks of `incoll tune` (tools/cmd_tune.c). An MPI
 * program run through `incoll mpirun` with libincoll_mpi preloaded: for
 * each collective, form (blocking, nonblocking) and size it times the
 * program's MPI_ call (through the layer) and the MPI library's own (its
 * PMPI_ twin) side by side, OSU-style: every iteration runs both, in an
 * order that alternates, each after an untimed PMPI_Barrier; latency is
 * averaged per rank over the iterations, then over ranks. Every result is
 * checked outside the timing (a wrong one aborts the job).
 *
 *   incoll-tune-mpi [--sizes LO:HI] [--iters N] [--passes N]
 *                   [--margin PCT] [--colls LIST] [--forms blocking,nb]
 *                   [--out FILE] [--shape TEXT] [--cmd TEXT]
 *                   [--save-us FILE] [--host ALGO:FILE]... [--only-layer]
 *                   [--stat mean|median] [--pin]
 *
 * Sizes go from LO to HI by factors of 4 (default 4:1M), in the unit the
 * selection table uses (src/common/tune.h): the whole vector of an
 * allreduce, reduce and bcast, a rank's block of an allgather, gather and
 * scatter, a rank's result of a reduce_scatter(_block); the barrier once.
 * Ints (MPI_SUM), roots 0. Rank 0 prints a line per measurement
 *
 *   tune: bcast blocking 1024 layer_us 201.3 mpi_us 402.7 mpi/layer 2.00 inc
 *     switches a call (voluntary, involuntary) layer 0.10 2.31 mpi 0 2.25
 *
 * (on one line; the switches are the calling thread's inside the timed
 * calls of the last pass, read outside the timing, averaged over
 * iterations and ranks: a voluntary one is a sleep; each column the
 * least of --passes measurements, default 2: a pass
 * slowed by other work on the machine does not decide) and with --out
 * writes the selection table (its entries for this many ranks and up,
 * ranks=N-): for each collective and form, the size
 * ranges where MPI's own was faster by more than --margin percent
 * (default 5, the run-to-run noise here: within it the network keeps
 * the call) ("mpi") or not ("inc"); a measured size decides the sizes up to the
 * next one, the first from 0, the last and up; the nonblocking decision stands
 * for the persistent form too. --save-us FILE has rank 0 write each
 * measurement's layer column ("COLL FORM BYTES US" lines); --host
 * ALGO:FILE reads such a file, made by a run whose table sent the
 * allreduce to libincoll's host-based algorithm ALGO (rd, ring,
 * rabenseifner), as a candidate for the allreduce (each form its own
 * times; given once per algorithm, up to HOST_MAX): a size goes to the
 * fastest of them that beat the layer's call in libincoll by more than
 * the margin, unless MPI's own beat that one by more than the margin.
 * --only-layer
 * times the MPI_ call alone, OSU's loop (the same call each iteration, a
 * barrier between them; `incoll tune`'s check of the table it wrote,
 * with the table in force and without the layer). `incoll tune` runs it with
 * INCOLL_TUNE=all:*:inc, so the layer's column is the call in libincoll; run
 * with the layer's defaults it measures the table in force against MPI's own.
 * --stat median takes each rank's median over the iterations in place of
 * its mean (then the mean over ranks, as before): one iteration that the
 * machine's scheduler held for milliseconds does not decide a cell.
 * --pin binds every thread of rank r to the (r mod n)-th of the n CPUs it
 * may run on, for a fabric emulated on one machine, where the ranks of
 * all hosts share its cores (on a cluster, mpirun's binding does this);
 * rank 0 prints where each rank runs ("tune: rank R on CPU C").
 */
#include <mpi.h>

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum {
    C_ALLREDUCE,
    C_REDUCE,
    C_BCAST,
    C_BARRIER,
    C_ALLGATHER,
    C_GATHER,
    C_SCATTER,
    C_RSB,
    C_RS,
    C_COUNT
};
/* The selection table's names (src/common/tune.h). */
static const char *const names[C_COUNT] = {
    "allreduce",     "reduce", "bcast",   "barrier",
    "allgather",     "gather", "scatter", "reduce_scatter_block",
    "reduce_scatter"};
static const char *const form_names[2] = {"blocking", "nb"};

#define MAX_SIZES 32

static int rank, size;
static int *sendb, *recvb, *counts;

static void die(const char *what, const char *form, long bytes, long i)
{
    fprintf(stderr, "tune: rank %d: WRONG %s %s of %ld bytes at element %ld\n",
            rank, what, form, bytes, i);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One call of collective c, n ints per unit; layer: the MPI_ call (through
 * the layer), else PMPI_; nb: the nonblocking form and its wait. */
static void run(int c, int n, int layer, int nb)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request rq = MPI_REQUEST_NULL;
    int ret = MPI_SUCCESS;

#define CALL(B, I, ...)                                                        \
    do {                                                                       \
        if (nb)                                                                \
            ret = layer ? MPI_##I(__VA_ARGS__, &rq)                            \
                        : PMPI_##I(__VA_ARGS__, &rq);                          \
        else                                                                   \
            ret = layer ? MPI_##B(__VA_ARGS__) : PMPI_##B(__VA_ARGS__);        \
    } while (0)
    switch (c) {
    case C_ALLREDUCE:
        CALL(Allreduce, Iallreduce, sendb, recvb, n, MPI_INT, MPI_SUM, w);
        break;
    case C_REDUCE:
        CALL(Reduce, Ireduce, sendb, recvb, n, MPI_INT, MPI_SUM, 0, w);
        break;
    case C_BCAST:
        CALL(Bcast, Ibcast, recvb, n, MPI_INT, 0, w);
        break;
    case C_BARRIER:
        if (nb)
            ret = layer ? MPI_Ibarrier(w, &rq) : PMPI_Ibarrier(w, &rq);
        else
            ret = layer ? MPI_Barrier(w) : PMPI_Barrier(w);
        break;
    case C_ALLGATHER:
        CALL(Allgather, Iallgather, sendb, n, MPI_INT, recvb, n, MPI_INT, w);
        break;
    case C_GATHER:
        CALL(Gather, Igather, sendb, n, MPI_INT, recvb, n, MPI_INT, 0, w);
        break;
    case C_SCATTER:
        CALL(Scatter, Iscatter, sendb, n, MPI_INT, recvb, n, MPI_INT, 0, w);
        break;
    case C_RSB:
        CALL(Reduce_scatter_block, Ireduce_scatter_block, sendb, recvb, n,
             MPI_INT, MPI_SUM, w);
        break;
    default:
        CALL(Reduce_scatter, Ireduce_scatter, sendb, recvb, counts, MPI_INT,
             MPI_SUM, w);
    }
#undef CALL
    if (ret == MPI_SUCCESS && nb)
        ret = MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (ret != MPI_SUCCESS)
        die(names[c], nb ? "nb" : "blocking", (long)n * 4, -1);
}

/* Rank r's i-th int of iteration it. */
static int val(int r, long i, int it)
{
    return (int)((r * 3 + i + it) % 101);
}

static long in_ints(int c, int n)
{
    return c == C_SCATTER || c == C_RSB || c == C_RS ? (long)n * size : n;
}

static void prepare(int c, int n, int it)
{
    long k = in_ints(c, n);
    for (long i = 0; i < k; i++)
        sendb[i] = val(rank, i, it);
    if (c == C_BCAST)
        for (long i = 0; i < n; i++)
            recvb[i] = rank == 0 ? val(0, i, it) : -1;
    else
        memset(recvb, 0xee, (size_t)n * size * sizeof(int));
}

static void verify(int c, int n, int it, int nb)
{
    long bytes = (long)n * 4;
    const char *f = form_names[nb];
    switch (c) {
    case C_BARRIER:
        return;
    case C_BCAST:
        for (long i = 0; i < n; i++)
            if (recvb[i] != val(0, i, it))
                die(names[c], f, bytes, i);
        return;
    case C_ALLREDUCE:
    case C_REDUCE:
    case C_RSB:
    case C_RS: {
        long off = c == C_RSB || c == C_RS ? (long)rank * n : 0;
        if (c == C_REDUCE && rank != 0)
            return;
        for (long i = 0; i < n; i++) {
            int want = 0;
            for (int r = 0; r < size; r++)
                want += val(r, off + i, it);
            if (recvb[i] != want)
                die(names[c], f, bytes, i);
        }
        return;
    }
    case C_ALLGATHER:
    case C_GATHER:
        if (c == C_GATHER && rank != 0)
            return;
        for (int r = 0; r < size; r++)
            for (long i = 0; i < n; i++)
                if (recvb[(long)r * n + i] != val(r, i, it))
                    die(names[c], f, bytes, (long)r * n + i);
        return;
    default: /* scatter */
        for (long i = 0; i < n; i++)
            if (recvb[i] != val(0, (long)rank * n + i, it))
                die(names[c], f, bytes, i);
    }
}

/* 1: time the MPI_ call alone (--only-layer), OSU's loop: the same call
 * iteration after iteration, a barrier between them. */
static int only_layer;

/* The calling thread's context switches: voluntary (it slept) and
 * involuntary (it was preempted, or yielded to another). */
static void thread_switches(long sw[2])
{
    struct rusage ru;
    sw[0] = sw[1] = 0;
    if (getrusage(RUSAGE_THREAD, &ru) == 0) {
        sw[0] = ru.ru_nvcsw;
        sw[1] = ru.ru_nivcsw;
    }
}

/* The last measurement's context switches of the calling thread inside
 * the timed calls, a call's average over iterations and ranks:
 * [column: 0 MPI's own, 1 the layer's][0 voluntary, 1 involuntary]. */
static double switches[2][2];

/* --stat median: each rank's median over the iterations, not its mean. */
static int use_median;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts it). */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Average latency over ranks in us of the layer's call (t[1]) and MPI's
 * own (t[0], 0 with only_layer) for c, form nb, n ints, each rank's mean
 * or (--stat median) median over iters iterations; the context switches
 * inside the calls (read outside the timing) into switches. */
static void measure(int c, int n, int nb, int iters, double avg[2])
{
    double t[6] = {0, 0, 0, 0, 0, 0}, sum[6];
    double *each[2] = {NULL, NULL};
    int warm = iters / 10 < 2 ? 2 : iters / 10;

    if (use_median) {
        each[0] = malloc(sizeof(double) * (size_t)iters);
        each[1] = malloc(sizeof(double) * (size_t)iters);
        if (each[0] == NULL || each[1] == NULL)
            MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int it = 0; it < warm + iters; it++) {
        for (int k = only_layer; k < 2; k++) {
            int layer = only_layer ? 1 : (k + it) % 2;
            double t0, t1;
            long sw0[2], sw1[2];
            prepare(c, n, it);
            PMPI_Barrier(MPI_COMM_WORLD);
            thread_switches(sw0);
            t0 = MPI_Wtime();
            run(c, n, layer, nb);
            t1 = MPI_Wtime();
            thread_switches(sw1);
            if (it >= warm) {
                t[layer] += t1 - t0;
                if (each[layer])
                    each[layer][it - warm] = t1 - t0;
                t[2 + 2 * layer] += (double)(sw1[0] - sw0[0]);
                t[3 + 2 * layer] += (double)(sw1[1] - sw0[1]);
            }
            verify(c, n, it, nb);
        }
    }
    for (int k = 0; k < 2; k++)
        t[k] = (use_median && (k == 1 || !only_layer) ? median(each[k], iters)
                                                      : t[k] / iters) *
               1e6;
    free(each[0]);
    free(each[1]);
    PMPI_Allreduce(t, sum, 6, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    avg[0] = sum[0] / size;
    avg[1] = sum[1] / size;
    for (int k = 0; k < 2; k++)
        for (int v = 0; v < 2; v++)
            switches[k][v] = sum[2 + 2 * k + v] / iters / size;
}

/* --pin: every thread of this process onto the (rank mod n)-th of the n
 * CPUs it may run on; rank 0 prints where each rank runs. */
static void pin_threads(void)
{
    cpu_set_t allowed, one;
    int cpu = -1, want, k = 0, *where = NULL;
    DIR *d;
    struct dirent *e;

    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
        CPU_COUNT(&allowed) < 1) {
        fprintf(stderr, "tune: rank %d: --pin: cannot read its CPUs\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    want = rank % CPU_COUNT(&allowed);
    for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
        if (CPU_ISSET(c, &allowed) && k++ == want)
            cpu = c;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    /* Every thread: MPI's and the layer's started in MPI_Init. */
    d = opendir("/proc/self/task");
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' &&
            sched_setaffinity(atoi(e->d_name), sizeof(one), &one) != 0) {
            fprintf(stderr, "tune: rank %d: --pin: CPU %d: cannot bind\n", rank,
                    cpu);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    if (d)
        closedir(d);
    sched_yield();
    cpu = sched_getcpu();
    if (rank == 0 && (where = malloc(sizeof(int) * (size_t)size)) == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    PMPI_Gather(&cpu, 1, MPI_INT, where, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf("tune: rank %d on CPU %d\n", r, where[r]);
        fflush(stdout);
    }
    free(where);
}

/* A size with an optional binary suffix. */
static long parse_size(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    return *end == '\0' || *end == ':' ? v : -1;
}

static void fmt_size(long v, char *buf, size_t len)
{
    if (v >= 1024 && v % (1 << 20) == 0)
        snprintf(buf, len, "%ldM", v >> 20);
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(buf, len, "%ldK", v >> 10);
    else
        snprintf(buf, len, "%ld", v);
}

/* --host's candidates: a decision of 2 + i names host_algo[i]. */
#define HOST_MAX 4
static char host_algo[HOST_MAX][32];
static const char *host_path[HOST_MAX];
static int nhost;

static const char *decision_name(int d)
{
    return d >= 2 ? host_algo[d - 2] : d ? "mpi" : "inc";
}

/* The host-based algorithm's time for the allreduce of form and bytes,
 * from the --host file; -1 when it has none. */
static double host_us(const char *path, const char *want_form, long bytes)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    char coll[32], form[16];
    long b;
    double us, got = -1;
    if (f == NULL)
        return -1;
    while (fscanf(f, "%31s %15s %ld %lf", coll, form, &b, &us) == 4)
        if (strcmp(coll, "allreduce") == 0 && strcmp(form, want_form) == 0 &&
            b == bytes)
            got = us;
    fclose(f);
    return got;
}

/* The entries of one collective and form: the sizes' decisions (0: inc,
 * 1: mpi, 2 + i: host algorithm i) as ranges, adjacent equal ones
 * merged, each for the job's rank count and up (ranks=N-: `incoll tune
 * --merge` narrows them where a table has rows for more ranks). */
static void write_entries(FILE *out, int c, const char *form, const long *sizes,
                          const int *mpi, int ns)
{
    for (int i = 0; i < ns;) {
        int j = i;
        char lo[32], hi[32];
        while (j + 1 < ns && mpi[j + 1] == mpi[i])
            j++;
        fmt_size(i == 0 ? 0 : sizes[i], lo, sizeof(lo));
        if (j + 1 == ns) {
            if (i == 0)
                fprintf(out, "%s:%s * %s ranks=%d-\n", names[c], form,
                        decision_name(mpi[i]), size);
            else
                fprintf(out, "%s:%s %s- %s ranks=%d-\n", names[c], form, lo,
                        decision_name(mpi[i]), size);
        } else {
            fmt_size(sizes[j + 1] - 1, hi, sizeof(hi));
            fprintf(out, "%s:%s %s-%s %s ranks=%d-\n", names[c], form, lo, hi,
                    decision_name(mpi[i]), size);
        }
        i = j + 1;
    }
}

/* The command line. */
typedef struct {
    long lo, hi; /* --sizes */
    int iters, passes;
    double margin;
    int want[C_COUNT]; /* --colls */
    int forms[2];      /* --forms: blocking, nb */
    const char *out_path, *shape, *cmd, *save_path;
    int pin; /* --pin */
} opts_t;

/* The collectives --colls names (a comma-separated list) into want. */
static void parse_colls(const char *v, int want[C_COUNT])
{
    for (int c = 0; c < C_COUNT; c++) {
        const char *p = v;
        size_t n = strlen(names[c]);
        want[c] = 0;
        while ((p = strstr(p, names[c])) != NULL) {
            if ((p == v || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
                want[c] = 1;
            p += n;
        }
    }
}

/* An argument that is not ours (arg), or with arg NULL values out of
 * range: the job ends. */
static __attribute__((noreturn)) void bad_args(const char *arg)
{
    if (rank == 0 && arg)
        fprintf(stderr, "tune: bad argument '%s'\n", arg);
    else if (rank == 0)
        fprintf(stderr, "tune: bad --sizes, --iters, --passes or --margin\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* The command line into *o (the defaults for what it does not say); a
 * bad one ends the job. */
static void parse_args(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->lo = 4;
    o->hi = 1 << 20;
    o->iters = 50;
    o->passes = 2;
    o->margin = 5;
    o->forms[0] = o->forms[1] = 1;
    o->shape = o->cmd = "";
    for (int c = 0; c < C_COUNT; c++)
        o->want[c] = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--only-layer") == 0) {
            only_layer = 1;
            continue;
        }
        if (strcmp(a, "--pin") == 0) {
            o->pin = 1;
            continue;
        }
        if (v == NULL)
            bad_args(a);
        i++;
        if (strcmp(a, "--sizes") == 0) {
            const char *colon = strchr(v, ':');
            o->lo = parse_size(v);
            o->hi = colon ? parse_size(colon + 1) : o->lo;
        } else if (strcmp(a, "--iters") == 0) {
            o->iters = atoi(v);
        } else if (strcmp(a, "--passes") == 0) {
            o->passes = atoi(v);
        } else if (strcmp(a, "--margin") == 0) {
            o->margin = atof(v);
        } else if (strcmp(a, "--out") == 0) {
            o->out_path = v;
        } else if (strcmp(a, "--save-us") == 0) {
            o->save_path = v;
        } else if (strcmp(a, "--host") == 0 && strchr(v, ':') &&
                   nhost < HOST_MAX) {
            snprintf(host_algo[nhost], sizeof(host_algo[nhost]), "%.*s",
                     (int)(strchr(v, ':') - v), v);
            host_path[nhost++] = strchr(v, ':') + 1;
        } else if (strcmp(a, "--shape") == 0) {
            o->shape = v;
        } else if (strcmp(a, "--cmd") == 0) {
            o->cmd = v;
        } else if (strcmp(a, "--forms") == 0) {
            o->forms[0] = strstr(v, "blocking") != NULL;
            o->forms[1] = strstr(v, "nb") != NULL;
        } else if (strcmp(a, "--colls") == 0) {
            parse_colls(v, o->want);
        } else if (strcmp(a, "--stat") == 0 &&
                   (strcmp(v, "mean") == 0 || strcmp(v, "median") == 0)) {
            use_median = strcmp(v, "median") == 0;
        } else {
            bad_args(a);
        }
    }
    if (o->lo < 4 || o->hi < o->lo || o->hi > (64l << 20) || o->iters < 1 ||
        o->passes < 1 || o->passes > 100 || o->margin < 0 || o->margin > 1000)
        bad_args(NULL);
}

/* Where the allreduce of form nb and bytes goes with --host's
 * algorithms as candidates besides the layer's call and MPI's own (avg:
 * MPI's own, the layer's), decided on rank 0 from their files and sent to
 * every rank: 0 inc, 1 mpi, 2 + i host algorithm i (the fastest of those
 * that beat the layer's call by more than the margin). */
static int host_decision(const opts_t *o, int nb, long bytes,
                         const double avg[2])
{
    int d = 0;
    if (rank == 0) {
        double best = avg[1];
        for (int i = 0; i < nhost; i++) {
            double h = host_us(host_path[i], form_names[nb], bytes);
            if (h > 0 && h * (1 + o->margin / 100) < avg[1] && h < best) {
                d = 2 + i;
                best = h;
            }
            printf("tune: %-20s %-8s %8ld %s_us %10.1f\n", names[C_ALLREDUCE],
                   form_names[nb], bytes, host_algo[i], h);
        }
        if (avg[0] * (1 + o->margin / 100) < best)
            d = 1;
    }
    PMPI_Bcast(&d, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return d;
}

/* Measures collective c, form nb, at bytes (the least of --passes
 * measurements of each column), reports it (rank 0's line, and --save-us's
 * file on rank 0) and returns the decision. */
static int measure_size(const opts_t *o, int c, int nb, long bytes, FILE *save)
{
    int n = (int)(bytes / 4), d;
    /* Fewer iterations for the large sizes (OSU does too). */
    long it_n = (long)o->iters * 4096 / (bytes > 4096 ? bytes : 4096);
    int it = it_n < 4 ? 4 : (int)it_n;
    double avg[2] = {0, 0};

    for (int r = 0; r < size; r++)
        counts[r] = n;
    for (int p = 0; p < o->passes; p++) {
        double one[2];
        measure(c, n, nb, it, one);
        for (int q = 0; q < 2; q++)
            avg[q] = p == 0 || one[q] < avg[q] ? one[q] : avg[q];
    }
    d = avg[0] * (1 + o->margin / 100) < avg[1];
    if (nhost > 0 && c == C_ALLREDUCE)
        d = host_decision(o, nb, bytes, avg);
    if (save)
        fprintf(save, "%s %s %ld %.3f\n", names[c], form_names[nb],
                c == C_BARRIER ? 0 : bytes, avg[1]);
    if (rank == 0) {
        printf("tune: %-20s %-8s %8ld layer_us %10.1f mpi_us "
               "%10.1f mpi/layer %5.2f %-4s switches a call (voluntary, "
               "involuntary) layer %.2f %.2f mpi %.2f %.2f\n",
               names[c], form_names[nb], c == C_BARRIER ? 0 : bytes, avg[1],
               avg[0], avg[1] > 0 ? avg[0] / avg[1] : 0, decision_name(d),
               switches[1][0], switches[1][1], switches[0][0], switches[0][1]);
        fflush(stdout);
    }
    return d;
}

/* Every wanted collective, form and size: the decisions into mpi (the
 * barrier's first size stands for all). */
static void run_all(const opts_t *o, const long *sizes, int ns,
                    int mpi[C_COUNT][2][MAX_SIZES])
{
    FILE *save = NULL;

    if (rank == 0 && o->save_path &&
        (save = fopen(o->save_path, "w")) == NULL) {
        perror(o->save_path);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (int c = 0; c < C_COUNT; c++)
        for (int nb = 0; nb < 2; nb++) {
            if (!o->want[c] || !o->forms[nb])
                continue;
            for (int k = 0; k < ns; k++)
                mpi[c][nb][k] = c == C_BARRIER && k > 0
                                    ? mpi[c][nb][0]
                                    : measure_size(o, c, nb, sizes[k], save);
        }
    if (save && fclose(save) != 0) {
        perror(o->save_path);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* Rank 0: the selection table of the decisions into --out's file. */
static void write_table(const opts_t *o, const long *sizes, int ns,
                        int mpi[C_COUNT][2][MAX_SIZES])
{
    time_t now = time(NULL);
    char when[64];
    FILE *out;

    strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    out = fopen(o->out_path, "w");
    if (out == NULL) {
        perror(o->out_path);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    fprintf(out,
            "# incoll selection table (src/common/tune.h), made by\n"
            "# %s\n# on %s: %d ranks, %d iterations a size (fewer "
            "above 4 KiB), each rank's %s, least of %d passes, margin "
            "%g%%\n",
            o->cmd[0] ? o->cmd : "incoll-tune-mpi", when, size, o->iters,
            use_median ? "median" : "mean", o->passes, o->margin);
    fprintf(out, "shape %s%sranks=%d\n", o->shape, o->shape[0] ? " " : "",
            size);
    for (int c = 0; c < C_COUNT; c++) {
        int nsz = c == C_BARRIER ? 1 : ns;
        if (!o->want[c])
            continue;
        if (o->forms[0])
            write_entries(out, c, "blocking", sizes, mpi[c][0], nsz);
        if (o->forms[1]) {
            write_entries(out, c, "nb", sizes, mpi[c][1], nsz);
            write_entries(out, c, "persistent", sizes, mpi[c][1], nsz);
        }
    }
    if (fclose(out) != 0) {
        perror(o->out_path);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    printf("tune: wrote %s\n", o->out_path);
}

int main(int argc, char **argv)
{
    static int mpi[C_COUNT][2][MAX_SIZES];
    long sizes[MAX_SIZES];
    int ns = 0;
    opts_t o;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    parse_args(argc, argv, &o);
    if (o.pin)
        pin_threads();
    for (long s = o.lo; s <= o.hi && ns < MAX_SIZES; s *= 4)
        sizes[ns++] = s & ~3l;
    sendb = malloc((size_t)o.hi * size + 64);
    recvb = malloc((size_t)o.hi * size + 64);
    counts = malloc(sizeof(int) * (size_t)size);
    if (sendb == NULL || recvb == NULL || counts == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    run_all(&o, sizes, ns, mpi);
    if (rank == 0 && o.out_path)
        write_table(&o, sizes, ns, mpi);
    if (rank == 0)
        printf("tune: ok\n");
    free(sendb);
    free(recvb);
    free(counts);
    MPI_Finalize();
    return 0;
}
