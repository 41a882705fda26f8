#!/usr/bin/env bash
# Runs the collective tests of MPICH's test suite (test/mpi/coll of an
# MPICH source tree) through `incoll mpirun` on a loopback fabric, with the
# MPI layer at its defaults and without it (INCOLL_MPI_ENABLE=0), under
# Open MPI and under MPICH, and prints the counts side by side: a check
# that loading the layer makes no conforming program fail, hang or get a
# different answer. It downloads nothing: give it the tree.
#
#   scripts/mpich-coll-suite.sh [options] MPICH_SRC
#
#   MPICH_SRC        an MPICH source tree (a checkout of
#                    https://github.com/pmodels/mpich), or its test/mpi
#   --mpi M          openmpi, mpich or both (default both)
#   --layer L        on, off or both (default both)
#   --max-ranks N    run the testlist entries of at most N ranks (default 8)
#   --timeout SEC    per entry, unless its timeLimit= is longer (default 180)
#   --only REGEX     only the programs whose name matches (grep -E)
#   --max-mem GB     leave out entries whose mem= is more (default 4: the
#                    suite's gather_big wants 20 GB, coll_large's big
#                    counts 80-100 GB)
#   --out DIR        build and logs here (default build/mpich-coll)
#   --keep-going     build what compiles, do not stop at the first error of
#                    the utilities
#
# The suite is built without its autotools: the utilities (util/mtest*.c,
# util/dtypes.c, dtpools) and each program of coll/ are compiled with the
# MPI's own compiler wrapper (mpicc, mpicc.mpich) against a
# mpitestconf.h written here. Under Open MPI 4.1, whose persistent
# collectives are the MPIX_ ones of its pcollreq extension, the MPI 4.0
# names (MPI_Bcast_init, ...) are mapped onto them by a small included
# header, so that the p_* tests run there too; what else needs MPI 4.0
# does not compile and is counted under "build" (the same with and
# without the layer). Entries whose mem= is more than --max-mem are not
# run (counted under "not run").
#
# An entry passes as MPICH's own runtests judges it: the job exits 0 and
# prints a "No Errors" line and nothing else but incoll's own lines. The
# results go to OUT/results.tsv (mpi, layer, program, ranks, arguments,
# verdict, reason) and one log per run to OUT/logs/.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD

mpis=both
layers=both
max_ranks=8
timeout=180
max_mem=4
only=
out=$ROOT/build/mpich-coll
keep_going=0
src=

die() {
  echo "mpich-coll-suite: $*" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case $1 in
  --mpi) mpis=$2; shift 2 ;;
  --layer) layers=$2; shift 2 ;;
  --max-ranks) max_ranks=$2; shift 2 ;;
  --timeout) timeout=$2; shift 2 ;;
  --only) only=$2; shift 2 ;;
  --max-mem) max_mem=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --keep-going) keep_going=1; shift ;;
  -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
  -*) die "unknown option $1 (see --help)" ;;
  *) [ -z "$src" ] || die "one MPICH tree only"; src=$1; shift ;;
  esac
done
[ -n "$src" ] || die "usage: scripts/mpich-coll-suite.sh [options] MPICH_SRC (see --help)"
if [ -d "$src/test/mpi/coll" ]; then
  suite=$(cd "$src/test/mpi" && pwd)
elif [ -d "$src/coll" ] && [ -d "$src/util" ]; then
  suite=$(cd "$src" && pwd)
else
  die "$src: no test/mpi/coll in it (give the top of an MPICH source tree)"
fi
for f in coll/testlist.in util/mtest.c include/mpitest.h; do
  [ -f "$suite/$f" ] || die "$suite/$f is missing"
done
case $mpis in both) mpis="openmpi mpich" ;; openmpi | mpich) ;; *) die "--mpi: openmpi, mpich or both" ;; esac
case $layers in both) layers="on off" ;; on | off) ;; *) die "--layer: on, off or both" ;; esac
incoll=$ROOT/build/bin/incoll
[ -x "$incoll" ] || die "$incoll is missing: run make first"
mkdir -p "$out/logs" || die "cannot make $out"
out=$(cd "$out" && pwd)

# ---- build ----

# mpitestconf.h as the suite's configure would write it on Debian 12, and
# the header MPICH's autogen generates (MPIX prototypes: none needed).
write_conf() {
  local inc=$1
  cat >"$inc/mpitestconf.h" <<'EOF'
/* Written by incoll's scripts/mpich-coll-suite.sh in place of configure. */
#ifndef MPITESTCONF_H_INCLUDED
#define MPITESTCONF_H_INCLUDED
#define HAVE_STDARG_H 1
#define HAVE_STRING_H 1
#define HAVE_UNISTD_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STDINT_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_GETRUSAGE 1
#define HAVE_STRDUP 1
#define HAVE_USLEEP 1
#define HAVE_LONG_DOUBLE 1
#define HAVE_LONG_LONG 1
#define HAVE_LONG_LONG_INT 1
#define HAVE__BOOL 1
#define HAVE_FLOAT__COMPLEX 1
#define HAVE_DOUBLE__COMPLEX 1
#define HAVE_LONG_DOUBLE__COMPLEX 1
#define HAVE_MPI_WIN_CREATE 1
#define HAVE_MPI_INIT_THREAD 1
#define HAVE_MPI_IO 1
#define HAVE_PTHREAD_H 1
#define THREAD_PACKAGE_NONE 0
#define THREAD_PACKAGE_POSIX 1
#define THREAD_PACKAGE_SOLARIS 2
#define THREAD_PACKAGE_WIN 3
#define THREAD_PACKAGE_QTHREADS 4
#define THREAD_PACKAGE_ARGOBOTS 5
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX
#define POINTERINT_t long
#ifndef MPICH
/* Not MPICH: MPICH's MPIX_ extensions are not there. */
#define USE_STRICT_MPI 1
#endif
#endif
EOF
  : >"$inc/mtest_mpix.h"
  # Open MPI 4.1 has MPI 4.0's persistent collectives as MPIX_X_init
  # (mpi-ext.h): the suite calls them by their MPI 4.0 names.
  cat >"$inc/incoll_pcoll_names.h" <<'EOF'
/* Written by incoll's scripts/mpich-coll-suite.sh: MPI 4.0's names of the
 * persistent collectives onto Open MPI 4.1's MPIX_ ones. */
#include <mpi.h>
#if defined(OPEN_MPI) && MPI_VERSION < 4
#include <mpi-ext.h>
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define MPI_Allreduce_init MPIX_Allreduce_init
#define MPI_Reduce_init MPIX_Reduce_init
#define MPI_Bcast_init MPIX_Bcast_init
#define MPI_Barrier_init MPIX_Barrier_init
#define MPI_Allgather_init MPIX_Allgather_init
#define MPI_Allgatherv_init MPIX_Allgatherv_init
#define MPI_Gather_init MPIX_Gather_init
#define MPI_Gatherv_init MPIX_Gatherv_init
#define MPI_Scatter_init MPIX_Scatter_init
#define MPI_Scatterv_init MPIX_Scatterv_init
#define MPI_Alltoall_init MPIX_Alltoall_init
#define MPI_Alltoallv_init MPIX_Alltoallv_init
#define MPI_Alltoallw_init MPIX_Alltoallw_init
#define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#define MPI_Scan_init MPIX_Scan_init
#define MPI_Exscan_init MPIX_Exscan_init
#define MPI_Neighbor_allgather_init MPIX_Neighbor_allgather_init
#define MPI_Neighbor_allgatherv_init MPIX_Neighbor_allgatherv_init
#define MPI_Neighbor_alltoall_init MPIX_Neighbor_alltoall_init
#define MPI_Neighbor_alltoallv_init MPIX_Neighbor_alltoallv_init
#define MPI_Neighbor_alltoallw_init MPIX_Neighbor_alltoallw_init
#endif
#endif
EOF
}

# Builds the suite's utilities and the coll programs of one MPI into
# $out/$mpi; a program that does not compile has build/$prog.log only.
build_mpi() {
  local mpi=$1 cc=$2 dir=$out/$1
  local cflags="-O2 -g -w -I$dir/include -I$suite/include -I$suite/dtpools/include -include $dir/include/incoll_pcoll_names.h"
  mkdir -p "$dir/include" "$dir/obj" "$dir/coll" "$dir/build"
  write_conf "$dir/include"
  echo "== $mpi: building the suite's utilities with $cc"
  local objs=() f o
  for f in util/mtest.c util/mtest_common.c util/mtest_single.c util/dtypes.c \
    util/run_mpitests.c dtpools/src/*.c; do
    [ -f "$suite/$f" ] || continue
    o=$dir/obj/$(basename "${f%.c}").o
    if ! $cc $cflags -DDTP_MPI_DATATYPE= -c "$suite/$f" -o "$o" >"$o.log" 2>&1; then
      echo "   $f does not compile (log: $o.log)"
      [ "$keep_going" = 1 ] || exit 2
      continue
    fi
    objs+=("$o")
  done
  rm -f "$dir/obj/libmtest.a"
  ar rcs "$dir/obj/libmtest.a" "${objs[@]}" || exit 2
  local n=0 bad=0 prog
  for prog in $(entries | awk '{print $1}' | sort -u); do
    [ -f "$suite/coll/$prog.c" ] || continue
    n=$((n + 1))
    if $cc $cflags -o "$dir/coll/$prog" "$suite/coll/$prog.c" "$dir/obj/libmtest.a" -lm \
      >"$dir/build/$prog.log" 2>&1; then
      rm -f "$dir/build/$prog.log"
    else
      rm -f "$dir/coll/$prog"
      bad=$((bad + 1))
    fi
  done
  echo "   $n programs, $bad do not compile with $cc (logs in $dir/build)"
}

# The testlist's entries to run: "program ranks fields...", comments and
# blank lines dropped, at most max_ranks ranks, --only applied.
entries() {
  grep -v '^[[:space:]]*#' "$suite/coll/testlist.in" | awk -v max="$max_ranks" \
    'NF >= 2 && $2 ~ /^[0-9]+$/ && $2 <= max' |
    if [ -n "$only" ]; then awk -v re="$only" '$1 ~ re'; else cat; fi
}

# ---- run ----

# incoll's own lines in a job's output (the launcher's, the fabric it
# brings up and takes down, and the layer's log lines), which are not the
# program's stray output.
own_line='^(incoll( rank [0-9]+)?: |incoll mpirun: |fabric (up|down) in |  [a-z0-9]+ +level [0-9]+ |  manager  |  use it: )'

# Runs one entry; prints "verdict<TAB>reason".
run_entry() {
  local mpi=$1 layer=$2 prog=$3 np=$4 log=$5
  shift 5
  local args=() envs=() limit=$timeout mem= f
  for f in "$@"; do
    case $f in
    arg=*) args+=("${f#arg=}") ;;
    env=*) envs+=("${f#env=}") ;;
    timeLimit=*) [ "${f#timeLimit=}" -gt "$limit" ] && limit=${f#timeLimit=} ;;
    mem=*) mem=${f#mem=} ;;
    esac
  done
  if [ -n "$mem" ] && awk -v m="$mem" -v k="$max_mem" 'BEGIN { exit !(m > k) }'; then
    printf 'notrun\tneeds %s GB of memory (--max-mem %s)\n' "$mem" "$max_mem"
    return
  fi
  if [ ! -x "$out/$mpi/coll/$prog" ]; then
    printf 'fail\tbuild: does not compile\n'
    return
  fi
  local enable=1
  [ "$layer" = off ] && enable=0
  (cd "$suite/coll" &&
    env "${envs[@]}" INCOLL_MPI_ENABLE=$enable \
      "$incoll" mpirun --layer pmpi -n "$np" --mpi "$mpi" --timeout "$limit" -- \
      "$out/$mpi/coll/$prog" "${args[@]}") >"$log" 2>&1 </dev/null
  local rc=$?
  local stray
  stray=$(grep -v -E "$own_line" "$log" | grep -v -E '^[[:space:]]*No [Ee]rrors[[:space:]]*$' |
    grep -v -E '^[[:space:]]*$' | head -n 1)
  if [ "$rc" -eq 124 ]; then
    printf 'fail\ttimeout after %s s\n' "$limit"
  elif grep -q -E '^[[:space:]]*Test Skipped[[:space:]]*$' "$log" && [ "$rc" -eq 0 ]; then
    printf 'skip\tthe test skipped itself\n'
  elif [ "$rc" -ne 0 ]; then
    printf 'fail\texit %s: %s\n' "$rc" "$(grep -v -E '^[[:space:]]*$' "$log" | grep -v 'No Errors' | head -n 1 | cut -c1-160)"
  elif ! grep -q -E '^[[:space:]]*No [Ee]rrors[[:space:]]*$' "$log"; then
    printf 'fail\tno "No Errors": %s\n' "$(head -n 1 "$log" | cut -c1-160)"
  elif [ -n "$stray" ]; then
    printf 'fail\toutput besides "No Errors": %s\n' "$(echo "$stray" | cut -c1-160)"
  else
    printf 'pass\t\n'
  fi
}

results=$out/results.tsv
: >"$results"
for mpi in $mpis; do
  case $mpi in
  openmpi) cc=${MPICC:-mpicc} ;;
  mpich) cc=${MPICC_MPICH:-mpicc.mpich} ;;
  esac
  command -v "$cc" >/dev/null || die "$cc not found (scripts/install-deps.sh installs it)"
  build_mpi "$mpi" "$cc"
  for layer in $layers; do
    echo "== $mpi, layer $layer"
    i=0
    while read -r prog np rest; do
      i=$((i + 1))
      # shellcheck disable=SC2086
      set -- $rest
      log=$out/logs/$mpi-$layer-$(printf '%03d' $i)-$prog-$np.log
      verdict=$(run_entry "$mpi" "$layer" "$prog" "$np" "$log" "$@")
      v=${verdict%%$'\t'*}
      why=${verdict#*$'\t'}
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mpi" "$layer" "$prog" "$np" "$rest" "$v" "$why" >>"$results"
      printf '   %-6s %-22s %2s %-28s %s\n' "$(echo "$v" | tr a-z A-Z)" "$prog" "$np" "$rest" "$why"
    done < <(entries)
  done
done

# ---- summary ----
echo "== summary (entries of at most $max_ranks ranks of $suite/coll/testlist.in)"
printf '%-8s %-6s %6s %6s %6s %8s %6s   %s\n' mpi layer pass fail skip "not run" build "timeouts"
for mpi in $mpis; do
  for layer in $layers; do
    awk -F'\t' -v m="$mpi" -v l="$layer" '$1 == m && $2 == l {
        n[$6]++; if ($7 ~ /^build/) b++; if ($7 ~ /^timeout/) t++ }
      END { printf "%-8s %-6s %6d %6d %6d %8d %6d   %d\n", m, l, n["pass"], n["fail"],
            n["skip"], n["notrun"], b, t }' "$results"
  done
done
if [ "$layers" = "on off" ]; then
  echo "== entries whose verdict differs with and without the layer"
  awk -F'\t' '{ k = $1 "\t" $3 "\t" $4 "\t" $5; if ($2 == "on") on[k] = $6 "\t" $7; else off[k] = $6 }
    END { for (k in on) { split(on[k], a, "\t"); if (a[1] != off[k]) {
            split(k, f, "\t"); printf "   %-8s %-20s %2s %-26s on: %s%s, off: %s\n",
            f[1], f[2], f[3], f[4], a[1], a[2] == "" ? "" : " (" a[2] ")", off[k] } } }' "$results" | sort
fi
echo "results: $results; logs: $out/logs"
