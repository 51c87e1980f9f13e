#!/usr/bin/env bash
# Installs what building and testing plait needs, from the project's own script (idempotent).
# Rust comes from rustup (preinstalled on these machines); everything else from registries.
set -euo pipefail

need() { command -v "$1" >/dev/null 2>&1; }

if ! need cargo; then
  echo "setup: cargo not found. Install Rust with rustup (stable, 1.85 or later) first." >&2
  exit 1
fi
if need rustup; then
  # Components the checks use; no-ops when present.
  rustup component add clippy rustfmt >/dev/null 2>&1 || {
    echo "setup: could not add the clippy and rustfmt components with rustup." >&2
    exit 1
  }
fi
version=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n1.85.0\n' "$version" | sort -V | head -1)" != "1.85.0" ]; then
  echo "setup: rustc $version is too old: plait uses edition 2024 (rustc 1.85 or later)." >&2
  exit 1
fi
