/*
 * The UDP layer's paths (common/udp.h) on real sockets on 127.0.0.1:
 * segmentation offload on send and receive offload on receive, each
 * forced on and off (INCOLL_UDP_GSO, INCOLL_UDP_GRO), must deliver the
 * same datagrams, whole, once, in order per destination, copied or sent
 * from where they lie; and a datagram lost in the middle of a segmented
 * send costs that datagram alone.
 */
#include "test.h"

#include "common/udp.h"

#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LO 0x7f000001u
#define DG_MAX 1400

/* A datagram: its id (4 bytes) and a pattern of len - 4 bytes from it. */
static size_t make_dg(uint8_t *buf, uint32_t id, size_t len)
{
    memcpy(buf, &id, 4);
    for (size_t i = 4; i < len; i++)
        buf[i] = (uint8_t)(id * 31 + i);
    return len;
}

/* The id of a datagram whose pattern is whole, or -1. */
static int64_t check_dg(const uint8_t *buf, size_t len)
{
    uint32_t id;
    if (len < 4)
        return -1;
    memcpy(&id, buf, 4);
    for (size_t i = 4; i < len; i++)
        if (buf[i] != (uint8_t)(id * 31 + i))
            return -1;
    return id;
}

/* Receives until want datagrams or ms of quiet; records the ids in order
 * into ids. Returns how many came, -1 on a broken one. */
static int drain(udp_sock_t *s, uint32_t *ids, int want, int ms)
{
    int got = 0;
    while (got < want) {
        udp_msg_t m[64];
        struct pollfd pfd = {.fd = udp_fd(s), .events = POLLIN};
        int n;
        if (poll(&pfd, 1, ms) <= 0)
            break;
        while ((n = udp_recv_batch(s, m, 64)) > 0)
            for (int i = 0; i < n; i++) {
                int64_t id = check_dg(m[i].data, m[i].len);
                if (id < 0 || got >= want)
                    return -1;
                ids[got++] = (uint32_t)id;
            }
    }
    return got;
}

/*
 * For each path: 3 rounds of, to each of two receivers in turn, a run of
 * 20 datagrams of 1000 bytes (half copied, half sent from where they
 * lie), one of 300 (a shorter one ends a segmented message), then 5 of
 * 1400. Every datagram arrives once, whole, in its destination's order;
 * with segmentation several left per kernel buffer, with receive offload
 * several came per buffer, without either one each.
 */
TEST(udp_paths_roundtrip, TEST_UNIT)
{
    static uint8_t ref[200][DG_MAX];
    static const char *modes[] = {"on", "off"};
    for (int gso = 0; gso < 2; gso++) {
        for (int gro = 0; gro < 2; gro++) {
            udp_sock_t *tx, *rx[2];
            uint32_t ids[2][200], want[2][200];
            int nwant[2] = {0, 0}, nref = 0;
            uint32_t id = 1;
            const udp_counters_t *c;

            setenv("INCOLL_UDP_GSO", modes[gso], 1);
            setenv("INCOLL_UDP_GRO", modes[gro], 1);
            tx = udp_open(LO, 0, 1 << 20, "test tx");
            rx[0] = udp_open(LO, 0, 4 << 20, "test rx0");
            rx[1] = udp_open(LO, 0, 4 << 20, "test rx1");
            CHECK(tx && rx[0] && rx[1]);
            {
                char path[64];
                snprintf(path, sizeof(path), "send=%s recv=%s",
                         gso == 0 ? "gso" : "sendmmsg",
                         gro == 0 ? "gro" : "recvmmsg");
                CHECK_MSG(strcmp(udp_path(tx), path) == 0, "%s, want %s",
                          udp_path(tx), path);
            }
            for (int round = 0; round < 3; round++) {
                for (int d = 0; d < 2; d++) {
                    incoll_ep_t dst = udp_local_ep(rx[d]);
                    for (int k = 0; k < 26; k++) {
                        size_t len = k < 20 ? 1000 : k == 20 ? 300 : 1400;
                        uint8_t buf[DG_MAX];
                        make_dg(buf, id, len);
                        if (k % 2 && nref < 200) {
                            /* From where it lies: kept until the flush. */
                            memcpy(ref[nref], buf, len);
                            udp_send_ref(tx, dst, ref[nref], 4, ref[nref] + 4,
                                         len - 4);
                            nref++;
                        } else {
                            udp_send(tx, dst, buf, 4, buf + 4, len - 4);
                        }
                        want[d][nwant[d]++] = id++;
                    }
                }
                udp_flush(tx);
                nref = 0;
            }
            for (int d = 0; d < 2; d++) {
                CHECK_EQ_INT(drain(rx[d], ids[d], nwant[d], 1000), nwant[d]);
                CHECK(memcmp(ids[d], want[d], sizeof(uint32_t) * 78) == 0);
            }
            c = udp_counters(tx);
            CHECK_EQ_INT(c->tx_packets, 156);
            if (gso == 0)
                CHECK_MSG(c->tx_writes <= 6 * 4,
                          "segmented: %llu buffers for 156 datagrams",
                          (unsigned long long)c->tx_writes);
            else
                CHECK_EQ_INT(c->tx_writes, 156);
            for (int d = 0; d < 2; d++) {
                c = udp_counters(rx[d]);
                CHECK_EQ_INT(c->rx_packets, 78);
                /* Loopback keeps a segmented send whole to a socket with
                 * receive offload; without it the kernel cuts it. */
                if (gro == 0 && gso == 0)
                    CHECK(c->rx_reads < c->rx_packets);
                if (gro == 1)
                    CHECK_EQ_INT(c->rx_reads, c->rx_packets);
            }
            udp_close(tx);
            udp_close(rx[0]);
            udp_close(rx[1]);
        }
    }
    unsetenv("INCOLL_UDP_GSO");
    unsetenv("INCOLL_UDP_GRO");
    return TEST_PASSED;
}

/*
 * Segmented sends of 16 equal datagrams with a quarter of them dropped
 * as they are queued (INCOLL_FAULT_DROP): until a run has lost a datagram
 * between two that went, the receiver must get exactly the others, whole
 * and in order, each once: a loss in the middle of a segmented send costs
 * that one datagram.
 */
TEST(udp_segment_loss_middle, TEST_UNIT)
{
    int middle = 0;
    uint32_t id = 1;

    setenv("INCOLL_UDP_GSO", "on", 1);
    setenv("INCOLL_UDP_GRO", "on", 1);
    setenv("INCOLL_FAULT_DROP", "0.25", 1);
    for (int run = 0; run < 40 && middle < 3; run++) {
        udp_sock_t *tx = udp_open(LO, 0, 1 << 20, "test tx");
        udp_sock_t *rx;
        uint32_t sent[16], got[16];
        uint64_t dropped0, dropped1;
        int n = 0, k;
        unsetenv("INCOLL_FAULT_DROP"); /* the receiver sends nothing */
        rx = udp_open(LO, 0, 4 << 20, "test rx");
        setenv("INCOLL_FAULT_DROP", "0.25", 1);
        CHECK(tx && rx);
        dropped0 = udp_counters(tx)->fault_dropped;
        for (int i = 0; i < 16; i++) {
            uint8_t buf[1000];
            make_dg(buf, id, sizeof(buf));
            sent[i] = id++;
            udp_send(tx, udp_local_ep(rx), buf, 4, buf + 4, sizeof(buf) - 4);
        }
        udp_flush(tx);
        dropped1 = udp_counters(tx)->fault_dropped;
        k = drain(rx, got, 16 - (int)(dropped1 - dropped0), 1000);
        CHECK_EQ_INT(k, 16 - (int)(dropped1 - dropped0));
        /* The ones that came, in order; the missing ones were dropped. */
        for (int i = 0, j = 0; i < 16; i++) {
            if (j < k && got[j] == sent[i]) {
                j++;
                continue;
            }
            /* sent[i] was lost: in the middle when one before and one
             * after it came. */
            if (j > 0 && j < k)
                n++;
        }
        middle += n > 0;
        {
            /* Nothing more: each datagram at most once. */
            uint32_t extra[4];
            CHECK_EQ_INT(drain(rx, extra, 4, 20), 0);
        }
        CHECK(udp_counters(tx)->tx_writes < udp_counters(tx)->tx_packets ||
              udp_counters(tx)->tx_packets <= 1);
        udp_close(tx);
        udp_close(rx);
    }
    unsetenv("INCOLL_FAULT_DROP");
    unsetenv("INCOLL_UDP_GSO");
    unsetenv("INCOLL_UDP_GRO");
    CHECK_MSG(middle >= 3, "only %d runs lost a datagram in the middle",
              middle);
    return TEST_PASSED;
}
