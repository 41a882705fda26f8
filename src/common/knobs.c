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
    {"INCOLL_GEN", "", "host",
     "generation of this job's groups (decimal or 0x hex, non-zero); `incoll "
     "run` sets it from the clock so newer jobs win; unset uses a hash of "
     "INCOLL_JOB"},
    {"INCOLL_PAYLOAD", "0", "host",
     "payload bytes per packet; 0 uses the group's (8192, for a 9000-byte "
     "MTU)"},
    {"INCOLL_WINDOW", "0", "host",
     "segments in flight per group; 0 uses the group's slot count"},
    {"INCOLL_RTO_INIT_US", "20000", "host", "first retransmission timeout"},
    {"INCOLL_RTO_MIN_US", "5000", "host",
     "lower bound of the adaptive timeout"},
    {"INCOLL_RTO_MAX_US", "250000", "host",
     "upper bound of the timeout with backoff"},
    {"INCOLL_RETRIES", "12", "host",
     "retransmissions of one segment before giving up"},
    {"INCOLL_TIMEOUT_MS", "3000", "host",
     "an operation with no result for this long fails with a timeout"},
    {"INCOLL_PROGRESS_THREAD", "0", "host",
     "1: nonblocking collectives run in a library thread that blocks in poll, so computation overlaps them fully"},
    {"INCOLL_P2P_WINDOW", "64", "host",
     "packets in flight per step of the host-based algorithms (1..512)"},
    {"INCOLL_P2P_PAYLOAD", "0", "host",
     "payload bytes per packet of the host-based algorithms, the same on every "
     "rank; 0 uses the fabric's group payload (8192)"},
    {"INCOLL_UDP_BUF", "8388608", "all",
     "socket buffer bytes asked of the kernel"},
    {"INCOLL_AGG_GEN_IDLE_MS", "1000", "agg",
     "a group quiet for this long lets an older job generation take it over "
     "(newer ones always do); 0 lets any generation take it over at once"},
    {"INCOLL_FAULT_DROP", "0", "fault",
     "probability of dropping a sent datagram"},
    {"INCOLL_FAULT_DUP", "0", "fault",
     "probability of sending a datagram twice"},
    {"INCOLL_FAULT_REORDER", "0", "fault",
     "probability of holding a datagram behind later ones"},
    {"INCOLL_FAULT_SEED", "1", "fault", "seed of the fault injection"},
    {"INCOLL_MPI_ENABLE", "1", "mpi",
     "0 makes libincoll_mpi a pure pass-through to the MPI library"},
    {"INCOLL_MPI_COLLS", "all", "mpi",
     "collectives libincoll_mpi offloads: a list, all or none"},
    {"INCOLL_MPI_MIN_RANKS", "2", "mpi",
     "communicators with fewer ranks stay with the MPI library"},
    {"INCOLL_MPI_MAX_BYTES", "0", "mpi",
     "calls moving more bytes per rank stay with the MPI library; 0 = no "
     "limit"},
    {"INCOLL_MPI_VERBOSE", "0", "mpi",
     "1 prints, per communicator, whether it is offloaded and why not"},
    {"INCOLL_MPI_STATS", "0", "mpi",
     "1 prints at MPI_Finalize one line at rank 0: calls offloaded and passed "
     "through, per collective, with reasons"},
    {"INCOLL_MPI_EAGER", "0", "mpi",
     "1 sets up a communicator's fabric group when it is created, not at its "
     "first collective"},
    {"INCOLL_MPI_AGREE", "0", "mpi",
     "1 agrees after each offloaded call (one MPI allreduce of an int) so a "
     "fabric failure on any rank is redone by MPI, for fabrics without a "
     "manager; 0: a failure libincoll cannot recover goes to the "
     "communicator's error handler"},
    {"INCOLL_MGR", "", "host",
     "host:port of the aggregation manager; when set, the fabric and every "
     "communicator's group come from it (`incoll run` sets it from "
     "DIR/fabric.env) and fabric.conf is not read"},
    {"INCOLL_SECRET_FILE", "", "all",
     "file holding the fabric secret that proves knowledge to the manager "
     "(`incoll fabric up` writes DIR/secret)"},
    {"INCOLL_JOB", "", "host",
     "job id shared by the ranks of one job (`incoll run` sets a fresh one)"},
    {"INCOLL_HOST", "", "host",
     "this process's host in the manager's topology; unset: the entry of "
     "INCOLL_HOSTS for this rank, else the host name (`incoll run` sets it)"},
    {"INCOLL_HOSTS", "", "host",
     "comma-separated hosts of the manager's topology for ranks 0, 1, ... "
     "(repeated modulo their number), for launchers that cannot set "
     "INCOLL_HOST per rank (`incoll mpirun` sets it)"},
    {"INCOLL_GROUP_SLOTS", "0", "host",
     "slots a communicator asks the manager for; 0 uses the manager's "
     "default (INCOLL_MGR_SLOTS)"},
    {"INCOLL_MGR_CONNECT_MS", "5000", "host",
     "connecting, authenticating and joining the manager must finish within "
     "this"},
    {"INCOLL_MGR_TIMEOUT_MS", "40000", "host",
     "how long a communicator waits for the manager's answer to its group "
     "request (all members must ask) before it runs on the hosts"},
    {"INCOLL_MGR_OP_TIMEOUT_MS", "30000", "host",
     "an in-network operation on a manager's group may go this long without "
     "progress before the process gives up on the group by itself"},
    {"INCOLL_AGG_PAYLOAD", "65000", "agg",
     "largest payload per packet the AN offers the manager"},
    {"INCOLL_AGG_SLOTS", "1024", "agg",
     "slots the AN offers the manager, shared by its groups"},
    {"INCOLL_AGG_GROUPS", "64", "agg",
     "groups at once the AN offers the manager"},
    {"INCOLL_AGG_BUFFER", "268435456", "agg",
     "reduction buffer bytes the AN offers the manager"},
    {"INCOLL_MGR_HEARTBEAT_MS", "200", "mgr",
     "AN heartbeat interval; an AN silent for 5 of them is dead"},
    {"INCOLL_MGR_HOST_GRACE_MS", "3000", "mgr",
     "a process whose connection dropped without a goodbye loses its groups "
     "after this"},
    {"INCOLL_MGR_ADOPT_GRACE_MS", "30000", "mgr",
     "after a manager restart, adopted groups whose processes do not come "
     "back in this time are reclaimed"},
    {"INCOLL_MGR_RECOVER_MS", "10000", "mgr",
     "after a manager start, groups that ANs report are adopted during this "
     "time"},
    {"INCOLL_MGR_REQUEST_MS", "30000", "mgr",
     "all members of a group request must ask within this"},
    {"INCOLL_MGR_AUTH_MS", "5000", "mgr",
     "a connection to the manager must complete its handshake within this"},
    {"INCOLL_MGR_FRAME_MS", "10000", "mgr",
     "a frame to the manager must be complete this long after its first "
     "byte, or its connection is closed"},
    {"INCOLL_MGR_RX_BUDGET", "67108864", "mgr",
     "bytes of partial frames the manager buffers for all connections; a "
     "frame beyond is refused"},
    {"INCOLL_MGR_JOB_RX_BUDGET", "16777216", "mgr",
     "bytes of partial frames the manager buffers for the connections of "
     "one job"},
    {"INCOLL_MGR_SLOTS", "64", "mgr", "slots a group gets by default"},
    {"INCOLL_MGR_MIN_SLOTS", "4", "mgr",
     "a group gets at least this many slots or none"},
    {"INCOLL_MGR_PRUNE", "1", "mgr",
     "1 leaves out of a group the ANs that would have a single child"},
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
