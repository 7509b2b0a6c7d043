#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs moonshard's main job: the seed's FSDP
# MNIST training on 2 ranks (scripts/mnist_fsdp.lua). Arguments go to the script (--epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
scripts/fetch-mnist.sh data
exec build/moonshard scripts/mnist_fsdp.lua "$@"
