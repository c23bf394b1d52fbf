#!/usr/bin/env bash
# Installs Debian's PostgreSQL 15 server for the sandbox (the task history store's
# second backend). The sandbox runs its own server from the package's binaries, with
# data in the instance's state folder: no system cluster is needed, so a fresh install
# does not create one. Idempotent; silent on success.
set -euo pipefail

[ -x /usr/lib/postgresql/15/bin/postgres ] && exit 0

export DEBIAN_FRONTEND=noninteractive
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
  $sudo mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.conf >/dev/null
fi
log=$(mktemp)
# apt chatters on stderr even on success: show its output only on failure.
quiet_apt() { $sudo apt-get "$@" >>"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; exit 1; }; }
# A fresh machine may have no package lists yet: update only when needed.
if ! $sudo apt-get install -y -qq --no-install-recommends postgresql-15 >>"$log" 2>&1; then
  quiet_apt update -qq
  quiet_apt install -y -qq --no-install-recommends postgresql-15
fi
rm -f "$log"
