#!/usr/bin/env bash
# Builds asynqmon (build.sh), starts a throw-away redis-server and asynqmon on free loopback
# ports, and checks that asynqmon answers /api/queues and /api/servers with JSON and serves its
# embedded UI (index.html and the main script) with no network beyond loopback. Stops both on
# exit. Prints what it fetched; exits non-zero at the first failure.
#
#   tests/interop/asynqmon/smoke.sh [VERSION]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$("$here/build.sh" "$@" | tail -n1)
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
redis_port=$(free_port)
ui_port=$(free_port)
tmp=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
	--dir "$tmp" >"$tmp/redis.log" 2>&1 &
pids+=($!)
"$bin" --port "$ui_port" --redis-url "redis://127.0.0.1:$redis_port/0" >"$tmp/asynqmon.log" 2>&1 &
pids+=($!)

base="http://127.0.0.1:$ui_port"
for _ in $(seq 100); do # up to 10 s for both to listen
	curl -fsS -o /dev/null "$base/api/queues" 2>/dev/null && break
	sleep 0.1
done
fetch() { # path, then what the body must contain
	local body
	body=$(curl -fsS "$base$1") || { echo "FAIL $1: no answer"; cat "$tmp/asynqmon.log"; exit 1; }
	grep -q "$2" <<<"$body" || { echo "FAIL $1: no '$2' in ${body:0:200}"; exit 1; }
	echo "ok   $1 (${#body} bytes): ${body:0:80}"
}
fetch /api/queues '"queues"'
fetch /api/servers '"servers"'
fetch / '<div id="root">'
script=$(curl -fsS "$base/" | grep -o '/static/js/main\.[0-9a-f]*\.chunk\.js' | head -n1)
fetch "$script" 'asynq'
echo "asynqmon $(basename "$(dirname "$bin")") serves its UI and API against redis-server on port $redis_port"
