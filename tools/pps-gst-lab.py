#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The GStreamer elements in the lab, beside the programs they wrap.

Per run: a pps-netlab lab (10 Mbit/s, 50 ms RTT, 1-BDP drop-tail, cubic), 20
cubic elephants from the sender's side started --warmup seconds before the
stream, and one of three pairs for --duration seconds:

  programs   pps-server            -> pps-client
  ppssink    gst-launch ... ppssink -> pps-client
  ppssrc     pps-server            -> gst-launch ppssrc ... ! fakesink sync=true

Both senders encode the same picture (videotestsrc smpte scrolling 2 px per
frame, 640x480 at 30 frames/s, pixel timecode on) with the same defaults.
Figures come from the receiver's JSON Lines summary (pps-client --log,
ppssrc log-file): frames shown, frame latency p50/p95, longest freeze, rate.
Pairs alternate within each repetition, so a busy moment of a shared machine
falls on all three alike. A benchmark: it prints figures, it passes nothing.

    sudo flock -x /tmp/pps-measure.lock build/tools/pps-gst-lab --reps 2 --duration 20
"""
import argparse
import os
import statistics
import sys
import tempfile

from ppslab import gstlab, programs
from ppslab.errors import EXIT_SKIP, NotPermitted
from ppslab.version import add_version_option


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_version_option(ap, "pps-gst-lab")
    ap.add_argument("--build", help="meson build directory (default: the one this script is in)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of stream per run")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of cross traffic first")
    ap.add_argument("--out", help="folder for the logs (default: a temporary one)")
    args = ap.parse_args()
    outdir = args.out or tempfile.mkdtemp(prefix="pps-gst-lab-")
    os.makedirs(outdir, exist_ok=True)
    build = programs.Build(args.build)
    results = {p: [] for p in gstlab.PAIRS}
    try:
        for rep in range(args.reps):
            for pair in gstlab.PAIRS:
                s = gstlab.run_pair(build, pair, rep, outdir, args.duration, args.warmup)
                results[pair].append(s)
                print("%-9s rep %d: shown %5.1f%%  p50 %6.1f ms  p95 %6.1f ms  freeze %6.0f ms"
                      "  %.2f Mbit/s" % (pair, rep, s["frames_shown_pct"],
                                         s["frame_latency_p50_ms"], s["frame_latency_p95_ms"],
                                         s["freeze_longest_ms"], s["received_bps"] / 1e6),
                      flush=True)
    except NotPermitted as e:
        print("skipped: %s" % e)
        return EXIT_SKIP
    print("\nmean over %d runs of %g s (logs in %s):" % (args.reps, args.duration, outdir))
    base = results["programs"]
    for pair in gstlab.PAIRS:
        rs = results[pair]
        shown = statistics.mean(r["frames_shown_pct"] for r in rs)
        p50 = statistics.mean(r["frame_latency_p50_ms"] for r in rs)
        p95 = statistics.mean(r["frame_latency_p95_ms"] for r in rs)
        rel = ""
        if pair != "programs":
            rel = "  (vs programs: shown %+.1f%%, p50 %+.1f%%)" % (
                100 * (shown / statistics.mean(r["frames_shown_pct"] for r in base) - 1),
                100 * (p50 / statistics.mean(r["frame_latency_p50_ms"] for r in base) - 1))
        print("%-9s shown %5.1f%%  p50 %6.1f ms  p95 %6.1f ms%s" % (pair, shown, p50, p95, rel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
