#!/usr/bin/env bash
# Runs the acceptance tests (TF_ACC=1) against a real terraform or OpenTofu binary, offline.
#
#   scripts/testacc.sh [terraform|tofu]
#
# Environment (set by the GNUmakefile, all optional):
#   TESTACC_RUN       go test -run pattern (default ^Test(Acc|E2E): acceptance and end-to-end tests)
#   TESTACC_PKGS      packages (default: those with a test named TestAcc* or TestE2E*; ./...
#                     when TESTACC_RUN is another pattern)
#   TESTACC_TIMEOUT   go test -timeout (default 30m: a backstop for a hung test, well above what
#                     a package takes on a loaded two-core machine, about 20 minutes)
#   TESTACC_PARALLEL  go test -parallel (default 4: terraform processes on 2 cores)
#   TESTACC_P         go test -p (default 2)
#   TESTARGS          extra go test arguments
#
# The tests get a CLI config we wrote (TF_CLI_CONFIG_FILE must name an existing file:
# a missing one breaks OpenTofu) and a throwaway MLCOMPUTE_HOME that is deleted afterwards (an
# engine started there exits as soon as its data dir is gone).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
kind="${1:-terraform}"

tf="$(scripts/tool.sh "$kind")"
mkdir -p .cache/testacc
cli_config="$root/.cache/testacc/$kind.tfrc"
printf '# Written by scripts/testacc.sh: acceptance tests install providers in-process.\n' >"$cli_config"

scratch="$(mktemp -d "${TMPDIR:-/tmp}/mlcompute-testacc.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

unset MLCOMPUTE_ENDPOINT MLCOMPUTE_TOKEN TF_CLI_ARGS TF_CLI_ARGS_plan TF_CLI_ARGS_apply TF_LOG
export TF_ACC=1
export TF_ACC_TERRAFORM_PATH="$tf"
export TF_CLI_CONFIG_FILE="$cli_config"
export CHECKPOINT_DISABLE=1
export MLCOMPUTE_HOME="$scratch/home"
if [[ "$kind" == tofu ]]; then
	export TF_ACC_PROVIDER_HOST=registry.opentofu.org
fi

# The packages to test. Only those that hold an acceptance or end-to-end test: `go test ./...`
# would build and link a test binary for each of the other packages to run nothing in it.
pkgs="${TESTACC_PKGS:-}"
if [[ -z "$pkgs" ]]; then
	pkgs=./...
	if [[ "${TESTACC_RUN:-^Test(Acc|E2E)}" == '^Test(Acc|E2E)' ]]; then
		pkgs="$(find . \( -path ./.git -o -path ./.cache -o -path ./.demo -o -path ./bin -o -path ./tools/kube \) -prune -o \
			-name '*_test.go' -print0 | xargs -0 grep -lE '^func Test(Acc|E2E)' | xargs -r -n1 dirname | sort -u | tr '\n' ' ')"
		[[ -n "$pkgs" ]] || { echo "no package holds a test named TestAcc* or TestE2E*" >&2; exit 1; }
	fi
fi

version="$("$tf" version)"
echo "acceptance tests with ${version%%$'\n'*} ($tf)"
set -x
# shellcheck disable=SC2086 # pkgs and TESTARGS are lists of arguments
go test $pkgs -run "${TESTACC_RUN:-^Test(Acc|E2E)}" -count=1 \
	-p "${TESTACC_P:-2}" -parallel "${TESTACC_PARALLEL:-4}" -timeout "${TESTACC_TIMEOUT:-30m}" ${TESTARGS:-}
