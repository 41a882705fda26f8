#!/bin/sh
# osu_compare.sh DIR NP ROUNDS [MAX_BYTES [ITERS]]: osu_coll on the running
# fabric in DIR (e.g. `incoll fabric up --emulate`), NP ranks, in jobs that
# alternate, ROUNDS times: coll/incoll (stock Open MPI, the component found
# through mca_base_component_path, nothing preloaded), the PMPI layer
# (libincoll_mpi.so preloaded) and Open MPI alone. Prints each job's rows
# as "<config> <coll> <bytes> <us>" and then, per collective and size, the
# mean over the rounds of each configuration and the ratios. STAT=avg_us
# (default, OSU's average) or med_us (each rank's median).
# Run from the source tree after `make tests`.
set -e
dir=$1 np=$2 rounds=$3 max=${4:-1048576} iters=${5:-20} stat=${STAT:-avg_us}
bin=build/bin prog=build/tests/ompi/osu_coll
path="$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p'):$PWD/build/lib/openmpi"
out=$(mktemp)
for r in $(seq "$rounds"); do
    for cfg in component layer ompi; do
        case $cfg in
        component) OMPI_MCA_mca_base_component_path=$path \
                   "$bin/incoll" mpirun -n "$np" --fabric "$dir" --no-preload --timeout 600 -- "$prog" "$max" "$iters" ;;
        layer)     "$bin/incoll" mpirun --layer pmpi -n "$np" --fabric "$dir" --timeout 600 -- "$prog" "$max" "$iters" ;;
        ompi)      OMPI_MCA_coll_incoll_enable=0 \
                   "$bin/incoll" mpirun -n "$np" --fabric "$dir" --no-preload --timeout 600 -- "$prog" "$max" "$iters" ;;
        esac 2>&1 | awk -v c=$cfg -v st="$stat" '/^osu_coll: ok/ {ok=1} /avg_us/ {for (i = 4; i < NF; i++) if ($i == st) print c, $2, $3, $(i + 1)} END {if (!ok) print c, "FAILED"}' | tee -a "$out"
    done
done
awk '$2 != "FAILED" {k=$2" "$3; s[k" "$1]+=$4; n[k" "$1]++; keys[k]=1}
     END {printf "%-10s %8s %12s %12s %12s %10s %10s\n", "coll", "bytes", "component", "layer", "ompi", "comp/layer", "comp/ompi";
          for (k in keys) {c=s[k" component"]/n[k" component"]; l=s[k" layer"]/n[k" layer"]; o=s[k" ompi"]/n[k" ompi"];
          split(k, a, " "); printf "%-10s %8d %12.1f %12.1f %12.1f %10.2f %10.2f\n", a[1], a[2], c, l, o, c/l, c/o}}' "$out" | sort -k1,1 -k2,2n
rm -f "$out"
