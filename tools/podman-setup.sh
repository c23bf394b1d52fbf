#!/usr/bin/env bash
# Installs what the image's podman test needs: Debian's podman and runc
# (podman's default runtime, crun, fails on these machines). Idempotent;
# silent on success.
set -euo pipefail
if command -v podman >/dev/null && [ -x /usr/sbin/runc ]; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
quiet_apt() { $sudo apt-get "$@" >>"$log" 2>&1 || { cat "$log" >&2; exit 1; }; }
# A fresh machine may have no package lists yet: update only when needed.
if ! $sudo apt-get install -y -qq --no-install-recommends podman runc >>"$log" 2>&1; then
  quiet_apt update -qq
  quiet_apt install -y -qq --no-install-recommends podman runc
fi
