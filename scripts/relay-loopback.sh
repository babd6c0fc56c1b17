#!/bin/sh
# SPDX-License-Identifier: MIT
# One loopback run each (labelled loopback, not a lab path): publisher -> pps-relay -> viewer,
# and the same pps-server serving the viewer itself. Run under pps-quiet:
#   pps-quiet sh scripts/relay-loopback.sh build /work/sweeps/s22-relay-loopback
set -eu
B=$1; OUT=$2; D=${3:-20}
mkdir -p "$OUT"; cd "$OUT"; rm -f *.json *.err port-*
# direct
$B/server/pps-server --listen 127.0.0.1:0 --port-file port-direct --quiet --duration $((D+4)) 2> direct-server.err &
S=$!
while [ ! -s port-direct ]; do sleep 0.1; done
$B/client/pps-client 127.0.0.1:$(cat port-direct) --display none --duration $D --stats-json direct.json --set audio.output=none 2> direct-client.err
wait $S || true
# relay
$B/server/pps-relay --listen 127.0.0.1:0 --port-file port-relay --duration $((D+6)) 2> relay.err &
R=$!
while [ ! -s port-relay ]; do sleep 0.1; done
P=$(cat port-relay)
$B/server/pps-server --publish 127.0.0.1:$P/m --quiet --duration $((D+4)) 2> relay-publisher.err &
S=$!
while ! grep -q "stream m: " relay.err; do sleep 0.1; done
$B/client/pps-client 127.0.0.1:$P/m --display none --duration $D --stats-json relay.json --set audio.output=none 2> relay-client.err
wait $S || true
wait $R || true
