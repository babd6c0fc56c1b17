# SPDX-License-Identifier: MIT
"""pps-browser-lab's run: the browser viewer beside pps-client through the
lab. One pps-server in `snd` (the browser wrapper's sender, with the
server's independent MIN_BUF check on the browser's socket,
PPS_WEB_CHECK_BOUND), pps-client (the ppstream wrapper's receiver) and
headless Chromium (the browser wrapper's receiver) both in `rcv`, on one
emulated link with optional cubic cross traffic; both sides' frames shown,
latency p50/p95 and freezes, and OUT/browser-lab.json."""
import json
import os
import subprocess
import time

from . import metrics, wrappers
from .lab import Lab

LAB_UP = ["--rate", "10mbit", "--delay", "25ms", "--aqm", "droptail", "--ecn", "off", "--congestion", "cubic",
          "--queue", "auto"]


def run(build, args, out):
    """The run and its table; the results as browser-lab.json holds them."""
    width, height = args.size.split("x")
    sets = {"source.width": width, "source.height": height, "source.pattern": args.pattern,
            "transport.congestion": "cubic", "server.max_clients_per_address": 16}
    browser = wrappers.get("browser")(build, out, sets=sets, server_extra_s=15,
                                      server_env={"PPS_WEB_CHECK_BOUND": "1"})
    client = wrappers.get("ppstream")(build, out)
    try:
        with Lab(build.netlab, args.name, LAB_UP, args.warmup + args.duration + 60) as lab:
            if args.flows:
                lab.traffic(args.warmup + args.duration + 20, elephants=args.flows,
                            stdout=os.path.join(out, "traffic.txt"), stderr=subprocess.STDOUT)
                time.sleep(args.warmup)  # the elephants fill the queue first: a schedule
            address = browser.start_sender(lab, args.duration)
            client.start_receiver(lab, address, args.duration)
            browser.start_receiver(lab, address, args.duration)
            client.wait(args.duration + 60)
            browser.wait(args.duration + 90)
            browser.server.exited(60)
    finally:
        client.stop()
        browser.stop()

    c = metrics.client_summary(os.path.join(out, "client.jsonl"))
    b = browser.results()["stats"]
    rows = [
        ("frames shown %", c["frames_shown_pct"], b["frames_shown_pct"]),
        ("latency p50 ms", c["frame_latency_p50_ms"], b["frame_latency_p50_ms"]),
        ("latency p95 ms", c["frame_latency_p95_ms"], b["frame_latency_p95_ms"]),
        ("frozen ms", c["frozen_total_ms"], b["frozen_ms"]),
        ("freezes", c["freezes"], b["freezes"]),
        ("frames total", c["frames_total"], b["frames_total"]),
    ]
    print("%d cubic flows, 10 Mbit/s, 50 ms, 1 BDP drop-tail, %gs, %s %s"
          % (args.flows, args.duration, args.pattern, args.size))
    print("%-16s %12s %12s" % ("", "pps-client", "browser"))
    for name, cv, bv in rows:
        print("%-16s %12.1f %12.1f" % (name, cv or 0, bv or 0))
    with open(os.path.join(out, "server.err")) as f:
        bound = [line.strip() for line in f if "MIN_BUF check" in line]
    print("browser socket: %s" % (bound[-1].split(": ", 2)[-1] if bound else "no MIN_BUF check"))
    result = {"flows": args.flows, "duration_s": args.duration, "size": args.size,
              "pattern": args.pattern, "pps_client": c, "browser": b,
              "minbuf_check": bound[-1] if bound else None}
    with open(os.path.join(out, "browser-lab.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result
