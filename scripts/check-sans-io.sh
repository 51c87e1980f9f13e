#!/usr/bin/env bash
# plait-proto must stay sans-IO: beyond clippy.toml's disallowed methods (no clock, socket,
# thread), its dependency tree must not contain a crate that could give it a global RNG,
# a socket or an async runtime. Fails with the offending crate's name.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(rand|getrandom|tokio|mio|async-std|smol|socket2|libc|nix|quinn-udp)$'
deps=$(cargo tree -p plait-proto -e normal --prefix none --format '{p}' --locked | awk '{print $1}' | sort -u)
bad=$(printf '%s\n' "$deps" | grep -E "$forbidden" || true)
if [ -n "$bad" ]; then
  echo "check-sans-io: plait-proto depends on crates it must not use: $bad" >&2
  exit 1
fi
echo "check-sans-io: plait-proto's dependencies are $(printf '%s ' $deps)"
