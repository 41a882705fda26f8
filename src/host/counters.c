/*
 * The measuring tools' view of the library's counters: see counters.h.
 */
#include "counters.h"

#include "common/clock.h"
#include "host.h"
#include "req.h"

#include <string.h>

void host_counters_read(incoll_comm_h comm, host_counters_t *c_p)
{
    const udp_counters_t *uc = udp_counters(comm->ctx->sock);

    memset(c_p, 0, sizeof(*c_p));
    c_p->tx_bytes = uc->tx_bytes;
    c_p->tx_packets = uc->tx_packets;
    c_p->rx_packets = uc->rx_packets;
    c_p->wakeups = host_wakeups();
    c_p->early_returns =
        __atomic_load_n(&comm->early_returns, __ATOMIC_RELAXED);
    c_p->early_waits = __atomic_load_n(&comm->early_waits, __ATOMIC_RELAXED);
    if (comm->eng) {
        const host_engine_counters_t *hc = host_engine_counters(comm->eng);
        c_p->has_engine = 1;
        c_p->engine = (uintptr_t)comm->eng;
        c_p->eng_bytes_sent = hc->bytes_sent;
        c_p->eng_retransmits = hc->retransmits + hc->fast_retransmits;
    }
}

void host_counters_progress(incoll_comm_h comm, uint64_t timeout_ns)
{
    /* Under the library lock, as every public call: a communicator's
     * request thread may be finishing an operation that returned early
     * (it gives the lock up while it waits in poll, and so does this). */
    host_lock(comm->ctx);
    host_ctx_progress(comm->ctx, timeout_ns ? now_ns() + timeout_ns : 0);
    host_unlock(comm->ctx);
}
