#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-fanout: heterogeneous clients of one encode. One pps-server
in the sender namespace of a multi-receiver lab (`pps-netlab up --receivers N`),
one pps-client in each receiver namespace, each receiver behind its own
pps-linkem link with its own rate, delay and queue; figures per client.

    pps-fanout --rates 0.5,2,8 --out DIR                 three clients, one encode
    pps-fanout --rates 0.5,2,8 --delays 25ms --queue auto --duration 30 --pattern smpte --psnr --out DIR
    pps-fanout --rates 0.5,2,8 --relay 2 --out DIR          the same encode through a tree of two relays
    pps-fanout report DIR                                 report.md, results.json and plots again

Per client (ppslab.metrics, the same definitions as pps-sweep): frames shown,
frame latency p50/p95/p99, longest freeze and total frozen time, received
bit/s, PSNR-Y (--psnr, pps-peer-score); the server's per-second --log per
client when the server has it. Outputs in DIR: run.json, lab.json,
client-rcvK.jsonl, linkem-rcvK.json, server.json(l), results.json, report.md,
timeline-rcvK.png, latency.png. Run as root with /usr/bin/python3 (matplotlib).
A benchmark: it prints figures, it does not pass or fail on them.
"""
import argparse
import sys

from ppslab import fanout, programs
from ppslab.errors import EXIT_USAGE, UsageError
from ppslab.version import add_version_option


def main(argv):
    if argv and argv[0] == "report":
        ap = argparse.ArgumentParser(prog=f"{fanout.PROGRAM} report")
        ap.add_argument("dir")
        a = ap.parse_args(argv[1:])
        sys.stdout.write(fanout.report(a.dir))
        return 0
    ap = argparse.ArgumentParser(prog=fanout.PROGRAM, description="One pps-server, one pps-client per receiver namespace, each behind its own link.",
                                 epilog="Exit status: 0 done, 1 failed, 2 usage, 77 no root or /dev/net/tun, 130 interrupted.")
    add_version_option(ap, fanout.PROGRAM)
    ap.add_argument("--rates", default=fanout.PPS_DEFAULT_RATES, help="Mbit/s (or RATEkbit...) per receiver, comma-separated (default 0.5,2,8)")
    ap.add_argument("--delays", default="25ms", help="one-way delay per receiver (1 or N values; default 25ms = 50 ms RTT)")
    ap.add_argument("--queue", default="auto", help="queue per receiver in packets, or auto = 1 BDP (1 or N values)")
    ap.add_argument("--duration", type=float, default=30, help="seconds of streaming (default 30)")
    ap.add_argument("--pattern", default="smpte", help="source.pattern (default smpte)")
    ap.add_argument("--transport", default="minbuf(1,3)", help="tcp or minbuf(A,B) (default minbuf(1,3), the server's default)")
    ap.add_argument("--server-set", action="append", metavar="SECTION.KEY=VALUE", help="more pps-server --set; repeatable")
    ap.add_argument("--client-set", action="append", metavar="SECTION.KEY=VALUE",
                    help="pps-client --set for every receiver; repeatable")
    ap.add_argument("--playout", default="asap", choices=("fixed", "asap", "adaptive"), help="client playout (default asap)")
    ap.add_argument("--relay", type=int, default=0, choices=(0, 1, 2),
                    help="1: the stream goes through pps-relay (pps-server publishing into it); 2: through a tree of two "
                         "relays, the viewers' subscribing to the publisher's; all on the sender's side (default 0: served directly)")
    ap.add_argument("--psnr", action="store_true", help="score the pictures shown with pps-peer-score (PSNR-Y, SSIM-Y)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", help="meson build directory (default: the one this script is in)")
    ap.add_argument("--lab-name")
    args = ap.parse_args(argv)
    if args.duration < 5:
        ap.error("--duration: at least 5 s")
    try:
        return fanout.run(programs.Build(args.build), args)
    except UsageError as error:
        fanout.log(str(error))
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
