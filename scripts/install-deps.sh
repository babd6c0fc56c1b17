#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs the Debian 12 packages ppstream needs to build, test and benchmark.
# Idempotent: packages already present are not fetched again, so a second run
# is quick and changes nothing. Non-interactive; needs root (or sudo).
set -eu

# gstreamer1.0-x: autovideosink's X sinks (without them it goes on to one that
# crashes); xvfb, xauth: a display for the tests of those pipelines.
PACKAGES="
build-essential meson ninja-build pkg-config clang llvm libclang-rt-14-dev clang-format git
libglib2.0-dev
libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
gstreamer1.0-plugins-ugly gstreamer1.0-libav gstreamer1.0-tools
gstreamer1.0-x xvfb xauth
libavcodec-dev libavutil-dev ffmpeg
libjson-glib-dev help2man
libevent-dev libx264-dev libsdl2-dev libopus-dev
libssl-dev openssl
valgrind iproute2 iperf3 procps psmisc
python3-matplotlib python3-numpy python3-websockets python3-prometheus-client
srt-tools
chromium chromium-driver python3-selenium
"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-deps: all packages present"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "install-deps: missing packages:$missing; run this script as root" >&2
		exit 1
	fi
fi

echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
