#!/usr/bin/env bash
# Prints the absolute path of a usable tool binary on stdout; progress goes to stderr.
#
#   scripts/tool.sh                 terraform: $TERRAFORM, else the one on PATH, else one built
#                                   once with `go install github.com/hashicorp/terraform@v1.5.7`
#   scripts/tool.sh tofu            OpenTofu:  $TOFU, else the one on PATH, else one built once
#                                   with `go install github.com/opentofu/opentofu/cmd/tofu@v1.6.2`
#   scripts/tool.sh golangci-lint   $GOLANGCI_LINT, else the one on PATH, else one built once
#                                   with `go install .../golangci-lint/v2/cmd/golangci-lint@v2.1.6`
#
# Built binaries are cached outside the clone, in $MLCOMPUTE_CACHE/tools/<tool>-<version>/
# (MLCOMPUTE_CACHE defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/mlcompute-dev), so the build (2 to
# 4 minutes on 2 cores, through the Go module proxy) happens once per machine, not once per
# clone. Newer terraform releases cannot be built with `go install` (their go.mod has replace
# directives), hence the pins.
# Environment: TERRAFORM_VERSION, TOFU_VERSION, GOLANGCI_LINT_VERSION override the pinned versions;
# MLCOMPUTE_TOOLS_DIR overrides the cache directory; MLCOMPUTE_BUILD_TOOLS=1 skips PATH and
# always uses (or builds) the pinned version.
set -euo pipefail

tools_dir="${MLCOMPUTE_TOOLS_DIR:-${MLCOMPUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlcompute-dev}/tools}"
kind="${1:-terraform}"

case "$kind" in
terraform)
	override="${TERRAFORM:-}"
	version="${TERRAFORM_VERSION:-1.5.7}"
	pkg="github.com/hashicorp/terraform@v$version"
	;;
tofu)
	override="${TOFU:-}"
	version="${TOFU_VERSION:-1.6.2}"
	pkg="github.com/opentofu/opentofu/cmd/tofu@v$version"
	;;
golangci-lint)
	override="${GOLANGCI_LINT:-}"
	version="${GOLANGCI_LINT_VERSION:-2.1.6}"
	pkg="github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$version"
	;;
*)
	echo "usage: $0 [terraform|tofu|golangci-lint]" >&2
	exit 2
	;;
esac

# No update checks (they reach the network) while we probe versions.
export CHECKPOINT_DISABLE=1

log() { echo "scripts/tool.sh: $*" >&2; }

# works reports whether $1 runs and prints a version.
works() { "$1" version >/dev/null 2>&1; }

absolute() {
	case "$1" in
	/*) echo "$1" ;;
	*) echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" ;;
	esac
}

if [[ -n "$override" ]]; then
	if ! works "$override"; then
		log "\$${kind^^} is set to '$override', which does not run"
		exit 1
	fi
	absolute "$override"
	exit 0
fi

if [[ "${MLCOMPUTE_BUILD_TOOLS:-0}" != 1 ]] && on_path="$(command -v "$kind" 2>/dev/null)" && works "$on_path"; then
	absolute "$on_path"
	exit 0
fi

dir="$tools_dir/$kind-$version"
bin="$dir/$kind"
if [[ -x "$bin" ]] && works "$bin"; then
	echo "$bin"
	exit 0
fi

if ! command -v go >/dev/null 2>&1; then
	log "no $kind on PATH and no Go toolchain to build one; install $kind or Go"
	exit 1
fi

mkdir -p "$tools_dir"
# One build at a time per cache (two make runs may race here).
exec 9>"$tools_dir/.$kind-$version.lock"
if command -v flock >/dev/null 2>&1; then
	flock 9
fi
if [[ -x "$bin" ]] && works "$bin"; then
	echo "$bin"
	exit 0
fi

log "no usable $kind found; building $pkg into $dir (once; a few minutes)"
staging="$(mktemp -d "$tools_dir/.build-$kind.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
start=$SECONDS
# Build outside this module so its go.mod and GOFLAGS do not apply.
(cd "$staging" && env GOBIN="$staging/bin" GOFLAGS= CGO_ENABLED=0 go install "$pkg") >&2
mkdir -p "$dir"
mv -f "$staging/bin/$kind" "$bin"
log "built $kind $version in $((SECONDS - start))s"
if ! works "$bin"; then
	log "the built $bin does not run"
	exit 1
fi
echo "$bin"
