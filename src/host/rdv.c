/*
 * Ranks sharing fabric.conf hosts without a manager (docs/hierarchy.md,
 * "Without a manager").
 *
 * fabric.conf gives each host one UDP port and one child at its leaf AN.
 * When the world has more ranks than fabric.conf has hosts, a map says
 * which host each rank is on (INCOLL_HOST_MAP, which `incoll run --ppn`
 * and libincoll_mpi set; unset: rank r on host r * hosts / ranks). The
 * first rank of each host in rank order is its leader: it binds the
 * host's port, and it is the host's member of the world group, which the
 * world communicator's node level runs on (src/host/hier.c). Every other
 * rank binds an ephemeral port on its host's address.
 *
 * The host-based exchanges need every rank's endpoint, which nobody knows
 * beforehand but the leaders'. So at init each rank sends HELLO to its
 * leader (again every few ms until it has the table); the leader, once
 * it heard every rank of its host, runs an allreduce (bitwise or of one
 * entry per rank) with the other leaders over fabric.conf's ports, and
 * sends the whole table to its ranks in TABLE packets. A leader answers
 * every later HELLO with the table, so a rank whose TABLE was lost gets
 * it again. Both packets carry a mac under a key derived from fabric.conf's
 * group key (and the fabric secret when there is one) and the job's
 * generation, so that a packet of another job or fabric is dropped.
 */
#include "host/host.h"

#include "host/comm.h"
#include "host/req.h"
#include "host/fallback.h"
#include "host/rdv.h"

#include "common/log.h"
#include "common/wire_mac.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RDV_GROUP 0x52445600u          /* "RDV" */
#define RDV_TAG 0x5244565f5441424cull  /* "RDV_TABL" */
#define RDV_CHUNK 1000                 /* table entries per TABLE packet */
#define RDV_RESEND_MIN_NS 10000000ull  /* first HELLO resend: 10 ms */
#define RDV_RESEND_MAX_NS 200000000ull /* then doubling up to 200 ms */
#define RDV_TIMEOUT_S 120              /* 120 s for the whole exchange */

struct host_rdv {
    int leader;       /* world rank of our host's leader */
    incoll_ep_t lead; /* its endpoint (fabric.conf) */
    uint64_t *eps;    /* ctx->size entries, 0 while unknown */
    int known;        /* entries of eps known */
    int need_local;   /* a leader: ranks of its host still to be heard */
    int done;         /* the table is complete */
    wire_key_t key;
};

/* The first rank on host h in rank order, or -1. */
static int leader_of(const incoll_ctx_h ctx, int h)
{
    for (int r = 0; r < ctx->size; r++)
        if (ctx->host_map[r] == h)
            return r;
    return -1;
}

incoll_status_t host_rdv_map(incoll_ctx_h ctx, const char *text)
{
    const fabric_conf_t *conf = &ctx->conf;
    int n = ctx->size, h = conf->nhosts, *map, *seen;
    const char *p = text;

    if (n < h) {
        incoll_error("init: the fabric in %s has %d hosts but INCOLL_SIZE=%d: "
                     "without a manager every host of fabric.conf is a member "
                     "of the world group, so the job needs at least %d ranks "
                     "(or bring the fabric up with its manager, or with as "
                     "many hosts as ranks)",
                     ctx->fabric_dir, h, n, h);
        return INCOLL_ERR_CONFIG;
    }
    map = malloc((size_t)n * sizeof(*map));
    seen = calloc((size_t)h, sizeof(*seen));
    if (map == NULL || seen == NULL) {
        free(map);
        free(seen);
        return INCOLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < n; r++) {
        if (text == NULL || *text == '\0') {
            map[r] = (int)((int64_t)r * h / n);
        } else {
            char *end;
            long v;
            errno = 0;
            v = strtol(p, &end, 10);
            if (end == p || errno != 0 || v < 0 || v >= h ||
                (*end != ',' && *end != '\0') || (*end == '\0' && r != n - 1) ||
                (*end == ',' && r == n - 1)) {
                incoll_error("init: INCOLL_HOST_MAP must list the fabric.conf "
                             "host (0..%d) of each of the %d ranks, "
                             "comma-separated; entry %d is not one, or the "
                             "list has not %d entries",
                             h - 1, n, r, n);
                free(map);
                free(seen);
                return INCOLL_ERR_CONFIG;
            }
            map[r] = (int)v;
            p = *end ? end + 1 : end;
        }
        seen[map[r]]++;
    }
    for (int i = 0; i < h; i++) {
        if (seen[i] == 0) {
            incoll_error("init: host %d of the fabric in %s has no rank "
                         "(INCOLL_HOST_MAP%s): without a manager every host "
                         "of fabric.conf is a member of the world group",
                         i, ctx->fabric_dir, text && *text ? "" : " unset");
            free(map);
            free(seen);
            return INCOLL_ERR_CONFIG;
        }
        if (conf->hosts[i].port == 0) {
            incoll_error("init: host %d of the fabric in %s has no fixed UDP "
                         "port (host rank=%d ... addr=IP:PORT): ranks sharing "
                         "a host find its leader there",
                         i, ctx->fabric_dir, i);
            free(map);
            free(seen);
            return INCOLL_ERR_CONFIG;
        }
    }
    free(seen);
    ctx->host_map = map;
    ctx->fabric_host = map[ctx->rank];
    return INCOLL_OK;
}

int host_rdv_is_leader(incoll_ctx_h ctx)
{
    return leader_of(ctx, ctx->fabric_host) == ctx->rank;
}

static void rdv_send(incoll_ctx_h ctx, incoll_ep_t dst, wire_type_t type,
                     uint64_t offset, const void *payload, uint32_t len)
{
    wire_hdr_t h = {.version = WIRE_VERSION,
                    .type = (uint8_t)type,
                    .group = RDV_GROUP,
                    .child = WIRE_CHILD_NONE,
                    .epoch = ctx->gen0,
                    .count = len,
                    .total = (uint32_t)ctx->size,
                    .offset = offset};
    uint8_t hdr[WIRE_HDR_LEN];

    wire_pack(&h, hdr);
    wire_mac_seal(&ctx->rdv->key, hdr, payload, len);
    udp_send(ctx->sock, dst, hdr, WIRE_HDR_LEN, payload, len);
}

static void send_table(incoll_ctx_h ctx, incoll_ep_t dst)
{
    struct host_rdv *v = ctx->rdv;
    uint8_t buf[RDV_CHUNK * 8];

    for (int first = 0; first < ctx->size; first += RDV_CHUNK) {
        int n = ctx->size - first < RDV_CHUNK ? ctx->size - first : RDV_CHUNK;
        for (int i = 0; i < n; i++)
            for (int b = 0; b < 8; b++)
                buf[8 * i + b] = (uint8_t)(v->eps[first + i] >> (8 * b));
        rdv_send(ctx, dst, WIRE_RDV_TABLE, (uint64_t)first, buf,
                 (uint32_t)n * 8);
    }
    udp_flush(ctx->sock);
}

void host_rdv_dispatch(incoll_ctx_h ctx, const udp_msg_t *m,
                       const wire_hdr_t *h, uint64_t now_ns)
{
    struct host_rdv *v = ctx->rdv;
    const uint8_t *pl = (const uint8_t *)m->data + WIRE_HDR_LEN;
    char ep[32];

    if (v == NULL || h->group != RDV_GROUP || h->epoch != ctx->gen0 ||
        h->total != (uint32_t)ctx->size)
        return;
    if (!wire_mac_check(&v->key, m->data, m->len)) {
        incoll_debug("rdv: drop packet from %s: bad mac",
                     wire_ep_str(m->src, ep, sizeof(ep)));
        return;
    }
    if (h->type == WIRE_RDV_HELLO) {
        uint64_t r = h->offset;
        if (leader_of(ctx, ctx->fabric_host) != ctx->rank ||
            r >= (uint64_t)ctx->size || ctx->host_map[r] != ctx->fabric_host ||
            (int)r == ctx->rank)
            return;
        if (v->eps[r] == 0) {
            v->eps[r] = m->src;
            v->known++;
            v->need_local--;
        }
        if (v->done)
            send_table(ctx, m->src);
        return;
    }
    /* TABLE: only from our leader, for entries we lack. */
    if (m->src != v->lead || v->done || h->count % 8 != 0 ||
        h->offset > (uint64_t)ctx->size ||
        h->count / 8 > (uint64_t)ctx->size - h->offset)
        return;
    for (uint32_t i = 0; i < h->count / 8; i++) {
        uint64_t e = 0;
        for (int b = 0; b < 8; b++)
            e |= (uint64_t)pl[8 * i + b] << (8 * b);
        if (v->eps[h->offset + i] == 0 && e != 0) {
            v->eps[h->offset + i] = e;
            v->known++;
        }
    }
    v->done = v->known == ctx->size;
}

/* The leaders' allreduce of the table, over fabric.conf's ports. */
static incoll_status_t leaders_or(incoll_ctx_h ctx)
{
    const fabric_conf_t *conf = &ctx->conf;
    int nh = conf->nhosts, *wr = malloc((size_t)nh * sizeof(int));
    incoll_ep_t *peers = malloc((size_t)nh * sizeof(*peers));
    incoll_comm_h lc = NULL;
    incoll_status_t status;

    if (wr == NULL || peers == NULL) {
        free(wr);
        free(peers);
        return INCOLL_ERR_NO_MEMORY;
    }
    for (int i = 0; i < nh; i++) {
        wr[i] = leader_of(ctx, i);
        peers[i] = fabric_conf_host_ep(conf, i);
    }
    status = host_comm_bare(ctx, RDV_TAG, nh, wr, ctx->fabric_host, peers, &lc);
    if (status != INCOLL_OK)
        return status;
    status =
        host_allreduce_sched(lc, ALGO_RD, ctx->rdv->eps, ctx->rdv->eps,
                             (size_t)ctx->size, INCOLL_UINT64, INCOLL_OP_BOR);
    host_comm_destroy_impl(lc);
    return status;
}

incoll_status_t host_rdv_run(incoll_ctx_h ctx, incoll_ep_t **eps_p)
{
    struct host_rdv *v = calloc(1, sizeof(*v));
    uint64_t now = host_now_ns(),
             deadline = now + (uint64_t)RDV_TIMEOUT_S * 1000000000ull;
    uint64_t resend = RDV_RESEND_MIN_NS, next = now;
    incoll_status_t status = INCOLL_OK;
    incoll_ep_t *eps;
    char ep[32];

    if (v == NULL || (v->eps = calloc((size_t)ctx->size, 8)) == NULL) {
        free(v);
        return INCOLL_ERR_NO_MEMORY;
    }
    ctx->rdv = v;
    wire_key_derive(ctx->has_secret ? ctx->secret : NULL, WIRE_KEY_P2P,
                    ctx->conf.group_key ^ RDV_TAG, ctx->gen0, &v->key);
    v->leader = leader_of(ctx, ctx->fabric_host);
    v->lead = fabric_conf_host_ep(&ctx->conf, ctx->fabric_host);
    v->eps[ctx->rank] = udp_local_ep(ctx->sock);
    v->known = 1;
    if (v->leader == ctx->rank) {
        for (int r = 0; r < ctx->size; r++)
            v->need_local += ctx->host_map[r] == ctx->fabric_host;
        v->need_local--;
        while (v->need_local > 0 && host_now_ns() < deadline)
            host_ctx_progress(ctx, deadline);
        if (v->need_local > 0) {
            incoll_error("init: %d rank(s) of fabric host %d did not say "
                         "hello within %d s",
                         v->need_local, ctx->fabric_host, RDV_TIMEOUT_S);
            return INCOLL_ERR_TIMEOUT;
        }
        status = leaders_or(ctx);
        if (status != INCOLL_OK) {
            incoll_error("init: the leaders of the fabric's hosts could not "
                         "exchange the ranks' endpoints: %s",
                         incoll_status_string(status));
            return status;
        }
        v->known = 0;
        for (int r = 0; r < ctx->size; r++)
            v->known += v->eps[r] != 0;
        v->done = v->known == ctx->size;
        if (!v->done) {
            incoll_error("init: %d endpoints missing after the leaders' "
                         "exchange",
                         ctx->size - v->known);
            return INCOLL_ERR_PROTOCOL;
        }
        for (int r = 0; r < ctx->size; r++)
            if (r != ctx->rank && ctx->host_map[r] == ctx->fabric_host)
                send_table(ctx, v->eps[r]);
    } else {
        while (!v->done) {
            now = host_now_ns();
            if (now >= deadline) {
                incoll_error("init: no endpoint table from rank %d, the "
                             "leader of fabric host %d (%s), within %d"
                             " s: is it running?",
                             v->leader, ctx->fabric_host,
                             wire_ep_str(v->lead, ep, sizeof(ep)),
                             RDV_TIMEOUT_S);
                return INCOLL_ERR_TIMEOUT;
            }
            if (now >= next) {
                rdv_send(ctx, v->lead, WIRE_RDV_HELLO, (uint64_t)ctx->rank,
                         NULL, 0);
                next = now + resend;
                resend = resend * 2 > RDV_RESEND_MAX_NS ? RDV_RESEND_MAX_NS
                                                        : resend * 2;
            }
            host_ctx_progress(ctx, next < deadline ? next : deadline);
        }
    }
    eps = malloc((size_t)ctx->size * sizeof(*eps));
    if (eps == NULL)
        return INCOLL_ERR_NO_MEMORY;
    for (int r = 0; r < ctx->size; r++)
        eps[r] = v->eps[r];
    *eps_p = eps;
    return status;
}

void host_rdv_free(incoll_ctx_h ctx)
{
    if (ctx->rdv != NULL)
        free(ctx->rdv->eps);
    free(ctx->rdv);
    ctx->rdv = NULL;
    free(ctx->host_map);
    ctx->host_map = NULL;
}
