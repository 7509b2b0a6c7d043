#!/usr/bin/env bash
# check_exports.sh LIBRARY HEADER_DIR...: the functions LIBRARY exports (nm -D --defined-only)
# must be exactly those the headers in HEADER_DIR mark MS_API (moonshard/export.h): an internal
# function exported by mistake fails, and so does a public one that is missing (defined where
# its header is not included, hence hidden). Run by ctest on libmoonshard.so and moonshard.so.
set -euo pipefail
lib=$1
shift

source "$(dirname "$0")/public_functions.sh"
expected=$(public_functions "$@")
# Symbols the linker itself defines in every shared object are not ours.
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' |
           grep -vxE '_init|_fini|_edata|_end|__bss_start' | sort -u)
if [ -z "$expected" ]; then
  echo "check_exports: no MS_API declaration found in $*" >&2
  exit 1
fi

extra=$(comm -13 <(echo "$expected") <(echo "$exported"))
missing=$(comm -23 <(echo "$expected") <(echo "$exported"))
status=0
if [ -n "$extra" ]; then
  echo "$lib exports $(echo "$extra" | wc -l) symbol(s) no public header declares MS_API" \
       "(internal: leave them hidden, or declare them in a public header):" >&2
  echo "$extra" | sed 's/^/  /' >&2
  status=1
fi
if [ -n "$missing" ]; then
  echo "$lib lacks $(echo "$missing" | wc -l) MS_API function(s) of the public headers" \
       "(is the header included where each is defined?):" >&2
  echo "$missing" | sed 's/^/  /' >&2
  status=1
fi
[ $status -eq 0 ] && echo "$lib: exports exactly the $(echo "$expected" | wc -l) public functions"
exit $status
