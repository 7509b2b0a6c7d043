#!/usr/bin/env bash
# Configures and builds moonshard into build/ (warnings are errors, as in CI). Extra arguments
# go to the CMake configure step, e.g. scripts/build.sh -DMS_SANITIZE=address,undefined
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMS_WERROR=ON "$@" >/dev/null
cmake --build build -j"$(nproc)"
