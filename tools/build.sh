#!/usr/bin/env bash
# Builds (once) a command of one of the tools modules next to this script into a
# cache folder outside the clone, and prints the built binary's path:
#
#   tools/build.sh helm    # helm.sh/helm/v3 from tools/helm (its own go.mod)
#   tools/build.sh image   # the image builder in tools/image
#
# The folder is keyed by the module's files (go.mod, go.sum, sources) and the Go
# version, so every clone on this machine reuses one build, and a changed module
# gets a new one. Needs only the Go module proxy.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: tools/build.sh helm|image}
module="$here/$name"
case "$name" in
  helm) pkg=helm.sh/helm/v3/cmd/helm
        version=$(cd "$module" && go list -m -f '{{.Version}}' helm.sh/helm/v3)
        ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version" ;;
  image) pkg=. ldflags="-s -w" ;;
  *) echo "tools/build.sh: unknown tool $name (helm or image)" >&2; exit 2 ;;
esac
cache_root=${QUOTA_CONSOLE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quota-console-tools}
key=$( (cd "$module" && find . -type f ! -name '*_test.go' ! -path './testdata/*' | LC_ALL=C sort | xargs cat; cat "$here/build.sh"; go env GOVERSION) | sha256sum | cut -c1-16)
dir="$cache_root/$name-$key"
if [ -x "$dir/$name" ]; then echo "$dir/$name"; exit 0; fi

mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.$name-XXXXXX")
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "tools/build.sh: building $name into $dir" >&2
(cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/$name" "$pkg")
# Another build of the same key may have finished meanwhile: either result will do.
mv -T "$tmp" "$dir" 2>/dev/null || true
# Builds of older versions of this tool are no longer needed.
find "$cache_root" -maxdepth 1 -name "$name-*" ! -name "$name-$key" -exec rm -rf {} +
echo "tools/build.sh: $name built in $(( $(date +%s) - start )) s" >&2
echo "$dir/$name"
