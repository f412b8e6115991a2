#!/usr/bin/env bash
# The package's three ways to be found, from outside the source tree:
#   cmake --install (the package finds the library through the prefix it was installed with),
#   pip install --no-build-isolation (offline; the built library is bundled next to it),
#   and a missing library: one ImportError naming every place searched.
set -euo pipefail
build=$(cd "$1" && pwd)
python=${2:-python3}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pkg=$(dirname "$(find "$tmp/prefix" -path '*/rmacc/_install.py')")
PYTHONPATH=$(dirname "$pkg") "$python" -c "
import rmacc, sys
assert rmacc.library_path.startswith('$tmp/prefix/'), rmacc.library_path
assert rmacc.__file__.startswith('$pkg'), rmacc.__file__
print('cmake --install: rmacc', rmacc.version(), 'uses', rmacc.library_path)"

cp -r "$src/python" "$tmp/python"
# A venv without its own pip (making one takes ~15 s): the system's pip installs into it.
"$python" -m venv --system-site-packages --without-pip "$tmp/venv"
RMACC_LIB="$build/librmacc.so" "$python" -m pip --python "$tmp/venv/bin/python" install -q \
  --no-index --no-build-isolation "$tmp/python" >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
"$tmp/venv/bin/python" -c "
import os, rmacc
here = os.path.dirname(rmacc.__file__)
assert rmacc.library_path == os.path.join(here, 'librmacc.so'), rmacc.library_path
assert here.startswith('$tmp/venv/'), here
print('pip install: rmacc', rmacc.version(), 'uses', rmacc.library_path)"

rm -f "$tmp/python/rmacc/librmacc.so"*
if out=$(cd / && PYTHONPATH="$tmp/python" RMACC_LIB=/nonexistent/librmacc.so "$python" -c \
    "import rmacc" 2>&1); then
  echo "import rmacc succeeded without a library"; exit 1
fi
for want in "cannot load librmacc.so" "/nonexistent/librmacc.so (RMACC_LIB" "next to the package" \
            "(system"; do
  grep -qF "$want" <<<"$out" || { echo "the error does not say '$want':"; echo "$out"; exit 1; }
done
echo "missing library: one error naming what was searched"
