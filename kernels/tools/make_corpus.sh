#!/bin/sh
# Writes the demo corpus — the King James Bible as printed by Debian's bible-kjv package
# (`bible`), Genesis 1:1 through Revelation 22:21, about 4.3 MB of plain ASCII — to the given path.
# Usage: kernels/tools/make_corpus.sh OUT_PATH
set -eu
if [ "$#" -ne 1 ]; then
  echo "usage: $0 OUT_PATH" >&2
  exit 2
fi
if ! command -v bible >/dev/null 2>&1; then
  echo "$0: the 'bible' program is missing; install it with: apt-get install bible-kjv" >&2
  exit 1
fi
tmp="$1.tmp.$$"
bible Gen1:1-Rev22:21 >"$tmp"
size=$(wc -c <"$tmp")
if [ "$size" -lt 4000000 ]; then
  echo "$0: expected about 4.3 MB from bible, got $size bytes" >&2
  rm -f "$tmp"
  exit 1
fi
mv "$tmp" "$1"
echo "$1: $size bytes"
