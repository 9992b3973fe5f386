#!/bin/sh
# promtool from PATH, failing with a hint when it is missing: the deploy tests must not pass by
# checking nothing. Debian's `prometheus` package has it; deploy/setup.sh installs that.
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool not found: apt-get install prometheus (deploy/setup.sh installs it)" >&2
  exit 1
fi
exec promtool "$@"
