#!/bin/bash
# Both MPI front ends (libincoll_mpi and coll/incoll) use libincoll through
# its public API only (docs/ompi.md, "Built on the public API"):
#  - no file of src/mpi or src/ompi includes a header of libincoll's
#    insides (src/common, src/host, ...); common/hashtab.h, whose .c the
#    layer compiles in (a leaf of the C library alone), is the one leaf
#    utility allowed;
#  - each built front end needs the shared libincoll (DT_NEEDED), contains
#    none of libincoll's code (it defines neither incoll_init_version nor
#    log_emit), and every incoll_ symbol it takes from outside is one that
#    libincoll.so exports.
# Usage: public_api.sh SRCDIR LIBDIR. One line per violation; exit 1 if
# any. Last line: "checked: N front ends".
set -u
src=$1 lib=$2
bad=0 n=0

inside=$(cd "$src/src" && ls -d */ | tr -d / | grep -vx 'mpi\|ompi' | paste -sd'|')
while IFS= read -r hit; do
    case "$hit" in *'"common/hashtab.h"'*) continue ;; esac
    echo "violation: $hit (a libincoll internal header)"
    bad=1
done < <(cd "$src" && grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"($inside)/" src/mpi/* src/ompi/*)

public=$(nm -D --defined-only "$lib/libincoll.so" | awk '{print $3}' | sort -u)
if [ -z "$public" ]; then
    echo "violation: $lib/libincoll.so exports nothing"
    exit 1
fi
for fe in "$lib/libincoll_mpi.so" "$lib/libincoll_mpi_mpich.so" "$lib/openmpi/mca_coll_incoll.so"; do
    [ -e "$fe" ] || continue
    n=$((n + 1))
    if ! readelf -d "$fe" | grep -q 'NEEDED.*\[libincoll\.so\.'; then
        echo "violation: $fe does not link the shared libincoll"
        bad=1
    fi
    for sym in $(nm --defined-only "$fe" 2>/dev/null | awk '{print $3}' |
        grep -xE 'incoll_init_version|log_emit|settings_check|fabric_conf_load'); do
        echo "violation: $fe contains libincoll's $sym (libincoll linked in)"
        bad=1
    done
    for sym in $(nm -D --undefined-only "$fe" | awk '{print $2}' | sed 's/@.*//' |
        grep '^incoll_' | sort -u | comm -23 - <(echo "$public")); do
        echo "violation: $fe uses $sym, not of libincoll's public API"
        bad=1
    done
done
echo "checked: $n front ends"
exit $bad
