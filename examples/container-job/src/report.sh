#!/bin/sh
# Runs in the environment's image: /etc/os-release is the image's, not the machine's. The
# working directory (this code, and the output directory given as $1) is the node's, mounted
# at the same path.
set -eu
. /etc/os-release
echo "image: ${PRETTY_NAME:-$ID}"
echo "rank: ${RANK} of ${WORLD_SIZE}"
echo "image: ${PRETTY_NAME:-$ID}" > "$1/report.txt"
echo "report written to $1/report.txt"
