#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's test command: installs what is missing, builds with warnings
# as errors, runs every test suite, then the unit suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Suites that need root or
# /dev/net/tun (netlab) report "skipped" without them. When one to three
# tests fail, they run once more (scripts/rerun-failed.py says why) and must
# pass then; both runs are in the output.
#
#   scripts/test.sh            everything
#   scripts/test.sh unit       one suite (any meson suite name)
set -eu
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

if [ ! -f build/build.ninja ]; then
	meson setup build -Dwerror=true
else
	meson configure build -Dwerror=true
fi
ninja -C build

if [ $# -gt 0 ]; then
	for suite in "$@"; do
		meson test -C build --print-errorlogs --suite "$suite"
	done
	exit 0
fi

meson test -C build --print-errorlogs || ./scripts/rerun-failed.py build

if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false
fi
ninja -C build-asan
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
meson test -C build-asan --print-errorlogs --suite unit || ./scripts/rerun-failed.py build-asan
