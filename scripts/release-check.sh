#!/usr/bin/env bash
# Cross-compiles the provider and the CLI for the targets .goreleaser.yml lists (its goos x
# goarch), as the release builds them (CGO_ENABLED=0 -trimpath): a release can be cut only
# when this passes.
#
#   scripts/release-check.sh                          every target .goreleaser.yml lists
#   scripts/release-check.sh darwin/arm64 windows/amd64   only these (each must be listed)
#
# For each target it runs go vet on every package, test files included, then builds the two
# binaries. Vet type-checks and vets all the code for the target, so a package (or a test)
# that does not compile there fails here; the build then links what ships. The tests
# themselves run on Linux (make test), and the portable process layer macOS and Windows use
# is tested there too (make unit-portable). Test helpers that need a Unix system (real sshd,
# Slurm, fifos, process groups) carry `//go:build unix`.
#
# Vet runs with the release's -trimpath so that the build after it reuses what vet compiled.
# make test checks darwin/arm64 and windows/amd64 (the two other systems, on the other
# architecture than the test machine's) to stay inside its time budget: cold, the vet and
# build of one target take about five minutes on two cores, warm a few seconds. make
# release-check checks all of them.
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
	GOOS="${target%/*}" GOARCH="${target#*/}" CGO_ENABLED=0 go vet -trimpath ./...
	GOOS="${target%/*}" GOARCH="${target#*/}" CGO_ENABLED=0 \
		go build -trimpath -o /dev/null . ./cmd/mlcompute
done
