#!/usr/bin/env bash
# check_packaging.sh CASE SOURCE_DIR BUILD_DIR: one packaging check of issue 21, each in its own
# temporary directory (removed at the end); exit 77 (ctest's skip) when a tool it needs is missing.
#   static_embed    the static recipe of examples/embed/README.md against an installed moonshard.pc
#   uninstalled_pc  pkg-config --with-path BUILD_DIR (moonshard-uninstalled.pc) builds and runs a host
#   find_package    a tiny CMake project (tests/pkg/find_package) against an install: shared and static
#   luarocks        `luarocks make --tree T` of the rockspec, then a stock lua5.4 requires moonshard
#                   and moonshard.nn from T. CMake's build is the one ctest runs in (a stand-in for
#                   cmake given to luarocks installs it); MS_TEST_LUAROCKS_BUILD=1 builds for real.
#   no_cuda_needed  no libcudart, libcudnn or libnccl among the NEEDED of the libraries and programs
#   x86_absent_list kernels/cpu/x86_absent.h names exactly the functions the x86 bodies define (an
#                   x86 build's archive), so a build without them (MS_X86_KERNELS=OFF) links
set -euo pipefail
case_name=$1 src=$(cd "$2" && pwd) build=$(cd "$3" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ms-pkg-$case_name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
skip() { echo "skipped: $*"; exit 77; }
need() { for t in "$@"; do command -v "$t" >/dev/null 2>&1 || skip "$t not found"; done; }
cc=${CC:-cc}

install_to() { cmake --install "$build" --prefix "$1" >/dev/null; }

case $case_name in
static_embed)
  need "$cc" pkg-config cmake
  install_to "$tmp/prefix"
  export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
  # the recipe, as examples/embed/README.md gives it
  "$cc" -std=c11 -O2 "$src/examples/embed/embed_example.c" -o "$tmp/embed_example" \
    $(pkg-config --cflags moonshard) \
    "$(pkg-config --variable=libdir moonshard)/libmoonshard.a" \
    $(pkg-config --static --libs moonshard)
  if readelf -d "$tmp/embed_example" | grep -q 'NEEDED.*libmoonshard'; then
    echo "the static recipe linked libmoonshard.so"; exit 1
  fi
  "$tmp/embed_example"
  ;;
uninstalled_pc)
  need "$cc" pkg-config
  [ "$(pkg-config --with-path "$build" --variable=libdir moonshard)" = "$build" ] \
    || { echo "pkg-config --with-path $build did not pick moonshard-uninstalled.pc"; exit 1; }
  "$cc" -std=c11 -O2 "$src/tests/pkg/host.c" -o "$tmp/host" $(pkg-config --with-path "$build" --cflags --libs moonshard)
  (cd "$tmp" && env -u LD_LIBRARY_PATH ./host) # found through the .pc's rpath
  ;;
find_package)
  need "$cc" cmake pkg-config
  install_to "$tmp/prefix"
  cmake -S "$src/tests/pkg/find_package" -B "$tmp/host" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
  cmake --build "$tmp/host" -j2 >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
  "$tmp/host/host_shared"
  "$tmp/host/host_static"
  ;;
luarocks)
  need luarocks lua5.4 cmake
  rockspec=$(ls "$src"/moonshard-*.rockspec)
  luarocks lint "$rockspec"
  mkdir -p "$tmp/src"
  cp "$rockspec" "$tmp/src/"
  luarocks_args=(--lua-version 5.4 make --tree "$tmp/tree" "$(basename "$rockspec")")
  if [ "${MS_TEST_LUAROCKS_BUILD:-0}" = 1 ]; then
    tar -C "$src" --exclude=./build --exclude='./build*' --exclude=./.git -cf - . | tar -C "$tmp/src" -xf -
    # luarocks runs `cmake --build` without -j: CMake takes the level from the environment
    (cd "$tmp/src" && CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} luarocks "${luarocks_args[@]}")
  else
    # luarocks runs "$CMAKE -H. -Bbuild.luarocks -DVAR=VALUE...", "$CMAKE --build build.luarocks"
    # and "$CMAKE --build build.luarocks --target install": the stand-in keeps the rockspec's
    # install folders, builds nothing, and installs BUILD_DIR there as CMake would with them
    # (then luarocks deploys $(PREFIX)/lib, as it does after a real build).
    luadir=$(sed -n 's/^MS_INSTALL_LUADIR:[A-Z]*=//p' "$build/CMakeCache.txt")
    cmoddir=$(sed -n 's/^MS_INSTALL_CMODDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
    cat >"$tmp/cmake-standin" <<STANDIN
#!/usr/bin/env bash
set -euo pipefail
if [ "\$1" = -H. ]; then
  mkdir -p build.luarocks
  echo "CMAKE_INSTALL_LIBDIR=lib" >build.luarocks/vars
  for a in "\$@"; do
    case \$a in -DMS_INSTALL_LUADIR=*|-DMS_INSTALL_CMODDIR=*|-DCMAKE_INSTALL_PREFIX=*|-DCMAKE_INSTALL_LIBDIR=*)
      v=\${a#-D}; echo "\${v%%=*}='\${v#*=}'" ;; esac
  done >>build.luarocks/vars
  grep -q MS_INSTALL_LUADIR build.luarocks/vars && grep -q MS_INSTALL_CMODDIR build.luarocks/vars
elif [ "\$*" = "--build build.luarocks --target install --config Release" ]; then
  . build.luarocks/vars
  # each thing where CMake, configured with the rockspec's variables, would install it
  cmake --install "$build" --prefix "$tmp/stage" >/dev/null
  mkdir -p "\$MS_INSTALL_LUADIR" "\$MS_INSTALL_CMODDIR" "\$CMAKE_INSTALL_PREFIX/\$CMAKE_INSTALL_LIBDIR"
  cp -R "$tmp/stage/$luadir/." "\$MS_INSTALL_LUADIR/"
  cp "$tmp/stage/$cmoddir/moonshard.so" "\$MS_INSTALL_CMODDIR/"
  rm -rf "$tmp/stage/$luadir" "$tmp/stage/$cmoddir"
  cp -a "$tmp/stage/lib/." "\$CMAKE_INSTALL_PREFIX/\$CMAKE_INSTALL_LIBDIR/"
  cp -a "$tmp/stage/include" "$tmp/stage/bin" "\$CMAKE_INSTALL_PREFIX/"
fi
STANDIN
    chmod +x "$tmp/cmake-standin"
    # luarocks reads the system configuration, then this one (LUAROCKS_CONFIG adds to it in 3.x)
    echo "variables = { CMAKE = '$tmp/cmake-standin' }" >"$tmp/config.lua"
    (cd "$tmp/src" && LUAROCKS_CONFIG="$tmp/config.lua" luarocks "${luarocks_args[@]}")
  fi
  [ -f "$tmp/tree/lib/lua/5.4/moonshard.so" ] || { echo "no moonshard.so in the tree's lib/lua/5.4"; exit 1; }
  [ -f "$tmp/tree/share/lua/5.4/moonshard/nn.lua" ] || { echo "no moonshard/nn.lua in the tree's share/lua/5.4"; exit 1; }
  eval "$(luarocks --lua-version 5.4 --tree "$tmp/tree" path)"
  # a stock lua5.4, the submodule first (it requires the C module itself), nothing else on the path
  (cd "$tmp" && TREE="$tmp/tree" lua5.4 -e '
    local nn = require "moonshard.nn"
    local ms = require "moonshard"
    assert(package.searchpath("moonshard", package.cpath):find(os.getenv("TREE"), 1, true), "moonshard.so not from the tree")
    ms.manual_seed(0)
    local y = nn.Linear(3, 2)(ms.ones(4, 3))
    assert(y:size(1) == 4 and y:size(2) == 2)
    print("stock lua5.4: ok", y:size())' )
  ;;
no_cuda_needed)
  need readelf
  bad=0
  for f in "$build/libmoonshard.so" "$build/moonshard.so" "$build/moonshard"; do
    if readelf -d "$f" | grep -E 'NEEDED.*lib(cudart|cudnn|nccl|cublas)'; then echo "$f needs the libraries above"; bad=1; fi
  done
  exit $bad
  ;;
x86_absent_list)
  need nm
  nm -A --defined-only -g "$build/libmoonshard.a" | grep -E '_(avx2|avx512|f16c)\.c\.o: *[0-9a-f]* [TDRB] ' \
    | awk '{print $NF}' | sort -u >"$tmp/defined"
  sed -n 's/^#pragma weak //p' "$src/kernels/cpu/x86_absent.h" | sort -u >"$tmp/listed"
  [ -s "$tmp/defined" ] || { echo "no x86 body found in $build/libmoonshard.a"; exit 1; }
  diff "$tmp/defined" "$tmp/listed" || { echo "x86_absent.h and the x86 bodies differ (< defined, > listed)"; exit 1; }
  ;;
*) echo "check_packaging.sh: unknown case '$case_name'"; exit 2 ;;
esac
