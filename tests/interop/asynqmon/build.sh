#!/usr/bin/env bash
# Builds asynqmon, asynq's web UI, from the Go module proxy:
#
#   tests/interop/asynqmon/build.sh [VERSION]      (default: v0.7.2, the latest tag)
#
# into $ASYNCQ_INTEROP_BIN/asynqmon/<version>/asynqmon (default: .cache/interop/ at the project
# root, next to the interop programs of tests/interop/go) and prints the binary's path. The
# module zip holds the built React UI (ui/build, embedded with go:embed), so no Node toolchain
# is needed; nothing is vendored. asynqmon v0.7.2 links asynq v0.24.1 (its own go.mod).
set -euo pipefail

version=${1:-v0.7.2}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${ASYNCQ_INTEROP_BIN:-$root/.cache/interop}
dest="$out/asynqmon/$version"

if ! command -v go >/dev/null 2>&1; then
	echo "go not found: asynqmon is built from github.com/hibiken/asynqmon with the Go" \
		"toolchain; install Go (>= 1.16 for asynqmon itself) and put it on PATH" >&2
	exit 127
fi
mkdir -p "$dest"
# go install pkg@version builds with asynqmon's own go.mod and go.sum (checked against the
# checksum database); GOTOOLCHAIN=local never fetches another toolchain.
GOTOOLCHAIN=local GOBIN="$dest" GOFLAGS=-buildvcs=false \
	go install "github.com/hibiken/asynqmon/cmd/asynqmon@$version"
echo "$dest/asynqmon"
