#!/usr/bin/env bash
# Runs two commands at the same time: make test runs the Kubernetes tests (which mostly wait
# on a kubelet) while the acceptance tests run.
#
#   scripts/alongside.sh 'BACKGROUND COMMAND' FOREGROUND COMMAND [ARG...]
#
# The foreground command's output streams as usual. The background command's output is kept
# in a file and printed whole once both have ended, so the two never mix line by line (CI
# counts the "--- PASS" and "--- FAIL" lines of the log). Both always run to their end; the
# exit status is the foreground's if it failed, else the background's. An interrupt (INT or
# TERM) stops both: the background command runs in a process group of its own, which gets TERM.
set -euo pipefail

(($# >= 2)) || { echo "usage: $0 'BACKGROUND COMMAND' FOREGROUND COMMAND [ARG...]" >&2; exit 2; }
background="$1"
shift

out="$(mktemp "${TMPDIR:-/tmp}/mlcompute-alongside.XXXXXX")"
# setsid: the background command leads a process group of its own, so TERM reaches all of it
# (the Kubernetes tests' cleanup traps TERM and stops the cluster).
setsid bash -c "$background" >"$out" 2>&1 </dev/null &
bg=$!
stop() {
	kill -TERM -- "-$bg" 2>/dev/null || true
	wait "$bg" 2>/dev/null || true
	cat "$out"
	rm -f "$out"
	exit "$1"
}
trap 'stop 130' INT
trap 'stop 143' TERM

rc=0
"$@" || rc=$?
echo "==> waiting for: $background"
bg_rc=0
wait "$bg" || bg_rc=$?
trap - INT TERM
cat "$out"
rm -f "$out"
if ((bg_rc != 0)); then
	echo "==> failed (exit $bg_rc): $background" >&2
fi
if ((rc != 0)); then
	exit "$rc"
fi
exit "$bg_rc"
