#!/usr/bin/env bash
# Prints the path of promtool, Prometheus's rule checker, which the chart's
# tests run on its alert rules (deploy/helm). It comes from Debian's
# prometheus package, as the sandbox's Prometheus does (apt-get download,
# unpacked with dpkg-deb: nothing is installed), fetched once into a cache
# folder outside the clone, keyed by this script:
#
#   tools/promtool.sh          # ~/.cache/quota-console-tools/promtool-<key>/promtool
#
# Needs apt-get and dpkg-deb; elsewhere set PROMTOOL to a promtool binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${QUOTA_CONSOLE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quota-console-tools}
key=$(sha256sum <"$here/promtool.sh" | cut -c1-16)
dir="$cache_root/promtool-$key"
if [ -x "$dir/promtool" ]; then echo "$dir/promtool"; exit 0; fi

for cmd in apt-get dpkg-deb; do
  command -v "$cmd" >/dev/null || { echo "tools/promtool.sh: $cmd not found: promtool comes from Debian's prometheus package; set PROMTOOL to a promtool binary instead" >&2; exit 1; }
done
mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.promtool-XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "tools/promtool.sh: fetching Debian's prometheus package for promtool" >&2
(cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get download prometheus >/dev/null; }; } \
  && dpkg-deb -x prometheus_*.deb root) || { echo "tools/promtool.sh: could not fetch or unpack Debian's prometheus package" >&2; exit 1; }
mkdir "$tmp/out"
cp "$tmp/root/usr/bin/promtool" "$tmp/out/promtool"
"$tmp/out/promtool" --version >/dev/null
# Another run may have finished meanwhile: either copy will do.
mv -T "$tmp/out" "$dir" 2>/dev/null || true
# Copies fetched by older versions of this script are no longer needed.
find "$cache_root" -maxdepth 1 -name 'promtool-*' ! -name "promtool-$key" -exec rm -rf {} +
echo "$dir/promtool"
