#!/usr/bin/env bash
# Generates or checks the provider documentation in docs/ with tfplugindocs.
#
#   scripts/docs.sh generate   render templates/ + examples/ + the provider schema into docs/
#   scripts/docs.sh check      regenerate, then fail if docs/ changed (stale docs) or, on CI
#                              (CI set) or with DOCS_CHECK_GIT=1, if docs/ differs from git;
#                              then hold the docs to the code (tools/docscheck): command lines
#                              that parse, every command, flag, MLCOMPUTE_ variable and metric
#                              family documented, each finding as file:line: what is missing
#
# tfplugindocs builds the provider, reads its schema with `terraform providers schema -json`
# (init with -plugin-dir, offline) using the first terraform on PATH, and only downloads one
# when none is found. We put the terraform from scripts/tool.sh first on PATH, so this
# works offline on a machine with no terraform installed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-generate}"

tf="$(scripts/tool.sh)"
export PATH="$(dirname "$tf"):$PATH"
# A CLI config we wrote (the environment may point at a missing or unrelated one).
mkdir -p .cache
printf '# Written by scripts/docs.sh: no provider installation overrides.\n' >.cache/docs.tfrc
export TF_CLI_CONFIG_FILE="$root/.cache/docs.tfrc"
export CHECKPOINT_DISABLE=1

generate() {
	go tool tfplugindocs generate --provider-name mlcompute
}

# validate checks docs/ against the Terraform Registry's rules; its debug log is shown
# only when it fails.
validate() {
	local out
	if ! out="$(go tool tfplugindocs validate --provider-name mlcompute 2>&1)"; then
		echo "$out" >&2
		echo "docs: tfplugindocs validate failed" >&2
		return 1
	fi
	echo "docs: docs/ passes tfplugindocs validate"
}

case "$mode" in
generate)
	generate
	validate
	;;
check)
	before="$(mktemp -d)"
	trap 'rm -rf "$before"' EXIT
	mkdir -p docs
	cp -R docs "$before/docs"
	generate >"$before/generate.log" 2>&1 || {
		cat "$before/generate.log" >&2
		echo "docs-check: tfplugindocs generate failed" >&2
		exit 1
	}
	validate
	failed=0
	if ! diff -ru "$before/docs" docs; then
		echo >&2
		echo "docs-check: docs/ was stale and has been regenerated (diff above); review and commit it" >&2
		failed=1
	fi
	if [[ -n "${CI:-}" || "${DOCS_CHECK_GIT:-0}" == 1 ]] && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		changes="$(git status --porcelain --untracked-files=all -- docs)"
		if [[ -n "$changes" ]]; then
			echo "$changes" >&2
			git --no-pager diff --stat -- docs >&2 || true
			echo "docs-check: docs/ differs from git; run 'make docs' and commit docs/" >&2
			failed=1
		fi
	fi
	if [[ $failed == 0 ]]; then
		echo "docs-check: docs/ is up to date"
	fi
	if ! go run ./tools/docscheck; then
		echo "docs-check: the docs do not match the code (findings above); fix templates/, README.md or examples/, then make docs" >&2
		failed=1
	fi
	exit $failed
	;;
*)
	echo "usage: $0 generate|check" >&2
	exit 2
	;;
esac
