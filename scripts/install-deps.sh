#!/usr/bin/env bash
# Installs the Debian packages incoll needs to build, test, benchmark and
# simulate. Safe to run again: it installs only what is missing.
# Usage: scripts/install-deps.sh [--check]   (--check only lists what is missing)
set -euo pipefail

pkgs=(
  build-essential pkg-config make gcc
  iproute2 procps psmisc
  libsodium-dev
  libhwloc-dev
  libopenmpi-dev openmpi-bin
  mpich libmpich-dev
  gfortran
  libsimgrid-dev
  gnuplot-nox
  hpcc
  clang libclang-rt-14-dev
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
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
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
