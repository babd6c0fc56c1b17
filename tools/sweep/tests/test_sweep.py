#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A tiny pps-sweep (suite netlab): two cells of 8 s (tcp and minbuf(1,3),
4 elephants, 10 Mbit/s, 50 ms RTT), then checks the folder: summary.json,
the CSVs and the PNG plots, with sane contents. Exit 77 without root or
/dev/net/tun; nothing is left behind (pps-sweep tears each lab down)."""
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77

CONFIG = """
[sweep]
description = test
duration_s = 8
warmup_s = 1
repetitions = 1
seed = 3

[server]
source.pattern = smpte

[matrix t]
transport = tcp, minbuf(1,3)
window_frames = 2
flows = 4
rtt_ms = 50
rate_mbit = 10
queue = droptail
congestion = cubic
"""


def check(ok, what):
    if not ok:
        print("FAIL: " + what)
        sys.exit(1)


def main(sweep):
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        print("skipped: needs root and /dev/net/tun")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="pps-sweep-test-") as d:
        config = os.path.join(d, "tiny.ini")
        with open(config, "w") as f:
            f.write(CONFIG)
        out = os.path.join(d, "out")
        r = subprocess.run(["/usr/bin/python3", sweep, "--config", config, "--out", out,
                            "--lab-name", "swt%d" % (os.getpid() % 10000)],
                           capture_output=True, text=True, timeout=100)
        sys.stdout.write(r.stdout[-3000:])
        sys.stderr.write(r.stderr[-3000:])
        if r.returncode == SKIP:
            return SKIP
        check(r.returncode == 0, "pps-sweep exit %d" % r.returncode)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        check(summary["cells_done"] == 2, "cells done: %d" % summary["cells_done"])
        for c in summary["cells"]:
            name = c["cell"]["id"]
            check(c["windows_transmitted"] >= 60, "%s: %d windows transmitted" % (name, c["windows_transmitted"]))
            check(0 <= c["within_1000ms_pct"] <= 100 and c["within_1000ms_pct"] >= c["within_100ms_pct"],
                  "%s: within percentages %r" % (name, c))
            check(c["server_throughput_bps"] > 100e3, "%s: throughput %r" % (name, c["server_throughput_bps"]))
            check(c["friendliness_ratio"] is not None and 0 < c["friendliness_ratio"] < 20,
                  "%s: friendliness %r" % (name, c["friendliness_ratio"]))
            check(c["separation_index"] >= 1, "%s: separation index" % name)
            check(c["server_cpu_s"] > 0 and c["client_cpu_s"] > 0, "%s: cpu" % name)
            check(c["shares"] and c["shares"]["all"]["bottleneck_queue_ms"] >= 0, "%s: latency shares" % name)
            for f in ("client.jsonl", "server.json", "lab.json", "linkem.json", "elephants.json", "windows.csv"):
                check(os.path.getsize(os.path.join(out, "cells", name, f)) > 0, "%s: %s" % (name, f))
        tcp = [g for g in summary["groups"] if g["transport"] == "tcp"][0]
        check(abs(tcp["throughput_vs_tcp"] - 1) < 1e-9, "tcp normalized to itself")
        with open(os.path.join(out, "summary.csv")) as f:
            rows = list(csv.DictReader(f))
        check(len(rows) == 2 and "within_300ms_pct" in rows[0], "summary.csv rows")
        plots = os.listdir(os.path.join(out, "plots"))
        for want in ("throughput.png", "dropped.png", "timeline.png"):
            check(want in plots, "plot %s missing (%s)" % (want, plots))
        check(any(p.startswith("tolerance-") for p in plots) and any(p.startswith("frame-cdf-") for p in plots),
              "tolerance and CDF plots: %s" % plots)
        for p in plots:
            with open(os.path.join(out, "plots", p), "rb") as f:
                head = f.read(8)
            check(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(os.path.join(out, "plots", p)) > 5000, "%s is a PNG" % p)
        check(os.path.getsize(os.path.join(out, "report.md")) > 1000, "report.md")
        # The side-by-side table: one row per transport here, two runs' worth of columns.
        t = subprocess.run(["/usr/bin/python3", sweep, "table", out], capture_output=True, text=True, timeout=60)
        check(t.returncode == 0, "pps-sweep table exit %d: %s" % (t.returncode, t.stderr))
        lines = t.stdout.splitlines()
        check(len(lines) == 4 and lines[0].startswith("| path | content | setting |"), "table: %r" % t.stdout)
        check(lines[2].startswith("| 4 cubic flows | ") and "minbuf(1,3)" in t.stdout and "tcp" in lines[2] + lines[3],
              "table rows: %r" % t.stdout)
        # Where the latency goes: the same rows, figures from each cell's logs.
        t = subprocess.run(["/usr/bin/python3", sweep, "table", "--tail", out], capture_output=True, text=True,
                           timeout=60)
        check(t.returncode == 0, "pps-sweep table --tail exit %d: %s" % (t.returncode, t.stderr))
        lines = t.stdout.splitlines()
        check(len(lines) == 4 and "to the decoder p50, p95 ms" in lines[0], "tail table: %r" % t.stdout)
        for line in lines[2:]:
            cols = [c.strip() for c in line.strip("|").split("|")]
            decoder, screen = cols[5].split(", "), cols[6].split(", ")
            check(all(re.fullmatch(r"\d+", v) for v in decoder + screen), "tail figures: %r" % line)
            # A frame is on screen no sooner than it reached the decoder.
            check(int(screen[0]) >= int(decoder[0]) and int(screen[1]) >= int(decoder[1]),
                  "screen before decoder: %r" % line)
            check(re.fullmatch(r"\d+\.\d", cols[10]) is not None, "bottleneck drops: %r" % line)
            check(0 <= float(cols[4]) <= 100, "frames with every layer: %r" % line)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        check("swt%d" % (os.getpid() % 10000) not in left, "namespaces left behind: " + left)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
