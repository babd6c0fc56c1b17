#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-protolat-bench: the protocol-latency experiments of IWQoS 2002 section 4
(and TOMCCAP 2008 sections 4.1 and 5.1) in ppstream's network lab.

For every bandwidth x RTT x ECN setting it brings up a lab (drop-tail queue
without ECN, DRD with ECN on both ends), and for every repetition runs each
stream configuration (tcp, minbuf(1,0), minbuf(1,3), minbuf(2,0)) in a random
order, each against the papers' cross-traffic schedule scaled to the run
length: 15 elephants from 1/16 to 3/4 of the run, mice (20 KB flows, about 30%
of the link) from 1/4 to 15/16, CBR UDP at 10% of the link from 1/2 to 15/16.

Outputs in --out: runs.csv (one row per run), summary.csv and summary.json
(one entry per configuration), table.md (laid out like IWQoS Tables 1-3 with
the paper's numbers beside ours), and PNG plots: cdf-*.png (latency CDF, log
axis, like Fig. 5) and timeline-*.png (latency over receive time, like Fig. 3).

Run as root with /usr/bin/python3 (Debian's, with numpy and matplotlib).
This is a benchmark: it prints figures, it does not pass or fail on them.
"""
import argparse
import os
import shlex
import sys

from ppslab import programs, protolat
from ppslab.errors import EXIT_SKIP
from ppslab.version import add_version_option


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_version_option(ap, "pps-protolat-bench")
    ap.add_argument("--quick", action="store_true",
                    help="12 Mbit/s, 100 ms RTT, 1 repetition of 30 s (the target scenario)")
    ap.add_argument("--rates", default="12mbit,30mbit")
    ap.add_argument("--rtts", default="25,50,100", help="round-trip times in ms")
    ap.add_argument("--ecn", default="both", choices=["both", "on", "off"])
    ap.add_argument("--configs", default="tcp,m10,m13,m20")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--duration", type=float, default=40.0, help="seconds per run")
    ap.add_argument("--elephants", type=int, default=15)
    ap.add_argument("--mice", type=int, default=None, help="parallel mouse flows (default: ~30%% of the link)")
    ap.add_argument("--cbr", type=int, default=1, help="1 = CBR UDP at 10%% of the link, 0 = none")
    ap.add_argument("--reverse", action="store_true", help="cross traffic also on the reverse path")
    ap.add_argument("--congestion", default="default", choices=["default", "cubic", "reno", "bbr"],
                    help="latency stream's congestion control (default: the lab's, cubic)")
    ap.add_argument("--batch", type=int, default=1,
                    help="packets per write(2); 1 = the papers' application model (IWQoS 2002 section 2.3)")
    ap.add_argument("--thin", action="store_true", help="TCP_THIN_LINEAR_TIMEOUTS on the latency stream")
    ap.add_argument("--queue-bdp", type=float, default=1.0,
                    help="drop-tail queue in bandwidth-delay products (default 1; with ECN the DRD queue "
                         "marks above 1 BDP and drops above 2, IWQoS 2002 section 3.2)")
    ap.add_argument("--samples", action="store_true", help="log every writer reading (cwnd, held, bound)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--build", default=None, help="meson build directory (default: the one this script is in)")
    ap.add_argument("--netlab", default=None)
    ap.add_argument("--protolat", default=None)
    ap.add_argument("--lab-name", default="protolat")
    ap.add_argument("--lab-arg", action="append", default=[], help="extra argument for pps-netlab up")
    ap.add_argument("--analyse-only", metavar="DIR", help="recompute tables and plots from DIR/runs.json")
    args = ap.parse_args()
    cmdline = "pps-protolat-bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])

    if args.analyse_only:
        return protolat.analyse_only(args.analyse_only, cmdline)
    if args.quick:
        args.rates, args.rtts, args.reps, args.duration = "12mbit", "100", 1, 30.0
    build = programs.Build(args.build, protolat=args.protolat, netlab=args.netlab)
    args.protolat, args.netlab = build.protolat, build.netlab
    for exe in (args.protolat, args.netlab):
        if not os.access(exe, os.X_OK):
            print("missing %s (build first, or pass --protolat/--netlab)" % exe, file=sys.stderr)
            return EXIT_SKIP
    if os.geteuid() != 0:
        print("the lab needs root (network namespaces)", file=sys.stderr)
        return EXIT_SKIP
    return protolat.run_all(args, cmdline)


if __name__ == "__main__":
    sys.exit(main())
