#!/usr/bin/env bash
# Installs what the browser tests need, offline: Debian's Chromium and the
# playwright-core driver that playwright-go v0.5200.1 expects (1.52.0 exactly).
# The driver goes outside the clone so every clone on this machine shares it.
# Idempotent; silent on success.
set -euo pipefail

version=1.52.0
dir=${XDG_CACHE_HOME:-$HOME/.cache}/quota-console-sandbox/playwright-$version
chromium=/usr/lib/chromium/chromium

if [ ! -x "$chromium" ]; then
  export DEBIAN_FRONTEND=noninteractive
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  log=$(mktemp)
  # apt chatters on stderr even on success: show its output only on failure.
  quiet_apt() { $sudo apt-get "$@" >>"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; exit 1; }; }
  # A fresh machine may have no package lists yet: update only when needed.
  if ! $sudo apt-get install -y -qq --no-install-recommends chromium fonts-liberation >>"$log" 2>&1; then
    quiet_apt update -qq
    quiet_apt install -y -qq --no-install-recommends chromium fonts-liberation
  fi
  rm -f "$log"
fi

if [ ! -f "$dir/package/cli.js" ]; then
  mkdir -p "$dir"
  # Unpack beside the target, then rename: a half-unpacked driver is never seen.
  tmp=$(mktemp -d "$dir.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "playwright-core@$version" >/dev/null)
  tar -xzf "$tmp/playwright-core-$version.tgz" -C "$tmp"
  rm -rf "$dir/package"
  mv "$tmp/package" "$dir/package"
fi

# playwright-go runs <dir>/node unless PLAYWRIGHT_NODEJS_PATH is set.
node=$(command -v node) || { echo "e2e/setup.sh: node not found (apt-get install nodejs npm)" >&2; exit 1; }
if [ "$(readlink "$dir/node" 2>/dev/null)" != "$node" ]; then
  ln -sfn "$node" "$dir/node"
fi
