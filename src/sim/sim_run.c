/*
 * The SimGrid side of the simulator: one actor per host, one per
 * aggregation node (AN), and in server mode one per server NIC and one per
 * switch port towards the server. Actors exchange the project's real
 * datagrams (56-byte wire header + payload) as SimGrid messages of exactly
 * that size; the AN logic is agg_t, the host logic host_engine_t, the
 * host-based algorithms algo_schedule(), the data reduce_n(): the same code
 * the daemons and the library run.
 *
 * Timing model (docs/simulator.md has the formulas):
 *  - a message takes the sum of its route's latencies plus its size over
 *    its share of the route's bandwidth (SimGrid CM02, no cross traffic);
 *  - a NIC sends its packets back to back: a packet starts when the
 *    previous one has left, which keeps a window of packets in order and
 *    pipelined through the tree instead of sharing the link as a fluid;
 *  - a switch AN processes packets in a pipeline at line rate: it adds
 *    only a latency (--switch-ns, default 0) and never queues; a server AN
 *    is one CPU: each packet costs what the calibration says and waits its
 *    turn, and the switch port in front of the server is a FIFO at the
 *    link's rate;
 *  - hosts' retransmission timers run with --drop (or --timers).
 *
 * How the waiting is done matters for speed at 16,384 hosts. SimGrid 3.32
 * keeps detached messages in one global list and unread messages in their
 * sender's list, and every completion walks the list it is in; a receive
 * with a timeout cancels a message caught mid-transfer. So: sends are not
 * detached, each sending actor reaps its own finished sends; host actors
 * never sleep, so they read results as they land; and a host that must
 * wait for its NIC or a timer sends itself a message over its own "clock"
 * link (1 byte per ps, no latency) that lands at exactly that time, on a
 * mailbox of its own so it never queues behind a packet.
 *
 * Everything is single-threaded (SimGrid runs one actor at a time), so
 * actors share plain memory; the random streams are per sender and seeded,
 * so a run is a pure function of its arguments.
 */
#include "sim/sim.h"

#include "common/dtype.h"
#include "common/knobs.h"
#include "common/log.h"
#include "core/agg_core.h"
#include "core/host_engine.h"
#include "common/wire_mac.h"

#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <xbt/log.h>

#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EP_AN_BASE (1ull << 32) /* endpoints: host r is r, AN a is BASE + a */
/* The multicast address of AN a's hosts of job g: EP_MC_BASE + g x ANs +
 * a. Its switch replicates what is sent there to those hosts' ports. */
#define EP_MC_BASE (2ull << 32)
#define PORT_CREDITS 64 /* packets the server's NIC ring holds */

enum {
    PKT_WIRE = 0, /* a datagram of the wire format */
    PKT_NIC = 1,  /* clock: the host's NIC is free again */
    PKT_RTO = 2,  /* clock: look at the retransmission timers */
    PKT_P2P = 3,  /* a block of a host-based algorithm */
};

/* One SimGrid message. A wire packet carries its 56 header bytes and, with
 * --data, its payload; without, receivers see a zero payload of the right
 * length (rxbuf below), which the cores copy and reduce as usual. */
typedef struct pkt {
    struct pkt *next;
    uint32_t run; /* measurement it belongs to; older ones are dropped */
    uint8_t kind;
    uint8_t consumed; /* its reader is done with it */
    incoll_ep_t src;
    incoll_ep_t dst; /* AN packets: where it goes once it leaves the AN */
    uint32_t len;    /* bytes on the wire: the simulated size */
    uint32_t step;   /* PKT_P2P: schedule step */
    size_t nbytes;   /* PKT_P2P: payload bytes */
    double ready;    /* switch AN: when it leaves the AN's pipeline */
    uint8_t *data;   /* --data: the whole datagram (PKT_WIRE) or block */
    uint8_t hdr[WIRE_HDR_LEN];
} pkt_t;

/* The sends of one actor not yet reaped, oldest first, and their
 * packets. */
typedef struct {
    sg_comm_t *ring;
    struct pkt **pkts;
    int cap, head, n;
} outbox_t;

typedef struct {
    int rank;
    sg_host_t host;
    sg_mailbox_t mbox;     /* packets, read in arrival order */
    sg_mailbox_t nic_mbox; /* clock messages of the NIC */
    sg_mailbox_t rto_mbox; /* clock messages of the timers */
    outbox_t ob;
    host_engine_t *eng;
    int job;        /* its group among cfg->groups */
    uint16_t child; /* its child index at its leaf, in its group's tree */
    uint64_t rng;
    /* Posted receives and what they deliver into. */
    sg_comm_t rx_comm, nic_comm, rto_comm;
    void *rx_pkt, *nic_pkt, *rto_pkt;
    /* NIC: packets wait here while it sends. */
    pkt_t *txq, **txq_tail;
    double nic_free; /* when the packet on the wire has left */
    /* Timers: one clock message at a time. */
    uint64_t rto_at;  /* when the pending one lands; UINT64_MAX: none */
    uint8_t *sendbuf; /* --data: own; else the shared zero buffer */
    uint8_t *recvbuf;
    pkt_t *early; /* host algorithms: messages of later steps */
    int done;
    int wrong; /* --data: elements that differ from expected */
    double t_done;
    incoll_status_t status;
} sim_host_t;

/*
 * A way out of an AN, one actor each. Server mode: one, the server's NIC,
 * which sends its queue back to back at the link's rate. Switch mode: a
 * few, each sending for a group of ports in parallel, after the switch's
 * pipeline latency (--switch-ns): a switch sends on all its ports at once,
 * and SimGrid walks a sender's list of unread messages at every
 * completion, so no one actor should hold a whole replication.
 */
typedef struct {
    struct sim_an *an;
    pkt_t *head, **tail;
    sg_sem_t sem; /* batches handed over */
    outbox_t ob;
    double nic_free;
} outq_t;

typedef struct sim_an {
    int idx;
    agg_t *agg;
    sg_host_t sx_host;      /* the switch: its AN, or its port to the server */
    sg_host_t an_host;      /* the server cabled to the switch */
    sg_mailbox_t mbox;      /* the AN reads here */
    sg_mailbox_t port_mbox; /* server mode: the switch port reads here */
    sg_mailbox_t in_mbox;   /* others send here: port (server) or mbox */
    outbox_t ob_port;       /* the port actor's sends */
    pkt_t *pending, **pending_tail; /* emitted while handling one packet */
    outq_t *outq;                   /* the ways out */
    int nout;
    sg_sem_t credits; /* server mode: free places in the NIC ring */
    double port_free;
    uint64_t rng;
    /* Server mode with multicast: the switch's replication, an actor on
     * the switch that copies what the server sends to the group address
     * to the hosts' ports at once. */
    sg_mailbox_t mc_mbox;
    outbox_t ob_mc;
    uint64_t mc_rng;
} sim_an_t;

/* The state of the process: one platform, one measurement at a time. */
static struct {
    const sim_config_t *cfg;
    const fabric_conf_t *conf;
    int algo;
    uint32_t run;
    size_t count; /* float32 elements */
    sim_host_t *hosts;
    sim_an_t *ans;
    pkt_t *free_pkts;
    uint8_t *zero;        /* shared zero input without --data */
    uint8_t *scratch_out; /* shared result buffer without --data */
    uint8_t *rxbuf;       /* header + zero payload, for the cores */
    size_t zero_len;
    uint64_t rto_period_ns; /* longest clock message of the timers */
    uint64_t messages;
    uint64_t clocks;
    uint64_t dropped;
    uint64_t late_timers; /* a timer would have fired (timers off) */
    int max_outbox;       /* longest list of unreaped sends (debug) */
    long recv_failed;     /* receives failed: sender gone (recv_pkt) */
    sim_mirror_t mir;     /* which ANs and hosts run (sim_mirror.c) */
    wire_key_t gkey;      /* the group's key, to seal mirrors' packets */
    uint64_t mirror_copies;
    /* Jobs (cfg->groups): job g is the hosts [first[g], first[g + 1]),
     * group conf->group_id + g, rooted at AN root[g]; below[g * nans + a]
     * its hosts under AN a; suma[g] the sum of their input factors. */
    int ngroups;
    int *first, *root, *below;
    long *suma;
    /* Hosts by leaf: AN a's host children are leafh[leafh_first[a]] to
     * leafh[leafh_first[a + 1] - 1]. */
    int *leafh, *leafh_first;
    char mbox_name[64];
} S;

static double now_s(void)
{
    return simgrid_get_clock();
}
static uint64_t now_ns(void)
{
    return (uint64_t)llround(simgrid_get_clock() * 1e9);
}

/* splitmix64: a seeded stream per sender. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int rng_drop(uint64_t *s)
{
    if (S.cfg->drop <= 0)
        return 0;
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0) <
           S.cfg->drop;
}

static pkt_t *pkt_get(void)
{
    pkt_t *p = S.free_pkts;
    if (p) {
        S.free_pkts = p->next;
    } else {
        p = calloc(1, sizeof(*p));
        if (p == NULL) {
            fprintf(stderr, "incoll-sim: out of memory for packets\n");
            exit(1);
        }
    }
    p->next = NULL;
    p->run = S.run;
    p->consumed = 0;
    p->data = NULL;
    return p;
}

static void pkt_put(pkt_t *p)
{
    free(p->data);
    p->data = NULL;
    p->next = S.free_pkts;
    S.free_pkts = p;
}

static sg_mailbox_t mbox_named(const char *kind, long idx)
{
    snprintf(S.mbox_name, sizeof(S.mbox_name), "%s%ld", kind, idx);
    return sg_mailbox_by_name(S.mbox_name);
}

/* Where packets for endpoint ep go. */
static sg_mailbox_t ep_mbox(incoll_ep_t ep)
{
    if (ep < EP_AN_BASE)
        return S.hosts[ep].mbox;
    return S.ans[ep - EP_AN_BASE].in_mbox;
}

/*
 * Reaps sends whose message its receiver has read (it marks the packet
 * consumed), oldest first. Waiting on such a send returns at once and,
 * unlike sg_comm_test(), takes it off the sender's activity list in
 * SimGrid 3.32 (a tested send stays listed, and the list grows for ever).
 * The sender owns the packet until then and frees it here.
 */
static void outbox_reap(outbox_t *ob)
{
    while (ob->n > 0 && ob->pkts[ob->head]->consumed) {
        sg_comm_wait(ob->ring[ob->head]);
        pkt_put(ob->pkts[ob->head]);
        ob->head = (ob->head + 1) % ob->cap;
        ob->n--;
    }
}

/* Hands a message of size bytes to SimGrid without waiting for it. */
static void send_msg(outbox_t *ob, sg_mailbox_t mbox, pkt_t *p, long size)
{
    outbox_reap(ob);
    if (ob->n == ob->cap) {
        int ncap = ob->cap ? 2 * ob->cap : 64;
        sg_comm_t *nr = malloc((size_t)ncap * sizeof(*nr));
        pkt_t **np = malloc((size_t)ncap * sizeof(*np));
        if (nr == NULL || np == NULL) {
            fprintf(stderr, "incoll-sim: out of memory for sends\n");
            exit(1);
        }
        for (int i = 0; i < ob->n; i++) {
            nr[i] = ob->ring[(ob->head + i) % ob->cap];
            np[i] = ob->pkts[(ob->head + i) % ob->cap];
        }
        free(ob->ring);
        free(ob->pkts);
        ob->ring = nr;
        ob->pkts = np;
        ob->cap = ncap;
        ob->head = 0;
    }
    ob->ring[(ob->head + ob->n) % ob->cap] =
        sg_mailbox_put_async(mbox, p, size);
    ob->pkts[(ob->head + ob->n) % ob->cap] = p;
    ob->n++;
    if (ob->n > S.max_outbox)
        S.max_outbox = ob->n;
}

/*
 * After a measurement: forgets the sends of actors that are gone. A packet
 * not read yet may still land in a later measurement, where its reader
 * frees it (it is stale: older run number), so it is not freed here.
 */
static void outbox_clear(outbox_t *ob)
{
    for (int i = 0; i < ob->n; i++) {
        pkt_t *p = ob->pkts[(ob->head + i) % ob->cap];
        sg_comm_unref(ob->ring[(ob->head + i) % ob->cap]);
        if (p->consumed)
            pkt_put(p);
    }
    ob->head = ob->n = 0;
}

/* A reader is done with a packet. A packet of this measurement belongs to
 * its sender's outbox until reaped; an older one belongs to nobody. */
static void pkt_done(pkt_t *p)
{
    if (p->run != S.run)
        pkt_put(p);
    else
        p->consumed = 1;
}

/* Sends a wire packet to ep unless the fault injection loses it. */
static void deliver(outbox_t *ob, uint64_t *rng, incoll_ep_t ep, pkt_t *p)
{
    /* A result for a mirror goes no further: its subtree does not run,
     * and a switch sends on all its ports at once, independently. */
    if (ep >= EP_AN_BASE && S.mir.state[ep - EP_AN_BASE] != SIM_MIRROR_REAL) {
        pkt_put(p);
        return;
    }
    S.messages++;
    if (rng_drop(rng)) {
        S.dropped++;
        pkt_put(p);
        return;
    }
    send_msg(ob, ep_mbox(ep), p, (long)p->len);
}

/* Copies a datagram from a core's send callback into a packet. */
static pkt_t *pkt_from(incoll_ep_t src, const void *hdr, const void *payload,
                       size_t len)
{
    pkt_t *p = pkt_get();
    p->kind = PKT_WIRE;
    p->src = src;
    p->len = (uint32_t)(WIRE_HDR_LEN + len);
    memcpy(p->hdr, hdr, WIRE_HDR_LEN);
    if (S.cfg->data) {
        p->data = malloc(WIRE_HDR_LEN + len);
        if (p->data == NULL) {
            fprintf(stderr, "incoll-sim: out of memory for packet data\n");
            exit(1);
        }
        memcpy(p->data, hdr, WIRE_HDR_LEN);
        if (len)
            memcpy(p->data + WIRE_HDR_LEN, payload, len);
    }
    return p;
}

/* The datagram as the cores want it: contiguous header and payload. */
static const uint8_t *pkt_bytes(const pkt_t *p)
{
    if (p->data)
        return p->data;
    memcpy(S.rxbuf, p->hdr, WIRE_HDR_LEN); /* payload stays zero */
    return S.rxbuf;
}

/* ---- inputs and checks ------------------------------------------------ */

/* Input of rank r, element j: a(r) * b(j), small integers, so the float32
 * sum is exact in any order and a lost, doubled or misplaced segment shows
 * (b has period 251, prime to every segment length). */
static float input_val(int r, size_t j)
{
    return (float)(sim_input_factor(r) * (int)(1 + j % 251));
}

/* The sum of a job's inputs: with mirrors, a mirrored subtree
 * contributes what the one it copies does (S.mir.suma). */
static float expect_val(int job, size_t j)
{
    long a = S.ngroups > 1 ? S.suma[job] : S.mir.suma;
    return (float)(a * (long)(1 + j % 251));
}

static void fill_input(sim_host_t *h)
{
    float *v = (float *)h->sendbuf;
    for (size_t j = 0; j < S.count; j++)
        v[j] = input_val(h->rank, j);
}

static int check_result(int job, const uint8_t *buf)
{
    const float *v = (const float *)buf;
    int wrong = 0;
    for (size_t j = 0; j < S.count; j++)
        if (v[j] != expect_val(job, j))
            wrong++;
    return wrong;
}

/* ---- aggregation nodes ------------------------------------------------ */

static void an_send_cb(void *arg, incoll_ep_t dst, const void *hdr,
                       const void *payload, size_t len)
{
    sim_an_t *an = arg;
    pkt_t *p = pkt_from(EP_AN_BASE + (uint64_t)an->idx, hdr, payload, len);
    p->dst = dst;
    *an->pending_tail = p;
    an->pending_tail = &p->next;
}

/* A copy of packet p (its data too) for dst. */
static pkt_t *pkt_copy(const pkt_t *p, incoll_ep_t dst)
{
    pkt_t *c = pkt_get();
    c->kind = p->kind;
    c->src = p->src;
    c->dst = dst;
    c->len = p->len;
    c->ready = p->ready;
    memcpy(c->hdr, p->hdr, WIRE_HDR_LEN);
    if (p->data) {
        c->data = malloc(p->len);
        if (c->data == NULL) {
            fprintf(stderr, "incoll-sim: out of memory for packets\n");
            exit(1);
        }
        memcpy(c->data, p->data, p->len);
    }
    return c;
}

/* Queues packet q on the AN's way out towards its destination. */
static void outq_push(sim_an_t *an, pkt_t *q)
{
    outq_t *o = &an->outq[(q->dst % EP_AN_BASE) % (uint64_t)an->nout];
    int was_empty = o->head == NULL;
    *o->tail = q;
    o->tail = &q->next;
    if (was_empty)
        sg_sem_release(o->sem);
}

/*
 * The switch of AN a replicates packet p, sent to the group address
 * p->dst, to the ports of the group's hosts below it that listen (a host
 * that fell back to unicast has left the group), each copy a packet of
 * its own, lost or not on its own. fn takes each copy. Frees p.
 */
static void mc_replicate(sim_an_t *an, pkt_t *p,
                         void (*fn)(sim_an_t *an, pkt_t *c))
{
    uint64_t x = p->dst - EP_MC_BASE;
    int job = (int)(x / (uint64_t)S.conf->nans);
    for (int i = S.leafh_first[an->idx]; i < S.leafh_first[an->idx + 1]; i++) {
        sim_host_t *h = &S.hosts[S.leafh[i]];
        if (h->job == job && h->eng && host_engine_mcast(h->eng) == 1)
            fn(an, pkt_copy(p, (incoll_ep_t)h->rank));
    }
    pkt_put(p);
}

/* Hands the mirrors of an AN the packet it is sending to its parent, now:
 * each sends it from its own switch with its own child index and MAC. */
static void mirror_copies(const sim_an_t *an, const pkt_t *p)
{
    for (int m = S.mir.first[an->idx]; m >= 0; m = S.mir.next[m]) {
        outq_t *o = &S.ans[m].outq[0];
        pkt_t *c = pkt_copy(p, p->dst);
        uint16_t idx = (uint16_t)S.mir.index[m];
        int was_empty = o->head == NULL;
        size_t plen = p->len - WIRE_HDR_LEN;

        c->src = EP_AN_BASE + (uint64_t)m;
        c->ready = now_s();
        c->hdr[12] = (uint8_t)idx; /* child, little-endian (wire.h) */
        c->hdr[13] = (uint8_t)(idx >> 8);
        if (p->data) {
            memcpy(c->data, c->hdr, WIRE_HDR_LEN);
            wire_mac_seal(&S.gkey, c->data, c->data + WIRE_HDR_LEN, plen);
            memcpy(c->hdr, c->data, WIRE_HDR_LEN);
        } else {
            wire_mac_seal(&S.gkey, c->hdr, S.zero, plen);
        }
        *o->tail = c;
        o->tail = &c->next;
        S.mirror_copies++;
        if (was_empty)
            sg_sem_release(o->sem);
    }
}

/*
 * Receives the next packet of mbox, or NULL when SimGrid failed its
 * communication ("Link failure"): that happens when the sender's actor
 * ended with the packet still on its way (a host that has its result and
 * leaves while a copy of its contribution waits at a switch port). The
 * receiver takes it as a packet lost; the sender's outbox keeps the
 * packet until the measurement ends.
 */
static pkt_t *recv_pkt(sg_mailbox_t mbox)
{
    void *data = NULL;
    sg_comm_t c = sg_mailbox_get_async(mbox, &data);
    if (sg_comm_wait(c) != SG_OK) {
        S.recv_failed++;
        return NULL;
    }
    return data;
}

/* One way out of an AN (see outq_t). */
static void outq_actor(int argc, char **argv)
{
    outq_t *q = sg_actor_self_get_data();
    int server = S.cfg->an == SIM_AN_SERVER;
    (void)argc;
    (void)argv;
    for (;;) {
        sg_sem_acquire(q->sem);
        while (q->head) {
            pkt_t *p = q->head;
            q->head = p->next;
            if (q->head == NULL)
                q->tail = &q->head;
            p->next = NULL;
            if (server) {
                if (q->nic_free > now_s())
                    sg_actor_sleep_for(q->nic_free - now_s());
                q->nic_free = now_s() + p->len / S.cfg->link_Bps;
            } else if (p->ready > now_s()) {
                sg_actor_sleep_for(p->ready - now_s());
            }
            if (S.mir.first[q->an->idx] >= 0 &&
                p->dst == EP_AN_BASE + (uint64_t)S.conf->ans[q->an->idx].parent)
                mirror_copies(q->an, p);
            if (p->dst >= EP_MC_BASE) {
                /* To the group address: one packet over the server's
                 * link to its switch, which replicates it (mc_actor).
                 * The NIC above has charged its time on the link; the
                 * message carries only the link's latency, so a copy
                 * lands when a unicast packet sent now would (CM02's
                 * routes are cut-through: latencies plus the size over
                 * the narrowest link, once). */
                S.messages++;
                send_msg(&q->ob, q->an->mc_mbox, p, 0);
                continue;
            }
            deliver(&q->ob, &q->an->rng, p->dst, p);
        }
    }
}

/* Server mode: a copy of a multicast result leaves the switch now. */
static void mc_send(sim_an_t *an, pkt_t *c)
{
    deliver(&an->ob_mc, &an->mc_rng, c->dst, c);
}

/* Server mode: the switch's replication of what the server sends to a
 * group address, to every listening host's port at once (at the link's
 * rate each, in parallel). */
static void mc_actor(int argc, char **argv)
{
    sim_an_t *an = sg_actor_self_get_data();
    (void)argc;
    (void)argv;
    sg_mailbox_set_receiver(sg_mailbox_get_name(an->mc_mbox));
    for (;;) {
        pkt_t *p = recv_pkt(an->mc_mbox), *q;
        if (p == NULL)
            continue;
        if (p->run != S.run) {
            pkt_done(p);
            continue;
        }
        outbox_reap(&an->ob_mc);
        q = pkt_copy(p, p->dst);
        pkt_done(p);
        mc_replicate(an, q, mc_send);
    }
}

/* Server mode: the switch's egress port towards the AN server, a FIFO
 * that forwards one packet at a time at the link's rate into the server's
 * NIC ring (PORT_CREDITS packets; the rest wait at the switch). */
static void port_actor(int argc, char **argv)
{
    sim_an_t *an = sg_actor_self_get_data();
    (void)argc;
    (void)argv;
    sg_mailbox_set_receiver(sg_mailbox_get_name(an->port_mbox));
    for (;;) {
        pkt_t *p, *q;
        sg_sem_acquire(an->credits);
        p = recv_pkt(an->port_mbox);
        if (p == NULL) {
            sg_sem_release(an->credits);
            continue;
        }
        if (p->run != S.run) {
            pkt_done(p);
            sg_sem_release(an->credits);
            continue;
        }
        /* The switch forwards a copy; the sender's packet is done. */
        q = pkt_get();
        q->kind = p->kind;
        q->src = p->src;
        q->len = p->len;
        memcpy(q->hdr, p->hdr, WIRE_HDR_LEN);
        q->data = p->data;
        p->data = NULL;
        pkt_done(p);
        if (an->port_free > now_s())
            sg_actor_sleep_for(an->port_free - now_s());
        an->port_free = now_s() + q->len / S.cfg->link_Bps;
        send_msg(&an->ob_port, an->mbox, q, (long)q->len);
    }
}

static void an_actor(int argc, char **argv)
{
    sim_an_t *an = sg_actor_self_get_data();
    const sim_calib_t *c = &S.cfg->calib;
    int server = S.cfg->an == SIM_AN_SERVER;
    (void)argc;
    (void)argv;
    sg_mailbox_set_receiver(sg_mailbox_get_name(an->mbox));
    for (;;) {
        pkt_t *p;
        agg_counters_t before;
        const agg_counters_t *after;

        p = recv_pkt(an->mbox);

        if (server)
            sg_sem_release(an->credits);
        if (p == NULL)
            continue;
        if (p->run != S.run) {
            pkt_done(p);
            continue;
        }
        before = *agg_counters(an->agg);
        agg_set_now(an->agg, now_ns());
        agg_on_packet(an->agg, p->src, pkt_bytes(p), p->len);
        after = agg_counters(an->agg);
        if (server) {
            /* The CPU: receive, copy the contribution (or the result) in,
             * reduce when the slot is complete, send what came out; or,
             * measured whole (`incoll bench agg`), a cost per datagram in
             * and out and per byte of each. Several cores take several
             * datagrams at a time. */
            double payload = p->len - WIRE_HDR_LEN, cost, pkt_ns, byte_ns;
            uint64_t sent = after->packets_out - before.packets_out;
            int cores = S.cfg->an_cores > 1 ? S.cfg->an_cores : 1;
            if (sim_calib_agg_fit(c, cores, &pkt_ns, &byte_ns)) {
                double bytes = (double)p->len +
                               (double)(after->bytes_out - before.bytes_out);
                cost = (pkt_ns * (double)(1 + sent) + byte_ns * bytes) * 1e-9;
            } else {
                cost = c->agg_pkt_ns * 1e-9 * (double)(1 + sent);
                if (after->contribs_accepted > before.contribs_accepted ||
                    p->hdr[5] == WIRE_RESULT)
                    cost += sim_cost_s(0, payload, c->copy_gbps);
                if (after->reductions > before.reductions)
                    cost += sim_cost_s(
                        c->agg_reduce_call_ns,
                        (double)(after->bytes_reduced - before.bytes_reduced),
                        c->agg_reduce_gbps);
            }
            cost /= cores;
            if (cost > 0)
                sg_actor_sleep_for(cost);
        }
        pkt_done(p);
        /* Hand what came out to the ways out. A switch AN's result to
         * its hosts' group address is one packet out of the AN that the
         * switch replicates to their ports, which send at once. */
        while (an->pending) {
            pkt_t *q = an->pending;
            an->pending = q->next;
            q->next = NULL;
            q->ready = now_s() + c->switch_ns * 1e-9;
            if (q->dst >= EP_MC_BASE && !server)
                mc_replicate(an, q, outq_push);
            else
                outq_push(an, q);
        }
        an->pending_tail = &an->pending;
    }
}

/* ---- hosts: in-network allreduce --------------------------------------- */

/* Sends the host a message over its clock link (1 byte per ps) that lands
 * at time at (seconds), on mailbox mbox. */
static void clock_msg(sim_host_t *h, sg_mailbox_t mbox, int kind, double at)
{
    pkt_t *p = pkt_get();
    double ps = (at - now_s()) * 1e12;
    p->kind = (uint8_t)kind;
    p->len = 0;
    S.clocks++;
    send_msg(&h->ob, mbox, p, ps > 0 ? (long)llround(ps) : 0);
}

/* Puts the head of the NIC queue on the wire and books the next one. */
static void nic_send(sim_host_t *h)
{
    pkt_t *p = h->txq;
    double now = now_s();
    h->txq = p->next;
    if (h->txq == NULL)
        h->txq_tail = &h->txq;
    p->next = NULL;
    h->nic_free =
        (h->nic_free > now ? h->nic_free : now) + p->len / S.cfg->link_Bps;
    deliver(&h->ob, &h->rng, p->dst, p);
    if (h->txq)
        clock_msg(h, h->nic_mbox, PKT_NIC, h->nic_free);
}

/* The NIC sends back to back: a packet goes out now if the NIC is idle,
 * else it waits for the clock message that says the NIC is free. */
static void host_send_cb(void *arg, incoll_ep_t dst, const void *hdr,
                         const void *payload, size_t len)
{
    sim_host_t *h = arg;
    pkt_t *p = pkt_from((incoll_ep_t)h->rank, hdr, payload, len);
    int was_empty = h->txq == NULL;

    p->dst = dst;
    *h->txq_tail = p;
    h->txq_tail = &p->next;
    if (!was_empty)
        return;
    if (h->nic_free <= now_s())
        nic_send(h);
    else
        clock_msg(h, h->nic_mbox, PKT_NIC, h->nic_free);
}

/* Keeps one timer clock message in flight while the engine has a
 * deadline. It lands at the deadline or after rto_period_ns, whichever is
 * first; every new deadline is at least rto_min away (the engine's rule),
 * which is more than that period, so no deadline is ever passed unseen. */
static void rto_arm(sim_host_t *h)
{
    uint64_t d, now, at;
    if (!S.cfg->timers || h->rto_at != UINT64_MAX)
        return;
    d = host_engine_deadline(h->eng);
    if (d == UINT64_MAX)
        return;
    now = now_ns();
    at = d < now + S.rto_period_ns ? d : now + S.rto_period_ns;
    h->rto_at = at;
    clock_msg(h, h->rto_mbox, PKT_RTO, (double)at * 1e-9);
}

/* Runs the engine's operation (or lock round) that returned st until it
 * ends; its status. */
static incoll_status_t host_wait(sim_host_t *h, incoll_status_t st)
{
    while (st == INCOLL_INPROGRESS) {
        sg_comm_t comms[3];
        void **slots[3];
        int n = 0;
        ssize_t which = 0;
        pkt_t *p;

        rto_arm(h);
        outbox_reap(&h->ob);
        /* Wait for a packet, the NIC's clock or the timers' clock. */
        if (h->rx_comm == NULL)
            h->rx_comm = sg_mailbox_get_async(h->mbox, &h->rx_pkt);
        if (h->nic_comm == NULL && h->txq)
            h->nic_comm = sg_mailbox_get_async(h->nic_mbox, &h->nic_pkt);
        if (h->rto_comm == NULL && h->rto_at != UINT64_MAX)
            h->rto_comm = sg_mailbox_get_async(h->rto_mbox, &h->rto_pkt);
        comms[n] = h->rx_comm;
        slots[n++] = &h->rx_pkt;
        if (h->nic_comm) {
            comms[n] = h->nic_comm;
            slots[n++] = &h->nic_pkt;
        }
        if (h->rto_comm) {
            comms[n] = h->rto_comm;
            slots[n++] = &h->rto_pkt;
        }
        if (n == 1)
            sg_comm_wait(comms[0]);
        else
            which = sg_comm_wait_any(comms, (size_t)n);
        p = *slots[which];
        if (slots[which] == &h->rx_pkt)
            h->rx_comm = NULL;
        else if (slots[which] == &h->nic_pkt)
            h->nic_comm = NULL;
        else
            h->rto_comm = NULL;
        if (p->run != S.run) {
            pkt_done(p);
            continue;
        }
        if (p->kind == PKT_NIC) {
            if (h->txq)
                nic_send(h);
        } else if (p->kind == PKT_RTO) {
            h->rto_at = UINT64_MAX;
            host_engine_on_time(h->eng, now_ns());
        } else {
            if (!S.cfg->timers && now_ns() > host_engine_deadline(h->eng))
                S.late_timers++;
            host_engine_on_packet(h->eng, p->src, pkt_bytes(p), p->len,
                                  now_ns());
        }
        pkt_done(p);
        st = host_engine_status(h->eng);
    }
    return st;
}

/* The library's blocking allreduce (src/host/allreduce.c with
 * src/host/stream.c): lock first when the streaming policy says so (a
 * refusal is no error: the operation runs on the slots), the operation,
 * then the unlock when the lock's operations are used up. */
static void host_inc_actor(int argc, char **argv)
{
    sim_host_t *h = sg_actor_self_get_data();
    const sim_config_t *cfg = S.cfg;
    double t0 = now_s();
    incoll_status_t st = INCOLL_OK;
    (void)argc;
    (void)argv;
    sg_mailbox_set_receiver(sg_mailbox_get_name(h->mbox));
    for (int it = 0; it < cfg->iters && st == INCOLL_OK; it++) {
        if (cfg->stream && host_engine_stream_wants_lock(
                               h->eng, cfg->stream_threshold, S.count * 4)) {
            st = host_wait(
                h, host_engine_lock(h->eng, cfg->stream_nops, now_ns()));
            if (st != INCOLL_OK)
                break;
        }
        st = host_wait(h, host_engine_start(h->eng, h->sendbuf, h->recvbuf,
                                            S.count, INCOLL_FLOAT32,
                                            INCOLL_OP_SUM, now_ns()));
        if (st == INCOLL_OK && cfg->data)
            h->wrong += check_result(h->job, h->recvbuf);
        if (st == INCOLL_OK &&
            host_engine_stream_wants_unlock(h->eng, cfg->stream_nops))
            st = host_wait(h, host_engine_unlock(h->eng, now_ns()));
    }
    h->status = st;
    h->t_done = now_s() - t0;
    h->done = 1;
}

/* ---- hosts: host-based algorithms --------------------------------------- */

/* Waits for the message of step `step`; keeps others for later. */
static pkt_t *recv_step(sim_host_t *h, uint32_t step)
{
    pkt_t **pp;
    for (pp = &h->early; *pp; pp = &(*pp)->next) {
        if ((*pp)->step == step) {
            pkt_t *p = *pp;
            *pp = p->next;
            return p;
        }
    }
    for (;;) {
        pkt_t *p = recv_pkt(h->mbox);
        if (p == NULL)
            continue;
        if (p->run != S.run || p->kind != PKT_P2P) {
            pkt_put(p);
            continue;
        }
        if (p->step == step)
            return p;
        p->next = h->early;
        h->early = p;
    }
}

/* Applies a received block: reduce (in the schedule's operand order) or
 * copy, charging the reduction's time from the calibration. */
static void apply_block(sim_host_t *h, const algo_step_t *st, pkt_t *p)
{
    size_t bytes = st->recv_count * 4;

    if (S.cfg->data) {
        float *dst = (float *)(h->recvbuf + st->recv_off * 4);
        if (st->recv_reduce && st->recv_left) {
            /* received op mine: fold into the received copy (reduce_n's
             * dst may alias only src[0]), then copy it in. */
            const void *srcs[2] = {p->data, dst};
            reduce_n(INCOLL_OP_SUM, INCOLL_FLOAT32, p->data, srcs, 2,
                     st->recv_count);
            memcpy(dst, p->data, bytes);
        } else if (st->recv_reduce) {
            const void *srcs[2] = {dst, p->data};
            reduce_n(INCOLL_OP_SUM, INCOLL_FLOAT32, dst, srcs, 2,
                     st->recv_count);
        } else {
            memcpy(dst, p->data, bytes);
        }
    }
    if (st->recv_reduce) {
        double t = sim_host_reduce_s(S.cfg, bytes);
        if (t > 0)
            sg_actor_sleep_for(t);
    }
}

/*
 * The steps of a host-based algorithm: algo_schedule()'s list, or for the
 * ring each step computed when needed (sim_ring.c: the list would be
 * 2(N - 1) steps for each of N hosts), only the non-empty ones when the
 * vector has fewer elements than there are hosts. Empty steps take no
 * time, so skipping them changes nothing.
 */
typedef struct {
    int ring;
    int nsteps;
    algo_step_t *steps; /* not the ring: every step */
    int *active;        /* the ring, few elements: the non-empty steps */
    int nactive;        /* -1: every step */
    algo_step_t cur;
} sched_t;

static int sched_init(sched_t *sc, int rank)
{
    int n = S.conf->nhosts;
    memset(sc, 0, sizeof(*sc));
    sc->ring = S.algo == ALGO_RING;
    sc->nactive = -1;
    if (sc->ring) {
        sc->nsteps = sim_ring_nsteps(n, S.count);
        if (S.count < (size_t)n) {
            sc->active = malloc((2 * S.count + 2) * sizeof(int));
            if (sc->active == NULL)
                return -1;
            sc->nactive = sim_ring_active(rank, n, S.count, sc->active,
                                          (int)(2 * S.count + 2));
            if (sc->nactive < 0)
                return -1;
        }
        return 0;
    }
    {
        int max = algo_max_steps((algo_kind_t)S.algo, n);
        sc->steps = malloc((size_t)(max > 0 ? max : 1) * sizeof(algo_step_t));
        if (sc->steps == NULL)
            return -1;
        sc->nsteps = algo_schedule((algo_kind_t)S.algo, rank, n, S.count,
                                   sc->steps, max);
    }
    return sc->nsteps < 0 ? -1 : 0;
}

/* The j-th step to run; its index into *i_p. */
static const algo_step_t *sched_get(sched_t *sc, int rank, int j, int *i_p)
{
    int i = sc->nactive >= 0 ? sc->active[j] : j;
    *i_p = i;
    if (!sc->ring)
        return &sc->steps[i];
    sim_ring_step(rank, S.conf->nhosts, S.count, i, &sc->cur);
    return &sc->cur;
}

static void sched_free(sched_t *sc)
{
    free(sc->steps);
    free(sc->active);
}

static void host_algo_actor(int argc, char **argv)
{
    sim_host_t *h = sg_actor_self_get_data();
    sched_t sched;
    int nrun;
    double t0 = now_s();
    (void)argc;
    (void)argv;

    sg_mailbox_set_receiver(sg_mailbox_get_name(h->mbox));
    if (sched_init(&sched, h->rank) != 0) {
        h->status = INCOLL_ERR_NO_MEMORY;
        h->done = 1;
        sched_free(&sched);
        return;
    }
    nrun = sched.nactive >= 0 ? sched.nactive : sched.nsteps;
    for (int it = 0; it < S.cfg->iters; it++) {
        if (S.cfg->data)
            memcpy(h->recvbuf, h->sendbuf, S.count * 4);
        for (int j = 0; j < nrun; j++) {
            int i;
            const algo_step_t *st = sched_get(&sched, h->rank, j, &i);
            uint32_t tag = (uint32_t)(it * sched.nsteps + i);
            sg_comm_t sc = NULL;
            pkt_t *rp = NULL;
            if (st->send_peer >= 0) {
                pkt_t *p = pkt_get();
                p->kind = PKT_P2P;
                p->src = (incoll_ep_t)h->rank;
                p->step = tag;
                p->nbytes = st->send_count * 4;
                p->len = (uint32_t)sim_p2p_len(S.cfg, p->nbytes);
                if (S.cfg->data) {
                    p->data = malloc(p->nbytes ? p->nbytes : 1);
                    if (p->data == NULL) {
                        fprintf(stderr, "incoll-sim: out of memory\n");
                        exit(1);
                    }
                    memcpy(p->data, h->recvbuf + st->send_off * 4, p->nbytes);
                }
                sc = sg_mailbox_put_async(S.hosts[st->send_peer].mbox, p,
                                          (long)p->len);
                S.messages++;
            }
            /* A step completes when its block has arrived and ours has
             * been delivered; only then is the received block applied
             * (algo.h: the blocks may overlap). */
            if (st->recv_peer >= 0)
                rp = recv_step(h, tag);
            if (sc)
                sg_comm_wait(sc);
            if (rp) {
                apply_block(h, st, rp);
                pkt_put(rp);
            }
        }
        if (S.cfg->data)
            h->wrong += check_result(h->job, h->recvbuf);
    }
    sched_free(&sched);
    h->status = INCOLL_OK;
    h->t_done = now_s() - t0;
    h->done = 1;
}

/* ---- setup --------------------------------------------------------------- */

/* SimGrid options of the model (docs/simulator.md); the user's --cfg=...
 * come after these and win. */
static const char *const model_cfg[] = {
    "--cfg=network/model:CM02",
    "--cfg=network/crosstraffic:0",
    /* CM02 bounds a flow by TCP-gamma / (2 x route latency), a TCP window
     * model; datagrams have no window: make the bound never bind. */
    "--cfg=network/TCP-gamma:1e18",
    /* Small stacks for 16,384+ actors. Guard pages stay on: without them
     * SimGrid commits every stack in full. */
    "--cfg=contexts/stack-size:64",
};
#define NMODEL_CFG (sizeof(model_cfg) / sizeof(model_cfg[0]))

static int cmp_an_name(const void *a, const void *b)
{
    return strcmp(S.conf->ans[*(const int *)a].name,
                  S.conf->ans[*(const int *)b].name);
}

/*
 * Finds every host's and AN's SimGrid host in one pass over the host
 * list. sg_host_by_name() searches the zones depth first from the root,
 * which for 65,536 hosts in 1,024 zones is minutes.
 */
static int find_hosts(const fabric_conf_t *conf)
{
    sg_host_t *all = sg_host_list();
    size_t nall = sg_host_count();
    int *byname = malloc((size_t)conf->nans * sizeof(*byname));

    if (all == NULL || byname == NULL) {
        free(all);
        free(byname);
        return -1;
    }
    for (int a = 0; a < conf->nans; a++)
        byname[a] = a;
    qsort(byname, (size_t)conf->nans, sizeof(*byname), cmp_an_name);
    for (size_t i = 0; i < nall; i++) {
        const char *name = sg_host_get_name(all[i]);
        char *end;
        if (name[0] == 'h' && name[1] >= '0' && name[1] <= '9') {
            long r = strtol(name + 1, &end, 10);
            if (*end == '\0' && r >= 0 && r < conf->nhosts)
                S.hosts[r].host = all[i];
        } else if (strncmp(name, "an-", 3) == 0 ||
                   strncmp(name, "sx-", 3) == 0) {
            int lo = 0, hi = conf->nans - 1;
            while (lo <= hi) {
                int mid = (lo + hi) / 2,
                    c = strcmp(name + 3, conf->ans[byname[mid]].name);
                if (c == 0) {
                    sim_an_t *an = &S.ans[byname[mid]];
                    *(name[0] == 'a' ? &an->an_host : &an->sx_host) = all[i];
                    break;
                }
                if (c < 0)
                    hi = mid - 1;
                else
                    lo = mid + 1;
            }
        }
    }
    free(all);
    free(byname);
    return 0;
}

/* Lines of a /proc file, or the number in it (first), or -1. */
static long proc_long(const char *path, int count_lines)
{
    FILE *f = fopen(path, "r");
    long n = 0;
    int c;
    if (f == NULL)
        return -1;
    if (count_lines) {
        while ((c = getc(f)) != EOF)
            n += c == '\n';
    } else if (fscanf(f, "%ld", &n) != 1) {
        n = -1;
    }
    fclose(f);
    return n;
}

long sim_max_actors(const fabric_conf_t *conf)
{
    /* An AN: itself, up to 16 senders (one per 16 ports), the port in
     * front of a server AN. */
    long per_an = 2 + (conf->radix + 15) / 16;
    return (long)conf->nhosts + (long)conf->nans * (per_an > 18 ? 18 : per_an);
}

/*
 * Stacks of the actors. SimGrid puts a guard page below each stack, and
 * with the stacks on the heap each guard makes two memory mappings; the
 * kernel allows vm.max_map_count of them (65,530 by default), which
 * 65,536 hosts pass, and SimGrid then aborts. When the guards do not fit,
 * the stacks go without guards, 128 KiB each, each its own anonymous
 * mapping (malloc's mmap threshold is lowered below that), which the
 * kernel merges into a few and fills only where touched: the actors use
 * under 8 KiB (every algorithm, mode and loss runs on 8 KiB guarded
 * stacks; 4 KiB faults). --no-stack-guards asks for this at any size.
 * Returns 1 if the guards are dropped.
 */
static int stacks_without_guards(const sim_config_t *cfg,
                                 const fabric_conf_t *conf)
{
    long max = proc_long("/proc/sys/vm/max_map_count", 0);
    long used = proc_long("/proc/self/maps", 1);
    long need = 2 * sim_max_actors(conf);

    if (max < 0)
        max = 65530;
    if (used < 0)
        used = 1000;
    if (used + need + 4096 <= max && !cfg->no_stack_guards)
        return 0;
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    mallopt(M_MMAP_MAX, 1 << 30);
    incoll_info("sim: %ld actors would need %ld memory mappings with stack "
                "guard pages, above vm.max_map_count %ld: stacks of 128 KiB "
                "without guards",
                sim_max_actors(conf), need + used, max);
    return 1;
}

int sim_run_init(int *argc, char **argv, const char *xml,
                 const sim_config_t *cfg, const fabric_conf_t *conf)
{
    size_t maxpay = WIRE_HDR_LEN + WIRE_MAX_PAYLOAD;
    char *args[NMODEL_CFG + 80];
    int nargs = 0;

    if (*argc + (int)NMODEL_CFG + 3 > (int)(sizeof(args) / sizeof(args[0])))
        return -1;
    args[nargs++] = argv[0];
    for (size_t i = 0; i < NMODEL_CFG; i++)
        args[nargs++] = (char *)model_cfg[i];
    if (stacks_without_guards(cfg, conf)) {
        args[nargs++] = "--cfg=contexts/guard-size:0";
        args[nargs++] = "--cfg=contexts/stack-size:128";
    }
    for (int i = 1; i < *argc; i++)
        args[nargs++] = argv[i];
    args[nargs] = NULL;
    xbt_log_control_set("root.thres:warning");
    simgrid_init(&nargs, args);
    simgrid_load_platform(xml);
    /* A run without actors seals the platform (SimGrid does it on the first
     * run), here once rather than in every measurement's process: at
     * 32,768 hosts sealing took 7 s of CPU. */
    simgrid_run();
    memset(&S, 0, sizeof(S));
    S.cfg = cfg;
    S.conf = conf;
    S.rxbuf = calloc(1, maxpay);
    S.hosts = calloc((size_t)conf->nhosts, sizeof(*S.hosts));
    S.ans = calloc((size_t)conf->nans, sizeof(*S.ans));
    if (S.rxbuf == NULL || S.hosts == NULL || S.ans == NULL)
        return -1;
    if (find_hosts(conf) != 0)
        return -1;
    for (int r = 0; r < conf->nhosts; r++) {
        sim_host_t *h = &S.hosts[r];
        h->rank = r;
        if (h->host == NULL) {
            fprintf(stderr, "incoll-sim: platform has no host h%d\n", r);
            return -1;
        }
        h->mbox = mbox_named("h", r);
        h->nic_mbox = mbox_named("n", r);
        h->rto_mbox = mbox_named("t", r);
    }
    for (int a = 0; a < conf->nans; a++) {
        sim_an_t *an = &S.ans[a];
        an->idx = a;
        if (an->an_host == NULL || an->sx_host == NULL) {
            fprintf(stderr, "incoll-sim: platform has no host for an %s\n",
                    conf->ans[a].name);
            return -1;
        }
        an->mbox = mbox_named("a", a);
        an->port_mbox = mbox_named("p", a);
        an->mc_mbox = mbox_named("m", a);
    }
    /* Hosts by leaf, for the switches' multicast replication. */
    S.leafh = malloc((size_t)conf->nhosts * sizeof(*S.leafh));
    S.leafh_first = calloc((size_t)conf->nans + 1, sizeof(*S.leafh_first));
    if (S.leafh == NULL || S.leafh_first == NULL)
        return -1;
    for (int r = 0; r < conf->nhosts; r++)
        S.leafh_first[conf->hosts[r].leaf + 1]++;
    for (int a = 0; a < conf->nans; a++)
        S.leafh_first[a + 1] += S.leafh_first[a];
    {
        int *fill = calloc((size_t)conf->nans, sizeof(*fill));
        if (fill == NULL)
            return -1;
        for (int r = 0; r < conf->nhosts; r++) {
            int a = conf->hosts[r].leaf;
            S.leafh[S.leafh_first[a] + fill[a]++] = r;
        }
        free(fill);
    }
    return 0;
}

static void spawn(const char *kind, long idx, sg_host_t host,
                  void (*fn)(int, char **), void *data, int daemon)
{
    char name[48];
    sg_actor_t a;
    snprintf(name, sizeof(name), "%s%ld", kind, idx);
    a = sg_actor_init(name, host);
    sg_actor_set_data(a, data);
    sg_actor_start(a, fn, 0, NULL);
    if (daemon)
        sg_actor_daemonize(a);
}

/* The AN's ways out, fresh for a measurement. */
static int setup_outq(sim_an_t *an)
{
    if (an->outq == NULL)
        an->outq = calloc(16, sizeof(*an->outq));
    if (an->outq == NULL)
        return -1;
    for (int i = 0; i < an->nout; i++) {
        outq_t *q = &an->outq[i];
        q->an = an;
        q->head = NULL;
        q->tail = &q->head;
        q->nic_free = 0;
        q->sem = sg_sem_init(0);
    }
    return 0;
}

/* Splits the hosts into cfg->groups jobs and finds each job's tree (S's
 * jobs fields). Returns 0 or -1 (out of memory). */
static int plan_groups(void)
{
    const fabric_conf_t *conf = S.conf;
    int G = S.cfg->groups > 1 ? S.cfg->groups : 1, n = conf->nhosts;

    free(S.first);
    free(S.root);
    free(S.below);
    free(S.suma);
    S.ngroups = G;
    S.first = calloc((size_t)G + 1, sizeof(*S.first));
    S.root = calloc((size_t)G, sizeof(*S.root));
    S.below = calloc((size_t)G * (size_t)conf->nans, sizeof(*S.below));
    S.suma = calloc((size_t)G, sizeof(*S.suma));
    if (S.first == NULL || S.root == NULL || S.below == NULL || S.suma == NULL)
        return -1;
    for (int g = 0; g <= G; g++)
        S.first[g] = (int)((long)g * n / G);
    for (int g = 0; g < G; g++) {
        for (int r = S.first[g]; r < S.first[g + 1]; r++) {
            S.hosts[r].job = g;
            S.suma[g] += sim_input_factor(r);
            for (int a = conf->hosts[r].leaf; a >= 0; a = conf->ans[a].parent)
                S.below[g * conf->nans + a]++;
        }
        /* One job on the whole fabric is rooted at the fabric's root; of
         * several, each at the lowest AN above all of its hosts, where the
         * manager would put it. */
        for (int a = conf->hosts[S.first[g]].leaf; a >= 0;
             a = conf->ans[a].parent) {
            S.root[g] = a;
            if (G > 1 &&
                S.below[g * conf->nans + a] == S.first[g + 1] - S.first[g])
                break;
        }
    }
    return 0;
}

/* Whether AN a is in job g's tree: hosts of the job below, at or under
 * its root. */
static int in_group(int g, int a)
{
    if (S.below[g * S.conf->nans + a] == 0)
        return 0;
    for (; a >= 0; a = S.conf->ans[a].parent)
        if (a == S.root[g])
            return 1;
    return 0;
}

/* AN a's children in job g's tree, in the fabric's order (kinds as
 * fabric_conf_children gives them): the job's hosts and the ANs with its
 * hosts below. Returns their number, or -1 when more than maxc. */
static int group_children(int g, int a, int *kinds, int maxc)
{
    int n = fabric_conf_children(S.conf, a, NULL, kinds, maxc), k = 0;

    if (n > maxc || n < 1)
        return -1;
    for (int i = 0; i < n; i++) {
        int c = kinds[i], r = -c - 1;
        if (c >= 0 ? S.below[g * S.conf->nans + c] > 0
                   : r >= S.first[g] && r < S.first[g + 1])
            kinds[k++] = c;
    }
    return k;
}

/* Adds job g's group to AN a. */
static int add_group(sim_an_t *an, int g, uint64_t key, int *kinds,
                     incoll_ep_t *eps, int maxc)
{
    const fabric_conf_t *conf = S.conf;
    int a = an->idx, parent = conf->ans[a].parent, n;
    agg_group_params_t gp;

    n = group_children(g, a, kinds, maxc);
    if (n < 1)
        return -1;
    for (int i = 0; i < n; i++) {
        if (kinds[i] >= 0) {
            eps[i] = EP_AN_BASE + (uint64_t)kinds[i];
        } else {
            eps[i] = (incoll_ep_t)(-kinds[i] - 1);
            S.hosts[eps[i]].child = (uint16_t)i;
        }
    }
    memset(&gp, 0, sizeof(gp));
    gp.id = conf->group_id + (uint32_t)g;
    wire_key_derive(NULL, WIRE_KEY_GROUP, gp.id, key, &gp.key);
    gp.nchildren = n;
    gp.children = eps;
    gp.parent = a == S.root[g] ? INCOLL_EP_NONE : EP_AN_BASE + (uint64_t)parent;
    gp.slots = S.cfg->slots;
    gp.max_payload = S.cfg->payload;
    /* An AN with hosts among its children sends results to their group
     * address (docs/multicast.md: per leaf). */
    for (int i = 0; i < n && S.cfg->mcast; i++)
        if (kinds[i] < 0)
            gp.mcast =
                EP_MC_BASE + (uint64_t)g * (uint64_t)conf->nans + (uint64_t)a;
    if (a != S.root[g]) {
        int pn = group_children(g, parent, kinds, maxc);
        for (int i = 0; i < pn; i++)
            if (kinds[i] == a)
                gp.index_at_parent = (uint16_t)i;
    }
    return agg_group_add(an->agg, &gp) == INCOLL_OK ? 0 : -1;
}

static int setup_ans(uint64_t key)
{
    const fabric_conf_t *conf = S.conf;
    int maxc = conf->radix > conf->nhosts ? conf->radix : conf->nhosts;
    incoll_ep_t *eps = malloc((size_t)maxc * sizeof(*eps));
    int *kinds = malloc((size_t)maxc * sizeof(*kinds)), ret = -1;

    if (eps == NULL || kinds == NULL)
        goto out;
    for (int a = 0; a < conf->nans; a++) {
        sim_an_t *an = &S.ans[a];
        agg_params_t ap = {.name = conf->ans[a].name,
                           .send = an_send_cb,
                           .send_arg = an,
                           .stream_pool_bytes = (size_t)S.cfg->stream_pool,
                           .mcast_dual_bytes = S.cfg->mcast_dual,
                           .lock_idle_ns =
                               setting_ns(SETTING_AGG_LOCK_IDLE_MS)};
        int n;

        an->pending = NULL;
        an->pending_tail = &an->pending;
        an->port_free = 0;
        if (S.mir.state[a] != SIM_MIRROR_REAL) {
            /* A mirror only sends its copies to the parent. */
            an->agg = NULL;
            an->nout = S.mir.state[a] == SIM_MIRROR_COPY;
            if (setup_outq(an) != 0)
                goto out;
            continue;
        }
        n = fabric_conf_children(conf, a, NULL, kinds, maxc);
        if (n > maxc || n < 1)
            goto out;
        an->agg = agg_create(&ap);
        if (an->agg == NULL)
            goto out;
        for (int g = 0; g < S.ngroups; g++) {
            if (in_group(g, a) && add_group(an, g, key, kinds, eps, maxc)) {
                fprintf(stderr, "incoll-sim: cannot set up an %s\n",
                        conf->ans[a].name);
                goto out;
            }
        }
        an->nout = S.cfg->an == SIM_AN_SERVER ? 1 : (n + 15) / 16;
        if (an->nout > 16)
            an->nout = 16;
        if (setup_outq(an) != 0)
            goto out;
        an->rng = S.cfg->seed * 0x100000001B3ull + EP_AN_BASE + (uint64_t)a;
        an->mc_rng = S.cfg->seed * 0x100000001B3ull + EP_MC_BASE + (uint64_t)a;
    }
    ret = 0;
out:
    free(eps);
    free(kinds);
    return ret;
}

/* Whether host r runs: not when it is inside a mirrored subtree. */
static int host_runs(int r)
{
    return S.mir.state[S.conf->hosts[r].leaf] == SIM_MIRROR_REAL;
}

static int setup_host(sim_host_t *h, int inc, uint64_t key)
{
    const sim_config_t *cfg = S.cfg;
    const fabric_conf_t *conf = S.conf;

    h->nic_free = 0;
    h->rng = cfg->seed * 0x100000001B3ull + (uint64_t)h->rank;
    h->done = 0;
    h->wrong = 0;
    h->early = NULL;
    h->status = INCOLL_INPROGRESS;
    h->txq = NULL;
    h->txq_tail = &h->txq;
    h->rto_at = UINT64_MAX;
    h->rx_comm = h->nic_comm = h->rto_comm = NULL;
    if (cfg->data) {
        h->sendbuf = malloc(S.count * 4);
        h->recvbuf = malloc(S.count * 4);
        if (h->sendbuf == NULL || h->recvbuf == NULL) {
            fprintf(stderr,
                    "incoll-sim: out of memory for --data buffers "
                    "(%d hosts x %zu bytes x 2)\n",
                    conf->nhosts, S.count * 4);
            return -1;
        }
        fill_input(h);
    } else {
        h->sendbuf = S.zero;
        h->recvbuf = S.scratch_out;
    }
    if (inc) {
        host_engine_params_t p;
        memset(&p, 0, sizeof(p));
        host_engine_params_default(&p);
        p.rto_init_ns = setting_ns(SETTING_RTO_INIT_US);
        p.rto_min_ns = setting_ns(SETTING_RTO_MIN_US);
        p.rto_max_ns = setting_ns(SETTING_RTO_MAX_US);
        p.max_retries = (int)setting_int(SETTING_RETRIES);
        p.progress_timeout_ns = setting_ns(SETTING_TIMEOUT_MS);
        p.group = conf->group_id + (uint32_t)h->job;
        wire_key_derive(NULL, WIRE_KEY_GROUP, p.group, key, &p.key);
        p.child = h->child;
        p.stream_window = cfg->stream ? cfg->stream_window : 0;
        p.an = EP_AN_BASE + (uint64_t)conf->hosts[h->rank].leaf;
        p.slots = cfg->slots;
        p.window = cfg->window;
        p.max_payload = cfg->payload;
        p.mcast = cfg->mcast;
        p.send = host_send_cb;
        p.send_arg = h;
        S.rto_period_ns = p.rto_min_ns / 2 > 1000 ? p.rto_min_ns / 2 : 1000;
        h->eng = host_engine_create(&p);
        if (h->eng == NULL)
            return -1;
    }
    return 0;
}

/* Adds host h's time and counters to its job's row (before its engine
 * goes); latency_us holds the job's longest time until the end. */
static void job_account(sim_result_t *res, const sim_host_t *h)
{
    sim_job_result_t *j;

    if (h->job >= SIM_MAX_GROUPS)
        return;
    j = &res->jobs[h->job];
    j->hosts++;
    if (!h->done || h->status != INCOLL_OK || h->wrong)
        j->failed++;
    else if (h->t_done * 1e6 > j->latency_us)
        j->latency_us = h->t_done * 1e6;
    if (h->eng && h->rank == S.first[h->job]) {
        const host_engine_counters_t *k = host_engine_counters(h->eng);
        j->ops = k->ops;
        j->stream_ops = k->stream_ops;
        j->locks_granted = k->locks_granted;
        j->locks_refused = k->locks_refused;
    }
}

static void drop_comm(sg_comm_t *c)
{
    if (*c) {
        sg_comm_unref(*c);
        *c = NULL;
    }
}

static void free_list(pkt_t **head)
{
    while (*head) {
        pkt_t *p = *head;
        *head = p->next;
        pkt_put(p);
    }
}

/* Resets the run's state and sets up the ANs and the hosts of one
 * measurement (key: the group's key material). Returns 0 or -1. */
static int run_prepare(const sim_config_t *cfg, const fabric_conf_t *conf,
                       int algo, uint64_t bytes, uint64_t key)
{
    int n = conf->nhosts, inc = algo == ALGO_INC,
        server = cfg->an == SIM_AN_SERVER;

    S.algo = algo;
    S.run++;
    S.count = bytes / 4;
    S.messages = S.clocks = S.dropped = S.late_timers = 0;
    S.max_outbox = 0;
    S.recv_failed = 0;
    S.mirror_copies = 0;
    sim_mirror_free(&S.mir);
    if (sim_mirror_plan(conf,
                        inc && !server && cfg->mirror && !cfg->stream &&
                            cfg->groups <= 1,
                        &S.mir) != 0 ||
        plan_groups() != 0)
        return -1;
    wire_key_derive(NULL, WIRE_KEY_GROUP, conf->group_id, key, &S.gkey);
    if (!cfg->data && S.zero_len < S.count * 4) {
        free(S.zero);
        free(S.scratch_out);
        S.zero = calloc(1, S.count * 4);
        S.scratch_out = malloc(S.count * 4);
        S.zero_len = S.count * 4;
        if (S.zero == NULL || S.scratch_out == NULL)
            return -1;
    }
    if (inc && setup_ans(key) != 0)
        return -1;
    for (int r = 0; r < n; r++)
        if (host_runs(r) && setup_host(&S.hosts[r], inc, key) != 0)
            return -1;
    return 0;
}

/* Starts the actors of one measurement: every AN's (inc) and every
 * simulated host's. */
static void run_spawn(const sim_config_t *cfg, const fabric_conf_t *conf,
                      int inc)
{
    int server = cfg->an == SIM_AN_SERVER;

    for (int a = 0; inc && a < conf->nans; a++) {
        sim_an_t *an = &S.ans[a];
        sg_host_t where = server ? an->an_host : an->sx_host;
        int real = S.mir.state[a] == SIM_MIRROR_REAL;
        an->in_mbox = server ? an->port_mbox : an->mbox;
        if (real)
            spawn("an", a, where, an_actor, an, 1);
        for (int i = 0; i < an->nout; i++)
            spawn("out", a, where, outq_actor, &an->outq[i], 1);
        if (server && real) {
            an->credits = sg_sem_init(PORT_CREDITS);
            spawn("port", a, an->sx_host, port_actor, an, 1);
        }
        if (server && real && cfg->mcast &&
            S.leafh_first[a + 1] > S.leafh_first[a])
            spawn("mc", a, an->sx_host, mc_actor, an, 1);
    }
    for (int r = 0; r < conf->nhosts; r++) {
        sim_host_t *h = &S.hosts[r];
        if (!host_runs(r))
            continue;
        spawn("h", r, h->host, inc ? host_inc_actor : host_algo_actor, h, 0);
    }
}

/* After the run: accounts every simulated host into res and frees what
 * it held; counts the hosts that failed and the wrong elements, and
 * returns the latest finish of the others in *tmax_p. */
static void run_collect_hosts(const sim_config_t *cfg, int n, sim_result_t *res,
                              int *failed_p, int *wrong_p, double *tmax_p)
{
    for (int r = 0; r < n; r++) {
        sim_host_t *h = &S.hosts[r];
        if (!host_runs(r))
            continue;
        outbox_clear(&h->ob);
        drop_comm(&h->rx_comm);
        drop_comm(&h->nic_comm);
        drop_comm(&h->rto_comm);
        job_account(res, h);
        if (!h->done || h->status != INCOLL_OK)
            (*failed_p)++;
        else if (h->t_done > *tmax_p)
            *tmax_p = h->t_done;
        *wrong_p += h->wrong;
        if (h->eng) {
            const host_engine_counters_t *k = host_engine_counters(h->eng);
            res->retransmits += k->retransmits;
            res->ops += k->ops;
            res->stream_ops += k->stream_ops;
            host_engine_destroy(h->eng);
            h->eng = NULL;
        }
        free_list(&h->early);
        free_list(&h->txq);
        if (cfg->data) {
            free(h->sendbuf);
            free(h->recvbuf);
        }
        h->sendbuf = h->recvbuf = NULL;
    }
}

/* After an in-network run: the ANs' counters into res, and what they
 * held freed. */
static void run_collect_ans(const fabric_conf_t *conf, sim_result_t *res)
{
    for (int a = 0; a < conf->nans; a++) {
        sim_an_t *an = &S.ans[a];
        if (an->agg) {
            const agg_counters_t *k = agg_counters(an->agg);
            if (a == conf->hosts[S.first[0]].leaf) {
                res->leaf_pkts_out = k->packets_out;
                res->leaf_results = k->results_sent;
            }
            res->mcast_sent += k->mcast_sent;
            res->mcast_repairs += k->mcast_repairs;
        }
        outbox_clear(&an->ob_port);
        outbox_clear(&an->ob_mc);
        for (int i = 0; i < an->nout; i++) {
            outbox_clear(&an->outq[i].ob);
            free_list(&an->outq[i].head);
            an->outq[i].tail = &an->outq[i].head;
            /* Counts left by the killed actors: fresh semaphores next time. */
            sg_sem_destroy(an->outq[i].sem);
            an->outq[i].sem = NULL;
        }
        agg_destroy(an->agg);
        an->agg = NULL;
        free_list(&an->pending);
        if (an->credits) {
            sg_sem_destroy(an->credits);
            an->credits = NULL;
        }
    }
}

/* The outcome and the note of a measurement: failed hosts and wrong
 * elements, else what the reader should know (mirrored, late results,
 * losses), then streaming and multicast figures. */
static void run_note(const sim_config_t *cfg, int inc, int n, int failed,
                     int wrong, sim_result_t *res)
{
    if (failed || wrong) {
        res->outcome = SIM_FAILED;
        snprintf(res->note, sizeof(res->note),
                 "%d hosts failed, %d wrong elements", failed, wrong);
    } else {
        res->outcome = SIM_OK;
        if (S.mir.mirrors)
            snprintf(res->note, sizeof(res->note),
                     "mirrored: %d of %d hosts simulated, %d ANs copied",
                     S.mir.hosts, n, S.mir.mirrors);
        if (S.late_timers)
            snprintf(res->note, sizeof(res->note),
                     "%" PRIu64 " results came after the retransmission "
                     "timeout; rerun with --timers",
                     S.late_timers);
        else if (res->retransmits || res->dropped)
            snprintf(res->note, sizeof(res->note),
                     "%" PRIu64 " packets lost, %" PRIu64 " retransmitted",
                     res->dropped, res->retransmits);
    }
    if (cfg->stream) {
        size_t len = strlen(res->note);
        snprintf(res->note + len, sizeof(res->note) - len,
                 "%sstreamed %" PRIu64 " of %" PRIu64 " host operations",
                 len ? "; " : "", res->stream_ops, res->ops);
    }
    if (inc && res->leaf_results && res->outcome == SIM_OK) {
        /* What multicast changes: the leaf AN's sends per result. */
        size_t len = strlen(res->note);
        snprintf(res->note + len, sizeof(res->note) - len,
                 "%sleaf AN %.2f datagrams per result", len ? "; " : "",
                 (double)res->leaf_pkts_out / (double)res->leaf_results);
    }
}

int sim_run_one(const sim_config_t *cfg, const fabric_conf_t *conf, int algo,
                uint64_t bytes, sim_result_t *res)
{
    int n = conf->nhosts, inc = algo == ALGO_INC;
    uint64_t key = (cfg->seed + 1) * 0x9E3779B97F4A7C15ull;
    struct timespec w0, w1;
    double tmax = 0;
    int failed = 0, wrong = 0;

    if (algo == ALGO_RING && cfg->recurrence)
        return sim_ring_run(cfg, conf, bytes, res);
    if (algo == ALGO_RING && sim_ring_check(n, bytes / 4) != 0)
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    memset(res, 0, sizeof(*res));
    if (run_prepare(cfg, conf, algo, bytes, key) != 0)
        return -1;
    run_spawn(cfg, conf, inc);
    simgrid_run();
    run_collect_hosts(cfg, n, res, &failed, &wrong, &tmax);
    if (inc)
        run_collect_ans(conf, res);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    incoll_debug("sim: %s %" PRIu64 " bytes: %" PRIu64 " messages, %" PRIu64
                 " clock messages, longest outbox %d, %ld packets still on "
                 "their way when their sender ended",
                 algo_name((algo_kind_t)algo), bytes, S.messages, S.clocks,
                 S.max_outbox, S.recv_failed);
    res->algo = algo;
    res->an = inc ? (int)cfg->an : -1;
    res->hosts = n;
    res->levels = conf->levels;
    res->radix = conf->radix;
    res->bytes = bytes;
    res->checked = cfg->data;
    res->messages = S.messages;
    res->dropped = S.dropped;
    res->wall_s = (double)(w1.tv_sec - w0.tv_sec) +
                  (double)(w1.tv_nsec - w0.tv_nsec) * 1e-9;
    res->latency_us = tmax * 1e6 / cfg->iters;
    res->bandwidth_MBps =
        tmax > 0 ? (double)bytes / (res->latency_us * 1e-6) / 1e6 : 0;
    res->stream = cfg->stream;
    res->mcast = inc && cfg->mcast;
    res->groups = S.ngroups;
    run_note(cfg, inc, n, failed, wrong, res);
    for (int g = 0; g < S.ngroups && g < SIM_MAX_GROUPS; g++) {
        sim_job_result_t *j = &res->jobs[g];
        j->latency_us /= cfg->iters;
        j->bandwidth_MBps =
            j->latency_us > 0 ? (double)bytes / j->latency_us : 0;
    }
    return 0;
}
