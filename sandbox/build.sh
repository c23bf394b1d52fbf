#!/usr/bin/env bash
# Builds (once) the sandbox binaries into a cache folder outside the clone and prints that folder.
# The folder is keyed by the tools modules and the Go version, so every clone on this machine
# reuses the same build. Needs only the Go module proxy and Debian's packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${SANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quota-console-sandbox}
key=$( (cat "$here/build.sh" "$here/tools/k8s/go.mod" "$here/tools/k8s/go.sum" "$here/tools/kwok/go.mod" "$here/tools/kwok/go.sum"; go env GOVERSION; echo prometheus-deb) | sha256sum | cut -c1-16)
bin="$cache_root/bin-$key"
log() { echo "sandbox-build: $*" >&2; }

if [ -f "$bin/.complete" ]; then echo "$bin"; exit 0; fi
mkdir -p "$bin.tmp"
export CGO_ENABLED=0 GOFLAGS=-trimpath
# The checksum database does not list this pre-release; go.sum pins its hash instead.
export GONOSUMDB=sigs.k8s.io/scheduler-library

# Version stamps: Kueue refuses to start against an apiserver reporting no version.
version_flags="-X k8s.io/component-base/version.gitVersion=v1.36.2 -X k8s.io/component-base/version.gitMajor=1"
version_flags+=" -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean"
version_flags+=" -X sigs.k8s.io/kueue/pkg/version.GitVersion=v0.19.2"
start=$(date +%s)
if [ ! -x "$bin.tmp/kube-apiserver" ] || [ ! -x "$bin.tmp/kueue" ] || [ ! -x "$bin.tmp/etcd" ]; then
  log "building etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kueue (cold: about 10 minutes)"
  (cd "$here/tools/k8s" && go build -ldflags "-s -w $version_flags" -o "$bin.tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler sigs.k8s.io/kueue/cmd/kueue go.etcd.io/etcd/server/v3)
  mv "$bin.tmp/server" "$bin.tmp/etcd" # etcd's main package is the module root "server"
fi
if [ ! -x "$bin.tmp/kwok" ]; then
  log "building kwok"
  (cd "$here/tools/kwok" && go build -ldflags "-s -w" -o "$bin.tmp/" sigs.k8s.io/kwok/cmd/kwok)
fi
if [ ! -x "$bin.tmp/prometheus" ]; then
  log "fetching Debian's prometheus package"
  work=$(mktemp -d)
  (cd "$work" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get download prometheus >/dev/null; }; } \
    && dpkg-deb -x prometheus_*.deb root)
  cp "$work/root/usr/bin/prometheus" "$bin.tmp/prometheus"
  rm -rf "$work"
fi
# Kueue's CRDs, webhook manifests and KWOK's stages come from the same module versions as the binaries.
rm -rf "$bin.tmp/kueue-config" "$bin.tmp/kwok-stage"
(cd "$here/tools/k8s" && cp -r "$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components" "$bin.tmp/kueue-config" && chmod -R u+w "$bin.tmp/kueue-config")
(cd "$here/tools/kwok" && cp -r "$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage" "$bin.tmp/kwok-stage" && chmod -R u+w "$bin.tmp/kwok-stage")
touch "$bin.tmp/.complete"
rm -rf "$bin"; mv "$bin.tmp" "$bin"
# Builds of older tool versions are no longer needed (running processes keep their open files).
find "$cache_root" -maxdepth 1 -name 'bin-*' ! -name "bin-$key" -exec rm -rf {} +
log "done in $(( $(date +%s) - start )) s"
echo "$bin"
