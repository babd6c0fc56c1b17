#!/bin/sh
# SPDX-License-Identifier: MIT
# One loopback run each (labelled loopback, not a lab path): publisher -> pps-relay -> viewer,
# and the same pps-server serving the viewer itself. Run it alone on the machine:
#   sh scripts/relay-loopback.sh BUILD_DIR OUT_DIR [SECONDS]
set -eu
B=$1; OUT=$2; D=${3:-20}
# Waits up to 10 s for a program to write its port file.
wait_port() {
	i=0
	while [ ! -s "$1" ]; do
		i=$((i + 1))
		[ $i -le 100 ] || { echo "relay-loopback: no $1 after 10 s" >&2; exit 1; }
		sleep 0.1
	done
}
mkdir -p "$OUT"; cd "$OUT"; rm -f *.json *.err port-*
# direct
$B/server/pps-server --listen 127.0.0.1:0 --port-file port-direct --quiet --duration $((D+4)) 2> direct-server.err &
S=$!
wait_port port-direct
$B/client/pps-client 127.0.0.1:$(cat port-direct) --display none --duration $D --stats-json direct.json --set audio.output=none 2> direct-client.err
wait $S || true
# relay
$B/server/pps-relay --listen 127.0.0.1:0 --port-file port-relay --duration $((D+6)) 2> relay.err &
R=$!
wait_port port-relay
P=$(cat port-relay)
$B/server/pps-server --publish 127.0.0.1:$P/m --quiet --duration $((D+4)) 2> relay-publisher.err &
S=$!
i=0
while ! grep -q "stream m: " relay.err; do
	i=$((i + 1))
	[ $i -le 100 ] || { echo "relay-loopback: the publisher did not reach the relay in 10 s" >&2; exit 1; }
	sleep 0.1
done
$B/client/pps-client 127.0.0.1:$P/m --display none --duration $D --stats-json relay.json --set audio.output=none 2> relay-client.err
wait $S || true
wait $R || true
