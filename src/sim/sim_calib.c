/*
 * Calibration of the simulator's computation costs. The file is the one
 * `incoll bench kernel --calib FILE` writes:
 *
 *   kernel dtype=float32 op=sum nsrc=8 bytes=8192 gbps=... ns_per_call=...
 *          ns_per_packet_overhead=... ns_per_byte=...
 *   memcpy bytes=8192 gbps=... ns_per_call=...
 *
 * and may carry more records, written by hand or by a daemon benchmark:
 *
 *   agg ns_per_packet=300       fixed cost of one datagram on a server AN
 *   agg ns_per_packet=A ns_per_byte=B threads=N
 *                               `incoll bench agg --calib`: the whole CPU
 *                               cost of a datagram (in or out) on an AN
 *                               of N threads, A + B * its bytes; replaces
 *                               the fixed cost, the copy and the
 *                               reduction (they are in it); one record
 *                               per N, the last one of each N wins
 *   switch ns_per_packet=0      pipeline latency of a switch AN
 *
 * Only float32 sum kernels are used (the simulated operation); the AN's
 * reduction rate comes from the largest nsrc measured, the hosts' from
 * nsrc=2 (or the smallest above). Unknown records and keys are ignored, so
 * the file can grow.
 */
#include "sim/sim.h"
#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sim_calib_defaults(sim_calib_t *c)
{
    memset(c, 0, sizeof(*c));
    c->agg_pkt_ns = 300;
    c->copy_gbps = 10;
    c->agg_reduce_call_ns = 50;
    c->agg_reduce_gbps = 8;
    c->host_reduce_call_ns = 50;
    c->host_reduce_gbps = 8;
    c->switch_ns = 0;
    snprintf(c->source, sizeof(c->source), "defaults");
}

void sim_calib_zero(sim_calib_t *c)
{
    c->agg_pkt_ns = 0;
    c->copy_gbps = 0; /* 0 rate means free, see sim_run.c */
    c->agg_reduce_call_ns = 0;
    c->agg_reduce_gbps = 0;
    c->host_reduce_call_ns = 0;
    c->host_reduce_gbps = 0;
    c->switch_ns = 0;
    c->nagg_fit = 0;
}

int sim_calib_agg_fit(const sim_calib_t *c, int cores, double *pkt_ns_p,
                      double *byte_ns_p)
{
    int one = -1;
    for (int i = 0; i < c->nagg_fit; i++) {
        if (c->agg_fit[i].threads == cores) {
            *pkt_ns_p = c->agg_fit[i].pkt_ns;
            *byte_ns_p = c->agg_fit[i].byte_ns;
            return 1;
        }
        if (c->agg_fit[i].threads == 1)
            one = i;
    }
    if (one < 0)
        return 0;
    *pkt_ns_p = c->agg_fit[one].pkt_ns;
    *byte_ns_p = c->agg_fit[one].byte_ns;
    return 1;
}

/* Value of key=... in the record, or NULL. */
static const char *field(char *const *toks, int ntok, const char *key)
{
    size_t klen = strlen(key);
    for (int i = 1; i < ntok; i++)
        if (strncmp(toks[i], key, klen) == 0 && toks[i][klen] == '=')
            return toks[i] + klen + 1;
    return NULL;
}

static int num(const char *v, double *out)
{
    char *end;
    double d;
    if (v == NULL)
        return -1;
    errno = 0;
    d = strtod(v, &end);
    if (errno || end == v || *end != '\0' || d < 0)
        return -1;
    *out = d;
    return 0;
}

int sim_calib_load(const char *path, sim_calib_t *c, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int lineno = 0, agg_nsrc = 0, host_nsrc = 0;

    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, log_strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        char *toks[32], *save = NULL, *t, *hash = strchr(line, '#');
        int ntok = 0;
        double v;

        lineno++;
        if (hash)
            *hash = '\0';
        for (t = strtok_r(line, " \t\r\n", &save); t && ntok < 32;
             t = strtok_r(NULL, " \t\r\n", &save))
            toks[ntok++] = t;
        if (ntok == 0)
            continue;
        if (strcmp(toks[0], "kernel") == 0) {
            const char *dt = field(toks, ntok, "dtype"),
                       *op = field(toks, ntok, "op");
            double nsrc, gbps, over = 0, per_byte = 0, rate;
            if (dt == NULL || op == NULL || strcmp(dt, "float32") != 0 ||
                strcmp(op, "sum") != 0)
                continue;
            if (num(field(toks, ntok, "nsrc"), &nsrc) != 0 || nsrc < 1 ||
                num(field(toks, ntok, "gbps"), &gbps) != 0 || gbps <= 0) {
                snprintf(err, errlen,
                         "%s:%d: kernel record needs nsrc= and gbps=", path,
                         lineno);
                fclose(f);
                return -1;
            }
            num(field(toks, ntok, "ns_per_packet_overhead"), &over);
            num(field(toks, ntok, "ns_per_byte"), &per_byte);
            /* ns_per_byte is per byte of one source: nsrc of them per
             * element position. The fit's slope is the better rate for
             * large payloads; gbps (one size) when there is no fit. */
            rate = per_byte > 0 ? nsrc / per_byte : gbps;
            if ((int)nsrc > agg_nsrc) {
                agg_nsrc = (int)nsrc;
                c->agg_reduce_gbps = rate;
                c->agg_reduce_call_ns = over;
            }
            if (host_nsrc == 0 ||
                ((int)nsrc >= 2 && (host_nsrc < 2 || (int)nsrc < host_nsrc))) {
                host_nsrc = (int)nsrc;
                c->host_reduce_gbps = rate;
                c->host_reduce_call_ns = over;
            }
        } else if (strcmp(toks[0], "memcpy") == 0) {
            if (num(field(toks, ntok, "gbps"), &v) != 0 || v <= 0) {
                snprintf(err, errlen, "%s:%d: memcpy record needs gbps=", path,
                         lineno);
                fclose(f);
                return -1;
            }
            c->copy_gbps = v;
        } else if (strcmp(toks[0], "agg") == 0) {
            double per_byte, threads = 1;
            if (num(field(toks, ntok, "ns_per_packet"), &v) != 0)
                continue;
            if (num(field(toks, ntok, "ns_per_byte"), &per_byte) == 0) {
                int k = 0;
                if (field(toks, ntok, "threads") &&
                    (num(field(toks, ntok, "threads"), &threads) != 0 ||
                     threads < 1 || threads > 1024)) {
                    snprintf(err, errlen,
                             "%s:%d: agg record: bad threads=", path, lineno);
                    fclose(f);
                    return -1;
                }
                while (k < c->nagg_fit && c->agg_fit[k].threads != (int)threads)
                    k++;
                if (k == c->nagg_fit && c->nagg_fit < 8)
                    c->nagg_fit++;
                if (k < c->nagg_fit) {
                    c->agg_fit[k].threads = (int)threads;
                    c->agg_fit[k].pkt_ns = v;
                    c->agg_fit[k].byte_ns = per_byte;
                }
            } else {
                c->agg_pkt_ns = v;
            }
        } else if (strcmp(toks[0], "switch") == 0) {
            if (num(field(toks, ntok, "ns_per_packet"), &v) == 0)
                c->switch_ns = v;
        }
    }
    fclose(f);
    snprintf(c->source, sizeof(c->source), "%s", path);
    return 0;
}
