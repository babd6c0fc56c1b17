#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-scale: many viewers of one stream through a tree of pps-relay
processes, each tier in network namespaces of its own: an origin (pps-server
--publish), a root relay, K edge relays (--upstream the root), and behind each
edge pps-swarm processes holding the viewers (real protocol clients that do
not decode).

    pps-scale --viewers 10000 --edges 4 --out DIR             one count
    pps-scale --viewers 1000,2500,5000,10000 --out DIR        where the limit is
    pps-scale report DIR                                      report.md and results.json again

Per count: viewers that got the full stream (every window of the measured
span whole), window latency p50/p99/max against the stream's latency budget,
CPU and memory per viewer and per relay, the machine's CPU and the kernel's
TCP memory; then, on paper, what the same tree needs on N machines. Run as
root. A benchmark: it prints figures and checks, it does not pass or fail on
them (exit 0 when it ran).
"""
import argparse
import sys

from ppslab import programs, scale
from ppslab.errors import EXIT_USAGE, UsageError
from ppslab.version import add_version_option


def main(argv):
    if argv and argv[0] == "report":
        ap = argparse.ArgumentParser(prog=f"{scale.PROGRAM} report")
        ap.add_argument("dir")
        a = ap.parse_args(argv[1:])
        sys.stdout.write(scale.report(a.dir))
        return 0
    ap = argparse.ArgumentParser(prog=scale.PROGRAM, description="Viewers of one stream through a relay tree across namespaces.",
                                 epilog="Exit status: 0 done, 1 failed, 2 usage, 77 not root, 130 interrupted.")
    add_version_option(ap, scale.PROGRAM)
    ap.add_argument("--viewers", default="1000", help="viewers in all, or a comma list run one after another (default 1000)")
    ap.add_argument("--edges", type=int, default=4, help="edge relays under the root (0: viewers on the root itself; default 4)")
    ap.add_argument("--per-swarm", type=int, default=500, help="viewers per pps-swarm process (default 500)")
    ap.add_argument("--connect-rate", type=float, default=1000, help="new viewers per second over all swarms during the ramp (default 1000)")
    ap.add_argument("--measure", type=float, default=30, help="seconds measured after the ramp (default 30)")
    ap.add_argument("--pattern", default="smpte", help="the origin's source.pattern (default smpte)")
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--fps", type=int, default=15)
    ap.add_argument("--base-kbps", type=int, default=64, help="the base layer's cap (encoder.base_vbv_kbps; default 64)")
    ap.add_argument("--enhancement-kbps", type=int, default=64, help="each enhancement layer's cap (default 64)")
    ap.add_argument("--origin-set", action="append", metavar="SECTION.KEY=VALUE",
                    help="more settings for the origin's pps-server (layers, window length, ...); repeatable")
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", help="meson build directory (default: the one this script is in)")
    args = ap.parse_args(argv)
    if args.edges < 0 or args.edges > 99:
        ap.error("--edges: 0..99")
    if not 1 <= args.per_swarm <= 20000:
        ap.error("--per-swarm: 1..20000")
    if args.measure < 5:
        ap.error("--measure: at least 5 s")
    try:
        counts = [int(v) for v in args.viewers.split(",") if v.strip()]
    except ValueError:
        ap.error("--viewers: whole numbers, comma separated")
    if not counts or min(counts) < 1 or max(counts) > 60000:
        ap.error("--viewers: 1..60000 each")
    try:
        return scale.run(programs.Build(args.build), args)
    except UsageError as error:
        scale.log(str(error))
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
