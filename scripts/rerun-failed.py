#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs once more the tests that failed in a meson test run, when only a few
did, and says so.

    scripts/rerun-failed.py BUILD_DIR [MAX]

Reads BUILD_DIR/meson-logs/testlog.json (the run that just failed). If 1 to
MAX tests (default 3) failed, runs those again, logging to testlog-rerun.*,
and exits with that run's status; a test that fails twice fails the suite.
More failures than MAX is a broken build, not a noisy machine: it exits 1
without running anything.

Why: the lab and browser tests judge timing (an emulated 10 ms delay within
a fraction of a millisecond, a frame shown within its deadline) on a shared
2-core VM whose neighbours can stall it for tens of milliseconds. A real
fault repeats; a stall does not. Every rerun is printed with the name of the
test and both results, so a test that needs its second chance often shows in
every CI log."""

import json
import os
import subprocess
import sys

FAILED = {"FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS"}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    build = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) == 3 else 3
    path = os.path.join(build, "meson-logs", "testlog.json")
    try:
        with open(path) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        sys.exit(f"rerun-failed: cannot read {path}: {e}")
    failed = [r for r in records if r.get("result") in FAILED]
    if not failed:
        print("rerun-failed: the last run has no failed test; nothing to rerun")
        return 1
    names = sorted({r["name"].split(" / ", 1)[-1] for r in failed})
    if len(names) > limit:
        print(f"rerun-failed: {len(names)} tests failed (more than {limit}); not rerunning: {', '.join(names)}")
        return 1
    print(f"rerun-failed: running once more the {len(names)} failed test(s): {', '.join(names)}", flush=True)
    rc = subprocess.call(["meson", "test", "-C", build, "--print-errorlogs", "--logbase", "testlog-rerun", *names])
    verdict = "passed on their second run" if rc == 0 else "failed again"
    print(f"rerun-failed: {', '.join(names)}: {verdict} (first run's log: {build}/meson-logs/testlog.txt)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
