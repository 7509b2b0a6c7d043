#!/usr/bin/env bash
# Builds the moonshard executable with AddressSanitizer and UndefinedBehaviorSanitizer (CUDA off,
# nothing but the executable) and runs the sanitizer programs tests/sanitize/*.lua under it. Any
# sanitizer report stops the program with a non-zero exit. ctest's label "sanitize" runs the same
# steps (tests/CMakeLists.txt) with each program's default seed and budget; this script is for
# long local runs.
#
#   scripts/sanitize.sh [--dir DIR] [--seed S] [--cases N] [--build-only | --no-build] [NAME...]
#
#   --dir DIR     the build tree (default build/sanitize, the one ctest uses)
#   --seed S      MS_FUZZ_SEED for every program (default: each program's own, 1)
#   --cases N     MS_FUZZ_CASES for every program (default: each program's own budget)
#   --build-only  configure and build, run nothing;  --no-build: run without building
#   NAME          programs to run, e.g. arg_sweep fuzz_idx (default: every tests/sanitize/*.lua)
#
# Example: scripts/sanitize.sh --seed 7 --cases 200000 fuzz_safetensors
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '8,16p' "$0" | sed 's/^# \{0,1\}//'; }
dir=build/sanitize build=1 run=1 names=()
while (($#)); do
  case "$1" in
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    --seed) export MS_FUZZ_SEED=${2:?--seed needs a value}; shift 2 ;;
    --cases) export MS_FUZZ_CASES=${2:?--cases needs a value}; shift 2 ;;
    --build-only) run=0; shift ;;
    --no-build) build=0; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "sanitize.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done

if ((build)); then
  # RelWithDebInfo: optimised enough for the fuzzers' budgets, with lines in the reports.
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMS_SANITIZE=address,undefined -DMS_CUDA=OFF \
        -DBUILD_TESTING=OFF >/dev/null
  cmake --build "$dir" -j"$(nproc)" --target ms_exe >/dev/null
fi
((run)) || exit 0

# Halt at the first report of either sanitizer and fail. A huge allocation is refused by the
# engine (MS_MAX_ALLOC_BYTES caps one allocation) and by ASan's allocator (returns NULL, which
# the callers report as out of memory) rather than aborting the process.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=0:exitcode=99:detect_leaks=1:allocator_may_return_null=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:exitcode=98}
export LSAN_OPTIONS=${LSAN_OPTIONS:-exitcode=97}
export MS_MAX_ALLOC_BYTES=${MS_MAX_ALLOC_BYTES:-2147483648}
export LUA_PATH="tests/lua/?.lua;;"

if ((${#names[@]} == 0)); then
  for f in tests/sanitize/*.lua; do names+=("$(basename "$f" .lua)"); done
fi
failed=0
for name in "${names[@]}"; do
  echo "== sanitize: $name"
  if ! "$dir/moonshard" "tests/sanitize/$name.lua"; then
    echo "== sanitize: $name FAILED" >&2
    failed=1
  fi
done
exit "$failed"
