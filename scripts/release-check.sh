#!/usr/bin/env bash
# Cross-compiles and vets every target .goreleaser.yml lists (its goos x goarch), as the
# release builds them (CGO_ENABLED=0): a release can be cut only when this passes.
#
#   scripts/release-check.sh
#
# It vets the packages the two binaries are built from (go list -deps of the module's
# main packages), which go vet checks with their tests. The lists are read from the
# `goos:` and `goarch:` blocks of .goreleaser.yml, so this checks exactly what ships.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The "- item" lines under a key of the builds entry.
list() {
	awk -v key="$1:" '
		$1 == key { on = 1; next }
		on && $1 == "-" { print $2; next }
		on { on = 0 }
	' .goreleaser.yml
}
mapfile -t oses < <(list goos)
mapfile -t arches < <(list goarch)
if [[ ${#oses[@]} -eq 0 || ${#arches[@]} -eq 0 ]]; then
	echo "release-check: no goos/goarch lists found in .goreleaser.yml" >&2
	exit 1
fi

module="$(go list -m)"
for os in "${oses[@]}"; do
	for arch in "${arches[@]}"; do
		echo "==> release-check $os/$arch"
		export GOOS="$os" GOARCH="$arch" CGO_ENABLED=0
		go build -trimpath -o /dev/null . ./cmd/mlcompute
		mapfile -t pkgs < <(go list -deps . ./cmd/mlcompute | grep "^$module")
		go vet "${pkgs[@]}"
	done
done
