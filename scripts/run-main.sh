#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs moonshard's main job: the FSDP MNIST
# training (scripts/mnist_fsdp.lua) once it lands; until then the seed's Net trained on MNIST in
# one process (scripts/mnist.lua). Arguments go to the script (e.g. --epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/fetch-mnist.sh data
if [ -f scripts/mnist_fsdp.lua ]; then
  exec build/moonshard scripts/mnist_fsdp.lua "$@"
fi
exec build/moonshard scripts/mnist.lua "$@"
