#!/usr/bin/env bash
# Installs what building and testing plait needs, from the project's own script (idempotent).
# Rust comes from rustup (preinstalled on these machines); everything else from registries.
set -euo pipefail

need() { command -v "$1" >/dev/null 2>&1; }

if ! need cargo; then
  echo "setup: cargo not found. Install Rust with rustup (stable, 1.88 or later) first." >&2
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
if [ "$(printf '%s\n1.88.0\n' "$version" | sort -V | head -1)" != "1.88.0" ]; then
  echo "setup: rustc $version is too old: plait uses edition 2024 and let chains (rustc 1.88 or later)." >&2
  exit 1
fi

# python3 runs the module-cycle check (and serves files in the stream-mode test); network tools, curl and iperf3
# the tunnel's integration tests (network namespaces, routes, NAT, SOCKS5) use.
# Installed when running as root with apt (CI); otherwise those tests skip with a message.
pkgs=()
need python3 || pkgs+=(python3)
need ip || pkgs+=(iproute2)
need nft || pkgs+=(nftables)
need sysctl || pkgs+=(procps)
need ethtool || pkgs+=(ethtool)
need tc || pkgs+=(iproute2)
need iptables || pkgs+=(iptables)
need curl || pkgs+=(curl)
need iperf3 || pkgs+=(iperf3)
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && need apt-get; then
    echo "setup: installing ${pkgs[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  else
    echo "setup: ${pkgs[*]} missing (Debian packages); the network tests will be skipped" >&2
  fi
fi

# cargo-fuzz runs the fuzz targets (scripts/fuzz.sh); it needs the nightly toolchain.
if cargo +nightly --version >/dev/null 2>&1; then
  if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "setup: installing cargo-fuzz (once; a few minutes)"
    cargo install cargo-fuzz --locked --quiet
  fi
else
  echo "setup: no nightly toolchain: the fuzz targets will not run (rustup toolchain install nightly)" >&2
fi

# cargo-deny checks the dependency graph's bans, licences and sources (deny.toml).
if ! cargo deny --version >/dev/null 2>&1; then
  echo "setup: installing cargo-deny (once; a few minutes)"
  cargo install cargo-deny --locked --quiet
fi
# Every crate of Cargo.lock, for every target: the offline `cargo deny --frozen` reads the
# whole graph, including Windows-only crates a Linux build never downloads (on a fresh
# machine it failed on windows-sys).
cargo fetch --locked --quiet
