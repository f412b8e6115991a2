#!/usr/bin/env bash
# Installs the build into a temporary prefix, then moves the tree (an install must not depend
# on where it was made), builds and runs a consumer through the CMake package and through the
# installed rmacc.pc as it is, and runs the installed rmacc-perf without LD_LIBRARY_PATH.
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/first" >/dev/null
mv "$tmp/first" "$tmp/prefix"
cmake -S "$src" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/consumer/consumer_cmake"
pc=$(find "$tmp/prefix" -name rmacc.pc | head -1)
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs rmacc)
cc "$src/consumer.c" $flags -o "$tmp/consumer_pc"
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir rmacc)
LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" "$tmp/consumer_pc"
if [ -x "$tmp/prefix/bin/rmacc-perf" ]; then
  env -u LD_LIBRARY_PATH "$tmp/prefix/bin/rmacc-perf" --help > /dev/null ||
    { echo "package test: the installed rmacc-perf does not start"; exit 1; }
fi
echo "package test: CMake package, pkg-config and the installed rmacc-perf work"
