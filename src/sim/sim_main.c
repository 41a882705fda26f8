/*
 * incoll-sim: the command line of the scale simulator.
 *
 *   incoll-sim allreduce --hosts N[,N...] [--radix K] [--levels L] ...
 *   incoll-sim platform --hosts N [--radix K] [--levels L] --xml F ...
 *
 * A SimGrid process loads one platform, so every host count runs in a
 * child process;
 * the children send their rows back through a pipe and the parent prints
 * the table, writes the CSV and draws the plot. The parent also reports
 * each child's peak memory (getrusage), the figure that matters for
 * 16,384 hosts on a small machine.
 */
#include "sim/sim.h"

#include "common/knobs.h"
#include "common/log.h"
#include "core/host_engine.h"

/* The plot writer of the benchmarks (tools/bench_plot.c). */
#include "bench_plot.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 64
#define MAX_HOSTS_LIST 32
#define MAX_ROWS 4096
/* The model of the guard (estimate_mem, estimate_msgs), fitted to runs on
 * the 2-core machine of docs/simulator.md: memory on 16,384 to 65,536
 * hosts; time as messages / SIM_MSG_RATE, which was 71,000 messages a
 * second at 4,096 hosts and 33,000 at 16,384 (3 levels, 1 MiB; SimGrid's
 * cost per message grows with the messages in flight). */
#define SIM_MEM_BASE (64.0 * 1024 * 1024)
#define SIM_MEM_PER_HOST (56.0 * 1024)
#define SIM_MEM_PER_MSG 1024.0
#define SIM_MSG_RATE 40000.0
/* The ring's recurrence (sim_ring.c): rank-steps computed per second. */
#define SIM_RECUR_RATE 2.0e8

typedef struct {
    int hosts[MAX_HOSTS_LIST];
    int nhosts_list;
    int radix, levels; /* 0 = not given */
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    int algos[ALGO_COUNT];
    int nalgos;
    int an_modes[SIM_AN_COUNT];
    int nan;
    int protos[2]; /* in-network: 0 the slots only, 1 streaming */
    int nproto;
    int mcasts[2]; /* in-network: results by unicast (0), multicast (1) */
    int nmcast;
    const char *csv, *plot, *calib_path, *hostfile;
    int quiet;
    int jobs;       /* measurements run at once */
    int data_opt;   /* -1 auto, 0 off, 1 on */
    int timers_opt; /* -1 auto */
    int mirror_opt; /* -1 auto, 0 off, 1 on */
    int recur_opt;  /* -1 auto, 0 off, 1 on */
    int switch_ns_given;
    double switch_ns;
    sim_config_t cfg;
    /* SimGrid's own options (--cfg=..., --log=...), passed to children. */
    char *sg_args[64];
    int nsg;
} opts_t;

/* What a child sends back: a header per platform, then its rows. */
typedef struct {
    int kind; /* 0 = platform header, 1 = row */
    int seq;  /* rows: order of the measurement in the options */
    int hosts, radix, levels;
    double setup_s;
    sim_result_t row;
} msg_t;

/* Bytes of memory available now (MemAvailable), or 0 if unknown. */
static double mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: incoll-sim allreduce [options]   simulate allreduce on a tree\n"
        "       incoll-sim platform [options] --xml FILE [--hostfile FILE]\n"
        "                                        write the SimGrid platform "
        "only\n"
        "\n"
        "fabric:\n"
        "  --hosts N[,N...]     hosts; a list sweeps (default 64)\n"
        "  --radix K            children per switch (default: from --levels)\n"
        "  --levels L           switch levels; with --radix, checked (default "
        "2)\n"
        "  --link-rate R        every link, e.g. 100Gbps, 25Gbps (default "
        "100Gbps)\n"
        "  --link-latency T     every link, e.g. 1us, 500ns (default 1us)\n"
        "  --oversub X          hosts' bandwidth over uplinks' (default 1: a\n"
        "                       full-bisection fat-tree)\n"
        "  --an MODE[,MODE]     switch (AN in the switch ASIC) or server (AN "
        "on a\n"
        "                       server cabled to the switch) (default switch)\n"
        "workload:\n"
        "  --sizes LIST|MIN:MAX bytes per vector of float32 (default 8,1M)\n"
        "  --algos LIST         inc,rd,ring,rabenseifner (default all)\n"
        "  --iters N            operations back to back (default 1)\n"
        "  --data | --no-data   real data, every result checked (default: "
        "only\n"
        "                       when hosts x bytes <= 64 MiB)\n"
        "protocol:\n"
        "  --slots S            slots per group (default 64)\n"
        "  --payload B          payload bytes per packet (default 8192)\n"
        "  --window W           segments in flight per host (default = slots)\n"
        "  --drop P             lose each in-network packet with probability "
        "P\n"
        "  --seed S             seed of the loss (default 1)\n"
        "  --timers             run retransmission timers without --drop too\n"
        "  --proto P[,P]        in-network protocol: ll (the group's slots "
        "only)\n"
        "                       or stream (lock the tree and stream, as\n"
        "                       INCOLL_STREAM_THRESHOLD) (default ll)\n"
        "  --stream-threshold B stream allreduces of at least B bytes\n"
        "                       (default: every size)\n"
        "  --stream-window W    stream slots a lock asks for (default 256)\n"
        "  --stream-lock L      op, comm or N operations per lock (default "
        "op)\n"
        "  --stream-pool B      every AN's streaming pool (default 64M)\n"
        "  --mcast M[,M]        results down the tree by unicast (0) or by\n"
        "                       multicast from each leaf AN, replicated by\n"
        "                       its switch (1), as INCOLL_MCAST; 0,1 runs\n"
        "                       both (default 0)\n"
        "  --mcast-dual B       with --mcast 1, results of at most B bytes go\n"
        "                       by unicast too, as INCOLL_MCAST_DUAL\n"
        "                       (default 0: repair on a gap only)\n"
        "  --groups G           G jobs at once, each a group of its own on\n"
        "                       consecutive hosts, in-network only (default "
        "1)\n"
        "costs:\n"
        "  --calib FILE         from `incoll bench kernel --calib FILE` (and\n"
        "                       `incoll bench agg --calib FILE`)\n"
        "  --an-cores N         cores of a server AN: N datagrams at a time,\n"
        "                       at the cost measured with N threads when the\n"
        "                       calibration has it (default 1)\n"
        "  --switch-ns NS       latency of a switch AN per packet (default 0)\n"
        "  --no-compute         every computation is free (SMPI comparisons)\n"
        "  --no-p2p-headers     host algorithms send bare payloads\n"
        "output:\n"
        "  --csv F  --plot F.png  --xml F (keep the platform)  --quiet\n"
        "  --jobs J             measurements run at once (default 1; each\n"
        "                       is a process of its own)\n"
        "  --max-msgs N         refuse a run of more than N messages, about\n"
        "                       N / 40000 s (default 2e7)\n"
        "  --max-mem B          refuse a run predicted to need more memory\n"
        "                       (default 90%% of MemAvailable), e.g. 8G\n"
        "  --mirror auto|on|off switch ANs without --drop: simulate one of\n"
        "                       identical sibling subtrees, the others send\n"
        "                       copies of its packets (exact; auto: when the\n"
        "                       full run would be refused; default auto)\n"
        "  --recurrence auto|on|off  the ring by its step recurrence instead\n"
        "                       of message by message (exact; auto: when\n"
        "                       the full run would be refused; default auto)\n"
        "  --no-stack-guards    actors' stacks without guard pages even when\n"
        "                       they fit (they are dropped on their own when\n"
        "                       2 per actor pass vm.max_map_count)\n"
        "SimGrid options (--cfg=..., --log=...) are passed on.\n"
        "See docs/simulator.md.\n");
}

static int bad(const char *opt, const char *val)
{
    fprintf(stderr, "incoll-sim: bad value for %s: '%s' (see --help)\n", opt,
            val ? val : "");
    return -1;
}

/* Every option's starting value, before the command line. */
static void opts_defaults(opts_t *o)
{
    sim_config_t *c = &o->cfg;

    memset(o, 0, sizeof(*o));
    o->hosts[0] = 64;
    o->nhosts_list = 1;
    o->sizes[0] = 8;
    o->sizes[1] = 1 << 20;
    o->nsizes = 2;
    for (int i = 0; i < ALGO_COUNT; i++)
        o->algos[i] = i;
    o->nalgos = ALGO_COUNT;
    o->an_modes[0] = SIM_AN_SWITCH;
    o->nan = 1;
    o->nproto = 1;
    o->nmcast = 1;
    c->stream_threshold = 1;
    c->stream_window = (uint32_t)setting_u64(SETTING_STREAM_WINDOW);
    c->stream_nops = 1;
    c->stream_pool = setting_u64(SETTING_AGG_STREAM_POOL);
    c->groups = 1;
    c->an_cores = 1;
    o->data_opt = -1;
    o->mirror_opt = -1;
    o->recur_opt = -1;
    o->timers_opt = -1;
    o->jobs = 1;
    c->link_Bps = 100e9 / 8;
    c->link_lat_s = 1e-6;
    c->oversub = 1;
    c->seed = 1;
    c->slots = 64;
    c->payload = 8192;
    c->iters = 1;
    c->p2p_headers = 1;
    c->max_msgs = 20000000;
    c->max_mem = 0.9 * mem_available();
    if (c->max_mem <= 0)
        c->max_mem = 8.0 * (1u << 30);
    sim_calib_defaults(&c->calib);
}

/* The value of one name of a comma-separated list, or -1. */
typedef int (*list_item_fn)(const char *name);

static int an_mode_parse(const char *t)
{
    return strcmp(t, "switch") == 0   ? SIM_AN_SWITCH
           : strcmp(t, "server") == 0 ? SIM_AN_SERVER
                                      : -1;
}

static int proto_parse(const char *t)
{
    return strcmp(t, "ll") == 0 ? 0 : strcmp(t, "stream") == 0 ? 1 : -1;
}

static int mcast_parse(const char *t)
{
    return strcmp(t, "0") == 0 ? 0 : strcmp(t, "1") == 0 ? 1 : -1;
}

/* Reads the list v (at most cap - 1 characters of it) into vals, at most
 * max of them, and their count into *n_p; -1 on a bad name or too many. */
static int parse_list(const char *v, size_t cap, list_item_fn item, int *vals,
                      int max, int *n_p)
{
    char buf[256], *save = NULL, *t;

    snprintf(buf, cap < sizeof(buf) ? cap : sizeof(buf), "%s", v);
    *n_p = 0;
    for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = item(t);
        if (k < 0 || *n_p >= max)
            return -1;
        vals[(*n_p)++] = k;
    }
    return 0;
}

/* An option whose value is a non-empty list of names. */
static int opt_list(const char *a, const char *v, size_t cap, list_item_fn item,
                    int *vals, int max, int *n_p)
{
    if (parse_list(v, cap, item, vals, max, n_p) != 0 || *n_p == 0)
        return bad(a, v);
    return 0;
}

/* The handlers of the options that need more than a number in a range;
 * each returns 0 or -1 after saying why. */
typedef int (*opt_fn)(opts_t *o, const char *a, const char *v);

static int opt_auto_on_off(opts_t *o, const char *a, const char *v)
{
    int *opt = a[2] == 'm' ? &o->mirror_opt : &o->recur_opt;

    if (strcmp(v, "auto") == 0)
        *opt = -1;
    else if (strcmp(v, "on") == 0)
        *opt = 1;
    else if (strcmp(v, "off") == 0)
        *opt = 0;
    else
        return bad(a, v);
    return 0;
}

static int opt_hosts(opts_t *o, const char *a, const char *v)
{
    o->nhosts_list = sim_parse_ints(v, o->hosts, MAX_HOSTS_LIST);
    return o->nhosts_list < 1 ? bad(a, v) : 0;
}

static int opt_link_rate(opts_t *o, const char *a, const char *v)
{
    return sim_parse_rate(v, &o->cfg.link_Bps) != 0 ? bad(a, v) : 0;
}

static int opt_link_latency(opts_t *o, const char *a, const char *v)
{
    return sim_parse_time(v, &o->cfg.link_lat_s) != 0 ? bad(a, v) : 0;
}

static int opt_oversub(opts_t *o, const char *a, const char *v)
{
    char *end;

    o->cfg.oversub = strtod(v, &end);
    return *end || !(o->cfg.oversub >= 1) ? bad(a, v) : 0;
}

static int opt_sizes(opts_t *o, const char *a, const char *v)
{
    o->nsizes = sim_parse_sizes(v, o->sizes, MAX_SIZES);
    if (o->nsizes < 1)
        return bad(a, v);
    for (int s = 0; s < o->nsizes; s++) {
        if (o->sizes[s] % 4 || o->sizes[s] > (1ull << 32)) {
            fprintf(stderr,
                    "incoll-sim: size %" PRIu64 " is not a "
                    "whole number of float32 elements\n",
                    o->sizes[s]);
            return -1;
        }
    }
    return 0;
}

static int opt_algos(opts_t *o, const char *a, const char *v)
{
    return opt_list(a, v, 256, algo_parse, o->algos, ALGO_COUNT, &o->nalgos);
}

static int opt_an(opts_t *o, const char *a, const char *v)
{
    return opt_list(a, v, 64, an_mode_parse, o->an_modes, SIM_AN_COUNT,
                    &o->nan);
}

static int opt_proto(opts_t *o, const char *a, const char *v)
{
    return opt_list(a, v, 64, proto_parse, o->protos, 2, &o->nproto);
}

static int opt_mcast(opts_t *o, const char *a, const char *v)
{
    if (parse_list(v, 64, mcast_parse, o->mcasts, 2, &o->nmcast) != 0) {
        fprintf(stderr,
                "incoll-sim: bad value for --mcast: '%s' (0 "
                "unicast, 1 multicast, or 0,1 for both)\n",
                v);
        return -1;
    }
    return o->nmcast == 0 ? bad(a, v) : 0;
}

static int opt_mcast_dual(opts_t *o, const char *a, const char *v)
{
    uint64_t b;

    (void)a;
    if (sim_parse_bytes(v, &b) != 0 || b > 65000) {
        fprintf(stderr,
                "incoll-sim: bad value for --mcast-dual: '%s' (bytes, "
                "0 to 65000, as INCOLL_MCAST_DUAL)\n",
                v);
        return -1;
    }
    o->cfg.mcast_dual = (uint32_t)b;
    return 0;
}

static int opt_stream_threshold(opts_t *o, const char *a, const char *v)
{
    return sim_parse_bytes(v, &o->cfg.stream_threshold) != 0 ||
                   o->cfg.stream_threshold == 0
               ? bad(a, v)
               : 0;
}

static int opt_stream_lock(opts_t *o, const char *a, const char *v)
{
    return host_stream_policy_parse(v, &o->cfg.stream_nops) != 0 ? bad(a, v)
                                                                 : 0;
}

static int opt_stream_pool(opts_t *o, const char *a, const char *v)
{
    return sim_parse_bytes(v, &o->cfg.stream_pool) != 0 ? bad(a, v) : 0;
}

static int opt_drop(opts_t *o, const char *a, const char *v)
{
    char *end;

    o->cfg.drop = strtod(v, &end);
    return *end || o->cfg.drop < 0 || o->cfg.drop >= 1 ? bad(a, v) : 0;
}

static int opt_seed(opts_t *o, const char *a, const char *v)
{
    (void)a;
    o->cfg.seed = strtoull(v, NULL, 0);
    return 0;
}

static int opt_payload(opts_t *o, const char *a, const char *v)
{
    uint64_t b;

    if (sim_parse_bytes(v, &b) != 0 || b < 8 || b > WIRE_MAX_PAYLOAD || b % 4)
        return bad(a, v);
    o->cfg.payload = (uint32_t)b;
    return 0;
}

static int opt_switch_ns(opts_t *o, const char *a, const char *v)
{
    char *end;

    o->switch_ns = strtod(v, &end);
    if (*end || o->switch_ns < 0)
        return bad(a, v);
    o->switch_ns_given = 1;
    return 0;
}

static int opt_max_msgs(opts_t *o, const char *a, const char *v)
{
    char *end;
    double d = strtod(v, &end);

    if (*end || !(d >= 1))
        return bad(a, v);
    o->cfg.max_msgs = (uint64_t)d;
    return 0;
}

static int opt_max_mem(opts_t *o, const char *a, const char *v)
{
    uint64_t b;

    if (sim_parse_bytes(v, &b) != 0 || b == 0)
        return bad(a, v);
    o->cfg.max_mem = (double)b;
    return 0;
}

/* How an option's value is stored: a flag sets an int to `min`; OPT_INT
 * and OPT_U32 read a decimal (atoi) that must lie in [min, max]; OPT_STR
 * keeps the argument; OPT_FN calls fn. */
typedef enum { OPT_FLAG, OPT_INT, OPT_U32, OPT_STR, OPT_FN } opt_kind_t;

typedef struct {
    const char *name;
    opt_kind_t kind;
    size_t off; /* the field in opts_t, for every kind but OPT_FN */
    int min, max;
    opt_fn fn;
} opt_def_t;

#define OF(f) offsetof(opts_t, f)
#define CF(f) offsetof(opts_t, cfg.f)

static const opt_def_t sim_opts[] = {
    {"--data", OPT_FLAG, OF(data_opt), 1, 0, NULL},
    {"--no-data", OPT_FLAG, OF(data_opt), 0, 0, NULL},
    {"--timers", OPT_FLAG, OF(timers_opt), 1, 0, NULL},
    {"--no-compute", OPT_FLAG, CF(no_compute), 1, 0, NULL},
    {"--no-stack-guards", OPT_FLAG, CF(no_stack_guards), 1, 0, NULL},
    {"--no-p2p-headers", OPT_FLAG, CF(p2p_headers), 0, 0, NULL},
    {"--quiet", OPT_FLAG, OF(quiet), 1, 0, NULL},
    {"--mirror", OPT_FN, 0, 0, 0, opt_auto_on_off},
    {"--recurrence", OPT_FN, 0, 0, 0, opt_auto_on_off},
    {"--hosts", OPT_FN, 0, 0, 0, opt_hosts},
    {"--radix", OPT_INT, OF(radix), 2, AGG_RADIX_MAX, NULL},
    {"--levels", OPT_INT, OF(levels), 1, 8, NULL},
    {"--link-rate", OPT_FN, 0, 0, 0, opt_link_rate},
    {"--link-latency", OPT_FN, 0, 0, 0, opt_link_latency},
    {"--oversub", OPT_FN, 0, 0, 0, opt_oversub},
    {"--sizes", OPT_FN, 0, 0, 0, opt_sizes},
    {"--algos", OPT_FN, 0, 0, 0, opt_algos},
    {"--an", OPT_FN, 0, 0, 0, opt_an},
    {"--proto", OPT_FN, 0, 0, 0, opt_proto},
    {"--mcast", OPT_FN, 0, 0, 0, opt_mcast},
    {"--mcast-dual", OPT_FN, 0, 0, 0, opt_mcast_dual},
    {"--stream-threshold", OPT_FN, 0, 0, 0, opt_stream_threshold},
    {"--stream-window", OPT_U32, CF(stream_window), 1, 65535, NULL},
    {"--stream-lock", OPT_FN, 0, 0, 0, opt_stream_lock},
    {"--stream-pool", OPT_FN, 0, 0, 0, opt_stream_pool},
    {"--groups", OPT_INT, CF(groups), 1, SIM_MAX_GROUPS, NULL},
    {"--drop", OPT_FN, 0, 0, 0, opt_drop},
    {"--seed", OPT_FN, 0, 0, 0, opt_seed},
    {"--slots", OPT_U32, CF(slots), 1, 65535, NULL},
    {"--payload", OPT_FN, 0, 0, 0, opt_payload},
    {"--window", OPT_U32, CF(window), INT_MIN, INT_MAX, NULL},
    {"--iters", OPT_INT, CF(iters), 1, INT_MAX, NULL},
    {"--calib", OPT_STR, OF(calib_path), 0, 0, NULL},
    {"--an-cores", OPT_INT, CF(an_cores), 1, 1024, NULL},
    {"--switch-ns", OPT_FN, 0, 0, 0, opt_switch_ns},
    {"--max-msgs", OPT_FN, 0, 0, 0, opt_max_msgs},
    {"--max-mem", OPT_FN, 0, 0, 0, opt_max_mem},
    {"--jobs", OPT_INT, OF(jobs), 1, 64, NULL},
    {"--csv", OPT_STR, OF(csv), 0, 0, NULL},
    {"--plot", OPT_STR, OF(plot), 0, 0, NULL},
    {"--xml", OPT_STR, CF(xml_out), 0, 0, NULL},
    {"--hostfile", OPT_STR, OF(hostfile), 0, 0, NULL},
};

#undef OF
#undef CF

static const opt_def_t *opt_find(const char *name)
{
    for (size_t i = 0; i < sizeof(sim_opts) / sizeof(sim_opts[0]); i++)
        if (strcmp(sim_opts[i].name, name) == 0)
            return &sim_opts[i];
    return NULL;
}

/* Stores the value v of option d (a, as written) into o. */
static int opt_store(const opt_def_t *d, opts_t *o, const char *a,
                     const char *v)
{
    char *field = (char *)o + d->off;
    int n;

    switch (d->kind) {
    case OPT_FLAG:
        *(int *)field = d->min;
        return 0;
    case OPT_STR:
        *(const char **)field = v;
        return 0;
    case OPT_FN:
        return d->fn(o, a, v);
    case OPT_INT:
    case OPT_U32:
        n = atoi(v);
        if (d->kind == OPT_INT)
            *(int *)field = n;
        else
            *(uint32_t *)field = (uint32_t)n;
        return n < d->min || n > d->max ? bad(a, v) : 0;
    }
    return -1;
}

/* The checks across options, and the calibration file they name. */
static int opts_finish(opts_t *o)
{
    sim_config_t *c = &o->cfg;

    if (c->window > c->slots)
        return bad("--window", "larger than --slots");
    if (c->groups > 1) {
        for (int i = 0; i < o->nalgos; i++)
            if (o->algos[i] != ALGO_INC) {
                fprintf(stderr, "incoll-sim: --groups runs the in-network "
                                "algorithm only: add --algos inc\n");
                return -1;
            }
        for (int i = 0; i < o->nhosts_list; i++)
            if (o->hosts[i] < c->groups) {
                fprintf(stderr,
                        "incoll-sim: --groups %d needs at least as many "
                        "hosts\n",
                        c->groups);
                return -1;
            }
    }
    if (o->calib_path) {
        char err[512];
        if (sim_calib_load(o->calib_path, &c->calib, err, sizeof(err)) != 0) {
            fprintf(stderr, "incoll-sim: calibration: %s\n", err);
            return -1;
        }
    }
    if (o->switch_ns_given)
        c->calib.switch_ns = o->switch_ns;
    if (c->no_compute)
        sim_calib_zero(&c->calib);
    c->timers = o->timers_opt == 1 || c->drop > 0;
    return 0;
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    opts_defaults(o);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const opt_def_t *d;

        if (strncmp(a, "--cfg=", 6) == 0 || strncmp(a, "--log=", 6) == 0) {
            if (o->nsg < 62)
                o->sg_args[o->nsg++] = argv[i];
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        d = opt_find(a);
        if (d && d->kind == OPT_FLAG) {
            opt_store(d, o, a, NULL);
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "incoll-sim: %s needs a value (see --help)\n", a);
            return -1;
        }
        if (d == NULL) {
            fprintf(stderr, "incoll-sim: unknown option %s (see --help)\n", a);
            return -1;
        }
        if (opt_store(d, o, a, v) != 0)
            return -1;
        i++;
    }
    return opts_finish(o);
}

/* Builds the tree for n hosts the way the options ask. */
static int make_tree(const opts_t *o, int n, fabric_conf_t *conf)
{
    int radix = o->radix, levels = o->levels ? o->levels : 2;

    if (radix == 0) {
        /* The smallest radix that reaches n hosts in `levels` levels. */
        radix = (int)ceil(pow((double)n, 1.0 / levels) - 1e-9);
        if (radix < 2)
            radix = 2;
        while (pow(radix, levels) < n)
            radix++;
        while (radix > 2 && pow(radix - 1, levels) >= n)
            radix--;
    }
    if (radix > AGG_RADIX_MAX ||
        fabric_conf_generate(n, radix, conf) != INCOLL_OK) {
        fprintf(stderr,
                "incoll-sim: cannot build a tree of %d hosts with radix %d\n",
                n, radix);
        return -1;
    }
    if (o->levels && conf->levels != o->levels) {
        fprintf(stderr,
                "incoll-sim: %d hosts with radix %d make %d levels, "
                "not %d: change --radix or --levels\n",
                n, radix, conf->levels, o->levels);
        fabric_conf_free(conf);
        return -1;
    }
    return 0;
}

static int write_platform(const opts_t *o, const fabric_conf_t *conf, int p2p,
                          const char *path)
{
    FILE *f = fopen(path, "w");
    int ret;
    if (f == NULL) {
        fprintf(stderr, "incoll-sim: cannot write %s: %s\n", path,
                log_strerror(errno));
        return -1;
    }
    ret = sim_platform_write(f, conf, o->cfg.link_Bps, o->cfg.link_lat_s,
                             o->cfg.oversub, p2p);
    if (fclose(f) != 0 || ret != 0) {
        fprintf(stderr, "incoll-sim: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/* Messages a run would send, roughly, to keep within --max-msgs. For inc
 * it counts the clock messages of the hosts' NICs too. */
static double estimate_msgs(int algo, int n, uint64_t bytes,
                            const sim_config_t *c)
{
    double lg = ceil(log2((double)n)), segs = ceil((double)bytes / c->payload);
    if (segs < 1)
        segs = 1;
    switch (algo) {
    case ALGO_INC:
        return segs * 4.0 * n * c->iters;
    case ALGO_RD:
        return (double)n * (lg + 2) * c->iters;
    case ALGO_RING: {
        /* Only non-empty blocks travel: min(n, elements) of them, each
         * n - 1 hops in each phase. */
        double blocks = (double)(bytes / 4) < n ? (double)(bytes / 4) : n;
        return blocks * 2.0 * (n - 1) * c->iters;
    }
    default:
        return (double)n * 2.0 * (lg + 1) * c->iters;
    }
}

/*
 * Peak memory of a measurement, roughly (docs/simulator.md, "Cost of the
 * simulation"): per host its actor, engine, SimGrid host, links and
 * mailboxes; per message in flight SimGrid's activity and our packet;
 * with --data the vectors and packets' payloads; for host algorithms the
 * schedules.
 */
static double estimate_mem(int algo, const fabric_conf_t *conf, uint64_t bytes,
                           const sim_config_t *c, int nsim)
{
    double n = conf->nhosts, ns = nsim, segs = ceil((double)bytes / c->payload);
    double window = c->window ? c->window : c->slots, mem;

    if (segs < 1)
        segs = 1;
    mem = SIM_MEM_BASE + n * SIM_MEM_PER_HOST;
    if (c->data)
        mem += 2.0 * ns * (double)bytes;
    if (algo == ALGO_INC) {
        double inflight = ns * (segs < window ? segs : window);
        mem += inflight * (SIM_MEM_PER_MSG + (c->data ? c->payload : 0));
    } else {
        /* The ring computes its steps when needed (sim_ring.c). */
        if (algo != ALGO_RING)
            mem += n * (double)algo_max_steps((algo_kind_t)algo, conf->nhosts) *
                   (double)sizeof(algo_step_t);
        mem += n * (SIM_MEM_PER_MSG + (c->data ? (double)bytes : 0));
    }
    return mem;
}

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(3);
        p += w;
        len -= (size_t)w;
    }
}

static int nrunning; /* measurement processes not yet waited for */

/* Why a simulation process ended, in words: which resource ran out when
 * the cause is known. */
static const char *exit_cause(int status, char *buf, size_t len)
{
    if (WIFEXITED(status)) {
        snprintf(buf, len, "exit status %d (its message is above)",
                 WEXITSTATUS(status));
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
        snprintf(buf, len,
                 "killed (signal 9), most likely by the kernel for lack of "
                 "memory (see dmesg); lower --max-mem, or fewer hosts");
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) {
        snprintf(buf, len,
                 "aborted (signal 6) by SimGrid; its reason is above");
    } else if (WIFSIGNALED(status)) {
        snprintf(buf, len, "signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        snprintf(buf, len, "status 0x%x", status);
    }
    return buf;
}

/* Waits until at most `keep` measurement processes run; -1 if one failed. */
static int reap_children(int keep)
{
    int ret = 0;
    while (nrunning > keep) {
        int status;
        pid_t pid = wait(&status);
        if (pid < 0)
            return -1;
        nrunning--;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            char why[256];
            fprintf(stderr, "incoll-sim: a measurement failed: %s\n",
                    exit_cause(status, why, sizeof(why)));
            ret = -1;
        }
    }
    return ret;
}

/* Messages and memory of a run that simulates nsim of the hosts and
 * copies nmir ANs; sets whether it checks data. */
static void estimate(const opts_t *o, sim_config_t *cfg,
                     const fabric_conf_t *conf, int algo, uint64_t bytes,
                     int nsim, int nmir, double *est_p, double *mem_p)
{
    cfg->data = o->data_opt >= 0
                    ? o->data_opt
                    : (double)nsim * (double)bytes <= 64.0 * 1024 * 1024;
    *est_p = estimate_msgs(algo, nsim + nmir, bytes, cfg);
    *mem_p = estimate_mem(algo, conf, bytes, cfg, nsim);
}

/* Rank-steps the ring's recurrence computes, at most (sim_ring.c): every
 * rank in every step, or count + 1 of them with fewer elements than
 * ranks. */
static double estimate_recur(int n, uint64_t bytes, const sim_config_t *c)
{
    double count = (double)(bytes / 4), per = count < n ? count + 1 : n;
    return per * 2.0 * (n - 1) * c->iters;
}

/* Whether a measurement is refused in advance; if so, why, in note. Also
 * decides whether it mirrors (--mirror), runs the ring by its recurrence
 * (--recurrence) and checks data; *est_p: its messages, or for the
 * recurrence the messages its time stands for. */
static int refused(const opts_t *o, sim_config_t *cfg,
                   const fabric_conf_t *conf, int algo, uint64_t bytes,
                   char *note, size_t len, double *est_p)
{
    double est, mem;
    int nsim = conf->nhosts, nmir = 0;

    cfg->mirror = 0;
    cfg->recurrence = 0;
    if (algo == ALGO_INC && cfg->an == SIM_AN_SWITCH && cfg->drop <= 0 &&
        o->mirror_opt != 0) {
        sim_mirror_t m;
        if (sim_mirror_plan(conf, 1, &m) == 0) {
            nsim = m.hosts;
            nmir = m.mirrors;
            sim_mirror_free(&m);
        }
    }
    estimate(o, cfg, conf, algo, bytes, conf->nhosts, 0, &est, &mem);
    if (nmir > 0 && (o->mirror_opt == 1 || est > (double)cfg->max_msgs ||
                     mem > cfg->max_mem)) {
        cfg->mirror = 1;
        estimate(o, cfg, conf, algo, bytes, nsim, nmir, &est, &mem);
    }
    if (algo == ALGO_RING && o->recur_opt != 0 &&
        (o->recur_opt == 1 || est > (double)cfg->max_msgs ||
         mem > cfg->max_mem)) {
        double steps = estimate_recur(conf->nhosts, bytes, cfg);
        cfg->recurrence = 1;
        cfg->data = 0;
        *est_p = steps / SIM_RECUR_RATE * SIM_MSG_RATE;
        mem = SIM_MEM_BASE + 64.0 * conf->nhosts;
        if (*est_p > (double)cfg->max_msgs) {
            snprintf(note, len,
                     "refused: ~%.2g rank-steps of the recurrence (~%.2g "
                     "min) > --max-msgs %.2g",
                     steps, steps / SIM_RECUR_RATE / 60, (double)cfg->max_msgs);
            return 1;
        }
    } else {
        *est_p = est;
        if (est > (double)cfg->max_msgs) {
            snprintf(note, len,
                     "refused: ~%.2g messages (~%.2g min) > --max-msgs %.2g",
                     est, est / SIM_MSG_RATE / 60, (double)cfg->max_msgs);
            return 1;
        }
    }
    if (mem > cfg->max_mem) {
        snprintf(note, len, "refused: ~%.1f GiB of memory > --max-mem %.1f GiB",
                 mem / (1u << 30), cfg->max_mem / (1u << 30));
        return 1;
    }
    return 0;
}

/* A child process: stdio flushed first (so that the child does not write
 * the parent's buffered output again), the failure said. */
static pid_t fork_child(void)
{
    pid_t pid;
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        perror("incoll-sim: fork");
    return pid;
}

/* A process's peak memory in MiB and CPU time (user and system) in
 * seconds, from its rusage. */
static void ru_report(const struct rusage *ru, double *rss_MiB, double *cpu_s)
{
    *rss_MiB = ru->ru_maxrss / 1024.0;
    *cpu_s = (double)ru->ru_utime.tv_sec + (double)ru->ru_stime.tv_sec +
             (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1e-6;
}

/*
 * One measurement (or its skip record), sent to the parent. Each runs in a
 * process of its own, forked after the platform is loaded: SimGrid keeps
 * the stacks of finished actors mapped until much later, and 16,384 hosts
 * twice over would pass the kernel's limit of mappings; a fresh process
 * also starts every measurement from the same empty network and reports
 * its own peak memory and CPU time. Up to --jobs of them run at once.
 */
static int child_run(const opts_t *o, sim_config_t *cfg,
                     const fabric_conf_t *conf, int algo, uint64_t bytes,
                     int seq, int fd)
{
    msg_t m;
    pid_t pid;
    double est;

    memset(&m, 0, sizeof(m));
    m.kind = 1;
    m.seq = seq;
    if (refused(o, cfg, conf, algo, bytes, m.row.note, sizeof(m.row.note),
                &est)) {
        m.row.algo = algo;
        m.row.an = algo == ALGO_INC ? (int)cfg->an : -1;
        m.row.hosts = conf->nhosts;
        m.row.levels = conf->levels;
        m.row.radix = conf->radix;
        m.row.bytes = bytes;
        m.row.stream = cfg->stream;
        m.row.outcome = SIM_SKIPPED;
        fprintf(stderr,
                "incoll-sim: %s on %d hosts, %" PRIu64 " bytes: %s (see "
                "docs/simulator.md, \"Cost of the simulation\")\n",
                algo_name((algo_kind_t)algo), conf->nhosts, bytes, m.row.note);
        write_all(fd, &m, sizeof(m));
        return 0;
    }
    if (est / SIM_MSG_RATE > 60 && !o->quiet) {
        if (cfg->recurrence)
            fprintf(stderr,
                    "incoll-sim: %s on %d hosts, %" PRIu64
                    " bytes by its recurrence: up to ~%.0f min (less when "
                    "its blocks are of one size)\n",
                    algo_name((algo_kind_t)algo), conf->nhosts, bytes,
                    est / SIM_MSG_RATE / 60);
        else
            fprintf(stderr,
                    "incoll-sim: %s on %d hosts, %" PRIu64
                    " bytes: ~%.2g messages, expect ~%.0f min\n",
                    algo_name((algo_kind_t)algo), conf->nhosts, bytes, est,
                    est / SIM_MSG_RATE / 60);
    }
    if (reap_children(o->jobs - 1) != 0)
        return -1;
    pid = fork_child();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        struct rusage ru;
        if (sim_run_one(cfg, conf, algo, bytes, &m.row) != 0) {
            fprintf(stderr,
                    "incoll-sim: %s on %d hosts, %" PRIu64
                    " bytes: the simulation could not run\n",
                    algo_name((algo_kind_t)algo), conf->nhosts, bytes);
            _exit(1);
        }
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            ru_report(&ru, &m.row.rss_MiB, &m.row.cpu_s);
        write_all(fd, &m, sizeof(m));
        _exit(0);
    }
    nrunning++;
    return 0;
}

/* The child: one platform (one host count), every algorithm, AN mode and
 * size on it. */
static int child_main(const opts_t *o, int n, int fd)
{
    fabric_conf_t conf;
    sim_config_t cfg = o->cfg;
    char xml[4096];
    char *sg_argv[66];
    int sg_argc = 0, tmp_xml = 0, p2p = 0, seq = 0, any = 0;
    struct timespec t0, t1;
    msg_t m;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (make_tree(o, n, &conf) != 0)
        return 1;
    /* The host-to-host routes only for host algorithms that will run, and
     * no platform at all if every measurement is refused. */
    for (int a = 0; a < o->nalgos; a++) {
        for (int s = 0; s < o->nsizes; s++) {
            char note[128];
            cfg.an = (sim_an_mode_t)o->an_modes[0];
            double est;
            if (refused(o, &cfg, &conf, o->algos[a], o->sizes[s], note,
                        sizeof(note), &est) ||
                cfg.recurrence)
                continue;
            p2p |= o->algos[a] != ALGO_INC;
            any = 1;
        }
    }
    cfg.hosts = n;
    cfg.radix = conf.radix;
    cfg.levels = conf.levels;
    if (cfg.xml_out) {
        snprintf(xml, sizeof(xml), "%s", cfg.xml_out);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(xml, sizeof(xml), "%s/incoll-sim-%d-%d.xml",
                 tmp ? tmp : "/tmp", (int)getpid(), n);
        tmp_xml = 1;
    }
    if ((any || !tmp_xml) && write_platform(o, &conf, p2p, xml) != 0)
        return 1;
    sg_argv[sg_argc++] = "incoll-sim";
    for (int i = 0; i < o->nsg; i++)
        sg_argv[sg_argc++] = o->sg_args[i];
    sg_argv[sg_argc] = NULL;
    if (any && sim_run_init(&sg_argc, sg_argv, xml, &cfg, &conf) != 0)
        return 1;
    if (any && tmp_xml)
        unlink(xml);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    memset(&m, 0, sizeof(m));
    m.kind = 0;
    m.hosts = n;
    m.radix = conf.radix;
    m.levels = conf.levels;
    m.setup_s = (double)(t1.tv_sec - t0.tv_sec) +
                (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    write_all(fd, &m, sizeof(m));

    for (int a = 0; a < o->nalgos; a++) {
        int algo = o->algos[a], nmodes = algo == ALGO_INC ? o->nan : 1;
        int nproto = algo == ALGO_INC ? o->nproto : 1;
        for (int mi = 0; mi < nmodes; mi++) {
            cfg.an = (sim_an_mode_t)o->an_modes[mi];
            for (int pi = 0; pi < nproto; pi++) {
                int nmc = algo == ALGO_INC ? o->nmcast : 1;
                cfg.stream = algo == ALGO_INC && o->protos[pi];
                for (int ci = 0; ci < nmc; ci++) {
                    cfg.mcast = algo == ALGO_INC && o->mcasts[ci];
                    for (int s = 0; s < o->nsizes; s++)
                        if (child_run(o, &cfg, &conf, algo, o->sizes[s], seq++,
                                      fd) != 0)
                            return 1;
                }
            }
        }
    }
    if (reap_children(0) != 0)
        return 1;
    fabric_conf_free(&conf);
    return 0;
}

static const char *an_name(int an)
{
    return an == SIM_AN_SWITCH   ? "switch"
           : an == SIM_AN_SERVER ? "server"
                                 : "host";
}

/* The row's algorithm: the in-network one streaming is "inc-stream",
 * with results by multicast "inc-mcast" or "inc-stream-mcast". */
static const char *row_name(const sim_result_t *r)
{
    if (r->stream)
        return r->mcast ? "inc-stream-mcast" : "inc-stream";
    return r->mcast ? "inc-mcast" : algo_name((algo_kind_t)r->algo);
}

/* With several jobs, a line for each under its row. */
static void print_jobs(FILE *out, const sim_result_t *r)
{
    for (int g = 0; r->groups > 1 && g < r->groups && g < SIM_MAX_GROUPS; g++) {
        const sim_job_result_t *j = &r->jobs[g];
        fprintf(out,
                "#   job %2d: %5d hosts %14.3f %16.1f %6s  streamed %" PRIu64
                " of %" PRIu64 " ops, locks granted %" PRIu64
                " refused %" PRIu64 "\n",
                g, j->hosts, j->latency_us, j->bandwidth_MBps,
                j->failed ? "FAIL" : "ok", j->stream_ops, j->ops,
                j->locks_granted, j->locks_refused);
    }
}

static void print_row(FILE *out, const sim_result_t *r)
{
    if (r->outcome == SIM_SKIPPED) {
        fprintf(out, "%-13s %-6s %6d %10" PRIu64 " %14s %16s %6s %8s %8s  %s\n",
                row_name(r), an_name(r->an), r->hosts, r->bytes, "-", "-",
                "skip", "-", "-", r->note);
        return;
    }
    fprintf(out,
            "%-13s %-6s %6d %10" PRIu64 " %14.3f %16.1f %6s %8.2f %8.0f  %s\n",
            row_name(r), an_name(r->an), r->hosts, r->bytes, r->latency_us,
            r->bandwidth_MBps,
            r->outcome == SIM_FAILED ? "FAIL"
            : r->checked             ? "ok"
                                     : "-",
            r->wall_s, r->rss_MiB, r->note);
}

static int write_csv(const char *path, const sim_result_t *rows, int n)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "incoll-sim: cannot write %s: %s\n", path,
                log_strerror(errno));
        return -1;
    }
    fprintf(f,
            "algorithm,an,hosts,bytes,latency_us,bandwidth_MBps,levels,radix,"
            "outcome,checked,messages,retransmits,dropped,wall_s,cpu_s,rss_MiB,"
            "mcast,leaf_packets_out,leaf_results,mcast_sent,mcast_repairs,"
            "note\n");
    for (int i = 0; i < n; i++) {
        const sim_result_t *r = &rows[i];
        fprintf(f,
                "%s,%s,%d,%" PRIu64 ",%.6f,%.3f,%d,%d,%s,%d,%" PRIu64
                ",%" PRIu64 ",%" PRIu64 ",%.3f,%.3f,%.1f,%d,%" PRIu64
                ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",\"%s\"\n",
                row_name(r), an_name(r->an), r->hosts, r->bytes,
                r->outcome == SIM_SKIPPED ? 0.0 : r->latency_us,
                r->outcome == SIM_SKIPPED ? 0.0 : r->bandwidth_MBps, r->levels,
                r->radix,
                r->outcome == SIM_OK        ? "ok"
                : r->outcome == SIM_SKIPPED ? "skipped"
                                            : "failed",
                r->checked, r->messages, r->retransmits, r->dropped, r->wall_s,
                r->cpu_s, r->rss_MiB, r->mcast, r->leaf_pkts_out,
                r->leaf_results, r->mcast_sent, r->mcast_repairs, r->note);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "incoll-sim: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/*
 * Plot (the benchmarks' writer, tools/bench_plot.h): with several host
 * counts, latency of the smallest size and bandwidth of the largest
 * against hosts; with one, both against size. Physical limits: 2 x
 * levels x link latency (a result crosses every level up and down) and
 * the link rate.
 */
static int write_plot(const opts_t *o, const char *png,
                      const sim_result_t *rows, int n)
{
    enum { MAXS = 16 };
    int by_hosts = o->nhosts_list > 1, nseries = 0, ret = -1;
    int series_algo[MAXS], series_an[MAXS];
    uint64_t lat_size = o->sizes[0], bw_size = o->sizes[0];
    double linkMBps = o->cfg.link_Bps / 1e6, lat_us = o->cfg.link_lat_s * 1e6;
    /* Per series and panel: x and y of its points; the floor last. */
    double *buf =
        calloc((size_t)(2 * MAXS + 1) * 2 * (size_t)(n + 1), sizeof(double));
    plot_curve_t lat[MAXS + 1], bw[MAXS + 1];
    char names[MAXS][64], link_expr[32], lat_title[96], bw_title[96];
    int nfloor = 0;

    if (buf == NULL)
        return -1;
    for (int s = 0; s < o->nsizes; s++) {
        if (o->sizes[s] < lat_size)
            lat_size = o->sizes[s];
        if (o->sizes[s] > bw_size)
            bw_size = o->sizes[s];
    }
    /* A series is an algorithm, an AN mode and, in the network, a
     * protocol: series_an holds the mode and SERIES_STREAM. */
#define SERIES_AN(r)                                                           \
    ((r)->an + ((r)->stream ? 0x100 : 0) + ((r)->mcast ? 0x200 : 0))
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int s = 0; s < nseries; s++)
            if (series_algo[s] == rows[i].algo &&
                series_an[s] == SERIES_AN(&rows[i]))
                found = 1;
        if (!found && nseries < MAXS) {
            series_algo[nseries] = rows[i].algo;
            series_an[nseries++] = SERIES_AN(&rows[i]);
        }
    }
    for (int s = 0; s < nseries; s++) {
        snprintf(names[s], sizeof(names[s]), "%s%s%s%s%s",
                 algo_name((algo_kind_t)series_algo[s]),
                 series_an[s] & 0x100 ? "-stream" : "",
                 series_an[s] & 0x200 ? "-mcast" : "",
                 series_algo[s] == ALGO_INC ? " " : "",
                 series_algo[s] == ALGO_INC ? an_name(series_an[s] & 0xff)
                                            : "");
        for (int panel = 0; panel < 2; panel++) {
            double *x = buf + (size_t)(2 * s + panel) * 2 * (size_t)(n + 1);
            double *y = x + n + 1;
            plot_curve_t *c = panel ? &bw[s] : &lat[s];
            int k = 0;
            for (int i = 0; i < n; i++) {
                const sim_result_t *r = &rows[i];
                if (r->algo != series_algo[s] || SERIES_AN(r) != series_an[s] ||
                    r->outcome != SIM_OK)
                    continue;
                if (by_hosts && r->bytes != (panel ? bw_size : lat_size))
                    continue;
                x[k] = by_hosts ? (double)r->hosts : (double)r->bytes;
                y[k++] = panel ? r->bandwidth_MBps : r->latency_us;
            }
            *c = (plot_curve_t){names[s], PLOT_SERIES, s, k, x, y, NULL};
        }
    }
    {
        double *x = buf + (size_t)(2 * MAXS) * 2 * (size_t)(n + 1);
        double *y = x + n + 1;
        for (int i = 0; i < n; i++)
            if (rows[i].algo == ALGO_INC && rows[i].outcome == SIM_OK &&
                (!by_hosts || rows[i].bytes == lat_size)) {
                x[nfloor] =
                    by_hosts ? (double)rows[i].hosts : (double)rows[i].bytes;
                y[nfloor++] = 2.0 * rows[i].levels * lat_us;
            }
        lat[nseries] = (plot_curve_t){"floor: 2 x levels x link latency",
                                      PLOT_LIMIT,
                                      0,
                                      nfloor,
                                      x,
                                      y,
                                      NULL};
    }
    snprintf(link_expr, sizeof(link_expr), "%g", linkMBps);
    bw[nseries] =
        (plot_curve_t){"link rate", PLOT_LIMIT, 0, 0, NULL, NULL, link_expr};
    if (by_hosts) {
        snprintf(lat_title, sizeof(lat_title),
                 "allreduce of %" PRIu64 " bytes: latency", lat_size);
        snprintf(bw_title, sizeof(bw_title),
                 "allreduce of %" PRIu64 " bytes: bandwidth (bytes / time)",
                 bw_size);
    } else {
        snprintf(lat_title, sizeof(lat_title), "allreduce latency");
        snprintf(bw_title, sizeof(bw_title),
                 "allreduce bandwidth (bytes / time)");
    }
    {
        const char *xl = by_hosts ? "hosts" : "bytes";
        plot_panel_t panels[2] = {
            {lat_title, xl, "latency (us)", 1, !by_hosts, 1, 0, 0, "top left",
             lat, nseries + 1},
            {bw_title, xl, "bandwidth (MB/s)", 1, !by_hosts, 1, 0, linkMBps * 3,
             "bottom left", bw, nseries + 1},
        };
        plot_doc_t doc = {"incoll-sim", NULL, 1400, 560};
        ret = plot_write(png, &doc, panels, 2);
    }
    free(buf);
    return ret;
}

static int cmp_order(const void *a, const void *b)
{
    return ((const sim_result_t *)a)->order - ((const sim_result_t *)b)->order;
}

static int cmd_platform(opts_t *o)
{
    fabric_conf_t conf;
    if (o->cfg.xml_out == NULL) {
        fprintf(stderr, "incoll-sim platform: --xml FILE is required\n");
        return 2;
    }
    if (make_tree(o, o->hosts[0], &conf) != 0)
        return 1;
    if (write_platform(o, &conf, 1, o->cfg.xml_out) != 0)
        return 1;
    if (o->hostfile) {
        FILE *f = fopen(o->hostfile, "w");
        if (f == NULL) {
            fprintf(stderr, "incoll-sim: cannot write %s: %s\n", o->hostfile,
                    log_strerror(errno));
            return 1;
        }
        for (int r = 0; r < conf.nhosts; r++)
            fprintf(f, "h%d\n", r);
        fclose(f);
    }
    printf("platform: %d hosts, radix %d, %d levels, %d switches -> %s\n",
           conf.nhosts, conf.radix, conf.levels, conf.nans, o->cfg.xml_out);
    fabric_conf_free(&conf);
    return 0;
}

/*
 * SimGrid allocates and frees a few small objects per message; with
 * millions of messages glibc's default per-thread cache (7 chunks per
 * size) keeps falling back to the slow path, and a larger one saves about
 * a fifth of the time. Tunables are read at program start, so the
 * simulator runs itself again with them, unless the user set their own.
 */
static void tune_malloc(char **argv)
{
    if (getenv("GLIBC_TUNABLES") != NULL)
        return;
    if (setenv("GLIBC_TUNABLES",
               "glibc.malloc.tcache_count=65535:"
               "glibc.malloc.trim_threshold=1073741824",
               1) != 0)
        return;
    execv("/proc/self/exe", argv);
    /* Could not: go on with the defaults. */
}

/* The header of the allreduce table: the run's settings, the costs it
 * assumes, and the columns. */
static void print_header(const opts_t *o)
{
    char rate[32];
    double pkt_ns, byte_ns;

    printf(
        "# incoll-sim allreduce: %s links, %.17g us latency, oversubscription "
        "%g, "
        "float32 sum, slots %u, payload %u, window %u, drop %g, seed %" PRIu64
        ", iters %d\n",
        sim_rate_str(o->cfg.link_Bps, rate, sizeof(rate)),
        o->cfg.link_lat_s * 1e6, o->cfg.oversub, o->cfg.slots, o->cfg.payload,
        o->cfg.window ? o->cfg.window : o->cfg.slots, o->cfg.drop, o->cfg.seed,
        o->cfg.iters);
    if (sim_calib_agg_fit(&o->cfg.calib, o->cfg.an_cores, &pkt_ns, &byte_ns))
        printf("# costs (%s): server an of %d core%s %g ns/datagram + %g "
               "ns/byte (measured whole); hosts reduce %g GB/s + %g ns; "
               "switch an %g ns\n",
               o->cfg.calib.source, o->cfg.an_cores,
               o->cfg.an_cores > 1 ? "s" : "", pkt_ns, byte_ns,
               o->cfg.calib.host_reduce_gbps, o->cfg.calib.host_reduce_call_ns,
               o->cfg.calib.switch_ns);
    else
        printf("# costs (%s): server an of %d core%s %g ns/packet, copy "
               "%g GB/s, reduce %g GB/s + %g ns; hosts reduce %g GB/s + "
               "%g ns; switch an %g ns\n",
               o->cfg.calib.source, o->cfg.an_cores,
               o->cfg.an_cores > 1 ? "s" : "", o->cfg.calib.agg_pkt_ns,
               o->cfg.calib.copy_gbps, o->cfg.calib.agg_reduce_gbps,
               o->cfg.calib.agg_reduce_call_ns, o->cfg.calib.host_reduce_gbps,
               o->cfg.calib.host_reduce_call_ns, o->cfg.calib.switch_ns);
    printf("%-13s %-6s %6s %10s %14s %16s %6s %8s %8s\n", "# algorithm", "an",
           "hosts", "bytes", "latency(us)", "bandwidth(MB/s)", "check",
           "wall(s)", "mem(MiB)");
    fflush(stdout);
}

/* One whole message from fd into *msg; 0 at its end (or a short one). */
static int read_msg(int fd, msg_t *msg)
{
    size_t have = 0;
    while (have < sizeof(*msg)) {
        ssize_t got = read(fd, (char *)msg + have, sizeof(*msg) - have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        have += (size_t)got;
    }
    return have == sizeof(*msg);
}

/* The messages of the child simulating the i-th number of hosts, from
 * fd: progress lines, and the rows, printed and kept in rows (*nrows of
 * them, at most MAX_ROWS). Returns the number of failed rows. */
static int take_rows(const opts_t *o, int i, int fd, sim_result_t *rows,
                     int *nrows)
{
    msg_t msg;
    int failed = 0;

    while (read_msg(fd, &msg)) {
        if (msg.kind == 0) {
            if (!o->quiet)
                printf("# %d hosts, radix %d, %d levels: platform loaded in "
                       "%.2f s\n",
                       msg.hosts, msg.radix, msg.levels, msg.setup_s);
        } else {
            print_row(stdout, &msg.row);
            print_jobs(stdout, &msg.row);
            if (msg.row.outcome == SIM_FAILED)
                failed++;
            if (*nrows < MAX_ROWS) {
                rows[*nrows] = msg.row;
                rows[(*nrows)++].order = i * 100000 + msg.seq;
            }
        }
        fflush(stdout);
    }
    return failed;
}

/* Simulates the i-th number of hosts in a child process (a fresh SimGrid
 * each), its rows into rows; returns the number of failures (rows, and
 * the child's own), or -1 when no child could be started. */
static int simulate_size(const opts_t *o, int i, sim_result_t *rows, int *nrows)
{
    int fds[2], status, failed;
    pid_t pid;
    struct rusage ru;

    if (pipe(fds) != 0) {
        perror("incoll-sim: pipe");
        return -1;
    }
    pid = fork_child();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        _exit(child_main(o, o->hosts[i], fds[1]));
    }
    close(fds[1]);
    failed = take_rows(o, i, fds[0], rows, nrows);
    close(fds[0]);
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        char why[256];
        fprintf(stderr, "incoll-sim: the simulation of %d hosts failed: %s\n",
                o->hosts[i], exit_cause(status, why, sizeof(why)));
        failed++;
    } else if (!o->quiet) {
        double rss, cpu;
        ru_report(&ru, &rss, &cpu);
        printf("# %d hosts: peak memory %.1f MiB, cpu %.1f s\n", o->hosts[i],
               rss, cpu);
    }
    fflush(stdout);
    return failed;
}

int main(int argc, char **argv)
{
    opts_t o;
    sim_result_t *rows;
    int nrows = 0, failed = 0;

    tune_malloc(argv);
    log_init_from_env();
    log_set_name("sim");
    if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "allreduce") != 0 && strcmp(argv[1], "platform") != 0) {
        fprintf(stderr, "incoll-sim: unknown command %s (see --help)\n",
                argv[1]);
        return 2;
    }
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    if (strcmp(argv[1], "platform") == 0)
        return cmd_platform(&o);
    for (int i = 0; i < o.nhosts_list; i++) {
        fabric_conf_t conf;
        if (make_tree(&o, o.hosts[i], &conf) != 0)
            return 2;
        fabric_conf_free(&conf);
    }
    rows = calloc(MAX_ROWS, sizeof(*rows));
    if (rows == NULL)
        return 1;
    print_header(&o);
    for (int i = 0; i < o.nhosts_list; i++) {
        int f = simulate_size(&o, i, rows, &nrows);
        if (f < 0) {
            free(rows);
            return 1;
        }
        failed += f;
    }
    qsort(rows, (size_t)nrows, sizeof(*rows), cmp_order);
    if (o.csv && write_csv(o.csv, rows, nrows) != 0)
        failed++;
    if (o.plot && write_plot(&o, o.plot, rows, nrows) != 0)
        failed++;
    free(rows);
    return failed ? 1 : 0;
}
