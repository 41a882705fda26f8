#!/bin/sh
# osu_targets.sh: the component-against-layer-against-Open-MPI measurement
# of docs/ompi.md ("Measured"), on emulated fabrics of each size in HOSTS:
# for each, `incoll fabric up --emulate --hosts N --radix 4` (host links
# 100 Mbit/s at 8 hosts, 50 at 16: emu_default_link_rate), then
# tests/ompi/osu_compare.sh with N ranks, then `incoll fabric down` (also
# when interrupted). Settings, from the environment:
#   HOSTS="8 16"  ROUNDS=3  MAX=16384  ITERS=100  STAT=med_us
#   LINK_RATE=    (empty: the default for the size)
#   ORDER="component layer ompi" ROTATE=1  (osu_compare.sh: each round
#                 starts one configuration further along ORDER)
#   GAP_US=0      (osu_compare.sh: back to back; auto: a pause at the start
#                 of each iteration that gives the links back the tokens of
#                 the largest call)
#   OSU_COLL_ONLY=barrier (osu_coll: one collective alone; OSU_COLL_MIN,
#                 OSU_COLL_COUNTS likewise reach every job)
# Any INCOLL_* in the environment reaches the jobs (INCOLL_TUNE_FILE=none:
# the PMPI layer without its selection table). Run from the source tree
# after `make tests`, as root (network namespaces). Exits 1 if a job failed.
set -e
hosts=${HOSTS:-8 16} rounds=${ROUNDS:-3} max=${MAX:-16384} iters=${ITERS:-100}
export STAT=${STAT:-med_us}
bin=build/bin
[ -x "$bin/incoll" ] && [ -x build/tests/ompi/osu_coll ] &&
    [ -f build/lib/openmpi/mca_coll_incoll.so ] ||
    { echo "osu_targets: run \`make tests\` first (needs Open MPI's headers)" >&2; exit 2; }
dir=
down() { [ -n "$dir" ] && "$bin/incoll" fabric down --dir "$dir" >/dev/null 2>&1 || true; }
trap 'down' EXIT
trap 'exit 130' INT TERM
rc=0
for n in $hosts; do
    dir=$(mktemp -d /tmp/osu-targets-$n.XXXXXX)
    echo "== $n hosts, $rounds rounds, to $max B, $iters calls a size ($STAT), load: $(cut -d' ' -f1-3 /proc/loadavg)"
    "$bin/incoll" fabric up --emulate --hosts "$n" --radix 4 --dir "$dir" \
        ${LINK_RATE:+--link-rate "$LINK_RATE"}
    tests/ompi/osu_compare.sh "$dir" "$n" "$rounds" "$max" "$iters" || rc=1
    down
    echo "(its logs: $dir)"
    dir=
done
exit $rc
