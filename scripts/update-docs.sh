#!/bin/sh
# SPDX-License-Identifier: MIT
# Regenerates config/server.ini, config/client.ini and the option reference in
# docs/CONFIGURATION.md (between its options:begin/end markers) from the
# programs' key tables (server/pps-server-settings.c, client/pps-client-settings.c).
# The unit suite fails until this has been run after a key changes.
set -eu
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build
ninja -C build tools/pps-config-doc
doc=build/tools/pps-config-doc
$doc server > config/server.ini
$doc client > config/client.ini
$doc reference > build/options.md
/usr/bin/python3 - <<'PY'
import re
doc = open("docs/CONFIGURATION.md").read()
ref = open("build/options.md").read()
begin, end = "<!-- options:begin -->\n", "<!-- options:end -->"
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
open("docs/CONFIGURATION.md", "w").write(head + begin + ref + end + tail)
PY
echo "updated config/server.ini config/client.ini docs/CONFIGURATION.md"
