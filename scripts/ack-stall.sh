#!/bin/bash
# Latency under load while the receiving daemon stalls (root): the topology of the root test
# latency_netns (crates/plait/tests/data/latency.toml: 8 + 4 Mbit/s at 20 and 60 ms, 300 ms
# drop-tail queues; paced BBR, unordered sparse flows), with the server daemon (the bulk transfer's receiver, which sends the path
# ACKs) stopped for STALL_MS every PERIOD_MS. A stalled receiver answers in a burst: the
# measurement behind docs/protocol.md#delivery-rate. Prints goodput and the probe's RTT
# p50/p99 on path 0's link and through the tunnel, one line per run.
#
# Usage: sudo scripts/ack-stall.sh [PLAIT_BINARY] [RUNS] [STALL_MS] [PERIOD_MS]
#   defaults: target/release/plait, 3 runs, 40 ms every 300 ms.
set -euo pipefail

bin=$(realpath "${1:-target/release/plait}")
runs=${2:-3}
stall_ms=${3:-40}
period_ms=${4:-300}
[[ $(id -u) -eq 0 ]] || { echo "ack-stall.sh: needs root (network namespaces)" >&2; exit 2; }
[[ -x $bin ]] || { echo "ack-stall.sh: no executable at $bin (cargo build --release -p plait)" >&2; exit 2; }
for n in "$runs" "$stall_ms" "$period_ms"; do
    [[ $n =~ ^[0-9]+$ ]] || { echo "ack-stall.sh: '$n' is not a whole number" >&2; exit 2; }
done
(( runs > 0 && stall_ms > 0 && period_ms > stall_ms )) ||
    { echo "ack-stall.sh: need RUNS > 0 and 0 < STALL_MS < PERIOD_MS" >&2; exit 2; }
topology="$(cd "$(dirname "$0")/.." && pwd)/crates/plait/tests/data/latency.toml"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

pause=$(awk -v ms="$stall_ms" 'BEGIN { print ms / 1000 }')
rest=$(awk -v ms="$((period_ms - stall_ms))" 'BEGIN { print ms / 1000 }')
for run in $(seq 1 "$runs"); do
    out="$dir/run$run"
    "$bin" bench "$topology" --out "$out" --prefix plas --modes plait \
        --engine packet_pacing=true --engine 'congestion="bbr"' \
        --engine unordered_below_kbps=256 > "$out.log" 2>&1 &
    bench=$!
    while kill -0 "$bench" 2>/dev/null; do
        server=$(pgrep -f "^$bin server -c" | head -1 || true)
        if [[ -n $server ]]; then
            kill -STOP "$server" 2>/dev/null || true
            sleep "$pause"
            kill -CONT "$server" 2>/dev/null || true
        fi
        sleep "$rest"
    done
    wait "$bench" || { echo "run $run: plait bench failed:" >&2; tail -5 "$out.log" >&2; exit 1; }
    python3 - "$out/latency.json" "$run" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))["modes"][0]
print(f"run {sys.argv[2]}: goodput {m['goodput_mbit']:.2f} Mbit/s; path 0's link RTT p50/p99 "
      f"{m['rtt_p50_ms']:.0f}/{m['rtt_p99_ms']:.0f} ms; through the tunnel "
      f"{m['tunnel_rtt_p50_ms']:.0f}/{m['tunnel_rtt_p99_ms']:.0f} ms")
EOF
done
