#!/usr/bin/env bash
# Runs golangci-lint (built once by scripts/tool.sh) on the module, from one fixed path.
#
# golangci-lint keys its cache by each file's absolute path, so every fresh clone (CI's)
# linted the whole module again, about 3 minutes on 2 cores, for code it had linted under
# another path. It runs here from a symlink in the cache directory that points at this
# clone: a new clone of code linted before lints in seconds. A lock keeps two clones from
# moving the link under each other; without flock (macOS) it runs in place.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lint="$("$root/scripts/tool.sh" golangci-lint)"
echo "$lint run ./..."
if ! command -v flock >/dev/null 2>&1; then
	cd "$root"
	exec "$lint" run ./...
fi
cache="${MLCOMPUTE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlcompute-dev}"
mkdir -p "$cache"
exec 9>"$cache/lint-src.lock"
flock 9
ln -sfn "$root" "$cache/lint-src"
cd "$cache/lint-src" # a logical path: go list, and so golangci-lint, see files under it
"$lint" run ./...
