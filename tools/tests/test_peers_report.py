#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-peers' matrix and verdicts (suite unit, no network): --pattern's
list, the run folders per scenario x pattern (and the older layout without
a pattern folder), the matrix table's rows and the must-show verdicts made
from made-up results: met, missed and not measured, each where it should be;
with --runs, a cell per run."""
import os
import sys
import tempfile

from ppslab import peers

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    failures += not ok


def raises(f, *args):
    try:
        f(*args)
    except ValueError:
        return True
    return False


# --pattern
check(peers.parse_patterns("ball,smpte, snow,ball") == ["ball", "smpte", "snow"], "patterns in order, no repeats")
check(raises(peers.parse_patterns, "smpte,bar", ["webrtc"]), "bar refused with WebRTC (its page draws ball, smpte, snow)")
check(peers.parse_patterns("bar", ["srt"]) == ["bar"], "bar taken without WebRTC (pps-peer-score regenerates it)")
check(raises(peers.parse_patterns, "nosuch", ["srt"]), "an unknown pattern refused")
check(raises(peers.parse_patterns, " , "), "an empty list refused")
check(peers.one_way_delay_ms("idle") == 25.0 and peers.one_way_delay_ms("steps") == 25.0, "one-way delay from the scenario's --delay")

# run folders: one per scenario x pattern x variant; the older layout still found
with tempfile.TemporaryDirectory() as out:
    def touch(d):
        os.makedirs(d, exist_ok=True)
        for name in ("run.json", "scores.tsv"):
            open(os.path.join(d, name), "w").close()

    a = peers.run_dir(out, "idle", "ball", "srt")
    b = peers.run_dir(out, "idle", "smpte", "srt")
    check(a != b, "two patterns, two folders")
    touch(a)
    touch(b)
    touch(os.path.join(out, "paper", "gst-tcp"))  # made before the pattern folders
    os.makedirs(peers.run_dir(out, "idle", "snow", "webrtc"))  # a run that did not finish: no files
    found = [os.path.relpath(d, out) for d in peers.find_runs(out)]
    check(found == ["idle/ball/srt", "idle/smpte/srt", "paper/gst-tcp"], f"runs found {found}")


def result(scenario, pattern, system, shown, p50, p95, psnr=None, share=None, bps=400e3, kbps=None, variant=None, run=1):
    label, kind, _ = peers.SYSTEMS[system]
    sc = peers.SCENARIOS[scenario]
    if run > 1:
        label += f", run {run}"
    return {"scenario": scenario, "pattern": pattern, "system": system, "run": run,
            "variant": variant or peers.run_variant(system, run), "label": label,
            "kind": kind, "frames_shown_pct": shown, "latency_ms": {"p50": p50, "p95": p95, "p99": p95 and p95 + 10},
            "longest_freeze_ms": 100.0, "longest_freeze_outside_steps_ms": 90.0, "steps": sc.get("steps"),
            "psnr_y_mean": psnr, "bits_per_second": bps, "peer_kbps": kbps, "throughput_share": share,
            "elephant_mean_bps": 450e3 if share else None, "received_fps": 30.0,
            "received_sizes": {"640x480": 10} if kind != "webrtc" else {"480x360": 6, "320x240": 3, "640x480": 1},
            "elephants": sc["elephants"], "one_way_delay_ms": 25.0}


results = [
    # idle, ball: every item met
    result("idle", "ball", "ppstream-default", 100.0, 38, 60, psnr=40.0),
    result("idle", "ball", "gst-tcp", 100.0, 90, 100, psnr=42.0, kbps=2000),
    result("idle", "ball", "srt", 100.0, 210, 220, psnr=42.0, kbps=2000),
    result("idle", "ball", "webrtc", 97.0, 60, 75),
    # paper, smpte: shown missed (below SRT), p95 missed against SRT, WebRTC under 90% not held against,
    # share met, PSNR missed
    result("paper", "smpte", "ppstream-default", 99.5, 200, 320, psnr=23.0, share=1.1),
    result("paper", "smpte", "gst-tcp", 95.0, 700, 2400, psnr=25.0, kbps=400),
    result("paper", "smpte", "srt", 100.0, 260, 270, psnr=25.2, kbps=400),
    result("paper", "smpte", "webrtc", 70.0, 180, 250, share=1.3),
    result("paper", "smpte", "gst-tcp", 30.0, 9000, 19000, psnr=38.0, kbps=1950, variant="gst-tcp-1950k"),
    # steps, snow: no WebRTC run
    result("steps", "snow", "ppstream-default", 99.6, 130, 300, psnr=12.0),
    result("steps", "snow", "gst-tcp", 99.0, 110, 4600, psnr=12.4, kbps=1500),
    result("steps", "snow", "srt", 80.0, 220, 680, psnr=12.4, kbps=1500),
]
v = peers.verdicts(results)


def verdict(scenario, pattern, start):
    rows = [x for x in v if (x["scenario"], x["pattern"]) == (scenario, pattern) and x["item"].startswith(start)]
    return rows[0]["verdict"] if len(rows) == 1 else f"{len(rows)} rows"


check(verdict("idle", "ball", "frames shown") == "met", "idle ball: shown met (100% >= every peer's, >= 99%)")
check(verdict("idle", "ball", "p95") == "met", "idle ball: p95 met")
check(verdict("idle", "ball", "idle p50") == "met", "idle ball: p50 38 <= 25 + 15")
check(verdict("idle", "ball", "throughput") == "0 rows", "idle: no share item")
check(verdict("paper", "smpte", "frames shown") == "missed", "paper smpte: 99.5% < SRT's 100%: missed")
check(verdict("paper", "smpte", "p95") == "missed", "paper smpte: p95 320 > SRT's 270: missed")
p95 = [x for x in v if x["scenario"] == "paper" and x["item"].startswith("p95")][0]["measured"]
check("WebRTC 70.0% shown: not held against" in p95 and "GStreamer TCP 2400" in p95, f"the p95 row says whom it holds against: {p95}")
check("19000" not in p95, "the --extra-peer-kbps variant is not a peer of the verdicts")
check(verdict("paper", "smpte", "idle p50") == "0 rows", "paper: no idle p50 item")
check(verdict("paper", "smpte", "throughput") == "met", "paper: share 1.1 >= 0.8")
check(verdict("paper", "smpte", "PSNR") == "missed", "paper: 23.0 dB < SRT's 25.2")
check(verdict("steps", "snow", "frames shown") == "not measured", "steps: no WebRTC run: shown not measured")
check(verdict("steps", "snow", "p95") == "not measured", "steps: p95 under GStreamer TCP's, no WebRTC run: not measured")
check(verdict("steps", "snow", "idle p50") == "0 rows", "steps: no idle p50 item (not an idle path)")
# a p95 above a held peer's is missed even with a peer's run missing
results2 = [r for r in results if r["scenario"] == "steps"] + [result("steps", "snow", "gst-tcp", 100.0, 100, 200, kbps=1500, variant=None)]
results2 = [r for r in results2 if not (r["system"] == "gst-tcp" and r["latency_ms"]["p95"] == 4600)]
v2 = peers.verdicts(results2)
check([x["verdict"] for x in v2 if x["item"].startswith("p95")] == ["missed"], "p95 300 > 200: missed though WebRTC's run is missing")
# idle p50 missed, smpte and ball only
results3 = [result("idle", "smpte", "ppstream-default", 100.0, 96, 114, psnr=36.0),
            result("idle", "snow", "ppstream-default", 100.0, 96, 114, psnr=12.0)]
v3 = peers.verdicts(results3)
check([x["verdict"] for x in v3 if x["item"].startswith("idle p50")] == ["missed"], "idle smpte p50 96 > 40: missed; no p50 item for snow")
check(peers.verdicts([result("idle", "ball", "srt", 100.0, 200, 210, kbps=2000)])[0]["verdict"] == "not measured", "no ppstream run: not measured")

# the tables
matrix = peers.matrix_table(results).splitlines()
check(len(matrix) == 2 + len(results), f"matrix: a row per result ({len(matrix) - 2})")
check(matrix[2].startswith("| idle | ball | ppstream, default settings | 100.0% | – | 38 / 60 / 70 |"), f"matrix row: {matrix[2]}")
# on screen for a 60 Hz refresh: ppstream's and WebRTC's, never the GStreamer peers' (appsink times)
seen = dict(results[0], frames_seen_pct=97.5)
check(" | 100.0% | 97.5% | " in peers.matrix_table([seen]).splitlines()[2], "ppstream's on-screen share in its row")
check(" | – | " in peers.matrix_table([dict(seen, kind="peer", peer_kbps=400)]).splitlines()[2], "no on-screen share for a GStreamer peer")
web = [line for line in matrix if "WebRTC" in line and "paper" in line][0]
check("(GCC)" in web and "480x360 60%, 320x240 30%" in web and "| – |" in web, f"WebRTC's row: rate by GCC, sizes, no PSNR: {web}")
# a copy of the stream: its row gives the stream's rate and share, the wire's beside them
copies = dict(results[4], bits_per_second=800e3, stream_bits_per_second=400e3, wire_share=1.8)
row = peers.matrix_table([copies]).splitlines()[2]
check("| 0.40 (0.80 on the wire) | 1.10 (1.80) |" in row, f"the stream's rate and share, then the wire's: {row}")
share = [x for x in peers.verdicts([copies] + results[5:8]) if x["item"].startswith("throughput")][0]
check("1.10 (0.40 vs 0.45 Mbit/s; 1.80 on the wire)" in share["measured"], f"share item: {share}")
steps = [line for line in matrix if line.startswith("| steps | snow | ppstream")][0]
check("| 100 (90) |" in steps, f"steps rows carry the freeze outside the steps: {steps}")
table = peers.verdict_table(v)
check("**missed**" in table and table.rstrip().endswith(f"of {len(v)} items."), "verdict table marks misses and counts")
check(sorted(results, key=peers.result_order)[0]["system"] == "ppstream-default", "order: scenario, pattern, system")
check(peers.run_order(["gst-tcp", "webrtc", "ppstream-default"])[0] == "ppstream-default", "the default server runs first without minbuf (auto rate)")
check(peers.rate_source(["ppstream-default", "ppstream-minbuf"]) == "ppstream-minbuf", "minbuf sets the auto rate when it runs")

# --runs: run K of each system is a cell of its own, with its own verdicts
runs = [result("steps", "ball", "ppstream-default", 100.0, 39, 64), result("steps", "ball", "webrtc", 98.5, 50, 66),
        result("steps", "ball", "ppstream-default", 100.0, 38, 65, run=2), result("steps", "ball", "webrtc", 98.7, 56, 60, run=2),
        result("steps", "ball", "ppstream-default", 100.0, 39, 62, run=3), result("steps", "ball", "webrtc", 84.8, 41, 73, run=3)]
vr = [x for x in peers.verdicts(runs) if x["item"].startswith("p95")]
check([(x["run"], x["verdict"]) for x in vr] == [(1, "not measured"), (2, "missed"), (3, "not measured")],
      f"a p95 verdict per run: met by WebRTC's own run only ({[(x['run'], x['verdict']) for x in vr]})")
check("66" in vr[0]["measured"] and "60" in vr[1]["measured"], "each run's verdict holds it against the same run's peer")
check("| steps, run 2 | ball | p95" in peers.verdict_table(vr), "the verdict table names the run")
tally = peers.verdict_tally(peers.verdicts(runs))
check("| steps | ball | p95 <= every peer's showing >= 90% | 0 / 1 / 2 |" in tally, f"the tally per item over the runs: {tally}")
check(peers.verdict_tally(v) == "", "no tally with one run")
rows = peers.matrix_table(sorted(runs, key=peers.result_order)).splitlines()[2:]
check([r.split(" | ")[2] for r in rows[:3]] == ["ppstream, default settings", "ppstream, default settings, run 2",
                                               "ppstream, default settings, run 3"], f"a system's runs side by side: {rows[:3]}")
check(peers.is_main_variant(runs[2]) and not peers.is_main_variant(dict(runs[2], variant="srt-1950k")),
      "a run's folder is its system's; an --extra-peer-kbps one is not")
check(peers.run_variant("srt", 1) == "srt" and peers.run_variant("srt", 3) == "srt-run3", "run folders: SYSTEM, SYSTEM-runK")
with tempfile.TemporaryDirectory() as out:
    for name in ("webrtc", "webrtc-run2", "webrtc-run3", "webrtc-run12", "srt-run3"):
        os.makedirs(peers.run_dir(out, "steps", "ball", name))
    peers.stale_runs(out, "steps", "ball", "webrtc", 2)
    left = sorted(os.listdir(os.path.join(out, "steps", "ball")))
    check(left == ["srt-run3", "webrtc", "webrtc-run2"], f"runs above --runs removed, the system's only: {left}")
check(peers.estimate_s(["idle"], None, ["srt"], 30, 5, runs=3) == 3 * peers.estimate_s(["idle"], None, ["srt"], 30, 5),
      "the estimate counts the runs")

# through the relay against served directly: shown within 1 point, p50 within 5 ms
relayed = [result("idle", "ball", "ppstream-default", 100.0, 39, 43), result("idle", "ball", "ppstream-relay", 99.5, 43, 47),
           result("paper", "smpte", "ppstream-default", 98.8, 219, 395), result("paper", "smpte", "ppstream-relay", 96.6, 209, 402),
           result("steps", "ball", "ppstream-relay", 100.0, 47, 83)]
rv = peers.relay_verdicts(relayed)
check(len(rv) == 4, f"relay verdicts: two per cell where both ran ({len(rv)}), none for a cell without the direct run")
check([x["verdict"] for x in rv if x["scenario"] == "idle"] == ["met", "met"], "idle: 99.5 vs 100 within 1 point; 43 <= 39 + 0 + 5")
check([x["verdict"] for x in rv if x["scenario"] == "paper"] == ["missed", "met"], "paper: 96.6 vs 98.8 missed; 209 <= 224 met")
check(peers.relay_verdicts(results) == [], "no relay run: no relay verdicts")
check("ppstream-relay" not in [x.get("system") for x in peers.verdicts(relayed)], "the relay row is no peer of the must-show verdicts")
sys.exit(1 if failures else 0)
