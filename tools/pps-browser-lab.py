#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The browser viewer beside pps-client through the lab:
one pps-server in `snd`, pps-client and headless Chromium (the page the
server serves, over WebSocket) both in `rcv`, on one emulated link with
optional cubic cross traffic; prints both sides' frames shown, latency
p50/p95 and freezes, and writes DIR/browser-lab.json.

    build/tools/pps-browser-lab --flows 20 --duration 30 --out /tmp/blab

Link: 10 Mbit/s, 50 ms RTT, drop-tail of 1 BDP (the sweep's must-show cell).
Both viewers use their default playout policy (adaptive). The server checks
the MIN_BUF bound on the browser's socket independently (PPS_WEB_CHECK_BOUND)
and the result is printed. Chromium gets
--unsafely-treat-insecure-origin-as-secure for the lab address: WebCodecs
needs a secure context and the lab has no TLS. Needs root (pps-netlab);
exits 77 where the lab or Chromium is not available.
"""
import argparse
import os
import sys

from ppslab import browserlab, programs
from ppslab.errors import EXIT_SKIP, NotPermitted
from ppslab.version import add_version_option
from ppslab.wrappers import browser


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_version_option(ap, "pps-browser-lab")
    ap.add_argument("--build", help="meson build dir (default: the one this script is in)")
    ap.add_argument("--flows", type=int, default=20, help="cubic elephants (0 = idle)")
    ap.add_argument("--duration", type=float, default=30, help="seconds measured")
    ap.add_argument("--warmup", type=float, default=4, help="seconds of cross traffic first")
    ap.add_argument("--size", default="320x240", help="source WxH (default 320x240)")
    ap.add_argument("--pattern", default="smpte", help="source pattern")
    ap.add_argument("--out", help="output directory (required)")
    ap.add_argument("--name", default="weblab", help="lab name")
    args = ap.parse_args()
    if not args.out:
        ap.error("--out is required")
    if not browser.available():
        print("pps-browser-lab: chromium / chromedriver not installed", file=sys.stderr)
        return EXIT_SKIP
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    try:
        browserlab.run(programs.Build(args.build), args, out)
    except NotPermitted as e:
        print("pps-browser-lab: lab not permitted: %s" % e, file=sys.stderr)
        return EXIT_SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
