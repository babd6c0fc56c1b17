#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's main command: a pps-server on the built-in test source and a
# pps-client showing it (an SDL window if there is a display, else headless
# with the status line), until Ctrl-C or --duration.
#
#   scripts/demo.sh [--duration SECONDS] [--window 2|4] [--transport minbuf|tcp]
#                   [--port PORT] [any further pps-client options, e.g. --policy smooth]
#   scripts/demo.sh --help | --version
#
# --port: the server's TCP port on 127.0.0.1 (default 7400). In the client's
# window, q or Esc ends the run as Ctrl-C does.
set -eu
cd "$(dirname "$0")/.."

duration=""
window=2
transport=minbuf
port=7400
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration="$2"; shift 2 ;;
	--window) window="$2"; shift 2 ;;
	--transport) transport="$2"; shift 2 ;;
	--port) port="$2"; shift 2 ;;
	-h|--help)
		# The comment block above, without its '#' (it ends at the first line that is not one).
		sed -n '3,/^[^#]/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
		exit 0 ;;
	-V|--version)
		echo "demo.sh $(sed -n "s/^  version : '\(.*\)',$/\1/p" meson.build)"
		exit 0 ;;
	*) break ;;
	esac
done

./scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build server/pps-server client/pps-client

server_args="--listen 127.0.0.1:$port --set pps.window_frames=$window --set transport.mode=$transport"
client_args=""
if [ -n "$duration" ]; then
	# The server outlives the client by a little so the client ends the run.
	server_args="$server_args --duration $(( ${duration%.*} + 3 ))"
	client_args="--duration $duration"
fi

# shellcheck disable=SC2086
build/server/pps-server $server_args --quiet &
server_pid=$!
trap 'kill $server_pid 2>/dev/null; wait $server_pid 2>/dev/null' EXIT INT TERM
sleep 1
# shellcheck disable=SC2086
build/client/pps-client "127.0.0.1:$port" $client_args "$@"
