#!/usr/bin/env bash
# Prints the path of a tidb-server binary built from the version pinned in
# this directory's go.mod, building it first if the cache lacks it (about six
# minutes on two cores). The cache is keyed by the hash of go.mod and go.sum,
# so a changed pin builds anew and an unchanged one is reused between runs on
# the same machine. The build's output goes to stderr; only the path to stdout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
go="${GO:-go}"
key="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)"
cache="${DAGFLOW_TIDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dagflow}/tidb-$key"
bin="$cache/tidb-server"
if [ ! -x "$bin" ]; then
  mkdir -p "$cache"
  echo "building tidb-server into $cache (once per pinned version)" >&2
  # A temporary name, renamed once complete: an interrupted build leaves no
  # half-written binary for the next run to trust.
  (cd "$here" && GOWORK=off GOFLAGS=-mod=readonly "$go" build -trimpath -o "$bin.tmp.$$" github.com/pingcap/tidb/cmd/tidb-server) >&2
  mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
