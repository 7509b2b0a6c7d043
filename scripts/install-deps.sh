#!/usr/bin/env bash
# Installs what moonshard builds and tests with, from Debian 12's packages only. Idempotent and
# quiet when everything is already there; runs apt-get as root, or through sudo.
set -euo pipefail

packages=(
  build-essential cmake pkg-config   # the C toolchain and the build
  liblua5.4-dev lua5.4               # Lua 5.4: headers and library; lua5.4 tests the C module
  zlib1g-dev                         # gzip-compressed IDX files
  libopenmpi-dev openmpi-bin         # the process runtime and the mpi backend
  libreadline-dev                    # line editing and history in the REPL
  luarocks                           # tests/pkg: the rockspec installs into a tree (ctest pkg.luarocks)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
