#!/usr/bin/env bash
# Cross-compiles the provider and the CLI for the targets .goreleaser.yml lists (its goos x
# goarch), as the release builds them (CGO_ENABLED=0 -trimpath): a release can be cut only
# when this passes.
#
#   scripts/release-check.sh                          every target .goreleaser.yml lists
#   scripts/release-check.sh darwin/arm64 windows/amd64   only these (each must be listed)
#
# Building the two binaries compiles every package that ships in them, so a package that
# does not compile on a target fails here. Test files are not part of a release and are
# not built: the tests run on Linux (make test), and the portable process layer macOS and
# Windows use is tested there too (make unit-portable). Linux's own vet is make lint's.
#
# make test checks darwin/arm64 and windows/amd64 (the two other systems, on the other
# architecture than the test machine's) to stay inside its time budget: a cold cross build
# takes about three minutes on two cores. make release-check checks all of them.
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
listed=()
for os in "${oses[@]}"; do
	for arch in "${arches[@]}"; do
		listed+=("$os/$arch")
	done
done

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
	targets=("${listed[@]}")
fi
for target in "${targets[@]}"; do
	if [[ " ${listed[*]} " != *" $target "* ]]; then
		echo "release-check: $target is not a target .goreleaser.yml builds (it builds: ${listed[*]})" >&2
		exit 1
	fi
done

for target in "${targets[@]}"; do
	echo "==> release-check $target"
	GOOS="${target%/*}" GOARCH="${target#*/}" CGO_ENABLED=0 \
		go build -trimpath -o /dev/null . ./cmd/mlcompute
done
