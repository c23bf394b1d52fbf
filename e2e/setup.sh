#!/usr/bin/env bash
# Installs what the browser tests need, offline: Debian's Chromium, the
# playwright-core driver that playwright-go v0.5200.1 expects (1.52.0 exactly)
# and axe-core.
# Both npm packages go outside the clone so every clone on this machine shares them.
# Idempotent; silent on success.
set -euo pipefail

version=1.52.0
dir=${XDG_CACHE_HOME:-$HOME/.cache}/quota-console-sandbox/playwright-$version
chromium=/usr/lib/chromium/chromium
axe_version=4.11.0
axe_dir=${XDG_CACHE_HOME:-$HOME/.cache}/quota-console-sandbox/axe-core-$axe_version

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

# unpack PACKAGE VERSION DIR puts the npm package's files in DIR/package.
# It unpacks beside the target, then renames: a half-unpacked package is
# never seen.
unpack() {
  local tmp
  mkdir -p "$3"
  tmp=$(mktemp -d "$3.XXXXXX")
  (cd "$tmp" && npm pack --silent "$1@$2" >/dev/null) || { rm -rf "$tmp"; exit 1; }
  tar -xzf "$tmp/$1-$2.tgz" -C "$tmp"
  rm -rf "$3/package"
  mv "$tmp/package" "$3/package"
  rm -rf "$tmp"
}

[ -f "$dir/package/cli.js" ] || unpack playwright-core "$version" "$dir"
# axe-core: the accessibility checks the browser tests run in each page.
[ -f "$axe_dir/package/axe.min.js" ] || unpack axe-core "$axe_version" "$axe_dir"

# playwright-go runs <dir>/node unless PLAYWRIGHT_NODEJS_PATH is set.
node=$(command -v node) || { echo "e2e/setup.sh: node not found (apt-get install nodejs npm)" >&2; exit 1; }
if [ "$(readlink "$dir/node" 2>/dev/null)" != "$node" ]; then
  ln -sfn "$node" "$dir/node"
fi
