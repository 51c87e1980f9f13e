#!/usr/bin/env bash
# The one test command (README.md): sets up what the tests need, then runs every check CI
# runs. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "setup"
scripts/setup.sh

step "format (cargo fmt --check)"
cargo fmt --all -- --check

step "lint (clippy, warnings denied; plait-proto's clippy.toml forbids clocks, sockets, threads, global RNGs)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "plait-proto stays sans-IO (dependency tree)"
scripts/check-sans-io.sh

step "dependency graph: bans, licences, sources (cargo deny, deny.toml; offline)"
cargo deny --frozen check bans licenses sources

step "no module import cycles in any crate"
python3 scripts/check-module-cycles.py

if cargo +nightly --version >/dev/null 2>&1; then
  step "fuzz: every target for ${PLAIT_FUZZ_SECONDS:-5} s from its corpus (fails on a crash)"
  scripts/fuzz.sh "${PLAIT_FUZZ_SECONDS:-5}"
else
  # Without nightly the targets cannot run; they must still compile.
  step "fuzz targets build (stable check; no nightly toolchain to run them)"
  cargo check --manifest-path fuzz/Cargo.toml --locked
fi

step "tests"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --locked 2>&1 | tee "$log"
# One closing line with the totals over every test binary (the last binary cargo runs is a
# doc-test set that may have no tests, which would otherwise be the closing line).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\ntests: %d passed, %d failed\n", p, f }' "$log"
