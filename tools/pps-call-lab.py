#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-call-lab: a two-way or group call through pps-relay in the network
lab. The relay in the sender namespace of a multi-receiver lab (`pps-netlab
up --receivers N`), each participant one `pps-call` in its own receiver
namespace behind its own link (forward: its downlink, reverse: its uplink);
figures per direction, SENDER -> RECEIVER.

    pps-call-lab --out DIR                                         two parties, 8/1 and 8/8 Mbit/s down/up
    pps-call-lab --participants 3 --down 8 --up 2 --out DIR        three parties through one relay
    pps-call-lab report DIR                                        report.md and results.json again

Per direction (ppslab.metrics, the same definitions as pps-sweep): frames
shown, frame latency p50/p95/p99 (capture at the sender to display at the
receiver), longest freeze, received bit/s, PSNR-Y (--psnr). Run as root with
/usr/bin/python3. A benchmark: it prints figures and checks, it does not pass
or fail on them.
"""
import argparse
import sys

from ppslab import calllab, programs
from ppslab.errors import EXIT_USAGE, UsageError
from ppslab.version import add_version_option


def main(argv):
    if argv and argv[0] == "report":
        ap = argparse.ArgumentParser(prog=f"{calllab.PROGRAM} report")
        ap.add_argument("dir")
        a = ap.parse_args(argv[1:])
        sys.stdout.write(calllab.report(a.dir))
        return 0
    ap = argparse.ArgumentParser(prog=calllab.PROGRAM, description="A call through pps-relay: one pps-call per participant, each behind its own link.",
                                 epilog="Exit status: 0 done, 1 failed, 2 usage, 77 no root or /dev/net/tun, 130 interrupted.")
    add_version_option(ap, calllab.PROGRAM)
    ap.add_argument("--participants", type=int, default=2, help="how many (2..6; default 2: alice and bob)")
    ap.add_argument("--down", default="8", help="each participant's downlink, Mbit/s (or RATEkbit), 1 or N values (default 8)")
    ap.add_argument("--up", default="1,8", help="each participant's uplink, 1 or N values (default 1,8: alice's is asymmetric)")
    ap.add_argument("--delays", default="25ms", help="one-way delay of each participant's link (1 or N values; default 25ms)")
    ap.add_argument("--queue", default="auto", help="queue of each link in packets, or auto = 1 BDP (default auto)")
    ap.add_argument("--queue-bytes", help="queue of each link in bytes, or auto = 1 BDP of bytes whatever the packets' sizes "
                         "(default: as --queue, 1500 bytes a packet)")
    ap.add_argument("--duration", type=float, default=30, help="seconds of the call (default 30)")
    ap.add_argument("--pattern", default="smpte", help="every participant's source.pattern (default smpte)")
    ap.add_argument("--server-set", action="append", metavar="SECTION.KEY=VALUE", help="more publisher --set; repeatable")
    ap.add_argument("--client-set", action="append", metavar="SECTION.KEY=VALUE", help="more viewer --set (pps-call --client-set); repeatable")
    ap.add_argument("--psnr", action="store_true", help="score the pictures shown with pps-peer-score (PSNR-Y); every viewer then writes its pictures raw "
                         "(about 14 MB/s each), a load of its own on a small machine")
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", help="meson build directory (default: the one this script is in)")
    ap.add_argument("--lab-name")
    args = ap.parse_args(argv)
    if args.duration < 5:
        ap.error("--duration: at least 5 s")
    try:
        return calllab.run(programs.Build(args.build), args)
    except UsageError as error:
        calllab.log(str(error))
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
