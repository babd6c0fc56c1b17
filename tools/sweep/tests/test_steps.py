#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The capacity-steps scenario, cut down: pps-sweep --preset
steps-tiny (8 -> 2 -> 0.8 -> 4 Mbit/s, 4 s each, 60-packet drop-tail, 50 ms
RTT, snow, the server's default transport), one cell of 16 s (about 25 s).

Always checked (the lab and the measurement work): the cell ran, the link
followed the trace (pps-linkem's settings name it; two step downs fell inside
the stream), the client heard of most of the capture grid, and the stream got
through (frames shown above --floor-shown-pct).

The must-show bounds, with a margin, on what is measured (never on wall-clock
speed): frames shown >= --min-shown-pct, the longest freeze outside the 1 s
after each step down <= --max-freeze-ms, frame latency p95 <= --max-p95-ms.
They are printed always and enforced with --enforce (as the netlab suite
runs it; the first version's server, before adaptation, missed them). The
server's path state once a second (estimate, acknowledged rate, cap state)
is printed beside the link's capacity, so a miss says whether the estimate
followed the steps.
Exit 77 without root or /dev/net/tun; nothing is left behind.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def print_path_timeline(cell_dir):
    """The server's view of the video connection once a second, beside the
    link's capacity: when frames shown fall short, whether the estimate (and
    the cap state: self = alone, competing = others hold the queue) followed
    the steps is the first thing to know."""
    try:
        with open(os.path.join(cell_dir, "server.jsonl")) as f:
            records = [json.loads(line) for line in f if line.startswith("{")]
        with open(os.path.join(cell_dir, "cell.json")) as f:
            steps = json.load(f).get("steps") or {}
    except (OSError, ValueError) as e:
        print(f"info no path timeline: {e}")
        return
    start = next((r.get("time_us") for r in records if r.get("type") == "start"), None)
    capacity = steps.get("capacity") or []
    if start is None:
        return
    print("path (server's video connection, once a second): t_s capacity_mbit state estimate_mbit acked_mbit srtt_ms retrans")
    for r in records:
        if r.get("type") != "path" or not r.get("valid"):
            continue
        t = r["t_us"]
        cap = next((c[1] for c in reversed(capacity) if c[0] <= t), None)
        print(f"  {(t - start) / 1e6:5.1f} {'-' if cap is None else f'{cap / 1e6:.1f}':>4} {r.get('cap_state', '-'):9s} "
              f"{r.get('estimate_bps', 0) / 1e6:5.2f} {r.get('acked_bps', 0) / 1e6:5.2f} "
              f"{r.get('srtt_us', 0) / 1e3:4.0f} {r.get('retrans_pkts', 0)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep", help="build/tools/pps-sweep")
    ap.add_argument("--enforce", action="store_true", help="fail when a target below is missed")
    # The must-show bounds are 95%, 500 ms and 400 ms; the margins allow for a 16-s run on a shared VM.
    ap.add_argument("--min-shown-pct", type=float, default=90.0)
    ap.add_argument("--max-freeze-ms", type=float, default=750.0)
    # p95 over a 16-s run rests on one step down's spike: 368 and 1022 ms in two CI runs of the
    # same code (docs/BENCHMARKS.md has the 40-s figures). Printed always, enforced only if given.
    ap.add_argument("--max-p95-ms", type=float, default=0.0)
    ap.add_argument("--floor-shown-pct", type=float, default=20.0, help="below this the pipeline is broken, enforced or not")
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        print("skipped: needs root and /dev/net/tun")
        return SKIP
    lab = "stp%d" % (os.getpid() % 10000)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="pps-steps-test-") as d:
        out = os.path.join(d, "out")
        r = subprocess.run(["/usr/bin/python3", args.sweep, "--preset", "steps-tiny", "--out", out, "--lab-name", lab],
                           capture_output=True, text=True, timeout=100)
        sys.stderr.write(r.stderr[-2000:])
        if r.returncode == SKIP:
            return SKIP
        if r.returncode != 0:
            print(f"FAIL pps-sweep exit {r.returncode}")
            return 1
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        check(summary["cells_done"] == 1, "one cell done")
        c = summary["cells"][0]
        cid = c["cell"]["id"]
        with open(os.path.join(out, "cells", cid, "linkem.json")) as f:
            linkem = json.load(f)
        check(bool(linkem["settings"]["fwd"]["trace"]) and linkem["settings"]["fwd"]["queue_limit_pkts"] == 60,
              "the link ran the step trace with a 60-packet queue")
        downs = (c.get("steps") or {}).get("step_downs_us") or []
        check(len(downs) == 2, f"two step downs inside the stream (found {len(downs)})")
        # 16 s less the 1 s skipped at each end, at 30 frames/s.
        check(c["frames_expected"] >= 0.9 * 14 * 30, f"frames expected {c['frames_expected']} (capture grid of the run)")
        shown, freeze, p95 = c["frames_shown_pct"], c["longest_freeze_outside_steps_ms"], c["frame_latency_p95_ms"]
        check(shown is not None and shown >= args.floor_shown_pct, f"frames shown {shown:.1f}% >= floor {args.floor_shown_pct:g}%")
        print(f"figures: frames shown {shown:.1f}%, p50/p95/p99 {c['frame_latency_p50_ms']:.0f}/{p95:.0f}/{c['frame_latency_p99_ms']:.0f} ms, "
              f"longest freeze {c['longest_freeze_ms']:.0f} ms ({freeze:.0f} ms outside the 1 s after step downs), "
              f"total frozen {c['total_frozen_ms'] / 1e3:.1f} s, received {c['received_bps'] / 1e6:.2f} Mbit/s")
        print_path_timeline(os.path.join(out, "cells", cid))
        targets = [(shown >= args.min_shown_pct, f"target: frames shown {shown:.1f}% >= {args.min_shown_pct:g}%"),
                   (freeze <= args.max_freeze_ms, f"target: longest freeze outside steps {freeze:.0f} ms <= {args.max_freeze_ms:g} ms"),
                   (p95 <= args.max_p95_ms, f"target: frame latency p95 {p95:.0f} ms <= {args.max_p95_ms:g} ms")]
        if args.max_p95_ms <= 0:
            print(f"info frame latency p95 {p95:.0f} ms (must-show: <= 400 ms; not enforced, see --max-p95-ms)")
            targets.pop()
        for ok, what in targets:
            if args.enforce:
                check(ok, what)
            else:
                print(("met  " if ok else "MISS ") + what + " (not enforced)")
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        check(lab not in left, "no namespace left behind")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
