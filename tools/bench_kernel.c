/*
 * `incoll bench kernel`: throughput of the reduction kernels, the per-packet
 * work of an aggregation node, next to memcpy measured in the same run.
 *
 * Each call reduces nsrc sources of one packet payload (--bytes, default
 * 8192) into a result buffer. The sources are consecutive slices of a pool
 * (default 32 MiB, larger than L2) that the calls walk through in order, so
 * the data comes from the outer caches or memory as it would for packets
 * the NIC just wrote; results go to a ring of 64 buffers, as an AN's result
 * slots would. memcpy copies one payload per call from the same pool walk
 * into the same ring.
 *
 * GB/s of a reduction counts input consumed: nsrc * bytes per call / time.
 * GB/s of memcpy counts bytes copied: bytes per call / time. The contenders
 * (reduce_n, reduce_n_scalar, memcpy) run alternately for --rounds rounds
 * and each row reports the median round.
 *
 * Then the data path's MACs (docs/security.md): each candidate tags
 * packets of 64 B, 1 KiB and 8 KiB walking the same pool, the
 * candidates alternating round after round: the wire algorithms as a
 * packet is sealed (wire_mac_seal: header and payload), and the
 * primitives behind them from each library, with keyed BLAKE2b and
 * HMAC-SHA-256 beside them.
 *
 * --calib FILE writes what the simulator needs to charge an AN for a
 * reduction: per (dtype, nsrc), a straight-line fit
 * ns_per_call = ns_per_packet_overhead + ns_per_byte * bytes (bytes per
 * source) from a small and a full-size payload; and per wire MAC the same
 * fit of a packet's tag from 64 B to 8 KiB.
 */
#include "bench_opts.h"
#include "cli.h"

#include "common/dtype.h"
#include "common/wire_mac.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef INCOLL_HAVE_SODIUM
#include <sodium.h>
#endif
#ifdef INCOLL_HAVE_OPENSSL
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

/* Defined in src/common/reduce.c; not yet declared in common/dtype.h. */

#define MAX_NSRC 8
#define RING_SLOTS 64
#define MAX_ROUNDS 101
/* Payload of the small packet in the calibration fit. */
#define CALIB_SMALL_BYTES 512

enum { RUN_REDUCE, RUN_SCALAR, RUN_MEMCPY, RUN_COUNT };

typedef struct {
    size_t bytes;      /* per source */
    size_t pool_bytes; /* sources cycle through this much memory */
    double seconds;    /* per contender per row, split over the rounds */
    long iters;        /* if > 0: calls per round instead of seconds */
    int rounds;
    const char *impl;
    const char *csv_path;
    const char *calib_path;
    incoll_op_t op;
    incoll_dtype_t dtypes[INCOLL_DTYPE_COUNT];
    int ndtypes;
    int nsrcs[MAX_NSRC];
    int nnsrcs;
} opts_t;

typedef struct {
    const opts_t *o;
    unsigned char *pool;
    unsigned char *ring; /* RING_SLOTS result buffers of bytes each */
    size_t off[RUN_COUNT];
    unsigned slot;
} bench_t;

/* One measured row: median ns per call of each contender, and the spread
 * of the reduce_n rounds. */
typedef struct {
    double ns[RUN_COUNT];
    double avg_ns, min_ns, max_ns;
} result_t;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Parses a comma-separated list with parse_one into out[max]; returns the
 * number of items, or -1 on a bad item or too many. */
static int parse_list(const char *s, int (*parse_one)(const char *), int *out,
                      int max)
{
    char buf[256], *save = NULL, *tok;
    int n = 0;
    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int v = parse_one(tok);
        if (v < 0 || n == max)
            return -1;
        out[n++] = v;
    }
    return n > 0 ? n : -1;
}

static int parse_nsrc(const char *s)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 2 || v > MAX_NSRC)
        return -1;
    return (int)v;
}

static void kernel_defaults(const bench_cmd_t *cmd, bench_opts_t *o)
{
    (void)cmd;
    o->bytes = 8192;
    o->pool = 32u << 20;
    o->seconds = 0.25;
    o->rounds = 5;
    o->iters = 0;
}

static const bench_range_t kernel_ranges[] = {
    {BENCH_OPT_BYTES, 8, 64u << 20},
    {BENCH_OPT_ITERS, 1, 1000000000},
    {BENCH_OPT_ROUNDS, 1, MAX_ROUNDS},
    {0, 1, 0},
};

static const bench_optdoc_t kernel_docs[] = {
    {BENCH_OPT_DTYPE, "comma-separated datatypes (default "
                      "float32,float64,int32)"},
    {BENCH_OPT_OP, "reduction op (default sum)"},
    {BENCH_OPT_NSRC, "comma-separated source counts, 2..8 (default 2,4,8)"},
    {BENCH_OPT_BYTES, "payload bytes per source and call, a multiple of 8"},
    {BENCH_OPT_POOL, "bytes of source pool the calls walk through (larger "
                     "than L2)"},
    {BENCH_OPT_ITERS, "calls per round instead of --seconds"},
    {BENCH_OPT_ROUNDS, "alternating rounds, median reported"},
    {BENCH_OPT_CSV, "also write the rows as CSV"},
    {BENCH_OPT_CALIB, "write a calibration file for the simulator"},
    {0, NULL},
};

static const bench_cmd_t kernel_cmd = {
    .who = "bench kernel",
    .synopsis = "bench kernel [options]",
    .about = "Reduction kernel throughput against memcpy, measured side by "
             "side (default: sum over float32, float64 and int32 with 2, 4 "
             "and 8 sources).",
    .accepts = BENCH_OPT(DTYPE) | BENCH_OPT(OP) | BENCH_OPT(NSRC) |
               BENCH_OPT(BYTES) | BENCH_OPT(POOL) | BENCH_OPT(SECONDS) |
               BENCH_OPT(ITERS) | BENCH_OPT(ROUNDS) | BENCH_OPT(IMPL) |
               BENCH_OPT(CSV) | BENCH_OPT(CALIB) | BENCH_OPT(HELP),
    .defaults = kernel_defaults,
    .docs = kernel_docs,
    .ranges = kernel_ranges,
    .epilog = "Reduce GB/s = nsrc * bytes consumed per second; memcpy GB/s = "
              "bytes copied per second; 'vs memcpy' is their ratio.",
};

/* Parses argv with the benchmarks' option table (tools/bench_opts.h), then
 * the lists of this benchmark. Returns 0, 1 after --help, -1 after a
 * message. */
static int parse_opts(int argc, char **argv, opts_t *o)
{
    int list[INCOLL_DTYPE_COUNT], cnt, rc;
    bench_opts_t b;

    *o = (opts_t){.op = INCOLL_OP_SUM,
                  .dtypes = {INCOLL_FLOAT32, INCOLL_FLOAT64, INCOLL_INT32},
                  .ndtypes = 3,
                  .nsrcs = {2, 4, 8},
                  .nnsrcs = 3};
    if (bench_opts_get(&kernel_cmd, argc, argv, &b, &rc) != 0)
        return rc == 0 ? 1 : -1;
    o->bytes = b.bytes;
    o->pool_bytes = b.pool;
    o->seconds = b.seconds;
    o->iters = b.iters;
    o->rounds = b.rounds;
    o->impl = b.impl;
    o->csv_path = b.csv;
    o->calib_path = b.calib;
    if (o->bytes % 8 != 0) {
        fprintf(stderr,
                "incoll bench kernel: --bytes wants a multiple of 8, not "
                "'%zu'\n",
                o->bytes);
        return -1;
    }
    if (b.dtype) {
        cnt = parse_list(b.dtype, dtype_parse, list, INCOLL_DTYPE_COUNT);
        if (cnt < 0) {
            fprintf(stderr,
                    "incoll bench kernel: --dtype wants datatype "
                    "names (float32, float64, int32, ...: `incoll info`), "
                    "not '%s'\n",
                    b.dtype);
            return -1;
        }
        o->ndtypes = cnt;
        for (int k = 0; k < cnt; k++)
            o->dtypes[k] = (incoll_dtype_t)list[k];
    }
    if (b.nsrc) {
        cnt = parse_list(b.nsrc, parse_nsrc, list, MAX_NSRC);
        if (cnt < 0) {
            fprintf(stderr,
                    "incoll bench kernel: --nsrc wants source counts in "
                    "2..%d, comma-separated, not '%s'\n",
                    MAX_NSRC, b.nsrc);
            return -1;
        }
        o->nnsrcs = cnt;
        memcpy(o->nsrcs, list, (size_t)cnt * sizeof(list[0]));
    }
    if (b.op) {
        cnt = op_parse(b.op);
        if (cnt < 0) {
            fprintf(stderr,
                    "incoll bench kernel: --op wants a reduction op (sum, "
                    "prod, min, max, ...: `incoll info`), not '%s'\n",
                    b.op);
            return -1;
        }
        o->op = (incoll_op_t)cnt;
    }
    for (int k = 0; k < o->ndtypes; k++) {
        if (!incoll_op_valid(o->op, o->dtypes[k])) {
            fprintf(stderr, "incoll bench kernel: op %s does not apply to %s\n",
                    incoll_op_name(o->op), incoll_dtype_name(o->dtypes[k]));
            return -1;
        }
    }
    return 0;
}

/* Fills the pool with values that keep floating-point results finite and
 * normal, so no microcode assist for subnormals skews the timing; integers
 * get spread-out bits. */
static void fill_pool(bench_t *b, incoll_dtype_t dtype)
{
    size_t sz = incoll_dtype_size(dtype), n = b->o->pool_bytes / sz;
    for (size_t i = 0; i < n; i++) {
        float f = 1.0f + (float)(i % 1021) / 1024.0f;
        uint64_t u = (uint64_t)i * 0x9e3779b97f4a7c15ull;
        unsigned char *p = b->pool + i * sz;
        switch (dtype) {
        case INCOLL_FLOAT16: {
            uint16_t h = dtype_float_to_half(f);
            memcpy(p, &h, sz);
            break;
        }
        case INCOLL_BFLOAT16: {
            uint16_t h = dtype_float_to_bf16(f);
            memcpy(p, &h, sz);
            break;
        }
        case INCOLL_FLOAT32:
            memcpy(p, &f, sz);
            break;
        case INCOLL_FLOAT64: {
            double d = f;
            memcpy(p, &d, sz);
            break;
        }
        default:
            memcpy(p, &u, sz); /* little-endian: the low bytes */
        }
    }
}

/* Runs `calls` calls of one contender; pool offsets and the result ring
 * carry over from call to call so that every call reads fresh sources. */
static void run_calls(bench_t *b, int what, incoll_dtype_t dtype, int nsrc,
                      size_t bytes, long calls)
{
    size_t count = bytes / incoll_dtype_size(dtype);
    size_t span = what == RUN_MEMCPY ? bytes : (size_t)nsrc * bytes;
    const void *src[MAX_NSRC];

    for (long c = 0; c < calls; c++) {
        size_t off = b->off[what];
        unsigned char *dst = b->ring + (size_t)(b->slot++ % RING_SLOTS) * bytes;
        if (off + span > b->o->pool_bytes)
            off = 0;
        b->off[what] = off + span;
        if (what == RUN_MEMCPY) {
            memcpy(dst, b->pool + off, bytes);
            continue;
        }
        for (int k = 0; k < nsrc; k++)
            src[k] = b->pool + off + (size_t)k * bytes;
        if (what == RUN_REDUCE)
            reduce_n(b->o->op, dtype, dst, src, nsrc, count);
        else
            reduce_n_scalar(b->o->op, dtype, dst, src, nsrc, count);
    }
}

/* One round of one contender: ns per call. */
static double time_round(bench_t *b, int what, incoll_dtype_t dtype, int nsrc,
                         size_t bytes)
{
    const opts_t *o = b->o;
    double t0 = now_ns(), t, budget;
    long calls = 0, batch = 16;

    if (o->iters > 0) {
        run_calls(b, what, dtype, nsrc, bytes, o->iters);
        return (now_ns() - t0) / (double)o->iters;
    }
    budget = o->seconds * 1e9 / o->rounds;
    do {
        run_calls(b, what, dtype, nsrc, bytes, batch);
        calls += batch;
        t = now_ns();
    } while (t - t0 < budget);
    return (t - t0) / (double)calls;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Measures the contenders in `mask` alternately, round after round. */
static void measure(bench_t *b, unsigned mask, incoll_dtype_t dtype, int nsrc,
                    size_t bytes, result_t *r)
{
    double ns[RUN_COUNT][MAX_ROUNDS];
    int rounds = b->o->rounds;

    /* Warm up: page in and settle the clocks. */
    for (int w = 0; w < RUN_COUNT; w++)
        if (mask & (1u << w))
            run_calls(b, w, dtype, nsrc, bytes, 64);
    for (int i = 0; i < rounds; i++)
        for (int w = 0; w < RUN_COUNT; w++)
            if (mask & (1u << w))
                ns[w][i] = time_round(b, w, dtype, nsrc, bytes);
    memset(r, 0, sizeof(*r));
    r->min_ns = r->max_ns = ns[RUN_REDUCE][0];
    for (int i = 0; i < rounds; i++) {
        double v = ns[RUN_REDUCE][i];
        r->avg_ns += v / rounds;
        r->min_ns = v < r->min_ns ? v : r->min_ns;
        r->max_ns = v > r->max_ns ? v : r->max_ns;
    }
    for (int w = 0; w < RUN_COUNT; w++)
        if (mask & (1u << w))
            r->ns[w] = median(ns[w], rounds);
}

static FILE *open_out(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        fprintf(stderr, "incoll bench kernel: cannot write %s: %s\n", path,
                log_strerror(errno));
    return f;
}

/* ---- MACs ---------------------------------------------------------------- */

enum {
    MAC_WIRE_SIPHASH,
    MAC_WIRE_POLY1305,
    MAC_WIRE_GMAC,
    MAC_POLY_OSSL,
    MAC_POLY_SODIUM,
    MAC_GMAC_OSSL,
    MAC_GMAC_SODIUM,
    MAC_BLAKE2B,
    MAC_HMAC_SHA256,
    MAC_COUNT
};

static const struct {
    const char *name, *what;
} mac_rows[MAC_COUNT] = {
    {"siphash", "wire: SipHash-2-4 over payload and header"},
    {"poly1305", "wire: SipHash over a Poly1305 digest and the header"},
    {"gmac", "wire: SipHash over a GMAC digest and the header"},
    {"poly1305-openssl", "Poly1305 alone, OpenSSL libcrypto"},
    {"poly1305-sodium", "Poly1305 alone, libsodium"},
    {"gmac-openssl", "AES-256-GCM tag of associated data, OpenSSL"},
    {"gmac-sodium", "AES-256-GCM tag of associated data, libsodium"},
    {"blake2b", "keyed BLAKE2b-128, libsodium"},
    {"hmac-sha256", "HMAC-SHA-256, OpenSSL libcrypto"},
};

#define MAC_SIZES 3
static const size_t mac_sizes[MAC_SIZES] = {64, 1024, 8192};

typedef struct {
    unsigned char *pool;
    size_t pool_bytes, off;
    wire_key_t key[3]; /* the wire algorithms' keys */
    uint64_t sink;
} macb_t;

/* 1 when this build and CPU can run candidate m (forcing the library of
 * the primitives' rows). */
static int mac_can(int m)
{
    switch (m) {
    case MAC_WIRE_SIPHASH:
        return 1;
    case MAC_WIRE_POLY1305:
        return wire_mac_alg_available(WIRE_MAC_POLY1305, NULL);
    case MAC_WIRE_GMAC:
        return wire_mac_alg_available(WIRE_MAC_GMAC, NULL);
    case MAC_POLY_OSSL:
    case MAC_GMAC_OSSL:
    case MAC_HMAC_SHA256:
#ifdef INCOLL_HAVE_OPENSSL
        return m == MAC_HMAC_SHA256 ||
               wire_mac_set_impl(m == MAC_POLY_OSSL ? WIRE_MAC_POLY1305
                                                    : WIRE_MAC_GMAC,
                                 "openssl") == 0;
#else
        return 0;
#endif
    default:
#ifdef INCOLL_HAVE_SODIUM
        return m == MAC_BLAKE2B ||
               wire_mac_set_impl(m == MAC_POLY_SODIUM ? WIRE_MAC_POLY1305
                                                      : WIRE_MAC_GMAC,
                                 "libsodium") == 0;
#else
        return 0;
#endif
    }
}

/* calls tags of candidate m over packets of bytes walking the pool. */
static void mac_calls(macb_t *b, int m, size_t bytes, long calls)
{
    uint8_t out[64];
    for (long c = 0; c < calls; c++) {
        uint8_t *p;
        if (b->off + bytes + WIRE_HDR_LEN > b->pool_bytes)
            b->off = 0;
        p = b->pool + b->off;
        b->off += (bytes + WIRE_HDR_LEN + 63) & ~(size_t)63;
        switch (m) {
        case MAC_WIRE_SIPHASH:
        case MAC_WIRE_POLY1305:
        case MAC_WIRE_GMAC:
            /* p: a header, then the payload, as a datagram. */
            wire_mac_seal(&b->key[m - MAC_WIRE_SIPHASH], p, p + WIRE_HDR_LEN,
                          bytes);
            b->sink += p[16];
            continue;
        case MAC_POLY_OSSL:
        case MAC_POLY_SODIUM:
            wire_mac_digest(&b->key[1], p, bytes, out);
            break;
        case MAC_GMAC_OSSL:
        case MAC_GMAC_SODIUM:
            wire_mac_digest(&b->key[2], p, bytes, out);
            break;
#ifdef INCOLL_HAVE_SODIUM
        case MAC_BLAKE2B:
            crypto_generichash(out, 16, p, bytes, b->key[1].dk, 32);
            break;
#endif
#ifdef INCOLL_HAVE_OPENSSL
        case MAC_HMAC_SHA256: {
            unsigned int ol = sizeof(out);
            HMAC(EVP_sha256(), b->key[1].dk, 32, p, bytes, out, &ol);
            break;
        }
#endif
        default:
            break;
        }
        b->sink += out[0];
    }
}

/* One round of candidate m: ns per tag. */
static double mac_round(macb_t *b, int m, size_t bytes, const opts_t *o)
{
    double t0, t, budget = o->seconds * 1e9 / o->rounds / 2;
    long calls = 0;
    /* The primitives' rows force their library for the run. */
    if (m == MAC_POLY_OSSL || m == MAC_GMAC_OSSL)
        wire_mac_set_impl(
            m == MAC_POLY_OSSL ? WIRE_MAC_POLY1305 : WIRE_MAC_GMAC, "openssl");
    else if (m == MAC_POLY_SODIUM || m == MAC_GMAC_SODIUM)
        wire_mac_set_impl(m == MAC_POLY_SODIUM ? WIRE_MAC_POLY1305
                                               : WIRE_MAC_GMAC,
                          "libsodium");
    mac_calls(b, m, bytes, 16);
    t0 = now_ns();
    if (o->iters > 0) {
        mac_calls(b, m, bytes, o->iters);
        return (now_ns() - t0) / (double)o->iters;
    }
    do {
        mac_calls(b, m, bytes, 32);
        calls += 32;
        t = now_ns();
    } while (t - t0 < budget);
    return (t - t0) / (double)calls;
}

/* Measures every candidate at every size, alternating; prints the table
 * and, with calib, the wire algorithms' fits. */
static void run_macs(const opts_t *o, unsigned char *pool, FILE *calib)
{
    static double ns[MAC_COUNT][MAC_SIZES][MAX_ROUNDS];
    static const char *fastest_impl[2];
    int can[MAC_COUNT];
    macb_t b;
    double med[MAC_COUNT][MAC_SIZES];

    memset(&b, 0, sizeof(b));
    b.pool = pool;
    b.pool_bytes = o->pool_bytes;
    for (int a = 0; a < 3; a++) {
        wire_key_derive(NULL, WIRE_KEY_GROUP, 1, 0x1234567890abcdefull,
                        &b.key[a]);
        wire_key_set_alg(&b.key[a], (wire_mac_alg_t)a);
    }
    /* The library the wire algorithms run on by default (restored after
     * the primitives' rows force one or the other). */
    fastest_impl[0] = wire_mac_alg_impl(WIRE_MAC_POLY1305);
    fastest_impl[1] = wire_mac_alg_impl(WIRE_MAC_GMAC);
    for (int m = 0; m < MAC_COUNT; m++)
        can[m] = mac_can(m);
    for (int r = 0; r < o->rounds; r++)
        for (int m = 0; m < MAC_COUNT; m++)
            for (int z = 0; z < MAC_SIZES && can[m]; z++) {
                ns[m][z][r] = mac_round(&b, m, mac_sizes[z], o);
                wire_mac_set_impl(WIRE_MAC_POLY1305, fastest_impl[0]);
                wire_mac_set_impl(WIRE_MAC_GMAC, fastest_impl[1]);
            }
    printf("\n# data-path MACs: ns per tag and GB/s of payload at each "
           "size, median of %d alternating rounds; wire rows tag a "
           "whole packet (a %d-byte header and the payload; digests "
           "from %d bytes)\n",
           o->rounds, WIRE_HDR_LEN, WIRE_MAC_DIGEST_MIN);
    printf("%-17s %9s %7s %9s %7s %9s %7s  %s\n", "# mac", "64B ns", "GB/s",
           "1K ns", "GB/s", "8K ns", "GB/s", "what");
    for (int m = 0; m < MAC_COUNT; m++) {
        if (!can[m]) {
            printf("%-17s %s\n", mac_rows[m].name,
                   "(not in this build or CPU)");
            continue;
        }
        printf("%-17s", mac_rows[m].name);
        for (int z = 0; z < MAC_SIZES; z++) {
            med[m][z] = median(ns[m][z], o->rounds);
            printf(" %9.1f %7.2f", med[m][z], (double)mac_sizes[z] / med[m][z]);
        }
        printf("  %s\n", mac_rows[m].what);
    }
    printf("# (wire poly1305 and gmac here: %s and %s; sink %llu)\n",
           fastest_impl[0], fastest_impl[1], (unsigned long long)(b.sink & 1));
    if (calib == NULL)
        return;
    for (int m = MAC_WIRE_SIPHASH; m <= MAC_WIRE_GMAC; m++) {
        double per_byte, over;
        if (!can[m])
            continue;
        per_byte = (med[m][MAC_SIZES - 1] - med[m][0]) /
                   (double)(mac_sizes[MAC_SIZES - 1] - mac_sizes[0]);
        over = med[m][0] - per_byte * (double)mac_sizes[0];
        fprintf(calib,
                "mac alg=%s ns_per_packet=%.1f ns_per_byte=%.5f "
                "ns_8k=%.1f\n",
                mac_rows[m].name, over > 0 ? over : 0,
                per_byte > 0 ? per_byte : 0, med[m][MAC_SIZES - 1]);
    }
}

/* The lines above the table, the CSV's header and the calibration
 * file's. */
static void print_head(const opts_t *o, FILE *csv, FILE *calib)
{
    printf("# incoll bench kernel: reduce_n (impl %s) vs reduce_n_scalar vs "
           "memcpy, op %s\n",
           reduce_impl_name(), incoll_op_name(o->op));
    printf("# %zu bytes per source; sources walk a %zu MiB pool, results go "
           "to a ring of %d buffers\n",
           o->bytes, o->pool_bytes >> 20, RING_SLOTS);
    printf("# reduce GB/s = nsrc * bytes consumed / s; memcpy GB/s = bytes "
           "copied / s\n");
    if (o->iters > 0)
        printf("# %d alternating rounds of %ld calls; ns per call; GB/s from "
               "the median round\n",
               o->rounds, o->iters);
    else
        printf("# %d alternating rounds of %.3f s; ns per call; GB/s from the "
               "median round\n",
               o->rounds, o->seconds / o->rounds);
    printf("%-9s %-4s %5s %8s %9s %9s %9s %8s %12s %12s %10s\n", "# dtype",
           "op", "nsrc", "bytes", "avg(ns)", "min(ns)", "max(ns)", "GB/s",
           "scalar GB/s", "memcpy GB/s", "vs memcpy");
    if (csv)
        fprintf(csv, "dtype,op,nsrc,bytes,impl,avg_ns,min_ns,max_ns,gbps,"
                     "scalar_gbps,memcpy_gbps,ratio_memcpy\n");
    if (calib) {
        fprintf(calib, "# incoll kernel calibration, impl=%s pool=%zu\n",
                reduce_impl_name(), o->pool_bytes);
        fprintf(calib, "# ns_per_call = ns_per_packet_overhead + ns_per_byte "
                       "* bytes, bytes per source; gbps = nsrc * bytes / "
                       "ns_per_call\n");
    }
}

/* One row: dtype dt with nsrc sources, measured against the scalar
 * kernel and memcpy, printed, and written to the CSV and the calibration
 * file when open. Returns memcpy's ns per call. */
static double kernel_row(bench_t *b, incoll_dtype_t dt, int nsrc, FILE *csv,
                         FILE *calib)
{
    const opts_t *o = b->o;
    result_t r;
    double in = (double)nsrc * (double)o->bytes;
    double gbps, sgbps, mgbps;

    measure(b, 7u, dt, nsrc, o->bytes, &r);
    gbps = in / r.ns[RUN_REDUCE];
    sgbps = in / r.ns[RUN_SCALAR];
    mgbps = (double)o->bytes / r.ns[RUN_MEMCPY];
    printf("%-9s %-4s %5d %8zu %9.1f %9.1f %9.1f %8.2f %12.2f %12.2f "
           "%10.2f\n",
           incoll_dtype_name(dt), incoll_op_name(o->op), nsrc, o->bytes,
           r.avg_ns, r.min_ns, r.max_ns, gbps, sgbps, mgbps, gbps / mgbps);
    fflush(stdout);
    if (csv)
        fprintf(csv,
                "%s,%s,%d,%zu,%s,%.1f,%.1f,%.1f,%.3f,%.3f,%.3f,"
                "%.3f\n",
                incoll_dtype_name(dt), incoll_op_name(o->op), nsrc, o->bytes,
                reduce_impl_name(), r.avg_ns, r.min_ns, r.max_ns, gbps, sgbps,
                mgbps, gbps / mgbps);
    if (calib) {
        /* Two-point fit between a small payload and the full one. */
        size_t small =
            o->bytes > CALIB_SMALL_BYTES ? CALIB_SMALL_BYTES : o->bytes / 2;
        double per_byte = 0, overhead = r.ns[RUN_REDUCE];
        if (small >= 8) {
            result_t rs;
            measure(b, 1u << RUN_REDUCE, dt, nsrc, small, &rs);
            per_byte = (r.ns[RUN_REDUCE] - rs.ns[RUN_REDUCE]) /
                       (double)(o->bytes - small);
            if (per_byte < 0)
                per_byte = 0;
            overhead = r.ns[RUN_REDUCE] - per_byte * (double)o->bytes;
            if (overhead < 0)
                overhead = 0;
        }
        fprintf(calib,
                "kernel dtype=%s op=%s nsrc=%d bytes=%zu gbps=%.3f "
                "ns_per_call=%.1f ns_per_packet_overhead=%.1f "
                "ns_per_byte=%.5f\n",
                incoll_dtype_name(dt), incoll_op_name(o->op), nsrc, o->bytes,
                gbps, r.ns[RUN_REDUCE], overhead, per_byte);
    }
    return r.ns[RUN_MEMCPY];
}

int bench_kernel_main(int argc, char **argv)
{
    opts_t o;
    bench_t b;
    FILE *csv = NULL, *calib = NULL;
    int ret = 1, nmemcpy = 0;
    size_t min_pool;
    double memcpy_ns[INCOLL_DTYPE_COUNT * MAX_NSRC];

    switch (parse_opts(argc, argv, &o)) {
    case 1:
        return 0;
    case -1:
        return 2;
    }
    if (o.impl && reduce_select_impl(o.impl) != 0) {
        fprintf(stderr,
                "incoll bench kernel: kernel variant %s is unknown or "
                "not supported by this CPU\n",
                o.impl);
        return 2;
    }
    /* Room for two calls' worth of 8 sources, so calls never overlap. */
    min_pool = 2 * MAX_NSRC * o.bytes;
    if (o.pool_bytes < min_pool)
        o.pool_bytes = min_pool;
    o.pool_bytes -= o.pool_bytes % 64;

    memset(&b, 0, sizeof(b));
    b.o = &o;
    b.pool = aligned_alloc(64, o.pool_bytes);
    b.ring = aligned_alloc(64, RING_SLOTS * o.bytes);
    if (b.pool == NULL || b.ring == NULL) {
        fprintf(stderr, "incoll bench kernel: cannot allocate %zu bytes\n",
                o.pool_bytes + RING_SLOTS * o.bytes);
        goto out_free;
    }
    memset(b.ring, 0, RING_SLOTS * o.bytes);
    if (o.csv_path && (csv = open_out(o.csv_path)) == NULL)
        goto out_free;
    if (o.calib_path && (calib = open_out(o.calib_path)) == NULL)
        goto out_close;

    print_head(&o, csv, calib);
    for (int d = 0; d < o.ndtypes; d++) {
        incoll_dtype_t dt = o.dtypes[d];
        fill_pool(&b, dt);
        for (int s = 0; s < o.nnsrcs; s++)
            memcpy_ns[nmemcpy++] = kernel_row(&b, dt, o.nsrcs[s], csv, calib);
    }
    if (calib) {
        /* memcpy was measured next to every row: write the median. */
        double ns = median(memcpy_ns, nmemcpy);
        fprintf(calib, "memcpy bytes=%zu gbps=%.3f ns_per_call=%.1f\n", o.bytes,
                (double)o.bytes / ns, ns);
    }
    if (o.pool_bytes >= 2 * (8192 + WIRE_HDR_LEN))
        run_macs(&o, b.pool, calib);
    ret = 0;
    if (calib && fclose(calib) != 0) {
        fprintf(stderr, "incoll bench kernel: cannot write %s: %s\n",
                o.calib_path, log_strerror(errno));
        ret = 1;
    }
    calib = NULL;
out_close:
    if (calib)
        fclose(calib);
    if (csv && fclose(csv) != 0) {
        fprintf(stderr, "incoll bench kernel: cannot write %s: %s\n",
                o.csv_path, log_strerror(errno));
        ret = 1;
    }
out_free:
    free(b.pool);
    free(b.ring);
    return ret;
}
