#!/usr/bin/env bash
# Writes a file-based Go module proxy holding the Go binding (bindings/go) at one version, in
# the on-disk layout of the Go module reference ("GOPROXY protocol"):
#
#   scripts/go-proxy.sh OUTDIR [VERSION]
#
#   OUTDIR/<escaped module path>/@v/list              the versions, one a line
#   OUTDIR/<escaped module path>/@v/VERSION.info      {"Version": ..., "Time": ...}
#   OUTDIR/<escaped module path>/@v/VERSION.mod       the module's go.mod
#   OUTDIR/<escaped module path>/@v/VERSION.zip       the module's files under <module>@<version>/
#
# Then `GOPROXY=file://OUTDIR GONOSUMDB=<module> go get <module>@VERSION` fetches it as a user
# fetches a tagged release. VERSION defaults to v<the library's version> (Cargo.toml): the
# binding is released with the library, tagged `bindings/go/vX.Y.Z` (the form the Go module
# reference gives a module in a subdirectory). The module path is go.mod's `module` line, the
# one place it is written down for the scripts. The zip holds the files git tracks under
# bindings/go, as they are in the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/go-proxy.sh OUTDIR [VERSION]}"
version="${2:-v$(awk -F'"' '/^version/ {print $2; exit}' Cargo.toml)}"
module=$(awk '$1 == "module" {print $2; exit}' bindings/go/go.mod)
[ -n "$module" ] || { echo "go-proxy.sh: bindings/go/go.mod has no module line" >&2; exit 1; }
case "$version" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "go-proxy.sh: '$version' is not a semantic version vX.Y.Z" >&2; exit 2 ;; esac

# Upper-case letters are escaped as '!' + lower case (the reference's case-encoding).
escaped=$(printf '%s' "$module" | sed -E 's/([A-Z])/!\L\1/g')
dir="$out/$escaped/@v"
mkdir -p "$dir"
time=$(git log -1 --format=%cI -- bindings/go 2>/dev/null || true)
[ -n "$time" ] || time=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# `list` keeps every version written there; each version once.
{ [ -f "$dir/list" ] && cat "$dir/list"; echo "$version"; } | sort -u > "$dir/list.new"
mv "$dir/list.new" "$dir/list"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$time" > "$dir/$version.info"
cp bindings/go/go.mod "$dir/$version.mod"
rm -f "$dir/$version.zip"
git ls-files -z bindings/go | python3 -c '
import os, sys, zipfile
prefix, dest = sys.argv[1], sys.argv[2]
paths = [p for p in sys.stdin.buffer.read().decode().split("\0") if p]
with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
    for p in sorted(paths):
        rel = p[len("bindings/go/"):]
        # A nested module is not part of this one (the reference excludes it, and vendor/).
        if rel.startswith("vendor/") or (rel.endswith("/go.mod") and rel != "go.mod"):
            continue
        if os.path.isfile(p):
            z.write(p, prefix + rel)
' "$module@$version/" "$dir/$version.zip"
echo "go-proxy.sh: $module@$version in $out"
