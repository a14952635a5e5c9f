#!/usr/bin/env bash
# Builds the interop programs (producer, server, inspector) against one or more asynq releases:
#
#   tests/interop/go/build.sh [VERSION...]     (default: v0.26.0 v0.24.1)
#
# into $ASYNCQ_INTEROP_BIN/<version>/ (default: .cache/interop/<version>/ at the project root),
# printing each directory on standard output. v0.26.0 builds with go.mod; v0.24.1 (the
# release asynqmon v0.7.2 links) with -modfile=go.v024.mod and the asynq_v024 build tag, over
# the same sources. Modules come from Go's module cache (and its proxy); nothing is vendored.
# go build is its own up-to-date check: a second run with nothing changed only re-links
# nothing and takes about a second. Used by `make interop-bin` and tests/interop/conftest.py.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${ASYNCQ_INTEROP_BIN:-$root/.cache/interop}
min_go=1.24

if ! command -v go >/dev/null 2>&1; then
	echo "go not found: the interop tests (tests/interop) build Go programs against" \
		"github.com/hibiken/asynq; install Go >= $min_go and put it on PATH" >&2
	exit 127
fi
have=$(go env GOVERSION)
have=${have#go}
if [ "$(printf '%s\n%s\n' "$min_go" "$have" | sort -V | head -n1)" != "$min_go" ]; then
	echo "go $have is too old: the interop programs need Go >= $min_go" >&2
	exit 1
fi

if [ $# -eq 0 ]; then
	set -- v0.26.0 v0.24.1
fi
cd "$here"
for version in "$@"; do
	case "$version" in
	v0.26.0) modfile=go.mod tags="" ;;
	v0.24.1) modfile=go.v024.mod tags=asynq_v024 ;;
	*)
		echo "unknown asynq version $version: this script builds v0.26.0 and v0.24.1" >&2
		exit 2
		;;
	esac
	dest="$out/$version"
	mkdir -p "$dest"
	# GOTOOLCHAIN=local: never fetch another toolchain; -mod=readonly: go.sum is the contract.
	GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -modfile="$modfile" -tags="$tags" \
		-buildvcs=false -o "$dest/" ./cmd/...
	echo "$dest"
done
