#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pps-server and pps-client through the network lab (suite netlab).

Exit 77 (skipped) without root or /dev/net/tun."""
import json
import os
import sys

from harness import SKIP, Failure, check  # tests/integration, on PYTHONPATH (meson's test environment)
from ppslab import programs
from ppslab.lab import Lab


def events(path, kind):
    with open(path) as f:
        return [e for e in map(json.loads, f) if e["type"] == kind]


def adapts_to_bottleneck(build, workdir):
    """2 Mbit/s, 50 ms RTT; a stream whose full stack needs about 3 Mbit/s:
    the base layer is always delivered, at least 90% of windows arrive within
    the tolerance, and the stream fits the link: either the progress regulator
    drops enhancement when it does not fit (base-only frames), or the rate
    allocator has sized the encoder's layers to the link (what was encoded
    stays near 2 Mbit/s rather than the ~3 Mbit/s the CRFs ask for). Either
    way, enhancement reaches most frames."""
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        print("skipped: needs root and /dev/net/tun")
        sys.exit(SKIP)
    build = programs.Build(build)
    log = os.path.join(workdir, "client.jsonl")
    with Lab(build.netlab, "it%d" % (os.getpid() % 10000),
             ["--rate", "2mbit", "--delay", "25ms", "--congestion", "cubic"],
             duration_s=180, skip_if_not_permitted=True) as lab:
        # Returns once the server wrote its port (--port-file): the event to wait for.
        server = programs.Server(build.server, lab.addr("snd"), workdir, lab=lab, port=7400, duration_s=40,
                                 stats_json=os.path.join(workdir, "server.json"), ready_timeout_s=30,
                                 sets={"source.pattern": "smpte", "encoder.base_crf": 22,
                                       "encoder.enhancement_crf": 18, "transport.congestion": "cubic",
                                       "pps.latency_budget_ms": 400})
        client = programs.Client(build.client, server.address, log, lab=lab, duration_s=25,
                                 sets={"playout.tolerance_ms": 600},
                                 stderr=os.path.join(workdir, "client.err"))
        rc = client.wait(60)
        check(rc == 0, "client exit %d: %s" % (rc, client.stderr))
        # The server's --stats-json is written at its exit (`down` stops it).
        server.stop(timeout_s=10)
    summary = events(log, "summary")[0]
    windows = events(log, "window")
    frames = [e for e in events(log, "frame") if e.get("reason") != "stopped"]
    # Skip the first seconds: TCP's slow start and the join to the first IDR.
    captured = [w["first_capture_us"] for w in windows if w["first_capture_us"]]
    start = min(captured) + 5_000_000 if captured else 0
    steady = [w for w in windows if w["first_capture_us"] >= start]
    within = [w for w in steady if w["status"] != "dropped" and w["latency_ms"] <= 600]
    pct = 100.0 * len(within) / max(1, len(steady))
    shown = [f for f in frames if f["shown"] and f["capture_us"] >= start]
    q = [f["quality_layers"] for f in shown]
    base_only = sum(1 for x in q if x == 1)
    full = sum(1 for x in q if x >= 2)
    dropped = [w for w in steady if w["status"] == "dropped"]
    reasons = {}
    for f in frames:
        if f["capture_us"] >= start and not f["shown"]:
            reasons[f["reason"]] = reasons.get(f["reason"], 0) + 1
    print("frames not shown:", reasons)
    with open(os.path.join(workdir, "server.json")) as f:
        report = json.load(f)
    srv = report["clients"][0]
    print("server: retransmitted %d packets, %d RTOs; windows %d/%d/%d complete/partial/dropped"
          % (srv["retrans_pkts"], srv["rto_events"], srv["windows_complete"],
             srv["windows_partial"], srv["windows_dropped"]))
    print("windows %d steady, %.1f%% within 600 ms, %d dropped; frames shown %d: "
          "%d base only, %d with enhancement; %.2f Mbit/s"
          % (len(steady), pct, len(dropped), len(shown), base_only, full,
             summary["received_bps"] / 1e6))
    check(len(steady) >= 200, "only %d windows" % len(steady))
    check(pct >= 90, "%.1f%% of windows within the tolerance" % pct)
    # Base always delivered: no window lost whole, every frame that was
    # captured in the steady state came out with at least its base.
    check(not dropped, "%d windows dropped" % len(dropped))
    check(len(shown) >= 0.9 * 2 * len(steady), "frames shown %d of about %d"
          % (len(shown), 2 * len(steady)))
    encoded_bps = 8.0 * sum(report["layer_bytes"]) / max(1.0, report["duration_s"])
    print("encoded %.2f Mbit/s over %.0f s (layers %s bytes)"
          % (encoded_bps / 1e6, report["duration_s"], report["layer_bytes"]))
    check(full >= 0.5 * len(shown),
          "enhancement reached only %d of %d shown frames" % (full, len(shown)))
    check(base_only > 0 or encoded_bps <= 1.15 * 2e6,
          "the stream did not fit the 2 Mbit/s link: no base-only frames and %.2f Mbit/s "
          "encoded" % (encoded_bps / 1e6))


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory(prefix="pps-lab-") as d:
        try:
            adapts_to_bottleneck(sys.argv[1], d)
        except Failure as e:
            print("FAIL: %s" % e)
            sys.exit(1)
    print("ok")
