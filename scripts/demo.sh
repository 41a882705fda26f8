#!/usr/bin/env bash
# `make demo` (after scripts/install-deps.sh and `make all`): in-network
# allreduce against the host-based algorithms on the same links, as a
# table and a picture.
#
# As root it emulates a real fabric: 16 hosts on a 2-level tree (radix 4:
# 4 leaf switches under one root), one network namespace per host and per
# switch, veth links shaped to DEMO_RATE each way; without root it says so
# and uses the loopback fabric. It measures
#   1. ping-pong between two hosts of one leaf: what one link delivers;
#   2. allreduce from 8 B to 4 MiB, inc vs rd, ring and rabenseifner, side
#      by side, every result checked;
# prints both tables and the speedup per size, writes build/demo/*.csv and
# build/demo/allreduce.png, and tears everything down (also on ^C).
#
# Knobs: DEMO_HOSTS (16), DEMO_RADIX (4), DEMO_RATE (the default link rate
# of `incoll fabric up --emulate`: 800 Mbit/s shared by the hosts), DEMO_SIZES
# (8:4M), DEMO_ALGOS (below), DEMO_ITERS (empty: by size), DEMO_OUT
# (build/demo). Library knobs (INCOLL_*, see `incoll info`) pass through.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${INCOLL_BIN:-build/bin/incoll}
out=${DEMO_OUT:-build/demo}
hosts=${DEMO_HOSTS:-16}
radix=${DEMO_RADIX:-4}
sizes=${DEMO_SIZES:-8:4M}
# Recursive doubling sends the whole vector log2(P) times: a small-vector
# algorithm, never the best host-based one above a few hundred KiB, and the
# slowest part of the run. The demo stops it at 1 MiB to stay in time;
# DEMO_ALGOS=inc,rd,ring,rabenseifner runs it at every size.
algos=${DEMO_ALGOS:-inc,rd:1M,ring,rabenseifner}
start=$(date +%s)

if [ ! -x "$bin" ]; then
  echo "demo: $bin is missing: run \`make all\` first" >&2
  exit 1
fi
mkdir -p "$out"

fabric=()
if [ "$(id -u)" -eq 0 ]; then
  fabric=(--emulate)
  if [ -n "${DEMO_RATE:-}" ]; then
    fabric+=(--link-rate "$DEMO_RATE")
  fi
  echo "demo: emulated fabric: $hosts hosts, radix $radix, one network namespace per host and switch"
else
  echo "demo: not root, so no emulated links (network namespaces and tc need root):"
  echo "demo: using the loopback fabric instead; its numbers measure CPU, not links"
fi
iters=()
if [ -n "${DEMO_ITERS:-}" ]; then
  iters=(--iters "$DEMO_ITERS")
fi

echo
echo "== 1. ping-pong between two hosts under one leaf: the link reference"
"$bin" bench pingpong "${fabric[@]}" -n "$hosts" --radix "$radix" \
  --pair same-leaf --sizes 64K:4M --csv "$out/pingpong.csv"

echo
echo "== 2. allreduce, float32 sum, $hosts ranks: inc vs host-based ($algos), side by side"
"$bin" bench allreduce "${fabric[@]}" -n "$hosts" --radix "$radix" \
  --sizes "$sizes" --algos "$algos" "${iters[@]}" \
  --reference "$out/pingpong.csv" --csv "$out/allreduce.csv" \
  --plot "$out/allreduce.png" | tee "$out/allreduce.txt"

# The headline: the largest vector against the link and the hosts.
awk -F, '
  FNR == 1 { next }
  FILENAME ~ /pingpong/ { pp[$1] = $6; next }
  $1 == "inc" { inc[$2] = $7; sp[$2] = $17; best[$2] = $18; last = $2 }
  END {
    if (last == "") exit
    printf "\n== headline at %d bytes: inc %.2f MB/s", last, inc[last]
    if (last in pp && pp[last] > 0)
      printf " = %.0f%% of ping-pong over one link (%.2f MB/s)", 100 * inc[last] / pp[last], pp[last]
    printf "; %.2fx the best host-based algorithm (%s)\n", sp[last], best[last]
  }' "$out/pingpong.csv" "$out/allreduce.csv"

echo
echo "demo: wrote $out/allreduce.png, $out/allreduce.csv, $out/pingpong.csv in $(( $(date +%s) - start )) s"
echo "demo: rerun any point, e.g.: $bin bench allreduce ${fabric[*]} -n $hosts --radix $radix --sizes 1M:1M"
