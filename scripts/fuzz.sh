#!/usr/bin/env bash
# Runs every Go fuzz target for a while, one after another (Go fuzzes one target per run).
#
#   scripts/fuzz.sh [FUZZTIME]      e.g. scripts/fuzz.sh 10m; default 5s (what make test runs)
#
# The targets' seed corpora also run as plain tests in `make unit`. Inputs the fuzzer
# finds interesting are kept in Go's fuzz cache; a failing input is written to the
# package's testdata/fuzz/<Target>/ and fails the run: commit it with the fix. To keep a
# long run's interesting inputs as seeds, copy them from $(go env GOCACHE)/fuzz/... into
# testdata/fuzz/<Target>/ (see CONTRIBUTING.md).
#
# Environment: FUZZ_TARGETS overrides the list ("pkg:Target ..."); FUZZ_PARALLEL sets
# -parallel (default: all CPUs).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime="${1:-${FUZZTIME:-5s}}"

# One line per target: package and fuzz function.
targets=(
	./internal/engine/server:FuzzDecodeJSON
	./internal/engine/server:FuzzJobValidation
	./internal/engine/validation:FuzzDuration
	./internal/engine/validation:FuzzNameRules
	./internal/engine/rules/schedule:FuzzParseCron
	./internal/engine/snapshot:FuzzUnpack
	./internal/engine/artifacts:FuzzIntake
	./internal/engine/router/leanserver:FuzzParseHead
)
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
	read -r -a targets <<<"$FUZZ_TARGETS"
fi

parallel=()
if [[ -n "${FUZZ_PARALLEL:-}" ]]; then
	parallel=(-parallel "$FUZZ_PARALLEL")
fi
# fuzz runs one target. Go's fuzzer sometimes fails a run with a bare "context deadline
# exceeded" when -fuzztime ends while a worker is still busy (a toolchain flake, not a
# finding: a finding writes its input to testdata/fuzz). That one failure is run again once;
# any other failure, or the same one twice, fails. A run's output is printed when it ends
# (not as it goes), so a flake that was run again leaves no "--- FAIL" line in the log for
# CI's count of failed tests.
fuzz() {
	local pkg="$1" name="$2" out
	out="$(mktemp)"
	trap 'rm -f "$out"' RETURN
	if go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "${parallel[@]}" >"$out" 2>&1; then
		cat "$out"
		return 0
	fi
	if grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written to' "$out"; then
		echo "==> fuzz $name: the fuzzer stopped on its own deadline ('context deadline exceeded', no input written: a toolchain flake, not a finding); running it once more"
		go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "${parallel[@]}"
		return
	fi
	cat "$out"
	return 1
}

for t in "${targets[@]}"; do
	pkg="${t%%:*}"
	name="${t##*:}"
	echo "==> fuzz $name ($pkg) for $fuzztime"
	fuzz "$pkg" "$name"
done
