#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a consumer through the CMake
# package and through pkg-config.
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/consumer/consumer_cmake"
pc=$(find "$tmp/prefix" -name rmacc.pc | head -1)
sed -i "s|^prefix=.*|prefix=$tmp/prefix|" "$pc"
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs rmacc)
cc "$src/consumer.c" $flags -o "$tmp/consumer_pc"
LD_LIBRARY_PATH="$tmp/prefix/lib:$tmp/prefix/lib64:${LD_LIBRARY_PATH:-}" "$tmp/consumer_pc"
echo "package test: CMake package and pkg-config both work"
