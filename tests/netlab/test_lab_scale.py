#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-scale, small: an origin, a root relay, two edge relays and 240 viewers
(pps-swarm processes of 60) across namespaces (suite netlab). Every viewer
takes the stream from its edge through the whole measured span, the windows
arrive whole, every tier's process is measured, and the run leaves no
namespace behind.

Exit 77 (skipped) without root."""
import json
import os
import subprocess
import sys

from harness import SKIP, Failure, check  # tests/integration, on PYTHONPATH (meson's test environment)

VIEWERS = 240


def namespaces():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return {line.split()[0] for line in r.stdout.splitlines() if line.startswith("ppsscale")}


def small_tree(build, workdir):
    if os.geteuid() != 0:
        print("skipped: needs root")
        sys.exit(SKIP)
    before = namespaces()
    out = os.path.join(workdir, "scale")
    r = subprocess.run([os.path.join(build, "tools", "pps-scale"), "--viewers", str(VIEWERS), "--edges", "2",
                        "--per-swarm", "60", "--measure", "6", "--connect-rate", "400", "--out", out],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=170)
    print(r.stderr[-3000:])
    if r.returncode == SKIP:
        sys.exit(SKIP)
    check(r.returncode == 0, f"pps-scale exit {r.returncode}")
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)[0]
    print(json.dumps({k: res[k] for k in ("viewers", "got_stream_info", "streaming_at_end", "viewers_full",
                                           "windows", "whole_pct", "window_latency_ms")}))
    check(res["swarm_reports"] == 4, f"{res['swarm_reports']} pps-swarm reports of 4")
    check(res["got_stream_info"] == VIEWERS, f"{res['got_stream_info']} of {VIEWERS} viewers got STREAM_INFO")
    check(res["streaming_at_end"] == VIEWERS, f"{res['streaming_at_end']} of {VIEWERS} viewers streaming at the end")
    check(not res["refused"] and not res["connect_errors"], f"refused {res['refused']}, errors {res['connect_errors']}")
    # Enough windows for every viewer: 6 s of a 15 frames/s stream in windows of 1 or 2.
    check(res["windows"]["counted"] >= VIEWERS * 30, f"only {res['windows']['counted']} windows counted")
    check(res["whole_pct"] >= 99.0, f"{res['whole_pct']:.2f}% of windows whole")
    tiers = res["tiers"]
    for tier, n in (("origin", 1), ("root relay", 1), ("edge relay", 2), ("swarm", 4)):
        check(tiers.get(tier, {}).get("processes") == n, f"{tier}: {tiers.get(tier)}")
        check(all(c is not None for c in tiers[tier]["cpu_cores"]), f"{tier}: CPU not measured")
    check(tiers["edge relay"]["rss_kib_per_viewer"] is not None, "no memory per viewer")
    with open(os.path.join(out, "report.md")) as f:
        text = f.read()
    check(f"| {VIEWERS} | " in text and "On N machines" in text, "report.md lacks the run's row or the projection")
    left = namespaces() - before
    check(not left, f"namespaces left behind: {sorted(left)}")


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory(prefix="pps-scale-") as d:
        try:
            small_tree(sys.argv[1], d)
        except Failure as e:
            print("FAIL: %s" % e)
            sys.exit(1)
    print("ok")
