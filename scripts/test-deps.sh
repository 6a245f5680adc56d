#!/usr/bin/env bash
# Makes sure the system packages the tests need are installed; `make unit`, `make testacc`
# and `make test` run it first, so the README's `make test` works on a fresh machine.
#
#   scripts/test-deps.sh            install what is missing (apt-get), or fail naming it
#   scripts/test-deps.sh --check    only report; exit 1 when something is missing
#   scripts/test-deps.sh PKG...     the same for only these of the packages below (make demo
#                                   asks for python3-venv alone)
#
# Missing packages are installed with apt-get when running as root or with passwordless
# sudo; otherwise the script fails at once and names the exact packages to install. No test
# skips itself when a package is missing: a test that needs one fails.
#
# Environment: MLCOMPUTE_TEST_DEPS=skip skips the check (for machines that provide the same
# programs some other way; the tests then fail if they are really missing).
set -euo pipefail

# The Debian packages the tests need, one line each, with what they are for. A new need is
# one more line.
packages=(
	openssh-server # the SSH driver's tests run real sshd hosts
	iproute2       # ... inside network namespaces (ip netns)
	tcpdump        # the team engine's test records its network link: no token in clear
	python3-venv   # the online endpoint example's model server, environments' builds
	munge          # the Slurm driver's tests run a real Slurm cluster on loopback:
	slurmctld      # ... its controller,
	slurmd         # ... its node daemons,
	slurm-client   # ... and its commands (sbatch, srun, squeue, scancel, sinfo, scontrol)
	chromium       # the status page's test (make test-ui) in a real headless browser
	containerd     # make kube-up's single-node Kubernetes (scripts/kube.sh): its container runtime,
	runc           # ... the runtime's low-level half,
	etcd-server    # ... the API server's store,
	containernetworking-plugins # ... pod networking (bridge, host-local, loopback),
	busybox-static # ... sh and the core utilities of its node image (python3 from python3-venv),
	docker-registry # the container runtime's test pulls an image from a registry on loopback
	openssl        # ... and its certificates, tokens and service-account signing key
)

check_only=false
if [[ "${1:-}" == --check ]]; then
	check_only=true
	shift
fi
if (($# > 0)); then
	for pkg in "$@"; do
		[[ " ${packages[*]} " == *" $pkg "* ]] || { echo "test-deps: $pkg is not one of: ${packages[*]}" >&2; exit 2; }
	done
	packages=("$@")
fi

if [[ "${MLCOMPUTE_TEST_DEPS:-}" == skip ]]; then
	echo "test-deps: MLCOMPUTE_TEST_DEPS=skip: not checking ${packages[*]}" >&2
	exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "test-deps: this is not a Debian-based system (no dpkg-query). The tests need the programs of these" >&2
	echo "Debian packages: ${packages[*]}. Install their equivalents, then run again with MLCOMPUTE_TEST_DEPS=skip." >&2
	exit 1
fi

missing=()
for pkg in "${packages[@]}"; do
	status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
	[[ "$status" == installed ]] || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
	exit 0
fi
if $check_only; then
	echo "test-deps: missing: ${missing[*]}" >&2
	exit 1
fi

sudo=()
if ((EUID != 0)); then
	if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
		echo "test-deps: the tests need these packages, which are not installed: ${missing[*]}" >&2
		echo "test-deps: installing them needs root (or passwordless sudo). Run as root:" >&2
		echo "    apt-get install -y --no-install-recommends ${missing[*]}" >&2
		exit 1
	fi
	sudo=(sudo -n)
fi
echo "==> installing test dependencies: ${missing[*]}"
"${sudo[@]}" apt-get update -qq </dev/null
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
