/*
 * Settings: one typed table of every environment variable any component
 * of incoll reads (INCOLL_SETTINGS below), in the manner of UCX's config
 * fields and Redis' standardConfig. From the one list come
 *   - the ids (SETTING_MGR_SLOTS for INCOLL_MGR_SLOTS): a misspelt name
 *     does not compile;
 *   - the parsing, with one rule for a bad value: a clear error naming the
 *     setting, the value and what is allowed (setting_get()). Daemons check
 *     their settings at start and exit with that error (settings_check());
 *     libincoll's incoll_init() returns INCOLL_ERR_CONFIG with it;
 *   - `incoll info` and the daemons' --help (settings_print()).
 *
 * Adding a setting is one entry:
 *   X(NAME, TYPE, "default", "range", "component", "doc")
 * NAME without the INCOLL_ prefix. TYPE is one of
 *   BOOL  0/1, yes/no, true/false, on/off
 *   INT   a decimal or 0x hex integer; range "lo..hi"
 *   SIZE  bytes, with an optional K, M, G or T suffix (binary: 64K = 65536)
 *   MS    a duration: a bare number is milliseconds, or a number with ns,
 *   US    us, ms, s, min or h (5ms, 2s); US reads a bare number as
 *         microseconds. The name of a duration ends in _MS or _US.
 *   REAL  a decimal fraction; range "lo..hi"
 *   ENUM  one of the range's words, "a|b|c" (or its index)
 *   STR   any text (paths, lists, ids)
 *   ENDPOINT  host:port
 * An empty default means "unset" (setting_str() returns NULL); an empty
 * range means no bound; "lo.." or "..hi" bound one side. A value set to
 * the empty string counts as unset. The accessors below read the
 * environment each time (no cache), so a test may setenv() between calls;
 * libincoll calls them once, at incoll_init(), into its context's
 * configuration (src/host/cfg.h) and reads that afterwards.
 *
 * Components: "all" (every process), "host" (libincoll), "mpi"
 * (libincoll_mpi), "agg" (incoll-agg), "mgr" (incoll-mgr), "fault" (fault
 * injection for tests), "tool" (the incoll CLI and benchmarks).
 */
#ifndef INCOLL_SETTINGS_H
#define INCOLL_SETTINGS_H

#include "incoll.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* clang-format off */
#define INCOLL_SETTINGS(X) \
    /* every process */ \
    X(LOG_LEVEL, ENUM, "warn", "error|warn|info|debug|trace", "all", \
      "messages of this level and more severe are printed") \
    X(SECRET_FILE, STR, "", "", "all", \
      "file holding the fabric secret that proves knowledge to the manager " \
      "(`incoll fabric up` writes DIR/secret)") \
    X(UDP_BUF, SIZE, "8M", "4K..1G", "all", \
      "socket buffer bytes asked of the kernel") \
    X(UDP_GSO, ENUM, "auto", "auto|on|off", "all", \
      "segmentation offload on send (UDP_SEGMENT): datagrams queued for one " \
      "destination leave in one system call and one buffer of up to 64 KiB, " \
      "each still its own datagram on the wire; auto uses it where the " \
      "kernel has it and falls back when a send is refused, on asks for it " \
      "(an error at start where the kernel lacks it), off sends one " \
      "datagram at a time") \
    X(UDP_GRO, ENUM, "auto", "auto|on|off", "all", \
      "receive offload (UDP_GRO): the kernel hands over datagrams of one " \
      "sender that arrived together in one buffer, split again here; auto " \
      "uses it where the kernel has it, on asks for it (an error at start " \
      "where the kernel lacks it), off reads one datagram per buffer") \
    X(MAC, ENUM, "poly1305", "siphash|poly1305|gmac|none", "all", \
      "data packets' authentication (docs/security.md): poly1305 and gmac " \
      "tag payloads of 256 bytes and more through a Poly1305 or GMAC digest " \
      "under SipHash, siphash hashes every byte with SipHash-2-4, none sends " \
      "no tag and checks none (switches and hosts trusted; `incoll stat` " \
      "shows it); every host and AN of a fabric must use the same") \
    X(MCAST, BOOL, "1", "", "all", \
      "results down the tree by IP multicast (docs/multicast.md): a leaf AN " \
      "sends a result once to its hosts' group address instead of once per " \
      "host, and a host listens there; 0 on a host or an AN: unicast only") \
    X(MCAST_RANGE, STR, "239.192.0.0/16", "", "all", \
      "IPv4 multicast addresses (a.b.c.d/len inside 224.0.0.0/4) the " \
      "manager hands to groups, one per leaf AN of a group (from a " \
      "random place when this is left at its default, from the start " \
      "when set); the world group of fabric.conf takes the first ones, " \
      "one per AN") \
    X(MCAST_PORT, INT, "18517", "1..65535", "all", \
      "UDP port of the multicast results") \
    X(MCAST_DUAL, SIZE, "0", "0..65000", "agg", \
      "results of at most this many bytes go by unicast too (the dual " \
      "send): a lost multicast copy then costs nothing; 0: a host that " \
      "misses one asks again (repair), which costs a round trip only on " \
      "loss") \
    X(MCAST_PROBE_OPS, INT, "8", "1..1000000", "host", \
      "a group whose first this many operations brought no multicast " \
      "result stops listening and says why (a fabric that does not carry " \
      "multicast)") \
    /* libincoll */ \
    X(RANK, INT, "", "0..16777215", "host", \
      "rank of this process in the world") \
    X(SIZE, INT, "", "1..16777216", "host", \
      "number of processes in the world") \
    X(LOCAL_RANK, INT, "", "0..65535", "host", \
      "rank of this process on its node (libincoll_mpi passes it)") \
    X(LOCAL_SIZE, INT, "", "1..65536", "host", \
      "processes of the job on this node (libincoll_mpi passes it)") \
    X(FABRIC, STR, "", "", "host", \
      "fabric directory holding fabric.conf") \
    X(HOST_MAP, STR, "", "", "host", \
      "without a manager, when fabric.conf has fewer hosts than the world " \
      "has ranks: the fabric.conf host of ranks 0, 1, ..., comma-separated " \
      "(`incoll run --ppn` and libincoll_mpi set it); unset: rank r on " \
      "host r * hosts / ranks") \
    X(GEN, INT, "", "1..0xffffffff", "host", \
      "generation of this job's groups (decimal or 0x hex, non-zero); " \
      "`incoll run` sets it from the clock so newer jobs win; unset uses " \
      "a hash of INCOLL_JOB") \
    X(PAYLOAD, SIZE, "0", "0..65535", "host", \
      "payload bytes per packet; 0 uses the group's (8192, for a 9000-byte " \
      "MTU)") \
    X(WINDOW, INT, "0", "0..65535", "host", \
      "the most segments in flight (without a result) per group, at most " \
      "the group's slot count; 0 uses the slot count. While a lost " \
      "segment is repaired later ones keep going, up to the slots") \
    X(WINDOW_MIN, INT, "32", "0..65535", "host", \
      "the window starts at this many segments and never goes below: it " \
      "grows toward INCOLL_WINDOW by a segment per result (as TCP's " \
      "congestion window, slower after a loss) and a loss halves it back " \
      "toward this; 0: a fixed window of INCOLL_WINDOW (with INCOLL_PACE " \
      "it starts there and may go down to 2)") \
    X(COPY_BYTES, SIZE, "0", "0..65000", "host", \
      "operations of at most this many bytes send every packet twice (the " \
      "ANs too): one lost packet then costs no round trip, each operation " \
      "twice the packets; 0: never (for lossy fabrics, e.g. 64)") \
    X(COPY_ADAPT, SIZE, "64", "0..65000", "host", \
      "operations of at most this many bytes (one packet) go twice, as " \
      "with INCOLL_COPY_BYTES, but only while the engine sees loss: two " \
      "such operations within 256 that got fewer results than they were " \
      "due (a lost packet, not a resend a slow machine caused) turn " \
      "copies on, 256 without turn them off, and a member whose results " \
      "come flagged twice follows; a fabric that does not drop never " \
      "pays; 0: never") \
    X(HEDGE_PCT, INT, "0", "0..1000", "host", \
      "while INCOLL_COPY_ADAPT's copies are on, the copy of a one-packet " \
      "operation waits: it goes only if the result has not come this many " \
      "percent of the smoothed round trip after the first send (a hedge), " \
      "so operations answered in time send once, but one that lost a " \
      "packet waits that long (the 1% p99 measured worse: README, Loss); " \
      "0, the default: the copy goes at once and the ANs send theirs twice") \
    X(BCAST_AHEAD, SIZE, "0", "0..4194304", "host", \
      "a broadcast of at most this many bytes has the ANs send the root's " \
      "data on at once, down to the other members and up toward the rest " \
      "of the tree, without waiting for every member to arrive; a member " \
      "returns once its data is in (the round's acknowledgement is " \
      "awaited by its communicator's next operation in the network, or " \
      "its request thread after 20 ms); one-packet broadcasts then go " \
      "one-way, but at least every fourth segment: no round, the root's " \
      "data completes them at the ANs and the rounds between acknowledge " \
      "them (docs/wire-format.md); larger ones " \
      "send their data down each link once (an AN failure while members " \
      "are broadcasts apart is recovered broadcast by broadcast: " \
      "docs/failures.md); 0, the default: never (with it on, ranks that " \
      "disagree on a one-way broadcast's root or skip one get success " \
      "or a wait for INCOLL_WAIT_MS instead of INCOLL_ERR_MISMATCH: " \
      "docs/results.md)") \
    X(ASK_BYTES, SIZE, "1024", "0..65535", "host", \
      "a fast resend of an allreduce or reduce segment of at least this " \
      "many bytes asks the leaf AN first (a header; the AN answers with " \
      "the result, or asks for our data when ours is what it lacks) " \
      "instead of sending the data again; 0: always the data") \
    X(PACE, INT, "0", "0..65535", "host", \
      "segments the window may keep queued on the path: the window follows " \
      "the measured round trip (delay-based, as TCP Vegas) between " \
      "INCOLL_WINDOW_MIN (or 2) and INCOLL_WINDOW, and a loss halves it; " \
      "0: only losses hold it back (INCOLL_WINDOW_MIN)") \
    X(STREAM_THRESHOLD, SIZE, "0", "0..", "host", \
      "allreduces (blocking or not) of at least this many bytes, and " \
      "more than the group's slots carry at once, lock the tree and " \
      "stream through the ANs' streaming pools (docs/streaming.md); 0: " \
      "only under incoll_comm_lock, the default: on the emulated fabric " \
      "with an 8-slot share streaming measured slower than the " \
      "slots at every size from 128K to 4M (1.02-1.12x), so no crossover; " \
      "every rank must use the same value") \
    X(STREAM_LOCK, STR, "op", "", "host", \
      "how long a streaming lock is held: op (one operation), comm (until " \
      "the communicator's group goes or an AN reclaims it) or a number N " \
      "(N operations, 1..65535)") \
    X(STREAM_WINDOW, INT, "256", "1..65534", "host", \
      "stream slots a lock asks for (the ANs may grant fewer)") \
    X(STREAM_SLOTS, INT, "64", "1..65535", "host", \
      "the slots a communicator asks the manager for, held for the " \
      "group's life: they bound the paced window (INCOLL_PACE), 512 KiB " \
      "in flight per host at 8 KiB a slot (large vectors may also stream " \
      "through the ANs' pools while locked); INCOLL_GROUP_SLOTS, when " \
      "set, wins") \
    X(RTO_INIT_US, US, "20ms", "1us..60s", "host", \
      "first retransmission timeout") \
    X(RTO_MIN_US, US, "200us", "1us..60s", "host", \
      "lower bound of the adaptive timeout") \
    X(RTO_MAX_US, US, "250ms", "1us..600s", "host", \
      "upper bound of the timeout with backoff") \
    X(RETRIES, INT, "12", "1..100000", "host", \
      "retransmissions of one segment before giving up") \
    X(TIMEOUT_MS, MS, "3s", "1ms..24h", "host", \
      "an in-network operation without any answer from its AN for this " \
      "long fails with a timeout (a fault on the path; with a manager, " \
      "INCOLL_MGR_OP_TIMEOUT_MS when longer)") \
    X(WAIT_MS, MS, "600s", "1ms..24h", "host", \
      "how long a collective waits for members that have not called it " \
      "yet (a rank computing or writing a checkpoint), as MPI waits: an " \
      "in-network operation while its leaf AN says it holds this rank's " \
      "part and waits for the others, a host-based one and a recovery's " \
      "agreement while a peer is silent, a group request while not every " \
      "member asked the manager, a rank of the shared-memory level for its " \
      "neighbours; then the call fails with INCOLL_ERR_TIMEOUT") \
    X(DEADLINE_MS, MS, "0", "0..24h", "host", \
      "a collective not complete this long after its call fails with " \
      "INCOLL_ERR_TIMEOUT, and so do the other ranks' calls of it (the " \
      "communicator stays usable); each rank counts from its own call; " \
      "0: no deadline") \
    X(P2P_RTO_MIN_US, US, "5ms", "1us..60s", "host", \
      "lower bound of the host-based algorithms' adaptive timeout (their " \
      "bursts queue on slow links and their ranks wait to be scheduled: " \
      "a floor near the round trip resends what was only late); the " \
      "greater of it and INCOLL_RTO_MIN_US") \
    X(P2P_WINDOW, INT, "64", "1..512", "host", \
      "packets in flight per step of the host-based algorithms") \
    X(P2P_PAYLOAD, SIZE, "0", "0..65535", "host", \
      "payload bytes per packet of the host-based algorithms, the same on " \
      "every rank; 0 uses the fabric's group payload (8192)") \
    X(ALGO_SHORT_BYTES, SIZE, "16K", "0..1G", "host", \
      "host-based algorithm selection: an allreduce of up to this many " \
      "bytes uses recursive doubling (longer: Rabenseifner on a power of " \
      "two, else the ring); an allgather of up to 4 times this in all, " \
      "recursive doubling or Bruck (longer: the ring)") \
    X(ALGO_PIPE_BYTES, SIZE, "256K", "0..1T", "host", \
      "host-based algorithm selection: a bcast or reduce of more than this " \
      "many bytes (and more than 2 ranks) runs as a pipelined chain, " \
      "shorter ones as a binomial tree") \
    X(PROGRESS_THREAD, BOOL, "0", "", "host", \
      "1: nonblocking collectives run in a library thread that blocks in " \
      "poll, so computation overlaps them fully (libincoll_mpi turns it on " \
      "unless set)") \
    X(EARLY_MAX, SIZE, "4M", "0..1G", "host", \
      "a reduce's and a gather's non-roots and a bcast's and a scatter's " \
      "root return from the blocking call as soon as libincoll has copied " \
      "what the operation still needs (at most this many bytes) and the " \
      "operation runs in the network; it completes in the communicator's " \
      "request thread, an error comes back from the next call on the " \
      "communicator; each communicator keeps up to four such copies, " \
      "grown to the calls made; 0: off") \
    X(HIER, ENUM, "node", "node|socket|flat", "host", \
      "node: ranks of a communicator on one host reduce in shared memory " \
      "into one leader that alone talks to the fabric; socket: one leader " \
      "per CPU socket (hwloc, from the rank's binding; unbound ranks run " \
      "node); flat: every rank talks to the fabric") \
    X(HIER_SEG, SIZE, "256K", "4K..1G", "host", \
      "bytes per pipeline segment of the shared-memory level") \
    X(HIER_DEPTH, INT, "4", "2..64", "host", \
      "segments in the shared-memory pipeline at a time: a leader keeps up " \
      "to this many of its leaders' allreduces queued while it folds the " \
      "next segments and publishes earlier results (the segment holds " \
      "this many buffers of INCOLL_HIER_SEG bytes per local rank)") \
    X(HIER_SPIN_US, US, "0", "0..1s", "host", \
      "how long a rank polls the shared segment before it blocks in a " \
      "futex; 0 never polls") \
    X(HIER_SHARED, BOOL, "1", "", "host", \
      "node mode's one-packet allreduce: the member that completes the " \
      "host's fold sends the leader's packet on the leader's socket " \
      "(shared at set-up), so the leader sleeps only for the result; 0: " \
      "the leader wakes for its last member and sends it itself") \
    X(HIER_TIMEOUT_MS, MS, "0", "0..24h", "host", \
      "a rank of the shared-memory level waiting this long for a live " \
      "neighbour on its host fails its collective (a dead one fails it at " \
      "once); 0: INCOLL_WAIT_MS") \
    X(MGR, ENDPOINT, "", "", "host", \
      "host:port of the aggregation manager; when set, the fabric and " \
      "every communicator's group come from it (`incoll run` sets it from " \
      "DIR/fabric.env) and fabric.conf is not read") \
    X(JOB, STR, "", "", "host", \
      "job id shared by the ranks of one job (`incoll run` sets a fresh " \
      "one)") \
    X(HOST, STR, "", "", "host", \
      "this process's host in the manager's topology; unset: the entry of " \
      "INCOLL_HOSTS for this rank, else the host name (`incoll run` sets " \
      "it)") \
    X(HOSTS, STR, "", "", "host", \
      "comma-separated hosts of the manager's topology for ranks 0, 1, ... " \
      "(repeated modulo their number), for launchers that cannot set " \
      "INCOLL_HOST per rank (`incoll mpirun` sets it)") \
    X(GROUP_SLOTS, INT, "0", "0..65535", "host", \
      "slots a communicator asks the manager for; 0 uses " \
      "INCOLL_STREAM_SLOTS (64)") \
    X(MGR_CONNECT_MS, MS, "5s", "1ms..24h", "host", \
      "connecting, authenticating and joining the manager must finish " \
      "within this") \
    X(MGR_TIMEOUT_MS, MS, "40s", "1ms..24h", "host", \
      "how long a communicator waits for the manager's answer to its group " \
      "request (all members must ask) before it runs on the hosts") \
    X(MGR_OP_TIMEOUT_MS, MS, "30s", "1ms..24h", "host", \
      "an in-network operation on a manager's group may go this long " \
      "without progress before the process gives up on the group by " \
      "itself") \
    X(USAGE_MS, MS, "1s", "0..24h", "host", \
      "a communicator's rank 0 tells the manager where its collectives ran " \
      "(network, software and why) at most this often while they run, and " \
      "when the communicator is destroyed; 0 only then") \
    /* fault injection */ \
    X(FAULT_DROP, REAL, "0", "0..1", "fault", \
      "probability of dropping a sent datagram") \
    X(FAULT_DUP, REAL, "0", "0..1", "fault", \
      "probability of sending a datagram twice") \
    X(FAULT_REORDER, REAL, "0", "0..1", "fault", \
      "probability of holding a datagram behind later ones") \
    X(FAULT_BURST, REAL, "1", "1..1000000", "fault", \
      "mean length in datagrams of the bursts INCOLL_FAULT_DROP drops in " \
      "(same loss rate); 1 drops each datagram independently") \
    X(FAULT_SEED, INT, "1", "0..", "fault", "seed of the fault injection") \
    X(FAULT_NO_THREAD, BOOL, "0", "", "fault", \
      "1: a communicator's request thread cannot be started, as when the " \
      "system is out of threads (its nonblocking collectives then fail, " \
      "its blocking ones do not return early)") \
    X(AGG_FAULT_MCAST_DROP, REAL, "0", "0..1", "fault", \
      "probability that an AN drops a multicast result it sends (1: a " \
      "fabric that does not carry multicast)") \
    X(FAULT_MCAST_JOIN_OPS, INT, "0", "0..1000000", "fault", \
      "a process joins a group's multicast address only after this many " \
      "operations of the group (its results come by repair until then), as " \
      "when a switch learns a membership late; 0: at once") \
    X(MGR_FAULT_UNKNOWN, INT, "0", "0..65535", "fault", \
      "the manager answers a host's messages of this type as unknown, as " \
      "a manager older than the message does (0: off)") \
    X(AGG_FAULT_DROP_RESULTS, INT, "", "0..", "fault", \
      "an AN drops the result packets of the first group it serves after " \
      "this many of them; unset: off") \
    /* libincoll_mpi */ \
    X(MPI_ENABLE, BOOL, "1", "", "mpi", \
      "0 makes libincoll_mpi a pure pass-through to the MPI library") \
    X(MPI_COLLS, STR, "all", "", "mpi", \
      "collectives libincoll_mpi offloads: a list, all or none") \
    X(MPI_MIN_RANKS, INT, "2", "1..2147483647", "mpi", \
      "communicators with fewer ranks stay with the MPI library") \
    X(MPI_MAX_BYTES, SIZE, "0", "", "mpi", \
      "calls moving more bytes per rank stay with the MPI library; 0 = no " \
      "limit") \
    X(MPI_VERBOSE, BOOL, "0", "", "mpi", \
      "1 prints, per communicator, whether it is offloaded and why not") \
    X(MPI_STATS, BOOL, "0", "", "mpi", \
      "1 prints at MPI_Finalize one line at rank 0: calls offloaded and " \
      "passed through, per collective, with reasons") \
    X(MPI_EAGER, BOOL, "0", "", "mpi", \
      "1 sets up a communicator's fabric group when it is created, not at " \
      "its first collective") \
    X(TUNE_FILE, STR, "", "", "mpi", \
      "selection table (libincoll, for the MPI layer and coll/incoll): where each collective runs per " \
      "form and size (docs/tuning.md); unset: $INCOLL_FABRIC/tune.conf, " \
      "else the built-in table; none: no table (every call in libincoll)") \
    X(TUNE, STR, "", "", "mpi", \
      "entries put before the selection table's, " \
      "COLL[:FORM]:BYTES:PATH[:ranks=R][:ppn=P][:dtype=D] separated by " \
      "commas, PATH inc, mpi, or rd, ring, rabenseifner (allreduce) " \
      "(bcast:0-4K:mpi,allreduce:blocking:0-4K:ring:dtype=float)") \
    X(MPI_TUNE_DEBUG, BOOL, "0", "", "mpi", \
      "1 prints a line per call of the MPI layer: collective, form, size, " \
      "the path the selection table gave and its entry") \
    X(MPI_AGREE, BOOL, "0", "", "mpi", \
      "1 agrees after each offloaded call (one MPI allreduce of an int) so " \
      "a fabric failure on any rank is redone by MPI, for fabrics without " \
      "a manager; 0: a failure libincoll cannot recover goes to the " \
      "communicator's error handler") \
    /* incoll-agg */ \
    X(AGG_GEN_IDLE_MS, MS, "1s", "0..1h", "agg", \
      "a group quiet for this long lets an older job generation take it " \
      "over (newer ones always do); 0 lets any generation take it over at " \
      "once") \
    X(AGG_PAYLOAD, SIZE, "65000", "8..65000", "agg", \
      "largest payload per packet the AN offers the manager") \
    X(AGG_SLOTS, INT, "4096", "1..0xffffffff", "agg", \
      "slots the AN offers the manager, shared by its groups") \
    X(AGG_GROUPS, INT, "64", "1..0xffffffff", "agg", \
      "groups at once the AN offers the manager") \
    X(AGG_BUFFER, SIZE, "256M", "1K..", "agg", \
      "reduction buffer bytes the AN offers the manager") \
    X(AGG_STREAM_POOL, SIZE, "64M", "0..", "agg", \
      "bytes of the AN-wide streaming pool: a group holding the AN's " \
      "streaming lock gets its window from it (docs/streaming.md); 0 " \
      "refuses every lock") \
    X(AGG_THREADS, INT, "1", "1..64", "agg", \
      "threads of the AN, each with a socket on the AN's port (the kernel " \
      "spreads senders over them) and a share of every group's slots (slot " \
      "modulo threads); a packet read by another thread is handed to its " \
      "owner; lock rounds and the streaming window stay on the first") \
    X(AGG_LOCK_IDLE_MS, MS, "2s", "0..1h", "agg", \
      "a streaming lock whose holder sent nothing for this long goes to " \
      "the next group that asks; a refused group keeps its place in the " \
      "queue as long; 0: never") \
    /* incoll-mgr */ \
    X(MGR_HEARTBEAT_MS, MS, "200ms", "10ms..1h", "mgr", \
      "AN heartbeat interval; an AN silent for 5 of them is dead") \
    X(MGR_HOST_GRACE_MS, MS, "3s", "0..24h", "mgr", \
      "a process whose connection dropped without a goodbye loses its " \
      "groups after this") \
    X(MGR_ADOPT_GRACE_MS, MS, "30s", "0..24h", "mgr", \
      "after a manager restart, adopted groups whose processes do not come " \
      "back in this time are reclaimed") \
    X(MGR_RECOVER_MS, MS, "10s", "0..24h", "mgr", \
      "after a manager start, groups that ANs report are adopted during " \
      "this time") \
    X(MGR_REQUEST_MS, MS, "30s", "1ms..24h", "mgr", \
      "all members of a group request must ask within this") \
    X(MGR_AUTH_MS, MS, "5s", "10ms..24h", "mgr", \
      "a connection to the manager must complete its handshake within " \
      "this") \
    X(MGR_PEER_TIMEOUT_MS, MS, "15s", "1s..24h", "mgr", \
      "a connection whose peer stopped answering (its machine died or " \
      "was cut off) is closed within this (TCP keepalive and user " \
      "timeout)") \
    X(MGR_FRAME_MS, MS, "10s", "10ms..24h", "mgr", \
      "a frame to the manager must be complete this long after its first " \
      "byte, or its connection is closed") \
    X(MGR_RX_BUDGET, SIZE, "64M", "0..4611686018427387903", "mgr", \
      "bytes of partial frames the manager buffers for all connections; a " \
      "frame beyond is refused") \
    X(MGR_JOB_RX_BUDGET, SIZE, "16M", "0..4611686018427387903", "mgr", \
      "bytes of partial frames the manager buffers for the connections of " \
      "one job") \
    X(MGR_SLOTS, INT, "64", "1..65535", "mgr", \
      "slots a group gets when its request names none (libincoll names " \
      "INCOLL_STREAM_SLOTS, 64, unless INCOLL_GROUP_SLOTS is set)") \
    X(MGR_MIN_SLOTS, INT, "4", "1..65535", "mgr", \
      "a group gets at least this many slots or none") \
    X(MGR_PRUNE, BOOL, "1", "", "mgr", \
      "1 leaves out of a group the ANs that would have a single child") \
    X(MGR_JOB_SHARE, REAL, "0.5", "0..1", "mgr", \
      "the share of every AN's groups and slots one job may hold when its " \
      "registration names no quota (or it has none): one job cannot take " \
      "an AN whole") \
    X(MGR_JOBS, ENUM, "open", "open|registered", "mgr", \
      "open: any process with the secret may join under any job name; " \
      "registered: only jobs an admin registered (the Slurm plugin) may " \
      "join") \
    X(MGR_JOB_LINGER_MS, MS, "24h", "1s..720h", "mgr", \
      "a registered job with no process and no group for this long is " \
      "forgotten, as if it had ended") \
    X(MGR_STATE_BUDGET, SIZE, "256M", "1M..", "mgr", \
      "bytes of state (jobs, ranks, requests, groups, registrations) the " \
      "manager keeps in all; a join or request beyond is refused") \
    X(MGR_JOB_STATE_BUDGET, SIZE, "64M", "64K..", "mgr", \
      "bytes of state the manager keeps for one job; a join or request " \
      "beyond is refused") \
    X(MGR_TX_BUDGET, SIZE, "64M", "1M..", "mgr", \
      "bytes queued to peers that did not read them yet, in all; beyond, " \
      "the connection holding the most is closed") \
    X(MGR_ADMIN_SECRET_FILE, STR, "", "", "mgr", \
      "file holding the admin secret that job registration (the Slurm " \
      "plugin, `incoll job`) must prove; unset: the fabric secret") \
    X(MGR_METRICS, ENDPOINT, "", "", "mgr", \
      "IP:PORT where the manager serves its metrics over HTTP (OpenMetrics " \
      "text, /metrics); unset: not served") \
    X(MGR_TUNE_FILE, STR, "", "", "mgr", \
      "selection table (docs/tuning.md) the manager hands to every job " \
      "that joins; a job's own INCOLL_TUNE_FILE goes first; unset: none") \
    /* the incoll CLI and benchmarks */ \
    X(BENCH_CORRUPT, ENUM, "", "0|1|result|input", "tool", \
      "test of the benchmark's checks: 1 or result makes the last rank " \
      "change one element of one result once, input one element of its " \
      "input")
/* clang-format on */

typedef enum {
#define SETTING_ID_(name, type, def, range, comp, doc) SETTING_##name,
    INCOLL_SETTINGS(SETTING_ID_)
#undef SETTING_ID_
        SETTING_COUNT
} setting_id_t;

typedef enum {
    SETTING_T_BOOL,
    SETTING_T_INT,
    SETTING_T_SIZE,
    SETTING_T_MS,
    SETTING_T_US,
    SETTING_T_REAL,
    SETTING_T_ENUM,
    SETTING_T_STR,
    SETTING_T_ENDPOINT,
} setting_type_t;

typedef struct {
    const char *name; /* environment variable, INCOLL_... */
    setting_type_t type;
    const char *def;       /* default as text; "" = unset */
    const char *range;     /* "lo..hi", "a|b|c" or "" */
    const char *component; /* "all", "host", "mpi", "agg", "mgr", ... */
    const char *doc;       /* one sentence */
} setting_t;

/* The table, indexed by setting_id_t. */
extern const setting_t setting_table[SETTING_COUNT];

/*
 * A parsed value. i holds INT, SIZE, BOOL (0/1), ENUM (the index) and
 * durations (nanoseconds); d holds REAL (and i as a double otherwise);
 * text is the text parsed (points into the environment or the table).
 * set is 0 for an unset value (empty text), whose numbers are 0.
 */
typedef struct {
    int set;
    int64_t i;
    double d;
    const char *text;
} setting_value_t;

/* The name of a type ("int", "size", ...). */
const char *setting_type_name(setting_type_t type);

/* The entry called name (INCOLL_...), or NULL. */
const setting_t *setting_find(const char *name);

/* The current text of id: the environment's value if set and non-empty,
 * else the default (maybe ""). Never NULL. */
const char *setting_text(setting_id_t id);

/* 1 when the environment sets id (non-empty), 0 when its default rules. */
int setting_in_env(setting_id_t id);

/*
 * The one parsing rule. Parses text as the value of setting s (its type
 * and range); on a bad value writes to err a message naming the setting,
 * the value and what is allowed, and returns INCOLL_ERR_CONFIG (*v_p is
 * then untouched). Empty text is an unset value.
 */
incoll_status_t setting_parse(const setting_t *s, const char *text,
                              setting_value_t *v_p, char *err, size_t len);

/* setting_parse() of id's current text. */
incoll_status_t setting_get(setting_id_t id, setting_value_t *v_p, char *err,
                            size_t len);

/*
 * Checks the current value of every setting whose component is in
 * components (a comma-separated list; "all" settings are always checked).
 * Returns INCOLL_OK, or INCOLL_ERR_CONFIG with the first bad one's
 * message in err.
 */
incoll_status_t settings_check(const char *components, char *err, size_t len);

/*
 * Typed values of id for code that runs after settings_check(): a bad
 * value (unchecked) is logged as an error naming it and the default is
 * used. setting_str() returns NULL for an unset setting; the numbers are 0
 * then. setting_ns/us/ms convert a duration.
 */
const char *setting_str(setting_id_t id);
int64_t setting_int(setting_id_t id);
uint64_t setting_u64(setting_id_t id);
int setting_bool(setting_id_t id);
int setting_enum(setting_id_t id);
double setting_real(setting_id_t id);
uint64_t setting_ns(setting_id_t id);
uint64_t setting_us(setting_id_t id);
uint64_t setting_ms(setting_id_t id);

/*
 * The table's default of id, parsed, whatever the environment says: for
 * the parameter structs of code that takes its values from its caller
 * (mgr_params_default(), place_params_default()), so that a default is
 * written once, here. Durations are in nanoseconds (.i).
 */
setting_value_t setting_default(setting_id_t id);

/*
 * Prints the settings of components (comma-separated; NULL: all) to out,
 * one block each: name, type and range, default, current value when
 * values is set, component, and the doc indented below. `incoll info` and
 * the daemons' --help print this.
 */
void settings_print(FILE *out, const char *components, int values);

#endif
