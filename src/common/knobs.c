#include "common/knobs.h"

#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const knob_t knob_table[] = {
    {"INCOLL_RANK", "", "host", "rank of this process in the world"},
    {"INCOLL_SIZE", "", "host", "number of processes in the world"},
    {"INCOLL_FABRIC", "", "host", "fabric directory holding fabric.conf"},
    {"INCOLL_LOG_LEVEL", "warn", "all", "error, warn, info, debug or trace"},
    {"INCOLL_PAYLOAD", "0", "host",
     "payload bytes per packet; 0 uses the group's (8192, for a 9000-byte MTU)"},
    {"INCOLL_WINDOW", "0", "host",
     "segments in flight per group; 0 uses the group's slot count"},
    {"INCOLL_RTO_INIT_US", "20000", "host", "first retransmission timeout"},
    {"INCOLL_RTO_MIN_US", "5000", "host", "lower bound of the adaptive timeout"},
    {"INCOLL_RTO_MAX_US", "250000", "host", "upper bound of the timeout with backoff"},
    {"INCOLL_RETRIES", "12", "host", "retransmissions of one segment before giving up"},
    {"INCOLL_TIMEOUT_MS", "3000", "host",
     "an operation with no result for this long fails with a timeout"},
    {"INCOLL_UDP_BUF", "8388608", "all", "socket buffer bytes asked of the kernel"},
    {"INCOLL_FAULT_DROP", "0", "fault", "probability of dropping a sent datagram"},
    {"INCOLL_FAULT_DUP", "0", "fault", "probability of sending a datagram twice"},
    {"INCOLL_FAULT_REORDER", "0", "fault",
     "probability of holding a datagram behind later ones"},
    {"INCOLL_FAULT_SEED", "1", "fault", "seed of the fault injection"},
    {NULL, NULL, NULL, NULL},
};

static const knob_t *knob_find(const char *name)
{
    for (const knob_t *k = knob_table; k->name; k++)
        if (strcmp(k->name, name) == 0)
            return k;
    return NULL;
}

const char *knob_str(const char *name)
{
    const knob_t *k = knob_find(name);
    const char *v = getenv(name);
    if (v && *v)
        return v;
    return k ? k->def : NULL;
}

uint64_t knob_u64(const char *name)
{
    const knob_t *k = knob_find(name);
    const char *v = knob_str(name);
    char *end;
    uint64_t r;

    if (v == NULL || *v == '\0')
        return 0;
    errno = 0;
    r = strtoull(v, &end, 0);
    if (errno || *end || *v == '-') {
        incoll_warn("knob %s: '%s' is not a number, using %s", name, v,
                    k ? k->def : "0");
        return k ? strtoull(k->def, NULL, 0) : 0;
    }
    return r;
}

double knob_double(const char *name)
{
    const knob_t *k = knob_find(name);
    const char *v = knob_str(name);
    char *end;
    double r;

    if (v == NULL || *v == '\0')
        return 0;
    errno = 0;
    r = strtod(v, &end);
    if (errno || *end) {
        incoll_warn("knob %s: '%s' is not a number, using %s", name, v,
                    k ? k->def : "0");
        return k ? strtod(k->def, NULL) : 0;
    }
    return r;
}
