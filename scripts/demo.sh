#!/usr/bin/env bash
# The README's main command: sets up what plait needs, builds it, and runs `plait demo`
# (as root: it creates network namespaces, emulated links and TUN devices, and removes
# them all when it ends). Usage: sudo scripts/demo.sh [demo options, e.g. --seconds 20]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "demo: plait demo builds network namespaces and TUN devices: run it as root (sudo scripts/demo.sh)." >&2
  exit 1
fi
scripts/setup.sh
cargo build --release --locked -p plait
exec ./target/release/plait demo "$@"
