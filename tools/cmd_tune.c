/*
 * `incoll tune`: measures where each collective is fastest on a fabric
 * and writes the MPI layer's selection table (src/common/tune.h,
 * docs/tuning.md). It runs the MPI program incoll-tune-mpi
 * (tools/mpi/tune_worker.c) through `incoll mpirun` with the layer
 * preloaded and INCOLL_TUNE=all:*:inc, so that every call through the
 * layer runs in libincoll; the worker times that and the MPI library's
 * own side by side, checks every result, and rank 0 writes the table.
 * Then the table is read back as the layer would read it.
 */
#include "cli.h"

#include "common/fabric_conf.h"
#include "common/tune.h"
#include "common/log.h"
#include "mgr/topo.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TUNE_WORKER "incoll-tune-mpi"

/* libincoll's host-based allreduce algorithms the tuner can measure, as
 * the table names them. */
#define TUNE_HOST_ALGOS 3
static const char *const host_algos[TUNE_HOST_ALGOS] = {"rd", "ring",
                                                        "rabenseifner"};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: incoll tune -n P [--fabric DIR | --emulate [--link-rate "
            "R]]\n"
            "                   [--radix K] [--ppn K] [--sizes LO:HI] "
            "[--iters N]\n"
            "                   [--passes N] [--margin PCT]\n"
            "                   [--colls LIST] [--forms blocking,nb] [--out "
            "FILE]\n"
            "                   [--host-algos LIST] [--merge FILE]\n"
            "                   [--stat mean|median] [--pin] [--timeout SEC] "
            "[--no-verify]\n"
            "\n"
            "Measures each collective of the MPI layer (blocking and "
            "nonblocking, sizes\n"
            "LO to HI by factors of 4) in libincoll and in the MPI library's "
            "own, side by\n"
            "side on P ranks of the fabric, every result checked, and writes "
            "the\n"
            "selection table: where each call is faster (docs/tuning.md).\n"
            "\n"
            "  -n, --np P       ranks\n"
            "  --fabric DIR     a running fabric (default: one made for the "
            "run, as\n"
            "                   `incoll mpirun` does); the table goes to "
            "DIR/tune.conf,\n"
            "                   where the layer of every job on DIR reads it\n"
            "  --emulate, --link-rate R, --radix K, --ppn K\n"
            "                   the fabric made for the run (incoll mpirun)\n"
            "  --sizes LO:HI    bytes (K, M suffixes; default 4:1M)\n"
            "  --iters N        iterations a size up to 4 KiB (default 50; "
            "fewer above)\n"
            "  --passes N       measure each size N times, keep the least "
            "(default 2)\n"
            "  --margin PCT     MPI's own must be faster by more than PCT "
            "percent to\n"
            "                   take a call from libincoll (default 5)\n"
            "  --colls LIST     collectives (default all of them)\n"
            "  --forms LIST     blocking, nb or both (default both; nb "
            "stands for the\n"
            "                   persistent form too)\n"
            "  --host-algos LIST\n"
            "                   libincoll's host-based allreduce algorithms "
            "measured as\n"
            "                   candidates besides the network: rd, ring, "
            "rabenseifner\n"
            "                   (default all three), or none\n"
            "  --out FILE       where to write the table (default "
            "DIR/tune.conf with\n"
            "                   --fabric, else ./tune.conf)\n"
            "  --merge FILE     merge this run into the table FILE (it may "
            "be --out's):\n"
            "                   the run's entries rule from P ranks up to the "
            "next rank\n"
            "                   count FILE has entries for, FILE's "
            "everywhere else, so\n"
            "                   runs on 8 and 16 hosts make one table\n"
            "  --stat mean|median\n"
            "                   each rank's mean (default, OSU's) or median "
            "over a size's\n"
            "                   iterations (then the mean over ranks)\n"
            "  --pin            bind rank r to the (r mod n)-th of the n CPUs "
            "it may use:\n"
            "                   for a fabric emulated on one machine\n"
            "  --timeout SEC    stop after SEC seconds (default 3600)\n"
            "  --no-verify      skip the check of the table written: by "
            "default each\n"
            "                   call is timed again, OSU-style, with the table "
            "in force and\n"
            "                   without the layer, and a call the layer "
            "still makes\n"
            "                   slower by more than the margin goes to "
            "MPI's own\n");
}

/* What the command line asks for. */
typedef struct {
    const char *np, *fabric, *link_rate, *radix, *ppn, *sizes, *iters;
    const char *colls, *passes, *margin, *forms, *out, *timeout;
    const char *host_algos, *merge, *stat;
    int emulate, no_verify, pin;
} tune_opts_t;

/* Parses argv into o. 0 to go on; else the exit status (0 after --help). */
static int tune_parse(int argc, char **argv, tune_opts_t *o, int *exit_p)
{
    static const struct option opts[] = {
        {"np", required_argument, NULL, 'n'},
        {"fabric", required_argument, NULL, 'f'},
        {"emulate", no_argument, NULL, 'e'},
        {"link-rate", required_argument, NULL, 'l'},
        {"radix", required_argument, NULL, 'r'},
        {"ppn", required_argument, NULL, 'p'},
        {"sizes", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'i'},
        {"passes", required_argument, NULL, 'P'},
        {"margin", required_argument, NULL, 'm'},
        {"colls", required_argument, NULL, 'c'},
        {"forms", required_argument, NULL, 'F'},
        {"out", required_argument, NULL, 'o'},
        {"timeout", required_argument, NULL, 't'},
        {"no-verify", no_argument, NULL, 'V'},
        {"host-algos", required_argument, NULL, 'H'},
        {"merge", required_argument, NULL, 'M'},
        {"stat", required_argument, NULL, 'S'},
        {"pin", no_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int opt;

    *o = (tune_opts_t){.radix = "4",
                       .ppn = "1",
                       .sizes = "4:1M",
                       .iters = "50",
                       .passes = "2",
                       .margin = "5",
                       .forms = "blocking,nb",
                       .host_algos = "rd,ring,rabenseifner",
                       .stat = "mean",
                       .timeout = "3600"};
    *exit_p = 2;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'n':
            o->np = optarg;
            break;
        case 'f':
            o->fabric = optarg;
            break;
        case 'e':
            o->emulate = 1;
            break;
        case 'l':
            o->link_rate = optarg;
            break;
        case 'r':
            o->radix = optarg;
            break;
        case 'p':
            o->ppn = optarg;
            break;
        case 's':
            o->sizes = optarg;
            break;
        case 'i':
            o->iters = optarg;
            break;
        case 'P':
            o->passes = optarg;
            break;
        case 'm':
            o->margin = optarg;
            break;
        case 'c':
            o->colls = optarg;
            break;
        case 'F':
            o->forms = optarg;
            break;
        case 'o':
            o->out = optarg;
            break;
        case 't':
            o->timeout = optarg;
            break;
        case 'V':
            o->no_verify = 1;
            break;
        case 'H':
            o->host_algos = optarg;
            break;
        case 'S':
            o->stat = optarg;
            break;
        case 'B':
            o->pin = 1;
            break;
        case 'M':
            o->merge = optarg;
            break;
        case 'h':
            usage(stdout);
            *exit_p = 0;
            return -1;
        default:
            usage(stderr);
            return -1;
        }
    }
    /* every word of --host-algos one of ours */
    for (const char *w = o->host_algos; strcmp(o->host_algos, "none") && *w;) {
        size_t n = strcspn(w, ",");
        int known = 0;
        for (int i = 0; i < TUNE_HOST_ALGOS; i++)
            known |=
                strlen(host_algos[i]) == n && strncmp(w, host_algos[i], n) == 0;
        if (!known) {
            fprintf(stderr,
                    "incoll tune: --host-algos: unknown algorithm '%.*s' "
                    "(rd, ring, rabenseifner or none)\n",
                    (int)n, w);
            return -1;
        }
        w += n + (w[n] == ',');
    }
    if (strcmp(o->stat, "mean") != 0 && strcmp(o->stat, "median") != 0) {
        fprintf(stderr,
                "incoll tune: --stat: '%s' is neither mean nor median\n",
                o->stat);
        return -1;
    }
    if (o->np == NULL || atoi(o->np) < 2 || optind != argc) {
        fprintf(stderr, "incoll tune: %s\n",
                o->np == NULL    ? "-n P is required"
                : optind != argc ? "unexpected arguments"
                                 : "-n wants at least 2 ranks");
        usage(stderr);
        return -1;
    }
    return 0;
}

/* The measuring job as planned: the programs, where the table goes, the
 * `incoll mpirun` command line. */
typedef struct {
    /* out_path: where the run writes its table; with --merge a file of
     * its own beside final_path, the table merged from it */
    char self[PATH_MAX], worker[PATH_MAX], out_path[PATH_MAX];
    char final_path[PATH_MAX - 8];
    char shape[256], cmdline[1024];
    char *args[64];
    /* The host-based candidates' passes (the allreduce on each of
     * libincoll's host-based algorithms), run first when the allreduce is
     * measured: their arguments (host_save: the index of the --save-us
     * value), where each one's times go, and host_arg[i] "ALGO:FILE". */
    char *host_args[64];
    char host_times[TUNE_HOST_ALGOS][PATH_MAX + 16];
    char host_arg[TUNE_HOST_ALGOS][PATH_MAX + 48];
    const char *host_algo[TUNE_HOST_ALGOS];
    int nhost, host_save;
    /* The check of the table written: the calls timed alone (OSU's loop)
     * with the table in force, then without the layer, each job's times
     * saved to its file. */
    char *verify_args[64];
    char verify_times[2][PATH_MAX + 16];
    int verify_save; /* index of the --save-us value in verify_args */
} tune_plan_t;

/*
 * The tree a job on fabric DIR is compared with (tune_apply_job): its
 * widest switch (children: switches and hosts) and its levels, as a job's
 * init finds them. fabric.conf's tree (the world's: the first tree of the
 * topology that reaches every host); where DIR/topology describes its
 * switches, a switch's children as the manager counts them there (its
 * links down and its hosts) and its level from there. 0, or 1 with the
 * cause printed.
 */
static int fabric_tree(const char *dir, uint32_t *radix_p, uint32_t *levels_p)
{
    char path[PATH_MAX + 16], err[512];
    fabric_conf_t conf;
    topo_t topo;
    uint32_t radix = 0, levels = 0;
    int found = 1;

    snprintf(path, sizeof(path), "%s/fabric.conf", dir);
    if (fabric_conf_load(path, &conf, err, sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "incoll tune: --fabric %s: %s\n", dir, err);
        return 1;
    }
    tune_conf_tree(&conf, radix_p, levels_p);
    snprintf(path, sizeof(path), "%s/topology", dir);
    if (access(path, R_OK) != 0 ||
        topo_load(path, &topo, err, sizeof(err)) != INCOLL_OK) {
        fabric_conf_free(&conf);
        return 0;
    }
    for (int a = 0; found && a < conf.nans; a++) {
        int sw = topo_find_switch(&topo, conf.ans[a].name);
        uint32_t fan;
        if (sw < 0) {
            found = 0;
            break;
        }
        fan = (uint32_t)topo.sw[sw].ndown;
        for (int h = 0; h < topo.nhosts; h++)
            fan += topo.hosts[h].leaf == sw;
        radix = fan > radix ? fan : radix;
        if ((uint32_t)topo.sw[sw].level > levels)
            levels = (uint32_t)topo.sw[sw].level;
    }
    if (found && radix > 0 && levels > 0) {
        *radix_p = radix;
        *levels_p = levels;
    }
    topo_free(&topo);
    fabric_conf_free(&conf);
    return 0;
}

/* The tree of the fabric `incoll mpirun` makes for the run: hosts on
 * switches of radix children (fabric_conf_generate's tree). 0, or 1 with
 * the cause printed. */
static int made_tree(int hosts, int radix, uint32_t *radix_p,
                     uint32_t *levels_p)
{
    fabric_conf_t conf;
    if (hosts < 1 || radix < 2 ||
        fabric_conf_generate(hosts, radix, &conf) != INCOLL_OK) {
        fprintf(stderr,
                "incoll tune: no tree of %d hosts on switches of "
                "radix %d\n",
                hosts, radix);
        return 1;
    }
    tune_conf_tree(&conf, radix_p, levels_p);
    fabric_conf_free(&conf);
    return 0;
}

/* Plans the job of o (argv for the command line it records). 0, or 1
 * with the cause printed. */
static int tune_plan(const tune_opts_t *o, int argc, char **argv,
                     tune_plan_t *p)
{
    char **args = p->args;
    uint32_t radix = 0, levels = 0;
    size_t k = 0;
    int a = 0, hosts;

    if (o->out == NULL && o->fabric)
        snprintf(p->final_path, sizeof(p->final_path), "%s/tune.conf",
                 o->fabric);
    else
        snprintf(p->final_path, sizeof(p->final_path), "%s",
                 o->out ? o->out : "tune.conf");
    snprintf(p->out_path, sizeof(p->out_path), "%s%s", p->final_path,
             o->merge ? ".run" : "");
    if (cli_self_dir(p->self, sizeof(p->self)) != 0 ||
        strlen(p->self) + sizeof("/incoll") > sizeof(p->self) ||
        cli_companion_path(CLI_PLACE_LIBEXEC, TUNE_WORKER, p->worker,
                           sizeof(p->worker)) != 0) {
        fprintf(stderr, "incoll tune: cannot find this program's directory\n");
        return 1;
    }
    strcat(p->self, "/incoll");
    if (access(p->worker, X_OK) != 0) {
        fprintf(stderr,
                "incoll tune: %s: %s (`make` builds it when mpicc is "
                "installed)\n",
                p->worker, log_strerror(errno));
        return 1;
    }
    /* the fabric's tree, which a job's shape is compared with: its widest
     * switch (on a fabric made for the run the radix, or fewer hosts) and
     * its levels */
    hosts = atoi(o->np) / (atoi(o->ppn) > 0 ? atoi(o->ppn) : 1);
    if (o->fabric ? fabric_tree(o->fabric, &radix, &levels)
                  : made_tree(hosts, atoi(o->radix), &radix, &levels))
        return 1;
    k = (size_t)snprintf(p->shape, sizeof(p->shape), "%s%s",
                         o->fabric    ? "fabric="
                         : o->emulate ? "emulated"
                                      : "loopback",
                         o->fabric ? o->fabric : "");
    /* a value not known is not written (a 0 is no range) */
    if (radix > 0 && k < sizeof(p->shape))
        k += (size_t)snprintf(p->shape + k, sizeof(p->shape) - k, " radix=%u",
                              radix);
    if (levels > 0 && k < sizeof(p->shape))
        k += (size_t)snprintf(p->shape + k, sizeof(p->shape) - k, " levels=%u",
                              levels);
    if (k < sizeof(p->shape))
        snprintf(p->shape + k, sizeof(p->shape) - k, " ppn=%s%s%s", o->ppn,
                 o->link_rate ? " link-rate=" : "",
                 o->link_rate ? o->link_rate : "");
    k = 0;
    for (int i = 0; i < argc && k < sizeof(p->cmdline); i++)
        k += (size_t)snprintf(p->cmdline + k, sizeof(p->cmdline) - k, "%s%s",
                              i ? " " : "incoll ", argv[i]);

    args[a++] = p->self;
    args[a++] = "mpirun";
    /* incoll-tune-mpi measures the PMPI layer's collectives. */
    args[a++] = "--layer";
    args[a++] = "pmpi";
    args[a++] = "-n";
    args[a++] = (char *)o->np;
    args[a++] = "--ppn";
    args[a++] = (char *)o->ppn;
    if (o->fabric) {
        args[a++] = "--fabric";
        args[a++] = (char *)o->fabric;
    } else {
        args[a++] = "--radix";
        args[a++] = (char *)o->radix;
        if (o->emulate)
            args[a++] = "--emulate";
        if (o->link_rate) {
            args[a++] = "--link-rate";
            args[a++] = (char *)o->link_rate;
        }
    }
    args[a++] = "--timeout";
    args[a++] = (char *)o->timeout;
    args[a++] = "--";
    args[a++] = p->worker;
    args[a++] = "--sizes";
    args[a++] = (char *)o->sizes;
    args[a++] = "--iters";
    args[a++] = (char *)o->iters;
    args[a++] = "--passes";
    args[a++] = (char *)o->passes;
    args[a++] = "--margin";
    args[a++] = (char *)o->margin;
    args[a++] = "--forms";
    args[a++] = (char *)o->forms;
    args[a++] = "--stat";
    args[a++] = (char *)o->stat;
    if (o->pin)
        args[a++] = "--pin";
    if (o->colls) {
        args[a++] = "--colls";
        args[a++] = (char *)o->colls;
    }
    /* The check's jobs: the main job's arguments up to the worker's own,
     * the calls timed alone, their times saved. */
    {
        int b = 0;
        for (int i = 0; i < a; i++)
            p->verify_args[b++] = args[i];
        snprintf(p->verify_times[0], sizeof(p->verify_times[0]), "%s.table-us",
                 p->out_path);
        snprintf(p->verify_times[1], sizeof(p->verify_times[1]), "%s.mpi-us",
                 p->out_path);
        p->verify_args[b++] = "--only-layer";
        p->verify_args[b++] = "--save-us";
        p->verify_save = b;
        p->verify_args[b++] = p->verify_times[0];
        p->verify_args[b] = NULL;
    }
    /* The host algorithms' passes: the same job for the allreduce alone
     * (the forms measured), once per algorithm, saving its times for the
     * main pass to weigh. */
    p->nhost = 0;
    if (o->colls == NULL || strstr(o->colls, "allreduce"))
        for (int i = 0; i < TUNE_HOST_ALGOS; i++) {
            const char *w = strstr(o->host_algos, host_algos[i]);
            size_t n = strlen(host_algos[i]);
            /* a whole word of the list */
            while (w && !((w == o->host_algos || w[-1] == ',') &&
                          (w[n] == '\0' || w[n] == ',')))
                w = strstr(w + 1, host_algos[i]);
            if (w == NULL)
                continue;
            p->host_algo[p->nhost] = host_algos[i];
            snprintf(p->host_times[p->nhost], sizeof(p->host_times[0]),
                     "%s.%s-us", p->out_path, host_algos[i]);
            snprintf(p->host_arg[p->nhost], sizeof(p->host_arg[0]),
                     "%s:%s.%s-us", host_algos[i], p->out_path, host_algos[i]);
            p->nhost++;
        }
    if (p->nhost > 0) {
        int b = 0;
        for (int i = 0; i < a; i++) {
            if (strcmp(args[i], "--forms") == 0 ||
                strcmp(args[i], "--colls") == 0) {
                i++;
                continue;
            }
            p->host_args[b++] = args[i];
        }
        p->host_args[b++] = "--forms";
        p->host_args[b++] = (char *)o->forms;
        p->host_args[b++] = "--colls";
        p->host_args[b++] = "allreduce";
        p->host_args[b++] = "--save-us";
        p->host_save = b;
        p->host_args[b++] = p->host_times[0];
        p->host_args[b] = NULL;
        for (int i = 0; i < p->nhost; i++) {
            args[a++] = "--host";
            args[a++] = p->host_arg[i];
        }
    }
    args[a++] = "--out";
    args[a++] = p->out_path;
    args[a++] = "--shape";
    args[a++] = p->shape;
    args[a++] = "--cmd";
    args[a++] = p->cmdline;
    args[a] = NULL;
    return 0;
}

static int tune_run(char **args);

/* Runs a measuring job (args) under the table spec; 0, or 1 with the
 * cause printed. */
static int tune_launch(char **args, const char *spec)
{
    setenv("INCOLL_TUNE", spec, 1);
    unsetenv("INCOLL_MPI_ENABLE");
    unsetenv("INCOLL_TUNE_FILE");
    return tune_run(args);
}

/* Runs a job (args) in the environment as it is; 0, or 1 with the cause
 * printed. */
static int tune_run(char **args)
{
    pid_t pid;
    int st;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "incoll tune: cannot fork: %s\n", log_strerror(errno));
        return 1;
    }
    if (pid == 0) {
        execv(args[0], args);
        fprintf(stderr, "incoll tune: cannot run %s: %s\n", args[0],
                log_strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "incoll tune: waitpid: %s\n", log_strerror(errno));
            return 1;
        }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr,
                "incoll tune: the measuring job failed (%s %d): no "
                "table written\n",
                WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return 1;
    }
    return 0;
}

/* One time the check saved: "COLL FORM BYTES US". */
typedef struct {
    char coll[32], form[16];
    long bytes;
    double us;
} tune_time_t;

/* The times of path (at most max); their count, -1 when unreadable. */
static int read_times(const char *path, tune_time_t *v, int max)
{
    FILE *f = fopen(path, "r");
    int n = 0;
    if (f == NULL)
        return -1;
    while (n < max && fscanf(f, "%31s %15s %ld %lf", v[n].coll, v[n].form,
                             &v[n].bytes, &v[n].us) == 4)
        n++;
    fclose(f);
    return n;
}

/* The table's index of a collective or form name, -1 none. */
static int name_index(const char *name, int form)
{
    int n = form ? TUNE_FORM_COUNT : TUNE_COLL_COUNT;
    for (int i = 0; i < n; i++)
        if (strcmp(name, form ? tune_form_name(i) : tune_coll_name(i)) == 0)
            return i;
    return -1;
}

/* The datatype class of the worker's calls of collective c: ints for
 * the reductions. */
static int reduction(int c)
{
    const char *name = tune_coll_name(c);
    return strcmp(name, "allreduce") == 0 || strncmp(name, "reduce", 6) == 0
               ? TUNE_DCLASS_INT
               : TUNE_DCLASS_NONE;
}

/* The entries moving v[i]'s cell (its size up to the next one measured
 * of its collective and form, the first from 0) to MPI's own, appended
 * to buf; the nonblocking decision stands for the persistent form. */
static size_t moved_entries(const tune_time_t *v, int n, int i, double without,
                            int ranks, char *buf, size_t len, size_t k)
{
    long next = -1;
    int first = 1;
    char range[64];
    for (int j = 0; j < n; j++) {
        if (strcmp(v[j].coll, v[i].coll) || strcmp(v[j].form, v[i].form))
            continue;
        if (v[j].bytes < v[i].bytes)
            first = 0;
        if (v[j].bytes > v[i].bytes && (next < 0 || v[j].bytes < next))
            next = v[j].bytes;
    }
    if (first && next < 0)
        snprintf(range, sizeof(range), "*");
    else if (next < 0)
        snprintf(range, sizeof(range), "%ld-", v[i].bytes);
    else
        snprintf(range, sizeof(range), "%ld-%ld", first ? 0 : v[i].bytes,
                 next - 1);
    for (int pass = 0; pass < 2; pass++) {
        const char *form = pass == 0 ? v[i].form : "persistent";
        if (pass == 1 && strcmp(v[i].form, "nb") != 0)
            break;
        k += (size_t)snprintf(buf + k, k < len ? len - k : 0,
                              "%s:%s %s mpi ranks=%d- # %.1f us with the "
                              "table, %.1f us without the layer\n",
                              v[i].coll, form, range, ranks, v[i].us, without);
    }
    return k;
}

/*
 * The check of the table written (unless --no-verify): the calls timed
 * alone, OSU-style, with the table in force, then without the layer
 * (INCOLL_MPI_ENABLE=0); each measured size the table keeps in libincoll
 * that was slower than MPI's own without the layer by more than the
 * margin goes to MPI's own, in entries put before the others (the first
 * match decides), said in the table's comments. 0, or 1 with the cause
 * printed.
 */
static int tune_verify(const tune_opts_t *o, tune_plan_t *p)
{
    static tune_table_t t;
    static tune_time_t with[512], without[512];
    char err[512], when[64], *text, *moved;
    const char *rest;
    size_t k = 0, cap = 64 * 1024;
    int nw, nwo, ret = 1, cells = 0;
    double margin = atof(o->margin);
    time_t now = time(NULL);
    FILE *f;

    unsetenv("INCOLL_TUNE");
    setenv("INCOLL_TUNE_FILE", p->out_path, 1);
    unsetenv("INCOLL_MPI_ENABLE");
    p->verify_args[p->verify_save] = p->verify_times[0];
    if (tune_run(p->verify_args) == 0) {
        setenv("INCOLL_MPI_ENABLE", "0", 1);
        p->verify_args[p->verify_save] = p->verify_times[1];
        ret = tune_run(p->verify_args);
        unsetenv("INCOLL_MPI_ENABLE");
    }
    unsetenv("INCOLL_TUNE_FILE");
    nw = ret == 0 ? read_times(p->verify_times[0], with, 512) : -1;
    nwo = ret == 0 ? read_times(p->verify_times[1], without, 512) : -1;
    unlink(p->verify_times[0]);
    unlink(p->verify_times[1]);
    if (ret != 0 || nw <= 0 || nwo != nw) {
        if (ret == 0)
            fprintf(stderr, "incoll tune: the check's times are missing\n");
        return 1;
    }
    tune_init(&t, p->out_path);
    text = tune_read_text(p->out_path, err, sizeof(err));
    moved = malloc(cap);
    if (text == NULL || moved == NULL ||
        tune_parse_text(&t, text, p->out_path, err, sizeof(err)) != 0) {
        fprintf(stderr, "incoll tune: %s\n", text ? err : "out of memory");
        free(text);
        free(moved);
        return 1;
    }
    moved[0] = '\0';
    for (int i = 0; i < nw; i++) {
        int c = name_index(with[i].coll, 0), fm = name_index(with[i].form, 1);
        uint32_t ppn = (uint32_t)atoi(o->ppn);
        if (c < 0 || fm < 0 || strcmp(with[i].coll, without[i].coll) ||
            strcmp(with[i].form, without[i].form) ||
            with[i].bytes != without[i].bytes ||
            tune_select(&t, c, fm, (uint64_t)with[i].bytes,
                        (uint32_t)atoi(o->np), ppn, reduction(c),
                        NULL) == TUNE_PATH_MPI ||
            with[i].us <= without[i].us * (1 + margin / 100))
            continue;
        cells++;
        k = moved_entries(with, nw, i, without[i].us, atoi(o->np), moved, cap,
                          k);
    }
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    /* the moved entries right after the shape line (or at the top) */
    rest = strstr(text, "\nshape ");
    rest = rest ? strchr(rest + 1, '\n') : NULL;
    rest = rest ? rest + 1 : text;
    f = fopen(p->out_path, "w");
    if (f == NULL) {
        fprintf(stderr, "incoll tune: %s: %s\n", p->out_path,
                log_strerror(errno));
        free(text);
        free(moved);
        return 1;
    }
    fprintf(f, "%.*s", (int)(rest - text), text);
    fprintf(f,
            "# checked on %s: each call timed alone (OSU's loop) with this "
            "table in force\n# and without the layer; %d measured sizes the "
            "layer made slower by more than\n# %s%% moved to mpi%s\n%s",
            when, cells, o->margin, cells ? ":" : "", moved);
    fputs(rest, f);
    ret = fclose(f) != 0;
    if (ret)
        fprintf(stderr, "incoll tune: %s: %s\n", p->out_path,
                log_strerror(errno));
    else
        printf("incoll tune: checked the table against MPI's own without "
               "the layer: %d measured sizes moved to mpi\n",
               cells);
    free(text);
    free(moved);
    return ret;
}

/* --merge: the table FILE, read and checked before the run (which may
 * end where FILE is); NULL with the cause printed. */
static char *merge_read(const char *path)
{
    static tune_table_t t;
    char err[512], *text = tune_read_text(path, err, sizeof(err));
    if (text == NULL) {
        fprintf(stderr, "incoll tune: --merge %s\n", err);
        return NULL;
    }
    tune_init(&t, path);
    if (tune_parse_text(&t, text, path, err, sizeof(err)) != 0) {
        fprintf(stderr, "incoll tune: --merge: %s\n", err);
        free(text);
        return NULL;
    }
    return text;
}

/* --merge: the run's table (p->out_path) merged into old (FILE's text)
 * and written to p->final_path; the run's own file removed. 0, or 1 with
 * the cause printed. */
static int merge_write(const tune_opts_t *o, const tune_plan_t *p,
                       const char *old)
{
    char err[512], when[64], header[1024 + 2 * PATH_MAX + 256], *run, *merged;
    time_t now = time(NULL);
    int dropped = 0, ret;
    FILE *f;

    strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    snprintf(header, sizeof(header),
             "# incoll selection table (src/common/tune.h): a run on %s "
             "ranks merged into %s by\n# %s\n# on %s: the run's entries "
             "first, then those of %s\n",
             o->np, o->merge, p->cmdline, when, o->merge);
    run = tune_read_text(p->out_path, err, sizeof(err));
    merged = run ? tune_merge_text(old, o->merge, run, (uint32_t)atoi(o->np),
                                   header, &dropped, err, sizeof(err))
                 : NULL;
    free(run);
    if (merged == NULL) {
        fprintf(stderr,
                "incoll tune: cannot merge the run into %s: %s (the run's "
                "table stays in %s)\n",
                o->merge, err, p->out_path);
        return 1;
    }
    f = fopen(p->final_path, "w");
    ret = f == NULL || fputs(merged, f) == EOF;
    if (f != NULL && fclose(f) != 0)
        ret = 1;
    free(merged);
    if (ret) {
        fprintf(stderr, "incoll tune: %s: %s (the run's table stays in %s)\n",
                p->final_path, log_strerror(errno), p->out_path);
        return 1;
    }
    unlink(p->out_path);
    printf("incoll tune: merged the run on %s ranks into %s: %d of its "
           "entries dropped (the run's rule there)\n",
           o->np, o->merge, dropped);
    return 0;
}

int cmd_tune(int argc, char **argv)
{
    static tune_table_t t;
    static tune_plan_t p;
    tune_opts_t o;
    char err[512], *old = NULL;
    int ret;

    if (tune_parse(argc, argv, &o, &ret) != 0)
        return ret;
    if (tune_plan(&o, argc, argv, &p) != 0)
        return 1;
    if (o.merge && (old = merge_read(o.merge)) == NULL)
        return 1;
    /* The allreduce on each of libincoll's host-based algorithms first
     * (their times saved), then every call through the layer in
     * libincoll: the column the worker compares with MPI's own and, for
     * the allreduce, with the host algorithms'. */
    ret = 0;
    for (int i = 0; i < p.nhost && ret == 0; i++) {
        char spec[64];
        snprintf(spec, sizeof(spec), "allreduce:*:%s,all:*:inc",
                 p.host_algo[i]);
        p.host_args[p.host_save] = p.host_times[i];
        ret = tune_launch(p.host_args, spec);
    }
    if (ret == 0)
        ret = tune_launch(p.args, "all:*:inc");
    for (int i = 0; i < p.nhost; i++)
        unlink(p.host_times[i]);
    /* what users see: the table in force against no layer */
    if (ret == 0 && !o.no_verify)
        ret = tune_verify(&o, &p);
    if (ret == 0 && old)
        ret = merge_write(&o, &p, old);
    free(old);
    if (ret != 0)
        return 1;
    /* Read back as the layer reads it: a table it cannot read is an
     * error here, not at the next job's MPI_Init. */
    tune_init(&t, p.final_path);
    if (tune_parse_file(&t, p.final_path, err, sizeof(err)) != 0) {
        fprintf(stderr, "incoll tune: the table written is bad: %s\n", err);
        return 1;
    }
    printf("incoll tune: %s: %u entries\n", p.final_path, t.n);
    return 0;
}
