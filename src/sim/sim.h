/*
 * incoll-sim: the scale simulator. It drives the project's own sans-I/O
 * cores (agg_t for every aggregation node, host_engine_t for every host,
 * algo_schedule() for the host-based algorithms, reduce_n() for the data)
 * on SimGrid, over a platform generated from the fabric's tree. See
 * docs/simulator.md for the model, its validation and its results.
 *
 * Layout of src/sim:
 *   sim_main.c      command line, sweeps (one child process per platform),
 *                   table, CSV and plot
 *   sim_parse.c     rates, times, sizes and lists on the command line
 *   sim_calib.c     calibration file written by `incoll bench kernel`
 *   sim_platform.c  SimGrid XML of a k-ary tree of switches
 *   sim_run.c       the actors: hosts, aggregation nodes, NICs, timers
 *   sim_mirror.c    which subtrees run and which are mirrored (--mirror)
 *   sim_ring.c      the ring's steps computed when needed, and the ring by
 *                   its step recurrence (--recurrence)
 */
#ifndef INCOLL_SIM_H
#define INCOLL_SIM_H

#include "common/fabric_conf.h"
#include "core/algo.h"
#include "common/wire.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    SIM_AN_SWITCH = 0, /* the AN is the switch ASIC: line rate, pipelined */
    SIM_AN_SERVER = 1, /* the AN is a server on one link of the switch */
    SIM_AN_COUNT
} sim_an_mode_t;

/* Costs of computation, from `incoll bench kernel --calib FILE` or the
 * documented defaults (docs/simulator.md, "Calibration"). Times in ns,
 * rates in bytes per ns (= GB/s). */
typedef struct {
    /* Server AN: fixed cost of receiving or sending one datagram (system
     * calls, parsing, bookkeeping), and memcpy rate of a contribution into
     * its buffer. */
    double agg_pkt_ns;
    double copy_gbps;
    /* Reduction of one slot on a server AN: call overhead plus input bytes
     * (children x payload) over the kernel's rate at the largest nsrc
     * measured. */
    double agg_reduce_call_ns;
    double agg_reduce_gbps;
    /* Host-based algorithms: reduce one received block into the working
     * buffer (nsrc = 2). */
    double host_reduce_call_ns;
    double host_reduce_gbps;
    /* Switch AN: pipeline latency added to each packet through the AN. */
    double switch_ns;
    /* Server AN measured whole (`incoll bench agg --calib`): CPU ns per
     * datagram it receives or sends = pkt_ns + byte_ns * datagram bytes
     * (system calls, copies, mac, reduction, all in), per count of
     * threads measured. When the record for the run's cores (or for one
     * thread) is there, it replaces agg_pkt_ns, copy and reduction. */
    struct {
        int threads;
        double pkt_ns, byte_ns;
    } agg_fit[8];
    int nagg_fit;
    char source[256]; /* file name, or "defaults" */
} sim_calib_t;

typedef struct {
    int hosts;
    int radix;
    int levels;      /* from the tree; checked against --levels */
    double link_Bps; /* bytes per second */
    double link_lat_s;
    double oversub; /* hosts' bandwidth over uplink bandwidth, >= 1 */
    sim_an_mode_t an;
    double drop; /* probability of losing any one packet */
    uint64_t seed;
    uint32_t slots;      /* per group, as fabric.conf's default */
    uint32_t payload;    /* bytes per packet */
    uint32_t window;     /* 0 = slots */
    int iters;           /* operations back to back */
    int data;            /* 1: real data, checked; 0: zeros, unchecked */
    int timers;          /* 1: hosts' retransmission timers run */
    int p2p_headers;     /* 1: baselines pay a wire header per packet */
    int no_compute;      /* 1: every computation cost is 0 */
    int no_stack_guards; /* 1: actor stacks without guard pages, always */
    int mirror;          /* 1: mirror identical subtrees (sim_mirror.c) */
    int recurrence;      /* 1: the ring by its step recurrence (sim_ring.c) */
    uint64_t max_msgs;   /* refuse a run that would send more messages */
    double max_mem;      /* refuse a run predicted to need more bytes */
    const char *xml_out; /* keep the platform here (NULL: temporary) */
    /* Streaming (docs/streaming.md), the library's policy
     * (host_engine_stream_wants_lock): with stream set, an allreduce of at
     * least stream_threshold bytes locks the tree first, for stream_nops
     * operations (0: until the end), asking for stream_window stream
     * slots; every AN has a pool of stream_pool bytes. */
    int stream;
    uint64_t stream_threshold;
    uint32_t stream_window;
    uint16_t stream_nops;
    uint64_t stream_pool;
    /* Jobs on the fabric at once: the hosts split into this many
     * consecutive blocks, each a group of its own rooted at the lowest AN
     * above all of its hosts, all starting together. */
    int groups;
    /* Cores of a server AN: its datagrams are handled this many at a
     * time (the cost of one divided by it), at the per-datagram cost
     * measured with that many threads when the calibration has it. */
    int an_cores;
    /* Results by multicast (docs/multicast.md, INCOLL_MCAST): every AN
     * with host children sends a result once, to its hosts' group, and
     * its switch replicates it to their ports at once; with mcast_dual
     * (INCOLL_MCAST_DUAL, bytes) results of at most that many bytes go by
     * unicast to every child too. */
    int mcast;
    uint32_t mcast_dual;
    sim_calib_t calib;
} sim_config_t;

#define SIM_MAX_GROUPS 16

/* One job of a run with several (sim_config_t.groups). */
typedef struct {
    int hosts;
    double latency_us; /* its last host's time per operation */
    double bandwidth_MBps;
    uint64_t ops, stream_ops; /* operations of its first host, and those
                                 that streamed */
    uint64_t locks_granted, locks_refused; /* its first host's */
    int failed;
} sim_job_result_t;

typedef enum {
    SIM_OK = 0,      /* ran, and if checked, every result was right */
    SIM_SKIPPED = 1, /* not run: over the message budget */
    SIM_FAILED = 2,  /* ran, but a host failed or a result was wrong */
} sim_outcome_t;

/* One row of the table and the CSV. */
typedef struct {
    int algo; /* algo_kind_t */
    int an;   /* sim_an_mode_t for inc, -1 for host algorithms */
    int hosts;
    int levels;
    int radix;
    uint64_t bytes;
    int outcome;           /* sim_outcome_t */
    int checked;           /* 1 if every host's result was compared */
    double latency_us;     /* simulated time per operation */
    double bandwidth_MBps; /* bytes / latency, 1e6 bytes per second */
    double wall_s;         /* wall-clock time of the simulation */
    double cpu_s;          /* CPU time of its process, platform load included */
    double rss_MiB;        /* peak memory of its process */
    uint64_t messages;     /* SimGrid messages sent */
    uint64_t retransmits;
    uint64_t dropped;
    int order;                /* position in the sweep, for sorting */
    int stream;               /* 1: streaming on (sim_config_t.stream) */
    int groups;               /* jobs at once; jobs[] holds each when above 1 */
    uint64_t stream_ops, ops; /* over every host: operations streamed */
    int mcast;                /* sim_config_t.mcast */
    /* The first simulated leaf AN's datagrams sent and results sent (its
     * counters packets_out and results_sent), and over every AN the
     * results sent to a group address and resent to a member that
     * listens (mcast_sent, mcast_repairs). */
    uint64_t leaf_pkts_out, leaf_results;
    uint64_t mcast_sent, mcast_repairs;
    char note[128];
    sim_job_result_t jobs[SIM_MAX_GROUPS];
} sim_result_t;

/* sim_parse.c */
int sim_parse_rate(const char *text, double *Bps_p);      /* "100Gbps" */
int sim_parse_time(const char *text, double *s_p);        /* "1us" */
int sim_parse_bytes(const char *text, uint64_t *bytes_p); /* "1M", "8" */
/* "8,64,1K" or "MIN:MAX" (powers of two from MIN to MAX). Returns the
 * number of sizes written, or -1 on bad text or more than max. */
int sim_parse_sizes(const char *text, uint64_t *sizes, int max);
int sim_parse_ints(const char *text, int *vals, int max);
/* Formats bytes per second as "100Gbps" into buf. */
const char *sim_rate_str(double Bps, char *buf, size_t len);

/* sim_calib.c */
void sim_calib_defaults(sim_calib_t *calib);
/* Reads a calibration file over the defaults; on error returns -1 and
 * writes "path:line: cause" into err. */
int sim_calib_load(const char *path, sim_calib_t *calib, char *err,
                   size_t errlen);
void sim_calib_zero(sim_calib_t *calib);
/* The measured server AN cost for cores cores (agg_fit): 1 with the
 * record of that many threads, else of one thread, in *pkt_ns_p and
 * *byte_ns_p; 0 when the calibration has none. */
int sim_calib_agg_fit(const sim_calib_t *calib, int cores, double *pkt_ns_p,
                      double *byte_ns_p);

/* sim_mirror.c */
enum {
    SIM_MIRROR_REAL = 1,   /* simulated */
    SIM_MIRROR_COPY = 2,   /* sends what its first sibling sends */
    SIM_MIRROR_INSIDE = 3, /* below a mirror: not simulated */
};
typedef struct {
    int *state; /* per AN: SIM_MIRROR_* */
    int *rep;   /* per mirror: the sibling it copies */
    int *first; /* per AN: its first mirror, or -1 */
    int *next;  /* per mirror: the next mirror of the same sibling, or -1 */
    int *index; /* per AN: its child index at its parent */
    int hosts;  /* hosts simulated (under simulated leaves) */
    int mirrors;
    long suma; /* sum of every host's input factor, mirrors as copies */
} sim_mirror_t;
/* Input of rank r, element j, is sim_input_factor(r) * (1 + j % 251). */
static inline int sim_input_factor(int r)
{
    return 1 + (r & 1);
}
/* Which ANs a run simulates; with on = 0, all of them. Returns 0 or -1
 * (out of memory). */
int sim_mirror_plan(const fabric_conf_t *conf, int on, sim_mirror_t *m);
void sim_mirror_free(sim_mirror_t *m);

/* Bytes on the wire for a block of a host-based algorithm: the payload,
 * plus with --p2p-headers one wire header per packet of the real
 * transport. */
static inline uint64_t sim_p2p_len(const sim_config_t *cfg, uint64_t bytes)
{
    uint64_t pkts = (bytes + cfg->payload - 1) / cfg->payload;
    return bytes + (cfg->p2p_headers ? pkts * WIRE_HDR_LEN : 0);
}

/* Seconds a computation of bytes at gbps (bytes per ns) plus call_ns
 * takes; a rate of 0 makes the bytes free (--no-compute). */
static inline double sim_cost_s(double call_ns, double bytes, double gbps)
{
    if (gbps <= 0)
        return call_ns * 1e-9;
    return (call_ns + bytes / gbps) * 1e-9;
}

/* A host folding a received block of bytes into its own: 2 x bytes at the
 * calibrated 2-source kernel speed. */
static inline double sim_host_reduce_s(const sim_config_t *cfg, size_t bytes)
{
    return sim_cost_s(cfg->calib.host_reduce_call_ns, 2.0 * (double)bytes,
                      cfg->calib.host_reduce_gbps);
}

/* sim_ring.c */
/* Steps of the ring on size ranks (0 if it has none). */
int sim_ring_nsteps(int size, size_t count);
/* Step i of rank's ring schedule, as algo_schedule(ALGO_RING) lists it. */
void sim_ring_step(int rank, int size, size_t count, int i, algo_step_t *st);
/* With fewer elements than ranks: rank's non-empty steps in order, into
 * steps (at most 2 x count + 2); returns their number, -1 when every step
 * may be non-empty (count >= size), -2 if max is too small. */
int sim_ring_active(int rank, int size, size_t count, int *steps, int max);
/* 0 if sim_ring_step and sim_ring_active agree with algo_schedule() on
 * sample ranks, else -1 with a message on stderr. */
int sim_ring_check(int size, size_t count);
/* The ring allreduce of bytes on conf's tree by its step recurrence,
 * without SimGrid; fills *res. Returns 0, or -1 (out of memory). */
int sim_ring_run(const sim_config_t *cfg, const fabric_conf_t *conf,
                 uint64_t bytes, sim_result_t *res);

/* sim_platform.c */
/*
 * Writes the SimGrid platform of conf's tree to f (the shape is described
 * at the top of sim_platform.c): per switch X a zone "z-X" whose gateway
 * "sx-X" is the switch itself (its AN in switch mode, its port towards the
 * AN server in server mode), a server "an-X", the hosts "h<rank>" under
 * the leaves. Links from a switch to its parent carry hosts_below /
 * oversub times the link rate (oversub 1: full bisection). p2p adds the
 * host-to-host routes the host-based algorithms need. Returns 0, or -1 on
 * a write error or a tree of another shape.
 */
int sim_platform_write(FILE *f, const fabric_conf_t *conf, double link_Bps,
                       double link_lat_s, double oversub, int p2p);

/* sim_run.c */
/*
 * Loads the platform at xml (once per process) and runs one measurement:
 * algo over cfg->hosts hosts with vectors of bytes bytes. Fills *res.
 * Returns 0, or -1 if the simulation itself could not run.
 */
int sim_run_init(int *argc, char **argv, const char *xml,
                 const sim_config_t *cfg, const fabric_conf_t *conf);
/* Actors a measurement on conf's tree starts, at most. */
long sim_max_actors(const fabric_conf_t *conf);
int sim_run_one(const sim_config_t *cfg, const fabric_conf_t *conf, int algo,
                uint64_t bytes, sim_result_t *res);

#endif
