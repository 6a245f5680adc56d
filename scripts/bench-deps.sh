#!/usr/bin/env bash
# Installs what the router benchmark needs besides Go, when it is missing: nginx (the
# reverse proxy the scoring router is compared with) and wrk (the load generator), from
# Debian packages. `make bench` runs it; `make test` needs neither.
#
#   scripts/bench-deps.sh
#
# Uses sudo when not run as root. On a machine with systemd, Debian's nginx package starts
# a system nginx on port 80 after installing; the benchmark runs its own nginx on a free
# loopback port and never touches that one.
set -euo pipefail

missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
# Debian installs nginx in /usr/sbin, which a non-root PATH often lacks.
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
if ((${#missing[@]} == 0)); then
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "bench: ${missing[*]} not found and apt-get is unavailable: install ${missing[*]} with your package manager, or run 'go run ./tools/bench -mode terraform' to skip the router benchmark" >&2
	exit 1
fi
sudo=()
if ((EUID != 0)); then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "bench: installing ${missing[*]} needs root, and sudo is unavailable: run 'apt-get install nginx wrk' as root" >&2
		exit 1
	fi
	sudo=(sudo)
fi
echo "==> installing ${missing[*]} for the router benchmark"
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
