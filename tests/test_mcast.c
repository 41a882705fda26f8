/*
 * Multicast results (docs/multicast.md) in the sans-I/O cores: one AN with
 * three hosts, real host engines, packets carried by hand so that a test
 * decides which multicast copy reaches whom. The AN sends a result once
 * to the group's address; a host that misses it gets it by unicast when it
 * asks again (repair), or at once with the dual send; a forged or foreign
 * multicast packet is dropped and counted; hosts that never see one stop
 * asking for it.
 */
#include "test.h"

#include "common/wire.h"
#include "common/wire_mac.h"
#include "core/agg_core.h"
#include "core/host_engine.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MC_HOSTS 3
#define MC_AN ((incoll_ep_t)100)
#define MC_ADDR (((incoll_ep_t)0xefc00001u << 16) | 18517)
#define MC_PKT (WIRE_HDR_LEN + 256)

typedef struct {
    incoll_ep_t src, dst;
    size_t len;
    uint8_t b[MC_PKT];
} mc_pkt_t;

typedef struct {
    mc_pkt_t q[256];
    int n;
    agg_t *agg;
    host_engine_t *eng[MC_HOSTS];
    incoll_ep_t ep[MC_HOSTS];
    int deaf[MC_HOSTS]; /* multicast copies do not reach this host */
    int to_mc;          /* packets the AN sent to the address */
    int to_hosts;       /* ... and to hosts */
    uint64_t now;
} mc_net_t;

static mc_net_t net;
static wire_key_t mc_key;

static void mc_queue(incoll_ep_t src, incoll_ep_t dst, const void *hdr,
                     const void *payload, size_t len)
{
    mc_pkt_t *p;
    if (net.n >= 256 || WIRE_HDR_LEN + len > MC_PKT)
        return;
    p = &net.q[net.n++];
    p->src = src;
    p->dst = dst;
    p->len = WIRE_HDR_LEN + len;
    memcpy(p->b, hdr, WIRE_HDR_LEN);
    if (len)
        memcpy(p->b + WIRE_HDR_LEN, payload, len);
}

static void mc_an_send(void *arg, incoll_ep_t dst, const void *hdr,
                       const void *payload, size_t len)
{
    (void)arg;
    if (dst == MC_ADDR)
        net.to_mc++;
    else
        net.to_hosts++;
    mc_queue(MC_AN, dst, hdr, payload, len);
}

static void mc_host_send(void *arg, incoll_ep_t dst, const void *hdr,
                         const void *payload, size_t len)
{
    mc_queue(*(const incoll_ep_t *)arg, dst, hdr, payload, len);
}

/* Delivers everything queued (and what it causes). */
static void mc_run(void)
{
    for (int i = 0; i < net.n; i++) {
        mc_pkt_t *p = &net.q[i];
        if (p->dst == MC_AN) {
            agg_on_packet(net.agg, p->src, p->b, p->len);
            continue;
        }
        for (int h = 0; h < MC_HOSTS; h++)
            if (p->dst == net.ep[h] || (p->dst == MC_ADDR && !net.deaf[h]))
                host_engine_on_packet(net.eng[h], p->src, p->b, p->len,
                                      net.now);
    }
    net.n = 0;
}

/* One AN, three hosts listening (mcast), results of at most dual bytes
 * also by unicast. */
static int mc_setup(uint32_t dual, uint32_t probe_ops)
{
    incoll_ep_t kids[MC_HOSTS];
    agg_params_t ap = {
        .name = "leaf", .send = mc_an_send, .mcast_dual_bytes = dual};
    agg_group_params_t gp = {.id = 1,
                             .nchildren = MC_HOSTS,
                             .children = kids,
                             .parent = INCOLL_EP_NONE,
                             .slots = 4,
                             .max_payload = 256,
                             .mcast = MC_ADDR};

    memset(&net, 0, sizeof(net));
    wire_key_derive(NULL, WIRE_KEY_GROUP, 1, 42, &mc_key);
    gp.key = mc_key;
    for (int h = 0; h < MC_HOSTS; h++)
        kids[h] = INCOLL_EP_NONE; /* learned from their packets */
    net.agg = agg_create(&ap);
    CHECK(net.agg != NULL);
    CHECK_EQ_INT(agg_group_add(net.agg, &gp), INCOLL_OK);
    for (int h = 0; h < MC_HOSTS; h++) {
        host_engine_params_t p = {0};
        host_engine_params_default(&p);
        net.ep[h] = 11 + (incoll_ep_t)h;
        p.group = 1;
        p.key = mc_key;
        p.child = (uint16_t)h;
        p.an = MC_AN;
        p.slots = 4;
        p.max_payload = 256;
        p.mcast = 1;
        p.mcast_probe_ops = probe_ops;
        p.send = mc_host_send;
        p.send_arg = &net.ep[h];
        net.eng[h] = host_engine_create(&p);
        CHECK(net.eng[h] != NULL);
    }
    net.now = 1000000000ull;
    return TEST_PASSED;
}

static void mc_teardown(void)
{
    for (int h = 0; h < MC_HOSTS; h++)
        host_engine_destroy(net.eng[h]);
    agg_destroy(net.agg);
}

/* Every host starts an allreduce of 4 int64 (host h gives h + 1 + i);
 * the contributions reach the AN. */
static int64_t mc_in[MC_HOSTS][4], mc_out[MC_HOSTS][4];

static int mc_start(void)
{
    for (int h = 0; h < MC_HOSTS; h++) {
        for (int i = 0; i < 4; i++) {
            mc_in[h][i] = h + 1 + i;
            mc_out[h][i] = -1;
        }
        CHECK_EQ_INT(host_engine_start(net.eng[h], mc_in[h], mc_out[h], 4,
                                       INCOLL_INT64, INCOLL_OP_SUM, net.now),
                     INCOLL_INPROGRESS);
    }
    return TEST_PASSED;
}

/* Runs timers and packets until every engine is done (bounded). */
static int mc_finish(void)
{
    for (int round = 0; round < 200; round++) {
        int busy = 0;
        mc_run();
        for (int h = 0; h < MC_HOSTS; h++)
            busy |= host_engine_status(net.eng[h]) == INCOLL_INPROGRESS;
        if (!busy)
            break;
        net.now += 5000000; /* 5 ms */
        for (int h = 0; h < MC_HOSTS; h++)
            host_engine_on_time(net.eng[h], net.now);
    }
    for (int h = 0; h < MC_HOSTS; h++) {
        CHECK_EQ_INT(host_engine_status(net.eng[h]), INCOLL_OK);
        for (int i = 0; i < 4; i++)
            CHECK_EQ_INT(mc_out[h][i], 1 + 2 + 3 + 3 * i);
    }
    return TEST_PASSED;
}

#define RUN(x)                                                                 \
    do {                                                                       \
        if ((x) != TEST_PASSED)                                                \
            return TEST_FAILED;                                                \
    } while (0)

/* The result leaves the AN once, to the address, and every host takes it
 * from there. */
TEST(mcast_core_once, TEST_UNIT)
{
    const agg_counters_t *c;
    RUN(mc_setup(0, 8));
    RUN(mc_start());
    RUN(mc_finish());
    c = agg_counters(net.agg);
    CHECK_EQ_INT(net.to_mc, 1);
    CHECK_EQ_INT(net.to_hosts, 0);
    CHECK_EQ_INT(c->results_sent, 1);
    CHECK_EQ_INT(c->mcast_sent, 1);
    CHECK_EQ_INT(c->packets_out, 1);
    for (int h = 0; h < MC_HOSTS; h++) {
        CHECK_EQ_INT(host_engine_counters(net.eng[h])->mcast_results, 1);
        CHECK_EQ_INT(host_engine_mcast(net.eng[h]), 1);
    }
    mc_teardown();
    return TEST_PASSED;
}

/* A host that misses the multicast copy (it joined late, or the copy was
 * lost) asks again and gets the result once, by unicast; the others are
 * not sent it again. */
TEST(mcast_core_repair, TEST_UNIT)
{
    const agg_counters_t *c;
    RUN(mc_setup(0, 8));
    net.deaf[2] = 1;
    RUN(mc_start());
    RUN(mc_finish());
    c = agg_counters(net.agg);
    CHECK_EQ_INT(net.to_mc, 1);
    CHECK_EQ_INT(net.to_hosts, 1);
    CHECK_EQ_INT(c->mcast_repairs, 1);
    CHECK_EQ_INT(host_engine_counters(net.eng[2])->mcast_repaired, 1);
    CHECK_EQ_INT(host_engine_counters(net.eng[2])->mcast_results, 0);
    CHECK_EQ_INT(host_engine_counters(net.eng[0])->mcast_results, 1);
    /* Now it hears the address: the next result comes by multicast. */
    net.deaf[2] = 0;
    RUN(mc_start());
    RUN(mc_finish());
    CHECK_EQ_INT(host_engine_counters(net.eng[2])->mcast_results, 1);
    CHECK_EQ_INT(agg_counters(net.agg)->mcast_sent, 2);
    mc_teardown();
    return TEST_PASSED;
}

/* The dual send: a small result goes to the address and to each host; the
 * copy that comes second is a duplicate, dropped. */
TEST(mcast_core_dual, TEST_UNIT)
{
    uint64_t dups = 0, used = 0;
    RUN(mc_setup(64, 8));
    net.deaf[1] = 1;
    RUN(mc_start());
    RUN(mc_finish());
    CHECK_EQ_INT(net.to_mc, 1);
    CHECK_EQ_INT(net.to_hosts, MC_HOSTS);
    CHECK_EQ_INT(agg_counters(net.agg)->mcast_repairs, 0);
    for (int h = 0; h < MC_HOSTS; h++) {
        const host_engine_counters_t *hc = host_engine_counters(net.eng[h]);
        CHECK_EQ_INT(hc->results, 1);
        CHECK_EQ_INT(hc->retransmits + hc->fast_retransmits, 0);
        dups += hc->duplicate_results;
        used += hc->mcast_results;
    }
    /* Hosts 0 and 2 got both copies (the multicast one leaves first and
     * is taken, the unicast one dropped); host 1 took the unicast one. */
    CHECK_EQ_INT(dups, 2);
    CHECK_EQ_INT(used, 2);
    CHECK_EQ_INT(host_engine_counters(net.eng[1])->mcast_repaired, 1);
    mc_teardown();
    return TEST_PASSED;
}

/* A forged multicast result (bad mac) and one from outside the group (not
 * the AN) are dropped and counted; the real one is taken. */
TEST(mcast_core_forged, TEST_UNIT)
{
    mc_pkt_t real;
    RUN(mc_setup(0, 8));
    RUN(mc_start());
    /* The contributions reach the AN; its result is queued, not yet
     * delivered. */
    {
        int n = net.n;
        mc_pkt_t q[MC_HOSTS];
        CHECK_EQ_INT(n, MC_HOSTS);
        memcpy(q, net.q, sizeof(q));
        net.n = 0;
        for (int i = 0; i < n; i++)
            agg_on_packet(net.agg, q[i].src, q[i].b, q[i].len);
    }
    CHECK_EQ_INT(net.n, 1);
    CHECK(net.q[0].dst == MC_ADDR);
    real = net.q[0];
    net.n = 0;
    /* Forged: a payload byte changed. */
    net.q[0] = real;
    net.q[0].b[WIRE_HDR_LEN] ^= 1;
    /* Foreign: the right bytes from another sender. */
    net.q[1] = real;
    net.q[1].src = 77;
    net.n = 2;
    mc_run();
    for (int h = 0; h < MC_HOSTS; h++) {
        const host_engine_counters_t *hc = host_engine_counters(net.eng[h]);
        CHECK_EQ_INT(hc->bad_mac, 1);
        CHECK_EQ_INT(hc->dropped, 2);
        CHECK_EQ_INT(hc->results, 0);
        CHECK_EQ_INT(host_engine_status(net.eng[h]), INCOLL_INPROGRESS);
    }
    net.q[0] = real;
    net.n = 1;
    RUN(mc_finish());
    for (int h = 0; h < MC_HOSTS; h++)
        CHECK_EQ_INT(host_engine_counters(net.eng[h])->mcast_results, 1);
    mc_teardown();
    return TEST_PASSED;
}

/* No multicast copy ever arrives (a fabric that does not carry it): after
 * the probe's operations the hosts stop asking for it, and the AN sends
 * unicast only from then on; every result is right. */
TEST(mcast_core_fallback, TEST_UNIT)
{
    uint64_t mc_before;
    RUN(mc_setup(0, 2));
    for (int h = 0; h < MC_HOSTS; h++)
        net.deaf[h] = 1;
    for (int op = 0; op < 2; op++) {
        RUN(mc_start());
        RUN(mc_finish());
    }
    for (int h = 0; h < MC_HOSTS; h++)
        CHECK_EQ_INT(host_engine_mcast(net.eng[h]), -1);
    mc_before = agg_counters(net.agg)->mcast_sent;
    net.to_hosts = 0;
    RUN(mc_start());
    RUN(mc_finish());
    CHECK_EQ_INT(agg_counters(net.agg)->mcast_sent, mc_before);
    CHECK_EQ_INT(net.to_hosts, MC_HOSTS);
    for (int h = 0; h < MC_HOSTS; h++)
        CHECK_EQ_INT(host_engine_counters(net.eng[h])->retransmits, 2);
    mc_teardown();
    return TEST_PASSED;
}

/* ---- broadcasts ---- */

#define MC_BC_MAX 128 /* int64: 4 segments of the group's 256 bytes */
static int64_t mc_bc[MC_HOSTS][MC_BC_MAX];

/* Every host starts a broadcast of n int64 from root (the root's element
 * i is 1000 * op + i, the others' buffers -1). */
static int mc_bcast_start(int root, int n, int op)
{
    for (int h = 0; h < MC_HOSTS; h++) {
        for (int i = 0; i < n; i++)
            mc_bc[h][i] = h == root ? 1000 * op + i : -1;
        host_engine_set_root(net.eng[h], (uint32_t)root);
        CHECK_EQ_INT(host_engine_start_coll(net.eng[h], WIRE_COLL_BCAST,
                                            h == root, mc_bc[h], mc_bc[h],
                                            (size_t)n, INCOLL_INT64,
                                            INCOLL_OP_SUM, net.now),
                     INCOLL_INPROGRESS);
    }
    return TEST_PASSED;
}

/* Runs until every engine is done (bounded); every host has the root's
 * data, each segment taken exactly once. */
static int mc_bcast_finish(int n, int op)
{
    for (int round = 0; round < 400; round++) {
        int busy = 0;
        mc_run();
        for (int h = 0; h < MC_HOSTS; h++)
            busy |= host_engine_status(net.eng[h]) == INCOLL_INPROGRESS;
        if (!busy)
            break;
        net.now += 5000000;
        for (int h = 0; h < MC_HOSTS; h++)
            host_engine_on_time(net.eng[h], net.now);
    }
    for (int h = 0; h < MC_HOSTS; h++) {
        CHECK_EQ_INT(host_engine_status(net.eng[h]), INCOLL_OK);
        for (int i = 0; i < n; i++)
            CHECK_EQ_INT(mc_bc[h][i], 1000 * op + i);
    }
    return TEST_PASSED;
}

/* A broadcast's data leaves the AN once, to the address, and the members
 * take it there; the root gets its result (no data) by unicast and drops
 * the multicast copy unread. */
TEST(mcast_core_bcast_once, TEST_UNIT)
{
    RUN(mc_setup(0, 8));
    RUN(mc_bcast_start(1, 4, 1));
    RUN(mc_bcast_finish(4, 1));
    CHECK_EQ_INT(net.to_mc, 1);
    CHECK_EQ_INT(net.to_hosts, 1);
    CHECK_EQ_INT(agg_counters(net.agg)->mcast_sent, 1);
    CHECK_EQ_INT(agg_counters(net.agg)->packets_out, 2);
    for (int h = 0; h < MC_HOSTS; h++) {
        const host_engine_counters_t *hc = host_engine_counters(net.eng[h]);
        CHECK_EQ_INT(hc->results, 1);
        CHECK_EQ_INT(hc->mcast_results, h == 1 ? 0 : 1);
        CHECK_EQ_INT(hc->mcast_duplicates, h == 1 ? 1 : 0);
        CHECK_EQ_INT(hc->mcast_repaired, 0);
        CHECK_EQ_INT(hc->dropped, 0);
    }
    mc_teardown();
    return TEST_PASSED;
}

/* A large broadcast whose multicast copies one member misses (and only
 * those): it gets every segment by unicast repair, once, the other member
 * from the address, the root by unicast as always; then the root is the
 * one that misses them, which costs nothing. */
TEST(mcast_core_bcast_repair, TEST_UNIT)
{
    const host_engine_counters_t *hc;
    RUN(mc_setup(0, 8));
    net.deaf[2] = 1;
    RUN(mc_bcast_start(0, MC_BC_MAX, 1));
    RUN(mc_bcast_finish(MC_BC_MAX, 1));
    CHECK_EQ_INT(agg_counters(net.agg)->mcast_sent, 4);
    /* The last segment went by unicast too (the tail's dual send): three
     * repairs, and no retransmission for the fourth. */
    CHECK_EQ_INT(agg_counters(net.agg)->mcast_repairs, 3);
    hc = host_engine_counters(net.eng[2]);
    CHECK_EQ_INT(hc->results, 4);
    CHECK_EQ_INT(hc->mcast_repaired, 4);
    CHECK_EQ_INT(hc->mcast_results, 0);
    hc = host_engine_counters(net.eng[1]);
    CHECK_EQ_INT(hc->results, 4);
    CHECK_EQ_INT(hc->mcast_results + hc->mcast_repaired, 4);
    CHECK_EQ_INT(hc->mcast_results >= 3, 1);
    CHECK_EQ_INT(hc->duplicate_results, 1);
    hc = host_engine_counters(net.eng[0]); /* the root */
    CHECK_EQ_INT(hc->results, 4);
    CHECK_EQ_INT(hc->mcast_results + hc->mcast_repaired, 0);
    CHECK_EQ_INT(hc->retransmits, 0);
    /* The root deaf now: nothing changes for it (its results come by
     * unicast), the others take every segment from the address. */
    net.deaf[2] = 0;
    net.deaf[1] = 1;
    RUN(mc_bcast_start(1, MC_BC_MAX, 2));
    RUN(mc_bcast_finish(MC_BC_MAX, 2));
    CHECK_EQ_INT(agg_counters(net.agg)->mcast_repairs, 3);
    CHECK_EQ_INT(host_engine_counters(net.eng[1])->retransmits, 0);
    CHECK_EQ_INT(host_engine_counters(net.eng[2])->mcast_results >= 3, 1);
    CHECK_EQ_INT(host_engine_counters(net.eng[0])->mcast_results >= 3, 1);
    mc_teardown();
    return TEST_PASSED;
}

/* The dual send of a small broadcast: the address and every child by
 * unicast (the root's copy without data); the second copy of each is a
 * duplicate. */
TEST(mcast_core_bcast_dual, TEST_UNIT)
{
    uint64_t dups = 0;
    RUN(mc_setup(64, 8));
    RUN(mc_bcast_start(0, 4, 3));
    RUN(mc_bcast_finish(4, 3));
    CHECK_EQ_INT(net.to_mc, 1);
    CHECK_EQ_INT(net.to_hosts, MC_HOSTS);
    for (int h = 0; h < MC_HOSTS; h++) {
        const host_engine_counters_t *hc = host_engine_counters(net.eng[h]);
        CHECK_EQ_INT(hc->results, 1);
        dups += hc->duplicate_results;
    }
    CHECK_EQ_INT(dups, MC_HOSTS);
    mc_teardown();
    return TEST_PASSED;
}

/* A forged multicast broadcast (its data changed) and one from outside
 * the group are dropped and counted, no member takes their data; the real
 * one is taken. */
TEST(mcast_core_bcast_forged, TEST_UNIT)
{
    mc_pkt_t real, root;
    RUN(mc_setup(0, 8));
    RUN(mc_bcast_start(2, 4, 4));
    {
        int n = net.n;
        mc_pkt_t q[MC_HOSTS];
        CHECK_EQ_INT(n, MC_HOSTS);
        memcpy(q, net.q, sizeof(q));
        net.n = 0;
        for (int i = 0; i < n; i++)
            agg_on_packet(net.agg, q[i].src, q[i].b, q[i].len);
    }
    /* The multicast copy, and the root's result by unicast. */
    CHECK_EQ_INT(net.n, 2);
    CHECK(net.q[0].dst == MC_ADDR && net.q[1].dst == net.ep[2]);
    real = net.q[0];
    root = net.q[1];
    net.q[0].b[WIRE_HDR_LEN] ^= 1;
    net.q[1] = real;
    net.q[1].src = 77;
    net.n = 2;
    mc_run();
    for (int h = 0; h < 2; h++) {
        const host_engine_counters_t *hc = host_engine_counters(net.eng[h]);
        CHECK_EQ_INT(hc->bad_mac, 1);
        CHECK_EQ_INT(hc->dropped, 2);
        CHECK_EQ_INT(hc->results, 0);
        CHECK_EQ_INT(host_engine_status(net.eng[h]), INCOLL_INPROGRESS);
        CHECK_EQ_INT(mc_bc[h][0], -1);
    }
    /* The root (host 2) drops copies with data unread; the foreign one
     * never passes the sender's check. */
    CHECK_EQ_INT(host_engine_counters(net.eng[2])->dropped, 1);
    CHECK_EQ_INT(host_engine_counters(net.eng[2])->results, 0);
    net.q[0] = real;
    net.q[1] = root;
    net.n = 2;
    RUN(mc_bcast_finish(4, 4));
    for (int h = 0; h < 2; h++)
        CHECK_EQ_INT(host_engine_counters(net.eng[h])->mcast_results, 1);
    mc_teardown();
    return TEST_PASSED;
}
