#!/bin/sh
# SPDX-License-Identifier: MIT
# The format check (meson test 'format', suite 'style'): every tracked C file
# must already be as .clang-format says. Fix with
#   clang-format -i $(git ls-files '*.c' '*.h')
# Exit 77 (skipped) only outside a git checkout, where the file list is unknown.
set -eu
cd "$(dirname "$0")/.."
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "check-format: not a git checkout; skipped"
	exit 77
fi
files=$(git ls-files '*.c' '*.h')
# shellcheck disable=SC2086
clang-format --dry-run -Werror $files
echo "check-format: $(echo "$files" | wc -l) files formatted as .clang-format says"
