#!/usr/bin/env bash
# make demo: apply examples/quickstart against the embedded engine with the provider built in
# ./bin, offline and without `terraform init` (dev_overrides), show what the engine holds,
# then destroy everything and stop the engine.
#
# Everything lives in .demo/ (git-ignored): the CLI config, a working copy of the example
# (so its state never lands in examples/), and the engine's data dir (MLCOMPUTE_HOME).
#
# The demo is a list of steps (DEMO_STEPS); each step is a function step_<name>. To extend
# it, write a function and add its name to the list.
#
# Environment:
#   DEMO_EXAMPLE  module to apply (default examples/quickstart)
#   DEMO_KEEP=1   skip destroy/shutdown and leave the workspace and engine up to explore
#   DEMO_SERVE_FLAGS  start the engine with `mlcompute serve FLAGS` instead of the embedded
#                 one; with --nodes slurm the demo also shows squeue (make demo-slurm sets
#                 it, next to a Slurm cluster on loopback: tools/slurmdemo); with --nodes
#                 kubernetes it shows `kubectl get pods` (make demo-kubernetes sets it, with
#                 KUBECONFIG and MLCOMPUTE_KUBE_IMAGE from scripts/kube.sh)
#   DEMO_VM_SIZE  the cluster's vm_size in the demo's copy of the example (make demo-kubernetes
#                 picks Standard_DS1_v2: its pods request the size's vCPUs, and a one-node
#                 cluster on a 2-core machine cannot hold two 4-vCPU Standard_DS3_v2 pods)
#   DEMO_SKIP     steps to leave out, space-separated, each said at its place (make
#                 demo-kubernetes leaves out "environment": the quickstart's find_links is a
#                 directory on this machine, which a pod's own filesystem does not have)
#   TERRAFORM     a terraform binary to use (default: see scripts/tool.sh)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

DEMO_STEPS=(
	prepare
	serve
	apply
	outputs
	replan
	engine_status
	job
	environment
	scale_down
	gpu_sizes
	destroy
	shutdown
)

example="${DEMO_EXAMPLE:-examples/quickstart}"
demo_dir="$root/.demo"
work="$demo_dir/$(basename "$example")"
bin_dir="$root/bin"
mlc="$bin_dir/mlcompute"

export MLCOMPUTE_HOME="$demo_dir/home"
# The engine's socket lives in its data dir, and unix socket paths are limited to about
# 104 bytes: from a deeply nested clone, use a short directory instead.
if ((${#MLCOMPUTE_HOME} > 80)); then
	MLCOMPUTE_HOME="${TMPDIR:-/tmp}/mlcompute-demo-$(id -u)"
fi
unset MLCOMPUTE_ENDPOINT MLCOMPUTE_TOKEN
export TF_CLI_CONFIG_FILE="$demo_dir/terraformrc"
export TF_IN_AUTOMATION=1 TF_INPUT=0 CHECKPOINT_DISABLE=1

if [[ -t 1 ]]; then
	bold=$'\033[1m' dim=$'\033[2m' reset=$'\033[0m' color_flag=()
else
	bold='' dim='' reset='' color_flag=(-no-color)
fi

header() { printf '\n%s==> %s%s\n' "$bold" "$*" "$reset"; }
# show prints a command as a user would type it.
show() { printf '%s$ %s%s\n' "$dim" "$*" "$reset"; }

tf_bin=""
terraform() {
	show "terraform $*"
	"$tf_bin" -chdir="$work" "$@"
}
mlcompute() {
	show "mlcompute $*"
	"$mlc" "$@"
}

for b in "$mlc" "$bin_dir/terraform-provider-mlcompute"; do
	if [[ ! -x "$b" ]]; then
		echo "demo: $b is missing; run 'make build' (or 'make demo')" >&2
		exit 1
	fi
done

step_prepare() {
	header "Preparing .demo/ (a CLI config with dev_overrides -> ./bin, and the engine's data dir)"
	tf_bin="$(scripts/tool.sh)"
	# Stop an engine a previous demo left running, then start from a clean slate.
	if [[ -d "$MLCOMPUTE_HOME" ]]; then
		"$mlc" shutdown >/dev/null 2>&1 || true
	fi
	rm -rf "$MLCOMPUTE_HOME" "$work"
	mkdir -p "$demo_dir" "$work"
	cp -R "$example/." "$work/"
	if [[ -n "${DEMO_VM_SIZE:-}" ]]; then
		sed -i -E "s/^(  vm_size += )\"[^\"]*\"/\1\"$DEMO_VM_SIZE\"/" "$work/main.tf"
		echo "vm_size = \"$DEMO_VM_SIZE\" in the demo's copy of $example (DEMO_VM_SIZE)"
	fi
	cat >"$TF_CLI_CONFIG_FILE" <<CONFIG
# Written by scripts/demo.sh: use the provider built in ./bin without terraform init.
provider_installation {
  dev_overrides {
    "mlcompute/mlcompute" = "$bin_dir"
  }
  direct {}
}
CONFIG
	local version
	version="$("$tf_bin" version)"
	echo "${version%%$'\n'*}; provider from ./bin; MLCOMPUTE_HOME=${MLCOMPUTE_HOME#"$root"/}"
}

step_apply() {
	header "Applying $example (no terraform init: dev_overrides; the engine starts by itself)"
	terraform apply -auto-approve -compact-warnings "${color_flag[@]}"
}

step_outputs() {
	header "Outputs"
	terraform output "${color_flag[@]}"
}

step_replan() {
	header "Planning again: the provider reads back exactly what the engine holds"
	local rc=0
	terraform plan -detailed-exitcode -compact-warnings "${color_flag[@]}" || rc=$?
	case $rc in
	0) echo "OK: no changes after apply" ;;
	2)
		echo "demo: the plan after apply is not empty (see above)" >&2
		return 1
		;;
	*) return $rc ;;
	esac
}

# slurm says the demo runs its nodes on Slurm.
slurm() { [[ "${DEMO_SERVE_FLAGS:-}" == *"--nodes slurm"* ]]; }

# squeue_jobs shows the Slurm jobs that hold the nodes.
squeue_jobs() {
	show "squeue -o '%.6i %.28j %.9T %.6N'"
	command squeue -o '%.6i %.28j %.9T %.6N'
}

# kube says the demo runs its nodes as Kubernetes pods.
kube() { [[ "${DEMO_SERVE_FLAGS:-}" == *"--nodes kubernetes"* ]]; }

# kube_pods shows the pods that are the nodes.
kube_pods() {
	show "kubectl get pods -o wide"
	command kubectl get pods -o wide
}

step_serve() {
	[[ -z "${DEMO_SERVE_FLAGS:-}" ]] && return 0
	header "Starting the engine: mlcompute serve $DEMO_SERVE_FLAGS"
	# shellcheck disable=SC2086 # the flags are words
	"$mlc" serve $DEMO_SERVE_FLAGS >"$demo_dir/serve.log" 2>&1 &
	local i
	for i in $(seq 100); do
		"$mlc" status >/dev/null 2>&1 && break
		sleep 0.1
	done
	mlcompute status
}

step_engine_status() {
	header "The embedded engine (still running after terraform exited)"
	mlcompute status
}

# cluster_nodes prints how many nodes the quickstart cluster has.
cluster_nodes() {
	"$mlc" compute show --workspace quickstart cpu-cluster -o json | sed -n 's/.*"current_node_count": \([0-9]*\).*/\1/p'
}

step_job() {
	header "Submitting a 2-node job: the cluster scales up from 0 at once"
	mlcompute compute list --workspace quickstart
	mlcompute job submit --workspace quickstart --compute cpu-cluster --code "$example/job" --instance-count 2 --stream -- sh train.sh
	echo
	mlcompute compute show --workspace quickstart cpu-cluster
	if slurm; then
		echo
		echo "Each node is a one-node Slurm job, named <engine id>/<node id>:"
		squeue_jobs
	fi
	if kube; then
		echo
		echo "Each node is a pod, named from the engine id and the node key:"
		kube_pods
	fi
}

# venv_works says whether this machine's python3 can build environments (Debian needs the
# python3-venv package); the environment step is skipped with a hint when it cannot.
venv_works() {
	local probe="$demo_dir/venv-probe"
	rm -rf "$probe"
	python3 -m venv --without-pip "$probe" >/dev/null 2>&1 && python3 -c 'import ensurepip' >/dev/null 2>&1
	local rc=$?
	rm -rf "$probe"
	return $rc
}

# start_delay prints how long a job waited from its submission to its start.
start_delay() {
	"$mlc" job show --workspace quickstart "$1" -o json | python3 -c '
import datetime, json, sys
j = json.load(sys.stdin)
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
print("%.1fs" % (t(j["started_at"]) - t(j["submitted_at"])).total_seconds())'
}

# env_job submits the evaluation job in the quickstart environment, follows its output and
# prints its ID last.
env_job() {
	local id
	id="$("$mlc" job submit --workspace quickstart --compute cpu-cluster --environment quickstart-env --code "$example/job" -- python evaluate.py)"
	show "mlcompute job submit --workspace quickstart --compute cpu-cluster --environment quickstart-env --code $example/job -- python evaluate.py" >&2
	echo "$id" >&2
	mlcompute job logs --workspace quickstart --follow "$id" >&2
	echo "$id"
}

step_environment() {
	header "Jobs in the quickstart environment: the first builds it on its node, the second reuses it"
	if command -v python3 >/dev/null && ! venv_works && command -v dpkg-query >/dev/null; then
		# Debian's python3 needs python3-venv: install it as make test would (as root or
		# with sudo -n), or say what to install.
		scripts/test-deps.sh python3-venv || true
	fi
	if ! command -v python3 >/dev/null || ! venv_works; then
		echo "skipped: python3 cannot make virtual environments here (Debian/Ubuntu: apt-get install python3-venv)"
		return 0
	fi
	local first second
	first="$(env_job)"
	mlcompute job show --workspace quickstart "$first"
	echo
	second="$(env_job)"
	if "$mlc" job logs --workspace quickstart "$second" | grep -q "building environment"; then
		echo "demo: the second job built the environment again" >&2
		return 1
	fi
	echo
	echo "first job ($first) started $(start_delay "$first") after submission: it built the environment"
	echo "second job ($second) started $(start_delay "$second") after submission: no build, the machine has it"
}

step_scale_down() {
	header "Waiting for the idle nodes to be released (scale_down_nodes_after_idle_duration = PT10S)"
	local began=$SECONDS nodes last=""
	while ((SECONDS - began < 90)); do
		nodes="$(cluster_nodes)"
		if [[ "$nodes" != "$last" ]]; then
			echo "after $((SECONDS - began))s: $nodes node(s)"
			last="$nodes"
		fi
		if [[ "$nodes" == 0 ]]; then
			mlcompute compute list --workspace quickstart
			if slurm; then
				squeue_jobs
			fi
			if kube; then
				kube_pods
			fi
			return 0
		fi
		sleep 0.5
	done
	echo "demo: the cluster did not scale back to 0 within 90s" >&2
	return 1
}

step_gpu_sizes() {
	header "GPU sizes in the catalog"
	mlcompute sizes list --gpu
}

step_destroy() {
	[[ "${DEMO_KEEP:-0}" == 1 ]] && return 0
	header "Destroying"
	terraform destroy -auto-approve -compact-warnings "${color_flag[@]}"
}

step_shutdown() {
	if [[ "${DEMO_KEEP:-0}" == 1 ]]; then
		header "Kept (DEMO_KEEP=1)"
		echo "state:  .demo/$(basename "$work")/terraform.tfstate"
		echo "engine: ./bin/mlcompute --data-dir $MLCOMPUTE_HOME status   (it exits after 10 idle minutes)"
		echo "clean:  make clean"
		return 0
	fi
	header "Stopping the engine"
	mlcompute shutdown
}

# On failure: show the engine's log, then try to leave nothing behind.
current=""
on_exit() {
	local rc=$?
	[[ $rc == 0 ]] && return
	echo >&2
	echo "demo: step '$current' failed (exit $rc)" >&2
	if [[ -f "$MLCOMPUTE_HOME/engine.log" ]]; then
		echo "--- last lines of $MLCOMPUTE_HOME/engine.log ---" >&2
		tail -n 30 "$MLCOMPUTE_HOME/engine.log" >&2 || true
	fi
	if [[ "${DEMO_KEEP:-0}" != 1 && -n "$tf_bin" && -f "$work/terraform.tfstate" ]]; then
		echo "demo: cleaning up" >&2
		"$tf_bin" -chdir="$work" destroy -auto-approve -no-color >/dev/null 2>&1 || true
	fi
	if [[ "${DEMO_KEEP:-0}" != 1 && -d "$MLCOMPUTE_HOME" ]]; then
		"$mlc" shutdown >/dev/null 2>&1 || true
	fi
}
trap on_exit EXIT

start=$SECONDS
for current in "${DEMO_STEPS[@]}"; do
	if [[ " ${DEMO_SKIP:-} " == *" $current "* ]]; then
		echo "demo: step '$current' left out (DEMO_SKIP)" >&2
		continue
	fi
	"step_$current"
done
header "Demo finished in $((SECONDS - start))s"
