# public_functions.sh (sourced by the checks of tests/exports/): public_functions DIR... prints the
# functions the headers in the DIRs mark MS_API (moonshard/export.h), one per line, sorted. The
# declaration's first line holds "MS_API <type> <name>(" (the marking's rule).
public_functions() {
  local headers=() dir
  for dir in "$@"; do headers+=("$dir"/*.h); done
  cat "${headers[@]}" | sed -n 's/^MS_API [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' | sort -u
}
