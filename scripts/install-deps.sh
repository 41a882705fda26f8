#!/usr/bin/env bash
# Installs the Debian packages incoll needs to build, test, benchmark and
# simulate. Safe to run again: it installs only what is missing.
# Usage: scripts/install-deps.sh [--check | --optional-ok]
#   --check        only lists what is missing (exit 1 if anything is)
#   --optional-ok  (`make test`) as non-root, missing optional packages are
#                  a note, not an error: the tests that need them skip
# `make demo` and `make test` run it before they build (Makefile).
set -euo pipefail

# Needed to build and run incoll at all.
required=(
  build-essential pkg-config make gcc
  iproute2 procps psmisc
  libsodium-dev
)
# Each gives a part: the fastest data-path MAC (OpenSSL's libcrypto),
# the MPI layer and its tests (Open MPI, MPICH,
# Fortran), the simulator, the plots, hpcc's test, the fuzz harnesses,
# mpi4py's test (Python programs use MPI_THREAD_MULTIPLE by default),
# CI's format check (`make format-check`, pinned to clang-format 14);
# for operating a fabric (docs/deployment.md): the manager's metrics
# endpoint (libmicrohttpd), Prometheus and promtool for its test, the Slurm
# plugin (libslurm-dev) and the Slurm and munge its test starts, systemd's
# systemd-analyze for the units' test.
optional=(
  libhwloc-dev
  libssl-dev
  libopenmpi-dev openmpi-bin
  mpich libmpich-dev
  gfortran
  libsimgrid-dev
  gnuplot-nox
  hpcc
  python3-mpi4py python3-numpy
  clang libclang-rt-14-dev
  clang-format-14
  libmicrohttpd-dev
  prometheus
  libslurm-dev slurm-wlm munge
  systemd
)

is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

missing=()
missing_required=()
for p in "${required[@]}"; do
  if ! is_installed "$p"; then
    missing+=("$p")
    missing_required+=("$p")
  fi
done
for p in "${optional[@]}"; do
  if ! is_installed "$p"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

if [ "${1:-}" = "--check" ]; then
  echo "install-deps: missing: ${missing[*]}"
  exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
  if [ "${1:-}" = "--optional-ok" ] && [ "${#missing_required[@]}" -eq 0 ]; then
    echo "install-deps: only optional packages are missing: going on without them" >&2
    exit 0
  fi
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
