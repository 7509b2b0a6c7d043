#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs moonshard's main job. Until the FSDP
# MNIST training (scripts/mnist_fsdp.lua) lands, that is the engine demo, scripts/demo.lua.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [ -f scripts/mnist_fsdp.lua ]; then
  exec build/moonshard scripts/mnist_fsdp.lua "$@"
fi
exec build/moonshard scripts/demo.lua "$@"
