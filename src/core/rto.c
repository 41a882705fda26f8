/*
 * Retransmission timer: see rto.h. Integer arithmetic in ns, the gains of
 * RFC 6298 (1/8 for the mean, 1/4 for the deviation).
 */
#include "core/rto.h"

#include "common/settings.h"

rto_defaults_t rto_defaults(void)
{
    rto_defaults_t d;
    d.init_ns = (uint64_t)setting_default(SETTING_RTO_INIT_US).i;
    d.min_ns = (uint64_t)setting_default(SETTING_RTO_MIN_US).i;
    d.max_ns = (uint64_t)setting_default(SETTING_RTO_MAX_US).i;
    d.retries = (int)setting_default(SETTING_RETRIES).i;
    d.timeout_ns = (uint64_t)setting_default(SETTING_TIMEOUT_MS).i;
    return d;
}

void rto_init(rto_t *r, uint64_t init_ns, uint64_t min_ns, uint64_t max_ns)
{
    r->srtt = 0;
    r->rttvar = 0;
    r->min_ns = min_ns;
    r->max_ns = max_ns;
    r->init_ns = init_ns ? init_ns : min_ns;
    r->rto = r->init_ns;
    r->backoff = 0;
}

void rto_smooth(int64_t *mean, int64_t *dev, uint64_t x_ns)
{
    int64_t x = x_ns > 0 ? (int64_t)x_ns : 1;

    if (*mean == 0) {
        *mean = x;
        *dev = x / 2;
    } else {
        int64_t d = x - *mean;
        *dev += ((d < 0 ? -d : d) - *dev) / 4;
        *mean += d / 8;
        if (*mean < 1)
            *mean = 1;
    }
}

void rto_sample(rto_t *r, uint64_t rtt_ns)
{
    uint64_t rto;

    rto_smooth(&r->srtt, &r->rttvar, rtt_ns);
    rto = (uint64_t)(r->srtt + 4 * r->rttvar);
    if (rto < r->min_ns)
        rto = r->min_ns;
    if (rto > r->max_ns)
        rto = r->max_ns;
    r->rto = rto;
    r->backoff = 0;
}

void rto_timeout(rto_t *r)
{
    if (r->backoff < 16)
        r->backoff++;
}

uint64_t rto_backoff(const rto_t *r, unsigned retries)
{
    uint64_t t;
    if (retries < r->backoff)
        retries = r->backoff;
    t = r->rto << (retries < 16 ? retries : 16);
    return t < r->max_ns ? t : r->max_ns;
}

uint64_t rto_reo_wnd(const rto_t *r, unsigned mult)
{
    return (uint64_t)(r->srtt / 4) * mult + (uint64_t)(2 * r->rttvar);
}

int rto_give_up(const rto_t *r, int retries, int max_retries, uint64_t first_ns,
                uint64_t now_ns)
{
    uint64_t span = 0, step = r->init_ns;

    if (retries < max_retries || now_ns < first_ns)
        return 0;
    /* The time a silent peer gets, whatever the floor: max_retries
     * backoffs from the initial timeout. */
    for (int i = 0; i < max_retries && span < now_ns - first_ns; i++) {
        span += step < r->max_ns ? step : r->max_ns;
        if (step < r->max_ns)
            step *= 2;
    }
    return now_ns - first_ns >= span;
}
