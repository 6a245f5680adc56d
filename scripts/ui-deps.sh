#!/usr/bin/env bash
# Installs Debian's chromium when it is missing: `make test-ui` drives it headless over the
# DevTools protocol to test the engine's status page. Nothing is downloaded at test time.
#
#   scripts/ui-deps.sh
#
# Uses sudo when not run as root.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "test-ui: chromium not found and apt-get is unavailable: install chromium with your package manager" >&2
	exit 1
fi
sudo=()
if ((EUID != 0)); then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "test-ui: installing chromium needs root, and sudo is unavailable: run 'apt-get install chromium' as root" >&2
		exit 1
	fi
	sudo=(sudo -n)
fi
echo "==> installing chromium for the status page test"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq </dev/null
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium </dev/null
