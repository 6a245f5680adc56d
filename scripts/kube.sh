#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, for the Kubernetes tests and for trying the
# `kubernetes` node driver (`make kube-build`, `make kube-up`, `make kube-down`).
#
#   scripts/kube.sh build   build kube-apiserver, kubelet, kube-scheduler and kubectl v1.34.4
#                           (tools/kube, one binary) into the cache, once; prints the bin dir
#   scripts/kube.sh up      build if needed, install the Debian packages, start containerd,
#                           etcd, kube-apiserver, kube-scheduler and a kubelet, import the node
#                           image, wait for the node to be Ready; prints four export lines
#   scripts/kube.sh env     print the export lines of the running cluster
#   scripts/kube.sh down    stop it and undo what the kubelet changed on the host
#   scripts/kube.sh run CMD run CMD with those exports; stop the cluster afterwards if this
#                           started it (make test-kube, make demo-kubernetes)
#
# Progress goes to stderr; `up` and `env` end stdout with exactly
#   export KUBECONFIG=...  export MLCOMPUTE_KUBE_IMAGE=...  export PATH=<kubectl's dir>:$PATH
#   export KUBE_CONTAINERD_ADDRESS=... (the node's containerd, where tests load images)
# so `eval "$(make -s kube-up)"` sets a shell up. Logs are in the state dir.
#
# The cluster: an admin token in system:masters (KUBECONFIG), RBAC and the Node authorizer,
# TokenRequest for ServiceAccounts, a scheduler (unschedulable pods say so), pods on a bridge
# (10.217.0.0/20, reachable from the host) running the node image with
# `imagePullPolicy: Never`. No controller-manager: pods get no ServiceAccount token, a deleted
# namespace stays Terminating, nothing garbage-collects by owner. Root only; one cluster per
# machine (the kubelet changes host-wide settings; ports 12379, 12380, 16443, 11250, 11248).
#
# Environment:
#   MLCOMPUTE_CACHE     the cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/mlcompute-dev); the
#                       binaries go to $MLCOMPUTE_CACHE/kube/v1.34.4/bin, the node image's
#                       archive to $MLCOMPUTE_CACHE/kube/v1.34.4/images
#   MLCOMPUTE_KUBE_DIR  the state dir (default /var/lib/mlcompute-kube): keys, configs, data,
#                       logs; `down` deletes the data and keeps the keys and logs
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kube_version=v1.34.4
cache="${MLCOMPUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlcompute-dev}"
kube_cache="$cache/kube/$kube_version"
bin_dir="$kube_cache/bin"
components=(kube-apiserver kubelet kube-scheduler kubectl)

log() { echo "kube.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# built reports whether every component in the cache runs and answers its version.
built() {
	local c
	for c in "${components[@]}"; do
		[[ -x "$bin_dir/$c" ]] || return 1
	done
	# Whole outputs, not pipes into grep -q: that would end them early and fail under pipefail.
	local out
	out="$("$bin_dir/kube-apiserver" --version 2>/dev/null)" || return 1
	[[ "$out" == "Kubernetes $kube_version" ]] || return 1
	out="$("$bin_dir/kubectl" version --client 2>/dev/null)" || return 1
	[[ "$out" == *"Client Version: $kube_version"* ]]
}

# build compiles tools/kube (a module of its own, so `go test ./...` never builds it) once.
# A cold build takes 5 to 20 minutes on two busy cores and adds about 5 GB to the Go build
# cache; with a warm cache it only links (about 25 s).
build() {
	if built; then
		echo "$bin_dir"
		return
	fi
	command -v go >/dev/null 2>&1 || die "building Kubernetes $kube_version needs a Go toolchain (go on PATH)"
	mkdir -p "$kube_cache"
	# One build at a time per cache (two make runs may race here).
	exec 8>"$kube_cache/.build.lock"
	flock 8
	if built; then
		echo "$bin_dir"
		return
	fi
	log "building Kubernetes $kube_version into $bin_dir (once; 5 to 20 minutes on a cold Go cache)"
	local staging start=$SECONDS pkg=k8s.io/component-base/version
	staging="$(mktemp -d "$kube_cache/.build.XXXXXX")"
	# kubectl refuses to talk to a server when its own version is unset.
	(cd "$root/tools/kube" && env CGO_ENABLED=0 GOFLAGS='-mod=mod -buildvcs=false' go build -trimpath \
		-ldflags "-s -w -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=34 -X $pkg.gitTreeState=clean" \
		-o "$staging/kube" .) >&2 || { rm -rf "$staging"; die "the build of tools/kube failed"; }
	mkdir -p "$bin_dir"
	mv -f "$staging/kube" "$bin_dir/kube"
	rm -rf "$staging"
	local c
	for c in "${components[@]}"; do
		ln -sf kube "$bin_dir/$c"
	done
	built || die "the built $bin_dir/kube does not answer its version"
	log "built Kubernetes $kube_version in $((SECONDS - start))s"
	echo "$bin_dir"
}

# ---- the cluster ----------------------------------------------------------------------------

dir="${MLCOMPUTE_KUBE_DIR:-/var/lib/mlcompute-kube}"
node_name=mlcompute-kube
# The bridge's pods get 10.217.0.0/20; Services 10.217.240.0/24 (never routed: there is no
# kube-proxy, but a Service still gets an address). `up` refuses to start if the host already
# has a route into 10.217.0.0/16.
pod_subnet=10.217.0.0/20
service_range=10.217.240.0/24
service_ip=10.217.240.1
bridge=mlcompute0
# The node's address is the bridge's (the pods' gateway): the kubelet refuses a loopback one,
# and this keeps it off the host's real interfaces. `up` creates the bridge with it.
node_ip=10.217.0.1
bridge_cidr=10.217.0.1/20
cni_network=mlcompute-kube
# Ports away from the usual ones, so a real Kubernetes or etcd on the host is not disturbed.
etcd_port=12379
etcd_peer_port=12380
apiserver_port=16443
kubelet_port=11250
kubelet_healthz_port=11248
# Host settings the kubelet (and the bridge plugin's ip_forward) change; `down` restores them.
sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# The Debian packages `up` needs (scripts/test-deps.sh lists each with its reason).
debian_packages=(containerd runc etcd-server containernetworking-plugins busybox-static
	python3-venv openssl)

pki="$dir/pki"
logs="$dir/logs"
pids="$dir/pids"
sock="$dir/containerd/containerd.sock"
admin_kubeconfig="$dir/admin.kubeconfig"
env_file="$dir/env"
lock_file=/run/mlcompute-kube.lock

# pid_alive NAME: the daemon recorded under NAME still runs (a zombie counts as dead: PID 1
# on some machines does not reap orphans) and is still the program we started.
pid_alive() {
	local pid state
	pid="$(cat "$pids/$1.pid" 2>/dev/null)" || return 1
	[[ -r "/proc/$pid/stat" ]] || return 1
	state="$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
	[[ -n "$state" && "$state" != Z ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$1"
}

daemons=(containerd etcd kube-apiserver kube-scheduler kubelet)

# start NAME COMMAND...: runs a daemon in its own session, its output in logs/NAME.log.
start() {
	local name="$1"
	shift
	# Without the lock's descriptor: a daemon holding it would block every later up and down.
	setsid "$@" >>"$logs/$name.log" 2>&1 </dev/null 8>&- 9>&- &
	echo $! >"$pids/$name.pid"
}

# stop NAME [SECONDS]: TERM, then KILL after SECONDS (default 15).
stop() {
	local pid i seconds="${2:-15}"
	pid_alive "$1" || { rm -f "$pids/$1.pid"; return 0; }
	pid="$(cat "$pids/$1.pid")"
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < seconds * 10; i++)); do
		pid_alive "$1" || break
		sleep 0.1
	done
	if pid_alive "$1"; then
		log "$1 ($pid) did not stop in ${seconds}s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		sleep 0.2
	fi
	rm -f "$pids/$1.pid"
}

# wait_for SECONDS WHAT COMMAND...: retries COMMAND until it succeeds; fails naming WHAT and
# the log to read.
wait_for() {
	local seconds="$1" what="$2" deadline
	shift 2
	deadline=$((SECONDS + seconds))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			die "$what did not come up within ${seconds}s; see $logs/"
		fi
		sleep 0.2
	done
}

kubectl_admin() { "$bin_dir/kubectl" --kubeconfig "$admin_kubeconfig" "$@"; }

# running: every daemon runs and the API server answers.
running() {
	local d
	for d in "${daemons[@]}"; do
		pid_alive "$d" || return 1
	done
	[[ -s "$env_file" ]] && kubectl_admin get --raw /readyz >/dev/null 2>&1
}

print_env() { cat "$env_file"; }

# ---- configuration files --------------------------------------------------------------------

# make_pki: a CA, the API server's serving certificate and its client certificate for the
# kubelet (logs, exec), the service-account signing key and the static tokens (admin in
# system:masters; the kubelet as system:node:NAME, so the Node authorizer and NodeRestriction
# apply; the scheduler). Kept across down/up, so a KUBECONFIG stays valid.
make_pki() {
	[[ -s "$pki/tokens.csv" ]] && return
	mkdir -p "$pki"
	chmod 700 "$pki"
	(
		cd "$pki"
		openssl ecparam -name prime256v1 -genkey -noout -out ca.key
		openssl req -x509 -new -key ca.key -subj /CN=mlcompute-kube-ca -days 3650 -out ca.crt
		openssl ecparam -name prime256v1 -genkey -noout -out apiserver.key
		openssl req -new -key apiserver.key -subj /CN=kube-apiserver -out apiserver.csr
		printf '%s\n' "subjectAltName=IP:127.0.0.1,IP:$service_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" \
			'basicConstraints=CA:FALSE' 'keyUsage=digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' >apiserver.ext
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile apiserver.ext -out apiserver.crt
		openssl ecparam -name prime256v1 -genkey -noout -out kubelet-client.key
		openssl req -new -key kubelet-client.key -subj /CN=kube-apiserver-kubelet-client -out kubelet-client.csr
		printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=digitalSignature' 'extendedKeyUsage=clientAuth' >kubelet-client.ext
		openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile kubelet-client.ext -out kubelet-client.crt
		# Signs service-account tokens (TokenRequest), so a test can act as a ServiceAccount.
		openssl ecparam -name prime256v1 -genkey -noout -out sa.key
		openssl ec -in sa.key -pubout -out sa.pub
		{
			echo "$(openssl rand -hex 24),admin,admin,system:masters"
			echo "$(openssl rand -hex 24),system:node:$node_name,kubelet,system:nodes"
			echo "$(openssl rand -hex 24),system:kube-scheduler,kube-scheduler"
		} >tokens.csv.new
		mv tokens.csv.new tokens.csv
	) 2>>"$logs/pki.log"
}

token_of() { awk -F, -v u="$1" '$2 == u { print $1 }' "$pki/tokens.csv"; }

# kubeconfig FILE USER: a kubeconfig for one of the static tokens.
kubeconfig() {
	umask 077
	cat >"$1" <<-YAML
		apiVersion: v1
		kind: Config
		clusters:
		- name: mlcompute-kube
		  cluster:
		    server: https://127.0.0.1:$apiserver_port
		    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
		users:
		- name: $2
		  user:
		    token: $(token_of "$2")
		contexts:
		- name: mlcompute-kube
		  context:
		    cluster: mlcompute-kube
		    user: $2
		    namespace: default
		current-context: mlcompute-kube
	YAML
	umask 022
}

write_configs() {
	local image="$1"
	mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam" "$dir/kubelet" "$dir/pod-logs" "$dir/kubelet-plugins"
	# containerd, private to this cluster: its own root, state, socket and CNI config.
	# restrict_oom_score_adj: machines without CAP_SYS_RESOURCE otherwise fail every container
	# ("can't get final child's PID from pipe"). The sandbox (pause) image is the node image.
	cat >"$dir/containerd/config.toml" <<-TOML
		version = 2
		root = "$dir/containerd/root"
		state = "$dir/containerd/state"
		disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
		  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
		  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp",
		  "io.containerd.internal.v1.tracing"]
		[grpc]
		  address = "$sock"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$image"
		  restrict_oom_score_adj = true
		  netns_mounts_under_state_dir = true
		  disable_apparmor = true
		  enable_selinux = false
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = false
		        Root = "$dir/containerd/runc"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "$dir/cni/net.d"
	TOML
	# Pods on a bridge, reachable from the host at their IP; no NAT, so no iptables rules.
	# containerd adds the loopback interface itself (the loopback plugin, from the same bin_dir).
	cat >"$dir/cni/net.d/10-$cni_network.conflist" <<-JSON
		{
		  "cniVersion": "1.0.0",
		  "name": "$cni_network",
		  "plugins": [
		    {
		      "type": "bridge",
		      "bridge": "$bridge",
		      "isGateway": true,
		      "ipMasq": false,
		      "hairpinMode": true,
		      "ipam": {
		        "type": "host-local",
		        "dataDir": "$dir/cni/ipam",
		        "ranges": [[{"subnet": "$pod_subnet"}]],
		        "routes": [{"dst": "0.0.0.0/0"}]
		      }
		    }
		  ]
		}
	JSON
	# cgroupDriver cgroupfs and failCgroupV1 false: cgroup v1 hosts without systemd. The kubelet
	# listens on the bridge's address and serves only clients with a certificate of the
	# cluster's CA (the API server, for logs and exec); who may exec is decided by the API
	# server's RBAC.
	cat >"$dir/kubelet/config.yaml" <<-YAML
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		cgroupDriver: cgroupfs
		failCgroupV1: false
		makeIPTablesUtilChains: false
		failSwapOn: false
		containerRuntimeEndpoint: unix://$sock
		address: $node_ip
		port: $kubelet_port
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: $kubelet_healthz_port
		authentication:
		  anonymous:
		    enabled: false
		  webhook:
		    enabled: false
		  x509:
		    clientCAFile: $pki/ca.crt
		authorization:
		  mode: AlwaysAllow
		podLogsDir: $dir/pod-logs
		volumePluginDir: $dir/kubelet-plugins
		maxPods: 250
		serializeImagePulls: false
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard:
		  memory.available: 100Mi
		  nodefs.available: 2%
		  nodefs.inodesFree: 2%
		  imagefs.available: 2%
		clusterDomain: cluster.local
	YAML
	kubeconfig "$admin_kubeconfig" admin
	kubeconfig "$dir/kubelet/kubeconfig" "system:node:$node_name"
	kubeconfig "$dir/scheduler.kubeconfig" system:kube-scheduler
}

# ---- the node image -------------------------------------------------------------------------

# build_image DIR: writes DIR/node.tar, a docker-archive of one layer, and prints its name,
# mlcompute.local/node:<first 12 hex digits of its config's sha256>. The layer holds busybox
# (sh and the core utilities), bash, and Debian's python3.11 with its standard library, the
# shared libraries they load and ensurepip's wheels, so `python3 -m venv` works. Its command
# sleeps until TERM, which makes it the pods' sandbox (pause) image too.
build_image() {
	local out="$1" rootfs="$1/rootfs" lib f real a
	rm -rf "$rootfs"
	mkdir -p "$rootfs"/{usr/bin,usr/sbin,usr/lib,usr/lib64,usr/local/bin,etc,root,tmp,var/tmp,home,proc,sys,dev,run}
	chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
	chmod 700 "$rootfs/root"
	# Debian's merged /usr layout: the paths ldd prints (/lib/..., /lib64/...) resolve.
	ln -s usr/bin "$rootfs/bin"
	ln -s usr/sbin "$rootfs/sbin"
	ln -s usr/lib "$rootfs/lib"
	ln -s usr/lib64 "$rootfs/lib64"

	cp /usr/bin/python3.11 /bin/bash "$rootfs/usr/bin/"
	ln -s python3.11 "$rootfs/usr/bin/python3"
	ln -s python3.11 "$rootfs/usr/bin/python"
	cp /bin/busybox "$rootfs/usr/bin/busybox"
	for a in $(/bin/busybox --list); do
		[[ -e "$rootfs/usr/bin/$a" || -L "$rootfs/usr/bin/$a" ]] || ln -s busybox "$rootfs/usr/bin/$a"
	done
	# The standard library without its tests, IDLE and the static libpython (25 MB) that only
	# building C extensions against Python needs; EXTERNALLY-MANAGED is Debian's apt guard.
	tar -C /usr/lib -cf - --exclude=python3.11/test --exclude=python3.11/idlelib \
		--exclude=python3.11/turtledemo --exclude='python3.11/config-*/*.a' \
		--exclude=python3.11/EXTERNALLY-MANAGED python3.11 | tar -C "$rootfs/usr/lib" -xf -
	mkdir -p "$rootfs/usr/share/python-wheels"
	cp /usr/share/python-wheels/*.whl "$rootfs/usr/share/python-wheels/"
	# Every shared library the programs and Python's extension modules load, at the path the
	# loader looks for it.
	for lib in $(image_libraries); do
		real="$(readlink -f "$lib")"
		mkdir -p "$rootfs$(dirname "$lib")"
		cp "$real" "$rootfs$lib"
	done
	cat >"$rootfs/etc/passwd" <<-EOT
		root:x:0:0:root:/root:/bin/sh
		nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
	EOT
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
	printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"

	# One reproducible layer: same files, same bytes, same image name.
	tar -C "$rootfs" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu \
		-cf "$out/layer.tar" .
	local layer_sha config config_sha name
	layer_sha="$(sha256sum "$out/layer.tar" | cut -d' ' -f1)"
	config="$(printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin","LANG=C.UTF-8","HOME=/root"],"Cmd":["/bin/sh","-c","trap \\"exit 0\\" TERM INT; while :; do sleep 3600 & wait $!; done"],"WorkingDir":"/root"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$layer_sha")"
	config_sha="$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)"
	name="mlcompute.local/node:${config_sha:0:12}"
	printf '%s' "$config" >"$out/$config_sha.json"
	mkdir -p "$out/$layer_sha"
	mv "$out/layer.tar" "$out/$layer_sha/layer.tar"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config_sha" "$name" "$layer_sha" >"$out/manifest.json"
	tar -C "$out" -cf "$out/node.tar" manifest.json "$config_sha.json" "$layer_sha/layer.tar"
	rm -rf "$rootfs" "$out/$layer_sha" "$out/$config_sha.json" "$out/manifest.json"
	echo "$name"
}

# image_libraries prints the shared libraries the image's programs and Python's extension
# modules load.
image_libraries() {
	local f
	{
		ldd /usr/bin/python3.11 /bin/bash
		for f in /usr/lib/python3.11/lib-dynload/*.so; do ldd "$f"; done
	} 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | sort -u
}

# node_image: the node image's archive, built into the cache once per version of its input
# files (the recipe, and each file's path, size and time); sets image (its name) and image_tar.
node_image() {
	local images="$kube_cache/images" key staging
	key="$({
		declare -f build_image image_libraries
		# shellcheck disable=SC2046 # a list of paths
		find /usr/bin/python3.11 /bin/bash /bin/busybox /usr/lib/python3.11 /usr/share/python-wheels \
			$(image_libraries | xargs -r readlink -f) -printf '%p %s %T@\n'
	} | sha256sum | cut -c1-16)"
	image_tar="$images/node-$key.tar"
	if [[ -s "$image_tar" && -s "$images/node-$key.name" ]]; then
		image="$(cat "$images/node-$key.name")"
		return
	fi
	log "building the node image (busybox, bash, python3 with venv)"
	mkdir -p "$images"
	staging="$(mktemp -d "$images/.build.XXXXXX")"
	image="$(build_image "$staging")"
	find "$images" -maxdepth 1 -name 'node-*' -delete
	mv "$staging/node.tar" "$image_tar"
	echo "$image" >"$images/node-$key.name"
	rm -rf "$staging"
}

# ---- up and down ----------------------------------------------------------------------------

require_root() {
	((EUID == 0)) || die "the cluster needs root (it runs containerd and a kubelet, which change cgroups, mounts and sysctls); run as root"
}

check_host() {
	[[ -d /sys/fs/cgroup ]] || die "no cgroups mounted at /sys/fs/cgroup"
	if ip -4 route show 2>/dev/null | grep -v "dev $bridge" | grep -q '^10\.217\.'; then
		die "the host already routes into 10.217.0.0/16, which the cluster's pods and Services use: $(ip -4 route show | grep '^10\.217\.' | head -1)"
	fi
	local port
	for port in $etcd_port $etcd_peer_port $apiserver_port $kubelet_port $kubelet_healthz_port; do
		if ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then
			die "port $port is in use (the cluster needs $etcd_port, $etcd_peer_port, $apiserver_port, $kubelet_port and $kubelet_healthz_port); is another cluster running? (scripts/kube.sh down)"
		fi
	done
}

save_sysctls() {
	# Saved once: after a crash the file still holds the values from before the kubelet ran.
	[[ -s "$dir/sysctl.saved" ]] && return
	local key
	for key in "${sysctls[@]}"; do
		echo "$key=$(sysctl -n "$key")"
	done >"$dir/sysctl.saved.new"
	mv "$dir/sysctl.saved.new" "$dir/sysctl.saved"
}

restore_sysctls() {
	[[ -s "$dir/sysctl.saved" ]] || return 0
	local line
	while IFS= read -r line; do
		sysctl -q -w "$line" >/dev/null || log "could not restore $line"
	done <"$dir/sysctl.saved"
	rm -f "$dir/sysctl.saved"
}

up() {
	require_root
	exec 9>"$lock_file"
	flock 9
	if running; then
		log "already up (scripts/kube.sh down stops it)"
		print_env
		return
	fi
	if [[ -d "$pids" ]] && compgen -G "$pids/*.pid" >/dev/null; then
		log "a previous cluster is partly running; stopping it first"
		down_locked
	fi
	check_host
	# A failed start leaves nothing running (the logs stay).
	trap 'log "up failed; stopping what it started (logs in $logs)"; down_locked' EXIT
	"$root/scripts/test-deps.sh" "${debian_packages[@]}" >&2
	build >/dev/null
	local t0=$SECONDS
	mkdir -p "$dir" "$logs" "$pids"
	chmod 700 "$dir"
	for f in "$logs"/*.log; do
		[[ -e "$f" ]] && mv -f "$f" "$f.prev"
	done
	make_pki
	save_sysctls

	local image image_tar
	node_image
	write_configs "$image"
	# The pods' bridge, made here so the node has its address before the first pod: the CNI
	# bridge plugin adopts it.
	ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
	ip addr replace "$bridge_cidr" dev "$bridge"
	ip link set "$bridge" up

	log "starting containerd"
	start containerd containerd --config "$dir/containerd/config.toml"
	wait_for 30 containerd ctr --address "$sock" version
	ctr --address "$sock" -n k8s.io images import --all-platforms "$image_tar" >>"$logs/image.log" 2>&1 ||
		die "importing the node image failed; see $logs/image.log"

	log "starting etcd"
	# A throwaway cluster: no fsync (much faster on a shared disk; a crash loses the data,
	# and `down` deletes it anyway).
	start etcd etcd --name "$node_name" --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
		--initial-cluster "$node_name=http://127.0.0.1:$etcd_peer_port" --unsafe-no-fsync
	wait_for 30 etcd curl_etcd

	log "starting kube-apiserver"
	# ServiceAccount admission is off (there is no controller-manager to create each
	# namespace's default ServiceAccount; pods run without a token). TaintNodesByCondition is
	# off (no node controller would lift the not-ready taint). TokenRequest works: tests can
	# create ServiceAccounts with narrow Roles and act as them. No watch cache: with Debian's
	# etcd 3.4.23 (no usable progress notifications) a watch without a resourceVersion fails
	# after 3 s with "Too large resource version" whenever no pod changed in the meantime.
	start kube-apiserver "$bin_dir/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --secure-port "$apiserver_port" \
		--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
		--client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
		--authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction \
		--disable-admission-plugins ServiceAccount,TaintNodesByCondition \
		--service-cluster-ip-range "$service_range" \
		--service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
		--api-audiences https://kubernetes.default.svc \
		--endpoint-reconciler-type none \
		--kubelet-preferred-address-types InternalIP \
		--kubelet-client-certificate "$pki/kubelet-client.crt" --kubelet-client-key "$pki/kubelet-client.key" \
		--watch-cache=false \
		--allow-privileged=true --profiling=false \
		--cert-dir "$dir/apiserver-certs"
	wait_for 90 kube-apiserver kubectl_admin get --raw /readyz

	log "starting kube-scheduler and the kubelet"
	start kube-scheduler "$bin_dir/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --profiling=false
	start kubelet "$bin_dir/kubelet" --config "$dir/kubelet/config.yaml" \
		--kubeconfig "$dir/kubelet/kubeconfig" --root-dir "$dir/kubelet" \
		--hostname-override "$node_name" --node-ip "$node_ip"
	wait_for 30 "the default namespace" kubectl_admin get namespace default
	kubectl_admin create serviceaccount default --namespace default >>"$logs/setup.log" 2>&1 ||
		kubectl_admin get serviceaccount default --namespace default >/dev/null
	wait_for 60 "the node $node_name" kubectl_admin get node "$node_name"
	wait_for 120 "the node $node_name (Ready)" kubectl_admin wait --for=condition=Ready "node/$node_name" --timeout=5s
	for d in "${daemons[@]}"; do
		pid_alive "$d" || die "$d exited; see $logs/$d.log"
	done

	{
		echo "export KUBECONFIG=$(printf %q "$admin_kubeconfig")"
		echo "export MLCOMPUTE_KUBE_IMAGE=$(printf %q "$image")"
		echo "export PATH=$(printf %q "$bin_dir"):\$PATH"
		echo "export KUBE_CONTAINERD_ADDRESS=$(printf %q "$sock")"
	} >"$env_file"
	trap - EXIT
	log "up in $((SECONDS - t0))s (node $node_name Ready; image $image; logs in $logs)"
	print_env
}

curl_etcd() {
	# etcd answers /health over plain HTTP on loopback; bash's /dev/tcp spares a curl dependency.
	(exec 3<>"/dev/tcp/127.0.0.1/$etcd_port" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && grep -q '"health":"true"' <&3)
}

down() {
	require_root
	exec 9>"$lock_file"
	flock 9
	down_locked
	log "down"
}

# down_locked stops the cluster and undoes what it changed on the host: containers and their
# cgroups, mounts, network namespaces, the bridge, sysctls; it deletes the cluster's data
# (etcd, images, pods) but keeps the keys (a KUBECONFIG stays valid) and the logs.
down_locked() {
	[[ -d "$dir" ]] || return 0
	local d pid cg m id
	# The kubelet first, so it restarts nothing; then the pods' processes and their shims.
	stop kubelet
	stop kube-scheduler
	for cg in /sys/fs/cgroup/*/kubepods; do
		[[ -d "$cg" ]] || continue
		find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
	done
	for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $sock" || true); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	# The pods' sandbox ids, for CNI's caches outside the state dir.
	local sandboxes
	sandboxes="$(find "$dir/containerd/root/io.containerd.grpc.v1.cri/sandboxes" \
		"$dir/containerd/state/io.containerd.grpc.v1.cri/sandboxes" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -u || true)"
	stop containerd
	# Their data goes next: no need to wait for a graceful end.
	stop kube-apiserver 3
	stop etcd 3
	# Mounts under the state dir, innermost first: the kubelet's rshared bind of its root dir
	# and pod volumes, containerd's rootfs overlays, shm and network namespaces.
	for m in $(awk -v d="$dir/" 'index($5, d) == 1 || $5 == substr(d, 1, length(d) - 1) { print $5 }' /proc/self/mountinfo | tac); do
		m="$(printf '%b' "${m//\\/\\0}")"
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
	done
	# The kubelet's cgroups (cgroupfs driver: /kubepods in every hierarchy).
	for cg in /sys/fs/cgroup/*/kubepods; do
		[[ -d "$cg" && ! -L "${cg%/kubepods}" ]] || continue
		find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
		[[ -d "$cg" ]] && log "could not remove the cgroup $cg"
	done
	ip link delete "$bridge" 2>/dev/null || true
	restore_sysctls
	# What the kubelet and CNI leave outside the state dir: log links and CNI result caches.
	find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete 2>/dev/null || true
	rm -f /var/lib/cni/results/"$cni_network"-* 2>/dev/null || true
	for id in $sandboxes; do
		rm -f /var/lib/cni/results/*-"$id"-* 2>/dev/null || true
	done
	rmdir /var/lib/cni/results /var/lib/cni /var/log/containers 2>/dev/null || true
	# containerd 1.6 puts its shims' sockets in /run/containerd/s whatever its state dir: drop
	# those nothing listens on any more, then the directories left empty.
	local listening f
	listening="$(ss -xlH 2>/dev/null | awk '{ print $5 }' || true)"
	for f in /run/containerd/s/*; do
		[[ -S "$f" ]] && ! grep -qxF -- "$f" <<<"$listening" && rm -f "$f"
	done
	find /run/containerd -depth -type d -empty -delete 2>/dev/null || true
	rm -rf "$dir/etcd" "$dir/containerd" "$dir/kubelet" "$dir/cni" "$dir/pod-logs" "$dir/kubelet-plugins" \
		"$dir/apiserver-certs" "$env_file" "$pids"
}

status() {
	if running; then
		print_env
	else
		log "not running (scripts/kube.sh up starts it)"
		return 1
	fi
}

# run COMMAND...: runs COMMAND with the cluster's environment; a cluster this started is
# stopped afterwards, also when COMMAND fails or is interrupted; one that was already up stays.
run() {
	(($# > 0)) || die "usage: $0 run COMMAND [ARG...]"
	local started=false exports rc=0
	running || started=true
	exports="$(up)" || exit 1
	eval "$exports"
	if $started; then
		trap 'down' EXIT
		trap 'exit 130' INT
		trap 'exit 143' TERM
	fi
	"$@" || rc=$?
	exit $rc
}

case "${1:-}" in
build) build ;;
up) up ;;
down) down ;;
env | status) status ;;
run)
	shift
	run "$@"
	;;
*)
	echo "usage: $0 build|up|down|env|run COMMAND..." >&2
	exit 2
	;;
esac
