#!/usr/bin/env bash
# check_internal_names.sh ARCHIVE HEADER_DIR...: the ms_ prefix is the public API's. Every global
# function or variable that ARCHIVE defines with a name starting ms_ must be a MS_API function of
# the headers in HEADER_DIR, or belong to the kernels (ms_k_*, ms_kc_*, ms_kcu_*: kernels/, never
# exported); an engine-internal name carries its folder's prefix instead (native_, nn_, grad_,
# cuda_, json_, ...; the Lua face's helpers bind_). Run by ctest on libmoonshard.a.
set -euo pipefail
archive=$1
shift

source "$(dirname "$0")/public_functions.sh"
public=$(public_functions "$@")
defined=$(nm --defined-only "$archive" 2>/dev/null | awk '$2 ~ /^[TDBRC]$/ {print $3}' | grep '^ms_' |
          grep -vE '^ms_(k|kc|kcu)_' | sort -u || true)
wrong=$(comm -13 <(echo "$public") <(echo "$defined") | sed '/^$/d')
if [ -n "$wrong" ]; then
  echo "$archive defines $(echo "$wrong" | wc -l) internal name(s) with the public ms_ prefix" \
       "(give them their folder's prefix, or declare them MS_API in a public header):" >&2
  echo "$wrong" | sed 's/^/  /' >&2
  exit 1
fi
echo "$archive: every ms_ name it defines is public ($(echo "$defined" | sed '/^$/d' | wc -l) names)"
