#!/bin/sh
# osu_compare.sh DIR NP ROUNDS [MAX_BYTES [ITERS]]: osu_coll on the running
# fabric in DIR (e.g. `incoll fabric up --emulate`), NP ranks, in jobs that
# alternate, ROUNDS times: coll/incoll (stock Open MPI, the component found
# through mca_base_component_path, nothing preloaded), the PMPI layer
# (libincoll_mpi.so preloaded) and Open MPI alone. Prints each job's rows
# as "<config> <coll> <bytes> <us>", each job's rank-0 counts of where its
# calls ran ("<config> where ..."), on an emulated fabric how often the
# link shapers held a packet of the job for want of tokens ("<config>
# shaper sent=N waited=M", tc's overlimits), and then, per collective and size, the
# mean over the rounds of each configuration and the ratios (component
# against layer, and each front end against Open MPI alone). STAT=avg_us
# (default, OSU's average), med_us (each rank's median) or iter_med_us
# (the median of a whole iteration: untimed barrier, call, check). A job that
# fails prints "<config> FAILED" and the script exits 1 after the table.
# ORDER="component layer ompi" (the default) is the first round's order;
# each later round starts one further along it (ROTATE=0: the same order
# every round), so that each configuration runs after each other one as
# often, and whatever a job leaves behind on the machine or the fabric
# weighs on all three alike.
# Run from the source tree after `make tests`; tests/ompi/osu_targets.sh
# brings the fabrics up and down around it.
set -e
dir=$1 np=$2 rounds=$3 max=${4:-1048576} iters=${5:-20} stat=${STAT:-avg_us}
bin=build/bin prog=build/tests/ompi/osu_coll
if [ -z "$dir" ] || [ -z "$np" ] || [ -z "$rounds" ]; then
    echo "usage: [STAT=avg_us|med_us|iter_med_us] [GAP_US=auto|N] [ORDER=...] [ROTATE=0|1]" \
        "$0 DIR NP ROUNDS [MAX_BYTES [ITERS]]" >&2
    exit 2
fi
# The emulated fabric's shapers (tc tbf on every link, both ways), summed:
# "<packets sent> <overlimits>", an overlimit being a time a shaper held
# its next packet for want of tokens. Nothing for another fabric.
shapers() {
    prefix=$(sed -n 's/^emu prefix=\([^ ]*\).*/\1/p' "$dir/emu.state" 2>/dev/null || true)
    [ -n "$prefix" ] || return 0
    for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix-"); do
        ip netns exec "$ns" tc -s qdisc show
    done 2>/dev/null | awk '/ Sent / {for (i = 1; i < NF; i++) {
            if ($i == "pkt") p += $(i - 1); if ($i == "overlimits") o += $(i + 1)}}
        END {print p + 0, o + 0}'
}
# The pause at the start of each iteration (osu_coll's OSU_COLL_GAP_US).
# An emulated link is a token bucket (emu.c: 1 ms of the link's rate, at
# least two frames): a packet that finds tokens passes at once, one that
# does not waits for them. Back to back, the iterations of a call whose
# bytes need more tokens than the rest of its iteration lasts drain the
# bucket, and the wait for tokens then falls on the call or on the untimed
# barrier before it as it happens: the call's time says how long the
# barrier was, not what the call costs. GAP_US=auto sleeps long enough for
# a host link to get back the tokens of the largest call (up to a full
# bucket), so that every call finds its tokens and its time is its own;
# GAP_US=N sleeps N us; GAP_US=0 (the default) runs the iterations back to
# back. The pause is not the default: after it, 8 ranks that busy-poll on
# 2 cores leave the barrier far apart, and a small call that Open MPI runs
# measured 2.8-3.2 ms instead of 140-170 us (docs/ompi.md).
gap=${GAP_US:-0}
if [ "$gap" = auto ]; then
    gap=$(awk -v max="$max" '/^emu prefix=/ {
            for (i = 2; i <= NF; i++) {split($i, kv, "="); f[kv[1]] = kv[2]}
            if (f["rate"] <= 0) exit
            bucket = f["rate"] / 8000; if (bucket < 2 * (f["mtu"] + 64)) bucket = 2 * (f["mtu"] + 64)
            need = max + 1024; if (need > bucket) need = bucket
            printf "%d\n", int(need * 8e6 / f["rate"]) + 1; exit}' "$dir/emu.state" 2>/dev/null || true)
    gap=${gap:-0}
fi
export OSU_COLL_GAP_US="$gap"
echo "osu_compare: $np ranks, a pause of $gap us at the start of each iteration (GAP_US)"
path="$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p'):$PWD/build/lib/openmpi"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
order=${ORDER:-component layer ompi}
for r in $(seq "$rounds"); do
    for cfg in $order; do
        before=$(shapers)
        case $cfg in
        component) OMPI_MCA_mca_base_component_path=$path OMPI_MCA_coll_incoll_stats=1 \
                   "$bin/incoll" mpirun -n "$np" --fabric "$dir" --no-preload --timeout 600 -- "$prog" "$max" "$iters" ;;
        layer)     INCOLL_MPI_STATS=1 \
                   "$bin/incoll" mpirun --layer pmpi -n "$np" --fabric "$dir" --timeout 600 -- "$prog" "$max" "$iters" ;;
        ompi)      OMPI_MCA_coll_incoll_enable=0 \
                   "$bin/incoll" mpirun -n "$np" --fabric "$dir" --no-preload --timeout 600 -- "$prog" "$max" "$iters" ;;
        esac 2>&1 | awk -v c=$cfg -v st="$stat" '
            /^osu_coll: ok/ {ok=1}
            /avg_us/ {for (i = 4; i < NF; i++) if ($i == st) print c, $2, $3, $(i + 1)}
            /coll\/incoll: stats rank 0:|mpi: stats rank 0:/ {sub(/.*stats rank 0: */, ""); print c, "where", $0}
            END {if (!ok) print c, "FAILED"}' | tee -a "$out"
        # how often the shapers held the job's packets for tokens: a call
        # that waits for them is bound by the link's rate, and its time
        # then depends on how fast the rest of its iteration was
        [ -z "$before" ] || echo "$before $(shapers)" |
            awk -v c=$cfg '{print c, "shaper", "sent=" $3 - $1, "waited=" $4 - $2}' |
            tee -a "$out"
    done
    # the next round starts with this one's second configuration
    [ "${ROTATE:-1}" = 0 ] || order="${order#* } ${order%% *}"
done
awk '$2 != "FAILED" && $2 != "where" && $2 != "shaper" {k=$2" "$3; s[k" "$1]+=$4; n[k" "$1]++; keys[k]=1}
     function mean(k, c) {return n[k" "c] ? s[k" "c]/n[k" "c] : 0}
     function ratio(a, b) {return a > 0 && b > 0 ? sprintf("%10.2f", a/b) : sprintf("%10s", "-")}
     END {for (k in keys) {c=mean(k, "component"); l=mean(k, "layer"); o=mean(k, "ompi");
          split(k, a, " "); printf "%-10s %8d %12.1f %12.1f %12.1f %s %s %s\n", a[1], a[2], c, l, o, ratio(c, l), ratio(c, o), ratio(l, o)}}' "$out" |
    sort -k1,1 -k2,2n > "$out.table"
printf "%-10s %8s %12s %12s %12s %10s %10s %10s\n" coll bytes component layer ompi comp/layer comp/ompi layer/ompi
cat "$out.table"
rm -f "$out.table"
! grep -q ' FAILED$' "$out"
