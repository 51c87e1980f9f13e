#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 20), starting from the
# seed corpora in fuzz/corpus/TARGET (read only: new inputs go to a temporary directory, so
# the repository stays clean), one per core at a time. Fails if any target crashed, leaving
# the crashing input in fuzz/artifacts/TARGET/. Needs the nightly toolchain and cargo-fuzz
# (scripts/setup.sh installs cargo-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: no nightly toolchain (rustup toolchain install nightly); cannot run the fuzz targets" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: cargo-fuzz is missing (scripts/setup.sh installs it)" >&2
  exit 1
fi
# No sanitizer by default: plait's crates forbid unsafe code (Cargo.toml), so the fuzzers
# look for panics, hangs and unbounded memory (-rss_limit_mb below, checked about once a
# second: without a sanitizer's malloc hooks one huge allocation freed at once can slip
# by), which need none. AddressSanitizer would also watch the dependencies' unsafe code
# (the crypto crates'), but took half again as long to build (262 s against 175 s on a
# clean machine) and slowed every execution: PLAIT_FUZZ_SANITIZER=address brings it back
# for a longer run.
sanitizer=${PLAIT_FUZZ_SANITIZER:-none}
# cargo-fuzz has no --locked: check fuzz/Cargo.lock is current first.
cargo fetch --locked --manifest-path fuzz/Cargo.toml
targets=$(cargo +nightly fuzz list --fuzz-dir fuzz)
cargo +nightly fuzz build --fuzz-dir fuzz --sanitizer "$sanitizer"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One fuzzer per core at a time (libFuzzer runs on one): PLAIT_FUZZ_JOBS changes it.
jobs=${PLAIT_FUZZ_JOBS:-$(nproc)}
run_one() {
  local t=$1
  # -rss_limit_mb: a decoder that allocates without bound fails here too.
  if ! cargo +nightly fuzz run --fuzz-dir fuzz --sanitizer "$sanitizer" "$t" "$work/$t" "fuzz/corpus/$t" -- \
      -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 >"$work/$t.log" 2>&1; then
    touch "$work/$t.failed"
  fi
}
running=0
for t in $targets; do
  mkdir -p "$work/$t" "fuzz/corpus/$t"
  echo "fuzz: $t for ${seconds} s"
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
failed=0
for t in $targets; do
  if [ -e "$work/$t.failed" ]; then
    tail -40 "$work/$t.log" >&2
    echo "fuzz: $t failed (crashing input in fuzz/artifacts/$t/)" >&2
    failed=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/$t.log" | sed "s/^/fuzz: $t: /" || true
done
exit "$failed"
