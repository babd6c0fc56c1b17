#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-sweep's server builds side by side (suite unit, no lab): every cell
runs once per build, the builds interleaved cell by cell in the order given,
the cell ids tell the builds apart and keep the order of a sweep without
builds, and the report compares the builds cell by cell with differences.

    test_sweep_builds.py BUILD_DIR VERSION   (its pps-server, pps-client,
                                             pps-config-doc; the project's version)
"""
import json
import os
import shutil
import sys
import tempfile

from ppslab import matrix, programs, report, sweep
from ppslab.errors import UsageError

INI = """
[sweep]
duration_s = 5
warmup_s = 0
seed = 3

[matrix t]
transport = tcp, minbuf(1,3)
window_frames = 2, 4
flows = 0
"""

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failures += not ok


build = programs.Build(sys.argv[1])
VERSION = sys.argv[2]
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "t.ini")
    with open(path, "w") as f:
        f.write(INI)
    plain = matrix.plan_cells(matrix.load_config(path, {}, build))
    cfg = matrix.load_config(path, {"server_builds": [("old", build.path), ("new", build.path)]}, build)
    cells = matrix.plan_cells(cfg)
    check(matrix.build_names(cfg) == ["old", "new"], "the builds in the order given")
    cfg = json.loads(json.dumps(cfg, sort_keys=True))  # as plan.json keeps it
    check([c["build"] for c in cells] == ["old", "new", "new", "old"] * (len(plain) // 2) + ["old", "new"] * (len(plain) % 2),
          "interleaved cell by cell, the order rotated: old, new; new, old; ...")
    check(sum(c["build"] == "new" for c in cells[::2]) == len(plain) // 2, "each build first about half the time")
    check([matrix.base_id(c) for c in cells[::2]] == [c["id"] for c in plain] and
          all(matrix.base_id(a) == matrix.base_id(b) for a, b in zip(cells[::2], cells[1::2])),
          "each pair is one cell of the sweep without builds, in its order")
    check(cells[0]["id"].endswith("-bold-r0") and cells[1]["id"].endswith("-bnew-r0"), f"ids: {cells[0]['id']}, {cells[1]['id']}")
    for bad, why in (([("old", build.path)], "one build"), ([("a b", build.path), ("c", build.path)], "a bad name"),
                     ([("a", d), ("b", build.path)], "a folder without programs")):
        try:
            matrix.load_config(path, {"server_builds": bad}, build)
            check(False, f"{why} is refused")
        except UsageError as e:
            check(True, f"{why} is refused: {e}")

    plan = {"config": cfg, "cells": cells}
    figures = {"old": {"frames_shown_pct": 98.0, "frame_latency_p50_ms": 100.0, "frame_latency_p95_ms": 200.0,
                       "longest_freeze_ms": 300.0, "throughput_share": None, "psnr_y_mean": 40.0},
               "new": {"frames_shown_pct": 99.5, "frame_latency_p50_ms": 90.0, "frame_latency_p95_ms": 250.0,
                       "longest_freeze_ms": 100.0, "throughput_share": None, "psnr_y_mean": 41.5}}
    records = [{"cell": c, "metrics": figures[c["build"]]} for c in cells]
    rows = report.build_comparison(plan, records)
    check(len(rows) == len(plain) + 1 and rows[-1]["cell"] == f"mean of {len(plain)} cells", "one row per cell and the means")
    text = "\n".join(report.build_comparison_section(plan, records))
    print(text)
    check("| 98.0 / 99.5 (+1.5) | 100 / 90 (-10) | 200 / 250 (+50) | 300 / 100 (-200) | - / - | 40.00 / 41.50 (+1.50) |" in text,
          "each metric: old / new (new - old)")

# The version a sweep records is the build's own (its pps-server --version),
# which a build outside the git tree has too: here a copy of the program in a
# folder git knows nothing of.
with tempfile.TemporaryDirectory() as d:
    server = os.path.join(d, "pps-server")
    shutil.copy2(build.server, server)
    outside = programs.Build(d, server=server)
    info = sweep.machine_info(outside, {"old": outside, "new": build})
    check(info["version"] == VERSION, f"the build's version {info['version']!r} (want {VERSION!r}), git {info['git']!r}")
    check(info["server_build_versions"] == {"old": VERSION, "new": VERSION},
          f"each server build's version: {info['server_build_versions']}")
sys.exit(1 if failures else 0)
